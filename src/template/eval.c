/* eval.c - the tree-walking interpreter: expressions, statements, scopes,
 * macros and loops, with jinja2's semantics.
 *
 * Scopes (what jinja2 does, checked against it): a for loop runs each
 * iteration in a fresh frame whose parent is the frame around the loop, so a
 * `set` inside a loop is gone at the next iteration and after the loop (hence
 * namespace()); `if` makes no frame; a macro runs in a frame whose parent is
 * the frame it was defined in, read live at call time.
 *
 * Entry points hearth_tmpl_parse/render/free live here too. */
#include "template/tmpl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVAL_DEPTH 400

_Noreturn void tmpl_rt_fail(R *r, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hearth_err_set(r->err, HEARTH_EINVAL, "template line %d: %s", r->line, msg);
    longjmp(r->jb, 1);
}

static void enter(R *r) {
    if (++r->depth > MAX_EVAL_DEPTH) tmpl_rt_fail(r, "recursion too deep (more than %d levels)", MAX_EVAL_DEPTH);
}
static void leave(R *r) { r->depth--; }

/* ---------------------------------------------------------------- scopes */

static frame *frame_new(R *r, frame *parent) {
    frame *f = tmpl_arena_alloc(&r->a, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(R *r, frame *f, const char *name, val v) {
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        f->names = tmpl_arena_grow(&r->a, f->names, f->n * sizeof *f->names, cap * sizeof *f->names);
        f->vals = tmpl_arena_grow(&r->a, f->vals, f->n * sizeof *f->vals, cap * sizeof *f->vals);
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
}

static val lookup(R *r, const char *name) {
    for (frame *f = r->f; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name)) return f->vals[i];
    val *g = tmpl_vd_gets(r->globals, name, strlen(name));
    if (g) return *g;
    val b = tmpl_global(r, name);
    if (b.t != V_UNDEF) return b;
    return tmpl_v_undef(r, "'%s' is undefined", name);
}

/* ---------------------------------------------------------------- attribute / item */

static val loop_attr(R *r, vloop *l, const char *name) {
    size_t n = l->items->n, i = l->i;
    if (!strcmp(name, "index")) return tmpl_v_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return tmpl_v_int((int64_t)i);
    if (!strcmp(name, "revindex")) return tmpl_v_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return tmpl_v_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return tmpl_v_bool(i == 0);
    if (!strcmp(name, "last")) return tmpl_v_bool(i + 1 == n);
    if (!strcmp(name, "length")) return tmpl_v_int((int64_t)n);
    if (!strcmp(name, "depth")) return tmpl_v_int(1);
    if (!strcmp(name, "depth0")) return tmpl_v_int(0);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->v[i - 1] : tmpl_v_undef(r, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->v[i + 1] : tmpl_v_undef(r, "there is no next item");
    return tmpl_method(r, (val){.t = V_LOOP, .loop = l}, name);
}

val tmpl_getattr(R *r, val obj, const char *name, size_t n) {
    switch ((vtype)obj.t) {
    case V_UNDEF: tmpl_rt_fail(r, "%.*s", (int)obj.s.n, obj.s.p);
    case V_DICT: {
        val m = tmpl_method(r, obj, name);
        if (m.t != V_UNDEF) return m;
        val *v = tmpl_vd_gets(obj.d, name, n);
        if (v) return *v;
        return tmpl_v_undef(r, "'dict object' has no attribute '%s'", name);
    }
    case V_NS: {
        val *v = tmpl_vd_gets(obj.d, name, n);
        if (v) return *v;
        return tmpl_v_undef(r, "'Namespace object' has no attribute '%s'", name);
    }
    case V_LOOP: return loop_attr(r, obj.loop, name);
    default: {
        val m = tmpl_method(r, obj, name);
        if (m.t != V_UNDEF) return m;
        if (obj.t == V_NONE) return tmpl_v_undef(r, "'None' has no attribute '%s'", name);
        return tmpl_v_undef(r, "'%s object' has no attribute '%s'", tmpl_v_typename(obj), name);
    }
    }
}

/* Python slice indices for a sequence of length n. */
static void slice_bounds(R *r, val start, val stop, val step, int64_t n, int64_t *lo, int64_t *hi, int64_t *st) {
    int64_t s = 1;
    if (step.t != V_NONE && step.t != V_UNDEF) {
        if (step.t != V_INT && step.t != V_BOOL) tmpl_rt_fail(r, "slice indices must be integers or None");
        s = step.i;
        if (s == 0) tmpl_rt_fail(r, "slice step cannot be zero");
    }
    int64_t a, b;
    if (start.t == V_NONE || start.t == V_UNDEF) a = s > 0 ? 0 : n - 1;
    else {
        if (start.t != V_INT && start.t != V_BOOL) tmpl_rt_fail(r, "slice indices must be integers or None");
        a = start.i;
        if (a < 0) a += n;
        if (a < 0) a = s > 0 ? 0 : -1;
        if (a >= n) a = s > 0 ? n : n - 1;
    }
    if (stop.t == V_NONE || stop.t == V_UNDEF) b = s > 0 ? n : -1;
    else {
        if (stop.t != V_INT && stop.t != V_BOOL) tmpl_rt_fail(r, "slice indices must be integers or None");
        b = stop.i;
        if (b < 0) b += n;
        if (b < 0) b = s > 0 ? 0 : -1;
        if (b >= n) b = s > 0 ? n : n - 1;
    }
    *lo = a;
    *hi = b;
    *st = s;
}

static val do_slice(R *r, val obj, val start, val stop, val step) {
    int64_t lo, hi, st;
    if (obj.t == V_LIST && obj.l->kind != LK_LIST)
        return tmpl_v_undef(r, "'%s object' is not subscriptable", tmpl_v_typename(obj));
    if (obj.t == V_LIST || obj.t == V_TUPLE) {
        slice_bounds(r, start, stop, step, (int64_t)obj.l->n, &lo, &hi, &st);
        vlist *l = tmpl_vl_new(r, 0);
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) tmpl_vl_push(r, l, obj.l->v[i]);
        return obj.t == V_LIST ? tmpl_v_list(l) : tmpl_v_tuple(l);
    }
    if (obj.t == V_STR) {
        vlist *chars = tmpl_v_iter(r, obj);
        slice_bounds(r, start, stop, step, (int64_t)chars->n, &lo, &hi, &st);
        if (st == 1) { /* a contiguous byte range */
            if (hi <= lo) return tmpl_v_str("", 0);
            const char *a = chars->v[lo].s.p, *b = chars->v[hi - 1].s.p + chars->v[hi - 1].s.n;
            return tmpl_v_str(a, (size_t)(b - a));
        }
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) tmpl_sb_put(&b, chars->v[i].s.p, chars->v[i].s.n);
        return tmpl_v_str(b.p, b.n);
    }
    if (obj.t == V_UNDEF) tmpl_rt_fail(r, "%.*s", (int)obj.s.n, obj.s.p);
    tmpl_rt_fail(r, "'%s' object is not subscriptable", tmpl_v_typename(obj));
}

