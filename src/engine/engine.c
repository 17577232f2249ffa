/* engine.c - engine thread, mailbox, continuous batching, preemption.
 *
 * A sequence's known tokens are tokens[0, n_tokens): its prompt, then what it
 * generated. n_computed of them are in its KV slot. Each step a running
 * sequence contributes the rows tokens[n_computed, n_computed + chunk); when
 * the chunk reaches n_tokens its last row's logits give the next token.
 * Decode is the chunk of one; prefill and recompute after preemption are
 * longer chunks. So every path is the same forward call.
 *
 * Locks: e->mu guards the mailbox, stop flags and stats; s->mu guards a
 * sequence's event queue and summary. The engine thread alone touches the
 * model, the KV cache, the waiting list and the running slots. */
#define _GNU_SOURCE
#include "engine/engine.h"

#include "engine/choose.h"
#include "engine/draft.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/sha256.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct hearth_seq {
    atomic_int refs; /* engine + consumer */
    atomic_int cancel;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    hearth_token_event *queue; /* ring [cap] */
    int q_head, q_count, q_cap;
    int finished;
    hearth_seq_summary summary;

    /* engine thread only */
    hearth_gen_request req;
    int32_t *tokens; /* [n_prompt + max_new] */
    int n_tokens, n_computed, n_gen, slot;
    int plan;  /* rows planned for the current step */
    int draft; /* of which drafted tokens behind its decode row (tokens[n_tokens, n_tokens + draft)) */
    int draft_cap; /* most tokens its next draft may have: one past its last refusal, doubled after one kept whole */
    int pend;  /* chosen tokens waiting in the engine's hand-out list */
    hearth_sampler sampler;
    float *hidden; /* [hidden_dim] want_hidden: set with the first token, read by the consumer after it */
    int hidden_dim, has_hidden;
    hearth_logprobs *prompt_lp; /* [n_prompt] want_prompt_logprobs: filled as the prompt is computed */
    int has_prompt_lp;          /* set with the first token (all of prompt_lp is written by then) */
    double t_submit, t_admit, t_first;
    long task;        /* submission number (hearth_slot_info) */
    hearth_seq *next; /* mailbox / waiting list link */
    uint8_t root[32]; /* its prefix cache chain's root: the adapter's fingerprint and the cache salt */
    int has_root;
};

/* An errand: fn run by the engine thread between two steps while its caller
 * waits (the cache's flush, LoRA adapters' loads), so that nothing else
 * touches the model or the cache meanwhile. */
typedef struct errand {
    hearth_status (*fn)(hearth_engine *e, struct errand *x);
    hearth_lora_staged *staged; /* a load's adapter, read (add_staged consumes it) */
    int n;                      /* the flush's blocks written; the load's id */
    hearth_status st;
    hearth_err err;
    int taken, done;
    struct errand *next;
} errand;

/* A step issued (its forward, its choice begun) whose tokens are still to
 * be read: what reading them needs. */
typedef struct {
    int n, n_rows, n_plp, any_draft, begun;
    hearth_status st;
    hearth_err err;
    double t0, plan_s, out_s;
    hearth_seq **row_seq;    /* [max_tokens] owner of each logit row (a reference held until read) */
    int32_t *row_draft;      /* [max_tokens] the draft the next row is fed, -1: none */
    hearth_sampler **row_smp; /* [max_tokens] */
    uint8_t *row_lp;          /* [max_tokens] wants logprobs */
} flight;

struct hearth_engine {
    hearth_model *m;
    hearth_kv *kv;
    hearth_engine_opts o;
    int vocab, max_tokens, ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    hearth_seq *mail_head, *mail_tail; /* submitted, not yet seen by the engine */
    int n_mail;
    int stop, no_admission;
    int paused; /* hearth_engine_pause: no step runs; admission and cancellation go on */
    hearth_engine_stats stats;
    hearth_slot_info *slots; /* [n_slots] published by update_gauges */
    long n_tasks;            /* sequences submitted */
    errand *errands;             /* asked for, not yet run */
    pthread_cond_t errand_cv;    /* signalled when one is done */
    /* The adapters submit accepts (id 0: a free entry); an unloaded one drains: its sequences finish, then the
     * engine thread gives its memory back (reap_adapters). */
    struct {
        int id, draining;
        uint8_t fp[32];
    } lora[HEARTH_MAX_LORA];
    int n_draining;

    /* engine thread only */
    hearth_seq *wait_head, *wait_tail;
    int n_waiting;
    hearth_seq **running; /* [n_slots], NULL = free slot */
    struct admitted { double t; int slot; } *order; /* [n_slots] plan's scratch: running slots, first admitted first */
    int32_t *b_tokens, *b_seq, *b_pos, *b_rows, *b_adapter; /* [max_tokens] */
    /* The steps issued, whose tokens are still to be read: fl[cur], and with
     * ahead fl[cur ^ 1] too, issued before fl[cur]'s tokens were read. */
    flight fl[2];
    int cur, ahead;
    int ahead_on;    /* steps may be issued ahead (device backends; HEARTH_ENGINE_AHEAD) */
    double t_chosen; /* when the last step's tokens were chosen */
    /* logit rows after the chosen ones: a prompt position whose next token's logprob is asked for */
    hearth_seq **plp_seq; /* [max_tokens] */
    int32_t *plp_pos;     /* [max_tokens] */
    int32_t *plp_row;     /* [max_tokens] its row of the batch */
    float *plp_logits;    /* [vocab] one row on the host */
    int32_t *row_id;                             /* [max_tokens] chosen token */
    hearth_logprobs *row_lps;                    /* [max_tokens] */
    hearth_chooser chooser;
    /* The tokens the last step chose, not yet handed out (hand_out): on a
     * device backend (overlap) they go out once the next step's forward is
     * started, so that this host work overlaps the device's; pend_fin is the
     * sequence's end that its token brings (HEARTH_FINISH_NONE: none). */
    int overlap, n_pend;
    hearth_seq **pend_seq;          /* [max_tokens] */
    hearth_token_event *pend_ev;    /* [max_tokens] */
    hearth_finish *pend_fin;        /* [max_tokens] */
};

static void seq_unref(hearth_seq *s) {
    if (atomic_fetch_sub(&s->refs, 1) != 1) return;
    hearth_sampler_deinit(&s->sampler);
    free(s->hidden);
    free(s->prompt_lp);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->queue);
    free(s->tokens);
    free(s->req.prompt);
    free(s);
}

/* ---- consumer side ---- */

/* The CLOCK_REALTIME time ms milliseconds from now, for pthread_cond_timedwait. */
static struct timespec deadline_ms(int ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    return dl;
}

