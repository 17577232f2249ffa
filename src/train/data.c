/* data.c - training examples from JSONL: parse each line, render chats with the
 * model's template, tokenize, and mark which tokens count in the loss.
 *
 * Tokenization follows what the model sees at inference, so a fine-tuned
 * model is trained on the ids it will later be given:
 *   text, prompt+completion  as a raw prompt: the specials the tokenizer's
 *                            post-processor adds (BOS for Llama, nothing for
 *                            SmolLM2) around the text; special tokens written
 *                            in the text are recognised, as HF and the
 *                            server's /v1/completions do. The completion is a
 *                            continuation: its tokens follow the prompt's,
 *                            with no second BOS.
 *   messages                 as completion/ prepares a chat: the template
 *                            renders it (bos_token/eos_token given, so a
 *                            template that writes BOS writes it once), and the
 *                            text is encoded with special tokens parsed and
 *                            none added.
 * An example is a few pieces of one text, each labelled or not. A piece is
 * tokenized on its own (its first token starts at its first byte, as the
 * model's first generated token does after the prompt), except with a
 * tokenizer that adds a space at the start of a text (SentencePiece's
 * Metaspace, ByteLevel add_prefix_space): there a piece on its own would gain
 * a space it does not have, so each piece is the tail of the tokens of the
 * text up to its end, and the tokens of the text before it must be a prefix of
 * those (else the example is refused: a token spans the boundary).
 *
 * A preference pair is two such examples built by the same code: a
 * standard pair's sides are prompt + completion examples, a conversational
 * pair's are conversations of which only the response's assistant messages
 * are cut at and labelled (conversation()'s learn_from).
 *
 * Invariants of a loaded hearth_train_data: every example has 2 <= n <=
 * max_len, label[0] == 0 and at least one label; n_labels is their sum. The
 * same holds for both examples of every pair of a hearth_train_prefs, and
 * the two differ. */
#include "train/data.h"

#include "template/template.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef struct {
    const char *path;
    const hearth_tokenizer *tok;
    const char *chat_template;
    hearth_tmpl *tmpl; /* parsed at the first "messages" line */
    char *bos, *eos;   /* token texts for the template, or NULL */
    int32_t pre[8], post[8];
    int n_pre, n_post; /* the specials add_special puts before / after a text */
    int prepends;      /* the tokenizer adds a space at the start of a text */
    int max_len;
    int line;
} loader;

/* One example being built: tokens and their labels side by side. */
typedef struct {
    int32_t *tok;
    uint8_t *lab;
    size_t n, cap;
} seq;

static hearth_status seq_add(seq *s, const int32_t *ids, size_t n, int label) {
    if (!n) return HEARTH_OK;
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->n + n) cap *= 2;
        int32_t *t = realloc(s->tok, cap * sizeof *t);
        if (!t) return HEARTH_ENOMEM;
        s->tok = t;
        uint8_t *l = realloc(s->lab, cap);
        if (!l) return HEARTH_ENOMEM;
        s->lab = l;
        s->cap = cap;
    }
    memcpy(s->tok + s->n, ids, n * sizeof *ids);
    memset(s->lab + s->n, label != 0, n);
    s->n += n;
    return HEARTH_OK;
}

static void seq_free(seq *s) {
    free(s->tok);
    free(s->lab);
    memset(s, 0, sizeof *s);
}

static hearth_status oom(hearth_err *err) { return hearth_err_set(err, HEARTH_ENOMEM, "out of memory"); }

