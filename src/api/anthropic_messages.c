/* anthropic_messages.c - POST /v1/messages and /v1/messages/count_tokens:
 * the Anthropic Messages API on the completion seam.
 *
 * Request -> the neutral request (the transformers chat format):
 *   system (a string or text blocks)  -> a first "system" message
 *   a message's text blocks           -> its content, joined by "\n"
 *   an assistant's tool_use blocks    -> its tool_calls (arguments an object)
 *   a user's tool_result blocks       -> "tool" messages, in place
 *   an assistant's thinking blocks    -> its reasoning_content
 *   a final assistant message         -> a prefill: the answer continues it
 *   tools {name, description, input_schema} -> function schemas
 *   stop_sequences, max_tokens, temperature, top_p, top_k as their names say;
 *   (the current SDK no longer sends temperature, top_p or top_k; other
 *   clients do, and they are honoured);
 *   thinking {type: enabled | disabled} -> the template's enable_thinking
 *   (adaptive leaves the template's default). budget_tokens is accepted but
 *   not a separate limit: max_tokens bounds the whole answer, thinking
 *   included.
 *   Accepted with no effect on what is generated: metadata, service_tier,
 *   cache_control (the prefix cache is always on), output_config.effort,
 *   speed, inference_geo and the like.
 * output_config.format {type: json_schema, schema} constrains the answer to
 * one object of the schema (completion/json_mode.h).
 * tool_choice any / tool forces a call (api_force_tool).
 * Refused by name: image and document blocks, server tools, container,
 * mcp_servers.
 *
 * Response: a message whose content is a thinking block (if the model
 * reasoned), a text block (if it wrote text) and a tool_use block per call;
 * stop_reason end_turn | max_tokens | stop_sequence | tool_use; usage with
 * input_tokens not counting cache_read_input_tokens, as Anthropic counts.
 * Streamed: message_start, then per block content_block_start / _delta /
 * _stop, then message_delta (stop reason, usage) and message_stop; a ping
 * while the request waits; an error event if it fails after the headers.
 * Errors are {"type":"error","error":{"type","message"}}. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- request ---- */

static int not_blocks(const json_t *c, const char *where, hearth_cpl_error *e) {
    return api_fail(e, HEARTH_EINVAL, "messages",
                    "Invalid type for '%s.content': expected a string or an array of content blocks, but got %s "
                    "instead.",
                    where, api_type_name(c));
}

/* Text of a tool_result's content: a string, or text blocks. */
static int result_text(const json_t *c, const char *where, api_buf *t, hearth_cpl_error *e) {
    if (!c) return 0;
    if (json_is_string(c)) {
        api_buf_put(t, json_string_value(c), json_string_length(c));
        return 0;
    }
    if (!json_is_array(c))
        return not_blocks(c, where, e);
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        const char *ty = json_string_value(json_object_get(b, "type"));
        json_t *tx = json_object_get(b, "text");
        if (!ty || strcmp(ty, "text"))
            return api_fail(e, HEARTH_ENOTSUP, "messages",
                            "'%s.content[%zu]': content of type '%s' is not supported by this server (text only).",
                            where, i, ty ? ty : "(none)");
        if (!json_is_string(tx))
            return api_fail(e, HEARTH_EINVAL, "messages",
                            "Invalid '%s.content[%zu]': a text block needs a string 'text'.",
                            where, i);
        if (t->n) api_buf_put(t, "\n", 1);
        api_buf_put(t, json_string_value(tx), json_string_length(tx));
    }
    return 0;
}

/* A user message with the text gathered so far (if any), appended to out. */
static void flush_user_text(json_t *out, api_buf *t, int force) {
    if (!t->n && !force) return;
    json_array_append_new(out, json_pack("{s:s,s:s%}", "role", "user", "content", t->p ? t->p : "", t->n));
    t->n = 0;
}

