/* cmd_train.c - `hearth train MODEL --data FILE.jsonl --out DIR`: supervised
 * fine-tuning of a LoRA adapter on the CPU (train/lora_train.h), written as
 * PEFT's directory, which `hearth serve --lora`, `run --lora`, PEFT and vLLM
 * load. The defaults are HF TrainingArguments' and PEFT's where they have
 * one (linear decay, no weight decay, gradient clipped at 1, A uniform and
 * B zero), a LoRA SFT recipe's otherwise (rank 8, alpha 16, every
 * projection, learning rate 2e-4). */
#include "cli/cli.h"
#include "core/clock.h"
#include "ops/cpu/ops_cpu.h"
#include "train/data.h"
#include "train/lora_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth train MODEL --data FILE.jsonl --out DIR [options]\n\n"
            "Fine-tune a LoRA adapter on MODEL (a GGUF file or a Hugging Face directory) on the CPU and write it\n"
            "as PEFT's adapter directory (adapter_config.json + adapter_model.safetensors) to DIR; serve it with\n"
            "`hearth serve MODEL --lora DIR`. A line of FILE.jsonl is one example:\n"
            "  {\"text\": \"...\"}                               every token is learnt\n"
            "  {\"prompt\": \"...\", \"completion\": \"...\"}        the completion is learnt\n"
            "  {\"messages\": [{\"role\": ..., \"content\": ...}]} the model's chat template renders it; the\n"
            "                                                  assistant turns are learnt\n\n"
            "options:\n"
            "  --rank R              LoRA rank (default 8)\n"
            "  --alpha A             lora_alpha: the update is scaled by A / R (default 16)\n"
            "  --rslora              scale by A / sqrt(R) instead\n"
            "  --targets LIST        projections adapted, among q,k,v,o,gate,up,down, or all (default all)\n"
            "  --epochs N            passes over the data (default 1)\n"
            "  --steps N             stop after N optimizer steps (default: the epochs' steps)\n"
            "  --batch N             examples a step (default 4)\n"
            "  --lr LR               peak learning rate (default 2e-4)\n"
            "  --schedule S          linear (decay to 0, default), cosine or constant\n"
            "  --warmup N            steps of linear warm-up (default 0)\n"
            "  --weight-decay W      AdamW's decoupled weight decay (default 0)\n"
            "  --max-grad-norm N     clip the gradient's norm to N, 0 = off (default 1)\n"
            "  --max-len N           tokens kept of an example (default 512)\n"
            "  --seed S              data order and A's initialisation (default 0)\n"
            "  --init DIR            start from this adapter (its rank, alpha and targets)\n"
            "  --save-every N        also write DIR every N steps (default: at the end only)\n"
            "  --threads T           CPU threads (default: one per core)\n");
}

static const char *const TARGET_NAMES[HEARTH_LORA_TARGETS] = {"q", "k", "v", "o", "gate", "up", "down"};

/* "q,v,down" or "all" -> bits; 0 on a name it does not know. */
static unsigned parse_targets(const char *s) {
    if (!strcmp(s, "all") || !strcmp(s, "all-linear")) return (1u << HEARTH_LORA_TARGETS) - 1;
    unsigned bits = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(p);
        if (n > 5 && !strcmp(p + n - 5, "_proj")) p[n - 5] = 0; /* q_proj as PEFT names it */
        int k = -1;
        for (int t = 0; t < HEARTH_LORA_TARGETS; t++)
            if (!strcmp(p, TARGET_NAMES[t])) k = t;
        if (k < 0) return 0;
        bits |= 1u << k;
    }
    return bits;
}

/* The learning rate of step s (0-based) of n. */
static float lr_at(const char *schedule, float peak, int warmup, int s, int n) {
    if (s < warmup) return peak * (float)(s + 1) / (float)warmup;
    double p = n > warmup ? (double)(s - warmup) / (n - warmup) : 0;
    if (!strcmp(schedule, "linear")) return (float)(peak * (1.0 - p));
    if (!strcmp(schedule, "cosine")) return (float)(peak * 0.5 * (1.0 + cos(M_PI * p)));
    return peak;
}

static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    const char *model, *data, *out, *init, *schedule;
    long epochs, steps, batch, warmup, max_len, save_every, threads;
    unsigned long long seed;
    hearth_lora_train_opts o;
} train_args;

