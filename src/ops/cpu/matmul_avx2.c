/* matmul_avx2.c - AVX2 + FMA + F16C kernels (x86-64 CPUs from 2013 on), chosen
 * at run time (matmul.c); the whole file is compiled for that target.
 *
 * Same arithmetic as matmul_scalar.c, bit for bit:
 *  - q8_0 / q4_0 / q4_1, "lane = row": 8 weight rows at a time; per block,
 *    PMADDUBSW + PMADDWD give each row's partial dots, a transpose-add tree
 *    turns them into one exact integer dot per lane, and one FMA per block
 *    updates the 8 rows' accumulators. q8_0 uses |w| times sign(x, w) (no
 *    int16 overflow: 2 * 128 * 127 < 2^15); q4 nibbles enter unsigned, with
 *    the -8 offset of q4_0 removed in integers.
 *  - prefill (T >= 5) of those and of the K-quants and iq4_xs: 8-row panels (four
 *    codes of 8 rows per vector), dotted with broadcast activations; sums stay
 *    in int16 only as far as no overflow is possible (q4: 8 groups, 8 * 2 *
 *    15 * 127 < 2^15; q6: 2 groups).
 *  - float weights: the 16-lane chains as two 8-lane halves. */
#include "core/half.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/quant.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#pragma GCC target("avx2,fma,f16c,bmi,bmi2")

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

enum { GEMV_T = 4, PANEL_C = 4 };

/* ---- activations ------------------------------------------------------------- */

INLINE int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static void act_q8_01(const float *x, const mm_act *a, int t0, int t1) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), ones8 = _mm256_set1_epi8(1);
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        int8_t *q = a->qs + (size_t)t * a->qs_stride;
        size_t o = (size_t)t * a->nb_stride;
        for (int b = 0; b < a->nb; b++, xt += 32, q += 32) {
            __m256 v[4];
            __m256 m = _mm256_setzero_ps();
            UNROLL for (int i = 0; i < 4; i++) {
                v[i] = _mm256_loadu_ps(xt + 8 * i);
                m = _mm256_max_ps(m, _mm256_and_ps(v[i], absmask));
            }
            __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            float amax = _mm_cvtss_f32(m4);
            float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
            __m256 vid = _mm256_set1_ps(id);
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[0], vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v[1], vid));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v[2], vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v[3], vid));
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            p = _mm256_permutevar8x32_epi32(p, perm);
            _mm256_storeu_si256((__m256i *)(void *)q, p);
            int sum = hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, p), _mm256_set1_epi16(1)));
            a->d[o + b] = _cvtsh_ss(_cvtss_sh(d, 0));
            a->isum[o + b] = sum;
            if (a->s) a->s[o + b] = _cvtsh_ss(_cvtss_sh(d * (float)sum, 0));
        }
    }
}

static void act_f16(const float *x, const mm_act *a, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        float *f = a->f + (size_t)t * a->f_stride;
        int k = 0;
        for (; k + 8 <= a->K; k += 8)
            _mm256_storeu_ps(f + k, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(xt + k), _MM_FROUND_TO_NEAREST_INT)));
        for (; k < a->K; k++) f[k] = hearth_f16_to_f32(hearth_f32_to_f16(xt[k]));
    }
}

static void act_bf16(const float *x, const mm_act *a, int t0, int t1) {
    const __m256i lsb = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x00400000);
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        float *f = a->f + (size_t)t * a->f_stride;
        int k = 0;
        for (; k + 8 <= a->K; k += 8) {
            __m256i u = _mm256_castps_si256(_mm256_loadu_ps(xt + k));
            __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), lsb)));
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf); /* signed compare is fine: both < 2^31 */
            r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
            _mm256_storeu_ps(f + k, _mm256_castsi256_ps(_mm256_and_si256(r, hi)));
        }
        for (; k < a->K; k++) f[k] = hearth_bf16_to_f32(hearth_f32_to_bf16(xt[k]));
    }
}

/* ---- quantized weights, lane = row ----------------------------------------------- */

typedef struct {
    const uint8_t *p[8];
    __m256i off;   /* byte offsets of the rows from p[0], for gathers */
    __m256i store; /* lanes of real rows */
} rows8;

INLINE void rows8_init(rows8 *g, const mm_job *j, int n, int nr) {
    int32_t off[8], st[8];
    for (int r = 0; r < 8; r++) {
        int rr = r < nr ? r : nr - 1;
        g->p[r] = j->w + (size_t)(n + rr) * j->row_bytes;
        off[r] = (int32_t)((size_t)rr * j->row_bytes);
        st[r] = r < nr ? -1 : 0;
    }
    g->off = _mm256_loadu_si256((const __m256i *)(const void *)off);
    g->store = _mm256_loadu_si256((const __m256i *)(const void *)st);
}

/* The f16 at byte offset o of each row (and the f16 after it, if hi), as f32. */
INLINE __m256 load_f16x8(const rows8 *g, size_t o) {
    uint16_t h[8];
    UNROLL for (int r = 0; r < 8; r++) memcpy(&h[r], g->p[r] + o, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
}

/* p[i]: row i's partial sums in 8 lanes; returns lane i = row i's sum. */
INLINE __m256i reduce8(const __m256i *p) {
    __m256i s01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
    __m256i s23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
    __m256i s45 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[4], p[5]), _mm256_unpackhi_epi32(p[4], p[5]));
    __m256i s67 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[6], p[7]), _mm256_unpackhi_epi32(p[6], p[7]));
    __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
    __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(s45, s67), _mm256_unpackhi_epi64(s45, s67));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

INLINE void store_rows(const mm_job *j, const rows8 *g, int n, int t, __m256 acc) {
    _mm256_maskstore_ps(j->y + (size_t)t * j->N + n, g->store, acc);
}

enum { Q_Q8_0, Q_Q4_0, Q_Q4_1, Q_Q5_0, Q_Q5_1, Q_IQ4_NL };

/* A block's bytes, and where its codes (and q5's fifth bits) start. */
INLINE size_t q_bytes(const int kind) {
    return kind == Q_Q8_0 ? sizeof(hearth_block_q8_0) : kind == Q_Q4_0 || kind == Q_IQ4_NL ? sizeof(hearth_block_q4_0)
           : kind == Q_Q4_1 ? sizeof(hearth_block_q4_1) : kind == Q_Q5_0 ? sizeof(hearth_block_q5_0)
                                                        : sizeof(hearth_block_q5_1);
}
INLINE size_t q_codes(const int kind) {
    return kind == Q_Q4_1 ? 4 : kind == Q_Q5_0 ? 6 : kind == Q_Q5_1 ? 8 : 2;
}
INLINE size_t q_high(const int kind) { return kind == Q_Q5_0 ? 2 : 4; }
INLINE int q_has_min(const int kind) { return kind == Q_Q4_1 || kind == Q_Q5_1; }
INLINE int q_is5(const int kind) { return kind == Q_Q5_0 || kind == Q_Q5_1; }
/* signed codes (q8_0, and iq4_nl's codebook values): dotted as |w| * sign(x, w) */
INLINE int q_signed(const int kind) { return kind == Q_Q8_0 || kind == Q_IQ4_NL; }

/* The 32 codes of a q4 block as bytes 0..15 (element order). */
INLINE __m256i q4_bytes(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* A q5 block's fifth bits as 0x10 in byte e (element order): byte e / 8 of qh spread over 8 bytes, each
 * keeping its own bit. */
INLINE __m256i q5_high(const uint8_t *qh) {
    int32_t h;
    memcpy(&h, qh, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                            3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
    __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(h), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

/* Bits s .. s + 3 of each dword lane of h (a q5 block's qh, gathered for 8 rows) as 0x10 in its bytes 0..3. */
INLINE __m256i q5_high4(__m256i h, int s) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4,
                                            8, 8, 8, 8, 12, 12, 12, 12);
    const __m256i bit = _mm256_set1_epi32(0x08040201);
    __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_srli_epi32(h, s), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

/* The 32 codes of an iq4_nl / iq4_xs sub-block (q4_0's nibble order) looked up in the codebook: int8 values. */
INLINE __m256i iq4_vals(const uint8_t *qs) {
    const __m256i book = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)hearth_iq4_values));
    return _mm256_shuffle_epi8(book, q4_bytes(qs));
}

INLINE void gemv8(const mm_job *j, int n, int nr, int t0, const int tt, const int kind) {
    const mm_act *a = j->a;
    const size_t bb = q_bytes(kind), qo = q_codes(kind);
    const __m256i ones = _mm256_set1_epi16(1);
    rows8 g;
    rows8_init(&g, j, n, nr);
    __m256 acc[GEMV_T];
    UNROLL for (int c = 0; c < tt; c++) acc[c] = _mm256_setzero_ps();
    const size_t next = 8 * j->row_bytes; /* the next 8 rows' block b (panel_gemv's reason; an integer) */
    for (int b = 0; b < a->nb; b++) {
        size_t o = (size_t)b * bb;
        if (t0 == 0)
            UNROLL for (int i = 0; i < 8; i++) _mm_prefetch((const char *)((uintptr_t)g.p[i] + o + next), _MM_HINT_T0);
        __m256 dw = load_f16x8(&g, o), mw = _mm256_setzero_ps();
        if (q_has_min(kind)) mw = load_f16x8(&g, o + 2);
        __m256i w5[8];
        if (q_is5(kind))
            UNROLL for (int i = 0; i < 8; i++)
                w5[i] = _mm256_or_si256(q4_bytes(g.p[i] + o + qo), q5_high(g.p[i] + o + q_high(kind)));
        UNROLL for (int c = 0; c < tt; c++) {
            int t = t0 + c;
            size_t xo = (size_t)t * a->nb_stride + b;
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(a->qs + (size_t)t * a->qs_stride + 32 * b));
            __m256i p[8];
            UNROLL for (int i = 0; i < 8; i++) {
                if (q_signed(kind)) {
                    __m256i w = kind == Q_IQ4_NL ? iq4_vals(g.p[i] + o + 2)
                                                 : _mm256_loadu_si256((const __m256i *)(const void *)(g.p[i] + o + 2));
                    p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), ones);
                } else if (q_is5(kind)) { /* codes <= 31: a pair <= 2 * 31 * 128 */
                    p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(w5[i], x), ones);
                } else {
                    p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(q4_bytes(g.p[i] + o + qo), x), ones);
                }
            }
            __m256i isum = reduce8(p);
            if (kind == Q_Q4_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a->isum[xo]));
            if (kind == Q_Q5_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(16 * a->isum[xo]));
            __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(a->d[xo]));
            acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[c]);
            if (q_has_min(kind)) acc[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a->s[xo]), acc[c]);
        }
    }
    UNROLL for (int c = 0; c < tt; c++) store_rows(j, &g, n, t0 + c, acc[c]);
}

