/* pref.h - preference training of a LoRA adapter (DPO, ORPO) over pairs of
 * responses to one prompt, on the trainer of lora_train.h.
 *
 * The losses are TRL's: DPO's sigmoid loss, -log sigmoid(beta ((pi_c -
 * ref_c) - (pi_r - ref_r))) averaged over the batch's pairs, pi the summed
 * log-probability of a response's labels under the adapter and ref under the
 * base model (the adapter left out, as TRL takes a PEFT model's reference);
 * ORPO's, the chosen sequences' cross-entropy over all their tokens, prompt
 * included (TRL: "orpo chosen nll loss is computed over the full prompt and
 * response"), over the batch's count of them, plus -beta log sigmoid(log
 * odds(chosen) - log odds(rejected)) averaged over the pairs, the odds of a
 * response from its mean log-probability a label. Each sequence runs its
 * forward twice: once for its log-probabilities, once with the backward,
 * each token weighed by what the loss's derivative makes of it. */
#ifndef HEARTH_TRAIN_PREF_H
#define HEARTH_TRAIN_PREF_H

#include "train/data.h"
#include "train/lora_train.h"

typedef enum { HEARTH_PREF_DPO, HEARTH_PREF_ORPO } hearth_pref_method;

typedef struct {
    double loss;     /* the batch's */
    double accuracy; /* pairs whose chosen response wins (DPO: reward; ORPO: log odds) */
    double margin;   /* mean of DPO's beta-scaled reward margin, or of ORPO's log-odds ratio */
} hearth_pref_stats;

/* DPO's reference: the base model's summed log-probability of pair i's
 * chosen and rejected labels into ref[2 i] and ref[2 i + 1], i < d->n. */
hearth_status hearth_pref_reference(hearth_lora_trainer *t, const hearth_train_prefs *d, double *ref, hearth_err *err);

/* The loss of the pairs idx[0..P) of d and its gradient, added to the
 * trainer's (hearth_lora_trainer_step takes it). ref: DPO's, else NULL. */
hearth_status hearth_pref_accumulate(hearth_lora_trainer *t, hearth_pref_method m, float beta,
                                     const hearth_train_prefs *d, const double *ref, const int *idx, int P,
                                     hearth_pref_stats *s, hearth_err *err);

/* The same loss, accuracy and margin with the forward alone (held-out pairs; nothing accumulated). */
hearth_status hearth_pref_evaluate(hearth_lora_trainer *t, hearth_pref_method m, float beta,
                                   const hearth_train_prefs *d, const double *ref, const int *idx, int P,
                                   hearth_pref_stats *s, hearth_err *err);

#endif
