/* copy_bw.cuh - the device-to-device copy bandwidth the one-file CUDA
 * benchmarks (bench_persist, bench_ring_gemv) report their rates against:
 * GB/s of a cudaMemcpyAsync of n bytes from a to b, counting each byte twice
 * (read and written), median of 11. */
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <stddef.h>
#include <vector>

static double copy_gbs(const void *a, void *b, size_t n) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<float> t;
    for (int i = 0; i < 11; i++) {
        cudaEventRecord(e0);
        cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        t.push_back(ms);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    std::sort(t.begin(), t.end());
    return 2.0 * n / (t[5] * 1e-3) / 1e9;
}
