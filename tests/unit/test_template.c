/* test_template.c - the template interpreter: one-feature goldens from jinja2
 * (tests/fixtures/templates/unit/cases.json, by tools/oracle/template_cases.py),
 * malformed templates (an error naming the line and the construct, never a
 * crash), and the API contracts (ownership, contexts, the fixed clock). */
#include "template/template.h"
#include "testhelp.h"

#include <stdlib.h>
#include <string.h>

/* Parse + render src with a JSON context; returns the status, *out malloc'd. */
static hearth_status render_str(const char *src, const char *ctx_json, char **out, hearth_err *err) {
    hearth_tmpl *t = NULL;
    *out = NULL;
    hearth_status st = hearth_tmpl_parse(&t, src, strlen(src), err);
    if (st != HEARTH_OK) return st;
    json_t *ctx = ctx_json ? json_loads(ctx_json, 0, NULL) : NULL;
    st = hearth_tmpl_render(t, ctx, out, NULL, err);
    json_decref(ctx);
    hearth_tmpl_free(t);
    return st;
}

TEST(template_unit_goldens_match_jinja2) {
    json_error_t jerr;
    json_t *doc = json_load_file(test_path("tests/fixtures/templates/unit/cases.json"), 0, &jerr);
    CHECK_MSG(doc, "cases.json: %s", jerr.text);
    json_t *ctx = json_object_get(doc, "context");
    size_t i;
    json_t *c;
    int n = 0, failed = 0, errors = 0;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *src = json_string_value(json_object_get(c, "template"));
        json_t *want = json_object_get(c, "expected");
        hearth_err err = {0};
        hearth_tmpl *t = NULL;
        char *out = NULL;
        size_t len = 0;
        hearth_status st = hearth_tmpl_parse(&t, src, strlen(src), &err);
        if (st == HEARTH_OK) {
            hearth_tmpl_set_now(t, json_integer_value(json_object_get(doc, "now")));
            st = hearth_tmpl_render(t, ctx, &out, &len, &err);
        }
        n++;
        if (want) {
            if (st != HEARTH_OK) {
                test_fail(__FILE__, __LINE__, "case %zu `%s`: failed: %s", i, src, err.msg);
                failed++;
            } else if (len != json_string_length(want) || memcmp(out, json_string_value(want), len)) {
                test_fail(__FILE__, __LINE__, "case %zu `%s`:\n    got:  \"%s\"\n    want: \"%s\"", i, src, out,
                          json_string_value(want));
                failed++;
            }
        } else {
            errors++;
            if (st == HEARTH_OK) {
                test_fail(__FILE__, __LINE__, "case %zu `%s`: rendered \"%s\", jinja2 raised %s", i, src, out,
                          json_string_value(json_object_get(c, "error")));
                failed++;
            } else if (!strstr(err.msg, "template line ")) {
                test_fail(__FILE__, __LINE__, "case %zu: error names no line: %s", i, err.msg);
                failed++;
            }
        }
        free(out);
        hearth_tmpl_free(t);
    }
    json_decref(doc);
    CHECK(n >= 90);
    CHECK(errors >= 10);
    CHECK_EQ(failed, 0);
}

/* Each malformed template must fail to parse with HEARTH_EFORMAT and a message
 * that names its line and the construct. */
