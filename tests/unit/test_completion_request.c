/* test_completion_request.c - OpenAI request bodies into neutral completion
 * requests: every field, every refusal naming its field, and malformed
 * bodies that must be refused, never crash. */
#include "testhelp.h"

#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    hearth_cpl_request r;
    api_req_opts o;
    hearth_cpl_error e;
    int rc;
    json_t *body; /* kept until done: o.prompts borrows from it */
} parsed;

static void parse(parsed *p, int chat, const char *body) {
    memset(p, 0, sizeof *p);
    hearth_cpl_request_init(&p->r);
    json_t *b = json_loads(body, 0, NULL);
    if (!b) {
        p->rc = -1;
        return;
    }
    p->rc = chat ? api_parse_chat(b, &p->r, &p->o, &p->e) : api_parse_text(b, &p->r, &p->o, &p->e);
    p->body = b;
}

static void done(parsed *p) {
    hearth_cpl_request_deinit(&p->r);
    json_decref(p->body);
}

/* The body is refused with status st, naming param. */
static int refused(int chat, const char *body, hearth_status st, const char *param) {
    parsed p;
    parse(&p, chat, body);
    int ok = p.rc == 1 && p.e.status == st && !strcmp(p.e.param, param) && p.e.msg[0];
    if (!ok)
        test_fail(__FILE__, __LINE__, "%s: rc %d status %d param '%s' msg '%s' (want status %d param '%s')", body, p.rc,
                  p.e.status, p.e.param, p.e.msg, st, param);
    done(&p);
    return ok;
}

