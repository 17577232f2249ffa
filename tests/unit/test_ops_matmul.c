/* test_ops_matmul.c - ops/cpu: block layouts, quantizers, and matmul (every
 * weight type, every ISA this CPU has, 1..3 threads) against the reference. */
#include "testhelp.h"

#include "core/half.h"
#include "core/pool.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/panel.h"
#include "ops/cpu/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- helpers --------------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float frand(void) { return (float)(rnd() & 0xffffff) / 8388608.f - 1.f; } /* [-1, 1) */
static float grand(void) { return (frand() + frand() + frand() + frand()) * 0.8660254f; }

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) abort();
    return p;
}

static const hearth_dtype ALL_WT[] = {HEARTH_DT_F32, HEARTH_DT_F16, HEARTH_DT_BF16, HEARTH_DT_Q4_0,
                                      HEARTH_DT_Q4_1, HEARTH_DT_Q8_0, HEARTH_DT_Q4_K, HEARTH_DT_Q6_K,
                                      HEARTH_DT_Q5_K, HEARTH_DT_Q5_0, HEARTH_DT_Q5_1, HEARTH_DT_Q2_K,
                                      HEARTH_DT_Q3_K, HEARTH_DT_IQ4_NL, HEARTH_DT_IQ4_XS};

/* ---- byte layouts: hand-built blocks dequantize to the documented values ------ */

TEST(dequant_q4_0_layout) {
    hearth_block_q4_0 b;
    b.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    hearth_cpu_dequantize_row(HEARTH_DT_Q4_0, &b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(y[j], 0.5 * (j - 8), 0);            /* low nibbles: elements 0..15 */
        CHECK_NEAR(y[j + 16], 0.5 * (15 - j - 8), 0);  /* high nibbles: 16..31 */
    }
}

TEST(dequant_q4_1_q8_0_q8_1_layout) {
    hearth_block_q4_1 b1;
    b1.d = 0x3400; /* 0.25 */
    b1.m = 0xbc00; /* -1 */
    for (int j = 0; j < 16; j++) b1.qs[j] = (uint8_t)((j * 3) % 16 | (j ^ 5) << 4);
    float y[32];
    hearth_cpu_dequantize_row(HEARTH_DT_Q4_1, &b1, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(y[j], 0.25 * ((j * 3) % 16) - 1, 0);
        CHECK_NEAR(y[j + 16], 0.25 * (j ^ 5) - 1, 0);
    }
    hearth_block_q8_0 b8;
    b8.d = 0x4000; /* 2 */
    for (int j = 0; j < 32; j++) b8.qs[j] = (int8_t)(j * 8 - 128);
    hearth_cpu_dequantize_row(HEARTH_DT_Q8_0, &b8, y, 32);
    for (int j = 0; j < 32; j++) CHECK_NEAR(y[j], 2.0 * (j * 8 - 128), 0);
    unsigned char raw[36] = {0x00, 0x38, 0x00, 0x7c}; /* d = 0.5, s = inf (unused) */
    for (int j = 0; j < 32; j++) raw[4 + j] = (unsigned char)(int8_t)(j - 16);
    hearth_cpu_dequantize_row(HEARTH_DT_Q8_1, raw, y, 32);
    for (int j = 0; j < 32; j++) CHECK_NEAR(y[j], 0.5 * (j - 16), 0);
}

TEST(dequant_q4_K_layout) {
    const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63}, m[8] = {0, 5, 10, 15, 16, 31, 47, 63};
    unsigned char raw[144] = {0};
    raw[0] = 0x00, raw[1] = 0x38; /* d = 0.5 */
    raw[2] = 0x00, raw[3] = 0x34; /* dmin = 0.25 */
    unsigned char *s = raw + 4, *qs = raw + 16;
    for (int j = 0; j < 4; j++) {
        s[j] = (unsigned char)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (unsigned char)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (unsigned char)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    int q[256];
    for (int e = 0; e < 256; e++) q[e] = (e * 7 + e / 32) % 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) qs[32 * c + l] = (unsigned char)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    float y[256];
    hearth_cpu_dequantize_row(HEARTH_DT_Q4_K, raw, y, 256);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        CHECK_MSG(y[e] == 0.5f * sc[j] * q[e] - 0.25f * m[j], "e=%d: %g", e, y[e]);
    }
}

/* q2_K / q3_K from random bytes against ggml's dequantize_row_q2_K / _q3_K, restated here: four 2-bit
 * codes a byte over 128-element halves, q3_K's scales unpacked as ggml does (three words of masks). */
TEST(dequant_q2_K_q3_K_layout) {
    unsigned char r2[84], r3[110];
    for (int i = 0; i < 84; i++) r2[i] = (unsigned char)rnd();
    for (int i = 0; i < 110; i++) r3[i] = (unsigned char)rnd();
    r2[80] = 0x00, r2[81] = 0x38, r2[82] = 0x00, r2[83] = 0x34; /* d = 0.5, dmin = 0.25 */
    r3[108] = 0x00, r3[109] = 0x3C;                             /* d = 1 */
    float y2[256], y3[256], w2[256], w3[256];
    hearth_cpu_dequantize_row(HEARTH_DT_Q2_K, r2, y2, 256);
    hearth_cpu_dequantize_row(HEARTH_DT_Q3_K, r3, y3, 256);
    uint32_t aux[4];
    memcpy(aux, r3 + 96, 12);
    uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
    aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
    aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
    aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
    const int8_t *sc3 = (const int8_t *)aux;
    const unsigned char *q2 = r2 + 16, *q3 = r3 + 32, *hm = r3;
    int is = 0, k = 0, m = 1;
    for (int n = 0; n < 256; n += 128, q2 += 32, q3 += 32)
        for (int j = 0, shift = 0; j < 4; j++, shift += 2, m <<= 1)
            for (int half = 0; half < 2; half++, is++)
                for (int l = 16 * half; l < 16 * half + 16; l++, k++) {
                    w2[k] = 0.5f * (float)(r2[is] & 15) * (float)(q2[l] >> shift & 3) - 0.25f * (float)(r2[is] >> 4);
                    w3[k] = (float)(sc3[is] - 32) * (float)((q3[l] >> shift & 3) - (hm[l] & m ? 0 : 4));
                }
    for (int e = 0; e < 256; e++) {
        CHECK_MSG(y2[e] == w2[e], "q2_K e=%d: %g vs %g", e, y2[e], w2[e]);
        CHECK_MSG(y3[e] == w3[e], "q3_K e=%d: %g vs %g", e, y3[e], w3[e]);
    }
}

