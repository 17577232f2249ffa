/* admin.c - GET /health, /v1/models, /stats (JSON) and /metrics (Prometheus
 * text format 0.0.4). Counters come from the api (requests by outcome and by
 * status, tokens, latency sums) and from the engine (queue, KV, prefix cache). */
#include "api/api_internal.h"

#include "core/clock.h"
#include "core/log.h"
#include "hearth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void api_health(hearth_api *a, hearth_http_response *r) {
    int state = atomic_load(&a->state);
    if (state == API_READY) {
        api_json(r, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    api_error(r, 503, "unavailable_error", NULL, state == API_LOADING ? "model_loading" : "server_shutting_down",
              state == API_LOADING ? "the model is loading" : "the server is shutting down");
}

/* GET /props, llama-server's: what its web UI and clients read before they
 * talk to it (the context, the slots, the chat template, the defaults). */
void api_props(hearth_api *a, hearth_http_response *r) {
    if (atomic_load(&a->state) != API_READY) {
        api_health(a, r); /* loading or stopping: the same 503 */
        return;
    }
    const hearth_cpl_params *d = hearth_cpl_defaults(a->cpl);
    const char *tmpl = hearth_cpl_chat_template(a->cpl);
    json_t *params = json_pack("{s:i,s:f,s:i,s:f,s:f,s:f,s:f,s:f,s:i,s:f,s:f,s:f,s:f,s:f,s:i,s:i,s:f,s:f,s:i,s:f,s:f}",
                               "n_predict", d->has_max_tokens ? d->max_tokens : -1, "temperature", d->temperature,
                               "top_k", d->top_k, "top_p", d->top_p, "min_p", d->min_p, "typical_p", d->typical_p,
                               "top_n_sigma", d->top_n_sigma > 0 ? d->top_n_sigma : -1.0, "repeat_penalty",
                               d->repetition_penalty, "repeat_last_n", d->has_repeat_last_n ? d->repeat_last_n : -1,
                               "presence_penalty", d->presence_penalty, "frequency_penalty", d->frequency_penalty,
                               "xtc_probability", d->xtc_probability, "xtc_threshold", d->xtc_threshold,
                               "dry_multiplier", d->dry_multiplier, "dry_allowed_length", d->dry_allowed_length,
                               "dry_penalty_last_n", d->dry_penalty_last_n, "dry_base", d->dry_base,
                               "dynatemp_range", d->dynatemp_range, "mirostat", d->mirostat, "mirostat_tau",
                               d->mirostat_tau, "mirostat_eta", d->mirostat_eta);
    int ctx = hearth_cpl_ctx_len(a->cpl);
    const char *bos = hearth_cpl_bos_text(a->cpl), *eos = hearth_cpl_eos_text(a->cpl);
    api_json(r, 200, json_pack("{s:{s:i,s:o},s:i,s:s,s:s,s:s,s:s,s:s,s:{s:b,s:b},s:s,s:b}",
                               "default_generation_settings", "n_ctx", ctx, "params", params, "total_slots",
                               hearth_engine_n_slots(a->engine), "model_alias", a->model_id, "model_path", a->model_id,
                               "chat_template", tmpl ? tmpl : "", "bos_token", bos ? bos : "", "eos_token",
                               eos ? eos : "", "modalities", "vision", 0, "audio", 0, "build_info", hearth_version(),
                               "is_sleeping", 0));
}

/* A model in OpenAI's shape and Anthropic's at once (their fields do not
 * collide), so that both SDKs list and retrieve it, with vLLM's root and
 * max_model_len. A LoRA adapter is listed as vLLM lists one: its name, and the
 * model it adapts as "parent". */
static json_t *model_obj(hearth_api *a, const char *id) {
    time_t created = time(NULL) - (time_t)(hearth_time_now() - a->t_start);
    struct tm tm;
    char at[32];
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&created, &tm));
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "id", id, "object", "model", "created", (json_int_t)created,
                          "owned_by", "hearth", "type", "model", "display_name", id, "created_at", at);
    if (id != a->model_id) json_object_set_new(m, "parent", json_string(a->model_id));
    /* vLLM's: the context a request may fill (clients size their prompts by it) and what the name serves */
    json_object_set_new(m, "root", json_string(id));
    if (a->cpl) json_object_set_new(m, "max_model_len", json_integer(hearth_cpl_ctx_len(a->cpl)));
    return m;
}