TEST(request_chat_all_fields) {
    parsed p;
    parse(&p, 1,
          "{\"model\":\"x\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
          "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
          "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":-1,\"min_p\":0.05,\"seed\":7,\"max_tokens\":10,"
          "\"max_completion_tokens\":12,\"stop\":[\"x\",\"yy\"],\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,"
          "\"repetition_penalty\":1.1,\"logit_bias\":{\"42\":-100,\"7\":5.5},\"logprobs\":true,\"top_logprobs\":3,"
          "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"n\":1,\"response_format\":{\"type\":\"text\"},"
          "\"user\":\"u\",\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    CHECK_EQ(p.rc, 0);
    CHECK(p.r.chat);
    CHECK(p.r.p.has_temperature && p.r.p.temperature == 0.5f);
    CHECK(p.r.p.has_top_p && p.r.p.top_p == 0.9f);
    CHECK(p.r.p.has_top_k && p.r.p.top_k == 0);
    CHECK(p.r.p.has_min_p && p.r.p.has_seed && p.r.p.seed == 7);
    CHECK(p.r.p.has_max_tokens && p.r.p.max_tokens == 12); /* max_completion_tokens wins */
    CHECK_EQ(p.r.n_stop, 2);
    CHECK_STR(p.r.stop[1], "yy");
    CHECK(p.r.p.presence_penalty == 0.5f && p.r.p.frequency_penalty == -0.5f && p.r.p.repetition_penalty == 1.1f);
    CHECK_EQ(p.r.n_bias, 2);
    CHECK(p.r.logprobs && p.r.top_logprobs == 3);
    CHECK(p.o.stream && p.o.include_usage);
    CHECK(json_is_false(json_object_get(p.r.template_kwargs, "enable_thinking")));
    json_t *m0 = json_array_get(p.r.messages, 0), *m1 = json_array_get(p.r.messages, 1);
    CHECK_STR(json_string_value(json_object_get(m0, "role")), "system");
    CHECK_STR(json_string_value(json_object_get(m1, "content")), "a\nb");
    done(&p);
}

TEST(request_chat_tool_round_trip_messages) {
    parsed p;
    parse(&p, 1,
          "{\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
          "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
          "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
          "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C\"}],"
          "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}]}");
    CHECK_EQ(p.rc, 0);
    CHECK(p.r.parse_tools && json_array_size(p.r.tools) == 1);
    json_t *a = json_array_get(p.r.messages, 1), *t = json_array_get(p.r.messages, 2);
    CHECK(json_is_null(json_object_get(a, "content")));
    json_t *args = json_object_get(json_object_get(json_array_get(json_object_get(a, "tool_calls"), 0), "function"),
                                   "arguments");
    CHECK(json_is_object(args)); /* templates want a mapping, as transformers passes it */
    CHECK_STR(json_string_value(json_object_get(args, "city")), "Paris");
    CHECK_STR(json_string_value(json_object_get(t, "tool_call_id")), "call_1");
    CHECK_STR(json_string_value(json_object_get(t, "name")), "get_weather"); /* from the call it answers */
    done(&p);
    /* tool_choice none: the tools are not offered, no parsing */
    parse(&p, 1,
          "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"none\","
          "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}");
    CHECK_EQ(p.rc, 0);
    CHECK(!p.r.parse_tools && !p.r.tools);
    done(&p);
}

TEST(request_refusals_name_the_field) {
    const char *M = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char b[1024];
#define R(status, param, ...)                           \
    snprintf(b, sizeof b, __VA_ARGS__);                 \
    CHECK(refused(1, b, status, param))
    R(HEARTH_EINVAL, "", "[1,2]");
    R(HEARTH_EINVAL, "messages", "{}");
    R(HEARTH_EINVAL, "messages", "{\"messages\":[]}");
    R(HEARTH_EINVAL, "messages", "{\"messages\":\"hi\"}");
    R(HEARTH_EINVAL, "messages", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}");
    R(HEARTH_EINVAL, "messages", "{\"messages\":[{\"role\":\"user\"}]}");
    R(HEARTH_EINVAL, "messages", "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}");
    R(HEARTH_ENOTSUP, "messages",
      "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}");
    R(HEARTH_EINVAL, "temperature", "{%s,\"temperature\":\"hot\"}", M);
    R(HEARTH_EINVAL, "temperature", "{%s,\"temperature\":3}", M);
    R(HEARTH_EINVAL, "top_p", "{%s,\"top_p\":0}", M);
    R(HEARTH_EINVAL, "top_k", "{%s,\"top_k\":1.5}", M);
    R(HEARTH_EINVAL, "max_tokens", "{%s,\"max_tokens\":0}", M);
    R(HEARTH_EINVAL, "max_completion_tokens", "{%s,\"max_completion_tokens\":-3}", M);
    R(HEARTH_EINVAL, "presence_penalty", "{%s,\"presence_penalty\":5}", M);
    R(HEARTH_EINVAL, "stop", "{%s,\"stop\":5}", M);
    R(HEARTH_EINVAL, "stop", "{%s,\"stop\":[\"a\",\"\"]}", M);
    R(HEARTH_EINVAL, "stop", "{%s,\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\","
                             "\"13\",\"14\",\"15\",\"16\",\"17\"]}",
      M);
    R(HEARTH_EINVAL, "logit_bias", "{%s,\"logit_bias\":{\"abc\":1}}", M);
    R(HEARTH_EINVAL, "logit_bias", "{%s,\"logit_bias\":{\"5\":200}}", M);
    R(HEARTH_EINVAL, "top_logprobs", "{%s,\"top_logprobs\":2}", M);
    R(HEARTH_EINVAL, "top_logprobs", "{%s,\"logprobs\":true,\"top_logprobs\":21}", M);
    R(HEARTH_EINVAL, "stream_options", "{%s,\"stream_options\":{\"include_usage\":true}}", M);
    R(HEARTH_EINVAL, "stream", "{%s,\"stream\":\"yes\"}", M);
    R(HEARTH_EINVAL, "n", "{%s,\"n\":0}", M);
    R(HEARTH_EINVAL, "n", "{%s,\"n\":65}", M); /* API_MAX_CHOICES */
    R(HEARTH_EINVAL, "response_format", "{%s,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}", M);
    R(HEARTH_EINVAL, "response_format", "{%s,\"response_format\":{\"type\":\"xml\"}}", M);
    R(HEARTH_EINVAL, "response_format", "{%s,\"response_format\":\"json\"}", M);
    R(HEARTH_EINVAL, "tool_choice", "{%s,\"tool_choice\":\"required\"}", M); /* no tools to force */
    R(HEARTH_EINVAL, "tool_choice", "{%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}", M);
    R(HEARTH_EINVAL, "tool_choice",
      "{%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"g\"}}],"
      "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}", M); /* not among them */
    R(HEARTH_ENOTSUP, "tool_choice",
      "{%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":\"required\","
      "\"response_format\":{\"type\":\"json_object\"}}", M);
    R(HEARTH_EINVAL, "tools", "{%s,\"tools\":[{\"type\":\"function\"}]}", M);
    R(HEARTH_EINVAL, "tools", "{%s,\"tools\":[{\"type\":\"function\",\"function\":{}}]}", M);
    R(HEARTH_ENOTSUP, "functions", "{%s,\"functions\":[]}", M);
    R(HEARTH_EINVAL, "model", "{%s,\"model\":5}", M);
#undef R
}

TEST(request_text_prompt_forms) {
    parsed p;
    parse(&p, 0, "{\"prompt\":\"Once\",\"logprobs\":2,\"max_tokens\":3}");
    CHECK_EQ(p.rc, 0);
    CHECK_STR(p.r.prompt, "Once");
    CHECK(p.r.logprobs && p.r.top_logprobs == 2);
    done(&p);
    parse(&p, 0, "{\"prompt\":[\"Once\"]}");
    CHECK_EQ(p.rc, 0);
    CHECK_STR(p.r.prompt, "Once");
    done(&p);
    parse(&p, 0, "{\"prompt\":[1,2,3]}");
    CHECK_EQ(p.rc, 0);
    CHECK(p.r.n_prompt_ids == 3 && p.r.prompt_ids[2] == 3 && !p.r.prompt);
    done(&p);
    parse(&p, 0, "{\"prompt\":[[4,5]]}");
    CHECK_EQ(p.rc, 0);
    CHECK(p.r.n_prompt_ids == 2 && p.r.prompt_ids[0] == 4);
    done(&p);
    CHECK(refused(0, "{}", HEARTH_EINVAL, "prompt"));
    parse(&p, 0, "{\"prompt\":[\"a\",\"b\"],\"n\":2}"); /* a batch: the first prompt, the rest at start */
    CHECK(p.rc == 0 && json_array_size(p.o.prompts) == 2 && p.o.n == 2);
    CHECK_STR(p.r.prompt, "a");
    done(&p);
    parse(&p, 0, "{\"prompt\":[[7,8],[9]]}");
    CHECK(p.rc == 0 && json_array_size(p.o.prompts) == 2 && p.r.n_prompt_ids == 2 && p.r.prompt_ids[1] == 8);
    done(&p);
    CHECK(refused(0, "{\"prompt\":[\"a\",1]}", HEARTH_EINVAL, "prompt"));
    CHECK(refused(0, "{\"prompt\":[\"a\",\"b\"],\"n\":40}", HEARTH_EINVAL, "prompt")); /* 80 choices */
    CHECK(refused(0, "{\"prompt\":[1,-2]}", HEARTH_EINVAL, "prompt"));
    CHECK(refused(0, "{\"prompt\":{}}", HEARTH_EINVAL, "prompt"));
    parse(&p, 0, "{\"prompt\":\"x\",\"echo\":true,\"max_tokens\":0}"); /* echo: the prompt alone */
    CHECK(p.rc == 0 && p.r.echo && p.r.p.has_max_tokens && p.r.p.max_tokens == 0);
    done(&p);
    CHECK(refused(0, "{\"prompt\":\"x\",\"max_tokens\":0}", HEARTH_EINVAL, "max_tokens"));
    CHECK(refused(0, "{\"prompt\":\"x\",\"echo\":1}", HEARTH_EINVAL, "echo"));
    parse(&p, 0, "{\"prompt\":\"x\",\"suffix\":\"y\"}"); /* insert mode: the prompt is the prefix */
    CHECK(p.rc == 0 && p.r.infill && !strcmp(p.r.infill->prefix, "x") && !strcmp(p.r.infill->suffix, "y") &&
          !strcmp(p.r.prompt, ""));
    done(&p);
    CHECK(refused(0, "{\"prompt\":[\"x\",\"z\"],\"suffix\":\"y\"}", HEARTH_ENOTSUP, "suffix"));
    CHECK(refused(0, "{\"prompt\":\"x\",\"suffix\":\"y\",\"echo\":true}", HEARTH_EINVAL, "suffix"));
    CHECK(refused(0, "{\"prompt\":\"x\",\"best_of\":3}", HEARTH_ENOTSUP, "best_of"));
    CHECK(refused(0, "{\"prompt\":\"x\",\"logprobs\":6}", HEARTH_EINVAL, "logprobs"));
}

/* Random mutations of valid bodies: refused or accepted, never a crash or a
 * leak (run under ASan by make asan). */
TEST(request_mutations_never_crash) {
    const char *seeds[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]},{\"role\":\"assistant\","
        "\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","
        "\"tool_call_id\":\"c\",\"content\":\"r\"}],\"stop\":[\"x\"],\"logit_bias\":{\"1\":2},\"tools\":[{\"type\":"
        "\"function\",\"function\":{\"name\":\"f\"}}],\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
        "{\"prompt\":[[1,2,3]],\"logprobs\":3,\"stop\":\"s\",\"max_tokens\":4,\"seed\":1}",
    };
    uint64_t x = 12345;
    int accepted = 0, refused_n = 0;
    for (int it = 0; it < 4000; it++) {
        const char *seed = seeds[it % 2];
        char buf[1024];
        size_t n = strlen(seed);
        memcpy(buf, seed, n + 1);
        for (int k = 0; k < 3; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t pos = (size_t)(x % n);
            const char repl[] = "{}[]\",:0-1tnx ";
            buf[pos] = repl[(x >> 20) % (sizeof repl - 1)];
        }
        parsed p;
        parse(&p, it % 2 == 0, buf);
        if (p.rc == 0) accepted++;
        else if (p.rc == 1) {
            refused_n++;
            CHECK(p.e.msg[0]);
        }
        done(&p);
    }
    CHECK(accepted > 0 && refused_n > 0);
}

