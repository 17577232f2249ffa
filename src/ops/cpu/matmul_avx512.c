/* matmul_avx512.c - AVX-512 (F, BW, VL, DQ, VNNI) kernels, chosen at run time
 * (matmul.c); the whole file is compiled for that target.
 *
 * Each kernel reproduces the f32 operation order of matmul_scalar.c exactly:
 *  - quantized weights, "lane = row": 16 weight rows are processed together;
 *    per block, each row's exact integer dot comes out of VPDPBUSD partial
 *    sums and a fixed transpose-add tree into lane r of one vector, and one
 *    vector FMA per block does acc_r = fma(dw_r * dx, isum_r, acc_r) for all
 *    16 rows. The weight codes enter VPDPBUSD as the unsigned operand: q4
 *    nibbles as they are, q8 codes xor 0x80 (= q + 128); the offsets
 *    (-8 resp. +128 times the activation block sum) are removed in integers.
 *  - float weights, "lane = k mod 16": each (row, token) pair keeps one
 *    16-lane FMA chain over k, reduced by the pairwise tree at the end. */
#include "core/half.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/quant.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#pragma GCC target("avx2,fma,f16c,bmi,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")

#define INLINE static inline __attribute__((always_inline))
/* Small fixed-count loops must unroll so their arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 16")

/* acc += the dot products of w's unsigned bytes with x[0..3] (signed) in every
 * lane, x broadcast by the instruction itself (GCC 12 loads it apart: one uop
 * more a product in the panels' inner loops) */
INLINE __m512i dpbusd_x4(__m512i acc, __m512i w, const int8_t *x) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int8_t(*)[4])x));
    return acc;
}

enum { GEMV_T = 4 }; /* tokens sharing one pass over a 16-row group */

/* ---- activations ------------------------------------------------------------ */

static void act_q8_01(const float *x, const mm_act *a, int t0, int t1) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        int8_t *q = a->qs + (size_t)t * a->qs_stride;
        size_t o = (size_t)t * a->nb_stride;
        for (int b = 0; b < a->nb; b++, xt += 32, q += 32) {
            __m512 v0 = _mm512_loadu_ps(xt), v1 = _mm512_loadu_ps(xt + 16);
            float amax = _mm512_reduce_max_ps(
                _mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
            float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
            __m512 vid = _mm512_set1_ps(id);
            __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)));
            __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid)));
            _mm_storeu_si128((__m128i *)(void *)q, q0);
            _mm_storeu_si128((__m128i *)(void *)(q + 16), q1);
            int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_cvtepi8_epi32(q0), _mm512_cvtepi8_epi32(q1)));
            a->d[o + b] = _cvtsh_ss(_cvtss_sh(d, 0));
            a->isum[o + b] = sum;
            if (a->s) a->s[o + b] = _cvtsh_ss(_cvtss_sh(d * (float)sum, 0));
        }
    }
}

/* q8_K: the first element of largest magnitude sets the sign of the scale,
 * as in the scalar loop; codes round to nearest even (cvtps2dq) and
 * saturate to int8 (vpmovsdb). */
static void act_q8_K(const float *x, const mm_act *a, int t0, int t1) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        int8_t *q = a->qs + (size_t)t * a->qs_stride;
        size_t o = (size_t)t * a->nb_stride;
        for (int b = 0; b < a->nb; b++, xt += 256, q += 256) {
            int16_t *bs = a->bsums + (o + b) * 16;
            __m512 m = _mm512_setzero_ps();
            UNROLL for (int i = 0; i < 16; i++) m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(xt + 16 * i), absmask));
            float amax = _mm512_reduce_max_ps(m);
            if (!(amax > 0.f)) {
                memset(q, 0, 256);
                memset(bs, 0, 32);
                a->d[o + b] = 0.f;
                continue;
            }
            float max = 0.f;
            __m512 va = _mm512_set1_ps(amax);
            for (int i = 0; i < 16; i++) {
                __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(xt + 16 * i), absmask), va, _CMP_EQ_OQ);
                if (hit) {
                    max = xt[16 * i + __builtin_ctz(hit)];
                    break;
                }
            }
            float iscale = -127.f / max;
            __m512 vs = _mm512_set1_ps(iscale);
            UNROLL for (int i = 0; i < 16; i++) {
                __m128i c = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xt + 16 * i), vs)));
                _mm_storeu_si128((__m128i *)(void *)(q + 16 * i), c);
                bs[i] = (int16_t)_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(c));
            }
            a->d[o + b] = 1.f / iscale;
        }
    }
}

static void act_f16(const float *x, const mm_act *a, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        float *f = a->f + (size_t)t * a->f_stride;
        for (int k = 0; k < a->K; k += 16) {
            __mmask16 m = a->K - k >= 16 ? 0xffff : (__mmask16)((1u << (a->K - k)) - 1);
            __m512 v = _mm512_maskz_loadu_ps(m, xt + k);
            _mm512_mask_storeu_ps(f + k, m, _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
        }
    }
}

static void act_bf16(const float *x, const mm_act *a, int t0, int t1) {
    const __m512i lsb = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), quiet = _mm512_set1_epi32(0x00400000);
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        float *f = a->f + (size_t)t * a->f_stride;
        for (int k = 0; k < a->K; k += 16) {
            __mmask16 m = a->K - k >= 16 ? 0xffff : (__mmask16)((1u << (a->K - k)) - 1);
            __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, xt + k));
            __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), lsb)));
            __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, absm), inf);
            r = _mm512_mask_or_epi32(r, nan, u, quiet);
            _mm512_mask_storeu_ps(f + k, m, _mm512_castsi512_ps(_mm512_and_si512(r, hi)));
        }
    }
}

/* ---- quantized weights: helpers ----------------------------------------------- */

/* Row pointers of a group of 16 (rows past the end repeat the last one) and
 * their byte offsets from row 0, for gathers. */
typedef struct {
    const uint8_t *p[16];
    __m512i off;
    __mmask16 store;
} rows16;

INLINE void rows16_init(rows16 *g, const mm_job *j, int n, int nr) {
    int32_t off[16];
    UNROLL for (int r = 0; r < 16; r++) {
        int rr = r < nr ? r : nr - 1;
        g->p[r] = j->w + (size_t)(n + rr) * j->row_bytes;
        off[r] = (int32_t)((size_t)rr * j->row_bytes);
    }
    g->off = _mm512_loadu_si512(off);
    g->store = (__mmask16)((1u << nr) - 1);
}

/* The f16 at byte offset o of each of the 16 rows, as f32. */
INLINE __m512 gather_f16(const rows16 *g, size_t o) {
    __m512i v = _mm512_i32gather_epi32(g->off, g->p[0] + o, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

INLINE __m512i load2x256(const uint8_t *a, const uint8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)a)),
                              _mm256_loadu_si256((const __m256i *)(const void *)b), 1);
}

