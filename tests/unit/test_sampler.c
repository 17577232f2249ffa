/* test_sampler.c - each sampler setting, checked by its effect on draws. */
#include "testhelp.h"

#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>

static int sample_once(hearth_sampler *s, const float *base, int vocab) {
    float l[64];
    memcpy(l, base, sizeof(float) * (size_t)vocab);
    return hearth_sampler_sample(s, l, NULL);
}

TEST(sampler_greedy_is_argmax) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, NULL), HEARTH_OK);
    float l[5] = {0.1f, 2.0f, -1.0f, 1.99f, 0.0f};
    CHECK_EQ(hearth_sampler_sample(&s, l, NULL), 1);
    hearth_sampler_deinit(&s);
}

TEST(sampler_same_seed_same_draws) {
    float base[16];
    for (int i = 0; i < 16; i++) base[i] = (float)(i % 5) * 0.3f;
    int a[200], b[200], c[200];
    for (int run = 0; run < 3; run++) {
        hearth_sampling p;
        hearth_sampling_default(&p);
        p.seed = run == 2 ? 43 : 42;
        p.has_seed = 1;
        hearth_sampler s;
        CHECK_EQ(hearth_sampler_init(&s, &p, 16, NULL), HEARTH_OK);
        int *out = run == 0 ? a : run == 1 ? b : c;
        for (int i = 0; i < 200; i++) out[i] = sample_once(&s, base, 16);
        hearth_sampler_deinit(&s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

/* Draw n times; counts[id] */
static void histogram(const hearth_sampling *p, const float *base, int vocab, int n, int *counts) {
    hearth_sampler s;
    memset(counts, 0, sizeof(int) * (size_t)vocab);
    if (hearth_sampler_init(&s, p, vocab, NULL) != HEARTH_OK) return;
    for (int i = 0; i < n; i++) counts[sample_once(&s, base, vocab)]++;
    hearth_sampler_deinit(&s);
}

TEST(sampler_temperature_one_matches_softmax) {
    float base[4] = {logf(0.5f), logf(0.25f), logf(0.15f), logf(0.10f)};
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.seed = 7;
    p.has_seed = 1;
    int counts[4];
    histogram(&p, base, 4, 40000, counts);
    const double want[4] = {0.5, 0.25, 0.15, 0.10};
    for (int i = 0; i < 4; i++) CHECK_NEAR(counts[i] / 40000.0, want[i], 0.01);
}

TEST(sampler_low_temperature_sharpens) {
    float base[3] = {1.0f, 0.5f, 0.0f};
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0.1f;
    p.seed = 1;
    p.has_seed = 1;
    int counts[3];
    histogram(&p, base, 3, 5000, counts);
    /* p(top) = 1 / (1 + e^-5 + e^-10) = 0.9932 */
    CHECK_NEAR(counts[0] / 5000.0, 0.9932, 0.005);
}

TEST(sampler_top_p_keeps_smallest_prefix) {
    float base[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.top_p = 0.6f;
    p.seed = 3;
    p.has_seed = 1;
    int counts[3];
    histogram(&p, base, 3, 4000, counts);
    CHECK_EQ(counts[2], 0);
    CHECK_NEAR(counts[0] / 4000.0, 0.5 / 0.8, 0.03); /* renormalised over the kept two */
}

TEST(sampler_min_p_and_top_k) {
    float base[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.min_p = 0.45f; /* keeps p >= 0.18: tokens 0, 1, 2 */
    p.seed = 5;
    p.has_seed = 1;
    int counts[4];
    histogram(&p, base, 4, 4000, counts);
    CHECK_EQ(counts[3], 0);
    CHECK(counts[2] > 0);
    p.top_k = 2;
    histogram(&p, base, 4, 4000, counts);
    CHECK_EQ(counts[2] + counts[3], 0);
    CHECK(counts[1] > 0);
    p.top_k = 1;
    histogram(&p, base, 4, 500, counts);
    CHECK_EQ(counts[0], 500);
}

TEST(sampler_penalties_and_bias) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    hearth_logit_bias bias[2] = {{3, 10.0f}, {0, -INFINITY}};
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, NULL), HEARTH_OK);
    int32_t prompt[1] = {1};
    hearth_sampler_accept_prompt(&s, prompt, 1);
    hearth_sampler_accept(&s, 2);
    hearth_sampler_accept(&s, 2);
    float l[5] = {5.0f, 4.0f, -1.0f, 0.0f, 1.0f};
    CHECK_EQ(hearth_sampler_sample(&s, l, NULL), 3);
    CHECK(isinf(l[0]) && l[0] < 0);            /* banned */
    CHECK_NEAR(l[1], 2.0, 1e-6);               /* prompt token: 4 / 2 */
    CHECK_NEAR(l[2], -2.0 - 0.5 - 0.5, 1e-6);  /* -1 * 2, then presence 0.5 + 2 x 0.25 */
    CHECK_NEAR(l[3], 10.0, 1e-6);
    CHECK_NEAR(l[4], 1.0, 1e-6);
    hearth_sampler_deinit(&s);
}

/* min_tokens holds its ids back until that many tokens were accepted, on the
 * host (the pick op cannot): then they may come. */
TEST(sampler_min_tokens) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    p.min_tokens = 2;
    p.min_ban[0] = 4;
    p.min_ban[1] = 0;
    p.n_min_ban = 2;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, NULL), HEARTH_OK);
    hearth_pick_params pp;
    for (int k = 0; k < 2; k++) {
        float l[5] = {3.0f, 1.0f, 2.0f, 0.0f, 9.0f};
        CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &pp), 0); /* the host's until then */
        CHECK_EQ(hearth_sampler_sample(&s, l, NULL), 2);       /* 4 and 0 held back */
        hearth_sampler_accept(&s, 2);
    }
    float l[5] = {3.0f, 1.0f, 2.0f, 0.0f, 9.0f};
    CHECK_EQ(hearth_sampler_pick_params(&s, 0, 1, &pp), 1);
    CHECK_EQ(hearth_sampler_sample(&s, l, NULL), 4);
    hearth_sampler_deinit(&s);
    p.min_ban[1] = 5; /* outside the vocabulary */
    hearth_err err = {0};
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "min_tokens");
}

