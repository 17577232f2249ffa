/* ops_cuda.cu - the CUDA backend table: context, memory, and the recorder
 * that turns repeated op sequences into CUDA graphs.
 *
 * Every op call appends a record (the op and its arguments, by value) to a
 * host array; nothing reaches the device until flush(): on download(), free(),
 * a large upload, or a full record or staging buffer. flush() runs the records
 * through the launchers (one stream), eagerly the first two times a sequence
 * is seen (the second time it is also captured as a graph, on the host while
 * the device runs it), replayed from the graph after that. A sequence is
 * identified by the exact bytes of its records (pointers, sizes, op order),
 * so a replay is the same work the eager run would issue.
 * Small uploads are copied into pinned staging at call time (the caller's
 * buffer is free on return) and recorded as copies from there; the staging
 * offsets restart after each host sync, so one decode step after another
 * records identical bytes.
 *
 * Invariants: records are zeroed before they are filled (memcmp identity);
 * the matmul x cache is reset at the start of each run of records, so eager
 * runs and captures make the same decisions; the ctx never allocates device
 * memory after ctx_new but for alloc(), graph instantiation, the scratch
 * that the weights need, reserved at load (prepare_weight), and the training
 * ops' scratch (cu_train_scratch: training is not the per-token path).
 *
 * Training ops (train*.cu) are not recorded: cu_train_begin issues the
 * records, and the op launches straight on the stream behind them. */
#include "ops/cuda/decode_layers.h"
#include "ops/cuda/matmul.cuh"
#include "ops/cuda/sm_share.h"
#include "ops/cuda/train_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "core/clock.h"
#include "core/log.h"
}

enum {
    R_UPLOAD = 1,
    R_COPY,
    R_MATMUL,
    R_EMBED,
    R_RMSNORM,
    R_ROPE,
    R_ADD_BIAS,
    R_ADD,
    R_LORA,
    R_SWIGLU,
    R_KV_WRITE,
    R_ATTN,
    R_PICK,
    R_DOWNLOAD, /* into the pinned download stage, with the ops before it (one graph) */
    R_DECODE_LAYERS,
};

struct rec {
    int kind;
    int i[13];
    float f[2];
    const void *p[8];
    size_t z[2];
};

/* A KV view in a record: p[0..2] = k, v, block table; i[0..2] = block size,
 * blocks per sequence, kv_dim; i[10] = element type: 0 f32, 1 f16, 2 e4m3;
 * i[12] = blocks in each pool (R_KV_WRITE and R_ATTN); z[0] = cu_kv.splits
 * (R_ATTN). */
static void put_kv(rec *r, const hearth_kv_view *kv, int layer) {
    r->p[0] = kv->k[layer];
    r->p[1] = kv->v[layer];
    r->p[2] = kv->block_table;
    r->i[0] = kv->block_size;
    r->i[1] = kv->max_blocks_per_seq;
    r->i[2] = kv->kv_dim;
    r->i[10] = kv->type == HEARTH_DT_F16 ? 1 : kv->type == HEARTH_DT_E4M3 ? 2 : 0;
    r->i[12] = kv->n_blocks;
}

static cu_kv get_kv(const rec *r) {
    return cu_kv{(void *)r->p[0], (void *)r->p[1], (const int32_t *)r->p[2], r->i[0], r->i[1], r->i[2], r->i[10] == 1,
                 r->i[10] == 2, 0, r->i[12], (int)r->z[0]};
}

/* Whether a launch unit wrote KV, and at which rows (seq, pos, T): the
 * attention that follows may read other positions before its wait
 * (cu_kv.early). seq NULL with valid set: a writer at rows not known. */
typedef struct kv_writer {
    int valid;
    const void *seq, *pos;
    int T;
} kv_writer;
static const kv_writer kvw_unknown = {1, NULL, NULL, 0};

#define MAX_RECS 16384
#define N_GRAPHS 48 /* the engine warm-up captures ~23 step shapes, a forward and its pick apart */
#define N_SEEN 16
#define PENDING_MIN_RECS 64 /* this many records issued is a forward: a waiting graph is instantiated behind it */
#define STAGE_BYTES (8u << 20) /* two halves: a step begun ahead fills one while the other's copies may wait */
#define STAGE_HALF (STAGE_BYTES / 2)
#define STAGE_MAX_UPLOAD (1u << 20)
#define ATT_CNT 4096 /* (row, kv head group) counters: 8 rows x 512 */
#define DL_STAGE_BYTES (16u << 20)
#define DL_ASYNC_BYTES (4u << 20) /* each of the two downloads begun (op_download_begin), after DL_STAGE_BYTES */
#define PROF_EVENTS 256
#define MAX_PROF 256 /* launch units a profile tells apart: a run of several streams makes one per row count */

struct graph_entry {
    int n;
    rec *recs;
    cudaGraphExec_t exec;
    long last_use;
};

/* A graph captured but not yet instantiated (capture_for_later). */
struct pending_graph {
    cudaGraph_t graph;
    uint64_t hash;
    int n;
    rec *recs;
    long syncs; /* the context's syncs when it was captured */
};

struct hearth_cuda_ctx {
    int device;
    char dev_name[160];
    int max_tokens, max_cols, max_ctx;
    cudaStream_t stream;
    cu_sm_share share; /* the stream's green context (hearth_cuda_ctx_set_sm_share), if any */
    cu_launch L;
    cudaError_t err;
    const char *err_where;
    int err_logged;
    cu_mm_state mm;
    float *part;
    size_t part_floats;
    int *att_cnt; /* ATT_CNT zeroed counters of the decode attention kernel */
    kv_writer kvw_last; /* the last unit launched */
    void *blas_ws;
    size_t blas_ws_bytes;

    rec *recs;
    int n_recs;
    uint8_t *stage; /* pinned */
    size_t stage_off; /* into its half stage_half */
    int stage_half;
    int stage_sealed; /* the half's uploads are those of a step whose download is begun (op_download_begin) */
    /* downloads begun and not ended (op_download_begin), the oldest first: each its slot of the pinned
     * download staging, the event after its copy and the upload half its step filled */
    struct {
        cudaEvent_t ev;
        void *dst;
        size_t bytes;
        int half, done;
    } adl[2];
    int adl_first, adl_n;
    uint8_t *dl_stage; /* pinned */
    void *dl_stage_dev; /* dl_stage as the device writes it (a fused pick + download), NULL where it cannot */

    int graphs_on;
    graph_entry graphs[N_GRAPHS];
    pending_graph pending;
    long syncs;              /* stream synchronisations by flush() */
    int issued_since_sync;   /* records issued since the last one */
    uint64_t seen_hash[N_SEEN];
    int seen_n[N_SEEN], seen_next;
    uint64_t nocap_hash[N_SEEN];
    int nocap_next;
    long tick;
    hearth_cuda_stats stats;
    int fuse;
    int attn_cluster_cap; /* cu_attention_cluster's cap */
    int attn_rows_min;    /* from how many rows decode attention runs the tensor-core rows kernel, */
    int attn_rows_ctx;    /* ... over contexts of this many positions (below them, from 9 rows) */
    int rope_gemv_rows;   /* up to which T the q/k/v GEMV takes the rope + KV epilogue */
    int split_rows;       /* prepare_weight re-lays quantized rows (split_rows.cu) */
    int pick_parts;       /* the pick's first pass as a wave of blocks over each row's chunks (pick.cu) */
    int pick_dl;          /* a pick and the download of its picks as one kernel (run_unit) */
    int mm_qkv;           /* q, k and v as one GEMM on the cuBLAS path (qkv_stack_unit) */
    float *stack;         /* that GEMM's output, [T][Nq + Nk + Nv]: reserved at load (prepare_set) */
    size_t stack_bytes;
    void *train_tmp;      /* the training ops' scratch (cu_train_scratch), grown on demand */
    size_t train_tmp_bytes;
    int profile, pdl_saved;
    struct {                /* decode_layers: its device table of the layers, and scratch */
        int on;             /* HEARTH_DECODE_LAYERS=0: the layers op by op (A/B benchmarks) */
        int n_layers, n_sm; /* what tab, scratch and plan were made for */
        cu_dl_layer *h_tab, *d_tab;
        void *scratch;
        cu_dl_plan_t plan;
        int plan_ok;
    } dl;
    cudaEvent_t prof_ev[PROF_EVENTS];
    struct {
        char label[96];
        double ms;
        long count;
    } prof[MAX_PROF];
    int n_prof;
};

/* ---- errors --------------------------------------------------------------- */

static void note(hearth_cuda_ctx *c, cudaError_t e, const char *where) {
    if (e == cudaSuccess) return;
    if (c->err == cudaSuccess) {
        c->err = e;
        c->err_where = where;
    } else if (!c->err_where) {
        c->err_where = where;
    }
    if (!c->err_logged) {
        c->err_logged = 1;
        hearth_log_error("cuda:%d: %s: %s", c->device, where, cudaGetErrorString(e));
    }
}

/* Errors the launchers noted in c->err without a place. */
static void check_launch(hearth_cuda_ctx *c, const char *where) {
    if (c->err != cudaSuccess && !c->err_where) {
        cudaError_t e = c->err;
        c->err = cudaSuccess;
        note(c, e, where);
    }
}

/* ---- running records ------------------------------------------------------ */

/* An attention record, with a prepared copy of its output (returns 1 when
 * written: cu_attention). */
static int run_attn(hearth_cuda_ctx *c, const rec *r, int prep_kind, void *prep) {
    static int early_off = -1; /* HEARTH_ATTN_EARLY=0: no reads before the wait (benchmarks) */
    if (early_off < 0) {
        const char *s = getenv("HEARTH_ATTN_EARLY");
        early_off = s && atoi(s) == 0;
    }
    cu_kv kv = get_kv(r);
    /* the unit before wrote no KV, or only at these rows (the model's rope+kv_write before attention) */
    const kv_writer *w = &c->kvw_last;
    kv.early = !early_off && (!w->valid || (w->seq && w->seq == r->p[5] && w->pos == r->p[6] && w->T == r->i[3]));
    return cu_attention(&c->L, (float *)r->p[3], (const float *)r->p[4], r->i[3], &kv, (const int32_t *)r->p[5],
                        (const int32_t *)r->p[6], r->i[4], r->i[5], r->i[6], r->f[0], r->i[7], r->i[8], r->i[9],
                        r->i[11] ? c->attn_rows_min : c->attn_rows_min > 9 ? c->attn_rows_min : 9, c->part,
                        c->part_floats, c->att_cnt, ATT_CNT, prep_kind, prep);
}

/* An R_PICK record; host non-NULL: its picks written there too (a download fused in) */
static void run_pick(hearth_cuda_ctx *c, const rec *r, hearth_pick *host) {
    cu_pick(&c->L, (hearth_pick *)r->p[0], (const float *)r->p[1], r->i[0], r->i[1],
            (const hearth_pick_params *)r->p[2], (int32_t *)r->p[3], c->pick_parts ? c->part : NULL,
            c->part_floats * 4, host);
}

