/* mmv_quant.cuh - the quantized formats of mmv.cu's GEMV kernels: x's q8 /
 * q8_K groups (xq8), each weight type's dot of one block unit with them
 * (qdot: the staged and direct kernels), two Q4_0 / Q8_0 blocks at a time
 * (qdot_pair), and the chunks of split rows (fmt_split: the streamed
 * kernel). Included by mmv.cu only. */
#pragma once
#include "ops/cuda/mmv.cuh"

template <int QT> struct fmt_split;

/* ---- quantized weights ---------------------------------------------------- */

/* x in q8 (xprep.cu): qs [T][K] int8, ds [T][K/32] = (d, sum, s, 0). */
struct xq8 {
    const int8_t *qs;
    const float4 *ds;
    int K;
};

__device__ __forceinline__ void x_group(const xq8 &x, int t, int g, int *v, float4 *ds) {
    const int4 *p = (const int4 *)(x.qs + (size_t)t * x.K + (size_t)g * QK);
    int4 a = p[0], b = p[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    *ds = x.ds[(size_t)t * (x.K / QK) + g];
}

/* acc[r][t] += the dot product of one unit of a block of row r (b[r]: its
 * bytes; sub: which unit of the block; gb: the block's index in the row)
 * with x row t; the R rows share each x load. The integer part is exact and
 * each scaling step is the CPU's fmaf (see ops/cpu/matmul_scalar.c);
 * K-quant blocks are cut in 4 units of 64 elements, each scaled on its own. */
template <int QT, int NT, int R> struct qdot;

/* The integer dot product of 32 4-bit codes (16 bytes: low nibbles are
 * elements 0..15, high nibbles 16..31, as Q4_0/Q4_1 store them) with 32
 * int8 values of x. */
__device__ __forceinline__ int dot_nibbles(const uint32_t *q, const int *v) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s = __dp4a((int)(q[i] & 0x0F0F0F0Fu), v[i], s);
        s = __dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), v[4 + i], s);
    }
    return s;
}

template <int NT, int R> struct qdot<HEARTH_DT_Q4_0, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int sub, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R];
        uint32_t q[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
#pragma unroll
            for (int i = 0; i < 4; i++) q[r][i] = ld32u(b[r] + 2 + 4 * i);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
#pragma unroll
            for (int r = 0; r < R; r++) {
                int s = dot_nibbles(q[r], v);
                s -= 8 * (int)ds.y;
                acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
            }
        }
    }
};

template <int NT, int R> struct qdot<HEARTH_DT_Q4_1, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int sub, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R], m[R];
        uint32_t q[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            m[r] = h2f(ld16(b[r] + 2));
#pragma unroll
            for (int i = 0; i < 4; i++) q[r][i] = ld32u(b[r] + 4 + 4 * i);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
#pragma unroll
            for (int r = 0; r < R; r++) {
                int s = dot_nibbles(q[r], v);
                acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
                acc[r][t] = fmaf(m[r], ds.z, acc[r][t]);
            }
        }
    }
};

/* 32-element blocks as 8 words of codes q (elements 4i.. in word i): acc +=
 * fmaf(d * dx, dot - OFF * sum of x), then (MIN) fmaf(m, x's s). */
template <int NT, int R, int OFF, bool MIN>
__device__ __forceinline__ void q32_words(const uint32_t (*q)[8], const float *d, const float *m, int gb, const xq8 &x,
                                          float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int v[8];
        float4 ds;
        x_group(x, t, gb, v, &ds);
#pragma unroll
        for (int r = 0; r < R; r++) {
            int s = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) s = __dp4a((int)q[r][i], v[i], s);
            if (OFF) s -= OFF * (int)ds.y;
            acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
            if (MIN) acc[r][t] = fmaf(m[r], ds.z, acc[r][t]);
        }
    }
}

template <int NT, int R> struct qdot<HEARTH_DT_Q8_0, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int sub, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
#pragma unroll
            for (int i = 0; i < 8; i++) q[r][i] = ld32u(b[r] + 2 + 4 * i);
        }
        q32_words<NT, R, 0, false>(q, d, nullptr, gb, x, acc);
    }
};

/* acc plus the dot product of a Q4_K unit (sub-blocks 2j, 2j + 1: q, its 32
 * code bytes, low nibbles the first) with x's groups v0, v1 (ds0, ds1: their
 * (d, sum, ...)): integer sums scaled by sc, then the mins by m, in two fmaf
 * steps. */
__device__ __forceinline__ float mins_unit(const uint32_t *lo, const uint32_t *hi, const int *v0, const int *v1,
                                           float4 ds0, float4 ds1, const int *sc, const int *m, float d, float dmin,
                                           float acc) {
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        s0 = __dp4a((int)lo[i], v0[i], s0);
        s1 = __dp4a((int)hi[i], v1[i], s1);
    }
    int s = sc[0] * s0 + sc[1] * s1, mins = m[0] * (int)ds0.y + m[1] * (int)ds1.y;
    acc = fmaf(d * ds0.x, (float)s, acc);
    return fmaf(-(dmin * ds0.x), (float)mins, acc);
}
__device__ __forceinline__ float q4k_unit(const uint32_t *q, const int *v0, const int *v1, float4 ds0, float4 ds1,
                                          const int *sc, const int *m, float d, float dmin, float acc) {
    uint32_t lo[8], hi[8];
#pragma unroll
    for (int i = 0; i < 8; i++) lo[i] = q[i] & 0x0F0F0F0Fu, hi[i] = (q[i] >> 4) & 0x0F0F0F0Fu;
    return mins_unit(lo, hi, v0, v1, ds0, ds1, sc, m, d, dmin, acc);
}

