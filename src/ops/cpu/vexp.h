/* vexp.h - exp in AVX2 and AVX-512 vectors (Cephes' expf: within ~1 ulp of
 * expf from -87.3 to 88; 0 below, exp(88) above), for the attention's
 * softmax and the swiglu. */
#ifndef HEARTH_OPS_CPU_VEXP_H
#define HEARTH_OPS_CPU_VEXP_H

#include <immintrin.h>

#define VEXP_C0 1.9875691500e-4f
#define VEXP_C1 1.3981999507e-3f
#define VEXP_C2 8.3334519073e-3f
#define VEXP_C3 4.1665795894e-2f
#define VEXP_C4 1.6666665459e-1f
#define VEXP_C5 5.0000001201e-1f
#define VEXP_LOG2E 1.44269504088896341f
#define VEXP_LN2_HI 0.693359375f
#define VEXP_LN2_LO -2.12194440e-4f
#define VEXP_MIN -87.3f
#define VEXP_MAX 88.0f

__attribute__((target("avx2,fma"))) static inline __m256 hearth_exp8(__m256 x) {
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(VEXP_MIN), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(VEXP_MIN)), _mm256_set1_ps(VEXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(VEXP_C0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_C5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

__attribute__((target("avx512f"))) static inline __m512 hearth_exp16(__m512 x) {
    __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(VEXP_MIN), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(VEXP_MIN)), _mm512_set1_ps(VEXP_MAX));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(VEXP_C0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_C5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps((__mmask16)~under, p, n);
}

#endif
