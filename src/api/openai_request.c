/* openai_request.c - OpenAI request bodies (chat completions and
 * completions) into the neutral hearth_cpl_request.
 *
 * Every field we act on is type- and range-checked and an error names it
 * (param). Fields we cannot honour yet are refused with a clear 400 rather
 * than ignored (n > 1, response_format other than text, forced tool_choice,
 * echo, suffix, best_of, image and audio input). Fields that do not change
 * what is generated (model, user, metadata, store, service_tier,
 * parallel_tool_calls) are accepted. A null value counts as absent, as the
 * OpenAI API treats it. */
#include "api/api_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(hearth_cpl_error *e, hearth_status st, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(hearth_cpl_error *e, hearth_status st, const char *param, const char *fmt, ...) {
    e->status = st;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code[0] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return 1;
}

static const char *type_name(const json_t *v) {
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
static json_t *field(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

static int get_number(const json_t *b, const char *k, double lo, double hi, int *has, float *out, hearth_cpl_error *e) {
    json_t *v = field(b, k);
    if (!v) return 0;
    if (!json_is_number(v))
        return fail(e, HEARTH_EINVAL, k, "Invalid type for '%s': expected a number, but got %s instead.", k,
                    type_name(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return fail(e, HEARTH_EINVAL, k, "Invalid '%s': %g is outside the allowed range [%g, %g].", k, x, lo, hi);
    *has = 1;
    *out = (float)x;
    return 0;
}

static int get_int(const json_t *b, const char *k, long long lo, long long hi, int *has, long long *out,
                   hearth_cpl_error *e) {
    json_t *v = field(b, k);
    if (!v) return 0;
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15) {
        *out = (long long)json_real_value(v); /* 5.0 is an integer too */
    } else if (json_is_integer(v)) {
        *out = json_integer_value(v);
    } else {
        return fail(e, HEARTH_EINVAL, k, "Invalid type for '%s': expected an integer, but got %s instead.", k,
                    type_name(v));
    }
    if (*out < lo || *out > hi)
        return fail(e, HEARTH_EINVAL, k, "Invalid '%s': %lld is outside the allowed range [%lld, %lld].", k, *out, lo,
                    hi);
    *has = 1;
    return 0;
}

static int get_bool(const json_t *b, const char *k, int *out, hearth_cpl_error *e) {
    json_t *v = field(b, k);
    if (!v) return 0;
    if (!json_is_boolean(v))
        return fail(e, HEARTH_EINVAL, k, "Invalid type for '%s': expected a boolean, but got %s instead.", k,
                    type_name(v));
    *out = json_is_true(v);
    return 0;
}

static char *dup_str(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

/* Fields both endpoints share. */
static int parse_common(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    hearth_cpl_params *p = &r->p;
    long long iv;
    int has;
    if (!json_is_object(b)) return fail(e, HEARTH_EINVAL, NULL, "The request body must be a JSON object.");
    json_t *model = field(b, "model");
    if (model && !json_is_string(model))
        return fail(e, HEARTH_EINVAL, "model", "Invalid type for 'model': expected a string, but got %s instead.",
                    type_name(model));
    if (get_number(b, "temperature", 0, 2, &p->has_temperature, &p->temperature, e) ||
        get_number(b, "top_p", 0, 1, &p->has_top_p, &p->top_p, e) ||
        get_number(b, "min_p", 0, 1, &p->has_min_p, &p->min_p, e) ||
        get_number(b, "presence_penalty", -2, 2, &p->has_presence_penalty, &p->presence_penalty, e) ||
        get_number(b, "frequency_penalty", -2, 2, &p->has_frequency_penalty, &p->frequency_penalty, e) ||
        get_number(b, "repetition_penalty", 0, 10, &p->has_repetition_penalty, &p->repetition_penalty, e))
        return 1;
    if (p->has_top_p && p->top_p <= 0)
        return fail(e, HEARTH_EINVAL, "top_p", "Invalid 'top_p': it must be greater than 0 (1 turns it off).");
    if (p->has_repetition_penalty && p->repetition_penalty <= 0)
        return fail(e, HEARTH_EINVAL, "repetition_penalty",
                    "Invalid 'repetition_penalty': it must be greater than 0 (1 turns it off).");
    has = 0;
    if (get_int(b, "top_k", -1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_top_k = 1, p->top_k = iv < 0 ? 0 : (int)iv; /* -1 = off, as vLLM spells it */
    has = 0;
    if (get_int(b, "seed", -(1LL << 62), 1LL << 62, &has, &iv, e)) return 1;
    if (has) p->has_seed = 1, p->seed = (uint64_t)iv;
    /* max_completion_tokens is the newer name; it wins when both are given */
    has = 0;
    if (get_int(b, "max_tokens", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_max_tokens = 1, p->max_tokens = (int)iv;
    has = 0;
    if (get_int(b, "max_completion_tokens", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_max_tokens = 1, p->max_tokens = (int)iv;
    has = 0;
    if (get_int(b, "n", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has && iv != 1)
        return fail(e, HEARTH_ENOTSUP, "n", "Invalid 'n': only n=1 is supported by this server (got %lld).", iv);

    json_t *stop = field(b, "stop");
    if (stop) {
        if (json_is_string(stop)) {
            r->stop[r->n_stop++] = dup_str(json_string_value(stop), json_string_length(stop));
        } else if (json_is_array(stop)) {
            if (json_array_size(stop) > HEARTH_STOP_MAX)
                return fail(e, HEARTH_EINVAL, "stop", "Invalid 'stop': at most %d stop sequences, got %zu.",
                            HEARTH_STOP_MAX, json_array_size(stop));
            size_t i;
            json_t *s;
            json_array_foreach(stop, i, s) {
                if (!json_is_string(s))
                    return fail(e, HEARTH_EINVAL, "stop",
                                "Invalid type for 'stop[%zu]': expected a string, but got %s instead.", i,
                                type_name(s));
                r->stop[r->n_stop++] = dup_str(json_string_value(s), json_string_length(s));
            }
        } else {
            return fail(e, HEARTH_EINVAL, "stop",
                        "Invalid type for 'stop': expected a string or an array of strings, but got %s instead.",
                        type_name(stop));
        }
        for (int i = 0; i < r->n_stop; i++) {
            if (!r->stop[i]) return fail(e, HEARTH_ENOMEM, NULL, "out of memory");
            if (!r->stop[i][0]) return fail(e, HEARTH_EINVAL, "stop", "Invalid 'stop': stop sequence %d is empty.", i);
            if (strlen(r->stop[i]) > HEARTH_STOP_MAX_LEN)
                return fail(e, HEARTH_EINVAL, "stop", "Invalid 'stop': stop sequence %d is longer than %d bytes.", i,
                            HEARTH_STOP_MAX_LEN);
        }
    }

    json_t *bias = field(b, "logit_bias");
    if (bias) {
        if (!json_is_object(bias))
            return fail(e, HEARTH_EINVAL, "logit_bias",
                        "Invalid type for 'logit_bias': expected an object of token id -> bias, but got %s instead.",
                        type_name(bias));
        size_t n = json_object_size(bias);
        r->bias = calloc(n ? n : 1, sizeof *r->bias);
        if (!r->bias) return fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        const char *k;
        json_t *v;
        json_object_foreach(bias, k, v) {
            char *end;
            long id = strtol(k, &end, 10);
            if (!*k || *end || id < 0 || id > 0x7fffffff)
                return fail(e, HEARTH_EINVAL, "logit_bias", "Invalid 'logit_bias': key '%s' is not a token id.", k);
            if (!json_is_number(v) || json_number_value(v) < -100 || json_number_value(v) > 100)
                return fail(e, HEARTH_EINVAL, "logit_bias",
                            "Invalid 'logit_bias': the bias of token %ld must be a number in [-100, 100].", id);
            r->bias[r->n_bias].id = (int32_t)id;
            r->bias[r->n_bias].bias = (float)json_number_value(v);
            r->n_bias++;
        }
    }

    if (get_bool(b, "stream", &o->stream, e) || get_bool(b, "ignore_eos", &r->ignore_eos, e)) return 1;
    json_t *so = field(b, "stream_options");
    if (so) {
        if (!o->stream)
            return fail(e, HEARTH_EINVAL, "stream_options",
                        "Invalid 'stream_options': it is only allowed when 'stream' is true.");
        if (!json_is_object(so))
            return fail(e, HEARTH_EINVAL, "stream_options",
                        "Invalid type for 'stream_options': expected an object, but got %s instead.", type_name(so));
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu))
            return fail(e, HEARTH_EINVAL, "stream_options.include_usage",
                        "Invalid type for 'stream_options.include_usage': expected a boolean.");
        o->include_usage = json_is_true(iu);
    }
    json_t *rf = field(b, "response_format");
    if (rf) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(t))
            return fail(e, HEARTH_EINVAL, "response_format",
                        "Invalid 'response_format': expected an object with a string 'type'.");
        if (strcmp(json_string_value(t), "text"))
            return fail(e, HEARTH_ENOTSUP, "response_format",
                        "response_format type '%s' is not supported yet: structured output has not landed in this "
                        "server. Omit response_format or use {\"type\": \"text\"}.",
                        json_string_value(t));
    }
    static const char *refused[] = {"audio", "prediction", "web_search_options", "functions", "function_call"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (field(b, refused[i]))
            return fail(e, HEARTH_ENOTSUP, refused[i], "'%s' is not supported by this server%s.", refused[i],
                        i >= 3 ? " (use 'tools' and 'tool_choice')" : "");
    json_t *mod = field(b, "modalities");
    if (mod) {
        size_t i;
        json_t *m;
        if (!json_is_array(mod))
            return fail(e, HEARTH_EINVAL, "modalities", "Invalid type for 'modalities': expected an array.");
        json_array_foreach(mod, i, m) if (!json_is_string(m) || strcmp(json_string_value(m), "text")) return fail(
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
        return fail(e, HEARTH_EINVAL, "messages",
                    "Invalid type for '%s.content': expected a string or an array of content parts, but got %s "
                    "instead.",
                    where, type_name(c));
    api_buf t = {0};
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *ty = json_is_object(part) ? json_object_get(part, "type") : NULL;
        const char *ts = json_string_value(ty);
        if (!ts) {
            api_buf_free(&t);
            return fail(e, HEARTH_EINVAL, "messages", "Invalid '%s.content[%zu]': expected an object with a 'type'.",
                        where, i);
        }
        if (!strcmp(ts, "text") || !strcmp(ts, "refusal") || !strcmp(ts, "input_text")) {
            json_t *tx = json_object_get(part, !strcmp(ts, "refusal") ? "refusal" : "text");
            if (!json_is_string(tx)) {
                api_buf_free(&t);
                return fail(e, HEARTH_EINVAL, "messages", "Invalid '%s.content[%zu]': a %s part needs a string '%s'.",
                            where, i, ts, !strcmp(ts, "refusal") ? "refusal" : "text");
            }
            if (t.n) api_buf_put(&t, "\n", 1);
            api_buf_put(&t, json_string_value(tx), json_string_length(tx));
        } else {
            api_buf_free(&t);
            return fail(e, HEARTH_ENOTSUP, "messages",
                        "'%s.content[%zu]': content of type '%s' is not supported by this server (text only).", where,
                        i, ts);
        }
    }
    if (t.oom) {
        api_buf_free(&t);
        return fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    *out = json_stringn(t.p ? t.p : "", t.n);
    api_buf_free(&t);
    return *out ? 0 : fail(e, HEARTH_EINVAL, "messages", "'%s.content' is not valid UTF-8.", where);
}

/* OpenAI assistant tool_calls -> the transformers shape (arguments as an
 * object when they parse as one). */
static int convert_tool_calls(const json_t *tcs, const char *where, json_t *msg, hearth_cpl_error *e) {
    if (!json_is_array(tcs))
        return fail(e, HEARTH_EINVAL, "messages", "Invalid type for '%s.tool_calls': expected an array.", where);
    json_t *out = json_array();
    size_t i;
    json_t *tc;
    json_array_foreach(tcs, i, tc) {
        json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        json_t *name = json_object_get(fn, "name");
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_string(name)) {
            json_decref(out);
            return fail(e, HEARTH_EINVAL, "messages", "Invalid '%s.tool_calls[%zu]': expected function.name.", where,
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

static int parse_messages(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *ms = field(b, "messages");
    if (!ms) return fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: 'messages'.");
    if (!json_is_array(ms))
        return fail(e, HEARTH_EINVAL, "messages", "Invalid type for 'messages': expected an array, but got %s instead.",
                    type_name(ms));
    if (json_array_size(ms) == 0)
        return fail(e, HEARTH_EINVAL, "messages", "Invalid 'messages': expected an array with at least one message.");
    r->messages = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) {
        char where[32];
        snprintf(where, sizeof where, "messages[%zu]", i);
        if (!json_is_object(m))
            return fail(e, HEARTH_EINVAL, "messages", "Invalid type for '%s': expected an object, but got %s instead.",
                        where, type_name(m));
        json_t *role = json_object_get(m, "role");
        const char *rs = json_string_value(role);
        if (!rs) return fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.role'.", where);
        if (strcmp(rs, "system") && strcmp(rs, "developer") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool"))
            return fail(e, HEARTH_EINVAL, "messages",
                        "Invalid value for '%s.role': '%s'. Supported: system, developer, user, assistant, tool.",
                        where, rs);
        json_t *out = json_object();
        json_array_append_new(r->messages, out);
        /* templates know "system"; "developer" is the newer name for it */
        json_object_set_new(out, "role", json_string(!strcmp(rs, "developer") ? "system" : rs));
        json_t *c = field(m, "content");
        json_t *tcs = field(m, "tool_calls");
        if (c) {
            json_t *t;
            if (content_text(c, where, &t, e)) return 1;
            json_object_set_new(out, "content", t);
        } else if (!strcmp(rs, "assistant") && tcs) {
            json_object_set_new(out, "content", json_null());
        } else {
            return fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.content'.", where);
        }
        if (tcs) {
            if (strcmp(rs, "assistant"))
                return fail(e, HEARTH_EINVAL, "messages", "'%s.tool_calls' is only allowed on assistant messages.",
                            where);
            if (convert_tool_calls(tcs, where, out, e)) return 1;
        }
        json_t *name = field(m, "name");
        if (name) {
            if (!json_is_string(name))
                return fail(e, HEARTH_EINVAL, "messages", "Invalid type for '%s.name': expected a string.", where);
            json_object_set(out, "name", name);
        }
        json_t *rc = field(m, "reasoning_content");
        if (json_is_string(rc)) json_object_set(out, "reasoning_content", rc);
        if (!strcmp(rs, "tool")) {
            json_t *id = field(m, "tool_call_id");
            if (!json_is_string(id))
                return fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.tool_call_id'.", where);
            json_object_set(out, "tool_call_id", id);
            /* Some templates print the tool's name: take it from the call it answers. */
            if (!name) {
                size_t k;
                json_t *prev;
                json_array_foreach(r->messages, k, prev) {
                    json_t *ptc = json_object_get(prev, "tool_calls");
                    size_t j;
                    json_t *call;
                    json_array_foreach(ptc, j, call) {
                        json_t *cid = json_object_get(call, "id");
                        if (json_is_string(cid) && !strcmp(json_string_value(cid), json_string_value(id)))
                            json_object_set(out, "name", json_object_get(json_object_get(call, "function"), "name"));
                    }
                }
            }
        }
    }
    return 0;
}

static int parse_tools(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *tools = field(b, "tools");
    json_t *choice = field(b, "tool_choice");
    int none = 0;
    if (choice) {
        if (json_is_string(choice)) {
            const char *c = json_string_value(choice);
            if (!strcmp(c, "none")) none = 1;
            else if (!strcmp(c, "required"))
                return fail(e, HEARTH_ENOTSUP, "tool_choice",
                            "tool_choice 'required' is not supported yet: forcing a call needs structured output, "
                            "which has not landed. Use 'auto'.");
            else if (strcmp(c, "auto"))
                return fail(e, HEARTH_EINVAL, "tool_choice",
                            "Invalid value for 'tool_choice': '%s'. Supported: 'none', 'auto'.", c);
        } else if (json_is_object(choice)) {
            return fail(e, HEARTH_ENOTSUP, "tool_choice",
                        "Naming a function in tool_choice is not supported yet: forcing a call needs structured "
                        "output, which has not landed. Use 'auto'.");
        } else {
            return fail(e, HEARTH_EINVAL, "tool_choice",
                        "Invalid type for 'tool_choice': expected a string or an object, but got %s instead.",
                        type_name(choice));
        }
    }
    if (!tools) return 0;
    if (!json_is_array(tools))
        return fail(e, HEARTH_EINVAL, "tools", "Invalid type for 'tools': expected an array, but got %s instead.",
                    type_name(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *ty = json_object_get(t, "type");
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") ||
            !json_is_object(fn))
            return fail(e, HEARTH_EINVAL, "tools",
                        "Invalid 'tools[%zu]': expected {\"type\": \"function\", \"function\": {...}}.", i);
        if (!json_is_string(json_object_get(fn, "name")))
            return fail(e, HEARTH_EINVAL, "tools", "Missing required parameter: 'tools[%zu].function.name'.", i);
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_object(params))
            return fail(e, HEARTH_EINVAL, "tools", "Invalid 'tools[%zu].function.parameters': expected an object.", i);
    }
    if (none || json_array_size(tools) == 0) return 0; /* the model is not offered the tools */
    r->tools = json_incref(tools);
    r->parse_tools = 1;
    return 0;
}

int api_parse_chat(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    r->chat = 1;
    if (parse_common(b, r, o, e) || parse_messages(b, r, e) || parse_tools(b, r, e)) return 1;
    if (get_bool(b, "logprobs", &o->logprobs, e)) return 1;
    int has = 0;
    long long iv;
    if (get_int(b, "top_logprobs", 0, HEARTH_MAX_TOP_LOGPROBS, &has, &iv, e)) return 1;
    if (has) {
        if (!o->logprobs)
            return fail(e, HEARTH_EINVAL, "top_logprobs",
                        "Invalid 'top_logprobs': it can only be used when 'logprobs' is true.");
        o->top_logprobs = (int)iv;
    }
    r->logprobs = o->logprobs;
    r->top_logprobs = o->top_logprobs;
    json_t *kw = field(b, "chat_template_kwargs");
    if (kw) {
        if (!json_is_object(kw))
            return fail(e, HEARTH_EINVAL, "chat_template_kwargs",
                        "Invalid type for 'chat_template_kwargs': expected an object.");
        r->template_kwargs = json_incref(kw);
    }
    return 0;
}

/* ---- text completions ---- */

static int ids_from(const json_t *a, const char *where, hearth_cpl_request *r, hearth_cpl_error *e) {
    size_t n = json_array_size(a);
    r->prompt_ids = malloc(sizeof *r->prompt_ids * (n ? n : 1));
    if (!r->prompt_ids) return fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff)
            return fail(e, HEARTH_EINVAL, "prompt", "Invalid '%s[%zu]': expected a token id (a non-negative integer).",
                        where, i);
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_ids = (int)n;
    return 0;
}

int api_parse_text(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    r->chat = 0;
    r->prompt_field = "prompt";
    if (parse_common(b, r, o, e)) return 1;
    json_t *p = field(b, "prompt");
    if (!p) return fail(e, HEARTH_EINVAL, "prompt", "Missing required parameter: 'prompt'.");
    if (json_is_string(p)) {
        r->prompt = dup_str(json_string_value(p), json_string_length(p));
    } else if (json_is_array(p)) {
        json_t *first = json_array_get(p, 0);
        if (json_array_size(p) == 0)
            return fail(e, HEARTH_EINVAL, "prompt", "Invalid 'prompt': the array is empty.");
        if (json_is_integer(first)) {
            if (ids_from(p, "prompt", r, e)) return 1;
        } else if (json_array_size(p) > 1) {
            return fail(e, HEARTH_ENOTSUP, "prompt",
                        "Invalid 'prompt': only one prompt per request is supported by this server (got %zu).",
                        json_array_size(p));
        } else if (json_is_string(first)) {
            r->prompt = dup_str(json_string_value(first), json_string_length(first));
        } else if (json_is_array(first)) {
            if (ids_from(first, "prompt[0]", r, e)) return 1;
        } else {
            return fail(e, HEARTH_EINVAL, "prompt",
                        "Invalid type for 'prompt[0]': expected a string or an array of token ids.");
        }
    } else {
        return fail(e, HEARTH_EINVAL, "prompt",
                    "Invalid type for 'prompt': expected a string, an array of token ids, or an array with one of "
                    "those, but got %s instead.",
                    type_name(p));
    }
    if (!r->prompt && !r->prompt_ids) return fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    int echo = 0;
    if (get_bool(b, "echo", &echo, e)) return 1;
    if (echo) return fail(e, HEARTH_ENOTSUP, "echo", "'echo' is not supported yet by this server.");
    if (field(b, "suffix")) return fail(e, HEARTH_ENOTSUP, "suffix", "'suffix' is not supported by this model.");
    int has = 0;
    long long iv;
    if (get_int(b, "best_of", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has && iv != 1)
        return fail(e, HEARTH_ENOTSUP, "best_of", "Invalid 'best_of': only best_of=1 is supported (got %lld).", iv);
    has = 0;
    if (get_int(b, "logprobs", 0, 5, &has, &iv, e)) return 1;
    if (has) { /* the legacy API: logprobs=N asks for the chosen token and N alternatives */
        o->logprobs = 1;
        o->top_logprobs = (int)iv;
        r->logprobs = 1;
        r->top_logprobs = (int)iv;
    }
    return 0;
}
