/* test_train_data.c - the fine-tuning data loader (train/data.h): the three
 * JSONL shapes give the ids the tokenizer gives their pieces and label exactly
 * what the model should learn (a completion; an assistant turn with its
 * end-of-turn), truncation, and malformed lines refused with their line
 * number. Tokenizers: SmolLM2's (byte-level BPE, no BOS, ChatML template in
 * its GGUF) and llama.cpp's llama-spm vocabulary (adds BOS and a leading
 * space: the loader's other way of cutting pieces). */
#include "testhelp.h"

#include "io/gguf.h"
#include "tok/tok.h"
#include "train/data.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define SPM "models/vocab/ggml-vocab-llama-spm.gguf"

typedef struct {
    hearth_tokenizer *tok;
    char *tmpl; /* the GGUF's tokenizer.chat_template, or NULL */
} rig;

/* The template source the way the server finds it in a GGUF (cmd_serve.c's
 * load_template): the key tokenizer.chat_template, copied out. */
static char *gguf_template(const hearth_gguf *g) {
    const char *s;
    size_t n;
    if (hearth_gguf_find_key(g, "tokenizer.chat_template") < 0 ||
        hearth_gguf_get_str(g, "tokenizer.chat_template", &s, &n, NULL) != HEARTH_OK)
        return NULL;
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

static int rig_open(rig *r, const char *model) {
    memset(r, 0, sizeof *r);
    hearth_err err = {0};
    hearth_gguf *g = NULL;
    if (hearth_gguf_open(&g, test_path(model), &err) != HEARTH_OK ||
        hearth_tok_load_gguf(&r->tok, g, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "%s: %s", model, err.msg);
        hearth_gguf_close(g);
        return 0;
    }
    r->tmpl = gguf_template(g);
    hearth_gguf_close(g);
    return 1;
}

static void rig_close(rig *r) {
    hearth_tok_free(r->tok);
    free(r->tmpl);
}

/* Write content to a file of the scratch directory; returns its path (static). */
static const char *write_jsonl(const char *name, const char *content) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(content, f);
        fclose(f);
    }
    return path;
}

/* ids of text (special tokens parsed), appended to *ids / *n. */
static int enc_append(const rig *r, const char *text, int add_special, int32_t **ids, size_t *n) {
    int32_t *p = NULL;
    size_t m = 0;
    hearth_err err = {0};
    if (hearth_tok_encode(r->tok, text, strlen(text), add_special, 1, &p, &m, &err) != HEARTH_OK) return 0;
    int32_t *q = realloc(*ids, (*n + m + 1) * sizeof *q);
    if (!q) {
        free(p);
        return 0;
    }
    memcpy(q + *n, p, m * sizeof *p);
    *ids = q;
    *n += m;
    free(p);
    return 1;
}

/* The tokenizer's EOS appended to *ids / *n: what closes a text or a completion. */
static int eos_append(const rig *r, int32_t **ids, size_t *n) {
    int32_t *q = realloc(*ids, (*n + 1) * sizeof *q);
    if (!q) return 0;
    q[(*n)++] = hearth_tok_eos(r->tok);
    *ids = q;
    return 1;
}

static int same_ids(const hearth_train_example *ex, const int32_t *want, size_t n) {
    if ((size_t)ex->n != n) {
        test_fail(__FILE__, __LINE__, "example of line %d: %d tokens, expected %zu", ex->line, ex->n, n);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (ex->tokens[i] != want[i]) {
            test_fail(__FILE__, __LINE__, "example of line %d: token %zu is %d, expected %d", ex->line, i,
                      ex->tokens[i], want[i]);
            return 0;
        }
    return 1;
}

/* The text of tokens[a, b) of an example, with special tokens written out. */
static char *decode_range(const rig *r, const hearth_train_example *ex, int a, int b) {
    char *out = NULL;
    hearth_err err = {0};
    if (hearth_tok_decode(r->tok, ex->tokens + a, (size_t)(b - a), 0, &out, NULL, &err) != HEARTH_OK) return NULL;
    return out;
}

/* A failed load's message names the file and contains each of the
 * NULL-terminated needles in ap. */
static int names_all(const char *msg, const char *path, const char *content, va_list ap) {
    if (!strstr(msg, path)) {
        test_fail(__FILE__, __LINE__, "\"%s\" does not name the file", msg);
        return 0;
    }
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(msg, needle)) {
            test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\" (file: %s)", msg, needle, content);
            return 0;
        }
    return 1;
}

/* Load content as a file and expect a failure whose message contains each of
 * the NULL-terminated needles; d must be left empty. */
static int load_fails(const rig *r, const char *tmpl, const char *content, int max_len, ...) {
    hearth_train_data d;
    hearth_err err = {0};
    const char *path = write_jsonl("bad.jsonl", content);
    hearth_status st = hearth_train_data_load(&d, path, r->tok, tmpl, max_len, &err);
    if (st == HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "loaded %d examples from a bad file: %s", d.n, content);
        hearth_train_data_free(&d);
        return 0;
    }
    if (d.n || d.ex || d.n_labels) {
        test_fail(__FILE__, __LINE__, "a failed load left %d examples", d.n);
        return 0;
    }
    va_list ap;
    va_start(ap, max_len);
    int ok = names_all(err.msg, path, content, ap);
    va_end(ap);
    return ok;
}

