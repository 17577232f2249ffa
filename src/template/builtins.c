/* builtins.c - jinja2's filters and tests, the Python str/dict/list methods
 * chat templates call, and the globals transformers installs (range,
 * namespace, dict, raise_exception, strftime_now).
 *
 * Each follows the jinja2 3.1 / CPython behaviour it stands in for; where a
 * jinja2 filter returns a generator (map, select, unique, reverse, items) this
 * returns a list, which iterates, joins and tests the same. Methods that would
 * mutate a list or dict are refused with the ImmutableSandboxedEnvironment's
 * SecurityError message. */
#include "template/tmpl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

struct vfunc {
    int id;
    val self;
};

/* ================================================================ helpers */

static val need_str(R *r, val v, const char *what) {
    if (v.t != V_STR) tmpl_rt_fail(r, "%s expects a string, got '%s'", what, tmpl_v_typename(v));
    return v;
}

static int64_t need_int(R *r, val v, const char *what) {
    if (v.t != V_INT && v.t != V_BOOL) tmpl_rt_fail(r, "%s expects an integer, got '%s'", what, tmpl_v_typename(v));
    return v.i;
}

static val kw(args *a, int pos, const char *name, val def) {
    val v;
    return tmpl_arg_get(a, pos, name, &v) ? v : def;
}

static int is_pyspace(uint32_t cp) {
    return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

/* Map every code point through f (upper/lower). */
static val map_case(R *r, val s, int upper) {
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + i, s.s.n - i, &adv);
        if (cp < 0x80) tmpl_sb_putc(&b, (char)(upper ? toupper((int)cp) : tolower((int)cp)));
        else if (cp == 0xDF && upper) tmpl_sb_puts(&b, "SS");
        else tmpl_u8_put(&b, (uint32_t)(upper ? utf8proc_toupper((utf8proc_int32_t)cp) : utf8proc_tolower((utf8proc_int32_t)cp)));
        i += adv;
    }
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

static int cp_is_cased_letter(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

/* Python str.title(): a cased letter after a cased letter is lowered, else uppered. */
static val py_title(R *r, val s) {
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    int prev_cased = 0;
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + i, s.s.n - i, &adv);
        uint32_t o = (uint32_t)(prev_cased ? utf8proc_tolower((utf8proc_int32_t)cp) : utf8proc_totitle((utf8proc_int32_t)cp));
        tmpl_u8_put(&b, o);
        prev_cased = cp_is_cased_letter(cp);
        i += adv;
    }
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

/* First code point uppered, the rest lowered (str.capitalize and jinja's title pieces). */
static void cap_into(R *r, sbuf *b, const char *s, size_t n) {
    if (!n) return;
    size_t adv;
    uint32_t cp = tmpl_u8_dec(s, n, &adv);
    tmpl_u8_put(b, (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp));
    val rest = map_case(r, tmpl_v_str(s + adv, n - adv), 0);
    tmpl_sb_put(b, rest.s.p, rest.s.n);
}

static int in_chars(uint32_t cp, val chars) {
    for (size_t i = 0; i < chars.s.n;) {
        size_t adv;
        if (tmpl_u8_dec(chars.s.p + i, chars.s.n - i, &adv) == cp) return 1;
        i += adv;
    }
    return 0;
}

/* str.strip/lstrip/rstrip(chars=None). */
static val py_strip(R *r, val s, val chars, int left, int right) {
    int ws = chars.t == V_NONE || chars.t == V_UNDEF;
    if (!ws) need_str(r, chars, "strip");
    size_t a = 0, b = s.s.n;
    while (left && a < b) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + a, b - a, &adv);
        if (ws ? !is_pyspace(cp) : !in_chars(cp, chars)) break;
        a += adv;
    }
    while (right && b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s.s.p[k] & 0xC0) == 0x80) k--;
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + k, b - k, &adv);
        if (ws ? !is_pyspace(cp) : !in_chars(cp, chars)) break;
        b = k;
    }
    return tmpl_v_str(s.s.p + a, b - a);
}

static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (!memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static val py_replace(R *r, val s, val old, val new_, int64_t count) {
    need_str(r, old, "replace");
    new_ = tmpl_v_to_str(r, new_);
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    if (old.s.n == 0) { /* Python inserts new between every character */
        vlist *chars = tmpl_v_iter(r, s);
        int64_t done = 0;
        for (size_t i = 0; i <= chars->n; i++) {
            if (count < 0 || done < count) {
                tmpl_sb_put(&b, new_.s.p, new_.s.n);
                done++;
            }
            if (i < chars->n) tmpl_sb_put(&b, chars->v[i].s.p, chars->v[i].s.n);
        }
        return tmpl_v_str(b.p ? b.p : "", b.n);
    }
    const char *p = s.s.p, *end = s.s.p + s.s.n;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const char *f = memfind(p, (size_t)(end - p), old.s.p, old.s.n);
        if (!f) break;
        tmpl_sb_put(&b, p, (size_t)(f - p));
        tmpl_sb_put(&b, new_.s.p, new_.s.n);
        p = f + old.s.n;
        done++;
    }
    tmpl_sb_put(&b, p, (size_t)(end - p));
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

/* str.split(sep=None, maxsplit=-1) and rsplit. */
static val py_split(R *r, val s, val sep, int64_t maxsplit, int from_right) {
    vlist *l = tmpl_vl_new(r, 0);
    if (sep.t == V_NONE || sep.t == V_UNDEF) {
        /* runs of whitespace; leading/trailing ignored */
        vlist *chars = tmpl_v_iter(r, s);
        size_t n = chars->n;
        int64_t splits = 0;
        if (!from_right) {
            size_t i = 0;
            while (i < n) {
                while (i < n && is_pyspace(tmpl_u8_dec(chars->v[i].s.p, chars->v[i].s.n, &(size_t){0}))) i++;
                if (i >= n) break;
                size_t j = i;
                if (maxsplit >= 0 && splits >= maxsplit) j = n; /* the rest, trailing whitespace kept */
                else
                    while (j < n && !is_pyspace(tmpl_u8_dec(chars->v[j].s.p, chars->v[j].s.n, &(size_t){0}))) j++;
                const char *a = chars->v[i].s.p, *b = chars->v[j - 1].s.p + chars->v[j - 1].s.n;
                tmpl_vl_push(r, l, tmpl_v_str(a, (size_t)(b - a)));
                splits++;
                i = j;
            }
            return tmpl_v_list(l);
        }
        /* rsplit(None, k): collect from the right, then reverse */
        vlist *rev = tmpl_vl_new(r, 0);
        size_t j = n;
        while (j > 0) {
            while (j > 0 && is_pyspace(tmpl_u8_dec(chars->v[j - 1].s.p, chars->v[j - 1].s.n, &(size_t){0}))) j--;
            if (j == 0) break;
            size_t i = j;
            if (maxsplit >= 0 && splits >= maxsplit) i = 0; /* the rest, leading whitespace kept */
            else
                while (i > 0 && !is_pyspace(tmpl_u8_dec(chars->v[i - 1].s.p, chars->v[i - 1].s.n, &(size_t){0}))) i--;
            const char *a = chars->v[i].s.p, *b = chars->v[j - 1].s.p + chars->v[j - 1].s.n;
            tmpl_vl_push(r, rev, tmpl_v_str(a, (size_t)(b - a)));
            splits++;
            j = i;
        }
        for (size_t k = rev->n; k-- > 0;) tmpl_vl_push(r, l, rev->v[k]);
        return tmpl_v_list(l);
    }
    need_str(r, sep, "split");
    if (sep.s.n == 0) tmpl_rt_fail(r, "empty separator");
    if (!from_right) {
        const char *p = s.s.p, *end = s.s.p + s.s.n;
        int64_t splits = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || splits < maxsplit) ? memfind(p, (size_t)(end - p), sep.s.p, sep.s.n) : NULL;
            if (!f) {
                tmpl_vl_push(r, l, tmpl_v_str(p, (size_t)(end - p)));
                break;
            }
            tmpl_vl_push(r, l, tmpl_v_str(p, (size_t)(f - p)));
            p = f + sep.s.n;
            splits++;
        }
        return tmpl_v_list(l);
    }
    vlist *rev = tmpl_vl_new(r, 0);
    const char *start = s.s.p, *end = s.s.p + s.s.n;
    int64_t splits = 0;
    for (;;) {
        const char *f = NULL;
        if (maxsplit < 0 || splits < maxsplit)
            for (const char *q = end - sep.s.n; q >= start; q--)
                if (!memcmp(q, sep.s.p, sep.s.n)) {
                    f = q;
                    break;
                }
        if (!f) {
            tmpl_vl_push(r, rev, tmpl_v_str(start, (size_t)(end - start)));
            break;
        }
        tmpl_vl_push(r, rev, tmpl_v_str(f + sep.s.n, (size_t)(end - f - sep.s.n)));
        end = f;
        splits++;
    }
    for (size_t k = rev->n; k-- > 0;) tmpl_vl_push(r, l, rev->v[k]);
    return tmpl_v_list(l);
}

