/* json_schema.c - structured output: the JSON automaton of json_mode.c with a
 * JSON Schema's rules on top, byte by byte (see json_mode.h for the subset).
 *
 * A schema compiles into nodes (kind, properties, required set, items,
 * enum texts, alternatives); $ref points at a node, so recursive schemas
 * work. The state is the JSON automaton's plus one frame per open container
 * (its node, the properties given, the properties the key typed so far can
 * still be) and the scalar being read (an enum's candidates). anyOf is
 * resolved by the value's first byte, so its alternatives must start apart
 * (an object and null: yes; two objects: refused at compile). */
#include "completion/json_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_ANY, S_OBJECT, S_ARRAY, S_STRING, S_NUMBER, S_INTEGER, S_BOOLEAN, S_NULL, S_ENUM, S_ANYOF };

#define S_MAX_NODES 1024
#define S_MAX_PROPS 64

typedef struct {
    uint8_t kind, n;   /* n: properties (object), values (enum), alternatives (anyOf) */
    int16_t sub;       /* object: additional properties' node, -1 none; array: items' node */
    uint64_t required; /* object: bit i = property i */
    int first;         /* object: into names / targets; enum: into texts; anyOf: into alts */
} snode;

struct hearth_schema {
    snode node[S_MAX_NODES];
    int n_nodes, root;
    char **strs; /* property names and enum texts */
    int16_t *targets;
    int n_strs, cap_strs;
    char *refs[S_MAX_NODES]; /* the $ref each node was made for, or NULL */
    int16_t *pick;           /* [n_nodes][256]: for an anyOf, the alternative a value's first byte starts, or -1 */
};