void api_models(hearth_api *a, const char *path, hearth_http_response *r) {
    if (atomic_load(&a->state) == API_LOADING) { /* no adapters' table yet: the 503 /health gives */
        api_health(a, r);
        return;
    }
    hearth_adapter_name ad[HEARTH_MAX_LORA];
    const int n = hearth_adapter_names_list(hearth_cpl_adapters(a->cpl), ad, HEARTH_MAX_LORA);
    if (!strcmp(path, "/v1/models")) {
        json_t *data = json_array();
        json_array_append_new(data, model_obj(a, a->model_id));
        for (int i = 0; i < n; i++) json_array_append_new(data, model_obj(a, ad[i].name));
        const char *last = n ? ad[n - 1].name : a->model_id;
        api_json(r, 200, json_pack("{s:s,s:o,s:b,s:s,s:s}", "object", "list", "data", data, "has_more", 0,
                                   "first_id", a->model_id, "last_id", last));
        return;
    }
    const char *id = path + strlen("/v1/models/");
    if (!strcmp(id, a->model_id)) {
        api_json(r, 200, model_obj(a, a->model_id));
        return;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(id, ad[i].name)) {
            api_json(r, 200, model_obj(a, ad[i].name));
            return;
        }
    api_error(r, 404, "invalid_request_error", "model", "model_not_found",
              "The model '%s' does not exist; this server serves '%s'%s.", id, a->model_id,
              n ? " and its LoRA adapters" : "");
}

/* A consistent copy of the counters. */
typedef struct {
    long by_code[API_N_CODES + 1];
    long ok, canceled, client_gone, error, rejected, stop, length;
    long prompt, completion, cached, ttft_n;
    double ttft_sum, gen_s_sum;
    hearth_hist ttft, itl, e2e, queue;
    int active, state;
    hearth_engine_stats es;
    int has_engine;
} snapshot;

static void snap(hearth_api *a, snapshot *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&a->mu);
    memcpy(s->by_code, a->by_code, sizeof s->by_code);
    s->ok = a->n_ok;
    s->canceled = a->n_canceled;
    s->client_gone = a->n_client_gone;
    s->error = a->n_error;
    s->rejected = a->n_rejected;
    s->prompt = a->prompt_tokens;
    s->completion = a->completion_tokens;
    s->cached = a->cached_tokens;
    s->ttft_sum = a->ttft_sum;
    s->ttft_n = a->ttft_n;
    s->gen_s_sum = a->gen_s_sum;
    s->stop = a->n_stop;
    s->length = a->n_length;
    s->ttft = a->h_ttft, s->itl = a->h_itl, s->e2e = a->h_e2e, s->queue = a->h_queue;
    s->active = a->n_jobs;
    hearth_engine *e = a->engine;
    pthread_mutex_unlock(&a->mu);
    s->state = atomic_load(&a->state);
    if (e) {
        hearth_engine_stats_get(e, &s->es);
        s->has_engine = 1;
    }
}

static const char *state_name(int st) {
    return st == API_READY ? "ready" : st == API_LOADING ? "loading" : "shutting_down";
}

void api_cache_flush(hearth_api *a, hearth_http_response *r) {
    pthread_mutex_lock(&a->mu);
    hearth_engine *e = a->engine;
    pthread_mutex_unlock(&a->mu);
    hearth_err err = {0};
    int n = 0;
    hearth_status st = e ? hearth_engine_flush_cache(e, &n, &err) : HEARTH_EBUSY;
    if (st == HEARTH_EINVAL) {
        api_error(r, 400, "invalid_request_error", NULL, "no_disk_cache", "%s", err.msg);
    } else if (st != HEARTH_OK) {
        api_error(r, 500, "server_error", NULL, "cache_flush_failed", "the flush failed: %s",
                  e ? err.msg : "no engine");
    } else {
        hearth_engine_stats es;
        hearth_engine_stats_get(e, &es);
        api_json(r, 200,
                 json_pack("{s:s,s:i,s:I,s:I}", "object", "cache.flush", "blocks_written", n, "blocks_on_disk",
                           (json_int_t)es.disk.files, "bytes_on_disk", (json_int_t)es.disk.bytes));
    }
}

