/* bench_pdl_chain.cu - what one kernel boundary of a batch-1 decode step
 * costs, and whether a done counter polled by the next kernel costs less
 * than griddepcontrol.wait. The question behind replacing the engine's PDL
 * waits by counters (bench_persist, s30-run1: a done counter between the
 * phases of one persistent kernel cost ~1.5 us, a grid barrier ~2.6).
 *
 * A chain of --links kernels as the engine issues a step (one stream,
 * programmatic dependent launch, captured in one CUDA graph and replayed):
 * each kernel, of 2 blocks of 256 threads a multiprocessor, reads its
 * predecessor's output vector (16 KB, from L2), streams its share of
 * --mb MB of weights (16-byte loads, 8 a thread in flight) and writes its
 * own output. It waits for its predecessor in one of two ways:
 *
 *   wait      griddepcontrol.wait (what every hearth kernel does now)
 *   counter   thread 0 polls the predecessor's done counter (ld.acquire)
 *             until every block of it has added one (after its stores and
 *             a fence); the graph zeroes the counters first
 *
 *   first     griddepcontrol.wait, the dependents triggered before it
 *             (HEARTH_PDL_EARLY=2's order)
 *
 * wait and counter trigger their dependents right after the wait, as
 * hearth's kernels do (pdl_wait_early); all issue their first 8 loads a
 * thread before it. Prints us a link for each way, beside the weights' time
 * at copy bandwidth.
 *
 *   bench_pdl_chain [--links 160] [--mb 0,2,8,33] [--reps 20]
 *
 * A measurement, never a test. */
#include "ops/cuda/cuda_internal.cuh"
#include "copy_bw.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace {

constexpr int NT = 256, U = 8, XN = 4096;



/* One link. in: the predecessor's output (XN floats); out: this one's (a
 * float a thread); w + blockIdx.x * share: this block's weights. */
__global__ void __launch_bounds__(NT, 2)
    link_kernel(const float *__restrict__ in, float *__restrict__ out, const uint8_t *__restrict__ w, size_t share,
                const unsigned *prev, unsigned *mine, int mode) {
    __shared__ float red[NT / 32];
    const uint8_t *wb = w + share * blockIdx.x;
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) { /* the first loads, before the wait */
        const size_t o = 16 * ((size_t)threadIdx.x + (size_t)NT * u);
        v[u] = o < share ? ld_stream16(wb + o) : make_uint4(0, 0, 0, 0);
    }
    const bool counter = mode == 1;
    if (mode == 2) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (counter && prev) {
        if (threadIdx.x == 0)
            while (ld_acquire(prev) < gridDim.x) __nanosleep(32);
        __syncthreads();
    } else {
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    if (mode != 2) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    float s = 0.0f;
    for (int i = threadIdx.x; i < XN; i += NT) s += in[i];
    unsigned acc = 0;
#pragma unroll
    for (int u = 0; u < U; u++) acc ^= v[u].x + v[u].y + v[u].z + v[u].w;
    for (size_t o0 = 16 * (size_t)NT * U; o0 < share; o0 += 16 * (size_t)NT * U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t o = o0 + 16 * ((size_t)threadIdx.x + (size_t)NT * u);
            v[u] = o < share ? ld_stream16(wb + o) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x + v[u].y + v[u].z + v[u].w;
    }
    s += (float)(acc & 1u) * 1e-30f;
    for (int d = 16; d; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < NT / 32) {
        float t = red[threadIdx.x];
        for (int d = 4; d; d >>= 1) t += __shfl_xor_sync(0xffu, t, d);
        s = t;
    }
    out[(size_t)blockIdx.x * NT + threadIdx.x] = s * 1e-3f + 1.0f;
    if (counter) {
        __syncthreads(); /* the block's stores before its add */
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(mine, 1u);
        }
    }
}

std::vector<double> parse_list(const char *s) {
    std::vector<double> v;
    for (const char *p = s; *p;) {
        v.push_back(atof(p));
        const char *c = strchr(p, ',');
        if (!c) break;
        p = c + 1;
    }
    return v;
}

} // namespace

