/* parse.c - template source -> tokens -> AST, following jinja2's lexer and
 * parser (jinja2 3.1) as transformers configures them: trim_blocks,
 * lstrip_blocks, keep_trailing_newline=False, the loopcontrols extension and
 * transformers' {% generation %} tag.
 *
 * Errors unwind with longjmp to tmpl_parse_src; every message starts with
 * "template line N:" and names the construct at fault. Nesting depth is
 * bounded so a hostile template cannot overflow the C stack. */
#include "template/tmpl.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING, TK_INT, TK_FLOAT,
       TK_OP, TK_EOF };

typedef struct tok {
    uint8_t type;
    int line;
    const char *p; /* TK_NAME / TK_OP / TK_DATA / TK_STRING (decoded): text */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct P {
    arena *a;
    jmp_buf jb;
    hearth_err *err;
    const char *src;
    size_t len;
    tok *t;
    size_t nt, cap;
    size_t i; /* current token */
    int depth;
    int loops; /* enclosing for loops (break/continue are valid inside) */
} P;

#define MAX_DEPTH 256

static _Noreturn void pfail(P *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void pfail(P *p, int line, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hearth_err_set(p->err, HEARTH_EFORMAT, "template line %d: %s", line, msg);
    longjmp(p->jb, 1);
}

/* ================================================================ lexer */

static void emit(P *p, int type, int line, const char *s, size_t n) {
    if (p->nt == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        p->t = tmpl_arena_grow(p->a, p->t, p->nt * sizeof(tok), cap * sizeof(tok));
        p->cap = cap;
    }
    tok *t = &p->t[p->nt++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = line;
    t->p = s;
    t->n = n;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Decode a string literal body the way jinja2 does (Python unicode-escape). */
static void lex_string(P *p, tok *t, const char *s, size_t n, int line) {
    sbuf b;
    tmpl_sb_init(&b, p->a);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            tmpl_sb_putc(&b, s[i]);
            continue;
        }
        char c = s[++i];
        switch (c) {
        case '\n': break;
        case '\\': tmpl_sb_putc(&b, '\\'); break;
        case '\'': tmpl_sb_putc(&b, '\''); break;
        case '"': tmpl_sb_putc(&b, '"'); break;
        case 'a': tmpl_sb_putc(&b, '\a'); break;
        case 'b': tmpl_sb_putc(&b, '\b'); break;
        case 'f': tmpl_sb_putc(&b, '\f'); break;
        case 'n': tmpl_sb_putc(&b, '\n'); break;
        case 'r': tmpl_sb_putc(&b, '\r'); break;
        case 't': tmpl_sb_putc(&b, '\t'); break;
        case 'v': tmpl_sb_putc(&b, '\v'); break;
        case 'x':
        case 'u':
        case 'U': {
            int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < nd; k++) {
                if (i + 1 >= n || !isxdigit((unsigned char)s[i + 1]))
                    pfail(p, line, "string literal: truncated \\%c escape", c);
                char h = s[++i];
                cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
            }
            if (cp > 0x10FFFF) pfail(p, line, "string literal: escape \\%c out of range", c);
            tmpl_u8_put(&b, cp);
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                uint32_t cp = (uint32_t)(c - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                tmpl_u8_put(&b, cp);
            } else { /* unknown escapes stay as written */
                tmpl_sb_putc(&b, '\\');
                tmpl_sb_putc(&b, c);
            }
        }
    }
    t->p = b.p ? b.p : "";
    t->n = b.n;
}

static const char *OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
                            "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};

/* Lex the inside of a {{ }} or {% %} tag starting at *pos; emits tokens up to and
 * including the end token. Returns with *pos after the end (and the whitespace
 * control it implies); *line_starting says if what was consumed ended in \n. */
static void lex_tag(P *p, size_t *pos, int *line, int is_block, int open_line, int *line_starting) {
    const char *s = p->src;
    size_t n = p->len, i = *pos;
    char stack[MAX_DEPTH];
    int sp = 0;
    for (;;) {
        if (i >= n) pfail(p, open_line, "unexpected end of template inside a %s tag", is_block ? "{% %}" : "{{ }}");
        /* end of tag (only when no bracket is open, as jinja2's balancing stack) */
        if (sp == 0) {
            const char *end = is_block ? "%}" : "}}";
            int sign = (s[i] == '-' || (is_block && s[i] == '+')) && i + 2 < n + 1 && !strncmp(s + i + 1, end, 2);
            if (sign || !strncmp(s + i, end, 2)) {
                char sg = sign ? s[i] : 0;
                i += sign ? 3 : 2;
                emit(p, is_block ? TK_BLOCK_END : TK_VAR_END, *line, NULL, 0);
                size_t j = i;
                if (sg == '-') {
                    while (j < n && is_ws(s[j])) j++;
                } else if (is_block && sg != '+' && j < n && s[j] == '\n') /* trim_blocks */
                    j++;
                *line += count_nl(s + i, j - i);
                *line_starting = j > 0 && s[j - 1] == '\n';
                *pos = j;
                return;
            }
        }
        char c = s[i];
        if (is_ws(c)) {
            if (c == '\n') (*line)++;
            i++;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            size_t j = i;
            int is_float = 0;
            if (c == '0' && i + 1 < n && strchr("xXoObB", s[i + 1]) && i + 2 < n && isxdigit((unsigned char)s[i + 2])) {
                int base = strchr("xX", s[i + 1]) ? 16 : strchr("oO", s[i + 1]) ? 8 : 2;
                j = i + 2;
                int64_t v = 0;
                while (j < n && (isxdigit((unsigned char)s[j]) || s[j] == '_')) {
                    if (s[j] != '_') {
                        int d = isdigit((unsigned char)s[j]) ? s[j] - '0' : tolower((unsigned char)s[j]) - 'a' + 10;
                        if (d >= base) break;
                        v = v * base + d;
                    }
                    j++;
                }
                emit(p, TK_INT, *line, s + i, j - i);
                p->t[p->nt - 1].i = v;
                i = j;
                continue;
            }
            while (j < n && (isdigit((unsigned char)s[j]) || (s[j] == '_' && j + 1 < n && isdigit((unsigned char)s[j + 1]))))
                j++;
            if (j + 1 < n && s[j] == '.' && isdigit((unsigned char)s[j + 1])) {
                is_float = 1;
                j++;
                while (j < n && (isdigit((unsigned char)s[j]) || (s[j] == '_' && j + 1 < n && isdigit((unsigned char)s[j + 1]))))
                    j++;
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t k = j + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                if (k < n && isdigit((unsigned char)s[k])) {
                    is_float = 1;
                    while (k < n && (isdigit((unsigned char)s[k]) || s[k] == '_')) k++;
                    j = k;
                }
            }
            char num[128];
            size_t m = 0;
            for (size_t k = i; k < j && m + 1 < sizeof num; k++)
                if (s[k] != '_') num[m++] = s[k];
            num[m] = 0;
            emit(p, is_float ? TK_FLOAT : TK_INT, *line, s + i, j - i);
            if (is_float) p->t[p->nt - 1].f = strtod(num, NULL);
            else p->t[p->nt - 1].i = strtoll(num, NULL, 10);
            i = j;
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            size_t j = i;
            while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '_')) j++;
            emit(p, TK_NAME, *line, s + i, j - i);
            i = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != c) j += s[j] == '\\' ? 2 : 1;
            if (j >= n) pfail(p, *line, "unterminated string literal");
            emit(p, TK_STRING, *line, NULL, 0);
            lex_string(p, &p->t[p->nt - 1], s + i + 1, j - i - 1, *line);
            *line += count_nl(s + i, j - i);
            i = j + 1;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
            if (!strncmp(s + i, OPS[k], strlen(OPS[k]))) break;
        if (k == sizeof OPS / sizeof OPS[0]) pfail(p, *line, "unexpected character '%c'", c);
        const char *op = OPS[k];
        if (strchr("([{", op[0]) && op[1] == 0) {
            if (sp >= MAX_DEPTH) pfail(p, *line, "brackets nested too deeply");
            stack[sp++] = op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}';
        } else if (strchr(")]}", op[0]) && op[1] == 0) {
            if (sp == 0) pfail(p, *line, "unexpected '%c'", op[0]);
            if (stack[--sp] != op[0]) pfail(p, *line, "unexpected '%c', expected '%c'", op[0], stack[sp]);
        }
        emit(p, TK_OP, *line, op, strlen(op));
        i += strlen(op);
    }
}

