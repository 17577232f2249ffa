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
 * Splits end in the same kernel. With clusters (CL > 1, the default on
 * sm_90), the CL splits of a (row, kv head group) are one thread-block
 * cluster: each block leaves its partial in its shared memory, and after a
 * cluster barrier every block merges a slice of the outputs, reading the
 * others' partials through distributed shared memory; no global round trip.
 * Without (CL = 0), each block writes its partial (the layout of
 * attention.cu's partials) and the last block of a (row, kv head) to finish
 * (a counter, reset by that block) merges them: about six memory latencies
 * from start to output. A block with several tiles loads the next one while
 * it finishes the current one.
 *
 * The math is attention.cu's: f32 scores from the cache as stored (f16 and
 * e4m3 widened exactly), expf, f32 accumulation; only the order of the sums
 * differs. */
#include "ops/cuda/attention.cuh"

#include <cooperative_groups.h>

#define DD_THREADS 256
#define DD_TP 64 /* positions per tile: four threads each */
#define DD_MAXG 8
#define DD_MAXS 64 /* splits a row at most */

/* HEARTH_ATTN_STAMPS (a measurement build only, `make bench-stamps`):
 * thread 0 of the first split of (kv head 0, row 0), and of its last split
 * with positions, records %globaltimer at the kernel's steps for the last
 * 64 launches; cu_attn_stamps_print sums them up (bench_model prints them). */
#ifdef HEARTH_ATTN_STAMPS
#define ST_N 10
__device__ unsigned long long g_dec_st[2][64][ST_N];
__device__ unsigned g_dec_calls[2];
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define ST_INIT                                                                                              \
    const unsigned long long st_t0 = gtime();                                                                \
    int st_b = -1;                                                                                           \
    unsigned st_slot = 0;
/* after the slice is known: the first split and the last one with positions */
#define ST_PICK(Se)                                                                                          \
    do {                                                                                                     \
        if (threadIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)                                          \
            st_b = blockIdx.x == 0 ? 0 : (int)blockIdx.x == (Se) - 1 ? 1 : -1;                               \
        if (st_b >= 0) {                                                                                     \
            st_slot = atomicAdd(&g_dec_calls[st_b], 1u) % 64;                                                \
            g_dec_st[st_b][st_slot][0] = st_t0;                                                              \
        }                                                                                                    \
    } while (0)
#define ST(i)                                                                                                \
    do {                                                                                                     \
        if (st_b >= 0) g_dec_st[st_b][st_slot][i] = gtime();                                                 \
    } while (0)
#else
#define ST_INIT                                                                                              \
    const int st_b = -1;                                                                                     \
    const unsigned st_slot = 0;
#define ST_PICK(Se) ((void)0)
#define ST(i) ((void)0)
#endif

/* The q8_K copy (XPREP_Q8K) of n outputs staged at ys (n a multiple of
 * 256: whole heads of a group whose size times HD is), from element e0 of
 * the prepared copy: warp w makes 256-blocks w, w + 8, ... as
 * to_q8k_kernel does. */
__device__ __forceinline__ void q8k_staged(const float *ys, int n, size_t e0, size_t n_out, void *prep) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int b = w; b < n / 256; b += DD_THREADS / 32)
        warp_q8_block_at(XPREP_Q8K, ys + 256 * b, lane, (int8_t *)prep + e0 + 256 * (size_t)b,
                         (float4 *)((int8_t *)prep + n_out) + (e0 + 256 * (size_t)b) / 32);
}

/* The splits of a cluster (its CL blocks, ranks = splits) merged: each
 * block's partial (o_s: unnormalised output, m_s / l_s: its softmax max and
 * sum) stays in its shared memory; after the barrier, a warp per head
 * weighs the splits (the counter path's arithmetic, in split order) and
 * each block writes a slice of the outputs, whole q8 groups (32 outputs) a
 * warp. The second barrier keeps every block's shared memory alive until the
 * others have read it. */
