/* bench_overlap.c - how much of a decode step's attention can hide behind its
 * GEMMs on the H200 (the NanoFlow question, issue 6), measured before any
 * engine change: a Llama-3.1-8B-shaped layer's bf16 GEMMs (q/k/v 6144 x
 * 4096, o 4096 x 4096, gate/up 28672 x 4096, down 4096 x 14336: hearth's
 * matmul op, so cuBLAS at these row counts) and its decode attention (hearth's
 * attention op over a paged e4m3 or f16 cache, each row its own sequence at
 * --ctx positions), each in its own context, so on its own CUDA stream.
 *
 *   bench_overlap [--rows 256] [--ctx 1500] [--kv fp8|f16] [--layers 8]
 *                 [--sms 0,112,96] [--green 96,104,112] [--reps 7]
 *
 * For R = --rows (one half of a step of 2R rows) it times, as wall time of
 * --layers layers issued back to back and waited for (median of --reps, after
 * a warm-up that captures the CUDA graphs):
 *   G(2R), A(2R)     the whole step's GEMMs, then its attention: today's step;
 *   G(R), A(R)       one half's GEMMs, one half's attention, each alone;
 *   G(R) | A(R)      both halves at once on two streams, the GEMMs' cuBLAS
 *                    held to each SM target of --sms (0: no target);
 *   green N          the same with the chip split (green contexts): the GEMMs'
 *                    stream on N multiprocessors, the attention's on the rest,
 *                    for each N of --green (each side also timed alone there).
 * A step split in two halves that alternate (one half's attention beside
 * the other's GEMMs, NanoFlow's schedule) takes about 2 x (G(R) | A(R)),
 * against G(2R) + A(2R) serialised. A measurement, never a test. */
#include "core/fp8.h"
#include "core/half.h"
#include "ops/cuda/ops_cuda.h"
#include "bench_rand.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { DIM = 4096, FFN = 14336, NH = 32, NKV = 8, HD = 128, BS = 16, MAX_SMS = 8, MAX_REPS = 64 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One context: a layer's GEMM weights and activations for `rows` rows, and
 * the attention's cache and tables for `rows` sequences at ctx positions. */
typedef struct {
    hearth_cuda_ctx *c;
    int rows;
    hearth_weight w[4]; /* q/k/v, o, gate/up, down */
    float *x, *qkv, *att, *h, *y; /* y: the q/k/v, o and gate/up outputs side by side */
    void *k, *v;
    int32_t *table, *seq, *pos;
    hearth_kv_view view;
    void *kp[1], *vp[1];
} side;

static const int W_N[4] = {NH * HD + 2 * NKV * HD, DIM, 2 * FFN, DIM}, W_K[4] = {DIM, DIM, DIM, FFN};

static void *upload_rand_bf16(side *s, size_t n) {
    const hearth_ops *o = &hearth_cuda_ops;
    uint16_t *h = malloc(2 * n);
    if (!h) return NULL;
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(((rnd() & 1) << 15) | ((118 + rnd() % 8) << 7) | (rnd() & 0x7f));
    void *d = o->alloc(s->c, 2 * n);
    if (d) o->upload(s->c, d, h, 2 * n);
    hearth_cuda_ctx_sync(s->c);
    free(h);
    return d;
}

static float *upload_rand_f32(side *s, size_t n, float amp) {
    const hearth_ops *o = &hearth_cuda_ops;
    float *h = malloc(4 * n);
    if (!h) return NULL;
    for (size_t i = 0; i < n; i++) h[i] = amp * frand();
    float *d = o->alloc(s->c, 4 * n);
    if (d) o->upload(s->c, d, h, 4 * n);
    hearth_cuda_ctx_sync(s->c);
    free(h);
    return d;
}

