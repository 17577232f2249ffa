/* load_json.c - build a tokenizer from an HF tokenizer.json (+ optional
 * tokenizer_config.json), as tokenizers' serde deserialisation reads it.
 *
 * Every field is validated here, so a malformed file is an EFORMAT naming
 * the file and the JSON path ("model.merges[12]: token 'xy' is not in the
 * vocabulary"), and a valid component this build does not implement is an
 * ENOTSUP naming it. */
#include "core/file.h"
#include "tok/tok_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hearth_tokenizer *t;
    const char *name;
    hearth_err *err;
} ctx;

#define FAIL(c, st, ...) hearth_err_set((c)->err, st, __VA_ARGS__)

static const char *GPT2_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int jbool(json_t *o, const char *k, int def) {
    json_t *v = json_object_get(o, k);
    if (json_is_boolean(v)) return json_is_true(v);
    return def;
}

static hearth_status jstr(ctx *c, json_t *o, const char *k, const char *path, const char **s, size_t *n, int required) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) {
        if (required) return FAIL(c, HEARTH_EFORMAT, "%s: %s.%s is missing", c->name, path, k);
        *s = NULL;
        if (n) *n = 0;
        return HEARTH_OK;
    }
    if (!json_is_string(v)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.%s must be a string", c->name, path, k);
    *s = json_string_value(v);
    if (n) *n = json_string_length(v);
    return HEARTH_OK;
}

static char *dupn(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static const char *jtype(json_t *o) {
    json_t *v = json_object_get(o, "type");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A single code point from a JSON string field. */
static hearth_status jchar(ctx *c, json_t *o, const char *k, const char *path, uint32_t def, uint32_t *out) {
    const char *s = NULL;
    size_t n = 0;
    hearth_status st = jstr(c, o, k, path, &s, &n, 0);
    if (st) return st;
    if (!s) {
        *out = def;
        return HEARTH_OK;
    }
    uint32_t cp;
    int l = tok_utf8_next((const unsigned char *)s, n, &cp);
    if (l <= 0 || (size_t)l != n) return FAIL(c, HEARTH_EFORMAT, "%s: %s.%s must be one character", c->name, path, k);
    *out = cp;
    return HEARTH_OK;
}

static hearth_status pattern(ctx *c, json_t *o, const char *path, pcre2_code **re, char **lit, size_t *lit_len,
                             int want_regex_compiled_for_literal) {
    json_t *p = json_object_get(o, "pattern");
    if (!json_is_object(p)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.pattern must be {\"String\": ...} or {\"Regex\": ...}", c->name, path);
    json_t *s = json_object_get(p, "String"), *r = json_object_get(p, "Regex");
    if (json_is_string(s)) {
        if (lit) {
            *lit = dupn(json_string_value(s), json_string_length(s));
            *lit_len = json_string_length(s);
            if (!*lit) return FAIL(c, HEARTH_ENOMEM, "out of memory");
        }
        if (want_regex_compiled_for_literal)
            return hearth_err_wrap(c->err, tok_regex_compile(re, json_string_value(s), json_string_length(s), 1, c->err),
                                   "%s: %s.pattern", c->name, path);
        return HEARTH_OK;
    }
    if (json_is_string(r)) {
        hearth_status st = tok_regex_compile(re, json_string_value(r), json_string_length(r), 0, c->err);
        if (st) return hearth_err_wrap(c->err, st, "%s: %s.pattern", c->name, path);
        return HEARTH_OK;
    }
    return FAIL(c, HEARTH_EFORMAT, "%s: %s.pattern must be {\"String\": ...} or {\"Regex\": ...}", c->name, path);
}

/* ---- normalizers ---- */

static hearth_status add_norm(ctx *c, json_t *o, const char *path) {
    hearth_tokenizer *t = c->t;
    if (!o || json_is_null(o)) return HEARTH_OK;
    const char *ty = jtype(o);
    if (!json_is_object(o) || !ty) return FAIL(c, HEARTH_EFORMAT, "%s: %s must be an object with a \"type\"", c->name, path);
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "normalizers");
        if (!json_is_array(a)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.normalizers must be an array", c->name, path);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char p2[128];
            snprintf(p2, sizeof p2, "%s.normalizers[%zu]", path, i);
            hearth_status st = add_norm(c, json_array_get(a, i), p2);
            if (st) return st;
        }
        return HEARTH_OK;
    }
    tok_norm nm;
    memset(&nm, 0, sizeof nm);
    if (!strcmp(ty, "NFC")) nm.kind = NORM_NFC;
    else if (!strcmp(ty, "NFD")) nm.kind = NORM_NFD;
    else if (!strcmp(ty, "NFKC")) nm.kind = NORM_NFKC;
    else if (!strcmp(ty, "NFKD")) nm.kind = NORM_NFKD;
    else if (!strcmp(ty, "Lowercase")) nm.kind = NORM_LOWERCASE;
    else if (!strcmp(ty, "StripAccents")) nm.kind = NORM_STRIP_ACCENTS;
    else if (!strcmp(ty, "Strip")) {
        nm.kind = NORM_STRIP;
        nm.left = jbool(o, "strip_left", 1);
        nm.right = jbool(o, "strip_right", 1);
    } else if (!strcmp(ty, "Prepend")) {
        const char *s;
        size_t n;
        hearth_status st = jstr(c, o, "prepend", path, &s, &n, 1);
        if (st) return st;
        nm.kind = NORM_PREPEND;
        nm.content = dupn(s, n);
        nm.content_len = n;
    } else if (!strcmp(ty, "Replace")) {
        const char *s;
        size_t n;
        hearth_status st = jstr(c, o, "content", path, &s, &n, 1);
        if (st) return st;
        nm.kind = NORM_REPLACE;
        nm.content = dupn(s, n);
        nm.content_len = n;
        st = pattern(c, o, path, &nm.re, &nm.pattern, &nm.pattern_len, 0);
        if (st) {
            free(nm.content);
            return st;
        }
    } else if (!strcmp(ty, "BertNormalizer")) {
        nm.kind = NORM_BERT;
        nm.clean_text = jbool(o, "clean_text", 1);
        nm.chinese = jbool(o, "handle_chinese_chars", 1);
        json_t *sa = json_object_get(o, "strip_accents");
        nm.strip_accents = json_is_boolean(sa) ? json_is_true(sa) : -1;
        nm.lowercase = jbool(o, "lowercase", 1);
    } else {
        return FAIL(c, HEARTH_ENOTSUP, "%s: %s: normalizer type '%s' is not supported", c->name, path, ty);
    }
    tok_norm *p = realloc(t->norm, (size_t)(t->n_norm + 1) * sizeof *p);
    if (!p) return FAIL(c, HEARTH_ENOMEM, "out of memory");
    t->norm = p;
    t->norm[t->n_norm++] = nm;
    return HEARTH_OK;
}

/* ---- pre-tokenizers ---- */

static hearth_status behavior(ctx *c, json_t *o, const char *path, split_behavior def, split_behavior *out) {
    json_t *b = json_object_get(o, "behavior");
    if (!b) {
        *out = def;
        return HEARTH_OK;
    }
    const char *s = json_is_string(b) ? json_string_value(b) : "";
    static const char *const N[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, N[i])) {
            *out = (split_behavior)i;
            return HEARTH_OK;
        }
    return FAIL(c, HEARTH_EFORMAT, "%s: %s.behavior '%s' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
                c->name, path, s);
}

