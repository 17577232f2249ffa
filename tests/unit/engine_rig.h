/* engine_rig.h - a tiny model + KV cache on any backend, and the batching
 * check: every request's greedy output through the engine (mixed prompt
 * lengths, staggered arrivals, n_slots at once) equals its serial output.
 * Shared by tests/unit/test_engine.c (CPU) and tests/cuda (the H200). */
#ifndef HEARTH_TESTS_ENGINE_RIG_H
#define HEARTH_TESTS_ENGINE_RIG_H

#include "testhelp.h"

#include "engine/engine.h"
#include "engine/generate.h"
#include "ops/cpu/pick.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define RIG_MAX_REQ 96
#define RIG_NEW 20

typedef struct {
    const hearth_ops *ops;
    void *ctx; /* borrowed */
    hearth_model *m;
    hearth_kv *kv;
    int n_adapters; /* LoRA adapters loaded (rig_add_adapters): request i runs with adapter i % (n + 1) */
    int adapter_id; /* with one adapter: its id, when not 1 */
    int spec;       /* rig_batched's engines draft this many tokens a step (prompt lookup), 0 = none */
    long steps_ahead; /* the last rig_batched engine's steps issued ahead (engine.c issue_ahead) */
} rig;

static inline int rig_adapter(const rig *r, int i) {
    const int k = i % (r->n_adapters + 1);
    return k == 1 && r->adapter_id ? r->adapter_id : k;
}

/* A copy of the PEFT adapter in dir under the test's scratch directory
 * (lora-<tag>), its config's field set to value (JSON text), its tensors
 * linked: the directory, static until the next call, or NULL. */
static inline const char *rig_adapter_variant(const char *dir, const char *tag, const char *field,
                                              const char *value) {
    static char out[1024];
    char path[1100], src[1100];
    snprintf(out, sizeof out, "%s/lora-%s", test_tmpdir(), tag);
    mkdir(out, 0755);
    snprintf(src, sizeof src, "%s/adapter_config.json", dir);
    json_t *j = json_load_file(src, 0, NULL);
    if (!j) return NULL;
    json_object_set_new(j, field, json_loads(value, JSON_DECODE_ANY, NULL));
    snprintf(path, sizeof path, "%s/adapter_config.json", out);
    int bad = json_dump_file(j, path, 0) != 0;
    json_decref(j);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", out);
    snprintf(src, sizeof src, "%s/adapter_model.safetensors", dir);
    char *abs = realpath(src, NULL); /* the link is read from out */
    unlink(path);
    bad = bad || !abs || symlink(abs, path);
    free(abs);
    return bad ? NULL : out;
}

/* Load the PEFT adapter in dir, and a copy of it scaled by another
 * lora_alpha: two adapters that differ, for mixed batches. 1 on success. */
static inline int rig_add_adapters(rig *r, const char *dir, double alpha2) {
    hearth_err err = {0};
    char alpha[32];
    snprintf(alpha, sizeof alpha, "%.17g", alpha2);
    const char *dir2 = rig_adapter_variant(dir, "alpha", "lora_alpha", alpha);
    int id1 = 0, id2 = 0;
    if (!dir2 || hearth_model_add_lora(r->m, "one", dir, &id1, &err) ||
        hearth_model_add_lora(r->m, "two", dir2, &id2, &err)) {
        printf("  %s\n", dir2 ? err.msg : "cannot write the second adapter");
        return 0;
    }
    r->n_adapters = 2;
    return id1 == 1 && id2 == 2;
}

/* spec: the drafted tokens a step its engines may take (the model keeps logits for them, as the session) */
static int rig_open_on_spec(rig *r, const hearth_ops *ops, void *ctx, const char *path, hearth_dtype kv_type,
                            int n_blocks, int n_slots, int max_tokens, int spec) {
    hearth_err err = {0};
    memset(r, 0, sizeof *r);
    r->ops = ops, r->ctx = ctx, r->spec = spec;
    if (hearth_model_load(&r->m, path, ops, ctx, max_tokens, n_slots * (1 + spec), &err)) { /* as the session */
        printf("  %s\n", err.msg);
        return 0;
    }
    const hearth_model_config *c = hearth_model_config_get(r->m);
    if (hearth_kv_new(&r->kv, ops, ctx, c->n_layers, hearth_model_kv_dim(r->m), c->head_dim, kv_type, 16, n_blocks,
                      n_slots, 256, &err)) {
        printf("  %s\n", err.msg);
        return 0;
    }
    return 1;
}

