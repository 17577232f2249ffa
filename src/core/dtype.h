/* dtype.h - element types of weights and activations.
 *
 * The numeric values are ggml's type ids, so a GGUF tensor's type field is a
 * hearth_dtype as is. Quantized types store blocks of `block` elements in
 * `block_bytes` bytes; the layouts are documented in ops/cpu/quant.h.
 * Ids from HEARTH_DT_INTERNAL on are hearth's own (KV cache elements), not
 * ggml's: a file never carries them (hearth_dtype_get_ggml refuses them).
 * Enum values reach files on disk: never renumber. */
#ifndef HEARTH_CORE_DTYPE_H
#define HEARTH_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum hearth_dtype {
    HEARTH_DT_F32 = 0,
    HEARTH_DT_F16 = 1,
    HEARTH_DT_Q4_0 = 2,
    HEARTH_DT_Q4_1 = 3,
    HEARTH_DT_Q5_0 = 6,
    HEARTH_DT_Q5_1 = 7,
    HEARTH_DT_Q8_0 = 8,
    HEARTH_DT_Q8_1 = 9,  /* activations only (ggml's q8_1) */
    HEARTH_DT_Q2_K = 10,
    HEARTH_DT_Q3_K = 11,
    HEARTH_DT_Q4_K = 12,
    HEARTH_DT_Q5_K = 13,
    HEARTH_DT_Q6_K = 14,
    HEARTH_DT_Q8_K = 15, /* activations only (ggml's q8_K) */
    HEARTH_DT_IQ4_NL = 20,
    HEARTH_DT_IQ4_XS = 23,
    HEARTH_DT_BF16 = 30,
    HEARTH_DT_E4M3 = 0x10000, /* OCP FP8 e4m3fn, scale 1 (core/fp8.h); KV cache elements */
} hearth_dtype;

#define HEARTH_DT_INTERNAL 0x10000u /* the first id of hearth's own types */

typedef struct {
    const char *name; /* "f32", "q4_K", ... as ggml names them */
    int block;        /* elements per block (1 for plain floats) */
    int block_bytes;  /* bytes per block */
} hearth_dtype_info;

/* Info for a type this build knows, or NULL (an unknown id). */
const hearth_dtype_info *hearth_dtype_get(uint32_t type);

/* The same for a type id read from a model file: NULL also for hearth's
 * internal types, which no file may carry. */
const hearth_dtype_info *hearth_dtype_get_ggml(uint32_t type);

/* ggml's name of a type id a file may carry, known to this build or not ("q5_0", "iq4_xs", ...), or NULL. */
const char *hearth_ggml_type_name(uint32_t type);

/* Bytes of a row of n elements; 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t hearth_dtype_row_bytes(uint32_t type, int64_t n);

#endif
