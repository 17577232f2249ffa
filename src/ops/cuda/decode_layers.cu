/* decode_layers.cu - every layer of one decode token as one persistent
 * launch (hearth_ops.decode_layers), for BF16, Q8_0 or Q4_0 weights (dlf:
 * the types' rows and arithmetic) of the Llama-3-8B / Mistral-7B shape
 * (hidden 4096, FFN 14336, 32 q heads of 128 over 8 kv heads) and an f16
 * cache of up to 4096 positions. Measured first as
 * bench/cuda/bench_mega.cu (notes/cuda-kernels.md, session 47): the
 * kernel-per-op decode leaves DRAM idle at each of a layer's ~7 kernel
 * boundaries and through the attention; here the weights stream through
 * every dependency.
 *
 * One block a multiprocessor, all resident. Warp 8's lane 0 is the
 * producer: it copies the block's units of every matmul of every layer, in
 * order, into a ring of 16 KB shared-memory stages (cp.async.bulk, an
 * mbarrier a stage), claiming them one at a time from a counter a phase so
 * that the multiprocessors DRAM serves faster take more; weights depend on
 * nothing, so it waits only for a free stage and for the copy two back to
 * land (fewer bytes queued at once, session 56), or, while the block's
 * consumers wait between phases, for the copy one back (Q8_0 / Q4_0: their
 * waits are L2 round trips, which queue behind the bytes in flight; session
 * 59). The copies are marked
 * evict-first in L2: read once a token, they are not to evict what every
 * block reads again. Warps 0-7 consume, a layer
 * being:
 *
 *   qkv   wait for every down row of the layer before; x and its RMS norm in
 *         registers (a thread holds the 16 elements its chunks meet); q, k,
 *         v rows, R a stage
 *   attn  (kv head, split of 16 positions' runs) items, one a block: its
 *         first tile of 64 cached K / V rows copied to shared memory at the
 *         layer's start (they depend on nothing of this token), then once
 *         its head's q, k and v rows are there: rope on q (and in the split
 *         holding the position on k, written to the cache with v), a tile at
 *         a time scores, an online softmax and P x V, to a partial; then each
 *         of a head's 16 splits merges 32 of its dims from the 16 partials
 *   o     wait for the 128 merges; x += Wo . attn (the x added to is the one
 *         q / k / v read, kept in shared memory; down's, the one gate / up read)
 *   gu    wait for every o row; x's second norm; R / 2 gate rows and their
 *         up rows a stage, act_j = silu(g) * u
 *   down  wait for every act; x += Wd . act (BF16 half a row a stage, Q8_0
 *         a row, Q4_0 two)
 *
 * A phase's dependency is a done counter (the block's writes, a barrier,
 * one release add); the consumers' thread 0 polls it and data other
 * blocks made is read through L2 (__ldcg). Where a value has few readers
 * (q, k, v rows: a head's 16 splits; a split's partial: its head's mergers)
 * it travels as a tagged word instead, which its readers wait for without a
 * counter (tw below; session 54: the broadcast inputs x, att and act lose
 * as tagged words, 132 blocks spinning on them). Sums run in a fixed order
 * (a thread's chunks, a warp's shuffle tree, the warps in order); which
 * block computes a row depends on timing, not its value. Each matmul's
 * input is made as xprep.cu makes it for the GEMV (the CPU backend's
 * rounding: bf16 for BF16, q8 32-groups for Q8_0 / Q4_0, whose integer sums
 * are scaled as mmv's split rows scale theirs), the norms sum squares in
 * double as rmsnorm.cu does; rope, silu and the f16 stores are the per-op
 * kernels' expressions. */
#include "ops/cuda/cuda_internal.cuh"
#include "ops/cuda/decode_layers.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

namespace {

constexpr int D = DL_DIM, NKV = DL_KV_HEADS, HD = DL_HEAD_DIM, GQA = DL_GQA, FF = DL_FFN;
constexpr int QKV = D + 2 * NKV * HD, KVD = NKV * HD;
constexpr int CW = 8, CT = CW * 32, NT = CT + 32; /* consumer warps; warp CW's lane 0 produces */
constexpr int MAX_STAGES = 10;
/* SPL splits a kv head, their positions in tiles of TILE whose K and V rows sit in shared memory */
constexpr int SPL = 16, TILE = 64, KP = 8; /* K rows 272 bytes apart: row p's 16-byte chunk c in quad (p + c) % 8 */
/* a layer's counters: 0 spare (q / k / v are tagged words), merges, o, gu, down done, 11 spare, 4 claims */
constexpr int NCTR = 20;
static_assert(D == 2 * 8 * CT && FF == 7 * 8 * CT && HD == 128 && GQA * (HD / 2) == CT, "the thread mapping");

struct net {
    float *x;
    const cu_dl_layer *layers;
    const int32_t *table, *seq, *pos;
    const float *inv_freq;
    int L, block_size, max_blocks, neox;
    float eps, scale;
    float *att, *act;
    /* tagged words (tw): q / k / v rows, the splits' partials and their m / s */
    unsigned long long *qf, *pf, *pm;
    unsigned *ctr;
    int rel;  /* signals as release adds (HEARTH_DL_RELEASE, on by default) */
    int infl; /* the producer's copies in flight at most (0: as many as the ring's stages) */
    int sinfl; /* the same while the block's consumers wait between phases (-1: none issued then) */
};

__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
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

/* q8 of a 32-group held by four neighbouring lanes, 8 elements each (v), as xprep.cu's XPREP_Q8 makes it
 * (warp_q8_group's bits: the same max, fmaxf being exact): the lane's codes packed in q, the group's f16 d;
 * returns the sum of the lane's codes. Every lane of the warp calls it. */
__device__ __forceinline__ int q8_of8(const float *v, uint32_t *q, float &d) {
    float amax = fabsf(v[0]);
#pragma unroll
    for (int i = 1; i < 8; i++) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    d = __half2float(__float2half_rn(amax / 127.0f));
    int sum = 0;
    q[0] = q[1] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int c = q8_sat(v[i] * id);
        sum += c;
        q[i / 4] |= (uint32_t)(c & 0xff) << (8 * (i % 4));
    }
    return sum;
}

/* A weight type's rows as the kernel reads them. A stage holds R rows of a 4096-wide matrix (q, k, v, o; a
 * gate / up unit is R / 2 gate rows, then the R / 2 up rows) and DR rows of down over DS stages.
 *
 * BF16 (rows as stored): a thread holds x's chunks of 8 consecutive elements (chunk c: elements 8c ..),
 * t and t + 256 of a 4096-wide row, t + 256 j of down's, rounded to bf16 as xprep.cu rounds them; dot
 * adds a row's chunk c times x. */
template <int QT> struct dlf;
template <> struct dlf<HEARTH_DT_BF16> {
    static constexpr int STG = 16384, R = 2, DR = 1, DS = 2;
    static __host__ __device__ constexpr size_t row_bytes(int k) { return 2 * (size_t)k; }
    struct X {
        float v[8];
    };
    static __device__ __forceinline__ void prep(const float *v, X &x) {
#pragma unroll
        for (int e = 0; e < 8; e++) x.v[e] = __bfloat162float(__float2bfloat16_rn(v[e]));
    }
    static __device__ __forceinline__ float dot(const uint8_t *row, int c, int, const X &x, float a) {
        return dot8(*(const uint4 *)(row + 16 * c), x.v, a);
    }
};
/* Q8_0 and Q4_0 rows split at load (split_rows.cu: the blocks' codes, then their f16 scales). x is made
 * into xprep.cu's q8 32-groups (xb) through shared memory, and a thread takes whole blocks: block t % 128
 * of rows 2p + t / 128 (p < R / 2) of a 4096-wide stage, blocks t and t + 256 of down's rows. dot adds
 * block b of a row (nb blocks) times x's group: the integer sum scaled as mmv scales a split row's,
 * fmaf(d * dx, sum, acc). */