/* The error of line L: "PATH line N: <fmt>". */
static hearth_status bad_line(const loader *L, hearth_err *err, hearth_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static hearth_status bad_line(const loader *L, hearth_err *err, hearth_status st, const char *fmt, ...) {
    if (!err) return st;
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hearth_err_set(err, st, "%s line %d: %s", L->path, L->line, msg);
}

/* The text of token id for the template's bos_token / eos_token: *out is
 * malloc'd, or NULL when the tokenizer has no such token. */
static hearth_status token_string(const hearth_tokenizer *tok, int id, char **out, hearth_err *err) {
    size_t n = 0;
    const char *s = id >= 0 ? hearth_tok_token_text(tok, id, &n) : NULL;
    *out = NULL;
    if (!s) return HEARTH_OK;
    if (!(*out = malloc(n + 1))) return oom(err);
    memcpy(*out, s, n);
    (*out)[n] = 0;
    return HEARTH_OK;
}

static hearth_status encode(const loader *L, const char *s, size_t n, int add_special, int32_t **ids, size_t *n_ids,
                            hearth_err *err) {
    hearth_err e = {0};
    hearth_status st = hearth_tok_encode(L->tok, s, n, add_special, 1, ids, n_ids, &e);
    if (st != HEARTH_OK) {
        *ids = NULL;
        return bad_line(L, err, st, "tokenizer: %s", e.msg);
    }
    return HEARTH_OK;
}

/* What the tokenizer does to every text, learnt once from a probe: the
 * specials add_special puts around it, and whether it adds a leading space
 * ("a" and " a" encode alike). */
static hearth_status probe_tokenizer(loader *L, hearth_err *err) {
    int32_t *with = NULL, *bare = NULL, *spaced = NULL;
    size_t n_with, n_bare, n_spaced;
    hearth_err e = {0};
    hearth_status st = hearth_tok_encode(L->tok, "a", 1, 1, 0, &with, &n_with, &e);
    if (st == HEARTH_OK) st = hearth_tok_encode(L->tok, "a", 1, 0, 0, &bare, &n_bare, &e);
    if (st == HEARTH_OK) st = hearth_tok_encode(L->tok, " a", 2, 0, 0, &spaced, &n_spaced, &e);
    if (st != HEARTH_OK) {
        st = hearth_err_set(err, st, "%s: tokenizer: %s", L->path, e.msg);
        goto done;
    }
    L->prepends = n_bare == n_spaced && !memcmp(bare, spaced, n_bare * sizeof *bare);
    /* with = pre + bare + post: a post-processor adds fixed ids around the text. */
    size_t at = 0;
    while (at + n_bare <= n_with && memcmp(with + at, bare, n_bare * sizeof *bare)) at++;
    size_t n_post = at + n_bare <= n_with ? n_with - at - n_bare : 0;
    if (at + n_bare > n_with || at > sizeof L->pre / sizeof L->pre[0] ||
        n_post > sizeof L->post / sizeof L->post[0]) {
        st = hearth_err_set(err, HEARTH_ENOTSUP,
                            "%s: the tokenizer's special tokens do not surround the text's tokens (\"a\": %zu ids "
                            "with them, %zu without)",
                            L->path, n_with, n_bare);
        goto done;
    }
    L->n_pre = (int)at;
    L->n_post = (int)n_post;
    memcpy(L->pre, with, at * sizeof *with);
    memcpy(L->post, with + at + n_bare, n_post * sizeof *with);
done:
    free(with);
    free(bare);
    free(spaced);
    return st;
}

/* Append text split at b[0] = 0 < ... <= b[k] = its length: piece j is
 * [b[j], b[j+1]), labelled as lab[j]; what[j] names the boundary b[j + 1]
 * for the error when a token spans it. See the file comment for the two ways. */
static hearth_status add_pieces(const loader *L, const char *text, const size_t *b, const uint8_t *lab,
                                const char *const *what, int k, seq *s, hearth_err *err) {
    hearth_status st = HEARTH_OK;
    int32_t *prev = NULL, *cur = NULL;
    size_t n_prev = 0, n_cur = 0;
    for (int j = 0; j < k && st == HEARTH_OK; j++) {
        if (b[j + 1] == b[j]) continue;
        if (!L->prepends) {
            if ((st = encode(L, text + b[j], b[j + 1] - b[j], 0, &cur, &n_cur, err)) != HEARTH_OK) break;
            if (seq_add(s, cur, n_cur, lab[j]) != HEARTH_OK) st = oom(err);
            free(cur);
            cur = NULL;
            continue;
        }
        if ((st = encode(L, text, b[j + 1], 0, &cur, &n_cur, err)) != HEARTH_OK) break;
        if (n_cur < n_prev || (n_prev && memcmp(cur, prev, n_prev * sizeof *prev))) {
            st = bad_line(L, err, HEARTH_EFORMAT,
                          "a token spans the boundary %s (the tokens of the text before it are not a prefix of "
                          "those of the text after it)",
                          what[j - 1]);
            break;
        }
        if (seq_add(s, cur + n_prev, n_cur - n_prev, lab[j]) != HEARTH_OK) st = oom(err);
        free(prev);
        prev = cur, n_prev = n_cur;
        cur = NULL;
    }
    free(prev);
    free(cur);
    return st;
}

/* ---- the three shapes ---- */

static const char *json_kind(const json_t *v) {
    if (!v) return "missing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static hearth_status get_string(const loader *L, const json_t *o, const char *key, const char **out,
                                hearth_err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v) return bad_line(L, err, HEARTH_EFORMAT, "no \"%s\"", key);
    if (!json_is_string(v))
        return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" must be a string, not %s", key, json_kind(v));
    *out = json_string_value(v);
    return HEARTH_OK;
}

