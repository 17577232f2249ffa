/* openai_responses.c - POST /v1/responses: OpenAI's Responses API on the
 * completion seam, stateless (every request carries its whole conversation).
 *
 * Request -> the neutral request (the transformers chat format):
 *   instructions                      -> a first "system" message
 *   input: a string                   -> one user message
 *   input items: messages ({role, content: a string or input_text /
 *     output_text parts}), function_call (-> an assistant's tool_calls, the
 *     calls in a row joined into one message), function_call_output (-> a
 *     "tool" message), reasoning (-> the next assistant message's
 *     reasoning_content)
 *   tools [{type: function, name, description, parameters}], tool_choice
 *   auto / none / required / a named function (api_force_tool), max_output_tokens, temperature, top_p.
 *   Accepted with no effect on what is generated: store (nothing is kept),
 *   metadata, user, parallel_tool_calls, truncation, reasoning, include
 *   (but logprobs), service_tier.
 * text.format json_object / json_schema: structured output (json_mode.h).
 * Refused by name: previous_response_id and conversation (no state is
 * kept), background, image / file / audio input, built-in tools.
 *
 * Response: output items in the order made (a reasoning item, a message
 * with one output_text part, a function_call per call); status completed,
 * or incomplete with reason max_output_tokens. Streamed: response.created,
 * response.in_progress, then per item output_item.added, its part's
 * added / delta / done events, output_item.done, and response.completed
 * (or response.incomplete), each with its sequence_number. */
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- request ---- */

/* A message item's content: a string, or text parts. */
static int item_text(const json_t *c, const char *where, api_buf *t, hearth_cpl_error *e) {
    if (json_is_string(c)) {
        api_buf_put(t, json_string_value(c), json_string_length(c));
        return 0;
    }
    if (!json_is_array(c))
        return api_fail(e, HEARTH_EINVAL, "input", "Invalid type for '%s': expected a string or an array of parts.",
                        where);
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        const char *ty = json_string_value(json_object_get(p, "type"));
        const char *key = ty && !strcmp(ty, "refusal") ? "refusal" : "text";
        json_t *tx = json_object_get(p, key);
        if (!ty || (strcmp(ty, "input_text") && strcmp(ty, "output_text") && strcmp(ty, "text") &&
                    strcmp(ty, "refusal")))
            return api_fail(e, HEARTH_ENOTSUP, "input",
                            "'%s[%zu]': content of type '%s' is not supported by this server (text only).", where, i,
                            ty ? ty : "(none)");
        if (!json_is_string(tx))
            return api_fail(e, HEARTH_EINVAL, "input", "Invalid '%s[%zu]': a %s part needs a string '%s'.", where, i,
                            ty, key);
        if (t->n) api_buf_put(t, "\n", 1);
        api_buf_put(t, json_string_value(tx), json_string_length(tx));
    }
    return 0;
}

/* Reasoning items before an assistant turn become its reasoning_content. */
static void take_reasoning(json_t *msg, api_buf *reasoning) {
    if (!reasoning->n) return;
    json_object_set_new(msg, "reasoning_content", json_stringn(reasoning->p, reasoning->n));
    reasoning->n = 0;
}

/* The same, as a JSON string in *out. */
static int item_string(const json_t *c, const char *where, json_t **out, hearth_cpl_error *e) {
    api_buf t = {0};
    int bad = item_text(c, where, &t, e);
    if (!bad && t.oom) bad = api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (!bad && !(*out = json_stringn(t.p ? t.p : "", t.n)))
        bad = api_fail(e, HEARTH_EINVAL, "input", "'%s' is not valid UTF-8.", where);
    api_buf_free(&t);
    return bad;
}

