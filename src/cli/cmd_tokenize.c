/* cmd_tokenize.c - `hearth tokenize MODEL TEXT`: show how a model's
 * tokenizer splits a text (for users and for debugging prompts). */
#include "cli/cli.h"
#include "tok/tok.h"

#include "core/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth tokenize MODEL TEXT [--ids] [--no-add-special] [--no-parse-special] [--decode]\n\n"
            "Tokenize TEXT (or standard input when TEXT is '-') with the tokenizer of MODEL\n"
            "(a .gguf file, a model directory with tokenizer.json, or a tokenizer.json).\n"
            "Prints one token per line: id and the token's vocabulary string.\n\n"
            "  --ids               print only the ids, space-separated, on one line\n"
            "  --no-add-special    do not add bos/eos/cls/sep (the post-processor)\n"
            "  --no-parse-special  treat special tokens written in TEXT as plain text\n"
            "  --decode            also print the decoded text (skip_special_tokens=false)\n"
            "  --bench N           encode N times, print only the token count and MB/s (stderr);\n"
            "                      with --lines, each line of TEXT is encoded on its own\n");
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    while (p) {
        size_t k = fread(p + n, 1, cap - n, stdin);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            char *q = realloc(p, cap *= 2);
            if (!q) {
                free(p);
                return NULL;
            }
            p = q;
        }
    }
    *len = n;
    return p;
}

/* A token string, with control characters and quotes escaped. */
static void print_token(const char *s, size_t n) {
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\' || c == '\'') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

/* Encode text `reps` times (as one string, or line by line) and report. */
static int run_bench(const hearth_tokenizer *t, const char *text, size_t len, long reps, int lines, int add_special,
                     int parse_special) {
    size_t total_tokens = 0;
    double t0 = hearth_time_now();
    for (long r = 0; r < reps; r++) {
        size_t a = 0;
        while (a < len || (a == 0 && len == 0)) {
            size_t b = len;
            if (lines) {
                const char *nl = memchr(text + a, '\n', len - a);
                b = nl ? (size_t)(nl - text) + 1 : len;
            }
            int32_t *ids;
            size_t n;
            hearth_err err = {0};
            if (hearth_tok_encode(t, text + a, b - a, add_special, parse_special, &ids, &n, &err)) {
                fprintf(stderr, "hearth tokenize: %s\n", err.msg);
                return 1;
            }
            free(ids);
            total_tokens += n;
            a = b;
            if (len == 0) break;
        }
    }
    double dt = hearth_time_now() - t0;
    fprintf(stderr, "tokens %zu bytes %zu seconds %.4f MB/s %.2f\n", total_tokens / (size_t)reps, len, dt / (double)reps,
            (double)len * (double)reps / dt / 1e6);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    int ids_only = 0, add_special = 1, parse_special = 1, decode = 0, lines = 0;
    long bench = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ids")) ids_only = 1;
        else if (!strcmp(a, "--no-add-special")) add_special = 0;
        else if (!strcmp(a, "--no-parse-special")) parse_special = 0;
        else if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "--lines")) lines = 1;
        else if (!strcmp(a, "--bench")) {
            if (i + 1 >= argc) return cli_usage_error("tokenize", "--bench needs a count");
            if (!cli_parse_int("tokenize", "--bench", argv[++i], &bench)) return 2;
            if (bench < 1) return cli_usage_error("tokenize", "--bench expects a count >= 1");
        }
        else if (a[0] == '-' && a[1] == '-') return cli_usage_error("tokenize", "unknown option '%s'", a);
        else if (!model) model = a;
        else if (!text) text = a;
        else return cli_usage_error("tokenize", "unexpected argument '%s'", a);
    }
    if (!model || !text) return cli_usage_error("tokenize", "expected MODEL and TEXT");
    hearth_err err = {0};
    hearth_tokenizer *t;
    if (hearth_tok_load_path(&t, model, &err)) {
        fprintf(stderr, "hearth tokenize: %s\n", err.msg);
        return 1;
    }
    char *buf = NULL;
    size_t len = strlen(text);
    if (!strcmp(text, "-")) {
        buf = read_stdin(&len);
        if (!buf) {
            fprintf(stderr, "hearth tokenize: out of memory reading standard input\n");
            hearth_tok_free(t);
            return 1;
        }
        text = buf;
    }
    int32_t *ids;
    size_t n;
    int rc = 0;
    if (bench) {
        rc = run_bench(t, text, len, bench, lines, add_special, parse_special);
        free(buf);
        hearth_tok_free(t);
        return rc;
    }
    if (hearth_tok_encode(t, text, len, add_special, parse_special, &ids, &n, &err)) {
        fprintf(stderr, "hearth tokenize: %s\n", err.msg);
        rc = 1;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (ids_only) {
                printf(i ? " %d" : "%d", ids[i]);
                continue;
            }
            size_t tl;
            const char *ts = hearth_tok_token_text(t, ids[i], &tl);
            printf("%d\t", ids[i]);
            print_token(ts, tl);
            putchar('\n');
        }
        if (ids_only) putchar('\n');
        if (decode) {
            char *s;
            size_t sl;
            if (hearth_tok_decode(t, ids, n, 0, &s, &sl, &err)) {
                fprintf(stderr, "hearth tokenize: %s\n", err.msg);
                rc = 1;
            } else {
                fwrite(s, 1, sl, stdout);
                putchar('\n');
                free(s);
            }
        }
        free(ids);
    }
    free(buf);
    hearth_tok_free(t);
    return rc;
}
