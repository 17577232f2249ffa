/* lora_train.c - LoRA fine-tuning (lora_train.h), written against the op
 * set (ops/ops.h): the inference ops for what the forward shares with
 * inference, hearth_ops.train for the backward and AdamW, so one trainer
 * runs on every backend that has them (the CPU, CUDA).
 *
 * The forward mirrors model/forward.c for a pack of sequences (each attends
 * to itself) and keeps what the backward needs, per layer (with gradient
 * checkpointing only the layer's input, the rest run again in the backward): the layer's input and its two norms' inverse
 * RMS, q (and k) before the qwen3 head norm, q and k after rope, v, the
 * attention's output and log-sum-exp per query, the residual after
 * attention, the gate and up products, and A x of each adapted projection.
 * The norms' outputs and the SwiGLU product are recomputed; the attention's
 * probabilities are recomputed from q, k and the log-sum-exp by the backend
 * (as flash attention's backward does), so nothing of T x T is kept.
 *
 * x W^T with the model's weights is the inference matmul; the backward's
 * dy W goes through the backend's copy of each frozen weight (F32 on the
 * CPU, BF16 on CUDA unless the weight is F32), or the weight itself where its
 * rows serve as they are. */
#include "train/lora_train.h"

#include "core/dtype.h"
#include "core/log.h"
#include "io/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { NT = HEARTH_LORA_TARGETS };

typedef struct {
    float *a, *b;             /* [r][in], [out][r], the model's row order (backend memory) */
    float *ga, *gb;           /* their gradients */
    float *ma, *va, *mb, *vb; /* AdamW's moments */
    int out, in;
} lt_pair;

/* What one layer's forward keeps for the backward (T_max rows each). */
typedef struct {
    float *x, *r1;       /* input [T][dim], attn norm's inverse RMS [T] */
    float *qpre, *rq;    /* qwen3: q before its head norm [T][qd], inverse RMS [T][nh] */
    float *kpre, *rk;    /* [T][kvd], [T][nkv] */
    float *q, *k, *v;    /* after rope: [T][qd], [T][kvd], [T][kvd] */
    float *att, *lse;    /* attention output [T][qd], log-sum-exp [nh][T] */
    float *xm, *r2;      /* residual after attention [T][dim], ffn norm's inverse RMS [T] */
    float *g, *u;        /* gate and up products [T][ffn] */
    float *ua[NT];       /* A x of each adapted projection [T][r] */
} lt_layer;

struct hearth_lora_trainer {
    hearth_model *m;
    const hearth_model_config *c;
    const hearth_ops *ops;
    const hearth_train_ops *tr;
    void *ctx;
    hearth_lora_train_opts o;
    float scale;
    int r, T_max, seq_max, window, head_rows; /* rows a forward (a pack), tokens a sequence */
    int adapter_off; /* the forward leaves the adapter out (the base model: DPO's reference) */
    int64_t steps;
    lt_pair *p;     /* [n_layers][NT] */
    void **wc;      /* [n_layers][NT]: the backend's copies of the frozen weights (matmul_t) */
    void *head_c;   /* the head's */
    uint8_t *wc_own; /* [n_layers * NT + 1] (the head last): 1 where the copy is the trainer's to free */
    lt_layer *L;    /* [n_layers], or with checkpointing one, which every layer's forward reuses */
    float **xs;     /* checkpointing: [n_layers] layer l's input [T][dim], its forward run again in the backward */
    float *xf;      /* the last layer's output [T][dim] */
    /* backend scratch */
    float *xn, *dx, *dxm, *dxn, *tmp, *h, *dh, *dg, *du, *dq, *dk, *dv, *datt, *dua, *rtmp;
    void *att_ws;
    float *logits;            /* [head_rows][vocab], the gradient in place */
    int32_t *tok_d, *rows_d, *y_d; /* [T]: the tokens, the head's rows and their targets */
    float *w_d;               /* [T]: the rows' loss weights */
    double *ce_d, *norm_d;    /* [T]: the rows' cross-entropy; the gradient's squared norm */
    /* the pack the forward runs: sequence s is rows [seg_off[s], seg_off[s] + seg_n[s]) */
    int n_seqs, *seg_off, *seg_n;
    /* host */
    int32_t *tok_h, *rows, *y;
    uint8_t *lab;
    float *w;
    double *ce;
    size_t bytes;
};

static const hearth_weight *frozen(const hearth_lora_trainer *t, int l, int tg) {
    const hearth_layer_weights *W = hearth_model_layer(t->m, l);
    const hearth_weight *w[NT] = {&W->wq, &W->wk, &W->wv, &W->wo, &W->w_gate, &W->w_up, &W->w_down};
    return w[tg];
}

static lt_pair *pair(const hearth_lora_trainer *t, int l, int tg) { return &t->p[(size_t)l * NT + tg]; }

/* What layer l's forward keeps (with checkpointing: the one set every layer shares). */
static lt_layer *kept(const hearth_lora_trainer *t, int l) { return &t->L[t->xs ? 0 : l]; }

static void copy(const hearth_lora_trainer *t, float *dst, const float *src, size_t n) {
    t->ops->copy(t->ctx, dst, src, sizeof(float) * n);
}

/* C[M][N] = alpha op(A) op(B) + beta C (hearth_train_ops.gemm). */
static void gemm(const hearth_lora_trainer *t, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                 int tb, float alpha, float beta) {
    t->tr->gemm(t->ctx, c, a, b, M, N, K, ta, tb, alpha, beta);
}

/* ---- the adapter's products ---- */

