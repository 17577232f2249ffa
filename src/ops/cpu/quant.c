/* quant.c - dequantize every type to f32, and quantize f32 the way ggml's
 * reference quantizers do (the algorithms of quantize_row_*_ref, rewritten
 * here; see quant.h for the byte layouts).
 *
 * These are the plain scalar definitions: matmul's fast paths quantize
 * activations with their own routines (matmul_act.c) and are tested against
 * the values produced here. */
#include "ops/cpu/quant.h"

#include "core/fp8.h"
#include "core/half.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ggml's nearest_int: round to nearest, ties to even, for |f| < 2^22, by the
 * 1.5 * 2^23 trick (so its results, not lrintf's, are the reference). */
static inline int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* (int)v for v that ggml truncates to a small code, clamped first so that
 * non-finite inputs cannot make the conversion undefined. */
static inline int trunc_code(float v, int hi) {
    if (!(v >= 0.f)) return 0;
    if (v >= (float)hi) return hi;
    return (int)v;
}

int hearth_cpu_quant_known(hearth_dtype t) {
    switch (t) {
    case HEARTH_DT_F32: case HEARTH_DT_F16: case HEARTH_DT_BF16:
    case HEARTH_DT_Q4_0: case HEARTH_DT_Q4_1: case HEARTH_DT_Q5_0: case HEARTH_DT_Q5_1:
    case HEARTH_DT_Q8_0: case HEARTH_DT_Q8_1:
    case HEARTH_DT_Q2_K: case HEARTH_DT_Q3_K: case HEARTH_DT_Q4_K:
    case HEARTH_DT_Q5_K: case HEARTH_DT_Q6_K: case HEARTH_DT_Q8_K: case HEARTH_DT_E4M3:
    case HEARTH_DT_IQ4_NL: case HEARTH_DT_IQ4_XS:
        return 1;
    }
    return 0;
}

/* ---- dequantize ---------------------------------------------------------- */

static void deq_q4_0(const hearth_block_q4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((b[i].qs[j] & 0x0F) - 8);
            y[j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void deq_q4_1(const hearth_block_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d), m = hearth_f16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)(b[i].qs[j] & 0x0F) + m;
            y[j + 16] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

static void deq_q5_0(const hearth_block_q5_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int e = 0; e < 32; e++) y[e] = (float)(hearth_q5_code(b[i].qs, b[i].qh, e) - 16) * d;
    }
}

static void deq_q5_1(const hearth_block_q5_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d), m = hearth_f16_to_f32(b[i].m);
        for (int e = 0; e < 32; e++) y[e] = d * (float)hearth_q5_code(b[i].qs, b[i].qh, e) + m;
    }
}

static void deq_q8_0(const hearth_block_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)b[i].qs[j];
    }
}

static void deq_q8_1(const hearth_block_q8_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)b[i].qs[j];
    }
}

static void deq_q4_K(const hearth_block_q4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = hearth_f16_to_f32(b[i].d), dmin = hearth_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc0, m0, sc1, m1;
            hearth_q4_K_scale_min(b[i].scales, 2 * c, &sc0, &m0);
            hearth_q4_K_scale_min(b[i].scales, 2 * c + 1, &sc1, &m1);
            float d0 = d * (float)sc0, mm0 = dmin * (float)m0;
            float d1 = d * (float)sc1, mm1 = dmin * (float)m1;
            for (int l = 0; l < 32; l++) *y++ = d0 * (float)(q[l] & 0x0F) - mm0;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] >> 4) - mm1;
        }
    }
}

/* q2_K / q3_K: element 128 h + 32 j + l, sub-block 8 h + 2 j + l / 16 (quant.h) */
static void deq_q2_K(const hearth_block_q2_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 256) {
        float d = hearth_f16_to_f32(b[i].d), dmin = hearth_f16_to_f32(b[i].dmin);
        for (int e = 0; e < 256; e++) {
            int h = e / 128, j = e % 128 / 32, l = e % 32, g = 8 * h + 2 * j + l / 16;
            int q = b[i].qs[32 * h + l] >> (2 * j) & 3;
            y[e] = d * (float)(b[i].scales[g] & 15) * (float)q - dmin * (float)(b[i].scales[g] >> 4);
        }
    }
}

