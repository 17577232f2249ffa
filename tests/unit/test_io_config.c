/* test_io_config.c - model configs from config.json (transformers 4 and 5
 * forms, per-architecture defaults), from GGUF metadata (the real SmolLM2
 * file and files written here), and generation_config.json. */
#define _GNU_SOURCE
#include "testhelp.h"

#include "core/dtype.h"
#include "io/gguf.h"
#include "io/model_config.h"
#include "test_io_util.h"

#include <sys/stat.h>
#include <unistd.h>

/* A fresh dir `name` under the scratch dir holding config.json = json. */
static const char *hf_dir(char *dir, size_t cap, const char *name, const char *file, const char *json) {
    tmp_path(dir, cap, name);
    mkdir(dir, 0755);
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    if (json && write_text(p, json) != 0) return NULL;
    return dir;
}

/* ------------------------------------------------------------ config.json */

/* Llama 3.1 8B as transformers 4.4x writes it. */
static const char *llama31_tf4 =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
    "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009],\"hidden_act\":\"silu\","
    "\"hidden_size\":4096,\"initializer_range\":0.02,\"intermediate_size\":14336,"
    "\"max_position_embeddings\":131072,\"mlp_bias\":false,\"model_type\":\"llama\","
    "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":8,\"pretraining_tp\":1,"
    "\"rms_norm_eps\":1e-05,\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"rope_theta\":500000.0,"
    "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\",\"transformers_version\":\"4.43.0\","
    "\"use_cache\":true,\"vocab_size\":128256}";

/* The same model as transformers 5 writes it: rope_parameters, dtype. */
static const char *llama31_tf5 =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":128000,"
    "\"dtype\":\"bfloat16\",\"eos_token_id\":[128001,128008,128009],\"hidden_size\":4096,"
    "\"intermediate_size\":14336,\"max_position_embeddings\":131072,\"model_type\":\"llama\","
    "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-05,"
    "\"rope_parameters\":{\"factor\":8.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
    "\"original_max_position_embeddings\":8192,\"rope_theta\":500000.0,\"rope_type\":\"llama3\"},"
    "\"tie_word_embeddings\":false,\"transformers_version\":\"5.0.0\",\"vocab_size\":128256}";

static int check_llama31(const hearth_model_config *c) {
    return !strcmp(c->arch, "llama") && c->vocab_size == 128256 && c->hidden_size == 4096 &&
           c->intermediate_size == 14336 && c->n_layers == 32 && c->n_heads == 32 && c->n_kv_heads == 8 &&
           c->head_dim == 128 && c->max_position_embeddings == 131072 && fabsf(c->rms_norm_eps - 1e-5f) < 1e-12f &&
           c->rope_theta == 500000.0 && c->rope_scaling == HEARTH_ROPE_LLAMA3 && c->rope_factor == 8.0 &&
           c->rope_low_freq_factor == 1.0 && c->rope_high_freq_factor == 4.0 && c->rope_original_max_pos == 8192 &&
           c->tie_word_embeddings == 0 && c->sliding_window == 0 && c->attention_bias == 0 && c->qk_norm == 0 &&
           c->bos_token_id == 128000 && c->n_eos == 3 && c->eos_token_ids[0] == 128001 &&
           c->eos_token_ids[2] == 128009 && !strcmp(c->torch_dtype, "bfloat16") && c->rope_neox == 1;
}

