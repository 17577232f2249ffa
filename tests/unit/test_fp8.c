/* test_fp8.c - the FP8 E4M3 KV element type: conversions (core/fp8.h)
 * against an independent computation (decoding from the fields with ldexp;
 * encoding as an exhaustive search for the nearest finite code), the dtype
 * table entry, and CPU kv_write / attention over an e4m3 cache. */
#include "testhelp.h"

#include "core/dtype.h"
#include "core/fp8.h"
#include "ops/cpu/ops_cpu.h"
#include "ops/cpu/quant.h"

#include <float.h>
#include <stdint.h>

/* The value of a code from its fields (OCP e4m3fn): NaN for S.1111.111. */
static double ref_decode(int c) {
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if ((c & 0x7f) == 0x7f) return NAN;
    double v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
    return s ? -v : v;
}

/* Nearest finite code by search over all of them (ties to the even code,
 * i.e. the one whose mantissa LSB is 0); beyond 448 the nearest finite code
 * is 448 itself (saturation); +-inf saturates; NaN is 0x7f. */
static uint8_t ref_encode(float x) {
    if (isnan(x)) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isinf(x)) return sign | 0x7e;
    double a = fabs((double)x), best_d = INFINITY;
    int best = 0;
    for (int c = 0; c <= 0x7e; c++) {
        double d = fabs(a - ref_decode(c));
        if (d < best_d || (d == best_d && !(c & 1))) best_d = d, best = c;
    }
    return (uint8_t)(sign | best);
}

static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

TEST(e4m3_decode_every_code) {
    int nan = 0;
    for (int c = 0; c < 256; c++) {
        float f = hearth_e4m3_to_f32((uint8_t)c);
        double want = ref_decode(c);
        if (isnan(want)) {
            CHECK_MSG(isnan(f), "code %02x: %g, want NaN", c, f);
            nan++;
            continue;
        }
        CHECK_MSG((double)f == want && !signbit(f) == !signbit(want), "code %02x: %.9g, want %.9g", c, f, want);
        /* round trip: every non-NaN code encodes back to itself (0x80 is -0) */
        CHECK_MSG(hearth_f32_to_e4m3(f) == c, "code %02x: %g -> %02x", c, f, hearth_f32_to_e4m3(f));
    }
    CHECK_EQ(nan, 2);
    CHECK(hearth_e4m3_to_f32(0x7e) == 448.0f && hearth_e4m3_to_f32(0x08) == 0x1p-6f);
    CHECK(hearth_e4m3_to_f32(0x01) == 0x1p-9f && hearth_e4m3_to_f32(0x07) == 7 * 0x1p-9f);
}

/* Every midpoint between two neighbouring codes (the ties), the floats on
 * either side of it, the codes themselves, and 300k random floats over the
 * range, both signs: the encoder equals the nearest-code search. */
TEST(e4m3_encode_equals_nearest_code_search) {
    long n = 0;
    for (int c = 0; c < 0x7e; c++) {
        float lo = (float)ref_decode(c), hi = (float)ref_decode(c + 1);
        float mid = (float)(((double)lo + hi) / 2); /* at most 5 significant bits: exact */
        CHECK((double)mid == ((double)lo + hi) / 2);
        float xs[] = {lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY), hi};
        for (int i = 0; i < 5; i++) {
            for (int s = 0; s < 2; s++) {
                float x = s ? -xs[i] : xs[i];
                CHECK_MSG(hearth_f32_to_e4m3(x) == ref_encode(x), "%a: %02x, want %02x", x, hearth_f32_to_e4m3(x),
                          ref_encode(x));
                n++;
            }
        }
    }
    uint64_t r = 7;
    for (int i = 0; i < 300000; i++) {
        /* exponents 2^-14 .. 2^10, random mantissa and sign */
        uint32_t u = (uint32_t)((lcg(&r) & 0x7fffff) | ((uint32_t)(113 + lcg(&r) % 25) << 23) | ((lcg(&r) & 1) << 31));
        float x;
        memcpy(&x, &u, 4);
        CHECK_MSG(hearth_f32_to_e4m3(x) == ref_encode(x), "%a: %02x, want %02x", x, hearth_f32_to_e4m3(x),
                  ref_encode(x));
        n++;
    }
    printf("  %ld values\n", n);
}

