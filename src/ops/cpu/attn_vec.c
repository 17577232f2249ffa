/* attn_vec.c - the CPU attention's inner kernels (attn_vec.h): scores of
 * query rows against a chunk's K rows, the softmax's exp and sum, the
 * weighted sum of V rows, f16 rows widened. The SIMD kernels take up to four
 * query rows at once, so each K or V vector loaded serves all of them. */
#include "ops/cpu/attn_vec.h"

#include "core/fp8.h"
#include "core/half.h"
#include "ops/cpu/vexp.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* ---- scalar ------------------------------------------------------------------------ */

static inline float elem(const void *row, int e, int kind) {
    if (kind == HEARTH_ROWS_F16) return hearth_f16_to_f32(((const uint16_t *)row)[e]);
    if (kind == HEARTH_ROWS_E4M3) return hearth_e4m3_to_f32(((const uint8_t *)row)[e]);
    return ((const float *)row)[e];
}
static void scores_scalar(float *s, int ss, const float *const *q, int nr, const void *const *k, int kt, int n,
                          int hd, float scale) {
    for (int r = 0; r < nr; r++)
        for (int p = 0; p < n; p++) {
            float d = 0.0f;
            for (int e = 0; e < hd; e++) d += q[r][e] * elem(k[p], e, kt);
            s[(size_t)r * ss + p] = d * scale;
        }
}
static void accum_scalar(float *const *o, const float *w, int ws, int nr, const void *const *v, int vt, int n,
                         int hd) {
    for (int r = 0; r < nr; r++)
        for (int p = 0; p < n; p++)
            for (int e = 0; e < hd; e++) o[r][e] += w[(size_t)r * ws + p] * elem(v[p], e, vt);
}
static float expsum_scalar(float *s, int n, float m) {
    float sum = 0.0f;
    for (int p = 0; p < n; p++) sum += s[p] = expf(s[p] - m);
    return sum;
}
static float max_scalar(const float *s, int n, float m) {
    for (int p = 0; p < n; p++) m = s[p] > m ? s[p] : m;
    return m;
}
static void from_f16_scalar(float *d, const uint16_t *s, int n) {
    for (int i = 0; i < n; i++) d[i] = hearth_f16_to_f32(s[i]);
}
static void from_e4m3_scalar(float *d, const uint8_t *s, int n) {
    for (int i = 0; i < n; i++) d[i] = hearth_e4m3_to_f32(s[i]);
}

/* ---- AVX2 + FMA: rows of 8 floats ----------------------------------------------------- */

#define T2 __attribute__((target("avx2,fma,f16c")))

T2 INLINE __m256i mask8(int m) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

/* the lane sums of eight vectors, a[x]'s in lane x */
T2 INLINE __m256 hsum8(const __m256 a[8]) {
    __m256 r1[4], r2[2];
    UNROLL for (int k = 0; k < 4; k++)
        r1[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x20),
                              _mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x31));
    UNROLL for (int k = 0; k < 2; k++)
        r2[k] = _mm256_add_ps(_mm256_unpacklo_ps(r1[2 * k], r1[2 * k + 1]), _mm256_unpackhi_ps(r1[2 * k], r1[2 * k + 1]));
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(r2[0], r2[1], 0x44), _mm256_shuffle_ps(r2[0], r2[1], 0xee));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* e4m3 codes (in 32-bit lanes) as f32, the bits of hearth_e4m3_to_f32: the
 * exponent rebased for normals, m * 2^-9 for subnormals, the NaN code */
T2 INLINE __m256 e4m3_8(__m256i x) {
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(x, 3), _mm256_set1_epi32(15)), m = _mm256_and_si256(x, _mm256_set1_epi32(7));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x80)), 24);
    __m256i normal = _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(120)), 23), _mm256_slli_epi32(m, 20));
    __m256i sub = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(1.0f / 512)));
    __m256i u = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    u = _mm256_blendv_epi8(u, _mm256_set1_epi32(0x7fc00000),
                           _mm256_cmpeq_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7f)), _mm256_set1_epi32(0x7f)));
    return _mm256_castsi256_ps(_mm256_or_si256(u, sign));
}

