/* test_engine.c - the continuous-batching engine: greedy output of every
 * request is the same alone and inside batches with mixed prompt lengths and
 * arrival times, under KV pressure (preemption), and the KV pool returns to
 * its baseline after every run. */
#include "testhelp.h"

#include "engine_rig.h"
#include "engine/choose.h"
#include "engine/draft.h"
#include "core/clock.h"
#include "ops/cpu/ops_cpu.h"

#define N_REQ 12
#define N_NEW RIG_NEW

/* The tiny qwen2 model on a CPU context of its own (threads: its pool's, the engine thread's included). */
static int rig_open_spec(rig *r, hearth_dtype kvt, int n_blocks, int n_slots, int max_tokens, int threads,
                         int spec) {
    hearth_cpu_ctx *cpu;
    memset(r, 0, sizeof *r);
    if (hearth_cpu_ctx_new(&cpu, threads, max_tokens, 512, 256, NULL)) return 0;
    if (rig_open_on_spec(r, &hearth_cpu_ops, cpu, test_path("tests/fixtures/tiny/qwen2-f32"), kvt, n_blocks,
                         n_slots, max_tokens, spec))
        return 1;
    rig_free(r);
    hearth_cpu_ctx_free(cpu);
    return 0;
}

static int rig_open_threads(rig *r, hearth_dtype kvt, int n_blocks, int n_slots, int max_tokens, int threads) {
    return rig_open_spec(r, kvt, n_blocks, n_slots, max_tokens, threads, 0);
}

static int rig_open_kv(rig *r, hearth_dtype kvt, int n_blocks, int n_slots, int max_tokens) {
    return rig_open_threads(r, kvt, n_blocks, n_slots, max_tokens, 2);
}

static int rig_open(rig *r, int n_blocks, int n_slots, int max_tokens) {
    return rig_open_kv(r, HEARTH_DT_F32, n_blocks, n_slots, max_tokens);
}

static void rig_close(rig *r) {
    rig_free(r);
    hearth_cpu_ctx_free(r->ctx);
}

static void reference(rig *r, int32_t out[N_REQ][N_NEW]) { rig_reference(r, N_REQ, out); }

static void run_batched(rig *r, int n_slots, int32_t want[N_REQ][N_NEW], int *preempted) {
    rig_batched(r, N_REQ, n_slots, want, preempted);
}

static void batching_case(hearth_dtype kvt) {
    rig r;
    int ok = rig_open_kv(&r, kvt, 64, 16, 64);
    CHECK_MSG(ok, "cannot open the tiny model");
    int32_t want[N_REQ][N_NEW];
    reference(&r, want);
    int pre;
    for (int slots = 1; slots <= 16; slots *= 4) run_batched(&r, slots, want, &pre);
    rig_close(&r);
}

TEST(engine_batching_never_changes_greedy_output) { batching_case(HEARTH_DT_F32); }

/* The same with an f16 KV cache (the GPU default): serial and batched agree. */
TEST(engine_batching_f16_kv) { batching_case(HEARTH_DT_F16); }

/* And with an FP8 (e4m3) cache. */
TEST(engine_batching_e4m3_kv) { batching_case(HEARTH_DT_E4M3); }

/* The model keeps logits for one row a slot (hearth_model_load's
 * max_logit_rows, what the session passes): a step asking for more is
 * refused by name, one within it is served. */
TEST(engine_model_logit_rows_bounded_by_slots) {
    rig r;
    int ok = rig_open(&r, 8, 2, 32);
    CHECK_MSG(ok, "cannot open the tiny model");
    int32_t ids[4] = {1, 2, 3, 4}, seq[4] = {0, 0, 1, 1}, pos[4] = {0, 1, 0, 1}, rows[3] = {1, 2, 3};
    CHECK_EQ(hearth_kv_reserve(r.kv, 0, 2), HEARTH_OK);
    CHECK_EQ(hearth_kv_reserve(r.kv, 1, 2), HEARTH_OK);
    hearth_err err = {0};
    CHECK_EQ(hearth_model_forward(r.m, r.kv, ids, seq, pos, 4, rows, 3, NULL, &err), HEARTH_EINVAL);
    CHECK_MSG(strstr(err.msg, "3 logit rows (max 2)") != NULL, "%s", err.msg);
    CHECK_EQ(hearth_model_forward(r.m, r.kv, ids, seq, pos, 4, rows + 1, 2, NULL, &err), HEARTH_OK);
    for (int k = 0; k < 2; k++) hearth_kv_release_slot(r.kv, k);
    rig_close(&r);
}

/* The pick's params go to the backend only where they changed (a greedy
 * stream's are the same every step): picks whose params repeat, change,
 * shrink and come back each equal the host rule. */
TEST(engine_model_pick_params_copied_when_changed) {
    rig r;
    CHECK_MSG(rig_open(&r, 8, 4, 32), "cannot open the tiny model");
    enum { T = 4 };
    const int vocab = hearth_model_config_get(r.m)->vocab_size;
    int32_t ids[T] = {5, 9, 2, 7}, seq[T] = {0, 1, 2, 3}, pos[T] = {0, 0, 0, 0}, rows[T] = {0, 1, 2, 3};
    for (int k = 0; k < T; k++) CHECK_EQ(hearth_kv_reserve(r.kv, k, 1), HEARTH_OK);
    float *logits = malloc(sizeof(float) * T * (size_t)vocab);
    hearth_err err = {0};
    CHECK_EQ(hearth_model_forward(r.m, r.kv, ids, seq, pos, T, rows, T, logits, &err), HEARTH_OK);
    const int bad = rig_pick_sequence(r.m, logits, T);
    free(logits);
    for (int k = 0; k < T; k++) hearth_kv_release_slot(r.kv, k);
    rig_close(&r);
    CHECK_MSG(bad == 0, "%d picked rows differ from the host rule", bad);
}

/* Steps issued before the last one's picks are read give the tokens of
 * steps read one at a time (the model's half of the engine's steps ahead). */
