/* grammar_regex.c - vLLM's guided_regex: a regular expression rewritten as
 * GBNF (grammar.h), which the grammar's matcher then follows. The whole
 * output must match (as vLLM's backends do: ^ and $ at the ends of the
 * top-level alternatives are accepted and change nothing).
 *
 * The subset: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH, an escaped
 * punctuation character), `.` (any character but a newline), classes [...]
 * with ranges, ^ and \d \w \s inside, \d \w \s \D \W \S, groups ( ), (?: ),
 * named groups (?P<n> ) / (?<n> ), alternation |, and the quantifiers
 * * + ? {m} {m,} {m,n}, lazy or not (the language is the same). What would
 * change the language or cannot be a grammar is refused by name:
 * backreferences, lookaround, \b, possessive quantifiers, and an unbounded
 * repetition of what can match nothing ('(a?)*': a left-recursive grammar). */
#include "completion/grammar.h"
#include "completion/grammar_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end, *start;
    char *out;
    size_t n, cap;
    int depth;
    hearth_err *err;
    hearth_status st;
} rx;

static int rx_fail(rx *R, hearth_status st, const char *fmt, ...) {
    if (R->st != HEARTH_OK) return -1;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    R->st = st;
    if (st == HEARTH_ENOMEM) hearth_err_set(R->err, st, "out of memory for the regular expression");
    else hearth_err_set(R->err, st, "at offset %d: %s", (int)(R->p - R->start), msg);
    return -1;
}

static int put(rx *R, const char *s, size_t n) {
    if (R->n + n + 1 > R->cap) {
        size_t nc = R->cap ? R->cap * 2 : 256;
        while (nc < R->n + n + 1) nc *= 2;
        char *q = realloc(R->out, nc);
        if (!q) return rx_fail(R, HEARTH_ENOMEM, "");
        R->out = q;
        R->cap = nc;
    }
    memcpy(R->out + R->n, s, n);
    R->n += n;
    R->out[R->n] = 0;
    return 0;
}

static int puts_(rx *R, const char *s) { return put(R, s, strlen(s)); }

static int put_cp(rx *R, uint32_t cp) { /* a code point as a GBNF escape, valid in literals and classes */
    char b[16];
    snprintf(b, sizeof b, cp > 0xFFFF ? "\\U%08X" : "\\u%04X", cp);
    return puts_(R, b);
}

static int hexval(rx *R, int n, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++, R->p++) {
        int d = gram_hex_digit(R->p < R->end ? *R->p : 0);
        if (d < 0) return rx_fail(R, HEARTH_EINVAL, "expected %d hex digits", n);
        v = v * 16 + (uint32_t)d;
    }
    *cp = v;
    return v > 0x10FFFF ? rx_fail(R, HEARTH_EINVAL, "a code point past U+10FFFF") : 0;
}

static int utf8_char(rx *R, uint32_t *cp) {
    int n = gram_utf8((const uint8_t *)R->p, (size_t)(R->end - R->p), cp);
    if (!n) return rx_fail(R, HEARTH_EINVAL, "invalid UTF-8");
    R->p += n;
    return 0;
}

/* The classes \d \w \s as ranges of a GBNF class (without brackets). */
static const char *class_ranges(char c) {
    switch (c) {
    case 'd': return "0-9";
    case 'w': return "a-zA-Z0-9_";
    case 's': return " \\t\\n\\r\\x0B\\x0C";
    default: return NULL;
    }
}

/* An escape after '\\' (R->p past it): a code point (1), a class letter
 * (2: *cls set), or failure. */
static int escape(rx *R, uint32_t *cp, char *cls) {
    if (R->p >= R->end) return rx_fail(R, HEARTH_EINVAL, "the expression ends in an escape");
    char c = *R->p++;
    switch (c) {
    case 'n': *cp = '\n'; return 1;
    case 't': *cp = '\t'; return 1;
    case 'r': *cp = '\r'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'v': *cp = '\v'; return 1;
    case '0': *cp = 0; return 1;
    case 'x': return hexval(R, 2, cp) ? -1 : 1;
    case 'u': return hexval(R, 4, cp) ? -1 : 1;
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S': *cls = c; return 2;
    case 'b': case 'B': return rx_fail(R, HEARTH_ENOTSUP, "word boundaries (\\%c) are not supported", c);
    default:
        if (c >= '1' && c <= '9') return rx_fail(R, HEARTH_ENOTSUP, "backreferences (\\%c) are not supported", c);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return rx_fail(R, HEARTH_ENOTSUP, "the escape \\%c is not supported", c);
        *cp = (uint8_t)c; /* escaped punctuation: itself */
        return 1;
    }
}