INLINE __m512i load4x128(const uint8_t *a, const uint8_t *b, const uint8_t *c, const uint8_t *d) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)a));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)b), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)c), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)d), 3);
}

/* p[i] holds 4 dword partial sums per 128-bit chunk; returns, per chunk c,
 * lane i = the sum of p[i]'s chunk c. */
INLINE __m512i reduce4(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

/* p[i] (i < 4) holds rows i (lanes 0-7) and i+4 (lanes 8-15), p[4+i] rows
 * 8+i and 12+i; returns lane r = the sum of row r's 8 lanes. */
INLINE __m512i reduce8(const __m512i *p) {
    __m512i u0 = reduce4(p[0], p[1], p[2], p[3]), u1 = reduce4(p[4], p[5], p[6], p[7]);
    __m512i a = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0));
    __m512i b = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm512_add_epi32(a, b);
}

INLINE void store_rows(const mm_job *j, const rows16 *g, int n, int t, __m512 acc) {
    _mm512_mask_storeu_ps(j->y + (size_t)t * j->N + n, g->store, acc);
}

/* ---- q8_0 ----------------------------------------------------------------------- */

INLINE void gemv_q8_0(const mm_job *j, int n, int nr, int t0, const int tt) {
    const mm_act *a = j->a;
    rows16 g;
    rows16_init(&g, j, n, nr);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[GEMV_T];
    UNROLL for (int c = 0; c < tt; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < a->nb; b++) {
        size_t o = (size_t)b * sizeof(hearth_block_q8_0);
        __m512 dw = gather_f16(&g, o);
        __m512i wv[8];
        UNROLL for (int i = 0; i < 4; i++) {
            wv[i] = _mm512_xor_si512(load2x256(g.p[i] + o + 2, g.p[i + 4] + o + 2), flip);
            wv[4 + i] = _mm512_xor_si512(load2x256(g.p[8 + i] + o + 2, g.p[12 + i] + o + 2), flip);
        }
        UNROLL for (int c = 0; c < tt; c++) {
            int t = t0 + c;
            const int8_t *xq = a->qs + (size_t)t * a->qs_stride + 32 * b;
            size_t xo = (size_t)t * a->nb_stride + b;
            __m512i xb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)xq));
            __m512i p[8];
            UNROLL for (int i = 0; i < 8; i++) p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[i], xb);
            __m512i isum = _mm512_sub_epi32(reduce8(p), _mm512_set1_epi32(128 * a->isum[xo]));
            __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(a->d[xo]));
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc[c]);
        }
    }
    UNROLL for (int c = 0; c < tt; c++) store_rows(j, &g, n, t0 + c, acc[c]);
}

/* ---- q4_0 / q4_1 ---------------------------------------------------------------- */

/* is_q4_1: 0 for q4_0 (codes - 8), 1 for q4_1 (codes, plus the min term). */
INLINE void gemv_q4(const mm_job *j, int n, int nr, int t0, const int tt, const int is_q4_1) {
    const mm_act *a = j->a;
    const size_t bb = is_q4_1 ? sizeof(hearth_block_q4_1) : sizeof(hearth_block_q4_0), qo = is_q4_1 ? 4 : 2;
    rows16 g;
    rows16_init(&g, j, n, nr);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 acc[GEMV_T];
    UNROLL for (int c = 0; c < tt; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < a->nb; b++) {
        size_t o = (size_t)b * bb;
        __m512 dw, mw = _mm512_setzero_ps();
        if (is_q4_1) {
            __m512i v = _mm512_i32gather_epi32(g.off, g.p[0] + o, 1);
            dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
            mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
        } else {
            dw = gather_f16(&g, o);
        }
        /* vector i: rows i, i+4, i+8, i+12 in its four 128-bit chunks */
        __m512i lo[4], hi[4];
        UNROLL for (int i = 0; i < 4; i++) {
            __m512i z = load4x128(g.p[i] + o + qo, g.p[i + 4] + o + qo, g.p[i + 8] + o + qo, g.p[i + 12] + o + qo);
            lo[i] = _mm512_and_si512(z, low4);
            hi[i] = _mm512_and_si512(_mm512_srli_epi16(z, 4), low4);
        }
        UNROLL for (int c = 0; c < tt; c++) {
            int t = t0 + c;
            const int8_t *xq = a->qs + (size_t)t * a->qs_stride + 32 * b;
            size_t xo = (size_t)t * a->nb_stride + b;
            __m512i xl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)xq));
            __m512i xh = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(xq + 16)));
            __m512i p[4];
            UNROLL for (int i = 0; i < 4; i++)
                p[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[i], xl), hi[i], xh);
            __m512i isum = reduce4(p[0], p[1], p[2], p[3]);
            if (!is_q4_1) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(8 * a->isum[xo]));
            __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(a->d[xo]));
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc[c]);
            if (is_q4_1) acc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->s[xo]), acc[c]);
        }
    }
    UNROLL for (int c = 0; c < tt; c++) store_rows(j, &g, n, t0 + c, acc[c]);
}

/* ---- q8_0 / q4_0 / q4_1 prefill: panels ---------------------------------------------
 *
 * For T >= GEMM_MIN_T the 16 rows of a group are repacked, KC_BLOCKS blocks
 * of K at a time, into a panel where each 64-byte vector holds the same four
 * consecutive codes of all 16 rows (as VPDPBUSD's unsigned operand), beside
 * the rows' scales as f32. A tile of up to GEMM_C tokens then runs over the
 * panel: four activation codes broadcast per VPDPBUSD give 16 rows' partial
 * dots at once, so a block's exact integer dot per row needs no reduction.
 * Between K chunks the running accumulators live in y. */
/* GEMM_MIN_T 3: from three tokens the panels beat the decode kernels (which
 * cost a pass per token) 1.6x at T = 3 and 1.7x at T = 4 on the default
 * model's gate shape, q4_1, 2 threads (bench_matmul -T, session 38); at
 * T = 2 they win 1.35x in cache but lose ~3% in the model, where the weights
 * stream from DRAM and the repacking shows. */
enum { GEMM_MIN_T = 3, GEMM_C = 8, KC_BLOCKS = 16 };
/* iq4_nl: q4_0's block, its codes' codebook values as q8_0's; q5_0 / q5_1: q4_0's / q4_1's with a fifth bit */
enum { Q_Q8_0, Q_Q4_0, Q_Q4_1, Q_IQ4_NL, Q_Q5_0, Q_Q5_1 };

typedef struct {
    uint8_t q[KC_BLOCKS][8][64];
    float d[KC_BLOCKS][16], m[KC_BLOCKS][16];
} qpanel;