template <int HD, int CL>
__device__ __forceinline__ void cluster_merge(float *__restrict__ out, const float *acc, float (*o_s)[HD],
                                              float *m_s, float *l_s, float (*w_s)[DD_MAXS], float *c_s, int Gb,
                                              int Se, size_t th0, size_t n_out, int prep_kind, void *prep,
                                              float *ys, int st_b, unsigned st_slot) {
    namespace cg = cooperative_groups;
    constexpr int NOUT = DD_MAXG * HD / DD_THREADS;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    cg::cluster_group cl = cg::this_cluster();
#pragma unroll
    for (int k = 0; k < NOUT; k++) {
        const int x = tid + DD_THREADS * k;
        if (x / HD < Gb) o_s[x / HD][x % HD] = acc[k];
    }
    cl.sync();
    ST(7);
    if (w < Gb) {
        float m = -INFINITY, l = 0.0f;
        if (lane < Se) {
            m = *cl.map_shared_rank(&m_s[w], lane);
            l = *cl.map_shared_rank(&l_s[w], lane);
        }
        float M = l > 0.0f ? m : -INFINITY;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        const float wt = l > 0.0f ? expf(m - M) : 0.0f;
        float L = l * wt;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
        w_s[w][lane] = wt;
        if (lane == 0) c_s[w] = L;
    }
    __syncthreads();
    /* q8_K: shares of whole 256-blocks (the first blocks of the cluster merge them all) */
    const int q8k = prep_kind == XPREP_Q8K, align = q8k ? 256 : 32;
    const int share = ((Gb * HD + CL - 1) / CL + align - 1) & ~(align - 1), r = (int)cl.block_rank();
    for (int i = tid; i < share; i += DD_THREADS) {
        const int x = r * share + i, g = x / HD, d = x % HD;
        if (g >= Gb) break; /* whole warps: share and Gb * HD are multiples of 32 */
        float ov[CL]; /* every split's value in flight at once, then summed in split order */
#pragma unroll
        for (int s = 0; s < CL; s++) ov[s] = s < Se ? *cl.map_shared_rank(&o_s[g][d], s) : 0.0f;
        float o = 0.0f;
#pragma unroll
        for (int s = 0; s < CL; s++)
            if (s < Se) o = fmaf(ov[s], w_s[g][s], o);
        o = c_s[g] > 0.0f ? o / c_s[g] : 0.0f;
        out[(th0 + g) * HD + d] = o;
        if (q8k) ys[i] = o;
        else prep_store(prep_kind, prep, n_out, (th0 + g) * HD + d, o, lane);
    }
    if (q8k) {
        __syncthreads();
        const int n = min(share, Gb * HD - r * share);
        if (n > 0) q8k_staged(ys, n, th0 * HD + (size_t)r * share, n_out, prep);
    }
    ST(8);
    cl.sync();
    ST(9);
}

/* The splits merged through global memory: each block writes its partial
 * (attention.cu's layout: HD values, then m and l) and counts itself on the
 * (row, kv head group)'s counter; the last one reads every partial and
 * writes the output, then resets the counter for the next launch. */