TEST(engine_model_steps_ahead_same_tokens) {
    rig r;
    CHECK_MSG(rig_open(&r, 16, 4, 32), "cannot open the tiny model");
    for (int T = 1; T <= 4; T += 3) CHECK_EQ(rig_ahead_sequence(r.m, r.kv, T, 24), 0);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 16);
    rig_close(&r);
}

/* A choice the chooser refuses (more rows than it holds) is reported by
 * status, with or without an error struct (hearth_generate's err may be
 * NULL), and leaves the chooser as it was: the next choice is taken. */
TEST(engine_choose_refusal_reported_without_an_error_struct) {
    rig r;
    CHECK_MSG(rig_open(&r, 8, 2, 32), "cannot open the tiny model");
    const int vocab = hearth_model_config_get(r.m)->vocab_size;
    hearth_chooser ch;
    CHECK_EQ(hearth_chooser_init(&ch, 1, vocab, 1, NULL), HEARTH_OK);
    hearth_sampling sp;
    hearth_sampling_default(&sp);
    sp.temperature = 0;
    hearth_sampler s[2];
    hearth_sampler_init(&s[0], &sp, vocab, NULL);
    hearth_sampler_init(&s[1], &sp, vocab, NULL);
    hearth_sampler *smp[2] = {&s[0], &s[1]};
    uint8_t lp[2] = {0, 0};
    int32_t ids[2];
    hearth_logprobs lps[2];
    hearth_err err = {0};
    CHECK_EQ(hearth_choose(&ch, r.m, smp, lp, NULL, 2, ids, lps, NULL), HEARTH_EINVAL);
    CHECK_EQ(hearth_choose(&ch, r.m, smp, lp, NULL, 2, ids, lps, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "2 rows (max 1)");
    int32_t tok = 5, seq = 0, pos = 0, row = 0;
    CHECK_EQ(hearth_kv_reserve(r.kv, 0, 1), HEARTH_OK);
    CHECK_EQ(hearth_model_forward(r.m, r.kv, &tok, &seq, &pos, 1, &row, 1, NULL, &err), HEARTH_OK);
    CHECK_EQ(hearth_choose(&ch, r.m, smp, lp, NULL, 1, ids, lps, NULL), HEARTH_OK);
    CHECK(ids[0] >= 0 && ids[0] < vocab);
    hearth_kv_release_slot(r.kv, 0);
    hearth_sampler_deinit(&s[0]);
    hearth_sampler_deinit(&s[1]);
    hearth_chooser_deinit(&ch);
    rig_close(&r);
}

typedef struct {
    int32_t *id;
    float *lp;
    int n, cap;
} lp_sink;

static int lp_collect(void *u, int32_t id, const hearth_logprobs *lp) {
    lp_sink *c = u;
    if (c->n < c->cap) c->id[c->n] = id, c->lp[c->n++] = lp ? lp->chosen.logprob : NAN;
    return 0;
}

/* Past 512 positions the CPU attention cuts a row's positions in segments
 * and merges them; where the cuts fall depends only on the row, so long
 * prompts still give the same greedy tokens, and the same bits of their
 * logprobs, alone (hearth_generate) and batched: four of 430-1150 tokens,
 * prefilled in chunks of 64 beside each other's decode rows, the third
 * arriving while the first two run. */
TEST(engine_long_contexts_batched_equal_serial) {
    enum { NQ = 4, NEW = 12, CTX = 1200 };
    static const int len[NQ] = {1100, 430, 900, 1150}; /* up to three segments a row */
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 2, 64, 512, CTX, NULL), HEARTH_OK);
    hearth_model *m;
    hearth_kv *kv;
    hearth_err err = {0};
    CHECK_EQ(hearth_model_load(&m, test_path("tests/fixtures/tiny/qwen2-f32"), &hearth_cpu_ops, cpu, 64, NQ, &err),
             HEARTH_OK);
    const hearth_model_config *c = hearth_model_config_get(m);
    CHECK_EQ(hearth_kv_new(&kv, &hearth_cpu_ops, cpu, c->n_layers, hearth_model_kv_dim(m), c->head_dim, HEARTH_DT_F16,
                           16, NQ * CTX / 16, NQ, CTX, &err),
             HEARTH_OK);
    int32_t want[NQ][NEW], got[NQ][NEW];
    float want_lp[NQ][NEW], got_lp[NQ][NEW];
    int32_t *ids = malloc(sizeof(int32_t) * CTX);
    for (int i = 0; i < NQ; i++) { /* alone, the serial path */
        for (int k = 0; k < len[i]; k++) ids[k] = (int32_t)((i * 131 + k * 17 + 5) % c->vocab_size);
        hearth_sampling sp;
        hearth_sampling_default(&sp);
        sp.temperature = 0;
        hearth_sampler smp;
        hearth_sampler_init(&smp, &sp, c->vocab_size, NULL);
        lp_sink sink = {want[i], want_lp[i], 0, NEW};
        hearth_gen_stats gs;
        CHECK_EQ(hearth_generate(m, kv, 0, 0, ids, len[i], NEW, &smp, NULL, 0, 1, lp_collect, &sink, &gs, NULL),
                 HEARTH_OK);
        hearth_sampler_deinit(&smp);
    }
    free(ids);
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = NQ, .max_waiting = 8, .queue_cap = 64};
    CHECK_EQ(hearth_engine_new(&e, m, kv, &o, &err), HEARTH_OK);
    hearth_seq *sq[NQ];
    for (int i = 0; i < NQ; i++) {
        hearth_gen_request q = {0};
        q.prompt = malloc(sizeof(int32_t) * (size_t)len[i]);
        for (int k = 0; k < len[i]; k++) q.prompt[k] = (int32_t)((i * 131 + k * 17 + 5) % c->vocab_size);
        q.n_prompt = len[i];
        q.max_new = NEW;
        hearth_sampling_default(&q.sampling);
        q.sampling.temperature = 0;
        q.want_logprobs = 1;
        CHECK_EQ(hearth_engine_submit(e, &q, &sq[i], &err), HEARTH_OK);
        if (i == 1) usleep(20000);
    }
    int same = 1;
    for (int i = 0; i < NQ; i++) {
        int n = 0;
        hearth_token_event ev;
        while (hearth_seq_next(sq[i], &ev, -1) == 1)
            if (n < NEW) got_lp[i][n] = ev.has_logprobs ? ev.lp.chosen.logprob : NAN, got[i][n++] = ev.id;
        hearth_seq_release(sq[i]);
        same &= n == NEW && !memcmp(got[i], want[i], sizeof want[i]) &&
                !memcmp(got_lp[i], want_lp[i], sizeof want_lp[i]);
        CHECK_MSG(same, "request %d (%d prompt tokens): batched tokens or logprobs differ from its serial ones", i,
                  len[i]);
    }
    hearth_engine_stats st;
    hearth_engine_stats_get(e, &st);
    CHECK(st.steps > 4 * NEW); /* the prompts went in chunks, beside decode rows */
    hearth_engine_free(e);
    hearth_kv_free(kv);
    hearth_model_free(m);
    hearth_cpu_ctx_free(cpu);
}

