/* dry_breakers.c - DRY's sequence breakers over a vocabulary (dry_breakers.h). */
#define _GNU_SOURCE /* memmem */
#include "completion/dry_breakers.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t head, n_tail, tail[HEARTH_DRY_MAX_TAIL];
} entry;

typedef struct {
    entry *e;
    int n, cap;
} entries;

static int add(entries *es, int32_t head, const int32_t *tail, int n_tail) {
    if (es->n == es->cap) {
        int cap = es->cap ? es->cap * 2 : 256;
        entry *p = realloc(es->e, sizeof *p * (size_t)cap);
        if (!p) return -1;
        es->e = p, es->cap = cap;
    }
    entry *x = &es->e[es->n++];
    x->head = head, x->n_tail = n_tail;
    if (n_tail) memcpy(x->tail, tail, sizeof *tail * (size_t)n_tail);
    return 0;
}

static int cmp_head(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    if (x->n_tail != y->n_tail) return x->n_tail < y->n_tail ? -1 : 1;
    return memcmp(x->tail, y->tail, sizeof *x->tail * (size_t)x->n_tail);
}

/* One breaker over the vocabulary. rest[k]: the tokens of s[k..] (k = the
 * bytes a token's end already holds), made at first need. */
static hearth_status one_breaker(entries *es, const hearth_vocab_bytes *vb, const hearth_tokenizer *tok,
                                 const char *s, size_t sn, hearth_err *err) {
    int32_t *rest[HEARTH_DRY_MAX_BREAKER] = {0};
    int n_rest[HEARTH_DRY_MAX_BREAKER] = {0};
    hearth_status st = HEARTH_OK;
    for (int id = 0; id < vb->n && st == HEARTH_OK; id++) {
        size_t wn;
        const uint8_t *w = vb->bytes + vb->off[id];
        wn = vb->off[id + 1] - vb->off[id];
        if (vb->special[id]) w = (const uint8_t *)hearth_tok_token_text(tok, id, &wn);
        if (!w || !wn) continue;
        if (memmem(w, wn, s, sn)) {
            if (add(es, id, NULL, 0)) st = hearth_err_set(err, HEARTH_ENOMEM, "dry_sequence_breakers: out of memory");
            continue;
        }
        for (size_t pos = 0; pos < wn && st == HEARTH_OK; pos++) { /* w ends with s's first k bytes */
            size_t k = wn - pos;
            if (k >= sn || memcmp(w + pos, s, k)) continue;
            if (!rest[k]) {
                int32_t *ids;
                size_t n;
                st = hearth_tok_encode(tok, s + k, sn - k, 0, 0, &ids, &n, err);
                if (st != HEARTH_OK) break;
                rest[k] = ids;
                n_rest[k] = n > HEARTH_DRY_MAX_TAIL ? HEARTH_DRY_MAX_TAIL : (int)n;
            }
            if (add(es, id, rest[k], n_rest[k]))
                st = hearth_err_set(err, HEARTH_ENOMEM, "dry_sequence_breakers: out of memory");
        }
    }
    for (int k = 0; k < HEARTH_DRY_MAX_BREAKER; k++) free(rest[k]);
    return st;
}

hearth_status hearth_dry_breakers_build(hearth_dry_breakers *out, const hearth_vocab_bytes *vb,
                                        const hearth_tokenizer *tok, const char *const *brk, int n, hearth_err *err) {
    memset(out, 0, sizeof *out);
    entries es = {0};
    hearth_status st = HEARTH_OK;
    for (int i = 0; i < n && st == HEARTH_OK; i++) {
        size_t sn = strlen(brk[i]);
        if (sn > HEARTH_DRY_MAX_BREAKER) sn = HEARTH_DRY_MAX_BREAKER;
        if (sn) st = one_breaker(&es, vb, tok, brk[i], sn, err);
    }
    if (st == HEARTH_OK && es.n) {
        qsort(es.e, (size_t)es.n, sizeof *es.e, cmp_head);
        int nt = 0;
        for (int i = 0; i < es.n; i++) nt += es.e[i].n_tail;
        out->head = malloc(sizeof *out->head * (size_t)es.n);
        out->off = malloc(sizeof *out->off * ((size_t)es.n + 1));
        out->tail = malloc(sizeof *out->tail * (size_t)(nt ? nt : 1));
        if (!out->head || !out->off || !out->tail) {
            hearth_dry_breakers_free(out);
            st = hearth_err_set(err, HEARTH_ENOMEM, "dry_sequence_breakers: out of memory");
        } else {
            int m = 0, t = 0;
            for (int i = 0; i < es.n; i++) {
                if (m && out->head[m - 1] == es.e[i].head && out->off[m] - out->off[m - 1] == es.e[i].n_tail &&
                    !memcmp(out->tail + out->off[m - 1], es.e[i].tail, sizeof(int32_t) * (size_t)es.e[i].n_tail))
                    continue; /* the same sequence twice (two breakers, or two places in one token) */
                out->head[m] = es.e[i].head;
                out->off[m] = t;
                memcpy(out->tail + t, es.e[i].tail, sizeof(int32_t) * (size_t)es.e[i].n_tail);
                t += es.e[i].n_tail;
                m++;
            }
            out->off[m] = t;
            out->n = m;
        }
    }
    free(es.e);
    return st;
}

hearth_status hearth_dry_breakers_default(hearth_dry_breakers *out, const hearth_vocab_bytes *vb,
                                          const hearth_tokenizer *tok, hearth_err *err) {
    static const char *const brk[] = {"\n", ":", "\"", "*"};
    return hearth_dry_breakers_build(out, vb, tok, brk, 4, err);
}