/* POST /pause?mode=keep and POST /resume, vLLM's: while paused no token is
 * computed; requests in flight are kept (frozen) and go on after the resume,
 * new ones are accepted and wait. vLLM's other modes, abort (cancel what is in
 * flight) and wait (let it finish first), are refused by name. */
void api_pause(hearth_api *a, const hearth_http_request *rq, hearth_http_response *r, int pause) {
    const char *mode = pause ? hearth_http_query_arg(rq->conn, "mode") : NULL;
    if (pause && mode && strcmp(mode, "keep")) {
        api_error(r, 400, "invalid_request_error", "mode", "unsupported_mode",
                  "pause mode '%s' is not supported: hearth pauses with mode=keep (requests in flight are kept and "
                  "go on after POST /resume)",
                  mode);
        return;
    }
    pthread_mutex_lock(&a->mu);
    hearth_engine *e = a->engine;
    pthread_mutex_unlock(&a->mu);
    if (!e) {
        api_error(r, 503, "unavailable_error", NULL, "server_shutting_down", "the server is shutting down");
        return;
    }
    hearth_engine_pause(e, pause);
    hearth_log_info("generation %s", pause ? "paused (mode=keep)" : "resumed");
    api_json(r, 200, json_pack("{s:s}", "status", pause ? "paused" : "resumed"));
}

/* GET /slots, llama-server's monitoring view: each slot, whether it is
 * processing, and its sequence's progress (next_token: n_decoded,
 * n_remain); with ?fail_on_no_slot=1 a 503 when none is free. hearth adds
 * the prompt's size and how much of it is computed. */
