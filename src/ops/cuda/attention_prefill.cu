/* attention_prefill.cu - causal attention for tiles of 64 rows of one
 * sequence on the tensor cores (mma.sync m16n8k16, f16 operands, f32
 * accumulators), flash-attention 2 style.
 *
 * A block (4 warps) owns 64 query rows of one head; warp w owns rows
 * 16w..16w+15. Q is scaled by scale*log2(e) and held in registers as A
 * fragments. For each 64-position KV tile: K and V are read from the paged
 * cache into shared memory as f16 (an f32 cache rounded on the way, an f16
 * cache copied as stored, 16 bytes a load, an e4m3 cache widened exactly,
 * 8 bytes a load) ([position][dim], rows padded
 * by 8 halves so fragment loads are free of bank conflicts); S = Q K^T; each
 * score outside [lo(row), pos(row)] is masked; the online softmax rescales the
 * running output; P (the probabilities, in registers, re-packed as A
 * fragments) times V (B fragments via ldmatrix.trans) accumulates it.
 * Tiles are visited heaviest (latest positions) first. This first kernel
 * serves f32 caches (and every cache with HEARTH_ATTN_PREFILL=1, for A/B
 * measurements); f16 and e4m3 caches take the flash kernel
 * (attention_flash.cu), or the GQA kernel below for f16 with
 * HEARTH_ATTN_PREFILL=7. */
#include "ops/cuda/attention.cuh"

#include <limits.h>

/* P = exp2(S - u) for the warp's two row halves (A, B), summed into lA /
 * lB, packed to f16 and multiplied into the output tiles o with V from
 * shared memory (rows of HD + 8 halves). Both prefill kernels share it. */
template <int HD>
__device__ __forceinline__ void pv_accumulate(float (*o)[4], const float (*s)[4], float uA, float uB, float &lA,
                                              float &lB, const __half *Vs, int lane) {
    constexpr int LD = HD + 8, NDT = HD / 8;
    uint32_t pf[4][4];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float p0 = exp2f(s[j][0] - uA), p1 = exp2f(s[j][1] - uA);
        const float p2 = exp2f(s[j][2] - uB), p3 = exp2f(s[j][3] - uB);
        lA += p0 + p1;
        lB += p2 + p3;
        pf[j >> 1][(j & 1) * 2 + 0] = pack_h2(p0, p1);
        pf[j >> 1][(j & 1) * 2 + 1] = pack_h2(p2, p3);
    }
#pragma unroll
    for (int jd = 0; jd < NDT; jd++) {
#pragma unroll
        for (int pr = 0; pr < 2; pr++) {
            uint32_t b[4];
            ldsm_x4_trans(b, &Vs[(32 * pr + lane) * LD + 8 * jd]);
            mma_f16(o[jd], pf[2 * pr], b[0], b[1]);
            mma_f16(o[jd], pf[2 * pr + 1], b[2], b[3]);
        }
    }
}

/* One KV tile of the online softmax for the warp's two row halves: the
 * tile maxima mxA / mxB (this lane's) reduced over the quad, the running
 * maxima mA / mB, sums lA / lB and outputs o rescaled, then P x V added. */
/* The warp's finished rows: sums reduced over the quad, o normalised and
 * stored for output rows rowA / rowB of head h (-1: not a row of this tile). */
template <int HD>
__device__ __forceinline__ void store_rows(float *out, const float (*o)[4], float lA, float lB, int rowA, int rowB,
                                           int n_heads, int h, int cq) {
    constexpr int NDT = HD / 8;
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        lA += __shfl_xor_sync(0xffffffffu, lA, o2);
        lB += __shfl_xor_sync(0xffffffffu, lB, o2);
    }
    const float iA = lA > 0.0f ? 1.0f / lA : 0.0f, iB = lB > 0.0f ? 1.0f / lB : 0.0f;
#pragma unroll
    for (int jd = 0; jd < NDT; jd++) {
        if (rowA >= 0)
            *(float2 *)(out + ((size_t)rowA * n_heads + h) * HD + 8 * jd + cq) = make_float2(o[jd][0] * iA, o[jd][1] * iA);
        if (rowB >= 0)
            *(float2 *)(out + ((size_t)rowB * n_heads + h) * HD + 8 * jd + cq) = make_float2(o[jd][2] * iB, o[jd][3] * iB);
    }
}