/* The units of R rows (q[r]: their code words) against x's groups g0, g0 + 1
 * of each of its NT rows: the staged (qdot) and split (fmt_split) kernels'
 * shared inner loop. */
template <int NT, int R>
__device__ __forceinline__ void q4k_units(const uint32_t *const *q, const int (*sc)[2], const int (*m)[2],
                                          const float *d, const float *dmin, int g0, const xq8 &x,
                                          float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int v0[8], v1[8];
        float4 ds0, ds1;
        x_group(x, t, g0, v0, &ds0);
        x_group(x, t, g0 + 1, v1, &ds1);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][t] = q4k_unit(q[r], v0, v1, ds0, ds1, sc[r], m[r], d[r], dmin[r], acc[r][t]);
    }
}

/* Q4_K unit j (0..3): sub-blocks 2j (low nibbles of qs[32j..32j+32)) and 2j+1
 * (high nibbles). */
template <int NT, int R> struct qdot<HEARTH_DT_Q4_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int j, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            dmin[r] = h2f(ld16(b[r] + 2));
            q4k_scale_min(b[r] + 4, 2 * j, &sc[r][0], &m[r][0]);
            q4k_scale_min(b[r] + 4, 2 * j + 1, &sc[r][1], &m[r][1]);
#pragma unroll
            for (int i = 0; i < 8; i++) q[r][i] = ld32u(b[r] + 16 + 32 * j + 4 * i);
        }
        const uint32_t *qp[R];
#pragma unroll
        for (int r = 0; r < R; r++) qp[r] = q[r];
        q4k_units<NT, R>(qp, sc, m, d, dmin, gb * 8 + 2 * j, x, acc);
    }
};

/* The integer dot product of a Q6_K unit (groups A and B: va, vb, their 32
 * codes minus 32, 4 a word) with x's groups xa, xb: sums of 16 scaled by sc
 * (A[0..16), A[16..32), B[0..16), B[16..32)); q6k_unit adds it times d * dx
 * (dx: x's scale) to acc in one fmaf step. */
__device__ __forceinline__ int q6k_isum(const int *va, const int *vb, const int *xa, const int *xb, const int *sc) {
    int a0 = 0, a1 = 0, b0 = 0, b1 = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        a0 = __dp4a(va[i], xa[i], a0);
        a1 = __dp4a(va[4 + i], xa[4 + i], a1);
        b0 = __dp4a(vb[i], xb[i], b0);
        b1 = __dp4a(vb[4 + i], xb[4 + i], b1);
    }
    return sc[0] * a0 + sc[1] * a1 + sc[2] * b0 + sc[3] * b1;
}
__device__ __forceinline__ float q6k_unit(const int *va, const int *vb, const int *xa, const int *xb, const int *sc,
                                          float d, float dx, float acc) {
    return fmaf(d * dx, (float)q6k_isum(va, vb, xa, xb, sc), acc);
}

/* The units of R rows against x's groups gA, gB (Q6_K: gA + 2) of each of
 * its NT rows: the staged (qdot) and split (fmt_split) kernels' shared inner
 * loop. */
template <int NT, int R>
__device__ __forceinline__ void q6k_units(const int (*va)[8], const int (*vb)[8], const int (*sc)[4], const float *d,
                                          int gA, int gB, const xq8 &x, float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int xa[8], xb[8];
        float4 dsa, dsb;
        x_group(x, t, gA, xa, &dsa);
        x_group(x, t, gB, xb, &dsb);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][t] = q6k_unit(va[r], vb[r], xa, xb, sc[r], d[r], dsa.x, acc[r][t]);
    }
}

/* Q6_K unit u (0..3): half n = u/2 of the block, groups k = u%2 and k + 2
 * (low / high nibbles of the same 32 ql bytes, the same 32 qh bytes). */
template <int NT, int R> struct qdot<HEARTH_DT_Q6_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        const int n = u >> 1, kk = u & 1;
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r] + 208));
            const uint8_t *ql = b[r] + 64 * n + 32 * kk, *qh = b[r] + 128 + 32 * n;
            const int8_t *scales = (const int8_t *)(b[r] + 192 + 8 * n);
            sc[r][0] = scales[2 * kk];
            sc[r][1] = scales[2 * kk + 1];
            sc[r][2] = scales[2 * kk + 4];
            sc[r][3] = scales[2 * kk + 5];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                uint32_t L = ld32u(ql + 4 * i), H = ld32u(qh + 4 * i);
                va[r][i] = (int)q6k_s8(L, (H >> (2 * kk)) << 4);
                vb[r][i] = (int)q6k_s8(L >> 4, H >> (2 * kk));
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, gb * 8 + 4 * n + kk, gb * 8 + 4 * n + kk + 2, x, acc);
    }
};

