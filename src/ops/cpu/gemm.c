/* gemm.c - hearth_cpu_gemm_nn (gemm.h). A task takes column tiles of B (48
 * floats wide on AVX-512, 24 on AVX2); a tile's rows go in blocks of KB,
 * each packed contiguous (so its rows are not a page apart) and kept in L1
 * while every group of up to 8 tokens of x runs over it with 24
 * accumulators. */
#include "ops/cpu/gemm.h"

#include "ops/cpu/matmul_impl.h"

#include <immintrin.h>
#include <string.h>

enum { KB = 128, TT = 8, W512 = 48, W256 = 24 };

#define ROWS_SWITCH(fn, rows, ...)                                                                                     \
    switch (rows) {                                                                                                    \
    case 8: fn(__VA_ARGS__, 8); break;                                                                                 \
    case 7: fn(__VA_ARGS__, 7); break;                                                                                 \
    case 6: fn(__VA_ARGS__, 6); break;                                                                                 \
    case 5: fn(__VA_ARGS__, 5); break;                                                                                 \
    case 4: fn(__VA_ARGS__, 4); break;                                                                                 \
    case 3: fn(__VA_ARGS__, 3); break;                                                                                 \
    case 2: fn(__VA_ARGS__, 2); break;                                                                                 \
    default: fn(__VA_ARGS__, 1); break;                                                                                \
    }

/* rows tokens of y[., n0 .. n0 + w) (+)= x[., k0 .. k0 + nk) P, P the packed
 * panel [nk][W512] (zeros past w). */
__attribute__((target("avx512f"), always_inline)) static inline void
tile512(float *y, const float *x, const float *p, int nk, int K, int N, int w, int acc, const int rows) {
    const __mmask16 m[3] = {w >= 16 ? 0xffff : (__mmask16)((1u << (w > 0 ? w : 0)) - 1),
                            w >= 32 ? 0xffff : w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : 0,
                            w >= 48 ? 0xffff : w > 32 ? (__mmask16)((1u << (w - 32)) - 1) : 0};
    __m512 c[TT][3];
    _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++)
        _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++)
            c[r][v] = acc ? _mm512_maskz_loadu_ps(m[v], y + (size_t)r * N + 16 * v) : _mm512_setzero_ps();
    for (int k = 0; k < nk; k++) {
        const float *pk = p + (size_t)k * W512;
        const __m512 b0 = _mm512_loadu_ps(pk), b1 = _mm512_loadu_ps(pk + 16), b2 = _mm512_loadu_ps(pk + 32);
        _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++) {
            const __m512 a = _mm512_set1_ps(x[(size_t)r * K + k]);
            c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
            c[r][2] = _mm512_fmadd_ps(a, b2, c[r][2]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++)
        _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++)
            _mm512_mask_storeu_ps(y + (size_t)r * N + 16 * v, m[v], c[r][v]);
}

__attribute__((target("avx2,fma"), always_inline)) static inline void
tile256(float *y, const float *x, const float *p, int nk, int K, int N, int w, int acc, const int rows) {
    float keep[TT][W256]; /* a ragged tile goes through a full-width copy */
    float *yy = w < W256 ? &keep[0][0] : y;
    const int ld = w < W256 ? W256 : N;
    if (w < W256)
        _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++)
            for (int n = 0; n < W256; n++) keep[r][n] = acc && n < w ? y[(size_t)r * N + n] : 0.0f;
    __m256 c[TT][3];
    _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++)
        _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++)
            c[r][v] = acc || w < W256 ? _mm256_loadu_ps(yy + (size_t)r * ld + 8 * v) : _mm256_setzero_ps();
    for (int k = 0; k < nk; k++) {
        const float *pk = p + (size_t)k * W256;
        const __m256 b0 = _mm256_loadu_ps(pk), b1 = _mm256_loadu_ps(pk + 8), b2 = _mm256_loadu_ps(pk + 16);
        _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++) {
            const __m256 a = _mm256_set1_ps(x[(size_t)r * K + k]);
            c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
            c[r][2] = _mm256_fmadd_ps(a, b2, c[r][2]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++)
        _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++) _mm256_storeu_ps(yy + (size_t)r * ld + 8 * v, c[r][v]);
    if (w < W256)
        for (int r = 0; r < rows; r++) memcpy(y + (size_t)r * N, keep[r], sizeof(float) * (size_t)w);
}

