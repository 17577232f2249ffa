/* mmv.cu - matrix-vector products for decode and small batches (T <= 8):
 * y[T][N] = x[T][K] @ W^T, each weight byte read once from device memory for
 * all T rows.
 *
 * Float weights (F32/F16/BF16; 3..8 rows of bf16 / f16 go to tensor cores,
 * mmv_tc.cu): a warp owns R rows and streams them in
 * 16-byte loads (L1 bypassed), x rounded as the CPU backend rounds it (bf16
 * or f16 copies made by xprep.cu), f32 accumulation.
 *
 * One launch computes a set of matrices that share x (mmv_set): q, k and v
 * stacked by rows (for GGUF rope pairs, which are a warp's row pair, with
 * the rope and the KV cache stores in the epilogue), or the gate/up pair of
 * a SwiGLU with its epilogue (silu(gate) * up written next to both raw
 * outputs).
 *
 * Quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K, IQ4_NL, IQ4_XS): x is q8 / q8_K (xprep.cu) and the dot products are
 * integer (dp4a) per group, then scaled with the CPU backend's fmaf steps.
 * Rows split at load (split_rows.cu: codes, then scales; every quantized
 * type, where the row is 16-byte aligned) stream like float rows.
 * Otherwise (HEARTH_SPLIT_ROWS=0 too), when rows are 16-byte aligned, each warp stages its rows through
 * shared memory in segments with cp.async (double buffered), so the loads are
 * 16 bytes wide and fully coalesced whatever the block size (18, 20, 34, 210
 * bytes); otherwise the blocks are read straight from global memory. */
#include "ops/cuda/mmv.cuh"
#include "ops/cuda/mmv_quant.cuh"

#include <stdlib.h>

/* Rows r and r + 1 (r even) of token t with the rope + KV epilogue
 * (mmv_set.rope_half): rope_rotate and kv_st, as rope_kv.cu, so the cache
 * and q, k get the same bits as the separate ops would store. */
template <typename E> __device__ __forceinline__ void kv_st2(void *base, size_t off, float a, float b) {
    kv_st((E *)base, off, a);
    kv_st((E *)base, off + 1, b);
}
__device__ __forceinline__ void rope_kv_store(const mmv_set &s, int r, int t, float v0, float v1) {
    const int nq = s.n[0], nk = s.n[1], p = s.pos[t];
    const int m = r < nq ? 0 : r < nq + nk ? 1 : 2, rr = r - (m > 0 ? nq : 0) - (m > 1 ? nk : 0);
    const int d = rr % s.hd;
    if (m < 2 && d < 2 * s.rope_half) rope_rotate(v0, v1, p, s.inv_freq[d / 2]);
    float *y = s.y[m] + (size_t)t * s.n[m] + rr;
    y[0] = v0;
    y[1] = v1;
    if (m == 0) return;
    const cu_kv &kv = s.kv;
    const int blk = kv.table[(size_t)s.seq[t] * kv.max_blocks + p / kv.block_size];
    const size_t off = ((size_t)blk * kv.block_size + (size_t)(p % kv.block_size)) * kv.kv_dim + rr;
    void *base = m == 1 ? kv.k : kv.v;
    if (kv.f16) kv_st2<__half>(base, off, v0, v1);
    else if (kv.fp8) kv_st2<__nv_fp8_e4m3>(base, off, v0, v1);
    else kv_st2<float>(base, off, v0, v1);
}

/* y of logical rows r (even) and r + 1 < N (if r + 1 < N), token t. */
__device__ __forceinline__ void pair_store(const mmv_set &s, int r, int N, int t, float v0, float v1) {
    if (s.rope_half) {
        rope_kv_store(s, r, t, v0, v1);
        return;
    }
    set_store(s, r, t, v0);
    if (r + 1 < N) set_store(s, r + 1, t, v1);
}

/* ---- float weights -------------------------------------------------------- */

