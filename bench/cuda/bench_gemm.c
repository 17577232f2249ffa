/* bench_gemm.c - the cuBLAS GEMMs of a Llama-3.1-8B-shaped layer at the
 * row counts of a prefill chunk or a batched decode step, as hearth's matmul
 * op issues them (matmul.cu: cublasGemmEx, W^T x with bf16 in, f32 out and
 * accumulation), against what else cuBLAS offers for the same product:
 *
 *   default   cublasGemmEx(CUBLAS_GEMM_DEFAULT), hearth's call today;
 *   lt best   the fastest of cublasLt's heuristic candidates (--algos of
 *             them), each timed, and that candidate's rank in the list;
 *   pair      two matrices of one shape that read the same x (k and v,
 *             gate and up) as one strided-batched GEMM of two;
 *   bf16 out  the default call writing bf16 instead of f32 (what a model
 *             keeping its activations in bf16 would pay).
 * (cublasGemmGroupedBatchedEx, tried for q, k and v as three groups, answers
 * CUBLAS_STATUS_NOT_SUPPORTED for bf16 in, f32 out on cuBLAS 13.)
 *
 *   bench_gemm [--rows 512,2048] [--reps 20] [--algos 16] [--copies 8] [--random]
 *
 * Each timing is the median over --reps of the mean time of --copies
 * launches, each on its own copy of the weights (so that, as in a forward,
 * the weights come from DRAM rather than from the L2 the previous launch
 * filled). TFLOP/s count 2 x rows x N x K. The matrices hold one constant
 * unless --random fills them with random bf16 values (weights ~U(-0.03,
 * 0.03), x ~U(-1, 1)), as a model's are: a sustained GEMM on the H200 runs
 * into the 700 W cap, and random bits draw more power than a constant
 * (notes/batching.md, session 26). A measurement, never a test. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ROWS = 8, MAX_ALGOS = 32, MAX_REPS = 64 };

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "bench_gemm: %s: %s\n", #x, cudaGetErrorString(e_));                                   \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)
#define CB(x)                                                                                                      \
    do {                                                                                                           \
        int s_ = (int)(x);                                                                                         \
        if (s_ != 0) {                                                                                             \
            fprintf(stderr, "bench_gemm: %s: status %d\n", #x, s_);                                                \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

typedef struct {
    const char *name;
    int n, k;
} shape;

static const shape SHAPES[] = {
    {"q", 4096, 4096},      {"k", 1024, 4096},     {"v", 1024, 4096},        {"o", 4096, 4096},
    {"gate", 14336, 4096},  {"up", 14336, 4096},   {"down", 4096, 14336},    {"qkv fused", 6144, 4096},
    {"gate+up fused", 28672, 4096},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0], N_LAYER = 7 };

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cudaStream_t st;
    cudaEvent_t e0, e1;
    void *ws;
    size_t ws_bytes;
    int reps, copies;
    uint16_t **w; /* copies of the largest weight (bf16) */
    uint16_t *x;  /* rows x 14336 bf16 */
    float *y;     /* 2 x rows x 28672 f32 */
} bench;

typedef void (*launch_fn)(bench *b, const void *ctx, int copy);

/* median over reps of the mean of `copies` launches, in us */
static float time_us(bench *b, launch_fn f, const void *ctx) {
    float t[MAX_REPS];
    for (int c = 0; c < b->copies; c++) f(b, ctx, c); /* warm-up */
    for (int r = 0; r < b->reps; r++) {
        CK(cudaEventRecord(b->e0, b->st));
        for (int c = 0; c < b->copies; c++) f(b, ctx, c);
        CK(cudaEventRecord(b->e1, b->st));
        CK(cudaEventSynchronize(b->e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, b->e0, b->e1));
        t[r] = 1e3f * ms / (float)b->copies;
    }
    qsort(t, (size_t)b->reps, sizeof *t, cmp_f);
    return t[b->reps / 2];
}

