/* train_attn.cu - LoRA training's attention on CUDA (hearth_train_ops attn /
 * attn_bwd, ops.h): causal, optionally windowed attention of one sequence at
 * positions 0..T-1, and its backward, with the scores materialized.
 *
 * Kv head j is read by the g = nh / nkv query heads j g .. j g + g - 1. A
 * pass takes G kv heads (as many as ATT_WS_BUDGET of planes holds at this T,
 * at least one; all of them at training's usual lengths), i.e. heads
 * h0 .. h0 + G g - 1 in order, through planes of the workspace:
 *   P  [G g][T][T]  scores S = Q K^T scale, then the probabilities P
 *   dP [G g][T][T]  dP = dO V^T, then dS = P (dP - D) scale
 *   Qp, dOp [G g][T][hd]  the heads' q and dout rows packed, so that each kv
 *                 head's dK and dV are a GEMM over its g heads (k = g T)
 * each part rounded up to 256 bytes; the forward uses only P.
 *
 * A pass's products are strided-batched cuBLAS GEMMs, f32 with f32 sums (no
 * TF32): a product over its heads is min(g, G) calls, batched over the g
 * heads of each kv head (the K / V operand's batch stride 0) or over the G
 * kv heads for each of the g heads a kv head has, whichever is fewer; dK and
 * dV one call each. Row i attends keys lo(i) .. i, lo(i) = max(0, i - window
 * + 1) with a window, else 0; everything else in a row of P or dS is 0, so
 * the GEMMs run over whole T x T planes. The causal half they waste is the
 * simple trade at training's lengths (a few thousand positions). */
#include "ops/cuda/train_cuda.h"

#define ATT_NT 128

#define ATT_WS_BUDGET ((size_t)1 << 30)

/* n floats rounded up to 256 bytes, so that every part of the workspace starts aligned */
static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Bytes of a pass of G kv heads at T. */
static size_t pass_bytes(size_t G, size_t g, size_t T, size_t hd) {
    return sizeof(float) * (2 * up64(G * g * T * T) + 2 * up64(G * g * T * hd));
}

/* Kv heads a pass at T: as many as ATT_WS_BUDGET holds, at least one. */
static int kv_per_pass(int T, int nh, int nkv, int hd) {
    const size_t g = (size_t)(nh / nkv);
    int G = nkv;
    while (G > 1 && pass_bytes((size_t)G, g, (size_t)T, (size_t)hd) > ATT_WS_BUDGET) G--;
    return G;
}

/* A pass at any T <= T_max fits: G(T) passes of T take at most max(the budget, one kv head at T_max) or all
 * nkv at T_max, whichever is less. */
size_t cu_train_attn_ws_bytes(int T_max, int nh, int nkv, int hd) {
    const size_t g = (size_t)(nh / nkv), one = pass_bytes(1, g, (size_t)T_max, (size_t)hd),
                 all = pass_bytes((size_t)nkv, g, (size_t)T_max, (size_t)hd);
    const size_t cap = all < ATT_WS_BUDGET ? all : ATT_WS_BUDGET;
    return cap > one ? cap : one;
}

/* Row r = hl T + i of the g planes of scaled scores S [g][T][T], in place: P = softmax over keys lo(i)..i, 0
 * elsewhere; lse[hl T + i] = max + log(sum). */
__global__ void __launch_bounds__(ATT_NT) tr_attn_softmax_kernel(float *S, float *__restrict__ lse, int T,
                                                                 int window) {
    __shared__ float redf[ATT_NT / 32];
    __shared__ double redd[ATT_NT / 32];
    const int r = blockIdx.x, i = r % T, lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
    float *s = S + (size_t)r * T;
    float m = -INFINITY;
    for (int j = lo + threadIdx.x; j <= i; j += ATT_NT) m = fmaxf(m, s[j]);
    m = block_max_f<ATT_NT>(m, redf);
    double sum = 0.0;
    for (int j = lo + threadIdx.x; j <= i; j += ATT_NT) sum += (double)expf(s[j] - m);
    sum = block_sum_d<ATT_NT>(sum, redd);
    const float inv = (float)(1.0 / sum);
    for (int j = threadIdx.x; j < T; j += ATT_NT) s[j] = j >= lo && j <= i ? expf(s[j] - m) * inv : 0.0f;
    if (threadIdx.x == 0) lse[r] = m + (float)log(sum);
}

