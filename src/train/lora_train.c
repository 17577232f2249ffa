/* lora_train.c - LoRA fine-tuning on the CPU (lora_train.h).
 *
 * The forward mirrors model/forward.c for one sequence and keeps what the
 * backward needs, per layer: the layer's input and its two norms' inverse
 * RMS, q (and k) before the qwen3 head norm, q and k after rope, v, the
 * attention's output and log-sum-exp per query, the residual after
 * attention, the gate and up products, and A x of each adapted projection.
 * The norms' outputs and the SwiGLU product are recomputed. The attention's
 * probabilities are recomputed from q, k and the log-sum-exp (as flash
 * attention's backward does), so nothing of T x T is kept.
 *
 * x W^T with the model's weights goes through hearth_cpu_matmul, as the
 * inference runs it; the backward's dy W through hearth_cpu_gemm_nn with F32
 * copies of the weights as stored (ops/cpu/gemm.h), as do the attention's
 * and the adapter's products that take an operand along its output. */
#include "train/lora_train.h"

#include "core/dtype.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/panel.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/vec.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { NT = HEARTH_LORA_TARGETS, HEAD_ROWS = 128 /* logit rows a pass of the loss (each pass streams the head) */ };

typedef struct {
    float *a, *b;             /* [r][in], [out][r], the model's row order */
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
    hearth_pool *pool;
    hearth_lora_train_opts o;
    float scale;
    int r, T_max, window;
    int adapter_off; /* the forward leaves the adapter out (the base model: DPO's reference) */
    int64_t steps;
    lt_pair *p;     /* [n_layers][NT] */
    float **wf;     /* [n_layers][NT]: the frozen weights in F32, [out][in] as stored */
    float *head_f;  /* [vocab][dim] */
    lt_layer *L;
    float *xf;      /* the last layer's output [T][dim] */
    /* scratch */
    float *xn, *dx, *dxm, *dxn, *tmp, *h, *dh, *dg, *du, *dq, *dk, *dv, *datt;
    float *uaT, *duaT, *dua, *gtmp, *bt;
    struct att_ws *att;      /* [nh]: the attention's workspaces, a head each */
    float *att_f;            /* their floats */
    float *logits, *dlog;    /* [HEAD_ROWS][vocab] */
    int *rows;               /* [T]: the rows with a label after them */
    void *mm_scratch;
    size_t bytes;
};

static const hearth_weight *frozen(const hearth_lora_trainer *t, int l, int tg) {
    const hearth_layer_weights *W = hearth_model_layer(t->m, l);
    const hearth_weight *w[NT] = {&W->wq, &W->wk, &W->wv, &W->wo, &W->w_gate, &W->w_up, &W->w_down};
    return w[tg];
}

static lt_pair *pair(const hearth_lora_trainer *t, int l, int tg) { return &t->p[(size_t)l * NT + tg]; }

/* ---- matmuls ---- */

/* y[T][N] = x[T][K] W^T with a model weight. */
static void mm_w(hearth_lora_trainer *t, float *y, const float *x, int T, const hearth_weight *w) {
    hearth_cpu_matmul(t->pool, y, x, T, w->data, (hearth_dtype)w->type, w->layout, w->cols, w->rows, t->mm_scratch);
}

/* y[T][N] = x[T][K] W^T with W F32 [N][K], on the pool or (NULL) the calling thread. */
static void mm_f(hearth_pool *pool, float *y, const float *x, int T, const float *w, int K, int N) {
    hearth_cpu_matmul(pool, y, x, T, w, HEARTH_DT_F32, HEARTH_LAYOUT_STORED, K, N, NULL);
}

static void transpose(float *dst, const float *src, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(size_t)j * rows + i] = src[(size_t)i * cols + j];
}

/* The CPU backend's vector kernels. */
static const hearth_vec_ops *vec(void) {
    static const hearth_vec_ops *v;
    if (!v) v = hearth_vec_get(NULL);
    return v;
}

/* y += a x. */
static void axpy(float *y, float a, const float *x, size_t n) {
    const size_t chunk = 1u << 30; /* the kernel counts in int */
    for (size_t i = 0; i < n; i += chunk) vec()->add_scaled(y + i, a, x + i, (int)(n - i < chunk ? n - i : chunk));
}

/* Row n of weight w in F32, whatever its type and layout. */
static void weight_row(const hearth_weight *w, int n, float *dst) {
    if (w->layout != HEARTH_LAYOUT_PANEL8) {
        hearth_cpu_dequantize_row((hearth_dtype)w->type, (const uint8_t *)w->data + (size_t)n * w->row_bytes, dst,
                                  w->cols);
        return;
    }
    const int blk = hearth_dtype_get(w->type)->block;
    uint8_t one[512];
    for (int b = 0; b < w->cols / blk; b++) {
        hearth_cpu_panel_block(w->data, (hearth_dtype)w->type, w->cols, w->rows, n, b, one);
        hearth_cpu_dequantize_row((hearth_dtype)w->type, one, dst + (size_t)b * blk, blk);
    }
}

/* W [N][K] in F32, NULL on out of memory. */
static float *dequantized(const hearth_weight *w) {
    float *d = malloc(sizeof(float) * (size_t)w->rows * w->cols);
    for (int n = 0; d && n < w->rows; n++) weight_row(w, n, d + (size_t)n * w->cols);
    return d;
}