/* ---- q5_0, q5_1, iq4_nl, q5_K, q3_K, q2_K, iq4_xs (session 45) ---------
 * Their codes are made int8 words for dp4a; the integer sums and the
 * scaling steps are the CPU's (ops/cpu/matmul_scalar.c), the K-quants cut
 * in units of 64 elements as Q4_K and Q6_K are. */

/* q5_0 (d, qh, qs) and q5_1 (d, m, qh, qs): codes 0..31, q5_0's less 16 through its x sum */
template <int QT, int NT, int R> struct qdot_q5 {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int gb, const xq8 &x, float (*acc)[NT]) {
        constexpr int Q1 = QT == HEARTH_DT_Q5_1, QH = 2 + 2 * Q1;
        float d[R], m[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            m[r] = Q1 ? h2f(ld16(b[r] + 2)) : 0.0f;
            const uint32_t qh = ld32u(b[r] + QH);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint32_t nib = ld32u(b[r] + QH + 4 + 4 * i);
                q[r][i] = q5_codes4(nib & 0x0F0F0F0Fu, qh >> (4 * i));
                q[r][4 + i] = q5_codes4((nib >> 4) & 0x0F0F0F0Fu, qh >> (16 + 4 * i));
            }
        }
        q32_words<NT, R, Q1 ? 0 : 16, Q1>(q, d, m, gb, x, acc);
    }
};
template <int NT, int R> struct qdot<HEARTH_DT_Q5_0, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int, int gb, const xq8 &x, float (*acc)[NT]) {
        qdot_q5<HEARTH_DT_Q5_0, NT, R>::run(b, gb, x, acc);
    }
};
template <int NT, int R> struct qdot<HEARTH_DT_Q5_1, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int, int gb, const xq8 &x, float (*acc)[NT]) {
        qdot_q5<HEARTH_DT_Q5_1, NT, R>::run(b, gb, x, acc);
    }
};

/* iq4_nl (d, qs): the codebook's values as the codes */
template <int NT, int R> struct qdot<HEARTH_DT_IQ4_NL, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int, int gb, const xq8 &x, float (*acc)[NT]) {
        float d[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                iq4_values8(ld32u(b[r] + 2 + 4 * i), &q[r][i], &q[r][4 + i]);
            }
        }
        q32_words<NT, R, 0, false>(q, d, nullptr, gb, x, acc);
    }
};

/* q5_K unit j: Q4_K's unit with bits 2j, 2j + 1 of each qh byte as the codes' fifth bits */
template <int NT, int R> struct qdot<HEARTH_DT_Q5_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int j, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
        uint32_t lo[R][8], hi[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            dmin[r] = h2f(ld16(b[r] + 2));
            q4k_scale_min(b[r] + 4, 2 * j, &sc[r][0], &m[r][0]);
            q4k_scale_min(b[r] + 4, 2 * j + 1, &sc[r][1], &m[r][1]);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t q = ld32u(b[r] + 48 + 32 * j + 4 * i), h = ld32u(b[r] + 16 + 4 * i) >> (2 * j);
                lo[r][i] = (q & 0x0F0F0F0Fu) | ((h & 0x01010101u) << 4);
                hi[r][i] = ((q >> 4) & 0x0F0F0F0Fu) | (((h >> 1) & 0x01010101u) << 4);
            }
        }
        const int g0 = gb * 8 + 2 * j;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v0[8], v1[8];
            float4 ds0, ds1;
            x_group(x, t, g0, v0, &ds0);
            x_group(x, t, g0 + 1, v1, &ds1);
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r][t] = mins_unit(lo[r], hi[r], v0, v1, ds0, ds1, sc[r], m[r], d[r], dmin[r], acc[r][t]);
        }
    }
};

/* q2_K / q3_K unit u: half h = u / 2, element groups j = 2 (u % 2) (A) and j + 1 (B), their codes bits 2j of
 * qs[32 h + l] (A[l], B[l]), four sub-blocks of 16 (A[0..16), A[16..32), B[0..16), B[16..32)) */
template <int NT, int R> struct qdot<HEARTH_DT_Q3_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        const int h = u >> 1, j = 2 * (u & 1);
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r] + 108));
#pragma unroll
            for (int k = 0; k < 4; k++) sc[r][k] = q3k_scale(b[r] + 96, 8 * h + j * 2 + k);
#pragma unroll
            for (int i = 0; i < 8; i++) { /* code | hbit << 2, less 4, as s8 (q6k_s8's trick) */
                const uint32_t q = ld32u(b[r] + 32 + 32 * h + 4 * i) >> (2 * j), hm = ld32u(b[r] + 4 * i) >> (4 * h + j);
                va[r][i] = (int)((((q & 0x03030303u) | ((hm & 0x01010101u) << 2)) + 0x7C7C7C7Cu) ^ 0x80808080u);
                vb[r][i] = (int)(((((q >> 2) & 0x03030303u) | (((hm >> 1) & 0x01010101u) << 2)) + 0x7C7C7C7Cu) ^
                                 0x80808080u);
            }
        }
        const int gA = gb * 8 + 4 * h + j;
        q6k_units<NT, R>(va, vb, sc, d, gA, gA + 1, x, acc);
    }
};

