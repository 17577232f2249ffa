/* test_sampler_llama.c - llama.cpp's samplers in hearth's (DRY, the repeat
 * penalty's window, typical_p, top_n_sigma, XTC) against llama.cpp's own
 * and mirostat / dynamic temperature (tests/fixtures/smollm2/sampler_golden.json,
 * tools/oracle/make_sampler_goldens.py),
 * and the windows' bookkeeping. */
#include "testhelp.h"
#include "smollm_tok.h"

#include "completion/dry_breakers.h"
#include "engine/sampler.h"
#include "engine/sampler_llama.h"
#include "io/gguf.h"

#include <jansson.h>
#include <stdlib.h>

static json_t *golden(const char *part) {
    json_t *g = json_load_file(test_path("tests/fixtures/smollm2/sampler_golden.json"), 0, NULL);
    json_t *p = g ? json_incref(json_object_get(g, part)) : NULL;
    json_decref(g);
    return p;
}


/* Each golden history through hearth_dry_apply, with breakers built from
 * the same strings over hearth's vocabulary: the same penalized tokens, the
 * same float penalties. */
TEST(sampler_dry_matches_llamacpp) {
    json_t *cases = golden("dry");
    hearth_tokenizer *tok = smollm();
    CHECK(cases && json_array_size(cases) > 0 && tok);
    hearth_vocab_bytes vb = {0};
    hearth_err err = {0};
    CHECK_EQ(hearth_vocab_bytes_build(&vb, tok, &err), HEARTH_OK);
    int nv = hearth_tok_n_vocab(tok);
    float *logits = malloc(sizeof *logits * (size_t)nv);
    size_t ci;
    json_t *c;
    int failures = 0;
    json_array_foreach(cases, ci, c) {
        json_t *hist = json_object_get(c, "history"), *brk = json_object_get(c, "breakers");
        const char *strs[8];
        int nb = (int)json_array_size(brk);
        for (int i = 0; i < nb && i < 8; i++) strs[i] = json_string_value(json_array_get(brk, (size_t)i));
        hearth_dry_breakers b;
        CHECK_EQ(hearth_dry_breakers_build(&b, &vb, tok, strs, nb, &err), HEARTH_OK);
        int n = (int)json_array_size(hist), last_n = (int)json_integer_value(json_object_get(c, "last_n"));
        int w = n < last_n ? n : last_n;
        int32_t *h = malloc(sizeof *h * (size_t)w * 3);
        int64_t *pairs = malloc(sizeof *pairs * (size_t)w);
        for (int i = 0; i < w; i++) h[i] = (int32_t)json_integer_value(json_array_get(hist, (size_t)(n - w + i)));
        hearth_dry_params p = {(float)json_number_value(json_object_get(c, "multiplier")),
                               (float)json_number_value(json_object_get(c, "base")),
                               (int)json_integer_value(json_object_get(c, "allowed_length"))};
        for (int i = 0; i < nv; i++) logits[i] = 0.0f;
        hearth_dry_apply(&p, &b, h, w, h + w, pairs, logits, nv);
        json_t *want = json_object_get(c, "logits");
        int n_pen = 0;
        for (int i = 0; i < nv; i++) n_pen += logits[i] != 0.0f;
        if (n_pen != (int)json_array_size(want)) {
            fprintf(stderr, "  case %zu: %d tokens penalized, llama.cpp %zu\n", ci, n_pen, json_array_size(want));
            failures++;
        }
        size_t k;
        json_t *x;
        json_array_foreach(want, k, x) {
            int id = (int)json_integer_value(json_array_get(x, 0));
            float v = (float)json_number_value(json_array_get(x, 1));
            if (logits[id] != v) {
                fprintf(stderr, "  case %zu: token %d: %.9g, llama.cpp %.9g\n", ci, id, logits[id], v);
                failures++;
            }
        }
        free(h);
        free(pairs);
        hearth_dry_breakers_free(&b);
    }
    free(logits);
    hearth_vocab_bytes_free(&vb);
    hearth_tok_free(tok);
    json_decref(cases);
    CHECK_EQ(failures, 0);
}

/* What a filter keeps, seen as the tokens a hot draw (temperature 100:
 * nearly uniform over what is kept) ever takes in 4000 draws. */