static void run_one(hearth_cuda_ctx *c, const rec *r) {
    const cu_launch *L = &c->L;
    if (r->kind != R_MATMUL) cu_mm_invalidate(&c->mm);
    switch (r->kind) {
    case R_UPLOAD:
        cu_note(L, cudaMemcpyAsync((void *)r->p[0], r->p[1], r->z[0], cudaMemcpyHostToDevice, c->stream));
        break;
    case R_COPY:
        cu_note(L, cudaMemcpyAsync((void *)r->p[0], r->p[1], r->z[0], cudaMemcpyDeviceToDevice, c->stream));
        break;
    case R_MATMUL:
        cu_matmul(L, &c->mm, (float *)r->p[0], (const float *)r->p[1], r->i[0], r->p[2], (hearth_dtype)r->i[1],
                  r->i[2], r->i[3], r->z[0], r->i[4]);
        break;
    case R_EMBED:
        cu_embed(L, (float *)r->p[0], r->p[1], (hearth_dtype)r->i[0], r->i[1], r->i[2], r->z[0], r->i[4],
                 (const int32_t *)r->p[2], r->i[3]);
        break;
    case R_RMSNORM:
        cu_rmsnorm(L, (float *)r->p[0], (const float *)r->p[1], (const float *)r->p[2], r->i[0], r->i[1], r->f[0]);
        break;
    case R_ROPE:
        cu_rope(L, (float *)r->p[0], r->i[0], r->i[1], r->i[2], (const int32_t *)r->p[1], (const float *)r->p[2],
                r->i[3], r->i[4]);
        break;
    case R_ADD_BIAS: cu_add_bias(L, (float *)r->p[0], (const float *)r->p[1], r->i[0], r->i[1]); break;
    case R_ADD: cu_add(L, (float *)r->p[0], (const float *)r->p[1], r->z[0]); break;
    case R_LORA: {
        float *y[3] = {(float *)r->p[0], (float *)r->p[1], (float *)r->p[2]};
        cu_lora(L, &c->mm, y, (const float *)r->p[3], r->i[0], r->i[1], (const float *)r->p[4], (const float *)r->p[5],
                r->i[2], r->i + 4, r->i[3], (const int32_t *)r->p[6], r->i[7], (float *)r->p[7]);
        break;
    }
    case R_SWIGLU:
        cu_swiglu(L, (float *)r->p[0], (const float *)r->p[1], (const float *)r->p[2], r->i[0], r->i[1]);
        break;
    case R_KV_WRITE: {
        cu_kv kv = get_kv(r);
        cu_kv_write(L, &kv, (const float *)r->p[3], (const float *)r->p[4], r->i[3], (const int32_t *)r->p[5],
                    (const int32_t *)r->p[6]);
        break;
    }
    case R_ATTN: run_attn(c, r, XPREP_NONE, NULL); break;
    case R_PICK:
        run_pick(c, r, NULL);
        break;
    case R_DOWNLOAD:
        cu_note(L, cudaMemcpyAsync((void *)r->p[0], r->p[1], r->z[0], cudaMemcpyDeviceToHost, c->stream));
        break;
    case R_DECODE_LAYERS: {
        const cu_dl_args a = {(float *)r->p[0], (const cu_dl_layer *)r->p[1], r->i[2], (const int32_t *)r->p[2],
                              r->i[0], r->i[1], (const int32_t *)r->p[3], (const int32_t *)r->p[4],
                              (const float *)r->p[5], r->i[3], r->f[0], r->f[1], (void *)r->p[6]};
        cu_decode_layers(L, &c->dl.plan, &a);
        break;
    }
    }
}

/* ---- fusion: patterns of consecutive records run as one launch ---------------
 * Each matcher checks that the fused kernel computes exactly what the records
 * would (same inputs, no aliasing that the separate ops would see
 * differently); anything else runs record by record. */

static int overlap(const void *a, size_t na, const void *b, size_t nb) {
    const char *x = (const char *)a, *y = (const char *)b;
    return x < y + nb && y < x + na;
}

/* matmul fields: p0 y, p1 x, p2 w, i0 T, i1 type, i2 N, i3 K, i4 layout, z0 row_bytes */
static size_t mm_ybytes(const rec *r) { return sizeof(float) * (size_t)r->i[0] * r->i[2]; }
static size_t mm_xbytes(const rec *r) { return sizeof(float) * (size_t)r->i[0] * r->i[3]; }
static int mm_gemv(const hearth_cuda_ctx *c, const rec *r) {
    return r->kind == R_MATMUL && cu_mm_gemv(&c->mm, r->i[0], (hearth_dtype)r->i[1]);
}
static int mm_same_input(const rec *a, const rec *b) {
    return a->p[1] == b->p[1] && a->i[0] == b->i[0] && a->i[1] == b->i[1] && a->i[3] == b->i[3] && a->i[4] == b->i[4] &&
           a->z[0] == b->z[0];
}

/* ---- dead stores: a fused kernel may skip writing a buffer that nothing
 * reads before it is overwritten ------------------------------------------ */

/* 1 when record r may read a byte of [p, p + n). Activations only: the KV
 * cache and block table (R_KV_WRITE, R_ATTN) are allocations of their own
 * (engine/kv.c), never an activation buffer, and are not compared. Unknown
 * kinds read everything. */
static int rec_reads(const rec *r, const void *p, size_t n) {
    const size_t f = sizeof(float);
    switch (r->kind) {
    case R_UPLOAD: return 0;
    case R_COPY: case R_DOWNLOAD: return overlap(r->p[1], r->z[0], p, n);
    case R_MATMUL:
        return overlap(r->p[1], f * r->i[0] * r->i[3], p, n) || overlap(r->p[2], r->z[0] * r->i[2], p, n);
    case R_EMBED: return overlap(r->p[1], r->z[0] * r->i[1], p, n) || overlap(r->p[2], 4 * (size_t)r->i[3], p, n);
    case R_RMSNORM:
        return overlap(r->p[1], f * r->i[0] * r->i[1], p, n) || overlap(r->p[2], f * r->i[1], p, n);
    case R_ROPE:
        return overlap(r->p[0], f * r->i[0] * r->i[1] * r->i[2], p, n) || overlap(r->p[1], 4 * (size_t)r->i[0], p, n) ||
               overlap(r->p[2], f * (r->i[3] / 2), p, n);
    case R_ADD_BIAS: return overlap(r->p[0], f * r->i[0] * r->i[1], p, n) || overlap(r->p[1], f * r->i[1], p, n);
    case R_ADD: return overlap(r->p[0], f * r->z[0], p, n) || overlap(r->p[1], f * r->z[0], p, n);
    case R_SWIGLU: return overlap(r->p[1], f * r->i[0] * r->i[1], p, n) || overlap(r->p[2], f * r->i[0] * r->i[1], p, n);
    case R_KV_WRITE:
        return overlap(r->p[3], f * r->i[3] * r->i[2], p, n) || overlap(r->p[4], f * r->i[3] * r->i[2], p, n) ||
               overlap(r->p[5], 4 * (size_t)r->i[3], p, n) || overlap(r->p[6], 4 * (size_t)r->i[3], p, n);
    case R_ATTN:
        return overlap(r->p[4], f * r->i[3] * r->i[4] * r->i[6], p, n) || overlap(r->p[5], 4 * (size_t)r->i[3], p, n) ||
               overlap(r->p[6], 4 * (size_t)r->i[3], p, n);
    case R_PICK:
        return overlap(r->p[1], f * r->i[0] * r->i[1], p, n) ||
               overlap(r->p[2], sizeof(hearth_pick_params) * r->i[0], p, n);
    }
    return 1;
}

/* 1 when record r overwrites all of [p, p + n) (after reading its inputs). */
static int rec_covers(const rec *r, const void *p, size_t n) {
    const size_t f = sizeof(float);
    const char *a = (const char *)p, *b = NULL;
    size_t m = 0;
    switch (r->kind) {
    case R_UPLOAD: case R_COPY: b = (const char *)r->p[0], m = r->z[0]; break;
    case R_MATMUL: b = (const char *)r->p[0], m = f * r->i[0] * r->i[2]; break;
    case R_EMBED: b = (const char *)r->p[0], m = f * r->i[3] * r->i[2]; break;
    case R_RMSNORM: b = (const char *)r->p[0], m = f * r->i[0] * r->i[1]; break;
    case R_SWIGLU: b = (const char *)r->p[0], m = f * r->i[0] * r->i[1]; break;
    case R_ATTN: b = (const char *)r->p[3], m = f * r->i[3] * r->i[4] * r->i[6]; break;
    default: return 0;
    }
    return b <= a && a + n <= b + m;
}

/* 1 when the value of [p, p + n) after recs[i] is dead: records i + 1.. read
 * none of it before one overwrites all of it. Records j in [i + 1, hit) are
 * matmuls served from the prepared copy of the buffer (matmul.cu's cache),
 * so they do not read it. The end of the records keeps everything live (the
 * host may download it). */
static int dead_after(const rec *recs, int i, int n, int hit, const void *p, size_t bytes) {
    for (int j = i + 1; j < n; j++) {
        if (j >= hit && rec_reads(&recs[j], p, bytes)) return 0;
        if (rec_covers(&recs[j], p, bytes)) return 1;
    }
    return 0;
}

/* The matmuls right after recs[i] that take x (T rows of K) from the cache
 * a fused kernel just set: consecutive matmuls of that x and prep kind whose
 * outputs leave x alone. Returns the index past them. */
static int cache_hits(const hearth_cuda_ctx *c, const rec *recs, int i, int n, const void *x, int T, int K, int kind) {
    int j = i + 1;
    while (j < n && recs[j].kind == R_MATMUL && recs[j].p[1] == x && recs[j].i[0] == T && recs[j].i[3] == K &&
           cu_mm_prep_kind(&c->mm, T, (hearth_dtype)recs[j].i[1]) == kind &&
           !overlap(recs[j].p[0], mm_ybytes(&recs[j]), x, mm_xbytes(&recs[j])))
        j++;
    return j;
}

static const char *type_name(int t) {
    const hearth_dtype_info *d = hearth_dtype_get((uint32_t)t);
    return d ? d->name : "?";
}

/* "T=5" up to 8 rows, then power-of-two ranges ("T=129-256"), so that a
 * profile of changing batch shapes keeps a bounded set of labels. */
static const char *rows_tag(char *buf, size_t n, const char *key, int T) {
    if (T <= 8) {
        snprintf(buf, n, "%s%d", key, T);
    } else {
        int hi = 16;
        while (hi < T) hi *= 2;
        snprintf(buf, n, "%s%d-%d", key, hi / 2 + 1, hi);
    }
    return buf;
}

/* The rope + KV epilogue (mmv_set.rope_half) for the q, k, v matmuls at r
 * when rope(q), rope(k), kv_write(k, v) follow (at r + 3 .. r + 5): up to
 * c->rope_gemv_rows rows, not neox, the outputs exactly q, k and v (those
 * of qkv: y[0..2], n[0..2]). Fills in set's rope fields; 0 when it does not
 * apply. */
static int rope_match(hearth_cuda_ctx *c, const rec *r, int left, const mmv_set *qkv, mmv_set *set) {
    if (r->i[0] > c->rope_gemv_rows || left < 6) return 0;
    const rec *rq = r + 3, *rk = r + 4, *kw = r + 5;
    if (rq->kind != R_ROPE || rk->kind != R_ROPE || kw->kind != R_KV_WRITE) return 0;
    const int T = r->i[0], hd = rq->i[2];
    if (rq->i[4] || rk->i[4] || rq->i[0] != T || rk->i[0] != T || kw->i[3] != T || rk->i[2] != hd ||
        rq->i[3] != rk->i[3] || rq->p[1] != rk->p[1] || rq->p[2] != rk->p[2] || kw->p[6] != rq->p[1] || hd % 2 ||
        rq->p[0] != qkv->y[0] || rk->p[0] != qkv->y[1] || kw->p[3] != qkv->y[1] || kw->p[4] != qkv->y[2] ||
        qkv->n[0] != rq->i[1] * hd || qkv->n[1] != rk->i[1] * hd || qkv->n[2] != kw->i[2] || kw->i[2] != qkv->n[1])
        return 0;
    set->rope_half = rq->i[3] / 2;
    set->hd = hd;
    set->pos = (const int32_t *)rq->p[1];
    set->seq = (const int32_t *)kw->p[5];
    set->inv_freq = (const float *)rq->p[2];
    set->kv = get_kv(kw);
    return 1;
}

/* 1 when the GEMV of set for matmul record m stores row pairs (the epilogue's need). */
static int mm_pairs(hearth_cuda_ctx *c, const rec *m, const mmv_set *set) {
    int kind = cu_mm_prep_kind(&c->mm, m->i[0], (hearth_dtype)m->i[1]);
    const void *xp = kind == XPREP_NONE ? m->p[1] : c->mm.xprep; /* the prepared copy's buffers are aligned */
    return cu_mmv_pairs(set, (hearth_dtype)m->i[1], m->i[0], m->i[3], m->z[0], xp);
}

/* The q, k, v matmuls at r as one set (count 3) with the rope + KV epilogue. */
static int rope_in_gemv(hearth_cuda_ctx *c, const rec *r, int left, mmv_set *set) {
    mmv_set probe = *set;
    if (!rope_match(c, r, left, set, &probe) || !mm_pairs(c, r, &probe)) return 0;
    *set = probe;
    return 1;
}

/* The same when v's weights are of another type than q and k's (llama.cpp's
 * Q4_K_M: Q6_K attn_v in some layers), x prepared alike for both: two sets
 * with the epilogue, v's (it stores v and its cache rows) and q and k's (qk:
 * count 2, rotated, k's cache rows), one launch where cu_matmul_set2 takes
 * them, else two GEMVs, v's first. 1 when it applies, with both sets filled
 * in. */