val tmpl_getitem(R *r, val obj, val key) {
    switch ((vtype)obj.t) {
    case V_UNDEF: tmpl_rt_fail(r, "%.*s", (int)obj.s.n, obj.s.p);
    case V_LIST:
    case V_TUPLE:
    case V_STR:
        if (obj.t == V_LIST && obj.l->kind != LK_LIST)
            return tmpl_v_undef(r, "'%s object' has no attribute or element", tmpl_v_typename(obj));
        if (key.t == V_INT || key.t == V_BOOL) {
            int64_t n = obj.t == V_STR ? (int64_t)tmpl_u8_len(obj.s.p, obj.s.n) : (int64_t)obj.l->n;
            int64_t i = key.i < 0 ? key.i + n : key.i;
            if (i < 0 || i >= n) {
                sbuf b;
                tmpl_sb_init(&b, &r->a);
                tmpl_v_repr_to(r, &b, obj);
                if (b.n > 60) b.n = 60, b.p[60] = 0;
                return tmpl_v_undef(r, "%s has no element %lld", b.p, (long long)key.i);
            }
            if (obj.t != V_STR) return obj.l->v[i];
            size_t off = tmpl_u8_off(obj.s.p, obj.s.n, (size_t)i), adv;
            tmpl_u8_dec(obj.s.p + off, obj.s.n - off, &adv);
            return tmpl_v_str(obj.s.p + off, adv);
        }
        if (key.t == V_STR) return tmpl_getattr(r, obj, key.s.p, key.s.n);
        return tmpl_v_undef(r, "'%s object' has no element", tmpl_v_typename(obj));
    case V_DICT:
    case V_NS: {
        val *v = tmpl_vd_get(obj.d, key);
        if (v) return *v;
        if (key.t == V_STR && obj.t == V_DICT) {
            val m = tmpl_method(r, obj, tmpl_arena_strndup(&r->a, key.s.p, key.s.n));
            if (m.t != V_UNDEF) return m;
        }
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        tmpl_v_str_to(r, &b, key);
        return tmpl_v_undef(r, "'dict object' has no attribute '%s'", b.p ? b.p : "");
    }
    case V_LOOP:
        if (key.t == V_STR) return loop_attr(r, obj.loop, tmpl_arena_strndup(&r->a, key.s.p, key.s.n));
        /* fallthrough */
    default:
        return tmpl_v_undef(r, "'%s object' has no element", tmpl_v_typename(obj));
    }
}

/* ---------------------------------------------------------------- operators */

