/* normalize.c - HF normalizers over UTF-8 text: Unicode forms (utf8proc),
 * Lowercase, Strip, StripAccents, Replace, Prepend, BertNormalizer.
 * Each step reads one buffer and writes the other; the result ends in out. */
#include "tok/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int is_mark(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

/* BertNormalizer strips nonspacing marks only (StripAccents: all marks). */
static int is_mn(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_MN; }

static int is_other(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CN ||
           k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS;
}

static int is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static hearth_status put_cp(tok_buf *o, uint32_t cp) {
    char b[4];
    int k = tok_utf8_encode(cp, b);
    return tok_buf_put(o, b, (size_t)k);
}

static hearth_status unicode_form(const char *s, size_t n, tok_buf *o, int opts) {
    if (!n) return HEARTH_OK;
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, (utf8proc_option_t)(opts | UTF8PROC_STABLE));
    if (k < 0) return k == UTF8PROC_ERROR_NOMEM ? HEARTH_ENOMEM : HEARTH_EINVAL;
    hearth_status st = tok_buf_put(o, r, (size_t)k);
    free(r);
    return st;
}

static hearth_status lowercase(const char *s, size_t n, tok_buf *o) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_next(u + i, n - i, &cp);
        if (k <= 0) k = 1, cp = u[i];
        hearth_status st;
        if (cp < 0x80)
            st = put_cp(o, (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp);
        else if (cp == 0x130) /* the one unconditional multi-char lowercase mapping */
            st = tok_buf_put(o, "i\xCC\x87", 3);
        else
            st = put_cp(o, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
        if (st) return st;
        i += (size_t)k;
    }
    return HEARTH_OK;
}

/* Replace every occurrence of a literal or regex pattern. */
static hearth_status replace(const tok_norm *nm, const char *s, size_t n, tok_buf *o) {
    if (!nm->re) {
        size_t i = 0;
        while (i < n) {
            if (nm->pattern_len && i + nm->pattern_len <= n && !memcmp(s + i, nm->pattern, nm->pattern_len)) {
                if (tok_buf_put(o, nm->content, nm->content_len)) return HEARTH_ENOMEM;
                i += nm->pattern_len;
            } else {
                if (tok_buf_put(o, s + i, 1)) return HEARTH_ENOMEM;
                i++;
            }
        }
        return HEARTH_OK;
    }
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!md) return HEARTH_ENOMEM;
    size_t at = 0, prev = 0;
    hearth_status st = HEARTH_OK;
    while (!st && at <= n) {
        int rc = pcre2_match(nm->re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {
            if (ov[0] >= n) break;
            at = ov[0] + 1;
            while (at < n && ((unsigned char)s[at] & 0xC0) == 0x80) at++;
            continue;
        }
        st = tok_buf_put(o, s + prev, ov[0] - prev);
        if (!st) st = tok_buf_put(o, nm->content, nm->content_len);
        prev = at = ov[1];
    }
    if (!st) st = tok_buf_put(o, s + prev, n - prev);
    pcre2_match_data_free(md);
    return st;
}

static hearth_status bert(const tok_norm *nm, const char *s, size_t n, tok_buf *o, tok_buf *tmp) {
    const unsigned char *u = (const unsigned char *)s;
    tmp->n = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_next(u + i, n - i, &cp);
        if (k <= 0) k = 1, cp = u[i];
        i += (size_t)k;
        if (nm->clean_text) {
            if (cp == 0 || cp == 0xFFFD || (cp != '\t' && cp != '\n' && cp != '\r' && is_other(cp))) continue;
            if (tok_is_whitespace(cp)) cp = ' ';
        }
        hearth_status st;
        if (nm->chinese && is_chinese(cp)) {
            st = tok_buf_put(tmp, " ", 1);
            if (!st) st = put_cp(tmp, cp);
            if (!st) st = tok_buf_put(tmp, " ", 1);
        } else {
            st = put_cp(tmp, cp);
        }
        if (st) return st;
    }
    int strip = nm->strip_accents < 0 ? nm->lowercase : nm->strip_accents;
    tok_buf t2 = {0};
    const char *cur = tmp->p ? tmp->p : "";
    size_t cn = tmp->n;
    hearth_status st = HEARTH_OK;
    if (strip) {
        st = unicode_form(cur, cn, &t2, UTF8PROC_DECOMPOSE);
        if (st) goto done;
        tmp->n = 0;
        const unsigned char *v = (const unsigned char *)(t2.p ? t2.p : "");
        for (size_t i = 0; i < t2.n;) {
            uint32_t cp;
            int k = tok_utf8_next(v + i, t2.n - i, &cp);
            if (k <= 0) k = 1, cp = v[i];
            if (!is_mn(cp) && (st = tok_buf_put(tmp, v + i, (size_t)k))) goto done;
            i += (size_t)k;
        }
        cur = tmp->p ? tmp->p : "";
        cn = tmp->n;
    }
    st = nm->lowercase ? lowercase(cur, cn, o) : tok_buf_put(o, cur, cn);
