/* attention_rows_tc.cu - flash-decoding for batches of decode rows on
 * tensor cores (f16 and e4m3 caches, head_dim 64 or 128).
 *
 * The blocks are attention_rows.cu's: one per (split, kv head x query-head
 * group, row), positions [a, e) of the row (dec_slice_of), the same partial
 * layout, so attention.cu's combine kernel merges the splits. Inside, the
 * flash-attention 2 loop of attention_flash.cu with the roles of the mma's
 * operands chosen for a group of at most 8 query heads: the mma's 16 rows
 * are 16 positions (S) or 16 head dimensions (O) and its 8 columns the
 * group's heads, so that no row of the tensor cores' work is padding (v39;
 * the heads as the rows, 8 of 16 never used, took twice the mma and 156
 * registers: e4m3 at 64 rows x 2000 positions 2.4 -> 2.77 TB/s).
 *
 *   K/V: tiles of 64 positions by 16-byte cp.async into stages (f16: two,
 *        [position][HD + 8 halves], the pad making ldmatrix conflict-free;
 *        e4m3: three, raw [position][HD + 16] bytes): tiles i+1 (and i+2)
 *        are in flight while tile i is multiplied, and the block-table
 *        entries of the next tile to copy are loaded when the copies before
 *        it are issued, so no copy waits on its table lookup. An e4m3 tile
 *        is half an f16 tile's bytes, so e4m3 takes the third stage to keep
 *        as many bytes in flight (s12-run4); positions past e are
 *        zero-filled and masked.
 *   Warp w takes positions 16w..16w+15 of each tile:
 *   S^T = K Q^T: A = 16 positions x 16 dims of K, B = Q^T (Qs by
 *        ldmatrix). e4m3 K is read as stored: the head dimension is summed
 *        in a permuted order (Q staged the same way, tc_stage_q), so that a
 *        32-bit word of a K row is a lane's two A registers of a k-step,
 *        each widened by one cvt.rn.f16x2.e4m3x2 (the word's upper half
 *        read in place: e4m3x4_to_half2x2).
 *   softmax per column (head) over the 16 positions (exp2; Q is pre-scaled
 *        by scale * log2 e): lane (g, c) = (lane / 4, lane % 4) holds heads
 *        2c, 2c + 1 of positions g and g + 8; the max over g by three
 *        shuffles; each lane keeps a partial sum, added over g at the end.
 *   P^T, rounded to f16: the two 8 x 8 halves of the lane's P transposed by
 *        movmatrix are P V's B operand, B[k = position][n = head].
 *   O^T += V^T P^T: A = 16 dims x 16 positions of V. f16: ldmatrix.trans.
 *        e4m3: built in registers from the raw tile (no f16 tile, no
 *        widening pass): a lane reads HD / 8 bytes of each of its four
 *        positions' rows, pairs two positions' bytes of one dimension with
 *        __byte_perm and widens each pair with one cvt; its m-tiles then
 *        hold the head dimension interleaved (tct_pv), mapped back when the
 *        warps' states are merged.
 *   The four warps' (m, l, O) are merged through shared memory at the end.
 *
 * Numerics: the prefill kernels' f16 contract (q rounded to f16 after
 * scaling, K/V as stored, P rounded to f16 for P V while the sums add f32
 * values, f32 accumulation and output); the partial's max is written in
 * natural-log units, as the f32 kernels write it. */
#include "ops/cuda/attention.cuh"

#include <stdlib.h>

