/* bench_mega.cu - a batch-1 BF16 decode token of the Llama-3.1-8B shape as
 * one persistent kernel, with its arithmetic: can a megakernel reach issue
 * 7's BF16 goal (260 tok/s on the H200) where the kernel-per-op engine
 * stops at ~236? bench_persist --type bf16 (s47-run1) says its skeleton -
 * the weights streamed through a ring of shared-memory stages, the layer's
 * dependencies as done counters, a 7 us stall for the attention - runs at
 * 96-100% of copy bandwidth; this is the same skeleton doing the work.
 *
 * One block a multiprocessor, cooperative launch (all resident). Warp 8's
 * lane 0 is the producer: it copies the block's share of every matmul of
 * every layer, in order, into a ring of 16 KB stages (cp.async.bulk, an
 * mbarrier a stage), never waiting on anything but a free stage - weights
 * depend on nothing. Warps 0-7 consume, a layer being:
 *
 *   qkv   wait for the last layer's down rows; x from L2, its RMS norm in
 *         registers (each thread holds the 16 elements its chunks meet);
 *         the block's rows of Wqkv (6144 x 4096), two rows a stage
 *   attn  blocks 0..127: a (kv head, split of 16) item each, once every
 *         qkv row is done: rope on q (and, in the split holding the new
 *         position, on k, written to the cache with v), scores, softmax,
 *         P x V to a partial; the last split of a head to arrive merges the
 *         16 partials into the attention output
 *   o     wait for the 8 heads; x += Wo . attn (4096 x 4096)
 *   gu    wait for every o row; x's second norm; gate and up rows
 *         interleaved (row 2j gate_j, 2j + 1 up_j), act_j = silu(g) * u
 *   down  wait for every act; x += Wd . act (4096 x 14336), half a row a stage
 *
 * A phase's dependency is a done counter (a fence, then one add a block);
 * the consumers' thread 0 polls it (ld.acquire.gpu), and data made by other
 * blocks is read through L2 (__ldcg). Sums are in a fixed order (a thread's
 * chunks, a warp's shuffle tree, the warps in order), so a run is
 * deterministic. The same token through one simple kernel per op (a warp a
 * row, f32) is the check; the bench prints the largest difference.
 *
 *   bench_mega [--layers 32] [--pos 512] [--stages 8] [--reps 9] [--kvpre 1] [--dyn 1]
 *
 * --dyn 1: a matmul's units (two rows; a row of down) are claimed one at a
 * time by the blocks' producers rather than shared out in equal runs.
 *
 * --kvpre 1: each attention item's cached K and V rows (before the new
 * position) are copied into shared memory at the layer's start, ahead of
 * the q/k/v they do not depend on. Thread 0 of each block stamps the steps
 * of the middle layer (globaltimer); the bench prints their spread.
 *
 * Prints the persistent token's time, its share of copy bandwidth and the
 * tok/s it implies with the BF16 head at copy bandwidth. A measurement,
 * never a test. */
#include "ops/cuda/cuda_internal.cuh"
#include "copy_bw.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace {

constexpr int D = 4096, NKV = 8, HD = 128, NQ = 32, GQA = NQ / NKV, FF = 14336, QKV = D + 2 * NKV * HD;
constexpr int CW = 8, CT = CW * 32, NT = CT + 32; /* consumer warps; warp CW's lane 0 produces */
constexpr int STG = 16384, MAX_STAGES = 13, SPL = 16, MAXP = 256; /* SPL splits a kv head, MAXP positions a split */
constexpr int FCH = FF / 8, HALF = FCH / 2;                        /* down: 16-byte chunks a row, a stage's */
constexpr float EPS = 1e-5f, THETA = 500000.0f;
constexpr int NCTR = 20; /* a layer's counters: qkv, attn, o, gu, down done, -, -, -, the 8 heads' split counts, then
                            the four phases' claims (--dyn) */
constexpr double HEAD_BYTES = 128256.0 * D * 2;

struct net {
    const uint16_t *wqkv, *wo, *wgu, *wd; /* layer l at + l * its size */
    const float *n1, *n2;                 /* [L][D] */
    uint16_t *kc, *vc;                    /* [L][cap][NKV][HD] */
    float *x, *qkv, *att, *act, *po, *pml;
    unsigned *ctr; /* [L][NCTR], zero at launch */
    unsigned long long *st; /* [grid][NST]: layer L / 2's stamps */
    int L, pos, cap, kvpre, dyn;
};
/* the stamps of one layer, thread 0 of each block (globaltimer, ns) */
enum { S_QKV_WAIT, S_QKV_NORM, S_QKV_DONE, S_ATT_WAIT, S_ATT_Q, S_ATT_SC, S_ATT_PART, S_ATT_MERGED, S_ATT_DONE, S_O_WAIT,
       S_O_DONE, S_GU_WAIT, S_GU_DONE, S_D_WAIT, S_D_DONE, S_UNITS_GU, S_FULL_NS, S_EMPTY_NS, NST };
