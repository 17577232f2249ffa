/* tmpl.h - private to template/: the arena, values, AST and interpreter state.
 *
 * Memory: everything a parse makes (tokens, AST, constants) lives in the
 * template's arena; everything a render makes (values, strings, frames, output
 * pieces) lives in the render's arena, freed whole when the render ends. That
 * is why values are plain structs passed by value with no reference counts:
 * lists and dicts are immutable once built (the sandbox forbids mutating them),
 * so sharing is safe, and nothing is freed piecemeal.
 *
 * Errors: parse and render unwind with longjmp to the entry point, which owns
 * the arena and the jmp_buf; nothing else holds resources that could leak. */
#ifndef HEARTH_TEMPLATE_TMPL_H
#define HEARTH_TEMPLATE_TMPL_H

#include "core/status.h"
#include "template/template.h"

#include <setjmp.h>
#include <stdint.h>

/* ---- arena ---- */
typedef struct tmpl_arena_blk tmpl_arena_blk;
typedef struct arena {
    tmpl_arena_blk *head;
    jmp_buf *jb;      /* where to unwind when malloc fails */
    hearth_err *err;
    size_t total;
} arena;

void *tmpl_arena_alloc(arena *a, size_t n);
void *tmpl_arena_grow(arena *a, void *p, size_t old_n, size_t new_n);
char *tmpl_arena_strndup(arena *a, const char *s, size_t n);
void tmpl_arena_free_all(arena *a);

/* ---- growable byte buffer in an arena ---- */
typedef struct sbuf {
    arena *a;
    char *p;
    size_t n, cap;
} sbuf;

void tmpl_sb_init(sbuf *b, arena *a);
void tmpl_sb_put(sbuf *b, const char *s, size_t n);
void tmpl_sb_putc(sbuf *b, char c);
void tmpl_sb_puts(sbuf *b, const char *s);
void tmpl_sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- values ---- */
typedef enum vtype {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_TUPLE, V_DICT,
    V_NS,    /* namespace(): a dict whose attributes may be assigned */
    V_MACRO, /* a macro, or the `caller` of a call block */
    V_FUNC,  /* a builtin global or a bound method */
    V_LOOP,  /* the `loop` variable */
} vtype;

typedef struct node node;
typedef struct frame frame;
typedef struct vlist vlist;
typedef struct vdict vdict;
typedef struct vmacro vmacro;
typedef struct vfunc vfunc;
typedef struct vloop vloop;

typedef struct val {
    uint8_t t;
    uint8_t safe; /* V_STR: a markupsafe.Markup (from |safe or |escape): `+` escapes the other side */
    union {
        int64_t i; /* V_BOOL (0/1), V_INT */
        double f;
        struct { const char *p; size_t n; } s; /* V_STR; V_UNDEF: the message an access to it raises */
        vlist *l;                                  /* V_LIST, V_TUPLE */
        vdict *d;                                  /* V_DICT, V_NS */
        vmacro *m;
        vfunc *fn;
        vloop *loop;
    };
} val;

struct vmacro {
    const node *def; /* N_MACRO, or N_CALLBLOCK for a `caller` */
    frame *closure;  /* the scope it was defined in: its free names resolve there */
    val caller;      /* the caller of a call block, or V_UNDEF */
};
struct vloop {
    vlist *items;
    size_t i;
    val changed_last; /* loop.changed() state */
    int changed_set;
};

/* What Python object a V_LIST stands for. jinja2's map/select/unique/items
 * filters return generators and |reverse an iterator: truthy even when empty,
 * no len(), no subscript (gives Undefined), not JSON serializable, and used up
 * by one iteration. dict.items()/keys()/values() are views: len() and
 * truthiness work, subscripts and tojson do not. */
enum { LK_LIST, LK_GEN, LK_REVITER, LK_ITEMS, LK_KEYS, LK_VALUES };
struct vlist {
    size_t n, cap;
    val *v;
    uint8_t kind;
    uint8_t exhausted; /* LK_GEN / LK_REVITER after one iteration */
};
struct vdict {
    size_t n, cap;
    val *k, *v;
};