namespace {

constexpr int TC_BN = 64;  /* positions per tile */
constexpr int TC_NT = 128; /* 4 warps, 16 positions each */
constexpr int TC_MAXG = 8; /* query heads per block: rows 0..7 of the mma tile */

template <int HD, bool FP8, int NST = 2> struct tc_cfg {
    static constexpr int LD = HD + 8;       /* halves per f16 shared row */
    static constexpr int TILE = TC_BN * LD; /* halves of one f16 K or V tile */
    static constexpr int RLD = HD + 16;     /* bytes per raw e4m3 shared row (the pad: see tct_pv) */
    static constexpr int RAW = TC_BN * RLD; /* bytes of one raw e4m3 K or V tile */
    static constexpr int SB = FP8 ? 2 * RAW : 2 * TILE * 2; /* bytes of one stage (K and V) */
    static constexpr int STAGES = NST * SB; /* NST stages of (K, V) tiles, NST - 1 of them in flight */
    /* Q, 16 f16 rows: after the stages (f16), or in the last stage (e4m3: Q is read into registers before
     * the loop's first barrier, after which the last stage is first written) */
    static constexpr int QOFF = FP8 ? (NST - 1) * SB : STAGES;
    static constexpr int SMEM = FP8 ? STAGES : STAGES + 16 * LD * 2;
    static_assert(16 * LD * 2 <= SB, "Q fits in a stage");
    static_assert(4 * TC_MAXG * (HD + 2) * 4 <= STAGES, "the warps' merge fits in the stages");
};

/* The 16-byte chunks of a tile's K (and V) rows that thread tid copies:
 * chunk tid % CPR of rows tid / CPR + RSTEP it, it < NIT. */
template <int HD, bool FP8> struct tc_copy {
    static constexpr int ES = FP8 ? 1 : 2;   /* bytes an element */
    static constexpr int CPR = HD * ES / 16; /* 16-byte chunks a row */
    static constexpr int RSTEP = TC_NT / CPR, NIT = TC_BN * CPR / TC_NT;
    static_assert((TC_BN * CPR) % TC_NT == 0 && TC_NT % CPR == 0, "tile chunks per thread");
};

/* The block-table entries of this thread's rows of the tile at kb (rows at
 * or past e clamped to e - 1's, as tc_load_tile clamps them). */
template <int HD, bool FP8>
__device__ __forceinline__ void tc_tile_blocks(int32_t *blk, const int32_t *trow, int bs_shift, int kb, int e,
                                               int tid) {
    using P = tc_copy<HD, FP8>;
#pragma unroll
    for (int it = 0; it < P::NIT; it++)
        blk[it] = __ldg(trow + (min(kb + tid / P::CPR + it * P::RSTEP, e - 1) >> bs_shift));
}

/* Positions kb..kb+63 of K and V into stage st (f16 tiles, or raw e4m3
 * bytes), from the blocks tc_tile_blocks looked up; positions at or past e
 * zero-filled, their address clamped to e - 1's. One commit group. */
template <int HD, bool FP8>
__device__ __forceinline__ void tc_load_tile(uint8_t *st, const uint8_t *kbase, const uint8_t *vbase,
                                             const int32_t *blk, int bs_shift, int kv_dim, int kb, int e, int tid) {
    using C = tc_cfg<HD, FP8>;
    using P = tc_copy<HD, FP8>;
    constexpr int ROWB = FP8 ? C::RLD : C::LD * 2; /* bytes between shared rows */
    constexpr int TB = FP8 ? C::RAW : C::TILE * 2; /* bytes of one tile */
    const int cb = (tid % P::CPR) * 16, bmask = (1 << bs_shift) - 1;
#pragma unroll
    for (int it = 0; it < P::NIT; it++) {
        const int i = tid / P::CPR + it * P::RSTEP, p = kb + i;
        const bool ok = p < e;
        const int pc = ok ? p : e - 1;
        const size_t off = (((size_t)blk[it] << bs_shift) | (size_t)(pc & bmask)) * (size_t)kv_dim * P::ES + cb;
        cp_async16(st + i * ROWB + cb, kbase + off, ok);
        cp_async16(st + TB + i * ROWB + cb, vbase + off, ok);
    }
    cp_async_commit();
}

/* The four warps' states of the group's Gb heads (mw [4][8] and lw [4][8]:
 * max in log2 units and sum; ow [4][8][HD]: unnormalised O), in shared
 * memory, merged into the output rows (one split) or the split's partial. */
template <int HD>
__device__ __forceinline__ void tc_merge_out(float *out, float *part, const float *mw, const float *lw,
                                             const float *ow, const dec_slice &d, int n_heads, int S, int split,
                                             int tid) {
    for (int x = tid; x < d.Gb * HD; x += TC_NT) {
        const int gg = x / HD, dd = x % HD;
        float M = -INFINITY;
#pragma unroll
        for (int ww = 0; ww < 4; ww++) M = fmaxf(M, mw[ww * TC_MAXG + gg]);
        float Lsum = 0.0f, O = 0.0f;
#pragma unroll
        for (int ww = 0; ww < 4; ww++) {
            const float m = mw[ww * TC_MAXG + gg];
            if (m != -INFINITY) {
                const float c = f_ex2(m - M);
                Lsum = fmaf(lw[ww * TC_MAXG + gg], c, Lsum);
                O = fmaf(ow[(size_t)(ww * TC_MAXG + gg) * HD + dd], c, O);
            }
        }
        const size_t th = (size_t)d.t * n_heads + d.h0 + gg;
        if (d.Se == 1) {
            out[th * HD + dd] = Lsum > 0.0f ? O / Lsum : 0.0f;
        } else {
            part_store(part, th, S, split, HD, dd, O, M * 0.69314718055994531f /* log2 units -> natural */, Lsum);
        }
    }
}

/* Q of the group's heads as rows 0..Gb-1 of Qs (8 rows, LD halves apart),
 * scaled and rounded to f16; rows Gb..7 zero. e4m3: in the permuted order
 * of S's k-steps: dims 4i..4i+3 (quad member qc = 4i / (HD / 4), k-step
 * kk = i % (HD / 16)) are logical columns 16kk + 2qc + {0, 1} and
 * 16kk + 2qc + 8 + {0, 1}. */
template <int HD, bool FP8>
__device__ __forceinline__ void tc_stage_q(__half *Qs, const float *q, const dec_slice &d, int n_heads, float qscale,
                                           int tid) {
    constexpr int LD = HD + 8;
    for (int f = tid; f < TC_MAXG * (HD / 4); f += TC_NT) {
        const int r = f / (HD / 4), c = (f % (HD / 4)) * 4;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < d.Gb) v = __ldg((const float4 *)(q + ((size_t)d.t * n_heads + d.h0 + r) * HD + c));
        const uint32_t lo = pack_h2(v.x * qscale, v.y * qscale), hi = pack_h2(v.z * qscale, v.w * qscale);
        if constexpr (FP8) {
            const int qc = c / (HD / 4), kk = (c % (HD / 4)) / 4;
            *(uint32_t *)&Qs[r * LD + 16 * kk + 2 * qc] = lo;
            *(uint32_t *)&Qs[r * LD + 16 * kk + 2 * qc + 8] = hi;
        } else {
            *(uint2 *)&Qs[r * LD + c] = make_uint2(lo, hi);
        }
    }
}

