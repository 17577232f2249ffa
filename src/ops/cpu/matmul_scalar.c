/* matmul_scalar.c - the scalar kernels, which define the arithmetic of every
 * matmul output; the AVX2 and AVX-512 kernels reproduce it bit for bit.
 *
 * Activations (per token, once per call):
 *   q8_0 / q8_1 (32-blocks), as llama.cpp's x86 quantize_row_q8_0/_q8_1:
 *     amax = max |x|, d = amax / 127, id = amax ? 127 / amax : 0,
 *     q = round-to-nearest-even(x * id) (saturated to int8), the stored scale
 *     is f16(d); q8_1 also stores s = f16(d * sum(q)).
 *   q8_K (256-blocks), as ggml's quantize_row_q8_K_ref: max = the first
 *     element of largest magnitude, iscale = -127 / max, q = nearest(iscale *
 *     x) (ties to even), d = 1 / iscale, bsums = sums of 16.
 *   f16 / bf16: x rounded to nearest even.
 *
 * Quantized weights: for each block b in order, an exact integer dot isum_b
 * of the weight codes and the activation codes, then (fmaf = one rounding)
 *   q4_0, q8_0: acc = fmaf(dw_b * dx_b, isum_b, acc)           isum over (q - 8) resp. q
 *   q4_1:       acc = fmaf(dw_b * dx_b, isum_b, acc); acc = fmaf(mw_b, sx_b, acc)
 *   q5_0, q5_1: as q4_0 (isum over q - 16) and q4_1, their codes q = nibble | 16 * fifth bit
 *   q4_K:       acc = fmaf(dw_b * dx_b, isum_b, acc); acc = fmaf(-(dminw_b * dx_b), imin_b, acc)
 *               isum = sum_j sc_j * dot_j,  imin = sum_j m_j * (bsums_2j + bsums_2j+1)
 *   q5_K:       as q4_K, its codes q = nibble | 16 * high bit
 *   q6_K:       acc = fmaf(dw_b * dx_b, isum_b, acc),  isum = sum_g sc_g * dot_g(q - 32)
 *   q3_K:       as q6_K, isum = sum_g (sc_g - 32) * dot_g(q - 4 * !hbit)
 *   q2_K:       as q4_K over 16 sub-blocks of 16: isum = sum_g sc_g * dot_g, imin = sum_g m_g * bsums_g
 *   iq4_nl:     as q8_0, the codes values[q];  iq4_xs: as q6_K, isum = sum_ib (ls_ib - 32) * dot_ib(values[q])
 * starting from acc = 0; y = acc.
 * Float weights: sixteen lanes, lane l = fmaf chain over k = l, l+16, ...
 * (k ascending), then the pairwise tree (l, l+8), (l, l+4), (l, l+2), (0, 1).
 *
 * These loops are also the portable fallback when no SIMD ISA is present. */
#include "core/half.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/panel.h"
#include "ops/cpu/quant.h"

#include <math.h>
#include <string.h>

/* ---- activations ----------------------------------------------------------- */

/* round-to-nearest-even to int8 with the saturation of cvtps2dq + packs */
static inline int8_t q8_rne(float v) {
    if (v != v) return -128;
    if (v >= 127.f) return 127;
    if (v <= -128.f) return -128;
    return (int8_t)nearbyintf(v);
}

static void act_f16(const float *x, const mm_act *a, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        float *f = a->f + (size_t)t * a->f_stride;
        for (int k = 0; k < a->K; k++) f[k] = hearth_f16_to_f32(hearth_f32_to_f16(xt[k]));
    }
}

static void act_bf16(const float *x, const mm_act *a, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        float *f = a->f + (size_t)t * a->f_stride;
        for (int k = 0; k < a->K; k++) f[k] = hearth_bf16_to_f32(hearth_f32_to_bf16(xt[k]));
    }
}

