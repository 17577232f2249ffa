/* embed.cu - out[t][cols] = row ids[t] of the table, dequantized to f32 (any
 * weight type). An id outside [0, rows) gives a row of NaN, never a read
 * outside the table (the model checks ids before it gets here). */
#include "ops/cuda/cuda_internal.cuh"

template <int QT>
__global__ void embed_quant_kernel(float *__restrict__ out, const uint8_t *__restrict__ table, int rows, int cols,
                                   size_t row_bytes, const int32_t *__restrict__ ids, int T, int split) {
    pdl_wait();
    const int gpr = cols / 32;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * gpr) {
        int t = (int)(i / gpr), g = (int)(i % gpr);
        int id = ids[t];
        float f[32];
        if (id >= 0 && id < rows) {
            deq_row_group32<QT>(table + (size_t)id * row_bytes, cols / qtraits<QT>::ELEMS, g, split, f);
        } else {
#pragma unroll
            for (int e = 0; e < 32; e++) f[e] = __int_as_float(0x7fc00000);
        }
        float *o = out + (size_t)t * cols + (size_t)g * 32;
#pragma unroll
        for (int e = 0; e < 32; e++) o[e] = f[e];
    }
    pdl_launch();
}

template <typename S>
__global__ void embed_float_kernel(float *__restrict__ out, const uint8_t *__restrict__ table, int rows, int cols,
                                   size_t row_bytes, const int32_t *__restrict__ ids, int T) {
    pdl_wait();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * cols) {
        int t = (int)(i / cols), k = (int)(i % cols);
        int id = ids[t];
        float v = __int_as_float(0x7fc00000);
        if (id >= 0 && id < rows) {
            const S *r = (const S *)(table + (size_t)id * row_bytes);
            if constexpr (sizeof(S) == 4) v = r[k];
            else v = (float)r[k];
        }
        out[i] = v;
    }
    pdl_launch();
}

void cu_embed(const cu_launch *L, float *out, const void *table, hearth_dtype t, int rows, int cols,
              size_t row_bytes, int split, const int32_t *ids, int T) {
    const uint8_t *W = (const uint8_t *)table;
    int gb = cu_div_up((long)T * (cols / 32), 128), eb = cu_div_up((long)T * cols, 256);
    switch (t) {
#define EMBED_QUANT(QT)                                                                                                \
    case QT:                                                                                                           \
        cu_launch_k(L, embed_quant_kernel<QT>, dim3(gb), dim3(128), 0, out, W, rows, cols, row_bytes, ids, T, split);  \
        break
    EMBED_QUANT(HEARTH_DT_Q4_0); EMBED_QUANT(HEARTH_DT_Q4_1); EMBED_QUANT(HEARTH_DT_Q5_0);
    EMBED_QUANT(HEARTH_DT_Q5_1); EMBED_QUANT(HEARTH_DT_Q8_0); EMBED_QUANT(HEARTH_DT_Q2_K);
    EMBED_QUANT(HEARTH_DT_Q3_K); EMBED_QUANT(HEARTH_DT_Q4_K); EMBED_QUANT(HEARTH_DT_Q5_K);
    EMBED_QUANT(HEARTH_DT_Q6_K); EMBED_QUANT(HEARTH_DT_IQ4_NL); EMBED_QUANT(HEARTH_DT_IQ4_XS);
#undef EMBED_QUANT
    case HEARTH_DT_F32: cu_launch_k(L, embed_float_kernel<float>, dim3(eb), dim3(256), 0, out, W, rows, cols, row_bytes, ids, T); break;
    case HEARTH_DT_F16: cu_launch_k(L, embed_float_kernel<__half>, dim3(eb), dim3(256), 0, out, W, rows, cols, row_bytes, ids, T); break;
    case HEARTH_DT_BF16: cu_launch_k(L, embed_float_kernel<__nv_bfloat16>, dim3(eb), dim3(256), 0, out, W, rows, cols, row_bytes, ids, T); break;
    default: break;
    }
}