static int rope_in_gemv_split(hearth_cuda_ctx *c, const rec *r, int left, mmv_set *qk, mmv_set *v) {
    const rec *vr = r + 2;
    if (left < 6 || qk->count != 2 || !mm_gemv(c, vr) || vr->p[1] != r->p[1] || vr->i[0] != r->i[0] ||
        vr->i[3] != r->i[3] || vr->i[1] == r->i[1] ||
        cu_mm_prep_kind(&c->mm, r->i[0], (hearth_dtype)vr->i[1]) !=
            cu_mm_prep_kind(&c->mm, r->i[0], (hearth_dtype)r->i[1]) ||
        overlap(vr->p[0], mm_ybytes(vr), r->p[1], mm_xbytes(r)) ||
        overlap(vr->p[0], mm_ybytes(vr), r->p[0], mm_ybytes(r)) ||
        overlap(vr->p[0], mm_ybytes(vr), r[1].p[0], mm_ybytes(r + 1)))
        return 0;
    mmv_set qkv = *qk, a = *qk;
    qkv.y[2] = (float *)vr->p[0];
    qkv.n[2] = vr->i[2];
    if (!rope_match(c, r, left, &qkv, &a)) return 0;
    mmv_set b = a; /* the rope fields */
    b.w[0] = b.w[1] = NULL;
    b.y[0] = b.y[1] = NULL;
    b.n[0] = b.n[1] = 0; /* its rows are the set's third matrix: rope_kv_store stores them as v */
    b.w[2] = (const uint8_t *)vr->p[2];
    b.y[2] = (float *)vr->p[0];
    b.n[2] = vr->i[2];
    b.count = 3;
    b.split = vr->i[4];
    if (!mm_pairs(c, r, &a) || !mm_pairs(c, vr, &b)) return 0;
    *qk = a;
    *v = b;
    return 1;
}

/* rope(q), rope(k), kv_write(k, v) at r (of left records) that cu_rope_kv
 * runs as one: one T, positions, frequencies, rotated dims and pairing,
 * kv_write storing rope(k)'s rows at rope's positions, q, k and v apart. */
static int rope_kv_fits(const rec *r, int left) {
    if (left < 3 || r->kind != R_ROPE || r[1].kind != R_ROPE || r[2].kind != R_KV_WRITE) return 0;
    if (r->i[0] != r[1].i[0] || r->i[2] != r[1].i[2] || r->p[1] != r[1].p[1] || r->p[2] != r[1].p[2] ||
        r->i[3] != r[1].i[3] || r->i[4] != r[1].i[4] || r[2].p[3] != r[1].p[0] || r[2].p[6] != r->p[1] ||
        r[2].i[3] != r->i[0] || r[2].i[2] != r[1].i[1] * r[1].i[2])
        return 0;
    const int T = r->i[0], hd = r->i[2];
    const size_t qb = sizeof(float) * (size_t)T * r->i[1] * hd, kb = sizeof(float) * (size_t)T * r[2].i[2];
    return !overlap(r->p[0], qb, r[1].p[0], kb) && !overlap(r->p[0], qb, r[2].p[4], kb) &&
           !overlap(r[1].p[0], kb, r[2].p[4], kb);
}

/* The q, k and v matmuls of one x on the cuBLAS path, then rope(q),
 * rope(k), kv_write(k, v) of their outputs: one GEMM of the three stacked
 * (cu_matmul_stack) into c->stack [T][Nq + Nk + Nv], then one cu_rope_kv
 * reading its rows, which writes rotated q into q's buffer (the attention
 * reads it), k and v into theirs only where a later record reads them
 * before one overwrites them (the last layer's; dead_after), and the cache
 * as the three ops would. bench_gemm on the H200 (Llama-8B shapes, bf16):
 * one GEMM 19.4 us against 28.1 for q and the k + v pair at 128 rows, 37.2
 * against 43.4 at 512, 128.6 against 136.1 at 2048. cuBLAS may sum in
 * another order for the stacked shape than for the three (the last bits of
 * q, k, v). Returns the records taken (6), 0 when it does not apply. */
static int qkv_stack_unit(hearth_cuda_ctx *c, const rec *recs, int i, int n, char *label, size_t lsz) {
    const rec *r = &recs[i], *rq = r + 3, *rk = r + 4, *kw = r + 5;
    if (!c->mm_qkv || n - i < 6 || !rope_kv_fits(rq, 3)) return 0;
    const int T = r->i[0], K = r->i[3], hd = rq->i[2];
    for (int j = 0; j < 3; j++) {
        const rec *m = r + j;
        if (m->kind != R_MATMUL || mm_gemv(c, m) || m->p[1] != r->p[1] || m->i[0] != T || m->i[3] != K ||
            overlap(m->p[0], mm_ybytes(m), r->p[1], mm_xbytes(r)))
            return 0;
    }
    /* the outputs are exactly rope(q)'s, rope(k)'s (kv_write's k) and kv_write's v (apart: rope_kv_fits) */
    if (rq->p[0] != r->p[0] || rk->p[0] != r[1].p[0] || kw->p[4] != r[2].p[0] || rq->i[0] != T ||
        r->i[2] != rq->i[1] * hd || r[1].i[2] != kw->i[2] || r[2].i[2] != kw->i[2])
        return 0;
    const int nq = r->i[2], nk = r[1].i[2], N = nq + 2 * nk;
    if (sizeof(float) * (size_t)T * N > c->stack_bytes) return 0;
    cu_mm_mat m[3];
    for (int j = 0; j < 3; j++)
        m[j] = cu_mm_mat{r[j].p[2], (hearth_dtype)r[j].i[1], r[j].i[2], r[j].z[0], r[j].i[4]};
    if (!cu_matmul_stack(&c->L, &c->mm, c->stack, (const float *)r->p[1], T, K, m, 3)) return 0;
    const size_t kb = mm_ybytes(r + 1);
    const int keep_k = !dead_after(recs, i + 5, n, i + 6, r[1].p[0], kb),
              keep_v = !dead_after(recs, i + 5, n, i + 6, r[2].p[0], kb);
    cu_mm_invalidate(&c->mm);
    cu_kv kv = get_kv(kw);
    cu_qkv_rows in = {c->stack, c->stack + nq, c->stack + nq + nk, N, N};
    cu_rope_kv(&c->L, &in, (float *)r->p[0], keep_k ? (float *)r[1].p[0] : NULL, keep_v ? (float *)r[2].p[0] : NULL,
               T, rq->i[1], rk->i[1], hd, (const int32_t *)rq->p[1], (const float *)rq->p[2], rq->i[3], rq->i[4], &kv,
               (const int32_t *)kw->p[5]);
    char types[32], tb[24];
    if (r->i[1] == r[1].i[1] && r->i[1] == r[2].i[1])
        snprintf(types, sizeof types, "%s", type_name(r->i[1]));
    else
        snprintf(types, sizeof types, "%s+%s+%s", type_name(r->i[1]), type_name(r[1].i[1]), type_name(r[2].i[1]));
    snprintf(label, lsz, "matmul x3 %s %dx%d %s (cublas one) +rope+kv_write%s", types, N, K,
             rows_tag(tb, sizeof tb, "T=", T),
             !keep_k && !keep_v ? " (no k, v)" : !keep_k ? " (no k)" : !keep_v ? " (no v)" : "");
    return 6;
}

/* Runs the unit starting at recs[i]; returns how many records it took and
 * names it in label (for the profile). */