static inline int rig_open_on(rig *r, const hearth_ops *ops, void *ctx, const char *path, hearth_dtype kv_type,
                              int n_blocks, int n_slots, int max_tokens) {
    return rig_open_on_spec(r, ops, ctx, path, kv_type, n_blocks, n_slots, max_tokens, 0);
}

static void rig_free(rig *r) {
    hearth_kv_free(r->kv);
    hearth_model_free(r->m);
}

static void rig_prompt(int i, int32_t *ids, int *n, int vocab) {
    *n = 3 + (i * 7) % 40; /* mixed lengths, some spanning several blocks */
    for (int k = 0; k < *n; k++) ids[k] = (int32_t)((i * 131 + k * 17 + 5) % vocab);
}

typedef struct {
    int32_t *o;
    int n;
} rig_sink;

static int rig_collect(void *u, int32_t id, const hearth_logprobs *lp) {
    (void)lp;
    rig_sink *c = u;
    if (c->n < RIG_NEW) c->o[c->n++] = id;
    return 0;
}

/* Request i's prompt alone through hearth_generate (the serial path) with
 * adapter `adapter`, greedy, into out. */
static inline hearth_status rig_serial(rig *r, int i, int adapter, int32_t out[RIG_NEW]) {
    int vocab = hearth_model_config_get(r->m)->vocab_size;
    int32_t ids[64];
    int n;
    rig_prompt(i, ids, &n, vocab);
    hearth_sampling sp;
    hearth_sampling_default(&sp);
    sp.temperature = 0;
    hearth_sampler s;
    hearth_sampler_init(&s, &sp, vocab, NULL);
    rig_sink c = {out, 0};
    hearth_gen_stats gs;
    hearth_status st = hearth_generate(r->m, r->kv, 0, adapter, ids, n, RIG_NEW, &s, NULL, 0, 0, rig_collect, &c, &gs,
                                       NULL);
    hearth_sampler_deinit(&s);
    return st;
}

/* Reference: each prompt alone through the serial path, with its adapter. */
static void rig_reference(rig *r, int n_req, int32_t out[][RIG_NEW]) {
    for (int i = 0; i < n_req; i++) rig_serial(r, i, rig_adapter(r, i), out[i]);
}

/* Run one greedy request of n_new tokens (adapter: its LoRA adapter, 0 =
 * none) through the engine; returns the summary, output in out. */
static inline hearth_seq_summary rig_one(hearth_engine *e, const int32_t *ids, int n, int n_new, int adapter,
                                         int32_t *out) {
    hearth_gen_request q = {0};
    hearth_seq_summary sum = {0};
    q.prompt = malloc(sizeof(int32_t) * (size_t)n);
    memcpy(q.prompt, ids, sizeof(int32_t) * (size_t)n);
    q.n_prompt = n;
    q.max_new = n_new;
    q.adapter = adapter;
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = 0;
    hearth_seq *s;
    if (hearth_engine_submit(e, &q, &s, NULL) != HEARTH_OK) return sum;
    hearth_token_event ev;
    int k = 0;
    while (hearth_seq_next(s, &ev, -1) == 1) out[k++] = ev.id;
    hearth_seq_summary_get(s, &sum);
    hearth_seq_release(s);
    return sum;
}

/* A sequence's tokens (up to RIG_NEW) into out and its summary into sum, once it ends: how many. */
static inline int rig_read(hearth_seq *s, int32_t *out, hearth_seq_summary *sum) {
    int n = 0;
    hearth_token_event ev;
    while (hearth_seq_next(s, &ev, -1) == 1)
        if (n < RIG_NEW) out[n++] = ev.id;
    hearth_seq_summary_get(s, sum);
    return n;
}

/* How far apart the logits of the serial token and of the batched token are
 * where request i first differs at step k: the serial context (prompt +
 * want[0..k)) in one forward, its last row. -1 on failure. */