int hearth_seq_next(hearth_seq *s, hearth_token_event *ev, int timeout_ms) {
    struct timespec dl = {0};
    if (timeout_ms >= 0) dl = deadline_ms(timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (s->q_count == 0 && !s->finished) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT) {
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
    }
    int r = 0;
    if (s->q_count > 0) {
        *ev = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_count--;
        r = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

void hearth_seq_summary_get(hearth_seq *s, hearth_seq_summary *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->summary;
    pthread_mutex_unlock(&s->mu);
}

int hearth_seq_embedding(hearth_seq *s, float *out, int cap, int norm) {
    pthread_mutex_lock(&s->mu);
    int n = s->has_hidden ? s->hidden_dim : 0;
    pthread_mutex_unlock(&s->mu);
    if (n == 0 || n > cap) return n; /* the engine writes hidden before has_hidden and never after */
    const float *x = s->hidden;
    double sum = 0.0; /* llama.cpp's common_embd_normalize */
    for (int i = 0; i < n; i++) {
        const double v = fabs((double)x[i]);
        if (norm == 0) sum = v > sum ? v : sum;
        else if (norm == 1) sum += v;
        else if (norm == 2) sum += v * v;
        else if (norm > 2) sum += pow(v, norm);
    }
    if (norm < 0) sum = 1.0;
    else if (norm == 0) sum /= 32760.0; /* an int16 range */
    else if (norm == 2) sum = sqrt(sum);
    else if (norm > 2) sum = pow(sum, 1.0 / norm);
    const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++) out[i] = x[i] * inv;
    return n;
}

const hearth_logprobs *hearth_seq_prompt_logprobs(hearth_seq *s, int *n) {
    pthread_mutex_lock(&s->mu);
    int ok = s->has_prompt_lp; /* the engine writes prompt_lp before has_prompt_lp and never after */
    pthread_mutex_unlock(&s->mu);
    *n = ok ? s->req.n_prompt : 0;
    return ok ? s->prompt_lp : NULL;
}

void hearth_seq_cancel(hearth_seq *s) { atomic_store(&s->cancel, 1); }

void hearth_seq_release(hearth_seq *s) {
    hearth_seq_cancel(s);
    seq_unref(s);
}

/* ---- engine side ---- */

/* Events the sequence's queue can still take (a token waiting to be handed out takes its place). */
static int queue_room(hearth_seq *s) {
    pthread_mutex_lock(&s->mu);
    int room = s->q_cap - s->q_count - s->pend;
    pthread_mutex_unlock(&s->mu);
    return room;
}

static void push_event(hearth_seq *s, const hearth_token_event *ev) {
    pthread_mutex_lock(&s->mu);
    HEARTH_ASSERT(s->q_count < s->q_cap);
    s->queue[(s->q_head + s->q_count) % s->q_cap] = *ev;
    s->q_count++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void hand_out(hearth_engine *e);

/* A running sequence gives its slot and KV blocks back. */
static void leave_slot(hearth_engine *e, hearth_seq *s) {
    hearth_kv_release_slot(e->kv, s->slot);
    e->running[s->slot] = NULL;
    s->slot = -1;
}

static void finish(hearth_engine *e, hearth_seq *s, hearth_finish why, const char *msg) {
    if (s->pend) hand_out(e); /* its chosen tokens go out before its end */
    double now = hearth_time_now();
    if (s->slot >= 0) leave_slot(e, s);
    /* Stats first: a consumer that sees the end also sees it counted. */
    pthread_mutex_lock(&e->mu);
    if (why == HEARTH_FINISH_CANCELED) e->stats.requests_canceled++;
    else if (why == HEARTH_FINISH_ERROR) e->stats.requests_error++;
    else e->stats.requests_ok++;
    e->stats.tokens_out += s->n_gen;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&s->mu);
    hearth_seq_summary *r = &s->summary;
    r->finish = why;
    r->n_prompt = s->req.n_prompt;
    r->n_gen = s->n_gen;
    double admit = s->t_admit > 0 ? s->t_admit : now, first = s->t_first > 0 ? s->t_first : now;
    r->queue_s = admit - s->t_submit;
    r->prefill_s = first - admit;
    r->decode_s = now - first;
    if (msg) snprintf(r->error, sizeof r->error, "%s", msg);
    s->finished = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    seq_unref(s);
}

/* Hand the chosen tokens waiting in the list to their consumers, in the
 * order chosen, each sequence's end (if its token brought one) after its
 * token. */
static void hand_out(hearth_engine *e) {
    if (e->n_pend == 0) return;
    const double t0 = hearth_time_now();
    for (int i = 0; i < e->n_pend; i++) e->pend_seq[i]->pend = 0;
    for (int i = 0; i < e->n_pend; i++) {
        push_event(e->pend_seq[i], &e->pend_ev[i]);
        if (e->pend_fin[i] != HEARTH_FINISH_NONE) finish(e, e->pend_seq[i], e->pend_fin[i], NULL);
    }
    e->n_pend = 0;
    pthread_mutex_lock(&e->mu);
    e->stats.deliver_s += hearth_time_now() - t0;
    pthread_mutex_unlock(&e->mu);
}

/* The waiting line is ordered by (priority, submission): a new sequence goes
 * behind every one of its priority or lower, a preempted one back ahead of
 * those that came after it. With every priority 0 that is first come, first
 * served, preempted ones first. */
static int waits_before(const hearth_seq *a, const hearth_seq *b) {
    return a->req.priority != b->req.priority ? a->req.priority < b->req.priority : a->task < b->task;
}

static void wait_insert(hearth_engine *e, hearth_seq *s) {
    hearth_seq **pp = &e->wait_head;
    if (e->wait_tail && !waits_before(s, e->wait_tail)) pp = &e->wait_tail->next; /* behind all: the usual case */
    while (*pp && !waits_before(s, *pp)) pp = &(*pp)->next;
    s->next = *pp;
    *pp = s;
    if (!s->next) e->wait_tail = s;
    e->n_waiting++;
}

static hearth_seq *wait_pop(hearth_engine *e) {
    hearth_seq *s = e->wait_head;
    if (!s) return NULL;
    e->wait_head = s->next;
    if (!e->wait_head) e->wait_tail = NULL;
    s->next = NULL;
    e->n_waiting--;
    return s;
}

/* Free a running sequence's blocks; it resumes later from its tokens. */
static void preempt(hearth_engine *e, hearth_seq *s) {
    leave_slot(e, s);
    s->n_computed = 0;
    s->draft = 0;
    s->summary.n_preempted++;
    wait_insert(e, s);
    pthread_mutex_lock(&e->mu);
    e->stats.preemptions++;
    pthread_mutex_unlock(&e->mu);
}

/* Whom a full KV cache preempts: the running sequence of the lowest priority
 * (the largest value), the newest admitted among equals (as vLLM's priority
 * policy picks); with every priority 0, the newest. */
static hearth_seq *preemption_victim(hearth_engine *e) {
    hearth_seq *best = NULL;
    for (int i = 0; i < e->o.n_slots; i++) {
        hearth_seq *s = e->running[i];
        if (s && (!best || s->req.priority > best->req.priority ||
                  (s->req.priority == best->req.priority && s->t_admit > best->t_admit)))
            best = s;
    }
    return best;
}

static void drain_mailbox(hearth_engine *e) {
    pthread_mutex_lock(&e->mu);
    hearth_seq *m = e->mail_head;
    e->mail_head = e->mail_tail = NULL;
    e->n_mail = 0;
    pthread_mutex_unlock(&e->mu);
    while (m) {
        hearth_seq *n = m->next;
        wait_insert(e, m);
        m = n;
    }
}

static void retire_canceled(hearth_engine *e) {
    for (int i = 0; i < e->o.n_slots; i++)
        if (e->running[i] && atomic_load(&e->running[i]->cancel))
            finish(e, e->running[i], HEARTH_FINISH_CANCELED, NULL);
    hearth_seq **pp = &e->wait_head, *prev = NULL;
    while (*pp) {
        hearth_seq *s = *pp;
        if (atomic_load(&s->cancel)) {
            *pp = s->next;
            if (e->wait_tail == s) e->wait_tail = prev;
            e->n_waiting--;
            finish(e, s, HEARTH_FINISH_CANCELED, NULL);
        } else {
            prev = s;
            pp = &s->next;
        }
    }
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* The root its prefix-cache blocks chain from (NULL: the base model's, no salt). */
static const uint8_t *seq_root(const hearth_seq *s) { return s->has_root ? s->root : NULL; }

static int same_root(const hearth_seq *a, const hearth_seq *b) {
    return a->has_root == b->has_root && (!a->has_root || !memcmp(a->root, b->root, 32));
}

/* A running sequence is still to compute full prompt blocks that s shares
 * (the same ids from the start, the same adapter): the n choices of one
 * request, or users of one system prompt arriving together. s then waits
 * until they are computed and cached and takes them from the cache rather
 * than computing them a second time beside them. */
static int prefix_in_flight(const hearth_engine *e, const hearth_seq *s) {
    if (s->req.want_prompt_logprobs) return 0; /* it computes every position anyway */
    const int bs = hearth_kv_block_size(e->kv);
    for (int i = 0; i < e->o.n_slots; i++) {
        const hearth_seq *t = e->running[i];
        if (!t || !same_root(t, s) || t->req.want_prompt_logprobs) continue;
        if (t->n_computed >= t->req.n_prompt) continue; /* decoding: its prompt's blocks are cached already */
        /* s computes its last token itself; past t's next block the answer is known (hundreds of streams
         * sharing a long system prompt must not cost a full compare each) */
        const int lim = min_int(min_int(s->n_tokens - 1, t->req.n_prompt), t->n_computed + bs);
        int c = 0;
        while (c < lim && s->tokens[c] == t->tokens[c]) c++;
        if (c / bs * bs > t->n_computed) return 1;
    }
    return 0;
}

static void admit(hearth_engine *e) {
    for (int slot = 0; slot < e->o.n_slots && e->wait_head; slot++) {
        if (e->running[slot]) continue;
        hearth_seq *s = e->wait_head;
        int blocks = (s->n_tokens + hearth_kv_block_size(e->kv)) / hearth_kv_block_size(e->kv);
        int any_running = 0;
        for (int i = 0; i < e->o.n_slots; i++) any_running |= e->running[i] != NULL;
        if (any_running && blocks > hearth_kv_n_available_blocks(e->kv)) break; /* FIFO: no overtaking */
        if (prefix_in_flight(e, s)) break; /* FIFO too: those behind it wait the step or two */
        wait_pop(e);
        s->slot = slot;
        s->plan = s->draft = 0; /* until planned (a step in flight reads the running sequences' plans) */
        /* prompt logprobs need every prompt position's logits: no cached prefix */
        s->n_computed = s->req.want_prompt_logprobs
                            ? 0
                            : hearth_kv_prefix_acquire(e->kv, slot, seq_root(s), s->tokens, s->n_tokens);
        if (s->t_admit == 0) { /* first admission: the prompt's cache hit is what usage reports */
            s->t_admit = hearth_time_now();
            pthread_mutex_lock(&s->mu);
            s->summary.n_cached = s->n_computed;
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_lock(&e->mu);
            e->stats.prefix_lookups++;
            e->stats.prefix_hits += s->n_computed > 0;
            e->stats.tokens_cached += s->n_computed;
            pthread_mutex_unlock(&e->mu);
        }
        e->running[slot] = s;
    }
}

static int admitted_first(const void *a, const void *b) {
    const struct admitted *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t ? 1 : x->slot - y->slot;
}

/* Speculative decoding: behind each decoding sequence's row (planned, one
 * each, in admission order), the tokens that prompt lookup drafts for it,
 * within what the step has left of rows (before any prefill) and of logit
 * rows (one is kept for every running sequence), within its max_new, its
 * context and its event queue, and only where its KV blocks are at hand: a
 * draft never preempts. Returns the rows added. */
static int plan_drafts(hearth_engine *e, int n, int n_run, int *logits_left) {
    int added = 0;
    const int g_min = e->o.spec_ngram_min > 0 ? e->o.spec_ngram_min : 2;
    const int g_max = e->o.spec_ngram_max > 0 ? e->o.spec_ngram_max : 4;
    for (int i = 0; i < n_run; i++) {
        hearth_seq *s = e->running[e->order[i].slot];
        if (!s || s->plan != 1 || s->n_gen == 0) continue; /* its decode row (a prompt's end gives no draft) */
        if (s->draft_cap <= 0) s->draft_cap = e->o.spec_tokens;
        int k = min_int(s->draft_cap, min_int(e->max_tokens - n - added, *logits_left));
        k = min_int(k, min_int(s->req.max_new - s->n_gen - 1, e->ctx - s->n_tokens - 1));
        k = min_int(k, queue_room(s) - 1);
        if (k <= 0) continue;
        k = hearth_draft_ngram(s->tokens, s->n_tokens, g_min, g_max < g_min ? g_min : g_max, k,
                               s->tokens + s->n_tokens);
        if (k == 0 || hearth_kv_reserve(e->kv, s->slot, s->n_tokens + k) != HEARTH_OK) continue;
        s->draft = k;
        s->plan += k;
        added += k;
        *logits_left -= k;
    }
    return added;
}

/* Plan the batch: decode rows first (latency; the budget holds one for each
 * slot), then prefill chunks in admission order (first come, first served:
 * a later request in a lower slot never takes the budget from an earlier
 * one), within the token budget, reserving KV for each; a sequence that
 * cannot get blocks preempts the newest running one (possibly itself)
 * before any row is written, so no row ever targets released blocks. */
static int plan(hearth_engine *e) {
    int n = 0, n_run = 0;
    for (int i = 0; i < e->o.n_slots; i++)
        if (e->running[i]) {
            e->running[i]->plan = e->running[i]->draft = 0;
            e->order[n_run++] = (struct admitted){e->running[i]->t_admit, i};
        }
    /* t_admit is kept across preemption, so a preempted sequence keeps its place */
    qsort(e->order, (size_t)n_run, sizeof *e->order, admitted_first);
    /* logit rows not yet promised: one is kept for every running sequence */
    int logits_left = hearth_model_max_logit_rows(e->m) - n_run;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && e->o.spec_tokens > 0) n += plan_drafts(e, n, n_run, &logits_left);
        for (int i = 0; i < n_run && n < e->max_tokens; i++) {
            /* by slot: a sequence preempted or finished earlier in this plan has left it */
            hearth_seq *s = e->running[e->order[i].slot];
            if (!s) continue;
            int todo = s->n_tokens - s->n_computed, is_decode = todo == 1;
            if (todo <= 0 || is_decode != (pass == 0)) continue;
            if (queue_room(s) <= 0) continue; /* backpressure: paused until the reader catches up */
            int chunk = todo < e->max_tokens - n ? todo : e->max_tokens - n;
            if (s->req.want_prompt_logprobs && s->n_computed < s->req.n_prompt - 1) {
                /* a logit row for each prompt position it scores; its kept row serves one of them */
                chunk = min_int(chunk, 1 + (logits_left > 0 ? logits_left : 0));
                const int rows = min_int(chunk, s->req.n_prompt - 1 - s->n_computed) +
                                 (s->n_computed + chunk == s->n_tokens); /* and its last row's, past the prompt */
                logits_left -= rows - 1;
            }
            hearth_status st;
            while ((st = hearth_kv_reserve(e->kv, s->slot, s->n_computed + chunk)) == HEARTH_EBUSY) {
                hearth_seq *victim = preemption_victim(e);
                n -= victim->plan;
                victim->plan = 0;
                preempt(e, victim);
                if (victim == s) break;
            }
            if (s->slot < 0) continue; /* preempted itself */
            if (st != HEARTH_OK) {
                finish(e, s, HEARTH_FINISH_ERROR, "no room in the KV cache");
                continue;
            }
            s->plan = chunk;
            n += chunk;
        }
    }
    return n;
}

/* A sequence that fed drafts keeps the rows up to its first refused one
 * (hearth_choose): its KV past them is rewritten by the next step, its
 * full blocks within them join the prefix cache. */
static void keep_drafts(hearth_engine *e, hearth_seq *s, int r0, int *kept) {
    int k = 1;
    while (k <= s->draft && e->row_id[r0 + k] >= 0) k++;
    s->n_computed -= 1 + s->draft - k; /* the last known token and the k - 1 drafts kept */
    hearth_kv_prefix_commit(e->kv, s->slot, seq_root(s), s->tokens, s->n_computed);
    pthread_mutex_lock(&e->mu);
    e->stats.spec_drafted += s->draft;
    e->stats.spec_accepted += k - 1;
    pthread_mutex_unlock(&e->mu);
    /* text that stops following its lookup drafts little, text that copies drafts long */
    s->draft_cap = k - 1 == s->draft ? min_int(2 * s->draft_cap, e->o.spec_tokens) : k;
    s->draft = 0;
    *kept = k;
}

/* Row r's token joins s and waits in the hand-out list, with the end it
 * brings (returned; the sequence then left its slot). */
static hearth_finish take_token(hearth_engine *e, hearth_seq *s, int r, double now) {
    hearth_token_event *ev = &e->pend_ev[e->n_pend];
    *ev = (hearth_token_event){0};
    ev->has_logprobs = s->req.want_logprobs;
    ev->id = e->row_id[r]; /* the chooser had the sampler accept it */
    if (ev->has_logprobs) ev->lp = e->row_lps[r];
    if (s->t_first == 0) s->t_first = now;
    s->tokens[s->n_tokens++] = ev->id;
    s->n_gen++;
    int is_stop = 0;
    for (int k = 0; k < s->req.n_stop; k++) is_stop |= s->req.stop_ids[k] == ev->id;
    hearth_finish fin = HEARTH_FINISH_NONE;
    if (is_stop) fin = HEARTH_FINISH_STOP;
    else if (s->n_gen >= s->req.max_new || s->n_tokens >= e->ctx) fin = HEARTH_FINISH_LENGTH;
    if (fin != HEARTH_FINISH_NONE) leave_slot(e, s); /* its blocks go back now; the end goes out with the token */
    e->pend_seq[e->n_pend] = s;
    e->pend_fin[e->n_pend++] = fin;
    s->pend++;
    return fin;
}

/* After a step's forward: start it on the device, hand the last step's
 * tokens out meanwhile, and begin its choice. Each row holds a reference to
 * its sequence until its tokens are read (collect), which a step issued ahead
 * does across a loop turn, whose cancellations may finish the sequence. */
static void launch(hearth_engine *e, flight *f) {
    if (e->overlap) hearth_model_submit(e->m);
    const double t_out = hearth_time_now();
    hand_out(e);
    f->out_s = hearth_time_now() - t_out;
    for (int r = 0; r < f->n_rows; r++) {
        hearth_seq *s = f->row_seq[r];
        atomic_fetch_add(&s->refs, 1);
        f->row_smp[r] = &s->sampler;
        f->row_lp[r] = (uint8_t)s->req.want_logprobs;
    }
    f->begun = f->st == HEARTH_OK;
    if (f->begun)
        f->st = hearth_choose_begin(&e->chooser, e->m, f->row_smp, f->row_lp, f->any_draft ? f->row_draft : NULL,
                                    f->n_rows, &f->err);
}

/* Plan a batch and issue it as f. Returns 0 when there was nothing to run. */
static int issue(hearth_engine *e, flight *f) {
    const double t_plan = hearth_time_now();
    if (plan(e) == 0) return 0;
    int n = 0, n_rows = 0, n_plp = 0, adapters = 0, any_draft = 0;
    for (int i = 0; i < e->o.n_slots; i++) {
        hearth_seq *s = e->running[i];
        if (!s || s->plan == 0) continue;
        for (int k = 0; k < s->plan; k++) {
            const int p = s->n_computed + k;
            e->b_tokens[n + k] = s->tokens[p];
            e->b_seq[n + k] = s->slot;
            e->b_pos[n + k] = p;
            e->b_adapter[n + k] = s->req.adapter;
            if (s->req.want_prompt_logprobs && p < s->req.n_prompt - 1) { /* scores prompt token p + 1 */
                e->plp_seq[n_plp] = s;
                e->plp_pos[n_plp] = p;
                e->plp_row[n_plp++] = n + k;
            }
        }
        adapters |= s->req.adapter;
        n += s->plan;
        s->n_computed += s->plan;
        any_draft |= s->draft;
        /* a chunk that ends the known tokens: logits for its last row, and for each drafted token's row after it */
        if (s->n_computed == s->n_tokens + s->draft)
            for (int j = s->draft; j >= 0; j--) {
                e->b_rows[n_rows] = n - 1 - j;
                f->row_draft[n_rows] = j > 0 ? s->tokens[s->n_tokens + s->draft - j] : -1;
                f->row_seq[n_rows++] = s;
            }
    }
    memcpy(e->b_rows + n_rows, e->plp_row, sizeof *e->plp_row * (size_t)n_plp); /* behind the rows chosen from */
    *f = (flight){n, n_rows, n_plp, any_draft, 0, HEARTH_OK, {0}, hearth_time_now(), 0, 0,
                  f->row_seq, f->row_draft, f->row_smp, f->row_lp};
    f->plan_s = f->t0 - t_plan;
    f->st = hearth_model_set_row_adapters(e->m, adapters ? e->b_adapter : NULL, n, &f->err);
    if (f->st == HEARTH_OK)
        f->st = hearth_model_forward(e->m, e->kv, e->b_tokens, e->b_seq, e->b_pos, n, e->b_rows, n_rows + n_plp, NULL,
                                     &f->err);
    launch(e, f);
    return 1;
}

/* Whether the next step can be issued before f's tokens are read: f is one
 * decode row of every running sequence, all chosen by the pick op (the host
 * reads no logits, which the next forward overwrites), and each sequence's
 * next row is known but for its token, which the pick leaves on the device
 * for the next forward (hearth_model_forward given no tokens). A token that
 * ends its sequence leaves that row's work unused; an end known now (the
 * length) and anything the host must see first (drafts, prompt logprobs, the
 * hidden state, adapters, a request waiting with a slot free) make the engine
 * read f first, as every step did before. */
static int ahead_ok(hearth_engine *e, const flight *f) {
    if (!e->ahead_on || f->st != HEARTH_OK || f->n_plp || f->any_draft || f->n_rows != f->n || e->o.spec_tokens > 0)
        return 0;
    int n_run = 0;
    for (int i = 0; i < e->o.n_slots; i++) n_run += e->running[i] != NULL;
    /* every running sequence in f; a request waits only where no slot is free (it is admitted when one ends) */
    if (n_run != f->n_rows || (e->wait_head && n_run < e->o.n_slots)) return 0;
    for (int r = 0; r < f->n_rows; r++) {
        hearth_seq *s = f->row_seq[r];
        if (s->slot < 0 || atomic_load(&s->cancel) || s->req.adapter || (s->req.want_hidden && s->n_gen == 0) ||
            s->n_computed != s->n_tokens || s->n_gen + 1 >= s->req.max_new || s->n_tokens + 1 >= e->ctx ||
            queue_room(s) < 2 || !hearth_choose_by_pick(&e->chooser, e->m, &s->sampler))
            return 0;
    }
    return 1;
}

/* Issue g, the step after f, before f's tokens are read: row r is f's row
 * r's sequence at its next position, its token the one f's pick chose.
 * Returns 0, issuing nothing, where a sequence's next position has no room. */
static int issue_ahead(hearth_engine *e, const flight *f, flight *g) {
    for (int r = 0; r < f->n_rows; r++) {
        const hearth_seq *s = f->row_seq[r];
        if (hearth_kv_reserve(e->kv, s->slot, s->n_computed + 1) != HEARTH_OK) return 0; /* no preemption here */
    }
    const int n = f->n_rows;
    *g = (flight){n, n, 0, 0, 0, HEARTH_OK, {0}, hearth_time_now(), 0, 0,
                  g->row_seq, g->row_draft, g->row_smp, g->row_lp};
    for (int r = 0; r < n; r++) {
        hearth_seq *s = f->row_seq[r];
        g->row_seq[r] = s;
        g->row_draft[r] = -1;
        e->b_seq[r] = s->slot;
        e->b_pos[r] = s->n_computed++;
        e->b_rows[r] = r;
        s->plan = 1;
    }
    g->st = hearth_model_set_row_adapters(e->m, NULL, n, &g->err);
    if (g->st == HEARTH_OK)
        g->st = hearth_model_forward(e->m, e->kv, NULL, e->b_seq, e->b_pos, n, e->b_rows, n, NULL, &g->err);
    launch(e, g);
    pthread_mutex_lock(&e->mu);
    e->stats.steps_ahead++;
    pthread_mutex_unlock(&e->mu);
    return 1;
}

/* Read f's tokens: end its choice, then each sequence takes its token (and
 * kept drafts) or its end. */
static void collect(hearth_engine *e, flight *f) {
    const int n_rows = f->n_rows, n_plp = f->n_plp;
    if (f->begun) {
        hearth_err cerr = {0};
        hearth_status st = hearth_choose_end(&e->chooser, e->m, f->row_smp, f->row_lp,
                                             f->any_draft ? f->row_draft : NULL, n_rows, e->row_id, e->row_lps, &cerr);
        if (f->st == HEARTH_OK && st != HEARTH_OK) f->st = st, f->err = cerr;
    }
    hearth_status st = f->st;
    /* its time: from its issue, or where it was issued ahead from the last step's choice (not counted twice) */
    const double t_chosen = hearth_time_now(), from = f->t0 > e->t_chosen ? f->t0 : e->t_chosen;
    pthread_mutex_lock(&e->mu);
    e->stats.steps++;
    e->stats.step_rows += f->n;
    e->stats.step_s += t_chosen - from - (f->t0 >= e->t_chosen ? f->out_s : 0);
    e->t_chosen = t_chosen;
    e->stats.plan_s += f->plan_s;
    e->stats.rows_by_pick_op = e->chooser.rows_pick;
    e->stats.rows_by_host_sampler = e->chooser.rows_host;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n_plp && st == HEARTH_OK; i++) { /* the prompt rows' logprobs, on the host */
        hearth_seq *s = e->plp_seq[i];
        const int p = e->plp_pos[i];
        st = hearth_model_logits_row(e->m, n_rows + i, e->plp_logits, &f->err);
        if (st == HEARTH_OK)
            hearth_logprobs_fill(e->plp_logits, e->vocab, s->tokens[p + 1], s->req.sampling.top_logprobs,
                                 &s->prompt_lp[p + 1]);
    }
    if (st == HEARTH_OK) /* full blocks computed with known tokens join the prefix cache (with drafts: below) */
        for (int i = 0; i < e->o.n_slots; i++) {
            hearth_seq *s = e->running[i];
            if (s && s->plan && !s->draft)
                hearth_kv_prefix_commit(e->kv, s->slot, seq_root(s), s->tokens, min_int(s->n_computed, s->n_tokens));
        }
    double now = hearth_time_now();
    for (int r = 0; r < n_rows;) {
        hearth_seq *s = f->row_seq[r];
        const int r0 = r;
        r += 1 + s->draft; /* its rows: the last known token's, then each draft's */
        if (s->slot < 0) continue;
        if (st != HEARTH_OK) {
            finish(e, s, HEARTH_FINISH_ERROR, f->err.msg);
            continue;
        }
        if (s->req.want_hidden && s->n_gen == 0) { /* the prompt's last position: its row of this forward */
            hearth_err herr = {0};
            if (hearth_model_hidden_row(e->m, r0, s->hidden, &herr) != HEARTH_OK) {
                finish(e, s, HEARTH_FINISH_ERROR, herr.msg);
                continue;
            }
            pthread_mutex_lock(&s->mu);
            s->has_hidden = 1;
            pthread_mutex_unlock(&s->mu);
        }
        if (s->prompt_lp && s->n_gen == 0) { /* the prompt's records are all written: the consumer may read them */
            pthread_mutex_lock(&s->mu);
            s->has_prompt_lp = 1;
            pthread_mutex_unlock(&s->mu);
        }
        int kept = 1;
        if (s->draft) keep_drafts(e, s, r0, &kept);
        for (int j = 0; j < kept; j++)
            if (take_token(e, s, r0 + j, now) != HEARTH_FINISH_NONE) break; /* an end drops the tokens after it */
    }
    for (int r = 0; r < n_rows; r++) seq_unref(f->row_seq[r]);
}

