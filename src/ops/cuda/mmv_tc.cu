/* mmv_tc.cu - the GEMV of 3..8 rows of x for bf16 / f16 weights (and for
 * split Q4_0 / Q8_0 / Q4_K / Q6_K rows, Q4_K from 2 rows: cu_mmv_tc_fits)
 * on tensor cores: y[T][N] =
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

#include <algorithm>
#include <stdlib.h>
#include <type_traits>

namespace {

constexpr int TC_WPB = 8; /* warps a block */
constexpr int TC_U = 4;   /* groups in flight a lane */

template <int WT>
__device__ __forceinline__ void mma16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    const uint32_t a[4] = {a0, a1, a2, a3};
    if constexpr (WT == HEARTH_DT_BF16) mma_bf16(c, a, b0, b1);
    else mma_f16(c, a, b0, b1);
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

/* ---- Q4_0 / Q8_0 / Q4_K split rows, x in q8 / q8_K -----------------------
 *
 * The same tiles over 32-element blocks, the KS slices contiguous ranges of
 * blocks, one mma.m16n8k32 (s8) a block. Lane (g, c) gives A elements
 * 4c..4c+3 and 16+4c..19+4c of the block for rows g and g + 8 (Q4_0: the
 * nibbles of code bytes 4c..4c+3, 0..15 as stored; Q8_0: code bytes 4c..4c+3
 * and 16+4c..19+4c) and B the same elements of x's q8 row g: exactly what
 * ldmatrix gives from 8 rows of 16 bytes. So each warp copies a round of its
 * rows' codes (128 bytes a row: 8 Q4_0 or 4 Q8_0 blocks), their d's and the
 * same blocks of x, with x's (d, sum) of each, into its own shared stage by
 * 16-byte cp.async (double buffered; x only after the PDL wait), and takes
 * the fragments with ldmatrix.x4. The int32 sums are the streamed kernel's
 * integers (Q4_0: less 8 times the block's x sum), scaled by the same
 * fmaf(d_w * d_x, s) a block (Q8_0: a block, where the streamed kernel
 * scales each half). A Q4_K round is one block of each row (its 128 code
 * bytes, four units of two sub-blocks, as Q8_0's blocks read with the
 * nibbles split; its 16-byte head), scaled as q4k_unit scales a unit. A
 * Q6_K round is one block of each row too: its 192 code bytes (so a round's
 * bytes and the stage's row stride follow the type, tcq_cfg), its 16
 * scales and the word holding its d; one mma.m16n8k16 (s8) a 16-element
 * region of one scale, scaled as q6k_unit scales a unit (tcq_round_q6k).
 * tools/cuda/check_tcq_map.py emulates this kernel's copies and fragments
 * on the host (Q4_0, Q8_0, Q4_K, Q6_K).
 *
 * bench_gemv, a token's matmuls of the 8B shape (us; streamed / here):
 * Q4_0 T = 3 2656 / 2439, T = 8 5678 / 3427; Q8_0 T = 3 3254 / 3274, T = 8
 * 6050 / 4089 (s11-run1 / s11-run2). x's (d, sum) came from global memory in
 * the loop before s11-run2, an L2 round trip a block: 3379 and 4031 us for
 * Q4_0. So Q4_0 runs here from T = 3, Q8_0 from T = 5 (cu_mmv_tc_fits).
 * Q4_K (s11-run8 / s11-run10, engine on the Q4_K 8B shape, 1000 / 1000):
 * 8 streams 801.8 tok/s streamed, 1,222.7 with the x-resident kernel below
 * for K <= 4096, 1,530.2 with this one for the down projection too. Q6_K
 * runs here from T = 3 as Q4_K, not yet measured. */
template <int QT> struct tcq_cfg {
    enum { RB = QT == HEARTH_DT_Q6_K ? 192 : 128 }; /* code bytes of a row a round */
    enum { WS = RB + 16 }; /* shared stride of a weight row: 8 rows of an ldmatrix in distinct banks */
    enum { QB = split_fmt<QT>::QB, U = RB / QB };     /* code bytes a block; blocks a round */
    enum { GPB = QT == HEARTH_DT_Q4_K || QT == HEARTH_DT_Q6_K ? 8 : 1 }; /* x's 32-groups a block */
    enum { HB = split_fmt<QT>::HB };                   /* head bytes a block (Q4_0 / Q8_0: the d) */
    enum { HS = QT == HEARTH_DT_Q6_K ? 20 * 16 : 16 * 16 }; /* the rows' heads: 16 bytes a row (Q6_K: then a d word) */
    enum { XS = 32 * U * GPB + 16 };                   /* shared stride of a row of x (8 rows) */
    enum { HOFF = 16 * WS + 8 * XS };                  /* the 16 rows' heads (Q4_0 / Q8_0: d's) */
    enum { DOFF = HOFF + HS };                         /* x's (d, sum) of the round's blocks, float2 [u][t] */
    enum { STAGE = DOFF + 8 * U * GPB * 8 };           /* one warp's stage */
    enum { SMEM = TC_WPB * 2 * STAGE };
};

__device__ __forceinline__ void mma_s8(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* cp.async of N = 4, 8 or 16 bytes, of which the first n come from src (the rest zero) */
template <int N> __device__ __forceinline__ void cp_async_n(void *dst, const void *src, int n) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if constexpr (N == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(n) : "memory");
    else if constexpr (N == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s), "l"(src), "r"(n) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(src), "r"(n) : "memory");
}

