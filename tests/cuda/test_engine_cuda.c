/* test_engine_cuda.c - the continuous-batching engine on the GPU: 64
 * requests of mixed lengths, staggered, through engines of 1, 8 and 64 slots
 * give each request its serial greedy output, with f32, f16 and e4m3 KV caches,
 * for an f32 and a bf16 model; under KV pressure (preemption) too; the pool
 * returns to its baseline every time. Also the pick op through the model:
 * argmax == argmax of the downloaded logits. */
#include "../unit/engine_rig.h"

#include "ops/cpu/pick.h"
#include "ops/cuda/ops_cuda.h"

#define N_CUDA_REQ 64

/* spec: drafted tokens a step its engines may take (rig_open_on_spec) */
static int cuda_rig_spec(rig *r, hearth_cuda_ctx **c, const char *model, hearth_dtype kvt, int n_blocks, int n_slots,
                         int spec) {
    hearth_err err = {0};
    if (hearth_cuda_ctx_new(c, 0, 64, 1024, 256, &err) != HEARTH_OK) {
        printf("  cuda context: %s\n", err.msg);
        return 0;
    }
    char path[512];
    snprintf(path, sizeof path, "tests/fixtures/tiny/%s", model);
    if (rig_open_on_spec(r, &hearth_cuda_ops, *c, test_path(path), kvt, n_blocks, n_slots, 64, spec)) return 1;
    rig_free(r);
    hearth_cuda_ctx_free(*c);
    return 0;
}

static int cuda_rig(rig *r, hearth_cuda_ctx **c, const char *model, hearth_dtype kvt, int n_blocks, int n_slots) {
    return cuda_rig_spec(r, c, model, kvt, n_blocks, n_slots, 0);
}

/* tie: 0 for the f32 model (identical outputs); for bf16 weights the GPU's
 * GEMV (up to 8 rows) and cuBLAS (more rows) round differently, so a request
 * may depart from its serial output at a near-tie, never at a clear choice. */
static void batching_case(const char *model, hearth_dtype kvt, float tie) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig(&r, &c, model, kvt, 512, 64), "cannot open %s on CUDA", model);
    static int32_t want[RIG_MAX_REQ][RIG_NEW];
    rig_reference(&r, N_CUDA_REQ, want);
    int pre = 0;
    for (int slots = 1; slots <= 64; slots *= 8) {
        rig_batched_tie(&r, N_CUDA_REQ, slots, want, &pre, tie);
        printf("  %s, %s KV, %d slots: %d requests checked against serial\n", model,
               hearth_dtype_get(kvt)->name, slots, N_CUDA_REQ);
    }
    hearth_err err = {0};
    CHECK_MSG(hearth_cuda_ctx_error(c, &err) == HEARTH_OK, "cuda: %s", err.msg);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
}

TEST(cuda_engine_batching_f32_model_f32_kv) { batching_case("qwen2-f32", HEARTH_DT_F32, 0.0f); }
TEST(cuda_engine_batching_f32_model_f16_kv) { batching_case("qwen2-f32", HEARTH_DT_F16, 0.0f); }
TEST(cuda_engine_batching_bf16_model_f16_kv) { batching_case("llama3-bf16", HEARTH_DT_F16, 0.02f); }
TEST(cuda_engine_batching_f32_model_e4m3_kv) { batching_case("qwen2-f32", HEARTH_DT_E4M3, 0.0f); }
TEST(cuda_engine_batching_bf16_model_e4m3_kv) { batching_case("llama3-bf16", HEARTH_DT_E4M3, 0.02f); }

/* Requests with no adapter, adapter one and adapter two mixed in engines of
 * 1, 8 and 64 slots (the per-row add) give each its serial output. */
