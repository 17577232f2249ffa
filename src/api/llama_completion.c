/* llama_completion.c - llama-server's own completion API: POST /completion
 * (and /completions), what its web UI, SillyTavern's llama.cpp backend and
 * scripts written against llama-server send.
 *
 * The request is llama-server's: prompt (a string or token ids), n_predict
 * (-1: until the end), stream, stop, n_probs, seed, logit_bias (an object or
 * llama-server's [[id, bias | false], ...]), grammar, json_schema, and every
 * sampling field under its llama-server name (llama_sampling.c). It is
 * rewritten as an OpenAI text request and parsed as one; cache_prompt and
 * id_slot are accepted (the prefix cache and the scheduler decide both), and
 * what code editors send (llama.vim, llama.vscode): samplers (which of
 * llama.cpp's samplers run, infill's among them: llama_sampling.c), n_indent
 * and t_max_predict_ms (completion/sink.c's line rules), n_predict 0 (the
 * prompt into the prefix cache alone), response_fields (the answer cut to the
 * fields named, "timings/prompt_n" for a nested one) and t_max_prompt_ms
 * (accepted and unused, as llama-server does); post_sampling_probs and
 * return_tokens are refused by name. POST /infill takes the same fields
 * around input_prefix / input_suffix / input_extra (completion/infill.h).
 *
 * The answer is llama-server's: {content, tokens, id_slot, stop, model,
 * tokens_predicted, tokens_evaluated, prompt (when given as text),
 * has_new_line, truncated,
 * stop_type (eos | word | limit), stopping_word, tokens_cached, timings
 * {prompt_n, prompt_ms, ..., predicted_per_second}} and with n_probs
 * completion_probabilities [{id, token, logprob, bytes, top_logprobs}];
 * streamed as `data: {content, stop: false, ...}` pieces and a last one with
 * stop true and the rest, without a [DONE] line. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_N_PROBS 20

/* llama-server's logit_bias [[id, bias | false], ...] as OpenAI's {"id": bias} (false: never). */
static int bias_object(const json_t *v, json_t *out, hearth_cpl_error *e) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        json_t *id = json_array_get(x, 0), *b = json_array_get(x, 1);
        if (!json_is_array(x) || json_array_size(x) != 2 || !(json_is_number(b) || json_is_false(b)))
            return api_fail(e, HEARTH_EINVAL, "logit_bias",
                            "Invalid 'logit_bias[%zu]': expected [token id, bias or false].", i);
        if (!json_is_integer(id))
            return api_fail(e, HEARTH_ENOTSUP, "logit_bias",
                            "Invalid 'logit_bias[%zu]': a token id is needed; strings are not supported.", i);
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(id));
        /* false: the lowest bias the API takes, which no token survives */
        json_object_set_new(out, key, json_is_false(b) ? json_real(-100.0) : json_real(json_number_value(b)));
    }
    return 0;
}

static int string_array(const json_t *v) {
    size_t i;
    json_t *x;
    if (!json_is_array(v)) return 0;
    json_array_foreach(v, i, x) if (!json_is_string(x)) return 0;
    return 1;
}