/* A KV cache whose position is not whole heads is refused by name; the CPU
 * backend's view keeps its head dimension (the head-block layout). */
TEST(engine_kv_cache_heads) {
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 1, 16, 64, 64, NULL), HEARTH_OK);
    hearth_kv *kv = NULL;
    hearth_err err = {0};
    CHECK_EQ(hearth_kv_new(&kv, &hearth_cpu_ops, cpu, 2, 100, 64, HEARTH_DT_F16, 16, 8, 1, 64, &err), HEARTH_EINVAL);
    CHECK(kv == NULL);
    CHECK_MSG(strstr(err.msg, "not whole heads of 64") != NULL, "%s", err.msg);
    CHECK_EQ(hearth_kv_new(&kv, &hearth_cpu_ops, cpu, 2, 128, 64, HEARTH_DT_F16, 16, 8, 1, 64, &err), HEARTH_OK);
    CHECK_EQ(hearth_kv_view_get(kv)->head_dim, 64);
    hearth_kv_free(kv);
    hearth_cpu_ctx_free(cpu);
}

static void preemption_case(void) {
    rig r;
    /* 8 blocks of 16 positions for 8 slots: sequences of up to 63 positions
     * need 4 blocks, so the pool runs dry and the newest are preempted. */
    int ok = rig_open(&r, 8, 8, 32);
    CHECK_MSG(ok, "cannot open the tiny model");
    int32_t want[N_REQ][N_NEW];
    reference(&r, want);
    int pre = 0;
    run_batched(&r, 8, want, &pre);
    printf("  preemptions: %d\n", pre);
    CHECK(pre > 0);
    rig_close(&r);
}

TEST(engine_preemption_keeps_output) { preemption_case(); }

static hearth_seq *submit_prio(hearth_engine *e, int n, int mul, int add, int max_new, int vocab, int priority) {
    hearth_gen_request q = {0};
    q.priority = priority;
    q.prompt = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) q.prompt[i] = (i * mul + add) % vocab;
    q.n_prompt = n;
    q.max_new = max_new;
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = 0;
    hearth_seq *s = NULL;
    hearth_err err = {0};
    if (hearth_engine_submit(e, &q, &s, &err) != HEARTH_OK) {
        free(q.prompt);
        printf("  submit: %s\n", err.msg);
    }
    return s;
}

static hearth_seq *submit_ids(hearth_engine *e, int n, int mul, int add, int max_new, int vocab) {
    return submit_prio(e, n, mul, add, max_new, vocab, 0);
}

/* Wait (up to 5 s) until n sequences run. */
static int wait_running(hearth_engine *e, int n) {
    for (int i = 0; i < 50000; i++) {
        hearth_engine_stats st;
        hearth_engine_stats_get(e, &st);
        if (st.running == n && st.waiting == 0) return 1;
        usleep(100);
    }
    return 0;
}

/* Prompts are prefilled first come, first served: B, admitted after A into
 * the lower slot that P left, waits for A's prompt rather than taking the
 * step budget from it (planned in slot order, B's 40 tokens went first and
 * A's 250 waited). The engine is paused (no step runs; admission and
 * cancellation go on) while the scene is set: P in slot 0, A admitted beside
 * it, P cancelled, B admitted into slot 0; then it resumes with both prompts
 * whole. A step of two tokens makes A's prompt 125 steps. */
TEST(engine_prefill_first_come_first_served) {
    rig r;
    int ok = rig_open_threads(&r, HEARTH_DT_F32, 64, 2, 2, 2); /* a step of two tokens, the least for two slots */
    CHECK_MSG(ok, "cannot open the tiny model");
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 2, .max_waiting = 8, .queue_cap = 4};
    hearth_err err = {0};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, &err), HEARTH_OK);
    const int vocab = hearth_model_config_get(r.m)->vocab_size;
    hearth_token_event ev;
    hearth_seq *p = submit_ids(e, 2, 1, 1, 200, vocab);
    CHECK_MSG(p && hearth_seq_next(p, &ev, -1) == 1, "P did not start"); /* P runs in slot 0 */
    hearth_engine_pause(e, 1);
    const double ta = hearth_time_now();
    hearth_seq *a = submit_ids(e, 250, 7, 3, 1, vocab);
    CHECK_MSG(a && wait_running(e, 2), "A was not admitted beside P while paused");
    hearth_seq_cancel(p);
    CHECK_MSG(wait_running(e, 1), "P did not leave while paused");
    const double tb = hearth_time_now();
    hearth_seq *b = submit_ids(e, 40, 11, 5, 1, vocab);
    CHECK_MSG(b && wait_running(e, 2), "B was not admitted while paused"); /* into slot 0 */
    hearth_engine_stats st;
    hearth_engine_stats_get(e, &st);
    CHECK_EQ(st.paused, 1);
    const long steps = st.steps;
    hearth_engine_pause(e, 0);
    double first[2];
    hearth_seq *ab[2] = {a, b};
    const double t_sub[2] = {ta, tb};
    for (int k = 0; k < 2; k++) {
        while (hearth_seq_next(ab[k], &ev, -1) == 1) {}
        hearth_seq_summary sum;
        hearth_seq_summary_get(ab[k], &sum);
        CHECK_EQ(sum.finish, HEARTH_FINISH_LENGTH);
        first[k] = t_sub[k] + sum.queue_s + sum.prefill_s;
        hearth_seq_release(ab[k]);
    }
    while (hearth_seq_next(p, &ev, -1) == 1) {}
    hearth_seq_release(p);
    hearth_engine_stats_get(e, &st);
    printf("  %ld steps after the resume\n", st.steps - steps);
    CHECK(st.steps - steps >= 145); /* 125 for A's prompt, 20 for B's */
    CHECK_MSG(first[0] < first[1], "A's first token at %.4f s, B's at %.4f s: B took the budget", first[0] - ta,
              first[1] - ta);
    hearth_engine_free(e);
    rig_close(&r);
}