__attribute__((target("avx512f"))) static void tile_avx512(float *y, const float *x, const float *p, int rows, int nk,
                                                            int K, int N, int w, int acc) {
    ROWS_SWITCH(tile512, rows, y, x, p, nk, K, N, w, acc)
}

__attribute__((target("avx2,fma"))) static void tile_avx2(float *y, const float *x, const float *p, int rows, int nk,
                                                          int K, int N, int w, int acc) {
    ROWS_SWITCH(tile256, rows, y, x, p, nk, K, N, w, acc)
}

static void tile_scalar(float *y, const float *x, const float *p, int rows, int nk, int K, int N, int w, int acc) {
    _Pragma("GCC unroll 8") for (int r = 0; r < rows; r++)
        for (int n = 0; n < w; n++) {
            float s = acc ? y[(size_t)r * N + n] : 0.0f;
            for (int k = 0; k < nk; k++) s += x[(size_t)r * K + k] * p[(size_t)k * W256 + n];
            y[(size_t)r * N + n] = s;
        }
}

typedef struct {
    float *y;
    const float *x, *b;
    int T, K, N, acc, width, n_tiles;
    void (*tile)(float *y, const float *x, const float *p, int rows, int nk, int K, int N, int w, int acc);
} gemm_job;

static void gemm_task(void *ctx, int task, int n_tasks) {
    const gemm_job *j = ctx;
    float pk[KB * W512]; /* 24 KB: a packed block of a column tile */
    const int a = (int)((long long)j->n_tiles * task / n_tasks),
              z = (int)((long long)j->n_tiles * (task + 1) / n_tasks);
    for (int tile = a; tile < z; tile++) {
        const int n0 = tile * j->width, w = j->N - n0 < j->width ? j->N - n0 : j->width;
        for (int k0 = 0; k0 < j->K; k0 += KB) {
            const int nk = j->K - k0 < KB ? j->K - k0 : KB;
            for (int k = 0; k < nk; k++) {
                float *d = pk + (size_t)k * j->width;
                memcpy(d, j->b + (size_t)(k0 + k) * j->N + n0, sizeof(float) * (size_t)w);
                memset(d + w, 0, sizeof(float) * (size_t)(j->width - w));
            }
            for (int t0 = 0; t0 < j->T; t0 += TT)
                j->tile(j->y + (size_t)t0 * j->N + n0, j->x + (size_t)t0 * j->K + k0, pk,
                        j->T - t0 < TT ? j->T - t0 : TT, nk, j->K, j->N, w, j->acc || k0 > 0);
        }
    }
}

void hearth_cpu_gemm_nn(hearth_pool *pool, float *y, const float *x, int T, const float *b, int K, int N, int acc) {
    if (T <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!acc) memset(y, 0, sizeof(float) * (size_t)T * N);
        return;
    }
    const int isa = hearth_cpu_isa_current(); /* the matmuls' (hearth_cpu_isa_force sets it in tests) */
    gemm_job j = {y, x, b, T, K, N, acc, isa == HEARTH_CPU_ISA_AVX512 ? W512 : W256, 0,
                  isa == HEARTH_CPU_ISA_AVX512 ? tile_avx512 : isa == HEARTH_CPU_ISA_AVX2 ? tile_avx2 : tile_scalar};
    j.n_tiles = (N + j.width - 1) / j.width;
    const int threads = pool ? hearth_pool_size(pool) : 1, tasks = j.n_tiles < 2 * threads ? j.n_tiles : 2 * threads;
    if (tasks <= 1 || (long long)T * K * N < 65536) gemm_task(&j, 0, 1);
    else hearth_pool_run(pool, gemm_task, &j, tasks);
}