/* f32 value of an integer |s| < 2^22 less c - 12582912 (exact): s + 0x4B400000 as a float is 12582912 + s,
 * so one integer add and one float subtract replace the quarter-rate I2F (s11-run5: the kernel issue-bound) */
__device__ __forceinline__ float int_less(int s, float c) { return __int_as_float(s + 0x4B400000) - c; }

/* acc plus one output's share of a Q4_K unit (q4k_unit's arithmetic): s0, s1 the integer dots of its two
 * sub-blocks, sum0, sum1 x's sums of those groups (integers, so mins is exact in f32) */
__device__ __forceinline__ float q4k_out(const int *sc, const int *m, int s0, int s1, float sum0, float sum1,
                                         float d, float dmin, float dx, float acc) {
    const int s = sc[0] * s0 + sc[1] * s1;
    const float mins = fmaf((float)m[0], sum0, (float)m[1] * sum1);
    acc = fmaf(d * dx, (float)s, acc);
    return fmaf(-(dmin * dx), mins, acc);
}

/* Q4_K: a round is one block of each row, four units of 32 code bytes (sub-blocks 2j: the low nibbles,
 * 2j + 1: the high ones, x's groups 2j and 2j + 1); the heads (d, dmin, scales) at hd + 16 m. */
__device__ __forceinline__ void tcq_round_q4k(float *acc, const uint8_t *ws, const uint8_t *hd, const uint8_t *xl,
                                              const float2 *xd, int lane) {
    const int g = lane >> 2, c = lane & 3;
    const int wm = (lane & 7) + 8 * ((lane >> 3) & 1);
    const uint4 ha = *(const uint4 *)(hd + 16 * g), hb = *(const uint4 *)(hd + 16 * (g + 8));
    const float da = h2f((uint16_t)(ha.x & 0xffffu)), dmina = h2f((uint16_t)(ha.x >> 16));
    const float db = h2f((uint16_t)(hb.x & 0xffffu)), dminb = h2f((uint16_t)(hb.x >> 16));
    const uint32_t m4 = 0x0F0F0F0Fu;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        uint32_t xb[4], q[4]; /* x: b0, b1 of group 2j, then of 2j + 1; codes: rows 0-7 / 8-15, bytes 0..15, 16..31 */
        ldsm_x4(xb, xl + 32 * (2 * j + (lane >> 4)));
        ldsm_x4(q, ws + wm * tcq_cfg<HEARTH_DT_Q4_K>::WS + 32 * j + 16 * (lane >> 4));
        int s0[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
        mma_s8(s0, q[0] & m4, q[1] & m4, q[2] & m4, q[3] & m4, xb[0], xb[1]);
        mma_s8(s1, (q[0] >> 4) & m4, (q[1] >> 4) & m4, (q[2] >> 4) & m4, (q[3] >> 4) & m4, xb[2], xb[3]);
        int sca[2], ma[2], scb[2], mb[2];
        q4k_unit_scales(ha.y, ha.z, ha.w, j, sca, ma);
        q4k_unit_scales(hb.y, hb.z, hb.w, j, scb, mb);
        const float4 e0 = *(const float4 *)(xd + 8 * (2 * j) + 2 * c); /* (d, sum) of columns 2c, 2c + 1 */
        const float4 e1 = *(const float4 *)(xd + 8 * (2 * j + 1) + 2 * c);
        acc[0] = q4k_out(sca, ma, s0[0], s1[0], e0.y, e1.y, da, dmina, e0.x, acc[0]);
        acc[1] = q4k_out(sca, ma, s0[1], s1[1], e0.w, e1.w, da, dmina, e0.z, acc[1]);
        acc[2] = q4k_out(scb, mb, s0[2], s1[2], e0.y, e1.y, db, dminb, e0.x, acc[2]);
        acc[3] = q4k_out(scb, mb, s0[3], s1[3], e0.w, e1.w, db, dminb, e0.z, acc[3]);
    }
}

__device__ __forceinline__ void mma_s8_k16(int *c, uint32_t a0, uint32_t a1, uint32_t b) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
}

/* acc plus one output's share of a Q6_K unit (q6k_unit's arithmetic): s[h][o] the integer dots of its four
 * 16-element regions, sc the word of their int8 scales */
__device__ __forceinline__ float q6k_out(const int (*s)[4], int o, uint32_t sc, float d, float dx, float acc) {
    const int v = (int)(int8_t)sc * s[0][o] + (int)(int8_t)(sc >> 8) * s[1][o] + (int)(int8_t)(sc >> 16) * s[2][o] +
                  (int)(int8_t)(sc >> 24) * s[3][o];
    return fmaf(d * dx, (float)v, acc);
}

/* Q6_K: a round is one block of each row, four units u (cuda_internal.cuh's split layout: 32 ql bytes at
 * 32u, 16 bytes of top bits at 128 + 16u; x's groups A = 2 (u & ~1) + (u & 1) and A + 2), each four
 * m16n8k16 products, one a region of one scale: A[0..16), A[16..32), B[0..16), B[16..32). An ldmatrix.x4
 * of the unit's ql gives rows g, g + 8 at bytes 4c.. and 16 + 4c.. (as Q4_K's), one of two units' top bits
 * gives word c of rows g, g + 8 of each (byte i: the top bits of A[4c + i], A[16 + 4c + i], B[4c + i],
 * B[16 + 4c + i]); x's b0, b1 of groups A, B from one ldmatrix.x4 (as Q4_K's two groups). Heads: the
 * scales at hd + 16 m (unit u's in word u), the 4-byte word holding the block's d at hd + 256 + 4 m, its
 * half dh (the block's parity in the row). */