/* S^T += K Q^T over the warp's 16 positions (kt: its first row of the raw tile) */
template <int HD>
__device__ __forceinline__ void tct_scores(float *s, const uint32_t (*qf)[2], const uint8_t *kt, int lane) {
    using C = tc_cfg<HD, true>;
    constexpr int NKS = HD / 16;
    const int g = lane >> 2, c = lane & 3;
    const uint8_t *ka = kt + g * C::RLD + c * (HD / 4), *kb = ka + 8 * C::RLD; /* positions g, g + 8 */
    uint32_t wa[NKS], wb[NKS];
#pragma unroll
    for (int i = 0; i < NKS / 4; i++) {
        const uint4 ua = *(const uint4 *)(ka + 16 * i), ub = *(const uint4 *)(kb + 16 * i);
        wa[4 * i] = ua.x, wa[4 * i + 1] = ua.y, wa[4 * i + 2] = ua.z, wa[4 * i + 3] = ua.w;
        wb[4 * i] = ub.x, wb[4 * i + 1] = ub.y, wb[4 * i + 2] = ub.z, wb[4 * i + 3] = ub.w;
    }
#pragma unroll
    for (int kk = 0; kk < NKS; kk++) {
        uint32_t h[4];
        e4m3x4_to_half2x2(wa[kk], h[0], h[2]);
        e4m3x4_to_half2x2(wb[kk], h[1], h[3]);
        mma_f16(s, h, qf[kk][0], qf[kk][1]);
    }
}

/* O^T += V^T P^T over the warp's 16 positions (vt: its first row of the raw
 * V tile; b0, b1: P^T's B fragment). Lane (g, c) supplies A[row][k] for
 * k = positions 2c, 2c + 1, 2c + 8, 2c + 9, so it reads of those four rows
 * the ND = HD / 8 bytes [ND g, ND g + ND) (one 16- or 8-byte load each);
 * __byte_perm pairs the words of positions p and p + 1 (0x5140: bytes 0 and
 * 1 of each, 0x7362: bytes 2 and 3) into (V[p][d], V[p + 1][d]) of two
 * dimensions, each widened by one cvt: m-tile 2m + h takes dims
 * ND g + 4m + 2h (row g) and + 1 (row g + 8).
 *
 * Bank conflicts, rows R = RLD / 4 = HD / 4 + 4 words apart (36 at hd 128,
 * 20 at hd 64; 2R = 8 mod 32 and 8R = 0 mod 32 at both): position 2c + r
 * (r = 0, 1, 8, 9; r' = r mod 2) of lane (g, c) starts at bank
 * 8c + r' R + ND g / 4 (mod 32).
 *   hd 128, 16-byte loads, served 8 lanes at a time (g in {2i, 2i + 1},
 *     c = 0..3): banks 8c + 4(g mod 2) + 8i + 4r' + {0..3}: 32 distinct.
 *   hd 64, 8-byte loads, served 16 lanes at a time (g in 4i..4i + 3):
 *     banks 8c + 2(g mod 4) + 8i + 20r' + {0, 1}: 32 distinct.
 * The pad also keeps tct_scores' K reads (16 bytes at g RLD + c HD / 4)
 * conflict-free at hd 128; at hd 64 those are 2-way conflicted, and no pad
 * serves both there. */