/* 8 (2-byte types) or 4 (f32) elements of a 16-byte chunk, as floats. */
template <int WT> __device__ __forceinline__ void unpack16(uint4 v, float *f);
template <> __device__ __forceinline__ void unpack16<HEARTH_DT_BF16>(uint4 v, float *f) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}
template <> __device__ __forceinline__ void unpack16<HEARTH_DT_F16>(uint4 v, float *f) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 p = __half22float2(*(const __half2 *)&w[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}
template <> __device__ __forceinline__ void unpack16<HEARTH_DT_F32>(uint4 v, float *f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
}

/* A streamed format: a row is nch chunks of E elements (16 bytes; Q4_K: 32,
 * Q6_K: 48), split quantized rows keeping their scales after them; load()
 * fetches chunk c of a row, dot() adds the products of R rows' chunk c with
 * the NT rows of x. */
template <int WT> struct fmt_float {
    enum { E = WT == HEARTH_DT_F32 ? 4 : 8 }; /* elements a chunk */
    enum { U = 4 };    /* chunks in flight a row: 8 measured slower at batch 1 (s3-run4: 167 vs 184 tok/s) */
    enum { WAVE = 0 }; /* launch_stream */
    typedef uint4 W;
    struct X {
        const uint8_t *p;
        size_t row; /* bytes of one row of x */
    };
    static __device__ __forceinline__ X x_of(const void *xp, int K, int) {
        return {(const uint8_t *)xp, (size_t)K * (WT == HEARTH_DT_F32 ? 4 : 2)};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int) {
        return ld_stream16(row + (size_t)c * 16);
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float wf[R][E];
#pragma unroll
        for (int r = 0; r < R; r++) unpack16<WT>(w[r], wf[r]);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float xf[E];
            unpack16<WT>(*(const uint4 *)(x.p + (size_t)t * x.row + (size_t)c * 16), xf);
#pragma unroll
            for (int r = 0; r < R; r++) {
                float s = acc[r][t];
#pragma unroll
                for (int e = 0; e < E; e++) s = fmaf(wf[r][e], xf[e], s);
                acc[r][t] = s;
            }
        }
    }
};

/* One warp owns logical rows [2*rp, 2*rp + 2) (rp: a row pair), or in
 * swiglu mode the gate and up rows of logical row rp, over a 1/KS slice of
 * K: the KS warps of a row pair sit in one block and take every KS-th group
 * of 32 chunks each, their sums added through shared memory. Chunk c of a
 * row is elements [E*c, E*c + E). KS > 1 shortens each warp's serial chain
 * of loads when the matrix has few rows (4096: one wave holds every warp).
 *
 * A warp's work is a list of items, (row pair, round of U chunks a lane):
 * with KS = 1 the grid is one wave of resident blocks and a warp takes row
 * pairs gw, gw + nw, ..., its next item's loads in flight while it computes
 * the current one, across row pairs too (no tail of short-lived blocks);
 * with KS > 1 a block takes groups of WPB / KS row pairs, bid, bid + nblk,
 * ... (bid: the block's place in a grid of nblk; the same count for all its
 * warps, which meet at each group's sum), the grid again one wave (HEARTH_MMV_KSWAVE=0: a
 * block a group, as before session 14), so that a warp's next group is in
 * flight while it finishes one, where a second wave of blocks started cold. */