/* vLLM's priority scheduling: requests wait for the one slot in the order of
 * their priority (lower first), equal ones in arrival order. The scene is set
 * while paused: A in the slot, then B (5), C (1), D (1), E (-1) waiting. */
TEST(engine_priority_orders_the_wait) {
    rig r;
    CHECK_MSG(rig_open(&r, 64, 1, 64), "cannot open the tiny model");
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 1, .max_waiting = 8, .queue_cap = 8};
    hearth_err err = {0};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, &err), HEARTH_OK);
    const int vocab = hearth_model_config_get(r.m)->vocab_size, prio[5] = {0, 5, 1, 1, -1};
    hearth_engine_pause(e, 1);
    hearth_seq *s[5];
    double t_sub[5], t_admit[5];
    for (int i = 0; i < 5; i++) {
        t_sub[i] = hearth_time_now();
        s[i] = submit_prio(e, 6, 3 + i, i, 3, vocab, prio[i]);
        CHECK(s[i] != NULL);
        if (i == 0) CHECK_MSG(wait_running(e, 1), "A was not admitted while paused");
    }
    for (int i = 0; i < 500; i++) { /* the others reach the waiting line */
        hearth_engine_stats st;
        hearth_engine_stats_get(e, &st);
        if (st.waiting == 4) break;
        usleep(1000);
    }
    hearth_engine_pause(e, 0);
    for (int i = 0; i < 5; i++) {
        hearth_token_event ev;
        while (hearth_seq_next(s[i], &ev, -1) == 1) {}
        hearth_seq_summary sum;
        hearth_seq_summary_get(s[i], &sum);
        CHECK_EQ(sum.finish, HEARTH_FINISH_LENGTH);
        t_admit[i] = t_sub[i] + sum.queue_s;
        hearth_seq_release(s[i]);
    }
    const int want[5] = {0, 4, 2, 3, 1}; /* A, then E, C, D, B */
    for (int k = 1; k < 5; k++)
        CHECK_MSG(t_admit[want[k - 1]] < t_admit[want[k]], "request %d (priority %d) was admitted after %d (%d)",
                  want[k - 1], prio[want[k - 1]], want[k], prio[want[k]]);
    hearth_engine_free(e);
    rig_close(&r);
}

/* Under KV pressure the preempted one is the lowest priority, not the newest:
 * L (priority 5) admitted before H (0), both too long to finish side by side
 * in 6 blocks; H runs through, L gives way and ends after it. */
TEST(engine_preempts_the_lowest_priority) {
    rig r;
    CHECK_MSG(rig_open(&r, 6, 2, 32), "cannot open the tiny model");
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 2, .max_waiting = 8, .queue_cap = 64};
    hearth_err err = {0};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, &err), HEARTH_OK);
    const int vocab = hearth_model_config_get(r.m)->vocab_size;
    hearth_engine_pause(e, 1);
    hearth_seq *l = submit_prio(e, 8, 3, 1, 56, vocab, 5);
    CHECK_MSG(l && wait_running(e, 1), "L was not admitted while paused");
    hearth_seq *h = submit_prio(e, 8, 5, 2, 56, vocab, 0);
    CHECK_MSG(h && wait_running(e, 2), "H was not admitted beside L");
    hearth_engine_pause(e, 0);
    hearth_seq_summary sl, sh;
    hearth_token_event ev;
    while (hearth_seq_next(h, &ev, -1) == 1) {}
    while (hearth_seq_next(l, &ev, -1) == 1) {}
    hearth_seq_summary_get(l, &sl);
    hearth_seq_summary_get(h, &sh);
    CHECK_EQ(sl.finish, HEARTH_FINISH_LENGTH);
    CHECK_EQ(sh.finish, HEARTH_FINISH_LENGTH);
    CHECK_MSG(sl.n_preempted > 0 && sh.n_preempted == 0, "preempted: L %d times, H %d times", sl.n_preempted,
              sh.n_preempted);
    hearth_seq_release(l);
    hearth_seq_release(h);
    hearth_engine_free(e);
    rig_close(&r);
}

