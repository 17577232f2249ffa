/* train_golden.h - the LoRA trainer against PyTorch + PEFT's goldens
 * (tests/fixtures/train and pref, made by tools/oracle/make_train_goldens.py
 * and make_pref_goldens.py), shared by the CPU tests (test_train.c) and the
 * CUDA ones (tests/cuda/test_train_model_cuda.c). The including file defines
 * tr_open / tr_close for its backend. */
#ifndef HEARTH_TESTS_TRAIN_GOLDEN_H
#define HEARTH_TESTS_TRAIN_GOLDEN_H

#include "testhelp.h"

#include "io/safetensors.h"
#include "train/lora_train.h"
#include "train/pref.h"

#include <jansson.h>
#include <math.h>

typedef struct {
    void *ctx; /* the backend's */
    hearth_model *m;
    hearth_lora_trainer *t;
} tr_rig;

/* Model (a path under the tests' root), a trainer on it; 0 (a failure recorded) when either fails. */
static int tr_open(tr_rig *r, const char *model, const hearth_lora_train_opts *o, const char *init);
static void tr_close(tr_rig *r);

/* tr_open's part after its backend's context (st: how making it went; r->ctx): the model on ops and a trainer. */
static int tr_load(tr_rig *r, hearth_status st, const hearth_ops *ops, const char *model,
                   const hearth_lora_train_opts *o, const char *init, hearth_err *err) {
    if (st || hearth_model_load(&r->m, test_path(model), ops, r->ctx, 64, 0, err) ||
        hearth_lora_trainer_new(&r->t, r->m, o, init ? test_path(init) : NULL, err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", model, err->msg);
        return 0;
    }
    return 1;
}

/* Largest |a - b| over n, and largest |b|. */
static void diff(const float *a, const float *b, size_t n, double *d, double *mag) {
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > *d) *d = fabs((double)a[i] - b[i]);
        if (fabs(b[i]) > *mag) *mag = fabs(b[i]);
    }
}

/* Every pair of the trainer (or their gradients) against a PEFT file:
 * the largest difference relative to the file's largest value. */
static double against_file(const tr_rig *r, const char *path, int grads) {
    hearth_st_set *s;
    hearth_err err = {0};
    if (hearth_st_open_file(&s, path, &err)) {
        test_fail(__FILE__, __LINE__, "%s", err.msg);
        return INFINITY;
    }
    const hearth_model_config *c = hearth_model_config_get(r->m);
    double d = 0, mag = 0;
    int found = 0;
    float *a = malloc(sizeof(float) * 65536), *b = malloc(sizeof(float) * 65536);
    for (int l = 0; l < c->n_layers; l++)
        for (int tg = 0; tg < HEARTH_LORA_TARGETS; tg++) {
            if (!hearth_lora_trainer_get(r->t, l, tg, grads ? NULL : a, grads ? NULL : b, grads ? a : NULL,
                                         grads ? b : NULL))
                continue;
            for (int w = 0; w < 2; w++) {
                char name[200];
                snprintf(name, sizeof name, "base_model.model.model.layers.%d.%s.lora_%c.weight", l,
                         hearth_lora_module(tg), w ? 'B' : 'A');
                const hearth_st_tensor *f = hearth_st_find(s, name);
                if (!f || f->type != HEARTH_DT_F32) {
                    test_fail(__FILE__, __LINE__, "%s: no F32 %s", path, name);
                    continue;
                }
                diff(w ? b : a, f->data, f->nbytes / 4, &d, &mag);
                found++;
            }
        }
    free(a);
    free(b);
    if (found != hearth_st_n_tensors(s))
        test_fail(__FILE__, __LINE__, "%s: %d of its %d tensors trained", path, found, (int)hearth_st_n_tensors(s));
    hearth_st_close(s);
    return mag > 0 ? d / mag : INFINITY;
}

