/* test_infill.c - the fill-in-the-middle prompt layout (completion/infill.h)
 * on real vocabularies: FIM tokens found by name (Refact's <fim_prefix> ...
 * <reponame>, StarCoder2's <fim_prefix> without repository or file-separator
 * names llama.cpp knows), the repository line and the snippet layout, spm
 * order, and the windows that cut a long prefix, suffix and files. The
 * layout with file separators is checked against llama-server's prompts in
 * tests/e2e/test_infill.py. llama-server's own
 * prompts for a model with these tokens are checked end to end in
 * tests/e2e/test_infill.py. */
#include "testhelp.h"

#include "completion/infill.h"
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

static hearth_tokenizer *vocab(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "models/vocab/ggml-vocab-%s.gguf", name);
    hearth_tokenizer *t = NULL;
    hearth_err err = {0};
    if (hearth_tok_load_path(&t, test_path(path), &err) != HEARTH_OK) printf("  %s: %s\n", path, err.msg);
    return t;
}

typedef struct {
    int32_t v[16384];
    size_t n;
} seq;

static void add(seq *s, const int32_t *x, size_t n) {
    if (s->n + n > sizeof s->v / sizeof *s->v) return; /* too long: same() then fails on the count */
    memcpy(s->v + s->n, x, sizeof *x * n);
    s->n += n;
}

static void add_id(seq *s, int id) {
    int32_t x = id;
    add(s, &x, 1);
}

static void add_text(seq *s, const hearth_tokenizer *t, const char *text) {
    int32_t *ids;
    size_t n;
    hearth_err err = {0};
    if (hearth_tok_encode(t, text, strlen(text), 0, 0, &ids, &n, &err) != HEARTH_OK) return;
    add(s, ids, n);
    free(ids);
}

static int same(const int32_t *got, size_t n_got, const seq *want) {
    if (n_got != want->n) {
        printf("  %zu ids, want %zu\n", n_got, want->n);
        return 0;
    }
    for (size_t i = 0; i < n_got; i++)
        if (got[i] != want->v[i]) {
            printf("  id %zu: %d, want %d\n", i, got[i], want->v[i]);
            return 0;
        }
    return 1;
}

TEST(infill_fim_tokens_by_name) {
    hearth_tokenizer *r = vocab("refact"), *s = vocab("starcoder"), *l = vocab("llama-spm");
    CHECK(r && s && l);
    if (!r || !s || !l) return;
    static const char *const REFACT[] = {"<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<reponame>"};
    for (int f = 0; f < HEARTH_FIM_SEP; f++) {
        CHECK(hearth_tok_find(r, REFACT[f]) >= 0);
        CHECK_EQ(hearth_tok_fim(r, (hearth_fim)f), hearth_tok_find(r, REFACT[f]));
    }
    CHECK_EQ(hearth_tok_fim(r, HEARTH_FIM_SEP), -1);
    CHECK_EQ(hearth_tok_fim(s, HEARTH_FIM_PRE), 1); /* StarCoder2's <fim_prefix> */
    CHECK_EQ(hearth_tok_fim(s, HEARTH_FIM_MID), 2);
    CHECK_EQ(hearth_tok_fim(s, HEARTH_FIM_SUF), 3);
    CHECK_EQ(hearth_tok_fim(s, HEARTH_FIM_PAD), 4);
    CHECK_EQ(hearth_tok_fim(s, HEARTH_FIM_REP), -1); /* <repo_name>, <file_sep>: names llama.cpp does not know */
    CHECK_EQ(hearth_tok_fim(s, HEARTH_FIM_SEP), -1);
    CHECK_EQ(hearth_tok_fim(l, HEARTH_FIM_PRE), -1);
    CHECK_EQ(hearth_tok_fim(l, HEARTH_FIM_N), -1);
    int32_t *ids;
    size_t n;
    hearth_err err = {0};
    hearth_cpl_infill in = {.prefix = "a", .suffix = "b"};
    CHECK_EQ(hearth_infill_prompt(l, &in, NULL, 0, 4096, -1, 0, &ids, &n, &err), HEARTH_ENOTSUP);
    CHECK_CONTAINS(err.msg, "no prefix token");
    hearth_tok_free(r);
    hearth_tok_free(s);
    hearth_tok_free(l);
}

/* Refact's vocabulary has a repository token but no file separator: the
 * repository line, then each file after a snippet line. */
