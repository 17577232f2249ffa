/* matmul.h - y = x W^T on the CPU for every weight type (the op the model's
 * linear layers call).
 *
 *   y[t*N + n] = sum_k x[t*K + k] * W[n, k]     for t < T, n < N
 *
 * W has N rows of K elements of type wt, row stride hearth_dtype_row_bytes(wt, K):
 * a GGUF tensor with ne[0] = K, ne[1] = N as it lies in the file, or an HF
 * [N][K] safetensors tensor (f32/f16/bf16). x and y are f32, row-major; y must
 * not overlap x or W.
 *
 * Numerics follow llama.cpp's CPU backend: the activations are quantized per
 * block to q8_0 (q4_0, q8_0 weights), q8_1 (q4_1) or q8_K (q4_K, q6_K) and
 * dotted with integers; for f16 / bf16 weights the activations are rounded to
 * f16 / bf16 and dotted in f32; f32 weights use x as is. The result is bit for
 * bit the same whatever the thread count, the ISA chosen at run time
 * (AVX-512, AVX2 or scalar) and T (a token's row does not depend on the
 * other tokens): each output follows one fixed sequence of f32 operations
 * (see matmul_scalar.c, which spells it out).
 *
 * Supported weight types: f32, f16, bf16, q4_0, q4_1, q8_0, q4_K, q6_K.
 * K must be a positive multiple of the type's block size (32 for q4_0/q4_1/
 * q8_0, 256 for q4_K/q6_K); the model checks shapes at load, so a violation
 * here is a programmer error (asserted). */
#ifndef HEARTH_OPS_CPU_MATMUL_H
#define HEARTH_OPS_CPU_MATMUL_H

#include "core/dtype.h"
#include "core/pool.h"
#include "ops/ops.h"

#include <stddef.h>

/* 1 when hearth_cpu_matmul accepts weights of type wt. */
int hearth_cpu_matmul_supports(hearth_dtype wt);

/* Bytes of scratch hearth_cpu_matmul needs for T tokens of K elements
 * against weights of type wt (0 for f32 weights, where NULL scratch is fine).
 * Size it once for the largest T and K at load. */
size_t hearth_cpu_matmul_scratch_bytes(hearth_dtype wt, int T, int K);

/* y = x W^T (see above). layout: HEARTH_LAYOUT_STORED, or
 * HEARTH_LAYOUT_PANEL8 for q4_0 / q4_1 / q8_0 weights re-laid by
 * hearth_cpu_panel_pack (same results, bit for bit). scratch: at least
 * hearth_cpu_matmul_scratch_bytes(wt, T, K) bytes, 64-byte aligned, owned by
 * the caller and clobbered. pool may be NULL (the calling thread does all the
 * work). Allocates nothing. Thread-safety: one call at a time per pool (and
 * per scratch). */
void hearth_cpu_matmul(hearth_pool *pool, float *y, const float *x, int T, const void *w,
                       hearth_dtype wt, int layout, int K, int N, void *scratch);

/* Several matmuls of one input x[T][K] (q, k and v; gate and up): y_i = x
 * W_i^T, the bits of hearth_cpu_matmul for each, with x's activation copy made
 * once and one dispatch of the pool for all the rows, when the weights take
 * the same kind of activations (else one call each). n <= HEARTH_CPU_MM_N;
 * scratch: the largest hearth_cpu_matmul_scratch_bytes of the n. */
#define HEARTH_CPU_MM_N 4
typedef struct {
    float *y;
    const void *w;
    hearth_dtype wt;
    int layout, N;
} hearth_cpu_mm;
void hearth_cpu_matmul_n(hearth_pool *pool, const hearth_cpu_mm *mm, int n, const float *x, int T, int K,
                         void *scratch);

/* The plain C reference for the same contract (stored layout): each weight
 * row dequantized to f32 and dotted with the unquantized x in f32, in simple
 * loops. Slow; for tests. */
void hearth_cpu_matmul_ref(float *y, const float *x, int T, const void *w, hearth_dtype wt,
                           int K, int N);

#endif
