/* gguf_config.c - GGUF metadata (llama.cpp key names) -> hearth_model_config.
 *
 * Keys are "{arch}.<name>" with arch = general.architecture. Where llama.cpp
 * treats a key as required, so do we (EFORMAT naming the key and file);
 * optional keys take llama.cpp's defaults. Facts the metadata does not carry
 * (tied output, qkv bias, q/k norm) are read off the tensor list. */
#include "io/model_config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const known_archs[] = {"llama", "mistral", "qwen2", "qwen3"};

/* An integer key in [min, INT_MAX]. Absent: required -> EFORMAT, else def. */
static hearth_status key_int(const hearth_gguf *g, const char *key, int required, int def, int min, int *out,
                             hearth_err *err) {
    int64_t v;
    hearth_status st = hearth_gguf_get_int(g, key, &v, err);
    if (st == HEARTH_ENOENT) {
        if (required)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: required key %s missing", hearth_gguf_path(g), key);
        *out = def;
        return HEARTH_OK;
    }
    if (st) return st;
    if (v < min || v > INT_MAX)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: key %s = %lld out of range (must be >= %d)",
                              hearth_gguf_path(g), key, (long long)v, min);
    *out = (int)v;
    return HEARTH_OK;
}

static hearth_status key_float(const hearth_gguf *g, const char *key, int required, double def, double *out,
                               hearth_err *err) {
    hearth_status st = hearth_gguf_get_float(g, key, out, err);
    if (st == HEARTH_ENOENT) {
        if (required)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: required key %s missing", hearth_gguf_path(g), key);
        *out = def;
        return HEARTH_OK;
    }
    return st;
}

/* Append id to the eos list unless absent (-1) or already there. */
static void add_eos(hearth_model_config *cfg, int id) {
    if (id < 0 || cfg->n_eos == HEARTH_MAX_EOS) return;
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_token_ids[i] == id) return;
    cfg->eos_token_ids[cfg->n_eos++] = id;
}