static void act_q8_01(const float *x, const mm_act *a, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        int8_t *q = a->qs + (size_t)t * a->qs_stride;
        size_t o = (size_t)t * a->nb_stride;
        for (int b = 0; b < a->nb; b++, xt += 32, q += 32) {
            float amax = 0.f;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xt[j]));
            float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                q[j] = q8_rne(xt[j] * id);
                sum += q[j];
            }
            a->d[o + b] = hearth_f16_to_f32(hearth_f32_to_f16(d));
            a->isum[o + b] = sum;
            if (a->s) a->s[o + b] = hearth_f16_to_f32(hearth_f32_to_f16(d * (float)sum));
        }
    }
}

/* ggml's nearest_int (ties to even for |f| < 2^22) */
static inline int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static void act_q8_K(const float *x, const mm_act *a, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float *xt = x + (size_t)t * a->K;
        int8_t *q = a->qs + (size_t)t * a->qs_stride;
        size_t o = (size_t)t * a->nb_stride;
        for (int b = 0; b < a->nb; b++, xt += 256, q += 256) {
            int16_t *bs = a->bsums + (o + b) * 16;
            float max = 0.f, amax = 0.f;
            for (int j = 0; j < 256; j++)
                if (fabsf(xt[j]) > amax) amax = fabsf(xt[j]), max = xt[j];
            if (!(amax > 0.f)) {
                memset(q, 0, 256);
                memset(bs, 0, 32);
                a->d[o + b] = 0.f;
                continue;
            }
            float iscale = -127.f / max;
            for (int j = 0; j < 256; j++) {
                int v = nearest_int(iscale * xt[j]);
                q[j] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
            }
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += q[16 * g + l];
                bs[g] = (int16_t)s;
            }
            a->d[o + b] = 1.f / iscale;
        }
    }
}

/* ---- dots ------------------------------------------------------------------ */

/* One block's step of the q4_0 / q4_1 / q8_0 dots: block b of a row against
 * token t's activations. */
static float step_q4_0(const hearth_block_q4_0 *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b;
    const size_t o = (size_t)t * a->nb_stride + (size_t)b;
    int s = 0;
    for (int j = 0; j < 16; j++) s += (w->qs[j] & 0x0F) * q[j] + (w->qs[j] >> 4) * q[j + 16];
    s -= 8 * a->isum[o];
    return fmaf(hearth_f16_to_f32(w->d) * a->d[o], (float)s, acc);
}

static float step_q4_1(const hearth_block_q4_1 *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b;
    const size_t o = (size_t)t * a->nb_stride + (size_t)b;
    int s = 0;
    for (int j = 0; j < 16; j++) s += (w->qs[j] & 0x0F) * q[j] + (w->qs[j] >> 4) * q[j + 16];
    acc = fmaf(hearth_f16_to_f32(w->d) * a->d[o], (float)s, acc);
    return fmaf(hearth_f16_to_f32(w->m), a->s[o], acc);
}

static float step_q5_0(const hearth_block_q5_0 *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b;
    const size_t o = (size_t)t * a->nb_stride + (size_t)b;
    int s = 0;
    for (int e = 0; e < 32; e++) s += hearth_q5_code(w->qs, w->qh, e) * q[e];
    s -= 16 * a->isum[o];
    return fmaf(hearth_f16_to_f32(w->d) * a->d[o], (float)s, acc);
}

static float step_q5_1(const hearth_block_q5_1 *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b;
    const size_t o = (size_t)t * a->nb_stride + (size_t)b;
    int s = 0;
    for (int e = 0; e < 32; e++) s += hearth_q5_code(w->qs, w->qh, e) * q[e];
    acc = fmaf(hearth_f16_to_f32(w->d) * a->d[o], (float)s, acc);
    return fmaf(hearth_f16_to_f32(w->m), a->s[o], acc);
}

static float step_q8_0(const hearth_block_q8_0 *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b;
    int s = 0;
    for (int j = 0; j < 32; j++) s += w->qs[j] * q[j];
    return fmaf(hearth_f16_to_f32(w->d) * a->d[(size_t)t * a->nb_stride + (size_t)b], (float)s, acc);
}

#define DOT_STORED(name, blk_t, step)                                              \
    static float name(const uint8_t *row, const mm_act *a, int t) {                \
        const blk_t *w = (const void *)row;                                        \
        float acc = 0.f;                                                           \
        for (int b = 0; b < a->nb; b++) acc = step(&w[b], a, t, b, acc);           \
        return acc;                                                                \
    }