/* y [T][N] (+)= x [T][K] B [K][N] (gemm.h), on the pool or (pool NULL) the calling thread. */
static void mm_nn(hearth_pool *pool, float *y, const float *x, int T, const float *b, int K, int N, int acc) {
    hearth_cpu_gemm_nn(pool, y, x, T, b, K, N, acc);
}

/* ---- norms, rope, SwiGLU ---- */

/* y = x / rms(x) * w per row, as ops/cpu's rmsnorm; rs[row] = 1 / rms. */
static void norm_fwd(float *y, float *rs, const float *x, const float *w, int rows, int dim, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double ss = 0.0;
        for (int i = 0; i < dim; i++) ss += (double)(xr[i] * xr[i]);
        float s = 1.0f / sqrtf((float)(ss / dim) + eps);
        rs[r] = s;
        for (int i = 0; i < dim; i++) y[(size_t)r * dim + i] = xr[i] * s * w[i];
    }
}

/* dx (= or, with acc, +=) the gradient through the norm of dy. */
static void norm_bwd(float *dx, const float *dy, const float *x, const float *rs, const float *w, int rows, int dim,
                     int acc) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim, *dyr = dy + (size_t)r * dim;
        float *dxr = dx + (size_t)r * dim;
        double dot = 0.0;
        for (int i = 0; i < dim; i++) dot += (double)w[i] * dyr[i] * xr[i];
        const float s = rs[r], c = (float)(dot * s * s * s / dim);
        for (int i = 0; i < dim; i++) {
            float g = s * w[i] * dyr[i] - xr[i] * c;
            dxr[i] = acc ? dxr[i] + g : g;
        }
    }
}

/* Rotate x [T][n_heads][hd] at positions 0..T-1, by -angle with inverse (the backward). */
static void rope(const hearth_rope *rp, float *x, int T, int n_heads, int hd, int inverse) {
    const int half = rp->rot_dim / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            float ang = (float)t * rp->inv_freq[i], cs = cosf(ang), sn = inverse ? -sinf(ang) : sinf(ang);
            int a = rp->neox ? i : 2 * i, b = rp->neox ? i + half : 2 * i + 1;
            for (int h = 0; h < n_heads; h++) {
                float *v = x + ((size_t)t * n_heads + h) * hd, x0 = v[a], x1 = v[b];
                v[a] = x0 * cs - x1 * sn;
                v[b] = x0 * sn + x1 * cs;
            }
        }
}


/* ---- attention: a task a query head, its matmuls on its thread ----
 * A block of QB query rows [i0, i1) sees keys [0, i1) (the causal half past
 * i1 is never computed; within the block, and outside a sliding window, the
 * mask drops it): S = Q K^T, P = softmax of the masked rows of S scale,
 * O = P V; the backward recomputes P from S and the kept log-sum-exp:
 * dP = dO V^T, dS = P (dP - rowsum(dO O)) scale, dQ = dS K, and over the
 * keys dK += dS^T Q, dV += P^T dO (each head's own, summed per KV head
 * after the tasks). */
enum { QB = 32 };

/* One head's workspace (in t->att_f, sized at creation for T_max). */
typedef struct att_ws {
    float *sc, *pr; /* [QB][T]: a block's scores (or dS), probabilities */
    float *tr;      /* [max(hd, QB)][T]: a transposed operand */
    float *qh, *kh, *vh, *oh, *dO, *dq, *dk, *dv; /* [T][hd] */
} att_ws;

/* How many floats att_ws takes, and its pointers into f. */
static size_t att_ws_floats(int T, int hd) {
    return 2 * (size_t)QB * T + (size_t)(hd > QB ? hd : QB) * T + 8 * (size_t)T * hd;
}
static void att_ws_at(att_ws *w, float *f, int T, int hd) {
    w->sc = f, f += (size_t)QB * T;
    w->pr = f, f += (size_t)QB * T;
    w->tr = f, f += (size_t)(hd > QB ? hd : QB) * T;
    float **r[] = {&w->qh, &w->kh, &w->vh, &w->oh, &w->dO, &w->dq, &w->dk, &w->dv};
    for (int i = 0; i < 8; i++) *r[i] = f, f += (size_t)T * hd;
}

static int att_lo(const hearth_lora_trainer *t, int i) {
    return t->window > 0 && i - t->window + 1 > 0 ? i - t->window + 1 : 0;
}

/* rows [T][ld] columns [off, off + hd) -> dst [T][hd], or back with scatter (added with acc). */
static void gather(float *dst, const float *src, int T, int ld, int off, int hd) {
    for (int i = 0; i < T; i++) memcpy(dst + (size_t)i * hd, src + (size_t)i * ld + off, sizeof(float) * hd);
}
static void scatter(float *dst, const float *src, int T, int ld, int off, int hd, int acc) {
    for (int i = 0; i < T; i++) {
        if (acc) axpy(dst + (size_t)i * ld + off, 1.0f, src + (size_t)i * hd, hd);
        else memcpy(dst + (size_t)i * ld + off, src + (size_t)i * hd, sizeof(float) * hd);
    }
}

/* P [i1 - i0][i1] (in w->pr) of query rows [i0, i1) of the head in w->qh,
 * w->kh; the forward (fwd) writes lse, the backward reads it. */