template <typename F, int NT, int KS>
__device__ __forceinline__ void stream_body(const mmv_set &set, size_t row_bytes, const void *__restrict__ xp, int K,
                                            int bid, int nblk) {
    constexpr int U = F::U, R = 2;
    constexpr int WPB = 256 / 32; /* warps a block */
    static_assert(WPB % KS == 0, "KS divides the warps of a block");
    typedef typename F::W W;
    __shared__ float red[2][KS > 1 ? WPB : 1][R][NT]; /* two groups' sums: one barrier a group */
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, ks = wib % KS;
    const int N = set_rows(set), npairs = set.swiglu ? N : (N + 1) / 2;
    const int gw = bid * (WPB / KS) + wib / KS, nw = nblk * (WPB / KS);
    const int nch = K / F::E;
    constexpr int STEP = 32 * KS; /* chunks between a warp's consecutive loads of a row */
    const int rounds = (nch + STEP * U - 1) / (STEP * U);
    const int ngroups = (npairs + WPB / KS - 1) / (WPB / KS); /* KS > 1: groups of a block's row pairs */
    const int mine = KS > 1 ? (bid < ngroups ? (ngroups - 1 - bid) / nblk + 1 : 0)
                            : gw < npairs ? (npairs - 1 - gw) / nw + 1 : 0;
    const int nitems = mine * rounds;
    const typename F::X x = F::x_of(xp, K, NT);

    auto rp_of = [&](int item) { /* KS > 1: past npairs in the last group (its warps take the barriers) */
        return KS > 1 ? (bid + item / rounds * nblk) * (WPB / KS) + wib / KS
                      : gw + item / rounds * nw;
    };
    auto row0_of = [&](int item) {
        const int rp = KS > 1 ? min(rp_of(item), npairs - 1) : rp_of(item);
        return set.swiglu ? rp : rp * R;
    };
    auto c0_of = [&](int item) { return lane + 32 * ks + item % rounds * (STEP * U); };
    W w[U][R];
    auto load = [&](int item) {
        const int row0 = row0_of(item), c0 = c0_of(item);
        const uint8_t *wr[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            wr[r] = set.swiglu ? set_row(set, row0, r, row_bytes) : set_row(set, min(row0 + r, N - 1), 0, row_bytes);
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + STEP * u;
#pragma unroll
            for (int r = 0; r < R; r++) w[u][r] = c < nch ? F::load(wr[r], c, nch) : W{};
        }
    };
    if (nitems > 0) load(0);
    pdl_wait();
    if (KS == 1 && nitems == 0) return;

    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    /* the sums of row pair row0, stored (KS > 1: added over the block's slices first) */
    auto finish = [&](int row0, bool live, int par) {
        float v[R][NT];
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                v[r][t] = warp_sum(acc[r][t]);
                acc[r][t] = 0.0f;
            }
        if constexpr (KS > 1) { /* the slices' sums, in slice order */
            if (lane == 0)
#pragma unroll
                for (int t = 0; t < NT; t++)
#pragma unroll
                    for (int r = 0; r < R; r++) red[par][wib][r][t] = v[r][t];
            __syncthreads();
            if (ks != 0 || !live) return;
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float s = red[par][wib][r][t];
#pragma unroll
                    for (int k = 1; k < KS; k++) s += red[par][wib + k][r][t];
                    v[r][t] = s;
                }
        }
        if (lane == 0)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (set.swiglu) swiglu_store(set, row0, t, v[0][t], v[1][t]);
                else pair_store(set, row0, N, t, v[0][t], v[1][t]);
            }
    };

    for (int it = 0; it < nitems; it++) {
        /* the whole next item in flight while this one is computed (loading chunk u of the next item as
         * chunk u of this one is used takes a third fewer registers but was 2% slower, s5-run6) */
        W cur[U][R];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++) cur[u][r] = w[u][r];
        if (it + 1 < nitems) load(it + 1);
        const int c0 = c0_of(it);
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + STEP * u;
            if (c < nch) F::template dot<NT, R>(cur[u], c, x, acc);
        }
        if (it % rounds == rounds - 1) finish(row0_of(it), KS == 1 || rp_of(it) < npairs, it / rounds & 1);
    }
    pdl_launch();
}

/* Two blocks a multiprocessor up to two rows of x (128 registers): at two
 * rows the Q4_0 and Q4_K bodies took 156-164, one block, half the loads in
 * flight. Q8_0 rows also at three and four rows of x (tensor cores take
 * them from five), whose bodies took 142-152: held to 128, the engine's 3
 * and 4 Q8_0 streams gained 10.7% and 13.3% (s20-run1). */
template <typename F, int NT> struct stream_blocks { enum { value = NT <= 2 ? 2 : 1 }; };
template <int NT> struct stream_blocks<fmt_split<HEARTH_DT_Q8_0>, NT> { enum { value = NT <= 4 ? 2 : 1 }; };
template <typename F, int NT, int KS>
__global__ void __launch_bounds__(256, stream_blocks<F, NT>::value)
    mmv_stream_kernel(mmv_set set, size_t row_bytes, const void *__restrict__ xp, int K) {
    stream_body<F, NT, KS>(set, row_bytes, xp, K, blockIdx.x, gridDim.x);
}

/* Two sets of one x, K and T = 1 whose rows are of two streamed formats, as
 * one launch: blocks [0, nba) take set a as a grid of their own, the others
 * set b (the q and k rows of a layer and its v rows of another type: a
 * Q4_K_M file's Q6_K attn_v; the two GEMVs one after the other left the
 * smaller one's wave a third of the chip and a kernel boundary). */
template <typename FA, typename FB>
__global__ void __launch_bounds__(256) mmv_stream2_kernel(mmv_set a, size_t rba, mmv_set b, size_t rbb,
                                                          const void *__restrict__ xp, int K, int nba) {
    if ((int)blockIdx.x < nba) stream_body<FA, 1, 1>(a, rba, xp, K, blockIdx.x, nba);
    else stream_body<FB, 1, 1>(b, rbb, xp, K, blockIdx.x - nba, gridDim.x - nba);
}