TEST(train_data_text) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    hearth_train_data d;
    hearth_err err = {0};
    /* blank lines (also CRLF ones) are skipped but counted */
    /* a dataset's other columns ("id") are left alone */
    const char *path = write_jsonl("text.jsonl", "\n{\"id\": 7, \"text\": \"Hello world, this is hearth.\"}\r\n  \n"
                                                 "{\"text\": \"<|im_start|>user\\nHi<|im_end|>\"}\n");
    hearth_status st = hearth_train_data_load(&d, path, r.tok, NULL, 512, &err);
    int32_t *want = NULL, *want2 = NULL;
    size_t n_want = 0, n_want2 = 0;
    int ok = st == HEARTH_OK && d.n == 2 && enc_append(&r, "Hello world, this is hearth.", 1, &want, &n_want) &&
             eos_append(&r, &want, &n_want) && enc_append(&r, "<|im_start|>user\nHi<|im_end|>", 1, &want2, &n_want2) &&
             eos_append(&r, &want2, &n_want2);
    if (!ok) test_fail(__FILE__, __LINE__, "load: %s (%d examples)", err.msg, d.n);
    ok = ok && same_ids(&d.ex[0], want, n_want) && same_ids(&d.ex[1], want2, n_want2);
    if (ok) {
        CHECK_EQ(d.ex[0].line, 2);
        CHECK_EQ(d.ex[1].line, 4);
        /* SmolLM2's tokenizer adds no BOS: the first text token is the one unlabelled */
        CHECK_EQ(d.ex[0].tokens[0], want[0]);
        CHECK_EQ(d.ex[0].label[0], 0);
        for (int i = 1; i < d.ex[0].n; i++) CHECK_EQ(d.ex[0].label[i], 1);
        /* special tokens written in the text are those tokens, as HF reads them */
        CHECK_EQ(d.ex[1].tokens[0], hearth_tok_find(r.tok, "<|im_start|>"));
        CHECK_EQ(d.ex[1].tokens[d.ex[1].n - 2], hearth_tok_find(r.tok, "<|im_end|>"));
        /* then the EOS, learnt (TRL's SFTTrainer appends eos_token) */
        CHECK_EQ(d.ex[1].tokens[d.ex[1].n - 1], hearth_tok_eos(r.tok));
        CHECK_EQ(d.n_labels, (long)(n_want - 1 + n_want2 - 1));
        CHECK_EQ(d.n_truncated, 0);
    }
    free(want);
    free(want2);
    hearth_train_data_free(&d);
    hearth_train_data_free(&d); /* freeing twice (a zeroed struct) is safe */
    rig_close(&r);
}

TEST(train_data_prompt_completion) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    hearth_train_data d;
    hearth_err err = {0};
    /* with the UTF-8 BOM some editors write first */
    const char *path =
        write_jsonl("pc.jsonl", "\xEF\xBB\xBF{\"prompt\": \"The capital of France is\", \"completion\": \" Paris.\"}\n");
    hearth_status st = hearth_train_data_load(&d, path, r.tok, r.tmpl, 512, &err);
    int32_t *want = NULL;
    size_t n_prompt = 0, n = 0;
    int ok = st == HEARTH_OK && d.n == 1 && enc_append(&r, "The capital of France is", 1, &want, &n);
    n_prompt = n;
    ok = ok && enc_append(&r, " Paris.", 0, &want, &n) && eos_append(&r, &want, &n);
    if (!ok) test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    if (ok && same_ids(&d.ex[0], want, n)) {
        for (int i = 0; i < d.ex[0].n; i++) CHECK_EQ(d.ex[0].label[i], (size_t)i >= n_prompt);
        CHECK_EQ(d.n_labels, (long)(n - n_prompt));
        char *s = decode_range(&r, &d.ex[0], (int)n_prompt, d.ex[0].n - 1);
        CHECK_STR(s, " Paris.");
        free(s);
    }
    free(want);
    hearth_train_data_free(&d);
    rig_close(&r);
}

/* A tokenizer that adds BOS and a leading space: the BOS once, unlabelled; the
 * completion as the tail of the whole text's ids (on its own, "Paris" would
 * get a space it does not have); a token across the boundary is refused. */
