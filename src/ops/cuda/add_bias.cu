/* add_bias.cu - y[T][n] += b[n]. */
#include "ops/cuda/cuda_internal.cuh"

__global__ void add_bias_kernel(float *y, const float *__restrict__ b, int T, int n) {
    pdl_wait();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * n) y[i] += b[i % n];
    pdl_launch();
}

void cu_add_bias(const cu_launch *L, float *y, const float *b, int T, int n) {
    cu_launch_k(L, add_bias_kernel, dim3(cu_div_up((long)T * n, 256)), dim3(256), 0, y, b, T, n);
}