static void rejects_and_cancels_case(void) {
    rig r;
    int ok = rig_open(&r, 32, 2, 32);
    CHECK_MSG(ok, "cannot open the tiny model");
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 2, .max_waiting = 2, .queue_cap = 2};
    hearth_err err = {0};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, &err), HEARTH_OK);
    hearth_gen_request q = {0};
    hearth_sampling_default(&q.sampling);
    q.prompt = calloc(300, sizeof(int32_t));
    q.n_prompt = 300;
    q.max_new = 4;
    hearth_seq *s;
    CHECK_EQ(hearth_engine_submit(e, &q, &s, &err), HEARTH_ERANGE); /* longer than the context */
    CHECK_CONTAINS(err.msg, "300 tokens");
    q.n_prompt = 4;
    q.prompt[1] = 100000;
    CHECK_EQ(hearth_engine_submit(e, &q, &s, &err), HEARTH_ERANGE);
    q.prompt[1] = 1;
    q.sampling.top_p = 2;
    CHECK_EQ(hearth_engine_submit(e, &q, &s, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "top_p");
    q.sampling.top_p = 1;
    q.max_new = 200; /* clamped to the room left */
    CHECK_EQ(hearth_engine_submit(e, &q, &s, &err), HEARTH_OK);
    hearth_token_event ev;
    CHECK_EQ(hearth_seq_next(s, &ev, 5000), 1);
    hearth_seq_cancel(s);
    while (hearth_seq_next(s, &ev, 5000) == 1) {}
    hearth_seq_summary sum;
    hearth_seq_summary_get(s, &sum);
    CHECK_EQ(sum.finish, HEARTH_FINISH_CANCELED);
    hearth_seq_release(s);
    hearth_engine_free(e);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 32);
    rig_close(&r);
}

TEST(engine_rejects_and_cancels) { rejects_and_cancels_case(); }

/* A device engine hands a step's tokens out after starting the next step's
 * forward (engine.c hand_out); HEARTH_ENGINE_OVERLAP=1 makes the CPU engine
 * do the same, so the deferred hand-out, its backpressure (queue_cap 2) and
 * ends, preemption and cancellation are checked here too. */
TEST(engine_hand_out_after_next_forward) {
    setenv("HEARTH_ENGINE_OVERLAP", "1", 1);
    batching_case(HEARTH_DT_F32);
    preemption_case();
    rejects_and_cancels_case();
    unsetenv("HEARTH_ENGINE_OVERLAP");
}

static hearth_seq_summary one(hearth_engine *e, const int32_t *ids, int n, int n_new, int32_t *out) {
    return rig_one(e, ids, n, n_new, 0, out);
}

/* spec: the engine drafts (speculative decoding), whose kept drafts' full blocks join the cache too */
static void multi_turn_case(int spec) {
    rig r, fresh;
    int ok = rig_open_spec(&r, HEARTH_DT_F32, 64, 4, 64, 2, spec) && rig_open(&fresh, 64, 4, 64);
    CHECK_MSG(ok, "cannot open the tiny model");
    hearth_engine *e, *e2;
    hearth_engine_opts o = {.n_slots = 4, .spec_tokens = spec}, o2 = {.n_slots = 4};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, NULL), HEARTH_OK);
    CHECK_EQ(hearth_engine_new(&e2, fresh.m, fresh.kv, &o2, NULL), HEARTH_OK);
    int vocab = hearth_model_config_get(r.m)->vocab_size;
    int32_t conv[200], out[64], out2[64];
    int n = 40;
    for (int i = 0; i < n; i++) conv[i] = (i * 37 + 11) % vocab;
    hearth_seq_summary s1 = one(e, conv, n, 20, out);
    CHECK_EQ(s1.n_gen, 20);
    CHECK_EQ(s1.n_cached, 0);
    /* turn 2: previous prompt + reply + a new user message */
    memcpy(conv + n, out, sizeof(int32_t) * 20);
    n += 20;
    for (int i = 0; i < 10; i++) conv[n++] = (i * 53 + 7) % vocab;
    hearth_seq_summary s2 = one(e, conv, n, 16, out);
    CHECK_MSG(s2.n_cached >= (40 + 20) / 16 * 16, "cached %d tokens, expected >= %d", s2.n_cached, (60 / 16) * 16);
    /* the same turn on an engine with an empty cache gives the same output */
    hearth_seq_summary s3 = one(e2, conv, n, 16, out2);
    CHECK_EQ(s3.n_cached, 0);
    CHECK(memcmp(out, out2, sizeof(int32_t) * 16) == 0);
    /* the identical prompt again: all but the last block come from the cache */
    hearth_seq_summary s4 = one(e, conv, n, 16, out2);
    CHECK_EQ(s4.n_cached, (n - 1) / 16 * 16);
    CHECK(memcmp(out, out2, sizeof(int32_t) * 16) == 0);
    hearth_engine_stats st;
    hearth_engine_stats_get(e, &st);
    CHECK_EQ(st.prefix_hits, 2);
    CHECK(st.kv_blocks_cached > 0);
    if (spec) printf("  drafted %ld, accepted %ld\n", st.spec_drafted, st.spec_accepted);
    CHECK(spec ? st.spec_accepted > 0 : st.spec_drafted == 0);
    hearth_engine_free(e);
    hearth_engine_free(e2);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64);
    rig_close(&r);
    rig_close(&fresh);
}

TEST(engine_prefix_cache_multi_turn) { multi_turn_case(0); }

/* Requests that share a prompt, submitted together (a request's n choices,
 * users of one system prompt): its full blocks are computed once; the others
 * wait for them and take them from the cache, with the outputs of the serial
 * path. Then a shared 33-token head of otherwise different prompts: its two
 * full blocks, once (the rounds' heads differ). */