__device__ __forceinline__ void tcq_round_q6k(float *acc, const uint8_t *ws, const uint8_t *hd, const uint8_t *xl,
                                              const float2 *xd, int dh, int lane) {
    constexpr int WS = tcq_cfg<HEARTH_DT_Q6_K>::WS;
    const int g = lane >> 2, c = lane & 3;
    const int wm = (lane & 7) + 8 * ((lane >> 3) & 1);
    const float da = h2f(*(const uint16_t *)(hd + 256 + 4 * g + 2 * dh));
    const float db = h2f(*(const uint16_t *)(hd + 256 + 4 * (g + 8) + 2 * dh));
    uint32_t p[2][4]; /* top bits: rows g, g + 8 of unit 2i, then of unit 2i + 1 */
#pragma unroll
    for (int i = 0; i < 2; i++) ldsm_x4(p[i], ws + wm * WS + 128 + 32 * i + 16 * (lane >> 4));
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int A = 2 * (u & ~1) + (u & 1);
        uint32_t xb[4], q[4]; /* x: b0, b1 of group A, then of A + 2; ql: rows g, g + 8 at 4c.., then at 16 + 4c.. */
        ldsm_x4(xb, xl + 32 * (A + 2 * (lane >> 4)));
        ldsm_x4(q, ws + wm * WS + 32 * u + 16 * (lane >> 4));
        const uint32_t pa = p[u >> 1][2 * (u & 1)], pb = p[u >> 1][2 * (u & 1) + 1];
        int s[4][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
        mma_s8_k16(s[0], q6k_s8(q[0], pa << 4), q6k_s8(q[1], pb << 4), xb[0]);
        mma_s8_k16(s[1], q6k_s8(q[2], pa << 2), q6k_s8(q[3], pb << 2), xb[1]);
        mma_s8_k16(s[2], q6k_s8(q[0] >> 4, pa), q6k_s8(q[1] >> 4, pb), xb[2]);
        mma_s8_k16(s[3], q6k_s8(q[2] >> 4, pa >> 2), q6k_s8(q[3] >> 4, pb >> 2), xb[3]);
        const float4 e = *(const float4 *)(xd + 8 * A + 2 * c); /* x's d of columns 2c, 2c + 1 (group A) */
        const uint32_t sca = *(const uint32_t *)(hd + 16 * g + 4 * u);
        const uint32_t scb = *(const uint32_t *)(hd + 16 * (g + 8) + 4 * u);
        acc[0] = q6k_out(s, 0, sca, da, e.x, acc[0]);
        acc[1] = q6k_out(s, 1, sca, da, e.z, acc[1]);
        acc[2] = q6k_out(s, 2, scb, db, e.x, acc[2]);
        acc[3] = q6k_out(s, 3, scb, db, e.z, acc[3]);
    }
}

/* One round of a warp's 16-row tile, blocks [0, nblk) of it (FULL: nblk == U, no guards), blk the row's
 * block at its start: codes of row m at ws + m * WS, the rows' heads at hd + 16 m (Q4_0 / Q8_0: f16 d's),
 * this lane's ldmatrix row of x at xl (block b at 32 GPB b; rows past NT zero), x's (d, sum) of group q for
 * rows t at xd[8 q + t]. acc = C[g][2c], C[g][2c + 1], C[g + 8][2c], C[g + 8][2c + 1]: per block, fmaf(d_w *
 * d_x, s, acc) with s the block's integer dot (Q4_0: of the 0..15 codes, less 8 times the x sum), the
 * streamed kernel's arithmetic; per unit for Q4_K and Q6_K. */
