/* bench_pick.c - the device pick op (ops.h) on random logit rows: device
 * time per call (hearth_cuda_ctx_profile, one launch per call) for greedy,
 * a temperature draw, a draw with logprobs and the top 20, and draws after
 * top_k / top_p (the truncation's passes), at several
 * row counts and vocabulary sizes, beside the bytes the rows hold (a pass
 * over them at the copy bandwidth measured in the same run). A measurement,
 * never a test.
 *
 *   bench_pick [--reps 20] */
#include "ops/cuda/ops_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The mean device time of the "pick" unit in the profile text, in us. */
static double pick_us(const char *text) {
    for (const char *l = text; l && *l;) {
        double total = 0.0, avg = 0.0;
        long count = 0;
        const char *nl = strchr(l, '\n');
        if (sscanf(l, "%lf %ld %lf", &total, &count, &avg) == 3 && count > 0) {
            const char *name = nl ? nl : l + strlen(l);
            while (name > l && name[-1] == ' ') name--;
            if (name - l >= 4 && !strncmp(name - 4, "pick", 4)) return avg;
        }
        l = nl ? nl + 1 : NULL;
    }
    return -1.0;
}

int main(int argc, char **argv) {
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_pick [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    static const int vocabs[] = {49152, 128256};
    static const int rows[] = {1, 8, 64, 256, 512};
    const int max_rows = 512, max_vocab = 128256;
    hearth_err err = {0};
    hearth_cuda_ctx *c;
    if (hearth_cuda_ctx_new(&c, 0, 64, 4096, 4096, &err)) {
        fprintf(stderr, "bench_pick: %s\n", err.msg);
        return 1;
    }
    const hearth_ops *o = &hearth_cuda_ops;
    double bw = hearth_cuda_copy_bandwidth(c, (size_t)1 << 30, 11);
    size_t n = (size_t)max_rows * max_vocab;
    float *x = malloc(sizeof(float) * n);
    hearth_pick_params *pp = malloc(sizeof *pp * max_rows);
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        float u = (float)((r >> 40) * (1.0 / 16777216.0));
        x[i] = (u - 0.5f) * 6.0f + ((r & 0xffff) == 0 ? 12.0f : 0.0f); /* a bulk and rare high tokens */
    }
    float *xd = o->alloc(c, sizeof(float) * n);
    hearth_pick_params *pd = o->alloc(c, sizeof *pp * max_rows);
    hearth_pick *od = o->alloc(c, sizeof(hearth_pick) * max_rows);
    if (!x || !pp || !xd || !pd || !od) {
        fprintf(stderr, "bench_pick: out of memory\n");
        return 1;
    }
    o->upload(c, xd, x, sizeof(float) * n);
    static const struct {
        const char *name;
        hearth_pick_params p;
    } modes[] = {
        {"greedy", {0.0f, 0.0f, 0, 0, 0, 0, 0.0f}},
        {"T=1 draw", {1.0f, 0.0f, 0, 0, 0, 0, 0.0f}},
        {"T=1 min_p 0.05 draw", {1.0f, 0.05f, 0, 0, 0, 0, 0.0f}},
        {"T=1 draw + logprobs top 20", {1.0f, 0.0f, 0, 1, 20, 0, 0.0f}},
        {"T=1 top_k 40", {1.0f, 0.0f, 0, 0, 0, 40, 0.0f}},
        {"T=1 top_p 0.95", {1.0f, 0.0f, 0, 0, 0, 0, 0.95f}},
        {"T=0.8 k 40 p 0.95 min_p .05", {0.8f, 0.05f, 0, 0, 0, 40, 0.95f}}, /* llama-server's defaults */
    };
    printf("copy bandwidth %.0f GB/s; device time per pick call (mean of %d, eager, device events);\n"
           "'1 pass' = the rows' bytes at the copy bandwidth\n",
           bw, reps);
    printf("%-28s %6s %7s %10s %12s\n", "mode", "rows", "vocab", "us", "1 pass us");
    static char text[8192];
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
            for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
                int R = rows[k], V = vocabs[v];
                for (int i = 0; i < R; i++) {
                    pp[i] = modes[m].p;
                    pp[i].key = 0x1234567ull * (uint64_t)(i + 1);
                }
                o->upload(c, pd, pp, sizeof *pp * (size_t)R);
                o->pick(c, od, xd, R, V, pd, NULL); /* warm-up */
                hearth_cuda_ctx_sync(c);
                hearth_cuda_ctx_profile(c, 1);
                for (int i = 0; i < reps; i++) o->pick(c, od, xd, R, V, pd, NULL);
                hearth_cuda_ctx_profile_text(c, text, sizeof text);
                hearth_cuda_ctx_profile(c, 0);
                double us = pick_us(text);
                double pass_us = (double)R * V * 4.0 / (bw * 1e9) * 1e6;
                printf("%-28s %6d %7d %10.1f %12.1f\n", modes[m].name, R, V, us, pass_us);
            }
        }
    }
    if (hearth_cuda_ctx_error(c, &err) != HEARTH_OK) {
        fprintf(stderr, "bench_pick: %s\n", err.msg);
        return 1;
    }
    o->free(c, xd);
    o->free(c, pd);
    o->free(c, od);
    hearth_cuda_ctx_free(c);
    free(x);
    free(pp);
    return 0;
}
