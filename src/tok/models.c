/* models.c - the tokenization models run on each pre-tokenized piece:
 * BPE (byte-level or char-level with byte fallback), WordPiece, WordLevel,
 * Unigram.
 *
 * BPE merges follow HF's word.rs exactly: symbols in a doubly linked list, a
 * binary min-heap of candidate merges ordered by (rank, position); a popped
 * candidate is applied only if the pair at that position still merges into
 * the same id. That is O(n log n) per piece, never an O(n^2) rescan. */
#include "tok/tok_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes of the piece it covers; 0 = merged away */
} sym;

typedef struct {
    int32_t rank, pos, id;
} cand;

static inline int cand_less(cand a, cand b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(c, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        cand best = last;
        if (l < m && cand_less(h[l], best)) s = l, best = h[l];
        if (r < m && cand_less(h[r], best)) s = r;
        if (s == i) break;
        h[i] = h[s];
        i = s;
    }
    if (m) h[i] = last;
    return top;
}

static hearth_status reserve_scratch(tok_scratch *sc, size_t nsym) {
    if (nsym > sc->sym_cap) {
        size_t c = sc->sym_cap ? sc->sym_cap : 64;
        while (c < nsym) c *= 2;
        void *s = realloc(sc->sym, c * sizeof(sym));
        if (!s) return HEARTH_ENOMEM;
        sc->sym = s;
        sc->sym_cap = c;
    }
    size_t hn = nsym * 3 + 4;
    if (hn > sc->heap_cap) {
        size_t c = sc->heap_cap ? sc->heap_cap : 192;
        while (c < hn) c *= 2;
        void *h = realloc(sc->heap, c * sizeof(cand));
        if (!h) return HEARTH_ENOMEM;
        sc->heap = h;
        sc->heap_cap = c;
    }
    return HEARTH_OK;
}

/* Append a symbol; with fuse_unk consecutive unknowns become one. */
static inline void sym_add(const hearth_tokenizer *t, sym *s, size_t *n, int32_t id, uint32_t len) {
    if (id == t->unk_id && t->fuse_unk && *n && s[*n - 1].id == t->unk_id) {
        s[*n - 1].len += len;
        return;
    }
    s[*n] = (sym){id, (int32_t)*n - 1, (int32_t)*n + 1, len};
    (*n)++;
}