/* An error while compiling: err filled, -1 for the node. */
static int bad(hearth_err *err, hearth_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(hearth_err *err, hearth_status st, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hearth_err_set(err, st, "%s", msg);
    return -1;
}

static int add_str(hearth_schema *s, const char *str, int16_t target) {
    if (s->n_strs == s->cap_strs) {
        int cap = s->cap_strs ? s->cap_strs * 2 : 64;
        char **p = realloc(s->strs, sizeof *p * (size_t)cap);
        if (!p) return -1;
        s->strs = p;
        int16_t *t = realloc(s->targets, sizeof *t * (size_t)cap);
        if (!t) return -1;
        s->targets = t;
        s->cap_strs = cap;
    }
    if (!(s->strs[s->n_strs] = strdup(str))) return -1;
    s->targets[s->n_strs] = target;
    return s->n_strs++;
}

static int new_node(hearth_schema *s, int kind, hearth_err *err) {
    if (s->n_nodes == S_MAX_NODES)
        return bad(err, HEARTH_EINVAL, "the schema has more than %d parts", S_MAX_NODES);
    s->node[s->n_nodes] = (snode){.kind = (uint8_t)kind, .sub = -1};
    return s->n_nodes++;
}

static const char *const KEYWORDS[] = {"type", "properties", "required", "additionalProperties", "items", "enum",
                                       "const", "anyOf", "oneOf", "$ref", "$defs", "definitions", "description",
                                       "title", "default", "examples", "$schema", "$id", "$comment"};

static int compile(hearth_schema *s, const json_t *root, const json_t *sch, const char *path, int depth,
                   hearth_err *err);

/* A node for one of the JSON types ("string", ...), sch's other keywords applying to it. */
static int type_node(hearth_schema *s, const json_t *root, const json_t *sch, const char *type, const char *path,
                     int depth, hearth_err *err) {
    static const char *const names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    int kind = -1;
    for (int i = 0; i < 7; i++)
        if (!strcmp(type, names[i])) kind = S_OBJECT + i;
    if (kind < 0)
        return bad(err, HEARTH_EINVAL, "%s: unknown type '%s'", path, type);
    int id = new_node(s, kind, err);
    if (id < 0) return -1;
    char sub[256];
    if (kind == S_ARRAY) {
        json_t *items = json_object_get(sch, "items");
        snprintf(sub, sizeof sub, "%s.items", path);
        int it = items ? compile(s, root, items, sub, depth + 1, err) : new_node(s, S_ANY, err);
        if (it < 0) return -1;
        s->node[id].sub = (int16_t)it;
    } else if (kind == S_OBJECT) {
        json_t *props = json_object_get(sch, "properties"), *req = json_object_get(sch, "required");
        json_t *add = json_object_get(sch, "additionalProperties");
        if (props && !json_is_object(props))
            return bad(err, HEARTH_EINVAL, "%s.properties: expected an object", path);
        if (json_object_size(props) > S_MAX_PROPS)
            return bad(err, HEARTH_EINVAL, "%s: more than %d properties", path, S_MAX_PROPS);
        s->node[id].first = s->n_strs;
        const char *k;
        json_t *v;
        json_object_foreach(props, k, v) {
            for (const char *c = k; *c; c++)
                if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                    return bad(err, HEARTH_EINVAL, "%s: property name '%s' needs escaping, which is not supported",
                                   path, k);
            if (add_str(s, k, -1) < 0) return bad(err, HEARTH_ENOMEM, "schema: out of memory");
            s->node[id].n++;
        }
        int i = 0; /* the value nodes, once the names are in a row */
        json_object_foreach(props, k, v) {
            snprintf(sub, sizeof sub, "%s.properties.%s", path, k);
            int t = compile(s, root, v, sub, depth + 1, err);
            if (t < 0) return -1;
            s->targets[s->node[id].first + i++] = (int16_t)t;
        }
        size_t r;
        json_t *name;
        json_array_foreach(req, r, name) {
            int found = -1;
            for (int p = 0; p < s->node[id].n; p++)
                if (json_is_string(name) && !strcmp(s->strs[s->node[id].first + p], json_string_value(name)))
                    found = p;
            if (found < 0)
                return bad(err, HEARTH_EINVAL, "%s.required: '%s' is not among the properties", path,
                               json_is_string(name) ? json_string_value(name) : "?");
            s->node[id].required |= 1ull << found;
        }
        if (json_is_false(add)) {
            s->node[id].sub = -1;
        } else {
            snprintf(sub, sizeof sub, "%s.additionalProperties", path);
            int a = json_is_object(add) ? compile(s, root, add, sub, depth + 1, err) : new_node(s, S_ANY, err);
            if (a < 0) return -1;
            s->node[id].sub = (int16_t)a;
        }
    }
    return id;
}

/* The node a "#/$defs/Name" (or "#/definitions/Name") names: made at its first use. */
static int ref_node(hearth_schema *s, const json_t *root, const char *ref, const char *path, int depth,
                    hearth_err *err) {
    for (int i = 0; i < s->n_nodes; i++)
        if (s->refs[i] && !strcmp(s->refs[i], ref)) return i;
    const char *name = NULL;
    const json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) name = ref + 8, defs = json_object_get(root, "$defs");
    else if (!strncmp(ref, "#/definitions/", 14)) name = ref + 14, defs = json_object_get(root, "definitions");
    const json_t *target = name ? json_object_get(defs, name) : !strcmp(ref, "#") ? root : NULL;
    if (!target)
        return bad(err, HEARTH_EINVAL, "%s.$ref: '%s' is not a definition of this schema", path, ref);
    /* a placeholder first, so that a recursive reference finds it */
    int id = new_node(s, S_ANYOF, err);
    if (id < 0) return -1;
    if (!(s->refs[id] = strdup(ref))) return bad(err, HEARTH_ENOMEM, "schema: out of memory");
    int t = compile(s, root, target, ref, depth + 1, err);
    if (t < 0) return -1;
    s->node[id].n = 1; /* an anyOf of one: the definition */
    s->node[id].first = add_str(s, "", (int16_t)t);
    return s->node[id].first < 0 ? bad(err, HEARTH_ENOMEM, "schema: out of memory") : id;
}