static hearth_status prepend_scheme_of(ctx *c, json_t *o, const char *path, prepend_scheme *out) {
    json_t *p = json_object_get(o, "prepend_scheme");
    if (json_is_string(p)) {
        const char *s = json_string_value(p);
        if (!strcmp(s, "always")) *out = PREPEND_ALWAYS;
        else if (!strcmp(s, "first")) *out = PREPEND_FIRST;
        else if (!strcmp(s, "never")) *out = PREPEND_NEVER;
        else return FAIL(c, HEARTH_EFORMAT, "%s: %s.prepend_scheme '%s' is not always/first/never", c->name, path, s);
        return HEARTH_OK;
    }
    *out = jbool(o, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
    return HEARTH_OK;
}

static hearth_status add_pre(ctx *c, json_t *o, const char *path) {
    hearth_tokenizer *t = c->t;
    if (!o || json_is_null(o)) return HEARTH_OK;
    const char *ty = jtype(o);
    if (!json_is_object(o) || !ty) return FAIL(c, HEARTH_EFORMAT, "%s: %s must be an object with a \"type\"", c->name, path);
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "pretokenizers");
        if (!json_is_array(a)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.pretokenizers must be an array", c->name, path);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char p2[128];
            snprintf(p2, sizeof p2, "%s.pretokenizers[%zu]", path, i);
            hearth_status st = add_pre(c, json_array_get(a, i), p2);
            if (st) return st;
        }
        return HEARTH_OK;
    }
    if (t->n_pre && t->pre[t->n_pre - 1].kind == PRE_BYTELEVEL)
        return FAIL(c, HEARTH_ENOTSUP, "%s: %s: a pre-tokenizer after ByteLevel is not supported", c->name, path);
    tok_pre pp;
    memset(&pp, 0, sizeof pp);
    hearth_status st = HEARTH_OK;
    if (!strcmp(ty, "ByteLevel")) {
        pp.kind = PRE_BYTELEVEL;
        pp.add_prefix_space = jbool(o, "add_prefix_space", 1);
        pp.use_regex = jbool(o, "use_regex", 1);
        if (pp.use_regex) st = tok_regex_compile(&pp.re, GPT2_PATTERN, strlen(GPT2_PATTERN), 0, c->err);
        t->byte_level = 1;
    } else if (!strcmp(ty, "Split")) {
        pp.kind = PRE_SPLIT;
        pp.invert = jbool(o, "invert", 0);
        st = behavior(c, o, path, SPLIT_ISOLATED, &pp.behavior);
        if (!st) st = pattern(c, o, path, &pp.re, NULL, NULL, 1);
    } else if (!strcmp(ty, "Metaspace")) {
        pp.kind = PRE_METASPACE;
        pp.split = jbool(o, "split", 1);
        st = jchar(c, o, "replacement", path, 0x2581, &pp.replacement);
        if (!st) st = prepend_scheme_of(c, o, path, &pp.prepend);
    } else if (!strcmp(ty, "Digits")) {
        pp.kind = PRE_DIGITS;
        pp.individual_digits = jbool(o, "individual_digits", 0);
    } else if (!strcmp(ty, "Whitespace")) {
        pp.kind = PRE_WHITESPACE;
        st = tok_regex_compile(&pp.re, "\\w+|[^\\w\\s]+", strlen("\\w+|[^\\w\\s]+"), 0, c->err);
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        pp.kind = PRE_WHITESPACE_SPLIT;
    } else if (!strcmp(ty, "Punctuation")) {
        pp.kind = PRE_PUNCTUATION;
        st = behavior(c, o, path, SPLIT_ISOLATED, &pp.behavior);
    } else if (!strcmp(ty, "BertPreTokenizer")) {
        pp.kind = PRE_BERT;
    } else if (!strcmp(ty, "CharDelimiterSplit")) {
        pp.kind = PRE_CHAR_DELIM;
        st = jchar(c, o, "delimiter", path, ' ', &pp.replacement);
    } else {
        return FAIL(c, HEARTH_ENOTSUP, "%s: %s: pre-tokenizer type '%s' is not supported", c->name, path, ty);
    }
    if (!st) {
        tok_pre *p = realloc(t->pre, (size_t)(t->n_pre + 1) * sizeof *p);
        if (!p) st = FAIL(c, HEARTH_ENOMEM, "out of memory");
        else {
            t->pre = p;
            t->pre[t->n_pre++] = pp;
            return HEARTH_OK;
        }
    }
    if (pp.re) pcre2_code_free(pp.re);
    return st;
}

