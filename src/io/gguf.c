/* gguf.c - GGUF v2/v3 reader: map, validate everything, then serve lookups.
 *
 * One pass over the header with a bounds-checked cursor. Strings are copied
 * into a growable arena and referred to by offset while parsing (the arena may
 * move); tensor name pointers are fixed up once parsing is done. Keys and
 * tensor names are hashed (open addressing) for lookup and duplicate checks.
 * Every error message starts with the path and names the key or tensor. */
#include "io/gguf.h"

#include "core/dtype.h"
#include "core/file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ARRAY_DEPTH 8 /* arrays of arrays: a bound on recursion, far above real use */

/* A string of a top-level string array: arena offset + length. */
typedef struct { size_t off, len; } sref;

typedef struct {
    size_t key_off, key_len;  /* arena */
    hearth_gguf_type type;
    const uint8_t *raw;       /* scalars: the value bytes in the map */
    size_t str_off, str_len;  /* STRING: arena */
    hearth_gguf_type elem;    /* ARRAY: element type */
    uint64_t n;               /* ARRAY: element count */
    const void *arr;          /* ARRAY of numbers/bools: data in the map */
    size_t strs;              /* ARRAY of strings: first index in g->strs */
} kv_entry;

struct hearth_gguf {
    char *path;
    hearth_mmap map;
    uint32_t version, alignment;
    size_t data_off;
    int64_t n_kv, n_tensors;
    kv_entry *kvs;
    hearth_gguf_tensor *tensors;
    size_t *tensor_name_off;   /* while parsing: arena offsets of the names */
    uint64_t *tensor_data_off; /* while parsing: offsets relative to the data section */
    char *arena;
    size_t arena_len, arena_cap;
    sref *strs;
    size_t n_strs, strs_cap;
    int64_t *kv_hash, *t_hash; /* slot -> index, -1 empty; capacity is a power of two */
    size_t kv_hash_cap, t_hash_cap;
};

/* ---------------------------------------------------------------- parsing */

typedef struct {
    hearth_gguf *g;
    const uint8_t *p;
    size_t size, pos;
    hearth_err *err;
    char ctx[192]; /* what is being read: "key general.name", "tensor #3", ... */
} parser;

__attribute__((format(printf, 3, 4)))
static hearth_status perr(parser *ps, hearth_status st, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->ctx[0]) return hearth_err_set(ps->err, st, "%s: %s: %s", ps->g->path, ps->ctx, msg);
    return hearth_err_set(ps->err, st, "%s: %s", ps->g->path, msg);
}

static hearth_status need(parser *ps, uint64_t n, const char *what) {
    if (n > ps->size - ps->pos)
        return perr(ps, HEARTH_EFORMAT, "truncated: %s needs %llu bytes at offset %zu, file size %zu", what,
                    (unsigned long long)n, ps->pos, ps->size);
    return HEARTH_OK;
}

static hearth_status rd_u32(parser *ps, uint32_t *v, const char *what) {
    hearth_status st = need(ps, 4, what);
    if (st) return st;
    memcpy(v, ps->p + ps->pos, 4); /* little-endian host assumed (x86-64, arm64) */
    ps->pos += 4;
    return HEARTH_OK;
}

static hearth_status rd_u64(parser *ps, uint64_t *v, const char *what) {
    hearth_status st = need(ps, 8, what);
    if (st) return st;
    memcpy(v, ps->p + ps->pos, 8);
    ps->pos += 8;
    return HEARTH_OK;
}

/* A GGUF string: bounds-checked; *s points into the map (not NUL-terminated). */
static hearth_status rd_str(parser *ps, const uint8_t **s, uint64_t *len, const char *what) {
    hearth_status st = rd_u64(ps, len, what);
    if (st) return st;
    if (*len > ps->size - ps->pos)
        return perr(ps, HEARTH_EFORMAT, "%s: string length %llu past end of file (offset %zu, size %zu)", what,
                    (unsigned long long)*len, ps->pos, ps->size);
    *s = ps->p + ps->pos;
    ps->pos += (size_t)*len;
    return HEARTH_OK;
}

