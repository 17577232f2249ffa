/* test_completion_sink.c - the sink with the default model's real tokenizer:
 * token ids in, content / reasoning / tool-call events out. Stop strings are
 * checked at every token boundary the tokenizer produces, including inside
 * multi-byte characters that byte-level BPE splits across tokens. */
#include "testhelp.h"
#include "smollm_tok.h"

#include "completion/sink.h"
#include "io/gguf.h"

#include <stdlib.h>
#include <string.h>


typedef struct {
    char content[1024], reasoning[1024], calls[1024];
    size_t nc, nr, nk;
    int n_calls;
    char last_id[64];
} out_t;

static void add(char *dst, size_t *n, size_t cap, const char *s, size_t len) {
    if (*n + len >= cap) len = cap - 1 - *n;
    memcpy(dst + *n, s, len);
    *n += len;
    dst[*n] = 0;
}

static void on_ev(void *u, const hearth_cpl_event *ev) {
    out_t *o = u;
    if (ev->kind == HEARTH_CPL_CONTENT) add(o->content, &o->nc, sizeof o->content, ev->text, ev->len);
    else if (ev->kind == HEARTH_CPL_REASONING) add(o->reasoning, &o->nr, sizeof o->reasoning, ev->text, ev->len);
    else {
        o->n_calls++;
        add(o->calls, &o->nk, sizeof o->calls, ev->name, strlen(ev->name));
        add(o->calls, &o->nk, sizeof o->calls, ev->arguments, strlen(ev->arguments));
        snprintf(o->last_id, sizeof o->last_id, "%s", ev->id);
    }
}

/* Encode text, push its ids one by one (then end_id if >= 0), finish.
 * Returns the index of the token at which push reported the end, or -1. */
static int run(hearth_tokenizer *t, const char *text, const char *const *stops, int n_stops, int reasoning, int tools,
               int end_id, out_t *o, int *n_tokens) {
    memset(o, 0, sizeof *o);
    int32_t *ids;
    size_t n;
    if (hearth_tok_encode(t, text, strlen(text), 0, 1, &ids, &n, NULL) != HEARTH_OK) return -2;
    int32_t ends[] = {2, 0};
    hearth_sink s;
    if (hearth_sink_init(&s, t, stops, n_stops, ends, 2, reasoning, 0, tools, NULL) != HEARTH_OK) {
        free(ids);
        return -2;
    }
    int at = -1;
    for (size_t i = 0; i < n && at < 0; i++)
        if (hearth_sink_push(&s, ids[i], on_ev, o)) at = (int)i;
    if (at < 0 && end_id >= 0 && hearth_sink_push(&s, end_id, on_ev, o)) at = (int)n;
    hearth_sink_finish(&s, on_ev, o);
    hearth_sink_deinit(&s);
    free(ids);
    *n_tokens = (int)n;
    return at;
}

TEST(sink_stop_strings_on_real_tokens) {
    hearth_tokenizer *t = smollm();
    CHECK_MSG(t, "cannot load the default model's tokenizer (run scripts/setup.sh)");
    out_t o;
    int n;
    const char *s1[] = {"Paris."};
    int at = run(t, "The capital of France is Paris. It is big.", s1, 1, 0, 0, -1, &o, &n);
    CHECK_STR(o.content, "The capital of France is ");
    CHECK(at >= 0 && at < n); /* generation stops at the token that completed the stop string */
    /* a stop string that ends inside a token: the text before it is kept */
    const char *s2[] = {"capi"};
    run(t, "The capital of France", s2, 1, 0, 0, -1, &o, &n);
    CHECK_STR(o.content, "The ");
    /* an emoji is several byte-level tokens; the stop is the emoji itself */
    const char *s3[] = {"\xf0\x9f\x8d\x95"}; /* U+1F355 */
    at = run(t, "I love \xf0\x9f\x8d\x95 pizza", s3, 1, 0, 0, -1, &o, &n);
    CHECK_STR(o.content, "I love ");
    CHECK(at >= 0);
    /* no stop: everything, exactly */
    const char *s4[] = {"zzz"};
    at = run(t, "caf\xc3\xa9 \xf0\x9f\x8d\x95 ok", s4, 1, 0, 0, -1, &o, &n);
    CHECK_EQ(at, -1);
    CHECK_STR(o.content, "caf\xc3\xa9 \xf0\x9f\x8d\x95 ok");
    hearth_tok_free(t);
}

TEST(sink_end_ids_end_the_stream_and_are_not_text) {
    hearth_tokenizer *t = smollm();
    CHECK(t);
    out_t o;
    int n;
    int at = run(t, "Hello there", NULL, 0, 0, 0, 2, &o, &n);
    CHECK_EQ(at, n);
    CHECK_STR(o.content, "Hello there");
    /* the same through the text: <|im_end|> parsed as a special token ends it */
    at = run(t, "Hi<|im_end|>more", NULL, 0, 0, 0, -1, &o, &n);
    CHECK(at >= 0 && at < n);
    CHECK_STR(o.content, "Hi");
    hearth_tok_free(t);
}

TEST(sink_reasoning_and_tool_calls_on_real_tokens) {
    hearth_tokenizer *t = smollm();
    CHECK(t);
    out_t o;
    int n;
    run(t, "<think>\nThe user wants 2+2.\n</think>\n\nIt is 4.", NULL, 0, 1, 0, 2, &o, &n);
    CHECK_STR(o.reasoning, "The user wants 2+2.\n");
    CHECK_STR(o.content, "It is 4.");
    /* reasoning off: the tags are content */
    run(t, "<think>x</think>y", NULL, 0, 0, 0, 2, &o, &n);
    CHECK_STR(o.content, "<think>x</think>y");
    CHECK_STR(o.reasoning, "");
    run(t, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", NULL, 0, 1,
        1, 2, &o, &n);
    CHECK_EQ(o.n_calls, 1);
    CHECK_STR(o.calls, "get_weather{\"city\":\"Paris\"}");
    CHECK_STR(o.content, "");
    CHECK_EQ(strlen(o.last_id), 29);
    CHECK(!strncmp(o.last_id, "call_", 5));
    /* a stop string inside the reasoning ends everything there */
    const char *st[] = {"STOP"};
    run(t, "<think>a STOP b</think>c", st, 1, 1, 0, 2, &o, &n);
    CHECK_STR(o.reasoning, "a ");
    CHECK_STR(o.content, "");
    hearth_tok_free(t);
}

TEST(sink_token_text_for_logprobs) {
    hearth_tokenizer *t = smollm();
    CHECK(t);
    char buf[64];
    CHECK_EQ(hearth_sink_token_text(t, 905, buf, sizeof buf), 6);
    CHECK_STR(buf, " world");
    hearth_sink_token_text(t, 2, buf, sizeof buf); /* special tokens show their text */
    CHECK_STR(buf, "<|im_end|>");
    CHECK_EQ(hearth_sink_token_text(t, 905, buf, 4), 3); /* truncated, still terminated */
    CHECK_STR(buf, " wo");
    hearth_tok_free(t);
}

TEST(sink_rejects_bad_stop_strings) {
    hearth_tokenizer *t = smollm();
    CHECK(t);
    hearth_sink s;
    hearth_err err = {0};
    const char *bad[] = {"ok", ""};
    CHECK_EQ(hearth_sink_init(&s, t, bad, 2, NULL, 0, 0, 0, 0, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "stop[1]");
    hearth_tok_free(t);
}