/* Row r = hl T + i of head h = h0 + hl: D = dO_i . O_i; P = exp(S - lse) on keys lo(i)..i (0 elsewhere), in
 * place of S; dS = P (dP - D) scale in place of dP; q's and dout's row i of the head packed into Qp, dOp
 * [g][T][hd] (row r). */
__global__ void __launch_bounds__(ATT_NT) tr_attn_bwd_rows_kernel(float *S, float *dP, float *__restrict__ Qp,
                                                                  float *__restrict__ dOp, const float *__restrict__ q,
                                                                  const float *__restrict__ dout,
                                                                  const float *__restrict__ out,
                                                                  const float *__restrict__ lse, int T, int nh,
                                                                  int hd, int h0, int window, float scale) {
    __shared__ double red[ATT_NT / 32];
    const int r = blockIdx.x, hl = r / T, i = r % T, h = h0 + hl;
    const int lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
    const size_t qo = ((size_t)i * nh + h) * hd;
    double d = 0.0;
    for (int e = threadIdx.x; e < hd; e += ATT_NT) {
        const float go = dout[qo + e];
        d += (double)(go * out[qo + e]);
        Qp[(size_t)r * hd + e] = q[qo + e];
        dOp[(size_t)r * hd + e] = go;
    }
    const float D = (float)block_sum_d<ATT_NT>(d, red);
    const float l = lse[(size_t)h * T + i];
    float *s = S + (size_t)r * T, *dp = dP + (size_t)r * T;
    for (int j = threadIdx.x; j < T; j += ATT_NT) {
        const float p = j >= lo && j <= i ? expf(s[j] - l) : 0.0f;
        s[j] = p;
        dp[j] = p * (dp[j] - D) * scale;
    }
}

/* Per head h of a pass (kv heads j0 .. j0 + G - 1, heads h0 = j0 g ..): C_h [T][T] (plane h - h0 of C) =
 * alpha A_h B_{h/g}^T, A's head columns of ld nh hd (q or dout), B's of ld nkv hd (k or v). Column-major:
 * C_h^T = B_j (read as B_j^T, transposed) A_h^T. */
static void heads_abt(cu_train *t, float *C, const float *A, const float *B, int T, int nh, int nkv, int hd, int j0,
                      int G, float alpha) {
    const int g = nh / nkv;
    const float zero = 0.0f;
    const long long TT = (long long)T * T;
    if (G >= g) /* a call per head of a kv head, over the G kv heads */
        for (int jj = 0; jj < g; jj++)
            cu_blas_note(t, cublasSgemmStridedBatched(t->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, &alpha,
                                                      B + (size_t)j0 * hd, nkv * hd, hd, A + ((size_t)j0 * g + jj) * hd,
                                                      nh * hd, (long long)g * hd, &zero, C + (size_t)jj * TT, T,
                                                      g * TT, G));
    else /* a call per kv head, over its g heads */
        for (int j = j0; j < j0 + G; j++)
            cu_blas_note(t, cublasSgemmStridedBatched(t->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, &alpha,
                                                      B + (size_t)j * hd, nkv * hd, 0, A + (size_t)j * g * hd,
                                                      nh * hd, hd, &zero, C + (size_t)(j - j0) * g * TT, T, TT, g));
}

/* Per head h of a pass: O_h (head columns of o, ld nh hd) = P_h B_{h/g} (v, or k for dQ; ld nkv hd).
 * Column-major: O_h^T = B_j^T P_h^T. */
static void heads_pb(cu_train *t, float *o, const float *P, const float *B, int T, int nh, int nkv, int hd, int j0,
                     int G) {
    const int g = nh / nkv;
    const float one = 1.0f, zero = 0.0f;
    const long long TT = (long long)T * T;
    if (G >= g)
        for (int jj = 0; jj < g; jj++)
            cu_blas_note(t, cublasSgemmStridedBatched(t->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, &one,
                                                      B + (size_t)j0 * hd, nkv * hd, hd, P + (size_t)jj * TT, T,
                                                      g * TT, &zero, o + ((size_t)j0 * g + jj) * hd, nh * hd,
                                                      (long long)g * hd, G));
    else
        for (int j = j0; j < j0 + G; j++)
            cu_blas_note(t, cublasSgemmStridedBatched(t->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, &one,
                                                      B + (size_t)j * hd, nkv * hd, 0, P + (size_t)(j - j0) * g * TT,
                                                      T, TT, &zero, o + (size_t)j * g * hd, nh * hd, hd, g));
}