static void drawn_set(const hearth_sampling *p, const float *base, int vocab, uint8_t *seen) {
    hearth_sampler s;
    memset(seen, 0, (size_t)vocab);
    if (hearth_sampler_init(&s, p, vocab, NULL) != HEARTH_OK) return;
    for (int i = 0; i < 4000; i++) {
        float l[16];
        memcpy(l, base, sizeof(float) * (size_t)vocab);
        seen[hearth_sampler_sample(&s, l, NULL)] = 1;
    }
    hearth_sampler_deinit(&s);
}

/* A golden case's logit vector into l[16] (its length), and its kept ids as want[16] flags when it has them. */
static int case_vector(const json_t *c, float *l, uint8_t *want) {
    json_t *lj = json_object_get(c, "logits"), *x;
    int nv = (int)json_array_size(lj);
    if (nv > 16) return -1;
    for (int i = 0; i < nv; i++) l[i] = (float)json_number_value(json_array_get(lj, (size_t)i));
    memset(want, 0, 16);
    size_t k;
    json_array_foreach(json_object_get(c, "keep"), k, x) want[json_integer_value(x)] = 1;
    return nv;
}

/* 1 (and the two sets printed) when the drawn tokens are not llama.cpp's. */
static int sets_differ(size_t ci, const char *kind, float v, const uint8_t *seen, const uint8_t *want, int nv) {
    if (!memcmp(seen, want, (size_t)nv)) return 0;
    fprintf(stderr, "  case %zu (%s %g): drawn", ci, kind, v);
    for (int i = 0; i < nv; i++)
        if (seen[i]) fprintf(stderr, " %d", i);
    fprintf(stderr, ", llama.cpp's:");
    for (int i = 0; i < nv; i++)
        if (want[i]) fprintf(stderr, " %d", i);
    fprintf(stderr, "\n");
    return 1;
}

TEST(sampler_filters_match_llamacpp) {
    json_t *cases = golden("filters");
    CHECK(cases && json_array_size(cases) > 0);
    size_t ci;
    json_t *c;
    int failures = 0;
    json_array_foreach(cases, ci, c) {
        const char *kind = json_string_value(json_object_get(c, "kind"));
        float v = (float)json_number_value(json_object_get(c, "value")), l[16];
        uint8_t seen[16], want[16];
        int nv = case_vector(c, l, want);
        CHECK(nv > 0);
        hearth_sampling p;
        hearth_sampling_default(&p);
        p.temperature = 100.0f;
        p.seed = 1234 + ci;
        p.has_seed = 1;
        if (!strcmp(kind, "typical_p")) p.typical_p = v;
        else if (!strcmp(kind, "top_n_sigma")) p.top_n_sigma = v;
        else p.xtc_probability = 1.0f, p.xtc_threshold = v;
        drawn_set(&p, l, nv, seen);
        failures += sets_differ(ci, kind, v, seen, want, nv);
    }
    json_decref(cases);
    CHECK_EQ(failures, 0);
}

/* The repeat penalty's window: a token seen only before the last N tokens
 * is not penalized, one inside is, and leaving the window frees it. */
TEST(sampler_repeat_last_n_window) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    p.repetition_penalty = 100.0f;
    p.repeat_last_n = 3;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 6, NULL), HEARTH_OK);
    int32_t prompt[] = {1, 2, 3, 4};
    hearth_sampler_accept_prompt(&s, prompt, 4); /* window: 2 3 4 */
    float l[6] = {0.0f, 5.0f, 4.0f, 3.0f, 2.0f, 1.0f};
    float c[6];
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 1); /* 1 left the window */
    hearth_sampler_accept(&s, 5);                    /* window: 3 4 5 */
    hearth_sampler_accept(&s, 5);                    /* window: 4 5 5 */
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 1);
    CHECK(c[2] == 4.0f && c[3] == 3.0f && c[4] < 1.0f && c[5] < 1.0f);
    hearth_sampler_deinit(&s);
    /* 0 = the whole context, as before */
    p.repeat_last_n = 0;
    CHECK_EQ(hearth_sampler_init(&s, &p, 6, NULL), HEARTH_OK);
    hearth_sampler_accept_prompt(&s, prompt, 4);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 5);
    hearth_sampler_deinit(&s);
}

/* DRY through the sampler: the repeat's next token loses to the runner-up
 * once the repeat is long enough, and a breaker token in between resets it. */