/* 8 elements of a row from d: f32, or f16 / e4m3 widened (KIND: HEARTH_ROWS_) */
T2 INLINE __m256 load8(const void *row, int d, const int KIND) {
    if (KIND == HEARTH_ROWS_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)row + d)));
    if (KIND == HEARTH_ROWS_E4M3)
        return e4m3_8(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)((const uint8_t *)row + d))));
    return _mm256_loadu_ps((const float *)row + d);
}

/* R rows x 8/R positions from p0: one hsum8 */
T2 INLINE void scores_blk8(float *s, int ss, const float *const *q, const int R, const void *const *k, const int KIND,
                           int p0, int n, int hd, float scale) {
    const int P = 8 / R, m = n - p0 < P ? n - p0 : P;
    const void *kr[8];
    __m256 acc[8];
    UNROLL for (int x = 0; x < P; x++) kr[x] = k[p0 + (x < m ? x : m - 1)];
    UNROLL for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= hd; d += 8) {
        __m256 qv[4];
        UNROLL for (int y = 0; y < R; y++) qv[y] = _mm256_loadu_ps(q[y] + d);
        UNROLL for (int x = 0; x < P; x++) {
            __m256 kv = load8(kr[x], d, KIND);
            UNROLL for (int y = 0; y < R; y++) acc[y * P + x] = _mm256_fmadd_ps(qv[y], kv, acc[y * P + x]);
        }
    }
    if (d < hd) { /* f32 rows only: others come in multiples of 16 */
        const __m256i dm = mask8(hd - d);
        __m256 qv[4];
        UNROLL for (int y = 0; y < R; y++) qv[y] = _mm256_maskload_ps(q[y] + d, dm);
        UNROLL for (int x = 0; x < P; x++) {
            __m256 kv = _mm256_maskload_ps((const float *)kr[x] + d, dm);
            UNROLL for (int y = 0; y < R; y++) acc[y * P + x] = _mm256_fmadd_ps(qv[y], kv, acc[y * P + x]);
        }
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_mul_ps(hsum8(acc), _mm256_set1_ps(scale)));
    UNROLL for (int y = 0; y < R; y++) memcpy(s + (size_t)y * ss + p0, t + y * P, sizeof(float) * (size_t)m);
}
T2 INLINE void scores_rows8(float *s, int ss, const float *const *q, int nr, const void *const *k, const int KIND,
                            int n, int hd, float scale) {
    for (int r = 0; r < nr;) {
        const int R = nr - r >= 4 ? 4 : nr - r >= 2 ? 2 : 1;
        for (int p0 = 0; p0 < n; p0 += 8 / R) {
            if (R == 4) scores_blk8(s + (size_t)r * ss, ss, q + r, 4, k, KIND, p0, n, hd, scale);
            else if (R == 2) scores_blk8(s + (size_t)r * ss, ss, q + r, 2, k, KIND, p0, n, hd, scale);
            else scores_blk8(s + (size_t)r * ss, ss, q + r, 1, k, KIND, p0, n, hd, scale);
        }
        r += R;
    }
}
T2 static void scores_avx2(float *s, int ss, const float *const *q, int nr, const void *const *k, int kt, int n,
                           int hd, float scale) {
    if (kt == HEARTH_ROWS_F16) scores_rows8(s, ss, q, nr, k, HEARTH_ROWS_F16, n, hd, scale);
    else if (kt == HEARTH_ROWS_E4M3) scores_rows8(s, ss, q, nr, k, HEARTH_ROWS_E4M3, n, hd, scale);
    else scores_rows8(s, ss, q, nr, k, HEARTH_ROWS_F32, n, hd, scale);
}