/* Read the step in flight, if any, issuing nothing more (before the loop
 * turn's other work touches the model, the cache or the sequences). */
static void settle(hearth_engine *e) {
    if (!e->ahead) return;
    collect(e, &e->fl[e->cur]);
    e->ahead = 0;
}

/* Build one batch, run it, choose its tokens; with a step in flight, issue
 * the next where it can before reading the one in flight. Returns 1 if any
 * work was done (the turn's time since t_turn then counted before the tokens
 * go out, so that a consumer who sees its last token reads stats that hold
 * its step). */
static int step(hearth_engine *e, double t_turn) {
    flight *f = &e->fl[e->cur];
    if (!e->ahead && !issue(e, f)) {
        hand_out(e);
        return 0;
    }
    const int more = ahead_ok(e, f) && issue_ahead(e, f, &e->fl[e->cur ^ 1]);
    if (e->ahead && !more) hand_out(e); /* issued last turn: the last tokens go out while it runs */
    collect(e, f);
    e->ahead = more;
    if (more) e->cur ^= 1;
    double t_end = hearth_time_now();
    pthread_mutex_lock(&e->mu);
    e->stats.turn_s += t_end - t_turn;
    pthread_mutex_unlock(&e->mu);
    if (!e->overlap) { /* the hand-out is the turn's too: counted after, as it hands out the ends */
        hand_out(e);
        const double dt = hearth_time_now() - t_end;
        pthread_mutex_lock(&e->mu);
        e->stats.turn_s += dt;
        pthread_mutex_unlock(&e->mu);
    }
    return 1;
}

