/* test_ops_attention.c - the CPU backend's paged attention against a
 * double-precision reference, under every ISA this CPU runs, and each row's
 * output the same bits alone as inside a batch, cut in slices, and over f16
 * and e4m3 caches of the same values. */
#include "testhelp.h"

#include "core/fp8.h"
#include "core/half.h"
#include "ops/cpu/attn_vec.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/ops_cpu.h"

#include <stdint.h>
#include <stdlib.h>

enum { BS = 16, NB = 160, MAXT = 24 };

static float urand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct {
    int nh, nkv, hd, window;
    float kscale; /* spread of the scores: large ones make the softmax peaky */
} att_case;

/* Two sequences' caches (f32) in shuffled blocks; MAXT rows of either, at
 * positions up to 1279 (20 chunks of 64, three segments of 512). */
typedef struct {
    float *k, *v, *q;
    uint16_t *k16, *v16; /* the same values in an f16 cache */
    uint8_t *k8, *v8;    /* and in an e4m3 one */
    int32_t table[2 * NB / 2], seq[MAXT], pos[MAXT];
    hearth_kv_view kv, kv16, kv8;
    void *kp[1], *vp[1], *kp16[1], *vp16[1], *kp8[1], *vp8[1];
} rig;

static void rig_fill(rig *r, const att_case *c, uint64_t *s) {
    const int kvd = c->nkv * c->hd;
    r->k = malloc(sizeof(float) * NB * BS * (size_t)kvd);
    r->v = malloc(sizeof(float) * NB * BS * (size_t)kvd);
    r->q = malloc(sizeof(float) * MAXT * (size_t)c->nh * c->hd);
    r->k16 = malloc(sizeof(uint16_t) * NB * BS * (size_t)kvd);
    r->v16 = malloc(sizeof(uint16_t) * NB * BS * (size_t)kvd);
    r->k8 = malloc((size_t)NB * BS * kvd);
    r->v8 = malloc((size_t)NB * BS * kvd);
    for (size_t i = 0; i < (size_t)NB * BS * kvd; i++) { /* e4m3 values: every cache holds them exactly */
        r->k8[i] = hearth_f32_to_e4m3(urand(s) * c->kscale), r->v8[i] = hearth_f32_to_e4m3(urand(s));
        r->k[i] = hearth_e4m3_to_f32(r->k8[i]), r->v[i] = hearth_e4m3_to_f32(r->v8[i]);
        r->k16[i] = hearth_f32_to_f16(r->k[i]), r->v16[i] = hearth_f32_to_f16(r->v[i]);
    }
    for (size_t i = 0; i < (size_t)MAXT * c->nh * c->hd; i++) r->q[i] = urand(s);
    for (int i = 0; i < NB; i++) r->table[i] = (i * 37 + 11) % NB; /* a permutation: seq 0 rows 0-79, seq 1 80-159 */
    /* a prompt's 12 rows across a segment's end, another's first 4, then decode rows */
    for (int t = 0; t < MAXT; t++) {
        r->seq[t] = t < 12 ? 0 : t < 16 ? 1 : t % 2;
        r->pos[t] = t < 12 ? 505 + t : t < 16 ? t - 12 : (int)((urand(s) * 0.5f + 0.5f) * (NB / 2 * BS - 1));
    }
    r->kp[0] = r->k, r->vp[0] = r->v;
    r->kv = (hearth_kv_view){r->kp, r->vp, r->table, BS, NB / 2, kvd, NB, HEARTH_DT_F32, 0, 0, 0};
    r->kp16[0] = r->k16, r->vp16[0] = r->v16;
    r->kv16 = (hearth_kv_view){r->kp16, r->vp16, r->table, BS, NB / 2, kvd, NB, HEARTH_DT_F16, 0, 0, 0};
    r->kp8[0] = r->k8, r->vp8[0] = r->v8;
    r->kv8 = (hearth_kv_view){r->kp8, r->vp8, r->table, BS, NB / 2, kvd, NB, HEARTH_DT_E4M3, 0, 0, 0};
}

static void rig_free(rig *r) { free(r->k), free(r->v), free(r->q), free(r->k16), free(r->v16), free(r->k8), free(r->v8); }

