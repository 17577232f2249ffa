/* attn_vec.h - the inner kernels of the CPU attention (ops_cpu.c's
 * att_item), chosen by ISA like the matmuls (scalar, AVX2+FMA, AVX-512F).
 *
 * Each (query row, position) score is one FMA chain over the head dimension
 * in order, its lanes added by the same tree wherever the position falls in a
 * block; each output element is one FMA chain over the positions in order.
 * So a row's numbers do not depend on which rows are computed with it. */
#ifndef HEARTH_OPS_CPU_ATTN_VEC_H
#define HEARTH_OPS_CPU_ATTN_VEC_H

#include <stdint.h>

/* The element type of the K / V rows the kernels take: f32, or f16 / e4m3
 * widened in registers (exactly), for which hd is a multiple of 16. */
enum { HEARTH_ROWS_F32, HEARTH_ROWS_F16, HEARTH_ROWS_E4M3 };

typedef struct {
    const char *isa;
    /* s[r * ss + p] = scale * dot(q[r], k[p]) for r < nr, p < n; kt: k's HEARTH_ROWS_ type */
    void (*scores)(float *s, int ss, const float *const *q, int nr, const void *const *k, int kt, int n, int hd,
                   float scale);
    /* o[r][e] += w[r * ws + p] * v[p][e] for p = 0 .. n-1 in order, r < nr, e < hd */
    void (*accum)(float *const *o, const float *w, int ws, int nr, const void *const *v, int vt, int n, int hd);
    /* s[p] = exp(s[p] - m) for p < n (0 below exp(-87.3)); returns their sum */
    float (*expsum)(float *s, int n, float m);
    /* the largest of m and s[0..n-1] (NaNs in s are passed over) */
    float (*max)(const float *s, int n, float m);
    /* d[e] = s[e] as f32, exactly (hearth_f16_to_f32, hearth_e4m3_to_f32) */
    void (*from_f16)(float *d, const uint16_t *s, int n);
    void (*from_e4m3)(float *d, const uint8_t *s, int n);
    /* d[e] = s[e] as f16, the bits of hearth_f32_to_f16 (round to nearest even) */
    void (*to_f16)(uint16_t *d, const float *s, int n);
} hearth_attn_ops;

/* The kernels of isa ("scalar", "avx2", "avx512"), or NULL if this CPU lacks it. */
const hearth_attn_ops *hearth_attn_ops_get(const char *isa);

#endif
