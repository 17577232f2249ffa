/* choose.c - pick on the backend where possible, sample on the host otherwise. */
#include "engine/choose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hearth_status hearth_chooser_init(hearth_chooser *c, int max_rows, int vocab, int threads, hearth_err *err) {
    memset(c, 0, sizeof *c);
    c->cap = max_rows;
    c->vocab = vocab;
    if (threads > max_rows) threads = max_rows;
    c->n_bufs = threads > 1 ? threads : 1;
    const char *env = getenv("HEARTH_PICK_TRUNCATE"); /* 0 / 1: top_k / top_p rows on the pick op or not (A/B runs) */
    c->truncate = env && (!strcmp(env, "0") || !strcmp(env, "1")) ? env[0] - '0' : -1;
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        hearth_choice *h = &c->set[k];
        h->params = calloc((size_t)max_rows, sizeof *h->params);
        h->picks = calloc((size_t)max_rows, sizeof *h->picks);
        h->by_pick = calloc((size_t)max_rows, 1);
        h->rng = calloc((size_t)max_rows, sizeof *h->rng);
        ok &= h->params && h->picks && h->by_pick && h->rng;
    }
    c->host = calloc((size_t)max_rows, sizeof *c->host);
    c->logits = malloc(sizeof(float) * (size_t)vocab * (size_t)c->n_bufs);
    if (!ok || !c->host || !c->logits) {
        hearth_chooser_deinit(c);
        return hearth_err_set(err, HEARTH_ENOMEM, "sampling buffers: out of memory");
    }
    hearth_status st = c->n_bufs > 1 ? hearth_pool_new(&c->pool, c->n_bufs, err) : HEARTH_OK;
    if (st != HEARTH_OK) hearth_chooser_deinit(c);
    return st;
}

void hearth_chooser_deinit(hearth_chooser *c) {
    hearth_pool_free(c->pool);
    free(c->host);
    for (int k = 0; k < 2; k++) {
        free(c->set[k].params);
        free(c->set[k].picks);
        free(c->set[k].by_pick);
        free(c->set[k].rng);
    }
    free(c->logits);
    memset(c, 0, sizeof *c);
}

typedef struct {
    hearth_chooser *c;
    hearth_sampler *const *smp;
    const uint8_t *want_lp;
    int32_t *ids;
    hearth_logprobs *lps;
    int base; /* the batch's first entry of c->host */
} batch;

static void sample_task(void *ctx, int k, int n) {
    (void)n;
    batch *b = ctx;
    int r = b->c->host[b->base + k];
    hearth_logprobs *lp = b->want_lp[r] ? &b->lps[r] : NULL;
    b->ids[r] = hearth_sampler_sample(b->smp[r], b->c->logits + (size_t)k * (size_t)b->c->vocab, lp);
    hearth_sampler_accept(b->smp[r], b->ids[r]);
}

/* No drafts: the pick rows in order, then the host rows n_bufs at a time,
 * their logits brought over on this thread and sampled on the pool. */
static hearth_status choose_parallel(hearth_chooser *c, const hearth_choice *h, hearth_model *m,
                                     hearth_sampler *const *smp, const uint8_t *want_lp, int n_rows, int32_t *ids,
                                     hearth_logprobs *lps, hearth_err *err) {
    int nh = 0;
    for (int r = 0; r < n_rows; r++) {
        if (!h->by_pick[r]) {
            c->host[nh++] = r;
            continue;
        }
        ids[r] = hearth_sampler_from_pick(smp[r], &h->picks[r], want_lp[r] ? &lps[r] : NULL);
        hearth_sampler_accept(smp[r], ids[r]);
    }
    batch b = {c, smp, want_lp, ids, lps, 0};
    for (; b.base < nh; b.base += c->n_bufs) {
        int k = nh - b.base < c->n_bufs ? nh - b.base : c->n_bufs;
        for (int j = 0; j < k; j++) {
            hearth_status st = hearth_model_logits_row(m, c->host[b.base + j], c->logits + (size_t)j * c->vocab, err);
            if (st != HEARTH_OK) return st;
        }
        hearth_pool_run(c->pool, sample_task, &b, k);
    }
    c->rows_pick += h->n_pick;
    c->rows_host += nh;
    return HEARTH_OK;
}

