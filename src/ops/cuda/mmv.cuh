/* mmv.cuh - what the GEMV kernels share (mmv.cu: the streamed and staged
 * kernels; mmv_tc.cu: tensor cores for 2..8 rows): the streaming load, the
 * logical rows of a set of matrices (mmv_set) with their stores, and the
 * Q4_K scale unpacking. */
#pragma once
#include "ops/cuda/cuda_internal.cuh"

/* ---- loads ---------------------------------------------------------------- */

__device__ __forceinline__ uint4 ld_stream16(const void *p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Four Q6_K codes less 32 as s8 from lo's low nibbles and hi's bits 4, 5 of each byte: v + 96 < 256
 * carries into no other byte, and flipping its bit 7 leaves v - 32 mod 256 (five instructions;
 * __vsubss4 is emulated in about ten on sm_90). */
__device__ __forceinline__ uint32_t q6k_s8(uint32_t lo, uint32_t hi) {
    return (((lo & 0x0F0F0F0Fu) | (hi & 0x30303030u)) + 0x60606060u) ^ 0x80808080u;
}

/* ---- the set of matrices of one launch ------------------------------------ */

__device__ __forceinline__ int set_rows(const mmv_set &s) { return s.swiglu ? s.n[0] : s.n[0] + s.n[1] + s.n[2]; }

/* Physical row ph (0, or 1 = the up row in swiglu mode) of logical row r. */
__device__ __forceinline__ const uint8_t *set_row(const mmv_set &s, int r, int ph, size_t rb) {
    if (s.swiglu) return (ph ? s.w[1] : s.w[0]) + (size_t)r * rb; /* no dynamic index: set stays in registers */
    if (r < s.n[0]) return s.w[0] + (size_t)r * rb;
    r -= s.n[0];
    if (r < s.n[1]) return s.w[1] + (size_t)r * rb;
    return s.w[2] + (size_t)(r - s.n[1]) * rb;
}

/* y of logical row r, token t (not swiglu). */
__device__ __forceinline__ void set_store(const mmv_set &s, int r, int t, float v) {
    if (r < s.n[0]) {
        s.y[0][(size_t)t * s.n[0] + r] = v;
    } else if (r - s.n[0] < s.n[1]) {
        s.y[1][(size_t)t * s.n[1] + r - s.n[0]] = v;
    } else {
        s.y[2][(size_t)t * s.n[2] + r - s.n[0] - s.n[1]] = v;
    }
}

/* swiglu: gate g and up u of row r, token t. out is written last, so it may
 * alias either raw output. */
__device__ __forceinline__ void swiglu_store(const mmv_set &s, int r, int t, float g, float u) {
    size_t i = (size_t)t * s.n[0] + r;
    if (s.out != s.y[0]) s.y[0][i] = g;
    if (s.out != s.y[1]) s.y[1][i] = u;
    float o = g / (1.0f + expf(-g)) * u;
    s.out[i] = o;
    if (s.prep_kind == XPREP_BF16) ((__nv_bfloat16 *)s.prep)[i] = __float2bfloat16_rn(o);
    else if (s.prep_kind == XPREP_F16) ((__half *)s.prep)[i] = __float2half_rn(o);
}

/* ---- formats ------------------------------------------------------------- */

/* Q4_K unit j (sub-blocks 2j, 2j + 1): scales *sc and mins *m as
 * q4k_scale_min gives them, from the packed bytes as words a = scales[0..3],
 * b = scales[4..7], c = scales[8..11]. Byte k of the word S (M) below is the
 * scale (min) of sub-block k, or of 4 + k for j >= 2; no branch, as j
 * differs between a warp's lanes. */
__device__ __forceinline__ void q4k_unit_scales(uint32_t a, uint32_t b, uint32_t c, int j, int *sc, int *m) {
    const uint32_t S = j < 2 ? a & 0x3F3F3F3Fu : (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
    const uint32_t M = j < 2 ? b & 0x3F3F3F3Fu : ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
    const int sh = 16 * (j & 1);
    sc[0] = (S >> sh) & 0xFF;
    sc[1] = (S >> (sh + 8)) & 0xFF;
    m[0] = (M >> sh) & 0xFF;
    m[1] = (M >> (sh + 8)) & 0xFF;
}

/* Sets a (rows of type ta, rba bytes apart) and b (tb, rbb) of one x (xp,
 * prepared for both) as one launch at T = 1, where both are split rows of a
 * mix that mmv.cu instantiates (Q6_K beside Q4_K, Q8_0 beside Q4_0) and
 * neither would split K: 1 when launched, 0 when the caller must run them
 * apart (cu_mmv each). HEARTH_MMV_TWO=0: always 0 (benchmarks). */
int cu_mmv2(const cu_launch *L, const mmv_set *a, hearth_dtype ta, size_t rba, const mmv_set *b, hearth_dtype tb,
            size_t rbb, const void *xp, int T, int K);