/* A case's golden.json and the optimizer settings it names. */
static json_t *golden(const char *dir, hearth_lora_train_opts *o) {
    char path[600];
    snprintf(path, sizeof path, "%s/golden.json", test_path(dir));
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    if (!g) {
        test_fail(__FILE__, __LINE__, "%s: %s", path, je.text);
        return NULL;
    }
    *o = (hearth_lora_train_opts){
        .lr = (float)json_number_value(json_object_get(g, "lr")),
        .beta1 = (float)json_number_value(json_array_get(json_object_get(g, "betas"), 0)),
        .beta2 = (float)json_number_value(json_array_get(json_object_get(g, "betas"), 1)),
        .eps = (float)json_number_value(json_object_get(g, "eps")),
        .weight_decay = (float)json_number_value(json_object_get(g, "weight_decay")),
        .max_len = 64,
    };
    return g;
}

/* Step s's loss against the golden's (and at step 0 the accumulated
 * gradient against grads0.safetensors), then the step. */
static void golden_step(tr_rig *r, const char *name, const char *dir, const json_t *g, size_t s, double loss,
                        double *worst) {
    char path[600];
    const double want = json_number_value(json_array_get(json_object_get(g, "losses"), s));
    *worst = fabs(loss - want) / want > *worst ? fabs(loss - want) / want : *worst;
    CHECK_MSG(fabs(loss - want) <= 1e-5 * fmax(want, 1.0), "%s step %zu: loss %.7f, PyTorch %.7f", name, s, loss,
              want);
    if (s == 0) {
        snprintf(path, sizeof path, "%s/grads0.safetensors", test_path(dir));
        double e = against_file(r, path, 1);
        printf("  %s: step-0 gradient max |d| / max |g| %.2e\n", name, e);
        CHECK_MSG(e < 3e-5, "%s: the first gradient differs from PyTorch's by %.2e", name, e);
    }
    hearth_lora_trainer_step(r->t, (float)json_number_value(json_object_get(g, "lr")), NULL);
}

/* The adapter after the golden's steps against final/. */
static void golden_final(const tr_rig *r, const char *name, const char *dir, size_t steps, double worst) {
    char path[600];
    snprintf(path, sizeof path, "%s/final/adapter_model.safetensors", test_path(dir));
    double e = against_file(r, path, 0);
    printf("  %s: losses within %.2e of PyTorch's; adapter after %zu steps max |d| / max |w| %.2e\n", name, worst,
           steps, e);
    CHECK_MSG(e < 1e-4, "%s: the trained adapter differs from PyTorch's by %.2e", name, e);
}

/* Case name of tests/fixtures/KIND: its golden (NULL on a failure, recorded) and a rig on its model from
 * its init/ adapter; dir [512] gets the case's directory. */
static json_t *golden_open(const char *kind, const char *name, char *dir, tr_rig *r) {
    char model[200], init[600];
    snprintf(dir, 512, "tests/fixtures/%s/%s", kind, name);
    hearth_lora_train_opts o;
    json_t *g = golden(dir, &o);
    if (!g) return NULL;
    snprintf(model, sizeof model, "tests/fixtures/%s", json_string_value(json_object_get(g, "model")));
    snprintf(init, sizeof init, "%s/init", dir);
    if (!tr_open(r, model, &o, init)) {
        json_decref(g);
        return NULL;
    }
    return g;
}

