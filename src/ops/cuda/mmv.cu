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
 * Q4_0 / Q8_0 / Q4_K / Q5_K / Q6_K / IQ4_XS rows split at load
 * (split_rows.cu: codes, then scales) stream like float rows.
 * Otherwise, when rows are 16-byte aligned, each warp stages its rows through
 * shared memory in segments with cp.async (double buffered), so the loads are
 * 16 bytes wide and fully coalesced whatever the block size (18, 20, 34, 210
 * bytes); otherwise the blocks are read straight from global memory. */
#include "ops/cuda/mmv.cuh"

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
template <int QT> struct fmt_split;
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

/* ---- quantized weights ---------------------------------------------------- */

/* x in q8 (xprep.cu): qs [T][K] int8, ds [T][K/32] = (d, sum, s, 0). */
struct xq8 {
    const int8_t *qs;
    const float4 *ds;
    int K;
};

__device__ __forceinline__ void x_group(const xq8 &x, int t, int g, int *v, float4 *ds) {
    const int4 *p = (const int4 *)(x.qs + (size_t)t * x.K + (size_t)g * QK);
    int4 a = p[0], b = p[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    *ds = x.ds[(size_t)t * (x.K / QK) + g];
}

/* acc[r][t] += the dot product of one unit of a block of row r (b[r]: its
 * bytes; sub: which unit of the block; gb: the block's index in the row)
 * with x row t; the R rows share each x load. The integer part is exact and
 * each scaling step is the CPU's fmaf (see ops/cpu/matmul_scalar.c);
 * K-quant blocks are cut in 4 units of 64 elements, each scaled on its own. */
template <int QT, int NT, int R> struct qdot;

/* The integer dot product of 32 4-bit codes (16 bytes: low nibbles are
 * elements 0..15, high nibbles 16..31, as Q4_0/Q4_1 store them) with 32
 * int8 values of x. */
__device__ __forceinline__ int dot_nibbles(const uint32_t *q, const int *v) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s = __dp4a((int)(q[i] & 0x0F0F0F0Fu), v[i], s);
        s = __dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), v[4 + i], s);
    }
    return s;
}

template <int NT, int R> struct qdot<HEARTH_DT_Q4_0, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int sub, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R];
        uint32_t q[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
#pragma unroll
            for (int i = 0; i < 4; i++) q[r][i] = ld32u(b[r] + 2 + 4 * i);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
#pragma unroll
            for (int r = 0; r < R; r++) {
                int s = dot_nibbles(q[r], v);
                s -= 8 * (int)ds.y;
                acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
            }
        }
    }
};

template <int NT, int R> struct qdot<HEARTH_DT_Q4_1, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int sub, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R], m[R];
        uint32_t q[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            m[r] = h2f(ld16(b[r] + 2));
#pragma unroll
            for (int i = 0; i < 4; i++) q[r][i] = ld32u(b[r] + 4 + 4 * i);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
#pragma unroll
            for (int r = 0; r < R; r++) {
                int s = dot_nibbles(q[r], v);
                acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
                acc[r][t] = fmaf(m[r], ds.z, acc[r][t]);
            }
        }
    }
};

template <int NT, int R> struct qdot<HEARTH_DT_Q8_0, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int sub, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
#pragma unroll
            for (int i = 0; i < 8; i++) q[r][i] = ld32u(b[r] + 2 + 4 * i);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
#pragma unroll
            for (int r = 0; r < R; r++) {
                int s = 0;
#pragma unroll
                for (int i = 0; i < 8; i++) s = __dp4a((int)q[r][i], v[i], s);
                acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
            }
        }
    }
};

/* acc plus the dot product of a Q4_K unit (sub-blocks 2j, 2j + 1: q, its 32
 * code bytes, low nibbles the first) with x's groups v0, v1 (ds0, ds1: their
 * (d, sum, ...)): integer sums scaled by sc, then the mins by m, in two fmaf
 * steps. */