int api_parse_llama_completion(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    static const char *refused[] = {"post_sampling_probs", "return_tokens"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (api_field(b, refused[i]) && !json_is_false(api_field(b, refused[i])))
            return api_fail(e, HEARTH_ENOTSUP, refused[i], "'%s' is not supported by this server.", refused[i]);
    json_t *t = json_deep_copy(b);
    if (!t) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    int rc = 0;
    json_t *v;
    long long iv;
    int has = 0;
    rc = api_get_int(b, "n_predict", -1, 1 << 30, &has, &iv, e);
    const int prompt_only = !rc && has && iv == 0; /* the prompt into the prefix cache, nothing generated */
    json_object_del(t, "n_predict");
    json_object_del(t, "max_tokens");
    if (!rc && has && iv > 0) json_object_set_new(t, "max_tokens", json_integer(iv));
    long long indent = 0, t_max = 0;
    if (!rc) rc = api_get_int(b, "n_indent", 0, 1 << 20, &has, &indent, e);
    if (!rc) rc = api_get_int(b, "t_max_predict_ms", 0, 1 << 30, &has, &t_max, e);
    if (!rc) rc = api_get_int(b, "t_max_prompt_ms", -1, 1 << 30, &has, &iv, e); /* llama-server ignores it too */
    json_t *fields = api_field(b, "response_fields");
    if (!rc && fields && !string_array(fields)) rc = api_fail(e, HEARTH_EINVAL, "response_fields",
                                                                  "Invalid 'response_fields': expected an array of "
                                                                  "strings (\"timings/prompt_n\" names a nested one).");
    static const char *mine[] = {"n_indent", "t_max_predict_ms", "t_max_prompt_ms", "response_fields", "samplers"};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++) json_object_del(t, mine[i]);
    json_object_del(t, "cache_prompt"); /* the prefix cache and the scheduler decide both */
    json_object_del(t, "id_slot");
    json_object_del(t, "n_probs");
    json_object_del(t, "logprobs");
    if (!rc && (v = api_field(b, "logit_bias")) && json_is_array(v)) {
        json_t *obj = json_object();
        rc = bias_object(v, obj, e);
        json_object_set_new(t, "logit_bias", obj);
    }
    if (!rc && (v = api_field(b, "json_schema"))) {
        json_object_set_new(t, "response_format", json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema",
                                                             "json_schema", "name", "json_schema", "schema", v));
        json_object_del(t, "json_schema");
    }
    if (!rc) rc = api_parse_text(t, r, o, e);
    json_decref(t);
    const int batch = o->prompts != NULL;
    o->prompts = NULL; /* it pointed into the rewritten body, freed above */
    if (rc) return 1;
    if (batch || o->n > 1)
        return api_fail(e, HEARTH_ENOTSUP, batch ? "prompt" : "n",
                        "one prompt and one answer a request here: send several prompts as several requests, or use "
                        "/v1/completions.");
    if (r->json_schema) r->format_field = "json_schema";
    if (api_parse_llama_samplers(b, r, e)) return 1;
    r->n_indent = (int)indent;
    r->t_max_predict_ms = (int)t_max;
    if (prompt_only) r->prompt_only = r->p.has_max_tokens = 1, r->p.max_tokens = 0;
    has = 0;
    if (api_get_int(b, "n_probs", 0, MAX_N_PROBS, &has, &iv, e)) return 1;
    if (has && iv > 0) o->logprobs = 1, o->top_logprobs = (int)iv, r->logprobs = 1, r->top_logprobs = (int)iv;
    json_t *p = api_field(b, "prompt"); /* the answer repeats a prompt given as text, and its fields */
    if (!(o->echo = json_object())) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (json_is_string(p)) json_object_set(o->echo, "prompt", p);
    if (fields) json_object_set(o->echo, "response_fields", fields);
    return 0;
}

/* A string field, copied into *out (absent: NULL). */
static int string_field(const json_t *b, const char *name, int required, char **out, hearth_cpl_error *e) {
    json_t *v = api_field(b, name);
    *out = NULL;
    if (!v) return required ? api_fail(e, HEARTH_EINVAL, name, "'%s' is required.", name) : 0;
    if (!json_is_string(v)) return api_fail(e, HEARTH_EINVAL, name, "Invalid '%s': expected a string.", name);
    if (!(*out = strdup(json_string_value(v)))) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    return 0;
}