template <int HD>
__device__ __forceinline__ void online_update(float (*o)[4], const float (*s)[4], float mxA, float mxB, float &mA,
                                              float &mB, float &lA, float &lB, const __half *Vs, int lane) {
    constexpr int NDT = HD / 8;
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, o2));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, o2));
    }
    const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
    const float uA = mnA == -INFINITY ? 0.0f : mnA, uB = mnB == -INFINITY ? 0.0f : mnB;
    const float cA = exp2f(mA - uA), cB = exp2f(mB - uB);
    mA = mnA;
    mB = mnB;
    lA *= cA;
    lB *= cB;
#pragma unroll
    for (int j = 0; j < NDT; j++) {
        o[j][0] *= cA;
        o[j][1] *= cA;
        o[j][2] *= cB;
        o[j][3] *= cB;
    }
    pv_accumulate<HD>(o, s, uA, uB, lA, lB, Vs, lane);
}

template <int HD, typename E>
__global__ void __launch_bounds__(128)
    attn_prefill_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                        const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float qscale, int window) {
    constexpr int LD = HD + 8;   /* halves per shared row */
    constexpr int NKS = HD / 16; /* k-steps over the head dim */
    constexpr int NDT = HD / 8;  /* output n-tiles over the head dim */
    constexpr int F4 = HD / 4;   /* float4 per row */
    __shared__ __align__(16) __half Ks[64 * LD];
    __shared__ __align__(16) __half Vs[64 * LD];
    __shared__ int rlo[64], rhi[64];
    __shared__ int s_lo, s_hi;
    __shared__ long long offs[64];

    pdl_wait();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int ntiles = (T + 63) / 64;
    const int tile = ntiles - 1 - (int)blockIdx.x;
    const int h = blockIdx.y, kvh = h / (n_heads / n_kv);
    if (!tile_uniform(seq, T, tile, 64)) return;
    const int r0 = tile * 64, nrows = min(64, T - r0);
    const int sq = seq[r0];
    const int32_t *trow = kv.table + (size_t)sq * kv.max_blocks;

    if (tid == 0) {
        s_lo = INT_MAX;
        s_hi = -1;
    }
    __syncthreads();
    if (tid < 64) {
        int hi = -1, lo = 0;
        if (tid < nrows) {
            hi = pos[r0 + tid];
            lo = window > 0 ? max(0, hi - window + 1) : 0;
            atomicMin(&s_lo, lo);
            atomicMax(&s_hi, hi);
        }
        rlo[tid] = lo;
        rhi[tid] = hi;
    }
    /* Q tile, scaled, staged in Ks */
    for (int f = tid; f < 64 * F4; f += 128) {
        int r = f / F4, c = (f % F4) * 4;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < nrows) v = __ldg((const float4 *)(q + ((size_t)(r0 + r) * n_heads + h) * HD + c));
        __half2 *d = (__half2 *)&Ks[r * LD + c];
        d[0] = __floats2half2_rn(v.x * qscale, v.y * qscale);
        d[1] = __floats2half2_rn(v.z * qscale, v.w * qscale);
    }
    __syncthreads();

    const int g = lane >> 2, cq = 2 * (lane & 3);
    const int ra = 16 * w + g, rb = ra + 8;
    uint32_t qf[NKS][4];
#pragma unroll
    for (int kk = 0; kk < NKS; kk++) {
        qf[kk][0] = *(const uint32_t *)&Ks[ra * LD + 16 * kk + cq];
        qf[kk][1] = *(const uint32_t *)&Ks[rb * LD + 16 * kk + cq];
        qf[kk][2] = *(const uint32_t *)&Ks[ra * LD + 16 * kk + 8 + cq];
        qf[kk][3] = *(const uint32_t *)&Ks[rb * LD + 16 * kk + 8 + cq];
    }
    const int loA = rlo[ra], hiA = rhi[ra], loB = rlo[rb], hiB = rhi[rb];
    const int kv_lo = s_lo, kv_hi = s_hi;

    float o[NDT][4];
