/* copy_bw.cuh - what the one-file CUDA benchmarks (bench_persist,
 * bench_ring_gemv, bench_pdl_chain) share: the device-to-device copy
 * bandwidth they report their rates against (GB/s of a cudaMemcpyAsync of n
 * bytes from a to b, counting each byte twice, read and written, median of
 * 11), a streaming 16-byte load and an acquiring 4-byte one. */
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <stddef.h>
#include <stdint.h>
#include <vector>

/* 16 bytes read once: not kept in L1 */
__device__ __forceinline__ uint4 ld_stream16(const uint8_t *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* a flag or counter another block released (gpu scope) */
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

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
