/* matmul.c - hearth_cpu_matmul: the ISA choice, the scratch layout, the
 * split of the work over the pool, and the plain C reference.
 *
 * A call runs in two pool passes: (1) the activations of all T tokens are
 * quantized/rounded once into scratch (tokens split over threads); (2) the
 * output rows are split into tiles of ROW_TILE rows and the tiles into tasks;
 * each task computes all T tokens of its rows, so every weight byte is read
 * by one thread, once per call (the kernels tile over T inside). Which thread
 * runs a task never changes a result (matmul.h).
 *
 * Kernels (matmul_avx512.c, matmul_avx2.c; matmul_scalar.c is the definition):
 *   q8_0/q4_0/q4_1, T < 3 (AVX-512; AVX2: T < 5): 16 rows at a time, one exact
 *     integer dot per row and block out of VPDPBUSD partials and a
 *     transpose-add tree (decode);
 *   q8_0/q4_0/q4_1, T >= 3 (AVX2: 5), and q4_K/q5_K/q6_K always: 16-row panels repacked so
 *     that a vector holds four codes of every row; broadcast activations give
 *     per-row dots directly (prefill; 8 tokens per pass over the panel);
 *   f32/f16/bf16: 4 rows x 6 tokens of 16-lane FMA chains.
 * Weights panel-laid at load (panel.h, on AVX2 and AVX-512) take each
 * table's panel kernels; AVX-512 decodes them with AVX2's.
 * bench/bench_matmul.c measures them (make bench). */
#include "ops/cpu/matmul.h"

#include "core/log.h"
#include "core/status.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/quant.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum {
    ROW_TILE = 16,         /* rows per scheduling unit (the widest kernel's row group) */
    TASKS_PER_THREAD = 4,  /* load balance vs per-task overhead */
    ACT_TASK_ELEMS = 8192, /* activation elements below which one task does them all */
};

int hearth_cpu_mm_index(hearth_dtype wt) {
    switch (wt) {
    case HEARTH_DT_F32: return MM_F32;
    case HEARTH_DT_F16: return MM_F16;
    case HEARTH_DT_BF16: return MM_BF16;
    case HEARTH_DT_Q4_0: return MM_Q4_0;
    case HEARTH_DT_Q4_1: return MM_Q4_1;
    case HEARTH_DT_Q8_0: return MM_Q8_0;
    case HEARTH_DT_Q5_0: return MM_Q5_0;
    case HEARTH_DT_Q5_1: return MM_Q5_1;
    case HEARTH_DT_IQ4_NL: return MM_IQ4_NL;
    case HEARTH_DT_IQ4_XS: return MM_IQ4_XS;
    case HEARTH_DT_Q2_K: return MM_Q2_K;
    case HEARTH_DT_Q3_K: return MM_Q3_K;
    case HEARTH_DT_Q4_K: return MM_Q4_K;
    case HEARTH_DT_Q5_K: return MM_Q5_K;
    case HEARTH_DT_Q6_K: return MM_Q6_K;
    default: return -1;
    }
}

int hearth_cpu_matmul_supports(hearth_dtype wt) { return hearth_cpu_mm_index(wt) >= 0; }

/* ---- ISA choice ---------------------------------------------------------- */

int hearth_cpu_isa_available(int isa) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    switch (isa) {
    case HEARTH_CPU_ISA_SCALAR: return 1;
    case HEARTH_CPU_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case HEARTH_CPU_ISA_AVX512:
        return hearth_cpu_isa_available(HEARTH_CPU_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    }
    return 0;
#else
    return isa == HEARTH_CPU_ISA_SCALAR;
#endif
}

/* The widest ISA this CPU has, capped by HEARTH_CPU_ISA=scalar|avx2|avx512
 * where set (as oneDNN's ONEDNN_MAX_CPU_ISA): to run, and measure, an older
 * machine's kernels on a newer one. */
