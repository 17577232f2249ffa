/* bench_persist.cu - can one persistent kernel keep DRAM streaming through a
 * batch-1 decode step's phase boundaries? The question behind session 9's
 * plan for batch 1 (a persistent decode layer, issue 7), asked before that
 * kernel is written: a Q4_0 Llama-3.1-8B token reads 3.93 GB of layer
 * weights in four matmul phases a layer (q/k/v 14.2 MB, o 9.4 MB, gate/up
 * 66.1 MB, down 33.0 MB) with five dependencies a layer between them (the
 * attention after q/k/v is one more). Here one cooperative kernel of exactly
 * the resident blocks streams those bytes (16-byte loads, 8 a thread in
 * flight, folded into a checksum so the loads stay), 32 layers, and meets at
 * a grid barrier where the real kernel would wait on the phase before:
 *
 *   stream     no barriers: the bytes back to back (the ceiling)
 *   barrier    a grid barrier after each phase, two after q/k/v (the attention's)
 *   reg        the same, each thread's first 8 loads of the next phase issued
 *              before it arrives at the barrier (what a GEMV does before its
 *              PDL wait today)
 *   smem       the same, each block's first --smem KB of the next phase
 *              copied into shared memory by cp.async before it arrives,
 *              read from there after the barrier
 *   sync       the barriers alone, no bytes (the cost of a barrier)
 *   ring-only  a producer warp streams the block's bytes through a ring of
 *              16 KB shared-memory stages (cp.async.bulk, one mbarrier a
 *              stage) and seven consumer warps fold them: no barriers
 *   ring       the same, the consumers meeting at the grid barriers while
 *              the producer runs ahead as far as the ring lets it (the
 *              weights' addresses never depend on the phase before)
 *   flag       the ring with a done counter a phase in place of the barriers:
 *              a block's consumers start a phase once every chunk of the one
 *              before is folded (block 0 stands for the attention between
 *              q/k/v and o); each block a contiguous share, as ring
 *   dyn        the same, the 16 KB chunks of a phase claimed one at a time
 *              from a counter, so a fast block takes more of them
 *
 *   bench_persist [--reps 9] [--smem 96] [--bpsm 1] [--stall US] [--l2 KB] [--chase N] [--type T]
 *
 * --type q4_0 | q8_0 | bf16: the layers' bytes of that format (the same
 * phases and dependencies; the head Q6_K beside Q4_0, else the same type).
 *
 * --stall US: after q/k/v the threads that meet at the barriers first spin
 * US microseconds (the attention's latency chain, ~7 us at batch 1).
 * --chase N: in flag and dyn, the attention's block first makes N dependent
 * loads from a 256 MB table (DRAM round trips under the stream's load).
 * --l2 KB: flag's producer asks L2 for its block's chunks up to KB ahead of
 * its copies (cp.async.bulk.prefetch.L2), so DRAM keeps streaming while the
 * ring is full and the consumers wait on a dependency.
 *
 * Prints each variant's time for the 32 layers, its bandwidth, and the
 * batch-1 ceiling it implies (tok/s if a token were these weights plus the
 * Q6_K head at copy bandwidth), beside a device-to-device copy of 2 GiB.
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

constexpr int NT = 256, U = 8, LAYERS = 32, NPH = 4; /* matmul phases a layer: q/k/v, o, gate/up, down */
/* --type: the bytes of a 32-weight block (Q4_0 18, Q8_0 34, BF16 64), on the host and in constant memory */
int h_blk = 18;
__constant__ int d_blk = 18;
__host__ __device__ inline size_t ph_bytes(int k) {
#ifdef __CUDA_ARCH__
    const size_t blk = (size_t)d_blk;
#else
    const size_t blk = (size_t)h_blk;
#endif
    return k == 0   ? 6144ull * 4096 / 32 * blk       /* q/k/v */
           : k == 1 ? 4096ull * 4096 / 32 * blk       /* o */
           : k == 2 ? 2 * 14336ull * 4096 / 32 * blk  /* gate/up */
                    : 4096ull * 14336 / 32 * blk;     /* down */
}
/* barriers after each phase: q/k/v -> attention -> o (two), o -> norm + gate/up, gate/up -> down, down -> norm */
__host__ __device__ constexpr int ph_bars(int k) { return k == 0 ? 2 : 1; }
constexpr int BARS = 5;
/* the head: Q6_K beside Q4_0 (the issue's 4-bit file), the layers' own type otherwise */
double head_bytes() { return h_blk == 18 ? 128256.0 * 4096 / 256 * 210 : 128256.0 * 4096 / 32 * h_blk; }