TEST(train_data_prompt_completion_spm) {
    rig r;
    if (!rig_open(&r, SPM)) return;
    hearth_train_data d;
    hearth_err err = {0};
    const char *path =
        write_jsonl("spm.jsonl", "{\"prompt\": \"The capital of France is\", \"completion\": \" Paris.\"}\n"
                                 "{\"prompt\": \"Answer: \\\"\", \"completion\": \"Paris\\\"\"}\n");
    hearth_status st = hearth_train_data_load(&d, path, r.tok, NULL, 512, &err);
    int32_t *whole = NULL, *prompt = NULL, *whole2 = NULL, *prompt2 = NULL;
    size_t n_whole = 0, n_prompt = 0, n_whole2 = 0, n_prompt2 = 0;
    int ok = st == HEARTH_OK && d.n == 2 &&
             enc_append(&r, "The capital of France is Paris.", 1, &whole, &n_whole) && eos_append(&r, &whole, &n_whole) &&
             enc_append(&r, "The capital of France is", 1, &prompt, &n_prompt) &&
             enc_append(&r, "Answer: \"Paris\"", 1, &whole2, &n_whole2) && eos_append(&r, &whole2, &n_whole2) &&
             enc_append(&r, "Answer: \"", 1, &prompt2, &n_prompt2);
    if (!ok) test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    if (ok && same_ids(&d.ex[0], whole, n_whole) && same_ids(&d.ex[1], whole2, n_whole2)) {
        CHECK_EQ(d.ex[0].tokens[0], hearth_tok_bos(r.tok));
        for (int i = 1; i < d.ex[0].n; i++) CHECK(d.ex[0].tokens[i] != hearth_tok_bos(r.tok));
        for (int i = 0; i < d.ex[0].n; i++) CHECK_EQ(d.ex[0].label[i], (size_t)i >= n_prompt);
        for (int i = 0; i < d.ex[1].n; i++) CHECK_EQ(d.ex[1].label[i], (size_t)i >= n_prompt2);
        CHECK_EQ(d.n_labels, (long)(n_whole - n_prompt + n_whole2 - n_prompt2));
    }
    free(whole);
    free(prompt);
    free(whole2);
    free(prompt2);
    hearth_train_data_free(&d);
    /* "is " + "Paris": the whole text has "▁Paris", the prompt alone ends in "▁" */
    CHECK(load_fails(&r, NULL, "{\"prompt\": \"The capital of France is \", \"completion\": \"Paris.\"}\n", 512,
                     "line 1", "boundary", NULL));
    rig_close(&r);
}

/* The conversation's ids are the rendering's; the labels are exactly the
 * assistant turns with the template's end of turn, each turn one run. */
TEST(train_data_messages) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    CHECK(r.tmpl != NULL);
    hearth_train_data d;
    hearth_err err = {0};
    const char *path = write_jsonl(
        "chat.jsonl",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the capital of France?\"},"
        " {\"role\": \"assistant\", \"content\": \"Paris.\"},"
        " {\"role\": \"user\", \"content\": \"And of Italy?\"},"
        " {\"role\": \"assistant\", \"content\": \"Rome.\"}]}\n"
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
        " {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"},"
        " {\"role\": \"user\", \"content\": \"Bye\"}]}\n");
    hearth_status st = hearth_train_data_load(&d, path, r.tok, r.tmpl, 512, &err);
    CHECK_MSG(st == HEARTH_OK && d.n == 2, "load: %s", err.msg);
    /* The same ids as the whole rendering encoded at once (SmolLM2's turns
     * meet at special tokens, so cutting at the turns changes nothing). */
    const char *render0 = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                          "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                          "<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>user\nAnd of Italy?<|im_end|>\n"
                          "<|im_start|>assistant\nRome.<|im_end|>\n";
    int32_t *want = NULL;
    size_t n_want = 0;
    CHECK(enc_append(&r, render0, 0, &want, &n_want));
    int ok = same_ids(&d.ex[0], want, n_want);
    free(want);
    if (!ok) goto done;
    const char *runs0[] = {"Paris.<|im_end|>\n", "Rome.<|im_end|>\n"}, *runs1[] = {"Hello!<|im_end|>\n"};
    for (int e = 0; e < 2; e++) {
        const hearth_train_example *ex = &d.ex[e];
        const char **runs = e ? runs1 : runs0;
        int n_runs = e ? 1 : 2, k = 0;
        CHECK_EQ(ex->line, e + 1);
        for (int i = 0; i < ex->n;) {
            if (!ex->label[i]) {
                i++;
                continue;
            }
            int j = i;
            while (j < ex->n && ex->label[j]) j++;
            CHECK_MSG(k < n_runs, "example %d: more labelled runs than assistant turns", e);
            char *s = decode_range(&r, ex, i, j);
            CHECK_STR(s, runs[k]);
            free(s);
            /* the token before a turn is the generation prompt's last */
            char *before = decode_range(&r, ex, i - 1, i);
            CHECK_STR(before, "\n");
            free(before);
            k++;
            i = j;
        }
        CHECK_EQ(k, n_runs);
    }
    /* the trailing user turn (example 2) is there, unlabelled */
    int last = d.ex[1].n - 1;
    while (last > 0 && !d.ex[1].label[last]) last--;
    char *tail = decode_range(&r, &d.ex[1], last + 1, d.ex[1].n);
    CHECK_STR(tail, "<|im_start|>user\nBye<|im_end|>\n");
    free(tail);