/* 4-bit codes as panel bytes: q4_0 / q4_1's as they are, iq4_nl's codebook values + 128 (as q8_0's) */
INLINE __m512i q4_panel_codes(__m512i c, const int kind) {
    if (kind != Q_IQ4_NL) return c;
    const __m512i book = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)hearth_iq4_values));
    return _mm512_xor_si512(_mm512_shuffle_epi8(book, c), _mm512_set1_epi8((char)0x80));
}

/* Bits 0-3 of each lane's h as bit 4 of its bytes 0-3 (q5's fifth bits of four consecutive elements). */
INLINE __m512i q5_hbits(__m512i h) {
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i b0 = _mm512_slli_epi32(_mm512_and_si512(h, one), 4),
                  b1 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 1), one), 12),
                  b2 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), one), 20),
                  b3 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 3), one), 28);
    return _mm512_or_si512(_mm512_or_si512(b0, b1), _mm512_or_si512(b2, b3));
}

INLINE void pack_q(qpanel *P, const rows16 *g, int b0, int nbk, const int kind) {
    const size_t bb = kind == Q_Q8_0   ? sizeof(hearth_block_q8_0)
                      : kind == Q_Q4_1 ? sizeof(hearth_block_q4_1)
                      : kind == Q_Q5_0 ? sizeof(hearth_block_q5_0)
                      : kind == Q_Q5_1 ? sizeof(hearth_block_q5_1)
                                       : sizeof(hearth_block_q4_0);
    const int q5 = kind == Q_Q5_0 || kind == Q_Q5_1, m1 = kind == Q_Q4_1 || kind == Q_Q5_1;
    const __m512i low4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    for (int bi = 0; bi < nbk; bi++) {
        size_t o = (size_t)(b0 + bi) * bb;
        const uint8_t *base = g->p[0] + o;
        if (kind == Q_Q8_0) {
            UNROLL for (int gi = 0; gi < 8; gi++) {
                __m512i v = _mm512_i32gather_epi32(g->off, base + 2 + 4 * gi, 1);
                _mm512_store_si512(P->q[bi][gi], _mm512_xor_si512(v, flip));
            }
            _mm512_store_ps(P->d[bi], gather_f16(g, o));
        } else {
            const size_t hq = m1 ? 4 : 2, qo = q5 ? hq + 4 : hq; /* q5's qh, then the nibbles */
            const __m512i h = q5 ? _mm512_i32gather_epi32(g->off, base + hq, 1) : _mm512_setzero_si512();
            UNROLL for (int gi = 0; gi < 4; gi++) {
                __m512i v = _mm512_i32gather_epi32(g->off, base + qo + 4 * gi, 1);
                __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                if (q5) {
                    lo = _mm512_or_si512(lo, q5_hbits(_mm512_srli_epi32(h, 4 * gi)));
                    hi = _mm512_or_si512(hi, q5_hbits(_mm512_srli_epi32(h, 16 + 4 * gi)));
                }
                _mm512_store_si512(P->q[bi][gi], q4_panel_codes(lo, kind));
                _mm512_store_si512(P->q[bi][gi + 4], q4_panel_codes(hi, kind));
            }
            __m512i v = _mm512_i32gather_epi32(g->off, base, 1);
            _mm512_store_ps(P->d[bi], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)));
            if (m1) _mm512_store_ps(P->m[bi], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))));
        }
    }
}

/* C tokens from t0 over one panel (blocks b0 .. b0+nbk-1); first: start from 0. */
INLINE void gemm_q_tile(const mm_job *j, const qpanel *P, const rows16 *g, int n, int b0, int nbk, int t0,
                        const int C, int first, const int kind) {
    const mm_act *a = j->a;
    const int8_t *xq[GEMM_C];
    const float *dx[GEMM_C], *sx[GEMM_C];
    const int32_t *xs[GEMM_C];
    __m512 acc[GEMM_C];
    UNROLL for (int c = 0; c < C; c++) {
        int t = t0 + c;
        xq[c] = a->qs + (size_t)t * a->qs_stride;
        dx[c] = a->d + (size_t)t * a->nb_stride;
        xs[c] = a->isum + (size_t)t * a->nb_stride;
        sx[c] = kind == Q_Q4_1 || kind == Q_Q5_1 ? a->s + (size_t)t * a->nb_stride : NULL;
        acc[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(g->store, j->y + (size_t)t * j->N + n);
    }
    for (int bi = 0; bi < nbk; bi++) {
        int b = b0 + bi;
        __m512i ia[GEMM_C];
        UNROLL for (int c = 0; c < C; c++)
            ia[c] = kind == Q_Q8_0 || kind == Q_IQ4_NL ? _mm512_set1_epi32(-128 * xs[c][b])
                    : kind == Q_Q4_0                   ? _mm512_set1_epi32(-8 * xs[c][b])
                    : kind == Q_Q5_0                   ? _mm512_set1_epi32(-16 * xs[c][b])
                                                       : _mm512_setzero_si512();
        UNROLL for (int gi = 0; gi < 8; gi++) {
            __m512i w = _mm512_load_si512(P->q[bi][gi]);
            UNROLL for (int c = 0; c < C; c++) {
                ia[c] = dpbusd_x4(ia[c], w, xq[c] + 32 * b + 4 * gi);
            }
        }
        __m512 dw = _mm512_load_ps(P->d[bi]);
        UNROLL for (int c = 0; c < C; c++) {
            __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(dx[c][b]));
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(ia[c]), acc[c]);
            if (kind == Q_Q4_1 || kind == Q_Q5_1)
                acc[c] = _mm512_fmadd_ps(_mm512_load_ps(P->m[bi]), _mm512_set1_ps(sx[c][b]), acc[c]);
        }
    }
    UNROLL for (int c = 0; c < C; c++) store_rows(j, g, n, t0 + c, acc[c]);
}

/* pack_q's panel from the tiles of panel-laid weights (panel.h): rows 0-7
 * from group tiles t0, rows 8-15 from t1 (NULL: 8 rows, the rest zero);
 * plain loads where pack_q gathers. */
