/* value.c - the template interpreter's values: arena, string buffer, Python
 * semantics for truthiness, equality, ordering, str() and repr(), and JSON in
 * (jansson -> values) and out (json.dumps as transformers' tojson calls it).
 *
 * Strings are UTF-8 byte slices; Python's code-point indexing and len() are
 * computed on demand (tmpl_u8_len/tmpl_u8_off). */
#include "template/tmpl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---------------------------------------------------------------- arena */

struct tmpl_arena_blk {
    tmpl_arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

static _Noreturn void tmpl_arena_oom(arena *a, size_t n) {
    hearth_err_set(a->err, HEARTH_ENOMEM, "template: out of memory (allocating %zu bytes)", n);
    longjmp(*a->jb, 1);
}

void *tmpl_arena_alloc(arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    tmpl_arena_blk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        tmpl_arena_blk *b = malloc(sizeof *b + cap);
        if (!b) tmpl_arena_oom(a, n);
        b->cap = cap;
        b->used = 0;
        a->total += cap;
        if (h && n > 32768) { /* a big one-off: keep the current block in front */
            b->next = h->next;
            h->next = b;
            b->used = n;
            return b->data;
        }
        b->next = h;
        a->head = h = b;
    }
    void *p = h->data + h->used;
    h->used += n;
    return p;
}

void *tmpl_arena_grow(arena *a, void *p, size_t old_n, size_t new_n) {
    void *q = tmpl_arena_alloc(a, new_n);
    if (old_n) memcpy(q, p, old_n);
    return q;
}