static int convert_item(const json_t *it, size_t i, json_t *out, api_buf *reasoning, hearth_cpl_error *e) {
    char where[48];
    snprintf(where, sizeof where, "input[%zu]", i);
    if (!json_is_object(it))
        return api_fail(e, HEARTH_EINVAL, "input", "Invalid type for '%s': expected an object, but got %s instead.",
                        where, api_type_name(it));
    const char *ty = json_string_value(json_object_get(it, "type"));
    const char *role = json_string_value(json_object_get(it, "role"));
    json_t *last = json_array_get(out, json_array_size(out) - 1);
    if (!ty || !strcmp(ty, "message")) {
        if (!role || (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") &&
                      strcmp(role, "assistant")))
            return api_fail(e, HEARTH_EINVAL, "input",
                            "Invalid '%s.role': expected user, system, developer or assistant.", where);
        char cw[64];
        snprintf(cw, sizeof cw, "%s.content", where);
        json_t *text;
        if (item_string(json_object_get(it, "content"), cw, &text, e)) return 1;
        json_t *m = json_pack("{s:s,s:o}", "role", !strcmp(role, "developer") ? "system" : role, "content", text);
        if (!strcmp(role, "assistant")) take_reasoning(m, reasoning);
        json_array_append_new(out, m);
    } else if (!strcmp(ty, "function_call")) {
        json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name");
        json_t *args = json_object_get(it, "arguments");
        if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args))
            return api_fail(e, HEARTH_EINVAL, "input",
                            "Invalid '%s': a function_call needs string 'call_id', 'name' and 'arguments'.", where);
        json_t *a = json_loads(json_string_value(args), 0, NULL); /* the template's shape: an object */
        if (!json_is_object(a)) {
            json_decref(a);
            a = json_incref(args);
        }
        json_t *call = json_pack("{s:O,s:s,s:{s:O,s:o}}", "id", id, "type", "function", "function", "name", name,
                                 "arguments", a);
        /* calls in a row are one assistant turn */
        int joins = last && !strcmp(json_string_value(json_object_get(last, "role")), "assistant") &&
                    json_object_get(last, "tool_calls");
        if (!joins) {
            /* "" rather than null: see anthropic_messages.c */
            last = json_pack("{s:s,s:s,s:[]}", "role", "assistant", "content", "", "tool_calls");
            take_reasoning(last, reasoning);
            json_array_append_new(out, last);
        }
        json_array_append_new(json_object_get(last, "tool_calls"), call);
    } else if (!strcmp(ty, "function_call_output")) {
        json_t *id = json_object_get(it, "call_id");
        if (!json_is_string(id))
            return api_fail(e, HEARTH_EINVAL, "input", "Missing required parameter: '%s.call_id'.", where);
        char ow[64];
        snprintf(ow, sizeof ow, "%s.output", where);
        json_t *text;
        if (item_string(json_object_get(it, "output"), ow, &text, e)) return 1;
        json_t *m = json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", text);
        api_name_tool_result(out, m);
        json_array_append_new(out, m);
    } else if (!strcmp(ty, "reasoning")) {
        size_t k;
        json_t *p;
        json_array_foreach(json_object_get(it, "content"), k, p) {
            json_t *tx = json_object_get(p, "text");
            if (json_is_string(tx)) api_buf_put(reasoning, json_string_value(tx), json_string_length(tx));
        }
    } else {
        return api_fail(e, HEARTH_ENOTSUP, "input", "'%s': items of type '%s' are not supported by this server.",
                        where, ty);
    }
    return 0;
}

static int parse_input(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *in = api_field(b, "input"), *ins = api_field(b, "instructions");
    if (!in) return api_fail(e, HEARTH_EINVAL, "input", "Missing required parameter: 'input'.");
    if (ins && !json_is_string(ins))
        return api_fail(e, HEARTH_EINVAL, "instructions", "Invalid type for 'instructions': expected a string.");
    r->messages = json_array();
    if (!r->messages) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (ins) json_array_append_new(r->messages, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    if (json_is_string(in)) {
        json_array_append_new(r->messages, json_pack("{s:s,s:O}", "role", "user", "content", in));
        return 0;
    }
    if (!json_is_array(in) || json_array_size(in) == 0)
        return api_fail(e, HEARTH_EINVAL, "input", "Invalid 'input': expected a string or a non-empty array of items.");
    api_buf reasoning = {0};
    size_t i;
    json_t *it;
    int bad = 0;
    json_array_foreach(in, i, it) if ((bad = convert_item(it, i, r->messages, &reasoning, e))) break;
    api_buf_free(&reasoning);
    return bad;
}

static int parse_tools(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *choice = api_field(b, "tool_choice");
    const char *cs = json_string_value(choice), *forced = json_string_value(json_object_get(choice, "name"));
    if (choice && !(cs && (!strcmp(cs, "auto") || !strcmp(cs, "none") || !strcmp(cs, "required"))) && !forced)
        return api_fail(e, HEARTH_EINVAL, "tool_choice",
                        "Invalid 'tool_choice': expected auto, none, required or {\"type\": \"function\", \"name\": "
                        "...}.");
    int force = forced || (cs && !strcmp(cs, "required"));
    json_t *tools = api_field(b, "tools");
    if (!tools) return force ? api_force_tool(r, forced, e) : 0; /* forcing with no tools: refused */
    if (!json_is_array(tools))
        return api_fail(e, HEARTH_EINVAL, "tools", "Invalid type for 'tools': expected an array.");
    json_t *fns = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *ty = json_string_value(json_object_get(t, "type"));
        if (!ty || strcmp(ty, "function")) {
            json_decref(fns);
            return api_fail(e, HEARTH_ENOTSUP, "tools",
                            "'tools[%zu]': tools of type '%s' are not supported by this server (function tools only).",
                            i, ty ? ty : "(none)");
        }
        if (api_add_function_tool(fns, i, json_object_get(t, "name"), api_field(t, "description"),
                                  api_field(t, "parameters"), e)) {
            json_decref(fns);
            return 1;
        }
    }
    api_offer_tools(r, fns, cs && !strcmp(cs, "none"));
    return force ? api_force_tool(r, forced, e) : 0;
}

