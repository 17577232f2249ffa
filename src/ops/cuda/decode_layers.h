/* decode_layers.h - every layer of one decode token as one launch
 * (decode_layers.cu; hearth_ops.decode_layers), for the shape it is built
 * for: BF16 weights of hidden 4096, FFN 14336, 32 q heads of 128 over 8 kv
 * heads, an f16 cache, at most DL_MAX_CTX positions. */
#ifndef HEARTH_OPS_CUDA_DECODE_LAYERS_H
#define HEARTH_OPS_CUDA_DECODE_LAYERS_H

#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#define DL_DIM 4096
#define DL_FFN 14336
#define DL_HEAD_DIM 128
#define DL_KV_HEADS 8
#define DL_GQA 4
#define DL_MAX_CTX 4096 /* a split's positions go through shared memory in tiles of 64 */

/* One layer's weights (of the plan's type: BF16 rows as stored, Q8_0 / Q4_0 rows split at load), norms and
 * f16 cache pools, as the kernel reads them from a device table. */
struct cu_dl_layer {
    const uint8_t *wq, *wk, *wv, *wo, *wg, *wu, *wd;
    const float *n1, *n2;
    __half *kc, *vc;
};

struct cu_dl_args {
    float *x;                   /* [DL_DIM], in place */
    const cu_dl_layer *layers;  /* device, [n_layers] */
    int n_layers;
    const int32_t *table;       /* block table */
    int block_size, max_blocks;
    const int32_t *seq, *pos;   /* device, [1] */
    const float *inv_freq;      /* [DL_HEAD_DIM / 2] */
    int neox;
    float eps, scale;
    void *scratch;              /* cu_dl_scratch_bytes(n_layers) */
};

struct cu_dl_plan_t {
    int type, grid, stages, rmax, smem;
};

size_t cu_dl_scratch_bytes(int n_layers);
/* The launch's shape for L's share of the device and weights of `type` (HEARTH_DT_BF16 as stored, Q8_0 or
 * Q4_0 rows split at load); 0 for another type or where the kernel does not fit a multiprocessor. */
int cu_dl_plan(const struct cu_launch *L, int type, cu_dl_plan_t *plan);
void cu_decode_layers(const struct cu_launch *L, const cu_dl_plan_t *plan, const cu_dl_args *a);

#endif