void api_slots(hearth_api *a, const hearth_http_request *rq, hearth_http_response *r) {
    if (atomic_load(&a->state) != API_READY) {
        api_health(a, r); /* loading or stopping: the same 503 */
        return;
    }
    hearth_engine *e = a->engine;
    int n = hearth_engine_n_slots(e), n_free = 0;
    hearth_slot_info *sl = calloc((size_t)n, sizeof *sl);
    json_t *arr = json_array();
    if (!sl || !arr) {
        free(sl);
        json_decref(arr);
        api_error(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    hearth_engine_slots(e, sl, n);
    const int ctx = hearth_cpl_ctx_len(a->cpl);
    for (int i = 0; i < n; i++) {
        n_free += !sl[i].busy;
        json_t *next = json_pack("{s:b,s:b,s:i,s:i}", "has_next_token", sl[i].busy, "has_new_line", 0, "n_remain",
                                 sl[i].busy ? sl[i].max_new - sl[i].n_gen : -1, "n_decoded", sl[i].n_gen);
        json_array_append_new(arr, json_pack("{s:i,s:I,s:i,s:b,s:b,s:i,s:i,s:[o]}", "id", i, "id_task",
                                             (json_int_t)(sl[i].busy ? sl[i].task : -1), "n_ctx", ctx, "speculative",
                                             hearth_engine_spec_tokens(e) > 0, "is_processing", sl[i].busy,
                                             "n_prompt_tokens", sl[i].n_prompt, "n_prompt_tokens_processed",
                                             sl[i].n_computed < sl[i].n_prompt ? sl[i].n_computed : sl[i].n_prompt,
                                             "next_token", next));
    }
    free(sl);
    const char *fail = hearth_http_query_arg(rq->conn, "fail_on_no_slot");
    if (fail && strcmp(fail, "0") && strcmp(fail, "false") && n_free == 0) {
        json_decref(arr);
        api_error(r, 503, "unavailable_error", NULL, "no_slot_available", "no slot is free");
        return;
    }
    api_json(r, 200, arr);
}

/* GET /is_paused, vLLM's. */
void api_is_paused(hearth_api *a, hearth_http_response *r) {
    snapshot s;
    snap(a, &s);
    api_json(r, 200, json_pack("{s:b}", "is_paused", s.has_engine && s.es.paused));
}

void api_stats(hearth_api *a, hearth_http_response *r) {
    snapshot s;
    snap(a, &s);
    json_t *codes = json_object();
    for (int i = 0; i < API_N_CODES && API_CODES[i]; i++) {
        char k[8];
        snprintf(k, sizeof k, "%d", API_CODES[i]);
        json_object_set_new(codes, k, json_integer(s.by_code[i]));
    }
    json_object_set_new(codes, "other", json_integer(s.by_code[API_N_CODES]));
    json_t *doc = json_pack(
        "{s:s,s:s,s:f,s:{s:I,s:I,s:I,s:I,s:I,s:i,s:o},s:{s:I,s:I,s:I},s:{s:i,s:i},s:{s:I,s:I},s:{s:f}}", "model",
        a->model_id, "state", state_name(s.state), "uptime_s", hearth_time_now() - a->t_start, "requests", "ok",
        (json_int_t)s.ok, "cancelled", (json_int_t)s.canceled, "client_disconnected", (json_int_t)s.client_gone,
        "error", (json_int_t)s.error, "rejected", (json_int_t)s.rejected, "active", s.active, "by_status", codes,
        "tokens", "prompt", (json_int_t)s.prompt, "completion", (json_int_t)s.completion, "cached",
        (json_int_t)s.cached, "queue", "running", s.es.running, "waiting", s.es.waiting, "cache", "prefix_lookups",
        (json_int_t)s.es.prefix_lookups, "prefix_hits", (json_int_t)s.es.prefix_hits, "latency", "ttft_avg_s",
        s.ttft_n ? s.ttft_sum / (double)s.ttft_n : 0.0);
    if (s.has_engine) {
        json_t *eng = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:i}", "requests_ok",
                                (json_int_t)s.es.requests_ok, "requests_cancelled", (json_int_t)s.es.requests_canceled,
                                "requests_error", (json_int_t)s.es.requests_error, "requests_rejected",
                                (json_int_t)s.es.requests_rejected, "tokens_out", (json_int_t)s.es.tokens_out, "steps",
                                (json_int_t)s.es.steps, "preemptions", (json_int_t)s.es.preemptions, "kv_blocks_total",
                                s.es.kv_blocks_total, "kv_blocks_free", s.es.kv_blocks_free, "kv_blocks_cached",
                                s.es.kv_blocks_cached);
        json_object_set_new(eng, "kv_blocks_used",
                            json_integer(s.es.kv_blocks_total - s.es.kv_blocks_free - s.es.kv_blocks_cached));
        json_object_set_new(eng, "prefix_hit_rate",
                            json_real(s.es.prefix_lookups ? (double)s.es.prefix_hits / s.es.prefix_lookups : 0.0));
        json_object_set_new(eng, "paused", json_boolean(s.es.paused));
        json_object_set_new(eng, "rows_a_step", json_real(s.es.steps ? (double)s.es.step_rows / s.es.steps : 0.0));
        json_object_set_new(eng, "steps_ahead", json_integer(s.es.steps_ahead));
        json_object_set_new(eng, "spec_draft_tokens", json_integer(s.es.spec_drafted));
        json_object_set_new(eng, "spec_accepted_tokens", json_integer(s.es.spec_accepted));
        json_object_set_new(eng, "spec_acceptance_rate",
                            json_real(s.es.spec_drafted ? (double)s.es.spec_accepted / s.es.spec_drafted : 0.0));
        if (s.es.has_disk)
            json_object_set_new(
                eng, "kv_disk",
                json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "blocks", (json_int_t)s.es.disk.files, "bytes",
                          (json_int_t)s.es.disk.bytes, "hits", (json_int_t)s.es.disk.hits, "misses",
                          (json_int_t)s.es.disk.misses, "writes", (json_int_t)s.es.disk.writes, "removed",
                          (json_int_t)s.es.disk.removed, "corrupt", (json_int_t)s.es.disk.corrupt,
                          "skipped_writes", (json_int_t)s.es.disk.skipped));
        json_object_set_new(doc, "engine", eng);
    }
    api_json(r, 200, doc);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(char *out, size_t cap, const char *v) {
    size_t o = 0;
    for (; *v && o + 3 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n') out[o++] = '\\';
        out[o++] = *v == '\n' ? 'n' : *v;
    }
    out[o] = 0;
}

