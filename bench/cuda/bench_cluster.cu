/* bench_cluster.cu - the two questions before decode_layers' attention merge
 * moves into a thread-block cluster (notes/cuda-kernels.md, session 51):
 *
 *   1. how many clusters of C blocks of decode_layers' shape (288 threads,
 *      ~220 KB of shared memory, one a multiprocessor) are resident at once
 *      (cudaOccupancyMaxActiveClusters), for C = 1, 2, 4, 8 and 16;
 *   2. what one exchange of a head's partials costs, beside what it costs
 *      today, while a producer warp a block streams DRAM as the kernel does.
 *
 * The exchange, repeated --iters times by the 256 consumer threads of every
 * block of a grid of the resident clusters: each block holds a 2 KB partial
 * (512 floats: 4 q heads x 128 dims, as the attention's splits do), and each
 * of a group's C blocks then reads its 1 / C of the dims from all C partials
 * (the merge, spread over the group):
 *
 *   cluster   each block sends each of the C blocks its slice of the dims
 *             that block merges, as asynchronous stores into the receiver's
 *             shared memory (st.async, mapa) that complete on the receiver's
 *             mbarrier, which waits for all C slices (PART * 4 bytes);
 *             double-buffered, no cluster barrier in the round (the
 *             producer warp runs on, as decode_layers' would)
 *   global    the partials stored to global memory, the block's release add
 *             on its group's counter, thread 0 polling it (ld.acquire,
 *             __nanosleep(20)) until all C have added, the reads __ldcg:
 *             decode_layers' split count and merge loads today
 *
 * With --stream 1 (the default) warp 8's lane 0 keeps --stages 16 KB bulk
 * copies (cp.async.bulk) in flight into the block's ring for as long as the
 * consumers run, so both exchanges pay what they would inside the weight
 * stream; the GB/s the stream reached is printed beside them.
 *
 *   bench_cluster [--smem 0,100,200,220] [--iters 2000] [--stages 12] [--stream 1]
 *
 * A measurement, never a test. */
#include "ops/cuda/cuda_internal.cuh"
#include "copy_bw.cuh"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace cg = cooperative_groups;

