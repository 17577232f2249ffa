/* completion.c - prepare (resolve, template, tokenize, admit), execute (pull
 * tokens, cancel on disconnect) and the terminal summary. See completion.h. */
#define _GNU_SOURCE /* memmem */
#include "completion/completion.h"

#include "completion/dry_breakers.h"
#include "completion/grammar.h"
#include "completion/json_mode.h"
#include "core/clock.h"
#include "core/sha256.h"
#include "template/template.h"

#include <pthread.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hearth_cpl_ctx {
    hearth_engine *engine;
    const hearth_tokenizer *tok;
    int ctx, vocab;
    hearth_tmpl *tmpl;
    char *tmpl_src; /* its source (NUL-terminated), or NULL */
    int template_thinks; /* the template knows <think>: split reasoning */
    char *bos, *eos;     /* token texts for the template, or NULL */
    hearth_cpl_params defaults; /* built-in < model < flags, resolved once */
    int flag_max_tokens;        /* the server's max_tokens flag, -1 without: it sizes an infill's files */
    int spm_infill;
    int priority_ok; /* hearth_cpl_ctx_opts.priority_scheduling */
    int32_t end_ids[HEARTH_MAX_STOP_IDS];
    int n_end;
    pthread_mutex_t vb_mu; /* guards vb and dry: made at their first use */
    hearth_vocab_bytes vb; /* the vocabulary's bytes (JSON mode, grammars, DRY's breakers) */
    hearth_dry_breakers dry; /* llama.cpp's default DRY breakers over it */
    int dry_built;
    hearth_adapter_names adapters; /* the LoRA adapters a request's model name selects */
};

struct hearth_cpl {
    hearth_cpl_ctx *c;
    hearth_seq *seq;
    int adapter;
    char adapter_name[HEARTH_ADAPTER_NAME_MAX]; /* its name as the request began */
    hearth_sink sink;
    atomic_int cancel;
    int done, sink_stopped, client_gone;
    int n_pulled;
    hearth_logprobs *lp; /* [lp_cap] when logprobs were asked for */
    int n_lp, lp_cap, want_lp;
    int want_plp; /* prompt_logprobs: the engine scores the prompt for hearth_cpl_prompt_logprobs */
    double t_start, t_first;
    hearth_hist *itl; /* hearth_cpl_track_itl's */
    double t_prev;    /* when the last token was pulled */
    hearth_cpl_summary sum;
    float *emb; /* embed: the vector as last asked for */
    int emb_dim;
    char *echo;        /* echo: the prompt's text */
    size_t echo_len;
    char *infill_text; /* infill: the prompt laid out, as text */
    size_t infill_len;
    int prompt_only;   /* echo with max_tokens 0: the one token the engine makes is not the answer's */
    int32_t ends[HEARTH_MAX_STOP_IDS]; /* the ids that end the answer (the sink borrows them) */
};

/* ---- settings ---- */

void hearth_cpl_params_overlay(hearth_cpl_params *b, const hearth_cpl_params *o) {
#define TAKE(f)                 \
    if (o->has_##f) {           \
        b->has_##f = 1;         \
        b->f = o->f;            \
    }
    TAKE(temperature)
    TAKE(top_p)
    TAKE(top_k)
    TAKE(min_p)
    TAKE(repetition_penalty)
    TAKE(presence_penalty)
    TAKE(frequency_penalty)
    TAKE(max_tokens)
    TAKE(seed)
    TAKE(repeat_last_n)
    TAKE(typical_p)
    TAKE(top_n_sigma)
    TAKE(xtc_probability)
    TAKE(xtc_threshold)
    TAKE(dry_multiplier)
    TAKE(dry_base)
    TAKE(dry_allowed_length)
    TAKE(dry_penalty_last_n)
    TAKE(dynatemp_range)
    TAKE(dynatemp_exponent)
    TAKE(mirostat)
    TAKE(mirostat_tau)
    TAKE(mirostat_eta)
#undef TAKE
}

void hearth_cpl_params_from_gen(hearth_cpl_params *p, const hearth_gen_defaults *g) {
    memset(p, 0, sizeof *p);
    if (g->has_temperature) p->has_temperature = 1, p->temperature = g->temperature;
    if (g->has_top_p) p->has_top_p = 1, p->top_p = g->top_p;
    if (g->has_top_k) p->has_top_k = 1, p->top_k = g->top_k;
    if (g->has_min_p) p->has_min_p = 1, p->min_p = g->min_p;
    if (g->has_repetition_penalty) p->has_repetition_penalty = 1, p->repetition_penalty = g->repetition_penalty;
    if (g->has_max_new_tokens) p->has_max_tokens = 1, p->max_tokens = g->max_new_tokens;
    /* transformers: do_sample=false decodes greedily whatever the temperature */
    if (g->has_do_sample && !g->do_sample) p->has_temperature = 1, p->temperature = 0;
}

void hearth_cpl_request_init(hearth_cpl_request *r) {
    memset(r, 0, sizeof *r);
    r->prompt_field = "prompt";
    r->prompt_logprobs = -1;
}

void hearth_cpl_request_deinit(hearth_cpl_request *r) {
    json_decref(r->messages);
    json_decref(r->tools);
    json_decref(r->template_kwargs);
    json_decref(r->json_schema);
    free(r->grammar);
    for (int i = 0; i < r->n_bad_words; i++) free(r->bad_words[i]);
    free(r->bad_words);
    free(r->allowed_ids);
    free(r->cache_salt);
    for (int i = 0; i < r->n_dry_breakers; i++) free(r->dry_breakers[i]);
    free(r->dry_breakers);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->bias);
    free(r->model);
    hearth_cpl_infill_free(r->infill);
    memset(r, 0, sizeof *r);
}

