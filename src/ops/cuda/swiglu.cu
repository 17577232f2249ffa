/* swiglu.cu - out = silu(gate) * up, in the CPU's order of operations
 * (g / (1 + e^-g) * u, accurate expf). out may alias gate. */
#include "ops/cuda/cuda_internal.cuh"

__global__ void swiglu_kernel(float *out, const float *gate, const float *up, size_t n) {
    pdl_wait();
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n && (((uintptr_t)(out + i) | (uintptr_t)(gate + i) | (uintptr_t)(up + i)) & 15) == 0) {
        float4 g = *(const float4 *)(gate + i), u = *(const float4 *)(up + i), o;
        o.x = g.x / (1.0f + expf(-g.x)) * u.x;
        o.y = g.y / (1.0f + expf(-g.y)) * u.y;
        o.z = g.z / (1.0f + expf(-g.z)) * u.z;
        o.w = g.w / (1.0f + expf(-g.w)) * u.w;
        *(float4 *)(out + i) = o;
    } else {
        for (size_t j = i; j < i + 4 && j < n; j++) {
            float g = gate[j];
            out[j] = g / (1.0f + expf(-g)) * up[j];
        }
    }
    pdl_launch();
}

void cu_swiglu(const cu_launch *L, float *out, const float *gate, const float *up, int T, int n) {
    size_t total = (size_t)T * (size_t)n;
    cu_launch_k(L, swiglu_kernel, dim3(cu_div_up((long)total, 1024)), dim3(256), 0, out, gate, up, total);
}
