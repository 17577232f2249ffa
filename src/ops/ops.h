/* ops.h - the op set the model is written against, one vtable per backend.
 *
 * The decoder (model/forward.c) is written once against hearth_ops; ops/cpu and
 * ops/cuda each provide a table. Every pointer an op takes (activations, KV,
 * weights, index arrays) is backend memory: host memory for the CPU backend,
 * device memory for CUDA. Ops on one backend run in issue order (CUDA: one
 * stream), so a whole decode step can be captured and replayed.
 *
 * Shapes follow llama2.c's habit: every buffer comment says its shape.
 * Activations are f32 row-major, one row per token of the batch. */
#ifndef HEARTH_OPS_H
#define HEARTH_OPS_H

#include "core/dtype.h"
#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

/* A weight matrix: rows of `cols` elements of `type` (ggml layout for
 * quantized types). y = x @ W^T, so rows = output features. */
typedef struct hearth_weight {
    const void *data; /* backend memory */
    hearth_dtype type;
    int rows, cols;
    size_t row_bytes;
} hearth_weight;

/* Paged KV cache of one backend. Position p of sequence s lives in block
 * block_table[s * max_blocks_per_seq + p / block_size], slot p % block_size.
 * Per layer l, block b, slot i: k[l][((b * block_size) + i) * kv_dim + j]. */
typedef struct hearth_kv_view {
    float **k, **v;            /* [n_layers] -> [n_blocks * block_size * kv_dim] */
    const int32_t *block_table; /* [n_seqs][max_blocks_per_seq] */
    int block_size, max_blocks_per_seq, kv_dim, n_blocks;
} hearth_kv_view;

/* Rotary embedding: the frequency of pair i is inv_freq[i] (precomputed at
 * load with the scaling rule of the config, length head_dim/2). neox=1 pairs
 * (i, i + head_dim/2) (HF rotate_half); neox=0 pairs (2i, 2i+1) (GGUF llama,
 * whose converter permuted the q/k rows). */
typedef struct hearth_rope {
    const float *inv_freq; /* backend memory, [rot_dim/2] */
    int rot_dim;           /* rotated dims per head (= head_dim here) */
    int neox;
} hearth_rope;

typedef struct hearth_ops {
    const char *name;
    /* 1 when backend memory is host memory: the model then points weights
     * straight into the mmapped file instead of uploading them. */
    int host_memory;
    /* Backend memory: NULL on out-of-memory (a clean error, never a crash). */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    /* host -> backend; backend -> host (waits for the ops issued before it). */
    void (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*download)(void *ctx, void *dst, const void *src, size_t bytes);
    /* backend -> backend */
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* y[T][w->rows] = x[T][w->cols] @ W^T */
    void (*matmul)(void *ctx, float *y, const float *x, int T, const hearth_weight *w);
    /* out[T][dim] = embedding rows ids[t] of table (any weight type) */
    void (*embed)(void *ctx, float *out, const hearth_weight *table, const int32_t *ids, int T);
    /* y[n_rows][dim] = x / rms(x) * w per row; w: f32 [dim]. y may alias x. Per-head q/k norm
     * is n_rows = T * n_heads, dim = head_dim. */
    void (*rmsnorm)(void *ctx, float *y, const float *x, const float *w, int n_rows, int dim, float eps);
    /* x[T][n_heads * head_dim] rotated in place at positions pos[T] */
    void (*rope)(void *ctx, float *x, int T, int n_heads, int head_dim, const int32_t *pos,
                 const hearth_rope *rope);
    /* y[T][n] += b[n] (bias) */
    void (*add_bias)(void *ctx, float *y, const float *b, int T, int n);
    /* y[n] += x[n] (residual) */
    void (*add)(void *ctx, float *y, const float *x, size_t n);
    /* out[T][n] = silu(gate[T][n]) * up[T][n]; out may alias gate. */
    void (*swiglu)(void *ctx, float *out, const float *gate, const float *up, int T, int n);
    /* Write k, v [T][kv_dim] at (seq[t], pos[t]) for layer l. */
    void (*kv_write)(void *ctx, const hearth_kv_view *kv, int layer, const float *k, const float *v, int T,
                     const int32_t *seq, const int32_t *pos);
    /* out[T][n_heads*head_dim]: causal attention of q[T][n_heads*head_dim] over positions
     * [max(0, pos[t]-window+1), pos[t]] of sequence seq[t] (window 0 = unlimited). GQA: head h reads
     * kv head h / (n_heads / n_kv_heads). */
    void (*attention)(void *ctx, float *out, const float *q, int T, const hearth_kv_view *kv, int layer,
                      const int32_t *seq, const int32_t *pos, int n_heads, int n_kv_heads, int head_dim,
                      float scale, int window);
} hearth_ops;

#endif