static void case_vs_peft(const char *name) {
    char dir[512];
    tr_rig r;
    json_t *g = golden_open("train", name, dir, &r);
    if (!g) return;
    const json_t *seqs = json_object_get(g, "sequences"), *batches = json_object_get(g, "batches");
    double worst_loss = 0;
    for (size_t s = 0; s < json_array_size(batches); s++) {
        const json_t *batch = json_array_get(batches, s);
        int32_t tok[64][64];
        uint8_t lab[64][64];
        int len[64], labels = 0;
        for (size_t i = 0; i < json_array_size(batch); i++) {
            const json_t *q = json_array_get(seqs, (size_t)json_integer_value(json_array_get(batch, i)));
            len[i] = (int)json_array_size(json_object_get(q, "tokens"));
            for (int k = 0; k < len[i]; k++) {
                tok[i][k] = (int32_t)json_integer_value(json_array_get(json_object_get(q, "tokens"), k));
                lab[i][k] = (uint8_t)json_integer_value(json_array_get(json_object_get(q, "labels"), k));
                labels += lab[i][k];
            }
        }
        double loss = 0;
        for (size_t i = 0; i < json_array_size(batch); i++) {
            double one;
            hearth_err err = {0};
            CHECK_EQ(hearth_lora_trainer_accumulate(r.t, tok[i], lab[i], len[i], 1.0f / labels, &one, &err),
                     HEARTH_OK);
            loss += one;
        }
        golden_step(&r, name, dir, g, s, loss / labels, &worst_loss);
    }
    golden_final(&r, name, dir, json_array_size(batches), worst_loss);
    tr_close(&r);
    json_decref(g);
}

/* {"tokens": [...], "labels": [...]} -> e (malloc'd). */
static void json_example(const json_t *q, hearth_train_example *e) {
    const json_t *tk = json_object_get(q, "tokens"), *lb = json_object_get(q, "labels");
    e->n = (int)json_array_size(tk);
    e->tokens = malloc(sizeof(int32_t) * (size_t)e->n);
    e->label = malloc((size_t)e->n);
    for (int i = 0; i < e->n; i++) {
        e->tokens[i] = (int32_t)json_integer_value(json_array_get(tk, (size_t)i));
        e->label[i] = (uint8_t)json_integer_value(json_array_get(lb, (size_t)i));
    }
}

static void case_pref(const char *name) {
    char dir[512];
    tr_rig r;
    json_t *g = golden_open("pref", name, dir, &r);
    if (!g) return;
    const hearth_pref_method m = strcmp(json_string_value(json_object_get(g, "method")), "dpo") ? HEARTH_PREF_ORPO
                                                                                              : HEARTH_PREF_DPO;
    const float beta = (float)json_number_value(json_object_get(g, "beta"));
    const json_t *pairs = json_object_get(g, "pairs"), *batches = json_object_get(g, "batches");
    hearth_train_prefs d = {.n = (int)json_array_size(pairs)};
    d.p = calloc((size_t)d.n, sizeof *d.p);
    for (int i = 0; i < d.n; i++) {
        json_example(json_object_get(json_array_get(pairs, (size_t)i), "chosen"), &d.p[i].chosen);
        json_example(json_object_get(json_array_get(pairs, (size_t)i), "rejected"), &d.p[i].rejected);
    }
    double ref[64];
    hearth_err err = {0};
    if (m == HEARTH_PREF_DPO) CHECK_EQ(hearth_pref_reference(r.t, &d, ref, &err), HEARTH_OK);
    double worst = 0;
    for (size_t s = 0; s < json_array_size(batches); s++) {
        const json_t *b = json_array_get(batches, s);
        int idx[16], P = (int)json_array_size(b);
        for (int i = 0; i < P; i++) idx[i] = (int)json_integer_value(json_array_get(b, (size_t)i));
        hearth_pref_stats st;
        CHECK_EQ(hearth_pref_accumulate(r.t, m, beta, &d, m == HEARTH_PREF_DPO ? ref : NULL, idx, P, &st, &err),
                 HEARTH_OK);
        if (m == HEARTH_PREF_DPO)
            CHECK_NEAR(st.accuracy, json_number_value(json_array_get(json_object_get(g, "accuracies"), s)), 1e-9);
        golden_step(&r, name, dir, g, s, st.loss, &worst);
    }
    golden_final(&r, name, dir, json_array_size(batches), worst);
    for (int i = 0; i < d.n; i++) {
        free(d.p[i].chosen.tokens), free(d.p[i].chosen.label);
        free(d.p[i].rejected.tokens), free(d.p[i].rejected.label);
    }
    free(d.p);
    tr_close(&r);
    json_decref(g);
}