static float rig_gap(rig *r, int i, const int32_t *want, int k, int32_t got) {
    int vocab = hearth_model_config_get(r->m)->vocab_size;
    int32_t ids[64 + RIG_NEW], seq[64 + RIG_NEW], pos[64 + RIG_NEW], ad[64 + RIG_NEW];
    int n;
    rig_prompt(i, ids, &n, vocab);
    for (int j = 0; j < k; j++) ids[n++] = want[j];
    for (int j = 0; j < n; j++) seq[j] = 0, pos[j] = j, ad[j] = rig_adapter(r, i);
    float *logits = malloc(sizeof(float) * (size_t)vocab);
    int32_t last = n - 1;
    float gap = -1;
    if (logits && hearth_kv_reserve(r->kv, 0, n) == HEARTH_OK &&
        hearth_model_set_row_adapters(r->m, ad, n, NULL) == HEARTH_OK &&
        hearth_model_forward(r->m, r->kv, ids, seq, pos, n, &last, 1, logits, NULL) == HEARTH_OK)
        gap = fabsf(logits[want[k]] - logits[got]);
    hearth_kv_release_slot(r->kv, 0);
    free(logits);
    return gap;
}

/* Submit n_req requests (staggered) to an engine of n_slots, read them all,
 * compare with want. tie > 0 accepts a request whose output departs from
 * the serial one where the two tokens' logits are within tie of each other
 * (a rounding near-tie: the GPU's matmuls round differently at different
 * batch sizes), and prints each such case; tie = 0 demands identity. */
static void rig_batched_tie(rig *r, int n_req, int n_slots, int32_t want[][RIG_NEW], int *preempted, float tie) {
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = n_slots, .max_waiting = RIG_MAX_REQ, .queue_cap = 4, .spec_tokens = r->spec};
    hearth_err err = {0};
    int baseline = hearth_kv_n_available_blocks(r->kv);
    CHECK_EQ(hearth_engine_new(&e, r->m, r->kv, &o, &err), HEARTH_OK);
    int vocab = hearth_model_config_get(r->m)->vocab_size;
    hearth_seq *seqs[RIG_MAX_REQ];
    for (int i = 0; i < n_req; i++) {
        hearth_gen_request q = {0};
        q.prompt = malloc(sizeof(int32_t) * 64);
        rig_prompt(i, q.prompt, &q.n_prompt, vocab);
        q.max_new = RIG_NEW;
        q.adapter = rig_adapter(r, i);
        hearth_sampling_default(&q.sampling);
        q.sampling.temperature = 0;
        CHECK_EQ(hearth_engine_submit(e, &q, &seqs[i], &err), HEARTH_OK);
        CHECK(q.prompt == NULL); /* ownership moved */
        if (i % 3 == 2) usleep(2000); /* arrivals while others run */
    }
    int bad = 0, first_bad = -1, n_diff = 0;
    static int32_t got[RIG_MAX_REQ][RIG_NEW];
    int diff_at[RIG_MAX_REQ];
    for (int i = 0; i < n_req; i++) {
        hearth_seq_summary sum;
        const int n = rig_read(seqs[i], got[i], &sum);
        diff_at[i] = -1;
        for (int k = 0; k < n && diff_at[i] < 0; k++)
            if (got[i][k] != want[i][k]) diff_at[i] = k;
        if (sum.finish != HEARTH_FINISH_LENGTH || n != RIG_NEW) diff_at[i] = -2;
        hearth_seq_release(seqs[i]);
    }
    hearth_engine_stats st;
    hearth_engine_stats_get(e, &st);
    *preempted = (int)st.preemptions;
    r->steps_ahead = st.steps_ahead;
    hearth_engine_free(e);
    for (int i = 0; i < n_req; i++) {
        if (diff_at[i] == -1) continue;
        n_diff++;
        float gap = diff_at[i] >= 0 && tie > 0 ? rig_gap(r, i, want[i], diff_at[i], got[i][diff_at[i]]) : -1;
        if (gap >= 0 && gap < tie) {
            printf("  request %d (slots %d) departs at step %d: serial %d, batched %d, logit gap %.4g (a near-tie)\n",
                   i, n_slots, diff_at[i], want[i][diff_at[i]], got[i][diff_at[i]], gap);
            continue;
        }
        if (gap >= 0) printf("  request %d departs at step %d with a logit gap of %.4g\n", i, diff_at[i], gap);
        if (first_bad < 0) first_bad = i;
        bad++;
    }
    (void)n_diff;
    CHECK_MSG(bad == 0, "%d of %d requests differ from their serial output (slots %d; first: request %d)", bad,
              n_req, n_slots, first_bad);
    CHECK_EQ(st.requests_ok, n_req);
    CHECK_EQ(hearth_kv_n_available_blocks(r->kv), baseline); /* nothing held: no leak */
    if (r->spec) { /* drafts were taken and refused, or the check checked nothing */
        printf("  %d slots: %ld tokens drafted, %ld accepted, %ld steps for %ld tokens\n", n_slots, st.spec_drafted,
               st.spec_accepted, st.steps, st.tokens_out);
        CHECK(st.spec_accepted > 0 && st.spec_drafted > st.spec_accepted);
    }
}

