/* cmd_train.c - `hearth train MODEL --data FILE.jsonl --out DIR`: supervised
 * fine-tuning of a LoRA adapter on the CPU (train/lora_train.h), written as
 * PEFT's directory, which `hearth serve --lora`, `run --lora`, PEFT and vLLM
 * load. The defaults are HF TrainingArguments' and PEFT's where they have
 * one (linear decay, no weight decay, gradient clipped at 1, A uniform and
 * B zero), a LoRA SFT recipe's otherwise (rank 8, alpha 16, every
 * projection, learning rate 2e-4). */
#include "cli/cli.h"
#include "core/clock.h"
#include "train/data.h"
#include "train/lora_train.h"
#include "train/pref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth train MODEL --data FILE.jsonl --out DIR [options]\n\n"
            "Fine-tune a LoRA adapter on MODEL (a GGUF file or a Hugging Face directory) and write it\n"
            "as PEFT's adapter directory (adapter_config.json + adapter_model.safetensors) to DIR; serve it with\n"
            "`hearth serve MODEL --lora DIR`. A line of FILE.jsonl is one example:\n"
            "  {\"text\": \"...\"}                               every token is learnt\n"
            "  {\"prompt\": \"...\", \"completion\": \"...\"}        the completion is learnt\n"
            "  {\"messages\": [{\"role\": ..., \"content\": ...}]} the model's chat template renders it; the\n"
            "                                                  assistant turns are learnt\n"
            "With --method dpo or orpo a line is a preference pair (TRL's formats): {\"prompt\", \"chosen\",\n"
            "\"rejected\"} as texts, or as message lists (the prompt's messages, then each response's).\n\n"
            "options:\n"
            "  --method M            sft (default), dpo (TRL's sigmoid loss; the base model is the reference)\n"
            "                        or orpo (the chosen response's NLL + the odds ratio)\n"
            "  --beta B              dpo: the KL weight; orpo: the odds ratio's weight (default 0.1)\n"
            "  --rank R              LoRA rank (default 8)\n"
            "  --alpha A             lora_alpha: the update is scaled by A / R (default 16)\n"
            "  --rslora              scale by A / sqrt(R) instead\n"
            "  --targets LIST        projections adapted, among q,k,v,o,gate,up,down, or all (default all)\n"
            "  --epochs N            passes over the data (default 1)\n"
            "  --steps N             stop after N optimizer steps (default: the epochs' steps)\n"
            "  --batch N             examples a step (default 4)\n"
            "  --lr LR               peak learning rate (default 2e-4; 5e-5 for dpo and orpo)\n"
            "  --schedule S          linear (decay to 0, default), cosine or constant\n"
            "  --warmup N            steps of linear warm-up (default 0)\n"
            "  --weight-decay W      AdamW's decoupled weight decay (default 0)\n"
            "  --max-grad-norm N     clip the gradient's norm to N, 0 = off (default 1)\n"
            "  --max-len N           tokens kept of an example (default 512)\n"
            "  --seed S              data order and A's initialisation (default 0)\n"
            "  --init DIR            start from this adapter (its rank, alpha and targets)\n"
            "  --save-every N        also write DIR every N steps (default: at the end only)\n"
            "  --eval FILE.jsonl     held-out examples (or pairs, with dpo / orpo): their loss (and the pairs'\n"
            "                        accuracy and margin) before training, at the end, and every --eval-every N steps\n"
            "  --gradient-checkpointing\n"
            "                        keep each layer's input only and run its forward again in the backward:\n"
            "                        the activations of one layer, not all, for a third more compute\n"
            "  --device D            cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
            "  --pack N              run a step's examples N tokens a forward, each attending to itself; 0: one\n"
            "                        a forward (default: on a GPU min(batch x max-len, 4096), which uses its\n"
            "                        width; on the CPU 0)\n"
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
    const char *model, *data, *out, *init, *schedule, *method, *eval, *device;
    float beta;
    int lr_given;
    long epochs, steps, batch, warmup, max_len, save_every, eval_every, threads, pack;
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
        if (!strcmp(f, "--gradient-checkpointing")) {
            a->o.checkpoint = 1;
            continue;
        }
        if (!v) return cli_usage_error("train", "%s needs a value", f);
        i++;
        const struct {
            const char *flag;
            long *v;
        } ints[] = {{"--epochs", &a->epochs},   {"--steps", &a->steps},           {"--batch", &a->batch},
                    {"--warmup", &a->warmup},   {"--max-len", &a->max_len},       {"--save-every", &a->save_every},
                    {"--threads", &a->threads}, {"--eval-every", &a->eval_every}, {"--pack", &a->pack}};
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++)
            if (!strcmp(f, ints[k].flag)) {
                if (!cli_parse_int("train", f, v, ints[k].v)) return 2;
                if (*ints[k].v < 0) return cli_usage_error("train", "%s must be >= 0", f);
                done = 1;
            }
        if (done) continue;
        if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--method")) {
            if (strcmp(v, "sft") && strcmp(v, "dpo") && strcmp(v, "orpo"))
                return cli_usage_error("train", "--method: sft, dpo or orpo, not '%s'", v);
            a->method = v;
        }
        else if (!strcmp(f, "--out")) a->out = v;
        else if (!strcmp(f, "--init")) a->init = v;
        else if (!strcmp(f, "--eval")) a->eval = v;
        else if (!strcmp(f, "--device")) a->device = v;
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
                        : !strcmp(f, "--beta") ? &a->beta
                        : !strcmp(f, "--lr") ? &a->o.lr
                        : !strcmp(f, "--weight-decay") ? &a->o.weight_decay
                        : !strcmp(f, "--max-grad-norm") ? &a->o.max_grad_norm
                                                        : NULL;
            if (!fl) return cli_usage_error("train", "unknown option '%s'", f);
            if (!cli_parse_float("train", f, v, &dv)) return 2;
            if (!(dv >= 0) || (fl == &a->o.alpha && !(dv > 0)))
                return cli_usage_error("train", "%s must be %s", f, fl == &a->o.alpha ? "> 0" : ">= 0");
            *fl = (float)dv;
            a->lr_given |= fl == &a->o.lr;
        }
    }
    if (!a->model) return cli_usage_error("train", "MODEL is missing");
    if (!a->data) return cli_usage_error("train", "--data FILE.jsonl is missing");
    if (!a->out) return cli_usage_error("train", "--out DIR is missing");
    if (a->batch < 1) return cli_usage_error("train", "--batch must be >= 1");
    if (a->max_len < 2) return cli_usage_error("train", "--max-len must be >= 2");
    return -1;
}