struct xb {
    uint32_t q[8]; /* the group's codes */
    float d;
    int off; /* 8 x the codes' sum: Q4_0's nibbles' offset */
};
template <> struct dlf<HEARTH_DT_Q8_0> {
    static constexpr int STG = 4 * 4352, R = 4, DR = 1, DS = 1;
    static __host__ __device__ constexpr size_t row_bytes(int k) { return (size_t)k + (size_t)k / 16; }
    typedef xb X;
    static __device__ __forceinline__ float dot(const uint8_t *row, int b, int nb, const xb &x, float a) {
        const uint4 w0 = *(const uint4 *)(row + 32 * b), w1 = *(const uint4 *)(row + 32 * b + 16);
        const uint32_t w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = __dp4a((int)w[i], (int)x.q[i], s);
        return fmaf(h2f(*(const uint16_t *)(row + 32 * nb + 2 * b)) * x.d, (float)s, a);
    }
};
template <> struct dlf<HEARTH_DT_Q4_0> { /* a block's byte i: element i in the low nibble, i + 16 the high */
    static constexpr int STG = 8 * 2304, R = 8, DR = 2, DS = 1;
    static __host__ __device__ constexpr size_t row_bytes(int k) { return (size_t)k / 2 + (size_t)k / 16; }
    typedef xb X;
    static __device__ __forceinline__ float dot(const uint8_t *row, int b, int nb, const xb &x, float a) {
        const uint4 v = *(const uint4 *)(row + 16 * b);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s = __dp4a((int)(w[i] & 0x0F0F0F0Fu), (int)x.q[i], s);
            s = __dp4a((int)((w[i] >> 4) & 0x0F0F0F0Fu), (int)x.q[4 + i], s);
        }
        return fmaf(h2f(*(const uint16_t *)(row + 16 * nb + 2 * b)) * x.d, (float)(s - x.off), a);
    }
};

/* x's q8 groups in shared memory, for K elements */
template <int K> struct xq_smem {
    __align__(16) int8_t q[K];
    float d[K / 32];
    int off[K / 32];
};
/* chunk c of x (8 values, v; four lanes a group) into xs as xprep.cu's q8 */
template <int K> __device__ __forceinline__ void xq_put(const float *v, int c, xq_smem<K> &xs) {
    uint32_t q[2];
    float d;
    int sum = q8_of8(v, q, d);
    *(uint2 *)(xs.q + 8 * c) = make_uint2(q[0], q[1]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((threadIdx.x & 3) == 0) xs.d[c / 4] = d, xs.off[c / 4] = 8 * sum;
}
template <int K> __device__ __forceinline__ xb xq_get(const xq_smem<K> &xs, int b) {
    const uint4 a = *(const uint4 *)(xs.q + 32 * b), c = *(const uint4 *)(xs.q + 32 * b + 16);
    return xb{{a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w}, xs.d[b], xs.off[b]};
}

__device__ __forceinline__ void cbar() { asm volatile("bar.sync 1, %0;" ::"r"(CT) : "memory"); }
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void wait_ge(const unsigned *p, unsigned n) {
    if (threadIdx.x == 0)
        while (ld_acquire(p) < n) __nanosleep(20);
    cbar();
}
/* the consumers' writes before it, then one add for the block: a fence and the add (rel 0), or the add as
 * a release (1), which orders the writes the barrier ordered before it as the fence does; 2 (the
 * measurement build only) a relaxed add, which orders nothing: what the ordering costs, not a result */
__device__ __forceinline__ void signal(unsigned *p, unsigned n, int rel) {
    cbar();
    if (threadIdx.x == 0) {
#ifdef HEARTH_DL_STAMPS
        if (rel == 2) {
            atomicAdd(p, n);
            return;
        }
#endif
        if (rel) {
            asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(n) : "memory");
        } else {
            __threadfence(); /* cumulative: the writes the barrier ordered before it */
            atomicAdd(p, n);
        }
    }
}

/* Tagged words (NCCL's LL protocol): a value another block makes travels with its layer's tag, l + 1, in one
 * 8-byte word (the value's bits low, the tag high), which is stored and loaded whole. A reader spins on the
 * words it needs until each carries the tag: no fence, no counter, no load after the wait. The words are
 * zeroed before each launch, and a buffer's tag only grows within one. */
typedef unsigned long long tw;
__device__ __forceinline__ tw tw_of(float v, unsigned tag) { return (tw)tag << 32 | __float_as_uint(v); }
__device__ __forceinline__ bool tw_ok(tw w, unsigned tag) { return (unsigned)(w >> 32) >= tag; }
__device__ __forceinline__ float tw_val(tw w) { return __uint_as_float((unsigned)w); }
__device__ __forceinline__ void st_tw(tw *p, float v, unsigned tag) {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(tw_of(v, tag)) : "memory");
}
/* two words, p 16-byte aligned */
__device__ __forceinline__ void st_tw2(tw *p, float a, float b, unsigned tag) {
    asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" ::"l"(p), "l"(tw_of(a, tag)), "l"(tw_of(b, tag))
                 : "memory");
}
__device__ __forceinline__ tw ld_tw(const tw *p) {
    tw w;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    return w;
}
__device__ __forceinline__ void ld_tw2(const tw *p, tw &a, tw &b) {
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
/* the value at p once it carries tag */
__device__ __forceinline__ float wait_tw(const tw *p, unsigned tag) {
    tw w;
    while (!tw_ok(w = ld_tw(p), tag)) __nanosleep(32);
    return tw_val(w);
}
/* the values at p and q once both carry tag (both loads in flight at once) */
__device__ __forceinline__ void wait_tw2(const tw *p, const tw *q, unsigned tag, float &a, float &b) {
    tw u, v;
    while (u = ld_tw(p), v = ld_tw(q), !(tw_ok(u, tag) && tw_ok(v, tag))) __nanosleep(32);
    a = tw_val(u), b = tw_val(v);
}
/* HEARTH_DL_STAMPS (a measurement build only, `make bench-stamps`): thread 0 of each block's consumers
 * records %globaltimer at a layer's steps (ST_*), the producer when it claims a phase's first unit and
 * puts its end; the last launch's are kept, cu_dl_stamps_print sums them up (bench_model prints them). */
enum {
    ST_QKV_WAIT, ST_QKV_X, ST_QKV_MM, ST_QKV_SIG, ST_ATT_WAIT, ST_ATT_IN, ST_ATT_SC, ST_ATT_SM, ST_ATT_PART,
    ST_MRG_IN, ST_ATT_DONE, ST_O_WAIT, ST_O_X, ST_O_MM, ST_O_SIG, ST_GU_WAIT, ST_GU_X, ST_GU_MM, ST_GU_SIG,
    ST_DN_WAIT, ST_DN_X, ST_DN_MM, ST_DN_SIG,
    ST_PROD, /* + 2 ph: phase ph's first claim, + 2 ph + 1 its end */
    ST_N = ST_PROD + 8
};
#ifdef HEARTH_DL_STAMPS
constexpr int ST_L = 32, ST_B = 160;
__device__ unsigned long long g_dl_st[ST_L][ST_B][ST_N];
__device__ int g_dl_shape[2]; /* grid, layers */
__device__ __forceinline__ void stamp(int l, int i) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (l < ST_L && blockIdx.x < ST_B) g_dl_st[l][blockIdx.x][i] = t;
}
#else
__device__ __forceinline__ void stamp(int, int) {}
#endif

