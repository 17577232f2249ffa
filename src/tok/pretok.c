/* pretok.c - pre-tokenizers: split a normalized segment into pieces, as HF
 * PreTokenizedString::split does with each SplitDelimiterBehavior.
 *
 * Pieces are (offset, length) ranges into a text buffer. Steps that only
 * split (Split, Digits, Punctuation, whitespace splits, the ByteLevel regex)
 * keep the buffer; steps that rewrite text (Metaspace, ByteLevel's prefix
 * space) build a new buffer in the scratch ping-pong. ByteLevel does not map
 * bytes to its printable alphabet here: the BPE model reads raw bytes and
 * maps them through byte_id, which is the same thing without the copy.
 * Empty pieces are dropped, as HF does. */
#include "tok/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static hearth_status pieces_reserve2(tok_scratch *sc, size_t n) {
    if (n <= sc->cap2) return HEARTH_OK;
    size_t c = sc->cap2 ? sc->cap2 : 64;
    while (c < n) c *= 2;
    uint32_t *o = realloc(sc->off2, c * sizeof *o);
    if (o) sc->off2 = o;
    uint32_t *l = realloc(sc->len2, c * sizeof *l);
    if (l) sc->len2 = l;
    if (!o || !l) return HEARTH_ENOMEM;
    sc->cap2 = c;
    return HEARTH_OK;
}

static hearth_status out_piece(tok_scratch *sc, size_t off, size_t len) {
    if (!len) return HEARTH_OK;
    if (sc->n2 == sc->cap2 && pieces_reserve2(sc, sc->n2 + 1)) return HEARTH_ENOMEM;
    sc->off2[sc->n2] = (uint32_t)off;
    sc->len2[sc->n2] = (uint32_t)len;
    sc->n2++;
    return HEARTH_OK;
}

static void swap_pieces(tok_scratch *sc) {
    uint32_t *o = sc->off, *l = sc->len;
    size_t c = sc->cap;
    sc->off = sc->off2;
    sc->len = sc->len2;
    sc->cap = sc->cap2;
    sc->n = sc->n2;
    sc->off2 = o;
    sc->len2 = l;
    sc->cap2 = c;
    sc->n2 = 0;
}

/* Splitting one piece: the caller reports each (start, end, is_match) part
 * in order; `emit_parts` applies the behavior. Parts are collected in a small
 * state machine to avoid a second list. */
typedef struct {
    tok_scratch *sc;
    split_behavior beh;
    int invert;
    size_t pend_off, pend_len; /* MergedWithNext / Contiguous: a part waiting */
    int pend_match, has_pend;
    hearth_status st;
} splitter;

static void part(splitter *sp, size_t off, size_t len, int match) {
    if (sp->st || !len) return;
    if (sp->invert) match = !match;
    switch (sp->beh) {
    case SPLIT_REMOVED:
        if (!match) sp->st = out_piece(sp->sc, off, len);
        break;
    case SPLIT_ISOLATED:
        sp->st = out_piece(sp->sc, off, len);
        break;
    case SPLIT_MERGED_PREV:
        /* a match joins the part before it when that part is not a match;
         * the pending part is always a non-match */
        if (match) {
            if (sp->has_pend) {
                sp->st = out_piece(sp->sc, sp->pend_off, off + len - sp->pend_off);
                sp->has_pend = 0;
            } else {
                sp->st = out_piece(sp->sc, off, len);
            }
        } else {
            if (sp->has_pend) sp->st = out_piece(sp->sc, sp->pend_off, sp->pend_len);
            sp->pend_off = off;
            sp->pend_len = len;
            sp->has_pend = 1;
        }
        break;
    case SPLIT_MERGED_NEXT:
        /* a match joins the piece after it */
        if (sp->has_pend) {
            if (!match) {
                sp->st = out_piece(sp->sc, sp->pend_off, off + len - sp->pend_off);
                sp->has_pend = 0;
                return;
            }
            sp->st = out_piece(sp->sc, sp->pend_off, sp->pend_len);
            sp->has_pend = 0;
        }
        if (match) {
            sp->pend_off = off;
            sp->pend_len = len;
            sp->has_pend = 1;
        } else {
            sp->st = out_piece(sp->sc, off, len);
        }
        break;
    case SPLIT_CONTIGUOUS:
        /* consecutive matches form one piece */
        if (sp->has_pend && sp->pend_match && match) {
            sp->pend_len = off + len - sp->pend_off;
            return;
        }
        if (sp->has_pend) sp->st = out_piece(sp->sc, sp->pend_off, sp->pend_len);
        sp->pend_off = off;
        sp->pend_len = len;
        sp->pend_match = match;
        sp->has_pend = 1;
        break;
    }
}