/* The end of a text or a completion, learnt: the specials the tokenizer
 * puts after a text, or else its EOS (as TRL's SFTTrainer appends
 * eos_token), so that a model learns to stop where its examples stop. */
static hearth_status close_text(const loader *L, seq *s, hearth_err *err) {
    const int32_t eos = hearth_tok_eos(L->tok);
    if (L->n_post) return seq_add(s, L->post, (size_t)L->n_post, 1) != HEARTH_OK ? oom(err) : HEARTH_OK;
    return eos >= 0 && seq_add(s, &eos, 1, 1) != HEARTH_OK ? oom(err) : HEARTH_OK;
}

static hearth_status shape_text(const loader *L, const json_t *o, seq *s, hearth_err *err) {
    const char *text;
    hearth_status st = get_string(L, o, "text", &text, err);
    if (st != HEARTH_OK) return st;
    size_t b[2] = {0, strlen(text)};
    uint8_t lab[1] = {1};
    /* Every token but the first (load_line clears its label: nothing predicts it). */
    if (seq_add(s, L->pre, (size_t)L->n_pre, 1) != HEARTH_OK) return oom(err);
    if ((st = add_pieces(L, text, b, lab, NULL, 1, s, err)) != HEARTH_OK) return st;
    return close_text(L, s, err);
}

/* prompt then completion, the completion and what closes it labelled;
 * side names the completion in the error for a token across the boundary. */
static hearth_status prompt_completion(const loader *L, const char *prompt, const char *completion, const char *side,
                                       seq *s, hearth_err *err) {
    size_t np = strlen(prompt), nc = strlen(completion);
    char *text = malloc(np + nc + 1);
    if (!text) return oom(err);
    memcpy(text, prompt, np);
    memcpy(text + np, completion, nc + 1);
    size_t b[3] = {0, np, np + nc};
    uint8_t lab[2] = {0, 1};
    char what0[64];
    snprintf(what0, sizeof what0, "between the prompt and %s", side);
    const char *what[1] = {what0};
    hearth_status st = HEARTH_OK;
    /* The specials after a text close the completion (an EOS there is what
     * the model should learn to write next), so they are labels too. */
    if (seq_add(s, L->pre, (size_t)L->n_pre, 0) != HEARTH_OK) st = oom(err);
    if (st == HEARTH_OK) st = add_pieces(L, text, b, lab, what, 2, s, err);
    if (st == HEARTH_OK) st = close_text(L, s, err);
    free(text);
    return st;
}

static hearth_status shape_prompt(const loader *L, const json_t *o, seq *s, hearth_err *err) {
    const char *prompt, *completion;
    hearth_status st = get_string(L, o, "prompt", &prompt, err);
    if (st == HEARTH_OK) st = get_string(L, o, "completion", &completion, err);
    if (st != HEARTH_OK) return st;
    return prompt_completion(L, prompt, completion, "the completion", s, err);
}

/* A conversation to render and label: msgs, of which only the assistant
 * messages from learn_from on are learnt (a preference pair's prompt may
 * hold earlier assistant turns: they are context). For the errors,
 * msgs[i] is called head[i] below split and tail[i - split] from it. */
typedef struct {
    const json_t *msgs, *tools;
    size_t learn_from, split;
    const char *head, *tail;
} conv;

static const char *msg_name(const conv *c, size_t i, char *buf, size_t n) {
    if (i < c->split)
        snprintf(buf, n, "%s[%zu]", c->head, i);
    else
        snprintf(buf, n, "%s[%zu]", c->tail, i - c->split);
    return buf;
}

static int is_role(const json_t *m, const char *role) {
    const json_t *r = json_object_get(m, "role");
    return json_is_string(r) && !strcmp(json_string_value(r), role);
}

static hearth_status check_tools(const loader *L, const json_t *tools, hearth_err *err) {
    if (tools && !json_is_array(tools) && !json_is_null(tools))
        return bad_line(L, err, HEARTH_EFORMAT, "\"tools\" must be an array, not %s", json_kind(tools));
    return HEARTH_OK;
}

/* msgs, the value of key name, is a non-empty list of messages; with
 * need_assistant, one of them at least is the assistant's. */