static hearth_status bpe_piece(const hearth_tokenizer *t, tok_scratch *sc, const char *p, size_t n) {
    const unsigned char *u = (const unsigned char *)p;
    if (t->ignore_merges) {
        int32_t id = -1;
        if (t->byte_level) {
            char buf[512];
            if (n * 2 <= sizeof buf) {
                size_t k = 0;
                for (size_t i = 0; i < n; i++) k += (size_t)tok_utf8_encode(tok_byte_to_cp(u[i]), buf + k);
                id = tok_strmap_get(&t->vocab, buf, k);
            }
        } else {
            id = tok_strmap_get(&t->vocab, p, n);
        }
        if (id >= 0) return tok_emit(sc, id);
    }
    if (reserve_scratch(sc, n + 1)) return HEARTH_ENOMEM;
    sym *s = sc->sym;
    size_t ns = 0;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++) {
            int32_t id = t->byte_id[u[i]];
            if (id >= 0)
                sym_add(t, s, &ns, id, 1);
            else if (t->unk_id >= 0)
                sym_add(t, s, &ns, t->unk_id, 1);
        }
    } else {
        char buf[64];
        size_t i = 0;
        while (i < n) {
            uint32_t cp;
            int k = tok_utf8_next(u + i, n - i, &cp);
            if (k <= 0) k = 1;
            const char *key = p + i;
            size_t kl = (size_t)k;
            int last = i + (size_t)k == n;
            if ((t->cont_prefix_len && i > 0) || (t->eow_suffix_len && last)) {
                size_t bl = 0;
                if (i > 0 && t->cont_prefix_len && t->cont_prefix_len + kl + t->eow_suffix_len < sizeof buf) {
                    memcpy(buf, t->cont_prefix, t->cont_prefix_len);
                    bl = t->cont_prefix_len;
                }
                memcpy(buf + bl, p + i, kl);
                bl += kl;
                if (last && t->eow_suffix_len && bl + t->eow_suffix_len < sizeof buf) {
                    memcpy(buf + bl, t->eow_suffix, t->eow_suffix_len);
                    bl += t->eow_suffix_len;
                }
                key = buf;
                kl = bl;
            }
            int32_t id = tok_strmap_get(&t->vocab, key, kl);
            if (id >= 0) {
                sym_add(t, s, &ns, id, (uint32_t)k);
            } else {
                int done = 0;
                if (t->byte_fallback) {
                    int all = 1;
                    for (int b = 0; b < k; b++) all &= t->fb_id[u[i + (size_t)b]] >= 0;
                    if (all) {
                        for (int b = 0; b < k; b++) sym_add(t, s, &ns, t->fb_id[u[i + (size_t)b]], 1);
                        done = 1;
                    }
                }
                if (!done && t->unk_id >= 0) sym_add(t, s, &ns, t->unk_id, (uint32_t)k);
            }
            i += (size_t)k;
        }
    }
    if (!ns) return HEARTH_OK;
    s[ns - 1].next = -1;
    cand *h = sc->heap;
    size_t nh = 0;
    int32_t rank, id;
    for (size_t i = 0; i + 1 < ns; i++)
        if (tok_pairmap_get(&t->merges, s[i].id, s[i + 1].id, &rank, &id))
            heap_push(h, &nh, (cand){rank, (int32_t)i, id});
    while (nh) {
        cand c = heap_pop(h, &nh);
        sym *a = &s[c.pos];
        if (!a->len || a->next < 0) continue;
        sym *b = &s[a->next];
        if (!tok_pairmap_get(&t->merges, a->id, b->id, &rank, &id) || id != c.id) continue;
        a->id = c.id;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) s[a->next].prev = c.pos;
        if (a->prev >= 0 && tok_pairmap_get(&t->merges, s[a->prev].id, a->id, &rank, &id))
            heap_push(h, &nh, (cand){rank, a->prev, id});
        if (a->next >= 0 && tok_pairmap_get(&t->merges, a->id, s[a->next].id, &rank, &id))
            heap_push(h, &nh, (cand){rank, c.pos, id});
    }
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (tok_emit(sc, s[i].id)) return HEARTH_ENOMEM;
    return HEARTH_OK;
}

/* WordPiece: greedy longest match first; a word with any unmatched part is
 * one unk token. */
static hearth_status wordpiece_piece(const hearth_tokenizer *t, tok_scratch *sc, const char *p, size_t n) {
    const unsigned char *u = (const unsigned char *)p;
    size_t nchars = 0;
    for (size_t i = 0; i < n; i++) nchars += (u[i] & 0xC0) != 0x80;
    if ((int)nchars > t->max_input_chars) return t->unk_id >= 0 ? tok_emit(sc, t->unk_id) : HEARTH_OK;
    size_t mark = sc->n_ids, start = 0;
    char stackbuf[256];
    tok_buf big = {0};
    hearth_status st = HEARTH_OK;
    while (start < n) {
        size_t end = n;
        int32_t cur = -1;
        while (start < end) {
            const char *key = p + start;
            size_t kl = end - start;
            if (start > 0) {
                char *dst = stackbuf;
                if (t->cont_prefix_len + kl > sizeof stackbuf) {
                    big.n = 0;
                    if (tok_buf_reserve(&big, t->cont_prefix_len + kl)) {
                        st = HEARTH_ENOMEM;
                        goto done;
                    }
                    dst = big.p;
                }
                memcpy(dst, t->cont_prefix, t->cont_prefix_len);
                memcpy(dst + t->cont_prefix_len, p + start, kl);
                key = dst;
                kl += t->cont_prefix_len;
            }
            cur = tok_strmap_get(&t->vocab, key, kl);
            if (cur >= 0) break;
            end--;
            while (end > start && (u[end] & 0xC0) == 0x80) end--;
        }
        if (cur < 0) {
            sc->n_ids = mark;
            st = t->unk_id >= 0 ? tok_emit(sc, t->unk_id) : HEARTH_OK;
            goto done;
        }
        if ((st = tok_emit(sc, cur))) goto done;
        start = end;
    }
done:
    free(big.p);
    return st;
}