/* ---- q8_0 / q4_0 / q4_1 prefill: 8-row panels ---------------------------------
 *
 * As on AVX-512: KC_BLOCKS blocks of 8 rows repacked so that a vector holds
 * four codes of each row, dotted with broadcast activations by PMADDUBSW.
 * q4 codes (<= 15) let a whole block's eight groups add up in int16 (<= 8 *
 * 2 * 15 * 127 < 2^15) before one PMADDWD; q8_0 stores the codes signed and
 * uses |w| * sign(x, w), widening every group. */
enum { GEMM_MIN_T = 5, KC_BLOCKS = 16 };

typedef struct {
    uint8_t q[KC_BLOCKS][8][32];
    float d[KC_BLOCKS][8], m[KC_BLOCKS][8];
} qpanel;

INLINE __m256i gather(const rows8 *g, const uint8_t *p) { return _mm256_i32gather_epi32((const int *)(const void *)p, g->off, 1); }

INLINE __m256 cvt_lo16(__m256i v) { /* the low f16 of each dword lane, as f32 */
    __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
    __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    return _mm256_cvtph_ps(h);
}

INLINE void pack_q(qpanel *P, const rows8 *g, int b0, int nbk, const int kind) {
    const size_t bb = q_bytes(kind);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int bi = 0; bi < nbk; bi++) {
        const uint8_t *base = g->p[0] + (size_t)(b0 + bi) * bb;
        if (kind == Q_Q8_0) {
            UNROLL for (int gi = 0; gi < 8; gi++)
                _mm256_store_si256((__m256i *)(void *)P->q[bi][gi], gather(g, base + 2 + 4 * gi));
        } else {
            const size_t qo = q_codes(kind);
            const __m256i h = q_is5(kind) ? gather(g, base + q_high(kind)) : _mm256_setzero_si256();
            const __m256i book =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)hearth_iq4_values));
            UNROLL for (int gi = 0; gi < 4; gi++) {
                __m256i v = gather(g, base + qo + 4 * gi);
                __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                if (kind == Q_IQ4_NL) lo = _mm256_shuffle_epi8(book, lo), hi = _mm256_shuffle_epi8(book, hi);
                if (q_is5(kind)) { /* elements 4 gi .. + 3 and 16 + 4 gi .. + 3 */
                    lo = _mm256_or_si256(lo, q5_high4(h, 4 * gi));
                    hi = _mm256_or_si256(hi, q5_high4(h, 16 + 4 * gi));
                }
                _mm256_store_si256((__m256i *)(void *)P->q[bi][gi], lo);
                _mm256_store_si256((__m256i *)(void *)P->q[bi][gi + 4], hi);
            }
        }
        __m256i v = gather(g, base);
        _mm256_store_ps(P->d[bi], cvt_lo16(v));
        if (q_has_min(kind)) _mm256_store_ps(P->m[bi], cvt_lo16(_mm256_srli_epi32(v, 16)));
    }
}

/* ia[c] += the dots of NG groups of signed codes of 8 rows (q[gi]: 4 codes a row) with token c's codes at
 * xq[c] + off + 4 gi: |w| times x with w's signs (PMADDUBSW's pair sums <= 2 * 127 * 128 fit int16). */
INLINE void signed_groups(__m256i *ia, const uint8_t (*q)[32], const int NG, const int8_t *const *xq, size_t off,
                          const int C) {
    const __m256i ones = _mm256_set1_epi16(1);
    UNROLL for (int gi = 0; gi < NG; gi++) {
        __m256i w = _mm256_load_si256((const __m256i *)(const void *)q[gi]);
        __m256i aw = _mm256_sign_epi8(w, w);
        UNROLL for (int c = 0; c < C; c++) {
            int32_t x4;
            memcpy(&x4, xq[c] + off + 4 * gi, 4);
            __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(x4), w);
            ia[c] = _mm256_add_epi32(ia[c], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones));
        }
    }
}

INLINE void gemm_q_tile(const mm_job *j, const qpanel *P, const rows8 *g, int n, int b0, int nbk, int t0, const int C,
                        int first, const int kind) {
    const mm_act *a = j->a;
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *xq[PANEL_C];
    size_t xo[PANEL_C];
    __m256 acc[PANEL_C];
    UNROLL for (int c = 0; c < C; c++) {
        int t = t0 + c;
        xq[c] = a->qs + (size_t)t * a->qs_stride;
        xo[c] = (size_t)t * a->nb_stride;
        acc[c] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(j->y + (size_t)t * j->N + n, g->store);
    }
    for (int bi = 0; bi < nbk; bi++) {
        int b = b0 + bi;
        __m256i ia[PANEL_C];
        if (q_signed(kind)) {
            UNROLL for (int c = 0; c < C; c++) ia[c] = _mm256_setzero_si256();
            signed_groups(ia, P->q[bi], 8, xq, 32 * b, C);
        } else {
            /* int16 pair sums: the 8 groups of q4 codes (<= 8 * 2 * 15 * 128), q5's in halves of 4 */
            const int GN = q_is5(kind) ? 4 : 8;
            UNROLL for (int c = 0; c < C; c++) ia[c] = _mm256_setzero_si256();
            UNROLL for (int g0 = 0; g0 < 8; g0 += GN) {
                __m256i s16[PANEL_C];
                UNROLL for (int c = 0; c < C; c++) s16[c] = _mm256_setzero_si256();
                UNROLL for (int gi = g0; gi < g0 + GN; gi++) {
                    __m256i w = _mm256_load_si256((const __m256i *)(const void *)P->q[bi][gi]);
                    UNROLL for (int c = 0; c < C; c++) {
                        int32_t x4;
                        memcpy(&x4, xq[c] + 32 * b + 4 * gi, 4);
                        s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4)));
                    }
                }
                UNROLL for (int c = 0; c < C; c++) ia[c] = _mm256_add_epi32(ia[c], _mm256_madd_epi16(s16[c], ones));
            }
            UNROLL for (int c = 0; c < C; c++) {
                if (kind == Q_Q4_0) ia[c] = _mm256_sub_epi32(ia[c], _mm256_set1_epi32(8 * a->isum[xo[c] + b]));
                if (kind == Q_Q5_0) ia[c] = _mm256_sub_epi32(ia[c], _mm256_set1_epi32(16 * a->isum[xo[c] + b]));
            }
        }
        __m256 dw = _mm256_load_ps(P->d[bi]);
        UNROLL for (int c = 0; c < C; c++) {
            __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(a->d[xo[c] + b]));
            acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ia[c]), acc[c]);
            if (q_has_min(kind))
                acc[c] = _mm256_fmadd_ps(_mm256_load_ps(P->m[bi]), _mm256_set1_ps(a->s[xo[c] + b]), acc[c]);
        }
    }
    UNROLL for (int c = 0; c < C; c++) store_rows(j, g, n, t0 + c, acc[c]);
}

/* pack_q's panel from the tiles of one 8-row group of panel-laid weights
 * (panel.h): plain loads where pack_q gathers. */
INLINE void pack_q_tiles(qpanel *P, const uint8_t *tiles, int b0, int nbk, const int kind) {
    const size_t bb = kind == Q_Q8_0 ? sizeof(hearth_block_q8_0)
                      : kind == Q_Q4_0 ? sizeof(hearth_block_q4_0) : sizeof(hearth_block_q4_1);
    const size_t head = kind == Q_Q4_1 ? 32 : 16;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int bi = 0; bi < nbk; bi++) {
        const uint8_t *t = tiles + (size_t)(b0 + bi) * 8 * bb;
        if (kind == Q_Q8_0) {
            UNROLL for (int gi = 0; gi < 8; gi++)
                _mm256_store_si256((__m256i *)(void *)P->q[bi][gi],
                                   _mm256_loadu_si256((const __m256i *)(const void *)(t + head + 32 * gi)));
        } else {
            UNROLL for (int gi = 0; gi < 4; gi++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(t + head + 32 * gi));
                _mm256_store_si256((__m256i *)(void *)P->q[bi][gi], _mm256_and_si256(v, low4));
                _mm256_store_si256((__m256i *)(void *)P->q[bi][gi + 4], _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
            }
        }
        _mm256_store_ps(P->d[bi], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)t)));
        if (kind == Q_Q4_1)
            _mm256_store_ps(P->m[bi], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(t + 16))));
    }
}

/* panel: the weights are panel-laid, so the rows below N - N % 8 come from tiles. */
INLINE void gemm_q(const mm_job *j, int n0, int n1, const int kind, const int panel) {
    qpanel P __attribute__((aligned(32)));
    const int nb = j->a->nb, np = panel ? j->N / 8 * 8 : 0;
    for (int n = n0; n < n1; n += 8) {
        rows8 g;
        rows8_init(&g, j, n, n1 - n < 8 ? n1 - n : 8);
        for (int b0 = 0; b0 < nb; b0 += KC_BLOCKS) {
            int nbk = nb - b0 < KC_BLOCKS ? nb - b0 : KC_BLOCKS;
            if (n + 8 <= np) pack_q_tiles(&P, j->w + (size_t)n * j->row_bytes, b0, nbk, kind);
            else pack_q(&P, &g, b0, nbk, kind);
            int first = b0 == 0, t0 = 0;
            for (; t0 + 4 <= j->T; t0 += 4) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 4, first, kind);
            if (j->T - t0 >= 2) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 2, first, kind), t0 += 2;
            if (j->T - t0 >= 1) gemm_q_tile(j, &P, &g, n, b0, nbk, t0, 1, first, kind);
        }
    }
}

