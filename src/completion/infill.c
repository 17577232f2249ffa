/* infill.c - the prompt of a fill-in-the-middle request (infill.h). */
#include "completion/infill.h"

#include <stdlib.h>
#include <string.h>

void hearth_cpl_infill_free(hearth_cpl_infill *in) {
    if (!in) return;
    free(in->prefix);
    free(in->suffix);
    for (int i = 0; i < in->n_extra; i++) {
        free(in->extra_name[i]);
        free(in->extra_text[i]);
    }
    free(in->extra_name);
    free(in->extra_text);
    free(in);
}

typedef struct {
    int32_t *v;
    size_t n, cap;
    hearth_status st; /* the first failure; later appends do nothing */
} ids;

static void put(ids *a, const int32_t *x, size_t n) {
    if (a->st != HEARTH_OK || n == 0) return;
    if (a->n + n > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->n + n) cap *= 2;
        int32_t *v = realloc(a->v, sizeof *v * cap);
        if (!v) {
            a->st = HEARTH_ENOMEM;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    memcpy(a->v + a->n, x, sizeof *x * n);
    a->n += n;
}

static void put1(ids *a, int32_t id) { put(a, &id, 1); }

/* text's ids, without special tokens added or parsed (a "<fim_prefix>" in
 * the code is code) */
static void put_text(ids *a, const hearth_tokenizer *t, const char *text, hearth_err *err) {
    if (a->st != HEARTH_OK) return;
    int32_t *x = NULL;
    size_t n = 0;
    a->st = hearth_tok_encode(t, text, strlen(text), 0, 0, &x, &n, err);
    put(a, x, n);
    free(x);
}

static void put_text2(ids *a, const hearth_tokenizer *t, const char *s1, const char *s2, hearth_err *err) {
    size_t n1 = strlen(s1), n2 = strlen(s2);
    char *s = malloc(n1 + n2 + 1);
    if (!s) {
        if (a->st == HEARTH_OK) a->st = HEARTH_ENOMEM;
        return;
    }
    memcpy(s, s1, n1);
    memcpy(s + n1, s2, n2 + 1);
    put_text(a, t, s, err);
    free(s);
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* the other files: [REP]myproject\n, then [SEP]name\n text for each (or a
 * snippet line between them without [SEP]), then [SEP]filename\n */
static void put_extra(ids *a, const hearth_tokenizer *t, const hearth_cpl_infill *in, hearth_err *err) {
    const int rep = hearth_tok_fim(t, HEARTH_FIM_REP), sep = hearth_tok_fim(t, HEARTH_FIM_SEP);
    if (rep >= 0) {
        put1(a, rep);
        put_text(a, t, "myproject\n", err);
    }
    for (int i = 0; i < in->n_extra; i++) {
        if (sep >= 0) {
            put1(a, sep);
            put_text2(a, t, in->extra_name[i] ? in->extra_name[i] : "tmp", "\n", err);
        } else {
            put_text(a, t, "\n\n--- snippet ---\n\n", err);
        }
        put_text(a, t, in->extra_text[i], err);
    }
    if (sep >= 0) {
        put1(a, sep);
        put_text(a, t, "filename\n", err);
    }
}

hearth_status hearth_infill_prompt(const hearth_tokenizer *t, const hearth_cpl_infill *in, const int32_t *middle,
                                   size_t n_middle, int n_ctx, int n_predict, int spm, int32_t **out, size_t *n_out,
                                   hearth_err *err) {
    *out = NULL;
    *n_out = 0;
    const int pre = hearth_tok_fim(t, HEARTH_FIM_PRE), suf = hearth_tok_fim(t, HEARTH_FIM_SUF),
              mid = hearth_tok_fim(t, HEARTH_FIM_MID);
    if (pre < 0 || suf < 0 || mid < 0)
        return hearth_err_set(err, HEARTH_ENOTSUP,
                              "this model cannot fill in the middle: its vocabulary has no %s token",
                              pre < 0 ? "prefix" : suf < 0 ? "suffix" : "middle");
    ids extra = {0}, prefix = {0}, suffix = {0}, all = {0};
    put_extra(&extra, t, in, err);
    put_text(&prefix, t, in->prefix ? in->prefix : "", err);
    put_text(&suffix, t, in->suffix ? in->suffix : "", err);
    hearth_status st = extra.st != HEARTH_OK ? extra.st : prefix.st != HEARTH_OK ? prefix.st : suffix.st;
    if (st == HEARTH_OK) {
        const long w = HEARTH_INFILL_WINDOW;
        const size_t n_pre = min_sz(prefix.n, (size_t)(3 * (w / 4)));
        const long suf_room = w / 4 - (2 + (long)n_middle);
        const size_t n_suf = min_sz(suffix.n, suf_room > 0 ? (size_t)suf_room : 0);
        const long extra_room = (long)n_ctx - w - 2L * n_predict;
        const size_t n_extra = min_sz(extra.n, extra_room > 0 ? (size_t)extra_room : 0);
        put(&all, extra.v + extra.n - n_extra, n_extra); /* the files' end, before everything (and BOS) */
        if (hearth_tok_adds_bos(t)) put1(&all, hearth_tok_bos(t));
        for (int part = 0; part < 2; part++) {
            if ((part == 0) != (spm != 0)) { /* [PRE] the prefix's end, the prompt */
                put1(&all, pre);
                put(&all, prefix.v + prefix.n - n_pre, n_pre);
                put(&all, middle, n_middle);
            } else { /* [SUF] the suffix's start */
                put1(&all, suf);
                put(&all, suffix.v, n_suf);
            }
        }
        put1(&all, mid);
        st = all.st;
    }
    free(extra.v);
    free(prefix.v);
    free(suffix.v);
    if (st != HEARTH_OK) {
        free(all.v);
        return st == HEARTH_ENOMEM ? hearth_err_set(err, st, "out of memory") : st;
    }
    *out = all.v;
    *n_out = all.n;
    return HEARTH_OK;
}