/* out[t][h] by the definition, in double */
static void reference(const rig *r, const att_case *c, float scale, double *out) {
    const int G = c->nh / c->nkv, kvd = c->nkv * c->hd;
    double *w = malloc(sizeof(double) * NB * BS);
    for (int t = 0; t < MAXT; t++)
        for (int h = 0; h < c->nh; h++) {
            int p1 = r->pos[t], p0 = c->window > 0 && p1 - c->window + 1 > 0 ? p1 - c->window + 1 : 0;
            const float *q = r->q + ((size_t)t * c->nh + h) * c->hd;
            double mx = -1e300, sum = 0;
            for (int p = p0; p <= p1; p++) {
                int blk = r->table[r->seq[t] * (NB / 2) + p / BS];
                const float *k = r->k + ((size_t)blk * BS + p % BS) * kvd + (size_t)(h / G) * c->hd;
                double d = 0;
                for (int e = 0; e < c->hd; e++) d += (double)q[e] * k[e];
                w[p] = d * scale;
                if (w[p] > mx) mx = w[p];
            }
            for (int p = p0; p <= p1; p++) sum += w[p] = exp(w[p] - mx);
            double *o = out + ((size_t)t * c->nh + h) * c->hd;
            for (int e = 0; e < c->hd; e++) o[e] = 0;
            for (int p = p0; p <= p1; p++) {
                int blk = r->table[r->seq[t] * (NB / 2) + p / BS];
                const float *v = r->v + ((size_t)blk * BS + p % BS) * kvd + (size_t)(h / G) * c->hd;
                for (int e = 0; e < c->hd; e++) o[e] += w[p] / sum * v[e];
            }
        }
    free(w);
}

TEST(cpu_attention_matches_reference_and_batching) {
    static const att_case cases[] = {
        {4, 4, 64, 0, 0.3f},  {9, 3, 64, 0, 0.5f}, {8, 2, 128, 0, 0.2f}, {32, 4, 128, 100, 0.2f},
        {16, 1, 16, 0, 2.0f}, {6, 2, 80, 37, 1.0f}, {12, 4, 24, 0, 8.0f},
    };
    const int isas[] = {HEARTH_CPU_ISA_SCALAR, HEARTH_CPU_ISA_AVX2, HEARTH_CPU_ISA_AVX512};
    uint64_t s = 77;
    hearth_cpu_ctx *ctx, *small; /* small: a batch larger than its max_tokens, or its partials' room, is cut */
    CHECK_EQ(hearth_cpu_ctx_new(&ctx, 2, MAXT, 64, NB / 2 * BS, NULL), HEARTH_OK);
    CHECK_EQ(hearth_cpu_ctx_new(&small, 2, 5, 64, NB / 2 * BS, NULL), HEARTH_OK);
    hearth_cpu_ctx_cap_att_part(small, 40000); /* the widest case's partials: 3 rows a pass */
    int ran = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const att_case *c = &cases[ci];
        rig r;
        rig_fill(&r, c, &s);
        const size_t n = (size_t)MAXT * c->nh * c->hd;
        const float scale = 1.0f / sqrtf((float)c->hd);
        double *want = malloc(sizeof(double) * n);
        float *got = malloc(sizeof(float) * n), *one = malloc(sizeof(float) * n), *cut = malloc(sizeof(float) * n),
              *h16 = malloc(sizeof(float) * n), *h8 = malloc(sizeof(float) * n);
        reference(&r, c, scale, want);
        for (int ii = 0; ii < 3; ii++) {
            if (!hearth_cpu_isa_force(isas[ii])) continue;
            ran++;
            for (size_t i = 0; i < n; i++) got[i] = one[i] = NAN;
            hearth_cpu_ops.attention(ctx, got, r.q, MAXT, &r.kv, 0, r.seq, r.pos, c->nh, c->nkv, c->hd, scale,
                                     c->window);
            hearth_cpu_ops.attention(small, cut, r.q, MAXT, &r.kv, 0, r.seq, r.pos, c->nh, c->nkv, c->hd, scale,
                                     c->window);
            hearth_cpu_ops.attention(ctx, h16, r.q, MAXT, &r.kv16, 0, r.seq, r.pos, c->nh, c->nkv, c->hd, scale,
                                     c->window);
            hearth_cpu_ops.attention(ctx, h8, r.q, MAXT, &r.kv8, 0, r.seq, r.pos, c->nh, c->nkv, c->hd, scale,
                                     c->window);
            const size_t row = (size_t)c->nh * c->hd;
            for (int t = 0; t < MAXT; t++) /* each row alone */
                hearth_cpu_ops.attention(ctx, one + t * row, r.q + t * row, 1, &r.kv, 0, r.seq + t, r.pos + t, c->nh,
                                         c->nkv, c->hd, scale, c->window);
            double err = 0;
            for (size_t i = 0; i < n; i++) { /* a NaN counts (fmax would pass it over) */
                const double d = fabs(got[i] - want[i]);
                if (!(d <= err)) err = d == d ? d : INFINITY;
            }
            const int alone = !memcmp(got, one, sizeof(float) * n), cuts = !memcmp(got, cut, sizeof(float) * n);
            const int f16 = !memcmp(got, h16, sizeof(float) * n), e4m3 = !memcmp(got, h8, sizeof(float) * n);
            if (err > 2e-6 || !alone || !cuts || !f16 || !e4m3) {
                test_fail(__FILE__, __LINE__,
                          "%s, heads %d/%d, hd %d, window %d: max error %.3g (2e-6 allowed); alone = in the batch: %s; "
                          "cut in fives = whole: %s; f16 cache = f32: %s; e4m3 cache = f32: %s",
                          hearth_cpu_isa_name(isas[ii]), c->nh, c->nkv, c->hd, c->window, err, alone ? "yes" : "no",
                          cuts ? "yes" : "no", f16 ? "yes" : "no", e4m3 ? "yes" : "no");
                ci = sizeof cases / sizeof cases[0];
                break;
            }
        }
        free(want), free(got), free(one), free(cut), free(h16), free(h8);
        rig_free(&r);
    }
    hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
    hearth_cpu_ctx_free(ctx);
    hearth_cpu_ctx_free(small);
    CHECK(ran >= 7);
}

