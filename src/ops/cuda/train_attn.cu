/* train_attn.cu - LoRA training's attention on CUDA (hearth_train_ops attn /
 * attn_bwd, ops.h): causal, optionally windowed attention of one sequence at
 * positions 0..T-1, and its backward, with the scores materialized.
 *
 * Kv head j is read by the g = nh / nkv query heads j g .. j g + g - 1; the
 * kv heads are taken one after the other, each through planes of the
 * workspace that the next one reuses (one stream: in order):
 *   P  [g][T][T]  scores S = Q K^T scale, then the probabilities P
 *   dP [g][T][T]  dP = dO V^T, then dS = P (dP - D) scale
 *   Qp, dOp [g][T][hd]  the g heads' q and dout rows packed, so that dK and dV
 *                 are one GEMM each over the g heads (a sum over k = g T)
 * each part rounded up to 256 bytes: attn_ws_bytes is about 8 g T^2 bytes
 * (g 4, T 4096: 512 MiB), whatever nh. The forward uses only P.
 *
 * A kv head's products are each one strided-batched cuBLAS GEMM over its g
 * query heads (the K / V operand's batch stride 0); f32 with f32 sums (no
 * TF32). Row i attends keys lo(i) .. i, lo(i) = max(0, i - window + 1) with
 * a window, else 0; everything else in a row of P or dS is 0, so the GEMMs
 * run over whole T x T planes. The causal half they waste is the simple
 * trade at training's lengths (a few thousand positions). */
#include "ops/cuda/train_cuda.h"

#define ATT_NT 128

/* n floats rounded up to 256 bytes, so that every part of the workspace starts aligned */
static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t cu_train_attn_ws_bytes(int T_max, int nh, int nkv, int hd) {
    const size_t g = (size_t)(nh / nkv), T = (size_t)T_max;
    return sizeof(float) * (2 * up64(g * T * T) + 2 * up64(g * T * (size_t)hd));
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

/* The g query heads' scaled scores against kv head j: P[hl] = Q_{h0 + hl} K_j^T scale, i.e. column-major
 * P^T (T x T) = K (K read column-major is K^T, ld nkv hd: transposed) Q^T (ld nh hd). */
static void scores(cu_train *t, float *P, const float *q, const float *k, int T, int nh, int nkv, int hd, int j,
                   float scale) {
    const int g = nh / nkv;
    const float zero = 0.0f;
    cu_blas_note(t, cublasSgemmStridedBatched(t->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, &scale, k + (size_t)j * hd,
                                              nkv * hd, 0, q + (size_t)j * g * hd, nh * hd, hd, &zero, P, T,
                                              (long long)T * T, g));
}

/* out's g head columns of kv head j: O_h = P_h V_j, i.e. O^T (hd x T, ld nh hd) = V^T (ld nkv hd) P^T (ld T). */
static void apply(cu_train *t, float *o, const float *P, const float *v, int T, int nh, int nkv, int hd, int j) {
    const int g = nh / nkv;
    const float one = 1.0f, zero = 0.0f;
    cu_blas_note(t, cublasSgemmStridedBatched(t->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, &one, v + (size_t)j * hd,
                                              nkv * hd, 0, P, T, (long long)T * T, &zero, o + (size_t)j * g * hd,
                                              nh * hd, hd, g));
}

void cu_train_attn(void *ctx, float *out, float *lse, const float *q, const float *k, const float *v, int T, int nh,
                   int nkv, int hd, int window, void *ws) {
    HEARTH_ASSERT(nkv > 0 && nh % nkv == 0 && hd > 0);
    if (T <= 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int g = nh / nkv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *P = (float *)ws;
    for (int j = 0; j < nkv; j++) {
        scores(&t, P, q, k, T, nh, nkv, hd, j, scale);
        cu_launch_k(&t.L, tr_attn_softmax_kernel, dim3(g * T), dim3(ATT_NT), 0, P, lse + (size_t)j * g * T, T,
                    window);
        apply(&t, out, P, v, T, nh, nkv, hd, j);
    }
    cu_train_end(&t, "train attention");
}

void cu_train_attn_bwd(void *ctx, float *dq, float *dk, float *dv, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v, int T, int nh, int nkv,
                       int hd, int window, void *ws) {
    HEARTH_ASSERT(nkv > 0 && nh % nkv == 0 && hd > 0);
    if (T <= 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int g = nh / nkv;
    const float scale = 1.0f / sqrtf((float)hd), one = 1.0f, zero = 0.0f;
    const size_t plane = up64((size_t)g * T * T), rows = up64((size_t)g * T * hd);
    float *P = (float *)ws, *dP = P + plane, *Qp = dP + plane, *dOp = Qp + rows;
    for (int j = 0; j < nkv; j++) {
        const size_t hc = (size_t)j * g * hd; /* the g heads' first column in q, dq, dout */
        scores(&t, P, q, k, T, nh, nkv, hd, j, scale);
        /* dP_h = dO_h V_j^T: as the scores, dout for q and v for k, unscaled */
        cu_blas_note(&t, cublasSgemmStridedBatched(t.blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, &one,
                                                   v + (size_t)j * hd, nkv * hd, 0, dout + hc, nh * hd, hd, &zero,
                                                   dP, T, (long long)T * T, g));
        cu_launch_k(&t.L, tr_attn_bwd_rows_kernel, dim3(g * T), dim3(ATT_NT), 0, P, dP, Qp, dOp, q, dout, out, lse,
                    T, nh, hd, j * g, window, scale);
        /* dQ_h = dS_h K_j: as apply, dS for P and k for v */
        apply(&t, dq, dP, k, T, nh, nkv, hd, j);
        /* dK_j = sum_h dS_h^T Q_h = dS_stack^T Qp with dS_stack [gT][T]: column-major dK^T (hd x T, ld nkv hd)
         * = Qp^T (ld hd) dS_stack (read column-major it is dS_stack^T, ld T: transposed), k = g T; dV_j alike
         * from P and dOp */
        cu_blas_note(&t, cublasSgemm(t.blas, CUBLAS_OP_N, CUBLAS_OP_T, hd, T, g * T, &one, Qp, hd, dP, T, &zero,
                                     dk + (size_t)j * hd, nkv * hd));
        cu_blas_note(&t, cublasSgemm(t.blas, CUBLAS_OP_N, CUBLAS_OP_T, hd, T, g * T, &one, dOp, hd, P, T, &zero,
                                     dv + (size_t)j * hd, nkv * hd));
    }
    cu_train_end(&t, "train attention backward");
}
