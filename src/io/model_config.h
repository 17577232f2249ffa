/* model_config.h - the decoder's hyper-parameters, read from either a Hugging
 * Face model dir (config.json, generation_config.json) or GGUF metadata.
 *
 * Both readers fill the same hearth_model_config and run the same consistency
 * check (hearth_model_config_check), so the model code never needs to know
 * which source a config came from, except for rope_neox (see below).
 * Supported architectures: llama, mistral, qwen2, qwen3.
 *
 * All functions fill caller-owned structs and keep no pointers into their
 * inputs; any thread may call them. */
#ifndef HEARTH_IO_MODEL_CONFIG_H
#define HEARTH_IO_MODEL_CONFIG_H

#include "core/status.h"
#include "io/gguf.h"

typedef enum { HEARTH_ROPE_DEFAULT = 0, HEARTH_ROPE_LINEAR, HEARTH_ROPE_LLAMA3 } hearth_rope_scaling;

#define HEARTH_MAX_EOS 8

typedef struct hearth_model_config {
    char arch[32]; /* "llama", "mistral", "qwen2", "qwen3" (HF model_type / GGUF general.architecture) */
    int vocab_size, hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads, head_dim;
    int max_position_embeddings; /* GGUF: {arch}.context_length */
    float rms_norm_eps;
    double rope_theta;
    hearth_rope_scaling rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* linear: factor; llama3: all */
    int rope_original_max_pos;     /* llama3 original_max_position_embeddings (0 if unset) */
    int tie_word_embeddings;       /* GGUF: 1 when output.weight is absent */
    int sliding_window;            /* 0 = none (mistral/qwen2 may set it; qwen2/3 only if use_sliding_window) */
    int attention_bias;            /* qkv bias (qwen2: always) */
    int qk_norm;                   /* qwen3: per-head RMSNorm on q and k */
    int bos_token_id;              /* -1 if unknown */
    int eos_token_ids[HEARTH_MAX_EOS];
    int n_eos;
    char torch_dtype[16];          /* "float32", "bfloat16", ... ("" for GGUF) */
    /* Rotary pairing: 1 = "neox" (rotate dims i and i + head_dim/2), as in HF
     * checkpoints and GGUF qwen2/qwen3; 0 = "normal" (adjacent pairs 2i,
     * 2i+1), as in GGUF llama/mistral, whose converter permuted Q/K rows. */
    int rope_neox;
} hearth_model_config;

/* config.json of an HF dir. Both transformers 4 (rope_theta, rope_scaling
 * {rope_type|type, factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings}) and transformers 5 (rope_parameters
 * {rope_theta, rope_type, ...}) forms; dtype from torch_dtype or dtype.
 * Required: model_type, vocab_size, hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads. Defaults otherwise follow the
 * transformers config classes: head_dim = hidden/n_heads (qwen3: 128),
 * n_kv_heads = n_heads, eos_token_id int or list. Unknown model_type or
 * rope type -> HEARTH_ENOTSUP naming it; a missing or mistyped field ->
 * HEARTH_EFORMAT naming the field and file; no config.json -> HEARTH_ENOENT. */
hearth_status hearth_hf_config_load(hearth_model_config *cfg, const char *dir, hearth_err *err);

/* From GGUF metadata: {arch}.block_count, .embedding_length,
 * .feed_forward_length, .attention.head_count, .attention.layer_norm_rms_epsilon,
 * .context_length (required); .attention.head_count_kv, .attention.key_length,
 * .rope.freq_base, .rope.scaling.type/factor/original_context_length,
 * .attention.sliding_window (optional); tokenizer.ggml.bos_token_id and
 * eos_token_id (+ eot/eom ids when present and different); vocab from the
 * tokenizer.ggml.tokens length, else {arch}.vocab_size, else token_embd.weight.
 * Tensor presence decides tie_word_embeddings (no output.weight),
 * attention_bias (blk.0.attn_q.bias) and qk_norm (blk.0.attn_q_norm.weight).
 * Note: llama.cpp stores llama3 rope scaling as a rope_freqs.weight tensor of
 * per-dimension factors, not as metadata; rope_scaling stays DEFAULT then and
 * the model must apply that tensor. */
hearth_status hearth_gguf_config_load(hearth_model_config *cfg, const hearth_gguf *g, hearth_err *err);

/* Consistency of a filled config (positive sizes, n_heads a multiple of
 * n_kv_heads, eps/theta > 0, rope parameters present for the scaling type).
 * `source` names the file in the message. Both loaders call it. */
hearth_status hearth_model_config_check(const hearth_model_config *cfg, const char *source, hearth_err *err);

/* generation_config.json: each field has a has_ flag; a missing file is OK
 * (all unset, n_eos 0). null values count as unset. do_sample is reported as
 * is (HF: false means greedy whatever the temperature); the resolver decides. */
typedef struct {
    int has_temperature, has_top_p, has_top_k, has_min_p, has_repetition_penalty, has_max_new_tokens;
    float temperature, top_p, min_p, repetition_penalty;
    int top_k, max_new_tokens;
    int eos_token_ids[HEARTH_MAX_EOS];
    int n_eos;
    int has_do_sample, do_sample;
    int bos_token_id; /* -1 if unset */
} hearth_gen_defaults;
hearth_status hearth_hf_gen_config_load(hearth_gen_defaults *g, const char *dir, hearth_err *err);

#endif