TEST(engine_shared_prompt_prefilled_once) {
    rig r, fresh;
    CHECK_MSG(rig_open(&r, 64, 4, 64) && rig_open(&fresh, 64, 1, 64), "cannot open the tiny model");
    hearth_engine *e, *e1;
    hearth_engine_opts o = {.n_slots = 4}, o1 = {.n_slots = 1};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, NULL), HEARTH_OK);
    CHECK_EQ(hearth_engine_new(&e1, fresh.m, fresh.kv, &o1, NULL), HEARTH_OK);
    int vocab = hearth_model_config_get(r.m)->vocab_size;
    for (int shared_head = 0; shared_head < 2; shared_head++) {
        int32_t ids[4][40], want[4][12], got[4][12];
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 40; i++) /* the same 40 ids, or the same 33 then each its own */
                ids[k][i] = (int32_t)((i * 37 + 11 + 3 * shared_head + (shared_head && i >= 33 ? 5 * k + 1 : 0)) %
                                      vocab);
        for (int k = 0; k < 4; k++) one(e1, ids[k], 40, 12, want[k]);
        hearth_seq *sq[4];
        for (int k = 0; k < 4; k++) { /* all at once */
            hearth_gen_request q = {0};
            q.prompt = malloc(sizeof ids[k]);
            memcpy(q.prompt, ids[k], sizeof ids[k]);
            q.n_prompt = 40;
            q.max_new = 12;
            hearth_sampling_default(&q.sampling);
            q.sampling.temperature = 0;
            CHECK_EQ(hearth_engine_submit(e, &q, &sq[k], NULL), HEARTH_OK);
        }
        int cached = 0;
        for (int k = 0; k < 4; k++) {
            hearth_token_event ev;
            int n = 0;
            while (hearth_seq_next(sq[k], &ev, -1) == 1) got[k][n++] = ev.id;
            hearth_seq_summary sum;
            hearth_seq_summary_get(sq[k], &sum);
            hearth_seq_release(sq[k]);
            CHECK_EQ(n, 12);
            CHECK_MSG(!memcmp(got[k], want[k], sizeof got[k]), "request %d: not the serial output", k);
            cached += sum.n_cached;
        }
        CHECK_MSG(cached == 3 * 32, "round %d: %d positions from the cache, expected %d", shared_head, cached,
                  3 * 32);
    }
    hearth_engine_free(e);
    hearth_engine_free(e1);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64); /* nothing held: no leak */
    rig_close(&r);
    rig_close(&fresh);
}

/* A pool too small to keep every finished prompt cached: the LRU evicts the
 * oldest cached blocks to admit new work, outputs stay those of the serial
 * path, an old prompt comes back uncached and the newest cached. */
TEST(engine_prefix_cache_eviction_keeps_output) {
    rig r, fresh;
    int ok = rig_open(&r, 12, 2, 64) && rig_open(&fresh, 64, 1, 64);
    CHECK_MSG(ok, "cannot open the tiny model");
    int32_t want[N_REQ][N_NEW];
    reference(&fresh, want);
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 2};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, NULL), HEARTH_OK);
    int vocab = hearth_model_config_get(r.m)->vocab_size;
    int32_t ids[64], out[N_NEW];
    int n, cached_seen = 0;
    for (int i = 0; i < N_REQ; i++) {
        rig_prompt(i, ids, &n, vocab);
        hearth_seq_summary s = one(e, ids, n, N_NEW, out);
        CHECK_EQ(s.n_gen, N_NEW);
        CHECK_MSG(memcmp(out, want[i], sizeof out) == 0, "request %d differs from its serial output", i);
        cached_seen += hearth_kv_n_cached_blocks(r.kv);
        CHECK(hearth_kv_n_cached_blocks(r.kv) <= 12);
    }
    CHECK_MSG(cached_seen > 12, "the pool never filled with cached blocks (%d)", cached_seen);
    rig_prompt(3, ids, &n, vocab); /* 24 tokens, a full block cached, then 19 newer blocks: evicted */
    CHECK(n > 16);
    hearth_seq_summary s0 = one(e, ids, n, N_NEW, out);
    CHECK_EQ(s0.n_cached, 0);
    CHECK(memcmp(out, want[3], sizeof out) == 0);
    rig_prompt(N_REQ - 1, ids, &n, vocab); /* the newest: still cached */
    hearth_seq_summary s1 = one(e, ids, n, N_NEW, out);
    CHECK_EQ(s1.n_cached, (n - 1) / 16 * 16);
    CHECK(memcmp(out, want[N_REQ - 1], sizeof out) == 0);
    hearth_engine_free(e);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 12);
    rig_close(&r);
    rig_close(&fresh);
}

/* ---- speculative decoding by prompt lookup (engine/draft.h) ---- */

TEST(draft_ngram_continues_the_latest_match) {
    int32_t out[8];
    const int32_t a[] = {1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3, 4};
    /* "2 3 4" last came before "7 8": the latest match wins, and the longest suffix ("3 4" is shorter) */
    CHECK_EQ(hearth_draft_ngram(a, 14, 2, 4, 3, out), 3);
    CHECK(out[0] == 7 && out[1] == 8 && out[2] == 2);
    CHECK_EQ(hearth_draft_ngram(a, 14, 2, 4, 8, out), 5); /* the continuation runs to the end of the ids */
    CHECK(out[0] == 7 && out[1] == 8 && out[2] == 2 && out[3] == 3 && out[4] == 4);
    const int32_t b[] = {1, 2, 3, 9, 3, 5, 6};
    CHECK_EQ(hearth_draft_ngram(b, 7, 2, 4, 4, out), 0); /* "5 6" never came before */
    const int32_t c[] = {1, 2, 9, 8, 9};
    CHECK_EQ(hearth_draft_ngram(c, 5, 2, 4, 4, out), 0);  /* one token's match is below g_min 2 */
    CHECK_EQ(hearth_draft_ngram(c, 5, 1, 4, 4, out), 2);  /* ... and with g_min 1: what followed the first 9 */
    CHECK(out[0] == 8 && out[1] == 9);
    const int32_t d[] = {5, 5, 5, 5};
    CHECK_EQ(hearth_draft_ngram(d, 4, 2, 4, 4, out), 1); /* "5 5 5" at 0 is followed by the last 5 alone */
    CHECK_EQ(out[0], 5);
    CHECK_EQ(hearth_draft_ngram(d, 1, 1, 4, 4, out), 0); /* nothing before the only token */
    CHECK_EQ(hearth_draft_ngram(a, 14, 2, 4, 0, out), 0);
}