/* y [T][out] += scale B (A x), keeping A x. */
static void lora_fwd(hearth_lora_trainer *t, int l, int tg, const float *x, float *y, int T) {
    lt_pair *p = pair(t, l, tg);
    if (!p->a || t->adapter_off) return;
    float *ua = kept(t, l)->ua[tg];
    gemm(t, ua, x, p->a, T, t->r, p->in, 0, 1, 1.0f, 0.0f);
    gemm(t, y, ua, p->b, T, p->out, t->r, 0, 1, t->scale, 1.0f);
}

/* The gradient of A and B from dy [T][out] (x: the input, [T][in]), and
 * dx [T][in] += its part through the adapter. */
static void lora_bwd(hearth_lora_trainer *t, int l, int tg, const float *x, const float *dy, float *dx, int T) {
    lt_pair *p = pair(t, l, tg);
    if (!p->a) return;
    const int r = t->r;
    gemm(t, p->gb, dy, kept(t, l)->ua[tg], p->out, r, T, 1, 0, t->scale, 1.0f); /* += scale dy^T (A x) */
    gemm(t, t->dua, dy, p->b, T, r, p->out, 0, 0, t->scale, 0.0f);         /* d(A x) = scale dy B */
    gemm(t, p->ga, t->dua, x, r, p->in, T, 1, 0, 1.0f, 1.0f);               /* += d(A x)^T x */
    gemm(t, dx, t->dua, p->a, T, p->in, r, 0, 0, 1.0f, 1.0f);               /* dx += d(A x) A */
}

/* dx [T][in] = dy [T][out] W (+ the adapter's part), for target tg of layer
 * l whose input is x; acc: add to dx instead. */
static void proj_bwd(hearth_lora_trainer *t, int l, int tg, const float *x, const float *dy, float *dx, int T,
                     int acc) {
    t->tr->matmul_t(t->ctx, dx, dy, T, t->wc[(size_t)l * NT + tg], frozen(t, l, tg), acc);
    lora_bwd(t, l, tg, x, dy, dx, T);
}

/* ---- forward and backward of a pack of sequences ----
 * Every op but rope and attention works row by row, so a pack's sequences
 * share them; rope (positions from 0) and attention (a sequence attends to
 * itself) run a sequence at a time. */

/* x [T][nheads hd] rotated at each sequence's positions (inverse: the backward). */
static void seg_rope(const hearth_lora_trainer *t, float *x, int nheads, int inverse) {
    const int hd = t->c->head_dim;
    for (int s = 0; s < t->n_seqs; s++)
        t->tr->rope(t->ctx, x + (size_t)t->seg_off[s] * nheads * hd, t->seg_n[s], nheads, hd,
                    hearth_model_rope(t->m), inverse);
}

/* The attention of each sequence (lse: sequence s's [nh][n] at lse + nh off). */
static void seg_attn(const hearth_lora_trainer *t, lt_layer *A) {
    const hearth_model_config *c = t->c;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd, kvd = nkv * hd;
    for (int s = 0; s < t->n_seqs; s++) {
        const size_t o = (size_t)t->seg_off[s];
        t->tr->attn(t->ctx, A->att + o * qd, A->lse + o * nh, A->q + o * qd, A->k + o * kvd, A->v + o * kvd,
                    t->seg_n[s], nh, nkv, hd, t->window, t->att_ws);
    }
}

static void seg_attn_bwd(const hearth_lora_trainer *t, const lt_layer *A) {
    const hearth_model_config *c = t->c;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd, kvd = nkv * hd;
    for (int s = 0; s < t->n_seqs; s++) {
        const size_t o = (size_t)t->seg_off[s];
        t->tr->attn_bwd(t->ctx, t->dq + o * qd, t->dk + o * kvd, t->dv + o * kvd, t->datt + o * qd, A->att + o * qd,
                        A->lse + o * nh, A->q + o * qd, A->k + o * kvd, A->v + o * kvd, t->seg_n[s], nh, nkv, hd,
                        t->window, t->att_ws);
    }
}

