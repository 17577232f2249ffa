/* test_io_util.h - helpers shared by the io tests: a tiny GGUF writer (so
 * tests build their own files, valid or deliberately broken) and file I/O.
 * Header-only, static functions; included by tests/unit/test_io*.c only. */
#ifndef HEARTH_TEST_IO_UTIL_H
#define HEARTH_TEST_IO_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable byte buffer that the writer appends to. */
typedef struct { uint8_t *b; size_t n, cap; } gw_buf;

static inline void gw_put(gw_buf *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (w->n + n > cap) cap *= 2;
        w->b = realloc(w->b, cap);
        if (!w->b) { perror("gw_put"); exit(2); }
        w->cap = cap;
    }
    if (n) memcpy(w->b + w->n, p, n);
    w->n += n;
}
static inline void gw_u8(gw_buf *w, uint8_t v) { gw_put(w, &v, 1); }
static inline void gw_u32(gw_buf *w, uint32_t v) { gw_put(w, &v, 4); }
static inline void gw_u64(gw_buf *w, uint64_t v) { gw_put(w, &v, 8); }
static inline void gw_f32(gw_buf *w, float v) { gw_put(w, &v, 4); }
static inline void gw_strn(gw_buf *w, const char *s, size_t n) { gw_u64(w, n); gw_put(w, s, n); }
static inline void gw_str(gw_buf *w, const char *s) { gw_strn(w, s, strlen(s)); }
static inline void gw_free(gw_buf *w) { free(w->b); memset(w, 0, sizeof *w); }

/* Header: magic, version, tensor count, kv count. */
static inline void gw_header(gw_buf *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    gw_put(w, "GGUF", 4);
    gw_u32(w, version);
    gw_u64(w, n_tensors);
    gw_u64(w, n_kv);
}

/* Value type ids as on disk (== hearth_gguf_type). */
enum { GW_U8 = 0, GW_I8, GW_U16, GW_I16, GW_U32, GW_I32, GW_F32, GW_BOOL, GW_STRING, GW_ARRAY, GW_U64, GW_I64, GW_F64 };

static inline void gw_kv(gw_buf *w, const char *key, uint32_t type) { gw_str(w, key); gw_u32(w, type); }
static inline void gw_kv_u32(gw_buf *w, const char *key, uint32_t v) { gw_kv(w, key, GW_U32); gw_u32(w, v); }
static inline void gw_kv_f32(gw_buf *w, const char *key, float v) { gw_kv(w, key, GW_F32); gw_f32(w, v); }
static inline void gw_kv_str(gw_buf *w, const char *key, const char *v) { gw_kv(w, key, GW_STRING); gw_str(w, v); }
/* An array of strings; each string is NUL-terminated in `strs` here. */
static inline void gw_kv_strs(gw_buf *w, const char *key, const char *const *strs, size_t n) {
    gw_kv(w, key, GW_ARRAY);
    gw_u32(w, GW_STRING);
    gw_u64(w, n);
    for (size_t i = 0; i < n; i++) gw_str(w, strs[i]);
}

typedef struct {
    const char *name;
    int n_dims;
    int64_t ne[4];
    uint32_t type;
    const void *data; /* nbytes of it */
    size_t nbytes;
} gw_tensor;

/* Append the tensor infos, padding to `align`, then each tensor's data at an
 * aligned offset. No padding after the last tensor, so the file ends exactly
 * where the last tensor does. info_off[i] (optional) receives the file offset
 * where tensor i's info begins. */
static inline void gw_tensors(gw_buf *w, const gw_tensor *t, int n, uint32_t align, size_t *info_off) {
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (info_off) info_off[i] = w->n;
        gw_str(w, t[i].name);
        gw_u32(w, (uint32_t)t[i].n_dims);
        for (int d = 0; d < t[i].n_dims; d++) gw_u64(w, (uint64_t)t[i].ne[d]);
        gw_u32(w, t[i].type);
        gw_u64(w, off);
        off += t[i].nbytes;
        off += (align - off % align) % align;
    }
    static const uint8_t zeros[256];
    gw_put(w, zeros, (align - w->n % align) % align);
    for (int i = 0; i < n; i++) {
        gw_put(w, t[i].data, t[i].nbytes);
        if (i + 1 < n) gw_put(w, zeros, (align - w->n % align) % align);
    }
}

/* Write bytes to path; returns 0 on success. */
static inline int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t wr = fwrite(p, 1, n, f);
    return (fclose(f) == 0 && wr == n) ? 0 : -1;
}

static inline int write_text(const char *path, const char *s) { return write_file(path, s, strlen(s)); }

/* buf = path of `name` inside the test scratch dir; returns buf. */
static inline const char *tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", test_tmpdir(), name);
    return buf;
}

#endif