/* iq4_nl / iq4_xs from random bytes against ggml's dequantizers restated: its codebook, q4_0's nibble order,
 * iq4_xs's 6-bit scales split over scales_l (nibbles) and scales_h (bit pairs) */
TEST(dequant_iq4_layout) {
    static const int book[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    unsigned char nl[18], xs[136];
    for (int i = 0; i < 18; i++) nl[i] = (unsigned char)rnd();
    for (int i = 0; i < 136; i++) xs[i] = (unsigned char)rnd();
    nl[0] = 0x00, nl[1] = 0x38; /* d = 0.5 */
    xs[0] = 0x00, xs[1] = 0x34; /* d = 0.25 */
    float y[256];
    hearth_cpu_dequantize_row(HEARTH_DT_IQ4_NL, nl, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK_MSG(y[j] == 0.5f * book[nl[2 + j] & 15], "iq4_nl j=%d", j);
        CHECK_MSG(y[j + 16] == 0.5f * book[nl[2 + j] >> 4], "iq4_nl j=%d", j + 16);
    }
    hearth_cpu_dequantize_row(HEARTH_DT_IQ4_XS, xs, y, 256);
    unsigned sh = xs[2] | xs[3] << 8;
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((xs[4 + ib / 2] >> 4 * (ib % 2)) & 15) | ((sh >> 2 * ib) & 3) << 4;
        for (int j = 0; j < 16; j++) {
            const unsigned char q = xs[8 + 16 * ib + j];
            CHECK_MSG(y[32 * ib + j] == 0.25f * (float)(ls - 32) * (float)book[q & 15], "iq4_xs %d %d", ib, j);
            CHECK_MSG(y[32 * ib + j + 16] == 0.25f * (float)(ls - 32) * (float)book[q >> 4], "iq4_xs %d %d", ib, j);
        }
    }
}

/* q5_0 / q5_1 (ggml's block_q5_0 / _q5_1): d (and m), qh[4] with bit e for element e, the nibbles as q4_0's */
TEST(dequant_q5_0_q5_1_layout) {
    unsigned char r0[22] = {0}, r1[24] = {0};
    r0[0] = 0x00, r0[1] = 0x38;                   /* d = 0.5 */
    r1[0] = 0x00, r1[1] = 0x34, r1[2] = 0x00, r1[3] = 0xBC; /* d = 0.25, m = -1 */
    int q[32];
    for (int e = 0; e < 32; e++) q[e] = (e * 13 + 5) % 32;
    for (int e = 0; e < 32; e++) {
        r0[2 + e / 8] |= (unsigned char)((q[e] >> 4) << (e % 8));
        r1[4 + e / 8] |= (unsigned char)((q[e] >> 4) << (e % 8));
    }
    for (int j = 0; j < 16; j++) {
        r0[6 + j] = (unsigned char)((q[j] & 15) | (q[j + 16] & 15) << 4);
        r1[8 + j] = r0[6 + j];
    }
    float y0[32], y1[32];
    hearth_cpu_dequantize_row(HEARTH_DT_Q5_0, r0, y0, 32);
    hearth_cpu_dequantize_row(HEARTH_DT_Q5_1, r1, y1, 32);
    for (int e = 0; e < 32; e++) {
        CHECK_MSG(y0[e] == 0.5f * (q[e] - 16), "q5_0 e=%d: %g", e, y0[e]);
        CHECK_MSG(y1[e] == 0.25f * q[e] - 1.f, "q5_1 e=%d: %g", e, y1[e]);
    }
}

/* q5_K: q4_K's scales and mins at the same bytes, qh[32] at 16, the nibbles at 48 (ggml's block_q5_K) */
TEST(dequant_q5_K_layout) {
    const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63}, m[8] = {0, 5, 10, 15, 16, 31, 47, 63};
    unsigned char raw[176] = {0};
    raw[0] = 0x00, raw[1] = 0x38; /* d = 0.5 */
    raw[2] = 0x00, raw[3] = 0x34; /* dmin = 0.25 */
    unsigned char *s = raw + 4, *qh = raw + 16, *qs = raw + 48;
    for (int j = 0; j < 4; j++) {
        s[j] = (unsigned char)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (unsigned char)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (unsigned char)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    int q[256];
    for (int e = 0; e < 256; e++) q[e] = (e * 11 + e / 32) % 32;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = q[64 * c + l], hi = q[64 * c + 32 + l]; /* sub-blocks 2c and 2c + 1 */
            qs[32 * c + l] = (unsigned char)((lo & 15) | (hi & 15) << 4);
            qh[l] |= (unsigned char)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        }
    float y[256];
    hearth_cpu_dequantize_row(HEARTH_DT_Q5_K, raw, y, 256);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        CHECK_MSG(y[e] == 0.5f * sc[j] * q[e] - 0.25f * m[j], "e=%d: %g", e, y[e]);
    }
}

TEST(dequant_q6_K_layout) {
    unsigned char raw[210] = {0};
    unsigned char *ql = raw, *qh = raw + 128;
    int8_t *scales = (int8_t *)(raw + 192);
    raw[208] = 0x00, raw[209] = 0x38; /* d = 0.5 */
    int q[256];
    for (int e = 0; e < 256; e++) q[e] = (e * 5 + 3) % 64;
    for (int g = 0; g < 16; g++) scales[g] = (int8_t)(g * 9 - 70);
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int *Q = q + 128 * h;
            ql[64 * h + l] = (unsigned char)((Q[l] & 15) | (Q[l + 64] & 15) << 4);
            ql[64 * h + l + 32] = (unsigned char)((Q[l + 32] & 15) | (Q[l + 96] & 15) << 4);
            qh[32 * h + l] = (unsigned char)(Q[l] >> 4 | (Q[l + 32] >> 4) << 2 | (Q[l + 64] >> 4) << 4 |
                                             (Q[l + 96] >> 4) << 6);
        }
    float y[256];
    hearth_cpu_dequantize_row(HEARTH_DT_Q6_K, raw, y, 256);
    for (int e = 0; e < 256; e++)
        CHECK_MSG(y[e] == 0.5f * (float)scales[e / 16] * (float)(q[e] - 32), "e=%d: %g", e, y[e]);
}