static int best_isa(void) {
    int best = hearth_cpu_isa_available(HEARTH_CPU_ISA_AVX512) ? HEARTH_CPU_ISA_AVX512
               : hearth_cpu_isa_available(HEARTH_CPU_ISA_AVX2) ? HEARTH_CPU_ISA_AVX2
                                                                : HEARTH_CPU_ISA_SCALAR;
    const char *cap = getenv("HEARTH_CPU_ISA");
    if (cap && *cap) {
        int want = !strcmp(cap, "scalar") ? HEARTH_CPU_ISA_SCALAR
                   : !strcmp(cap, "avx2") ? HEARTH_CPU_ISA_AVX2
                   : !strcmp(cap, "avx512") ? HEARTH_CPU_ISA_AVX512
                                            : HEARTH_CPU_ISA_AUTO;
        if (want == HEARTH_CPU_ISA_AUTO) hearth_log_warn("HEARTH_CPU_ISA=%s: expected scalar, avx2 or avx512; ignored", cap);
        else if (want < best) best = want;
    }
    return best;
}

static atomic_int g_isa = HEARTH_CPU_ISA_AUTO; /* resolved on first use */

int hearth_cpu_isa_force(int isa) {
    if (isa == HEARTH_CPU_ISA_AUTO) isa = best_isa();
    if (!hearth_cpu_isa_available(isa)) return 0;
    atomic_store(&g_isa, isa);
    return 1;
}

int hearth_cpu_isa_current(void) {
    int isa = atomic_load_explicit(&g_isa, memory_order_relaxed);
    if (isa == HEARTH_CPU_ISA_AUTO) {
        isa = best_isa();
        atomic_store(&g_isa, isa);
    }
    return isa;
}

const char *hearth_cpu_isa_name(int isa) {
    switch (isa) {
    case HEARTH_CPU_ISA_SCALAR: return "scalar";
    case HEARTH_CPU_ISA_AVX2: return "avx2";
    case HEARTH_CPU_ISA_AVX512: return "avx512";
    }
    return "auto";
}

static const mm_isa *isa_table(int isa) {
    switch (isa) {
    case HEARTH_CPU_ISA_AVX512: return &hearth_cpu_mm_avx512;
    case HEARTH_CPU_ISA_AVX2: return &hearth_cpu_mm_avx2;
    default: return &hearth_cpu_mm_scalar;
    }
}

/* ---- scratch layout ------------------------------------------------------ */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int act_kind(int wt_index) {
    switch (wt_index) {
    case MM_F16: return ACT_F16;
    case MM_BF16: return ACT_BF16;
    case MM_Q4_0: case MM_Q5_0: case MM_Q8_0: case MM_IQ4_NL: return ACT_Q8_0;
    case MM_Q4_1: case MM_Q5_1: return ACT_Q8_1;
    case MM_Q2_K: case MM_Q3_K: case MM_Q4_K: case MM_Q5_K: case MM_Q6_K: case MM_IQ4_XS: return ACT_Q8_K;
    default: return ACT_NONE;
    }
}

size_t hearth_cpu_act_layout(int wt_index, int T, int K, void *scratch, mm_act *a) {
    mm_act l = {0};
    l.kind = act_kind(wt_index);
    l.T = T;
    l.K = K;
    uint8_t *base = scratch;
    size_t off = 0;
    /* Each array starts 64-byte aligned; each token's row too. */
#define PLACE(field, type, count)                                                  \
    do {                                                                           \
        l.field = base ? (type *)(base + off) : NULL;                              \
        off += align64((size_t)(count) * sizeof(type));                            \
    } while (0)
    switch (l.kind) {
    case ACT_F16:
    case ACT_BF16:
        l.f_stride = align64((size_t)K * 4) / 4;
        PLACE(f, float, l.f_stride * (size_t)T);
        break;
    case ACT_Q8_0:
    case ACT_Q8_1:
    case ACT_Q8_K: {
        int blk = l.kind == ACT_Q8_K ? HEARTH_QK_K : HEARTH_QK;
        l.nb = K / blk;
        l.qs_stride = align64((size_t)K);
        l.nb_stride = align64((size_t)l.nb * 4) / 4;
        PLACE(qs, int8_t, l.qs_stride * (size_t)T);
        PLACE(d, float, l.nb_stride * (size_t)T);
        if (l.kind == ACT_Q8_K) {
            PLACE(bsums, int16_t, l.nb_stride * 16 * (size_t)T);
        } else {
            PLACE(isum, int32_t, l.nb_stride * (size_t)T);
            if (l.kind == ACT_Q8_1) PLACE(s, float, l.nb_stride * (size_t)T);
        }
        break;
    }
    default: break;
    }
#undef PLACE
    if (a) *a = l;
    return off;
}

