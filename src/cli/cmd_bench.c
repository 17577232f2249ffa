/* cmd_bench.c - `hearth bench MODEL`: prefill and decode speed on random
 * prompt ids, greedy, no early stop. A measurement, never a test. */
#include "cli/cli.h"
#include "cli/bench_engine.h"
#include "lib/session.h"
#include "engine/generate.h"
#ifdef HEARTH_CUDA
#include "ops/cuda/ops_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth bench MODEL [options]\n\n"
            "Measure prefill and decode tokens/s on a prompt of random token ids.\n\n"
            "options:\n"
            "  --prompt N     prompt tokens (default 512)\n"
            "  --gen N        generated tokens (default 128)\n"
            "  --reps N       repetitions; the best is reported (default 1)\n"
            "  --no-warmup    skip the untimed first run (one sequence: prompt and 2 tokens)\n"
            "  --threads T    CPU threads (default: one per core)\n"
            "  --batch N      tokens per forward: prefill chunk / step budget (default 512 CPU,\n"
            "                 8192 on a GPU of 70+ GiB, else 2048)\n"
            "  --parallel N   N concurrent streams through the batching engine (output tok/s, TTFT);\n"
            "                 without it, one sequence through the serial path\n"
            "  --requests M   with --parallel: M requests in all (default N), the next ones waiting\n"
            "                 for a slot (a steady state, as trtllm-bench's offline runs)\n"
            "  --kv-budget M  KV cache size in MiB (default: every stream at full context)\n"
            "  --kv-type T    f32, f16 or fp8 (e4m3) (default: f16)\n"
            "  --lora DIR     every sequence runs with this LoRA adapter (PEFT's format)\n"
            "  --repeat       TTFT of a fresh prompt (cold) and of the same prompt again (prefix cache)\n"
            "  --profile      CUDA: device time per kernel group, printed at the end (runs without graphs)\n"
            "  --device D     cpu, cuda or cuda:N\n"
            "  --temp T  --top-p P  --top-k K  --min-p P\n"
            "                 with --parallel: sampled requests (request i seeded 1 + i) instead of greedy\n");
}

static void print_profile(hearth_session *s, int profile) {
#ifdef HEARTH_CUDA
    static char buf[32768];
    if (profile && s->ops == &hearth_cuda_ops && hearth_cuda_ctx_profile_text(s->ops_ctx, buf, sizeof buf) > 0)
        printf("%s", buf);
#else
    (void)s;
    (void)profile;
#endif
}