#pragma unroll
    for (int j = 0; j < NDT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const E *kbase = (const E *)kv.k + (size_t)kvh * HD, *vbase = (const E *)kv.v + (size_t)kvh * HD;

    for (int kb = kv_lo; kb <= kv_hi; kb += 64) {
        __syncthreads(); /* the previous tile (or the Q staging) is consumed */
        if (tid < 64) {
            int p = kb + tid;
            offs[tid] = p <= kv_hi ? ((long long)trow[p / kv.block_size] * kv.block_size + p % kv.block_size) *
                                         kv.kv_dim
                                   : -1;
        }
        __syncthreads();
        if constexpr (sizeof(E) == 1) {
            /* e4m3 cache: 8 codes (8 bytes) of K and of V per load, stored as 8 exact halves */
            constexpr int F8 = HD / 8;
#pragma unroll 4
            for (int f = tid; f < 64 * F8; f += 128) {
                int i = f / F8, c = (f % F8) * 8;
                long long off = offs[i];
                uint2 k8 = make_uint2(0u, 0u), v8 = k8;
                if (off >= 0) {
                    k8 = __ldg((const uint2 *)(kbase + off + c));
                    v8 = __ldg((const uint2 *)(vbase + off + c));
                }
                *(uint4 *)&Ks[i * LD + c] = e4m3x8_to_half8(k8);
                *(uint4 *)&Vs[i * LD + c] = e4m3x8_to_half8(v8);
            }
        } else if constexpr (sizeof(E) == 2) {
            /* f16 cache: 8 halves (16 bytes) of K and of V per load, stored as read */
            constexpr int F8 = HD / 8;
#pragma unroll 4
            for (int f = tid; f < 64 * F8; f += 128) {
                int i = f / F8, c = (f % F8) * 8;
                long long off = offs[i];
                uint4 k8 = make_uint4(0u, 0u, 0u, 0u), v8 = k8;
                if (off >= 0) {
                    k8 = __ldg((const uint4 *)(kbase + off + c));
                    v8 = __ldg((const uint4 *)(vbase + off + c));
                }
                *(uint4 *)&Ks[i * LD + c] = k8;
                *(uint4 *)&Vs[i * LD + c] = v8;
            }
        } else {
            /* every load of the tile is independent: eight float4 of K and V in flight per thread at a time */
#pragma unroll 8
            for (int f = tid; f < 64 * F4; f += 128) {
                int i = f / F4, c = (f % F4) * 4;
                long long off = offs[i];
                float4 k4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v4 = k4;
                if (off >= 0) {
                    /* read-only loads: they may be hoisted above the shared stores */
                    k4 = __ldg((const float4 *)(kbase + off + c));
                    v4 = __ldg((const float4 *)(vbase + off + c));
                }
                __half2 *dk = (__half2 *)&Ks[i * LD + c], *dv = (__half2 *)&Vs[i * LD + c];
                dk[0] = __floats2half2_rn(k4.x, k4.y);
                dk[1] = __floats2half2_rn(k4.z, k4.w);
                dv[0] = __floats2half2_rn(v4.x, v4.y);
                dv[1] = __floats2half2_rn(v4.z, v4.w);
            }
        }
        __syncthreads();

        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < NKS; kk++) {
                uint32_t b0 = *(const uint32_t *)&Ks[(8 * j + g) * LD + 16 * kk + cq];
                uint32_t b1 = *(const uint32_t *)&Ks[(8 * j + g) * LD + 16 * kk + 8 + cq];
                mma_f16(s[j], qf[kk], b0, b1);
            }
        }
        float mxA = -INFINITY, mxB = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int p = kb + 8 * j + cq + e;
                if (p < loA || p > hiA) s[j][e] = -INFINITY;
                if (p < loB || p > hiB) s[j][2 + e] = -INFINITY;
                mxA = fmaxf(mxA, s[j][e]);
                mxB = fmaxf(mxB, s[j][2 + e]);
            }
        }
        online_update<HD>(o, s, mxA, mxB, mA, mB, lA, lB, Vs, lane);
    }
    pdl_launch();
    store_rows<HD>(out, o, lA, lB, ra < nrows ? r0 + ra : -1, rb < nrows ? r0 + rb : -1, n_heads, h, cq);
}

/* ---- the GQA kernel (f16 caches) ------------------------------------------
 * One block per (64-row tile, HP query heads of one kv head): 4*HP warps,
 * warp w owns rows 16(w%4)..+15 of head HP*group + w/4, so every K/V tile
 * read from global/L2 into shared memory serves HP heads. The tiles are
 * copied with 16-byte cp.async into two shared stages: tile i+1 is in
 * flight while tile i is multiplied (one barrier a tile). K fragments come
 * by ldmatrix, V fragments by ldmatrix.trans. A warp skips the tiles that
 * are wholly outside all its rows' [lo, hi] and masks only the tiles that
 * cross one of its rows' bounds. Tiles are dispatched heaviest (latest
 * positions) first across all heads (grid.x = head groups, grid.y = tiles). */

