/* matmul_avx512.c - AVX-512 (F, BW, VL, DQ, VNNI) kernels.
 * Compiled for that target per function, chosen at run time (matmul.c). */
#include "ops/cpu/matmul_impl.h"

const mm_isa hearth_cpu_mm_avx512 = {.name = "avx512"};