__device__ __forceinline__ float mins_unit(const uint32_t *lo, const uint32_t *hi, const int *v0, const int *v1,
                                           float4 ds0, float4 ds1, const int *sc, const int *m, float d, float dmin,
                                           float acc) {
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        s0 = __dp4a((int)lo[i], v0[i], s0);
        s1 = __dp4a((int)hi[i], v1[i], s1);
    }
    int s = sc[0] * s0 + sc[1] * s1, mins = m[0] * (int)ds0.y + m[1] * (int)ds1.y;
    acc = fmaf(d * ds0.x, (float)s, acc);
    return fmaf(-(dmin * ds0.x), (float)mins, acc);
}
__device__ __forceinline__ float q4k_unit(const uint32_t *q, const int *v0, const int *v1, float4 ds0, float4 ds1,
                                          const int *sc, const int *m, float d, float dmin, float acc) {
    uint32_t lo[8], hi[8];
#pragma unroll
    for (int i = 0; i < 8; i++) lo[i] = q[i] & 0x0F0F0F0Fu, hi[i] = (q[i] >> 4) & 0x0F0F0F0Fu;
    return mins_unit(lo, hi, v0, v1, ds0, ds1, sc, m, d, dmin, acc);
}

/* The units of R rows (q[r]: their code words) against x's groups g0, g0 + 1
 * of each of its NT rows: the staged (qdot) and split (fmt_split) kernels'
 * shared inner loop. */
template <int NT, int R>
__device__ __forceinline__ void q4k_units(const uint32_t *const *q, const int (*sc)[2], const int (*m)[2],
                                          const float *d, const float *dmin, int g0, const xq8 &x,
                                          float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int v0[8], v1[8];
        float4 ds0, ds1;
        x_group(x, t, g0, v0, &ds0);
        x_group(x, t, g0 + 1, v1, &ds1);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][t] = q4k_unit(q[r], v0, v1, ds0, ds1, sc[r], m[r], d[r], dmin[r], acc[r][t]);
    }
}

/* Q4_K unit j (0..3): sub-blocks 2j (low nibbles of qs[32j..32j+32)) and 2j+1
 * (high nibbles). */
template <int NT, int R> struct qdot<HEARTH_DT_Q4_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int j, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            dmin[r] = h2f(ld16(b[r] + 2));
            q4k_scale_min(b[r] + 4, 2 * j, &sc[r][0], &m[r][0]);
            q4k_scale_min(b[r] + 4, 2 * j + 1, &sc[r][1], &m[r][1]);
#pragma unroll
            for (int i = 0; i < 8; i++) q[r][i] = ld32u(b[r] + 16 + 32 * j + 4 * i);
        }
        const uint32_t *qp[R];
#pragma unroll
        for (int r = 0; r < R; r++) qp[r] = q[r];
        q4k_units<NT, R>(qp, sc, m, d, dmin, gb * 8 + 2 * j, x, acc);
    }
};

/* acc plus the dot product of a Q6_K unit (groups A and B: va, vb, their 32
 * codes minus 32, 4 a word) with x's groups xa, xb (dx: x's scale): sums of
 * 16 scaled by sc (A[0..16), A[16..32), B[0..16), B[16..32)), then d * dx in
 * one fmaf step. */
__device__ __forceinline__ float q6k_unit(const int *va, const int *vb, const int *xa, const int *xb, const int *sc,
                                          float d, float dx, float acc) {
    int a0 = 0, a1 = 0, b0 = 0, b1 = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        a0 = __dp4a(va[i], xa[i], a0);
        a1 = __dp4a(va[4 + i], xa[4 + i], a1);
        b0 = __dp4a(vb[i], xb[i], b0);
        b1 = __dp4a(vb[4 + i], xb[4 + i], b1);
    }
    int s = sc[0] * a0 + sc[1] * a1 + sc[2] * b0 + sc[3] * b1;
    return fmaf(d * dx, (float)s, acc);
}

/* The units of R rows against x's groups gA, gB (Q6_K: gA + 2) of each of
 * its NT rows: the staged (qdot) and split (fmt_split) kernels' shared inner
 * loop. */
template <int NT, int R>
__device__ __forceinline__ void q6k_units(const int (*va)[8], const int (*vb)[8], const int (*sc)[4], const float *d,
                                          int gA, int gB, const xq8 &x, float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int xa[8], xb[8];
        float4 dsa, dsb;
        x_group(x, t, gA, xa, &dsa);
        x_group(x, t, gB, xb, &dsb);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][t] = q6k_unit(va[r], vb[r], xa, xb, sc[r], d[r], dsa.x, acc[r][t]);
    }
}

/* Q6_K unit u (0..3): half n = u/2 of the block, groups k = u%2 and k + 2
 * (low / high nibbles of the same 32 ql bytes, the same 32 qh bytes). */