static int run_unit(hearth_cuda_ctx *c, const rec *recs, int i, int n, char *label, size_t lsz) {
    const rec *r = &recs[i];
    char tb[24];
    const cu_launch *L = &c->L;
    int left = n - i;
    if (c->fuse) {
        /* gate, up, swiglu(out, gate, up) */
        if (left >= 3 && mm_gemv(c, r) && mm_gemv(c, r + 1) && mm_same_input(r, r + 1) && r->i[2] == r[1].i[2] &&
            r[2].kind == R_SWIGLU && r[2].p[1] == r->p[0] && r[2].p[2] == r[1].p[0] && r[2].i[0] == r->i[0] &&
            r[2].i[1] == r->i[2] && !overlap(r->p[0], mm_ybytes(r), r[1].p[0], mm_ybytes(r)) &&
            !overlap(r->p[0], mm_ybytes(r), r->p[1], mm_xbytes(r)) &&
            !overlap(r[1].p[0], mm_ybytes(r), r->p[1], mm_xbytes(r)) &&
            !overlap(r[2].p[0], mm_ybytes(r), r->p[1], mm_xbytes(r)) &&
            (r[2].p[0] == r->p[0] || r[2].p[0] == r[1].p[0] ||
             (!overlap(r[2].p[0], mm_ybytes(r), r->p[0], mm_ybytes(r)) &&
              !overlap(r[2].p[0], mm_ybytes(r), r[1].p[0], mm_ybytes(r))))) {
            mmv_set set = {};
            set.w[0] = (const uint8_t *)r->p[2];
            set.w[1] = (const uint8_t *)r[1].p[2];
            set.y[0] = (float *)r->p[0];
            set.y[1] = (float *)r[1].p[0];
            set.n[0] = set.n[1] = r->i[2];
            set.swiglu = 1;
            set.split = r->i[4];
            set.out = (float *)r[2].p[0];
            /* the next matmul reads out: its bf16 / f16 copy comes from the epilogue */
            if (left >= 4 && r[3].kind == R_MATMUL && r[3].p[1] == r[2].p[0] && r[3].i[0] == r->i[0] &&
                r[3].i[3] == r->i[2]) {
                int kind = cu_mm_prep_kind(&c->mm, r->i[0], (hearth_dtype)r[3].i[1]);
                if (kind == XPREP_BF16 || kind == XPREP_F16) set.prep_kind = kind;
            }
            cu_matmul_set(L, &c->mm, &set, (const float *)r->p[1], r->i[0], (hearth_dtype)r->i[1], r->i[3], r->z[0]);
            snprintf(label, lsz, "matmul gate+up+swiglu %s %dx%d %s", type_name(r->i[1]), r->i[2], r->i[3],
                     rows_tag(tb, sizeof tb, "T=", r->i[0]));
            return 3;
        }
        /* up to 3 matmuls of one x (q, k, v) */
        if (left >= 2 && mm_gemv(c, r)) {
            int m = 1;
            while (m < 3 && m < left && mm_gemv(c, r + m) && mm_same_input(r, r + m)) {
                const rec *q = r + m;
                int ok = !overlap(q->p[0], mm_ybytes(q), r->p[1], mm_xbytes(r));
                for (int j = 0; j < m && ok; j++) ok = !overlap(q->p[0], mm_ybytes(q), r[j].p[0], mm_ybytes(r + j));
                if (!ok) break;
                m++;
            }
            if (m >= 2 && !overlap(r->p[0], mm_ybytes(r), r->p[1], mm_xbytes(r))) {
                mmv_set set = {};
                int rows = 0;
                for (int j = 0; j < m; j++) {
                    set.w[j] = (const uint8_t *)r[j].p[2];
                    set.y[j] = (float *)r[j].p[0];
                    set.n[j] = r[j].i[2];
                    rows += r[j].i[2];
                }
                set.count = m;
                set.split = r->i[4];
                /* q, k, v -> rope(q), rope(k), kv_write(k, v): the rope and the KV stores in the GEMV's epilogue */
                int rk = m == 3 && rope_in_gemv(c, r, left, &set);
                mmv_set vset;
                if (m == 2 && rope_in_gemv_split(c, r, left, &set, &vset)) {
                    const rec *vr = r + 2;
                    const int one = cu_matmul_set2(L, &c->mm, &vset, (hearth_dtype)vr->i[1], vr->z[0], &set,
                                                   (hearth_dtype)r->i[1], r->z[0], (const float *)r->p[1], r->i[0],
                                                   r->i[3]);
                    if (!one) {
                        cu_matmul_set(L, &c->mm, &vset, (const float *)vr->p[1], vr->i[0], (hearth_dtype)vr->i[1],
                                      vr->i[3], vr->z[0]);
                        cu_matmul_set(L, &c->mm, &set, (const float *)r->p[1], r->i[0], (hearth_dtype)r->i[1],
                                      r->i[3], r->z[0]);
                    }
                    snprintf(label, lsz, "matmul x2 %s %dx%d + %s %dx%d %s +rope+kv_write%s", type_name(r->i[1]),
                             rows, r->i[3], type_name(vr->i[1]), vr->i[2], vr->i[3],
                             rows_tag(tb, sizeof tb, "T=", r->i[0]), one ? " (one launch)" : "");
                    return 6;
                }
                cu_matmul_set(L, &c->mm, &set, (const float *)r->p[1], r->i[0], (hearth_dtype)r->i[1], r->i[3],
                              r->z[0]);
                snprintf(label, lsz, "matmul x%d %s %dx%d %s%s", m, type_name(r->i[1]), rows, r->i[3],
                         rows_tag(tb, sizeof tb, "T=", r->i[0]), rk ? " +rope+kv_write" : "");
                return m + (rk ? 3 : 0);
            }
        }
        /* q, k, v on the cuBLAS path, then their rope + KV store: one GEMM for the three (HEARTH_MM_QKV=0: not) */
        if (int took = qkv_stack_unit(c, recs, i, n, label, lsz)) return took;
        /* two matmuls of one x and one shape on the cuBLAS path (k and v; gate and up): one batched GEMM
         * where that is faster (cu_matmul_pair decides) */
        if (left >= 2 && r->kind == R_MATMUL && r[1].kind == R_MATMUL && !mm_gemv(c, r) && mm_same_input(r, r + 1) &&
            r->i[2] == r[1].i[2] && !overlap(r->p[0], mm_ybytes(r), r[1].p[0], mm_ybytes(r)) &&
            !overlap(r->p[0], mm_ybytes(r), r->p[1], mm_xbytes(r)) &&
            !overlap(r[1].p[0], mm_ybytes(r), r->p[1], mm_xbytes(r)) &&
            cu_matmul_pair(L, &c->mm, (float *)r->p[0], (float *)r[1].p[0], (const float *)r->p[1], r->i[0], r->p[2],
                           r[1].p[2], (hearth_dtype)r->i[1], r->i[2], r->i[3], r->z[0], r->i[4])) {
            snprintf(label, lsz, "matmul x2 %s %dx%d %s (cublas batched)", type_name(r->i[1]), r->i[2], r->i[3],
                     rows_tag(tb, sizeof tb, "T=", r->i[0]));
            return 2;
        }
        /* [add(X, D)] rmsnorm(Y, X) [-> matmul(x = Y) needing prep] */
        {
            const rec *a = r->kind == R_ADD ? r : NULL, *nr = a ? r + 1 : r;
            int took = a ? 2 : 1;
            if ((!a || left >= 2) && nr->kind == R_RMSNORM && nr->i[1] > 256 &&
                (!a || (nr->p[1] == a->p[0] && (size_t)nr->i[0] * nr->i[1] == a->z[0]))) {
                int rows = nr->i[0], dim = nr->i[1], kind = XPREP_NONE;
                const rec *mm = took < left ? nr + 1 : NULL;
                if (mm && mm->kind == R_MATMUL && mm->p[1] == nr->p[0] && mm->i[0] == rows && mm->i[3] == dim)
                    kind = cu_mm_prep_kind(&c->mm, rows, (hearth_dtype)mm->i[1]);
                if (!cu_add_rmsnorm_fits(dim, kind)) kind = XPREP_NONE;
                if (cu_add_rmsnorm_fits(dim, kind) && (a || kind != XPREP_NONE)) {
                    /* Y itself is not stored when only the prepared copy is read before Y is overwritten */
                    const float *Y = (const float *)nr->p[0];
                    size_t yb = sizeof(float) * (size_t)rows * dim;
                    int ni = (int)(nr - recs);
                    int dead = kind != XPREP_NONE && nr->p[0] != nr->p[1] &&
                               dead_after(recs, ni, n, cache_hits(c, recs, ni, n, Y, rows, dim, kind), Y, yb);
                    cu_mm_invalidate(&c->mm);
                    cu_add_rmsnorm(L, (float *)nr->p[1], a ? (const float *)a->p[1] : NULL,
                                   dead ? NULL : (float *)nr->p[0], (const float *)nr->p[2], rows, dim, nr->f[0], kind,
                                   c->mm.xprep);
                    if (kind != XPREP_NONE) cu_mm_set_cache(&c->mm, (const float *)nr->p[0], rows, dim, kind, c->mm.xprep);
                    snprintf(label, lsz, "%srmsnorm%s dim %d %s%s", a ? "add+" : "",
                             kind != XPREP_NONE ? "+prep" : "", dim, rows_tag(tb, sizeof tb, "rows ", rows),
                             dead ? " (no y)" : "");
                    return took;
                }
            }
        }
        /* swiglu(out, gate, up) -> matmul(x = out) needing a bf16 / f16 copy */
        if (left >= 2 && r->kind == R_SWIGLU && r[1].kind == R_MATMUL && r[1].p[1] == r->p[0] &&
            r[1].i[0] == r->i[0] && r[1].i[3] == r->i[1]) {
            int kind = cu_mm_prep_kind(&c->mm, r->i[0], (hearth_dtype)r[1].i[1]);
            if (kind != XPREP_NONE && cu_swiglu_prep_fits(kind)) {
                const float *O = (const float *)r->p[0];
                size_t ob = sizeof(float) * (size_t)r->i[0] * r->i[1];
                int dead = dead_after(recs, i, n, cache_hits(c, recs, i, n, O, r->i[0], r->i[1], kind), O, ob);
                cu_mm_invalidate(&c->mm);
                cu_swiglu_prep(L, dead ? NULL : (float *)r->p[0], (const float *)r->p[1], (const float *)r->p[2],
                               r->i[0], r->i[1], kind, c->mm.xprep);
                cu_mm_set_cache(&c->mm, O, r->i[0], r->i[1], kind, c->mm.xprep);
                snprintf(label, lsz, "swiglu+prep%s", dead ? " (no out)" : "");
                return 1;
            }
        }
        /* attention -> matmul(x = its output) needing a prepared copy (o projection): the few-rows decode
         * kernel writes the copy (HEARTH_ATTN_PREP=0 leaves it to the matmul, for benchmarks) */
        static int attn_prep = -1;
        if (attn_prep < 0) {
            const char *s = getenv("HEARTH_ATTN_PREP");
            attn_prep = !(s && atoi(s) == 0);
        }
        if (attn_prep && left >= 2 && r->kind == R_ATTN && r[1].kind == R_MATMUL && r[1].p[1] == r->p[3] &&
            r[1].i[0] == r->i[3] && r[1].i[3] == r->i[4] * r->i[6]) {
            int kind = cu_mm_prep_kind(&c->mm, r->i[3], (hearth_dtype)r[1].i[1]);
            if (kind == XPREP_BF16 || kind == XPREP_F16 || kind == XPREP_Q8 || kind == XPREP_Q8K) {
                cu_mm_invalidate(&c->mm);
                int prepped = run_attn(c, r, kind, c->mm.xprep);
                if (prepped) cu_mm_set_cache(&c->mm, (const float *)r->p[3], r->i[3], r[1].i[3], kind, c->mm.xprep);
                snprintf(label, lsz, "attention %s%s", rows_tag(tb, sizeof tb, "T=", r->i[3]),
                         prepped ? "+prep" : r->i[3] > 8 ? " (tensor cores)" : "");
                return 1;
            }
        }
        /* a pick, then the download of its picks (hearth_model_pick): the pick writes them into the pinned
         * staging too, which the host reads once the stream is done, and no copy waits behind it (s59's trace
         * of a Q4_0 token: the copy ended 6 us after the pick) */
        const uint8_t *dl = left >= 2 ? (const uint8_t *)r[1].p[0] : NULL;
        if (c->pick_dl && left >= 2 && r->kind == R_PICK && r[1].kind == R_DOWNLOAD && c->dl_stage_dev &&
            dl >= c->dl_stage && dl < c->dl_stage + DL_STAGE_BYTES + 2 * DL_ASYNC_BYTES && r[1].p[1] == r->p[0] &&
            r[1].z[0] == sizeof(hearth_pick) * (size_t)r->i[0]) {
            run_pick(c, r, (hearth_pick *)((uint8_t *)c->dl_stage_dev + (dl - c->dl_stage)));
            snprintf(label, lsz, "pick+download");
            return 2;
        }
        /* rope(q), rope(k), kv_write(k, v), in place */
        if (rope_kv_fits(r, left)) {
            int T = r->i[0], hd = r->i[2];
            cu_mm_invalidate(&c->mm);
            cu_kv kv = get_kv(&r[2]);
            cu_qkv_rows in = {(const float *)r->p[0], (const float *)r[1].p[0], (const float *)r[2].p[4], r->i[1] * hd,
                              r[2].i[2]};
            cu_rope_kv(L, &in, (float *)r->p[0], (float *)r[1].p[0], NULL, T, r->i[1], r[1].i[1], hd,
                       (const int32_t *)r->p[1], (const float *)r->p[2], r->i[3], r->i[4], &kv,
                       (const int32_t *)r[2].p[5]);
            snprintf(label, lsz, "rope+rope+kv_write %s", rows_tag(tb, sizeof tb, "T=", T));
            return 3;
        }
    }
    run_one(c, r);
    switch (r->kind) {
    case R_MATMUL:
        snprintf(label, lsz, "matmul %s %dx%d %s%s", type_name(r->i[1]), r->i[2], r->i[3],
                 rows_tag(tb, sizeof tb, "T=", r->i[0]),
                 mm_gemv(c, r) ? "" : " (cublas)");
        break;
    case R_ATTN:
        snprintf(label, lsz, "attention %s%s", rows_tag(tb, sizeof tb, "T=", r->i[3]),
                 r->i[3] > 8 ? " (tensor cores)" : "");
        break;
    default: {
        static const char *names[] = {"?", "upload", "copy", "matmul", "embed", "rmsnorm", "rope", "add_bias",
                                      "add", "lora", "swiglu", "kv_write", "attention", "pick", "download",
                                      "decode_layers"};
        snprintf(label, lsz, "%s", names[r->kind]);
    }
    }
    return 1;
}

static void prof_add(hearth_cuda_ctx *c, const char *label, float ms) {
    int k = 0;
    while (k < c->n_prof && strcmp(c->prof[k].label, label)) k++;
    if (k == c->n_prof && k >= MAX_PROF - 1) { /* the last slot sums every unit that found no slot */
        label = "(other launch units)";
        k = 0;
        while (k < c->n_prof && strcmp(c->prof[k].label, label)) k++;
    }
    if (k == c->n_prof) {
        snprintf(c->prof[k].label, sizeof c->prof[0].label, "%s", label);
        c->prof[k].ms = 0.0;
        c->prof[k].count = 0;
        c->n_prof++;
    }
    c->prof[k].ms += ms;
    c->prof[k].count++;
}

/* Runs a unit and notes whether it wrote KV (kvw_last). */
static int run_unit_kv(hearth_cuda_ctx *c, const rec *recs, int i, int n, char *label, size_t lsz) {
    int took = run_unit(c, recs, i, n, label, lsz);
    c->kvw_last.valid = 0;
    for (int j = i; j < i + took; j++)
        if (recs[j].kind == R_KV_WRITE) {
            c->kvw_last.valid = 1;
            c->kvw_last.seq = recs[j].p[5];
            c->kvw_last.pos = recs[j].p[6];
            c->kvw_last.T = recs[j].i[3];
        }
    return took;
}

static void run_recs(hearth_cuda_ctx *c, const rec *recs, int n) {
    char label[96];
    cu_mm_invalidate(&c->mm);
    if (!c->profile) {
        for (int i = 0; i < n;) i += run_unit_kv(c, recs, i, n, label, sizeof label);
    } else {
        /* an event pair around each unit; the stream is drained per batch */
        for (int i = 0; i < n;) {
            int nu = 0;
            char labels[PROF_EVENTS / 2][96];
            while (i < n && nu < PROF_EVENTS / 2) {
                cudaEventRecord(c->prof_ev[2 * nu], c->stream);
                i += run_unit_kv(c, recs, i, n, labels[nu], sizeof labels[0]);
                cudaEventRecord(c->prof_ev[2 * nu + 1], c->stream);
                nu++;
            }
            cudaStreamSynchronize(c->stream);
            for (int u = 0; u < nu; u++) {
                float ms = 0.0f;
                cudaEventElapsedTime(&ms, c->prof_ev[2 * u], c->prof_ev[2 * u + 1]);
                prof_add(c, labels[u], ms);
            }
        }
    }
    cu_mm_invalidate(&c->mm);
}

