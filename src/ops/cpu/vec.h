/* vec.h - small f32 vector kernels for attention and element-wise ops,
 * chosen once at run time by CPU features (AVX-512F, AVX2+FMA, scalar). */
#ifndef HEARTH_OPS_CPU_VEC_H
#define HEARTH_OPS_CPU_VEC_H

typedef struct {
    const char *isa;
    float (*dot)(const float *a, const float *b, int n);            /* sum a[i] * b[i] */
    void (*axpy)(float *y, float a, const float *x, int n);         /* y += a * x */
    void (*scale)(float *y, float a, int n);                        /* y *= a */
    /* Attention over n <= 64 positions for gs query heads of one KV head (q:
     * gs rows of hd; k[p], v[p]: the positions' rows):
     * s[i * ss + p] = scale * dot(q_i, k[p]); o_i += sum over p of w[i * ws + p] * v[p];
     * expsum: s[p] = exp(s[p] - m) for p < n, returning their sum. */
    void (*scores)(float *s, int ss, const float *q, int gs, const float *const *k, int n, int hd, float scale);
    void (*accum)(float *o, const float *w, int ws, int gs, const float *const *v, int n, int hd);
    float (*expsum)(float *s, int n, float m);
} hearth_vec_ops;

/* The best kernels this CPU runs ("avx512", "avx2", "scalar"); isa forces one
 * (NULL = best). Thread-safe after the first call. */
const hearth_vec_ops *hearth_vec_get(const char *isa);

#endif