static void layer_fwd(hearth_lora_trainer *t, int l, const float *x, float *y, int T) {
    const hearth_model_config *c = t->c;
    const hearth_layer_weights *W = hearth_model_layer(t->m, l);
    const hearth_ops *ops = t->ops;
    const hearth_train_ops *tr = t->tr;
    void *ctx = t->ctx;
    const int dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd,
              kvd = nkv * hd, ffn = c->intermediate_size;
    const float eps = c->rms_norm_eps;
    lt_layer *A = kept(t, l);
    copy(t, A->x, x, (size_t)T * dim); /* x may be y: read A->x from here on */
    if (t->xs && t->xs[l] != x) copy(t, t->xs[l], x, (size_t)T * dim);
    tr->rmsnorm(ctx, t->xn, A->r1, A->x, W->attn_norm, T, dim, eps);
    ops->matmul(ctx, A->q, t->xn, T, &W->wq);
    ops->matmul(ctx, A->k, t->xn, T, &W->wk);
    ops->matmul(ctx, A->v, t->xn, T, &W->wv);
    lora_fwd(t, l, HEARTH_LORA_T_Q, t->xn, A->q, T);
    lora_fwd(t, l, HEARTH_LORA_T_K, t->xn, A->k, T);
    lora_fwd(t, l, HEARTH_LORA_T_V, t->xn, A->v, T);
    if (W->bq) {
        ops->add_bias(ctx, A->q, W->bq, T, qd);
        ops->add_bias(ctx, A->k, W->bk, T, kvd);
        ops->add_bias(ctx, A->v, W->bv, T, kvd);
    }
    if (W->q_norm) {
        copy(t, A->qpre, A->q, (size_t)T * qd);
        copy(t, A->kpre, A->k, (size_t)T * kvd);
        tr->rmsnorm(ctx, A->q, A->rq, A->qpre, W->q_norm, T * nh, hd, eps);
        tr->rmsnorm(ctx, A->k, A->rk, A->kpre, W->k_norm, T * nkv, hd, eps);
    }
    seg_rope(t, A->q, nh, 0);
    seg_rope(t, A->k, nkv, 0);
    seg_attn(t, A);
    ops->matmul(ctx, A->xm, A->att, T, &W->wo);
    lora_fwd(t, l, HEARTH_LORA_T_O, A->att, A->xm, T);
    ops->add(ctx, A->xm, A->x, (size_t)T * dim);
    tr->rmsnorm(ctx, t->xn, A->r2, A->xm, W->ffn_norm, T, dim, eps);
    ops->matmul(ctx, A->g, t->xn, T, &W->w_gate);
    ops->matmul(ctx, A->u, t->xn, T, &W->w_up);
    lora_fwd(t, l, HEARTH_LORA_T_GATE, t->xn, A->g, T);
    lora_fwd(t, l, HEARTH_LORA_T_UP, t->xn, A->u, T);
    ops->swiglu(ctx, t->h, A->g, A->u, T, ffn);
    ops->matmul(ctx, y, t->h, T, &W->w_down);
    lora_fwd(t, l, HEARTH_LORA_T_DOWN, t->h, y, T);
    ops->add(ctx, y, A->xm, (size_t)T * dim);
}

/* dx [T][dim]: the gradient of layer l's output in, of its input out. */
static void layer_bwd(hearth_lora_trainer *t, int l, float *dx, int T) {
    const hearth_model_config *c = t->c;
    const hearth_layer_weights *W = hearth_model_layer(t->m, l);
    const hearth_train_ops *tr = t->tr;
    void *ctx = t->ctx;
    const int dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd,
              kvd = nkv * hd, ffn = c->intermediate_size;
    const float eps = c->rms_norm_eps;
    const lt_layer *A = kept(t, l);
    /* feed-forward: y = xm + down(silu(g) u) */
    t->ops->swiglu(ctx, t->h, A->g, A->u, T, ffn);
    proj_bwd(t, l, HEARTH_LORA_T_DOWN, t->h, dx, t->dh, T, 0);
    tr->swiglu_bwd(ctx, t->dg, t->du, A->g, A->u, t->dh, (size_t)T * ffn);
    tr->rmsnorm(ctx, t->xn, t->rtmp, A->xm, W->ffn_norm, T, dim, eps); /* the norm's output again */
    proj_bwd(t, l, HEARTH_LORA_T_GATE, t->xn, t->dg, t->dxn, T, 0);
    proj_bwd(t, l, HEARTH_LORA_T_UP, t->xn, t->du, t->dxn, T, 1);
    copy(t, t->dxm, dx, (size_t)T * dim);
    tr->rmsnorm_bwd(ctx, t->dxm, t->dxn, A->xm, A->r2, W->ffn_norm, T, dim, 1);
    /* attention: xm = x + o(att) */
    proj_bwd(t, l, HEARTH_LORA_T_O, A->att, t->dxm, t->datt, T, 0);
    seg_attn_bwd(t, A);
    seg_rope(t, t->dq, nh, 1);
    seg_rope(t, t->dk, nkv, 1);
    if (W->q_norm) { /* through the head norms, in place via tmp */
        tr->rmsnorm_bwd(ctx, t->tmp, t->dq, A->qpre, A->rq, W->q_norm, T * nh, hd, 0);
        copy(t, t->dq, t->tmp, (size_t)T * qd);
        tr->rmsnorm_bwd(ctx, t->tmp, t->dk, A->kpre, A->rk, W->k_norm, T * nkv, hd, 0);
        copy(t, t->dk, t->tmp, (size_t)T * kvd);
    }
    tr->rmsnorm(ctx, t->xn, t->rtmp, A->x, W->attn_norm, T, dim, eps);
    proj_bwd(t, l, HEARTH_LORA_T_Q, t->xn, t->dq, t->dxn, T, 0);
    proj_bwd(t, l, HEARTH_LORA_T_K, t->xn, t->dk, t->dxn, T, 1);
    proj_bwd(t, l, HEARTH_LORA_T_V, t->xn, t->dv, t->dxn, T, 1);
    copy(t, dx, t->dxm, (size_t)T * dim);
    tr->rmsnorm_bwd(ctx, dx, t->dxn, A->x, A->r1, W->attn_norm, T, dim, 1);
}

/* What the head computes of a pack: the cross-entropy of token i of a
 * sequence (from its row i - 1) summed over the labels into labels, over
 * every token into all_sum with all; with grad, the gradient of
 * sum_i w_i CE_i (w_i = gs for a label, 0 otherwise, unless w is given) at
 * the last layer's output. label NULL: none. */
typedef struct {
    const int32_t *const *tokens;
    const uint8_t *const *label;
    const float *const *w;
    const int *n;
    int n_seqs, all, grad;
    float gs;
    double labels, all_sum;
} head_job;

static int head_label(const head_job *h, int s, int i) { return h->label && h->label[s] && h->label[s][i]; }
static float head_weight(const head_job *h, int s, int i) {
    return h->w ? h->w[s][i] : head_label(h, s, i) ? h->gs : 0.0f;
}