static void att_probs(const hearth_lora_trainer *t, att_ws *w, int i0, int i1, int hd, float *lse, int fwd) {
    const float sc = 1.0f / sqrtf((float)hd);
    const int nb = i1 - i0;
    mm_f(NULL, w->sc, w->qh + (size_t)i0 * hd, nb, w->kh, hd, i1);
    for (int r = 0; r < nb; r++) {
        const int i = i0 + r, lo = att_lo(t, i);
        const float *s = w->sc + (size_t)r * i1;
        float *p = w->pr + (size_t)r * i1;
        memset(p, 0, sizeof(float) * (size_t)i1);
        if (fwd) {
            float mx = -INFINITY;
            for (int k = lo; k <= i; k++) mx = s[k] * sc > mx ? s[k] * sc : mx;
            double sum = 0;
            for (int k = lo; k <= i; k++) sum += p[k] = expf(s[k] * sc - mx);
            const float inv = (float)(1.0 / sum);
            for (int k = lo; k <= i; k++) p[k] *= inv;
            lse[i] = mx + (float)log(sum);
        } else {
            for (int k = lo; k <= i; k++) p[k] = expf(s[k] * sc - lse[i]);
        }
    }
}

typedef struct {
    hearth_lora_trainer *t;
    lt_layer *A;
    const float *datt;
    int T;
} att_job;

static void att_fwd_head(void *arg, int h, int n_tasks) {
    const att_job *j = arg;
    const hearth_model_config *c = j->t->c;
    const int T = j->T, hd = c->head_dim, nh = c->n_heads, qd = nh * hd, kvd = c->n_kv_heads * hd,
              kv = h / (nh / c->n_kv_heads) * hd;
    att_ws *w = &j->t->att[h];
    gather(w->qh, j->A->q, T, qd, h * hd, hd);
    gather(w->kh, j->A->k, T, kvd, kv, hd);
    gather(w->vh, j->A->v, T, kvd, kv, hd);
    for (int i0 = 0; i0 < T; i0 += QB) {
        const int i1 = i0 + QB < T ? i0 + QB : T;
        att_probs(j->t, w, i0, i1, hd, j->A->lse + (size_t)h * T, 1);
        mm_nn(NULL, w->oh + (size_t)i0 * hd, w->pr, i1 - i0, w->vh, i1, hd, 0); /* P V */
    }
    scatter(j->A->att, w->oh, T, qd, h * hd, hd, 0);
}

/* dq of head h into t->dq; its dK, dV kept in its workspace. */
static void att_bwd_head(void *arg, int h, int n_tasks) {
    const att_job *j = arg;
    const hearth_model_config *c = j->t->c;
    const int T = j->T, hd = c->head_dim, nh = c->n_heads, qd = nh * hd, kvd = c->n_kv_heads * hd,
              kv = h / (nh / c->n_kv_heads) * hd;
    const float sc = 1.0f / sqrtf((float)hd);
    att_ws *w = &j->t->att[h];
    gather(w->qh, j->A->q, T, qd, h * hd, hd);
    gather(w->kh, j->A->k, T, kvd, kv, hd);
    gather(w->vh, j->A->v, T, kvd, kv, hd);
    gather(w->dO, j->datt, T, qd, h * hd, hd);
    memset(w->dk, 0, sizeof(float) * (size_t)T * hd);
    memset(w->dv, 0, sizeof(float) * (size_t)T * hd);
    for (int i0 = 0; i0 < T; i0 += QB) {
        const int i1 = i0 + QB < T ? i0 + QB : T, nb = i1 - i0;
        att_probs(j->t, w, i0, i1, hd, j->A->lse + (size_t)h * T, 0);
        mm_f(NULL, w->sc, w->dO + (size_t)i0 * hd, nb, w->vh, hd, i1); /* dP = dO V^T [nb][i1] */
        for (int r = 0; r < nb; r++) {
            const float *o = j->A->att + (size_t)(i0 + r) * qd + h * hd, *d = w->dO + (size_t)(i0 + r) * hd;
            float D = 0;
            for (int e = 0; e < hd; e++) D += d[e] * o[e];
            float *ds = w->sc + (size_t)r * i1;
            const float *p = w->pr + (size_t)r * i1;
            for (int k = 0; k < i1; k++) ds[k] = p[k] * (ds[k] - D) * sc; /* dS; 0 where P is */
        }
        mm_nn(NULL, w->dq + (size_t)i0 * hd, w->sc, nb, w->kh, i1, hd, 0); /* dQ = dS K */
        transpose(w->tr, w->pr, nb, i1);                                  /* P^T [i1][nb] */
        mm_nn(NULL, w->dv, w->tr, i1, w->dO + (size_t)i0 * hd, nb, hd, 1); /* dV += P^T dO */
        transpose(w->tr, w->sc, nb, i1);                                  /* dS^T [i1][nb] */
        mm_nn(NULL, w->dk, w->tr, i1, w->qh + (size_t)i0 * hd, nb, hd, 1); /* dK += dS^T Q */
    }
    scatter(j->t->dq, w->dq, T, qd, h * hd, hd, 0);
}

static void att_fwd(hearth_lora_trainer *t, lt_layer *A, int T) {
    att_job j = {t, A, NULL, T};
    hearth_pool_run(t->pool, att_fwd_head, &j, t->c->n_heads);
}

/* dq, dk, dv from datt. */
static void att_bwd(hearth_lora_trainer *t, const lt_layer *A, const float *datt, int T) {
    const hearth_model_config *c = t->c;
    const int hd = c->head_dim, nh = c->n_heads, kvd = c->n_kv_heads * hd, g = nh / c->n_kv_heads;
    att_job j = {t, (lt_layer *)A, datt, T};
    hearth_pool_run(t->pool, att_bwd_head, &j, nh);
    memset(t->dk, 0, sizeof(float) * (size_t)T * kvd);
    memset(t->dv, 0, sizeof(float) * (size_t)T * kvd);
    for (int h = 0; h < nh; h++) { /* in head order: the same sums whatever the threads */
        scatter(t->dk, t->att[h].dk, T, kvd, h / g * hd, hd, 1);
        scatter(t->dv, t->att[h].dv, T, kvd, h / g * hd, hd, 1);
    }
}