static uint64_t hash_recs(const rec *recs, int n) {
    const uint64_t *w = (const uint64_t *)recs;
    size_t nw = sizeof(rec) * (size_t)n / 8;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (size_t i = 0; i < nw; i++) {
        h ^= w[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static void drop_graphs(hearth_cuda_ctx *c) {
    for (int i = 0; i < N_GRAPHS; i++) {
        graph_entry *g = &c->graphs[i];
        if (g->exec) cudaGraphExecDestroy(g->exec);
        free(g->recs);
        memset(g, 0, sizeof *g);
    }
    if (c->pending.graph) cudaGraphDestroy(c->pending.graph);
    free(c->pending.recs);
    memset(&c->pending, 0, sizeof c->pending);
    memset(c->seen_n, 0, sizeof c->seen_n);
}

static void instantiate_graph(hearth_cuda_ctx *c, pending_graph p);

/* Capture recs[0..n) as a graph for the next time they come; nothing is
 * run, nothing instantiated. The caller has just issued the same records
 * eagerly, so the host captures while the device runs them (s27-run1: a step
 * captured before its launch left the device idle 4.97 ms). Instantiating
 * the graph (3.3 ms for a 390-node prompt-chunk step, s28-run2) is left to
 * a later flush, while the device runs the next forward and the host would
 * wait for it anyway: done here, it outlasted the device's run and delayed
 * the step's tokens (a repeated 4000-token prompt's second hit: 10.7 ms to
 * its first token against 7.0).
 * A short sequence (a pick: tens of microseconds to instantiate) is
 * instantiated at once. kvw is the last unit's KV writer as it was before
 * the eager run, so the capture makes the eager run's choices. One graph
 * waits at a time: with one waiting, no other long sequence is captured (the
 * records stay seen, so a later sighting captures them). A failed capture
 * puts the records' hash on the no-capture list. */
static void capture_for_later(hearth_cuda_ctx *c, uint64_t h, kv_writer kvw) {
    const int now = c->n_recs < PENDING_MIN_RECS;
    if (c->pending.graph && !now) return;
    rec *copy = (rec *)malloc(sizeof(rec) * (size_t)c->n_recs);
    if (!copy) return;
    cudaError_t saved = c->err;
    const char *saved_where = c->err_where;
    const kv_writer after = c->kvw_last;
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        free(copy);
        c->nocap_hash[c->nocap_next++ % N_SEEN] = h;
        return;
    }
    c->err = cudaSuccess;
    c->kvw_last = kvw;
    run_recs(c, c->recs, c->n_recs);
    c->kvw_last = after;
    cudaError_t run_err = c->err;
    c->err = saved;
    c->err_where = saved_where;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    if (e != cudaSuccess || run_err != cudaSuccess || !graph) {
        cudaGetLastError();
        if (graph) cudaGraphDestroy(graph);
        free(copy);
        c->nocap_hash[c->nocap_next++ % N_SEEN] = h;
        return;
    }
    memcpy(copy, c->recs, sizeof(rec) * (size_t)c->n_recs);
    const pending_graph p = {graph, h, c->n_recs, copy, c->syncs};
    if (now)
        instantiate_graph(c, p);
    else
        c->pending = p;
}

/* Instantiate a captured graph into the least recently used slot (a long one
 * at a later wait of the host, with a forward running on the device); its
 * graph and records pass to the slot or are freed. */
static void instantiate_graph(hearth_cuda_ctx *c, pending_graph p) {
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaGraphInstantiate(&exec, p.graph, 0);
    cudaGraphDestroy(p.graph);
    if (e != cudaSuccess || !exec) {
        cudaGetLastError();
        free(p.recs);
        c->nocap_hash[c->nocap_next++ % N_SEEN] = p.hash;
        return;
    }
    graph_entry *slot = &c->graphs[0];
    for (int i = 0; i < N_GRAPHS; i++) {
        if (!c->graphs[i].exec) {
            slot = &c->graphs[i];
            break;
        }
        if (c->graphs[i].last_use < slot->last_use) slot = &c->graphs[i];
    }
    if (slot->exec) cudaGraphExecDestroy(slot->exec);
    free(slot->recs);
    *slot = (graph_entry){p.n, p.recs, exec, ++c->tick};
    c->stats.graph_captures++;
}

/* The host is about to wait with a forward's worth of work on the device:
 * time to instantiate a graph captured before the last wait. Not one
 * captured since: its step's tokens are still to be chosen and handed out
 * (the engine hands a step's tokens out after the next forward is submitted,
 * before it waits for that forward's pick). */
static void host_waits(hearth_cuda_ctx *c) {
    if (c->pending.graph && c->pending.syncs != c->syncs && c->issued_since_sync >= PENDING_MIN_RECS) {
        const pending_graph p = c->pending;
        memset(&c->pending, 0, sizeof c->pending);
        instantiate_graph(c, p);
    }
    c->syncs++;
    c->issued_since_sync = 0;
}

/* Issue the recorded ops; with sync, wait for the stream and recycle the
 * staging buffer. */
static void flush(hearth_cuda_ctx *c, int sync) {
    cudaSetDevice(c->device);
    double t0 = hearth_time_now();
    if (c->n_recs > 0) {
        c->stats.flushes++;
        int done = 0, capture = 0;
        uint64_t h_capture = 0;
        if (c->graphs_on && !c->profile) {
            /* A replay is found by comparing the records' bytes alone: two
             * sequences of one length differ within their first records
             * (the uploads' sizes, the step's shapes), so a miss costs
             * little, while hashing every word first cost ~17 us of host
             * time a step in which the device waited (s20). The hash is
             * taken only on a miss, for the seen / no-capture lists. */
            for (int i = 0; i < N_GRAPHS && !done; i++) {
                graph_entry *g = &c->graphs[i];
                if (g->exec && g->n == c->n_recs && !memcmp(g->recs, c->recs, sizeof(rec) * (size_t)c->n_recs)) {
                    const double tl = hearth_time_now();
                    note(c, cudaGraphLaunch(g->exec, c->stream), "graph launch");
                    c->stats.launch_s += hearth_time_now() - tl;
                    c->kvw_last = kvw_unknown; /* the graph's units were not run here */
                    g->last_use = ++c->tick;
                    c->stats.graph_replays++;
                    done = 1;
                }
            }
            if (!done) {
                const uint64_t h = hash_recs(c->recs, c->n_recs);
                int nocap = 0;
                for (int i = 0; i < N_SEEN; i++) {
                    if (c->seen_n[i] == c->n_recs && c->seen_hash[i] == h) capture = 1;
                    if (c->nocap_hash[i] == h) nocap = 1;
                }
                if (!capture) {
                    c->seen_hash[c->seen_next % N_SEEN] = h;
                    c->seen_n[c->seen_next % N_SEEN] = c->n_recs;
                    c->seen_next++;
                }
                capture = capture && !nocap ? 1 : 0;
                if (capture) h_capture = h;
            }
        }
        if (!done) {
            const double tl = hearth_time_now();
            const kv_writer kvw = c->kvw_last;
            run_recs(c, c->recs, c->n_recs);
            check_launch(c, "launch");
            c->stats.launch_s += hearth_time_now() - tl;
            if (capture) capture_for_later(c, h_capture, kvw); /* seen before: a graph for next time */
        }
        c->issued_since_sync += c->n_recs;
        c->n_recs = 0;
    }
    if (sync) host_waits(c);
    double t1 = hearth_time_now();
    c->stats.issue_s += t1 - t0;
    if (sync) {
        note(c, cudaStreamSynchronize(c->stream), "stream sync (a kernel failed)");
        c->stage_off = 0;
        c->stage_sealed = 0;
        c->stats.wait_s += hearth_time_now() - t1;
    }
}

static rec *push(hearth_cuda_ctx *c, int kind) {
    if (c->n_recs == MAX_RECS) flush(c, 0);
    rec *r = &c->recs[c->n_recs++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    c->stats.ops_recorded++;
    return r;
}

/* ---- context -------------------------------------------------------------- */

/* A failed CUDA call as a status and a message naming the device and what (of how many bytes) failed. */
static hearth_status dev_err(hearth_cuda_ctx *c, hearth_err *err, const char *what, size_t bytes, cudaError_t e) {
    hearth_status st = e == cudaErrorMemoryAllocation ? HEARTH_ENOMEM : HEARTH_EIO;
    if (bytes)
        hearth_err_set(err, st, "cuda:%d (%s): %s (%.1f MiB): %s", c->device, c->dev_name, what,
                       bytes / 1048576.0, cudaGetErrorString(e));
    else
        hearth_err_set(err, st, "cuda:%d (%s): %s: %s", c->device, c->dev_name, what, cudaGetErrorString(e));
    cudaGetLastError();
    return st;
}

static hearth_status dev_fail(hearth_cuda_ctx *c, hearth_err *err, const char *what, size_t bytes, cudaError_t e) {
    hearth_status st = dev_err(c, err, what, bytes, e);
    hearth_cuda_ctx_free(c);
    return st;
}

/* Grows the scratch buffer *p (of *have bytes) to at least bytes, at load:
 * graphs captured before may name the old buffer, so they go. On failure
 * the buffer is gone (*have 0) and err says what was short. */
static hearth_status reserve(hearth_cuda_ctx *c, void **p, size_t *have, size_t bytes, const char *what,
                             hearth_err *err) {
    if (bytes <= *have) return HEARTH_OK;
    flush(c, 1);
    drop_graphs(c);
    cudaFree(*p);
    *p = NULL;
    *have = 0;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        return dev_err(c, err, what, bytes, e);
    }
    *have = bytes;
    return HEARTH_OK;
}

extern "C" hearth_status hearth_cuda_ctx_new(hearth_cuda_ctx **out, int device, int max_tokens, int max_cols,
                                             int max_ctx, hearth_err *err) {
    *out = NULL;
    if (max_tokens <= 0 || max_cols <= 0 || max_ctx <= 0)
        return hearth_err_set(err, HEARTH_EINVAL, "cuda:%d: bad sizes (max_tokens %d, max_cols %d, max_ctx %d)",
                              device, max_tokens, max_cols, max_ctx);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || device < 0 || device >= n) {
        cudaGetLastError();
        return hearth_err_set(err, HEARTH_ENOENT, "cuda:%d: no such device (%d found%s%s)", device,
                              e == cudaSuccess ? n : 0, e == cudaSuccess ? "" : ": ",
                              e == cudaSuccess ? "" : cudaGetErrorString(e));
    }
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return hearth_err_set(err, HEARTH_ENOMEM, "cuda:%d: out of host memory", device);
    c->device = device;
    c->max_tokens = max_tokens;
    c->max_cols = max_cols;
    c->max_ctx = max_ctx;
    c->fuse = 1;
    {
        const char *s = getenv("HEARTH_GRAPHS"); /* 0: no graph capture or replay (A/B benchmarks) */
        c->graphs_on = !(s && atoi(s) == 0);
        s = getenv("HEARTH_ATTN_CLUSTER");
        c->attn_cluster_cap = s ? atoi(s) : 16;
        s = getenv("HEARTH_ATTN_ROWS_MIN");
        c->attn_rows_min = s && atoi(s) > 0 ? atoi(s) : HEARTH_CUDA_ATTN_ROWS_MIN;
        s = getenv("HEARTH_ATTN_ROWS_CTX");
        c->attn_rows_ctx = s && atoi(s) >= 0 ? atoi(s) : HEARTH_CUDA_ATTN_ROWS_CTX;
        s = getenv("HEARTH_ROPE_GEMV");
        c->rope_gemv_rows = s ? atoi(s) : 1;
        s = getenv("HEARTH_SPLIT_ROWS"); /* 0: weights keep the file's layout (benchmarks) */
        c->split_rows = !(s && atoi(s) == 0);
        s = getenv("HEARTH_PICK_PARTS"); /* 0: a row's one block reads all of it (A/B benchmarks) */
        c->pick_parts = !(s && atoi(s) == 0);
        s = getenv("HEARTH_PICK_DL"); /* 0: the picks' download is a copy after the pick (A/B benchmarks) */
        c->pick_dl = !(s && atoi(s) == 0);
        s = getenv("HEARTH_MM_QKV"); /* 0: q alone and k + v as a pair on the cuBLAS path (A/B benchmarks) */
        c->mm_qkv = !(s && atoi(s) == 0);
        s = getenv("HEARTH_DECODE_LAYERS"); /* 0: a decode token's layers op by op (A/B benchmarks) */
        c->dl.on = !(s && atoi(s) == 0);
    }
    c->L.pdl = 1;
    {
        const char *s = getenv("HEARTH_PDL_EARLY");
        c->L.pdl_early = !(s && atoi(s) == 0);
    }
    c->L.err = &c->err;
    c->mm.mmv_max_t = 8;
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) return dev_fail(c, err, "device query", 0, e);
    snprintf(c->dev_name, sizeof c->dev_name, "%s", prop.name);
    c->L.n_sm = prop.multiProcessorCount;
    if (prop.major < 9) {
        hearth_err_set(err, HEARTH_ENOTSUP,
                       "cuda:%d (%s): compute capability %d.%d; this build needs 9.0 (Hopper) or newer", device,
                       c->dev_name, prop.major, prop.minor);
        hearth_cuda_ctx_free(c);
        return HEARTH_ENOTSUP;
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess) return dev_fail(c, err, "set device", 0, e);
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return dev_fail(c, err, "create stream", 0, e);
    c->L.stream = c->stream;

    size_t xprep_bytes = cu_xprep_bytes(XPREP_BF16, max_tokens, max_cols + 256);
    if ((e = cudaMalloc(&c->mm.xprep, xprep_bytes)) != cudaSuccess)
        return dev_fail(c, err, "matmul input scratch", xprep_bytes, e);
    /* the second one is only written by GEMV epilogues (at most 8 rows) */
    size_t xprep2_bytes = cu_xprep_bytes(XPREP_BF16, 8, max_cols + 256);
    if ((e = cudaMalloc(&c->mm.xprep2, xprep2_bytes)) != cudaSuccess)
        return dev_fail(c, err, "matmul input scratch", xprep2_bytes, e);
    long part_rows = 4L * c->L.n_sm + 64;
    if (part_rows < max_tokens) part_rows = max_tokens;
    c->part_floats = (size_t)part_rows * (size_t)(max_cols + max_cols / 8 + 64);
    if ((e = cudaMalloc((void **)&c->part, c->part_floats * 4)) != cudaSuccess)
        return dev_fail(c, err, "attention split scratch", c->part_floats * 4, e);
    if ((e = cudaMalloc((void **)&c->att_cnt, ATT_CNT * sizeof(int))) != cudaSuccess ||
        (e = cudaMemset(c->att_cnt, 0, ATT_CNT * sizeof(int))) != cudaSuccess)
        return dev_fail(c, err, "attention counters", ATT_CNT * sizeof(int), e);
    if (cublasCreate(&c->mm.blas) != CUBLAS_STATUS_SUCCESS) {
        c->mm.blas = NULL;
        return dev_fail(c, err, "cuBLAS init", 0, cudaErrorUnknown);
    }
    c->blas_ws_bytes = 32u << 20;
    if ((e = cudaMalloc(&c->blas_ws, c->blas_ws_bytes)) != cudaSuccess)
        return dev_fail(c, err, "cuBLAS workspace", c->blas_ws_bytes, e);
    if (cublasSetStream(c->mm.blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(c->mm.blas, c->blas_ws, c->blas_ws_bytes) != CUBLAS_STATUS_SUCCESS)
        return dev_fail(c, err, "cuBLAS stream/workspace", 0, cudaErrorUnknown);
    c->recs = (rec *)malloc(sizeof(rec) * MAX_RECS);
    if (!c->recs) return dev_fail(c, err, "record buffer (host)", sizeof(rec) * MAX_RECS, cudaErrorMemoryAllocation);
    if ((e = cudaMallocHost((void **)&c->stage, STAGE_BYTES)) != cudaSuccess)
        return dev_fail(c, err, "pinned upload staging", STAGE_BYTES, e);
    if ((e = cudaMallocHost((void **)&c->dl_stage, DL_STAGE_BYTES + 2 * DL_ASYNC_BYTES)) != cudaSuccess)
        return dev_fail(c, err, "pinned download staging", DL_STAGE_BYTES + 2 * DL_ASYNC_BYTES, e);
    for (int k = 0; k < 2; k++)
        if ((e = cudaEventCreateWithFlags(&c->adl[k].ev, cudaEventDisableTiming)) != cudaSuccess)
            return dev_fail(c, err, "download events", 0, e);
    if (cudaHostGetDevicePointer(&c->dl_stage_dev, c->dl_stage, 0) != cudaSuccess) {
        c->dl_stage_dev = NULL; /* not mapped: every download stays a copy */
        cudaGetLastError();
    }
    *out = c;
    return HEARTH_OK;
}

extern "C" void hearth_cuda_ctx_free(hearth_cuda_ctx *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->stream) {
        if (c->recs) flush(c, 1);
        cudaStreamSynchronize(c->stream);
    }
    drop_graphs(c);
    for (int i = 0; i < PROF_EVENTS; i++)
        if (c->prof_ev[i]) cudaEventDestroy(c->prof_ev[i]);
    if (c->mm.blas) cublasDestroy(c->mm.blas);
    cudaFree(c->blas_ws);
    cudaFree(c->mm.xprep);
    cudaFree(c->mm.xprep2);
    cudaFree(c->mm.deq);
    cudaFree(c->stack);
    cudaFree(c->train_tmp);
    cudaFree(c->part);
    cudaFree(c->att_cnt);
    cudaFree(c->dl.d_tab);
    cudaFree(c->dl.scratch);
    free(c->dl.h_tab);
    if (c->stage) cudaFreeHost(c->stage);
    if (c->dl_stage) cudaFreeHost(c->dl_stage);
    for (int k = 0; k < 2; k++)
        if (c->adl[k].ev) cudaEventDestroy(c->adl[k].ev);
    if (c->stream) cudaStreamDestroy(c->stream);
    cu_sm_share_free(&c->share);
    cudaGetLastError();
    free(c->recs);
    free(c);
}

