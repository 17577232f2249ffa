/* forward.c - the decoder, written once against the op set.
 *
 * One call runs T tokens, each of its own sequence and position, so prefill
 * (T tokens of one sequence) and batched decode (one token of T sequences)
 * are the same code. Nothing here allocates or synchronises with the host,
 * but the final download of the requested logits. */
#include "model/model_internal.h"

#include <math.h>
#include <string.h>

/* The matmuls of one input: one call where the backend takes them together. */
static void matmuls(const hearth_ops *o, void *ctx, float *const *y, const float *x, int T,
                    const hearth_weight *const *w, int n) {
    if (o->matmul_n) {
        o->matmul_n(ctx, y, x, T, w, n);
        return;
    }
    for (int i = 0; i < n; i++) o->matmul(ctx, y[i], x, T, w[i]);
}

hearth_status hearth_model_set_row_adapters(hearth_model *m, const int32_t *ids, int T, hearth_err *err) {
    m->lora_rows_set = 0;
    if (!ids) return HEARTH_OK;
    if (T < 1 || T > m->max_tokens) return hearth_err_set(err, HEARTH_EINVAL, "adapters: %d rows", T);
    int any = 0;
    for (int t = 0; t < T; t++) {
        if (ids[t] < 0 || (ids[t] && !hearth_model_lora_get(m, ids[t])))
            return hearth_err_set(err, HEARTH_EINVAL, "adapter id %d: no such adapter is loaded", ids[t]);
        any |= ids[t];
    }
    if (!any) return HEARTH_OK;
    memcpy(m->h_lora, ids, sizeof(int32_t) * (size_t)T);
    m->lora_rows_set = T;
    return HEARTH_OK;
}

/* The adapters of one forward: which are used, and whether by every row. */
typedef struct {
    int used[HEARTH_MAX_LORA], n_used;
    int uniform; /* every row has the one adapter used[0]: no per-row mask */
} lora_step;

static void lora_plan(hearth_model *m, int T, lora_step *ls) {
    ls->n_used = 0;
    ls->uniform = 1;
    if (m->lora_rows_set != T) return;
    for (int t = 0; t < T; t++) {
        int a = m->h_lora[t], seen = 0;
        if (a != m->h_lora[0]) ls->uniform = 0;
        for (int i = 0; i < ls->n_used && !seen; i++) seen = ls->used[i] == a;
        if (a && !seen) ls->used[ls->n_used++] = a;
    }
    if (!ls->uniform) m->ops->upload(m->ops_ctx, m->lora_ids, m->h_lora, sizeof(int32_t) * (size_t)T);
}

/* Group g of layer l (model_internal.h) of every adapter the step uses:
 * y[i] += B_i (A_i x) for their rows. A mixed batch computes every row for
 * each adapter and keeps only its rows' sums. */
static void lora_apply(hearth_model *m, const lora_step *ls, int l, int g, float *const *y, const float *x, int T) {
    for (int i = 0; i < ls->n_used; i++) {
        const hearth_lora *a = hearth_model_lora_get(m, ls->used[i]);
        const hearth_lora_group *G = &a->groups[(size_t)l * HEARTH_LORA_GROUPS + g];
        if (G->a)
            m->ops->lora(m->ops_ctx, y, x, T, G->in, G->a, G->b, a->rank, G->out, G->n,
                         ls->uniform ? NULL : m->lora_ids, ls->used[i], m->lora_tmp);
    }
}

