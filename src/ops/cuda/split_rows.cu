/* split_rows.cu - quantized rows of every type re-laid in place at load as
 * split rows (cuda_internal.cuh: a row's block codes, then its block heads),
 * for the streamed GEMV. One block a row: the row to shared memory, then
 * back, each byte of the split row read from where split_map says. */
#include "ops/cuda/cuda_internal.cuh"

#define SPLIT_MAX_ROW (200 * 1024) /* dynamic shared memory of one block */

/* Byte i of a split row's codes (i < nb * QB) and of its heads (i < nb *
 * HB), from the stored row s of nb blocks. Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, IQ4_XS, IQ4_NL: a stored
 * block is its head, then its codes, each moved whole. */
template <int QT> struct split_map {
    enum { QB = split_fmt<QT>::QB, HB = split_fmt<QT>::HB, BYTES = qtraits<QT>::BYTES };
    static_assert(HB + QB == BYTES, "a block is its head, then its codes");
    static __device__ __forceinline__ uint8_t code(const uint8_t *s, int nb, int i) {
        return s[i / QB * BYTES + HB + i % QB];
    }
    static __device__ __forceinline__ uint8_t head(const uint8_t *s, int nb, int i) {
        return s[i / HB * BYTES + i % HB];
    }
};

/* Q6_K (stored: ql[128], qh[64], scales[16], d), re-laid by unit as
 * cuda_internal.cuh says: ql stays; unit u's top bits are gathered from the
 * 32 qh bytes of its half (n = u / 2) at its shift 2 * (u % 2); its four
 * scales sit together; the d's come last. */
template <> struct split_map<HEARTH_DT_Q6_K> {
    enum { QB = split_fmt<HEARTH_DT_Q6_K>::QB, BYTES = qtraits<HEARTH_DT_Q6_K>::BYTES };
    enum { QH = 128, SC = 192, D = 208 }; /* stored offsets of qh, scales, d (ql at 0) */
    static_assert(QB == QH + 64 && QB + split_fmt<HEARTH_DT_Q6_K>::HB == BYTES, "codes ql, qh; head scales, d");
    static __device__ __forceinline__ uint8_t code(const uint8_t *s, int nb, int i) {
        const uint8_t *blk = s + i / QB * BYTES;
        const int j = i % QB;
        if (j < QH) return blk[j]; /* ql */
        const int u = (j - QH) / 16, p = (j - QH) % 16, sh = 2 * (u & 1);
        const uint8_t *qh = blk + QH + 32 * (u >> 1); /* byte l: the top bits of element l of the half's groups */
        return (uint8_t)(((qh[p] >> sh) & 0x33) | (((qh[16 + p] >> sh) & 0x33) << 2));
    }
    static __device__ __forceinline__ uint8_t head(const uint8_t *s, int nb, int i) {
        if (i < 16 * nb) { /* scale k of unit u = 2n + kk: scales[8n + 2kk + k % 2 + 4 (k / 2)] */
            const int u = i % 16 / 4, k = i % 4;
            return s[i / 16 * BYTES + SC + 8 * (u >> 1) + 2 * (u & 1) + (k & 1) + 4 * (k >> 1)];
        }
        i -= 16 * nb;
        return s[i / 2 * BYTES + D + i % 2];
    }
};

/* Q5_0 / Q5_1: codes as stored; heads the qh words, then d (and m). */
template <int QT> struct split_map_q5 {
    enum { QB = split_fmt<QT>::QB, BYTES = qtraits<QT>::BYTES, QD = BYTES - QB - 4 }; /* QD: bytes of d (and m) */
    static __device__ __forceinline__ uint8_t code(const uint8_t *s, int nb, int i) {
        return s[i / QB * BYTES + QD + 4 + i % QB];
    }
    static __device__ __forceinline__ uint8_t head(const uint8_t *s, int nb, int i) {
        if (i < 4 * nb) return s[i / 4 * BYTES + QD + i % 4];
        i -= 4 * nb;
        return s[i / QD * BYTES + i % QD];
    }
};
template <> struct split_map<HEARTH_DT_Q5_0> : split_map_q5<HEARTH_DT_Q5_0> {};
template <> struct split_map<HEARTH_DT_Q5_1> : split_map_q5<HEARTH_DT_Q5_1> {};

/* Code byte p of unit u of a q2_K / q3_K block whose qs are at qs (cuda_internal.cuh: the 2-bit codes of A[p],
 * B[p], A[16 + p], B[16 + p]; stored, those of unit u are bits 4 (u % 2) .. of qs[32 (u / 2) + l]) */
__device__ __forceinline__ uint8_t q23_unit_code(const uint8_t *qs, int u, int p) {
    const int sh = 4 * (u & 1);
    const uint8_t *q = qs + 32 * (u >> 1);
    return (uint8_t)(((q[p] >> sh) & 15) | ((q[16 + p] >> sh) & 15) << 4);
}