TEST(dequant_floats_and_q8_K_layout) {
    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
    float y[256];
    hearth_cpu_dequantize_row(HEARTH_DT_F16, h, y, 4);
    CHECK(y[0] == 1.f && y[1] == -2.f && y[2] == 0x1p-24f && y[3] == 65504.f);
    uint16_t b[2] = {0x3f80, 0xc040};
    hearth_cpu_dequantize_row(HEARTH_DT_BF16, b, y, 2);
    CHECK(y[0] == 1.f && y[1] == -3.f);
    hearth_block_q8_K k;
    k.d = 0.125f;
    for (int j = 0; j < 256; j++) k.qs[j] = (int8_t)(j - 128);
    hearth_cpu_dequantize_row(HEARTH_DT_Q8_K, &k, y, 256);
    for (int j = 0; j < 256; j++) CHECK(y[j] == 0.125f * (float)(j - 128));
}

/* ggml's q4_0 rounding: the signed max maps to -8, codes = trunc(x / d + 8.5). */
TEST(quantize_q4_0_matches_ggml_rounding) {
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16); /* -16 is the max magnitude: d = 2 */
    hearth_block_q4_0 b;
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_Q4_0, x, &b, 32), HEARTH_OK);
    CHECK_EQ(b.d, 0x4000);
    for (int j = 0; j < 16; j++) {
        int lo = (j + 1) / 2;                 /* trunc((j - 16) / 2 + 8.5) */
        int hi = 8 + (j + 1) / 2;             /* trunc(j / 2 + 8.5), clamped to 15 */
        if (hi > 15) hi = 15;
        CHECK_MSG((b.qs[j] & 15) == lo && (b.qs[j] >> 4) == hi, "j=%d: %02x", j, b.qs[j]);
    }
}

/* q8_0: the reference quantizer rounds half away from zero (roundf); the
 * matmul activations round half to even (as llama.cpp's AVX2 path). */
TEST(quantize_q8_0_ref_vs_activation_rounding) {
    float x[32] = {127.f, 2.5f, -2.5f, 3.5f, 0.5f, -0.5f};
    hearth_block_q8_0 b;
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_Q8_0, x, &b, 32), HEARTH_OK);
    CHECK_EQ(b.d, 0x3c00); /* 1.0 */
    CHECK(b.qs[0] == 127 && b.qs[1] == 3 && b.qs[2] == -3 && b.qs[3] == 4 && b.qs[4] == 1 && b.qs[5] == -1);

    mm_act a;
    void *scratch = xalloc(hearth_cpu_act_layout(MM_Q8_0, 1, 32, NULL, NULL));
    hearth_cpu_act_layout(MM_Q8_0, 1, 32, scratch, &a);
    hearth_cpu_mm_scalar.act[ACT_Q8_0](x, &a, 0, 1);
    CHECK(a.qs[0] == 127 && a.qs[1] == 2 && a.qs[2] == -2 && a.qs[3] == 4 && a.qs[4] == 0 && a.qs[5] == 0);
    CHECK(a.d[0] == 1.f && a.isum[0] == 127 + 4);
    free(scratch);
}

TEST(quantize_rejects_bad_arguments) {
    float x[64] = {0};
    unsigned char out[512];
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_Q4_0, x, out, 33), HEARTH_EINVAL);
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_Q4_K, x, out, 64), HEARTH_EINVAL);
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_Q8_0, x, out, -32), HEARTH_EINVAL);
    CHECK_EQ(hearth_cpu_quantize_row((hearth_dtype)10, x, out, 256), HEARTH_EINVAL); /* q2_K: unknown here */
    CHECK_EQ(hearth_cpu_quantize_row((hearth_dtype)999, x, out, 32), HEARTH_EINVAL);
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_F16, x, out, 0), HEARTH_OK);
    CHECK(!hearth_cpu_matmul_supports(HEARTH_DT_Q8_1) && !hearth_cpu_matmul_supports(HEARTH_DT_Q8_K));
    CHECK(hearth_cpu_matmul_supports(HEARTH_DT_Q6_K) && hearth_cpu_matmul_supports(HEARTH_DT_BF16));
}

/* ---- round trips ---------------------------------------------------------------- */

/* Quantize n gaussian values (with some blocks scaled up/down and a zero
 * block), dequantize, and check each element against a bound derived from
 * the format (where the format has one). Returns the RMS error relative to
 * that of an ideal uniform quantizer with the format's step on the same
 * blocks (step / sqrt(12) per element); 0 for float types. */
static double roundtrip(hearth_dtype t, int n, int *ok) {
    float *x = xalloc((size_t)n * 4), *y = xalloc((size_t)n * 4);
    void *q = xalloc(hearth_dtype_row_bytes(t, n));
    for (int i = 0; i < n; i++) x[i] = grand() * ((i / 32) % 5 == 3 ? 30.f : (i / 32) % 7 == 2 ? 0.01f : 1.f);
    for (int i = 64; i < 96 && i < n; i++) x[i] = 0.f;
    *ok = hearth_cpu_quantize_row(t, x, q, n) == HEARTH_OK;
    hearth_cpu_dequantize_row(t, q, y, n);
    double se = 0, ideal = 0;
    int blk = hearth_dtype_get(t)->block == 1 ? 1 : t == HEARTH_DT_Q8_K ? 256 : t == HEARTH_DT_Q6_K ? 16 : 32;
    for (int b0 = 0; b0 < n && *ok; b0 += blk) {
        float amax = 0, smax = 0, mn = x[b0], mx = x[b0];
        for (int i = b0; i < b0 + blk; i++) {
            if (fabsf(x[i]) > amax) amax = fabsf(x[i]), smax = x[i];
            mn = fminf(mn, x[i]);
            mx = fmaxf(mx, x[i]);
        }
        double step = 0;
        switch (t) {
        case HEARTH_DT_Q4_0: step = amax / 8.0; break;
        case HEARTH_DT_Q4_1: step = (mx - mn) / 15.0; break;
        case HEARTH_DT_Q5_0: step = amax / 16.0; break;
        case HEARTH_DT_Q5_1: step = (mx - mn) / 31.0; break;
        case HEARTH_DT_Q4_K: step = (mx - fminf(mn, 0)) / 15.0; break;
        case HEARTH_DT_Q5_K: step = (mx - fminf(mn, 0)) / 31.0; break;
        case HEARTH_DT_Q6_K: step = 2.0 * amax / 63.0; break;
        case HEARTH_DT_Q8_0: case HEARTH_DT_Q8_1: case HEARTH_DT_Q8_K: step = amax / 127.0; break;
        default: break;
        }
        ideal += blk * step * step / 12;
        for (int i = b0; i < b0 + blk; i++) {
            double err = fabs((double)x[i] - y[i]), bound;
            /* half a step (q4_0: a whole step where the code clamps at +7), plus the
             * f16 rounding of the scale times the largest code, plus f32 rounding */
            double v4 = smax != 0 ? x[i] / (smax / -8.0) : 0;
            switch (t) {
            case HEARTH_DT_F32: bound = 0; break;
            case HEARTH_DT_F16: bound = fmax(fabsf(x[i]) * 0x1p-11, 0x1p-25); break; /* subnormals: abs */
            case HEARTH_DT_BF16: bound = fabsf(x[i]) * 0x1p-8; break;
            case HEARTH_DT_Q4_0: bound = step * ((v4 > 7.49 ? 1.0 : 0.5) + 8 * 0x1p-11); break;
            case HEARTH_DT_Q4_1: bound = step * (0.5 + 15 * 0x1p-11) + fabsf(mn) * 0x1p-11; break;
            case HEARTH_DT_Q5_0:
                bound = step * ((smax != 0 && x[i] / (smax / -16.0) > 15.49 ? 1.0 : 0.5) + 16 * 0x1p-11);
                break;
            case HEARTH_DT_Q5_1: bound = step * (0.5 + 31 * 0x1p-11) + fabsf(mn) * 0x1p-11; break;
            case HEARTH_DT_Q8_0: case HEARTH_DT_Q8_1: bound = step * (0.5 + 127 * 0x1p-11); break;
            case HEARTH_DT_Q8_K: bound = step * 0.5; break;
            /* k-quants: scales are fitted, so no per-element bound; the RMS is checked */
            default: bound = INFINITY; break;
            }
            if (blk > 1) bound += (amax + fabsf(mn)) * 0x1p-20;
            if (!(err <= bound + 1e-30)) {
                printf("  %s element %d: x=%g y=%g bound %g\n", hearth_dtype_get(t)->name, i, x[i], y[i], bound);
                *ok = 0;
                break;
            }
            se += err * err;
        }
    }
    free(x);
    free(y);
    free(q);
    return ideal > 0 ? sqrt(se / ideal) : 0;
}