/* The edges, each spelled out. */
TEST(e4m3_encode_ties_saturation_nan_subnormals) {
    /* ties go to the even code */
    CHECK_EQ(hearth_f32_to_e4m3(17.0f), 0x58);  /* 16 (0x58) | 18 (0x59) */
    CHECK_EQ(hearth_f32_to_e4m3(19.0f), 0x5a);  /* 18 | 20 (0x5a) */
    CHECK_EQ(hearth_f32_to_e4m3(1.0625f), 0x38); /* 1 | 1.125 */
    CHECK_EQ(hearth_f32_to_e4m3(nextafterf(1.0625f, 2.0f)), 0x39);
    CHECK_EQ(hearth_f32_to_e4m3(-1.1875f), 0xba); /* -1.125 | -1.25 -> -1.25 (0xba) */
    /* saturation: 448 is the largest finite value; 464 is the tie 448 | (480), to 448 */
    CHECK_EQ(hearth_f32_to_e4m3(448.0f), 0x7e);
    CHECK_EQ(hearth_f32_to_e4m3(464.0f), 0x7e);
    CHECK_EQ(hearth_f32_to_e4m3(nextafterf(464.0f, 1e9f)), 0x7e);
    CHECK_EQ(hearth_f32_to_e4m3(1e6f), 0x7e);
    CHECK_EQ(hearth_f32_to_e4m3(FLT_MAX), 0x7e);
    CHECK_EQ(hearth_f32_to_e4m3(-FLT_MAX), 0xfe);
    CHECK_EQ(hearth_f32_to_e4m3(INFINITY), 0x7e);
    CHECK_EQ(hearth_f32_to_e4m3(-INFINITY), 0xfe);
    CHECK_EQ(hearth_f32_to_e4m3(416.0f), 0x7d);
    CHECK_EQ(hearth_f32_to_e4m3(432.0f), 0x7e); /* 416 | 448: tie to 0x7e (even) */
    /* NaN of either sign: 0x7f */
    CHECK_EQ(hearth_f32_to_e4m3(NAN), 0x7f);
    CHECK_EQ(hearth_f32_to_e4m3(-NAN), 0x7f);
    /* subnormals: steps of 2^-9 below 2^-6 */
    CHECK_EQ(hearth_f32_to_e4m3(0x1p-9f), 0x01);
    CHECK_EQ(hearth_f32_to_e4m3(3 * 0x1p-9f), 0x03);
    CHECK_EQ(hearth_f32_to_e4m3(1.5f * 0x1p-9f), 0x02); /* tie 1 | 2 */
    CHECK_EQ(hearth_f32_to_e4m3(2.5f * 0x1p-9f), 0x02); /* tie 2 | 3 */
    CHECK_EQ(hearth_f32_to_e4m3(7.5f * 0x1p-9f), 0x08); /* tie 7 | 8 = 2^-6, the smallest normal */
    CHECK_EQ(hearth_f32_to_e4m3(0x1p-10f), 0x00);        /* tie 0 | 1 */
    CHECK_EQ(hearth_f32_to_e4m3(nextafterf(0x1p-10f, 1.0f)), 0x01);
    CHECK_EQ(hearth_f32_to_e4m3(-0x1p-10f), 0x80);
    CHECK_EQ(hearth_f32_to_e4m3(-1e-30f), 0x80);
    CHECK_EQ(hearth_f32_to_e4m3(0x1p-140f), 0x00); /* an f32 subnormal */
    CHECK_EQ(hearth_f32_to_e4m3(0.0f), 0x00);
    CHECK_EQ(hearth_f32_to_e4m3(-0.0f), 0x80);
    /* from f32 directly, not through f16: 1 + 2^-4 + 2^-12 is above the tie
     * 1.0625 (to 1.125); through f16 (10-bit mantissa) it would be the tie
     * itself and go to 1.0 */
    CHECK_EQ(hearth_f32_to_e4m3(1.0625f + 0x1p-12f), 0x39);
}