template <int NT, int R> struct qdot<HEARTH_DT_Q6_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        const int n = u >> 1, kk = u & 1;
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r] + 208));
            const uint8_t *ql = b[r] + 64 * n + 32 * kk, *qh = b[r] + 128 + 32 * n;
            const int8_t *scales = (const int8_t *)(b[r] + 192 + 8 * n);
            sc[r][0] = scales[2 * kk];
            sc[r][1] = scales[2 * kk + 1];
            sc[r][2] = scales[2 * kk + 4];
            sc[r][3] = scales[2 * kk + 5];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                uint32_t L = ld32u(ql + 4 * i), H = ld32u(qh + 4 * i);
                va[r][i] = (int)q6k_s8(L, (H >> (2 * kk)) << 4);
                vb[r][i] = (int)q6k_s8(L >> 4, H >> (2 * kk));
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, gb * 8 + 4 * n + kk, gb * 8 + 4 * n + kk + 2, x, acc);
    }
};

/* ---- the types read by the staged and direct kernels only ---------------
 * Their codes are made int8 words for dp4a; the integer sums and the
 * scaling steps are the CPU's (ops/cpu/matmul_scalar.c), the K-quants cut
 * in units of 64 elements as Q4_K and Q6_K are. */

/* 32-element blocks as 8 words of codes q (elements 4i.. in word i): acc +=
 * fmaf(d * dx, dot - OFF * sum of x), then (MIN) fmaf(m, x's s). */
template <int NT, int R, int OFF, bool MIN>
__device__ __forceinline__ void q32_words(const uint32_t (*q)[8], const float *d, const float *m, int gb, const xq8 &x,
                                          float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int v[8];
        float4 ds;
        x_group(x, t, gb, v, &ds);
#pragma unroll
        for (int r = 0; r < R; r++) {
            int s = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) s = __dp4a((int)q[r][i], v[i], s);
            if (OFF) s -= OFF * (int)ds.y;
            acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
            if (MIN) acc[r][t] = fmaf(m[r], ds.z, acc[r][t]);
        }
    }
}

/* q5_0 (d, qh, qs) and q5_1 (d, m, qh, qs): codes 0..31, q5_0's less 16 through its x sum */
template <int QT, int NT, int R> struct qdot_q5 {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int gb, const xq8 &x, float (*acc)[NT]) {
        constexpr int Q1 = QT == HEARTH_DT_Q5_1, QH = 2 + 2 * Q1;
        float d[R], m[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            m[r] = Q1 ? h2f(ld16(b[r] + 2)) : 0.0f;
            const uint32_t qh = ld32u(b[r] + QH);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint32_t nib = ld32u(b[r] + QH + 4 + 4 * i);
                q[r][i] = q5_codes4(nib & 0x0F0F0F0Fu, qh >> (4 * i));
                q[r][4 + i] = q5_codes4((nib >> 4) & 0x0F0F0F0Fu, qh >> (16 + 4 * i));
            }
        }
        q32_words<NT, R, Q1 ? 0 : 16, Q1>(q, d, m, gb, x, acc);
    }
};
template <int NT, int R> struct qdot<HEARTH_DT_Q5_0, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int, int gb, const xq8 &x, float (*acc)[NT]) {
        qdot_q5<HEARTH_DT_Q5_0, NT, R>::run(b, gb, x, acc);
    }
};
template <int NT, int R> struct qdot<HEARTH_DT_Q5_1, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int, int gb, const xq8 &x, float (*acc)[NT]) {
        qdot_q5<HEARTH_DT_Q5_1, NT, R>::run(b, gb, x, acc);
    }
};

/* iq4_nl (d, qs): the codebook's values as the codes */
template <int NT, int R> struct qdot<HEARTH_DT_IQ4_NL, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int, int gb, const xq8 &x, float (*acc)[NT]) {
        float d[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                iq4_values8(ld32u(b[r] + 2 + 4 * i), &q[r][i], &q[r][4 + i]);
            }
        }
        q32_words<NT, R, 0, false>(q, d, nullptr, gb, x, acc);
    }
};