INLINE void rows_q(const mm_job *j, int n0, int n1, const int kind) {
    if (j->T >= GEMM_MIN_T) {
        gemm_q(j, n0, n1, kind, 0);
        return;
    }
    for (int n = n0; n < n1; n += 8) {
        int nr = n1 - n < 8 ? n1 - n : 8;
        for (int t0 = 0; t0 < j->T; t0 += GEMV_T) {
            switch (j->T - t0 < GEMV_T ? j->T - t0 : GEMV_T) {
            case 1: gemv8(j, n, nr, t0, 1, kind); break;
            case 2: gemv8(j, n, nr, t0, 2, kind); break;
            case 3: gemv8(j, n, nr, t0, 3, kind); break;
            default: gemv8(j, n, nr, t0, 4, kind); break;
            }
        }
    }
}

static void rows_q8_0(const mm_job *j, int n0, int n1) { rows_q(j, n0, n1, Q_Q8_0); }
static void rows_q4_0(const mm_job *j, int n0, int n1) { rows_q(j, n0, n1, Q_Q4_0); }
static void rows_q4_1(const mm_job *j, int n0, int n1) { rows_q(j, n0, n1, Q_Q4_1); }
static void rows_q5_0(const mm_job *j, int n0, int n1) { rows_q(j, n0, n1, Q_Q5_0); }
static void rows_q5_1(const mm_job *j, int n0, int n1) { rows_q(j, n0, n1, Q_Q5_1); }

/* ---- q8_0 / q4_0 / q4_1 panel-laid (panel.h), decode ---------------------------
 *
 * A tile holds one block of 8 rows: one load gives their scales, one 32-byte
 * load four codes of each, and a broadcast of the token's four matching codes
 * makes PMADDUBSW's pairs row dots at once (no transpose). q4 sums a block's
 * eight groups in int16 (<= 8 * 2 * 15 * 127 < 2^15) before one PMADDWD; q8_0
 * widens each group (|w| * sign(x, w), as gemv8). Two tiles (16 rows) share
 * the broadcasts. Same integers and f32 steps as gemv8. */

/* xb[i]: the token's codes 4i..4i+3 of block b in every dword. */
INLINE void tile_x(__m256i *xb, const int8_t *xq) {
    UNROLL for (int i = 0; i < 8; i++) {
        int32_t x4;
        memcpy(&x4, xq + 4 * i, 4);
        xb[i] = _mm256_set1_epi32(x4);
    }
}

/* The 8 rows' exact integer dots of a tile with the broadcast codes xb. */
INLINE __m256i tile_dot(const uint8_t *t, const __m256i *xb, const int kind) {
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *q = t + (kind == Q_Q4_1 ? 32 : 16);
    if (kind == Q_Q8_0) {
        __m256i s = _mm256_setzero_si256();
        UNROLL for (int i = 0; i < 8; i++) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * i));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                                           _mm256_sign_epi8(xb[i], w)), ones));
        }
        return s;
    }
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i s16 = _mm256_setzero_si256();
    UNROLL for (int i = 0; i < 4; i++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * i));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(v, low4), xb[i]));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), xb[i + 4]));
    }
    return _mm256_madd_epi16(s16, ones);
}

INLINE __m256 tile_step(const uint8_t *t, const __m256i *xb, const mm_act *a, size_t xo, __m256 acc, const int kind) {
    __m256i isum = tile_dot(t, xb, kind);
    if (kind == Q_Q4_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a->isum[xo]));
    __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)t));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a->d[xo])), _mm256_cvtepi32_ps(isum), acc);
    if (kind == Q_Q4_1)
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(t + 16))),
                              _mm256_set1_ps(a->s[xo]), acc);
    return acc;
}

/* Rows n .. n + 8 * G of the panels, every token. As in kp_gemv, the
 * hardware prefetchers fall behind a group's tiles when they come from DRAM:
 * the lines QP_AHEAD bytes ahead of each tile are asked for (bench_matmul
 * q4_0 cold 4096 x 4096, s32: 17.6 -> 25.5 GB/s on one thread, 33 -> 40 on
 * two; 2-6 KB ahead are alike). A group is short where K is (4.5 KB of
 * q4_0 at K = 1024), so near its end each stream asks for the start of the
 * group it reads next, two groups on: one thread of a hidden-1024 Q4_0 model
 * decoded 100-113 -> 138-155 tok/s with that. The address is formed as an
 * integer: past the last tile it is never dereferenced. */
enum { QP_AHEAD = 3072 };
INLINE void panel_gemv(const mm_job *j, int n, const int G, const int kind) {
    const mm_act *a = j->a;
    const size_t tile = (kind == Q_Q8_0 ? sizeof(hearth_block_q8_0)
                         : kind == Q_Q4_0 ? sizeof(hearth_block_q4_0) : sizeof(hearth_block_q4_1)) * 8;
    const size_t grp = 8 * j->row_bytes; /* a group's tiles */
    const uint8_t *t0 = j->w + (size_t)n * j->row_bytes, *t1 = G == 2 ? t0 + grp : t0;
    for (int t = 0; t < j->T; t++) {
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (int b = 0; b < a->nb; b++) {
            __m256i xb[8];
            size_t off = (size_t)b * tile + QP_AHEAD;
            if (G == 2 && off >= grp) off += grp; /* past its group: the start of the next pass's (n + 16) */
            const uintptr_t ahead = (uintptr_t)t0 + off, ahead1 = ahead + grp;
            UNROLL for (size_t o = 0; o < tile; o += 64) {
                _mm_prefetch((const char *)(ahead + o), _MM_HINT_T0);
                if (G == 2) _mm_prefetch((const char *)(ahead1 + o), _MM_HINT_T0);
            }
            tile_x(xb, a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b);
            size_t xo = (size_t)t * a->nb_stride + (size_t)b;
            acc0 = tile_step(t0 + (size_t)b * tile, xb, a, xo, acc0, kind);
            if (G == 2) acc1 = tile_step(t1 + (size_t)b * tile, xb, a, xo, acc1, kind);
        }
        _mm256_storeu_ps(j->y + (size_t)t * j->N + n, acc0);
        if (G == 2) _mm256_storeu_ps(j->y + (size_t)t * j->N + n + 8, acc1);
    }
}

INLINE void panel_q(const mm_job *j, int n0, int n1, const int kind) {
    if (j->T >= GEMM_MIN_T) {
        gemm_q(j, n0, n1, kind, 1);
        return;
    }
    const int np = j->N / 8 * 8; /* rows in panels; the rest are stored */
    int n = n0;
    for (; n + 16 <= n1 && n + 16 <= np; n += 16) panel_gemv(j, n, 2, kind);
    for (; n + 8 <= n1 && n + 8 <= np; n += 8) panel_gemv(j, n, 1, kind);
    if (n < n1) rows_q(j, n, n1, kind);
}

static void panel_q8_0(const mm_job *j, int n0, int n1) { panel_q(j, n0, n1, Q_Q8_0); }
static void panel_q4_0(const mm_job *j, int n0, int n1) { panel_q(j, n0, n1, Q_Q4_0); }
static void panel_q4_1(const mm_job *j, int n0, int n1) { panel_q(j, n0, n1, Q_Q4_1); }

/* ---- q4_K / q5_K / q6_K (and q3_K / q2_K / iq4_xs prefill): 8-row panels ---------------- */

typedef struct {
    uint8_t q[64][32];   /* [group of 4 codes][row * 4 + e] */
    int32_t sc[16][8];   /* [sub-block][row] */
    int32_t m[8][8];     /* q4_K mins */
    float d[8], dmin[8];
} kpanel;

/* Bytes off .. off + 3 of 8 rows' q4_K block: gathered from the stored rows,
 * or (tile: the block's panel tile, panel.h) loaded from its vector. */
INLINE __m256i kdw(const rows8 *g, const uint8_t *base, const uint8_t *tile, size_t off) {
    if (tile) return _mm256_loadu_si256((const __m256i *)(const void *)(tile + 32 + 8 * (off - 4)));
    return gather(g, base + off);
}

INLINE __m256 load_f16x8_at(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }

/* The d, dmin, scales and mins of 8 rows' q4_K (or q5_K) block at base (tile: as kdw's). */
INLINE void pack_k_scales(kpanel *P, const rows8 *g, const uint8_t *base, const uint8_t *tile) {
    const __m256i m6 = _mm256_set1_epi32(63);
    if (tile) {
        _mm256_store_ps(P->d, load_f16x8_at(tile));
        _mm256_store_ps(P->dmin, load_f16x8_at(tile + 16));
    } else {
        __m256i dd = gather(g, base);
        _mm256_store_ps(P->d, cvt_lo16(dd));
        _mm256_store_ps(P->dmin, cvt_lo16(_mm256_srli_epi32(dd, 16)));
    }
    __m256i s0 = kdw(g, base, tile, 4), s1 = kdw(g, base, tile, 8), s2 = kdw(g, base, tile, 12);
    UNROLL for (int jj = 0; jj < 4; jj++) {
        __m256i a0 = _mm256_srli_epi32(s0, 8 * jj), a1 = _mm256_srli_epi32(s1, 8 * jj), a2 = _mm256_srli_epi32(s2, 8 * jj);
        _mm256_store_si256((__m256i *)(void *)P->sc[jj], _mm256_and_si256(a0, m6));
        _mm256_store_si256((__m256i *)(void *)P->m[jj], _mm256_and_si256(a1, m6));
        __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(a2, _mm256_set1_epi32(15)),
                                        _mm256_and_si256(_mm256_srli_epi32(a0, 2), _mm256_set1_epi32(48)));
        __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a2, 4), _mm256_set1_epi32(15)),
                                       _mm256_and_si256(_mm256_srli_epi32(a1, 2), _mm256_set1_epi32(48)));
        _mm256_store_si256((__m256i *)(void *)P->sc[jj + 4], sc_hi);
        _mm256_store_si256((__m256i *)(void *)P->m[jj + 4], m_hi);
    }
}