/* What a run trains on: SFT examples or preference pairs (with DPO's
 * reference log-probabilities). */
typedef struct {
    const hearth_train_data *sft, *eval;
    const hearth_train_prefs *prefs, *eval_prefs;
    const double *ref, *eval_ref; /* DPO's reference log-probabilities of prefs, eval_prefs */
    hearth_pref_method method;
    int pack; /* SFT: the most tokens a forward takes over several examples */
} train_set;

enum { MAX_PACK = 64 }; /* examples a pack */

static int set_size(const train_set *ts) { return ts->sft ? ts->sft->n : ts->prefs->n; }

/* Item i's tokens, and its line in the file. */
static long item_tokens(const train_set *ts, int i, int *line) {
    if (ts->sft) return *line = ts->sft->ex[i].line, ts->sft->ex[i].n;
    *line = ts->prefs->p[i].line;
    return ts->prefs->p[i].chosen.n + ts->prefs->p[i].rejected.n;
}

/* The next batch of a shuffled pass over n items (a new pass reshuffled). */
typedef struct {
    int *order, next, n;
    uint64_t rs;
} shuffler;

static int shuffled(shuffler *sh) {
    if (sh->next == sh->n) { /* a new epoch: Fisher-Yates */
        for (int i = 0; i < sh->n; i++) sh->order[i] = i;
        for (int i = sh->n - 1; i > 0; i--) {
            int j = (int)(next_rand(&sh->rs) % (uint64_t)(i + 1)), x = sh->order[i];
            sh->order[i] = sh->order[j], sh->order[j] = x;
        }
        sh->next = 0;
    }
    return sh->order[sh->next++];
}