/* R rows, NV vectors of each from element d */
T2 INLINE void accum_blk8(float *const *o, const float *w, int ws, const int R, const void *const *v, const int KIND,
                          int n, int d, const int NV, int hd) {
    __m256i mk[4];
    __m256 acc[2][4];
    UNROLL for (int c = 0; c < NV; c++) mk[c] = mask8(hd - d - 8 * c);
    UNROLL for (int y = 0; y < R; y++)
        UNROLL for (int c = 0; c < NV; c++) acc[y][c] = _mm256_maskload_ps(o[y] + d + 8 * c, mk[c]);
    for (int p = 0; p < n; p++) {
        __m256 vv[4];
        UNROLL for (int c = 0; c < NV; c++)
            vv[c] = KIND != HEARTH_ROWS_F32 ? load8(v[p], d + 8 * c, KIND)
                                            : _mm256_maskload_ps((const float *)v[p] + d + 8 * c, mk[c]);
        UNROLL for (int y = 0; y < R; y++) {
            __m256 wp = _mm256_set1_ps(w[(size_t)y * ws + p]);
            UNROLL for (int c = 0; c < NV; c++) acc[y][c] = _mm256_fmadd_ps(wp, vv[c], acc[y][c]);
        }
    }
    UNROLL for (int y = 0; y < R; y++)
        UNROLL for (int c = 0; c < NV; c++) _mm256_maskstore_ps(o[y] + d + 8 * c, mk[c], acc[y][c]);
}
T2 INLINE void accum_rows8(float *const *o, const float *w, int ws, const int R, const void *const *v, const int KIND,
                           int n, int hd) {
    for (int d = 0; d < hd; d += 32) {
        const int nv = (hd - d + 7) / 8;
        if (nv >= 4) accum_blk8(o, w, ws, R, v, KIND, n, d, 4, hd);
        else if (nv == 3) accum_blk8(o, w, ws, R, v, KIND, n, d, 3, hd);
        else if (nv == 2) accum_blk8(o, w, ws, R, v, KIND, n, d, 2, hd);
        else accum_blk8(o, w, ws, R, v, KIND, n, d, 1, hd);
    }
}
T2 INLINE void accum_all8(float *const *o, const float *w, int ws, int nr, const void *const *v, const int KIND, int n,
                          int hd) {
    int r = 0;
    for (; r + 2 <= nr; r += 2) accum_rows8(o + r, w + (size_t)r * ws, ws, 2, v, KIND, n, hd);
    if (r < nr) accum_rows8(o + r, w + (size_t)r * ws, ws, 1, v, KIND, n, hd);
}
T2 static void accum_avx2(float *const *o, const float *w, int ws, int nr, const void *const *v, int vt, int n,
                          int hd) {
    if (vt == HEARTH_ROWS_F16) accum_all8(o, w, ws, nr, v, HEARTH_ROWS_F16, n, hd);
    else if (vt == HEARTH_ROWS_E4M3) accum_all8(o, w, ws, nr, v, HEARTH_ROWS_E4M3, n, hd);
    else accum_all8(o, w, ws, nr, v, HEARTH_ROWS_F32, n, hd);
}