/* ---- AST ---- */
typedef enum nkind {
    /* expressions */
    N_CONST, N_NAME, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_NEG, N_POS, N_NOT, N_AND, N_OR, N_BINOP, N_COMPARE, N_COND, N_LIST, N_TUPLE, N_DICT,
    /* statements */
    N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_BREAK, N_CONTINUE, N_WITH, N_GENERATION, N_NSSET,
} nkind;

typedef enum binop { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT } binop;
typedef enum cmpop { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN } cmpop;

typedef struct node node;
typedef struct nlist {
    node **v;
    int n;
} nlist;

/* Fields by kind (unused ones are zero):
 *   N_CONST      v
 *   N_NAME       name
 *   N_GETATTR    a=obj, name
 *   N_GETITEM    a=obj, b=key (may be N_SLICE)
 *   N_SLICE      a=start, b=stop, c=step (each may be NULL)
 *   N_CALL       a=callee, args, kwnames/kwargs
 *   N_FILTER     a=value (NULL in a filter block), name, fnid, args, kwnames/kwargs
 *   N_TEST       a=value, name, fnid, args, kwnames/kwargs, op=negated
 *   N_NEG/POS/NOT a;  N_AND/N_OR a, b;  N_BINOP op, a, b;  N_COND a=test, b=then, c=else (NULL)
 *   N_COMPARE    a=first, args=operands, ops
 *   N_LIST/N_TUPLE args;  N_DICT args=keys, kwargs=values
 *   N_DATA       v (a string)
 *   N_OUTPUT     args (N_DATA or expressions)
 *   N_IF         a=test, body, orelse
 *   N_FOR        a=target (N_NAME or N_TUPLE of N_NAME), b=iterable, c=filter, body, orelse
 *   N_SET        a=target, b=value;  N_NSSET a=N_GETATTR(ns name, attr), b=value
 *   N_SETBLOCK   a=target, c=filter chain (N_FILTER with a at the innermost = NULL), body
 *   N_MACRO      name, params (N_NAME), defaults (aligned to the last params), body
 *   N_CALLBLOCK  a=call expression, params, defaults, body
 *   N_FILTERBLOCK c=filter chain, body
 *   N_WITH       args=targets, kwargs=values, body
 *   N_GENERATION body */
struct node {
    uint8_t kind, op;
    int line;
    int fnid; /* a filter's or test's index in the builtin table */
    node *a, *b, *c;
    nlist args, kwargs, params, defaults, body, orelse;
    const char **kwnames;
    uint8_t *ops;
    const char *name;
    val v;
};

struct hearth_tmpl {
    arena a;
    nlist body;
    int64_t now; /* <0: local time at render */
};

/* Parse src into t->body, allocating in t->a. */
hearth_status tmpl_parse_src(hearth_tmpl *t, const char *src, size_t len, hearth_err *err);

/* ---- interpreter ---- */
typedef struct frame frame;
struct frame {
    frame *parent;
    size_t n, cap;
    const char **names;
    val *vals;
};

typedef struct R {
    arena a;
    jmp_buf jb;
    hearth_err *err;
    const hearth_tmpl *t;
    vdict *globals; /* the context */
    sbuf *out;
    frame *f;  /* the innermost scope */
    int line;
    int depth;
    int ctrl; /* 0, 1 = break, 2 = continue */
} R;