/* q5_K unit j: Q4_K's unit with bits 2j, 2j + 1 of each qh byte as the codes' fifth bits */
template <int NT, int R> struct qdot<HEARTH_DT_Q5_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int j, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
        uint32_t lo[R][8], hi[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            dmin[r] = h2f(ld16(b[r] + 2));
            q4k_scale_min(b[r] + 4, 2 * j, &sc[r][0], &m[r][0]);
            q4k_scale_min(b[r] + 4, 2 * j + 1, &sc[r][1], &m[r][1]);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t q = ld32u(b[r] + 48 + 32 * j + 4 * i), h = ld32u(b[r] + 16 + 4 * i) >> (2 * j);
                lo[r][i] = (q & 0x0F0F0F0Fu) | ((h & 0x01010101u) << 4);
                hi[r][i] = ((q >> 4) & 0x0F0F0F0Fu) | (((h >> 1) & 0x01010101u) << 4);
            }
        }
        const int g0 = gb * 8 + 2 * j;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v0[8], v1[8];
            float4 ds0, ds1;
            x_group(x, t, g0, v0, &ds0);
            x_group(x, t, g0 + 1, v1, &ds1);
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r][t] = mins_unit(lo[r], hi[r], v0, v1, ds0, ds1, sc[r], m[r], d[r], dmin[r], acc[r][t]);
        }
    }
};

/* q2_K / q3_K unit u: half h = u / 2, element groups j = 2 (u % 2) (A) and j + 1 (B), their codes bits 2j of
 * qs[32 h + l] (A[l], B[l]), four sub-blocks of 16 (A[0..16), A[16..32), B[0..16), B[16..32)) */
template <int NT, int R> struct qdot<HEARTH_DT_Q3_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        const int h = u >> 1, j = 2 * (u & 1);
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r] + 108));
#pragma unroll
            for (int k = 0; k < 4; k++) sc[r][k] = q3k_scale(b[r] + 96, 8 * h + j * 2 + k);
#pragma unroll
            for (int i = 0; i < 8; i++) { /* code | hbit << 2, less 4, as s8 (q6k_s8's trick) */
                const uint32_t q = ld32u(b[r] + 32 + 32 * h + 4 * i) >> (2 * j), hm = ld32u(b[r] + 4 * i) >> (4 * h + j);
                va[r][i] = (int)((((q & 0x03030303u) | ((hm & 0x01010101u) << 2)) + 0x7C7C7C7Cu) ^ 0x80808080u);
                vb[r][i] = (int)(((((q >> 2) & 0x03030303u) | (((hm >> 1) & 0x01010101u) << 2)) + 0x7C7C7C7Cu) ^
                                 0x80808080u);
            }
        }
        const int gA = gb * 8 + 4 * h + j;
        q6k_units<NT, R>(va, vb, sc, d, gA, gA + 1, x, acc);
    }
};

template <int NT, int R> struct qdot<HEARTH_DT_Q2_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        const int h = u >> 1, j = 2 * (u & 1);
        float d[R], dmin[R];
        int sc[R][4], m[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r] + 80));
            dmin[r] = h2f(ld16(b[r] + 82));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int s = b[r][8 * h + j * 2 + k];
                sc[r][k] = s & 15;
                m[r][k] = s >> 4;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t q = ld32u(b[r] + 16 + 32 * h + 4 * i) >> (2 * j);
                va[r][i] = (int)(q & 0x03030303u);
                vb[r][i] = (int)((q >> 2) & 0x03030303u);
            }
        }
        const int gA = gb * 8 + 4 * h + j;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int xa[8], xb[8], bs[4] = {0, 0, 0, 0};
            float4 dsa, dsb;
            x_group(x, t, gA, xa, &dsa);
            x_group(x, t, gA + 1, xb, &dsb);
#pragma unroll
            for (int i = 0; i < 4; i++) { /* x's sums of 16 */
                bs[0] = __dp4a(xa[i], 0x01010101, bs[0]);
                bs[1] = __dp4a(xa[4 + i], 0x01010101, bs[1]);
                bs[2] = __dp4a(xb[i], 0x01010101, bs[2]);
                bs[3] = __dp4a(xb[4 + i], 0x01010101, bs[3]);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                int a0 = 0, a1 = 0, b0 = 0, b1 = 0;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    a0 = __dp4a(va[r][i], xa[i], a0);
                    a1 = __dp4a(va[r][4 + i], xa[4 + i], a1);
                    b0 = __dp4a(vb[r][i], xb[i], b0);
                    b1 = __dp4a(vb[r][4 + i], xb[4 + i], b1);
                }
                const int s = sc[r][0] * a0 + sc[r][1] * a1 + sc[r][2] * b0 + sc[r][3] * b1;
                const int mins = m[r][0] * bs[0] + m[r][1] * bs[1] + m[r][2] * bs[2] + m[r][3] * bs[3];
                acc[r][t] = fmaf(d[r] * dsa.x, (float)s, acc[r][t]);
                acc[r][t] = fmaf(-(dmin[r] * dsa.x), (float)mins, acc[r][t]);
            }
        }
    }
};

