/* cmd_serve.c - `hearth serve`: the OpenAI-compatible HTTP server, and the
 * model stack (session + engine + completion context) that `serve` and
 * `chat` share.
 *
 * Start-up order: bind and answer /health (503 "loading") at once, then load
 * the model, then mark the api ready, so a supervisor sees the port open
 * immediately. SIGINT/SIGTERM: stop admitting (503), let running requests
 * finish within --drain-timeout, cancel what is left, stop the HTTP server,
 * free everything, exit 0. A second signal cancels at once. */
#define _GNU_SOURCE
#include "api/api.h"
#include "cli/cli.h"
#include "lib/session.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/log.h"
#include "io/gguf.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

const char *cli_default_model(char *buf, size_t cap) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        snprintf(buf, cap, "%s/%s", dirname(exe), DEFAULT_MODEL);
        if (hearth_path_is_file(buf)) return buf;
    }
    snprintf(buf, cap, "%s", DEFAULT_MODEL);
    return buf;
}

/* The chat template: --chat-template-file, else the GGUF key
 * tokenizer.chat_template, else chat_template.jinja or tokenizer_config.json
 * "chat_template" (a string, or a list of {name, template}: "default") of an
 * HF directory. *out is malloc'd, NULL when the model has none. */
hearth_status cli_load_template(const hearth_session *s, const char *model_path, const char *file, char **out,
                                size_t *len, hearth_err *err) {
    *out = NULL;
    *len = 0;
    if (file) return hearth_file_read(file, out, len, err);
    const hearth_gguf *g = hearth_model_gguf(s->model);
    if (g) {
        const char *t;
        size_t n;
        if (hearth_gguf_find_key(g, "tokenizer.chat_template") < 0) return HEARTH_OK;
        hearth_status st = hearth_gguf_get_str(g, "tokenizer.chat_template", &t, &n, err);
        if (st != HEARTH_OK) return st;
        *out = malloc(n + 1);
        if (!*out) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        memcpy(*out, t, n);
        (*out)[n] = 0;
        *len = n;
        return HEARTH_OK;
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/chat_template.jinja", model_path);
    if (hearth_path_is_file(p)) return hearth_file_read(p, out, len, err);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", model_path);
    if (!hearth_path_is_file(p)) return HEARTH_OK;
    json_error_t je;
    json_t *cfg = json_load_file(p, 0, &je);
    if (!cfg) return hearth_err_set(err, HEARTH_EFORMAT, "%s: line %d: %s", p, je.line, je.text);
    json_t *ct = json_object_get(cfg, "chat_template");
    const char *src = json_string_value(ct);
    if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default")) src = json_string_value(json_object_get(e, "template"));
        }
    }
    if (src) {
        *len = strlen(src);
        *out = strdup(src);
    }
    json_decref(cfg);
    if (src && !*out) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    return HEARTH_OK;
}

struct cli_stack {
    hearth_session s;
    hearth_engine *engine;
    hearth_cpl_ctx *cpl;
};