done:
    hearth_train_data_free(&d);
    rig_close(&r);
}

/* Tools and tool calls go through the template: here one that prints them,
 * and an assistant turn with tool_calls and no content. */
TEST(train_data_messages_tools) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    const char *tmpl =
        "{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}"
        "<tool_call>{{ c.function.name }}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    hearth_train_data d;
    hearth_err err = {0};
    const char *path = write_jsonl(
        "tools.jsonl",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"weather\"}}], \"messages\": ["
        "{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
        "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\": "
        "{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
        "{\"role\": \"tool\", \"content\": \"sunny\"}, {\"role\": \"assistant\", \"content\": \"Sunny.\"}]}\n");
    hearth_status st = hearth_train_data_load(&d, path, r.tok, tmpl, 512, &err);
    CHECK_MSG(st == HEARTH_OK && d.n == 1, "load: %s", err.msg);
    char *all = decode_range(&r, &d.ex[0], 0, d.ex[0].n);
    CHECK_CONTAINS(all, "Tools: [{\"type\": \"function\"");
    free(all);
    char labelled[256] = "";
    for (int i = 0; i < d.ex[0].n; i++)
        if (d.ex[0].label[i]) {
            char *s = decode_range(&r, &d.ex[0], i, i + 1);
            if (s) strncat(labelled, s, sizeof labelled - strlen(labelled) - 1);
            free(s);
        }
    CHECK_STR(labelled, "<tool_call>weather</tool_call><|im_end|>\nSunny.<|im_end|>\n");
    hearth_train_data_free(&d);
    rig_close(&r);
}

TEST(train_data_truncate) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    hearth_train_data d;
    hearth_err err = {0};
    const char *path = write_jsonl("trunc.jsonl", "{\"text\": \"one two three four five six seven eight\"}\n"
                                                  "{\"prompt\": \"a b\", \"completion\": \" c d e f g h i j\"}\n"
                                                  "{\"text\": \"one two\"}\n");
    hearth_status st = hearth_train_data_load(&d, path, r.tok, NULL, 4, &err);
    CHECK_MSG(st == HEARTH_OK && d.n == 3, "load: %s", err.msg);
    int32_t *want = NULL;
    size_t n = 0;
    CHECK(enc_append(&r, "one two three four five six seven eight", 1, &want, &n));
    CHECK(n > 4);
    CHECK_EQ(d.ex[0].n, 4);
    CHECK(!memcmp(d.ex[0].tokens, want, 4 * sizeof *want));
    free(want);
    CHECK_EQ(d.ex[1].n, 4);
    CHECK_EQ(d.ex[2].n, 3); /* "one", " two", EOS */
    CHECK_EQ(d.n_truncated, 2);
    /* 3 + 2 ("a", " b" unlabelled) + 2 */
    CHECK_EQ(d.n_labels, 3 + 2 + 2);
    hearth_train_data_free(&d);
    /* a completion wholly past max_len leaves nothing to learn: refused */
    CHECK(load_fails(&r, NULL,
                     "{\"text\": \"ok then\"}\n"
                     "{\"prompt\": \"one two three four five\", \"completion\": \" six\"}\n",
                     4, "line 2", "max_len", NULL));
    CHECK(load_fails(&r, NULL, "{\"text\": \"ok then\"}\n", 1, "max_len", NULL));
    rig_close(&r);
}

