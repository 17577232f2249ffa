/* quant.h - the block layouts of every weight and activation type, byte by
 * byte, and conversions between them and f32.
 *
 * The layouts are ggml's, so a GGUF tensor is used as it lies in the file.
 * A row of n elements of a quantized type is n / block consecutive blocks
 * (hearth_dtype_get(t)->block, ->block_bytes); there is no padding between
 * blocks or rows. All multi-byte fields are little-endian; "f16" is IEEE
 * binary16. Block pointers must be 2-byte aligned (4 for q8_K); every GGUF
 * tensor and every row of these types is.
 *
 *   q4_0  (32 elements, 18 bytes)   y[i] = d * (q[i] - 8)
 *     0  f16 d
 *     2  u8  qs[16]   qs[j] & 0x0F = q[j], qs[j] >> 4 = q[j + 16]
 *   q4_1  (32 elements, 20 bytes)   y[i] = d * q[i] + m
 *     0  f16 d,  2  f16 m
 *     4  u8  qs[16]   as q4_0
 *   q8_0  (32 elements, 34 bytes)   y[i] = d * qs[i]
 *     0  f16 d
 *     2  i8  qs[32]
 *   q8_1  (32 elements, 36 bytes; activations)   y[i] = d * qs[i]
 *     0  f16 d,  2  f16 s = f16(d * sum(qs))
 *     4  i8  qs[32]
 *   q4_K  (256 elements, 144 bytes)  eight sub-blocks j of 32 elements:
 *         y[32j + i] = d * sc[j] * q[32j + i] - dmin * m[j]
 *     0  f16 d,  2  f16 dmin
 *     4  u8  scales[12]  6-bit sc[j], m[j]:
 *            j < 4:  sc[j] = scales[j] & 63,  m[j] = scales[j + 4] & 63
 *            j >= 4: sc[j] = (scales[j + 4] & 0x0F) | (scales[j - 4] >> 6) << 4
 *                    m[j]  = (scales[j + 4] >> 4)   | (scales[j]     >> 6) << 4
 *    16  u8  qs[128]  for each 64-element chunk c (0..3), 32 bytes b = qs[32c + l]:
 *            b & 0x0F = q[64c + l] (sub-block 2c), b >> 4 = q[64c + 32 + l] (sub-block 2c+1)
 *   q6_K  (256 elements, 210 bytes)  sixteen sub-blocks g of 16 elements:
 *         y[16g + i] = d * scales[g] * (q[16g + i] - 32),  q in 0..63
 *     0  u8  ql[128]  low 4 bits
 *   128  u8  qh[64]   high 2 bits
 *   192  i8  scales[16]
 *   208  f16 d
 *            for each half h (0, 1) and l in 0..31, with L = ql + 64h, H = qh + 32h:
 *              q[128h + l]      = (L[l]      & 0x0F) | ((H[l] >> 0) & 3) << 4
 *              q[128h + l + 32] = (L[l + 32] & 0x0F) | ((H[l] >> 2) & 3) << 4
 *              q[128h + l + 64] = (L[l]      >> 4)   | ((H[l] >> 4) & 3) << 4
 *              q[128h + l + 96] = (L[l + 32] >> 4)   | ((H[l] >> 6) & 3) << 4
 *   q8_K  (256 elements, 292 bytes; activations)   y[i] = d * qs[i]
 *     0  f32 d
 *     4  i8  qs[256]
 *   260  i16 bsums[16]  bsums[g] = sum of qs[16g .. 16g + 15]
 *   f32, f16, bf16: plain little-endian arrays.
 *
 * Thread-safety: every function here is pure and may be called from any
 * thread. */
#ifndef HEARTH_OPS_CPU_QUANT_H
#define HEARTH_OPS_CPU_QUANT_H

#include "core/dtype.h"
#include "core/status.h"

#include <stdint.h>

#define HEARTH_QK 32    /* elements per block of q4_0, q4_1, q8_0, q8_1 */
#define HEARTH_QK_K 256 /* elements per super-block of q4_K, q5_K, q6_K, q8_K */

typedef struct { uint16_t d; uint8_t qs[16]; } hearth_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } hearth_block_q4_1;
/* q5_0 / q5_1: q4_0's / q4_1's nibbles and a fifth bit, bit e of the little-endian qh for element e:
 * d * (code - 16), resp. d * code + m */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } hearth_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } hearth_block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } hearth_block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } hearth_block_q8_1;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } hearth_block_q4_K;
/* q2_K / q3_K: 16 sub-blocks of 16; 2-bit codes, four to a byte: element 128 h + 32 j + l (h < 2, j < 4,
 * l < 32) is bits 2j, 2j + 1 of qs[32 h + l], in sub-block 8 h + 2 j + l / 16. q2_K: d * (scales[g] & 15) * q -
 * dmin * (scales[g] >> 4). q3_K: d * (sc_g - 32) * (q - 4 * !hbit), hbit = bit 4 h + j of hmask[l], the 6-bit
 * sc_g packed in scales[12] (hearth_q3_K_scale). */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } hearth_block_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } hearth_block_q3_K;
