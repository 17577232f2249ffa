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
#include <string.h>

/* How a weight's rows are laid out in backend memory. */
enum {
    HEARTH_LAYOUT_STORED = 0, /* as in the file (ggml blocks for quantized types) */
    HEARTH_LAYOUT_SPLIT = 1,  /* quantized rows on CUDA: block codes, then heads */
    HEARTH_LAYOUT_PANEL8 = 2, /* Q4_0 / Q4_1 / Q8_0 on the CPU: 8 rows' blocks interleaved (ops/cpu/panel.h) */
};

/* A weight matrix: rows of `cols` elements of `type` (ggml layout for
 * quantized types, unless the backend's prepare_weight re-laid it). y = x @
 * W^T, so rows = output features. */
typedef struct hearth_weight {
    const void *data; /* backend memory */
    hearth_dtype type;
    int rows, cols;
    size_t row_bytes;
    int layout; /* HEARTH_LAYOUT_*: read only by the backend that set it */
} hearth_weight;

/* Paged KV cache of one backend. Position p of sequence s lives in block
 * block_table[s * max_blocks_per_seq + p / block_size], slot p % block_size.
 * Per layer l, block b, slot i: k[l][((b * block_size) + i) * kv_dim + j].
 * Elements are `type`: F32 on every backend, F16 where ops->kv_f16 is set,
 * E4M3 (core/fp8.h, scale 1) where ops->kv_e4m3 is set (k and v are written
 * rounded to nearest even, e4m3 saturated to +-448; attention reads them as
 * stored, exactly widened). */
typedef struct hearth_kv_view {
    void **k, **v;             /* [n_layers] -> [n_blocks * block_size * kv_dim] of type */
    const int32_t *block_table; /* [n_seqs][max_blocks_per_seq] */
    int block_size, max_blocks_per_seq, kv_dim, n_blocks;
    hearth_dtype type;          /* HEARTH_DT_F32, HEARTH_DT_F16 or HEARTH_DT_E4M3 */
    int one_seq;                /* set per forward: 1 when all its rows belong to one sequence (a
                                   backend may then skip per-row batch checks); 0 = unknown */
    int ctx_len;                /* set per forward: the most positions a row attends (its
                                   position + 1), for a backend to shape its attention; 0 = unknown */
    int head_dim;               /* 0: the rows above. > 0 (a backend with ops->kv_heads): a block
                                   holds its rows head by head, KV head h's dimension d at
                                   k[l][((b * (kv_dim / head_dim) + h) * block_size + i) * head_dim + d],
                                   so that one head's positions are contiguous */
} hearth_kv_view;

/* Token choice for one logit row, made where the logits are (the pick op),
 * so a decode step moves a few bytes per row to the host, not the vocabulary. */
#define HEARTH_PICK_TOP 20
typedef struct hearth_pick_params {
    float temperature; /* 0: argmax (first index of the maximum) */
    float min_p;       /* 0: off; else only tokens with x >= max + log(min_p) are drawn */
    uint64_t key;      /* random key of this draw (the host sampler's stream) */
    int32_t logprobs;  /* 1: fill lse, chosen and the top list; 0: only id and max */
    int32_t n_top;     /* 0..HEARTH_PICK_TOP largest logits to report */
    int32_t top_k;     /* 0 (or >= vocab): off; else only the top_k first tokens of the row's order are drawn */
    float top_p;       /* 0 (or >= 1): off; else only the shortest prefix of that order reaching this mass */
} hearth_pick_params;

/* A draw at temperature T > 0 is the Gumbel-max rule, bit-defined so that
 * every backend draws the same token from the same logits: for token i,
 * z = hearth_pick_hash(key, i), u = ((z >> 41) + 0.5f) * 2^-23 (exact, in
 * (0, 1)), score = x[i] * (1.0f / T) - logf(-logf(u)); the chosen id has the largest
 * score (ties to the lower id) among the tokens that pass min_p and the
 * truncation below (both keep the first of the maximums). Since
 * -logf(-logf(u)) lies in [-2.81, 16.64] for every such u, only tokens with
 * x >= max - 20.2 * T can win; a backend may skip the others. */