/* The head over the rows it needs, head_rows a pass; dx [T][dim] gets the
 * gradient (zero at the other rows). */
static void head(hearth_lora_trainer *t, int T, head_job *h, float *dx) {
    const hearth_model_config *c = t->c;
    const hearth_ops *ops = t->ops;
    const hearth_train_ops *tr = t->tr;
    void *ctx = t->ctx;
    const int dim = c->hidden_size, V = c->vocab_size;
    int n = 0;
    for (int s = 0; s < h->n_seqs; s++)
        for (int i = 0; i + 1 < h->n[s]; i++)
            if (head_label(h, s, i + 1) || h->all || (h->grad && head_weight(h, s, i + 1) != 0)) {
                t->rows[n] = t->seg_off[s] + i, t->y[n] = h->tokens[s][i + 1], t->lab[n] = head_label(h, s, i + 1);
                t->w[n] = h->grad ? head_weight(h, s, i + 1) : 0.0f;
                n++;
            }
    tr->zero(ctx, dx, sizeof(float) * (size_t)T * dim);
    if (!n) return;
    ops->upload(ctx, t->rows_d, t->rows, sizeof(int32_t) * n);
    ops->upload(ctx, t->y_d, t->y, sizeof(int32_t) * n);
    ops->upload(ctx, t->w_d, t->w, sizeof(float) * n);
    for (int c0 = 0; c0 < n; c0 += t->head_rows) {
        const int C = n - c0 < t->head_rows ? n - c0 : t->head_rows;
        tr->gather_rows(ctx, t->dxm, t->xf, t->rows_d + c0, C, dim);
        tr->rmsnorm(ctx, t->xn, t->rtmp, t->dxm, hearth_model_out_norm(t->m), C, dim, c->rms_norm_eps);
        ops->matmul(ctx, t->logits, t->xn, C, hearth_model_head(t->m));
        tr->cross_entropy(ctx, t->logits, t->ce_d + c0, t->logits, t->y_d + c0, h->grad ? t->w_d + c0 : NULL, C, V);
        if (!h->grad) continue;
        tr->matmul_t(ctx, t->dxn, t->logits, C, t->head_c, hearth_model_head(t->m), 0);
        tr->rmsnorm_bwd(ctx, t->xn, t->dxn, t->dxm, t->rtmp, hearth_model_out_norm(t->m), C, dim, 0);
        tr->scatter_rows(ctx, dx, t->xn, t->rows_d + c0, C, dim);
    }
    ops->download(ctx, t->ce, t->ce_d, sizeof(double) * n);
    for (int j = 0; j < n; j++) {
        if (t->lab[j]) h->labels += t->ce[j];
        h->all_sum += t->ce[j];
    }
}

/* The forward of h's pack (with the adapter unless adapter_off), the head's
 * job, and with h->grad the backward. */
static hearth_status run(hearth_lora_trainer *t, head_job *h, hearth_err *err) {
    const hearth_model_config *c = t->c;
    int T = 0;
    if (h->n_seqs < 1) return hearth_err_set(err, HEARTH_EINVAL, "train: an empty pack");
    for (int s = 0; s < h->n_seqs; s++) {
        const int n = h->n[s];
        if (n < 2 || n > t->seq_max)
            return hearth_err_set(err, HEARTH_EINVAL, "train: a sequence of %d tokens (2 .. %d)", n, t->seq_max);
        if (T + n > t->T_max)
            return hearth_err_set(err, HEARTH_EINVAL, "train: a pack of more than %d tokens", t->T_max);
        for (int i = 0; i < n; i++)
            if (h->tokens[s][i] < 0 || h->tokens[s][i] >= c->vocab_size)
                return hearth_err_set(err, HEARTH_ERANGE, "train: token id %d out of range [0, %d)", h->tokens[s][i],
                                      c->vocab_size);
        t->seg_off[s] = T, t->seg_n[s] = n;
        memcpy(t->tok_h + T, h->tokens[s], sizeof(int32_t) * n);
        T += n;
    }
    t->n_seqs = h->n_seqs;
    float *x = t->dx; /* the residual stream, layer by layer (dx is free until the backward) */
    t->ops->upload(t->ctx, t->tok_d, t->tok_h, sizeof(int32_t) * T);
    t->ops->embed(t->ctx, x, hearth_model_embedding(t->m), t->tok_d, T);
    for (int l = 0; l < c->n_layers; l++) layer_fwd(t, l, l ? t->xf : x, t->xf, T);
    head(t, T, h, t->dx);
    for (int l = c->n_layers - 1; h->grad && l >= 0; l--) {
        if (t->xs) layer_fwd(t, l, t->xs[l], t->xf, T); /* what the backward needs, again (xf is free now) */
        layer_bwd(t, l, t->dx, T); /* the head scaled dx */
    }
    /* a device that failed inside an op stops the training: a failure in this forward (the head's download
     * waited for it), or in the last backward and step, is seen here */
    return t->tr->failed ? t->tr->failed(t->ctx, err) : HEARTH_OK;
}

hearth_status hearth_lora_trainer_accumulate_pack(hearth_lora_trainer *t, int n_seqs, const int32_t *const *tokens,
                                                  const uint8_t *const *label, const int *n, float grad_scale,
                                                  double *loss_sum, hearth_err *err) {
    head_job h = {.tokens = tokens, .label = label, .n = n, .n_seqs = n_seqs, .grad = 1, .gs = grad_scale};
    hearth_status st = run(t, &h, err);
    *loss_sum = h.labels;
    return st;
}