template <int HD>
__device__ __forceinline__ void tct_pv(float (*o)[4], uint32_t b0, uint32_t b1, const uint8_t *vt, int lane) {
    using C = tc_cfg<HD, true>;
    constexpr int ND = HD / 8, NW = ND / 4;
    const int g = lane >> 2, c = lane & 3;
    const uint8_t *vr = vt + 2 * c * C::RLD + ND * g;
    uint32_t v[4][NW];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const uint8_t *p = vr + ((r & 1) + 8 * (r >> 1)) * C::RLD;
        if constexpr (NW == 4) {
            const uint4 u = *(const uint4 *)p;
            v[r][0] = u.x, v[r][1] = u.y, v[r][2] = u.z, v[r][3] = u.w;
        } else {
            const uint2 u = *(const uint2 *)p;
            v[r][0] = u.x, v[r][1] = u.y;
        }
    }
#pragma unroll
    for (int m = 0; m < NW; m++) {
#pragma unroll
        for (int h = 0; h < 2; h++) { /* m-tile 2m + h: dims ND g + 4m + 2h (row g) and + 1 (row g + 8) */
            const uint32_t sel = h ? 0x7362 : 0x5140;
            const uint32_t lo = __byte_perm(v[0][m], v[1][m], sel), hi = __byte_perm(v[2][m], v[3][m], sel);
            uint32_t a[4];
            e4m3x4_to_half2x2(lo, a[0], a[1]);
            e4m3x4_to_half2x2(hi, a[2], a[3]);
            mma_f16(o[2 * m + h], a, b0, b1);
        }
    }
}

/* The same two products on an f16 tile (kt, vt: the warp's first rows):
 * A = K (16 positions x 16 dims) by ldmatrix, A = V^T (16 dims x 16
 * positions) by ldmatrix.trans; O^T's m-tile mt holds dims 16 mt + g and
 * 16 mt + g + 8, in order (no permutation). */
template <int HD>
__device__ __forceinline__ void tct_scores_f16(float *s, const uint32_t (*qf)[2], const __half *kt, int lane) {
    constexpr int LD = HD + 8;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t a[4];
        ldsm_x4(a, kt + (lane & 15) * LD + 16 * kk + 8 * (lane >> 4));
        mma_f16(s, a, qf[kk][0], qf[kk][1]);
    }
}
template <int HD>
__device__ __forceinline__ void tct_pv_f16(float (*o)[4], uint32_t b0, uint32_t b1, const __half *vt, int lane) {
    constexpr int LD = HD + 8;
    /* matrix i = lane / 8: positions 8 (i / 2) .. + 7, dims 8 (i % 2) .. + 7 of the m-tile */
    const __half *vr = vt + ((lane & 7) + 8 * (lane >> 4)) * LD + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int mt = 0; mt < HD / 16; mt++) {
        uint32_t a[4];
        ldsm_x4_trans(a, vr + 16 * mt);
        mma_f16(o[mt], a, b0, b1);
    }
}

