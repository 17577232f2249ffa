/* add_rmsnorm.cu - the recorder's fusion of a residual add, the rmsnorm that
 * reads its result, and the preparation of the normed row for the matmuls
 * that follow (bf16 / f16 copy, q8 in 32-blocks or q8_K in 256-blocks, as
 * xprep.cu makes them):
 *   X += D (when D is given); Y = X / rms(X) * w; prep(Y).
 * Y NULL: the recorder found Y dead (only its prepared copy is read), so
 * only the copy is written.
 * One block of 1024 threads per row (a decode step has one row: the whole
 * chip waits on this block, so it is wide and shallow), each thread holding
 * the elements k with k % 1024 == tid (dim <= 8192), so Y may alias X or D:
 * every element is read and written by one thread. Rounding as rmsnorm.cu
 * and add.cu. */
#include "ops/cuda/cuda_internal.cuh"

#include <stdlib.h>

#define AR_NT 1024
#define AR_MAXJ 8 /* dim <= AR_NT * AR_MAXJ */

/* The normed row y = v * s * w (element j * AR_NT + tid in v[j]) stored (yr, unless NULL) and made q8
 * (kind XPREP_Q8) or q8_K (XPREP_Q8K) into qs / ds from element e0 on, the bits of xprep.cu's kernels:
 * the row goes through shared memory so that a warp holds 256 of it, eight consecutive elements a lane
 * (a q8_K pick is then one warp's, and a q8 group's max and sum four lanes', not a whole warp's). */
__device__ __forceinline__ void q8_row(int kind, const float *v, float s, const float *wv, float *yr, int8_t *qs,
                                       float4 *ds, size_t e0, int dim) {
    __shared__ __align__(16) float ys[AR_NT * AR_MAXJ];
    const int tid = threadIdx.x, lane = tid & 31;
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) {
        const int k = j * AR_NT + tid;
        if (k < dim) {
            const float y = v[j] * s * wv[j];
            ys[k] = y;
            if (yr) yr[k] = y;
        }
    }
    __syncthreads();
    for (int b = tid >> 5; b < dim / 256; b += AR_NT / 32) /* dim % 256 == 0 */
        warp_q8_block_at(kind, ys + 256 * b, lane, qs + e0 + 256 * (size_t)b, ds + (e0 + 256 * (size_t)b) / 32);
}

__global__ void __launch_bounds__(AR_NT) add_rmsnorm_kernel(float *X, const float *D, float *Y,
                                                          const float *__restrict__ w, int dim, float eps, int kind,
                                                          void *prep, int T, int early) {
    __shared__ double red[AR_NT / 32];
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
    float wv[AR_MAXJ]; /* the norm weight is no kernel's output: read before the wait */
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) wv[j] = j * AR_NT + tid < dim ? w[j * AR_NT + tid] : 0.0f;
    pdl_wait_early(early);
    float *xr = X + (size_t)row * dim;
    const float *dr = D ? D + (size_t)row * dim : NULL;
    float *yr = Y ? Y + (size_t)row * dim : NULL; /* NULL: only the prepared copy is wanted */
    float v[AR_MAXJ];
    double ss = 0.0;
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) {
        int k = j * AR_NT + tid;
        v[j] = 0.0f;
        if (k < dim) {
            float a = xr[k];
            if (dr) a = a + dr[k];
            v[j] = a;
            ss += (double)(a * a);
        }
    }
    if (dr) {
#pragma unroll
        for (int j = 0; j < AR_MAXJ; j++) {
            int k = j * AR_NT + tid;
            if (k < dim) xr[k] = v[j];
        }
    }
    const float s = block_inv_rms<AR_NT>(ss, red, dim, eps);
    pdl_done(early);
    const size_t n = (size_t)T * dim;
    if ((kind == XPREP_Q8K || kind == XPREP_Q8) && dim % 256 == 0) { /* q8_K: always */
        q8_row(kind, v, s, wv, yr, (int8_t *)prep, (float4 *)((int8_t *)prep + n), (size_t)row * dim, dim);
        return;
    }
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) {
        int k = j * AR_NT + tid;
        if (j * AR_NT >= dim) break;
        float y = 0.0f;
        if (k < dim) {
            y = v[j] * s * wv[j];
            if (yr) yr[k] = y;
        }
        /* Q8: dim % 32 == 0, so a warp holds one 32-group */
        if (kind == XPREP_Q8 ? j * AR_NT + (tid & ~31) < dim : k < dim)
            prep_store(kind, prep, n, (size_t)row * dim + k, y, lane);
    }
}

/* Many rows (prefill): a 256-thread block per row, each thread four
 * consecutive elements (16-byte loads and stores) at k = 4 (tid + 256 j);
 * the per-row chain is short and eight blocks fit a multiprocessor, where
 * the 1024-thread block above kept two (2048 rows of 4096: 50 us, ~2.3 TB/s,
 * s6-run2 trace). Same arithmetic per element; bf16 / f16 / no copy. */
