/* grammar.c - GBNF grammars: the parser, the matcher, the sampler constraint
 * (grammar.h says what is accepted and how it is matched). */
#include "completion/grammar.h"
#include "completion/grammar_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EL_END, EL_ALT, EL_REF, EL_SET }; /* an alternative ends at ALT (another follows) or END (the rule's last) */

typedef struct {
    uint8_t type;
    int32_t arg; /* REF: the rule; SET: the set */
} gel;

typedef struct {
    int32_t off, n; /* ranges[off .. off + 2n): [lo, hi] pairs */
    uint8_t neg;
} gset;

struct hearth_grammar {
    gel *el;             /* every rule's alternatives, END-terminated */
    int32_t *rule_start; /* [n_rules] into el */
    int n_rules;
    gset *sets;
    uint32_t *ranges;
    int root;
};

#define GRAMMAR_MAX_RULES 16384
#define GRAMMAR_MAX_ELEMS (1 << 20)
#define GRAMMAR_MAX_REPEAT 4096
#define GRAMMAR_MAX_INTS (1 << 16) /* a state's stacks, all together */
#define GRAMMAR_MAX_DEPTH 512      /* one stack */
#define GRAMMAR_ARENA 8192         /* ints of the stacks being expanded */

/* ---- the parser ---- */

typedef struct {
    gel *v;
    int n, cap;
} gvec;

typedef struct {
    char *name;
    int defined, line; /* line: where it was defined, else first used */
    gvec body;         /* alternatives separated by ALT, no END yet */
} grule;

typedef struct {
    const char *p, *end;
    int line;
    grule *rules;
    int n_rules, cap_rules;
    gset *sets;
    int n_sets, cap_sets;
    uint32_t *ranges;
    int n_ranges, cap_ranges;
    int n_elems;
    hearth_err *err;
    hearth_status st;
} gparser;

static int fail(gparser *P, hearth_status st, const char *fmt, ...) {
    if (P->st != HEARTH_OK) return -1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->st = st;
    if (st == HEARTH_ENOMEM) hearth_err_set(P->err, st, "out of memory for the grammar");
    else hearth_err_set(P->err, st, "line %d: %s", P->line, msg);
    return -1;
}

static int grow(void **v, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*v, (size_t)nc * size);
    if (!p) return -1;
    *v = p;
    *cap = nc;
    return 0;
}

static int push(gparser *P, int r, uint8_t type, int32_t arg) {
    if (++P->n_elems > GRAMMAR_MAX_ELEMS)
        return fail(P, HEARTH_EINVAL, "the grammar is too large (more than %d elements once its repetitions are "
                    "expanded)", GRAMMAR_MAX_ELEMS);
    gvec *b = &P->rules[r].body;
    if (grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v)) return fail(P, HEARTH_ENOMEM, "");
    b->v[b->n++] = (gel){type, arg};
    return 0;
}

/* The rule named name[0..len), made (undefined) if new; -1 on failure. */
static int rule_id(gparser *P, const char *name, size_t len) {
    for (int i = 0; i < P->n_rules; i++)
        if (strlen(P->rules[i].name) == len && !memcmp(P->rules[i].name, name, len)) return i;
    if (P->n_rules >= GRAMMAR_MAX_RULES)
        return fail(P, HEARTH_EINVAL, "more than %d rules (repetitions included)", GRAMMAR_MAX_RULES);
    if (grow((void **)&P->rules, &P->cap_rules, P->n_rules + 1, sizeof *P->rules)) return fail(P, HEARTH_ENOMEM, "");
    grule *r = &P->rules[P->n_rules];
    memset(r, 0, sizeof *r);
    r->line = P->line;
    if (!(r->name = malloc(len + 1))) return fail(P, HEARTH_ENOMEM, "");
    memcpy(r->name, name, len);
    r->name[len] = 0;
    return P->n_rules++;
}

/* A helper rule of parent's (a group or a repetition), named as llama.cpp names them. */
static int rule_helper(gparser *P, int parent) {
    char name[160];
    int k = snprintf(name, sizeof name, "%.120s-%d", P->rules[parent].name, P->n_rules);
    int id = rule_id(P, name, (size_t)k);
    if (id >= 0) P->rules[id].defined = 1;
    return id;
}

