/* openai_chat.c - POST /v1/chat/completions: events and summary as a
 * chat.completion document or as chat.completion.chunk events. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

static json_t *lp_entry(api_job *j, int32_t id, float logprob) {
    json_t *tok = api_token_string(j, id);
    return json_pack("{s:o,s:f,s:o}", "token", tok, "logprob", (double)logprob, "bytes", api_token_bytes(tok));
}

/* {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]} for records [from, to) */
static json_t *logprobs_json(api_job *j, int from, int to) {
    int n;
    const hearth_logprobs *lp = hearth_cpl_logprobs(j->q, &n);
    json_t *content = json_array();
    for (int i = from; i < to && i < n; i++) {
        json_t *e = lp_entry(j, lp[i].chosen.id, lp[i].chosen.logprob);
        json_t *top = json_array();
        for (int k = 0; k < lp[i].n_top && k < j->o.top_logprobs; k++)
            json_array_append_new(top, lp_entry(j, lp[i].top[k].id, lp[i].top[k].logprob));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    return json_pack("{s:o,s:n}", "content", content, "refusal");
}

static json_t *chunk_with(api_job *j, json_t *delta) {
    json_t *c = api_chunk_base(j);
    json_object_set_new(c, "choices", json_pack("[{s:i,s:o,s:n,s:n}]", "index", 0, "delta", delta, "logprobs",
                                                "finish_reason"));
    return c;
}

static json_t *first_chunk(api_job *j) { return chunk_with(j, json_pack("{s:s,s:s}", "role", "assistant", "content", "")); }

static json_t *empty_chunk(api_job *j) { return chunk_with(j, json_object()); }

static void chunk_event(api_job *j, const hearth_cpl_event *ev) {
    json_t *delta = NULL;
    switch (ev->kind) {
    case HEARTH_CPL_CONTENT: delta = json_pack("{s:s%}", "content", ev->text, ev->len); break;
    case HEARTH_CPL_REASONING: delta = json_pack("{s:s%}", "reasoning_content", ev->text, ev->len); break;
    case HEARTH_CPL_TOOL_CALL:
        delta = json_pack("{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]}", "tool_calls", "index", ev->index, "id", ev->id, "type",
                          "function", "function", "name", ev->name, "arguments", ev->arguments);
        break;
    }
    if (delta) json_array_append_new(j->chunks, chunk_with(j, delta));
}

static void chunk_logprobs(api_job *j, json_t *c, int from, int to) {
    json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "logprobs", logprobs_json(j, from, to));
}

static void chunk_finish(api_job *j, json_t *c, const char *finish) {
    json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "finish_reason", json_string(finish));
}

static json_t *full(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    int has_calls = j->tool_calls && json_array_size(j->tool_calls);
    /* With tool calls and no text, content is null, as OpenAI sends it. */
    json_object_set_new(msg, "content",
                        has_calls && j->content.n == 0 ? json_null() : json_stringn(j->content.p ? j->content.p : "", j->content.n));
    if (j->reasoning.n) json_object_set_new(msg, "reasoning_content", json_stringn(j->reasoning.p, j->reasoning.n));
    if (has_calls) json_object_set(msg, "tool_calls", j->tool_calls);
    int n;
    hearth_cpl_logprobs(j->q, &n);
    json_t *choice = json_pack("{s:i,s:o,s:o,s:s}", "index", 0, "message", msg, "logprobs",
                               j->o.logprobs ? logprobs_json(j, 0, n) : json_null(), "finish_reason",
                               hearth_cpl_finish_name(s->finish));
    json_t *doc = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", j->id, "object", "chat.completion", "created",
                            (json_int_t)j->created, "model", api_job_model(j), "choices", choice, "usage",
                            api_usage(s));
    json_t *plp = api_prompt_logprobs(j);
    if (plp) json_object_set_new(doc, "prompt_logprobs", plp); /* vLLM's place: the response */
    return doc;
}

const api_proto API_CHAT = {
    .chunk_object = "chat.completion.chunk",
    .id_prefix = "chatcmpl-",
    .parse = api_parse_chat,
    .chunk_event = chunk_event,
    .first_chunk = first_chunk,
    .chunk_logprobs = chunk_logprobs,
    .empty_chunk = empty_chunk,
    .chunk_finish = chunk_finish,
    .full = full,
};