size_t hearth_cpu_matmul_scratch_bytes(hearth_dtype wt, int T, int K) {
    int wi = hearth_cpu_mm_index(wt);
    if (wi < 0 || T <= 0 || K <= 0) return 0;
    return hearth_cpu_act_layout(wi, T, K, NULL, NULL);
}

/* ---- the call ------------------------------------------------------------ */

typedef struct {
    const mm_isa *isa;
    mm_job job;
    mm_rows_fn rows;
    mm_act_fn act;
    int n_tiles;
} mm_call;

static void act_task(void *ctx, int task, int n_tasks) {
    const mm_call *c = ctx;
    int T = c->job.T;
    int t0 = (int)((long long)T * task / n_tasks), t1 = (int)((long long)T * (task + 1) / n_tasks);
    if (t0 < t1) c->act(c->job.x, c->job.a, t0, t1);
}

static void rows_task(void *ctx, int task, int n_tasks) {
    const mm_call *c = ctx;
    int a = (int)((long long)c->n_tiles * task / n_tasks);
    int b = (int)((long long)c->n_tiles * (task + 1) / n_tasks);
    int n0 = a * ROW_TILE, n1 = b * ROW_TILE;
    if (n1 > c->job.N) n1 = c->job.N;
    if (n0 < n1) c->rows(&c->job, n0, n1);
}

/* The row kernel for weights of index wi laid out as layout, on isa. */
static mm_rows_fn rows_fn(const mm_isa *isa, int wi, int layout) {
    if (layout == HEARTH_LAYOUT_STORED) return isa->rows[wi] ? isa->rows[wi] : hearth_cpu_mm_scalar.rows[wi];
    HEARTH_ASSERT(layout == HEARTH_LAYOUT_PANEL8 && hearth_cpu_mm_scalar.panel[wi]);
    if (isa->panel[wi]) return isa->panel[wi];
    if (hearth_cpu_isa_available(HEARTH_CPU_ISA_AVX2) && hearth_cpu_mm_avx2.panel[wi])
        return hearth_cpu_mm_avx2.panel[wi];
    return hearth_cpu_mm_scalar.panel[wi];
}

/* The call of one weight (its activation layout in act, which it points to). */
static void call_init(mm_call *c, mm_act *act, const hearth_cpu_mm *m, const float *x, int T, int K) {
    int wi = hearth_cpu_mm_index(m->wt);
    HEARTH_ASSERT(wi >= 0 && K > 0 && K % hearth_dtype_get(m->wt)->block == 0 && m->N >= 0);
    c->isa = isa_table(hearth_cpu_isa_current());
    c->job = (mm_job){.y = m->y, .x = x, .a = act, .w = m->w, .row_bytes = hearth_dtype_row_bytes(m->wt, K),
                      .T = T, .K = K, .N = m->N};
    c->rows = rows_fn(c->isa, wi, m->layout);
    c->act = c->isa->act[act->kind] ? c->isa->act[act->kind] : hearth_cpu_mm_scalar.act[act->kind];
    c->n_tiles = (m->N + ROW_TILE - 1) / ROW_TILE;
}

static void run_act(hearth_pool *pool, mm_call *c) {
    if (c->job.a->kind == ACT_NONE) return;
    const int n_threads = hearth_pool_size(pool), T = c->job.T;
    long long elems = (long long)T * c->job.K;
    hearth_pool_run(pool, act_task, c, elems < ACT_TASK_ELEMS ? 1 : (T < n_threads ? T : n_threads));
}

static int rows_tasks(hearth_pool *pool, int n_tiles) {
    const int n_threads = hearth_pool_size(pool);
    int n_tasks = n_threads == 1 ? 1 : n_threads * TASKS_PER_THREAD;
    return n_tasks > n_tiles ? n_tiles : n_tasks;
}