static int truncates(const hearth_chooser *c, const hearth_model *m) {
    return c->truncate >= 0 ? c->truncate : hearth_model_pick_truncates(m);
}

int hearth_choose_by_pick(const hearth_chooser *c, const hearth_model *m, const hearth_sampler *s) {
    return hearth_sampler_by_pick(s, truncates(c, m));
}

hearth_status hearth_choose_begin(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp,
                                  const uint8_t *want_lp, const int32_t *draft, int n_rows, hearth_err *err) {
    HEARTH_ASSERT(c->n_open < 2);
    hearth_choice *h = &c->set[(c->first + c->n_open++) % 2];
    hearth_err e2 = {0}; /* a failure's message, kept in h for _end (err may be NULL) */
    h->n_pick = 0;
    h->st = HEARTH_OK;
    if (n_rows > c->cap) {
        h->st = hearth_err_set(&e2, HEARTH_EINVAL, "choose: %d rows (max %d)", n_rows, c->cap);
    } else {
        const int tr = truncates(c, m);
        for (int r = 0; r < n_rows; r++) {
            h->by_pick[r] = (uint8_t)hearth_sampler_pick_params(smp[r], want_lp[r], tr, &h->params[r]);
            if (h->by_pick[r]) h->n_pick++;
            else h->params[r] = (hearth_pick_params){0}; /* an argmax nobody reads */
            if (draft) memcpy(h->rng[r], smp[r]->rng, sizeof h->rng[r]);
        }
        if (h->n_pick > 0 && (h->st = hearth_model_pick_begin(m, n_rows, h->params, h->picks, &e2)) != HEARTH_OK)
            h->n_pick = 0; /* nothing begun: nothing to end */
    }
    if (h->st == HEARTH_OK) return HEARTH_OK;
    snprintf(h->msg, sizeof h->msg, "%s", e2.msg);
    return hearth_err_set(err, h->st, "%s", e2.msg);
}

hearth_status hearth_choose_end(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp, const uint8_t *want_lp,
                                const int32_t *draft, int n_rows, int32_t *ids, hearth_logprobs *lps,
                                hearth_err *err) {
    HEARTH_ASSERT(c->n_open > 0);
    const hearth_choice *h = &c->set[c->first];
    c->first ^= 1;
    c->n_open--;
    if (h->n_pick > 0) hearth_model_pick_end(m);
    if (h->st != HEARTH_OK) return hearth_err_set(err, h->st, "%s", h->msg);
    if (!draft && c->pool && n_rows - h->n_pick > 1)
        return choose_parallel(c, h, m, smp, want_lp, n_rows, ids, lps, err);
    hearth_status st;
    int skip = 0; /* rows left of a run whose draft was refused */
    for (int r = 0; r < n_rows; r++) {
        if (skip) {
            ids[r] = -1;
            skip = draft && draft[r] >= 0;
            continue;
        }
        hearth_logprobs *lp = want_lp[r] ? &lps[r] : NULL;
        if (h->by_pick[r]) {
            ids[r] = hearth_sampler_from_pick(smp[r], &h->picks[r], lp);
            /* the stream as if the run's later rows had drawn no key */
            if (draft) memcpy(smp[r]->rng, h->rng[r], sizeof h->rng[r]);
        } else {
            if ((st = hearth_model_logits_row(m, r, c->logits, err)) != HEARTH_OK) return st;
            ids[r] = hearth_sampler_sample(smp[r], c->logits, lp);
        }
        hearth_sampler_accept(smp[r], ids[r]);
        skip = draft && draft[r] >= 0 && ids[r] != draft[r];
    }
    c->rows_pick += h->n_pick;
    c->rows_host += n_rows - h->n_pick;
    return HEARTH_OK;
}

hearth_status hearth_choose(hearth_chooser *c, hearth_model *m, hearth_sampler *const *smp, const uint8_t *want_lp,
                            const int32_t *draft, int n_rows, int32_t *ids, hearth_logprobs *lps, hearth_err *err) {
    hearth_choose_begin(c, m, smp, want_lp, draft, n_rows, err);
    return hearth_choose_end(c, m, smp, want_lp, draft, n_rows, ids, lps, err);
}
