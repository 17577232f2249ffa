/* test_tok.c - tokenizers against the HF goldens in tests/fixtures/tok/
 * (written by tools/oracle/tok_goldens.py), round trips, streaming decode,
 * and malformed inputs. */
#include "testhelp.h"

#include "core/file.h"
#include "io/gguf.h"
#include "tok/tok.h"

#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Load the tokenizer a golden file names as its source. */
static hearth_tokenizer *load_source(json_t *src, char *why, size_t why_len) {
    const char *kind = json_string_value(json_object_get(src, "kind"));
    const char *rel = json_string_value(json_object_get(src, "path"));
    if (!kind || !rel) {
        snprintf(why, why_len, "source without kind/path");
        return NULL;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", test_path(rel));
    hearth_err err = {0};
    hearth_tokenizer *t = NULL;
    if (!strcmp(kind, "gguf")) {
        hearth_gguf *g;
        if (hearth_gguf_open(&g, path, &err) == HEARTH_OK) {
            hearth_tok_load_gguf(&t, g, &err);
            hearth_gguf_close(g);
        }
    } else {
        hearth_tok_load_json(&t, path, NULL, &err);
    }
    if (!t) snprintf(why, why_len, "%s (run scripts/setup.sh?)", err.msg);
    return t;
}

static int ids_equal(json_t *want, const int32_t *ids, size_t n) {
    if (!json_is_array(want) || json_array_size(want) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(want, i)) != ids[i]) return 0;
    return 1;
}

static void fmt_ids(char *o, size_t cap, const int32_t *ids, size_t n) {
    size_t k = 0;
    o[0] = 0;
    for (size_t i = 0; i < n && k + 16 < cap; i++) k += (size_t)snprintf(o + k, cap - k, "%d ", ids[i]);
}

static void fmt_json_ids(char *o, size_t cap, json_t *a) {
    size_t k = 0;
    o[0] = 0;
    for (size_t i = 0; i < json_array_size(a) && k + 16 < cap; i++)
        k += (size_t)snprintf(o + k, cap - k, "%lld ", (long long)json_integer_value(json_array_get(a, i)));
}

/* Independent strict UTF-8 check (not the library's). */
static int utf8_ok(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n || (k == 2 && c < 0xC2)) return 0;
        uint32_t cp = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t j = 1; j < k; j++) {
            if ((u[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (u[i + j] & 0x3F);
        }
        if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k;
    }
    return 1;
}

/* Stream ids through a detokenizer, one at a time. */
static char *stream_decode(const hearth_tokenizer *t, const int32_t *ids, size_t n, int skip, size_t *len) {
    static char chunk[HEARTH_DETOK_MAX_OUT];
    hearth_detok d;
    hearth_detok_init(&d, t, skip);
    size_t cap = 1024, k = 0;
    char *o = malloc(cap);
    for (size_t i = 0; i <= n && o; i++) {
        size_t m = i < n ? hearth_detok_push(&d, ids[i], chunk, sizeof chunk) : hearth_detok_finish(&d, chunk, sizeof chunk);
        /* every push must be complete UTF-8 on its own */
        if (m && !utf8_ok(chunk, m)) {
            free(o);
            return NULL;
        }
        while (k + m + 1 > cap) o = realloc(o, cap *= 2);
        if (!o) return NULL;
        memcpy(o + k, chunk, m);
        k += m;
    }
    if (o) o[k] = 0;
    *len = k;
    return o;
}

/* One golden file: every case, every mode. Returns the number of failures
 * (their details go to stderr, the first few per file). */
static int check_golden(const char *file, int *n_cases) {
    json_error_t je;
    json_t *doc = json_load_file(file, JSON_ALLOW_NUL, &je);
    if (!doc) {
        fprintf(stderr, "  %s: %s\n", file, je.text);
        return 1;
    }
    char why[600];
    hearth_tokenizer *t = load_source(json_object_get(doc, "source"), why, sizeof why);
    if (!t) {
        fprintf(stderr, "  %s: cannot load the source: %s\n", file, why);
        json_decref(doc);
        return 1;
    }
    int fails = 0;
    json_t *cases = json_object_get(doc, "cases");
    static const struct {
        const char *key;
        int add, parse;
    } MODES[] = {{"ids", 1, 1}, {"ids_plain", 0, 1}, {"ids_no_parse", 0, 0}};
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *c = json_array_get(cases, ci);
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t tl = json_string_length(json_object_get(c, "text"));
        (*n_cases)++;
        for (int m = 0; m < 3; m++) {
            int32_t *ids;
            size_t n;
            hearth_err err = {0};
            if (hearth_tok_encode(t, text, tl, MODES[m].add, MODES[m].parse, &ids, &n, &err)) {
                if (fails++ < 5) fprintf(stderr, "  %s case %zu: encode failed: %s\n", file, ci, err.msg);
                continue;
            }
            json_t *want = json_object_get(c, MODES[m].key);
            if (!ids_equal(want, ids, n)) {
                if (fails++ < 5) {
                    char a[2048], b[2048];
                    fmt_ids(a, sizeof a, ids, n);
                    fmt_json_ids(b, sizeof b, want);
                    fprintf(stderr, "  %s case %zu (%s) text \"%.80s\":\n    got  %.600s\n    want %.600s\n", file, ci,
                            MODES[m].key, text, a, b);
                }
            }
            if (m == 0) {
                for (int skip = 0; skip < 2; skip++) {
                    const char *wd = json_string_value(json_object_get(c, skip ? "decode_skip" : "decode"));
                    char *s;
                    size_t sl;
                    if (hearth_tok_decode(t, ids, n, skip, &s, &sl, &err)) {
                        if (fails++ < 5) fprintf(stderr, "  %s case %zu: decode failed: %s\n", file, ci, err.msg);
                        continue;
                    }
                    if (!wd || strcmp(s, wd)) {
                        if (fails++ < 5)
                            fprintf(stderr, "  %s case %zu decode(skip=%d):\n    got  \"%.300s\"\n    want \"%.300s\"\n", file, ci,
                                    skip, s, wd ? wd : "(null)");
                    }
                    size_t stl;
                    char *st = stream_decode(t, ids, n, skip, &stl);
                    if (!st || stl != sl || memcmp(st, s, sl)) {
                        if (fails++ < 5)
                            fprintf(stderr, "  %s case %zu streaming decode(skip=%d) differs:\n    got  \"%.300s\"\n    full \"%.300s\"\n",
                                    file, ci, skip, st ? st : "(broken UTF-8 in a push)", s);
                    }
                    free(st);
                    free(s);
                }
            }
            free(ids);
        }
    }
    hearth_tok_free(t);
    json_decref(doc);
    return fails;
}

TEST(tok_goldens_all_fixtures) {
    const char *dir = test_path("tests/fixtures/tok");
    char dirbuf[1024];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    DIR *d = opendir(dirbuf);
    CHECK_MSG(d, "cannot open %s", dirbuf);
    struct dirent *e;
    int files = 0, cases = 0, fails = 0;
    char names[64][256];
    int n_names = 0;
    while ((e = readdir(d)) && n_names < 64) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") || strstr(e->d_name, ".tokenizer.json")) continue;
        snprintf(names[n_names++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n_names; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dirbuf, names[i]);
        int f = check_golden(path, &cases);
        if (f) fprintf(stderr, "  %s: %d mismatches\n", names[i], f);
        fails += f;
        files++;
    }
    fprintf(stderr, "  tok goldens: %d files, %d cases, %d mismatches\n", files, cases, fails);
    CHECK(files >= 2);
    CHECK_EQ(fails, 0);
}