/* Greedy requests with drafts: every request's tokens are its serial ones,
 * alone and 4 and 16 at once, with tokens handed out after the next forward
 * (the device engines' order) and under KV pressure (preemption); drafts were
 * both kept and refused. */
TEST(engine_spec_ngram_keeps_greedy_output) {
    rig r;
    int ok = rig_open_spec(&r, HEARTH_DT_F32, 64, 16, 64, 2, 4);
    CHECK_MSG(ok, "cannot open the tiny model");
    int32_t want[N_REQ][N_NEW];
    reference(&r, want);
    int pre;
    for (int slots = 1; slots <= 16; slots *= 4) run_batched(&r, slots, want, &pre);
    setenv("HEARTH_ENGINE_OVERLAP", "1", 1);
    run_batched(&r, 4, want, &pre);
    unsetenv("HEARTH_ENGINE_OVERLAP");
    rig_close(&r);
    ok = rig_open_spec(&r, HEARTH_DT_F32, 8, 8, 32, 2, 3); /* as preemption_case: the pool runs dry */
    CHECK_MSG(ok, "cannot open the tiny model");
    reference(&r, want);
    run_batched(&r, 8, want, &pre);
    printf("  preemptions: %d\n", pre);
    CHECK(pre > 0);
    rig_close(&r);
}

TEST(engine_spec_ngram_prefix_cache_multi_turn) { multi_turn_case(4); }

/* Request i of a sampled run: a prompt that repeats itself (so that lookup
 * drafts), seed i, the sampler's state moved by every token. */
static hearth_seq *submit_sampled(hearth_engine *e, int i, int vocab, int host_path) {
    hearth_gen_request q = {0};
    q.n_prompt = 30;
    q.prompt = malloc(sizeof(int32_t) * 30);
    for (int k = 0; k < 30; k++) q.prompt[k] = (int32_t)((i * 13 + (k % 7) * 29 + 3) % vocab);
    q.max_new = 40;
    q.want_logprobs = 1;
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = 0.7f;
    q.sampling.seed = 1000 + (uint64_t)i;
    q.sampling.has_seed = 1;
    q.sampling.top_logprobs = 3;
    if (host_path) { /* processors: the host sampler, whose penalties follow each accepted token */
        q.sampling.repetition_penalty = 1.3f;
        q.sampling.frequency_penalty = 0.2f;
        q.sampling.top_k = 20;
    }
    hearth_seq *s = NULL;
    if (hearth_engine_submit(e, &q, &s, NULL) != HEARTH_OK) free(q.prompt);
    return s;
}

static long g_steps_ahead; /* the last sampled run's steps issued ahead */

/* Tokens and logprobs of 6 sampled requests through an engine drafting spec tokens, 3 at once. */
static long sampled_run_slots(rig *r, int n_slots, int spec, int host_path, int32_t ids[6][40],
                              float lps[6][40][4]) {
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = n_slots, .max_waiting = 16, .queue_cap = 8, .spec_tokens = spec};
    if (hearth_engine_new(&e, r->m, r->kv, &o, NULL) != HEARTH_OK) return -1;
    int vocab = hearth_model_config_get(r->m)->vocab_size;
    hearth_seq *seqs[6];
    for (int i = 0; i < 6; i++) seqs[i] = submit_sampled(e, i, vocab, host_path);
    memset(ids, 0xff, sizeof(int32_t) * 6 * 40);
    for (int i = 0; i < 6; i++) {
        hearth_token_event ev;
        int n = 0;
        while (seqs[i] && hearth_seq_next(seqs[i], &ev, -1) == 1 && n < 40) {
            ids[i][n] = ev.id;
            lps[i][n][0] = ev.lp.chosen.logprob;
            for (int t = 0; t < 3; t++) lps[i][n][1 + t] = ev.lp.top[t].logprob;
            n++;
        }
        if (seqs[i]) hearth_seq_release(seqs[i]);
    }
    hearth_engine_stats st;
    hearth_engine_stats_get(e, &st);
    hearth_engine_free(e);
    g_steps_ahead = st.steps_ahead;
    return st.spec_accepted;
}

static long sampled_run(rig *r, int spec, int host_path, int32_t ids[6][40], float lps[6][40][4]) {
    return sampled_run_slots(r, 3, spec, host_path, ids, lps);
}

/* Sampled requests draw the same tokens and logprobs one at a time (the
 * serial chooser) as three at once, where the host sampler's rows of a step
 * are sampled on a pool of threads. */
TEST(engine_sampled_output_same_alone_and_batched) {
    rig r;
    int ok = rig_open_spec(&r, HEARTH_DT_F32, 64, 3, 64, 2, 0);
    CHECK_MSG(ok, "cannot open the tiny model");
    static int32_t a[6][40], b[6][40];
    static float la[6][40][4], lb[6][40][4];
    for (int host = 0; host < 2; host++) {
        CHECK_EQ(sampled_run_slots(&r, 1, 0, host, a, la), 0);
        CHECK_EQ(sampled_run_slots(&r, 3, 0, host, b, lb), 0);
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(memcmp(la, lb, sizeof la) == 0);
        CHECK(a[5][39] >= 0);
    }
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64);
    rig_close(&r);
}

/* Four greedy requests decoding ahead, the engine paused once request 0 has
 * a few tokens and resumed: no step runs while paused, and each request's
 * tokens are its serial ones (want, rig_reference's). The engine issued
 * steps ahead. (That the pause reads the step in flight first, engine.c
 * settle, is not seen here: its tokens would come after the resume.) */