static int side_new(side *s, int rows, int ctx, int fp8) {
    hearth_err err = {0};
    memset(s, 0, sizeof *s);
    s->rows = rows;
    if (hearth_cuda_ctx_new(&s->c, 0, rows, 2 * FFN, ctx + 1, &err) != HEARTH_OK) {
        fprintf(stderr, "bench_overlap: %s\n", err.msg);
        return 1;
    }
    const hearth_ops *o = &hearth_cuda_ops;
    for (int i = 0; i < 4; i++) {
        void *d = upload_rand_bf16(s, (size_t)W_N[i] * W_K[i]);
        if (!d) return 1;
        s->w[i] = (hearth_weight){d, HEARTH_DT_BF16, W_N[i], W_K[i], 2 * (size_t)W_K[i], HEARTH_LAYOUT_STORED};
        if (o->prepare_weight && o->prepare_weight(s->c, &s->w[i], &err) != HEARTH_OK) {
            fprintf(stderr, "bench_overlap: %s\n", err.msg);
            return 1;
        }
    }
    s->x = upload_rand_f32(s, (size_t)rows * DIM, 1.0f);
    s->att = upload_rand_f32(s, (size_t)rows * NH * HD, 1.0f);
    s->h = upload_rand_f32(s, (size_t)rows * 2 * FFN, 1.0f);
    s->qkv = upload_rand_f32(s, (size_t)rows * W_N[0], 2.0f); /* q read by the attention */
    s->y = o->alloc(s->c, 4 * (size_t)rows * (W_N[0] + W_N[1] + W_N[2]));
    /* rows sequences of ceil((ctx + 1) / BS) blocks each, in shuffled order */
    const int kv_dim = NKV * HD, mbps = (ctx + 1 + BS - 1) / BS, nb = rows * mbps, esz = fp8 ? 1 : 2;
    const size_t kv_elems = (size_t)nb * BS * kv_dim;
    uint8_t *hk = malloc(kv_elems * esz);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)nb), *hseq = malloc(4 * (size_t)rows),
            *hpos = malloc(4 * (size_t)rows);
    if (!hk || !table || !hseq || !hpos || !s->x || !s->att || !s->h || !s->qkv || !s->y) return 1;
    for (size_t i = 0; i < kv_elems; i++) {
        if (fp8) hk[i] = hearth_f32_to_e4m3(frand());
        else ((uint16_t *)hk)[i] = hearth_f32_to_f16(frand());
    }
    for (int i = 0; i < nb; i++) table[i] = i;
    for (int i = nb - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), t = table[i];
        table[i] = table[j], table[j] = t;
    }
    for (int t = 0; t < rows; t++) hseq[t] = t, hpos[t] = ctx;
    s->k = o->alloc(s->c, kv_elems * esz);
    s->v = o->alloc(s->c, kv_elems * esz);
    s->table = o->alloc(s->c, sizeof(int32_t) * (size_t)nb);
    s->seq = o->alloc(s->c, 4 * (size_t)rows);
    s->pos = o->alloc(s->c, 4 * (size_t)rows);
    if (!s->k || !s->v || !s->table || !s->seq || !s->pos) {
        fprintf(stderr, "bench_overlap: out of device memory (%d rows at %d positions)\n", rows, ctx);
        return 1;
    }
    o->upload(s->c, s->k, hk, kv_elems * esz);
    o->upload(s->c, s->v, hk, kv_elems * esz); /* V: the same random codes */
    o->upload(s->c, s->table, table, sizeof(int32_t) * (size_t)nb);
    o->upload(s->c, s->seq, hseq, 4 * (size_t)rows);
    o->upload(s->c, s->pos, hpos, 4 * (size_t)rows);
    hearth_cuda_ctx_sync(s->c);
    free(hk), free(table), free(hseq), free(hpos);
    s->kp[0] = s->k, s->vp[0] = s->v;
    s->view = (hearth_kv_view){s->kp, s->vp, s->table, BS, mbps, kv_dim, nb, fp8 ? HEARTH_DT_E4M3 : HEARTH_DT_F16,
                               0, ctx + 1, 0};
    return 0;
}

static void side_free(side *s) {
    if (!s->c) return;
    const hearth_ops *o = &hearth_cuda_ops;
    for (int i = 0; i < 4; i++) o->free(s->c, (void *)s->w[i].data);
    void *p[] = {s->x, s->qkv, s->att, s->h, s->y, s->k, s->v, s->table, s->seq, s->pos};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) o->free(s->c, p[i]);
    hearth_cuda_ctx_free(s->c);
}

/* Record a layer's GEMMs (what = 1), its attention (2), or both (3), `layers` times. */
static void record(side *s, int what, int layers) {
    const hearth_ops *o = &hearth_cuda_ops;
    for (int l = 0; l < layers; l++) {
        if (what & 1) {
            float *yo = s->y + (size_t)s->rows * W_N[0], *ygu = yo + (size_t)s->rows * W_N[1];
            o->matmul(s->c, s->y, s->x, s->rows, &s->w[0]);
            o->matmul(s->c, yo, s->att, s->rows, &s->w[1]);
            o->matmul(s->c, ygu, s->x, s->rows, &s->w[2]);
            o->matmul(s->c, s->x, s->h, s->rows, &s->w[3]);
        }
        if (what & 2)
            o->attention(s->c, s->att, s->qkv, s->rows, &s->view, 0, s->seq, s->pos, NH, NKV, HD,
                         1.0f / sqrtf((float)HD), 0);
    }
}

/* Median wall ms of: a's `wa` and (when b) b's `wb`, issued on their own
 * streams and both waited for. */
static double timed(side *a, int wa, side *b, int wb, int layers, int reps) {
    double ms[MAX_REPS];
    for (int r = 0; r < 3; r++) { /* warm-up: the second sight of a sequence captures its graph */
        record(a, wa, layers);
        hearth_cuda_ctx_submit(a->c);
        if (b) record(b, wb, layers), hearth_cuda_ctx_submit(b->c);
        hearth_cuda_ctx_sync(a->c);
        if (b) hearth_cuda_ctx_sync(b->c);
    }
    for (int r = 0; r < reps; r++) {
        record(a, wa, layers);
        if (b) record(b, wb, layers);
        double t0 = now_ms();
        hearth_cuda_ctx_submit(a->c);
        if (b) hearth_cuda_ctx_submit(b->c);
        hearth_cuda_ctx_sync(a->c);
        if (b) hearth_cuda_ctx_sync(b->c);
        ms[r] = now_ms() - t0;
    }
    qsort(ms, (size_t)reps, sizeof ms[0], cmp_d);
    return ms[reps / 2];
}

