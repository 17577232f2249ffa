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
 * Invariants of a loaded hearth_train_data: every example has 2 <= n <=
 * max_len, label[0] == 0 and at least one label; n_labels is their sum. */
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

static hearth_status shape_prompt(const loader *L, const json_t *o, seq *s, hearth_err *err) {
    const char *prompt, *completion;
    hearth_status st = get_string(L, o, "prompt", &prompt, err);
    if (st == HEARTH_OK) st = get_string(L, o, "completion", &completion, err);
    if (st != HEARTH_OK) return st;
    size_t np = strlen(prompt), nc = strlen(completion);
    char *text = malloc(np + nc + 1);
    if (!text) return oom(err);
    memcpy(text, prompt, np);
    memcpy(text + np, completion, nc + 1);
    size_t b[3] = {0, np, np + nc};
    uint8_t lab[2] = {0, 1};
    const char *what[1] = {"between the prompt and the completion"};
    /* The specials after a text close the completion (an EOS there is what
     * the model should learn to write next), so they are labels too. */
    if (seq_add(s, L->pre, (size_t)L->n_pre, 0) != HEARTH_OK) st = oom(err);
    if (st == HEARTH_OK) st = add_pieces(L, text, b, lab, what, 2, s, err);
    if (st == HEARTH_OK) st = close_text(L, s, err);
    free(text);
    return st;
}

static hearth_status check_messages(const loader *L, const json_t *msgs, const json_t *tools, hearth_err *err) {
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return bad_line(L, err, HEARTH_EFORMAT, "\"messages\" must be a non-empty array, not %s",
                        json_is_array(msgs) ? "an empty array" : json_kind(msgs));
    if (tools && !json_is_array(tools) && !json_is_null(tools))
        return bad_line(L, err, HEARTH_EFORMAT, "\"tools\" must be an array, not %s", json_kind(tools));
    int n_assistant = 0;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m))
            return bad_line(L, err, HEARTH_EFORMAT, "messages[%zu] must be an object, not %s", i, json_kind(m));
        const json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role))
            return bad_line(L, err, HEARTH_EFORMAT, "messages[%zu].role must be a string, not %s", i,
                            json_kind(role));
        int assistant = !strcmp(json_string_value(role), "assistant");
        n_assistant += assistant;
        /* A tool-calling assistant turn may have no text; any other turn is its text. */
        int tool_call = assistant && json_object_get(m, "tool_calls") && (!content || json_is_null(content));
        if (!json_is_string(content) && !tool_call)
            return bad_line(L, err, HEARTH_EFORMAT, "messages[%zu].content must be a string, not %s", i,
                            json_kind(content));
    }
    if (!n_assistant) return bad_line(L, err, HEARTH_EFORMAT, "\"messages\" has no assistant message to learn from");
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

/* Assistant message i's tokens are those of [P_i, Q_i): P_i renders the
 * messages before it with the generation prompt (what the model is given),
 * Q_i those up to it without (what it should have written, with the
 * template's end-of-turn after it, so it learns to stop). Both must be
 * prefixes of the whole rendering, or the turn's tokens are not where the
 * model would write them. */