/* ---- decoders ---- */

static hearth_status add_dec(ctx *c, json_t *o, const char *path) {
    hearth_tokenizer *t = c->t;
    if (!o || json_is_null(o)) return HEARTH_OK;
    const char *ty = jtype(o);
    if (!json_is_object(o) || !ty) return FAIL(c, HEARTH_EFORMAT, "%s: %s must be an object with a \"type\"", c->name, path);
    t->has_decoder = 1;
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "decoders");
        if (!json_is_array(a)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.decoders must be an array", c->name, path);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char p2[128];
            snprintf(p2, sizeof p2, "%s.decoders[%zu]", path, i);
            hearth_status st = add_dec(c, json_array_get(a, i), p2);
            if (st) return st;
        }
        return HEARTH_OK;
    }
    for (int i = 0; i < t->n_dec; i++)
        if (t->dec[i].kind == DEC_BYTELEVEL)
            return FAIL(c, HEARTH_ENOTSUP, "%s: %s: a decoder after ByteLevel is not supported", c->name, path);
    tok_dec d;
    memset(&d, 0, sizeof d);
    hearth_status st = HEARTH_OK;
    const char *s = NULL;
    size_t n = 0;
    if (!strcmp(ty, "ByteLevel")) d.kind = DEC_BYTELEVEL;
    else if (!strcmp(ty, "ByteFallback")) d.kind = DEC_BYTE_FALLBACK;
    else if (!strcmp(ty, "Fuse")) d.kind = DEC_FUSE;
    else if (!strcmp(ty, "Metaspace")) {
        d.kind = DEC_METASPACE;
        st = jchar(c, o, "replacement", path, 0x2581, &d.replacement);
        if (!st) st = prepend_scheme_of(c, o, path, &d.prepend);
    } else if (!strcmp(ty, "Strip")) {
        d.kind = DEC_STRIP;
        st = jstr(c, o, "content", path, &s, &n, 1);
        if (!st) {
            d.content = dupn(s, n);
            d.content_len = n;
            json_t *a = json_object_get(o, "start"), *b = json_object_get(o, "stop");
            d.start = json_is_integer(a) ? (int)json_integer_value(a) : 0;
            d.stop = json_is_integer(b) ? (int)json_integer_value(b) : 0;
            if (d.start < 0 || d.stop < 0 || d.start > 1000 || d.stop > 1000)
                st = FAIL(c, HEARTH_EFORMAT, "%s: %s: start/stop out of range", c->name, path);
            int fused = 0;
            for (int i = 0; i < t->n_dec; i++) fused |= t->dec[i].kind == DEC_FUSE;
            if (!st && fused && d.stop)
                st = FAIL(c, HEARTH_ENOTSUP, "%s: %s: Strip with stop > 0 after Fuse is not supported (cannot stream)", c->name, path);
        }
    } else if (!strcmp(ty, "Replace")) {
        d.kind = DEC_REPLACE;
        json_t *p = json_object_get(o, "pattern");
        json_t *ps = json_is_object(p) ? json_object_get(p, "String") : NULL;
        if (!json_is_string(ps))
            st = FAIL(c, HEARTH_ENOTSUP, "%s: %s.pattern: only {\"String\": ...} patterns are supported in decoders", c->name, path);
        if (!st) st = jstr(c, o, "content", path, &s, &n, 1);
        if (!st) {
            d.pattern = dupn(json_string_value(ps), json_string_length(ps));
            d.pattern_len = json_string_length(ps);
            d.content = dupn(s, n);
            d.content_len = n;
            if (!d.pattern_len) st = FAIL(c, HEARTH_EFORMAT, "%s: %s.pattern is empty", c->name, path);
            else if (d.content_len > 4 * d.pattern_len + 4)
                st = FAIL(c, HEARTH_ENOTSUP, "%s: %s: replacement grows text more than 4x", c->name, path);
        }
    } else if (!strcmp(ty, "WordPiece")) {
        d.kind = DEC_WORDPIECE;
        st = jstr(c, o, "prefix", path, &s, &n, 0);
        if (!st) {
            if (!s) s = "##", n = 2;
            d.content = dupn(s, n);
            d.content_len = n;
            d.cleanup = jbool(o, "cleanup", 1);
        }
    } else {
        return FAIL(c, HEARTH_ENOTSUP, "%s: %s: decoder type '%s' is not supported", c->name, path, ty);
    }
    if (!st) {
        tok_dec *p = realloc(t->dec, (size_t)(t->n_dec + 1) * sizeof *p);
        if (!p) st = FAIL(c, HEARTH_ENOMEM, "out of memory");
        else {
            t->dec = p;
            t->dec[t->n_dec++] = d;
            return HEARTH_OK;
        }
    }
    free(d.content);
    free(d.pattern);
    return st;
}