template <int HD>
__device__ __forceinline__ void counter_merge(float *__restrict__ out, const float *acc, float *__restrict__ part,
                                              int *__restrict__ cnt, float *m_s, float *l_s,
                                              float (*w_s)[DD_MAXS], int *s_last, int t, int split, int Gb, int Se,
                                              int S, size_t th0, size_t n_out, int prep_kind, void *prep, float *ys) {
    constexpr int NOUT = DD_MAXG * HD / DD_THREADS;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
#pragma unroll
    for (int k = 0; k < NOUT; k++) {
        const int x = tid + DD_THREADS * k, g = x / HD, d = x % HD;
        if (g < Gb) part_store(part, th0 + g, S, split, HD, d, acc[k], m_s[g], l_s[g]);
    }
    /* the last block of this (row, kv head group) to finish merges the splits */
    __threadfence();
    __syncthreads();
    int *ctr = cnt + (size_t)t * gridDim.y + blockIdx.y; /* one per (row, kv head x group) */
    if (tid == 0) *s_last = atomicAdd(ctr, 1) == Se - 1;
    __syncthreads();
    if (!*s_last) return;
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
            if (prep_kind == XPREP_Q8K) ys[x] = o;
            else prep_store(prep_kind, prep, n_out, (th0 + g) * HD + d, o, lane);
        }
    }
    if (tid == 0) *ctr = 0; /* ready for the next launch */
    if (prep_kind == XPREP_Q8K) {
        __syncthreads();
        q8k_staged(ys, Gb * HD, th0 * HD, n_out, prep);
    }
}

template <int HD, typename E, int CL>
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
    __shared__ __align__(16) float p_s[DD_MAXG][DD_TP];
    __shared__ float m_s[DD_MAXG], l_s[DD_MAXG], c_s[DD_MAXG];
    __shared__ float w_s[DD_MAXG][DD_MAXS];
    __shared__ __align__(16) float o_s[CL ? DD_MAXG : 1][HD]; /* CL: this block's partial */
    __shared__ int s_last;

    const int split = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    ST_INIT
    dec_slice d = {};
    if (!dec_slice_of(d, seq, pos, T, n_heads, n_kv, DD_MAXG, S, DD_TP, window, skip_bm)) {
        /* CL: a split past Se still takes part in the cluster's barriers (skip_bm is 0 there: T <= 8) */
        if (!CL || split < d.Se) return;
        d.a = d.e = 0;
    }
    ST_PICK(d.Se);
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
    ST(1);

    for (int x = tid; x < Gb * HD; x += DD_THREADS)
        q_s[x / HD][x % HD] = q[((size_t)t * n_heads + h0 + x / HD) * HD + x % HD] * scale;
    if (tid < DD_MAXG) m_s[tid] = -INFINITY, l_s[tid] = 0.0f;
    float acc[NOUT];