TEST(sampler_logprobs) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    p.top_logprobs = 3;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, NULL), HEARTH_OK);
    float l[5] = {1.0f, 3.0f, 2.0f, 0.0f, -1.0f};
    double z = 0;
    for (int i = 0; i < 5; i++) z += exp(l[i]);
    hearth_logprobs lp;
    CHECK_EQ(hearth_sampler_sample(&s, l, &lp), 1);
    CHECK_EQ(lp.chosen.id, 1);
    CHECK_NEAR(lp.chosen.logprob, 3.0 - log(z), 1e-5);
    CHECK_EQ(lp.n_top, 3);
    CHECK_EQ(lp.top[0].id, 1);
    CHECK_EQ(lp.top[1].id, 2);
    CHECK_EQ(lp.top[2].id, 0);
    CHECK_NEAR(lp.top[2].logprob, 1.0 - log(z), 1e-5);
    hearth_sampler_deinit(&s);
}

TEST(sampler_rejects_bad_settings) {
    hearth_sampling p;
    hearth_sampler s;
    hearth_err err = {0};
    hearth_sampling_default(&p);
    p.temperature = -1;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "temperature");
    hearth_sampling_default(&p);
    p.top_p = 0;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "top_p");
    hearth_sampling_default(&p);
    hearth_logit_bias b = {7, 1.0f};
    p.logit_bias = &b;
    p.n_logit_bias = 1;
    CHECK_EQ(hearth_sampler_init(&s, &p, 5, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "token id 7");
}

/* vLLM's bad_words: a one-token word is never drawn; a longer word's last
 * token only where the output (not the prompt) ends with the word's start. */
TEST(sampler_bad_words) {
    int32_t off[] = {0, 1, 3}, ids[] = {4, 2, 3}; /* the words "4" and "2 3" */
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    p.bad_words = (hearth_token_seqs){2, off, ids};
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 6, NULL), HEARTH_OK);
    int32_t prompt[] = {1, 2};
    hearth_sampler_accept_prompt(&s, prompt, 2);
    float l[6] = {0, 0, 0, 3.0f, 4.0f, 1.0f}, c[6];
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 3); /* 4 is out; 3 is fine after a prompt's 2 */
    hearth_sampler_accept(&s, 2);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 5); /* the output ends with 2: 3 is out too */
    hearth_sampler_accept(&s, 5);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 3);
    hearth_sampler_deinit(&s);
    int32_t off_bad[] = {0, 0};
    p.bad_words = (hearth_token_seqs){1, off_bad, ids}; /* an empty word */
    CHECK_EQ(hearth_sampler_init(&s, &p, 6, NULL), HEARTH_EINVAL);
}

/* vLLM's allowed_token_ids: nothing else is drawn, at any temperature. */
TEST(sampler_allowed_token_ids) {
    int32_t allowed[] = {1, 4};
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.seed = 3;
    p.has_seed = 1;
    p.allowed_ids = allowed;
    p.n_allowed = 2;
    float base[6] = {5.0f, 0.0f, 4.0f, 3.0f, -1.0f, 2.0f};
    int counts[6];
    histogram(&p, base, 6, 500, counts);
    CHECK(counts[1] > 0 && counts[4] > 0 && counts[1] + counts[4] == 500);
    allowed[1] = 6;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 6, NULL), HEARTH_EINVAL);
}

/* A top_p prefix past the first few hundred tokens (the sampler orders only
 * as many as the filters can keep, growing from 64): draws stay inside the
 * prefix and reach deep into it; top_k over a large vocabulary likewise. */
TEST(sampler_wide_prefixes) {
    enum { V = 5000 };
    static float base[V], l[V];
    double total = 0.0;
    for (int i = 0; i < V; i++) total += exp((double)(base[i] = -0.0005f * (float)i));
    double cum = 0.0;
    int prefix = 0;
    while (cum < 0.6 && prefix < V) cum += exp((double)base[prefix++]) / total;
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.seed = 17;
    p.has_seed = 1;
    p.top_p = 0.6f;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, V, NULL), HEARTH_OK);
    int deepest = 0;
    for (int d = 0; d < 2000; d++) {
        memcpy(l, base, sizeof l);
        int id = hearth_sampler_sample(&s, l, NULL);
        CHECK(id < prefix + 1);
        if (id > deepest) deepest = id;
    }
    hearth_sampler_deinit(&s);
    CHECK(prefix > 1000 && deepest > 1000);
    p.top_p = 1.0f;
    p.top_k = 300;
    CHECK_EQ(hearth_sampler_init(&s, &p, V, NULL), HEARTH_OK);
    deepest = 0;
    for (int d = 0; d < 2000; d++) {
        memcpy(l, base, sizeof l);
        int id = hearth_sampler_sample(&s, l, NULL);
        CHECK(id < 300);
        if (id > deepest) deepest = id;
    }
    hearth_sampler_deinit(&s);
    CHECK(deepest > 250);
}
