/* train_misc.cu - LoRA training's element-wise and row ops on CUDA
 * (hearth_train_ops, ops.h): rmsnorm with its backward, rope at positions
 * 0..T-1 and its inverse, the SwiGLU backward, row gather / scatter, the
 * cross-entropy loss with its gradient, axpy, zero, the sum of squares and
 * AdamW.
 *
 * Rounding follows the CPU backend where it is defined: rmsnorm sums f32
 * squares in double and rounds the mean to f32 (as rmsnorm.cu); row sums
 * that feed a gradient (rmsnorm_bwd's dot, the loss's sum of exponentials,
 * sumsq) are double; AdamW spells out each rounding (no fused
 * multiply-add), so it is the CPU's formula step by step. Every kernel is a
 * grid-stride loop or a block a row; none uses programmatic dependent launch
 * (cu_train_begin turns it off). */
#include "ops/cuda/train_cuda.h"

#define TR_NT 256

/* A grid of at most a few waves of TR_NT-thread blocks over n items (grid-stride loops cover the rest). */
static dim3 grid_for(const cu_launch *L, size_t n) {
    size_t b = (n + TR_NT - 1) / TR_NT, cap = (size_t)(L->n_sm > 0 ? L->n_sm : 1) * 16;
    return dim3((unsigned)(b < cap ? b : cap));
}

/* ---- rmsnorm --------------------------------------------------------------- */

/* A block a row: y = x s w, s = rs[row] = 1 / sqrt(mean(x^2) + eps). */
__global__ void __launch_bounds__(TR_NT) tr_rmsnorm_kernel(float *__restrict__ y, float *__restrict__ rs,
                                                           const float *__restrict__ x, const float *__restrict__ w,
                                                           int dim, float eps) {
    __shared__ double red[TR_NT / 32];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *yr = y + (size_t)blockIdx.x * dim;
    double ss = 0.0;
    for (int k = threadIdx.x; k < dim; k += TR_NT) ss += (double)(xr[k] * xr[k]);
    const float s = block_inv_rms<TR_NT>(ss, red, dim, eps);
    for (int k = threadIdx.x; k < dim; k += TR_NT) yr[k] = xr[k] * s * w[k];
    if (threadIdx.x == 0) rs[blockIdx.x] = s;
}

void cu_train_rmsnorm(void *ctx, float *y, float *rs, const float *x, const float *w, int rows, int dim, float eps) {
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_launch_k(&t.L, tr_rmsnorm_kernel, dim3(rows > 0 ? rows : 0), dim3(TR_NT), 0, y, rs, x, w, dim, eps);
    cu_train_end(&t, "train rmsnorm");
}

/* A block a row: with s = rs[row] and dot = sum w dy x (double), dx = s w dy - x dot s^3 / dim (acc: +=), in
 * the CPU's order, each f32 step rounded apart. */
__global__ void __launch_bounds__(TR_NT) tr_rmsnorm_bwd_kernel(float *dx, const float *__restrict__ dy,
                                                               const float *__restrict__ x,
                                                               const float *__restrict__ rs,
                                                               const float *__restrict__ w, int dim, int acc) {
    __shared__ double red[TR_NT / 32];
    const size_t o = (size_t)blockIdx.x * dim;
    double dot = 0.0;
    for (int k = threadIdx.x; k < dim; k += TR_NT) dot += (double)w[k] * dy[o + k] * x[o + k];
    dot = block_sum_d<TR_NT>(dot, red);
    const float s = rs[blockIdx.x];
    const float c = (float)(dot * s * s * s / dim);
    for (int k = threadIdx.x; k < dim; k += TR_NT) {
        const float g = __fsub_rn(__fmul_rn(__fmul_rn(s, w[k]), dy[o + k]), __fmul_rn(x[o + k], c));
        dx[o + k] = acc ? __fadd_rn(dx[o + k], g) : g;
    }
}

void cu_train_rmsnorm_bwd(void *ctx, float *dx, const float *dy, const float *x, const float *rs, const float *w,
                          int rows, int dim, int acc) {
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_launch_k(&t.L, tr_rmsnorm_bwd_kernel, dim3(rows > 0 ? rows : 0), dim3(TR_NT), 0, dx, dy, x, rs, w, dim, acc);
    cu_train_end(&t, "train rmsnorm_bwd");
}

/* ---- rope ------------------------------------------------------------------ */