namespace {

constexpr int CT = 256, NT = CT + 32, PART = 512, STG = 16384;

#define CK(x)                                                                                                    \
    do {                                                                                                         \
        cudaError_t e_ = (x);                                                                                    \
        if (e_ != cudaSuccess) {                                                                                 \
            fprintf(stderr, "bench_cluster: %s: %s\n", #x, cudaGetErrorString(e_));                              \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

struct args {
    const uint8_t *w; /* the stream's bytes, a slice a block */
    size_t slice;
    float *part;       /* global partials, PART floats a block */
    float *out;        /* the merged dims, so the reads stay */
    unsigned *ctr;     /* a counter a group */
    unsigned long long *ns, *bytes; /* a block's consumer time and streamed bytes */
    int iters, stages, stream, mode; /* mode 0 cluster, 1 global */
};

__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

/* v, one 16-byte asynchronous store into block `rank`'s shared memory at dst, completing on its mbarrier bar
 * (dst and bar: this block's addresses of the same variables, mapped into the cluster) */
__device__ __forceinline__ void st_remote(uint32_t dst, uint32_t bar, int rank, float4 v) {
    uint32_t rd, rb;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rd) : "r"(dst), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(bar), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                 ::"r"(rd), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(rb)
                 : "memory");
}
/* the consumers' barrier (the producer warp runs on, as decode_layers' does) */
__device__ __forceinline__ void cbar() { asm volatile("bar.sync 1, %0;" ::"r"(CT) : "memory"); }

__global__ void __launch_bounds__(NT, 1) exchange_kernel(args a) {
    extern __shared__ __align__(128) uint8_t ring[];
    __shared__ __align__(16) float part[PART], inbox[2][PART]; /* inbox: the C senders' slices of my dims */
    __shared__ uint64_t mb[16], ib[2];
    __shared__ volatile int stop;
    cg::cluster_group cl = cg::this_cluster();
    const int t = threadIdx.x, C = (int)cl.num_blocks(), rank = (int)cl.block_rank();
    const int group = blockIdx.x / C, per = PART / C; /* the dims this block merges: rank * per + [0, per) */
    if (t == 0) {
        stop = 0;
        for (int i = 0; i < a.stages; i++) mbar_init(smem_u32(mb + i), 1);
        mbar_init(smem_u32(ib), 1), mbar_init(smem_u32(ib + 1), 1);
        mbar_expect_tx(smem_u32(ib), PART * 4); /* the first round's bytes: the phase ends when they land */
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    cl.sync(); /* every block's barriers set up before any sends to it */
    if (t >= CT) { /* the producer: bulk copies back to back while the consumers run */
        if (t == CT && a.stream) {
            const uint8_t *src = a.w + a.slice * blockIdx.x;
            size_t off = 0, n = 0;
            uint32_t par = 0; /* bit s: the parity of stage s's next completion */
            for (int s = 0; s < a.stages; s++, n++) {
                mbar_expect_tx(smem_u32(mb + s), STG);
                bulk_load(smem_u32(ring + (size_t)s * STG), src + off, STG, smem_u32(mb + s));
                off = off + STG < a.slice ? off + STG : 0;
            }
            for (int s = 0; !stop; s = s + 1 == a.stages ? 0 : s + 1, n++) {
                mbar_wait(smem_u32(mb + s), (par >> s) & 1u);
                par ^= 1u << s;
                mbar_expect_tx(smem_u32(mb + s), STG);
                bulk_load(smem_u32(ring + (size_t)s * STG), src + off, STG, smem_u32(mb + s));
                off = off + STG < a.slice ? off + STG : 0;
            }
            for (int s = 0; s < a.stages; s++) mbar_wait(smem_u32(mb + s), (par >> s) & 1u); /* in flight */
            a.bytes[blockIdx.x] = (unsigned long long)n * STG;
        }
        __syncwarp(); /* the warp together again before the cluster barrier */
        cl.sync();
        return;
    }
    float acc = 0;
    const unsigned long long t0 = gtime();
    for (int it = 0; it < a.iters; it++) {
        for (int i = t; i < PART; i += CT) part[i] = (float)(it + rank + i);
        if (a.mode == 0) {
            /* round it uses inbox[it & 1]; its sender wrote it after its own wait of round it - 1, which came
             * after every block's reads of round it - 2 (the reads, a barrier, then the sends) */
            const int b = it & 1;
            if (t == 0 && it > 0) mbar_expect_tx(smem_u32(ib + b), PART * 4);
            cbar();
            if (t < PART / 4) { /* float4 t of my partial goes to the block that merges its dims */
                const int d = 4 * t, to = d / per;
                st_remote(smem_u32(&inbox[b][rank * per + d % per]), smem_u32(ib + b), to,
                          *(const float4 *)&part[d]);
            }
            mbar_wait<true>(smem_u32(ib + b), (uint32_t)(it >> 1) & 1u);
            for (int i = t; i < PART; i += CT) acc += inbox[b][i];
            cbar();
        } else {
            float *pb = a.part + (size_t)PART * gridDim.x * (it & 1), *gp = pb + (size_t)PART * blockIdx.x;
            for (int i = t; i < PART; i += CT) gp[i] = part[i];
            cbar();
            if (t == 0) {
                unsigned *p = a.ctr + group;
                asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
                while (ld_acquire(p) < (unsigned)(C * (it + 1))) __nanosleep(20);
            }
            cbar();
            for (int i = t; i < PART; i += CT) /* from block i / per of the group, my dims */
                acc += __ldcg(pb + (size_t)PART * (group * C + i / per) + rank * per + i % per);
            cbar(); /* double-buffered as inbox: a round's writes come after every read two rounds back */
        }
    }
    const unsigned long long t1 = gtime();
    if (t == 0) a.ns[blockIdx.x] = t1 - t0, stop = 1;
    a.out[(size_t)blockIdx.x * CT + t] = acc;
    cl.sync(); /* no block leaves while another may still write its shared memory */
}

std::vector<int> ints(const char *s) {
    std::vector<int> v;
    for (const char *p = s; *p;) {
        v.push_back(atoi(p));
        while (*p && *p != ',') p++;
        if (*p) p++;
    }
    return v;
}

} // namespace

int main(int argc, char **argv) {
    std::vector<int> smems = ints("0,100,200,220");
    int iters = 2000, stages = 12, stream = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--smem")) smems = ints(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stages")) stages = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stream")) stream = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_cluster [--smem KB,...] [--iters N] [--stages N] [--stream 0|1]\n");
            return 2;
        }
    }
    if (stages < 1 || stages > 16 || iters < 1) {
        fprintf(stderr, "bench_cluster: --stages 1..16, --iters >= 1\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int nsm = prop.multiProcessorCount;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each row as it comes, should a later case hang */
    printf("device %s, %d multiprocessors, %zu KB shared memory a block at most\n", prop.name, nsm,
           prop.sharedMemPerBlockOptin / 1024);
    CK(cudaFuncSetAttribute(exchange_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, exchange_kernel));
    const size_t dmax = prop.sharedMemPerBlockOptin - fa.sharedSizeBytes; /* the dynamic share at most */
    CK(cudaFuncSetAttribute(exchange_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dmax));
    const size_t wbytes = (size_t)1 << 30;
    uint8_t *w;
    float *part, *out;
    unsigned *ctr;
    unsigned long long *ns, *bytes;
    CK(cudaMalloc(&w, wbytes));
    CK(cudaMemset(w, 1, wbytes));
    CK(cudaMalloc(&part, sizeof(float) * PART * 2 * nsm));
    CK(cudaMalloc(&out, sizeof(float) * CT * nsm));
    CK(cudaMalloc(&ctr, sizeof(unsigned) * nsm));
    CK(cudaMalloc(&ns, sizeof(unsigned long long) * nsm));
    CK(cudaMalloc(&bytes, sizeof(unsigned long long) * nsm));
    printf("%8s %4s %9s %6s %8s %12s %12s %10s\n", "smem KB", "C", "clusters", "blocks", "exchange", "us a round",
           "max block", "stream GB/s");
    for (int kb : smems) {
        size_t dyn = (size_t)kb * 1024;
        if (dyn > dmax) dyn = dmax;
        if (stream && dyn < (size_t)stages * STG) dyn = (size_t)stages * STG; /* the ring fits */
        for (int C = 1; C <= 16; C *= 2) {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
            cfg.blockDim = dim3(NT), cfg.dynamicSmemBytes = dyn, cfg.attrs = at, cfg.numAttrs = 1;
            cfg.gridDim = dim3(C * nsm);
            int nc = 0;
            cudaError_t oc = cudaOccupancyMaxActiveClusters(&nc, exchange_kernel, &cfg);
            if (oc != cudaSuccess || nc < 1) {
                printf("%8zu %4d %9d %6s  (%s)\n", dyn / 1024, C, nc, "-",
                       oc != cudaSuccess ? cudaGetErrorString(oc) : "none resident");
                cudaGetLastError();
                continue;
            }
            const int grid = nc * C < nsm ? nc * C : nsm / C * C; /* one block a multiprocessor at most */
            cfg.gridDim = dim3(grid);
            for (int mode = 0; mode < 2; mode++) {
                args a = {w, wbytes / grid / STG * STG, part, out, ctr, ns, bytes, iters, stages, stream, mode};
                CK(cudaMemset(ctr, 0, sizeof(unsigned) * nsm));
                CK(cudaMemset(bytes, 0, sizeof(unsigned long long) * nsm));
                CK(cudaLaunchKernelEx(&cfg, exchange_kernel, a));
                CK(cudaDeviceSynchronize()); /* the blocks time themselves (globaltimer) */
                std::vector<unsigned long long> hn(grid), hb(grid);
                CK(cudaMemcpy(hn.data(), ns, sizeof(unsigned long long) * grid, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hb.data(), bytes, sizeof(unsigned long long) * grid, cudaMemcpyDeviceToHost));
                unsigned long long mx = 0, sum = 0, sb = 0;
                for (int b = 0; b < grid; b++) mx = hn[b] > mx ? hn[b] : mx, sum += hn[b], sb += hb[b];
                printf("%8zu %4d %9d %6d %8s %12.3f %12.3f %10.0f\n", dyn / 1024, C, nc, grid,
                       mode ? "global" : "cluster", (double)sum / grid / iters / 1e3, (double)mx / iters / 1e3,
                       stream ? (double)sb / (double)mx : 0.0);
            }
        }
    }
    return 0;
}