/* Any K and alignment: warp per row, one element per lane step. */
template <int WT>
__device__ __forceinline__ float load_elem(const void *p, size_t i) {
    if constexpr (WT == HEARTH_DT_F32) return ((const float *)p)[i];
    else if constexpr (WT == HEARTH_DT_F16) return __half2float(((const __half *)p)[i]);
    else return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

template <int WT, int NT>
__global__ void __launch_bounds__(256) mmv_float_generic(mmv_set set, size_t row_bytes, const void *__restrict__ xp,
                                                         int K) {
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (row >= set_rows(set)) return;
    float g[NT];
    for (int ph = 0; ph <= set.swiglu; ph++) {
        const uint8_t *wr = set_row(set, row, ph, row_bytes);
        float acc[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) acc[t] = 0.0f;
        for (int k = lane; k < K; k += 32) {
            float wv = load_elem<WT>(wr, k);
#pragma unroll
            for (int t = 0; t < NT; t++) acc[t] = fmaf(wv, load_elem<WT>(xp, (size_t)t * K + k), acc[t]);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float v = warp_sum(acc[t]);
            if (set.swiglu && ph == 0) g[t] = v;
            else if (lane == 0) set.swiglu ? swiglu_store(set, row, t, g[t], v) : set_store(set, row, t, v);
        }
    }
    pdl_launch();
}

/* Rows 16-byte aligned. A warp owns pairs of rows - the gate and up rows of
 * one output in swiglu mode, logical rows 2j and 2j+1 otherwise - so every x
 * load serves two rows; it streams pairs gw, gw + nw, ... in segments of
 * SEG_BLOCKS blocks of both rows through a double buffer in shared memory
 * (cp.async, 16-byte chunks, fully coalesced whatever the block size). */
template <int QT, int NT, bool PAIR>
__global__ void __launch_bounds__(128) mmv_quant_staged(mmv_set set, size_t row_bytes, xq8 x) {
    using TR = qtraits<QT>;
    constexpr int SEG = TR::SEG_BLOCKS * TR::BYTES;
    static_assert(SEG % 16 == 0, "segment must be whole 16-byte chunks");
    __shared__ __align__(16) uint8_t sm[4][2][2][SEG];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int gw = blockIdx.x * 4 + wid, nw = gridDim.x * 4;
    const int N = set_rows(set);
    const int npairs = set.swiglu ? N : (N + 1) / 2;
    const int nblk_row = x.K / TR::ELEMS;
    const int nseg = (int)((row_bytes + SEG - 1) / SEG);
    const int mine = gw < npairs ? (npairs - 1 - gw) / nw + 1 : 0;
    const int nitems = mine * nseg;

    auto row_of = [&](int pair, int k) -> const uint8_t * {
        return set.swiglu ? set_row(set, pair, k, row_bytes) : set_row(set, min(2 * pair + k, N - 1), 0, row_bytes);
    };
    auto issue = [&](int it) {
        int j = it / nseg, s = it - j * nseg, pair = gw + j * nw;
        int bytes = (int)min((size_t)SEG, row_bytes - (size_t)s * SEG);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const uint8_t *src = row_of(pair, k) + (size_t)s * SEG;
            uint8_t *dst = sm[wid][it & 1][k];
            for (int c = lane * 16; c < bytes; c += 512) cp_async16(dst + c, src + c);
        }
    };
    if (nitems > 0) issue(0);
    cp_async_commit();
    pdl_wait();

    float acc[2][NT];
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[k][t] = 0.0f;
    for (int it = 0; it < nitems; it++) {
        if (it + 1 < nitems) issue(it + 1);
        cp_async_commit();
        cp_async_wait1();
        __syncwarp();
        int j = it / nseg, s = it - j * nseg;
        int blk0 = s * TR::SEG_BLOCKS;
        int nu = min((int)TR::SEG_BLOCKS, nblk_row - blk0) * TR::UNITS;
        const uint8_t *sa = sm[wid][it & 1][0], *sb = sm[wid][it & 1][1];
        int u0 = 0;
        if constexpr (PAIR && has_pair<QT>::value) { /* a lane takes blocks 2p and 2p + 1; an odd last one goes below */
            for (int p = lane; p < nu / 2; p += 32) {
                const uint8_t *bp[2] = {sa + 2 * p * TR::BYTES, sb + 2 * p * TR::BYTES};
                qdot_pair<QT, NT, 2>::run(bp, blk0 + 2 * p, x, acc);
            }
            u0 = nu & ~1;
        }
        for (int u = u0 + lane; u < nu; u += 32) {
            int b = u / TR::UNITS;
            const uint8_t *bp[2] = {sa + b * TR::BYTES, sb + b * TR::BYTES};
            qdot<QT, NT, 2>::run(bp, u - b * TR::UNITS, blk0 + b, x, acc);
        }
        __syncwarp();
        if (s == nseg - 1) {
            int pair = gw + j * nw;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float v0 = warp_sum(acc[0][t]), v1 = warp_sum(acc[1][t]);
                acc[0][t] = acc[1][t] = 0.0f;
                if (lane == 0) {
                    if (set.swiglu) swiglu_store(set, pair, t, v0, v1);
                    else pair_store(set, 2 * pair, N, t, v0, v1);
                }
            }
        }
    }
    pdl_launch();
}

