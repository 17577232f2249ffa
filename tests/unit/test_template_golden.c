/* test_template_golden.c - every real chat template under
 * tests/fixtures/templates/ (written by tools/oracle/template_goldens.py from
 * transformers' own renderer) renders every conversation byte-identical to
 * transformers, or fails where transformers failed. */
#include "template/template.h"
#include "testhelp.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Report where two renders first differ, with a little context. */
static void report_diff(const char *fixture, const char *cname, const char *got, size_t got_n, const char *want,
                        size_t want_n) {
    size_t i = 0;
    while (i < got_n && i < want_n && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    test_fail(__FILE__, __LINE__, "%s / %s: differs at byte %zu (got %zu bytes, want %zu)\n    got:  \"%.*s\"\n    want: \"%.*s\"",
              fixture, cname, i, got_n, want_n, (int)((got_n - from) < 120 ? got_n - from : 120), got + from,
              (int)((want_n - from) < 120 ? want_n - from : 120), want + from);
}

/* Returns the number of cases checked; failures are reported through test_fail. */
static int check_fixture(const char *dir, const char *fname, int *n_failed) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc) {
        test_fail(__FILE__, __LINE__, "%s: %s (line %d)", fname, jerr.text, jerr.line);
        (*n_failed)++;
        return 0;
    }
    const char *src = json_string_value(json_object_get(doc, "template"));
    const char *bos = json_string_value(json_object_get(doc, "bos_token"));
    const char *eos = json_string_value(json_object_get(doc, "eos_token"));
    hearth_err err = {0};
    hearth_tmpl *t = NULL;
    int checked = 0;
    if (hearth_tmpl_parse(&t, src, json_string_length(json_object_get(doc, "template")), &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "%s: parse: %s", fname, err.msg);
        (*n_failed)++;
        json_decref(doc);
        return 0;
    }
    hearth_tmpl_set_now(t, json_integer_value(json_object_get(doc, "now")));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *cname = json_string_value(json_object_get(c, "name"));
        json_t *tools = json_object_get(c, "tools");
        json_t *want = json_object_get(c, "expected");
        char *out = NULL;
        size_t len = 0;
        memset(&err, 0, sizeof err);
        hearth_status st = hearth_tmpl_render_chat(t, json_object_get(c, "messages"), json_is_null(tools) ? NULL : tools,
                                                   json_is_true(json_object_get(c, "add_generation_prompt")), bos, eos,
                                                   json_object_get(c, "extra"), &out, &len, &err);
        checked++;
        if (want) {
            if (st != HEARTH_OK) {
                test_fail(__FILE__, __LINE__, "%s / %s: render failed: %s", fname, cname, err.msg);
                (*n_failed)++;
            } else if (len != json_string_length(want) || memcmp(out, json_string_value(want), len)) {
                report_diff(fname, cname, out, len, json_string_value(want), json_string_length(want));
                (*n_failed)++;
            }
        } else {
            const char *emsg = json_string_value(json_object_get(c, "error"));
            const char *etype = json_string_value(json_object_get(c, "error_type"));
            if (st == HEARTH_OK) {
                test_fail(__FILE__, __LINE__, "%s / %s: rendered, but transformers failed with %s: %s", fname, cname,
                          etype, emsg);
                (*n_failed)++;
            } else if (etype && !strcmp(etype, "TemplateError") && !strstr(err.msg, emsg)) {
                /* the template's own raise_exception: the message must come through */
                test_fail(__FILE__, __LINE__, "%s / %s: error \"%s\" lacks \"%s\"", fname, cname, err.msg, emsg);
                (*n_failed)++;
            } else if (!strstr(err.msg, "template line ")) {
                test_fail(__FILE__, __LINE__, "%s / %s: error names no line: %s", fname, cname, err.msg);
                (*n_failed)++;
            }
        }
        free(out);
    }
    hearth_tmpl_free(t);
    json_decref(doc);
    return checked;
}

TEST(template_goldens_match_transformers) {
    const char *dir = test_path("tests/fixtures/templates");
    char dirbuf[1024];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    DIR *d = opendir(dirbuf);
    CHECK_MSG(d, "cannot open %s", dirbuf);
    int fixtures = 0, cases = 0, failed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json")) continue;
        fixtures++;
        cases += check_fixture(dirbuf, e->d_name, &failed);
    }
    closedir(d);
    printf("  template goldens: %d templates, %d cases, %d failed\n", fixtures, cases, failed);
    CHECK(fixtures >= 10);
    CHECK(cases >= 10 * fixtures);
}