/* Unigram: Viterbi over the piece with the vocabulary's log-probabilities;
 * unknown characters cost (min score - 10) and consecutive unknowns fuse. */
static hearth_status unigram_piece(const hearth_tokenizer *t, tok_scratch *sc, const char *p, size_t n) {
    const unsigned char *u = (const unsigned char *)p;
    /* positions are byte offsets at char boundaries */
    size_t need = (n + 1) * 3;
    if (reserve_scratch(sc, need)) return HEARTH_ENOMEM;
    double *best = malloc((n + 1) * sizeof *best);
    int32_t *from = malloc((n + 1) * sizeof *from), *tid = malloc((n + 1) * sizeof *tid);
    if (!best || !from || !tid) {
        free(best), free(from), free(tid);
        return HEARTH_ENOMEM;
    }
    const double unk_score = (double)t->min_score - 10.0;
    for (size_t i = 0; i <= n; i++) best[i] = -DBL_MAX, from[i] = -1, tid[i] = -1;
    best[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if ((u[i] & 0xC0) == 0x80 || best[i] == -DBL_MAX) continue;
        int has_single = 0;
        size_t j = i;
        uint32_t cp;
        int first_len = tok_utf8_next(u + i, n - i, &cp);
        if (first_len <= 0) first_len = 1;
        for (int c = 0; c < t->max_token_chars && j < n; c++) {
            int k = tok_utf8_next(u + j, n - j, &cp);
            j += (size_t)(k > 0 ? k : 1);
            int32_t id = tok_strmap_get(&t->vocab, p + i, j - i);
            if (id < 0) continue;
            double sc2 = best[i] + (double)t->scores[id];
            if (c == 0) has_single = 1;
            if (sc2 > best[j]) best[j] = sc2, from[j] = (int32_t)i, tid[j] = id;
        }
        if (!has_single) {
            size_t e = i + (size_t)first_len;
            double sc2 = best[i] + unk_score;
            if (sc2 > best[e]) best[e] = sc2, from[e] = (int32_t)i, tid[e] = -2; /* unknown */
        }
    }
    /* backtrack into the symbol scratch, then emit in order */
    int32_t *rev = (int32_t *)sc->heap;
    size_t nr = 0;
    hearth_status st = HEARTH_OK;
    for (size_t e = n; e > 0 && from[e] >= 0; e = (size_t)from[e]) rev[nr++] = tid[e];
    int prev_unk = 0;
    for (size_t k = nr; k-- > 0;) {
        int32_t id = rev[k];
        if (id == -2 || (id >= 0 && id == t->unk_id)) {
            /* unknown characters, and the unk piece itself, fuse into one unk */
            if (prev_unk && t->fuse_unk) continue;
            prev_unk = 1;
            if (t->unk_id >= 0 && (st = tok_emit(sc, t->unk_id))) break;
            continue;
        }
        prev_unk = 0;
        if ((st = tok_emit(sc, id))) break;
    }
    free(best), free(from), free(tid);
    return st;
}

hearth_status tok_model_piece(const hearth_tokenizer *t, tok_scratch *sc, const char *s, size_t n) {
    if (!n) return HEARTH_OK;
    switch (t->model) {
    case MODEL_BPE:
        return bpe_piece(t, sc, s, n);
    case MODEL_WORDPIECE:
        return wordpiece_piece(t, sc, s, n);
    case MODEL_UNIGRAM:
        return unigram_piece(t, sc, s, n);
    case MODEL_WORDLEVEL: {
        int32_t id = tok_strmap_get(&t->vocab, s, n);
        if (id < 0) id = t->unk_id;
        return id >= 0 ? tok_emit(sc, id) : HEARTH_OK;
    }
    }
    return HEARTH_OK;
}