#pragma unroll
    for (int k = 0; k < NOUT; k++) acc[k] = 0.0f;

    ST(2);
    if (!early) load_tile(a);
    for (int p0 = a; p0 < e; p0 += DD_TP) {
        const int n = min(DD_TP, e - p0);
        __syncthreads(); /* q_s, m_s written; the last tile's v_s and p_s read by all */
        if (j < n) {
#pragma unroll
            for (int i = 0; i < NV; i++) *(uint4 *)&v_s[j][(quarter + 4 * i) * EP] = vr[i];
        }
        if (p0 == a) ST(3);
        float sc[DD_MAXG];
#pragma unroll
        for (int g = 0; g < DD_MAXG; g++) sc[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; i++) q_dot16<DD_MAXG, HD, E>(sc, kr[i], q_s, (quarter + 4 * i) * EP, Gb);
        if (p0 + DD_TP < e) load_tile(p0 + DD_TP); /* kr, vr are free: the next tile in flight */
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
        if (p0 == a) ST(4);
        if (w < Gb) warp_tile_softmax(p_s[w], n, &m_s[w], &l_s[w], &c_s[w], lane); /* the tile's update for head w */
        __syncthreads();
        if (p0 == a) ST(5);
        /* P x V: output (g, d) = tid + 256 k, so every output of a thread has d = tid % HD and one V read
         * serves them all; p four positions a load. Each output's sum in position order, as one at a time. */
        {
            constexpr int GS = DD_THREADS / HD; /* g's step from one k to the next */
            const int d = tid % HD, g0 = tid / HD;
            float o[NOUT];
#pragma unroll
            for (int k = 0; k < NOUT; k++) o[k] = g0 + GS * k < Gb ? acc[k] * c_s[g0 + GS * k] : 0.0f;
            int jj = 0;
            for (; jj + 4 <= n; jj += 4) {
                const float v0 = (float)v_s[jj][d], v1 = (float)v_s[jj + 1][d], v2 = (float)v_s[jj + 2][d],
                            v3 = (float)v_s[jj + 3][d];
#pragma unroll
                for (int k = 0; k < NOUT; k++) {
                    if (g0 + GS * k < Gb) {
                        const float4 pk = *(const float4 *)&p_s[g0 + GS * k][jj];
                        o[k] = fmaf(pk.w, v3, fmaf(pk.z, v2, fmaf(pk.y, v1, fmaf(pk.x, v0, o[k]))));
                    }
                }
            }
            for (; jj < n; jj++) {
                const float v = (float)v_s[jj][d];
#pragma unroll
                for (int k = 0; k < NOUT; k++)
                    if (g0 + GS * k < Gb) o[k] = fmaf(p_s[g0 + GS * k][jj], v, o[k]);
            }
#pragma unroll
            for (int k = 0; k < NOUT; k++)
                if (g0 + GS * k < Gb) acc[k] = o[k];
        }
    }
    pdl_done(pdl_early);
    ST(6);
    const size_t th0 = (size_t)t * n_heads + h0, n_out = (size_t)T * n_heads * HD;
    /* output (g, d) = tid + 256 k: a warp holds 32 consecutive d of one head, one q8 group of the prepared copy */
    if (Se == 1) {
        if (split > 0) return; /* CL: an empty split */
#pragma unroll
        for (int k = 0; k < NOUT; k++) {
            const int x = tid + DD_THREADS * k, g = x / HD, d = x % HD;
            if (g < Gb) {
                const float o = l_s[g] > 0.0f ? acc[k] / l_s[g] : 0.0f;
                out[(th0 + g) * HD + d] = o;
                if (prep_kind == XPREP_Q8K) q_s[g][d] = o; /* q_s is free: its last reads were before the tile's barriers */
                else prep_store(prep_kind, prep, n_out, (th0 + g) * HD + d, o, lane);
            }
        }
        if (prep_kind == XPREP_Q8K) {
            __syncthreads();
            q8k_staged(&q_s[0][0], Gb * HD, th0 * HD, n_out, prep);
        }
        return;
    }
    if constexpr (CL > 1)
        cluster_merge<HD, CL>(out, acc, o_s, m_s, l_s, w_s, c_s, Gb, Se, th0, n_out, prep_kind, prep, &q_s[0][0],
                              st_b, st_slot);
    else
        counter_merge<HD>(out, acc, part, cnt, m_s, l_s, w_s, &s_last, t, split, Gb, Se, S, th0, n_out, prep_kind,
                          prep, &q_s[0][0]);
}

int cu_attention_decode_fits(int head_dim, const cu_kv *kv, int T, int n_heads, int n_kv, int S, int n_cnt) {
    const int ngrp = (n_heads / n_kv + DD_MAXG - 1) / DD_MAXG;
    return (head_dim == 64 || head_dim == 128) && kv->kv_dim % 8 == 0 &&
           ((uintptr_t)kv->k | (uintptr_t)kv->v) % 16 == 0 && S <= DD_MAXS && (long)T * n_kv * ngrp <= n_cnt;
}

/* Whether clusters of CS blocks launch on this device (sm_90; 16 is
 * non-portable and asked for). */
template <int HD, typename E, int CS> static bool cluster_fits() {
    int dev = 0, major = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major < 9)
        return false;
    if (CS > 8 && cudaFuncSetAttribute(attn_dec_kernel<HD, E, CS>, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                       1) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CS, 1, 1);
    cfg.blockDim = dim3(DD_THREADS);
    cudaLaunchAttribute a;
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim = {(unsigned)CS, 1, 1};
    cfg.attrs = &a;
    cfg.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&n, attn_dec_kernel<HD, E, CS>, &cfg) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return n > 0;
}

