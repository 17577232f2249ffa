/* attention_decode.cu - flash-decoding for a few rows (T <= 8: one decode
 * step of a few sequences), built for latency.
 *
 * A block of 256 threads per (split, kv head x query-head group, row) walks
 * its positions in tiles of 64, four threads per position. Each thread
 * issues all its loads of a tile at once (its quarter of the position's K
 * and V rows, 16-byte pieces), so a tile costs one memory round trip:
 *  (1) scores: each thread dots its quarter of K with every query head of
 *      the group (q in shared memory), two shuffles sum the quarters; its
 *      quarter of V goes to shared memory as stored;
 *  (2) a warp per head updates the online softmax once for the tile;
 *  (3) P x V from shared memory, a thread per (head, dimension pair).
 * Splits end in the same kernel: each block writes its partial (the layout
 * of attention.cu's partials), and the last block of a (row, kv head) to
 * finish (a counter, reset by that block) merges them. So one launch, no
 * combine kernel, and about six memory latencies from start to output.
 *
 * The math is attention.cu's: f32 scores from the cache as stored (f16 and
 * e4m3 widened exactly), expf, f32 accumulation; only the order of the sums
 * differs. */
#include "ops/cuda/attention.cuh"

#define DD_THREADS 256
#define DD_TP 64 /* positions per tile: four threads each */
#define DD_MAXG 8
#define DD_MAXS 64 /* splits a row at most */

template <int HD, typename E>
__global__ void __launch_bounds__(DD_THREADS)
    attn_dec_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                    const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float scale, int window, int S,
                    float *__restrict__ part, int *__restrict__ cnt, int skip_bm, int prep_kind, void *prep,
                    int pdl_early) {
    constexpr int EP = 16 / (int)sizeof(E); /* elements per 16-byte piece */
    constexpr int NC = HD / EP;             /* pieces per K or V row */
    constexpr int NV = NC / 4;              /* pieces per thread: c = quarter + 4 i */
    constexpr int NOUT = DD_MAXG * HD / DD_THREADS;
    static_assert(NC % 4 == 0 && NOUT >= 1, "head_dim");
    __shared__ __align__(16) float q_s[DD_MAXG][HD];
    __shared__ __align__(16) E v_s[DD_TP][HD];
    __shared__ float p_s[DD_MAXG][DD_TP];
    __shared__ float m_s[DD_MAXG], l_s[DD_MAXG], c_s[DD_MAXG];
    __shared__ float w_s[DD_MAXG][DD_MAXS];
    __shared__ int s_last;

    const int split = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    dec_slice d;
    if (!dec_slice_of(d, seq, pos, T, n_heads, n_kv, DD_MAXG, S, DD_TP, window, skip_bm)) return;
    const int t = d.t, kvh = d.kvh, h0 = d.h0, Gb = d.Gb, Se = d.Se, a = d.a, e = d.e;
    const int32_t *trow = kv.table + (size_t)seq[t] * kv.max_blocks;
    const E *kb = (const E *)kv.k + (size_t)kvh * HD, *vb = (const E *)kv.v + (size_t)kvh * HD;
    const int j = tid >> 2, quarter = tid & 3;
    uint4 kr[NV], vr[NV];
    auto load_tile = [&](int p0) { /* this thread's quarter of position p0 + j's K and V rows */
        if (j < min(DD_TP, e - p0)) {
            const int p = p0 + j;
            const size_t off = ((size_t)trow[p / kv.block_size] * kv.block_size + p % kv.block_size) * kv.kv_dim;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                kr[i] = *(const uint4 *)(kb + off + (quarter + 4 * i) * EP);
                vr[i] = *(const uint4 *)(vb + off + (quarter + 4 * i) * EP);
            }
        }
    };
    /* kv.early: the kernel before (rope_kv) wrote only these rows' positions, from pos[t] - (T - 1) on; a
     * first tile wholly before them was written by kernels that have completed, and is read before the wait
     * (positions, sequences and the block table are uploads). */
    const bool early = kv.early && min(a + DD_TP, e) <= pos[t] - (T - 1);
    if (early) load_tile(a);
    pdl_wait_early(pdl_early);

    for (int x = tid; x < Gb * HD; x += DD_THREADS)
        q_s[x / HD][x % HD] = q[((size_t)t * n_heads + h0 + x / HD) * HD + x % HD] * scale;
    if (tid < DD_MAXG) m_s[tid] = -INFINITY, l_s[tid] = 0.0f;
    float acc[NOUT];