/* anyOf of the nodes made for each entry of list (or of type names). */
static int anyof_node(hearth_schema *s, const json_t *root, const json_t *sch, const json_t *list, int types,
                      const char *path, int depth, hearth_err *err) {
    int id = new_node(s, S_ANYOF, err);
    if (id < 0) return -1;
    int alts[64], n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (n == 64) return bad(err, HEARTH_EINVAL, "%s: more than 64 alternatives", path);
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (types && !json_is_string(v)) return bad(err, HEARTH_EINVAL, "%s: a type must be a string", path);
        int a = types ? type_node(s, root, sch, json_string_value(v), path, depth, err)
                      : compile(s, root, v, sub, depth + 1, err);
        if (a < 0) return -1;
        alts[n++] = a;
    }
    if (n == 0) return bad(err, HEARTH_EINVAL, "%s: an empty list of alternatives", path);
    s->node[id].first = s->n_strs;
    s->node[id].n = (uint8_t)n;
    for (int k = 0; k < n; k++)
        if (add_str(s, "", (int16_t)alts[k]) < 0) return bad(err, HEARTH_ENOMEM, "schema: out of memory");
    return id;
}

static int enum_node(hearth_schema *s, const json_t *values, const char *path, hearth_err *err) {
    int id = new_node(s, S_ENUM, err);
    if (id < 0) return -1;
    s->node[id].first = s->n_strs;
    size_t i;
    json_t *v;
    json_array_foreach(values, i, v) {
        if (!json_is_string(v) && !json_is_boolean(v) && !json_is_null(v))
            return bad(err, HEARTH_EINVAL, "%s[%zu]: only strings, booleans and null are supported as enum or const "
                       "values", path, i);
        if (s->node[id].n == 64) /* the candidates are a 64-bit set */
            return bad(err, HEARTH_EINVAL, "%s: more than 64 values", path);
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        int ok = text && add_str(s, text, -1) >= 0;
        free(text);
        if (!ok) return bad(err, HEARTH_ENOMEM, "schema: out of memory");
        s->node[id].n++;
    }
    if (!s->node[id].n) return bad(err, HEARTH_EINVAL, "%s: an empty enum", path);
    return id;
}

static int compile(hearth_schema *s, const json_t *root, const json_t *sch, const char *path, int depth,
                   hearth_err *err) {
    if (depth > 64) return bad(err, HEARTH_EINVAL, "%s: nested too deep", path);
    if (json_is_true(sch)) return new_node(s, S_ANY, err);
    if (!json_is_object(sch)) return bad(err, HEARTH_EINVAL, "%s: a schema must be an object", path);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sch, k, v) {
        int known = 0;
        for (size_t i = 0; i < sizeof KEYWORDS / sizeof *KEYWORDS; i++) known |= !strcmp(k, KEYWORDS[i]);
        if (!known)
            return bad(err, HEARTH_ENOTSUP,
                                  "%s: the keyword '%s' is not supported (supported: type, properties, required, "
                                  "additionalProperties, items, enum, const, anyOf, oneOf, $ref with $defs, and "
                                  "annotations)",
                                  path, k);
    }
    json_t *ref = json_object_get(sch, "$ref"), *type = json_object_get(sch, "type");
    json_t *any = json_object_get(sch, "anyOf");
    if (!any) any = json_object_get(sch, "oneOf");
    char sub[256];
    if (json_is_string(ref)) return ref_node(s, root, json_string_value(ref), path, depth, err);
    if (json_object_get(sch, "const")) {
        json_t *one = json_pack("[O]", json_object_get(sch, "const"));
        snprintf(sub, sizeof sub, "%s.const", path);
        int id = enum_node(s, one, sub, err);
        json_decref(one);
        return id;
    }
    if (json_is_array(json_object_get(sch, "enum"))) {
        snprintf(sub, sizeof sub, "%s.enum", path);
        return enum_node(s, json_object_get(sch, "enum"), sub, err);
    }
    if (json_is_array(any)) {
        snprintf(sub, sizeof sub, "%s.anyOf", path);
        return anyof_node(s, root, sch, any, 0, sub, depth, err);
    }
    if (json_is_array(type)) return anyof_node(s, root, sch, type, 1, path, depth, err);
    if (json_is_string(type)) return type_node(s, root, sch, json_string_value(type), path, depth, err);
    if (json_object_get(sch, "properties")) return type_node(s, root, sch, "object", path, depth, err);
    if (json_object_get(sch, "items")) return type_node(s, root, sch, "array", path, depth, err);
    return new_node(s, S_ANY, err);
}

