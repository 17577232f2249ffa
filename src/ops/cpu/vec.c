/* vec.c - dot / axpy / scale in scalar, AVX2+FMA and AVX-512F versions.
 * The SIMD versions sum in a different order than the scalar one; each is
 * deterministic for a given ISA, which is all batching invariance needs. */
#include "ops/cpu/vec.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

static float dot_scalar(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static void axpy_scalar(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}
static void scale_scalar(float *y, float a, int n) {
    for (int i = 0; i < n; i++) y[i] *= a;
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float s = _mm_cvtss_f32(h);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}
__attribute__((target("avx2,fma"))) static void axpy_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
__attribute__((target("avx2,fma"))) static void scale_avx2(float *y, float a, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

__attribute__((target("avx512f"))) static float dot_avx512(const float *a, const float *b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}
__attribute__((target("avx512f"))) static void axpy_avx512(float *y, float a, const float *x, int n) {
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
__attribute__((target("avx512f"))) static void scale_avx512(float *y, float a, int n) {
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(va, _mm512_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* ---- attention over a chunk of positions (ops_cpu.c's paged attention) ----------------
 * Every (head, position) score is the same sum in the same order wherever the
 * position falls in a chunk, so a row's numbers never depend on its batch. */

static void scores_scalar(float *s, int ss, const float *q, int gs, const float *const *k, int n, int hd,
                          float scale) {
    for (int i = 0; i < gs; i++)
        for (int p = 0; p < n; p++) s[(size_t)i * ss + p] = dot_scalar(q + (size_t)i * hd, k[p], hd) * scale;
}
static void accum_scalar(float *o, const float *w, int ws, int gs, const float *const *v, int n, int hd) {
    for (int i = 0; i < gs; i++)
        for (int p = 0; p < n; p++) axpy_scalar(o + (size_t)i * hd, w[(size_t)i * ws + p], v[p], hd);
}
static float expsum_scalar(float *s, int n, float m) {
    float sum = 0.0f;
    for (int p = 0; p < n; p++) sum += s[p] = expf(s[p] - m);
    return sum;
}

/* exp(x) for x <= 0 (Cephes' expf: ~1 ulp), 0 below -87.3 */
#define EXP_C0 1.9875691500e-4f
#define EXP_C1 1.3981999507e-3f
#define EXP_C2 8.3334519073e-3f
#define EXP_C3 4.1665795894e-2f
#define EXP_C4 1.6666665459e-1f
#define EXP_C5 5.0000001201e-1f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_MIN -87.3f

__attribute__((target("avx2,fma"))) static inline __m256 exp_avx2(__m256 x) {
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_MIN), _CMP_LT_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(EXP_MIN));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_C0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* the lane sums of eight vectors, a[p]'s in lane p: the same tree for every p */
__attribute__((target("avx2,fma"))) static inline __m256 hsum8_avx2(const __m256 a[8]) {
    __m256 r1[4], r2[2];
    for (int k = 0; k < 4; k++)
        r1[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x20),
                              _mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x31));
    for (int k = 0; k < 2; k++)
        r2[k] = _mm256_add_ps(_mm256_unpacklo_ps(r1[2 * k], r1[2 * k + 1]), _mm256_unpackhi_ps(r1[2 * k], r1[2 * k + 1]));
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(r2[0], r2[1], 0x44), _mm256_shuffle_ps(r2[0], r2[1], 0xee));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

__attribute__((target("avx2,fma"))) static inline __m256i tail_mask8(int m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2,fma"))) static void scores_avx2(float *s, int ss, const float *q, int gs,
                                                             const float *const *k, int n, int hd, float scale) {
    const __m256i dm = tail_mask8(hd % 8);
    for (int i = 0; i < gs; i++) {
        const float *qi = q + (size_t)i * hd;
        for (int p0 = 0; p0 < n; p0 += 8) {
            const int m = n - p0 < 8 ? n - p0 : 8;
            const float *r[8];
            __m256 acc[8];
            for (int p = 0; p < 8; p++) r[p] = k[p0 + (p < m ? p : m - 1)], acc[p] = _mm256_setzero_ps();
            int d = 0;
            for (; d + 8 <= hd; d += 8) {
                __m256 qv = _mm256_loadu_ps(qi + d);
                for (int p = 0; p < 8; p++) acc[p] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r[p] + d), acc[p]);
            }
            if (d < hd) {
                __m256 qv = _mm256_maskload_ps(qi + d, dm);
                for (int p = 0; p < 8; p++) acc[p] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(r[p] + d, dm), acc[p]);
            }
            _mm256_maskstore_ps(s + (size_t)i * ss + p0, tail_mask8(m), _mm256_mul_ps(hsum8_avx2(acc), _mm256_set1_ps(scale)));
        }
    }
}
__attribute__((target("avx2,fma"))) static void accum_avx2(float *o, const float *w, int ws, int gs,
                                                            const float *const *v, int n, int hd) {
    for (int i = 0; i < gs; i++) {
        float *oi = o + (size_t)i * hd;
        const float *wi = w + (size_t)i * ws;
        for (int d = 0; d < hd; d += 32) {
            const int nv = (hd - d + 7) / 8 < 4 ? (hd - d + 7) / 8 : 4;
            __m256i mk[4];
            __m256 acc[4];
            for (int c = 0; c < nv; c++) mk[c] = tail_mask8(hd - d - 8 * c), acc[c] = _mm256_maskload_ps(oi + d + 8 * c, mk[c]);
            for (int p = 0; p < n; p++) {
                __m256 wp = _mm256_set1_ps(wi[p]);
                for (int c = 0; c < nv; c++)
                    acc[c] = _mm256_fmadd_ps(wp, _mm256_maskload_ps(v[p] + d + 8 * c, mk[c]), acc[c]);
            }
            for (int c = 0; c < nv; c++) _mm256_maskstore_ps(oi + d + 8 * c, mk[c], acc[c]);
        }
    }
}
__attribute__((target("avx2,fma"))) static float expsum_avx2(float *s, int n, float m) {
    __m256 sum = _mm256_setzero_ps(), vm = _mm256_set1_ps(m);
    for (int p = 0; p < n; p += 8) {
        __m256i mk = tail_mask8(n - p);
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(s + p, mk), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(s + p, mk, e);
        sum = _mm256_add_ps(sum, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

__attribute__((target("avx512f"))) static inline __m512 exp_avx512(__m512 x) {
    __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_MIN), _CMP_LT_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(EXP_MIN));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_C0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps((__mmask16)~under, p, n);
}

/* the lane sums of sixteen vectors, a[p]'s in lane p: the same tree for every p */
__attribute__((target("avx512f"))) static inline __m512 hsum16_avx512(const __m512 a[16]) {
    __m512 r1[8], r2[4], r3[2];
    for (int k = 0; k < 8; k++)
        r1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
                              _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xee));
    for (int k = 0; k < 4; k++)
        r2[k] = _mm512_add_ps(_mm512_shuffle_f32x4(r1[2 * k], r1[2 * k + 1], 0x88),
                              _mm512_shuffle_f32x4(r1[2 * k], r1[2 * k + 1], 0xdd));
    for (int k = 0; k < 2; k++)
        r3[k] = _mm512_add_ps(_mm512_unpacklo_ps(r2[2 * k], r2[2 * k + 1]), _mm512_unpackhi_ps(r2[2 * k], r2[2 * k + 1]));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(r3[0], r3[1], 0x44), _mm512_shuffle_ps(r3[0], r3[1], 0xee));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