/* Python str.splitlines() (without keepends). */
static vlist *py_splitlines(R *r, val s) {
    vlist *l = tmpl_vl_new(r, 0);
    size_t start = 0, i = 0;
    while (i < s.s.n) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + i, s.s.n - i, &adv);
        int brk = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (brk) {
            tmpl_vl_push(r, l, tmpl_v_str(s.s.p + start, i - start));
            i += adv;
            if (cp == '\r' && i < s.s.n && s.s.p[i] == '\n') i++;
            start = i;
        } else i += adv;
    }
    if (start < s.s.n) tmpl_vl_push(r, l, tmpl_v_str(s.s.p + start, s.s.n - start));
    return l;
}

static int str_starts(val s, val p) { return p.s.n <= s.s.n && !memcmp(s.s.p, p.s.p, p.s.n); }
static int str_ends(val s, val p) { return p.s.n <= s.s.n && !memcmp(s.s.p + s.s.n - p.s.n, p.s.p, p.s.n); }

/* Python %-formatting of one conversion. */
static void pct_one(R *r, sbuf *b, const char *spec, size_t speclen, char conv, val v) {
    char fmt[64];
    if (speclen > 40) tmpl_rt_fail(r, "format: conversion spec too long");
    switch (conv) {
    case 's':
    case 'r': {
        sbuf t;
        tmpl_sb_init(&t, &r->a);
        if (conv == 's') tmpl_v_str_to(r, &t, v);
        else tmpl_v_repr_to(r, &t, v);
        if (speclen == 0) {
            tmpl_sb_put(b, t.p ? t.p : "", t.n);
            return;
        }
        snprintf(fmt, sizeof fmt, "%%%.*ss", (int)speclen, spec);
        tmpl_sb_printf(b, fmt, t.p ? t.p : "");
        return;
    }
    case 'd':
    case 'i':
    case 'x':
    case 'X':
    case 'o': {
        if (!tmpl_v_is_num(v)) tmpl_rt_fail(r, "%%%c format: a number is required, not %s", conv, tmpl_v_typename(v));
        long long x = v.t == V_FLOAT ? (long long)v.f : (long long)v.i;
        snprintf(fmt, sizeof fmt, "%%%.*sll%c", (int)speclen, spec, conv == 'i' ? 'd' : conv);
        tmpl_sb_printf(b, fmt, x);
        return;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
        if (!tmpl_v_is_num(v)) tmpl_rt_fail(r, "%%%c format: a real number is required, not %s", conv, tmpl_v_typename(v));
        snprintf(fmt, sizeof fmt, "%%%.*s%c", (int)speclen, spec, conv);
        tmpl_sb_printf(b, fmt, tmpl_v_num(v));
        return;
    }
    default: tmpl_rt_fail(r, "unsupported format character '%c'", conv);
    }
}

static val py_percent(R *r, val fmtv, args *a) {
    need_str(r, fmtv, "format");
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    const char *s = fmtv.s.p;
    size_t n = fmtv.s.n;
    int argi = 0;
    vdict *map = NULL;
    if (a->nk) {
        map = tmpl_vd_new(r, 0);
        for (int i = 0; i < a->nk; i++) tmpl_vd_set(r, map, tmpl_v_strz(a->kn[i]), a->kv[i]);
    } else if (a->n == 1 && a->v[0].t == V_DICT)
        map = a->v[0].d;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            tmpl_sb_putc(&b, s[i]);
            continue;
        }
        if (++i >= n) tmpl_rt_fail(r, "format: incomplete format");
        if (s[i] == '%') {
            tmpl_sb_putc(&b, '%');
            continue;
        }
        val v;
        int have = 0;
        if (s[i] == '(') {
            size_t j = i + 1;
            while (j < n && s[j] != ')') j++;
            if (j >= n || !map) tmpl_rt_fail(r, "format: a mapping is required for %%(name)");
            val *x = tmpl_vd_gets(map, s + i + 1, j - i - 1);
            if (!x) tmpl_rt_fail(r, "format: key '%.*s' not given", (int)(j - i - 1), s + i + 1);
            v = *x;
            have = 1;
            i = j + 1;
        }
        size_t spec = i;
        while (i < n && strchr("-+ #0123456789.", s[i])) i++;
        if (i >= n) tmpl_rt_fail(r, "format: incomplete format");
        if (!have) {
            if (argi >= a->n) tmpl_rt_fail(r, "format: not enough arguments for format string");
            v = a->v[argi++];
        }
        pct_one(r, &b, s + spec, i - spec, s[i], v);
    }
    if (!map && argi < a->n) tmpl_rt_fail(r, "format: not all arguments converted during string formatting");
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

/* str.format(*args, **kwargs): {} {0} {name} with !r/!s; {{ }} escapes. */
static val py_format(R *r, val fmtv, args *a) {
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    const char *s = fmtv.s.p;
    size_t n = fmtv.s.n;
    int autoi = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '}' && i + 1 < n && s[i + 1] == '}') {
            tmpl_sb_putc(&b, '}');
            i++;
            continue;
        }
        if (c != '{') {
            tmpl_sb_putc(&b, c);
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            tmpl_sb_putc(&b, '{');
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && s[j] != '}') j++;
        if (j >= n) tmpl_rt_fail(r, "str.format: single '{' encountered in format string");
        const char *f = s + i + 1;
        size_t fl = j - i - 1, name_l = 0;
        while (name_l < fl && f[name_l] != '!' && f[name_l] != ':') name_l++;
        char conv = (name_l + 1 < fl && f[name_l] == '!') ? f[name_l + 1] : 's';
        val v;
        if (name_l == 0) {
            if (autoi >= a->n) tmpl_rt_fail(r, "str.format: replacement index %d out of range", autoi);
            v = a->v[autoi++];
        } else if (isdigit((unsigned char)f[0])) {
            int k = atoi(f);
            if (k >= a->n) tmpl_rt_fail(r, "str.format: replacement index %d out of range", k);
            v = a->v[k];
        } else {
            char *nm = tmpl_arena_strndup(&r->a, f, name_l);
            if (!tmpl_arg_get(a, -1, nm, &v)) tmpl_rt_fail(r, "str.format: no argument named '%s'", nm);
        }
        if (conv == 'r') tmpl_v_repr_to(r, &b, v);
        else tmpl_v_str_to(r, &b, v);
        i = j;
    }
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

val tmpl_html_escape(R *r, val s) {
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        if (c == '&') tmpl_sb_puts(&b, "&amp;");
        else if (c == '<') tmpl_sb_puts(&b, "&lt;");
        else if (c == '>') tmpl_sb_puts(&b, "&gt;");
        else if (c == '"') tmpl_sb_puts(&b, "&#34;");
        else if (c == '\'') tmpl_sb_puts(&b, "&#39;");
        else tmpl_sb_putc(&b, c);
    }
    val res = tmpl_v_str(b.p ? b.p : "", b.n);
    res.safe = 1;
    return res;
}

/* ================================================================ attribute paths */

/* jinja2's make_attrgetter: "a.b.0" walks attributes/items; ints index. */
static val attr_path(R *r, val obj, val path, val dflt) {
    if (path.t == V_INT) return tmpl_getitem(r, obj, path);
    need_str(r, path, "attribute");
    const char *p = path.s.p, *end = p + path.s.n;
    val cur = obj;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        size_t k = (size_t)(dot - p);
        int all_digits = k > 0;
        for (size_t i = 0; i < k; i++) all_digits &= isdigit((unsigned char)p[i]) != 0;
        if (all_digits) cur = tmpl_getitem(r, cur, tmpl_v_int(strtoll(p, NULL, 10)));
        else cur = tmpl_getitem(r, cur, tmpl_v_str(p, k));
        if (cur.t == V_UNDEF && dflt.t != V_UNDEF) return dflt;
        if (dot == end) break;
        p = dot + 1;
    }
    return cur;
}