/* ---- post-processors ---- */

static hearth_status post_piece(ctx *c, int is_seq, const int32_t *ids, int n) {
    hearth_tokenizer *t = c->t;
    tok_tmpl_piece *p = realloc(t->post, (size_t)(t->n_post + 1) * sizeof *p);
    if (!p) return FAIL(c, HEARTH_ENOMEM, "out of memory");
    t->post = p;
    tok_tmpl_piece *q = &t->post[t->n_post++];
    q->is_sequence = is_seq;
    q->n_ids = n;
    q->ids = NULL;
    if (n) {
        q->ids = malloc((size_t)n * sizeof *q->ids);
        if (!q->ids) return FAIL(c, HEARTH_ENOMEM, "out of memory");
        memcpy(q->ids, ids, (size_t)n * sizeof *ids);
    }
    return HEARTH_OK;
}

static hearth_status pair_tok(ctx *c, json_t *o, const char *k, const char *path, int32_t *id) {
    json_t *a = json_object_get(o, k);
    if (!json_is_array(a) || json_array_size(a) != 2 || !json_is_integer(json_array_get(a, 1)))
        return FAIL(c, HEARTH_EFORMAT, "%s: %s.%s must be [token, id]", c->name, path, k);
    *id = (int32_t)json_integer_value(json_array_get(a, 1));
    return HEARTH_OK;
}

