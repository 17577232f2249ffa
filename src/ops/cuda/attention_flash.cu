/* attention_flash.cu - causal prefill attention over an f16 or e4m3 paged
 * KV cache, flash-attention 2 style, for head_dim 64 and 128 (the default
 * kernel for both; attention_prefill.cu dispatches here and keeps the older
 * kernels for A/B runs).
 *
 * A block is 4 warps and one 64-row tile of one sequence (the same tiles the
 * decode kernel leaves alone: tile_uniform with bm 64) for MT query heads of
 * one kv head (MT = 1 or 2); warp w owns tile rows 16w..16w+15 of each of
 * its MT heads. With MT = 2 a warp's two heads read the same positions, so
 * every K / V fragment taken from shared memory feeds two mma, the masks and
 * tile bounds are the same for both, and the block's 128 rows share each K/V
 * tile read from L2 (half the L2 traffic of MT = 1).
 *
 *   Q: f32 rows scaled by qscale (= scale * log2 e: the softmax runs in
 *      exp2) and rounded to f16 into shared memory; MT = 1 keeps its A
 *      fragments in registers (ldmatrix once), MT = 2 reloads them by
 *      ldmatrix at each k-step (registers for two heads' outputs come first).
 *   K/V: tiles of 64 positions gathered through the block table (its slice
 *      staged in shared memory) by 16-byte cp.async into two shared stages
 *      (f16: [position][HD + 8 halves], the 16-byte pad makes every ldmatrix
 *      conflict-free; e4m3: raw [position][HD + 16 bytes]); tile i+1 is in
 *      flight while tile i is multiplied; positions past the block's last
 *      are zero-filled.
 *   S = Q K^T: mma.sync m16n8k16 (f16 in, f32 accumulate), f16 K fragments
 *      by ldmatrix (two k-steps per x4). e4m3 K is read as stored, as in
 *      attention_rows_tc.cu: the head dimension is summed in a permuted
 *      order (Q is staged permuted), so that the two B registers of a k-step
 *      are the two halves of one 32-bit word of a K row, each widened by one
 *      cvt.rn.f16x2.e4m3x2.
 *   Softmax: online, in registers (quad shuffles for the row maxima and
 *      sums); scores outside [lo(row), pos(row)] are -inf only in tiles that
 *      cross a bound of one of the warp's rows, and a warp skips tiles that
 *      lie outside all of its rows.
 *   O += P V: P packed to f16 A fragments in registers (no shared round
 *      trip), V fragments by ldmatrix.trans (e4m3 V is first widened, exactly,
 *      into one f16 tile: the operand needs two positions of one dimension a
 *      register).
 * Tiles are launched heaviest (latest positions) first; the MT heads of a
 * block and neighbouring blocks share kv heads, so the K/V bytes come from L2.
 *
 * Numerics: the f16 kernel's contract of attention_prefill.cu (q rounded to
 * f16 after scaling, K/V as stored (e4m3 widened exactly), f32
 * accumulation, P rounded to f16 for the P V product while the row sums add
 * the f32 values, f32 output). */
#include "ops/cuda/attention.cuh"

#include <limits.h>
#include <stdlib.h>

#include <type_traits>