DOT_STORED(dot_q4_0, hearth_block_q4_0, step_q4_0)
DOT_STORED(dot_q4_1, hearth_block_q4_1, step_q4_1)
DOT_STORED(dot_q8_0, hearth_block_q8_0, step_q8_0)
DOT_STORED(dot_q5_0, hearth_block_q5_0, step_q5_0)
DOT_STORED(dot_q5_1, hearth_block_q5_1, step_q5_1)

/* The same dots over panel-laid weights (panel.h), a block taken out at a time. */
#define ROWS_PANEL(name, blk_t, wt, step)                                          \
    static void name(const mm_job *j, int n0, int n1) {                            \
        for (int n = n0; n < n1; n++)                                              \
            for (int t = 0; t < j->T; t++) {                                       \
                float acc = 0.f;                                                   \
                for (int b = 0; b < j->a->nb; b++) {                               \
                    blk_t w;                                                       \
                    hearth_cpu_panel_block(j->w, wt, j->K, j->N, n, b, &w);        \
                    acc = step(&w, j->a, t, b, acc);                               \
                }                                                                  \
                j->y[(size_t)t * j->N + n] = acc;                                  \
            }                                                                      \
    }
ROWS_PANEL(panel_q4_0, hearth_block_q4_0, HEARTH_DT_Q4_0, step_q4_0)
ROWS_PANEL(panel_q4_1, hearth_block_q4_1, HEARTH_DT_Q4_1, step_q4_1)
ROWS_PANEL(panel_q8_0, hearth_block_q8_0, HEARTH_DT_Q8_0, step_q8_0)

/* One block's step of the q4_K / q5_K / q6_K dots; qh: q5_K's fifth bits, or NULL (q4_K). */
static float step_mins(uint16_t d, uint16_t dmin, const uint8_t *scales, const uint8_t *qs4, const uint8_t *qh,
                       const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
    const int16_t *bs = a->bsums + ((size_t)t * a->nb_stride + (size_t)b) * 16;
    const float dx = a->d[(size_t)t * a->nb_stride + (size_t)b];
    int s = 0, mins = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        hearth_q4_K_scale_min(scales, j, &sc, &m);
        const uint8_t *qs = qs4 + 32 * (j / 2);
        int shift = 4 * (j & 1), sub = 0;
        for (int l = 0; l < 32; l++)
            sub += ((qs[l] >> shift & 0x0F) | (qh ? (qh[l] >> j & 1) << 4 : 0)) * q[32 * j + l];
        s += sc * sub;
        mins += m * (bs[2 * j] + bs[2 * j + 1]);
    }
    acc = fmaf(hearth_f16_to_f32(d) * dx, (float)s, acc);
    return fmaf(-(hearth_f16_to_f32(dmin) * dx), (float)mins, acc);
}

static float step_q4_K(const hearth_block_q4_K *w, const mm_act *a, int t, int b, float acc) {
    return step_mins(w->d, w->dmin, w->scales, w->qs, NULL, a, t, b, acc);
}

static float step_q5_K(const hearth_block_q5_K *w, const mm_act *a, int t, int b, float acc) {
    return step_mins(w->d, w->dmin, w->scales, w->qs, w->qh, a, t, b, acc);
}

/* q2_K / q3_K: element 128 h + 32 j + l is in sub-block 8 h + 2 j + l / 16 (quant.h) */
static float step_q2_K(const hearth_block_q2_K *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
    const int16_t *bs = a->bsums + ((size_t)t * a->nb_stride + (size_t)b) * 16;
    const float dx = a->d[(size_t)t * a->nb_stride + (size_t)b];
    int s = 0, mins = 0;
    for (int g = 0; g < 16; g++) {
        int h = g / 8, j = g % 8 / 2, l0 = 16 * (g % 2), sub = 0;
        for (int l = l0; l < l0 + 16; l++) sub += (w->qs[32 * h + l] >> (2 * j) & 3) * q[128 * h + 32 * j + l];
        s += (w->scales[g] & 15) * sub;
        mins += (w->scales[g] >> 4) * bs[g];
    }
    acc = fmaf(hearth_f16_to_f32(w->d) * dx, (float)s, acc);
    return fmaf(-(hearth_f16_to_f32(w->dmin) * dx), (float)mins, acc);
}