void hearth_cpu_matmul(hearth_pool *pool, float *y, const float *x, int T, const void *w,
                       hearth_dtype wt, int layout, int K, int N, void *scratch) {
    HEARTH_ASSERT(T >= 0);
    if (T == 0 || N == 0) return;
    const hearth_cpu_mm m = {y, w, wt, layout, N};
    mm_act act;
    hearth_cpu_act_layout(hearth_cpu_mm_index(wt), T, K, scratch, &act);
    HEARTH_ASSERT(act.kind == ACT_NONE || ((uintptr_t)scratch & 63) == 0);
    mm_call c;
    call_init(&c, &act, &m, x, T, K);
    run_act(pool, &c);
    hearth_pool_run(pool, rows_task, &c, rows_tasks(pool, c.n_tiles));
}

/* n calls' tiles in one run: tiles first[i] .. first[i + 1] - 1 are call i's */
typedef struct {
    mm_call c[HEARTH_CPU_MM_N];
    int n, first[HEARTH_CPU_MM_N + 1];
} mm_calls;

static void rows_task_n(void *ctx, int task, int n_tasks) {
    const mm_calls *m = ctx;
    const int total = m->first[m->n];
    const int a = (int)((long long)total * task / n_tasks), b = (int)((long long)total * (task + 1) / n_tasks);
    for (int i = 0; i < m->n; i++) {
        int lo = a > m->first[i] ? a : m->first[i], hi = b < m->first[i + 1] ? b : m->first[i + 1];
        if (lo >= hi) continue;
        int n0 = (lo - m->first[i]) * ROW_TILE, n1 = (hi - m->first[i]) * ROW_TILE;
        if (n1 > m->c[i].job.N) n1 = m->c[i].job.N;
        m->c[i].rows(&m->c[i].job, n0, n1);
    }
}

void hearth_cpu_matmul_n(hearth_pool *pool, const hearth_cpu_mm *mm, int n, const float *x, int T, int K,
                         void *scratch) {
    HEARTH_ASSERT(n >= 1 && n <= HEARTH_CPU_MM_N && T >= 0);
    int same = 1;
    for (int i = 1; i < n; i++)
        same &= act_kind(hearth_cpu_mm_index(mm[i].wt)) == act_kind(hearth_cpu_mm_index(mm[0].wt));
    if (!same || T == 0) { /* each weight its own activation copy */
        for (int i = 0; i < n; i++)
            hearth_cpu_matmul(pool, mm[i].y, x, T, mm[i].w, mm[i].wt, mm[i].layout, K, mm[i].N, scratch);
        return;
    }
    mm_act act;
    hearth_cpu_act_layout(hearth_cpu_mm_index(mm[0].wt), T, K, scratch, &act);
    HEARTH_ASSERT(act.kind == ACT_NONE || ((uintptr_t)scratch & 63) == 0);
    mm_calls m = {.n = n};
    for (int i = 0; i < n; i++) {
        call_init(&m.c[i], &act, &mm[i], x, T, K);
        m.first[i + 1] = m.first[i] + m.c[i].n_tiles;
    }
    run_act(pool, &m.c[0]);
    if (m.first[n] > 0) hearth_pool_run(pool, rows_task_n, &m, rows_tasks(pool, m.first[n]));
}

/* ---- the reference -------------------------------------------------------- */

void hearth_cpu_matmul_ref(float *y, const float *x, int T, const void *w, hearth_dtype wt,
                           int K, int N) {
    const hearth_dtype_info *info = hearth_dtype_get(wt);
    HEARTH_ASSERT(hearth_cpu_matmul_supports(wt) && K > 0 && K % info->block == 0);
    int blk = info->block; /* elements dequantized at a time: a block, or up to 256 floats */
    if (blk == 1)
        for (blk = 256; K % blk; blk /= 2) {}
    size_t row_bytes = hearth_dtype_row_bytes(wt, K);
    size_t chunk_bytes = hearth_dtype_row_bytes(wt, blk);
    float buf[256];
    for (int n = 0; n < N; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * row_bytes;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            float acc = 0.f;
            for (int k0 = 0; k0 < K; k0 += blk) {
                hearth_cpu_dequantize_row(wt, row + (size_t)(k0 / blk) * chunk_bytes, buf, blk);
                for (int j = 0; j < blk; j++) acc += buf[j] * xt[k0 + j];
            }
            y[(size_t)t * N + n] = acc;
        }
    }
}
