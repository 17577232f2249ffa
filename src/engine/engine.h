/* engine.h - the engine thread: a mailbox of requests in, a bounded event
 * queue per sequence out, and a continuous-batching scheduler in between.
 *
 * One engine per model. Each step it admits waiting requests into free
 * sequence slots (FIFO: no starvation), runs the decode rows of running
 * sequences and chunked prefill of new ones in one forward call within a
 * token budget (at least one row a slot; prompts in admission order, so a
 * later request never takes the budget from an earlier one's prompt),
 * samples each row with its own sampler, and retires finished
 * or cancelled sequences (their KV blocks go back at once). A lone request
 * takes the same path: B=1 is not a separate engine. When KV blocks run out
 * the newest running sequence is preempted (its blocks freed, recomputed
 * later from its prompt + output so far); its output is unchanged. With
 * opts.spec_tokens a decoding sequence's row brings drafted tokens behind it
 * (speculative decoding), of which it keeps those its sampler chooses.
 *
 * Threads: hearth_engine_submit / hearth_seq_* may be called from any
 * thread; the model and KV are touched by the engine thread only. */
#ifndef HEARTH_ENGINE_H
#define HEARTH_ENGINE_H

#include "engine/kv.h"
#include "engine/kv_disk.h"
#include "engine/sampler.h"
#include "model/model.h"

#define HEARTH_MAX_STOP_IDS 32

/* What one request asks of the engine (resolved settings, DESIGN §3). */
typedef struct {
    int32_t *prompt; /* malloc'd; ownership moves to the engine on successful submit */
    int n_prompt;
    int max_new;     /* > 0 */
    hearth_sampling sampling; /* logit_bias is copied at submit */
    int32_t stop_ids[HEARTH_MAX_STOP_IDS];
    int n_stop;
    int want_logprobs;
    int want_hidden; /* keep the final-normed hidden state of the prompt's last position (embeddings) */
    int want_prompt_logprobs; /* each prompt token's logprob after the first, and sampling.top_logprobs
                                 alternatives, under the model's own distribution (no processors):
                                 hearth_seq_prompt_logprobs. The whole prompt is computed (no prefix cache),
                                 in chunks of the model's spare logit rows */
    int adapter;     /* LoRA adapter id (hearth_model_add_lora, before hearth_engine_new), 0 = none; the prefix
                        cache shares KV only between sequences of the same adapter */
    int has_cache_salt; /* and, when set, of the same salt (vLLM's cache_salt, hashed) */
    uint8_t cache_salt[32];
    int priority;       /* vLLM's: a lower value is admitted first; equal ones (and all at 0) in arrival order */
} hearth_gen_request;

typedef enum {
    HEARTH_FINISH_NONE = 0, /* still running */
    HEARTH_FINISH_STOP,     /* a stop id (end of generation) was produced */
    HEARTH_FINISH_LENGTH,   /* max_new or the context was reached */
    HEARTH_FINISH_CANCELED, /* cancelled by the consumer or at shutdown */
    HEARTH_FINISH_ERROR,    /* the engine failed; see summary.error */
} hearth_finish;

typedef struct {
    int32_t id;
    int has_logprobs;
    hearth_logprobs lp;
} hearth_token_event;

/* The one terminal result of a sequence (DESIGN §3: settled once, by the engine). */
typedef struct {
    hearth_finish finish;
    int n_prompt, n_gen, n_cached; /* n_cached: prompt tokens served from the prefix cache */
    double queue_s, prefill_s, decode_s; /* waiting, first-token latency after admission, rest */
    int n_preempted;
    char error[256];
} hearth_seq_summary;

typedef struct {
    long requests_ok, requests_canceled, requests_error, requests_rejected;
    long tokens_in, tokens_out, tokens_cached;
    int running, waiting;
    int paused; /* hearth_engine_pause */
    int kv_blocks_total, kv_blocks_free, kv_blocks_cached;
    long prefix_lookups, prefix_hits;
    long steps, preemptions;
    long steps_ahead;     /* of the steps, those issued before the last one's tokens were read (engine.c ahead) */
    long step_rows;       /* token rows run, over all steps */
    double step_s;        /* wall time in forward + token choice */
    /* the engine thread's wall time in the other work of the loop turns that ran a step: planning the
     * batch (plan_s), handing the chosen tokens and ends out (deliver_s), and the whole turn (turn_s =
     * plan_s + step_s + deliver_s + admission, cancellation, committing full blocks, gauges) */
    double plan_s, deliver_s, turn_s;
    long rows_by_pick_op, rows_by_host_sampler;
    long spec_drafted, spec_accepted; /* drafted tokens fed to forwards, and those the sampler chose */
    int has_disk;                     /* the prefix cache has a disk tier (kv_disk.h); then: */
    hearth_kv_disk_stats disk;
} hearth_engine_stats;

typedef struct hearth_engine hearth_engine;
typedef struct hearth_seq hearth_seq;