TEST(e4m3_dtype_entry) {
    const hearth_dtype_info *d = hearth_dtype_get(HEARTH_DT_E4M3);
    CHECK(d && d->block == 1 && d->block_bytes == 1 && !strcmp(d->name, "e4m3"));
    CHECK_EQ(hearth_dtype_row_bytes(HEARTH_DT_E4M3, 128), 128);
    CHECK(hearth_dtype_get_ggml(HEARTH_DT_E4M3) == NULL); /* no file carries it */
    CHECK(hearth_dtype_get_ggml(HEARTH_DT_Q4_K) == hearth_dtype_get(HEARTH_DT_Q4_K));
    /* the CPU row codec: every code, and values between them */
    uint8_t codes[256], back[256];
    float x[256], y[256];
    for (int i = 0; i < 256; i++) x[i] = (float)ref_decode(i) * (i % 3 == 0 ? 1.03f : 1.0f);
    CHECK_EQ(hearth_cpu_quantize_row(HEARTH_DT_E4M3, x, codes, 256), HEARTH_OK);
    hearth_cpu_dequantize_row(HEARTH_DT_E4M3, codes, y, 256);
    for (int i = 0; i < 256; i++) {
        CHECK_EQ(codes[i], ref_encode(x[i]));
        CHECK(isnan(y[i]) ? isnan(ref_decode(codes[i])) : (double)y[i] == ref_decode(codes[i]));
        back[i] = (uint8_t)i;
    }
    hearth_cpu_dequantize_row(HEARTH_DT_E4M3, back, y, 256);
    for (int i = 0; i < 256; i++) CHECK(isnan(y[i]) || (double)y[i] == ref_decode(i));
}

/* An e4m3 cache is an f32 cache of e4m3-rounded values: kv_write stores the
 * rounded codes, and attention over both (full and sliding window, GQA)
 * agrees to the last bit. Inputs up to +-600 reach the saturation. */
TEST(kv_e4m3_attention_equals_dequantized_f32) {
    enum { HD = 16, NKV = 2, NH = 4, KVD = HD * NKV, BS = 4, NB = 8, P = 13 };
    hearth_cpu_ctx *c;
    CHECK_EQ(hearth_cpu_ctx_new(&c, 2, 16, 64, 64, NULL), HEARTH_OK);
    static float k32[NB * BS * KVD], v32[NB * BS * KVD];
    static uint8_t k8[NB * BS * KVD], v8[NB * BS * KVD];
    void *k32p[1] = {k32}, *v32p[1] = {v32}, *k8p[1] = {k8}, *v8p[1] = {v8};
    int32_t table[NB] = {5, 2, 7, 0, 1, 3, 4, 6};
    hearth_kv_view a = {k32p, v32p, table, BS, NB, KVD, NB, HEARTH_DT_F32, 0, 0, 0};
    hearth_kv_view b = {k8p, v8p, table, BS, NB, KVD, NB, HEARTH_DT_E4M3, 0, 0, 0};
    float kin[P * KVD], vin[P * KVD], kr[P * KVD], vr[P * KVD], q[P * NH * HD], oa[P * NH * HD], ob[P * NH * HD];
    int32_t seq[P], pos[P];
    uint64_t r = 11;
    int saturated = 0;
    for (int i = 0; i < P * KVD; i++) {
        float s = i % 17 == 0 ? 600.0f : 3.0f;
        kin[i] = ((float)lcg(&r) / 1073741824.0f - 1.0f) * s;
        vin[i] = ((float)lcg(&r) / 1073741824.0f - 1.0f) * s;
        kr[i] = (float)ref_decode(ref_encode(kin[i]));
        vr[i] = (float)ref_decode(ref_encode(vin[i]));
        saturated += fabsf(kr[i]) == 448.0f;
    }
    CHECK(saturated > 0);
    for (int i = 0; i < P * NH * HD; i++) q[i] = ((float)lcg(&r) / 1073741824.0f - 1.0f) * 0.05f;
    for (int t = 0; t < P; t++) seq[t] = 0, pos[t] = t;
    hearth_cpu_ops.kv_write(c, &a, 0, kr, vr, P, seq, pos);
    hearth_cpu_ops.kv_write(c, &b, 0, kin, vin, P, seq, pos);
    for (int i = 0; i < P; i++) { /* the stored bytes are the rounded codes */
        size_t off = ((size_t)table[i / BS] * BS + i % BS) * KVD;
        for (int j = 0; j < KVD; j++) {
            CHECK_EQ(k8[off + j], ref_encode(kin[i * KVD + j]));
            CHECK_EQ(v8[off + j], ref_encode(vin[i * KVD + j]));
        }
    }
    for (int w = 0; w <= 5; w += 5) {
        hearth_cpu_ops.attention(c, oa, q, P, &a, 0, seq, pos, NH, NKV, HD, 0.25f, w);
        hearth_cpu_ops.attention(c, ob, q, P, &b, 0, seq, pos, NH, NKV, HD, 0.25f, w);
        for (int i = 0; i < P * NH * HD; i++) CHECK_MSG(oa[i] == ob[i], "w %d, [%d]: %g vs %g", w, i, oa[i], ob[i]);
    }
    hearth_cpu_ctx_free(c);
}
