/* ops_cpu.c - the CPU backend table: matmul (ops/cpu/matmul.c) plus the
 * element-wise ops, rope and paged attention, threaded over the pool.
 *
 * Invariant: nothing here allocates; all scratch is sized in ctx_new. */
#include "ops/cpu/ops_cpu.h"

#include "core/fp8.h"
#include "core/half.h"
#include "core/log.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/train.h"
#include "ops/cpu/panel.h"
#include "ops/cpu/pick.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/attn_vec.h"
#include "ops/cpu/vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEARTH_CPU_MAX_HEAD_DIM 512
/* attention: positions a chunk, rows a tile, query heads an item (att_item) */
enum { ATT_CHUNK = 64, ATT_TILE = 8, ATT_MAX_GS = 8, ATT_SEG = 512 };

struct hearth_cpu_ctx {
    hearth_pool *pool;
    int max_tokens, max_cols, max_ctx;
    void *mm_scratch;
    size_t mm_scratch_bytes;
    float *att_scratch; /* [n_att_tasks][ATT_CHUNK * HEARTH_CPU_MAX_HEAD_DIM]: a chunk's K or V rows as f32 */
    int *att_tiles;     /* [max_tokens + 1]: where each tile of rows starts (cpu_attention) */
    int *att_items;     /* [max_tokens + 1]: the (tile, segment) items before each tile */
    float *att_part;    /* [att_part_n]: segments' partial outputs of rows that span several */
    size_t att_part_n;
    int n_att_tasks;
    size_t train_oom; /* bytes a training op could not get (the first failure), 0 if none */
};

static size_t max_scratch_bytes(int T, int K) {
    static const hearth_dtype types[] = {HEARTH_DT_F32, HEARTH_DT_F16, HEARTH_DT_BF16, HEARTH_DT_Q4_0,
                                         HEARTH_DT_Q4_1, HEARTH_DT_Q8_0, HEARTH_DT_Q4_K, HEARTH_DT_Q5_K,
                                         HEARTH_DT_Q6_K};
    size_t m = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int k = K;
        int blk = hearth_dtype_get(types[i])->block;
        if (k % blk) k += blk - k % blk;
        size_t b = hearth_cpu_matmul_scratch_bytes(types[i], T, k);
        if (b > m) m = b;
    }
    return m;
}

hearth_status hearth_cpu_ctx_new(hearth_cpu_ctx **out, int n_threads, int max_tokens, int max_cols,
                                 int max_ctx, hearth_err *err) {
    *out = NULL;
    hearth_cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return hearth_err_set(err, HEARTH_ENOMEM, "cpu backend: out of memory");
    hearth_status st = hearth_pool_new(&c->pool, n_threads, err);
    if (st != HEARTH_OK) {
        free(c);
        return st;
    }
    c->max_tokens = max_tokens;
    c->max_cols = max_cols;
    c->max_ctx = max_ctx;
    c->mm_scratch_bytes = max_scratch_bytes(max_tokens, max_cols);
    c->n_att_tasks = hearth_pool_size(c->pool) * 4;
    c->mm_scratch = aligned_alloc(64, (c->mm_scratch_bytes + 63) & ~(size_t)63);
    c->att_scratch = malloc(sizeof(float) * (size_t)c->n_att_tasks * ATT_CHUNK * HEARTH_CPU_MAX_HEAD_DIM);
    c->att_tiles = malloc(sizeof(int) * ((size_t)max_tokens + 1));
    c->att_items = malloc(sizeof(int) * ((size_t)max_tokens + 1));
    /* rows' partials over every segment of max_ctx, for up to 2 x
     * max(max_cols, 4096) floats of query heads a row: for max_tokens rows up
     * to 8M floats (pages are touched as used), at least for a tile's rows;
     * cpu_attention cuts the rows into passes that fit */
    const size_t part_row = (size_t)2 * (max_cols > 4096 ? max_cols : 4096) * ((max_ctx + ATT_SEG - 1) / ATT_SEG);
    c->att_part_n = part_row * (size_t)max_tokens;
    if (c->att_part_n > ((size_t)8 << 20)) c->att_part_n = (size_t)8 << 20;
    if (c->att_part_n < part_row * ATT_TILE) c->att_part_n = part_row * ATT_TILE;
    c->att_part = malloc(sizeof(float) * c->att_part_n);
    if (!c->mm_scratch || !c->att_scratch || !c->att_tiles || !c->att_items || !c->att_part) {
        hearth_cpu_ctx_free(c);
        return hearth_err_set(err, HEARTH_ENOMEM, "cpu backend: cannot allocate scratch for %d tokens",
                              max_tokens);
    }
    *out = c;
    return HEARTH_OK;
}

void hearth_cpu_ctx_cap_att_part(hearth_cpu_ctx *c, size_t n) {
    if (n < c->att_part_n) c->att_part_n = n;
}