static hearth_status add_post(ctx *c, json_t *o, const char *path, int *n_adding) {
    if (!o || json_is_null(o)) return HEARTH_OK;
    const char *ty = jtype(o);
    if (!json_is_object(o) || !ty) return FAIL(c, HEARTH_EFORMAT, "%s: %s must be an object with a \"type\"", c->name, path);
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "processors");
        if (!json_is_array(a)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.processors must be an array", c->name, path);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char p2[128];
            snprintf(p2, sizeof p2, "%s.processors[%zu]", path, i);
            hearth_status st = add_post(c, json_array_get(a, i), p2, n_adding);
            if (st) return st;
        }
        return HEARTH_OK;
    }
    if (!strcmp(ty, "ByteLevel")) return HEARTH_OK; /* offsets only */
    if (++*n_adding > 1)
        return FAIL(c, HEARTH_ENOTSUP, "%s: %s: more than one special-token post-processor", c->name, path);
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        int32_t cls, sep;
        hearth_status st = pair_tok(c, o, "cls", path, &cls);
        if (!st) st = pair_tok(c, o, "sep", path, &sep);
        if (!st) st = post_piece(c, 0, &cls, 1);
        if (!st) st = post_piece(c, 1, NULL, 0);
        if (!st) st = post_piece(c, 0, &sep, 1);
        return st;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        json_t *single = json_object_get(o, "single"), *sp = json_object_get(o, "special_tokens");
        if (!json_is_array(single)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.single must be an array", c->name, path);
        for (size_t i = 0; i < json_array_size(single); i++) {
            json_t *e = json_array_get(single, i);
            json_t *seq = json_object_get(e, "Sequence"), *spec = json_object_get(e, "SpecialToken");
            if (json_is_object(seq)) {
                hearth_status st = post_piece(c, 1, NULL, 0);
                if (st) return st;
            } else if (json_is_object(spec)) {
                json_t *idv = json_object_get(spec, "id");
                if (!json_is_string(idv))
                    return FAIL(c, HEARTH_EFORMAT, "%s: %s.single[%zu].SpecialToken.id must be a string", c->name, path, i);
                json_t *def = json_object_get(sp, json_string_value(idv));
                json_t *ids = json_object_get(def, "ids");
                if (!json_is_array(ids))
                    return FAIL(c, HEARTH_EFORMAT, "%s: %s.special_tokens has no ids for '%s'", c->name, path, json_string_value(idv));
                size_t m = json_array_size(ids);
                int32_t tmp[16];
                if (m > 16) return FAIL(c, HEARTH_ENOTSUP, "%s: %s: special token '%s' has %zu ids", c->name, path, json_string_value(idv), m);
                for (size_t k = 0; k < m; k++) {
                    json_t *x = json_array_get(ids, k);
                    if (!json_is_integer(x)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.special_tokens.%s.ids must be integers", c->name, path, json_string_value(idv));
                    tmp[k] = (int32_t)json_integer_value(x);
                }
                hearth_status st = post_piece(c, 0, tmp, (int)m);
                if (st) return st;
            } else {
                return FAIL(c, HEARTH_EFORMAT, "%s: %s.single[%zu] must be a Sequence or a SpecialToken", c->name, path, i);
            }
        }
        return HEARTH_OK;
    }
    return FAIL(c, HEARTH_ENOTSUP, "%s: %s: post-processor type '%s' is not supported", c->name, path, ty);
}

/* ---- model ---- */

static hearth_status load_vocab_map(ctx *c, json_t *vocab) {
    hearth_tokenizer *t = c->t;
    if (!json_is_object(vocab)) return FAIL(c, HEARTH_EFORMAT, "%s: model.vocab must be an object {token: id}", c->name);
    int64_t max = -1;
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 28))
            return FAIL(c, HEARTH_EFORMAT, "%s: model.vocab['%s'] must be an id in [0, 2^28)", c->name, k);
        if (json_integer_value(v) > max) max = json_integer_value(v);
    }
    if (max < 0) return FAIL(c, HEARTH_EFORMAT, "%s: model.vocab is empty", c->name);
    hearth_status st = tok_alloc_vocab(t, (int32_t)max + 1, c->err);
    if (st) return st;
    void *it = json_object_iter(vocab);
    while (it) {
        const char *key = json_object_iter_key(it);
        size_t kl = strlen(key); /* jansson keys cannot hold NUL before 2.14 iter_key_len */
#if JANSSON_VERSION_HEX >= 0x020e00
        kl = json_object_iter_key_len(it);
#endif
        st = tok_set_token(t, (int32_t)json_integer_value(json_object_iter_value(it)), key, kl, c->err);
        if (st) return hearth_err_wrap(c->err, st, "%s: model.vocab['%s']", c->name, key);
        it = json_object_iter_next(vocab, it);
    }
    return tok_finish_vocab(t, c->err);
}

static hearth_status unk_from_token(ctx *c, json_t *m) {
    const char *u = NULL;
    size_t n = 0;
    hearth_status st = jstr(c, m, "unk_token", "model", &u, &n, 0);
    if (st || !u) return st;
    c->t->unk_id = tok_strmap_get(&c->t->vocab, u, n);
    /* HF fails at encode time on a missing unk; refuse it at load */
    if (c->t->unk_id < 0) return FAIL(c, HEARTH_EFORMAT, "%s: model.unk_token '%s' is not in the vocabulary", c->name, u);
    return HEARTH_OK;
}