typedef struct {
    int n_slots;     /* concurrent sequences (max batch) */
    int max_waiting; /* mailbox bound; submit beyond it is EBUSY */
    int queue_cap;   /* per-sequence event queue bound (backpressure) */
    int warmup;      /* on a device backend, run each step shape once before serving (see engine.c) */
    /* Speculative decoding by prompt lookup (draft.h): up to spec_tokens drafted tokens a decoding sequence
     * a step, from the latest earlier match of its last spec_ngram_max .. spec_ngram_min tokens (0 = 4, 2).
     * 0 = off. The model must keep logits for n_slots x (1 + spec_tokens) rows (hearth_model_load). */
    int spec_tokens, spec_ngram_min, spec_ngram_max;
} hearth_engine_opts;

/* Start the engine thread over model + kv (borrowed; outlive the engine). */
hearth_status hearth_engine_new(hearth_engine **out, hearth_model *m, hearth_kv *kv, const hearth_engine_opts *o,
                                hearth_err *err);
/* Cancel everything, join the thread, free. */
void hearth_engine_free(hearth_engine *e);

/* Validate and enqueue. On HEARTH_OK the prompt now belongs to the engine and
 * *out is a handle the caller must hearth_seq_release. A sampling constraint
 * belongs to the engine once r->sampling.constraint has been cleared (which
 * may happen before a later refusal); the caller frees it if it is still set.
 * EBUSY: queue full; ERANGE: prompt does not fit the context; EINVAL: bad
 * settings (err says). */
hearth_status hearth_engine_submit(hearth_engine *e, hearth_gen_request *r, hearth_seq **out, hearth_err *err);

/* Next event: 1 = token in *ev, 0 = finished (read the summary), -1 = timed
 * out (timeout_ms >= 0). */
int hearth_seq_next(hearth_seq *s, hearth_token_event *ev, int timeout_ms);
void hearth_seq_summary_get(hearth_seq *s, hearth_seq_summary *out);
/* want_hidden: the embedding - the final-normed hidden state of the
 * prompt's last position - into out[cap] once the first token event has
 * come, normalized as llama.cpp's embd_normalize says: -1 not, 0 to the int16
 * range by the largest magnitude, 1 taxicab, 2 Euclidean (L2), p > 2 the
 * p-norm. Returns its dimension (out untouched when cap is smaller), 0 when
 * there is none. */
int hearth_seq_embedding(hearth_seq *s, float *out, int cap, int norm);
/* want_prompt_logprobs: once the first token event has come, the record of
 * prompt token i at [i] for i in [1, n_prompt) ([0] has no logprob: n_top 0,
 * logprob NAN); valid until hearth_seq_release. NULL when not asked for, or
 * when the sequence ended before its prompt was computed. */
const hearth_logprobs *hearth_seq_prompt_logprobs(hearth_seq *s, int *n);
/* Ask the engine to stop this sequence; it frees its KV at the next step. */
void hearth_seq_cancel(hearth_seq *s);
/* The consumer is done with the handle (cancels it if still running). */
void hearth_seq_release(hearth_seq *s);

void hearth_engine_stats_get(hearth_engine *e, hearth_engine_stats *out);
/* Its slots: the sequences it runs at once. */
int hearth_engine_n_slots(const hearth_engine *e);
/* Every prefix-cache block not yet on disk written there and fsynced (hearth_kv_flush, run by the engine
 * thread between steps; the caller waits). *n_written: the blocks written now. EINVAL when the cache has
 * no disk tier. */
hearth_status hearth_engine_flush_cache(hearth_engine *e, int *n_written, hearth_err *err);
/* LoRA adapters while serving (vLLM's /v1/load_lora_adapter): load PEFT's directory dir under name between two
 * steps (the caller waits; requests in flight go on before and after); *id is then its hearth_gen_request
 * adapter. Errors as hearth_model_add_lora's. */
hearth_status hearth_engine_lora_load(hearth_engine *e, const char *name, const char *dir, int *id, hearth_err *err);
/* Unload adapter id: submissions with it are refused from now on; the sequences that run or wait with it finish
 * with it, and its memory is given back at the first step boundary after the last. ENOENT when it is not
 * loaded. Returns at once. */
hearth_status hearth_engine_lora_unload(hearth_engine *e, int id, hearth_err *err);
/* Stop admitting (submit returns EBUSY with "shutting down"). */
void hearth_engine_stop_admission(hearth_engine *e);
/* A slot as the engine last published it (each loop turn). */
typedef struct {
    int busy;                   /* a sequence holds it */
    long task;                  /* that sequence's number, 1, 2, ... in submission order; 0 when free */
    int n_prompt, n_computed;   /* its prompt's tokens and the tokens whose KV is written */
    int n_gen, max_new;         /* tokens generated and the most it may */
} hearth_slot_info;

/* Draft tokens a step a sequence may be fed (opts.spec_tokens; 0 = off). */
int hearth_engine_spec_tokens(const hearth_engine *e);
/* The slots' states: up to cap into out; returns the number of slots. */
int hearth_engine_slots(hearth_engine *e, hearth_slot_info *out, int cap);

/* Pause (1) or resume (0) generation: while paused no step runs, so no
 * token is computed, but requests are still admitted into free slots and
 * cancelled ones leave (vLLM's pause_generation, e.g. to swap weights or to
 * line requests up in a chosen order). Returns at once. */
void hearth_engine_pause(hearth_engine *e, int paused);
/* Sequences running or waiting. */
int hearth_engine_active(hearth_engine *e);

#endif