typedef struct {
    int rows, n, k;
} gemm_ctx;

static void run_default(bench *b, const void *p, int copy) {
    const gemm_ctx *g = p;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->rows, g->k, &one, b->w[copy], CUDA_R_16BF, g->k,
                    b->x, CUDA_R_16BF, g->k, &zero, b->y, CUDA_R_32F, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void run_bf16_out(bench *b, const void *p, int copy) {
    const gemm_ctx *g = p;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->rows, g->k, &one, b->w[copy], CUDA_R_16BF, g->k,
                    b->x, CUDA_R_16BF, g->k, &zero, b->y, CUDA_R_16BF, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* n bf16 values uniform in (-a, a), from a fixed seed */
static uint16_t *random_bf16(size_t n, float a, uint64_t seed) {
    uint16_t *h = malloc(n * 2);
    if (!h) exit(1);
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        float f = a * ((float)(x >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)(u >> 16);
    }
    return h;
}

/* two products of one shape, weights n x k apart, outputs rows x n apart */
static void run_pair(bench *b, const void *p, int copy) {
    const gemm_ctx *g = p;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmStridedBatchedEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->rows, g->k, &one, b->w[copy],
                                  CUDA_R_16BF, g->k, (long long)g->n * g->k, b->x, CUDA_R_16BF, g->k, 0, &zero, b->y,
                                  CUDA_R_32F, g->n, (long long)g->rows * g->n, 2, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

typedef struct {
    const gemm_ctx *g;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    const cublasLtMatmulAlgo_t *algo;
} lt_ctx;

static void run_lt(bench *b, const void *p, int copy) {
    const lt_ctx *l = p;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasLtMatmul(b->lt, l->op, &one, b->w[copy], l->la, b->x, l->lb, &zero, b->y, l->lc, b->y, l->lc, l->algo,
                      b->ws, b->ws_bytes, b->st));
}

/* the best of cublasLt's candidates: its time, its rank (0 = the heuristic's first) */
static float lt_best(bench *b, const gemm_ctx *g, int n_algos, int *rank, int *n_found) {
    lt_ctx l = {.g = g};
    CB(cublasLtMatmulDescCreate(&l.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CB(cublasLtMatrixLayoutCreate(&l.la, CUDA_R_16BF, g->k, g->n, g->k));
    CB(cublasLtMatrixLayoutCreate(&l.lb, CUDA_R_16BF, g->k, g->rows, g->k));
    CB(cublasLtMatrixLayoutCreate(&l.lc, CUDA_R_32F, g->n, g->rows, g->n));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &b->ws_bytes,
                                            sizeof b->ws_bytes));
    cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(b->lt, l.op, l.la, l.lb, l.lc, l.lc, pref, n_algos, res, &found));
    float best = 1e30f;
    *rank = -1;
    for (int i = 0; i < found; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        l.algo = &res[i].algo;
        float t = time_us(b, run_lt, &l);
        if (t < best) best = t, *rank = i;
    }
    *n_found = found;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(l.la);
    cublasLtMatrixLayoutDestroy(l.lb);
    cublasLtMatrixLayoutDestroy(l.lc);
    cublasLtMatmulDescDestroy(l.op);
    return best;
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

int main(int argc, char **argv) {
    int rows[MAX_ROWS] = {512, 2048}, n_rows = 2, n_algos = 16, random = 0;
    bench b = {.reps = 20, .copies = 8, .ws_bytes = 64u << 20};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) n_rows = parse_list(argv[++i], rows, MAX_ROWS);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) b.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--algos") && i + 1 < argc) n_algos = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--copies") && i + 1 < argc) b.copies = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--random")) random = 1;
        else {
            fprintf(stderr, "usage: bench_gemm [--rows 512,2048] [--reps 20] [--algos 16] [--copies 8] [--random]\n");
            return 2;
        }
    }
    if (b.reps < 1 || b.reps > MAX_REPS || n_algos < 1 || n_algos > MAX_ALGOS || b.copies < 1 || b.copies > 64 ||
        n_rows < 1) {
        fprintf(stderr, "bench_gemm: --reps 1..%d, --algos 1..%d, --copies 1..64\n", MAX_REPS, MAX_ALGOS);
        return 2;
    }
    int max_rows = 0;
    for (int i = 0; i < n_rows; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;
    size_t w_elems = (size_t)28672 * 4096;
    b.w = calloc((size_t)b.copies, sizeof *b.w);
    if (!b.w) return 1;
    for (int c = 0; c < b.copies; c++) {
        CK(cudaMalloc((void **)&b.w[c], w_elems * 2));
        CK(cudaMemset(b.w[c], 0x3c, w_elems * 2)); /* bf16 ~0.0115: finite products */
    }
    CK(cudaMalloc((void **)&b.x, (size_t)max_rows * 14336 * 2));
    CK(cudaMemset(b.x, 0x3c, (size_t)max_rows * 14336 * 2));
    if (random) {
        uint16_t *h = random_bf16(w_elems, 0.03f, 1);
        for (int c = 0; c < b.copies; c++) CK(cudaMemcpy(b.w[c], h, w_elems * 2, cudaMemcpyHostToDevice));
        free(h);
        h = random_bf16((size_t)max_rows * 14336, 1.0f, 2);
        CK(cudaMemcpy(b.x, h, (size_t)max_rows * 14336 * 2, cudaMemcpyHostToDevice));
        free(h);
    }
    CK(cudaMalloc((void **)&b.y, (size_t)2 * max_rows * 28672 * 4));
    CK(cudaMalloc(&b.ws, b.ws_bytes));
    CK(cudaStreamCreate(&b.st));
    CK(cudaEventCreate(&b.e0));
    CK(cudaEventCreate(&b.e1));
    CB(cublasCreate(&b.blas));
    CB(cublasSetStream(b.blas, b.st));
    CB(cublasSetWorkspace(b.blas, b.ws, b.ws_bytes));
    CB(cublasLtCreate(&b.lt));

    for (int ri = 0; ri < n_rows; ri++) {
        int R = rows[ri];
        printf("== %d rows (us, TFLOP/s; %d copies of the weights, median of %d; %s values)\n", R, b.copies, b.reps,
               random ? "random" : "constant");
        printf("%-14s %14s %14s %6s %14s %14s\n", "matrix", "default", "lt best", "rank", "pair (2x)", "bf16 out");
        float sum_def = 0, sum_best = 0;
        for (int s = 0; s < N_SHAPES; s++) {
            gemm_ctx g = {R, SHAPES[s].n, SHAPES[s].k};
            double flop = 2.0 * R * g.n * g.k;
            float td = time_us(&b, run_default, &g);
            int rank, found;
            float tl = lt_best(&b, &g, n_algos, &rank, &found);
            char pair[32] = "";
            float tp = 0;
            if (!strcmp(SHAPES[s].name, "k") || !strcmp(SHAPES[s].name, "gate")) {
                tp = time_us(&b, run_pair, &g);
                snprintf(pair, sizeof pair, "%7.1f %5.0f", tp, 2 * flop / tp * 1e-6);
            }
            float th = time_us(&b, run_bf16_out, &g);
            printf("%-14s %7.1f %5.0f %7.1f %5.0f %3d/%-2d %14s %7.1f %5.0f\n", SHAPES[s].name, td, flop / td * 1e-6,
                   tl, flop / tl * 1e-6, rank, found, pair, th, flop / th * 1e-6);
            if (s < N_LAYER) sum_def += td, sum_best += tl < td ? tl : td;
        }
        printf("layer (q,k,v,o,gate,up,down): default %.1f us, best of each %.1f us\n", sum_def, sum_best);
    }
    return 0;
}