INLINE __m512i tiles_2x256(const uint8_t *a, const uint8_t *b) {
    const __m512i lo = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)a));
    return b ? _mm512_inserti64x4(lo, _mm256_loadu_si256((const __m256i *)(const void *)b), 1) : lo;
}
INLINE __m512 tiles_f16x16(const uint8_t *a, const uint8_t *b) {
    const __m256i lo = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a));
    return _mm512_cvtph_ps(b ? _mm256_inserti128_si256(lo, _mm_loadu_si128((const __m128i *)(const void *)b), 1) : lo);
}
INLINE void pack_q_tiles(qpanel *P, const uint8_t *t0, const uint8_t *t1, int b0, int nbk, const int kind) {
    const size_t bb = kind == Q_Q8_0 ? sizeof(hearth_block_q8_0)
                      : kind == Q_Q4_0 ? sizeof(hearth_block_q4_0) : sizeof(hearth_block_q4_1);
    const size_t head = kind == Q_Q4_1 ? 32 : 16; /* d[8] (and m[8]) before the codes */
    const __m512i low4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    for (int bi = 0; bi < nbk; bi++) {
        const size_t o = (size_t)(b0 + bi) * 8 * bb;
        const uint8_t *a = t0 + o, *b = t1 ? t1 + o : NULL;
        if (kind == Q_Q8_0) {
            UNROLL for (int gi = 0; gi < 8; gi++) {
                __m512i v = tiles_2x256(a + head + 32 * gi, b ? b + head + 32 * gi : NULL);
                _mm512_store_si512(P->q[bi][gi], _mm512_xor_si512(v, flip));
            }
        } else {
            UNROLL for (int gi = 0; gi < 4; gi++) {
                __m512i v = tiles_2x256(a + head + 32 * gi, b ? b + head + 32 * gi : NULL);
                _mm512_store_si512(P->q[bi][gi], _mm512_and_si512(v, low4));
                _mm512_store_si512(P->q[bi][gi + 4], _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
            }
        }
        _mm512_store_ps(P->d[bi], tiles_f16x16(a, b));
        if (kind == Q_Q4_1) _mm512_store_ps(P->m[bi], tiles_f16x16(a + 16, b ? b + 16 : NULL));
    }
}

/* The rows from n < n1 that one pass takes, of weights whose first np rows
 * are panel-laid (np = 0: all stored): 16 from two groups' tiles, 8 from
 * one where the next group is the stored tail or another task's, else up
 * to 16 stored rows. *t0, *t1: the groups' tiles (group n / 8's start at
 * row n's stored offset, panel.h), NULL where the rows are gathered. */
INLINE int panel_step(const mm_job *j, int n, int n1, int np, const uint8_t **t0, const uint8_t **t1) {
    const int two = n + 16 <= n1 && n + 16 <= np, one = !two && n + 8 <= n1 && n + 8 <= np;
    *t0 = two || one ? j->w + (size_t)n * j->row_bytes : NULL;
    *t1 = two ? *t0 + 8 * j->row_bytes : NULL;
    return two ? 16 : one ? 8 : n1 - n < 16 ? n1 - n : 16;
}

/* panel: the weights are panel-laid (panel_step) */
INLINE void gemm_q(const mm_job *j, int n0, int n1, const int kind, const int panel) {
    qpanel P __attribute__((aligned(64)));
    const int nb = j->a->nb, np = panel ? j->N / 8 * 8 : 0;
    for (int n = n0; n < n1;) {
        const uint8_t *t0, *t1;
        const int nr = panel_step(j, n, n1, np, &t0, &t1);
        rows16 g;
        rows16_init(&g, j, n, nr);
        for (int b0 = 0; b0 < nb; b0 += KC_BLOCKS) {
            int nbk = nb - b0 < KC_BLOCKS ? nb - b0 : KC_BLOCKS;
            if (t0) pack_q_tiles(&P, t0, t1, b0, nbk, kind);
            else pack_q(&P, &g, b0, nbk, kind);
            /* token tiles of 8, the rest as 4 + 2 + 1 (each token's arithmetic is the same in any tile) */
            int first = b0 == 0, t0 = 0;
            for (; t0 + 8 <= j->T; t0 += 8) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 8, first, kind);
            if (j->T - t0 >= 4) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 4, first, kind), t0 += 4;
            if (j->T - t0 >= 2) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 2, first, kind), t0 += 2;
            if (j->T - t0 >= 1) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 1, first, kind);
        }
        n += nr;
    }
}