static void deq_q3_K(const hearth_block_q3_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 256) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int e = 0; e < 256; e++) {
            int h = e / 128, j = e % 128 / 32, l = e % 32, g = 8 * h + 2 * j + l / 16;
            int q = (b[i].qs[32 * h + l] >> (2 * j) & 3) - (b[i].hmask[l] >> (4 * h + j) & 1 ? 0 : 4);
            y[e] = d * (float)hearth_q3_K_scale(b[i].scales, g) * (float)q;
        }
    }
}

/* ggml's kvalues_iq4nl: the format's codebook */
const int8_t hearth_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void deq_iq4_nl(const hearth_block_iq4_nl *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)hearth_iq4_values[b[i].qs[j] & 15];
            y[j + 16] = d * (float)hearth_iq4_values[b[i].qs[j] >> 4];
        }
    }
}

static void deq_iq4_xs(const hearth_block_iq4_xs *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            float dl = d * (float)hearth_iq4_xs_scale(&b[i], ib);
            const uint8_t *q = b[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)hearth_iq4_values[q[j] & 15];
                y[j + 16] = dl * (float)hearth_iq4_values[q[j] >> 4];
            }
        }
    }
}

static void deq_q5_K(const hearth_block_q5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = hearth_f16_to_f32(b[i].d), dmin = hearth_f16_to_f32(b[i].dmin);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            hearth_q4_K_scale_min(b[i].scales, j, &sc, &m);
            float dj = d * (float)sc, mj = dmin * (float)m;
            const uint8_t *q = b[i].qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++)
                *y++ = dj * (float)((q[l] >> (4 * (j & 1)) & 0x0F) | ((b[i].qh[l] >> j) & 1) << 4) - mj;
        }
    }
}