static val lower_if_str(R *r, val v, int case_sensitive) {
    return (!case_sensitive && v.t == V_STR) ? map_case(r, v, 0) : v;
}

/* ================================================================ sorting */

typedef struct sortctx {
    val attr;
    int case_sensitive, reverse, by_value;
} sortctx;

static int sort_cmp(R *r, const val *a, const val *b, void *ud) {
    sortctx *c = ud;
    val x = *a, y = *b;
    if (c->attr.t != V_UNDEF && c->attr.t != V_NONE) {
        x = attr_path(r, x, c->attr, (val){.t = V_UNDEF});
        y = attr_path(r, y, c->attr, (val){.t = V_UNDEF});
    }
    x = lower_if_str(r, x, c->case_sensitive);
    y = lower_if_str(r, y, c->case_sensitive);
    int k = tmpl_v_cmp(r, x, y);
    return c->reverse ? -k : k;
}

static int dictsort_cmp(R *r, const val *a, const val *b, void *ud) {
    sortctx *c = ud;
    int idx = c->by_value ? 1 : 0;
    val x = lower_if_str(r, a->l->v[idx], c->case_sensitive), y = lower_if_str(r, b->l->v[idx], c->case_sensitive);
    int k = tmpl_v_cmp(r, x, y);
    return c->reverse ? -k : k;
}

static vlist *copy_list(R *r, vlist *src) {
    vlist *l = tmpl_vl_new(r, src->n);
    if (src->n) memcpy(l->v, src->v, src->n * sizeof(val));
    l->n = src->n;
    return l;
}

/* ================================================================ filters */

typedef val (*filter_fn)(R *r, val x, args *a);

static val f_abs(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_INT || x.t == V_BOOL) return tmpl_v_int(x.i < 0 ? -x.i : x.i);
    if (x.t == V_FLOAT) return tmpl_v_float(fabs(x.f));
    tmpl_rt_fail(r, "bad operand type for abs(): '%s'", tmpl_v_typename(x));
}

static val f_batch(R *r, val x, args *a) {
    int64_t k = need_int(r, kw(a, 0, "linecount", tmpl_v_int(1)), "batch");
    if (k <= 0) tmpl_rt_fail(r, "batch: linecount must be positive");
    val fill = kw(a, 1, "fill_with", tmpl_v_none());
    vlist *items = tmpl_v_iter(r, x), *out = tmpl_vl_new(r, 0), *cur = NULL;
    for (size_t i = 0; i < items->n; i++) {
        if (!cur || (int64_t)cur->n == k) {
            cur = tmpl_vl_new(r, (size_t)k);
            tmpl_vl_push(r, out, tmpl_v_list(cur));
        }
        tmpl_vl_push(r, cur, items->v[i]);
    }
    if (cur && (int64_t)cur->n < k && fill.t != V_NONE)
        while ((int64_t)cur->n < k) tmpl_vl_push(r, cur, fill);
    return tmpl_v_lazy(out, LK_GEN);
}

static val f_capitalize(R *r, val x, args *a) {
    (void)a;
    val s = tmpl_v_to_str(r, x);
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    cap_into(r, &b, s.s.p, s.s.n);
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

static val f_length(R *r, val x, args *a) {
    (void)a;
    return tmpl_v_int((int64_t)tmpl_v_len(r, x));
}

static val f_default(R *r, val x, args *a) {
    val d = kw(a, 0, "default_value", tmpl_v_str("", 0));
    int boolean = tmpl_v_truthy(kw(a, 1, "boolean", tmpl_v_bool(0)));
    if (x.t == V_UNDEF || (boolean && !tmpl_v_truthy(x))) return d;
    return x;
}

static val f_dictsort(R *r, val x, args *a) {
    if (x.t != V_DICT) tmpl_rt_fail(r, "dictsort expects a dict, got '%s'", tmpl_v_typename(x));
    sortctx c = {.case_sensitive = tmpl_v_truthy(kw(a, 0, "case_sensitive", tmpl_v_bool(0)))};
    val by = kw(a, 1, "by", tmpl_v_strz("key"));
    c.by_value = by.t == V_STR && by.s.n == 5 && !memcmp(by.s.p, "value", 5);
    c.reverse = tmpl_v_truthy(kw(a, 2, "reverse", tmpl_v_bool(0)));
    vlist *l = tmpl_vl_new(r, x.d->n);
    for (size_t i = 0; i < x.d->n; i++) {
        vlist *pair = tmpl_vl_new(r, 2);
        pair->v[0] = x.d->k[i];
        pair->v[1] = x.d->v[i];
        pair->n = 2;
        l->v[l->n++] = tmpl_v_tuple(pair);
    }
    tmpl_v_sort(r, l->v, l->n, dictsort_cmp, &c);
    return tmpl_v_list(l);
}

static val f_escape(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_STR && x.safe) return x;
    return tmpl_html_escape(r, tmpl_v_to_str(r, x));
}

static val f_forceescape(R *r, val x, args *a) {
    (void)a;
    return tmpl_html_escape(r, tmpl_v_to_str(r, x));
}

static val f_first(R *r, val x, args *a) {
    (void)a;
    vlist *l = tmpl_v_iter(r, x);
    return l->n ? l->v[0] : tmpl_v_undef(r, "No first item, sequence was empty.");
}

static val f_last(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_LIST && (x.l->kind == LK_GEN || x.l->kind == LK_REVITER))
        tmpl_rt_fail(r, "'%s' object is not reversible", tmpl_v_typename(x));
    vlist *l = tmpl_v_iter(r, x);
    return l->n ? l->v[l->n - 1] : tmpl_v_undef(r, "No last item, sequence was empty.");
}

static int parse_num_str(val s, int64_t *iv, double *fv, int *is_int) {
    char buf[128];
    size_t a = 0, b = s.s.n;
    while (a < b && isspace((unsigned char)s.s.p[a])) a++;
    while (b > a && isspace((unsigned char)s.s.p[b - 1])) b--;
    if (b - a == 0 || b - a >= sizeof buf) return 0;
    size_t k = 0;
    for (size_t i = a; i < b; i++)
        if (s.s.p[i] != '_') buf[k++] = s.s.p[i];
    buf[k] = 0;
    char *end;
    long long i = strtoll(buf, &end, 10);
    if (*end == 0) {
        *iv = i;
        *is_int = 1;
        return 1;
    }
    double f = strtod(buf, &end);
    if (*end == 0) {
        *fv = f;
        *is_int = 0;
        return 1;
    }
    return 0;
}

static val f_float(R *r, val x, args *a) {
    val d = kw(a, 0, "default", tmpl_v_float(0.0));
    if (x.t == V_FLOAT) return x;
    if (x.t == V_INT || x.t == V_BOOL) return tmpl_v_float((double)x.i);
    if (x.t == V_STR) {
        int64_t i;
        double f;
        int is_int;
        if (parse_num_str(x, &i, &f, &is_int)) return tmpl_v_float(is_int ? (double)i : f);
    }
    (void)r;
    return d;
}

static val f_int(R *r, val x, args *a) {
    val d = kw(a, 0, "default", tmpl_v_int(0));
    int64_t base = need_int(r, kw(a, 1, "base", tmpl_v_int(10)), "int");
    if (x.t == V_INT || x.t == V_BOOL) return tmpl_v_int(x.i);
    if (x.t == V_FLOAT) return isfinite(x.f) ? tmpl_v_int((int64_t)x.f) : d;
    if (x.t == V_STR) {
        if (base != 10) {
            char buf[128];
            if (x.s.n >= sizeof buf) return d;
            memcpy(buf, x.s.p, x.s.n);
            buf[x.s.n] = 0;
            char *end;
            long long v = strtoll(buf, &end, (int)base);
            return (*end == 0 && end != buf) ? tmpl_v_int(v) : d;
        }
        int64_t i;
        double f;
        int is_int;
        if (parse_num_str(x, &i, &f, &is_int)) return is_int ? tmpl_v_int(i) : (isfinite(f) ? tmpl_v_int((int64_t)f) : d);
    }
    return d;
}

static val f_format(R *r, val x, args *a) { return py_percent(r, x, a); }

