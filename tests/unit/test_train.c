/* test_train.c - LoRA fine-tuning (train/lora_train.c): the losses, the
 * first gradient and the adapter after four AdamW steps against PyTorch +
 * PEFT (tests/fixtures/train, made by tools/oracle/make_train_goldens.py);
 * the gradient against finite differences on a quantized GGUF model; a
 * saved adapter served by the inference path gives the trainer's loss. */
#include "train_golden.h"

#include "ops/cpu/ops_cpu.h"

static int tr_open(tr_rig *r, const char *model, const hearth_lora_train_opts *o, const char *init) {
    hearth_err err = {0};
    memset(r, 0, sizeof *r);
    hearth_cpu_ctx *cpu = NULL;
    hearth_status st = hearth_cpu_ctx_new(&cpu, 2, 64, 512, 256, &err);
    r->ctx = cpu;
    return tr_load(r, st, &hearth_cpu_ops, model, o, init, &err);
}

static void tr_close(tr_rig *r) {
    hearth_lora_trainer_free(r->t);
    hearth_model_free(r->m);
    hearth_cpu_ctx_free(r->ctx);
}

/* Four AdamW steps over three sequences, as PyTorch + PEFT take them: each
 * step's loss, the first gradient and the adapter at the end. llama3 (all
 * seven projections), qwen2 (q/k/v biases, rsLoRA), qwen3 (head norms, three
 * projections), mistral (a sliding window of 8 over sequences of 20-50). */
TEST(train_lora_vs_peft) {
    const char *cases[] = {"llama3-all", "qwen2-rslora", "qwen3-some", "mistral-window"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) case_vs_peft(cases[i]);
}

TEST(train_checkpoint_equals_kept) {
    case_pack_equals_alone("tests/fixtures/tiny-gguf/llama3-f32.gguf", 1);
    case_pack_equals_alone("tests/fixtures/tiny/qwen3-f32", 1);
}

TEST(train_pack_equals_alone) {
    case_pack_equals_alone("tests/fixtures/tiny-gguf/llama3-f32.gguf", 0);
    case_pack_equals_alone("tests/fixtures/tiny/qwen3-f32", 0);
}

/* n seeded token ids below vocab, every one after the first a label. */
static void random_seq(int32_t *ids, uint8_t *lab, int n, int vocab, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
        lab[i] = i > 0;
    }
}

static const hearth_lora_train_opts SMALL = {.rank = 4, .alpha = 8, .targets = 0x7f, .lr = 1e-2f, .beta1 = 0.9f,
                                              .beta2 = 0.999f, .eps = 1e-8f, .max_len = 64, .seed = 7};

/* The gradient of the mean loss against central differences of it, at the
 * largest entries of A and B of every projection, on the GGUF llama (its
 * q / k rows permuted, rope over adjacent pairs), after one step so that B
 * is not zero. */
TEST(train_gradient_vs_finite_differences) {
    tr_rig r;
    if (!tr_open(&r, "tests/fixtures/tiny-gguf/llama3-f32.gguf", &SMALL, NULL)) return;
    enum { N = 40 };
    int32_t ids[N];
    uint8_t lab[N];
    random_seq(ids, lab, N, hearth_model_config_get(r.m)->vocab_size, 3);
    hearth_err err = {0};
    double loss, lp, lm;
    CHECK_EQ(hearth_lora_trainer_accumulate(r.t, ids, lab, N, 1.0f / (N - 1), &loss, &err), HEARTH_OK);
    hearth_lora_trainer_step(r.t, SMALL.lr, NULL);
    CHECK_EQ(hearth_lora_trainer_accumulate(r.t, ids, lab, N, 1.0f / (N - 1), &loss, &err), HEARTH_OK);
    int checked = 0;
    double worst = 0;
    for (int l = 0; l < 2; l++)
        for (int tg = 0; tg < HEARTH_LORA_TARGETS; tg++)
            for (int w = 0; w < 2; w++) {
                int n, ng;
                float *p = hearth_lora_trainer_tensor(r.t, l, tg, w, &n),
                      *g = hearth_lora_trainer_tensor(r.t, l, tg, 2 + w, &ng);
                CHECK(p && g && n == ng);
                int best = 0;
                for (int i = 1; i < n; i++)
                    if (fabsf(g[i]) > fabsf(g[best])) best = i;
                const float want = g[best], h = 1e-2f, keep = p[best];
                p[best] = keep + h;
                CHECK_EQ(hearth_lora_trainer_accumulate(r.t, ids, lab, N, 0.0f, &lp, &err), HEARTH_OK);
                p[best] = keep - h;
                CHECK_EQ(hearth_lora_trainer_accumulate(r.t, ids, lab, N, 0.0f, &lm, &err), HEARTH_OK);
                p[best] = keep;
                const double fd = (lp - lm) / (2.0 * h) / (N - 1), e = fabs(fd - want) / fabs(want);
                CHECK_MSG(e < 2e-2, "layer %d %s lora_%c[%d]: gradient %.6g, differences %.6g", l,
                          hearth_lora_module(tg), w ? 'B' : 'A', best, want, fd);
                worst = e > worst ? e : worst;
                checked++;
            }
    printf("  %d entries, worst relative error %.2e\n", checked, worst);
    tr_close(&r);
}