TEST(train_data_malformed) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    const char *t = r.tmpl;
    CHECK(load_fails(&r, t, "{\"text\": \"a b\"}\n\n{\"text\": \"c\"\n{\"text\": \"d e\"}\n", 512, "line 3", "JSON",
                     NULL));
    CHECK(load_fails(&r, t, "{\"foo\": 1}\n", 512, "line 1", "\"foo\"", NULL));
    CHECK(load_fails(&r, t, "{\"text\": \"a b\"}\n[1, 2]\n", 512, "line 2", "object", NULL));
    CHECK(load_fails(&r, t, "{}\n", 512, "line 1", NULL));
    CHECK(load_fails(&r, t, "{\"text\": 5}\n", 512, "line 1", "\"text\" must be a string", NULL));
    CHECK(load_fails(&r, t, "{\"text\": \"a\", \"text\": \"b\"}\n", 512, "line 1", "duplicate", NULL));
    CHECK(load_fails(&r, t, "{\"text\": \"a b\", \"prompt\": \"c\"}\n", 512, "line 1", "mix", NULL));
    CHECK(load_fails(&r, t, "{\"prompt\": \"a b\"}\n", 512, "line 1", "no \"completion\"", NULL));
    CHECK(load_fails(&r, t, "{\"prompt\": \"a b\", \"completion\": [\"c\"]}\n", 512, "line 1", "\"completion\"",
                     "an array", NULL));
    CHECK(load_fails(&r, t, "{\"text\": \"\"}\n", 512, "line 1", "at least 2", NULL));
    CHECK(load_fails(&r, t, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n", 512, "line 1",
                     "assistant", NULL));
    CHECK(load_fails(&r, t, "{\"messages\": []}\n", 512, "line 1", "non-empty", NULL));
    CHECK(load_fails(&r, t, "{\"messages\": [{\"role\": \"assistant\", \"content\": 3}]}\n", 512, "line 1",
                     "messages[0].content", NULL));
    CHECK(load_fails(&r, t, "{\"messages\": [{\"content\": \"x\"}]}\n", 512, "line 1", "messages[0].role", NULL));
    CHECK(load_fails(&r, t, "{\"messages\": [\"hi\"]}\n", 512, "line 1", "messages[0]", NULL));
    /* no chat template: a chat example cannot be rendered */
    CHECK(load_fails(&r, NULL,
                     "{\"text\": \"a b\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                     "{\"role\": \"assistant\", \"content\": \"Yo\"}]}\n",
                     512, "line 2", "chat template", NULL));
    /* a template that refuses, and one that renders the last turn otherwise
     * (as templates that drop earlier turns' reasoning do) */
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                       "{\"role\": \"assistant\", \"content\": \"Yo\"}, {\"role\": \"user\", \"content\": \"x\"}]}\n";
    CHECK(load_fails(&r, "{{ raise_exception('no chats today') }}", chat, 512, "line 1", "no chats today", NULL));
    CHECK(load_fails(&r, "{% for m in messages %}{% if loop.last %}LAST {% endif %}{{ m.content }}\n{% endfor %}",
                     chat, 512, "line 1", "messages[1] (assistant)", NULL));
    CHECK(load_fails(&r, "{% for m in messages %", chat, 512, "line 1", "chat template", NULL));
    /* no examples at all */
    CHECK(load_fails(&r, t, "", 512, "no examples", NULL));
    CHECK(load_fails(&r, t, "\n  \n\n", 512, "no examples", NULL));
    hearth_train_data d;
    hearth_err err = {0};
    char missing[512];
    snprintf(missing, sizeof missing, "%s/does-not-exist.jsonl", test_tmpdir());
    CHECK_EQ(hearth_train_data_load(&d, missing, r.tok, t, 512, &err), HEARTH_EIO);
    CHECK_CONTAINS(err.msg, "does-not-exist.jsonl");
    rig_close(&r);
}

/* ---- preference pairs ---- */

/* a and b: the same tokens and labels (what names them in a failure). */
static int same_example(const hearth_train_example *a, const hearth_train_example *b, const char *what) {
    if (a->n != b->n) {
        test_fail(__FILE__, __LINE__, "%s: %d tokens, expected %d", what, a->n, b->n);
        return 0;
    }
    for (int i = 0; i < a->n; i++)
        if (a->tokens[i] != b->tokens[i] || a->label[i] != b->label[i]) {
            test_fail(__FILE__, __LINE__, "%s: token %d is %d (label %d), expected %d (label %d)", what, i,
                      a->tokens[i], a->label[i], b->tokens[i], b->label[i]);
            return 0;
        }
    return 1;
}

/* The labelled tokens of ex, decoded run by run into out ("|" between runs). */
static void labelled_runs(const rig *r, const hearth_train_example *ex, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; i < ex->n;) {
        if (!ex->label[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j < ex->n && ex->label[j]) j++;
        char *s = decode_range(r, ex, i, j);
        if (out[0]) strncat(out, "|", cap - strlen(out) - 1);
        if (s) strncat(out, s, cap - strlen(out) - 1);
        free(s);
        i = j;
    }
}

/* As load_fails, for hearth_train_prefs_load. */
static int prefs_fail(const rig *r, const char *tmpl, const char *content, int max_len, ...) {
    hearth_train_prefs d;
    hearth_err err = {0};
    const char *path = write_jsonl("badprefs.jsonl", content);
    hearth_status st = hearth_train_prefs_load(&d, path, r->tok, tmpl, max_len, &err);
    if (st == HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "loaded %d pairs from a bad file: %s", d.n, content);
        hearth_train_prefs_free(&d);
        return 0;
    }
    if (d.n || d.p || d.n_truncated) {
        test_fail(__FILE__, __LINE__, "a failed load left %d pairs", d.n);
        return 0;
    }
    va_list ap;
    va_start(ap, max_len);
    int ok = names_all(err.msg, path, content, ap);
    va_end(ap);
    return ok;
}

/* A standard pair's sides are exactly the {"prompt", "completion"} examples
 * of the same prompt, with either tokenizer (SPM: BOS, and the response as the
 * tail of the whole text's ids). */
