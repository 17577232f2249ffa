/* gemm.h - y = x B in f32 with B's rows along the output (B [K][N]), the
 * product training's backward takes (dy W through a frozen weight W as
 * stored): a panel of B is packed, then each k broadcasts x[t][k] against a
 * row of it, so no sum is reduced across lanes (a BLAS micro-kernel's way). */
#ifndef HEARTH_OPS_CPU_GEMM_H
#define HEARTH_OPS_CPU_GEMM_H

#include "core/pool.h"

/* y[T][N] = x[T][K] B[K][N], or y += with acc; row-major, no overlap.
 * Threads (pool, may be NULL) take column tiles; results do not depend on
 * the thread count. AVX-512, AVX2+FMA or scalar: the ISA the matmuls use
 * (matmul_impl.h). */
void hearth_cpu_gemm_nn(hearth_pool *pool, float *y, const float *x, int T, const float *b, int K, int N, int acc);

#endif