/* input_extra: [{"text": string, "filename": string (optional)}, ...] */
static int extra_files(const json_t *b, hearth_cpl_infill *in, hearth_cpl_error *e) {
    json_t *v = api_field(b, "input_extra"), *x;
    if (!v) return 0;
    if (!json_is_array(v))
        return api_fail(e, HEARTH_EINVAL, "input_extra",
                        "Invalid 'input_extra': expected an array of {\"filename\": string, \"text\": string}.");
    size_t n = json_array_size(v), i;
    in->extra_name = calloc(n ? n : 1, sizeof *in->extra_name);
    in->extra_text = calloc(n ? n : 1, sizeof *in->extra_text);
    if (!in->extra_name || !in->extra_text) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    json_array_foreach(v, i, x) {
        json_t *text = json_object_get(x, "text"), *name = json_object_get(x, "filename");
        if (!json_is_string(text))
            return api_fail(e, HEARTH_EINVAL, "input_extra", "Invalid 'input_extra[%zu]': 'text' must be a string.", i);
        if (name && !json_is_string(name))
            return api_fail(e, HEARTH_EINVAL, "input_extra",
                            "Invalid 'input_extra[%zu]': 'filename' must be a string.", i);
        in->n_extra++;
        in->extra_text[i] = strdup(json_string_value(text));
        in->extra_name[i] = strdup(name ? json_string_value(name) : "tmp");
        if (!in->extra_text[i] || !in->extra_name[i]) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    return 0;
}

/* POST /infill: llama-server's fill in the middle (completion/infill.h):
 * input_prefix and input_suffix (strings), input_extra (other files) and an
 * optional prompt (text after the prefix), with every /completion field. */
static int parse_infill(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    hearth_cpl_infill *in = calloc(1, sizeof *in);
    if (!in) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    r->infill = in; /* the request owns it from here */
    json_t *p = api_field(b, "prompt");
    if (p && !json_is_string(p))
        return api_fail(e, HEARTH_EINVAL, "prompt", "Invalid 'prompt': expected a string (the text after the prefix).");
    if (string_field(b, "input_prefix", 1, &in->prefix, e) || string_field(b, "input_suffix", 1, &in->suffix, e) ||
        extra_files(b, in, e))
        return 1;
    json_t *t = json_deep_copy(b);
    if (!t) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    json_object_del(t, "input_prefix");
    json_object_del(t, "input_suffix");
    json_object_del(t, "input_extra");
    if (!p) json_object_set_new(t, "prompt", json_string(""));
    int rc = api_parse_llama_completion(t, r, o, e);
    json_decref(t);
    if (o->echo) json_object_del(o->echo, "prompt"); /* the answer's is the whole one laid out */
    return rc;
}

/* ---- the answer ---- */

/* completion_probabilities of records [from, to). */
static json_t *probs(api_job *j, int from, int to) {
    int n;
    const hearth_logprobs *lp = hearth_cpl_logprobs(j->q, &n);
    json_t *a = json_array();
    for (int i = from; i < to && i < n; i++) {
        json_t *s = api_token_string(j, lp[i].chosen.id), *top = json_array();
        for (int k = 0; k < lp[i].n_top && k < j->o.top_logprobs; k++) {
            json_t *ts = api_token_string(j, lp[i].top[k].id);
            json_array_append_new(top, json_pack("{s:i,s:O,s:f,s:o}", "id", lp[i].top[k].id, "token", ts, "logprob",
                                                 lp[i].top[k].logprob, "bytes", api_token_bytes(ts)));
            json_decref(ts);
        }
        json_array_append_new(a, json_pack("{s:i,s:O,s:f,s:o,s:o}", "id", lp[i].chosen.id, "token", s, "logprob",
                                           lp[i].chosen.logprob, "bytes", api_token_bytes(s), "top_logprobs", top));
        json_decref(s);
    }
    return a;
}

static json_t *timings(const hearth_cpl_summary *s) {
    double pms = 1e3 * (s->ttft_s - s->queue_s), gms = 1e3 * (s->total_s - s->ttft_s);
    int pn = s->prompt_tokens - s->cached_tokens, gn = s->completion_tokens;
    if (pms < 0) pms = 0;
    return json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f}", "cache_n", s->cached_tokens, "prompt_n", pn,
                     "prompt_ms", pms, "prompt_per_token_ms", pn ? pms / pn : 0.0, "prompt_per_second",
                     pms > 0 ? 1e3 * pn / pms : 0.0, "predicted_n", gn, "predicted_ms", gms,
                     "predicted_per_token_ms", gn ? gms / gn : 0.0, "predicted_per_second",
                     gms > 0 ? 1e3 * gn / gms : 0.0);
}

static const char *stop_type(const hearth_cpl_summary *s) {
    if (s->finish == HEARTH_CPL_FINISH_LENGTH) return "limit";
    if (s->finish == HEARTH_CPL_FINISH_STOP) return s->stop_sequence ? "word" : "eos";
    return "none";
}

/* llama-server's response_fields: only the fields named, "a/b" being b
 * inside a, under the name as written; a missing one is left out. Takes o. */