/* LoRA adapters loaded and unloaded through a running engine (r has none):
 * twenty loads and unloads (more than the model's slots) give ids in load
 * order; requests submitted with an adapter that is then unloaded finish with
 * it, a submission after the unload is refused, and its memory goes once they
 * end. Their outputs are the serial path's with the same adapter loaded beside
 * the model (tie: as rig_batched_tie's). */
static inline void rig_lora_runtime_case(rig *r, const char *dir, float tie) {
    enum { N = 8 };
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 4, .max_waiting = RIG_MAX_REQ, .queue_cap = 4};
    hearth_err err = {0};
    const int baseline = hearth_kv_n_available_blocks(r->kv), vocab = hearth_model_config_get(r->m)->vocab_size;
    CHECK_EQ(hearth_engine_new(&e, r->m, r->kv, &o, &err), HEARTH_OK);
    int id = 0;
    for (int k = 0; k < 20; k++) {
        CHECK_EQ(hearth_engine_lora_load(e, "churn", dir, &id, &err), HEARTH_OK);
        CHECK_EQ(id, k + 1);
        CHECK_EQ(hearth_engine_lora_unload(e, id, &err), HEARTH_OK);
    }
    CHECK_EQ(hearth_engine_lora_unload(e, id, NULL), HEARTH_ENOENT);
    CHECK_EQ(hearth_engine_lora_load(e, "one", dir, &id, &err), HEARTH_OK);
    CHECK_EQ(id, 21);
    r->n_adapters = 1, r->adapter_id = id; /* odd requests run with it */
    hearth_seq *seqs[N];
    for (int i = 0; i < N + 1; i++) {
        hearth_gen_request q = {0};
        q.prompt = malloc(sizeof(int32_t) * 64);
        rig_prompt(i, q.prompt, &q.n_prompt, vocab);
        q.max_new = RIG_NEW;
        q.adapter = i < N ? rig_adapter(r, i) : id;
        hearth_sampling_default(&q.sampling);
        q.sampling.temperature = 0;
        if (i < N) {
            CHECK_EQ(hearth_engine_submit(e, &q, &seqs[i], &err), HEARTH_OK);
            continue;
        }
        CHECK_EQ(hearth_engine_lora_unload(e, id, &err), HEARTH_OK); /* while they run or wait */
        hearth_seq *late;
        CHECK_EQ(hearth_engine_submit(e, &q, &late, &err), HEARTH_EINVAL);
        CHECK_CONTAINS(err.msg, "unloaded");
        free(q.prompt);
    }
    static int32_t got[N][RIG_NEW];
    for (int i = 0; i < N; i++) {
        hearth_seq_summary sum;
        const int n = rig_read(seqs[i], got[i], &sum);
        CHECK_MSG(sum.finish == HEARTH_FINISH_LENGTH && n == RIG_NEW, "request %d: %d tokens, finish %d", i, n,
                  (int)sum.finish);
        hearth_seq_release(seqs[i]);
    }
    hearth_engine_free(e);
    CHECK_EQ(hearth_model_n_lora(r->m), 0); /* the drained adapter's memory went */
    CHECK_EQ(hearth_kv_n_available_blocks(r->kv), baseline);
    CHECK_EQ(hearth_model_add_lora(r->m, "one", dir, &r->adapter_id, &err), HEARTH_OK);
    for (int i = 0; i < N; i++) {
        int32_t want[RIG_NEW];
        CHECK_EQ(rig_serial(r, i, rig_adapter(r, i), want), HEARTH_OK);
        int k = 0;
        while (k < RIG_NEW && got[i][k] == want[k]) k++;
        if (k == RIG_NEW) continue;
        float gap = tie > 0 ? rig_gap(r, i, want, k, got[i][k]) : -1;
        if (gap >= 0 && gap < tie) printf("  request %d departs at step %d in a near-tie (%.4g)\n", i, k, gap);
        else CHECK_MSG(0, "request %d departs from its serial output at step %d (gap %.4g)", i, k, gap);
    }
    CHECK_EQ(hearth_model_remove_lora(r->m, r->adapter_id, &err), HEARTH_OK);
    r->n_adapters = r->adapter_id = 0;
}