/* Each row group of 16: prefill through panels, few tokens GEMV_T at a time. */
#define ROWS_Q(name, call, kind)                                                       \
    static void name(const mm_job *j, int n0, int n1) {                                \
        if (j->T >= GEMM_MIN_T) {                                                      \
            gemm_q(j, n0, n1, kind, 0);                                                \
            return;                                                                    \
        }                                                                              \
        for (int n = n0; n < n1; n += 16) {                                            \
            int nr = n1 - n < 16 ? n1 - n : 16;                                        \
            for (int t0 = 0; t0 < j->T; t0 += GEMV_T) {                                \
                switch (j->T - t0 < GEMV_T ? j->T - t0 : GEMV_T) {                     \
                case 1: call(1); break;                                                \
                case 2: call(2); break;                                                \
                case 3: call(3); break;                                                \
                default: call(4); break;                                               \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }
#define CALL_Q8_0(tt) gemv_q8_0(j, n, nr, t0, tt)
#define CALL_Q4_0(tt) gemv_q4(j, n, nr, t0, tt, 0)
#define CALL_Q4_1(tt) gemv_q4(j, n, nr, t0, tt, 1)
ROWS_Q(rows_q8_0, CALL_Q8_0, Q_Q8_0)
ROWS_Q(rows_q4_0, CALL_Q4_0, Q_Q4_0)
ROWS_Q(rows_q4_1, CALL_Q4_1, Q_Q4_1)

/* Panel-laid q8_0 / q4_0 / q4_1 (panel.h; laid so on AVX-512 too): decode
 * through AVX2's panel kernels, which read 8 rows' codes with one load and
 * beat the 16-row gathers here 1.8-1.9x at T = 1 (bench_matmul, s30);
 * prefill through this file's panels, packed from the tiles (2.7x AVX2's).
 * Every kernel keeps matmul_scalar.c's order, so the results are the same. */
#define PANEL_Q(name, wi, kind)                                                        \
    static void name(const mm_job *j, int n0, int n1) {                                \
        if (j->T >= GEMM_MIN_T) gemm_q(j, n0, n1, kind, 1);                            \
        else hearth_cpu_mm_avx2.panel[wi](j, n0, n1);                                  \
    }
PANEL_Q(panel_q8_0, MM_Q8_0, Q_Q8_0)
PANEL_Q(panel_q4_0, MM_Q4_0, Q_Q4_0)
PANEL_Q(panel_q4_1, MM_Q4_1, Q_Q4_1)

/* ---- q4_K / q5_K / q6_K: panels for every T ------------------------------------------------
 *
 * One super-block (256) of 16 rows per panel, codes laid out as for q4_0 (four
 * consecutive codes of the 16 rows per vector); the sub-block scales (and
 * q4_K mins) unpacked to one int32 lane per row. Per sub-block, VPDPBUSD
 * sums give each row's exact sub-block dot, which is multiplied by its scale
 * in int32 (VPMULLD) and added into the super-block's isum. */
typedef struct {
    uint8_t q[64][64];       /* [group of 4 codes][row * 4 + e] */
    int32_t sc[16][16];      /* [sub-block][row] (q4_K uses 8) */
    int32_t m[8][16];        /* q4_K mins */
    int32_t m2[8][16];       /* q4_K (4) / q2_K (8) mins of sub-blocks 2k, 2k + 1 as two int16s */
    float d[16], dmin[16];
} kpanel;

/* The q4_K block's dwords of 16 rows, lane r = row r: gathered from stored
 * rows (g), or loaded from the tiles of panel-laid ones (t0: rows 0-7, t1:
 * rows 8-15 or NULL; panel.h: d[8], dmin[8], 3 vectors of scale dwords, 32
 * of code dwords, row r's dword at 4r of a vector). */
typedef struct {
    const rows16 *g;
    const uint8_t *t0, *t1;
} k4src;
INLINE __m512i k4_dword(const k4src *s, int b, int i) { /* dword i after d, dmin: scales 0-2, codes 3-34 */
    if (s->t0) {
        const size_t o = (size_t)b * 8 * sizeof(hearth_block_q4_K) + 32 + 32 * (size_t)i;
        return tiles_2x256(s->t0 + o, s->t1 ? s->t1 + o : NULL);
    }
    return _mm512_i32gather_epi32(s->g->off, s->g->p[0] + (size_t)b * sizeof(hearth_block_q4_K) + 4 + 4 * i, 1);
}
INLINE void k4_scales(const k4src *s, int b, __m512 *d, __m512 *dmin) {
    if (s->t0) {
        const size_t o = (size_t)b * 8 * sizeof(hearth_block_q4_K);
        *d = tiles_f16x16(s->t0 + o, s->t1 ? s->t1 + o : NULL);
        *dmin = tiles_f16x16(s->t0 + o + 16, s->t1 ? s->t1 + o + 16 : NULL);
        return;
    }
    __m512i dd = _mm512_i32gather_epi32(s->g->off, s->g->p[0] + (size_t)b * sizeof(hearth_block_q4_K), 1);
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    *dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

/* d, dmin and the scale dwords s0, s1, s2 (scales[0..3], [4..7], [8..11]) of 16 rows' q4_K / q5_K block */
INLINE void pack_k_scales(kpanel *P, __m512 d, __m512 dmin, __m512i s0, __m512i s1, __m512i s2) {
    const __m512i m6 = _mm512_set1_epi32(63);
    _mm512_store_ps(P->d, d);
    _mm512_store_ps(P->dmin, dmin);
    UNROLL for (int j = 0; j < 4; j++) {
        __m512i a0 = _mm512_srli_epi32(s0, 8 * j), a1 = _mm512_srli_epi32(s1, 8 * j), a2 = _mm512_srli_epi32(s2, 8 * j);
        _mm512_store_si512(P->sc[j], _mm512_and_si512(a0, m6));
        _mm512_store_si512(P->m[j], _mm512_and_si512(a1, m6));
        /* j + 4: low 4 bits from scales[j + 8], high 2 from the top bits of scales[j] / scales[j + 4] */
        __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(a2, _mm512_set1_epi32(15)),
                                        _mm512_and_si512(_mm512_srli_epi32(a0, 2), _mm512_set1_epi32(48)));
        __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), _mm512_set1_epi32(15)),
                                       _mm512_and_si512(_mm512_srli_epi32(a1, 2), _mm512_set1_epi32(48)));
        _mm512_store_si512(P->sc[j + 4], sc_hi);
        _mm512_store_si512(P->m[j + 4], m_hi);
    }
    UNROLL for (int k = 0; k < 4; k++)
        _mm512_store_si512(P->m2[k], _mm512_or_si512(_mm512_load_si512(P->m[2 * k]),
                                                     _mm512_slli_epi32(_mm512_load_si512(P->m[2 * k + 1]), 16)));
}

INLINE void pack_q4_K(kpanel *P, const k4src *src, int b) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    UNROLL for (int c = 0; c < 4; c++) {
        UNROLL for (int gi = 0; gi < 8; gi++) {
            __m512i v = k4_dword(src, b, 3 + 8 * c + gi);
            _mm512_store_si512(P->q[(2 * c) * 8 + gi], _mm512_and_si512(v, low4));
            _mm512_store_si512(P->q[(2 * c + 1) * 8 + gi], _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
        }
    }
    __m512 d, dmin;
    k4_scales(src, b, &d, &dmin);
    pack_k_scales(P, d, dmin, k4_dword(src, b, 0), k4_dword(src, b, 1), k4_dword(src, b, 2));
}

/* q5_K (stored rows): q4_K's first 16 bytes, qh[32] at 16, the nibbles at 48; bit j of qh[l] is the fifth bit
 * of element l of sub-block j */
INLINE void pack_q5_K(kpanel *P, const rows16 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q5_K);
    const __m512i low4 = _mm512_set1_epi8(0x0f), one = _mm512_set1_epi8(1);
    UNROLL for (int gi = 0; gi < 8; gi++) {
        __m512i h = _mm512_i32gather_epi32(g->off, base + 16 + 4 * gi, 1);
        UNROLL for (int c = 0; c < 4; c++) {
            __m512i v = _mm512_i32gather_epi32(g->off, base + 48 + 32 * c + 4 * gi, 1);
            __m512i h0 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * c), one), 4);
            __m512i h1 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * c + 1), one), 4);
            _mm512_store_si512(P->q[(2 * c) * 8 + gi], _mm512_or_si512(_mm512_and_si512(v, low4), h0));
            _mm512_store_si512(P->q[(2 * c + 1) * 8 + gi],
                               _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), h1));
        }
    }
    __m512i dd = _mm512_i32gather_epi32(g->off, base, 1);
    pack_k_scales(P, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)),
                  _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))),
                  _mm512_i32gather_epi32(g->off, base + 4, 1), _mm512_i32gather_epi32(g->off, base + 8, 1),
                  _mm512_i32gather_epi32(g->off, base + 12, 1));
}

INLINE void pack_q6_K(kpanel *P, const rows16 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q6_K);
    const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(3);
    UNROLL for (int h = 0; h < 2; h++) {
        UNROLL for (int l0 = 0; l0 < 32; l0 += 4) {
            __m512i ql0 = _mm512_i32gather_epi32(g->off, base + 64 * h + l0, 1);
            __m512i ql1 = _mm512_i32gather_epi32(g->off, base + 64 * h + 32 + l0, 1);
            __m512i qh = _mm512_i32gather_epi32(g->off, base + 128 + 32 * h + l0, 1);
            __m512i v[4];
            v[0] = _mm512_or_si512(_mm512_and_si512(ql0, low4), _mm512_slli_epi16(_mm512_and_si512(qh, low2), 4));
            v[1] = _mm512_or_si512(_mm512_and_si512(ql1, low4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2), low2), 4));
            v[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), low4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), low2), 4));
            v[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), low4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 6), low2), 4));
            UNROLL for (int c = 0; c < 4; c++) {
                int e = 128 * h + 32 * c + l0; /* first element of this group */
                _mm512_store_si512(P->q[e / 4], v[c]);
            }
        }
    }
    UNROLL for (int i = 0; i < 4; i++) { /* int8 scales, 4 per gathered dword */
        __m512i s = _mm512_i32gather_epi32(g->off, base + 192 + 4 * i, 1);
        UNROLL for (int k = 0; k < 4; k++)
            _mm512_store_si512(P->sc[4 * i + k], _mm512_srai_epi32(_mm512_slli_epi32(s, 24 - 8 * k), 24));
    }

    __m512i dd = _mm512_i32gather_epi32(g->off, base + 206, 1); /* scales[14..15], d: stays inside the block */
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
}

