/* dequant.cu - weight rows dequantized to bf16, the A operand of the cuBLAS
 * path of matmul (T above the GEMV range). One thread per 32-element group,
 * values computed exactly as the CPU dequantizes them, then rounded to bf16. */
#include "ops/cuda/cuda_internal.cuh"

template <int QT>
__global__ void dequant_bf16_kernel(__nv_bfloat16 *__restrict__ dst, const uint8_t *__restrict__ W, int K,
                                    size_t row_bytes, int r0, int nr, int split) {
    pdl_wait();
    const int gpr = K / 32;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)nr * gpr) {
        int r = (int)(i / gpr), g = (int)(i % gpr);
        float f[32];
        deq_row_group32<QT>(W + (size_t)(r0 + r) * row_bytes, K / qtraits<QT>::ELEMS, g, split, f);
        uint4 *o = (uint4 *)(dst + (size_t)r * K + (size_t)g * 32);
#pragma unroll
        for (int v = 0; v < 4; v++) {
            __nv_bfloat162 h[4];
#pragma unroll
            for (int e = 0; e < 4; e++) h[e] = __floats2bfloat162_rn(f[8 * v + 2 * e], f[8 * v + 2 * e + 1]);
            o[v] = *(const uint4 *)h;
        }
    }
    pdl_launch();
}

template <typename S>
__global__ void float_to_bf16_kernel(__nv_bfloat16 *__restrict__ dst, const uint8_t *__restrict__ W, int K,
                                     size_t row_bytes, int r0, int nr) {
    pdl_wait();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)nr * K) {
        int r = (int)(i / K), k = (int)(i % K);
        S v = ((const S *)(W + (size_t)(r0 + r) * row_bytes))[k];
        dst[i] = __float2bfloat16_rn((float)v);
    }
    pdl_launch();
}

void cu_dequant_bf16(const cu_launch *L, __nv_bfloat16 *dst, const void *w, hearth_dtype t, int K, size_t row_bytes,
                     int split, int r0, int nr) {
    const uint8_t *W = (const uint8_t *)w;
    int gblocks = cu_div_up((long)nr * (K / 32), 256);
    int eblocks = cu_div_up((long)nr * K, 256);
    switch (t) {
    case HEARTH_DT_Q4_0: cu_launch_k(L, dequant_bf16_kernel<HEARTH_DT_Q4_0>, dim3(gblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr, split); break;
    case HEARTH_DT_Q4_1: cu_launch_k(L, dequant_bf16_kernel<HEARTH_DT_Q4_1>, dim3(gblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr, split); break;
    case HEARTH_DT_Q8_0: cu_launch_k(L, dequant_bf16_kernel<HEARTH_DT_Q8_0>, dim3(gblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr, split); break;
    case HEARTH_DT_Q4_K: cu_launch_k(L, dequant_bf16_kernel<HEARTH_DT_Q4_K>, dim3(gblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr, split); break;
    case HEARTH_DT_Q6_K: cu_launch_k(L, dequant_bf16_kernel<HEARTH_DT_Q6_K>, dim3(gblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr, split); break;
    case HEARTH_DT_F32: cu_launch_k(L, float_to_bf16_kernel<float>, dim3(eblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr); break;
    case HEARTH_DT_F16: cu_launch_k(L, float_to_bf16_kernel<__half>, dim3(eblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr); break;
    default: break;
    }
}