/* Truncation (top_k, top_p; on the row as it is, temperature 1). The row's
 * order is the larger x first, ties to the lower id; top_k keeps its first
 * top_k tokens, top_p its shortest prefix whose weight reaches top_p of the
 * row's, and the draw is among the tokens both keep that also pass min_p.
 * Weights are integers, bit-defined, so that every backend keeps the same
 * prefix: for d = max - x (float), t = d * 1.44269504f, n = (int)t,
 * f = t - n, p = hearth_pick_exp2m(f) (2^-f by Horner's rule in float, each
 * product and sum rounded on its own), weight = (uint64_t)(p * 2^(40 - n))
 * for d < 28 (so n <= 40), else 0; -inf weighs 0. The prefix ends at the
 * first token where the running sum of weights reaches
 * need = (uint64_t)ceil((double)top_p * (double)(sum of every weight)). */
/* Shared by the host and the device (pick.cu): each product and sum rounded
 * on its own (C11 in ISO mode does not contract them; the device is told). */
#if defined(__CUDACC__)
#define HEARTH_HD __host__ __device__
#else
#define HEARTH_HD
#endif
#if defined(__CUDA_ARCH__)
#define HEARTH_MUL_RN(a, b) __fmul_rn(a, b)
#define HEARTH_ADD_RN(a, b) __fadd_rn(a, b)
#else
#define HEARTH_MUL_RN(a, b) ((a) * (b))
#define HEARTH_ADD_RN(a, b) ((a) + (b))
#endif

/* 2^-f for f in [0, 1): Taylor's terms of exp(-f ln 2) to the ninth (|error| < 1e-7). */
static inline HEARTH_HD float hearth_pick_exp2m(float f) {
    const float c[10] = {1.0f,           -6.93147181e-1f, 2.40226507e-1f, -5.55041087e-2f, 9.61812911e-3f,
                         -1.33335581e-3f, 1.54035304e-4f,  -1.52527338e-5f, 1.32154867e-6f,  -1.01780860e-7f};
    float p = c[9];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 8; k >= 0; k--) {
        float q = HEARTH_MUL_RN(p, f); /* two statements: no contraction into a fused multiply-add */
        p = HEARTH_ADD_RN(q, c[k]);
    }
    return p;
}

/* The weight of a token d = max - x below the row's maximum (see above). */
static inline HEARTH_HD uint64_t hearth_pick_weight(float d) {
    if (!(d < 28.0f)) return 0; /* -inf's d too */
    float t = HEARTH_MUL_RN(d, 1.44269504f);
    int n = (int)t;
    float p = hearth_pick_exp2m(HEARTH_ADD_RN(t, -(float)n));
    return (uint64_t)HEARTH_MUL_RN(p, (float)(1ull << (40 - n)));
}

/* The row's order as an integer, larger first: x's bits made monotone, then the id reversed. */
static inline HEARTH_HD uint64_t hearth_pick_order(float x, int32_t i) {
    uint32_t u;
#if defined(__CUDA_ARCH__)
    u = __float_as_uint(x);
#else
    memcpy(&u, &x, sizeof u);
#endif
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    return (uint64_t)u << 32 | (uint32_t)~(uint32_t)i;
}

static inline uint64_t hearth_pick_hash(uint64_t key, uint32_t i) {
    uint64_t z = key + ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ull; /* splitmix64 finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct hearth_pick {
    int32_t id;          /* the chosen token */
    float max;           /* largest logit of the row */
    float lse;           /* log(sum(exp(x))) of the row: logprob(i) = x[i] - lse (logprobs only) */
    float chosen;        /* x[id] (logprobs only) */
    int32_t n_top;       /* as asked (logprobs only, else 0) */
    int32_t top_id[HEARTH_PICK_TOP]; /* largest first, ties to the lower id */
    float top_x[HEARTH_PICK_TOP];
} hearth_pick;