hearth_status cli_stack_open(cli_stack **out, const cli_stack_opts *o, hearth_err *err) {
    *out = NULL;
    cli_stack *k = calloc(1, sizeof *k);
    if (!k) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    hearth_session_opts so = {.model_path = o->model_path,
                           .device = o->device,
                           .threads = o->threads,
                           .ctx = o->ctx,
                           .n_slots = o->n_slots, /* 0: the session's default for the device */
                           .max_tokens = o->max_tokens, /* 0: likewise */
                           .kv_type = o->kv_type,
                           .kv_budget_mib = o->kv_budget_mib,
                           .cache_dir = o->cache_dir,
                           .cache_disk_gib = o->cache_disk_gib,
                           .cache_write_mib_s = o->cache_write_mib_s,
                           .lora = o->lora,
                           .n_lora = o->n_lora,
                           .spec_tokens = o->spec_tokens,
                           /* /v1/completions' echo with logprobs: 256 prompt positions a step (on the 8B's
                            * vocabulary, 128 MiB of logits) */
                           .prompt_logprob_rows = 256,
                           .need_tokenizer = 1};
    char *tmpl = NULL;
    size_t tlen = 0;
    hearth_status st = hearth_session_open(&k->s, &so, err);
    if (st != HEARTH_OK) {
        free(k);
        return st;
    }
    hearth_engine_opts eo = {.n_slots = k->s.n_slots,
                             .max_waiting = o->max_queue,
                             .queue_cap = 64,
                             .warmup = 1,
                             .spec_tokens = o->spec_tokens,
                             .spec_ngram_min = o->spec_ngram_min,
                             .spec_ngram_max = o->spec_ngram_max};
    if ((st = hearth_engine_new(&k->engine, k->s.model, k->s.kv, &eo, err)) != HEARTH_OK) goto fail;
    if ((st = cli_load_template(&k->s, o->model_path, o->template_file, &tmpl, &tlen, err)) != HEARTH_OK) {
        hearth_err_wrap(err, st, "chat template");
        goto fail;
    }
    hearth_cpl_ctx_opts co = {
        .engine = k->engine,
        .tok = k->s.tok,
        .cfg = hearth_model_config_get(k->s.model),
        .ctx = k->s.ctx,
        .chat_template = tmpl,
        .chat_template_len = tlen,
        .spm_infill = o->spm_infill,
        .priority_scheduling = o->priority_scheduling,
    };
    const char *names[HEARTH_MAX_LORA];
    int ids[HEARTH_MAX_LORA];
    co.n_adapters = hearth_model_lora_ids(k->s.model, ids, HEARTH_MAX_LORA);
    for (int i = 0; i < co.n_adapters; i++) names[i] = hearth_model_lora_name(k->s.model, ids[i]);
    co.adapters = names;
    co.adapter_ids = ids;
    if (o->flags) co.flags = *o->flags;
    if (!hearth_model_gguf(k->s.model)) { /* an HF directory may carry generation_config.json */
        hearth_gen_defaults g;
        if ((st = hearth_hf_gen_config_load(&g, o->model_path, err)) != HEARTH_OK) goto fail;
        hearth_cpl_params_from_gen(&co.model_defaults, &g);
    }
    if ((st = hearth_cpl_ctx_new(&k->cpl, &co, err)) != HEARTH_OK) goto fail;
    free(tmpl);
    *out = k;
    return HEARTH_OK;
fail:
    free(tmpl);
    cli_stack_close(k);
    return st;
}

void cli_stack_close(cli_stack *k) {
    if (!k) return;
    hearth_cpl_ctx_free(k->cpl);
    hearth_engine_free(k->engine);
    hearth_session_close(&k->s);
    free(k);
}

hearth_cpl_ctx *cli_stack_cpl(cli_stack *k) { return k->cpl; }

