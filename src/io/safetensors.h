/* safetensors.h - read-only safetensors reader (one file or a sharded model dir).
 *
 * File layout (https://huggingface.co/docs/safetensors):
 *
 *   u64 N (little-endian) | N bytes of JSON header | data buffer
 *   header = { "<name>": {"dtype": "F32", "shape": [d0, d1, ...],
 *                         "data_offsets": [begin, end]}, ...,
 *              "__metadata__": {...} (optional, ignored) }
 *   offsets are relative to the data buffer; shape[0] is the outermost dim.
 *
 * A sharded model dir has model.safetensors.index.json whose "weight_map"
 * maps each tensor name to its shard file (in the same dir).
 *
 * Opening validates everything up front: header length within the file, JSON
 * well-formed, each dtype known, shape sane, data_offsets inside the data
 * buffer and equal to prod(shape) x dtype size, no duplicate names across
 * shards, every shard named by the index present and holding the tensors the
 * index says it holds. Only F32, F16 and BF16 tensors are supported; another
 * known dtype (I64, F8_E4M3, ...) gives HEARTH_ENOTSUP naming the tensor and
 * the dtype, an unknown one HEARTH_EFORMAT.
 *
 * Tensors are ordered by name (strcmp); data pointers are into the read-only
 * maps and stay valid until hearth_st_close. They are NOT guaranteed aligned
 * (the format only pads the header to 8 bytes by convention): fine for x86-64
 * loads; copy before using aligned SIMD loads. After open the set is
 * immutable: any thread may call the accessors. */
#ifndef HEARTH_IO_SAFETENSORS_H
#define HEARTH_IO_SAFETENSORS_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

#define HEARTH_ST_MAX_DIMS 8

typedef struct {
    const char *name;
    uint32_t type; /* HEARTH_DT_F32, HEARTH_DT_F16, HEARTH_DT_BF16 */
    int n_dims;    /* 0 (a scalar) .. 8 */
    int64_t shape[HEARTH_ST_MAX_DIMS]; /* as in the file: shape[0] outermost (PyTorch order); unused = 1 */
    const void *data;
    size_t nbytes;
} hearth_st_tensor;

/* All tensors of a model dir, over 1..n mmapped shards. */
typedef struct hearth_st_set hearth_st_set;

/* dir holds model.safetensors, or model.safetensors.index.json (weight_map ->
 * shard files; the index wins when both exist). On success the caller owns
 * *out (hearth_st_close); on failure *out is NULL and err names the file and
 * tensor or field at fault. */
hearth_status hearth_st_open_dir(hearth_st_set **out, const char *dir, hearth_err *err);
/* One .safetensors file. */
hearth_status hearth_st_open_file(hearth_st_set **out, const char *path, hearth_err *err);
void hearth_st_close(hearth_st_set *s); /* NULL is a no-op */

int64_t hearth_st_n_tensors(const hearth_st_set *s);
const hearth_st_tensor *hearth_st_tensor_at(const hearth_st_set *s, int64_t i); /* NULL if out of range */
const hearth_st_tensor *hearth_st_find(const hearth_st_set *s, const char *name); /* NULL if absent */
/* Path of the shard file that holds tensor t (from this set). */
const char *hearth_st_tensor_file(const hearth_st_set *s, const hearth_st_tensor *t);

/* Elements of t (product of its shape; 1 for a scalar). */
int64_t hearth_st_numel(const hearth_st_tensor *t);

/* ---- Writing (the adapters training makes) ---- */
typedef struct {
    const char *name;
    int n_dims;
    int64_t shape[HEARTH_ST_MAX_DIMS];
    const float *data; /* prod(shape) floats */
} hearth_st_f32;

/* Write n F32 tensors to path, the header listing them in the order given,
 * through a temporary file renamed over path (a reader never sees half a
 * file). Errors name the path. */
hearth_status hearth_st_write_f32(const char *path, const hearth_st_f32 *t, int n, hearth_err *err);

#endif