TEST(template_malformed_errors_name_line_and_construct) {
    static const struct {
        const char *src, *want;
    } cases[] = {
        {"{% if x %}open", "template line 1: unexpected end of template: the 'if' block opened on line 1"},
        {"a\nb\n{% for m in messages %}\n{{ m }}\n", "'for' block opened on line 3 is not closed"},
        {"{% for x in y %}{% endif %}", "unexpected tag 'endif'"},
        {"{% endfor %}", "template line 1: unexpected tag 'endfor'"},
        {"line\n\n{{ x|nosuchfilter }}", "template line 3: unknown filter 'nosuchfilter'"},
        {"{{ x is nosuchtest }}", "unknown test 'nosuchtest'"},
        {"{{ 1 + }}", "template line 1: unexpected 'end of print statement'"},
        {"{{ (1, 2 }}", "unexpected '}', expected ')'"},
        {"{{ [1, 2 }}", "unexpected '}', expected ']'"},
        {"{{ 'unterminated }}", "unterminated string literal"},
        {"{% frobnicate %}", "unknown tag 'frobnicate'"},
        {"{% include 'x.j2' %}", "tag 'include' is not supported"},
        {"{% macro m(a %}{% endmacro %}", "expected ')'"},
        {"{% macro m(a b) %}{% endmacro %}", "expected ',', got 'b'"},
        {"{% set = 1 %}", "can't assign to '='"},
        {"{% break %}", "'break' outside of a for loop"},
        {"{# never closed", "missing end of comment tag"},
        {"{{ x", "unexpected end of template inside a {{ }} tag"},
        {"{% if %}{% endif %}", "expected an expression"},
        {"{{ x.|y }}", "expected name or number after '.'"},
        {"{% raw %} no end", "missing end of raw directive"},
        {"{{ '\\x4' }}", "truncated \\x escape"},
        {"{{ a }}\n{{ b )}}", "template line 2: unexpected ')'"},
        {"{% for x in y recursive %}{% endfor %}", "recursive for loops are not supported"},
        {"{{ f(a=1, 2) }}", "positional argument after keyword argument"},
        {"{% macro m(a=1, b) %}{% endmacro %}", "non-default argument 'b' follows default argument"},
        {"{% if x %}{% else %}{% else %}{% endif %}", "unexpected tag 'else'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hearth_err err = {0};
        hearth_tmpl *t = (hearth_tmpl *)1;
        hearth_status st = hearth_tmpl_parse(&t, cases[i].src, strlen(cases[i].src), &err);
        CHECK_MSG(st == HEARTH_EFORMAT, "`%s`: status %d", cases[i].src, st);
        CHECK(t == NULL);
        CHECK_CONTAINS(err.msg, cases[i].want);
        CHECK_CONTAINS(err.msg, "template line ");
    }
}

/* Runtime errors name the line too, and an unknown filter in a branch that
 * never runs is fine (jinja2 checks those at run time). */
TEST(template_runtime_errors_name_line) {
    char *out;
    hearth_err err = {0};
    CHECK_EQ(render_str("ok\n\n{{ raise_exception('Roles must alternate') }}", NULL, &out, &err), HEARTH_EINVAL);
    CHECK(out == NULL);
    CHECK_CONTAINS(err.msg, "template line 3: ");
    CHECK_CONTAINS(err.msg, "Roles must alternate");
    CHECK_EQ(render_str("{{ messages[0].content.x.y }}", "{\"messages\": [{\"content\": {}}]}", &out, &err),
             HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "template line 1: 'dict object' has no attribute 'x'");
    CHECK_EQ(render_str("{% if false %}{{ x|from_json }}{% endif %}fine", NULL, &out, &err), HEARTH_OK);
    CHECK_STR(out, "fine");
    free(out);
    CHECK_EQ(render_str("\n{% if true %}{{ x|from_json }}{% endif %}", NULL, &out, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "template line 2: No filter named 'from_json'");
}

/* Hostile input: deep nesting, runaway recursion, huge repetition. */
TEST(template_hostile_input_is_an_error_not_a_crash) {
    char *src = malloc(250001);
    CHECK(src);
    /* 100k nested parentheses */
    size_t k = 0;
    memcpy(src + k, "{{ ", 3), k += 3;
    for (int i = 0; i < 50000; i++) src[k++] = '(';
    src[k++] = '1';
    for (int i = 0; i < 50000; i++) src[k++] = ')';
    memcpy(src + k, " }}", 4);
    char *out;
    hearth_err err = {0};
    hearth_status st = render_str(src, NULL, &out, &err);
    CHECK_EQ(st, HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "nested too deeply");
    /* 10k nested ifs */
    k = 0;
    for (int i = 0; i < 10000; i++) memcpy(src + k, "{% if 1 %}", 10), k += 10;
    for (int i = 0; i < 10000; i++) memcpy(src + k, "{% endif %}", 11), k += 11;
    src[k] = 0;
    CHECK_EQ(render_str(src, NULL, &out, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "nested too deeply");
    free(src);
    /* a macro that calls itself forever */
    CHECK_EQ(render_str("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &out, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "recursion too deep");
    CHECK_EQ(render_str("{{ 'x' * 100000000000 }}", NULL, &out, &err), HEARTH_EINVAL);
    CHECK_EQ(render_str("{{ range(1000000) }}", NULL, &out, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "range too big");
    /* every prefix of a real template either parses or fails cleanly */
    const char *real = "{%- for m in messages -%}{{- '<|' ~ m['role'] ~ '|>' + (m.content|trim) -}}"
                       "{%- if loop.last and add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}{% endfor %}";
    for (size_t n = 0; n <= strlen(real); n++) {
        hearth_tmpl *t = NULL;
        st = hearth_tmpl_parse(&t, real, n, &err);
        CHECK(st == HEARTH_OK || st == HEARTH_EFORMAT);
        CHECK((st == HEARTH_OK) == (t != NULL));
        hearth_tmpl_free(t);
    }
}

TEST(template_render_chat_builds_transformers_context) {
    hearth_tmpl *t = NULL;
    hearth_err err = {0};
    const char *src = "{{ bos_token }}{% for m in messages %}{{ m|tojson }};{% endfor %}"
                      "{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ eos_token }}|"
                      "{{ enable_thinking }}";
    CHECK_EQ(hearth_tmpl_parse(&t, src, strlen(src), &err), HEARTH_OK);
    json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"hi\", \"name\": null},"
                              " {\"role\": \"assistant\", \"content\": \"x\", \"reasoning\": \"think\"}]",
                              0, NULL);
    json_t *extra = json_loads("{\"enable_thinking\": false, \"bos_token\": \"<B>\"}", 0, NULL);
    char *out = NULL;
    size_t len = 0;
    CHECK_EQ(hearth_tmpl_render_chat(t, msgs, NULL, 1, "<s>", "</s>", extra, &out, &len, &err), HEARTH_OK);
    /* null keys dropped; reasoning aliased as transformers does; extra overrides bos */
    CHECK_STR(out, "<B>{\"role\": \"user\", \"content\": \"hi\"};"
                   "{\"thinking\": \"think\", \"role\": \"assistant\", \"content\": \"x\", \"reasoning\": \"think\", "
                   "\"reasoning_content\": \"think\"};True|True|True|</s>|False");
    CHECK_EQ(len, strlen(out));
    free(out);
    /* bos/eos NULL = undefined */
    CHECK_EQ(hearth_tmpl_render_chat(t, msgs, NULL, 0, NULL, NULL, NULL, &out, &len, &err), HEARTH_OK);
    CHECK(strstr(out, "|False||") != NULL);
    free(out);
    /* messages must be an array of objects */
    json_t *bad = json_loads("[1]", 0, NULL);
    CHECK_EQ(hearth_tmpl_render_chat(t, bad, NULL, 0, NULL, NULL, NULL, &out, &len, &err), HEARTH_EINVAL);
    CHECK(out == NULL);
    CHECK_CONTAINS(err.msg, "messages[0] must be a JSON object");
    json_decref(bad);
    json_decref(msgs);
    json_decref(extra);
    hearth_tmpl_free(t);
}

TEST(template_fixed_clock_and_context_forms) {
    hearth_tmpl *t = NULL;
    hearth_err err = {0};
    const char *src = "{{ strftime_now('%d %b %Y') }}";
    CHECK_EQ(hearth_tmpl_parse(&t, src, strlen(src), &err), HEARTH_OK);
    hearth_tmpl_set_now(t, 1768473000); /* 2026-01-15 10:30:00 UTC */
    char *out = NULL;
    CHECK_EQ(hearth_tmpl_render(t, NULL, &out, NULL, &err), HEARTH_OK);
    CHECK_STR(out, "15 Jan 2026");
    free(out);
    /* a non-object context is refused */
    json_t *arr = json_array();
    CHECK_EQ(hearth_tmpl_render(t, arr, &out, NULL, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "must be a JSON object");
    json_decref(arr);
    hearth_tmpl_free(t);
    /* the empty template renders the empty string; NUL bytes in data survive */
    CHECK_EQ(hearth_tmpl_parse(&t, "", 0, &err), HEARTH_OK);
    CHECK_EQ(hearth_tmpl_render(t, NULL, &out, NULL, &err), HEARTH_OK);
    CHECK_STR(out, "");
    free(out);
    hearth_tmpl_free(t);
    size_t len = 0;
    CHECK_EQ(hearth_tmpl_parse(&t, "a\0b{{ 1 }}", 10, &err), HEARTH_OK);
    CHECK_EQ(hearth_tmpl_render(t, NULL, &out, &len, &err), HEARTH_OK);
    CHECK_EQ(len, 4);
    CHECK(!memcmp(out, "a\0b1", 4));
    free(out);
    hearth_tmpl_free(t);
    hearth_tmpl_free(NULL);
}
