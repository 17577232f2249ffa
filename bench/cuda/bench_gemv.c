/* bench_gemv.c - the decode matmuls of a Llama-3.1-8B-shaped model on CUDA,
 * per weight type: time per matmul, GB/s of weight bytes read, and the share
 * of the device-to-device copy bandwidth measured in the same run; then the
 * sum over one token's matmuls (32 layers + the output head) as the
 * GEMV-only decode ceiling. A measurement, never a test.
 *
 *   bench_gemv [--types bf16,q8_0,...] [--T 1,2,4,8] [--reps N] [--only MATMUL]
 *
 * Weights are random but valid (finite scales and values), in enough copies
 * that every timed pass streams from device memory, not from the 60 MB L2.
 * Each pass is one recorded sequence of matmuls over all copies, replayed as
 * a CUDA graph after the first two passes, as decode replays its steps. */
#include "core/dtype.h"
#include "ops/cuda/ops_cuda.h"
#include "bench_rand.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A small f16 of either sign, |v| in [2^-9, 2^-6). */
static uint16_t small_f16(void) { return (uint16_t)(((rnd() & 1) << 15) | ((6 + rnd() % 3) << 10) | (rnd() & 0x3ff)); }

/* n bytes of rows of type t: random codes, every scale / value finite. */
static void fill_valid(hearth_dtype t, uint8_t *p, size_t n) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t r = rnd();
        memcpy(p + i, &r, 8);
    }
    const hearth_dtype_info *di = hearth_dtype_get(t);
    size_t bb = (size_t)di->block_bytes;
    for (size_t o = 0; o + bb <= n; o += bb) {
        uint8_t *b = p + o;
        uint16_t h[2] = {small_f16(), small_f16()};
        switch (t) {
        case HEARTH_DT_F32: {
            float f = (float)((int64_t)(rnd() % 2001) - 1000) * 1e-5f;
            memcpy(b, &f, 4);
            break;
        }
        case HEARTH_DT_F16: memcpy(b, h, 2); break;
        case HEARTH_DT_BF16: {
            uint16_t v = (uint16_t)(((rnd() & 1) << 15) | ((118 + rnd() % 8) << 7) | (rnd() & 0x7f));
            memcpy(b, &v, 2);
            break;
        }
        case HEARTH_DT_Q4_0: case HEARTH_DT_Q8_0: memcpy(b, h, 2); break;
        case HEARTH_DT_Q4_1: case HEARTH_DT_Q4_K: h[0] &= 0x7fff; memcpy(b, h, 4); break;
        case HEARTH_DT_Q6_K: memcpy(b + 208, h, 2); break;
        default: break;
        }
    }
}

static hearth_dtype parse_type(const char *s) {
    static const hearth_dtype all[] = {HEARTH_DT_F32, HEARTH_DT_F16, HEARTH_DT_BF16, HEARTH_DT_Q4_0,
                                       HEARTH_DT_Q4_1, HEARTH_DT_Q8_0, HEARTH_DT_Q4_K, HEARTH_DT_Q6_K};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcasecmp(s, hearth_dtype_get(all[i])->name)) return all[i];
    return (hearth_dtype)-1;
}

typedef struct {
    const char *name;
    int N, K, per_layer;
} shape;

static const shape SHAPES[] = {
    {"attn_q", 4096, 4096, 1}, {"attn_k/v", 1024, 4096, 2}, {"attn_out", 4096, 4096, 1},
    {"ffn_gate/up", 14336, 4096, 2}, {"ffn_down", 4096, 14336, 1}, {"output", 128256, 4096, 0},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0], N_LAYERS = 32 };