enum { V_STREAM, V_BARRIER, V_REG, V_SMEM, V_SYNC, V_RING_ONLY, V_RING, V_FLAG, V_DYN, N_V };
const char *V_NAME[N_V] = {"stream", "barrier", "reg", "smem", "sync", "ring-only", "ring", "flag", "dyn"};
constexpr size_t CHASE_WORDS = (size_t)1 << 26; /* --chase: a 256 MB table, far past L2 */
constexpr int NPHASES = LAYERS * NPH; /* flag, dyn: a claim and a done counter a phase, an attention flag a layer */
constexpr int STG = 16384, MAX_STAGES = 16, RING_CONSUMERS = NT - 32; /* ring: the last warp produces */

struct bar {
    unsigned count, gen;
};

/* The threads of a block that meet at grid barriers: all, or the ring's consumers (named barrier 1). */
__device__ __forceinline__ void meet(int nthreads) {
    if (nthreads == NT)
        __syncthreads();
    else
        asm volatile("bar.sync 1, %0;" ::"r"(nthreads) : "memory");
}

/* Sense by generation: the last block to arrive resets the count and moves
 * the generation on; the others wait for it. Every block is resident
 * (cooperative launch), so the wait ends. nthreads: the block's threads
 * that take part (thread 0 among them). */
__device__ __forceinline__ void grid_bar(bar *b, unsigned nblocks, int nthreads = NT) {
    meet(nthreads);
    if (threadIdx.x == 0) {
        volatile unsigned *gen = &b->gen;
        const unsigned g = *gen;
        __threadfence();
        if (atomicAdd(&b->count, 1u) == nblocks - 1) {
            b->count = 0;
            __threadfence();
            atomicExch(&b->gen, g + 1);
        } else {
            while (*gen == g) __nanosleep(20);
        }
        __threadfence();
    }
    meet(nthreads);
}

__device__ __forceinline__ void spin_us(int us) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < 1000ull * (unsigned long long)us);
}



__device__ __forceinline__ void fold(uint4 &a, uint4 v) { a.x ^= v.x, a.y += v.y, a.z ^= v.z, a.w += v.w; }

__device__ __forceinline__ size_t zmin(size_t a, size_t b) { return a < b ? a : b; }

/* This block's share of a phase: [lo, hi) in bytes, a multiple of 16. */
__device__ __forceinline__ void share(size_t n, size_t &lo, size_t &hi) {
    const size_t per = ((n + gridDim.x - 1) / gridDim.x + 15) & ~(size_t)15;
    lo = zmin(n, per * blockIdx.x), hi = zmin(n, lo + per);
}

/* Stream [lo + skip, hi) of p: each thread U loads in flight a step. */
__device__ __forceinline__ void stream(const uint8_t *p, size_t lo, size_t hi, size_t skip, uint4 &acc) {
    for (size_t o = lo + skip + 16 * (size_t)threadIdx.x; o < hi; o += 16 * (size_t)NT * U) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t q = o + 16 * (size_t)NT * u;
            v[u] = q < hi ? ld_stream16(p + q) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; u++) fold(acc, v[u]);
    }
}

/* The ring's stages and mbarriers in dynamic shared memory: S stages of STG
 * bytes, then full[S] and empty[S] (set up by thread 0, the block synced).
 * Returns whether this thread takes part: the consumers and the producer
 * (the first thread of the last warp); the rest of that warp leaves. */
