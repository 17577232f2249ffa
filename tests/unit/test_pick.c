/* test_pick.c - the pick op on the CPU (ops.h's rule) and the f16 KV cache. */
#include "testhelp.h"

#include "core/half.h"
#include "engine/sampler.h"
#include "ops/cpu/ops_cpu.h"
#include "ops/cpu/pick.h"

#include <math.h>
#include <stdlib.h>

static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

static float frand(uint64_t *x) { return (float)lcg(x) / 2147483648.0f * 2.0f - 1.0f; }

/* The rule of ops.h without the pruning: every token scored. */
static int draw_unpruned(const float *x, int n, float t, float min_p, uint64_t key) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    int best = -1;
    float best_s = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (min_p > 0 && !(x[i] >= mx + logf(min_p))) continue;
        uint64_t z = hearth_pick_hash(key, (uint32_t)i);
        float u = ((float)(z >> 41) + 0.5f) * 0x1.0p-23f;
        float s = x[i] * (1.0f / t) - logf(-logf(u));
        if (best < 0 || s > best_s) best = i, best_s = s;
    }
    return best;
}

TEST(pick_argmax_first_max_and_logprobs) {
    uint64_t r = 7;
    enum { V = 1000 };
    float x[V];
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < V; i++) x[i] = frand(&r) * 8.0f;
        x[(trial * 37) % V] = 9.0f;
        x[(trial * 37 + 11) % V] = 9.0f; /* a tie: the lower id wins */
        if (trial % 3 == 0) x[(trial * 37 + 500) % V] = -INFINITY;
        hearth_pick_params p = {.temperature = 0, .logprobs = 1, .n_top = 20};
        hearth_pick pk;
        hearth_pick_row(&pk, x, V, &p);
        int a = (trial * 37) % V, b = (trial * 37 + 11) % V;
        CHECK_EQ(pk.id, a < b ? a : b);
        CHECK(pk.max == 9.0f);
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp((double)x[i] - 9.0);
        CHECK_NEAR(pk.lse, 9.0 + log(sum), 1e-5);
        CHECK(pk.chosen == 9.0f);
        CHECK_EQ(pk.n_top, 20);
        CHECK_EQ(pk.top_id[0], a < b ? a : b);
        CHECK_EQ(pk.top_id[1], a < b ? b : a);
        for (int k = 1; k < 20; k++) CHECK(pk.top_x[k] <= pk.top_x[k - 1]);
        int above = 0; /* nothing outside the list beats its last entry */
        for (int i = 0; i < V; i++) above += x[i] > pk.top_x[19];
        CHECK(above <= 19);
        /* the host sampler's greedy choice is the same token */
        hearth_sampling sp;
        hearth_sampling_default(&sp);
        sp.temperature = 0;
        hearth_sampler s;
        CHECK_EQ(hearth_sampler_init(&s, &sp, V, NULL), HEARTH_OK);
        float y[V];
        memcpy(y, x, sizeof y);
        CHECK_EQ(hearth_sampler_sample(&s, y, NULL), pk.id);
        hearth_sampler_deinit(&s);
    }
}

TEST(pick_gumbel_pruning_changes_nothing) {
    uint64_t r = 11;
    enum { V = 3000 };
    static float x[V];
    const float temps[] = {0.2f, 0.7f, 1.0f, 1.5f, 3.0f}, minps[] = {0.0f, 0.05f, 0.5f};
    for (int trial = 0; trial < 200; trial++) {
        float scale = 1.0f + (float)(trial % 7) * 3.0f;
        for (int i = 0; i < V; i++) x[i] = frand(&r) * scale;
        hearth_pick_params p = {.temperature = temps[trial % 5], .min_p = minps[trial % 3],
                                .key = lcg(&r) << 31 ^ lcg(&r)};
        hearth_pick pk;
        hearth_pick_row(&pk, x, V, &p);
        CHECK_EQ(pk.id, draw_unpruned(x, V, p.temperature, p.min_p, p.key));
        if (p.min_p > 0) CHECK(x[pk.id] >= pk.max + logf(p.min_p));
    }
}

