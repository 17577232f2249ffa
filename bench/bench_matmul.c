/* bench_matmul.c - times hearth_cpu_matmul for every weight type at decode
 * (T=1) and prefill (T=128) shapes, and prints GB/s of weights streamed and
 * GFLOP/s. For decode the peer, measured in the same run the same way, is
 * a plain read of the very bytes the call streams ("read GB/s"; "of-bw" is
 * the matmul's fraction of it). "cold" rotates over 1 GB of weight copies so
 * that every call comes from DRAM. The machine may be shared: each figure is
 * the best of many short batches (a call's time when nothing else runs), not
 * the mean.
 *
 *   build/bench_matmul [-t threads] [-i scalar|avx2|avx512] [-l stored|auto] [-s seconds] [-T 1,2,..] [type...]
 *
 * -T: instead, the default model's gate/up (576 x 1536) and down (1536 x 576)
 * products at those token counts (a few rows: batched decode, drafted tokens).
 *
 * q4_0 / q4_1 / q8_0 weights are panel-laid where the model would lay them
 * so at load (ops/cpu/panel.h; a '*' after the type), unless -l stored.
 *
 * Prints and measures; passes or fails nothing. */
#include "core/clock.h"
#include "core/pool.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/panel.h"
#include "ops/cpu/quant.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)(g_rng >> 40) / 8388608.f - 1.f;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Read bandwidth over n bytes with the pool's threads: each thread reads its
 * share as 16 interleaved streams (as the 16-row GEMV kernels do, which
 * gets more memory-level parallelism than one stream), 16-byte loads
 * (SSE2 on x86-64) into independent sums: the decode ceiling here. */
#if defined(__x86_64__)
typedef __m128i vec16;
#define VZERO() _mm_setzero_si128()
#define VADD(a, p) _mm_add_epi64((a), _mm_load_si128(p))
#else
typedef struct { uint64_t a, b; } vec16;
static inline vec16 vzero(void) { return (vec16){0, 0}; }
static inline vec16 vadd(vec16 s, const vec16 *p) { return (vec16){s.a + p->a, s.b + p->b}; }
#define VZERO() vzero()
#define VADD(a, p) vadd((a), (p))
#endif

typedef struct { const vec16 *p; size_t n; vec16 out[64]; } bw_ctx;
static void bw_task(void *ctx, int task, int n_tasks) {
    bw_ctx *c = ctx;
    size_t a = c->n * (size_t)task / (size_t)n_tasks, b = c->n * (size_t)(task + 1) / (size_t)n_tasks;
    size_t seg = (b - a) / 16 / 4 * 4; /* 16 segments, in 64-byte lines */
    vec16 s[4] = {VZERO(), VZERO(), VZERO(), VZERO()};
    for (size_t i = 0; i < seg; i += 4)
        for (int r = 0; r < 16; r++) {
            const vec16 *q = c->p + a + (size_t)r * seg + i;
            s[0] = VADD(s[0], q);
            s[1] = VADD(s[1], q + 1);
            s[2] = VADD(s[2], q + 2);
            s[3] = VADD(s[3], q + 3);
        }
    c->out[task & 63] = s[0];
    c->out[(task + 1) & 63] = s[1];
    c->out[(task + 2) & 63] = s[2];
    c->out[(task + 3) & 63] = s[3];
}

/* Best seconds per call of fn over batches of ~2 ms for about secs seconds. */
typedef void (*call_fn)(void *ctx);
static double best_time(call_fn fn, void *ctx, double secs) {
    fn(ctx); /* warm */
    double best = 1e30, start = hearth_time_now();
    int batch = 1;
    while (hearth_time_now() - start < secs) {
        double t0 = hearth_time_now();
        for (int i = 0; i < batch; i++) fn(ctx);
        double per = (hearth_time_now() - t0) / batch;
        if (per < best) best = per;
        if (per * batch < 2e-3 && batch < (1 << 20)) batch *= 2;
    }
    return best;
}

/* The peer call: read the bytes one matmul call streams (same copy rotation). */
typedef struct { hearth_pool *pool; const unsigned char *w; size_t wbytes; int copies, next; } bw_call;
static void bw_run(void *ctx) {
    bw_call *b = ctx;
    bw_ctx c = {.p = (const vec16 *)(const void *)(b->w + b->wbytes * (size_t)b->next), .n = b->wbytes / 16};
    b->next = (b->next + 1) % b->copies;
    hearth_pool_run(b->pool, bw_task, &c, hearth_pool_size(b->pool));
}

typedef struct {
    hearth_pool *pool;
    float *y;
    const float *x;
    int T, K, N;
    const unsigned char *w;
    hearth_dtype t;
    int layout;
    void *scratch;
    size_t wbytes;
    int copies, next; /* cold: rotate over copies of the weights (more than the caches hold) */
} mm_call;
static void mm_run(void *ctx) {
    mm_call *m = ctx;
    const unsigned char *w = m->w + m->wbytes * (size_t)m->next;
    m->next = (m->next + 1) % m->copies;
    hearth_cpu_matmul(m->pool, m->y, m->x, m->T, w, m->t, m->layout, m->K, m->N, m->scratch);
}

typedef struct { int T, K, N; const char *what; } shape;

static const size_t COLD_BYTES = (size_t)1 << 30; /* beyond any cache here */