/* acc[r][t] += q2_K unit dots of rows r (codes va / vb of groups gA and gA + 1 of the row, the unit's four 4-bit
 * scales sc and mins m, d, dmin) with x row t: the staged (qdot) and split (fmt_split) kernels' shared inner loop */
template <int NT, int R>
__device__ __forceinline__ void q2k_units(const int (*va)[8], const int (*vb)[8], const int (*sc)[4], const int (*m)[4],
                                          const float *d, const float *dmin, int gA, const xq8 &x, float (*acc)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int xa[8], xb[8], bs[4] = {0, 0, 0, 0};
        float4 dsa, dsb;
        x_group(x, t, gA, xa, &dsa);
        x_group(x, t, gA + 1, xb, &dsb);
#pragma unroll
        for (int i = 0; i < 4; i++) { /* x's sums of 16 */
            bs[0] = __dp4a(xa[i], 0x01010101, bs[0]);
            bs[1] = __dp4a(xa[4 + i], 0x01010101, bs[1]);
            bs[2] = __dp4a(xb[i], 0x01010101, bs[2]);
            bs[3] = __dp4a(xb[4 + i], 0x01010101, bs[3]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int s = q6k_isum(va[r], vb[r], xa, xb, sc[r]);
            const int mins = m[r][0] * bs[0] + m[r][1] * bs[1] + m[r][2] * bs[2] + m[r][3] * bs[3];
            acc[r][t] = fmaf(d[r] * dsa.x, (float)s, acc[r][t]);
            acc[r][t] = fmaf(-(dmin[r] * dsa.x), (float)mins, acc[r][t]);
        }
    }
}

template <int NT, int R> struct qdot<HEARTH_DT_Q2_K, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        const int h = u >> 1, j = 2 * (u & 1);
        float d[R], dmin[R];
        int sc[R][4], m[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r] + 80));
            dmin[r] = h2f(ld16(b[r] + 82));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int s = b[r][8 * h + j * 2 + k];
                sc[r][k] = s & 15;
                m[r][k] = s >> 4;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t q = ld32u(b[r] + 16 + 32 * h + 4 * i) >> (2 * j);
                va[r][i] = (int)(q & 0x03030303u);
                vb[r][i] = (int)((q >> 2) & 0x03030303u);
            }
        }
        q2k_units<NT, R>(va, vb, sc, m, d, dmin, gb * 8 + 4 * h + j, x, acc);
    }
};

/* iq4_xs unit u: sub-blocks 2u and 2u + 1 (q4_0's nibble order, 16 bytes each), their scales less 32 */
template <int NT, int R> struct qdot<HEARTH_DT_IQ4_XS, NT, R> {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int u, int gb, const xq8 &x,
                                               float (*acc)[NT]) {
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(ld16(b[r]));
            sc[r][0] = sc[r][1] = iq4xs_scale(b[r], 2 * u);
            sc[r][2] = sc[r][3] = iq4xs_scale(b[r], 2 * u + 1);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                iq4_values8(ld32u(b[r] + 8 + 32 * u + 4 * i), (uint32_t *)&va[r][i], (uint32_t *)&va[r][4 + i]);
                iq4_values8(ld32u(b[r] + 24 + 32 * u + 4 * i), (uint32_t *)&vb[r][i], (uint32_t *)&vb[r][4 + i]);
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, gb * 8 + 2 * u, gb * 8 + 2 * u + 1, x, acc);
    }
};

/* Two consecutive blocks of a row in shared memory (gb even, so they start
 * 4-byte aligned: 36 bytes for Q4_0, 68 for Q8_0) read as aligned 32-bit
 * words, the codes of the block at offset 2 realigned with byte permutes:
 * a quarter of the shared-memory load instructions of one block at a time
 * through 16-bit loads. Same integer sums and scaling steps as qdot. */
template <int QT> struct pair_fmt; /* NQW: 32-bit words of codes a block; dot: its integer sum */
template <> struct pair_fmt<HEARTH_DT_Q4_0> {
    enum { NQW = 4 };
    static __device__ __forceinline__ int dot(const uint32_t *q, const int *v, const float4 &ds) {
        return dot_nibbles(q, v) - 8 * (int)ds.y;
    }
};
template <> struct pair_fmt<HEARTH_DT_Q8_0> {
    enum { NQW = 8 };
    static __device__ __forceinline__ int dot(const uint32_t *q, const int *v, const float4 &) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = __dp4a((int)q[i], v[i], s);
        return s;
    }
};

template <int QT, int NT, int R> struct qdot_pair {
    static __device__ __forceinline__ void run(const uint8_t *const *b, int gb, const xq8 &x, float (*acc)[NT]) {
        constexpr int N = pair_fmt<QT>::NQW;
        float d0[R], d1[R];
        uint32_t q0[R][N], q1[R][N];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t *w = (const uint32_t *)b[r];
            uint32_t v[2 * N + 1];
#pragma unroll
            for (int i = 0; i < 2 * N + 1; i++) v[i] = w[i];
            /* block 0: d = bytes 0-1, codes from byte 2; block 1: d = the high half of word N, codes from word N + 1 */
            d0[r] = h2f((uint16_t)(v[0] & 0xffffu));
#pragma unroll
            for (int i = 0; i < N; i++) q0[r][i] = __byte_perm(v[i], v[i + 1], 0x5432);
            d1[r] = h2f((uint16_t)(v[N] >> 16));
#pragma unroll
            for (int i = 0; i < N; i++) q1[r][i] = v[N + 1 + i];
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int xa[8], xb[8];
            float4 da, db;
            x_group(x, t, gb, xa, &da);
            x_group(x, t, gb + 1, xb, &db);
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[r][t] = fmaf(d0[r] * da.x, (float)pair_fmt<QT>::dot(q0[r], xa, da), acc[r][t]);
                acc[r][t] = fmaf(d1[r] * db.x, (float)pair_fmt<QT>::dot(q1[r], xb, db), acc[r][t]);
            }
        }
    }
};