template <int QT, bool FULL>
__device__ __forceinline__ void tcq_round(float *acc, const uint8_t *ws, const uint8_t *hd, const uint8_t *xl,
                                          const float2 *xd, int nblk, int blk, int lane) {
    if constexpr (QT == HEARTH_DT_Q4_K) { /* one block a round: full, or the empty round of a slice past K */
        if (FULL || nblk > 0) tcq_round_q4k(acc, ws, hd, xl, xd, lane);
        return;
    }
    if constexpr (QT == HEARTH_DT_Q6_K) { /* the same */
        if (FULL || nblk > 0) tcq_round_q6k(acc, ws, hd, xl, xd, blk & 1, lane);
        return;
    }
    constexpr int U = tcq_cfg<QT>::U;
    const int g = lane >> 2, c = lane & 3;
    const int wm = (lane & 7) + 8 * ((lane >> 3) & 1); /* the weight row this lane addresses for ldmatrix */
    const uint4 da = *(const uint4 *)(hd + 16 * g), db = *(const uint4 *)(hd + 16 * (g + 8));
    const uint32_t dwa[4] = {da.x, da.y, da.z, da.w}, dwb[4] = {db.x, db.y, db.z, db.w};
#pragma unroll
    for (int p = 0; p < U; p += 2) {
        if (!FULL && p >= nblk) break;
        uint32_t xb[4]; /* b0, b1 of block p, then of block p + 1 */
        ldsm_x4(xb, xl + 32 * (p + (lane >> 4)));
        int s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
        if constexpr (QT == HEARTH_DT_Q4_0) {
            uint32_t q[4]; /* rows 0-7 / 8-15 of block p, then of block p + 1 */
            ldsm_x4(q, ws + wm * tcq_cfg<QT>::WS + 16 * (p + (lane >> 4)));
            const uint32_t m4 = 0x0F0F0F0Fu;
#pragma unroll
            for (int j = 0; j < 2; j++)
                mma_s8(s[j], q[2 * j] & m4, q[2 * j + 1] & m4, (q[2 * j] >> 4) & m4, (q[2 * j + 1] >> 4) & m4,
                       xb[2 * j], xb[2 * j + 1]);
        } else {
#pragma unroll
            for (int j = 0; j < 2; j++) {
                uint32_t q[4]; /* rows 0-7 / 8-15, bytes 0..15 of the block, then 16..31 */
                ldsm_x4(q, ws + wm * tcq_cfg<QT>::WS + 32 * (p + j) + 16 * (lane >> 4));
                mma_s8(s[j], q[0], q[1], q[2], q[3], xb[2 * j], xb[2 * j + 1]);
            }
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int b = p + j;
            if (!FULL && b >= nblk) break;
            const float4 e = *(const float4 *)(xd + 8 * b + 2 * c); /* (d, sum) of columns 2c, 2c + 1 */
            const float c0 = QT == HEARTH_DT_Q4_0 ? fmaf(8.0f, e.y, 12582912.0f) : 12582912.0f;
            const float c1 = QT == HEARTH_DT_Q4_0 ? fmaf(8.0f, e.w, 12582912.0f) : 12582912.0f;
            const float fa = h2f((uint16_t)(dwa[b >> 1] >> (16 * (b & 1))));
            const float fb = h2f((uint16_t)(dwb[b >> 1] >> (16 * (b & 1))));
            acc[0] = fmaf(fa * e.x, int_less(s[j][0], c0), acc[0]);
            acc[1] = fmaf(fa * e.z, int_less(s[j][1], c1), acc[1]);
            acc[2] = fmaf(fb * e.x, int_less(s[j][2], c0), acc[2]);
            acc[3] = fmaf(fb * e.z, int_less(s[j][3], c1), acc[3]);
        }
    }
}

/* The copy roles of a warp's weight round (both kernels): A row m = lane / 8 + 4i (rows 0..7 the r0
 * kind, 8..15 the r1 kind), 16-byte chunk lane % 8 of the round's first 128 code bytes into ws + m * WS;
 * lanes 0..15 the heads of row lane (16 bytes) into hd. Q6_K (192 code bytes, U = 1): also chunk
 * 8 + lane % 4 (the top bits) of A rows lane / 8 + 4i, i = 0, 1 (lane % 8 < 4) or 2, 3; lanes 0..15
 * copy the scales of row lane, lanes 16..31 the 4-byte word holding the d of row lane - 16 into
 * hd + 256 (aligned and in the row: row_bytes % 16 == 0 makes nb a multiple of 8). wrow[i], hrow: the
 * lane's rows (tcq_rows); blk0: the round's first block in the row; left: blocks of the round that exist
 * (<= 0: none, zeros copied). */
template <int QT>
__device__ __forceinline__ void tcq_copy_w(uint8_t *ws, uint8_t *hd, const uint8_t *const *wrow, const uint8_t *hrow,
                                           int blk0, int left, int lane) {
    using C = tcq_cfg<QT>;
    const bool ok = 16 * (lane & 7) / C::QB < left; /* the chunk's block */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int m = (lane >> 3) + 4 * i;
        cp_async16(ws + m * C::WS + 16 * (lane & 7), ok ? wrow[i] + (size_t)blk0 * C::QB + 16 * (lane & 7) : wrow[i],
                   ok);
    }
    if constexpr (QT == HEARTH_DT_Q6_K) { /* ok: the round's one block exists */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int m = (lane >> 3) + 4 * (i + 2 * ((lane >> 2) & 1));
            const uint8_t *row = lane & 4 ? wrow[2 + i] : wrow[i];
            cp_async16(ws + m * C::WS + 128 + 16 * (lane & 3),
                       ok ? row + (size_t)blk0 * C::QB + 128 + 16 * (lane & 3) : row, ok);
        }
        /* one address for both kinds of head: two made ptxas (CUDA 13.0) spill in the staged kernel */
        const uint8_t *h = hrow + (lane < 16 ? 16 * (size_t)blk0 : 4 * (size_t)(blk0 >> 1));
        if (lane < 16) cp_async16(hd + 16 * lane, ok ? h : hrow, ok);
        else cp_async_n<4>(hd + 256 + 4 * (lane - 16), ok ? h : hrow, ok ? 4 : 0);
    } else if (lane < 16) {
        const int n = C::HB * max(0, min((int)C::U, left));
        cp_async_n<C::HB * C::U>(hd + 16 * lane, n ? hrow + C::HB * (size_t)blk0 : hrow, n);
    }
}

