/* mmv_tc.cu - the GEMV of 3..8 rows of x for bf16 / f16 weights (and of 8
 * rows for split Q4_0 / Q8_0 rows, below) on tensor cores: y[T][N] =
 * x[T][K] @ W^T, each weight byte read once.
 *
 * At T = 8 the streamed kernel (mmv.cu) spends 8 FMAs, and the unpacking,
 * on every weight element: it ran at 44% of the copy bandwidth (bench_gemv,
 * session 3), where the same bytes at T = 1 run near it. Here one
 * mma.m16n8k16 takes 16 weight rows (A) by the T <= 8 rows of x (B, its 8
 * columns; columns T..7 are zero and never stored) over 16 elements of K.
 *
 * A warp owns a tile of 16 logical rows (swiglu: 8 gate rows as A rows 0..7
 * and the same 8 up rows as A rows 8..15, so a lane holds both values of its
 * outputs) over one of KS slices of K. Lane (g, c) = (lane / 4, lane % 4)
 * streams 16 bytes of rows g and g + 8 at element 32q + 8c of each 32-element
 * group q of its slice (the four lanes of a row read its 64 bytes), and 16
 * bytes of x's row g at the same place. K is summed in a permuted order: the
 * mma's k index 2c + {0, 1} is element 8c + 4s + {0, 1} of the group and
 * 2c + 8 + {0, 1} is 8c + 4s + {2, 3} in k-step s = 0, 1, the same for A and
 * B, so each 32-bit word of a load is one register of a fragment.
 *
 * The KS slices (group q goes to slice q % KS) are the warps of one block,
 * added in slice order through shared memory. KS follows K alone, so a row's
 * sum is the same whichever matrices share the launch (q, k, v fused or
 * not). Products are exact in f32 (bf16 / f16 times bf16 / f16), the sums
 * f32 in the tensor core's order: not the streamed kernel's bits, within the
 * T <= 8 tolerance of the matmul tests. */
#include "ops/cuda/mmv.cuh"

#include <stdlib.h>
#include <type_traits>