/* Rotary embedding: the frequency of pair i is inv_freq[i] (precomputed at
 * load with the scaling rule of the config, length head_dim/2). neox=1 pairs
 * (i, i + head_dim/2) (HF rotate_half); neox=0 pairs (2i, 2i+1) (GGUF llama,
 * whose converter permuted the q/k rows). */
typedef struct hearth_rope {
    const float *inv_freq; /* backend memory, [rot_dim/2] */
    int rot_dim;           /* rotated dims per head (= head_dim here) */
    int neox;
} hearth_rope;

/* The decoder's layers as hearth_ops.decode_layers takes them: per layer the
 * weights of model/forward.c's plain layer (no biases, q/k norms or MoE). */
typedef struct hearth_layer_ref {
    const hearth_weight *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
    const float *attn_norm, *ffn_norm; /* backend memory, f32 [dim] */
} hearth_layer_ref;
typedef struct hearth_decoder_ref {
    const hearth_layer_ref *layers; /* [n_layers] */
    int n_layers, dim, n_heads, n_kv_heads, head_dim, ffn;
    float eps;
    const hearth_rope *rope;
} hearth_decoder_ref;

/* What a LoRA trainer (train/lora_train.c) needs beyond inference's ops: a
 * backward through the frozen model to the adapter, and AdamW. Buffers are
 * f32 row-major backend memory unless said; ops run in issue order with the
 * inference ops (hearth_ops.train; NULL where a backend cannot train). */