/* iq4_xs unit u: sub-blocks 2u and 2u + 1 (q4_0's nibble order, 16 bytes each), their scales less 32 */
template <int NT, int R> struct qdot<HEARTH_DT_IQ4_XS, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            sc[r][0] = sc[r][1] = iq4xs_scale(b[r], 2 * u);
            sc[r][2] = sc[r][3] = iq4xs_scale(b[r], 2 * u + 1);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                iq4_values8(ld32u(b[r] + 8 + 32 * u + 4 * i), (uint32_t *)&va[r][i], (uint32_t *)&va[r][4 + i]);
                iq4_values8(ld32u(b[r] + 24 + 32 * u + 4 * i), (uint32_t *)&vb[r][i], (uint32_t *)&vb[r][4 + i]);
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, gb * 8 + 2 * u, gb * 8 + 2 * u + 1, x, acc);
    }
};

/* Two consecutive blocks of a row in shared memory (gb even, so they start
 * 4-byte aligned: 36 bytes for Q4_0, 68 for Q8_0) read as aligned 32-bit
 * words, the codes of the block at offset 2 realigned with byte permutes:
 * a quarter of the shared-memory load instructions of one block at a time
 * through 16-bit loads. Same integer sums and scaling steps as qdot. */
template <int QT> struct pair_fmt; /* NQW: 32-bit words of codes a block; dot: its integer sum */
template <> struct pair_fmt<HEARTH_DT_Q4_0> {
    enum { NQW = 4 };
    static __device__ __forceinline__ int dot(const uint32_t *q, const int *v, const float4 &ds) {
        return dot_nibbles(q, v) - 8 * (int)ds.y;
    }
};
template <> struct pair_fmt<HEARTH_DT_Q8_0> {
    enum { NQW = 8 };
    static __device__ __forceinline__ int dot(const uint32_t *q, const int *v, const float4 &) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = __dp4a((int)q[i], v[i], s);
        return s;
    }
};

template <int QT, int NT, int R> struct qdot_pair {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int gb, const xq8 &x, float (*acc)[NT]) {
        constexpr int N = pair_fmt<QT>::NQW;
        float d0[R], d1[R];
        uint32_t q0[R][N], q1[R][N];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t *w = (const uint32_t *)b[r];
            uint32_t v[2 * N + 1];
#pragma unroll
            for (int i = 0; i < 2 * N + 1; i++) v[i] = w[i];
            /* block 0: d = bytes 0-1, codes from byte 2; block 1: d = the high half of word N, codes from word N + 1 */
            d0[r] = h2f((uint16_t)(v[0] & 0xffffu));
#pragma unroll
            for (int i = 0; i < N; i++) q0[r][i] = __byte_perm(v[i], v[i + 1], 0x5432);
            d1[r] = h2f((uint16_t)(v[N] >> 16));
#pragma unroll
            for (int i = 0; i < N; i++) q1[r][i] = v[N + 1 + i];
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int xa[8], xb[8];
            float4 da, db;
            x_group(x, t, gb, xa, &da);
            x_group(x, t, gb + 1, xb, &db);
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[r][t] = fmaf(d0[r] * da.x, (float)pair_fmt<QT>::dot(q0[r], xa, da), acc[r][t]);
                acc[r][t] = fmaf(d1[r] * db.x, (float)pair_fmt<QT>::dot(q1[r], xb, db), acc[r][t]);
            }
        }
    }
};

template <int QT> struct has_pair { enum { value = 0 }; };
template <> struct has_pair<HEARTH_DT_Q4_0> { enum { value = 1 }; };
template <> struct has_pair<HEARTH_DT_Q8_0> { enum { value = 1 }; };

/* Split rows (HEARTH_LAYOUT_SPLIT), streamed like float rows. Q4_0 / Q8_0:
 * a chunk is one Q4_0 block's codes or half a Q8_0 block's, its f16 scale
 * read from the row's scales (at byte 16 * nch). Same integer sums and
 * scaling steps as qdot; a Q8_0 block's halves are scaled one at a time. */