TEST(cuda_engine_lora_mixed_batches) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig(&r, &c, "qwen2-f32", HEARTH_DT_F16, 512, 64), "cannot open the model on CUDA");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_path("tests/fixtures/lora/qwen2-rslora"));
    CHECK_MSG(rig_add_adapters(&r, dir, 1.5), "cannot load the adapters");
    static int32_t want[RIG_MAX_REQ][RIG_NEW];
    rig_reference(&r, N_CUDA_REQ, want);
    int pre = 0;
    for (int slots = 1; slots <= 64; slots *= 8) rig_batched_tie(&r, N_CUDA_REQ, slots, want, &pre, 1e-3f);
    hearth_err err = {0};
    CHECK_MSG(hearth_cuda_ctx_error(c, &err) == HEARTH_OK, "cuda: %s", err.msg);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
}

/* Adapters loaded and unloaded while the engine serves (rig_lora_runtime_case):
 * the adapters' device memory freed and taken again between steps. */
TEST(cuda_engine_lora_runtime) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig(&r, &c, "qwen2-f32", HEARTH_DT_F16, 512, 64), "cannot open the model on CUDA");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_path("tests/fixtures/lora/qwen2-rslora"));
    rig_lora_runtime_case(&r, dir, 1e-3f);
    hearth_err err = {0};
    CHECK_MSG(hearth_cuda_ctx_error(c, &err) == HEARTH_OK, "cuda: %s", err.msg);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
}

/* Speculative decoding by prompt lookup: 4 drafted tokens behind each decode
 * row, in engines of 1, 8 and 64 slots, give each request its serial greedy
 * output (the f32 model: the same tokens); drafts were kept and refused. */
static void spec_case(hearth_dtype kvt) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig_spec(&r, &c, "qwen2-f32", kvt, 512, 64, 4), "cannot open the model on CUDA");
    static int32_t want[RIG_MAX_REQ][RIG_NEW];
    rig_reference(&r, N_CUDA_REQ, want);
    int pre = 0;
    for (int slots = 1; slots <= 64; slots *= 8) rig_batched(&r, N_CUDA_REQ, slots, want, &pre);
    hearth_err err = {0};
    CHECK_MSG(hearth_cuda_ctx_error(c, &err) == HEARTH_OK, "cuda: %s", err.msg);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
}

TEST(cuda_engine_spec_ngram_f16_kv) { spec_case(HEARTH_DT_F16); }
TEST(cuda_engine_spec_ngram_e4m3_kv) { spec_case(HEARTH_DT_E4M3); }

/* Prompt logprobs (echo) on the GPU: what decoding reports for the same
 * tokens, and what one forward over the prompt gives, to 2e-3 (the head's
 * product runs at other row counts; the f32 model). */
TEST(cuda_engine_prompt_logprobs) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig_spec(&r, &c, "qwen2-f32", HEARTH_DT_F16, 64, 2, 5), "cannot open the model on CUDA");
    rig_prompt_logprobs_case(&r, "tests/fixtures/tiny/qwen2-f32", 2e-3f);
    hearth_err err = {0};
    CHECK_MSG(hearth_cuda_ctx_error(c, &err) == HEARTH_OK, "cuda: %s", err.msg);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
}

TEST(cuda_engine_preemption_keeps_output) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig(&r, &c, "qwen2-f32", HEARTH_DT_F16, 24, 16), "cannot open the model on CUDA");
    static int32_t want[RIG_MAX_REQ][RIG_NEW];
    rig_reference(&r, 32, want);
    int pre = 0;
    rig_batched(&r, 32, 16, want, &pre);
    printf("  preemptions: %d\n", pre);
    CHECK(pre > 0);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
}

/* Steps issued before the last one's picks are read (the downloads begun
 * into two slots of the pinned staging, the uploads alternating between two
 * halves, so a step replays one of two graphs) give the tokens of steps read
 * one at a time, at one row and at four; the graphs were replayed. */