static int set_new(gparser *P, int neg, int n_ranges_from) {
    if (grow((void **)&P->sets, &P->cap_sets, P->n_sets + 1, sizeof *P->sets)) return fail(P, HEARTH_ENOMEM, "");
    P->sets[P->n_sets] = (gset){n_ranges_from, (P->n_ranges - n_ranges_from) / 2, (uint8_t)neg};
    return P->n_sets++;
}

static int range_add(gparser *P, uint32_t lo, uint32_t hi) {
    if (grow((void **)&P->ranges, &P->cap_ranges, P->n_ranges + 2, sizeof *P->ranges))
        return fail(P, HEARTH_ENOMEM, "");
    P->ranges[P->n_ranges++] = lo;
    P->ranges[P->n_ranges++] = hi;
    return 0;
}

static int push_char(gparser *P, int r, uint32_t cp) {
    int from = P->n_ranges;
    if (range_add(P, cp, cp)) return -1;
    int s = set_new(P, 0, from);
    return s < 0 ? -1 : push(P, r, EL_SET, s);
}

static void skip_space(gparser *P, int newline_ok) {
    while (P->p < P->end) {
        char c = *P->p;
        if (c == ' ' || c == '\t' || c == '\r') {
            P->p++;
        } else if (c == '#') {
            while (P->p < P->end && *P->p != '\n') P->p++;
        } else if (c == '\n' && newline_ok) {
            P->line++;
            P->p++;
        } else {
            break;
        }
    }
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int hex_digits(gparser *P, int n, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++, P->p++) {
        int d = gram_hex_digit(P->p < P->end ? *P->p : 0);
        if (d < 0) return fail(P, HEARTH_EINVAL, "expected %d hex digits after the escape", n);
        v = v * 16 + (uint32_t)d;
    }
    *cp = v;
    return v > 0x10FFFF ? fail(P, HEARTH_EINVAL, "escape U+%X is past U+10FFFF", v) : 0;
}

/* One character of a literal or a class: an escape or one UTF-8 sequence. */
static int parse_char(gparser *P, uint32_t *cp) {
    const uint8_t *s = (const uint8_t *)P->p;
    if (*s == '\\') {
        if (P->p + 1 >= P->end) return fail(P, HEARTH_EINVAL, "the text ends in an escape");
        char c = P->p[1];
        P->p += 2;
        switch (c) {
        case 'x': return hex_digits(P, 2, cp);
        case 'u': return hex_digits(P, 4, cp);
        case 'U': return hex_digits(P, 8, cp);
        case 'n': *cp = '\n'; return 0;
        case 'r': *cp = '\r'; return 0;
        case 't': *cp = '\t'; return 0;
        case '0': *cp = 0; return 0;
        default:
            if (strchr("\\\"'[]-/^.|(){}*+?#", c) && c) {
                *cp = (uint8_t)c;
                return 0;
            }
            return fail(P, HEARTH_EINVAL, "unknown escape '\\%c'", c);
        }
    }
    int n = gram_utf8(s, (size_t)(P->end - P->p), cp);
    if (!n) return fail(P, HEARTH_EINVAL, "invalid UTF-8");
    if (*s == '\n') P->line++;
    P->p += n;
    return 0;
}

static int parse_alternates(gparser *P, int r, int nested);

/* The item just parsed (rule r's elements from start) repeated min..max
 * times (max < 0: no bound). */
