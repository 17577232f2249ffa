/* split_rows.cu - Q4_0 / Q8_0 rows re-laid in place at load as split rows
 * (cuda_internal.cuh: a row's block codes, then its block scales), for the
 * streamed GEMV. One block a row: the row to shared memory, then back. */
#include "ops/cuda/cuda_internal.cuh"

#define SPLIT_MAX_ROW (200 * 1024) /* dynamic shared memory of one block */

template <int QT> __global__ void split_rows_kernel(uint8_t *__restrict__ w, int nb, size_t row_bytes) {
    using TR = qtraits<QT>;
    constexpr int QB = split_fmt<QT>::QB;
    extern __shared__ __align__(16) uint8_t sm[];
    uint8_t *row = w + (size_t)blockIdx.x * row_bytes;
    pdl_wait();
    for (size_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) ((uint4 *)sm)[i] = ((const uint4 *)row)[i];
    __syncthreads();
    for (int i = threadIdx.x; i < nb * QB; i += blockDim.x) row[i] = sm[(i / QB) * TR::BYTES + 2 + i % QB];
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        row[(size_t)nb * QB + 2 * b] = sm[b * TR::BYTES];
        row[(size_t)nb * QB + 2 * b + 1] = sm[b * TR::BYTES + 1];
    }
    pdl_launch();
}

template <int QT> static void launch(const cu_launch *L, uint8_t *w, int rows, int nb, size_t row_bytes) {
    static unsigned long long done;
    cu_smem_setup(L, split_rows_kernel<QT>, SPLIT_MAX_ROW, false, &done);
    cu_launch_k(L, split_rows_kernel<QT>, dim3(rows), dim3(256), row_bytes, w, nb, row_bytes);
}

int cu_split_rows(const cu_launch *L, void *w, hearth_dtype t, int rows, int cols, size_t row_bytes) {
    if ((t != HEARTH_DT_Q4_0 && t != HEARTH_DT_Q8_0) || ((uintptr_t)w & 15) || row_bytes % 16 ||
        row_bytes > SPLIT_MAX_ROW || cols % QK || rows < 1)
        return 0;
    if (t == HEARTH_DT_Q4_0) launch<HEARTH_DT_Q4_0>(L, (uint8_t *)w, rows, cols / QK, row_bytes);
    else launch<HEARTH_DT_Q8_0>(L, (uint8_t *)w, rows, cols / QK, row_bytes);
    return 1;
}