/* One Anthropic message -> one or more messages of the chat format. */
static int convert_message(const json_t *m, size_t i, json_t *out, hearth_cpl_error *e) {
    char where[32];
    snprintf(where, sizeof where, "messages[%zu]", i);
    if (!json_is_object(m))
        return api_fail(e, HEARTH_EINVAL, "messages", "Invalid type for '%s': expected an object, but got %s instead.",
                        where, api_type_name(m));
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role) return api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.role'.", where);
    int user = !strcmp(role, "user");
    if (!user && strcmp(role, "assistant"))
        return api_fail(e, HEARTH_EINVAL, "messages",
                        "Invalid value for '%s.role': '%s'. Supported: user, assistant (a system prompt goes in "
                        "'system').",
                        where, role);
    json_t *c = api_field(m, "content");
    if (!c) return api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.content'.", where);
    if (json_is_string(c)) {
        json_array_append_new(out, json_pack("{s:s,s:O}", "role", role, "content", c));
        return 0;
    }
    if (!json_is_array(c))
        return not_blocks(c, where, e);
    api_buf text = {0}, thinking = {0};
    json_t *calls = json_array();
    int bad = 0, n_results = 0;
    size_t k;
    json_t *b;
    json_array_foreach(c, k, b) {
        char bw[48];
        snprintf(bw, sizeof bw, "%s.content[%zu]", where, k);
        const char *ty = json_string_value(json_object_get(b, "type"));
        if (!ty) {
            bad = api_fail(e, HEARTH_EINVAL, "messages", "Invalid '%s': expected an object with a 'type'.", bw);
        } else if (!strcmp(ty, "text")) {
            json_t *tx = json_object_get(b, "text");
            if (!json_is_string(tx)) {
                bad = api_fail(e, HEARTH_EINVAL, "messages", "Invalid '%s': a text block needs a string 'text'.", bw);
            } else {
                if (text.n) api_buf_put(&text, "\n", 1);
                api_buf_put(&text, json_string_value(tx), json_string_length(tx));
            }
        } else if (!strcmp(ty, "tool_use") && !user) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
            json_t *in = json_object_get(b, "input");
            if (!json_is_string(id) || !json_is_string(name) || !json_is_object(in))
                bad = api_fail(e, HEARTH_EINVAL, "messages",
                               "Invalid '%s': a tool_use block needs a string 'id', a string 'name' and an object "
                               "'input'.",
                               bw);
            else
                json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function",
                                                       "function", "name", name, "arguments", in));
        } else if (!strcmp(ty, "tool_result") && user) {
            json_t *id = json_object_get(b, "tool_use_id");
            if (!json_is_string(id)) {
                bad = api_fail(e, HEARTH_EINVAL, "messages", "Missing required parameter: '%s.tool_use_id'.", bw);
            } else {
                flush_user_text(out, &text, 0); /* the text before it stays before it */
                api_buf r = {0};
                bad = result_text(api_field(b, "content"), bw, &r, e);
                json_t *tm = json_pack("{s:s,s:O,s:s%}", "role", "tool", "tool_call_id", id, "content",
                                       r.p ? r.p : "", r.n);
                api_buf_free(&r);
                if (tm) api_name_tool_result(out, tm);
                json_array_append_new(out, tm);
                n_results++;
            }
        } else if (!strcmp(ty, "thinking") && !user) {
            json_t *th = json_object_get(b, "thinking");
            if (json_is_string(th)) api_buf_put(&thinking, json_string_value(th), json_string_length(th));
        } else if (!strcmp(ty, "redacted_thinking") && !user) {
            /* encrypted by its producer: nothing a template could print */
        } else if (!strcmp(ty, "image") || !strcmp(ty, "document") || !strcmp(ty, "search_result")) {
            bad = api_fail(e, HEARTH_ENOTSUP, "messages",
                           "'%s': content of type '%s' is not supported by this server (text only).", bw, ty);
        } else {
            bad = api_fail(e, HEARTH_EINVAL, "messages", "Invalid '%s': a %s message cannot hold a '%s' block.", bw,
                           role, ty);
        }
        if (bad) break;
    }
    if (!bad && (text.oom || thinking.oom)) bad = api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (!bad && user) {
        flush_user_text(out, &text, n_results == 0); /* tool results alone add no empty user turn */
    } else if (!bad) {
        json_t *am = json_pack("{s:s}", "role", "assistant");
        /* "" with tool calls and no text: templates without tools then print
         * an empty turn, where null would stop those that read the content */
        json_object_set_new(am, "content", json_stringn(text.p ? text.p : "", text.n));
        if (json_array_size(calls)) json_object_set(am, "tool_calls", calls);
        if (thinking.n) json_object_set_new(am, "reasoning_content", json_stringn(thinking.p, thinking.n));
        json_array_append_new(out, am);
    }
    json_decref(calls);
    api_buf_free(&text);
    api_buf_free(&thinking);
    return bad;
}