static void deq_q6_K(const hearth_block_q6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 256) {
        float d = hearth_f16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = b[i].ql + 64 * h, *H = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            float *o = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int g = l / 16;
                int q1 = ((L[l] & 0x0F) | (((H[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((L[l + 32] & 0x0F) | (((H[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
                o[l] = d * (float)sc[g] * (float)q1;
                o[l + 32] = d * (float)sc[g + 2] * (float)q2;
                o[l + 64] = d * (float)sc[g + 4] * (float)q3;
                o[l + 96] = d * (float)sc[g + 6] * (float)q4;
            }
        }
    }
}

static void deq_q8_K(const hearth_block_q8_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 256)
        for (int j = 0; j < 256; j++) y[j] = b[i].d * (float)b[i].qs[j];
}

void hearth_cpu_dequantize_row(hearth_dtype t, const void *src, float *dst, int64_t n) {
    const hearth_dtype_info *info = hearth_dtype_get(t);
    HEARTH_ASSERT(info && hearth_cpu_quant_known(t) && n >= 0 && n % info->block == 0);
    int64_t nb = n / info->block;
    switch (t) {
    case HEARTH_DT_F32: memmove(dst, src, (size_t)n * 4); break;
    case HEARTH_DT_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = hearth_f16_to_f32(s[i]);
        break;
    }
    case HEARTH_DT_E4M3: {
        const uint8_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = hearth_e4m3_to_f32(s[i]);
        break;
    }
    case HEARTH_DT_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = hearth_bf16_to_f32(s[i]);
        break;
    }
    case HEARTH_DT_Q4_0: deq_q4_0(src, dst, nb); break;
    case HEARTH_DT_Q4_1: deq_q4_1(src, dst, nb); break;
    case HEARTH_DT_Q8_0: deq_q8_0(src, dst, nb); break;
    case HEARTH_DT_Q8_1: deq_q8_1(src, dst, nb); break;
    case HEARTH_DT_Q5_0: deq_q5_0(src, dst, nb); break;
    case HEARTH_DT_Q5_1: deq_q5_1(src, dst, nb); break;
    case HEARTH_DT_Q2_K: deq_q2_K(src, dst, nb); break;
    case HEARTH_DT_Q3_K: deq_q3_K(src, dst, nb); break;
    case HEARTH_DT_IQ4_NL: deq_iq4_nl(src, dst, nb); break;
    case HEARTH_DT_IQ4_XS: deq_iq4_xs(src, dst, nb); break;
    case HEARTH_DT_Q4_K: deq_q4_K(src, dst, nb); break;
    case HEARTH_DT_Q5_K: deq_q5_K(src, dst, nb); break;
    case HEARTH_DT_Q6_K: deq_q6_K(src, dst, nb); break;
    case HEARTH_DT_Q8_K: deq_q8_K(src, dst, nb); break;
    }
}

/* ---- reference quantizers ------------------------------------------------ */

/* The signed value of largest magnitude of a 32-block (the first one wins): q4_0 / q5_0 map it to -8 / -16. */
static float signed_max32(const float *x) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
    return max;
}

static void quant_q4_0(const float *x, hearth_block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float d = signed_max32(x) / -8.f, id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = hearth_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int q0 = trunc_code(x[j] * id + 8.5f, 15), q1 = trunc_code(x[j + 16] * id + 8.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

static void min_max32(const float *x, float *min, float *max) {
    *min = FLT_MAX, *max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

static void quant_q4_1(const float *x, hearth_block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float min, max;
        min_max32(x, &min, &max);
        float d = (max - min) / 15.f, id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = hearth_f32_to_f16(d);
        y[i].m = hearth_f32_to_f16(min);
        for (int j = 0; j < 16; j++) {
            int q0 = trunc_code((x[j] - min) * id + 0.5f, 15);
            int q1 = trunc_code((x[j + 16] - min) * id + 0.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* Codes 0..31 of 32 elements into a q5 block's nibbles and fifth bits. */
static void pack_q5(const int *q, uint8_t *qs, uint8_t *qh) {
    memset(qh, 0, 4);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 0x0F) | (q[j + 16] & 0x0F) << 4);
    for (int e = 0; e < 32; e++) qh[e / 8] |= (uint8_t)((q[e] >> 4) << (e % 8));
}

static void quant_q5_0(const float *x, hearth_block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float d = signed_max32(x) / -16.f, id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = hearth_f32_to_f16(d);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = trunc_code(x[j] * id + 16.5f, 31);
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

static void quant_q5_1(const float *x, hearth_block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float min, max;
        min_max32(x, &min, &max);
        float d = (max - min) / 31.f, id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = hearth_f32_to_f16(d);
        y[i].m = hearth_f32_to_f16(min);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = trunc_code((x[j] - min) * id + 0.5f, 31);
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

/* roundf(v) as an int8 for |v| <= 127.5 (non-finite v -> 0). */
static inline int8_t round_i8(float v) {
    if (!(fabsf(v) <= 127.f)) return (int8_t)(v > 0 ? 127 : v < 0 ? -127 : 0);
    return (int8_t)roundf(v);
}

static void quant_q8_0(const float *x, hearth_block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0.f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = hearth_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = round_i8(x[j] * id);
    }
}

static void quant_q8_1(const float *x, hearth_block_q8_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0.f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            y[i].qs[j] = round_i8(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = hearth_f32_to_f16(d);
        y[i].s = hearth_f32_to_f16((float)sum * d);
    }
}

/* ggml's make_qkx2_quants (squared-error variant): fit x ~ scale * L - min
 * over n values with L in 0..nmax, weighted by w, trying nstep + 1 candidate
 * inverse scales around nmax / (max - min). Returns scale; *the_min gets the
 * (non-negative) offset. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        best += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* One super-block of q4_K / q5_K (ggml's quantize_row_q4_K_ref / _q5_K_ref): the packed 6-bit scales and mins
 * into s[12], d and dmin, and the codes (0..nmax) of its 256 elements into L. */
static void quant_k_mins(const float *x, uint8_t *s, uint16_t *d_out, uint16_t *dmin_out, uint8_t *L, int nmax,
                         float rmin, int nstep) {
    uint8_t Laux[32];
    float w[32], mins[8], scales[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0x0F) | (lm & 0x0F) << 4);
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = hearth_f32_to_f16(max_scale / 63.f);
    *dmin_out = hearth_f32_to_f16(max_min / 63.f);
    /* requantize against the stored (rounded) scales */
    for (int j = 0; j < 8; j++) {
        int sc, m;
        hearth_q4_K_scale_min(s, j, &sc, &m);
        float d = hearth_f16_to_f32(*d_out) * (float)sc;
        if (d == 0.f) continue;
        float dm = hearth_f16_to_f32(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)clampi(nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

static void quant_q4_K(const float *x, hearth_block_q4_K *y, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        quant_k_mins(x, y[i].scales, &y[i].d, &y[i].dmin, L, 15, -1.f, 20);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
    }
}

static void quant_q5_K(const float *x, hearth_block_q5_K *y, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        quant_k_mins(x, y[i].scales, &y[i].d, &y[i].dmin, L, 31, -0.5f, 15);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                y[i].qs[32 * (j / 2) + l] = (uint8_t)((j & 1 ? y[i].qs[32 * (j / 2) + l] : 0) |
                                                      (L[32 * j + l] & 0x0F) << (4 * (j & 1)));
                y[i].qh[l] |= (uint8_t)((L[32 * j + l] >> 4) << j);
            }
    }
}

/* ggml's make_qx_quants with rmse_type 1 and no importance weights: a
 * symmetric scale for n values, L in 0..2*nmax-1 (stored offset by nmax),
 * refined over 18 candidate inverse scales by weighted (x^2) least squares. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -(float)nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.f ? sumlx / suml2 : 0.f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void quant_q6_K(const float *x, hearth_block_q6_K *y, int64_t nb) {
    int8_t L[256];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) max_abs_scale = fabsf(scales[g]), max_scale = scales[g];
        }
        if (max_abs_scale < 1e-15f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = hearth_f32_to_f16(1 / iscale);
        for (int g = 0; g < 16; g++) {
            int v = nearest_int(iscale * scales[g]);
            y[i].scales[g] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            float d = hearth_f16_to_f32(y[i].d) * (float)y[i].scales[g];
            if (d == 0.f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(clampi(nearest_int(x[16 * g + l] / d), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = (uint8_t)((q1 & 0x0F) | (q3 & 0x0F) << 4);
                ql[l + 32] = (uint8_t)((q2 & 0x0F) | (q4 & 0x0F) << 4);
                qh[l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
    }
}

static void quant_q8_K(const float *x, hearth_block_q8_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float max = 0, amax = 0;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        if (!(amax > 0.f) || amax > FLT_MAX) { /* all zero (or non-finite input) */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)clampi(v, -128, 127);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

hearth_status hearth_cpu_quantize_row(hearth_dtype t, const float *src, void *dst, int64_t n) {
    const hearth_dtype_info *info = hearth_dtype_get(t);
    if (!info || !hearth_cpu_quant_known(t) || n < 0 || n % info->block) return HEARTH_EINVAL;
    int64_t nb = n / info->block;
    switch (t) {
    case HEARTH_DT_F32: memmove(dst, src, (size_t)n * 4); break;
    case HEARTH_DT_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = hearth_f32_to_f16(src[i]);
        break;
    }
    case HEARTH_DT_E4M3: {
        uint8_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = hearth_f32_to_e4m3(src[i]);
        break;
    }
    case HEARTH_DT_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = hearth_f32_to_bf16(src[i]);
        break;
    }
    case HEARTH_DT_Q4_0: quant_q4_0(src, dst, nb); break;
    case HEARTH_DT_Q4_1: quant_q4_1(src, dst, nb); break;
    case HEARTH_DT_Q5_0: quant_q5_0(src, dst, nb); break;
    case HEARTH_DT_Q5_1: quant_q5_1(src, dst, nb); break;
    case HEARTH_DT_Q8_0: quant_q8_0(src, dst, nb); break;
    case HEARTH_DT_Q8_1: quant_q8_1(src, dst, nb); break;
    case HEARTH_DT_Q4_K: quant_q4_K(src, dst, nb); break;
    case HEARTH_DT_Q5_K: quant_q5_K(src, dst, nb); break;
    case HEARTH_DT_Q6_K: quant_q6_K(src, dst, nb); break;
    case HEARTH_DT_Q8_K: quant_q8_K(src, dst, nb); break;
    case HEARTH_DT_Q2_K: case HEARTH_DT_Q3_K: case HEARTH_DT_IQ4_NL: case HEARTH_DT_IQ4_XS:
        return HEARTH_EINVAL; /* read, never written */
    }
    return HEARTH_OK;
}