static int parse_refused(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    static const char *stateful[] = {"previous_response_id", "conversation", "prompt"};
    for (size_t i = 0; i < sizeof stateful / sizeof *stateful; i++)
        if (api_field(b, stateful[i]))
            return api_fail(e, HEARTH_ENOTSUP, stateful[i],
                            "'%s' is not supported: this server keeps no responses; send the whole conversation in "
                            "'input'.",
                            stateful[i]);
    int bg = 0;
    if (api_get_bool(b, "background", &bg, e)) return 1;
    if (bg) return api_fail(e, HEARTH_ENOTSUP, "background", "'background' responses are not supported.");
    json_t *fmt = json_object_get(api_field(b, "text"), "format");
    if (fmt && api_parse_format(fmt, "text.format", fmt, r, e)) return 1;
    size_t i;
    json_t *inc;
    json_array_foreach(api_field(b, "include"), i, inc) {
        if (json_is_string(inc) && strstr(json_string_value(inc), "logprobs"))
            return api_fail(e, HEARTH_ENOTSUP, "include", "'include': logprobs are not supported on /v1/responses "
                                                          "yet; /v1/chat/completions has them.");
    }
    return 0;
}

int api_parse_responses(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    hearth_cpl_params *p = &r->p;
    r->chat = 1;
    if (api_check_body(b, r, e)) return 1;
    if (parse_refused(b, r, e) || parse_input(b, r, e) || parse_tools(b, r, e)) return 1;
    long long iv;
    int has = 0;
    if (api_get_int(b, "max_output_tokens", 1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_max_tokens = 1, p->max_tokens = (int)iv;
    if (api_get_number(b, "temperature", 0, 2, &p->has_temperature, &p->temperature, e) ||
        api_get_number(b, "top_p", 0, 1, &p->has_top_p, &p->top_p, e) || api_get_bool(b, "stream", &o->stream, e))
        return 1;
    if (p->has_top_p && p->top_p <= 0)
        return api_fail(e, HEARTH_EINVAL, "top_p", "Invalid 'top_p': it must be greater than 0 (1 turns it off).");
    /* what the response echoes back */
    o->echo = json_pack("{s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?}", "text", api_field(b, "text"), "instructions",
                        api_field(b, "instructions"), "max_output_tokens", api_field(b, "max_output_tokens"),
                        "temperature", api_field(b, "temperature"), "top_p", api_field(b, "top_p"), "tools",
                        api_field(b, "tools"), "tool_choice", api_field(b, "tool_choice"), "metadata",
                        api_field(b, "metadata"));
    return o->echo ? 0 : api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
}

/* ---- response ---- */

/* The response object: status, the output items given, usage when s. */
static json_t *response_obj(api_job *j, const char *status, json_t *output, const hearth_cpl_summary *s) {
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:n,s:n,s:s,s:o,s:b,s:{s:{s:s}},s:s,s:b}", "id", j->id, "object",
                          "response", "created_at", (json_int_t)j->created, "status", status, "error",
                          "incomplete_details", "model", api_job_model(j), "output", output, "parallel_tool_calls", 1,
                          "text", "format", "type", "text", "truncation", "disabled", "store", 0);
    const char *k;
    json_t *v;
    json_object_foreach(j->echo, k, v) if (!json_is_null(v)) json_object_set(r, k, v);
    if (!json_object_get(r, "tools")) json_object_set_new(r, "tools", json_array());
    if (!json_object_get(r, "tool_choice")) json_object_set_new(r, "tool_choice", json_string("auto"));
    if (!json_object_get(r, "metadata")) json_object_set_new(r, "metadata", json_object());
    if (!strcmp(status, "incomplete"))
        json_object_set_new(r, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    json_object_set_new(r, "usage",
                        s ? json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", s->prompt_tokens,
                                      "input_tokens_details", "cached_tokens", s->cached_tokens, "output_tokens",
                                      s->completion_tokens, "output_tokens_details", "reasoning_tokens", 0,
                                      "total_tokens", s->prompt_tokens + s->completion_tokens)
                          : json_null());
    return r;
}