static int parse_system(const json_t *b, json_t *out, hearth_cpl_error *e) {
    json_t *sys = api_field(b, "system");
    if (!sys) return 0;
    api_buf t = {0};
    int bad = result_text(sys, "system", &t, e);
    if (!bad && t.oom) bad = api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (!bad) json_array_append_new(out, json_pack("{s:s,s:s%}", "role", "system", "content", t.p ? t.p : "", t.n));
    api_buf_free(&t);
    if (bad && !strcmp(e->param, "messages")) snprintf(e->param, sizeof e->param, "system");
    return bad;
}

static int parse_messages_field(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *ms = api_field(b, "messages");
    if (!ms) return api_fail(e, HEARTH_EINVAL, "messages", "messages: Field required");
    if (!json_is_array(ms))
        return api_fail(e, HEARTH_EINVAL, "messages",
                        "Invalid type for 'messages': expected an array, but got %s instead.", api_type_name(ms));
    if (json_array_size(ms) == 0)
        return api_fail(e, HEARTH_EINVAL, "messages", "messages: at least one message is required");
    r->messages = json_array();
    if (!r->messages) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (parse_system(b, r->messages, e)) return 1;
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) if (convert_message(m, i, r->messages, e)) return 1;
    /* A final assistant message with text is a prefill: the answer continues it. */
    json_t *last = json_array_get(r->messages, json_array_size(r->messages) - 1);
    const char *lc = json_string_value(json_object_get(last, "content"));
    r->continue_final = !strcmp(json_string_value(json_object_get(last, "role")), "assistant") && lc &&
                        lc[strspn(lc, " \t\r\n")] && !json_object_get(last, "tool_calls");
    return 0;
}

static int parse_tools(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *choice = api_field(b, "tool_choice");
    int none = 0, force = 0;
    const char *forced = NULL;
    if (choice) {
        const char *ty = json_string_value(json_object_get(choice, "type"));
        if (!json_is_object(choice) || !ty)
            return api_fail(e, HEARTH_EINVAL, "tool_choice",
                            "Invalid 'tool_choice': expected an object with a 'type' (auto, any, tool or none).");
        if (!strcmp(ty, "none")) none = 1;
        else if (!strcmp(ty, "any")) force = 1;
        else if (!strcmp(ty, "tool")) {
            if (!(forced = json_string_value(json_object_get(choice, "name"))))
                return api_fail(e, HEARTH_EINVAL, "tool_choice", "Missing required parameter: 'tool_choice.name'.");
            force = 1;
        } else if (strcmp(ty, "auto"))
            return api_fail(e, HEARTH_EINVAL, "tool_choice",
                            "Invalid value for 'tool_choice.type': '%s'. Supported: auto, any, tool, none.", ty);
    }
    json_t *tools = api_field(b, "tools");
    if (!tools) return force ? api_force_tool(r, forced, e) : 0; /* forcing with no tools: refused */
    if (!json_is_array(tools))
        return api_fail(e, HEARTH_EINVAL, "tools", "Invalid type for 'tools': expected an array, but got %s instead.",
                        api_type_name(tools));
    json_t *fns = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *ty = json_string_value(json_object_get(t, "type"));
        int bad = 0;
        if (!json_is_object(t))
            bad = api_fail(e, HEARTH_EINVAL, "tools", "Invalid type for 'tools[%zu]': expected an object.", i);
        else if (ty && strcmp(ty, "custom"))
            bad = api_fail(e, HEARTH_ENOTSUP, "tools",
                           "'tools[%zu]': tools of type '%s' run on Anthropic's servers and are not supported by this "
                           "server (custom tools only).",
                           i, ty);
        else if (!json_is_object(json_object_get(t, "input_schema")))
            bad = api_fail(e, HEARTH_EINVAL, "tools", "Invalid 'tools[%zu].input_schema': expected an object.", i);
        else
            bad = api_add_function_tool(fns, i, json_object_get(t, "name"), api_field(t, "description"),
                                        json_object_get(t, "input_schema"), e);
        if (bad) {
            json_decref(fns);
            return 1;
        }
    }
    api_offer_tools(r, fns, none);
    return force ? api_force_tool(r, forced, e) : 0;
}

