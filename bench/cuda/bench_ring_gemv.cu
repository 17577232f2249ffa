/* bench_ring_gemv.cu - a batch-1 BF16 GEMV whose weights stream through a
 * ring of shared-memory stages filled by cp.async.bulk, timed on the decode
 * matmuls of a Llama-3.1-8B shape. The question: bench_persist's ring-only
 * variant read 4.5 TB/s (105% of the copy bandwidth, s29-run2) where
 * register loads reach ~90%, and hearth's streamed BF16 GEMV reads
 * ~4.15 TB/s at best (gate/up) and ~3.5 (down); does a real GEMV (x in
 * shared memory, the dot products, one sum a row) keep the ring's rate?
 *
 * A block takes a contiguous run of rows, i.e. of weight bytes; its last
 * warp's lane 0 copies them in STG-byte chunks into S stages (one "full"
 * and one "empty" mbarrier a stage), from before the PDL wait (weights are
 * never written). Consumer warp w takes the chunks of stages w, w + 7, ...
 * (of the first min(7, S) warps): each lane
 * dots 8 weights (16 bytes) a step with x, a warp's 512 bytes lie in one
 * row (K a multiple of 256), and a row's sum over a chunk goes to its own
 * slot, so the row's total is added in chunk order: the same bits every
 * run. Launched back to back over enough copies of each matrix that every
 * pass streams from DRAM, with programmatic dependent launch, as decode
 * runs its GEMVs.
 *
 *   bench_ring_gemv [--reps 20] [--bpsm 2] [--stage-kb 16] [--smem-kb 110]
 *
 * Checks every output against a one-warp-a-row reference kernel first. A
 * measurement, never a test. */
#include "ops/cuda/cuda_internal.cuh"
#include "copy_bw.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace {

constexpr int NT = 256, NC = NT - 32, NW = NC / 32, MAX_STAGES = 16, MAX_SLOTS = 8;

__host__ __device__ __forceinline__ size_t zmin(size_t a, size_t b) { return a < b ? a : b; }