/* position p of the sequence, kv head h: its f16 row in layer l's pool */
__device__ __forceinline__ size_t kv_row(const net &n, int p, int h) {
    const int blk = n.table[(size_t)n.seq[0] * n.max_blocks + p / n.block_size];
    return ((size_t)blk * n.block_size + p % n.block_size) * KVD + (size_t)h * HD;
}

struct ring {
    int S, stg; /* stages, bytes a stage */
    uint32_t base, full, empty;
    unsigned c; /* stages so far: stage c % S, its use c / S */
    int *meta;  /* [S]: the unit a stage holds, -1 for a phase's end */
    volatile int *sw; /* 1 while the consumers are between a phase's last rows and the next phase's input */
    __device__ const uint8_t *take(uint8_t *sm) {
        mbar_wait(full + 8 * (c % S), (c / S) & 1);
        return sm + (size_t)(c % S) * stg;
    }
    __device__ void give() { /* the warp's reads of the stage are done */
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(empty + 8 * (c % S));
        c++;
    }
};

/* A matmul phase in units: R rows of q | k | v (never two matrices') or of o, R / 2 gate rows and their up
 * rows, DR rows of down (DS stages); rows_of: the sums a unit makes. Units are claimed one at a time, at
 * most ucap a block a phase (twice its share, and two): what rr holds. */
template <int QT> __host__ __device__ constexpr unsigned units_of(int ph) {
    return ph == 0 ? QKV / dlf<QT>::R : ph == 1 ? D / dlf<QT>::R : ph == 2 ? FF / (dlf<QT>::R / 2) : D / dlf<QT>::DR;
}
template <int QT> __host__ __device__ constexpr int rows_of(int ph) { return ph == 3 ? dlf<QT>::DR : dlf<QT>::R; }
template <int QT> __host__ __device__ constexpr unsigned ucap(int ph, unsigned grid) {
    return 2 * ((units_of<QT>(ph) + grid - 1) / grid) + 2;
}

template <int QT> __device__ void produce(const net &n, ring &r) {
    using F = dlf<QT>;
    constexpr size_t RB = F::row_bytes(D), RF = F::row_bytes(FF);
    const uint64_t once = l2_evict_first();
    auto put = [&](const void *src, const void *src2, uint32_t bytes, int unit) { /* bytes 0: the phase's end */
        const uint32_t st = r.c % r.S, use = r.c / r.S;
        if (use > 0) mbar_wait(r.empty + 8 * st, (use - 1) & 1);
        /* while the consumers wait between phases, fewer copies in flight (sinfl; -1: none issued): the waits
         * are L2 round trips (counts, x, q / k / v, partials), which queue behind the stream's bytes in flight.
         * The flag orders nothing: a stale read only moves one copy's issue. */
        if (n.sinfl < 0)
            while (*r.sw) __nanosleep(64);
        const int cap = *r.sw ? n.sinfl : n.infl;
        /* the copy cap back has landed (cap < S: that stage's last use, so its parity names its phase; at S or
         * more the free stage is the cap) */
        if (cap > 0 && cap < r.S && r.c >= (unsigned)cap) {
            const unsigned b = r.c - cap;
            mbar_wait(r.full + 8 * (b % r.S), (b / r.S) & 1);
        }
        r.meta[st] = unit;
        if (bytes) {
            mbar_expect_tx(r.full + 8 * st, src2 ? 2 * bytes : bytes);
            bulk_load_once(r.base + st * r.stg, src, bytes, r.full + 8 * st, once);
            if (src2) bulk_load_once(r.base + st * r.stg + bytes, src2, bytes, r.full + 8 * st, once);
        } else {
            mbar_arrive(r.full + 8 * st);
        }
        r.c++;
    };
    for (int l = 0; l < n.L; l++) {
        const cu_dl_layer &w = n.layers[l];
        for (int ph = 0; ph < 4; ph++) {
            auto emit = [&](unsigned u) {
                if (ph == 0) {
                    const size_t row = (size_t)F::R * u;
                    const uint8_t *m = row < D ? w.wq + row * RB
                                       : row < D + KVD ? w.wk + (row - D) * RB
                                                       : w.wv + (row - D - KVD) * RB;
                    put(m, nullptr, F::R * RB, (int)u);
                } else if (ph == 1) {
                    put(w.wo + (size_t)u * F::R * RB, nullptr, F::R * RB, (int)u);
                } else if (ph == 2) {
                    const size_t at = (size_t)u * (F::R / 2) * RB;
                    put(w.wg + at, w.wu + at, F::R / 2 * RB, (int)u);
                } else {
                    for (int hh = 0; hh < F::DS; hh++)
                        put(w.wd + (size_t)u * F::DR * RF + hh * (F::DR * RF / F::DS), nullptr, F::DR * RF / F::DS,
                            (int)u);
                }
            };
            stamp(l, ST_PROD + 2 * ph);
            unsigned *claim = n.ctr + l * NCTR + 16 + ph, got = 0, next = atomicAdd(claim, 1u);
            const unsigned nu = units_of<QT>(ph), umax = ucap<QT>(ph, gridDim.x);
            while (next < nu) {
                const unsigned u = next;
                next = ++got < umax ? atomicAdd(claim, 1u) : nu; /* in flight while u's copy is issued */
                emit(u);
            }
            put(nullptr, nullptr, 0, -1);
            stamp(l, ST_PROD + 2 * ph + 1);
        }
    }
}

/* a norm's weights at a thread's chunks t and t + 256, loaded before the wait for x (they depend on
 * nothing of this token, and their load would be one more round trip after it) */
struct nw16 {
    float v[2][8];
};
__device__ __forceinline__ nw16 load_nw(const float *nw) {
    nw16 r;
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int e = 0; e < 8; e++) r.v[k][e] = __ldg(nw + 8 * (threadIdx.x + k * CT) + e);
    return r;
}

/* x's chunks t and t + 256 (what a thread's chunks of a 4096-wide row meet), RMS-normed by nw if given,
 * prepared for the weights' type (the quantized through xs); with keep, x as read into keep too (the residual
 * the phase after adds to, read there from shared memory instead of L2) */