static const char *final_status(const hearth_cpl_summary *s) {
    return s->finish == HEARTH_CPL_FINISH_LENGTH ? "incomplete" : "completed";
}

/* Item ids: the response's id after its prefix, with the item's kind and index. */
static void item_id(api_job *j, const char *kind, int index, char *out, size_t cap) {
    snprintf(out, cap, "%s_%s_%d", kind, j->id + strlen("resp_"), index);
}

static json_t *reasoning_item(api_job *j, int index, const char *text, size_t n, const char *status) {
    char id[64];
    item_id(j, "rs", index, id, sizeof id);
    return json_pack("{s:s,s:s,s:[],s:[{s:s,s:s%}],s:s}", "type", "reasoning", "id", id, "summary", "content", "type",
                     "reasoning_text", "text", text, n, "status", status);
}

static json_t *text_part(const char *text, size_t n) {
    return json_pack("{s:s,s:s%,s:[],s:[]}", "type", "output_text", "text", text, n, "annotations", "logprobs");
}

static json_t *message_item(api_job *j, int index, json_t *content, const char *status) {
    char id[64];
    item_id(j, "msg", index, id, sizeof id);
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "type", "message", "id", id, "status", status, "role", "assistant",
                     "content", content);
}

static json_t *call_item(api_job *j, int index, const char *call_id, const char *name, const char *args,
                         const char *status) {
    char id[64];
    item_id(j, "fc", index, id, sizeof id);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "function_call", "id", id, "call_id", call_id, "name", name,
                     "arguments", args, "status", status);
}

static json_t *full(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    const char *st = final_status(s);
    json_t *out = json_array();
    if (j->reasoning.n) /* incomplete if the tokens ran out in it */
        json_array_append_new(out, reasoning_item(j, 0, j->reasoning.p, j->reasoning.n,
                                                  j->content.n || json_array_size(j->tool_calls) ? "completed" : st));
    if (j->content.n)
        json_array_append_new(out, message_item(j, (int)json_array_size(out),
                                                json_pack("[o]", text_part(j->content.p, j->content.n)), st));
    size_t i;
    json_t *c;
    json_array_foreach(j->tool_calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        json_array_append_new(out, call_item(j, (int)json_array_size(out), json_string_value(json_object_get(c, "id")),
                                             json_string_value(json_object_get(fn, "name")),
                                             json_string_value(json_object_get(fn, "arguments")), "completed"));
    }
    return response_obj(j, st, out, s);
}

/* ---- stream ---- */

static void put(api_job *j, const char *type, json_t *v) {
    if (!v) return;
    json_object_set_new(v, "type", json_string(type));
    json_object_set_new(v, "sequence_number", json_integer(j->seq++));
    api_sse_put(&j->out, type, v);
    json_decref(v);
}

/* The open item (blk_kind: its event kind; n_blk: its output_index) ends;
 * status: the item's (incomplete when the response ran out of tokens in it). */
static void item_close_as(api_job *j, const char *status) {
    int k = j->blk_kind, at = j->n_blk;
    if (k < 0) return;
    char id[64];
    json_t *item;
    if (k == HEARTH_CPL_REASONING) {
        item_id(j, "rs", at, id, sizeof id);
        const char *t = j->reasoning.p ? j->reasoning.p : "";
        put(j, "response.reasoning_text.done",
            json_pack("{s:s,s:i,s:i,s:s%}", "item_id", id, "output_index", at, "content_index", 0, "text", t,
                      j->reasoning.n));
        put(j, "response.content_part.done",
            json_pack("{s:s,s:i,s:i,s:{s:s,s:s%}}", "item_id", id, "output_index", at, "content_index", 0, "part",
                      "type", "reasoning_text", "text", t, j->reasoning.n));
        item = reasoning_item(j, at, t, j->reasoning.n, status);
        j->reasoning.n = 0;
    } else if (k == HEARTH_CPL_CONTENT) {
        item_id(j, "msg", at, id, sizeof id);
        const char *t = j->content.p ? j->content.p : "";
        put(j, "response.output_text.done",
            json_pack("{s:s,s:i,s:i,s:s%,s:[]}", "item_id", id, "output_index", at, "content_index", 0, "text", t,
                      j->content.n, "logprobs"));
        put(j, "response.content_part.done",
            json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", at, "content_index", 0, "part",
                      text_part(t, j->content.n)));
        item = message_item(j, at, json_pack("[o]", text_part(t, j->content.n)), status);
        j->content.n = 0;
    } else {
        item = json_incref(json_array_get(j->output, (size_t)at)); /* a call is whole at once */
    }
    if (k != HEARTH_CPL_TOOL_CALL) json_array_append(j->output, item);
    put(j, "response.output_item.done", json_pack("{s:i,s:O}", "output_index", at, "item", item));
    json_decref(item);
    j->n_blk++;
    j->blk_kind = -1;
}

