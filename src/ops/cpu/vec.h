/* vec.h - small f32 vector kernels for attention and element-wise ops,
 * chosen once at run time by CPU features (AVX-512F, AVX2+FMA, scalar). */
#ifndef HEARTH_OPS_CPU_VEC_H
#define HEARTH_OPS_CPU_VEC_H

typedef struct {
    const char *isa;
    float (*dot)(const float *a, const float *b, int n);            /* sum a[i] * b[i] */
    void (*axpy)(float *y, float a, const float *x, int n);         /* y += a * x */
    void (*scale)(float *y, float a, int n);                        /* y *= a */
    void (*swiglu)(float *out, const float *gate, const float *up, int n); /* gate * sigmoid(gate) * up */
} hearth_vec_ops;

/* The best kernels this CPU runs ("avx512", "avx2", "scalar"); isa forces one
 * (NULL = best). Thread-safe after the first call. */
const hearth_vec_ops *hearth_vec_get(const char *isa);

#endif
