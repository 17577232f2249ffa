/* test_lora.c - LoRA adapters in the engine and at load: mixed batches give
 * each request its serial output under its own adapter, the prefix cache
 * keeps adapters' KV apart, and what hearth does not apply is refused by
 * name. (Numerics against PEFT: test_parity.c parity_lora_vs_peft.) */
#include "testhelp.h"

#include "engine_rig.h"
#include "ops/cpu/ops_cpu.h"

#define LORA_DIR "tests/fixtures/lora/qwen2-rslora"

static int open_tiny(rig *r, int n_blocks, int n_slots) {
    hearth_cpu_ctx *cpu;
    memset(r, 0, sizeof *r);
    if (hearth_cpu_ctx_new(&cpu, 2, 64, 512, 256, NULL)) return 0;
    if (rig_open_on(r, &hearth_cpu_ops, cpu, test_path("tests/fixtures/tiny/qwen2-f32"), HEARTH_DT_F32, n_blocks,
                    n_slots, 64)) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", test_path(LORA_DIR));
        if (rig_add_adapters(r, dir, 1.5)) return 1;
    }
    rig_free(r);
    hearth_cpu_ctx_free(cpu);
    return 0;
}

static void close_tiny(rig *r) {
    rig_free(r);
    hearth_cpu_ctx_free(r->ctx);
}

/* Requests cycle through no adapter, "one" and "two": every step of 4 or 16
 * slots mixes them (the per-row add), a slot of 1 runs them one by one (the
 * uniform add); each output equals its serial one. */
TEST(lora_mixed_batches_equal_serial) {
    rig r;
    CHECK_MSG(open_tiny(&r, 96, 16), "cannot open the tiny model with two adapters");
    enum { N = 15 };
    int32_t want[N][RIG_NEW];
    rig_reference(&r, N, want);
    /* the adapters matter: requests 3, 4, 5 share no prompt, so compare one prompt under all three */
    int32_t a[3][RIG_NEW];
    for (int ad = 0; ad < 3; ad++) CHECK_EQ(rig_serial(&r, 7, ad, a[ad]), HEARTH_OK);
    CHECK(memcmp(a[0], a[1], sizeof a[0]) != 0);
    CHECK(memcmp(a[1], a[2], sizeof a[0]) != 0);
    CHECK(memcmp(a[0], a[2], sizeof a[0]) != 0);
    int pre;
    for (int slots = 1; slots <= 16; slots *= 4) rig_batched(&r, N, slots, want, &pre);
    close_tiny(&r);
}

/* Adapters loaded and unloaded while the engine serves (vLLM's runtime LoRA
 * updating): see rig_lora_runtime_case. */
TEST(lora_loaded_and_unloaded_while_serving) {
    rig r;
    hearth_cpu_ctx *cpu;
    memset(&r, 0, sizeof r);
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 2, 64, 512, 256, NULL), HEARTH_OK);
    CHECK(rig_open_on(&r, &hearth_cpu_ops, cpu, test_path("tests/fixtures/tiny/qwen2-f32"), HEARTH_DT_F32, 96, 4,
                      64));
    rig_lora_runtime_case(&r, test_path(LORA_DIR), 0.0f);
    close_tiny(&r);
}

static hearth_seq_summary one(hearth_engine *e, const int32_t *ids, int n, int adapter, int32_t *out) {
    return rig_one(e, ids, n, 8, adapter, out);
}

/* One prompt under adapter one, two, none, one again: only the repeat finds
 * its blocks cached, and its output is the first run's. */
TEST(lora_prefix_cache_keeps_adapters_apart) {
    rig r;
    CHECK_MSG(open_tiny(&r, 64, 2), "cannot open the tiny model with two adapters");
    hearth_engine *e;
    hearth_engine_opts o = {.n_slots = 2};
    CHECK_EQ(hearth_engine_new(&e, r.m, r.kv, &o, NULL), HEARTH_OK);
    int vocab = hearth_model_config_get(r.m)->vocab_size;
    int32_t ids[40], o1[8], o2[8], o0[8], o1b[8];
    for (int i = 0; i < 40; i++) ids[i] = (i * 29 + 3) % vocab;
    CHECK_EQ(one(e, ids, 40, 1, o1).n_cached, 0);
    CHECK_EQ(one(e, ids, 40, 2, o2).n_cached, 0);
    CHECK_EQ(one(e, ids, 40, 0, o0).n_cached, 0);
    CHECK_EQ(one(e, ids, 40, 1, o1b).n_cached, 32);
    CHECK(memcmp(o1, o1b, sizeof o1) == 0);
    CHECK(memcmp(o1, o2, sizeof o1) != 0);
    hearth_gen_request bad = {0};
    int32_t *p = malloc(sizeof(int32_t) * 4);
    memcpy(p, ids, sizeof(int32_t) * 4);
    bad = (hearth_gen_request){.prompt = p, .n_prompt = 4, .max_new = 4, .adapter = 3};
    hearth_sampling_default(&bad.sampling);
    hearth_err err = {0};
    hearth_seq *s;
    CHECK_EQ(hearth_engine_submit(e, &bad, &s, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "adapter 3"));
    free(bad.prompt);
    hearth_engine_free(e);
    CHECK_EQ(hearth_kv_n_available_blocks(r.kv), 64);
    close_tiny(&r);
}

