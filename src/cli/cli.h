/* cli.h - the hearth verbs. Each verb is `int cmd_<verb>(int argc, char **argv)`
 * where argv[0] is the verb; it returns the process exit status
 * (0 ok, 1 runtime failure, 2 usage error). */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

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

/* Shared helpers for verbs. */
/* Print "hearth VERB: message" and return 2 (usage error). */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 if arg is -h or --help. */
int cli_is_help(const char *arg);
/* Parse an integer/float flag value; on failure print an error and return 0. */
int cli_parse_int(const char *verb, const char *flag, const char *s, long *out);
int cli_parse_float(const char *verb, const char *flag, const char *s, double *out);

#endif