/* Any row alignment: warp per logical row, blocks read straight from global
 * memory. */
template <int QT, int NT>
__global__ void __launch_bounds__(256) mmv_quant_direct(mmv_set set, size_t row_bytes, xq8 x) {
    using TR = qtraits<QT>;
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (row >= set_rows(set)) return;
    const int nu = x.K / TR::ELEMS * TR::UNITS;
    float g[NT];
    for (int ph = 0; ph <= set.swiglu; ph++) {
        const uint8_t *wr = set_row(set, row, ph, row_bytes);
        float acc[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) acc[t] = 0.0f;
        for (int u = lane; u < nu; u += 32) {
            int b = u / TR::UNITS;
            const uint8_t *bp[1] = {wr + (size_t)b * TR::BYTES};
            qdot<QT, NT, 1>::run(bp, u - b * TR::UNITS, b, x, (float(*)[NT])acc);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float v = warp_sum(acc[t]);
            if (set.swiglu && ph == 0) g[t] = v;
            else if (lane == 0) set.swiglu ? swiglu_store(set, row, t, g[t], v) : set_store(set, row, t, v);
        }
    }
    pdl_launch();
}

/* ---- dispatch ------------------------------------------------------------- */

int cu_mmv_supported(hearth_dtype t) {
    switch (t) {
    case HEARTH_DT_F32: case HEARTH_DT_F16: case HEARTH_DT_BF16: case HEARTH_DT_Q4_0: case HEARTH_DT_Q4_1:
    case HEARTH_DT_Q8_0: case HEARTH_DT_Q4_K: case HEARTH_DT_Q6_K: case HEARTH_DT_Q5_0: case HEARTH_DT_Q5_1:
    case HEARTH_DT_IQ4_NL: case HEARTH_DT_Q5_K: case HEARTH_DT_Q3_K: case HEARTH_DT_Q2_K: case HEARTH_DT_IQ4_XS:
        return 1;
    default: return 0;
    }
}

int cu_mmv_xprep_kind(hearth_dtype t) {
    switch (t) {
    case HEARTH_DT_F32: return XPREP_NONE;
    case HEARTH_DT_F16: return XPREP_F16;
    case HEARTH_DT_BF16: return XPREP_BF16;
    case HEARTH_DT_Q4_K: case HEARTH_DT_Q6_K: case HEARTH_DT_Q5_K: case HEARTH_DT_Q3_K: case HEARTH_DT_Q2_K:
    case HEARTH_DT_IQ4_XS: return XPREP_Q8K;
    default: return XPREP_Q8;
    }
}

static int set_aligned(const mmv_set *s) {
    int n = s->swiglu ? 2 : s->count;
    for (int m = 0; m < n; m++)
        if ((uintptr_t)s->w[m] & 15) return 0;
    return 1;
}

static int set_rows_host(const mmv_set *s) { return s->swiglu ? s->n[0] : s->n[0] + s->n[1] + s->n[2]; }

/* The launchers' kernel choices, which cu_mmv_pairs also asks: float rows stream in
 * 16-byte chunks (mmv_stream_kernel) when float_streams, else the generic
 * kernel; quantized rows that are split stream too, else quant_staged picks
 * the staged kernel over the direct one. */
static int float_streams(const mmv_set *s, hearth_dtype t, int K, size_t row_bytes, const void *xp) {
    return K % (t == HEARTH_DT_F32 ? 4 : 8) == 0 && set_aligned(s) && row_bytes % 16 == 0 &&
           ((uintptr_t)xp & 15) == 0;
}
static int quant_staged(const mmv_set *s, size_t row_bytes) { return set_aligned(s) && row_bytes % 16 == 0; }

/* K slices of the streamed GEMV: split while the row pairs' warps, times the
 * split, fit in about one wave (WAVE_WARPS a multiprocessor) and each warp
 * keeps at least one and a half rounds of U loads (a Q4_0 down projection,
 * 448 chunks a row, splits in two: 12.75 -> 12.00 us in bench_gemv,
 * s8-run2; a Q8_0 4096-row q, one round, stays whole: 7.14 us, 7.68 split).
 * Rows of a full round a slice at four (512 chunks of U = 4 loads a lane:
 * K >= 4096 in bf16 / f16, >= 8192 in Q8_0, >= 16384 in Q4_0) split in four
 * whatever their count (`four`: the float and Q4_0 / Q8_0 formats): a BF16
 * 8B-shaped token 4.477 -> 4.220 ms, this rule having kept gate/up whole
 * and the others in two (s18-run5); the Q8_0 down projection, the only such
 * quantized rows of that shape, 2.850 -> 2.816 ms a token (s18-run6).
 * HEARTH_MMV_KS_FLOAT=0 / HEARTH_MMV_KS_QUANT=0 keep the rule above for
 * either; HEARTH_MMV_KS=1|2|4 fixes the split, HEARTH_MMV_KS_HALF the half
 * rounds (benchmarks; 4 until session 8). */
