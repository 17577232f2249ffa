/* train.c - the CPU backend of hearth_train_ops (ops/ops.h): what the LoRA
 * trainer's backward and optimizer take, on the context's thread pool.
 *
 * Products go through the inference matmul (x W^T, a dot product a
 * output) or hearth_cpu_gemm_nn (y = x B with B as stored, ops/cpu/gemm.h),
 * whichever takes the operands as they lie; a transposed operand is
 * materialized only where it is the small one. The attention runs a task a
 * query head (blocked f32 products, the probabilities recomputed from the
 * kept log-sum-exp in the backward, as flash attention's backward does). */
#include "ops/cpu/ops_cpu.h"

#include "core/log.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/panel.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/train.h"
#include "ops/cpu/vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static hearth_pool *pool_of(void *ctx) { return hearth_cpu_ctx_pool(ctx); }

static const hearth_vec_ops *vec(void) {
    static const hearth_vec_ops *v;
    if (!v) v = hearth_vec_get(NULL);
    return v;
}

/* y += a x over n that may pass an int. */
static void add_scaled(float *y, float a, const float *x, size_t n) {
    const size_t chunk = 1u << 30;
    for (size_t i = 0; i < n; i += chunk) vec()->add_scaled(y + i, a, x + i, (int)(n - i < chunk ? n - i : chunk));
}

/* dst [cols][rows] = a src^T of src [rows][cols]. */
static void transpose(float *dst, const float *src, int rows, int cols, float a) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(size_t)j * rows + i] = a * src[(size_t)i * cols + j];
}

/* y[T][N] = x[T][K] W^T with W f32 [N][K], on pool or (NULL) the calling thread. */
static void mm_dot(hearth_pool *pool, float *y, const float *x, int T, const float *w, int K, int N) {
    hearth_cpu_matmul(pool, y, x, T, w, HEARTH_DT_F32, HEARTH_LAYOUT_STORED, K, N, NULL);
}

/* ---- gemm ---- */

/* n floats of a product's scratch, or NULL with the failure noted in the context (hearth_train_ops.failed). */
static float *scratch(void *ctx, size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) hearth_cpu_ctx_train_oom(ctx, sizeof(float) * n);
    return p;
}

static void cpu_gemm(void *ctx, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                     float alpha, float beta) {
    hearth_pool *pool = pool_of(ctx);
    HEARTH_ASSERT(beta == 0.0f || beta == 1.0f);
    const int acc = beta != 0.0f;
    if (!ta && tb && alpha == 1.0f && !acc) { /* x W^T: the inference product */
        mm_dot(pool, c, a, M, b, K, N);
        return;
    }
    if (ta && !tb && (size_t)M > (size_t)N) { /* A^T B with A the large one: (B^T A)^T, only B moved */
        float *bt = scratch(ctx, (size_t)K * N), *tmp = scratch(ctx, (size_t)N * M);
        if (!bt || !tmp) {
            free(bt), free(tmp);
            return;
        }
        transpose(bt, b, K, N, 1.0f);
        hearth_cpu_gemm_nn(pool, tmp, bt, N, a, K, M, 0); /* [N][M] */
        for (int j = 0; j < N; j++)
            for (int i = 0; i < M; i++) {
                float *y = c + (size_t)i * N + j;
                *y = (acc ? *y : 0.0f) + alpha * tmp[(size_t)j * M + i];
            }
        free(bt), free(tmp);
        return;
    }
    if (!ta && !tb && N < 48) { /* a narrow B (an adapter's rank): as dot products against B^T, which is small */
        float *bt = scratch(ctx, (size_t)K * N), *y = acc ? scratch(ctx, (size_t)M * N) : c;
        if (!bt || !y) {
            free(bt);
            if (y != c) free(y);
            return;
        }
        transpose(bt, b, K, N, 1.0f);
        mm_dot(pool, y, a, M, bt, K, N);
        if (acc) add_scaled(c, alpha, y, (size_t)M * N), free(y);
        else if (alpha != 1.0f)
            for (size_t i = 0; i < (size_t)M * N; i++) c[i] *= alpha;
        free(bt);
        return;
    }
    /* op(A) and op(B) as gemm_nn takes them, alpha folded into the one moved (A first), else applied after */
    const int scale_after = alpha != 1.0f && !ta && !tb;
    float *am = ta ? scratch(ctx, (size_t)M * K) : NULL, *bm = tb ? scratch(ctx, (size_t)K * N) : NULL;
    float *tmp = scale_after && acc ? scratch(ctx, (size_t)M * N) : NULL;
    if ((ta && !am) || (tb && !bm) || (scale_after && acc && !tmp)) {
        free(am), free(bm), free(tmp);
        return;
    }
    if (ta) transpose(am, a, K, M, alpha);
    if (tb) transpose(bm, b, N, K, ta ? 1.0f : alpha);
    if (tmp) { /* c += alpha A B through a temporary */
        hearth_cpu_gemm_nn(pool, tmp, a, M, b, K, N, 0);
        add_scaled(c, alpha, tmp, (size_t)M * N);
    } else {
        hearth_cpu_gemm_nn(pool, c, am ? am : a, M, bm ? bm : b, K, N, acc);
        if (scale_after)
            for (size_t i = 0; i < (size_t)M * N; i++) c[i] *= alpha;
    }
    free(am), free(bm), free(tmp);
}