const char *ST_NAME[NST] = {"qkv wait returns", "qkv norm done", "qkv rows done", "attn wait returns", "attn q ready",
                            "attn scores done", "attn partial out", "attn merged (mergers)", "attn item done",
                            "o wait returns", "o rows done", "gu wait returns", "gu rows done", "down wait returns",
                            "down rows done", "gu units taken", "consumer waits on full (us)",
                            "producer waits on empty (us)"};
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ size_t kv_at(const net &n, int l, int p, int h) {
    return (((size_t)l * n.cap + p) * NKV + h) * HD;
}
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ uint16_t to_bf16(float f) {
    const uint32_t u = __float_as_uint(f);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float dot8(uint4 w, const float *x, float a) {
    a = fmaf(bf_lo(w.x), x[0], a), a = fmaf(bf_hi(w.x), x[1], a), a = fmaf(bf_lo(w.y), x[2], a);
    a = fmaf(bf_hi(w.y), x[3], a), a = fmaf(bf_lo(w.z), x[4], a), a = fmaf(bf_hi(w.z), x[5], a);
    a = fmaf(bf_lo(w.w), x[6], a), a = fmaf(bf_hi(w.w), x[7], a);
    return a;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* 8 floats of p (16-byte aligned) through L2: another block made them */
__device__ __forceinline__ void ld8(const float *p, float *o) {
    const float4 a = __ldcg((const float4 *)p), b = __ldcg((const float4 *)p + 1);
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
}
__device__ __forceinline__ void rope_cs(int pos, int d, float &c, float &s) {
    sincosf((float)pos * powf(THETA, -2.0f * d / HD), &s, &c);
}
__device__ __forceinline__ void rope(float c, float s, float &a, float &b) { /* NeoX pairs (d, d + 64) */
    const float a2 = a * c - b * s, b2 = b * c + a * s;
    a = a2, b = b2;
}
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }
__device__ __forceinline__ unsigned share_lo(unsigned n, unsigned b, unsigned g) { return (unsigned)((size_t)n * b / g); }

/* ---- the persistent kernel ------------------------------------------------ */

__device__ __forceinline__ void cbar() { asm volatile("bar.sync 1, %0;" ::"r"(CT) : "memory"); }
__device__ __forceinline__ void wait_ge(const unsigned *p, unsigned n) {
    if (threadIdx.x == 0)
        while (ld_acquire(p) < n) __nanosleep(20);
    cbar();
}
/* every consumer's writes before it, then one add for the block */
__device__ __forceinline__ void signal(unsigned *p, unsigned n) {
    cbar();
    if (threadIdx.x == 0) {
        __threadfence(); /* cumulative: the writes the barrier ordered before it */
        atomicAdd(p, n);
    }
}

struct ring {
    int S;
    uint32_t base, full, empty;
    unsigned c;                /* stages so far: stage c % S, its use c / S */
    unsigned long long waited; /* ns in mbarrier waits, while rec */
    bool rec;
    int *meta; /* [S]: the unit a stage holds, -1 for a phase's end */
    __device__ const uint4 *take(uint8_t *sm) {
        const uint32_t st = c % S;
        const unsigned long long t0 = rec ? gtime() : 0;
        mbar_wait(full + 8 * st, (c / S) & 1);
        if (rec) waited += gtime() - t0;
        return (const uint4 *)(sm + (size_t)st * STG);
    }
    __device__ void give() { /* the warp's reads of the stage are done */
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(empty + 8 * (c % S));
        c++;
    }
};

/* A matmul phase is cut into units: two rows of the 4096-wide ones (q/k/v, o; for gate/up a gate row and
 * its up row), one row of down (two stages). A block takes its contiguous share of a phase's units, or
 * (--dyn) claims them one at a time from the phase's counter while it copies the one before, so the blocks
 * that DRAM serves faster take more; at most umax a block a phase. */
__host__ __device__ constexpr unsigned units_of(int ph) { return ph == 0 ? QKV / 2 : ph == 1 ? D / 2 : ph == 2 ? FF : D; }

__device__ void produce(const net &n, uint8_t *sm, ring &r, unsigned umax) {
    auto put = [&](const uint16_t *src, uint32_t bytes, int unit) { /* bytes 0: the phase's end */
        const uint32_t st = r.c % r.S, use = r.c / r.S;
        const unsigned long long t0 = r.rec ? gtime() : 0;
        if (use > 0) mbar_wait(r.empty + 8 * st, (use - 1) & 1);
        if (r.rec) r.waited += gtime() - t0;
        r.meta[st] = unit;
        if (bytes) {
            mbar_expect_tx(r.full + 8 * st, bytes);
            bulk_load(r.base + st * STG, src, bytes, r.full + 8 * st);
        } else {
            mbar_arrive(r.full + 8 * st);
        }
        r.c++;
    };
    for (int l = 0; l < n.L; l++) {
        r.rec = l == n.L / 2;
        const uint16_t *w[4] = {n.wqkv + (size_t)l * QKV * D, n.wo + (size_t)l * D * D, n.wgu + (size_t)l * 2 * FF * D,
                                n.wd + (size_t)l * D * FF};
        for (int ph = 0; ph < 4; ph++) {
            auto emit = [&](unsigned u) {
                if (ph < 3) {
                    put(w[ph] + (size_t)u * 2 * D, 4 * D, (int)u);
                } else {
                    put(w[3] + (size_t)u * FF, FF, (int)u);
                    put(w[3] + (size_t)u * FF + FF / 2, FF, (int)u);
                }
            };
            const unsigned nu = units_of(ph);
            if (n.dyn) {
                unsigned *claim = n.ctr + l * NCTR + 16 + ph, got = 0;
                unsigned next = atomicAdd(claim, 1u);
                while (next < nu) {
                    const unsigned u = next;
                    next = ++got < umax ? atomicAdd(claim, 1u) : nu; /* in flight while u's copy is issued */
                    emit(u);
                }
            } else {
                for (unsigned u = share_lo(nu, blockIdx.x, gridDim.x); u < share_lo(nu, blockIdx.x + 1, gridDim.x); u++)
                    emit(u);
            }
            put(nullptr, 0, -1);
        }
    }
    n.st[blockIdx.x * NST + S_EMPTY_NS] = r.waited; /* counted in layer L / 2 only */
}

/* x's chunks t and t + 256 (what a thread's chunks of a 4096-wide row meet), optionally RMS-normed by nw */
__device__ void load_x(const float *x, const float *nw, float xr[2][8], float *red) {
    const int t = threadIdx.x;
    ld8(x + 8 * t, xr[0]), ld8(x + 8 * (t + CT), xr[1]);
    if (!nw) return;
    float ss = 0;
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int e = 0; e < 8; e++) ss = fmaf(xr[k][e], xr[k][e], ss);
    ss = warp_sum(ss);
    if ((t & 31) == 0) red[t >> 5] = ss;
    cbar();
    float tot = 0;
#pragma unroll
    for (int w = 0; w < CW; w++) tot += red[w];
    const float inv = rsqrtf(tot / D + EPS);
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int e = 0; e < 8; e++) xr[k][e] *= inv * __ldg(nw + 8 * (t + k * CT) + e);
    cbar(); /* red is free again */
}