TEST(hf_config_llama3_tf4_and_tf5) {
    char dir[512];
    hearth_err err = {0};
    hearth_model_config c;
    CHECK(hf_dir(dir, sizeof dir, "cfg_tf4", "config.json", llama31_tf4));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK(check_llama31(&c));
    CHECK(hf_dir(dir, sizeof dir, "cfg_tf5", "config.json", llama31_tf5));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK(check_llama31(&c));
    /* the older "type" spelling of the rope type, linear scaling */
    CHECK(hf_dir(dir, sizeof dir, "cfg_linear", "config.json",
                 "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
                 "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"linear\","
                 "\"factor\":2.0},\"eos_token_id\":2}"));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(c.rope_scaling, HEARTH_ROPE_LINEAR);
    CHECK_NEAR(c.rope_factor, 2.0, 0);
    CHECK_NEAR(c.rope_theta, 10000.0, 0);            /* LlamaConfig defaults */
    CHECK_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
    CHECK_EQ(c.max_position_embeddings, 2048);
    CHECK_EQ(c.n_kv_heads, 4);
    CHECK_EQ(c.head_dim, 16);
    CHECK_EQ(c.bos_token_id, -1);
    CHECK(c.n_eos == 1 && c.eos_token_ids[0] == 2);
    CHECK_STR(c.torch_dtype, "");
}