/* tile: NULL, or block b's tile of panel-laid rows (which g then only sizes) */
INLINE void pack_q4_K(kpanel *P, const rows8 *g, const uint8_t *tile, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q4_K);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    UNROLL for (int c = 0; c < 4; c++) {
        UNROLL for (int gi = 0; gi < 8; gi++) {
            __m256i v = kdw(g, base, tile, 16 + 32 * c + 4 * gi);
            _mm256_store_si256((__m256i *)(void *)P->q[(2 * c) * 8 + gi], _mm256_and_si256(v, low4));
            _mm256_store_si256((__m256i *)(void *)P->q[(2 * c + 1) * 8 + gi],
                               _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
        }
    }
    pack_k_scales(P, g, base, tile);
}

/* The 6-bit codes of 32 bytes of ql (low nibbles, then high) at ql0 and ql1
 * and of qh: v[c] = quarter c (0: ql0 low | qh bits 0-1, 1: ql1 low | bits
 * 2-3, 2: ql0 high | bits 4-5, 3: ql1 high | bits 6-7), a byte each. */
INLINE void q6_codes(__m256i ql0, __m256i ql1, __m256i qh, __m256i *v) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(3);
    v[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, low2), 4));
    v[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), low2), 4));
    v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), low2), 4));
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), low2), 4));
}

INLINE void pack_q6_K(kpanel *P, const rows8 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q6_K);
    UNROLL for (int h = 0; h < 2; h++) {
        UNROLL for (int l0 = 0; l0 < 32; l0 += 4) {
            __m256i ql0 = gather(g, base + 64 * h + l0), ql1 = gather(g, base + 64 * h + 32 + l0);
            __m256i qh = gather(g, base + 128 + 32 * h + l0);
            __m256i v[4];
            q6_codes(ql0, ql1, qh, v);
            UNROLL for (int c = 0; c < 4; c++)
                _mm256_store_si256((__m256i *)(void *)P->q[(128 * h + 32 * c + l0) / 4], v[c]);
        }
    }
    UNROLL for (int i = 0; i < 4; i++) {
        __m256i s = gather(g, base + 192 + 4 * i);
        UNROLL for (int k = 0; k < 4; k++)
            _mm256_store_si256((__m256i *)(void *)P->sc[4 * i + k], _mm256_srai_epi32(_mm256_slli_epi32(s, 24 - 8 * k), 24));
    }
    _mm256_store_ps(P->d, cvt_lo16(_mm256_srli_epi32(gather(g, base + 206), 16)));
}

/* q5_K: q4_K's layout of the first 16 bytes, then qh[32] (at 16) and the nibbles (at 48). Its codes in the
 * panel are q4_K's nibbles with bit j of qh[l] as their fifth bit (sub-block j, element l). */
INLINE void pack_q5_K(kpanel *P, const rows8 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q5_K);
    const __m256i low4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    UNROLL for (int gi = 0; gi < 8; gi++) {
        __m256i h = gather(g, base + 16 + 4 * gi);
        UNROLL for (int c = 0; c < 4; c++) {
            __m256i v = gather(g, base + 48 + 32 * c + 4 * gi);
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4);
            _mm256_store_si256((__m256i *)(void *)P->q[(2 * c) * 8 + gi],
                               _mm256_or_si256(_mm256_and_si256(v, low4), h0));
            _mm256_store_si256((__m256i *)(void *)P->q[(2 * c + 1) * 8 + gi],
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), h1));
        }
    }
    pack_k_scales(P, g, base, NULL);
}

/* q3_K / q2_K / iq4_xs (session 46; AVX-512's 16-row panels of session 44 at 8 rows): q6_K's 16 sub-blocks
 * of 16. q3_K's codes enter unsigned (low bits | 4 * hbit, 0..7) with 4 * bsums_g off, q2_K's as they are
 * (0..3) with its mins against the bsums as pairs of int16s (P->m[k]: sub-blocks 2k and 2k + 1), iq4_xs's as
 * their signed codebook values, dotted as |w| and sign(x, w) (as q8_0's: a value + 128 would overflow the
 * int16 pair sums), a sub-block of 32's scale for both halves. */
INLINE void pack_q3_K(kpanel *P, const rows8 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q3_K);
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    UNROLL for (int h = 0; h < 2; h++)
        for (int l0 = 0; l0 < 32; l0 += 4) {
            __m256i Q = gather(g, base + 32 + 32 * h + l0), H = gather(g, base + l0);
            UNROLL for (int j = 0; j < 4; j++) {
                __m256i c = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * j), three);
                c = _mm256_or_si256(c, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4 * h + j), one), 2));
                _mm256_store_si256((__m256i *)(void *)P->q[(128 * h + 32 * j + l0) / 4], c);
            }
        }
    const __m256i a[3] = {gather(g, base + 96), gather(g, base + 100), gather(g, base + 104)};
    UNROLL for (int s = 0; s < 16; s++) { /* hearth_q3_K_scale, a lane a row */
        int lb = s % 8;
        __m256i lo = _mm256_and_si256(_mm256_srli_epi32(a[lb / 4], 8 * (lb % 4) + 4 * (s / 8)), _mm256_set1_epi32(15));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi32(a[2], 8 * (s % 4) + 2 * (s / 4)), _mm256_set1_epi32(3));
        _mm256_store_si256((__m256i *)(void *)P->sc[s],
                           _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32)));
    }
    _mm256_store_ps(P->d, cvt_lo16(_mm256_srli_epi32(gather(g, base + 106), 16))); /* scales[10..11], d */
}

INLINE void pack_q2_K(kpanel *P, const rows8 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_q2_K);
    const __m256i three = _mm256_set1_epi8(3), low4 = _mm256_set1_epi32(15);
    UNROLL for (int h = 0; h < 2; h++)
        for (int l0 = 0; l0 < 32; l0 += 4) {
            __m256i Q = gather(g, base + 16 + 32 * h + l0);
            UNROLL for (int j = 0; j < 4; j++)
                _mm256_store_si256((__m256i *)(void *)P->q[(128 * h + 32 * j + l0) / 4],
                                   _mm256_and_si256(_mm256_srli_epi16(Q, 2 * j), three));
        }
    UNROLL for (int i = 0; i < 4; i++) {
        __m256i s = gather(g, base + 4 * i);
        UNROLL for (int k = 0; k < 4; k++)
            _mm256_store_si256((__m256i *)(void *)P->sc[4 * i + k], _mm256_and_si256(_mm256_srli_epi32(s, 8 * k), low4));
        UNROLL for (int k = 0; k < 4; k += 2) /* the mins of sub-blocks 4i + k, 4i + k + 1 as one dword's int16s */
            _mm256_store_si256((__m256i *)(void *)P->m[2 * i + k / 2],
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s, 8 * k + 4), low4),
                                               _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(s, 8 * k + 12), low4), 16)));
    }
    __m256i dd = gather(g, base + 80);
    _mm256_store_ps(P->d, cvt_lo16(dd));
    _mm256_store_ps(P->dmin, cvt_lo16(_mm256_srli_epi32(dd, 16)));
}

INLINE void pack_iq4_xs(kpanel *P, const rows8 *g, int b) {
    const uint8_t *base = g->p[0] + (size_t)b * sizeof(hearth_block_iq4_xs);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i book = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)hearth_iq4_values));
    UNROLL for (int ib = 0; ib < 8; ib++)
        UNROLL for (int gi = 0; gi < 4; gi++) {
            __m256i Q = gather(g, base + 8 + 16 * ib + 4 * gi);
            _mm256_store_si256((__m256i *)(void *)P->q[8 * ib + gi], _mm256_shuffle_epi8(book, _mm256_and_si256(Q, low4)));
            _mm256_store_si256((__m256i *)(void *)P->q[8 * ib + 4 + gi],
                               _mm256_shuffle_epi8(book, _mm256_and_si256(_mm256_srli_epi16(Q, 4), low4)));
        }
    __m256i dh = gather(g, base), sl = gather(g, base + 4);
    UNROLL for (int ib = 0; ib < 8; ib++) { /* hearth_iq4_xs_scale, a lane a row */
        __m256i lo = _mm256_and_si256(_mm256_srli_epi32(sl, 8 * (ib / 2) + 4 * (ib % 2)), _mm256_set1_epi32(15));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi32(dh, 16 + 2 * ib), _mm256_set1_epi32(3));
        __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        _mm256_store_si256((__m256i *)(void *)P->sc[2 * ib], sc);
        _mm256_store_si256((__m256i *)(void *)P->sc[2 * ib + 1], sc);
    }
    _mm256_store_ps(P->d, cvt_lo16(dh));
}

enum { K_Q4_K, K_Q6_K, K_Q5_K, K_Q3_K, K_Q2_K, K_IQ4_XS };