/* ---- the adapter's products ---- */

/* y [T][out] += scale B (A x), keeping A x. */
static void lora_fwd(hearth_lora_trainer *t, int l, int tg, const float *x, float *y, int T) {
    lt_pair *p = pair(t, l, tg);
    if (!p->a || t->adapter_off) return;
    float *ua = t->L[l].ua[tg];
    mm_f(t->pool, ua, x, T, p->a, p->in, t->r);
    transpose(t->bt, p->b, p->out, t->r); /* B^T [r][out], scaled */
    for (size_t i = 0; i < (size_t)t->r * p->out; i++) t->bt[i] *= t->scale;
    mm_nn(t->pool, y, ua, T, t->bt, t->r, p->out, 1);
}

/* The gradient of A and B from dy [T][out] (x: the input, [T][in]), and
 * dx [T][in] += its part through the adapter. */
static void lora_bwd(hearth_lora_trainer *t, int l, int tg, const float *x, const float *dy, float *dx, int T) {
    lt_pair *p = pair(t, l, tg);
    if (!p->a) return;
    const int r = t->r;
    transpose(t->uaT, t->L[l].ua[tg], T, r);
    mm_nn(t->pool, t->gtmp, t->uaT, r, dy, T, p->out, 0); /* (A x)^T dy: [r][out] */
    for (int j = 0; j < r; j++)
        for (int o = 0; o < p->out; o++) p->gb[(size_t)o * r + j] += t->scale * t->gtmp[(size_t)j * p->out + o];
    transpose(t->bt, p->b, p->out, r);
    mm_f(t->pool, t->dua, dy, T, t->bt, p->out, r); /* dy B: [T][r] */
    for (size_t i = 0; i < (size_t)T * r; i++) t->dua[i] *= t->scale;
    transpose(t->duaT, t->dua, T, r);
    mm_nn(t->pool, p->ga, t->duaT, r, x, T, p->in, 1); /* += d(A x)^T x: [r][in] */
    mm_nn(t->pool, dx, t->dua, T, p->a, r, p->in, 1);  /* dx += d(A x) A */
}

/* dx [T][in] = dy [T][out] W (+ the adapter's part), for target tg of layer
 * l whose input is x; acc: add to dx instead. */
static void proj_bwd(hearth_lora_trainer *t, int l, int tg, const float *x, const float *dy, float *dx, int T,
                     int acc) {
    const hearth_weight *w = frozen(t, l, tg);
    mm_nn(t->pool, dx, dy, T, t->wf[(size_t)l * NT + tg], w->rows, w->cols, acc); /* dy W */
    lora_bwd(t, l, tg, x, dy, dx, T);
}

/* ---- forward and backward of a sequence ---- */

static void layer_fwd(hearth_lora_trainer *t, int l, const float *x, float *y, int T) {
    const hearth_model_config *c = t->c;
    const hearth_layer_weights *W = hearth_model_layer(t->m, l);
    const int dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd,
              kvd = nkv * hd, ffn = c->intermediate_size;
    const float eps = c->rms_norm_eps;
    lt_layer *A = &t->L[l];
    memcpy(A->x, x, sizeof(float) * (size_t)T * dim); /* x may be y: read A->x from here on */
    norm_fwd(t->xn, A->r1, A->x, W->attn_norm, T, dim, eps);
    float *qk[2] = {A->q, A->k};
    mm_w(t, A->q, t->xn, T, &W->wq);
    mm_w(t, A->k, t->xn, T, &W->wk);
    mm_w(t, A->v, t->xn, T, &W->wv);
    for (int tg = HEARTH_LORA_T_Q; tg <= HEARTH_LORA_T_V; tg++)
        lora_fwd(t, l, tg, t->xn, tg == HEARTH_LORA_T_Q ? A->q : tg == HEARTH_LORA_T_K ? A->k : A->v, T);
    if (W->bq)
        for (int i = 0; i < T; i++) {
            axpy(A->q + (size_t)i * qd, 1.0f, W->bq, qd);
            axpy(A->k + (size_t)i * kvd, 1.0f, W->bk, kvd);
            axpy(A->v + (size_t)i * kvd, 1.0f, W->bv, kvd);
        }
    if (W->q_norm) {
        memcpy(A->qpre, A->q, sizeof(float) * (size_t)T * qd);
        memcpy(A->kpre, A->k, sizeof(float) * (size_t)T * kvd);
        norm_fwd(qk[0], A->rq, A->qpre, W->q_norm, T * nh, hd, eps);
        norm_fwd(qk[1], A->rk, A->kpre, W->k_norm, T * nkv, hd, eps);
    }
    rope(hearth_model_rope(t->m), A->q, T, nh, hd, 0);
    rope(hearth_model_rope(t->m), A->k, T, nkv, hd, 0);
    att_fwd(t, A, T);
    mm_w(t, A->xm, A->att, T, &W->wo);
    lora_fwd(t, l, HEARTH_LORA_T_O, A->att, A->xm, T);
    axpy(A->xm, 1.0f, A->x, (size_t)T * dim);
    norm_fwd(t->xn, A->r2, A->xm, W->ffn_norm, T, dim, eps);
    mm_w(t, A->g, t->xn, T, &W->w_gate);
    mm_w(t, A->u, t->xn, T, &W->w_up);
    lora_fwd(t, l, HEARTH_LORA_T_GATE, t->xn, A->g, T);
    lora_fwd(t, l, HEARTH_LORA_T_UP, t->xn, A->u, T);
    vec()->swiglu(t->h, A->g, A->u, T * ffn);
    mm_w(t, y, t->h, T, &W->w_down);
    lora_fwd(t, l, HEARTH_LORA_T_DOWN, t->h, y, T);
    axpy(y, 1.0f, A->xm, (size_t)T * dim);
}

