/* bench_engine.c - `hearth bench --parallel N [--requests M]`: N concurrent
 * streams through the continuous-batching engine (M requests in all, the
 * next ones always waiting for a slot, as trtllm-bench's and vLLM's
 * offline throughput runs queue theirs); aggregate output tok/s and TTFT
 * p50/p99 (from each request's submission) and its parts. */
#include "cli/bench_engine.h"

#include "core/clock.h"
#include "engine/engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hearth_seq *seq;
    double t_submit, t_first, t_end;
    double queue_s, admitted_s; /* the engine's summary: submission to admission, admission to the first token chosen */
    int n_out, done;
} stream;

static void *reader(void *arg) {
    stream *st = arg;
    hearth_token_event ev;
    while (hearth_seq_next(st->seq, &ev, -1) == 1) {
        if (st->n_out++ == 0) st->t_first = hearth_time_now();
    }
    st->t_end = hearth_time_now();
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The run: n_req requests, each a client thread's turn (a client submits
 * its next request when its last one ends), so that with more requests than
 * slots the engine always has the next ones waiting. */
typedef struct {
    hearth_engine *e;
    const hearth_model_config *cfg;
    int n_req, n_prompt, n_gen;
    int adapter; /* --lora: every request runs with adapter 1 */
    const hearth_sampling *sp; /* NULL: greedy */
    stream *st;
    pthread_mutex_t mu;
    int next, failed; /* the next request to submit; a submit failed */
    hearth_err err;
} run;

static void *client(void *arg) {
    run *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int i = r->failed ? r->n_req : r->next++;
        pthread_mutex_unlock(&r->mu);
        if (i >= r->n_req) return NULL;
        hearth_gen_request q = {0};
        q.prompt = malloc(sizeof(int32_t) * (size_t)r->n_prompt);
        hearth_err err = {0};
        if (!q.prompt) hearth_err_set(&err, HEARTH_ENOMEM, "out of memory");
        uint64_t x = 12345 + 7919 * (uint64_t)i; /* distinct prompts: no prefix-cache hits */
        for (int k = 0; q.prompt && k < r->n_prompt; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            q.prompt[k] = (int32_t)((x >> 33) % (uint64_t)r->cfg->vocab_size);
        }
        q.n_prompt = r->n_prompt;
        q.max_new = r->n_gen;
        q.adapter = r->adapter;
        hearth_sampling_default(&q.sampling);
        q.sampling.temperature = 0;
        if (r->sp) q.sampling = *r->sp, q.sampling.seed = r->sp->seed + (uint64_t)i, q.sampling.has_seed = 1;
        stream *st = &r->st[i];
        st->t_submit = hearth_time_now();
        if (!q.prompt || hearth_engine_submit(r->e, &q, &st->seq, &err) != HEARTH_OK) {
            free(q.prompt);
            pthread_mutex_lock(&r->mu);
            if (!r->failed) r->err = err;
            r->failed = 1;
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        reader(st);
        hearth_seq_summary sum;
        hearth_seq_summary_get(st->seq, &sum);
        st->queue_s = sum.queue_s;
        st->admitted_s = sum.prefill_s;
        hearth_seq_release(st->seq); /* its token queue goes now, not at the end of the run */
        st->seq = NULL;
        st->done = 1;
    }
}