static int repeat(gparser *P, int r, int start, int min, int max) {
    int n = P->rules[r].body.n - start;
    if (n == 0) return fail(P, HEARTH_EINVAL, "a repetition with nothing before it");
    gel item = P->rules[r].body.v[start];
    if (n > 1) { /* a literal of several characters: one helper rule */
        int sub = rule_helper(P, r);
        if (sub < 0) return -1;
        for (int i = 0; i < n; i++) {
            gel e = P->rules[r].body.v[start + i];
            if (push(P, sub, e.type, e.arg)) return -1;
        }
        item = (gel){EL_REF, sub};
    }
    P->rules[r].body.n = start;
    for (int i = 0; i < min; i++)
        if (push(P, r, item.type, item.arg)) return -1;
    if (max < 0) { /* star ::= item star | (nothing) */
        int star = rule_helper(P, r);
        if (star < 0 || push(P, star, item.type, item.arg) || push(P, star, EL_REF, star) || push(P, star, EL_ALT, 0))
            return -1;
        return push(P, r, EL_REF, star);
    }
    int last = -1; /* opt_k ::= item opt_k-1 | (nothing), max - min deep */
    for (int k = 0; k < max - min; k++) {
        int opt = rule_helper(P, r);
        if (opt < 0 || push(P, opt, item.type, item.arg) || (last >= 0 && push(P, opt, EL_REF, last)) ||
            push(P, opt, EL_ALT, 0))
            return -1;
        last = opt;
    }
    return last >= 0 ? push(P, r, EL_REF, last) : 0;
}

static int parse_count(gparser *P, int *v) {
    if (P->p >= P->end || *P->p < '0' || *P->p > '9') return 0;
    long n = 0;
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
        n = n * 10 + (*P->p++ - '0');
        if (n > GRAMMAR_MAX_REPEAT) return fail(P, HEARTH_EINVAL, "a repetition count above %d", GRAMMAR_MAX_REPEAT);
    }
    *v = (int)n;
    return 1;
}

/* {m}, {m,}, {m,n}, {,n} */
static int parse_braces(gparser *P, int *min, int *max) {
    P->p++;
    skip_space(P, 1);
    *min = 0;
    int got = parse_count(P, min);
    if (got < 0) return -1;
    skip_space(P, 1);
    *max = *min;
    if (P->p < P->end && *P->p == ',') {
        P->p++;
        skip_space(P, 1);
        *max = -1;
        if (parse_count(P, max) < 0) return -1;
        skip_space(P, 1);
    } else if (!got) {
        return fail(P, HEARTH_EINVAL, "expected a count after '{'");
    }
    if (P->p >= P->end || *P->p != '}') return fail(P, HEARTH_EINVAL, "expected '}' to close the repetition");
    P->p++;
    if (*max >= 0 && *max < *min) return fail(P, HEARTH_EINVAL, "a repetition {%d,%d} whose bound is below its count",
                                              *min, *max);
    return 0;
}

static int parse_class(gparser *P, int r) {
    P->p++;
    int neg = 0;
    if (P->p < P->end && *P->p == '^') neg = 1, P->p++;
    int from = P->n_ranges;
    while (P->p < P->end && *P->p != ']') {
        uint32_t lo, hi;
        if (parse_char(P, &lo)) return -1;
        hi = lo;
        if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
            P->p++;
            if (parse_char(P, &hi)) return -1;
            if (hi < lo) return fail(P, HEARTH_EINVAL, "a character range whose end U+%04X is before its start U+%04X",
                                     hi, lo);
        }
        if (range_add(P, lo, hi)) return -1;
    }
    if (P->p >= P->end) return fail(P, HEARTH_EINVAL, "a character class without its ']'");
    P->p++;
    int s = set_new(P, neg, from);
    return s < 0 ? -1 : push(P, r, EL_SET, s);
}

static int parse_sequence(gparser *P, int r, int nested) {
    while (P->p < P->end) {
        int start = P->rules[r].body.n;
        char c = *P->p;
        if (c == '"') {
            P->p++;
            while (P->p < P->end && *P->p != '"') {
                uint32_t cp;
                if (parse_char(P, &cp) || push_char(P, r, cp)) return -1;
            }
            if (P->p >= P->end) return fail(P, HEARTH_EINVAL, "a literal without its closing '\"'");
            P->p++;
        } else if (c == '[') {
            if (parse_class(P, r)) return -1;
        } else if (c == '.') {
            P->p++;
            int s = set_new(P, 1, P->n_ranges); /* the complement of nothing */
            if (s < 0 || push(P, r, EL_SET, s)) return -1;
        } else if (c == '(') {
            P->p++;
            skip_space(P, 1);
            int sub = rule_helper(P, r);
            if (sub < 0 || parse_alternates(P, sub, 1)) return -1;
            skip_space(P, 1);
            if (P->p >= P->end || *P->p != ')') return fail(P, HEARTH_EINVAL, "expected ')' to close the group");
            P->p++;
            if (push(P, r, EL_REF, sub)) return -1;
        } else if (is_name_char(c)) {
            const char *name = P->p;
            while (P->p < P->end && is_name_char(*P->p)) P->p++;
            int id = rule_id(P, name, (size_t)(P->p - name));
            if (id < 0 || push(P, r, EL_REF, id)) return -1;
        } else {
            return 0;
        }
        skip_space(P, nested);
        if (P->p < P->end && strchr("*+?{", *P->p)) {
            int min = 0, max = -1;
            if (*P->p == '{') {
                if (parse_braces(P, &min, &max)) return -1;
            } else {
                min = *P->p == '+';
                max = *P->p == '?' ? 1 : -1;
                P->p++;
            }
            if (repeat(P, r, start, min, max)) return -1;
            skip_space(P, nested);
        }
    }
    return 0;
}

