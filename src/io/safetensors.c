/* safetensors.c - safetensors shards: map, parse the JSON header (jansson),
 * validate every entry, and merge the shards of a model dir into one
 * name-sorted table.
 *
 * Ownership: the set owns its shard maps, one block of NUL-terminated names
 * per shard and the entry table; nothing is read after open. */
#include "io/safetensors.h"

#include "core/dtype.h"
#include "core/file.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *path;
    hearth_mmap map;
    char *names; /* this shard's tensor names, back to back */
} shard;

typedef struct {
    hearth_st_tensor t; /* first member: a tensor pointer is an entry pointer */
    int shard;
} entry;

struct hearth_st_set {
    shard *shards;
    int n_shards, cap_shards;
    entry *e;
    int64_t n, cap;
};

/* Bytes per element of a supported dtype; 0 for known-but-unsupported ones
 * (*known = 1), 0 with *known = 0 for names the format does not define. */
static int dtype_of(const char *s, uint32_t *type, int *known) {
    *known = 1;
    if (!strcmp(s, "F32")) { *type = HEARTH_DT_F32; return 4; }
    if (!strcmp(s, "F16")) { *type = HEARTH_DT_F16; return 2; }
    if (!strcmp(s, "BF16")) { *type = HEARTH_DT_BF16; return 2; }
    static const char *other[] = {"F64", "I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64", "BOOL",
                                  "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (!strcmp(s, other[i])) return 0;
    *known = 0;
    return 0;
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static hearth_status push_shard(hearth_st_set *s, const char *path, hearth_err *err) {
    if (s->n_shards == s->cap_shards) {
        int cap = s->cap_shards ? 2 * s->cap_shards : 4;
        shard *t = realloc(s->shards, (size_t)cap * sizeof *t);
        if (!t) return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
        s->shards = t;
        s->cap_shards = cap;
    }
    shard *sh = &s->shards[s->n_shards];
    memset(sh, 0, sizeof *sh);
    sh->path = strdup(path);
    if (!sh->path) return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    s->n_shards++;
    return HEARTH_OK;
}

/* Read a non-negative JSON integer; 0 if v is anything else. */
static int get_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

/* Parse and validate one entry of the header into e (name not yet set). */
static hearth_status parse_entry(const char *path, const char *name, const json_t *v, size_t data_size,
                                 const uint8_t *data, entry *e, hearth_err *err) {
    if (!json_is_object(v))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: header entry is not an object", path, name);
    const json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
                 *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: missing or non-string \"dtype\"", path, name);
    const char *ds = json_string_value(jd);
    int known;
    int esize = dtype_of(ds, &e->t.type, &known);
    if (!known) return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: unknown dtype %s", path, name, ds);
    if (!esize)
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: tensor %s: dtype %s not supported (F32, F16, BF16 only)",
                              path, name, ds);
    if (!json_is_array(js))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: missing or non-array \"shape\"", path, name);
    size_t nd = json_array_size(js);
    if (nd > HEARTH_ST_MAX_DIMS)
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: tensor %s: %zu dimensions (at most %d)", path, name, nd,
                              HEARTH_ST_MAX_DIMS);
    e->t.n_dims = (int)nd;
    uint64_t numel = 1;
    int zero = 0;
    for (int d = 0; d < HEARTH_ST_MAX_DIMS; d++) e->t.shape[d] = 1;
    for (size_t d = 0; d < nd; d++) {
        uint64_t x;
        if (!get_uint(json_array_get(js, d), &x) || x > (uint64_t)INT64_MAX)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: shape[%zu] is not a non-negative integer",
                                  path, name, d);
        e->t.shape[d] = (int64_t)x;
        if (x == 0) { zero = 1; continue; }
        if (numel > (uint64_t)INT64_MAX / x)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: element count overflows", path, name);
        numel *= x;
    }
    if (zero) numel = 0;
    if (numel > SIZE_MAX / (uint64_t)esize)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: byte size overflows", path, name);
    e->t.nbytes = (size_t)numel * (size_t)esize;

    uint64_t b, en;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !get_uint(json_array_get(jo, 0), &b) ||
        !get_uint(json_array_get(jo, 1), &en))
        return hearth_err_set(err, HEARTH_EFORMAT,
                              "%s: tensor %s: \"data_offsets\" must be [begin, end] non-negative integers", path,
                              name);
    if (b > en || en > data_size)
        return hearth_err_set(err, HEARTH_EFORMAT,
                              "%s: tensor %s: data_offsets [%llu, %llu) outside the data buffer (%zu bytes)", path,
                              name, (unsigned long long)b, (unsigned long long)en, data_size);
    if (en - b != e->t.nbytes) {
        char sh[200];
        int k = snprintf(sh, sizeof sh, "[");
        for (size_t d = 0; d < nd && k < (int)sizeof sh - 24; d++)
            k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", d ? ", " : "", (long long)e->t.shape[d]);
        snprintf(sh + k, sizeof sh - (size_t)k, "]");
        return hearth_err_set(err, HEARTH_EFORMAT,
                              "%s: tensor %s: data_offsets [%llu, %llu) hold %llu bytes, shape %s x %s needs %zu",
                              path, name, (unsigned long long)b, (unsigned long long)en,
                              (unsigned long long)(en - b), sh, ds, e->t.nbytes);
    }
    e->t.data = data + b;
    return HEARTH_OK;
}

