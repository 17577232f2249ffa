/* model.c - load a decoder from GGUF or an HF directory onto a backend.
 *
 * Every tensor is looked up by its role, checked against the shape the config
 * implies, and either pointed at in the mmap (host backends) or uploaded.
 * A wrong shape, dtype or a missing tensor is an error naming the tensor. */
#include "model/model_internal.h"

#include "core/file.h"
#include "core/log.h"
#include "ops/cpu/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensor roles and their names in each source: [0] GGUF, [1] HF. */
enum { T_EMBD, T_OUT_NORM, T_OUTPUT, T_ROPE_FREQS, T_ATTN_NORM, T_Q, T_K, T_V, T_O, T_BQ, T_BK, T_BV, T_QNORM,
       T_KNORM, T_FFN_NORM, T_GATE, T_UP, T_DOWN, T_COUNT };
static const char *const NAMES[T_COUNT][2] = {
    [T_EMBD] = {"token_embd.weight", "model.embed_tokens.weight"},
    [T_OUT_NORM] = {"output_norm.weight", "model.norm.weight"},
    [T_OUTPUT] = {"output.weight", "lm_head.weight"},
    [T_ROPE_FREQS] = {"rope_freqs.weight", NULL},
    [T_ATTN_NORM] = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    [T_Q] = {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
    [T_K] = {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
    [T_V] = {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
    [T_O] = {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
    [T_BQ] = {"blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias"},
    [T_BK] = {"blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias"},
    [T_BV] = {"blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias"},
    [T_QNORM] = {"blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight"},
    [T_KNORM] = {"blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight"},
    [T_FFN_NORM] = {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    [T_GATE] = {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
    [T_UP] = {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
    [T_DOWN] = {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
};

/* A tensor as either source describes it, in matrix terms. */
typedef struct {
    char name[128];
    uint32_t type;
    int n_dims;
    int64_t rows, cols; /* 1-D: rows = 1, cols = n */
    const void *data;
    size_t nbytes;
} src_tensor;

static int src_find(const hearth_model *m, int role, int layer, src_tensor *t) {
    const char *fmt = NAMES[role][m->gguf ? 0 : 1];
    if (!fmt) return 0;
    snprintf(t->name, sizeof t->name, fmt, layer);
    if (m->gguf) {
        const hearth_gguf_tensor *g = hearth_gguf_find_tensor(m->gguf, t->name);
        if (!g) return 0;
        t->type = g->type;
        t->n_dims = g->n_dims;
        t->cols = g->ne[0];
        t->rows = g->n_dims >= 2 ? g->ne[1] : 1;
        if (g->n_dims > 2 && (g->ne[2] != 1 || g->ne[3] != 1)) t->rows = -1; /* shape error below */
        t->data = g->data;
        t->nbytes = g->nbytes;
    } else {
        const hearth_st_tensor *s = hearth_st_find(m->st, t->name);
        if (!s) return 0;
        t->type = s->type;
        t->n_dims = s->n_dims;
        t->rows = s->n_dims == 2 ? s->shape[0] : 1;
        t->cols = s->n_dims == 2 ? s->shape[1] : s->shape[0];
        if (s->n_dims > 2) t->rows = -1;
        t->data = s->data;
        t->nbytes = s->nbytes;
    }
    return 1;
}

/* Fingerprint a tensor cheaply: its header and 3 x 64 sampled bytes (DESIGN
 * §3: cheap at load, independent of the path). */
static void fingerprint_tensor(hearth_model *m, const src_tensor *t) {
    hearth_sha256_update(&m->fp, t->name, strlen(t->name));
    int64_t hdr[4] = {t->type, t->rows, t->cols, (int64_t)t->nbytes};
    hearth_sha256_update(&m->fp, hdr, sizeof hdr);
    size_t n = t->nbytes < 64 ? t->nbytes : 64;
    const uint8_t *d = t->data;
    hearth_sha256_update(&m->fp, d, n);
    hearth_sha256_update(&m->fp, d + t->nbytes / 2 - n / 2, n);
    hearth_sha256_update(&m->fp, d + t->nbytes - n, n);
}

/* Backend memory p becomes the model's (freed with the model); 0 when the
 * list cannot grow (p is then freed at once). */
static int own(hearth_model *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 64;
        void **n = realloc(m->owned, sizeof *n * (size_t)cap);
        if (!n) {
            m->ops->free(m->ops_ctx, p);
            return 0;
        }
        m->owned = n;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return 1;
}

void *hearth_model_alloc(hearth_model *m, size_t bytes) {
    void *p = m->ops->alloc(m->ops_ctx, bytes ? bytes : 1);
    return p && own(m, p) ? p : NULL;
}

void hearth_model_free_mem(hearth_model *m, void *p) {
    for (int i = m->n_owned - 1; p && i >= 0; i--)
        if (m->owned[i] == p) {
            m->ops->free(m->ops_ctx, p);
            m->owned[i] = m->owned[--m->n_owned];
            return;
        }
}

static hearth_status shape_error(const hearth_model *m, const src_tensor *t, int64_t rows, int64_t cols,
                                 hearth_err *err) {
    return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: shape [%lld,%lld], expected [%lld,%lld]", m->path,
                          t->name, (long long)t->rows, (long long)t->cols, (long long)rows, (long long)cols);
}

static hearth_status oom(const hearth_model *m, const char *what, size_t bytes, hearth_err *err) {
    if (m->upload_total)
        return hearth_err_set(err, HEARTH_ENOMEM,
                              "%s: out of %s memory for %s (%.1f MiB) after %.2f of the model's %.2f GiB of weights",
                              m->path, m->ops->name, what, bytes / 1048576.0, m->uploaded / 1073741824.0,
                              m->upload_total / 1073741824.0);
    return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of %s memory for %s (%.1f MiB)", m->path, m->ops->name,
                          what, bytes / 1048576.0);
}

/* Copy a tensor to the device, with a progress line every tenth of the model. */
static void upload(hearth_model *m, void *dst, const void *src, size_t bytes) {
    m->ops->upload(m->ops_ctx, dst, src, bytes);
    m->uploaded += bytes;
    int decile = m->upload_total ? (int)(10 * (double)m->uploaded / (double)m->upload_total) : 0;
    if (decile > m->upload_decile && m->upload_total > ((size_t)256 << 20)) {
        m->upload_decile = decile;
        hearth_log_info("%s: weights to %s: %d%% (%.2f of %.2f GiB)", m->path, m->ops->name,
                        decile > 10 ? 100 : 10 * decile, m->uploaded / 1073741824.0, m->upload_total / 1073741824.0);
    }
}

/* Bytes of every tensor in the model's files (what a device upload moves, near enough). */
static size_t tensor_bytes(const hearth_model *m) {
    size_t n = 0;
    if (m->gguf)
        for (int64_t i = 0; i < hearth_gguf_n_tensors(m->gguf); i++) n += hearth_gguf_tensor_at(m->gguf, i)->nbytes;
    if (m->st)
        for (int64_t i = 0; i < hearth_st_n_tensors(m->st); i++) n += hearth_st_tensor_at(m->st, i)->nbytes;
    return n;
}

/* Looks up a matrix weight of shape [rows, cols] (required unless optional)
 * and fills in w but its data; t->data NULL when an optional one is absent. */
static hearth_status find_matrix(hearth_model *m, int role, int layer, int64_t rows, int64_t cols, int optional,
                                 hearth_weight *w, src_tensor *t, hearth_err *err) {
    memset(w, 0, sizeof *w);
    t->data = NULL;
    if (!src_find(m, role, layer, t)) {
        if (optional) return HEARTH_OK;
        snprintf(t->name, sizeof t->name, NAMES[role][m->gguf ? 0 : 1], layer);
        return hearth_err_set(err, HEARTH_ENOENT, "%s: missing tensor %s", m->path, t->name);
    }
    if (t->rows != rows || t->cols != cols) return shape_error(m, t, rows, cols, err);
    const hearth_dtype_info *di = hearth_dtype_get(t->type);
    if (!di || t->type == HEARTH_DT_Q8_1 || t->type == HEARTH_DT_Q8_K)
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: tensor %s: weight type %u not supported", m->path, t->name,
                              t->type);
    w->type = (hearth_dtype)t->type;
    w->rows = (int)rows;
    w->cols = (int)cols;
    w->row_bytes = hearth_dtype_row_bytes(t->type, cols);
    if (w->row_bytes * (size_t)rows != t->nbytes)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: %zu bytes, expected %zu", m->path, t->name,
                              t->nbytes, w->row_bytes * (size_t)rows);
    m->weight_bytes += t->nbytes;
    fingerprint_tensor(m, t);
    return HEARTH_OK;
}

/* Points w at the tensor in the mmap (host backends; the backend may then
 * point it at a re-laid copy of its own, which the model owns), or uploads it
 * to dst (NULL: an allocation of its own) and has the backend prepare it. */
static hearth_status place_matrix(hearth_model *m, const src_tensor *t, hearth_weight *w, void *dst,
                                  hearth_err *err) {
    if (m->ops->host_memory) {
        w->data = t->data;
        hearth_status st = m->ops->prepare_weight ? m->ops->prepare_weight(m->ops_ctx, w, err) : HEARTH_OK;
        if (st != HEARTH_OK) return hearth_err_wrap(err, st, "%s: tensor %s", m->path, t->name);
        if (w->data != t->data) {
            if (!own(m, (void *)w->data)) return oom(m, t->name, t->nbytes, err);
            if (m->gguf) hearth_mmap_drop(t->data, t->nbytes); /* its mapped file pages are not read again */
        }
        return HEARTH_OK;
    }
    if (!dst && !(dst = hearth_model_alloc(m, t->nbytes))) return oom(m, t->name, t->nbytes, err);
    upload(m, dst, t->data, t->nbytes);
    w->data = dst;
    hearth_status st = m->ops->prepare_weight ? m->ops->prepare_weight(m->ops_ctx, w, err) : HEARTH_OK;
    if (st != HEARTH_OK) return hearth_err_wrap(err, st, "%s: tensor %s", m->path, t->name);
    return HEARTH_OK;
}

/* A matrix weight of shape [rows, cols]; required unless optional. */
static hearth_status load_matrix(hearth_model *m, int role, int layer, int64_t rows, int64_t cols, int optional,
                                 hearth_weight *w, hearth_err *err) {
    src_tensor t;
    hearth_status st = find_matrix(m, role, layer, rows, cols, optional, w, &t, err);
    if (st != HEARTH_OK || !t.data) return st;
    return place_matrix(m, &t, w, NULL, err);
}

/* A layer's q, k and v. On a device backend, where the three share a type,
 * one allocation holds their rows back to back (each from a 256-byte
 * boundary, which real shapes fill exactly), so that the backend may
 * multiply x by all three in one product (ops->prepare_set). */
static hearth_status load_qkv(hearth_model *m, int layer, int64_t qd, int64_t kvd, int64_t dim,
                              hearth_layer_weights *L, hearth_err *err) {
    hearth_weight *w[3] = {&L->wq, &L->wk, &L->wv};
    static const int roles[3] = {T_Q, T_K, T_V};
    const int64_t rows[3] = {qd, kvd, kvd};
    src_tensor t[3];
    size_t at[3], total = 0;
    hearth_status st;
    for (int i = 0; i < 3; i++) {
        if ((st = find_matrix(m, roles[i], layer, rows[i], dim, 0, w[i], &t[i], err))) return st;
        at[i] = total;
        total += (t[i].nbytes + 255) & ~(size_t)255;
    }
    const int device = !m->ops->host_memory;
    uint8_t *block = NULL;
    if (device && w[0]->type == w[1]->type && w[1]->type == w[2]->type && !(block = hearth_model_alloc(m, total)))
        return oom(m, t[0].name, total, err);
    for (int i = 0; i < 3; i++)
        if ((st = place_matrix(m, &t[i], w[i], block ? block + at[i] : NULL, err))) return st;
    if (!device || !m->ops->prepare_set) return HEARTH_OK;
    const hearth_weight set[3] = {L->wq, L->wk, L->wv};
    if ((st = m->ops->prepare_set(m->ops_ctx, set, 3, err)))
        return hearth_err_wrap(err, st, "%s: layer %d: q, k and v", m->path, layer);
    return HEARTH_OK;
}

/* A vector of n floats (norm weight or bias), converted to f32. */
static hearth_status load_vector(hearth_model *m, int role, int layer, int64_t n, int optional, const float **out,
                                 hearth_err *err) {
    src_tensor t;
    *out = NULL;
    if (!src_find(m, role, layer, &t)) {
        if (optional) return HEARTH_OK;
        snprintf(t.name, sizeof t.name, NAMES[role][m->gguf ? 0 : 1], layer);
        return hearth_err_set(err, HEARTH_ENOENT, "%s: missing tensor %s", m->path, t.name);
    }
    if (t.rows != 1 || t.cols != n) return shape_error(m, &t, 1, n, err);
    if (t.type != HEARTH_DT_F32 && t.type != HEARTH_DT_F16 && t.type != HEARTH_DT_BF16)
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: tensor %s: type %u, expected a float type", m->path, t.name,
                              t.type);
    if (hearth_dtype_row_bytes(t.type, n) != t.nbytes)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: wrong byte size", m->path, t.name);
    m->weight_bytes += t.nbytes;
    fingerprint_tensor(m, &t);
    if (t.type == HEARTH_DT_F32 && m->ops->host_memory) {
        *out = t.data;
        return HEARTH_OK;
    }
    float *tmp = malloc(sizeof(float) * (size_t)n);
    if (!tmp) return oom(m, t.name, sizeof(float) * (size_t)n, err);
    hearth_cpu_dequantize_row((hearth_dtype)t.type, t.data, tmp, n);
    float *d = hearth_model_alloc(m, sizeof(float) * (size_t)n);
    if (d) m->ops->upload(m->ops_ctx, d, tmp, sizeof(float) * (size_t)n);
    free(tmp);
    if (!d) return oom(m, t.name, sizeof(float) * (size_t)n, err);
    *out = d;
    return HEARTH_OK;
}

/* Rotary frequencies with the config's scaling rule, computed in float as
 * transformers does (so f32 parity holds), then adjusted per rule. */
static hearth_status load_rope(hearth_model *m, hearth_err *err) {
    const hearth_model_config *c = &m->cfg;
    int half = c->head_dim / 2;
    float *f = malloc(sizeof(float) * (size_t)half);
    if (!f) return oom(m, "rope frequencies", sizeof(float) * (size_t)half, err);
    for (int i = 0; i < half; i++) {
        float expo = (float)(2 * i) / (float)c->head_dim;
        f[i] = 1.0f / powf((float)c->rope_theta, expo);
    }
    src_tensor t;
    if (m->gguf && src_find(m, T_ROPE_FREQS, 0, &t)) {
        /* llama.cpp stores llama3 scaling as per-pair divisors */
        if (t.type != HEARTH_DT_F32 || t.cols != half) {
            free(f);
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor rope_freqs.weight: expected f32 [%d]", m->path,
                                  half);
        }
        const float *div = t.data;
        for (int i = 0; i < half; i++) f[i] /= div[i];
    } else if (c->rope_scaling == HEARTH_ROPE_LINEAR) {
        for (int i = 0; i < half; i++) f[i] /= (float)c->rope_factor;
    } else if (c->rope_scaling == HEARTH_ROPE_LLAMA3) {
        float factor = (float)c->rope_factor, lo = (float)c->rope_low_freq_factor,
              hi = (float)c->rope_high_freq_factor, old = (float)c->rope_original_max_pos;
        float lo_wavelen = old / lo, hi_wavelen = old / hi;
        for (int i = 0; i < half; i++) {
            float wavelen = 2.0f * (float)M_PI / f[i];
            float scaled = wavelen > lo_wavelen ? f[i] / factor : f[i];
            if (!(wavelen < hi_wavelen) && !(wavelen > lo_wavelen)) {
                float smooth = (old / wavelen - lo) / (hi - lo);
                scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
            }
            f[i] = scaled;
        }
    }
    float *d = hearth_model_alloc(m, sizeof(float) * (size_t)half);
    if (d) m->ops->upload(m->ops_ctx, d, f, sizeof(float) * (size_t)half);
    free(f);
    if (!d) return oom(m, "rope frequencies", sizeof(float) * (size_t)half, err);
    m->rope = (hearth_rope){d, c->head_dim, c->rope_neox};
    return HEARTH_OK;
}

static hearth_status alloc_activations(hearth_model *m, hearth_err *err) {
    const hearth_model_config *c = &m->cfg;
    size_t T = (size_t)m->max_tokens, L = (size_t)m->max_logit_rows, qd = (size_t)c->n_heads * c->head_dim,
           kvd = (size_t)c->n_kv_heads * c->head_dim, dim = (size_t)c->hidden_size;
    size_t wide = dim > qd ? dim : qd;
    struct { void **p; size_t bytes; } bufs[] = {
        {(void **)&m->x, T * dim * 4},        {(void **)&m->xb, T * wide * 4},
        {(void **)&m->q, T * qd * 4},         {(void **)&m->k, T * kvd * 4},
        {(void **)&m->v, T * kvd * 4},        {(void **)&m->att, T * qd * 4},
        {(void **)&m->hb, T * (size_t)c->intermediate_size * 4},
        {(void **)&m->hb2, T * (size_t)c->intermediate_size * 4},
        {(void **)&m->logits, L * (size_t)c->vocab_size * 4},
        {(void **)&m->d_rows, 3 * T * 4},
        {(void **)&m->d_pick_params, L * sizeof(hearth_pick_params)},
        {(void **)&m->d_picks, L * sizeof(hearth_pick)},
        {(void **)&m->d_next, L * sizeof(int32_t)},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        *bufs[i].p = hearth_model_alloc(m, bufs[i].bytes);
        if (!*bufs[i].p) return oom(m, "activations", bufs[i].bytes, err);
    }
    m->h_rows = malloc(3 * T * sizeof *m->h_rows);
    m->h_pick_params = malloc(L * sizeof *m->h_pick_params);
    if (!m->h_rows || !m->h_pick_params)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of host memory for the row inputs", m->path);
    return HEARTH_OK;
}

static hearth_status check_config(const hearth_model *m, hearth_err *err) {
    const hearth_model_config *c = &m->cfg;
    /* ARCH SWITCH: gemma (embedding scale, 1+w norms, gelu) and MoE configs
     * are refused here until their paths exist in forward.c. */
    if (strcmp(c->arch, "llama") && strcmp(c->arch, "mistral") && strcmp(c->arch, "qwen2") &&
        strcmp(c->arch, "qwen3"))
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: architecture '%s' is not supported yet", m->path, c->arch);
    if (c->hidden_size <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 || c->head_dim <= 0 ||
        c->vocab_size <= 0 || c->intermediate_size <= 0 || c->n_heads % c->n_kv_heads || c->head_dim % 2)
        return hearth_err_set(err, HEARTH_EFORMAT,
                              "%s: inconsistent config (hidden %d, layers %d, heads %d/%d, head_dim %d, vocab %d)",
                              m->path, c->hidden_size, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                              c->vocab_size);
    return HEARTH_OK;
}

hearth_status hearth_model_peek_config(const char *path, hearth_model_config *cfg, hearth_err *err) {
    if (hearth_path_is_dir(path)) return hearth_hf_config_load(cfg, path, err);
    hearth_gguf *g;
    hearth_status st = hearth_gguf_open(&g, path, err);
    if (st != HEARTH_OK) return st;
    st = hearth_gguf_config_load(cfg, g, err);
    hearth_gguf_close(g);
    return st;
}

/* m->dec: the layers for ops->decode_layers, where they are forward.c's plain layer. */
static hearth_status decoder_ref(hearth_model *m, hearth_err *err) {
    const hearth_model_config *c = &m->cfg;
    if (!m->ops->decode_layers || c->attention_bias || c->qk_norm) return HEARTH_OK;
    if (!(m->dec_layers = calloc((size_t)c->n_layers, sizeof *m->dec_layers)))
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    for (int l = 0; l < c->n_layers; l++) {
        const hearth_layer_weights *L = &m->layers[l];
        m->dec_layers[l] = (hearth_layer_ref){&L->wq,   &L->wk,     &L->wv,       &L->wo,      &L->w_gate,
                                              &L->w_up, &L->w_down, L->attn_norm, L->ffn_norm};
    }
    m->dec = (hearth_decoder_ref){m->dec_layers, c->n_layers, c->hidden_size, c->n_heads, c->n_kv_heads,
                                  c->head_dim, c->intermediate_size, c->rms_norm_eps, &m->rope};
    return HEARTH_OK;
}

hearth_status hearth_model_load(hearth_model **out, const char *path, const hearth_ops *ops, void *ops_ctx,
                                int max_tokens, int max_logit_rows, hearth_err *err) {
    *out = NULL;
    hearth_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    }
    m->ops = ops;
    m->ops_ctx = ops_ctx;
    m->max_tokens = max_tokens;
    m->max_logit_rows = max_logit_rows > 0 && max_logit_rows < max_tokens ? max_logit_rows : max_tokens;
    hearth_status st;
    if (hearth_path_is_dir(path)) {
        if ((st = hearth_hf_config_load(&m->cfg, path, err)) != HEARTH_OK) goto fail;
        if ((st = hearth_st_open_dir(&m->st, path, err)) != HEARTH_OK) goto fail;
    } else {
        if ((st = hearth_gguf_open(&m->gguf, path, err)) != HEARTH_OK) goto fail;
        if ((st = hearth_gguf_config_load(&m->cfg, m->gguf, err)) != HEARTH_OK) goto fail;
    }
    if ((st = check_config(m, err)) != HEARTH_OK) goto fail;
    if (!ops->host_memory) m->upload_total = tensor_bytes(m);
    const hearth_model_config *c = &m->cfg;
    hearth_sha256_init(&m->fp);
    hearth_sha256_update(&m->fp, c, sizeof *c);
    int64_t dim = c->hidden_size, qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim,
            ffn = c->intermediate_size;
    if ((st = load_matrix(m, T_EMBD, 0, c->vocab_size, dim, 0, &m->tok_embd, err))) goto fail;
    if ((st = load_vector(m, T_OUT_NORM, 0, dim, 0, &m->out_norm, err))) goto fail;
    if ((st = load_matrix(m, T_OUTPUT, 0, c->vocab_size, dim, 1, &m->output, err))) goto fail;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) {
        st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        goto fail;
    }
    for (int l = 0; l < c->n_layers; l++) {
        hearth_layer_weights *L = &m->layers[l];
        if ((st = load_vector(m, T_ATTN_NORM, l, dim, 0, &L->attn_norm, err))) goto fail;
        if ((st = load_qkv(m, l, qd, kvd, dim, L, err))) goto fail;
        if ((st = load_matrix(m, T_O, l, dim, qd, 0, &L->wo, err))) goto fail;
        int bias = c->attention_bias;
        if ((st = load_vector(m, T_BQ, l, qd, !bias, &L->bq, err))) goto fail;
        if ((st = load_vector(m, T_BK, l, kvd, !bias, &L->bk, err))) goto fail;
        if ((st = load_vector(m, T_BV, l, kvd, !bias, &L->bv, err))) goto fail;
        if ((st = load_vector(m, T_QNORM, l, c->head_dim, !c->qk_norm, &L->q_norm, err))) goto fail;
        if ((st = load_vector(m, T_KNORM, l, c->head_dim, !c->qk_norm, &L->k_norm, err))) goto fail;
        if ((st = load_vector(m, T_FFN_NORM, l, dim, 0, &L->ffn_norm, err))) goto fail;
        /* ARCH SWITCH: MoE layers carry a router and expert tensors here. */
        if ((st = load_matrix(m, T_GATE, l, ffn, dim, 0, &L->w_gate, err))) goto fail;
        if ((st = load_matrix(m, T_UP, l, ffn, dim, 0, &L->w_up, err))) goto fail;
        if ((st = load_matrix(m, T_DOWN, l, dim, ffn, 0, &L->w_down, err))) goto fail;
    }
    hearth_sha256_final(&m->fp, m->fingerprint);
    if ((st = load_rope(m, err))) goto fail;
    if ((st = alloc_activations(m, err))) goto fail;
    if ((st = decoder_ref(m, err))) goto fail;
    *out = m;
    return HEARTH_OK;
fail:
    hearth_model_free(m);
    return st;
}