/* Positions kb..kb+63 of K and V into Kd/Vd ([position][HD + 8 halves]);
 * positions past kv_hi are zero-filled. One commit group. The cache block of
 * position p is tbl[p / bs - blk0] where tbl_sm (the block's slice of the
 * table, staged in shared memory), else trow[p / bs]. */
template <int HD, int NT>
__device__ __forceinline__ void gqa_load_tile(__half *Kd, __half *Vd, const __half *kbase, const __half *vbase,
                                              const int32_t *trow, const int32_t *tbl, bool tbl_sm, int blk0, int bs,
                                              int kv_dim, int kb, int kv_hi, int tid) {
    constexpr int LD = HD + 8, F8 = HD / 8, N = 64 * F8;
    static_assert(N % NT == 0, "tile chunks per thread");
#pragma unroll
    for (int it = 0; it < N / NT; it++) {
        const int f = tid + it * NT;
        const int i = f / F8, c = (f % F8) * 8, p = kb + i;
        const bool ok = p <= kv_hi;
        size_t off = 0;
        if (ok) {
            const int blk = tbl_sm ? tbl[p / bs - blk0] : trow[p / bs];
            off = ((size_t)blk * bs + p % bs) * kv_dim + c;
        }
        cp_async16(Kd + i * LD + c, kbase + off, ok);
        cp_async16(Vd + i * LD + c, vbase + off, ok);
    }
    cp_async_commit();
}

template <int HD, int HP>
constexpr int gqa_smem_bytes() {
    return 2 * 2 * 64 * (HD + 8) * (int)sizeof(__half); /* 2 stages x (K, V) */
}