template <int QT, int KX>
__device__ void load_x(const float *x, const nw16 *nw, float eps, typename dlf<QT>::X (&xq)[2], double *red,
                       xq_smem<KX> &xs, float *keep = nullptr) {
    const int t = threadIdx.x;
    float xr[2][8];
    ld8(x + 8 * t, xr[0]), ld8(x + 8 * (t + CT), xr[1]);
    if (keep)
#pragma unroll
        for (int k = 0; k < 2; k++) {
            float4 *d = (float4 *)(keep + 8 * (t + k * CT));
            d[0] = make_float4(xr[k][0], xr[k][1], xr[k][2], xr[k][3]);
            d[1] = make_float4(xr[k][4], xr[k][5], xr[k][6], xr[k][7]);
        }
    if (nw) {
        double ss = 0;
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int e = 0; e < 8; e++) ss += (double)(xr[k][e] * xr[k][e]);
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if ((t & 31) == 0) red[t >> 5] = ss;
        cbar();
        double tot = 0;
#pragma unroll
        for (int w = 0; w < CW; w++) tot += red[w];
        const float inv = 1.0f / sqrtf((float)(tot / D) + eps);
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int e = 0; e < 8; e++) xr[k][e] = xr[k][e] * inv * nw->v[k][e];
        cbar(); /* red is free again */
    }
    if constexpr (QT == HEARTH_DT_BF16) {
        dlf<QT>::prep(xr[0], xq[0]), dlf<QT>::prep(xr[1], xq[1]);
    } else {
        xq_put(xr[0], t, xs), xq_put(xr[1], t + CT, xs);
        cbar();
        xq[0] = xq_get(xs, t & 127);
        cbar(); /* xs is free again */
    }
}

/* The warp's sums of R values a lane (R a power of two), halving the values at each of the first log2 R
 * steps: the lane ends with the sum of value `row`, as do the 32 / R lanes beside it. */