static int parse_args(int argc, char **argv, train_args *a) {
    long lv;
    double dv;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(f)) {
            usage(stdout);
            return 0;
        }
        if (f[0] != '-') {
            if (a->model) return cli_usage_error("train", "unexpected argument '%s'", f);
            a->model = f;
            continue;
        }
        if (!strcmp(f, "--rslora")) {
            a->o.rslora = 1;
            continue;
        }
        if (!v) return cli_usage_error("train", "%s needs a value", f);
        i++;
        const struct {
            const char *flag;
            long *v;
        } ints[] = {{"--epochs", &a->epochs},   {"--steps", &a->steps},           {"--batch", &a->batch},
                    {"--warmup", &a->warmup},   {"--max-len", &a->max_len},       {"--save-every", &a->save_every},
                    {"--threads", &a->threads}};
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++)
            if (!strcmp(f, ints[k].flag)) {
                if (!cli_parse_int("train", f, v, ints[k].v)) return 2;
                if (*ints[k].v < 0) return cli_usage_error("train", "%s must be >= 0", f);
                done = 1;
            }
        if (done) continue;
        if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--out")) a->out = v;
        else if (!strcmp(f, "--init")) a->init = v;
        else if (!strcmp(f, "--schedule")) {
            if (strcmp(v, "linear") && strcmp(v, "cosine") && strcmp(v, "constant"))
                return cli_usage_error("train", "--schedule: linear, cosine or constant, not '%s'", v);
            a->schedule = v;
        } else if (!strcmp(f, "--targets")) {
            if (!(a->o.targets = parse_targets(v)))
                return cli_usage_error("train", "--targets: '%s': names among q,k,v,o,gate,up,down, or all", v);
        } else if (!strcmp(f, "--rank")) {
            if (!cli_parse_int("train", f, v, &lv)) return 2;
            if (lv < 1 || lv > 4096) return cli_usage_error("train", "--rank must be in [1, 4096]");
            a->o.rank = (int)lv;
        } else if (!strcmp(f, "--seed")) {
            if (!cli_parse_int("train", f, v, &lv)) return 2;
            a->seed = (unsigned long long)lv;
        } else {
            float *fl = !strcmp(f, "--alpha") ? &a->o.alpha
                        : !strcmp(f, "--lr") ? &a->o.lr
                        : !strcmp(f, "--weight-decay") ? &a->o.weight_decay
                        : !strcmp(f, "--max-grad-norm") ? &a->o.max_grad_norm
                                                        : NULL;
            if (!fl) return cli_usage_error("train", "unknown option '%s'", f);
            if (!cli_parse_float("train", f, v, &dv)) return 2;
            if (!(dv >= 0) || (fl == &a->o.alpha && !(dv > 0)))
                return cli_usage_error("train", "%s must be %s", f, fl == &a->o.alpha ? "> 0" : ">= 0");
            *fl = (float)dv;
        }
    }
    if (!a->model) return cli_usage_error("train", "MODEL is missing");
    if (!a->data) return cli_usage_error("train", "--data FILE.jsonl is missing");
    if (!a->out) return cli_usage_error("train", "--out DIR is missing");
    if (a->batch < 1) return cli_usage_error("train", "--batch must be >= 1");
    if (a->max_len < 2) return cli_usage_error("train", "--max-len must be >= 2");
    return -1;
}

