/* json_mode.c - JSON mode's automaton, the vocabulary's bytes and the
 * sampler constraint. See json_mode.h. */
#include "completion/json_mode.h"

#include "completion/json_internal.h"

#include "completion/sink.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define J_MAX_WS 64 /* a newline and deep indentation, not an endless run */

static const char *const LITS[] = {"true", "false", "null"};

void hearth_json_init(hearth_json_state *s) {
    memset(s, 0, sizeof *s);
    s->mode = J_TOP;
}

int hearth_json_done(const hearth_json_state *s) { return s->mode == J_DONE; }

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static int is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static void value_done(hearth_json_state *s) { s->mode = s->depth ? J_AFTER : J_DONE; }

static int push(hearth_json_state *s, int object) {
    if (s->depth == J_MAX_DEPTH) return 0;
    if (object) s->stack |= 1u << s->depth;
    else s->stack &= ~(1u << s->depth);
    s->depth++;
    s->mode = object ? J_OBJ_FIRST : J_ARR_FIRST;
    return 1;
}

static int top_is_object(const hearth_json_state *s) { return s->depth && (s->stack >> (s->depth - 1) & 1); }

/* The first byte of a value. */
static int value_start(hearth_json_state *s, uint8_t c) {
    switch (c) {
    case '{': return push(s, 1);
    case '[': return push(s, 0);
    case '"': s->mode = J_STR, s->key = 0; return 1;
    case '-': s->mode = J_MINUS; return 1;
    case '0': s->mode = J_ZERO; return 1;
    case 't': s->mode = J_LIT, s->lit = 0, s->pos = 1; return 1;
    case 'f': s->mode = J_LIT, s->lit = 1, s->pos = 1; return 1;
    case 'n': s->mode = J_LIT, s->lit = 2, s->pos = 1; return 1;
    default:
        if (c >= '1' && c <= '9') {
            s->mode = J_INT;
            return 1;
        }
        return 0;
    }
}

/* A byte after a value: ',' or the end of its container. */
static int after_value(hearth_json_state *s, uint8_t c) {
    int obj = top_is_object(s);
    if (c == ',') s->mode = obj ? J_OBJ_KEY : J_VALUE;
    else if (c == (obj ? '}' : ']')) s->depth--, value_done(s);
    else return 0;
    return 1;
}

int hearth_json_step(hearth_json_state *s, uint8_t c) {
    if (!is_ws(c)) s->ws = 0; /* the whitespace limit counts bytes in a row */
    switch (s->mode) {
    case J_STR:
        if (c == '"') {
            if (s->key) s->mode = J_COLON;
            else value_done(s);
        } else if (c == '\\') {
            s->mode = J_ESC;
        } else if (c < 0x20) {
            return 0;
        }
        return 1;
    case J_ESC:
        if (c == 'u') s->mode = J_HEX, s->hex = 4;
        else if (strchr("\"\\/bfnrt", c) && c) s->mode = J_STR;
        else return 0;
        return 1;
    case J_HEX:
        if (!is_hex(c)) return 0;
        if (--s->hex == 0) s->mode = J_STR;
        return 1;
    case J_LIT:
        if (c != (uint8_t)LITS[s->lit][s->pos]) return 0;
        if (!LITS[s->lit][++s->pos]) value_done(s);
        return 1;
    case J_MINUS:
        if (c == '0') s->mode = J_ZERO;
        else if (is_digit(c)) s->mode = J_INT;
        else return 0;
        return 1;
    case J_DOT:
        if (!is_digit(c)) return 0;
        s->mode = J_FRAC;
        return 1;
    case J_E:
        if (c == '+' || c == '-') s->mode = J_ESIGN;
        else if (is_digit(c)) s->mode = J_EXP;
        else return 0;
        return 1;
    case J_ESIGN:
        if (!is_digit(c)) return 0;
        s->mode = J_EXP;
        return 1;
    case J_ZERO:
    case J_INT:
    case J_FRAC:
    case J_EXP: /* a number goes on, or ends at this byte */
        if (is_digit(c) && s->mode != J_ZERO) return 1;
        if (c == '.' && (s->mode == J_ZERO || s->mode == J_INT)) {
            s->mode = J_DOT;
            return 1;
        }
        if ((c == 'e' || c == 'E') && s->mode != J_EXP) {
            s->mode = J_E;
            return 1;
        }
        value_done(s); /* numbers are never top-level: J_AFTER */
        break;         /* this byte is the next state's */
    default: break;
    }
    if (is_ws(c)) { /* between tokens of the structure */
        if (s->mode == J_DONE || ++s->ws > J_MAX_WS) return 0;
        return 1;
    }
    switch (s->mode) {
    case J_TOP: return c == '{' && push(s, 1);
    case J_VALUE: return value_start(s, c);
    case J_ARR_FIRST:
        if (c == ']') {
            s->depth--;
            value_done(s);
            return 1;
        }
        return value_start(s, c);
    case J_OBJ_FIRST:
        if (c == '}') {
            s->depth--;
            value_done(s);
            return 1;
        }
        /* fall through */
    case J_OBJ_KEY:
        if (c != '"') return 0;
        s->mode = J_STR, s->key = 1;
        return 1;
    case J_COLON:
        if (c != ':') return 0;
        s->mode = J_VALUE;
        return 1;
    case J_AFTER: return after_value(s, c);
    default: return 0; /* J_DONE */
    }
}

