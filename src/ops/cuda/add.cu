/* add.cu - the residual add y[n] += x[n]. */
#include "ops/cuda/cuda_internal.cuh"

__global__ void add_kernel(float *y, const float *x, size_t n) {
    pdl_wait();
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n && (((uintptr_t)(y + i) | (uintptr_t)(x + i)) & 15) == 0) {
        float4 a = *(float4 *)(y + i), b = *(const float4 *)(x + i);
        a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
        *(float4 *)(y + i) = a;
    } else {
        for (size_t j = i; j < i + 4 && j < n; j++) y[j] += x[j];
    }
    pdl_launch();
}

void cu_add(const cu_launch *L, float *y, const float *x, size_t n) {
    cu_launch_k(L, add_kernel, dim3(cu_div_up((long)n, 1024)), dim3(256), 0, y, x, n);
}