/* The running/waiting gauges /stats reads; returns running. */
static int update_gauges(hearth_engine *e) {
    int running = 0;
    for (int i = 0; i < e->o.n_slots; i++) running += e->running[i] != NULL;
    const hearth_kv_disk *disk = hearth_kv_disk_of(e->kv);
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->o.n_slots; i++) {
        const hearth_seq *q = e->running[i];
        e->slots[i] = q ? (hearth_slot_info){1, q->task, q->req.n_prompt, q->n_computed, q->n_gen, q->req.max_new}
                        : (hearth_slot_info){0};
    }
    e->stats.running = running;
    e->stats.waiting = e->n_waiting + e->n_mail;
    e->stats.has_disk = disk != NULL;
    if (disk) hearth_kv_disk_stats_get(disk, &e->stats.disk);
    pthread_mutex_unlock(&e->mu);
    return running;
}

/* Errands are taken one at a time and only while the engine is not stopping,
 * so that a caller who sees it stopping with its errand not taken may leave. */
static void run_errands(hearth_engine *e) {
    for (;;) {
        pthread_mutex_lock(&e->mu);
        errand *x = e->stop ? NULL : e->errands;
        if (x) e->errands = x->next, x->taken = 1;
        pthread_mutex_unlock(&e->mu);
        if (!x) return;
        hearth_status st = x->fn(e, x);
        pthread_mutex_lock(&e->mu);
        x->st = st;
        x->done = 1; /* x is the caller's: gone from here on */
        pthread_cond_broadcast(&e->errand_cv);
        pthread_mutex_unlock(&e->mu);
    }
}