/* A cache laid out head by head (hearth_kv_view.head_dim, the CPU engine's)
 * holds each value where the view says, written by kv_write from rows, and
 * the attention over it gives the rows layout's bits, for each cache type,
 * ISA and head shape, with the rows in one batch and alone. */
TEST(cpu_attention_over_head_blocks_same_bits_as_rows) {
    static const att_case cases[] = {
        {9, 3, 64, 0, 0.5f}, {8, 2, 128, 0, 0.2f}, {6, 2, 80, 37, 1.0f}, {16, 1, 16, 0, 2.0f}};
    const int isas[] = {HEARTH_CPU_ISA_SCALAR, HEARTH_CPU_ISA_AVX2, HEARTH_CPU_ISA_AVX512};
    const hearth_dtype types[] = {HEARTH_DT_F32, HEARTH_DT_F16, HEARTH_DT_E4M3};
    uint64_t s = 91;
    hearth_cpu_ctx *ctx;
    CHECK_EQ(hearth_cpu_ctx_new(&ctx, 2, MAXT, 64, NB / 2 * BS, NULL), HEARTH_OK);
    int ran = 0, bad = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0] && !bad; ci++) {
        const att_case *c = &cases[ci];
        const int kvd = c->nkv * c->hd, P = NB / 2 * BS;
        rig r;
        rig_fill(&r, c, &s);
        /* every position of both sequences as rows [P][kvd], as kv_write takes them */
        float *kin = malloc(sizeof(float) * (size_t)P * kvd), *vin = malloc(sizeof(float) * (size_t)P * kvd);
        int32_t *seq = malloc(sizeof(int32_t) * P), *pos = malloc(sizeof(int32_t) * P);
        const size_t n = (size_t)MAXT * c->nh * c->hd;
        float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
        const float scale = 1.0f / sqrtf((float)c->hd);
        for (int ti = 0; ti < 3 && !bad; ti++) {
            const hearth_kv_view *rows = ti == 0 ? &r.kv : ti == 1 ? &r.kv16 : &r.kv8;
            const size_t esz = ti == 0 ? 4 : ti == 1 ? 2 : 1, bytes = esz * NB * BS * (size_t)kvd;
            void *kb = malloc(bytes), *vb = malloc(bytes), *kp[1] = {kb}, *vp[1] = {vb};
            memset(kb, 0xff, bytes), memset(vb, 0xff, bytes); /* NaNs wherever a write is missed */
            hearth_kv_view heads = *rows;
            heads.k = kp, heads.v = vp, heads.head_dim = c->hd;
            for (int sq = 0; sq < 2; sq++) {
                for (int p = 0; p < P; p++) {
                    size_t off = ((size_t)r.table[sq * (NB / 2) + p / BS] * BS + p % BS) * kvd;
                    memcpy(kin + (size_t)p * kvd, r.k + off, sizeof(float) * kvd);
                    memcpy(vin + (size_t)p * kvd, r.v + off, sizeof(float) * kvd);
                    seq[p] = sq, pos[p] = p;
                }
                hearth_cpu_ops.kv_write(ctx, &heads, 0, kin, vin, P, seq, pos);
            }
            /* one value where the layout puts it: sequence 1, position 37, last head's dimension 1 */
            const int h = c->nkv - 1, blk = r.table[NB / 2 + 37 / BS];
            const size_t at_rows = ((size_t)blk * BS + 37 % BS) * kvd + (size_t)h * c->hd + 1;
            const size_t at_heads = (((size_t)blk * c->nkv + h) * BS + 37 % BS) * c->hd + 1;
            CHECK(!memcmp((char *)vb + at_heads * esz, (char *)rows->v[0] + at_rows * esz, esz));
            for (int ii = 0; ii < 3 && !bad; ii++) {
                if (!hearth_cpu_isa_force(isas[ii])) continue;
                ran++;
                hearth_cpu_ops.attention(ctx, want, r.q, MAXT, rows, 0, r.seq, r.pos, c->nh, c->nkv, c->hd, scale,
                                         c->window);
                for (size_t i = 0; i < n; i++) got[i] = NAN;
                hearth_cpu_ops.attention(ctx, got, r.q, MAXT, &heads, 0, r.seq, r.pos, c->nh, c->nkv, c->hd, scale,
                                         c->window);
                int same = !memcmp(want, got, sizeof(float) * n);
                const size_t row = (size_t)c->nh * c->hd;
                for (int t = 0; t < MAXT && same; t++) {
                    hearth_cpu_ops.attention(ctx, got, r.q + t * row, 1, &heads, 0, r.seq + t, r.pos + t, c->nh, c->nkv,
                                             c->hd, scale, c->window);
                    same = !memcmp(want + t * row, got, sizeof(float) * row);
                }
                if (!same) {
                    test_fail(__FILE__, __LINE__, "%s, %s cache, heads %d/%d, hd %d: head blocks differ from rows",
                              hearth_cpu_isa_name(isas[ii]), hearth_dtype_get(types[ti])->name, c->nh, c->nkv, c->hd);
                    bad = 1;
                }
            }
            free(kb), free(vb);
        }
        free(kin), free(vin), free(seq), free(pos), free(want), free(got);
        rig_free(&r);
    }
    hearth_cpu_isa_force(HEARTH_CPU_ISA_AUTO);
    hearth_cpu_ctx_free(ctx);
    CHECK(ran >= 12);
}

