/* lora.cu - LoRA over the matrices of one input (ops.h `lora`), as two
 * kernels, Punica's shrink and expand:
 *   shrink  tmp[t][j] = A[j] . x[t]            j < n R (every member's A rows)
 *   expand  y_i[t][o] += B[o_i + o] . tmp[t][i R .. i R + R)
 * Up to 8 rows (decode) two kernels: a block takes one row of A, its 8
 * warps a share of K each; a thread takes one row of B for 8 rows of tmp.
 * More rows: cuBLAS f32 GEMMs, the expand accumulating into y (beta 1), or
 * the expand kernel where only some rows are the adapter's. Rows
 * whose id is not the adapter's are skipped by both (a mixed batch). A
 * layer's q, k, v (or gate, up) take one launch of each, whatever the rank. */
#include "ops/cuda/matmul.cuh"

enum { LORA_ROWS = 8 };

/* Shrink for at most 8 rows of x (decode): one row of A a block, its K
 * split over the block's 8 warps. */
template <bool V4>
__global__ void lora_shrink_split_kernel(float *tmp, const float *x, const float *a, int T, int K, int nR,
                                         const int32_t *ids, int id) {
    __shared__ float part[8][LORA_ROWS];
    pdl_wait();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, j = blockIdx.x;
    float acc[LORA_ROWS] = {};
    const float *ar = a + (size_t)j * K;
    if (V4) {
        for (int k = threadIdx.x; k < K / 4; k += 256) {
            const float4 w = ((const float4 *)ar)[k];
#pragma unroll
            for (int u = 0; u < LORA_ROWS; u++)
                if (u < T) {
                    const float4 v = ((const float4 *)(x + (size_t)u * K))[k];
                    acc[u] += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
                }
        }
    } else {
        for (int k = threadIdx.x; k < K; k += 256) {
            const float w = ar[k];
#pragma unroll
            for (int u = 0; u < LORA_ROWS; u++)
                if (u < T) acc[u] += w * x[(size_t)u * K + k];
        }
    }
#pragma unroll
    for (int u = 0; u < LORA_ROWS; u++) {
        float s = acc[u];
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) part[warp][u] = s;
    }
    __syncthreads();
    if (threadIdx.x < T && (!ids || ids[threadIdx.x] == id)) {
        float s = 0;
        for (int w = 0; w < 8; w++) s += part[w][threadIdx.x]; /* warp order: the same sum every launch */
        tmp[(size_t)threadIdx.x * nR + j] = s;
    }
    pdl_launch();
}

__global__ void lora_expand_kernel(float *y0, float *y1, float *y2, int n0, int n1, int n2, const float *tmp,
                                   const float *b, int T, int R, int nR, const int32_t *ids, int id) {
    pdl_wait();
    const int row = blockIdx.x * blockDim.x + threadIdx.x, t0 = blockIdx.y * LORA_ROWS;
    if (row < n0 + n1 + n2) {
        const int i = row < n0 ? 0 : row < n0 + n1 ? 1 : 2;
        const int o = row - (i == 0 ? 0 : i == 1 ? n0 : n0 + n1), n = i == 0 ? n0 : i == 1 ? n1 : n2;
        float *y = i == 0 ? y0 : i == 1 ? y1 : y2;
        const float4 *br = (const float4 *)(b + (size_t)row * R);
        for (int u = 0; u < LORA_ROWS; u++) {
            const int t = t0 + u;
            if (t >= T) break;
            if (ids && ids[t] != id) continue;
            const float4 *tr = (const float4 *)(tmp + (size_t)t * nR + (size_t)i * R);
            float s = 0;
            for (int r = 0; r < R / 4; r++) {
                const float4 w = br[r], v = tr[r];
                s += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
            }
            y[(size_t)t * n + o] += s;
        }
    }
    pdl_launch();
}

void cu_lora(const cu_launch *L, cu_mm_state *mm, float *const *y, const float *x, int T, int K, const float *a,
             const float *b, int R, const int *n_out, int n, const int32_t *ids, int32_t id, float *tmp) {
    const int nR = n * R, rows = n_out[0] + (n > 1 ? n_out[1] : 0) + (n > 2 ? n_out[2] : 0);
    const unsigned tiles = (unsigned)cu_div_up(T, LORA_ROWS);
    const bool v4 = K % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)a & 15) == 0;
    if (T > LORA_ROWS) { /* cuBLAS: the shrink, and the expand straight into y when every row is the adapter's */
        cu_gemm_f32(L, mm, a, K, x, K, tmp, nR, T, K, nR, 0);
        if (!ids) {
            for (int i = 0, o = 0; i < n; o += n_out[i++])
                cu_gemm_f32(L, mm, b + (size_t)o * R, R, tmp + (size_t)i * R, nR, y[i], n_out[i], T, R, n_out[i], 1);
            return;
        }
    } else if (v4) {
        cu_launch_k(L, lora_shrink_split_kernel<true>, dim3(nR), dim3(256), 0, tmp, x, a, T, K, nR, ids, (int)id);
    } else {
        cu_launch_k(L, lora_shrink_split_kernel<false>, dim3(nR), dim3(256), 0, tmp, x, a, T, K, nR, ids, (int)id);
    }
    cu_launch_k(L, lora_expand_kernel, dim3(cu_div_up(rows, 128), tiles), dim3(128), 0, y[0], n > 1 ? y[1] : y[0],
                n > 2 ? y[2] : y[0], n_out[0], n > 1 ? n_out[1] : 0, n > 2 ? n_out[2] : 0, (const float *)tmp, b, T, R,
                nR, ids, (int)id);
}