static hearth_status load_bpe(ctx *c, json_t *m) {
    hearth_tokenizer *t = c->t;
    t->model = MODEL_BPE;
    hearth_status st = load_vocab_map(c, json_object_get(m, "vocab"));
    if (st) return st;
    if ((st = unk_from_token(c, m))) return st;
    t->fuse_unk = jbool(m, "fuse_unk", 0);
    t->byte_fallback = jbool(m, "byte_fallback", 0);
    t->ignore_merges = jbool(m, "ignore_merges", 0);
    json_t *dr = json_object_get(m, "dropout");
    if (json_is_number(dr) && json_number_value(dr) > 0)
        return FAIL(c, HEARTH_ENOTSUP, "%s: model.dropout %g: BPE dropout is not supported", c->name, json_number_value(dr));
    const char *s = NULL;
    size_t n = 0;
    if ((st = jstr(c, m, "continuing_subword_prefix", "model", &s, &n, 0))) return st;
    if (s && n) t->cont_prefix = dupn(s, n), t->cont_prefix_len = n;
    if ((st = jstr(c, m, "end_of_word_suffix", "model", &s, &n, 0))) return st;
    if (s && n) t->eow_suffix = dupn(s, n), t->eow_suffix_len = n;
    json_t *merges = json_object_get(m, "merges");
    if (!merges) merges = json_array(); /* no merges: every piece is its characters */
    else json_incref(merges);
    if (!json_is_array(merges)) {
        json_decref(merges);
        return FAIL(c, HEARTH_EFORMAT, "%s: model.merges must be an array", c->name);
    }
    size_t nm = json_array_size(merges);
    if (tok_pairmap_init(&t->merges, nm)) {
        json_decref(merges);
        return FAIL(c, HEARTH_ENOMEM, "out of memory");
    }
    tok_buf cat = {0};
    for (size_t i = 0; i < nm && !st; i++) {
        json_t *e = json_array_get(merges, i);
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(e)) {
            const char *x = json_string_value(e);
            const char *sp = memchr(x, ' ', json_string_length(e));
            if (!sp) {
                st = FAIL(c, HEARTH_EFORMAT, "%s: model.merges[%zu] '%s' is not two tokens separated by a space", c->name, i, x);
                break;
            }
            a = x, al = (size_t)(sp - x), b = sp + 1, bl = json_string_length(e) - al - 1;
        } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                   json_is_string(json_array_get(e, 1))) {
            a = json_string_value(json_array_get(e, 0)), al = json_string_length(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1)), bl = json_string_length(json_array_get(e, 1));
        } else {
            st = FAIL(c, HEARTH_EFORMAT, "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", c->name, i);
            break;
        }
        int32_t ia = tok_strmap_get(&t->vocab, a, al), ib = tok_strmap_get(&t->vocab, b, bl);
        if (ia < 0 || ib < 0) {
            st = FAIL(c, HEARTH_EFORMAT, "%s: model.merges[%zu]: token '%.*s' is not in the vocabulary", c->name, i,
                      (int)(ia < 0 ? al : bl), ia < 0 ? a : b);
            break;
        }
        cat.n = 0;
        size_t skip = (t->cont_prefix_len && bl >= t->cont_prefix_len && !memcmp(b, t->cont_prefix, t->cont_prefix_len)) ? t->cont_prefix_len : 0;
        if (tok_buf_put(&cat, a, al) || tok_buf_put(&cat, b + skip, bl - skip)) {
            st = FAIL(c, HEARTH_ENOMEM, "out of memory");
            break;
        }
        int32_t im = tok_strmap_get(&t->vocab, cat.p, cat.n);
        if (im < 0) {
            st = FAIL(c, HEARTH_EFORMAT, "%s: model.merges[%zu]: merged token '%s' is not in the vocabulary", c->name, i, cat.p);
            break;
        }
        if (tok_pairmap_put(&t->merges, ia, ib, (int32_t)i, im)) st = FAIL(c, HEARTH_ENOMEM, "out of memory");
    }
    free(cat.p);
    json_decref(merges);
    return st;
}

static hearth_status load_wordpiece(ctx *c, json_t *m) {
    hearth_tokenizer *t = c->t;
    t->model = MODEL_WORDPIECE;
    hearth_status st = load_vocab_map(c, json_object_get(m, "vocab"));
    if (st) return st;
    if ((st = unk_from_token(c, m))) return st;
    const char *s = NULL;
    size_t n = 0;
    if ((st = jstr(c, m, "continuing_subword_prefix", "model", &s, &n, 0))) return st;
    if (!s) s = "##", n = 2;
    t->cont_prefix = dupn(s, n);
    t->cont_prefix_len = n;
    json_t *mx = json_object_get(m, "max_input_chars_per_word");
    if (json_is_integer(mx)) t->max_input_chars = (int)json_integer_value(mx);
    return HEARTH_OK;
}

static hearth_status load_wordlevel(ctx *c, json_t *m) {
    c->t->model = MODEL_WORDLEVEL;
    hearth_status st = load_vocab_map(c, json_object_get(m, "vocab"));
    return st ? st : unk_from_token(c, m);
}

