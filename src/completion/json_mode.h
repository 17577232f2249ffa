/* json_mode.h - JSON mode (response_format {"type": "json_object"}): the
 * output is one JSON object (RFC 8259), enforced token by token.
 *
 * A byte automaton (a pushdown of objects and arrays, 32 deep at most)
 * follows the output; before each draw the sampler's constraint forbids every
 * token whose bytes would leave the output no longer the start of a JSON
 * object, and the end-of-generation ids until the object is closed (then
 * only those). Whitespace between tokens is allowed, 16 bytes in a row at
 * most, so that a model cannot stall in it. The object ends the answer.
 *
 * A token's bytes are what the streaming detokenizer emits for it in the
 * middle of a text (hearth_vocab_bytes, built once per tokenizer); special
 * tokens are never allowed. A token is checked by feeding its bytes to a
 * copy of the automaton's 12-byte state; the sampler checks only the tokens
 * its draw can reach, or the whole vocabulary when logprobs are asked for. */
#ifndef HEARTH_COMPLETION_JSON_MODE_H
#define HEARTH_COMPLETION_JSON_MODE_H

#include "engine/sampler.h"
#include "tok/tok.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t mode, lit, pos, depth, ws, hex, key, pad;
    uint32_t stack; /* bit d: the container at depth d + 1 is an object */
} hearth_json_state;

/* Expecting the first byte of a top-level object. */
void hearth_json_init(hearth_json_state *s);
/* Feed bytes: 1 if the output is still the start of one JSON object (s
 * advanced), 0 if a byte breaks it (s is then undefined). */
int hearth_json_feed(hearth_json_state *s, const uint8_t *b, size_t n);
/* The object is complete. */
int hearth_json_done(const hearth_json_state *s);

/* Every token's bytes. */
typedef struct {
    int n;
    uint32_t *off;    /* [n + 1] into bytes */
    uint8_t *bytes;
    uint8_t *special; /* [n] never allowed */
} hearth_vocab_bytes;

hearth_status hearth_vocab_bytes_build(hearth_vocab_bytes *v, const hearth_tokenizer *tok, hearth_err *err);
void hearth_vocab_bytes_free(hearth_vocab_bytes *v);

/* A sampler constraint for JSON mode over vocabulary v (borrowed: it must
 * outlive the constraint), ending with one of end_ids (copied). */
hearth_status hearth_json_constraint(hearth_constraint *out, const hearth_vocab_bytes *v, const int32_t *end_ids,
                                     int n_end, hearth_err *err);

#endif