TEST(quant_roundtrip_error_bounds) {
    /* RMS error at most this many times an ideal uniform quantizer's (1 = as
     * good; the fitted k-quant scales are themselves quantized, q4_0 clamps). */
    struct { hearth_dtype t; double rel; } cases[] = {
        {HEARTH_DT_F32, 0}, {HEARTH_DT_F16, 0}, {HEARTH_DT_BF16, 0},
        {HEARTH_DT_Q8_0, 1.1}, {HEARTH_DT_Q8_1, 1.1}, {HEARTH_DT_Q8_K, 1.1}, {HEARTH_DT_Q4_0, 1.2},
        {HEARTH_DT_Q4_1, 1.1}, {HEARTH_DT_Q5_0, 1.2}, {HEARTH_DT_Q5_1, 1.1}, {HEARTH_DT_Q4_K, 1.3},
        {HEARTH_DT_Q5_K, 1.3}, {HEARTH_DT_Q6_K, 1.3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ok;
        double rel = roundtrip(cases[i].t, 4096, &ok);
        CHECK_MSG(ok, "%s: quantize failed or an element is out of bounds", hearth_dtype_get(cases[i].t)->name);
        printf("  %s: rms error %.3f x ideal\n", hearth_dtype_get(cases[i].t)->name, rel);
        CHECK_MSG(rel <= cases[i].rel, "%s: rms error %g x ideal > %g", hearth_dtype_get(cases[i].t)->name, rel,
                  cases[i].rel);
    }
}

/* q4_K and q6_K: a constant block and an all-zero block survive exactly
 * enough; quantizing the dequantized values again is (nearly) stable. */
TEST(quant_k_quants_fixed_points) {
    float x[256], y[256], z[256];
    unsigned char q[256], q2[256];
    for (int i = 0; i < 256; i++) x[i] = 0;
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_Q6_K, x, q, 256), HEARTH_OK);
    hearth_cpu_dequantize_row(HEARTH_DT_Q6_K, q, y, 256);
    for (int i = 0; i < 256; i++) CHECK(y[i] == 0);
    for (hearth_dtype t = HEARTH_DT_Q4_K; t <= HEARTH_DT_Q6_K; t++) {
        for (int i = 0; i < 256; i++) x[i] = grand();
        CHECK_EQ(hearth_cpu_quantize_row(t, x, q, 256), HEARTH_OK);
        hearth_cpu_dequantize_row(t, q, y, 256);
        CHECK_EQ(hearth_cpu_quantize_row(t, y, q2, 256), HEARTH_OK);
        hearth_cpu_dequantize_row(t, q2, z, 256);
        double se = 0, sy = 0;
        for (int i = 0; i < 256; i++) se += (double)(y[i] - z[i]) * (y[i] - z[i]), sy += (double)y[i] * y[i];
        CHECK_MSG(sqrt(se / sy) < 0.02, "%s: requantizing moves values by rms %g", hearth_dtype_get(t)->name,
                  sqrt(se / sy));
    }
}

/* ---- matmul vs the reference ------------------------------------------------------ */

/* Sane random f16 scale: magnitude 2^-10 .. 2^-4, random sign if allowed. */
static uint16_t rand_scale(int allow_negative) {
    float v = ldexpf(1.f + (float)(rnd() % 1024) / 1024.f, -10 + (int)(rnd() % 7));
    if (allow_negative && (rnd() & 1)) v = -v;
    return hearth_f32_to_f16(v);
}

/* N rows of weights: most quantized from gaussian data, every third row raw
 * random bytes (extreme codes: q8 = -128, any q4_K scale byte) with sane scales. */
