/* sampler_llama.c - llama.cpp's top_n_sigma, typical_p, XTC, dynamic
 * temperature and mirostat (v1, v2) on hearth's sampler's candidates, as
 * llama.cpp defines them (src/llama-sampler.cpp of the vendored source). */
#include "engine/sampler_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* top_n_sigma: the prefix of cand[0..keep) within top_n_sigma standard
 * deviations of the best logit, the deviation over every finite logit. */
int hearth_smp_top_n_sigma(const hearth_sampler *s, const float *logits, float mx, int keep) {
    double sum = 0.0, sq = 0.0;
    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if (isfinite(logits[i])) sum += logits[i], n++;
    double mean = n ? sum / n : 0.0;
    for (int i = 0; i < s->vocab; i++)
        if (isfinite(logits[i])) sq += (logits[i] - mean) * (logits[i] - mean);
    float lo = mx - s->p.top_n_sigma * (float)sqrt(n ? sq / n : 0.0);
    int k = 0;
    while (k < keep && logits[s->cand[k]] >= lo) k++;
    return k > 0 ? k : 1;
}

static _Thread_local const float *g_sort_scores; /* qsort has no context argument */
static int cmp_score(const void *a, const void *b) {
    float x = g_sort_scores[*(const int32_t *)a], y = g_sort_scores[*(const int32_t *)b];
    if (x != y) return x < y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* The entropy (nats) of weights w[0..n) renormalized; their sum into *total. */
static double entropy(const float *w, int n, double *total) {
    double t = 0.0, h = 0.0;
    for (int i = 0; i < n; i++) t += w[i];
    for (int i = 0; i < n; i++) {
        double q = w[i] / t;
        if (q > 0) h -= q * log(q);
    }
    *total = t;
    return h;
}

/* typical_p over cand[0..keep) (probs: their weights at temperature 1),
 * renormalized: the tokens whose surprise is nearest the entropy, until
 * their mass passes typical_p; kept in cand's order. */
int hearth_smp_typical(hearth_sampler *s, int keep) {
    double total, h = entropy(s->probs, keep, &total);
    int32_t *order = s->typ_order; /* positions by score */
    for (int i = 0; i < keep; i++) {
        double q = s->probs[i] / total;
        s->typ_score[i] = q > 0 ? (float)fabs(-log(q) - h) : INFINITY;
        order[i] = i;
    }
    g_sort_scores = s->typ_score;
    qsort(order, (size_t)keep, sizeof *order, cmp_score);
    double cum = 0.0;
    int n = keep;
    for (int i = 0; i < keep; i++) {
        cum += s->probs[order[i]] / total;
        if (cum > s->p.typical_p) {
            n = i + 1;
            break;
        }
    }
    for (int i = 0; i < keep; i++) s->typ_score[i] = 0.0f; /* now: 1 = kept */
    for (int i = 0; i < n; i++) s->typ_score[order[i]] = 1.0f;
    int k = 0;
    for (int i = 0; i < keep; i++)
        if (s->typ_score[i] != 0.0f) s->cand[k] = s->cand[i], s->probs[k] = s->probs[i], k++;
    return k;
}

/* XTC over cand[0..keep), most likely first: at its chance, every token
 * whose renormalized probability reaches the threshold but the last of
 * them is dropped. */
int hearth_smp_xtc(hearth_sampler *s, int keep, double u) {
    if (u > s->p.xtc_probability) return keep;
    double total = 0.0;
    for (int i = 0; i < keep; i++) total += s->probs[i];
    int last = 0;
    while (last + 1 < keep && s->probs[last + 1] / total >= s->p.xtc_threshold) last++;
    if (last == 0 || !(s->probs[0] / total >= s->p.xtc_threshold)) return keep;
    memmove(s->cand, s->cand + last, sizeof *s->cand * (size_t)(keep - last));
    memmove(s->probs, s->probs + last, sizeof *s->probs * (size_t)(keep - last));
    return keep - last;
}

float hearth_smp_dynatemp(const hearth_sampler *s, int keep, int n_norm) {
    const hearth_sampling *p = &s->p;
    float lo = p->temperature - p->dynatemp_range, hi = p->temperature + p->dynatemp_range;
    if (lo < 0.0f) lo = 0.0f;
    if (keep <= 1 || n_norm <= 1) return p->temperature;
    double total, h = entropy(s->probs, keep, &total);
    return lo + (hi - lo) * powf((float)(h / log((double)n_norm)), p->dynatemp_exponent);
}

float hearth_smp_mirostat_floor(const hearth_sampler *s) { return (float)(s->mz * exp2(-(double)s->mu)); }

int32_t hearth_smp_mirostat(hearth_sampler *s, const float *logits, float mx, int n, double u, hearth_logprobs *lp) {
    const hearth_sampling *p = &s->p;
    double z = 0.0;
    for (int i = 0; i < n; i++) z += s->probs[i] = expf((logits[s->cand[i]] - mx) / p->temperature);
    if (p->mirostat == 2) z = s->mz; /* n: only those within mu; the sum is over all */
    int keep = 1;
    if (p->mirostat == 2) { /* the likeliest tokens whose surprise is at most mu */
        float lo = hearth_smp_mirostat_floor(s);
        while (keep < n && s->probs[keep] >= lo) keep++;
    } else { /* Zipf's exponent from the top 100, then the top k that gives surprise mu */
        double st = 0.0, tt = 0.0;
        for (int i = 0; i < 99 && i < n - 1; i++) {
            double ti = log((double)(i + 2) / (i + 1)), bi = log(s->probs[i] / s->probs[i + 1]);
            st += ti * bi, tt += ti * ti;
        }
        double sh = tt > 0 ? st / tt : 1.0, eps = sh - 1;
        double k = pow(eps * pow(2.0, s->mu) / (1 - pow((double)s->vocab, -eps)), 1 / sh);
        keep = k >= 1 && k < n ? (int)k : k >= n ? n : 1;
    }
    double zk = 0.0;
    for (int i = 0; i < keep; i++) zk += s->probs[i];
    double x = u * zk, acc = 0.0;
    int c = keep - 1;
    for (int i = 0; i < keep; i++) {
        acc += s->probs[i];
        if (x < acc) {
            c = i;
            break;
        }
    }
    s->mu -= p->mirostat_eta * (float)(-log2(s->probs[c] / zk) - p->mirostat_tau);
    int32_t chosen = s->cand[c];
    if (lp) hearth_logprobs_fill(logits, s->vocab, chosen, p->top_logprobs, lp);
    return chosen;
}

#define INFILL_MERGE_MAX 1024 /* llama.cpp compares every pair; past the best 1024 no text is merged */

static int is_end(const hearth_infill_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return 1;
    return 0;
}

/* the candidates ordered best first (llama.cpp sorts them), ties by id */
static void sort_best(hearth_sampler *s, const float *logits, int keep) {
    for (int i = 0; i < keep; i++) s->typ_score[s->cand[i]] = -logits[s->cand[i]];
    g_sort_scores = s->typ_score;
    qsort(s->cand, (size_t)keep, sizeof *s->cand, cmp_score);
}

int hearth_smp_infill(hearth_sampler *s, const float *logits, float mx, int keep, int n_ratio) {
    const hearth_infill_vocab *v = &s->p.infill_vocab;
    sort_best(s, logits, keep);
    const int32_t best = s->cand[0];
    double z = 0.0, p_end = 0.0;
    for (int i = 0; i < keep; i++) z += s->probs[i] = expf(logits[s->cand[i]] - mx);
    for (int i = 0; i < keep; i++) {
        s->probs[i] = (float)(s->probs[i] / z);
        if (is_end(v, s->cand[i])) p_end += s->probs[i];
    }
    int k = 0;
    if (3.0 * p_end * n_ratio > 1.0 - p_end) { /* the ends alone */
        for (int i = 0; i < keep; i++)
            if (is_end(v, s->cand[i])) s->cand[k++] = s->cand[i];
    } else {
        const int lim = keep < INFILL_MERGE_MAX ? keep : INFILL_MERGE_MAX;
        for (int i0 = 0; i0 < lim; i0++) { /* probs < 0: merged into another */
            const int32_t a = s->cand[i0];
            const uint32_t la = v->special[a] ? 0 : v->off[a + 1] - v->off[a];
            for (int i1 = 0; i1 < lim && la > 0 && s->probs[i0] >= 0.0f; i1++) {
                const int32_t b = s->cand[i1];
                const uint32_t lb = v->special[b] ? 0 : v->off[b + 1] - v->off[b];
                if (i1 == i0 || s->probs[i1] < 0.0f || la > lb ||
                    memcmp(v->bytes + v->off[a], v->bytes + v->off[b], la))
                    continue;
                int dst = i0, src = i1; /* a's text starts b's: into the likelier */
                if (s->probs[i1] > s->probs[i0]) dst = i1, src = i0;
                s->probs[dst] += s->probs[src];
                s->probs[src] = -1.0f;
            }
        }
        int texts = 0;
        for (int i = 0; i < keep; i++) {
            const int end = is_end(v, s->cand[i]);
            if (!end && s->probs[i] < 0.2f) continue;
            texts += !end;
            s->cand[k++] = s->cand[i];
        }
        if (texts == 0) k = 0;
    }
    if (k == 0) { /* nothing left: the first end (with none, as with ignore_eos, the best) */
        s->cand[0] = v->n_eog > 0 ? v->eog[0] : best;
        k = 1;
    }
    return k;
}