__device__ __forceinline__ uint32_t ld_nc16(const uint8_t *p) {
    unsigned short v;
    asm("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

template <int QT> struct fmt_split {
    enum { QB = split_fmt<QT>::QB, E = 32 * 16 / QB }; /* elements a chunk */
    enum { U = 4 };                                     /* as fmt_float */
    enum { WAVE = 1 };                                  /* launch_stream */
    static_assert(QB == 16 || QB == 32, "Q4_0 or Q8_0");
    struct W {
        uint4 q;
        uint32_t d; /* f16 bits */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        return {ld_stream16(row + (size_t)c * 16), ld_nc16(row + (size_t)nch * 16 + 2 * (c * 16 / QB))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float d[R];
#pragma unroll
        for (int r = 0; r < R; r++) d[r] = h2f((uint16_t)w[r].d);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if constexpr (QT == HEARTH_DT_Q4_0) {
                int v[8];
                float4 ds;
                x_group(x, t, c, v, &ds);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int s = dot_nibbles((const uint32_t *)&w[r].q, v) - 8 * (int)ds.y;
                    acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
                }
            } else {
                int4 a = *(const int4 *)(x.qs + (size_t)t * x.K + (size_t)c * 16);
                float dx = x.ds[(size_t)t * (x.K / QK) + (c >> 1)].x;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int s = __dp4a((int)w[r].q.x, a.x, 0);
                    s = __dp4a((int)w[r].q.y, a.y, s);
                    s = __dp4a((int)w[r].q.z, a.z, s);
                    s = __dp4a((int)w[r].q.w, a.w, s);
                    acc[r][t] = fmaf(d[r] * dx, (float)s, acc[r][t]);
                }
            }
        }
    }
};

/* Split Q4_K rows: chunk c is unit c % 4 (sub-blocks 2j, 2j + 1: 32 code
 * bytes) of block c / 4, so that a lane scales whole units as qdot does,
 * with the same integer sums and fmaf steps (q4k_unit); two 16-byte loads,
 * U = 2 chunks in flight a row (the bytes of four 16-byte chunks). The two
 * loads share 32-byte sectors, so they go through L1, where the second finds
 * what the first brought (bench_gemv q4_K output 128256x4096: 77.7 us; 80.4
 * with L1::no_allocate; 91.8 the staged kernel; 16-byte chunks, half a unit
 * a lane with the halves added across lanes, 127). The block's 16-byte head
 * is at byte 32 * nch + 16 * (c / 4). A lane's chunks are 32 apart, so a
 * block's 4 units sit in 4 neighbouring lanes: each loads one word of the
 * head (word c % 4) and takes the other three from its neighbours (a whole
 * head a lane would hold 3 more registers a load in flight). */
template <> struct fmt_split<HEARTH_DT_Q4_K> {
    enum { E = 64, U = 2 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q[2];
        uint32_t h; /* word c % 4 of the head: d | dmin << 16, scales[0..3], [4..7], [8..11] */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint8_t *q = row + (size_t)c * 32, *head = row + (size_t)nch * 32 + (size_t)(c >> 2) * 16;
        return {{__ldg((const uint4 *)q), __ldg((const uint4 *)(q + 16))}, __ldg((const uint32_t *)head + (c & 3))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int lane = threadIdx.x & 31, blk = lane & ~3; /* lanes blk..blk+3: this block's units */
        const unsigned blk_mask = 0xFu << blk;
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
#pragma unroll
        for (int r = 0; r < R; r++) {
            uint32_t h[4];
#pragma unroll
            for (int i = 0; i < 4; i++) h[i] = __shfl_sync(blk_mask, w[r].h, blk | i);
            d[r] = h2f((uint16_t)(h[0] & 0xffffu));
            dmin[r] = h2f((uint16_t)(h[0] >> 16));
            q4k_unit_scales(h[1], h[2], h[3], c & 3, sc[r], m[r]);
        }
        const uint32_t *qp[R];
#pragma unroll
        for (int r = 0; r < R; r++) qp[r] = (const uint32_t *)w[r].q;
        q4k_units<NT, R>(qp, sc, m, d, dmin, 2 * c, x, acc);
    }
};

/* Split Q5_K rows: Q4_K's chunks, units and head words, and the block's 32
 * qh bytes (at the start of its 160 code bytes; the block's four lanes load
 * the same two sectors, through L1), bits 2j and 2j + 1 of each the fifth
 * bits of unit j's codes; the same integer sums and fmaf steps as qdot's
 * (mins_unit). U = 1: 64 bytes of loads in flight a row, as Q4_K's U = 2. */
template <> struct fmt_split<HEARTH_DT_Q5_K> {
    enum { QB = split_fmt<HEARTH_DT_Q5_K>::QB };
    enum { E = 64, U = 1 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q[2], qh[2];
        uint32_t h; /* word c % 4 of the head, as Q4_K's */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint4 *b = (const uint4 *)(row + (size_t)(c >> 2) * QB); /* the block's codes: qh, then qs */
        const uint8_t *head = row + (size_t)nch / 4 * QB + (size_t)(c >> 2) * 16;
        return {{__ldg(b + 2 + 2 * (c & 3)), __ldg(b + 3 + 2 * (c & 3))}, {__ldg(b), __ldg(b + 1)},
                __ldg((const uint32_t *)head + (c & 3))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int lane = threadIdx.x & 31, blk = lane & ~3, j = c & 3;
        const unsigned blk_mask = 0xFu << blk;
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
        uint32_t lo[R][8], hi[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            uint32_t h[4];
#pragma unroll
            for (int i = 0; i < 4; i++) h[i] = __shfl_sync(blk_mask, w[r].h, blk | i);
            d[r] = h2f((uint16_t)(h[0] & 0xffffu));
            dmin[r] = h2f((uint16_t)(h[0] >> 16));
            q4k_unit_scales(h[1], h[2], h[3], j, sc[r], m[r]);
            const uint32_t *q = (const uint32_t *)w[r].q, *qh = (const uint32_t *)w[r].qh;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t hb = qh[i] >> (2 * j);
                lo[r][i] = (q[i] & 0x0F0F0F0Fu) | ((hb & 0x01010101u) << 4);
                hi[r][i] = ((q[i] >> 4) & 0x0F0F0F0Fu) | (((hb >> 1) & 0x01010101u) << 4);
            }
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v0[8], v1[8];
            float4 ds0, ds1;
            x_group(x, t, 2 * c, v0, &ds0);
            x_group(x, t, 2 * c + 1, v1, &ds1);
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r][t] = mins_unit(lo[r], hi[r], v0, v1, ds0, ds1, sc[r], m[r], d[r], dmin[r], acc[r][t]);
        }
    }
};

