/* matmul_avx2.c - AVX2 + FMA + F16C kernels (x86-64 CPUs from 2013 on).
 * Compiled for that target per function, chosen at run time (matmul.c). */
#include "ops/cpu/matmul_impl.h"

const mm_isa hearth_cpu_mm_avx2 = {.name = "avx2"};