/* Copy len bytes + NUL into the arena; *off receives the arena offset. */
static hearth_status arena_put(parser *ps, const uint8_t *s, size_t len, size_t *off) {
    hearth_gguf *g = ps->g;
    if (len + 1 > g->arena_cap - g->arena_len) {
        size_t cap = g->arena_cap ? g->arena_cap : 65536;
        while (len + 1 > cap - g->arena_len) cap *= 2;
        char *a = realloc(g->arena, cap);
        if (!a) return perr(ps, HEARTH_ENOMEM, "out of memory (string arena of %zu bytes)", cap);
        g->arena = a;
        g->arena_cap = cap;
    }
    *off = g->arena_len;
    if (len) memcpy(g->arena + g->arena_len, s, len);
    g->arena[g->arena_len + len] = '\0';
    g->arena_len += len + 1;
    return HEARTH_OK;
}

static int scalar_size(uint32_t t) {
    switch (t) {
    case HEARTH_GGUF_U8: case HEARTH_GGUF_I8: case HEARTH_GGUF_BOOL: return 1;
    case HEARTH_GGUF_U16: case HEARTH_GGUF_I16: return 2;
    case HEARTH_GGUF_U32: case HEARTH_GGUF_I32: case HEARTH_GGUF_F32: return 4;
    case HEARTH_GGUF_U64: case HEARTH_GGUF_I64: case HEARTH_GGUF_F64: return 8;
    }
    return 0; /* STRING, ARRAY, unknown */
}

static int type_known(uint32_t t) { return t <= HEARTH_GGUF_F64; }

/* Skip (validate) an array body whose element type and count were read;
 * used for arrays nested inside arrays, which are not stored. */
static hearth_status skip_array(parser *ps, uint32_t elem, uint64_t n, int depth) {
    hearth_status st;
    if (!type_known(elem)) return perr(ps, HEARTH_EFORMAT, "unknown array element type %u", elem);
    int es = scalar_size(elem);
    if (es) {
        if (n > (ps->size - ps->pos) / (uint64_t)es)
            return perr(ps, HEARTH_EFORMAT, "array of %llu %s past end of file (offset %zu, size %zu)",
                        (unsigned long long)n, hearth_gguf_type_name(elem), ps->pos, ps->size);
        ps->pos += (size_t)n * (size_t)es;
        return HEARTH_OK;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (elem == HEARTH_GGUF_STRING) {
            const uint8_t *s;
            uint64_t len;
            if ((st = rd_str(ps, &s, &len, "array string"))) return st;
        } else {
            if (depth >= GGUF_MAX_ARRAY_DEPTH)
                return perr(ps, HEARTH_EFORMAT, "arrays nested deeper than %d", GGUF_MAX_ARRAY_DEPTH);
            uint32_t e2;
            uint64_t n2;
            if ((st = rd_u32(ps, &e2, "nested array type")) || (st = rd_u64(ps, &n2, "nested array count")))
                return st;
            if ((st = skip_array(ps, e2, n2, depth + 1))) return st;
        }
    }
    return HEARTH_OK;
}