namespace {

constexpr int FL_BN = 64;   /* positions per K/V tile */
constexpr int FL_NT = 128;  /* threads per block (4 warps) */
constexpr int FL_TBL = 512; /* block-table entries staged in shared memory (8k positions at block size 16) */

template <int HD, int MT, bool FP8> struct flash_cfg {
    static constexpr int LD = HD + 8;          /* halves per f16 shared row (K, V and Q) */
    static constexpr int TILE = FL_BN * LD;    /* halves of one f16 K or V tile */
    static constexpr int RLD = HD + 16;        /* bytes per raw e4m3 shared row (pad: conflict-free K reads, hd 128) */
    static constexpr int RAW = FL_BN * RLD;    /* bytes of one raw e4m3 K or V tile */
    static constexpr int SB = FP8 ? 2 * RAW : 2 * TILE * 2; /* bytes of one stage (K, then V) */
    static constexpr bool QREG = MT == 1;      /* Q fragments held in registers */
    static constexpr int QROWS = 64 * MT;      /* rows of the staged Q */
    /* the two stages, then (e4m3) the f16 V tile */
    static constexpr int STAGES = 2 * SB + (FP8 ? TILE * 2 : 0);
    /* with Q in registers, Q is staged where it is read into registers
     * before that space is first written: f16, the second stage; e4m3, the
     * f16 V tile */
    static constexpr int QOFF = QREG ? (FP8 ? 2 * SB : SB) : STAGES; /* bytes */
    static constexpr int SMEM = STAGES + (QREG ? 0 : QROWS * LD * 2);
    static_assert(!QREG || QROWS * LD * 2 <= (FP8 ? TILE * 2 : SB), "Q fits where it is staged");
};

/* Positions kb..kb+63 of K and V into Kd / Vd (E: __half, f16 tiles;
 * uint8_t, raw e4m3 tiles); positions past kv_hi zero (their address
 * clamped to kv_hi's, nothing read). The cache block of position p is
 * s_tbl[(p >> bs_shift) - blk0] (SMT: the block table's slice staged in
 * shared memory) or trow[p >> bs_shift]. One commit group. Each thread
 * copies one fixed 16-byte column of every (NT / CPR)-th row. */
template <int HD, typename E, bool SMT>
__device__ __forceinline__ void flash_load_tile(E *Kd, E *Vd, const E *kbase, const E *vbase, const int32_t *trow,
                                                const int32_t *s_tbl, int blk0, int bs_shift, int kv_dim, int kb,
                                                int kv_hi, int tid) {
    constexpr bool FP8 = sizeof(E) == 1;
    using C = flash_cfg<HD, 1, FP8>;
    constexpr int EP = 16 / (int)sizeof(E);     /* elements a 16-byte chunk */
    constexpr int LD = FP8 ? C::RLD : C::LD;    /* elements between shared rows */
    constexpr int CPR = HD / EP, N = FL_BN * CPR, RSTEP = FL_NT / CPR;
    static_assert(N % FL_NT == 0 && FL_NT % CPR == 0, "tile chunks per thread");
    const int c = (tid % CPR) * EP, bmask = (1 << bs_shift) - 1;
#pragma unroll
    for (int it = 0; it < N / FL_NT; it++) {
        const int i = tid / CPR + it * RSTEP, p = kb + i;
        const bool ok = p <= kv_hi;
        const int pc = ok ? p : kv_hi;
        const int blk = SMT ? s_tbl[(pc >> bs_shift) - blk0] : __ldg(trow + (pc >> bs_shift));
        const size_t off = ((size_t)blk << bs_shift | (size_t)(pc & bmask)) * (size_t)kv_dim + c;
        cp_async16(Kd + i * LD + c, kbase + off, ok);
        cp_async16(Vd + i * LD + c, vbase + off, ok);
    }
    cp_async_commit();
}

/* KS consecutive 32-bit words from shared memory (p 4 KS-byte aligned). */
template <int KS> __device__ __forceinline__ void flash_ld_words(uint32_t *w, const uint8_t *p) {
    static_assert(KS == 2 || KS % 4 == 0, "8- or 16-byte loads");
    if constexpr (KS == 2) {
        const uint2 u = *(const uint2 *)p;
        w[0] = u.x, w[1] = u.y;
    } else {
#pragma unroll
        for (int i = 0; i < KS / 4; i++) {
            const uint4 u = *(const uint4 *)(p + 16 * i);
            w[4 * i] = u.x, w[4 * i + 1] = u.y, w[4 * i + 2] = u.z, w[4 * i + 3] = u.w;
        }
    }
}

template <int HD, int MT, int MB, bool FP8>
__global__ void __launch_bounds__(FL_NT, MB)
    attn_flash_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                      const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float qscale, int window,
                      int bs_shift, int prep_kind, void *__restrict__ prep) {
    using C = flash_cfg<HD, MT, FP8>;
    constexpr int LD = C::LD, TILE = C::TILE, SB = C::SB;
    constexpr int NKS = HD / 16;   /* k-steps of S over the head dim */
    constexpr int NDT = HD / 8;    /* n-tiles of O over the head dim */
    constexpr int NJ = FL_BN / 8;  /* n-tiles of S over a tile's positions */
    constexpr int NPK = FL_BN / 16; /* k-steps of P V */
    constexpr bool QREG = C::QREG;
    /* e4m3: k-steps of S per K load, KS words of a K row: the thread's whole
     * share of the row with Q in registers, and at hd 64. At hd 128 with
     * MT = 2 (Q fragments reloaded for each KS k-steps, the loop over them
     * not unrolled) two: ptxas spilled more with four, or unrolled. */
    constexpr int KS = QREG || HD == 64 ? NKS : 2;
    static_assert(NKS % 2 == 0 && FL_BN % 32 == 0, "fragments come two k-steps at a time");
    static_assert(NKS % KS == 0, "e4m3 K loads divide the head dim");
    extern __shared__ __align__(16) __half fl_sm[];
    uint8_t *const sm = (uint8_t *)fl_sm;
    __shared__ int s_lo, s_hi;
    __shared__ int32_t s_tbl[FL_TBL];

    pdl_wait();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int ntiles = (T + 63) / 64;
    const int tile = ntiles - 1 - (int)blockIdx.y;
    const int h0 = (int)blockIdx.x * MT, kvh = h0 / (n_heads / n_kv);
    if (!tile_uniform(seq, T, tile, 64)) return; /* the decode kernel's rows */
    const int r0 = tile * 64, nrows = min(64, T - r0);
    const int32_t *trow = kv.table + (size_t)seq[r0] * kv.max_blocks;

    int kv_lo, kv_hi;
    tile_kv_range(pos, r0, nrows, window, &s_lo, &s_hi, &kv_lo, &kv_hi);
    const int nkv = (kv_hi - kv_lo) / FL_BN + 1; /* every row has lo <= hi, so kv_lo <= kv_hi */
    const int blk0 = kv_lo >> bs_shift, nb = (kv_hi >> bs_shift) - blk0 + 1;
    const bool tbl_sm = nb <= FL_TBL; /* block-uniform */
    if (tbl_sm)
        for (int i = tid; i < nb; i += FL_NT) s_tbl[i] = trow[blk0 + i];
    __syncthreads();
    using E = typename std::conditional<FP8, uint8_t, __half>::type; /* a cache element */
    E *const tsm = (E *)fl_sm;
    constexpr int TE = SB / 2 / (int)sizeof(E); /* elements of one K or V tile */
    const E *kbase = (const E *)kv.k + (size_t)kvh * HD, *vbase = (const E *)kv.v + (size_t)kvh * HD;
    if (tbl_sm)
        flash_load_tile<HD, E, true>(tsm, tsm + TE, kbase, vbase, trow, s_tbl, blk0, bs_shift, kv.kv_dim, kv_lo, kv_hi,
                                     tid);
    else
        flash_load_tile<HD, E, false>(tsm, tsm + TE, kbase, vbase, trow, s_tbl, blk0, bs_shift, kv.kv_dim, kv_lo,
                                      kv_hi, tid);

    /* Q of the MT heads, scaled and rounded to f16: [head][row][LD]. e4m3:
     * in the permuted order of S's k-steps: dims 4i..4i+3 (quad member qc =
     * 4i / (HD / 4), k-step kk = i % (HD / 16)) are logical columns
     * 16kk + 2qc + {0, 1} and 16kk + 2qc + 8 + {0, 1} */
    __half *Qs = fl_sm + C::QOFF / 2;
    {
        constexpr int F4 = HD / 4;
#pragma unroll 4
        for (int f = tid; f < C::QROWS * F4; f += FL_NT) {
            const int rq = f / F4, c = (f % F4) * 4, r = rq & 63, mt = rq >> 6;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < nrows) v = __ldg((const float4 *)(q + ((size_t)(r0 + r) * n_heads + h0 + mt) * HD + c));
            uint2 hv;
            hv.x = pack_h2(v.x * qscale, v.y * qscale);
            hv.y = pack_h2(v.z * qscale, v.w * qscale);
            if constexpr (FP8) {
                const int qc = c / (HD / 4), kk = (c % (HD / 4)) / 4;
                *(uint32_t *)&Qs[rq * LD + 16 * kk + 2 * qc] = hv.x;
                *(uint32_t *)&Qs[rq * LD + 16 * kk + 2 * qc + 8] = hv.y;
            } else {
                *(uint2 *)&Qs[rq * LD + c] = hv;
            }
        }
    }
    __syncthreads();
    /* A fragment of k-step kk for head mt: ldmatrix x4 of rows 16w + (lane & 15),
     * columns 16kk + 8 (lane >> 4) */
    const __half *qrow = Qs + (16 * w + (lane & 15)) * LD + 8 * (lane >> 4);
    uint32_t qf[QREG ? NKS : 1][4];
    if constexpr (QREG) {
#pragma unroll
        for (int kk = 0; kk < NKS; kk++) ldsm_x4(qf[kk], qrow + 16 * kk);
    }

    /* this thread's rows A (ra) and B (rb) of the tile and their bounds (rows
     * past the tile's end are all masked and not stored) */
    const int g = lane >> 2, cq = 2 * (lane & 3);
    const int ra = 16 * w + g, rb = ra + 8;
    const mma_row_bounds rw = mma_rows_bounds(pos, r0, nrows, ra, window);

    float o[MT][NDT][4];
    float mrow[MT][2], lrow[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int j = 0; j < NDT; j++) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
        mrow[mt][0] = mrow[mt][1] = -INFINITY;
        lrow[mt][0] = lrow[mt][1] = 0.0f;
    }

    for (int it = 0; it < nkv; it++) {
        const int kb = kv_lo + FL_BN * it;
        cp_async_wait_all(); /* this thread's copies of tile it have landed */
        __syncthreads(); /* everyone's; tile it-1's stage (and Q's staging) is no longer read */
        if (it + 1 < nkv) {
            E *d = tsm + ((it + 1) & 1) * 2 * TE;
            if (tbl_sm)
                flash_load_tile<HD, E, true>(d, d + TE, kbase, vbase, trow, s_tbl, blk0, bs_shift, kv.kv_dim,
                                             kb + FL_BN, kv_hi, tid);
            else
                flash_load_tile<HD, E, false>(d, d + TE, kbase, vbase, trow, s_tbl, blk0, bs_shift, kv.kv_dim,
                                              kb + FL_BN, kv_hi, tid);
        }
        if constexpr (FP8) { /* every thread, before any warp skips the tile */
            /* unrolled twice: more spilled at hd 128, MT = 2 with every chunk's registers at once */
            e4m3_tile_to_half<HD, FL_BN, FL_NT, C::RLD, LD, 2>((__half *)(sm + 2 * SB), sm + (it & 1) * SB + C::RAW,
                                                               tid);
            __syncthreads();
        }
        if (kb > rw.hi_max || kb + FL_BN - 1 < rw.lo_min) continue; /* no row of this warp sees the tile */
        const __half *Ks = fl_sm + (it & 1) * 2 * TILE, *Vs = FP8 ? (const __half *)(sm + 2 * SB) : Ks + TILE;
        const uint8_t *stage = sm + (it & 1) * SB; /* e4m3: the raw K tile */

        /* S = Q K^T */
        float s[MT][NJ][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int j = 0; j < NJ; j++) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
        if constexpr (FP8) {
            /* k-steps kc..kc+KS-1 of n-tile j: the B registers of k-step kk are
             * the halves of word kk of bytes [qc HD/4, (qc + 1) HD/4) of the
             * row of position 8j + g */
            const uint8_t *krow = stage + g * C::RLD + (lane & 3) * (HD / 4);
#pragma unroll(QREG ? NKS : 1) /* Q in registers: indices known */
            for (int kc = 0; kc < NKS; kc += KS) {
                uint32_t qa[MT][KS][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int x = 0; x < KS; x++) {
                        if constexpr (QREG) {
#pragma unroll
                            for (int e = 0; e < 4; e++) qa[mt][x][e] = qf[kc + x][e];
                        } else {
                            ldsm_x4(qa[mt][x], qrow + mt * 64 * LD + 16 * (kc + x));
                        }
                    }
#pragma unroll
                for (int j = 0; j < NJ; j++) {
                    uint32_t kw[KS];
                    flash_ld_words<KS>(kw, krow + 8 * j * C::RLD + 4 * kc);
#pragma unroll
                    for (int x = 0; x < KS; x++) {
                        uint32_t b0, b1;
                        e4m3x4_to_half2x2(kw[x], b0, b1);
#pragma unroll
                        for (int mt = 0; mt < MT; mt++) mma_f16(s[mt][j], qa[mt][x], b0, b1);
                    }
                }
            }
        } else {
#pragma unroll
            for (int k2 = 0; k2 < NKS / 2; k2++) {
                uint32_t qa[MT][2][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if constexpr (QREG) {
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            qa[mt][0][e] = qf[2 * k2][e];
                            qa[mt][1][e] = qf[2 * k2 + 1][e];
                        }
                    } else {
                        ldsm_x4(qa[mt][0], qrow + mt * 64 * LD + 32 * k2);
                        ldsm_x4(qa[mt][1], qrow + mt * 64 * LD + 32 * k2 + 16);
                    }
                }
#pragma unroll
                for (int j = 0; j < NJ; j++) {
                    uint32_t b[4];
                    ldsm_x4(b, &Ks[(8 * j + (lane & 7)) * LD + 32 * k2 + 8 * (lane >> 3)]);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma_f16(s[mt][j], qa[mt][0], b[0], b[1]);
                        mma_f16(s[mt][j], qa[mt][1], b[2], b[3]);
                    }
                }
            }
        }
        /* masks, only where the tile crosses a bound of one of the warp's rows */
        if (kb < rw.lo_max || kb + FL_BN - 1 > rw.hi_min) {
#pragma unroll
            for (int j = 0; j < NJ; j++) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int p = kb + 8 * j + cq + e;
                    const bool mA = p < rw.loA || p > rw.hiA, mB = p < rw.loB || p > rw.hiB;
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        if (mA) s[mt][j][e] = -INFINITY;
                        if (mB) s[mt][j][2 + e] = -INFINITY;
                    }
                }
            }
        }
        /* online softmax; P as f16 A fragments */
        uint32_t pf[MT][NPK][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            mma_rows_softmax<NJ, NDT>(s[mt], pf[mt], o[mt], mrow[mt][0], mrow[mt][1], lrow[mt][0], lrow[mt][1]);
        /* O += P V: ldmatrix.trans of 32 positions x 8 dims gives the B
         * fragments of two k-steps */
#pragma unroll
        for (int jd = 0; jd < NDT; jd++) {
#pragma unroll
            for (int pr = 0; pr < NPK / 2; pr++) {
                uint32_t b[4];
                ldsm_x4_trans(b, &Vs[(32 * pr + lane) * LD + 8 * jd]);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma_f16(o[mt][jd], pf[mt][2 * pr], b[0], b[1]);
                    mma_f16(o[mt][jd], pf[mt][2 * pr + 1], b[2], b[3]);
                }
            }
        }
    }
    pdl_launch();

    /* row sums over the quad, normalise, store */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float lA = lrow[mt][0], lB = lrow[mt][1];
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            lA += __shfl_xor_sync(0xffffffffu, lA, o2);
            lB += __shfl_xor_sync(0xffffffffu, lB, o2);
        }
        const float iA = lA > 0.0f ? 1.0f / lA : 0.0f, iB = lB > 0.0f ? 1.0f / lB : 0.0f;
        const size_t ea = ((size_t)(r0 + ra) * n_heads + h0 + mt) * HD + cq;
        const size_t eb = ((size_t)(r0 + rb) * n_heads + h0 + mt) * HD + cq;
