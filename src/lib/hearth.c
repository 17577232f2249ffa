/* hearth.c - the public embedding API (include/hearth.h) over a session and
 * the engine: text in, text pieces out, concurrent callers batched. */
#include "hearth.h"

#include "completion/json_mode.h"
#include "core/clock.h"
#include "core/status.h"
#include "engine/engine.h"
#include "lib/session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct hearth {
    hearth_session s;
    hearth_engine *engine;
    pthread_mutex_t vb_mu; /* guards vb: the vocabulary's bytes for JSON, made at the first use */
    hearth_vocab_bytes vb;
};

/* The constraint of g's JSON mode or schema into q (the stop ids are its ends). */
static hearth_status json_constraint(hearth *h, const hearth_gen_opts *g, hearth_gen_request *q, hearth_err *err) {
    hearth_schema *schema = NULL;
    if (g->json_schema) {
        json_error_t je;
        json_t *doc = json_loads(g->json_schema, 0, &je);
        if (!doc) return hearth_err_set(err, HEARTH_EINVAL, "json_schema: %s (line %d)", je.text, je.line);
        hearth_status st = hearth_schema_compile(&schema, doc, err);
        json_decref(doc);
        if (st != HEARTH_OK) return st;
    }
    return hearth_json_constraint_lazy(&q->sampling.constraint, &h->vb, &h->vb_mu, h->s.tok, schema, q->stop_ids,
                                       q->n_stop, err);
}

hearth_status hearth_open(hearth **out, const hearth_open_opts *o, hearth_err *err) {
    *out = NULL;
    if (!o || !o->model) return hearth_err_set(err, HEARTH_EINVAL, "hearth_open: no model path given");
    hearth *h = calloc(1, sizeof *h);
    if (!h) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    pthread_mutex_init(&h->vb_mu, NULL);
    hearth_session_opts so = {.model_path = o->model, .device = o->device, .threads = o->threads, .ctx = o->ctx,
                              .n_slots = o->parallel > 0 ? o->parallel : 4, .need_tokenizer = 1,
                              .spec_tokens = o->spec_ngram};
    hearth_status st = hearth_session_open(&h->s, &so, err);
    if (st != HEARTH_OK) {
        pthread_mutex_destroy(&h->vb_mu);
        free(h);
        return st;
    }
    hearth_engine_opts eo = {.n_slots = so.n_slots, .warmup = 1, .spec_tokens = o->spec_ngram};
    if ((st = hearth_engine_new(&h->engine, h->s.model, h->s.kv, &eo, err)) != HEARTH_OK) {
        hearth_session_close(&h->s);
        pthread_mutex_destroy(&h->vb_mu);
        free(h);
        return st;
    }
    *out = h;
    return HEARTH_OK;
}

void hearth_close(hearth *h) {
    if (!h) return;
    hearth_engine_free(h->engine);
    hearth_session_close(&h->s);
    hearth_vocab_bytes_free(&h->vb);
    pthread_mutex_destroy(&h->vb_mu);
    free(h);
}

void hearth_gen_opts_default(hearth_gen_opts *g) {
    memset(g, 0, sizeof *g);
    g->max_tokens = 128;
    g->temperature = 0.8f;
    g->top_p = 1.0f;
    g->repetition_penalty = 1.0f;
    g->add_special = 1;
}

