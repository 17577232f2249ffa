/* gguf.h - read-only GGUF v2/v3 reader over a memory map.
 *
 * File layout (all little-endian; spec: ggml docs/gguf.md):
 *
 *   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
 *   n_kv x  { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   zero padding up to general.alignment (u32, default 32)
 *   tensor data: tensor i at data_start + offset_i, offset_i % alignment == 0
 *
 *   string = u64 len | len bytes (no NUL);  bool = 1 byte;
 *   array  = u32 elem_type | u64 n | n values (arrays of arrays allowed).
 *
 * hearth_gguf_open validates all of it before it returns (bounds of every
 * string and array, value types, counts, tensor shapes/types/offsets,
 * duplicate keys and tensor names), so after a successful open every accessor
 * is safe on any input. Nothing is read lazily.
 *
 * Storage: keys, string values, every string of a (top-level) string array and
 * tensor names are copied into one arena as NUL-terminated strings; their byte
 * lengths are kept because token strings may contain NUL bytes. Numeric array
 * data is NOT copied: hearth_gguf_get_arr returns a pointer into the map, which
 * may be unaligned (fine on x86-64 / arm64; use memcpy elsewhere). Tensor data
 * pointers are into the map at file offsets that are multiples of
 * general.alignment; the map is page aligned, so the pointers themselves are
 * aligned for any alignment up to the page size (32 by default).
 *
 * Lifetime: every pointer handed out (names, strings, array data, tensors)
 * stays valid until hearth_gguf_close. Threading: after open, the object is
 * immutable, so any number of threads may call the accessors concurrently. */
#ifndef HEARTH_IO_GGUF_H
#define HEARTH_IO_GGUF_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

/* Metadata value types (values as on disk). */
typedef enum {
    HEARTH_GGUF_U8 = 0,
    HEARTH_GGUF_I8,
    HEARTH_GGUF_U16,
    HEARTH_GGUF_I16,
    HEARTH_GGUF_U32,
    HEARTH_GGUF_I32,
    HEARTH_GGUF_F32,
    HEARTH_GGUF_BOOL,
    HEARTH_GGUF_STRING,
    HEARTH_GGUF_ARRAY,
    HEARTH_GGUF_U64,
    HEARTH_GGUF_I64,
    HEARTH_GGUF_F64,
} hearth_gguf_type;

typedef struct {
    const char *name; /* NUL-terminated */
    int n_dims;       /* 1..4 */
    int64_t ne[4];    /* ggml order: ne[0] is the fastest-varying (row length); unused dims = 1 */
    uint32_t type;    /* ggml type id == hearth_dtype (core/dtype.h) */
    const void *data; /* into the mmap, aligned to general.alignment */
    size_t nbytes;
} hearth_gguf_tensor;

typedef struct hearth_gguf hearth_gguf;

/* Map and validate path. On success *out owns the map (close with
 * hearth_gguf_close). On failure *out is NULL and err names the file and the
 * key or tensor at fault. Statuses: ENOENT/EIO (cannot open), EFORMAT
 * (malformed), ENOTSUP (valid GGUF this reader does not handle: other
 * versions, unknown tensor types), ENOMEM. */
hearth_status hearth_gguf_open(hearth_gguf **out, const char *path, hearth_err *err);
void hearth_gguf_close(hearth_gguf *g); /* NULL is a no-op */

const char *hearth_gguf_path(const hearth_gguf *g); /* as given to open */
uint32_t hearth_gguf_version(const hearth_gguf *g);
uint32_t hearth_gguf_alignment(const hearth_gguf *g);
size_t hearth_gguf_data_offset(const hearth_gguf *g); /* file offset of the tensor data section */
size_t hearth_gguf_file_size(const hearth_gguf *g);

/* Name of a value type ("u32", "string", ...; "?" for an unknown value). */
const char *hearth_gguf_type_name(hearth_gguf_type t);

/* Metadata, by index in file order (0..n_kv-1) or by key. */
int64_t hearth_gguf_n_kv(const hearth_gguf *g);
int64_t hearth_gguf_find_key(const hearth_gguf *g, const char *key); /* -1 if absent */
const char *hearth_gguf_key_at(const hearth_gguf *g, int64_t i);    /* NULL if out of range */
/* Type of the i-th value; i out of range is a programmer error (asserts). */
hearth_gguf_type hearth_gguf_kv_type(const hearth_gguf *g, int64_t i);

/* Typed getters. Missing key -> HEARTH_ENOENT; wrong type -> HEARTH_EFORMAT;
 * messages name key and file.
 * get_int accepts any integer type and bool (a u64 above INT64_MAX -> ERANGE);
 * get_float accepts f32/f64 and integers; get_bool accepts bool and integers
 * (non-zero is true); get_str accepts string only. *s stays owned by g. */
hearth_status hearth_gguf_get_int(const hearth_gguf *g, const char *key, int64_t *out, hearth_err *err);
hearth_status hearth_gguf_get_float(const hearth_gguf *g, const char *key, double *out, hearth_err *err);
hearth_status hearth_gguf_get_bool(const hearth_gguf *g, const char *key, int *out, hearth_err *err);
hearth_status hearth_gguf_get_str(const hearth_gguf *g, const char *key, const char **s, size_t *len,
                                  hearth_err *err);

/* Arrays: element type and count; numeric data pointer into the map (possibly
 * unaligned; bool elements are one byte each), NULL for arrays of strings and
 * arrays of arrays. elem/n/data may each be NULL if not wanted. */
hearth_status hearth_gguf_get_arr(const hearth_gguf *g, const char *key, hearth_gguf_type *elem,
                                  uint64_t *n, const void **data, hearth_err *err);
/* i-th string of a string array (NUL-terminated, *len without the NUL; len
 * may be NULL). NULL if the key is absent, not a string array, or i >= n. */
const char *hearth_gguf_arr_str(const hearth_gguf *g, const char *key, uint64_t i, size_t *len);
/* The same by key index (from hearth_gguf_find_key): no hash lookup per call,
 * for loops over large vocabularies. */
const char *hearth_gguf_arr_str_at(const hearth_gguf *g, int64_t kv, uint64_t i, size_t *len);

/* Tensors, in file order. */
int64_t hearth_gguf_n_tensors(const hearth_gguf *g);
const hearth_gguf_tensor *hearth_gguf_tensor_at(const hearth_gguf *g, int64_t i); /* NULL if out of range */
const hearth_gguf_tensor *hearth_gguf_find_tensor(const hearth_gguf *g, const char *name); /* NULL if absent */

#endif