hearth_status hearth_lora_trainer_accumulate(hearth_lora_trainer *t, const int32_t *tokens, const uint8_t *label,
                                             int n, float grad_scale, double *loss_sum, hearth_err *err) {
    return hearth_lora_trainer_accumulate_pack(t, 1, &tokens, &label, &n, grad_scale, loss_sum, err);
}

hearth_status hearth_lora_trainer_logp(hearth_lora_trainer *t, const int32_t *tokens, const uint8_t *label, int n,
                                       int with_adapter, double *logp_sum, double *logp_all, hearth_err *err) {
    head_job h = {.tokens = &tokens, .label = &label, .n = &n, .n_seqs = 1, .all = logp_all != NULL};
    t->adapter_off = !with_adapter;
    hearth_status st = run(t, &h, err);
    t->adapter_off = 0;
    *logp_sum = -h.labels;
    if (logp_all) *logp_all = -h.all_sum;
    return st;
}

hearth_status hearth_lora_trainer_accumulate_w(hearth_lora_trainer *t, const int32_t *tokens, const float *w, int n,
                                               hearth_err *err) {
    head_job h = {.tokens = &tokens, .w = &w, .n = &n, .n_seqs = 1, .grad = 1}; /* no labels: only the weights */
    return run(t, &h, err);
}

/* ---- AdamW ---- */

void hearth_lora_trainer_step(hearth_lora_trainer *t, float lr, double *grad_norm) {
    const int n = t->c->n_layers * NT;
    const hearth_lora_train_opts *o = &t->o;
    double ss = 0;
    t->tr->zero(t->ctx, t->norm_d, sizeof(double));
    for (int i = 0; i < n; i++)
        if (t->p[i].a) {
            t->tr->sumsq(t->ctx, t->norm_d, t->p[i].ga, (size_t)t->r * t->p[i].in);
            t->tr->sumsq(t->ctx, t->norm_d, t->p[i].gb, (size_t)t->p[i].out * t->r);
        }
    t->ops->download(t->ctx, &ss, t->norm_d, sizeof(double));
    const double norm = sqrt(ss);
    if (grad_norm) *grad_norm = norm;
    /* torch.nn.utils.clip_grad_norm_'s factor */
    const float gs = o->max_grad_norm > 0 && norm > o->max_grad_norm ? (float)(o->max_grad_norm / (norm + 1e-6))
                                                                      : 1.0f;
    t->steps++;
    const double bc1 = 1.0 - pow(o->beta1, (double)t->steps), bc2 = 1.0 - pow(o->beta2, (double)t->steps);
    for (int i = 0; i < n; i++) {
        lt_pair *p = &t->p[i];
        if (!p->a) continue;
        t->tr->adamw(t->ctx, p->a, p->ga, p->ma, p->va, (size_t)t->r * p->in, lr, o->beta1, o->beta2, o->eps,
                     o->weight_decay, gs, bc1, bc2);
        t->tr->adamw(t->ctx, p->b, p->gb, p->mb, p->vb, (size_t)p->out * t->r, lr, o->beta1, o->beta2, o->eps,
                     o->weight_decay, gs, bc1, bc2);
    }
}

/* ---- making and freeing ---- */

/* n floats (or bytes with take_b) of backend memory, zeroed, counted in t->bytes; NULL on out of memory. */
static void *take_b(hearth_lora_trainer *t, size_t bytes) {
    void *p = t->ops->alloc(t->ctx, bytes ? bytes : 1);
    if (p) t->tr->zero(t->ctx, p, bytes), t->bytes += bytes;
    return p;
}
static float *take(hearth_lora_trainer *t, size_t n) { return take_b(t, sizeof(float) * n); }

