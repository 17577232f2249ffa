/* encode.c - the encode pipeline: added tokens -> normalizer ->
 * pre-tokenizer -> model -> post-processor, as HF tokenizers runs it.
 *
 * Added tokens are matched leftmost-longest over the whole input (HF uses
 * Aho-Corasick in that mode): first the tokens with normalized=false on the
 * raw text, then, inside each remaining segment after normalization, the
 * tokens with normalized=true. Matches of special tokens are dropped (their
 * text stays ordinary text) when parse_special is 0, after matching, as HF's
 * encode_special_tokens does. All scratch lives in one tok_scratch per call. */
#include "tok/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

hearth_status tok_emit(tok_scratch *s, int32_t id) {
    if (s->n_ids == s->cap_ids) {
        size_t c = s->cap_ids ? s->cap_ids * 2 : 256;
        int32_t *p = realloc(s->ids, c * sizeof *p);
        if (!p) return HEARTH_ENOMEM;
        s->ids = p;
        s->cap_ids = c;
    }
    s->ids[s->n_ids++] = id;
    return HEARTH_OK;
}

static void scratch_free(tok_scratch *s) {
    free(s->a.p);
    free(s->b.p);
    free(s->off);
    free(s->len);
    free(s->off2);
    free(s->len2);
    free(s->sym);
    free(s->heap);
    if (s->md) pcre2_match_data_free(s->md);
    free(s->ids);
}

/* Last code point before s+n (n > 0), or 0 if none decodes. */
static uint32_t last_cp(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0) return 0;
    i--;
    uint32_t cp = 0;
    tok_utf8_next((const unsigned char *)s + i, n - i, &cp);
    return cp;
}

static int is_word_cp(uint32_t c) {
    if (c == '_') return 1;
    if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

/* Longest added token (of the wanted `normalized` kind) starting at s. */
static int match_added_at(const hearth_tokenizer *t, const char *s, size_t n, int normalized, int *len) {
    int maxl = t->added_max_len < (int)n ? t->added_max_len : (int)n;
    for (int l = maxl; l >= 1; l--) {
        int32_t a = tok_strmap_get(&t->added_map, s, (size_t)l);
        if (a >= 0 && t->added[a].normalized == normalized) {
            *len = l;
            return a;
        }
    }
    return -1;
}

typedef struct {
    size_t start, stop;
    int added; /* index into t->added, or -1 for text */
} seg;

typedef struct {
    seg *v;
    size_t n, cap;
} seg_list;

static hearth_status seg_push(seg_list *l, size_t a, size_t b, int added) {
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 16;
        seg *p = realloc(l->v, c * sizeof *p);
        if (!p) return HEARTH_ENOMEM;
        l->v = p;
        l->cap = c;
    }
    l->v[l->n++] = (seg){a, b, added};
    return HEARTH_OK;
}

/* HF AddedVocabulary::find_matches over s[0..n): text and added-token segments. */
static hearth_status find_added(const hearth_tokenizer *t, const char *s, size_t n, int normalized, int parse_special,
                                seg_list *out) {
    out->n = 0;
    size_t start_off = 0;
    size_t i = 0;
    while (t->n_added && i < n) {
        if (!t->added_first[(unsigned char)s[i]]) {
            i++;
            continue;
        }
        int l;
        int a = match_added_at(t, s + i, n - i, normalized, &l);
        if (a < 0) {
            i++;
            continue;
        }
        const tok_added *tk = &t->added[a];
        size_t start = i, stop = i + (size_t)l;
        i = stop; /* matches never overlap, whether kept or not */
        if (tk->special && !parse_special) continue;
        if (tk->single_word) {
            int start_space = start == 0 || !is_word_cp(last_cp(s, start));
            uint32_t nc = 0;
            if (stop < n) tok_utf8_next((const unsigned char *)s + stop, n - stop, &nc);
            int stop_space = stop == n || !is_word_cp(nc);
            if (!start_space || !stop_space) continue;
        }
        if (tk->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t k = ns;
                while (k > 0 && ((unsigned char)s[k - 1] & 0xC0) == 0x80) k--;
                if (k == 0) break;
                uint32_t cp = 0;
                tok_utf8_next((const unsigned char *)s + k - 1, n - (k - 1), &cp);
                if (!tok_is_whitespace(cp)) break;
                ns = k - 1;
            }
            start = ns > start_off ? ns : start_off;
        }
        if (tk->rstrip) {
            while (stop < n) {
                uint32_t cp = 0;
                int k = tok_utf8_next((const unsigned char *)s + stop, n - stop, &cp);
                if (k <= 0 || !tok_is_whitespace(cp)) break;
                stop += (size_t)k;
            }
            i = stop > i ? stop : i;
        }
        if (start_off < start && seg_push(out, start_off, start, -1)) return HEARTH_ENOMEM;
        if (seg_push(out, start, stop, a)) return HEARTH_ENOMEM;
        start_off = stop;
    }
    if (start_off < n && seg_push(out, start_off, n, -1)) return HEARTH_ENOMEM;
    return HEARTH_OK;
}