static void part_flush(splitter *sp) {
    if (sp->has_pend && !sp->st) sp->st = out_piece(sp->sc, sp->pend_off, sp->pend_len);
    sp->has_pend = 0;
}

/* Split every piece of text by regex re. */
static hearth_status split_regex(tok_scratch *sc, const char *text, pcre2_code *re, split_behavior beh, int invert) {
    if (!sc->md) {
        sc->md = pcre2_match_data_create(8, NULL);
        if (!sc->md) return HEARTH_ENOMEM;
    }
    sc->n2 = 0;
    if (pieces_reserve2(sc, sc->n * 2 + 16)) return HEARTH_ENOMEM;
    for (size_t p = 0; p < sc->n; p++) {
        splitter sp = {.sc = sc, .beh = beh, .invert = invert};
        const char *s = text + sc->off[p];
        size_t n = sc->len[p], prev = 0, at = 0;
        while (at <= n) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, sc->md, NULL);
            if (rc < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) {
                /* empty match: step over one character */
                if (ms >= n) break;
                at = ms + 1;
                while (at < n && ((unsigned char)s[at] & 0xC0) == 0x80) at++;
                continue;
            }
            if (ms > prev) part(&sp, sc->off[p] + prev, ms - prev, 0);
            part(&sp, sc->off[p] + ms, me - ms, 1);
            prev = at = me;
        }
        if (prev < n) part(&sp, sc->off[p] + prev, n - prev, 0);
        part_flush(&sp);
        if (sp.st) return sp.st;
    }
    swap_pieces(sc);
    return HEARTH_OK;
}

typedef int (*cp_pred)(uint32_t cp, const tok_pre *p);

static int pred_digit(uint32_t c, const tok_pre *p) {
    (void)p;
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}
static int pred_ws(uint32_t c, const tok_pre *p) {
    (void)p;
    return tok_is_whitespace(c);
}
static int pred_punct(uint32_t c, const tok_pre *p) {
    (void)p;
    return tok_is_punctuation(c);
}
static int pred_delim(uint32_t c, const tok_pre *p) { return c == p->replacement; }

/* Split every piece on characters matching pred; each such character is
 * one match (Contiguous merges runs of them). */
static hearth_status split_chars(tok_scratch *sc, const char *text, cp_pred pred, const tok_pre *pp,
                                 split_behavior beh) {
    sc->n2 = 0;
    if (pieces_reserve2(sc, sc->n * 2 + 16)) return HEARTH_ENOMEM;
    for (size_t p = 0; p < sc->n; p++) {
        splitter sp = {.sc = sc, .beh = beh};
        const unsigned char *s = (const unsigned char *)text + sc->off[p];
        size_t n = sc->len[p], prev = 0, i = 0;
        while (i < n) {
            uint32_t cp;
            int k = tok_utf8_next(s + i, n - i, &cp);
            if (k <= 0) k = 1, cp = 0xFFFD;
            if (pred(cp, pp)) {
                if (i > prev) part(&sp, sc->off[p] + prev, i - prev, 0);
                part(&sp, sc->off[p] + i, (size_t)k, 1);
                prev = i + (size_t)k;
            }
            i += (size_t)k;
        }
        if (prev < n) part(&sp, sc->off[p] + prev, n - prev, 0);
        part_flush(&sp);
        if (sp.st) return sp.st;
    }
    swap_pieces(sc);
    return HEARTH_OK;
}

/* Metaspace: in each piece replace ' ' by the replacement, prepend it per
 * the scheme, then split before each replacement (MergedWithNext). */