/* The kernels widen every e4m3 code as hearth_e4m3_to_f32 does: one K row of
 * the 256 codes (the two NaNs replaced by 0), scored against one-hot queries. */
TEST(cpu_attention_kernels_widen_every_e4m3_code) {
    const char *isas[] = {"scalar", "avx2", "avx512"};
    static uint8_t codes[256];
    static float q[256 * 256], sc[256];
    const float *qr[256];
    for (int i = 0; i < 256; i++) {
        codes[i] = (i & 0x7f) == 0x7f ? 0 : (uint8_t)i;
        qr[i] = q + (size_t)i * 256;
        q[(size_t)i * 256 + i] = 1.0f;
    }
    const void *row[1] = {codes};
    for (int k = 0; k < 3; k++) {
        const hearth_attn_ops *a = hearth_attn_ops_get(isas[k]);
        if (!a) continue;
        a->scores(sc, 1, qr, 256, row, HEARTH_ROWS_E4M3, 1, 256, 1.0f);
        for (int i = 0; i < 256; i++)
            CHECK_MSG(sc[i] == hearth_e4m3_to_f32(codes[i]), "%s: code %02x -> %g, want %g", isas[k], codes[i], sc[i],
                      hearth_e4m3_to_f32(codes[i]));
    }
}

/* The attention's online softmax stays right with any consistent shift, so
 * the attention test cannot tell a wrong chunk maximum: each ISA's max
 * kernel against the plain loop, every length of a chunk, the running max
 * above and below the values, NaNs among them (passed over), the tail lane
 * holding the largest value. */
TEST(cpu_attention_max_kernels_match_the_loop) {
    const char *isas[] = {"scalar", "avx2", "avx512"};
    float s[64];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 3; k++) {
        const hearth_attn_ops *a = hearth_attn_ops_get(isas[k]);
        if (!a) continue;
        for (int n = 1; n <= 64; n++)
            for (int v = 0; v < 4; v++) {
                for (int p = 0; p < n; p++) {
                    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                    s[p] = (float)(rng >> 40) / 1048576.0f - 8.0f;
                }
                if (v == 1) s[n - 1] = 100.0f;      /* the last lane of a partial vector */
                if (v == 2 && n > 1) s[n / 2] = NAN; /* passed over */
                const float m = v == 3 ? 50.0f : -INFINITY;
                float want = m;
                for (int p = 0; p < n; p++) want = s[p] > want ? s[p] : want;
                const float got = a->max(s, n, m);
                CHECK_MSG(got == want, "%s: n %d, case %d: max %g, want %g", isas[k], n, v, got, want);
            }
    }
}