/* Pair p of head h of row t (i = (t n_heads + h) half + p) turned by t inv_freq[p], or back with inverse. */
__global__ void tr_rope_kernel(float *x, int n_heads, int head_dim, const float *__restrict__ inv_freq, int half,
                               int neox, int inverse, size_t total) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int p = (int)(i % half);
        const size_t th = i / half;
        const int t = (int)(th / n_heads);
        float *v = x + th * head_dim;
        const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
        const float ang = (float)t * inv_freq[p];
        const float sn = sinf(ang), cs = cosf(ang);
        float x0 = v[a], x1 = v[b];
        rope_rotate_sc(x0, x1, inverse ? -sn : sn, cs);
        v[a] = x0;
        v[b] = x1;
    }
}

void cu_train_rope(void *ctx, float *x, int T, int n_heads, int head_dim, const hearth_rope *rope, int inverse) {
    HEARTH_ASSERT(rope->rot_dim <= head_dim && rope->rot_dim % 2 == 0);
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int half = rope->rot_dim / 2;
    const size_t total = (size_t)(T > 0 ? T : 0) * (size_t)n_heads * (size_t)half;
    cu_launch_k(&t.L, tr_rope_kernel, grid_for(&t.L, total), dim3(TR_NT), 0, x, n_heads, head_dim, rope->inv_freq,
                half, rope->neox, inverse, total);
    cu_train_end(&t, "train rope");
}

/* ---- swiglu backward ---------------------------------------------------------- */

/* h = silu(g) u: du = dh silu(g), dg = dh u sig (1 + g (1 - sig)). dh is read before dg is written (they may
 * alias). */
__global__ void tr_swiglu_bwd_kernel(float *dg, float *du, const float *g, const float *u, const float *dh, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float gi = g[i], ui = u[i], d = dh[i];
        const float sig = 1.0f / (1.0f + expf(-gi));
        du[i] = d * gi * sig;
        dg[i] = d * ui * sig * (1.0f + gi * (1.0f - sig));
    }
}

void cu_train_swiglu_bwd(void *ctx, float *dg, float *du, const float *g, const float *u, const float *dh, size_t n) {
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_launch_k(&t.L, tr_swiglu_bwd_kernel, grid_for(&t.L, n), dim3(TR_NT), 0, dg, du, g, u, dh, n);
    cu_train_end(&t, "train swiglu_bwd");
}

/* ---- rows --------------------------------------------------------------------- */

/* scatter 0: dst[j] = src[rows[j]]; 1: dst[rows[j]] = src[j] (rows of dim floats, j < n). */
__global__ void tr_rows_kernel(float *__restrict__ dst, const float *__restrict__ src,
                               const int32_t *__restrict__ rows, int dim, size_t total, int scatter) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = i / dim, d = i % dim, r = (size_t)rows[j];
        if (scatter) dst[r * dim + d] = src[i];
        else dst[i] = src[r * dim + d];
    }
}

static void rows_op(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim, int scatter) {
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const size_t total = (size_t)(n > 0 ? n : 0) * (size_t)(dim > 0 ? dim : 0);
    cu_launch_k(&t.L, tr_rows_kernel, grid_for(&t.L, total), dim3(TR_NT), 0, dst, src, rows, dim, total, scatter);
    cu_train_end(&t, scatter ? "train scatter_rows" : "train gather_rows");
}

void cu_train_gather_rows(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim) {
    rows_op(ctx, dst, src, rows, n, dim, 0);
}

void cu_train_scatter_rows(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim) {
    rows_op(ctx, dst, src, rows, n, dim, 1);
}

/* ---- cross entropy --------------------------------------------------------------- */

#define CE_NT 512

/* A block a row j of z [n][V]: lse = max + log(sum exp(z - max)) (double sum), ce[j] = lse - z[y[j]]; with w,
 * dz[j] = exp(z - max) / sum w[j] - onehot(y[j]) w[j] (the CPU's order), each element written
 * by the thread that read it (dz may alias z), after z[y[j]] is read. */
