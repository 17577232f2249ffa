/* openai_completions.c - POST /v1/completions (the legacy text API): events
 * and summary as a text_completion document or as streamed text_completion
 * chunks. Logprobs use the legacy shape (tokens, token_logprobs,
 * top_logprobs as {token: logprob}, text_offset). */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

/* Records [from, to); text offsets continue from *off. */
static json_t *logprobs_json(api_job *j, int from, int to, long *off) {
    int n;
    const hearth_logprobs *lp = hearth_cpl_logprobs(j->q, &n);
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = from; i < to && i < n; i++) {
        json_t *t = api_token_string(j, lp[i].chosen.id);
        json_array_append_new(offs, json_integer(*off));
        *off += (long)json_string_length(t);
        json_array_append_new(tokens, t);
        json_array_append_new(lps, json_real(lp[i].chosen.logprob));
        json_t *top = json_object();
        for (int k = 0; k < lp[i].n_top && k < j->o.top_logprobs; k++) {
            json_t *ts = api_token_string(j, lp[i].top[k].id);
            json_object_set_new(top, json_string_value(ts), json_real(lp[i].top[k].logprob));
            json_decref(ts);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

static json_t *chunk_text(api_job *j, const char *s, size_t n) {
    json_t *c = api_chunk_base(j);
    json_object_set_new(c, "choices", json_pack("[{s:s%,s:i,s:n,s:n}]", "text", s, n, "index", 0, "logprobs",
                                                "finish_reason"));
    return c;
}

static json_t *empty_chunk(api_job *j) { return chunk_text(j, "", 0); }

static void chunk_event(api_job *j, const hearth_cpl_event *ev) {
    if (ev->kind == HEARTH_CPL_CONTENT) json_array_append_new(j->chunks, chunk_text(j, ev->text, ev->len));
}

static void chunk_logprobs(api_job *j, json_t *c, int from, int to) {
    json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "logprobs",
                        logprobs_json(j, from, to, &j->text_off));
}

static void chunk_finish(api_job *j, json_t *c, const char *finish) {
    json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "finish_reason", json_string(finish));
}

static json_t *full(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    int n;
    hearth_cpl_logprobs(j->q, &n);
    long off = 0;
    json_t *choice = json_pack("{s:s%,s:i,s:o,s:s}", "text", j->content.p ? j->content.p : "", j->content.n, "index",
                               0, "logprobs", j->o.logprobs ? logprobs_json(j, 0, n, &off) : json_null(),
                               "finish_reason", hearth_cpl_finish_name(s->finish));
    return json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", j->id, "object", "text_completion", "created",
                     (json_int_t)j->created, "model", api_job_model(j), "choices", choice, "usage", api_usage(s));
}

const api_proto API_TEXT = {
    .chunk_object = "text_completion",
    .id_prefix = "cmpl-",
    .parse = api_parse_text,
    .chunk_event = chunk_event,
    .first_chunk = NULL,
    .chunk_logprobs = chunk_logprobs,
    .empty_chunk = empty_chunk,
    .chunk_finish = chunk_finish,
    .full = full,
};