static int parse_class(rx *R) {
    R->p++; /* '[' */
    if (puts_(R, "[")) return -1;
    if (R->p < R->end && *R->p == '^') {
        R->p++;
        if (puts_(R, "^")) return -1;
    }
    int first = 1;
    while (R->p < R->end && (*R->p != ']' || first)) {
        first = 0;
        uint32_t lo;
        char cls = 0;
        if (*R->p == '\\') {
            R->p++;
            int k = escape(R, &lo, &cls);
            if (k < 0) return -1;
            if (k == 2) {
                const char *r = class_ranges(cls);
                if (!r) return rx_fail(R, HEARTH_ENOTSUP, "\\%c inside a class is not supported", cls);
                if (puts_(R, r)) return -1;
                continue;
            }
        } else if (utf8_char(R, &lo)) {
            return -1;
        }
        if (put_cp(R, lo)) return -1;
        if (R->p + 1 < R->end && *R->p == '-' && R->p[1] != ']') {
            R->p++;
            uint32_t hi;
            if (*R->p == '\\') {
                R->p++;
                int k = escape(R, &hi, &cls);
                if (k < 0) return -1;
                if (k == 2) return rx_fail(R, HEARTH_EINVAL, "a range ending in a class (\\%c)", cls);
            } else if (utf8_char(R, &hi)) {
                return -1;
            }
            if (hi < lo) return rx_fail(R, HEARTH_EINVAL, "a range whose end is before its start");
            if (puts_(R, "-") || put_cp(R, hi)) return -1;
        }
    }
    if (R->p >= R->end) return rx_fail(R, HEARTH_EINVAL, "a class without its ']'");
    R->p++;
    return puts_(R, "]");
}

static int parse_alt(rx *R, int *nullable);

/* The quantifier after an atom, if any; *nullable: the atom can match nothing, then the quantified atom. An
 * unbounded repetition of what can match nothing would be a left-recursive grammar: refused by name. */
static int parse_quant(rx *R, int *nullable) {
    if (R->p >= R->end) return 0;
    char c = *R->p;
    int min = 1, unbounded = 0;
    if (c == '*' || c == '+' || c == '?') {
        R->p++;
        min = c == '+';
        unbounded = c != '?';
        if (put(R, &c, 1)) return -1;
    } else if (c == '{') {
        const char *q = R->p + 1;
        int m = 0, n = -1, digits = 0;
        while (q < R->end && *q >= '0' && *q <= '9' && m <= 100000) m = m * 10 + (*q++ - '0'), digits++;
        if (q < R->end && *q == ',') {
            q++;
            if (q < R->end && *q >= '0' && *q <= '9') {
                n = 0;
                while (q < R->end && *q >= '0' && *q <= '9' && n <= 100000) n = n * 10 + (*q++ - '0');
            }
        } else {
            n = m;
        }
        if ((!digits && n < 0) || q >= R->end || *q != '}') /* not a quantifier: a literal '{' (as Python's re) */
            return 0;
        char b[48];
        snprintf(b, sizeof b, n < 0 ? "{%d,}" : "{%d,%d}", m, n);
        R->p = q + 1;
        min = m;
        unbounded = n < 0;
        if (puts_(R, b)) return -1;
    } else {
        return 0;
    }
    if (unbounded && *nullable)
        return rx_fail(R, HEARTH_ENOTSUP, "an unbounded repetition of something that can match nothing (as in "
                       "'(a?)*') is not supported: make what repeats match at least one character");
    *nullable = *nullable || min == 0;
    if (R->p < R->end && *R->p == '?') R->p++; /* lazy: the same language */
    else if (R->p < R->end && *R->p == '+')
        return rx_fail(R, HEARTH_ENOTSUP, "possessive quantifiers are not supported");
    if (R->p < R->end && strchr("*+?", *R->p)) return rx_fail(R, HEARTH_EINVAL, "a quantifier after a quantifier");
    return 0;
}