static hearth_status parse_kv(parser *ps, int64_t idx) {
    hearth_gguf *g = ps->g;
    kv_entry *kv = &g->kvs[idx];
    hearth_status st;
    snprintf(ps->ctx, sizeof ps->ctx, "metadata entry #%lld", (long long)idx);
    const uint8_t *key;
    uint64_t klen;
    if ((st = rd_str(ps, &key, &klen, "key"))) return st;
    if (memchr(key, 0, (size_t)klen)) return perr(ps, HEARTH_EFORMAT, "key contains a NUL byte");
    snprintf(ps->ctx, sizeof ps->ctx, "key %.*s", (int)(klen > 120 ? 120 : klen), (const char *)key);
    if ((st = arena_put(ps, key, (size_t)klen, &kv->key_off))) return st;
    kv->key_len = (size_t)klen;

    uint32_t type;
    if ((st = rd_u32(ps, &type, "value type"))) return st;
    if (!type_known(type)) return perr(ps, HEARTH_EFORMAT, "unknown value type %u", type);
    kv->type = (hearth_gguf_type)type;
    if (type == HEARTH_GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        if ((st = rd_str(ps, &s, &len, "value"))) return st;
        kv->str_len = (size_t)len;
        return arena_put(ps, s, (size_t)len, &kv->str_off);
    }
    if (type != HEARTH_GGUF_ARRAY) {
        int sz = scalar_size(type);
        if ((st = need(ps, (uint64_t)sz, "value"))) return st;
        kv->raw = ps->p + ps->pos;
        ps->pos += (size_t)sz;
        return HEARTH_OK;
    }

    uint32_t elem;
    uint64_t n;
    if ((st = rd_u32(ps, &elem, "array element type")) || (st = rd_u64(ps, &n, "array count"))) return st;
    if (!type_known(elem)) return perr(ps, HEARTH_EFORMAT, "unknown array element type %u", elem);
    kv->elem = (hearth_gguf_type)elem;
    kv->n = n;
    if (scalar_size(elem)) {
        kv->arr = ps->p + ps->pos;
        return skip_array(ps, elem, n, 1);
    }
    if (elem == HEARTH_GGUF_ARRAY) return skip_array(ps, elem, n, 1);

    /* Array of strings: each string costs at least its 8-byte length, so the
     * count is bounded by the bytes left before anything is allocated. */
    if (n > (ps->size - ps->pos) / 8)
        return perr(ps, HEARTH_EFORMAT, "array of %llu strings past end of file (offset %zu, size %zu)",
                    (unsigned long long)n, ps->pos, ps->size);
    if (n > g->strs_cap - g->n_strs) {
        size_t cap = g->strs_cap ? g->strs_cap : 1024;
        while (n > cap - g->n_strs) cap *= 2;
        sref *t = realloc(g->strs, cap * sizeof *t);
        if (!t) return perr(ps, HEARTH_ENOMEM, "out of memory (%llu strings)", (unsigned long long)n);
        g->strs = t;
        g->strs_cap = cap;
    }
    kv->strs = g->n_strs;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *s;
        uint64_t len;
        if ((st = rd_str(ps, &s, &len, "array string"))) return st;
        sref *r = &g->strs[g->n_strs];
        if ((st = arena_put(ps, s, (size_t)len, &r->off))) return st;
        r->len = (size_t)len;
        g->n_strs++;
    }
    return HEARTH_OK;
}

static hearth_status parse_tensor_info(parser *ps, int64_t idx) {
    hearth_gguf *g = ps->g;
    hearth_gguf_tensor *t = &g->tensors[idx];
    hearth_status st;
    snprintf(ps->ctx, sizeof ps->ctx, "tensor #%lld", (long long)idx);
    const uint8_t *name;
    uint64_t nlen;
    if ((st = rd_str(ps, &name, &nlen, "name"))) return st;
    if (nlen == 0) return perr(ps, HEARTH_EFORMAT, "empty tensor name");
    if (memchr(name, 0, (size_t)nlen)) return perr(ps, HEARTH_EFORMAT, "tensor name contains a NUL byte");
    snprintf(ps->ctx, sizeof ps->ctx, "tensor %.*s", (int)(nlen > 120 ? 120 : nlen), (const char *)name);
    if ((st = arena_put(ps, name, (size_t)nlen, &g->tensor_name_off[idx]))) return st;

    uint32_t n_dims;
    if ((st = rd_u32(ps, &n_dims, "n_dims"))) return st;
    if (n_dims < 1 || n_dims > 4) return perr(ps, HEARTH_EFORMAT, "n_dims %u (must be 1..4)", n_dims);
    t->n_dims = (int)n_dims;
    uint64_t numel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if ((st = rd_u64(ps, &ne, "dimension"))) return st;
        if (ne == 0) return perr(ps, HEARTH_EFORMAT, "ne[%u] = 0 (dimensions must be > 0)", d);
        if (ne > (uint64_t)INT64_MAX || numel > (uint64_t)INT64_MAX / ne)
            return perr(ps, HEARTH_EFORMAT, "ne[%u] = %llu: element count overflows", d, (unsigned long long)ne);
        numel *= ne;
        t->ne[d] = (int64_t)ne;
    }
    if ((st = rd_u32(ps, &t->type, "type"))) return st;
    const hearth_dtype_info *dt = hearth_dtype_get_ggml(t->type);
    if (!dt && hearth_ggml_type_name(t->type))
        return perr(ps, HEARTH_ENOTSUP,
                    "tensor type %s (ggml type %u) is not supported (hearth reads f32, f16, bf16, q4_0, q4_1, q8_0, "
                    "q2_K, q3_K, q4_K, q5_0, q5_1, q5_K, q6_K, iq4_nl and iq4_xs)",
                    hearth_ggml_type_name(t->type), t->type);
    if (!dt) return perr(ps, HEARTH_ENOTSUP, "unknown tensor type %u", t->type);
    if (t->ne[0] % dt->block)
        return perr(ps, HEARTH_EFORMAT, "ne[0] = %lld is not a multiple of the %s block size %d",
                    (long long)t->ne[0], dt->name, dt->block);
    size_t row = hearth_dtype_row_bytes(t->type, t->ne[0]);
    uint64_t rows = numel / (uint64_t)t->ne[0];
    if (row && rows > SIZE_MAX / row) return perr(ps, HEARTH_EFORMAT, "byte size overflows");
    t->nbytes = row * (size_t)rows;

    uint64_t off;
    if ((st = rd_u64(ps, &off, "data offset"))) return st;
    g->tensor_data_off[idx] = off;
    return HEARTH_OK;
}

