/* model.h - a decoder-only transformer in memory, written once against the
 * op set (ops/ops.h) and driven by the config: llama, mistral, qwen2, qwen3.
 *
 * Weights come from a GGUF file or an HF model directory (safetensors). On a
 * host backend they point into the mmapped files; on a device backend they
 * are uploaded once at load. Switch points for later architectures (gemma's
 * scaled embeddings and offset norms, MoE feed-forward) are marked
 * "ARCH SWITCH" in model.c and forward.c. */
#ifndef HEARTH_MODEL_H
#define HEARTH_MODEL_H

#include "engine/kv.h"
#include "io/model_config.h"
#include "ops/ops.h"

typedef struct hearth_gguf hearth_gguf;

typedef struct {
    hearth_weight wq, wk, wv, wo;        /* [n_heads*hd, dim], [n_kv*hd, dim] x2, [dim, n_heads*hd] */
    hearth_weight w_gate, w_up, w_down;  /* [ffn, dim], [ffn, dim], [dim, ffn] */
    const float *attn_norm, *ffn_norm;   /* [dim] */
    const float *q_norm, *k_norm;        /* [head_dim] (qwen3) or NULL */
    const float *bq, *bk, *bv;           /* [n_heads*hd], [n_kv*hd] x2 (qwen2) or NULL */
} hearth_layer_weights;

typedef struct hearth_model hearth_model;

/* Read only the config of a GGUF file or an HF directory (to size backend
 * scratch before loading). */
hearth_status hearth_model_peek_config(const char *path, hearth_model_config *cfg, hearth_err *err);

/* Load a model from a GGUF file or an HF model directory onto a backend.
 * max_tokens bounds the rows of one forward call (the prefill chunk / batch),
 * max_logit_rows the rows of it that ask for logits (0 = max_tokens; an
 * engine asks for one a sequence, so its slot count is enough: the logits
 * take rows x vocab x 4 bytes, 4.2 GB for 8192 rows of a 128k vocabulary).
 * Errors name the file and the tensor at fault. */
hearth_status hearth_model_load(hearth_model **out, const char *path, const hearth_ops *ops, void *ops_ctx,
                                int max_tokens, int max_logit_rows, hearth_err *err);
void hearth_model_free(hearth_model *m);

const hearth_model_config *hearth_model_config_get(const hearth_model *m);
/* The GGUF the model came from (for its tokenizer and template), or NULL. */
const hearth_gguf *hearth_model_gguf(const hearth_model *m);
/* Path as given at load. */
const char *hearth_model_path(const hearth_model *m);
/* Bytes of weights read per decoded token (for roofline reports). */
size_t hearth_model_weight_bytes(const hearth_model *m);
int hearth_model_kv_dim(const hearth_model *m);
/* SHA-256 fingerprint of the weights (32 bytes, owned by the model). */
const uint8_t *hearth_model_fingerprint(const hearth_model *m);
/* Most tokens one forward call takes (as given at load). */
int hearth_model_max_tokens(const hearth_model *m);
/* Most rows of one forward call that ask for logits. */
int hearth_model_max_logit_rows(const hearth_model *m);
/* 1 when the backend runs on a device (its memory is not host memory). */
int hearth_model_on_device(const hearth_model *m);

/* Run T tokens through the model. Token t is tokens[t] at position pos[t] of
 * the sequence in KV slot seq[t] (positions must be reserved in kv); tokens
 * NULL: the ids the last pick begun chose, row t's for token t. Computes
 * the logits of the rows listed in logit_rows (n_logit_rows of them) and
 * keeps them in backend memory for hearth_model_pick / _logits_row; with
 * logits non-NULL also copies them there, host [n_logit_rows][vocab].
 * T <= max_tokens. Engine thread. */
hearth_status hearth_model_forward(hearth_model *m, hearth_kv *kv, const int32_t *tokens, const int32_t *seq,
                                   const int32_t *pos, int T, const int32_t *logit_rows, int n_logit_rows,
                                   float *logits, hearth_err *err);
/* Start what the last forward issued on the device and return while it
 * runs (nothing on a host backend): the next pick or download waits for it.
 * The engine calls it to hand tokens out meanwhile. Engine thread. */
void hearth_model_submit(hearth_model *m);

/* The pick op (ops/ops.h) over the first n_rows logit rows of the last
 * forward: params and out are host arrays [n_rows]; a few bytes per row
 * cross to the host. */
hearth_status hearth_model_pick(hearth_model *m, int n_rows, const hearth_pick_params *params, hearth_pick *out,
                                hearth_err *err);
/* The same in two halves, so that the host reads one step's picks while the
 * device runs the next: _begin issues the pick, whose out is written by the
 * time the _end that ends it returns (each ends the oldest begun; at most
 * two begun). The ids picked stay on the backend too: a forward given no
 * tokens takes row t's from row t of the last pick begun. */
hearth_status hearth_model_pick_begin(hearth_model *m, int n_rows, const hearth_pick_params *params, hearth_pick *out,
                                      hearth_err *err);