static void *make_weights(hearth_dtype t, int K, int N) {
    size_t rb = hearth_dtype_row_bytes(t, K);
    unsigned char *w = xalloc(rb * (size_t)N);
    float *row = xalloc((size_t)K * 4);
    for (int n = 0; n < N; n++) {
        unsigned char *r = w + rb * (size_t)n;
        float sc = 0.05f * (1 + n % 4);
        for (int k = 0; k < K; k++) row[k] = grand() * sc;
        int raw = t == HEARTH_DT_Q2_K || t == HEARTH_DT_Q3_K || t == HEARTH_DT_IQ4_NL ||
                  t == HEARTH_DT_IQ4_XS; /* read, never written: every row raw */
        if (!raw && hearth_cpu_quantize_row(t, row, r, K) != HEARTH_OK) abort();
        if (!raw && (n % 3 != 1 || hearth_dtype_get(t)->block == 1)) continue;
        for (size_t i = 0; i < rb; i++) r[i] = (unsigned char)rnd();
        int bb = hearth_dtype_get(t)->block_bytes;
        for (size_t o = 0; o < rb; o += (size_t)bb) {
            uint16_t *h = (uint16_t *)(void *)(r + o);
            switch (t) {
            case HEARTH_DT_Q4_0: case HEARTH_DT_Q5_0: case HEARTH_DT_Q8_0: case HEARTH_DT_IQ4_NL: case HEARTH_DT_IQ4_XS:
                h[0] = rand_scale(1);
                break;
            case HEARTH_DT_Q4_1: case HEARTH_DT_Q5_1: h[0] = rand_scale(0), h[1] = rand_scale(1); break;
            case HEARTH_DT_Q4_K: case HEARTH_DT_Q5_K: h[0] = rand_scale(0), h[1] = rand_scale(0); break;
            case HEARTH_DT_Q6_K: h[104] = rand_scale(0); break; /* d at byte 208 */
            case HEARTH_DT_Q2_K: h[40] = rand_scale(0), h[41] = rand_scale(0); break; /* d, dmin at 80 */
            case HEARTH_DT_Q3_K: h[54] = rand_scale(0); break;                      /* d at byte 108 */
            default: break;
            }
        }
    }
    free(row);
    return w;
}

/* T x K activations: gaussian, some outlier blocks, a zero block, and a
 * block whose extremes tie in magnitude with opposite signs. */
static float *make_x(int T, int K) {
    float *x = xalloc((size_t)T * K * 4);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            float v = grand();
            if ((k / 32 + t) % 5 == 2) v *= 8.f;
            if ((k / 32 + t) % 11 == 7) v = 0.f;
            x[(size_t)t * K + k] = v;
        }
    if (K >= 64) {
        x[3] = -9.f, x[40] = 9.f; /* same |max| in one q8_K block, first is negative */
    }
    return x;
}

/* |fast - ref| bound for output (t, n): the activation rounding error times
 * |w|, plus f32 accumulation (both sides, worst case K * 2^-24 each). */
static double err_bound(hearth_dtype t, const void *wrow, const float *wrow_deq, const float *x, int K) {
    double bound = 0, mag = 0;
    int blk = hearth_dtype_get(t)->block == 256 ? 256 : 32;
    for (int k0 = 0; k0 < K; k0 += blk) {
        int end = k0 + blk < K ? k0 + blk : K;
        double amax = 0, wsum = 0;
        for (int k = k0; k < end; k++) amax = fmax(amax, fabsf(x[k])), wsum += fabsf(wrow_deq[k]);
        double d = amax / 127, ex = 0;
        switch (t) {
        case HEARTH_DT_Q4_0: case HEARTH_DT_Q8_0: case HEARTH_DT_Q4_1: case HEARTH_DT_Q5_0: case HEARTH_DT_Q5_1:
        case HEARTH_DT_IQ4_NL:
            ex = 0.5 * d + 127 * (d * 0x1p-11 + 0x1p-25); /* code rounding + f16 scale */
            break;
        case HEARTH_DT_Q2_K: case HEARTH_DT_Q3_K: case HEARTH_DT_Q4_K: case HEARTH_DT_Q5_K: case HEARTH_DT_Q6_K:
        case HEARTH_DT_IQ4_XS:
            ex = 0.5 * d * (1 + 0x1p-20);
            break;
        default: ex = 0; break;
        }
        bound += ex * wsum;
        if (t == HEARTH_DT_Q4_1) { /* s = f16(d * isum), |s| <= 32 * amax: its rounding times |m| */
            const hearth_block_q4_1 *b = (const hearth_block_q4_1 *)wrow + k0 / 32;
            bound += fabsf(hearth_f16_to_f32(b->m)) * 33 * amax * 0x1p-11;
        }
        if (t == HEARTH_DT_Q5_1) {
            const hearth_block_q5_1 *b = (const hearth_block_q5_1 *)wrow + k0 / 32;
            bound += fabsf(hearth_f16_to_f32(b->m)) * 33 * amax * 0x1p-11;
        }
        for (int k = k0; k < end; k++) {
            double xe = t == HEARTH_DT_F16 ? fmax(fabsf(x[k]) * 0x1p-11, 0x1p-25) : t == HEARTH_DT_BF16 ? fabsf(x[k]) * 0x1p-8 : 0;
            bound += xe * fabsf(wrow_deq[k]);
            mag += fabsf(wrow_deq[k]) * (fabsf(x[k]) + ex + xe);
        }
    }
    return bound + 2.0 * K * 0x1p-24 * mag + 1e-30;
}

static void poison(void *p, size_t n, unsigned char v) { memset(p, v, n); }

typedef struct { int T, K, N; } shape;
typedef struct { int isa; hearth_pool *pool; int threads; } run_cfg;

static int check_panel(hearth_dtype t, shape s, const void *w, const float *x, const float *base,
                       const run_cfg *runs, int n_runs, void *scratch, size_t sb) {
    int T = s.T, K = s.K, N = s.N, ok = 1;
    const int bk = hearth_dtype_get(t)->block;
    size_t rb = hearth_dtype_row_bytes(t, K), bb = hearth_dtype_row_bytes(t, bk), ny = (size_t)T * N;
    uint8_t *pw = xalloc(rb * (size_t)N + 64), blk[256];
    float *y = xalloc(ny * 4);
    const char *tn = hearth_dtype_get(t)->name;
    hearth_cpu_panel_pack(pw, w, t, K, N);
    for (int n = 0; n < N && ok; n++)
        for (int b = 0; b < K / bk && ok; b++) {
            hearth_cpu_panel_block(pw, t, K, N, n, b, blk);
            if (memcmp(blk, (const uint8_t *)w + (size_t)n * rb + (size_t)b * bb, bb) != 0) {
                printf("  %s K=%d N=%d: panel block %d of row %d differs from the stored one\n", tn, K, N, b, n);
                ok = 0;
            }
        }
    for (int r = 0; r < n_runs && ok; r++) {
        hearth_cpu_isa_force(runs[r].isa);
        poison(scratch, sb + 64, (unsigned char)(0x5A + r));
        poison(y, ny * 4, 0xFF);
        hearth_cpu_matmul(runs[r].pool, y, x, T, pw, t, HEARTH_LAYOUT_PANEL8, K, N, scratch);
        for (size_t i = 0; i < ny; i++)
            if (memcmp(&y[i], &base[i], 4) != 0) {
                printf("  %s T=%d K=%d N=%d: panel-laid, %s/%d threads differs from stored at t=%zu n=%zu: %.9g vs %.9g\n",
                       tn, T, K, N, hearth_cpu_isa_name(runs[r].isa), runs[r].threads, i / N, i % N, y[i], base[i]);
                ok = 0;
                break;
            }
    }
    hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
    free(pw), free(y);
    return ok;
}