__device__ __forceinline__ float dot8(uint4 w, const float *x) {
    const float4 a = *(const float4 *)x, b = *(const float4 *)(x + 4);
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&w;
    float2 f0 = __bfloat1622float2(h[0]), f1 = __bfloat1622float2(h[1]), f2 = __bfloat1622float2(h[2]),
           f3 = __bfloat1622float2(h[3]);
    float s = f0.x * a.x;
    s = fmaf(f0.y, a.y, s);
    s = fmaf(f1.x, a.z, s);
    s = fmaf(f1.y, a.w, s);
    s = fmaf(f2.x, b.x, s);
    s = fmaf(f2.y, b.y, s);
    s = fmaf(f3.x, b.z, s);
    return fmaf(f3.y, b.w, s);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Shared memory: x [K] f32, then the ring (S x stg bytes, 128-aligned),
 * the row slots [rows a block][MAX_SLOTS], the mbarriers. */
__global__ void __launch_bounds__(NT) ring_gemv(const __nv_bfloat16 *__restrict__ W, const float *__restrict__ x,
                                                float *__restrict__ y, int N, int K, int S, int stg) {
    extern __shared__ __align__(128) uint8_t sm[];
    const int G = gridDim.x, bid = blockIdx.x;
    const int r0 = (int)((long long)N * bid / G), r1 = (int)((long long)N * (bid + 1) / G), nr = r1 - r0;
    const size_t RB = (size_t)K * 2, b0 = (size_t)r0 * RB, nbytes = (size_t)nr * RB;
    const int nch = (int)((nbytes + stg - 1) / stg);
    float *x_s = (float *)sm;
    uint8_t *ring = sm + (((size_t)K * 4 + 127) & ~(size_t)127);
    float *part = (float *)(ring + (size_t)S * stg);
    const int maxr = (N + G - 1) / G + 1;
    uint64_t *mb = (uint64_t *)(part + (size_t)maxr * MAX_SLOTS);
    const uint32_t ring0 = smem_u32(ring), full0 = smem_u32(mb), empty0 = smem_u32(mb + MAX_STAGES);
    if (threadIdx.x == 0) {
        for (int i = 0; i < S; i++) mbar_init(full0 + 8 * i, 1), mbar_init(empty0 + 8 * i, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= NC) { /* the producer: weights only, so before the PDL wait */
        if (threadIdx.x != NC) return;
        const uint8_t *src = (const uint8_t *)W + b0;
        for (int c = 0; c < nch; c++) {
            const uint32_t st = c % S, use = c / S, n = (uint32_t)zmin((size_t)stg, nbytes - (size_t)c * stg);
            if (use > 0) mbar_wait(empty0 + 8 * st, (use - 1) & 1);
            mbar_expect_tx(full0 + 8 * st, n);
            bulk_load(ring0 + st * stg, src + (size_t)c * stg, n, full0 + 8 * st);
        }
        return;
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = threadIdx.x * 4; i < K; i += NC * 4) *(float4 *)&x_s[i] = *(const float4 *)&x[i];
    asm volatile("bar.sync 1, %0;" ::"r"(NC) : "memory");
    /* stage st is always consumed by warp st % nw, so a warp waits on each of its stages' phases in order */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = min(NW, S);
    for (int c = 0; c < nch; c++) {
        const uint32_t st = c % S, use = c / S;
        if ((int)st % nw != w) continue;
        const size_t o0 = (size_t)c * stg, n = zmin((size_t)stg, nbytes - o0);
        mbar_wait(full0 + 8 * st, use & 1);
        const uint8_t *buf = ring + (size_t)st * stg;
        /* one division a chunk: the row and column then advance 512 bytes a step */
        int row = (int)(o0 / RB), col = (int)(o0 - (size_t)row * RB);
        float acc = 0.0f;
        for (int it = 0; it < (int)n; it += 512) {
            acc += dot8(*(const uint4 *)(buf + it + lane * 16), x_s + col / 2 + lane * 8);
            col += 512;
            if (col == (int)RB && it + 512 < (int)n) {
                acc = warp_sum(acc);
                if (lane == 0) part[row * MAX_SLOTS + (c - (int)(((size_t)row * RB) / stg))] = acc;
                acc = 0.0f, row++, col = 0;
            }
        }
        acc = warp_sum(acc);
        if (lane == 0) part[row * MAX_SLOTS + (c - (int)(((size_t)row * RB) / stg))] = acc;
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * st);
    }
    asm volatile("bar.sync 1, %0;" ::"r"(NC) : "memory");
    for (int r = threadIdx.x; r < nr; r += NC) {
        const int first = (int)(((size_t)r * RB) / stg), last = (int)(((size_t)(r + 1) * RB - 1) / stg);
        float s = 0.0f;
        for (int k = 0; k <= last - first; k++) s += part[r * MAX_SLOTS + k];
        y[r0 + r] = s;
    }
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void ref_gemv(const __nv_bfloat16 *W, const float *x, float *y, int N, int K) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= N) return;
    float s = 0.0f;
    for (int k = lane; k < K; k += 32) s += __bfloat162float(W[(size_t)row * K + k]) * x[k];
    s = warp_sum(s);
    if (lane == 0) y[row] = s;
}

__global__ void fill_w(__nv_bfloat16 *w, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        w[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.06f);
    }
}

struct shape {
    const char *name;
    int N, K;
};

} // namespace