const char *cli_stack_describe(cli_stack *k) {
    static _Thread_local char buf[128];
    snprintf(buf, sizeof buf, "%s, context %d, KV %s x %d blocks, %d tokens a step", k->s.ops->name, k->s.ctx,
             hearth_dtype_get(k->s.kv_type)->name, k->s.kv_blocks, k->s.max_tokens);
    return buf;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth serve [MODEL] [options]\n\n"
            "Serve MODEL (a GGUF file or a Hugging Face model directory; default: the model setup fetched,\n"
            "%s) over OpenAI- and Anthropic-compatible HTTP APIs:\n"
            "  POST /v1/chat/completions, POST /v1/completions, POST /v1/responses, POST /v1/embeddings,\n"
            "  GET /v1/models,\n"
            "  POST /v1/messages, POST /v1/messages/count_tokens, POST /tokenize, POST /detokenize,\n"
            "  GET /health, GET /stats (JSON), GET /metrics (Prometheus), POST /admin/cache/flush (with\n"
            "  --cache-dir), and a chat page at GET /.\n\n"
            "options:\n"
            "  --host H               address to bind (default 127.0.0.1)\n"
            "  --port P               port (default 8080; 0 = any free port)\n"
            "  --ctx N                context length (default: the model's, at most 4096)\n"
            "  --api-key K            require the key K on every route but /health ('Authorization: Bearer K'\n"
            "                         or 'x-api-key: K')\n"
            "  --max-queue N          requests waiting for a slot before 429 (default 256)\n"
            "  --max-batch N          sequences generated at once (alias --parallel; default 4 on the CPU,\n"
            "                         256 on a GPU)\n"
            "  --batch N              tokens a forward step holds: prompt chunks beside the decode rows\n"
            "                         (default 512 on the CPU, 8192 on a GPU of 70+ GiB, else 2048)\n"
            "  --kv-budget MIB        KV cache size (default: every sequence at full context, capped to a\n"
            "                         quarter of free RAM on the CPU, free GPU memory less 2 GiB on a GPU)\n"
            "  --kv-type T            KV cache element type, f32, f16 or fp8 (e4m3: half the bytes of f16)\n"
            "                         (default: f16)\n"
            "  --cache-dir DIR        the prefix cache's disk tier: cached KV blocks that served a later request\n"
            "                         are written to DIR when evicted from memory and read back on a later hit;\n"
            "                         the cached blocks are written there at shutdown and on POST\n"
            "                         /admin/cache/flush, so a restart starts warm (checksummed files, one a\n"
            "                         block, named by content)\n"
            "  --cache-disk-size GIB  bytes DIR may hold, least recently used dropped first (default 16)\n"
            "  --cache-write-rate M   MiB a second that evictions may write to DIR; past it an evicted block\n"
            "                         is dropped, not written (the engine writes between steps; default 128)\n"
            "  --threads T            CPU threads (default: one per core)\n"
            "  --device D             cpu, cuda or cuda:N\n"
            "  --model-name NAME      the id /v1/models reports (default: the file name)\n"
            "  --lora [NAME=]DIR      a LoRA adapter in PEFT's format (adapter_config.json +\n"
            "                         adapter_model.safetensors), served as model NAME (default: DIR's last\n"
            "                         component) beside the base; repeatable (at most 16; alias --lora-modules).\n"
            "                         A request whose \"model\" names it runs with it, in the same batches as\n"
            "                         the others; /v1/models lists it\n"
            "  --scheduling-policy P  fcfs (default): first come, first served; priority: a request's \"priority\"\n"
            "                         (vLLM's field; lower first, then arrival) orders the wait for a slot\n"
            "  --runtime-lora         serve vLLM's POST /v1/load_lora_adapter {\"lora_name\", \"lora_path\"} and\n"
            "                         /v1/unload_lora_adapter {\"lora_name\"}: adapters loaded and unloaded while\n"
            "                         serving (they read directories on this machine's disk: give --api-key)\n"
            "  --chat-template-file F a Jinja chat template to use instead of the model's\n"
            "  --spm-infill           POST /infill lays the suffix before the prefix (the order some code\n"
            "                         models were trained on; llama-server's flag)\n"
            CLI_SPEC_USAGE
            "  --max-body BYTES       largest request body (default 16777216); larger gets 413\n"
            "  --drain-timeout S      on SIGINT/SIGTERM, seconds to let running requests finish (default 10)\n"
            "  --idle-timeout S       close a connection idle this long (default 120)\n"
            "  --temp T  --top-p P  --top-k K  --min-p P  --repeat-penalty R  --max-tokens N\n"
            "                         server defaults; a request's own fields win, the model's\n"
            "                         generation_config.json comes next\n"
            CLI_LLAMA_SAMPLER_USAGE
            "  -v, --verbose          log debug messages\n\n"
            "environment: HEARTH_SERVE_TEST_LOAD_DELAY_MS=N waits N ms before loading (tests of the loading state)\n",
            DEFAULT_MODEL);
}