__attribute__((target("avx512f"))) static void scores_avx512(float *s, int ss, const float *q, int gs,
                                                              const float *const *k, int n, int hd, float scale) {
    const __mmask16 dm = (__mmask16)((1u << (hd % 16)) - 1);
    for (int i = 0; i < gs; i++) {
        const float *qi = q + (size_t)i * hd;
        for (int p0 = 0; p0 < n; p0 += 16) {
            const int m = n - p0 < 16 ? n - p0 : 16;
            const float *r[16];
            __m512 acc[16];
            for (int p = 0; p < 16; p++) r[p] = k[p0 + (p < m ? p : m - 1)], acc[p] = _mm512_setzero_ps();
            int d = 0;
            for (; d + 16 <= hd; d += 16) {
                __m512 qv = _mm512_loadu_ps(qi + d);
                for (int p = 0; p < 16; p++) acc[p] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r[p] + d), acc[p]);
            }
            if (d < hd) {
                __m512 qv = _mm512_maskz_loadu_ps(dm, qi + d);
                for (int p = 0; p < 16; p++) acc[p] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(dm, r[p] + d), acc[p]);
            }
            _mm512_mask_storeu_ps(s + (size_t)i * ss + p0, (__mmask16)((1u << m) - 1),
                                  _mm512_mul_ps(hsum16_avx512(acc), _mm512_set1_ps(scale)));
        }
    }
}
__attribute__((target("avx512f"))) static void accum_avx512(float *o, const float *w, int ws, int gs,
                                                             const float *const *v, int n, int hd) {
    for (int i = 0; i < gs; i++) {
        float *oi = o + (size_t)i * hd;
        const float *wi = w + (size_t)i * ws;
        for (int d = 0; d < hd; d += 64) {
            const int nv = (hd - d + 15) / 16 < 4 ? (hd - d + 15) / 16 : 4;
            __mmask16 mk[4];
            __m512 acc[4];
            for (int c = 0; c < nv; c++) {
                int left = hd - d - 16 * c;
                mk[c] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
                acc[c] = _mm512_maskz_loadu_ps(mk[c], oi + d + 16 * c);
            }
            for (int p = 0; p < n; p++) {
                __m512 wp = _mm512_set1_ps(wi[p]);
                for (int c = 0; c < nv; c++)
                    acc[c] = _mm512_fmadd_ps(wp, _mm512_maskz_loadu_ps(mk[c], v[p] + d + 16 * c), acc[c]);
            }
            for (int c = 0; c < nv; c++) _mm512_mask_storeu_ps(oi + d + 16 * c, mk[c], acc[c]);
        }
    }
}
__attribute__((target("avx512f"))) static float expsum_avx512(float *s, int n, float m) {
    __m512 sum = _mm512_setzero_ps(), vm = _mm512_set1_ps(m);
    for (int p = 0; p < n; p += 16) {
        __mmask16 mk = n - p >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - p)) - 1);
        __m512 e = _mm512_maskz_mov_ps(mk, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + p), vm)));
        _mm512_mask_storeu_ps(s + p, mk, e);
        sum = _mm512_add_ps(sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

static const hearth_vec_ops VEC_SCALAR = {"scalar", dot_scalar, axpy_scalar, scale_scalar, scores_scalar, accum_scalar,
                                          expsum_scalar};
static const hearth_vec_ops VEC_AVX2 = {"avx2", dot_avx2, axpy_avx2, scale_avx2, scores_avx2, accum_avx2, expsum_avx2};
static const hearth_vec_ops VEC_AVX512 = {"avx512", dot_avx512, axpy_avx512, scale_avx512, scores_avx512, accum_avx512,
                                          expsum_avx512};

const hearth_vec_ops *hearth_vec_get(const char *isa) {
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f"), has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa && !strcmp(isa, "scalar")) return &VEC_SCALAR;
    if (isa && !strcmp(isa, "avx2")) return has2 ? &VEC_AVX2 : NULL;
    if (isa && !strcmp(isa, "avx512")) return has512 ? &VEC_AVX512 : NULL;
    if (isa) return NULL;
    return has512 ? &VEC_AVX512 : has2 ? &VEC_AVX2 : &VEC_SCALAR;
}
