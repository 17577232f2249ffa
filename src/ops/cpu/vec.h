/* vec.h - small f32 vector kernels for element-wise ops (the attention's are attn_vec.h),
 * chosen once at run time by CPU features (AVX-512F, AVX2+FMA, scalar). */
#ifndef HEARTH_OPS_CPU_VEC_H
#define HEARTH_OPS_CPU_VEC_H

typedef struct {
    const char *isa;
    void (*scale)(float *y, float a, int n);                        /* y *= a */
    void (*add_scaled)(float *y, float a, const float *x, int n);   /* y += a * x, the same bits on every ISA */
    void (*swiglu)(float *out, const float *gate, const float *up, int n); /* gate * sigmoid(gate) * up */
    /* its backward (training): du = dh gate s, dgate = dh up s (1 + gate (1 - s)), s = sigmoid(gate) */
    void (*swiglu_bwd)(float *dgate, float *du, const float *gate, const float *up, const float *dh, int n);
} hearth_vec_ops;

/* The best kernels this CPU runs ("avx512", "avx2", "scalar"); isa forces one
 * (NULL = best). Thread-safe after the first call. */
const hearth_vec_ops *hearth_vec_get(const char *isa);

#endif