static int parse_alternates(gparser *P, int r, int nested) {
    if (parse_sequence(P, r, nested)) return -1;
    for (;;) {
        if (!nested) { /* a next line that starts with '|' continues the rule */
            const char *at = P->p;
            int line = P->line;
            skip_space(P, 1);
            if (P->p >= P->end || *P->p != '|') P->p = at, P->line = line;
        }
        if (P->p >= P->end || *P->p != '|') return 0;
        P->p++;
        skip_space(P, 1);
        if (push(P, r, EL_ALT, 0) || parse_sequence(P, r, nested)) return -1;
    }
}

static int parse_rule(gparser *P) {
    const char *name = P->p;
    while (P->p < P->end && is_name_char(*P->p)) P->p++;
    if (P->p == name)
        return fail(P, HEARTH_EINVAL, "expected a rule name, got '%c' (a rule goes on to a new line only after '|' or "
                    "inside parentheses)", *P->p);
    int r = rule_id(P, name, (size_t)(P->p - name));
    if (r < 0) return -1;
    if (P->rules[r].defined) return fail(P, HEARTH_EINVAL, "rule '%s' is defined twice", P->rules[r].name);
    P->rules[r].defined = 1;
    P->rules[r].line = P->line;
    skip_space(P, 0);
    if (P->end - P->p < 3 || memcmp(P->p, "::=", 3))
        return fail(P, HEARTH_EINVAL, "expected '::=' after the rule name '%s'", P->rules[r].name);
    P->p += 3;
    skip_space(P, 1);
    if (parse_alternates(P, r, 0)) return -1;
    if (P->p < P->end && *P->p != '\n')
        return fail(P, HEARTH_EINVAL, "unexpected '%c' in rule '%s'", *P->p, P->rules[r].name);
    return 0;
}

/* ---- compilation: flatten, then refuse left recursion ---- */

static int elem_nullable(const hearth_grammar *g, const uint8_t *nullable, gel e) {
    return e.type == EL_REF && nullable[e.arg];
}

/* A rule that can begin with itself (directly, or after rules that can be
 * empty) would expand forever: refused, by a depth-first walk of the rules
 * each alternative can start with. Returns the rule at fault, or -1. */
static int left_recursive(const hearth_grammar *g, int *bad) {
    uint8_t *nullable = calloc((size_t)g->n_rules, 1), *col = calloc((size_t)g->n_rules, 1);
    int32_t *sr = malloc(sizeof *sr * (size_t)g->n_rules * 3);
    int rc = -1;
    *bad = -1;
    if (!nullable || !col || !sr) goto done;
    for (int changed = 1; changed;) { /* nullable: some alternative of rules that can be empty, or none at all */
        changed = 0;
        for (int r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            int all = 1;
            for (int p = g->rule_start[r];; p++) {
                gel e = g->el[p];
                if (e.type == EL_END || e.type == EL_ALT) {
                    if (all) nullable[r] = 1, changed = 1;
                    if (e.type == EL_END || all) break;
                    all = 1;
                } else if (!elem_nullable(g, nullable, e)) {
                    all = 0;
                }
            }
        }
    }
    int32_t *sp_r = sr, *sp_p = sr + g->n_rules, *sp_e = sr + 2 * g->n_rules;
    for (int r0 = 0; r0 < g->n_rules && *bad < 0; r0++) {
        if (col[r0]) continue;
        int sp = 0;
        sp_r[sp] = r0, sp_p[sp] = g->rule_start[r0], sp_e[sp] = 1, sp++;
        col[r0] = 1;
        while (sp > 0 && *bad < 0) {
            int t = sp - 1;
            gel e = g->el[sp_p[t]++];
            if (e.type == EL_END) {
                col[sp_r[t]] = 2;
                sp--;
            } else if (e.type == EL_ALT) {
                sp_e[t] = 1;
            } else if (sp_e[t]) {
                if (e.type == EL_SET) {
                    sp_e[t] = 0;
                    continue;
                }
                if (!nullable[e.arg]) sp_e[t] = 0;
                if (col[e.arg] == 1) *bad = e.arg;
                else if (col[e.arg] == 0)
                    col[e.arg] = 1, sp_r[sp] = e.arg, sp_p[sp] = g->rule_start[e.arg], sp_e[sp] = 1, sp++;
            }
        }
    }
    rc = 0;
done:
    free(nullable);
    free(col);
    free(sr);
    return rc;
}

