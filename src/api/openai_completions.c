/* openai_completions.c - POST /v1/completions (the legacy text API): events
 * and summary as a text_completion document or as streamed text_completion
 * chunks. Logprobs use the legacy shape (tokens, token_logprobs,
 * top_logprobs as {token: logprob}, text_offset). With echo the prompt
 * comes first, in the text and in the logprobs (its first token's null), as
 * OpenAI's and vLLM's do (what lm-evaluation-harness reads for loglikelihood):
 * streamed, as the first chunk once the prompt is computed. */
#include "api/api_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Records [from, to) of lp[n] appended to the four arrays; text offsets continue from *off. */
static void logprobs_put(api_job *j, const hearth_logprobs *lp, int n, int from, int to, long *off, json_t *tokens,
                         json_t *lps, json_t *tops, json_t *offs) {
    for (int i = from; i < to && i < n; i++) {
        json_t *t = api_token_string(j, lp[i].chosen.id);
        json_array_append_new(offs, json_integer(*off));
        *off += (long)json_string_length(t);
        json_array_append_new(tokens, t);
        if (isnan(lp[i].chosen.logprob)) { /* a prompt's first token: nothing before it to score it */
            json_array_append_new(lps, json_null());
            json_array_append_new(tops, json_null());
            continue;
        }
        json_array_append_new(lps, json_real(lp[i].chosen.logprob));
        json_t *top = json_object();
        for (int k = 0; k < lp[i].n_top && k < j->o.top_logprobs; k++) {
            json_t *ts = api_token_string(j, lp[i].top[k].id);
            json_object_set_new(top, json_string_value(ts), json_real(lp[i].top[k].logprob));
            json_decref(ts);
        }
        json_array_append_new(tops, top);
    }
}

/* The echoed prompt's records (when it has them) then the answer's [from, to). */
static json_t *logprobs_json(api_job *j, int echo, int from, int to, long *off) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    int n;
    const hearth_logprobs *lp;
    size_t len;
    if (echo && hearth_cpl_echo(j->q, &len, &lp, &n) && lp) logprobs_put(j, lp, n, 0, n, off, tokens, lps, tops, offs);
    lp = hearth_cpl_logprobs(j->q, &n);
    logprobs_put(j, lp, n, from, to, off, tokens, lps, tops, offs);
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
                        logprobs_json(j, 0, from, to, &j->text_off));
}

/* echo, streamed: the prompt's chunk once its records are in, or the completion is over (NULL before, or
 * without echo). */
static json_t *echo_chunk(api_job *j, int over) {
    size_t len;
    int n;
    const hearth_logprobs *lp;
    const char *text = hearth_cpl_echo(j->q, &len, &lp, &n);
    if (!text || (j->o.logprobs && !lp && !over)) return NULL;
    json_t *c = chunk_text(j, text, len);
    if (j->o.logprobs)
        json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "logprobs",
                            logprobs_json(j, 1, 0, 0, &j->text_off));
    return c;
}

static void chunk_finish(api_job *j, json_t *c, const char *finish) {
    json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "finish_reason", json_string(finish));
}

static json_t *full(api_job *j) {
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    int n;
    hearth_cpl_logprobs(j->q, &n);
    long off = 0;
    size_t elen;
    int m;
    const hearth_logprobs *elp;
    const char *echo = hearth_cpl_echo(j->q, &elen, &elp, &m);
    api_buf text = {0};
    if (echo) api_buf_put(&text, echo, elen);
    if (j->content.n) api_buf_put(&text, j->content.p, j->content.n);
    if (text.oom) {
        api_buf_free(&text);
        return NULL;
    }
    json_t *choice = json_pack("{s:s%,s:i,s:o,s:s}", "text", text.p ? text.p : "", text.n, "index", 0, "logprobs",
                               j->o.logprobs ? logprobs_json(j, 1, 0, n, &off) : json_null(), "finish_reason",
                               hearth_cpl_finish_name(s->finish));
    api_buf_free(&text);
    json_t *plp = api_prompt_logprobs(j);
    if (plp) json_object_set_new(choice, "prompt_logprobs", plp); /* vLLM's place: the choice */
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
    .echo_chunk = echo_chunk,
    .full = full,
};