/* ----------------------------------------------------------------- hashing */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static const char *kv_key(const hearth_gguf *g, int64_t i) { return g->arena + g->kvs[i].key_off; }

static int64_t *hash_new(size_t n, size_t *cap) {
    size_t c = 8;
    while (c < 2 * n) c *= 2;
    int64_t *h = malloc(c * sizeof *h);
    if (h)
        for (size_t i = 0; i < c; i++) h[i] = -1;
    *cap = c;
    return h;
}

/* Insert idx under name; returns the index already there (a duplicate) or -1. */
static int64_t hash_insert(int64_t *h, size_t cap, const char *name, int64_t idx,
                           const char *(*name_of)(const hearth_gguf *, int64_t), const hearth_gguf *g) {
    for (size_t s = (size_t)hash_str(name) & (cap - 1);; s = (s + 1) & (cap - 1)) {
        if (h[s] < 0) { h[s] = idx; return -1; }
        if (strcmp(name_of(g, h[s]), name) == 0) return h[s];
    }
}

static int64_t hash_find(const int64_t *h, size_t cap, const char *name,
                         const char *(*name_of)(const hearth_gguf *, int64_t), const hearth_gguf *g) {
    if (!h || !name) return -1;
    for (size_t s = (size_t)hash_str(name) & (cap - 1);; s = (s + 1) & (cap - 1)) {
        if (h[s] < 0) return -1;
        if (strcmp(name_of(g, h[s]), name) == 0) return h[s];
    }
}

static const char *tensor_name(const hearth_gguf *g, int64_t i) { return g->tensors[i].name; }

/* -------------------------------------------------------------------- open */