struct ring_smem {
    int S;
    uint32_t ring0, full0, empty0;
};
__device__ __forceinline__ bool ring_setup(uint8_t *sm, int smem_bytes, ring_smem &r) {
    r.S = min(MAX_STAGES, smem_bytes / STG);
    uint64_t *mb = (uint64_t *)(sm + (size_t)r.S * STG);
    r.ring0 = smem_u32(sm), r.full0 = smem_u32(mb), r.empty0 = smem_u32(mb + MAX_STAGES);
    if (threadIdx.x == 0) {
        for (int i = 0; i < r.S; i++) mbar_init(r.full0 + 8 * i, 1), mbar_init(r.empty0 + 8 * i, RING_CONSUMERS / 32);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    return threadIdx.x <= RING_CONSUMERS;
}

/* The ring variants: warp NT/32 - 1's lane 0 copies the block's share of
 * every phase, in order, into 16 KB stages (a stage reused once its
 * "empty" mbarrier has all consumer warps); the consumer warps fold each
 * stage once its "full" mbarrier has its bytes and, with barriers, meet the
 * other blocks' consumers after each phase. The producer never waits on the
 * grid: only a full ring stops it. */
__device__ void ring(const uint8_t *__restrict__ w, bool barriers, int smem_bytes, int stall_us, bar *b, uint4 &acc) {
    extern __shared__ __align__(128) uint8_t sm[];
    ring_smem r;
    if (!ring_setup(sm, smem_bytes, r)) return;
    const int S = r.S;
    const uint32_t ring0 = r.ring0, full0 = r.full0, empty0 = r.empty0;
    const bool producer = threadIdx.x == RING_CONSUMERS;
    size_t base = 0;
    unsigned c = 0; /* chunks so far: stage c % S, its use c / S */
    for (int l = 0; l < LAYERS; l++) {
        for (int k = 0; k < NPH; k++) {
            size_t lo, hi;
            share(ph_bytes(k), lo, hi);
            for (size_t o = lo; o < hi; o += STG, c++) {
                const uint32_t n = (uint32_t)zmin(STG, hi - o), st = c % S, use = c / S;
                if (producer) {
                    if (use > 0) mbar_wait(empty0 + 8 * st, (use - 1) & 1);
                    mbar_expect_tx(full0 + 8 * st, n);
                    bulk_load(ring0 + st * STG, w + base + o, n, full0 + 8 * st);
                } else {
                    mbar_wait(full0 + 8 * st, use & 1);
                    for (uint32_t i = 16 * threadIdx.x; i < n; i += 16 * RING_CONSUMERS)
                        fold(acc, *(const uint4 *)(sm + st * STG + i));
                    __syncwarp();
                    if ((threadIdx.x & 31) == 0) mbar_arrive(empty0 + 8 * st);
                }
            }
            base += ph_bytes(k);
            if (producer || !barriers) continue;
            if (k == 0 && stall_us) spin_us(stall_us);
            for (int i = 0; i < ph_bars(k); i++) grid_bar(b, gridDim.x, RING_CONSUMERS);
        }
    }
}

__device__ __forceinline__ void wait_at_least(const unsigned *p, unsigned n) {
    while (ld_acquire(p) < n) __nanosleep(20);
}
__host__ __device__ inline unsigned ph_chunks(int k) { return (unsigned)((ph_bytes(k) + STG - 1) / STG); }

/* flag, dyn: the ring without grid barriers. A phase is cut into 16 KB
 * chunks; a block's producer takes its chunks (flag: a contiguous share, as
 * ring; dyn: claimed one at a time from the phase's counter, the next claim
 * in flight while it copies, so fast blocks take more) and ends its phase
 * with an empty stage (chunk -1). The consumers fold a phase's chunks only
 * once every chunk of the phase before has been folded (its done counter,
 * one add a block a phase), as a GEMV needs its whole input: the dependency
 * without an all-blocks barrier. After q/k/v, block 0 stands for the
 * attention: it waits for q/k/v, spins --stall, and raises the layer's flag
 * that the o phase waits for. ctr: claim[NPHASES], done[NPHASES],
 * attn[LAYERS], zero at launch. */
__device__ void ring_dep(const uint8_t *__restrict__ w, bool dyn, int smem_bytes, int stall_us, size_t l2_bytes,
                         int chase, const unsigned *__restrict__ chase_buf, unsigned *ctr, uint4 &acc) {
    extern __shared__ __align__(128) uint8_t sm[];
    __shared__ int meta[MAX_STAGES];
    unsigned *claim = ctr, *done = ctr + NPHASES, *attn = ctr + 2 * NPHASES;
    ring_smem r;
    if (!ring_setup(sm, smem_bytes, r)) return;
    const int S = r.S;
    const uint32_t ring0 = r.ring0, full0 = r.full0, empty0 = r.empty0;
    const bool producer = threadIdx.x == RING_CONSUMERS;
    unsigned c = 0; /* stages so far: stage c % S, its use c / S */
    if (producer) {
        size_t base = 0;
        auto put = [&](int chunk, size_t off, uint32_t n) { /* chunk -1: the phase's end, no bytes */
            const uint32_t st = c % S, use = c / S;
            if (use > 0) mbar_wait(empty0 + 8 * st, (use - 1) & 1);
            meta[st] = chunk;
            if (chunk < 0) {
                mbar_arrive(full0 + 8 * st);
            } else {
                mbar_expect_tx(full0 + 8 * st, n);
                bulk_load(ring0 + st * STG, w + off, n, full0 + 8 * st);
            }
            c++;
        };
        struct {
            int P;
            unsigned ch, hi;
            size_t base;
        } pf = {0, (unsigned)((size_t)ph_chunks(0) * blockIdx.x / gridDim.x),
                (unsigned)((size_t)ph_chunks(0) * (blockIdx.x + 1) / gridDim.x), 0};
        size_t pf_sent = 0, put_sent = 0;
        for (int P = 0; P < NPHASES; P++) {
            const int k = P % NPH;
            const unsigned n = ph_chunks(k);
            const size_t bytes = ph_bytes(k);
            if (dyn) {
                unsigned next = atomicAdd(&claim[P], 1u);
                for (;;) {
                    const unsigned ch = next;
                    if (ch >= n) break;
                    next = atomicAdd(&claim[P], 1u); /* in flight while this chunk's copy is issued */
                    put((int)ch, base + (size_t)ch * STG, (uint32_t)zmin(STG, bytes - (size_t)ch * STG));
                }
            } else {
                const unsigned lo = (unsigned)((size_t)n * blockIdx.x / gridDim.x),
                               hi = (unsigned)((size_t)n * (blockIdx.x + 1) / gridDim.x);
                for (unsigned ch = lo; ch < hi; ch++) {
                    /* --l2: this block's chunks up to l2_bytes ahead of the copies asked of L2 */
                    while (l2_bytes && pf.P < NPHASES && pf_sent < put_sent + l2_bytes) {
                        if (pf.ch < pf.hi) {
                            const size_t o = (size_t)pf.ch++ * STG, m = zmin(STG, ph_bytes(pf.P % NPH) - o);
                            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w + pf.base + o),
                                         "r"((uint32_t)m)
                                         : "memory");
                            pf_sent += m;
                        } else if (++pf.P < NPHASES) {
                            pf.base += ph_bytes((pf.P - 1) % NPH);
                            const unsigned pn = ph_chunks(pf.P % NPH);
                            pf.ch = (unsigned)((size_t)pn * blockIdx.x / gridDim.x);
                            pf.hi = (unsigned)((size_t)pn * (blockIdx.x + 1) / gridDim.x);
                        }
                    }
                    const uint32_t m = (uint32_t)zmin(STG, bytes - (size_t)ch * STG);
                    put((int)ch, base + (size_t)ch * STG, m);
                    put_sent += m;
                }
            }
            put(-1, 0, 0);
            base += bytes;
        }
        return;
    }
    for (int P = 0; P < NPHASES; P++) {
        const int k = P % NPH, l = P / NPH;
        if (P > 0) { /* the input of this phase is complete */
            if (threadIdx.x == 0) {
                if (k == 1) wait_at_least(&attn[l], 1u);
                else wait_at_least(&done[P - 1], ph_chunks((P - 1) % NPH));
            }
            meet(RING_CONSUMERS);
        }
        unsigned folded = 0;
        for (;;) {
            const uint32_t st = c % S, use = c / S;
            mbar_wait(full0 + 8 * st, use & 1);
            const int ch = meta[st];
            if (ch >= 0) {
                const uint32_t n = (uint32_t)zmin(STG, ph_bytes(k) - (size_t)ch * STG);
                for (uint32_t i = 16 * threadIdx.x; i < n; i += 16 * RING_CONSUMERS)
                    fold(acc, *(const uint4 *)(sm + st * STG + i));
                folded++;
            }
            __syncwarp();
            if ((threadIdx.x & 31) == 0) mbar_arrive(empty0 + 8 * st);
            c++;
            if (ch < 0) break;
        }
        meet(RING_CONSUMERS); /* the block's outputs of the phase are stored */
        if (threadIdx.x == 0) {
            __threadfence();
            if (folded) atomicAdd(&done[P], folded);
            if (k == 0 && blockIdx.x == 0) { /* the attention: all of q/k/v, its latency, then o may start */
                wait_at_least(&done[P], ph_chunks(0));
                /* --chase: dependent loads from DRAM first, as the attention's chain of round trips */
                unsigned at = blockIdx.x;
                for (int i = 0; i < chase; i++)
                    at = (at * 1103515245u + 12345u + ld_acquire(chase_buf + (at & (CHASE_WORDS - 1)))) & 0x7fffffffu;
                if (at == 0xffffffffu) acc.x ^= at; /* never: keeps the chain */
                if (stall_us) spin_us(stall_us);
                __threadfence();
                atomicExch(&attn[l], 1u);
            }
        }
    }
}

