/* fp8.h - OCP FP8 E4M3 ("e4m3fn") conversions for the KV cache.
 *
 * E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities;
 * 0x7f and 0xff are NaN; the largest finite value is 448 (0x7e), the
 * smallest normal 2^-6 (0x08), subnormals m * 2^-9 (m = 1..7). The per-tensor
 * scale is 1.0 (vLLM's default without calibration): the cache stores the
 * values themselves.
 *
 * hearth_f32_to_e4m3 is bit-equal to CUDA's __nv_cvt_float_to_fp8(x,
 * __NV_SATFINITE, __NV_E4M3) (on sm_89+ the hardware cvt.rn.satfinite.e4m3x2.f32):
 * round to nearest even directly from f32 (never through f16), finite values
 * beyond 448 and +-infinity saturate to +-448, every NaN becomes 0x7f (sign
 * dropped), magnitudes at or below 2^-10 become a signed zero.
 * hearth_e4m3_to_f32 is exact (every e4m3 value is an f32, and an f16). */
#ifndef HEARTH_CORE_FP8_H
#define HEARTH_CORE_FP8_H

#include <stdint.h>
#include <string.h>

static inline uint8_t hearth_f32_to_e4m3(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7f;                   /* NaN */
    if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7e); /* >= 448 (ties above 448 go to 448, even) */
    const uint32_t e = a >> 23, sig = (a & 0x7fffffu) | 0x800000u;
    uint32_t r, rem, half;
    if (e >= 121) { /* normal: >= 2^-6 */
        r = ((e - 120) << 3) | ((a >> 20) & 7u);
        rem = a & 0xfffffu;
        half = 0x80000u;
    } else {        /* subnormal steps of 2^-9: r = |f| * 2^9 rounded; r == 8 is 2^-6 (0x08) */
        if (e < 117) return sign; /* below 2^-10 (f32 subnormals too): zero */
        const uint32_t shift = 141 - e; /* 21..24: |f| * 2^9 = sig * 2^(e - 141) */
        r = sig >> shift;
        rem = sig & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    }
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (uint8_t)(sign | r);
}

static inline float hearth_e4m3_to_f32(uint8_t b) {
    const uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
    uint32_t u;
    if ((b & 0x7fu) == 0x7fu) {
        u = 0x7fc00000u; /* NaN */
    } else if (e) {
        u = ((e + 120) << 23) | (m << 20);
    } else if (m) { /* m * 2^-9: normalise the mantissa */
        uint32_t ee = 120, mm = m; /* 4..7 * 2^-9 = 1.xx * 2^-7 */
        while (!(mm & 4u)) mm <<= 1, ee--;
        u = (ee << 23) | ((mm & 3u) << 21);
    } else {
        u = 0;
    }
    u |= (uint32_t)(b & 0x80u) << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
