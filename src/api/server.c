/* server.c - routing, auth, server state, the running-request registry and
 * the job runner that every completion adapter uses (one JSON document, or
 * server-sent events pulled by net/ as the client reads). */
#include "api/api_internal.h"

#include "core/clock.h"
#include "core/log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const int API_CODES[API_N_CODES] = {200, 400, 401, 404, 405, 413, 429, 500, 503, 0, 0, 0};

/* ---- api_buf ---- */

void api_buf_put(api_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void api_buf_puts(api_buf *b, const char *s) { api_buf_put(b, s, strlen(s)); }

void api_buf_free(api_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- responses ---- */

void api_json(hearth_http_response *r, int status, json_t *v) {
    r->status = status;
    r->content_type = "application/json";
    r->body = v ? json_dumps(v, JSON_COMPACT) : NULL;
    r->len = r->body ? strlen(r->body) : 0;
    json_decref(v);
    if (!r->body) { /* out of memory while rendering */
        r->status = 500;
        r->content_type = "text/plain";
    }
}

void api_error(hearth_http_response *r, int status, const char *type, const char *param, const char *code,
               const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s,s:s,s:o,s:o}", "message", msg, "type", type, "param",
                          param && *param ? json_string(param) : json_null(), "code",
                          code && *code ? json_string(code) : json_null());
    if (!e) /* the message was not UTF-8 (it quotes the request): say so plainly */
        e = json_pack("{s:s,s:s,s:n,s:n}", "message", "invalid request (the error message is not valid UTF-8)",
                      "type", type, "param", "code");
    api_json(r, status, json_pack("{s:o}", "error", e));
    if (status == 429 || status == 503) {
        r->hdr_name[0] = "Retry-After";
        snprintf(r->hdr_value[0], sizeof r->hdr_value[0], "%d", status == 429 ? 1 : 5);
    }
}

void api_cpl_error(hearth_api *a, hearth_http_response *r, const hearth_cpl_error *e) {
    switch (e->status) {
    case HEARTH_EBUSY:
        if (atomic_load(&a->state) == API_SHUTTING)
            api_error(r, 503, "unavailable_error", NULL, "server_shutting_down", "%s", e->msg);
        else
            api_error(r, 429, "rate_limit_error", NULL, e->code[0] ? e->code : "queue_full", "%s", e->msg);
        break;
    case HEARTH_ENOMEM:
        api_error(r, 503, "unavailable_error", NULL, "out_of_memory", "%s", e->msg);
        break;
    case HEARTH_EIO:
    case HEARTH_EFORMAT:
        api_error(r, 500, "server_error", NULL, NULL, "%s", e->msg);
        break;
    case HEARTH_ENOTSUP:
        api_error(r, 400, "invalid_request_error", e->param, e->code[0] ? e->code : "unsupported_parameter", "%s",
                  e->msg);
        break;
    default: /* EINVAL, ERANGE, ENOENT: the request is at fault */
        api_error(r, 400, "invalid_request_error", e->param, e->code[0] ? e->code : NULL, "%s", e->msg);
        break;
    }
}

void api_count_status(hearth_api *a, int status) {
    pthread_mutex_lock(&a->mu);
    int i = 0;
    while (i < API_N_CODES && API_CODES[i] && API_CODES[i] != status) i++;
    if (i < API_N_CODES && API_CODES[i] == status) a->by_code[i]++;
    else a->by_code[API_N_CODES]++;
    if (status >= 400) a->n_rejected++;
    pthread_mutex_unlock(&a->mu);
}

/* ---- pieces the renderers share ---- */

json_t *api_usage(const hearth_cpl_summary *s) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", s->prompt_tokens, "completion_tokens",
                     s->completion_tokens, "total_tokens", s->prompt_tokens + s->completion_tokens,
                     "prompt_tokens_details", "cached_tokens", s->cached_tokens);
}

static void plp_put(api_job *j, json_t *d, int32_t id, float logprob, int rank) {
    char key[16];
    snprintf(key, sizeof key, "%d", (int)id);
    if (json_object_get(d, key)) return; /* the prompt token among its alternatives: its own record stands */
    json_object_set_new(d, key, json_pack("{s:f,s:i,s:o}", "logprob", (double)logprob, "rank", rank, "decoded_token",
                                          api_token_string(j, id)));
}

json_t *api_prompt_logprobs(api_job *j) {
    if (!j->o.prompt_logprobs) return NULL;
    int n;
    const hearth_logprobs *lp = hearth_cpl_prompt_logprobs(j->q, &n);
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        if (isnan(lp[i].chosen.logprob)) { /* the first token: nothing before it scores it */
            json_array_append_new(a, json_null());
            continue;
        }
        json_t *d = json_object();
        plp_put(j, d, lp[i].chosen.id, lp[i].chosen.logprob, lp[i].rank);
        for (int k = 0; k < lp[i].n_top && k < j->o.prompt_logprobs - 1; k++)
            plp_put(j, d, lp[i].top[k].id, lp[i].top[k].logprob, k + 1);
        json_array_append_new(a, d);
    }
    return a;
}

