/* test_ops_vec.c - the SIMD vector kernels against the scalar reference. */
#include "testhelp.h"

#include "ops/cpu/vec.h"

#include <stdlib.h>

TEST(vec_kernels_match_scalar) {
    const hearth_vec_ops *ref = hearth_vec_get("scalar");
    const char *isas[] = {"avx2", "avx512"};
    float a[133], b[133], y0[133], y1[133];
    srand(3);
    for (int i = 0; i < 133; i++) a[i] = (float)rand() / RAND_MAX - 0.5f, b[i] = (float)rand() / RAND_MAX - 0.5f;
    int tested = 0;
    for (int k = 0; k < 2; k++) {
        const hearth_vec_ops *v = hearth_vec_get(isas[k]);
        if (!v) continue; /* this CPU lacks it */
        tested++;
        for (int n = 0; n <= 133; n += 7) {
            CHECK_NEAR(v->dot(a, b, n), ref->dot(a, b, n), 1e-5);
            memcpy(y0, b, sizeof b);
            memcpy(y1, b, sizeof b);
            ref->axpy(y0, 0.37f, a, n);
            v->axpy(y1, 0.37f, a, n);
            ref->scale(y0, -1.5f, n);
            v->scale(y1, -1.5f, n);
            for (int i = 0; i < 133; i++) CHECK_NEAR(y1[i], y0[i], 1e-6);
        }
    }
    CHECK(hearth_vec_get(NULL) != NULL);
    CHECK(hearth_vec_get("nonsense") == NULL);
    printf("  isas tested: %d (best: %s)\n", tested, hearth_vec_get(NULL)->isa);
}