/* dx [T][dim]: the gradient of layer l's output in, of its input out. */
static void layer_bwd(hearth_lora_trainer *t, int l, float *dx, int T) {
    const hearth_model_config *c = t->c;
    const hearth_layer_weights *W = hearth_model_layer(t->m, l);
    const int dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd,
              kvd = nkv * hd, ffn = c->intermediate_size;
    const lt_layer *A = &t->L[l];
    /* feed-forward: y = xm + down(silu(g) u) */
    vec()->swiglu(t->h, A->g, A->u, T * ffn);
    proj_bwd(t, l, HEARTH_LORA_T_DOWN, t->h, dx, t->dh, T, 0);
    vec()->swiglu_bwd(t->dg, t->du, A->g, A->u, t->dh, T * ffn);
    for (int i = 0; i < T; i++) /* the norm's output again: x r w */
        for (int e = 0; e < dim; e++)
            t->xn[(size_t)i * dim + e] = A->xm[(size_t)i * dim + e] * A->r2[i] * W->ffn_norm[e];
    proj_bwd(t, l, HEARTH_LORA_T_GATE, t->xn, t->dg, t->dxn, T, 0);
    proj_bwd(t, l, HEARTH_LORA_T_UP, t->xn, t->du, t->dxn, T, 1);
    memcpy(t->dxm, dx, sizeof(float) * (size_t)T * dim);
    norm_bwd(t->dxm, t->dxn, A->xm, A->r2, W->ffn_norm, T, dim, 1);
    /* attention: xm = x + o(att) */
    proj_bwd(t, l, HEARTH_LORA_T_O, A->att, t->dxm, t->datt, T, 0);
    att_bwd(t, A, t->datt, T);
    rope(hearth_model_rope(t->m), t->dq, T, nh, hd, 1);
    rope(hearth_model_rope(t->m), t->dk, T, nkv, hd, 1);
    if (W->q_norm) { /* through the head norms, in place via tmp */
        norm_bwd(t->tmp, t->dq, A->qpre, A->rq, W->q_norm, T * nh, hd, 0);
        memcpy(t->dq, t->tmp, sizeof(float) * (size_t)T * qd);
        norm_bwd(t->tmp, t->dk, A->kpre, A->rk, W->k_norm, T * nkv, hd, 0);
        memcpy(t->dk, t->tmp, sizeof(float) * (size_t)T * kvd);
    }
    for (int i = 0; i < T; i++)
        for (int e = 0; e < dim; e++)
            t->xn[(size_t)i * dim + e] = A->x[(size_t)i * dim + e] * A->r1[i] * W->attn_norm[e];
    proj_bwd(t, l, HEARTH_LORA_T_Q, t->xn, t->dq, t->dxn, T, 0);
    proj_bwd(t, l, HEARTH_LORA_T_K, t->xn, t->dk, t->dxn, T, 1);
    proj_bwd(t, l, HEARTH_LORA_T_V, t->xn, t->dv, t->dxn, T, 1);
    memcpy(dx, t->dxm, sizeof(float) * (size_t)T * dim);
    norm_bwd(dx, t->dxn, A->x, A->r1, W->attn_norm, T, dim, 1);
}

/* What the head computes of a sequence: the cross-entropy of token i (from
 * row i - 1) summed over the labels into labels, over every token into
 * all_sum with all; with grad, the gradient of sum_i w_i CE_i (w_i = gs for a
 * label, 0 otherwise, unless w is given) at the last layer's output. label
 * NULL: none. */
typedef struct {
    const uint8_t *label;
    int all, grad;
    const float *w;
    float gs;
    double labels, all_sum;
} head_job;

static int head_label(const head_job *h, int i) { return h->label && h->label[i]; }
static float head_weight(const head_job *h, int i) { return h->w ? h->w[i] : head_label(h, i) ? h->gs : 0.0f; }

/* The head over the rows it needs, a pass of HEAD_ROWS at a time; dx [T][dim]
 * gets the gradient (zero at the other rows). */