json_t *api_chunk_base(api_job *j) {
    return json_pack("{s:s,s:s,s:I,s:s}", "id", j->id, "object", j->proto->chunk_object, "created",
                     (json_int_t)j->created, "model", api_job_model(j));
}

json_t *api_token_string(api_job *j, int32_t id) {
    char buf[1024];
    size_t n = hearth_sink_token_text(hearth_cpl_ctx_tok(hearth_cpl_context(j->q)), id, buf, sizeof buf);
    json_t *s = json_stringn(buf, n);
    return s ? s : json_string("\xef\xbf\xbd"); /* a token that is part of a UTF-8 sequence */
}

json_t *api_token_bytes(json_t *token_string) {
    json_t *a = json_array();
    const unsigned char *s = (const unsigned char *)json_string_value(token_string);
    for (size_t i = 0; i < json_string_length(token_string); i++) json_array_append_new(a, json_integer(s[i]));
    return a;
}

void api_make_id(char *out, size_t cap, const char *prefix) {
    static atomic_ullong counter;
    static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = (uint64_t)(hearth_time_now() * 1e9) + atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull;
    size_t n = (size_t)snprintf(out, cap, "%s", prefix);
    for (int i = 0; i < 24 && n + 1 < cap; i++) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        out[n++] = ALNUM[z % (sizeof ALNUM - 1)];
    }
    out[n] = 0;
}

/* ---- jobs ---- */

int api_conn_gone(void *conn) { return hearth_http_conn_gone(conn); }
static int always_gone(void *unused) { return 1; }

static void job_register(api_job *j) {
    hearth_api *a = j->a;
    pthread_mutex_lock(&a->mu);
    j->next = a->jobs;
    if (a->jobs) a->jobs->prev = j;
    a->jobs = j;
    a->n_jobs++;
    pthread_mutex_unlock(&a->mu);
}