/* The bytes a value of node n can start with (into set[256]); depth guards $ref cycles. */
static void first_bytes(const hearth_schema *s, int n, uint8_t *set, int depth) {
    const snode *x = &s->node[n];
    const char *starts = "";
    switch (x->kind) {
    case S_ANY: starts = "{[\"-0123456789tfn"; break;
    case S_OBJECT: starts = "{"; break;
    case S_ARRAY: starts = "["; break;
    case S_STRING: starts = "\""; break;
    case S_NUMBER:
    case S_INTEGER: starts = "-0123456789"; break;
    case S_BOOLEAN: starts = "tf"; break;
    case S_NULL: starts = "n"; break;
    case S_ENUM:
        for (int i = 0; i < x->n; i++) set[(uint8_t)s->strs[x->first + i][0]] = 1;
        break;
    case S_ANYOF:
        if (depth < 16)
            for (int i = 0; i < x->n; i++) first_bytes(s, s->targets[x->first + i], set, depth + 1);
        break;
    }
    for (const char *c = starts; *c; c++) set[(uint8_t)*c] = 1;
}

/* anyOf's alternatives must start apart (integer beside number is number's),
 * so a value's first byte picks one: the table made here, once. */
static hearth_status index_anyof(hearth_schema *s, hearth_err *err) {
    if (!(s->pick = malloc(sizeof *s->pick * 256 * (size_t)s->n_nodes)))
        return hearth_err_set(err, HEARTH_ENOMEM, "schema: out of memory");
    for (int n = 0; n < s->n_nodes; n++) {
        const snode *x = &s->node[n];
        int16_t *pick = s->pick + (size_t)n * 256;
        for (int c = 0; c < 256; c++) pick[c] = -1;
        if (x->kind != S_ANYOF) continue;
        for (int i = 0; i < x->n; i++) {
            uint8_t set[256] = {0};
            first_bytes(s, s->targets[x->first + i], set, 0);
            for (int c = 0; c < 256; c++) {
                if (!set[c]) continue;
                if (pick[c] >= 0)
                    return hearth_err_set(err, HEARTH_ENOTSUP,
                                          "anyOf / oneOf / a list of types whose alternatives can start with the same "
                                          "byte ('%c') is not supported (an object beside null is; two objects, or "
                                          "integer beside number, are not)",
                                          c);
                pick[c] = s->targets[x->first + i];
            }
        }
    }
    return HEARTH_OK;
}

hearth_status hearth_schema_compile(hearth_schema **out, const json_t *schema, hearth_err *err) {
    *out = NULL;
    hearth_schema *s = calloc(1, sizeof *s);
    if (!s) return hearth_err_set(err, HEARTH_ENOMEM, "schema: out of memory");
    s->root = compile(s, schema, schema, "schema", 0, err);
    hearth_status st = s->root < 0 ? (err->status ? err->status : HEARTH_EINVAL) : index_anyof(s, err);
    if (st == HEARTH_OK) { /* the answer is one object */
        int r = s->root;
        while (s->node[r].kind == S_ANYOF && s->node[r].n == 1) r = s->targets[s->node[r].first];
        if (s->node[r].kind != S_OBJECT && s->node[r].kind != S_ANY)
            st = hearth_err_set(err, HEARTH_ENOTSUP, "schema: the root must be an object");
        s->root = r;
    }
    if (st != HEARTH_OK) {
        hearth_schema_free(s);
        return st;
    }
    *out = s;
    return HEARTH_OK;
}