TEST(sampler_dry_in_the_sampler) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.temperature = 0;
    p.dry.multiplier = 1.0f;
    p.dry_last_n = 64;
    int32_t head = 7;
    int32_t off[2] = {0, 0};
    hearth_dry_breakers b = {1, &head, off, NULL}; /* token 7 is a breaker */
    p.dry_breakers = &b;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 8, NULL), HEARTH_OK);
    int32_t prompt[] = {1, 2, 3, 4, 1, 2, 3}; /* next 4 would make "1 2 3 4" twice: repeat of 3, penalty 1.75 */
    hearth_sampler_accept_prompt(&s, prompt, 7);
    float l[8] = {0, 0, 0, 0, 2.0f, 1.0f, 0, 0}, c[8];
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 5);
    CHECK_NEAR(c[4], 2.0f - 1.75f, 1e-6);
    hearth_sampler_deinit(&s);
    int32_t broken[] = {1, 2, 3, 4, 1, 7, 2, 3}; /* the breaker limits the repeat to "2 3": 1.0 */
    CHECK_EQ(hearth_sampler_init(&s, &p, 8, NULL), HEARTH_OK);
    hearth_sampler_accept_prompt(&s, broken, 8);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 4);
    CHECK_NEAR(c[4], 2.0f - 1.0f, 1e-6);
    hearth_sampler_deinit(&s);
}

TEST(sampler_llama_settings_refused) {
    hearth_sampling p;
    hearth_sampler s;
    hearth_err err = {0};
    hearth_sampling_default(&p);
    p.typical_p = 0.0f;
    CHECK_EQ(hearth_sampler_init(&s, &p, 8, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "typical_p"));
    hearth_sampling_default(&p);
    p.dry.multiplier = 0.5f; /* no window */
    CHECK_EQ(hearth_sampler_init(&s, &p, 8, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "dry_"));
    hearth_sampling_default(&p);
    p.xtc_probability = 1.5f;
    CHECK_EQ(hearth_sampler_init(&s, &p, 8, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "xtc_probability"));
}

/* Mirostat's first draw can take exactly llama.cpp's tokens (the support of
 * 20000 first draws, each from a fresh sampler: mu = 2 tau); the dynamic
 * temperature is llama.cpp's. */
TEST(sampler_mirostat_and_dynatemp_match_llamacpp) {
    json_t *cases = golden("draws");
    CHECK(cases && json_array_size(cases) > 0);
    size_t ci;
    json_t *c;
    int failures = 0;
    json_array_foreach(cases, ci, c) {
        const char *kind = json_string_value(json_object_get(c, "kind"));
        float l[16];
        uint8_t seen[16] = {0}, want[16];
        int nv = case_vector(c, l, want);
        CHECK(nv > 0);
        hearth_sampling p;
        hearth_sampling_default(&p);
        p.seed = 99 + ci;
        p.has_seed = 1;
        hearth_sampler s;
        if (!strcmp(kind, "dynatemp")) { /* the vectors are sorted, largest first */
            p.dynatemp_range = (float)json_number_value(json_object_get(c, "delta"));
            p.dynatemp_exponent = (float)json_number_value(json_object_get(c, "exponent"));
            CHECK_EQ(hearth_sampler_init(&s, &p, nv, NULL), HEARTH_OK);
            for (int i = 0; i < nv; i++) s.probs[i] = expf(l[i] - l[0]);
            double t = hearth_smp_dynatemp(&s, nv, nv), want = json_number_value(json_object_get(c, "temperature"));
            hearth_sampler_deinit(&s);
            if (fabs(t - want) > 1e-5 * want) {
                fprintf(stderr, "  case %zu: dynamic temperature %.7g, llama.cpp %.7g\n", ci, t, want);
                failures++;
            }
            continue;
        }
        p.mirostat = kind[strlen(kind) - 1] - '0';
        p.mirostat_tau = (float)json_number_value(json_object_get(c, "tau"));
        for (int d = 0; d < 20000; d++) {
            p.seed = (uint64_t)d * 7919 + ci;
            CHECK_EQ(hearth_sampler_init(&s, &p, nv, NULL), HEARTH_OK);
            float w[16];
            memcpy(w, l, sizeof(float) * (size_t)nv);
            seen[hearth_sampler_sample(&s, w, NULL)] = 1;
            hearth_sampler_deinit(&s);
        }
        failures += sets_differ(ci, kind, p.mirostat_tau, seen, want, nv);
    }
    json_decref(cases);
    CHECK_EQ(failures, 0);
}