static float step_q3_K(const hearth_block_q3_K *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
    int s = 0;
    for (int g = 0; g < 16; g++) {
        int h = g / 8, j = g % 8 / 2, l0 = 16 * (g % 2), sub = 0;
        for (int l = l0; l < l0 + 16; l++)
            sub += ((w->qs[32 * h + l] >> (2 * j) & 3) - (w->hmask[l] >> (4 * h + j) & 1 ? 0 : 4)) *
                   q[128 * h + 32 * j + l];
        s += hearth_q3_K_scale(w->scales, g) * sub;
    }
    return fmaf(hearth_f16_to_f32(w->d) * a->d[(size_t)t * a->nb_stride + (size_t)b], (float)s, acc);
}

static float step_iq4_nl(const hearth_block_iq4_nl *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 32 * (size_t)b;
    int s = 0;
    for (int j = 0; j < 16; j++)
        s += hearth_iq4_values[w->qs[j] & 15] * q[j] + hearth_iq4_values[w->qs[j] >> 4] * q[j + 16];
    return fmaf(hearth_f16_to_f32(w->d) * a->d[(size_t)t * a->nb_stride + (size_t)b], (float)s, acc);
}

static float step_iq4_xs(const hearth_block_iq4_xs *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
    int s = 0;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *c = w->qs + 16 * ib;
        const int8_t *x = q + 32 * ib;
        int sub = 0;
        for (int j = 0; j < 16; j++)
            sub += hearth_iq4_values[c[j] & 15] * x[j] + hearth_iq4_values[c[j] >> 4] * x[j + 16];
        s += hearth_iq4_xs_scale(w, ib) * sub;
    }
    return fmaf(hearth_f16_to_f32(w->d) * a->d[(size_t)t * a->nb_stride + (size_t)b], (float)s, acc);
}

static float step_q6_K(const hearth_block_q6_K *w, const mm_act *a, int t, int b, float acc) {
    const int8_t *q = a->qs + (size_t)t * a->qs_stride + 256 * (size_t)b;
    int s = 0;
    for (int g = 0; g < 16; g++) {
        /* element e = 16g + i lies in half h, quarter c (which nibble / bit pair), column l */
        int sub = 0;
        for (int i = 0; i < 16; i++) {
            int e = 16 * g + i, h = e / 128, c = (e % 128) / 32, l = e % 32;
            uint8_t lo = w->ql[64 * h + l + 32 * (c & 1)];
            int v = ((c < 2 ? lo & 0x0F : lo >> 4) | ((w->qh[32 * h + l] >> (2 * c)) & 3) << 4) - 32;
            sub += v * q[e];
        }
        s += w->scales[g] * sub;
    }
    return fmaf(hearth_f16_to_f32(w->d) * a->d[(size_t)t * a->nb_stride + (size_t)b], (float)s, acc);
}

DOT_STORED(dot_q4_K, hearth_block_q4_K, step_q4_K)
DOT_STORED(dot_q5_K, hearth_block_q5_K, step_q5_K)
DOT_STORED(dot_q6_K, hearth_block_q6_K, step_q6_K)
DOT_STORED(dot_q2_K, hearth_block_q2_K, step_q2_K)
DOT_STORED(dot_q3_K, hearth_block_q3_K, step_q3_K)
DOT_STORED(dot_iq4_nl, hearth_block_iq4_nl, step_iq4_nl)
DOT_STORED(dot_iq4_xs, hearth_block_iq4_xs, step_iq4_xs)
ROWS_PANEL(panel_q4_K, hearth_block_q4_K, HEARTH_DT_Q4_K, step_q4_K)

static float tree16(const float *a) {
    float b[8], c[4];
    for (int l = 0; l < 8; l++) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) c[l] = b[l] + b[l + 4];
    float d0 = c[0] + c[2], d1 = c[1] + c[3];
    return d0 + d1;
}

static float dot_f32(const uint8_t *row, const mm_job *j, int t) {
    const float *w = (const float *)(const void *)row, *x = j->x + (size_t)t * j->K;
    float a[16] = {0};
    for (int k = 0; k < j->K; k++) a[k & 15] = fmaf(w[k], x[k], a[k & 15]);
    return tree16(a);
}

