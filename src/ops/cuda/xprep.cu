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

__device__ __forceinline__ int8_t q8_sat(float v) {
    int q = __float2int_rn(v);
    return (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q);
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
        float amax = 0.0f, mx = 0.0f;
        int idx = 1 << 30;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            v[i] = xb[i];
            if (fabsf(v[i]) > amax) {
                amax = fabsf(v[i]);
                mx = v[i];
                idx = 8 * lane + i;
            }
        }
        /* the first element of largest magnitude over the warp */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float a2 = __shfl_xor_sync(0xffffffffu, amax, o), m2 = __shfl_xor_sync(0xffffffffu, mx, o);
            int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
            if (a2 > amax || (a2 == amax && i2 < idx)) {
                amax = a2;
                mx = m2;
                idx = i2;
            }
        }
        int8_t q[8];
        float d = 0.0f;
        if (amax > 0.0f) {
            float iscale = -127.0f / mx;
#pragma unroll
            for (int i = 0; i < 8; i++) q[i] = q8_sat(iscale * v[i]);
            d = 1.0f / iscale;
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) q[i] = 0;
        }
        int sum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sum += q[i];
        *(int2 *)(qs + b * 256 + 8 * lane) =
            make_int2((q[0] & 0xff) | (q[1] & 0xff) << 8 | (q[2] & 0xff) << 16 | (int)(q[3] & 0xff) << 24,
                      (q[4] & 0xff) | (q[5] & 0xff) << 8 | (q[6] & 0xff) << 16 | (int)(q[7] & 0xff) << 24);
        /* four lanes per 32-group */
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if ((lane & 3) == 0) ds[b * 8 + lane / 4] = make_float4(d, (float)sum, 0.0f, 0.0f);
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
