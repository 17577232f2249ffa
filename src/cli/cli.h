/* cli.h - the hearth verbs. Each verb is `int cmd_<verb>(int argc, char **argv)`
 * where argv[0] is the verb; it returns the process exit status
 * (0 ok, 1 runtime failure, 2 usage error). */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

#include "hearth.h"
#include "lib/session.h"

#include <stddef.h>

typedef struct {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
} cli_verb;

int cmd_devices(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_train(int argc, char **argv);

/* The model stack `serve` and `chat` share (cmd_serve.c): model + tokenizer +
 * KV (hearth_session), the engine thread, and the completion context with the
 * chat template and the resolved defaults. */
typedef struct cli_stack cli_stack;
struct hearth_cpl_params;
struct hearth_cpl_ctx;
typedef struct {
    const char *model_path;    /* GGUF file or HF directory */
    const char *device;        /* NULL = cpu */
    const char *template_file; /* a chat template to use instead of the model's, or NULL */
    int threads, ctx, n_slots, max_queue; /* 0 = defaults */
    int max_tokens;            /* rows a forward step holds, 0 = the device's default */
    const char *kv_type;       /* NULL = the device's default */
    double kv_budget_mib;      /* 0 = default */
    const char *cache_dir;     /* the prefix cache's disk tier, NULL = none */
    double cache_disk_gib;     /* 0 = the default budget */
    double cache_write_mib_s;  /* 0 = the default rate */
    const struct hearth_cpl_params *flags; /* the verb's sampling defaults, or NULL */
    const char *const *lora;   /* LoRA adapters, "NAME=DIR" or "DIR" (hearth_session_opts) */
    int n_lora;
    int spec_tokens, spec_ngram_min, spec_ngram_max; /* speculative decoding by prompt lookup (hearth_engine_opts) */
    int spm_infill;            /* /infill prompts put the suffix first (hearth_cpl_ctx_opts) */
    int priority_scheduling;   /* requests' priority orders the wait (hearth_cpl_ctx_opts) */
} cli_stack_opts;
/* --spec-ngram K, --spec-ngram-min N, --spec-ngram-max N at argv[*i] (value at argv[*i + 1]): 1 when
 * taken (into *o, *i past the value), 0 when a is another flag, -1 on a bad value (printed). */
int cli_spec_flag(const char *verb, int argc, char **argv, int *i, cli_stack_opts *o);
#define CLI_SPEC_USAGE                                                                                      \
    "  --spec-ngram K         speculative decoding by prompt lookup: behind each token, up to K tokens\n"   \
    "                         drafted from the latest earlier occurrence of the last few, checked in the\n" \
    "                         same forward; the output is unchanged, a step yields up to K + 1 tokens\n"    \
    "                         (vLLM's ngram method; default 0 = off)\n"                                     \
    "  --spec-ngram-max N     longest suffix looked up (default 4)\n"                                       \
    "  --spec-ngram-min N     shortest suffix looked up (default 2)\n"

/* llama.cpp's sampler flags (llama-server's names) at argv[*i] into the verb's sampling defaults p: 1 when
 * taken (*i past the value), 0 when a is another flag, -1 on a bad value (printed). */
int cli_llama_sampler_flag(const char *verb, int argc, char **argv, int *i, struct hearth_cpl_params *p);
#define CLI_LLAMA_SAMPLER_USAGE                                                                                \
    "  --repeat-last-n N      --repeat-penalty's window: the last N tokens (-1: all, the default; 0: off)\n"   \
    "  --typical P  --top-nsigma N  --xtc-probability P  --xtc-threshold T  --dry-multiplier M\n"              \
    "  --dry-base B  --dry-allowed-length N  --dry-penalty-last-n N  --dynatemp-range R  --dynatemp-exp E\n"   \
    "  --mirostat 1|2  --mirostat-ent TAU  --mirostat-lr ETA\n"                                                \
    "                         llama.cpp's samplers, as llama-server's flags (defaults: off; XTC's\n"           \
    "                         threshold 0.1, DRY's base 1.75, allowed length 2, window the context;\n"        \
    "                         dynatemp exponent 1; mirostat tau 5, eta 0.1)\n"

/* On failure err says why and nothing is left open. */
hearth_status cli_stack_open(cli_stack **out, const cli_stack_opts *o, hearth_err *err);
void cli_stack_close(cli_stack *k);
struct hearth_cpl_ctx *cli_stack_cpl(cli_stack *k);
const char *cli_stack_describe(cli_stack *k); /* "cpu, context 4096" for start-up lines */
/* The chat template: file (--chat-template-file) if given, else the GGUF key
 * tokenizer.chat_template, else chat_template.jinja or tokenizer_config.json
 * "chat_template" of an HF directory. *out is malloc'd, NULL when the model
 * has none. */
hearth_status cli_load_template(const hearth_session *s, const char *model_path, const char *file, char **out,
                                size_t *len, hearth_err *err);
/* models/SmolLM2-135M-Instruct.Q4_1.gguf beside the binary, else in the cwd. */
const char *cli_default_model(char *buf, size_t cap);



/* Shared helpers for verbs. */
/* Print "hearth VERB: message" and return 2 (usage error). */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 if arg is -h or --help. */
int cli_is_help(const char *arg);
/* Parse an integer/float flag value; on failure print an error and return 0. */
int cli_parse_int(const char *verb, const char *flag, const char *s, long *out);
int cli_parse_float(const char *verb, const char *flag, const char *s, double *out);

#endif
