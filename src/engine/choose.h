/* choose.h - the next token of each logit row left by the last forward.
 *
 * Where a row's sampler allows it (argmax, temperature, min_p, top_p, top_k;
 * no penalties, bias, constraint or llama.cpp's other filters) the backend's
 * pick op draws the token next to the logits and only the pick crosses to the
 * host (top_k / top_p where the backend's pick truncates, or as
 * HEARTH_PICK_TRUNCATE=0 / 1 says); the other rows bring their
 * logits over and go through hearth_sampler_sample, several rows at once on
 * a pool of threads when no row carries a draft (each row is its own
 * sequence's sampler then). Both give the distribution the sampler
 * documents, and a row's token does not depend on the others. */
#ifndef HEARTH_ENGINE_CHOOSE_H
#define HEARTH_ENGINE_CHOOSE_H

#include "core/pool.h"
#include "engine/sampler.h"
#include "model/model.h"

/* One choice between its begin and its end: what the pick drew and left. */
typedef struct {
    hearth_pick_params *params; /* [cap] */
    hearth_pick *picks;         /* [cap] */
    uint8_t *by_pick;           /* [cap] row chosen by the pick op */
    uint64_t (*rng)[4];         /* [cap] a pick row's sampler stream after its key was drawn */
    int n_pick;
    hearth_status st; /* _begin's, and its message: _end returns them */
    char msg[512];
} hearth_choice;

typedef struct {
    int cap, vocab;
    hearth_choice set[2]; /* begun, oldest first from set[first] */
    int first, n_open;
    float *logits;              /* [n_bufs][vocab] host rows */
    int n_bufs;                 /* host rows sampled at once (the pool's threads), at least 1 */
    hearth_pool *pool;          /* NULL: one thread */
    int32_t *host;              /* [cap] the rows for the host sampler */
    long rows_pick, rows_host; /* counters */
    int truncate;               /* HEARTH_PICK_TRUNCATE 0 / 1, else -1 (the backend's ops->pick_truncates) */
} hearth_chooser;

/* threads: host rows sampled in parallel (1: on the caller only). */
hearth_status hearth_chooser_init(hearth_chooser *c, int max_rows, int vocab, int threads, hearth_err *err);
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

/* hearth_choose in two halves, for a step issued before the last one's
 * tokens are read (the engine's step ahead): _begin draws the pick rows'
 * params and begins the model's pick (hearth_model_pick_begin); _end, given
 * the same arguments, ends the oldest choice begun and chooses its rows.
 * At most two are open. A host row reads the last forward's logits, so a
 * choice begun while another is open must have every row by the pick
 * (hearth_choose_by_pick), as must the open one. _end is called whatever
 * _begin returned. */
hearth_status hearth_choose_begin(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp,
                                  const uint8_t *want_lp, const int32_t *draft, int n_rows, hearth_err *err);
hearth_status hearth_choose_end(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp, const uint8_t *want_lp,
                                const int32_t *draft, int n_rows, int32_t *ids, hearth_logprobs *lps, hearth_err *err);
/* 1 when the pick op would choose the token of sampler s (drawing nothing). */
int hearth_choose_by_pick(const hearth_chooser *c, const hearth_model *m, const hearth_sampler *s);

#endif