int main(int argc, char **argv) {
    int links = 160, reps = 20;
    std::vector<double> mbs = {0, 2, 8, 33};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--links") && i + 1 < argc) links = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mb") && i + 1 < argc) mbs = parse_list(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_pdl_chain [--links 160] [--mb 0,2,8,33] [--reps 20]\n");
            return 2;
        }
    }
    double mb_max = 0;
    for (double m : mbs) mb_max = std::max(mb_max, m);
    if (links < 2 || links > 4096 || reps < 1 || mbs.empty() || mb_max > 512 || mbs[0] < 0) {
        fprintf(stderr, "bench_pdl_chain: need 2 <= --links <= 4096, --reps >= 1, 0 <= --mb <= 512\n");
        return 2;
    }
    int dev = 0, nsm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    const int grid = 2 * nsm;
    /* the links read consecutive weights, wrapping around 8 x the largest
     * link (at least 264 MB: past L2 whatever the size) */
    const int NSLICE = 8;
    const size_t slice = (size_t)(std::max(mb_max, 33.0) * 1e6 / grid / 16 + 1) * 16 * grid, cp = (size_t)1 << 31;
    uint8_t *w = NULL, *c2 = NULL;
    float *buf[2] = {NULL, NULL};
    unsigned *ctr = NULL;
    const size_t wbytes = std::max(slice * NSLICE, cp); /* copy_gbs copies cp bytes of it (s30-run2 read past 264 MB) */
    if (cudaMalloc(&w, wbytes) != cudaSuccess || cudaMalloc(&c2, cp) != cudaSuccess ||
        cudaMalloc(&buf[0], sizeof(float) * std::max(grid * NT, XN)) != cudaSuccess ||
        cudaMalloc(&buf[1], sizeof(float) * std::max(grid * NT, XN)) != cudaSuccess ||
        cudaMalloc(&ctr, sizeof(unsigned) * links) != cudaSuccess) {
        fprintf(stderr, "bench_pdl_chain: out of device memory\n");
        return 1;
    }
    cudaMemset(w, 0x5a, wbytes);
    cudaMemset(buf[0], 0, sizeof(float) * std::max(grid * NT, XN));
    cudaMemset(buf[1], 0, sizeof(float) * std::max(grid * NT, XN));
    const double bw = copy_gbs(w, c2, cp);
    printf("copy bandwidth %.0f GB/s; %d links of %d blocks x %d threads a graph, median of %d replays\n", bw, links,
           grid, NT, reps);
    printf("%8s %14s %14s %14s %14s\n", "MB/link", "wait us/link", "counter", "first", "at copy bw");
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    for (double mb : mbs) {
        const size_t share = (size_t)(mb * 1e6 / grid / 16) * 16;
        double us[3];
        for (int mode = 0; mode < 3; mode++) {
            const int counter = mode == 1;
            cudaGraph_t g;
            cudaGraphExec_t ge;
            cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
            if (counter) cudaMemsetAsync(ctr, 0, sizeof(unsigned) * links, st);
            for (int i = 0; i < links; i++) {
                cudaLaunchConfig_t cfg = {};
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                cfg.gridDim = dim3(grid), cfg.blockDim = dim3(NT), cfg.stream = st;
                cfg.attrs = at, cfg.numAttrs = 1;
                const unsigned *prev = i > 0 ? ctr + i - 1 : NULL;
                const size_t span = share * grid, room = slice * NSLICE - span; /* consecutive, wrapping */
                const size_t off = span ? ((size_t)i * span) % room / 16 * 16 : 0;
                cudaLaunchKernelEx(&cfg, link_kernel, (const float *)buf[i & 1], buf[(i + 1) & 1],
                                   (const uint8_t *)(w + off), share, prev, ctr + i, mode);
            }
            cudaError_t e = cudaStreamEndCapture(st, &g);
            if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
            if (e != cudaSuccess) {
                fprintf(stderr, "bench_pdl_chain: graph: %s\n", cudaGetErrorString(e));
                return 1;
            }
            std::vector<float> t;
            for (int r = 0; r < reps + 2; r++) {
                cudaEventRecord(e0, st);
                cudaGraphLaunch(ge, st);
                cudaEventRecord(e1, st);
                e = cudaEventSynchronize(e1);
                if (e != cudaSuccess) {
                    fprintf(stderr, "bench_pdl_chain: %s\n", cudaGetErrorString(e));
                    return 1;
                }
                float ms;
                cudaEventElapsedTime(&ms, e0, e1);
                if (r >= 2) t.push_back(ms);
            }
            std::sort(t.begin(), t.end());
            us[mode] = 1e3 * t[t.size() / 2] / links;
            cudaGraphExecDestroy(ge);
            cudaGraphDestroy(g);
        }
        printf("%8.1f %14.2f %14.2f %14.2f %14.2f\n", mb, us[0], us[1], us[2],
               share * (double)grid / (bw * 1e3));
        fflush(stdout);
    }
    return 0;
}