/* request > server flag > model (generation_config.json) > built-in */
TEST(request_settings_precedence) {
    hearth_gen_defaults g;
    memset(&g, 0, sizeof g);
    g.has_temperature = 1, g.temperature = 0.6f;
    g.has_top_p = 1, g.top_p = 0.9f;
    g.has_top_k = 1, g.top_k = 20;
    g.has_max_new_tokens = 1, g.max_new_tokens = 100;
    hearth_cpl_params model, flags = {0}, req = {0}, r = {0};
    hearth_cpl_params_from_gen(&model, &g);
    flags.has_temperature = 1, flags.temperature = 0.2f;
    flags.has_max_tokens = 1, flags.max_tokens = 50;
    req.has_top_p = 1, req.top_p = 0.5f;
    req.has_max_tokens = 1, req.max_tokens = 7;
    r.temperature = 1.0f, r.top_p = 1.0f, r.has_temperature = 1; /* built-in */
    hearth_cpl_params_overlay(&r, &model);
    hearth_cpl_params_overlay(&r, &flags);
    hearth_cpl_params_overlay(&r, &req);
    CHECK(r.temperature == 0.2f); /* flag over model */
    CHECK(r.top_p == 0.5f);       /* request over model */
    CHECK(r.has_top_k && r.top_k == 20); /* model over built-in */
    CHECK(r.max_tokens == 7);     /* request over flag over model */
    CHECK(!r.has_seed && !r.has_min_p);
    /* transformers: do_sample=false is greedy whatever the temperature */
    g.has_do_sample = 1, g.do_sample = 0;
    hearth_cpl_params_from_gen(&model, &g);
    CHECK(model.has_temperature && model.temperature == 0);
}

TEST(request_json_mode) {
    parsed p;
    parse(&p, 1,
          "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}");
    CHECK_EQ(p.rc, 0);
    CHECK_EQ(p.r.json_object, 1);
    done(&p);
    parse(&p, 1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"text\"}}");
    CHECK_EQ(p.rc, 0);
    CHECK_EQ(p.r.json_object, 0);
    done(&p);
}