static void item_close(api_job *j) { item_close_as(j, "completed"); }

static void item_open(api_job *j, int kind) {
    item_close(j);
    int at = j->n_blk;
    char id[64];
    if (kind == HEARTH_CPL_REASONING) {
        item_id(j, "rs", at, id, sizeof id);
        put(j, "response.output_item.added",
            json_pack("{s:i,s:{s:s,s:s,s:[],s:[],s:s}}", "output_index", at, "item", "type", "reasoning", "id", id,
                      "summary", "content", "status", "in_progress"));
        put(j, "response.content_part.added",
            json_pack("{s:s,s:i,s:i,s:{s:s,s:s}}", "item_id", id, "output_index", at, "content_index", 0, "part",
                      "type", "reasoning_text", "text", ""));
    } else {
        item_id(j, "msg", at, id, sizeof id);
        put(j, "response.output_item.added",
            json_pack("{s:i,s:o}", "output_index", at, "item", message_item(j, at, json_array(), "in_progress")));
        put(j, "response.content_part.added",
            json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", at, "content_index", 0, "part",
                      text_part("", 0)));
    }
    j->blk_kind = kind;
}

static void on_stream_event(void *user, const hearth_cpl_event *ev) {
    api_job *j = user;
    char id[64];
    if (ev->kind == HEARTH_CPL_TOOL_CALL) {
        item_close(j);
        int at = j->n_blk;
        item_id(j, "fc", at, id, sizeof id);
        put(j, "response.output_item.added",
            json_pack("{s:i,s:o}", "output_index", at, "item", call_item(j, at, ev->id, ev->name, "", "in_progress")));
        put(j, "response.function_call_arguments.delta",
            json_pack("{s:s,s:i,s:s}", "item_id", id, "output_index", at, "delta", ev->arguments));
        put(j, "response.function_call_arguments.done",
            json_pack("{s:s,s:i,s:s,s:s}", "item_id", id, "output_index", at, "name", ev->name, "arguments",
                      ev->arguments));
        json_array_append_new(j->output, call_item(j, at, ev->id, ev->name, ev->arguments, "completed"));
        j->blk_kind = HEARTH_CPL_TOOL_CALL;
        item_close(j);
        return;
    }
    if ((int)ev->kind != j->blk_kind) item_open(j, ev->kind);
    int reasoning = ev->kind == HEARTH_CPL_REASONING;
    api_buf_put(reasoning ? &j->reasoning : &j->content, ev->text, ev->len);
    item_id(j, reasoning ? "rs" : "msg", j->n_blk, id, sizeof id);
    json_t *d = json_pack("{s:s,s:i,s:i,s:s%}", "item_id", id, "output_index", j->n_blk, "content_index", 0, "delta",
                          ev->text, ev->len);
    if (!reasoning) json_object_set_new(d, "logprobs", json_array());
    put(j, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", d);
}

static void stream_end(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    item_close_as(j, final_status(s));
    if (s->finish <= HEARTH_CPL_FINISH_TOOL_CALLS) {
        const char *st = final_status(s);
        put(j, !strcmp(st, "completed") ? "response.completed" : "response.incomplete",
            json_pack("{s:o}", "response", response_obj(j, st, json_copy(j->output), s)));
        return;
    }
    int shutting = atomic_load(&j->a->state) == API_SHUTTING;
    put(j, "error",
        json_pack("{s:s,s:s,s:n}", "code", s->finish == HEARTH_CPL_FINISH_ERROR ? "engine_error" : "cancelled",
                  "message", s->finish != HEARTH_CPL_FINISH_ERROR && shutting
                                 ? "the server is shutting down; the generation was cancelled"
                                 : s->error,
                  "param"));
}

/* The response exists before any token. */
static void stream_start(api_job *j) {
    j->output = json_array();
    put(j, "response.created", json_pack("{s:o}", "response", response_obj(j, "in_progress", json_array(), NULL)));
    put(j, "response.in_progress", json_pack("{s:o}", "response", response_obj(j, "in_progress", json_array(), NULL)));
}

const api_proto API_RESPONSES = {
    .id_prefix = "resp_",
    .parse = api_parse_responses,
    .ev_start = stream_start,
    .ev_event = on_stream_event,
    .ev_end = stream_end,
    .ev_idle = ": keep-alive\n\n",
    .full = full,
};