T2 static float expsum_avx2(float *s, int n, float m) {
    __m256 sum = _mm256_setzero_ps(), vm = _mm256_set1_ps(m);
    for (int p = 0; p < n; p += 8) {
        __m256i mk = mask8(n - p);
        __m256 e = _mm256_and_ps(hearth_exp8(_mm256_sub_ps(_mm256_maskload_ps(s + p, mk), vm)), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(s + p, mk, e);
        sum = _mm256_add_ps(sum, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
/* MAXPS gives its second operand where either is a NaN: s's NaNs are passed over */
T2 static float max_avx2(const float *s, int n, float m) {
    __m256 vm = _mm256_set1_ps(m);
    for (int p = 0; p < n; p += 8) {
        __m256i mk = mask8(n - p);
        vm = _mm256_max_ps(_mm256_blendv_ps(vm, _mm256_maskload_ps(s + p, mk), _mm256_castsi256_ps(mk)), vm);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
T2 static void from_e4m3_avx2(float *d, const uint8_t *s, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, load8(s, i, HEARTH_ROWS_E4M3));
    from_e4m3_scalar(d + i, s + i, n - i);
}
T2 static void from_f16_avx2(float *d, const uint16_t *s, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
    for (; i < n; i++) d[i] = hearth_f16_to_f32(s[i]);
}

/* ---- AVX-512F: rows of 16 floats ------------------------------------------------------ */

#define T5 __attribute__((target("avx512f")))

T5 INLINE __mmask16 mask16(int m) { return m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (m > 0 ? m : 0)) - 1); }

/* the lane sums of sixteen vectors, a[x]'s in lane x */
T5 INLINE __m512 hsum16(const __m512 a[16]) {
    __m512 r1[8], r2[4], r3[2];
    UNROLL for (int k = 0; k < 8; k++)
        r1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
                              _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xee));
    UNROLL for (int k = 0; k < 4; k++)
        r2[k] = _mm512_add_ps(_mm512_shuffle_f32x4(r1[2 * k], r1[2 * k + 1], 0x88),
                              _mm512_shuffle_f32x4(r1[2 * k], r1[2 * k + 1], 0xdd));
    UNROLL for (int k = 0; k < 2; k++)
        r3[k] = _mm512_add_ps(_mm512_unpacklo_ps(r2[2 * k], r2[2 * k + 1]), _mm512_unpackhi_ps(r2[2 * k], r2[2 * k + 1]));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(r3[0], r3[1], 0x44), _mm512_shuffle_ps(r3[0], r3[1], 0xee));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

/* e4m3 codes (in 32-bit lanes) as f32, the bits of hearth_e4m3_to_f32 (e4m3_8) */
T5 INLINE __m512 e4m3_16(__m512i x) {
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(x, 3), _mm512_set1_epi32(15)), m = _mm512_and_si512(x, _mm512_set1_epi32(7));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
    __m512i u = _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(120)), 23), _mm512_slli_epi32(m, 20));
    u = _mm512_mask_mov_epi32(u, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()),
                              _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(1.0f / 512))));
    u = _mm512_mask_mov_epi32(u, _mm512_cmpeq_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7f)), _mm512_set1_epi32(0x7f)),
                              _mm512_set1_epi32(0x7fc00000));
    return _mm512_castsi512_ps(_mm512_or_si512(u, sign));
}

/* 16 elements of a row from d: f32, or f16 / e4m3 widened (KIND: HEARTH_ROWS_) */
T5 INLINE __m512 load16(const void *row, int d, const int KIND) {
    if (KIND == HEARTH_ROWS_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)row + d)));
    if (KIND == HEARTH_ROWS_E4M3)
        return e4m3_16(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)((const uint8_t *)row + d))));
    return _mm512_loadu_ps((const float *)row + d);
}

/* R rows x 16/R positions from p0: one hsum16 */
T5 INLINE void scores_blk16(float *s, int ss, const float *const *q, const int R, const void *const *k, const int KIND,
                            int p0, int n, int hd, float scale) {
    const int P = 16 / R, m = n - p0 < P ? n - p0 : P;
    const void *kr[16];
    __m512 acc[16];
    UNROLL for (int x = 0; x < P; x++) kr[x] = k[p0 + (x < m ? x : m - 1)];
    UNROLL for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 16 <= hd; d += 16) {
        __m512 qv[4];
        UNROLL for (int y = 0; y < R; y++) qv[y] = _mm512_loadu_ps(q[y] + d);
        UNROLL for (int x = 0; x < P; x++) {
            __m512 kv = load16(kr[x], d, KIND);
            UNROLL for (int y = 0; y < R; y++) acc[y * P + x] = _mm512_fmadd_ps(qv[y], kv, acc[y * P + x]);
        }
    }
    if (d < hd) { /* f32 rows only: others come in multiples of 16 */
        const __mmask16 dm = mask16(hd - d);
        __m512 qv[4];
        UNROLL for (int y = 0; y < R; y++) qv[y] = _mm512_maskz_loadu_ps(dm, q[y] + d);
        UNROLL for (int x = 0; x < P; x++) {
            __m512 kv = _mm512_maskz_loadu_ps(dm, (const float *)kr[x] + d);
            UNROLL for (int y = 0; y < R; y++) acc[y * P + x] = _mm512_fmadd_ps(qv[y], kv, acc[y * P + x]);
        }
    }
    float t[16];
    _mm512_storeu_ps(t, _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale)));
    UNROLL for (int y = 0; y < R; y++) memcpy(s + (size_t)y * ss + p0, t + y * P, sizeof(float) * (size_t)m);
}
T5 INLINE void scores_rows16(float *s, int ss, const float *const *q, int nr, const void *const *k, const int KIND,
                             int n, int hd, float scale) {
    for (int r = 0; r < nr;) {
        const int R = nr - r >= 4 ? 4 : nr - r;
        for (int p0 = 0; p0 < n; p0 += 16 / R) {
            if (R == 4) scores_blk16(s + (size_t)r * ss, ss, q + r, 4, k, KIND, p0, n, hd, scale);
            else if (R == 3) scores_blk16(s + (size_t)r * ss, ss, q + r, 3, k, KIND, p0, n, hd, scale);
            else if (R == 2) scores_blk16(s + (size_t)r * ss, ss, q + r, 2, k, KIND, p0, n, hd, scale);
            else scores_blk16(s + (size_t)r * ss, ss, q + r, 1, k, KIND, p0, n, hd, scale);
        }
        r += R;
    }
}
T5 static void scores_avx512(float *s, int ss, const float *const *q, int nr, const void *const *k, int kt, int n,
                             int hd, float scale) {
    if (kt == HEARTH_ROWS_F16) scores_rows16(s, ss, q, nr, k, HEARTH_ROWS_F16, n, hd, scale);
    else if (kt == HEARTH_ROWS_E4M3) scores_rows16(s, ss, q, nr, k, HEARTH_ROWS_E4M3, n, hd, scale);
    else scores_rows16(s, ss, q, nr, k, HEARTH_ROWS_F32, n, hd, scale);
}