static void parser_free(gparser *P) {
    for (int i = 0; i < P->n_rules; i++) {
        free(P->rules[i].name);
        free(P->rules[i].body.v);
    }
    free(P->rules);
    free(P->sets);
    free(P->ranges);
}

void hearth_grammar_free(hearth_grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->rule_start);
    free(g->sets);
    free(g->ranges);
    free(g);
}

int hearth_grammar_n_rules(const hearth_grammar *g) { return g->n_rules; }

hearth_status hearth_grammar_compile(hearth_grammar **out, const char *text, size_t len, hearth_err *err) {
    *out = NULL;
    gparser P = {.p = text, .end = text + len, .line = 1, .err = err, .st = HEARTH_OK};
    hearth_grammar *g = NULL;
    for (;;) {
        skip_space(&P, 1);
        if (P.p >= P.end) break;
        if (parse_rule(&P)) goto done;
    }
    int root = -1;
    for (int i = 0; i < P.n_rules; i++) {
        if (!P.rules[i].defined) {
            P.line = P.rules[i].line;
            fail(&P, HEARTH_EINVAL, "rule '%s' is used but not defined", P.rules[i].name);
            goto done;
        }
        if (!strcmp(P.rules[i].name, "root")) root = i;
    }
    if (root < 0) {
        fail(&P, HEARTH_EINVAL, "no rule named 'root' (the output must match root)");
        goto done;
    }
    if (!(g = calloc(1, sizeof *g))) goto oom;
    g->n_rules = P.n_rules;
    g->root = root;
    g->rule_start = malloc(sizeof *g->rule_start * (size_t)P.n_rules);
    g->el = malloc(sizeof *g->el * (size_t)(P.n_elems + P.n_rules + 1));
    g->sets = malloc(sizeof *g->sets * (size_t)(P.n_sets ? P.n_sets : 1));
    g->ranges = malloc(sizeof *g->ranges * (size_t)(P.n_ranges ? P.n_ranges : 1));
    if (!g->rule_start || !g->el || !g->sets || !g->ranges) goto oom;
    int n = 0;
    for (int i = 0; i < P.n_rules; i++) {
        g->rule_start[i] = n;
        if (P.rules[i].body.n) /* an empty rule has no body buffer */
            memcpy(g->el + n, P.rules[i].body.v, sizeof *g->el * (size_t)P.rules[i].body.n);
        n += P.rules[i].body.n;
        g->el[n++] = (gel){EL_END, 0};
    }
    if (P.n_sets) memcpy(g->sets, P.sets, sizeof *g->sets * (size_t)P.n_sets);
    if (P.n_ranges) memcpy(g->ranges, P.ranges, sizeof *g->ranges * (size_t)P.n_ranges);
    int bad;
    if (left_recursive(g, &bad)) goto oom;
    if (bad >= 0) {
        P.line = P.rules[bad].line;
        fail(&P, HEARTH_EINVAL, "rule '%s' is left-recursive (it can begin with itself), which this matcher cannot "
             "follow: rewrite it with a repetition", P.rules[bad].name);
        goto done;
    }
    *out = g;
    g = NULL;
    goto done;
oom:
    fail(&P, HEARTH_ENOMEM, "");
done:
    hearth_grammar_free(g);
    parser_free(&P);
    return P.st;
}

