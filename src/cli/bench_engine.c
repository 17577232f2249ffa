/* bench_engine.c - `hearth bench --parallel N`: N concurrent streams through
 * the continuous-batching engine; aggregate output tok/s and TTFT p50/p99. */
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
    int n_out;
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

int cli_bench_engine(hearth_session *s, int n_par, int n_prompt, int n_gen, hearth_err *err) {
    const hearth_model_config *cfg = hearth_model_config_get(s->model);
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = n_par, .max_waiting = n_par + 1, .queue_cap = n_gen + 1};
    if (hearth_engine_new(&e, s->model, s->kv, &o, err) != HEARTH_OK) return 1;
    stream *st = calloc((size_t)n_par, sizeof *st);
    pthread_t *th = calloc((size_t)n_par, sizeof *th);
    double *ttft = calloc((size_t)n_par, sizeof *ttft);
    int rc = 0, n_started = 0;
    double t0 = hearth_time_now();
    for (int i = 0; st && th && ttft && i < n_par; i++) {
        hearth_gen_request q = {0};
        q.prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
        if (!q.prompt) break;
        uint64_t x = 12345 + 7919 * (uint64_t)i; /* distinct prompts: no prefix-cache hits */
        for (int k = 0; k < n_prompt; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            q.prompt[k] = (int32_t)((x >> 33) % (uint64_t)cfg->vocab_size);
        }
        q.n_prompt = n_prompt;
        q.max_new = n_gen;
        hearth_sampling_default(&q.sampling);
        q.sampling.temperature = 0;
        st[i].t_submit = hearth_time_now();
        if (hearth_engine_submit(e, &q, &st[i].seq, err) != HEARTH_OK) {
            free(q.prompt);
            rc = 1;
            break;
        }
        pthread_create(&th[i], NULL, reader, &st[i]);
        n_started++;
    }
    long total = 0;
    double t_end = t0;
    for (int i = 0; i < n_started; i++) {
        pthread_join(th[i], NULL);
        total += st[i].n_out;
        if (st[i].t_end > t_end) t_end = st[i].t_end;
        ttft[i] = st[i].t_first - st[i].t_submit;
        hearth_seq_release(st[i].seq);
    }
    hearth_engine_free(e);
    if (!rc && n_started > 0) {
        qsort(ttft, (size_t)n_started, sizeof *ttft, cmp_double);
        double p50 = ttft[(n_started - 1) / 2], p99 = ttft[(int)((n_started - 1) * 0.99)];
        printf("engine | %d streams x (%d in, %d out) | output %.2f tok/s | TTFT p50 %.3f s, p99 %.3f s | "
               "wall %.2f s\n",
               n_par, n_prompt, n_gen, total / (t_end - t0), p50, p99, t_end - t0);
    }
    free(st);
    free(th);
    free(ttft);
    return rc;
}