static val f_indent(R *r, val x, args *a) {
    val w = kw(a, 0, "width", tmpl_v_int(4));
    int first = tmpl_v_truthy(kw(a, 1, "first", tmpl_v_bool(0)));
    int blank = tmpl_v_truthy(kw(a, 2, "blank", tmpl_v_bool(0)));
    sbuf ind;
    tmpl_sb_init(&ind, &r->a);
    if (w.t == V_STR) tmpl_sb_put(&ind, w.s.p, w.s.n);
    else
        for (int64_t i = need_int(r, w, "indent"); i > 0; i--) tmpl_sb_putc(&ind, ' ');
    val s = tmpl_v_to_str(r, x);
    sbuf t;
    tmpl_sb_init(&t, &r->a);
    tmpl_sb_put(&t, s.s.p, s.s.n);
    tmpl_sb_putc(&t, '\n'); /* jinja2 appends a newline so that splitlines keeps a trailing empty line */
    vlist *lines = py_splitlines(r, tmpl_v_str(t.p, t.n));
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    if (first) tmpl_sb_put(&b, ind.p, ind.n);
    for (size_t i = 0; i < lines->n; i++) {
        val ln = lines->v[i];
        if (i) {
            tmpl_sb_putc(&b, '\n');
            if (blank || ln.s.n) tmpl_sb_put(&b, ind.p, ind.n);
        }
        tmpl_sb_put(&b, ln.s.p, ln.s.n);
    }
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

static vlist *item_pairs(R *r, val x);
static val f_items(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_UNDEF) return tmpl_v_lazy(tmpl_vl_new(r, 0), LK_GEN);
    if (x.t != V_DICT && x.t != V_NS) tmpl_rt_fail(r, "Can only get item pairs from a mapping.");
    return tmpl_v_lazy(item_pairs(r, x), LK_GEN);
}

static vlist *item_pairs(R *r, val x) {
    vlist *l = tmpl_vl_new(r, x.d->n);
    for (size_t i = 0; i < x.d->n; i++) {
        vlist *pair = tmpl_vl_new(r, 2);
        pair->v[0] = x.d->k[i];
        pair->v[1] = x.d->v[i];
        pair->n = 2;
        l->v[l->n++] = tmpl_v_tuple(pair);
    }
    return l;
}

static val f_join(R *r, val x, args *a) {
    val sep = tmpl_v_to_str(r, kw(a, 0, "d", tmpl_v_str("", 0)));
    val attr = kw(a, 1, "attribute", tmpl_v_none());
    vlist *l = tmpl_v_iter(r, x);
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    for (size_t i = 0; i < l->n; i++) {
        if (i) tmpl_sb_put(&b, sep.s.p, sep.s.n);
        val v = l->v[i];
        if (attr.t != V_NONE) v = attr_path(r, v, attr, (val){.t = V_UNDEF});
        tmpl_v_str_to(r, &b, v);
    }
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

static val f_list(R *r, val x, args *a) {
    (void)a;
    return tmpl_v_list(copy_list(r, tmpl_v_iter(r, x)));
}

static val f_lower(R *r, val x, args *a) {
    (void)a;
    return map_case(r, tmpl_v_to_str(r, x), 0);
}

static val f_upper(R *r, val x, args *a) {
    (void)a;
    return map_case(r, tmpl_v_to_str(r, x), 1);
}

/* map(attribute=..., default=...) or map('filter', args...) */
static val f_map(R *r, val x, args *a) {
    if (!tmpl_v_truthy(x)) return tmpl_v_lazy(tmpl_vl_new(r, 0), LK_GEN); /* jinja2: `if value:` before iterating */
    vlist *l = tmpl_v_iter(r, x), *out = tmpl_vl_new(r, l->n);
    val attr;
    if (tmpl_arg_get(a, -1, "attribute", &attr)) {
        val d = kw(a, -1, "default", (val){.t = V_UNDEF});
        for (size_t i = 0; i < l->n; i++) out->v[out->n++] = attr_path(r, l->v[i], attr, d);
        return tmpl_v_lazy(out, LK_GEN);
    }
    if (a->n < 1 || a->v[0].t != V_STR) tmpl_rt_fail(r, "map: expects a filter name or attribute=");
    char *name = tmpl_arena_strndup(&r->a, a->v[0].s.p, a->v[0].s.n);
    int id = tmpl_filter_find(name);
    if (id < 0) tmpl_rt_fail(r, "map: unknown filter '%s'", name);
    args sub = {a->n - 1, a->v + 1, a->nk, a->kn, a->kv};
    for (size_t i = 0; i < l->n; i++) out->v[out->n++] = tmpl_filter_call(r, id, l->v[i], &sub);
    return tmpl_v_lazy(out, LK_GEN);
}

static val minmax(R *r, val x, args *a, int want_max) {
    sortctx c = {.case_sensitive = tmpl_v_truthy(kw(a, 0, "case_sensitive", tmpl_v_bool(0)))};
    c.attr = kw(a, 1, "attribute", tmpl_v_none());
    vlist *l = tmpl_v_iter(r, x);
    if (!l->n) return tmpl_v_undef(r, "No aggregated item, sequence was empty.");
    val best = l->v[0];
    for (size_t i = 1; i < l->n; i++) {
        int k = sort_cmp(r, &l->v[i], &best, &c);
        if (want_max ? k > 0 : k < 0) best = l->v[i];
    }
    return best;
}
static val f_max(R *r, val x, args *a) { return minmax(r, x, a, 1); }
static val f_min(R *r, val x, args *a) { return minmax(r, x, a, 0); }

/* select/reject(test, args...) and selectattr/rejectattr(attr, test, args...) */
static val select_impl(R *r, val x, args *a, int by_attr, int keep) {
    if (!tmpl_v_truthy(x)) return tmpl_v_lazy(tmpl_vl_new(r, 0), LK_GEN); /* jinja2: `if value:` before iterating */
    vlist *l = tmpl_v_iter(r, x), *out = tmpl_vl_new(r, 0);
    int off = 0;
    val attr = {.t = V_UNDEF};
    if (by_attr) {
        if (a->n < 1) tmpl_rt_fail(r, "%s: missing attribute", keep ? "selectattr" : "rejectattr");
        attr = a->v[0];
        off = 1;
    }
    int id = -1;
    if (a->n > off) {
        if (a->v[off].t != V_STR) tmpl_rt_fail(r, "select: the test name must be a string");
        char *name = tmpl_arena_strndup(&r->a, a->v[off].s.p, a->v[off].s.n);
        id = tmpl_test_find(name);
        if (id < 0) tmpl_rt_fail(r, "no test named '%s'", name);
    }
    args sub = {a->n > off + 1 ? a->n - off - 1 : 0, a->v + (a->n > off + 1 ? off + 1 : a->n), a->nk, a->kn, a->kv};
    for (size_t i = 0; i < l->n; i++) {
        val v = by_attr ? attr_path(r, l->v[i], attr, (val){.t = V_UNDEF}) : l->v[i];
        int t = id >= 0 ? tmpl_test_call(r, id, v, &sub) : tmpl_v_truthy(v);
        if (t == keep) tmpl_vl_push(r, out, l->v[i]);
    }
    return tmpl_v_lazy(out, LK_GEN);
}
static val f_select(R *r, val x, args *a) { return select_impl(r, x, a, 0, 1); }
static val f_reject(R *r, val x, args *a) { return select_impl(r, x, a, 0, 0); }
static val f_selectattr(R *r, val x, args *a) { return select_impl(r, x, a, 1, 1); }
static val f_rejectattr(R *r, val x, args *a) { return select_impl(r, x, a, 1, 0); }

static val f_replace(R *r, val x, args *a) {
    val old, nw;
    if (!tmpl_arg_get(a, 0, "old", &old) || !tmpl_arg_get(a, 1, "new", &nw)) tmpl_rt_fail(r, "replace: expects (old, new)");
    val count = kw(a, 2, "count", tmpl_v_none());
    return py_replace(r, tmpl_v_to_str(r, x), tmpl_v_to_str(r, old), nw, count.t == V_NONE ? -1 : need_int(r, count, "replace"));
}

static val f_reverse(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_STR) {
        vlist *chars = tmpl_v_iter(r, x);
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        for (size_t i = chars->n; i-- > 0;) tmpl_sb_put(&b, chars->v[i].s.p, chars->v[i].s.n);
        return tmpl_v_str(b.p ? b.p : "", b.n);
    }
    vlist *l = tmpl_v_iter(r, x), *out = tmpl_vl_new(r, l->n);
    for (size_t i = l->n; i-- > 0;) out->v[out->n++] = l->v[i];
    return tmpl_v_lazy(out, LK_REVITER);
}

