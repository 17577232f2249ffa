/* train.cu - the CUDA table of LoRA training's ops (hearth_cuda_train_ops),
 * with its matrix products: gemm, and the backward through a frozen weight
 * (weight_copy, matmul_t). Attention is in train_attn.cu, the element-wise
 * and row ops in train_misc.cu.
 *
 * Row-major products go to column-major cuBLAS as their transposes: C = A B
 * is C^T = B^T A^T, and a row-major X [r][c] is, read column-major, X^T
 * with leading dimension c. f32 products are cublasSgemm in the handle's
 * default math mode (no TF32), so they agree with the CPU to f32 rounding.
 *
 * weight_copy keeps an f32 weight as an f32 [rows][cols] copy (matmul_t: an
 * f32 GEMM) and makes every other type a bf16 [rows][cols] copy, dequantized
 * exactly as the CPU dequantizes, then rounded (dequant.cu); matmul_t then
 * rounds dy to bf16 in the context's training scratch and multiplies bf16 x
 * bf16 with f32 sums (what PyTorch autocast does for the backward of a
 * frozen bf16 layer). */
#include "ops/cuda/train_cuda.h"

/* C[M][N] = alpha op(A) op(B) + beta C (ops.h): C^T = alpha op(B)^T op(A)^T + beta C^T, where B read
 * column-major is B^T (N x K, ld N), or with tb B itself transposed (ld K), and likewise A. */
static void op_gemm(void *ctx, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                    float alpha, float beta) {
    HEARTH_ASSERT(M >= 0 && N >= 0 && K >= 0 && (beta == 0.0f || beta == 1.0f));
    if (M == 0 || N == 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int lda = ta ? M : K, ldb = tb ? K : N;
    cu_blas_note(&t, cublasSgemm(t.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                 &alpha, b, ldb > 0 ? ldb : 1, a, lda > 0 ? lda : 1, &beta, c, N));
    cu_train_end(&t, "train gemm");
}

static void *op_weight_copy(void *ctx, const hearth_weight *w, size_t *bytes) {
    HEARTH_ASSERT(cu_mmv_supported(w->type));
    const int f32 = w->type == HEARTH_DT_F32;
    const size_t el = f32 ? sizeof(float) : sizeof(__nv_bfloat16), n = (size_t)w->rows * w->cols;
    if ((f32 || w->type == HEARTH_DT_BF16) && w->layout == HEARTH_LAYOUT_STORED && w->row_bytes == w->cols * el) {
        *bytes = 0; /* the rows as they are: no copy (15 GB less for a BF16 8B model) */
        return (void *)w->data;
    }
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    void *copy = NULL;
    cudaError_t e = cudaMalloc(&copy, n > 0 ? n * el : 1);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's clean error */
        if (e != cudaErrorMemoryAllocation) cu_note(&t.L, e);
        cu_train_end(&t, "train weight copy");
        return NULL;
    }
    if (n > 0) {
        if (f32 || w->type == HEARTH_DT_BF16) /* the rows as they are, without any padding between them */
            cu_note(&t.L, cudaMemcpy2DAsync(copy, (size_t)w->cols * el, w->data, w->row_bytes, (size_t)w->cols * el,
                                            (size_t)w->rows, cudaMemcpyDeviceToDevice, t.L.stream));
        else
            cu_dequant_bf16(&t.L, (__nv_bfloat16 *)copy, w->data, w->type, w->cols, w->row_bytes,
                            w->layout == HEARTH_LAYOUT_SPLIT, 0, w->rows);
    }
    cu_train_end(&t, "train weight copy");
    *bytes = n * el;
    return copy;
}

#define MATMUL_T_SCRATCH ((size_t)64 << 20)

/* dx[T][cols] (+)= dy[T][rows] W: dx^T (cols x T, ld cols) = W^T (W read column-major, ld cols) dy^T (ld rows). */
static void op_matmul_t(void *ctx, float *dx, const float *dy, int T, const void *copy, const hearth_weight *w,
                        int acc) {
    if (T <= 0) return;
    cu_train t = cu_train_begin((hearth_cuda_ctx *)ctx);
    const int rows = w->rows, cols = w->cols;
    const float one = 1.0f, beta = acc ? 1.0f : 0.0f;
    if (w->type == HEARTH_DT_F32) {
        cu_blas_note(&t, cublasSgemm(t.blas, CUBLAS_OP_N, CUBLAS_OP_N, cols, T, rows, &one, (const float *)copy, cols,
                                     dy, rows, &beta, dx, cols));
    } else {
        /* dy's bf16 copy a chunk of rows at a time, the scratch held to MATMUL_T_SCRATCH (the head's dy is
         * [head_rows][vocab]) */
        const size_t row_b = cu_xprep_bytes(XPREP_BF16, 1, rows);
        const size_t fit = MATMUL_T_SCRATCH / row_b > 0 ? MATMUL_T_SCRATCH / row_b : 1;
        const int chunk = (size_t)T <= fit ? T : (int)fit;
        void *dyb = cu_train_scratch(&t, (size_t)chunk * row_b);
        for (int t0 = 0; dyb && t0 < T; t0 += chunk) {
            const int n = T - t0 < chunk ? T - t0 : chunk;
            cu_xprep(&t.L, XPREP_BF16, dyb, dy + (size_t)t0 * rows, n, rows);
            cu_blas_note(&t, cublasGemmEx(t.blas, CUBLAS_OP_N, CUBLAS_OP_N, cols, n, rows, &one, copy, CUDA_R_16BF,
                                          cols, dyb, CUDA_R_16BF, rows, &beta, dx + (size_t)t0 * cols, CUDA_R_32F,
                                          cols, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }
    cu_train_end(&t, "train matmul_t");
}

static hearth_status op_failed(void *ctx, hearth_err *err) {
    return hearth_cuda_ctx_error((hearth_cuda_ctx *)ctx, err);
}

extern "C" const hearth_train_ops hearth_cuda_train_ops = {
    /* .head_rows = */ 1024,
    /* .gemm = */ op_gemm,
    /* .weight_copy = */ op_weight_copy,
    /* .matmul_t = */ op_matmul_t,
    /* .rmsnorm = */ cu_train_rmsnorm,
    /* .rmsnorm_bwd = */ cu_train_rmsnorm_bwd,
    /* .rope = */ cu_train_rope,
    /* .swiglu_bwd = */ cu_train_swiglu_bwd,
    /* .attn_ws_bytes = */ cu_train_attn_ws_bytes,
    /* .attn = */ cu_train_attn,
    /* .attn_bwd = */ cu_train_attn_bwd,
    /* .gather_rows = */ cu_train_gather_rows,
    /* .scatter_rows = */ cu_train_scatter_rows,
    /* .cross_entropy = */ cu_train_cross_entropy,
    /* .axpy = */ cu_train_axpy,
    /* .zero = */ cu_train_zero,
    /* .sumsq = */ cu_train_sumsq,
    /* .adamw = */ cu_train_adamw,
    /* .failed = */ op_failed,
};