/* Map the last pushed shard and append its tensors to s->e. */
static hearth_status load_shard(hearth_st_set *s, hearth_err *err) {
    int si = s->n_shards - 1;
    shard *sh = &s->shards[si];
    const char *path = sh->path;
    hearth_status st = hearth_mmap_open(&sh->map, path, err);
    if (st) return st;
    const uint8_t *p = sh->map.data;
    size_t size = sh->map.size;
    if (size < 8)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: %zu bytes, too small for a safetensors header", path, size);
    uint64_t hlen;
    memcpy(&hlen, p, 8);
    if (hlen > size - 8)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: header length %llu past end of file (size %zu)", path,
                              (unsigned long long)hlen, size);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: header JSON: %s (line %d, column %d)", path, jerr.text,
                              jerr.line, jerr.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: header JSON is not an object", path);
    }

    size_t n = 0, name_bytes = 0;
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        if (!strcmp(name, "__metadata__")) continue;
        n++;
        name_bytes += strlen(name) + 1;
    }
    if (n > (size_t)(s->cap - s->n)) {
        int64_t cap = s->cap ? s->cap : 64;
        while ((size_t)(cap - s->n) < n) cap *= 2;
        entry *t = realloc(s->e, (size_t)cap * sizeof *t);
        if (!t) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path); goto done; }
        s->e = t;
        s->cap = cap;
    }
    sh->names = malloc(name_bytes ? name_bytes : 1);
    if (!sh->names) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path); goto done; }
    char *np = sh->names;
    const uint8_t *data = p + 8 + hlen;
    size_t data_size = size - 8 - (size_t)hlen;
    json_object_foreach(root, name, v) {
        if (!strcmp(name, "__metadata__")) continue;
        entry *e = &s->e[s->n];
        memset(e, 0, sizeof *e);
        if ((st = parse_entry(path, name, v, data_size, data, e, err))) goto done;
        size_t len = strlen(name) + 1;
        memcpy(np, name, len);
        e->t.name = np;
        e->shard = si;
        np += len;
        s->n++;
    }
done:
    json_decref(root);
    return st;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const entry *)a)->t.name, ((const entry *)b)->t.name);
}

/* Sort by name and reject a name that appears twice. */
static hearth_status finish(hearth_st_set *s, hearth_err *err) {
    if (s->n) qsort(s->e, (size_t)s->n, sizeof *s->e, cmp_entry);
    for (int64_t i = 1; i < s->n; i++)
        if (!strcmp(s->e[i].t.name, s->e[i - 1].t.name))
            return hearth_err_set(err, HEARTH_EFORMAT, "tensor %s appears twice (%s and %s)", s->e[i].t.name,
                                  s->shards[s->e[i - 1].shard].path, s->shards[s->e[i].shard].path);
    return HEARTH_OK;
}

hearth_status hearth_st_open_file(hearth_st_set **out, const char *path, hearth_err *err) {
    *out = NULL;
    hearth_st_set *s = calloc(1, sizeof *s);
    if (!s) return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    hearth_status st = push_shard(s, path, err);
    if (!st) st = load_shard(s, err);
    if (!st) st = finish(s, err);
    if (st) {
        hearth_st_close(s);
        return st;
    }
    *out = s;
    return HEARTH_OK;
}

/* A shard name from the index must stay inside the model dir. */
static int shard_name_ok(const char *f) {
    if (!f[0] || f[0] == '/') return 0;
    for (const char *p = f; (p = strstr(p, "..")) != NULL; p += 2)
        if ((p == f || p[-1] == '/') && (p[2] == '\0' || p[2] == '/')) return 0;
    return 1;
}

