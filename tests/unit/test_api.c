/* test_api.c - the public embedding API (include/hearth.h) on the default
 * model: text out, greedy determinism, concurrent callers batched with
 * unchanged answers, stop from the callback, errors that name the file. */
#include "testhelp.h"

#include "hearth.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char text[4096];
    size_t len;
    int stop_after; /* pieces; 0 = never */
    int pieces;
} sink;

static int collect_text(void *user, const char *t, size_t n) {
    sink *s = user;
    if (s->len + n < sizeof s->text) memcpy(s->text + s->len, t, n), s->len += n;
    s->text[s->len] = 0;
    return s->stop_after && ++s->pieces >= s->stop_after;
}

typedef struct {
    hearth *h;
    const char *prompt;
    sink out;
    hearth_status st;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    hearth_gen_opts g;
    hearth_gen_opts_default(&g);
    g.temperature = 0;
    g.max_tokens = 12;
    j->st = hearth_generate_text(j->h, j->prompt, &g, collect_text, &j->out, NULL, NULL);
    return NULL;
}

TEST(api_generate_text_batched_and_stoppable) {
    hearth_open_opts o = {.model = test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"), .threads = 2, .ctx = 512};
    hearth *h;
    hearth_err err = {0};
    CHECK_MSG(hearth_open(&h, &o, &err) == HEARTH_OK, "%s", err.msg);
    const char *prompts[4] = {"The capital of France is", "Water boils at", "The largest planet is",
                              "One, two, three,"};
    job alone[4], together[4];
    for (int i = 0; i < 4; i++) {
        alone[i] = (job){.h = h, .prompt = prompts[i]};
        run_job(&alone[i]);
        CHECK_EQ(alone[i].st, HEARTH_OK);
        CHECK(alone[i].out.len > 0);
    }
    CHECK(strstr(alone[0].out.text, "Paris") != NULL);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        together[i] = (job){.h = h, .prompt = prompts[i]};
        pthread_create(&th[i], NULL, run_job, &together[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_STR(together[i].out.text, alone[i].out.text);

    hearth_gen_opts g;
    hearth_gen_opts_default(&g);
    g.max_tokens = 64;
    g.ignore_eos = 1;
    sink s = {.stop_after = 2};
    hearth_gen_result r;
    CHECK_EQ(hearth_generate_text(h, "Once upon a time", &g, collect_text, &s, &r, &err), HEARTH_OK);
    CHECK_STR(r.finish_reason, "canceled");
    CHECK(r.completion_tokens < 64);
    hearth_close(h);

    o.model = "/nonexistent/model.gguf";
    CHECK_EQ(hearth_open(&h, &o, &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, "/nonexistent/model.gguf");
}

/* hearth_open_opts.spec_ngram: the library's engine drafts by prompt lookup, and the text is the same. */
TEST(api_spec_ngram_keeps_text) {
    hearth_open_opts o = {.model = test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"), .threads = 2, .ctx = 512};
    const char *prompt = "Copy the list exactly.\napple, banana, cherry, date, elderberry, fig, grape\nCopy: apple,";
    job j[2];
    for (int spec = 0; spec < 2; spec++) {
        o.spec_ngram = spec ? 4 : 0;
        hearth *h;
        hearth_err err = {0};
        CHECK_MSG(hearth_open(&h, &o, &err) == HEARTH_OK, "%s", err.msg);
        j[spec] = (job){.h = h, .prompt = prompt};
        run_job(&j[spec]);
        CHECK_EQ(j[spec].st, HEARTH_OK);
        hearth_close(h);
    }
    CHECK(strstr(j[0].out.text, "cherry") != NULL); /* it copies, so lookup drafts */
    CHECK_STR(j[1].out.text, j[0].out.text);
}

TEST(api_json_schema_and_embeddings) {
    hearth_open_opts o = {.model = test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"), .threads = 2, .ctx = 512};
    hearth *h;
    hearth_err err = {0};
    CHECK_MSG(hearth_open(&h, &o, &err) == HEARTH_OK, "%s", err.msg);
    hearth_gen_opts g;
    hearth_gen_opts_default(&g);
    g.temperature = 0;
    g.max_tokens = 200;
    g.json_schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
                    "\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
    sink s = {0};
    hearth_gen_result r;
    CHECK_EQ(hearth_generate_text(h, "A person described as JSON:", &g, collect_text, &s, &r, &err), HEARTH_OK);
    CHECK_STR(r.finish_reason, "stop");
    json_t *v = json_loads(s.text, 0, NULL); /* jansson reads it, and it is the schema's */
    CHECK(json_is_object(v) && json_object_size(v) == 2 && json_is_string(json_object_get(v, "name")) &&
          json_is_integer(json_object_get(v, "age")));
    json_decref(v);
    g.json_schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}";
    CHECK_EQ(hearth_generate_text(h, "x", &g, collect_text, &s, &r, &err), HEARTH_ENOTSUP);
    CHECK_CONTAINS(err.msg, "'pattern'");

    float e1[1024], e2[1024], tiny[8];
    int d1, d2, d3;
    CHECK_EQ(hearth_embed(h, "The cat sat on the mat.", e1, 1024, &d1, &err), HEARTH_OK);
    CHECK_EQ(d1, 576);
    double ss = 0;
    for (int i = 0; i < d1; i++) ss += (double)e1[i] * e1[i];
    CHECK(fabs(ss - 1.0) < 1e-5);
    CHECK_EQ(hearth_embed(h, "The cat sat on the mat.", e2, 1024, &d2, &err), HEARTH_OK); /* from the cache */
    CHECK(d2 == d1 && !memcmp(e1, e2, sizeof(float) * (size_t)d1));
    CHECK_EQ(hearth_embed(h, "The cat sat on the mat.", tiny, 8, &d3, &err), HEARTH_ERANGE);
    CHECK_EQ(d3, 576);
    hearth_close(h);
}