/* Run one shape for one type: reference, then every ISA (pool NULL), then the
 * best ISA and scalar with 2 and 3 threads; all fast results bit-identical,
 * all within the bound of the reference; rows independent of T. */
static int check_shape(hearth_dtype t, shape s, hearth_pool *p2, hearth_pool *p3) {
    int T = s.T, K = s.K, N = s.N;
    size_t ny = (size_t)T * N;
    void *w = make_weights(t, K, N);
    float *x = make_x(T, K);
    float *ref = xalloc(ny * 4), *base = xalloc(ny * 4), *y = xalloc(ny * 4);
    size_t sb = hearth_cpu_matmul_scratch_bytes(t, T, K);
    void *scratch = xalloc(sb + 64);
    float *deq = xalloc((size_t)K * 4);
    const char *tn = hearth_dtype_get(t)->name;
    int ok = 1;

    hearth_cpu_matmul_ref(ref, x, T, w, t, K, N);

    int isas[3], n_isa = 0;
    for (int i = HEARTH_CPU_ISA_SCALAR; i <= HEARTH_CPU_ISA_AVX512; i++)
        if (hearth_cpu_isa_available(i)) isas[n_isa++] = i;
    run_cfg runs[8];
    int n_runs = 0;
    for (int i = 0; i < n_isa; i++) runs[n_runs++] = (run_cfg){isas[i], NULL, 1};
    runs[n_runs++] = (run_cfg){isas[n_isa - 1], p2, 2};
    runs[n_runs++] = (run_cfg){isas[n_isa - 1], p3, 3};
    if (n_isa > 1) runs[n_runs++] = (run_cfg){HEARTH_CPU_ISA_SCALAR, p3, 3};

    for (int r = 0; r < n_runs && ok; r++) {
        hearth_cpu_isa_force(runs[r].isa);
        float *out = r == 0 ? base : y;
        poison(scratch, sb + 64, (unsigned char)(0xA5 + r));
        poison(out, ny * 4, 0xFF); /* NaN: an unwritten output cannot pass */
        hearth_cpu_matmul(runs[r].pool, out, x, T, w, t, HEARTH_LAYOUT_STORED, K, N, scratch);
        if (r == 0) continue;
        for (size_t i = 0; i < ny; i++)
            if (memcmp(&out[i], &base[i], 4) != 0) {
                printf("  %s T=%d K=%d N=%d: %s/%d threads differs from scalar at t=%zu n=%zu: %.9g vs %.9g\n", tn,
                       T, K, N, hearth_cpu_isa_name(runs[r].isa), runs[r].threads, i / N, i % N, out[i], base[i]);
                ok = 0;
                break;
            }
    }
    /* q4_0 / q4_1 / q8_0 / q4_K panel-laid (panel.h): every block reads back
     * as stored, and every ISA and thread count gives the stored layout's
     * result */
    if (ok && (t == HEARTH_DT_Q4_0 || t == HEARTH_DT_Q4_1 || t == HEARTH_DT_Q8_0 || t == HEARTH_DT_Q4_K))
        ok = check_panel(t, s, w, x, base, runs, n_runs, scratch, sb);
    /* scalar result vs the reference */
    for (int n = 0; n < N && ok; n++) {
        hearth_cpu_dequantize_row(t, (const uint8_t *)w + hearth_dtype_row_bytes(t, K) * (size_t)n, deq, K);
        for (int tt = 0; tt < T; tt++) {
            double bound = err_bound(t, (const uint8_t *)w + hearth_dtype_row_bytes(t, K) * (size_t)n, deq,
                                     x + (size_t)tt * K, K);
            double got = base[(size_t)tt * N + n], want = ref[(size_t)tt * N + n];
            if (!(fabs(got - want) <= bound)) {
                printf("  %s T=%d K=%d N=%d: t=%d n=%d fast %.9g ref %.9g (bound %g)\n", tn, T, K, N, tt, n, got, want,
                       bound);
                ok = 0;
                break;
            }
        }
    }
    /* one token alone gives the same row as inside the batch */
    if (ok && T > 1) {
        int tt = T / 2;
        hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
        hearth_cpu_matmul(p2, y, x + (size_t)tt * K, 1, w, t, HEARTH_LAYOUT_STORED, K, N, scratch);
        if (memcmp(y, base + (size_t)tt * N, (size_t)N * 4) != 0) {
            printf("  %s T=%d K=%d N=%d: token %d alone differs from the batch\n", tn, T, K, N, tt);
            ok = 0;
        }
    }
    hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
    free(w), free(x), free(ref), free(base), free(y), free(scratch), free(deq);
    return ok;
}

static void check_type(hearth_dtype t) {
    hearth_pool *p2, *p3;
    hearth_err err = {0};
    if (hearth_pool_new(&p2, 2, &err) != HEARTH_OK || hearth_pool_new(&p3, 3, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "pool: %s", err.msg);
        return;
    }
    int blk = hearth_dtype_get(t)->block;
    static const int Ts[] = {1, 3, 7, 17, 64}; /* 7: the 4+2+1 token tiles */
    static const int Ks[] = {13, 32, 37, 256, 576, 1536};
    int failed = 0;
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0] && !failed; ti++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0] && !failed; ki++) {
            int K = Ks[ki], T = Ts[ti];
            if (K % blk) continue;
            /* odd N, fewer rows for the big shapes to keep the run short */
            int N = T * K >= 64 * 576 ? 21 : T * K >= 8192 ? 37 : 67;
            if (!check_shape(t, (shape){T, K, N}, p2, p3)) failed = 1;
        }
    hearth_pool_free(p2);
    hearth_pool_free(p3);
    CHECK_MSG(!failed, "%s: see above", hearth_dtype_get(t)->name);
}

/* Panel-laid weights at row counts that fill 1..6 groups of 8 (odd and even
 * counts of groups, so one- and two-tile passes) with and without a stored
 * tail, at decode and prefill token counts. */