/* Split IQ4_XS rows: chunk c is unit c % 4 (sub-blocks 2j, 2j + 1: 32 code
 * bytes) of block c / 4, as Q4_K's; a lane loads its block's whole 8-byte
 * head (d, scales_h, scales_l) at byte 32 * nch + 8 * (c / 4). The same
 * integer sums and fmaf step as qdot's (q6k_units). */
template <> struct fmt_split<HEARTH_DT_IQ4_XS> {
    enum { E = 64, U = 2 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q[2];
        uint2 h;
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint8_t *q = row + (size_t)c * 32, *head = row + (size_t)nch * 32 + (size_t)(c >> 2) * 8;
        return {{__ldg((const uint4 *)q), __ldg((const uint4 *)(q + 16))}, __ldg((const uint2 *)head)};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int j = c & 3;
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t sh = w[r].h.x >> (16 + 4 * j), sl = w[r].h.y >> (8 * j);
            d[r] = h2f((uint16_t)(w[r].h.x & 0xffffu));
            sc[r][0] = sc[r][1] = (int)((sl & 15) | (sh & 3) << 4) - 32;
            sc[r][2] = sc[r][3] = (int)(((sl >> 4) & 15) | ((sh >> 2) & 3) << 4) - 32;
            const uint32_t *q = (const uint32_t *)w[r].q;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                iq4_values8(q[i], (uint32_t *)&va[r][i], (uint32_t *)&va[r][4 + i]);
                iq4_values8(q[4 + i], (uint32_t *)&vb[r][i], (uint32_t *)&vb[r][4 + i]);
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, 2 * c, 2 * c + 1, x, acc);
    }
};

/* Split Q6_K unit codes minus 32 (va: group A, vb: B, 4 a word) from its ql
 * words L and its words of top bits P (cuda_internal.cuh: byte i of P holds
 * the top bits of A[i], A[16 + i], B[i], B[16 + i] from bit 0 up; ql word
 * i < 4 holds elements 4i.., word 4 + i elements 16 + 4i..). */
__device__ __forceinline__ void q6k_split_codes(const uint32_t *L, const uint32_t *P, int *va, int *vb) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        va[i] = (int)q6k_s8(L[i], P[i] << 4);
        va[4 + i] = (int)q6k_s8(L[4 + i], P[i] << 2);
        vb[i] = (int)q6k_s8(L[i] >> 4, P[i]);
        vb[4 + i] = (int)q6k_s8(L[4 + i] >> 4, P[i] >> 2);
    }
}