void hearth_cpu_ctx_free(hearth_cpu_ctx *c) {
    if (!c) return;
    hearth_pool_free(c->pool);
    free(c->mm_scratch);
    free(c->att_scratch);
    free(c->att_tiles);
    free(c->att_items);
    free(c->att_part);
    free(c);
}

hearth_pool *hearth_cpu_ctx_pool(hearth_cpu_ctx *c) { return c->pool; }

void hearth_cpu_ctx_train_oom(hearth_cpu_ctx *c, size_t bytes) {
    if (!c->train_oom) c->train_oom = bytes ? bytes : 1;
}

hearth_status hearth_cpu_ctx_train_failed(hearth_cpu_ctx *c, hearth_err *err) {
    if (!c->train_oom) return HEARTH_OK;
    return hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory for a product's scratch (%.1f MiB)",
                          c->train_oom / 1048576.0);
}

static void *cpu_alloc(void *ctx, size_t bytes) { return aligned_alloc(64, (bytes + 63) & ~(size_t)63); }
static void cpu_free(void *ctx, void *p) { free(p); }
static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static void cpu_matmul(void *ctx, float *y, const float *x, int T, const hearth_weight *w) {
    hearth_cpu_ctx *c = ctx;
    HEARTH_ASSERT(T <= c->max_tokens && w->cols <= c->max_cols + 255);
    hearth_cpu_matmul(c->pool, y, x, T, w->data, w->type, w->layout, w->cols, w->rows, c->mm_scratch);
}

static void cpu_matmul_n(void *ctx, float *const *y, const float *x, int T, const hearth_weight *const *w, int n) {
    hearth_cpu_ctx *c = ctx;
    hearth_cpu_mm mm[HEARTH_CPU_MM_N];
    HEARTH_ASSERT(n >= 1 && n <= HEARTH_CPU_MM_N && T <= c->max_tokens);
    for (int i = 0; i < n; i++) {
        HEARTH_ASSERT(w[i]->cols == w[0]->cols && w[i]->cols <= c->max_cols + 255);
        mm[i] = (hearth_cpu_mm){y[i], w[i]->data, w[i]->type, w[i]->layout, w[i]->rows};
    }
    hearth_cpu_matmul_n(c->pool, mm, n, x, T, w[0]->cols, c->mm_scratch);
}

/* q4_0 / q4_1 / q8_0 / q4_K for the AVX2 and AVX-512 kernels: a panel-laid copy (panel.h),
 * which the model owns. Without the memory for it the weight stays in the
 * mapped file, as stored (slower kernels, same results). */
static hearth_status cpu_prepare_weight(void *ctx, hearth_weight *w, hearth_err *err) {
    if (w->layout != HEARTH_LAYOUT_STORED || !hearth_cpu_panel_wanted(w->type, w->rows)) return HEARTH_OK;
    size_t bytes = w->row_bytes * (size_t)w->rows;
    void *p = cpu_alloc(ctx, bytes);
    if (!p) {
        hearth_log_warn("cpu backend: no memory for a re-laid copy of a %.1f MiB weight; it is read as stored",
                        bytes / 1048576.0);
        return HEARTH_OK;
    }
    hearth_cpu_panel_pack(p, w->data, w->type, w->cols, w->rows);
    w->data = p;
    w->layout = HEARTH_LAYOUT_PANEL8;
    return HEARTH_OK;
}

static void cpu_embed(void *ctx, float *out, const hearth_weight *table, const int32_t *ids, int T) {
    for (int t = 0; t < T; t++) {
        float *o = out + (size_t)t * table->cols;
        if (table->layout == HEARTH_LAYOUT_PANEL8) { /* a block at a time, as stored */
            uint8_t blk[256];
            const int bk = hearth_dtype_get(table->type)->block;
            HEARTH_ASSERT(hearth_dtype_get(table->type)->block_bytes <= (int)sizeof blk);
            for (int b = 0; b < table->cols / bk; b++) {
                hearth_cpu_panel_block(table->data, table->type, table->cols, table->rows, ids[t], b, blk);
                hearth_cpu_dequantize_row(table->type, blk, o + (size_t)bk * b, bk);
            }
            continue;
        }
        const uint8_t *row = (const uint8_t *)table->data + (size_t)ids[t] * table->row_bytes;
        hearth_cpu_dequantize_row(table->type, row, o, table->cols);
    }
}

/* The vector kernels of the ISA the matmuls run (hearth_cpu_isa_force); the
 * scalar ones where a table lacks that ISA. */
static void isa_kernels(const hearth_vec_ops **vec, const hearth_attn_ops **ak) {
    const char *isa = hearth_cpu_isa_name(hearth_cpu_isa_current());
    *vec = hearth_vec_get(isa), *ak = hearth_attn_ops_get(isa);
    if (!*vec || !*ak) *vec = hearth_vec_get("scalar"), *ak = hearth_attn_ops_get("scalar");
}