TEST(matmul_panel_group_counts) {
    static const hearth_dtype ts[] = {HEARTH_DT_Q4_0, HEARTH_DT_Q4_1, HEARTH_DT_Q8_0, HEARTH_DT_Q4_K};
    static const int Ns[] = {8, 16, 24, 41, 48, 7};
    static const int Ts[] = {1, 2, 4, 5, 9};
    hearth_pool *p2, *p3;
    hearth_err err = {0};
    CHECK(hearth_pool_new(&p2, 2, &err) == HEARTH_OK && hearth_pool_new(&p3, 3, &err) == HEARTH_OK);
    int failed = 0;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
                if (!check_shape(ts[i], (shape){Ts[ti], hearth_dtype_get(ts[i])->block == 256 ? 512 : 576, Ns[ni]},
                                 p2, p3))
                    failed = 1;
    hearth_pool_free(p2);
    hearth_pool_free(p3);
    CHECK_MSG(!failed, "see above");
}

TEST(matmul_f32) { check_type(HEARTH_DT_F32); }
TEST(matmul_f16) { check_type(HEARTH_DT_F16); }
TEST(matmul_bf16) { check_type(HEARTH_DT_BF16); }
TEST(matmul_q4_0) { check_type(HEARTH_DT_Q4_0); }
TEST(matmul_q4_1) { check_type(HEARTH_DT_Q4_1); }
TEST(matmul_q8_0) { check_type(HEARTH_DT_Q8_0); }
TEST(matmul_q4_K) { check_type(HEARTH_DT_Q4_K); }
TEST(matmul_q5_K) { check_type(HEARTH_DT_Q5_K); }
TEST(matmul_q5_0) { check_type(HEARTH_DT_Q5_0); }
TEST(matmul_q2_K) { check_type(HEARTH_DT_Q2_K); }
TEST(matmul_iq4_nl) { check_type(HEARTH_DT_IQ4_NL); }
TEST(matmul_iq4_xs) { check_type(HEARTH_DT_IQ4_XS); }
TEST(matmul_q3_K) { check_type(HEARTH_DT_Q3_K); }
TEST(matmul_q5_1) { check_type(HEARTH_DT_Q5_1); }
TEST(matmul_q6_K) { check_type(HEARTH_DT_Q6_K); }

/* Activation preparation of every ISA gives the same bytes as the scalar one. */
TEST(matmul_activations_identical_across_isas) {
    const int T = 5, K = 1536;
    float *x = make_x(T, K);
    for (int i = 0; i < 7; i++) x[100 + i] = (float)i + 0.5f; /* ties after scaling are likely nearby */
    for (size_t wi = 0; wi < sizeof ALL_WT / sizeof ALL_WT[0]; wi++) {
        int idx = hearth_cpu_mm_index(ALL_WT[wi]);
        size_t sb = hearth_cpu_act_layout(idx, T, K, NULL, NULL);
        if (!sb) continue;
        unsigned char *s0 = xalloc(sb), *s1 = xalloc(sb);
        mm_act a0, a1;
        poison(s0, sb, 0), poison(s1, sb, 0);
        hearth_cpu_act_layout(idx, T, K, s0, &a0);
        hearth_cpu_act_layout(idx, T, K, s1, &a1);
        hearth_cpu_mm_scalar.act[a0.kind](x, &a0, 0, T);
        const mm_isa *tabs[] = {&hearth_cpu_mm_avx2, &hearth_cpu_mm_avx512};
        for (int i = 0; i < 2; i++) {
            if (!hearth_cpu_isa_available(i + 1) || !tabs[i]->act[a1.kind]) continue;
            poison(s1, sb, 0);
            tabs[i]->act[a1.kind](x, &a1, 0, T);
            CHECK_MSG(memcmp(s0, s1, sb) == 0, "%s activations (%s) differ from scalar",
                      hearth_dtype_get(ALL_WT[wi])->name, tabs[i]->name);
        }
        free(s0), free(s1);
    }
    free(x);
}

TEST(matmul_empty_shapes_touch_nothing) {
    float y[4] = {1, 2, 3, 4}, x[32] = {0};
    unsigned char w[34] = {0};
    hearth_cpu_matmul(NULL, y, x, 0, w, HEARTH_DT_Q8_0, HEARTH_LAYOUT_STORED, 32, 1, NULL);
    hearth_cpu_matmul(NULL, y, x, 1, w, HEARTH_DT_Q8_0, HEARTH_LAYOUT_STORED, 32, 0, NULL);
    CHECK(y[0] == 1 && y[3] == 4);
    CHECK_EQ(hearth_cpu_matmul_scratch_bytes(HEARTH_DT_F32, 64, 4096), 0);
    CHECK(hearth_cpu_matmul_scratch_bytes(HEARTH_DT_Q4_K, 64, 4096) >= 64 * 4096);
    CHECK_EQ(hearth_cpu_matmul_scratch_bytes(HEARTH_DT_Q8_K, 1, 256), 0); /* not a weight type */
}

/* hearth_cpu_matmul_n: the bits of one hearth_cpu_matmul per weight, for
 * weights that share the activation kind (one copy of x, one dispatch) and
 * for mixes that do not, stored and panel-laid, every ISA, 1 and 3 threads. */