#pragma unroll
        for (int jd = 0; jd < NDT; jd++) {
            const float2 va = make_float2(o[mt][jd][0] * iA, o[mt][jd][1] * iA);
            const float2 vb = make_float2(o[mt][jd][2] * iB, o[mt][jd][3] * iB);
            if (rw.vA) flash_store(out, prep_kind, prep, ea + 8 * jd, va);
            if (rw.vB) flash_store(out, prep_kind, prep, eb + 8 * jd, vb);
        }
    }
}

template <int HD, int MT, int MB, bool FP8>
void launch_flash(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                  const int32_t *pos, int n_heads, int n_kv, float qscale, int window, int bs_shift, int prep_kind,
                  void *prep) {
    constexpr int smem = flash_cfg<HD, MT, FP8>::SMEM;
    /* the largest carveout, so that MINB blocks fit */
    static unsigned long long done; /* devices set up */
    cu_smem_setup(L, attn_flash_kernel<HD, MT, MB, FP8>, smem, true, &done);
    dim3 grid(n_heads / MT, (T + 63) / 64);
    cu_launch_k(L, attn_flash_kernel<HD, MT, MB, FP8>, grid, dim3(FL_NT), smem, out, q, *kv, seq, pos, T, n_heads,
                n_kv, qscale, window, bs_shift, prep_kind, prep);
}

