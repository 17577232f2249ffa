/* main.c - the hearth command line: dispatch to a verb. */
#include "cli/cli.h"
#include "completion/completion.h"
#include "hearth.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_verb VERBS[] = {
    {"serve", "serve a model over OpenAI- and Anthropic-compatible HTTP APIs", cmd_serve},
    {"chat", "chat with a model in the terminal", cmd_chat},
    {"run", "generate a continuation of a prompt, streamed to stdout", cmd_run},
    {"bench", "measure prefill and decode speed", cmd_bench},
    {"train", "fine-tune a LoRA adapter on a JSONL file (CPU or GPU)", cmd_train},
    {"tokenize", "show the token ids a model's tokenizer gives a text", cmd_tokenize},
    {"template", "print the prompt a model's chat template renders for a conversation", cmd_template},
    {"devices", "list the CPU features and GPUs hearth can use", cmd_devices},
};
enum { N_VERBS = sizeof VERBS / sizeof VERBS[0] };

static void print_help(FILE *f) {
    fprintf(f,
            "hearth %s - local LLM inference server, library and fine-tuning lab\n\n"
            "usage: hearth <verb> [options]\n"
            "       hearth --version | --help\n\n"
            "verbs:\n",
            hearth_version());
    for (int i = 0; i < N_VERBS; i++) fprintf(f, "  %-10s %s\n", VERBS[i].name, VERBS[i].summary);
    fprintf(f, "\nRun `hearth <verb> --help` for a verb's options.\n");
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hearth %s: ", verb);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see `hearth %s --help`)\n", verb);
    va_end(ap);
    return 2;
}

int cli_is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

int cli_parse_int(const char *verb, const char *flag, const char *s, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno) {
        cli_usage_error(verb, "%s expects an integer, got '%s'", flag, s ? s : "");
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_float(const char *verb, const char *flag, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v)) {
        cli_usage_error(verb, "%s expects a number, got '%s'", flag, s ? s : "");
        return 0;
    }
    *out = v;
    return 1;
}

int cli_spec_flag(const char *verb, int argc, char **argv, int *i, cli_stack_opts *o) {
    const char *a = argv[*i];
    int *dst = !strcmp(a, "--spec-ngram")       ? &o->spec_tokens
               : !strcmp(a, "--spec-ngram-min") ? &o->spec_ngram_min
               : !strcmp(a, "--spec-ngram-max") ? &o->spec_ngram_max
                                                : NULL;
    if (!dst) return 0;
    long v;
    if (*i + 1 >= argc) return cli_usage_error(verb, "%s needs a value", a), -1;
    if (!cli_parse_int(verb, a, argv[*i + 1], &v)) return -1;
    const long lo = dst == &o->spec_tokens ? 0 : 1;
    if (v < lo || v > 32) return cli_usage_error(verb, "%s must be in [%ld, 32]", a, lo), -1;
    *dst = (int)v;
    *i += 1;
    return 1;
}

int cli_llama_sampler_flag(const char *verb, int argc, char **argv, int *i, struct hearth_cpl_params *p) {
    static const char *const floats[] = {"--typical",      "--top-nsigma",    "--xtc-probability", "--xtc-threshold",
                                         "--dry-multiplier", "--dry-base",      "--dynatemp-range",  "--dynatemp-exp",
                                         "--mirostat-ent",   "--mirostat-lr"};
    static const char *const ints[] = {"--repeat-last-n", "--dry-allowed-length", "--dry-penalty-last-n", "--mirostat"};
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int f = -1, n = -1;
    for (int k = 0; k < (int)(sizeof floats / sizeof *floats); k++) f = !strcmp(a, floats[k]) ? k : f;
    for (int k = 0; k < (int)(sizeof ints / sizeof *ints); k++) n = !strcmp(a, ints[k]) ? k : n;
    if (f < 0 && n < 0) return 0;
    if (!v) return cli_usage_error(verb, "%s needs a value", a), -1;
    *i += 1;
    if (f >= 0) {
        double d;
        if (!cli_parse_float(verb, a, v, &d)) return -1;
        float x = (float)d;
        int bad = f == 0 ? !(d > 0 && d <= 1) /* typical */
                  : f == 2 || f == 3 ? !(d >= 0 && d <= 1) /* XTC */
                  : f == 4 ? d < 0 : f == 5 && d < 1; /* DRY's multiplier, base */
        if (bad) return cli_usage_error(verb, "%s %s is out of range (see --help)", a, v), -1;
        switch (f) {
        case 0: p->has_typical_p = 1, p->typical_p = x; break;
        case 1: p->has_top_n_sigma = 1, p->top_n_sigma = x > 0 ? x : 0; break; /* <= 0: off */
        case 2: p->has_xtc_probability = 1, p->xtc_probability = x; break;
        case 3: p->has_xtc_threshold = 1, p->xtc_threshold = x; break;
        case 4: p->has_dry_multiplier = 1, p->dry_multiplier = x; break;
        case 5: p->has_dry_base = 1, p->dry_base = x; break;
        case 6: p->has_dynatemp_range = 1, p->dynatemp_range = x > 0 ? x : 0; break;
        case 7: p->has_dynatemp_exponent = 1, p->dynatemp_exponent = x; break;
        case 8: p->has_mirostat_tau = 1, p->mirostat_tau = x; break;
        default: p->has_mirostat_eta = 1, p->mirostat_eta = x; break;
        }
        return 1;
    }
    long l;
    if (!cli_parse_int(verb, a, v, &l)) return -1;
    if (l < (n == 0 || n == 2 ? -1 : 0) || l > (n == 3 ? 2 : 1 << 30))
        return cli_usage_error(verb, "%s %s is out of range (see --help)", a, v), -1;
    switch (n) {
    case 0: p->has_repeat_last_n = 1, p->repeat_last_n = (int)l; break;
    case 1: p->has_dry_allowed_length = 1, p->dry_allowed_length = (int)l; break;
    case 2: p->has_dry_penalty_last_n = 1, p->dry_penalty_last_n = (int)l; break;
    default: p->has_mirostat = 1, p->mirostat = (int)l; break;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    const char *verb = argv[1];
    if (cli_is_help(verb) || !strcmp(verb, "help")) {
        print_help(stdout);
        return 0;
    }
    if (!strcmp(verb, "--version") || !strcmp(verb, "-V") || !strcmp(verb, "version")) {
        printf("hearth %s\n", hearth_version());
        return 0;
    }
    for (int i = 0; i < N_VERBS; i++)
        if (!strcmp(verb, VERBS[i].name)) return VERBS[i].fn(argc - 1, argv + 1);
    if (verb[0] == '-')
        fprintf(stderr, "hearth: unknown option '%s'\n", verb);
    else
        fprintf(stderr, "hearth: unknown verb '%s'\n", verb);
    fprintf(stderr, "Run `hearth --help` for the list of verbs.\n");
    return 2;
}