/* q3_K / q2_K / iq4_xs: as q6_K, 16 sub-blocks of 16 whose unsigned codes are dotted and a constant
 * times the sub-block's bsum taken off (q3_K: codes 0..7, 4; iq4_xs: the codebook value + 128, 128; q2_K:
 * codes 0..3, none), each sub-block's sum then weighed by its scale (iq4_xs: a sub-block of 32's scale for
 * both halves); q2_K's mins go as q4_K's, eight pairs. */
INLINE __m512i gather16(const rows16 *g, const uint8_t *p) { return _mm512_i32gather_epi32(g->off, p, 1); }

INLINE void pack_q3_K(kpanel *P, const rows16 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q3_K);
    const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
    UNROLL for (int h = 0; h < 2; h++)
        for (int l0 = 0; l0 < 32; l0 += 4) {
            __m512i Q = gather16(g, base + 32 + 32 * h + l0), H = gather16(g, base + l0);
            UNROLL for (int j = 0; j < 4; j++) {
                __m512i c = _mm512_and_si512(_mm512_srli_epi16(Q, 2 * j), three);
                c = _mm512_or_si512(c, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 4 * h + j), one), 2));
                _mm512_store_si512(P->q[(128 * h + 32 * j + l0) / 4], c);
            }
        }
    const __m512i a[3] = {gather16(g, base + 96), gather16(g, base + 100), gather16(g, base + 104)};
    UNROLL for (int s = 0; s < 16; s++) { /* hearth_q3_K_scale, a lane a row */
        int lb = s % 8;
        __m512i lo = _mm512_and_si512(_mm512_srli_epi32(a[lb / 4], 8 * (lb % 4) + 4 * (s / 8)), _mm512_set1_epi32(15));
        __m512i hi = _mm512_and_si512(_mm512_srli_epi32(a[2], 8 * (s % 4) + 2 * (s / 4)), _mm512_set1_epi32(3));
        _mm512_store_si512(P->sc[s],
                           _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32)));
    }
    __m512i dd = gather16(g, base + 106); /* scales[10..11], d: stays inside the block */
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
}

INLINE void pack_q2_K(kpanel *P, const rows16 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q2_K);
    const __m512i three = _mm512_set1_epi8(3), low4 = _mm512_set1_epi32(15);
    UNROLL for (int h = 0; h < 2; h++)
        for (int l0 = 0; l0 < 32; l0 += 4) {
            __m512i Q = gather16(g, base + 16 + 32 * h + l0);
            UNROLL for (int j = 0; j < 4; j++)
                _mm512_store_si512(P->q[(128 * h + 32 * j + l0) / 4],
                                   _mm512_and_si512(_mm512_srli_epi16(Q, 2 * j), three));
        }
    UNROLL for (int i = 0; i < 4; i++) {
        __m512i s = gather16(g, base + 4 * i);
        UNROLL for (int k = 0; k < 4; k++) {
            __m512i v = _mm512_and_si512(_mm512_srli_epi32(s, 8 * k), _mm512_set1_epi32(255));
            _mm512_store_si512(P->sc[4 * i + k], _mm512_and_si512(v, low4));
            _mm512_store_si512(P->m[(4 * i + k) % 8], _mm512_srli_epi32(v, 4)); /* staged: pairs below */
            if (k % 2) /* sub-blocks 4i + k - 1, 4i + k: one dword of two int16s */
                _mm512_store_si512(P->m2[(4 * i + k) / 2],
                                   _mm512_or_si512(_mm512_load_si512(P->m[(4 * i + k - 1) % 8]),
                                                   _mm512_slli_epi32(_mm512_srli_epi32(v, 4), 16)));
        }
    }
    __m512i dd = gather16(g, base + 80);
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    _mm512_store_ps(P->dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
}

INLINE void pack_iq4_xs(kpanel *P, const rows16 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_iq4_xs);
    const __m512i low4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    const __m512i book = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)hearth_iq4_values));
    UNROLL for (int ib = 0; ib < 8; ib++)
        UNROLL for (int gi = 0; gi < 4; gi++) {
            __m512i Q = gather16(g, base + 8 + 16 * ib + 4 * gi);
            __m512i lo = _mm512_shuffle_epi8(book, _mm512_and_si512(Q, low4));
            __m512i hi = _mm512_shuffle_epi8(book, _mm512_and_si512(_mm512_srli_epi16(Q, 4), low4));
            _mm512_store_si512(P->q[8 * ib + gi], _mm512_xor_si512(lo, flip)); /* value + 128 */
            _mm512_store_si512(P->q[8 * ib + 4 + gi], _mm512_xor_si512(hi, flip));
        }
    __m512i dh = gather16(g, base), sl = gather16(g, base + 4);
    UNROLL for (int ib = 0; ib < 8; ib++) { /* hearth_iq4_xs_scale, a lane a row */
        __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 8 * (ib / 2) + 4 * (ib % 2)), _mm512_set1_epi32(15));
        __m512i hi = _mm512_and_si512(_mm512_srli_epi32(dh, 16 + 2 * ib), _mm512_set1_epi32(3));
        __m512i s = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
        _mm512_store_si512(P->sc[2 * ib], s);
        _mm512_store_si512(P->sc[2 * ib + 1], s);
    }
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dh)));
}

enum { K_Q4_K, K_Q6_K, K_Q5_K, K_Q3_K, K_Q2_K, K_IQ4_XS };

/* The sub-block loops stay rolled, as in AVX2's gemm_k_tile: unrolled, a
 * tile of 8 tokens was ~800 instructions with spills, and its speed swung
 * with where the linker put it (the CUDA build's hearth prefilled the
 * Q4_K_M model 13% slower than the CPU build's, with identical objects).
 * Rolled, bench_matmul -t 1 prefill 128 x 4096 x 4096: q4_K 10.0-11.8k ->
 * 6.6-7.0k us, q6_K 15.5-16.6k -> 8.6-10.5k (s32). */
