/* smollm_tok.h - the default model's tokenizer for the unit tests that need a
 * real vocabulary (models/SmolLM2-135M-Instruct.Q4_1.gguf, fetched by setup). */
#ifndef HEARTH_TEST_SMOLLM_TOK_H
#define HEARTH_TEST_SMOLLM_TOK_H

#include "testhelp.h"

#include "io/gguf.h"
#include "tok/tok.h"

static inline hearth_tokenizer *smollm(void) {
    hearth_err err = {0};
    hearth_gguf *g;
    if (hearth_gguf_open(&g, test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"), &err)) return NULL;
    hearth_tokenizer *t = NULL;
    hearth_tok_load_gguf(&t, g, &err);
    hearth_gguf_close(g);
    return t;
}

#endif