/* One step's batch through the trainer: its loss (and with pairs,
 * accuracy and margin) into st. */
static hearth_status batch_step(const train_set *ts, hearth_lora_trainer *t, float beta, const int *idx, int nb,
                                hearth_pref_stats *st, int *bad, hearth_err *err) {
    if (ts->prefs) {
        *bad = idx[0];
        return hearth_pref_accumulate(t, ts->method, beta, ts->prefs, ts->ref, idx, nb, st, err);
    }
    long labels = 0;
    for (int i = 0; i < nb; i++)
        for (int k = 0; k < ts->sft->ex[idx[i]].n; k++) labels += ts->sft->ex[idx[i]].label[k];
    memset(st, 0, sizeof *st);
    /* the examples in order, as many a pack as its budget holds */
    const int32_t *tok[MAX_PACK];
    const uint8_t *lab[MAX_PACK];
    int n[MAX_PACK];
    for (int i = 0; i < nb;) {
        int k = 0, T = 0;
        *bad = idx[i];
        for (; i < nb && k < MAX_PACK; i++, k++) {
            const hearth_train_example *e = &ts->sft->ex[idx[i]];
            if (k && T + e->n > ts->pack) break;
            tok[k] = e->tokens, lab[k] = e->label, n[k] = e->n, T += e->n;
        }
        double one;
        hearth_status s = hearth_lora_trainer_accumulate_pack(t, k, tok, lab, n, 1.0f / (float)labels, &one, err);
        if (s) return s;
        st->loss += one / (double)labels;
    }
    return HEARTH_OK;
}

/* The held-out pairs' loss, accuracy and margin (the forward alone, with the adapter). */
static int eval_pairs(const train_args *a, hearth_lora_trainer *t, const train_set *ts, const char *when) {
    const hearth_train_prefs *e = ts->eval_prefs;
    hearth_err err = {0};
    hearth_pref_stats st;
    const double t0 = hearth_time_now();
    int *idx = malloc(sizeof(int) * (size_t)e->n);
    if (!idx) return fprintf(stderr, "hearth train: out of memory\n"), 1;
    for (int i = 0; i < e->n; i++) idx[i] = i;
    const hearth_status s = hearth_pref_evaluate(t, ts->method, a->beta, e, ts->eval_ref, idx, e->n, &st, &err);
    free(idx);
    if (s) return fprintf(stderr, "hearth train: %s (%s)\n", err.msg, a->eval), 1;
    fprintf(stderr, "eval %s | loss %.4f | accuracy %.2f | margin %.3f | %d pairs | %.2f s\n", when, st.loss,
            st.accuracy, st.margin, e->n, hearth_time_now() - t0);
    return 0;
}

/* The held-out examples' loss (the forward alone, with the adapter): their
 * summed cross-entropy over their label count, printed with its perplexity;
 * or the held-out pairs'. */
static int eval_report(const train_args *a, hearth_lora_trainer *t, const train_set *ts, const char *when) {
    if (ts->eval_prefs) return eval_pairs(a, t, ts, when);
    const hearth_train_data *e = ts->eval;
    double sum = 0, lp;
    hearth_err err = {0};
    const double t0 = hearth_time_now();
    for (int i = 0; i < e->n; i++) {
        if (hearth_lora_trainer_logp(t, e->ex[i].tokens, e->ex[i].label, e->ex[i].n, 1, &lp, NULL, &err)) {
            fprintf(stderr, "hearth train: %s (line %d of %s)\n", err.msg, e->ex[i].line, a->eval);
            return 1;
        }
        sum -= lp;
    }
    const double loss = sum / (double)e->n_labels;
    fprintf(stderr, "eval %s | loss %.4f | perplexity %.3f | %d examples, %ld labels | %.2f s\n", when, loss,
            exp(loss), e->n, e->n_labels, hearth_time_now() - t0);
    return 0;
}