/* An op's rows split over the pool's threads: each row's work is its own,
 * so the numbers do not depend on the split; a few rows (a decode step) run
 * on the calling thread alone. */
enum { ROWS_MIN_SPLIT = 8 };
typedef void (*rows_fn)(const void *arg, int r0, int r1);
typedef struct {
    rows_fn fn;
    const void *arg;
    int n;
} rows_job;

static void rows_task(void *ctx, int task, int n_tasks) {
    const rows_job *j = ctx;
    j->fn(j->arg, (int)((long)j->n * task / n_tasks), (int)((long)j->n * (task + 1) / n_tasks));
}

static void run_rows(hearth_cpu_ctx *c, int n, rows_fn fn, const void *arg) {
    const int tasks = n < ROWS_MIN_SPLIT ? 1 : (n < hearth_pool_size(c->pool) ? n : hearth_pool_size(c->pool));
    rows_job j = {fn, arg, n};
    if (tasks <= 1) fn(arg, 0, n);
    else hearth_pool_run(c->pool, rows_task, &j, tasks);
}

typedef struct {
    float *y;
    const float *x, *w;
    int dim;
    float eps;
} rmsnorm_job;

static void rmsnorm_rows(const void *arg, int r0, int r1) {
    const rmsnorm_job *j = arg;
    for (int r = r0; r < r1; r++) {
        const float *xr = j->x + (size_t)r * j->dim;
        float *yr = j->y + (size_t)r * j->dim;
        /* ggml's order: float squares summed in double, the mean rounded to
         * float, so GGUF parity with llama.cpp is not lost to rounding. */
        double ss = 0.0;
        for (int i = 0; i < j->dim; i++) ss += (double)(xr[i] * xr[i]);
        float mean = (float)(ss / j->dim);
        float s = 1.0f / sqrtf(mean + j->eps);
        for (int i = 0; i < j->dim; i++) yr[i] = xr[i] * s * j->w[i];
    }
}

static void cpu_rmsnorm(void *ctx, float *y, const float *x, const float *w, int n_rows, int dim, float eps) {
    rmsnorm_job j = {y, x, w, dim, eps};
    run_rows(ctx, n_rows, rmsnorm_rows, &j);
}

typedef struct {
    float *x;
    int n_heads, head_dim;
    const int32_t *pos;
    const hearth_rope *rope;
} rope_job;

static void rope_rows(const void *arg, int t0, int t1) {
    const rope_job *j = arg;
    const hearth_rope *rope = j->rope;
    int half = rope->rot_dim / 2;
    for (int t = t0; t < t1; t++) {
        for (int i = 0; i < half; i++) {
            float ang = (float)j->pos[t] * rope->inv_freq[i];
            float cs = cosf(ang), sn = sinf(ang);
            for (int h = 0; h < j->n_heads; h++) {
                float *v = j->x + ((size_t)t * j->n_heads + h) * j->head_dim;
                int a = rope->neox ? i : 2 * i, b = rope->neox ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs - x1 * sn;
                v[b] = x0 * sn + x1 * cs;
            }
        }
    }
}

static void cpu_rope(void *ctx, float *x, int T, int n_heads, int head_dim, const int32_t *pos,
                     const hearth_rope *rope) {
    rope_job j = {x, n_heads, head_dim, pos, rope};
    run_rows(ctx, T, rope_rows, &j);
}

static void cpu_add_bias(void *ctx, float *y, const float *b, int T, int n) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += b[i];
}