template <int HD, bool FP8, int NST>
__global__ void __launch_bounds__(TC_NT)
    attn_rows_tc_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                         const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float qscale, int window, int S,
                         int minpos, float *__restrict__ part, int skip_bm, int bs_shift) {
    using C = tc_cfg<HD, FP8, NST>;
    constexpr int NKS = HD / 16, NMT = HD / 16, ND = HD / 8, SB = C::SB, ES = FP8 ? 1 : 2;
    extern __shared__ __align__(16) uint8_t tc_sm[];

    pdl_wait();
    const int split = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    dec_slice d;
    if (!dec_slice_of(d, seq, pos, T, n_heads, n_kv, TC_MAXG, S, minpos, window, skip_bm)) return;
    const int a = d.a, e = d.e;
    const int32_t *trow = kv.table + (size_t)seq[d.t] * kv.max_blocks;
    const uint8_t *kbase = (const uint8_t *)kv.k + (size_t)d.kvh * HD * ES;
    const uint8_t *vbase = (const uint8_t *)kv.v + (size_t)d.kvh * HD * ES;
    const int ntile = (e - a + TC_BN - 1) / TC_BN;
    int32_t blk[tc_copy<HD, FP8>::NIT];
#pragma unroll
    for (int i = 0; i < NST - 1; i++) {
        if (i < ntile) {
            tc_tile_blocks<HD, FP8>(blk, trow, bs_shift, a + i * TC_BN, e, tid);
            tc_load_tile<HD, FP8>(tc_sm + i * SB, kbase, vbase, blk, bs_shift, kv.kv_dim, a + i * TC_BN, e, tid);
        } else {
            cp_async_commit();
        }
    }
    if (NST - 1 < ntile) tc_tile_blocks<HD, FP8>(blk, trow, bs_shift, a + (NST - 1) * TC_BN, e, tid);

    __half *Qs = (__half *)(tc_sm + C::QOFF);
    tc_stage_q<HD, FP8>(Qs, q, d, n_heads, qscale, tid);
    __syncthreads();
    uint32_t qf[NKS][2]; /* B = Q^T: heads 0..7 as Qs's rows (ldmatrix of row-major [head][dim] is the col layout) */
#pragma unroll
    for (int k2 = 0; k2 < NKS / 2; k2++) {
        uint32_t b[4];
        ldsm_x4(b, Qs + (lane & 7) * C::LD + 32 * k2 + 8 * (lane >> 3));
        qf[2 * k2][0] = b[0], qf[2 * k2][1] = b[1], qf[2 * k2 + 1][0] = b[2], qf[2 * k2 + 1][1] = b[3];
    }

    const int g = lane >> 2, c = lane & 3;
    float o[NMT][4];
#pragma unroll
    for (int j = 0; j < NMT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* heads 2c, 2c + 1 */

    for (int it = 0; it < ntile; it++) {
        const int kb = a + TC_BN * it;
        if constexpr (NST == 2) cp_async_wait_all();
        else cp_async_wait1();
        __syncthreads();
        if (it + NST - 1 < ntile) {
            const int kn = kb + (NST - 1) * TC_BN;
            tc_load_tile<HD, FP8>(tc_sm + ((it + NST - 1) % NST) * SB, kbase, vbase, blk, bs_shift, kv.kv_dim, kn, e,
                                   tid);
            if (it + NST < ntile) tc_tile_blocks<HD, FP8>(blk, trow, bs_shift, kn + TC_BN, e, tid);
        } else if (NST > 2) {
            cp_async_commit();
        }
        const uint8_t *stage = tc_sm + (it % NST) * SB;
        const int pw = kb + 16 * w;
        if (pw >= e) continue;

        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* S^T[g][2c], [g][2c + 1], [g + 8][2c], [g + 8][2c + 1] */
        if constexpr (FP8) tct_scores<HD>(s, qf, stage + 16 * w * C::RLD, lane);
        else tct_scores_f16<HD>(s, qf, (const __half *)stage + 16 * w * C::LD, lane);
        if (pw + 16 > e) {
            if (pw + g >= e) s[0] = s[1] = -INFINITY;
            if (pw + g + 8 >= e) s[2] = s[3] = -INFINITY;
        }
        float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
        for (int o2 = 4; o2 <= 16; o2 <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o2));
        }
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        /* a head with nothing seen yet keeps m = -inf: subtract 0, not -inf */
        const float u0 = mn0 == -INFINITY ? 0.0f : mn0, u1 = mn1 == -INFINITY ? 0.0f : mn1;
        const float c0 = f_ex2(m0 - u0), c1 = f_ex2(m1 - u1);
        m0 = mn0, m1 = mn1;
        const float p00 = f_ex2(s[0] - u0), p01 = f_ex2(s[1] - u1), p10 = f_ex2(s[2] - u0), p11 = f_ex2(s[3] - u1);
        l0 = l0 * c0 + (p00 + p10);
        l1 = l1 * c1 + (p01 + p11);
        /* once the warp's maxima stop moving (most tiles of a long context) every c is 1: skip the
         * multiplies (bit-identical: x * 1.0f == x) */
        if (__any_sync(0xffffffffu, c0 != 1.0f || c1 != 1.0f)) {
#pragma unroll
            for (int j = 0; j < NMT; j++) o[j][0] *= c0, o[j][1] *= c1, o[j][2] *= c0, o[j][3] *= c1;
        }
        const uint32_t b0 = movm_trans(pack_h2(p00, p01)), b1 = movm_trans(pack_h2(p10, p11));
        if constexpr (FP8) tct_pv<HD>(o, b0, b1, stage + C::RAW + 16 * w * C::RLD, lane);
        else tct_pv_f16<HD>(o, b0, b1, (const __half *)stage + C::TILE + 16 * w * C::LD, lane);
    }
    pdl_launch();

    cp_async_wait_all();
    __syncthreads();
    float *mw = (float *)tc_sm, *lw = mw + 4 * TC_MAXG, *ow = lw + 4 * TC_MAXG; /* [4][8], [4][8], [4][8][HD] */