/* ---- frozen weights for the backward ---- */

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

/* An F32 copy [rows][cols]: the backward's products are f32 on the CPU (an F32 weight's own rows). */
static void *cpu_weight_copy(void *ctx, const hearth_weight *w, size_t *bytes) {
    if (w->type == HEARTH_DT_F32 && w->layout == HEARTH_LAYOUT_STORED && w->row_bytes == sizeof(float) * w->cols) {
        *bytes = 0;
        return (void *)w->data;
    }
    *bytes = sizeof(float) * (size_t)w->rows * w->cols;
    float *d = malloc(*bytes);
    for (int n = 0; d && n < w->rows; n++) weight_row(w, n, d + (size_t)n * w->cols);
    return d;
}

static void cpu_matmul_t(void *ctx, float *dx, const float *dy, int T, const void *copy, const hearth_weight *w,
                         int acc) {
    hearth_cpu_gemm_nn(pool_of(ctx), dx, dy, T, copy, w->rows, w->cols, acc);
}

/* ---- norms, rope, SwiGLU ---- */

static void cpu_rmsnorm(void *ctx, float *y, float *rs, const float *x, const float *w, int rows, int dim,
                        float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double ss = 0.0;
        for (int i = 0; i < dim; i++) ss += (double)(xr[i] * xr[i]);
        float s = 1.0f / sqrtf((float)(ss / dim) + eps);
        rs[r] = s;
        for (int i = 0; i < dim; i++) y[(size_t)r * dim + i] = xr[i] * s * w[i];
    }
}