TEST(hf_config_qwen_and_mistral_defaults) {
    char dir[512];
    hearth_err err = {0};
    hearth_model_config c;
    /* qwen2: bias always, sliding_window ignored unless use_sliding_window */
    CHECK(hf_dir(dir, sizeof dir, "cfg_qwen2", "config.json",
                 "{\"model_type\":\"qwen2\",\"vocab_size\":151936,\"hidden_size\":896,\"intermediate_size\":4864,"
                 "\"num_hidden_layers\":24,\"num_attention_heads\":14,\"num_key_value_heads\":2,"
                 "\"rope_theta\":1000000.0,\"sliding_window\":32768,\"use_sliding_window\":false,"
                 "\"tie_word_embeddings\":true,\"rms_norm_eps\":1e-06,\"bos_token_id\":151643,"
                 "\"eos_token_id\":151645,\"torch_dtype\":\"bfloat16\"}"));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_STR(c.arch, "qwen2");
    CHECK_EQ(c.head_dim, 64);
    CHECK_EQ(c.n_kv_heads, 2);
    CHECK_EQ(c.attention_bias, 1);
    CHECK_EQ(c.qk_norm, 0);
    CHECK_EQ(c.sliding_window, 0);
    CHECK_EQ(c.tie_word_embeddings, 1);
    CHECK_EQ(c.max_position_embeddings, 32768);
    CHECK_NEAR(c.rope_theta, 1e6, 0);
    CHECK_EQ(c.rope_scaling, HEARTH_ROPE_DEFAULT);
    /* qwen2 with use_sliding_window, no explicit size: Qwen2Config's 4096 */
    CHECK(hf_dir(dir, sizeof dir, "cfg_qwen2_swa", "config.json",
                 "{\"model_type\":\"qwen2\",\"vocab_size\":1000,\"hidden_size\":64,\"intermediate_size\":128,"
                 "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"use_sliding_window\":true}"));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(c.sliding_window, 4096);
    CHECK_EQ(c.n_kv_heads, 4);
    /* qwen3: q/k norm, no bias by default, head_dim defaults to 128 (Qwen3Config) */
    CHECK(hf_dir(dir, sizeof dir, "cfg_qwen3", "config.json",
                 "{\"model_type\":\"qwen3\",\"vocab_size\":151936,\"hidden_size\":1024,\"intermediate_size\":3072,"
                 "\"num_hidden_layers\":28,\"num_attention_heads\":16,\"num_key_value_heads\":8,"
                 "\"max_position_embeddings\":40960,\"rope_theta\":1000000,\"eos_token_id\":151645}"));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(c.qk_norm, 1);
    CHECK_EQ(c.attention_bias, 0);
    CHECK_EQ(c.head_dim, 128);
    CHECK_EQ(c.max_position_embeddings, 40960);
    CHECK_NEAR(c.rope_theta, 1e6, 0); /* an integer where a float is usual is fine */
    /* mistral: sliding_window null = none, absent = MistralConfig's 4096 */
    CHECK(hf_dir(dir, sizeof dir, "cfg_mistral", "config.json",
                 "{\"model_type\":\"mistral\",\"vocab_size\":32768,\"hidden_size\":4096,\"intermediate_size\":14336,"
                 "\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8,\"head_dim\":null,"
                 "\"sliding_window\":null,\"rope_theta\":1000000.0}"));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(c.sliding_window, 0);
    CHECK_EQ(c.head_dim, 128);
    CHECK_EQ(c.max_position_embeddings, 131072);
    CHECK_EQ(c.attention_bias, 0);
    CHECK(hf_dir(dir, sizeof dir, "cfg_mistral01", "config.json",
                 "{\"model_type\":\"mistral\",\"vocab_size\":32000,\"hidden_size\":4096,\"intermediate_size\":14336,"
                 "\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8}"));
    CHECK_MSG(hearth_hf_config_load(&c, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(c.sliding_window, 4096);
}

TEST(hf_config_errors_name_field_and_file) {
    static const struct {
        const char *what, *json;
        hearth_status want;
        const char *msg;
    } cases[] = {
        {"missing field",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_attention_heads\":4}",
         HEARTH_EFORMAT, "required field num_hidden_layers missing"},
        {"no model_type", "{\"vocab_size\":32000}", HEARTH_EFORMAT, "required field model_type missing"},
        {"unknown model_type", "{\"model_type\":\"gpt_neox\",\"vocab_size\":32000}", HEARTH_ENOTSUP,
         "model_type gpt_neox is not supported"},
        {"string size",
         "{\"model_type\":\"llama\",\"vocab_size\":\"32000\",\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4}",
         HEARTH_EFORMAT, "field vocab_size must be an integer >= 1"},
        {"zero heads",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":0}",
         HEARTH_EFORMAT, "field num_attention_heads must be an integer >= 1"},
        {"kv not dividing heads",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":3}",
         HEARTH_EFORMAT, "n_heads 4 is not a multiple of n_kv_heads 3"},
        {"hidden not dividing heads",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":65,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4}",
         HEARTH_EFORMAT, "hidden_size 65 is not a multiple of num_attention_heads 4"},
        {"yarn",
         "{\"model_type\":\"qwen2\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}",
         HEARTH_ENOTSUP, "rope_scaling type yarn is not supported"},
        {"llama3 missing factor",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":\"llama3\","
         "\"factor\":8.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}",
         HEARTH_EFORMAT, "required field rope_parameters.low_freq_factor missing"},
        {"rope_scaling without type",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"rope_scaling\":{\"factor\":2.0}}",
         HEARTH_EFORMAT, "rope_scaling has no rope_type"},
        {"bool as string",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"tie_word_embeddings\":\"yes\"}",
         HEARTH_EFORMAT, "field tie_word_embeddings must be true or false"},
        {"eos not ids",
         "{\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"eos_token_id\":[1,\"x\"]}",
         HEARTH_EFORMAT, "field eos_token_id must be a token id"},
        {"bos outside vocab",
         "{\"model_type\":\"llama\",\"vocab_size\":100,\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"bos_token_id\":100}",
         HEARTH_EFORMAT, "bos_token_id 100 outside vocab"},
        {"bad JSON", "{\"model_type\":\"llama\",", HEARTH_EFORMAT, "JSON"},
        {"not an object", "[]", HEARTH_EFORMAT, "not a JSON object"},
    };
    char dir[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(hf_dir(dir, sizeof dir, "cfg_bad", "config.json", cases[i].json));
        hearth_err err = {0};
        hearth_model_config c;
        hearth_status st = hearth_hf_config_load(&c, dir, &err);
        CHECK_MSG(st == cases[i].want, "%s: %s (%s)", cases[i].what, hearth_status_name(st), err.msg);
        CHECK_MSG(strstr(err.msg, dir) && strstr(err.msg, "config.json") && strstr(err.msg, cases[i].msg),
                  "%s: message \"%s\"", cases[i].what, err.msg);
    }
    hearth_err err = {0};
    hearth_model_config c;
    CHECK(hf_dir(dir, sizeof dir, "cfg_none", "unused", NULL));
    CHECK_EQ(hearth_hf_config_load(&c, dir, &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, "config.json");
}

/* ------------------------------------------------ generation_config.json */

TEST(hf_gen_config_present_absent_bad) {
    char dir[512];
    hearth_err err = {0};
    hearth_gen_defaults g;
    CHECK(hf_dir(dir, sizeof dir, "gen_present", "generation_config.json",
                 "{\"bos_token_id\":128000,\"do_sample\":true,\"eos_token_id\":[128001,128008,128009],"
                 "\"temperature\":0.6,\"top_p\":0.9,\"top_k\":20,\"min_p\":0,\"repetition_penalty\":1.05,"
                 "\"max_new_tokens\":512,\"transformers_version\":\"4.45.0\"}"));
    CHECK_MSG(hearth_hf_gen_config_load(&g, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK(g.has_temperature && g.has_top_p && g.has_top_k && g.has_min_p && g.has_repetition_penalty &&
          g.has_max_new_tokens && g.has_do_sample);
    CHECK_NEAR(g.temperature, 0.6, 1e-7);
    CHECK_NEAR(g.top_p, 0.9, 1e-7);
    CHECK_EQ(g.top_k, 20);
    CHECK_NEAR(g.min_p, 0, 0);
    CHECK_NEAR(g.repetition_penalty, 1.05, 1e-7);
    CHECK_EQ(g.max_new_tokens, 512);
    CHECK_EQ(g.do_sample, 1);
    CHECK_EQ(g.bos_token_id, 128000);
    CHECK(g.n_eos == 3 && g.eos_token_ids[0] == 128001 && g.eos_token_ids[1] == 128008);

    /* partial: only what is there is set; null is unset; eos as a single int */
    CHECK(hf_dir(dir, sizeof dir, "gen_partial", "generation_config.json",
                 "{\"eos_token_id\":2,\"temperature\":null,\"top_p\":0.95}"));
    CHECK_MSG(hearth_hf_gen_config_load(&g, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK(!g.has_temperature && g.has_top_p && !g.has_top_k && !g.has_min_p && !g.has_repetition_penalty &&
          !g.has_max_new_tokens && !g.has_do_sample);
    CHECK(g.n_eos == 1 && g.eos_token_ids[0] == 2);
    CHECK_EQ(g.bos_token_id, -1);

    /* absent file: OK, all unset */
    CHECK(hf_dir(dir, sizeof dir, "gen_absent", "config.json", "{}"));
    g.has_top_p = 1;
    CHECK_EQ(hearth_hf_gen_config_load(&g, dir, &err), HEARTH_OK);
    CHECK(!g.has_top_p && !g.has_temperature && g.n_eos == 0);

    static const struct { const char *json, *msg; } bad[] = {
        {"{\"temperature\":\"hot\"}", "field temperature must be a number"},
        {"{\"top_k\":2.5}", "field top_k must be an integer"},
        {"{\"temperature\":-1}", "field temperature must be >= 0"},
        {"{\"do_sample\":1}", "field do_sample must be true or false"},
        {"{\"eos_token_id\":[1,2,3,4,5,6,7,8,9]}", "eos_token_id has 9 ids"},
        {"{\"top_p\":", "JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(hf_dir(dir, sizeof dir, "gen_bad", "generation_config.json", bad[i].json));
        CHECK_MSG(hearth_hf_gen_config_load(&g, dir, &err) != HEARTH_OK, "accepted %s", bad[i].json);
        CHECK_CONTAINS(err.msg, "generation_config.json");
        CHECK_CONTAINS(err.msg, bad[i].msg);
    }
}

/* ------------------------------------------------------------ from GGUF */

TEST(gguf_config_real_smollm2) {
    const char *path = test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if (access(path, R_OK) != 0) {
        printf("  note: %s absent, test skipped\n", path);
        return;
    }
    hearth_err err = {0};
    hearth_gguf *g;
    CHECK_MSG(hearth_gguf_open(&g, path, &err) == HEARTH_OK, "%s", err.msg);
    hearth_model_config c;
    hearth_status st = hearth_gguf_config_load(&c, g, &err);
    hearth_gguf_close(g);
    CHECK_MSG(st == HEARTH_OK, "%s", err.msg);
    CHECK_STR(c.arch, "llama");
    CHECK_EQ(c.vocab_size, 49152);
    CHECK_EQ(c.hidden_size, 576);
    CHECK_EQ(c.intermediate_size, 1536);
    CHECK_EQ(c.n_layers, 30);
    CHECK_EQ(c.n_heads, 9);
    CHECK_EQ(c.n_kv_heads, 3);
    CHECK_EQ(c.head_dim, 64);
    CHECK_EQ(c.max_position_embeddings, 8192);
    CHECK_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
    CHECK_NEAR(c.rope_theta, 100000.0, 0);
    CHECK_EQ(c.rope_scaling, HEARTH_ROPE_DEFAULT);
    CHECK_EQ(c.tie_word_embeddings, 1);
    CHECK_EQ(c.sliding_window, 0);
    CHECK_EQ(c.attention_bias, 0);
    CHECK_EQ(c.qk_norm, 0);
    CHECK_EQ(c.bos_token_id, 1);
    CHECK(c.n_eos == 1 && c.eos_token_ids[0] == 2);
    CHECK_STR(c.torch_dtype, "");
    CHECK_EQ(c.rope_neox, 0);
}

/* A small GGUF of arch `arch` with the usual keys; extra kvs/tensors vary. */
typedef struct {
    const char *arch;
    int with_output, with_bias, with_qnorm, skip_ffn, rope_linear, rope_yarn, eot, vocab_rows;
} gcfg;

static int write_cfg_gguf(const char *path, const gcfg *o) {
    static float zeros[64 * 16];
    gw_tensor t[4];
    int nt = 0;
    int rows = o->vocab_rows ? o->vocab_rows : 10;
    t[nt++] = (gw_tensor){"token_embd.weight", 2, {64, rows, 1, 1}, HEARTH_DT_F32, zeros, 64 * 4 * (size_t)rows};
    if (o->with_output) t[nt++] = (gw_tensor){"output.weight", 2, {64, 10, 1, 1}, HEARTH_DT_F32, zeros, 64 * 40};
    if (o->with_bias) t[nt++] = (gw_tensor){"blk.0.attn_q.bias", 1, {64, 1, 1, 1}, HEARTH_DT_F32, zeros, 256};
    if (o->with_qnorm) t[nt++] = (gw_tensor){"blk.0.attn_q_norm.weight", 1, {16, 1, 1, 1}, HEARTH_DT_F32, zeros, 64};
    int nkv = 12 - (o->skip_ffn ? 1 : 0) + (o->rope_linear ? 2 : 0) + (o->rope_yarn ? 1 : 0) + (o->eot ? 1 : 0);
    gw_buf w = {0};
    char k[128];
#define K(s) (snprintf(k, sizeof k, "%s." s, o->arch), k)
    gw_header(&w, 3, (uint64_t)nt, (uint64_t)nkv);
    gw_kv_str(&w, "general.architecture", o->arch);
    gw_kv_u32(&w, K("block_count"), 2);
    gw_kv_u32(&w, K("context_length"), 4096);
    gw_kv_u32(&w, K("embedding_length"), 64);
    if (!o->skip_ffn) gw_kv_u32(&w, K("feed_forward_length"), 128);
    gw_kv_u32(&w, K("attention.head_count"), 4);
    gw_kv_u32(&w, K("attention.head_count_kv"), 2);
    gw_kv_f32(&w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    gw_kv_f32(&w, K("rope.freq_base"), 1000000.0f);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 7);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 8);
    static const char *const toks[10] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    gw_kv_strs(&w, "tokenizer.ggml.tokens", toks, 10);
    if (o->rope_linear) {
        gw_kv_str(&w, K("rope.scaling.type"), "linear");
        gw_kv_f32(&w, K("rope.scaling.factor"), 4.0f);
    }
    if (o->rope_yarn) gw_kv_str(&w, K("rope.scaling.type"), "yarn");
    if (o->eot) gw_kv_u32(&w, "tokenizer.ggml.eot_token_id", 9);
#undef K
    gw_tensors(&w, t, nt, 32, NULL);
    int rc = write_file(path, w.b, w.n);
    gw_free(&w);
    return rc;
}

static hearth_status load_cfg_gguf(const char *path, hearth_model_config *c, hearth_err *err) {
    hearth_gguf *g;
    hearth_status st = hearth_gguf_open(&g, path, err);
    if (st) return st;
    st = hearth_gguf_config_load(c, g, err);
    hearth_gguf_close(g);
    return st;
}

TEST(gguf_config_written_files) {
    char path[512];
    tmp_path(path, sizeof path, "cfg.gguf");
    hearth_err err = {0};
    hearth_model_config c;

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "qwen2", .with_output = 1, .with_bias = 1, .eot = 1}) == 0);
    CHECK_MSG(load_cfg_gguf(path, &c, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_STR(c.arch, "qwen2");
    CHECK(c.n_layers == 2 && c.hidden_size == 64 && c.intermediate_size == 128 && c.n_heads == 4 &&
          c.n_kv_heads == 2 && c.head_dim == 16 && c.max_position_embeddings == 4096 && c.vocab_size == 10);
    CHECK_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
    CHECK_NEAR(c.rope_theta, 1e6, 0);
    CHECK_EQ(c.tie_word_embeddings, 0);
    CHECK_EQ(c.attention_bias, 1);
    CHECK_EQ(c.qk_norm, 0);
    CHECK_EQ(c.rope_neox, 1);
    CHECK_EQ(c.bos_token_id, 7);
    CHECK(c.n_eos == 2 && c.eos_token_ids[0] == 8 && c.eos_token_ids[1] == 9);

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "qwen3", .with_qnorm = 1}) == 0);
    CHECK_MSG(load_cfg_gguf(path, &c, &err) == HEARTH_OK, "%s", err.msg);
    CHECK(c.qk_norm == 1 && c.attention_bias == 0 && c.tie_word_embeddings == 1 && c.rope_neox == 1);

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "mistral", .rope_linear = 1}) == 0);
    CHECK_MSG(load_cfg_gguf(path, &c, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(c.rope_neox, 0);
    CHECK_EQ(c.rope_scaling, HEARTH_ROPE_LINEAR);
    CHECK_NEAR(c.rope_factor, 4.0, 0);

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "llama", .skip_ffn = 1}) == 0);
    CHECK_EQ(load_cfg_gguf(path, &c, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, "required key llama.feed_forward_length missing");

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "gpt2"}) == 0);
    CHECK_EQ(load_cfg_gguf(path, &c, &err), HEARTH_ENOTSUP);
    CHECK_CONTAINS(err.msg, "general.architecture gpt2 is not supported");

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "llama", .rope_yarn = 1}) == 0);
    CHECK_EQ(load_cfg_gguf(path, &c, &err), HEARTH_ENOTSUP);
    CHECK_CONTAINS(err.msg, "llama.rope.scaling.type: rope scaling yarn");

    CHECK(write_cfg_gguf(path, &(gcfg){.arch = "llama", .vocab_rows = 12}) == 0);
    CHECK_EQ(load_cfg_gguf(path, &c, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "token_embd.weight has 12 rows, vocab is 10");
}