template <int QT> struct has_pair { enum { value = 0 }; };
template <> struct has_pair<HEARTH_DT_Q4_0> { enum { value = 1 }; };
template <> struct has_pair<HEARTH_DT_Q8_0> { enum { value = 1 }; };

/* Split rows (HEARTH_LAYOUT_SPLIT), streamed like float rows. Q4_0 / Q8_0:
 * a chunk is one Q4_0 block's codes or half a Q8_0 block's, its f16 scale
 * read from the row's scales (at byte 16 * nch). Same integer sums and
 * scaling steps as qdot; a Q8_0 block's halves are scaled one at a time. */
__device__ __forceinline__ uint32_t ld_nc16(const uint8_t *p) {
    unsigned short v;
    asm("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

template <int QT> struct fmt_split {
    enum { QB = split_fmt<QT>::QB, E = 32 * 16 / QB }; /* elements a chunk */
    enum { U = 4 };                                     /* as fmt_float */
    enum { WAVE = 1 };                                  /* launch_stream */
    static_assert(QB == 16 || QB == 32, "Q4_0 or Q8_0");
    struct W {
        uint4 q;
        uint32_t d; /* f16 bits */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        return {ld_stream16(row + (size_t)c * 16), ld_nc16(row + (size_t)nch * 16 + 2 * (c * 16 / QB))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float d[R];
#pragma unroll
        for (int r = 0; r < R; r++) d[r] = h2f((uint16_t)w[r].d);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if constexpr (QT == HEARTH_DT_Q4_0) {
                int v[8];
                float4 ds;
                x_group(x, t, c, v, &ds);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int s = dot_nibbles((const uint32_t *)&w[r].q, v) - 8 * (int)ds.y;
                    acc[r][t] = fmaf(d[r] * ds.x, (float)s, acc[r][t]);
                }
            } else {
                int4 a = *(const int4 *)(x.qs + (size_t)t * x.K + (size_t)c * 16);
                float dx = x.ds[(size_t)t * (x.K / QK) + (c >> 1)].x;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int s = __dp4a((int)w[r].q.x, a.x, 0);
                    s = __dp4a((int)w[r].q.y, a.y, s);
                    s = __dp4a((int)w[r].q.z, a.z, s);
                    s = __dp4a((int)w[r].q.w, a.w, s);
                    acc[r][t] = fmaf(d[r] * dx, (float)s, acc[r][t]);
                }
            }
        }
    }
};

/* Split Q4_K rows: chunk c is unit c % 4 (sub-blocks 2j, 2j + 1: 32 code
 * bytes) of block c / 4, so that a lane scales whole units as qdot does,
 * with the same integer sums and fmaf steps (q4k_unit); two 16-byte loads,
 * U = 2 chunks in flight a row (the bytes of four 16-byte chunks). The two
 * loads share 32-byte sectors, so they go through L1, where the second finds
 * what the first brought (bench_gemv q4_K output 128256x4096: 77.7 us; 80.4
 * with L1::no_allocate; 91.8 the staged kernel; 16-byte chunks, half a unit
 * a lane with the halves added across lanes, 127). The block's 16-byte head
 * is at byte 32 * nch + 16 * (c / 4). A lane's chunks are 32 apart, so a
 * block's 4 units sit in 4 neighbouring lanes: each loads one word of the
 * head (word c % 4) and takes the other three from its neighbours (a whole
 * head a lane would hold 3 more registers a load in flight). */