static hearth_status shape_messages(loader *L, const json_t *o, seq *s, hearth_err *err) {
    const json_t *msgs = json_object_get(o, "messages"), *tools = json_object_get(o, "tools");
    hearth_status st = check_messages(L, msgs, tools, err);
    if (st != HEARTH_OK) return st;
    if (!L->chat_template)
        return bad_line(L, err, HEARTH_ENOTSUP, "a \"messages\" example needs a chat template, and the model has none");
    if (!L->tmpl) {
        hearth_err e = {0};
        if ((st = hearth_tmpl_parse(&L->tmpl, L->chat_template, strlen(L->chat_template), &e)) != HEARTH_OK)
            return bad_line(L, err, st, "chat template: %s", e.msg);
    }
    size_t n_msg = json_array_size(msgs);
    char *full = NULL, *part = NULL;
    size_t n_full, n_part;
    size_t *b = malloc((2 * n_msg + 2) * sizeof *b);
    uint8_t *lab = malloc(2 * n_msg + 1);
    char (*what)[64] = malloc((2 * n_msg + 1) * sizeof *what);
    const char **whatp = malloc((2 * n_msg + 1) * sizeof *whatp);
    if (!b || !lab || !what || !whatp) {
        st = oom(err);
        goto done;
    }
    if ((st = render(L, msgs, n_msg, tools, 0, &full, &n_full, err)) != HEARTH_OK) goto done;
    int k = 0;
    b[0] = 0;
    for (size_t i = 0; i < n_msg; i++) {
        if (strcmp(json_string_value(json_object_get(json_array_get(msgs, i), "role")), "assistant")) continue;
        for (int gen = 1; gen >= 0; gen--) {
            size_t upto = gen ? i : i + 1;
            if ((st = render(L, msgs, upto, tools, gen, &part, &n_part, err)) != HEARTH_OK) goto done;
            int ok = n_part >= b[k] && n_part <= n_full && !memcmp(part, full, n_part);
            free(part);
            part = NULL;
            if (!ok) {
                st = bad_line(L, err, HEARTH_EFORMAT,
                              "messages[%zu] (assistant): the chat template renders the first %zu message%s%s "
                              "otherwise than it begins the whole conversation, so this turn's tokens cannot be "
                              "found in it (does the template change earlier turns, e.g. drop their reasoning?)",
                              i, upto, upto == 1 ? "" : "s", gen ? " with the generation prompt" : "");
                goto done;
            }
            snprintf(what[k], sizeof what[k], "%s messages[%zu] (assistant)", gen ? "before" : "after", i);
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

/* ---- the file ---- */

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

/* Parse one line into a finished example: shape, tokens, truncation, checks. */
static hearth_status load_line(loader *L, const char *line, size_t len, int max_len, hearth_train_example *ex,
                               int *truncated, hearth_err *err) {
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return bad_line(L, err, HEARTH_EFORMAT, "bad JSON at byte %d: %s", je.position, je.text);
    hearth_status st = HEARTH_OK;
    seq s = {0};
    const char *key;
    json_t *v;
    int has_text = json_object_get(o, "text") != NULL, has_msgs = json_object_get(o, "messages") != NULL;
    int has_prompt = json_object_get(o, "prompt") || json_object_get(o, "completion");
    if (!json_is_object(o)) {
        st = bad_line(L, err, HEARTH_EFORMAT, "expected a JSON object, got %s", json_kind(o));
        goto done;
    }
    if (has_text + has_msgs + has_prompt != 1) {
        st = bad_line(L, err, HEARTH_EFORMAT,
                      "expected one of {\"text\"}, {\"prompt\", \"completion\"} or {\"messages\"}, got %s",
                      json_object_size(o) ? "a mix of them" : "an empty object");
        if (!has_text && !has_msgs && !has_prompt) /* name what is there instead */
            json_object_foreach(o, key, v) {
                st = bad_line(L, err, HEARTH_EFORMAT,
                              "expected one of {\"text\"}, {\"prompt\", \"completion\"} or {\"messages\"}, got "
                              "key \"%s\"",
                              key);
                break;
            }
        goto done;
    }
    /* Other keys (an id, a source: a dataset's other columns) are left
     * alone, as the HF trainers drop them. */
    st = has_text ? shape_text(L, o, &s, err) : has_msgs ? shape_messages(L, o, &s, err) : shape_prompt(L, o, &s, err);
    if (st != HEARTH_OK) goto done;
    *truncated = s.n > (size_t)max_len;
    if (*truncated) s.n = (size_t)max_len;
    if (s.n) s.lab[0] = 0;
    size_t n_lab = 0;
    for (size_t i = 0; i < s.n; i++) n_lab += s.lab[i];
    if (s.n < 2) {
        st = bad_line(L, err, HEARTH_EFORMAT, "the example has %zu token%s; training needs at least 2", s.n,
                      s.n == 1 ? "" : "s");
        goto done;
    }
    if (!n_lab) {
        st = bad_line(L, err, HEARTH_EFORMAT, "no token to learn from%s",
                      *truncated ? " within the first max_len tokens" : "");
        goto done;
    }
    ex->tokens = s.tok;
    ex->label = s.lab;
    ex->n = (int)s.n;
    ex->line = L->line;
    s.tok = NULL, s.lab = NULL;
done:
    seq_free(&s);
    json_decref(o);
    return st;
}

hearth_status hearth_train_data_load(hearth_train_data *d, const char *path, const hearth_tokenizer *tok,
                                     const char *chat_template, int max_len, hearth_err *err) {
    memset(d, 0, sizeof *d);
    if (max_len < 2)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: max_len %d: an example needs 2 tokens", path, max_len);
    loader L = {.path = path, .tok = tok, .chat_template = chat_template};
    hearth_status st = probe_tokenizer(&L, err);
    if (st != HEARTH_OK) return st;
    FILE *f = fopen(path, "rb");
    if (!f) return hearth_err_set(err, HEARTH_EIO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t line_cap = 0, cap = 0;
    ssize_t len;
    if ((st = token_string(tok, hearth_tok_bos(tok), &L.bos, err)) == HEARTH_OK)
        st = token_string(tok, hearth_tok_eos(tok), &L.eos, err);
    while (st == HEARTH_OK && (errno = 0, len = getline(&line, &line_cap, f)) >= 0) {
        L.line++;
        char *at = line;
        if (L.line == 1 && len >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) at += 3, len -= 3; /* a UTF-8 BOM */
        if (is_blank(at, (size_t)len)) continue;
        if (d->n == (int)cap) {
            size_t c = cap ? 2 * cap : 64;
            hearth_train_example *ex = realloc(d->ex, c * sizeof *ex);
            if (!ex) {
                st = oom(err);
                break;
            }
            d->ex = ex, cap = c;
        }
        int truncated = 0;
        if ((st = load_line(&L, at, (size_t)len, max_len, &d->ex[d->n], &truncated, err)) != HEARTH_OK) break;
        for (int i = 0; i < d->ex[d->n].n; i++) d->n_labels += d->ex[d->n].label[i];
        d->n_truncated += truncated;
        d->n++;
    }
    if (st == HEARTH_OK && ferror(f))
        st = hearth_err_set(err, HEARTH_EIO, "%s line %d: %s", path, L.line + 1, strerror(errno));
    if (st == HEARTH_OK && !d->n) st = hearth_err_set(err, HEARTH_EFORMAT, "%s: no examples in it", path);
    free(line);
    fclose(f);
    hearth_tmpl_free(L.tmpl);
    free(L.bos);
    free(L.eos);
    if (st != HEARTH_OK) hearth_train_data_free(d);
    return st;
}

void hearth_train_data_free(hearth_train_data *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        free(d->ex[i].tokens);
        free(d->ex[i].label);
    }
    free(d->ex);
    memset(d, 0, sizeof *d);
}