/* The instantiation for flash_shape's (mt, mb). */
template <int HD, bool FP8>
void launch_flash_shape(int mt, int mb, const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv,
                        const int32_t *seq, const int32_t *pos, int n_heads, int n_kv, float qscale, int window,
                        int bs_shift, int prep_kind, void *prep) {
#define FL_LARGS L, out, q, T, kv, seq, pos, n_heads, n_kv, qscale, window, bs_shift, prep_kind, prep
    if (mt == 2)
        launch_flash<HD, 2, 2, FP8>(FL_LARGS);
    else if (mb == 2)
        launch_flash<HD, 1, 2, FP8>(FL_LARGS);
    else
        launch_flash<HD, 1, 3, FP8>(FL_LARGS);
#undef FL_LARGS
}

/* Heads a block computes (mt) and blocks an SM holds (mb: 3 caps registers
 * at 168, 2 at 255). Benchmarks: HEARTH_ATTN_FLASH_MT=1|2 and
 * HEARTH_ATTN_FLASH_MINB=2|3 (one head a block only) force them (read once). */
void flash_shape(const cu_launch *L, int T, int n_heads, int n_kv_heads, int *mt, int *mb) {
    static int want_mt = -1, want_mb = 0;
    if (want_mt < 0) {
        const char *s = getenv("HEARTH_ATTN_FLASH_MT"), *b = getenv("HEARTH_ATTN_FLASH_MINB");
        want_mt = s ? atoi(s) : 0;
        want_mb = b ? atoi(b) : 0;
    }
    const int G = n_heads / n_kv_heads;
    /* two heads a block while that still gives two blocks per SM; a short
     * chunk takes one (each block's serial walk over its positions is then
     * the time) */
    *mt = (long)((T + 63) / 64) * (n_heads / 2) >= 2L * L->n_sm ? 2 : 1;
    if (want_mt == 1 || want_mt == 2) *mt = want_mt;
    if (G % 2 != 0) *mt = 1;
    /* 3 blocks an SM at 168 registers spill and ran slower than 2 (run 1) */
    *mb = *mt == 1 && want_mb == 3 ? 3 : 2;
}

} // namespace

