/* ops_cuda.h - the CUDA backend of the op set (ops/ops.h), callable from C.
 *
 * Every op is issued on the context's one stream. Ops are recorded host-side
 * and run when the host next needs the device to be done (download, free, a
 * large upload, a full record buffer): a sequence of ops that repeats exactly
 * (the same op, pointers and sizes, e.g. one decode step) is captured once as a
 * CUDA graph and replayed from then on. The only host synchronisation is in
 * download() and free(). Small uploads are staged in pinned memory at call
 * time, so the caller may reuse its buffer at once.
 *
 * A context is used by one thread at a time (the engine thread). */
#ifndef HEARTH_OPS_CUDA_H
#define HEARTH_OPS_CUDA_H

#ifdef __cplusplus
/* core/status.h is C11; _Noreturn is spelled [[noreturn]] in C++. */
#ifndef _Noreturn
#define _Noreturn [[noreturn]]
#endif
extern "C" {
#endif

#include "ops/ops.h"

typedef struct hearth_cuda_ctx hearth_cuda_ctx;

/* A context on CUDA device `device`, with scratch for matmuls of up to
 * max_tokens rows of up to max_cols inputs and attention over up to max_ctx
 * positions. The error names the device and what failed. */
hearth_status hearth_cuda_ctx_new(hearth_cuda_ctx **out, int device, int max_tokens, int max_cols, int max_ctx,
                                  hearth_err *err);
void hearth_cuda_ctx_free(hearth_cuda_ctx *c);

/* Ops return nothing; a CUDA failure inside one (a launch error, a fault) is
 * kept here, first one wins, and logged once. HEARTH_OK when none. */
hearth_status hearth_cuda_ctx_error(hearth_cuda_ctx *c, hearth_err *err);

/* Knobs and counters, for tests and benchmarks. */
typedef struct {
    long flushes;        /* times recorded ops were issued */
    long graph_captures; /* sequences captured as graphs */
    long graph_replays;  /* flushes served by a captured graph */
    long ops_recorded;
    /* host seconds in flush: issuing the work (finding a replay's graph
     * and launching it, or the eager launches), of which in the launch
     * calls (cudaGraphLaunch, or the eager run), and waiting for the stream
     * at a sync; at batch 1 the device idles through the issue */
    double issue_s, launch_s, wait_s;
} hearth_cuda_stats;
void hearth_cuda_ctx_stats(const hearth_cuda_ctx *c, hearth_cuda_stats *s);
/* graphs: replay repeated sequences as CUDA graphs (default 1).
 * pdl: programmatic dependent launch between kernels (default 1). */
void hearth_cuda_ctx_set_graphs(hearth_cuda_ctx *c, int on);
void hearth_cuda_ctx_set_pdl(hearth_cuda_ctx *c, int on);
/* Up to which T matmul uses the GEMV kernels; above it, cuBLAS (default 8). */
void hearth_cuda_ctx_set_mmv_max_tokens(hearth_cuda_ctx *c, int t);
/* fusion: run recognised op patterns as one kernel (default 1): matmuls
 * sharing x (q, k, v), gate + up + swiglu, add + rmsnorm (+ the next
 * matmul's input preparation), rope + rope + kv_write (alone, in the q/k/v
 * GEMV's epilogue, or reading the q|k|v GEMM's rows). */
void hearth_cuda_ctx_set_fusion(hearth_cuda_ctx *c, int on);
/* The largest thread-block cluster the few-rows decode attention may use
 * (16, 8 or 0 = none; default 16, or HEARTH_ATTN_CLUSTER at creation). */
void hearth_cuda_ctx_set_attn_cluster(hearth_cuda_ctx *c, int cap);
/* From how many rows the decode attention over an f16 / e4m3 cache (head_dim
 * 64 or 128) runs the tensor-core rows kernel, f16 operands, instead of the
 * few-rows flash-decoding kernel, f32 math: from `rows` rows when the step's
 * longest context has `ctx` positions or more, from 9 below that (0 / -1 =
 * the defaults, or HEARTH_ATTN_ROWS_MIN / HEARTH_ATTN_ROWS_CTX at creation).
 * 6 and 512: from 6 rows the rows kernel is faster over ~1000 positions, at
 * 5 it is not, and over 128-256 positions it loses at 7-8 rows
 * (notes/cuda-kernels.md, s22-run1 / s22-run2). */
enum { HEARTH_CUDA_ATTN_ROWS_MIN = 6, HEARTH_CUDA_ATTN_ROWS_CTX = 512 };
void hearth_cuda_ctx_set_attn_rows_min(hearth_cuda_ctx *c, int rows, int ctx);
/* Up to how many rows the q/k/v GEMV rotates q, k and stores the KV itself
 * (the fusion of rope + rope + kv_write into its epilogue; default 1, where
 * it was measured faster, or HEARTH_ROPE_GEMV at creation; 0 = never). */
void hearth_cuda_ctx_set_rope_gemv(hearth_cuda_ctx *c, int max_rows);
/* Whether prepare_weight re-lays Q4_0 / Q8_0 / Q4_K / Q6_K rows for the
 * GEMV kernels (default 1, or HEARTH_SPLIT_ROWS at creation; 0 keeps the
 * file's layout). Weights prepared before keep theirs. */
void hearth_cuda_ctx_set_split_rows(hearth_cuda_ctx *c, int on);
/* Whether the pick op finds each row's maximum in a wave of blocks over the
 * row's chunks before the row's block (default 1, or HEARTH_PICK_PARTS at
 * creation; 0: the row's block reads all of it). The same picks either way. */
void hearth_cuda_ctx_set_pick_parts(hearth_cuda_ctx *c, int on);
/* Above the GEMV rows, a layer's q, k and v matmuls as one cuBLAS GEMM over
 * the three stacked, whose rows the rope + KV store reads (default 1, or
 * HEARTH_MM_QKV at creation; 0: q alone, k and v as a batched pair). Takes
 * weights prepared as a set (ops->prepare_set); float ones in one
 * allocation, back to back, as the model loader places them. */
void hearth_cuda_ctx_set_mm_qkv(hearth_cuda_ctx *c, int on);
/* Process-wide: whether f16-cache prefill attention at head_dim 128 takes
 * the Hopper kernel (attention_flash_wg.cu; default on, HEARTH_ATTN_WG=0 at
 * first use turns it off) or the flash-attention 2 kernel. Affects launches
 * recorded after the call (captured graphs keep theirs). Returns whether the
 * Hopper kernel can run on the current device (an sm_90 GPU and this
 * build's sm_90a code). Any thread. */
int hearth_cuda_attn_wg_set(int on);
/* How many times this process has launched the Hopper kernel (tests check
 * that the cases it fits take it), and how many of those launches cut the
 * positions in parts (a short chunk after a long prefix). */
unsigned long long hearth_cuda_attn_wg_launches(void);
unsigned long long hearth_cuda_attn_wg_split_launches(void);
/* Whether the Hopper kernel may cut positions in parts (as HEARTH_ATTN_SPLIT;
 * the tests compare both ways). Any thread; graphs captured before keep the
 * choice they were captured with. */
void hearth_cuda_attn_wg_split_set(int on);
/* Profile: while on, flushes run eagerly (no graphs, no PDL) with device
 * events around each launch unit, summed per unit label. Turning it on clears the
 * sums. profile_text writes a table (largest first) into buf, returns the
 * length written. */
void hearth_cuda_ctx_profile(hearth_cuda_ctx *c, int on);
size_t hearth_cuda_ctx_profile_text(hearth_cuda_ctx *c, char *buf, size_t size);

/* Issue everything recorded and wait for the device (benchmarks, tests). */
void hearth_cuda_ctx_sync(hearth_cuda_ctx *c);
/* Issue everything recorded without waiting, so that another context's
 * stream can run beside this one's (bench_overlap). */
void hearth_cuda_ctx_submit(hearth_cuda_ctx *c);
/* cuBLAS GEMMs of this context on at most n multiprocessors (0: all; a
 * target, cublasSetSmCountTarget). Drops the captured graphs. */
void hearth_cuda_ctx_set_gemm_sms(hearth_cuda_ctx *c, int n);
/* This context's kernels on n multiprocessors of the device (rest 0; the
 * driver rounds n up to its partition size) or on the others (rest 1): a
 * stream of a green context, cuBLAS held to the same count. For
 * measurements (bench_overlap); drops the captured graphs. The count
 * taken, or -1 (logged) when the driver cannot. */
int hearth_cuda_ctx_set_sm_share(hearth_cuda_ctx *c, int n, int rest);
/* Device-to-device copy bandwidth in GB/s (bytes read + bytes written over
 * the time of one copy), the median of iters copies of `bytes` bytes; the
 * ceiling that decode speed is judged against. 0 on failure. */
double hearth_cuda_copy_bandwidth(hearth_cuda_ctx *c, size_t bytes, int iters);

/* Tests: dst[k] (backend memory, n <= 2^23 floats) = the pick op's Gumbel
 * noise for the 23 hash bits k (ops.h: -logf(-logf(((float)k + 0.5f) * 2^-23))),
 * as the device computes it, so a test can hold all of them against the host's. */
void hearth_cuda_pick_noise(hearth_cuda_ctx *c, float *dst, int n);

extern const hearth_ops hearth_cuda_ops;

#ifdef __cplusplus
}
#endif

#endif
