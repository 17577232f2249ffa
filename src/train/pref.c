/* pref.c - DPO and ORPO losses over the LoRA trainer (pref.h). */
#include "train/pref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

hearth_status hearth_pref_reference(hearth_lora_trainer *t, const hearth_train_prefs *d, double *ref, hearth_err *err) {
    hearth_status st = HEARTH_OK;
    for (int i = 0; st == HEARTH_OK && i < d->n; i++) {
        const hearth_train_example *c = &d->p[i].chosen, *r = &d->p[i].rejected;
        st = hearth_lora_trainer_logp(t, c->tokens, c->label, c->n, 0, &ref[2 * i], NULL, err);
        if (st == HEARTH_OK)
            st = hearth_lora_trainer_logp(t, r->tokens, r->label, r->n, 0, &ref[2 * i + 1], NULL, err);
    }
    return st;
}

static int n_labels(const hearth_train_example *e) {
    int n = 0;
    for (int i = 0; i < e->n; i++) n += e->label[i];
    return n;
}

/* -log sigmoid(x) and sigmoid(x), without overflow either way. */
static double nls(double x) { return x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x)); }
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

/* ORPO's log odds of a mean log-probability a < 0, a - log(1 - e^a), and
 * its derivative 1 / (1 - e^a). */
static double log_odds(double a) { return a - log(-expm1(a)); }
static double log_odds_d(double a) { return 1.0 / -expm1(a); }

/* The gradient of sum_i w_i CE_i for one sequence: w_i = on_all for every
 * token, plus on_label for its labels. */
static hearth_status backward(hearth_lora_trainer *t, const hearth_train_example *e, double on_all, double on_label,
                              float *w, hearth_err *err) {
    for (int i = 0; i < e->n; i++) w[i] = (float)(on_all + (e->label[i] ? on_label : 0.0));
    return hearth_lora_trainer_accumulate_w(t, e->tokens, w, e->n, err);
}

/* The pairs' loss into s, and with grad its gradient added to the trainer's. */
static hearth_status run_pairs(hearth_lora_trainer *t, hearth_pref_method m, float beta, const hearth_train_prefs *d,
                               const double *ref, const int *idx, int P, int grad, hearth_pref_stats *s,
                               hearth_err *err) {
    memset(s, 0, sizeof *s);
    long chosen_tokens = 0; /* ORPO's NLL: every chosen token but the first, over the batch */
    int longest = 2;
    for (int i = 0; i < P; i++) {
        const hearth_train_pair *p = &d->p[idx[i]];
        chosen_tokens += p->chosen.n - 1;
        longest = p->chosen.n > longest ? p->chosen.n : longest;
        longest = p->rejected.n > longest ? p->rejected.n : longest;
    }
    float *w = malloc(sizeof(float) * (size_t)longest);
    if (!w) return hearth_err_set(err, HEARTH_ENOMEM, "train: out of memory");
    hearth_status st = HEARTH_OK;
    for (int i = 0; st == HEARTH_OK && i < P; i++) {
        const hearth_train_example *c = &d->p[idx[i]].chosen, *r = &d->p[idx[i]].rejected;
        double lc, lr, lc_all;
        if ((st = hearth_lora_trainer_logp(t, c->tokens, c->label, c->n, 1, &lc, &lc_all, err)) ||
            (st = hearth_lora_trainer_logp(t, r->tokens, r->label, r->n, 1, &lr, NULL, err)))
            break;
        /* the loss's derivative by each sequence's cross-entropies (= -log-probabilities) */
        double c_all = 0, c_lab, r_lab;
        if (m == HEARTH_PREF_DPO) {
            const double z = beta * ((lc - ref[2 * idx[i]]) - (lr - ref[2 * idx[i] + 1])), sz = sigmoid(-z);
            s->loss += nls(z) / P;
            s->accuracy += (z > 0) / (double)P;
            s->margin += z / P;
            c_lab = beta * sz / P;
            r_lab = -beta * sz / P;
        } else {
            const int nc = n_labels(c), nr = n_labels(r);
            const double a = lc / nc, b = lr / nr, lo = log_odds(a) - log_odds(b), sl = sigmoid(-lo);
            s->loss += -lc_all / chosen_tokens + beta * nls(lo) / P;
            s->accuracy += (lo > 0) / (double)P;
            s->margin += lo / P;
            c_all = 1.0 / chosen_tokens;
            c_lab = beta * sl * log_odds_d(a) / ((double)P * nc);
            r_lab = -beta * sl * log_odds_d(b) / ((double)P * nr);
        }
        if (grad && (st = backward(t, c, c_all, c_lab, w, err)) == HEARTH_OK) st = backward(t, r, 0, r_lab, w, err);
    }
    free(w);
    return st;
}

hearth_status hearth_pref_accumulate(hearth_lora_trainer *t, hearth_pref_method m, float beta,
                                     const hearth_train_prefs *d, const double *ref, const int *idx, int P,
                                     hearth_pref_stats *s, hearth_err *err) {
    return run_pairs(t, m, beta, d, ref, idx, P, 1, s, err);
}

hearth_status hearth_pref_evaluate(hearth_lora_trainer *t, hearth_pref_method m, float beta,
                                   const hearth_train_prefs *d, const double *ref, const int *idx, int P,
                                   hearth_pref_stats *s, hearth_err *err) {
    return run_pairs(t, m, beta, d, ref, idx, P, 0, s, err);
}