/* The draw scores only tokens whose noise index can beat the maximum's score: the same tokens as scoring
 * them all, at very low and very high temperatures and on rows with many near-ties. */
TEST(pick_noise_index_bound_changes_nothing) {
    uint64_t r = 29;
    enum { V = 2000 };
    static float x[V];
    const float temps[] = {0.02f, 0.3f, 1.0f, 5.0f, 60.0f};
    for (int trial = 0; trial < 40; trial++) {
        for (int i = 0; i < V; i++)
            x[i] = trial % 2 ? roundf(frand(&r) * 20.0f) * 0.05f : frand(&r) * (float)(1 + trial % 9) * 2.0f;
        for (int k = 0; k < 60; k++) {
            hearth_pick_params p = {.temperature = temps[k % 5], .key = lcg(&r) << 31 ^ lcg(&r)};
            hearth_pick pk;
            hearth_pick_row(&pk, x, V, &p);
            CHECK_MSG(pk.id == draw_unpruned(x, V, p.temperature, 0.0f, p.key), "trial %d T %g", trial,
                      p.temperature);
        }
    }
}

/* Draws follow softmax(x / T): 40000 keys, each frequency within 5 sigma. */
TEST(pick_gumbel_draws_follow_softmax) {
    const float x[6] = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 2.0f};
    const float temps[] = {1.0f, 0.5f, 2.0f};
    for (int ti = 0; ti < 3; ti++) {
        float t = temps[ti];
        double p[6], z = 0;
        for (int i = 0; i < 6; i++) z += p[i] = exp(x[i] / t);
        int count[6] = {0};
        enum { N = 40000 };
        for (int k = 0; k < N; k++) {
            hearth_pick_params pp = {.temperature = t, .key = 0x1234567ull * (uint64_t)(k + 1) + (uint64_t)ti};
            hearth_pick pk;
            hearth_pick_row(&pk, x, 6, &pp);
            CHECK(pk.id >= 0 && pk.id < 6);
            count[pk.id]++;
        }
        for (int i = 0; i < 6; i++) {
            double q = p[i] / z, sd = sqrt(q * (1 - q) / N);
            CHECK_MSG(fabs((double)count[i] / N - q) < 5 * sd + 1e-9, "T=%g token %d: %g vs %g", t, i,
                      (double)count[i] / N, q);
        }
    }
}

/* ops.h's truncation by a whole sort: the order key of the last token kept
 * (0: all kept). */
static uint64_t *g_keys;
static int cmp_u64_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
static uint64_t truncation_by_sort(const float *x, int n, int top_k, float top_p) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        g_keys[i] = hearth_pick_order(x[i], i);
        total += hearth_pick_weight(mx - x[i]);
    }
    qsort(g_keys, (size_t)n, sizeof *g_keys, cmp_u64_desc);
    int keep = top_k > 0 && top_k < n ? top_k : n;
    if (top_p > 0.0f && top_p < 1.0f) {
        uint64_t need = (uint64_t)ceil((double)top_p * (double)total), cum = 0;
        for (int j = 0; j < n; j++) {
            cum += hearth_pick_weight(mx - x[(int32_t)~(uint32_t)g_keys[j]]);
            if (cum >= need) {
                keep = j + 1 < keep ? j + 1 : keep;
                break;
            }
        }
    }
    return keep < n ? g_keys[keep - 1] : 0;
}

/* The draw of ops.h with every token scored and the truncation by a sort. */
static int draw_reference(const float *x, int n, const hearth_pick_params *p) {
    uint64_t last = truncation_by_sort(x, n, p->top_k, p->top_p);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    int best = -1;
    float best_s = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (p->min_p > 0 && !(x[i] >= mx + logf(p->min_p))) continue;
        if (last && hearth_pick_order(x[i], i) < last) continue;
        uint64_t z = hearth_pick_hash(p->key, (uint32_t)i);
        float u = ((float)(z >> 41) + 0.5f) * 0x1.0p-23f;
        float s = x[i] * (1.0f / p->temperature) - logf(-logf(u));
        if (best < 0 || s > best_s) best = i, best_s = s;
    }
    return best;
}