static void cpu_add(void *ctx, float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

typedef struct {
    float *const *y;
    const float *tmp, *b;
    const int *n_out;
    int n, R, cols, wide;
    const int32_t *ids;
    int32_t id;
    const hearth_vec_ops *vec;
    float *u; /* [T][wide] */
} lora_job;

/* y_i[t] += sum_r tmp[t][i R + r] B_i^T[r], the sum made apart (add_scaled
 * in rank order, the same bits on every ISA; a zero product skipped, which
 * changes no bit), then added to y once. */
static void lora_expand_rows(const void *arg, int t0, int t1) {
    const lora_job *j = arg;
    for (int t = t0; t < t1; t++) {
        if (j->ids && j->ids[t] != j->id) continue;
        float *u = j->u + (size_t)t * j->wide;
        for (int i = 0, o = 0; i < j->n; o += j->n_out[i++]) {
            const float *tr = j->tmp + ((size_t)t * j->n + i) * j->R;
            memset(u, 0, sizeof(float) * (size_t)j->n_out[i]);
            for (int r = 0; r < j->R; r++)
                if (tr[r] != 0.0f) j->vec->add_scaled(u, tr[r], j->b + (size_t)r * j->cols + o, j->n_out[i]);
            float *yr = j->y[i] + (size_t)t * j->n_out[i];
            for (int k = 0; k < j->n_out[i]; k++) yr[k] += u[k];
        }
    }
}

/* One matmul for the group's stacked A (tmp[T][n R]), then the expand over
 * the rows, split across the pool. */
static void cpu_lora(void *ctx, float *const *y, const float *x, int T, int K, const float *a, const float *b, int R,
                     const int *n_out, int n, const int32_t *ids, int32_t id, float *tmp) {
    hearth_cpu_ctx *c = ctx;
    lora_job j = {y, tmp, b, n_out, n, R, 0, 0, ids, id, NULL, tmp + (size_t)T * n * R};
    for (int i = 0; i < n; i++) j.cols += n_out[i], j.wide = n_out[i] > j.wide ? n_out[i] : j.wide;
    const hearth_attn_ops *ak;
    isa_kernels(&j.vec, &ak);
    hearth_cpu_matmul(c->pool, tmp, x, T, a, HEARTH_DT_F32, HEARTH_LAYOUT_STORED, K, n * R, c->mm_scratch);
    run_rows(c, T, lora_expand_rows, &j);
}

typedef struct {
    float *out;
    const float *gate, *up;
    int n;
    const hearth_vec_ops *vec;
} swiglu_job;

static void swiglu_rows(const void *arg, int t0, int t1) {
    const swiglu_job *j = arg;
    size_t at = (size_t)t0 * j->n;
    for (int t = t0; t < t1; t++, at += (size_t)j->n) j->vec->swiglu(j->out + at, j->gate + at, j->up + at, j->n);
}

/* elementwise, in vectors (vexp.h) */
static void cpu_swiglu(void *ctx, float *out, const float *gate, const float *up, int T, int n) {
    swiglu_job j = {out, gate, up, n, NULL};
    const hearth_attn_ops *ak;
    isa_kernels(&j.vec, &ak);
    run_rows(ctx, T, swiglu_rows, &j);
}

/* Where KV head h's n dimensions (the head dimension; in the rows layout
 * h = 0 and n = kv_dim, the whole row, may be asked for too) start for
 * position pos of a sequence, in elements (hearth_kv_view). */
static inline size_t kv_offset(const hearth_kv_view *kv, int seq, int pos, int h, int n) {
    const size_t blk = (size_t)kv->block_table[(size_t)seq * kv->max_blocks_per_seq + pos / kv->block_size];
    const int at = pos % kv->block_size;
    if (kv->head_dim)
        return ((blk * (size_t)(kv->kv_dim / kv->head_dim) + (size_t)h) * kv->block_size + (size_t)at) * kv->head_dim;
    return (blk * kv->block_size + (size_t)at) * kv->kv_dim + (size_t)h * n;
}

/* Elements from a head's row to the next position's within a block. */
static inline size_t kv_row_step(const hearth_kv_view *kv) { return kv->head_dim ? kv->head_dim : kv->kv_dim; }

static void store_row(const hearth_kv_view *kv, const hearth_attn_ops *ak, void *base, size_t off, const float *x,
                      int n) {
    if (kv->type == HEARTH_DT_F16) {
        ak->to_f16((uint16_t *)base + off, x, n);
    } else if (kv->type == HEARTH_DT_E4M3) {
        uint8_t *d = (uint8_t *)base + off;
        for (int j = 0; j < n; j++) d[j] = hearth_f32_to_e4m3(x[j]);
    } else {
        memcpy((float *)base + off, x, sizeof(float) * (size_t)n);
    }
}

typedef struct {
    const hearth_kv_view *kv;
    int layer;
    const float *k, *v;
    const int32_t *seq, *pos;
    const hearth_attn_ops *ak;
} kv_write_job;

static void kv_write_rows(const void *arg, int t0, int t1) {
    const kv_write_job *j = arg;
    const hearth_kv_view *kv = j->kv;
    const int n = (int)kv_row_step(kv); /* a head at a time, or the whole row */
    for (int t = t0; t < t1; t++)
        for (int h = 0; h < kv->kv_dim / n; h++) {
            size_t off = kv_offset(kv, j->seq[t], j->pos[t], h, n), at = (size_t)t * kv->kv_dim + (size_t)h * n;
            store_row(kv, j->ak, kv->k[j->layer], off, j->k + at, n);
            store_row(kv, j->ak, kv->v[j->layer], off, j->v + at, n);
        }
}

/* rows write distinct slots (a batch never holds one position twice) */
static void cpu_kv_write(void *ctx, const hearth_kv_view *kv, int layer, const float *k, const float *v, int T,
                         const int32_t *seq, const int32_t *pos) {
    HEARTH_ASSERT(!kv->head_dim || kv->kv_dim % kv->head_dim == 0);
    kv_write_job j = {kv, layer, k, v, seq, pos, NULL};
    const hearth_vec_ops *vec;
    isa_kernels(&vec, &j.ak);
    run_rows(ctx, T, kv_write_rows, &j);
}

/* The attention walks a row's positions in chunks of ATT_CHUNK, aligned to
 * multiples of it, with an online softmax (running max and sum a head,
 * rescaled when the max rises). A work item is a tile of up to ATT_TILE
 * consecutive rows of one sequence (a prompt's) and up to ATT_MAX_GS query
 * heads of one KV head: each K and V row is read (and widened from f16 or
 * e4m3) once for all of them. Every head's numbers are the same whatever
 * item it shares, so a row alone equals the row in a batch.
 *
 * Positions are also cut in segments of ATT_SEG, at multiples of it, each an
 * item of its own, so that one decode row over a long context gives every
 * thread its share of the stream. A row whose positions lie in one segment
 * is finished by its item, as if there were no segments; a row spanning
 * several leaves each segment's unnormalised output, max and sum in
 * c->att_part, and att_merge weighs them in segment order. Where the cuts
 * fall depends on the row's own positions only, so this too is the same
 * alone and in any batch. */

typedef struct {
    hearth_cpu_ctx *c;
    float *out;
    const float *q;
    const hearth_kv_view *kv;
    int layer, T, n_heads, n_kv_heads, head_dim, window;
    const int32_t *seq, *pos;
    float scale;
    const hearth_attn_ops *ak; /* the kernels of the ISA the matmuls run (hearth_cpu_isa_force) */
    const hearth_vec_ops *vec;
    int n_tiles, gs, n_groups; /* row tiles (c->att_tiles); query heads an item at most; items a tile and KV head */
    int n_items, seg_max;      /* (tile, segment) pairs (c->att_items); segments a row spans at most */
} att_job;

/* The first position row t attends. */
static inline int att_first(const att_job *j, int t) {
    return j->window > 0 && j->pos[t] - j->window + 1 > 0 ? j->pos[t] - j->window + 1 : 0;
}

/* The segments row t's positions span. */
static inline int att_segs(const att_job *j, int t) { return j->pos[t] / ATT_SEG - att_first(j, t) / ATT_SEG + 1; }

/* Where segment s (counted from the row's first) of row t, head h keeps its
 * output: head_dim floats, then the max and the sum. */
static inline float *att_part_at(const att_job *j, int t, int h, int s) {
    return j->c->att_part + (((size_t)t * j->n_heads + h) * j->seg_max + s) * (size_t)(j->head_dim + 2);
}

/* K / V rows of an f16 cache go to the kernels as they are when the head
 * dimension is a multiple of 16 (a vector of them widened in registers: one
 * instruction); e4m3 ones too, but only for an item of at most 4 query rows
 * (one kernel pass: a decode row's heads), as their widening takes a dozen;
 * others are converted into the item's buffer. Widened or converted, the
 * values are the same. Returns the kernels' row type. */
static inline int rows_kind(const att_job *j, int n_rows) {
    if (j->head_dim % 16) return HEARTH_ROWS_F32;
    if (j->kv->type == HEARTH_DT_F16) return HEARTH_ROWS_F16;
    return j->kv->type == HEARTH_DT_E4M3 && n_rows <= 4 ? HEARTH_ROWS_E4M3 : HEARTH_ROWS_F32;
}

/* The K or V rows of one KV head at positions p..p+n-1 of a sequence: into the
 * cache (f32, or rows_kind's), or converted (exactly) into buf (n x hd). */
static void head_rows(const att_job *j, int kind, const void *base, int seq, int p, int n, int kvh, const void **rows,
                      float *buf) {
    const hearth_kv_view *kv = j->kv;
    const int hd = j->head_dim;
    const size_t step = kv_row_step(kv);
    for (int i = 0; i < n;) {
        int run = kv->block_size - (p + i) % kv->block_size;
        if (run > n - i) run = n - i;
        size_t off = kv_offset(kv, seq, p + i, kvh, hd);
        for (int r = 0; r < run; r++, i++, off += step) {
            float *d = buf + (size_t)i * hd;
            if (kind == HEARTH_ROWS_F16) {
                rows[i] = (const uint16_t *)base + off;
            } else if (kind == HEARTH_ROWS_E4M3) {
                rows[i] = (const uint8_t *)base + off;
            } else if (kv->type == HEARTH_DT_F16) {
                j->ak->from_f16(d, (const uint16_t *)base + off, hd);
                rows[i] = d;
            } else if (kv->type == HEARTH_DT_E4M3) {
                j->ak->from_e4m3(d, (const uint8_t *)base + off, hd);
                rows[i] = d;
            } else {
                rows[i] = (const float *)base + off;
            }
        }
    }
}

/* Asks for the lines of KV head kvh's K and V rows at positions p..p+n-1 of
 * a sequence: the attention asks for its next chunk while it works on this
 * one. In the head-block layout those are a few contiguous runs; from DRAM
 * (a forward's layers read ~3 MB of cache each at 4096 positions of a small
 * model) the stream alone did not keep the arithmetic fed. */
static void head_prefetch(const att_job *j, int seq, int p, int n, int kvh) {
    const hearth_kv_view *kv = j->kv;
    const size_t esz = hearth_dtype_get(kv->type)->block_bytes;
    const char *kb = kv->k[j->layer], *vb = kv->v[j->layer];
    const size_t len = (size_t)j->head_dim * esz, step = kv_row_step(kv) * esz;
    for (int i = 0; i < n;) {
        int run = kv->block_size - (p + i) % kv->block_size;
        if (run > n - i) run = n - i;
        size_t off = kv_offset(kv, seq, p + i, kvh, j->head_dim) * esz;
        for (int r = 0; r < run; r++, i++, off += step)
            for (size_t o = 0; o < len; o += 64) __builtin_prefetch(kb + off + o), __builtin_prefetch(vb + off + o);
    }
}

/* The positions a..b of chunk c0 that a row attending p0..p1 attends (a > b: none). */
static inline void chunk_span(int c0, int p0, int p1, int *a, int *b) {
    *a = c0 > p0 ? c0 : p0;
    *b = c0 + ATT_CHUNK - 1 < p1 ? c0 + ATT_CHUNK - 1 : p1;
}

/* Tile rows u0.. that attend the same span a..b of chunk c0: returns the first that does not. */
static int span_run(int c0, const int *p0, const int *p1, int u0, int nt, int *a, int *b) {
    chunk_span(c0, p0[u0], p1[u0], a, b);
    int u1 = u0 + 1, a1, b1;
    for (; u1 < nt; u1++) {
        chunk_span(c0, p0[u1], p1[u1], &a1, &b1);
        if (a1 != *a || b1 != *b) break;
    }
    return u1;
}

/* Rows t0..t0+nt-1 (one sequence, ascending positions), query heads
 * h0..h0+gs-1, all of KV head kvh, over the positions of segment seg. Query
 * row r = u * gs + i is row u's head h0 + i; rows that attend the same
 * positions of a chunk go through the kernels together. */
static void att_item(const att_job *j, int t0, int nt, int kvh, int h0, int gs, int seg, float *buf) {
    const hearth_kv_view *kv = j->kv;
    const hearth_attn_ops *ak = j->ak;
    const int hd = j->head_dim, seq = j->seq[t0], sa = seg * ATT_SEG, sb = sa + ATT_SEG - 1;
    float s[ATT_TILE * ATT_MAX_GS * ATT_CHUNK], m[ATT_TILE * ATT_MAX_GS], l[ATT_TILE * ATT_MAX_GS];
    const float *qr[ATT_TILE * ATT_MAX_GS];
    const void *rows[ATT_CHUNK];
    const int kind = rows_kind(j, nt * gs);
    float *orow[ATT_TILE * ATT_MAX_GS];
    int p0[ATT_TILE] = {0}, p1[ATT_TILE] = {0}, part[ATT_TILE] = {0}; /* the row's span in the segment */
    for (int u = 0; u < nt; u++) {
        const int f = att_first(j, t0 + u), e = j->pos[t0 + u];
        p0[u] = f > sa ? f : sa, p1[u] = e < sb ? e : sb;
        part[u] = att_segs(j, t0 + u) > 1; /* spans several: a partial */
        for (int i = 0; i < gs; i++) {
            size_t at = ((size_t)(t0 + u) * j->n_heads + h0 + i) * hd;
            qr[u * gs + i] = j->q + at;
            orow[u * gs + i] = p0[u] > p1[u] ? NULL /* none of its positions */
                               : part[u]    ? att_part_at(j, t0 + u, h0 + i, seg - f / ATT_SEG)
                                            : j->out + at;
            m[u * gs + i] = -INFINITY, l[u * gs + i] = 0.0f;
            if (orow[u * gs + i]) memset(orow[u * gs + i], 0, sizeof(float) * (size_t)hd);
        }
    }
    for (int c0 = p0[0] / ATT_CHUNK * ATT_CHUNK; c0 <= p1[nt - 1]; c0 += ATT_CHUNK) {
        /* the chunk's positions any row of the tile attends */
        int lo, hi, a, b;
        chunk_span(c0, p0[0], p1[nt - 1], &lo, &hi);
        if (c0 + ATT_CHUNK <= p1[nt - 1]) /* the next chunk's rows */
            head_prefetch(j, seq, c0 + ATT_CHUNK,
                          c0 + 2 * ATT_CHUNK - 1 <= p1[nt - 1] ? ATT_CHUNK : p1[nt - 1] - c0 - ATT_CHUNK + 1, kvh);
        head_rows(j, kind, kv->k[j->layer], seq, lo, hi - lo + 1, kvh, rows, buf);
        for (int u0 = 0, u1; u0 < nt; u0 = u1) { /* rows u0..u1-1 attend the same span */
            u1 = span_run(c0, p0, p1, u0, nt, &a, &b);
            if (a > b) continue;
            ak->scores(s + (size_t)u0 * gs * ATT_CHUNK, ATT_CHUNK, qr + u0 * gs, (u1 - u0) * gs, rows + (a - lo), kind,
                       b - a + 1, hd, j->scale);
            for (int r = u0 * gs; r < u1 * gs; r++) {
                float *sr = s + (size_t)r * ATT_CHUNK, cm = ak->max(sr, b - a + 1, m[r]);
                if (cm > m[r] && m[r] != -INFINITY) {
                    float f = expf(m[r] - cm);
                    l[r] *= f;
                    j->vec->scale(orow[r], f, hd);
                }
                m[r] = cm;
                l[r] += ak->expsum(sr, b - a + 1, cm);
            }
        }
        head_rows(j, kind, kv->v[j->layer], seq, lo, hi - lo + 1, kvh, rows, buf);
        for (int u0 = 0, u1; u0 < nt; u0 = u1) {
            u1 = span_run(c0, p0, p1, u0, nt, &a, &b);
            if (a > b) continue;
            ak->accum(orow + u0 * gs, s + (size_t)u0 * gs * ATT_CHUNK, ATT_CHUNK, (u1 - u0) * gs, rows + (a - lo), kind,
                      b - a + 1, hd);
        }
    }
    for (int u = 0; u < nt; u++) {
        if (p0[u] > p1[u]) continue; /* none of the row's positions */
        for (int r = u * gs; r < (u + 1) * gs; r++) {
            if (part[u]) orow[r][hd] = m[r], orow[r][hd + 1] = l[r];
            else j->vec->scale(orow[r], 1.0f / l[r], hd);
        }
    }
}

/* The segment of the tile's first position (the others follow it). */
static inline int tile_seg0(const att_job *j, int tile) { return att_first(j, j->c->att_tiles[tile]) / ATT_SEG; }

static void att_task(void *ctx, int task, int n_tasks) {
    const att_job *j = ctx;
    const int G = j->n_heads / j->n_kv_heads, total = j->n_items * j->n_kv_heads * j->n_groups;
    const int *tiles = j->c->att_tiles, *items = j->c->att_items;
    int lo = (int)((long)total * task / n_tasks), hi = (int)((long)total * (task + 1) / n_tasks), tile = 0;
    float *buf = j->c->att_scratch + (size_t)task * ATT_CHUNK * HEARTH_CPU_MAX_HEAD_DIM;
    for (int w = lo; w < hi; w++) {
        int grp = w % j->n_groups, kvh = w / j->n_groups % j->n_kv_heads, it = w / j->n_groups / j->n_kv_heads;
        while (items[tile + 1] <= it) tile++;
        while (items[tile] > it) tile--;
        int g0 = grp * j->gs;
        if (w + 1 < hi && grp + 1 == j->n_groups) { /* the next item's first chunk, which no item asks for */
            int kn = (kvh + 1) % j->n_kv_heads, in = kn ? it : it + 1, tn = tile;
            while (items[tn + 1] <= in) tn++;
            const int t0 = tiles[tn], seg = tile_seg0(j, tn) + in - items[tn], f = att_first(j, t0);
            const int a = f > seg * ATT_SEG ? f : seg * ATT_SEG, e = j->pos[tiles[tn + 1] - 1];
            if (a <= e) head_prefetch(j, j->seq[t0], a, e - a + 1 < ATT_CHUNK ? e - a + 1 : ATT_CHUNK, kn);
        }
        att_item(j, tiles[tile], tiles[tile + 1] - tiles[tile], kvh, kvh * G + g0, G - g0 < j->gs ? G - g0 : j->gs,
                 tile_seg0(j, tile) + it - items[tile], buf);
    }
}

/* Rows that span several segments: their partials weighed in segment order
 * (the online softmax's rescale, once a segment), then normalised. */
static void att_merge(void *ctx, int task, int n_tasks) {
    const att_job *j = ctx;
    const int hd = j->head_dim;
    for (int t = task; t < j->T; t += n_tasks) {
        const int n = att_segs(j, t);
        if (n == 1) continue;
        for (int h = 0; h < j->n_heads; h++) {
            float *o = j->out + ((size_t)t * j->n_heads + h) * hd, M = -INFINITY, L = 0.0f;
            for (int sg = 0; sg < n; sg++) M = fmaxf(M, att_part_at(j, t, h, sg)[hd]);
            memset(o, 0, sizeof(float) * (size_t)hd);
            for (int sg = 0; sg < n; sg++) {
                const float *pp = att_part_at(j, t, h, sg), w = expf(pp[hd] - M);
                L += pp[hd + 1] * w;
                j->vec->add_scaled(o, w, pp, hd);
            }
            j->vec->scale(o, 1.0f / L, hd);
        }
    }
}

static void cpu_attention(void *ctx, float *out, const float *q, int T, const hearth_kv_view *kv, int layer,
                          const int32_t *seq, const int32_t *pos, int n_heads, int n_kv_heads, int head_dim,
                          float scale, int window) {
    hearth_cpu_ctx *c = ctx;
    HEARTH_ASSERT(c->max_tokens > 0 && head_dim <= HEARTH_CPU_MAX_HEAD_DIM && n_heads % n_kv_heads == 0 &&
                  (!kv->head_dim || kv->head_dim == head_dim));
    const hearth_attn_ops *ak;
    const hearth_vec_ops *vec;
    isa_kernels(&vec, &ak);
    /* up to max_tokens rows at a time (att_tiles' size), fewer when their
     * partials would not fit att_part: a row's numbers do not depend on the cut */
    for (int r0 = 0, n; r0 < T; r0 += n) {
        n = T - r0 < c->max_tokens ? T - r0 : c->max_tokens;
        att_job j = {c,     out + (size_t)r0 * n_heads * head_dim, q + (size_t)r0 * n_heads * head_dim, kv, layer, n,
                     n_heads, n_kv_heads, head_dim, window, seq + r0, pos + r0, scale, ak, vec, 0, 0, 0, 0, 1};
        for (int t = 0; t < n; t++) {
            if (att_segs(&j, t) > j.seg_max) j.seg_max = att_segs(&j, t);
        }
        const size_t row_part = (size_t)n_heads * j.seg_max * (head_dim + 2);
        HEARTH_ASSERT(row_part <= c->att_part_n);
        if ((size_t)n * row_part > c->att_part_n) j.T = n = (int)(c->att_part_n / row_part);
        for (int t = 0; t < n; t++) {
            HEARTH_ASSERT(pos[r0 + t] < c->max_ctx);
            if (t == 0 || j.seq[t] != j.seq[t - 1] || j.pos[t] != j.pos[t - 1] + 1 ||
                t - c->att_tiles[j.n_tiles - 1] == ATT_TILE) {
                c->att_items[j.n_tiles] = j.n_items;
                c->att_tiles[j.n_tiles++] = t;
                j.n_items += att_segs(&j, t);
            } else {
                j.n_items += j.pos[t] / ATT_SEG - j.pos[t - 1] / ATT_SEG; /* the tile's last row sets its segments */
            }
        }
        c->att_tiles[j.n_tiles] = n;
        c->att_items[j.n_tiles] = j.n_items;
        /* the whole group an item when that leaves two items a thread, else halves of it */
        const int G = n_heads / n_kv_heads, want = 2 * hearth_pool_size(c->pool);
        j.gs = G < ATT_MAX_GS ? G : ATT_MAX_GS;
        while (j.gs > 1 && j.n_items * n_kv_heads * ((G + j.gs - 1) / j.gs) < want) j.gs = (j.gs + 1) / 2;
        j.n_groups = (G + j.gs - 1) / j.gs;
        const int total = j.n_items * n_kv_heads * j.n_groups;
        hearth_pool_run(c->pool, att_task, &j, total < c->n_att_tasks ? total : c->n_att_tasks);
        if (j.seg_max > 1) {
            const int threads = hearth_pool_size(c->pool);
            hearth_pool_run(c->pool, att_merge, &j, n < threads ? n : threads);
        }
    }
}

typedef struct {
    hearth_pick *out;
    const float *logits;
    const hearth_pick_params *params;
    int n_rows, vocab;
} pick_job;

static void pick_task(void *ctx, int task, int n_tasks) {
    const pick_job *j = ctx;
    for (int r = task; r < j->n_rows; r += n_tasks)
        hearth_pick_row(&j->out[r], j->logits + (size_t)r * j->vocab, j->vocab, &j->params[r]);
}

static void cpu_pick(void *ctx, hearth_pick *out, const float *logits, int n_rows, int vocab,
                     const hearth_pick_params *params, int32_t *ids) {
    hearth_cpu_ctx *c = ctx;
    pick_job j = {out, logits, params, n_rows, vocab};
    int n_tasks = hearth_pool_size(c->pool);
    if (n_rows <= 0) return;
    hearth_pool_run(c->pool, pick_task, &j, n_rows < n_tasks ? n_rows : n_tasks);
    for (int r = 0; ids && r < n_rows; r++) ids[r] = out[r].id;
}

const hearth_ops hearth_cpu_ops = {
    .name = "cpu",
    .host_memory = 1,
    .kv_f16 = 1,
    .kv_e4m3 = 1,
    .kv_heads = 1,
    .lora_b_t = 1, /* the expand adds a row of B^T a rank (add_scaled) */
    .pick_truncates = 0, /* the host sampler orders the few tokens top_k / top_p keep faster than the pick's
                            binned passes over the row (build/bench_pick_cpu: top_k 40 on a 49k peaked row 227
                            against 326 us); here the logits are in host memory anyway */
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .matmul = cpu_matmul,
    .matmul_n = cpu_matmul_n,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .add_bias = cpu_add_bias,
    .add = cpu_add,
    .lora = cpu_lora,
    .swiglu = cpu_swiglu,
    .kv_write = cpu_kv_write,
    .attention = cpu_attention,
    .pick = cpu_pick,
    .prepare_weight = cpu_prepare_weight,
    .train = &hearth_cpu_train_ops,
};