#define ARR_NT 256
#define ARR_MAXJ 8 /* dim <= 4 * ARR_NT * ARR_MAXJ */
__global__ void __launch_bounds__(ARR_NT) add_rmsnorm_rows_kernel(float *X, const float *D, float *Y,
                                                                const float *__restrict__ w, int dim, float eps,
                                                                int kind, void *prep, int T) {
    __shared__ double red[ARR_NT / 32];
    const int row = blockIdx.x, tid = threadIdx.x, nc = dim / 4;
    float4 wv[ARR_MAXJ];
#pragma unroll
    for (int j = 0; j < ARR_MAXJ; j++)
        if (j * ARR_NT + tid < nc) wv[j] = ((const float4 *)w)[j * ARR_NT + tid];
    pdl_wait();
    float4 *xr = (float4 *)(X + (size_t)row * dim);
    const float4 *dr = D ? (const float4 *)(D + (size_t)row * dim) : NULL;
    float4 v[ARR_MAXJ];
#pragma unroll
    for (int j = 0; j < ARR_MAXJ; j++)
        if (j * ARR_NT + tid < nc) v[j] = xr[j * ARR_NT + tid];
    if (dr) {
        float4 d[ARR_MAXJ];
#pragma unroll
        for (int j = 0; j < ARR_MAXJ; j++)
            if (j * ARR_NT + tid < nc) d[j] = dr[j * ARR_NT + tid];
#pragma unroll
        for (int j = 0; j < ARR_MAXJ; j++)
            if (j * ARR_NT + tid < nc) {
                v[j].x += d[j].x, v[j].y += d[j].y, v[j].z += d[j].z, v[j].w += d[j].w;
                xr[j * ARR_NT + tid] = v[j];
            }
    }
    double ss = 0.0;
#pragma unroll
    for (int j = 0; j < ARR_MAXJ; j++)
        if (j * ARR_NT + tid < nc) {
            ss += (double)(v[j].x * v[j].x);
            ss += (double)(v[j].y * v[j].y);
            ss += (double)(v[j].z * v[j].z);
            ss += (double)(v[j].w * v[j].w);
        }
    const float s = block_inv_rms<ARR_NT>(ss, red, dim, eps);
    pdl_launch();
    float4 *yr = Y ? (float4 *)(Y + (size_t)row * dim) : NULL;
#pragma unroll
    for (int j = 0; j < ARR_MAXJ; j++) {
        const int c = j * ARR_NT + tid;
        if (c >= nc) break;
        const float4 y = {v[j].x * s * wv[j].x, v[j].y * s * wv[j].y, v[j].z * s * wv[j].z, v[j].w * s * wv[j].w};
        if (yr) yr[c] = y;
        const size_t e = (size_t)row * dim + 4 * (size_t)c;
        if (kind == XPREP_BF16) {
            __nv_bfloat162 a = __floats2bfloat162_rn(y.x, y.y), b = __floats2bfloat162_rn(y.z, y.w);
            uint2 u = {*(uint32_t *)&a, *(uint32_t *)&b};
            *(uint2 *)((__nv_bfloat16 *)prep + e) = u;
        } else if (kind == XPREP_F16) {
            __half2 a = __floats2half2_rn(y.x, y.y), b = __floats2half2_rn(y.z, y.w);
            uint2 u = {*(uint32_t *)&a, *(uint32_t *)&b};
            *(uint2 *)((__half *)prep + e) = u;
        }
    }
}

int cu_add_rmsnorm_fits(int dim, int kind) {
    return dim <= AR_NT * AR_MAXJ && (kind != XPREP_Q8 || dim % QK == 0) && (kind != XPREP_Q8K || dim % 256 == 0);
}

void cu_add_rmsnorm(const cu_launch *L, float *X, const float *D, float *Y, const float *w, int rows, int dim,
                    float eps, int kind, void *prep) {
    static int rows_off = -1; /* HEARTH_ARN_ROWS=0: the 1024-thread kernel for every row count (benchmarks) */
    if (rows_off < 0) {
        const char *s = getenv("HEARTH_ARN_ROWS");
        rows_off = s && atoi(s) == 0;
    }
    const uintptr_t al = (uintptr_t)X | (uintptr_t)D | (uintptr_t)Y | (uintptr_t)w;
    if (!rows_off && rows > 8 && dim % 4 == 0 && dim <= 4 * ARR_NT * ARR_MAXJ && al % 16 == 0 &&
        (kind == XPREP_NONE || ((kind == XPREP_BF16 || kind == XPREP_F16) && (uintptr_t)prep % 8 == 0))) {
        cu_launch_k(L, add_rmsnorm_rows_kernel, dim3(rows), dim3(ARR_NT), 0, X, D, Y, w, dim, eps, kind, prep, rows);
        return;
    }
    cu_launch_k(L, add_rmsnorm_kernel, dim3(rows), dim3(AR_NT), 0, X, D, Y, w, dim, eps, kind, prep, rows,
                L->pdl_early);
}