/* Raise a render error at the current line (never returns). */
_Noreturn void tmpl_rt_fail(R *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Arguments of a call, filter or test after evaluation. */
typedef struct args {
    int n;
    val *v;
    int nk;
    const char **kn;
    val *kv;
} args;

/* Builtins (builtins.c). Filters and tests are resolved by name at parse time. */
int tmpl_filter_find(const char *name);
int tmpl_test_find(const char *name);
val tmpl_filter_call(R *r, int id, val x, args *a);
int tmpl_test_call(R *r, int id, val x, args *a);
/* A builtin global (range, namespace, dict, raise_exception, strftime_now,
 * cycler, joiner) or V_UNDEF. */
val tmpl_global(R *r, const char *name);
/* obj.name: a method bound to obj, or V_UNDEF when the type has none. */
val tmpl_method(R *r, val obj, const char *name);
val tmpl_func_call(R *r, vfunc *fn, args *a);
/* A positional-or-keyword argument: 1 and *out set when given. */
int tmpl_arg_get(args *a, int pos, const char *name, val *out);
/* markupsafe.escape of a string: & < > " ' as entities; the result is safe. */
val tmpl_html_escape(R *r, val s);

/* Evaluation helpers shared with builtins (eval.c). */
val tmpl_call_value(R *r, val callee, args *a);
val tmpl_getattr(R *r, val obj, const char *name, size_t n);
val tmpl_getitem(R *r, val obj, val key);

/* ---- value helpers (value.c) ---- */
val tmpl_v_undef(R *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
val tmpl_v_none(void);
val tmpl_v_bool(int b);
val tmpl_v_int(int64_t i);
val tmpl_v_float(double f);
val tmpl_v_str(const char *p, size_t n);
val tmpl_v_strz(const char *p);
val tmpl_v_list(vlist *l);
/* A list standing for a Python generator/iterator/view (LK_*). */
val tmpl_v_lazy(vlist *l, int kind);
val tmpl_v_tuple(vlist *l);
val tmpl_v_dict(vdict *d);

vlist *tmpl_vl_new(R *r, size_t cap);
void tmpl_vl_push(R *r, vlist *l, val v);
vdict *tmpl_vd_new(R *r, size_t cap);
/* Set key to v (replace if present, else append: insertion order kept). */
void tmpl_vd_set(R *r, vdict *d, val k, val v);
/* Pointer to the value of key, or NULL. */
val *tmpl_vd_get(vdict *d, val k);
val *tmpl_vd_gets(vdict *d, const char *k, size_t n);

int tmpl_v_truthy(val v);
int tmpl_v_eq(val a, val b);
/* Python ordering: <0, 0, >0; a type error raises. */
int tmpl_v_cmp(R *r, val a, val b);
int tmpl_v_is_num(val v);
double tmpl_v_num(val v);
const char *tmpl_v_typename(val v);
/* str(v) and repr(v) appended to b. */
void tmpl_v_str_to(R *r, sbuf *b, val v);
void tmpl_v_repr_to(R *r, sbuf *b, val v);
/* str(v) as a value (strings pass through unchanged). */
val tmpl_v_to_str(R *r, val v);
/* Python float repr. buf >= 32 bytes. */
void tmpl_py_float_repr(double f, char *buf);
/* Iterate: a list of items (dict: keys; string: characters). Undefined -> empty;
 * a non-iterable raises. */
vlist *tmpl_v_iter(R *r, val v);
/* len(); raises for values without a length. */
size_t tmpl_v_len(R *r, val v);

/* Stable sort with a comparison that may raise. */
typedef int (*vcmp_fn)(R *r, const val *a, const val *b, void *ctx);
void tmpl_v_sort(R *r, val *v, size_t n, vcmp_fn cmp, void *ctx);

/* JSON in and out. */
val tmpl_v_from_json(R *r, const json_t *j);
/* json.dumps(v, ensure_ascii, indent (<0 none; or an indent string), separators, sort_keys). */
void tmpl_v_tojson(R *r, sbuf *b, val v, const char *indent, const char *item_sep, const char *key_sep,
              int sort_keys, int ensure_ascii);

/* UTF-8 */
size_t tmpl_u8_len(const char *s, size_t n);
/* Byte offset of code point index i (clamped to n). */
size_t tmpl_u8_off(const char *s, size_t n, size_t i);
/* Decode one code point at s (n > 0); *adv gets the byte length. Bad bytes
 * decode as themselves, one byte each. */
uint32_t tmpl_u8_dec(const char *s, size_t n, size_t *adv);
void tmpl_u8_put(sbuf *b, uint32_t cp);

#endif
