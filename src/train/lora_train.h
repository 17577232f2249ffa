/* lora_train.h - LoRA fine-tuning of a model on its backend (the CPU or
 * CUDA: any whose op set has hearth_ops.train): the forward with its
 * activations kept, the backward through the frozen weights to the
 * adapter's A and B, AdamW, and PEFT's adapter directory out.
 *
 * The trainable parameters are PEFT's: per adapted projection A [r, in] and
 * B [out, r], the projection computing W x + scale * B (A x) (scale
 * alpha / r, or alpha / sqrt(r) with rsLoRA). A step's loss is the summed
 * cross-entropy of its label tokens over their count (what PEFT + a plain
 * PyTorch loop compute for a batch run one sequence at a time); AdamW is
 * torch.optim.AdamW's (decoupled weight decay, bias-corrected moments).
 *
 * The frozen weights are used as the inference forward uses them (the
 * backend's matmul, quantized types included); the backward multiplies by
 * the backend's copies of them (F32 on the CPU: 4 bytes a weight, 0.5 GB
 * for a 135M model; BF16 on CUDA unless the weight is F32).
 * Sequences run one at a time, positions 0..n-1, causal attention (with the
 * model's sliding window). One thread at a time per trainer. */
#ifndef HEARTH_TRAIN_LORA_TRAIN_H
#define HEARTH_TRAIN_LORA_TRAIN_H

#include "model/model.h"

#include <stdint.h>

typedef struct {
    int rank;          /* r */
    float alpha;       /* lora_alpha */
    int rslora;        /* scale alpha / sqrt(r) */
    unsigned targets;  /* bit HEARTH_LORA_T_*: the projections adapted */
    float lr, beta1, beta2, eps, weight_decay;
    float max_grad_norm; /* clip the step's gradient to this L2 norm; 0 = no clipping */
    int max_len;         /* the longest sequence accumulate takes */
    int pack;            /* the most tokens a forward takes over a pack of sequences (0: max_len) */
    int checkpoint;      /* gradient checkpointing: keep each layer's input only and run its forward again
                            in the backward (a third more compute; the activations of one layer, not all) */
    uint64_t seed;       /* A's initialisation (B starts at zero, as PEFT's) */
} hearth_lora_train_opts;

typedef struct hearth_lora_trainer hearth_lora_trainer;

/* A trainer for model m, on the backend m was loaded on (its forward's
 * max_tokens at least opts->max_len and opts->pack). init_dir: a PEFT adapter to start from (its r, alpha, rsLoRA and
 * targets replace opts'), or NULL for PEFT's initialisation (A uniform in
 * +-1/sqrt(in) from opts->seed, B zero). */
hearth_status hearth_lora_trainer_new(hearth_lora_trainer **out, hearth_model *m, const hearth_lora_train_opts *opts,
                                      const char *init_dir, hearth_err *err);
void hearth_lora_trainer_free(hearth_lora_trainer *t);

/* Forward and backward of one sequence (n tokens, 2 <= n <= max_len;
 * label[i] = 1 when tokens[i] counts in the loss, predicted from i - 1):
 * adds grad_scale x its gradient to the step's and returns the summed
 * cross-entropy of its labels in *loss_sum. */
hearth_status hearth_lora_trainer_accumulate(hearth_lora_trainer *t, const int32_t *tokens, const uint8_t *label,
                                             int n, float grad_scale, double *loss_sum, hearth_err *err);
/* The same for n_seqs sequences at once (a pack: each attends only to
 * itself; their tokens together at most opts->pack): one forward and
 * backward of all their rows, which a GPU runs faster than each alone. The
 * gradient and the losses are the sum of each sequence's (to rounding). */
hearth_status hearth_lora_trainer_accumulate_pack(hearth_lora_trainer *t, int n_seqs, const int32_t *const *tokens,
                                                  const uint8_t *const *label, const int *n, float grad_scale,
                                                  double *loss_sum, hearth_err *err);
/* The forward alone: the summed log-probability of the labels of one
 * sequence, and with logp_all (may be NULL) of every token but the first,
 * with the adapter or without it (the base model, which DPO takes as its
 * reference). */
hearth_status hearth_lora_trainer_logp(hearth_lora_trainer *t, const int32_t *tokens, const uint8_t *label, int n,
                                       int with_adapter, double *logp_sum, double *logp_all, hearth_err *err);
/* Forward and backward of one sequence, adding the gradient of
 * sum_i w[i] CE_i (CE_i: the cross-entropy of token i from position i - 1;
 * w[0] is not read), for losses that weigh tokens apart (ORPO). */
hearth_status hearth_lora_trainer_accumulate_w(hearth_lora_trainer *t, const int32_t *tokens, const float *w, int n,
                                               hearth_err *err);
/* One AdamW update at learning rate lr from the gradient accumulated since
 * the last step, then the gradient zeroed. *grad_norm (may be NULL): its L2
 * norm before clipping. */
void hearth_lora_trainer_step(hearth_lora_trainer *t, float lr, double *grad_norm);

/* PEFT's directory at dir (made if missing): adapter_config.json and
 * adapter_model.safetensors (F32), which `hearth serve --lora`, PEFT and
 * vLLM load. base: the model's path, written as base_model_name_or_path. */
hearth_status hearth_lora_trainer_save(const hearth_lora_trainer *t, const char *dir, const char *base,
                                       hearth_err *err);

/* For tests: the parameters (and the accumulated gradient) of target tg of
 * layer l in the file's row order, copied out; 0 when it is not adapted. */
int hearth_lora_trainer_get(const hearth_lora_trainer *t, int l, int tg, float *a, float *b, float *ga, float *gb);
/* For tests: target tg of layer l's A [r][in] (what 0), B [out][r] (1), or
 * their gradients (2, 3) in place, in the model's row order; NULL when it is
 * not adapted or not in host memory. *n: its length. */
float *hearth_lora_trainer_tensor(hearth_lora_trainer *t, int l, int tg, int what, int *n);
/* Bytes the trainer holds beyond the model (for the CLI's report). */
size_t hearth_lora_trainer_bytes(const hearth_lora_trainer *t);

#endif