static hearth_status check_messages(const loader *L, const json_t *msgs, const char *name, int need_assistant,
                                    hearth_err *err) {
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" must be a non-empty array, not %s", name,
                        json_is_array(msgs) ? "an empty array" : json_kind(msgs));
    int n_assistant = 0;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m))
            return bad_line(L, err, HEARTH_EFORMAT, "%s[%zu] must be an object, not %s", name, i, json_kind(m));
        const json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role))
            return bad_line(L, err, HEARTH_EFORMAT, "%s[%zu].role must be a string, not %s", name, i,
                            json_kind(role));
        int assistant = is_role(m, "assistant");
        n_assistant += assistant;
        /* A tool-calling assistant turn may have no text; any other turn is its text. */
        int tool_call = assistant && json_object_get(m, "tool_calls") && (!content || json_is_null(content));
        if (!json_is_string(content) && !tool_call)
            return bad_line(L, err, HEARTH_EFORMAT, "%s[%zu].content must be a string, not %s", name, i,
                            json_kind(content));
    }
    if (need_assistant && !n_assistant)
        return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" has no assistant message to learn from", name);
    return HEARTH_OK;
}

/* The template's rendering of msgs[0, n). */
static hearth_status render(const loader *L, const json_t *msgs, size_t n, const json_t *tools, int gen_prompt,
                            char **out, size_t *len, hearth_err *err) {
    *out = NULL;
    json_t *head = json_array();
    if (!head) return oom(err);
    for (size_t i = 0; i < n; i++)
        if (json_array_append(head, json_array_get(msgs, i))) {
            json_decref(head);
            return oom(err);
        }
    hearth_err e = {0};
    hearth_status st = hearth_tmpl_render_chat(L->tmpl, head, json_is_array(tools) ? tools : NULL, gen_prompt, L->bos,
                                               L->eos, NULL, out, len, &e);
    json_decref(head);
    if (st != HEARTH_OK)
        return bad_line(L, err, st == HEARTH_ENOMEM ? st : HEARTH_EFORMAT,
                        "the chat template refused the first %zu message%s: %s", n, n == 1 ? "" : "s", e.msg);
    return HEARTH_OK;
}

/* The chat template, parsed at the first line that needs it (what: that line's kind). */
static hearth_status need_template(loader *L, const char *what, hearth_err *err) {
    if (!L->chat_template)
        return bad_line(L, err, HEARTH_ENOTSUP, "%s needs a chat template, and the model has none", what);
    if (L->tmpl) return HEARTH_OK;
    hearth_err e = {0};
    hearth_status st = hearth_tmpl_parse(&L->tmpl, L->chat_template, strlen(L->chat_template), &e);
    return st == HEARTH_OK ? st : bad_line(L, err, st, "chat template: %s", e.msg);
}

/* Assistant message i's tokens are those of [P_i, Q_i): P_i renders the
 * messages before it with the generation prompt (what the model is given),
 * Q_i those up to it without (what it should have written, with the
 * template's end-of-turn after it, so it learns to stop). Both must be
 * prefixes of the whole rendering, or the turn's tokens are not where the
 * model would write them. Assistant messages before c->learn_from are
 * neither cut at nor learnt: they are part of the text before. The
 * template must have been parsed (need_template). */
static hearth_status conversation(const loader *L, const conv *c, seq *s, hearth_err *err) {
    const json_t *msgs = c->msgs;
    size_t n_msg = json_array_size(msgs);
    char *full = NULL, *part = NULL;
    size_t n_full, n_part;
    hearth_status st = HEARTH_OK;
    size_t *b = malloc((2 * n_msg + 2) * sizeof *b);
    uint8_t *lab = malloc(2 * n_msg + 1);
    char (*what)[96] = malloc((2 * n_msg + 1) * sizeof *what);
    const char **whatp = malloc((2 * n_msg + 1) * sizeof *whatp);
    if (!b || !lab || !what || !whatp) {
        st = oom(err);
        goto done;
    }
    if ((st = render(L, msgs, n_msg, c->tools, 0, &full, &n_full, err)) != HEARTH_OK) goto done;
    int k = 0;
    b[0] = 0;
    for (size_t i = c->learn_from; i < n_msg; i++) {
        if (!is_role(json_array_get(msgs, i), "assistant")) continue;
        char name[64];
        msg_name(c, i, name, sizeof name);
        for (int gen = 1; gen >= 0; gen--) {
            size_t upto = gen ? i : i + 1;
            if ((st = render(L, msgs, upto, c->tools, gen, &part, &n_part, err)) != HEARTH_OK) goto done;
            int ok = n_part >= b[k] && n_part <= n_full && !memcmp(part, full, n_part);
            free(part);
            part = NULL;
            if (!ok) {
                st = bad_line(L, err, HEARTH_EFORMAT,
                              "%s (assistant): the chat template renders the first %zu message%s%s "
                              "otherwise than it begins the whole conversation, so this turn's tokens cannot be "
                              "found in it (does the template change earlier turns, e.g. drop their reasoning?)",
                              name, upto, upto == 1 ? "" : "s", gen ? " with the generation prompt" : "");
                goto done;
            }
            snprintf(what[k], sizeof what[k], "%s %s (assistant)", gen ? "before" : "after", name);
            whatp[k] = what[k];
            lab[k] = !gen;
            b[++k] = n_part;
        }
    }
    lab[k] = 0;
    b[++k] = n_full;
    st = add_pieces(L, full, b, lab, whatp, k, s, err);
done:
    free(full);
    free(b);
    free(lab);
    free(what);
    free(whatp);
    return st;
}