extern "C" hearth_status hearth_cuda_ctx_error(hearth_cuda_ctx *c, hearth_err *err) {
    if (c->err == cudaSuccess) return HEARTH_OK;
    return hearth_err_set(err, HEARTH_EIO, "cuda:%d (%s): %s: %s", c->device, c->dev_name,
                          c->err_where ? c->err_where : "kernel launch", cudaGetErrorString(c->err));
}

extern "C" void hearth_cuda_ctx_stats(const hearth_cuda_ctx *c, hearth_cuda_stats *s) { *s = c->stats; }

extern "C" void hearth_cuda_ctx_set_graphs(hearth_cuda_ctx *c, int on) {
    flush(c, 1);
    c->graphs_on = on != 0;
    if (!on) drop_graphs(c);
}

extern "C" void hearth_cuda_ctx_set_pdl(hearth_cuda_ctx *c, int on) {
    flush(c, 1);
    drop_graphs(c);
    if (c->profile) c->pdl_saved = on != 0;
    else c->L.pdl = on != 0;
}

extern "C" void hearth_cuda_ctx_set_fusion(hearth_cuda_ctx *c, int on) {
    flush(c, 1);
    drop_graphs(c);
    c->fuse = on != 0;
}

extern "C" void hearth_cuda_ctx_set_attn_cluster(hearth_cuda_ctx *c, int cap) {
    flush(c, 1);
    drop_graphs(c);
    c->attn_cluster_cap = cap;
}

extern "C" void hearth_cuda_ctx_set_attn_rows_min(hearth_cuda_ctx *c, int rows, int ctx) {
    flush(c, 1);
    drop_graphs(c);
    c->attn_rows_min = rows > 0 ? rows : HEARTH_CUDA_ATTN_ROWS_MIN;
    c->attn_rows_ctx = ctx >= 0 ? ctx : HEARTH_CUDA_ATTN_ROWS_CTX;
}

extern "C" void hearth_cuda_ctx_set_rope_gemv(hearth_cuda_ctx *c, int max_rows) {
    flush(c, 1);
    drop_graphs(c);
    c->rope_gemv_rows = max_rows;
}

extern "C" void hearth_cuda_ctx_set_split_rows(hearth_cuda_ctx *c, int on) { c->split_rows = on != 0; }

extern "C" void hearth_cuda_ctx_set_pick_parts(hearth_cuda_ctx *c, int on) {
    flush(c, 1);
    drop_graphs(c);
    c->pick_parts = on != 0;
}

extern "C" void hearth_cuda_ctx_set_mm_qkv(hearth_cuda_ctx *c, int on) {
    flush(c, 1);
    drop_graphs(c);
    c->mm_qkv = on != 0;
}

extern "C" int hearth_cuda_attn_wg_set(int on) { return cu_attention_flash_wg_set(on); }

extern "C" unsigned long long hearth_cuda_attn_wg_launches(void) { return cu_attention_flash_wg_launches(); }
extern "C" unsigned long long hearth_cuda_attn_wg_split_launches(void) { return cu_attention_flash_wg_launches_split(); }
extern "C" void hearth_cuda_attn_wg_split_set(int on) { cu_attention_flash_wg_split_set(on); }

extern "C" void hearth_cuda_ctx_profile(hearth_cuda_ctx *c, int on) {
    flush(c, 1);
    if (on && !c->prof_ev[0]) {
        for (int i = 0; i < PROF_EVENTS; i++)
            if (cudaEventCreate(&c->prof_ev[i]) != cudaSuccess) {
                cudaGetLastError();
                for (int j = 0; j < i; j++) cudaEventDestroy(c->prof_ev[j]);
                memset(c->prof_ev, 0, sizeof c->prof_ev);
                return;
            }
    }
    /* events between programmatically dependent kernels would time the
     * overlap, not the kernels: profiled runs launch without PDL */
    if (on && !c->profile) {
        c->pdl_saved = c->L.pdl;
        c->L.pdl = 0;
    } else if (!on && c->profile) {
        c->L.pdl = c->pdl_saved;
    }
    c->profile = on != 0;
    if (on) c->n_prof = 0;
}

static int cmp_prof(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b; /* the first member of an order entry */
    return (x < y) - (x > y);
}

extern "C" size_t hearth_cuda_ctx_profile_text(hearth_cuda_ctx *c, char *buf, size_t size) {
    flush(c, 1);
    struct {
        double ms;
        int k;
    } order[MAX_PROF];
    double total = 0.0;
    for (int k = 0; k < c->n_prof; k++) {
        order[k].ms = c->prof[k].ms;
        order[k].k = k;
        total += c->prof[k].ms;
    }
    qsort(order, (size_t)c->n_prof, sizeof order[0], cmp_prof);
    size_t used = 0;
    int w = snprintf(buf, size, "%10s %8s %9s %6s  %s\n", "total ms", "count", "avg us", "share", "launch unit");
    if (w > 0) used += (size_t)w;
    for (int i = 0; i < c->n_prof && used < size; i++) {
        int k = order[i].k;
        w = snprintf(buf + used, size - used, "%10.3f %8ld %9.2f %5.1f%%  %s\n", c->prof[k].ms, c->prof[k].count,
                     1e3 * c->prof[k].ms / (double)c->prof[k].count, 100.0 * c->prof[k].ms / (total > 0 ? total : 1),
                     c->prof[k].label);
        if (w > 0) used += (size_t)w;
    }
    if (used < size) {
        w = snprintf(buf + used, size - used, "%10.3f total\n", total);
        if (w > 0) used += (size_t)w;
    }
    return used < size ? used : size;
}

extern "C" void hearth_cuda_ctx_set_mmv_max_tokens(hearth_cuda_ctx *c, int t) {
    flush(c, 1);
    drop_graphs(c);
    c->mm.mmv_max_t = t < 0 ? 0 : t > 8 ? 8 : t;
}

extern "C" void hearth_cuda_ctx_sync(hearth_cuda_ctx *c) { flush(c, 1); }

extern "C" void hearth_cuda_ctx_submit(hearth_cuda_ctx *c) { flush(c, 0); }

extern "C" void hearth_cuda_ctx_set_gemm_sms(hearth_cuda_ctx *c, int n) {
    flush(c, 1);
    drop_graphs(c);
    if (c->mm.blas && cublasSetSmCountTarget(c->mm.blas, n) != CUBLAS_STATUS_SUCCESS)
        note(c, cudaErrorInvalidValue, "cuBLAS SM count target");
}

extern "C" int hearth_cuda_ctx_set_sm_share(hearth_cuda_ctx *c, int n, int rest) {
    flush(c, 1);
    drop_graphs(c);
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    cu_sm_share s = {};
    char why[200];
    if (cu_sm_share_stream(c->device, n, rest, &s, why, sizeof why)) {
        hearth_log_error("cuda:%d: %s", c->device, why);
        return -1;
    }
    cudaStreamDestroy(c->stream);
    cu_sm_share_free(&c->share);
    c->share = s;
    c->stream = c->L.stream = s.stream;
    c->L.n_sm = s.sms; /* kernels that size their grids by the multiprocessors see their share */
    if (cublasSetStream(c->mm.blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetSmCountTarget(c->mm.blas, s.sms) != CUBLAS_STATUS_SUCCESS)
        note(c, cudaErrorInvalidValue, "cuBLAS on the green context's stream");
    return s.sms;
}

extern "C" void hearth_cuda_pick_noise(hearth_cuda_ctx *c, float *dst, int n) {
    flush(c, 1);
    cu_pick_noise(&c->L, dst, n < 0 ? 0 : n > (1 << 23) ? (1 << 23) : n);
    check_launch(c, "pick noise");
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

extern "C" double hearth_cuda_copy_bandwidth(hearth_cuda_ctx *c, size_t bytes, int iters) {
    flush(c, 1);
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float *ms = (float *)calloc((size_t)(iters > 0 ? iters : 1), sizeof(float));
    double gbs = 0.0;
    if (ms && cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaMemsetAsync(a, 0x5a, bytes, c->stream) == cudaSuccess) {
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->stream); /* warm-up */
        int ok = 1;
        for (int i = 0; i < iters && ok; i++) {
            ok = cudaEventRecord(e0, c->stream) == cudaSuccess &&
                 cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, c->stream) ==
                     cudaSuccess &&
                 cudaEventRecord(e1, c->stream) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
                 cudaEventElapsedTime(&ms[i], e0, e1) == cudaSuccess;
        }
        if (ok && iters > 0) {
            qsort(ms, (size_t)iters, sizeof(float), cmp_float);
            gbs = 2.0 * (double)bytes / (ms[iters / 2] * 1e-3) / 1e9;
        }
    }
    cudaGetLastError();
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    free(ms);
    return gbs;
}