/* The rows tcq_copy_w reads for tile `tile` (clamped to N - 1 past the end): wrow[i] of A row
 * lane / 8 + 4i, hrow the heads of row lane % 16 (nb blocks of codes a row before them, and for lanes
 * 16..31 hi bytes more: Q6_K's d's, after its nb blocks of 16 scale bytes; 0 for the other types). */
__device__ __forceinline__ void tcq_rows(const mmv_set &set, int tile, int N, size_t row_bytes, int nb_qb, int hi,
                                         int lane, const uint8_t **wrow, const uint8_t **hrow) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int m = (lane >> 3) + 4 * i;
        const int r = set.swiglu ? 8 * tile + (m & 7) : 16 * tile + m;
        wrow[i] = set_row(set, min(r, N - 1), m >> 3, row_bytes);
    }
    *hrow = set_row(set, min(set.swiglu ? 8 * tile + (lane & 7) : 16 * tile + (lane & 15), N - 1), (lane >> 3) & 1,
                    row_bytes) + (size_t)nb_qb + (lane >= 16 ? hi : 0);
}

/* The body of mmv_tcq_kernel (below, with its launch bounds) */
template <int QT, int NT, int KS>
__device__ __forceinline__ void tcq_body(const mmv_set &set, size_t row_bytes, const int8_t *__restrict__ xq,
                                         const float4 *__restrict__ xds, int K) {
    static_assert(QT == HEARTH_DT_Q4_0 || QT == HEARTH_DT_Q8_0 || QT == HEARTH_DT_Q4_K || QT == HEARTH_DT_Q6_K,
                  "Q4_0, Q8_0, Q4_K or Q6_K");
    using C = tcq_cfg<QT>;
    constexpr int QB = C::QB, U = C::U, GPB = C::GPB;
    extern __shared__ __align__(16) uint8_t tcq_sm[];
    __shared__ float4 red[KS > 1 ? TC_WPB : 1][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, ks = w % KS;
    const int g = lane >> 2;
    const int N = set_rows(set), ntiles = set.swiglu ? (N + 7) / 8 : (N + 15) / 16;
    const int tile = blockIdx.x * (TC_WPB / KS) + w / KS;
    const bool live = tile < ntiles;
    const int r0 = set.swiglu ? 8 * tile + g : 16 * tile + g, r1 = set.swiglu ? r0 : r0 + 8;
    const int ng = K / 32, nb = ng / GPB; /* x's groups, weight blocks a row */
    /* slice ks: blocks [b0, b0 + mine), b0 a multiple of U (the heads of a round are 16 / 8 aligned bytes) */
    const int per = ((nb + KS - 1) / KS + U - 1) / U * U, b0 = ks * per;
    const int mine = live && b0 < nb ? min(per, nb - b0) : 0;
    const int rounds = (mine + U - 1) / U;
    uint8_t *st = tcq_sm + (size_t)w * 2 * C::STAGE;

    const uint8_t *wrow[4], *hrow;
    tcq_rows(set, tile, N, row_bytes, nb * QB, QT == HEARTH_DT_Q6_K ? 16 * nb : 0, lane, wrow, &hrow);
    auto copy_w = [&](int rd) {
        uint8_t *s = st + (rd & 1) * C::STAGE;
        tcq_copy_w<QT>(s, s + C::HOFF, wrow, hrow, b0 + rd * U, mine - rd * U, lane);
    };
    auto copy_x = [&](int rd) {
        uint8_t *s = st + (rd & 1) * C::STAGE + 16 * C::WS;
        constexpr int CPR = 2 * U * GPB; /* 16-byte chunks of a row of x a round */
#pragma unroll
        for (int i = 0; i < 8 * CPR / 32; i++) {
            const int j = lane + 32 * i, t = j / CPR, ch = j % CPR;
            const bool ok = t < NT && rd * U + ch / (2 * GPB) < mine;
            const int8_t *src = xq + (size_t)t * K + (size_t)(b0 + rd * U) * 32 * GPB + 16 * ch;
            cp_async16(s + t * C::XS + 16 * ch, ok ? (const void *)src : (const void *)xq, ok);
        }
        float2 *sd = (float2 *)(st + (rd & 1) * C::STAGE + C::DOFF);
#pragma unroll
        for (int i = 0; i < 8 * U * GPB / 32; i++) {
            const int j = lane + 32 * i, u = j / 8, t = j % 8; /* group u of the round */
            const bool ok = t < NT && rd * U + u / GPB < mine;
            cp_async_n<8>(sd + j,
                          ok ? (const void *)(xds + (size_t)t * ng + (size_t)(b0 + rd * U) * GPB + u) : (const void *)xds,
                          ok ? 8 : 0);
        }
    };
    if (rounds > 0) copy_w(0);
    pdl_wait();
    if (rounds > 0) copy_x(0);
    cp_async_commit();

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int rd = 0; rd < rounds; rd++) {
        if (rd + 1 < rounds) {
            copy_w(rd + 1);
            copy_x(rd + 1);
        }
        cp_async_commit();
        cp_async_wait1(); /* round rd has landed (this lane's copies; the warp's after the sync) */
        __syncwarp();
        const uint8_t *ws = st + (rd & 1) * C::STAGE;
        const uint8_t *xl = ws + 16 * C::WS + (lane & 7) * C::XS + 16 * ((lane >> 3) & 1);
        const float2 *xd = (const float2 *)(ws + C::DOFF);
        if (rd * U + U <= mine) tcq_round<QT, true>(acc, ws, ws + C::HOFF, xl, xd, U, b0 + rd * U, lane);
        else tcq_round<QT, false>(acc, ws, ws + C::HOFF, xl, xd, mine - rd * U, b0 + rd * U, lane);
        __syncwarp(); /* this stage is copied into again two rounds on */
    }
    cp_async_wait_all();
    pdl_launch();
    tc_finish<KS>(set, red, acc, w, ks, lane, live, r0, r1, N, NT);
}