static int wait_signal(const sigset_t *set, double timeout_s) {
    if (timeout_s < 0) {
        int sig;
        return sigwait(set, &sig) == 0 ? sig : -1;
    }
    struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

int cmd_serve(int argc, char **argv) {
    cli_stack_opts so = {0};
    hearth_cpl_params flags = {0};
    const char *host = "127.0.0.1", *api_key = NULL, *model_name = NULL, *tmpl_file = NULL;
    int runtime_lora = 0;
    long port = 8080, max_queue = 256, lv;
    long max_body = 16L << 20, idle_s = 120;
    double drain_s = 10, dv;
    char defbuf[4096];
    const char *lora[HEARTH_MAX_LORA];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() \
    if (!v) return cli_usage_error("serve", "%s needs a value", a); \
    i++
#define INT_FLAG(name, dst, lo)                                                              \
    else if (!strcmp(a, name)) {                                                             \
        NEED_VALUE();                                                                        \
        if (!cli_parse_int("serve", a, v, &lv)) return 2;                                    \
        if (lv < (lo)) return cli_usage_error("serve", "%s must be at least %d", a, (int)(lo)); \
        dst = lv;                                                                            \
    }
        int spec = cli_spec_flag("serve", argc, argv, &i, &so);
        if (spec < 0) return 2;
        if (spec > 0) continue;
        int smp = cli_llama_sampler_flag("serve", argc, argv, &i, &flags);
        if (smp < 0) return 2;
        if (smp > 0) continue;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--host")) {
            NEED_VALUE();
            host = v;
        }
        INT_FLAG("--port", port, 0)
        INT_FLAG("--ctx", so.ctx, 2)
        INT_FLAG("--max-queue", max_queue, 1)
        INT_FLAG("--parallel", so.n_slots, 1)
        INT_FLAG("--max-batch", so.n_slots, 1)
        INT_FLAG("--batch", so.max_tokens, 1)
        INT_FLAG("--threads", so.threads, 0)
        INT_FLAG("--max-body", max_body, 1)
        INT_FLAG("--idle-timeout", idle_s, 1)
        else if (!strcmp(a, "--api-key")) {
            NEED_VALUE();
            api_key = v;
        } else if (!strcmp(a, "--device")) {
            NEED_VALUE();
            so.device = v;
        } else if (!strcmp(a, "--kv-type")) {
            NEED_VALUE();
            so.kv_type = v;
        } else if (!strcmp(a, "--kv-budget")) {
            NEED_VALUE();
            if (!cli_parse_float("serve", a, v, &so.kv_budget_mib)) return 2;
            if (so.kv_budget_mib <= 0) return cli_usage_error("serve", "%s must be > 0", a);
        } else if (!strcmp(a, "--cache-dir")) {
            NEED_VALUE();
            so.cache_dir = v;
        } else if (!strcmp(a, "--cache-disk-size") || !strcmp(a, "--cache-write-rate")) {
            NEED_VALUE();
            double *to = !strcmp(a, "--cache-disk-size") ? &so.cache_disk_gib : &so.cache_write_mib_s;
            if (!cli_parse_float("serve", a, v, to)) return 2;
            if (*to <= 0) return cli_usage_error("serve", "%s must be > 0", a);
        } else if (!strcmp(a, "--lora") || !strcmp(a, "--lora-modules")) {
            NEED_VALUE();
            if (so.n_lora == HEARTH_MAX_LORA)
                return cli_usage_error("serve", "at most %d LoRA adapters", HEARTH_MAX_LORA);
            lora[so.n_lora++] = v;
            so.lora = lora;
        } else if (!strcmp(a, "--model-name")) {
            NEED_VALUE();
            model_name = v;
        } else if (!strcmp(a, "--spm-infill")) {
            so.spm_infill = 1;
        } else if (!strcmp(a, "--runtime-lora")) {
            runtime_lora = 1;
        } else if (!strcmp(a, "--scheduling-policy")) {
            NEED_VALUE();
            if (strcmp(v, "fcfs") && strcmp(v, "priority"))
                return cli_usage_error("serve", "%s: expected fcfs or priority, not '%s'", a, v);
            so.priority_scheduling = !strcmp(v, "priority");
        } else if (!strcmp(a, "--chat-template-file")) {
            NEED_VALUE();
            tmpl_file = v;
        } else if (!strcmp(a, "--drain-timeout")) {
            NEED_VALUE();
            if (!cli_parse_float("serve", a, v, &drain_s)) return 2;
            if (drain_s < 0) return cli_usage_error("serve", "%s must be >= 0", a);
        } else if (!strcmp(a, "--temp") || !strcmp(a, "--top-p") || !strcmp(a, "--min-p") ||
                   !strcmp(a, "--repeat-penalty")) {
            NEED_VALUE();
            if (!cli_parse_float("serve", a, v, &dv)) return 2;
            if (!strcmp(a, "--temp")) flags.has_temperature = 1, flags.temperature = (float)dv;
            else if (!strcmp(a, "--top-p")) flags.has_top_p = 1, flags.top_p = (float)dv;
            else if (!strcmp(a, "--min-p")) flags.has_min_p = 1, flags.min_p = (float)dv;
            else flags.has_repetition_penalty = 1, flags.repetition_penalty = (float)dv;
        } else if (!strcmp(a, "--top-k")) {
            NEED_VALUE();
            if (!cli_parse_int("serve", a, v, &lv)) return 2;
            flags.has_top_k = 1, flags.top_k = (int)lv;
        } else if (!strcmp(a, "--max-tokens")) {
            NEED_VALUE();
            if (!cli_parse_int("serve", a, v, &lv)) return 2;
            if (lv < 1) return cli_usage_error("serve", "%s must be at least 1", a);
            flags.has_max_tokens = 1, flags.max_tokens = (int)lv;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            hearth_log_set_level(HEARTH_LOG_DEBUG);
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("serve", "unknown option '%s'", a);
        } else if (!so.model_path) {
            so.model_path = a;
        } else {
            return cli_usage_error("serve", "unexpected argument '%s'", a);
        }
#undef NEED_VALUE
#undef INT_FLAG
    }
    if (port > 65535) return cli_usage_error("serve", "--port must be at most 65535");
    if (!so.model_path) so.model_path = cli_default_model(defbuf, sizeof defbuf);
    if (!model_name) {
        static char name[256];
        const char *b = strrchr(so.model_path, '/');
        b = b && b[1] ? b + 1 : so.model_path;
        snprintf(name, sizeof name, "%s", b);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".gguf")) name[n - 5] = 0;
        while (n > 1 && name[strlen(name) - 1] == '/') name[strlen(name) - 1] = 0;
        model_name = name;
    }

    /* Signals are taken by sigwait in this thread only: block them before
     * any thread starts so that every thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    double t0 = hearth_time_now();
    hearth_err err = {0};
    hearth_api *api = NULL;
    hearth_http *http = NULL;
    cli_stack *stack = NULL;
    int rc = 1;
    hearth_api_opts ao = {.model_id = model_name, .api_key = api_key, .runtime_lora = runtime_lora};
    if (hearth_api_new(&api, &ao, &err) != HEARTH_OK) goto done;
    hearth_http_opts ho = {.host = host,
                           .port = (int)port,
                           .max_body = (size_t)max_body,
                           .max_connections = 1024,
                           .idle_timeout_s = (int)idle_s,
                           .h = hearth_api_handler(api)};
    if (hearth_http_start(&http, &ho, &err) != HEARTH_OK) goto done;
    fprintf(stderr, "hearth serve: listening on http://%s:%d (loading %s)\n", host, hearth_http_port(http),
            so.model_path);
    const char *delay = getenv("HEARTH_SERVE_TEST_LOAD_DELAY_MS"); /* tests: hold the loading state a while */
    if (delay && atol(delay) > 0) {
        struct timespec ts = {atol(delay) / 1000, (atol(delay) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    so.template_file = tmpl_file;
    so.flags = &flags;
    so.max_queue = (int)max_queue;
    if (cli_stack_open(&stack, &so, &err) != HEARTH_OK) goto done;
    hearth_api_set_ready(api, stack->cpl, stack->engine);
    fprintf(stderr, "hearth serve: ready in %.2f s: model '%s' on %s, %d parallel%s\n",
            hearth_time_now() - t0, model_name, cli_stack_describe(stack), stack->s.n_slots,
            hearth_cpl_ctx_has_chat(stack->cpl) ? "" : " (no chat template: /v1/completions only)");

    int sig = wait_signal(&set, -1);
    fprintf(stderr, "hearth serve: %s: no new requests; draining %d running (up to %.0f s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", hearth_api_active(api), drain_s);
    hearth_api_begin_shutdown(api);
    hearth_engine_stop_admission(stack->engine);
    hearth_engine_pause(stack->engine, 0); /* requests kept by POST /pause finish in the drain too */
    double until = hearth_time_now() + drain_s;
    while (hearth_api_active(api) > 0 && hearth_time_now() < until)
        if (wait_signal(&set, 0.02) > 0) break; /* a second signal: stop waiting */
    if (hearth_api_active(api) > 0) {
        fprintf(stderr, "hearth serve: cancelling %d request(s)\n", hearth_api_active(api));
        hearth_api_cancel_all(api);
        double hard = hearth_time_now() + 5;
        while (hearth_api_active(api) > 0 && hearth_time_now() < hard) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            hearth_api_cancel_all(api); /* requests that started meanwhile */
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "hearth serve: %s\n", err.msg);
    hearth_http_stop(http); /* joins every connection thread: no request runs after this */
    cli_stack_close(stack);
    hearth_api_free(api);
    if (!rc) fprintf(stderr, "hearth serve: stopped\n");
    return rc;
}