static float dot_f16(const uint8_t *row, const mm_job *j, int t) {
    const uint16_t *w = (const void *)row;
    const float *x = j->a->f + (size_t)t * j->a->f_stride;
    float a[16] = {0};
    for (int k = 0; k < j->K; k++) a[k & 15] = fmaf(hearth_f16_to_f32(w[k]), x[k], a[k & 15]);
    return tree16(a);
}

static float dot_bf16(const uint8_t *row, const mm_job *j, int t) {
    const uint16_t *w = (const void *)row;
    const float *x = j->a->f + (size_t)t * j->a->f_stride;
    float a[16] = {0};
    for (int k = 0; k < j->K; k++) a[k & 15] = fmaf(hearth_bf16_to_f32(w[k]), x[k], a[k & 15]);
    return tree16(a);
}

/* ---- row kernels --------------------------------------------------------- */

#define ROWS_Q(name, dot)                                                          \
    static void name(const mm_job *j, int n0, int n1) {                            \
        for (int n = n0; n < n1; n++) {                                            \
            const uint8_t *row = j->w + (size_t)n * j->row_bytes;                  \
            for (int t = 0; t < j->T; t++) j->y[(size_t)t * j->N + n] = dot(row, j->a, t); \
        }                                                                          \
    }
#define ROWS_F(name, dot)                                                          \
    static void name(const mm_job *j, int n0, int n1) {                            \
        for (int n = n0; n < n1; n++) {                                            \
            const uint8_t *row = j->w + (size_t)n * j->row_bytes;                  \
            for (int t = 0; t < j->T; t++) j->y[(size_t)t * j->N + n] = dot(row, j, t); \
        }                                                                          \
    }
ROWS_Q(rows_q4_0, dot_q4_0)
ROWS_Q(rows_q4_1, dot_q4_1)
ROWS_Q(rows_q8_0, dot_q8_0)
ROWS_Q(rows_q4_K, dot_q4_K)
ROWS_Q(rows_q5_K, dot_q5_K)
ROWS_Q(rows_q5_0, dot_q5_0)
ROWS_Q(rows_q5_1, dot_q5_1)
ROWS_Q(rows_q6_K, dot_q6_K)
ROWS_Q(rows_q2_K, dot_q2_K)
ROWS_Q(rows_q3_K, dot_q3_K)
ROWS_Q(rows_iq4_nl, dot_iq4_nl)
ROWS_Q(rows_iq4_xs, dot_iq4_xs)
ROWS_F(rows_f32, dot_f32)
ROWS_F(rows_f16, dot_f16)
ROWS_F(rows_bf16, dot_bf16)

static void act_none(const float *x, const mm_act *a, int t0, int t1) {}

const mm_isa hearth_cpu_mm_scalar = {
    .name = "scalar",
    .rows = {[MM_F32] = rows_f32, [MM_F16] = rows_f16, [MM_BF16] = rows_bf16, [MM_Q4_0] = rows_q4_0,
             [MM_Q4_1] = rows_q4_1, [MM_Q8_0] = rows_q8_0, [MM_Q4_K] = rows_q4_K, [MM_Q6_K] = rows_q6_K,
             [MM_Q5_K] = rows_q5_K, [MM_Q5_0] = rows_q5_0, [MM_Q5_1] = rows_q5_1, [MM_Q2_K] = rows_q2_K,
             [MM_Q3_K] = rows_q3_K, [MM_IQ4_NL] = rows_iq4_nl, [MM_IQ4_XS] = rows_iq4_xs},
    .panel = {[MM_Q4_0] = panel_q4_0, [MM_Q4_1] = panel_q4_1, [MM_Q8_0] = panel_q8_0, [MM_Q4_K] = panel_q4_K},
    .act = {[ACT_NONE] = act_none, [ACT_F16] = act_f16, [ACT_BF16] = act_bf16, [ACT_Q8_0] = act_q8_01,
            [ACT_Q8_1] = act_q8_01, [ACT_Q8_K] = act_q8_K},
};