static val f_round(R *r, val x, args *a) {
    int64_t prec = need_int(r, kw(a, 0, "precision", tmpl_v_int(0)), "round");
    val m = kw(a, 1, "method", tmpl_v_strz("common"));
    if (!tmpl_v_is_num(x)) tmpl_rt_fail(r, "round: expects a number, got '%s'", tmpl_v_typename(x));
    double f = tmpl_v_num(x), p = pow(10.0, (double)prec);
    if (m.t == V_STR && m.s.n == 4 && !memcmp(m.s.p, "ceil", 4)) return tmpl_v_float(ceil(f * p) / p);
    if (m.t == V_STR && m.s.n == 5 && !memcmp(m.s.p, "floor", 5)) return tmpl_v_float(floor(f * p) / p);
    if (x.t != V_FLOAT) return tmpl_v_float(f); /* round(int, n) */
    /* Python's round: correctly rounded half-to-even on the decimal value. */
    char buf[64];
    if (prec >= 0 && prec < 30) {
        snprintf(buf, sizeof buf, "%.*f", (int)prec, f); /* glibc rounds the exact binary value half-to-even */
        return tmpl_v_float(strtod(buf, NULL));
    }
    return tmpl_v_float(nearbyint(f * p) / p);
}

static val f_safe(R *r, val x, args *a) {
    (void)a;
    val s = tmpl_v_to_str(r, x);
    s.safe = 1;
    return s;
}

static val f_sort(R *r, val x, args *a) {
    sortctx c = {0};
    c.reverse = tmpl_v_truthy(kw(a, 0, "reverse", tmpl_v_bool(0)));
    c.case_sensitive = tmpl_v_truthy(kw(a, 1, "case_sensitive", tmpl_v_bool(0)));
    c.attr = kw(a, 2, "attribute", tmpl_v_none());
    vlist *l = copy_list(r, tmpl_v_iter(r, x));
    tmpl_v_sort(r, l->v, l->n, sort_cmp, &c);
    return tmpl_v_list(l);
}

static val f_string(R *r, val x, args *a) {
    (void)a;
    return tmpl_v_to_str(r, x);
}

static val f_sum(R *r, val x, args *a) {
    val attr = kw(a, 0, "attribute", tmpl_v_none());
    val acc = kw(a, 1, "start", tmpl_v_int(0));
    vlist *l = tmpl_v_iter(r, x);
    for (size_t i = 0; i < l->n; i++) {
        val v = attr.t != V_NONE ? attr_path(r, l->v[i], attr, (val){.t = V_UNDEF}) : l->v[i];
        if (!tmpl_v_is_num(v) || !tmpl_v_is_num(acc)) tmpl_rt_fail(r, "sum: unsupported operand types '%s' and '%s'", tmpl_v_typename(acc), tmpl_v_typename(v));
        if (acc.t != V_FLOAT && v.t != V_FLOAT) acc = tmpl_v_int(acc.i + v.i);
        else acc = tmpl_v_float(tmpl_v_num(acc) + tmpl_v_num(v));
    }
    return acc;
}

/* jinja2's title: split on runs of [-\s({[<], capitalize every piece. */
static val f_title(R *r, val x, args *a) {
    (void)a;
    val s = tmpl_v_to_str(r, x);
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    size_t i = 0;
    while (i < s.s.n) {
        size_t j = i, adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + i, s.s.n - i, &adv);
        int sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_pyspace(cp);
        while (j < s.s.n) {
            uint32_t c2 = tmpl_u8_dec(s.s.p + j, s.s.n - j, &adv);
            int sep2 = c2 == '-' || c2 == '(' || c2 == '{' || c2 == '[' || c2 == '<' || is_pyspace(c2);
            if (sep2 != sep) break;
            j += adv;
        }
        if (sep) tmpl_sb_put(&b, s.s.p + i, j - i);
        else cap_into(r, &b, s.s.p + i, j - i);
        i = j;
    }
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
static val f_tojson(R *r, val x, args *a) {
    int ensure_ascii = tmpl_v_truthy(kw(a, -1, "ensure_ascii", tmpl_v_bool(0)));
    val ind = kw(a, 0, "indent", tmpl_v_none());
    val seps = kw(a, -1, "separators", tmpl_v_none());
    int sort_keys = tmpl_v_truthy(kw(a, -1, "sort_keys", tmpl_v_bool(0)));
    const char *indent = NULL, *item_sep = NULL, *key_sep = NULL;
    if (ind.t == V_INT || ind.t == V_BOOL) {
        char *s = tmpl_arena_alloc(&r->a, (size_t)(ind.i > 0 ? ind.i : 0) + 1);
        int64_t k;
        for (k = 0; k < ind.i && k < 1000; k++) s[k] = ' ';
        s[k] = 0;
        indent = s;
    } else if (ind.t == V_STR) indent = tmpl_arena_strndup(&r->a, ind.s.p, ind.s.n);
    else if (ind.t != V_NONE) tmpl_rt_fail(r, "tojson: indent must be an int or a string");
    if (seps.t == V_LIST || seps.t == V_TUPLE) {
        if (seps.l->n != 2 || seps.l->v[0].t != V_STR || seps.l->v[1].t != V_STR)
            tmpl_rt_fail(r, "tojson: separators must be a pair of strings");
        item_sep = tmpl_arena_strndup(&r->a, seps.l->v[0].s.p, seps.l->v[0].s.n);
        key_sep = tmpl_arena_strndup(&r->a, seps.l->v[1].s.p, seps.l->v[1].s.n);
    }
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    tmpl_v_tojson(r, &b, x, indent, item_sep, key_sep, sort_keys, ensure_ascii);
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

static val f_trim(R *r, val x, args *a) {
    return py_strip(r, tmpl_v_to_str(r, x), kw(a, 0, "chars", tmpl_v_none()), 1, 1);
}

static val f_unique(R *r, val x, args *a) {
    int cs = tmpl_v_truthy(kw(a, 0, "case_sensitive", tmpl_v_bool(0)));
    val attr = kw(a, 1, "attribute", tmpl_v_none());
    vlist *l = tmpl_v_iter(r, x), *out = tmpl_vl_new(r, 0), *seen = tmpl_vl_new(r, 0);
    for (size_t i = 0; i < l->n; i++) {
        val k = attr.t != V_NONE ? attr_path(r, l->v[i], attr, (val){.t = V_UNDEF}) : l->v[i];
        k = lower_if_str(r, k, cs);
        int dup = 0;
        for (size_t j = 0; j < seen->n && !dup; j++) dup = tmpl_v_eq(seen->v[j], k);
        if (!dup) {
            tmpl_vl_push(r, seen, k);
            tmpl_vl_push(r, out, l->v[i]);
        }
    }
    return tmpl_v_lazy(out, LK_GEN);
}

static val f_wordcount(R *r, val x, args *a) {
    (void)a;
    val s = tmpl_v_to_str(r, x);
    int64_t n = 0;
    int in_word = 0;
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s.s.p + i, s.s.n - i, &adv);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        int w = cp == '_' || (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
                (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) || c == UTF8PROC_CATEGORY_MN ||
                c == UTF8PROC_CATEGORY_MC;
        if (w && !in_word) n++;
        in_word = w;
        i += adv;
    }
    return tmpl_v_int(n);
}

static val f_center(R *r, val x, args *a) {
    int64_t width = need_int(r, kw(a, 0, "width", tmpl_v_int(80)), "center");
    val s = tmpl_v_to_str(r, x);
    int64_t len = (int64_t)tmpl_u8_len(s.s.p, s.s.n);
    if (len >= width) return s;
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    for (int64_t i = 0; i < left; i++) tmpl_sb_putc(&b, ' ');
    tmpl_sb_put(&b, s.s.p, s.s.n);
    for (int64_t i = 0; i < pad - left; i++) tmpl_sb_putc(&b, ' ');
    return tmpl_v_str(b.p, b.n);
}

static val f_pprint(R *r, val x, args *a) {
    (void)a;
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    tmpl_v_repr_to(r, &b, x);
    return tmpl_v_str(b.p ? b.p : "", b.n);
}

