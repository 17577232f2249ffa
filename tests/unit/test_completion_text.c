/* test_completion_text.c - the stop matcher, the reasoning splitter and the
 * tool-call parsers, fed every way a text can be cut into pieces. */
#include "testhelp.h"

#include "completion/reasoning.h"
#include "completion/stop.h"
#include "completion/toolcall.h"

#include <stdlib.h>
#include <string.h>

/* ---- a collector for released text and calls ---- */
typedef struct {
    char content[4096], reasoning[4096], calls[4096];
    size_t nc, nr, nk;
    int n_calls, order_bad;
    int saw_call; /* a call was released; content after it must be in order */
    char log[8192]; /* every event in order: C:..|R:..|T:name(args)| */
    size_t nl;
} sink;

static void put(char *dst, size_t *n, size_t cap, const char *s, size_t len) {
    if (*n + len >= cap) len = cap - 1 - *n;
    memcpy(dst + *n, s, len);
    *n += len;
    dst[*n] = 0;
}

static void on_text(void *u, hearth_text_kind k, const char *s, size_t n) {
    sink *o = u;
    if (n == 0) o->order_bad = 1; /* pieces are never empty */
    if (k == HEARTH_TEXT_CONTENT) put(o->content, &o->nc, sizeof o->content, s, n);
    else put(o->reasoning, &o->nr, sizeof o->reasoning, s, n);
    put(o->log, &o->nl, sizeof o->log, k == HEARTH_TEXT_CONTENT ? "C" : "R", 1);
}

static void on_call(void *u, int index, const char *name, const char *args) {
    sink *o = u;
    if (index != o->n_calls) o->order_bad = 1;
    o->n_calls++;
    put(o->calls, &o->nk, sizeof o->calls, name, strlen(name));
    put(o->calls, &o->nk, sizeof o->calls, "(", 1);
    put(o->calls, &o->nk, sizeof o->calls, args, strlen(args));
    put(o->calls, &o->nk, sizeof o->calls, ")", 1);
    put(o->log, &o->nl, sizeof o->log, "T", 1);
}

/* The log collapsed to runs ("CCRT" -> "CRT") to compare event order across splits. */
static void collapse(char *s) {
    size_t w = 0;
    for (size_t r = 0; s[r]; r++)
        if (w == 0 || s[w - 1] != s[r]) s[w++] = s[r];
    s[w] = 0;
}

/* Cut points: every single cut, every pair of cuts, and byte by byte. */
typedef void (*run_fn)(const char *text, const size_t *cuts, int n_cuts, sink *out, void *ctx);

static int check_all_splits(const char *text, run_fn run, void *ctx, const sink *want) {
    size_t n = strlen(text);
    size_t cuts[4096];
    sink *got = malloc(sizeof *got);
    int bad = 0;
    char wlog[8192];
    snprintf(wlog, sizeof wlog, "%s", want->log);
    collapse(wlog);
    for (size_t a = 0; a <= n && !bad; a++)
        for (size_t b = a; b <= n && !bad; b++) {
            cuts[0] = a;
            cuts[1] = b;
            memset(got, 0, sizeof *got);
            run(text, cuts, 2, got, ctx);
            collapse(got->log);
            if (strcmp(got->content, want->content) || strcmp(got->reasoning, want->reasoning) ||
                strcmp(got->calls, want->calls) || strcmp(got->log, wlog) || got->order_bad) {
                test_fail(__FILE__, __LINE__,
                          "split at %zu,%zu of \"%s\": content \"%s\" (want \"%s\"), reasoning \"%s\" (want "
                          "\"%s\"), calls \"%s\" (want \"%s\"), order %s (want %s)",
                          a, b, text, got->content, want->content, got->reasoning, want->reasoning, got->calls,
                          want->calls, got->log, wlog);
                bad = 1;
            }
        }
    if (!bad) {
        for (size_t i = 0; i < n; i++) cuts[i] = i;
        memset(got, 0, sizeof *got);
        run(text, cuts, (int)n, got, ctx);
        if (strcmp(got->content, want->content) || strcmp(got->reasoning, want->reasoning) ||
            strcmp(got->calls, want->calls)) {
            test_fail(__FILE__, __LINE__, "byte-by-byte feed of \"%s\": content \"%s\" want \"%s\"", text,
                      got->content, want->content);
            bad = 1;
        }
    }
    free(got);
    return !bad;
}

/* ---- stop ---- */
typedef struct {
    const char *const *stops;
    int n;
    int want_hit;
    int want_which; /* the stop string found, or -1 (not checked) */
} stop_ctx;

