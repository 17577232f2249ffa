/* choose.c - pick on the backend where possible, sample on the host otherwise. */
#include "engine/choose.h"

#include <stdlib.h>
#include <string.h>

hearth_status hearth_chooser_init(hearth_chooser *c, int max_rows, int vocab, hearth_err *err) {
    memset(c, 0, sizeof *c);
    c->cap = max_rows;
    c->vocab = vocab;
    c->params = calloc((size_t)max_rows, sizeof *c->params);
    c->picks = calloc((size_t)max_rows, sizeof *c->picks);
    c->by_pick = calloc((size_t)max_rows, 1);
    c->rng = calloc((size_t)max_rows, sizeof *c->rng);
    c->logits = malloc(sizeof(float) * (size_t)vocab);
    if (!c->params || !c->picks || !c->by_pick || !c->rng || !c->logits) {
        hearth_chooser_deinit(c);
        return hearth_err_set(err, HEARTH_ENOMEM, "sampling buffers: out of memory");
    }
    return HEARTH_OK;
}

void hearth_chooser_deinit(hearth_chooser *c) {
    free(c->params);
    free(c->picks);
    free(c->by_pick);
    free(c->rng);
    free(c->logits);
    memset(c, 0, sizeof *c);
}

hearth_status hearth_choose(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp, const uint8_t *want_lp,
                            const int32_t *draft, int n_rows, int32_t *ids, hearth_logprobs *lps, hearth_err *err) {
    if (n_rows > c->cap) return hearth_err_set(err, HEARTH_EINVAL, "choose: %d rows (max %d)", n_rows, c->cap);
    int n_pick = 0;
    for (int r = 0; r < n_rows; r++) {
        c->by_pick[r] = (uint8_t)hearth_sampler_pick_params(smp[r], want_lp[r], &c->params[r]);
        if (c->by_pick[r]) n_pick++;
        else c->params[r] = (hearth_pick_params){0}; /* an argmax nobody reads */
        if (draft) memcpy(c->rng[r], smp[r]->rng, sizeof c->rng[r]);
    }
    hearth_status st;
    if (n_pick > 0 && (st = hearth_model_pick(m, n_rows, c->params, c->picks, err)) != HEARTH_OK) return st;
    int skip = 0; /* rows left of a run whose draft was refused */
    for (int r = 0; r < n_rows; r++) {
        if (skip) {
            ids[r] = -1;
            skip = draft && draft[r] >= 0;
            continue;
        }
        hearth_logprobs *lp = want_lp[r] ? &lps[r] : NULL;
        if (c->by_pick[r]) {
            ids[r] = hearth_sampler_from_pick(smp[r], &c->picks[r], lp);
            /* the stream as if the run's later rows had drawn no key */
            if (draft) memcpy(smp[r]->rng, c->rng[r], sizeof c->rng[r]);
        } else {
            if ((st = hearth_model_logits_row(m, r, c->logits, err)) != HEARTH_OK) return st;
            ids[r] = hearth_sampler_sample(smp[r], c->logits, lp);
        }
        hearth_sampler_accept(smp[r], ids[r]);
        skip = draft && draft[r] >= 0 && ids[r] != draft[r];
    }
    c->rows_pick += n_pick;
    c->rows_host += n_rows - n_pick;
    return HEARTH_OK;
}