/* The fixture's adapter with one config field changed (rig_adapter_variant). */
static const char *variant(const char *tag, const char *field, const char *value) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_path(LORA_DIR));
    return rig_adapter_variant(dir, tag, field, value);
}

static void refused(hearth_model *m, const char *dir, const char *needle) {
    hearth_err err = {0};
    int id = -1;
    hearth_status st = hearth_model_add_lora(m, "x", dir, &id, &err);
    CHECK_MSG(st != HEARTH_OK && id == 0, "%s: loaded", dir);
    CHECK_MSG(strstr(err.msg, needle), "%s: error '%s' does not name '%s'", dir, err.msg, needle);
}

TEST(lora_refusals_name_the_field) {
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 1, 16, 512, 64, NULL), HEARTH_OK);
    hearth_model *m, *other;
    CHECK_EQ(hearth_model_load(&m, test_path("tests/fixtures/tiny/qwen2-f32"), &hearth_cpu_ops, cpu, 16, 0, NULL),
             HEARTH_OK);
    CHECK_EQ(hearth_model_load(&other, test_path("tests/fixtures/tiny/llama3-f32"), &hearth_cpu_ops, cpu, 16, 0, NULL),
             HEARTH_OK);
    refused(m, variant("dora", "use_dora", "true"), "use_dora");
    refused(m, variant("rank-pattern", "rank_pattern", "{\"q_proj\": 2}"), "rank_pattern");
    refused(m, variant("bias", "bias", "\"all\""), "bias");
    refused(m, variant("save", "modules_to_save", "[\"lm_head\"]"), "modules_to_save");
    refused(m, variant("alora", "alora_invocation_tokens", "[1, 2]"), "alora_invocation_tokens");
    refused(m, variant("prompt", "peft_type", "\"PROMPT_TUNING\""), "PROMPT_TUNING");
    refused(m, variant("rank", "r", "8"), "shape"); /* the tensors are of rank 4 */
    refused(m, test_path("tests/fixtures/tiny/qwen2-f32"), "adapter_config.json");
    refused(m, "/nonexistent/adapter", "not a directory");
    /* another model's adapter: its shapes do not fit */
    refused(other, test_path(LORA_DIR), "shape");
    /* ids in load order, never given twice: an unloaded adapter's slot is taken by the next */
    int id, ids[HEARTH_MAX_LORA];
    CHECK_EQ(hearth_model_add_lora(m, "x", test_path(LORA_DIR), &id, NULL), HEARTH_OK);
    CHECK_EQ(id, 1);
    CHECK_EQ(hearth_model_add_lora(m, "y", test_path(LORA_DIR), &id, NULL), HEARTH_OK);
    CHECK_EQ(id, 2);
    CHECK_EQ(hearth_model_n_lora(m), 2);
    CHECK_EQ(hearth_model_lora_find(m, "x"), 1);
    CHECK_EQ(hearth_model_lora_find(m, "z"), 0);
    CHECK_EQ(hearth_model_remove_lora(m, 1, NULL), HEARTH_OK);
    CHECK_EQ(hearth_model_remove_lora(m, 1, NULL), HEARTH_ENOENT);
    CHECK_EQ(hearth_model_n_lora(m), 1);
    CHECK(hearth_model_lora_name(m, 1) == NULL);
    CHECK_EQ(hearth_model_lora_find(m, "x"), 0);
    CHECK_EQ(hearth_model_add_lora(m, "z", test_path(LORA_DIR), &id, NULL), HEARTH_OK);
    CHECK_EQ(id, 3);
    CHECK_EQ(hearth_model_lora_ids(m, ids, HEARTH_MAX_LORA), 2);
    CHECK_EQ(ids[0], 3); /* the first slot again */
    CHECK_EQ(ids[1], 2);
    CHECK_STR(hearth_model_lora_name(m, 3), "z");
    hearth_model_free(m);
    hearth_model_free(other);
    hearth_cpu_ctx_free(cpu);
}