#define WAVE_WARPS 48
static int stream_ks(const cu_launch *L, int pairs, int nch, bool float_rows, bool four) {
    static int fixed = -1, half = 3, float_four = 1, quant_four = 1;
    if (fixed < 0) {
        const char *s = getenv("HEARTH_MMV_KS");
        fixed = s && (atoi(s) == 1 || atoi(s) == 2 || atoi(s) == 4) ? atoi(s) : 0;
        s = getenv("HEARTH_MMV_KS_HALF");
        if (s && atoi(s) >= 1) half = atoi(s);
        s = getenv("HEARTH_MMV_KS_FLOAT");
        float_four = !(s && atoi(s) == 0);
        s = getenv("HEARTH_MMV_KS_QUANT");
        quant_four = !(s && atoi(s) == 0);
    }
    if (fixed) return fixed;
    if (four && (float_rows ? float_four : quant_four) && nch >= 32 * 4 * 4) return 4;
    int ks = 1;
    while (ks < 4 && (long)pairs * ks * 2 <= (long)L->n_sm * WAVE_WARPS && nch >= 64 * ks * 2 * half) ks *= 2;
    return ks;
}

/* KS = 1, formats with WAVE: one wave of resident blocks, or fewer when
 * there are fewer row pairs (HEARTH_MMV_WAVE=0: a block per 8 pairs, for
 * benchmarks; float rows measured 1% slower with it, s5-run5). */
template <typename F, int NT>
static void launch_stream(const cu_launch *L, const mmv_set *set, const void *xp, int K, size_t row_bytes, int ks,
                          int pairs) {
    static int wave = -1, kswave = 1, per_sm[3]; /* per_sm: of this instantiation, by ks */
    if (wave < 0) {
        const char *s = getenv("HEARTH_MMV_WAVE");
        wave = F::WAVE && !(s && atoi(s) == 0);
        s = getenv("HEARTH_MMV_KSWAVE");
        kswave = !(s && atoi(s) == 0);
    }
    auto k = ks == 4   ? mmv_stream_kernel<F, NT, 4>
             : ks == 2 ? mmv_stream_kernel<F, NT, 2>
                       : mmv_stream_kernel<F, NT, 1>;
    int blocks = cu_div_up(pairs, 8 / ks);
    if (ks == 1 ? wave : kswave) {
        int *n = &per_sm[ks == 4 ? 2 : ks - 1];
        if (!*n && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, k, 256, 0) != cudaSuccess || *n < 1)) {
            cudaGetLastError();
            *n = 2;
        }
        if (blocks > L->n_sm * *n) blocks = L->n_sm * *n;
    }
    cu_launch_k(L, k, dim3(blocks), dim3(256), 0, *set, row_bytes, xp, K);
}

template <int WT, int NT>
static void launch_float(const cu_launch *L, const mmv_set *set, const void *xp, int K, size_t row_bytes) {
    constexpr int E = WT == HEARTH_DT_F32 ? 4 : 8;
    int N = set_rows_host(set);
    if (float_streams(set, (hearth_dtype)WT, K, row_bytes, xp)) {
        int pairs = set->swiglu ? N : cu_div_up(N, 2);
        int ks = stream_ks(L, pairs, K / E, true, true);
        launch_stream<fmt_float<WT>, NT>(L, set, xp, K, row_bytes, ks, pairs);
    } else {
        cu_launch_k(L, mmv_float_generic<WT, NT>, dim3(cu_div_up(N, 8)), dim3(256), 0, *set, row_bytes, xp, K);
    }
}

/* The K split of split QT rows (stream_ks counts 16-byte chunks). */
template <int QT> static int split_ks(const cu_launch *L, int pairs, int K) {
    const int n16 = K / qtraits<QT>::ELEMS * split_fmt<QT>::QB / 16;
    return stream_ks(L, pairs, n16, false, fmt_split<QT>::U == 4);
}