static void head(hearth_lora_trainer *t, const int32_t *tokens, int T, head_job *h, float *dx) {
    const hearth_model_config *c = t->c;
    const int dim = c->hidden_size, V = c->vocab_size;
    int n = 0;
    for (int i = 0; i + 1 < T; i++)
        if (head_label(h, i + 1) || h->all || (h->grad && head_weight(h, i + 1) != 0)) t->rows[n++] = i;
    memset(dx, 0, sizeof(float) * (size_t)T * dim);
    float rs[HEAD_ROWS];
    for (int c0 = 0; c0 < n; c0 += HEAD_ROWS) {
        const int C = n - c0 < HEAD_ROWS ? n - c0 : HEAD_ROWS;
        for (int j = 0; j < C; j++)
            memcpy(t->dxm + (size_t)j * dim, t->xf + (size_t)t->rows[c0 + j] * dim, sizeof(float) * dim);
        norm_fwd(t->xn, rs, t->dxm, hearth_model_out_norm(t->m), C, dim, c->rms_norm_eps);
        mm_w(t, t->logits, t->xn, C, hearth_model_head(t->m));
        for (int j = 0; j < C; j++) {
            const float *z = t->logits + (size_t)j * V;
            float *dz = t->dlog + (size_t)j * V, mx = -INFINITY;
            for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
            double sum = 0;
            for (int v = 0; v < V; v++) sum += dz[v] = expf(z[v] - mx);
            const int i = t->rows[c0 + j] + 1, y = tokens[i];
            const double ce = mx + log(sum) - z[y];
            if (head_label(h, i)) h->labels += ce;
            h->all_sum += ce;
            if (!h->grad) continue;
            const float g = head_weight(h, i), inv = (float)(1.0 / sum);
            for (int v = 0; v < V; v++) dz[v] *= inv * g;
            dz[y] -= g;
        }
        if (!h->grad) continue;
        mm_nn(t->pool, t->dxn, t->dlog, C, t->head_f, V, dim, 0);
        norm_bwd(t->xn, t->dxn, t->dxm, rs, hearth_model_out_norm(t->m), C, dim, 0);
        for (int j = 0; j < C; j++)
            memcpy(dx + (size_t)t->rows[c0 + j] * dim, t->xn + (size_t)j * dim, sizeof(float) * dim);
    }
}

/* The forward (with the adapter unless adapter_off), the head's job, and
 * with h->grad the backward. */
static hearth_status run(hearth_lora_trainer *t, const int32_t *tokens, int n, head_job *h, hearth_err *err) {
    const hearth_model_config *c = t->c;
    const int dim = c->hidden_size;
    if (n < 2 || n > t->T_max)
        return hearth_err_set(err, HEARTH_EINVAL, "train: a sequence of %d tokens (2 .. %d)", n, t->T_max);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return hearth_err_set(err, HEARTH_ERANGE, "train: token id %d out of range [0, %d)", tokens[i],
                                  c->vocab_size);
    float *x = t->dx; /* the residual stream, layer by layer (dx is free until the backward) */
    for (int i = 0; i < n; i++) weight_row(hearth_model_embedding(t->m), tokens[i], x + (size_t)i * dim);
    for (int l = 0; l < c->n_layers; l++) layer_fwd(t, l, l ? t->xf : x, t->xf, n);
    head(t, tokens, n, h, t->dx);
    for (int l = c->n_layers - 1; h->grad && l >= 0; l--) layer_bwd(t, l, t->dx, n); /* the head scaled it */
    return HEARTH_OK;
}

hearth_status hearth_lora_trainer_accumulate(hearth_lora_trainer *t, const int32_t *tokens, const uint8_t *label,
                                             int n, float grad_scale, double *loss_sum, hearth_err *err) {
    head_job h = {.label = label, .grad = 1, .gs = grad_scale};
    hearth_status st = run(t, tokens, n, &h, err);
    *loss_sum = h.labels;
    return st;
}

hearth_status hearth_lora_trainer_logp(hearth_lora_trainer *t, const int32_t *tokens, const uint8_t *label, int n,
                                       int with_adapter, double *logp_sum, double *logp_all, hearth_err *err) {
    head_job h = {.label = label, .all = logp_all != NULL};
    t->adapter_off = !with_adapter;
    hearth_status st = run(t, tokens, n, &h, err);
    t->adapter_off = 0;
    *logp_sum = -h.labels;
    if (logp_all) *logp_all = -h.all_sum;
    return st;
}

hearth_status hearth_lora_trainer_accumulate_w(hearth_lora_trainer *t, const int32_t *tokens, const float *w, int n,
                                               hearth_err *err) {
    head_job h = {.grad = 1, .w = w}; /* no labels: only the weights */
    return run(t, tokens, n, &h, err);
}

/* ---- AdamW ---- */

static double sumsq(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* torch.optim.AdamW's update of n parameters (decoupled decay, then the
 * bias-corrected step), the gradient scaled by gs first. */
static void adamw(const hearth_lora_trainer *t, float *w, float *g, float *m, float *v, size_t n, float lr, float gs) {
    const hearth_lora_train_opts *o = &t->o;
    const double bc1 = 1.0 - pow(o->beta1, (double)t->steps), bc2 = 1.0 - pow(o->beta2, (double)t->steps);
    const float step = (float)(lr / bc1), rbc2 = (float)(1.0 / sqrt(bc2)), decay = 1.0f - lr * o->weight_decay;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] * gs;
        w[i] *= decay;
        m[i] = o->beta1 * m[i] + (1.0f - o->beta1) * gi;
        v[i] = o->beta2 * v[i] + (1.0f - o->beta2) * gi * gi;
        w[i] -= step * m[i] / (sqrtf(v[i]) * rbc2 + o->eps);
        g[i] = 0;
    }
}

