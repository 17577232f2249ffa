/* toy_vocab.h - a small byte-level vocabulary for the constraint tests
 * (test_json_mode.c, test_grammar.c). */
#ifndef HEARTH_TESTS_TOY_VOCAB_H
#define HEARTH_TESTS_TOY_VOCAB_H

#include "completion/json_mode.h"

#include <stdlib.h>
#include <string.h>

/* A vocabulary as byte-level ones are: every printable byte and the newline
 * alone (so that any start can be finished), then longer pieces, some of
 * which break JSON wherever they come; the last id ends. */
static const char *PIECES[] = {"{\"k\":", "true", "nul", "b\"", ".5", "e3", "x}", ",}", "}}", "\n\n", "\":\"", "]]"};
#define N_PIECES (int)(sizeof PIECES / sizeof *PIECES)
#define N_TOK (96 + N_PIECES)
#define END N_TOK
static char TOKENS[N_TOK][8];

static inline void toy_vocab(hearth_vocab_bytes *v) {
    for (int c = 0; c < 95; c++) TOKENS[c][0] = (char)(0x20 + c);
    TOKENS[95][0] = '\n';
    for (int i = 0; i < N_PIECES; i++) strcpy(TOKENS[96 + i], PIECES[i]);
    v->n = N_TOK + 1;
    v->off = malloc(sizeof *v->off * (size_t)(v->n + 1));
    v->special = calloc((size_t)v->n, 1);
    v->bytes = malloc(sizeof TOKENS);
    size_t used = 0;
    for (int i = 0; i < N_TOK; i++) {
        v->off[i] = (uint32_t)used;
        memcpy(v->bytes + used, TOKENS[i], strlen(TOKENS[i]));
        used += strlen(TOKENS[i]);
    }
    v->off[N_TOK] = v->off[N_TOK + 1] = (uint32_t)used; /* the end id has no bytes */
    v->special[N_TOK] = 1;
}

#endif