int main(int argc, char **argv) {
    const char *types_arg = "bf16,f16,q8_0,q4_0,q4_1,q4_K,q6_K";
    const char *t_arg = "1";
    int reps = 10;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--types") && i + 1 < argc) types_arg = argv[++i];
        else if (!strcmp(argv[i], "--T") && i + 1 < argc) t_arg = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_gemv [--types bf16,q8_0,...] [--T 1,2,4,8] [--reps N] [--only MATMUL]\n");
            return 2;
        }
    }
    hearth_err err = {0};
    hearth_cuda_ctx *c;
    if (hearth_cuda_ctx_new(&c, 0, 8, 14336, 4096, &err) != HEARTH_OK) {
        fprintf(stderr, "bench_gemv: %s\n", err.msg);
        return 1;
    }
    const hearth_ops *o = &hearth_cuda_ops;
    double bw = hearth_cuda_copy_bandwidth(c, (size_t)1 << 31, 21);
    printf("copy bandwidth: %.0f GB/s (2 GiB device-to-device copy, read + write, median of 21)\n\n", bw);
    printf("%-6s %-12s %7s %6s %2s %9s %8s %6s\n", "type", "matmul", "N", "K", "T", "us", "GB/s", "%copy");

    char tbuf[256];
    snprintf(tbuf, sizeof tbuf, "%s", types_arg);
    for (char *ts = strtok(tbuf, ","); ts; ts = strtok(NULL, ",")) {
        hearth_dtype t = parse_type(ts);
        if ((int)t < 0) {
            fprintf(stderr, "bench_gemv: unknown type %s\n", ts);
            return 2;
        }
        char tl[64];
        snprintf(tl, sizeof tl, "%s", t_arg);
        char *save = NULL;
        for (char *tt = strtok_r(tl, ",", &save); tt; tt = strtok_r(NULL, ",", &save)) {
            int T = atoi(tt);
            if (T < 1 || T > 8) continue;
            double layer_us = 0, head_us = 0, token_bytes = 0;
            for (int si = 0; si < N_SHAPES; si++) {
                const shape *sh = &SHAPES[si];
                if (only && strcmp(only, sh->name)) continue;
                size_t rb = hearth_dtype_row_bytes(t, sh->K), wbytes = rb * (size_t)sh->N;
                int copies = (int)((768u << 20) / wbytes) + 1;
                if (copies < 2) copies = 2;
                void **w = calloc((size_t)copies, sizeof *w);
                size_t tile_rows = ((size_t)64 << 20) / rb;
                if (tile_rows > (size_t)sh->N) tile_rows = (size_t)sh->N;
                uint8_t *tile = malloc(tile_rows * rb);
                fill_valid(t, tile, tile_rows * rb);
                int ok = 1;
                for (int k = 0; k < copies && ok; k++) {
                    w[k] = o->alloc(c, wbytes);
                    if (!w[k]) ok = 0;
                    for (size_t r = 0; ok && r < (size_t)sh->N; r += tile_rows) {
                        size_t nr = (size_t)sh->N - r < tile_rows ? (size_t)sh->N - r : tile_rows;
                        o->upload(c, (uint8_t *)w[k] + r * rb, tile, nr * rb);
                    }
                }
                free(tile);
                int layout = HEARTH_LAYOUT_STORED; /* as the model loader leaves it (HEARTH_SPLIT_ROWS=0: stored) */
                for (int k = 0; k < copies && ok && o->prepare_weight; k++) {
                    hearth_weight wt = {w[k], t, sh->N, sh->K, rb, HEARTH_LAYOUT_STORED};
                    hearth_err perr = {0};
                    if (o->prepare_weight(c, &wt, &perr) != HEARTH_OK) {
                        fprintf(stderr, "bench_gemv: %s\n", perr.msg);
                        ok = 0;
                    }
                    layout = wt.layout;
                }
                float *xh = malloc(sizeof(float) * (size_t)T * sh->K);
                for (size_t i = 0; i < (size_t)T * sh->K; i++) xh[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
                float *x = o->alloc(c, sizeof(float) * (size_t)T * sh->K), *y = o->alloc(c, sizeof(float) * (size_t)T * sh->N);
                if (!ok || !x || !y) {
                    fprintf(stderr, "bench_gemv: out of device memory for %s %s\n", ts, sh->name);
                    return 1;
                }
                o->upload(c, x, xh, sizeof(float) * (size_t)T * sh->K);
                free(xh);
                int per_pass = copies < 8 ? 8 : copies;
                double best = 1e30, *times = malloc(sizeof(double) * (size_t)(reps + 3));
                for (int r = 0; r < reps + 3; r++) {
                    double t0 = now_s();
                    for (int k = 0; k < per_pass; k++) {
                        hearth_weight wt = {w[k % copies], t, sh->N, sh->K, rb, layout};
                        o->matmul(c, y, x, T, &wt);
                    }
                    hearth_cuda_ctx_sync(c);
                    times[r] = (now_s() - t0) / per_pass;
                    if (r >= 3 && times[r] < best) best = times[r];
                }
                /* median of the graph-replayed passes */
                for (int a = 3; a < reps + 3; a++)
                    for (int b = a + 1; b < reps + 3; b++)
                        if (times[b] < times[a]) {
                            double tmp = times[a];
                            times[a] = times[b];
                            times[b] = tmp;
                        }
                double med = times[3 + reps / 2];
                free(times);
                double gbs = wbytes / med / 1e9;
                printf("%-6s %-12s %7d %6d %2d %9.2f %8.0f %5.1f%%\n", ts, sh->name, sh->N, sh->K, T, med * 1e6, gbs,
                       100.0 * gbs / bw);
                if (sh->per_layer) {
                    layer_us += sh->per_layer * med * 1e6;
                    token_bytes += (double)sh->per_layer * N_LAYERS * wbytes;
                } else {
                    head_us = med * 1e6;
                    token_bytes += wbytes;
                }
                hearth_err e2 = {0};
                if (hearth_cuda_ctx_error(c, &e2) != HEARTH_OK) {
                    fprintf(stderr, "bench_gemv: %s\n", e2.msg);
                    return 1;
                }
                for (int k = 0; k < copies; k++) o->free(c, w[k]);
                free(w);
                o->free(c, x);
                o->free(c, y);
            }
            double tok_us = N_LAYERS * layer_us + head_us;
            printf("%-6s one token (T=%d): %.0f us of matmuls for %.2f GB: %.0f GB/s = %.1f%% of copy; "
                   "GEMV-only ceiling %.0f tok/s (copy roofline %.0f)\n\n",
                   ts, T, tok_us, token_bytes / 1e9, token_bytes / (tok_us * 1e-6) / 1e9,
                   100.0 * token_bytes / (tok_us * 1e-6) / 1e9 / bw, 1e6 / tok_us, bw * 1e9 / token_bytes);
        }
    }
    hearth_cuda_stats st;
    hearth_cuda_ctx_stats(c, &st);
    printf("recorder: %ld flushes, %ld graph captures, %ld graph replays\n", st.flushes, st.graph_captures,
           st.graph_replays);
    hearth_cuda_ctx_free(c);
    return 0;
}