/* the units this block gets of a 4096-wide matmul: unit k's two rows, each warp's share, to
 * rr[warp * rmax + 2k (+ 1)], the unit to units[k]; returns how many */
__device__ int gemv4096(const float xr[2][8], ring &r, uint8_t *sm, float *rr, int rmax, int *units) {
    const int t = threadIdx.x, w = t >> 5;
    int k = 0;
    for (;; k++) {
        const uint4 *s = r.take(sm);
        const int u = r.meta[r.c % r.S];
        if (u < 0) {
            r.give();
            break;
        }
        float a0 = dot8(s[t + CT], xr[1], dot8(s[t], xr[0], 0.0f));
        float a1 = dot8(s[t + 3 * CT], xr[1], dot8(s[t + 2 * CT], xr[0], 0.0f));
        r.give();
        a0 = warp_sum(a0), a1 = warp_sum(a1);
        if ((t & 31) == 0) rr[w * rmax + 2 * k] = a0, rr[w * rmax + 2 * k + 1] = a1;
        if (t == 0) units[k] = u;
    }
    cbar();
    return k;
}
/* down: a row a unit, half a row a stage against a thread's 7 chunks of act (t + 256 j) */
__device__ int gemv_down(const float xa[7][8], ring &r, uint8_t *sm, float *rr, int rmax, int *units) {
    const int t = threadIdx.x;
    int k = 0;
    for (;; k++) {
        float a = 0;
        int u = 0;
        for (int hh = 0; hh < 2; hh++) {
            const uint4 *s = r.take(sm);
            u = r.meta[r.c % r.S];
            if (u < 0) break;
#pragma unroll
            for (int j = 0; j < 7; j++) {
                const int at = t + j * CT - hh * HALF;
                if ((unsigned)at < (unsigned)HALF) a = dot8(s[at], xa[j], a);
            }
            r.give();
        }
        if (u < 0) {
            r.give();
            break;
        }
        a = warp_sum(a);
        if ((t & 31) == 0) rr[(t >> 5) * rmax + k] = a;
        if (t == 0) units[k] = u;
    }
    cbar();
    return k;
}
__device__ __forceinline__ float row_sum(const float *rr, int rmax, int i) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < CW; w++) s += rr[w * rmax + i];
    return s;
}

/* one (kv head, split) of layer l's attention; the consumers' smem scratch */
constexpr int PRE = 40; /* positions of a split whose K and V rows are copied to shared memory ahead (--kvpre) */
struct attn_smem {
    float q[GQA][HD], sc[GQA][MAXP], m[GQA], s[GQA];
    int last;
    __align__(16) uint16_t k[PRE][HD], v[PRE][HD];
};
__device__ __forceinline__ void split_range(const net &n, int item, int &p0, int &p1) {
    const int ctx = n.pos + 1, per = (ctx + SPL - 1) / SPL;
    p0 = (item % SPL) * per, p1 = min(ctx, p0 + per);
}
/* --kvpre: the split's cached K and V rows (those before the new position, which depend on nothing of this
 * token) copied into shared memory (cp.async) before the layer's q/k/v, so the attention finds them there */