static void ahead_pause_case(rig *r, int32_t want[N_REQ][N_NEW]) {
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 4, .max_waiting = 8, .queue_cap = N_NEW + 1};
    CHECK_EQ(hearth_engine_new(&e, r->m, r->kv, &o, NULL), HEARTH_OK);
    const int vocab = hearth_model_config_get(r->m)->vocab_size;
    hearth_seq *s[4];
    for (int i = 0; i < 4; i++) {
        hearth_gen_request q = {0};
        q.prompt = malloc(sizeof(int32_t) * 64);
        rig_prompt(i, q.prompt, &q.n_prompt, vocab);
        q.max_new = N_NEW;
        hearth_sampling_default(&q.sampling);
        q.sampling.temperature = 0;
        CHECK_EQ(hearth_engine_submit(e, &q, &s[i], NULL), HEARTH_OK);
    }
    static int32_t got[4][N_NEW];
    int n[4] = {0};
    hearth_token_event ev;
    while (n[0] < 5 && hearth_seq_next(s[0], &ev, -1) == 1) got[0][n[0]++] = ev.id;
    hearth_engine_pause(e, 1);
    hearth_engine_stats a, b = {0};
    hearth_engine_stats_get(e, &a);
    for (int k = 0; k < 200 && a.steps != b.steps; k++) { /* the turn under way ends, then none */
        b = a;
        usleep(5000);
        hearth_engine_stats_get(e, &a);
    }
    usleep(20000);
    hearth_engine_stats_get(e, &b);
    CHECK_MSG(a.steps == b.steps, "%ld steps ran while paused", b.steps - a.steps);
    hearth_engine_pause(e, 0);
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        while (hearth_seq_next(s[i], &ev, -1) == 1)
            if (n[i] < N_NEW) got[i][n[i]++] = ev.id;
        bad += n[i] != N_NEW || memcmp(got[i], want[i], sizeof got[i]) != 0;
        hearth_seq_release(s[i]);
    }
    hearth_engine_stats_get(e, &b);
    hearth_engine_free(e);
    printf("  paused mid-run: %ld steps issued ahead\n", b.steps_ahead);
    CHECK_MSG(bad == 0, "%d of 4 requests differ from their serial output after the pause", bad);
    CHECK(b.steps_ahead > 0);
}

/* Steps issued one ahead (engine.c issue_ahead: the next step's forward
 * queued before this step's tokens are read, its tokens the ones the pick
 * left on the backend; the device engines' default), which
 * HEARTH_ENGINE_AHEAD=1 turns on here: every request's greedy tokens are its
 * serial ones alone and 4 and 16 at once (f16 cache, arrivals while others
 * run), under KV pressure (preemption) and with cancellations; sampled
 * requests draw the same tokens and logprobs as without (temperature by the
 * pick, a seed's stream). Each run issued steps ahead, or it checked
 * nothing. */
TEST(engine_steps_ahead_keep_output) {
    setenv("HEARTH_ENGINE_OVERLAP", "1", 1);
    rig r;
    int ok = rig_open_spec(&r, HEARTH_DT_F16, 64, 16, 64, 2, 0);
    CHECK_MSG(ok, "cannot open the tiny model");
    int32_t want[N_REQ][N_NEW];
    reference(&r, want);
    setenv("HEARTH_ENGINE_AHEAD", "1", 1);
    int pre;
    for (int slots = 1; slots <= 16; slots *= 4) {
        run_batched(&r, slots, want, &pre);
        printf("  %d slots: %ld steps issued ahead\n", slots, r.steps_ahead);
        CHECK(r.steps_ahead > 0);
    }
    ahead_pause_case(&r, want);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64);
    rig_close(&r);
    preemption_case();
    rejects_and_cancels_case();
    ok = rig_open_spec(&r, HEARTH_DT_F32, 64, 3, 64, 2, 0);
    CHECK_MSG(ok, "cannot open the tiny model");
    static int32_t a[6][40], b[6][40];
    static float la[6][40][4], lb[6][40][4];
    setenv("HEARTH_ENGINE_AHEAD", "0", 1);
    CHECK_EQ(sampled_run_slots(&r, 3, 0, 0, a, la), 0);
    CHECK_EQ(g_steps_ahead, 0);
    setenv("HEARTH_ENGINE_AHEAD", "1", 1);
    CHECK_EQ(sampled_run_slots(&r, 3, 0, 0, b, lb), 0);
    printf("  sampled, 3 slots: %ld steps issued ahead\n", g_steps_ahead);
    CHECK(g_steps_ahead > 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(la, lb, sizeof la) == 0);
    CHECK(a[5][39] >= 0);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64);
    rig_close(&r);
    unsetenv("HEARTH_ENGINE_AHEAD");
    unsetenv("HEARTH_ENGINE_OVERLAP");
}

/* Sampled requests draw the same tokens (a seed's) and report the same
 * logprobs bit for bit with drafts as without: through the pick op
 * (temperature alone) and through the host sampler (penalties, top_k). */
TEST(engine_spec_ngram_keeps_sampled_output) {
    rig r;
    int ok = rig_open_spec(&r, HEARTH_DT_F32, 64, 3, 64, 2, 4);
    CHECK_MSG(ok, "cannot open the tiny model");
    static int32_t a[6][40], b[6][40];
    static float la[6][40][4], lb[6][40][4];
    for (int host = 0; host < 2; host++) {
        CHECK_EQ(sampled_run(&r, 0, host, a, la), 0);
        long kept = sampled_run(&r, 4, host, b, lb);
        printf("  %s: %ld drafts kept\n", host ? "host sampler" : "pick op", kept);
        CHECK(kept > 0);
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(memcmp(la, lb, sizeof la) == 0);
        CHECK(a[0][39] >= 0); /* every request ran to its length */
    }
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64);
    rig_close(&r);
}

/* A prompt's logprobs are what decoding reports for the same tokens, bit for
 * bit on the CPU (engine_rig.h rig_prompt_logprobs_case). */
TEST(engine_prompt_logprobs_equal_decode_logprobs) {
    rig r;
    int ok = rig_open_spec(&r, HEARTH_DT_F32, 64, 2, 64, 2, 5); /* 2 x (1 + 5) logit rows: chunks of a few */
    CHECK_MSG(ok, "cannot open the tiny model");
    rig_prompt_logprobs_case(&r, "tests/fixtures/tiny/qwen2-f32", 0.0f);
    rig_close(&r);
}