template <int QT, int NT>
static void launch_quant(const cu_launch *L, const mmv_set *set, const void *xp, int K, size_t row_bytes) {
    size_t n = (size_t)NT * (size_t)K;
    xq8 x = {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + n), K};
    int N = set_rows_host(set);
    if constexpr (split_fmt<QT>::QB != 0) {
        if (set->split) { /* cu_split_rows made the rows aligned and their codes whole 16-byte chunks */
            int pairs = set->swiglu ? N : cu_div_up(N, 2);
            const int ks = split_ks<QT>(L, pairs, K);
            launch_stream<fmt_split<QT>, NT>(L, set, xp, K, row_bytes, ks, pairs);
            return;
        }
    }
    if (quant_staged(set, row_bytes)) {
        /* Q4_0 / Q8_0 at one row of x: two blocks a lane from aligned words (HEARTH_MMV_PAIR=0 keeps one,
         * for benchmarks); at 8 rows the pair's x registers made it slower (s3-run4) */
        static int pair = -1;
        if (pair < 0) {
            const char *s = getenv("HEARTH_MMV_PAIR");
            pair = !(s && atoi(s) == 0);
        }
        auto k = has_pair<QT>::value && NT == 1 && pair ? mmv_quant_staged<QT, NT, true>
                                                        : mmv_quant_staged<QT, NT, false>;
        /* one wave of resident blocks, or fewer when there are fewer pairs */
        static int per_sm = 0;
        if (!per_sm && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 128, 0) != cudaSuccess ||
                        per_sm < 1)) {
            cudaGetLastError();
            per_sm = 4;
        }
        int pairs = set->swiglu ? N : cu_div_up(N, 2);
        int blocks = cu_div_up(pairs, 4);
        if (blocks > L->n_sm * per_sm) blocks = L->n_sm * per_sm;
        cu_launch_k(L, k, dim3(blocks), dim3(128), 0, *set, row_bytes, x);
    } else {
        cu_launch_k(L, mmv_quant_direct<QT, NT>, dim3(cu_div_up(N, 8)), dim3(256), 0, *set, row_bytes, x);
    }
}

template <int NT>
static void launch_nt(const cu_launch *L, const mmv_set *set, const void *xp, hearth_dtype t, int K, size_t rb) {
    switch (t) {
    case HEARTH_DT_F32: launch_float<HEARTH_DT_F32, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_F16: launch_float<HEARTH_DT_F16, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_BF16: launch_float<HEARTH_DT_BF16, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q4_0: launch_quant<HEARTH_DT_Q4_0, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q4_1: launch_quant<HEARTH_DT_Q4_1, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q8_0: launch_quant<HEARTH_DT_Q8_0, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q4_K: launch_quant<HEARTH_DT_Q4_K, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q6_K: launch_quant<HEARTH_DT_Q6_K, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q5_0: launch_quant<HEARTH_DT_Q5_0, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q5_1: launch_quant<HEARTH_DT_Q5_1, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_IQ4_NL: launch_quant<HEARTH_DT_IQ4_NL, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q5_K: launch_quant<HEARTH_DT_Q5_K, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q3_K: launch_quant<HEARTH_DT_Q3_K, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_Q2_K: launch_quant<HEARTH_DT_Q2_K, NT>(L, set, xp, K, rb); break;
    case HEARTH_DT_IQ4_XS: launch_quant<HEARTH_DT_IQ4_XS, NT>(L, set, xp, K, rb); break;
    default: break;
    }
}

int cu_mmv_pairs(const mmv_set *set, hearth_dtype t, int T, int K, size_t row_bytes, const void *xp) {
    if (set->swiglu || !cu_mmv_supported(t) || cu_mmv_tc_fits(set, t, T, K, row_bytes, xp)) return 0;
    switch (t) { /* as launch_float / launch_quant choose */
    case HEARTH_DT_F32: case HEARTH_DT_F16: case HEARTH_DT_BF16: return float_streams(set, t, K, row_bytes, xp);
    default:
        return set->split || quant_staged(set, row_bytes); /* every quantized type streams split rows */
    }
}

