/* matmul_impl.h - private to src/ops/cpu: the activation layout in scratch,
 * the per-ISA kernel tables, and the ISA override used by tests and bench.
 *
 * Every kernel of every ISA computes each output with the same sequence of
 * f32 operations (defined by the scalar kernels in matmul_scalar.c), so the
 * tables are interchangeable and the tests demand bit-identical results. */
#ifndef HEARTH_OPS_CPU_MATMUL_IMPL_H
#define HEARTH_OPS_CPU_MATMUL_IMPL_H

#include "core/dtype.h"

#include <stddef.h>
#include <stdint.h>

/* Weight types, as small indices into the kernel tables. */
enum { MM_F32, MM_F16, MM_BF16, MM_Q4_0, MM_Q4_1, MM_Q8_0, MM_Q4_K, MM_Q6_K, MM_Q5_K, MM_Q5_0, MM_Q5_1,
       MM_Q2_K, MM_Q3_K, MM_IQ4_NL, MM_IQ4_XS, MM_NWT };

/* How the activations are prepared for each weight type. */
enum {
    ACT_NONE, /* f32 weights: x is used as is */
    ACT_F16,  /* x rounded to f16, kept as f32 */
    ACT_BF16, /* x rounded to bf16, kept as f32 */
    ACT_Q8_0, /* 32-blocks: qs, d = f32(f16(amax/127)), isum = sum(qs) */
    ACT_Q8_1, /* as q8_0, plus s = f32(f16(amax/127 * isum)) */
    ACT_Q8_K, /* 256-blocks: qs, d (f32), bsums (sums of 16) */
    ACT_NKIND
};

/* The quantized (or rounded) activations in scratch, token-major. Token t's
 * data: qs + t*qs_stride (K int8), f + t*f_stride (K floats), d/s/isum +
 * t*nb_stride (nb values), bsums + t*nb_stride*16. Unused arrays are NULL. */
typedef struct {
    int kind, T, K, nb;
    size_t qs_stride, f_stride, nb_stride;
    int8_t *qs;
    float *f;
    float *d, *s;
    int32_t *isum;
    int16_t *bsums;
} mm_act;

/* One matmul call as the row kernels see it. */
typedef struct {
    float *y;
    const float *x; /* the original activations (f32 weights read these) */
    const mm_act *a;
    const uint8_t *w;
    size_t row_bytes;
    int T, K, N;
} mm_job;

/* Float weights: when the token tiles make several passes over a task's rows (T > one_pass_T), the rows go in
 * blocks of ~512 KB, which stay in L2 from one pass to the next (sessions 46, 47); the rows in a block. */
static inline int mm_float_block_rows(const mm_job *j, int n0, int n1, int one_pass_T) {
    if (j->T <= one_pass_T) return n1 - n0;
    const int nb = (int)((512 * 1024) / j->row_bytes) & ~3;
    return nb < 4 ? 4 : nb;
}

/* Compute y[t*N + n] for every t < T and n0 <= n < n1. */
typedef void (*mm_rows_fn)(const mm_job *job, int n0, int n1);
/* Prepare the activations of tokens t0 <= t < t1 (kind a->kind). */
typedef void (*mm_act_fn)(const float *x, const mm_act *a, int t0, int t1);

typedef struct {
    const char *name;
    mm_rows_fn rows[MM_NWT];   /* NULL: use the scalar kernel */
    mm_rows_fn panel[MM_NWT];  /* panel-laid weights (panel.h); NULL: AVX2's, else the scalar one */
    mm_act_fn act[ACT_NKIND];  /* NULL: use the scalar routine */
} mm_isa;

extern const mm_isa hearth_cpu_mm_scalar;
extern const mm_isa hearth_cpu_mm_avx2;
extern const mm_isa hearth_cpu_mm_avx512;

/* ISA choice. */
enum { HEARTH_CPU_ISA_AUTO = -1, HEARTH_CPU_ISA_SCALAR = 0, HEARTH_CPU_ISA_AVX2, HEARTH_CPU_ISA_AVX512 };
/* 1 if this CPU can run the kernels of isa. */
int hearth_cpu_isa_available(int isa);
/* Force an ISA for later matmuls and attention (HEARTH_CPU_ISA_AUTO: the best available).
 * Returns 0 (and changes nothing) if isa is not available. For tests and
 * benchmarks; not to be called while a matmul or attention runs. */
int hearth_cpu_isa_force(int isa);
/* The ISA later matmuls will use. */
int hearth_cpu_isa_current(void);
const char *hearth_cpu_isa_name(int isa);

/* Lay out the activations of T tokens of K elements for weight type wt in
 * scratch (NULL: only compute the size). Returns the bytes needed. */
size_t hearth_cpu_act_layout(int wt_index, int T, int K, void *scratch, mm_act *a);

/* Weight type -> table index, or -1. */
int hearth_cpu_mm_index(hearth_dtype wt);

#endif