/* Three sequences of a tiny llama (permuted GGUF q / k, rope by adjacent pairs) or a qwen3 (head norms),
 * two steps: as one pack, and with gradient checkpointing (each layer's forward run again in the backward)
 * when checkpoint is set, they give the losses and the gradient of the three run alone without it, to
 * 1e-5 (each sequence of a pack attends only to itself: one that leaked across them would differ at once). */
static void case_pack_equals_alone(const char *model, int checkpoint) {
    const hearth_lora_train_opts o = {.rank = 4, .alpha = 8, .targets = 0x7f, .lr = 1e-2f, .beta1 = 0.9f,
                                      .beta2 = 0.999f, .eps = 1e-8f, .max_len = 30, .pack = 64, .seed = 3};
    hearth_lora_train_opts ob = o;
    ob.checkpoint = checkpoint;
    tr_rig a, b;
    if (!tr_open(&a, model, &o, NULL)) return;
    if (!tr_open(&b, model, &ob, NULL)) {
        tr_close(&a);
        return;
    }
    const int vocab = hearth_model_config_get(a.m)->vocab_size, n[3] = {30, 17, 12};
    int32_t ids[3][30];
    uint8_t lab[3][30];
    uint64_t seed = 5;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < n[s]; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            ids[s][i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
            lab[s][i] = i > 3;
        }
    hearth_err err = {0};
    double alone = 0, packed, one;
    for (int step = 0; step < 2; step++) { /* the second step with B no longer zero */
        alone = 0;
        for (int s = 0; s < 3; s++) {
            CHECK_EQ(hearth_lora_trainer_accumulate(a.t, ids[s], lab[s], n[s], 0.01f, &one, &err), HEARTH_OK);
            alone += one;
        }
        const int32_t *tk[3] = {ids[0], ids[1], ids[2]};
        const uint8_t *lb[3] = {lab[0], lab[1], lab[2]};
        CHECK_EQ(hearth_lora_trainer_accumulate_pack(b.t, 3, tk, lb, n, 0.01f, &packed, &err), HEARTH_OK);
        CHECK_MSG(fabs(alone - packed) <= 1e-5 * alone, "%s step %d: loss %.7f alone, %.7f packed", model, step,
                  alone, packed);
        double d = 0, mag = 0;
        float *ga = malloc(sizeof(float) * 65536), *gb = malloc(sizeof(float) * 65536),
              *ha = malloc(sizeof(float) * 65536), *hb = malloc(sizeof(float) * 65536);
        const hearth_model_config *c = hearth_model_config_get(a.m);
        for (int l = 0; l < c->n_layers; l++)
            for (int tg = 0; tg < HEARTH_LORA_TARGETS; tg++) {
                int out, in;
                hearth_lora_target_shape(c, tg, &out, &in);
                hearth_lora_trainer_get(a.t, l, tg, NULL, NULL, ga, gb);
                hearth_lora_trainer_get(b.t, l, tg, NULL, NULL, ha, hb);
                diff(ha, ga, (size_t)o.rank * in, &d, &mag);
                diff(hb, gb, (size_t)out * o.rank, &d, &mag);
            }
        free(ga), free(gb), free(ha), free(hb);
        CHECK_MSG(d <= 1e-5 * mag, "%s step %d: gradient max |d| %.3g of max |g| %.3g", model, step, d, mag);
        printf("  %s step %d: loss %.7f alone, %.7f packed%s; gradient max |d| / max |g| %.2e\n", model, step,
               alone, packed, checkpoint ? " and checkpointed" : "", mag > 0 ? d / mag : 0.0);
        hearth_lora_trainer_step(a.t, o.lr, NULL);
        hearth_lora_trainer_step(b.t, o.lr, NULL);
    }
    tr_close(&a);
    tr_close(&b);
}

#endif
