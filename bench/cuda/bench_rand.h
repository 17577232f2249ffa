/* bench_rand.h - the CUDA benchmarks' random inputs: one xorshift64 stream
 * per program (fixed seed, so runs draw the same data). Not a test helper:
 * the tests draw their own, seeded and printed. */
#ifndef HEARTH_BENCH_RAND_H
#define HEARTH_BENCH_RAND_H

#include <stdint.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* uniform in [-1, 1) */
static inline float frand(void) { return (float)((rnd() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

#endif