/* Mirostat's bound follows the surprise of what it draws: mu moves by
 * eta * (tau - surprise) each token. */
TEST(sampler_mirostat_updates_mu) {
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.mirostat = 2;
    p.mirostat_tau = 3.0f;
    p.mirostat_eta = 0.5f;
    p.seed = 5;
    p.has_seed = 1;
    hearth_sampler s;
    CHECK_EQ(hearth_sampler_init(&s, &p, 4, NULL), HEARTH_OK);
    CHECK_NEAR(s.mu, 6.0f, 1e-6);
    float l[4] = {0.0f, -100.0f, -100.0f, -100.0f}; /* one token left: surprise 0 */
    CHECK_EQ(hearth_sampler_sample(&s, l, NULL), 0);
    CHECK_NEAR(s.mu, 6.0f - 0.5f * (0.0f - 3.0f), 1e-5);
    hearth_sampler_deinit(&s);
}

/* llama.cpp's infill sampler (its llama_sampler_infill_apply, read): a token
 * whose text starts a likelier one's gives it its mass and leaves, then only
 * the ends and what holds 0.2 stay; ends likely enough for the candidates
 * counted leave only the ends; nothing left but the first end. */
TEST(sampler_infill) {
    static const char *const text[] = {"", "ab", "a", "abc", "x", "y", "z", "w", "v"};
    uint32_t off[10] = {0};
    char bytes[32];
    uint8_t special[9] = {1};
    for (int i = 0; i < 9; i++) {
        off[i + 1] = off[i] + (uint32_t)strlen(text[i]);
        memcpy(bytes + off[i], text[i], strlen(text[i]));
    }
    hearth_sampling p;
    hearth_sampling_default(&p);
    p.infill = 1;
    p.infill_vocab = (hearth_infill_vocab){.off = off, .bytes = (const uint8_t *)bytes, .special = special, .n_eog = 1};
    p.infill_vocab.eog[0] = 0;
    p.top_k = 6;
    p.temperature = 1.0f;
    p.seed = 7, p.has_seed = 1;
    hearth_sampler s;
    /* ab .30, a .25, abc .10, x .15, y .15, end .05: a and abc join ab (.65); x and y fall under 0.2 */
    float want[9] = {0.05f, 0.30f, 0.25f, 0.10f, 0.15f, 0.15f, 1e-9f, 1e-9f, 1e-9f}, l[9], c[9];
    for (int i = 0; i < 9; i++) l[i] = logf(want[i]);
    CHECK_EQ(hearth_sampler_init(&s, &p, 9, NULL), HEARTH_OK);
    int seen[9] = {0};
    for (int k = 0; k < 400; k++) {
        memcpy(c, l, sizeof c);
        seen[hearth_sampler_sample(&s, c, NULL)]++;
    }
    hearth_sampler_deinit(&s);
    printf("  ab %d, end %d of 400\n", seen[1], seen[0]);
    CHECK(seen[1] + seen[0] == 400 && seen[0] > 20 && seen[1] > 300); /* the end at .05 / .35 */
    /* the end at .10 of six candidates: 3 x .1 x 6 > .9, the ends alone, even at temperature 0 */
    float w2[9] = {0.10f, 0.30f, 0.20f, 0.10f, 0.15f, 0.15f, 1e-9f, 1e-9f, 1e-9f};
    for (int i = 0; i < 9; i++) l[i] = logf(w2[i]);
    p.temperature = 0.0f;
    CHECK_EQ(hearth_sampler_init(&s, &p, 9, NULL), HEARTH_OK);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 0);
    hearth_sampler_deinit(&s);
    p.infill = 0; /* without it: the likeliest */
    CHECK_EQ(hearth_sampler_init(&s, &p, 9, NULL), HEARTH_OK);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 1);
    hearth_sampler_deinit(&s);
    /* six texts of 1/6, none a prefix of another, the end outside the top 6: nothing holds 0.2, the end */
    float w3[9] = {1e-6f, 1e-6f, 1.0f, 1e-6f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    for (int i = 0; i < 9; i++) l[i] = logf(w3[i]);
    p.infill = 1;
    CHECK_EQ(hearth_sampler_init(&s, &p, 9, NULL), HEARTH_OK);
    memcpy(c, l, sizeof c);
    CHECK_EQ(hearth_sampler_sample(&s, c, NULL), 0);
    hearth_sampler_deinit(&s);
}