TEST(train_data_prefs_standard) {
    const char *models[2] = {SMOL, SPM};
    for (int m = 0; m < 2; m++) {
        rig r;
        if (!rig_open(&r, models[m])) return;
        hearth_train_prefs d;
        hearth_train_data sft;
        hearth_err err = {0}, err2 = {0};
        const char *path = write_jsonl(
            "prefs.jsonl", "{\"prompt\": \"The capital of France is\", \"chosen\": \" Paris.\", \"rejected\": "
                           "\" Lyon, of course.\", \"score\": 0.5}\n\n"
                           "{\"rejected\": \"No.\", \"prompt\": \"<|im_start|>user\\nHi<|im_end|>\\n\", \"chosen\": "
                           "\"Hello!\"}\n");
        hearth_status st = hearth_train_prefs_load(&d, path, r.tok, r.tmpl, 512, &err);
        const char *path2 =
            write_jsonl("prefs-sft.jsonl",
                        "{\"prompt\": \"The capital of France is\", \"completion\": \" Paris.\"}\n"
                        "{\"prompt\": \"The capital of France is\", \"completion\": \" Lyon, of course.\"}\n"
                        "{\"prompt\": \"<|im_start|>user\\nHi<|im_end|>\\n\", \"completion\": \"Hello!\"}\n"
                        "{\"prompt\": \"<|im_start|>user\\nHi<|im_end|>\\n\", \"completion\": \"No.\"}\n");
        hearth_status st2 = hearth_train_data_load(&sft, path2, r.tok, r.tmpl, 512, &err2);
        int ok = st == HEARTH_OK && d.n == 2 && st2 == HEARTH_OK && sft.n == 4;
        if (!ok) test_fail(__FILE__, __LINE__, "%s: load: %s / %s", models[m], err.msg, err2.msg);
        for (int i = 0; ok && i < 2; i++)
            ok = same_example(&d.p[i].chosen, &sft.ex[2 * i], "chosen") &&
                 same_example(&d.p[i].rejected, &sft.ex[2 * i + 1], "rejected");
        if (ok) {
            CHECK_EQ(d.p[0].line, 1);
            CHECK_EQ(d.p[1].line, 3);
            CHECK_EQ(d.p[1].chosen.line, 3);
            CHECK_EQ(d.p[1].rejected.line, 3);
            CHECK_EQ(d.n_truncated, 0);
            /* the response and its EOS are the labels */
            char runs[256];
            labelled_runs(&r, &d.p[0].rejected, runs, sizeof runs);
            if (m == 0) CHECK_STR(runs, " Lyon, of course.<|im_end|>"); /* SmolLM2-Instruct's EOS */
            CHECK_EQ(d.p[0].rejected.tokens[d.p[0].rejected.n - 1], hearth_tok_eos(r.tok));
            CHECK_EQ(d.p[0].rejected.label[d.p[0].rejected.n - 1], 1);
        }
        hearth_train_prefs_free(&d);
        hearth_train_prefs_free(&d); /* twice: safe */
        hearth_train_data_free(&sft);
        if (m == 1) /* SPM: "is " + "Paris" is refused as for a completion, naming the side */
            CHECK(prefs_fail(&r, NULL,
                             "{\"prompt\": \"The capital of France is \", \"chosen\": \" Paris.\", \"rejected\": "
                             "\"Paris.\"}\n",
                             512, "line 1", "boundary between the prompt and \"rejected\"", NULL));
        rig_close(&r);
        if (!ok) return;
    }
}

/* A conversational pair: each side the rendering of prompt + response, whose
 * labels are exactly the response's assistant text and end-of-turn (not the
 * prompt's earlier assistant turn); the implicit-prompt form gives the same. */