static _Noreturn void op_type_error(R *r, const char *op, val a, val b) {
    if (a.t == V_UNDEF) tmpl_rt_fail(r, "%.*s", (int)a.s.n, a.s.p);
    if (b.t == V_UNDEF) tmpl_rt_fail(r, "%.*s", (int)b.s.n, b.s.p);
    if (!strcmp(op, "+") && a.t == V_STR)
        tmpl_rt_fail(r, "can only concatenate str (not \"%s\") to str", tmpl_v_typename(b));
    tmpl_rt_fail(r, "unsupported operand type(s) for %s: '%s' and '%s'", op, tmpl_v_typename(a), tmpl_v_typename(b));
}

static int is_intlike(val v) { return v.t == V_INT || v.t == V_BOOL; }

static val repeat(R *r, val seq, int64_t k) {
    if (seq.t == V_STR) {
        sbuf b;
        tmpl_sb_init(&b, &r->a);
        if (k > 0 && seq.s.n * (size_t)k > (size_t)1 << 30) tmpl_rt_fail(r, "string repetition too large");
        for (int64_t i = 0; i < k; i++) tmpl_sb_put(&b, seq.s.p, seq.s.n);
        return tmpl_v_str(b.p, b.n);
    }
    vlist *l = tmpl_vl_new(r, 0);
    if (k > 0 && seq.l->n * (size_t)k > (size_t)1 << 24) tmpl_rt_fail(r, "list repetition too large");
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < seq.l->n; j++) tmpl_vl_push(r, l, seq.l->v[j]);
    return seq.t == V_LIST ? tmpl_v_list(l) : tmpl_v_tuple(l);
}

static val arith(R *r, int op, val a, val b) {
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OP_CONCAT) {
        sbuf s;
        tmpl_sb_init(&s, &r->a);
        tmpl_v_str_to(r, &s, a);
        tmpl_v_str_to(r, &s, b);
        return tmpl_v_str(s.p, s.n);
    }
    if (tmpl_v_is_num(a) && tmpl_v_is_num(b)) {
        int ints = is_intlike(a) && is_intlike(b);
        double x = tmpl_v_num(a), y = tmpl_v_num(b);
        switch (op) {
        case OP_ADD: return ints ? tmpl_v_int(a.i + b.i) : tmpl_v_float(x + y);
        case OP_SUB: return ints ? tmpl_v_int(a.i - b.i) : tmpl_v_float(x - y);
        case OP_MUL: return ints ? tmpl_v_int(a.i * b.i) : tmpl_v_float(x * y);
        case OP_DIV:
            if (y == 0) tmpl_rt_fail(r, "division by zero");
            return tmpl_v_float(x / y);
        case OP_FLOORDIV:
            if (y == 0) tmpl_rt_fail(r, "integer division or modulo by zero");
            if (ints) {
                int64_t q = a.i / b.i;
                if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0))) q--;
                return tmpl_v_int(q);
            }
            return tmpl_v_float(floor(x / y));
        case OP_MOD:
            if (y == 0) tmpl_rt_fail(r, "integer division or modulo by zero");
            if (ints) {
                int64_t m = a.i % b.i;
                if (m != 0 && ((m < 0) != (b.i < 0))) m += b.i;
                return tmpl_v_int(m);
            } else {
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return tmpl_v_float(m);
            }
        case OP_POW:
            if (ints && b.i >= 0) {
                int64_t res = 1, base = a.i;
                for (int64_t e = b.i; e > 0; e >>= 1) {
                    if (e & 1) res *= base;
                    base *= base;
                }
                return tmpl_v_int(res);
            }
            return tmpl_v_float(pow(x, y));
        }
    }
    if (op == OP_ADD && a.t == V_STR && b.t == V_STR) {
        /* markupsafe: Markup + str escapes the str (and str + Markup too) */
        int safe = a.safe || b.safe;
        if (safe && !a.safe) a = tmpl_html_escape(r, a);
        if (safe && !b.safe) b = tmpl_html_escape(r, b);
        sbuf s;
        tmpl_sb_init(&s, &r->a);
        tmpl_sb_put(&s, a.s.p, a.s.n);
        tmpl_sb_put(&s, b.s.p, b.s.n);
        val res = tmpl_v_str(s.p ? s.p : "", s.n);
        res.safe = (uint8_t)safe;
        return res;
    }
    if (op == OP_ADD && ((a.t == V_LIST && b.t == V_LIST && a.l->kind == LK_LIST && b.l->kind == LK_LIST) ||
                         (a.t == V_TUPLE && b.t == V_TUPLE))) {
        vlist *l = tmpl_vl_new(r, a.l->n + b.l->n);
        for (size_t i = 0; i < a.l->n; i++) l->v[l->n++] = a.l->v[i];
        for (size_t i = 0; i < b.l->n; i++) l->v[l->n++] = b.l->v[i];
        return a.t == V_LIST ? tmpl_v_list(l) : tmpl_v_tuple(l);
    }
    if (op == OP_MUL && !(a.t == V_LIST && a.l->kind) && !(b.t == V_LIST && b.l->kind)) {
        if ((a.t == V_STR || a.t == V_LIST || a.t == V_TUPLE) && is_intlike(b)) return repeat(r, a, b.i);
        if ((b.t == V_STR || b.t == V_LIST || b.t == V_TUPLE) && is_intlike(a)) return repeat(r, b, a.i);
    }
    if (op == OP_MOD && a.t == V_STR) { /* 'fmt' % args: the format filter's printf */
        args ar = {0};
        if (b.t == V_TUPLE) {
            ar.n = (int)b.l->n;
            ar.v = b.l->v;
        } else {
            ar.n = 1;
            ar.v = &b;
        }
        return tmpl_filter_call(r, tmpl_filter_find("format"), a, &ar);
    }
    op_type_error(r, names[op], a, b);
}