namespace {

constexpr int TC_WPB = 8; /* warps a block */
constexpr int TC_U = 4;   /* groups in flight a lane */

template <int WT>
__device__ __forceinline__ void mma16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    if constexpr (WT == HEARTH_DT_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The end of a tile: the KS slices' sums added in slice order (the block's
 * warps; every warp calls it), then the stores of acc = C[g][2c],
 * C[g][2c + 1], C[g + 8][2c], C[g + 8][2c + 1] (columns are rows of x). */
template <int KS>
__device__ __forceinline__ void tc_finish(const mmv_set &set, float4 (*red)[32], float *acc, int w, int ks, int lane,
                                          bool live, int r0, int r1, int N, int NT) {
    if constexpr (KS > 1) {
        red[w][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        __syncthreads();
        if (ks != 0) return;
#pragma unroll
        for (int k = 1; k < KS; k++) {
            const float4 v = red[w + k][lane];
            acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
        }
    }
    if (!live) return;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int t = 2 * (lane & 3) + j;
        if (t >= NT) break;
        if (set.swiglu) {
            if (r0 < N) swiglu_store(set, r0, t, acc[j], acc[2 + j]);
        } else {
            if (r0 < N) set_store(set, r0, t, acc[j]);
            if (r1 < N) set_store(set, r1, t, acc[2 + j]);
        }
    }
}

template <int WT, int NT, int KS>
__global__ void __launch_bounds__(TC_WPB * 32) mmv_tc_kernel(mmv_set set, size_t row_bytes,
                                                             const uint8_t *__restrict__ xp, int K) {
    static_assert(TC_WPB % KS == 0, "KS divides the warps of a block");
    __shared__ float4 red[KS > 1 ? TC_WPB : 1][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, ks = w % KS;
    const int g = lane >> 2, c = lane & 3;
    const int N = set_rows(set), ntiles = set.swiglu ? (N + 7) / 8 : (N + 15) / 16;
    const int tile = blockIdx.x * (TC_WPB / KS) + w / KS;
    const bool live = tile < ntiles;
    /* A rows g and g + 8: their logical rows (clamped for the loads) */
    const int r0 = set.swiglu ? 8 * tile + g : 16 * tile + g, r1 = set.swiglu ? r0 : r0 + 8;
    const uint8_t *wa = set_row(set, min(r0, N - 1), 0, row_bytes) + 16 * c;
    const uint8_t *wb = set_row(set, min(r1, N - 1), 1, row_bytes) + 16 * c; /* ph 1: the up row (swiglu) */
    const uint8_t *xr = xp + (size_t)(g < NT ? g : 0) * K * 2 + 16 * c;

    const int nq = K / 32;                                /* 64-byte groups a row */
    const int mine = live && ks < nq ? (nq - 1 - ks) / KS + 1 : 0; /* groups ks, ks + KS, ... */
    const int rounds = (mine + TC_U - 1) / TC_U;
    uint4 na[TC_U], nb[TC_U];
    auto load = [&](int rd) {
#pragma unroll
        for (int u = 0; u < TC_U; u++) {
            const int i = rd * TC_U + u;
            const size_t off = (size_t)(ks + KS * i) * 64;
            na[u] = i < mine ? ld_stream16(wa + off) : uint4{};
            nb[u] = i < mine ? ld_stream16(wb + off) : uint4{};
        }
    };
    if (rounds > 0) load(0);
    pdl_wait();

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int rd = 0; rd < rounds; rd++) {
        uint4 ca[TC_U], cb[TC_U];
#pragma unroll
        for (int u = 0; u < TC_U; u++) ca[u] = na[u], cb[u] = nb[u];
        if (rd + 1 < rounds) load(rd + 1);
#pragma unroll
        for (int u = 0; u < TC_U; u++) {
            const int i = rd * TC_U + u;
            if (i >= mine) break;
            const uint4 xv = g < NT ? __ldg((const uint4 *)(xr + (size_t)(ks + KS * i) * 64)) : uint4{};
            mma16816<WT>(acc, ca[u].x, cb[u].x, ca[u].y, cb[u].y, xv.x, xv.y);
            mma16816<WT>(acc, ca[u].z, cb[u].z, ca[u].w, cb[u].w, xv.z, xv.w);
        }
    }
    pdl_launch();
    tc_finish<KS>(set, red, acc, w, ks, lane, live, r0, r1, N, NT);
}

/* ---- Q4_0 / Q8_0 split rows, x in q8 ------------------------------------
 *
 * The same tiles over 32-element blocks, the KS slices contiguous ranges of
 * blocks, one mma.m16n8k32 (s8) a block: lane (g, c) gives A the block's elements 4c..4c+3 and 16+4c..19+4c
 * of rows g and g + 8 (Q4_0: the nibbles of code bytes 4c..4c+3, 0..15 as
 * stored; Q8_0: bytes 8c..8c+7 of the codes, k permuted as above) and B the
 * same elements of x's row g. The int32 sums are the streamed kernel's
 * integers (Q4_0: less 8 times the sum of x's block), scaled by the same
 * fmaf(d_w * d_x, s) a block (Q8_0: a block, where the streamed kernel
 * scales each half).
 *
 * A first version, far from the bandwidth: the 8B shape's matmuls of a token at
 * T = 8 run at 19% (Q4_0) and 39% (Q8_0) of copy, against the streamed
 * kernel's 17.5% and 31% (bench_gemv, s10-run5); at T = 4 it is slower than
 * the streamed kernel, so it runs at T = 8 only. Its loads are 4 bytes a
 * lane a row (the quad of a row shares a block), where the float kernel's
 * are 16: the next version stages the codes through shared memory with
 * 16-byte cp.async. */
constexpr int TCQ_U = 8; /* blocks in flight a lane */

__device__ __forceinline__ void mma_s8(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int QT, int NT, int KS>
__global__ void __launch_bounds__(TC_WPB * 32) mmv_tcq_kernel(mmv_set set, size_t row_bytes,
                                                              const int8_t *__restrict__ xq,
                                                              const float4 *__restrict__ xds, int K) {
    static_assert(QT == HEARTH_DT_Q4_0 || QT == HEARTH_DT_Q8_0, "Q4_0 or Q8_0");
    constexpr int QB = split_fmt<QT>::QB, LB = QB / 4; /* code bytes a block; a lane's of them */
    __shared__ float4 red[KS > 1 ? TC_WPB : 1][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, ks = w % KS;
    const int g = lane >> 2, c = lane & 3;
    const int N = set_rows(set), ntiles = set.swiglu ? (N + 7) / 8 : (N + 15) / 16;
    const int tile = blockIdx.x * (TC_WPB / KS) + w / KS;
    const bool live = tile < ntiles;
    const int r0 = set.swiglu ? 8 * tile + g : 16 * tile + g, r1 = set.swiglu ? r0 : r0 + 8;
    const int nb = K / 32;
    const uint8_t *wa = set_row(set, min(r0, N - 1), 0, row_bytes), *wb = set_row(set, min(r1, N - 1), 1, row_bytes);
    const uint8_t *ha = wa + (size_t)nb * QB, *hb = wb + (size_t)nb * QB; /* the blocks' f16 d */
    const int8_t *xr = xq + (size_t)(g < NT ? g : 0) * K + (QT == HEARTH_DT_Q4_0 ? 4 : 8) * c;
    const int t0 = 2 * c < NT ? 2 * c : 0, t1 = 2 * c + 1 < NT ? 2 * c + 1 : 0; /* this lane's columns */

    /* slice ks: blocks [b0, b0 + mine), so that a lane's 4-byte loads of
     * consecutive blocks share 32-byte sectors (through L1) */
    const int per = (nb + KS - 1) / KS, b0 = ks * per;
    const int mine = live && b0 < nb ? min(per, nb - b0) : 0;
    const int rounds = (mine + TCQ_U - 1) / TCQ_U;
    typedef typename std::conditional<LB == 4, uint32_t, uint2>::type CW;
    CW na[TCQ_U], nbw[TCQ_U];
    uint16_t nda[TCQ_U], ndb[TCQ_U];
    auto load = [&](int rd) {
#pragma unroll
        for (int u = 0; u < TCQ_U; u++) {
            const int i = rd * TCQ_U + u, b = b0 + i;
            const bool ok = i < mine;
            na[u] = ok ? __ldg((const CW *)(wa + (size_t)b * QB + LB * c)) : CW{};
            nbw[u] = ok ? __ldg((const CW *)(wb + (size_t)b * QB + LB * c)) : CW{};
            nda[u] = ok ? __ldg((const unsigned short *)(ha + 2 * b)) : 0;
            ndb[u] = ok ? __ldg((const unsigned short *)(hb + 2 * b)) : 0;
        }
    };
    if (rounds > 0) load(0);
    pdl_wait();

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int rd = 0; rd < rounds; rd++) {
        CW ca[TCQ_U], cb[TCQ_U];
        uint16_t da[TCQ_U], db[TCQ_U];
#pragma unroll
        for (int u = 0; u < TCQ_U; u++) ca[u] = na[u], cb[u] = nbw[u], da[u] = nda[u], db[u] = ndb[u];
        if (rd + 1 < rounds) load(rd + 1);
#pragma unroll
        for (int u = 0; u < TCQ_U; u++) {
            const int i = rd * TCQ_U + u, b = b0 + i;
            if (i >= mine) break;
            int s[4] = {0, 0, 0, 0};
            uint32_t x0 = 0, x1 = 0;
            if constexpr (QT == HEARTH_DT_Q4_0) {
                if (g < NT) x0 = __ldg((const uint32_t *)(xr + 32 * b)), x1 = __ldg((const uint32_t *)(xr + 32 * b + 16));
                mma_s8(s, ca[u] & 0x0F0F0F0Fu, cb[u] & 0x0F0F0F0Fu, (ca[u] >> 4) & 0x0F0F0F0Fu,
                       (cb[u] >> 4) & 0x0F0F0F0Fu, x0, x1);
            } else {
                if (g < NT) {
                    const uint2 xv = __ldg((const uint2 *)(xr + 32 * b));
                    x0 = xv.x, x1 = xv.y;
                }
                mma_s8(s, ca[u].x, cb[u].x, ca[u].y, cb[u].y, x0, x1);
            }
            const float4 e0 = __ldg(xds + (size_t)t0 * nb + b), e1 = __ldg(xds + (size_t)t1 * nb + b);
            if constexpr (QT == HEARTH_DT_Q4_0) {
                s[0] -= 8 * (int)e0.y, s[1] -= 8 * (int)e1.y, s[2] -= 8 * (int)e0.y, s[3] -= 8 * (int)e1.y;
            }
            const float fa = h2f(da[u]), fb = h2f(db[u]);
            acc[0] = fmaf(fa * e0.x, (float)s[0], acc[0]);
            acc[1] = fmaf(fa * e1.x, (float)s[1], acc[1]);
            acc[2] = fmaf(fb * e0.x, (float)s[2], acc[2]);
            acc[3] = fmaf(fb * e1.x, (float)s[3], acc[3]);
        }
    }
    pdl_launch();
    tc_finish<KS>(set, red, acc, w, ks, lane, live, r0, r1, N, NT);
}

/* Slices of K: eight when each keeps two rounds of loads a lane (K >= 2048
 * for float rows, 4096 for quantized ones), fewer for short rows; a
 * function of K alone (see the top). */
int tc_slices(int K, int per_round) {
    int ks = 8;
    while (ks > 1 && K / 32 < ks * 2 * per_round) ks /= 2;
    return ks;
}

template <int WT, int NT>
void launch_tc(const cu_launch *L, const mmv_set *set, const void *xp, int K, size_t row_bytes) {
    const int N = set->swiglu ? set->n[0] : set->n[0] + set->n[1] + set->n[2];
    const int ntiles = set->swiglu ? cu_div_up(N, 8) : cu_div_up(N, 16);
    const int ks = WT == HEARTH_DT_Q4_0 || WT == HEARTH_DT_Q8_0 ? tc_slices(K, TCQ_U) : tc_slices(K, TC_U);
    const dim3 grid(cu_div_up(ntiles, TC_WPB / ks)), block(TC_WPB * 32);
    if constexpr (WT == HEARTH_DT_Q4_0 || WT == HEARTH_DT_Q8_0) {
        const int8_t *q = (const int8_t *)xp;
        const float4 *ds = (const float4 *)(q + (size_t)NT * K); /* xprep.cu's q8 layout */
        if (ks == 8) cu_launch_k(L, mmv_tcq_kernel<WT, NT, 8>, grid, block, 0, *set, row_bytes, q, ds, K);
        else if (ks == 4) cu_launch_k(L, mmv_tcq_kernel<WT, NT, 4>, grid, block, 0, *set, row_bytes, q, ds, K);
        else if (ks == 2) cu_launch_k(L, mmv_tcq_kernel<WT, NT, 2>, grid, block, 0, *set, row_bytes, q, ds, K);
        else cu_launch_k(L, mmv_tcq_kernel<WT, NT, 1>, grid, block, 0, *set, row_bytes, q, ds, K);
    } else {
        const uint8_t *x = (const uint8_t *)xp;
        if (ks == 8) cu_launch_k(L, mmv_tc_kernel<WT, NT, 8>, grid, block, 0, *set, row_bytes, x, K);
        else if (ks == 4) cu_launch_k(L, mmv_tc_kernel<WT, NT, 4>, grid, block, 0, *set, row_bytes, x, K);
        else if (ks == 2) cu_launch_k(L, mmv_tc_kernel<WT, NT, 2>, grid, block, 0, *set, row_bytes, x, K);
        else cu_launch_k(L, mmv_tc_kernel<WT, NT, 1>, grid, block, 0, *set, row_bytes, x, K);
    }
}

template <int WT>
void launch_tc_t(const cu_launch *L, const mmv_set *set, const void *xp, int T, int K, size_t row_bytes) {
    switch (T) {
    case 3: launch_tc<WT, 3>(L, set, xp, K, row_bytes); break;
    case 4: launch_tc<WT, 4>(L, set, xp, K, row_bytes); break;
    case 5: launch_tc<WT, 5>(L, set, xp, K, row_bytes); break;
    case 6: launch_tc<WT, 6>(L, set, xp, K, row_bytes); break;
    case 7: launch_tc<WT, 7>(L, set, xp, K, row_bytes); break;
    default: launch_tc<WT, 8>(L, set, xp, K, row_bytes); break;
    }
}

} // namespace

int cu_mmv_tc_fits(const mmv_set *set, hearth_dtype t, int T, int K, size_t row_bytes, const void *xp) {
    /* HEARTH_MMV_TC=0: the streamed kernel at every T; =1: tensor cores for float rows only (benchmarks) */
    static int off = -1, tc_quant = 1;
    if (off < 0) {
        const char *s = getenv("HEARTH_MMV_TC");
        off = s && atoi(s) == 0;
        tc_quant = !(s && atoi(s) == 1);
    }
    /* T = 2 stays streamed: even in bench_gemv (s10-run2: 5081 us a token's matmuls streamed, 5123 here) */
    if (off || T < 3 || T > 8) return 0;
    const int quant = t == HEARTH_DT_Q4_0 || t == HEARTH_DT_Q8_0;
    /* Q4_0 / Q8_0 at 8 rows only: below, the streamed kernel is faster (s10-run5, see the kernel) */
    if (!(t == HEARTH_DT_BF16 || t == HEARTH_DT_F16 || (quant && set->split && tc_quant && T == 8))) return 0;
    if (K % 32 || row_bytes % 16 || (uintptr_t)xp % 16) return 0;
    const int n = set->swiglu ? 2 : set->count;
    for (int m = 0; m < n; m++)
        if ((uintptr_t)set->w[m] % 16) return 0;
    return 1;
}

void cu_mmv_tc(const cu_launch *L, const mmv_set *set, const void *xp, int T, hearth_dtype t, int K,
               size_t row_bytes) {
    switch (t) {
    case HEARTH_DT_BF16: launch_tc_t<HEARTH_DT_BF16>(L, set, xp, T, K, row_bytes); break;
    case HEARTH_DT_F16: launch_tc_t<HEARTH_DT_F16>(L, set, xp, T, K, row_bytes); break;
    case HEARTH_DT_Q4_0: launch_tc_t<HEARTH_DT_Q4_0>(L, set, xp, T, K, row_bytes); break;
    case HEARTH_DT_Q8_0: launch_tc_t<HEARTH_DT_Q8_0>(L, set, xp, T, K, row_bytes); break;
    default: break;
    }
}