static const struct {
    const char *name;
    filter_fn fn;
} FILTERS[] = {
    {"abs", f_abs},         {"batch", f_batch},       {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length},    {"d", f_default},         {"default", f_default},       {"dictsort", f_dictsort},
    {"e", f_escape},        {"escape", f_escape},     {"first", f_first},           {"float", f_float},
    {"forceescape", f_forceescape}, {"format", f_format},  {"indent", f_indent},         {"int", f_int},
    {"items", f_items},     {"join", f_join},         {"last", f_last},             {"length", f_length},
    {"list", f_list},       {"lower", f_lower},       {"map", f_map},               {"max", f_max},
    {"min", f_min},         {"pprint", f_pprint},     {"reject", f_reject},         {"rejectattr", f_rejectattr},
    {"replace", f_replace}, {"reverse", f_reverse},   {"round", f_round},           {"safe", f_safe},
    {"select", f_select},   {"selectattr", f_selectattr}, {"sort", f_sort},         {"string", f_string},
    {"sum", f_sum},         {"title", f_title},       {"tojson", f_tojson},         {"trim", f_trim},
    {"unique", f_unique},   {"upper", f_upper},       {"wordcount", f_wordcount},
};
enum { N_FILTERS = sizeof FILTERS / sizeof FILTERS[0] };

int tmpl_filter_find(const char *name) {
    for (int i = 0; i < N_FILTERS; i++)
        if (!strcmp(FILTERS[i].name, name)) return i;
    return -1;
}

val tmpl_filter_call(R *r, int id, val x, args *a) {
    HEARTH_ASSERT(id >= 0 && id < N_FILTERS);
    return FILTERS[id].fn(r, x, a);
}

/* ================================================================ tests */

typedef int (*test_fn)(R *r, val x, args *a);

static val arg0(R *r, args *a, const char *test) {
    val v;
    if (!tmpl_arg_get(a, 0, NULL, &v)) tmpl_rt_fail(r, "test '%s' needs an argument", test);
    return v;
}

static int t_boolean(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_BOOL; }
static int t_callable(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_MACRO || x.t == V_FUNC; }
static int t_defined(R *r, val x, args *a) { (void)r, (void)a; return x.t != V_UNDEF; }
static int t_undefined(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_UNDEF; }
static int t_none(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_NONE; }
static int t_true(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_BOOL && x.i; }
static int t_false(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_BOOL && !x.i; }
static int t_string(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_STR; }
static int t_mapping(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_DICT; }
static int t_number(R *r, val x, args *a) { (void)r, (void)a; return tmpl_v_is_num(x); }
static int t_integer(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_INT; }
static int t_float(R *r, val x, args *a) { (void)r, (void)a; return x.t == V_FLOAT; }
static int t_escaped(R *r, val x, args *a) { (void)r, (void)x, (void)a; return 0; }
static int t_iterable(R *r, val x, args *a) {
    (void)r, (void)a;
    return x.t == V_STR || x.t == V_LIST || x.t == V_TUPLE || x.t == V_DICT || x.t == V_UNDEF;
}
static int t_sequence(R *r, val x, args *a) {
    (void)r, (void)a;
    if (x.t == V_LIST && (x.l->kind == LK_GEN || x.l->kind == LK_REVITER)) return 0;
    return x.t == V_STR || x.t == V_LIST || x.t == V_TUPLE || x.t == V_DICT || x.t == V_UNDEF;
}
static int t_odd(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_FLOAT) return fmod(fabs(x.f), 2.0) == 1.0;
    return need_int(r, x, "odd") % 2 != 0;
}
static int t_even(R *r, val x, args *a) {
    (void)a;
    if (x.t == V_FLOAT) return fmod(x.f, 2.0) == 0.0;
    return need_int(r, x, "even") % 2 == 0;
}
static int t_divisibleby(R *r, val x, args *a) {
    val d = arg0(r, a, "divisibleby");
    if (tmpl_v_is_num(x) && tmpl_v_is_num(d) && x.t != V_FLOAT && d.t != V_FLOAT) {
        if (d.i == 0) tmpl_rt_fail(r, "integer division or modulo by zero");
        return x.i % d.i == 0;
    }
    if (tmpl_v_is_num(x) && tmpl_v_is_num(d)) {
        if (tmpl_v_num(d) == 0) tmpl_rt_fail(r, "float modulo");
        return fmod(tmpl_v_num(x), tmpl_v_num(d)) == 0;
    }
    tmpl_rt_fail(r, "divisibleby: expects numbers");
}
static int t_eq(R *r, val x, args *a) { return tmpl_v_eq(x, arg0(r, a, "eq")); }
static int t_ne(R *r, val x, args *a) { return !tmpl_v_eq(x, arg0(r, a, "ne")); }
static int t_lt(R *r, val x, args *a) { return tmpl_v_cmp(r, x, arg0(r, a, "lt")) < 0; }
static int t_le(R *r, val x, args *a) { return tmpl_v_cmp(r, x, arg0(r, a, "le")) <= 0; }
static int t_gt(R *r, val x, args *a) { return tmpl_v_cmp(r, x, arg0(r, a, "gt")) > 0; }
static int t_ge(R *r, val x, args *a) { return tmpl_v_cmp(r, x, arg0(r, a, "ge")) >= 0; }
static int t_in(R *r, val x, args *a) {
    val seq = arg0(r, a, "in");
    if (seq.t == V_STR) {
        need_str(r, x, "in");
        return memfind(seq.s.p, seq.s.n, x.s.p, x.s.n) != NULL;
    }
    if (seq.t == V_DICT) return tmpl_vd_get(seq.d, x) != NULL;
    vlist *l = tmpl_v_iter(r, seq);
    for (size_t i = 0; i < l->n; i++)
        if (tmpl_v_eq(l->v[i], x)) return 1;
    return 0;
}
static int t_sameas(R *r, val x, args *a) {
    val y = arg0(r, a, "sameas");
    if (x.t != y.t) return 0;
    switch ((vtype)x.t) {
    case V_NONE:
    case V_UNDEF: return 1;
    case V_BOOL:
    case V_INT: return x.i == y.i;
    case V_FLOAT: return x.f == y.f;
    case V_STR: return x.s.p == y.s.p && x.s.n == y.s.n;
    default: return x.l == y.l;
    }
}
static int case_test(R *r, val x, int upper) {
    if (x.t != V_STR) return 0;
    int cased = 0;
    for (size_t i = 0; i < x.s.n;) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(x.s.p + i, x.s.n - i, &adv);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) {
            if (!upper) return 0;
            cased = 1;
        } else if (c == UTF8PROC_CATEGORY_LL) {
            if (upper) return 0;
            cased = 1;
        }
        i += adv;
    }
    (void)r;
    return cased;
}
static int t_lower(R *r, val x, args *a) { (void)a; return case_test(r, x, 0); }
static int t_upper(R *r, val x, args *a) { (void)a; return case_test(r, x, 1); }
static int t_filter(R *r, val x, args *a) {
    (void)a;
    return x.t == V_STR && tmpl_filter_find(tmpl_arena_strndup(&r->a, x.s.p, x.s.n)) >= 0;
}
static int t_test(R *r, val x, args *a) {
    (void)a;
    return x.t == V_STR && tmpl_test_find(tmpl_arena_strndup(&r->a, x.s.p, x.s.n)) >= 0;
}