static hearth_status parse(parser *ps) {
    hearth_gguf *g = ps->g;
    hearth_status st;
    ps->ctx[0] = '\0';
    if (ps->size < 4 || memcmp(ps->p, GGUF_MAGIC, 4) != 0) {
        uint8_t m[4] = {0};
        memcpy(m, ps->p, ps->size < 4 ? ps->size : 4);
        return perr(ps, HEARTH_EFORMAT, "not a GGUF file (magic %02x %02x %02x %02x, want \"GGUF\")", m[0], m[1],
                    m[2], m[3]);
    }
    ps->pos = 4;
    if ((st = rd_u32(ps, &g->version, "header version"))) return st;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return perr(ps, HEARTH_ENOTSUP, "big-endian GGUF is not supported");
    if (g->version != 2 && g->version != 3)
        return perr(ps, HEARTH_ENOTSUP, "GGUF version %u is not supported (need 2 or 3)", g->version);
    uint64_t n_tensors, n_kv;
    if ((st = rd_u64(ps, &n_tensors, "header tensor count")) || (st = rd_u64(ps, &n_kv, "header kv count")))
        return st;
    /* Each kv takes >= 13 bytes (key length, type, 1-byte value), each tensor
     * info >= 32 (name length, n_dims, one dim, type, offset): bound both by
     * the file size before allocating. */
    size_t left = ps->size - ps->pos;
    if (n_kv > left / 13 || n_tensors > left / 32 || n_kv * 13 + n_tensors * 32 > left)
        return perr(ps, HEARTH_EFORMAT, "header counts (%llu tensors, %llu metadata entries) implausible for file size %zu",
                    (unsigned long long)n_tensors, (unsigned long long)n_kv, ps->size);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->tensor_name_off = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensor_name_off);
    g->tensor_data_off = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensor_data_off);
    if (!g->kvs || !g->tensors || !g->tensor_name_off || !g->tensor_data_off)
        return perr(ps, HEARTH_ENOMEM, "out of memory");

    for (int64_t i = 0; i < g->n_kv; i++)
        if ((st = parse_kv(ps, i))) return st;
    ps->ctx[0] = '\0';

    g->kv_hash = hash_new((size_t)g->n_kv, &g->kv_hash_cap);
    if (!g->kv_hash) return perr(ps, HEARTH_ENOMEM, "out of memory");
    for (int64_t i = 0; i < g->n_kv; i++)
        if (hash_insert(g->kv_hash, g->kv_hash_cap, kv_key(g, i), i, kv_key, g) >= 0)
            return perr(ps, HEARTH_EFORMAT, "duplicate metadata key %s", kv_key(g, i));

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = hash_find(g->kv_hash, g->kv_hash_cap, "general.alignment", kv_key, g);
    if (ai >= 0) {
        snprintf(ps->ctx, sizeof ps->ctx, "key general.alignment");
        if (g->kvs[ai].type != HEARTH_GGUF_U32)
            return perr(ps, HEARTH_EFORMAT, "type %s, expected u32", hearth_gguf_type_name(g->kvs[ai].type));
        uint32_t a;
        memcpy(&a, g->kvs[ai].raw, 4);
        if (a == 0 || (a & (a - 1))) return perr(ps, HEARTH_EFORMAT, "%u is not a power of two", a);
        g->alignment = a;
    }

    for (int64_t i = 0; i < g->n_tensors; i++)
        if ((st = parse_tensor_info(ps, i))) return st;
    ps->ctx[0] = '\0';
    for (int64_t i = 0; i < g->n_tensors; i++) g->tensors[i].name = g->arena + g->tensor_name_off[i];

    g->t_hash = hash_new((size_t)g->n_tensors, &g->t_hash_cap);
    if (!g->t_hash) return perr(ps, HEARTH_ENOMEM, "out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (hash_insert(g->t_hash, g->t_hash_cap, g->tensors[i].name, i, tensor_name, g) >= 0)
            return perr(ps, HEARTH_EFORMAT, "duplicate tensor name %s", g->tensors[i].name);

    /* The data section starts at the first aligned offset after the infos. */
    size_t a = g->alignment;
    g->data_off = ps->pos + (a - ps->pos % a) % a;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        hearth_gguf_tensor *t = &g->tensors[i];
        uint64_t off = g->tensor_data_off[i];
        snprintf(ps->ctx, sizeof ps->ctx, "tensor %s", t->name);
        if (off % a)
            return perr(ps, HEARTH_EFORMAT, "data offset %llu is not a multiple of the alignment %zu",
                        (unsigned long long)off, a);
        if (g->data_off > ps->size || off > ps->size - g->data_off || t->nbytes > ps->size - g->data_off - off) {
            if (off > UINT64_MAX - g->data_off || t->nbytes > UINT64_MAX - g->data_off - off) /* end overflows */
                return perr(ps, HEARTH_EFORMAT, "data offset %llu (+ data section at %zu) past end of file (size %zu)",
                            (unsigned long long)off, g->data_off, ps->size);
            return perr(ps, HEARTH_EFORMAT, "data [%llu, %llu) past end of file (size %zu)",
                        (unsigned long long)(g->data_off + off),
                        (unsigned long long)(g->data_off + off + t->nbytes), ps->size);
        }
        t->data = ps->p + g->data_off + off;
    }
    ps->ctx[0] = '\0';
    return HEARTH_OK;
}