TEST(infill_repository_layout) {
    hearth_tokenizer *t = vocab("refact");
    CHECK(t);
    if (!t) return;
    char *names[] = {"util.py", "tmp"}, *texts[] = {"def mean(xs):\n    return sum(xs)\n", "X = 1\n"};
    hearth_cpl_infill in = {.prefix = "import util\n<fim_prefix>", .suffix = "\nprint(m)\n", .extra_name = names,
                            .extra_text = texts, .n_extra = 2};
    int32_t middle[] = {1000, 1001};
    int32_t *ids;
    size_t n;
    hearth_err err = {0};
    for (int spm = 0; spm < 2; spm++) {
        CHECK_MSG(hearth_infill_prompt(t, &in, middle, 2, 4096, -1, spm, &ids, &n, &err) == HEARTH_OK, "%s", err.msg);
        seq want = {0}, pre = {0}, suf = {0};
        add_id(&want, hearth_tok_fim(t, HEARTH_FIM_REP));
        add_text(&want, t, "myproject\n");
        for (int i = 0; i < 2; i++) {
            add_text(&want, t, "\n\n--- snippet ---\n\n");
            add_text(&want, t, texts[i]);
        }
        add_id(&pre, hearth_tok_fim(t, HEARTH_FIM_PRE));
        add_text(&pre, t, in.prefix); /* the special token written in the code stays text */
        add(&pre, middle, 2);
        add_id(&suf, hearth_tok_fim(t, HEARTH_FIM_SUF));
        add_text(&suf, t, in.suffix);
        add(&want, spm ? suf.v : pre.v, spm ? suf.n : pre.n);
        add(&want, spm ? pre.v : suf.v, spm ? pre.n : suf.n);
        add_id(&want, hearth_tok_fim(t, HEARTH_FIM_MID));
        CHECK_MSG(same(ids, n, &want), "spm %d", spm);
        free(ids);
    }
    hearth_tok_free(t);
}

TEST(infill_snippet_layout_and_windows) {
    hearth_tokenizer *t = vocab("starcoder");
    CHECK(t);
    if (!t) return;
    /* long texts, whose ids are counted here, not assumed */
    static char prefix[4801], suffix[4801], file[4801];
    for (int i = 0; i < 1200; i++) {
        memcpy(prefix + 4 * i, "ab;\n", 4);
        memcpy(suffix + 4 * i, "cd;\n", 4);
        memcpy(file + 4 * i, "ef;\n", 4);
    }
    char *names[] = {"f.py"}, *texts[] = {file};
    hearth_cpl_infill in = {.prefix = prefix, .suffix = suffix, .extra_name = names, .extra_text = texts, .n_extra = 1};
    int32_t middle[] = {100, 101, 102};
    int32_t *ids;
    size_t n;
    hearth_err err = {0};
    const int n_ctx = 4096, n_predict = 100;
    CHECK_EQ(hearth_infill_prompt(t, &in, middle, 3, n_ctx, n_predict, 0, &ids, &n, &err), HEARTH_OK);
    seq extra = {0}, pre = {0}, suf = {0}, want = {0};
    add_text(&extra, t, "\n\n--- snippet ---\n\n"); /* no [SEP]: a snippet line; no [REP]: no repository line */
    add_text(&extra, t, file);
    add_text(&pre, t, prefix);
    add_text(&suf, t, suffix);
    CHECK(pre.n > 1536 && suf.n > 507 && extra.n > 1848);
    const size_t keep_extra = (size_t)(n_ctx - HEARTH_INFILL_WINDOW - 2 * n_predict); /* 1,848: their end */
    add(&want, extra.v + extra.n - keep_extra, keep_extra);
    add_id(&want, hearth_tok_fim(t, HEARTH_FIM_PRE));
    add(&want, pre.v + pre.n - 1536, 1536); /* 3/4 of the window: the prefix's end */
    add(&want, middle, 3);
    add_id(&want, hearth_tok_fim(t, HEARTH_FIM_SUF));
    add(&want, suf.v, 512 - 2 - 3); /* a quarter less the prompt and two: the suffix's start */
    add_id(&want, hearth_tok_fim(t, HEARTH_FIM_MID));
    CHECK(same(ids, n, &want));
    free(ids);
    /* a context with no room past the window: no files, but the two tokens a -1 n_predict gives */
    CHECK_EQ(hearth_infill_prompt(t, &in, middle, 3, 2048, -1, 0, &ids, &n, &err), HEARTH_OK);
    CHECK(n > 2 && !memcmp(ids, extra.v + extra.n - 2, sizeof *ids * 2));
    CHECK_EQ(ids[2], hearth_tok_fim(t, HEARTH_FIM_PRE));
    CHECK_EQ(n, (size_t)(2 + 1 + 1536 + 3 + 1 + 507 + 1));
    free(ids);
    hearth_tok_free(t);
}