/* thinking: enabled / disabled set the template's enable_thinking; adaptive
 * and between_tools leave the template's own default (the model decides). */
static int parse_thinking(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *th = api_field(b, "thinking");
    if (!th) return 0;
    const char *ty = json_string_value(json_object_get(th, "type"));
    int on = ty && !strcmp(ty, "enabled"), off = ty && !strcmp(ty, "disabled");
    if (!json_is_object(th) || !ty || (!on && !off && strcmp(ty, "adaptive") && strcmp(ty, "between_tools")))
        return api_fail(e, HEARTH_EINVAL, "thinking",
                        "Invalid 'thinking': expected a 'type' of enabled (with budget_tokens), disabled, adaptive "
                        "or between_tools.");
    int has = 0;
    long long budget;
    if (on && api_get_int(th, "budget_tokens", 1, 1 << 30, &has, &budget, e)) {
        snprintf(e->param, sizeof e->param, "thinking.budget_tokens");
        return 1;
    }
    if (!on && !off) return 0;
    r->template_kwargs = json_pack("{s:b}", "enable_thinking", on);
    return r->template_kwargs ? 0 : api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
}

/* output_config: effort is accepted (a hint with nothing to steer in a local
 * model's sampling); format {type: json_schema, schema} constrains the answer. */
static int parse_output_config(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *oc = api_field(b, "output_config");
    if (!oc) return 0;
    if (!json_is_object(oc))
        return api_fail(e, HEARTH_EINVAL, "output_config", "Invalid type for 'output_config': expected an object.");
    json_t *effort = api_field(oc, "effort");
    if (effort && !json_is_string(effort))
        return api_fail(e, HEARTH_EINVAL, "output_config.effort",
                        "Invalid type for 'output_config.effort': expected a string.");
    json_t *fmt = api_field(oc, "format");
    return fmt ? api_parse_format(fmt, "output_config.format", fmt, r, e) : 0;
}