/* Rows of several shapes: peaked (a language model's), a coarse grid (ties
 * everywhere), flat within 0.01 (one crowded bin: the bisection), all equal,
 * a third -inf; top_k, top_p and min_p alone and together. */
TEST(pick_top_k_top_p_follow_the_rule) {
    enum { V = 9000 };
    static float x[V];
    static uint64_t keys[V];
    g_keys = keys;
    uint64_t r = 23;
    const int ks[] = {0, 1, 5, 40, 1000, 8999, 9000};
    const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f}, temps[] = {0.3f, 0.8f, 1.0f, 2.5f};
    int truncated = 0, moved = 0;
    for (int trial = 0; trial < 150; trial++) {
        int style = trial % 5, n = trial % 2 ? V : 1777;
        for (int i = 0; i < n; i++) {
            float v = frand(&r);
            x[i] = style == 0 ? v * 3.0f : style == 1 ? roundf(v * 8.0f) * 0.5f : style == 2 ? v * 0.01f
                 : style == 3 ? 1.5f : (lcg(&r) % 3 ? v * 4.0f : -INFINITY);
        }
        if (style == 0)
            for (int j = 0; j < 5; j++) x[lcg(&r) % (uint64_t)n] = 9.0f + frand(&r);
        hearth_pick_params p = {.temperature = temps[trial % 4], .min_p = trial % 7 == 3 ? 0.05f : 0.0f,
                                .top_k = ks[trial % 7], .top_p = ps[(trial / 7) % 7]};
        uint64_t last = truncation_by_sort(x, n, p.top_k, p.top_p);
        truncated += last != 0;
        for (int k = 0; k < 4; k++) {
            p.key = lcg(&r) << 31 ^ lcg(&r);
            hearth_pick pk;
            hearth_pick_row(&pk, x, n, &p);
            int want = draw_reference(x, n, &p);
            CHECK_MSG(pk.id == want, "trial %d style %d top_k %d top_p %g T %g: %d, want %d", trial, style, p.top_k,
                      p.top_p, p.temperature, pk.id, want);
            CHECK(!last || hearth_pick_order(x[pk.id], pk.id) >= last);
            moved += x[pk.id] != pk.max;
        }
    }
    CHECK_MSG(truncated > 60 && moved > 100, "only %d rows truncated, %d draws off the maximum", truncated, moved);
}

/* All tokens equal: the order is by id, so top_k keeps ids 0..k-1 and top_p
 * the first ceil(p * n); every kept token is drawn. */
TEST(pick_truncation_of_ties_keeps_the_lower_ids) {
    enum { V = 1000 };
    static float x[V];
    for (int i = 0; i < V; i++) x[i] = 0.25f;
    const struct {
        int k;
        float p;
        int keep;
    } cases[] = {{5, 0.0f, 5}, {0, 0.5f, 500}, {0, 0.0101f, 11}, {300, 0.5f, 300}, {0, 0.0005f, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        static int seen[V];
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < 20000; k++) {
            hearth_pick_params p = {.temperature = 1.0f, .key = 977ull * (uint64_t)k + c, .top_k = cases[c].k,
                                    .top_p = cases[c].p};
            hearth_pick pk;
            hearth_pick_row(&pk, x, V, &p);
            CHECK_MSG(pk.id < cases[c].keep, "case %zu: drew %d of %d kept", c, pk.id, cases[c].keep);
            seen[pk.id] = 1;
        }
        int n_seen = 0;
        for (int i = 0; i < V; i++) n_seen += seen[i];
        CHECK_MSG(n_seen == cases[c].keep, "case %zu: %d of %d kept tokens drawn", c, n_seen, cases[c].keep);
    }
}

/* The pick's truncated draws and the host sampler's are of one distribution:
 * 40000 draws each, every frequency within 5 sigma of softmax(x / T) over
 * what the host keeps. */