static void release(const hearth_lora_trainer *t, void *p) {
    if (p) t->ops->free(t->ctx, p);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The pairs and their state; from init (file order, its r) or PEFT's init. */
static hearth_status make_pairs(hearth_lora_trainer *t, const hearth_lora_pairs *init, hearth_err *err) {
    const int L = t->c->n_layers, r = t->r;
    uint64_t seed = t->o.seed;
    for (int l = 0; l < L; l++)
        for (int tg = 0; tg < NT; tg++) {
            lt_pair *p = pair(t, l, tg);
            if (init ? !init->a[l * NT + tg] : !(t->o.targets >> tg & 1)) continue;
            hearth_lora_target_shape(t->c, tg, &p->out, &p->in);
            const size_t na = (size_t)r * p->in, nb = (size_t)p->out * r;
            p->a = take(t, na), p->b = take(t, nb), p->ga = take(t, na), p->gb = take(t, nb);
            p->ma = take(t, na), p->va = take(t, na), p->mb = take(t, nb), p->vb = take(t, nb);
            float *ha = malloc(sizeof(float) * na), *hb = calloc(nb, sizeof(float));
            if (!p->a || !p->b || !p->ga || !p->gb || !p->ma || !p->va || !p->mb || !p->vb || !ha || !hb) {
                free(ha), free(hb);
                return hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory for the adapter");
            }
            if (init) {
                memcpy(ha, init->a[l * NT + tg], sizeof(float) * na);
                for (int o = 0; o < p->out; o++)
                    memcpy(hb + (size_t)o * r,
                           init->b[l * NT + tg] + (size_t)hearth_model_lora_file_row(t->m, tg, o) * r,
                           sizeof(float) * r);
            } else { /* PEFT: kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); B = 0 */
                const float bound = 1.0f / sqrtf((float)p->in);
                for (size_t i = 0; i < na; i++)
                    ha[i] = bound * (float)(((splitmix(&seed) >> 11) * 0x1.0p-53) * 2.0 - 1.0);
            }
            t->ops->upload(t->ctx, p->a, ha, sizeof(float) * na);
            t->ops->upload(t->ctx, p->b, hb, sizeof(float) * nb);
            free(ha), free(hb);
        }
    return HEARTH_OK;
}

/* What layer l's forward keeps (the qwen3 head norms' with qkn; A x of the targets in bits tgs), and its
 * frozen weights' copies; with checkpointing its input alone, the rest once (l 0) for every layer; 0 on out
 * of memory. */
static int make_layer(hearth_lora_trainer *t, int l, int qkn, unsigned tgs) {
    const hearth_model_config *c = t->c;
    const int T = t->T_max, dim = c->hidden_size, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * c->head_dim,
              kvd = nkv * c->head_dim, ffn = c->intermediate_size;
    for (int tg = 0; tg < NT; tg++) { /* the frozen weight's copy for the backward */
        size_t b = 0;
        if (!(t->wc[(size_t)l * NT + tg] = t->tr->weight_copy(t->ctx, frozen(t, l, tg), &b))) return 0;
        t->wc_own[(size_t)l * NT + tg] = b > 0;
        t->bytes += b;
    }
    if (t->xs && !(t->xs[l] = take(t, (size_t)T * dim))) return 0;
    if (t->xs && l > 0) return 1;
    lt_layer *A = &t->L[l];
    A->x = take(t, (size_t)T * dim), A->r1 = take(t, T), A->q = take(t, (size_t)T * qd);
    A->k = take(t, (size_t)T * kvd), A->v = take(t, (size_t)T * kvd), A->att = take(t, (size_t)T * qd);
    A->lse = take(t, (size_t)nh * T), A->xm = take(t, (size_t)T * dim), A->r2 = take(t, T);
    A->g = take(t, (size_t)T * ffn), A->u = take(t, (size_t)T * ffn);
    int ok = A->x && A->r1 && A->q && A->k && A->v && A->att && A->lse && A->xm && A->r2 && A->g && A->u;
    if (qkn) {
        A->qpre = take(t, (size_t)T * qd), A->rq = take(t, (size_t)T * nh);
        A->kpre = take(t, (size_t)T * kvd), A->rk = take(t, (size_t)T * nkv);
        ok = ok && A->qpre && A->rq && A->kpre && A->rk;
    }
    for (int tg = 0; ok && tg < NT; tg++)
        if (tgs >> tg & 1) ok = (A->ua[tg] = take(t, (size_t)T * t->r)) != NULL;
    return ok;
}

/* The step's scratch; 0 on out of memory. */
static int make_scratch(hearth_lora_trainer *t) {
    const hearth_model_config *c = t->c;
    const int T = t->T_max, dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads, qd = nh * hd,
              kvd = c->n_kv_heads * hd, ffn = c->intermediate_size, V = c->vocab_size;
    int wide = ffn > qd ? ffn : qd;
    wide = wide > dim ? wide : dim;
    size_t b = 0;
    t->head_c = t->tr->weight_copy(t->ctx, hearth_model_head(t->m), &b);
    t->wc_own[(size_t)c->n_layers * NT] = b > 0;
    t->bytes += b;
    const size_t TW = (size_t)T * wide;
    t->xf = take(t, (size_t)T * dim);
    t->xn = take(t, TW), t->dx = take(t, (size_t)T * dim), t->dxm = take(t, (size_t)T * dim);
    t->dxn = take(t, TW), t->tmp = take(t, TW), t->h = take(t, (size_t)T * ffn), t->dh = take(t, (size_t)T * ffn);
    t->dg = take(t, (size_t)T * ffn), t->du = take(t, (size_t)T * ffn), t->dq = take(t, (size_t)T * qd);
    t->dk = take(t, (size_t)T * kvd), t->dv = take(t, (size_t)T * kvd), t->datt = take(t, (size_t)T * qd);
    t->dua = take(t, (size_t)T * t->r), t->rtmp = take(t, T);
    t->att_ws = take_b(t, t->tr->attn_ws_bytes(t->seq_max, nh, c->n_kv_heads, hd));
    t->logits = take(t, (size_t)t->head_rows * V);
    t->tok_d = take_b(t, sizeof(int32_t) * T), t->rows_d = take_b(t, sizeof(int32_t) * T);
    t->y_d = take_b(t, sizeof(int32_t) * T), t->w_d = take(t, T);
    t->ce_d = take_b(t, sizeof(double) * T), t->norm_d = take_b(t, sizeof(double));
    t->rows = malloc(sizeof(int32_t) * T), t->y = malloc(sizeof(int32_t) * T), t->tok_h = malloc(sizeof(int32_t) * T);
    t->w = malloc(sizeof(float) * T), t->ce = malloc(sizeof(double) * T), t->lab = malloc((size_t)T);
    t->seg_off = malloc(sizeof(int) * T), t->seg_n = malloc(sizeof(int) * T);
    return t->head_c && t->xf && t->xn && t->dx && t->dxm && t->dxn && t->tmp && t->h && t->dh && t->dg && t->du &&
           t->dq && t->dk && t->dv && t->datt && t->dua && t->rtmp && t->att_ws && t->logits && t->tok_d &&
           t->rows_d && t->y_d && t->w_d && t->ce_d && t->norm_d && t->rows && t->y && t->w && t->ce && t->tok_h &&
           t->lab && t->seg_off && t->seg_n;
}

hearth_status hearth_lora_trainer_new(hearth_lora_trainer **out, hearth_model *m, const hearth_lora_train_opts *opts,
                                      const char *init_dir, hearth_err *err) {
    *out = NULL;
    void *ctx;
    const hearth_ops *ops = hearth_model_ops(m, &ctx);
    if (!hearth_model_layer(m, 0) || !ops->train)
        return hearth_err_set(err, HEARTH_ENOTSUP, "train: the %s backend cannot train", ops->name);
    const int pack = opts->pack > opts->max_len ? opts->pack : opts->max_len;
    if (opts->max_len < 2 || pack > hearth_model_max_tokens(m))
        return hearth_err_set(err, HEARTH_EINVAL, "train: max_len %d, pack %d (2 .. the model's %d rows a forward)",
                              opts->max_len, pack, hearth_model_max_tokens(m));
    hearth_lora_pairs init = {0};
    hearth_status st = HEARTH_OK;
    if (init_dir && (st = hearth_lora_pairs_read(&init, m, init_dir, err))) return st;
    hearth_lora_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        hearth_lora_pairs_free(&init);
        return hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory");
    }
    t->m = m, t->c = hearth_model_config_get(m), t->ops = ops, t->tr = ops->train, t->ctx = ctx, t->o = *opts;
    if (init_dir) t->o.rank = init.r, t->o.alpha = init.alpha, t->o.rslora = init.rslora;
    const hearth_model_config *c = t->c;
    t->r = t->o.rank;
    if (t->r < 1 || t->r > 4096 || !(t->o.alpha > 0) || (!init_dir && !(t->o.targets & ((1u << NT) - 1)))) {
        hearth_lora_pairs_free(&init);
        free(t);
        return hearth_err_set(err, HEARTH_EINVAL, "train: rank %d, alpha %g, no target: nothing to train",
                              opts->rank, opts->alpha);
    }
    t->scale = t->o.rslora ? t->o.alpha / sqrtf((float)t->r) : t->o.alpha / t->r;
    t->seq_max = t->o.max_len;
    t->T_max = pack;
    t->head_rows = t->tr->head_rows < t->T_max ? t->tr->head_rows : t->T_max;
    t->window = c->sliding_window > 0 ? c->sliding_window : 0;
    const int L = c->n_layers;
    t->p = calloc((size_t)L * NT, sizeof *t->p);
    t->wc = calloc((size_t)L * NT, sizeof *t->wc);
    t->wc_own = calloc((size_t)L * NT + 1, 1);
    t->L = calloc((size_t)L, sizeof *t->L);
    t->xs = t->o.checkpoint ? calloc((size_t)L, sizeof *t->xs) : NULL;
    int ok = t->p && t->wc && t->wc_own && t->L && (t->xs || !t->o.checkpoint);
    if (ok && (st = make_pairs(t, init_dir ? &init : NULL, err))) ok = -1;
    hearth_lora_pairs_free(&init);
    int qkn = 0; /* with checkpointing the shared set serves every layer: the union of what they keep */
    unsigned tgs = 0;
    for (int l = 0; l < L; l++) {
        qkn |= hearth_model_layer(m, l)->q_norm != NULL;
        for (int tg = 0; tg < NT; tg++) tgs |= (unsigned)(pair(t, l, tg)->a != NULL) << tg;
    }
    for (int l = 0; ok > 0 && l < L; l++) {
        unsigned own = 0;
        for (int tg = 0; tg < NT; tg++) own |= (unsigned)(pair(t, l, tg)->a != NULL) << tg;
        ok = make_layer(t, l, t->xs ? qkn : hearth_model_layer(m, l)->q_norm != NULL, t->xs ? tgs : own);
    }
    if (ok > 0) ok = make_scratch(t);
    if (ok <= 0) {
        const double gib = t->bytes / 1073741824.0;
        hearth_lora_trainer_free(t);
        return ok < 0 ? st : hearth_err_set(err, HEARTH_ENOMEM, "train: out of %s memory (%.2f GiB of activations, "
                                                                "gradients and weight copies asked so far)",
                                            ops->name, gib);
    }
    *out = t;
    return HEARTH_OK;
}