int cu_attention_flash(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                       const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float qscale, int window,
                       int prep_kind, void *prep) {
    if (prep_kind != XPREP_BF16 && prep_kind != XPREP_F16) prep_kind = XPREP_NONE;
    int mt, mb, bs_shift = 0;
    flash_shape(L, T, n_heads, n_kv_heads, &mt, &mb);
    while ((1 << bs_shift) < kv->block_size) bs_shift++;
#define FL_ARGS mt, mb, L, out, q, T, kv, seq, pos, n_heads, n_kv_heads, qscale, window, bs_shift, prep_kind, prep
    if (head_dim == 128)
        kv->fp8 ? launch_flash_shape<128, true>(FL_ARGS) : launch_flash_shape<128, false>(FL_ARGS);
    else
        kv->fp8 ? launch_flash_shape<64, true>(FL_ARGS) : launch_flash_shape<64, false>(FL_ARGS);
#undef FL_ARGS
    return prep_kind != XPREP_NONE;
}

int cu_attention_flash_fits(const cu_kv *kv, int head_dim) {
    const int bs = kv->block_size;
    /* e4m3 rows are copied in 16-byte pieces: kv_dim a multiple of 16 codes */
    return (kv->f16 || (kv->fp8 && kv->kv_dim % 16 == 0)) && (head_dim == 64 || head_dim == 128) && bs > 0 &&
           (bs & (bs - 1)) == 0;
}