/* Run x on the engine thread and wait for it (EBUSY when the engine stopped before taking it). */
static hearth_status run_errand(hearth_engine *e, errand *x, hearth_err *err) {
    pthread_mutex_lock(&e->mu);
    if (!e->stop) {
        errand **p = &e->errands;
        while (*p) p = &(*p)->next;
        *p = x;
        pthread_cond_signal(&e->cv);
    }
    while (!x->done && !(e->stop && !x->taken)) pthread_cond_wait(&e->errand_cv, &e->mu);
    const int done = x->done;
    pthread_mutex_unlock(&e->mu);
    if (!done) return hearth_err_set(err, HEARTH_EBUSY, "the engine stopped first");
    if (x->st != HEARTH_OK && err) *err = x->err;
    return x->st;
}

static int lora_entry(const hearth_engine *e, int id) {
    for (int i = 0; id > 0 && i < HEARTH_MAX_LORA; i++)
        if (e->lora[i].id == id) return i;
    return -1;
}

/* Under mu: adapter id (loaded in the model) accepted by submit. */
static void lora_publish(hearth_engine *e, int id) {
    int i = 0;
    while (i < HEARTH_MAX_LORA && e->lora[i].id) i++;
    if (i == HEARTH_MAX_LORA) return; /* cannot be: the model holds no more */
    e->lora[i].id = id;
    e->lora[i].draining = 0;
    memcpy(e->lora[i].fp, hearth_model_lora_fingerprint(e->m, id), 32);
}

