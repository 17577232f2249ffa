/* swiglu.cu - out = silu(gate) * up, in the CPU's order of operations
 * (g / (1 + e^-g) * u, accurate expf). out may alias gate. With a prep
 * kind (the recorder's fusion with the matmul that reads out), the bf16 or
 * f16 copy of out that the matmul would make (xprep.cu) is written too, and
 * out may be NULL (the recorder found it dead: only the copy is read). */
#include "ops/cuda/cuda_internal.cuh"

#include <type_traits>

template <typename H> __device__ __forceinline__ void put_half(H *dst, size_t i, float v);
template <> __device__ __forceinline__ void put_half(__nv_bfloat16 *dst, size_t i, float v) { dst[i] = __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ void put_half(__half *dst, size_t i, float v) { dst[i] = __float2half_rn(v); }

/* H = float: no copy. */
template <typename H>
__global__ void swiglu_kernel(float *out, const float *gate, const float *up, size_t n, H *prep) {
    pdl_wait();
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    const uintptr_t oa = out ? (uintptr_t)(out + i) : 0;
    if (i + 3 < n && ((oa | (uintptr_t)(gate + i) | (uintptr_t)(up + i)) & 15) == 0) {
        float4 g = *(const float4 *)(gate + i), u = *(const float4 *)(up + i), o;
        o.x = g.x / (1.0f + expf(-g.x)) * u.x;
        o.y = g.y / (1.0f + expf(-g.y)) * u.y;
        o.z = g.z / (1.0f + expf(-g.z)) * u.z;
        o.w = g.w / (1.0f + expf(-g.w)) * u.w;
        if (out) *(float4 *)(out + i) = o;
        if constexpr (!std::is_same_v<H, float>) {
            put_half(prep, i, o.x);
            put_half(prep, i + 1, o.y);
            put_half(prep, i + 2, o.z);
            put_half(prep, i + 3, o.w);
        }
    } else {
        for (size_t j = i; j < i + 4 && j < n; j++) {
            float g = gate[j], o = g / (1.0f + expf(-g)) * up[j];
            if (out) out[j] = o;
            if constexpr (!std::is_same_v<H, float>) put_half(prep, j, o);
        }
    }
    pdl_launch();
}

int cu_swiglu_prep_fits(int kind) { return kind == XPREP_NONE || kind == XPREP_BF16 || kind == XPREP_F16; }

void cu_swiglu_prep(const cu_launch *L, float *out, const float *gate, const float *up, int T, int n, int kind,
                    void *prep) {
    size_t total = (size_t)T * (size_t)n;
    dim3 grid(cu_div_up((long)total, 1024)), block(256);
    if (kind == XPREP_BF16)
        cu_launch_k(L, swiglu_kernel<__nv_bfloat16>, grid, block, 0, out, gate, up, total, (__nv_bfloat16 *)prep);
    else if (kind == XPREP_F16)
        cu_launch_k(L, swiglu_kernel<__half>, grid, block, 0, out, gate, up, total, (__half *)prep);
    else
        cu_launch_k(L, swiglu_kernel<float>, grid, block, 0, out, gate, up, total, (float *)NULL);
}

void cu_swiglu(const cu_launch *L, float *out, const float *gate, const float *up, int T, int n) {
    cu_swiglu_prep(L, out, gate, up, T, n, XPREP_NONE, NULL);
}