hearth_status hearth_gguf_config_load(hearth_model_config *cfg, const hearth_gguf *g, hearth_err *err) {
    memset(cfg, 0, sizeof *cfg);
    const char *path = hearth_gguf_path(g);
    const char *arch;
    hearth_status st = hearth_gguf_get_str(g, "general.architecture", &arch, NULL, err);
    if (st == HEARTH_ENOENT)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: required key general.architecture missing", path);
    if (st) return st;
    int known = 0;
    for (size_t i = 0; i < sizeof known_archs / sizeof known_archs[0]; i++) known |= !strcmp(arch, known_archs[i]);
    if (!known)
        return hearth_err_set(err, HEARTH_ENOTSUP,
                              "%s: general.architecture %.64s is not supported (llama, mistral, qwen2, qwen3)", path,
                              arch);
    snprintf(cfg->arch, sizeof cfg->arch, "%s", arch);

    char k[160];
#define KEY(suffix) (snprintf(k, sizeof k, "%s." suffix, arch), k)
    double eps, theta;
    if ((st = key_int(g, KEY("block_count"), 1, 0, 1, &cfg->n_layers, err)) ||
        (st = key_int(g, KEY("embedding_length"), 1, 0, 1, &cfg->hidden_size, err)) ||
        (st = key_int(g, KEY("feed_forward_length"), 1, 0, 1, &cfg->intermediate_size, err)) ||
        (st = key_int(g, KEY("attention.head_count"), 1, 0, 1, &cfg->n_heads, err)) ||
        (st = key_int(g, KEY("attention.head_count_kv"), 0, cfg->n_heads, 1, &cfg->n_kv_heads, err)) ||
        (st = key_int(g, KEY("attention.key_length"), 0, 0, 1, &cfg->head_dim, err)) ||
        (st = key_int(g, KEY("context_length"), 1, 0, 1, &cfg->max_position_embeddings, err)) ||
        (st = key_float(g, KEY("attention.layer_norm_rms_epsilon"), 1, 0, &eps, err)) ||
        (st = key_float(g, KEY("rope.freq_base"), 0, 10000.0, &theta, err)) ||
        (st = key_int(g, KEY("attention.sliding_window"), 0, 0, 0, &cfg->sliding_window, err)) ||
        (st = key_int(g, KEY("rope.scaling.original_context_length"), 0, 0, 0, &cfg->rope_original_max_pos, err)))
        return st;
    cfg->rms_norm_eps = (float)eps;
    cfg->rope_theta = theta;
    if (!cfg->head_dim) {
        if (cfg->hidden_size % cfg->n_heads)
            return hearth_err_set(err, HEARTH_EFORMAT,
                                  "%s: embedding_length %d is not a multiple of head_count %d and key_length is unset",
                                  path, cfg->hidden_size, cfg->n_heads);
        cfg->head_dim = cfg->hidden_size / cfg->n_heads;
    }

    /* Rope scaling: rope.scaling.type (+ factor), or the older rope.scale_linear. */
    const char *stype = "none";
    st = hearth_gguf_get_str(g, KEY("rope.scaling.type"), &stype, NULL, err);
    if (st && st != HEARTH_ENOENT) return st;
    if (st == HEARTH_ENOENT) {
        double lin;
        if ((st = key_float(g, KEY("rope.scale_linear"), 0, 1.0, &lin, err))) return st;
        if (lin != 1.0) {
            cfg->rope_scaling = HEARTH_ROPE_LINEAR;
            cfg->rope_factor = lin;
        }
    } else if (!strcmp(stype, "linear")) {
        cfg->rope_scaling = HEARTH_ROPE_LINEAR;
        if ((st = key_float(g, KEY("rope.scaling.factor"), 1, 0, &cfg->rope_factor, err))) return st;
    } else if (strcmp(stype, "none") != 0) {
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: key %s: rope scaling %.32s is not supported (none, linear)",
                              path, k, stype);
    }

    /* Vocabulary: the tokenizer's token list, else the metadata, else the
     * embedding rows; when both a list and the embedding exist they must agree. */
    const hearth_gguf_tensor *emb = hearth_gguf_find_tensor(g, "token_embd.weight");
    hearth_gguf_type et;
    uint64_t n_tok;
    st = hearth_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL, err);
    if (st && st != HEARTH_ENOENT) return st;
    if (st == HEARTH_OK) {
        if (n_tok == 0 || n_tok > INT_MAX)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries", path,
                                  (unsigned long long)n_tok);
        cfg->vocab_size = (int)n_tok;
    } else if ((st = key_int(g, KEY("vocab_size"), 0, 0, 1, &cfg->vocab_size, err))) {
        return st;
    }
    if (emb && emb->n_dims >= 2) {
        if (!cfg->vocab_size && emb->ne[1] <= INT_MAX) cfg->vocab_size = (int)emb->ne[1];
        if (emb->ne[1] != cfg->vocab_size)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor token_embd.weight has %lld rows, vocab is %d", path,
                                  (long long)emb->ne[1], cfg->vocab_size);
    }
    if (!cfg->vocab_size)
        return hearth_err_set(err, HEARTH_EFORMAT,
                              "%s: no vocabulary size (no tokenizer.ggml.tokens, %s.vocab_size or token_embd.weight)",
                              path, arch);

    int id;
    if ((st = key_int(g, "tokenizer.ggml.bos_token_id", 0, -1, 0, &cfg->bos_token_id, err))) return st;
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    for (size_t i = 0; i < sizeof eos_keys / sizeof eos_keys[0]; i++) {
        if ((st = key_int(g, eos_keys[i], 0, -1, 0, &id, err))) return st;
        add_eos(cfg, id);
    }

    cfg->tie_word_embeddings = hearth_gguf_find_tensor(g, "output.weight") == NULL;
    cfg->attention_bias = hearth_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    cfg->qk_norm = !strcmp(arch, "qwen3") || hearth_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
    /* llama.cpp's converter permutes llama/mistral Q/K rows to adjacent-pair
     * rope; qwen2/qwen3 keep HF's half rotation ("neox"). */
    cfg->rope_neox = !strcmp(arch, "qwen2") || !strcmp(arch, "qwen3");
#undef KEY
    return hearth_model_config_check(cfg, path, err);
}
