/* test_completion_prompt.c - the prompt that prepare makes, without an
 * engine (hearth_cpl_tokenize): a text prompt with and without the
 * tokenizer's special tokens, and a final assistant message continued
 * (continue_final) through templates that keep or trim its spaces. The
 * tokenizer is llama.cpp's llama-spm vocabulary (it adds BOS), fetched by
 * scripts/setup.sh. */
#include "testhelp.h"

#include "completion/completion.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    hearth_tokenizer *tok;
    hearth_model_config cfg;
    hearth_cpl_ctx *c;
} rig;

static int rig_open(rig *g, const char *template_src) {
    memset(g, 0, sizeof *g);
    hearth_err err = {0};
    if (hearth_tok_load_path(&g->tok, test_path("models/vocab/ggml-vocab-llama-spm.gguf"), &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "tokenizer: %s", err.msg);
        return 0;
    }
    g->cfg.vocab_size = hearth_tok_n_vocab(g->tok);
    hearth_cpl_ctx_opts o = {.tok = g->tok, .cfg = &g->cfg, .ctx = 4096, .chat_template = template_src,
                             .chat_template_len = template_src ? strlen(template_src) : 0};
    if (hearth_cpl_ctx_new(&g->c, &o, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "context: %s", err.msg);
        return 0;
    }
    return 1;
}

static void rig_close(rig *g) {
    hearth_cpl_ctx_free(g->c);
    hearth_tok_free(g->tok);
}

/* The ids of text as the tokenizer gives them (add_special as given). */
static int encode(rig *g, const char *text, int add_special, int32_t **ids, size_t *n) {
    hearth_err err = {0};
    return hearth_tok_encode(g->tok, text, strlen(text), add_special, 1, ids, n, &err) == HEARTH_OK;
}

/* r's prompt is exactly the encoding of want (no special tokens added). */
static int prompt_is(rig *g, const hearth_cpl_request *r, const char *want) {
    int32_t *got = NULL, *exp = NULL;
    int n = 0;
    size_t m = 0;
    hearth_cpl_error e;
    int ok = hearth_cpl_tokenize(g->c, r, &got, &n, &e) == HEARTH_OK && encode(g, want, 0, &exp, &m) &&
             (size_t)n == m && !memcmp(got, exp, sizeof *got * m);
    if (!ok) test_fail(__FILE__, __LINE__, "prompt is not \"%s\" (%d ids; %s)", want, n, e.msg);
    free(got);
    free(exp);
    return ok;
}

TEST(completion_tokenize_with_and_without_special_tokens) {
    rig g;
    if (!rig_open(&g, NULL)) return;
    hearth_cpl_request r;
    hearth_cpl_request_init(&r);
    r.prompt = strdup("Hello world");
    r.prompt_field = "prompt";
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    hearth_cpl_error e;
    CHECK_EQ(hearth_cpl_tokenize(g.c, &r, &a, &na, &e), HEARTH_OK);
    r.no_special = 1;
    CHECK_EQ(hearth_cpl_tokenize(g.c, &r, &b, &nb, &e), HEARTH_OK);
    /* this vocabulary adds BOS (1): the same ids after it */
    CHECK_EQ(na, nb + 1);
    CHECK_EQ(a[0], hearth_tok_bos(g.tok));
    CHECK(nb > 0 && !memcmp(a + 1, b, sizeof *b * (size_t)nb));
    CHECK_EQ(hearth_cpl_ctx_len(g.c), 4096);
    free(a);
    free(b);
    hearth_cpl_request_deinit(&r);
    rig_close(&g);
}

static void chat_request(hearth_cpl_request *r, const char *final_text) {
    hearth_cpl_request_init(r);
    r->chat = 1;
    r->messages = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", "Q?", "role", "assistant", "content",
                            final_text);
    r->continue_final = 1;
}

TEST(completion_continue_final_cuts_after_the_message) {
    /* a template that prints the content as given, and one that trims it */
    static const char *keep = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
                              "{% if add_generation_prompt %}<assistant>{% endif %}";
    static const char *trim = "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}"
                              "{% if add_generation_prompt %}<assistant>{% endif %}";
    rig g;
    hearth_cpl_request r;
    if (!rig_open(&g, keep)) return;
    chat_request(&r, "The answer is");
    CHECK(prompt_is(&g, &r, "<user>Q?</user><assistant>The answer is"));
    hearth_cpl_request_deinit(&r);
    chat_request(&r, "The answer is "); /* printed as given: its space kept */
    CHECK(prompt_is(&g, &r, "<user>Q?</user><assistant>The answer is "));
    hearth_cpl_request_deinit(&r);
    rig_close(&g);

    if (!rig_open(&g, trim)) return;
    chat_request(&r, "  The answer is  "); /* trimmed by the template: cut after its text */
    CHECK(prompt_is(&g, &r, "<user>Q?</user><assistant>The answer is"));
    hearth_cpl_request_deinit(&r);
    /* refusals name the problem */
    hearth_cpl_error e;
    int32_t *ids = NULL;
    int n;
    chat_request(&r, "   ");
    CHECK_EQ(hearth_cpl_tokenize(g.c, &r, &ids, &n, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "empty") != NULL);
    hearth_cpl_request_deinit(&r);
    chat_request(&r, "x");
    json_object_set_new(json_array_get(r.messages, 1), "role", json_string("user"));
    CHECK_EQ(hearth_cpl_tokenize(g.c, &r, &ids, &n, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "final assistant message") != NULL);
    hearth_cpl_request_deinit(&r);
    rig_close(&g);
}