char *hearth_grammar_choices_text(const char *const *choices, int n) {
    size_t len = 16;
    for (int i = 0; i < n; i++) len += 4 * strlen(choices[i]) + 8;
    char *t = malloc(len), *w = t;
    if (!t) return NULL;
    w += sprintf(w, "root ::=");
    for (int i = 0; i < n; i++) {
        w += sprintf(w, "%s\"", i ? " | " : " ");
        for (const unsigned char *s = (const unsigned char *)choices[i]; *s; s++) {
            if (*s == '"' || *s == '\\') *w++ = '\\', *w++ = (char)*s;
            else if (*s < 0x20) w += sprintf(w, "\\x%02X", *s);
            else *w++ = (char)*s;
        }
        *w++ = '"';
    }
    *w = 0;
    return t;
}

hearth_status hearth_grammar_choices(hearth_grammar **out, const char *const *choices, int n, hearth_err *err) {
    char *t = hearth_grammar_choices_text(choices, n);
    if (!t) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory for the grammar");
    hearth_status st = hearth_grammar_compile(out, t, strlen(t), err);
    free(t);
    return st;
}

/* ---- the matcher ---- */

static int set_matches(const hearth_grammar *g, int32_t s, uint32_t lo, uint32_t hi) {
    const gset *e = &g->sets[s];
    const uint32_t *r = g->ranges + e->off;
    if (!e->neg) {
        for (int i = 0; i < e->n; i++)
            if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return 1;
        return 0;
    }
    /* negated: some code point of [lo, hi] lies outside every range */
    for (uint32_t x = lo;;) {
        int moved = 0;
        for (int i = 0; i < e->n; i++)
            if (r[2 * i] <= x && r[2 * i + 1] >= x) {
                if (r[2 * i + 1] >= hi) return 0;
                x = r[2 * i + 1] + 1, moved = 1;
            }
        if (!moved) return 1;
    }
}

static int state_reserve(hearth_grammar_state *s, int need) {
    if (need > GRAMMAR_MAX_INTS) return 0;
    if (need <= s->cap) return 1;
    int nc = s->cap ? s->cap : 64;
    while (nc < need) nc *= 2;
    int32_t *p = realloc(s->buf, sizeof *p * (size_t)nc);
    if (!p) return 0;
    s->buf = p;
    s->cap = nc;
    return 1;
}

/* Add stack w[0..n) to s unless it is there. 0: no room. */
static int stack_add(hearth_grammar_state *s, const int32_t *w, int n) {
    for (int i = 0; i < s->len; i += 1 + s->buf[i])
        if (s->buf[i] == n && !memcmp(s->buf + i + 1, w, sizeof *w * (size_t)n)) return 1;
    if (!state_reserve(s, s->len + 1 + n)) return 0;
    s->buf[s->len] = n;
    memcpy(s->buf + s->len + 1, w, sizeof *w * (size_t)n);
    s->len += 1 + n;
    return 1;
}

/* Add to s every stack that stack w[0..n) (its top w[n - 1] any element)
 * becomes once its top is a character set (or the stack is empty). The new
 * stacks are built at arena[top..]; w is never written. 0: out of room. */
static int expand(const hearth_grammar *g, hearth_grammar_state *s, const int32_t *w, int n, int32_t *arena, int top) {
    if (n == 0) return stack_add(s, w, 0);
    int32_t p = w[n - 1];
    gel e = g->el[p];
    if (e.type == EL_SET) return stack_add(s, w, n);
    if (e.type != EL_REF) return expand(g, s, w, n - 1, arena, top); /* the alternative ended: back to the caller */
    uint8_t next = g->el[p + 1].type;
    int m = n - 1 + (next != EL_END && next != EL_ALT); /* what follows the reference, unless it ends the alternative */
    if (m + 1 > GRAMMAR_MAX_DEPTH || top + m + 1 > GRAMMAR_ARENA) return 0;
    int32_t *c = arena + top;
    memcpy(c, w, sizeof *w * (size_t)(n - 1));
    if (m > n - 1) c[n - 1] = p + 1;
    int ok = 1;
    for (int a = g->rule_start[e.arg];; a++) { /* every alternative of the rule */
        c[m] = a;
        ok &= expand(g, s, c, m + 1, arena, top + m + 1);
        while (g->el[a].type != EL_END && g->el[a].type != EL_ALT) a++;
        if (g->el[a].type == EL_END) break;
    }
    return ok;
}