/* ---- the training ops' hook (train_cuda.h) ---------------------------------- */

cu_train cu_train_begin(hearth_cuda_ctx *c) {
    flush(c, 0);
    /* an attention unit recorded next must not take the train op for a KV
     * writer at known rows (it does not read early behind an unknown one) */
    c->kvw_last = kvw_unknown;
    cu_train t;
    t.c = c;
    t.L = c->L;
    t.L.pdl = 0;
    t.L.pdl_early = 0;
    t.blas = c->mm.blas;
    return t;
}

void cu_train_end(cu_train *t, const char *where) { check_launch(t->c, where); }

void *cu_train_scratch(cu_train *t, size_t bytes) {
    hearth_cuda_ctx *c = t->c;
    if (bytes <= c->train_tmp_bytes) return c->train_tmp;
    /* work already launched may still read the old buffer */
    note(c, cudaStreamSynchronize(c->stream), "train scratch (a kernel failed)");
    cudaFree(c->train_tmp);
    c->train_tmp = NULL;
    c->train_tmp_bytes = 0;
    size_t want = bytes + bytes / 4; /* room for a somewhat longer sequence next time */
    cudaError_t e = cudaMalloc(&c->train_tmp, want);
    if (e != cudaSuccess) {
        c->train_tmp = NULL;
        cudaGetLastError();
        note(c, e, "train scratch");
        return NULL;
    }
    c->train_tmp_bytes = want;
    return c->train_tmp;
}

/* ---- the op table ---------------------------------------------------------- */

static void *op_alloc(void *ctx, size_t bytes) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    cudaSetDevice(c->device);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's clean error, not a sticky one */
        if (e != cudaErrorMemoryAllocation) note(c, e, "cudaMalloc");
        return NULL;
    }
    return p;
}

static void op_free(void *ctx, void *p) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    if (!p) return;
    flush(c, 1);
    drop_graphs(c); /* they may name p */
    note(c, cudaFree(p), "cudaFree");
}

static void adl_complete(hearth_cuda_ctx *c, int i);

/* The first upload after a download was begun: the half the step before
 * filled is reused where that step is done (a step read before the next is
 * recorded: the same addresses every step, one graph), else the other half,
 * once the step that filled it is done (steps issued ahead: two graphs). */
static void stage_next(hearth_cuda_ctx *c) {
    c->stage_sealed = 0;
    c->stage_off = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < c->adl_n; k++) {
            const int i = (c->adl_first + k) % 2;
            if (c->adl[i].done || c->adl[i].half != c->stage_half) continue;
            if (pass == 0) { /* in flight: the other half */
                c->stage_half ^= 1;
                break;
            }
            adl_complete(c, i);
        }
}

static void op_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    if (bytes == 0) return;
    if (bytes <= STAGE_MAX_UPLOAD) {
        if (c->stage_sealed) stage_next(c);
        if (c->stage_off + bytes > STAGE_HALF) flush(c, 1);
        uint8_t *s = c->stage + (size_t)c->stage_half * STAGE_HALF + c->stage_off;
        memcpy(s, src, bytes);
        c->stage_off += (bytes + 15) & ~(size_t)15;
        rec *r = push(c, R_UPLOAD);
        r->p[0] = dst;
        r->p[1] = s;
        r->z[0] = bytes;
        return;
    }
    /* large (weights at load): after what is queued, straight from the
     * caller's memory; returns once the source has been read */
    flush(c, 0);
    note(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    note(c, cudaStreamSynchronize(c->stream), "upload");
    c->stage_off = 0;
}

/* The dequantization scratch of a quantized weight's cuBLAS path
 * (cu_mm_deq_need: none for float weights), then quantized rows split for
 * the streamed GEMV (split_rows.cu) unless c->split_rows is off. */
static hearth_status op_prepare_weight(void *ctx, hearth_weight *w, hearth_err *err) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    if (!cu_mmv_supported(w->type)) /* the types the kernels read (mmv.cu, dequant.cu, embed.cu) */
        return hearth_err_set(err, HEARTH_ENOTSUP,
                              "%s weights are not supported on CUDA (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
                              "q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl and iq4_xs are)",
                              hearth_dtype_get(w->type) ? hearth_dtype_get(w->type)->name : "these");
    hearth_status st = reserve(c, (void **)&c->mm.deq, &c->mm.deq_bytes, cu_mm_deq_need(w->type, w->rows, w->cols),
                               "dequantized weight scratch", err);
    if (st != HEARTH_OK || !c->split_rows || w->layout != HEARTH_LAYOUT_STORED) return st;
    flush(c, 0);
    if (cu_split_rows(&c->L, (void *)w->data, w->type, w->rows, w->cols, w->row_bytes)) w->layout = HEARTH_LAYOUT_SPLIT;
    return HEARTH_OK;
}

/* What qkv_stack_unit takes for a set of q, k and v (in that order) that
 * can go as one GEMM (cu_mm_stack_deq): its output for max_tokens rows and,
 * for quantized weights, the three dequantized. Other sets reserve nothing
 * (their matmuls go as before). */
static hearth_status op_prepare_set(void *ctx, const hearth_weight *ws, int n, hearth_err *err) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    cu_mm_mat m[3];
    int N = 0;
    if (n != 3) return HEARTH_OK;
    for (int j = 0; j < n; j++) {
        if (ws[j].cols != ws[0].cols) return HEARTH_OK;
        m[j] = cu_mm_mat{ws[j].data, ws[j].type, ws[j].rows, ws[j].row_bytes, ws[j].layout};
        N += ws[j].rows;
    }
    long long deq = cu_mm_stack_deq(m, n, ws[0].cols);
    if (deq < 0) return HEARTH_OK;
    hearth_status st =
        reserve(c, (void **)&c->mm.deq, &c->mm.deq_bytes, (size_t)deq, "dequantized weight scratch", err);
    if (st != HEARTH_OK) return st;
    return reserve(c, (void **)&c->stack, &c->stack_bytes, sizeof(float) * (size_t)c->max_tokens * N,
                   "q|k|v product scratch", err);
}

static void op_submit(void *ctx) { flush((hearth_cuda_ctx *)ctx, 0); }

static void op_download(void *ctx, void *dst, const void *src, size_t bytes) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    if (bytes <= DL_STAGE_BYTES) {
        /* recorded: a replayed step's copy is a node of its graph, which
         * starts sooner than a copy queued behind the graph (s20) */
        rec *r = push(c, R_DOWNLOAD);
        r->p[0] = c->dl_stage;
        r->p[1] = src;
        r->z[0] = bytes;
        flush(c, 1);
        memcpy(dst, c->dl_stage, bytes);
        return;
    }
    flush(c, 0);
    note(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    const double t0 = hearth_time_now();
    note(c, cudaStreamSynchronize(c->stream), "download (a kernel failed)");
    c->stats.wait_s += hearth_time_now() - t0;
    c->stage_off = 0;
}

/* Download i (of c->adl) complete: its copy waited for, its bytes in dst. */
static void adl_complete(hearth_cuda_ctx *c, int i) {
    if (c->adl[i].done) return;
    host_waits(c);
    const double t0 = hearth_time_now();
    note(c, cudaEventSynchronize(c->adl[i].ev), "download (a kernel failed)");
    c->stats.wait_s += hearth_time_now() - t0;
    memcpy(c->adl[i].dst, c->dl_stage + DL_STAGE_BYTES + (size_t)i * DL_ASYNC_BYTES, c->adl[i].bytes);
    c->adl[i].done = 1;
}

/* A download begun: recorded (a fused pick writes it), issued with what came
 * before, an event behind it, into slot i of two in the pinned staging: the
 * first where none is begun, so a step read before the next always takes the
 * same (one graph), and steps issued ahead alternate. The uploads that follow
 * go where stage_next says. */
static void op_download_begin(void *ctx, void *dst, const void *src, size_t bytes) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    HEARTH_ASSERT(c->adl_n < 2);
    if (c->adl_n == 0) c->adl_first = 0;
    const int i = (c->adl_first + c->adl_n++) % 2;
    c->adl[i].dst = dst;
    c->adl[i].bytes = bytes;
    c->adl[i].half = c->stage_half;
    c->adl[i].done = 0;
    if (bytes > DL_ASYNC_BYTES) { /* larger than a slot: at once */
        op_download(ctx, dst, src, bytes);
        c->adl[i].done = 1;
        return;
    }
    rec *r = push(c, R_DOWNLOAD);
    r->p[0] = c->dl_stage + DL_STAGE_BYTES + (size_t)i * DL_ASYNC_BYTES;
    r->p[1] = src;
    r->z[0] = bytes;
    flush(c, 0);
    note(c, cudaEventRecord(c->adl[i].ev, c->stream), "download event");
    c->stage_sealed = 1;
}

static void op_download_end(void *ctx) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    HEARTH_ASSERT(c->adl_n > 0);
    adl_complete(c, c->adl_first);
    c->adl_first ^= 1;
    c->adl_n--;
}

static void op_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    if (bytes == 0) return;
    rec *r = push(c, R_COPY);
    r->p[0] = dst;
    r->p[1] = src;
    r->z[0] = bytes;
}

static void op_matmul(void *ctx, float *y, const float *x, int T, const hearth_weight *w) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    HEARTH_ASSERT(T >= 1 && T <= c->max_tokens && w->cols <= c->max_cols + 256);
    HEARTH_ASSERT(cu_mmv_supported(w->type));
    /* a quantized weight's cuBLAS path needs the scratch that prepare_weight reserves */
    HEARTH_ASSERT(cu_mm_gemv(&c->mm, T, w->type) || cu_mm_deq_need(w->type, 1, w->cols) <= c->mm.deq_bytes);
    rec *r = push(c, R_MATMUL);
    r->p[0] = y;
    r->p[1] = x;
    r->p[2] = w->data;
    r->i[0] = T;
    r->i[1] = (int)w->type;
    r->i[2] = w->rows;
    r->i[3] = w->cols;
    r->i[4] = w->layout;
    r->z[0] = w->row_bytes;
}

static void op_embed(void *ctx, float *out, const hearth_weight *table, const int32_t *ids, int T) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    HEARTH_ASSERT(cu_mmv_supported(table->type));
    rec *r = push(c, R_EMBED);
    r->p[0] = out;
    r->p[1] = table->data;
    r->p[2] = ids;
    r->i[0] = (int)table->type;
    r->i[1] = table->rows;
    r->i[2] = table->cols;
    r->i[3] = T;
    r->i[4] = table->layout;
    r->z[0] = table->row_bytes;
}

static void op_rmsnorm(void *ctx, float *y, const float *x, const float *w, int n_rows, int dim, float eps) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    rec *r = push(c, R_RMSNORM);
    r->p[0] = y;
    r->p[1] = x;
    r->p[2] = w;
    r->i[0] = n_rows;
    r->i[1] = dim;
    r->f[0] = eps;
}

static void op_rope(void *ctx, float *x, int T, int n_heads, int head_dim, const int32_t *pos,
                    const hearth_rope *rope) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    HEARTH_ASSERT(rope->rot_dim <= head_dim && rope->rot_dim % 2 == 0);
    rec *r = push(c, R_ROPE);
    r->p[0] = x;
    r->p[1] = pos;
    r->p[2] = rope->inv_freq;
    r->i[0] = T;
    r->i[1] = n_heads;
    r->i[2] = head_dim;
    r->i[3] = rope->rot_dim;
    r->i[4] = rope->neox;
}

