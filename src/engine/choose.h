/* choose.h - the next token of each logit row left by the last forward.
 *
 * Where a row's sampler allows it (argmax, temperature, min_p; no penalties,
 * bias, top_p or top_k) the backend's pick op draws the token next to the
 * logits and only the pick crosses to the host; the other rows bring their
 * logits over and go through hearth_sampler_sample. Both give the
 * distribution the sampler documents. */
#ifndef HEARTH_ENGINE_CHOOSE_H
#define HEARTH_ENGINE_CHOOSE_H

#include "engine/sampler.h"
#include "model/model.h"

typedef struct {
    int cap, vocab;
    hearth_pick_params *params; /* [cap] */
    hearth_pick *picks;         /* [cap] */
    uint8_t *by_pick;            /* [cap] row chosen by the pick op */
    uint64_t (*rng)[4];         /* [cap] a pick row's sampler stream after its key was drawn */
    float *logits;              /* [vocab] one host row */
    long rows_pick, rows_host; /* counters */
} hearth_chooser;

hearth_status hearth_chooser_init(hearth_chooser *c, int max_rows, int vocab, hearth_err *err);
void hearth_chooser_deinit(hearth_chooser *c);

/* For row r < n_rows: ids[r] from sampler smp[r], which accepts it, and
 * lps[r] when want_lp[r].
 *
 * Drafts (speculative decoding): draft NULL, or draft[r] >= 0 where row r + 1
 * is the same sequence's next position, fed the drafted token draft[r]. The
 * rows of such a run are chosen in order, each after its sampler accepted the
 * one before, and the run stops at the first row whose token is not the
 * draft: the rows after it get ids[r] = -1. So each token is drawn from what
 * the sampler would have seen one forward at a time (its penalties,
 * constraint and random stream included): a draft changes how many tokens a
 * forward yields, never which. */
hearth_status hearth_choose(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp, const uint8_t *want_lp,
                            const int32_t *draft, int n_rows, int32_t *ids, hearth_logprobs *lps, hearth_err *err);

#endif