TEST(cuda_model_steps_ahead_same_tokens) {
    rig r;
    hearth_cuda_ctx *c;
    CHECK_MSG(cuda_rig(&r, &c, "llama3-bf16", HEARTH_DT_F16, 64, 8), "cannot open the model on CUDA");
    hearth_cuda_stats a, b;
    hearth_cuda_ctx_stats(c, &a);
    const int bad1 = rig_ahead_sequence(r.m, r.kv, 1, 40), bad4 = rig_ahead_sequence(r.m, r.kv, 4, 40);
    hearth_cuda_ctx_stats(c, &b);
    hearth_err err = {0};
    const hearth_status st = hearth_cuda_ctx_error(c, &err);
    const int avail = hearth_kv_n_available_blocks(r.kv);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
    CHECK_MSG(st == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(bad1, 0);
    CHECK_EQ(bad4, 0);
    CHECK_EQ(avail, 64);
    printf("  %ld graph replays, %ld captures\n", b.graph_replays - a.graph_replays, b.graph_captures - a.graph_captures);
    CHECK(b.graph_replays - a.graph_replays > 100);
}

/* The model's pick over rows of a real forward equals the host rule over the
 * same logits downloaded. */
TEST(cuda_model_pick_matches_host_rule) {
    rig r;
    hearth_cuda_ctx *c;
    enum { T = 40 };
    /* T slots: the model keeps logits for a row a slot */
    CHECK_MSG(cuda_rig(&r, &c, "llama3-bf16", HEARTH_DT_F16, 64, T), "cannot open the model on CUDA");
    int vocab = hearth_model_config_get(r.m)->vocab_size;
    int32_t ids[T], seq[T], pos[T], rows[T];
    for (int i = 0; i < T; i++) ids[i] = (i * 37 + 3) % vocab, seq[i] = 0, pos[i] = i, rows[i] = i;
    CHECK_EQ(hearth_kv_reserve(r.kv, 0, T), HEARTH_OK);
    float *logits = malloc(sizeof(float) * T * (size_t)vocab);
    hearth_err err = {0};
    CHECK_EQ(hearth_model_forward(r.m, r.kv, ids, seq, pos, T, rows, T, logits, &err), HEARTH_OK);
    hearth_pick_params p[T];
    hearth_pick got[T], want;
    for (int i = 0; i < T; i++)
        p[i] = (hearth_pick_params){.temperature = (float)(i % 4) * 0.5f, .min_p = i % 3 ? 0.0f : 0.05f,
                                    .key = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), .logprobs = i % 2,
                                    .n_top = i % 21, .top_k = i % 5 == 1 ? 40 : 0,
                                    .top_p = i % 5 == 2 ? 0.9f : i % 5 == 3 ? 0.5f : 0.0f};
    CHECK_EQ(hearth_model_pick(r.m, T, p, got, &err), HEARTH_OK);
    int bad = 0;
    for (int i = 0; i < T; i++) {
        hearth_pick_row(&want, logits + (size_t)i * vocab, vocab, &p[i]);
        int same = want.id == got[i].id && want.max == got[i].max && want.n_top == got[i].n_top;
        for (int k = 0; same && k < want.n_top; k++) same = want.top_id[k] == got[i].top_id[k];
        if (p[i].logprobs) same = same && fabsf(want.lse - got[i].lse) < 1e-4f * (1 + fabsf(want.lse));
        if (!same && bad++ == 0)
            printf("  row %d: want id %d max %g lse %g, got id %d max %g lse %g\n", i, want.id, want.max, want.lse,
                   got[i].id, got[i].max, got[i].lse);
    }
    /* then picks whose params repeat, change, shrink and come back (copied only when changed), over the
     * first rows: each pick and its download one kernel (run_unit's fusion) */
    hearth_cuda_ctx_profile(c, 1); /* the units by name: the picks' downloads fused in */
    const int bad_seq = rig_pick_sequence(r.m, logits, 8);
    char text[4096];
    hearth_cuda_ctx_profile_text(c, text, sizeof text);
    hearth_cuda_ctx_profile(c, 0);
    free(logits);
    hearth_kv_release_slot(r.kv, 0);
    rig_free(&r);
    hearth_cuda_ctx_free(c);
    CHECK_MSG(bad == 0, "%d of %d rows differ", bad, T);
    CHECK_MSG(bad_seq == 0, "%d rows of the pick sequence differ", bad_seq);
    CHECK_MSG(strstr(text, "pick+download") != NULL, "no pick ran with its download fused in:\n%s", text);
}
