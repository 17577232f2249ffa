/* sampler.c - logit processors, truncation filters, seeded draws, logprobs. */
#include "engine/sampler.h"

#include "core/argmax.h"
#include "core/clock.h"
#include "engine/sampler_llama.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void hearth_sampling_default(hearth_sampling *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->typical_p = 1.0f;
    p->xtc_threshold = 0.1f;
    p->dry.base = 1.75f;
    p->dry.allowed_length = 2;
    p->dynatemp_exponent = 1.0f;
    p->mirostat_tau = 5.0f;
    p->mirostat_eta = 0.1f;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** */
static uint64_t rng_next(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* uniform in [0, 1) with 53 random bits */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

hearth_status hearth_sampler_init(hearth_sampler *s, const hearth_sampling *p, int vocab, hearth_err *err) {
    memset(s, 0, sizeof *s);
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return hearth_err_set(err, HEARTH_EINVAL, "temperature must be >= 0, got %g", p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return hearth_err_set(err, HEARTH_EINVAL, "top_p must be in (0, 1], got %g", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return hearth_err_set(err, HEARTH_EINVAL, "min_p must be in [0, 1], got %g", p->min_p);
    if (p->top_k < 0) return hearth_err_set(err, HEARTH_EINVAL, "top_k must be >= 0, got %d", p->top_k);
    if (!(p->repetition_penalty > 0.0f) || !isfinite(p->repetition_penalty))
        return hearth_err_set(err, HEARTH_EINVAL, "repetition_penalty must be > 0, got %g", p->repetition_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return hearth_err_set(err, HEARTH_EINVAL, "presence/frequency penalty must be finite");
    if (p->top_logprobs < 0 || p->top_logprobs > HEARTH_MAX_TOP_LOGPROBS)
        return hearth_err_set(err, HEARTH_EINVAL, "top_logprobs must be in [0, %d], got %d", HEARTH_MAX_TOP_LOGPROBS,
                              p->top_logprobs);
    if (p->min_tokens < 0 || p->n_min_ban < 0 || p->n_min_ban > HEARTH_SAMPLER_MAX_BAN)
        return hearth_err_set(err, HEARTH_EINVAL, "min_tokens must be >= 0, got %d", p->min_tokens);
    for (int i = 0; i < p->n_min_ban; i++)
        if (p->min_ban[i] < 0 || p->min_ban[i] >= vocab)
            return hearth_err_set(err, HEARTH_EINVAL, "min_tokens: token id %d outside the vocabulary [0, %d)",
                                  p->min_ban[i], vocab);
    if (!(p->typical_p > 0.0f && p->typical_p <= 1.0f))
        return hearth_err_set(err, HEARTH_EINVAL, "typical_p must be in (0, 1], got %g", p->typical_p);
    if (!isfinite(p->top_n_sigma))
        return hearth_err_set(err, HEARTH_EINVAL, "top_n_sigma must be finite, got %g", p->top_n_sigma);
    if (!(p->xtc_probability >= 0.0f && p->xtc_probability <= 1.0f && p->xtc_threshold >= 0.0f &&
          p->xtc_threshold <= 1.0f))
        return hearth_err_set(err, HEARTH_EINVAL, "xtc_probability and xtc_threshold must be in [0, 1], got %g, %g",
                              p->xtc_probability, p->xtc_threshold);
    if (p->repeat_last_n < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "repeat_last_n must be >= 0, got %d", p->repeat_last_n);
    int dry_on = p->dry.multiplier != 0.0f;
    if (!(p->dry.multiplier >= 0.0f) || !isfinite(p->dry.multiplier) || (dry_on && !(p->dry.base >= 1.0f)) ||
        !isfinite(p->dry.base) || p->dry.allowed_length < 0 || (dry_on && p->dry_last_n <= 0))
        return hearth_err_set(err, HEARTH_EINVAL,
                              "dry_multiplier must be >= 0, dry_base >= 1, dry_allowed_length and dry_penalty_last_n "
                              ">= 0 (got %g, %g, %d, %d)",
                              p->dry.multiplier, p->dry.base, p->dry.allowed_length, p->dry_last_n);
    if (p->mirostat < 0 || p->mirostat > 2 || !isfinite(p->mirostat_tau) || !isfinite(p->mirostat_eta) ||
        !isfinite(p->dynatemp_range) || !isfinite(p->dynatemp_exponent))
        return hearth_err_set(err, HEARTH_EINVAL, "mirostat must be 0, 1 or 2 (got %d) and its tau / eta, "
                              "dynatemp_range and dynatemp_exponent finite", p->mirostat);
    for (int i = 0; i < p->n_allowed; i++)
        if (p->allowed_ids[i] < 0 || p->allowed_ids[i] >= vocab)
            return hearth_err_set(err, HEARTH_EINVAL, "allowed_token_ids: token id %d outside the vocabulary [0, %d)",
                                  p->allowed_ids[i], vocab);
    int bad_max = 0;
    for (int i = 0; i < p->bad_words.n; i++) {
        int len = p->bad_words.off[i + 1] - p->bad_words.off[i];
        if (len < 1 || len > HEARTH_BAD_WORD_MAX)
            return hearth_err_set(err, HEARTH_EINVAL, "bad_words: a word of %d tokens (1 to %d)", len,
                                  HEARTH_BAD_WORD_MAX);
        for (int k = p->bad_words.off[i]; k < p->bad_words.off[i + 1]; k++)
            if (p->bad_words.ids[k] < 0 || p->bad_words.ids[k] >= vocab)
                return hearth_err_set(err, HEARTH_EINVAL, "bad_words: token id %d outside the vocabulary",
                                      p->bad_words.ids[k]);
        if (len > bad_max) bad_max = len;
    }
    for (int i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias[i].id < 0 || p->logit_bias[i].id >= vocab)
            return hearth_err_set(err, HEARTH_EINVAL, "logit_bias: token id %d outside the vocabulary [0, %d)",
                                  p->logit_bias[i].id, vocab);
        if (!isfinite(p->logit_bias[i].bias) && p->logit_bias[i].bias != -INFINITY)
            return hearth_err_set(err, HEARTH_EINVAL, "logit_bias: bias for token %d is not a number",
                                  p->logit_bias[i].id);
    }
    s->p = *p;
    s->p.constraint = (hearth_constraint){0}; /* taken only on success */
    s->vocab = vocab;
    s->out_counts = calloc((size_t)vocab, sizeof *s->out_counts);
    s->in_context = calloc((size_t)vocab, 1);
    s->cand = malloc(sizeof *s->cand * (size_t)vocab);
    s->probs = malloc(sizeof *s->probs * (size_t)vocab);
    s->sel = malloc(sizeof *s->sel * (size_t)vocab);
    s->bias = p->n_logit_bias ? malloc(sizeof *s->bias * (size_t)p->n_logit_bias) : NULL;
    int win = p->repetition_penalty != 1.0f ? p->repeat_last_n : 0, dry_n = dry_on ? p->dry_last_n : 0;
    s->hist_cap = win > dry_n ? win : dry_n;
    if (bad_max - 1 > s->hist_cap) s->hist_cap = bad_max - 1; /* the output's end, against a word's start */
    int ext_fail = 0;
    if (p->n_allowed) {
        ext_fail |= !(s->allowed = calloc((size_t)vocab, 1));
        for (int i = 0; !ext_fail && i < p->n_allowed; i++) s->allowed[p->allowed_ids[i]] = 1;
    }
    if (p->bad_words.n) {
        size_t nb = (size_t)p->bad_words.off[p->bad_words.n];
        ext_fail |= !(s->bad_off = malloc(sizeof *s->bad_off * ((size_t)p->bad_words.n + 1)));
        ext_fail |= !(s->bad_ids = malloc(sizeof *s->bad_ids * nb));
        if (!ext_fail) {
            memcpy(s->bad_off, p->bad_words.off, sizeof *s->bad_off * ((size_t)p->bad_words.n + 1));
            memcpy(s->bad_ids, p->bad_words.ids, sizeof *s->bad_ids * nb);
        }
    }
    if (s->hist_cap) ext_fail |= !(s->hist = malloc(sizeof *s->hist * (size_t)s->hist_cap));
    if (win) ext_fail |= !(s->win_counts = calloc((size_t)vocab, sizeof *s->win_counts));
    if (dry_n) {
        ext_fail |= !(s->dry_buf = malloc(sizeof *s->dry_buf * 3 * (size_t)dry_n));
        ext_fail |= !(s->dry_pairs = malloc(sizeof *s->dry_pairs * (size_t)dry_n));
        ext_fail |= hearth_dry_breakers_copy(&s->breakers, p->dry_breakers) != 0;
    }
    if (p->typical_p < 1.0f || p->infill) { /* typical_p's scores; the infill sampler's sort keys */
        ext_fail |= !(s->typ_score = malloc(sizeof *s->typ_score * (size_t)vocab));
        ext_fail |= !(s->typ_order = malloc(sizeof *s->typ_order * (size_t)vocab));
    }
    if (!s->out_counts || !s->in_context || !s->cand || !s->probs || !s->sel || (p->n_logit_bias && !s->bias) ||
        ext_fail) {
        hearth_sampler_deinit(s);
        return hearth_err_set(err, HEARTH_ENOMEM, "sampler: out of memory");
    }
    if (p->n_logit_bias) memcpy(s->bias, p->logit_bias, sizeof *s->bias * (size_t)p->n_logit_bias);
    s->p.logit_bias = s->bias;
    s->p.dry_breakers = &s->breakers;
    s->p.allowed_ids = NULL; /* the bitmap stands for them */
    s->mu = 2.0f * p->mirostat_tau;
    s->p.bad_words.off = s->bad_off;
    s->p.bad_words.ids = s->bad_ids;
    uint64_t seed = p->seed;
    if (!p->has_seed) {
        static atomic_ullong counter;
        seed = (uint64_t)(hearth_time_now() * 1e9) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    }
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    s->p.constraint = p->constraint;
    return HEARTH_OK;
}

void hearth_sampler_deinit(hearth_sampler *s) {
    if (s->p.constraint.free) s->p.constraint.free(s->p.constraint.self);
    free(s->out_counts);
    free(s->in_context);
    free(s->cand);
    free(s->probs);
    free(s->sel);
    free(s->bias);
    free(s->hist);
    free(s->win_counts);
    free(s->dry_buf);
    free(s->dry_pairs);
    free(s->typ_score);
    free(s->typ_order);
    free(s->allowed);
    free(s->bad_off);
    free(s->bad_ids);
    hearth_dry_breakers_free(&s->breakers);
    memset(s, 0, sizeof *s);
}

/* A token of prompt or output into the window of the last hist_cap. */
static void push_history(hearth_sampler *s, int32_t id) {
    if (!s->hist_cap) return;
    int win = s->win_counts ? s->p.repeat_last_n : 0;
    if (win && s->hist_n >= win) s->win_counts[s->hist[(s->hist_n - win) % s->hist_cap]]--;
    if (win) s->win_counts[id]++;
    s->hist[s->hist_n++ % s->hist_cap] = id;
}

void hearth_sampler_accept_prompt(hearth_sampler *s, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < s->vocab) {
            s->in_context[ids[i]] = 1;
            push_history(s, ids[i]);
        }
}

void hearth_sampler_accept(hearth_sampler *s, int32_t id) {
    if (id < 0 || id >= s->vocab) return;
    if (s->p.constraint.accept) s->p.constraint.accept(s->p.constraint.self, id);
    s->out_counts[id]++;
    s->in_context[id] = 1;
    s->n_out++;
    push_history(s, id);
}

static void apply_processors(hearth_sampler *s, float *logits) {
    const hearth_sampling *p = &s->p;
    if (p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        for (int i = 0; i < s->vocab; i++) {
            if ((s->win_counts ? s->win_counts[i] > 0 : s->in_context[i]) && p->repetition_penalty != 1.0f)
                logits[i] = logits[i] > 0 ? logits[i] / p->repetition_penalty : logits[i] * p->repetition_penalty;
            if (s->out_counts[i])
                logits[i] -= p->frequency_penalty * (float)s->out_counts[i] + p->presence_penalty;
        }
    }
    for (int i = 0; i < p->n_logit_bias; i++) logits[s->bias[i].id] += s->bias[i].bias;
    if (s->n_out < p->min_tokens)
        for (int i = 0; i < p->n_min_ban; i++) logits[p->min_ban[i]] = -INFINITY;
    if (s->allowed)
        for (int i = 0; i < s->vocab; i++)
            if (!s->allowed[i]) logits[i] = -INFINITY;
    for (int w = 0; w < p->bad_words.n; w++) { /* vLLM's: the word's start ends the output, its last token is out */
        const int32_t *ids = s->bad_ids + s->bad_off[w];
        int len = s->bad_off[w + 1] - s->bad_off[w], k = 0;
        if (len - 1 > s->n_out) continue;
        while (k < len - 1 && s->hist[(s->hist_n - (len - 1) + k) % s->hist_cap] == ids[k]) k++;
        if (k == len - 1) logits[ids[len - 1]] = -INFINITY;
    }
    if (s->dry_buf) { /* the window oldest first, then the scratch */
        int n = s->hist_n < p->dry_last_n ? (int)s->hist_n : p->dry_last_n;
        for (int i = 0; i < n; i++) s->dry_buf[i] = s->hist[(s->hist_n - n + i) % s->hist_cap];
        hearth_dry_apply(&p->dry, &s->breakers, s->dry_buf, n, s->dry_buf + n, s->dry_pairs, logits, s->vocab);
    }
}

/* The draw considers tokens within this many nats of the best: below that a
 * token's probability does not change an f32 sum, so nothing is lost. */
#define WINDOW 40.0f

/* The constraint over the tokens the draw can reach only: the best allowed
 * token (forbidden ones above it set to -inf as they are found), then, for a
 * temperature draw, every token within WINDOW of it. The draw then sees the
 * same candidates as after a whole mask. 0 when many of the best are
 * forbidden: mask them all instead. */
static int constrain_reachable(hearth_sampler *s, float *logits) {
    const hearth_constraint *c = &s->p.constraint;
    enum { TRIES = 17 };
    int32_t top[TRIES]; /* the likeliest, in argmax's order (a tie: the lower id first), found in one pass */
    int nt = 0;
    for (int i = 0; i < s->vocab; i++) {
        float v = logits[i];
        if (nt == TRIES && !(v > logits[top[TRIES - 1]])) continue;
        int j = nt < TRIES ? nt++ : TRIES - 1;
        while (j > 0 && logits[top[j - 1]] < v) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    int32_t best = -1;
    for (int k = 0; k < nt && best < 0; k++) {
        if (c->allows(c->self, top[k])) best = top[k];
        else if (k == TRIES - 1 || !isfinite(logits[top[k]])) return 0;
        else logits[top[k]] = -INFINITY;
    }
    if (best < 0) return 0;
    if (s->p.temperature > 0.0f) {
        float lo = logits[best] - WINDOW;
        for (int i = 0; i < s->vocab; i++)
            if (i != best && logits[i] >= lo && !c->allows(c->self, i)) logits[i] = -INFINITY;
    }
    return 1;
}

void hearth_logprobs_fill(const float *logits, int vocab, int32_t chosen, int n_top, hearth_logprobs *lp) {
    float mx = -INFINITY;
    for (int i = 0; i < vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    for (int i = 0; i < vocab; i++) sum += exp((double)logits[i] - mx);
    float lse = mx + (float)log(sum); /* as the pick op's (ops/cpu/pick.c), so that the two report the same bits */
    lp->chosen = (hearth_token_logprob){chosen, logits[chosen] - lse};
    int n = n_top;
    lp->n_top = 0;
    lp->rank = 1;
    for (int i = 0; i < vocab; i++) { /* insertion into a short sorted list */
        float v = logits[i];
        lp->rank += v > logits[chosen];
        if (lp->n_top == n && (n == 0 || v <= lp->top[n - 1].logprob)) continue;
        int j = lp->n_top < n ? lp->n_top++ : n - 1;
        while (j > 0 && lp->top[j - 1].logprob < v) {
            lp->top[j] = lp->top[j - 1];
            j--;
        }
        lp->top[j] = (hearth_token_logprob){i, v};
    }
    for (int i = 0; i < lp->n_top; i++) lp->top[i].logprob -= lse;
}

static _Thread_local const float *g_sort_logits; /* qsort has no context argument */
static int cmp_desc(const void *a, const void *b) {
    float x = g_sort_logits[*(const int32_t *)a], y = g_sort_logits[*(const int32_t *)b];
    if (x != y) return x > y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* a comes before b in the draw's order: the larger logit, on a tie the lower id */
static inline int before(const float *x, int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); }

/* sel[0..m): the m first of cand[0..n) in the draw's order, by insertion (m small). */
static void select_best(hearth_sampler *s, const float *x, int n, int m) {
    int32_t *b = s->sel;
    int k = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = s->cand[i];
        if (k == m && !before(x, id, b[m - 1])) continue;
        int j = k < m ? k++ : m - 1;
        while (j > 0 && before(x, id, b[j - 1])) {
            b[j] = b[j - 1];
            j--;
        }
        b[j] = id;
    }
}

#define SELECT_MAX 256 /* above this many, a whole sort */

/* The candidates whose weight (s->probs, in cand's order) is at least lo,
 * moved to the front with their weights; how many. */
static int partition_front(hearth_sampler *s, int n, float lo) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (s->probs[i] >= lo) {
            int32_t c = s->cand[i];
            float w = s->probs[i];
            s->cand[i] = s->cand[k], s->probs[i] = s->probs[k];
            s->cand[k] = c, s->probs[k++] = w;
        }
    return k;
}

/* Put in order only as many of the n candidates as the filters can keep:
 * those above min_p's (or mirostat 2's) threshold, top_k of them, then as
 * many as top_p's mass needs (grown from 64); all of them for mirostat 1.
 * With top_p or min_p, probs[0..n) come in with the weights at temperature
 * 1 in cand's order (total: their sum). cand[0..m) ends sorted with
 * probs[0..m) = their weights; returns m. The draw sees what a whole sort
 * would give it. When no filter truncates, none is ordered: the draw walks
 * the candidates in id order (their weights made only for the dynamic
 * temperature, the one reader). */
static int order_best(hearth_sampler *s, const float *logits, float mx, int n, double total) {
    const hearth_sampling *p = &s->p;
    if (p->top_p >= 1.0f && p->top_k <= 0 && p->min_p <= 0.0f && p->top_n_sigma <= 0.0f && p->typical_p >= 1.0f &&
        p->xtc_probability <= 0.0f && !p->mirostat && !p->infill) { /* nothing truncates: the draw needs no order */
        for (int i = 0; p->dynatemp_range > 0.0f && i < n; i++) s->probs[i] = expf(logits[s->cand[i]] - mx);
        return n;
    }
    int np = n, m; /* cand[0..np): what the thresholds let through */
    if (p->mirostat == 2) { /* surprise <= mu bits at the temperature: weight >= z 2^-mu, z over all */
        double z = 0.0;
        for (int i = 0; i < n; i++) z += s->probs[i] = expf((logits[s->cand[i]] - mx) / p->temperature);
        s->mz = z;
        np = partition_front(s, n, hearth_smp_mirostat_floor(s));
    } else if (!p->mirostat && p->min_p > 0.0f) { /* probability relative to the best >= min_p */
        np = partition_front(s, n, p->min_p);
    }
    m = np;
    if (np == 0) np = n, m = 1; /* none within mu: the best alone */
    if (!p->mirostat && p->top_k > 0 && p->top_k < m) m = p->top_k;
    int want = !p->mirostat && p->top_p < 1.0f && m > 64 ? 64 : m;
    while (want <= SELECT_MAX && want < np) {
        select_best(s, logits, np, want);
        double cum = 0.0;
        for (int i = 0; i < want && cum < p->top_p; i++) cum += expf(logits[s->sel[i]] - mx) / total;
        if (want == m || cum >= p->top_p) {
            memcpy(s->cand, s->sel, sizeof *s->cand * (size_t)want);
            m = want;
            break;
        }
        want = want * 4 < m ? want * 4 : m;
    }
    if (want > SELECT_MAX || want >= np) { /* all that passed, in order */
        g_sort_logits = logits;
        qsort(s->cand, (size_t)np, sizeof *s->cand, cmp_desc);
    }
    for (int i = 0; i < m; i++) s->probs[i] = expf(logits[s->cand[i]] - mx);
    return m;
}

int32_t hearth_sampler_sample(hearth_sampler *s, float *logits, hearth_logprobs *lp) {
    const hearth_sampling *p = &s->p;
    apply_processors(s, logits);
    /* logprobs and top_n_sigma's deviation see the whole constrained distribution: the whole mask */
    if (p->constraint.mask && (lp || p->top_n_sigma > 0.0f || !constrain_reachable(s, logits)))
        p->constraint.mask(p->constraint.self, logits, s->vocab);
    int32_t best = hearth_argmax(logits, s->vocab);
    int32_t chosen = best;
    if ((p->temperature > 0.0f || p->infill) && isfinite(logits[best])) { /* infill at 0: the likeliest it leaves */
        float mx = logits[best];
        int n = 0;
        double total = 0.0;
        for (int i = 0; i < s->vocab; i++)
            if (logits[i] >= mx - WINDOW) s->cand[n++] = i;
        if (p->top_p < 1.0f || p->min_p > 0.0f) /* their weights, and top_p's mass is of the whole window */
            for (int i = 0; i < n; i++) total += s->probs[i] = expf(logits[s->cand[i]] - mx);
        int m = order_best(s, logits, mx, n, total), keep = m; /* no filter keeps more than the m best */
        if (p->top_p < 1.0f) { /* smallest prefix whose mass reaches top_p */
            double cum = 0.0;
            for (int i = 0; i < m; i++) {
                cum += s->probs[i] / total;
                if (cum >= p->top_p) {
                    keep = i + 1;
                    break;
                }
            }
        }
        if (p->min_p > 0.0f) { /* probability relative to the best >= min_p */
            int k = 0;
            while (k < keep && s->probs[k] >= p->min_p) k++;
            keep = k > 0 ? k : 1;
        }
        if (p->top_k > 0 && p->top_k < keep) keep = p->top_k;
        if (p->mirostat) return hearth_smp_mirostat(s, logits, mx, m, rng_uniform(s->rng), lp);
        if (p->top_n_sigma > 0.0f) keep = hearth_smp_top_n_sigma(s, logits, mx, keep);
        if (p->typical_p < 1.0f) keep = hearth_smp_typical(s, keep);
        if (p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f && keep > 1)
            keep = hearth_smp_xtc(s, keep, rng_uniform(s->rng));
        if (p->infill) { /* on what the filters left, counted as llama.cpp counts it */
            keep = hearth_smp_infill(s, logits, mx, keep, keep < n ? keep : s->vocab);
            for (int i = 0; i < keep; i++) s->probs[i] = expf(logits[s->cand[i]] - mx);
        }
        float t = p->dynatemp_range > 0.0f ? hearth_smp_dynatemp(s, keep, keep < n ? keep : s->vocab) : p->temperature;
        if (!(t > 0.0f)) { /* a dynamic temperature of 0: the likeliest left (unordered when nothing truncates) */
            for (int i = 1; i < keep; i++)
                if (before(logits, s->cand[i], s->cand[0])) s->cand[0] = s->cand[i];
            keep = 1;
        }
        double z = 0.0;
        for (int i = 0; i < keep; i++) z += s->probs[i] = keep > 1 ? expf((logits[s->cand[i]] - mx) / t) : 1.0f;
        double u = rng_uniform(s->rng) * z, acc = 0.0;
        chosen = s->cand[keep - 1];
        for (int i = 0; i < keep; i++) {
            acc += s->probs[i];
            if (u < acc) {
                chosen = s->cand[i];
                break;
            }
        }
    }
    if (lp) hearth_logprobs_fill(logits, s->vocab, chosen, s->p.top_logprobs, lp);
    return chosen;
}

int hearth_sampler_by_pick(const hearth_sampler *s, int truncates) {
    const hearth_sampling *p = &s->p;
    const int truncation = p->top_p < 1.0f || (p->top_k > 0 && p->top_k < s->vocab);
    return !((!truncates && truncation) || p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
             p->frequency_penalty != 0.0f || p->n_logit_bias > 0 || p->constraint.mask || p->dry.multiplier != 0.0f ||
             p->top_n_sigma > 0.0f || p->typical_p < 1.0f || p->xtc_probability > 0.0f || s->allowed ||
             p->bad_words.n || p->mirostat || p->dynatemp_range > 0.0f || p->infill ||
             (s->n_out < p->min_tokens && p->n_min_ban > 0) || p->top_logprobs > HEARTH_PICK_TOP);
}

int hearth_sampler_pick_params(hearth_sampler *s, int want_logprobs, int truncates, hearth_pick_params *out) {
    const hearth_sampling *p = &s->p;
    if (!hearth_sampler_by_pick(s, truncates)) return 0;
    *out = (hearth_pick_params){.temperature = p->temperature, .min_p = p->min_p, .logprobs = want_logprobs != 0,
                                .n_top = want_logprobs ? p->top_logprobs : 0, .top_k = p->top_k > 0 ? p->top_k : 0,
                                .top_p = p->top_p < 1.0f ? p->top_p : 0.0f};
    if (p->temperature > 0.0f) out->key = rng_next(s->rng);
    return 1;
}

int32_t hearth_sampler_from_pick(const hearth_sampler *s, const hearth_pick *pk, hearth_logprobs *lp) {
    (void)s;
    if (lp) {
        lp->chosen = (hearth_token_logprob){pk->id, pk->chosen - pk->lse};
        lp->n_top = pk->n_top;
        lp->rank = 0;
        for (int i = 0; i < pk->n_top && i < HEARTH_MAX_TOP_LOGPROBS; i++)
            lp->top[i] = (hearth_token_logprob){pk->top_id[i], pk->top_x[i] - pk->lse};
    }
    return pk->id;
}