TEST(pick_truncated_draws_match_the_host_sampler) {
    enum { V = 64, N = 40000 };
    float x[V];
    uint64_t r = 77;
    for (int i = 0; i < V; i++) x[i] = frand(&r) * 4.0f;
    const struct {
        int k;
        float p, t;
    } cases[] = {{8, 0.0f, 0.8f}, {0, 0.7f, 1.0f}, {20, 0.9f, 1.3f}, {3, 0.95f, 0.5f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int host[V] = {0}, dev[V] = {0};
        hearth_sampling sp;
        hearth_sampling_default(&sp);
        sp.temperature = cases[c].t, sp.top_k = cases[c].k, sp.top_p = cases[c].p > 0 ? cases[c].p : 1.0f;
        sp.seed = 1000 + c, sp.has_seed = 1;
        hearth_sampler s;
        CHECK_EQ(hearth_sampler_init(&s, &sp, V, NULL), HEARTH_OK);
        for (int k = 0; k < N; k++) {
            float y[V];
            memcpy(y, x, sizeof y);
            host[hearth_sampler_sample(&s, y, NULL)]++;
            hearth_pick_params p;
            CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &p), 1);
            hearth_pick pk;
            hearth_pick_row(&pk, x, V, &p);
            dev[pk.id]++;
        }
        hearth_sampler_deinit(&s);
        double z = 0, q[V];
        for (int i = 0; i < V; i++) z += q[i] = host[i] ? exp((double)x[i] / cases[c].t) : 0.0;
        for (int i = 0; i < V; i++) {
            q[i] /= z;
            double sd = sqrt(q[i] * (1 - q[i]) / N);
            CHECK_MSG(fabs((double)dev[i] / N - q[i]) < 5 * sd + 1e-9 && fabs((double)host[i] / N - q[i]) < 5 * sd + 0.01,
                      "case %zu token %d: pick %g host %g want %g", c, i, (double)dev[i] / N, (double)host[i] / N, q[i]);
        }
    }
}

TEST(pick_sampler_params_route_rows) {
    hearth_sampling sp;
    hearth_sampling_default(&sp);
    hearth_sampler s;
    hearth_pick_params p;
    sp.temperature = 0.8f;
    sp.min_p = 0.1f;
    sp.seed = 5, sp.has_seed = 1;
    CHECK_EQ(hearth_sampler_init(&s, &sp, 100, NULL), HEARTH_OK);
    CHECK_EQ(hearth_sampler_pick_params(&s, 1, 1, &p), 1);
    CHECK(p.temperature == 0.8f && p.min_p == 0.1f && p.logprobs == 1);
    uint64_t k1 = p.key;
    CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &p), 1);
    CHECK(p.key != k1); /* a fresh key per draw */
    hearth_sampler_deinit(&s);
    /* same seed, same keys */
    CHECK_EQ(hearth_sampler_init(&s, &sp, 100, NULL), HEARTH_OK);
    CHECK_EQ(hearth_sampler_pick_params(&s, 1, 1, &p), 1);
    CHECK(p.key == k1);
    hearth_sampler_deinit(&s);
    /* top_p and top_k go with the row */
    sp.top_p = 0.9f, sp.top_k = 5;
    CHECK_EQ(hearth_sampler_init(&s, &sp, 100, NULL), HEARTH_OK);
    CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &p), 1);
    CHECK(p.top_p == 0.9f && p.top_k == 5 && p.min_p == 0.1f);
    CHECK_EQ(hearth_sampler_pick_params(&s, 0, 0, &p), 0); /* unless the backend's pick does not truncate */
    hearth_sampler_deinit(&s);
    sp.top_p = 1.0f, sp.top_k = 0;
    CHECK_EQ(hearth_sampler_init(&s, &sp, 100, NULL), HEARTH_OK);
    CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &p), 1);
    CHECK(p.top_p == 0.0f && p.top_k == 0); /* off */
    hearth_sampler_deinit(&s);
    /* each setting the pick op cannot apply sends the row to the host */
    for (int which = 0; which < 5; which++) {
        hearth_sampling q = sp;
        hearth_logit_bias b = {3, 1.0f};
        if (which == 0) q.typical_p = 0.9f;
        if (which == 1) q.top_n_sigma = 1.0f;
        if (which == 2) q.repetition_penalty = 1.1f;
        if (which == 3) q.presence_penalty = 0.5f;
        if (which == 4) q.logit_bias = &b, q.n_logit_bias = 1;
        CHECK_EQ(hearth_sampler_init(&s, &q, 100, NULL), HEARTH_OK);
        CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &p), 0);
        hearth_sampler_deinit(&s);
    }
}

