/* dry_breakers.h - DRY's sequence breakers (strings) as the token
 * sequences the sampler matches (engine/dry.h), over one vocabulary: every
 * token whose text holds a breaker, and every token whose text ends with a
 * breaker's start followed by the tokens of its rest (llama.cpp's restart
 * sequences, the rest's tokens at most HEARTH_DRY_MAX_TAIL). */
#ifndef HEARTH_COMPLETION_DRY_BREAKERS_H
#define HEARTH_COMPLETION_DRY_BREAKERS_H

#include "completion/json_mode.h"
#include "engine/dry.h"

#define HEARTH_DRY_MAX_BREAKER 40 /* bytes of a breaker looked at (llama.cpp's MAX_CHAR_LEN) */

/* brk[n]: non-empty strings. vb: the vocabulary's bytes (specials: their
 * text is taken from tok). */
hearth_status hearth_dry_breakers_build(hearth_dry_breakers *out, const hearth_vocab_bytes *vb,
                                        const hearth_tokenizer *tok, const char *const *brk, int n, hearth_err *err);
/* llama.cpp's default breakers: "\n", ":", "\"" and "*". */
hearth_status hearth_dry_breakers_default(hearth_dry_breakers *out, const hearth_vocab_bytes *vb,
                                          const hearth_tokenizer *tok, hearth_err *err);

#endif