hearth_status hearth_model_forward(hearth_model *m, hearth_kv *kv, const int32_t *tokens, const int32_t *seq,
                                   const int32_t *pos, int T, const int32_t *logit_rows, int n_logit_rows,
                                   float *logits, hearth_err *err) {
    const hearth_model_config *c = &m->cfg;
    const hearth_ops *o = m->ops;
    void *ctx = m->ops_ctx;
    lora_step ls; /* the adapters set for this forward, taken now whatever it returns */
    lora_plan(m, T, &ls);
    m->lora_rows_set = 0;
    if (T <= 0 || T > m->max_tokens || n_logit_rows < 0 || n_logit_rows > T || n_logit_rows > m->max_logit_rows)
        return hearth_err_set(err, HEARTH_EINVAL, "forward: %d tokens (max %d), %d logit rows (max %d)", T,
                              m->max_tokens, n_logit_rows, m->max_logit_rows);
    if (!tokens && T > m->n_next)
        return hearth_err_set(err, HEARTH_EINVAL, "forward: %d tokens from the last pick, which chose %d", T, m->n_next);
    for (int t = 0; t < T; t++) {
        if (tokens && (tokens[t] < 0 || tokens[t] >= c->vocab_size))
            return hearth_err_set(err, HEARTH_ERANGE, "token id %d out of range [0, %d)", tokens[t], c->vocab_size);
        if (pos[t] < 0 || pos[t] >= hearth_kv_max_ctx(kv))
            return hearth_err_set(err, HEARTH_ERANGE, "position %d outside the context (%d)", pos[t],
                                  hearth_kv_max_ctx(kv));
    }
    const int dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int qd = nh * hd, kvd = nkv * hd, ffn = c->intermediate_size;
    const float scale = 1.0f / sqrtf((float)hd);
    hearth_kv_view vw = *hearth_kv_view_get(kv);
    vw.one_seq = 1;
    vw.ctx_len = 0;
    for (int t = 0; t < T; t++) {
        if (seq[t] != seq[0]) vw.one_seq = 0;
        if (pos[t] + 1 > vw.ctx_len) vw.ctx_len = pos[t] + 1;
    }
    const hearth_kv_view *view = &vw;
    /* A window wider than every position of the step drops nothing (a query
     * at p sees p - window + 1 .. p): pass none, so the kernels that take no
     * window (the Hopper prefill attention) serve Mistral-style models until
     * the context outgrows it. */
    const int window = c->sliding_window > 0 && vw.ctx_len > c->sliding_window ? c->sliding_window : 0;

    /* The rows' ids, sequences and positions in one upload (on a device,
     * each upload is a copy the step waits on); no ids where the last pick
     * left them on the backend (row t's token: its row t). */
    const int32_t *d_tokens = tokens ? m->d_rows : m->d_next;
    int32_t *d_seq = m->d_rows + T, *d_pos = m->d_rows + 2 * (size_t)T;
    if (tokens) memcpy(m->h_rows, tokens, sizeof(int32_t) * (size_t)T);
    memcpy(m->h_rows + T, seq, sizeof(int32_t) * (size_t)T);
    memcpy(m->h_rows + 2 * (size_t)T, pos, sizeof(int32_t) * (size_t)T);
    const size_t skip = tokens ? 0 : (size_t)T;
    o->upload(ctx, m->d_rows + skip, m->h_rows + skip, sizeof(int32_t) * (3 * (size_t)T - skip));

    /* ARCH SWITCH: gemma scales the embedding by sqrt(dim). */
    o->embed(ctx, m->x, &m->tok_embd, d_tokens, T);
    /* One token of a plain decoder: the backend may run every layer as one launch. */
    const int one_launch = T == 1 && !ls.n_used && !window && m->dec.layers &&
                           o->decode_layers(ctx, m->x, &m->dec, view, d_seq, d_pos);
    for (int l = 0; l < c->n_layers && !one_launch; l++) {
        const hearth_layer_weights *L = &m->layers[l];
        o->rmsnorm(ctx, m->xb, m->x, L->attn_norm, T, dim, c->rms_norm_eps);
        matmuls(o, ctx, (float *const[]){m->q, m->k, m->v}, m->xb, T,
                (const hearth_weight *const[]){&L->wq, &L->wk, &L->wv}, 3);
        if (ls.n_used) lora_apply(m, &ls, l, HEARTH_LORA_QKV, (float *const[]){m->q, m->k, m->v}, m->xb, T);
        if (L->bq) {
            o->add_bias(ctx, m->q, L->bq, T, qd);
            o->add_bias(ctx, m->k, L->bk, T, kvd);
            o->add_bias(ctx, m->v, L->bv, T, kvd);
        }
        if (L->q_norm) {
            o->rmsnorm(ctx, m->q, m->q, L->q_norm, T * nh, hd, c->rms_norm_eps);
            o->rmsnorm(ctx, m->k, m->k, L->k_norm, T * nkv, hd, c->rms_norm_eps);
        }
        o->rope(ctx, m->q, T, nh, hd, d_pos, &m->rope);
        o->rope(ctx, m->k, T, nkv, hd, d_pos, &m->rope);
        o->kv_write(ctx, view, l, m->k, m->v, T, d_seq, d_pos);
        o->attention(ctx, m->att, m->q, T, view, l, d_seq, d_pos, nh, nkv, hd, scale, window);
        o->matmul(ctx, m->xb, m->att, T, &L->wo);
        if (ls.n_used) lora_apply(m, &ls, l, HEARTH_LORA_O, (float *const[]){m->xb}, m->att, T);
        o->add(ctx, m->x, m->xb, (size_t)T * dim);
        o->rmsnorm(ctx, m->xb, m->x, L->ffn_norm, T, dim, c->rms_norm_eps);
        /* ARCH SWITCH: MoE routes each row to its experts here. */
        matmuls(o, ctx, (float *const[]){m->hb, m->hb2}, m->xb, T, (const hearth_weight *const[]){&L->w_gate, &L->w_up},
                2);
        if (ls.n_used) lora_apply(m, &ls, l, HEARTH_LORA_GATE_UP, (float *const[]){m->hb, m->hb2}, m->xb, T);
        o->swiglu(ctx, m->hb, m->hb, m->hb2, T, ffn);
        o->matmul(ctx, m->xb, m->hb, T, &L->w_down);
        if (ls.n_used) lora_apply(m, &ls, l, HEARTH_LORA_DOWN, (float *const[]){m->xb}, m->hb, T);
        o->add(ctx, m->x, m->xb, (size_t)T * dim);
    }
    m->n_logit_rows = 0;
    if (n_logit_rows == 0) return HEARTH_OK;
    /* Gather the rows that need logits, then norm + head on those only. */
    for (int i = 0; i < n_logit_rows; i++)
        if (logit_rows[i] < 0 || logit_rows[i] >= T)
            return hearth_err_set(err, HEARTH_EINVAL, "forward: logit row %d of %d", logit_rows[i], T);
    int run = 1; /* the rows are one run of consecutive rows: the norm reads them in place */
    while (run < n_logit_rows && logit_rows[run] == logit_rows[0] + run) run++;
    if (run == n_logit_rows) {
        o->rmsnorm(ctx, m->xb, m->x + (size_t)logit_rows[0] * dim, m->out_norm, n_logit_rows, dim, c->rms_norm_eps);
    } else {
        for (int i = 0, n; i < n_logit_rows; i += n) { /* one copy per run of consecutive rows */
            for (n = 1; i + n < n_logit_rows && logit_rows[i + n] == logit_rows[i] + n;) n++;
            o->copy(ctx, m->xb + (size_t)i * dim, m->x + (size_t)logit_rows[i] * dim,
                    sizeof(float) * (size_t)dim * n);
        }
        o->rmsnorm(ctx, m->xb, m->xb, m->out_norm, n_logit_rows, dim, c->rms_norm_eps);
    }
    o->matmul(ctx, m->logits, m->xb, n_logit_rows, &m->output);
    m->n_logit_rows = n_logit_rows;
    if (logits) o->download(ctx, logits, m->logits, sizeof(float) * (size_t)n_logit_rows * c->vocab_size);
    return HEARTH_OK;
}