static void run_stop(const char *text, const size_t *cuts, int n_cuts, sink *o, void *vctx) {
    stop_ctx *c = vctx;
    hearth_stop m;
    if (hearth_stop_init(&m, c->stops, c->n, NULL) != HEARTH_OK) {
        o->order_bad = 1;
        return;
    }
    size_t n = strlen(text), prev = 0;
    char out[8192];
    int hit = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        size_t k = hearth_stop_feed(&m, text + prev, end - prev, out, &hit);
        if (k) on_text(o, HEARTH_TEXT_CONTENT, out, k);
        /* Nothing released may contain any part of a stop string at its end
         * that could complete later - checked by the final comparison. */
        prev = end;
    }
    if (!hit) {
        size_t k = hearth_stop_flush(&m, out);
        if (k) on_text(o, HEARTH_TEXT_CONTENT, out, k);
    }
    if (hit != c->want_hit) o->order_bad = 1;
    if (hit && c->want_which >= 0 && m.which != c->want_which) o->order_bad = 1;
    hearth_stop_deinit(&m);
}

static int stop_case_which(const char *text, const char *const *stops, int n, const char *want, int want_hit,
                           int want_which) {
    stop_ctx c = {stops, n, want_hit, want_which};
    sink w = {0};
    snprintf(w.content, sizeof w.content, "%s", want);
    if (*want) snprintf(w.log, sizeof w.log, "C");
    return check_all_splits(text, run_stop, &c, &w);
}

static int stop_case(const char *text, const char *const *stops, int n, const char *want, int want_hit) {
    return stop_case_which(text, stops, n, want, want_hit, -1);
}

TEST(stop_strings_across_boundaries) {
    const char *s1[] = {"###"};
    CHECK(stop_case("Hello ### world", s1, 1, "Hello ", 1));
    CHECK(stop_case("no stop here # ## #", s1, 1, "no stop here # ## #", 0));
    CHECK(stop_case("ends with ##", s1, 1, "ends with ##", 0));
    CHECK(stop_case("###", s1, 1, "", 1));
    const char *s2[] = {"\n\nUser:", "END", "ab"};
    CHECK(stop_case("Answer: 42\n\nUser: more", s2, 3, "Answer: 42", 1));
    CHECK(stop_case("x\n\nUse it. aab", s2, 3, "x\n\nUse it. a", 1)); /* "ab" completes first */
    CHECK(stop_case("EN EN ENDx", s2, 3, "EN EN ", 1));
    /* overlapping self-prefix: "aab" must still find "aab" after "aa" */
    const char *s3[] = {"aab"};
    CHECK(stop_case("aaaab!", s3, 1, "aa", 1));
    /* multi-byte UTF-8 stop */
    const char *s4[] = {"\xc3\xa9t\xc3\xa9"}; /* "été" */
    CHECK(stop_case("un \xc3\xa9t\xc3\xa9 chaud", s4, 1, "un ", 1));
    CHECK(stop_case("caf\xc3\xa9 et th\xc3\xa9", s4, 1, "caf\xc3\xa9 et th\xc3\xa9", 0));
}

TEST(stop_names_the_string_it_found) {
    /* which: the stop string that begins first, whatever the splits (none
     * here is a prefix of another, which could complete first in a split) */
    const char *s[] = {"END", "\n\nUser:", "ab", "EX"};
    CHECK(stop_case_which("Answer: 42\n\nUser: more", s, 4, "Answer: 42", 1, 1));
    CHECK(stop_case_which("x aab ENDx", s, 4, "x a", 1, 2));
    CHECK(stop_case_which("x ENDab", s, 4, "x ", 1, 0));
    CHECK(stop_case_which("x EN EXDab", s, 4, "x EN ", 1, 3));
}

TEST(stop_no_part_of_a_stop_string_is_released_early) {
    /* While a stop string is being completed, released text never ends with
     * a prefix of it: feed "Hi #", "#", "#" and check each release. */
    const char *stops[] = {"###"};
    hearth_stop m;
    CHECK_EQ(hearth_stop_init(&m, stops, 1, NULL), HEARTH_OK);
    char out[64];
    int hit;
    size_t k = hearth_stop_feed(&m, "Hi #", 4, out, &hit);
    CHECK_EQ(k, 3);
    CHECK(!memcmp(out, "Hi ", 3));
    CHECK_EQ(hearth_stop_feed(&m, "#", 1, out, &hit), 0);
    CHECK_EQ(hit, 0);
    CHECK_EQ(hearth_stop_feed(&m, "#", 1, out, &hit), 0);
    CHECK_EQ(hit, 1);
    CHECK_EQ(hearth_stop_feed(&m, "more", 4, out, &hit), 0); /* over */
    CHECK_EQ(hearth_stop_flush(&m, out), 0);
    hearth_stop_deinit(&m);
}