static hearth_status metaspace(tok_scratch *sc, const char **text, const tok_pre *pp, int first) {
    tok_buf *dst = (*text == sc->a.p) ? &sc->b : &sc->a;
    dst->n = 0;
    char rep[4];
    int rl = tok_utf8_encode(pp->replacement, rep);
    size_t total = 0;
    for (size_t p = 0; p < sc->n; p++) total += sc->len[p];
    if (tok_buf_reserve(dst, total * 3 + (size_t)rl * sc->n + 8)) return HEARTH_ENOMEM;
    const char *src = *text;
    uint32_t *noff = sc->off2, *nlen = sc->len2;
    if (pieces_reserve2(sc, sc->n)) return HEARTH_ENOMEM;
    noff = sc->off2;
    nlen = sc->len2;
    for (size_t p = 0; p < sc->n; p++) {
        size_t start = dst->n;
        const char *s = src + sc->off[p];
        size_t n = sc->len[p];
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') {
                memcpy(dst->p + dst->n, rep, (size_t)rl);
                dst->n += (size_t)rl;
            } else {
                dst->p[dst->n++] = s[i];
            }
        }
        int starts = dst->n - start >= (size_t)rl && !memcmp(dst->p + start, rep, (size_t)rl);
        int want = pp->prepend == PREPEND_ALWAYS || (pp->prepend == PREPEND_FIRST && first && p == 0 && sc->off[p] == 0);
        if (want && !starts) {
            memmove(dst->p + start + rl, dst->p + start, dst->n - start);
            memcpy(dst->p + start, rep, (size_t)rl);
            dst->n += (size_t)rl;
        }
        noff[p] = (uint32_t)start;
        nlen[p] = (uint32_t)(dst->n - start);
    }
    dst->p[dst->n] = 0;
    sc->n2 = sc->n;
    swap_pieces(sc);
    *text = dst->p;
    if (!pp->split) return HEARTH_OK;
    tok_pre d = *pp;
    return split_chars(sc, *text, pred_delim, &d, SPLIT_MERGED_NEXT);
}

/* ByteLevel add_prefix_space: a space before each piece that lacks one. */
static hearth_status prefix_space(tok_scratch *sc, const char **text) {
    int need = 0;
    for (size_t p = 0; p < sc->n; p++) need |= (*text)[sc->off[p]] != ' ';
    if (!need) return HEARTH_OK;
    tok_buf *dst = (*text == sc->a.p) ? &sc->b : &sc->a;
    dst->n = 0;
    size_t total = 0;
    for (size_t p = 0; p < sc->n; p++) total += sc->len[p] + 1;
    if (tok_buf_reserve(dst, total) || pieces_reserve2(sc, sc->n)) return HEARTH_ENOMEM;
    for (size_t p = 0; p < sc->n; p++) {
        size_t start = dst->n;
        if ((*text)[sc->off[p]] != ' ') dst->p[dst->n++] = ' ';
        memcpy(dst->p + dst->n, *text + sc->off[p], sc->len[p]);
        dst->n += sc->len[p];
        sc->off2[p] = (uint32_t)start;
        sc->len2[p] = (uint32_t)(dst->n - start);
    }
    dst->p[dst->n] = 0;
    sc->n2 = sc->n;
    swap_pieces(sc);
    *text = dst->p;
    return HEARTH_OK;
}

hearth_status tok_pretokenize(const hearth_tokenizer *t, tok_scratch *sc, const char **text, size_t *n, int first) {
    if (!sc->cap) {
        sc->cap = 64;
        sc->off = malloc(sc->cap * sizeof *sc->off);
        sc->len = malloc(sc->cap * sizeof *sc->len);
        if (!sc->off || !sc->len) return HEARTH_ENOMEM;
    }
    sc->n = 0;
    if (*n == 0) return HEARTH_OK;
    sc->off[0] = 0;
    sc->len[0] = (uint32_t)*n;
    sc->n = 1;
    hearth_status st = HEARTH_OK;
    for (int i = 0; !st && i < t->n_pre; i++) {
        const tok_pre *pp = &t->pre[i];
        switch (pp->kind) {
        case PRE_BYTELEVEL:
            if (pp->add_prefix_space) st = prefix_space(sc, text);
            if (!st && pp->use_regex) st = split_regex(sc, *text, pp->re, SPLIT_ISOLATED, 0);
            break;
        case PRE_SPLIT:
            st = split_regex(sc, *text, pp->re, pp->behavior, pp->invert);
            break;
        case PRE_WHITESPACE:
            st = split_regex(sc, *text, pp->re, SPLIT_REMOVED, 1);
            break;
        case PRE_METASPACE:
            st = metaspace(sc, text, pp, first);
            break;
        case PRE_DIGITS:
            st = split_chars(sc, *text, pred_digit, pp, pp->individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS);
            break;
        case PRE_WHITESPACE_SPLIT:
            st = split_chars(sc, *text, pred_ws, pp, SPLIT_REMOVED);
            break;
        case PRE_PUNCTUATION:
            st = split_chars(sc, *text, pred_punct, pp, pp->behavior);
            break;
        case PRE_BERT:
            st = split_chars(sc, *text, pred_ws, pp, SPLIT_REMOVED);
            if (!st) st = split_chars(sc, *text, pred_punct, pp, SPLIT_ISOLATED);
            break;
        case PRE_CHAR_DELIM:
            st = split_chars(sc, *text, pred_delim, pp, SPLIT_REMOVED);
            break;
        }
    }
    return st;
}
