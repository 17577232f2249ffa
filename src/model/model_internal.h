/* model_internal.h - the hearth_model struct, shared by model.c (load) and
 * forward.c (the decoder). */
#ifndef HEARTH_MODEL_INTERNAL_H
#define HEARTH_MODEL_INTERNAL_H

#include "core/sha256.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/model.h"

/* A LoRA adapter's matrices (lora.c), F32 in backend memory, grouped by the
 * input they multiply (the op set's lora op takes a group at once): per
 * layer q, k and v; o; gate and up; down. A group's A matrices are stacked
 * [n R, in], its B matrices (scale folded in) stacked [sum of out, R], or
 * transposed side by side [R, sum of out] for a backend with ops->lora_b_t;
 * a member the adapter leaves alone is zeros there. a NULL: the adapter
 * leaves the whole group alone. */
enum { HEARTH_LORA_QKV, HEARTH_LORA_O, HEARTH_LORA_GATE_UP, HEARTH_LORA_DOWN, HEARTH_LORA_GROUPS };
typedef struct {
    float *a, *b;
    int n, out[3], in;
} hearth_lora_group;
typedef struct {
    int id;                   /* 1.. in load order, never reused; 0: a free slot */
    char *name, *path;
    int rank;                 /* R: the file's r rounded up to 16 */
    float scale;
    uint8_t fingerprint[32];
    hearth_lora_group *groups; /* [n_layers][HEARTH_LORA_GROUPS] */
} hearth_lora;

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
    /* The layers as ops->decode_layers takes them; dec.layers NULL where the
     * architecture is not the plain layer (biases, q/k norms). */
    hearth_layer_ref *dec_layers;
    hearth_decoder_ref dec;
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
    hearth_pick_params *h_pick_params; /* [T], host: what d_pick_params holds, its first n_pick_params rows */
    int n_pick_params;
    hearth_pick *d_picks;              /* [T] */
    int32_t *d_next;                   /* [T] the ids of the last pick begun: a forward's tokens when it is given none */
    int n_next;                        /* rows of that pick (0: none since the model was made) */
    int n_begun, first_begun;          /* picks begun and not ended (hearth_model_pick_begin / _end), the oldest's */
    uint8_t begun_dl[2];               /* entry of those: 1 where it began a download (rows to pick) */
    int n_logit_rows;                  /* rows of logits the last forward left */

    /* Adapters (lora.c) and what applying them takes: the next forward's
     * adapter per row (h_lora, host; 0 = none; set by
     * hearth_model_set_row_adapters), its copy in backend memory, and the
     * lora op's scratch, [max_tokens][3 lora_rank + widest output]. */
    hearth_lora lora[HEARTH_MAX_LORA]; /* slots; an unloaded adapter's is free again */
    int n_lora, last_lora_id, lora_rank, lora_rows_set;
    int32_t *h_lora, *lora_ids;
    float *lora_tmp;
};

/* Backend memory of the model's own (freed with it), or NULL when the
 * backend or the list of what the model owns has no room. */
void *hearth_model_alloc(hearth_model *m, size_t bytes);
/* Free p, taken with hearth_model_alloc, before the model goes (NULL: nothing). */
void hearth_model_free_mem(hearth_model *m, void *p);
/* The loaded adapter of that id, NULL if none. */
hearth_lora *hearth_model_lora_get(hearth_model *m, int id);
void hearth_model_lora_free_all(hearth_model *m);

#endif