/* A bound as prometheus_client writes it (1.0, 0.25, 2560.0). */
static void bound(char *out, size_t cap, double v) {
    snprintf(out, cap, v == (double)(long)v ? "%.1f" : "%g", v);
}

static void hist_lines(api_buf *b, const char *name, const char *help, const char *lab, const hearth_hist *h) {
    char line[512], le[32];
    snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    api_buf_puts(b, line);
    long cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        bound(le, sizeof le, h->le[i]);
        snprintf(line, sizeof line, "%s_bucket{%s,le=\"%s\"} %ld\n", name, lab, le, cum);
        api_buf_puts(b, line);
    }
    snprintf(line, sizeof line, "%s_bucket{%s,le=\"+Inf\"} %ld\n%s_sum{%s} %.6f\n%s_count{%s} %ld\n", name, lab,
             h->count, name, lab, h->sum, name, lab, h->count);
    api_buf_puts(b, line);
}

/* The same state under vLLM's names (its V1 engine's), labelled with the model's name, so that dashboards and
 * alerts written for vLLM read hearth unchanged. Prefix-cache queries and hits count tokens, as vLLM's do. */
static void vllm_metrics(api_buf *b, const hearth_api *a, const snapshot *s) {
    char lab[600], v[520], line[1024];
    label_value(v, sizeof v, a->model_id);
    snprintf(lab, sizeof lab, "model_name=\"%s\"", v);
    const int used = s->es.kv_blocks_total - s->es.kv_blocks_free - s->es.kv_blocks_cached;
    const struct {
        const char *name, *type, *help;
        double value;
    } one[] = {
        {"vllm:num_requests_running", "gauge", "Requests in the running batch.", s->es.running},
        {"vllm:num_requests_waiting", "gauge", "Requests waiting for a slot.", s->es.waiting},
        {"vllm:kv_cache_usage_perc", "gauge",
         "KV-cache usage (1 = full); blocks only the prefix cache holds count free.",
         s->es.kv_blocks_total ? (double)used / s->es.kv_blocks_total : 0.0},
        {"vllm:num_preemptions_total", "counter", "Preemptions.", (double)s->es.preemptions},
        {"vllm:prompt_tokens_total", "counter", "Prompt tokens of finished requests.", (double)s->prompt},
        {"vllm:generation_tokens_total", "counter", "Generated tokens of finished requests.", (double)s->completion},
        {"vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         (double)s->prompt},
        {"vllm:prefix_cache_hits_total", "counter", "Prompt tokens the prefix cache served.", (double)s->cached},
    };
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %.6g\n", one[i].name, one[i].help, one[i].name,
                 one[i].type, one[i].name, lab, one[i].value);
        api_buf_puts(b, line);
    }
    snprintf(line, sizeof line,
             "# HELP vllm:request_success_total Finished requests by reason.\n"
             "# TYPE vllm:request_success_total counter\n"
             "vllm:request_success_total{%s,finished_reason=\"stop\"} %ld\n"
             "vllm:request_success_total{%s,finished_reason=\"length\"} %ld\n"
             "vllm:request_success_total{%s,finished_reason=\"abort\"} %ld\n",
             lab, s->stop, lab, s->length, lab, s->canceled);
    api_buf_puts(b, line);
    hist_lines(b, "vllm:time_to_first_token_seconds", "Time to first token.", lab, &s->ttft);
    hist_lines(b, "vllm:inter_token_latency_seconds", "Gaps between two tokens of a request.", lab, &s->itl);
    hist_lines(b, "vllm:e2e_request_latency_seconds", "Request latency, start to end.", lab, &s->e2e);
    hist_lines(b, "vllm:request_queue_time_seconds", "Time a request waited for a slot.", lab, &s->queue);
}

