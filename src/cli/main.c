/* main.c - the hearth command line: dispatch to a verb. */
#include "cli/cli.h"
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