hearth_status hearth_model_pick_begin(hearth_model *m, int n_rows, const hearth_pick_params *params, hearth_pick *out,
                                      hearth_err *err) {
    const hearth_ops *o = m->ops;
    if (n_rows < 0 || n_rows > m->n_logit_rows)
        return hearth_err_set(err, HEARTH_EINVAL, "pick: %d rows, the last forward left %d", n_rows, m->n_logit_rows);
    if (!o->pick) return hearth_err_set(err, HEARTH_ENOTSUP, "pick: the %s backend has no pick op", o->name);
    if (m->n_begun == 2) return hearth_err_set(err, HEARTH_EINVAL, "pick: two begun and not ended");
    m->begun_dl[(m->first_begun + m->n_begun++) % 2] = n_rows > 0;
    if (n_rows == 0) return HEARTH_OK;
    /* the last pick's params (a greedy stream's every step) are on the device already: no copy the step waits on */
    const size_t bytes = sizeof *params * (size_t)n_rows;
    if (n_rows > m->n_pick_params || memcmp(m->h_pick_params, params, bytes)) {
        o->upload(m->ops_ctx, m->d_pick_params, params, bytes);
        memcpy(m->h_pick_params, params, bytes);
        if (n_rows > m->n_pick_params) m->n_pick_params = n_rows;
    }
    o->pick(m->ops_ctx, m->d_picks, m->logits, n_rows, m->cfg.vocab_size, m->d_pick_params, m->d_next);
    m->n_next = n_rows;
    if (o->download_begin) o->download_begin(m->ops_ctx, out, m->d_picks, sizeof *out * (size_t)n_rows);
    else o->download(m->ops_ctx, out, m->d_picks, sizeof *out * (size_t)n_rows);
    return HEARTH_OK;
}

void hearth_model_pick_end(hearth_model *m) {
    HEARTH_ASSERT(m->n_begun > 0);
    const int dl = m->begun_dl[m->first_begun];
    m->first_begun ^= 1;
    m->n_begun--;
    if (dl && m->ops->download_end) m->ops->download_end(m->ops_ctx);
}

hearth_status hearth_model_pick(hearth_model *m, int n_rows, const hearth_pick_params *params, hearth_pick *out,
                                hearth_err *err) {
    if (m->n_begun) return hearth_err_set(err, HEARTH_EINVAL, "pick: an earlier pick is begun and not ended");
    hearth_status st = hearth_model_pick_begin(m, n_rows, params, out, err);
    if (st == HEARTH_OK) hearth_model_pick_end(m);
    return st;
}

int hearth_model_pick_truncates(const hearth_model *m) { return m->ops->pick_truncates; }

hearth_status hearth_model_hidden_row(hearth_model *m, int row, float *out, hearth_err *err) {
    if (row < 0 || row >= m->n_logit_rows)
        return hearth_err_set(err, HEARTH_EINVAL, "hidden: row %d, the last forward left %d", row, m->n_logit_rows);
    size_t n = (size_t)m->cfg.hidden_size; /* xb holds the logit rows, normed, in their order */
    m->ops->download(m->ops_ctx, out, m->xb + (size_t)row * n, sizeof(float) * n);
    return HEARTH_OK;
}

hearth_status hearth_model_logits_row(hearth_model *m, int row, float *out, hearth_err *err) {
    if (row < 0 || row >= m->n_logit_rows)
        return hearth_err_set(err, HEARTH_EINVAL, "logits: row %d, the last forward left %d", row, m->n_logit_rows);
    size_t n = (size_t)m->cfg.vocab_size;
    m->ops->download(m->ops_ctx, out, m->logits + (size_t)row * n, sizeof(float) * n);
    return HEARTH_OK;
}