template <> struct fmt_split<HEARTH_DT_Q4_K> {
    enum { E = 64, U = 2 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q[2];
        uint32_t h; /* word c % 4 of the head: d | dmin << 16, scales[0..3], [4..7], [8..11] */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint8_t *q = row + (size_t)c * 32, *head = row + (size_t)nch * 32 + (size_t)(c >> 2) * 16;
        return {{__ldg((const uint4 *)q), __ldg((const uint4 *)(q + 16))}, __ldg((const uint32_t *)head + (c & 3))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int lane = threadIdx.x & 31, blk = lane & ~3; /* lanes blk..blk+3: this block's units */
        const unsigned blk_mask = 0xFu << blk;
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
#pragma unroll
        for (int r = 0; r < R; r++) {
            uint32_t h[4];
#pragma unroll
            for (int i = 0; i < 4; i++) h[i] = __shfl_sync(blk_mask, w[r].h, blk | i);
            d[r] = h2f((uint16_t)(h[0] & 0xffffu));
            dmin[r] = h2f((uint16_t)(h[0] >> 16));
            q4k_unit_scales(h[1], h[2], h[3], c & 3, sc[r], m[r]);
        }
        const uint32_t *qp[R];
#pragma unroll
        for (int r = 0; r < R; r++) qp[r] = (const uint32_t *)w[r].q;
        q4k_units<NT, R>(qp, sc, m, d, dmin, 2 * c, x, acc);
    }
};

/* Split Q5_K rows: Q4_K's chunks, units and head words, and the block's 32
 * qh bytes (at the start of its 160 code bytes; the block's four lanes load
 * the same two sectors, through L1), bits 2j and 2j + 1 of each the fifth
 * bits of unit j's codes; the same integer sums and fmaf steps as qdot's
 * (mins_unit). U = 1: 64 bytes of loads in flight a row, as Q4_K's U = 2. */
template <> struct fmt_split<HEARTH_DT_Q5_K> {
    enum { QB = split_fmt<HEARTH_DT_Q5_K>::QB };
    enum { E = 64, U = 1 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q[2], qh[2];
        uint32_t h; /* word c % 4 of the head, as Q4_K's */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint4 *b = (const uint4 *)(row + (size_t)(c >> 2) * QB); /* the block's codes: qh, then qs */
        const uint8_t *head = row + (size_t)nch / 4 * QB + (size_t)(c >> 2) * 16;
        return {{__ldg(b + 2 + 2 * (c & 3)), __ldg(b + 3 + 2 * (c & 3))}, {__ldg(b), __ldg(b + 1)},
                __ldg((const uint32_t *)head + (c & 3))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int lane = threadIdx.x & 31, blk = lane & ~3, j = c & 3;
        const unsigned blk_mask = 0xFu << blk;
        float d[R], dmin[R];
        int sc[R][2], m[R][2];
        uint32_t lo[R][8], hi[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            uint32_t h[4];
#pragma unroll
            for (int i = 0; i < 4; i++) h[i] = __shfl_sync(blk_mask, w[r].h, blk | i);
            d[r] = h2f((uint16_t)(h[0] & 0xffffu));
            dmin[r] = h2f((uint16_t)(h[0] >> 16));
            q4k_unit_scales(h[1], h[2], h[3], j, sc[r], m[r]);
            const uint32_t *q = (const uint32_t *)w[r].q, *qh = (const uint32_t *)w[r].qh;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t hb = qh[i] >> (2 * j);
                lo[r][i] = (q[i] & 0x0F0F0F0Fu) | ((hb & 0x01010101u) << 4);
                hi[r][i] = ((q[i] >> 4) & 0x0F0F0F0Fu) | (((hb >> 1) & 0x01010101u) << 4);
            }
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v0[8], v1[8];
            float4 ds0, ds1;
            x_group(x, t, 2 * c, v0, &ds0);
            x_group(x, t, 2 * c + 1, v1, &ds1);
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r][t] = mins_unit(lo[r], hi[r], v0, v1, ds0, ds1, sc[r], m[r], d[r], dmin[r], acc[r][t]);
        }
    }
};

/* Split IQ4_XS rows: chunk c is unit c % 4 (sub-blocks 2j, 2j + 1: 32 code
 * bytes) of block c / 4, as Q4_K's; a lane loads its block's whole 8-byte
 * head (d, scales_h, scales_l) at byte 32 * nch + 8 * (c / 4). The same
 * integer sums and fmaf step as qdot's (q6k_units). */
template <> struct fmt_split<HEARTH_DT_IQ4_XS> {
    enum { E = 64, U = 2 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q[2];
        uint2 h;
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint8_t *q = row + (size_t)c * 32, *head = row + (size_t)nch * 32 + (size_t)(c >> 2) * 8;
        return {{__ldg((const uint4 *)q), __ldg((const uint4 *)(q + 16))}, __ldg((const uint2 *)head)};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int j = c & 3;
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t sh = w[r].h.x >> (16 + 4 * j), sl = w[r].h.y >> (8 * j);
            d[r] = h2f((uint16_t)(w[r].h.x & 0xffffu));
            sc[r][0] = sc[r][1] = (int)((sl & 15) | (sh & 3) << 4) - 32;
            sc[r][2] = sc[r][3] = (int)(((sl >> 4) & 15) | ((sh >> 2) & 3) << 4) - 32;
            const uint32_t *q = (const uint32_t *)w[r].q;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                iq4_values8(q[i], (uint32_t *)&va[r][i], (uint32_t *)&va[r][4 + i]);
                iq4_values8(q[4 + i], (uint32_t *)&vb[r][i], (uint32_t *)&vb[r][4 + i]);
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, 2 * c, 2 * c + 1, x, acc);
    }
};

/* Split Q6_K unit codes minus 32 (va: group A, vb: B, 4 a word) from its ql
 * words L and its words of top bits P (cuda_internal.cuh: byte i of P holds
 * the top bits of A[i], A[16 + i], B[i], B[16 + i] from bit 0 up; ql word
 * i < 4 holds elements 4i.., word 4 + i elements 16 + 4i..). */
__device__ __forceinline__ void q6k_split_codes(const uint32_t *L, const uint32_t *P, int *va, int *vb) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        va[i] = (int)q6k_s8(L[i], P[i] << 4);
        va[4 + i] = (int)q6k_s8(L[4 + i], P[i] << 2);
        vb[i] = (int)q6k_s8(L[i] >> 4, P[i]);
        vb[4 + i] = (int)q6k_s8(L[4 + i] >> 4, P[i] >> 2);
    }
}