static void rig_batched(rig *r, int n_req, int n_slots, int32_t want[][RIG_NEW], int *preempted) {
    rig_batched_tie(r, n_req, n_slots, want, preempted, 0.0f);
}

typedef struct {
    int32_t ids[RIG_NEW];
    hearth_logprobs lp[RIG_NEW];
    int n;
} rig_lp_run;

static inline hearth_seq *rig_submit_lp(hearth_engine *e, const int32_t *ids, int n, int max_new, int prompt_lp) {
    hearth_gen_request q = {0};
    q.prompt = malloc(sizeof(int32_t) * (size_t)n);
    memcpy(q.prompt, ids, sizeof(int32_t) * (size_t)n);
    q.n_prompt = n;
    q.max_new = max_new;
    q.want_logprobs = 1;
    q.want_prompt_logprobs = prompt_lp;
    hearth_sampling_default(&q.sampling);
    q.sampling.temperature = 0;
    q.sampling.top_logprobs = 3;
    hearth_seq *s = NULL;
    if (hearth_engine_submit(e, &q, &s, NULL) != HEARTH_OK) free(q.prompt);
    return s;
}

/* T sequences (slots 0 .. T - 1, T <= 8) decoded greedily for n <= 64 steps,
 * each step's picks read before the next is issued (hearth_model_pick), then
 * again with each step issued before the last one's picks are read, its
 * tokens the ones the pick left on the backend (hearth_model_forward given
 * none; hearth_model_pick_begin / _end): the tokens that differ, or -1 where a
 * call failed or did not refuse what it must (a forward of more rows than the
 * last pick chose; a pick while one is begun). */
static inline int rig_ahead_sequence(hearth_model *m, hearth_kv *kv, int T, int n) {
    enum { MAXT = 8, MAXN = 64 };
    if (T < 1 || T > MAXT || n < 2 || n > MAXN) return -1;
    int32_t want[MAXN][MAXT], got[MAXN][MAXT], tok[MAXT + 1], seq[MAXT + 1], pos[MAXT + 1], rows[MAXT];
    hearth_pick_params pp[MAXT];
    memset(pp, 0, sizeof pp); /* greedy */
    hearth_pick pk[2][MAXT];
    hearth_err err = {0};
    for (int t = 0; t <= T; t++) seq[t] = t, pos[t] = 0;
    for (int t = 0; t < T; t++) {
        rows[t] = t;
        if (hearth_kv_reserve(kv, t, n) != HEARTH_OK) return -1;
    }
    int fail = 0;
    for (int pass = 0; pass < 2 && !fail; pass++) {
        for (int t = 0; t < T; t++) tok[t] = 3 + 5 * t;
        for (int i = 0; i < n && !fail; i++) {
            for (int t = 0; t < T; t++) pos[t] = i;
            fail = hearth_model_forward(m, kv, pass == 1 && i > 0 ? NULL : tok, seq, pos, T, rows, T, NULL, &err);
            if (!fail && pass == 0) {
                fail = hearth_model_pick(m, T, pp, pk[0], &err);
                for (int t = 0; t < T; t++) want[i][t] = tok[t] = pk[0][t].id;
                continue;
            }
            if (!fail) fail = hearth_model_pick_begin(m, T, pp, pk[i % 2], &err);
            if (!fail && i > 0) {
                hearth_model_pick_end(m);
                for (int t = 0; t < T; t++) got[i - 1][t] = pk[(i - 1) % 2][t].id;
            }
            if (!fail && i == n - 1) {
                /* begun and not ended: refused by name, nothing issued */
                if (hearth_model_forward(m, kv, NULL, seq, pos, T + 1, rows, 1, NULL, &err) != HEARTH_EINVAL ||
                    hearth_model_pick(m, T, pp, pk[0], &err) != HEARTH_EINVAL)
                    fail = 1, printf("  not refused: %s\n", err.msg);
                hearth_model_pick_end(m);
                for (int t = 0; t < T; t++) got[i][t] = pk[i % 2][t].id;
            }
        }
    }
    if (fail) printf("  ahead sequence: %s\n", err.msg);
    for (int t = 0; t < T; t++) hearth_kv_release_slot(kv, t);
    int bad = 0;
    for (int i = 0; i < n && !fail; i++)
        for (int t = 0; t < T; t++)
            if (got[i][t] != want[i][t] && bad++ == 0)
                printf("  step %d row %d: %d issued ahead, %d read first\n", i, t, got[i][t], want[i][t]);
    return fail ? -1 : bad;
}