TEST(matmul_n_equals_one_call_each) {
    static const hearth_dtype sets[][3] = {
        {HEARTH_DT_Q4_0, HEARTH_DT_Q4_0, HEARTH_DT_Q8_0}, {HEARTH_DT_Q4_K, HEARTH_DT_Q4_K, HEARTH_DT_Q6_K},
        {HEARTH_DT_Q4_1, HEARTH_DT_Q4_1, HEARTH_DT_Q4_1}, {HEARTH_DT_F32, HEARTH_DT_BF16, HEARTH_DT_F16},
        {HEARTH_DT_Q4_0, HEARTH_DT_Q4_1, HEARTH_DT_Q4_K},
    };
    static const int Ns[3] = {200, 48, 56}, Ts[3] = {1, 3, 17};
    const int K = 512, isas[] = {HEARTH_CPU_ISA_SCALAR, HEARTH_CPU_ISA_AVX2, HEARTH_CPU_ISA_AVX512};
    hearth_pool *pool3;
    CHECK_EQ(hearth_pool_new(&pool3, 3, NULL), HEARTH_OK);
    size_t sb = 0;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++)
        for (int i = 0; i < 3; i++) {
            size_t b = hearth_cpu_matmul_scratch_bytes(sets[si][i], 17, K);
            if (b > sb) sb = b;
        }
    void *scratch = xalloc(sb + 64);
    float *x = xalloc(sizeof(float) * 17 * K);
    for (int i = 0; i < 17 * K; i++) x[i] = grand();
    int ok = 1;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0] && ok; si++) {
        void *w[3], *pw[3];
        float *y[3], *want[3];
        hearth_cpu_mm mm[3];
        for (int i = 0; i < 3; i++) {
            w[i] = make_weights(sets[si][i], K, Ns[i]);
            size_t bytes = hearth_dtype_row_bytes(sets[si][i], K) * (size_t)Ns[i];
            pw[i] = NULL;
            if (hearth_cpu_panel_wanted(sets[si][i], Ns[i])) {
                pw[i] = xalloc(bytes + 64);
                hearth_cpu_panel_pack(pw[i], w[i], sets[si][i], K, Ns[i]);
            }
            y[i] = xalloc(sizeof(float) * 17 * (size_t)Ns[i]);
            want[i] = xalloc(sizeof(float) * 17 * (size_t)Ns[i]);
        }
        for (int ii = 0; ii < 3 && ok; ii++) {
            if (!hearth_cpu_isa_force(isas[ii])) continue;
            for (int ti = 0; ti < 3 && ok; ti++)
                for (int pi = 0; pi < 2 && ok; pi++) {
                    hearth_pool *pool = pi ? pool3 : NULL;
                    for (int i = 0; i < 3; i++) {
                        int panel = pw[i] != NULL && ii > 0;
                        mm[i] = (hearth_cpu_mm){y[i], panel ? pw[i] : w[i], sets[si][i],
                                                panel ? HEARTH_LAYOUT_PANEL8 : HEARTH_LAYOUT_STORED, Ns[i]};
                        hearth_cpu_matmul(pool, want[i], x, Ts[ti], mm[i].w, mm[i].wt, mm[i].layout, K, Ns[i], scratch);
                        poison(y[i], sizeof(float) * 17 * (size_t)Ns[i], 0xFF);
                    }
                    hearth_cpu_matmul_n(pool, mm, 3, x, Ts[ti], K, scratch);
                    for (int i = 0; i < 3 && ok; i++)
                        if (memcmp(y[i], want[i], sizeof(float) * (size_t)Ts[ti] * Ns[i]) != 0) {
                            printf("  %s set %zu weight %d (%s), T=%d, %s: matmul_n differs from one call\n",
                                   hearth_cpu_isa_name(isas[ii]), si, i, hearth_dtype_get(sets[si][i])->name, Ts[ti],
                                   pi ? "3 threads" : "no pool");
                            ok = 0;
                        }
                }
        }
        for (int i = 0; i < 3; i++) free(w[i]), free(pw[i]), free(y[i]), free(want[i]);
    }
    hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
    hearth_pool_free(pool3);
    free(scratch), free(x);
    CHECK(ok);
}

/* HEARTH_CPU_ISA caps the kernels chosen by default, never raises them, and
 * an unknown value leaves the CPU's best. */
TEST(cpu_isa_capped_by_env) {
    const char *old = getenv("HEARTH_CPU_ISA");
    char *saved = old ? strdup(old) : NULL;
    unsetenv("HEARTH_CPU_ISA");
    CHECK(hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO));
    const int best = hearth_cpu_isa_current();
    setenv("HEARTH_CPU_ISA", "scalar", 1);
    CHECK(hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO));
    CHECK(hearth_cpu_isa_current() == HEARTH_CPU_ISA_SCALAR);
    setenv("HEARTH_CPU_ISA", "avx2", 1);
    CHECK(hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO));
    CHECK(hearth_cpu_isa_current() == (best < HEARTH_CPU_ISA_AVX2 ? best : HEARTH_CPU_ISA_AVX2));
    setenv("HEARTH_CPU_ISA", "avx512", 1);
    CHECK(hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO));
    CHECK(hearth_cpu_isa_current() == best);
    setenv("HEARTH_CPU_ISA", "sse9", 1);
    CHECK(hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO));
    CHECK(hearth_cpu_isa_current() == best);
    if (saved) setenv("HEARTH_CPU_ISA", saved, 1);
    else unsetenv("HEARTH_CPU_ISA");
    free(saved);
    hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
}

/* hearth_cpu_gemm_nn against a double-precision product, on every ISA this
 * CPU runs, alone and on a pool, for shapes with ragged tiles (tokens not a
 * multiple of 8, columns of 48 / 24, rows past a block of 128) and with
 * accumulation; y poisoned first where it is not accumulated into. */
TEST(gemm_nn_matches_a_double_product) {
    static const int shapes[][3] = {{1, 1, 1}, {7, 50, 13}, {9, 129, 49}, {17, 300, 97}, {8, 8, 1536}, {33, 64, 24}};
    hearth_pool *pool;
    CHECK_EQ(hearth_pool_new(&pool, 2, NULL), HEARTH_OK);
    const int before = hearth_cpu_isa_current();
    uint64_t seed = 12345;
    for (int isa = HEARTH_CPU_ISA_SCALAR; isa <= HEARTH_CPU_ISA_AVX512; isa++) {
        if (!hearth_cpu_isa_force(isa)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
            float *x = malloc(sizeof(float) * T * K), *b = malloc(sizeof(float) * K * N), *y = malloc(sizeof(float) * T * N);
            double *want = malloc(sizeof(double) * T * N);
            for (int i = 0; i < T * K; i++) x[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5f;
            for (int i = 0; i < K * N; i++) b[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5f;
            for (int t = 0; t < T; t++)
                for (int n = 0; n < N; n++) {
                    double a = 0;
                    for (int k = 0; k < K; k++) a += (double)x[t * K + k] * b[k * N + n];
                    want[t * N + n] = a;
                }
            for (int run = 0; run < 4; run++) { /* alone / pool, then each accumulating onto 1 */
                const int acc = run >= 2;
                for (int i = 0; i < T * N; i++) y[i] = acc ? 1.0f : NAN;
                hearth_cpu_gemm_nn(run % 2 ? pool : NULL, y, x, T, b, K, N, acc);
                double worst = 0;
                for (int i = 0; i < T * N; i++) {
                    double e = fabs(y[i] - (want[i] + acc));
                    worst = e > worst || e != e ? e : worst;
                }
                CHECK_MSG(worst <= 1e-5 * K, "%s T %d K %d N %d run %d: max error %g", hearth_cpu_isa_name(isa), T, K,
                          N, run, worst);
            }
            free(x), free(b), free(y), free(want);
        }
    }
    hearth_cpu_isa_force(before);
    hearth_pool_free(pool);
}