INLINE void gemm_k_tile(const mm_job *j, const kpanel *P, const rows16 *g, int n, int b, int t0, const int C,
                        const int kind) {
    const mm_act *a = j->a;
    __m512i isum[GEMM_C], imin[GEMM_C];
    const int8_t *xq[GEMM_C];
    const int16_t *bs[GEMM_C];
    UNROLL for (int c = 0; c < C; c++) {
        int t = t0 + c;
        xq[c] = a->qs + (size_t)t * a->qs_stride + 256 * b;
        bs[c] = a->bsums + ((size_t)t * a->nb_stride + b) * 16;
        isum[c] = imin[c] = _mm512_setzero_si512();
    }
    if (kind == K_Q4_K || kind == K_Q5_K) { /* the same sums, codes <= 15 or <= 31 (VPDPBUSD adds in int32) */
        for (int sb = 0; sb < 8; sb++) {
            __m512i ia[GEMM_C];
            UNROLL for (int c = 0; c < C; c++) ia[c] = _mm512_setzero_si512();
            UNROLL for (int gi = 0; gi < 8; gi++) {
                __m512i w = _mm512_load_si512(P->q[8 * sb + gi]);
                UNROLL for (int c = 0; c < C; c++) {
                    ia[c] = dpbusd_x4(ia[c], w, xq[c] + 32 * sb + 4 * gi);
                }
            }
            __m512i sc = _mm512_load_si512(P->sc[sb]);
            UNROLL for (int c = 0; c < C; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(ia[c], sc));
        }
        /* the mins: m < 64 and each sub-block's sum of x |s| <= 4064, so sub-blocks 2k and 2k + 1 are one
         * dword of two int16s on both sides of a dpwssd */
        UNROLL for (int c = 0; c < C; c++) {
            __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)bs[c]), _mm256_set1_epi16(1));
            int32_t p16[4];
            _mm_storeu_si128((__m128i *)(void *)p16,
                             _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packs_epi32(pairs, pairs), 0x08)));
            UNROLL for (int k = 0; k < 4; k++)
                imin[c] = _mm512_dpwssd_epi32(imin[c], _mm512_load_si512(P->m2[k]), _mm512_set1_epi32(p16[k]));
        }
    } else {
        const int off = kind == K_Q6_K ? 32 : kind == K_Q3_K ? 4 : kind == K_IQ4_XS ? 128 : 0;
        for (int sb = 0; sb < 16; sb++) {
            __m512i ia[GEMM_C];
            UNROLL for (int c = 0; c < C; c++) ia[c] = _mm512_set1_epi32(-off * bs[c][sb]);
            UNROLL for (int gi = 0; gi < 4; gi++) {
                __m512i w = _mm512_load_si512(P->q[4 * sb + gi]);
                UNROLL for (int c = 0; c < C; c++) {
                    ia[c] = dpbusd_x4(ia[c], w, xq[c] + 16 * sb + 4 * gi);
                }
            }
            __m512i sc = _mm512_load_si512(P->sc[sb]);
            UNROLL for (int c = 0; c < C; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(ia[c], sc));
        }
        if (kind == K_Q2_K) /* the mins (< 16) against the bsums (|.| <= 2032), pairs of sub-blocks as int16s */
            UNROLL for (int c = 0; c < C; c++)
                UNROLL for (int k = 0; k < 8; k++) {
                    uint32_t pair = (uint16_t)bs[c][2 * k] | (uint32_t)(uint16_t)bs[c][2 * k + 1] << 16;
                    imin[c] = _mm512_dpwssd_epi32(imin[c], _mm512_load_si512(P->m2[k]), _mm512_set1_epi32((int)pair));
                }
    }
    __m512 dw = _mm512_load_ps(P->d), dm = _mm512_load_ps(P->dmin);
    UNROLL for (int c = 0; c < C; c++) {
        int t = t0 + c;
        float *yp = j->y + (size_t)t * j->N + n;
        __m512 acc = b == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(g->store, yp);
        __m512 dx = _mm512_set1_ps(a->d[(size_t)t * a->nb_stride + b]);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(isum[c]), acc);
        if (kind == K_Q4_K || kind == K_Q5_K || kind == K_Q2_K)
            acc = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(imin[c]), acc);
        _mm512_mask_storeu_ps(yp, g->store, acc);
    }
}

/* panel (q4_K): the weights are panel-laid (panel_step) */
INLINE void gemm_k(const mm_job *j, int n0, int n1, const int kind, const int panel) {
    kpanel P __attribute__((aligned(64)));
    const int np = panel ? j->N / 8 * 8 : 0;
    for (int n = n0; n < n1;) {
        k4src src;
        const int nr = panel_step(j, n, n1, np, &src.t0, &src.t1);
        rows16 g;
        rows16_init(&g, j, n, nr);
        src.g = &g;
        for (int b = 0; b < j->a->nb; b++) {
            if (kind == K_Q4_K) pack_q4_K(&P, &src, b);
            else if (kind == K_Q5_K) pack_q5_K(&P, &g, b);
            else if (kind == K_Q3_K) pack_q3_K(&P, &g, b);
            else if (kind == K_Q2_K) pack_q2_K(&P, &g, b);
            else if (kind == K_IQ4_XS) pack_iq4_xs(&P, &g, b);
            else pack_q6_K(&P, &g, b);
            int t0 = 0;
            for (; t0 + 8 <= j->T; t0 += 8) gemm_k_tile(j, &P, &g, n, b, t0, 8, kind);
            if (j->T - t0 >= 4) gemm_k_tile(j, &P, &g, n, b, t0, 4, kind), t0 += 4;
            if (j->T - t0 >= 2) gemm_k_tile(j, &P, &g, n, b, t0, 2, kind), t0 += 2;
            if (j->T - t0 >= 1) gemm_k_tile(j, &P, &g, n, b, t0, 1, kind);
        }
        n += nr;
    }
}

static void rows_q4_K(const mm_job *j, int n0, int n1) { gemm_k(j, n0, n1, K_Q4_K, 0); }
/* Prefill through this file's panels, decode (T < GEMM_MIN_T) through AVX2's row kernels: q6_K (2.3x these
 * panels at T = 1 on a Zen 4 VM, bench_matmul, s30), q5_K as q6_K; q2_K, q3_K, iq4_xs (the K panels); q5_0 / q5_1
 * (q4_0's / q4_1's panels, the fifth bits or-ed in while packing); iq4_nl (q8_0's, its codes looked up). */
#define PREFILL_PANELS(name, gemm, kind, wi)                                           \
    static void name(const mm_job *j, int n0, int n1) {                                \
        if (j->T >= GEMM_MIN_T) gemm(j, n0, n1, kind, 0);                              \
        else hearth_cpu_mm_avx2.rows[wi](j, n0, n1);                                   \
    }
