/* model_internal.h - the hearth_model struct, shared by model.c (load) and
 * forward.c (the decoder). */
#ifndef HEARTH_MODEL_INTERNAL_H
#define HEARTH_MODEL_INTERNAL_H

#include "core/sha256.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/model.h"

struct hearth_model {
    char *path;
    hearth_model_config cfg;
    const hearth_ops *ops;
    void *ops_ctx;
    hearth_gguf *gguf;    /* one of the two sources */
    hearth_st_set *st;

    hearth_weight tok_embd; /* [vocab, dim] */
    hearth_weight output;   /* [vocab, dim]; the embedding when tied */
    const float *out_norm;  /* [dim] */
    hearth_layer_weights *layers;
    hearth_rope rope;
    size_t weight_bytes;
    size_t upload_total, uploaded; /* device backends: bytes of the file's tensors, bytes sent */
    int upload_decile;
    hearth_sha256 fp;         /* running fingerprint while loading */
    uint8_t fingerprint[32];  /* of the weights: config, tensor headers, sampled bytes */

    /* Backend allocations made at load (uploaded weights, converted norms,
     * activations), freed together. */
    void **owned;
    int n_owned, cap_owned;

    /* Activations, backend memory, sized for max_tokens rows. */
    int max_tokens, max_logit_rows;
    float *x;      /* [T][dim] residual stream */
    float *xb;     /* [T][max(dim, q_dim)] */
    float *q;      /* [T][q_dim] */
    float *k, *v;  /* [T][kv_dim] */
    float *att;    /* [T][q_dim] */
    float *hb, *hb2; /* [T][ffn] */
    float *logits; /* [T][vocab] */
    int32_t *d_rows; /* [3][T]: a forward's token ids, sequences, positions (one upload) */
    int32_t *h_rows; /* [3][T], host: where they are packed for it */
    hearth_pick_params *d_pick_params; /* [T] */
    hearth_pick *d_picks;              /* [T] */
    int n_logit_rows;                  /* rows of logits the last forward left */
};

#endif