/* Pre-tokenize and run the model over one normalized text segment. */
static hearth_status encode_normalized(const hearth_tokenizer *t, tok_scratch *sc, const char *s, size_t n, int first) {
    const char *text = s;
    size_t tn = n;
    hearth_status st = tok_pretokenize(t, sc, &text, &tn, first);
    if (st) return st;
    /* pieces refer into `text`, which may be sc->a or sc->b: the model only
     * uses sc->sym / heap / ids, so it is safe to iterate here. */
    for (size_t i = 0; i < sc->n; i++) {
        st = tok_model_piece(t, sc, text + sc->off[i], sc->len[i]);
        if (st) return st;
    }
    return HEARTH_OK;
}

static hearth_status encode_text(const hearth_tokenizer *t, tok_scratch *sc, const char *text, size_t len,
                                 int parse_special) {
    seg_list segs = {0}, segs2 = {0};
    tok_buf norm = {0}, tmp = {0};
    hearth_status st = find_added(t, text, len, 0, parse_special, &segs);
    int has_normalized_added = 0;
    for (int i = 0; i < t->n_added; i++) has_normalized_added |= t->added[i].normalized;
    for (size_t k = 0; !st && k < segs.n; k++) {
        seg g = segs.v[k];
        if (g.added >= 0) {
            st = tok_emit(sc, t->added[g.added].id);
            continue;
        }
        const char *s = text + g.start;
        size_t n = g.stop - g.start;
        if (t->n_norm) {
            norm.n = 0;
            st = tok_normalize(t, s, n, &norm, &tmp);
            if (st) break;
            s = norm.p ? norm.p : "";
            n = norm.n;
        }
        if (!has_normalized_added) {
            st = encode_normalized(t, sc, s, n, g.start == 0);
            continue;
        }
        st = find_added(t, s, n, 1, parse_special, &segs2);
        for (size_t j = 0; !st && j < segs2.n; j++) {
            seg h = segs2.v[j];
            if (h.added >= 0)
                st = tok_emit(sc, t->added[h.added].id);
            else
                st = encode_normalized(t, sc, s + h.start, h.stop - h.start, g.start == 0 && h.start == 0);
        }
    }
    free(segs.v);
    free(segs2.v);
    free(norm.p);
    free(tmp.p);
    return st;
}

hearth_status hearth_tok_encode(const hearth_tokenizer *t, const char *text, size_t len, int add_special,
                                int parse_special, int32_t **ids, size_t *n_ids, hearth_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return hearth_err_set(err, HEARTH_EINVAL, "encode: NULL text");
    if (len > (size_t)UINT32_MAX / 2) return hearth_err_set(err, HEARTH_EINVAL, "encode: text of %zu bytes is too long", len);
    if (!tok_utf8_valid(text, len)) {
        const unsigned char *u = (const unsigned char *)text;
        size_t i = 0;
        uint32_t cp;
        while (i < len) {
            int k = tok_utf8_check(u + i, len - i, &cp);
            if (k <= 0) break;
            i += (size_t)k;
        }
        return hearth_err_set(err, HEARTH_EINVAL, "encode: text is not valid UTF-8 (byte %zu)", i);
    }
    tok_scratch sc;
    memset(&sc, 0, sizeof sc);
    hearth_status st = HEARTH_OK;
    if (add_special && t->n_post) {
        for (int i = 0; !st && i < t->n_post; i++) {
            if (t->post[i].is_sequence)
                st = encode_text(t, &sc, text, len, parse_special);
            else
                for (int k = 0; !st && k < t->post[i].n_ids; k++) st = tok_emit(&sc, t->post[i].ids[k]);
        }
    } else {
        st = encode_text(t, &sc, text, len, parse_special);
    }
    if (!st && !sc.ids) st = tok_emit(&sc, 0), sc.n_ids = 0; /* a non-NULL empty array */
    if (st) {
        scratch_free(&sc);
        return hearth_err_set(err, st, "encode: %s", st == HEARTH_ENOMEM ? "out of memory" : "failed");
    }
    *ids = sc.ids;
    *n_ids = sc.n_ids;
    sc.ids = NULL;
    scratch_free(&sc);
    return HEARTH_OK;
}
