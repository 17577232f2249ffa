/* infill.h - the prompt of a fill-in-the-middle request (llama-server's
 * POST /infill, what llama.vim and llama.vscode send): the code before and
 * after the cursor, and other files as context, laid out with the model's
 * FIM tokens as llama-server lays them (its format_prompt_infill), in
 * Qwen2.5-Coder's repository-level pattern:
 *
 *   [REP]myproject\n [SEP]file0\n text0 ... [SEP]filename\n
 *   [BOS] [PRE]prefix [SUF]suffix [MID]prompt
 *
 * (with spm_infill, suffix first: [SUF]suffix [PRE]prefix prompt [MID]).
 * Without a [SEP] token the files are joined by "\n\n--- snippet ---\n\n";
 * without [REP] there is no repository line. The prefix keeps its last
 * 3/4 of a 2,048-token window and the suffix its first quarter less the
 * prompt (llama-server's default batch); the files fill what the context has
 * left past that window and twice the server's default max_tokens, keeping
 * their end. */
#ifndef HEARTH_COMPLETION_INFILL_H
#define HEARTH_COMPLETION_INFILL_H

#include "core/status.h"
#include "tok/tok.h"

#include <stddef.h>
#include <stdint.h>

#define HEARTH_INFILL_WINDOW 2048 /* llama-server's default n_batch, which sizes its prefix and suffix */

typedef struct {
    char *prefix, *suffix; /* owned, NUL-terminated */
    char **extra_name;     /* [n_extra] file names (owned) */
    char **extra_text;     /* [n_extra] their text (owned) */
    int n_extra;
} hearth_cpl_infill;

void hearth_cpl_infill_free(hearth_cpl_infill *in); /* NULL is a no-op */

/* The prompt's ids (*out malloc'd) around middle (the request's own prompt,
 * already tokenized), for a context of n_ctx tokens and a server default
 * of n_predict tokens to generate (-1: none). ENOTSUP when the vocabulary
 * has no prefix, suffix or middle token (the message names which). */
hearth_status hearth_infill_prompt(const hearth_tokenizer *t, const hearth_cpl_infill *in, const int32_t *middle,
                                   size_t n_middle, int n_ctx, int n_predict, int spm, int32_t **out, size_t *n_out,
                                   hearth_err *err);

#endif
