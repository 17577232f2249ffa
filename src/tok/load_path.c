/* load_path.c - open the tokenizer of a model path: a .gguf file, a model
 * directory holding tokenizer.json (+ tokenizer_config.json), or a
 * tokenizer.json file itself. */
#include "core/file.h"
#include "io/gguf.h"
#include "tok/tok.h"

#include <stdio.h>
#include <string.h>

hearth_status hearth_tok_load_path(hearth_tokenizer **out, const char *path, hearth_err *err) {
    *out = NULL;
    size_t n = strlen(path);
    char a[4096], b[4096];
    if (hearth_path_is_dir(path)) {
        snprintf(a, sizeof a, "%s/tokenizer.json", path);
        snprintf(b, sizeof b, "%s/tokenizer_config.json", path);
        if (!hearth_path_is_file(a))
            return hearth_err_set(err, HEARTH_ENOENT, "%s: no tokenizer.json in this directory", path);
        return hearth_tok_load_json(out, a, hearth_path_is_file(b) ? b : NULL, err);
    }
    if (n >= 5 && !strcmp(path + n - 5, ".gguf")) {
        hearth_gguf *g;
        hearth_status st = hearth_gguf_open(&g, path, err);
        if (st) return st;
        st = hearth_tok_load_gguf(out, g, err);
        hearth_gguf_close(g);
        return st;
    }
    if (!hearth_path_is_file(path)) return hearth_err_set(err, HEARTH_ENOENT, "%s: no such file or directory", path);
    /* a tokenizer.json: use the tokenizer_config.json beside it, if any */
    const char *slash = strrchr(path, '/');
    snprintf(b, sizeof b, "%.*stokenizer_config.json", slash ? (int)(slash - path + 1) : 0, path);
    return hearth_tok_load_json(out, path, hearth_path_is_file(b) ? b : NULL, err);
}
