/* matmul.cuh - the matmul op's state: cuBLAS handle, scratch buffers and the
 * cache of the last prepared x (see matmul.cu). */
#ifndef HEARTH_OPS_CUDA_MATMUL_CUH
#define HEARTH_OPS_CUDA_MATMUL_CUH

#include "ops/cuda/cuda_internal.cuh"

struct cu_mm_state {
    cublasHandle_t blas;
    void *xprep, *xprep2; /* prepared x: max_tokens x (max_cols + 256), bf16-sized, twice: a GEMV that
                             reads one may write the next matmul's input into the other */
    __nv_bfloat16 *deq;   /* dequantized weight rows for the cuBLAS path: reserved at load (prepare_weight,
                             cu_mm_deq_need); NULL for a model of float weights */
    size_t deq_bytes;
    int mmv_max_t;        /* GEMV up to this T (<= 8) */
    const float *c_x;     /* cache key: x, T, K, kind; c_x NULL = empty */
    int c_T, c_K, c_kind;
    void *c_buf;          /* which of xprep / xprep2 holds it */
};

/* ops.h `lora` (lora.cu): R a multiple of 16, tmp T x n R floats, b's rows 16-byte aligned; mm: cuBLAS for more
 * than 8 rows. */
void cu_lora(const cu_launch *L, cu_mm_state *mm, float *const *y, const float *x, int T, int K, const float *a,
             const float *b, int R, const int *n_out, int n, const int32_t *ids, int32_t id, float *tmp);
void cu_mm_invalidate(cu_mm_state *s);
/* C[n][m] (ldc apart) = x[n][k] (ldx apart) @ A^T for A [m][k] (lda apart), or C += it with accumulate: one f32
 * cuBLAS GEMM, f32 compute (no TF32). */
void cu_gemm_f32(const cu_launch *L, cu_mm_state *s, const float *A, int lda, const float *x, int ldx, float *C, int m,
                 int n, int k, int ldc, int accumulate);
/* buf (xprep or xprep2) now holds x prepared as kind (a fused kernel wrote it). */
void cu_mm_set_cache(cu_mm_state *s, const float *x, int T, int K, int kind, void *buf);
/* 1 when a matmul of T rows of type t runs on the GEMV kernels. */
int cu_mm_gemv(const cu_mm_state *s, int T, hearth_dtype t);
/* The preparation (xprep kind) a matmul of T rows of type t makes of its x. */
int cu_mm_prep_kind(const cu_mm_state *s, int T, hearth_dtype t);
/* One GEMV launch over a set of matrices sharing x (cu_mm_gemv must hold). */
void cu_matmul_set(const cu_launch *L, cu_mm_state *s, const mmv_set *set, const float *x, int T, hearth_dtype t,
                   int K, size_t row_bytes);
/* Sets a and b of one x on the GEMV kernels, rows of types ta and tb, as one
 * launch (cu_mmv2): 1 when it ran, 0 when the caller runs cu_matmul_set for
 * each (neither makes a prepared copy of its output). */
int cu_matmul_set2(const cu_launch *L, cu_mm_state *s, const mmv_set *a, hearth_dtype ta, size_t rba,
                   const mmv_set *b, hearth_dtype tb, size_t rbb, const float *x, int T, int K);
/* Bytes of dequantization scratch that a matrix of type t on the cuBLAS path
 * wants (0 for f32, f16 and bf16). */
size_t cu_mm_deq_need(hearth_dtype t, int rows, int cols);
/* W: N rows of K elements of type t, row_bytes apart, laid out as layout
 * (HEARTH_LAYOUT_*). */
void cu_matmul(const cu_launch *L, cu_mm_state *s, float *y, const float *x, int T, const void *w, hearth_dtype t,
               int N, int K, size_t row_bytes, int layout);
/* One matrix of a stacked product: N rows of K elements of type t,
 * row_bytes apart, laid out as layout (HEARTH_LAYOUT_*). */
struct cu_mm_mat {
    const void *w;
    hearth_dtype t;
    int N;
    size_t row_bytes;
    int layout;
};
/* Whether cu_matmul_stack can take the n matrices (of K columns) as one:
 * the dequantization scratch it needs in bytes (0 for f32, f16 and bf16
 * matrices of one type whose rows follow each other in memory; quantized
 * ones, of any quantized types, are dequantized one after the other, up to
 * the largest scratch cu_mm_deq_need asks), or -1 when it cannot. */
long long cu_mm_stack_deq(const cu_mm_mat *m, int n, int K);
/* y[T][N0 + N1 + ...] = x @ [W0; W1; ...]^T as one cuBLAS GEMM (the cuBLAS
 * path: cu_mm_gemv must not hold); 0 (nothing done) where cu_mm_stack_deq
 * says no or the dequantization scratch is smaller. */
int cu_matmul_stack(const cu_launch *L, cu_mm_state *s, float *y, const float *x, int T, int K, const cu_mm_mat *m,
                    int n);
/* y1 = x W1^T and y2 = x W2^T (two weights of one type and shape) as one
 * batched cuBLAS GEMM, where the rows are few enough that this is faster than
 * two; 0 (nothing done) otherwise. */
int cu_matmul_pair(const cu_launch *L, cu_mm_state *s, float *y1, float *y2, const float *x, int T, const void *w1,
                   const void *w2, hearth_dtype t, int N, int K, size_t row_bytes, int layout);

#endif