static hearth_status load_unigram(ctx *c, json_t *m) {
    hearth_tokenizer *t = c->t;
    t->model = MODEL_UNIGRAM;
    json_t *v = json_object_get(m, "vocab");
    if (!json_is_array(v) || !json_array_size(v))
        return FAIL(c, HEARTH_EFORMAT, "%s: model.vocab must be a non-empty array of [token, score]", c->name);
    size_t n = json_array_size(v);
    hearth_status st = tok_alloc_vocab(t, (int32_t)n, c->err);
    if (st) return st;
    t->scores = malloc(n * sizeof *t->scores);
    if (!t->scores) return FAIL(c, HEARTH_ENOMEM, "out of memory");
    t->min_score = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
            return FAIL(c, HEARTH_EFORMAT, "%s: model.vocab[%zu] must be [token, score]", c->name, i);
        json_t *s = json_array_get(e, 0);
        if ((st = tok_set_token(t, (int32_t)i, json_string_value(s), json_string_length(s), c->err))) return st;
        t->scores[i] = json_number_value(json_array_get(e, 1));
        if (t->scores[i] < t->min_score) t->min_score = t->scores[i];
        int chars = 0;
        for (size_t k = 0; k < json_string_length(s); k++) chars += ((unsigned char)json_string_value(s)[k] & 0xC0) != 0x80;
        if (chars > t->max_token_chars) t->max_token_chars = chars;
    }
    if ((st = tok_finish_vocab(t, c->err))) return st;
    json_t *u = json_object_get(m, "unk_id");
    if (json_is_integer(u)) {
        if (json_integer_value(u) < 0 || json_integer_value(u) >= (json_int_t)n)
            return FAIL(c, HEARTH_EFORMAT, "%s: model.unk_id %lld out of range", c->name, (long long)json_integer_value(u));
        t->unk_id = (int32_t)json_integer_value(u);
    }
    t->byte_fallback = jbool(m, "byte_fallback", 0);
    t->fuse_unk = 1;
    if (t->byte_fallback) return FAIL(c, HEARTH_ENOTSUP, "%s: model: Unigram with byte_fallback is not supported", c->name);
    return HEARTH_OK;
}

/* ---- added tokens / config ---- */

static hearth_status added_from(ctx *c, json_t *e, int32_t id, const char *path) {
    json_t *ct = json_object_get(e, "content");
    if (!json_is_string(ct)) return FAIL(c, HEARTH_EFORMAT, "%s: %s.content must be a string", c->name, path);
    tok_added a = {
        .content = (char *)json_string_value(ct),
        .len = json_string_length(ct),
        .id = id,
        .special = jbool(e, "special", 0),
        .lstrip = jbool(e, "lstrip", 0),
        .rstrip = jbool(e, "rstrip", 0),
        .single_word = jbool(e, "single_word", 0),
        .normalized = jbool(e, "normalized", !jbool(e, "special", 0)),
    };
    hearth_status st = tok_add_added(c->t, &a, c->err);
    return st ? hearth_err_wrap(c->err, st, "%s: %s", c->name, path) : HEARTH_OK;
}

static int32_t config_token(const hearth_tokenizer *t, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return -1;
    return hearth_tok_find(t, json_string_value(v));
}

static int32_t first_found(const hearth_tokenizer *t, const char *const *names) {
    for (; *names; names++) {
        int id = hearth_tok_find(t, *names);
        if (id >= 0) return id;
    }
    return -1;
}