INLINE void gemm_k_tile(const mm_job *j, const kpanel *P, const rows8 *g, int n, int b, int t0, const int C,
                        const int kind) {
    const mm_act *a = j->a;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i isum[PANEL_C], imin[PANEL_C];
    const int8_t *xq[PANEL_C];
    const int16_t *bs[PANEL_C];
    UNROLL for (int c = 0; c < C; c++) {
        int t = t0 + c;
        xq[c] = a->qs + (size_t)t * a->qs_stride + 256 * b;
        bs[c] = a->bsums + ((size_t)t * a->nb_stride + b) * 16;
        isum[c] = imin[c] = _mm256_setzero_si256();
    }
    if (kind == K_Q4_K || kind == K_Q5_K) {
        /* int16 pair sums: 8 groups of 4-bit codes (<= 8 * 2 * 15 * 128), 4 of 5-bit ones (<= 4 * 2 * 31 * 128) */
        const int GN = kind == K_Q5_K ? 4 : 8;
        for (int sb = 0; sb < 8; sb++) {
            /* PMADDWD instead of PMULLD (2 uops on Intel): the scale (< 64) in both int16 halves
             * of each row's dword weighs the pair sums at once; the min (< 64) is the dword's low
             * int16 and the bsum pair (|.| <= 4064) the low int16 of its broadcast. Same integers. */
            __m256i sc = _mm256_load_si256((const __m256i *)(const void *)P->sc[sb]);
            const __m256i sc2 = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
            UNROLL for (int g0 = 0; g0 < 8; g0 += GN) {
                __m256i s16[PANEL_C];
                UNROLL for (int c = 0; c < C; c++) s16[c] = _mm256_setzero_si256();
                UNROLL for (int gi = g0; gi < g0 + GN; gi++) {
                    __m256i w = _mm256_load_si256((const __m256i *)(const void *)P->q[8 * sb + gi]);
                    UNROLL for (int c = 0; c < C; c++) {
                        int32_t x4;
                        memcpy(&x4, xq[c] + 32 * sb + 4 * gi, 4);
                        s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4)));
                    }
                }
                UNROLL for (int c = 0; c < C; c++) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], sc2));
            }
            __m256i m = _mm256_load_si256((const __m256i *)(const void *)P->m[sb]);
            UNROLL for (int c = 0; c < C; c++) {
                int pair = bs[c][2 * sb] + bs[c][2 * sb + 1];
                imin[c] = _mm256_add_epi32(imin[c], _mm256_madd_epi16(m, _mm256_set1_epi32(pair & 0xffff)));
            }
        }
    } else if (kind == K_IQ4_XS) {
        for (int sb = 0; sb < 16; sb++) {
            __m256i ia[PANEL_C];
            UNROLL for (int c = 0; c < C; c++) ia[c] = _mm256_setzero_si256();
            signed_groups(ia, P->q + 4 * sb, 4, xq, 16 * sb, C);
            __m256i sc = _mm256_load_si256((const __m256i *)(const void *)P->sc[sb]);
            UNROLL for (int c = 0; c < C; c++) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(ia[c], sc));
        }
    } else { /* q6_K, q3_K, q2_K: unsigned codes, off * bsums off (q6_K's two groups of <= 63 fit int16) */
        const int off = kind == K_Q6_K ? 32 : kind == K_Q3_K ? 4 : 0;
        for (int sb = 0; sb < 16; sb++) {
            __m256i ia[PANEL_C];
            UNROLL for (int c = 0; c < C; c++) ia[c] = _mm256_set1_epi32(-off * bs[c][sb]);
            UNROLL for (int half = 0; half < 2; half++) {
                const uint8_t *q0 = P->q[4 * sb + 2 * half], *q1 = P->q[4 * sb + 2 * half + 1];
                __m256i w0 = _mm256_load_si256((const __m256i *)(const void *)q0);
                __m256i w1 = _mm256_load_si256((const __m256i *)(const void *)q1);
                UNROLL for (int c = 0; c < C; c++) {
                    int32_t x0, x1;
                    memcpy(&x0, xq[c] + 16 * sb + 8 * half, 4);
                    memcpy(&x1, xq[c] + 16 * sb + 8 * half + 4, 4);
                    __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(x0)),
                                                 _mm256_maddubs_epi16(w1, _mm256_set1_epi32(x1)));
                    ia[c] = _mm256_add_epi32(ia[c], _mm256_madd_epi16(s, ones));
                }
            }
            __m256i sc = _mm256_load_si256((const __m256i *)(const void *)P->sc[sb]);
            UNROLL for (int c = 0; c < C; c++) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(ia[c], sc));
        }
        if (kind == K_Q2_K) /* the mins (< 16) against the bsums (|.| <= 2032), pairs of sub-blocks as int16s */
            UNROLL for (int c = 0; c < C; c++)
                UNROLL for (int k = 0; k < 8; k++) {
                    uint32_t pair = (uint16_t)bs[c][2 * k] | (uint32_t)(uint16_t)bs[c][2 * k + 1] << 16;
                    imin[c] = _mm256_add_epi32(imin[c], _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(const void *)P->m[k]),
                                                                          _mm256_set1_epi32((int)pair)));
                }
    }
    __m256 dw = _mm256_load_ps(P->d), dm = _mm256_load_ps(P->dmin);
    UNROLL for (int c = 0; c < C; c++) {
        int t = t0 + c;
        float *yp = j->y + (size_t)t * j->N + n;
        __m256 acc = b == 0 ? _mm256_setzero_ps() : _mm256_maskload_ps(yp, g->store);
        __m256 dx = _mm256_set1_ps(a->d[(size_t)t * a->nb_stride + b]);
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum[c]), acc);
        if (kind == K_Q4_K || kind == K_Q5_K || kind == K_Q2_K)
            acc = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(imin[c]), acc);
        _mm256_maskstore_ps(yp, g->store, acc);
    }
}

/* panel: the (q4_K) weights are panel-laid, so the rows below N - N % 8 come from tiles. */
INLINE void gemm_k(const mm_job *j, int n0, int n1, const int kind, const int panel) {
    kpanel P __attribute__((aligned(32)));
    const int np = panel ? j->N / 8 * 8 : 0;
    const size_t tb = 8 * sizeof(hearth_block_q4_K);
    for (int n = n0; n < n1; n += 8) {
        rows8 g;
        rows8_init(&g, j, n, n1 - n < 8 ? n1 - n : 8);
        for (int b = 0; b < j->a->nb; b++) {
            const uint8_t *tile = n + 8 <= np ? j->w + (size_t)n * j->row_bytes + (size_t)b * tb : NULL;
            if (kind == K_Q4_K) pack_q4_K(&P, &g, tile, b);
            else if (kind == K_Q5_K) pack_q5_K(&P, &g, b);
            else if (kind == K_Q3_K) pack_q3_K(&P, &g, b);
            else if (kind == K_Q2_K) pack_q2_K(&P, &g, b);
            else if (kind == K_IQ4_XS) pack_iq4_xs(&P, &g, b);
            else pack_q6_K(&P, &g, b);
            for (int t0 = 0; t0 < j->T; t0 += PANEL_C) {
                switch (j->T - t0 < PANEL_C ? j->T - t0 : PANEL_C) {
                case 1: gemm_k_tile(j, &P, &g, n, b, t0, 1, kind); break;
                case 2: gemm_k_tile(j, &P, &g, n, b, t0, 2, kind); break;
                case 3: gemm_k_tile(j, &P, &g, n, b, t0, 3, kind); break;
                default: gemm_k_tile(j, &P, &g, n, b, t0, 4, kind); break;
                }
            }
        }
    }
}

/* ---- q4_K / q5_K / q6_K decode (T < 5): a row at a time ---------------------------------
 *
 * Packing 8-row panels costs more than one token's dot, so a few tokens take
 * each row as stored, as llama.cpp's vec_dot does: a block's 32-byte code
 * vectors against the token's codes (PMADDUBSW), each sub-block's scale
 * applied by PMADDWD, the 8 lanes summed once a block. The integers are
 * exact, so the block's isum (and q4_K's imin) and then its f32 steps are
 * the scalar kernel's. q6_K dots the unsigned codes (0..63) and takes 32 *
 * sum_g sc_g * bsums_g off, which is the dot of (q - 32). */
/* qh: q5_K's fifth bits (bit j of qh[l] for element l of sub-block j), or NULL (q4_K) */
INLINE int k_isum(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, const int8_t *x, const int16_t *bs,
                  int *mins) {
    /* the 6-bit scales and mins of sub-blocks 0..3 and 4..7, a byte each
     * (hearth_q4_K_scale_min, four at a time) */
    uint32_t a0, a1, a2;
    memcpy(&a0, scales, 4);
    memcpy(&a1, scales + 4, 4);
    memcpy(&a2, scales + 8, 4);
    const uint32_t sc[2] = {a0 & 0x3f3f3f3fu, (a2 & 0x0f0f0f0fu) | ((a0 >> 6) & 0x03030303u) << 4};
    const uint32_t m03 = a1 & 0x3f3f3f3fu, m47 = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 6) & 0x03030303u) << 4;
    /* imin = sum_j m_j * (bsums_2j + bsums_2j+1) */
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)bs);
    __m128i bp = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    __m128i mp = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)m47, (int)m03)), bp);
    mp = _mm_add_epi32(mp, _mm_unpackhi_epi64(mp, mp));
    mp = _mm_add_epi32(mp, _mm_shuffle_epi32(mp, _MM_SHUFFLE(2, 3, 0, 1)));
    *mins = _mm_cvtsi128_si32(mp);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i acc = _mm256_setzero_si256();
    UNROLL for (int p = 0; p < 4; p++) { /* sub-blocks 2p (low nibbles) and 2p + 1 (high) */
        int j0 = 2 * p, j1 = 2 * p + 1;
        int16_t sc0 = (int16_t)((sc[j0 / 4] >> (8 * (j0 % 4))) & 0xff), sc1 = (int16_t)((sc[j1 / 4] >> (8 * (j1 % 4))) & 0xff);
        __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * p));
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 64 * p));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 64 * p + 32));
        __m256i c0 = _mm256_and_si256(q, low4), c1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        if (qh) { /* bits 2p and 2p + 1 of each qh byte, as bit 4 of the codes (<= 31: the pair sums fit int16) */
            const __m256i one = _mm256_set1_epi8(1);
            __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)qh);
            c0 = _mm256_or_si256(c0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, j0), one), 4));
            c1 = _mm256_or_si256(c1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, j1), one), 4));
        }
        __m256i p0 = _mm256_maddubs_epi16(c0, x0);
        __m256i p1 = _mm256_maddubs_epi16(c1, x1);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, _mm256_set1_epi16(sc0)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_set1_epi16(sc1)));
    }
    return hsum_i32(acc);
}

/* Lane pair c of sub-block scales: int16 lane 2c of each 128-bit half into
 * the low half's 8 lanes, lane 2c + 1 into the high half's (PSHUFB masks). */
INLINE __m256i pick_scale_pair(__m256i s16, int c) {
    const __m256i m = _mm256_setr_epi8(4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c,
                                       4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c + 2,
                                       4 * c + 3, 4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3,
                                       4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3, 4 * c + 2,
                                       4 * c + 3);
    return _mm256_shuffle_epi8(s16, m);
}

