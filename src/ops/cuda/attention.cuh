/* attention.cuh - what the two attention kernels share: which rows the
 * tensor-core prefill kernel takes (the decision is made on the device, the
 * same way by both kernels, so each row is computed exactly once). */
#ifndef HEARTH_OPS_CUDA_ATTENTION_CUH
#define HEARTH_OPS_CUDA_ATTENTION_CUH

#include "ops/cuda/cuda_internal.cuh"

/* Rows [tile*bm, min(T, tile*bm + bm)) all belong to one sequence. Every
 * thread of the block must call it (it ends in a barrier): each thread loads
 * a few seq entries at once, so a block that only decides to skip costs one
 * load latency, not bm dependent loads. */
__device__ __forceinline__ bool tile_uniform(const int32_t *seq, int T, int tile, int bm) {
    const int r0 = tile * bm, r1 = min(T, r0 + bm);
    const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int nt = blockDim.x * blockDim.y * blockDim.z;
    const int s0 = seq[r0];
    int same = 1;
    for (int r = r0 + 1 + tid; r < r1; r += nt) same &= seq[r] == s0;
    return __syncthreads_and(same) != 0;
}

/* The tensor-core kernel for head_dim 64 or 128: one block per (64-row tile,
 * query head); tiles whose rows span several sequences are left untouched. */
void cu_attention_prefill(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                          const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window);

/* attention_flash.cu: the flash-attention 2 kernel for f16 caches, head_dim
 * 64 or 128 and a power-of-two block size (cu_attention_flash_fits), the
 * same tiles (64 rows of one sequence) as the kernels of
 * attention_prefill.cu; qscale = scale * log2(e). */
int cu_attention_flash_fits(const cu_kv *kv, int head_dim);
void cu_attention_flash(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                        const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float qscale, int window);

/* Flash-decoding over tiles of positions for batches of rows (attention_rows.cu):
 * the same grid, split rule (at least minpos positions a split), partial
 * layout and skip rule as the per-warp decode kernel of attention.cu. */
int cu_attention_rows_fits(int head_dim, const cu_kv *kv);
void cu_attention_rows(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv, const int32_t *seq,
                       const int32_t *pos, int T, int n_heads, int n_kv, int head_dim, float scale, int window, int S,
                       int minpos, float *part, int skip_bm);

/* Flash-decoding for a few rows, splits merged in the same launch
 * (attention_decode.cu); the grid and partial layout of the per-warp kernel. */
int cu_attention_decode_fits(int head_dim, const cu_kv *kv, int T, int n_heads, int n_kv, int S, int n_cnt);
void cu_attention_decode(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                         const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int head_dim,
                         float scale, int window, int S, float *part, int *cnt, int skip_bm);

#endif