void cu_mmv(const cu_launch *L, const mmv_set *set, const void *xp, int T, hearth_dtype t, int K,
            size_t row_bytes) {
    if (set->rope_half && !cu_mmv_pairs(set, t, T, K, row_bytes, xp)) { /* the recorder checks first */
        cu_note(L, cudaErrorInvalidValue);
        return;
    }
    if (!set->rope_half && cu_mmv_tc_fits(set, t, T, K, row_bytes, xp)) {
        cu_mmv_tc(L, set, xp, T, t, K, row_bytes);
        return;
    }
    switch (T) {
    case 1: launch_nt<1>(L, set, xp, t, K, row_bytes); break;
    case 2: launch_nt<2>(L, set, xp, t, K, row_bytes); break;
    case 3: launch_nt<3>(L, set, xp, t, K, row_bytes); break;
    case 4: launch_nt<4>(L, set, xp, t, K, row_bytes); break;
    case 5: launch_nt<5>(L, set, xp, t, K, row_bytes); break;
    case 6: launch_nt<6>(L, set, xp, t, K, row_bytes); break;
    case 7: launch_nt<7>(L, set, xp, t, K, row_bytes); break;
    case 8: launch_nt<8>(L, set, xp, t, K, row_bytes); break;
    default: break;
    }
}

/* Sets a and b of one x at T = 1, of split rows of two formats, as one
 * launch (mmv_stream2_kernel): a one-wave grid cut between them by their
 * bytes, neither more blocks than its row pairs fill. Only where both would
 * stream unsplit in K (KS 1), as a layer's q, k and v rows do. */
template <int QA, int QB>
static void launch_two(const cu_launch *L, const mmv_set *a, size_t rba, const mmv_set *b, size_t rbb,
                       const void *xp, int K, int pa, int pb) {
    static int per_sm;
    auto k = mmv_stream2_kernel<fmt_split<QA>, fmt_split<QB>>;
    if (!per_sm && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 256, 0) != cudaSuccess || per_sm < 1)) {
        cudaGetLastError();
        per_sm = 2;
    }
    const int total = L->n_sm * per_sm, need_a = cu_div_up(pa, 8), need_b = cu_div_up(pb, 8);
    const double bytes_a = (double)pa * rba, bytes_b = (double)pb * rbb;
    int nba = (int)(total * bytes_a / (bytes_a + bytes_b) + 0.5);
    nba = nba < 1 ? 1 : nba > total - 1 ? total - 1 : nba;
    if (nba > need_a) nba = need_a;
    int nbb = total - nba < need_b ? total - nba : need_b;
    cu_launch_k(L, k, dim3(nba + nbb), dim3(256), 0, *a, rba, *b, rbb, xp, K, nba);
}

int cu_mmv2(const cu_launch *L, const mmv_set *a, hearth_dtype ta, size_t rba, const mmv_set *b, hearth_dtype tb,
            size_t rbb, const void *xp, int T, int K) {
    static int on = -1;
    if (on < 0) {
        const char *s = getenv("HEARTH_MMV_TWO");
        on = !(s && atoi(s) == 0);
    }
    if (!on || T != 1 || !a->split || !b->split || a->swiglu || b->swiglu || !cu_mmv_pairs(a, ta, T, K, rba, xp) ||
        !cu_mmv_pairs(b, tb, T, K, rbb, xp))
        return 0;
    const int pa = cu_div_up(set_rows_host(a), 2), pb = cu_div_up(set_rows_host(b), 2);
    /* the mixes of llama.cpp's files (a: v's type, b: q and k's): Q4_K_M's and Q5_K_M's Q6_K attn_v, Q3_K_M's
     * Q4_K / Q5_K, Q2_K's Q4_K or Q3_K, IQ4_XS's Q5_K (GQA models); Q8_0 beside Q4_0 */
#define MMV_TWO(QA, QB)                                                                                                \
    if (ta == QA && tb == QB) {                                                                                        \
        if (split_ks<QA>(L, pa, K) != 1 || split_ks<QB>(L, pb, K) != 1) return 0;                                      \
        launch_two<QA, QB>(L, a, rba, b, rbb, xp, K, pa, pb);                                                          \
        return 1;                                                                                                      \
    }
    MMV_TWO(HEARTH_DT_Q6_K, HEARTH_DT_Q4_K) MMV_TWO(HEARTH_DT_Q4_K, HEARTH_DT_Q6_K)
    MMV_TWO(HEARTH_DT_Q6_K, HEARTH_DT_Q5_K) MMV_TWO(HEARTH_DT_Q5_K, HEARTH_DT_Q3_K)
    MMV_TWO(HEARTH_DT_Q4_K, HEARTH_DT_Q3_K) MMV_TWO(HEARTH_DT_Q4_K, HEARTH_DT_Q2_K)
    MMV_TWO(HEARTH_DT_Q3_K, HEARTH_DT_Q2_K) MMV_TWO(HEARTH_DT_Q5_K, HEARTH_DT_IQ4_XS)
    MMV_TWO(HEARTH_DT_Q8_0, HEARTH_DT_Q4_0) MMV_TWO(HEARTH_DT_Q4_0, HEARTH_DT_Q8_0)
#undef MMV_TWO
    return 0;
}