int cli_bench_engine(hearth_session *s, int n_par, int n_req, int n_prompt, int n_gen, const hearth_sampling *sp,
                     hearth_err *err) {
    if (n_req < n_par) n_req = n_par;
    /* at most 2 x n_par in flight: n_par running, as many waiting for a slot */
    const int n_clients = n_req < 2 * n_par ? n_req : 2 * n_par;
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = n_par, .max_waiting = n_clients + 1, .queue_cap = n_gen + 1, .warmup = 1};
    if (hearth_engine_new(&e, s->model, s->kv, &o, err) != HEARTH_OK) return 1;
    run r = {.e = e, .cfg = hearth_model_config_get(s->model), .n_req = n_req, .n_prompt = n_prompt, .n_gen = n_gen,
             .adapter = hearth_model_n_lora(s->model) > 0, .sp = sp};
    r.st = calloc((size_t)n_req, sizeof *r.st);
    pthread_t *th = calloc((size_t)n_clients, sizeof *th);
    /* each request's TTFT and its parts: waiting for admission, admission to the token chosen, then to the client */
    double *ttft = calloc((size_t)n_req, sizeof *ttft), *adm = calloc((size_t)n_req, sizeof *adm);
    double *wait = calloc((size_t)n_req, sizeof *wait), *out = calloc((size_t)n_req, sizeof *out);
    pthread_mutex_init(&r.mu, NULL);
    int n_th = 0;
    double t0 = hearth_time_now();
    for (; r.st && th && ttft && adm && wait && out && n_th < n_clients; n_th++)
        if (pthread_create(&th[n_th], NULL, client, &r)) break;
    for (int i = 0; i < n_th; i++) pthread_join(th[i], NULL);
    int rc = r.failed || n_th == 0 || !ttft || !adm || !wait || !out;
    if (r.failed) *err = r.err;
    else if (rc) hearth_err_set(err, HEARTH_ENOMEM, "no memory or threads for %d clients", n_clients);
    long total = 0;
    int n_done = 0;
    double t_end = t0, dec = 0;
    for (int i = 0; r.st && i < n_req; i++) {
        stream *st = &r.st[i];
        if (!st->done) continue;
        total += st->n_out;
        if (st->t_end > t_end) t_end = st->t_end;
        adm[n_done] = st->admitted_s;
        wait[n_done] = st->queue_s;
        ttft[n_done] = st->t_first - st->t_submit;
        out[n_done] = ttft[n_done] - st->queue_s - st->admitted_s;
        n_done++;
        if (st->n_out > 1) dec += (st->n_out - 1) / (st->t_end - st->t_first);
    }
    hearth_engine_stats es;
    hearth_engine_stats_get(e, &es);
    hearth_engine_free(e);
    if (!rc && n_done > 0) {
        double *series[4] = {ttft, wait, adm, out}; /* the TTFT and its parts, each sorted for its percentiles */
        for (int k = 0; k < 4; k++) qsort(series[k], (size_t)n_done, sizeof *series[k], cmp_double);
        const int i50 = (n_done - 1) / 2, i99 = (int)((n_done - 1) * 0.99);
        char reqs[48] = "";
        if (n_req > n_par) snprintf(reqs, sizeof reqs, "%d requests, ", n_req);
        printf("engine | %s%d streams x (%d in, %d out) | output %.2f tok/s | TTFT p50 %.3f s, p99 %.3f s | "
               "wall %.2f s | %ld tokens\n",
               reqs, n_par, n_prompt, n_gen, total / (t_end - t0), ttft[i50], ttft[i99], t_end - t0, total);
        /* where the TTFT went: with every request submitted at once (n_req = n_par) the wait is the engine's
         * first turns, with more requests than slots the wait for a slot */
        printf("engine | TTFT's parts, p50 / p99: submission to admission %.3f / %.3f s, admission to the token "
               "chosen %.3f / %.3f s, chosen to the client %.4f / %.4f s\n",
               wait[i50], wait[i99], adm[i50], adm[i99], out[i50], out[i99]);
        printf("engine | decode after the first token: %.2f tok/s per stream (mean)\n", dec / n_done);
        printf("engine | %ld steps (%ld issued ahead), %.1f rows a step, %.2f ms a step in forward + choice | tokens "
               "chosen by the pick op %ld, by the host sampler %ld\n",
               es.steps, es.steps_ahead, es.steps ? (double)es.step_rows / es.steps : 0.0,
               es.steps ? 1e3 * es.step_s / es.steps : 0.0, es.rows_by_pick_op, es.rows_by_host_sampler);
        if (es.steps)
            printf("engine | the engine thread, ms a step besides forward + choice: %.3f planning, %.3f handing out "
                   "tokens, %.3f in all\n",
                   1e3 * es.plan_s / es.steps, 1e3 * es.deliver_s / es.steps,
                   1e3 * (es.turn_s - es.step_s) / es.steps);
    }
    pthread_mutex_destroy(&r.mu);
    free(r.st);
    free(th);
    free(ttft);
    free(adm);
    free(wait);
    free(out);
    return rc;
}

/* One stream through e; its TTFT in *ttft. */
static int one_stream(hearth_engine *e, const int32_t *prompt, int n_prompt, int n_gen, int adapter, double *ttft,
                      int *n_cached, hearth_err *err) {
    hearth_gen_request q = {0};
    q.prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    if (!q.prompt) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory"), 1;
    memcpy(q.prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
    q.n_prompt = n_prompt;
    q.max_new = n_gen;
    q.adapter = adapter;
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = 0;
    stream st = {.t_submit = hearth_time_now()};
    if (hearth_engine_submit(e, &q, &st.seq, err) != HEARTH_OK) {
        free(q.prompt);
        return 1;
    }
    reader(&st);
    hearth_seq_summary sum;
    hearth_seq_summary_get(st.seq, &sum);
    hearth_seq_release(st.seq);
    *ttft = st.t_first - st.t_submit;
    *n_cached = sum.n_cached;
    return sum.finish == HEARTH_FINISH_ERROR ? (hearth_err_set(err, HEARTH_EIO, "%s", sum.error), 1) : 0;
}

int cli_bench_prefix(hearth_session *s, int n_prompt, int n_gen, int reps, hearth_err *err) {
    const hearth_model_config *cfg = hearth_model_config_get(s->model);
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 1, .max_waiting = 2, .queue_cap = n_gen + 1, .warmup = 1};
    if (hearth_engine_new(&e, s->model, s->kv, &o, err) != HEARTH_OK) return 1;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_prompt);
    int rc = ids ? 0 : 1;
    for (int r = 0; !rc && r < reps; r++) {
        uint64_t x = 777 + 7919 * (uint64_t)r; /* a prompt no earlier rep has cached */
        for (int k = 0; k < n_prompt; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            ids[k] = (int32_t)((x >> 33) % (uint64_t)cfg->vocab_size);
        }
        double cold, warm;
        int c0, c1;
        const int ad = hearth_model_n_lora(s->model) > 0;
        if ((rc = one_stream(e, ids, n_prompt, n_gen, ad, &cold, &c0, err))) break;
        if ((rc = one_stream(e, ids, n_prompt, n_gen, ad, &warm, &c1, err))) break;
        printf("prefix | prompt %d | cold TTFT %.4f s (%d cached) | repeated TTFT %.4f s (%d cached) | %.1f%% of cold\n",
               n_prompt, cold, c0, warm, c1, 100.0 * warm / cold);
    }
    free(ids);
    hearth_engine_free(e);
    return rc;
}