hearth_status hearth_generate_text(hearth *h, const char *prompt, const hearth_gen_opts *g, hearth_piece_fn fn,
                                   void *user, hearth_gen_result *res, hearth_err *err) {
    hearth_gen_opts def;
    if (!g) hearth_gen_opts_default(&def), g = &def;
    const hearth_model_config *cfg = hearth_model_config_get(h->s.model);
    hearth_gen_request q = {0};
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = g->temperature;
    q.sampling.top_p = g->top_p;
    q.sampling.min_p = g->min_p;
    q.sampling.top_k = g->top_k;
    q.sampling.repetition_penalty = g->repetition_penalty;
    q.sampling.presence_penalty = g->presence_penalty;
    q.sampling.frequency_penalty = g->frequency_penalty;
    q.sampling.seed = g->seed;
    q.sampling.has_seed = g->has_seed;
    q.max_new = g->max_tokens;
    if (!g->ignore_eos) {
        for (int i = 0; i < cfg->n_eos && q.n_stop < 8; i++) q.stop_ids[q.n_stop++] = cfg->eos_token_ids[i];
        for (int id = 0; id < hearth_tok_n_vocab(h->s.tok) && q.n_stop < HEARTH_MAX_STOP_IDS; id++)
            if (hearth_tok_is_eog(h->s.tok, id)) q.stop_ids[q.n_stop++] = id;
    }
    if ((g->json || g->json_schema) && g->ignore_eos)
        return hearth_err_set(err, HEARTH_EINVAL, "json / json_schema end the answer with the object: not with "
                              "ignore_eos");
    size_t n = 0;
    hearth_status st;
    if ((g->json || g->json_schema) && (st = json_constraint(h, g, &q, err)) != HEARTH_OK) return st;
    st = hearth_tok_encode(h->s.tok, prompt, strlen(prompt), g->add_special, 0, &q.prompt, &n, err);
    if (st == HEARTH_OK) q.n_prompt = (int)n;
    hearth_seq *seq;
    double t0 = hearth_time_now();
    if (st == HEARTH_OK) st = hearth_engine_submit(h->engine, &q, &seq, err);
    if (q.sampling.constraint.free) q.sampling.constraint.free(q.sampling.constraint.self); /* not taken */
    if (st != HEARTH_OK) {
        free(q.prompt);
        return st;
    }
    hearth_detok d;
    hearth_detok_init(&d, h->s.tok, 1);
    char *buf = malloc(HEARTH_DETOK_MAX_OUT);
    hearth_token_event ev;
    double t_first = 0;
    int stopped = !buf;
    while (hearth_seq_next(seq, &ev, -1) == 1) {
        if (t_first == 0) t_first = hearth_time_now();
        if (stopped) continue; /* drain after a cancel */
        size_t k = hearth_detok_push(&d, ev.id, buf, HEARTH_DETOK_MAX_OUT);
        if (k && fn && fn(user, buf, k)) {
            stopped = 1;
            hearth_seq_cancel(seq);
        }
    }
    if (buf && !stopped && fn) {
        size_t k = hearth_detok_finish(&d, buf, HEARTH_DETOK_MAX_OUT);
        if (k) fn(user, buf, k);
    }
    free(buf);
    hearth_seq_summary sum;
    hearth_seq_summary_get(seq, &sum);
    hearth_seq_release(seq);
    if (sum.finish == HEARTH_FINISH_ERROR) return hearth_err_set(err, HEARTH_EIO, "generation failed: %s", sum.error);
    if (res) {
        res->prompt_tokens = sum.n_prompt;
        res->completion_tokens = sum.n_gen;
        res->cached_tokens = sum.n_cached;
        res->finish_reason = sum.finish == HEARTH_FINISH_STOP     ? "stop"
                             : sum.finish == HEARTH_FINISH_LENGTH ? "length"
                                                                  : "canceled";
        res->ttft_s = t_first > 0 ? t_first - t0 : 0;
        res->decode_tok_s = sum.n_gen > 1 && sum.decode_s > 0 ? (sum.n_gen - 1) / sum.decode_s : 0;
    }
    return HEARTH_OK;
}

hearth_status hearth_embed(hearth *h, const char *text, float *out, int cap, int *dim, hearth_err *err) {
    hearth_gen_request q = {0};
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = 0.0f;
    q.max_new = 1; /* the prompt's pass, and one token nobody reads */
    q.want_hidden = 1;
    size_t n = 0;
    *dim = 0;
    hearth_status st = hearth_tok_encode(h->s.tok, text, strlen(text), 1, 0, &q.prompt, &n, err);
    if (st != HEARTH_OK) return st;
    if (n == 0) {
        free(q.prompt);
        return hearth_err_set(err, HEARTH_EINVAL, "embed: the text has no tokens");
    }
    q.n_prompt = (int)n;
    hearth_seq *seq;
    if ((st = hearth_engine_submit(h->engine, &q, &seq, err)) != HEARTH_OK) {
        free(q.prompt);
        return st;
    }
    hearth_token_event ev;
    while (hearth_seq_next(seq, &ev, -1) == 1) {
    }
    hearth_seq_summary sum;
    hearth_seq_summary_get(seq, &sum);
    int d = hearth_seq_embedding(seq, out, cap, 2);
    if (!d) st = hearth_err_set(err, HEARTH_EIO, "embed failed: %s", sum.error[0] ? sum.error : "no hidden state");
    else if ((*dim = d) > cap) st = hearth_err_set(err, HEARTH_ERANGE, "embed: %d dimensions, room for %d", d, cap);
    hearth_seq_release(seq);
    return st;
}