int api_parse_messages(const json_t *b, int count_only, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    hearth_cpl_params *p = &r->p;
    r->chat = 1;
    if (api_check_body(b, r, e)) return 1;
    if (parse_messages_field(b, r, e) || parse_tools(b, r, e) || parse_thinking(b, r, e) ||
        parse_output_config(b, r, e))
        return 1;
    if (count_only) return 0;
    long long iv;
    int has = 0;
    if (api_get_int(b, "max_tokens", 1, 1 << 30, &has, &iv, e)) return 1;
    if (!has) return api_fail(e, HEARTH_EINVAL, "max_tokens", "max_tokens: Field required");
    p->has_max_tokens = 1, p->max_tokens = (int)iv;
    if (api_get_number(b, "temperature", 0, 1, &p->has_temperature, &p->temperature, e) ||
        api_get_number(b, "top_p", 0, 1, &p->has_top_p, &p->top_p, e))
        return 1;
    if (p->has_top_p && p->top_p <= 0)
        return api_fail(e, HEARTH_EINVAL, "top_p", "Invalid 'top_p': it must be greater than 0 (1 turns it off).");
    has = 0;
    if (api_get_int(b, "top_k", 0, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_top_k = 1, p->top_k = (int)iv;
    json_t *stops = api_field(b, "stop_sequences");
    if (stops && !json_is_array(stops))
        return api_fail(e, HEARTH_EINVAL, "stop_sequences",
                        "Invalid type for 'stop_sequences': expected an array of strings, but got %s instead.",
                        api_type_name(stops));
    if (api_parse_stops(stops, "stop_sequences", r, e) || api_get_bool(b, "stream", &o->stream, e)) return 1;
    json_t *md = api_field(b, "metadata");
    if (md && !json_is_object(md))
        return api_fail(e, HEARTH_EINVAL, "metadata", "Invalid type for 'metadata': expected an object.");
    static const char *refused[] = {"container", "mcp_servers", "context_management"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (api_field(b, refused[i]))
            return api_fail(e, HEARTH_ENOTSUP, refused[i], "'%s' is not supported by this server.", refused[i]);
    return 0;
}

/* ---- response ---- */

static const char *stop_reason(const hearth_cpl_summary *s) {
    switch (s->finish) {
    case HEARTH_CPL_FINISH_LENGTH: return "max_tokens";
    case HEARTH_CPL_FINISH_TOOL_CALLS: return "tool_use";
    default: return s->stop_sequence ? "stop_sequence" : "end_turn";
    }
}

static json_t *usage(const hearth_cpl_summary *s) {
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", s->prompt_tokens - s->cached_tokens,
                     "cache_creation_input_tokens", 0, "cache_read_input_tokens", s->cached_tokens, "output_tokens",
                     s->completion_tokens);
}

static json_t *tool_use_block(const char *id, const char *name, const char *arguments) {
    json_t *in = arguments ? json_loads(arguments, 0, NULL) : NULL;
    if (!json_is_object(in)) {
        json_decref(in);
        in = json_object();
    }
    return json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", id, "name", name, "input", in);
}

static json_t *full(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    json_t *content = json_array();
    if (j->reasoning.n)
        json_array_append_new(content, json_pack("{s:s,s:s%,s:s}", "type", "thinking", "thinking", j->reasoning.p,
                                                 j->reasoning.n, "signature", ""));
    if (j->content.n)
        json_array_append_new(content, json_pack("{s:s,s:s%}", "type", "text", "text", j->content.p, j->content.n));
    size_t i;
    json_t *c;
    json_array_foreach(j->tool_calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        json_array_append_new(content, tool_use_block(json_string_value(json_object_get(c, "id")),
                                                      json_string_value(json_object_get(fn, "name")),
                                                      json_string_value(json_object_get(fn, "arguments"))));
    }
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o}", "id", j->id, "type", "message", "role", "assistant", "model",
                     api_job_model(j), "content", content, "stop_reason", stop_reason(s), "stop_sequence",
                     s->stop_sequence ? json_string(s->stop_sequence) : json_null(), "usage", usage(s));
}

/* ---- stream ---- */

static void put(api_job *j, const char *event, json_t *v) {
    if (v) api_sse_put(&j->out, event, v);
    json_decref(v);
}