/* Count the outcome once, unregister, free. */
/* vLLM's bucket bounds (s) for its request histograms. */
static const double TTFT_LE[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                 1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double ITL_LE[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double REQ_LE[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
#define N_LE(x) ((int)(sizeof x / sizeof x[0]))

static void job_end(api_job *j) {
    hearth_api *a = j->a;
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    pthread_mutex_lock(&a->mu);
    if (j->prev) j->prev->next = j->next;
    else a->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    a->n_jobs--;
    switch (s->finish) {
    case HEARTH_CPL_FINISH_STOP:
    case HEARTH_CPL_FINISH_LENGTH:
    case HEARTH_CPL_FINISH_TOOL_CALLS:
        a->n_ok++;
        if (s->finish == HEARTH_CPL_FINISH_LENGTH) a->n_length++;
        else a->n_stop++;
        break;
    case HEARTH_CPL_FINISH_CANCELED:
        a->n_canceled++;
        if (s->client_gone) a->n_client_gone++;
        break;
    case HEARTH_CPL_FINISH_ERROR: a->n_error++; break;
    }
    a->prompt_tokens += s->prompt_tokens;
    a->completion_tokens += s->completion_tokens;
    a->cached_tokens += s->cached_tokens;
    if (s->ttft_s > 0) a->ttft_sum += s->ttft_s, a->ttft_n++;
    a->gen_s_sum += s->total_s;
    if (s->ttft_s > 0) hearth_hist_observe(&a->h_ttft, s->ttft_s);
    hearth_hist_observe(&a->h_e2e, s->total_s);
    hearth_hist_observe(&a->h_queue, s->queue_s);
    hearth_hist_merge(&a->h_itl, &j->itl);
    pthread_mutex_unlock(&a->mu);
    hearth_cpl_free(j->q);
    for (int i = 0; i < j->n_kids; i++) job_end(j->kids[i]);
    free(j->kids);
    api_buf_free(&j->content);
    api_buf_free(&j->reasoning);
    api_buf_free(&j->out);
    json_decref(j->tool_calls);
    json_decref(j->chunks);
    json_decref(j->output);
    json_decref(j->echo);
    free(j);
}

/* Non-streamed: accumulate the events. */
static void on_event_accumulate(void *user, const hearth_cpl_event *ev) {
    api_job *j = user;
    switch (ev->kind) {
    case HEARTH_CPL_CONTENT: api_buf_put(&j->content, ev->text, ev->len); break;
    case HEARTH_CPL_REASONING: api_buf_put(&j->reasoning, ev->text, ev->len); break;
    case HEARTH_CPL_TOOL_CALL: {
        json_t *args = json_string(ev->arguments);
        json_t *c = json_pack("{s:s,s:s,s:{s:s,s:o}}", "id", ev->id, "type", "function", "function", "name",
                              ev->name, "arguments", args ? args : json_string("{}"));
        if (!j->tool_calls) j->tool_calls = json_array();
        if (c) json_array_append_new(j->tool_calls, c);
        break;
    }
    }
}

static void on_event_chunk(void *user, const hearth_cpl_event *ev) {
    api_job *j = user;
    j->proto->chunk_event(j, ev);
}

void api_sse_put(api_buf *out, const char *event, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    if (!s) return;
    if (event) {
        api_buf_puts(out, "event: ");
        api_buf_puts(out, event);
        api_buf_puts(out, "\n");
    }
    api_buf_puts(out, "data: ");
    api_buf_puts(out, s);
    api_buf_puts(out, "\n\n");
    free(s);
}

static void sse_put(api_job *j, json_t *v) { api_sse_put(&j->out, NULL, v); }

/* The error event that ends a stream after headers were sent. */
static void sse_error(api_job *j, const hearth_cpl_summary *s) {
    int shutting = atomic_load(&j->a->state) == API_SHUTTING;
    const char *msg = s->finish == HEARTH_CPL_FINISH_ERROR ? s->error
                      : shutting ? "the server is shutting down; the generation was cancelled"
                                 : s->error;
    json_t *e = json_pack("{s:{s:s,s:s,s:n,s:s}}", "error", "message", msg, "type",
                          s->finish == HEARTH_CPL_FINISH_ERROR ? "server_error" : "unavailable_error", "param", "code",
                          s->finish == HEARTH_CPL_FINISH_ERROR ? "engine_error"
                          : shutting                            ? "server_shutting_down"
                                                                : "cancelled");
    if (e) sse_put(j, e);
    json_decref(e);
}

/* A stream step's end: hand j->out to net (more: the completion goes on),
 * or end the stream if it could not be rendered (out of memory). */
static int stream_piece(api_job *j, int more, const char **data, size_t *len) {
    if (j->out.oom) { /* cannot render: end the stream */
        j->out.n = 0;
        j->phase = 2;
        hearth_cpl_cancel(j->q);
        return 0;
    }
    *data = j->out.p ? j->out.p : "";
    *len = j->out.n;
    return more;
}

/* Each chunk's choice is the job's (n > 1: its index among the request's choices). */
static void set_index(api_job *j, json_t *c) {
    json_t *ch = json_array_get(json_object_get(c, "choices"), 0);
    if (ch) json_object_set_new(ch, "index", json_integer(j->index));
}

/* One choice's step of an OpenAI stream: its chunks into j->out, and once it
 * ends its finish chunk (or the error event). Returns 1 while it goes on. */
static int choice_step(api_job *j) {
    json_decref(j->chunks);
    j->chunks = json_array();
    int more = hearth_cpl_step(j->q, on_event_chunk, j, api_conn_gone, j->conn);
    json_t *echo = NULL; /* made before the answer's records, whose text offsets follow it */
    if (j->proto->echo_chunk && !j->echo_sent && (echo = j->proto->echo_chunk(j, !more))) j->echo_sent = 1;
    if (j->o.logprobs) { /* this step's records ride on its first content chunk */
        int n;
        hearth_cpl_logprobs(j->q, &n);
        if (n > j->lp_sent) {
            json_t *c = json_array_get(j->chunks, 0);
            if (!c) {
                c = j->proto->empty_chunk(j);
                json_array_append_new(j->chunks, c);
            }
            j->proto->chunk_logprobs(j, c, j->lp_sent, n);
            j->lp_sent = n;
        }
    }
    if (echo) json_array_insert_new(j->chunks, 0, echo);
    const hearth_cpl_summary *s = hearth_cpl_summary_get(j->q);
    if (!more && s->finish <= HEARTH_CPL_FINISH_TOOL_CALLS) {
        json_t *fin = j->proto->empty_chunk(j);
        j->proto->chunk_finish(j, fin, hearth_cpl_finish_name(s->finish));
        json_array_append_new(j->chunks, fin);
    }
    size_t i;
    json_t *c;
    json_array_foreach(j->chunks, i, c) {
        set_index(j, c);
        if (j->o.continuous_usage) json_object_set_new(c, "usage", api_usage(s));
        sse_put(j, c);
    }
    if (!more && s->finish > HEARTH_CPL_FINISH_TOOL_CALLS) sse_error(j, s);
    j->over = !more;
    return more;
}

/* The request's choices: the job itself, then its kids. */
static api_job *choice(api_job *j, int i) { return i ? j->kids[i - 1] : j; }

/* The usage of all the request's choices: each prompt counted once (a
 * prompt's n choices share it, as OpenAI counts them), every choice's tokens. */
static hearth_cpl_summary usage_sum(const api_job *j) {
    hearth_cpl_summary sum = *hearth_cpl_summary_get(j->q);
    int n = j->o.n > 1 ? j->o.n : 1;
    for (int i = 0; i < j->n_kids; i++) {
        const hearth_cpl_summary *s = hearth_cpl_summary_get(j->kids[i]->q);
        sum.completion_tokens += s->completion_tokens;
        if (j->kids[i]->index % n == 0) sum.prompt_tokens += s->prompt_tokens, sum.cached_tokens += s->cached_tokens;
    }
    return sum;
}

static int job_next(void *self, const char **data, size_t *len) {
    api_job *j = self;
    j->out.n = 0;
    *data = "";
    *len = 0;
    if (j->phase == 2) return 0;
    if (j->phase == 0) { /* the first chunk of each choice goes out before any token */
        j->phase = 1;
        for (int i = 0; i <= j->n_kids && j->proto->first_chunk; i++) {
            json_t *c = j->proto->first_chunk(choice(j, i));
            if (!c) continue;
            set_index(choice(j, i), c);
            if (j->o.continuous_usage)
                json_object_set_new(c, "usage", api_usage(hearth_cpl_summary_get(choice(j, i)->q)));
            sse_put(j, c);
            json_decref(c);
        }
        if (j->out.n) return stream_piece(j, 1, data, len);
    }
    int more = 0, failed = 0;
    for (int i = 0; i <= j->n_kids; i++) {
        api_job *c = choice(j, i);
        if (c->over) continue;
        if (c != j) c->out.n = 0;
        more |= choice_step(c);
        failed |= c->over && hearth_cpl_summary_get(c->q)->finish > HEARTH_CPL_FINISH_TOOL_CALLS;
        if (c != j) api_buf_put(&j->out, c->out.p, c->out.n);
        if (c->out.oom) j->out.oom = 1;
    }
    if (!more) {
        if (!failed && j->o.include_usage) {
            hearth_cpl_summary sum = usage_sum(j);
            json_t *u = api_chunk_base(j);
            json_object_set_new(u, "choices", json_array());
            json_object_set_new(u, "usage", api_usage(&sum));
            sse_put(j, u);
            json_decref(u);
        }
        if (!failed) api_buf_puts(&j->out, "data: [DONE]\n\n");
        j->phase = 2;
    }
    /* Waiting (queued or a long prefill): an SSE comment keeps the connection
     * active, so no idle timeout closes a stream that is merely patient. */
    if (more && j->out.n == 0) api_buf_puts(&j->out, ": keep-alive\n\n");
    return stream_piece(j, more, data, len);
}

/* A stream of typed events (api_proto.ev_*). */
static int events_next(void *self, const char **data, size_t *len) {
    api_job *j = self;
    const api_proto *p = j->proto;
    j->out.n = 0;
    *data = "";
    *len = 0;
    if (j->phase == 2) return 0;
    int more = 1;
    if (j->phase == 0) { /* the first events go out before any token */
        j->phase = 1;
        p->ev_start(j);
    } else {
        more = hearth_cpl_step(j->q, p->ev_event, j, api_conn_gone, j->conn);
        if (!more) {
            p->ev_end(j);
            j->phase = 2;
        } else if (j->out.n == 0) { /* waiting: keep the connection active */
            api_buf_puts(&j->out, p->ev_idle);
        }
    }
    return stream_piece(j, more, data, len);
}

static void job_free(void *self) {
    api_job *j = self;
    if (j->phase != 2) {
        /* net gave up on the connection (the client left while we were
         * writing): stop the generations and let them settle. */
        for (int i = 0; i <= j->n_kids; i++)
            while (!choice(j, i)->over && hearth_cpl_step(choice(j, i)->q, on_event_accumulate, choice(j, i),
                                                          always_gone, NULL)) {
            }
    }
    job_end(j);
}

const char *api_job_model(const api_job *j) {
    const char *m = hearth_cpl_model(j->q);
    return m ? m : j->a->model_id;
}

/* A job for the completion q (registered). NULL when out of memory (q is then freed). */
static api_job *job_new(hearth_api *a, const hearth_http_request *rq, const api_proto *p, const api_req_opts *o,
                        hearth_cpl *q) {
    api_job *j = calloc(1, sizeof *j);
    if (!j) {
        hearth_cpl_free(q);
        return NULL;
    }
    j->a = a;
    j->q = q;
    j->conn = rq->conn;
    j->proto = p;
    j->o = *o;
    j->o.echo = NULL;
    j->o.prompts = NULL; /* the body's; the kids are started before it goes */
    j->echo = json_incref(o->echo);
    j->created = (long)time(NULL);
    j->blk_kind = -1;
    hearth_hist_init(&j->itl, ITL_LE, N_LE(ITL_LE));
    hearth_cpl_track_itl(q, &j->itl);
    api_make_id(j->id, sizeof j->id, p->id_prefix);
    job_register(j);
    return j;
}

/* r's prompt becomes prompt i of the batch (a string or an array of ids, checked at parse). 0 on out of memory. */
static int take_prompt(hearth_cpl_request *r, const json_t *v) {
    free(r->prompt);
    free(r->prompt_ids);
    r->prompt = NULL;
    r->prompt_ids = NULL;
    r->n_prompt_ids = 0;
    if (json_is_string(v)) return (r->prompt = strndup(json_string_value(v), json_string_length(v))) != NULL;
    size_t n = json_array_size(v), i;
    json_t *id;
    if (!(r->prompt_ids = malloc(sizeof *r->prompt_ids * n))) return 0;
    json_array_foreach(v, i, id) r->prompt_ids[i] = (int32_t)json_integer_value(id);
    r->n_prompt_ids = (int)n;
    return 1;
}

/* Choices 1.. as kids of j: n > 1 choices of a prompt, their seeds the
 * request's + their index among its choices (as vLLM's); a batch of prompts,
 * n choices each, choice i * n + k prompt i's k-th (OpenAI's order). 0, or 1
 * with resp set. */
static int start_kids(hearth_api *a, const hearth_http_request *rq, const api_proto *p, hearth_cpl_request *r,
                      const api_req_opts *o, api_job *j, hearth_http_response *resp) {
    int n = o->n > 1 ? o->n : 1, total = n * (o->prompts ? (int)json_array_size(o->prompts) : 1);
    if (total == 1) return 0;
    if (!(j->kids = calloc((size_t)total - 1, sizeof *j->kids))) {
        api_error(resp, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
        return 1;
    }
    const uint64_t seed = r->p.seed;
    for (int i = 1; i < total; i++) {
        hearth_cpl_error e;
        hearth_cpl *q;
        if (i % n == 0 && !take_prompt(r, json_array_get(o->prompts, (size_t)(i / n)))) {
            api_error(resp, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
            return 1;
        }
        r->p.seed = seed + (uint64_t)(i % n);
        hearth_status st = hearth_cpl_start(a->cpl, r, &q, &e);
        r->p.seed = seed;
        if (st != HEARTH_OK) {
            api_cpl_error(a, resp, &e);
            return 1;
        }
        api_job *k = job_new(a, rq, p, o, q);
        if (!k) {
            api_error(resp, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
            return 1;
        }
        strcpy(k->id, j->id);
        k->created = j->created;
        k->index = i;
        j->kids[j->n_kids++] = k;
    }
    return 0;
}

/* The whole response of a finished request: choice 0's, the others' choices appended, usage summed. */
static json_t *full_response(api_job *j) {
    json_t *doc = j->proto->full(j);
    json_t *choices = json_object_get(doc, "choices");
    for (int i = 0; doc && i < j->n_kids; i++) {
        api_job *k = j->kids[i];
        json_t *kd = k->proto->full(k);
        json_t *c = json_array_get(json_object_get(kd, "choices"), 0);
        if (!kd || !c || k->content.oom || k->reasoning.oom) {
            json_decref(kd);
            json_decref(doc);
            return NULL;
        }
        json_object_set_new(c, "index", json_integer(k->index));
        json_array_append(choices, c);
        json_decref(kd);
    }
    if (doc && j->n_kids) {
        hearth_cpl_summary sum = usage_sum(j);
        json_object_set_new(doc, "usage", api_usage(&sum));
    }
    return doc;
}

void api_run(hearth_api *a, const hearth_http_request *rq, const api_proto *p, hearth_cpl_request *r,
             const api_req_opts *o, hearth_http_response *resp) {
    int state = atomic_load(&a->state);
    if (state != API_READY) {
        api_error(resp, 503, "unavailable_error", NULL, state == API_LOADING ? "model_loading" : "server_shutting_down",
                  state == API_LOADING ? "the model is still loading; try again shortly"
                                       : "the server is shutting down");
        return;
    }
    hearth_cpl_error e;
    hearth_cpl *q;
    if (hearth_cpl_start(a->cpl, r, &q, &e) != HEARTH_OK) {
        api_cpl_error(a, resp, &e);
        return;
    }
    api_job *j = job_new(a, rq, p, o, q);
    if (!j) {
        api_error(resp, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
        return;
    }
    if (start_kids(a, rq, p, r, o, j, resp)) { /* those started are cancelled (not by the client) and counted */
        for (int i = 0; i <= j->n_kids; i++) {
            hearth_cpl_cancel(choice(j, i)->q);
            while (hearth_cpl_step(choice(j, i)->q, on_event_accumulate, choice(j, i), NULL, NULL)) {
            }
        }
        job_end(j);
        return;
    }
    if (o->stream) {
        resp->status = 200;
        resp->content_type = "text/event-stream";
        resp->stream =
            (hearth_http_stream){.self = j, .next = p->ev_start ? events_next : job_next, .free = job_free};
        return;
    }
    for (int left = j->n_kids + 1; left > 0;) /* the choices run together in the engine; each is pulled in turn */
        for (int i = 0; i <= j->n_kids; i++) {
            api_job *c = choice(j, i);
            if (!c->over && !hearth_cpl_step(c->q, on_event_accumulate, c, api_conn_gone, rq->conn))
                c->over = 1, left--;
        }
    const hearth_cpl_summary *s = NULL;
    int oom = 0;
    for (int i = 0; i <= j->n_kids; i++) {
        const hearth_cpl_summary *si = hearth_cpl_summary_get(choice(j, i)->q);
        if (!s || si->finish > s->finish) s = si; /* the worst end decides */
        oom |= choice(j, i)->content.oom || choice(j, i)->reasoning.oom;
    }
    if (s->finish == HEARTH_CPL_FINISH_ERROR)
        api_error(resp, 500, "server_error", NULL, "engine_error", "%s", s->error);
    else if (s->finish == HEARTH_CPL_FINISH_CANCELED)
        api_error(resp, 503, "unavailable_error", NULL, s->client_gone ? "cancelled" : "server_shutting_down", "%s",
                  s->client_gone ? "the client disconnected"
                                 : "the server is shutting down; the generation was cancelled");
    else if (oom)
        api_error(resp, 503, "unavailable_error", NULL, "out_of_memory", "out of memory while rendering");
    else
        api_json(resp, 200, full_response(j));
    job_end(j);
}

/* ---- routing ---- */

static int is_anthropic_route(const char *path) {
    return !strcmp(path, "/v1/messages") || !strcmp(path, "/v1/messages/count_tokens");
}

/* The completion routes and their protocols. */
static const api_proto *completion_route(const char *path) {
    static const struct {
        const char *path;
        const api_proto *proto;
    } routes[] = {{"/v1/chat/completions", &API_CHAT},
                  {"/v1/completions", &API_TEXT},
                  {"/v1/responses", &API_RESPONSES},
                  {"/v1/messages", &API_MESSAGES},
                  {"/completion", &API_LLAMA}, /* llama-server's own API, under both its names */
                  {"/completions", &API_LLAMA},
                  {"/infill", &API_INFILL}}; /* llama-server's fill in the middle (llama.vim, llama.vscode) */
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(path, routes[i].path)) return routes[i].proto;
    return NULL;
}

/* 1: vLLM's score routes; 2: the rerank routes (vLLM's, Jina's and Cohere's; llama-server's). */
static int score_route(const char *path) {
    static const char *const score[] = {"/score", "/v1/score"},
                             *const rerank[] = {"/rerank", "/v1/rerank", "/v2/rerank", "/reranking", "/v1/reranking"};
    for (size_t i = 0; i < sizeof score / sizeof *score; i++)
        if (!strcmp(path, score[i])) return 1;
    for (size_t i = 0; i < sizeof rerank / sizeof *rerank; i++)
        if (!strcmp(path, rerank[i])) return 2;
    return 0;
}

static int is_post_route(const char *path) {
    return completion_route(path) || !strcmp(path, "/v1/messages/count_tokens") || !strcmp(path, "/tokenize") ||
           !strcmp(path, "/detokenize") || !strcmp(path, "/v1/embeddings") ||
           !strcmp(path, "/embedding") || !strcmp(path, "/embeddings") || !strcmp(path, "/apply-template") ||
           !strcmp(path, "/admin/cache/flush") || !strcmp(path, "/pause") || !strcmp(path, "/resume") ||
           !strcmp(path, "/v1/load_lora_adapter") || !strcmp(path, "/v1/unload_lora_adapter") ||
           !strcmp(path, "/invocations") || score_route(path);
}

/* vLLM's POST /invocations (SageMaker's one route): the route whose request the body is, by its fields. */
static const char *invocation_route(const json_t *body) {
    return json_object_get(body, "messages") ? "/v1/chat/completions"
           : json_object_get(body, "prompt") ? "/v1/completions"
           : json_object_get(body, "input")  ? "/v1/embeddings"
           : json_object_get(body, "query")  ? "/rerank"
           : json_object_get(body, "text_1") ? "/score"
                                             : NULL;
}

static int is_page(const char *path) { return !strcmp(path, "/") || !strcmp(path, "/index.html"); }

static int is_get_route(const char *path) {
    return !strcmp(path, "/health") || !strcmp(path, "/v1/health") || !strcmp(path, "/version") ||
           !strcmp(path, "/v1/models") || !strncmp(path, "/v1/models/", 11) ||
           !strcmp(path, "/stats") || !strcmp(path, "/metrics") || !strcmp(path, "/props") ||
           !strcmp(path, "/is_paused") || !strcmp(path, "/slots") || is_page(path);
}

/* Constant-time comparison of the presented key: "Authorization: Bearer
 * <key>" (OpenAI's clients), or "x-api-key: <key>" (Anthropic's). */
static int key_ok(const hearth_api *a, const hearth_http_request *rq) {
    if (!a->api_key) return 1;
    const char *auth = rq->authorization, *k;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) k = auth + 7;
    else if (rq->x_api_key) k = rq->x_api_key;
    else return 0;
    size_t n = strlen(k), m = strlen(a->api_key);
    unsigned char d = (unsigned char)(n != m);
    for (size_t i = 0; i < m; i++) d |= (unsigned char)(a->api_key[i] ^ (i < n ? k[i] : 0));
    return d == 0;
}

static int route_early(hearth_api *a, const hearth_http_request *rq, hearth_http_response *r) {
    const char *path = rq->path, *m = rq->method;
    if (!strcmp(path, "/ping")) { /* SageMaker's health check, either method, as vLLM's */
        api_health(a, r);
        return 1;
    }
    int get = is_get_route(path), post = is_post_route(path);
    if (!get && !post) {
        api_error(r, 404, "invalid_request_error", NULL, "not_found", "Unknown route: %s %s", m, path);
        return 1;
    }
    if (strcmp(path, "/health") && strcmp(path, "/v1/health") && !is_page(path) && !key_ok(a, rq)) {
        api_error(r, 401, "invalid_request_error", NULL, "invalid_api_key",
                  rq->authorization || rq->x_api_key
                      ? "Incorrect API key provided."
                      : "Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.");
        r->hdr_name[1] = "WWW-Authenticate";
        snprintf(r->hdr_value[1], sizeof r->hdr_value[1], "Bearer");
        return 1;
    }
    if ((get && strcmp(m, "GET") && strcmp(m, "HEAD")) || (post && strcmp(m, "POST"))) {
        api_error(r, 405, "invalid_request_error", NULL, "method_not_allowed", "%s is not allowed on %s (use %s).", m,
                  path, get ? "GET" : "POST");
        r->hdr_name[1] = "Allow";
        snprintf(r->hdr_value[1], sizeof r->hdr_value[1], "%s", get ? "GET" : "POST");
        return 1;
    }
    if (get) {
        if (!strcmp(path, "/health") || !strcmp(path, "/v1/health")) api_health(a, r);
        else if (!strcmp(path, "/version")) api_json(r, 200, json_pack("{s:s}", "version", hearth_version()));
        else if (is_page(path)) api_web_page(r);
        else if (!strcmp(path, "/stats")) api_stats(a, r);
        else if (!strcmp(path, "/metrics")) api_metrics(a, r);
        else if (!strcmp(path, "/props")) api_props(a, r);
        else if (!strcmp(path, "/is_paused")) api_is_paused(a, r);
        else if (!strcmp(path, "/slots")) api_slots(a, rq, r);
        else api_models(a, path, r);
        return 1;
    }
    int state = atomic_load(&a->state);
    if (state != API_READY) { /* refuse before reading the body */
        api_error(r, 503, "unavailable_error", NULL, state == API_LOADING ? "model_loading" : "server_shutting_down",
                  state == API_LOADING ? "the model is still loading; try again shortly"
                                       : "the server is shutting down");
        return 1;
    }
    if (!strcmp(path, "/admin/cache/flush")) { /* no body to read */
        api_cache_flush(a, r);
        return 1;
    }
    if (!strcmp(path, "/pause") || !strcmp(path, "/resume")) { /* no body to read */
        api_pause(a, rq, r, !strcmp(path, "/pause"));
        return 1;
    }
    return 0;
}

static int on_early(void *user, const hearth_http_request *rq, hearth_http_response *r) {
    hearth_api *a = user;
    int answered = route_early(a, rq, r);
    if (answered && is_anthropic_route(rq->path)) api_anthropic_error(r);
    if (answered) api_count_status(a, r->status);
    return answered;
}

static void on_handle(void *user, const hearth_http_request *rq, hearth_http_response *r) {
    hearth_api *a = user;
    json_error_t je;
    json_t *body = json_loadb(rq->body, rq->body_len, 0, &je);
    const char *path = body && !strcmp(rq->path, "/invocations") ? invocation_route(body) : rq->path;
    if (!body) {
        api_error(r, 400, "invalid_request_error", NULL, "invalid_json",
                  "We could not parse the JSON body of your request: %s (line %d, column %d).", je.text, je.line,
                  je.column);
    } else if (!path) {
        api_error(r, 400, "invalid_request_error", NULL, NULL,
                  "/invocations takes a chat request (messages), a completion (prompt), an embedding (input), a "
                  "rerank (query) or a score (text_1)");
        json_decref(body);
    } else if (!completion_route(path)) { /* the prompt's tokens, nothing generated */
        if (!strcmp(path, "/tokenize")) api_tokenize(a, body, r);
        else if (!strcmp(path, "/v1/embeddings")) api_embeddings(a, rq, body, r, 0);
        else if (!strcmp(path, "/embedding") || !strcmp(path, "/embeddings")) api_embeddings(a, rq, body, r, 1);
        else if (!strcmp(path, "/detokenize")) api_detokenize(a, body, r);
        else if (!strcmp(path, "/apply-template")) api_apply_template(a, body, r);
        else if (score_route(path) == 1) api_score(a, rq, body, r);
        else if (score_route(path) == 2) api_rerank(a, rq, body, r);
        else if (!strcmp(path, "/v1/load_lora_adapter")) api_lora_load(a, body, r);
        else if (!strcmp(path, "/v1/unload_lora_adapter")) api_lora_unload(a, body, r);
        else api_count_tokens(a, body, r);
        json_decref(body);
    } else {
        const api_proto *p = completion_route(path);
        hearth_cpl_request req;
        hearth_cpl_request_init(&req);
        api_req_opts o = {0};
        hearth_cpl_error e = {0};
        if (p->parse(body, &req, &o, &e)) api_cpl_error(a, r, &e);
        else api_run(a, rq, p, &req, &o, r);
        hearth_cpl_request_deinit(&req);
        json_decref(o.echo);
        json_decref(body);
    }
    if (is_anthropic_route(rq->path)) api_anthropic_error(r);
    api_count_status(a, r->status);
}

static void on_error(void *user, int status, const char *msg, hearth_http_response *r) {
    hearth_api *a = user;
    api_error(r, status, "invalid_request_error", NULL, status == 413 ? "request_too_large" : NULL, "%s", msg);
    api_count_status(a, r->status);
}

/* ---- life cycle ---- */

hearth_status hearth_api_new(hearth_api **out, const hearth_api_opts *o, hearth_err *err) {
    *out = NULL;
    hearth_api *a = calloc(1, sizeof *a);
    if (!a) return hearth_err_set(err, HEARTH_ENOMEM, "api: out of memory");
    a->model_id = strdup(o->model_id ? o->model_id : "hearth");
    a->api_key = o->api_key && *o->api_key ? strdup(o->api_key) : NULL;
    a->runtime_lora = o->runtime_lora;
    if (!a->model_id || (o->api_key && *o->api_key && !a->api_key)) {
        hearth_api_free(a);
        return hearth_err_set(err, HEARTH_ENOMEM, "api: out of memory");
    }
    atomic_init(&a->state, API_LOADING);
    a->t_start = hearth_time_now();
    pthread_mutex_init(&a->mu, NULL);
    hearth_hist_init(&a->h_ttft, TTFT_LE, N_LE(TTFT_LE));
    hearth_hist_init(&a->h_itl, ITL_LE, N_LE(ITL_LE));
    hearth_hist_init(&a->h_e2e, REQ_LE, N_LE(REQ_LE));
    hearth_hist_init(&a->h_queue, REQ_LE, N_LE(REQ_LE));
    *out = a;
    return HEARTH_OK;
}

hearth_http_handler hearth_api_handler(hearth_api *a) {
    return (hearth_http_handler){.user = a, .early = on_early, .handle = on_handle, .error = on_error};
}

void hearth_api_set_ready(hearth_api *a, hearth_cpl_ctx *c, hearth_engine *e) {
    pthread_mutex_lock(&a->mu);
    a->cpl = c;
    a->engine = e;
    pthread_mutex_unlock(&a->mu);
    atomic_store(&a->state, API_READY);
}

void hearth_api_begin_shutdown(hearth_api *a) { atomic_store(&a->state, API_SHUTTING); }

int hearth_api_active(hearth_api *a) {
    pthread_mutex_lock(&a->mu);
    int n = a->n_jobs;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void hearth_api_cancel_all(hearth_api *a) {
    pthread_mutex_lock(&a->mu);
    for (api_job *j = a->jobs; j; j = j->next) hearth_cpl_cancel(j->q);
    pthread_mutex_unlock(&a->mu);
}

void hearth_api_free(hearth_api *a) {
    if (!a) return;
    pthread_mutex_destroy(&a->mu);
    free(a->model_id);
    free(a->api_key);
    free(a);
}