done:
    free(t2.p);
    return st;
}

hearth_status tok_normalize(const hearth_tokenizer *t, const char *s, size_t n, tok_buf *out, tok_buf *tmp) {
    tok_buf bufs[2] = {{0}, {0}};
    const char *cur = s;
    size_t cn = n;
    hearth_status st = HEARTH_OK;
    int w = 0;
    for (int i = 0; !st && i < t->n_norm; i++) {
        const tok_norm *nm = &t->norm[i];
        tok_buf *o = &bufs[w];
        o->n = 0;
        if (tok_buf_reserve(o, cn + 8)) {
            st = HEARTH_ENOMEM;
            break;
        }
        switch (nm->kind) {
        case NORM_NFC:
            st = unicode_form(cur, cn, o, UTF8PROC_COMPOSE);
            break;
        case NORM_NFD:
            st = unicode_form(cur, cn, o, UTF8PROC_DECOMPOSE);
            break;
        case NORM_NFKC:
            st = unicode_form(cur, cn, o, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
            break;
        case NORM_NFKD:
            st = unicode_form(cur, cn, o, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
            break;
        case NORM_LOWERCASE:
            st = lowercase(cur, cn, o);
            break;
        case NORM_STRIP: {
            const unsigned char *u = (const unsigned char *)cur;
            size_t a = 0, b = cn;
            uint32_t cp;
            if (nm->left)
                while (a < b) {
                    int k = tok_utf8_next(u + a, b - a, &cp);
                    if (k <= 0 || !tok_is_whitespace(cp)) break;
                    a += (size_t)k;
                }
            if (nm->right)
                while (b > a) {
                    size_t k = b - 1;
                    while (k > a && (u[k] & 0xC0) == 0x80) k--;
                    if (tok_utf8_next(u + k, b - k, &cp) <= 0 || !tok_is_whitespace(cp)) break;
                    b = k;
                }
            st = tok_buf_put(o, cur + a, b - a);
            break;
        }
        case NORM_STRIP_ACCENTS: {
            const unsigned char *u = (const unsigned char *)cur;
            for (size_t k = 0; !st && k < cn;) {
                uint32_t cp;
                int l = tok_utf8_next(u + k, cn - k, &cp);
                if (l <= 0) l = 1, cp = u[k];
                if (!is_mark(cp)) st = tok_buf_put(o, u + k, (size_t)l);
                k += (size_t)l;
            }
            break;
        }
        case NORM_REPLACE:
            st = replace(nm, cur, cn, o);
            break;
        case NORM_PREPEND:
            if (cn) st = tok_buf_put(o, nm->content, nm->content_len);
            if (!st) st = tok_buf_put(o, cur, cn);
            break;
        case NORM_BERT:
            st = bert(nm, cur, cn, o, tmp);
            break;
        }
        if (st) break;
        if (!o->p && tok_buf_reserve(o, 1)) st = HEARTH_ENOMEM;
        cur = o->p;
        cn = o->n;
        w ^= 1;
    }
    if (!st) st = tok_buf_put(out, cur, cn);
    free(bufs[0].p);
    free(bufs[1].p);
    return st;
}