int hearth_json_feed(hearth_json_state *s, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!hearth_json_step(s, b[i])) return 0;
    return 1;
}

/* ---- the vocabulary's bytes ---- */

hearth_status hearth_vocab_bytes_build(hearth_vocab_bytes *v, const hearth_tokenizer *tok, hearth_err *err) {
    memset(v, 0, sizeof *v);
    int n = hearth_tok_n_vocab(tok);
    size_t cap = (size_t)n * 8 + 64, used = 0;
    v->n = n;
    v->off = malloc(sizeof *v->off * ((size_t)n + 1));
    v->special = calloc((size_t)n, 1);
    v->bytes = malloc(cap);
    /* A token's text in the middle of a stream: after an anchor token (a
     * plain letter), so that no start-of-text rule (a leading space dropped)
     * applies to it. */
    int32_t *anchor_ids = NULL;
    size_t n_anchor = 0;
    hearth_err e2 = {0};
    int32_t anchor = hearth_tok_encode(tok, "a", 1, 0, 0, &anchor_ids, &n_anchor, &e2) == HEARTH_OK && n_anchor
                         ? anchor_ids[n_anchor - 1]
                         : -1;
    free(anchor_ids);
    char *buf = malloc(HEARTH_DETOK_MAX_OUT * 2);
    if (!v->off || !v->special || !v->bytes || !buf) {
        free(buf);
        hearth_vocab_bytes_free(v);
        return hearth_err_set(err, HEARTH_ENOMEM, "JSON mode: out of memory for the vocabulary's bytes");
    }
    for (int id = 0; id < n; id++) {
        v->off[id] = (uint32_t)used;
        v->special[id] = (uint8_t)hearth_tok_is_special(tok, id);
        if (v->special[id]) continue;
        hearth_detok d;
        hearth_detok_init(&d, tok, 0);
        d.raw = 1; /* a byte token's byte, not U+FFFD: a grammar follows UTF-8 sequences across tokens */
        if (anchor >= 0) hearth_detok_push(&d, anchor, buf, HEARTH_DETOK_MAX_OUT);
        size_t k = hearth_detok_push(&d, id, buf, HEARTH_DETOK_MAX_OUT);
        k += hearth_detok_finish(&d, buf + k, HEARTH_DETOK_MAX_OUT);
        if (used + k > cap) {
            size_t nc = cap * 2 + k;
            uint8_t *p = realloc(v->bytes, nc);
            if (!p) {
                free(buf);
                hearth_vocab_bytes_free(v);
                return hearth_err_set(err, HEARTH_ENOMEM, "JSON mode: out of memory for the vocabulary's bytes");
            }
            v->bytes = p;
            cap = nc;
        }
        memcpy(v->bytes + used, buf, k);
        used += k;
    }
    v->off[n] = (uint32_t)used;
    free(buf);
    return HEARTH_OK;
}

void hearth_vocab_bytes_free(hearth_vocab_bytes *v) {
    free(v->off);
    free(v->bytes);
    free(v->special);
    memset(v, 0, sizeof *v);
}

/* ---- the constraint ---- */

typedef struct {
    const hearth_vocab_bytes *v;
    hearth_schema *schema;
    hearth_schema_state st;
    int n_end;
    int32_t end[];
} json_constraint;

static int is_end(const json_constraint *c, int32_t id) {
    for (int i = 0; i < c->n_end; i++)
        if (c->end[i] == id) return 1;
    return 0;
}

