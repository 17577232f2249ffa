/* cmd_chat.c - `hearth chat`: an interactive terminal chat over the same
 * completion layer the server uses (chat template, stop handling, reasoning
 * split). Keeps the conversation history; /reset clears it, /quit (or end of
 * input) leaves. Ctrl-C stops the answer being generated; at the prompt it
 * leaves. */
#define _GNU_SOURCE
#include "cli/cli.h"
#include "completion/completion.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig) { g_interrupted = 1; }

static int interrupted(void *unused) { return g_interrupted; }

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth chat [MODEL] [options]\n\n"
            "Chat with MODEL (GGUF file or HF directory; default: the model setup fetched) in the terminal.\n"
            "Type a message and press Enter. /reset clears the history, /quit leaves (so does end of input).\n\n"
            "options:\n"
            "  --system TEXT          a system message at the start of the conversation\n"
            "  --temp T  --top-p P  --top-k K  --min-p P  --repeat-penalty R\n"
            "  --max-tokens N         longest answer (default: the room left in the context)\n"
            "  --seed S               seed for sampling\n"
            "  --ctx N  --threads T  --device D\n"
            "  --chat-template-file F a Jinja chat template to use instead of the model's\n"
            "  --cache-dir DIR        keep the conversation's KV blocks in DIR (the prefix cache's disk tier):\n"
            "                         a later chat with the same system prompt starts from them\n"
            "  --lora DIR             answer with this LoRA adapter (PEFT's format)\n" CLI_LLAMA_SAMPLER_USAGE
                CLI_SPEC_USAGE);
}

typedef struct {
    FILE *out;
    int tty, in_reasoning;
    char *text; /* the answer so far */
    size_t n, cap;
    int oom;
} answer;

static void on_event(void *user, const hearth_cpl_event *ev) {
    answer *a = user;
    if (ev->kind == HEARTH_CPL_REASONING) {
        if (a->tty) { /* thinking is shown dimmed and kept out of the history */
            if (!a->in_reasoning) fputs("\033[2m", a->out);
            a->in_reasoning = 1;
            fwrite(ev->text, 1, ev->len, a->out);
            fflush(a->out);
        }
        return;
    }
    if (ev->kind != HEARTH_CPL_CONTENT) return;
    if (a->in_reasoning) {
        fputs("\033[0m\n", a->out);
        a->in_reasoning = 0;
    }
    fwrite(ev->text, 1, ev->len, a->out);
    fflush(a->out);
    if (a->n + ev->len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1024;
        while (cap < a->n + ev->len + 1) cap *= 2;
        char *p = realloc(a->text, cap);
        if (!p) {
            a->oom = 1;
            return;
        }
        a->text = p;
        a->cap = cap;
    }
    memcpy(a->text + a->n, ev->text, ev->len);
    a->n += ev->len;
    a->text[a->n] = 0;
}

int cmd_chat(int argc, char **argv) {
    cli_stack_opts so = {.n_slots = 1, .max_queue = 4};
    hearth_cpl_params flags = {0};
    const char *system = NULL;
    char defbuf[4096];
    long lv;
    double dv;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() \
    if (!v) return cli_usage_error("chat", "%s needs a value", a); \
    i++
        int spec = cli_spec_flag("chat", argc, argv, &i, &so);
        if (spec < 0) return 2;
        if (spec > 0) continue;
        int smp = cli_llama_sampler_flag("chat", argc, argv, &i, &flags);
        if (smp < 0) return 2;
        if (smp > 0) continue;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--system")) {
            NEED_VALUE();
            system = v;
        } else if (!strcmp(a, "--temp") || !strcmp(a, "--top-p") || !strcmp(a, "--min-p") ||
                   !strcmp(a, "--repeat-penalty")) {
            NEED_VALUE();
            if (!cli_parse_float("chat", a, v, &dv)) return 2;
            if (!strcmp(a, "--temp")) flags.has_temperature = 1, flags.temperature = (float)dv;
            else if (!strcmp(a, "--top-p")) flags.has_top_p = 1, flags.top_p = (float)dv;
            else if (!strcmp(a, "--min-p")) flags.has_min_p = 1, flags.min_p = (float)dv;
            else flags.has_repetition_penalty = 1, flags.repetition_penalty = (float)dv;
        } else if (!strcmp(a, "--top-k") || !strcmp(a, "--max-tokens") || !strcmp(a, "--seed") ||
                   !strcmp(a, "--ctx") || !strcmp(a, "--threads")) {
            NEED_VALUE();
            if (!cli_parse_int("chat", a, v, &lv)) return 2;
            if (!strcmp(a, "--top-k")) flags.has_top_k = 1, flags.top_k = (int)lv;
            else if (!strcmp(a, "--seed")) flags.has_seed = 1, flags.seed = (uint64_t)lv;
            else if (lv < 1 && strcmp(a, "--threads")) return cli_usage_error("chat", "%s must be at least 1", a);
            else if (!strcmp(a, "--max-tokens")) flags.has_max_tokens = 1, flags.max_tokens = (int)lv;
            else if (!strcmp(a, "--ctx")) so.ctx = (int)lv;
            else so.threads = (int)lv;
        } else if (!strcmp(a, "--device")) {
            NEED_VALUE();
            so.device = v;
        } else if (!strcmp(a, "--chat-template-file")) {
            NEED_VALUE();
            so.template_file = v;
        } else if (!strcmp(a, "--cache-dir")) {
            NEED_VALUE();
            so.cache_dir = v;
        } else if (!strcmp(a, "--lora")) {
            NEED_VALUE();
            so.lora = (const char *const *)&argv[i], so.n_lora = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("chat", "unknown option '%s'", a);
        } else if (!so.model_path) {
            so.model_path = a;
        } else {
            return cli_usage_error("chat", "unexpected argument '%s'", a);
        }
