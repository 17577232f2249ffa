/* kv_write.cu - k, v [T][kv_dim] stored at (seq[t], pos[t]) of the paged
 * cache: block table row seq, block pos / block_size, slot pos % block_size.
 * An f16 cache gets each value rounded to nearest even (hearth_f32_to_f16),
 * an e4m3 one rounded to nearest even and saturated (hearth_f32_to_e4m3). */
#include "ops/cuda/cuda_internal.cuh"

template <typename E>
__global__ void kv_write_kernel(cu_kv kv, const float *__restrict__ k, const float *__restrict__ v,
                                const int32_t *__restrict__ seq, const int32_t *__restrict__ pos) {
    pdl_wait();
    const int t = blockIdx.x;
    const int p = pos[t];
    const int blk = kv.table[(size_t)seq[t] * kv.max_blocks + p / kv.block_size];
    const size_t off = ((size_t)blk * kv.block_size + (size_t)(p % kv.block_size)) * kv.kv_dim;
    const float *ks = k + (size_t)t * kv.kv_dim, *vs = v + (size_t)t * kv.kv_dim;
    E *kd = (E *)kv.k, *vd = (E *)kv.v;
    for (int j = threadIdx.x; j < kv.kv_dim; j += blockDim.x) {
        kv_st(kd, off + j, ks[j]);
        kv_st(vd, off + j, vs[j]);
    }
    pdl_launch();
}

void cu_kv_write(const cu_launch *L, const cu_kv *kv, const float *k, const float *v, int T, const int32_t *seq,
                 const int32_t *pos) {
    if (kv->f16) cu_launch_k(L, kv_write_kernel<__half>, dim3(T), dim3(256), 0, *kv, k, v, seq, pos);
    else if (kv->fp8) cu_launch_k(L, kv_write_kernel<__nv_fp8_e4m3>, dim3(T), dim3(256), 0, *kv, k, v, seq, pos);
    else cu_launch_k(L, kv_write_kernel<float>, dim3(T), dim3(256), 0, *kv, k, v, seq, pos);
}
