/* split_rows.cu - Q4_0 / Q8_0 / Q4_K rows re-laid in place at load as split
 * rows (cuda_internal.cuh: a row's block codes, then its block heads), for
 * the streamed GEMV. One block a row: the row to shared memory, then back. */
#include "ops/cuda/cuda_internal.cuh"

#define SPLIT_MAX_ROW (200 * 1024) /* dynamic shared memory of one block */

template <int QT> __global__ void split_rows_kernel(uint8_t *__restrict__ w, int nb, size_t row_bytes) {
    using TR = qtraits<QT>;
    constexpr int QB = split_fmt<QT>::QB, HB = split_fmt<QT>::HB;
    static_assert(HB + QB == TR::BYTES, "a block is its head, then its codes");
    extern __shared__ __align__(16) uint8_t sm[];
    uint8_t *row = w + (size_t)blockIdx.x * row_bytes;
    pdl_wait();
    for (size_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) ((uint4 *)sm)[i] = ((const uint4 *)row)[i];
    __syncthreads();
    for (int i = threadIdx.x; i < nb * QB; i += blockDim.x) row[i] = sm[(i / QB) * TR::BYTES + HB + i % QB];
    uint8_t *heads = row + (size_t)nb * QB;
    for (int i = threadIdx.x; i < nb * HB; i += blockDim.x) heads[i] = sm[(i / HB) * TR::BYTES + i % HB];
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
    default: return 0;
    }
}