#undef NEED_VALUE
    }
    if (!so.model_path) so.model_path = cli_default_model(defbuf, sizeof defbuf);
    so.flags = &flags;

    hearth_err err = {0};
    cli_stack *stack;
    if (cli_stack_open(&stack, &so, &err) != HEARTH_OK) {
        fprintf(stderr, "hearth chat: %s\n", err.msg);
        return 1;
    }
    hearth_cpl_ctx *cpl = cli_stack_cpl(stack);
    if (!hearth_cpl_ctx_has_chat(cpl)) {
        fprintf(stderr, "hearth chat: %s has no chat template; give one with --chat-template-file\n", so.model_path);
        cli_stack_close(stack);
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C at the prompt ends getline */

    int tty_in = isatty(0), tty_out = isatty(1);
    fprintf(stderr, "hearth chat: %s (%s). /reset clears the history, /quit leaves.\n", so.model_path,
            cli_stack_describe(stack));
    json_t *history = json_array();
    if (system) json_array_append_new(history, json_pack("{s:s,s:s}", "role", "system", "content", system));
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (tty_in) {
            fputs(tty_out ? "\033[1m> \033[0m" : "> ", stdout);
            fflush(stdout);
        }
        g_interrupted = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            json_array_clear(history);
            if (system) json_array_append_new(history, json_pack("{s:s,s:s}", "role", "system", "content", system));
            fprintf(stderr, "(history cleared)\n");
            continue;
        }
        json_t *um = json_pack("{s:s,s:s%}", "role", "user", "content", line, (size_t)n);
        if (!um) {
            fprintf(stderr, "hearth chat: the message is not valid UTF-8\n");
            continue;
        }
        json_array_append_new(history, um);
        hearth_cpl_request r;
        hearth_cpl_request_init(&r);
        r.chat = 1;
        r.messages = json_incref(history);
        hearth_adapter_name ad;
        if (so.n_lora && hearth_adapter_names_list(hearth_cpl_adapters(cpl), &ad, 1) == 1 &&
            !(r.model = strdup(ad.name))) { /* the adapter, by its name */
            fprintf(stderr, "hearth chat: out of memory\n");
            hearth_cpl_request_deinit(&r);
            break;
        }
        hearth_cpl *q;
        hearth_cpl_error e;
        hearth_status st = hearth_cpl_start(cpl, &r, &q, &e);
        hearth_cpl_request_deinit(&r);
        if (st != HEARTH_OK) {
            fprintf(stderr, "hearth chat: %s\n", e.msg);
            json_array_remove(history, json_array_size(history) - 1);
            if (e.status == HEARTH_ERANGE) fprintf(stderr, "(the conversation is too long: /reset)\n");
            continue;
        }
        answer a = {.out = stdout, .tty = tty_out};
        while (hearth_cpl_step(q, on_event, &a, interrupted, NULL)) {
        }
        if (a.in_reasoning) fputs("\033[0m", stdout);
        fputs("\n", stdout);
        fflush(stdout);
        const hearth_cpl_summary *s = hearth_cpl_summary_get(q);
        if (s->finish == HEARTH_CPL_FINISH_ERROR) {
            fprintf(stderr, "hearth chat: %s\n", s->error);
            rc = 1;
        }
        if (s->finish == HEARTH_CPL_FINISH_CANCELED) fprintf(stderr, "(stopped)\n");
        json_t *am = json_pack("{s:s,s:s%}", "role", "assistant", "content", a.text ? a.text : "", a.n);
        if (am) json_array_append_new(history, am);
        free(a.text);
        hearth_cpl_free(q);
        if (rc) break;
    }
    free(line);
    json_decref(history);
    cli_stack_close(stack);
    return rc;
}