#pragma unroll
    for (int o2 = 4; o2 <= 16; o2 <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, o2);
        l1 += __shfl_xor_sync(0xffffffffu, l1, o2);
    }
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int hh = 2 * c + x;
        if (hh >= d.Gb) continue;
        if (g == 0) {
            mw[w * TC_MAXG + hh] = x ? m1 : m0;
            lw[w * TC_MAXG + hh] = x ? l1 : l0;
        }
        float *orow = ow + (size_t)(w * TC_MAXG + hh) * HD;
        if constexpr (FP8) {
#pragma unroll
            for (int j = 0; j < ND / 4; j++) /* dims ND g + 4j .. + 3: m-tiles 2j, 2j + 1, rows g and g + 8 */
                *(float4 *)(orow + ND * g + 4 * j) =
                    make_float4(o[2 * j][x], o[2 * j][x + 2], o[2 * j + 1][x], o[2 * j + 1][x + 2]);
        } else {
#pragma unroll
            for (int mt = 0; mt < NMT; mt++) orow[16 * mt + g] = o[mt][x], orow[16 * mt + g + 8] = o[mt][x + 2];
        }
    }
    __syncthreads();
    tc_merge_out<HD>(out, part, mw, lw, ow, d, n_heads, S, split, tid);
}

template <int HD, bool FP8>
void launch_tc(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv, const int32_t *seq,
               const int32_t *pos, int T, int n_heads, int n_kv, float qscale, int window, int S, int minpos,
               float *part, int skip_bm, int bs_shift) {
    /* HEARTH_ATTN_TC_ST=2: e4m3 with two stages (one tile in flight), as f16 keeps (an A/B switch, read once) */
    static int st3 = -1;
    if (st3 < 0) {
        const char *n = getenv("HEARTH_ATTN_TC_ST");
        st3 = FP8 && !(n && atoi(n) == 2);
    }
    constexpr int N3 = FP8 ? 3 : 2; /* f16 has no three-stage instantiation */
    static unsigned long long done[2]; /* devices set up, per instantiation */
    auto k = st3 ? attn_rows_tc_kernel<HD, FP8, N3> : attn_rows_tc_kernel<HD, FP8, 2>;
    const int smem = st3 ? tc_cfg<HD, FP8, N3>::SMEM : tc_cfg<HD, FP8, 2>::SMEM;
    cu_smem_setup(L, k, smem, true, &done[st3]);
    cu_launch_k(L, k, grid, dim3(TC_NT), smem, out, q, *kv, seq, pos, T, n_heads, n_kv, qscale, window, S, minpos,
                part, skip_bm, bs_shift);
}

} // namespace

int cu_attention_rows_tc_fits(int head_dim, const cu_kv *kv) {
    const int bs = kv->block_size, es = kv->fp8 ? 1 : 2;
    return (kv->f16 || kv->fp8) && (head_dim == 64 || head_dim == 128) && bs > 0 && (bs & (bs - 1)) == 0 &&
           ((size_t)kv->kv_dim * es) % 16 == 0 && ((uintptr_t)kv->k | (uintptr_t)kv->v) % 16 == 0;
}

void cu_attention_rows_tc(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                          const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int head_dim,
                          float scale, int window, int S, int minpos, float *part, int skip_bm) {
    int bs_shift = 0;
    while ((1 << bs_shift) < kv->block_size) bs_shift++;
    const float qscale = scale * 1.4426950408889634f;
#define TC_ARGS L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, qscale, window, S, minpos, part, skip_bm, bs_shift
    if (head_dim == 128) kv->fp8 ? launch_tc<128, true>(TC_ARGS) : launch_tc<128, false>(TC_ARGS);
    else kv->fp8 ? launch_tc<64, true>(TC_ARGS) : launch_tc<64, false>(TC_ARGS);
#undef TC_ARGS
}