/* Q2_K (stored: scales[16], qs[64], d, dmin): codes by unit; heads the scales, then d | dmin. */
template <> struct split_map<HEARTH_DT_Q2_K> {
    enum { QB = split_fmt<HEARTH_DT_Q2_K>::QB, BYTES = qtraits<HEARTH_DT_Q2_K>::BYTES };
    static __device__ __forceinline__ uint8_t code(const uint8_t *s, int nb, int i) {
        const int j = i % QB;
        return q23_unit_code(s + i / QB * BYTES + 16, j / 16, j % 16);
    }
    static __device__ __forceinline__ uint8_t head(const uint8_t *s, int nb, int i) {
        if (i < 16 * nb) return s[i / 16 * BYTES + i % 16];
        i -= 16 * nb;
        return s[i / 4 * BYTES + 80 + i % 4];
    }
};

/* Q3_K (stored: hmask[32], qs[64], scales[12], d): codes and high bits by unit (group A = 2u of the block's
 * high-bit planes, B = 2u + 1); heads the scales as four 24-bit units, then d. */
template <> struct split_map<HEARTH_DT_Q3_K> {
    enum { QB = split_fmt<HEARTH_DT_Q3_K>::QB, BYTES = qtraits<HEARTH_DT_Q3_K>::BYTES };
    static __device__ __forceinline__ uint8_t code(const uint8_t *s, int nb, int i) {
        const uint8_t *blk = s + i / QB * BYTES;
        int j = i % QB;
        if (j < 64) return q23_unit_code(blk + 32, j / 16, j % 16);
        j -= 64;
        const int u = j / 8, w = j % 8 / 4, q = j % 4;
        uint8_t v = 0;
        for (int b = 0; b < 8; b++) v |= (uint8_t)(((blk[4 * b + q] >> (2 * u + w)) & 1) << b);
        return v;
    }
    static __device__ __forceinline__ uint8_t head(const uint8_t *s, int nb, int i) {
        if (i < 12 * nb) {
            const uint8_t *blk = s + i / 12 * BYTES;
            const int k = i % 12 / 4, u = i % 4;
            uint32_t v24 = 0;
            for (int t = 0; t < 4; t++) v24 |= (uint32_t)(q3k_scale(blk + 96, 4 * u + t) + 32) << (6 * t);
            return (uint8_t)(v24 >> (8 * k));
        }
        i -= 12 * nb;
        return s[i / 2 * BYTES + 108 + i % 2];
    }
};

template <int QT> __global__ void split_rows_kernel(uint8_t *__restrict__ w, int nb, size_t row_bytes) {
    constexpr int QB = split_fmt<QT>::QB, HB = split_fmt<QT>::HB;
    extern __shared__ __align__(16) uint8_t sm[];
    uint8_t *row = w + (size_t)blockIdx.x * row_bytes;
    pdl_wait();
    for (size_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) ((uint4 *)sm)[i] = ((const uint4 *)row)[i];
    __syncthreads();
    for (int i = threadIdx.x; i < nb * QB; i += blockDim.x) row[i] = split_map<QT>::code(sm, nb, i);
    uint8_t *heads = row + (size_t)nb * QB;
    for (int i = threadIdx.x; i < nb * HB; i += blockDim.x) heads[i] = split_map<QT>::head(sm, nb, i);
    pdl_launch();
}

template <int QT> static int launch(const cu_launch *L, uint8_t *w, int rows, int cols, size_t row_bytes) {
    if (cols % qtraits<QT>::ELEMS) return 0;
    static unsigned long long done;
    cu_smem_setup(L, split_rows_kernel<QT>, SPLIT_MAX_ROW, false, &done);
    cu_launch_k(L, split_rows_kernel<QT>, dim3(rows), dim3(256), row_bytes, w, cols / qtraits<QT>::ELEMS, row_bytes);
    return 1;
}

int cu_split_rows(const cu_launch *L, void *w, hearth_dtype t, int rows, int cols, size_t row_bytes) {
    if (((uintptr_t)w & 15) || row_bytes % 16 || row_bytes > SPLIT_MAX_ROW || rows < 1) return 0;
    switch (t) {
    case HEARTH_DT_Q4_0: return launch<HEARTH_DT_Q4_0>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q8_0: return launch<HEARTH_DT_Q8_0>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q4_K: return launch<HEARTH_DT_Q4_K>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q6_K: return launch<HEARTH_DT_Q6_K>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q5_K: return launch<HEARTH_DT_Q5_K>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_IQ4_XS: return launch<HEARTH_DT_IQ4_XS>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q4_1: return launch<HEARTH_DT_Q4_1>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q5_0: return launch<HEARTH_DT_Q5_0>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q5_1: return launch<HEARTH_DT_Q5_1>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_IQ4_NL: return launch<HEARTH_DT_IQ4_NL>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q2_K: return launch<HEARTH_DT_Q2_K>(L, (uint8_t *)w, rows, cols, row_bytes);
    case HEARTH_DT_Q3_K: return launch<HEARTH_DT_Q3_K>(L, (uint8_t *)w, rows, cols, row_bytes);
    default: return 0;
    }
}