hearth_status hearth_gguf_open(hearth_gguf **out, const char *path, hearth_err *err) {
    *out = NULL;
    hearth_gguf *g = calloc(1, sizeof *g);
    if (!g) return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    g->path = strdup(path);
    if (!g->path) {
        free(g);
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    }
    hearth_status st = hearth_mmap_open(&g->map, path, err);
    if (st) goto fail;
    parser ps = {.g = g, .p = g->map.data, .size = g->map.size, .err = err};
    static const uint8_t empty[1];
    if (!ps.p) ps.p = empty; /* empty file: size 0, never dereferenced past it */
    st = parse(&ps);
    if (st) goto fail;
    free(g->tensor_name_off);
    free(g->tensor_data_off);
    g->tensor_name_off = NULL;
    g->tensor_data_off = NULL;
    *out = g;
    return HEARTH_OK;
fail:
    hearth_gguf_close(g);
    return st;
}

void hearth_gguf_close(hearth_gguf *g) {
    if (!g) return;
    hearth_mmap_close(&g->map);
    free(g->kvs);
    free(g->tensors);
    free(g->tensor_name_off);
    free(g->tensor_data_off);
    free(g->arena);
    free(g->strs);
    free(g->kv_hash);
    free(g->t_hash);
    free(g->path);
    free(g);
}

/* --------------------------------------------------------------- accessors */

const char *hearth_gguf_path(const hearth_gguf *g) { return g->path; }
uint32_t hearth_gguf_version(const hearth_gguf *g) { return g->version; }
uint32_t hearth_gguf_alignment(const hearth_gguf *g) { return g->alignment; }
size_t hearth_gguf_data_offset(const hearth_gguf *g) { return g->data_off; }
size_t hearth_gguf_file_size(const hearth_gguf *g) { return g->map.size; }