template <int HD, int HP>
__global__ void __launch_bounds__(128 * HP)
    attn_prefill_gqa_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv,
                            const int32_t *__restrict__ seq, const int32_t *__restrict__ pos, int T, int n_heads,
                            int n_kv, float qscale, int window) {
    constexpr int LD = HD + 8;   /* halves per shared row */
    constexpr int NKS = HD / 16; /* k-steps over the head dim */
    constexpr int NDT = HD / 8;  /* output n-tiles over the head dim */
    constexpr int NT = 128 * HP;
    constexpr int TILE = 64 * LD; /* halves of one K or V tile */
    static_assert(NKS % 2 == 0, "K fragments are loaded two k-steps at a time");
    constexpr int TBL = 512; /* table entries staged in shared memory (8k positions at bs 16) */
    extern __shared__ __align__(16) __half gqa_sm[];
    __shared__ int s_lo, s_hi;
    __shared__ int32_t s_tbl[TBL];

    pdl_wait();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int ntiles = (T + 63) / 64;
    const int tile = ntiles - 1 - (int)blockIdx.y;
    const int G = n_heads / n_kv, ngrp = G / HP;
    const int kvh = (int)blockIdx.x / ngrp;
    const int h = kvh * G + ((int)blockIdx.x % ngrp) * HP + (w >> 2);
    if (!tile_uniform(seq, T, tile, 64)) return;
    const int r0 = tile * 64, nrows = min(64, T - r0);
    const int32_t *trow = kv.table + (size_t)seq[r0] * kv.max_blocks;

    int kv_lo, kv_hi;
    tile_kv_range(pos, r0, nrows, window, &s_lo, &s_hi, &kv_lo, &kv_hi);
    const int nkv = (kv_hi - kv_lo) / 64 + 1; /* kv_lo <= kv_hi: every row has lo <= hi */
    /* the table entries of positions kv_lo..kv_hi, so that issuing a tile's
     * copies waits on no global load */
    const int bs = kv.block_size, blk0 = kv_lo / bs, nb = kv_hi / bs - blk0 + 1;
    const bool tbl_sm = nb <= TBL;
    if (tbl_sm)
        for (int i = tid; i < nb; i += NT) s_tbl[i] = trow[blk0 + i];
    __syncthreads();
    const __half *kbase = (const __half *)kv.k + (size_t)kvh * HD, *vbase = (const __half *)kv.v + (size_t)kvh * HD;
    gqa_load_tile<HD, NT>(gqa_sm, gqa_sm + TILE, kbase, vbase, trow, s_tbl, tbl_sm, blk0, bs, kv.kv_dim, kv_lo, kv_hi,
                          tid);

    /* this thread's two rows (A: ra, B: rb) and their bounds (rows past the
     * tile's end: every position masked) */
    const int g = lane >> 2, cq = 2 * (lane & 3);
    const int ra = 16 * (w & 3) + g, rb = ra + 8;
    const mma_row_bounds rw = mma_rows_bounds(pos, r0, nrows, ra, window);

    /* Q, scaled by qscale and rounded to f16, as A fragments */
    uint32_t qf[NKS][4];
    {
        const float *qa = q + ((size_t)(r0 + ra) * n_heads + h) * HD;
        const float *qb = q + ((size_t)(r0 + rb) * n_heads + h) * HD;
#pragma unroll
        for (int kk = 0; kk < NKS; kk++) {
            float2 a0 = make_float2(0.0f, 0.0f), a1 = a0, b0 = a0, b1 = a0;
            if (rw.vA) {
                a0 = __ldg((const float2 *)(qa + 16 * kk + cq));
                a1 = __ldg((const float2 *)(qa + 16 * kk + 8 + cq));
            }
            if (rw.vB) {
                b0 = __ldg((const float2 *)(qb + 16 * kk + cq));
                b1 = __ldg((const float2 *)(qb + 16 * kk + 8 + cq));
            }
            qf[kk][0] = pack_h2(a0.x * qscale, a0.y * qscale);
            qf[kk][1] = pack_h2(b0.x * qscale, b0.y * qscale);
            qf[kk][2] = pack_h2(a1.x * qscale, a1.y * qscale);
            qf[kk][3] = pack_h2(b1.x * qscale, b1.y * qscale);
        }
    }

    float o[NDT][4];
#pragma unroll
    for (int j = 0; j < NDT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;

    for (int it = 0; it < nkv; it++) {
        const int kb = kv_lo + 64 * it;
        cp_async_wait_all(); /* this thread's pieces of tile it have landed */
        __syncthreads();     /* everyone's have; and tile it-1's stage is no longer read */
        if (it + 1 < nkv) {
            __half *d = gqa_sm + ((it + 1) & 1) * 2 * TILE;
            gqa_load_tile<HD, NT>(d, d + TILE, kbase, vbase, trow, s_tbl, tbl_sm, blk0, bs, kv.kv_dim, kb + 64, kv_hi,
                                  tid);
        }
        if (kb > rw.hi_max || kb + 63 < rw.lo_min) continue; /* no row of this warp sees the tile */
        const __half *Ks = gqa_sm + (it & 1) * 2 * TILE, *Vs = Ks + TILE;

        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int k2 = 0; k2 < NKS / 2; k2++) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t b[4];
                ldsm_x4(b, &Ks[(8 * j + (lane & 7)) * LD + 32 * k2 + 8 * (lane >> 3)]);
                mma_f16(s[j], qf[2 * k2], b[0], b[1]);
                mma_f16(s[j], qf[2 * k2 + 1], b[2], b[3]);
            }
        }
        if (kb < rw.lo_max || kb + 63 > rw.hi_min) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int p = kb + 8 * j + cq + e;
                    if (p < rw.loA || p > rw.hiA) s[j][e] = -INFINITY;
                    if (p < rw.loB || p > rw.hiB) s[j][2 + e] = -INFINITY;
                }
            }
        }
        float mxA = -INFINITY, mxB = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            mxA = fmaxf(mxA, fmaxf(s[j][0], s[j][1]));
            mxB = fmaxf(mxB, fmaxf(s[j][2], s[j][3]));
        }
        online_update<HD>(o, s, mxA, mxB, mA, mB, lA, lB, Vs, lane);
    }
    pdl_launch();
    store_rows<HD>(out, o, lA, lB, rw.vA ? r0 + ra : -1, rw.vB ? r0 + rb : -1, n_heads, h, cq);
}

/* 2 heads a block: 8 warps, 255 registers a thread at hd 128 (ptxas), so one
 * block (8 warps) per SM, K/V tiles shared by the 2 heads */
#define GQA_HP_DEFAULT 2