void cu_train_attn(void *ctx, float *out, float *lse, const float *q, const float *k, const float *v, int T, int nh,
                   int nkv, int hd, int window, void *ws) {
    HEARTH_ASSERT(nkv > 0 && nh % nkv == 0 && hd > 0);
    if (T <= 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int g = nh / nkv, Gmax = kv_per_pass(T, nh, nkv, hd);
    const float scale = 1.0f / sqrtf((float)hd);
    float *P = (float *)ws;
    for (int j0 = 0; j0 < nkv; j0 += Gmax) {
        const int G = nkv - j0 < Gmax ? nkv - j0 : Gmax;
        heads_abt(&t, P, q, k, T, nh, nkv, hd, j0, G, scale);
        cu_launch_k(&t.L, tr_attn_softmax_kernel, dim3(G * g * T), dim3(ATT_NT), 0, P, lse + (size_t)j0 * g * T, T,
                    window);
        heads_pb(&t, out, P, v, T, nh, nkv, hd, j0, G);
    }
    cu_train_end(&t, "train attention");
}

void cu_train_attn_bwd(void *ctx, float *dq, float *dk, float *dv, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v, int T, int nh, int nkv,
                       int hd, int window, void *ws) {
    HEARTH_ASSERT(nkv > 0 && nh % nkv == 0 && hd > 0);
    if (T <= 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int g = nh / nkv, Gmax = kv_per_pass(T, nh, nkv, hd);
    const float scale = 1.0f / sqrtf((float)hd), one = 1.0f, zero = 0.0f;
    const size_t plane = up64((size_t)Gmax * g * T * T), rows = up64((size_t)Gmax * g * T * hd);
    float *P = (float *)ws, *dP = P + plane, *Qp = dP + plane, *dOp = Qp + rows;
    for (int j0 = 0; j0 < nkv; j0 += Gmax) {
        const int G = nkv - j0 < Gmax ? nkv - j0 : Gmax;
        heads_abt(&t, P, q, k, T, nh, nkv, hd, j0, G, scale);
        heads_abt(&t, dP, dout, v, T, nh, nkv, hd, j0, G, 1.0f); /* dP_h = dO_h V_j^T */
        cu_launch_k(&t.L, tr_attn_bwd_rows_kernel, dim3(G * g * T), dim3(ATT_NT), 0, P, dP, Qp, dOp, q, dout, out,
                    lse, T, nh, hd, j0 * g, window, scale);
        heads_pb(&t, dq, dP, k, T, nh, nkv, hd, j0, G); /* dQ_h = dS_h K_j */
        /* dK_j = sum of its heads' dS_h^T Q_h = dS_j^T Qp_j with dS_j [g T][T] (its g planes): column-major
         * dK_j^T (hd x T, ld nkv hd) = Qp_j^T (ld hd) dS_j (read column-major dS_j^T, ld T: transposed),
         * k = g T, one call over the pass's kv heads; dV_j alike from P and dOp */
        const long long GT = (long long)g * T;
        cu_blas_note(&t, cublasSgemmStridedBatched(t.blas, CUBLAS_OP_N, CUBLAS_OP_T, hd, T, g * T, &one, Qp, hd,
                                                   GT * hd, dP, T, GT * T, &zero, dk + (size_t)j0 * hd, nkv * hd, hd,
                                                   G));
        cu_blas_note(&t, cublasSgemmStridedBatched(t.blas, CUBLAS_OP_N, CUBLAS_OP_T, hd, T, g * T, &one, dOp, hd,
                                                   GT * hd, P, T, GT * T, &zero, dv + (size_t)j0 * hd, nkv * hd, hd,
                                                   G));
    }
    cu_train_end(&t, "train attention backward");
}