/* hearth_model_pick copies a pick's params to the backend only where they
 * differ from what it copied last: picks over the T logit rows of the last
 * forward (logits, host [T][vocab]) whose params repeat, change in one row,
 * shrink to a prefix and come back, each against the host rule
 * (hearth_pick_row). Row 1's change is a hot draw with the top list, which
 * its stale params would give in place of the argmax. Returns the rows that
 * differ (printing the first). */
static inline int rig_pick_sequence(hearth_model *m, const float *logits, int T) {
    enum { MAXT = 8 };
    const int vocab = hearth_model_config_get(m)->vocab_size;
    hearth_pick_params a[MAXT] = {{0}}, b[MAXT] = {{0}};
    hearth_pick got[MAXT], want;
    if (T > MAXT || T < 2) return 1;
    for (int i = 0; i < T; i++) b[i] = a[i];
    b[1] = (hearth_pick_params){.temperature = 50.0f, .key = 0x2545f4914f6cdd1dull, .logprobs = 1, .n_top = 5};
    const hearth_pick_params *sets[] = {a, a, b, b, a, b};
    const int rows[] = {T, T, T, 1, T, T};
    int bad = 0;
    for (int k = 0; k < 6; k++) {
        hearth_err err = {0};
        if (hearth_model_pick(m, rows[k], sets[k], got, &err) != HEARTH_OK) {
            printf("  pick %d: %s\n", k, err.msg);
            return T;
        }
        for (int i = 0; i < rows[k]; i++) {
            hearth_pick_row(&want, logits + (size_t)i * vocab, vocab, &sets[k][i]);
            int same = want.id == got[i].id && want.max == got[i].max && want.n_top == got[i].n_top;
            for (int j = 0; same && j < want.n_top; j++) same = want.top_id[j] == got[i].top_id[j];
            if (!same && bad++ == 0)
                printf("  pick %d row %d: want id %d n_top %d, got id %d n_top %d\n", k, i, want.id, want.n_top,
                       got[i].id, got[i].n_top);
        }
    }
    return bad;
}

/* tol 0: the same bits (the chosen token's and the top list's logprobs); else the chosen's and the best's
 * within tol */
static inline int rig_same_lp(const hearth_logprobs *a, const hearth_logprobs *b, float tol) {
    if (a->chosen.id != b->chosen.id || a->n_top != b->n_top) return 0;
    if (tol > 0)
        return fabsf(a->chosen.logprob - b->chosen.logprob) <= tol &&
               (a->n_top == 0 || fabsf(a->top[0].logprob - b->top[0].logprob) <= tol);
    if (memcmp(&a->chosen.logprob, &b->chosen.logprob, sizeof(float))) return 0;
    for (int k = 0; k < a->n_top; k++)
        if (memcmp(&a->top[k].logprob, &b->top[k].logprob, sizeof(float))) return 0;
    return 1;
}

/* Prompt logprobs (want_prompt_logprobs, the completions API's echo) are
 * what decoding reports for the same tokens: a greedy run's 20 tokens, sent
 * back as the end of a prompt, score the same (tol 0: the same bits of the
 * chosen token's and the top 3's), and the prompt's own positions score what
 * one forward over the whole prompt (model `path`, loaded again) gives. Two
 * such requests at once, in chunks of the model's spare logit rows (r opened
 * with 2 slots and some), one sharing a cached prefix (not used: every
 * position is computed). */