template <int QT, int NT, int KS>
__global__ void __launch_bounds__(TC_WPB * 32) mmv_tcq_kernel(mmv_set set, size_t row_bytes,
                                                              const int8_t *__restrict__ xq,
                                                              const float4 *__restrict__ xds, int K) {
    tcq_body<QT, NT, KS>(set, row_bytes, xq, xds, K);
}

/* Q6_K's: two blocks a multiprocessor (as the shared memory allows) need at most 128 registers, where ptxas
 * left to itself takes 150..158 (CUDA 13.0); a minimum of one block in the others' bounds changes their code */
template <int NT, int KS>
__global__ void __launch_bounds__(TC_WPB * 32, 2) mmv_tcq_q6k_kernel(mmv_set set, size_t row_bytes,
                                                                     const int8_t *__restrict__ xq,
                                                                     const float4 *__restrict__ xds, int K) {
    tcq_body<HEARTH_DT_Q6_K, NT, KS>(set, row_bytes, xq, xds, K);
}

template <int QT, int NT, int KS> static constexpr auto tcq_kernel() {
    if constexpr (QT == HEARTH_DT_Q6_K) return mmv_tcq_q6k_kernel<NT, KS>;
    else return mmv_tcq_kernel<QT, NT, KS>;
}

/* ---- the same with x resident (v24) ---------------------------------------
 *
 * mmv_tcq_kernel copies x again for every tile, as many bytes as the Q4_0
 * weights at T = 8 (L2 hit rate 64% in s11-run3's profile of gate/up), and
 * its stages (x is 60% of them) leave room for two a warp and 16 warps a
 * multiprocessor. Here a block of 16 warps copies all of x (its q8 rows and
 * each block's (d, sum)) into shared memory once, then loops over tiles
 * (grid: one block a multiprocessor), TPB = 16 / KS tiles at a time, the
 * slices of a tile in one block as above. A warp's weight rounds run
 * through S stages, S - 1 rounds in flight, across tile boundaries; the
 * first ones are copied before the PDL wait. S = 4, but 3 for Q6_K, whose
 * 16 warps' stages (3,648 bytes) would take 228 KiB at 4: two of its rounds
 * in flight, as many bytes as three of Q4_K's. The round itself is
 * mmv_tcq_kernel's (tcq_round): the same bits. Rows of x at or past NT are
 * read from zero bytes. For rows whose x fits beside the stages (tcx_fits:
 * K = 4096 at T = 8, 8192 at T <= 5; Q6_K 4096 at T = 8, 8192 at T = 3);
 * longer rows go to mmv_tcq_kernel.
 *
 * Measured (s11-run6, HEARTH_MMV_TCX 1 / 0 in one binary): bench_gemv, a
 * token's Q4_0 matmuls at T = 8 2830 / 3093 us, T = 3 2559 / 2304; Q8_0
 * T = 8 3704 / 4102. In the engine it wins at 4 streams too, where its
 * weight rounds copied before the PDL wait overlap the kernel ahead: Q4_0
 * 1,075.7 / 1,011.9 tok/s at 4 streams, 1,613.6 / 1,451.6 at 8. So it runs
 * wherever it fits. */
constexpr int TCX_WPB = 16;   /* warps a block */
constexpr int TCX_ZERO = 512; /* zero bytes: x's rows past NT, a round of blocks and one more */
constexpr int TCX_SMEM_MAX = 227 * 1024 - TCX_WPB * 32 * 16; /* the opt-in limit less the static red[] */

template <int QT> struct tcx_cfg {
    enum { S = QT == HEARTH_DT_Q6_K ? 3 : 4 };                /* a warp's weight stages */
    enum { WST = 16 * tcq_cfg<QT>::WS + tcq_cfg<QT>::HS };     /* a stage: 16 rows' codes (a round), then heads */
    enum { XOFF = TCX_WPB * S * WST + TCX_ZERO };             /* x's rows, after the stages and the zeros */
};

template <int QT> static size_t tcx_smem(int NT, int K) {
    return tcx_cfg<QT>::XOFF + (size_t)NT * (K + 16) + (size_t)8 * (K / 32) * 8;
}

/* the x-resident kernel runs (HEARTH_MMV_TCX=0: never, for benchmarks: mmv_tcq_kernel everywhere) */
template <int QT> static int tcx_fits(int NT, int K) {
    static int on = -1;
    if (on < 0) {
        const char *s = getenv("HEARTH_MMV_TCX");
        on = !(s && atoi(s) == 0);
    }
    return on && tcx_smem<QT>(NT, K) <= (size_t)TCX_SMEM_MAX;
}

template <int N> __device__ __forceinline__ void cp_async_wait_n() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

