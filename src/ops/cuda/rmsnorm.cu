/* rmsnorm.cu - y = x / sqrt(mean(x^2) + eps) * w per row, in the CPU's (and
 * ggml's) rounding: f32 squares summed in double, the mean rounded to f32.
 * y may alias x: each element is read and written by the same thread. A warp
 * per row for short rows (per-head q/k norms), a block per row for
 * hidden-size rows. */
#include "ops/cuda/cuda_internal.cuh"

__global__ void rmsnorm_warp_kernel(float *y, const float *x, const float *__restrict__ w, int n_rows, int dim,
                                    float eps) {
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (row >= n_rows) return;
    const float *xr = x + (size_t)row * dim;
    float *yr = y + (size_t)row * dim;
    float v[8]; /* dim <= 256 */
    double ss = 0.0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int k = lane + 32 * i;
        v[i] = k < dim ? xr[k] : 0.0f;
        ss += (double)(v[i] * v[i]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float s = 1.0f / sqrtf((float)(ss / dim) + eps);
    pdl_launch();
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int k = lane + 32 * i;
        if (k < dim) yr[k] = v[i] * s * w[k];
    }
}

__global__ void __launch_bounds__(256) rmsnorm_block_kernel(float *y, const float *x, const float *__restrict__ w,
                                                            int dim, float eps) {
    pdl_wait();
    __shared__ double red[8];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *yr = y + (size_t)blockIdx.x * dim;
    double ss = 0.0;
    for (int k = threadIdx.x; k < dim; k += 256) ss += (double)(xr[k] * xr[k]);
    float s = block_inv_rms<256>(ss, red, dim, eps);
    pdl_launch();
    for (int k = threadIdx.x; k < dim; k += 256) yr[k] = xr[k] * s * w[k];
}

void cu_rmsnorm(const cu_launch *L, float *y, const float *x, const float *w, int n_rows, int dim, float eps) {
    if (dim <= 256)
        cu_launch_k(L, rmsnorm_warp_kernel, dim3(cu_div_up(n_rows, 8)), dim3(256), 0, y, x, w, n_rows, dim, eps);
    else
        cu_launch_k(L, rmsnorm_block_kernel, dim3(n_rows), dim3(256), 0, y, x, w, dim, eps);
}