static hearth_status build(ctx *c, json_t *root, json_t *cfg) {
    hearth_tokenizer *t = c->t;
    if (!json_is_object(root)) return FAIL(c, HEARTH_EFORMAT, "%s: the document is not a JSON object", c->name);
    json_t *m = json_object_get(root, "model");
    if (!json_is_object(m)) return FAIL(c, HEARTH_EFORMAT, "%s: \"model\" is missing or not an object", c->name);
    const char *ty = jtype(m);
    if (!ty) {
        /* old files: infer from the fields, as tokenizers' untagged enum does */
        if (json_object_get(m, "merges")) ty = "BPE";
        else if (json_is_array(json_object_get(m, "vocab"))) ty = "Unigram";
        else if (json_object_get(m, "continuing_subword_prefix") || json_object_get(m, "max_input_chars_per_word")) ty = "WordPiece";
        else ty = "WordLevel";
    }
    hearth_status st;
    if (!strcmp(ty, "BPE")) st = load_bpe(c, m);
    else if (!strcmp(ty, "WordPiece")) st = load_wordpiece(c, m);
    else if (!strcmp(ty, "WordLevel")) st = load_wordlevel(c, m);
    else if (!strcmp(ty, "Unigram")) st = load_unigram(c, m);
    else return FAIL(c, HEARTH_ENOTSUP, "%s: model.type '%s' is not supported (BPE, WordPiece, WordLevel, Unigram)", c->name, ty);
    if (st) return st;

    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added) && !json_is_null(added))
        return FAIL(c, HEARTH_EFORMAT, "%s: added_tokens must be an array", c->name);
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *e = json_array_get(added, i);
        json_t *id = json_object_get(e, "id");
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!json_is_object(e) || !json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 28))
            return FAIL(c, HEARTH_EFORMAT, "%s: %s must be an object with an id in [0, 2^28)", c->name, path);
        if ((st = added_from(c, e, (int32_t)json_integer_value(id), path))) return st;
    }
    json_t *atd = cfg ? json_object_get(cfg, "added_tokens_decoder") : NULL;
    if (json_is_object(atd)) {
        const char *k;
        json_t *e;
        json_object_foreach(atd, k, e) {
            char *end;
            long id = strtol(k, &end, 10);
            char path[80];
            snprintf(path, sizeof path, "tokenizer_config added_tokens_decoder['%.40s']", k);
            if (*end || id < 0 || id >= (1 << 28) || !json_is_object(e))
                return FAIL(c, HEARTH_EFORMAT, "%s: %s: bad id or entry", c->name, path);
            json_t *ct = json_object_get(e, "content");
            if (json_is_string(ct) && hearth_tok_find(t, json_string_value(ct)) == (int)id &&
                (t->tok_flags[id] & TOKF_ADDED))
                continue; /* already in tokenizer.json */
            if ((st = added_from(c, e, (int32_t)id, path))) return st;
        }
    }

    if ((st = add_norm(c, json_object_get(root, "normalizer"), "normalizer"))) return st;
    if ((st = add_pre(c, json_object_get(root, "pre_tokenizer"), "pre_tokenizer"))) return st;
    int n_adding = 0;
    if ((st = add_post(c, json_object_get(root, "post_processor"), "post_processor", &n_adding))) return st;
    if ((st = add_dec(c, json_object_get(root, "decoder"), "decoder"))) return st;
    if (t->model == MODEL_BPE && t->byte_level && t->byte_fallback)
        return FAIL(c, HEARTH_ENOTSUP, "%s: byte-level BPE with byte_fallback is not supported", c->name);

    static const char *const BOS[] = {"<|begin_of_text|>", "<s>", "<bos>", "[CLS]", NULL};
    static const char *const EOS[] = {"<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>", "[SEP]", NULL};
    t->bos = cfg ? config_token(t, cfg, "bos_token") : -1;
    t->eos = cfg ? config_token(t, cfg, "eos_token") : -1;
    t->pad = cfg ? config_token(t, cfg, "pad_token") : -1;
    if (!cfg || !json_object_get(cfg, "bos_token")) t->bos = first_found(t, BOS);
    if (!cfg || !json_object_get(cfg, "eos_token")) t->eos = first_found(t, EOS);
    return tok_finish(t, c->name, c->err);
}

hearth_status hearth_tok_load_json_mem(hearth_tokenizer **out, const char *tokenizer_json, size_t len,
                                       const char *config_json, size_t config_len, const char *name,
                                       hearth_err *err) {
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(tokenizer_json, len, JSON_ALLOW_NUL, &je);
    if (!root)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: invalid JSON at line %d column %d: %s", name, je.line, je.column, je.text);
    json_t *cfg = NULL;
    if (config_json) {
        cfg = json_loadb(config_json, config_len, JSON_DECODE_INT_AS_REAL, &je);
        if (!cfg || !json_is_object(cfg)) {
            json_decref(root);
            json_decref(cfg);
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer_config: invalid JSON at line %d column %d: %s", name,
                                  je.line, je.column, cfg ? "not an object" : je.text);
        }
    }
    hearth_tokenizer *t = tok_new();
    if (!t) {
        json_decref(root);
        json_decref(cfg);
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    }
    ctx c = {t, name, err};
    hearth_status st = build(&c, root, cfg);
    json_decref(root);
    json_decref(cfg);
    if (st) {
        hearth_tok_free(t);
        return st;
    }
    *out = t;
    return HEARTH_OK;
}

hearth_status hearth_tok_load_json(hearth_tokenizer **out, const char *tokenizer_json_path,
                                   const char *tokenizer_config_path, hearth_err *err) {
    *out = NULL;
    char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    hearth_status st = hearth_file_read(tokenizer_json_path, &a, &al, err);
    if (st) return st;
    if (tokenizer_config_path && (st = hearth_file_read(tokenizer_config_path, &b, &bl, err))) {
        free(a);
        return st;
    }
    st = hearth_tok_load_json_mem(out, a, al, b, bl, tokenizer_json_path, err);
    free(a);
    free(b);
    return st;
}