__device__ void kv_prefetch(const net &n, int l, int item, attn_smem &a) {
    int p0, p1;
    split_range(n, item, p0, p1);
    const int np = min(PRE, min(p1, n.pos) - p0), h = item / SPL;
    for (int i = threadIdx.x; i < 2 * np * (HD / 8); i += CT) {
        const int kv = i / (np * (HD / 8)), j = i % (np * (HD / 8)), p = j / (HD / 8), c = j % (HD / 8);
        const uint16_t *src = (kv ? n.vc : n.kc) + kv_at(n, l, p0 + p, h) + 8 * c;
        cp_async16((kv ? &a.v[p][0] : &a.k[p][0]) + 8 * c, src);
    }
    cp_async_commit();
}
__device__ __forceinline__ const uint16_t *k_row(const net &n, const attn_smem &a, int l, int h, int p0, int p) {
    return n.kvpre && p - p0 < PRE ? &a.k[p - p0][0] : n.kc + kv_at(n, l, p, h);
}
__device__ __forceinline__ const uint16_t *v_row(const net &n, const attn_smem &a, int l, int h, int p0, int p) {
    return n.kvpre && p - p0 < PRE ? &a.v[p - p0][0] : n.vc + kv_at(n, l, p, h);
}
/* rc, rs: the rope's cos and sin at the position for dimension pair threadIdx.x % 64 */
__device__ void attention(const net &n, int l, int item, attn_smem &a, float rc, float rs, bool rec) {
    const int t = threadIdx.x, w = t >> 5, lane = t & 31, h = item / SPL, sp = item % SPL, ctx = n.pos + 1;
    int p0, p1;
    split_range(n, item, p0, p1);
    const int np = max(0, p1 - p0);
    { /* q with rope, pre-scaled; the new k and v into the cache by the split that holds the position */
        const int i = t >> 6, d = t & 63;
        float q0 = __ldcg(n.qkv + (h * GQA + i) * HD + d), q1 = __ldcg(n.qkv + (h * GQA + i) * HD + d + 64);
        rope(rc, rs, q0, q1);
        const float sc = rsqrtf((float)HD);
        a.q[i][d] = q0 * sc, a.q[i][d + 64] = q1 * sc;
        if (np > 0 && p1 == ctx) {
            const size_t at = kv_at(n, l, n.pos, h);
            if (t < 64) {
                float k0 = __ldcg(n.qkv + D + h * HD + t), k1 = __ldcg(n.qkv + D + h * HD + t + 64);
                rope(rc, rs, k0, k1);
                n.kc[at + t] = to_bf16(k0), n.kc[at + t + 64] = to_bf16(k1);
                if (n.kvpre && n.pos - p0 < PRE) a.k[n.pos - p0][t] = to_bf16(k0), a.k[n.pos - p0][t + 64] = to_bf16(k1);
            } else if (t < 64 + HD) {
                const uint16_t v = to_bf16(__ldcg(n.qkv + D + NKV * HD + h * HD + t - 64));
                n.vc[at + t - 64] = v;
                if (n.kvpre && n.pos - p0 < PRE) a.v[n.pos - p0][t - 64] = v;
            }
            __threadfence();
        }
    }
    if (n.kvpre) cp_async_wait_all();
    cbar();
    if (rec) n.st[blockIdx.x * NST + S_ATT_Q] = gtime();
    /* a warp four positions at a time, eight lanes a position, a lane 16 dims: three shuffles a head */
    const int sub = lane >> 3, part = lane & 7;
    for (int pb = p0 + 4 * w; pb < p1; pb += 4 * CW) {
        const int p = pb + sub;
        float k[16] = {};
        if (p < p1) {
            const uint16_t *kr = k_row(n, a, l, h, p0, p) + 16 * part;
            const bool sh = n.kvpre && p - p0 < PRE;
            const uint4 k0 = sh ? *(const uint4 *)kr : __ldcg((const uint4 *)kr);
            const uint4 k1 = sh ? *((const uint4 *)kr + 1) : __ldcg((const uint4 *)kr + 1);
            const uint32_t kw[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
            for (int e = 0; e < 8; e++) k[2 * e] = bf_lo(kw[e]), k[2 * e + 1] = bf_hi(kw[e]);
        }
#pragma unroll
        for (int i = 0; i < GQA; i++) {
            float s = 0;
#pragma unroll
            for (int e = 0; e < 16; e++) s = fmaf(a.q[i][16 * part + e], k[e], s);
            s += __shfl_xor_sync(0xffffffffu, s, 1), s += __shfl_xor_sync(0xffffffffu, s, 2);
            s += __shfl_xor_sync(0xffffffffu, s, 4);
            if (part == 0 && p < p1) a.sc[i][p - p0] = s;
        }
    }
    cbar();
    if (rec) n.st[blockIdx.x * NST + S_ATT_SC] = gtime();
    if (w < GQA) { /* warp i: head i's softmax over the split */
        float m = -1e30f;
        for (int p = lane; p < np; p += 32) m = fmaxf(m, a.sc[w][p]);
        m = warp_max(m);
        float s = 0;
        for (int p = lane; p < np; p += 32) {
            const float e = expf(a.sc[w][p] - m);
            a.sc[w][p] = e, s += e;
        }
        s = warp_sum(s);
        if (lane == 0) a.m[w] = m, a.s[w] = s;
    }
    cbar();
    const int i = t >> 6, d = 2 * (t & 63);
    auto v_at = [&](int p) {
        const uint16_t *vr = v_row(n, a, l, h, p0, p0 + p) + d;
        return n.kvpre && p < PRE ? *(const uint32_t *)vr : __ldcg((const uint32_t *)vr);
    };
    float o0 = 0, o1 = 0, e0 = 0, e1 = 0; /* even and odd positions' chains side by side */
    int p = 0;
    for (; p + 1 < np; p += 2) {
        const uint32_t v = v_at(p), u = v_at(p + 1);
        o0 = fmaf(a.sc[i][p], bf_lo(v), o0), o1 = fmaf(a.sc[i][p], bf_hi(v), o1);
        e0 = fmaf(a.sc[i][p + 1], bf_lo(u), e0), e1 = fmaf(a.sc[i][p + 1], bf_hi(u), e1);
    }
    if (p < np) {
        const uint32_t v = v_at(p);
        o0 = fmaf(a.sc[i][p], bf_lo(v), o0), o1 = fmaf(a.sc[i][p], bf_hi(v), o1);
    }
    const int pi = (h * SPL + sp) * GQA + i;
    *(float2 *)(n.po + pi * HD + d) = make_float2(o0 + e0, o1 + e1);
    if (d == 0) *(float2 *)(n.pml + 2 * pi) = make_float2(a.m[i], a.s[i]);
    cbar();
    if (t == 0) {
        __threadfence(); /* the block's partials, ordered by the barrier, before the count */
        a.last = atomicAdd(&n.ctr[l * NCTR + 8 + h], 1u) == SPL - 1;
    }
    cbar();
    if (rec) n.st[blockIdx.x * NST + S_ATT_PART] = gtime();
    if (!a.last) return;
    __threadfence();
    float ml[SPL][2], po[SPL][2]; /* every split's loads in flight at once: one L2 round trip */
#pragma unroll
    for (int s = 0; s < SPL; s++) {
        const int ps = (h * SPL + s) * GQA + i;
        const float2 m2 = __ldcg((const float2 *)n.pml + ps), o2 = __ldcg((const float2 *)(n.po + ps * HD + d));
        ml[s][0] = m2.x, ml[s][1] = m2.y, po[s][0] = o2.x, po[s][1] = o2.y;
    }
    float mx = -1e30f;
#pragma unroll
    for (int s = 0; s < SPL; s++) mx = fmaxf(mx, ml[s][0]);
    float den = 0, r0 = 0, r1 = 0;
#pragma unroll
    for (int s = 0; s < SPL; s++) {
        const float f = expf(ml[s][0] - mx);
        den = fmaf(ml[s][1], f, den), r0 = fmaf(po[s][0], f, r0), r1 = fmaf(po[s][1], f, r1);
    }
    n.att[(h * GQA + i) * HD + d] = r0 / den, n.att[(h * GQA + i) * HD + d + 1] = r1 / den;
    signal(&n.ctr[l * NCTR + 1], 1u);
    if (rec) n.st[blockIdx.x * NST + S_ATT_MERGED] = gtime();
}

__global__ void __launch_bounds__(NT, 1) mega_kernel(net n, int stages, int umax) {
    extern __shared__ __align__(128) uint8_t sm[];
    __shared__ attn_smem as;
    __shared__ float red[CW];
    __shared__ int meta[MAX_STAGES];
    uint64_t *mb = (uint64_t *)(sm + (size_t)stages * STG);
    const int rmax = 2 * umax;
    float *rr = (float *)(mb + 2 * MAX_STAGES);
    int *units = (int *)(rr + CW * rmax);
    ring r = {stages, smem_u32(sm), smem_u32(mb), smem_u32(mb + MAX_STAGES), 0u, 0ull, false, meta};
    if (threadIdx.x == 0) {
        for (int i = 0; i < stages; i++) mbar_init(r.full + 8 * i, 1), mbar_init(r.empty + 8 * i, CW);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= CT) {
        if (threadIdx.x == CT) produce(n, sm, r, (unsigned)umax);
        return;
    }
    const int t = threadIdx.x;
    float xr[2][8], rc, rs;
    rope_cs(n.pos, t & 63, rc, rs);
    for (int l = 0; l < n.L; l++) {
        unsigned *c = n.ctr + l * NCTR;
        r.rec = t == 0 && l == n.L / 2;
        auto stamp = [&](int k) {
            if (r.rec) n.st[blockIdx.x * NST + k] = gtime();
        };
        /* the one item this block takes (the grid has >= NKV * SPL blocks): its cached K / V ahead */
        const bool one = gridDim.x >= NKV * SPL && (int)blockIdx.x < NKV * SPL;
        if (one && n.kvpre) kv_prefetch(n, l, blockIdx.x, as);
        /* q, k, v */
        if (l > 0) wait_ge(n.ctr + (l - 1) * NCTR + 4, D);
        stamp(S_QKV_WAIT);
        load_x(n.x, n.n1 + (size_t)l * D, xr, red);
        stamp(S_QKV_NORM);
        int k = gemv4096(xr, r, sm, rr, rmax, units);
        for (int i = t; i < 2 * k; i += CT) n.qkv[2 * units[i / 2] + (i & 1)] = row_sum(rr, rmax, i);
        signal(c + 0, 2 * k);
        stamp(S_QKV_DONE);
        /* the attention */
        for (int item = blockIdx.x; item < NKV * SPL; item += gridDim.x) {
            if (!one && n.kvpre) kv_prefetch(n, l, item, as);
            wait_ge(c + 0, QKV);
            stamp(S_ATT_WAIT);
            attention(n, l, item, as, rc, rs, r.rec);
            cbar();
            stamp(S_ATT_DONE);
        }
        /* o, into the residual */
        wait_ge(c + 1, NKV);
        stamp(S_O_WAIT);
        load_x(n.att, nullptr, xr, red);
        k = gemv4096(xr, r, sm, rr, rmax, units);
        for (int i = t; i < 2 * k; i += CT) {
            const int row = 2 * units[i / 2] + (i & 1);
            n.x[row] = __ldcg(n.x + row) + row_sum(rr, rmax, i);
        }
        signal(c + 2, 2 * k);
        stamp(S_O_DONE);
        /* gate and up, silu(g) * u */
        wait_ge(c + 2, D);
        stamp(S_GU_WAIT);
        load_x(n.x, n.n2 + (size_t)l * D, xr, red);
        k = gemv4096(xr, r, sm, rr, rmax, units);
        for (int j = t; j < k; j += CT) n.act[units[j]] = silu_mul(row_sum(rr, rmax, 2 * j), row_sum(rr, rmax, 2 * j + 1));
        if (r.rec) n.st[blockIdx.x * NST + S_UNITS_GU] = (unsigned long long)k * 1000;
        signal(c + 3, k);
        stamp(S_GU_DONE);
        /* down, into the residual: a thread's 7 chunks of act (t + 256 j) */
        wait_ge(c + 3, FF);
        stamp(S_D_WAIT);
        float xa[7][8];
#pragma unroll
        for (int j = 0; j < 7; j++) ld8(n.act + 8 * (t + j * CT), xa[j]);
        k = gemv_down(xa, r, sm, rr, rmax, units);
        for (int i = t; i < k; i += CT) n.x[units[i]] = __ldcg(n.x + units[i]) + row_sum(rr, rmax, i);
        signal(c + 4, k);
        stamp(S_D_DONE);
        if (r.rec) n.st[blockIdx.x * NST + S_FULL_NS] = r.waited;
    }
}

/* ---- the reference: one simple kernel per op ------------------------------ */

__global__ void ref_norm(const float *x, const float *w, float *o) {
    __shared__ float red[32];
    float ss = 0;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss += x[i] * x[i];
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float tot = 0;
    for (int i = 0; i < (int)blockDim.x / 32; i++) tot += red[i];
    const float inv = rsqrtf(tot / D + EPS);
    for (int i = threadIdx.x; i < D; i += blockDim.x) o[i] = x[i] * inv * w[i];
}
/* y[r] (+)= W[r] . x, a warp a row */
__global__ void ref_gemv(const uint16_t *W, int rows, int k, const float *x, float *y, int add) {
    const int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;
    float s = 0;
    for (int i = lane; i < k; i += 32) s = fmaf(__uint_as_float((uint32_t)W[(size_t)r * k + i] << 16), x[i], s);
    s = warp_sum(s);
    if (lane == 0) y[r] = add ? y[r] + s : s;
}
__global__ void ref_kv(net n, int l) { /* block h: the new k (roped) and v at pos */
    const int h = blockIdx.x, t = threadIdx.x;
    const size_t at = kv_at(n, l, n.pos, h);
    if (t < 64) {
        float k0 = n.qkv[D + h * HD + t], k1 = n.qkv[D + h * HD + t + 64], c, s;
        rope_cs(n.pos, t, c, s);
        rope(c, s, k0, k1);
        n.kc[at + t] = to_bf16(k0), n.kc[at + t + 64] = to_bf16(k1);
    }
    n.vc[at + t] = to_bf16(n.qkv[D + NKV * HD + h * HD + t]);
}
__global__ void ref_attn(net n, int l) { /* block: a q head; 128 threads */
    __shared__ float q[HD], sc[4096];
    const int qh = blockIdx.x, h = qh / GQA, t = threadIdx.x, ctx = n.pos + 1;
    if (t < 64) {
        float q0 = n.qkv[qh * HD + t], q1 = n.qkv[qh * HD + t + 64], c, s;
        rope_cs(n.pos, t, c, s);
        rope(c, s, q0, q1);
        q[t] = q0 / sqrtf((float)HD), q[t + 64] = q1 / sqrtf((float)HD);
    }
    __syncthreads();
    for (int p = t; p < ctx; p += HD) {
        const uint16_t *k = n.kc + kv_at(n, l, p, h);
        float s = 0;
        for (int e = 0; e < HD; e++) s = fmaf(q[e], __uint_as_float((uint32_t)k[e] << 16), s);
        sc[p] = s;
    }
    __syncthreads();
    float m = -1e30f;
    for (int p = 0; p < ctx; p++) m = fmaxf(m, sc[p]);
    float den = 0, o = 0;
    for (int p = 0; p < ctx; p++) {
        const float e = expf(sc[p] - m);
        den += e;
        o = fmaf(e, __uint_as_float((uint32_t)n.vc[kv_at(n, l, p, h) + t] << 16), o);
    }
    n.att[qh * HD + t] = o / den;
}
__global__ void ref_swiglu(const float *gu, float *act) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < FF) act[j] = silu_mul(gu[2 * j], gu[2 * j + 1]);
}