/* q5_K: q4_K's scales and mins, and a fifth bit: element l of sub-block j is
 * d * sc_j * (nibble | 16 * bit j of qh[l]) - dmin * m_j, the nibble as q4_K's. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } hearth_block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } hearth_block_q6_K;
/* iq4_nl / iq4_xs: 4-bit codes (q4_0's nibble order) that index ggml's non-linear codebook
 * hearth_iq4_values: d * values[code]; iq4_xs in 8 sub-blocks of 32 whose 6-bit scales less 32 are the
 * nibble ib % 2 of scales_l[ib / 2] and bits 2 ib of scales_h: d * (ls_ib - 32) * values[code]. */
typedef struct { uint16_t d; uint8_t qs[16]; } hearth_block_iq4_nl;
typedef struct { uint16_t d, scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } hearth_block_iq4_xs;
extern const int8_t hearth_iq4_values[16];
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } hearth_block_q8_K;

_Static_assert(sizeof(hearth_block_q4_0) == 18, "q4_0 block is 18 bytes");
_Static_assert(sizeof(hearth_block_q4_1) == 20, "q4_1 block is 20 bytes");
_Static_assert(sizeof(hearth_block_q5_0) == 22, "q5_0 block is 22 bytes");
_Static_assert(sizeof(hearth_block_q5_1) == 24, "q5_1 block is 24 bytes");
_Static_assert(sizeof(hearth_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(hearth_block_q8_1) == 36, "q8_1 block is 36 bytes");
_Static_assert(sizeof(hearth_block_q2_K) == 84, "q2_K block is 84 bytes");
_Static_assert(sizeof(hearth_block_q3_K) == 110, "q3_K block is 110 bytes");
_Static_assert(sizeof(hearth_block_q4_K) == 144, "q4_K block is 144 bytes");
_Static_assert(sizeof(hearth_block_q5_K) == 176, "q5_K block is 176 bytes");
_Static_assert(sizeof(hearth_block_q6_K) == 210, "q6_K block is 210 bytes");
_Static_assert(sizeof(hearth_block_iq4_nl) == 18, "iq4_nl block is 18 bytes");
_Static_assert(sizeof(hearth_block_iq4_xs) == 136, "iq4_xs block is 136 bytes");
_Static_assert(sizeof(hearth_block_q8_K) == 292, "q8_K block is 292 bytes");

/* The 6-bit scale and min of sub-block j (0..7) of a q4_K (or q5_K) block. */
static inline void hearth_q4_K_scale_min(const uint8_t *scales, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
        *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
}

/* True for the types hearth_cpu_dequantize_row / _quantize_row know:
 * f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K, iq4_nl,
 * iq4_xs, e4m3 (q2_K, q3_K and the iq4 types dequantize only: hearth reads them, it does not write them). */

/* The scale of sub-block g (0..15) of a q3_K block, less 32 (-32..31): the low 4 bits in scales[0..7]
 * (nibble g / 8 of byte g % 8), the high 2 in scales[8..11] (bits 2 (g / 4) of byte 8 + g % 4). */
static inline int hearth_q3_K_scale(const uint8_t *scales, int g) {
    int lo = scales[g % 8] >> (4 * (g / 8)) & 15, hi = scales[8 + g % 4] >> (2 * (g / 4)) & 3;
    return (lo | hi << 4) - 32;
}

/* The scale less 32 of sub-block ib (0..7) of an iq4_xs block. */
static inline int hearth_iq4_xs_scale(const hearth_block_iq4_xs *b, int ib) {
    return ((b->scales_l[ib / 2] >> (4 * (ib % 2)) & 15) | (b->scales_h >> (2 * ib) & 3) << 4) - 32;
}

/* The 5-bit code of element e (0..31) of a q5_0 / q5_1 block. */
static inline int hearth_q5_code(const uint8_t *qs, const uint8_t *qh, int e) {
    int nib = e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4;
    return nib | ((qh[e / 8] >> (e % 8)) & 1) << 4;
}
int hearth_cpu_quant_known(hearth_dtype t);

/* dst[0..n) = the values of the n elements at src (a row of type t).
 * n must be a multiple of the block size of a known type (programmer error
 * otherwise: asserted). */
void hearth_cpu_dequantize_row(hearth_dtype t, const void *src, float *dst, int64_t n);

/* Quantize n floats into a row of type t, the way ggml's reference quantizer
 * (quantize_row_*_ref) does, so that files and round trips match ggml's; f16,
 * bf16 and e4m3 round to nearest even (e4m3: core/fp8.h). Returns HEARTH_EINVAL (dst untouched) when
 * t is unknown, q2_K, q3_K or an iq4 type, or n is negative or not a multiple of the block size.
 * Non-finite inputs give unspecified (but in-range, crash-free) codes. */
hearth_status hearth_cpu_quantize_row(hearth_dtype t, const float *src, void *dst, int64_t n);

#endif