static int parse_seq(rx *R, int *nullable) {
    int items = 0;
    *nullable = 1;
    while (R->p < R->end && *R->p != '|' && *R->p != ')') {
        char c = *R->p;
        int atom_nullable = 0;
        if (items++ && puts_(R, " ")) return -1;
        if (c == '(') {
            R->p++;
            if (R->p < R->end && *R->p == '?') {
                if (R->end - R->p >= 2 && R->p[1] == ':') R->p += 2;
                else if (R->end - R->p >= 3 && (R->p[1] == 'P' || R->p[1] == '<') &&
                         (R->p[1] == 'P' ? R->p[2] == '<' : (R->p[2] != '=' && R->p[2] != '!'))) {
                    const char *close = memchr(R->p, '>', (size_t)(R->end - R->p));
                    if (!close) return rx_fail(R, HEARTH_EINVAL, "a group name without its '>'");
                    R->p = close + 1;
                } else {
                    return rx_fail(R, HEARTH_ENOTSUP, "lookaround and inline flags ((?...)) are not supported");
                }
            }
            if (++R->depth > 64) return rx_fail(R, HEARTH_EINVAL, "groups nested more than 64 deep");
            if (puts_(R, "(") || parse_alt(R, &atom_nullable)) return -1;
            R->depth--;
            if (R->p >= R->end || *R->p != ')') return rx_fail(R, HEARTH_EINVAL, "a group without its ')'");
            R->p++;
            if (puts_(R, ")")) return -1;
        } else if (c == '[') {
            if (parse_class(R)) return -1;
        } else if (c == '.') {
            R->p++;
            if (puts_(R, "[^\\n]")) return -1;
        } else if (c == '^' && items == 1 && !R->depth) { /* an alternative's start: the output's */
            R->p++;
            items--;
            continue;
        } else if (c == '$' && !R->depth && (R->p + 1 == R->end || R->p[1] == '|')) { /* its end: the output's */
            R->p++;
            if (items == 1 && puts_(R, "\"\"")) return -1;
            break;
        } else if (c == '*' || c == '+' || c == '?') {
            return rx_fail(R, HEARTH_EINVAL, "a quantifier '%c' with nothing before it", c);
        } else {
            uint32_t cp;
            char cls = 0;
            int k = 1;
            if (c == '\\') {
                R->p++;
                k = escape(R, &cp, &cls);
                if (k < 0) return -1;
            } else if (c == '^' || c == '$') {
                return rx_fail(R, HEARTH_ENOTSUP, "'%c' inside the expression is not supported (the whole output "
                               "matches)", c);
            } else if (utf8_char(R, &cp)) {
                return -1;
            }
            if (k == 2) {
                const char *r = class_ranges((char)(cls | 0x20));
                if (puts_(R, cls >= 'a' ? "[" : "[^") || puts_(R, r) || puts_(R, "]")) return -1;
            } else if (puts_(R, "\"") || put_cp(R, cp) || puts_(R, "\"")) {
                return -1;
            }
        }
        if (parse_quant(R, &atom_nullable)) return -1;
        *nullable = *nullable && atom_nullable;
    }
    return items ? 0 : puts_(R, "\"\"");
}

static int parse_alt(rx *R, int *nullable) {
    int n;
    if (parse_seq(R, nullable)) return -1;
    while (R->p < R->end && *R->p == '|') {
        R->p++;
        if (puts_(R, " | ") || parse_seq(R, &n)) return -1;
        *nullable = *nullable || n;
    }
    return 0;
}

hearth_status hearth_grammar_from_regex(char **gbnf, const char *re, size_t len, hearth_err *err) {
    *gbnf = NULL;
    rx R = {.p = re, .end = re + len, .start = re, .err = err, .st = HEARTH_OK};
    int nullable;
    if (puts_(&R, "root ::= ") == 0 && parse_alt(&R, &nullable) == 0 && R.p < R.end)
        rx_fail(&R, HEARTH_EINVAL, "an unmatched ')'");
    if (R.st != HEARTH_OK) {
        free(R.out);
        return R.st;
    }
    *gbnf = R.out;
    return HEARTH_OK;
}