/* Split Q6_K rows: chunk c is unit c % 4 of block c / 4 (qdot's unit: groups
 * A = 2 (c & ~1) + (c & 1) and A + 2 of the row), so that a lane scales
 * whole units as qdot does, with the same integer sums and fmaf step
 * (q6k_unit). A lane loads its unit's 32 ql bytes (two 16-byte loads that
 * share a 32-byte sector, through L1 as Q4_K's), its 16 bytes of top bits
 * (a block's four units: 64 contiguous bytes), its word of scales (at byte
 * 48 * nch + 4c) and the block's d (after the nb * 16 bytes of scales).
 * U = 1: 98 registers at one row of x, two blocks a multiprocessor; U = 2
 * takes 170, one block, for the same bytes in flight (not yet measured). */
template <> struct fmt_split<HEARTH_DT_Q6_K> {
    enum { QB = split_fmt<HEARTH_DT_Q6_K>::QB };
    enum { E = 64, U = 1 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 ql[2], qh;
        uint32_t sc; /* int8 scales A[0..16), A[16..32), B[0..16), B[16..32) */
        uint32_t d;  /* f16 bits */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint4 *q = (const uint4 *)(row + (size_t)(c >> 2) * QB); /* the block's codes */
        const uint8_t *scales = row + (size_t)nch / 4 * QB, *ds = scales + (size_t)nch * 4;
        return {{__ldg(q + 2 * (c & 3)), __ldg(q + 2 * (c & 3) + 1)}, __ldg(q + 8 + (c & 3)),
                __ldg((const uint32_t *)scales + c), __ldg((const unsigned short *)ds + (c >> 2))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f((uint16_t)w[r].d);
#pragma unroll
            for (int k = 0; k < 4; k++) sc[r][k] = (int8_t)(w[r].sc >> (8 * k));
            q6k_split_codes((const uint32_t *)w[r].ql, (const uint32_t *)&w[r].qh, va[r], vb[r]);
        }
        q6k_units<NT, R>(va, vb, sc, d, 2 * (c & ~1) + (c & 1), 2 * (c & ~1) + (c & 1) + 2, x, acc);
    }
};

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
    case HEARTH_DT_IQ4_NL: case HEARTH_DT_Q5_K: case HEARTH_DT_Q3_K: case HEARTH_DT_Q2_K: case HEARTH_DT_IQ4_XS: return 1;
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
        return (set->split && (t == HEARTH_DT_Q4_0 || t == HEARTH_DT_Q8_0 || t == HEARTH_DT_Q4_K ||
                               t == HEARTH_DT_Q6_K || t == HEARTH_DT_Q5_K || t == HEARTH_DT_IQ4_XS)) ||
               quant_staged(set, row_bytes);
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
    auto unsplit = [&](hearth_dtype t, int pairs) {
        switch (t) {
        case HEARTH_DT_Q4_0: return split_ks<HEARTH_DT_Q4_0>(L, pairs, K) == 1;
        case HEARTH_DT_Q8_0: return split_ks<HEARTH_DT_Q8_0>(L, pairs, K) == 1;
        case HEARTH_DT_Q4_K: return split_ks<HEARTH_DT_Q4_K>(L, pairs, K) == 1;
        case HEARTH_DT_Q6_K: return split_ks<HEARTH_DT_Q6_K>(L, pairs, K) == 1;
        default: return false;
        }
    };
    if (!unsplit(ta, pa) || !unsplit(tb, pb)) return 0;
    /* the mixes of llama.cpp's files: Q4_K_M / Q5_K_M's Q6_K attn_v beside Q4_K, Q4_0 beside Q8_0 */
    if (ta == HEARTH_DT_Q6_K && tb == HEARTH_DT_Q4_K)
        launch_two<HEARTH_DT_Q6_K, HEARTH_DT_Q4_K>(L, a, rba, b, rbb, xp, K, pa, pb);
    else if (ta == HEARTH_DT_Q4_K && tb == HEARTH_DT_Q6_K)
        launch_two<HEARTH_DT_Q4_K, HEARTH_DT_Q6_K>(L, a, rba, b, rbb, xp, K, pa, pb);
    else if (ta == HEARTH_DT_Q8_0 && tb == HEARTH_DT_Q4_0)
        launch_two<HEARTH_DT_Q8_0, HEARTH_DT_Q4_0>(L, a, rba, b, rbb, xp, K, pa, pb);
    else if (ta == HEARTH_DT_Q4_0 && tb == HEARTH_DT_Q8_0)
        launch_two<HEARTH_DT_Q4_0, HEARTH_DT_Q8_0>(L, a, rba, b, rbb, xp, K, pa, pb);
    else
        return 0;
    return 1;
}