__global__ void fill_bf16(uint16_t *p, size_t n, float a, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9e3779b1u ^ (uint32_t)(i >> 32) * 0x85ebca6bu ^ seed;
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        p[i] = to_bf16(a * ((float)h * (2.0f / 4294967296.0f) - 1.0f));
    }
}
__global__ void fill_f32(float *p, size_t n, float lo, float hi, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9e3779b1u ^ seed;
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        p[i] = lo + (hi - lo) * ((float)h / 4294967296.0f);
    }
}

void ref_token(net n, float *xn, float *gu) {
    for (int l = 0; l < n.L; l++) {
        ref_norm<<<1, 1024>>>(n.x, n.n1 + (size_t)l * D, xn);
        ref_gemv<<<QKV / 8, 256>>>(n.wqkv + (size_t)l * QKV * D, QKV, D, xn, n.qkv, 0);
        ref_kv<<<NKV, HD>>>(n, l);
        ref_attn<<<NQ, HD>>>(n, l);
        ref_gemv<<<D / 8, 256>>>(n.wo + (size_t)l * D * D, D, D, n.att, n.x, 1);
        ref_norm<<<1, 1024>>>(n.x, n.n2 + (size_t)l * D, xn);
        ref_gemv<<<2 * FF / 8, 256>>>(n.wgu + (size_t)l * 2 * FF * D, 2 * FF, D, xn, gu, 0);
        ref_swiglu<<<FF / 256, 256>>>(gu, n.act);
        ref_gemv<<<D / 8, 256>>>(n.wd + (size_t)l * D * FF, D, FF, n.act, n.x, 1);
    }
}

