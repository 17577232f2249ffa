/* rope.cu - rotary embedding in place: pair (a, b) of each head turned by
 * pos[t] * inv_freq[i] (rope_rotate); neox pairs (i, i + rot/2), otherwise
 * (2i, 2i+1). */
#include "ops/cuda/cuda_internal.cuh"

__global__ void rope_kernel(float *x, int T, int n_heads, int head_dim, const int32_t *__restrict__ pos,
                            const float *__restrict__ inv_freq, int half, int neox) {
    pdl_wait();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)T * n_heads * half;
    if (i < total) {
        int p = (int)(i % half);
        size_t th = i / half;
        int t = (int)(th / n_heads);
        float *v = x + th * head_dim;
        int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
        float x0 = v[a], x1 = v[b];
        rope_rotate(x0, x1, pos[t], inv_freq[p]);
        v[a] = x0;
        v[b] = x1;
    }
    pdl_launch();
}

void cu_rope(const cu_launch *L, float *x, int T, int n_heads, int head_dim, const int32_t *pos,
             const float *inv_freq, int rot_dim, int neox) {
    int half = rot_dim / 2;
    long total = (long)T * n_heads * half;
    cu_launch_k(L, rope_kernel, dim3(cu_div_up(total, 256)), dim3(256), 0, x, T, n_heads, head_dim, pos, inv_freq,
                half, neox);
}