static hearth_status shape_messages(loader *L, const json_t *o, seq *s, hearth_err *err) {
    const json_t *msgs = json_object_get(o, "messages"), *tools = json_object_get(o, "tools");
    hearth_status st = check_messages(L, msgs, "messages", 1, err);
    if (st == HEARTH_OK) st = check_tools(L, tools, err);
    if (st == HEARTH_OK) st = need_template(L, "a \"messages\" example", err);
    if (st != HEARTH_OK) return st;
    conv c = {.msgs = msgs, .tools = tools, .head = "messages", .tail = "messages"};
    return conversation(L, &c, s, err);
}

/* ---- an example's end: truncation and checks ---- */

/* Turn s into ex: cut to max_len, label[0] cleared (nothing predicts the
 * first token), at least 2 tokens and one label. side names the example in
 * the errors (a pair's "chosen" / "rejected"), or NULL. */
static hearth_status finish(const loader *L, seq *s, const char *side, hearth_train_example *ex, int *truncated,
                            hearth_err *err) {
    char who[32] = "";
    if (side) snprintf(who, sizeof who, "\"%s\": ", side);
    *truncated = s->n > (size_t)L->max_len;
    if (*truncated) s->n = (size_t)L->max_len;
    if (s->n) s->lab[0] = 0;
    size_t n_lab = 0;
    for (size_t i = 0; i < s->n; i++) n_lab += s->lab[i];
    if (s->n < 2)
        return bad_line(L, err, HEARTH_EFORMAT, "%sthe example has %zu token%s; training needs at least 2", who, s->n,
                        s->n == 1 ? "" : "s");
    if (!n_lab) {
        if (*truncated)
            return bad_line(L, err, HEARTH_EFORMAT, "%sno token to learn from within the first max_len (%d) tokens",
                            who, L->max_len);
        return bad_line(L, err, HEARTH_EFORMAT, "%sno token to learn from", who);
    }
    ex->tokens = s->tok;
    ex->label = s->lab;
    ex->n = (int)s->n;
    ex->line = L->line;
    s->tok = NULL, s->lab = NULL;
    seq_free(s);
    return HEARTH_OK;
}

static void example_free(hearth_train_example *ex) {
    free(ex->tokens);
    free(ex->label);
    memset(ex, 0, sizeof *ex);
}

/* Room for one more element of arr (n used of *cap): arr, moved, or NULL
 * when out of memory (arr is kept). */
static void *grow(void *arr, size_t size, int n, size_t *cap) {
    if ((size_t)n < *cap) return arr;
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(arr, c * size);
    if (p) *cap = c;
    return p;
}

/* ---- the file ---- */

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

/* One parsed line (a JSON object) to add to ctx. */
typedef hearth_status (*line_fn)(loader *L, const json_t *o, void *ctx, hearth_err *err);

/* Read path line by line: blank lines skipped, each other line a JSON
 * object handed to fn. L is set up here and torn down after. */
static hearth_status read_jsonl(loader *L, line_fn fn, void *ctx, hearth_err *err) {
    if (L->max_len < 2)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: max_len %d: an example needs 2 tokens", L->path, L->max_len);
    hearth_status st = probe_tokenizer(L, err);
    if (st != HEARTH_OK) return st;
    FILE *f = fopen(L->path, "rb");
    if (!f) return hearth_err_set(err, HEARTH_EIO, "%s: %s", L->path, strerror(errno));
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    if ((st = token_string(L->tok, hearth_tok_bos(L->tok), &L->bos, err)) == HEARTH_OK)
        st = token_string(L->tok, hearth_tok_eos(L->tok), &L->eos, err);
    while (st == HEARTH_OK && (errno = 0, len = getline(&line, &line_cap, f)) >= 0) {
        L->line++;
        char *at = line;
        if (L->line == 1 && len >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) at += 3, len -= 3; /* a UTF-8 BOM */
        if (is_blank(at, (size_t)len)) continue;
        json_error_t je;
        json_t *o = json_loadb(at, (size_t)len, JSON_REJECT_DUPLICATES, &je);
        if (!o)
            st = bad_line(L, err, HEARTH_EFORMAT, "bad JSON at byte %d: %s", je.position, je.text);
        else if (!json_is_object(o))
            st = bad_line(L, err, HEARTH_EFORMAT, "expected a JSON object, got %s", json_kind(o));
        else
            st = fn(L, o, ctx, err);
        json_decref(o);
    }
    if (st == HEARTH_OK && ferror(f))
        st = hearth_err_set(err, HEARTH_EIO, "%s line %d: %s", L->path, L->line + 1, strerror(errno));
    free(line);
    fclose(f);
    hearth_tmpl_free(L->tmpl);
    free(L->bos);
    free(L->eos);
    L->tmpl = NULL, L->bos = L->eos = NULL;
    return st;
}