INLINE int q6_K_isum(const hearth_block_q6_K *w, const int8_t *x, const int16_t *bs) {
    /* the 16 group scales as int16; off = sum_g sc_g * bsums_g */
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)w->scales));
    __m256i acc = _mm256_setzero_si256();
    const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)(const void *)bs));
    UNROLL for (int h = 0; h < 2; h++) {
        __m256i A = _mm256_loadu_si256((const __m256i *)(const void *)(w->ql + 64 * h));
        __m256i B = _mm256_loadu_si256((const __m256i *)(const void *)(w->ql + 64 * h + 32));
        __m256i H = _mm256_loadu_si256((const __m256i *)(const void *)(w->qh + 32 * h));
        __m256i q[4];
        q6_codes(A, B, H, q);
        /* groups 8h .. 8h + 7 in both halves */
        const __m256i sh = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
        UNROLL for (int c = 0; c < 4; c++) { /* elements 128h + 32c .. + 31: groups 8h + 2c, + 1 */
            __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 128 * h + 32 * c));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], xv), pick_scale_pair(sh, c)));
        }
    }
    return hsum_i32(acc) - 32 * hsum_i32(off);
}

/* The lines QP_AHEAD bytes past a block of bb bytes at p asked for (panel_gemv's reason: the hardware
 * prefetchers fall behind rows streamed from DRAM); past the matrix's end the address is never
 * dereferenced. */
INLINE void row_prefetch(const uint8_t *p, const size_t bb) {
    const uintptr_t ahead = (uintptr_t)p + QP_AHEAD;
    for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)(ahead + o), _MM_HINT_T0);
}

INLINE void rows_k(const mm_job *j, int n0, int n1, const int kind) {
    if (j->T >= GEMM_MIN_T) {
        gemm_k(j, n0, n1, kind, 0);
        return;
    }
    const mm_act *a = j->a;
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = j->w + (size_t)n * j->row_bytes;
        for (int t = 0; t < j->T; t++) {
            const int8_t *x = a->qs + (size_t)t * a->qs_stride;
            const float *dx = a->d + (size_t)t * a->nb_stride;
            const int16_t *bs = a->bsums + (size_t)t * a->nb_stride * 16;
            float acc = 0.f;
            for (int b = 0; b < a->nb; b++) {
                if (t == 0) { /* the row's first pass streams it from memory */
                    const size_t bb = kind == K_Q4_K   ? sizeof(hearth_block_q4_K)
                                      : kind == K_Q5_K ? sizeof(hearth_block_q5_K)
                                                       : sizeof(hearth_block_q6_K);
                    row_prefetch(row + (size_t)b * bb, bb);
                }
                if (kind == K_Q4_K) {
                    const hearth_block_q4_K *w = (const hearth_block_q4_K *)(const void *)row + b;
                    int mins, s = k_isum(w->scales, w->qs, NULL, x + 256 * (size_t)b, bs + 16 * (size_t)b, &mins);
                    acc = fmaf(_cvtsh_ss(w->d) * dx[b], (float)s, acc);
                    acc = fmaf(-(_cvtsh_ss(w->dmin) * dx[b]), (float)mins, acc);
                } else if (kind == K_Q5_K) {
                    const hearth_block_q5_K *w = (const hearth_block_q5_K *)(const void *)row + b;
                    int mins, s = k_isum(w->scales, w->qs, w->qh, x + 256 * (size_t)b, bs + 16 * (size_t)b, &mins);
                    acc = fmaf(_cvtsh_ss(w->d) * dx[b], (float)s, acc);
                    acc = fmaf(-(_cvtsh_ss(w->dmin) * dx[b]), (float)mins, acc);
                } else {
                    const hearth_block_q6_K *w = (const hearth_block_q6_K *)(const void *)row + b;
                    int s = q6_K_isum(w, x + 256 * (size_t)b, bs + 16 * (size_t)b);
                    acc = fmaf(_cvtsh_ss(w->d) * dx[b], (float)s, acc);
                }
            }
            j->y[(size_t)t * j->N + n] = acc;
        }
    }
}

/* ---- q2_K / q3_K decode (T < 5): a row at a time (prefill: gemm_k's panels) ----------
 *
 * As llama.cpp's vec_dot: per (h, j), the 2-bit codes of elements 128 h + 32 j + 0..31 are one shift
 * and mask of qs[32 h ..] (q3_K: with 4 * hbit or-ed in, so 0..7, and 4 * sum_g sc_g bsums_g taken
 * off), dotted with the token's 32 codes by PMADDUBSW, and sub-blocks 8 h + 2 j and + 1 (the vector's
 * two 128-bit halves) weighed by their scales in one PMADDWD. A block's codes and scales are unpacked
 * once for all T tokens, each token's y the running sum over blocks. The integers are the scalar
 * kernel's. */
typedef struct {
    __m256i c[8], s[8]; /* (h, j): the codes of its 32 elements; its two sub-blocks' scales, a 128-bit half each */
    __m256i sc16;       /* the 16 scales (q2_K: and mins16 its mins) as int16 */
    __m256i m16;
} k23blk;

/* q3_K's 16 scales less 32 as int16 (hearth_q3_K_scale, four at a time: low nibbles of scales[0..7], then
 * their high nibbles, each with two bits of scales[8..11]) */
INLINE __m256i q3_K_scales16(const uint8_t *sc) {
    uint32_t a0, a1, a2;
    memcpy(&a0, sc, 4);
    memcpy(&a1, sc + 4, 4);
    memcpy(&a2, sc + 8, 4);
    const uint32_t lo = 0x0f0f0f0fu, hi = 0x03030303u;
    __m128i b = _mm_setr_epi32((int)((a0 & lo) | (a2 & hi) << 4), (int)((a1 & lo) | (a2 >> 2 & hi) << 4),
                               (int)((a0 >> 4 & lo) | (a2 >> 4 & hi) << 4),
                               (int)((a1 >> 4 & lo) | (a2 >> 6 & hi) << 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(b), _mm256_set1_epi16(32));
}

INLINE void k23_unpack(k23blk *B, const uint8_t *qs, const uint8_t *hmask) {
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i H = hmask ? _mm256_loadu_si256((const __m256i *)(const void *)hmask) : _mm256_setzero_si256();
    UNROLL for (int h = 0; h < 2; h++) {
        __m256i Q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h));
        /* the scales of sub-blocks 8h .. 8h + 7 in both halves, then pairs picked as q6_K's */
        const __m256i sh = h ? _mm256_permute2x128_si256(B->sc16, B->sc16, 0x11)
                             : _mm256_permute2x128_si256(B->sc16, B->sc16, 0x00);
        UNROLL for (int j = 0; j < 4; j++) {
            __m256i c = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * j), three);
            if (hmask)
                c = _mm256_or_si256(c, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4 * h + j), one), 2));
            B->c[4 * h + j] = c;
            B->s[4 * h + j] = pick_scale_pair(sh, j);
        }
    }
}

/* Block b of a q2_K / q3_K row: its scales (q2_K: and mins) as int16, d and dmin, where its codes are. */
INLINE void k23_head(const uint8_t *row, int b, const int q3, k23blk *B, float *d, float *dmin, const uint8_t **qs,
                     const uint8_t **hmask) {
    if (q3) {
        const hearth_block_q3_K *w = (const hearth_block_q3_K *)(const void *)row + b;
        B->sc16 = q3_K_scales16(w->scales);
        *d = _cvtsh_ss(w->d), *dmin = 0.f, *qs = w->qs, *hmask = w->hmask;
    } else {
        const hearth_block_q2_K *w = (const hearth_block_q2_K *)(const void *)row + b;
        __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)w->scales));
        B->sc16 = _mm256_and_si256(v, _mm256_set1_epi16(15));
        B->m16 = _mm256_srli_epi16(v, 4);
        *d = _cvtsh_ss(w->d), *dmin = _cvtsh_ss(w->dmin), *qs = w->qs, *hmask = NULL;
    }
}

/* One token (decode): each block's codes made and dotted in one pass, y's running sum in a register
 * (rows_k23's integers and fmaf steps, in the same order). */
INLINE float k23_row1(const uint8_t *row, const mm_act *a, const int q3) {
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const size_t bb = q3 ? sizeof(hearth_block_q3_K) : sizeof(hearth_block_q2_K);
    float y = 0.f;
    for (int b = 0; b < a->nb; b++) {
        row_prefetch(row + (size_t)b * bb, bb);
        k23blk B;
        float d, dmin;
        const uint8_t *qs, *hmask;
        k23_head(row, b, q3, &B, &d, &dmin, &qs, &hmask);
        const int8_t *x = a->qs + 256 * (size_t)b;
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(a->bsums + 16 * (size_t)b));
        __m256i acc = q3 ? _mm256_slli_epi32(_mm256_madd_epi16(B.sc16, bs), 2) : _mm256_setzero_si256();
        acc = _mm256_sub_epi32(_mm256_setzero_si256(), acc);
        const __m256i H = q3 ? _mm256_loadu_si256((const __m256i *)(const void *)hmask) : _mm256_setzero_si256();
        UNROLL for (int h = 0; h < 2; h++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h));
            const __m256i sh = h ? _mm256_permute2x128_si256(B.sc16, B.sc16, 0x11)
                                 : _mm256_permute2x128_si256(B.sc16, B.sc16, 0x00);
            UNROLL for (int jj = 0; jj < 4; jj++) {
                __m256i c = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * jj), three);
                if (q3) {
                    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(H, 4 * h + jj), one);
                    c = _mm256_or_si256(c, _mm256_slli_epi16(hb, 2));
                }
                __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * (4 * h + jj)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(c, xv), pick_scale_pair(sh, jj)));
            }
        }
        y = fmaf(d * a->d[b], (float)hsum_i32(acc), y);
        if (!q3) y = fmaf(-(dmin * a->d[b]), (float)hsum_i32(_mm256_madd_epi16(B.m16, bs)), y);
    }
    return y;
}