template <int R> __device__ __forceinline__ float rows_sum(float (&a)[R], int &row) {
    const int lane = threadIdx.x & 31;
    row = 0;
#pragma unroll
    for (int n = R, o = 16; n > 1; n >>= 1, o >>= 1) {
        const bool hi = lane & o;
#pragma unroll
        for (int i = 0; i < n / 2; i++) {
            const float keep = hi ? a[i + n / 2] : a[i], send = hi ? a[i] : a[i + n / 2];
            a[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
        if (hi) row += n / 2;
    }
    float v = a[0];
#pragma unroll
    for (int o = 16 / R; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* the units this block gets of a 4096-wide matmul: unit k's R rows, each warp's share, to
 * rr[warp * rmax + R k + i] (the quantized types: warps 0-3 the even rows, 4-7 the odd), the unit to
 * units[k]; returns how many */
template <int QT>
__device__ int gemv4096(const typename dlf<QT>::X (&x)[2], ring &r, uint8_t *sm, float *rr, int rmax, int *units) {
    using F = dlf<QT>;
    constexpr size_t RB = F::row_bytes(D);
    constexpr int P = QT == HEARTH_DT_BF16 ? F::R : F::R / 2; /* a thread's rows a stage */
    const int t = threadIdx.x, w = t >> 5, h = t >> 7;
    int k = 0;
    for (;; k++) {
        const uint8_t *s = r.take(sm);
        const int u = r.meta[r.c % r.S];
        if (u < 0) {
            r.give();
            break;
        }
        float a[P];
#pragma unroll
        for (int i = 0; i < P; i++) {
            if constexpr (QT == HEARTH_DT_BF16)
                a[i] = F::dot(s + i * RB, t + CT, D / 8, x[1], F::dot(s + i * RB, t, D / 8, x[0], 0.0f));
            else
                a[i] = F::dot(s + (2 * i + h) * RB, t & 127, D / 32, x[0], 0.0f);
        }
        r.give();
        int row;
        const float v = rows_sum<P>(a, row);
        if ((t & (32 / P - 1)) == 0) rr[w * rmax + F::R * k + (QT == HEARTH_DT_BF16 ? row : 2 * row + h)] = v;
        if (t == 0) units[k] = u;
    }
    cbar();
    return k;
}
/* down: DR rows a unit over DS stages, against a thread's 7 chunks of act (t + 256 j; the quantized
 * types: its blocks t and t + 256) */
template <int QT> constexpr int nxa = QT == HEARTH_DT_BF16 ? 7 : 2; /* x's pieces a thread holds for down */
template <int QT>
__device__ int gemv_down(const typename dlf<QT>::X (&xa)[nxa<QT>], ring &r, uint8_t *sm, float *rr, int rmax,
                         int *units) {
    using F = dlf<QT>;
    constexpr size_t RF = F::row_bytes(FF);
    constexpr int NCH = FF / 8, PER = NCH / F::DS; /* chunks a row, a stage */
    const int t = threadIdx.x;
    int k = 0;
    for (;; k++) {
        float a[F::DR] = {};
        int u = 0;
        for (int hh = 0; hh < F::DS; hh++) {
            const uint8_t *s = r.take(sm);
            u = r.meta[r.c % r.S];
            if (u < 0) break;
            if constexpr (QT == HEARTH_DT_BF16) {
#pragma unroll
                for (int j = 0; j < 7; j++) {
                    const int at = t + j * CT - hh * PER;
                    if (F::DS == 1 || (unsigned)at < (unsigned)PER)
#pragma unroll
                        for (int i = 0; i < F::DR; i++) a[i] = F::dot(s + i * RF, at, NCH, xa[j], a[i]);
                }
            } else {
#pragma unroll
                for (int i = 0; i < F::DR; i++) {
                    a[i] = F::dot(s + i * RF, t, FF / 32, xa[0], a[i]);
                    if (t + CT < FF / 32) a[i] = F::dot(s + i * RF, t + CT, FF / 32, xa[1], a[i]);
                }
            }
            r.give();
        }
        if (u < 0) {
            r.give();
            break;
        }
        int row;
        const float v = rows_sum<F::DR>(a, row);
        if ((t & (32 / F::DR - 1)) == 0) rr[(t >> 5) * rmax + F::DR * k + row] = v;
        if (t == 0) units[k] = u;
    }
    cbar();
    return k;
}
/* row i's sum over warps w0 .. w0 + nw - 1, in order */
__device__ __forceinline__ float row_sum(const float *rr, int rmax, int i, int w0 = 0, int nw = CW) {
    float s = 0;
    for (int w = w0; w < w0 + nw; w++) s += rr[w * rmax + i];
    return s;
}

struct attn_smem {
    float q[GQA][HD], sc[GQA][TILE], m[GQA], s[GQA], alpha[GQA]; /* per head: running max and sum, rescale */
    int last;
    __align__(16) __half k[TILE][HD + KP], v[TILE][HD], knew[HD], vnew[HD]; /* K's rows padded: see the scores */
};
/* the scores' sums of four 32-dim slices, [slice][head][position] (the quantized types' xs, free during the
 * attention, holds them) */
constexpr int PS = 4 * GQA * TILE;
static_assert(sizeof(xq_smem<D>) >= PS * sizeof(float), "the scores' slices fit in xs");
__device__ __forceinline__ void split_range(const net &n, int item, int &p0, int &p1) {
    const int ctx = n.pos[0] + 1, per = (ctx + SPL - 1) / SPL;
    p0 = (item % SPL) * per, p1 = min(ctx, p0 + per);
}
/* cached K and V rows [ts, te) of kv head h, before the new position (they depend on nothing of this
 * token), into the shared tile: one bulk copy a row (256 bytes), thread i < 2 np the K (then V) row i, each
 * adding its bytes to bar's expected count before its copy, so bar's phase cannot end before every copy is
 * counted; tile_wait ends it */
__device__ void tile_load(const net &n, int l, int h, int ts, int te, attn_smem &a, uint32_t bar) {
    const int np = min(te, n.pos[0]) - ts, t = threadIdx.x;
    if (t < 2 * np) {
        const int kv = t >= np, p = t - kv * np;
        mbar_add_tx(bar, HD * 2);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* after the block's own uses of the tile */
        bulk_load(smem_u32(kv ? &a.v[p][0] : &a.k[p][0]),
                  (kv ? n.layers[l].vc : n.layers[l].kc) + kv_row(n, ts + p, h), HD * 2, bar);
    }
}
/* the tile in shared memory: every thread's tile_load behind the barrier, then one arrival, then the phase's
 * end (ph counts the block's tiles; every consumer thread keeps the same count) */
__device__ void tile_wait(uint32_t bar, unsigned &ph) {
    cbar();
    if (threadIdx.x == 0) mbar_arrive(bar);
    mbar_wait(bar, ph & 1), ph++;
}
/* an item's first tile, asked for at the layer's start */
__device__ void kv_prefetch(const net &n, int l, int item, attn_smem &a, uint32_t bar) {
    int p0, p1;
    split_range(n, item, p0, p1);
    tile_load(n, l, item / SPL, p0, min(p1, p0 + TILE), a, bar);
}
__device__ __forceinline__ float2 h2(uint32_t w) { return __half22float2(*(const __half2 *)&w); }

/* one (kv head, split) of layer l's attention; rope pair t % 64 (cosine and sine at the position: cs, sn) */
__device__ void attention(const net &n, int l, int item, attn_smem &a, float cs, float sn, float *ps, uint32_t bar,
                          unsigned &ph) {
    const int t = threadIdx.x, w = t >> 5, lane = t & 31, h = item / SPL, sp = item % SPL, pos = n.pos[0];
    int p0, p1;
    split_range(n, item, p0, p1);
    const int np = max(0, p1 - p0);
    const cu_dl_layer &ly = n.layers[l];
    { /* q with rope, scaled; the new k and v into the cache (and shared memory) by the split holding pos */
        const int i = t >> 6, d = t & 63, ia = n.neox ? d : 2 * d, ib = n.neox ? d + HD / 2 : 2 * d + 1;
        const tw *qh = n.qf + (h * GQA + i) * HD;
        float q0, q1;
        wait_tw2(qh + ia, qh + ib, l + 1, q0, q1);
        rope_rotate_sc(q0, q1, sn, cs);
        a.q[i][ia] = q0 * n.scale, a.q[i][ib] = q1 * n.scale;
        if (np > 0 && p1 == pos + 1) {
            const size_t at = kv_row(n, pos, h);
            if (t < 64) {
                float k0, k1;
                wait_tw2(n.qf + D + h * HD + ia, n.qf + D + h * HD + ib, l + 1, k0, k1);
                rope_rotate_sc(k0, k1, sn, cs);
                const __half h0 = __float2half_rn(k0), h1 = __float2half_rn(k1);
                ly.kc[at + ia] = h0, ly.kc[at + ib] = h1;
                a.knew[ia] = h0, a.knew[ib] = h1;
            } else if (t < 64 + HD) {
                const __half v = __float2half_rn(wait_tw(n.qf + D + KVD + h * HD + t - 64, l + 1));
                ly.vc[at + t - 64] = v;
                a.vnew[t - 64] = v;
            }
        }
        if (t < GQA) a.m[t] = -1e30f, a.s[t] = 0.0f;
    }
    const int i = t >> 6, d = 2 * (t & 63);
    float o0 = 0, o1 = 0, e0 = 0, e1 = 0; /* even and odd positions' chains side by side */
    for (int ts = p0; ts < p1; ts += TILE) { /* the first tile was asked for at the layer's start */
        const int te = min(p1, ts + TILE), nt = te - ts;
        if (ts > p0) tile_load(n, l, h, ts, te, a, bar);
        tile_wait(bar, ph);
        if (pos >= ts && pos < te && t < HD) a.k[pos - ts][t] = a.knew[t], a.v[pos - ts][t] = a.vnew[t];
        cbar();
        if (t == 0 && ts == p0 && item == (int)blockIdx.x) stamp(l, ST_ATT_IN);
        /* scores: a lane a position (lane + 32 (w / 4)), warp w the 32 dims 32 (w % 4) .. + 31 of every head, as
         * two 16-dim parts; q's reads are broadcasts, K's eight rows a quarter-warp meet eight quads of banks
         * (KP). The four slices' sums go to ps and are added in the softmax. */
        if (const int p = lane + 32 * (w >> 2); p < nt) {
            float s[GQA] = {};
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int part = 2 * (w & 3) + hh;
                const uint4 *kr = (const uint4 *)(&a.k[p][0] + 16 * part);
                const uint4 k0 = kr[0], k1 = kr[1];
                const uint32_t kw[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
                float k[16];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float2 f = h2(kw[e]);
                    k[2 * e] = f.x, k[2 * e + 1] = f.y;
                }
#pragma unroll
                for (int g = 0; g < GQA; g++)
#pragma unroll
                    for (int e = 0; e < 4; e++) { /* dims 16 part + 4 e .. + 3: the warp's lanes read the same */
                        const float4 q = *(const float4 *)&a.q[g][16 * part + 4 * e];
                        s[g] = fmaf(q.x, k[4 * e], s[g]), s[g] = fmaf(q.y, k[4 * e + 1], s[g]);
                        s[g] = fmaf(q.z, k[4 * e + 2], s[g]), s[g] = fmaf(q.w, k[4 * e + 3], s[g]);
                    }
            }
#pragma unroll
            for (int g = 0; g < GQA; g++) ps[((w & 3) * GQA + g) * TILE + p] = s[g];
        }
        cbar();
        if (t == 0 && ts == p0 && item == (int)blockIdx.x) stamp(l, ST_ATT_SC);
        if (w < GQA) { /* warp g: head g's softmax, online across tiles */
            float m = -1e30f;
            for (int p = lane; p < nt; p += 32) {
                const float *v = ps + w * TILE + p; /* slice j's sum at v[j GQA TILE] */
                const float sc = ((v[0] + v[GQA * TILE]) + v[2 * GQA * TILE]) + v[3 * GQA * TILE];
                a.sc[w][p] = sc, m = fmaxf(m, sc);
            }
            m = fmaxf(warp_max(m), a.m[w]);
            float s = 0;
            for (int p = lane; p < nt; p += 32) {
                const float e = expf(a.sc[w][p] - m);
                a.sc[w][p] = e, s += e;
            }
            s = warp_sum(s);
            if (lane == 0) {
                const float al = expf(a.m[w] - m);
                a.alpha[w] = al, a.s[w] = a.s[w] * al + s, a.m[w] = m;
            }
        }
        cbar();
        if (t == 0 && ts == p0 && item == (int)blockIdx.x) stamp(l, ST_ATT_SM);
        const float al = a.alpha[i];
        o0 *= al, o1 *= al, e0 *= al, e1 *= al;
        int p = 0;
        for (; p + 3 < nt; p += 4) { /* four positions' scores in one broadcast load; the chains as below */
            const float4 sc = *(const float4 *)&a.sc[i][p];
            const float2 v = h2(*(const uint32_t *)&a.v[p][d]), u = h2(*(const uint32_t *)&a.v[p + 1][d]);
            const float2 v2 = h2(*(const uint32_t *)&a.v[p + 2][d]), u2 = h2(*(const uint32_t *)&a.v[p + 3][d]);
            o0 = fmaf(sc.x, v.x, o0), o1 = fmaf(sc.x, v.y, o1), e0 = fmaf(sc.y, u.x, e0), e1 = fmaf(sc.y, u.y, e1);
            o0 = fmaf(sc.z, v2.x, o0), o1 = fmaf(sc.z, v2.y, o1), e0 = fmaf(sc.w, u2.x, e0), e1 = fmaf(sc.w, u2.y, e1);
        }
        for (; p + 1 < nt; p += 2) {
            const float2 v = h2(*(const uint32_t *)&a.v[p][d]), u = h2(*(const uint32_t *)&a.v[p + 1][d]);
            o0 = fmaf(a.sc[i][p], v.x, o0), o1 = fmaf(a.sc[i][p], v.y, o1);
            e0 = fmaf(a.sc[i][p + 1], u.x, e0), e1 = fmaf(a.sc[i][p + 1], u.y, e1);
        }
        if (p < nt) {
            const float2 v = h2(*(const uint32_t *)&a.v[p][d]);
            o0 = fmaf(a.sc[i][p], v.x, o0), o1 = fmaf(a.sc[i][p], v.y, o1);
        }
        cbar(); /* the tile's buffers are free for the next */
    }
    if (np == 0) { /* an empty split: m and s as set above */
        tile_wait(bar, ph);
        if (t == 0 && item == (int)blockIdx.x) stamp(l, ST_ATT_IN), stamp(l, ST_ATT_SC), stamp(l, ST_ATT_SM);
    }
    const int pi = (h * SPL + sp) * GQA + i;
    st_tw2(n.pf + pi * HD + d, o0 + e0, o1 + e1, l + 1);
    if (d == 0) st_tw2(n.pm + 2 * pi, a.m[i], a.s[i], l + 1);
    if (t == 0 && item == (int)blockIdx.x) stamp(l, ST_ATT_PART);
}

/* item's share of its head's merge: split sp merges the head's GQA x HD dims PER sp .. PER sp + PER - 1, as
 * the one merger did before tagged words (the same order and expressions), in warp 0 from the SPL splits'
 * partials and m / s, which all 256 threads wait for (two words each, threads 0-15 a split's m / s too) and
 * put in a's q and sc, free after the attention */
constexpr int PER = GQA * HD / SPL;
static_assert(PER == 32 && SPL * PER == 2 * CT, "a warp a merge, two words a thread");
__device__ void merge(const net &n, int l, int item, attn_smem &a) {
    const int t = threadIdx.x, h = item / SPL, g0 = (item % SPL) * PER, i = g0 / HD;
    float *po = &a.q[0][0], *ml = &a.sc[0][0]; /* [SPL][PER], [SPL][2] */
    {
        const int s = t >> 4, j = 2 * (t & 15);
        const tw *pp = n.pf + (size_t)(h * SPL + s) * GQA * HD + g0 + j, *pm = n.pm + 2 * ((h * SPL + t) * GQA + i);
        tw o0, o1, m = 0, v = 0;
        for (;;) {
            ld_tw2(pp, o0, o1);
            bool ok = tw_ok(o0, l + 1) && tw_ok(o1, l + 1);
            if (t < SPL) ld_tw2(pm, m, v), ok = ok && tw_ok(m, l + 1) && tw_ok(v, l + 1);
            if (ok) break;
            __nanosleep(32);
        }
        po[s * PER + j] = tw_val(o0), po[s * PER + j + 1] = tw_val(o1);
        if (t < SPL) ml[2 * t] = tw_val(m), ml[2 * t + 1] = tw_val(v);
    }
    cbar();
    if (t == 0 && item == (int)blockIdx.x) stamp(l, ST_MRG_IN);
    if (t < PER) {
        float mx = -1e30f;
#pragma unroll
        for (int s = 0; s < SPL; s++) mx = fmaxf(mx, ml[2 * s]);
        float den = 0, r = 0;
#pragma unroll
        for (int s = 0; s < SPL; s++) {
            const float f = expf(ml[2 * s] - mx);
            den = fmaf(ml[2 * s + 1], f, den), r = fmaf(po[s * PER + t], f, r);
        }
        n.att[h * GQA * HD + g0 + t] = r / den;
    }
    signal(&n.ctr[l * NCTR + 1], 1u, n.rel); /* its barrier: q and sc are free again */
}

template <int QT> __global__ void __launch_bounds__(NT, 1) decode_layers_kernel(net n, int stages, int rmax) {
    using F = dlf<QT>;
    constexpr bool BF = QT == HEARTH_DT_BF16;
    extern __shared__ __align__(128) uint8_t sm[];
    /* the attention's, or (the quantized types) down's input between the layer's attention and the next's
     * first K / V copies */
    constexpr size_t UB = sizeof(attn_smem), XB = BF ? 1 : sizeof(xq_smem<FF>);
    __shared__ __align__(16) uint8_t ubuf[UB > XB ? UB : XB];
    __shared__ uint64_t kvb; /* the K / V tiles' bulk copies complete on it (outside ubuf, which down reuses) */
    attn_smem &as = *reinterpret_cast<attn_smem *>(ubuf);
    __shared__ xq_smem<BF ? 32 : D> xs; /* the quantized types' 4096-wide inputs */
    __shared__ __align__(16) float ps_bf[BF ? PS : 1];           /* BF16's xs is too small for the scores' slices */
    float *ps = BF ? ps_bf : reinterpret_cast<float *>(&xs);
    __shared__ double red[CW];
    __shared__ int meta[MAX_STAGES];
    __shared__ int syncw;
    uint64_t *mb = (uint64_t *)(sm + (size_t)stages * F::STG);
    static_assert(2 * MAX_STAGES * 8 % 16 == 0, "xk after the barriers 16-byte aligned: load_x stores float4");
    float *xk = (float *)(mb + 2 * MAX_STAGES); /* x as q / k / v read it (o's residual), then as gu (down's) */
    float *rr = xk + D;
    int *units = (int *)(rr + CW * rmax);
    ring r = {stages, F::STG, smem_u32(sm), smem_u32(mb), smem_u32(mb + MAX_STAGES), 0u, meta, &syncw};
    if (threadIdx.x == 0) {
        syncw = 0;
        for (int i = 0; i < stages; i++) mbar_init(r.full + 8 * i, 1), mbar_init(r.empty + 8 * i, CW);
        mbar_init(smem_u32(&kvb), 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= CT) { /* the producer streams weights, which the kernel before cannot have written */
        if (threadIdx.x == CT) produce<QT>(n, r);
        return;
    }
    pdl_wait();
    const int t = threadIdx.x;
    typename F::X xr[2];
    float sn, cs;
    sincosf((float)n.pos[0] * n.inv_freq[t & 63], &sn, &cs); /* rope_rotate's angle */
    constexpr int R = F::R, G = R / 2, DR = F::DR;
    /* a 4096-wide matmul's row i: its sums from every warp (BF16), or from the half that took it */
    constexpr int NW = BF ? CW : CW / 2;
    auto W0 = [](int i) { return BF ? 0 : CW / 2 * (i & 1); };
    const uint32_t kbar = smem_u32(&kvb);
    unsigned kph = 0; /* the K / V tiles so far */
    for (int l = 0; l < n.L; l++) {
        unsigned *c = n.ctr + l * NCTR;
        const cu_dl_layer &ly = n.layers[l];
        const bool one = gridDim.x >= NKV * SPL && (int)blockIdx.x < NKV * SPL; /* this block's one item */
        if (one) kv_prefetch(n, l, blockIdx.x, as, kbar);
        /* q, k, v */
        nw16 nw = load_nw(ly.n1);
        if (l > 0) wait_ge(n.ctr + (l - 1) * NCTR + 4, D);
        if (t == 0) stamp(l, ST_QKV_WAIT);
        load_x<QT>(n.x, &nw, n.eps, xr, red, xs, xk);
        if (t == 0) stamp(l, ST_QKV_X), *r.sw = 0;
        int k = gemv4096<QT>(xr, r, sm, rr, rmax, units);
        if (t == 0) stamp(l, ST_QKV_MM), *r.sw = 1;
        for (int i = t; i < R * k; i += CT)
            st_tw(n.qf + R * units[i / R] + i % R, row_sum(rr, rmax, i, W0(i), NW), l + 1);
        cbar(); /* rr is free again */
        if (t == 0) stamp(l, ST_QKV_SIG), stamp(l, ST_ATT_WAIT);
        /* the attention */
        for (int item = blockIdx.x; item < NKV * SPL; item += gridDim.x) {
            if (!one) kv_prefetch(n, l, item, as, kbar);
            if (t == 0 && item == (int)blockIdx.x) stamp(l, ST_ATT_WAIT);
            attention(n, l, item, as, cs, sn, ps, kbar, kph); /* waits for its head's q, k, v */
            cbar();
        }
        /* the merges after all of the block's partials: a split's merge waits for the others' partials */
        for (int item = blockIdx.x; item < NKV * SPL; item += gridDim.x) merge(n, l, item, as);
        if (t == 0 && (int)blockIdx.x >= NKV * SPL) /* no item: its attention steps are its end */
            stamp(l, ST_ATT_IN), stamp(l, ST_ATT_SC), stamp(l, ST_ATT_SM), stamp(l, ST_ATT_PART), stamp(l, ST_MRG_IN);
        if (t == 0) stamp(l, ST_ATT_DONE);
        /* o, into the residual */
        wait_ge(c + 1, NKV * SPL); /* every split's share of the merges */
        if (t == 0) stamp(l, ST_O_WAIT);
        load_x<QT>(n.att, nullptr, n.eps, xr, red, xs);
        if (t == 0) stamp(l, ST_O_X), *r.sw = 0;
        k = gemv4096<QT>(xr, r, sm, rr, rmax, units);
        if (t == 0) stamp(l, ST_O_MM), *r.sw = 1;
        for (int i = t; i < R * k; i += CT) {
            const int row = R * units[i / R] + i % R;
            n.x[row] = xk[row] + row_sum(rr, rmax, i, W0(i), NW);
        }
        signal(c + 2, R * k, n.rel);
        if (t == 0) stamp(l, ST_O_SIG);
        /* gate and up (a unit's G gate rows, then their up rows), silu(g) * u as swiglu.cu computes it */
        nw = load_nw(ly.n2);
        wait_ge(c + 2, D);
        if (t == 0) stamp(l, ST_GU_WAIT);
        load_x<QT>(n.x, &nw, n.eps, xr, red, xs, xk);
        if (t == 0) stamp(l, ST_GU_X), *r.sw = 0;
        k = gemv4096<QT>(xr, r, sm, rr, rmax, units);
        if (t == 0) stamp(l, ST_GU_MM), *r.sw = 1;
        for (int j = t; j < G * k; j += CT) {
            const int at = R * (j / G) + j % G;
            const float g = row_sum(rr, rmax, at, W0(at), NW), u = row_sum(rr, rmax, at + G, W0(at + G), NW);
            n.act[G * units[j / G] + j % G] = g / (1.0f + expf(-g)) * u;
        }
        signal(c + 3, G * k, n.rel);
        if (t == 0) stamp(l, ST_GU_SIG);
        /* down, into the residual: a thread's 7 chunks of act (t + 256 j) */
        wait_ge(c + 3, FF);
        if (t == 0) stamp(l, ST_DN_WAIT);
        typename F::X xa[nxa<QT>];
        float av[7][8]; /* the thread's 14 loads in flight at once, then their prep */
#pragma unroll
        for (int j = 0; j < 7; j++) ld8(n.act + 8 * (t + j * CT), av[j]);
        if constexpr (BF) {
#pragma unroll
            for (int j = 0; j < 7; j++) F::prep(av[j], xa[j]);
        } else {
            xq_smem<FF> &xd = *reinterpret_cast<xq_smem<FF> *>(ubuf);
#pragma unroll
            for (int j = 0; j < 7; j++) xq_put(av[j], t + j * CT, xd);
            cbar();
            xa[0] = xq_get(xd, t);
            xa[1] = t + CT < FF / 32 ? xq_get(xd, t + CT) : xb{};
            cbar(); /* the next layer's K / V copies may take the buffer */
        }
        if (t == 0) stamp(l, ST_DN_X), *r.sw = 0;
        k = gemv_down<QT>(xa, r, sm, rr, rmax, units);
        if (t == 0) stamp(l, ST_DN_MM), *r.sw = 1;
        for (int i = t; i < DR * k; i += CT) {
            const int row = DR * units[i / DR] + i % DR;
            n.x[row] = xk[row] + row_sum(rr, rmax, i);
        }
        signal(c + 4, DR * k, n.rel);
        if (t == 0) stamp(l, ST_DN_SIG);
    }
#ifdef HEARTH_DL_STAMPS
    if (blockIdx.x == 0 && t == 0) g_dl_shape[0] = gridDim.x, g_dl_shape[1] = n.L;
#endif
    pdl_launch(); /* the next kernel waits for the whole grid in its pdl_wait */
}

/* the most sums of a phase a block keeps (rr's floats a warp) */
template <int QT> int rmax_of(int grid) {
    int m = 0;
    for (int ph = 0; ph < 4; ph++) m = std::max(m, (int)ucap<QT>(ph, (unsigned)grid) * rows_of<QT>(ph));
    return m;
}

template <int QT> int plan_of(const cu_launch *L, cu_dl_plan_t *plan) {
    static unsigned long long done;
    static int gcap = -1; /* HEARTH_DL_GRID=N: at most N blocks (what fewer multiprocessors cost, a measurement) */
    if (gcap < 0) {
        const char *e = getenv("HEARTH_DL_GRID");
        gcap = e && atoi(e) > 0 ? atoi(e) : 1 << 30;
    }
    const int grid = std::min(L->n_sm, gcap), rmax = rmax_of<QT>(grid);
    cudaFuncAttributes fa;
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaFuncGetAttributes(&fa, decode_layers_kernel<QT>) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return 0;
    const int fixed = 2 * MAX_STAGES * 8 + D * 4 + CW * rmax * 4 + rmax * 4;
    static int cap = -1; /* HEARTH_DL_STAGES=N: at most N stages (measurements of the ring's depth) */
    if (cap < 0) {
        const char *e = getenv("HEARTH_DL_STAGES");
        cap = e && atoi(e) > 0 ? atoi(e) : MAX_STAGES;
    }
    const int stages = std::min(std::min(cap, MAX_STAGES), (optin - (int)fa.sharedSizeBytes - fixed) / dlf<QT>::STG);
    if (stages < 4 || grid < 1) return 0;
    plan->type = QT, plan->grid = grid, plan->rmax = rmax, plan->stages = stages;
    plan->smem = stages * dlf<QT>::STG + fixed;
    cu_smem_setup(L, decode_layers_kernel<QT>, plan->smem, true, &done);
    int fit = 0;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, decode_layers_kernel<QT>, NT, plan->smem) ==
               cudaSuccess &&
           fit >= 1;
}

} // namespace

static bool cu_dl_stamps_build() {
#ifdef HEARTH_DL_STAMPS
    return true;
#else
    return false;
#endif
}

/* the tagged words, after the counters: q / k / v, the partials, their m / s */
constexpr size_t NTW = (size_t)QKV + (size_t)NKV * SPL * GQA * (HD + 2);
size_t cu_dl_scratch_bytes(int n_layers) {
    return sizeof(unsigned) * (size_t)n_layers * NCTR + sizeof(tw) * NTW + sizeof(float) * (D + FF);
}

int cu_dl_plan(const cu_launch *L, int type, cu_dl_plan_t *plan) {
    switch (type) {
    case HEARTH_DT_BF16: return plan_of<HEARTH_DT_BF16>(L, plan);
    case HEARTH_DT_Q8_0: return plan_of<HEARTH_DT_Q8_0>(L, plan);
    case HEARTH_DT_Q4_0: return plan_of<HEARTH_DT_Q4_0>(L, plan);
    }
    return 0;
}

void cu_decode_layers(const cu_launch *L, const cu_dl_plan_t *plan, const cu_dl_args *a) {
    net n;
    n.x = a->x, n.layers = a->layers, n.table = a->table, n.seq = a->seq, n.pos = a->pos, n.inv_freq = a->inv_freq;
    n.L = a->n_layers, n.block_size = a->block_size, n.max_blocks = a->max_blocks, n.neox = a->neox;
    n.eps = a->eps, n.scale = a->scale;
    n.ctr = (unsigned *)a->scratch;
    static int rel = -1; /* HEARTH_DL_RELEASE=0: a fence and an add (s49-run2: 1-1.2% slower) */
    if (rel < 0) {
        const char *s = getenv("HEARTH_DL_RELEASE");
        rel = !s ? 1 : atoi(s) == 0 ? 0 : atoi(s) == 2 && cu_dl_stamps_build() ? 2 : 1;
    }
    n.rel = rel;
    /* HEARTH_DL_INFLIGHT=N: at most N copies in flight a block (0: no cap; a measurement knob). 2 by default:
     * on an H100 +1.6% Q4_0, +3.5% Q8_0, +2.7% BF16 against no cap; 3 even with none, 4-6 ~-1% (s56-run3, -run4);
     * 1 starves the larger stages (Q8_0 -7%, BF16 -12% against 2, s57-run1) */
    static int infl = -1;
    if (infl < 0) {
        const char *s = getenv("HEARTH_DL_INFLIGHT");
        infl = s ? std::max(0, atoi(s)) : 2;
    }
    n.infl = infl;
    /* HEARTH_DL_SYNCCAP=N: at most N copies in flight while the block's consumers are between a phase's last
     * rows and the next phase's input (-1: none issued then; 0: no cap). 1 by default for Q8_0 / Q4_0: on an
     * H100 +1.1% / +4.5% against 2 (s59-run2), the waits' round trips shorter with fewer bytes queued; BF16
     * keeps the streaming cap (-0.6% at 1). */
    static const char *sc = getenv("HEARTH_DL_SYNCCAP");
    n.sinfl = sc ? std::max(-1, atoi(sc)) : plan->type == HEARTH_DT_BF16 ? infl : 1;
    static_assert(NCTR * sizeof(unsigned) % 16 == 0, "the tagged words 16-byte aligned");
    n.qf = (tw *)(n.ctr + (size_t)a->n_layers * NCTR);
    n.pf = n.qf + QKV, n.pm = n.pf + (size_t)NKV * SPL * GQA * HD;
    n.att = (float *)(n.pm + (size_t)NKV * SPL * GQA * 2), n.act = n.att + D;
    /* the counters and the tagged words start at 0 (no tag) */
    cu_note(L, cudaMemsetAsync(n.ctr, 0, (char *)n.att - (char *)n.ctr, L->stream));
    /* every block resident at once (one a multiprocessor of the stream's share), or the waits never end */
    auto k = plan->type == HEARTH_DT_Q8_0   ? decode_layers_kernel<HEARTH_DT_Q8_0>
             : plan->type == HEARTH_DT_Q4_0 ? decode_layers_kernel<HEARTH_DT_Q4_0>
                                            : decode_layers_kernel<HEARTH_DT_BF16>;
    cu_launch_k(L, k, dim3(plan->grid), dim3(NT), (size_t)plan->smem, n, plan->stages, plan->rmax);
}

#ifdef HEARTH_DL_STAMPS
#include <stdio.h>
/* The last launch's steps (us from the layer's first block to wake for q, k, v), each the mean over the
 * layers but the first and last of the min, median and max over the blocks. */
extern "C" void cu_dl_stamps_print(void) {
    static unsigned long long h[ST_L][ST_B][ST_N];
    int shape[2];
    if (cudaMemcpyFromSymbol(h, g_dl_st, sizeof h) != cudaSuccess ||
        cudaMemcpyFromSymbol(shape, g_dl_shape, sizeof shape) != cudaSuccess)
        return;
    const int nb = std::min(shape[0], ST_B), nl = std::min(shape[1], ST_L);
    if (nb < 1 || nl < 3) return;
    static const char *names[] = {
        "qkv woke",     "qkv x ready",  "qkv rows done", "qkv signalled", "attn woke",     "attn inputs in",
        "attn scores",  "attn softmax", "attn partial", "merge inputs in", "attn done",
        "o woke",       "o x ready",    "o rows done",   "o signalled",   "gu woke",       "gu x ready",
        "gu rows done", "gu signalled", "down woke",     "down x ready",  "down rows done", "down signalled",
        "prod qkv first", "prod qkv end", "prod o first",
        "prod o end",   "prod gu first", "prod gu end",  "prod down first", "prod down end"};
    static_assert(sizeof names / sizeof *names == ST_N, "a name for every step");
    double acc[ST_N][3] = {}, layer = 0;
    for (int l = 1; l < nl - 1; l++) {
        unsigned long long t0 = ~0ull;
        for (int b = 0; b < nb; b++) t0 = std::min(t0, h[l][b][ST_QKV_WAIT]);
        unsigned long long t1 = ~0ull;
        for (int b = 0; b < nb; b++) t1 = std::min(t1, h[l + 1][b][ST_QKV_WAIT]);
        layer += (double)(t1 - t0) / 1e3;
        for (int i = 0; i < ST_N; i++) {
            double v[ST_B];
            for (int b = 0; b < nb; b++) v[b] = ((double)h[l][b][i] - (double)t0) / 1e3;
            std::sort(v, v + nb);
            acc[i][0] += v[0], acc[i][1] += v[nb / 2], acc[i][2] += v[nb - 1];
        }
    }
    const double k = 1.0 / (nl - 2);
    printf("decode_layers stamps (last launch, %d blocks, layers 1-%d): a layer %.2f us\n", nb, nl - 2, layer * k);
    printf("  %-16s %8s %8s %8s  (us from the layer's first qkv wake)\n", "step", "min", "median", "max");
    for (int i = 0; i < ST_N; i++)
        printf("  %-16s %8.2f %8.2f %8.2f\n", names[i], acc[i][0] * k, acc[i][1] * k, acc[i][2] * k);
}
#endif