/* ---- SFT examples ---- */

typedef struct {
    hearth_train_data *d;
    size_t cap;
} sft_ctx;

static hearth_status sft_line(loader *L, const json_t *o, void *ctx, hearth_err *err) {
    sft_ctx *c = ctx;
    hearth_train_data *d = c->d;
    const char *key;
    json_t *v;
    int has_text = json_object_get(o, "text") != NULL, has_msgs = json_object_get(o, "messages") != NULL;
    int has_prompt = json_object_get(o, "prompt") || json_object_get(o, "completion");
    if (has_text + has_msgs + has_prompt != 1) {
        hearth_status st = bad_line(L, err, HEARTH_EFORMAT,
                                    "expected one of {\"text\"}, {\"prompt\", \"completion\"} or {\"messages\"}, got %s",
                                    json_object_size(o) ? "a mix of them" : "an empty object");
        if (!has_text && !has_msgs && !has_prompt) /* name what is there instead */
            json_object_foreach((json_t *)o, key, v) {
                st = bad_line(L, err, HEARTH_EFORMAT,
                              "expected one of {\"text\"}, {\"prompt\", \"completion\"} or {\"messages\"}, got "
                              "key \"%s\"",
                              key);
                break;
            }
        return st;
    }
    hearth_train_example *ex = grow(d->ex, sizeof *d->ex, d->n, &c->cap);
    if (!ex) return oom(err);
    d->ex = ex;
    /* Other keys (an id, a source: a dataset's other columns) are left
     * alone, as the HF trainers drop them. */
    seq s = {0};
    int truncated = 0;
    hearth_status st = has_text   ? shape_text(L, o, &s, err)
                       : has_msgs ? shape_messages(L, o, &s, err)
                                  : shape_prompt(L, o, &s, err);
    if (st == HEARTH_OK) st = finish(L, &s, NULL, &d->ex[d->n], &truncated, err);
    seq_free(&s);
    if (st != HEARTH_OK) return st;
    for (int i = 0; i < d->ex[d->n].n; i++) d->n_labels += d->ex[d->n].label[i];
    d->n_truncated += truncated;
    d->n++;
    return HEARTH_OK;
}

hearth_status hearth_train_data_load(hearth_train_data *d, const char *path, const hearth_tokenizer *tok,
                                     const char *chat_template, int max_len, hearth_err *err) {
    memset(d, 0, sizeof *d);
    loader L = {.path = path, .tok = tok, .chat_template = chat_template, .max_len = max_len};
    sft_ctx c = {.d = d};
    hearth_status st = read_jsonl(&L, sft_line, &c, err);
    if (st == HEARTH_OK && !d->n) st = hearth_err_set(err, HEARTH_EFORMAT, "%s: no examples in it", path);
    if (st != HEARTH_OK) hearth_train_data_free(d);
    return st;
}

void hearth_train_data_free(hearth_train_data *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) example_free(&d->ex[i]);
    free(d->ex);
    memset(d, 0, sizeof *d);
}

/* ---- preference pairs ---- */

static const char *const SIDES[2] = {"chosen", "rejected"};

/* Standard: {"prompt": "...", "chosen": "...", "rejected": "..."}, each
 * side a prompt + completion example. */
static hearth_status pair_standard(const loader *L, const json_t *o, seq s[2], hearth_err *err) {
    const char *prompt, *resp[2];
    hearth_status st = get_string(L, o, "prompt", &prompt, err);
    for (int k = 0; k < 2 && st == HEARTH_OK; k++) {
        const json_t *v = json_object_get(o, SIDES[k]);
        if (!json_is_string(v))
            return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" must be a string, as \"prompt\" is, not %s", SIDES[k],
                            json_kind(v));
        resp[k] = json_string_value(v);
        if (!*resp[k]) return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" is empty", SIDES[k]);
    }
    for (int k = 0; k < 2 && st == HEARTH_OK; k++) {
        char side[32];
        snprintf(side, sizeof side, "\"%s\"", SIDES[k]);
        st = prompt_completion(L, prompt, resp[k], side, &s[k], err);
    }
    return st;
}