INLINE void rows_k23(const mm_job *j, int n0, int n1, const int q3) {
    const mm_act *a = j->a;
    if (j->T >= GEMM_MIN_T) { /* prefill: 8-row panels */
        gemm_k(j, n0, n1, q3 ? K_Q3_K : K_Q2_K, 0);
        return;
    }
    if (j->T == 1) {
        for (int n = n0; n < n1; n++) j->y[n] = k23_row1(j->w + (size_t)n * j->row_bytes, a, q3);
        return;
    }
    k23blk B;
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = j->w + (size_t)n * j->row_bytes;
        for (int b = 0; b < a->nb; b++) {
            float d, dmin;
            const uint8_t *qs, *hmask;
            k23_head(row, b, q3, &B, &d, &dmin, &qs, &hmask);
            k23_unpack(&B, qs, hmask);
            for (int t = 0; t < j->T; t++) {
                const int8_t *x = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
                const size_t xo = (size_t)t * a->nb_stride + (size_t)b;
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(a->bsums + xo * 16));
                __m256i acc = q3 ? _mm256_slli_epi32(_mm256_madd_epi16(B.sc16, bs), 2) : _mm256_setzero_si256();
                acc = _mm256_sub_epi32(_mm256_setzero_si256(), acc); /* q3_K: - 4 * sum_g sc_g bsums_g */
                UNROLL for (int k = 0; k < 8; k++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * k));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(B.c[k], xv), B.s[k]));
                }
                float *y = j->y + (size_t)t * j->N + n, dx = a->d[xo];
                float r = fmaf(d * dx, (float)hsum_i32(acc), b == 0 ? 0.f : *y);
                if (!q3) r = fmaf(-(dmin * dx), (float)hsum_i32(_mm256_madd_epi16(B.m16, bs)), r);
                *y = r;
            }
        }
    }
}

/* ---- iq4_xs decode (T < 5): a row at a time (prefill: gemm_k's panels) ----------------
 *
 * The codes looked up in the codebook (iq4_vals), a sub-block of 32 a vector; its dot with the token's
 * codes as q8_0's (|v| * sign(x, v) by PMADDUBSW), weighed by the sub-block's scale in the PMADDWD. A
 * block unpacked once for every token, as rows_k23. (iq4_nl, q4_0's block with codebook codes, goes
 * through q8_0's kernels: the kind Q_IQ4_NL.) */

/* One token (decode): a sub-block's values made and dotted in one pass, y's running sum in a register
 * (rows_iq4_xs's integers and fmaf steps, in the same order). */
static float iq4_xs_row1(const uint8_t *row, const mm_act *a) {
    const __m256i lo_sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i hi_sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i fifteen = _mm256_set1_epi32(15), three = _mm256_set1_epi32(3);
    float y = 0.f;
    for (int b = 0; b < a->nb; b++) {
        const hearth_block_iq4_xs *w = (const hearth_block_iq4_xs *)(const void *)row + b;
        row_prefetch((const uint8_t *)w, sizeof *w);
        const int8_t *x = a->qs + 256 * (size_t)b;
        /* the 8 scales less 32 (hearth_iq4_xs_scale), sub-block ib's in both int16 halves of int32 lane ib */
        uint32_t sl;
        memcpy(&sl, w->scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), lo_sh), fifteen);
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w->scales_h), hi_sh), three);
        __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        sc = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16));
        __m256i acc = _mm256_setzero_si256();
        UNROLL for (int ib = 0; ib < 8; ib++) {
            const __m256i sg = iq4_vals(w->qs + 16 * ib);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * ib));
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(sg, sg), _mm256_sign_epi8(xv, sg));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(ib))));
        }
        y = fmaf(_cvtsh_ss(w->d) * a->d[b], (float)hsum_i32(acc), y);
    }
    return y;
}

/* A block unpacked once for every token (one token: iq4_xs_row1; prefill: 8-row panels). */
static void rows_iq4_xs(const mm_job *j, int n0, int n1) {
    const mm_act *a = j->a;
    if (j->T >= GEMM_MIN_T) {
        gemm_k(j, n0, n1, K_IQ4_XS, 0);
        return;
    }
    if (j->T == 1) {
        for (int n = n0; n < n1; n++) j->y[n] = iq4_xs_row1(j->w + (size_t)n * j->row_bytes, a);
        return;
    }
    __m256i av[8], sv[8], sg[8]; /* |values|, the sub-block's scale (int16), the values (for the sign) */
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = j->w + (size_t)n * j->row_bytes;
        for (int b = 0; b < a->nb; b++) {
            const hearth_block_iq4_xs *w = (const hearth_block_iq4_xs *)(const void *)row + b;
            UNROLL for (int ib = 0; ib < 8; ib++) {
                sg[ib] = iq4_vals(w->qs + 16 * ib);
                av[ib] = _mm256_sign_epi8(sg[ib], sg[ib]);
                sv[ib] = _mm256_set1_epi16((int16_t)hearth_iq4_xs_scale(w, ib));
            }
            const float d = _cvtsh_ss(w->d);
            for (int t = 0; t < j->T; t++) {
                const int8_t *x = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
                const size_t xo = (size_t)t * a->nb_stride + (size_t)b;
                __m256i acc = _mm256_setzero_si256();
                UNROLL for (int k = 0; k < 8; k++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * k));
                    __m256i p = _mm256_maddubs_epi16(av[k], _mm256_sign_epi8(xv, sg[k]));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sv[k]));
                }
                float *y = j->y + (size_t)t * j->N + n;
                *y = fmaf(d * a->d[xo], (float)hsum_i32(acc), b == 0 ? 0.f : *y);
            }
        }
    }
}

static void rows_iq4_nl(const mm_job *j, int n0, int n1) { rows_q(j, n0, n1, Q_IQ4_NL); }

static void rows_q2_K(const mm_job *j, int n0, int n1) { rows_k23(j, n0, n1, 0); }
static void rows_q3_K(const mm_job *j, int n0, int n1) { rows_k23(j, n0, n1, 1); }

static void rows_q4_K(const mm_job *j, int n0, int n1) { rows_k(j, n0, n1, K_Q4_K); }
static void rows_q6_K(const mm_job *j, int n0, int n1) { rows_k(j, n0, n1, K_Q6_K); }
static void rows_q5_K(const mm_job *j, int n0, int n1) { rows_k(j, n0, n1, K_Q5_K); }

/* ---- q4_K panel-laid (panel.h), decode (T < 5) -----------------------------------
 *
 * A tile of 8 rows a block: each 32-byte vector holds a dword of every row,
 * so a broadcast of four activation codes dots four codes of 8 rows at once
 * (PMADDUBSW), a sub-block's pair sums add up in int16, and one PMADDWD by
 * the sub-block's scales (each row's in its lanes) leaves each row's exact
 * integer in its lane. The scales are unpacked for 8 rows with the 32-bit
 * masks of k_isum; the mins are one PMADDWD of the widened bytes against
 * the token's bsum pairs. The integers are the scalar kernel's, and so are
 * the f32 steps, lane by lane. (q6_K keeps its stored layout: its 6-bit
 * code assembly costs the same a weight either way, and a panel-laid q6_K
 * kernel measured no faster than the row kernel, s22.) */

/* int16 pairs (b, b) of byte k of each dword of v, zero-extended: lanes
 * 2r, 2r + 1 hold row r's */
INLINE __m256i dword_byte_pairs_u(__m256i v, int k) {
    const __m256i m = _mm256_setr_epi8(k, -1, k, -1, 4 + k, -1, 4 + k, -1, 8 + k, -1, 8 + k, -1, 12 + k, -1, 12 + k, -1,
                                       k, -1, k, -1, 4 + k, -1, 4 + k, -1, 8 + k, -1, 8 + k, -1, 12 + k, -1, 12 + k, -1);
    return _mm256_shuffle_epi8(v, m);
}

/* lo, hi: two int32 lanes a row for rows 0..3 and 4..7 (PMADDWD of a dword
 * vector's halves, widened); their sums, row r in lane r. */
INLINE __m256i rows_of_pairs(__m256i lo, __m256i hi) {
    __m256i h = _mm256_hadd_epi32(lo, hi); /* rows 0 1 4 5 | 2 3 6 7 */
    return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

INLINE __m256i ld256(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Tile t (block b) of q4_K against tokens t0 .. t0 + C - 1 (C <= 2). The
 * sub-blocks' scale vectors go through a small stack array, so that the
 * loop over sub-block pairs keeps only the sums in registers. */
INLINE void kp_step_q4_K(const uint8_t *t, const mm_act *a, int t0, int b, const int C, __m256 *acc) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f), lo2 = _mm256_set1_epi8(0x03);
    const __m256i a0 = ld256(t + 32), a1 = ld256(t + 64), a2 = ld256(t + 96);
    const __m256i sc03 = _mm256_and_si256(a0, m6), m03 = _mm256_and_si256(a1, m6);
    const __m256i sc47 = _mm256_or_si256(_mm256_and_si256(a2, low4),
                                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a0, 6), lo2), 4));
    const __m256i m47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a2, 4), low4),
                                        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a1, 6), lo2), 4));
    __m256i scv[8] __attribute__((aligned(32)));
    UNROLL for (int k = 0; k < 4; k++) {
        scv[k] = dword_byte_pairs_u(sc03, k);
        scv[4 + k] = dword_byte_pairs_u(sc47, k);
    }
    const int8_t *xq[2];
    __m256i isum[2];
    UNROLL for (int c = 0; c < C; c++) {
        xq[c] = a->qs + (size_t)(t0 + c) * a->qs_stride + 256 * (size_t)b;
        isum[c] = _mm256_setzero_si256();
    }
    const uint8_t *q = t + 128;