void hearth_lora_trainer_step(hearth_lora_trainer *t, float lr, double *grad_norm) {
    const int n = t->c->n_layers * NT;
    double ss = 0;
    for (int i = 0; i < n; i++)
        if (t->p[i].a)
            ss += sumsq(t->p[i].ga, (size_t)t->r * t->p[i].in) + sumsq(t->p[i].gb, (size_t)t->p[i].out * t->r);
    const double norm = sqrt(ss);
    if (grad_norm) *grad_norm = norm;
    /* torch.nn.utils.clip_grad_norm_'s factor */
    const float gs = t->o.max_grad_norm > 0 && norm > t->o.max_grad_norm ? (float)(t->o.max_grad_norm / (norm + 1e-6))
                                                                        : 1.0f;
    t->steps++;
    for (int i = 0; i < n; i++) {
        lt_pair *p = &t->p[i];
        if (!p->a) continue;
        adamw(t, p->a, p->ga, p->ma, p->va, (size_t)t->r * p->in, lr, gs);
        adamw(t, p->b, p->gb, p->mb, p->vb, (size_t)p->out * t->r, lr, gs);
    }
}

/* ---- making and freeing ---- */

/* n floats, zeroed, counted in t->bytes; NULL on out of memory. */
static float *take(hearth_lora_trainer *t, size_t n) {
    t->bytes += sizeof(float) * n;
    return calloc(n ? n : 1, sizeof(float));
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
            if (!p->a || !p->b || !p->ga || !p->gb || !p->ma || !p->va || !p->mb || !p->vb)
                return hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory for the adapter");
            if (init) {
                memcpy(p->a, init->a[l * NT + tg], sizeof(float) * na);
                for (int o = 0; o < p->out; o++)
                    memcpy(p->b + (size_t)o * r,
                           init->b[l * NT + tg] + (size_t)hearth_model_lora_file_row(t->m, tg, o) * r,
                           sizeof(float) * r);
            } else { /* PEFT: kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); B = 0 */
                const float bound = 1.0f / sqrtf((float)p->in);
                for (size_t i = 0; i < na; i++)
                    p->a[i] = bound * (float)(((splitmix(&seed) >> 11) * 0x1.0p-53) * 2.0 - 1.0);
            }
        }
    return HEARTH_OK;
}

hearth_status hearth_lora_trainer_new(hearth_lora_trainer **out, hearth_model *m, hearth_pool *pool,
                                      const hearth_lora_train_opts *opts, const char *init_dir, hearth_err *err) {
    *out = NULL;
    if (!hearth_model_layer(m, 0) || hearth_model_on_device(m))
        return hearth_err_set(err, HEARTH_ENOTSUP, "train: LoRA training runs on the CPU backend (--device cpu)");
    if (opts->max_len < 2) return hearth_err_set(err, HEARTH_EINVAL, "train: max_len %d", opts->max_len);
    hearth_lora_pairs init = {0};
    hearth_status st = HEARTH_OK;
    if (init_dir && (st = hearth_lora_pairs_read(&init, m, init_dir, err))) return st;
    hearth_lora_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        hearth_lora_pairs_free(&init);
        return hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory");
    }
    t->m = m, t->c = hearth_model_config_get(m), t->pool = pool, t->o = *opts;
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
    t->T_max = t->o.max_len;
    t->window = c->sliding_window > 0 ? c->sliding_window : 0;
    const int L = c->n_layers, T = t->T_max, dim = c->hidden_size, hd = c->head_dim, nh = c->n_heads,
              nkv = c->n_kv_heads, qd = nh * hd, kvd = nkv * hd, ffn = c->intermediate_size, V = c->vocab_size;
    int wide = ffn > qd ? ffn : qd;
    wide = wide > dim ? wide : dim;
    t->p = calloc((size_t)L * NT, sizeof *t->p);
    t->wf = calloc((size_t)L * NT, sizeof *t->wf);
    t->L = calloc((size_t)L, sizeof *t->L);
    int ok = t->p && t->wf && t->L;
    if (ok && (st = make_pairs(t, init_dir ? &init : NULL, err))) ok = -1;
    hearth_lora_pairs_free(&init);
    size_t mm_bytes = 0;
    for (int l = 0; ok > 0 && l < L; l++) {
        for (int tg = 0; ok && tg < NT; tg++) {
            const hearth_weight *w = frozen(t, l, tg);
            ok = (t->wf[(size_t)l * NT + tg] = dequantized(w)) != NULL;
            t->bytes += sizeof(float) * (size_t)w->rows * w->cols;
            size_t b = hearth_cpu_matmul_scratch_bytes((hearth_dtype)w->type, T, w->cols);
            mm_bytes = b > mm_bytes ? b : mm_bytes;
        }
        lt_layer *A = &t->L[l];
        const int qkn = hearth_model_layer(m, l)->q_norm != NULL;
        A->x = take(t, (size_t)T * dim), A->r1 = take(t, T), A->q = take(t, (size_t)T * qd);
        A->k = take(t, (size_t)T * kvd), A->v = take(t, (size_t)T * kvd), A->att = take(t, (size_t)T * qd);
        A->lse = take(t, (size_t)nh * T), A->xm = take(t, (size_t)T * dim), A->r2 = take(t, T);
        A->g = take(t, (size_t)T * ffn), A->u = take(t, (size_t)T * ffn);
        ok = ok && A->x && A->r1 && A->q && A->k && A->v && A->att && A->lse && A->xm && A->r2 && A->g && A->u;
        if (qkn) {
            A->qpre = take(t, (size_t)T * qd), A->rq = take(t, (size_t)T * nh);
            A->kpre = take(t, (size_t)T * kvd), A->rk = take(t, (size_t)T * nkv);
            ok = ok && A->qpre && A->rq && A->kpre && A->rk;
        }
        for (int tg = 0; ok && tg < NT; tg++)
            if (pair(t, l, tg)->a) ok = (A->ua[tg] = take(t, (size_t)T * t->r)) != NULL;
    }
    if (ok > 0) {
        const hearth_weight *hw = hearth_model_head(m);
        ok = (t->head_f = dequantized(hw)) != NULL;
        t->bytes += sizeof(float) * (size_t)hw->rows * hw->cols;
        size_t b = hearth_cpu_matmul_scratch_bytes((hearth_dtype)hw->type, HEAD_ROWS, hw->cols);
        mm_bytes = b > mm_bytes ? b : mm_bytes;
        const size_t TW = (size_t)T * wide;
        t->xf = take(t, (size_t)T * dim);
        t->xn = take(t, TW), t->dx = take(t, (size_t)T * dim), t->dxm = take(t, (size_t)T * dim);
        t->dxn = take(t, TW), t->tmp = take(t, TW), t->h = take(t, (size_t)T * ffn), t->dh = take(t, (size_t)T * ffn);
        t->dg = take(t, (size_t)T * ffn), t->du = take(t, (size_t)T * ffn), t->dq = take(t, (size_t)T * qd);
        t->dk = take(t, (size_t)T * kvd), t->dv = take(t, (size_t)T * kvd), t->datt = take(t, (size_t)T * qd);
        t->uaT = take(t, (size_t)T * t->r);
        t->duaT = take(t, (size_t)T * t->r), t->dua = take(t, (size_t)T * t->r);
        t->gtmp = take(t, (size_t)wide * t->r), t->bt = take(t, (size_t)wide * t->r);
        t->att_f = take(t, (size_t)nh * att_ws_floats(T, hd));
        t->att = calloc((size_t)nh, sizeof *t->att);
        for (int h = 0; t->att_f && t->att && h < nh; h++)
            att_ws_at(&t->att[h], t->att_f + (size_t)h * att_ws_floats(T, hd), T, hd);
        t->logits = take(t, (size_t)HEAD_ROWS * V), t->dlog = take(t, (size_t)HEAD_ROWS * V);
        t->rows = calloc((size_t)T, sizeof(int));
        t->mm_scratch = mm_bytes ? aligned_alloc(64, (mm_bytes + 63) / 64 * 64) : NULL;
        ok = ok && t->xf && t->xn && t->dx && t->dxm && t->dxn && t->tmp && t->h && t->dh && t->dg &&
             t->du && t->dq && t->dk && t->dv && t->datt && t->uaT && t->duaT && t->dua &&
             t->gtmp && t->bt && t->att_f && t->att && t->logits && t->dlog && t->rows &&
             (t->mm_scratch || !mm_bytes);
    }
    if (ok <= 0) {
        const double gib = t->bytes / 1073741824.0;
        hearth_lora_trainer_free(t);
        return ok < 0 ? st : hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory (%.2f GiB of activations, "
                                                                "gradients and F32 weights asked so far)", gib);
    }
    *out = t;
    return HEARTH_OK;
}