/* Split Q6_K rows: chunk c is unit c % 4 of block c / 4 (qdot's unit: groups
 * A = 2 (c & ~1) + (c & 1) and A + 2 of the row), so that a lane scales
 * whole units as qdot does, with the same integer sums and fmaf step
 * (q6k_unit). A lane loads its unit's 32 ql bytes (two 16-byte loads that
 * share a 32-byte sector, through L1 as Q4_K's), its 16 bytes of top bits
 * (a block's four units: 64 contiguous bytes), its word of scales (at byte
 * 48 * nch + 4c) and the block's d (after the nb * 16 bytes of scales).
 * U = 1: 98 registers at one row of x, two blocks a multiprocessor; U = 2
 * takes 170, one block, for the same bytes in flight (not yet measured). */
template <> struct fmt_split<HEARTH_DT_Q6_K> {
    enum { QB = split_fmt<HEARTH_DT_Q6_K>::QB };
    enum { E = 64, U = 1 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 ql[2], qh;
        uint32_t sc; /* int8 scales A[0..16), A[16..32), B[0..16), B[16..32) */
        uint32_t d;  /* f16 bits */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint4 *q = (const uint4 *)(row + (size_t)(c >> 2) * QB); /* the block's codes */
        const uint8_t *scales = row + (size_t)nch / 4 * QB, *ds = scales + (size_t)nch * 4;
        return {{__ldg(q + 2 * (c & 3)), __ldg(q + 2 * (c & 3) + 1)}, __ldg(q + 8 + (c & 3)),
                __ldg((const uint32_t *)scales + c), __ldg((const unsigned short *)ds + (c >> 2))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f((uint16_t)w[r].d);
#pragma unroll
            for (int k = 0; k < 4; k++) sc[r][k] = (int8_t)(w[r].sc >> (8 * k));
            q6k_split_codes((const uint32_t *)w[r].ql, (const uint32_t *)&w[r].qh, va[r], vb[r]);
        }
        q6k_units<NT, R>(va, vb, sc, d, 2 * (c & ~1) + (c & 1), 2 * (c & ~1) + (c & 1) + 2, x, acc);
    }
};

/* Split Q4_1 / Q5_0 / Q5_1 / IQ4_NL rows: chunk c is block c's 16 code bytes, its qh word (Q5_0 / Q5_1) and d
 * (and m) read from the row's heads (cuda_internal.cuh). The codes made words as qdot makes them, the same
 * integer sums and fmaf steps (q32_words). */
template <int QT> struct fmt_split_q32 {
    enum { E = 32, U = 4 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    enum { Q5 = QT == HEARTH_DT_Q5_0 || QT == HEARTH_DT_Q5_1, MIN = QT == HEARTH_DT_Q4_1 || QT == HEARTH_DT_Q5_1 };
    struct W {
        uint4 q;
        uint32_t qh;
        uint32_t dm; /* f16 d, and m above it */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint8_t *heads = row + (size_t)nch * 16, *dm = heads + (Q5 ? (size_t)nch * 4 : 0);
        return {ld_stream16(row + (size_t)c * 16), Q5 ? __ldg((const uint32_t *)heads + c) : 0u,
                MIN ? __ldg((const uint32_t *)dm + c) : ld_nc16(dm + 2 * (size_t)c)};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float d[R], m[R];
        uint32_t q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f((uint16_t)(w[r].dm & 0xffffu));
            m[r] = MIN ? h2f((uint16_t)(w[r].dm >> 16)) : 0.0f;
            const uint32_t *nib = (const uint32_t *)&w[r].q;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if constexpr (QT == HEARTH_DT_IQ4_NL) {
                    iq4_values8(nib[i], &q[r][i], &q[r][4 + i]);
                } else if constexpr (Q5) {
                    q[r][i] = q5_codes4(nib[i] & 0x0F0F0F0Fu, w[r].qh >> (4 * i));
                    q[r][4 + i] = q5_codes4((nib[i] >> 4) & 0x0F0F0F0Fu, w[r].qh >> (16 + 4 * i));
                } else {
                    q[r][i] = nib[i] & 0x0F0F0F0Fu;
                    q[r][4 + i] = (nib[i] >> 4) & 0x0F0F0F0Fu;
                }
            }
        }
        q32_words<NT, R, QT == HEARTH_DT_Q5_0 ? 16 : 0, MIN>(q, d, m, c, x, acc);
    }
};
template <> struct fmt_split<HEARTH_DT_Q4_1> : fmt_split_q32<HEARTH_DT_Q4_1> {};
template <> struct fmt_split<HEARTH_DT_Q5_0> : fmt_split_q32<HEARTH_DT_Q5_0> {};
template <> struct fmt_split<HEARTH_DT_Q5_1> : fmt_split_q32<HEARTH_DT_Q5_1> {};
template <> struct fmt_split<HEARTH_DT_IQ4_NL> : fmt_split_q32<HEARTH_DT_IQ4_NL> {};

