/* bench_matmul.c - times hearth_cpu_matmul for every weight type at decode
 * (T=1) and prefill (T=128) shapes, and prints GB/s of weights streamed and
 * GFLOP/s. The peer measured in the same run is the machine's own read
 * bandwidth (a streaming sum over a buffer as large as the weights), so
 * decode rows also show the fraction of that ceiling reached. The machine
 * may be shared: each figure is the best of many short batches (the time a
 * call takes when nothing else runs), not the mean.
 *
 *   build/bench_matmul [-t threads] [-i scalar|avx2|avx512] [-s seconds] [type...]
 *
 * Prints and measures; passes or fails nothing. */
#include "core/clock.h"
#include "core/pool.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/quant.h"

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

/* Read bandwidth over n bytes with the pool's threads (8-byte loads summed,
 * which the compiler vectorizes): the decode ceiling on this machine. */
typedef struct { const uint64_t *p; size_t n; uint64_t out[64]; } bw_ctx;
static void bw_task(void *ctx, int task, int n_tasks) {
    bw_ctx *c = ctx;
    size_t a = c->n * (size_t)task / (size_t)n_tasks, b = c->n * (size_t)(task + 1) / (size_t)n_tasks;
    uint64_t s = 0;
    for (size_t i = a; i < b; i++) s += c->p[i];
    c->out[task & 63] = s;
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

typedef struct { hearth_pool *pool; bw_ctx c; } bw_call;
static void bw_run(void *ctx) {
    bw_call *b = ctx;
    hearth_pool_run(b->pool, bw_task, &b->c, hearth_pool_size(b->pool));
}

static double read_bw(hearth_pool *pool, size_t bytes, double secs) {
    bw_call b = {.pool = pool, .c = {.n = bytes / 8}};
    uint64_t *buf = xalloc(bytes);
    memset(buf, 1, bytes);
    b.c.p = buf;
    double t = best_time(bw_run, &b, secs);
    free(buf);
    return (double)bytes / t / 1e9;
}

typedef struct {
    hearth_pool *pool;
    float *y;
    const float *x;
    int T, K, N;
    const void *w;
    hearth_dtype t;
    void *scratch;
} mm_call;
static void mm_run(void *ctx) {
    mm_call *m = ctx;
    hearth_cpu_matmul(m->pool, m->y, m->x, m->T, m->w, m->t, m->K, m->N, m->scratch);
}

typedef struct { int T, K, N; const char *what; } shape;

int main(int argc, char **argv) {
    int threads = 0;
    double secs = 0.3;
    const char *types[16];
    int n_types = 0;
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
        } else if (n_types < 16 && argv[i][0] != '-') {
            types[n_types++] = argv[i];
        } else {
            fprintf(stderr, "usage: %s [-t threads] [-i scalar|avx2|avx512] [-s seconds] [type...]\n", argv[0]);
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
    static const shape shapes[] = {
        {1, 576, 1536, "decode"}, {1, 4096, 4096, "decode"},
        {128, 576, 1536, "prefill"}, {128, 4096, 4096, "prefill"},
    };
    printf("isa %s, %d threads\n", hearth_cpu_isa_name(hearth_cpu_isa_current()), hearth_pool_size(pool));
    double bw_small = read_bw(pool, 1536 * 576 * 2, secs), bw_big = read_bw(pool, (size_t)64 << 20, secs);
    printf("read bandwidth: %.1f GB/s over 1.7 MB (cache), %.1f GB/s over 64 MB\n", bw_small, bw_big);
    printf("%-5s %-7s %4s %5s %5s %10s %8s %9s %7s\n", "type", "shape", "T", "K", "N", "us/call", "GB/s",
           "GFLOP/s", "of-bw");

    for (size_t ti = 0; ti < sizeof all / sizeof all[0]; ti++) {
        hearth_dtype t = all[ti];
        const char *name = hearth_dtype_get(t)->name;
        int want = n_types == 0;
        for (int i = 0; i < n_types; i++) want |= !strcmp(types[i], name);
        if (!want) continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            shape s = shapes[si];
            if (s.K % hearth_dtype_get(t)->block) continue;
            size_t rb = hearth_dtype_row_bytes(t, s.K), wbytes = rb * (size_t)s.N;
            unsigned char *w = xalloc(wbytes);
            float *row = xalloc((size_t)s.K * 4);
            for (int n = 0; n < s.N; n++) {
                for (int k = 0; k < s.K; k++) row[k] = frand() * 0.1f;
                hearth_cpu_quantize_row(t, row, w + rb * (size_t)n, s.K);
            }
            float *x = xalloc((size_t)s.T * s.K * 4), *y = xalloc((size_t)s.T * s.N * 4);
            for (size_t i = 0; i < (size_t)s.T * s.K; i++) x[i] = frand();
            void *scratch = xalloc(hearth_cpu_matmul_scratch_bytes(t, s.T, s.K) + 64);
            mm_call m = {pool, y, x, s.T, s.K, s.N, w, t, scratch};
            double per = best_time(mm_run, &m, secs);
            double gbs = (double)wbytes / per / 1e9, gflops = 2.0 * s.T * s.K * s.N / per / 1e9;
            double ceiling = wbytes > (4u << 20) ? bw_big : bw_small;
            printf("%-5s %-7s %4d %5d %5d %10.1f %8.1f %9.1f", name, s.what, s.T, s.K, s.N, per * 1e6, gbs, gflops);
            if (s.T == 1) printf(" %6.0f%%", 100 * gbs / ceiling);
            printf("\n");
            free(w), free(row), free(x), free(y), free(scratch);
        }
    }
    hearth_pool_free(pool);
    return 0;
}