/* Optimizer steps over the shuffled data; returns the exit status. */
static int train_loop(const train_args *a, hearth_lora_trainer *t, const train_set *ts, const char *model) {
    const int n = set_size(ts), per_epoch = (int)((n + a->batch - 1) / a->batch);
    const int n_steps = a->steps ? (int)a->steps : per_epoch * (int)(a->epochs ? a->epochs : 1);
    shuffler sh = {malloc(sizeof(int) * (size_t)n), n, n, a->seed ^ 0x5eedull};
    int *idx = malloc(sizeof(int) * (size_t)a->batch);
    if (!sh.order || !idx) {
        free(sh.order), free(idx);
        return fprintf(stderr, "hearth train: out of memory\n"), 1;
    }
    hearth_err err = {0};
    const int has_eval = ts->eval || ts->eval_prefs;
    int rc = has_eval ? eval_report(a, t, ts, "before training") : 0, line;
    double t0 = hearth_time_now();
    for (int s = 0; s < n_steps && !rc; s++) {
        const double t1 = hearth_time_now();
        long tokens = 0;
        for (int i = 0; i < a->batch; i++) tokens += item_tokens(ts, idx[i] = shuffled(&sh), &line);
        hearth_pref_stats st;
        int bad;
        double norm = 0;
        if (batch_step(ts, t, a->beta, idx, (int)a->batch, &st, &bad, &err)) {
            item_tokens(ts, bad, &line);
            fprintf(stderr, "hearth train: %s (line %d of %s)\n", err.msg, line, a->data);
            rc = 1;
            break;
        }
        const float lr = lr_at(a->schedule, a->o.lr, (int)a->warmup, s, n_steps);
        hearth_lora_trainer_step(t, lr, &norm);
        const double dt = hearth_time_now() - t1;
        char extra[96] = "";
        if (ts->prefs) snprintf(extra, sizeof extra, " | accuracy %.2f | margin %.3f", st.accuracy, st.margin);
        fprintf(stderr, "step %d/%d | loss %.4f%s | grad norm %.3f | lr %.2e | %.2f s | %.0f tok/s\n", s + 1,
                n_steps, st.loss, extra, norm, lr, dt, tokens / dt);
        const int last = s + 1 == n_steps;
        if (has_eval && (last || (a->eval_every && (s + 1) % a->eval_every == 0))) {
            char when[32];
            snprintf(when, sizeof when, "step %d", s + 1);
            if ((rc = eval_report(a, t, ts, when))) break;
        }
        if (last || (a->save_every && (s + 1) % a->save_every == 0)) {
            if (hearth_lora_trainer_save(t, a->out, model, &err)) {
                fprintf(stderr, "hearth train: %s\n", err.msg);
                rc = 1;
            } else if (!last) {
                fprintf(stderr, "hearth train: step %d: adapter written to %s\n", s + 1, a->out);
            }
        }
    }
    if (!rc)
        fprintf(stderr,
                "hearth train: %d steps in %.1f s; adapter written to %s (serve it: hearth serve %s --lora %s)\n",
                n_steps, hearth_time_now() - t0, a->out, model, a->out);
    free(sh.order);
    free(idx);
    return rc;
}