/* Unloaded adapters that no sequence runs, waits or is submitted with any more
 * give their memory back. */
static void reap_adapters(hearth_engine *e) {
    int gone[HEARTH_MAX_LORA], n_gone = 0;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < HEARTH_MAX_LORA && e->n_draining; i++) {
        const int id = e->lora[i].id;
        if (!e->lora[i].draining) continue;
        int used = 0;
        for (int k = 0; k < e->o.n_slots && !used; k++) used = e->running[k] && e->running[k]->req.adapter == id;
        for (const hearth_seq *q = e->wait_head; q && !used; q = q->next) used = q->req.adapter == id;
        for (const hearth_seq *q = e->mail_head; q && !used; q = q->next) used = q->req.adapter == id;
        if (used) continue;
        gone[n_gone++] = id;
        memset(&e->lora[i], 0, sizeof e->lora[i]);
        e->n_draining--;
    }
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n_gone; i++) hearth_model_remove_lora(e->m, gone[i], NULL); /* draining: submit refuses it */
}

static void *engine_main(void *arg) {
    hearth_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int any = e->n_waiting > 0 || e->mail_head != NULL || e->n_pend > 0 || e->ahead; /* step() reads the last */
        for (int i = 0; i < e->o.n_slots && !any; i++) any = e->running[i] != NULL;
        any = any || e->errands || e->n_draining;
        while (!any && !e->stop) {
            pthread_cond_wait(&e->cv, &e->mu);
            any = e->mail_head != NULL || e->errands || e->n_draining;
        }
        int stop = e->stop, paused = e->paused, errands = e->errands != NULL || e->n_draining;
        pthread_mutex_unlock(&e->mu);
        const double t_turn = hearth_time_now();
        drain_mailbox(e);
        /* errands and adapters' reaping touch the model and the cache; a pause or a stop reads what runs */
        if (stop || paused || errands) settle(e);
        run_errands(e);
        if (stop) {
            hand_out(e);
            for (int i = 0; i < e->o.n_slots; i++)
                if (e->running[i]) finish(e, e->running[i], HEARTH_FINISH_CANCELED, "engine stopped");
            hearth_seq *s;
            while ((s = wait_pop(e))) finish(e, s, HEARTH_FINISH_CANCELED, "engine stopped");
            reap_adapters(e); /* their sequences are gone: the model goes back as loaded */
            return NULL;
        }
        retire_canceled(e);
        reap_adapters(e);
        admit(e);
        int running = update_gauges(e);
        if (paused) { /* a cancel sets no condition: look again within a millisecond, or at a submit or resume */
            hand_out(e); /* the last step's tokens */
            pthread_mutex_lock(&e->mu);
            struct timespec dl = deadline_ms(1);
            if (e->paused && !e->stop && !e->mail_head) pthread_cond_timedwait(&e->cv, &e->mu, &dl);
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        int worked = step(e, t_turn);
        update_gauges(e);
        if (!worked) {
            /* Everyone running is paused by backpressure: nap briefly. */
            struct timespec ts = {0, 200000};
            if (running) nanosleep(&ts, NULL);
        }
    }
}

/* Warm-up (opts.warmup, device backends only): two forwards of each step
 * shape the engine will meet most (1..16 rows, then powers of two up to
 * max_tokens), rows spread over up to n_slots sequences from position 0, and
 * a pick of one row. A device loads a kernel at its first launch (CUDA's lazy
 * module loading: ~20 ms for the first 16-row chunk after a 4000-token prefix
 * hit, s6-run10), and the CUDA backend captures a step's graph the second
 * time it sees it, so without this the first requests of each shape pay both.
 * The KV written is released and never joins the prefix cache. */
static void warm_up(hearth_engine *e) {
    const char *env = getenv("HEARTH_WARMUP"); /* 0: off (benchmarks of a cold start) */
    if (env && atoi(env) == 0) return;
    const double t0 = hearth_time_now();
    int sizes[32], n_sizes = 0, n_run = 0;
    for (int t = 1; t <= 16 && t <= e->max_tokens; t++) sizes[n_sizes++] = t;
    for (int t = 32; t < e->max_tokens && n_sizes < 31; t *= 2) sizes[n_sizes++] = t;
    if (e->max_tokens > 16) sizes[n_sizes++] = e->max_tokens;
    for (int i = 0; i < n_sizes; i++) {
        const int T = sizes[i], ns = T < e->o.n_slots ? T : e->o.n_slots;
        const int per = (T + ns - 1) / ns;
        if (per > e->ctx) break;
        int ok = 1;
        for (int k = 0; k < ns && ok; k++) ok = hearth_kv_reserve(e->kv, k, per) == HEARTH_OK;
        for (int t = 0; ok && t < T; t++) {
            e->b_tokens[t] = 0;
            e->b_seq[t] = t % ns;
            e->b_pos[t] = t / ns;
        }
        int32_t last = T - 1;
        hearth_err err = {0};
        for (int rep = 0; ok && rep < 2; rep++) {
            ok = hearth_model_forward(e->m, e->kv, e->b_tokens, e->b_seq, e->b_pos, T, &last, 1, NULL, &err) ==
                 HEARTH_OK;
            hearth_pick_params pp = {0};
            hearth_pick out;
            if (ok) ok = hearth_model_pick(e->m, 1, &pp, &out, &err) == HEARTH_OK;
        }
        n_run += ok;
        for (int k = 0; k < ns; k++) hearth_kv_release_slot(e->kv, k);
        if (!ok) break; /* the pool is smaller than this shape: later ones are larger */
    }
    hearth_log_info("engine: warm-up ran %d step shapes (1..%d rows) in %.0f ms", n_run, n_run ? sizes[n_run - 1] : 0,
                    1e3 * (hearth_time_now() - t0));
}