/* R rows, NV vectors of each from element d */
T5 INLINE void accum_blk16(float *const *o, const float *w, int ws, const int R, const void *const *v, const int KIND,
                           int n, int d, const int NV, int hd) {
    __mmask16 mk[4];
    __m512 acc[4][4];
    UNROLL for (int c = 0; c < NV; c++) mk[c] = mask16(hd - d - 16 * c);
    UNROLL for (int y = 0; y < R; y++)
        UNROLL for (int c = 0; c < NV; c++) acc[y][c] = _mm512_maskz_loadu_ps(mk[c], o[y] + d + 16 * c);
    for (int p = 0; p < n; p++) {
        __m512 vv[4];
        UNROLL for (int c = 0; c < NV; c++)
            vv[c] = KIND != HEARTH_ROWS_F32 ? load16(v[p], d + 16 * c, KIND)
                                            : _mm512_maskz_loadu_ps(mk[c], (const float *)v[p] + d + 16 * c);
        UNROLL for (int y = 0; y < R; y++) {
            __m512 wp = _mm512_set1_ps(w[(size_t)y * ws + p]);
            UNROLL for (int c = 0; c < NV; c++) acc[y][c] = _mm512_fmadd_ps(wp, vv[c], acc[y][c]);
        }
    }
    UNROLL for (int y = 0; y < R; y++)
        UNROLL for (int c = 0; c < NV; c++) _mm512_mask_storeu_ps(o[y] + d + 16 * c, mk[c], acc[y][c]);
}
T5 INLINE void accum_rows16(float *const *o, const float *w, int ws, const int R, const void *const *v, const int KIND,
                            int n, int hd) {
    for (int d = 0; d < hd; d += 64) {
        const int nv = (hd - d + 15) / 16;
        if (nv >= 4) accum_blk16(o, w, ws, R, v, KIND, n, d, 4, hd);
        else if (nv == 3) accum_blk16(o, w, ws, R, v, KIND, n, d, 3, hd);
        else if (nv == 2) accum_blk16(o, w, ws, R, v, KIND, n, d, 2, hd);
        else accum_blk16(o, w, ws, R, v, KIND, n, d, 1, hd);
    }
}
T5 INLINE void accum_all16(float *const *o, const float *w, int ws, int nr, const void *const *v, const int KIND, int n,
                           int hd) {
    int r = 0;
    for (; r + 4 <= nr; r += 4) accum_rows16(o + r, w + (size_t)r * ws, ws, 4, v, KIND, n, hd);
    if (nr - r == 3) accum_rows16(o + r, w + (size_t)r * ws, ws, 3, v, KIND, n, hd);
    else if (nr - r == 2) accum_rows16(o + r, w + (size_t)r * ws, ws, 2, v, KIND, n, hd);
    else if (nr - r == 1) accum_rows16(o + r, w + (size_t)r * ws, ws, 1, v, KIND, n, hd);
}
T5 static void accum_avx512(float *const *o, const float *w, int ws, int nr, const void *const *v, int vt, int n,
                            int hd) {
    if (vt == HEARTH_ROWS_F16) accum_all16(o, w, ws, nr, v, HEARTH_ROWS_F16, n, hd);
    else if (vt == HEARTH_ROWS_E4M3) accum_all16(o, w, ws, nr, v, HEARTH_ROWS_E4M3, n, hd);
    else accum_all16(o, w, ws, nr, v, HEARTH_ROWS_F32, n, hd);
}