/* A response msgs[from, n) that writes nothing: every assistant message
 * in it has empty content and no tool call. */
static int empty_response(const json_t *msgs, size_t from) {
    for (size_t i = from; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        if (!is_role(m, "assistant")) continue;
        const json_t *content = json_object_get(m, "content");
        if (json_object_get(m, "tool_calls") || (json_is_string(content) && json_string_length(content))) return 0;
    }
    return 1;
}

/* Conversational: {"prompt": [messages], "chosen": [messages], "rejected":
 * [messages]}, each side the prompt's messages then its own, its own
 * assistant messages learnt; or, with no "prompt", {"chosen": [...],
 * "rejected": [...]} two whole conversations sharing their first messages
 * (an implicit prompt), the assistant messages from the first that differ
 * learnt. Either way a response begins with an assistant message. */
static hearth_status pair_conversational(loader *L, const json_t *o, seq s[2], hearth_err *err) {
    const json_t *prompt = json_object_get(o, "prompt"), *tools = json_object_get(o, "tools"), *resp[2];
    hearth_status st = HEARTH_OK;
    if (prompt) st = check_messages(L, prompt, "prompt", 0, err);
    for (int k = 0; k < 2 && st == HEARTH_OK; k++) {
        resp[k] = json_object_get(o, SIDES[k]);
        if (!json_is_array(resp[k]))
            return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" must be a list of messages, as %s, not %s", SIDES[k],
                            prompt ? "\"prompt\" is" : "\"chosen\" is", json_kind(resp[k]));
        st = check_messages(L, resp[k], SIDES[k], 1, err);
    }
    if (st == HEARTH_OK) st = check_tools(L, tools, err);
    if (st == HEARTH_OK) st = need_template(L, "a conversational preference pair", err);
    if (st != HEARTH_OK) return st;
    /* from: where each side's response begins in its conversation */
    size_t from = prompt ? json_array_size(prompt) : 0;
    if (!prompt) {
        size_t nc = json_array_size(resp[0]), nr = json_array_size(resp[1]);
        while (from < nc && from < nr && json_equal(json_array_get(resp[0], from), json_array_get(resp[1], from)))
            from++;
        if (from == nc && from == nr)
            return bad_line(L, err, HEARTH_EFORMAT,
                            "\"chosen\" and \"rejected\" are the same conversation: the pair teaches nothing");
        for (int k = 0; k < 2; k++)
            if (from == json_array_size(resp[k]))
                return bad_line(L, err, HEARTH_EFORMAT,
                                "\"%s\" ends where it stops sharing its messages with \"%s\": with no \"prompt\" "
                                "(an implicit prompt), each side must go on with a response of its own",
                                SIDES[k], SIDES[!k]);
    }
    for (int k = 0; k < 2; k++) {
        const json_t *first = json_array_get(resp[k], prompt ? 0 : from);
        if (!is_role(first, "assistant")) {
            if (prompt)
                return bad_line(L, err, HEARTH_EFORMAT,
                                "\"%s\" must begin with an assistant message (the response), not a \"%s\" one",
                                SIDES[k], json_string_value(json_object_get(first, "role")));
            return bad_line(L, err, HEARTH_EFORMAT,
                            "\"chosen\" and \"rejected\" first differ at message %zu, %s[%zu] is a \"%s\" message: "
                            "with no \"prompt\" (an implicit prompt), the messages before the responses must be the "
                            "same and each response must begin with an assistant message",
                            from, SIDES[k], from, json_string_value(json_object_get(first, "role")));
        }
        if (empty_response(resp[k], prompt ? 0 : from))
            return bad_line(L, err, HEARTH_EFORMAT, "\"%s\" is empty: its response's assistant messages have no content",
                            SIDES[k]);
    }
    for (int k = 0; k < 2 && st == HEARTH_OK; k++) {
        json_t *all = prompt ? json_array() : NULL;
        if (prompt && (!all || json_array_extend(all, (json_t *)prompt) || json_array_extend(all, (json_t *)resp[k]))) {
            json_decref(all);
            return oom(err);
        }
        conv c = {.msgs = prompt ? all : resp[k],
                  .tools = tools,
                  .learn_from = from,
                  .split = prompt ? from : 0,
                  .head = "prompt",
                  .tail = SIDES[k]};
        st = conversation(L, &c, &s[k], err);
        json_decref(all);
    }
    return st;
}