const char *hearth_cpl_finish_name(hearth_cpl_finish f) {
    switch (f) {
    case HEARTH_CPL_FINISH_STOP: return "stop";
    case HEARTH_CPL_FINISH_LENGTH: return "length";
    case HEARTH_CPL_FINISH_TOOL_CALLS: return "tool_calls";
    case HEARTH_CPL_FINISH_CANCELED: return "cancelled";
    case HEARTH_CPL_FINISH_ERROR: return "error";
    }
    return "error";
}

/* ---- context ---- */

static char *token_string(const hearth_tokenizer *tok, int id) {
    size_t n = 0;
    const char *s = id >= 0 ? hearth_tok_token_text(tok, id, &n) : NULL;
    if (!s) return NULL;
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

static void add_end_id(hearth_cpl_ctx *c, int id) {
    if (id < 0 || id >= c->vocab) return;
    for (int i = 0; i < c->n_end; i++)
        if (c->end_ids[i] == id) return;
    if (c->n_end < HEARTH_MAX_STOP_IDS) c->end_ids[c->n_end++] = id;
}

hearth_status hearth_cpl_ctx_new(hearth_cpl_ctx **out, const hearth_cpl_ctx_opts *o, hearth_err *err) {
    *out = NULL;
    hearth_cpl_ctx *c = calloc(1, sizeof *c);
    if (!c) return hearth_err_set(err, HEARTH_ENOMEM, "completion: out of memory");
    c->engine = o->engine;
    c->tok = o->tok;
    pthread_mutex_init(&c->vb_mu, NULL);
    hearth_adapter_names_init(&c->adapters);
    c->ctx = o->ctx;
    c->vocab = o->cfg->vocab_size;
    c->flag_max_tokens = o->flags.has_max_tokens ? o->flags.max_tokens : -1;
    c->spm_infill = o->spm_infill;
    c->priority_ok = o->priority_scheduling;
    if (o->chat_template) {
        if (!(c->tmpl_src = malloc(o->chat_template_len + 1))) {
            hearth_cpl_ctx_free(c);
            return hearth_err_set(err, HEARTH_ENOMEM, "completion: out of memory");
        }
        memcpy(c->tmpl_src, o->chat_template, o->chat_template_len);
        c->tmpl_src[o->chat_template_len] = 0;
        hearth_status st = hearth_tmpl_parse(&c->tmpl, o->chat_template, o->chat_template_len, err);
        if (st != HEARTH_OK) {
            hearth_cpl_ctx_free(c);
            return hearth_err_wrap(err, st, "chat template");
        }
        /* A template that writes <think> has a model that thinks in it. */
        for (size_t i = 0; i + 7 <= o->chat_template_len && !c->template_thinks; i++)
            c->template_thinks = !memcmp(o->chat_template + i, "<think>", 7);
    }
    c->bos = token_string(c->tok, hearth_tok_bos(c->tok));
    c->eos = token_string(c->tok, hearth_tok_eos(c->tok));
    for (int i = 0; i < o->cfg->n_eos; i++) add_end_id(c, o->cfg->eos_token_ids[i]);
    add_end_id(c, hearth_tok_eos(c->tok));
    int nv = hearth_tok_n_vocab(c->tok);
    for (int id = 0; id < nv && id < c->vocab; id++)
        if (hearth_tok_is_eog(c->tok, id)) add_end_id(c, id);
    /* built-in < model < flags */
    hearth_cpl_params *d = &c->defaults;
    hearth_sampling sd; /* the sampler's own defaults */
    hearth_sampling_default(&sd);
    d->temperature = sd.temperature;
    d->top_p = sd.top_p;
    d->repetition_penalty = sd.repetition_penalty;
    d->typical_p = sd.typical_p;
    d->xtc_threshold = sd.xtc_threshold;
    d->dry_base = sd.dry.base;
    d->dry_allowed_length = sd.dry.allowed_length;
    d->dry_penalty_last_n = -1; /* the whole context */
    d->dynatemp_exponent = sd.dynatemp_exponent;
    d->mirostat_tau = sd.mirostat_tau;
    d->mirostat_eta = sd.mirostat_eta;
    hearth_cpl_params_overlay(d, &o->model_defaults);
    hearth_cpl_params_overlay(d, &o->flags);
    for (int i = 0; i < o->n_adapters; i++) {
        hearth_status st = hearth_adapter_names_add(&c->adapters, o->adapter_ids ? o->adapter_ids[i] : i + 1,
                                                    o->adapters[i], err);
        if (st != HEARTH_OK) {
            hearth_cpl_ctx_free(c);
            return st;
        }
    }
    *out = c;
    return HEARTH_OK;
}

void hearth_cpl_ctx_free(hearth_cpl_ctx *c) {
    if (!c) return;
    hearth_vocab_bytes_free(&c->vb);
    hearth_dry_breakers_free(&c->dry);
    free(c->tmpl_src);
    pthread_mutex_destroy(&c->vb_mu);
    hearth_tmpl_free(c->tmpl);
    free(c->bos);
    free(c->eos);
    hearth_adapter_names_destroy(&c->adapters);
    free(c);
}

hearth_adapter_names *hearth_cpl_adapters(hearth_cpl_ctx *c) { return &c->adapters; }
void hearth_cpl_track_itl(hearth_cpl *q, hearth_hist *h) { q->itl = h; }
const char *hearth_cpl_model(const hearth_cpl *q) { return q->adapter ? q->adapter_name : NULL; }

int hearth_cpl_ctx_has_chat(const hearth_cpl_ctx *c) { return c->tmpl != NULL; }
const hearth_tokenizer *hearth_cpl_ctx_tok(const hearth_cpl_ctx *c) { return c->tok; }

/* ---- prepare ---- */

static hearth_status reject(hearth_cpl_error *e, hearth_status st, const char *param, const char *code,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static hearth_status reject(hearth_cpl_error *e, hearth_status st, const char *param, const char *code,
                            const char *fmt, ...) {
    e->status = st;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return st;
}

/* Does the rendered prompt end inside an open <think>? */
static int ends_in_think(const char *s, size_t n) {
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t')) n--;
    return n >= 7 && !memcmp(s + n - 7, "<think>", 7);
}

static int is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t' || ch == '\f' || ch == '\v'; }

/* continue_final: cut the rendered prompt right after the final message's
 * text, as transformers' continue_final_message does (its text found last in
 * the prompt; its trailing spaces kept only if the template printed them). */
static hearth_status cut_after_final(const hearth_cpl_request *r, const char *text, size_t *len, hearth_cpl_error *e) {
    const json_t *last = json_array_get(r->messages, json_array_size(r->messages) - 1);
    const char *m = json_string_value(json_object_get(last, "content"));
    if (!m || strcmp(json_string_value(json_object_get(last, "role")), "assistant"))
        return reject(e, HEARTH_EINVAL, "messages", NULL,
                      "messages: only a final assistant message with text can be continued");
    size_t a = 0, b = strlen(m);
    while (a < b && is_space(m[a])) a++;
    while (b > a && is_space(m[b - 1])) b--;
    if (a == b)
        return reject(e, HEARTH_EINVAL, "messages", NULL, "messages: the final assistant message to continue is empty");
    const char *at = NULL;
    for (const char *p = text; (p = memmem(p, (size_t)(text + *len - p), m + a, b - a)); p++) at = p;
    if (!at)
        return reject(e, HEARTH_EINVAL, "messages", NULL,
                      "messages: the chat template does not print the final assistant message as given, so the "
                      "answer cannot continue it");
    size_t whole = strlen(m + a); /* with its trailing spaces, if the template kept them */
    size_t keep = (size_t)(at - text) + whole <= *len && !memcmp(at, m + a, whole) ? whole : b - a;
    *len = (size_t)(at - text) + keep;
    return HEARTH_OK;
}

hearth_status hearth_cpl_render(hearth_cpl_ctx *c, const hearth_cpl_request *r, char **out, size_t *len,
                                hearth_cpl_error *e) {
    hearth_err err = {0};
    char *text = NULL;
    if (!c->tmpl)
        return reject(e, HEARTH_ENOTSUP, "messages", "chat_template_missing",
                      "the model has no chat template: use /v1/completions, or start the server with "
                      "--chat-template-file");
    hearth_status st = hearth_tmpl_render_chat(c->tmpl, r->messages, r->tools, !r->continue_final, c->bos, c->eos,
                                               r->template_kwargs, &text, len, &err);
    if (st != HEARTH_OK)
        return reject(e, st == HEARTH_ENOMEM ? st : HEARTH_EINVAL, "messages", NULL,
                      "messages: the chat template refused them: %s", err.msg);
    if (r->continue_final && (st = cut_after_final(r, text, len, e)) != HEARTH_OK) {
        free(text);
        return st;
    }
    *out = text;
    return HEARTH_OK;
}

const char *hearth_cpl_chat_template(const hearth_cpl_ctx *c) { return c->tmpl_src; }
const char *hearth_cpl_bos_text(const hearth_cpl_ctx *c) { return c->bos; }
const char *hearth_cpl_eos_text(const hearth_cpl_ctx *c) { return c->eos; }
const hearth_cpl_params *hearth_cpl_defaults(const hearth_cpl_ctx *c) { return &c->defaults; }

/* The prompt's token ids: the chat template and the tokenizer, or the
 * request's own ids. *in_reasoning: the prompt leaves a <think> open. */
static hearth_status prompt_ids(hearth_cpl_ctx *c, const hearth_cpl_request *r, int32_t **out, size_t *n_out,
                                int *in_reasoning, hearth_cpl_error *e) {
    hearth_err err = {0};
    hearth_status st;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    *in_reasoning = 0;
    if (r->chat) {
        char *text = NULL;
        size_t len;
        if ((st = hearth_cpl_render(c, r, &text, &len, e)) != HEARTH_OK) return st;
        *in_reasoning = c->template_thinks && ends_in_think(text, len);
        st = hearth_tok_encode(c->tok, text, len, 0, 1, &ids, &n_ids, &err);
        free(text);
        if (st != HEARTH_OK) return reject(e, st, "messages", NULL, "messages: %s", err.msg);
    } else if (r->prompt_ids) {
        n_ids = (size_t)r->n_prompt_ids;
        ids = malloc(sizeof *ids * (n_ids ? n_ids : 1));
        if (!ids) return reject(e, HEARTH_ENOMEM, NULL, NULL, "out of memory");
        memcpy(ids, r->prompt_ids, sizeof *ids * n_ids);
        for (size_t i = 0; i < n_ids; i++)
            if (ids[i] < 0 || ids[i] >= c->vocab) {
                free(ids);
                return reject(e, HEARTH_ERANGE, r->prompt_field, NULL,
                              "%s: token id %d is outside the vocabulary [0, %d)", r->prompt_field, r->prompt_ids[i],
                              c->vocab);
            }
    } else {
        const char *text = r->prompt ? r->prompt : "";
        st = hearth_tok_encode(c->tok, text, strlen(text), !r->no_special && !r->infill, 1, &ids, &n_ids, &err);
        if (st != HEARTH_OK) return reject(e, st, r->prompt_field, NULL, "%s: %s", r->prompt_field, err.msg);
        if (r->infill) {
            int32_t *middle = ids;
            st = hearth_infill_prompt(c->tok, r->infill, middle, n_ids, c->ctx, c->flag_max_tokens, c->spm_infill,
                                      &ids, &n_ids, &err);
            free(middle);
            if (st != HEARTH_OK)
                return reject(e, st, st == HEARTH_ENOTSUP ? "model" : "input_prefix", NULL, "%s", err.msg);
        }
    }
    const char *pfield = r->chat ? "messages" : r->prompt_field;
    if (n_ids == 0) {
        free(ids);
        return reject(e, HEARTH_EINVAL, pfield, NULL, "%s: the prompt is empty", pfield);
    }
    *out = ids;
    *n_out = n_ids;
    return HEARTH_OK;
}

hearth_status hearth_cpl_tokenize(hearth_cpl_ctx *c, const hearth_cpl_request *r, int32_t **ids, int *n,
                                  hearth_cpl_error *e) {
    memset(e, 0, sizeof *e);
    size_t n_ids;
    int in_reasoning;
    hearth_status st = prompt_ids(c, r, ids, &n_ids, &in_reasoning, e);
    *n = st == HEARTH_OK ? (int)n_ids : 0;
    return st;
}

int hearth_cpl_ctx_len(const hearth_cpl_ctx *c) { return c->ctx; }

/* vLLM's bad_words as token sequences into seqs (off / ids owned by the
 * caller): each word as written with its leading spaces dropped, and with
 * one space before it when that tokenizes to another first token in as
 * many tokens (a word at the start and inside a text). */
static hearth_status bad_word_seqs(const hearth_cpl_ctx *c, const hearth_cpl_request *r, hearth_token_seqs *seqs,
                                   int32_t **off_out, int32_t **ids_out, hearth_err *err) {
    int32_t *off = malloc(sizeof *off * (2 * (size_t)r->n_bad_words + 1)), *all = NULL;
    size_t n_all = 0;
    int n = 0;
    hearth_status st = off ? HEARTH_OK : HEARTH_ENOMEM;
    if (off) off[0] = 0;
    for (int w = 0; w < r->n_bad_words && st == HEARTH_OK; w++) {
        const char *word = r->bad_words[w];
        while (*word == ' ') word++;
        size_t len = strlen(word);
        char *spaced = malloc(len + 2);
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (!spaced) st = HEARTH_ENOMEM;
        else {
            spaced[0] = ' ';
            memcpy(spaced + 1, word, len + 1);
            st = hearth_tok_encode(c->tok, word, len, 0, 0, &a, &na, err);
            if (st == HEARTH_OK) st = hearth_tok_encode(c->tok, spaced, len + 1, 0, 0, &b, &nb, err);
        }
        for (int v = 0; v < 2 && st == HEARTH_OK; v++) {
            const int32_t *x = v ? b : a;
            size_t nx = v ? nb : na;
            if (nx == 0 || nx > HEARTH_BAD_WORD_MAX || (v && (nb != na || b[0] == a[0]))) continue;
            int32_t *grown = realloc(all, sizeof *all * (n_all + nx));
            if (!grown) {
                st = HEARTH_ENOMEM;
                break;
            }
            all = grown;
            memcpy(all + n_all, x, sizeof *x * nx);
            n_all += nx;
            off[++n] = (int32_t)n_all;
        }
        if (st == HEARTH_OK && (na == 0 || na > HEARTH_BAD_WORD_MAX))
            st = hearth_err_set(err, HEARTH_EINVAL, "bad_words[%d] is %zu tokens (1 to %d)", w, na,
                                HEARTH_BAD_WORD_MAX);
        free(spaced);
        free(a);
        free(b);
    }
    if (st == HEARTH_ENOMEM) hearth_err_set(err, st, "bad_words: out of memory");
    if (st != HEARTH_OK) {
        free(off);
        free(all);
        return st;
    }
    *seqs = (hearth_token_seqs){n, off, all};
    *off_out = off;
    *ids_out = all;
    return HEARTH_OK;
}

/* llama.cpp's samplers into s: the windows resolved against the context
 * (-1 = all of it, 0 = off), DRY's breakers the request's (built into own)
 * or the default ones (built once). */
static hearth_status sampling_llama(hearth_cpl_ctx *c, const hearth_cpl_request *r, const hearth_cpl_params *p,
                                    hearth_sampling *s, hearth_dry_breakers *own, hearth_err *err) {
    int win = p->has_repeat_last_n ? p->repeat_last_n : r->repeat_penalty_llama ? 64 : -1;
    if (win == 0) s->repetition_penalty = 1.0f;
    else if (win > 0) s->repeat_last_n = win;
    s->typical_p = p->typical_p;
    s->top_n_sigma = p->top_n_sigma;
    s->xtc_probability = p->xtc_probability;
    s->xtc_threshold = p->xtc_threshold;
    s->dynatemp_range = p->dynatemp_range;
    s->dynatemp_exponent = p->dynatemp_exponent;
    s->mirostat = p->mirostat;
    s->mirostat_tau = p->mirostat_tau;
    s->mirostat_eta = p->mirostat_eta;
    int last_n = p->dry_penalty_last_n < 0 || p->dry_penalty_last_n > c->ctx ? c->ctx : p->dry_penalty_last_n;
    if (p->dry_multiplier == 0.0f || last_n == 0) return HEARTH_OK;
    s->dry = (hearth_dry_params){p->dry_multiplier, p->dry_base, p->dry_allowed_length};
    s->dry_last_n = last_n;
    hearth_status st = hearth_vocab_bytes_once(&c->vb, &c->vb_mu, c->tok, err);
    if (st != HEARTH_OK) return st;
    if (r->n_dry_breakers) {
        st = hearth_dry_breakers_build(own, &c->vb, c->tok, (const char *const *)r->dry_breakers, r->n_dry_breakers,
                                       err);
        s->dry_breakers = own;
        return st;
    }
    pthread_mutex_lock(&c->vb_mu);
    if (!c->dry_built && (st = hearth_dry_breakers_default(&c->dry, &c->vb, c->tok, err)) == HEARTH_OK)
        c->dry_built = 1;
    pthread_mutex_unlock(&c->vb_mu);
    s->dry_breakers = &c->dry;
    return st;
}

hearth_status hearth_cpl_start(hearth_cpl_ctx *c, const hearth_cpl_request *r, hearth_cpl **out,
                               hearth_cpl_error *e) {
    *out = NULL;
    memset(e, 0, sizeof *e);
    double t0 = hearth_time_now();
    hearth_err err = {0};
    hearth_status st;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int in_reasoning = 0;
    if (r->priority && !c->priority_ok)
        return reject(e, HEARTH_EINVAL, "priority", NULL,
                      "priority %d: priority scheduling is not enabled (serve --scheduling-policy priority)",
                      r->priority);

    /* Resolve: request over the context's defaults. */
    hearth_cpl_params p = c->defaults;
    hearth_cpl_params_overlay(&p, &r->p);

    /* Template and tokens. */
    if ((st = prompt_ids(c, r, &ids, &n_ids, &in_reasoning, e)) != HEARTH_OK) return st;
    const char *pfield = r->chat ? "messages" : r->prompt_field;
    size_t keep = r->truncate_prompt < 0 ? (size_t)c->ctx : (size_t)r->truncate_prompt;
    if (r->truncate_prompt && n_ids > keep) { /* the prompt's last tokens, as vLLM's truncate_prompt_tokens */
        memmove(ids, ids + (n_ids - keep), sizeof *ids * keep);
        n_ids = keep;
    }
    if ((int)n_ids >= c->ctx) {
        free(ids);
        return reject(e, HEARTH_ERANGE, pfield, "context_length_exceeded",
                      "This model's maximum context length is %d tokens; the prompt has %zu tokens, which leaves "
                      "no room to generate. Shorten the %s.",
                      c->ctx, n_ids, pfield);
    }
    int room = c->ctx - (int)n_ids;
    int max_new = p.has_max_tokens ? p.max_tokens : room;
    const int prompt_only = (r->echo || r->prompt_only) && p.has_max_tokens && p.max_tokens == 0;
    if (prompt_only) max_new = 1; /* the prompt's pass, and a token nobody sees */
    if (max_new < 1) {
        free(ids);
        return reject(e, HEARTH_EINVAL, "max_tokens", NULL, "max_tokens must be at least 1, got %d", max_new);
    }
    if (max_new > room) max_new = room; /* clamped to the room left */
    const char *ffield = r->format_field ? r->format_field : "response_format";
    if ((r->json_object || r->json_schema || r->grammar) && in_reasoning) {
        free(ids);
        return reject(e, HEARTH_ENOTSUP, ffield, NULL,
                      "structured output with a prompt that opens the model's reasoning (<think>) is not supported "
                      "yet: the constraint would apply to the reasoning. Turn it off (chat_template_kwargs "
                      "{\"enable_thinking\": false}) or drop %s.",
                      ffield);
    }
    hearth_schema *schema = NULL; /* compiled here, so that a schema we cannot follow is a 400 */
    if (r->json_schema && (st = hearth_schema_compile(&schema, r->json_schema, &err)) != HEARTH_OK) {
        free(ids);
        return reject(e, st, ffield, NULL, "%s: %s", ffield, err.msg); /* EINVAL, ENOTSUP or ENOMEM */
    }
    hearth_grammar *gram = NULL; /* the same for a grammar */
    if (r->grammar && (r->json_object || schema)) {
        free(ids);
        hearth_schema_free(schema);
        return reject(e, HEARTH_EINVAL, ffield, NULL, "a grammar and a JSON format cannot both constrain one answer");
    }
    if (r->grammar && (st = hearth_grammar_compile(&gram, r->grammar, strlen(r->grammar), &err)) != HEARTH_OK) {
        free(ids);
        return reject(e, st, ffield, NULL, "Invalid '%s': %s", ffield, err.msg);
    }

    /* the ids that end the answer: the model's end-of-generation ids (unless ignore_eos) and the request's */
    int32_t ends[HEARTH_MAX_STOP_IDS];
    int n_ends = r->ignore_eos ? 0 : c->n_end;
    memcpy(ends, c->end_ids, sizeof *ends * (size_t)n_ends);
    int bad_id = 0;
    for (int i = 0; i < r->n_stop_token_ids && !bad_id; i++) {
        int id = r->stop_token_ids[i], seen = 0;
        for (int k = 0; k < n_ends; k++) seen |= ends[k] == id;
        if (id < 0 || id >= c->vocab || (!seen && n_ends == HEARTH_MAX_STOP_IDS)) bad_id = 1;
        else if (!seen) ends[n_ends++] = id;
    }
    static const hearth_fim FIM_ENDS[] = {HEARTH_FIM_PAD, HEARTH_FIM_REP, HEARTH_FIM_SEP}; /* as in llama.cpp */
    for (size_t i = 0; r->infill && !r->ignore_eos && i < sizeof FIM_ENDS / sizeof *FIM_ENDS; i++) {
        int id = hearth_tok_fim(c->tok, FIM_ENDS[i]), seen = id < 0 || id >= c->vocab;
        for (int k = 0; k < n_ends; k++) seen |= ends[k] == id;
        if (!seen && n_ends < HEARTH_MAX_STOP_IDS) ends[n_ends++] = id;
    }
    const char *bad_min = r->min_tokens > max_new && !prompt_only ? "more than max_tokens"
                          : r->min_tokens > 0 && (r->json_object || schema || gram)
                              ? "not beside a constrained output format (it must be free to end)"
                              : NULL;
    if (bad_id || bad_min) {
        free(ids);
        hearth_schema_free(schema);
        hearth_grammar_free(gram);
        if (bad_id)
            return reject(e, HEARTH_EINVAL, "stop_token_ids", NULL,
                          "stop_token_ids: an id outside the vocabulary [0, %d), or more than %d ids to end at",
                          c->vocab, HEARTH_MAX_STOP_IDS);
        return reject(e, HEARTH_EINVAL, "min_tokens", NULL, "min_tokens %d: %s", r->min_tokens, bad_min);
    }

    hearth_cpl *q = calloc(1, sizeof *q);
    if (!q) {
        free(ids);
        hearth_schema_free(schema);
        hearth_grammar_free(gram);
        return reject(e, HEARTH_ENOMEM, NULL, NULL, "out of memory");
    }
    q->c = c;
    q->t_start = t0;
    memcpy(q->ends, ends, sizeof ends);
    atomic_init(&q->cancel, 0);
    st = hearth_sink_init(&q->sink, c->tok, (const char *const *)r->stop, r->n_stop, q->ends, n_ends,
                          r->chat && c->template_thinks, in_reasoning,
                          r->chat && r->parse_tools, &err);
    if (st != HEARTH_OK) {
        free(ids);
        hearth_schema_free(schema);
        hearth_grammar_free(gram);
        hearth_cpl_free(q);
        return reject(e, st, st == HEARTH_EINVAL ? "stop" : NULL, NULL, "%s", err.msg);
    }
    q->sink.include_stop = r->include_stop;
    q->sink.n_indent = r->n_indent;
    q->sink.t_max_s = r->t_max_predict_ms / 1000.0;
    if (r->keep_special) q->sink.detok.skip_special = 0; /* special tokens' text too (the end ids stay out) */
    q->want_lp = r->logprobs || r->top_logprobs > 0;
    q->prompt_only = prompt_only;
    if (r->infill) /* the prompt laid out, as text */
        st = hearth_tok_decode(c->tok, ids, n_ids, 0, &q->infill_text, &q->infill_len, &err);
    if (st == HEARTH_OK && r->echo) { /* the text as given, or the ids decoded */
        st = r->prompt ? ((q->echo = strdup(r->prompt)) ? HEARTH_OK : HEARTH_ENOMEM)
                       : hearth_tok_decode(c->tok, ids, n_ids, 0, &q->echo, &q->echo_len, &err);
        if (r->prompt) q->echo_len = strlen(r->prompt);
    }
    if (st != HEARTH_OK) {
        free(ids);
        hearth_schema_free(schema);
        hearth_grammar_free(gram);
        hearth_cpl_free(q);
        return reject(e, st, r->prompt_field, NULL, "%s: %s", r->echo ? "echo" : "the prompt's text",
                      st == HEARTH_ENOMEM ? "out of memory" : err.msg);
    }

    hearth_gen_request g = {0};
    q->adapter = r->model ? hearth_adapter_names_find(&c->adapters, r->model, q->adapter_name) : 0;
    g.adapter = q->adapter;
    g.priority = r->priority;
    if (r->cache_salt) { /* the salt's hash: only equal salts meet in the prefix cache */
        hearth_sha256 h;
        hearth_sha256_init(&h);
        hearth_sha256_update(&h, r->cache_salt, strlen(r->cache_salt));
        hearth_sha256_final(&h, g.cache_salt);
        g.has_cache_salt = 1;
    }
    g.prompt = ids;
    g.n_prompt = (int)n_ids;
    g.max_new = r->embed ? 1 : max_new; /* an embedding: the prompt's pass and one (unread, greedy) token */
    g.want_hidden = r->embed;
    if (r->embed) p.temperature = 0.0f;
    hearth_sampling_default(&g.sampling);
    g.sampling.temperature = p.temperature;
    g.sampling.top_p = p.top_p;
    g.sampling.top_k = p.top_k;
    g.sampling.min_p = p.min_p;
    g.sampling.repetition_penalty = p.repetition_penalty;
    g.sampling.presence_penalty = p.presence_penalty;
    g.sampling.frequency_penalty = p.frequency_penalty;
    g.sampling.seed = p.seed;
    g.sampling.has_seed = p.has_seed;
    g.sampling.logit_bias = r->bias;
    g.sampling.n_logit_bias = r->n_bias;
    g.sampling.top_logprobs = r->top_logprobs;
    g.want_logprobs = q->want_lp;
    g.want_prompt_logprobs = (r->echo && q->want_lp) || r->prompt_logprobs >= 0;
    q->want_plp = r->prompt_logprobs >= 0;
    if (r->prompt_logprobs > g.sampling.top_logprobs) g.sampling.top_logprobs = r->prompt_logprobs;
    memcpy(g.stop_ids, ends, sizeof g.stop_ids[0] * (size_t)n_ends);
    g.n_stop = n_ends;
    if (r->min_tokens > 0) { /* the answer's ends held back until then */
        g.sampling.min_tokens = r->min_tokens;
        memcpy(g.sampling.min_ban, ends, sizeof *ends * (size_t)n_ends);
        g.sampling.n_min_ban = n_ends;
    }
    if (r->infill_sampler) { /* every token's text, and the answer's ends */
        st = hearth_vocab_bytes_once(&c->vb, &c->vb_mu, c->tok, &err);
        if (st != HEARTH_OK) {
            free(g.prompt);
            hearth_grammar_free(gram);
            hearth_schema_free(schema);
            hearth_cpl_free(q);
            return reject(e, st, NULL, NULL, "%s", err.msg);
        }
        hearth_infill_vocab *iv = &g.sampling.infill_vocab;
        g.sampling.infill = 1;
        iv->off = c->vb.off;
        iv->bytes = c->vb.bytes;
        iv->special = c->vb.special;
        iv->n_eog = n_ends < HEARTH_INFILL_MAX_EOG ? n_ends : HEARTH_INFILL_MAX_EOG;
        memcpy(iv->eog, ends, sizeof *ends * (size_t)iv->n_eog);
    }
    if ((r->json_object || schema) &&
        (st = hearth_json_constraint_lazy(&g.sampling.constraint, &c->vb, &c->vb_mu, c->tok, schema, c->end_ids,
                                          c->n_end, &err)) != HEARTH_OK) {
        free(g.prompt);
        hearth_grammar_free(gram);
        hearth_cpl_free(q);
        return reject(e, st, NULL, NULL, "%s", err.msg);
    }
    if (gram) {
        st = hearth_vocab_bytes_once(&c->vb, &c->vb_mu, c->tok, &err);
        if (st == HEARTH_OK) st = hearth_grammar_constraint(&g.sampling.constraint, &c->vb, gram, c->end_ids, c->n_end,
                                                            &err);
        else hearth_grammar_free(gram);
        if (st != HEARTH_OK) {
            free(g.prompt);
            hearth_cpl_free(q);
            return reject(e, st, NULL, NULL, "%s", err.msg);
        }
    }
    hearth_dry_breakers dry_own = {0};
    int32_t *bad_off = NULL, *bad_ids = NULL;
    const char *bad_field = "dry_sequence_breakers";
    g.sampling.allowed_ids = r->allowed_ids;
    g.sampling.n_allowed = r->n_allowed;
    st = sampling_llama(c, r, &p, &g.sampling, &dry_own, &err);
    if (st == HEARTH_OK && r->n_bad_words) {
        bad_field = "bad_words";
        st = bad_word_seqs(c, r, &g.sampling.bad_words, &bad_off, &bad_ids, &err);
    }
    if (st != HEARTH_OK) {
        free(g.prompt);
        hearth_dry_breakers_free(&dry_own);
        if (g.sampling.constraint.free) g.sampling.constraint.free(g.sampling.constraint.self);
        hearth_cpl_free(q);
        return reject(e, st, bad_field, NULL, "%s", err.msg);
    }
    st = hearth_engine_submit(c->engine, &g, &q->seq, &err);
    hearth_dry_breakers_free(&dry_own); /* the sampler took copies */
    free(bad_off);
    free(bad_ids);
    free(g.prompt); /* NULL when ownership moved */
    if (g.sampling.constraint.free) g.sampling.constraint.free(g.sampling.constraint.self); /* not taken */
    if (st != HEARTH_OK) {
        hearth_cpl_free(q);
        const char *param = NULL;
        if (st == HEARTH_EINVAL || st == HEARTH_ERANGE) {
            /* The sampler names the setting in its message; point at it. */
            static const char *fields[] = {"temperature",     "top_p",           "top_k",         "min_p",
                                           "repetition_penalty", "presence_penalty", "frequency_penalty",
                                           "logit_bias",      "top_logprobs",    "typical_p",     "top_n_sigma",
                                           "xtc_probability", "repeat_last_n",   "dry_multiplier",
                                           "allowed_token_ids", "bad_words",  "mirostat"};
            for (size_t i = 0; i < sizeof fields / sizeof *fields && !param; i++)
                if (strstr(err.msg, fields[i])) param = fields[i];
            if (!param) param = pfield;
        }
        return reject(e, st, param, st == HEARTH_EBUSY ? "queue_full" : NULL, "%s", err.msg);
    }
    q->sum.prompt_tokens = (int)n_ids;
    *out = q;
    return HEARTH_OK;
}

/* ---- execute ---- */

static void record_lp(hearth_cpl *q, const hearth_logprobs *lp) {
    if (q->n_lp == q->lp_cap) {
        int cap = q->lp_cap ? q->lp_cap * 2 : 64;
        hearth_logprobs *p = realloc(q->lp, sizeof *p * (size_t)cap);
        if (!p) return; /* a missing record is better than a crash; the count shows it */
        q->lp = p;
        q->lp_cap = cap;
    }
    q->lp[q->n_lp++] = *lp;
}

static void settle(hearth_cpl *q, hearth_cpl_event_fn fn, void *user) {
    hearth_seq_summary s;
    hearth_sink_finish(&q->sink, fn, user);
    hearth_seq_summary_get(q->seq, &s);
    hearth_cpl_summary *m = &q->sum;
    m->completion_tokens = q->n_pulled;
    m->cached_tokens = s.n_cached;
    m->queue_s = s.queue_s;
    m->ttft_s = q->t_first > 0 ? q->t_first - q->t_start : 0;
    m->total_s = hearth_time_now() - q->t_start;
    if (q->sink_stopped && q->sink.limited) {
        m->finish = HEARTH_CPL_FINISH_LENGTH; /* a line rule: llama-server's limit */
    } else if (q->sink_stopped) {
        m->finish = HEARTH_CPL_FINISH_STOP; /* a stop string or an end id: our decision, not the engine's */
        if (q->sink.stop.hit) m->stop_sequence = q->sink.stop.strs[q->sink.stop.which];
    } else {
        switch (s.finish) {
        case HEARTH_FINISH_STOP: m->finish = q->prompt_only ? HEARTH_CPL_FINISH_LENGTH : HEARTH_CPL_FINISH_STOP; break;
        case HEARTH_FINISH_LENGTH: m->finish = HEARTH_CPL_FINISH_LENGTH; break;
        case HEARTH_FINISH_ERROR:
            m->finish = HEARTH_CPL_FINISH_ERROR;
            snprintf(m->error, sizeof m->error, "%s", s.error[0] ? s.error : "the engine failed");
            break;
        default:
            m->finish = HEARTH_CPL_FINISH_CANCELED;
            m->client_gone = q->client_gone;
            snprintf(m->error, sizeof m->error, "%s",
                     q->client_gone ? "the client disconnected" : s.error[0] ? s.error : "cancelled");
            break;
        }
    }
    if (m->finish == HEARTH_CPL_FINISH_STOP && q->sink.n_tool_calls > 0) m->finish = HEARTH_CPL_FINISH_TOOL_CALLS;
    q->done = 1;
}

/* Wait (bounded) for the engine to retire a sequence we cancelled, so that
 * its summary is final. */
static void drain_cancelled(hearth_cpl *q) {
    hearth_token_event ev;
    double until = hearth_time_now() + 5.0;
    while (hearth_time_now() < until) {
        int r = hearth_seq_next(q->seq, &ev, 100);
        if (r == 0) return;
    }
}

int hearth_cpl_step(hearth_cpl *q, hearth_cpl_event_fn fn, void *user, hearth_cpl_gone_fn gone, void *gone_ctx) {
    if (q->done) return 0;
    hearth_token_event ev;
    int got = 0;
    double idle_until = hearth_time_now() + HEARTH_CPL_IDLE_RETURN_S;
    /* A client that hung up while tokens were flowing: do not wait for a
     * write to fail, cancel now (one poll() per step). */
    if (gone && !q->client_gone && gone(gone_ctx)) {
        q->client_gone = 1;
        hearth_seq_cancel(q->seq);
    }
    for (;;) {
        if (atomic_load(&q->cancel)) hearth_seq_cancel(q->seq);
        /* Block for the first token, then take whatever else is ready. */
        int r = hearth_seq_next(q->seq, &ev, got ? 0 : 50);
        if (r == 1) {
            got++;
            const double now = hearth_time_now();
            if (q->t_first == 0) q->t_first = now;
            if (q->prompt_only) continue; /* max_tokens 0: the engine's one token is not shown */
            if (q->itl && q->t_prev > 0) hearth_hist_observe(q->itl, now - q->t_prev);
            q->t_prev = now;
            q->sum.completion_tokens = ++q->n_pulled; /* so far; settled at the end */
            int is_end = 0;
            for (int i = 0; i < q->sink.n_end; i++) is_end |= q->sink.end_ids[i] == ev.id;
            if (q->want_lp && ev.has_logprobs && !is_end) record_lp(q, &ev.lp);
            if (hearth_sink_push(&q->sink, ev.id, fn, user)) {
                q->sink_stopped = 1;
                hearth_seq_cancel(q->seq); /* a stop string or end id: no more tokens wanted */
                drain_cancelled(q);
                settle(q, fn, user);
                return 0;
            }
            if (got >= 64) return 1;
            continue;
        }
        if (r == 0) {
            settle(q, fn, user);
            return 0;
        }
        /* timed out */
        if (got) return 1;
        /* Nothing for a while (queued behind others, a long prefill): return
         * empty-handed so the caller can show the connection is alive. */
        if (hearth_time_now() > idle_until) return 1;
        if (gone && gone(gone_ctx)) {
            q->client_gone = 1;
            hearth_seq_cancel(q->seq);
        }
    }
}

const char *hearth_cpl_infill_text(const hearth_cpl *q, size_t *len) {
    *len = q->infill_len;
    return q->infill_text;
}

const char *hearth_cpl_echo(const hearth_cpl *q, size_t *text_len, const hearth_logprobs **lp, int *n) {
    *text_len = q->echo_len;
    *lp = NULL;
    *n = 0;
    if (!q->echo) return NULL;
    if (q->want_lp && q->seq) *lp = hearth_seq_prompt_logprobs(q->seq, n); /* NULL until the engine wrote them */
    return q->echo;
}

const hearth_logprobs *hearth_cpl_prompt_logprobs(const hearth_cpl *q, int *n) {
    *n = 0;
    return q->want_plp && q->seq ? hearth_seq_prompt_logprobs(q->seq, n) : NULL;
}

const hearth_logprobs *hearth_cpl_logprobs(const hearth_cpl *q, int *n) {
    *n = q->n_lp;
    return q->lp;
}

const hearth_cpl_summary *hearth_cpl_summary_get(const hearth_cpl *q) { return &q->sum; }
const hearth_cpl_ctx *hearth_cpl_context(const hearth_cpl *q) { return q->c; }

void hearth_cpl_cancel(hearth_cpl *q) {
    atomic_store(&q->cancel, 1);
    if (q->seq) hearth_seq_cancel(q->seq);
}

const float *hearth_cpl_embedding(hearth_cpl *q, int norm, int *dim) {
    *dim = 0;
    if (!q->done || q->sum.finish == HEARTH_CPL_FINISH_ERROR || q->sum.finish == HEARTH_CPL_FINISH_CANCELED)
        return NULL;
    int n = q->seq ? hearth_seq_embedding(q->seq, NULL, 0, norm) : 0;
    if (!n || (!q->emb && !(q->emb = malloc(sizeof *q->emb * (size_t)n)))) return NULL;
    *dim = hearth_seq_embedding(q->seq, q->emb, n, norm);
    return q->emb;
}

void hearth_cpl_free(hearth_cpl *q) {
    if (!q) return;
    if (q->seq) hearth_seq_release(q->seq);
    hearth_sink_deinit(&q->sink);
    free(q->lp);
    free(q->emb);
    free(q->echo);
    free(q->infill_text);
    free(q);
}