hearth_status hearth_engine_new(hearth_engine **out, hearth_model *m, hearth_kv *kv, const hearth_engine_opts *o,
                                hearth_err *err) {
    *out = NULL;
    /* every running sequence's decode row must fit in one step (as vLLM asks max_num_batched_tokens >=
     * max_num_seqs): a smaller step would starve the slots planned last */
    if (o->n_slots > hearth_model_max_tokens(m))
        return hearth_err_set(err, HEARTH_EINVAL,
                              "engine: %d sequences at once need steps of at least %d tokens, and a step holds %d "
                              "(raise --batch or lower --max-batch)",
                              o->n_slots, o->n_slots, hearth_model_max_tokens(m));
    hearth_engine *e = calloc(1, sizeof *e);
    if (!e) return hearth_err_set(err, HEARTH_ENOMEM, "engine: out of memory");
    e->m = m;
    e->kv = kv;
    e->o = *o;
    if (e->o.n_slots <= 0) e->o.n_slots = 1;
    if (e->o.max_waiting <= 0) e->o.max_waiting = 256;
    if (e->o.queue_cap <= 0) e->o.queue_cap = 64;
    e->vocab = hearth_model_config_get(m)->vocab_size;
    /* The prefix-cache namespace: the weights, the KV scheme, the format. */
    hearth_sha256 ns;
    uint8_t key[32];
    int32_t scheme[2] = {hearth_kv_block_size(kv), 1 /* format version */};
    hearth_sha256_init(&ns);
    hearth_sha256_update(&ns, hearth_model_fingerprint(m), 32);
    /* "kv:f32", "kv:f16", "kv:e4m3": the element type decides the cached bytes */
    char kv_scheme[32];
    int n_scheme = snprintf(kv_scheme, sizeof kv_scheme, "kv:%s", hearth_dtype_get(hearth_kv_type(kv))->name);
    hearth_sha256_update(&ns, kv_scheme, (size_t)n_scheme);
    hearth_sha256_update(&ns, scheme, sizeof scheme);
    hearth_sha256_final(&ns, key);
    hearth_kv_set_namespace(kv, key);
    e->max_tokens = hearth_model_max_tokens(m);
    e->ctx = hearth_kv_max_ctx(kv);
    size_t T = (size_t)e->max_tokens;
    e->running = calloc((size_t)e->o.n_slots, sizeof *e->running);
    e->slots = calloc((size_t)e->o.n_slots, sizeof *e->slots);
    e->order = calloc((size_t)e->o.n_slots, sizeof *e->order);
    e->b_tokens = malloc(T * 4);
    e->b_seq = malloc(T * 4);
    e->b_pos = malloc(T * 4);
    e->b_rows = malloc(T * 4);
    e->b_adapter = malloc(T * 4);
    int fl_ok = 1;
    for (int k = 0; k < 2; k++) {
        flight *f = &e->fl[k];
        f->row_seq = malloc(T * sizeof *f->row_seq);
        f->row_draft = malloc(T * sizeof *f->row_draft);
        f->row_smp = malloc(T * sizeof *f->row_smp);
        f->row_lp = malloc(T);
        fl_ok &= f->row_seq && f->row_draft && f->row_smp && f->row_lp;
    }
    e->plp_seq = malloc(T * sizeof *e->plp_seq);
    e->plp_pos = malloc(T * sizeof *e->plp_pos);
    e->plp_row = malloc(T * sizeof *e->plp_row);
    e->plp_logits = malloc(sizeof *e->plp_logits * (size_t)e->vocab);
    e->row_id = malloc(T * sizeof *e->row_id);
    e->row_lps = malloc(T * sizeof *e->row_lps);
    e->pend_seq = malloc(T * sizeof *e->pend_seq);
    e->pend_ev = malloc(T * sizeof *e->pend_ev);
    e->pend_fin = malloc(T * sizeof *e->pend_fin);
    if (!e->running || !e->slots || !e->order || !e->b_tokens || !e->b_seq || !e->b_pos || !e->b_rows ||
        !e->b_adapter || !fl_ok || !e->plp_seq || !e->plp_pos || !e->plp_row || !e->plp_logits || !e->row_id || !e->row_lps || !e->pend_seq || !e->pend_ev || !e->pend_fin) {
        hearth_engine_free(e);
        return hearth_err_set(err, HEARTH_ENOMEM, "engine: out of memory for step buffers");
    }
    /* the host sampler's rows of one step on up to 8 threads (one sequence: the caller's) */
    int smp_threads = hearth_cpu_count() < 8 ? hearth_cpu_count() : 8;
    hearth_status cst =
        hearth_chooser_init(&e->chooser, e->max_tokens, e->vocab, e->o.n_slots > 1 ? smp_threads : 1, err);
    if (cst != HEARTH_OK) {
        hearth_engine_free(e);
        return cst;
    }
    if (e->o.warmup && hearth_model_on_device(m)) warm_up(e);
    /* unset: on device backends; 0: never (an A/B switch); else always (tests run it on the CPU) */
    const char *ov = getenv("HEARTH_ENGINE_OVERLAP");
    e->overlap = ov ? atoi(ov) != 0 : hearth_model_on_device(m);
    /* unset: where the engine overlaps; 0: never; else always (with the overlap: tests run it on the CPU) */
    const char *ah = getenv("HEARTH_ENGINE_AHEAD");
    e->ahead_on = e->overlap && (ah ? atoi(ah) != 0 : 1);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_cond_init(&e->errand_cv, NULL);
    int ids[HEARTH_MAX_LORA], n_ids = hearth_model_lora_ids(m, ids, HEARTH_MAX_LORA);
    for (int i = 0; i < n_ids; i++) lora_publish(e, ids[i]);
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        pthread_cond_destroy(&e->errand_cv);
        e->thread = 0;
        hearth_engine_free(e);
        return hearth_err_set(err, HEARTH_EIO, "engine: cannot start its thread");
    }
    pthread_mutex_lock(&e->mu);
    e->stats.kv_blocks_total = hearth_kv_n_blocks(kv);
    pthread_mutex_unlock(&e->mu);
    *out = e;
    return HEARTH_OK;
}

void hearth_engine_free(hearth_engine *e) {
    if (!e) return;
    if (e->thread) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_broadcast(&e->errand_cv);
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        pthread_cond_destroy(&e->errand_cv);
    }
    free(e->running);
    free(e->slots);
    free(e->order);
    free(e->b_tokens);
    free(e->b_seq);
    free(e->b_pos);
    free(e->b_rows);
    free(e->b_adapter);
    for (int k = 0; k < 2; k++) {
        free(e->fl[k].row_seq);
        free(e->fl[k].row_draft);
        free(e->fl[k].row_smp);
        free(e->fl[k].row_lp);
    }
    free(e->plp_seq);
    free(e->plp_pos);
    free(e->plp_row);
    free(e->plp_logits);
    free(e->row_id);
    free(e->row_lps);
    free(e->pend_seq);
    free(e->pend_ev);
    free(e->pend_fin);
    hearth_chooser_deinit(&e->chooser);
    free(e);
}