static const struct {
    const char *name;
    test_fn fn;
} TESTS[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},   {"divisibleby", t_divisibleby},
    {"eq", t_eq},           {"equalto", t_eq},        {"==", t_eq},             {"escaped", t_escaped},
    {"even", t_even},       {"false", t_false},       {"filter", t_filter},     {"float", t_float},
    {"ge", t_ge},           {">=", t_ge},             {"gt", t_gt},             {">", t_gt},
    {"greaterthan", t_gt},  {"in", t_in},             {"integer", t_integer},   {"iterable", t_iterable},
    {"le", t_le},           {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
    {"<", t_lt},            {"lessthan", t_lt},       {"mapping", t_mapping},   {"ne", t_ne},
    {"!=", t_ne},           {"none", t_none},         {"number", t_number},     {"odd", t_odd},
    {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
    {"true", t_true},       {"undefined", t_undefined}, {"upper", t_upper},
};
enum { N_TESTS = sizeof TESTS / sizeof TESTS[0] };

int tmpl_test_find(const char *name) {
    for (int i = 0; i < N_TESTS; i++)
        if (!strcmp(TESTS[i].name, name)) return i;
    return -1;
}

int tmpl_test_call(R *r, int id, val x, args *a) {
    HEARTH_ASSERT(id >= 0 && id < N_TESTS);
    return TESTS[id].fn(r, x, a);
}

/* ================================================================ methods and globals */

enum {
    /* globals */
    G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME,
    /* str */
    S_STARTSWITH, S_ENDSWITH, S_STRIP, S_LSTRIP, S_RSTRIP, S_SPLIT, S_RSPLIT, S_UPPER, S_LOWER, S_TITLE,
    S_CAPITALIZE, S_REPLACE, S_FORMAT, S_JOIN, S_FIND, S_RFIND, S_COUNT, S_ISDIGIT, S_ISALPHA, S_ISALNUM,
    S_ISSPACE, S_ISLOWER, S_ISUPPER, S_SPLITLINES, S_REMOVEPREFIX, S_REMOVESUFFIX, S_INDEX, S_ZFILL,
    /* dict */
    D_GET, D_ITEMS, D_KEYS, D_VALUES,
    /* list */
    L_INDEX, L_COUNT,
    /* loop */
    LP_CYCLE, LP_CHANGED,
};

static val mkfunc(R *r, int id, val self) {
    vfunc *f = tmpl_arena_alloc(&r->a, sizeof *f);
    f->id = id;
    f->self = self;
    return (val){.t = V_FUNC, .fn = f};
}

val tmpl_global(R *r, const char *name) {
    static const struct {
        const char *name;
        int id;
    } G[] = {{"range", G_RANGE}, {"namespace", G_NAMESPACE}, {"dict", G_DICT},
             {"raise_exception", G_RAISE}, {"strftime_now", G_STRFTIME}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
        if (!strcmp(G[i].name, name)) return mkfunc(r, G[i].id, tmpl_v_none());
    return (val){.t = V_UNDEF};
}

static const char *const UNSAFE_LIST[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort", NULL};
static const char *const UNSAFE_DICT[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};

val tmpl_method(R *r, val obj, const char *name) {
    static const struct {
        const char *name;
        int id;
    } SM[] = {{"startswith", S_STARTSWITH}, {"endswith", S_ENDSWITH}, {"strip", S_STRIP}, {"lstrip", S_LSTRIP},
              {"rstrip", S_RSTRIP}, {"split", S_SPLIT}, {"rsplit", S_RSPLIT}, {"upper", S_UPPER},
              {"lower", S_LOWER}, {"title", S_TITLE}, {"capitalize", S_CAPITALIZE}, {"replace", S_REPLACE},
              {"format", S_FORMAT}, {"join", S_JOIN}, {"find", S_FIND}, {"rfind", S_RFIND}, {"count", S_COUNT},
              {"isdigit", S_ISDIGIT}, {"isalpha", S_ISALPHA}, {"isalnum", S_ISALNUM}, {"isspace", S_ISSPACE},
              {"islower", S_ISLOWER}, {"isupper", S_ISUPPER}, {"splitlines", S_SPLITLINES},
              {"removeprefix", S_REMOVEPREFIX}, {"removesuffix", S_REMOVESUFFIX}, {"index", S_INDEX},
              {"zfill", S_ZFILL}};
    switch ((vtype)obj.t) {
    case V_STR:
        for (size_t i = 0; i < sizeof SM / sizeof SM[0]; i++)
            if (!strcmp(SM[i].name, name)) return mkfunc(r, SM[i].id, obj);
        break;
    case V_DICT:
        if (!strcmp(name, "get")) return mkfunc(r, D_GET, obj);
        if (!strcmp(name, "items")) return mkfunc(r, D_ITEMS, obj);
        if (!strcmp(name, "keys")) return mkfunc(r, D_KEYS, obj);
        if (!strcmp(name, "values")) return mkfunc(r, D_VALUES, obj);
        for (int i = 0; UNSAFE_DICT[i]; i++)
            if (!strcmp(UNSAFE_DICT[i], name))
                return tmpl_v_undef(r, "access to attribute '%s' of 'dict' object is unsafe.", name);
        break;
    case V_LIST:
    case V_TUPLE:
        if (!strcmp(name, "index")) return mkfunc(r, L_INDEX, obj);
        if (!strcmp(name, "count")) return mkfunc(r, L_COUNT, obj);
        if (obj.t == V_LIST)
            for (int i = 0; UNSAFE_LIST[i]; i++)
                if (!strcmp(UNSAFE_LIST[i], name))
                    return tmpl_v_undef(r, "access to attribute '%s' of 'list' object is unsafe.", name);
        break;
    case V_LOOP:
        if (!strcmp(name, "cycle")) return mkfunc(r, LP_CYCLE, obj);
        if (!strcmp(name, "changed")) return mkfunc(r, LP_CHANGED, obj);
        return tmpl_v_undef(r, "'LoopContext object' has no attribute '%s'", name);
    default: break;
    }
    return (val){.t = V_UNDEF};
}

static val strftime_now(R *r, val fmt) {
    need_str(r, fmt, "strftime_now");
    struct tm tm;
    time_t now;
    if (r->t->now >= 0) {
        now = (time_t)r->t->now;
        gmtime_r(&now, &tm);
    } else {
        now = time(NULL);
        localtime_r(&now, &tm);
    }
    char *f = tmpl_arena_strndup(&r->a, fmt.s.p, fmt.s.n);
    if (!*f) return tmpl_v_str("", 0);
    size_t cap = 256 + fmt.s.n * 8;
    char *out = tmpl_arena_alloc(&r->a, cap);
    size_t k = strftime(out, cap, f, &tm);
    if (k == 0) tmpl_rt_fail(r, "strftime_now: cannot format '%s'", f);
    return tmpl_v_str(out, k);
}

static int64_t find_sub(val s, val sub, int from_right) {
    if (sub.s.n > s.s.n) return -1;
    if (!from_right) {
        const char *f = memfind(s.s.p, s.s.n, sub.s.p, sub.s.n);
        return f ? (int64_t)tmpl_u8_len(s.s.p, (size_t)(f - s.s.p)) : -1;
    }
    for (size_t i = s.s.n - sub.s.n + 1; i-- > 0;)
        if (!memcmp(s.s.p + i, sub.s.p, sub.s.n)) return (int64_t)tmpl_u8_len(s.s.p, i);
    return -1;
}

static int str_all(val s, int (*pred)(uint32_t)) {
    if (!s.s.n) return 0;
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        if (!pred(tmpl_u8_dec(s.s.p + i, s.s.n - i, &adv))) return 0;
        i += adv;
    }
    return 1;
}
static int p_digit(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_ND; }
static int p_alpha(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static int p_alnum(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return p_alpha(c) || (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}
static int p_space(uint32_t c) { return is_pyspace(c); }

/* startswith/endswith accept a string or a tuple of strings */
static int affix_match(R *r, val s, val p, int ends) {
    if (p.t == V_TUPLE || p.t == V_LIST) {
        for (size_t i = 0; i < p.l->n; i++)
            if (affix_match(r, s, p.l->v[i], ends)) return 1;
        return 0;
    }
    need_str(r, p, ends ? "endswith" : "startswith");
    return ends ? str_ends(s, p) : str_starts(s, p);
}

val tmpl_func_call(R *r, vfunc *fn, args *a) {
    val self = fn->self, x;
    switch (fn->id) {
    case G_RANGE: {
        int64_t start = 0, stop, step = 1;
        if (a->n == 0) tmpl_rt_fail(r, "range expected at least 1 argument, got 0");
        if (a->n == 1) stop = need_int(r, a->v[0], "range");
        else {
            start = need_int(r, a->v[0], "range");
            stop = need_int(r, a->v[1], "range");
            if (a->n > 2) step = need_int(r, a->v[2], "range");
        }
        if (step == 0) tmpl_rt_fail(r, "range() arg 3 must not be zero");
        int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                 : (start > stop ? (start - stop - step - 1) / -step : 0);
        if (count > 100000) tmpl_rt_fail(r, "range too big, maximum size for range is 100000");
        vlist *l = tmpl_vl_new(r, (size_t)count);
        for (int64_t i = 0; i < count; i++) l->v[l->n++] = tmpl_v_int(start + i * step);
        return tmpl_v_list(l);
    }
    case G_NAMESPACE:
    case G_DICT: {
        vdict *d = tmpl_vd_new(r, 0);
        for (int i = 0; i < a->n; i++) {
            if (a->v[i].t == V_DICT || a->v[i].t == V_NS) {
                for (size_t j = 0; j < a->v[i].d->n; j++) tmpl_vd_set(r, d, a->v[i].d->k[j], a->v[i].d->v[j]);
            } else if (a->v[i].t == V_LIST || a->v[i].t == V_TUPLE) {
                vlist *l = a->v[i].l;
                for (size_t j = 0; j < l->n; j++) {
                    vlist *pair = tmpl_v_iter(r, l->v[j]);
                    if (pair->n != 2) tmpl_rt_fail(r, "dictionary update sequence element #%zu has length %zu; 2 is required", j, pair->n);
                    tmpl_vd_set(r, d, pair->v[0], pair->v[1]);
                }
            } else tmpl_rt_fail(r, "%s: cannot convert '%s' to a dict", fn->id == G_DICT ? "dict" : "namespace", tmpl_v_typename(a->v[i]));
        }
        for (int i = 0; i < a->nk; i++) {
            if (fn->id == G_NAMESPACE && a->kn[i][0] == '_')
                tmpl_rt_fail(r, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'.", a->kn[i]);
            tmpl_vd_set(r, d, tmpl_v_strz(a->kn[i]), a->kv[i]);
        }
        return fn->id == G_DICT ? tmpl_v_dict(d) : (val){.t = V_NS, .d = d};
    }
    case G_RAISE: {
        val msg = kw(a, 0, "message", tmpl_v_str("", 0));
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        tmpl_v_str_to(r, &b, msg);
        tmpl_rt_fail(r, "raise_exception: %s", b.p ? b.p : "");
    }
    case G_STRFTIME:
        if (!tmpl_arg_get(a, 0, "format", &x)) tmpl_rt_fail(r, "strftime_now() needs a format");
        return strftime_now(r, x);
    case S_STARTSWITH:
    case S_ENDSWITH:
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "%s() takes at least 1 argument", fn->id == S_STARTSWITH ? "startswith" : "endswith");
        return tmpl_v_bool(affix_match(r, self, x, fn->id == S_ENDSWITH));
    case S_STRIP: return py_strip(r, self, kw(a, 0, "chars", tmpl_v_none()), 1, 1);
    case S_LSTRIP: return py_strip(r, self, kw(a, 0, "chars", tmpl_v_none()), 1, 0);
    case S_RSTRIP: return py_strip(r, self, kw(a, 0, "chars", tmpl_v_none()), 0, 1);
    case S_SPLIT:
    case S_RSPLIT: {
        val ms = kw(a, 1, "maxsplit", tmpl_v_int(-1));
        return py_split(r, self, kw(a, 0, "sep", tmpl_v_none()), need_int(r, ms, "split"), fn->id == S_RSPLIT);
    }
    case S_UPPER: return map_case(r, self, 1);
    case S_LOWER: return map_case(r, self, 0);
    case S_TITLE: return py_title(r, self);
    case S_CAPITALIZE: return f_capitalize(r, self, a);
    case S_REPLACE: {
        val old, nw;
        if (!tmpl_arg_get(a, 0, NULL, &old) || !tmpl_arg_get(a, 1, NULL, &nw)) tmpl_rt_fail(r, "replace() takes at least 2 arguments");
        need_str(r, nw, "replace");
        val c = kw(a, 2, "count", tmpl_v_int(-1));
        return py_replace(r, self, old, nw, need_int(r, c, "replace"));
    }
    case S_FORMAT: return py_format(r, self, a);
    case S_JOIN: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "join() takes exactly one argument");
        vlist *l = tmpl_v_iter(r, x);
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].t != V_STR) tmpl_rt_fail(r, "sequence item %zu: expected str instance, %s found", i, tmpl_v_typename(l->v[i]));
            if (i) tmpl_sb_put(&b, self.s.p, self.s.n);
            tmpl_sb_put(&b, l->v[i].s.p, l->v[i].s.n);
        }
        return tmpl_v_str(b.p ? b.p : "", b.n);
    }
    case S_FIND:
    case S_RFIND:
    case S_INDEX: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "find() takes at least 1 argument");
        int64_t k = find_sub(self, need_str(r, x, "find"), fn->id == S_RFIND);
        if (k < 0 && fn->id == S_INDEX) tmpl_rt_fail(r, "substring not found");
        return tmpl_v_int(k);
    }
    case S_COUNT: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "count() takes at least 1 argument");
        need_str(r, x, "count");
        if (x.s.n == 0) return tmpl_v_int((int64_t)tmpl_u8_len(self.s.p, self.s.n) + 1);
        int64_t c = 0;
        for (size_t i = 0; i + x.s.n <= self.s.n;)
            if (!memcmp(self.s.p + i, x.s.p, x.s.n)) {
                c++;
                i += x.s.n;
            } else i++;
        return tmpl_v_int(c);
    }
    case S_ISDIGIT: return tmpl_v_bool(str_all(self, p_digit));
    case S_ISALPHA: return tmpl_v_bool(str_all(self, p_alpha));
    case S_ISALNUM: return tmpl_v_bool(str_all(self, p_alnum));
    case S_ISSPACE: return tmpl_v_bool(str_all(self, p_space));
    case S_ISLOWER: return tmpl_v_bool(case_test(r, self, 0));
    case S_ISUPPER: return tmpl_v_bool(case_test(r, self, 1));
    case S_SPLITLINES: return tmpl_v_list(py_splitlines(r, self));
    case S_REMOVEPREFIX:
    case S_REMOVESUFFIX: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "removeprefix() takes exactly one argument");
        need_str(r, x, "removeprefix");
        if (fn->id == S_REMOVEPREFIX) return str_starts(self, x) ? tmpl_v_str(self.s.p + x.s.n, self.s.n - x.s.n) : self;
        return str_ends(self, x) ? tmpl_v_str(self.s.p, self.s.n - x.s.n) : self;
    }
    case S_ZFILL: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "zfill() takes exactly one argument");
        int64_t w = need_int(r, x, "zfill"), len = (int64_t)tmpl_u8_len(self.s.p, self.s.n);
        if (len >= w) return self;
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        size_t start = 0;
        if (self.s.n && (self.s.p[0] == '-' || self.s.p[0] == '+')) {
            tmpl_sb_putc(&b, self.s.p[0]);
            start = 1;
        }
        for (int64_t i = 0; i < w - len; i++) tmpl_sb_putc(&b, '0');
        tmpl_sb_put(&b, self.s.p + start, self.s.n - start);
        return tmpl_v_str(b.p, b.n);
    }
    case D_GET: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "get expected at least 1 argument, got 0");
        val *v = tmpl_vd_get(self.d, x);
        return v ? *v : kw(a, 1, NULL, tmpl_v_none());
    }
    case D_ITEMS: return tmpl_v_lazy(item_pairs(r, self), LK_ITEMS);
    case D_KEYS:
    case D_VALUES: {
        vlist *l = tmpl_vl_new(r, self.d->n);
        for (size_t i = 0; i < self.d->n; i++) l->v[l->n++] = fn->id == D_KEYS ? self.d->k[i] : self.d->v[i];
        return tmpl_v_lazy(l, fn->id == D_KEYS ? LK_KEYS : LK_VALUES);
    }
    case L_INDEX:
    case L_COUNT: {
        if (!tmpl_arg_get(a, 0, NULL, &x)) tmpl_rt_fail(r, "%s() takes exactly one argument", fn->id == L_INDEX ? "index" : "count");
        int64_t c = 0;
        for (size_t i = 0; i < self.l->n; i++)
            if (tmpl_v_eq(self.l->v[i], x)) {
                if (fn->id == L_INDEX) return tmpl_v_int((int64_t)i);
                c++;
            }
        if (fn->id == L_INDEX) tmpl_rt_fail(r, "list.index(x): x not in list");
        return tmpl_v_int(c);
    }
    case LP_CYCLE:
        if (a->n == 0) tmpl_rt_fail(r, "no items for cycling given");
        return a->v[self.loop->i % (size_t)a->n];
    case LP_CHANGED: {
        vlist *l = tmpl_vl_new(r, (size_t)a->n);
        for (int i = 0; i < a->n; i++) l->v[l->n++] = a->v[i];
        val now = tmpl_v_tuple(l);
        vloop *lp = self.loop;
        if (lp->changed_set && tmpl_v_eq(lp->changed_last, now)) return tmpl_v_bool(0);
        lp->changed_last = now;
        lp->changed_set = 1;
        return tmpl_v_bool(1);
    }
    }
    tmpl_rt_fail(r, "internal error: unknown builtin %d", fn->id);
}