/* A split q2_K / q3_K unit's codes (its four code words P; cuda_internal.cuh) as qdot's va / vb words. */
__device__ __forceinline__ void q23_split_codes(const uint32_t *P, int *va, int *vb) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        va[i] = (int)(P[i] & 0x03030303u);
        vb[i] = (int)((P[i] >> 2) & 0x03030303u);
        va[4 + i] = (int)((P[i] >> 4) & 0x03030303u);
        vb[4 + i] = (int)((P[i] >> 6) & 0x03030303u);
    }
}

/* Split Q2_K rows: chunk c is unit c % 4 of block c / 4 (16 code bytes), with its word of four scales and mins
 * (at byte 16 * nch + 4c) and its block's d | dmin (after the nch words of scales); the same integer sums and
 * fmaf steps as qdot's (q2k_units). */
template <> struct fmt_split<HEARTH_DT_Q2_K> {
    enum { E = 64, U = 4 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q;
        uint32_t sc; /* scale | min << 4 of A[0..16), A[16..32), B[0..16), B[16..32) */
        uint32_t dm; /* f16 d | dmin << 16 */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const uint32_t *heads = (const uint32_t *)(row + (size_t)nch * 16);
        return {ld_stream16(row + (size_t)c * 16), __ldg(heads + c), __ldg(heads + nch + (c >> 2))};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        float d[R], dmin[R];
        int sc[R][4], m[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f((uint16_t)(w[r].dm & 0xffffu));
            dmin[r] = h2f((uint16_t)(w[r].dm >> 16));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                sc[r][k] = (int)((w[r].sc >> (8 * k)) & 15);
                m[r][k] = (int)((w[r].sc >> (8 * k + 4)) & 15);
            }
            q23_split_codes((const uint32_t *)&w[r].q, va[r], vb[r]);
        }
        q2k_units<NT, R>(va, vb, sc, m, d, dmin, 2 * c, x, acc);
    }
};

/* Split Q3_K rows: chunk c is unit c % 4 of block c / 4: its 16 code bytes, its 8 bytes of high bits, the
 * block's f16 d; the block's four lanes each load one word of its 12 scale bytes (lane 3 word 2 again) and
 * take the others from their neighbours, unit u's scales being byte u of each. The same integer sums and fmaf
 * step as qdot's (q6k_units). */
template <> struct fmt_split<HEARTH_DT_Q3_K> {
    enum { QB = split_fmt<HEARTH_DT_Q3_K>::QB };
    enum { E = 64, U = 2 }; /* elements a chunk, chunks in flight a row */
    enum { WAVE = 1 };      /* launch_stream */
    struct W {
        uint4 q;
        uint2 hb;    /* high bits of A, of B */
        uint32_t sc; /* word min(c % 4, 2) of the block's scales */
        uint32_t d;  /* f16 bits */
    };
    typedef xq8 X;
    static __device__ __forceinline__ X x_of(const void *xp, int K, int NT) {
        return {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + (size_t)NT * K), K};
    }
    static __device__ __forceinline__ W load(const uint8_t *row, int c, int nch) {
        const int b = c >> 2, u = c & 3;
        const uint8_t *blk = row + (size_t)b * QB, *heads = row + (size_t)nch / 4 * QB;
        return {ld_stream16(blk + 16 * u), __ldg((const uint2 *)(blk + 64) + u),
                __ldg((const uint32_t *)(heads + 12 * (size_t)b) + min(u, 2)),
                ld_nc16(heads + (size_t)nch * 3 + 2 * (size_t)b)};
    }
    template <int NT, int R>
    static __device__ __forceinline__ void dot(const W *w, int c, const X &x, float (*acc)[NT]) {
        const int lane = threadIdx.x & 31, blk = lane & ~3, sh = 8 * (c & 3);
        const unsigned blk_mask = 0xFu << blk;
        float d[R];
        int sc[R][4], va[R][8], vb[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t w0 = __shfl_sync(blk_mask, w[r].sc, blk), w1 = __shfl_sync(blk_mask, w[r].sc, blk | 1),
                           w2 = __shfl_sync(blk_mask, w[r].sc, blk | 2);
            const uint32_t v24 = ((w0 >> sh) & 255u) | ((w1 >> sh) & 255u) << 8 | ((w2 >> sh) & 255u) << 16;
#pragma unroll
            for (int k = 0; k < 4; k++) sc[r][k] = (int)((v24 >> (6 * k)) & 63u) - 32;
            d[r] = h2f((uint16_t)w[r].d);
            q23_split_codes((const uint32_t *)&w[r].q, va[r], vb[r]);
#pragma unroll
            for (int i = 0; i < 8; i++) { /* code | high bit << 2, less 4, as s8 (q6k_s8's trick) */
                va[r][i] = (int)((((uint32_t)va[r][i] | ((w[r].hb.x >> i) & 0x01010101u) << 2) + 0x7C7C7C7Cu) ^
                                 0x80808080u);
                vb[r][i] = (int)((((uint32_t)vb[r][i] | ((w[r].hb.y >> i) & 0x01010101u) << 2) + 0x7C7C7C7Cu) ^
                                 0x80808080u);
            }
        }
        q6k_units<NT, R>(va, vb, sc, d, 2 * c, 2 * c + 1, x, acc);
    }
};