__global__ void __launch_bounds__(CE_NT) tr_ce_kernel(float *dz, double *__restrict__ ce, const float *z,
                                                      const int32_t *__restrict__ y, const float *__restrict__ w,
                                                      int V) {
    __shared__ float redf[CE_NT / 32];
    __shared__ double redd[CE_NT / 32];
    const size_t j = blockIdx.x;
    const float *zr = z + j * V;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += CE_NT) m = fmaxf(m, zr[i]);
    m = block_max_f<CE_NT>(m, redf);
    double s = 0.0;
    for (int i = threadIdx.x; i < V; i += CE_NT) s += (double)expf(zr[i] - m);
    s = block_sum_d<CE_NT>(s, redd);
    const double lse = (double)m + log(s);
    const int yj = y[j];
    if (threadIdx.x == 0) ce[j] = lse - (double)zr[yj];
    if (!w) return; /* the same for the whole block; w[j] == 0 writes zeros (ops.h) */
    const float wj = w[j];
    __syncthreads(); /* z[y[j]] is read before dz (maybe z) is written */
    const float inv = (float)(1.0 / s);
    float *dr = dz + j * V;
    for (int i = threadIdx.x; i < V; i += CE_NT) {
        const float d = __fmul_rn(__fmul_rn(expf(zr[i] - m), inv), wj);
        dr[i] = i == yj ? __fsub_rn(d, wj) : d;
    }
}

void cu_train_cross_entropy(void *ctx, float *dz, double *ce, const float *z, const int32_t *y, const float *w, int n,
                            int V) {
    HEARTH_ASSERT(V >= 1 && (!w || dz));
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_launch_k(&t.L, tr_ce_kernel, dim3(n > 0 ? n : 0), dim3(CE_NT), 0, dz, ce, z, y, w, V);
    cu_train_end(&t, "train cross_entropy");
}

/* ---- vectors ------------------------------------------------------------------------ */

/* y += a x, product and sum rounded apart (the CPU's y[i] += a * x[i]) */
__global__ void tr_axpy_kernel(float *y, float a, const float *x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

void cu_train_axpy(void *ctx, float *y, float a, const float *x, size_t n) {
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_launch_k(&t.L, tr_axpy_kernel, grid_for(&t.L, n), dim3(TR_NT), 0, y, a, x, n);
    cu_train_end(&t, "train axpy");
}

void cu_train_zero(void *ctx, void *p, size_t bytes) {
    if (bytes == 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_note(&t.L, cudaMemsetAsync(p, 0, bytes, t.L.stream));
    cu_train_end(&t, "train zero");
}

/* *out += sum x^2: squares and sums in double, a block's sum added atomically. */
__global__ void __launch_bounds__(TR_NT) tr_sumsq_kernel(double *out, const float *__restrict__ x, size_t n) {
    __shared__ double red[TR_NT / 32];
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    s = block_sum_d<TR_NT>(s, red);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

void cu_train_sumsq(void *ctx, double *out, const float *x, size_t n) {
    if (n == 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    cu_launch_k(&t.L, tr_sumsq_kernel, grid_for(&t.L, n), dim3(TR_NT), 0, out, x, n);
    cu_train_end(&t, "train sumsq");
}

/* AdamW, each rounding as the CPU's f32 expression makes it (no fused multiply-add): gi = g gs; w *= decay;
 * m = b1 m + c1 gi; v = b2 v + c2 gi gi; w -= step m / (sqrt(v) rbc2 + eps); g = 0. decay = 1 - lr wd,
 * c1 = 1 - b1, c2 = 1 - b2 (f32, on the host), step = lr / bc1 and rbc2 = 1 / sqrt(bc2) (double, then f32). */
__global__ void tr_adamw_kernel(float *w, float *g, float *m, float *v, size_t n, float b1, float c1, float b2,
                                float c2, float eps, float decay, float gs, float step, float rbc2) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float gi = __fmul_rn(g[i], gs);
        const float wi = __fmul_rn(w[i], decay);
        const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(c1, gi));
        const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(c2, gi), gi));
        const float den = __fadd_rn(__fmul_rn(sqrtf(vi), rbc2), eps);
        w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(step, mi), den));
        m[i] = mi;
        v[i] = vi;
        g[i] = 0.0f;
    }
}

void cu_train_adamw(void *ctx, float *w, float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                    float eps, float wd, float gs, double bc1, double bc2) {
    if (n == 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const float decay = 1.0f - lr * wd, step = (float)(lr / bc1), rbc2 = (float)(1.0 / sqrt(bc2));
    cu_launch_k(&t.L, tr_adamw_kernel, grid_for(&t.L, n), dim3(TR_NT), 0, w, g, m, v, n, beta1, 1.0f - beta1, beta2,
                1.0f - beta2, eps, decay, gs, step, rbc2);
    cu_train_end(&t, "train adamw");
}
