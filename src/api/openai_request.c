/* openai_request.c - OpenAI request bodies (chat completions and
 * completions) into the neutral hearth_cpl_request.
 *
 * Every field we act on is type- and range-checked and an error names it
 * (param). Fields we cannot honour yet are refused with a clear 400 rather
 * than ignored (JSON schemas beyond json_mode.h's subset,
 * suffix, best_of, image and audio input). Fields that do not change
 * what is generated (model, user, metadata, store, service_tier,
 * parallel_tool_calls) are accepted. A null value counts as absent, as the
 * OpenAI API treats it. */
#include "api/api_internal.h"
#include "completion/grammar.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int api_fail(hearth_cpl_error *e, hearth_status st, const char *param, const char *fmt, ...) {
    e->status = st;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code[0] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return 1;
}

const char *api_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* A field, or NULL when absent or null. */
json_t *api_field(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

int api_get_number(const json_t *b, const char *k, double lo, double hi, int *has, float *out, hearth_cpl_error *e) {
    json_t *v = api_field(b, k);
    if (!v) return 0;
    if (!json_is_number(v))
        return api_fail(e, HEARTH_EINVAL, k, "Invalid type for '%s': expected a number, but got %s instead.", k,
                        api_type_name(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return api_fail(e, HEARTH_EINVAL, k, "Invalid '%s': %g is outside the allowed range [%g, %g].", k, x, lo, hi);
    *has = 1;
    *out = (float)x;
    return 0;
}

int api_get_int(const json_t *b, const char *k, long long lo, long long hi, int *has, long long *out,
                   hearth_cpl_error *e) {
    json_t *v = api_field(b, k);
    if (!v) return 0;
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15) {
        *out = (long long)json_real_value(v); /* 5.0 is an integer too */
    } else if (json_is_integer(v)) {
        *out = json_integer_value(v);
    } else {
        return api_fail(e, HEARTH_EINVAL, k, "Invalid type for '%s': expected an integer, but got %s instead.", k,
                        api_type_name(v));
    }
    if (*out < lo || *out > hi)
        return api_fail(e, HEARTH_EINVAL, k,
                        "Invalid '%s': %lld is outside the allowed range [%lld, %lld].", k, *out, lo,
                        hi);
    *has = 1;
    return 0;
}

int api_token_ids(const json_t *v, const char *k, size_t min, size_t max, int32_t *out, int *n,
                  hearth_cpl_error *e) {
    if (!json_is_array(v) || json_array_size(v) < min || json_array_size(v) > max)
        return api_fail(e, HEARTH_EINVAL, k, "Invalid '%s': expected an array of %s%zu token ids.", k,
                        min ? "1 to " : "at most ", max);
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return api_fail(e, HEARTH_EINVAL, k, "Invalid '%s[%zu]': not a token id.", k, i);
        out[(*n)++] = (int32_t)json_integer_value(x);
    }
    return 0;
}

int api_get_bool(const json_t *b, const char *k, int *out, hearth_cpl_error *e) {
    json_t *v = api_field(b, k);
    if (!v) return 0;
    if (!json_is_boolean(v))
        return api_fail(e, HEARTH_EINVAL, k, "Invalid type for '%s': expected a boolean, but got %s instead.", k,
                        api_type_name(v));
    *out = json_is_true(v);
    return 0;
}

char *api_dup_str(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

int api_parse_format(const json_t *fmt, const char *param, const json_t *holder, hearth_cpl_request *r,
                     hearth_cpl_error *e) {
    const char *type = json_string_value(json_object_get(fmt, "type"));
    if (!json_is_object(fmt) || !type)
        return api_fail(e, HEARTH_EINVAL, param, "Invalid '%s': expected an object with a string 'type'.", param);
    r->format_field = param;
    if (!strcmp(type, "text")) return 0;
    if (r->json_schema) /* tool_choice forced a call */
        return api_fail(e, HEARTH_ENOTSUP, param, "'%s' cannot be combined with a tool_choice that forces a call.",
                        param);
    if (!strcmp(type, "json_object")) {
        r->json_object = 1;
        return 0;
    }
    if (strcmp(type, "json_schema"))
        return api_fail(e, HEARTH_EINVAL, param, "Invalid '%s.type': '%s'. Supported: text, json_object, json_schema.",
                        param, type);
    json_t *schema = json_object_get(holder, "schema");
    if (!json_is_object(schema))
        return api_fail(e, HEARTH_EINVAL, param, "Invalid '%s': a json_schema format needs an object 'schema'.", param);
    r->json_schema = json_incref(schema); /* compiled in prepare, whose errors name the keyword */
    return 0;
}

/* One other way to constrain the output: llama-server's `grammar` (GBNF),
 * vLLM's guided_grammar (GBNF; xgrammar reads it too), guided_choice,
 * guided_regex and guided_json, or the same under vLLM's newer
 * structured_outputs object.
 * At most one of them (response_format's JSON included) per request. */
static int parse_guided(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *so = api_field(b, "structured_outputs");
    if (so && !json_is_object(so))
        return api_fail(e, HEARTH_EINVAL, "structured_outputs",
                        "Invalid type for 'structured_outputs': expected an object.");
    const struct {
        const char *field;
        json_t *v;
        char kind; /* g: GBNF, c: choices, j: a JSON Schema, r: a regex */
    } opts[] = {
        {"grammar", api_field(b, "grammar"), 'g'},
        {"guided_grammar", api_field(b, "guided_grammar"), 'g'},
        {"guided_choice", api_field(b, "guided_choice"), 'c'},
        {"guided_json", api_field(b, "guided_json"), 'j'},
        {"guided_regex", api_field(b, "guided_regex"), 'r'},
        {"structured_outputs.grammar", so ? api_field(so, "grammar") : NULL, 'g'},
        {"structured_outputs.choice", so ? api_field(so, "choice") : NULL, 'c'},
        {"structured_outputs.json", so ? api_field(so, "json") : NULL, 'j'},
        {"structured_outputs.regex", so ? api_field(so, "regex") : NULL, 'r'},
    };
    const char *given = r->json_object || r->json_schema ? r->format_field : NULL;
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        const char *f = opts[i].field;
        json_t *v = opts[i].v;
        if (!v) continue;
        if (given)
            return api_fail(e, HEARTH_EINVAL, f, "Invalid '%s': '%s' already constrains the output; give one of "
                            "response_format, grammar, guided_grammar, guided_choice, guided_regex and guided_json.",
                            f, given);
        given = f;
        r->format_field = f;
        if (opts[i].kind == 'r') {
            if (!json_is_string(v))
                return api_fail(e, HEARTH_EINVAL, f, "Invalid '%s': expected a regular expression (a string).", f);
            hearth_err err = {0};
            hearth_status st = hearth_grammar_from_regex(&r->grammar, json_string_value(v), json_string_length(v),
                                                         &err);
            if (st != HEARTH_OK) return api_fail(e, st, st == HEARTH_ENOMEM ? NULL : f, "Invalid '%s': %s", f, err.msg);
        } else if (opts[i].kind == 'g') {
            if (!json_is_string(v) || !json_string_length(v))
                return api_fail(e, HEARTH_EINVAL, f, "Invalid '%s': expected a non-empty string of GBNF rules.", f);
            r->grammar = api_dup_str(json_string_value(v), json_string_length(v));
        } else if (opts[i].kind == 'c') {
            size_t n = json_array_size(v), k;
            json_t *c;
            if (!json_is_array(v) || !n)
                return api_fail(e, HEARTH_EINVAL, f, "Invalid '%s': expected a non-empty array of strings.", f);
            const char **cs = malloc(sizeof *cs * n);
            if (!cs) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
            json_array_foreach(v, k, c) {
                if (!json_is_string(c) || strlen(json_string_value(c)) != json_string_length(c)) {
                    free(cs);
                    return api_fail(e, HEARTH_EINVAL, f, "Invalid '%s[%zu]': expected a string (without NUL).", f, k);
                }
                cs[k] = json_string_value(c);
            }
            r->grammar = hearth_grammar_choices_text(cs, (int)n);
            free(cs);
        } else {
            json_t *schema = json_is_string(v) ? json_loads(json_string_value(v), 0, NULL) : json_incref(v);
            if (!json_is_object(schema)) {
                json_decref(schema);
                return api_fail(e, HEARTH_EINVAL, f, "Invalid '%s': expected a JSON Schema (an object, or a string "
                                "that holds one).", f);
            }
            r->json_schema = schema; /* compiled in prepare, whose errors name the keyword */
            continue;
        }
        if (!r->grammar) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    return 0;
}

/* Stop strings: a string or an array of strings (param: the field's name). */
int api_parse_stops(const json_t *stop, const char *param, hearth_cpl_request *r, hearth_cpl_error *e) {
    if (!stop) return 0;
    if (json_is_string(stop)) {
        r->stop[r->n_stop++] = api_dup_str(json_string_value(stop), json_string_length(stop));
    } else if (json_is_array(stop)) {
        if (json_array_size(stop) > HEARTH_STOP_MAX)
            return api_fail(e, HEARTH_EINVAL, param, "Invalid '%s': at most %d stop sequences, got %zu.", param,
                            HEARTH_STOP_MAX, json_array_size(stop));
        size_t i;
        json_t *s;
        json_array_foreach(stop, i, s) {
            if (!json_is_string(s))
                return api_fail(e, HEARTH_EINVAL, param,
                                "Invalid type for '%s[%zu]': expected a string, but got %s instead.", param, i,
                                api_type_name(s));
            r->stop[r->n_stop++] = api_dup_str(json_string_value(s), json_string_length(s));
        }
    } else {
        return api_fail(e, HEARTH_EINVAL, param,
                        "Invalid type for '%s': expected a string or an array of strings, but got %s instead.", param,
                        api_type_name(stop));
    }
    for (int i = 0; i < r->n_stop; i++) {
        if (!r->stop[i]) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        if (!r->stop[i][0])
            return api_fail(e, HEARTH_EINVAL, param, "Invalid '%s': stop sequence %d is empty.", param, i);
        if (strlen(r->stop[i]) > HEARTH_STOP_MAX_LEN)
            return api_fail(e, HEARTH_EINVAL, param, "Invalid '%s': stop sequence %d is longer than %d bytes.", param,
                            i, HEARTH_STOP_MAX_LEN);
    }
    return 0;
}

int api_check_body(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    if (!json_is_object(b)) return api_fail(e, HEARTH_EINVAL, NULL, "The request body must be a JSON object.");
    json_t *model = api_field(b, "model");
    if (model && !json_is_string(model))
        return api_fail(e, HEARTH_EINVAL, "model", "Invalid type for 'model': expected a string, but got %s instead.",
                        api_type_name(model));
    if (model && r) {
        free(r->model);
        if (!(r->model = strdup(json_string_value(model)))) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    return 0;
}

/* Fields both endpoints share. */
static int parse_common(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    hearth_cpl_params *p = &r->p;
    long long iv;
    int has;
    if (api_check_body(b, r, e)) return 1;
    if (api_get_number(b, "temperature", 0, 2, &p->has_temperature, &p->temperature, e) ||
        api_get_number(b, "top_p", 0, 1, &p->has_top_p, &p->top_p, e) ||
        api_get_number(b, "min_p", 0, 1, &p->has_min_p, &p->min_p, e) ||
        api_get_number(b, "presence_penalty", -2, 2, &p->has_presence_penalty, &p->presence_penalty, e) ||
        api_get_number(b, "frequency_penalty", -2, 2, &p->has_frequency_penalty, &p->frequency_penalty, e) ||
        api_get_number(b, "repetition_penalty", 0, 10, &p->has_repetition_penalty, &p->repetition_penalty, e))
        return 1;
    if (p->has_top_p && p->top_p <= 0)
        return api_fail(e, HEARTH_EINVAL, "top_p", "Invalid 'top_p': it must be greater than 0 (1 turns it off).");
    if (p->has_repetition_penalty && p->repetition_penalty <= 0)
        return api_fail(e, HEARTH_EINVAL, "repetition_penalty",
                        "Invalid 'repetition_penalty': it must be greater than 0 (1 turns it off).");
    if (api_parse_llama_sampling(b, r, e) || api_parse_vllm_fields(b, r, e)) return 1;
    has = 0;
    if (api_get_int(b, "top_k", -1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_top_k = 1, p->top_k = iv < 0 ? 0 : (int)iv; /* -1 = off, as vLLM spells it */
    has = 0;
    if (api_get_int(b, "seed", -(1LL << 62), 1LL << 62, &has, &iv, e)) return 1;
    if (has) p->has_seed = 1, p->seed = (uint64_t)iv;
    /* max_completion_tokens is the newer name; it wins when both are given */
    has = 0;
    if (api_get_int(b, "max_tokens", r->echo ? 0 : 1, 1 << 30, &has, &iv, e)) return 1; /* echo: 0 = the prompt alone */
    if (has) p->has_max_tokens = 1, p->max_tokens = (int)iv;
    has = 0;
    if (api_get_int(b, "max_completion_tokens", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_max_tokens = 1, p->max_tokens = (int)iv;
    has = 0;
    if (api_get_int(b, "n", 1, API_MAX_CHOICES, &has, &iv, e)) return 1;
    o->n = has ? (int)iv : 1;

    if (api_parse_stops(api_field(b, "stop"), "stop", r, e)) return 1;
    json_t *ids = api_field(b, "stop_token_ids"); /* vLLM's: token ids that end the answer */
    if (ids && api_token_ids(ids, "stop_token_ids", 0, HEARTH_STOP_MAX, r->stop_token_ids, &r->n_stop_token_ids, e))
        return 1;
    has = 0;
    if (api_get_int(b, "prompt_logprobs", 0, HEARTH_MAX_TOP_LOGPROBS, &has, &iv, e)) return 1; /* vLLM's */
    if (has) r->prompt_logprobs = (int)iv, o->prompt_logprobs = 1 + (int)iv;
    has = 0;
    if (api_get_int(b, "min_tokens", 0, 1 << 30, &has, &iv, e)) return 1; /* vLLM's */
    if (has) r->min_tokens = (int)iv;

    json_t *bias = api_field(b, "logit_bias");
    if (bias) {
        if (!json_is_object(bias))
            return api_fail(e, HEARTH_EINVAL, "logit_bias",
                            "Invalid type for 'logit_bias': expected an object of token id -> bias, but got %s "
                            "instead.",
                            api_type_name(bias));
        size_t n = json_object_size(bias);
        r->bias = calloc(n ? n : 1, sizeof *r->bias);
        if (!r->bias) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        const char *k;
        json_t *v;
        json_object_foreach(bias, k, v) {
            char *end;
            long id = strtol(k, &end, 10);
            if (!*k || *end || id < 0 || id > 0x7fffffff)
                return api_fail(e, HEARTH_EINVAL, "logit_bias", "Invalid 'logit_bias': key '%s' is not a token id.", k);
            if (!json_is_number(v) || json_number_value(v) < -100 || json_number_value(v) > 100)
                return api_fail(e, HEARTH_EINVAL, "logit_bias",
                                "Invalid 'logit_bias': the bias of token %ld must be a number in [-100, 100].", id);
            r->bias[r->n_bias].id = (int32_t)id;
            r->bias[r->n_bias].bias = (float)json_number_value(v);
            r->n_bias++;
        }
    }

    if (api_get_bool(b, "stream", &o->stream, e) || api_get_bool(b, "ignore_eos", &r->ignore_eos, e)) return 1;
    if (o->prompt_logprobs && o->stream)
        return api_fail(e, HEARTH_EINVAL, "prompt_logprobs",
                        "'prompt_logprobs' is not available with 'stream' (as vLLM's): ask without streaming.");
    json_t *so = api_field(b, "stream_options");
    if (so) {
        if (!o->stream)
            return api_fail(e, HEARTH_EINVAL, "stream_options",
                            "Invalid 'stream_options': it is only allowed when 'stream' is true.");
        if (!json_is_object(so))
            return api_fail(e, HEARTH_EINVAL, "stream_options",
                            "Invalid type for 'stream_options': expected an object, but got %s instead.",
                            api_type_name(so));
        json_t *iu = api_field(so, "include_usage");
        if (iu && !json_is_boolean(iu))
            return api_fail(e, HEARTH_EINVAL, "stream_options.include_usage",
                            "Invalid type for 'stream_options.include_usage': expected a boolean.");
        o->include_usage = json_is_true(iu);
        json_t *cu = api_field(so, "continuous_usage_stats"); /* vLLM's: usage on every chunk */
        if (cu && !json_is_boolean(cu))
            return api_fail(e, HEARTH_EINVAL, "stream_options.continuous_usage_stats",
                            "Invalid type for 'stream_options.continuous_usage_stats': expected a boolean.");
        o->continuous_usage = json_is_true(cu);
    }
    json_t *rf = api_field(b, "response_format");
    if (rf) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(t))
            return api_fail(e, HEARTH_EINVAL, "response_format",
                            "Invalid 'response_format': expected an object with a string 'type'.");
        if (api_parse_format(rf, "response_format", json_object_get(rf, "json_schema"), r, e)) return 1;
    }
    if (parse_guided(b, r, e)) return 1;
    static const char *refused[] = {"audio", "prediction", "web_search_options", "functions", "function_call"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (api_field(b, refused[i]))
            return api_fail(e, HEARTH_ENOTSUP, refused[i], "'%s' is not supported by this server%s.", refused[i],
                            i >= 3 ? " (use 'tools' and 'tool_choice')" : "");
    json_t *mod = api_field(b, "modalities");
    if (mod) {
        size_t i;
        json_t *m;
        if (!json_is_array(mod))
            return api_fail(e, HEARTH_EINVAL, "modalities", "Invalid type for 'modalities': expected an array.");
        json_array_foreach(mod, i, m) if (!json_is_string(m) || strcmp(json_string_value(m), "text")) return api_fail(
            e, HEARTH_ENOTSUP, "modalities", "Only the 'text' modality is supported by this server.");
    }
    return 0;
}

/* ---- chat ---- */

/* OpenAI content (string, or parts) -> one string (text parts joined by "\n"). */
static int content_text(const json_t *c, const char *where, json_t **out, hearth_cpl_error *e) {
    if (json_is_string(c)) {
        *out = json_incref((json_t *)c);
        return 0;
    }
    if (!json_is_array(c))
        return api_fail(e, HEARTH_EINVAL, "messages",
                        "Invalid type for '%s.content': expected a string or an array of content parts, but got %s "
                        "instead.",
                        where, api_type_name(c));
    api_buf t = {0};
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *ty = json_is_object(part) ? json_object_get(part, "type") : NULL;
        const char *ts = json_string_value(ty);
        if (!ts) {
            api_buf_free(&t);
            return api_fail(e, HEARTH_EINVAL, "messages",
                            "Invalid '%s.content[%zu]': expected an object with a 'type'.",
                            where, i);
        }
        if (!strcmp(ts, "text") || !strcmp(ts, "refusal") || !strcmp(ts, "input_text")) {
            json_t *tx = json_object_get(part, !strcmp(ts, "refusal") ? "refusal" : "text");
            if (!json_is_string(tx)) {
                api_buf_free(&t);
                return api_fail(e, HEARTH_EINVAL, "messages",
                                "Invalid '%s.content[%zu]': a %s part needs a string '%s'.",
                                where, i, ts, !strcmp(ts, "refusal") ? "refusal" : "text");
            }
            if (t.n) api_buf_put(&t, "\n", 1);
            api_buf_put(&t, json_string_value(tx), json_string_length(tx));
        } else {
            api_buf_free(&t);
            return api_fail(e, HEARTH_ENOTSUP, "messages",
                            "'%s.content[%zu]': content of type '%s' is not supported by this server (text only).",
                            where, i, ts);
        }
    }
    if (t.oom) {
        api_buf_free(&t);
        return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    *out = json_stringn(t.p ? t.p : "", t.n);
    api_buf_free(&t);
    return *out ? 0 : api_fail(e, HEARTH_EINVAL, "messages", "'%s.content' is not valid UTF-8.", where);
}

/* OpenAI assistant tool_calls -> the transformers shape (arguments as an
 * object when they parse as one). */
static int convert_tool_calls(const json_t *tcs, const char *where, json_t *msg, hearth_cpl_error *e) {
    if (!json_is_array(tcs))
        return api_fail(e, HEARTH_EINVAL, "messages", "Invalid type for '%s.tool_calls': expected an array.", where);
    json_t *out = json_array();
    size_t i;
    json_t *tc;
    json_array_foreach(tcs, i, tc) {
        json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        json_t *name = json_object_get(fn, "name");
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_string(name)) {
            json_decref(out);
            return api_fail(e, HEARTH_EINVAL, "messages",
                            "Invalid '%s.tool_calls[%zu]': expected function.name.", where,
                            i);
        }
        json_t *a = NULL;
        if (json_is_string(args)) {
            a = json_loads(json_string_value(args), 0, NULL);
            if (!json_is_object(a)) {
                json_decref(a);
                a = json_incref(args);
            }
        } else if (json_is_object(args)) {
            a = json_incref(args);
        } else {
            a = json_object();
        }
        json_t *f = json_pack("{s:O,s:o}", "name", name, "arguments", a);
        json_t *c = json_pack("{s:s,s:o}", "type", "function", "function", f);
        json_t *id = json_object_get(tc, "id");
        if (json_is_string(id)) json_object_set(c, "id", id);
        json_array_append_new(out, c);
    }
    json_object_set_new(msg, "tool_calls", out);
    return 0;
}

/* A tool message (tool_call_id set) gets the name of the call it answers,
 * from the assistant messages before it, for templates that print it. */
void api_name_tool_result(const json_t *messages, json_t *tool_msg) {
    const char *id = json_string_value(json_object_get(tool_msg, "tool_call_id"));
    size_t k, j;
    json_t *prev, *call;
    json_array_foreach(messages, k, prev) {
        json_array_foreach(json_object_get(prev, "tool_calls"), j, call) {
            json_t *cid = json_object_get(call, "id");
            if (id && json_is_string(cid) && !strcmp(json_string_value(cid), id))
                json_object_set(tool_msg, "name", json_object_get(json_object_get(call, "function"), "name"));
        }
    }
}

static int parse_messages(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *ms = api_field(b, "messages");
    if (!ms) return api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: 'messages'.");
    if (!json_is_array(ms))
        return api_fail(e, HEARTH_EINVAL, "messages",
                        "Invalid type for 'messages': expected an array, but got %s instead.",
                        api_type_name(ms));
    if (json_array_size(ms) == 0)
        return api_fail(e, HEARTH_EINVAL, "messages",
                        "Invalid 'messages': expected an array with at least one message.");
    r->messages = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) {
        char where[32];
        snprintf(where, sizeof where, "messages[%zu]", i);
        if (!json_is_object(m))
            return api_fail(e, HEARTH_EINVAL, "messages",
                            "Invalid type for '%s': expected an object, but got %s instead.",
                            where, api_type_name(m));
        json_t *role = json_object_get(m, "role");
        const char *rs = json_string_value(role);
        if (!rs) return api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.role'.", where);
        if (strcmp(rs, "system") && strcmp(rs, "developer") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool"))
            return api_fail(e, HEARTH_EINVAL, "messages",
                            "Invalid value for '%s.role': '%s'. Supported: system, developer, user, assistant, tool.",
                            where, rs);
        json_t *out = json_object();
        json_array_append_new(r->messages, out);
        /* templates know "system"; "developer" is the newer name for it */
        json_object_set_new(out, "role", json_string(!strcmp(rs, "developer") ? "system" : rs));
        json_t *c = api_field(m, "content");
        json_t *tcs = api_field(m, "tool_calls");
        if (c) {
            json_t *t;
            if (content_text(c, where, &t, e)) return 1;
            json_object_set_new(out, "content", t);
        } else if (!strcmp(rs, "assistant") && tcs) {
            json_object_set_new(out, "content", json_null());
        } else {
            return api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.content'.", where);
        }
        if (tcs) {
            if (strcmp(rs, "assistant"))
                return api_fail(e, HEARTH_EINVAL, "messages", "'%s.tool_calls' is only allowed on assistant messages.",
                                where);
            if (convert_tool_calls(tcs, where, out, e)) return 1;
        }
        json_t *name = api_field(m, "name");
        if (name) {
            if (!json_is_string(name))
                return api_fail(e, HEARTH_EINVAL, "messages", "Invalid type for '%s.name': expected a string.", where);
            json_object_set(out, "name", name);
        }
        json_t *rc = api_field(m, "reasoning_content");
        if (json_is_string(rc)) json_object_set(out, "reasoning_content", rc);
        if (!strcmp(rs, "tool")) {
            json_t *id = api_field(m, "tool_call_id");
            if (!json_is_string(id))
                return api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.tool_call_id'.", where);
            json_object_set(out, "tool_call_id", id);
            /* Some templates print the tool's name: take it from the call it answers. */
            if (!name) api_name_tool_result(r->messages, out);
        }
    }
    return 0;
}

int api_add_function_tool(json_t *fns, size_t i, const json_t *name, const json_t *desc, const json_t *params,
                          hearth_cpl_error *e) {
    if (!json_is_string(name))
        return api_fail(e, HEARTH_EINVAL, "tools", "Missing required parameter: 'tools[%zu].name'.", i);
    if (params && !json_is_object(params))
        return api_fail(e, HEARTH_EINVAL, "tools", "Invalid parameters of 'tools[%zu]': expected an object.", i);
    if (desc && !json_is_string(desc))
        return api_fail(e, HEARTH_EINVAL, "tools", "Invalid type for 'tools[%zu].description': expected a string.",
                        i);
    json_t *fn = json_pack("{s:O}", "name", name);
    if (params) json_object_set(fn, "parameters", (json_t *)params);
    if (desc) json_object_set(fn, "description", (json_t *)desc);
    json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    return 0;
}

void api_offer_tools(hearth_cpl_request *r, json_t *fns, int none) {
    if (none || json_array_size(fns) == 0) { /* the model is not offered the tools */
        json_decref(fns);
        return;
    }
    r->tools = fns;
    r->parse_tools = 1;
}

int api_force_tool(hearth_cpl_request *r, const char *name, hearth_cpl_error *e) {
    if (!r->tools)
        return api_fail(e, HEARTH_EINVAL, "tool_choice", "tool_choice forces a call, but the request offers no tools.");
    if (r->json_object || r->json_schema || r->grammar)
        return api_fail(e, HEARTH_ENOTSUP, "tool_choice",
                        "tool_choice that forces a call cannot be combined with a structured output format.");
    json_t *names = json_array(), *params = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(r->tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (name && strcmp(n, name)) continue;
        json_array_append_new(names, json_string(n));
        params = json_object_get(fn, "parameters");
    }
    if (!json_array_size(names)) {
        json_decref(names);
        return api_fail(e, HEARTH_EINVAL, "tool_choice", "tool_choice names '%s', which is not among the tools.",
                        name);
    }
    /* one tool: its parameters' schema; several: any object, the name says which */
    json_t *args = json_array_size(names) == 1 && params ? json_incref(params) : json_pack("{s:s}", "type", "object");
    r->json_schema = json_pack("{s:s,s:{s:{s:o},s:o},s:[s,s],s:b}", "type", "object", "properties", "name", "enum",
                               names, "arguments", args, "required", "name", "arguments", "additionalProperties", 0);
    r->format_field = "tool_choice";
    return r->json_schema ? 0 : api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
}

static int parse_tools(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *tools = api_field(b, "tools");
    json_t *choice = api_field(b, "tool_choice");
    int none = 0, force = 0;
    const char *forced = NULL;
    if (choice) {
        if (json_is_string(choice)) {
            const char *c = json_string_value(choice);
            if (!strcmp(c, "none")) none = 1;
            else if (!strcmp(c, "required")) force = 1;
            else if (strcmp(c, "auto"))
                return api_fail(e, HEARTH_EINVAL, "tool_choice",
                                "Invalid value for 'tool_choice': '%s'. Supported: 'none', 'auto', 'required'.", c);
        } else if (json_is_object(choice)) {
            forced = json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
            if (!forced)
                return api_fail(e, HEARTH_EINVAL, "tool_choice",
                                "Invalid 'tool_choice': expected {\"type\": \"function\", \"function\": {\"name\": "
                                "...}}.");
            force = 1;
        } else {
            return api_fail(e, HEARTH_EINVAL, "tool_choice",
                            "Invalid type for 'tool_choice': expected a string or an object, but got %s instead.",
                            api_type_name(choice));
        }
    }
    if (!tools) return force ? api_force_tool(r, forced, e) : 0; /* forcing with no tools: refused */
    if (!json_is_array(tools))
        return api_fail(e, HEARTH_EINVAL, "tools", "Invalid type for 'tools': expected an array, but got %s instead.",
                        api_type_name(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *ty = json_object_get(t, "type");
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") ||
            !json_is_object(fn))
            return api_fail(e, HEARTH_EINVAL, "tools",
                            "Invalid 'tools[%zu]': expected {\"type\": \"function\", \"function\": {...}}.", i);
        if (!json_is_string(json_object_get(fn, "name")))
            return api_fail(e, HEARTH_EINVAL, "tools", "Missing required parameter: 'tools[%zu].function.name'.", i);
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_object(params))
            return api_fail(e, HEARTH_EINVAL, "tools",
                            "Invalid 'tools[%zu].function.parameters': expected an object.", i);
    }
    if (none || json_array_size(tools) == 0) return 0; /* the model is not offered the tools */
    r->tools = json_incref(tools);
    r->parse_tools = 1;
    return force ? api_force_tool(r, forced, e) : 0;
}

int api_parse_chat(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    r->chat = 1;
    if (parse_common(b, r, o, e) || parse_messages(b, r, e) || parse_tools(b, r, e)) return 1;
    if (api_get_bool(b, "logprobs", &o->logprobs, e)) return 1;
    int has = 0;
    long long iv;
    if (api_get_int(b, "top_logprobs", 0, HEARTH_MAX_TOP_LOGPROBS, &has, &iv, e)) return 1;
    if (has) {
        if (!o->logprobs)
            return api_fail(e, HEARTH_EINVAL, "top_logprobs",
                            "Invalid 'top_logprobs': it can only be used when 'logprobs' is true.");
        o->top_logprobs = (int)iv;
    }
    r->logprobs = o->logprobs;
    r->top_logprobs = o->top_logprobs;
    /* vLLM's prefill: the answer continues the final assistant message */
    if (api_get_bool(b, "continue_final_message", &r->continue_final, e)) return 1;
    int add_gen = 1;
    if (api_get_bool(b, "add_generation_prompt", &add_gen, e)) return 1;
    if (r->continue_final && add_gen && api_field(b, "add_generation_prompt"))
        return api_fail(e, HEARTH_EINVAL, "continue_final_message",
                        "continue_final_message and add_generation_prompt cannot both be true.");
    if (!add_gen && !r->continue_final)
        return api_fail(e, HEARTH_ENOTSUP, "add_generation_prompt",
                        "add_generation_prompt=false is supported only with continue_final_message=true.");
    json_t *kw = api_field(b, "chat_template_kwargs");
    if (kw) {
        if (!json_is_object(kw))
            return api_fail(e, HEARTH_EINVAL, "chat_template_kwargs",
                            "Invalid type for 'chat_template_kwargs': expected an object.");
        r->template_kwargs = json_incref(kw);
    }
    return 0;
}

/* ---- text completions ---- */

static int ids_from(const json_t *a, const char *where, hearth_cpl_request *r, hearth_cpl_error *e) {
    size_t n = json_array_size(a);
    r->prompt_ids = malloc(sizeof *r->prompt_ids * (n ? n : 1));
    if (!r->prompt_ids) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff)
            return api_fail(e, HEARTH_EINVAL, "prompt",
                            "Invalid '%s[%zu]': expected a token id (a non-negative integer).",
                            where, i);
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_ids = (int)n;
    return 0;
}

/* OpenAI's suffix (insert mode, as Ollama serves it): the prompt is the text
 * before the insertion, the suffix the text after it, laid out with the
 * model's fill-in-the-middle tokens (completion/infill.h). */
static int text_suffix(const json_t *b, hearth_cpl_request *r, const api_req_opts *o, hearth_cpl_error *e) {
    json_t *v = api_field(b, "suffix");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v))
        return api_fail(e, HEARTH_EINVAL, "suffix", "Invalid type for 'suffix': expected a string, but got %s instead.",
                        api_type_name(v));
    if (r->infill) return api_fail(e, HEARTH_EINVAL, "suffix", "'suffix' is not a field here: send input_suffix.");
    if (!r->prompt || o->prompts)
        return api_fail(e, HEARTH_ENOTSUP, "suffix",
                        "'suffix' needs one prompt, as text: the text before the insertion.");
    if (r->echo) return api_fail(e, HEARTH_EINVAL, "suffix", "'echo' and 'suffix' cannot be used together.");
    hearth_cpl_infill *in = calloc(1, sizeof *in);
    char *empty = strdup("");
    if (!in || !empty || !(in->suffix = api_dup_str(json_string_value(v), json_string_length(v)))) {
        free(in);
        free(empty);
        return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    in->prefix = r->prompt;
    r->prompt = empty;
    r->infill = in;
    return 0;
}

int api_parse_text(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    r->chat = 0;
    r->prompt_field = "prompt";
    if (api_get_bool(b, "echo", &r->echo, e)) return 1;
    if (parse_common(b, r, o, e)) return 1;
    json_t *p = api_field(b, "prompt");
    if (!p) return api_fail(e, HEARTH_EINVAL, "prompt", "Missing required parameter: 'prompt'.");
    if (json_is_string(p)) {
        r->prompt = api_dup_str(json_string_value(p), json_string_length(p));
    } else if (json_is_array(p)) {
        json_t *first = json_array_get(p, 0);
        if (json_array_size(p) == 0)
            return api_fail(e, HEARTH_EINVAL, "prompt", "Invalid 'prompt': the array is empty.");
        if (json_is_integer(first)) {
            if (ids_from(p, "prompt", r, e)) return 1;
        } else if (json_array_size(p) > 1) { /* a batch: choice i * n + k is prompt i's k-th (OpenAI's order) */
            size_t i, np = json_array_size(p);
            json_t *v;
            json_array_foreach(p, i, v) {
                if (!json_is_string(v) && !json_is_array(v))
                    return api_fail(e, HEARTH_EINVAL, "prompt",
                                    "Invalid type for 'prompt[%zu]': expected a string or an array of token ids.", i);
                if (json_is_array(v) && !json_array_size(v))
                    return api_fail(e, HEARTH_EINVAL, "prompt", "Invalid 'prompt[%zu]': the array is empty.", i);
                size_t k;
                json_t *id;
                json_array_foreach(v, k, id) if (!json_is_integer(id) || json_integer_value(id) < 0 ||
                                                 json_integer_value(id) > 0x7fffffff) return api_fail(
                    e, HEARTH_EINVAL, "prompt", "Invalid 'prompt[%zu][%zu]': expected a token id.", i, k);
            }
            if (np * (size_t)(o->n > 1 ? o->n : 1) > API_MAX_CHOICES)
                return api_fail(e, HEARTH_EINVAL, "prompt",
                                "Invalid 'prompt': %zu prompts x n %d = %zu choices; this server runs at most %d "
                                "a request.",
                                np, o->n > 1 ? o->n : 1, np * (size_t)(o->n > 1 ? o->n : 1), API_MAX_CHOICES);
            o->prompts = p;
            if (json_is_string(first)) r->prompt = api_dup_str(json_string_value(first), json_string_length(first));
            else if (ids_from(first, "prompt[0]", r, e)) return 1;
        } else if (json_is_string(first)) {
            r->prompt = api_dup_str(json_string_value(first), json_string_length(first));
        } else if (json_is_array(first)) {
            if (ids_from(first, "prompt[0]", r, e)) return 1;
        } else {
            return api_fail(e, HEARTH_EINVAL, "prompt",
                            "Invalid type for 'prompt[0]': expected a string or an array of token ids.");
        }
    } else {
        return api_fail(e, HEARTH_EINVAL, "prompt",
                        "Invalid type for 'prompt': expected a string, an array of token ids, or an array with one of "
                        "those, but got %s instead.",
                        api_type_name(p));
    }
    if (!r->prompt && !r->prompt_ids) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (text_suffix(b, r, o, e)) return 1;
    int has = 0;
    long long iv;
    if (api_get_int(b, "best_of", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has && iv != 1)
        return api_fail(e, HEARTH_ENOTSUP, "best_of", "Invalid 'best_of': only best_of=1 is supported (got %lld).", iv);
    has = 0;
    if (api_get_int(b, "logprobs", 0, 5, &has, &iv, e)) return 1;
    if (has) { /* the legacy API: logprobs=N asks for the chosen token and N alternatives */
        o->logprobs = 1;
        o->top_logprobs = (int)iv;
        r->logprobs = 1;
        r->top_logprobs = (int)iv;
    }
    return 0;
}