const char *hearth_gguf_type_name(hearth_gguf_type t) {
    static const char *names[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

int64_t hearth_gguf_n_kv(const hearth_gguf *g) { return g->n_kv; }

int64_t hearth_gguf_find_key(const hearth_gguf *g, const char *key) {
    return hash_find(g->kv_hash, g->kv_hash_cap, key, kv_key, g);
}

const char *hearth_gguf_key_at(const hearth_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? kv_key(g, i) : NULL;
}

hearth_gguf_type hearth_gguf_kv_type(const hearth_gguf *g, int64_t i) {
    HEARTH_ASSERT(i >= 0 && i < g->n_kv);
    return g->kvs[i].type;
}

static hearth_status lookup(const hearth_gguf *g, const char *key, const kv_entry **kv, hearth_err *err) {
    int64_t i = hearth_gguf_find_key(g, key);
    if (i < 0) return hearth_err_set(err, HEARTH_ENOENT, "%s: key %s not found", g->path, key);
    *kv = &g->kvs[i];
    return HEARTH_OK;
}

static hearth_status wrong_type(const hearth_gguf *g, const char *key, const kv_entry *kv, const char *want,
                                hearth_err *err) {
    return hearth_err_set(err, HEARTH_EFORMAT, "%s: key %s has type %s, expected %s", g->path, key,
                          hearth_gguf_type_name(kv->type), want);
}

/* Integer scalar -> int64 (u64 values above INT64_MAX flagged in *big). */
static int read_int(const kv_entry *kv, int64_t *v, int *big) {
    const uint8_t *r = kv->raw;
    *big = 0;
    switch (kv->type) {
    case HEARTH_GGUF_U8: case HEARTH_GGUF_BOOL: *v = r[0]; return 1;
    case HEARTH_GGUF_I8: { int8_t x; memcpy(&x, r, 1); *v = x; return 1; }
    case HEARTH_GGUF_U16: { uint16_t x; memcpy(&x, r, 2); *v = x; return 1; }
    case HEARTH_GGUF_I16: { int16_t x; memcpy(&x, r, 2); *v = x; return 1; }
    case HEARTH_GGUF_U32: { uint32_t x; memcpy(&x, r, 4); *v = x; return 1; }
    case HEARTH_GGUF_I32: { int32_t x; memcpy(&x, r, 4); *v = x; return 1; }
    case HEARTH_GGUF_I64: { int64_t x; memcpy(&x, r, 8); *v = x; return 1; }
    case HEARTH_GGUF_U64: {
        uint64_t x;
        memcpy(&x, r, 8);
        *big = x > (uint64_t)INT64_MAX;
        *v = (int64_t)(x & (uint64_t)INT64_MAX);
        return 1;
    }
    default: return 0;
    }
}

hearth_status hearth_gguf_get_int(const hearth_gguf *g, const char *key, int64_t *out, hearth_err *err) {
    const kv_entry *kv = NULL;
    hearth_status st = lookup(g, key, &kv, err);
    if (st) return st;
    int big;
    if (!read_int(kv, out, &big)) return wrong_type(g, key, kv, "an integer", err);
    if (big) return hearth_err_set(err, HEARTH_ERANGE, "%s: key %s: u64 value above INT64_MAX", g->path, key);
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_float(const hearth_gguf *g, const char *key, double *out, hearth_err *err) {
    const kv_entry *kv = NULL;
    hearth_status st = lookup(g, key, &kv, err);
    if (st) return st;
    if (kv->type == HEARTH_GGUF_F32) {
        float f;
        memcpy(&f, kv->raw, 4);
        *out = f;
        return HEARTH_OK;
    }
    if (kv->type == HEARTH_GGUF_F64) {
        memcpy(out, kv->raw, 8);
        return HEARTH_OK;
    }
    int64_t v;
    int big;
    if (kv->type == HEARTH_GGUF_BOOL || !read_int(kv, &v, &big)) return wrong_type(g, key, kv, "a number", err);
    if (big) {
        uint64_t u;
        memcpy(&u, kv->raw, 8);
        *out = (double)u;
    } else {
        *out = (double)v;
    }
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_bool(const hearth_gguf *g, const char *key, int *out, hearth_err *err) {
    const kv_entry *kv = NULL;
    hearth_status st = lookup(g, key, &kv, err);
    if (st) return st;
    int64_t v;
    int big;
    if (!read_int(kv, &v, &big)) return wrong_type(g, key, kv, "bool", err);
    *out = v != 0 || big;
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_str(const hearth_gguf *g, const char *key, const char **s, size_t *len,
                                  hearth_err *err) {
    const kv_entry *kv = NULL;
    hearth_status st = lookup(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HEARTH_GGUF_STRING) return wrong_type(g, key, kv, "string", err);
    *s = g->arena + kv->str_off;
    if (len) *len = kv->str_len;
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_arr(const hearth_gguf *g, const char *key, hearth_gguf_type *elem, uint64_t *n,
                                  const void **data, hearth_err *err) {
    const kv_entry *kv = NULL;
    hearth_status st = lookup(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HEARTH_GGUF_ARRAY) return wrong_type(g, key, kv, "array", err);
    if (elem) *elem = kv->elem;
    if (n) *n = kv->n;
    if (data) *data = kv->arr;
    return HEARTH_OK;
}

const char *hearth_gguf_arr_str_at(const hearth_gguf *g, int64_t i, uint64_t j, size_t *len) {
    if (i < 0 || i >= g->n_kv) return NULL;
    const kv_entry *kv = &g->kvs[i];
    if (kv->type != HEARTH_GGUF_ARRAY || kv->elem != HEARTH_GGUF_STRING || j >= kv->n) return NULL;
    const sref *r = &g->strs[kv->strs + j];
    if (len) *len = r->len;
    return g->arena + r->off;
}

const char *hearth_gguf_arr_str(const hearth_gguf *g, const char *key, uint64_t i, size_t *len) {
    return hearth_gguf_arr_str_at(g, hearth_gguf_find_key(g, key), i, len);
}

int64_t hearth_gguf_n_tensors(const hearth_gguf *g) { return g->n_tensors; }

const hearth_gguf_tensor *hearth_gguf_tensor_at(const hearth_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const hearth_gguf_tensor *hearth_gguf_find_tensor(const hearth_gguf *g, const char *name) {
    int64_t i = hash_find(g->t_hash, g->t_hash_cap, name, tensor_name, g);
    return i >= 0 ? &g->tensors[i] : NULL;
}