template <class T> T *dev(size_t n) {
    T *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) {
        fprintf(stderr, "bench_mega: out of device memory (%.2f GB more)\n", n * sizeof(T) / 1e9);
        exit(1);
    }
    return p;
}

} // namespace

int main(int argc, char **argv) {
    int L = 32, pos = 512, stages = 8, reps = 9, kvpre = 1, dyn = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc) L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pos") && i + 1 < argc) pos = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stages") && i + 1 < argc) stages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kvpre") && i + 1 < argc) kvpre = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dyn") && i + 1 < argc) dyn = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_mega [--layers 32] [--pos 512] [--stages 8] [--reps 9] [--kvpre 1] [--dyn 1]\n");
            return 2;
        }
    }
    if (L < 1 || L > 32 || pos < 1 || pos + 1 > SPL * MAXP || stages < 2 || stages > MAX_STAGES || reps < 1) {
        fprintf(stderr, "bench_mega: need 1 <= --layers <= 32, 1 <= --pos < %d, 2 <= --stages <= %d, --reps >= 1\n",
                SPL * MAXP, MAX_STAGES);
        return 2;
    }
    int dev_id = 0, nsm = 0;
    cudaGetDevice(&dev_id);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev_id);
    net n = {};
    n.L = L, n.pos = pos, n.cap = pos + 1, n.kvpre = kvpre, n.dyn = dyn;
    const size_t lw = (size_t)QKV * D + (size_t)D * D + 2ull * FF * D + (size_t)D * FF; /* a layer's weights */
    uint16_t *wqkv = dev<uint16_t>((size_t)L * QKV * D), *wo = dev<uint16_t>((size_t)L * D * D),
             *wgu = dev<uint16_t>((size_t)L * 2 * FF * D), *wd = dev<uint16_t>((size_t)L * D * FF);
    float *n1 = dev<float>((size_t)L * D), *n2 = dev<float>((size_t)L * D);
    const size_t kvn = (size_t)L * n.cap * NKV * HD;
    n.kc = dev<uint16_t>(kvn), n.vc = dev<uint16_t>(kvn);
    n.x = dev<float>(D), n.qkv = dev<float>(QKV), n.att = dev<float>(D), n.act = dev<float>(FF);
    n.po = dev<float>((size_t)NKV * SPL * GQA * HD), n.pml = dev<float>((size_t)NKV * SPL * GQA * 2);
    n.ctr = dev<unsigned>((size_t)L * NCTR);
    n.st = dev<unsigned long long>((size_t)nsm * NST);
    float *x0 = dev<float>(D), *xref = dev<float>(D), *xn = dev<float>(D), *gu = dev<float>(2 * FF);
    fill_bf16<<<1024, 256>>>(wqkv, (size_t)L * QKV * D, sqrtf(3.0f / D), 1);
    fill_bf16<<<1024, 256>>>(wo, (size_t)L * D * D, sqrtf(3.0f / D), 2);
    fill_bf16<<<1024, 256>>>(wgu, (size_t)L * 2 * FF * D, sqrtf(3.0f / D), 3);
    fill_bf16<<<1024, 256>>>(wd, (size_t)L * D * FF, sqrtf(3.0f / FF), 4);
    fill_bf16<<<1024, 256>>>(n.kc, kvn, 1.0f, 5);
    fill_bf16<<<1024, 256>>>(n.vc, kvn, 1.0f, 6);
    fill_f32<<<64, 256>>>(n1, (size_t)L * D, 0.5f, 1.5f, 7);
    fill_f32<<<64, 256>>>(n2, (size_t)L * D, 0.5f, 1.5f, 8);
    fill_f32<<<16, 256>>>(x0, D, -1.0f, 1.0f, 9);
    n.wqkv = wqkv, n.wo = wo, n.wgu = wgu, n.wd = wd, n.n1 = n1, n.n2 = n2;

    /* the reference token */
    cudaMemcpy(n.x, x0, D * 4, cudaMemcpyDeviceToDevice);
    ref_token(n, xn, gu);
    cudaMemcpy(xref, n.x, D * 4, cudaMemcpyDeviceToDevice);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_mega: reference: %s\n", cudaGetErrorString(e));
        return 1;
    }
    uint8_t *c1 = dev<uint8_t>((size_t)1 << 30), *c2 = dev<uint8_t>((size_t)1 << 30);
    cudaMemset(c1, 1, (size_t)1 << 30);
    const double bw = copy_gbs(c1, c2, (size_t)1 << 30);
    cudaFree(c1), cudaFree(c2);

    /* units a block a phase at most: twice its share of gate/up (--dyn; a contiguous share is under it) */
    const int umax = 2 * ((FF + nsm - 1) / nsm) + 2;
    const int smem = stages * STG + 2 * MAX_STAGES * 8 + CW * 2 * umax * 4 + umax * 4;
    cudaFuncSetAttribute(mega_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int fit = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, mega_kernel, NT, smem);
    if (fit < 1) {
        fprintf(stderr, "bench_mega: %d stages (%d KB of shared memory) do not fit a multiprocessor\n", stages,
                smem / 1024);
        return 1;
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    auto token = [&](float *ms) {
        cudaMemcpyAsync(n.x, x0, D * 4, cudaMemcpyDeviceToDevice);
        cudaMemsetAsync(n.ctr, 0, (size_t)L * NCTR * 4);
        cudaMemsetAsync(n.st, 0, (size_t)nsm * NST * 8);
        int st = stages, rm = umax;
        void *args[] = {&n, &st, &rm};
        cudaEventRecord(e0);
        cudaError_t err = cudaLaunchCooperativeKernel((const void *)mega_kernel, dim3(nsm), dim3(NT), args, (size_t)smem, 0);
        cudaEventRecord(e1);
        if (err == cudaSuccess) err = cudaEventSynchronize(e1);
        if (err != cudaSuccess) {
            fprintf(stderr, "bench_mega: %s\n", cudaGetErrorString(err));
            exit(1);
        }
        cudaEventElapsedTime(ms, e0, e1);
    };
    std::vector<float> t;
    for (int i = 0; i < reps + 1; i++) {
        float ms;
        token(&ms);
        if (i > 0) t.push_back(ms); /* the first run warms up */
    }
    std::vector<float> got(D), want(D);
    cudaMemcpy(got.data(), n.x, D * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(want.data(), xref, D * 4, cudaMemcpyDeviceToHost);
    double md = 0, mx = 0;
    for (int i = 0; i < D; i++) md = std::max(md, (double)fabsf(got[i] - want[i])), mx = std::max(mx, (double)fabsf(want[i]));
    /* the reference's time, for scale */
    cudaMemcpy(n.x, x0, D * 4, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0);
    ref_token(n, xn, gu);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ref_ms;
    cudaEventElapsedTime(&ref_ms, e0, e1);

    std::sort(t.begin(), t.end());
    const double us = 1e3 * t[t.size() / 2], bytes = 2.0 * lw * L;
    const double head_us = HEAD_BYTES / (bw * 1e3), scale = 32.0 / L;
    printf("copy bandwidth %.0f GB/s; %d SMs x %d threads, %d stages of 16 KB; %d layers of %.1f MB (BF16 8B), "
           "position %d, K / V ahead %s, units %s; median of %d\n",
           bw, nsm, NT, stages, L, 2.0 * lw / 1e6, pos, kvpre ? "on" : "off", dyn ? "claimed" : "shared out", reps);
    printf("persistent token %.1f us (%.0f GB/s, %.1f%% of copy); x against the per-op reference: max |diff| %.3g of "
           "max |x| %.3g (%s)\n",
           us, bytes / (us * 1e3), 100.0 * bytes / (us * 1e3) / bw, md, mx, md <= 1e-3 * mx ? "ok" : "MISMATCH");
    printf("tok/s with 32 such layers and the BF16 head at copy bandwidth (%.1f us): %.1f (reference kernels: %.1f "
           "us a token, %.1f tok/s)\n",
           head_us, 1e6 / (us * scale + head_us), 1e3 * ref_ms, 1e6 / (1e3 * ref_ms * scale + head_us));
    /* the stamps of layer L / 2 from the last run, us from its first block's qkv wait */
    std::vector<unsigned long long> st((size_t)nsm * NST);
    cudaMemcpy(st.data(), n.st, st.size() * 8, cudaMemcpyDeviceToHost);
    unsigned long long t0 = ~0ull;
    for (int b = 0; b < nsm; b++) t0 = std::min(t0, st[(size_t)b * NST + S_QKV_WAIT]);
    printf("layer %d, us from the first qkv wait's return (blocks: min / mean / max; attn over the %d with an item):\n",
           L / 2, std::min(nsm, NKV * SPL));
    for (int k = 0; k < NST; k++) {
        double lo = 1e30, hi = -1e30, sum = 0;
        int cnt = 0;
        for (int b = 0; b < nsm; b++) {
            if (!st[(size_t)b * NST + k]) continue; /* no item, not a merger */
            const double v = k >= S_UNITS_GU ? st[(size_t)b * NST + k] / 1e3 : (st[(size_t)b * NST + k] - t0) / 1e3;
            lo = std::min(lo, v), hi = std::max(hi, v), sum += v, cnt++;
        }
        if (cnt) printf("  %-30s %8.2f %8.2f %8.2f  (%d blocks)\n", ST_NAME[k], lo, sum / cnt, hi, cnt);
    }
    return md <= 1e-3 * mx ? 0 : 1;
}