void hearth_schema_free(hearth_schema *s) {
    if (!s) return;
    for (int i = 0; i < s->n_strs; i++) free(s->strs[i]);
    for (int i = 0; i < s->n_nodes; i++) free(s->refs[i]);
    free(s->strs);
    free(s->targets);
    free(s->pick);
    free(s);
}

/* ---- the automaton ---- */

void hearth_schema_init(const hearth_schema *s, hearth_schema_state *st) {
    memset(st, 0, offsetof(hearth_schema_state, f));
    hearth_json_init(&st->j);
    st->scalar = -1;
    st->pending = -1;
    (void)s;
}

void hearth_schema_copy(hearth_schema_state *dst, const hearth_schema_state *src) {
    memcpy(dst, src, offsetof(hearth_schema_state, f) + sizeof src->f[0] * src->j.depth);
}

/* anyOf resolved by the value's first byte; -1 if no alternative starts so. */
static int resolve(const hearth_schema *s, int n, uint8_t c) {
    for (int guard = 0; n >= 0 && s->node[n].kind == S_ANYOF && guard < 32; guard++) n = s->pick[n * 256 + c];
    return n >= 0 && s->node[n].kind != S_ANYOF ? n : -1;
}

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The first byte of a value of node n: the scalar to follow, or the container to open. */
static int value_start(const hearth_schema *s, hearth_schema_state *st, int n, uint8_t c) {
    if ((n = resolve(s, n, c)) < 0) return 0;
    const snode *x = &s->node[n];
    int ok;
    switch (x->kind) {
    case S_ANY: ok = 1; break;
    case S_OBJECT: ok = c == '{'; break;
    case S_ARRAY: ok = c == '['; break;
    case S_STRING: ok = c == '"'; break;
    case S_NUMBER:
    case S_INTEGER: ok = c == '-' || (c >= '0' && c <= '9'); break;
    case S_BOOLEAN: ok = c == 't' || c == 'f'; break;
    case S_NULL: ok = c == 'n'; break;
    default: /* S_ENUM */
        st->ecand = 0;
        for (int i = 0; i < x->n; i++)
            if ((uint8_t)s->strs[x->first + i][0] == c) st->ecand |= 1ull << i;
        ok = st->ecand != 0;
        st->epos = 1;
        break;
    }
    st->scalar = c == '{' || c == '[' ? -1 : n;
    st->pending = c == '{' || c == '[' ? n : -1;
    return ok;
}

/* A byte of an object's key (the frame's candidates narrowed, or a free key). */
static int key_byte(const hearth_schema *s, schema_frame *f, uint8_t c) {
    const snode *x = &s->node[f->node];
    int extra = x->kind == S_ANY || x->sub >= 0;
    if (c == '"') { /* the key ends: exactly one property, or an additional one */
        if (!f->free)
            for (int i = 0; i < x->n; i++)
                if (f->cand >> i & 1 && !s->strs[x->first + i][f->klen]) {
                    f->seen |= 1ull << i;
                    f->value = s->targets[x->first + i];
                    return 1;
                }
        if (!extra) return 0;
        f->value = x->kind == S_ANY ? f->node : x->sub;
        return 1;
    }
    if (f->free) return 1;
    uint64_t cand = 0;
    if (c != '\\')
        for (int i = 0; i < x->n; i++)
            if (f->cand >> i & 1 && (uint8_t)s->strs[x->first + i][f->klen] == c) cand |= 1ull << i;
    if (!cand) {
        if (!extra) return 0;
        f->free = 1; /* no property: an additional one */
        return 1;
    }
    f->cand = cand;
    f->klen++;
    return 1;
}