static int allowed(const json_constraint *c, int32_t id) {
    const hearth_vocab_bytes *v = c->v;
    int done = hearth_json_done(&c->st.j);
    if (is_end(c, id)) return done;
    if (id >= v->n || v->special[id] || v->off[id] == v->off[id + 1] || done) return 0;
    hearth_schema_state t;
    hearth_schema_copy(&t, &c->st);
    return hearth_schema_feed(c->schema, &t, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
}

static int json_allows(void *self, int32_t id) { return allowed(self, id); }

static void json_mask(void *self, float *logits, int vocab) {
    json_constraint *c = self;
    const hearth_vocab_bytes *v = c->v;
    /* the bytes that can come next, tried once: most tokens fail on their first */
    uint8_t first[256];
    for (int b = 0; b < 256; b++) {
        hearth_schema_state t;
        hearth_schema_copy(&t, &c->st);
        first[b] = (uint8_t)hearth_schema_step(c->schema, &t, (uint8_t)b);
    }
    hearth_vocab_mask(v, first, json_allows, c, c->end, c->n_end, logits, vocab); /* at the nesting limit: the end */
}

void hearth_vocab_mask(const hearth_vocab_bytes *v, const uint8_t first[256], int (*allows)(void *, int32_t),
                       void *self, const int32_t *end, int n_end, float *logits, int vocab) {
    int any = 0;
    for (int id = 0; id < vocab; id++) {
        if (logits[id] == -INFINITY) continue;
        int ok = id < v->n && v->off[id] < v->off[id + 1] && !first[v->bytes[v->off[id]]] ? 0 : allows(self, id);
        if (ok) any = 1;
        else logits[id] = -INFINITY;
    }
    if (!any) /* nothing can continue: end the answer */
        for (int i = 0; i < n_end; i++)
            if (end[i] >= 0 && end[i] < vocab) logits[end[i]] = 0.0f;
}

static void json_accept(void *self, int32_t id) {
    json_constraint *c = self;
    const hearth_vocab_bytes *v = c->v;
    if (is_end(c, id) || id < 0 || id >= v->n) return;
    hearth_schema_feed(c->schema, &c->st, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
}

static void json_free(void *self) {
    json_constraint *c = self;
    hearth_schema_free(c->schema);
    free(c);
}

hearth_status hearth_vocab_bytes_once(hearth_vocab_bytes *v, pthread_mutex_t *mu, const hearth_tokenizer *tok,
                                     hearth_err *err) {
    if (mu) pthread_mutex_lock(mu);
    hearth_status st = v->off ? HEARTH_OK : hearth_vocab_bytes_build(v, tok, err);
    if (mu) pthread_mutex_unlock(mu);
    return st;
}

hearth_status hearth_json_constraint_lazy(hearth_constraint *out, hearth_vocab_bytes *v, pthread_mutex_t *mu,
                                          const hearth_tokenizer *tok, hearth_schema *schema, const int32_t *end_ids,
                                          int n_end, hearth_err *err) {
    hearth_status st = hearth_vocab_bytes_once(v, mu, tok, err);
    if (st != HEARTH_OK) {
        hearth_schema_free(schema);
        return st;
    }
    return hearth_json_constraint(out, v, schema, end_ids, n_end, err);
}

hearth_status hearth_json_constraint(hearth_constraint *out, const hearth_vocab_bytes *v, hearth_schema *schema,
                                     const int32_t *end_ids, int n_end, hearth_err *err) {
    if (!schema) { /* JSON mode: any object */
        json_t *any = json_pack("{s:s}", "type", "object");
        hearth_status st = any ? hearth_schema_compile(&schema, any, err) : HEARTH_ENOMEM;
        json_decref(any);
        if (st != HEARTH_OK) return st == HEARTH_ENOMEM ? hearth_err_set(err, st, "JSON mode: out of memory") : st;
    }
    json_constraint *c = malloc(sizeof *c + sizeof *c->end * (size_t)n_end);
    if (!c) {
        hearth_schema_free(schema);
        return hearth_err_set(err, HEARTH_ENOMEM, "JSON mode: out of memory");
    }
    c->v = v;
    c->schema = schema;
    hearth_schema_init(schema, &c->st);
    c->n_end = n_end;
    memcpy(c->end, end_ids, sizeof *c->end * (size_t)n_end);
    *out = (hearth_constraint){
        .self = c, .allows = json_allows, .mask = json_mask, .accept = json_accept, .free = json_free};
    return HEARTH_OK;
}