typedef struct hearth_train_ops {
    /* Rows of logits the loss takes a pass (the backend's trade of memory for passes). */
    int head_rows;
    /* C[M][N] = alpha op(A) op(B) + beta C, beta 0 or 1: op(A) is A [M][K], or with ta A^T of A [K][M];
     * op(B) is B [K][N], or with tb B^T of B [N][K]. */
    void (*gemm)(void *ctx, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                 float alpha, float beta);
    /* A copy of weight w (backend memory; the backend's choice of element type) for matmul_t, made once;
     * NULL on out of memory. *bytes: its size, freed with hearth_ops.free; or 0 when w's own rows serve as
     * they are (then it is w->data, not to be freed). */
    void *(*weight_copy)(void *ctx, const hearth_weight *w, size_t *bytes);
    /* dx[T][w->cols] = dy[T][w->rows] W (acc: +=), W the copy weight_copy made of w. */
    void (*matmul_t)(void *ctx, float *dx, const float *dy, int T, const void *copy, const hearth_weight *w, int acc);
    /* y[rows][dim] = x / rms(x) * w, rs[rows] = 1 / rms(x) (y may not alias x). */
    void (*rmsnorm)(void *ctx, float *y, float *rs, const float *x, const float *w, int rows, int dim, float eps);
    /* dx[rows][dim] (acc: +=) the gradient through that norm of dy, from its x and rs. */
    void (*rmsnorm_bwd)(void *ctx, float *dx, const float *dy, const float *x, const float *rs, const float *w,
                        int rows, int dim, int acc);
    /* x[T][n_heads][head_dim] rotated in place at positions 0..T-1; inverse: by minus the angle (the backward). */
    void (*rope)(void *ctx, float *x, int T, int n_heads, int head_dim, const hearth_rope *rope, int inverse);
    /* dg, du [n] from h = silu(g) u and dh (dg may alias dh). */
    void (*swiglu_bwd)(void *ctx, float *dg, float *du, const float *g, const float *u, const float *dh, size_t n);
    /* Causal attention of one sequence at positions 0..T-1 (window 0: unlimited, else the last `window`
     * positions), q [T][nh hd], k, v [T][nkv hd] (GQA: head h reads kv head h / (nh / nkv)), scale
     * 1 / sqrt(hd): out [T][nh hd] and lse [nh][T], the log-sum-exp of each row's scaled scores. ws:
     * attn_ws_bytes(T_max, ..) of backend memory. */
    size_t (*attn_ws_bytes)(int T_max, int nh, int nkv, int hd);
    void (*attn)(void *ctx, float *out, float *lse, const float *q, const float *k, const float *v, int T, int nh,
                 int nkv, int hd, int window, void *ws);
    /* dq [T][nh hd], dk, dv [T][nkv hd] (overwritten) from dout, with attn's out and lse. */
    void (*attn_bwd)(void *ctx, float *dq, float *dk, float *dv, const float *dout, const float *out,
                     const float *lse, const float *q, const float *k, const float *v, int T, int nh, int nkv, int hd,
                     int window, void *ws);
    /* dst[j][dim] = src[rows[j]][dim] (gather), or dst[rows[j]][dim] = src[j][dim] (scatter), j < n. */
    void (*gather_rows)(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim);
    void (*scatter_rows)(void *ctx, float *dst, const float *src, const int32_t *rows, int n, int dim);
    /* Per row j < n of logits z [n][V]: ce[j] = logsumexp(z[j]) - z[j][y[j]] (double); with w (non-NULL),
     * dz[j] = w[j] (softmax(z[j]) - onehot(y[j])) (dz may alias z; zeros where w[j] == 0). */
    void (*cross_entropy)(void *ctx, float *dz, double *ce, const float *z, const int32_t *y, const float *w, int n,
                          int V);
    /* y[n] += a x[n] */
    void (*axpy)(void *ctx, float *y, float a, const float *x, size_t n);
    /* p[bytes] = 0 */
    void (*zero)(void *ctx, void *p, size_t bytes);
    /* *out += sum of x[i]^2 (out: one double of backend memory) */
    void (*sumsq)(void *ctx, double *out, const float *x, size_t n);
    /* torch.optim.AdamW over n parameters w with gradient g (scaled by gs first; zeroed after) and moments
     * m, v: w *= 1 - lr wd; m, v updated; w -= lr / bc1 m / (sqrt(v) / sqrt(bc2) + eps). */
    void (*adamw)(void *ctx, float *w, float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                  float eps, float wd, float gs, double bc1, double bc2);
    /* The first failure inside an op so far (a device fault; scratch an op could not get), HEARTH_OK if none
     * (err names it). NULL: this backend's ops do not fail. */
    hearth_status (*failed)(void *ctx, hearth_err *err);
} hearth_train_ops;