PREFILL_PANELS(rows_q6_K, gemm_k, K_Q6_K, MM_Q6_K)
PREFILL_PANELS(rows_q5_K, gemm_k, K_Q5_K, MM_Q5_K)
PREFILL_PANELS(rows_q2_K, gemm_k, K_Q2_K, MM_Q2_K)
PREFILL_PANELS(rows_q3_K, gemm_k, K_Q3_K, MM_Q3_K)
PREFILL_PANELS(rows_iq4_xs, gemm_k, K_IQ4_XS, MM_IQ4_XS)
PREFILL_PANELS(rows_q5_0, gemm_q, Q_Q5_0, MM_Q5_0)
PREFILL_PANELS(rows_q5_1, gemm_q, Q_Q5_1, MM_Q5_1)
PREFILL_PANELS(rows_iq4_nl, gemm_q, Q_IQ4_NL, MM_IQ4_NL)
/* q4_K panel-laid: decode through AVX2's panel kernel (5.3x this file's at T = 1 on a Zen 4 VM, s30), prefill
 * through these panels packed from the tiles */
static void panel_q4_K(const mm_job *j, int n0, int n1) {
    if (j->T >= GEMM_MIN_T) gemm_k(j, n0, n1, K_Q4_K, 1);
    else hearth_cpu_mm_avx2.panel[MM_Q4_K](j, n0, n1);
}

/* ---- float weights ---------------------------------------------------------------- */

enum { W_F32, W_F16, W_BF16 };

INLINE __m512 load_w(const uint8_t *row, int k, __mmask16 m, const int wt) {
    if (wt == W_F32) return _mm512_maskz_loadu_ps(m, (const float *)(const void *)row + k);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)row + k);
    if (wt == W_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The pairwise tree of matmul_scalar.c: (l, l+8), (l, l+4), (l, l+2), (0, 1). */
INLINE float tree16(__m512 a) {
    __m256 b = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

/* A tile of R rows x C tokens (R <= 4, C <= 6): 16-lane FMA chains over k. */
INLINE void ftile(const mm_job *j, int n, const int R, int t0, const int C, const int wt) {
    const uint8_t *w[4];
    const float *x[6];
    UNROLL for (int r = 0; r < R; r++) w[r] = j->w + (size_t)(n + r) * j->row_bytes;
    UNROLL for (int c = 0; c < C; c++)
        x[c] = wt == W_F32 ? j->x + (size_t)(t0 + c) * j->K : j->a->f + (size_t)(t0 + c) * j->a->f_stride;
    __m512 acc[4][6];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    int K = j->K, k = 0;
    const size_t es = wt == W_F32 ? 4 : 2, next = (size_t)R * j->row_bytes; /* the next tile's rows, at this k */
    for (; k + 16 <= K; k += 16) {
        if (es == 4 || !(k & 16)) /* a line a row: the hardware prefetchers fall behind rows from DRAM */
            UNROLL for (int r = 0; r < R; r++)
                _mm_prefetch((const char *)((uintptr_t)w[r] + next + (size_t)k * es), _MM_HINT_T0);
        __m512 wv[4], xv[6];
        UNROLL for (int r = 0; r < R; r++) wv[r] = load_w(w[r], k, 0xffff, wt);
        UNROLL for (int c = 0; c < C; c++) xv[c] = _mm512_loadu_ps(x[c] + k);
        UNROLL for (int r = 0; r < R; r++)
            UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(wv[r], xv[c], acc[r][c]);
    }
    if (k < K) { /* masked lanes stay as they are: fma(0, 0, acc) == acc */
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        __m512 wv[4], xv[6];
        UNROLL for (int r = 0; r < R; r++) wv[r] = load_w(w[r], k, m, wt);
        UNROLL for (int c = 0; c < C; c++) xv[c] = _mm512_maskz_loadu_ps(m, x[c] + k);
        UNROLL for (int r = 0; r < R; r++)
            UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(wv[r], xv[c], acc[r][c]);
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) j->y[(size_t)(t0 + c) * j->N + n + r] = tree16(acc[r][c]);
}

INLINE void frows_c(const mm_job *j, int n0, int n1, int t0, const int C, const int wt) {
    int n = n0;
    for (; n + 4 <= n1; n += 4) ftile(j, n, 4, t0, C, wt);
    for (; n < n1; n++) ftile(j, n, 1, t0, C, wt);
}

/* Rows n0 .. n1 for every token: token tiles of 6, the rest as 4 + 2 + 1. */
INLINE void frows_block(const mm_job *j, int n0, int n1, const int wt) {
    int t0 = 0;
    for (; t0 + 6 <= j->T; t0 += 6) frows_c(j, n0, n1, t0, 6, wt);
    if (j->T - t0 >= 4) frows_c(j, n0, n1, t0, 4, wt), t0 += 4;
    if (j->T - t0 >= 2) frows_c(j, n0, n1, t0, 2, wt), t0 += 2;
    if (j->T - t0 >= 1) frows_c(j, n0, n1, t0, 1, wt);
}

/* Blocks of rows that stay in L2 across the passes over the tokens (mm_float_block_rows). */
INLINE void frows(const mm_job *j, int n0, int n1, const int wt) {
    const int nb = mm_float_block_rows(j, n0, n1, 6);
    for (int b0 = n0; b0 < n1; b0 += nb) frows_block(j, b0, b0 + nb < n1 ? b0 + nb : n1, wt);
}

static void rows_f32(const mm_job *j, int n0, int n1) { frows(j, n0, n1, W_F32); }
static void rows_f16(const mm_job *j, int n0, int n1) { frows(j, n0, n1, W_F16); }
static void rows_bf16(const mm_job *j, int n0, int n1) { frows(j, n0, n1, W_BF16); }

const mm_isa hearth_cpu_mm_avx512 = {
    .name = "avx512",
    .rows = {[MM_F32] = rows_f32, [MM_F16] = rows_f16, [MM_BF16] = rows_bf16, [MM_Q4_0] = rows_q4_0,
             [MM_Q4_1] = rows_q4_1, [MM_Q8_0] = rows_q8_0, [MM_Q4_K] = rows_q4_K, [MM_Q6_K] = rows_q6_K,
             [MM_Q5_K] = rows_q5_K, [MM_Q5_0] = rows_q5_0, [MM_Q5_1] = rows_q5_1, [MM_Q2_K] = rows_q2_K,
             [MM_Q3_K] = rows_q3_K, [MM_IQ4_NL] = rows_iq4_nl, [MM_IQ4_XS] = rows_iq4_xs},
    .panel = {[MM_Q4_0] = panel_q4_0, [MM_Q4_1] = panel_q4_1, [MM_Q8_0] = panel_q8_0, [MM_Q4_K] = panel_q4_K},
    .act = {[ACT_F16] = act_f16, [ACT_BF16] = act_bf16, [ACT_Q8_0] = act_q8_01, [ACT_Q8_1] = act_q8_01,
            [ACT_Q8_K] = act_q8_K},
};

#else /* not x86-64: no kernels; matmul.c never selects this table */

const mm_isa hearth_cpu_mm_avx512 = {.name = "avx512"};

#endif
