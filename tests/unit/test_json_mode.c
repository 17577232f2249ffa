/* test_json_mode.c - JSON mode: the automaton against a corpus (every prefix
 * of a valid object is accepted, the object is done only at its end, each
 * invalid text is refused), and the sampler's constraint over a small
 * vocabulary whose likeliest tokens break JSON: whatever it draws, the text
 * it ends parses as an object (jansson as the oracle). */
#include "testhelp.h"

#include "completion/json_mode.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *VALID[] = {
    "{}",
    "{ }",
    "{\"a\":1}",
    "{\"a\": -0.5e+10, \"b\": [true, false, null, [], {}], \"c\": \"x\\\"y\\\\z\\u00e9\\n\"}",
    "{\"k\": [1, 2.25, -3, 4E2, 0, {\"deep\": [[[\"s\"]]]}]}",
    "\n {\"caf\xc3\xa9\": \"\xe6\x97\xa5\xe6\x9c\xac\"}",
    "{\"n\":0.0,\"m\":-0e-1,\"o\":12345678901234567890}",
    "{\"deep\":\n                                        1}", /* a newline and 40 spaces */
};

static const char *INVALID[] = {
    "[]",            /* not an object */
    "\"s\"",         /* not an object */
    "{\"a\" 1}",     /* no colon */
    "{\"a\":01}",    /* leading zero */
    "{\"a\":1,}",    /* trailing comma */
    "{a:1}",         /* unquoted key */
    "{\"a\":tru}",   /* broken literal */
    "{\"a\":\"\x01\"}", /* control byte in a string */
    "{\"a\":\"\\x\"}", /* bad escape */
    "{\"a\":\"\\u12G4\"}", /* bad hex */
    "{\"a\":1.}",    /* no fraction digit */
    "{\"a\":1e}",    /* no exponent digit */
    "{\"a\":-}",     /* no digit */
    "{\"a\":[1 2]}", /* no comma */
    "{\"a\":1]",     /* wrong closer */
    "{} {}",         /* two objects */
    "{}x",           /* anything after */
    "{\"a\":\n                                                                  1}", /* 67 in a row */
};

TEST(json_mode_automaton_accepts_valid_objects_prefix_by_prefix) {
    for (size_t i = 0; i < sizeof VALID / sizeof *VALID; i++) {
        const uint8_t *t = (const uint8_t *)VALID[i];
        size_t n = strlen(VALID[i]);
        hearth_json_state s;
        hearth_json_init(&s);
        for (size_t k = 0; k < n; k++) {
            if (!hearth_json_feed(&s, t + k, 1)) {
                test_fail(__FILE__, __LINE__, "valid text %zu refused at byte %zu: %s", i, k, VALID[i]);
                break;
            }
            if (hearth_json_done(&s) != (k == n - 1))
                test_fail(__FILE__, __LINE__, "text %zu: done is %d at byte %zu of %zu", i, hearth_json_done(&s), k,
                          n);
        }
        /* fed whole, the same */
        hearth_json_init(&s);
        CHECK(hearth_json_feed(&s, t, n) && hearth_json_done(&s));
        /* and jansson agrees that it is an object */
        json_t *v = json_loads(VALID[i], JSON_DECODE_INT_AS_REAL, NULL);
        CHECK(json_is_object(v));
        json_decref(v);
    }
}

TEST(json_mode_automaton_refuses_invalid_texts) {
    for (size_t i = 0; i < sizeof INVALID / sizeof *INVALID; i++) {
        hearth_json_state s;
        hearth_json_init(&s);
        int ok = hearth_json_feed(&s, (const uint8_t *)INVALID[i], strlen(INVALID[i])) && hearth_json_done(&s);
        if (ok) test_fail(__FILE__, __LINE__, "invalid text %zu accepted: %s", i, INVALID[i]);
    }
    /* the nesting limit: 32 open, the 33rd refused */
    hearth_json_state s;
    hearth_json_init(&s);
    CHECK(hearth_json_feed(&s, (const uint8_t *)"{\"a\":", 5));
    for (int d = 1; d < 32; d++) CHECK(hearth_json_feed(&s, (const uint8_t *)"[", 1));
    CHECK(!hearth_json_feed(&s, (const uint8_t *)"[", 1));
}

TEST(json_mode_constraint_ends_where_nothing_can_continue) {
    /* a vocabulary that cannot finish "nu": the end id is let through rather
     * than a mask that forbids every token */
    hearth_vocab_bytes v = {.n = 3}; /* "{\"k\":", "nu" and the end */
    v.off = (uint32_t[]){0, 5, 7, 7};
    v.bytes = (uint8_t *)"{\"k\":nu";
    v.special = (uint8_t[]){0, 0, 1};
    int32_t end = 2;
    hearth_constraint c;
    hearth_err err = {0};
    CHECK_EQ(hearth_json_constraint(&c, &v, NULL, &end, 1, &err), HEARTH_OK);
    float logits[3] = {1, 0, 0};
    c.mask(c.self, logits, 3);
    CHECK(logits[0] == 1 && isinf(logits[1]) && isinf(logits[2])); /* only the object's start */
    c.accept(c.self, 0);
    float l2[3] = {0, 5, 0};
    c.mask(c.self, l2, 3);
    CHECK(l2[0] == 0 && l2[1] == 5 && isinf(l2[2])); /* a nested object, or null's start */
    c.accept(c.self, 1);
    float l3[3] = {0, 0, -1};
    c.mask(c.self, l3, 3);
    CHECK(isinf(l3[0]) && isinf(l3[1]) && l3[2] == 0); /* a dead end: the end id */
    c.free(c.self);
}