static inline void rig_prompt_logprobs_case(rig *r, const char *path, float tol) {
    const int baseline = hearth_kv_n_available_blocks(r->kv);
    int vocab = hearth_model_config_get(r->m)->vocab_size;
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 2, .queue_cap = 64};
    CHECK_EQ(hearth_engine_new(&e, r->m, r->kv, &o, NULL), HEARTH_OK);
    int32_t p[2][64];
    int n[2] = {23, 37};
    for (int i = 0; i < n[1]; i++) p[0][i] = p[1][i] = (int32_t)((i * 29 + 7) % vocab);
    for (int i = 0; i < n[0]; i++) p[0][i] = (int32_t)((i * 31 + 11) % vocab);
    rig_lp_run gen[2] = {0};
    for (int k = 0; k < 2; k++) { /* decoding, logprob of each token */
        hearth_seq *s = rig_submit_lp(e, p[k], n[k], RIG_NEW, 0);
        hearth_token_event ev;
        while (s && hearth_seq_next(s, &ev, -1) == 1) gen[k].ids[gen[k].n] = ev.id, gen[k].lp[gen[k].n++] = ev.lp;
        if (s) hearth_seq_release(s);
        CHECK_EQ(gen[k].n, RIG_NEW);
        memcpy(p[k] + n[k], gen[k].ids, sizeof gen[k].ids);
    }
    hearth_seq *s[2];
    static hearth_logprobs got[2][64 + RIG_NEW];
    for (int k = 0; k < 2; k++) s[k] = rig_submit_lp(e, p[k], n[k] + RIG_NEW, 1, 1);
    for (int k = 0; k < 2; k++) {
        hearth_token_event ev;
        CHECK(s[k] && hearth_seq_next(s[k], &ev, -1) == 1);
        int m = 0;
        const hearth_logprobs *plp = hearth_seq_prompt_logprobs(s[k], &m);
        CHECK(plp != NULL && m == n[k] + RIG_NEW);
        if (plp) memcpy(got[k], plp, sizeof *plp * (size_t)m);
        while (hearth_seq_next(s[k], &ev, -1) == 1) {}
        hearth_seq_release(s[k]);
    }
    hearth_engine_stats st;
    hearth_engine_stats_get(e, &st);
    printf("  %ld steps, %ld rows\n", st.steps, st.step_rows);
    hearth_engine_free(e); /* the references below run on the same CPU context: one thread at a time */
    for (int k = 0; k < 2; k++) {
        const hearth_logprobs *plp = got[k];
        CHECK(isnan(plp[0].chosen.logprob) && plp[0].n_top == 0);
        int bad = 0;
        for (int i = 0; i < RIG_NEW; i++) bad += !rig_same_lp(&plp[n[k] + i], &gen[k].lp[i], tol);
        CHECK_MSG(bad == 0, "request %d: %d of %d generated tokens score differently as prompt", k, bad, RIG_NEW);
        /* the prompt's own positions against one forward over it */
        int T = n[k] + RIG_NEW, seq[64 + RIG_NEW], pos[64 + RIG_NEW], rows[64 + RIG_NEW];
        float *logits = malloc(sizeof(float) * (size_t)T * (size_t)vocab);
        for (int i = 0; i < T; i++) seq[i] = 0, pos[i] = i, rows[i] = i;
        hearth_model *ref;
        hearth_err err = {0};
        CHECK_EQ(hearth_model_load(&ref, test_path(path), r->ops, r->ctx, 64, 0, &err),
                 HEARTH_OK);
        hearth_kv *kv;
        const hearth_model_config *c = hearth_model_config_get(ref);
        CHECK_EQ(hearth_kv_new(&kv, r->ops, r->ctx, c->n_layers, hearth_model_kv_dim(ref), c->head_dim,
                               hearth_kv_type(r->kv), 16, 8, 1, 256, &err),
                 HEARTH_OK);
        CHECK_EQ(hearth_kv_reserve(kv, 0, T), HEARTH_OK);
        CHECK_EQ(hearth_model_forward(ref, kv, p[k], seq, pos, T, rows, T, logits, &err), HEARTH_OK);
        int first = 0;
        hearth_logprobs want, first_want;
        for (int i = 1; i < T; i++) {
            hearth_logprobs_fill(logits + (size_t)(i - 1) * vocab, vocab, p[k][i], 3, &want);
            if (!rig_same_lp(&plp[i], &want, tol) && bad++ == 0) first = i, first_want = want;
        }
        CHECK_MSG(bad == 0, "request %d: %d of %d prompt positions differ from one forward (first at %d: %.6f, top %d %.6f; "
                  "one forward %.6f, top %d %.6f)", k, bad, T - 1, first, plp[first].chosen.logprob,
                  plp[first].top[0].id, plp[first].top[0].logprob, first_want.chosen.logprob, first_want.top[0].id,
                  first_want.top[0].logprob);
        hearth_kv_free(kv);
        hearth_model_free(ref);
        free(logits);
    }
    CHECK_EQ(hearth_kv_n_available_blocks(r->kv), baseline); /* nothing held: no leak */
}

#endif