TEST(train_data_prefs_conversational) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    CHECK(r.tmpl != NULL);
#define U1 "{\"role\": \"user\", \"content\": \"What is the capital of France?\"}"
#define A1 "{\"role\": \"assistant\", \"content\": \"Paris.\"}"
#define U2 "{\"role\": \"user\", \"content\": \"And of Italy?\"}"
#define GOOD "{\"role\": \"assistant\", \"content\": \"Rome.\"}"
#define BAD "{\"role\": \"assistant\", \"content\": \"Milan, I think.\"}"
    const char *path =
        write_jsonl("cprefs.jsonl", "{\"prompt\": [" U1 ", " A1 ", " U2 "], \"chosen\": [" GOOD "], \"rejected\": [" BAD
                                    "]}\n"
                                    "{\"chosen\": [" U1 ", " A1 ", " U2 ", " GOOD "], \"rejected\": [" U1 ", " A1
                                    ", " U2 ", " BAD "]}\n");
    hearth_train_prefs d;
    hearth_err err = {0};
    hearth_status st = hearth_train_prefs_load(&d, path, r.tok, r.tmpl, 512, &err);
    CHECK_MSG(st == HEARTH_OK && d.n == 2, "load: %s", err.msg);
    const char *render = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                         "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                         "<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>user\nAnd of Italy?<|im_end|>\n"
                         "<|im_start|>assistant\n";
    char text[1024];
    int32_t *want = NULL;
    size_t n_want = 0;
    snprintf(text, sizeof text, "%sRome.<|im_end|>\n", render);
    CHECK(enc_append(&r, text, 0, &want, &n_want));
    int ok = same_ids(&d.p[0].chosen, want, n_want);
    free(want);
    want = NULL, n_want = 0;
    snprintf(text, sizeof text, "%sMilan, I think.<|im_end|>\n", render);
    CHECK(enc_append(&r, text, 0, &want, &n_want));
    ok = ok && same_ids(&d.p[0].rejected, want, n_want);
    free(want);
    if (ok) {
        char runs[512];
        labelled_runs(&r, &d.p[0].chosen, runs, sizeof runs);
        CHECK_STR(runs, "Rome.<|im_end|>\n");
        labelled_runs(&r, &d.p[0].rejected, runs, sizeof runs);
        CHECK_STR(runs, "Milan, I think.<|im_end|>\n");
        /* the implicit prompt: the same examples */
        CHECK(same_example(&d.p[1].chosen, &d.p[0].chosen, "implicit chosen"));
        CHECK(same_example(&d.p[1].rejected, &d.p[0].rejected, "implicit rejected"));
        CHECK_EQ(d.p[1].line, 2);
    }
    hearth_train_prefs_free(&d);

    /* A response of several messages (a tool call, its result, the answer):
     * its assistant messages are labelled, the tool's result is not. */
    const char *tmpl =
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}"
        "<tool_call>{{ c.function.name }}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    path = write_jsonl(
        "tprefs.jsonl",
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}], \"chosen\": ["
        "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\": "
        "{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
        "{\"role\": \"tool\", \"content\": \"sunny\"}, {\"role\": \"assistant\", \"content\": \"Sunny.\"}], "
        "\"rejected\": [{\"role\": \"assistant\", \"content\": \"I cannot know.\"}]}\n");
    st = hearth_train_prefs_load(&d, path, r.tok, tmpl, 512, &err);
    CHECK_MSG(st == HEARTH_OK && d.n == 1, "load: %s", err.msg);
    char runs[512];
    labelled_runs(&r, &d.p[0].chosen, runs, sizeof runs);
    int ok2 = !strcmp(runs, "<tool_call>weather</tool_call><|im_end|>\n|Sunny.<|im_end|>\n");
    if (!ok2) test_fail(__FILE__, __LINE__, "chosen's labels: \"%s\"", runs);
    labelled_runs(&r, &d.p[0].rejected, runs, sizeof runs);
    if (ok2 && strcmp(runs, "I cannot know.<|im_end|>\n")) test_fail(__FILE__, __LINE__, "rejected's labels: \"%s\"", runs);
    hearth_train_prefs_free(&d);
    rig_close(&r);
}

TEST(train_data_prefs_truncate) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    hearth_train_prefs d;
    hearth_err err = {0};
    /* max_len 5: "a", " b", then the response; " c" + EOS fits */
    const char *path = write_jsonl("tprefs.jsonl", "{\"prompt\": \"a b\", \"chosen\": \" c d e f g\", \"rejected\": \" c\"}\n"
                                                   "{\"prompt\": \"a b\", \"chosen\": \" c\", \"rejected\": \" d\"}\n"
                                                   "{\"prompt\": \"a b\", \"chosen\": \" c d e f\", \"rejected\": "
                                                   "\" d e f g\"}\n");
    hearth_status st = hearth_train_prefs_load(&d, path, r.tok, NULL, 5, &err);
    CHECK_MSG(st == HEARTH_OK && d.n == 3, "load: %s", err.msg);
    CHECK_EQ(d.p[0].chosen.n, 5);
    CHECK_EQ(d.p[0].rejected.n, 4);
    CHECK_EQ(d.p[1].chosen.n, 4);
    CHECK_EQ(d.p[2].chosen.n, 5);
    CHECK_EQ(d.p[2].rejected.n, 5);
    CHECK_EQ(d.n_truncated, 2); /* pairs, not sides: 1 + 0 + 1 */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(d.p[i].chosen.label[0], 0);
        CHECK_EQ(d.p[i].chosen.label[1], 0);
        CHECK_EQ(d.p[i].chosen.label[2], 1);
    }
    hearth_train_prefs_free(&d);
    /* a side with no label left is refused, naming it and max_len */
    CHECK(prefs_fail(&r, NULL,
                     "{\"prompt\": \"a b\", \"chosen\": \" c\", \"rejected\": \" d\"}\n"
                     "{\"prompt\": \"one two three four five\", \"chosen\": \" six\", \"rejected\": \" seven\"}\n",
                     4, "line 2", "\"chosen\"", "max_len (4)", NULL));
    /* sides that differ only past max_len are the same pair once cut */
    CHECK(prefs_fail(&r, NULL, "{\"prompt\": \"a b\", \"chosen\": \" c d e f\", \"rejected\": \" c d e g\"}\n", 4,
                     "line 1", "same", "max_len (4)", NULL));
    rig_close(&r);
}

