/* vec.c - scale, add_scaled, swiglu and its backward in scalar, AVX2+FMA and AVX-512F
 * versions. Each is elementwise: a value does not depend on where a call
 * starts or ends. */
#include "ops/cpu/vec.h"

#include "ops/cpu/vexp.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

static void scale_scalar(float *y, float a, int n) {
    for (int i = 0; i < n; i++) y[i] *= a;
}

__attribute__((target("avx2,fma"))) static void scale_avx2(float *y, float a, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

__attribute__((target("avx512f"))) static void scale_avx512(float *y, float a, int n) {
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(va, _mm512_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* y += a * x, a product then a sum (no fused multiply-add): every ISA's bits are the scalar loop's */
static void add_scaled_scalar(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

__attribute__((target("avx2,fma"))) static void add_scaled_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
    add_scaled_scalar(y + i, a, x + i, n - i);
}

__attribute__((target("avx512f"))) static void add_scaled_avx512(float *y, float a, const float *x, int n) {
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_mul_ps(va, _mm512_loadu_ps(x + i))));
    add_scaled_scalar(y + i, a, x + i, n - i);
}

/* swiglu: out = gate * sigmoid(gate) * up */
static void swiglu_scalar(float *out, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
__attribute__((target("avx2,fma"))) static void swiglu_avx2(float *out, const float *g, const float *u, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 e = hearth_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
    }
    swiglu_scalar(out + i, g + i, u + i, n - i);
}
__attribute__((target("avx512f"))) static void swiglu_avx512(float *out, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512 e = hearth_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)),
                                                        _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* swiglu's backward (training): with s = sigmoid(g), du = dh g s and
 * dg = dh u s (1 + g (1 - s)). */
static void swiglu_bwd_scalar(float *dg, float *du, const float *g, const float *u, const float *dh, int n) {
    for (int i = 0; i < n; i++) {
        const float s = 1.0f / (1.0f + expf(-g[i]));
        du[i] = dh[i] * g[i] * s;
        dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    }
}
__attribute__((target("avx2,fma"))) static void swiglu_bwd_avx2(float *dg, float *du, const float *g, const float *u,
                                                                 const float *dh, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i), d = _mm256_loadu_ps(dh + i);
        __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, hearth_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
        _mm256_storeu_ps(du + i, _mm256_mul_ps(_mm256_mul_ps(d, x), s));
        __m256 k = _mm256_fmadd_ps(x, _mm256_sub_ps(one, s), one);
        _mm256_storeu_ps(dg + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(u + i)), s), k));
    }
    swiglu_bwd_scalar(dg + i, du + i, g + i, u + i, dh + i, n - i);
}
__attribute__((target("avx512f"))) static void swiglu_bwd_avx512(float *dg, float *du, const float *g, const float *u,
                                                                 const float *dh, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i), d = _mm512_maskz_loadu_ps(m, dh + i);
        __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, hearth_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        _mm512_mask_storeu_ps(du + i, m, _mm512_mul_ps(_mm512_mul_ps(d, x), s));
        __m512 k = _mm512_fmadd_ps(x, _mm512_sub_ps(one, s), one);
        _mm512_mask_storeu_ps(dg + i, m,
                              _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, u + i)), s), k));
    }
}

static const hearth_vec_ops VEC_SCALAR = {"scalar", scale_scalar, add_scaled_scalar, swiglu_scalar, swiglu_bwd_scalar};
static const hearth_vec_ops VEC_AVX2 = {"avx2", scale_avx2, add_scaled_avx2, swiglu_avx2, swiglu_bwd_avx2};
static const hearth_vec_ops VEC_AVX512 = {"avx512", scale_avx512, add_scaled_avx512, swiglu_avx512, swiglu_bwd_avx512};

const hearth_vec_ops *hearth_vec_get(const char *isa) {
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f"), has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa && !strcmp(isa, "scalar")) return &VEC_SCALAR;
    if (isa && !strcmp(isa, "avx2")) return has2 ? &VEC_AVX2 : NULL;
    if (isa && !strcmp(isa, "avx512")) return has512 ? &VEC_AVX512 : NULL;
    if (isa) return NULL;
    return has512 ? &VEC_AVX512 : has2 ? &VEC_AVX2 : &VEC_SCALAR;
}