typedef struct {
    hearth_train_prefs *d;
    size_t cap;
} prefs_ctx;

static int same_tokens(const seq *a, const seq *b, size_t n) {
    return a->n >= n && b->n >= n && !memcmp(a->tok, b->tok, n * sizeof *a->tok);
}

static hearth_status prefs_line(loader *L, const json_t *o, void *ctx, hearth_err *err) {
    prefs_ctx *c = ctx;
    hearth_train_prefs *d = c->d;
    const json_t *prompt = json_object_get(o, "prompt"), *chosen = json_object_get(o, "chosen");
    const json_t *rejected = json_object_get(o, "rejected");
    if (!chosen && !rejected) {
        const char *key = json_object_iter_key(json_object_iter((json_t *)o));
        char got[96] = "an empty object";
        if (key) snprintf(got, sizeof got, "key \"%.80s\"", key);
        return bad_line(L, err, HEARTH_EFORMAT,
                        "expected a preference pair {\"prompt\", \"chosen\", \"rejected\"} (or {\"chosen\", "
                        "\"rejected\"} conversations), got %s",
                        got);
    }
    if (!chosen || !rejected) return bad_line(L, err, HEARTH_EFORMAT, "no \"%s\"", chosen ? "rejected" : "chosen");
    if (!prompt && json_is_string(chosen))
        return bad_line(L, err, HEARTH_EFORMAT,
                        "\"chosen\" and \"rejected\" are texts with no \"prompt\" (an implicit prompt in text is "
                        "not supported: give the shared prompt as \"prompt\", or the pair as conversations)");
    if (prompt && !json_is_string(prompt) && !json_is_array(prompt))
        return bad_line(L, err, HEARTH_EFORMAT, "\"prompt\" must be a string or a list of messages, not %s",
                        json_kind(prompt));
    if (!json_is_string(chosen) && !json_is_array(chosen))
        return bad_line(L, err, HEARTH_EFORMAT, "\"chosen\" must be a string or a list of messages, not %s",
                        json_kind(chosen));
    hearth_train_pair *pairs = grow(d->p, sizeof *d->p, d->n, &c->cap);
    if (!pairs) return oom(err);
    d->p = pairs;
    seq s[2] = {{0}};
    hearth_train_pair *p = &d->p[d->n];
    memset(p, 0, sizeof *p);
    int trunc[2] = {0, 0};
    hearth_status st = json_is_string(prompt) ? pair_standard(L, o, s, err) : pair_conversational(L, o, s, err);
    if (st == HEARTH_OK && s[0].n == s[1].n && same_tokens(&s[0], &s[1], s[0].n))
        st = bad_line(L, err, HEARTH_EFORMAT,
                      "\"chosen\" and \"rejected\" are the same tokens: the pair teaches nothing");
    if (st == HEARTH_OK && same_tokens(&s[0], &s[1], (size_t)L->max_len))
        st = bad_line(L, err, HEARTH_EFORMAT,
                      "\"chosen\" and \"rejected\" are the same within the first max_len (%d) tokens: cut there, "
                      "the pair teaches nothing",
                      L->max_len);
    if (st == HEARTH_OK) st = finish(L, &s[0], SIDES[0], &p->chosen, &trunc[0], err);
    if (st == HEARTH_OK) st = finish(L, &s[1], SIDES[1], &p->rejected, &trunc[1], err);
    seq_free(&s[0]);
    seq_free(&s[1]);
    if (st != HEARTH_OK) {
        example_free(&p->chosen);
        example_free(&p->rejected);
        return st;
    }
    p->line = L->line;
    d->n_truncated += trunc[0] || trunc[1];
    d->n++;
    return HEARTH_OK;
}

hearth_status hearth_train_prefs_load(hearth_train_prefs *d, const char *path, const hearth_tokenizer *tok,
                                      const char *chat_template, int max_len, hearth_err *err) {
    memset(d, 0, sizeof *d);
    loader L = {.path = path, .tok = tok, .chat_template = chat_template, .max_len = max_len};
    prefs_ctx c = {.d = d};
    hearth_status st = read_jsonl(&L, prefs_line, &c, err);
    if (st == HEARTH_OK && !d->n) st = hearth_err_set(err, HEARTH_EFORMAT, "%s: no preference pairs in it", path);
    if (st != HEARTH_OK) hearth_train_prefs_free(d);
    return st;
}

void hearth_train_prefs_free(hearth_train_prefs *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        example_free(&d->p[i].chosen);
        example_free(&d->p[i].rejected);
    }
    free(d->p);
    memset(d, 0, sizeof *d);
}
