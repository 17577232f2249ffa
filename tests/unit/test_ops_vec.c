/* test_ops_vec.c - the SIMD vector kernels against the scalar reference. */
#include "testhelp.h"

#include "core/half.h"
#include "ops/cpu/attn_vec.h"
#include "ops/cpu/vec.h"

#include <stdint.h>
#include <stdlib.h>

TEST(vec_kernels_match_scalar) {
    const hearth_vec_ops *ref = hearth_vec_get("scalar");
    const char *isas[] = {"avx2", "avx512"};
    float b[133], y0[133], y1[133];
    srand(3);
    for (int i = 0; i < 133; i++) b[i] = (float)rand() / RAND_MAX - 0.5f;
    int tested = 0;
    for (int k = 0; k < 2; k++) {
        const hearth_vec_ops *v = hearth_vec_get(isas[k]);
        if (!v) continue; /* this CPU lacks it */
        tested++;
        for (int n = 0; n <= 133; n += 7) {
            memcpy(y0, b, sizeof b);
            memcpy(y1, b, sizeof b);
            ref->scale(y0, -1.5f, n);
            v->scale(y1, -1.5f, n);
            for (int i = 0; i < 133; i++) CHECK_NEAR(y1[i], y0[i], 1e-6);
            ref->add_scaled(y0, 0.37f, b + 1, n < 132 ? n : 132); /* the attention's merge: the same bits */
            v->add_scaled(y1, 0.37f, b + 1, n < 132 ? n : 132);
            CHECK(!memcmp(y0, y1, sizeof y0));
        }
    }
    CHECK(hearth_vec_get(NULL) != NULL);
    CHECK(hearth_vec_get("nonsense") == NULL);
    printf("  isas tested: %d (best: %s)\n", tested, hearth_vec_get(NULL)->isa);
}

/* expsum (the attention's softmax): within 3 ulp of expf down to -87, 0
 * below, the sum returned, every ISA, every length's tail. */
TEST(vec_expsum_matches_expf) {
    const char *isas[] = {"scalar", "avx2", "avx512"};
    float s[101], x[101];
    for (int i = 0; i < 101; i++) x[i] = -100.0f * (float)((i * 37) % 101) / 100.0f + 0.5f;
    for (int k = 0; k < 3; k++) {
        const hearth_attn_ops *v = hearth_attn_ops_get(isas[k]);
        if (!v) continue;
        for (int n = 1; n <= 101; n += 5) {
            memcpy(s, x, sizeof x);
            double sum = 0;
            float got = v->expsum(s, n, 0.5f);
            for (int i = 0; i < n; i++) {
                float want = expf(x[i] - 0.5f);
                sum += s[i];
                if (x[i] - 0.5f < -87.3f) CHECK_MSG(s[i] <= want, "%s: exp(%g) = %g", isas[k], x[i] - 0.5f, s[i]);
                else CHECK_MSG(fabsf(s[i] - want) <= 3.6e-7f * want, "%s: exp(%g) = %.9g, expf %.9g", isas[k],
                               x[i] - 0.5f, s[i], want);
            }
            CHECK_NEAR(got, sum, 1e-6 * sum);
            CHECK(s[n < 101 ? n : 100] == (n < 101 ? x[n] : s[100])); /* nothing past n written */
        }
    }
}

/* swiglu within 4 ulp-ish of the scalar formula with expf, both tails. */
TEST(vec_swiglu_matches_expf) {
    const char *isas[] = {"scalar", "avx2", "avx512"};
    float g[203], u[203], y[203];
    for (int i = 0; i < 203; i++) g[i] = -101.0f + (float)i, u[i] = 0.5f + (float)(i % 7) * 0.25f;
    g[5] = -200.0f, g[6] = 200.0f;
    for (int k = 0; k < 3; k++) {
        const hearth_vec_ops *v = hearth_vec_get(isas[k]);
        if (!v) continue;
        for (int n = 1; n <= 203; n += 29) {
            memset(y, 0, sizeof y);
            v->swiglu(y, g, u, n);
            for (int i = 0; i < n; i++) {
                float want = g[i] / (1.0f + expf(-g[i])) * u[i];
                CHECK_MSG(fabsf(y[i] - want) <= 5e-7f * fabsf(want) + 1e-30f, "%s: swiglu(%g) = %.9g, want %.9g",
                          isas[k], g[i], y[i], want);
            }
            if (n < 203) CHECK(y[n] == 0.0f);
        }
    }
}

/* to_f16 gives hearth_f32_to_f16's bits for every value: random bit
 * patterns (normals, subnormals, infinities, NaNs), ties, overflow, every ISA. */
TEST(vec_to_f16_matches_scalar) {
    const char *isas[] = {"scalar", "avx2", "avx512"};
    enum { N = 1 << 16 };
    static float x[N];
    static uint16_t want[N], got[N];
    uint64_t r = 5;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t u = (uint32_t)(r >> 32);
        if (i % 4 == 1) u = (u & 0x80000000u) | (((u >> 23) % 40 + 95) << 23) | (u & 0x7fffffu); /* near f16's range */
        if (i % 4 == 2) u = (u & 0x80001fffu) | 0x00001000u | (((u >> 23) % 40 + 95) << 23);   /* halfway cases */
        memcpy(&x[i], &u, 4);
        want[i] = hearth_f32_to_f16(x[i]);
    }
    x[7] = 65504.0f, x[8] = 65519.0f, x[9] = 65520.0f, x[10] = 1e-8f, x[11] = -0.0f;
    for (int i = 7; i < 12; i++) want[i] = hearth_f32_to_f16(x[i]);
    for (int k = 0; k < 3; k++) {
        const hearth_attn_ops *v = hearth_attn_ops_get(isas[k]);
        if (!v) continue;
        memset(got, 0, sizeof got);
        v->to_f16(got, x, N - 3); /* a tail too */
        for (int i = 0; i < N - 3; i++)
            CHECK_MSG(got[i] == want[i], "%s: %a -> %04x, scalar %04x", isas[k], x[i], got[i], want[i]);
        CHECK(got[N - 3] == 0);
    }
}
