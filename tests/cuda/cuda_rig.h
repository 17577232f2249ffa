/* cuda_rig.h - what the CUDA op tests share (test_ops_cuda.c, test_train_cuda.c): a CUDA and a CPU
 * context, seeded random inputs (the seed is printed; HEARTH_TEST_SEED repeats a run), device buffers
 * poisoned with NaN, the sticky error checked. The including file makes the contexts (rig_contexts) in
 * its own setup, with its sizes. */
#ifndef HEARTH_TESTS_CUDA_RIG_H
#define HEARTH_TESTS_CUDA_RIG_H

#include "../unit/testhelp.h"

#include "ops/cpu/ops_cpu.h"
#include "ops/cuda/ops_cuda.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static hearth_cuda_ctx *g_cu;
static hearth_cpu_ctx *g_cpu;
static uint64_t g_rng;
static const hearth_ops *CU = &hearth_cuda_ops, *CPU = &hearth_cpu_ops;

static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float frand(void) { return (float)((rnd() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }
/* roughly normal, with an occasional outlier as real activations have */
static float nrand(void) {
    float s = frand() + frand() + frand();
    if (rnd() % 97 == 0) s *= 8.0f;
    return s;
}
static int irand(int n) { return (int)(rnd() % (uint64_t)n); }

/* The seed, then both contexts; 0 (a failure recorded) when one cannot be made. */
static int rig_contexts(int max_tokens, int max_cols, int max_ctx) {
    const char *s = getenv("HEARTH_TEST_SEED");
    g_rng = s ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() * 2654435761u;
    if (!g_rng) g_rng = 1;
    printf("  seed 0x%llx (HEARTH_TEST_SEED repeats it)\n", (unsigned long long)g_rng);
    hearth_err err = {0};
    if (hearth_cuda_ctx_new(&g_cu, 0, max_tokens, max_cols, max_ctx, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "cuda context: %s", err.msg);
        g_cu = NULL;
        return 0;
    }
    if (hearth_cpu_ctx_new(&g_cpu, 0, max_tokens, max_cols, max_ctx, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "cpu context: %s", err.msg);
        return 0;
    }
    return 1;
}

static void *dnew(size_t bytes) { return CU->alloc(g_cu, bytes); }
static void dfree(void *p) { CU->free(g_cu, p); }
static void *dup_host(const void *h, size_t bytes) {
    void *d = dnew(bytes);
    if (d) CU->upload(g_cu, d, h, bytes);
    return d;
}
static void poison(void *d, size_t bytes) {
    uint8_t *h = malloc(bytes);
    memset(h, 0xff, bytes); /* 0xffffffff is a NaN */
    CU->upload(g_cu, d, h, bytes);
    free(h);
}
static void down(void *h, const void *d, size_t bytes) { CU->download(g_cu, h, d, bytes); }

static float *rand_vec(size_t n) {
    float *v = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) v[i] = nrand();
    return v;
}

static int check_cuda_ok(void) {
    hearth_err err = {0};
    if (hearth_cuda_ctx_error(g_cu, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "sticky CUDA error: %s", err.msg);
        return 0;
    }
    return 1;
}

#endif