void hearth_lora_trainer_free(hearth_lora_trainer *t) {
    if (!t) return;
    const int L = t->c->n_layers;
    for (int i = 0; t->p && i < L * NT; i++) {
        lt_pair *p = &t->p[i];
        free(p->a), free(p->b), free(p->ga), free(p->gb), free(p->ma), free(p->va), free(p->mb), free(p->vb);
    }
    for (int i = 0; t->wf && i < L * NT; i++) free(t->wf[i]);
    for (int l = 0; t->L && l < L; l++) {
        lt_layer *A = &t->L[l];
        float *f[] = {A->x, A->r1, A->qpre, A->rq, A->kpre, A->rk, A->q, A->k, A->v, A->att, A->lse, A->xm, A->r2,
                      A->g, A->u};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
        for (int tg = 0; tg < NT; tg++) free(A->ua[tg]);
    }
    float *f[] = {t->head_f, t->xf, t->xn, t->dx, t->dxm, t->dxn, t->tmp, t->h, t->dh, t->dg, t->du, t->dq,
                  t->dk, t->dv, t->datt, t->uaT, t->duaT, t->dua, t->gtmp, t->bt, t->att_f,
                  t->logits, t->dlog};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    free(t->att), free(t->rows), free(t->mm_scratch), free(t->p), free(t->wf), free(t->L);
    free(t);
}

size_t hearth_lora_trainer_bytes(const hearth_lora_trainer *t) { return t->bytes; }

int hearth_lora_trainer_get(const hearth_lora_trainer *t, int l, int tg, float *a, float *b, float *ga, float *gb) {
    if (l < 0 || l >= t->c->n_layers || tg < 0 || tg >= NT || !pair(t, l, tg)->a) return 0;
    const lt_pair *p = pair(t, l, tg);
    const int r = t->r;
    if (a) memcpy(a, p->a, sizeof(float) * (size_t)r * p->in);
    if (ga) memcpy(ga, p->ga, sizeof(float) * (size_t)r * p->in);
    for (int o = 0; o < p->out; o++) {
        const size_t fr = (size_t)hearth_model_lora_file_row(t->m, tg, o) * r;
        if (b) memcpy(b + fr, p->b + (size_t)o * r, sizeof(float) * r);
        if (gb) memcpy(gb + fr, p->gb + (size_t)o * r, sizeof(float) * r);
    }
    return 1;
}

float *hearth_lora_trainer_tensor(hearth_lora_trainer *t, int l, int tg, int what, int *n) {
    if (l < 0 || l >= t->c->n_layers || tg < 0 || tg >= NT || what < 0 || what > 3 || !pair(t, l, tg)->a) return NULL;
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