template <int QT, int NT, int KS>
__global__ void __launch_bounds__(TCX_WPB * 32) mmv_tcqx_kernel(mmv_set set, size_t row_bytes,
                                                               const int8_t *__restrict__ xq,
                                                               const float4 *__restrict__ xds, int K) {
    using C = tcq_cfg<QT>;
    constexpr int QB = C::QB, U = C::U, TPB = TCX_WPB / KS;
    constexpr int TCX_S = tcx_cfg<QT>::S, TCX_WST = tcx_cfg<QT>::WST, TCX_XOFF = tcx_cfg<QT>::XOFF;
    extern __shared__ __align__(16) uint8_t tcq_sm[];
    __shared__ float4 red[KS > 1 ? TCX_WPB : 1][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, ks = w % KS;
    const int g = lane >> 2;
    const int N = set_rows(set), ntiles = set.swiglu ? (N + 7) / 8 : (N + 15) / 16;
    constexpr int GPB = C::GPB;
    const int ng = K / 32, nb = ng / GPB, XR = K + 16; /* x's groups, weight blocks a row */
    const int per = ((nb + KS - 1) / KS + U - 1) / U * U, b0 = ks * per;
    const int mine = b0 < nb ? min(per, nb - b0) : 0;
    const int rounds = max(1, (mine + U - 1) / U); /* a slice with no blocks runs one empty round */
    const int stride = gridDim.x * TPB, iters = (ntiles + stride - 1) / stride, nitems = iters * rounds;
    uint8_t *stg = tcq_sm + (size_t)w * TCX_S * TCX_WST;
    const uint8_t *zero = tcq_sm + TCX_XOFF - TCX_ZERO;
    int8_t *xs = (int8_t *)(tcq_sm + TCX_XOFF);
    float2 *xd = (float2 *)(xs + (size_t)NT * XR); /* [b][t], t < 8 */
    const int tile0 = blockIdx.x * TPB + w / KS;

    /* (ct, crd): the tile and round of the next copy, advanced here */
    int ct = tile0, crd = 0, cslot = 0;
    auto copy_next = [&]() {
        const uint8_t *wrow[4], *hrow;
        tcq_rows(set, ct, N, row_bytes, nb * QB, QT == HEARTH_DT_Q6_K ? 16 * nb : 0, lane, wrow, &hrow);
        uint8_t *s = stg + cslot * TCX_WST;
        tcq_copy_w<QT>(s, s + 16 * C::WS, wrow, hrow, b0 + crd * U, ct < ntiles ? mine - crd * U : 0, lane);
        cslot = cslot + 1 == TCX_S ? 0 : cslot + 1;
        if (++crd == rounds) crd = 0, ct += stride;
    };
#pragma unroll
    for (int i = 0; i < TCX_S - 1; i++) {
        if (i < nitems) copy_next();
        cp_async_commit();
    }
    pdl_wait();
    for (int j = threadIdx.x; j < NT * (K / 16); j += TCX_WPB * 32) {
        const int t = j / (K / 16), ch = j % (K / 16);
        cp_async16(xs + (size_t)t * XR + 16 * ch, xq + (size_t)t * K + 16 * ch);
    }
    for (int j = threadIdx.x; j < 8 * ng; j += TCX_WPB * 32) { /* (d, sum) of group j / 8, row j % 8 */
        const int b = j / 8, t = j % 8;
        cp_async_n<8>(xd + j, t < NT ? (const void *)(xds + (size_t)t * ng + b) : (const void *)xds, t < NT ? 8 : 0);
    }
    for (int j = threadIdx.x; j < TCX_ZERO / 4; j += TCX_WPB * 32) ((uint32_t *)zero)[j] = 0;
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    /* this lane's ldmatrix row of x at block b0 (rows past NT: the zero bytes) */
    const uint8_t *xl0 = (lane & 7) < NT
                             ? (const uint8_t *)xs + (size_t)(lane & 7) * XR + 16 * ((lane >> 3) & 1) + 32 * GPB * b0
                             : zero;
    const int xstep = (lane & 7) < NT ? 32 * GPB * U : 0;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int tile = tile0, rd = 0, slot = 0;
    for (int item = 0; item < nitems; item++) {
        if (item + TCX_S - 1 < nitems) copy_next();
        cp_async_commit();
        cp_async_wait_n<TCX_S - 1>(); /* round `item` has landed (this lane's copies; the warp's after the sync) */
        __syncwarp();
        const uint8_t *ws = stg + slot * TCX_WST;
        const uint8_t *xl = xl0 + rd * xstep;
        const float2 *xdr = xd + 8 * GPB * (b0 + rd * U);
        if (rd * U + U <= mine) tcq_round<QT, true>(acc, ws, ws + 16 * C::WS, xl, xdr, U, b0 + rd * U, lane);
        else tcq_round<QT, false>(acc, ws, ws + 16 * C::WS, xl, xdr, mine - rd * U, b0 + rd * U, lane);
        __syncwarp(); /* this stage is copied into again TCX_S - 1 rounds on */
        slot = slot + 1 == TCX_S ? 0 : slot + 1;
        if (++rd == rounds) {
            if (item == nitems - 1) pdl_launch();
            const int r0 = set.swiglu ? 8 * tile + g : 16 * tile + g, r1 = set.swiglu ? r0 : r0 + 8;
            tc_finish<KS>(set, red, acc, w, ks, lane, tile < ntiles, r0, r1, N, NT);
            if constexpr (KS > 1) __syncthreads(); /* red[] is written again for the next tile */
            acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
            rd = 0, tile += stride;
        }
    }
    cp_async_wait_all();
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
    const dim3 block(TC_WPB * 32);
    if constexpr (WT == HEARTH_DT_Q4_0 || WT == HEARTH_DT_Q8_0 || WT == HEARTH_DT_Q4_K || WT == HEARTH_DT_Q6_K) {
        const int ks = tc_slices(K, tcq_cfg<WT>::U * tcq_cfg<WT>::GPB);
        const int8_t *q = (const int8_t *)xp;
        const float4 *ds = (const float4 *)(q + (size_t)NT * K); /* xprep.cu's q8 / q8_K layout */
        if (tcx_fits<WT>(NT, K)) {
            auto k = ks == 8 ? mmv_tcqx_kernel<WT, NT, 8>
                     : ks == 4 ? mmv_tcqx_kernel<WT, NT, 4>
                     : ks == 2 ? mmv_tcqx_kernel<WT, NT, 2>
                               : mmv_tcqx_kernel<WT, NT, 1>;
            static unsigned long long done[4];
            cu_smem_setup(L, k, TCX_SMEM_MAX, true, &done[ks == 8 ? 3 : ks == 4 ? 2 : ks == 2 ? 1 : 0]);
            const int blocks = std::min(cu_div_up(ntiles, TCX_WPB / ks), L->n_sm);
            cu_launch_k(L, k, dim3(blocks), dim3(TCX_WPB * 32), tcx_smem<WT>(NT, K), *set, row_bytes, q, ds, K);
            return;
        }
        const dim3 grid(cu_div_up(ntiles, TC_WPB / ks));
        constexpr int smem = tcq_cfg<WT>::SMEM;
        auto k = ks == 8 ? tcq_kernel<WT, NT, 8>()
                 : ks == 4 ? tcq_kernel<WT, NT, 4>()
                 : ks == 2 ? tcq_kernel<WT, NT, 2>()
                           : tcq_kernel<WT, NT, 1>();
        static unsigned long long done[4]; /* devices set up, per slice count */
        cu_smem_setup(L, k, smem, true, &done[ks == 8 ? 3 : ks == 4 ? 2 : ks == 2 ? 1 : 0]);
        cu_launch_k(L, k, grid, block, smem, *set, row_bytes, q, ds, K);
    } else {
        const int ks = tc_slices(K, TC_U);
        const dim3 grid(cu_div_up(ntiles, TC_WPB / ks));
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
    case 2: launch_tc<WT, 2>(L, set, xp, K, row_bytes); break;
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
    /* HEARTH_MMV_TC (benchmarks): 0 the streamed kernel at every T; 1 tensor cores for float rows only;
     * 3 for quantized rows too from T = 3 */
    static int off = -1, tc_quant = 1, all3 = 0, two = 1;
    if (off < 0) {
        const char *s = getenv("HEARTH_MMV_TC");
        off = s && atoi(s) == 0;
        tc_quant = !(s && atoi(s) == 1);
        all3 = s && atoi(s) == 3;
        s = getenv("HEARTH_MMV_TC2"); /* which split rows come here from 2 rows (A/B): 1 Q4_K, 2 Q6_K, 4 Q4_0 */
        if (s) two = atoi(s);
    }
    if (off || T < 2 || T > 8) return 0;
    /* Float rows from 3: at 2 the streamed kernel is as fast (bf16, bench_gemv s10-run2: 5081 us a token's
     * matmuls streamed, 5123 here). Split Q4_K rows from 2, where the streamed kernel's integer work bounds
     * it (a Q4_K_M model at 2 streams, s20-run4: 308 tok/s a stream streamed, 343 with its Q4_K rows here,
     * 297 with its Q6_K rows here, 331 with both); Q4_0 and Q6_K from 3 (Q4_0 at 2: 429 -> 357, s20-run3);
     * Q8_0 from 5: below 5 the streamed kernel keeps up with Q8_0 (engine, s11-run7: 3 streams 746.0 tok/s
     * streamed, 721.2 here; 4 streams 895.8, 900.3; two blocks a multiprocessor there made the streamed
     * kernel faster still, s20-run1) */
    const int bit = t == HEARTH_DT_Q4_K ? 1 : t == HEARTH_DT_Q6_K ? 2 : t == HEARTH_DT_Q4_0 ? 4 : 0;
    const int quant_min = t == HEARTH_DT_Q8_0 && !all3 ? 5 : (two & bit) ? 2 : 3;
    const int quant = t == HEARTH_DT_Q4_0 || t == HEARTH_DT_Q8_0 || t == HEARTH_DT_Q4_K || t == HEARTH_DT_Q6_K;
    if (T < 3 && !quant) return 0;
    if (!(t == HEARTH_DT_BF16 || t == HEARTH_DT_F16 || (quant && set->split && tc_quant && T >= quant_min))) return 0;
    if ((t == HEARTH_DT_Q4_K || t == HEARTH_DT_Q6_K) && K % 256) return 0;
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
    case HEARTH_DT_Q4_K: launch_tc_t<HEARTH_DT_Q4_K>(L, set, xp, T, K, row_bytes); break;
    case HEARTH_DT_Q6_K: launch_tc_t<HEARTH_DT_Q6_K>(L, set, xp, T, K, row_bytes); break;
    default: break;
    }
}