int cmd_bench(int argc, char **argv) {
    hearth_session_opts so = {0};
    long n_prompt = 512, n_gen = 128, reps = 1, parallel = 0, requests = 0, lv;
    int repeat = 0, profile = 0, warmup = 1, sampled = 0;
    hearth_sampling sp;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = !strcmp(a, "--prompt") ? &n_prompt
                    : !strcmp(a, "--gen")  ? &n_gen
                    : !strcmp(a, "--reps") ? &reps
                    : !strcmp(a, "--parallel") ? &parallel
                    : !strcmp(a, "--requests") ? &requests
                                           : NULL;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (dst || !strcmp(a, "--threads") || !strcmp(a, "--batch")) {
            if (!v) return cli_usage_error("bench", "%s needs a value", a);
            if (!cli_parse_int("bench", a, v, &lv)) return 2;
            if (lv < 0 || (lv == 0 && strcmp(a, "--threads"))) return cli_usage_error("bench", "%s must be > 0", a);
            if (dst) *dst = lv;
            else if (!strcmp(a, "--threads")) so.threads = (int)lv;
            else so.max_tokens = (int)lv;
            i++;
        } else if (!strcmp(a, "--kv-budget")) {
            double mib;
            if (!v) return cli_usage_error("bench", "%s needs a value", a);
            if (!cli_parse_float("bench", a, v, &mib)) return 2;
            if (mib <= 0) return cli_usage_error("bench", "%s must be > 0", a);
            so.kv_budget_mib = mib;
            i++;
        } else if (!strcmp(a, "--device") || !strcmp(a, "--kv-type") || !strcmp(a, "--lora")) {
            if (!v) return cli_usage_error("bench", "%s needs a value", a);
            if (a[2] == 'd') so.device = v;
            else if (a[2] == 'k') so.kv_type = v;
            else so.lora = (const char *const *)&argv[i + 1], so.n_lora = 1;
            i++;
        } else if (!strcmp(a, "--temp") || !strcmp(a, "--top-p") || !strcmp(a, "--min-p") || !strcmp(a, "--top-k")) {
            double dv;
            if (!v) return cli_usage_error("bench", "%s needs a value", a);
            if (!cli_parse_float("bench", a, v, &dv)) return 2;
            if (!sampled) hearth_sampling_default(&sp), sp.seed = 1, sampled = 1;
            if (!strcmp(a, "--temp")) sp.temperature = (float)dv;
            else if (!strcmp(a, "--top-p")) sp.top_p = (float)dv;
            else if (!strcmp(a, "--min-p")) sp.min_p = (float)dv;
            else sp.top_k = (int)dv;
            i++;
        } else if (!strcmp(a, "--repeat")) {
            repeat = 1;
        } else if (!strcmp(a, "--profile")) {
            profile = 1;
        } else if (!strcmp(a, "--no-warmup")) {
            warmup = 0;
        } else if (a[0] == '-') {
            return cli_usage_error("bench", "unknown option '%s'", a);
        } else if (!so.model_path) {
            so.model_path = a;
        } else {
            return cli_usage_error("bench", "unexpected argument '%s'", a);
        }
    }
    if (!so.model_path) return cli_usage_error("bench", "missing MODEL");
    if (requests > 0 && parallel == 0) return cli_usage_error("bench", "--requests needs --parallel");
    if (sampled && parallel == 0)
        return cli_usage_error("bench", "--temp, --top-p, --top-k and --min-p need --parallel");
    if (requests > 0 && requests < parallel)
        return cli_usage_error("bench", "--requests %ld is fewer than --parallel %ld", requests, parallel);
    so.ctx = (int)(n_prompt + n_gen + 16);
    so.n_slots = parallel > 0 ? (int)parallel : 1;
    hearth_err err = {0};
    hearth_session s;
    if (hearth_session_open(&s, &so, &err) != HEARTH_OK) {
        fprintf(stderr, "hearth bench: %s\n", err.msg);
        return 1;
    }
    if (profile) {
#ifdef HEARTH_CUDA
        if (s.ops == &hearth_cuda_ops) hearth_cuda_ctx_profile(s.ops_ctx, 1);
#endif
        if (s.ops->host_memory) fprintf(stderr, "hearth bench: --profile is for the CUDA backend; ignored\n");
    }
    int r = -1;
    if (repeat) r = cli_bench_prefix(&s, (int)n_prompt, (int)n_gen, (int)reps, &err);
    else if (parallel > 0)
        r = cli_bench_engine(&s, (int)parallel, (int)requests, (int)n_prompt, (int)n_gen, sampled ? &sp : NULL, &err);
    if (r >= 0) {
        if (r) fprintf(stderr, "hearth bench: %s\n", err.msg);
        print_profile(&s, profile);
        hearth_session_close(&s);
        return r;
    }
    const hearth_model_config *cfg = hearth_model_config_get(s.model);
    int32_t *ids = malloc(sizeof *ids * (size_t)n_prompt);
    uint64_t x = 12345;
    for (long i = 0; ids && i < n_prompt; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)cfg->vocab_size);
    }
    double best_pp = 0, best_tg = 0;
    int rc = 0;
    /* an untimed run first (as llama-bench does): the first forward of each
     * shape pays one-time costs (GPU library setup, graph capture, page
     * faults) that are not the model's speed; not under --profile, which
     * reports every launch */
    for (long r = warmup && !profile ? -1 : 0; r < reps && ids; r++) {
        hearth_sampling sp;
        hearth_sampling_default(&sp);
        sp.temperature = 0;
        hearth_sampler smp;
        hearth_gen_stats gs;
        if (hearth_sampler_init(&smp, &sp, cfg->vocab_size, &err) != HEARTH_OK ||
            hearth_generate(s.model, s.kv, 0, so.n_lora, ids, (int)n_prompt, r < 0 && n_gen > 2 ? 2 : (int)n_gen,
                            &smp, NULL, 0, 0, NULL, NULL, &gs, &err) != HEARTH_OK) {
            fprintf(stderr, "hearth bench: %s\n", err.msg);
            rc = 1;
            hearth_sampler_deinit(&smp);
            break;
        }
        hearth_sampler_deinit(&smp);
        if (r < 0) continue; /* the warm-up */
        double pp = gs.n_prompt / gs.prefill_s, tg = gs.n_gen > 1 ? (gs.n_gen - 1) / gs.decode_s : 0;
        if (pp > best_pp) best_pp = pp;
        if (tg > best_tg) best_tg = tg;
    }
    if (!rc)
        printf("model %s | %s | weights %.1f MiB | prefill %ld: %.1f tok/s | decode %ld: %.2f tok/s\n", so.model_path,
               s.ops->name, hearth_model_weight_bytes(s.model) / 1048576.0, n_prompt, best_pp, n_gen, best_tg);
    free(ids);
    print_profile(&s, profile);
    hearth_session_close(&s);
    return rc;
}