typedef struct hearth_ops {
    const char *name;
    /* 1 when backend memory is host memory: the model then points weights
     * straight into the mmapped file instead of uploading them. */
    int host_memory;
    /* 1 when kv_write and attention take F16 KV views; E4M3 ones. */
    int kv_f16;
    int kv_e4m3;
    /* 1 when the backend's KV blocks are laid out head by head (hearth_kv_view.head_dim). */
    int kv_heads;
    /* 1 when the lora op takes each group's B matrices transposed, side by side; 0: stacked by rows. */
    int lora_b_t;
    /* 1 when the pick op applies top_k / top_p (the truncation above); 0: rows with them take the host sampler. */
    int pick_truncates;
    /* Backend memory: NULL on out-of-memory (a clean error, never a crash). */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    /* host -> backend; backend -> host (waits for the ops issued before it). */
    void (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*download)(void *ctx, void *dst, const void *src, size_t bytes);
    /* Optional (NULL: the model downloads at once). A download in two halves: download_begin issues the ops
     * recorded so far and the copy, and returns without waiting; dst is written by the time the
     * download_end that ends it returns (each ends the oldest begun). At most two are begun and not ended,
     * so that the host reads one step's picks while the device runs the next (hearth_model_pick_begin). */
    void (*download_begin)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*download_end)(void *ctx);
    /* backend -> backend */
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* y[T][w->rows] = x[T][w->cols] @ W^T */
    void (*matmul)(void *ctx, float *y, const float *x, int T, const hearth_weight *w);
    /* y[i] = x @ w[i]^T for i < n <= 4 (one input, as q, k and v have): the bits of n matmul calls, the
     * input's preparation shared. NULL: the model makes the n calls. */
    void (*matmul_n)(void *ctx, float *const *y, const float *x, int T, const hearth_weight *const *w, int n);
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
    /* LoRA over the n <= 3 matrices of one input (q, k, v; gate, up; o; down): for i < n,
     *   y[i][T][n_out[i]] += (x[T][K] @ A_i^T) @ B_i^T
     * where A_i is rows [i R, (i + 1) R) of a [n R][K], and B_i rows [o_i, o_i + n_out[i]) of b [sum n_out][R]
     * or, where lora_b_t is set, B_i^T columns [o_i, o_i + n_out[i]) of b [R][sum n_out]; o_i = n_out[0] + .. +
     * n_out[i - 1] (F32, backend memory; R a multiple of 16). Only rows t with ids[t] == id change (ids NULL:
     * every row). tmp: backend scratch of T x (n R + max n_out[i]) floats. */
    void (*lora)(void *ctx, float *const *y, const float *x, int T, int K, const float *a, const float *b, int R,
                 const int *n_out, int n, const int32_t *ids, int32_t id, float *tmp);
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
    /* out[r] for each row r of logits[n_rows][vocab], drawn by params[r] (both backend memory); ids non-NULL:
     * ids[r] = out[r].id too (backend memory: a later forward's tokens, which the host need not see first). */
    void (*pick)(void *ctx, hearth_pick *out, const float *logits, int n_rows, int vocab,
                 const hearth_pick_params *params, int32_t *ids);
    /* Optional (NULL: weights stay as uploaded). Called once after a weight
     * is uploaded, before an op reads it: the backend may re-lay its rows in
     * place for its kernels (setting w->layout), and reserve the scratch that
     * multiplying by it takes, since a step never allocates. A host backend
     * (host_memory), whose weights lie in the read-only file mapping, may
     * instead point w->data at a re-laid copy from its alloc, which the model
     * then owns (and frees with free). HEARTH_ENOMEM (err names the scratch
     * or the copy) when that does not fit. */
    hearth_status (*prepare_weight)(void *ctx, hearth_weight *w, hearth_err *err);
    /* Optional (NULL: nothing to do). Called once for each set of n matrices
     * that the model multiplies by one x, one after the other (a layer's q,
     * k and v, in that order), after prepare_weight saw each: the backend
     * may reserve what one product over the whole set takes. The loader puts
     * the set's rows back to back in one allocation where they share a type.
     * HEARTH_ENOMEM (err names the scratch) when that does not fit. */
    hearth_status (*prepare_set)(void *ctx, const hearth_weight *ws, int n, hearth_err *err);
    /* Optional (NULL: ops run as they are issued). Start the ops issued so
     * far on the device and return without waiting for them
     * (hearth_model_submit: the engine hands out the last step's tokens
     * while the device runs the next). */
    void (*submit)(void *ctx);
    /* LoRA training's ops (above); NULL: this backend does not train. */
    const hearth_train_ops *train;
    /* Optional (NULL: none). One token's hidden row x [dim] (a forward of T = 1, no adapters, no window)
     * through every layer of dec, as forward.c's ops compute it (within their rounding: sums may run in
     * another order), layer l's k and v written at (seq[0], pos[0]) of its cache as kv_write writes them.
     * Returns 1 when issued; 0, issuing nothing, where the backend has no such launch for this decoder,
     * cache or context, and the model then runs the layers op by op. */
    int (*decode_layers)(void *ctx, float *x, const hearth_decoder_ref *dec, const hearth_kv_view *kv,
                         const int32_t *seq, const int32_t *pos);
} hearth_ops;

#endif