int cmd_train(int argc, char **argv) {
    train_args a = {.epochs = 1, .batch = 4, .max_len = 512, .schedule = "linear", .method = "sft", .beta = 0.1f,
                    .pack = -1};
    a.o = (hearth_lora_train_opts){.rank = 8, .alpha = 16, .targets = (1u << HEARTH_LORA_TARGETS) - 1, .lr = 2e-4f,
                                   .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0,
                                   .max_grad_norm = 1.0f};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    const int pref = strcmp(a.method, "sft") != 0;
    if (pref && !a.lr_given) a.o.lr = 5e-5f;
    a.o.max_len = (int)a.max_len;
    a.o.seed = a.seed;
    if (a.pack < 0) { /* a GPU is faster with more rows a forward; the CPU gains nothing from them */
        const long wide = a.batch * a.max_len < 4096 ? a.batch * a.max_len : 4096;
        a.pack = strcmp(hearth_session_device(a.device), "cpu") ? wide : a.max_len;
    }
    a.o.pack = (int)(a.pack > a.max_len ? a.pack : a.max_len);
    hearth_session s;
    /* a forward of up to pack rows; the engine's KV cache is not used (the trainer keeps its own k, v) */
    hearth_session_opts so = {.model_path = a.model, .device = a.device, .threads = (int)a.threads, .n_slots = 1,
                              .ctx = 64, .max_tokens = a.o.pack, .kv_budget_mib = 16, .need_tokenizer = 1};
    hearth_err err = {0};
    if (hearth_session_open(&s, &so, &err) != HEARTH_OK) {
        fprintf(stderr, "hearth train: %s\n", err.msg);
        return 1;
    }
    char *tmpl = NULL;
    size_t tlen;
    hearth_train_data d = {0}, ed = {0};
    hearth_train_prefs pd = {0}, epd = {0};
    double *ref = NULL, *eref = NULL;
    hearth_lora_trainer *t = NULL;
    rc = 1;
    if (cli_load_template(&s, a.model, NULL, &tmpl, &tlen, &err) ||
        (pref ? hearth_train_prefs_load(&pd, a.data, s.tok, tmpl, (int)a.max_len, &err)
              : hearth_train_data_load(&d, a.data, s.tok, tmpl, (int)a.max_len, &err)) ||
        (a.eval && (pref ? hearth_train_prefs_load(&epd, a.eval, s.tok, tmpl, (int)a.max_len, &err)
                         : hearth_train_data_load(&ed, a.eval, s.tok, tmpl, (int)a.max_len, &err))) ||
        hearth_lora_trainer_new(&t, s.model, &a.o, a.init, &err)) {
        fprintf(stderr, "hearth train: %s\n", err.msg);
        goto done;
    }
    const char *from = a.init ? "starting from --init's adapter" : "a new adapter";
    const double gib = hearth_lora_trainer_bytes(t) / 1073741824.0;
    char how[96]; /* where and how it runs */
    snprintf(how, sizeof how, "%s%s%s", s.ops->name, a.o.pack > a.o.max_len && !pref ? ", packs" : "",
             a.o.checkpoint ? ", checkpointed" : "");
    train_set ts = {.pack = a.o.pack, .sft = pref ? NULL : &d, .eval = a.eval && !pref ? &ed : NULL,
                    .prefs = pref ? &pd : NULL, .eval_prefs = a.eval && pref ? &epd : NULL,
                    .method = strcmp(a.method, "dpo") ? HEARTH_PREF_ORPO : HEARTH_PREF_DPO};
    if (!pref)
        fprintf(stderr, "hearth train: sft, %d examples (%ld label tokens, %d cut to %ld tokens); %s; %.2f GiB (%s)\n",
                d.n, d.n_labels, d.n_truncated, a.max_len, from, gib, how);
    else
        fprintf(stderr, "hearth train: %s, beta %g, %d pairs (%d cut to %ld tokens); %s; %.2f GiB (%s)\n", a.method,
                (double)a.beta, pd.n, pd.n_truncated, a.max_len, from, gib, how);
    if (pref && ts.method == HEARTH_PREF_DPO) { /* the reference: the base model's log-probabilities, once */
        const double t0 = hearth_time_now();
        const int ne = ts.eval_prefs ? epd.n : 0;
        ref = malloc(sizeof(double) * 2 * (size_t)pd.n);
        eref = malloc(sizeof(double) * 2 * (size_t)(ne + 1));
        if (!ref || !eref) {
            fprintf(stderr, "hearth train: out of memory\n");
            goto done;
        }
        if (hearth_pref_reference(t, &pd, ref, &err) || (ne && hearth_pref_reference(t, &epd, eref, &err))) {
            fprintf(stderr, "hearth train: %s\n", err.msg);
            goto done;
        }
        fprintf(stderr, "hearth train: the reference's log-probabilities of %d pairs in %.1f s\n", pd.n + ne,
                hearth_time_now() - t0);
        ts.ref = ref, ts.eval_ref = eref;
    }
    rc = train_loop(&a, t, &ts, a.model);
done:
    hearth_lora_trainer_free(t);
    hearth_train_data_free(&d);
    hearth_train_data_free(&ed);
    hearth_train_prefs_free(&pd);
    hearth_train_prefs_free(&epd);
    free(ref), free(eref);
    free(tmpl);
    hearth_session_close(&s);
    return rc;
}