static void state_swap(hearth_grammar_state *a, hearth_grammar_state *b) {
    hearth_grammar_state t = *a;
    *a = *b;
    *b = t;
}

/* s's stacks after code point cp (scratch holds them, then the two swap). */
static int advance(const hearth_grammar *g, hearth_grammar_state *s, hearth_grammar_state *scratch, uint32_t cp) {
    int32_t arena[GRAMMAR_ARENA];
    scratch->len = 0;
    for (int i = 0; i < s->len; i += 1 + s->buf[i]) {
        int n = s->buf[i];
        const int32_t *w = s->buf + i + 1;
        if (n == 0 || !set_matches(g, g->el[w[n - 1]].arg, cp, cp)) continue;
        memcpy(arena, w, sizeof *w * (size_t)n);
        arena[n - 1] = w[n - 1] + 1;
        if (!expand(g, scratch, arena, n, arena, n)) return 0;
    }
    scratch->cp = 0, scratch->need = 0;
    state_swap(s, scratch);
    return s->len > 0;
}

hearth_status hearth_grammar_state_init(const hearth_grammar *g, hearth_grammar_state *s) {
    memset(s, 0, sizeof *s);
    int32_t arena[GRAMMAR_ARENA];
    for (int a = g->rule_start[g->root];; a++) {
        arena[0] = a;
        if (!expand(g, s, arena, 1, arena, 1)) {
            hearth_grammar_state_deinit(s);
            return HEARTH_ENOMEM;
        }
        while (g->el[a].type != EL_END && g->el[a].type != EL_ALT) a++;
        if (g->el[a].type == EL_END) break;
    }
    return HEARTH_OK;
}

void hearth_grammar_state_deinit(hearth_grammar_state *s) {
    free(s->buf);
    memset(s, 0, sizeof *s);
}

int hearth_grammar_state_copy(hearth_grammar_state *dst, const hearth_grammar_state *src) {
    if (!state_reserve(dst, src->len ? src->len : 1)) return 0;
    if (src->len) memcpy(dst->buf, src->buf, sizeof *src->buf * (size_t)src->len);
    dst->len = src->len;
    dst->cp = src->cp;
    dst->need = src->need;
    dst->seq = src->seq;
    return 1;
}

/* The code points a UTF-8 sequence of len bytes can still become once its
 * first bytes gave bits cp and need bytes are to come (overlong forms and
 * code points past U+10FFFF are not UTF-8). 0: none. */
static int utf8_range(uint32_t cp, int need, int len, uint32_t *lo, uint32_t *hi) {
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    *lo = cp << (6 * need);
    *hi = *lo | ((1u << (6 * need)) - 1);
    if (*lo < min[len]) *lo = min[len];
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
    return *lo <= *hi;
}

/* Some stack's top accepts a code point of [lo, hi]. */
static int accepts_range(const hearth_grammar *g, const hearth_grammar_state *s, uint32_t lo, uint32_t hi) {
    for (int i = 0; i < s->len; i += 1 + s->buf[i])
        if (s->buf[i] > 0 && set_matches(g, g->el[s->buf[i + s->buf[i]]].arg, lo, hi)) return 1;
    return 0;
}

int hearth_grammar_feed(const hearth_grammar *g, hearth_grammar_state *s, hearth_grammar_state *scratch,
                        const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t c = b[i];
        uint32_t lo, hi;
        if (s->need) {
            if ((c & 0xC0) != 0x80) return 0;
            s->cp = s->cp << 6 | (c & 0x3F);
            if (--s->need) continue;
            if (!utf8_range(s->cp, 0, s->seq, &lo, &hi)) return 0; /* overlong, or past U+10FFFF */
        } else if (c < 0x80) {
            s->cp = c;
        } else {
            int k = (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 0;
            if (!k) return 0;
            s->cp = c & (0x3F >> k);
            s->need = (uint8_t)k;
            s->seq = (uint8_t)(k + 1);
            continue;
        }
        if (!advance(g, s, scratch, s->cp)) return 0;
    }
    if (s->need) { /* a sequence begun: some code point it can still become must be accepted */
        uint32_t lo, hi;
        return utf8_range(s->cp, s->need, s->seq, &lo, &hi) && accepts_range(g, s, lo, hi);
    }
    return 1;
}