static json_t *project(json_t *o, const json_t *fields) {
    json_t *out = json_object(), *f;
    size_t i;
    json_array_foreach(fields, i, f) {
        const char *path = json_string_value(f);
        json_t *cur = o;
        for (const char *k = path; cur && k;) {
            const char *slash = strchr(k, '/');
            cur = json_is_object(cur) ? json_object_getn(cur, k, slash ? (size_t)(slash - k) : strlen(k)) : NULL;
            k = slash ? slash + 1 : NULL;
        }
        if (out && cur) json_object_set(out, path, cur);
    }
    json_decref(o);
    return out;
}

/* The last object: the whole answer's fields (content: the streamed pieces' or the whole text). */
static json_t *final_object(api_job *j, const char *content, size_t len, int stream) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    int n;
    hearth_cpl_logprobs(j->q, &n);
    int nl = j->content.n && memchr(j->content.p, '\n', j->content.n) != NULL;
    json_t *o = json_pack("{s:i,s:s%,s:[],s:i,s:b,s:s,s:i,s:i,s:b,s:b,s:s,s:s,s:i,s:o}", "index", 0, "content",
                          content, len, "tokens", "id_slot", 0, "stop", 1, "model", api_job_model(j),
                          "tokens_predicted", s->completion_tokens, "tokens_evaluated", s->prompt_tokens,
                          "has_new_line", nl, "truncated", 0, "stop_type", stop_type(s), "stopping_word",
                          s->stop_sequence ? s->stop_sequence : "", "tokens_cached", s->cached_tokens, "timings",
                          timings(s));
    json_t *prompt = j->echo ? json_object_get(j->echo, "prompt") : NULL;
    if (o && prompt) json_object_set(o, "prompt", prompt);
    size_t plen;
    const char *ptext = hearth_cpl_infill_text(j->q, &plen);
    if (o && ptext) json_object_set_new(o, "prompt", json_stringn(ptext, plen)); /* the whole prompt laid out */
    if (!stream && j->o.logprobs) json_object_set_new(o, "completion_probabilities", probs(j, 0, n));
    json_t *fields = j->echo ? json_object_get(j->echo, "response_fields") : NULL;
    return o && fields ? project(o, fields) : o;
}

static json_t *full(api_job *j) { return final_object(j, j->content.p ? j->content.p : "", j->content.n, 0); }

static void put(api_job *j, json_t *v) {
    api_sse_put(&j->out, NULL, v);
    json_decref(v);
}

static void stream_start(api_job *j) { (void)j; }

static void on_stream_event(void *user, const hearth_cpl_event *ev) {
    api_job *j = user;
    if (ev->kind != HEARTH_CPL_CONTENT) return;
    api_buf_put(&j->content, ev->text, ev->len); /* for has_new_line */
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    json_t *c = json_pack("{s:i,s:s%,s:[],s:b,s:i,s:i,s:i}", "index", 0, "content", ev->text, ev->len, "tokens",
                          "stop", 0, "id_slot", 0, "tokens_predicted", s->completion_tokens, "tokens_evaluated",
                          s->prompt_tokens);
    int n;
    hearth_cpl_logprobs(j->q, &n);
    if (j->o.logprobs && n > j->lp_sent) {
        json_object_set_new(c, "completion_probabilities", probs(j, j->lp_sent, n));
        j->lp_sent = n;
    }
    put(j, c);
}

static void stream_end(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    if (s->finish <= HEARTH_CPL_FINISH_TOOL_CALLS) {
        put(j, final_object(j, "", 0, 1));
        return;
    }
    put(j, json_pack("{s:{s:i,s:s,s:s}}", "error", "code", 500, "message", s->error[0] ? s->error : "cancelled",
                     "type", "server_error"));
}

static int parse(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    return api_parse_llama_completion(b, r, o, e);
}

const api_proto API_LLAMA = {
    .chunk_object = "completion",
    .id_prefix = "cmpl-",
    .parse = parse,
    .ev_start = stream_start,
    .ev_event = on_stream_event,
    .ev_end = stream_end,
    .ev_idle = ": keep-alive\n\n",
    .full = full,
};

const api_proto API_INFILL = {
    .chunk_object = "completion",
    .id_prefix = "cmpl-",
    .parse = parse_infill,
    .ev_start = stream_start,
    .ev_event = on_stream_event,
    .ev_end = stream_end,
    .ev_idle = ": keep-alive\n\n",
    .full = full,
};