static int check(side *s, const char *what) {
    hearth_err err = {0};
    if (hearth_cuda_ctx_error(s->c, &err) == HEARTH_OK) return 0;
    fprintf(stderr, "bench_overlap: %s: %s\n", what, err.msg);
    return 1;
}

/* A comma-separated list of at most MAX_SMS numbers into v; how many. */
static int int_list(const char *arg, int *v) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", arg);
    int n = 0;
    for (char *t = strtok(buf, ","); t && n < MAX_SMS; t = strtok(NULL, ",")) v[n++] = atoi(t);
    return n;
}

int main(int argc, char **argv) {
    int rows = 256, ctx = 1500, fp8 = 1, layers = 8, reps = 7, sms[MAX_SMS] = {0, 112, 96}, n_sms = 3;
    int green[MAX_SMS], n_green = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "fp8") || !strcmp(argv[i + 1], "f16")))
            fp8 = !strcmp(argv[++i], "fp8");
        else if (!strcmp(argv[i], "--sms") && i + 1 < argc) n_sms = int_list(argv[++i], sms);
        else if (!strcmp(argv[i], "--green") && i + 1 < argc) n_green = int_list(argv[++i], green);
        else {
            fprintf(stderr, "usage: bench_overlap [--rows R] [--ctx P] [--kv fp8|f16] [--layers L] [--sms 0,112,96] "
                            "[--green 96,104] [--reps N]\n");
            return 2;
        }
    }
    if (rows < 9 || ctx < 1 || layers < 1 || reps < 1 || reps > MAX_REPS || n_sms < 1) {
        fprintf(stderr, "bench_overlap: need --rows >= 9 (the batched kernels), --ctx >= 1, --layers >= 1, "
                        "1 <= --reps <= %d\n", MAX_REPS);
        return 2;
    }
    side full, ga, at;
    if (side_new(&full, 2 * rows, ctx, fp8) || side_new(&ga, rows, ctx, fp8) || side_new(&at, rows, ctx, fp8))
        return 1;
    printf("8B-shaped bf16 layer GEMMs and %s decode attention at %d positions, %d layers a run, median of %d (ms)\n",
           fp8 ? "e4m3" : "f16", ctx, layers, reps);
    const double g2 = timed(&full, 1, NULL, 0, layers, reps), a2 = timed(&full, 2, NULL, 0, layers, reps);
    const double ga1 = timed(&ga, 1, NULL, 0, layers, reps), at1 = timed(&at, 2, NULL, 0, layers, reps);
    if (check(&full, "full") || check(&ga, "gemm") || check(&at, "attention")) return 1;
    printf("step of %d rows, serialised: G %.3f + A %.3f = %.3f\n", 2 * rows, g2, a2, g2 + a2);
    printf("half of %d rows alone:       G %.3f, A %.3f (2 x (G + A) = %.3f)\n", rows, ga1, at1, 2 * (ga1 + at1));
    for (int i = 0; i < n_sms; i++) {
        hearth_cuda_ctx_set_gemm_sms(ga.c, sms[i]);
        const double g = timed(&ga, 1, NULL, 0, layers, reps), both = timed(&ga, 1, &at, 2, layers, reps);
        if (check(&ga, "gemm") || check(&at, "attention")) return 1;
        printf("GEMM SM target %3d: G alone %.3f, G | A %.3f -> two halves alternating 2 x %.3f = %.3f (%.2fx the "
               "serialised step)\n",
               sms[i], g, both, both, 2 * both, (g2 + a2) / (2 * both));
        fflush(stdout);
    }
    hearth_cuda_ctx_set_gemm_sms(ga.c, 0);
    for (int i = 0; i < n_green; i++) {
        const int gs = hearth_cuda_ctx_set_sm_share(ga.c, green[i], 0), as = hearth_cuda_ctx_set_sm_share(at.c, green[i], 1);
        if (gs < 0 || as < 0) return 1;
        const double g = timed(&ga, 1, NULL, 0, layers, reps), a = timed(&at, 2, NULL, 0, layers, reps);
        const double both = timed(&ga, 1, &at, 2, layers, reps);
        if (check(&ga, "gemm") || check(&at, "attention")) return 1;
        printf("green %3d / %3d SMs: G alone %.3f, A alone %.3f, G | A %.3f -> two halves alternating 2 x %.3f = "
               "%.3f (%.2fx the serialised step)\n",
               gs, as, g, a, both, both, 2 * both, (g2 + a2) / (2 * both));
        fflush(stdout);
    }
    side_free(&at), side_free(&ga), side_free(&full);
    return 0;
}