void hearth_model_pick_end(hearth_model *m);
/* 1 when hearth_model_pick applies top_k / top_p (the backend's ops->pick_truncates). */
int hearth_model_pick_truncates(const hearth_model *m);
/* Logit row `row` of the last forward into out[vocab] (host). */
hearth_status hearth_model_logits_row(hearth_model *m, int row, float *out, hearth_err *err);
/* The final-normed hidden state of logit row `row` of the last forward (the
 * vector the output head multiplies: an embedding) into out[hidden_size]
 * (host). */
hearth_status hearth_model_hidden_row(hearth_model *m, int row, float *out, hearth_err *err);

/* ---- LoRA adapters (lora.c) ----
 * Load PEFT's adapter directory dir beside the model under name, before the
 * model serves, or between two forwards (the engine's hearth_engine_lora_load).
 * *id receives the adapter's id, 1.. in load order (names are labels here: the
 * caller keeps them apart). Errors name the file and the field or
 * tensor at fault; what hearth does not apply (DoRA, rank patterns, biases,
 * embedding / head adapters) is refused, not ignored. */
#define HEARTH_MAX_LORA 16
hearth_status hearth_model_add_lora(hearth_model *m, const char *name, const char *dir, int *id, hearth_err *err);
/* The same in two halves, so that the slow one runs beside forwards: stage
 * reads, checks and stacks the directory in host memory (it reads only the
 * model's shapes), add_staged takes the backend memory and uploads (between
 * forwards); it consumes s, as staged_free does. */
typedef struct hearth_lora_staged hearth_lora_staged;
hearth_status hearth_lora_stage(hearth_lora_staged **s, const hearth_model *m, const char *name, const char *dir,
                                hearth_err *err);
hearth_status hearth_model_add_staged(hearth_model *m, hearth_lora_staged *s, int *id, hearth_err *err);
void hearth_lora_staged_free(hearth_lora_staged *s, const hearth_model *m);
/* Unload adapter id: its memory is given back and its id is never given
 * again. Only between forwards, and only once no sequence runs with it (the
 * engine sees to both). Ids of the others do not change. */
hearth_status hearth_model_remove_lora(hearth_model *m, int id, hearth_err *err);
/* How many adapters are loaded, and their ids (up to cap), in slot order. */
int hearth_model_n_lora(const hearth_model *m);
int hearth_model_lora_ids(const hearth_model *m, int *ids, int cap);
/* By id: name, and the SHA-256 of its tensors and scale (the prefix cache
 * keys an adapter's blocks apart with it); NULL if no such id is loaded. */
const char *hearth_model_lora_name(const hearth_model *m, int id);
const uint8_t *hearth_model_lora_fingerprint(const hearth_model *m, int id);
/* The id of the adapter loaded under name, 0 if none. */
int hearth_model_lora_find(const hearth_model *m, const char *name);
/* The projections an adapter may adapt (PEFT's target_modules), in the order
 * of the stacks of model_internal.h: q, k, v; o; gate, up; down. */
enum { HEARTH_LORA_T_Q, HEARTH_LORA_T_K, HEARTH_LORA_T_V, HEARTH_LORA_T_O, HEARTH_LORA_T_GATE, HEARTH_LORA_T_UP,
       HEARTH_LORA_T_DOWN, HEARTH_LORA_TARGETS };
/* "self_attn.q_proj" .. "mlp.down_proj": a target's module path in a layer. */
const char *hearth_lora_module(int target);
/* A target's [out, in] in a model of config c. */
void hearth_lora_target_shape(const hearth_model_config *c, int target, int *out, int *in);
/* The row of target's B in an adapter file (HF order) that the model's output
 * row o takes: o itself but for a GGUF llama model's q and k, whose
 * converter permuted the rows for its rope pairing. */
int hearth_model_lora_file_row(const hearth_model *m, int target, int o);
/* An adapter directory's pairs as its file holds them (host F32, the file's
 * row order, unscaled), for training: a[l * HEARTH_LORA_TARGETS + t] [r][in],
 * b[...] [out][r], both NULL where the adapter leaves a target alone. The
 * same checks and refusals as hearth_model_add_lora. */
typedef struct {
    int r, rslora;
    float alpha, scale;
    float **a, **b; /* [n_layers * HEARTH_LORA_TARGETS] */
    int n;          /* their length */
} hearth_lora_pairs;
hearth_status hearth_lora_pairs_read(hearth_lora_pairs *p, const hearth_model *m, const char *dir, hearth_err *err);
void hearth_lora_pairs_free(hearth_lora_pairs *p);

/* ---- What training (train/) reads of a model (backend memory, as the ops take it) ---- */
/* The backend the model runs on, and (*ctx) its context. */
const hearth_ops *hearth_model_ops(const hearth_model *m, void **ctx);
const hearth_layer_weights *hearth_model_layer(const hearth_model *m, int l);
const hearth_weight *hearth_model_embedding(const hearth_model *m); /* [vocab, dim] */
const hearth_weight *hearth_model_head(const hearth_model *m);      /* [vocab, dim] */
const float *hearth_model_out_norm(const hearth_model *m);          /* [dim] */
const hearth_rope *hearth_model_rope(const hearth_model *m);

/* The adapter of each of the next forward's T rows (0: none; NULL: none for
 * any), applied to that row only. It holds for that one forward. */
hearth_status hearth_model_set_row_adapters(hearth_model *m, const int32_t *ids, int T, hearth_err *err);

#endif
