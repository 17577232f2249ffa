/* train_cuda.h - the CUDA backend of LoRA training's ops (hearth_train_ops,
 * ops/ops.h): hearth_cuda_ops.train points at hearth_cuda_train_ops.
 *
 * A training op is not recorded: it issues what the context has recorded
 * (no wait), then launches its kernels and cuBLAS calls straight on the
 * context's stream, so it runs in issue order with the inference ops. Its
 * failures go to the context's sticky error (hearth_cuda_ctx_error). All
 * arithmetic is f32 with f32 or double sums and no TF32, but for matmul_t
 * over a quantized or half-precision weight (bf16 operands, f32 sums).
 *
 * For the .cu files, the part below __CUDACC__: the hook into the context
 * (ops_cuda.cu) and the op functions of train_attn.cu and train_misc.cu,
 * which train.cu gathers into the table. */
#ifndef HEARTH_OPS_TRAIN_CUDA_H
#define HEARTH_OPS_TRAIN_CUDA_H

#include "ops/cuda/ops_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const hearth_train_ops hearth_cuda_train_ops;

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include "ops/cuda/cuda_internal.cuh"

/* What a training op launches with: a copy of the context's launch state
 * with programmatic dependent launch off (its kernels need no pdl_wait, and
 * nothing launched after them starts before they end), and the context's
 * cuBLAS handle (bound to the stream, default math: no TF32). */
struct cu_train {
    hearth_cuda_ctx *c;
    cu_launch L;
    cublasHandle_t blas;
};

/* Issue the recorded ops (no wait) and return the launch state for the op's
 * own launches. The engine thread, like every op. */
cu_train cu_train_begin(hearth_cuda_ctx *c);
/* Name the op in the context's error if one of its launches failed (cu_note). */
void cu_train_end(cu_train *t, const char *where);
/* The context's training scratch of at least bytes bytes (device memory,
 * grown on demand, owned and freed by the context; valid until the next
 * call); NULL, noted in the context's error, when it cannot grow. */
void *cu_train_scratch(cu_train *t, size_t bytes);
/* A cuBLAS call's status into the sticky error. */
static inline void cu_blas_note(const cu_train *t, cublasStatus_t st) {
    if (st != CUBLAS_STATUS_SUCCESS) cu_note(&t->L, cudaErrorUnknown);
}

/* The sum of each thread's v over the block (NT threads; red: NT / 32 doubles of shared memory), to every
 * thread. red may be reused once every thread has the result (the caller's next write follows a sync). */
template <int NT> __device__ __forceinline__ double block_sum_d(double v, double *red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* red's earlier use is over */
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < NT / 32; i++) s += red[i];
    return s;
}

/* The largest of each thread's v over the block (red: NT / 32 floats), to every thread. */
template <int NT> __device__ __forceinline__ float block_max_f(float v, float *red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float m = red[0];
#pragma unroll
    for (int i = 1; i < NT / 32; i++) m = fmaxf(m, red[i]);
    return m;
}

/* train_attn.cu: hearth_train_ops' attn_ws_bytes, attn, attn_bwd. */
size_t cu_train_attn_ws_bytes(int T_max, int nh, int nkv, int hd);
void cu_train_attn(void *ctx, float *out, float *lse, const float *q, const float *k, const float *v, int T, int nh,
                   int nkv, int hd, int window, void *ws);
void cu_train_attn_bwd(void *ctx, float *dq, float *dk, float *dv, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v, int T, int nh, int nkv,
                       int hd, int window, void *ws);

/* train_misc.cu: the element-wise and row ops. */
void cu_train_rmsnorm(void *ctx, float *y, float *rs, const float *x, const float *w, int rows, int dim, float eps);
void cu_train_rmsnorm_bwd(void *ctx, float *dx, const float *dy, const float *x, const float *rs, const float *w,
                          int rows, int dim, int acc);
void cu_train_rope(void *ctx, float *x, int T, int n_heads, int head_dim, const hearth_rope *rope, int inverse);
void cu_train_swiglu_bwd(void *ctx, float *dg, float *du, const float *g, const float *u, const float *dh, size_t n);
void cu_train_gather_rows(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim);
void cu_train_scatter_rows(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim);
void cu_train_cross_entropy(void *ctx, float *dz, double *ce, const float *z, const int32_t *y, const float *w, int n,
                            int V);
void cu_train_axpy(void *ctx, float *y, float a, const float *x, size_t n);
void cu_train_zero(void *ctx, void *p, size_t bytes);
void cu_train_sumsq(void *ctx, double *out, const float *x, size_t n);
void cu_train_adamw(void *ctx, float *w, float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                    float eps, float wd, float gs, double bc1, double bc2);
#endif

#endif