__global__ void __launch_bounds__(NT) persist_kernel(const uint8_t *__restrict__ w, int variant, int smem_bytes,
                                                     int stall_us, int l2_kb, int chase, const unsigned *chase_buf,
                                                     bar *b, unsigned *ctr, uint4 *out) {
    extern __shared__ __align__(128) uint8_t sm[];
    uint4 acc = make_uint4(0, 0, 0, 0), pre[U];
    const unsigned nb = gridDim.x;
    if (variant == V_RING_ONLY || variant == V_RING) {
        ring(w, variant == V_RING, smem_bytes, stall_us, b, acc);
        if (acc.x == 0x12345678u) out[blockIdx.x * NT + threadIdx.x] = acc;
        return;
    }
    if (variant == V_FLAG || variant == V_DYN) {
        ring_dep(w, variant == V_DYN, smem_bytes, stall_us, (size_t)l2_kb * 1024, chase, chase_buf, ctr, acc);
        if (acc.x == 0x12345678u) out[blockIdx.x * NT + threadIdx.x] = acc;
        return;
    }
    size_t base = 0, ready = 0; /* ready: bytes of this phase the one before asked for (reg, smem) */
    for (int l = 0; l < LAYERS; l++) {
        for (int k = 0; k < NPH; k++) {
            size_t lo, hi;
            share(ph_bytes(k), lo, hi);
            if (variant != V_SYNC) {
                if (variant == V_REG && ready) {
#pragma unroll
                    for (int u = 0; u < U; u++) fold(acc, pre[u]);
                } else if (variant == V_SMEM && ready) {
                    cp_async_wait_all();
                    for (size_t o = 16 * (size_t)threadIdx.x; o < ready; o += 16 * NT)
                        fold(acc, *(const uint4 *)(sm + o));
                    __syncthreads(); /* the buffer is free for the next copies */
                }
                stream(w + base, lo, hi, ready, acc);
            }
            base += ph_bytes(k);
            ready = 0;
            if (variant == V_STREAM) continue;
            const bool last = l == LAYERS - 1 && k == NPH - 1;
            if (!last && (variant == V_REG || variant == V_SMEM)) { /* the next phase's first bytes, before the wait */
                size_t nlo, nhi;
                share(ph_bytes((k + 1) % NPH), nlo, nhi);
                const uint8_t *np = w + base;
                if (variant == V_REG) {
                    ready = zmin(nhi - nlo, (size_t)16 * NT * U);
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        const size_t q = 16 * (size_t)threadIdx.x + 16 * (size_t)NT * u;
                        pre[u] = q < ready ? ld_stream16(np + nlo + q) : make_uint4(0, 0, 0, 0);
                    }
                } else {
                    ready = zmin(nhi - nlo, (size_t)smem_bytes);
                    for (size_t o = 16 * (size_t)threadIdx.x; o < ready; o += 16 * NT) cp_async16(sm + o, np + nlo + o);
                    cp_async_commit();
                }
            }
            if (k == 0 && stall_us) spin_us(stall_us);
            for (int i = 0; i < ph_bars(k); i++) grid_bar(b, nb);
        }
    }
    if (acc.x == 0x12345678u) out[blockIdx.x * NT + threadIdx.x] = acc; /* rarely true; keeps the loads */
}

} // namespace