static int contains(R *r, val hay, val needle) {
    switch ((vtype)hay.t) {
    case V_UNDEF: return 0;
    case V_STR:
        if (needle.t != V_STR) tmpl_rt_fail(r, "'in <string>' requires string as left operand, not %s", tmpl_v_typename(needle));
        if (needle.s.n == 0) return 1;
        if (needle.s.n > hay.s.n) return 0;
        for (size_t i = 0; i + needle.s.n <= hay.s.n; i++)
            if (!memcmp(hay.s.p + i, needle.s.p, needle.s.n)) return 1;
        return 0;
    case V_LIST:
    case V_TUPLE: {
        vlist *l = tmpl_v_iter(r, hay);
        for (size_t i = 0; i < l->n; i++)
            if (tmpl_v_eq(l->v[i], needle)) return 1;
        return 0;
    }
    case V_DICT:
    case V_NS: return tmpl_vd_get(hay.d, needle) != NULL;
    default: tmpl_rt_fail(r, "argument of type '%s' is not iterable", tmpl_v_typename(hay));
    }
}

/* ---------------------------------------------------------------- calls */

int tmpl_arg_get(args *a, int pos, const char *name, val *out) {
    if (pos >= 0 && pos < a->n) {
        *out = a->v[pos];
        return 1;
    }
    for (int i = 0; name && i < a->nk; i++)
        if (!strcmp(a->kn[i], name)) {
            *out = a->kv[i];
            return 1;
        }
    return 0;
}

static val eval(R *r, const node *n);
static void exec_body(R *r, nlist body);

static void eval_args(R *r, const node *n, args *a) {
    a->n = n->args.n;
    a->v = a->n ? tmpl_arena_alloc(&r->a, (size_t)a->n * sizeof(val)) : NULL;
    for (int i = 0; i < a->n; i++) a->v[i] = eval(r, n->args.v[i]);
    a->nk = n->kwargs.n;
    a->kn = n->kwnames;
    a->kv = a->nk ? tmpl_arena_alloc(&r->a, (size_t)a->nk * sizeof(val)) : NULL;
    for (int i = 0; i < a->nk; i++) a->kv[i] = eval(r, n->kwargs.v[i]);
}

static val call_macro(R *r, vmacro *m, args *a) {
    const node *def = m->def;
    enter(r);
    frame *saved_f = r->f;
    sbuf *saved_out = r->out;
    int saved_line = r->line;
    frame *f = frame_new(r, m->closure);
    int np = def->params.n, nd = def->defaults.n;
    vlist *varargs = tmpl_vl_new(r, 0);
    for (int i = np; i < a->n; i++) tmpl_vl_push(r, varargs, a->v[i]);
    vdict *kwargs = tmpl_vd_new(r, 0);
    r->f = f;
    for (int i = 0; i < np; i++) {
        const char *pname = def->params.v[i]->name;
        val v;
        if (i < a->n) v = a->v[i];
        else if (!tmpl_arg_get(a, -1, pname, &v)) {
            int di = i - (np - nd);
            v = di >= 0 ? eval(r, def->defaults.v[di]) : tmpl_v_undef(r, "parameter '%s' was not provided", pname);
        }
        frame_set(r, f, pname, v);
    }
    for (int i = 0; i < a->nk; i++) {
        int is_param = 0;
        for (int j = 0; j < np; j++) is_param |= !strcmp(def->params.v[j]->name, a->kn[i]);
        if (!is_param) {
            if (!strcmp(a->kn[i], "caller") && def->kind == N_MACRO) continue;
            tmpl_vd_set(r, kwargs, tmpl_v_strz(a->kn[i]), a->kv[i]);
        }
    }
    frame_set(r, f, "varargs", tmpl_v_tuple(varargs));
    frame_set(r, f, "kwargs", tmpl_v_dict(kwargs));
    if (m->caller.t != V_UNDEF) frame_set(r, f, "caller", m->caller);
    sbuf out;
    tmpl_sb_init(&out, &r->a);
    r->out = &out;
    exec_body(r, def->body);
    r->ctrl = 0;
    r->out = saved_out;
    r->f = saved_f;
    r->line = saved_line;
    leave(r);
    return tmpl_v_str(out.p ? out.p : "", out.n);
}

