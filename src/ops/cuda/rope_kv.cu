/* rope_kv.cu - the recorder's fusion of rope(q), rope(k) and kv_write(k, v):
 * blocks (t, part) rotate token t's q and k heads in place (as rope.cu does)
 * and store k and v at (seq[t], pos[t]) of the paged cache (as kv_write.cu
 * does), a pair per thread spread over several blocks per token. Dimensions
 * past rot_dim are not rotated but still stored. The cache (f32, f16 or e4m3) gets
 * exactly the values the unfused ops would store. */
#include "ops/cuda/cuda_internal.cuh"

template <typename E>
__global__ void rope_kv_kernel(float *q, float *k, const float *__restrict__ v, int n_q, int n_k, int head_dim,
                               const int32_t *__restrict__ pos, const float *__restrict__ inv_freq, int half,
                               int neox, cu_kv kv, const int32_t *__restrict__ seq, int early) {
    /* positions, sequences and the block table are uploaded before the step's first kernel: the pos -> table
     * chain runs before the wait */
    const int t = blockIdx.x, p = pos[t];
    const int blk = kv.table[(size_t)seq[t] * kv.max_blocks + p / kv.block_size];
    const size_t off = ((size_t)blk * kv.block_size + (size_t)(p % kv.block_size)) * kv.kv_dim;
    pdl_wait_early(early);
    float *qt = q + (size_t)t * n_q * head_dim, *kt = k + (size_t)t * kv.kv_dim;
    const float *vt = v + (size_t)t * kv.kv_dim;
    E *kd = (E *)kv.k, *vd = (E *)kv.v;
    const int stride = blockDim.x * gridDim.y, i0 = blockIdx.y * blockDim.x + threadIdx.x;
    const int npairs = (n_q + n_k) * half;
    /* RB pairs a round: their loads are issued before any store (a store may alias a later load, so a
     * load-rotate-store loop would wait a memory round trip per pair: 20 a thread for long prompts) */
    constexpr int RB = 4;
    for (int ib = i0; ib < npairs; ib += RB * stride) {
        float *x[RB];
        float x0[RB], x1[RB];
        int a[RB], b[RB];
#pragma unroll
        for (int u = 0; u < RB; u++) {
            const int i = ib + u * stride, h = i / half, pi = i - h * half;
            a[u] = neox ? pi : 2 * pi;
            b[u] = neox ? pi + half : 2 * pi + 1;
            x[u] = h < n_q ? qt + (size_t)h * head_dim : kt + (size_t)(h - n_q) * head_dim;
            if (i < npairs) x0[u] = x[u][a[u]], x1[u] = x[u][b[u]];
        }
#pragma unroll
        for (int u = 0; u < RB; u++) {
            const int i = ib + u * stride, h = i / half, pi = i - h * half;
            if (i >= npairs) break;
            float y0 = x0[u], y1 = x1[u];
            rope_rotate(y0, y1, p, inv_freq[pi]);
            x[u][a[u]] = y0;
            x[u][b[u]] = y1;
            if (h >= n_q) {
                kv_st(kd, off + (size_t)(h - n_q) * head_dim + a[u], y0);
                kv_st(kd, off + (size_t)(h - n_q) * head_dim + b[u], y1);
            }
        }
    }
    for (int i = i0; i < kv.kv_dim; i += stride) {
        if (i % head_dim >= 2 * half) kv_st(kd, off + i, kt[i]);
        kv_st(vd, off + i, vt[i]);
    }
    pdl_done(early);
}

void cu_rope_kv(const cu_launch *L, float *q, float *k, const float *v, int T, int n_q, int n_k, int head_dim,
                const int32_t *pos, const float *inv_freq, int rot_dim, int neox, const cu_kv *kv,
                const int32_t *seq) {
    /* blocks per token: enough to fill the chip for a few tokens (decode);
     * one for long prompts, so the pos -> block-table -> cache chain at a
     * block's start is paid once per token, not once per 128 pairs */
    int parts = cu_div_up((long)(n_q + n_k) * (rot_dim / 2), 128);
    int fill = cu_div_up(4L * L->n_sm, T);
    if (parts > fill) parts = fill;
    if (parts > 32) parts = 32;
    if (parts < 1) parts = 1;
    if (kv->f16)
        cu_launch_k(L, rope_kv_kernel<__half>, dim3(T, parts), dim3(128), 0, q, k, v, n_q, n_k, head_dim, pos,
                    inv_freq, rot_dim / 2, neox, *kv, seq, L->pdl_early);
    else if (kv->fp8)
        cu_launch_k(L, rope_kv_kernel<__nv_fp8_e4m3>, dim3(T, parts), dim3(128), 0, q, k, v, n_q, n_k, head_dim, pos,
                    inv_freq, rot_dim / 2, neox, *kv, seq, L->pdl_early);
    else
        cu_launch_k(L, rope_kv_kernel<float>, dim3(T, parts), dim3(128), 0, q, k, v, n_q, n_k, head_dim, pos,
                    inv_freq, rot_dim / 2, neox, *kv, seq, L->pdl_early);
}