static void cpu_rmsnorm_bwd(void *ctx, float *dx, const float *dy, const float *x, const float *rs, const float *w,
                            int rows, int dim, int acc) {
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

static void cpu_rope(void *ctx, float *x, int T, int n_heads, int hd, const hearth_rope *rp, int inverse) {
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

static void cpu_swiglu_bwd(void *ctx, float *dg, float *du, const float *g, const float *u, const float *dh,
                           size_t n) {
    const size_t chunk = 1u << 30;
    for (size_t i = 0; i < n; i += chunk)
        vec()->swiglu_bwd(dg + i, du + i, g + i, u + i, dh + i, (int)(n - i < chunk ? n - i : chunk));
}

/* ---- attention: a task a query head, its products on its thread ----
 * A block of QB query rows [i0, i1) sees keys [0, i1) (the causal half past
 * i1 is never computed; within the block, and outside a sliding window, the
 * mask drops it): S = Q K^T, P = softmax of the masked rows of S scale,
 * O = P V; the backward recomputes P from S and the kept log-sum-exp:
 * dP = dO V^T, dS = P (dP - rowsum(dO O)) scale, dQ = dS K, and over the
 * keys dK += dS^T Q, dV += P^T dO (each head's own, summed per KV head
 * after the tasks, in head order). */
enum { QB = 32 };

/* One head's workspace. */
typedef struct {
    float *sc, *pr; /* [QB][T]: a block's scores (or dS), probabilities */
    float *tr;      /* [max(hd, QB)][T]: a transposed operand */
    float *qh, *kh, *vh, *oh, *dO, *dq, *dk, *dv; /* [T][hd] */
} att_ws;

static size_t att_ws_floats(int T, int hd) {
    return 2 * (size_t)QB * T + (size_t)(hd > QB ? hd : QB) * T + 8 * (size_t)T * hd;
}

static size_t cpu_attn_ws_bytes(int T_max, int nh, int nkv, int hd) {
    return sizeof(float) * (size_t)nh * att_ws_floats(T_max, hd);
}

/* Head h's workspace in ws, laid out for T rows. */
static att_ws ws_at(void *ws, int h, int T, int hd) {
    float *f = (float *)ws + (size_t)h * att_ws_floats(T, hd);
    att_ws w;
    w.sc = f, f += (size_t)QB * T;
    w.pr = f, f += (size_t)QB * T;
    w.tr = f, f += (size_t)(hd > QB ? hd : QB) * T;
    float **r[] = {&w.qh, &w.kh, &w.vh, &w.oh, &w.dO, &w.dq, &w.dk, &w.dv};
    for (int i = 0; i < 8; i++) *r[i] = f, f += (size_t)T * hd;
    return w;
}

typedef struct {
    float *out, *lse, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *o;
    int T, nh, nkv, hd, window;
    void *ws;
} att_job;

/* rows [T][ld] columns [off, off + hd) -> dst [T][hd], or back with scatter (added with acc). */
static void gather(float *dst, const float *src, int T, int ld, int off, int hd) {
    for (int i = 0; i < T; i++) memcpy(dst + (size_t)i * hd, src + (size_t)i * ld + off, sizeof(float) * hd);
}
static void scatter(float *dst, const float *src, int T, int ld, int off, int hd, int acc) {
    for (int i = 0; i < T; i++) {
        if (acc) add_scaled(dst + (size_t)i * ld + off, 1.0f, src + (size_t)i * hd, hd);
        else memcpy(dst + (size_t)i * ld + off, src + (size_t)i * hd, sizeof(float) * hd);
    }
}

/* P [i1 - i0][i1] (in w->pr) of query rows [i0, i1); the forward (fwd) writes lse, the backward reads it. */
static void att_probs(const att_job *j, const att_ws *w, int i0, int i1, float *lse, int fwd) {
    const int hd = j->hd, nb = i1 - i0;
    const float sc = 1.0f / sqrtf((float)hd);
    mm_dot(NULL, w->sc, w->qh + (size_t)i0 * hd, nb, w->kh, hd, i1);
    for (int r = 0; r < nb; r++) {
        const int i = i0 + r, lo = j->window > 0 && i - j->window + 1 > 0 ? i - j->window + 1 : 0;
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

/* Head h's q, k, v columns into its workspace. */
static att_ws att_load(const att_job *j, int h) {
    const int T = j->T, hd = j->hd, kvd = j->nkv * hd, kv = h / (j->nh / j->nkv) * hd;
    att_ws w = ws_at(j->ws, h, T, hd);
    gather(w.qh, j->q, T, j->nh * hd, h * hd, hd);
    gather(w.kh, j->k, T, kvd, kv, hd);
    gather(w.vh, j->v, T, kvd, kv, hd);
    return w;
}

static void att_fwd_head(void *arg, int h, int n_tasks) {
    const att_job *j = arg;
    const int T = j->T, hd = j->hd;
    att_ws w = att_load(j, h);
    for (int i0 = 0; i0 < T; i0 += QB) {
        const int i1 = i0 + QB < T ? i0 + QB : T;
        att_probs(j, &w, i0, i1, j->lse + (size_t)h * T, 1);
        hearth_cpu_gemm_nn(NULL, w.oh + (size_t)i0 * hd, w.pr, i1 - i0, w.vh, i1, hd, 0); /* P V */
    }
    scatter(j->out, w.oh, T, j->nh * hd, h * hd, hd, 0);
}

/* dq of head h into j->dq; its dK, dV kept in its workspace. */
static void att_bwd_head(void *arg, int h, int n_tasks) {
    const att_job *j = arg;
    const int T = j->T, hd = j->hd, qd = j->nh * hd;
    const float sc = 1.0f / sqrtf((float)hd);
    att_ws w = att_load(j, h);
    gather(w.dO, j->dout, T, qd, h * hd, hd);
    memset(w.dk, 0, sizeof(float) * (size_t)T * hd);
    memset(w.dv, 0, sizeof(float) * (size_t)T * hd);
    for (int i0 = 0; i0 < T; i0 += QB) {
        const int i1 = i0 + QB < T ? i0 + QB : T, nb = i1 - i0;
        att_probs(j, &w, i0, i1, (float *)j->lse + (size_t)h * T, 0);
        mm_dot(NULL, w.sc, w.dO + (size_t)i0 * hd, nb, w.vh, hd, i1); /* dP = dO V^T [nb][i1] */
        for (int r = 0; r < nb; r++) {
            const float *o = j->o + (size_t)(i0 + r) * qd + h * hd, *d = w.dO + (size_t)(i0 + r) * hd;
            float D = 0;
            for (int e = 0; e < hd; e++) D += d[e] * o[e];
            float *ds = w.sc + (size_t)r * i1;
            const float *p = w.pr + (size_t)r * i1;
            for (int k = 0; k < i1; k++) ds[k] = p[k] * (ds[k] - D) * sc; /* dS; 0 where P is */
        }
        hearth_cpu_gemm_nn(NULL, w.dq + (size_t)i0 * hd, w.sc, nb, w.kh, i1, hd, 0); /* dQ = dS K */
        transpose(w.tr, w.pr, nb, i1, 1.0f);                                         /* P^T [i1][nb] */
        hearth_cpu_gemm_nn(NULL, w.dv, w.tr, i1, w.dO + (size_t)i0 * hd, nb, hd, 1); /* dV += P^T dO */
        transpose(w.tr, w.sc, nb, i1, 1.0f);                                         /* dS^T [i1][nb] */
        hearth_cpu_gemm_nn(NULL, w.dk, w.tr, i1, w.qh + (size_t)i0 * hd, nb, hd, 1); /* dK += dS^T Q */
    }
    scatter(j->dq, w.dq, T, qd, h * hd, hd, 0);
}

static void cpu_attn(void *ctx, float *out, float *lse, const float *q, const float *k, const float *v, int T, int nh,
                     int nkv, int hd, int window, void *ws) {
    att_job j = {.out = out, .lse = lse, .q = q, .k = k, .v = v, .T = T, .nh = nh, .nkv = nkv, .hd = hd,
                 .window = window, .ws = ws};
    hearth_pool_run(pool_of(ctx), att_fwd_head, &j, nh);
}

static void cpu_attn_bwd(void *ctx, float *dq, float *dk, float *dv, const float *dout, const float *out,
                         const float *lse, const float *q, const float *k, const float *v, int T, int nh, int nkv,
                         int hd, int window, void *ws) {
    att_job j = {.lse = (float *)lse, .dq = dq, .q = q, .k = k, .v = v, .dout = dout, .o = out, .T = T, .nh = nh,
                 .nkv = nkv, .hd = hd, .window = window, .ws = ws};
    hearth_pool_run(pool_of(ctx), att_bwd_head, &j, nh);
    const int kvd = nkv * hd, g = nh / nkv;
    memset(dk, 0, sizeof(float) * (size_t)T * kvd);
    memset(dv, 0, sizeof(float) * (size_t)T * kvd);
    for (int h = 0; h < nh; h++) { /* in head order: the same sums whatever the threads */
        att_ws w = ws_at(ws, h, T, hd);
        scatter(dk, w.dk, T, kvd, h / g * hd, hd, 1);
        scatter(dv, w.dv, T, kvd, h / g * hd, hd, 1);
    }
}

/* ---- rows, the loss, vectors, AdamW ---- */

static void cpu_gather_rows(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim) {
    for (int j = 0; j < n; j++) memcpy(dst + (size_t)j * dim, src + (size_t)rows[j] * dim, sizeof(float) * dim);
}

static void cpu_scatter_rows(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim) {
    for (int j = 0; j < n; j++) memcpy(dst + (size_t)rows[j] * dim, src + (size_t)j * dim, sizeof(float) * dim);
}

static void cpu_cross_entropy(void *ctx, float *dz, double *ce, const float *z, const int32_t *y, const float *w,
                              int n, int V) {
    for (int j = 0; j < n; j++) {
        const float *zr = z + (size_t)j * V;
        float *dr = dz + (size_t)j * V, mx = -INFINITY;
        for (int v = 0; v < V; v++) mx = zr[v] > mx ? zr[v] : mx;
        const float zy = zr[y[j]];
        double sum = 0;
        if (w) /* exp(z - max) kept in dz (each read before it is written, so dz may be z) */
            for (int v = 0; v < V; v++) sum += dr[v] = expf(zr[v] - mx);
        else
            for (int v = 0; v < V; v++) sum += expf(zr[v] - mx);
        ce[j] = mx + log(sum) - zy;
        if (!w) continue;
        const float g = w[j], inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++) dr[v] *= inv * g;
        dr[y[j]] -= g;
    }
}

static void cpu_axpy(void *ctx, float *y, float a, const float *x, size_t n) { add_scaled(y, a, x, n); }

static void cpu_zero(void *ctx, void *p, size_t bytes) { memset(p, 0, bytes); }

static void cpu_sumsq(void *ctx, double *out, const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    *out += s;
}

static hearth_status cpu_failed(void *ctx, hearth_err *err) { return hearth_cpu_ctx_train_failed(ctx, err); }

static void cpu_adamw(void *ctx, float *w, float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                      float eps, float wd, float gs, double bc1, double bc2) {
    const float step = (float)(lr / bc1), rbc2 = (float)(1.0 / sqrt(bc2)), decay = 1.0f - lr * wd;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] * gs;
        w[i] *= decay;
        m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        w[i] -= step * m[i] / (sqrtf(v[i]) * rbc2 + eps);
        g[i] = 0;
    }
}

const hearth_train_ops hearth_cpu_train_ops = {
    .head_rows = 128, /* each pass streams the head's weights once */
    .gemm = cpu_gemm,
    .weight_copy = cpu_weight_copy,
    .matmul_t = cpu_matmul_t,
    .rmsnorm = cpu_rmsnorm,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .rope = cpu_rope,
    .swiglu_bwd = cpu_swiglu_bwd,
    .attn_ws_bytes = cpu_attn_ws_bytes,
    .attn = cpu_attn,
    .attn_bwd = cpu_attn_bwd,
    .gather_rows = cpu_gather_rows,
    .scatter_rows = cpu_scatter_rows,
    .cross_entropy = cpu_cross_entropy,
    .axpy = cpu_axpy,
    .zero = cpu_zero,
    .sumsq = cpu_sumsq,
    .adamw = cpu_adamw,
    .failed = cpu_failed,
};