template <int HD, int HP>
static void launch_gqa(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                       const int32_t *pos, int n_heads, int n_kv, float qscale, int window) {
    constexpr int smem = gqa_smem_bytes<HD, HP>();
    static unsigned long long done; /* devices set up */
    cu_smem_setup(L, attn_prefill_gqa_kernel<HD, HP>, smem, false, &done);
    dim3 grid(n_kv * (n_heads / n_kv / HP), (T + 63) / 64);
    cu_launch_k(L, attn_prefill_gqa_kernel<HD, HP>, grid, dim3(128 * HP), smem, out, q, *kv, seq, pos, T, n_heads,
                n_kv, qscale, window);
}

template <int HD>
static void launch_gqa_hp(const cu_launch *L, int hp, float *out, const float *q, int T, const cu_kv *kv,
                          const int32_t *seq, const int32_t *pos, int n_heads, int n_kv, float qscale, int window) {
    if (hp == 2)
        launch_gqa<HD, 2>(L, out, q, T, kv, seq, pos, n_heads, n_kv, qscale, window);
    else
        launch_gqa<HD, 1>(L, out, q, T, kv, seq, pos, n_heads, n_kv, qscale, window);
}

/* The first kernel for this cache's element type. */
template <int HD> static auto v4_kernel(const cu_kv *kv) {
    return kv->f16 ? attn_prefill_kernel<HD, __half>
                   : kv->fp8 ? attn_prefill_kernel<HD, __nv_fp8_e4m3> : attn_prefill_kernel<HD, float>;
}

int cu_attention_prefill(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                         const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                         int prep_kind, void *prep, float *part, size_t part_floats) {
    const float qscale = scale * 1.4426950408889634f; /* log2(e): the softmax runs in exp2 */
    /* benchmarks: HEARTH_ATTN_PREFILL=1 selects the first kernel (below) for
     * every cache, =7 the GQA kernel (below) for f16 caches, anything else
     * the flash kernel (attention_flash.cu) for f16 and e4m3 caches;
     * HEARTH_ATTN_PREFILL_HP=1|2 the query heads a block of the GQA kernel
     * computes (read once; 4 would spill: 255 registers a thread at hd 128
     * already) */
    static int old_kernel = -1, want_hp = 0, gqa_kernel = 0;
    if (old_kernel < 0) {
        const char *s = getenv("HEARTH_ATTN_PREFILL");
        const char *p = getenv("HEARTH_ATTN_PREFILL_HP");
        want_hp = p ? atoi(p) : 0;
        old_kernel = s && atoi(s) == 1;
        gqa_kernel = s && atoi(s) == 7;
    }
    if (!old_kernel && !gqa_kernel && cu_attention_flash_wg_fits(L, kv, head_dim, n_heads, n_kv_heads, window)) {
        int prepped = 0;
        if (cu_attention_flash_wg(L, out, q, T, kv, seq, pos, n_heads, n_kv_heads, head_dim, qscale, window, prep_kind,
                                  prep, part, part_floats, &prepped))
            return prepped;
    }
    if (!old_kernel && !gqa_kernel && cu_attention_flash_fits(kv, head_dim))
        return cu_attention_flash(L, out, q, T, kv, seq, pos, n_heads, n_kv_heads, head_dim, qscale, window,
                                  prep_kind, prep);
    if (kv->f16 && !old_kernel && (head_dim == 128 || head_dim == 64)) {
        const int G = n_heads / n_kv_heads;
        int hp = want_hp == 1 || want_hp == 2 ? want_hp : GQA_HP_DEFAULT;
        /* a short chunk (few tiles) keeps a block per head: with fewer blocks
         * than SMs, each block's serial walk over the context is the time */
        if (!want_hp && (long)((T + 63) / 64) * n_heads / hp < L->n_sm) hp = 1;
        while (hp > 1 && G % hp != 0) hp /= 2;
        if (head_dim == 128)
            launch_gqa_hp<128>(L, hp, out, q, T, kv, seq, pos, n_heads, n_kv_heads, qscale, window);
        else
            launch_gqa_hp<64>(L, hp, out, q, T, kv, seq, pos, n_heads, n_kv_heads, qscale, window);
        return 0;
    }
    auto k = head_dim == 128 ? v4_kernel<128>(kv) : v4_kernel<64>(kv);
    cu_launch_k(L, k, dim3((T + 63) / 64, n_heads), dim3(128), 0, out, q, *kv, seq, pos, T, n_heads, n_kv_heads,
                qscale, window);
    return 0;
}