int hearth_grammar_done(const hearth_grammar_state *s) {
    if (s->need) return 0;
    for (int i = 0; i < s->len; i += 1 + s->buf[i])
        if (s->buf[i] == 0) return 1;
    return 0;
}

int hearth_grammar_open(const hearth_grammar_state *s) {
    for (int i = 0; i < s->len; i += 1 + s->buf[i])
        if (s->buf[i] > 0) return 1;
    return 0;
}

/* ---- the constraint ---- */

typedef struct {
    const hearth_vocab_bytes *v;
    hearth_grammar *g;
    hearth_grammar_state st, t, scratch; /* the output's state; a token's test copy; work space */
    int n_end;
    int32_t end[];
} grammar_constraint;

static int is_end(const grammar_constraint *c, int32_t id) {
    for (int i = 0; i < c->n_end; i++)
        if (c->end[i] == id) return 1;
    return 0;
}

static int allowed(grammar_constraint *c, int32_t id) {
    const hearth_vocab_bytes *v = c->v;
    if (is_end(c, id)) return hearth_grammar_done(&c->st);
    if (id < 0 || id >= v->n || v->special[id] || v->off[id] == v->off[id + 1] || !hearth_grammar_open(&c->st))
        return 0;
    if (!hearth_grammar_state_copy(&c->t, &c->st)) return 0;
    return hearth_grammar_feed(c->g, &c->t, &c->scratch, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
}

static int grammar_allows(void *self, int32_t id) { return allowed(self, id); }

static void grammar_mask(void *self, float *logits, int vocab) {
    grammar_constraint *c = self;
    uint8_t first[256]; /* the bytes a token may begin with: most tokens fail on their first */
    for (int b = 0; b < 256; b++) {
        uint32_t lo = (uint32_t)b, hi = lo;
        int k = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
        if (k > 0 && !utf8_range((uint32_t)(b & (0x3F >> k)), k, k + 1, &lo, &hi)) k = -1;
        first[b] = c->st.need ? 1 : k < 0 ? 0 : (uint8_t)accepts_range(c->g, &c->st, lo, hi);
    }
    hearth_vocab_mask(c->v, first, grammar_allows, c, c->end, c->n_end, logits, vocab); /* a stack too deep: the end */
}

static void grammar_accept(void *self, int32_t id) {
    grammar_constraint *c = self;
    const hearth_vocab_bytes *v = c->v;
    if (is_end(c, id) || id < 0 || id >= v->n) return;
    hearth_grammar_feed(c->g, &c->st, &c->scratch, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
}

static void grammar_free(void *self) {
    grammar_constraint *c = self;
    hearth_grammar_state_deinit(&c->st);
    hearth_grammar_state_deinit(&c->t);
    hearth_grammar_state_deinit(&c->scratch);
    hearth_grammar_free(c->g);
    free(c);
}

hearth_status hearth_grammar_constraint(hearth_constraint *out, const hearth_vocab_bytes *v, hearth_grammar *g,
                                        const int32_t *end_ids, int n_end, hearth_err *err) {
    grammar_constraint *c = calloc(1, sizeof *c + sizeof *c->end * (size_t)n_end);
    if (!c || hearth_grammar_state_init(g, &c->st) != HEARTH_OK) {
        free(c);
        hearth_grammar_free(g);
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory for the grammar's state");
    }
    c->v = v;
    c->g = g;
    c->n_end = n_end;
    memcpy(c->end, end_ids, sizeof *c->end * (size_t)n_end);
    *out = (hearth_constraint){
        .self = c, .allows = grammar_allows, .mask = grammar_mask, .accept = grammar_accept, .free = grammar_free};
    return HEARTH_OK;
}