hearth_status hearth_engine_submit(hearth_engine *e, hearth_gen_request *r, hearth_seq **out, hearth_err *err) {
    *out = NULL;
    if (r->n_prompt <= 0) return hearth_err_set(err, HEARTH_EINVAL, "the prompt is empty");
    if (r->n_prompt >= e->ctx)
        return hearth_err_set(err, HEARTH_ERANGE,
                              "the prompt has %d tokens; the context holds %d (prompt plus at least one token)",
                              r->n_prompt, e->ctx);
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->vocab)
            return hearth_err_set(err, HEARTH_ERANGE, "prompt token id %d outside the vocabulary [0, %d)",
                                  r->prompt[i], e->vocab);
    if (r->max_new <= 0) return hearth_err_set(err, HEARTH_EINVAL, "max_tokens must be at least 1");
    uint8_t lora_fp[32];
    if (r->adapter) {
        pthread_mutex_lock(&e->mu);
        const int i = lora_entry(e, r->adapter), ok = i >= 0 && !e->lora[i].draining;
        if (ok) memcpy(lora_fp, e->lora[i].fp, 32);
        pthread_mutex_unlock(&e->mu);
        if (!ok) return hearth_err_set(err, HEARTH_EINVAL, "LoRA adapter %d %s", r->adapter,
                                       i >= 0 ? "was unloaded" : "is not loaded");
    }
    if (r->max_new > e->ctx - r->n_prompt) r->max_new = e->ctx - r->n_prompt; /* clamp to the room left */
    hearth_seq *s = calloc(1, sizeof *s);
    if (!s) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    hearth_status st = hearth_sampler_init(&s->sampler, &r->sampling, e->vocab, err);
    if (st != HEARTH_OK) {
        free(s);
        return st;
    }
    r->sampling.constraint = (hearth_constraint){0}; /* the sampler's now, whatever follows */
    s->q_cap = e->o.queue_cap;
    s->queue = malloc(sizeof *s->queue * (size_t)s->q_cap);
    s->tokens = malloc(sizeof *s->tokens * (size_t)(r->n_prompt + r->max_new));
    s->hidden_dim = r->want_hidden ? hearth_model_config_get(e->m)->hidden_size : 0;
    s->hidden = r->want_hidden ? malloc(sizeof *s->hidden * (size_t)s->hidden_dim) : NULL;
    s->prompt_lp = r->want_prompt_logprobs ? calloc((size_t)r->n_prompt, sizeof *s->prompt_lp) : NULL;
    if (!s->queue || !s->tokens || (r->want_hidden && !s->hidden) || (r->want_prompt_logprobs && !s->prompt_lp)) {
        hearth_sampler_deinit(&s->sampler);
        free(s->queue);
        free(s->tokens);
        free(s->hidden);
        free(s->prompt_lp);
        free(s);
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    }
    memcpy(s->tokens, r->prompt, sizeof *s->tokens * (size_t)r->n_prompt);
    if (s->prompt_lp) s->prompt_lp[0].chosen = (hearth_token_logprob){r->prompt[0], NAN}; /* nothing before it */
    hearth_sampler_accept_prompt(&s->sampler, r->prompt, r->n_prompt);
    s->n_tokens = r->n_prompt;
    s->slot = -1;
    s->t_submit = hearth_time_now();
    const uint8_t *fp = r->adapter ? lora_fp : NULL;
    if (r->has_cache_salt) { /* root = H("salt", adapter fingerprint or zeros, H(salt)) */
        static const uint8_t zeros[32];
        hearth_sha256 h;
        hearth_sha256_init(&h);
        hearth_sha256_update(&h, "salt", 4);
        hearth_sha256_update(&h, fp ? fp : zeros, 32);
        hearth_sha256_update(&h, r->cache_salt, 32);
        hearth_sha256_final(&h, s->root);
        s->has_root = 1;
    } else if (fp) {
        memcpy(s->root, fp, 32);
        s->has_root = 1;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    atomic_init(&s->refs, 2);
    atomic_init(&s->cancel, 0);
    pthread_mutex_lock(&e->mu);
    const int li = lora_entry(e, r->adapter), unloaded = r->adapter && (li < 0 || e->lora[li].draining);
    if (e->no_admission || e->stop || e->n_mail + e->n_waiting >= e->o.max_waiting || unloaded) {
        int closing = e->no_admission || e->stop;
        if (!unloaded) e->stats.requests_rejected++;
        pthread_mutex_unlock(&e->mu);
        atomic_init(&s->refs, 1);
        seq_unref(s);
        if (unloaded) return hearth_err_set(err, HEARTH_EINVAL, "LoRA adapter %d was unloaded", r->adapter);
        return hearth_err_set(err, HEARTH_EBUSY, closing ? "the server is shutting down"
                                                         : "too many requests waiting; try again later");
    }
    s->req = *r;
    s->task = ++e->n_tasks;
    s->req.sampling.logit_bias = NULL; /* the sampler keeps its own copy */
    r->prompt = NULL;                  /* ownership moved */
    if (e->mail_tail) e->mail_tail->next = s;
    else e->mail_head = s;
    e->mail_tail = s;
    e->n_mail++;
    e->stats.tokens_in += s->n_tokens;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    *out = s;
    return HEARTH_OK;
}

int hearth_engine_n_slots(const hearth_engine *e) { return e->o.n_slots; }
int hearth_engine_spec_tokens(const hearth_engine *e) { return e->o.spec_tokens; }

void hearth_engine_stats_get(hearth_engine *e, hearth_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
    /* racy reads of ints: gauges */
    out->kv_blocks_free = hearth_kv_n_free_blocks(e->kv);
    out->kv_blocks_cached = hearth_kv_n_cached_blocks(e->kv);
}

static hearth_status flush_errand(hearth_engine *e, errand *x) {
    hearth_status st = hearth_kv_flush(e->kv, &x->n, &x->err);
    update_gauges(e);
    return st;
}

hearth_status hearth_engine_flush_cache(hearth_engine *e, int *n_written, hearth_err *err) {
    if (n_written) *n_written = 0;
    if (!hearth_kv_disk_of(e->kv))
        return hearth_err_set(err, HEARTH_EINVAL, "the prefix cache has no disk tier (serve --cache-dir DIR)");
    errand x = {.fn = flush_errand};
    hearth_status st = run_errand(e, &x, err);
    if (st == HEARTH_OK && n_written) *n_written = x.n;
    return st;
}

static hearth_status lora_load_errand(hearth_engine *e, errand *x) {
    hearth_status st = hearth_model_add_staged(e->m, x->staged, &x->n, &x->err);
    if (st != HEARTH_OK) return st;
    pthread_mutex_lock(&e->mu);
    lora_publish(e, x->n);
    pthread_mutex_unlock(&e->mu);
    return HEARTH_OK;
}

hearth_status hearth_engine_lora_load(hearth_engine *e, const char *name, const char *dir, int *id, hearth_err *err) {
    *id = 0;
    errand x = {.fn = lora_load_errand};
    hearth_status st = hearth_lora_stage(&x.staged, e->m, name, dir, err); /* the file, beside the steps */
    if (st != HEARTH_OK) return st;
    if ((st = run_errand(e, &x, err)) == HEARTH_OK) *id = x.n;
    else if (!x.done) hearth_lora_staged_free(x.staged, e->m); /* the engine stopped: the errand never ran */
    return st;
}

hearth_status hearth_engine_lora_unload(hearth_engine *e, int id, hearth_err *err) {
    pthread_mutex_lock(&e->mu);
    const int i = lora_entry(e, id), ok = i >= 0 && !e->lora[i].draining;
    if (ok) {
        e->lora[i].draining = 1;
        e->n_draining++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return ok ? HEARTH_OK : hearth_err_set(err, HEARTH_ENOENT, "no LoRA adapter of id %d is loaded", id);
}

void hearth_engine_stop_admission(hearth_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->no_admission = 1;
    pthread_mutex_unlock(&e->mu);
}

int hearth_engine_slots(hearth_engine *e, hearth_slot_info *out, int cap) {
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->o.n_slots && i < cap; i++) out[i] = e->slots[i];
    pthread_mutex_unlock(&e->mu);
    return e->o.n_slots;
}

void hearth_engine_pause(hearth_engine *e, int paused) {
    pthread_mutex_lock(&e->mu);
    e->paused = paused != 0;
    e->stats.paused = e->paused;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int hearth_engine_active(hearth_engine *e) {
    pthread_mutex_lock(&e->mu);
    int n = e->stats.running + e->stats.waiting + e->n_mail;
    pthread_mutex_unlock(&e->mu);
    return n;
}