TEST(stop_rejects_bad_strings) {
    hearth_stop m;
    hearth_err err = {0};
    const char *empty[] = {"ok", ""};
    CHECK_EQ(hearth_stop_init(&m, empty, 2, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "stop[1]");
    char big[HEARTH_STOP_MAX_LEN + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *longs[] = {big};
    CHECK_EQ(hearth_stop_init(&m, longs, 1, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "stop[0]");
    const char *many[HEARTH_STOP_MAX + 1];
    for (int i = 0; i <= HEARTH_STOP_MAX; i++) many[i] = "x";
    CHECK_EQ(hearth_stop_init(&m, many, HEARTH_STOP_MAX + 1, &err), HEARTH_EINVAL);
    /* none: pass-through */
    CHECK_EQ(hearth_stop_init(&m, NULL, 0, &err), HEARTH_OK);
    char out[16];
    int hit;
    CHECK_EQ(hearth_stop_feed(&m, "abc", 3, out, &hit), 3);
    hearth_stop_deinit(&m);
}

/* ---- reasoning ---- */
typedef struct {
    int in_reasoning;
} rs_ctx;

static void run_rs(const char *text, const size_t *cuts, int n_cuts, sink *o, void *vctx) {
    rs_ctx *c = vctx;
    hearth_reasoning r;
    hearth_reasoning_init(&r, 1, c->in_reasoning);
    size_t n = strlen(text), prev = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        hearth_reasoning_feed(&r, text + prev, end - prev, on_text, o);
        prev = end;
    }
    hearth_reasoning_flush(&r, on_text, o);
}

static int rs_case(const char *text, int in_reasoning, const char *want_r, const char *want_c, const char *order) {
    rs_ctx c = {in_reasoning};
    sink w = {0};
    snprintf(w.reasoning, sizeof w.reasoning, "%s", want_r);
    snprintf(w.content, sizeof w.content, "%s", want_c);
    snprintf(w.log, sizeof w.log, "%s", order);
    return check_all_splits(text, run_rs, &c, &w);
}

TEST(reasoning_split_across_boundaries) {
    CHECK(rs_case("<think>\nLet me see.\n</think>\n\nThe answer is 4.", 0, "Let me see.\n", "The answer is 4.", "RC"));
    CHECK(rs_case("  <think>a < b, </thin k></think>done", 0, "a < b, </thin k>", "done", "RC"));
    /* the prompt opened the tag */
    CHECK(rs_case("\nhmm <think> is literal here</think> ok", 1, "hmm <think> is literal here", "ok", "RC"));
    /* no tags: all content, untouched (leading whitespace kept) */
    CHECK(rs_case("  plain <b>text</b>", 0, "", "  plain <b>text</b>", "C"));
    CHECK(rs_case("<thinking>not a tag", 0, "", "<thinking>not a tag", "C"));
    /* <think> later than the start is content */
    CHECK(rs_case("x <think>y</think>", 0, "", "x <think>y</think>", "C"));
    /* unfinished: the partial close tag is reasoning text */
    CHECK(rs_case("<think>still going </thi", 0, "still going </thi", "", "R"));
    CHECK(rs_case("<thi", 0, "", "<thi", "C"));
    /* close tag with '<' repeated just before */
    CHECK(rs_case("<think>a<<</think>b", 0, "a<<", "b", "RC"));
}

TEST(reasoning_disabled_passes_everything) {
    hearth_reasoning r;
    hearth_reasoning_init(&r, 0, 1);
    sink o = {0};
    hearth_reasoning_feed(&r, "<think>x</think>y", 17, on_text, &o);
    hearth_reasoning_flush(&r, on_text, &o);
    CHECK_STR(o.content, "<think>x</think>y");
    CHECK_STR(o.reasoning, "");
}

/* ---- tool calls ---- */
static void run_tc(const char *text, const size_t *cuts, int n_cuts, sink *o, void *vctx) {
    hearth_toolcall t;
    if (hearth_toolcall_init(&t, 1, NULL) != HEARTH_OK) {
        o->order_bad = 1;
        return;
    }
    size_t n = strlen(text), prev = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        hearth_toolcall_feed(&t, text + prev, end - prev, on_text, on_call, o);
        prev = end;
    }
    hearth_toolcall_flush(&t, on_text, on_call, o);
    hearth_toolcall_deinit(&t);
}

static int tc_case(const char *text, const char *want_c, const char *want_calls, const char *order) {
    sink w = {0};
    snprintf(w.content, sizeof w.content, "%s", want_c);
    snprintf(w.calls, sizeof w.calls, "%s", want_calls);
    snprintf(w.log, sizeof w.log, "%s", order);
    return check_all_splits(text, run_tc, NULL, &w);
}

TEST(toolcall_hermes_across_boundaries) {
    CHECK(tc_case("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
                  "get_weather({\"city\":\"Paris\"})", "T"));
    CHECK(tc_case("Let me check.\n<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\","
                  "\"arguments\":{\"x\":[1,2]}}</tool_call>",
                  "Let me check.\n", "a({})b({\"x\":[1,2]})", "CT"));
    /* arguments as a JSON string (some fine-tunes) */
    CHECK(tc_case("<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"k\\\": 1}\"}</tool_call>", "", "f({\"k\":1})", "T"));
    /* a missing closing tag at the end is tolerated */
    CHECK(tc_case("<tool_call>{\"name\":\"f\",\"arguments\":{\"q\":\"<tool_call>\"}}", "", "f({\"q\":\"<tool_call>\"})",
                  "T"));
    /* not JSON: everything stays content, byte for byte */
    CHECK(tc_case("a <tool_call>not json</tool_call> b", "a <tool_call>not json</tool_call> b", "", "C"));
    CHECK(tc_case("<tool_call>{\"arguments\":{}}</tool_call>", "<tool_call>{\"arguments\":{}}</tool_call>", "", "C"));
    CHECK(tc_case("text <tool_ca", "text <tool_ca", "", "C"));
    CHECK(tc_case("x<<tool_call>{\"name\":\"f\"}</tool_call>y", "x<y", "f({})", "CTC"));
}

TEST(toolcall_llama3_json_across_boundaries) {
    CHECK(tc_case("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
                  "get_weather({\"city\":\"Oslo\"})", "T"));
    CHECK(tc_case("  <|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", "f({})", "T"));
    CHECK(tc_case("[{\"name\":\"a\",\"parameters\":{}},{\"name\":\"b\",\"arguments\":{\"n\":2}}]", "",
                  "a({})b({\"n\":2})", "T"));
    CHECK(tc_case("{\"name\":\"a\",\"parameters\":{}}; {\"name\":\"b\",\"parameters\":{}}", "", "a({})b({})", "T"));
    /* JSON that is not a call is content, exactly as written */
    CHECK(tc_case(" {\"answer\": 42}", " {\"answer\": 42}", "", "C"));
    CHECK(tc_case("{\"name\":\"a\",\"parameters\":{}}; trailing", "{\"name\":\"a\",\"parameters\":{}}; trailing", "",
                  "C"));
    CHECK(tc_case("{not json", "{not json", "", "C"));
    /* JSON later in the text is not a Llama call */
    CHECK(tc_case("Sure: {\"name\":\"a\",\"parameters\":{}}", "Sure: {\"name\":\"a\",\"parameters\":{}}", "", "C"));
}

TEST(toolcall_disabled_and_oversized) {
    hearth_toolcall t;
    CHECK_EQ(hearth_toolcall_init(&t, 0, NULL), HEARTH_OK);
    sink o = {0};
    const char *s = "<tool_call>{\"name\":\"f\"}</tool_call>";
    hearth_toolcall_feed(&t, s, strlen(s), on_text, on_call, &o);
    hearth_toolcall_flush(&t, on_text, on_call, &o);
    CHECK_STR(o.content, s);
    CHECK_EQ(o.n_calls, 0);
    hearth_toolcall_deinit(&t);

    /* a capture past the bound is released as content, not kept growing */
    CHECK_EQ(hearth_toolcall_init(&t, 1, NULL), HEARTH_OK);
    size_t big = HEARTH_TOOLCALL_MAX_BYTES + 100;
    char *junk = malloc(big);
    memset(junk, 'x', big);
    size_t total = 0;
    sink *o2 = calloc(1, sizeof *o2);
    hearth_toolcall_feed(&t, "<tool_call>", 11, on_text, on_call, o2);
    for (size_t off = 0; off < big; off += 4096) {
        size_t k = big - off < 4096 ? big - off : 4096;
        hearth_toolcall_feed(&t, junk + off, k, on_text, on_call, o2);
        total += k;
    }
    hearth_toolcall_flush(&t, on_text, on_call, o2);
    CHECK_EQ(o2->n_calls, 0);
    CHECK(t.cap_size <= HEARTH_TOOLCALL_MAX_BYTES);
    CHECK_EQ(total, big);
    free(o2);
    free(junk);
    hearth_toolcall_deinit(&t);
}