static void block_close(api_job *j) {
    if (j->blk_kind < 0) return;
    put(j, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", j->n_blk));
    j->n_blk++;
    j->blk_kind = -1;
}

static void block_open(api_job *j, int kind, json_t *block) {
    block_close(j);
    put(j, "content_block_start",
        json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", j->n_blk, "content_block", block));
    j->blk_kind = kind;
}

static void delta(api_job *j, json_t *d) {
    put(j, "content_block_delta",
        json_pack("{s:s,s:i,s:o}", "type", "content_block_delta", "index", j->n_blk, "delta", d));
}

static void on_stream_event(void *user, const hearth_cpl_event *ev) {
    api_job *j = user;
    switch (ev->kind) {
    case HEARTH_CPL_CONTENT:
        if (j->blk_kind != HEARTH_CPL_CONTENT)
            block_open(j, HEARTH_CPL_CONTENT, json_pack("{s:s,s:s}", "type", "text", "text", ""));
        delta(j, json_pack("{s:s,s:s%}", "type", "text_delta", "text", ev->text, ev->len));
        break;
    case HEARTH_CPL_REASONING:
        if (j->blk_kind != HEARTH_CPL_REASONING)
            block_open(j, HEARTH_CPL_REASONING,
                       json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", ""));
        delta(j, json_pack("{s:s,s:s%}", "type", "thinking_delta", "thinking", ev->text, ev->len));
        break;
    case HEARTH_CPL_TOOL_CALL:
        block_open(j, HEARTH_CPL_TOOL_CALL,
                   json_pack("{s:s,s:s,s:s,s:{}}", "type", "tool_use", "id", ev->id, "name", ev->name, "input"));
        delta(j, json_pack("{s:s,s:s}", "type", "input_json_delta", "partial_json", ev->arguments));
        block_close(j);
        break;
    }
}

static void stream_end(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    block_close(j);
    if (s->finish <= HEARTH_CPL_FINISH_TOOL_CALLS) {
        put(j, "message_delta",
            json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason", stop_reason(s),
                      "stop_sequence", s->stop_sequence ? json_string(s->stop_sequence) : json_null(), "usage",
                      usage(s)));
        put(j, "message_stop", json_pack("{s:s}", "type", "message_stop"));
        return;
    }
    int shutting = atomic_load(&j->a->state) == API_SHUTTING;
    const char *msg = s->finish == HEARTH_CPL_FINISH_ERROR ? s->error
                      : shutting ? "the server is shutting down; the generation was cancelled"
                                 : s->error;
    put(j, "error", json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type",
                              s->finish == HEARTH_CPL_FINISH_ERROR ? "api_error" : "overloaded_error", "message", msg));
}

/* message_start goes out before any token. */
static void stream_start(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    put(j, "message_start",
        json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:{s:i,s:i}}}", "type", "message_start", "message", "id",
                  j->id, "type", "message", "role", "assistant", "model", api_job_model(j), "content", "stop_reason",
                  "stop_sequence", "usage", "input_tokens", s->prompt_tokens, "output_tokens", 0));
}

static int parse(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e) {
    return api_parse_messages(b, 0, r, o, e);
}

const api_proto API_MESSAGES = {
    .id_prefix = "msg_",
    .parse = parse,
    .ev_start = stream_start,
    .ev_event = on_stream_event,
    .ev_end = stream_end,
    .ev_idle = "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    .full = full,
};

/* ---- count_tokens, errors ---- */

void api_count_tokens(hearth_api *a, const json_t *body, hearth_http_response *r) {
    hearth_cpl_request req;
    hearth_cpl_request_init(&req);
    api_req_opts o = {0};
    hearth_cpl_error e = {0};
    int32_t *ids = NULL;
    int n = 0;
    if (api_parse_messages(body, 1, &req, &o, &e) || hearth_cpl_tokenize(a->cpl, &req, &ids, &n, &e) != HEARTH_OK)
        api_cpl_error(a, r, &e);
    else
        api_json(r, 200, json_pack("{s:i}", "input_tokens", n));
    free(ids);
    hearth_cpl_request_deinit(&req);
}

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

void api_anthropic_error(hearth_http_response *r) {
    if (r->status < 400 || !r->body) return;
    json_t *doc = json_loadb(r->body, r->len, 0, NULL);
    const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
    json_t *v = json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", error_type(r->status), "message",
                          msg ? msg : "error");
    json_decref(doc);
    if (!v) return;
    int status = r->status;
    free(r->body);
    api_json(r, status, v);
}