static void op_add_bias(void *ctx, float *y, const float *b, int T, int n) {
    rec *r = push((hearth_cuda_ctx *)ctx, R_ADD_BIAS);
    r->p[0] = y;
    r->p[1] = b;
    r->i[0] = T;
    r->i[1] = n;
}

static void op_add(void *ctx, float *y, const float *x, size_t n) {
    rec *r = push((hearth_cuda_ctx *)ctx, R_ADD);
    r->p[0] = y;
    r->p[1] = x;
    r->z[0] = n;
}

/* p0..2 y, p3 x, p4 a, p5 b, p6 ids, p7 tmp; i0 T, i1 K, i2 R, i3 n, i4..6 n_out, i7 id. Not in rec_reads:
 * a fused kernel's dead-store check takes it to read everything. */
static void op_lora(void *ctx, float *const *y, const float *x, int T, int K, const float *a, const float *b, int R,
                    const int *n_out, int n, const int32_t *ids, int32_t id, float *tmp) {
    HEARTH_ASSERT(n >= 1 && n <= 3 && R % 16 == 0 && T >= 1);
    rec *r = push((hearth_cuda_ctx *)ctx, R_LORA);
    for (int i = 0; i < n; i++) r->p[i] = y[i], r->i[4 + i] = n_out[i];
    r->p[3] = x;
    r->p[4] = a;
    r->p[5] = b;
    r->p[6] = ids;
    r->p[7] = tmp;
    r->i[0] = T;
    r->i[1] = K;
    r->i[2] = R;
    r->i[3] = n;
    r->i[7] = id;
}

static void op_swiglu(void *ctx, float *out, const float *gate, const float *up, int T, int n) {
    rec *r = push((hearth_cuda_ctx *)ctx, R_SWIGLU);
    r->p[0] = out;
    r->p[1] = gate;
    r->p[2] = up;
    r->i[0] = T;
    r->i[1] = n;
}

static void op_kv_write(void *ctx, const hearth_kv_view *kv, int layer, const float *k, const float *v, int T,
                        const int32_t *seq, const int32_t *pos) {
    HEARTH_ASSERT(kv->type == HEARTH_DT_F32 || kv->type == HEARTH_DT_F16 || kv->type == HEARTH_DT_E4M3);
    rec *r = push((hearth_cuda_ctx *)ctx, R_KV_WRITE);
    put_kv(r, kv, layer);
    r->p[3] = k;
    r->p[4] = v;
    r->p[5] = seq;
    r->p[6] = pos;
    r->i[3] = T;
}

static void op_attention(void *ctx, float *out, const float *q, int T, const hearth_kv_view *kv, int layer,
                         const int32_t *seq, const int32_t *pos, int n_heads, int n_kv_heads, int head_dim,
                         float scale, int window) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    HEARTH_ASSERT(head_dim <= 256 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 && T <= c->max_tokens);
    HEARTH_ASSERT(kv->type == HEARTH_DT_F32 || kv->type == HEARTH_DT_F16 || kv->type == HEARTH_DT_E4M3);
    rec *r = push(c, R_ATTN);
    put_kv(r, kv, layer);
    r->p[3] = out;
    r->p[4] = q;
    r->p[5] = seq;
    r->p[6] = pos;
    r->i[3] = T;
    r->i[4] = n_heads;
    r->i[5] = n_kv_heads;
    r->i[6] = head_dim;
    r->i[7] = window;
    r->i[8] = kv->one_seq;
    r->i[9] = cu_attention_cluster(kv->ctx_len, c->attn_cluster_cap);
    r->i[11] = kv->ctx_len >= c->attn_rows_ctx; /* a flag, not the length: a replayed step's records match */
    /* a chunk of one sequence: its positions may be cut in parts of 4+ tiles of 128 (the count, not the
     * length, is recorded: it changes every 512 positions) */
    r->z[0] = kv->one_seq && T > 8 ? (size_t)(kv->ctx_len / 512 < 16 ? kv->ctx_len / 512 : 16) : 0;
    r->f[0] = scale;
}

static void op_pick(void *ctx, hearth_pick *out, const float *logits, int n_rows, int vocab,
                    const hearth_pick_params *params, int32_t *ids) {
    HEARTH_ASSERT(n_rows >= 0 && vocab >= 1);
    if (n_rows == 0) return;
    rec *r = push((hearth_cuda_ctx *)ctx, R_PICK);
    r->p[0] = out;
    r->p[1] = logits;
    r->p[2] = params;
    r->p[3] = ids;
    r->i[0] = n_rows;
    r->i[1] = vocab;
}

/* A weight decode_layers reads: rows x cols of the layers' type, BF16 rows as stored or Q8_0 / Q4_0 rows
 * split at load, 16-byte aligned. */
static int dl_weight(const hearth_weight *w, hearth_dtype type, int rows, int cols) {
    const int split = type == HEARTH_DT_Q8_0 || type == HEARTH_DT_Q4_0;
    return w->type == type && (type == HEARTH_DT_BF16 || split) &&
           w->layout == (split ? HEARTH_LAYOUT_SPLIT : HEARTH_LAYOUT_STORED) && w->rows == rows &&
           w->cols == cols && w->row_bytes == hearth_dtype_row_bytes(type, cols) && ((uintptr_t)w->data & 15) == 0;
}

/* Layer l's entry of decode_layers' device table. */
static cu_dl_layer dl_entry(const hearth_decoder_ref *dec, const hearth_kv_view *kv, int l) {
    const hearth_layer_ref *L = &dec->layers[l];
    return cu_dl_layer{(const uint8_t *)L->wq->data,     (const uint8_t *)L->wk->data,
                       (const uint8_t *)L->wv->data,     (const uint8_t *)L->wo->data,
                       (const uint8_t *)L->w_gate->data, (const uint8_t *)L->w_up->data,
                       (const uint8_t *)L->w_down->data, L->attn_norm,
                       L->ffn_norm,                      (__half *)kv->k[l],
                       (__half *)kv->v[l]};
}

/* The layers' device table for this decoder and cache, made again when either changed (a new model, a
 * cache allocated anew), with the scratch; 0 when it could not be had. A token whose table is the last
 * one's (every token but the first of a model and cache) compares it and allocates nothing. */
static int dl_table(hearth_cuda_ctx *c, const hearth_decoder_ref *dec, const hearth_kv_view *kv) {
    const int nl = dec->n_layers;
    int same = c->dl.d_tab && c->dl.n_layers == nl;
    for (int l = 0; l < nl && same; l++) {
        const cu_dl_layer e = dl_entry(dec, kv, l);
        same = !memcmp(&e, &c->dl.h_tab[l], sizeof e);
    }
    if (same) return 1;
    cu_dl_layer *t = (cu_dl_layer *)malloc(sizeof *t * (size_t)nl);
    if (!t) return 0;
    for (int l = 0; l < nl; l++) t[l] = dl_entry(dec, kv, l);
    /* rare (a new model or cache): what a launch in flight reads is not changed under it */
    cudaStreamSynchronize(c->stream);
    if (!c->dl.d_tab || c->dl.n_layers != nl) {
        cudaFree(c->dl.d_tab);
        cudaFree(c->dl.scratch);
        c->dl.d_tab = NULL, c->dl.scratch = NULL, c->dl.n_layers = 0;
        if (cudaMalloc(&c->dl.d_tab, sizeof *t * (size_t)nl) != cudaSuccess ||
            cudaMalloc(&c->dl.scratch, cu_dl_scratch_bytes(nl)) != cudaSuccess) {
            cudaGetLastError(); /* out of memory here only means the layers run op by op */
            cudaFree(c->dl.d_tab);
            c->dl.d_tab = NULL;
            free(t);
            return 0;
        }
        c->dl.n_layers = nl;
    }
    if (cudaMemcpy(c->dl.d_tab, t, sizeof *t * (size_t)nl, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaGetLastError();
        c->dl.n_layers = 0; /* made again next time */
        free(t);
        return 0;
    }
    free(c->dl.h_tab);
    c->dl.h_tab = t;
    return 1;
}

static int op_decode_layers(void *ctx, float *x, const hearth_decoder_ref *dec, const hearth_kv_view *kv,
                            const int32_t *seq, const int32_t *pos) {
    hearth_cuda_ctx *c = (hearth_cuda_ctx *)ctx;
    if (!c->dl.on || dec->dim != DL_DIM || dec->ffn != DL_FFN || dec->head_dim != DL_HEAD_DIM ||
        dec->n_kv_heads != DL_KV_HEADS || dec->n_heads != DL_KV_HEADS * DL_GQA || dec->n_layers < 1 ||
        dec->rope->rot_dim != DL_HEAD_DIM || kv->type != HEARTH_DT_F16 || kv->head_dim != 0 ||
        kv->kv_dim != DL_KV_HEADS * DL_HEAD_DIM || kv->ctx_len < 1 || kv->ctx_len > DL_MAX_CTX)
        return 0;
    const int qkv = DL_KV_HEADS * DL_GQA * DL_HEAD_DIM, kvd = DL_KV_HEADS * DL_HEAD_DIM;
    const hearth_dtype t = dec->layers[0].wq->type;
    for (int l = 0; l < dec->n_layers; l++) {
        const hearth_layer_ref *L = &dec->layers[l];
        if (!dl_weight(L->wq, t, qkv, DL_DIM) || !dl_weight(L->wk, t, kvd, DL_DIM) ||
            !dl_weight(L->wv, t, kvd, DL_DIM) || !dl_weight(L->wo, t, DL_DIM, qkv) ||
            !dl_weight(L->w_gate, t, DL_FFN, DL_DIM) || !dl_weight(L->w_up, t, DL_FFN, DL_DIM) ||
            !dl_weight(L->w_down, t, DL_DIM, DL_FFN))
            return 0;
    }
    /* planned once for a type and a share of the device: where the kernel does not fit, the per-token path
     * does not ask the runtime again */
    if (c->dl.n_sm != c->L.n_sm || c->dl.plan.type != (int)t) {
        c->dl.plan_ok = cu_dl_plan(&c->L, t, &c->dl.plan);
        c->dl.plan.type = t, c->dl.n_sm = c->L.n_sm;
    }
    if (!c->dl.plan_ok || !dl_table(c, dec, kv)) return 0;
    rec *r = push(c, R_DECODE_LAYERS);
    r->p[0] = x;
    r->p[1] = c->dl.d_tab;
    r->p[2] = kv->block_table;
    r->p[3] = seq;
    r->p[4] = pos;
    r->p[5] = dec->rope->inv_freq;
    r->p[6] = c->dl.scratch;
    r->i[0] = kv->block_size;
    r->i[1] = kv->max_blocks_per_seq;
    r->i[2] = dec->n_layers;
    r->i[3] = dec->rope->neox;
    r->f[0] = dec->eps;
    r->f[1] = 1.0f / sqrtf((float)DL_HEAD_DIM);
    return 1;
}

extern "C" const hearth_ops hearth_cuda_ops = {
    /* .name = */ "cuda",
    /* .host_memory = */ 0,
    /* .kv_f16 = */ 1,
    /* .kv_e4m3 = */ 1,
    /* .kv_heads = */ 0,
    /* .lora_b_t = */ 0, /* lora.cu's expand reads a row of B (float4s) an output */
    /* .pick_truncates = */ 1, /* top_k / top_p on the device (pick.cu): test_cuda's pick cases pass (H100,
                                  session 42), and 64 / 256 streams with llama-server's filters make 2.4x / 3.6x
                                  the host sampler's tokens (notes/sampling.md); HEARTH_PICK_TRUNCATE=0 turns it off */
    /* .alloc = */ op_alloc,
    /* .free = */ op_free,
    /* .upload = */ op_upload,
    /* .download = */ op_download,
    /* .download_begin = */ op_download_begin,
    /* .download_end = */ op_download_end,
    /* .copy = */ op_copy,
    /* .matmul = */ op_matmul,
    /* .matmul_n = */ NULL, /* the recorder joins the matmuls of one input itself */
    /* .embed = */ op_embed,
    /* .rmsnorm = */ op_rmsnorm,
    /* .rope = */ op_rope,
    /* .add_bias = */ op_add_bias,
    /* .add = */ op_add,
    /* .lora = */ op_lora,
    /* .swiglu = */ op_swiglu,
    /* .kv_write = */ op_kv_write,
    /* .attention = */ op_attention,
    /* .pick = */ op_pick,
    /* .prepare_weight = */ op_prepare_weight,
    /* .prepare_set = */ op_prepare_set,
    /* .submit = */ op_submit,
    /* .train = */ &hearth_cuda_train_ops,
    /* .decode_layers = */ op_decode_layers,
};