static void lex(P *p) {
    const char *s = p->src;
    size_t n = p->len, pos = 0;
    int line = 1, line_starting = 1;
    while (pos < n) {
        /* the next tag start */
        size_t k = pos;
        const char *hit = NULL;
        while (k + 1 < n) {
            if (s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')) {
                hit = s + k;
                break;
            }
            k++;
        }
        if (!hit) {
            emit(p, TK_DATA, line, s + pos, n - pos);
            break;
        }
        char kind = s[k + 1];
        char sign = (k + 2 < n && (s[k + 2] == '-' || s[k + 2] == '+')) ? s[k + 2] : 0;
        size_t text_end = k;
        /* {% raw %} ... {% endraw %} */
        int raw = 0;
        size_t after = k + 2 + (sign ? 1 : 0);
        if (kind == '%') {
            size_t j = after;
            while (j < n && is_ws(s[j])) j++;
            if (j + 3 <= n && !strncmp(s + j, "raw", 3)) {
                j += 3;
                size_t q = j;
                while (q < n && is_ws(s[q])) q++;
                if (q < n && (s[q] == '-' ? q + 2 < n && !strncmp(s + q + 1, "%}", 2) : !strncmp(s + q, "%}", 2)) &&
                    (q > j || s[q] == '%' || s[q] == '-'))
                    raw = 1;
            }
        }
        /* whitespace control of the text before the tag */
        if (sign == '-') {
            while (text_end > pos && is_ws(s[text_end - 1])) text_end--;
        } else if (sign != '+' && kind != '{') { /* lstrip_blocks */
            size_t l = text_end;
            while (l > pos && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\v' || s[l - 1] == '\f' || s[l - 1] == '\r'))
                l--;
            int at_nl = l > pos && s[l - 1] == '\n';
            if (l < text_end && (at_nl || (l == pos && line_starting))) text_end = l;
        }
        if (text_end > pos) emit(p, TK_DATA, line, s + pos, text_end - pos);
        line += count_nl(s + pos, k - pos);
        int tag_line = line;
        pos = after;
        if (kind == '#') {
            size_t j = pos;
            while (j + 1 < n && !(s[j] == '#' && s[j + 1] == '}')) j++;
            if (j + 1 >= n) pfail(p, tag_line, "missing end of comment tag");
            char esign = (j > pos && (s[j - 1] == '-' || s[j - 1] == '+')) ? s[j - 1] : 0;
            size_t e = j + 2;
            if (esign == '-')
                while (e < n && is_ws(s[e])) e++;
            else if (esign != '+' && e < n && s[e] == '\n')
                e++;
            line += count_nl(s + pos, e - pos);
            line_starting = s[e - 1] == '\n';
            pos = e;
            continue;
        }
        if (raw) {
            /* skip the raw tag itself, then find {%[-+]? endraw [-+]?%} */
            size_t j = pos;
            while (!(s[j] == '%' && s[j + 1] == '}')) j++;
            int minus = s[j - 1] == '-';
            j += 2;
            if (minus)
                while (j < n && is_ws(s[j])) j++;
            line += count_nl(s + pos, j - pos);
            size_t body = j, q = j;
            for (;;) {
                while (q + 1 < n && !(s[q] == '{' && s[q + 1] == '%')) q++;
                if (q + 1 >= n) pfail(p, tag_line, "missing end of raw directive");
                size_t r = q + 2;
                char rs = (r < n && (s[r] == '-' || s[r] == '+')) ? s[r] : 0;
                if (rs) r++;
                while (r < n && is_ws(s[r])) r++;
                if (r + 6 <= n && !strncmp(s + r, "endraw", 6)) {
                    r += 6;
                    while (r < n && is_ws(s[r])) r++;
                    char es = (r < n && (s[r] == '-' || s[r] == '+')) ? s[r] : 0;
                    if (es) r++;
                    if (r + 2 <= n && !strncmp(s + r, "%}", 2)) {
                        size_t te = q;
                        if (rs == '-')
                            while (te > body && is_ws(s[te - 1])) te--;
                        else if (rs != '+') {
                            size_t l = te;
                            while (l > body && (s[l - 1] == ' ' || s[l - 1] == '\t')) l--;
                            if (l < te && l > body && s[l - 1] == '\n') te = l;
                        }
                        if (te > body) emit(p, TK_DATA, line, s + body, te - body);
                        r += 2;
                        if (es == '-')
                            while (r < n && is_ws(s[r])) r++;
                        else if (es != '+' && r < n && s[r] == '\n')
                            r++;
                        line += count_nl(s + body, r - body);
                        line_starting = s[r - 1] == '\n';
                        pos = r;
                        break;
                    }
                }
                q += 2;
            }
            continue;
        }
        emit(p, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, tag_line, NULL, 0);
        lex_tag(p, &pos, &line, kind == '%', tag_line, &line_starting);
    }
    emit(p, TK_EOF, line, NULL, 0);
}

/* ================================================================ parser helpers */

static tok *cur(P *p) { return &p->t[p->i]; }
static tok *peek(P *p, size_t k) { return &p->t[p->i + k < p->nt ? p->i + k : p->nt - 1]; }
static void adv(P *p) {
    if (p->i + 1 < p->nt) p->i++;
}
static int is_op(tok *t, const char *op) { return t->type == TK_OP && t->n == strlen(op) && !memcmp(t->p, op, t->n); }
static int is_name(tok *t, const char *name) {
    return t->type == TK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}

static const char *describe(P *p, tok *t) {
    static const char *names[] = {"template data", "begin of print statement", "end of print statement",
                                  "begin of statement block", "end of statement block", "name", "string",
                                  "integer", "float", "operator", "end of template"};
    if (t->type == TK_NAME || t->type == TK_OP) return tmpl_arena_strndup(p->a, t->p, t->n);
    return names[t->type];
}

static void expect_op(P *p, const char *op) {
    if (!is_op(cur(p), op)) pfail(p, cur(p)->line, "expected '%s', got '%s'", op, describe(p, cur(p)));
    adv(p);
}

static const char *expect_name(P *p) {
    tok *t = cur(p);
    if (t->type != TK_NAME) pfail(p, t->line, "expected a name, got '%s'", describe(p, t));
    adv(p);
    return tmpl_arena_strndup(p->a, t->p, t->n);
}

static void expect_block_end(P *p) {
    if (cur(p)->type != TK_BLOCK_END) pfail(p, cur(p)->line, "expected end of statement block, got '%s'", describe(p, cur(p)));
    adv(p);
}

static node *mk(P *p, int kind, int line) {
    node *n = tmpl_arena_alloc(p->a, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    n->fnid = -1;
    return n;
}

typedef struct nvec {
    node **v;
    int n, cap;
} nvec;

static void nv_push(P *p, nvec *v, node *x) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        v->v = tmpl_arena_grow(p->a, v->v, (size_t)v->n * sizeof(node *), (size_t)cap * sizeof(node *));
        v->cap = cap;
    }
    v->v[v->n++] = x;
}
static nlist nv_done(nvec *v) { return (nlist){v->v, v->n}; }