/* Cross-entropy of ids' labels from an inference forward of model (with the
 * adapter in dir, if any) on a fresh CPU backend. */
static double served_loss(const char *model, const char *dir, const int32_t *ids, const uint8_t *lab, int n) {
    hearth_cpu_ctx *cpu;
    hearth_model *m;
    hearth_kv *kv;
    hearth_err err = {0};
    double loss = NAN;
    if (hearth_cpu_ctx_new(&cpu, 2, 64, 512, 64, &err)) return loss;
    if (hearth_model_load(&m, test_path(model), &hearth_cpu_ops, cpu, 64, 0, &err) == HEARTH_OK) {
        const hearth_model_config *c = hearth_model_config_get(m);
        int id = 0;
        int32_t seq[64], pos[64], rows[64], ad[64];
        float *logits = malloc(sizeof(float) * (size_t)n * c->vocab_size);
        int ok = 0;
        if (logits && (!dir || hearth_model_add_lora(m, "trained", dir, &id, &err) == HEARTH_OK) &&
            hearth_kv_new(&kv, &hearth_cpu_ops, cpu, c->n_layers, hearth_model_kv_dim(m), c->head_dim, HEARTH_DT_F32,
                          16, 4, 1, 64, &err) == HEARTH_OK) {
            for (int i = 0; i < n; i++) seq[i] = 0, pos[i] = i, rows[i] = i, ad[i] = id;
            if (hearth_kv_reserve(kv, 0, n) == HEARTH_OK &&
                hearth_model_set_row_adapters(m, ad, n, &err) == HEARTH_OK &&
                hearth_model_forward(m, kv, ids, seq, pos, n, rows, n, logits, &err) == HEARTH_OK) {
                ok = 1;
                loss = 0;
                for (int i = 0; i + 1 < n; i++) {
                    if (!lab[i + 1]) continue;
                    const float *z = logits + (size_t)i * c->vocab_size;
                    double mx = z[0], s = 0;
                    for (int v = 1; v < c->vocab_size; v++) mx = z[v] > mx ? z[v] : mx;
                    for (int v = 0; v < c->vocab_size; v++) s += exp(z[v] - mx);
                    loss += mx + log(s) - z[ids[i + 1]];
                }
            }
            hearth_kv_free(kv);
        }
        if (!ok) test_fail(__FILE__, __LINE__, "%s", err.msg);
        free(logits);
        hearth_model_free(m);
    }
    hearth_cpu_ctx_free(cpu);
    return loss;
}

/* Three steps on a q8_0 GGUF llama, the adapter saved as PEFT's directory and
 * loaded by the inference path: its forward gives the trainer's loss (the q/k
 * rows permuted back and forth, the scale, the config), which training
 * lowered, and the base model's differs. */
TEST(train_saved_adapter_serves_its_loss) {
    const char *model = "tests/fixtures/tiny-gguf/llama3-f32.gguf";
    tr_rig r;
    if (!tr_open(&r, model, &SMALL, NULL)) return;
    enum { N = 48 };
    int32_t ids[N];
    uint8_t lab[N];
    random_seq(ids, lab, N, hearth_model_config_get(r.m)->vocab_size, 11);
    hearth_err err = {0};
    double first = 0, loss = 0;
    for (int s = 0; s <= 3; s++) {
        CHECK_EQ(hearth_lora_trainer_accumulate(r.t, ids, lab, N, 1.0f / (N - 1), &loss, &err), HEARTH_OK);
        if (s == 0) first = loss;
        if (s < 3) hearth_lora_trainer_step(r.t, SMALL.lr, NULL);
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/trained", test_tmpdir());
    CHECK_EQ(hearth_lora_trainer_save(r.t, dir, model, &err), HEARTH_OK);
    tr_close(&r);
    const double served = served_loss(model, dir, ids, lab, N), base = served_loss(model, NULL, ids, lab, N);
    printf("  loss %.5f -> %.5f after 3 steps; served with the saved adapter %.5f, without %.5f\n", first / (N - 1),
           loss / (N - 1), served / (N - 1), base / (N - 1));
    CHECK(loss < 0.9 * first);
    CHECK_MSG(fabs(served - loss) <= 1e-5 * loss, "served %.6f, trained %.6f", served, loss);
    CHECK(fabs(base - first) <= 1e-4 * first); /* the base model is where training started (B = 0) */
}

/* DPO (sigmoid loss, the base model as reference) and ORPO (the chosen
 * sequence's NLL and the odds ratio), three AdamW steps over four pairs,
 * against TRL's formulas in PyTorch + PEFT (tools/oracle/make_pref_goldens.py). */
TEST(train_dpo_orpo_vs_pytorch) {
    case_pref("llama3-dpo");
    case_pref("qwen2-orpo");
}
