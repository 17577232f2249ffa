/* test_train_model_cuda.c - the LoRA trainer on the GPU against PyTorch +
 * PEFT's goldens, the same cases and tolerances as the CPU's test_train.c
 * (tests/unit/train_golden.h): four AdamW steps on tiny llama3, qwen2,
 * qwen3 and mistral (f32 weights, so the backward's weight copies are F32),
 * DPO and ORPO; then quantized and F16 GGUF models (BF16 copies) trained
 * on the GPU and on the CPU from the same start give the same losses. */
#include "../unit/train_golden.h"

#include "ops/cpu/ops_cpu.h"
#include "ops/cuda/ops_cuda.h"

static int tr_open(tr_rig *r, const char *model, const hearth_lora_train_opts *o, const char *init) {
    hearth_err err = {0};
    memset(r, 0, sizeof *r);
    hearth_cuda_ctx *cu = NULL;
    hearth_status st = hearth_cuda_ctx_new(&cu, 0, 64, 1024, 256, &err);
    r->ctx = cu;
    return tr_load(r, st, &hearth_cuda_ops, model, o, init, &err);
}

static void tr_close(tr_rig *r) {
    hearth_lora_trainer_free(r->t);
    hearth_model_free(r->m);
    if (r->ctx) {
        hearth_err err = {0};
        CHECK_MSG(hearth_cuda_ctx_error(r->ctx, &err) == HEARTH_OK, "cuda: %s", err.msg);
        hearth_cuda_ctx_free(r->ctx);
    }
}

TEST(cuda_train_lora_vs_peft) {
    const char *cases[] = {"llama3-all", "qwen2-rslora", "qwen3-some", "mistral-window"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) case_vs_peft(cases[i]);
}

TEST(cuda_train_dpo_orpo_vs_pytorch) {
    case_pref("llama3-dpo");
    case_pref("qwen2-orpo");
}

/* GGUF models of quantized and F16 weights (the GPU's forward takes BF16 products and its backward BF16
 * copies; the CPU's forward 8-bit activations for Q4_0, its backward F32 copies) trained three steps from
 * the same start on both backends: the losses and gradient norms agree to 2e-2. */
static void cross_backend(const char *model) {
    const hearth_lora_train_opts o = {.rank = 8, .alpha = 16, .targets = 0x7f, .lr = 1e-2f, .beta1 = 0.9f,
                                      .beta2 = 0.999f, .eps = 1e-8f, .max_len = 64, .seed = 5, .max_grad_norm = 1};
    hearth_err err = {0};
    hearth_cpu_ctx *cpu = NULL;
    hearth_model *mc = NULL;
    hearth_lora_trainer *tc = NULL;
    tr_rig g;
    if (hearth_cpu_ctx_new(&cpu, 0, 64, 1024, 256, &err) ||
        hearth_model_load(&mc, test_path(model), &hearth_cpu_ops, cpu, 64, 0, &err) ||
        hearth_lora_trainer_new(&tc, mc, &o, NULL, &err)) {
        test_fail(__FILE__, __LINE__, "%s on the CPU: %s", model, err.msg);
    } else if (tr_open(&g, model, &o, NULL)) {
        enum { N = 48 };
        const int vocab = hearth_model_config_get(mc)->vocab_size;
        int32_t ids[2][N];
        uint8_t lab[N];
        uint64_t seed = 11;
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < N; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                ids[s][i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
                lab[i] = i >= N / 2;
            }
        for (int step = 0; step < 3; step++) {
            double lc = 0, lg = 0, one, nc, ng;
            for (int s = 0; s < 2; s++) {
                CHECK_EQ(hearth_lora_trainer_accumulate(tc, ids[s], lab, N, 1.0f / N, &one, &err), HEARTH_OK);
                lc += one;
                CHECK_EQ(hearth_lora_trainer_accumulate(g.t, ids[s], lab, N, 1.0f / N, &one, &err), HEARTH_OK);
                lg += one;
            }
            hearth_lora_trainer_step(tc, o.lr, &nc);
            hearth_lora_trainer_step(g.t, o.lr, &ng);
            printf("  %s step %d: loss cpu %.5f cuda %.5f, gradient norm cpu %.5f cuda %.5f\n", model, step, lc / N,
                   lg / N, nc, ng);
            CHECK_MSG(fabs(lc - lg) <= 2e-2 * lc, "step %d: loss %.5f (cpu) vs %.5f (cuda)", step, lc / N, lg / N);
            CHECK_MSG(fabs(nc - ng) <= 2e-2 * nc, "step %d: gradient norm %.5f (cpu) vs %.5f (cuda)", step, nc, ng);
        }
        tr_close(&g);
    }
    hearth_lora_trainer_free(tc);
    hearth_model_free(mc);
    hearth_cpu_ctx_free(cpu);
}

TEST(cuda_train_matches_cpu_quantized) {
    cross_backend("tests/fixtures/tiny-gguf/llama2-q4_0.gguf");
    cross_backend("tests/fixtures/tiny-gguf/llama3-f16.gguf");
}

/* (cuda_train_checkpoint_equals_kept was written after the session's last GPU call: not yet run on one) */
TEST(cuda_train_checkpoint_equals_kept) {
    case_pack_equals_alone("tests/fixtures/tiny-gguf/llama3-f32.gguf", 1);
    case_pack_equals_alone("tests/fixtures/tiny/qwen3-f32", 1);
}

TEST(cuda_train_pack_equals_alone) {
    case_pack_equals_alone("tests/fixtures/tiny-gguf/llama3-f32.gguf", 0);
    case_pack_equals_alone("tests/fixtures/tiny/qwen3-f32", 0);
}