int main(int argc, char **argv) {
    int threads = 0, stored = 0;
    double secs = 0.3;
    const char *types[16];
    int n_types = 0, n_rows_list = 0, rows_list[16];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            secs = atof(argv[++i]);
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            const char *name = argv[++i];
            int isa = !strcmp(name, "scalar") ? HEARTH_CPU_ISA_SCALAR
                      : !strcmp(name, "avx2") ? HEARTH_CPU_ISA_AVX2
                                              : HEARTH_CPU_ISA_AVX512;
            if (!hearth_cpu_isa_force(isa)) {
                fprintf(stderr, "isa %s not available on this CPU\n", name);
                return 1;
            }
        } else if (!strcmp(argv[i], "-l") && i + 1 < argc) {
            stored = !strcmp(argv[++i], "stored");
        } else if (!strcmp(argv[i], "-T") && i + 1 < argc) {
            for (char *p = argv[++i], *end; *p && n_rows_list < 16; p = end + (*end == ',')) {
                rows_list[n_rows_list] = (int)strtol(p, &end, 10);
                if (end == p || rows_list[n_rows_list++] <= 0) {
                    fprintf(stderr, "-T expects token counts such as 1,2,4\n");
                    return 1;
                }
            }
        } else if (n_types < 16 && argv[i][0] != '-') {
            types[n_types++] = argv[i];
        } else {
            fprintf(stderr, "usage: %s [-t threads] [-i scalar|avx2|avx512] [-l stored|auto] [-s seconds] [-T 1,2,..] "
                            "[type...]\n", argv[0]);
            return 1;
        }
    }
    hearth_pool *pool;
    hearth_err err = {0};
    if (hearth_pool_new(&pool, threads, &err) != HEARTH_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    static const hearth_dtype all[] = {HEARTH_DT_Q4_0, HEARTH_DT_Q4_1, HEARTH_DT_Q8_0, HEARTH_DT_Q4_K,
                                       HEARTH_DT_Q6_K, HEARTH_DT_F16, HEARTH_DT_BF16, HEARTH_DT_F32};
    shape shapes[32] = {
        {1, 576, 1536, "decode"}, {1, 4096, 4096, "decode"}, {1, 4096, 4096, "cold"},
        {128, 576, 1536, "prefill"}, {128, 4096, 4096, "prefill"},
    };
    size_t n_shapes = 5;
    if (n_rows_list > 0) n_shapes = 0;
    for (int i = 0; i < n_rows_list; i++) {
        shapes[n_shapes++] = (shape){rows_list[i], 576, 1536, "gate"};
        shapes[n_shapes++] = (shape){rows_list[i], 1536, 576, "down"};
    }
    printf("isa %s, %d threads\n", hearth_cpu_isa_name(hearth_cpu_isa_current()), hearth_pool_size(pool));
    printf("%-5s %-7s %4s %5s %5s %10s %8s %9s %9s %6s\n", "type", "shape", "T", "K", "N", "us/call", "GB/s",
           "GFLOP/s", "read GB/s", "of-bw");

    for (size_t ti = 0; ti < sizeof all / sizeof all[0]; ti++) {
        hearth_dtype t = all[ti];
        const char *name = hearth_dtype_get(t)->name;
        int want = n_types == 0;
        for (int i = 0; i < n_types; i++) want |= !strcmp(types[i], name);
        if (!want) continue;
        for (size_t si = 0; si < n_shapes; si++) {
            shape s = shapes[si];
            if (s.K % hearth_dtype_get(t)->block) continue;
            size_t rb = hearth_dtype_row_bytes(t, s.K), wbytes = rb * (size_t)s.N;
            int cold = !strcmp(s.what, "cold"), copies = cold ? (int)((COLD_BYTES + wbytes - 1) / wbytes) : 1;
            unsigned char *w = xalloc(wbytes * (size_t)copies);
            float *row = xalloc((size_t)s.K * 4);
            for (int n = 0; n < s.N; n++) {
                for (int k = 0; k < s.K; k++) row[k] = frand() * 0.1f;
                hearth_cpu_quantize_row(t, row, w + rb * (size_t)n, s.K);
            }
            int layout = HEARTH_LAYOUT_STORED;
            if (!stored && hearth_cpu_panel_wanted(t, s.N)) { /* as the model lays them at load */
                unsigned char *p = xalloc(wbytes);
                hearth_cpu_panel_pack(p, w, t, s.K, s.N);
                memcpy(w, p, wbytes);
                free(p);
                layout = HEARTH_LAYOUT_PANEL8;
            }
            for (int c = 1; c < copies; c++) memcpy(w + wbytes * (size_t)c, w, wbytes);
            float *x = xalloc((size_t)s.T * s.K * 4), *y = xalloc((size_t)s.T * s.N * 4);
            for (size_t i = 0; i < (size_t)s.T * s.K; i++) x[i] = frand();
            void *scratch = xalloc(hearth_cpu_matmul_scratch_bytes(t, s.T, s.K) + 64);
            mm_call m = {pool, y, x, s.T, s.K, s.N, w, t, layout, scratch, wbytes, copies, 0};
            double per = best_time(mm_run, &m, secs);
            double gbs = (double)wbytes / per / 1e9, gflops = 2.0 * s.T * s.K * s.N / per / 1e9;
            printf("%-5s%c %-7s %4d %5d %5d %10.1f %8.1f %9.1f", name, layout ? '*' : ' ', s.what, s.T, s.K, s.N, per * 1e6, gbs, gflops);
            if (s.T == 1) { /* decode: against reading the same bytes */
                bw_call b = {pool, w, wbytes, copies, 0};
                double rd = (double)wbytes / best_time(bw_run, &b, secs) / 1e9;
                printf(" %9.1f %5.0f%%", rd, 100 * gbs / rd);
            }
            printf("\n");
            free(w), free(row), free(x), free(y), free(scratch);
        }
    }
    hearth_pool_free(pool);
    return 0;
}