void hearth_lora_trainer_free(hearth_lora_trainer *t) {
    if (!t) return;
    const int L = t->c->n_layers;
    for (int i = 0; t->p && i < L * NT; i++) {
        lt_pair *p = &t->p[i];
        float *f[] = {p->a, p->b, p->ga, p->gb, p->ma, p->va, p->mb, p->vb};
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) release(t, f[k]);
    }
    for (int i = 0; t->wc && t->wc_own && i < L * NT; i++)
        if (t->wc_own[i]) release(t, t->wc[i]);
    if (t->wc_own && t->wc_own[L * NT]) release(t, t->head_c);
    for (int l = 0; t->L && l < L; l++) {
        lt_layer *A = &t->L[l];
        float *f[] = {A->x, A->r1, A->qpre, A->rq, A->kpre, A->rk, A->q, A->k, A->v, A->att, A->lse, A->xm, A->r2,
                      A->g, A->u};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) release(t, f[i]);
        for (int tg = 0; tg < NT; tg++) release(t, A->ua[tg]);
        if (t->xs) release(t, t->xs[l]);
    }
    void *f[] = {t->xf, t->xn, t->dx, t->dxm, t->dxn, t->tmp, t->h, t->dh, t->dg, t->du, t->dq,
                 t->dk, t->dv, t->datt, t->dua, t->rtmp, t->att_ws, t->logits, t->tok_d, t->rows_d, t->y_d,
                 t->w_d, t->ce_d, t->norm_d};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) release(t, f[i]);
    free(t->rows), free(t->y), free(t->w), free(t->ce), free(t->tok_h), free(t->lab), free(t->seg_off), free(t->seg_n);
    free(t->p), free(t->wc), free(t->wc_own), free(t->L), free(t->xs);
    free(t);
}

