/* xprep.cu - activations converted for a matmul, exactly as the CPU backend
 * converts them (ops/cpu/matmul_scalar.c):
 *   bf16 / f16 copies (round to nearest even) for bf16 / f16 weights;
 *   q8 in 32-blocks (llama.cpp's x86 q8_0/q8_1) for q4_0, q4_1, q8_0: amax,
 *     d = f16(amax / 127), q = rne(x * 127 / amax), s = f16(amax/127 * sum q);
 *   q8_K in 256-blocks for q4_K, q6_K: max = the first element of largest
 *     magnitude, iscale = -127 / max, q = rne(iscale * x), d = 1 / iscale.
 * Both q8 forms share one layout: qs int8 [T][K], then float4 [T][K/32] per
 * 32-group = (d, sum of the group's q, s, 0); q8_K repeats its d in each of
 * its 8 groups. */
#include "ops/cuda/cuda_internal.cuh"

#include <type_traits>

size_t cu_xprep_bytes(int kind, int T, int K) {
    size_t n = (size_t)T * (size_t)K;
    switch (kind) {
    case XPREP_BF16:
    case XPREP_F16: return n * 2;
    case XPREP_Q8:
    case XPREP_Q8K: return n + (n / QK) * sizeof(float4);
    }
    return 0;
}

template <typename H>
__global__ void to_half_kernel(H *dst, const float *x, size_t n, int early) {
    pdl_wait_early(early);
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n && ((uintptr_t)(x + i) & 15) == 0) {
        float4 v = *(const float4 *)(x + i);
        if constexpr (std::is_same_v<H, __nv_bfloat16>) {
            __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
            *(__nv_bfloat162 *)(dst + i) = a;
            *(__nv_bfloat162 *)(dst + i + 2) = b;
        } else {
            __half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
            *(__half2 *)(dst + i) = a;
            *(__half2 *)(dst + i + 2) = b;
        }
    } else {
        for (size_t j = i; j < i + 4 && j < n; j++) {
            if constexpr (std::is_same_v<H, __nv_bfloat16>) dst[j] = __float2bfloat16_rn(x[j]);
            else dst[j] = __float2half_rn(x[j]);
        }
    }
    pdl_done(early);
}

/* One warp per block of 32: lane i holds element i. */
__global__ void to_q8_kernel(int8_t *qs, float4 *ds, const float *x, size_t n_blocks, int early) {
    pdl_wait_early(early);
    size_t b = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (b < n_blocks) warp_q8_group(x[b * QK + lane], lane, qs + b * QK + lane, ds + b);
    pdl_done(early);
}

/* One warp per block of 256: lane i holds elements 8i .. 8i+7. */
__global__ void to_q8k_kernel(int8_t *qs, float4 *ds, const float *x, size_t n_blocks, int early) {
    pdl_wait_early(early);
    size_t b = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (b < n_blocks) {
        const float *xb = x + b * 256 + 8 * lane;
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = xb[i];
        warp_q8k_block(v, lane, qs + b * 256, ds + b * 8);
    }
    pdl_done(early);
}

void cu_xprep(const cu_launch *L, int kind, void *dst, const float *x, int T, int K) {
    size_t n = (size_t)T * (size_t)K;
    if (kind == XPREP_BF16) {
        cu_launch_k(L, to_half_kernel<__nv_bfloat16>, dim3(cu_div_up((long)n, 1024)), dim3(256), 0,
                    (__nv_bfloat16 *)dst, x, n, L->pdl_early);
    } else if (kind == XPREP_F16) {
        cu_launch_k(L, to_half_kernel<__half>, dim3(cu_div_up((long)n, 1024)), dim3(256), 0, (__half *)dst, x, n,
                    L->pdl_early);
    } else if (kind == XPREP_Q8) {
        size_t nb = n / QK;
        cu_launch_k(L, to_q8_kernel, dim3(cu_div_up((long)nb, 8)), dim3(256), 0, (int8_t *)dst,
                    (float4 *)((int8_t *)dst + n), x, nb, L->pdl_early);
    } else if (kind == XPREP_Q8K) {
        size_t nb = n / 256;
        cu_launch_k(L, to_q8k_kernel, dim3(cu_div_up((long)nb, 8)), dim3(256), 0, (int8_t *)dst,
                    (float4 *)((int8_t *)dst + n), x, nb, L->pdl_early);
    }
}
