/* bench_pick_cpu.c - a token's choice from one logit row on the CPU: the
 * pick op (hearth_pick_row, what the CPU backend runs for rows without
 * processors: argmax, temperature, min_p, top_k, top_p) against the host
 * sampler (hearth_sampler_sample, which every other row takes), for the
 * settings clients send, on two kinds of rows of the default model's and an
 * 8B's vocabulary: "peaked" (a bulk of N(0, 2) and a few tokens 8-16 above
 * it, as a language model's) and "flat" (uniform in [-6, 6): every token
 * within the draw's window). us a row, the best of 5 batches of 40.
 *
 *   build/bench_pick_cpu
 *
 * Prints and measures; passes or fails nothing. */
#include "core/clock.h"
#include "engine/sampler.h"
#include "ops/cpu/pick.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 88172645463325252ull;
static double unif(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) * 0x1.0p-53;
}

static void fill(float *x, int vocab, int peaked) {
    for (int i = 0; i < vocab; i++)
        x[i] = peaked ? (float)(sqrt(-2.0 * log(unif() + 1e-300)) * cos(6.283185307179586 * unif()) * 2.0)
                      : (float)(unif() * 12.0 - 6.0);
    for (int j = 0; peaked && j < 8; j++) x[(int)(unif() * vocab)] = (float)(8.0 + 8.0 * unif());
}

typedef struct {
    const char *name;
    float temperature, min_p, top_p;
    int top_k;
} setting;

int main(void) {
    static const setting settings[] = {
        {"greedy", 0.0f, 0.0f, 1.0f, 0},
        {"T 0.8", 0.8f, 0.0f, 1.0f, 0},
        {"T 0.8 min_p 0.05", 0.8f, 0.05f, 1.0f, 0},
        {"T 0.8 top_k 40", 0.8f, 0.0f, 1.0f, 40},
        {"T 0.7 top_p 0.9", 0.7f, 0.0f, 0.9f, 0},
        {"llama-server defaults", 0.8f, 0.05f, 0.95f, 40}, /* top_k 40, top_p 0.95, min_p 0.05 */
    };
    static const int vocabs[] = {49152, 128256};
    printf("%-22s %-7s %7s %12s %12s\n", "setting", "row", "vocab", "pick us", "sampler us");
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        const int V = vocabs[v];
        float *x = malloc(sizeof(float) * (size_t)V), *y = malloc(sizeof(float) * (size_t)V);
        for (int peaked = 1; peaked >= 0; peaked--) {
            fill(x, V, peaked);
            for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
                const setting *c = &settings[s];
                hearth_pick_params pp = {.temperature = c->temperature, .min_p = c->min_p, .top_k = c->top_k,
                                         .top_p = c->top_p < 1.0f ? c->top_p : 0.0f};
                hearth_sampling sp;
                hearth_sampling_default(&sp);
                sp.temperature = c->temperature, sp.min_p = c->min_p, sp.top_p = c->top_p, sp.top_k = c->top_k;
                sp.seed = 1, sp.has_seed = 1;
                hearth_sampler smp;
                if (hearth_sampler_init(&smp, &sp, V, NULL) != HEARTH_OK) return 1;
                double best_pick = 1e30, best_smp = 1e30;
                for (int batch = 0; batch < 5; batch++) {
                    double t0 = hearth_time_now();
                    for (int k = 0; k < 40; k++) {
                        hearth_pick o;
                        pp.key = 0x9e3779b97f4a7c15ull * (uint64_t)(batch * 40 + k + 1);
                        hearth_pick_row(&o, x, V, &pp);
                    }
                    double t1 = hearth_time_now();
                    for (int k = 0; k < 40; k++) {
                        memcpy(y, x, sizeof(float) * (size_t)V);
                        hearth_sampler_sample(&smp, y, NULL);
                    }
                    double t2 = hearth_time_now();
                    best_pick = fmin(best_pick, (t1 - t0) / 40);
                    best_smp = fmin(best_smp, (t2 - t1) / 40);
                }
                hearth_sampler_deinit(&smp);
                printf("%-22s %-7s %7d %12.1f %12.1f\n", c->name, peaked ? "peaked" : "flat", V, best_pick * 1e6,
                       best_smp * 1e6);
            }
        }
        free(x);
        free(y);
    }
    return 0;
}