char *tmpl_arena_strndup(arena *a, const char *s, size_t n) {
    char *p = tmpl_arena_alloc(a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void tmpl_arena_free_all(arena *a) {
    tmpl_arena_blk *b = a->head;
    while (b) {
        tmpl_arena_blk *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---------------------------------------------------------------- sbuf */

void tmpl_sb_init(sbuf *b, arena *a) {
    b->a = a;
    b->p = NULL;
    b->n = b->cap = 0;
}

static void tmpl_sb_reserve(sbuf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    b->p = tmpl_arena_grow(b->a, b->p, b->n, cap);
    b->cap = cap;
}

void tmpl_sb_put(sbuf *b, const char *s, size_t n) {
    if (!n) return;
    tmpl_sb_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tmpl_sb_putc(sbuf *b, char c) { tmpl_sb_put(b, &c, 1); }
void tmpl_sb_puts(sbuf *b, const char *s) { tmpl_sb_put(b, s, strlen(s)); }

void tmpl_sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        tmpl_sb_put(b, tmp, (size_t)k);
        return;
    }
    tmpl_sb_reserve(b, (size_t)k);
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* ---------------------------------------------------------------- UTF-8 */

uint32_t tmpl_u8_dec(const char *s, size_t n, size_t *adv) {
    const unsigned char *u = (const unsigned char *)s;
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(u, (utf8proc_ssize_t)n, &cp);
    if (k <= 0) {
        *adv = 1;
        return u[0];
    }
    *adv = (size_t)k;
    return (uint32_t)cp;
}

size_t tmpl_u8_len(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        tmpl_u8_dec(s + i, n - i, &adv);
        i += adv;
        c++;
    }
    return c;
}

size_t tmpl_u8_off(const char *s, size_t n, size_t idx) {
    size_t i = 0;
    while (idx > 0 && i < n) {
        size_t adv;
        tmpl_u8_dec(s + i, n - i, &adv);
        i += adv;
        idx--;
    }
    return i;
}

void tmpl_u8_put(sbuf *b, uint32_t cp) {
    utf8proc_uint8_t tmp[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, tmp);
    if (k <= 0) { /* a lone surrogate: encode it anyway, as Python's surrogatepass would */
        tmp[0] = (utf8proc_uint8_t)(0xE0 | (cp >> 12));
        tmp[1] = (utf8proc_uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (utf8proc_uint8_t)(0x80 | (cp & 0x3F));
        k = 3;
    }
    tmpl_sb_put(b, (const char *)tmp, (size_t)k);
}

/* ---------------------------------------------------------------- constructors */

val tmpl_v_undef(R *r, const char *fmt, ...) {
    val v = {.t = V_UNDEF};
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    tmpl_sb_puts(&b, tmp);
    v.s.p = b.p;
    v.s.n = b.n;
    return v;
}
val tmpl_v_none(void) { return (val){.t = V_NONE}; }
val tmpl_v_bool(int b) { return (val){.t = V_BOOL, .i = b ? 1 : 0}; }
val tmpl_v_int(int64_t i) { return (val){.t = V_INT, .i = i}; }
val tmpl_v_float(double f) { return (val){.t = V_FLOAT, .f = f}; }
val tmpl_v_str(const char *p, size_t n) {
    val v = {.t = V_STR};
    v.s.p = p ? p : "";
    v.s.n = n;
    return v;
}
val tmpl_v_strz(const char *p) { return tmpl_v_str(p, strlen(p)); }
val tmpl_v_list(vlist *l) { return (val){.t = V_LIST, .l = l}; }
val tmpl_v_lazy(vlist *l, int kind) {
    l->kind = (uint8_t)kind;
    return (val){.t = V_LIST, .l = l};
}

static const char *lazy_name(int kind) {
    static const char *names[] = {"list", "generator", "list_reverseiterator", "dict_items", "dict_keys", "dict_values"};
    return names[kind];
}
val tmpl_v_tuple(vlist *l) { return (val){.t = V_TUPLE, .l = l}; }
val tmpl_v_dict(vdict *d) { return (val){.t = V_DICT, .d = d}; }

vlist *tmpl_vl_new(R *r, size_t cap) {
    vlist *l = tmpl_arena_alloc(&r->a, sizeof *l);
    memset(l, 0, sizeof *l);
    l->cap = cap;
    l->v = cap ? tmpl_arena_alloc(&r->a, cap * sizeof(val)) : NULL;
    return l;
}

void tmpl_vl_push(R *r, vlist *l, val v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        l->v = tmpl_arena_grow(&r->a, l->v, l->n * sizeof(val), cap * sizeof(val));
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

vdict *tmpl_vd_new(R *r, size_t cap) {
    vdict *d = tmpl_arena_alloc(&r->a, sizeof *d);
    d->n = 0;
    d->cap = cap;
    d->k = cap ? tmpl_arena_alloc(&r->a, cap * sizeof(val)) : NULL;
    d->v = cap ? tmpl_arena_alloc(&r->a, cap * sizeof(val)) : NULL;
    return d;
}

val *tmpl_vd_get(vdict *d, val k) {
    for (size_t i = 0; i < d->n; i++)
        if (tmpl_v_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

val *tmpl_vd_gets(vdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == V_STR && d->k[i].s.n == n && !memcmp(d->k[i].s.p, k, n)) return &d->v[i];
    return NULL;
}

void tmpl_vd_set(R *r, vdict *d, val k, val v) {
    val *p = tmpl_vd_get(d, k);
    if (p) {
        *p = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        d->k = tmpl_arena_grow(&r->a, d->k, d->n * sizeof(val), cap * sizeof(val));
        d->v = tmpl_arena_grow(&r->a, d->v, d->n * sizeof(val), cap * sizeof(val));
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

/* ---------------------------------------------------------------- semantics */

int tmpl_v_is_num(val v) { return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL; }
double tmpl_v_num(val v) { return v.t == V_FLOAT ? v.f : (double)v.i; }

const char *tmpl_v_typename(val v) {
    switch ((vtype)v.t) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return v.safe ? "Markup" : "str";
    case V_LIST: return lazy_name(v.l->kind);
    case V_TUPLE: return "tuple";
    case V_DICT: return "dict";
    case V_NS: return "Namespace";
    case V_MACRO: return "Macro";
    case V_FUNC: return "function";
    case V_LOOP: return "LoopContext";
    }
    return "object";
}

int tmpl_v_truthy(val v) {
    switch ((vtype)v.t) {
    case V_UNDEF:
    case V_NONE: return 0;
    case V_BOOL:
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0.0;
    case V_STR: return v.s.n != 0;
    case V_LIST:
        if (v.l->kind == LK_GEN || v.l->kind == LK_REVITER) return 1;
        return v.l->n != 0;
    case V_TUPLE: return v.l->n != 0;
    case V_DICT: return v.d->n != 0;
    default: return 1;
    }
}

int tmpl_v_eq(val a, val b) {
    if (tmpl_v_is_num(a) && tmpl_v_is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return a.i == b.i;
        return tmpl_v_num(a) == tmpl_v_num(b);
    }
    if (a.t != b.t) return 0;
    switch ((vtype)a.t) {
    case V_UNDEF:
    case V_NONE: return 1;
    case V_STR: return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    case V_LIST:
    case V_TUPLE:
        if (a.l->kind != b.l->kind) return 0;
        if (a.l->kind == LK_GEN || a.l->kind == LK_REVITER) return a.l == b.l;
        if (a.l->n != b.l->n) return 0;
        for (size_t i = 0; i < a.l->n; i++)
            if (!tmpl_v_eq(a.l->v[i], b.l->v[i])) return 0;
        return 1;
    case V_DICT:
        if (a.d->n != b.d->n) return 0;
        for (size_t i = 0; i < a.d->n; i++) {
            val *o = tmpl_vd_get(b.d, a.d->k[i]);
            if (!o || !tmpl_v_eq(a.d->v[i], *o)) return 0;
        }
        return 1;
    case V_NS: return a.d == b.d;
    case V_MACRO: return a.m == b.m;
    case V_FUNC: return a.fn == b.fn;
    case V_LOOP: return a.loop == b.loop;
    default: return 0;
    }
}

int tmpl_v_cmp(R *r, val a, val b) {
    if (tmpl_v_is_num(a) && tmpl_v_is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return (a.i > b.i) - (a.i < b.i);
        double x = tmpl_v_num(a), y = tmpl_v_num(b);
        return (x > y) - (x < y);
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int c = memcmp(a.s.p, b.s.p, n); /* UTF-8 byte order is code point order */
        if (c) return c < 0 ? -1 : 1;
        return (a.s.n > b.s.n) - (a.s.n < b.s.n);
    }
    if ((a.t == V_LIST && b.t == V_LIST) || (a.t == V_TUPLE && b.t == V_TUPLE)) {
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t i = 0; i < n; i++) {
            if (tmpl_v_eq(a.l->v[i], b.l->v[i])) continue;
            return tmpl_v_cmp(r, a.l->v[i], b.l->v[i]);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    tmpl_rt_fail(r, "'<' not supported between instances of '%s' and '%s'", tmpl_v_typename(a), tmpl_v_typename(b));
}

/* ---------------------------------------------------------------- str / repr */

void tmpl_py_float_repr(double f, char *buf) {
    if (isnan(f)) {
        strcpy(buf, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(buf, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        strcpy(buf, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* The shortest %.*e that reads back as f: Python's repr digits. */
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = 0;
    const char *p = e;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = buf;
    if (neg) *o++ = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

/* Python's str.isprintable() for one code point. */
static int cp_printable(uint32_t cp) {
    if (cp == ' ') return 1;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    switch (c) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

static void str_repr(sbuf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    tmpl_sb_putc(b, q);
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = tmpl_u8_dec(s + i, n - i, &adv);
        if (cp == (uint32_t)q || cp == '\\') {
            tmpl_sb_putc(b, '\\');
            tmpl_sb_putc(b, (char)cp);
        } else if (cp == '\n') tmpl_sb_puts(b, "\\n");
        else if (cp == '\r') tmpl_sb_puts(b, "\\r");
        else if (cp == '\t') tmpl_sb_puts(b, "\\t");
        else if (cp < 0x80 && (cp < 0x20 || cp == 0x7f)) tmpl_sb_printf(b, "\\x%02x", cp);
        else if (cp >= 0x80 && !cp_printable(cp)) {
            if (cp <= 0xff) tmpl_sb_printf(b, "\\x%02x", cp);
            else if (cp <= 0xffff) tmpl_sb_printf(b, "\\u%04x", cp);
            else tmpl_sb_printf(b, "\\U%08x", cp);
        } else tmpl_sb_put(b, s + i, adv);
        i += adv;
    }
    tmpl_sb_putc(b, q);
}

void tmpl_v_repr_to(R *r, sbuf *b, val v) {
    switch ((vtype)v.t) {
    case V_UNDEF: tmpl_sb_puts(b, "Undefined"); return;
    case V_STR: str_repr(b, v.s.p, v.s.n); return;
    case V_LIST:
        if (v.l->kind == LK_GEN || v.l->kind == LK_REVITER) {
            tmpl_sb_printf(b, "<%s object>", lazy_name(v.l->kind));
            return;
        }
        if (v.l->kind != LK_LIST) {
            tmpl_sb_printf(b, "%s(", lazy_name(v.l->kind));
            vlist plain = *v.l;
            plain.kind = LK_LIST;
            tmpl_v_repr_to(r, b, tmpl_v_list(&plain));
            tmpl_sb_putc(b, ')');
            return;
        }
        /* fallthrough */
    case V_TUPLE:
        tmpl_sb_putc(b, v.t == V_LIST ? '[' : '(');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) tmpl_sb_puts(b, ", ");
            if (r->depth > 200) tmpl_rt_fail(r, "value nested too deeply to print");
            r->depth++;
            tmpl_v_repr_to(r, b, v.l->v[i]);
            r->depth--;
        }
        if (v.t == V_TUPLE && v.l->n == 1) tmpl_sb_putc(b, ',');
        tmpl_sb_putc(b, v.t == V_LIST ? ']' : ')');
        return;
    case V_DICT:
    case V_NS:
        if (v.t == V_NS) tmpl_sb_puts(b, "<Namespace ");
        tmpl_sb_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) tmpl_sb_puts(b, ", ");
            if (r->depth > 200) tmpl_rt_fail(r, "value nested too deeply to print");
            r->depth++;
            tmpl_v_repr_to(r, b, v.d->k[i]);
            tmpl_sb_puts(b, ": ");
            tmpl_v_repr_to(r, b, v.d->v[i]);
            r->depth--;
        }
        tmpl_sb_putc(b, '}');
        if (v.t == V_NS) tmpl_sb_putc(b, '>');
        return;
    default: tmpl_v_str_to(r, b, v);
    }
}

void tmpl_v_str_to(R *r, sbuf *b, val v) {
    char tmp[40];
    switch ((vtype)v.t) {
    case V_UNDEF: return;
    case V_NONE: tmpl_sb_puts(b, "None"); return;
    case V_BOOL: tmpl_sb_puts(b, v.i ? "True" : "False"); return;
    case V_INT: tmpl_sb_printf(b, "%lld", (long long)v.i); return;
    case V_FLOAT:
        tmpl_py_float_repr(v.f, tmp);
        tmpl_sb_puts(b, tmp);
        return;
    case V_STR: tmpl_sb_put(b, v.s.p, v.s.n); return;
    case V_LIST:
    case V_TUPLE:
    case V_DICT:
    case V_NS: tmpl_v_repr_to(r, b, v); return;
    case V_MACRO: tmpl_sb_puts(b, "<Macro>"); return;
    case V_FUNC: tmpl_sb_puts(b, "<built-in function>"); return;
    case V_LOOP: tmpl_sb_puts(b, "<LoopContext>"); return;
    }
}

val tmpl_v_to_str(R *r, val v) {
    if (v.t == V_STR) return v;
    sbuf b;
    tmpl_sb_init(&b, &r->a);
    tmpl_v_str_to(r, &b, v);
    return tmpl_v_str(b.p, b.n);
}

/* ---------------------------------------------------------------- iteration */

vlist *tmpl_v_iter(R *r, val v) {
    switch ((vtype)v.t) {
    case V_UNDEF: return tmpl_vl_new(r, 0);
    case V_LIST:
        if (v.l->kind == LK_GEN || v.l->kind == LK_REVITER) { /* one pass, as a Python generator */
            if (v.l->exhausted) return tmpl_vl_new(r, 0);
            v.l->exhausted = 1;
        }
        return v.l;
    case V_TUPLE: return v.l;
    case V_DICT: {
        vlist *l = tmpl_vl_new(r, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) l->v[l->n++] = v.d->k[i];
        return l;
    }
    case V_STR: {
        vlist *l = tmpl_vl_new(r, v.s.n);
        for (size_t i = 0; i < v.s.n;) {
            size_t adv;
            tmpl_u8_dec(v.s.p + i, v.s.n - i, &adv);
            l->v[l->n++] = tmpl_v_str(v.s.p + i, adv);
            i += adv;
        }
        return l;
    }
    default: tmpl_rt_fail(r, "'%s' object is not iterable", tmpl_v_typename(v));
    }
}

size_t tmpl_v_len(R *r, val v) {
    switch ((vtype)v.t) {
    case V_UNDEF: return 0;
    case V_STR: return tmpl_u8_len(v.s.p, v.s.n);
    case V_LIST:
        if (v.l->kind == LK_GEN || v.l->kind == LK_REVITER) break;
        return v.l->n;
    case V_TUPLE: return v.l->n;
    case V_DICT:
    case V_NS: return v.d->n;
    default: break;
    }
    tmpl_rt_fail(r, "object of type '%s' has no len()", tmpl_v_typename(v));
}

/* ---------------------------------------------------------------- JSON */

val tmpl_v_from_json(R *r, const json_t *j) {
    if (!j) return tmpl_v_none();
    switch (json_typeof(j)) {
    case JSON_NULL: return tmpl_v_none();
    case JSON_TRUE: return tmpl_v_bool(1);
    case JSON_FALSE: return tmpl_v_bool(0);
    case JSON_INTEGER: return tmpl_v_int((int64_t)json_integer_value(j));
    case JSON_REAL: return tmpl_v_float(json_real_value(j));
    case JSON_STRING: return tmpl_v_str(json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        vlist *l = tmpl_vl_new(r, n);
        if (++r->depth > 500) tmpl_rt_fail(r, "context JSON nested too deeply");
        for (size_t i = 0; i < n; i++) l->v[l->n++] = tmpl_v_from_json(r, json_array_get(j, i));
        r->depth--;
        return tmpl_v_list(l);
    }
    case JSON_OBJECT: {
        vdict *d = tmpl_vd_new(r, json_object_size(j));
        const char *k;
        json_t *x;
        if (++r->depth > 500) tmpl_rt_fail(r, "context JSON nested too deeply");
        /* JSON keys are unique, so append without the duplicate check. */
        json_object_foreach((json_t *)j, k, x) {
            d->k[d->n] = tmpl_v_strz(k);
            d->v[d->n] = tmpl_v_from_json(r, x);
            d->n++;
        }
        r->depth--;
        return tmpl_v_dict(d);
    }
    }
    return tmpl_v_none();
}

static void json_str(sbuf *b, const char *s, size_t n, int ensure_ascii) {
    tmpl_sb_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') tmpl_sb_puts(b, "\\\"");
        else if (c == '\\') tmpl_sb_puts(b, "\\\\");
        else if (c == '\n') tmpl_sb_puts(b, "\\n");
        else if (c == '\r') tmpl_sb_puts(b, "\\r");
        else if (c == '\t') tmpl_sb_puts(b, "\\t");
        else if (c == '\b') tmpl_sb_puts(b, "\\b");
        else if (c == '\f') tmpl_sb_puts(b, "\\f");
        else if (c < 0x20) tmpl_sb_printf(b, "\\u%04x", c);
        else if (c >= 0x80 && ensure_ascii) {
            size_t adv;
            uint32_t cp = tmpl_u8_dec(s + i, n - i, &adv);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                tmpl_sb_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else tmpl_sb_printf(b, "\\u%04x", cp);
            i += adv;
            continue;
        } else tmpl_sb_putc(b, (char)c);
        i++;
    }
    tmpl_sb_putc(b, '"');
}

typedef struct jopt {
    const char *indent, *item_sep, *key_sep;
    int sort_keys, ensure_ascii;
} jopt;

static void json_nl(sbuf *b, const jopt *o, int level) {
    tmpl_sb_putc(b, '\n');
    for (int i = 0; i < level; i++) tmpl_sb_puts(b, o->indent);
}

void tmpl_v_sort(R *r, val *v, size_t n, vcmp_fn cmp, void *ctx) {
    /* Stable (Python's sort is): a bottom-up merge sort through a scratch copy. */
    if (n < 2) return;
    val *tmp = tmpl_arena_alloc(&r->a, n * sizeof *tmp);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(r, &v[j], &v[i], ctx) < 0 ? v[j++] : v[i++];
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
}

static int key_cmp(R *r, const val *a, const val *b, void *ctx) {
    vdict *d = ctx;
    return tmpl_v_cmp(r, d->k[a->i], d->k[b->i]);
}

static void json_val(R *r, sbuf *b, val v, const jopt *o, int level) {
    char tmp[40];
    if (level > 200) tmpl_rt_fail(r, "tojson: value nested too deeply");
    switch ((vtype)v.t) {
    case V_NONE: tmpl_sb_puts(b, "null"); return;
    case V_BOOL: tmpl_sb_puts(b, v.i ? "true" : "false"); return;
    case V_INT: tmpl_sb_printf(b, "%lld", (long long)v.i); return;
    case V_FLOAT:
        if (isnan(v.f)) tmpl_sb_puts(b, "NaN");
        else if (isinf(v.f)) tmpl_sb_puts(b, v.f < 0 ? "-Infinity" : "Infinity");
        else {
            tmpl_py_float_repr(v.f, tmp);
            tmpl_sb_puts(b, tmp);
        }
        return;
    case V_STR: json_str(b, v.s.p, v.s.n, o->ensure_ascii); return;
    case V_LIST:
        if (v.l->kind != LK_LIST) tmpl_rt_fail(r, "Object of type %s is not JSON serializable", lazy_name(v.l->kind));
        /* fallthrough */
    case V_TUPLE:
        if (v.l->n == 0) {
            tmpl_sb_puts(b, "[]");
            return;
        }
        tmpl_sb_putc(b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) tmpl_sb_puts(b, o->item_sep);
            if (o->indent) json_nl(b, o, level + 1);
            json_val(r, b, v.l->v[i], o, level + 1);
        }
        if (o->indent) json_nl(b, o, level);
        tmpl_sb_putc(b, ']');
        return;
    case V_DICT: {
        if (v.d->n == 0) {
            tmpl_sb_puts(b, "{}");
            return;
        }
        size_t n = v.d->n;
        val *order = tmpl_arena_alloc(&r->a, n * sizeof *order);
        for (size_t i = 0; i < n; i++) order[i] = tmpl_v_int((int64_t)i);
        if (o->sort_keys) tmpl_v_sort(r, order, n, key_cmp, v.d);
        tmpl_sb_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            size_t idx = (size_t)order[i].i;
            val k = v.d->k[idx];
            if (i) tmpl_sb_puts(b, o->item_sep);
            if (o->indent) json_nl(b, o, level + 1);
            if (k.t == V_STR) json_str(b, k.s.p, k.s.n, o->ensure_ascii);
            else if (k.t == V_NONE) tmpl_sb_puts(b, "\"null\"");
            else if (k.t == V_BOOL) tmpl_sb_puts(b, k.i ? "\"true\"" : "\"false\"");
            else if (k.t == V_INT || k.t == V_FLOAT) {
                tmpl_sb_putc(b, '"');
                json_val(r, b, k, o, level + 1);
                tmpl_sb_putc(b, '"');
            } else tmpl_rt_fail(r, "keys must be str, int, float, bool or None, not %s", tmpl_v_typename(k));
            tmpl_sb_puts(b, o->key_sep);
            json_val(r, b, v.d->v[idx], o, level + 1);
        }
        if (o->indent) json_nl(b, o, level);
        tmpl_sb_putc(b, '}');
        return;
    }
    default: tmpl_rt_fail(r, "Object of type %s is not JSON serializable", tmpl_v_typename(v));
    }
}

void tmpl_v_tojson(R *r, sbuf *b, val v, const char *indent, const char *item_sep, const char *key_sep,
              int sort_keys, int ensure_ascii) {
    jopt o = {indent, item_sep, key_sep, sort_keys, ensure_ascii};
    if (!o.item_sep) o.item_sep = indent ? "," : ", ";
    if (!o.key_sep) o.key_sep = ": ";
    json_val(r, b, v, &o, 0);
}