TEST(train_data_prefs_malformed) {
    rig r;
    if (!rig_open(&r, SMOL)) return;
    const char *t = r.tmpl;
    const char *ok = "{\"prompt\": \"Q\", \"chosen\": \" yes\", \"rejected\": \" no\"}\n";
    char two[1024];
#define SECOND(line) (snprintf(two, sizeof two, "%s%s\n", ok, line), two)
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\", \"chosen\": \"b\"}"), 512, "line 2", "no \"rejected\"", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\", \"rejected\": \"b\"}"), 512, "line 2", "no \"chosen\"", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": 3}"), 512, "line 2",
                     "\"rejected\" must be a string", "a number", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\", \"chosen\": \"\", \"rejected\": \"c\"}"), 512, "line 2",
                     "\"chosen\" is empty", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"Q\", \"chosen\": \" same\", \"rejected\": \" same\"}"), 512,
                     "line 2", "same tokens", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": 5, \"chosen\": \"b\", \"rejected\": \"c\"}"), 512, "line 2",
                     "\"prompt\" must be a string or a list", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\", \"chosen\": null, \"rejected\": \"c\"}"), 512, "line 2",
                     "\"chosen\" must be", NULL));
    /* an SFT line, an empty object, bad JSON */
    CHECK(prefs_fail(&r, t, SECOND("{\"text\": \"a b\"}"), 512, "line 2", "key \"text\"", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{}"), 512, "line 2", "preference pair", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\""), 512, "line 2", "JSON", NULL));
    CHECK(prefs_fail(&r, t, SECOND("[1]"), 512, "line 2", "object", NULL));
    /* an implicit prompt in text is not taken */
    CHECK(prefs_fail(&r, t, SECOND("{\"chosen\": \"Q yes\", \"rejected\": \"Q no\"}"), 512, "line 2",
                     "implicit prompt", NULL));
    /* mixed shapes */
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": \"a\", \"chosen\": [" GOOD "], \"rejected\": \"c\"}"), 512,
                     "line 2", "\"chosen\" must be a string", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": [" U1 "], \"chosen\": [" GOOD "], \"rejected\": \"c\"}"), 512,
                     "line 2", "\"rejected\" must be a list of messages", NULL));
    /* conversational */
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": [" U1 "], \"chosen\": [], \"rejected\": [" BAD "]}"), 512, "line 2",
                     "\"chosen\" must be a non-empty array", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": [], \"chosen\": [" GOOD "], \"rejected\": [" BAD "]}"), 512,
                     "line 2", "\"prompt\" must be a non-empty array", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": [" U1 "], \"chosen\": [" GOOD "], \"rejected\": [" U2 "]}"), 512,
                     "line 2", "\"rejected\" has no assistant message", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": [" U1 "], \"chosen\": [" U2 ", " GOOD "], \"rejected\": [" BAD "]}"),
                     512, "line 2", "\"chosen\" must begin with an assistant message", NULL));
    CHECK(prefs_fail(&r, t,
                     SECOND("{\"prompt\": [" U1 "], \"chosen\": [" GOOD "], \"rejected\": [" BAD
                            ", {\"role\": \"user\", \"content\": 3}]}"),
                     512, "line 2", "rejected[1].content", NULL));
    CHECK(prefs_fail(&r, t,
                     SECOND("{\"prompt\": [" U1 "], \"chosen\": [" GOOD
                            "], \"rejected\": [{\"role\": \"assistant\", \"content\": \"\"}]}"),
                     512, "line 2", "\"rejected\" is empty", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"prompt\": [" U1 "], \"chosen\": [" GOOD "], \"rejected\": [" GOOD "]}"), 512,
                     "line 2", "same tokens", NULL));
    /* implicit prompt: the sides must share what comes before their responses */
    CHECK(prefs_fail(&r, t, SECOND("{\"chosen\": [" U1 ", " GOOD "], \"rejected\": [" U2 ", " BAD "]}"), 512,
                     "line 2", "first differ at message 0", "\"user\"", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"chosen\": [" U1 ", " GOOD "], \"rejected\": [" U1 ", " GOOD "]}"), 512,
                     "line 2", "same conversation", NULL));
    CHECK(prefs_fail(&r, t, SECOND("{\"chosen\": [" U1 ", " GOOD "], \"rejected\": [" U1 ", " GOOD ", " U2 ", " BAD "]}"),
                     512, "line 2", "\"chosen\" ends where", NULL));
    /* no chat template; one that renders the last turn otherwise names the side's message */
    CHECK(prefs_fail(&r, NULL, SECOND("{\"prompt\": [" U1 "], \"chosen\": [" GOOD "], \"rejected\": [" BAD "]}"), 512,
                     "line 2", "chat template", NULL));
    CHECK(prefs_fail(&r, "{% for m in messages %}{% if loop.last %}LAST {% endif %}{{ m.content }}\n{% endfor %}",
                     "{\"prompt\": [" U1 ", " A1 ", " U2 "], \"chosen\": [" GOOD "], \"rejected\": [" BAD "]}\n", 512,
                     "line 1", "chosen[0] (assistant)", NULL));
    CHECK(prefs_fail(&r, t, "\n\n", 512, "no preference pairs", NULL));
    CHECK(prefs_fail(&r, t, ok, 1, "max_len", NULL));
#undef SECOND
    rig_close(&r);
}
#undef U1
#undef A1
#undef U2
#undef GOOD
#undef BAD