TEST(pick_cpu_op_rows_match_row_reference) {
    hearth_cpu_ctx *c;
    CHECK_EQ(hearth_cpu_ctx_new(&c, 2, 8, 64, 64, NULL), HEARTH_OK);
    enum { R = 7, V = 517 };
    static float x[R * V];
    uint64_t r = 3;
    for (int i = 0; i < R * V; i++) x[i] = frand(&r) * 5;
    hearth_pick_params p[R];
    hearth_pick out[R], want;
    for (int i = 0; i < R; i++)
        p[i] = (hearth_pick_params){.temperature = (float)(i % 3) * 0.6f, .key = lcg(&r), .logprobs = i % 2,
                                    .n_top = i};
    hearth_cpu_ops.pick(c, out, x, R, V, p, NULL);
    for (int i = 0; i < R; i++) {
        hearth_pick_row(&want, x + i * V, V, &p[i]);
        CHECK(memcmp(&want, &out[i], sizeof want) == 0);
    }
    hearth_cpu_ctx_free(c);
}

/* An f16 cache is an f32 cache of f16-rounded values: attention over both
 * must agree exactly. */
TEST(kv_f16_attention_equals_rounded_f32) {
    enum { HD = 16, NKV = 2, NH = 4, KVD = HD * NKV, BS = 4, NB = 8, P = 13 };
    hearth_cpu_ctx *c;
    CHECK_EQ(hearth_cpu_ctx_new(&c, 2, 16, 64, 64, NULL), HEARTH_OK);
    static float k32[NB * BS * KVD], v32[NB * BS * KVD];
    static uint16_t k16[NB * BS * KVD], v16[NB * BS * KVD];
    void *k32p[1] = {k32}, *v32p[1] = {v32}, *k16p[1] = {k16}, *v16p[1] = {v16};
    int32_t table[NB] = {5, 2, 7, 0, 1, 3, 4, 6};
    hearth_kv_view a = {k32p, v32p, table, BS, NB, KVD, NB, HEARTH_DT_F32, 0, 0, 0};
    hearth_kv_view b = {k16p, v16p, table, BS, NB, KVD, NB, HEARTH_DT_F16, 0, 0, 0};
    float kin[P * KVD], vin[P * KVD], kr[P * KVD], vr[P * KVD], q[P * NH * HD], oa[P * NH * HD], ob[P * NH * HD];
    int32_t seq[P], pos[P];
    uint64_t r = 9;
    for (int i = 0; i < P * KVD; i++) {
        kin[i] = frand(&r) * 3, vin[i] = frand(&r) * 3;
        kr[i] = hearth_f16_to_f32(hearth_f32_to_f16(kin[i]));
        vr[i] = hearth_f16_to_f32(hearth_f32_to_f16(vin[i]));
    }
    for (int i = 0; i < P * NH * HD; i++) q[i] = frand(&r);
    for (int t = 0; t < P; t++) seq[t] = 0, pos[t] = t;
    hearth_cpu_ops.kv_write(c, &a, 0, kr, vr, P, seq, pos);
    hearth_cpu_ops.kv_write(c, &b, 0, kin, vin, P, seq, pos);
    for (int i = 0; i < P; i++) { /* the stored halves are the rounded values */
        int blk = table[i / BS];
        size_t off = ((size_t)blk * BS + i % BS) * KVD;
        for (int j = 0; j < KVD; j++) CHECK(hearth_f16_to_f32(k16[off + j]) == kr[i * KVD + j]);
    }
    for (int w = 0; w <= 5; w += 5) {
        hearth_cpu_ops.attention(c, oa, q, P, &a, 0, seq, pos, NH, NKV, HD, 0.25f, w);
        hearth_cpu_ops.attention(c, ob, q, P, &b, 0, seq, pos, NH, NKV, HD, 0.25f, w);
        CHECK(memcmp(oa, ob, sizeof oa) == 0);
    }
    hearth_cpu_ctx_free(c);
}