int main(int argc, char **argv) {
    int reps = 9, smem_kb = 96, bpsm = 1, stall_us = 0, l2_kb = 0, chase = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--smem") && i + 1 < argc) smem_kb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bpsm") && i + 1 < argc) bpsm = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stall") && i + 1 < argc) stall_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--l2") && i + 1 < argc) l2_kb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chase") && i + 1 < argc) chase = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
            const char *t = argv[++i];
            h_blk = !strcmp(t, "q4_0") ? 18 : !strcmp(t, "q8_0") ? 34 : !strcmp(t, "bf16") ? 64 : 0;
            if (!h_blk) {
                fprintf(stderr, "bench_persist: --type %s: expected q4_0, q8_0 or bf16\n", t);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_persist [--reps 9] [--smem KB] [--bpsm blocks a multiprocessor] "
                            "[--stall us after q/k/v] [--l2 KB ahead, flag] [--chase loads] [--type q4_0|q8_0|bf16]\n");
            return 2;
        }
    }
    if (reps < 1 || smem_kb < 0 || smem_kb > 200 || bpsm < 1 || bpsm > 4 || stall_us < 0 || stall_us > 1000 ||
        l2_kb < 0 || l2_kb > 4096 || chase < 0 || chase > 100) {
        fprintf(stderr, "bench_persist: need --reps >= 1, 0 <= --smem <= 200, 1 <= --bpsm <= 4, 0 <= --stall <= 1000, "
                        "0 <= --l2 <= 4096, 0 <= --chase <= 100\n");
        return 2;
    }
    int dev = 0, nsm = 0, coop = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
    if (!coop) {
        fprintf(stderr, "bench_persist: device %d has no cooperative launch\n", dev);
        return 1;
    }
    cudaMemcpyToSymbol(d_blk, &h_blk, sizeof h_blk);
    size_t layer = 0;
    for (int p = 0; p < NPH; p++) layer += ph_bytes(p);
    const size_t total = layer * LAYERS, cp = (size_t)1 << 31;
    uint8_t *w = NULL, *c2 = NULL;
    bar *b = NULL;
    unsigned *ctr = NULL, *chase_buf = NULL;
    const size_t ctr_bytes = sizeof(unsigned) * (2 * NPHASES + LAYERS);
    uint4 *out = NULL;
    if (cudaMalloc(&w, total) != cudaSuccess || cudaMalloc(&c2, cp) != cudaSuccess ||
        cudaMalloc(&b, sizeof(bar)) != cudaSuccess || cudaMalloc(&ctr, ctr_bytes) != cudaSuccess ||
        cudaMalloc(&chase_buf, 4 * CHASE_WORDS) != cudaSuccess || cudaMalloc(&out, sizeof(uint4) * NT * nsm * 4) != cudaSuccess) {
        fprintf(stderr, "bench_persist: out of device memory (%.2f GB)\n", total / 1e9);
        return 1;
    }
    cudaMemset(w, 0x5a, total);
    cudaMemset(b, 0, sizeof(bar));
    cudaMemset(chase_buf, 0, 4 * CHASE_WORDS);
    const double bw = copy_gbs(w, c2, cp);
    const int smem = smem_kb * 1024, dyn = smem + 2 * MAX_STAGES * 8; /* the ring's mbarriers after it */
    cudaFuncSetAttribute(persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn);
    int fit = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, persist_kernel, NT, dyn);
    if (fit < bpsm) {
        fprintf(stderr, "bench_persist: %d blocks of %d KB shared memory a multiprocessor do not fit (%d do)\n", bpsm,
                smem_kb, fit);
        return 1;
    }
    const int grid = nsm * bpsm;
    printf("copy bandwidth %.0f GB/s; %d SMs x %d blocks of %d threads, %d KB shared a block; %d layers of %.1f MB "
           "(%s 8B), %d barriers a layer where the variant has them, a %d us stall after q/k/v (flag, dyn: after %d "
           "dependent DRAM loads), flag's L2 prefetch %d KB ahead; median of %d\n",
           bw, nsm, bpsm, NT, smem_kb, LAYERS, layer / 1e6, h_blk == 18 ? "Q4_0" : h_blk == 34 ? "Q8_0" : "BF16", BARS, stall_us, chase, l2_kb, reps);
    printf("%-8s %10s %9s %7s %22s\n", "variant", "us", "GB/s", "%copy", "tok/s ceiling (+ head)");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    for (int v = 0; v < N_V; v++) {
        if ((v == V_RING_ONLY || v == V_RING || v == V_FLAG || v == V_DYN) && smem < 2 * STG) {
            printf("%-8s (needs --smem >= %d)\n", V_NAME[v], 2 * STG / 1024);
            continue;
        }
        std::vector<float> t;
        for (int r = 0; r < reps + 1; r++) {
            int vv = v, sb = smem, su = stall_us, l2 = l2_kb, ch = chase;
            void *args[] = {&w, &vv, &sb, &su, &l2, &ch, &chase_buf, &b, &ctr, &out};
            cudaMemsetAsync(ctr, 0, ctr_bytes);
            cudaEventRecord(e0);
            cudaError_t e = cudaLaunchCooperativeKernel((const void *)persist_kernel, dim3(grid), dim3(NT), args,
                                                        (size_t)dyn, 0);
            cudaEventRecord(e1);
            if (e == cudaSuccess) e = cudaEventSynchronize(e1);
            if (e != cudaSuccess) {
                fprintf(stderr, "bench_persist: %s: %s\n", V_NAME[v], cudaGetErrorString(e));
                return 1;
            }
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r > 0) t.push_back(ms); /* the first run warms up */
        }
        std::sort(t.begin(), t.end());
        const double us = 1e3 * t[t.size() / 2];
        if (v == V_SYNC) {
            printf("%-8s %10.1f   %.2f us a barrier (%d)\n", V_NAME[v], us, us / (LAYERS * BARS), LAYERS * BARS);
        } else {
            const double gbs = total / (us * 1e-6) / 1e9;
            printf("%-8s %10.1f %9.0f %6.1f%% %22.0f\n", V_NAME[v], us, gbs, 100.0 * gbs / bw,
                   1e6 / (us + head_bytes() / (bw * 1e3)));
        }
        fflush(stdout);
    }
    return 0;
}