static int number_mode(int m) {
    return m == J_MINUS || m == J_ZERO || m == J_INT || m == J_DOT || m == J_FRAC || m == J_E || m == J_ESIGN ||
           m == J_EXP;
}

int hearth_schema_step(const hearth_schema *s, hearth_schema_state *st, uint8_t c) {
    const int mode0 = st->j.mode, depth = st->j.depth;
    /* a byte that cannot go on a number ends it: it is the byte after a value */
    int more = (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
    const int mode = number_mode(mode0) && !more ? J_AFTER : mode0;
    schema_frame *f = depth ? &st->f[depth - 1] : NULL;
    const snode *fx = f ? &s->node[f->node] : NULL;
    int obj = f && (fx->kind == S_OBJECT || (fx->kind == S_ANY && st->j.stack >> (depth - 1) & 1));
    if (mode == J_STR && st->j.key) {
        if (!key_byte(s, f, c)) return 0;
    } else if ((mode == J_TOP || mode == J_VALUE || (mode == J_ARR_FIRST && c != ']')) && !is_ws(c)) {
        int n = mode == J_TOP ? s->root : f->value;
        if (!value_start(s, st, n, c)) return 0;
    } else if (obj && c == '}' && (mode == J_OBJ_FIRST || mode == J_AFTER)) {
        if (fx->kind == S_OBJECT && (fx->required & ~f->seen)) return 0; /* a required property is missing */
    } else if (obj && c == ',' && mode == J_AFTER && fx->kind == S_OBJECT && fx->sub < 0) {
        uint64_t all = fx->n == 64 ? ~0ull : (1ull << fx->n) - 1;
        if (!(all & ~f->seen)) return 0; /* no property left to give */
    } else if (st->scalar >= 0) {
        const snode *x = &s->node[st->scalar];
        if (x->kind == S_INTEGER && number_mode(mode) && (c == '.' || c == 'e' || c == 'E')) return 0;
        if (x->kind == S_ENUM && (mode == J_STR || mode == J_ESC || mode == J_HEX || mode == J_LIT)) {
            uint64_t cand = 0;
            for (int i = 0; i < x->n; i++)
                if (st->ecand >> i & 1 && (uint8_t)s->strs[x->first + i][st->epos] == c) cand |= 1ull << i;
            if (!cand) return 0;
            st->ecand = cand;
            st->epos++;
        }
    }
    if (!hearth_json_step(&st->j, c)) return 0;
    if (st->j.depth > depth) { /* a container opened */
        const snode *x = &s->node[st->pending];
        st->f[depth] = (schema_frame){.node = (int16_t)st->pending,
                                      .value = x->kind == S_ARRAY ? x->sub : (int16_t)st->pending};
        if (x->kind == S_ANY) st->f[depth].value = st->pending; /* any inside any */
    } else if (st->j.depth == depth && f && mode != J_STR && st->j.mode == J_STR && st->j.key) {
        f->cand = ~f->seen; /* a key begins */
        f->klen = 0;
        f->free = 0;
    }
    if (st->scalar >= 0 && s->node[st->scalar].kind == S_ENUM && (mode == J_STR || mode == J_LIT) &&
        st->j.mode != J_STR && st->j.mode != J_LIT && st->j.mode != J_ESC && st->j.mode != J_HEX) {
        const snode *x = &s->node[st->scalar]; /* the value ended: one candidate whole */
        int whole = 0;
        for (int i = 0; i < x->n; i++) whole |= st->ecand >> i & 1 && !s->strs[x->first + i][st->epos];
        if (!whole) return 0;
        st->scalar = -1;
    }
    return 1;
}

int hearth_schema_feed(const hearth_schema *s, hearth_schema_state *st, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!hearth_schema_step(s, st, b[i])) return 0;
    return 1;
}