#include "toy_vocab.h"

TEST(json_mode_constraint_makes_the_sampler_end_with_an_object) {
    hearth_vocab_bytes v;
    toy_vocab(&v);
    int32_t end = END;
    int ended = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        hearth_sampling p;
        hearth_sampling_default(&p);
        p.temperature = 1.5f;
        p.seed = seed;
        p.has_seed = 1;
        hearth_err err = {0};
        CHECK_EQ(hearth_json_constraint(&p.constraint, &v, NULL, &end, 1, &err), HEARTH_OK);
        hearth_sampler smp;
        CHECK_EQ(hearth_sampler_init(&smp, &p, v.n, &err), HEARTH_OK);
        hearth_pick_params pp;
        CHECK_EQ(hearth_sampler_pick_params(&smp, 0, 1, &pp), 0); /* a constraint keeps the row on the host */
        char text[4096];
        size_t n = 0;
        int stopped = 0;
        for (int step = 0; step < 300 && !stopped; step++) {
            float logits[N_TOK + 1];
            for (int i = 0; i <= N_TOK; i++) /* the pieces are the likeliest, the end too */
                logits[i] = (float)((seed * 7 + (uint64_t)i * 13 + (uint64_t)step * 5) % 11) +
                            (i >= 96 ? 4.0f : 0.0f);
            int32_t id = hearth_sampler_sample(&smp, logits, NULL);
            hearth_sampler_accept(&smp, id);
            if (id == END) {
                stopped = 1;
                break;
            }
            size_t k = strlen(TOKENS[id]);
            if (n + k >= sizeof text) break;
            memcpy(text + n, TOKENS[id], k);
            n += k;
        }
        text[n] = 0;
        hearth_json_state s; /* every drawn text is at least a valid start */
        hearth_json_init(&s);
        if (!hearth_json_feed(&s, (const uint8_t *)text, n))
            test_fail(__FILE__, __LINE__, "seed %llu: not the start of a JSON object: %s", (unsigned long long)seed,
                      text);
        if (stopped) {
            ended++;
            /* jansson refuses numbers beyond a double's range, which JSON
             * allows: exponents' digits become 0s (still the same syntax) */
            for (size_t k = 1; k + 1 < n; k++) {
                if ((text[k] != 'e' && text[k] != 'E') || text[k - 1] < '0' || text[k - 1] > '9') continue;
                size_t j = k + 1 + (text[k + 1] == '+' || text[k + 1] == '-');
                for (; j < n && text[j] >= '0' && text[j] <= '9'; j++) text[j] = '0';
            }
            json_error_t je;
            json_t *o = json_loads(text, JSON_DECODE_INT_AS_REAL, &je);
            if (!json_is_object(o))
                test_fail(__FILE__, __LINE__, "seed %llu: ended, but jansson does not read an object (%s): %s",
                          (unsigned long long)seed, je.text, text);
            json_decref(o);
        }
        hearth_sampler_deinit(&smp); /* frees the constraint */
    }
    CHECK(ended > 50); /* most draws close their object within 300 tokens */
    hearth_vocab_bytes_free(&v);
}

TEST(json_mode_reachable_tokens_draw_as_the_whole_mask) {
    /* The sampler checks only the tokens its draw can reach, unless logprobs
     * are asked for (then it masks the whole vocabulary): the same seed must
     * draw the same tokens both ways, greedy and with every filter. */
    hearth_vocab_bytes v;
    toy_vocab(&v);
    int32_t end = END;
    const float temps[] = {0.0f, 0.7f, 1.5f};
    for (int t = 0; t < 3; t++)
        for (uint64_t seed = 1; seed <= 40; seed++) {
            hearth_sampler a, b;
            hearth_sampling p;
            hearth_sampling_default(&p);
            p.temperature = temps[t];
            p.top_p = seed % 3 ? 1.0f : 0.9f;
            p.min_p = seed % 4 ? 0.0f : 0.05f;
            p.top_k = seed % 5 ? 0 : 7;
            p.seed = seed;
            p.has_seed = 1;
            hearth_err err = {0};
            CHECK_EQ(hearth_json_constraint(&p.constraint, &v, NULL, &end, 1, &err), HEARTH_OK);
            CHECK_EQ(hearth_sampler_init(&a, &p, v.n, &err), HEARTH_OK);
            CHECK_EQ(hearth_json_constraint(&p.constraint, &v, NULL, &end, 1, &err), HEARTH_OK);
            CHECK_EQ(hearth_sampler_init(&b, &p, v.n, &err), HEARTH_OK);
            for (int step = 0; step < 120; step++) {
                float la[N_TOK + 1], lb[N_TOK + 1];
                for (int i = 0; i <= N_TOK; i++) /* spread over ~60 nats, so the window matters */
                    la[i] = lb[i] = (float)((seed * 31 + (uint64_t)i * 17 + (uint64_t)step * 7) % 61) +
                                    (i >= 96 ? 8.0f : 0.0f);
                hearth_logprobs lp;
                int32_t x = hearth_sampler_sample(&a, la, NULL), y = hearth_sampler_sample(&b, lb, &lp);
                if (x != y) {
                    test_fail(__FILE__, __LINE__, "temperature %g seed %llu step %d: %d reachable, %d whole mask",
                              temps[t], (unsigned long long)seed, step, x, y);
                    break;
                }
                hearth_sampler_accept(&a, x);
                hearth_sampler_accept(&b, y);
                if (x == END) break;
            }
            hearth_sampler_deinit(&a);
            hearth_sampler_deinit(&b);
        }
    hearth_vocab_bytes_free(&v);
}