size_t hearth_lora_trainer_bytes(const hearth_lora_trainer *t) { return t->bytes; }

int hearth_lora_trainer_get(const hearth_lora_trainer *t, int l, int tg, float *a, float *b, float *ga, float *gb) {
    if (l < 0 || l >= t->c->n_layers || tg < 0 || tg >= NT || !pair(t, l, tg)->a) return 0;
    const lt_pair *p = pair(t, l, tg);
    const int r = t->r;
    const size_t nb = (size_t)p->out * r;
    if (a) t->ops->download(t->ctx, a, p->a, sizeof(float) * r * p->in);
    if (ga) t->ops->download(t->ctx, ga, p->ga, sizeof(float) * r * p->in);
    float *tmp = b || gb ? malloc(sizeof(float) * nb) : NULL;
    if ((b || gb) && !tmp) return 0;
    for (int w = 0; tmp && w < 2; w++) { /* B's rows back in the file's order */
        float *dst = w ? gb : b;
        if (!dst) continue;
        t->ops->download(t->ctx, tmp, w ? p->gb : p->b, sizeof(float) * nb);
        for (int o = 0; o < p->out; o++)
            memcpy(dst + (size_t)hearth_model_lora_file_row(t->m, tg, o) * r, tmp + (size_t)o * r, sizeof(float) * r);
    }
    free(tmp);
    return 1;
}

float *hearth_lora_trainer_tensor(hearth_lora_trainer *t, int l, int tg, int what, int *n) {
    if (!t->ops->host_memory || l < 0 || l >= t->c->n_layers || tg < 0 || tg >= NT || what < 0 || what > 3 ||
        !pair(t, l, tg)->a)
        return NULL;
    lt_pair *p = pair(t, l, tg);
    *n = what % 2 ? p->out * t->r : t->r * p->in;
    float *f[4] = {p->a, p->b, p->ga, p->gb};
    return f[what];
}

/* ---- PEFT's directory ---- */

static const char *short_name(int tg) { /* "q_proj" of "self_attn.q_proj" */
    return strchr(hearth_lora_module(tg), '.') + 1;
}

hearth_status hearth_lora_trainer_save(const hearth_lora_trainer *t, const char *dir, const char *base,
                                       hearth_err *err) {
    if (mkdir(dir, 0755) && errno != EEXIST)
        return hearth_err_set(err, HEARTH_EIO, "%s: cannot make the directory (%s)", dir, strerror(errno));
    const int L = t->c->n_layers, r = t->r;
    unsigned used = 0;
    int n = 0;
    for (int i = 0; i < L * NT; i++)
        if (t->p[i].a) used |= 1u << (i % NT), n += 2;
    json_t *mods = json_array();
    for (int tg = 0; tg < NT; tg++)
        if (used >> tg & 1) json_array_append_new(mods, json_string(short_name(tg)));
    json_t *cfg = json_pack("{s:s, s:s, s:s?, s:i, s:f, s:o, s:f, s:s, s:o, s:b, s:b, s:b, s:b, s:n}",
                            "peft_type", "LORA", "task_type", "CAUSAL_LM", "base_model_name_or_path", base, "r", r,
                            "lora_alpha", (double)t->o.alpha, "target_modules", mods, "lora_dropout", 0.0, "bias",
                            "none", "use_rslora", json_boolean(t->o.rslora), "fan_in_fan_out", 0, "use_dora", 0,
                            "inference_mode", 1, "init_lora_weights", 1, "modules_to_save");
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    if (!cfg || json_dump_file(cfg, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
        json_decref(cfg);
        return hearth_err_set(err, HEARTH_EIO, "%s: cannot write it", path);
    }
    json_decref(cfg);
    hearth_st_f32 *ts = calloc((size_t)n, sizeof *ts);
    char(*names)[160] = calloc((size_t)n, sizeof *names);
    float **data = calloc((size_t)n, sizeof *data);
    hearth_status st = ts && names && data ? HEARTH_OK : hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    int k = 0;
    for (int l = 0; st == HEARTH_OK && l < L; l++)
        for (int tg = 0; st == HEARTH_OK && tg < NT; tg++) {
            const lt_pair *p = pair(t, l, tg);
            if (!p->a) continue;
            for (int w = 0; w < 2; w++, k++) {
                snprintf(names[k], sizeof names[k], "base_model.model.model.layers.%d.%s.lora_%c.weight", l,
                         hearth_lora_module(tg), w ? 'B' : 'A');
                const size_t cnt = w ? (size_t)p->out * r : (size_t)r * p->in;
                if (!(data[k] = malloc(sizeof(float) * cnt))) {
                    st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
                    break;
                }
                hearth_lora_trainer_get(t, l, tg, w ? NULL : data[k], w ? data[k] : NULL, NULL, NULL);
                ts[k] = (hearth_st_f32){names[k], 2, {w ? p->out : r, w ? r : p->in}, data[k]};
            }
        }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (st == HEARTH_OK) st = hearth_st_write_f32(path, ts, n, err);
    for (int i = 0; data && i < n; i++) free(data[i]);
    free(data), free(names), free(ts);
    return st;
}