void api_metrics(hearth_api *a, hearth_http_response *r) {
    snapshot s;
    snap(a, &s);
    api_buf b = {0};
    char line[256];
#define P(...) (snprintf(line, sizeof line, __VA_ARGS__), api_buf_puts(&b, line))
    P("# HELP hearth_requests_total Completion requests by outcome.\n# TYPE hearth_requests_total counter\n");
    P("hearth_requests_total{outcome=\"ok\"} %ld\n", s.ok);
    P("hearth_requests_total{outcome=\"cancelled\"} %ld\n", s.canceled);
    P("hearth_requests_total{outcome=\"error\"} %ld\n", s.error);
    P("hearth_requests_total{outcome=\"rejected\"} %ld\n", s.rejected);
    P("# HELP hearth_client_disconnects_total Generations cancelled because the client left.\n"
      "# TYPE hearth_client_disconnects_total counter\nhearth_client_disconnects_total %ld\n",
      s.client_gone);
    P("# HELP hearth_http_responses_total HTTP responses by status code.\n# TYPE hearth_http_responses_total counter\n");
    for (int i = 0; i < API_N_CODES && API_CODES[i]; i++)
        P("hearth_http_responses_total{code=\"%d\"} %ld\n", API_CODES[i], s.by_code[i]);
    P("hearth_http_responses_total{code=\"other\"} %ld\n", s.by_code[API_N_CODES]);
    P("# HELP hearth_prompt_tokens_total Prompt tokens of finished requests.\n"
      "# TYPE hearth_prompt_tokens_total counter\nhearth_prompt_tokens_total %ld\n",
      s.prompt);
    P("# HELP hearth_completion_tokens_total Generated tokens of finished requests.\n"
      "# TYPE hearth_completion_tokens_total counter\nhearth_completion_tokens_total %ld\n",
      s.completion);
    P("# HELP hearth_cached_tokens_total Prompt tokens served from the prefix cache.\n"
      "# TYPE hearth_cached_tokens_total counter\nhearth_cached_tokens_total %ld\n",
      s.cached);
    P("# HELP hearth_time_to_first_token_seconds Time from request start to the first token.\n"
      "# TYPE hearth_time_to_first_token_seconds summary\n"
      "hearth_time_to_first_token_seconds_sum %.6f\nhearth_time_to_first_token_seconds_count %ld\n",
      s.ttft_sum, s.ttft_n);
    P("# HELP hearth_requests_active Completions running now.\n# TYPE hearth_requests_active gauge\n"
      "hearth_requests_active %d\n",
      s.active);
    P("# HELP hearth_queue_running Sequences in the running batch.\n# TYPE hearth_queue_running gauge\n"
      "hearth_queue_running %d\n",
      s.es.running);
    P("# HELP hearth_paused 1 while generation is paused (POST /pause).\n# TYPE hearth_paused gauge\n"
      "hearth_paused %d\n",
      s.es.paused);
    P("# HELP hearth_queue_waiting Sequences waiting for a slot.\n# TYPE hearth_queue_waiting gauge\n"
      "hearth_queue_waiting %d\n",
      s.es.waiting);
    P("# HELP hearth_kv_blocks_free Free KV cache blocks.\n# TYPE hearth_kv_blocks_free gauge\n"
      "hearth_kv_blocks_free %d\n",
      s.es.kv_blocks_free);
    P("# HELP hearth_kv_blocks_total KV cache blocks.\n# TYPE hearth_kv_blocks_total gauge\n"
      "hearth_kv_blocks_total %d\n",
      s.es.kv_blocks_total);
    P("# HELP hearth_kv_blocks_cached KV blocks held only by the prefix cache (evictable).\n"
      "# TYPE hearth_kv_blocks_cached gauge\nhearth_kv_blocks_cached %d\n",
      s.es.kv_blocks_cached);
    P("# HELP hearth_kv_blocks_used KV blocks held by running sequences.\n"
      "# TYPE hearth_kv_blocks_used gauge\nhearth_kv_blocks_used %d\n",
      s.es.kv_blocks_total - s.es.kv_blocks_free - s.es.kv_blocks_cached);
    P("# HELP hearth_prefix_cache_lookups_total Prefix cache lookups.\n"
      "# TYPE hearth_prefix_cache_lookups_total counter\nhearth_prefix_cache_lookups_total %ld\n",
      s.es.prefix_lookups);
    P("# HELP hearth_prefix_cache_hits_total Prefix cache hits.\n# TYPE hearth_prefix_cache_hits_total counter\n"
      "hearth_prefix_cache_hits_total %ld\n",
      s.es.prefix_hits);
    if (s.es.has_disk) {
        P("# HELP hearth_kv_disk_blocks KV blocks in the prefix cache's disk tier.\n"
          "# TYPE hearth_kv_disk_blocks gauge\nhearth_kv_disk_blocks %ld\n",
          s.es.disk.files);
        P("# HELP hearth_kv_disk_bytes Bytes of the disk tier's files.\n"
          "# TYPE hearth_kv_disk_bytes gauge\nhearth_kv_disk_bytes %llu\n",
          (unsigned long long)s.es.disk.bytes);
        P("# HELP hearth_kv_disk_hits_total Blocks read back from the disk tier.\n"
          "# TYPE hearth_kv_disk_hits_total counter\nhearth_kv_disk_hits_total %ld\n",
          s.es.disk.hits);
        P("# HELP hearth_kv_disk_writes_total Blocks written to the disk tier.\n"
          "# TYPE hearth_kv_disk_writes_total counter\nhearth_kv_disk_writes_total %ld\n",
          s.es.disk.writes);
        P("# HELP hearth_kv_disk_skipped_writes_total Evicted blocks not written: over --cache-write-rate.\n"
          "# TYPE hearth_kv_disk_skipped_writes_total counter\nhearth_kv_disk_skipped_writes_total %ld\n",
          s.es.disk.skipped);
        P("# HELP hearth_kv_disk_corrupt_total Disk tier files found torn or corrupt (removed, never served).\n"
          "# TYPE hearth_kv_disk_corrupt_total counter\nhearth_kv_disk_corrupt_total %ld\n",
          s.es.disk.corrupt);
    }
    P("# HELP hearth_engine_steps_total Engine batch steps.\n# TYPE hearth_engine_steps_total counter\n"
      "hearth_engine_steps_total %ld\n",
      s.es.steps);
    P("# HELP hearth_engine_steps_ahead_total Of those, steps issued before the last one's tokens were read.\n"
      "# TYPE hearth_engine_steps_ahead_total counter\nhearth_engine_steps_ahead_total %ld\n",
      s.es.steps_ahead);
    P("# HELP hearth_spec_draft_tokens_total Tokens drafted by prompt lookup and checked (speculative decoding).\n"
      "# TYPE hearth_spec_draft_tokens_total counter\nhearth_spec_draft_tokens_total %ld\n",
      s.es.spec_drafted);
    P("# HELP hearth_spec_accepted_tokens_total Drafted tokens that the sampler chose.\n"
      "# TYPE hearth_spec_accepted_tokens_total counter\nhearth_spec_accepted_tokens_total %ld\n",
      s.es.spec_accepted);
    P("# HELP hearth_ready 1 when the model is loaded and serving.\n# TYPE hearth_ready gauge\nhearth_ready %d\n",
      s.state == API_READY);
    P("# HELP hearth_uptime_seconds Seconds since the server started.\n# TYPE hearth_uptime_seconds gauge\n"
      "hearth_uptime_seconds %.3f\n",
      hearth_time_now() - a->t_start);
#undef P
    vllm_metrics(&b, a, &s);
    if (b.oom) {
        api_buf_free(&b);
        api_error(r, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
        return;
    }
    r->status = 200;
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    r->body = b.p;
    r->len = b.n;
}