#pragma unroll
    for (int k = 0; k < NOUT; k++) acc[k] = 0.0f;

    for (int p0 = a; p0 < e; p0 += DD_TP) {
        const int n = min(DD_TP, e - p0);
        if (!early || p0 != a) load_tile(p0);
        __syncthreads(); /* q_s, m_s written; the last tile's v_s and p_s read by all */
        if (j < n) {
#pragma unroll
            for (int i = 0; i < NV; i++) *(uint4 *)&v_s[j][(quarter + 4 * i) * EP] = vr[i];
        }
        float sc[DD_MAXG];
#pragma unroll
        for (int g = 0; g < DD_MAXG; g++) sc[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; i++) q_dot16<DD_MAXG, HD, E>(sc, kr[i], q_s, (quarter + 4 * i) * EP, Gb);
#pragma unroll
        for (int g = 0; g < DD_MAXG; g++) {
            if (g < Gb) {
                float s = sc[g];
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                if (quarter == 0 && j < n) p_s[g][j] = s;
            }
        }
        __syncthreads();
        if (w < Gb) warp_tile_softmax(p_s[w], n, &m_s[w], &l_s[w], &c_s[w], lane); /* the tile's update for head w */
        __syncthreads();
#pragma unroll
        for (int k = 0; k < NOUT; k++) { /* output (g, d) = tid + 256 k */
            const int x = tid + DD_THREADS * k, g = x / HD, d = x % HD;
            if (g < Gb) {
                float o = acc[k] * c_s[g];
#pragma unroll 8
                for (int jj = 0; jj < n; jj++) o = fmaf(p_s[g][jj], (float)v_s[jj][d], o);
                acc[k] = o;
            }
        }
    }
    pdl_done(pdl_early);
    const size_t th0 = (size_t)t * n_heads + h0, n_out = (size_t)T * n_heads * HD;
    /* output (g, d) = tid + 256 k: a warp holds 32 consecutive d of one head, one q8 group of the prepared copy */
    if (Se == 1) {
#pragma unroll
        for (int k = 0; k < NOUT; k++) {
            const int x = tid + DD_THREADS * k, g = x / HD, d = x % HD;
            if (g < Gb) {
                const float o = l_s[g] > 0.0f ? acc[k] / l_s[g] : 0.0f;
                out[(th0 + g) * HD + d] = o;
                prep_store(prep_kind, prep, n_out, (th0 + g) * HD + d, o, lane);
            }
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < NOUT; k++) {
        const int x = tid + DD_THREADS * k, g = x / HD, d = x % HD;
        if (g < Gb) {
            float *pp = part + ((th0 + g) * S + split) * (size_t)(HD + 2);
            pp[d] = acc[k];
            if (d == 0) {
                pp[HD] = m_s[g];
                pp[HD + 1] = l_s[g];
            }
        }
    }
    /* the last block of this (row, kv head group) to finish merges the splits */
    __threadfence();
    __syncthreads();
    int *ctr = cnt + (size_t)t * gridDim.y + blockIdx.y; /* one per (row, kv head x group) */
    if (tid == 0) s_last = atomicAdd(ctr, 1) == Se - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (w < Gb) {
        const float *pp = part + (th0 + w) * S * (size_t)(HD + 2);
        float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
        if (lane < Se) m0 = __ldcg(pp + lane * (HD + 2) + HD), l0 = __ldcg(pp + lane * (HD + 2) + HD + 1);
        if (lane + 32 < Se) m1 = __ldcg(pp + (lane + 32) * (HD + 2) + HD), l1 = __ldcg(pp + (lane + 32) * (HD + 2) + HD + 1);
        float M = fmaxf(l0 > 0.0f ? m0 : -INFINITY, l1 > 0.0f ? m1 : -INFINITY);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        const float w0 = l0 > 0.0f ? expf(m0 - M) : 0.0f, w1 = l1 > 0.0f ? expf(m1 - M) : 0.0f;
        float L = l0 * w0 + l1 * w1;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
        w_s[w][lane] = w0;
        w_s[w][lane + 32] = w1;
        if (lane == 0) l_s[w] = L;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < NOUT; k++) {
        const int x = tid + DD_THREADS * k, g = x / HD, d = x % HD;
        if (g < Gb) {
            const float *pp = part + (th0 + g) * S * (size_t)(HD + 2) + d;
            float o = 0.0f;
#pragma unroll 16
            for (int s = 0; s < Se; s++) o = fmaf(__ldcg(pp + s * (HD + 2)), w_s[g][s], o);
            o = l_s[g] > 0.0f ? o / l_s[g] : 0.0f;
            out[(th0 + g) * HD + d] = o;
            prep_store(prep_kind, prep, n_out, (th0 + g) * HD + d, o, lane);
        }
    }
    if (tid == 0) *ctr = 0; /* ready for the next launch */
}

int cu_attention_decode_fits(int head_dim, const cu_kv *kv, int T, int n_heads, int n_kv, int S, int n_cnt) {
    const int ngrp = (n_heads / n_kv + DD_MAXG - 1) / DD_MAXG;
    return (head_dim == 64 || head_dim == 128) && kv->kv_dim % 8 == 0 &&
           ((uintptr_t)kv->k | (uintptr_t)kv->v) % 16 == 0 && S <= DD_MAXS && (long)T * n_kv * ngrp <= n_cnt;
}

void cu_attention_decode(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                         const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int head_dim,
                         float scale, int window, int S, float *part, int *cnt, int skip_bm, int prep_kind,
                         void *prep) {
    auto k = head_dim == 64 ? (kv->f16   ? attn_dec_kernel<64, __half>
                               : kv->fp8 ? attn_dec_kernel<64, __nv_fp8_e4m3>
                                         : attn_dec_kernel<64, float>)
                            : (kv->f16   ? attn_dec_kernel<128, __half>
                               : kv->fp8 ? attn_dec_kernel<128, __nv_fp8_e4m3>
                                         : attn_dec_kernel<128, float>);
    cu_launch_k(L, k, grid, dim3(DD_THREADS), 0, out, q, *kv, seq, pos, T, n_heads, n_kv, scale, window, S, part, cnt,
                skip_bm, prep_kind, prep, L->pdl_early);
}