/* cs: the caller's cluster size (cu_attention_cluster), or 0; 16 becomes 8
 * where 16 does not launch (two tiles a split then), 0 where 8 does not. */
template <int HD, typename E>
static void launch_dec(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                       const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, float scale, int window,
                       int S, int cs, float *part, int *cnt, int skip_bm, int prep_kind, void *prep) {
    static int fit8 = -1, fit16 = -1; /* of this instantiation, on the first device that asks */
    if (cs && fit8 < 0) {
        fit8 = cluster_fits<HD, E, 8>();
        fit16 = fit8 && cluster_fits<HD, E, 16>();
    }
    if (skip_bm || !fit8) cs = 0;
    if (cs == 16 && !fit16) cs = 8;
    if (cs) {
        auto k = cs == 16  ? attn_dec_kernel<HD, E, 16>
                 : cs == 8 ? attn_dec_kernel<HD, E, 8>
                 : cs == 4 ? attn_dec_kernel<HD, E, 4>
                           : attn_dec_kernel<HD, E, 2>;
        grid.x = cs;
        cu_launch_cluster_k(L, k, grid, dim3(DD_THREADS), 0, cs, out, q, *kv, seq, pos, T, n_heads, n_kv, scale,
                            window, cs, part, cnt, skip_bm, prep_kind, prep, L->pdl_early);
    } else {
        cu_launch_k(L, attn_dec_kernel<HD, E, 0>, grid, dim3(DD_THREADS), 0, out, q, *kv, seq, pos, T, n_heads, n_kv,
                    scale, window, S, part, cnt, skip_bm, prep_kind, prep, L->pdl_early);
    }
}

int cu_attention_decode(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                        const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int head_dim,
                        float scale, int window, int S, int cluster, float *part, int *cnt, int skip_bm,
                        int prep_kind, void *prep) {
    /* q8_K needs every block's group of heads to be whole 256-blocks */
    const int G = n_heads / n_kv;
    if (prep_kind == XPREP_Q8K && (G > DD_MAXG || G * head_dim % 256)) prep_kind = XPREP_NONE;
    auto k = head_dim == 64 ? (kv->f16   ? launch_dec<64, __half>
                               : kv->fp8 ? launch_dec<64, __nv_fp8_e4m3>
                                         : launch_dec<64, float>)
                            : (kv->f16   ? launch_dec<128, __half>
                               : kv->fp8 ? launch_dec<128, __nv_fp8_e4m3>
                                         : launch_dec<128, float>);
    k(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, scale, window, S, cluster, part, cnt, skip_bm, prep_kind,
      prep);
    return prep_kind;
}

#ifdef HEARTH_ATTN_STAMPS
#include <stdio.h>
/* The mean time from the kernel's entry to each step, over the recorded launches, for the first and the
 * last split (us). */
extern "C" void cu_attn_stamps_print(void) {
    static unsigned long long h[2][64][ST_N];
    unsigned calls[2];
    cudaMemcpyFromSymbol(h, g_dec_st, sizeof h);
    cudaMemcpyFromSymbol(calls, g_dec_calls, sizeof calls);
    static const char *names[ST_N] = {"entry",   "wait",     "q",          "tile 0 in", "tile 0 scores",
                                      "softmax", "loop end", "merge sync", "merged",    "exit"};
    for (int b = 0; b < 2; b++) {
        int n = calls[b] < 64 ? (int)calls[b] : 64;
        printf("attn stamps, %s split, %d launches:", b ? "last busy" : "first", n);
        for (int i = 1; i < ST_N; i++) {
            double sum = 0;
            for (int k = 0; k < n; k++) sum += (double)(h[b][k][i] - h[b][k][0]);
            printf("  %s %.2f", names[i], n ? sum / n / 1e3 : 0.0);
        }
        printf("\n");
    }
}
#endif
