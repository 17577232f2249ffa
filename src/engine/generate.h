/* generate.h - serial generation of one sequence: chunked prefill, then
 * decode one token per step until max_new, a stop id, or the callback stops.
 * Engine thread (or a caller that owns the model and kv alone). */
#ifndef HEARTH_ENGINE_GENERATE_H
#define HEARTH_ENGINE_GENERATE_H

#include "engine/sampler.h"
#include "model/model.h"

/* Called with each generated token (stop ids included, as the last token).
 * Return non-zero to stop after this token. */
typedef int (*hearth_token_fn)(void *user, int32_t id, const hearth_logprobs *lp);

typedef struct {
    int n_prompt, n_gen;
    double prefill_s, decode_s; /* wall time of each phase */
    int stopped_by_id;          /* 1 if a stop id ended generation */
} hearth_gen_stats;

/* Generate into KV slot `slot` (released again before returning), with
 * LoRA adapter `adapter` (0: none; hearth_model_add_lora). lp_wanted:
 * compute logprobs for the callback. */
hearth_status hearth_generate(hearth_model *m, hearth_kv *kv, int slot, int adapter, const int32_t *prompt,
                              int n_prompt, int max_new, hearth_sampler *smp, const int32_t *stop_ids, int n_stop,
                              int lp_wanted, hearth_token_fn fn, void *user, hearth_gen_stats *stats, hearth_err *err);

#endif