/* Optimizer steps over the shuffled data; returns the exit status. */
static int train_loop(const train_args *a, hearth_lora_trainer *t, const hearth_train_data *d, const char *model) {
    const int per_epoch = (int)((d->n + a->batch - 1) / a->batch);
    const int n_steps = a->steps ? (int)a->steps : per_epoch * (int)(a->epochs ? a->epochs : 1);
    int *order = malloc(sizeof(int) * (size_t)d->n);
    if (!order) return fprintf(stderr, "hearth train: out of memory\n"), 1;
    uint64_t rs = a->seed ^ 0x5eedull;
    hearth_err err = {0};
    int next = d->n; /* position in the current epoch's order */
    double t0 = hearth_time_now();
    for (int s = 0; s < n_steps; s++) {
        const double ts = hearth_time_now();
        int idx[4096], nb = 0;
        long labels = 0, tokens = 0;
        for (; nb < a->batch && nb < 4096; nb++) {
            if (next == d->n) { /* a new epoch: Fisher-Yates */
                for (int i = 0; i < d->n; i++) order[i] = i;
                for (int i = d->n - 1; i > 0; i--) {
                    int j = (int)(next_rand(&rs) % (uint64_t)(i + 1)), x = order[i];
                    order[i] = order[j], order[j] = x;
                }
                next = 0;
            }
            idx[nb] = order[next++];
            for (int i = 0; i < d->ex[idx[nb]].n; i++) labels += d->ex[idx[nb]].label[i];
            tokens += d->ex[idx[nb]].n;
        }
        double loss = 0, norm = 0;
        for (int i = 0; i < nb; i++) {
            const hearth_train_example *e = &d->ex[idx[i]];
            double one;
            if (hearth_lora_trainer_accumulate(t, e->tokens, e->label, e->n, 1.0f / (float)labels, &one, &err)) {
                fprintf(stderr, "hearth train: %s (line %d of %s)\n", err.msg, e->line, a->data);
                free(order);
                return 1;
            }
            loss += one;
        }
        const float lr = lr_at(a->schedule, a->o.lr, (int)a->warmup, s, n_steps);
        hearth_lora_trainer_step(t, lr, &norm);
        const double dt = hearth_time_now() - ts;
        fprintf(stderr, "step %d/%d | loss %.4f | grad norm %.3f | lr %.2e | %.2f s | %.0f tok/s\n", s + 1, n_steps,
                loss / (double)labels, norm, lr, dt, tokens / dt);
        const int last = s + 1 == n_steps;
        if (last || (a->save_every && (s + 1) % a->save_every == 0)) {
            if (hearth_lora_trainer_save(t, a->out, model, &err)) {
                fprintf(stderr, "hearth train: %s\n", err.msg);
                free(order);
                return 1;
            }
            if (!last) fprintf(stderr, "hearth train: step %d: adapter written to %s\n", s + 1, a->out);
        }
    }
    fprintf(stderr, "hearth train: %d steps in %.1f s; adapter written to %s (serve it: hearth serve %s --lora %s)\n",
            n_steps, hearth_time_now() - t0, a->out, model, a->out);
    free(order);
    return 0;
}

int cmd_train(int argc, char **argv) {
    train_args a = {.epochs = 1, .batch = 4, .max_len = 512, .schedule = "linear"};
    a.o = (hearth_lora_train_opts){.rank = 8, .alpha = 16, .targets = (1u << HEARTH_LORA_TARGETS) - 1, .lr = 2e-4f,
                                   .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0,
                                   .max_grad_norm = 1.0f};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    a.o.max_len = (int)a.max_len;
    a.o.seed = a.seed;
    hearth_session s;
    hearth_session_opts so = {.model_path = a.model, .device = "cpu", .threads = (int)a.threads, .n_slots = 1,
                              .ctx = 64, .max_tokens = 64, .need_tokenizer = 1};
    hearth_err err = {0};
    if (hearth_session_open(&s, &so, &err) != HEARTH_OK) {
        fprintf(stderr, "hearth train: %s\n", err.msg);
        return 1;
    }
    char *tmpl = NULL;
    size_t tlen;
    hearth_train_data d = {0};
    hearth_lora_trainer *t = NULL;
    rc = 1;
    if (cli_load_template(&s, a.model, NULL, &tmpl, &tlen, &err) ||
        hearth_train_data_load(&d, a.data, s.tok, tmpl, (int)a.max_len, &err) ||
        hearth_lora_trainer_new(&t, s.model, hearth_cpu_ctx_pool(s.ops_ctx), &a.o, a.init, &err)) {
        fprintf(stderr, "hearth train: %s\n", err.msg);
        goto done;
    }
    fprintf(stderr, "hearth train: %d examples (%ld label tokens, %d cut to %ld tokens); %s; %.2f GiB for training\n",
            d.n, d.n_labels, d.n_truncated, a.max_len, a.init ? "starting from --init's adapter" : "a new adapter",
            hearth_lora_trainer_bytes(t) / 1073741824.0);
    rc = train_loop(&a, t, &d, a.model);
done:
    hearth_lora_trainer_free(t);
    hearth_train_data_free(&d);
    free(tmpl);
    hearth_session_close(&s);
    return rc;
}