static void enter(P *p) {
    if (++p->depth > MAX_DEPTH) pfail(p, cur(p)->line, "template nested too deeply (more than %d levels)", MAX_DEPTH);
}
static void leave(P *p) { p->depth--; }

/* ================================================================ expressions */

static node *parse_expr(P *p);
static node *parse_or(P *p);
static node *parse_unary(P *p, int with_filter);
static node *parse_postfix(P *p, node *n);
static node *parse_tuple(P *p, int with_condexpr, const char *extra_end, int explicit_parens);

static node *parse_primary(P *p) {
    tok *t = cur(p);
    node *n;
    enter(p);
    switch (t->type) {
    case TK_NAME:
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            n = mk(p, N_CONST, t->line);
            n->v = tmpl_v_bool(t->p[0] == 't' || t->p[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            n = mk(p, N_CONST, t->line);
            n->v = tmpl_v_none();
        } else {
            n = mk(p, N_NAME, t->line);
            n->name = tmpl_arena_strndup(p->a, t->p, t->n);
        }
        adv(p);
        break;
    case TK_STRING: {
        n = mk(p, N_CONST, t->line);
        sbuf b;
        tmpl_sb_init(&b, p->a);
        while (cur(p)->type == TK_STRING) { /* adjacent literals concatenate */
            tmpl_sb_put(&b, cur(p)->p, cur(p)->n);
            adv(p);
        }
        n->v = tmpl_v_str(b.p ? b.p : "", b.n);
        break;
    }
    case TK_INT:
        n = mk(p, N_CONST, t->line);
        n->v = tmpl_v_int(t->i);
        adv(p);
        break;
    case TK_FLOAT:
        n = mk(p, N_CONST, t->line);
        n->v = tmpl_v_float(t->f);
        adv(p);
        break;
    case TK_OP:
        if (is_op(t, "(")) {
            adv(p);
            n = parse_tuple(p, 1, NULL, 1);
            expect_op(p, ")");
            break;
        }
        if (is_op(t, "[")) {
            adv(p);
            nvec items = {0};
            while (!is_op(cur(p), "]")) {
                if (items.n) expect_op(p, ",");
                if (is_op(cur(p), "]")) break;
                nv_push(p, &items, parse_expr(p));
            }
            expect_op(p, "]");
            n = mk(p, N_LIST, t->line);
            n->args = nv_done(&items);
            break;
        }
        if (is_op(t, "{")) {
            adv(p);
            nvec keys = {0}, vals = {0};
            while (!is_op(cur(p), "}")) {
                if (keys.n) expect_op(p, ",");
                if (is_op(cur(p), "}")) break;
                nv_push(p, &keys, parse_expr(p));
                expect_op(p, ":");
                nv_push(p, &vals, parse_expr(p));
            }
            expect_op(p, "}");
            n = mk(p, N_DICT, t->line);
            n->args = nv_done(&keys);
            n->kwargs = nv_done(&vals);
            break;
        }
        /* fallthrough */
    default: pfail(p, t->line, "unexpected '%s'", describe(p, t));
    }
    leave(p);
    return n;
}

/* ( args ) after the callee; fills args/kwargs/kwnames of n. */
static void parse_call_args(P *p, node *n) {
    expect_op(p, "(");
    nvec args = {0}, kwargs = {0};
    const char **names = NULL;
    int nnames = 0, cap = 0;
    while (!is_op(cur(p), ")")) {
        if (args.n || kwargs.n) {
            expect_op(p, ",");
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            pfail(p, cur(p)->line, "*args and **kwargs in calls are not supported");
        if (cur(p)->type == TK_NAME && is_op(peek(p, 1), "=")) {
            const char *k = expect_name(p);
            adv(p);
            if (nnames == cap) {
                cap = cap ? cap * 2 : 4;
                names = tmpl_arena_grow(p->a, names, (size_t)nnames * sizeof *names, (size_t)cap * sizeof *names);
            }
            names[nnames++] = k;
            nv_push(p, &kwargs, parse_expr(p));
        } else {
            if (kwargs.n) pfail(p, cur(p)->line, "positional argument after keyword argument");
            nv_push(p, &args, parse_expr(p));
        }
    }
    expect_op(p, ")");
    n->args = nv_done(&args);
    n->kwargs = nv_done(&kwargs);
    n->kwnames = names;
}

static const char *parse_dotted(P *p) {
    tok *t = cur(p);
    if (t->type != TK_NAME) pfail(p, t->line, "expected a name, got '%s'", describe(p, t));
    sbuf b;
    tmpl_sb_init(&b, p->a);
    tmpl_sb_put(&b, t->p, t->n);
    adv(p);
    while (is_op(cur(p), ".") && peek(p, 1)->type == TK_NAME) {
        adv(p);
        tmpl_sb_putc(&b, '.');
        tmpl_sb_put(&b, cur(p)->p, cur(p)->n);
        adv(p);
    }
    return b.p;
}

static node *parse_filter(P *p, node *value) {
    int line = cur(p)->line;
    const char *name = parse_dotted(p);
    node *n = mk(p, N_FILTER, line);
    n->a = value;
    n->name = name;
    n->fnid = tmpl_filter_find(name); /* unknown: see check_names */
    if (is_op(cur(p), "(")) parse_call_args(p, n);
    return n;
}

static node *parse_test(P *p, node *value) {
    int line = cur(p)->line;
    adv(p); /* is */
    int neg = 0;
    if (is_name(cur(p), "not")) {
        neg = 1;
        adv(p);
    }
    const char *name = parse_dotted(p);
    node *n = mk(p, N_TEST, line);
    n->a = value;
    n->op = (uint8_t)neg;
    n->name = name;
    n->fnid = tmpl_test_find(name); /* unknown: see check_names */
    tok *t = cur(p);
    if (is_op(t, "(")) parse_call_args(p, n);
    else if ((t->type == TK_NAME || t->type == TK_STRING || t->type == TK_INT || t->type == TK_FLOAT ||
              is_op(t, "[") || is_op(t, "{")) &&
             !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) pfail(p, t->line, "you cannot chain multiple tests with is");
        node *arg = parse_postfix(p, parse_primary(p));
        nvec args = {0};
        nv_push(p, &args, arg);
        n->args = nv_done(&args);
    }
    return n;
}

static node *parse_subscript_item(P *p) {
    int line = cur(p)->line;
    node *parts[3] = {0};
    if (!is_op(cur(p), ":")) {
        node *e = parse_expr(p);
        if (!is_op(cur(p), ":")) return e;
        parts[0] = e;
    }
    adv(p); /* : */
    if (!is_op(cur(p), "]") && !is_op(cur(p), ",") && !is_op(cur(p), ":")) parts[1] = parse_expr(p);
    if (is_op(cur(p), ":")) {
        adv(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ",")) parts[2] = parse_expr(p);
    }
    node *s = mk(p, N_SLICE, line);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static node *parse_postfix(P *p, node *n) {
    for (;;) {
        tok *t = cur(p);
        if (is_op(t, ".")) {
            adv(p);
            tok *a = cur(p);
            if (a->type == TK_NAME) {
                node *g = mk(p, N_GETATTR, t->line);
                g->a = n;
                g->name = tmpl_arena_strndup(p->a, a->p, a->n);
                adv(p);
                n = g;
            } else if (a->type == TK_INT) {
                node *g = mk(p, N_GETITEM, t->line);
                g->a = n;
                g->b = mk(p, N_CONST, t->line);
                g->b->v = tmpl_v_int(a->i);
                adv(p);
                n = g;
            } else pfail(p, a->line, "expected name or number after '.', got '%s'", describe(p, a));
        } else if (is_op(t, "[")) {
            adv(p);
            nvec items = {0};
            while (!is_op(cur(p), "]")) {
                if (items.n) {
                    expect_op(p, ",");
                    if (is_op(cur(p), "]")) break;
                }
                nv_push(p, &items, parse_subscript_item(p));
            }
            expect_op(p, "]");
            if (items.n == 0) pfail(p, t->line, "expected a subscript");
            node *g = mk(p, N_GETITEM, t->line);
            g->a = n;
            if (items.n == 1) g->b = items.v[0];
            else {
                g->b = mk(p, N_TUPLE, t->line);
                g->b->args = nv_done(&items);
            }
            n = g;
        } else if (is_op(t, "(")) {
            node *c = mk(p, N_CALL, t->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else return n;
    }
}

static node *parse_filter_expr(P *p, node *n) {
    for (;;) {
        tok *t = cur(p);
        if (is_op(t, "|")) {
            adv(p);
            n = parse_filter(p, n);
        } else if (is_name(t, "is")) n = parse_test(p, n);
        else if (is_op(t, "(")) {
            node *c = mk(p, N_CALL, t->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else return n;
    }
}

static node *parse_unary(P *p, int with_filter) {
    tok *t = cur(p);
    node *n;
    enter(p);
    if (is_op(t, "-") || is_op(t, "+")) {
        adv(p);
        n = mk(p, t->p[0] == '-' ? N_NEG : N_POS, t->line);
        n->a = parse_unary(p, 0);
    } else n = parse_primary(p);
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    leave(p);
    return n;
}

static node *mkbinop(P *p, int op, node *a, node *b, int line) {
    node *n = mk(p, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static node *parse_pow(P *p) {
    node *n = parse_unary(p, 1);
    while (is_op(cur(p), "**")) {
        int line = cur(p)->line;
        adv(p);
        n = mkbinop(p, OP_POW, n, parse_unary(p, 1), line);
    }
    return n;
}

static node *parse_math2(P *p) {
    node *n = parse_pow(p);
    for (;;) {
        tok *t = cur(p);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        adv(p);
        n = mkbinop(p, op, n, parse_pow(p), t->line);
    }
}

static node *parse_concat(P *p) {
    node *n = parse_math2(p);
    while (is_op(cur(p), "~")) {
        int line = cur(p)->line;
        adv(p);
        n = mkbinop(p, OP_CONCAT, n, parse_math2(p), line);
    }
    return n;
}

static node *parse_math1(P *p) {
    node *n = parse_concat(p);
    for (;;) {
        tok *t = cur(p);
        int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        adv(p);
        n = mkbinop(p, op, n, parse_concat(p), t->line);
    }
}

static node *parse_compare(P *p) {
    int line = cur(p)->line;
    node *first = parse_math1(p);
    nvec operands = {0};
    uint8_t ops[64];
    int nops = 0;
    for (;;) {
        tok *t = cur(p);
        int op = is_op(t, "==") ? CMP_EQ : is_op(t, "!=") ? CMP_NE : is_op(t, "<") ? CMP_LT : is_op(t, "<=") ? CMP_LE
               : is_op(t, ">") ? CMP_GT : is_op(t, ">=") ? CMP_GE : is_name(t, "in") ? CMP_IN : -1;
        if (op < 0 && is_name(t, "not") && is_name(peek(p, 1), "in")) {
            adv(p);
            op = CMP_NOTIN;
        }
        if (op < 0) break;
        if (nops == 64) pfail(p, t->line, "comparison chain too long");
        adv(p);
        ops[nops++] = (uint8_t)op;
        nv_push(p, &operands, parse_math1(p));
    }
    if (!nops) return first;
    node *n = mk(p, N_COMPARE, line);
    n->a = first;
    n->args = nv_done(&operands);
    n->ops = tmpl_arena_alloc(p->a, (size_t)nops);
    memcpy(n->ops, ops, (size_t)nops);
    return n;
}

static node *parse_not(P *p) {
    if (is_name(cur(p), "not")) {
        int line = cur(p)->line;
        adv(p);
        enter(p);
        node *n = mk(p, N_NOT, line);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static node *parse_and(P *p) {
    node *n = parse_not(p);
    while (is_name(cur(p), "and")) {
        node *x = mk(p, N_AND, cur(p)->line);
        adv(p);
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}

static node *parse_or(P *p) {
    node *n = parse_and(p);
    while (is_name(cur(p), "or")) {
        node *x = mk(p, N_OR, cur(p)->line);
        adv(p);
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}

static node *parse_condexpr(P *p) {
    enter(p);
    node *n = parse_or(p);
    while (is_name(cur(p), "if")) {
        node *c = mk(p, N_COND, cur(p)->line);
        adv(p);
        c->b = n;
        c->a = parse_or(p);
        if (is_name(cur(p), "else")) {
            adv(p);
            c->c = parse_condexpr(p);
        }
        n = c;
    }
    leave(p);
    return n;
}

static node *parse_expr(P *p) { return parse_condexpr(p); }

static int tuple_end(P *p, const char *extra_end) {
    tok *t = cur(p);
    return t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF || is_op(t, ")") ||
           (extra_end && is_name(t, extra_end));
}

static node *parse_tuple(P *p, int with_condexpr, const char *extra_end, int explicit_parens) {
    int line = cur(p)->line;
    nvec items = {0};
    int is_tuple = 0;
    for (;;) {
        if (items.n) expect_op(p, ",");
        if (tuple_end(p, extra_end)) break;
        nv_push(p, &items, with_condexpr ? parse_expr(p) : parse_or(p));
        if (is_op(cur(p), ",")) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) pfail(p, cur(p)->line, "expected an expression, got '%s'", describe(p, cur(p)));
    }
    node *n = mk(p, N_TUPLE, line);
    n->args = nv_done(&items);
    return n;
}

/* An assignment target: a name, a tuple of names, or (for set) ns.attr. */
static node *parse_target(P *p, const char *extra_end, int with_ns) {
    int line = cur(p)->line;
    if (with_ns && cur(p)->type == TK_NAME && is_op(peek(p, 1), ".") && peek(p, 2)->type == TK_NAME) {
        node *g = mk(p, N_GETATTR, line);
        g->a = mk(p, N_NAME, line);
        g->a->name = expect_name(p);
        adv(p);
        g->name = expect_name(p);
        return g;
    }
    nvec names = {0};
    int paren = 0, is_tuple = 0;
    if (is_op(cur(p), "(")) {
        paren = 1;
        adv(p);
    }
    for (;;) {
        if (names.n) {
            if (!is_op(cur(p), ",")) break;
            adv(p);
            is_tuple = 1;
        }
        if (cur(p)->type != TK_NAME || (extra_end && is_name(cur(p), extra_end))) {
            if (names.n) break;
            pfail(p, cur(p)->line, "can't assign to '%s'", describe(p, cur(p)));
        }
        node *nm = mk(p, N_NAME, cur(p)->line);
        nm->name = expect_name(p);
        nv_push(p, &names, nm);
    }
    if (paren) expect_op(p, ")");
    if (names.n == 1 && !is_tuple) return names.v[0];
    node *t = mk(p, N_TUPLE, line);
    t->args = nv_done(&names);
    return t;
}

/* ================================================================ statements */

static nlist parse_body(P *p, const char *const *ends, const char *owner, int owner_line);

static int at_tag(P *p, const char *const *ends) {
    if (cur(p)->type != TK_BLOCK_BEGIN) return 0;
    tok *t = peek(p, 1);
    for (int i = 0; ends && ends[i]; i++)
        if (is_name(t, ends[i])) return 1;
    return 0;
}

/* After parse_body stopped at one of its end tags: consume "{% name" and return the name. */
static const char *take_tag(P *p) {
    adv(p); /* {% */
    tok *t = cur(p);
    adv(p);
    return tmpl_arena_strndup(p->a, t->p, t->n);
}

static node *parse_if(P *p, int line) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    node *n = mk(p, N_IF, line);
    enter(p);
    n->a = parse_tuple(p, 0, NULL, 0);
    expect_block_end(p);
    n->body = parse_body(p, ends, "if", line);
    const char *tag = take_tag(p);
    if (!strcmp(tag, "elif")) {
        node *e = parse_if(p, p->t[p->i - 1].line);
        nvec v = {0};
        nv_push(p, &v, e);
        n->orelse = nv_done(&v);
        leave(p);
        return n; /* the nested if consumed endif */
    }
    if (!strcmp(tag, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        expect_block_end(p);
        n->orelse = parse_body(p, ends2, "if", line);
        take_tag(p);
    }
    expect_block_end(p);
    leave(p);
    return n;
}

static node *parse_for(P *p, int line) {
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const ends2[] = {"endfor", NULL};
    node *n = mk(p, N_FOR, line);
    n->a = parse_target(p, "in", 0);
    if (!is_name(cur(p), "in")) pfail(p, cur(p)->line, "expected 'in' in for loop, got '%s'", describe(p, cur(p)));
    adv(p);
    n->b = parse_tuple(p, 0, "recursive", 0);
    if (is_name(cur(p), "if")) {
        adv(p);
        n->c = parse_expr(p);
    }
    if (is_name(cur(p), "recursive")) pfail(p, cur(p)->line, "recursive for loops are not supported");
    expect_block_end(p);
    p->loops++;
    n->body = parse_body(p, ends, "for", line);
    p->loops--;
    if (!strcmp(take_tag(p), "else")) {
        expect_block_end(p);
        n->orelse = parse_body(p, ends2, "for", line);
        take_tag(p);
    }
    expect_block_end(p);
    return n;
}

static node *parse_filter_chain(P *p) {
    node *chain = NULL;
    for (;;) {
        chain = parse_filter(p, chain);
        if (!is_op(cur(p), "|")) return chain;
        adv(p);
    }
}

static node *parse_set(P *p, int line) {
    static const char *const ends[] = {"endset", NULL};
    node *target = parse_target(p, NULL, 1);
    if (is_op(cur(p), "=")) {
        adv(p);
        node *n = mk(p, target->kind == N_GETATTR ? N_NSSET : N_SET, line);
        n->a = target;
        n->b = parse_tuple(p, 1, NULL, 0);
        expect_block_end(p);
        return n;
    }
    if (target->kind != N_NAME && target->kind != N_GETATTR)
        pfail(p, line, "a block set needs a single name as its target");
    node *n = mk(p, N_SETBLOCK, line);
    n->a = target;
    if (is_op(cur(p), "|")) {
        adv(p);
        n->c = parse_filter_chain(p);
    }
    expect_block_end(p);
    n->body = parse_body(p, ends, "set", line);
    take_tag(p);
    expect_block_end(p);
    return n;
}

/* (a, b=1, ...) of a macro or call block */
static void parse_signature(P *p, node *n) {
    nvec params = {0}, defaults = {0};
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (params.n) expect_op(p, ",");
        node *nm = mk(p, N_NAME, cur(p)->line);
        nm->name = expect_name(p);
        nv_push(p, &params, nm);
        if (is_op(cur(p), "=")) {
            adv(p);
            nv_push(p, &defaults, parse_expr(p));
        } else if (defaults.n)
            pfail(p, nm->line, "non-default argument '%s' follows default argument", nm->name);
    }
    expect_op(p, ")");
    n->params = nv_done(&params);
    n->defaults = nv_done(&defaults);
}

static node *parse_macro(P *p, int line) {
    static const char *const ends[] = {"endmacro", NULL};
    node *n = mk(p, N_MACRO, line);
    n->name = expect_name(p);
    parse_signature(p, n);
    expect_block_end(p);
    int loops = p->loops;
    p->loops = 0;
    n->body = parse_body(p, ends, "macro", line);
    p->loops = loops;
    take_tag(p);
    expect_block_end(p);
    return n;
}

static node *parse_callblock(P *p, int line) {
    static const char *const ends[] = {"endcall", NULL};
    node *n = mk(p, N_CALLBLOCK, line);
    if (is_op(cur(p), "(")) parse_signature(p, n);
    n->a = parse_expr(p);
    if (n->a->kind != N_CALL) pfail(p, line, "expected a call expression in the call block");
    expect_block_end(p);
    int loops = p->loops;
    p->loops = 0;
    n->body = parse_body(p, ends, "call", line);
    p->loops = loops;
    take_tag(p);
    expect_block_end(p);
    return n;
}

static node *parse_statement(P *p) {
    int line = cur(p)->line;
    adv(p); /* {% */
    tok *t = cur(p);
    if (t->type != TK_NAME) pfail(p, t->line, "tag name expected, got '%s'", describe(p, t));
    const char *name = tmpl_arena_strndup(p->a, t->p, t->n);
    adv(p);
    node *n;
    enter(p);
    if (!strcmp(name, "if")) n = parse_if(p, line);
    else if (!strcmp(name, "for")) n = parse_for(p, line);
    else if (!strcmp(name, "set")) n = parse_set(p, line);
    else if (!strcmp(name, "macro")) n = parse_macro(p, line);
    else if (!strcmp(name, "call")) n = parse_callblock(p, line);
    else if (!strcmp(name, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        n = mk(p, N_FILTERBLOCK, line);
        n->c = parse_filter_chain(p);
        expect_block_end(p);
        n->body = parse_body(p, ends, "filter", line);
        take_tag(p);
        expect_block_end(p);
    } else if (!strcmp(name, "with")) {
        static const char *const ends[] = {"endwith", NULL};
        n = mk(p, N_WITH, line);
        nvec targets = {0}, values = {0};
        while (cur(p)->type != TK_BLOCK_END) {
            if (targets.n) expect_op(p, ",");
            nv_push(p, &targets, parse_target(p, NULL, 0));
            expect_op(p, "=");
            nv_push(p, &values, parse_expr(p));
        }
        n->args = nv_done(&targets);
        n->kwargs = nv_done(&values);
        expect_block_end(p);
        n->body = parse_body(p, ends, "with", line);
        take_tag(p);
        expect_block_end(p);
    } else if (!strcmp(name, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        n = mk(p, N_GENERATION, line);
        expect_block_end(p);
        n->body = parse_body(p, ends, "generation", line);
        take_tag(p);
        expect_block_end(p);
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!p->loops) pfail(p, line, "'%s' outside of a for loop", name);
        n = mk(p, name[0] == 'b' ? N_BREAK : N_CONTINUE, line);
        expect_block_end(p);
    } else if (!strcmp(name, "include") || !strcmp(name, "import") || !strcmp(name, "from") ||
               !strcmp(name, "extends") || !strcmp(name, "block"))
        pfail(p, line, "tag '%s' is not supported (chat templates have no loader)", name);
    else pfail(p, line, "unknown tag '%s'", name);
    leave(p);
    return n;
}

static nlist parse_body(P *p, const char *const *ends, const char *owner, int owner_line) {
    nvec body = {0};
    for (;;) {
        tok *t = cur(p);
        if (t->type == TK_EOF) {
            if (ends) {
                sbuf b;
                tmpl_sb_init(&b, p->a);
                for (int i = 0; ends[i]; i++) tmpl_sb_printf(&b, "%s'%s'", i ? " or " : "", ends[i]);
                pfail(p, t->line, "unexpected end of template: the '%s' block opened on line %d is not closed "
                      "(looking for %s)", owner, owner_line, b.p);
            }
            break;
        }
        if (t->type == TK_DATA) {
            node *d = mk(p, N_DATA, t->line);
            d->v = tmpl_v_str(t->p, t->n);
            nv_push(p, &body, d);
            adv(p);
        } else if (t->type == TK_VAR_BEGIN) {
            adv(p);
            node *e = parse_tuple(p, 1, NULL, 0);
            if (cur(p)->type != TK_VAR_END)
                pfail(p, cur(p)->line, "unexpected '%s' in print statement", describe(p, cur(p)));
            adv(p);
            node *o = mk(p, N_OUTPUT, t->line);
            o->a = e;
            nv_push(p, &body, o);
        } else if (t->type == TK_BLOCK_BEGIN) {
            if (at_tag(p, ends)) break;
            tok *nt = peek(p, 1);
            if (nt->type == TK_NAME && nt->n >= 3 && (!strncmp(nt->p, "end", 3) || is_name(nt, "else") || is_name(nt, "elif")))
                pfail(p, nt->line, "unexpected tag '%.*s'%s", (int)nt->n, nt->p,
                      ends ? "" : " (no block is open)");
            nv_push(p, &body, parse_statement(p));
        } else pfail(p, t->line, "unexpected '%s'", describe(p, t));
    }
    return nv_done(&body);
}

/* jinja2 rejects an unknown filter or test at compile time, except in a "soft"
 * frame: the test and branches of an {% if %} and of an inline if-expression,
 * up to the next scope (for, macro, call, filter and set blocks, with). There
 * it is an error only if it runs. Walk the tree the same way. */
static void check_names(P *p, const node *n, int soft);
static void check_list(P *p, nlist l, int soft) {
    for (int i = 0; i < l.n; i++) check_names(p, l.v[i], soft);
}
static void check_names(P *p, const node *n, int soft) {
    if (!n) return;
    switch ((nkind)n->kind) {
    case N_IF:
    case N_COND:
        soft = 1;
        break;
    case N_FILTER:
    case N_TEST:
        if (n->fnid < 0 && !soft)
            pfail(p, n->line, "unknown %s '%s'", n->kind == N_FILTER ? "filter" : "test", n->name);
        break;
    default: break;
    }
    int inner = n->kind == N_FOR || n->kind == N_MACRO || n->kind == N_CALLBLOCK || n->kind == N_FILTERBLOCK ||
                n->kind == N_SETBLOCK || n->kind == N_WITH;
    if (n->kind == N_FOR) {
        check_names(p, n->b, soft);
        check_names(p, n->c, 0);
    } else if (n->kind == N_CALLBLOCK || n->kind == N_WITH) {
        check_names(p, n->a, soft);
        check_list(p, n->kwargs, soft);
        check_list(p, n->defaults, 0);
    } else {
        check_names(p, n->a, inner ? 0 : soft);
        check_names(p, n->b, inner ? 0 : soft);
        check_names(p, n->c, inner ? 0 : soft);
        check_list(p, n->args, inner ? 0 : soft);
        check_list(p, n->kwargs, inner ? 0 : soft);
        check_list(p, n->defaults, inner ? 0 : soft);
    }
    check_list(p, n->body, inner ? 0 : soft);
    check_list(p, n->orelse, inner ? 0 : soft);
}

hearth_status tmpl_parse_src(hearth_tmpl *t, const char *src, size_t len, hearth_err *err) {
    P *p = calloc(1, sizeof *p);
    if (!p) return hearth_err_set(err, HEARTH_ENOMEM, "template: out of memory");
    p->a = &t->a;
    p->err = err;
    t->a.jb = &p->jb;
    t->a.err = err;
    hearth_status st = HEARTH_OK;
    if (setjmp(p->jb)) {
        st = err && err->status ? err->status : HEARTH_EFORMAT;
        goto done;
    }
    /* jinja2: \r\n and \r become \n; one trailing newline is dropped. */
    char *s = tmpl_arena_alloc(&t->a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    p->src = s;
    p->len = n;
    lex(p);
    p->i = 0;
    t->body = parse_body(p, NULL, NULL, 0);
    check_list(p, t->body, 0);
done:
    t->a.jb = NULL;
    free(p);
    return st;
}