int main(int argc, char **argv) {
    int reps = 20, bpsm = 2, stage_kb = 16, smem_kb = 110;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bpsm") && i + 1 < argc) bpsm = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stage-kb") && i + 1 < argc) stage_kb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--smem-kb") && i + 1 < argc) smem_kb = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ring_gemv [--reps 20] [--bpsm 2] [--stage-kb 16] [--smem-kb 110]\n");
            return 2;
        }
    }
    if (reps < 1 || bpsm < 1 || bpsm > 4 || stage_kb < 1 || stage_kb > 64 || smem_kb < 32 || smem_kb > 227) {
        fprintf(stderr, "bench_ring_gemv: need --reps >= 1, 1 <= --bpsm <= 4, 1 <= --stage-kb <= 64, "
                        "32 <= --smem-kb <= 227\n");
        return 2;
    }
    int dev = 0, nsm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    const shape shapes[] = {{"q/k/v", 6144, 4096}, {"o", 4096, 4096},        {"gate/up", 28672, 4096},
                            {"down", 4096, 14336}, {"head", 128256, 4096}};
    const size_t pool = (size_t)1536 << 20; /* copies of each matrix in 1.5 GiB: far past the L2 */
    __nv_bfloat16 *wpool = NULL;
    float *x = NULL, *y = NULL, *yr = NULL;
    void *cp = NULL;
    if (cudaMalloc(&wpool, pool) != cudaSuccess || cudaMalloc(&x, 4 * 14336) != cudaSuccess ||
        cudaMalloc(&y, 4 * 128256) != cudaSuccess || cudaMalloc(&yr, 4 * 128256) != cudaSuccess ||
        cudaMalloc(&cp, (size_t)1 << 30) != cudaSuccess) {
        fprintf(stderr, "bench_ring_gemv: out of device memory\n");
        return 1;
    }
    fill_w<<<1024, 256>>>(wpool, pool / 2, 12345u);
    std::vector<float> hx(14336);
    for (int i = 0; i < 14336; i++) hx[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
    cudaMemcpy(x, hx.data(), 4 * 14336, cudaMemcpyHostToDevice);
    const double bw = copy_gbs(wpool, cp, (size_t)1 << 30);
    cudaFuncSetAttribute(ring_gemv, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_kb * 1024);
    const int stg = stage_kb * 1024, G = nsm * bpsm;
    printf("copy bandwidth %.0f GB/s; %d SMs x %d blocks, %d KB stages, %d KB shared a block; median of %d passes\n",
           bw, nsm, bpsm, stage_kb, smem_kb, reps);
    printf("%-8s %7s %6s %9s %8s %7s %10s\n", "matmul", "rows", "K", "us", "GB/s", "%copy", "max err");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    double token_us = 0;
    for (const shape &sh : shapes) {
        const size_t mb = (size_t)sh.N * sh.K * 2;
        const int copies = (int)std::max((size_t)1, pool / mb);
        const int maxr = (sh.N + G - 1) / G + 1;
        const size_t fixed = (((size_t)sh.K * 4 + 127) & ~(size_t)127) + (size_t)maxr * MAX_SLOTS * 4 + 2 * MAX_STAGES * 8;
        const int S = (int)std::min((size_t)MAX_STAGES, ((size_t)smem_kb * 1024 - fixed) / stg);
        if (S < 2 || (size_t)sh.K * 2 / stg + 2 > MAX_SLOTS) {
            printf("%-8s (does not fit: %d stages)\n", sh.name, S);
            continue;
        }
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.gridDim = dim3(G), cfg.blockDim = dim3(NT), cfg.dynamicSmemBytes = (size_t)smem_kb * 1024;
        cfg.stream = 0, cfg.attrs = attr, cfg.numAttrs = 1;
        /* correctness on copy 0 */
        ref_gemv<<<(sh.N + 7) / 8, 256>>>(wpool, x, yr, sh.N, sh.K);
        cudaMemset(y, 0xff, 4 * (size_t)sh.N);
        cudaError_t e = cudaLaunchKernelEx(&cfg, ring_gemv, (const __nv_bfloat16 *)wpool, (const float *)x, y, sh.N,
                                           sh.K, S, stg);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            fprintf(stderr, "bench_ring_gemv: %s: %s\n", sh.name, cudaGetErrorString(e));
            return 1;
        }
        std::vector<float> a(sh.N), b(sh.N);
        cudaMemcpy(a.data(), y, 4 * (size_t)sh.N, cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), yr, 4 * (size_t)sh.N, cudaMemcpyDeviceToHost);
        double err = 0, mag = 0;
        for (int i = 0; i < sh.N; i++) err = std::max(err, (double)fabsf(a[i] - b[i])), mag = std::max(mag, (double)fabsf(b[i]));
        err = mag > 0 ? err / mag : (isnan(a[0]) ? 1 : 0);
        std::vector<float> t;
        for (int r = 0; r < reps + 1; r++) {
            cudaEventRecord(e0);
            for (int c = 0; c < copies; c++)
                cudaLaunchKernelEx(&cfg, ring_gemv, (const __nv_bfloat16 *)((const uint8_t *)wpool + (size_t)c * mb),
                                   (const float *)x, y, sh.N, sh.K, S, stg);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r > 0) t.push_back(ms * 1e3f / copies);
        }
        std::sort(t.begin(), t.end());
        const double us = t[t.size() / 2], gbs = mb / (us * 1e-6) / 1e9;
        token_us += (!strcmp(sh.name, "head") ? 1 : 32) * us;
        printf("%-8s %7d %6d %9.2f %8.0f %6.1f%% %10.2e   (%d stages, %d copies)\n", sh.name, sh.N, sh.K, us, gbs,
               100 * gbs / bw, err, S, copies);
        fflush(stdout);
    }
    printf("token (32 layers + head), GEMVs alone: %.1f us -> %.1f tok/s\n", token_us, 1e6 / token_us);
    return 0;
}