val tmpl_call_value(R *r, val callee, args *a) {
    switch ((vtype)callee.t) {
    case V_MACRO: return call_macro(r, callee.m, a);
    case V_FUNC: return tmpl_func_call(r, callee.fn, a);
    case V_UNDEF: tmpl_rt_fail(r, "%.*s", (int)callee.s.n, callee.s.p);
    default: tmpl_rt_fail(r, "'%s' object is not callable", tmpl_v_typename(callee));
    }
}

/* ---------------------------------------------------------------- expressions */

static val eval_filter_chain(R *r, const node *f, val input) {
    val x = f->a ? eval_filter_chain(r, f->a, input) : input;
    args a;
    eval_args(r, f, &a);
    r->line = f->line;
    if (f->fnid < 0) tmpl_rt_fail(r, "No filter named '%s' found.", f->name);
    return tmpl_filter_call(r, f->fnid, x, &a);
}

static val eval(R *r, const node *n) {
    r->line = n->line;
    enter(r);
    val res;
    switch ((nkind)n->kind) {
    case N_CONST: res = n->v; break;
    case N_NAME: res = lookup(r, n->name); break;
    case N_GETATTR: {
        val obj = eval(r, n->a);
        r->line = n->line;
        res = tmpl_getattr(r, obj, n->name, strlen(n->name));
        break;
    }
    case N_GETITEM: {
        val obj = eval(r, n->a);
        if (n->b->kind == N_SLICE) {
            const node *s = n->b;
            val a = s->a ? eval(r, s->a) : tmpl_v_none(), b = s->b ? eval(r, s->b) : tmpl_v_none(),
                c = s->c ? eval(r, s->c) : tmpl_v_none();
            r->line = n->line;
            res = do_slice(r, obj, a, b, c);
        } else {
            val key = eval(r, n->b);
            r->line = n->line;
            res = tmpl_getitem(r, obj, key);
        }
        break;
    }
    case N_CALL: {
        val callee = eval(r, n->a);
        args a;
        eval_args(r, n, &a);
        r->line = n->line;
        res = tmpl_call_value(r, callee, &a);
        break;
    }
    case N_FILTER: {
        val x = eval(r, n->a);
        args a;
        eval_args(r, n, &a);
        r->line = n->line;
        if (n->fnid < 0) tmpl_rt_fail(r, "No filter named '%s' found.", n->name);
        res = tmpl_filter_call(r, n->fnid, x, &a);
        break;
    }
    case N_TEST: {
        val x = eval(r, n->a);
        args a;
        eval_args(r, n, &a);
        r->line = n->line;
        if (n->fnid < 0) tmpl_rt_fail(r, "No test named '%s' found.", n->name);
        int t = tmpl_test_call(r, n->fnid, x, &a);
        res = tmpl_v_bool(n->op ? !t : t);
        break;
    }
    case N_NEG:
    case N_POS: {
        val x = eval(r, n->a);
        r->line = n->line;
        if (x.t == V_INT || x.t == V_BOOL) res = tmpl_v_int(n->kind == N_NEG ? -x.i : x.i);
        else if (x.t == V_FLOAT) res = tmpl_v_float(n->kind == N_NEG ? -x.f : x.f);
        else if (x.t == V_UNDEF) tmpl_rt_fail(r, "%.*s", (int)x.s.n, x.s.p);
        else tmpl_rt_fail(r, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', tmpl_v_typename(x));
        break;
    }
    case N_NOT: res = tmpl_v_bool(!tmpl_v_truthy(eval(r, n->a))); break;
    case N_AND: {
        val a = eval(r, n->a);
        res = tmpl_v_truthy(a) ? eval(r, n->b) : a;
        break;
    }
    case N_OR: {
        val a = eval(r, n->a);
        res = tmpl_v_truthy(a) ? a : eval(r, n->b);
        break;
    }
    case N_BINOP: {
        val a = eval(r, n->a), b = eval(r, n->b);
        r->line = n->line;
        res = arith(r, n->op, a, b);
        break;
    }
    case N_COMPARE: {
        val left = eval(r, n->a);
        res = tmpl_v_bool(1);
        for (int i = 0; i < n->args.n; i++) {
            val right = eval(r, n->args.v[i]);
            r->line = n->line;
            int ok;
            switch ((cmpop)n->ops[i]) {
            case CMP_EQ: ok = tmpl_v_eq(left, right); break;
            case CMP_NE: ok = !tmpl_v_eq(left, right); break;
            case CMP_LT: ok = tmpl_v_cmp(r, left, right) < 0; break;
            case CMP_LE: ok = tmpl_v_cmp(r, left, right) <= 0; break;
            case CMP_GT: ok = tmpl_v_cmp(r, left, right) > 0; break;
            case CMP_GE: ok = tmpl_v_cmp(r, left, right) >= 0; break;
            case CMP_IN: ok = contains(r, right, left); break;
            default: ok = !contains(r, right, left); break;
            }
            if (!ok) {
                res = tmpl_v_bool(0);
                break;
            }
            left = right;
        }
        break;
    }
    case N_COND:
        if (tmpl_v_truthy(eval(r, n->a))) res = eval(r, n->b);
        else res = n->c ? eval(r, n->c) : tmpl_v_undef(r, "the inline if-expression evaluated to false and no else section was defined");
        break;
    case N_LIST:
    case N_TUPLE: {
        vlist *l = tmpl_vl_new(r, (size_t)n->args.n);
        for (int i = 0; i < n->args.n; i++) l->v[l->n++] = eval(r, n->args.v[i]);
        res = n->kind == N_LIST ? tmpl_v_list(l) : tmpl_v_tuple(l);
        break;
    }
    case N_DICT: {
        vdict *d = tmpl_vd_new(r, (size_t)n->args.n);
        for (int i = 0; i < n->args.n; i++) {
            val k = eval(r, n->args.v[i]);
            if (k.t == V_LIST || k.t == V_DICT || k.t == V_NS) tmpl_rt_fail(r, "unhashable type: '%s'", tmpl_v_typename(k));
            tmpl_vd_set(r, d, k, eval(r, n->kwargs.v[i]));
        }
        res = tmpl_v_dict(d);
        break;
    }
    default: tmpl_rt_fail(r, "internal error: node kind %d is not an expression", n->kind);
    }
    leave(r);
    return res;
}

/* ---------------------------------------------------------------- statements */

static void assign(R *r, const node *target, val v) {
    if (target->kind == N_NAME) {
        frame_set(r, r->f, target->name, v);
        return;
    }
    /* tuple unpacking */
    vlist *items = tmpl_v_iter(r, v);
    int n = target->args.n;
    if ((int)items->n != n)
        tmpl_rt_fail(r, "%s values to unpack (expected %d, got %zu)", (int)items->n > n ? "too many" : "not enough", n,
                items->n);
    for (int i = 0; i < n; i++) frame_set(r, r->f, target->args.v[i]->name, items->v[i]);
}

static void set_ns_attr(R *r, const node *target, val v) {
    val ns = lookup(r, target->a->name);
    if (ns.t != V_NS) tmpl_rt_fail(r, "cannot assign attribute '%s' on non-namespace object '%s'", target->name, target->a->name);
    tmpl_vd_set(r, ns.d, tmpl_v_strz(target->name), v);
}

static val render_body(R *r, nlist body) {
    sbuf *saved = r->out;
    sbuf out;
    tmpl_sb_init(&out, &r->a);
    r->out = &out;
    exec_body(r, body);
    r->out = saved;
    return tmpl_v_str(out.p ? out.p : "", out.n);
}

static void exec_for(R *r, const node *n) {
    val it = eval(r, n->b);
    vlist *items = tmpl_v_iter(r, it);
    frame *outer = r->f;
    if (n->c) { /* `for x in y if cond`: filter first, so loop.length counts what is kept */
        vlist *kept = tmpl_vl_new(r, items->n);
        for (size_t i = 0; i < items->n; i++) {
            r->f = frame_new(r, outer);
            assign(r, n->a, items->v[i]);
            if (tmpl_v_truthy(eval(r, n->c))) kept->v[kept->n++] = items->v[i];
        }
        r->f = outer;
        items = kept;
    }
    vloop *lp = tmpl_arena_alloc(&r->a, sizeof *lp);
    memset(lp, 0, sizeof *lp);
    lp->items = items;
    for (size_t i = 0; i < items->n; i++) {
        lp->i = i;
        r->f = frame_new(r, outer);
        frame_set(r, r->f, "loop", (val){.t = V_LOOP, .loop = lp});
        r->line = n->line;
        assign(r, n->a, items->v[i]);
        exec_body(r, n->body);
        int ctrl = r->ctrl;
        r->ctrl = 0;
        if (ctrl == 1) break;
    }
    r->f = outer;
    if (items->n == 0 && n->orelse.n) {
        r->f = frame_new(r, outer);
        exec_body(r, n->orelse);
        r->f = outer;
    }
}

static void exec_stmt(R *r, const node *n) {
    r->line = n->line;
    switch ((nkind)n->kind) {
    case N_DATA: tmpl_sb_put(r->out, n->v.s.p, n->v.s.n); break;
    case N_OUTPUT: {
        val v = eval(r, n->a);
        tmpl_v_str_to(r, r->out, v);
        break;
    }
    case N_IF:
        if (tmpl_v_truthy(eval(r, n->a))) exec_body(r, n->body);
        else exec_body(r, n->orelse);
        break;
    case N_FOR: exec_for(r, n); break;
    case N_SET: assign(r, n->a, eval(r, n->b)); break;
    case N_NSSET: set_ns_attr(r, n->a, eval(r, n->b)); break;
    case N_SETBLOCK: {
        val v = render_body(r, n->body);
        if (n->c) v = eval_filter_chain(r, n->c, v);
        r->line = n->line;
        if (n->a->kind == N_GETATTR) set_ns_attr(r, n->a, v);
        else assign(r, n->a, v);
        break;
    }
    case N_MACRO: {
        vmacro *m = tmpl_arena_alloc(&r->a, sizeof *m);
        m->def = n;
        m->closure = r->f;
        m->caller = (val){.t = V_UNDEF};
        frame_set(r, r->f, n->name, (val){.t = V_MACRO, .m = m});
        break;
    }
    case N_CALLBLOCK: {
        vmacro *caller = tmpl_arena_alloc(&r->a, sizeof *caller);
        caller->def = n;
        caller->closure = r->f;
        caller->caller = (val){.t = V_UNDEF};
        const node *call = n->a;
        val callee = eval(r, call->a);
        args a;
        eval_args(r, call, &a);
        r->line = n->line;
        val res;
        if (callee.t == V_MACRO) {
            vmacro withcaller = *callee.m;
            withcaller.caller = (val){.t = V_MACRO, .m = caller};
            res = call_macro(r, &withcaller, &a);
        } else res = tmpl_call_value(r, callee, &a);
        tmpl_v_str_to(r, r->out, res);
        break;
    }
    case N_FILTERBLOCK: {
        val v = render_body(r, n->body);
        v = eval_filter_chain(r, n->c, v);
        tmpl_v_str_to(r, r->out, v);
        break;
    }
    case N_WITH: {
        frame *outer = r->f;
        frame *f = frame_new(r, outer);
        /* values are evaluated in the outer scope, then bound together */
        val *vals = tmpl_arena_alloc(&r->a, (size_t)(n->kwargs.n + 1) * sizeof(val));
        for (int i = 0; i < n->kwargs.n; i++) vals[i] = eval(r, n->kwargs.v[i]);
        r->f = f;
        for (int i = 0; i < n->args.n; i++) assign(r, n->args.v[i], vals[i]);
        exec_body(r, n->body);
        r->f = outer;
        break;
    }
    case N_GENERATION: exec_body(r, n->body); break;
    case N_BREAK: r->ctrl = 1; break;
    case N_CONTINUE: r->ctrl = 2; break;
    default: tmpl_rt_fail(r, "internal error: node kind %d is not a statement", n->kind);
    }
}

static void exec_body(R *r, nlist body) {
    enter(r);
    for (int i = 0; i < body.n && !r->ctrl; i++) exec_stmt(r, body.v[i]);
    leave(r);
}

/* ---------------------------------------------------------------- entry points */

hearth_status hearth_tmpl_parse(hearth_tmpl **out, const char *src, size_t len, hearth_err *err) {
    *out = NULL;
    if (!src && len) return hearth_err_set(err, HEARTH_EINVAL, "template: NULL source");
    hearth_tmpl *t = calloc(1, sizeof *t);
    if (!t) return hearth_err_set(err, HEARTH_ENOMEM, "template: out of memory");
    t->now = -1;
    hearth_status st = tmpl_parse_src(t, src ? src : "", len, err);
    if (st != HEARTH_OK) {
        hearth_tmpl_free(t);
        return st;
    }
    *out = t;
    return HEARTH_OK;
}

void hearth_tmpl_free(hearth_tmpl *t) {
    if (!t) return;
    tmpl_arena_free_all(&t->a);
    free(t);
}

void hearth_tmpl_set_now(hearth_tmpl *t, int64_t unix_seconds) { t->now = unix_seconds < 0 ? -1 : unix_seconds; }

/* Render with globals built by `build` (called inside the error scope). */
typedef void (*ctx_builder)(R *r, void *ud);

static hearth_status render(const hearth_tmpl *t, ctx_builder build, void *ud, char **out, size_t *len,
                            hearth_err *err) {
    *out = NULL;
    if (len) *len = 0;
    R *r = calloc(1, sizeof *r);
    if (!r) return hearth_err_set(err, HEARTH_ENOMEM, "template: out of memory");
    hearth_err local = {0};
    r->err = err ? err : &local;
    r->err->status = HEARTH_OK;
    r->t = t;
    r->a.jb = &r->jb;
    r->a.err = r->err;
    hearth_status st = HEARTH_OK;
    if (setjmp(r->jb)) {
        st = r->err->status ? r->err->status : HEARTH_EINVAL;
        goto done;
    }
    r->globals = tmpl_vd_new(r, 0);
    build(r, ud);
    r->f = frame_new(r, NULL);
    sbuf o;
    tmpl_sb_init(&o, &r->a);
    r->out = &o;
    exec_body(r, t->body);
    char *s = malloc(o.n + 1);
    if (!s) {
        st = hearth_err_set(r->err, HEARTH_ENOMEM, "template: out of memory for the %zu-byte output", o.n);
        goto done;
    }
    if (o.n) memcpy(s, o.p, o.n);
    s[o.n] = 0;
    *out = s;
    if (len) *len = o.n;
done:
    tmpl_arena_free_all(&r->a);
    free(r);
    return st;
}

static void build_from_json(R *r, void *ud) {
    const json_t *ctx = ud;
    if (!ctx) return;
    if (!json_is_object(ctx)) tmpl_rt_fail(r, "the render context must be a JSON object");
    val v = tmpl_v_from_json(r, ctx);
    r->globals = v.d;
}

hearth_status hearth_tmpl_render(const hearth_tmpl *t, const json_t *context, char **out, size_t *len,
                                 hearth_err *err) {
    return render(t, build_from_json, (void *)context, out, len, err);
}

typedef struct chat_ctx {
    const json_t *messages, *tools, *extra;
    int add_generation_prompt;
    const char *bos, *eos;
} chat_ctx;

static void build_chat(R *r, void *ud) {
    chat_ctx *c = ud;
    vdict *g = r->globals;
    r->line = 0;
    if (!json_is_array(c->messages)) tmpl_rt_fail(r, "messages must be a JSON array");
    vlist *msgs = tmpl_vl_new(r, json_array_size(c->messages));
    static const char *reasoning_keys[] = {"reasoning_content", "thinking", "reasoning"};
    for (size_t i = 0; i < json_array_size(c->messages); i++) {
        const json_t *m = json_array_get(c->messages, i);
        if (!json_is_object(m)) tmpl_rt_fail(r, "messages[%zu] must be a JSON object", i);
        /* transformers drops the keys whose value is None ... */
        vdict *d = tmpl_vd_new(r, json_object_size(m) + 2);
        const json_t *reasoning = NULL;
        for (int k = 0; k < 3 && !reasoning; k++) {
            const json_t *x = json_object_get(m, reasoning_keys[k]);
            if (x && !json_is_null(x)) reasoning = x;
        }
        /* ... and writes {"thinking": r, **message, "reasoning_content": r} */
        if (reasoning) tmpl_vd_set(r, d, tmpl_v_strz("thinking"), tmpl_v_from_json(r, reasoning));
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)m, k, x) {
            if (json_is_null(x)) continue;
            tmpl_vd_set(r, d, tmpl_v_strz(k), tmpl_v_from_json(r, x));
        }
        if (reasoning) tmpl_vd_set(r, d, tmpl_v_strz("reasoning_content"), tmpl_v_from_json(r, reasoning));
        msgs->v[msgs->n++] = tmpl_v_dict(d);
    }
    tmpl_vd_set(r, g, tmpl_v_strz("messages"), tmpl_v_list(msgs));
    tmpl_vd_set(r, g, tmpl_v_strz("tools"), c->tools && !json_is_null(c->tools) ? tmpl_v_from_json(r, c->tools) : tmpl_v_none());
    tmpl_vd_set(r, g, tmpl_v_strz("documents"), tmpl_v_none());
    tmpl_vd_set(r, g, tmpl_v_strz("add_generation_prompt"), tmpl_v_bool(c->add_generation_prompt));
    if (c->bos) tmpl_vd_set(r, g, tmpl_v_strz("bos_token"), tmpl_v_strz(c->bos));
    if (c->eos) tmpl_vd_set(r, g, tmpl_v_strz("eos_token"), tmpl_v_strz(c->eos));
    if (c->extra) {
        if (!json_is_object(c->extra)) tmpl_rt_fail(r, "extra template kwargs must be a JSON object");
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)c->extra, k, x) tmpl_vd_set(r, g, tmpl_v_strz(k), tmpl_v_from_json(r, x));
    }
}

hearth_status hearth_tmpl_render_chat(const hearth_tmpl *t, const json_t *messages, const json_t *tools,
                                      int add_generation_prompt, const char *bos_token, const char *eos_token,
                                      const json_t *extra, char **out, size_t *len, hearth_err *err) {
    chat_ctx c = {messages, tools, extra, add_generation_prompt, bos_token, eos_token};
    return render(t, build_chat, &c, out, len, err);
}