static hearth_status open_index(hearth_st_set *s, const char *dir, const char *ipath, hearth_err *err) {
    char *text = NULL;
    size_t len;
    hearth_status st = hearth_file_read(ipath, &text, &len, err);
    if (st) return st;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: JSON: %s (line %d, column %d)", ipath, jerr.text, jerr.line,
                              jerr.column);
    const json_t *wm = json_object_get(root, "weight_map");
    const char *name;
    json_t *v;
    char *spath = NULL;
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        st = hearth_err_set(err, HEARTH_EFORMAT, "%s: missing or empty \"weight_map\" object", ipath);
        goto done;
    }
    /* Open each distinct shard once, in order of first mention. */
    json_object_foreach((json_t *)wm, name, v) {
        if (!json_is_string(v) || !shard_name_ok(json_string_value(v))) {
            st = hearth_err_set(err, HEARTH_EFORMAT, "%s: weight_map[%s]: not a file name inside the model dir",
                                ipath, name);
            goto done;
        }
        spath = path_join(dir, json_string_value(v));
        if (!spath) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", ipath); goto done; }
        int seen = 0;
        for (int i = 0; i < s->n_shards && !seen; i++) seen = !strcmp(s->shards[i].path, spath);
        if (!seen) {
            if (!hearth_path_is_file(spath)) {
                st = hearth_err_set(err, HEARTH_ENOENT, "%s: shard %s (holding tensor %s) not found", ipath, spath,
                                    name);
                goto done;
            }
            if ((st = push_shard(s, spath, err)) || (st = load_shard(s, err))) goto done;
        }
        free(spath);
        spath = NULL;
    }
    if ((st = finish(s, err))) goto done;
    /* Every tensor the index names must be in the shard it names. */
    json_object_foreach((json_t *)wm, name, v) {
        const hearth_st_tensor *t = hearth_st_find(s, name);
        const char *f = json_string_value(v);
        spath = path_join(dir, f);
        if (!spath) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", ipath); goto done; }
        if (!t || strcmp(hearth_st_tensor_file(s, t), spath) != 0) {
            st = hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: listed in shard %s but %s%s", ipath, name, f,
                                t ? "found in " : "not found in any shard", t ? hearth_st_tensor_file(s, t) : "");
            goto done;
        }
        free(spath);
        spath = NULL;
    }
done:
    free(spath);
    json_decref(root);
    return st;
}

hearth_status hearth_st_open_dir(hearth_st_set **out, const char *dir, hearth_err *err) {
    *out = NULL;
    hearth_status st;
    char *ipath = path_join(dir, "model.safetensors.index.json");
    char *fpath = path_join(dir, "model.safetensors");
    hearth_st_set *s = calloc(1, sizeof *s);
    if (!ipath || !fpath || !s) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", dir); goto fail; }
    if (hearth_path_is_file(ipath)) {
        st = open_index(s, dir, ipath, err);
    } else if (hearth_path_is_file(fpath)) {
        if (!(st = push_shard(s, fpath, err)) && !(st = load_shard(s, err))) st = finish(s, err);
    } else {
        st = hearth_err_set(err, HEARTH_ENOENT, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    if (st) goto fail;
    free(ipath);
    free(fpath);
    *out = s;
    return HEARTH_OK;
fail:
    free(ipath);
    free(fpath);
    hearth_st_close(s);
    return st;
}

void hearth_st_close(hearth_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_shards; i++) {
        hearth_mmap_close(&s->shards[i].map);
        free(s->shards[i].names);
        free(s->shards[i].path);
    }
    free(s->shards);
    free(s->e);
    free(s);
}

int64_t hearth_st_n_tensors(const hearth_st_set *s) { return s->n; }

const hearth_st_tensor *hearth_st_tensor_at(const hearth_st_set *s, int64_t i) {
    return i >= 0 && i < s->n ? &s->e[i].t : NULL;
}

const hearth_st_tensor *hearth_st_find(const hearth_st_set *s, const char *name) {
    int64_t lo = 0, hi = s->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->e[mid].t.name, name);
        if (c == 0) return &s->e[mid].t;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *hearth_st_tensor_file(const hearth_st_set *s, const hearth_st_tensor *t) {
    const entry *e = (const entry *)t;
    HEARTH_ASSERT(e >= s->e && e < s->e + s->n);
    return s->shards[e->shard].path;
}

int64_t hearth_st_numel(const hearth_st_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->shape[d];
    return n;
}

hearth_status hearth_st_write_f32(const char *path, const hearth_st_f32 *t, int n, hearth_err *err) {
    json_t *h = json_object();
    size_t off = 0;
    for (int i = 0; h && i < n; i++) {
        json_t *shape = json_array();
        size_t numel = 1;
        for (int d = 0; d < t[i].n_dims; d++) {
            json_array_append_new(shape, json_integer(t[i].shape[d]));
            numel *= (size_t)t[i].shape[d];
        }
        json_object_set_new(h, t[i].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", shape,
                                                    "data_offsets", (json_int_t)off,
                                                    (json_int_t)(off + numel * sizeof(float))));
        off += numel * sizeof(float);
    }
    char *js = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    if (!js) return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory for the header", path);
    size_t len = strlen(js), padded = (len + 7) / 8 * 8; /* the data starts 8-aligned */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    int ok = f != NULL;
    if (ok) {
        uint64_t n8 = padded; /* little-endian on every host hearth builds for (x86-64) */
        ok = fwrite(&n8, 8, 1, f) == 1 && fwrite(js, 1, len, f) == len;
        for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
        for (int i = 0; ok && i < n; i++) {
            size_t numel = 1;
            for (int d = 0; d < t[i].n_dims; d++) numel *= (size_t)t[i].shape[d];
            ok = fwrite(t[i].data, sizeof(float), numel, f) == numel;
        }
        ok = fclose(f) == 0 && ok;
    }
    free(js);
    if (!ok || rename(tmp, path) != 0) {
        hearth_status st = hearth_err_set(err, HEARTH_EIO, "%s: cannot write it (%s)", path, strerror(errno));
        remove(tmp);
        return st;
    }
    return HEARTH_OK;
}