T5 static float expsum_avx512(float *s, int n, float m) {
    __m512 sum = _mm512_setzero_ps(), vm = _mm512_set1_ps(m);
    for (int p = 0; p < n; p += 16) {
        __mmask16 mk = mask16(n - p);
        __m512 e = _mm512_maskz_mov_ps(mk, hearth_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + p), vm)));
        _mm512_mask_storeu_ps(s + p, mk, e);
        sum = _mm512_add_ps(sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}
T5 static float max_avx512(const float *s, int n, float m) {
    __m512 vm = _mm512_set1_ps(m);
    for (int p = 0; p < n; p += 16) vm = _mm512_mask_max_ps(vm, mask16(n - p), _mm512_maskz_loadu_ps(mask16(n - p), s + p), vm);
    return _mm512_reduce_max_ps(vm);
}
T5 static void from_e4m3_avx512(float *d, const uint8_t *s, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, load16(s, i, HEARTH_ROWS_E4M3));
    from_e4m3_scalar(d + i, s + i, n - i);
}
T5 static void from_f16_avx512(float *d, const uint16_t *s, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(s + i))));
    for (; i < n; i++) d[i] = hearth_f16_to_f32(s[i]);
}

/* f16 stores: the F16C conversion rounds to nearest even as hearth_f32_to_f16
 * does; a NaN keeps only its sign there, so NaN lanes take the scalar route */
static void to_f16_scalar(uint16_t *d, const float *s, int n) {
    for (int i = 0; i < n; i++) d[i] = hearth_f32_to_f16(s[i]);
}
T2 static void to_f16_avx2(uint16_t *d, const float *s, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(s + i);
        _mm_storeu_si128((__m128i *)(void *)(d + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) to_f16_scalar(d + i, s + i, 8);
    }
    to_f16_scalar(d + i, s + i, n - i);
}
T5 static void to_f16_avx512(uint16_t *d, const float *s, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(s + i);
        _mm256_storeu_si256((__m256i *)(void *)(d + i), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) to_f16_scalar(d + i, s + i, 16);
    }
    to_f16_scalar(d + i, s + i, n - i);
}

static const hearth_attn_ops ATTN_SCALAR = {"scalar",        scores_scalar,   accum_scalar,     expsum_scalar,
                                            max_scalar,      from_f16_scalar, from_e4m3_scalar, to_f16_scalar};
static const hearth_attn_ops ATTN_AVX2 = {"avx2",   scores_avx2,   accum_avx2,     expsum_avx2,
                                          max_avx2, from_f16_avx2, from_e4m3_avx2, to_f16_avx2};
static const hearth_attn_ops ATTN_AVX512 = {"avx512",   scores_avx512,   accum_avx512,     expsum_avx512,
                                            max_avx512, from_f16_avx512, from_e4m3_avx512, to_f16_avx512};

const hearth_attn_ops *hearth_attn_ops_get(const char *isa) {
    __builtin_cpu_init();
    if (!strcmp(isa, "scalar")) return &ATTN_SCALAR;
    if (!strcmp(isa, "avx2"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") ? &ATTN_AVX2 : NULL;
    if (!strcmp(isa, "avx512")) return __builtin_cpu_supports("avx512f") ? &ATTN_AVX512 : NULL;
    return NULL;
}