#pragma GCC unroll 1
    for (int p = 0; p < 4; p++) { /* sub-blocks 2p (low nibbles), 2p + 1 (high) */
        __m256i slo[2], shi[2];
        UNROLL for (int c = 0; c < C; c++) slo[c] = shi[c] = _mm256_setzero_si256();
        UNROLL for (int k = 0; k < 8; k++) {
            __m256i v = ld256(q + 32 * (8 * p + k));
            __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            UNROLL for (int c = 0; c < C; c++) {
                slo[c] = _mm256_add_epi16(slo[c], _mm256_maddubs_epi16(lo, bcast4(xq[c] + 64 * p + 4 * k)));
                shi[c] = _mm256_add_epi16(shi[c], _mm256_maddubs_epi16(hi, bcast4(xq[c] + 64 * p + 32 + 4 * k)));
            }
        }
        UNROLL for (int c = 0; c < C; c++)
            isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(slo[c], scv[2 * p]),
                                                                 _mm256_madd_epi16(shi[c], scv[2 * p + 1])));
    }
    const __m256i mlo03 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(m03)),
                  mhi03 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(m03, 1)),
                  mlo47 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(m47)),
                  mhi47 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(m47, 1));
    const __m256 dw = load_f16x8_at(t), dm = load_f16x8_at(t + 16);
    UNROLL for (int c = 0; c < C; c++) {
        size_t o = (size_t)(t0 + c) * a->nb_stride + (size_t)b;
        __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(a->bsums + 16 * o));
        __m256i h = _mm256_hadd_epi16(bs, bs); /* bsum pairs 0..3 twice | 4..7 twice */
        __m256i b03 = _mm256_permute2x128_si256(h, h, 0x00), b47 = _mm256_permute2x128_si256(h, h, 0x11);
        __m256i imin = rows_of_pairs(_mm256_add_epi32(_mm256_madd_epi16(mlo03, b03), _mm256_madd_epi16(mlo47, b47)),
                                     _mm256_add_epi32(_mm256_madd_epi16(mhi03, b03), _mm256_madd_epi16(mhi47, b47)));
        __m256 dx = _mm256_set1_ps(a->d[o]);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum[c]), acc[c]);
        acc[c] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(imin), acc[c]);
    }
}

/* Rows n .. n + 7 (one tile a block), tokens t0 .. t0 + C - 1. The tiles of a
 * group are consumed in order, but the hardware prefetchers do not keep up
 * with a tile's 18 lines a block: the tile four blocks ahead is asked for
 * (KP_AHEAD; bench_matmul q4_K at 4096 x 4096, s22: 8-13 -> 12-19 GB/s in
 * cache). The address is formed as an integer: past the last tile it is
 * never dereferenced. */
enum { KP_AHEAD = 4 };
INLINE void kp_gemv(const mm_job *j, int n, int t0, const int C) {
    const size_t tb = 8 * sizeof(hearth_block_q4_K);
    const uint8_t *tiles = j->w + (size_t)n * j->row_bytes;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < j->a->nb; b++) {
        uintptr_t ahead = (uintptr_t)tiles + (size_t)(b + KP_AHEAD) * tb;
        UNROLL for (size_t o = 0; o < tb; o += 64) _mm_prefetch((const char *)(ahead + o), _MM_HINT_T0);
        kp_step_q4_K(tiles + (size_t)b * tb, j->a, t0, b, C, acc);
    }
    UNROLL for (int c = 0; c < C; c++) _mm256_storeu_ps(j->y + (size_t)(t0 + c) * j->N + n, acc[c]);
}

static void panel_q4_K(const mm_job *j, int n0, int n1) {
    if (j->T >= GEMM_MIN_T) {
        gemm_k(j, n0, n1, K_Q4_K, 1);
        return;
    }
    const int np = j->N / 8 * 8; /* rows in panels; the rest are stored */
    int n = n0;
    for (; n + 8 <= n1 && n + 8 <= np; n += 8) {
        int t0 = 0;
        for (; t0 + 2 <= j->T; t0 += 2) kp_gemv(j, n, t0, 2);
        if (t0 < j->T) kp_gemv(j, n, t0, 1);
    }
    if (n < n1) rows_k(j, n, n1, K_Q4_K);
}

/* ---- float weights ------------------------------------------------------------------ */

enum { W_F32, W_F16, W_BF16 };

/* 8 weights from k as f32; w16 rows are f16/bf16. */
INLINE __m256 load_w8(const uint8_t *row, int k, const int wt) {
    if (wt == W_F32) return _mm256_loadu_ps((const float *)(const void *)row + k);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)row + k));
    if (wt == W_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE float tree16(__m256 lo, __m256 hi) {
    __m256 b = _mm256_add_ps(lo, hi);
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

/* R rows x C tokens (R * C <= 6): lanes 0-7 of the 16-lane chains in lo, 8-15 in hi. */
INLINE void ftile(const mm_job *j, int n, const int R, int t0, const int C, const int wt) {
    const int es = wt == W_F32 ? 4 : 2;
    const uint8_t *w[4];
    const float *x[4];
    UNROLL for (int r = 0; r < R; r++) w[r] = j->w + (size_t)(n + r) * j->row_bytes;
    UNROLL for (int c = 0; c < C; c++)
        x[c] = wt == W_F32 ? j->x + (size_t)(t0 + c) * j->K : j->a->f + (size_t)(t0 + c) * j->a->f_stride;
    __m256 lo[4][4], hi[4][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < C; c++) lo[r][c] = hi[r][c] = _mm256_setzero_ps();
    int K = j->K, k = 0;
    const size_t next = (size_t)R * j->row_bytes; /* the next tile's rows, at this k (row_prefetch's reason) */
    for (; k + 16 <= K; k += 16) {
        if (es == 4 || !(k & 16))
            UNROLL for (int r = 0; r < R; r++)
                _mm_prefetch((const char *)((uintptr_t)w[r] + next + (size_t)k * es), _MM_HINT_T0);
        UNROLL for (int r = 0; r < R; r++) {
            __m256 wl = load_w8(w[r], k, wt), wh = load_w8(w[r], k + 8, wt);
            UNROLL for (int c = 0; c < C; c++) {
                lo[r][c] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x[c] + k), lo[r][c]);
                hi[r][c] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x[c] + k + 8), hi[r][c]);
            }
        }
    }
    if (k < K) { /* zero-padded tail: fma(0, 0, acc) == acc */
        int rem = K - k;
        float xt[4][16];
        uint8_t wtl[4][64];
        UNROLL for (int c = 0; c < C; c++) {
            memset(xt[c], 0, sizeof xt[c]);
            memcpy(xt[c], x[c] + k, (size_t)rem * 4);
        }
        UNROLL for (int r = 0; r < R; r++) {
            memset(wtl[r], 0, sizeof wtl[r]);
            memcpy(wtl[r], w[r] + (size_t)k * es, (size_t)rem * es);
            __m256 wl = load_w8(wtl[r], 0, wt), wh = load_w8(wtl[r], 8, wt);
            UNROLL for (int c = 0; c < C; c++) {
                lo[r][c] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(xt[c]), lo[r][c]);
                hi[r][c] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(xt[c] + 8), hi[r][c]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) j->y[(size_t)(t0 + c) * j->N + n + r] = tree16(lo[r][c], hi[r][c]);
}

/* Tokens t0 .. t0 + C - 1 over rows n0 .. n1, R rows a tile (the rest one at a time). */
INLINE void frows_c(const mm_job *j, int n0, int n1, int t0, const int R, const int C, const int wt) {
    int n = n0;
    for (; n + R <= n1; n += R) ftile(j, n, R, t0, C, wt);
    for (; n < n1; n++) ftile(j, n, 1, t0, C, wt);
}

/* Rows n0 .. n1 for every token: 2 rows x 3 tokens (12 of the 16 registers accumulate; against 2 x 2,
 * bench prefill 128 of a BF16 llama under HEARTH_CPU_ISA=avx2 63-64 -> 75 tok/s, s46), then 2 x 2, then one
 * token 4 rows at a time. */
INLINE void frows_block(const mm_job *j, int n0, int n1, const int wt) {
    int t0 = 0;
    for (; t0 + 3 <= j->T; t0 += 3) frows_c(j, n0, n1, t0, 2, 3, wt);
    if (j->T - t0 >= 2) frows_c(j, n0, n1, t0, 2, 2, wt), t0 += 2;
    if (t0 < j->T) frows_c(j, n0, n1, t0, 4, 1, wt);
}

/* Blocks of rows that stay in L2 across the passes over the tokens (mm_float_block_rows). */
INLINE void frows(const mm_job *j, int n0, int n1, const int wt) {
    const int nb = mm_float_block_rows(j, n0, n1, 2);
    for (int b0 = n0; b0 < n1; b0 += nb) frows_block(j, b0, b0 + nb < n1 ? b0 + nb : n1, wt);
}

static void rows_f32(const mm_job *j, int n0, int n1) { frows(j, n0, n1, W_F32); }
static void rows_f16(const mm_job *j, int n0, int n1) { frows(j, n0, n1, W_F16); }
static void rows_bf16(const mm_job *j, int n0, int n1) { frows(j, n0, n1, W_BF16); }

const mm_isa hearth_cpu_mm_avx2 = {
    .name = "avx2",
    .rows = {[MM_F32] = rows_f32, [MM_F16] = rows_f16, [MM_BF16] = rows_bf16, [MM_Q4_0] = rows_q4_0,
             [MM_Q4_1] = rows_q4_1, [MM_Q8_0] = rows_q8_0, [MM_Q4_K] = rows_q4_K, [MM_Q6_K] = rows_q6_K,
             [MM_Q5_K] = rows_q5_K, [MM_Q5_0] = rows_q5_0, [MM_Q5_1] = rows_q5_1, [MM_Q2_K] = rows_q2_K,
             [MM_Q3_K] = rows_q3_K, [MM_IQ4_NL] = rows_iq4_nl, [MM_IQ4_XS] = rows_iq4_xs},
    .panel = {[MM_Q4_0] = panel_q4_0, [MM_Q4_1] = panel_q4_1, [MM_Q8_0] = panel_q8_0, [MM_Q4_K] = panel_q4_K},
    .act = {[ACT_F16] = act_f16, [ACT_BF16] = act_bf16, [ACT_Q8_0] = act_q8_01, [ACT_Q8_1] = act_q8_01},
};

#else /* not x86-64: no kernels; matmul.c never selects this table */

const mm_isa hearth_cpu_mm_avx2 = {.name = "avx2"};

#endif