void hearth_model_free(hearth_model *m) {
    if (!m) return;
    hearth_model_lora_free_all(m);
    for (int i = 0; i < m->n_owned; i++) m->ops->free(m->ops_ctx, m->owned[i]);
    free(m->owned);
    free(m->h_rows);
    free(m->h_pick_params);
    free(m->layers);
    free(m->dec_layers);
    if (m->gguf) hearth_gguf_close(m->gguf);
    if (m->st) hearth_st_close(m->st);
    free(m->path);
    free(m);
}

const hearth_model_config *hearth_model_config_get(const hearth_model *m) { return &m->cfg; }
const hearth_gguf *hearth_model_gguf(const hearth_model *m) { return m->gguf; }
const char *hearth_model_path(const hearth_model *m) { return m->path; }
size_t hearth_model_weight_bytes(const hearth_model *m) { return m->weight_bytes; }
const hearth_layer_weights *hearth_model_layer(const hearth_model *m, int l) {
    return l >= 0 && l < m->cfg.n_layers ? &m->layers[l] : NULL;
}
const hearth_weight *hearth_model_embedding(const hearth_model *m) { return &m->tok_embd; }
const hearth_weight *hearth_model_head(const hearth_model *m) { return &m->output; }
const float *hearth_model_out_norm(const hearth_model *m) { return m->out_norm; }
const hearth_rope *hearth_model_rope(const hearth_model *m) { return &m->rope; }
int hearth_model_kv_dim(const hearth_model *m) { return m->cfg.n_kv_heads * m->cfg.head_dim; }
int hearth_model_max_tokens(const hearth_model *m) { return m->max_tokens; }
int hearth_model_max_logit_rows(const hearth_model *m) { return m->max_logit_rows; }
int hearth_model_on_device(const hearth_model *m) { return !m->ops->host_memory; }
const hearth_ops *hearth_model_ops(const hearth_model *m, void **ctx) {
    *ctx = m->ops_ctx;
    return m->ops;
}
void hearth_model_submit(hearth_model *m) {
    if (m->ops->submit) m->ops->submit(m->ops_ctx);
}
const uint8_t *hearth_model_fingerprint(const hearth_model *m) { return m->fingerprint; }
