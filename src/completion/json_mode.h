/* json_mode.h - structured output: JSON mode (response_format {"type":
 * "json_object"}: the output is one JSON object, RFC 8259) and JSON Schema
 * (one object that a schema accepts), enforced token by token.
 *
 * A byte automaton (a pushdown of objects and arrays, 32 deep at most)
 * follows the output; before each draw the sampler's constraint forbids every
 * token whose bytes would leave the output no longer the start of a JSON
 * object, and the end-of-generation ids until the object is closed (then
 * only those). Whitespace between tokens is allowed, 64 bytes in a row at
 * most (a newline and deep indentation), so that a model cannot stall in it.
 * The object ends the answer.
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

#include <jansson.h>
#include <pthread.h>

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
/* A constraint's whole mask over logits[vocab]: each token not yet -inf stays
 * when first[its first byte] and allows(self, id) say so; when none stays,
 * the end ids (end[n_end]) are let through instead of a mask that forbids
 * everything. */
void hearth_vocab_mask(const hearth_vocab_bytes *v, const uint8_t first[256], int (*allows)(void *, int32_t),
                       void *self, const int32_t *end, int n_end, float *logits, int vocab);
/* v built from tok unless it was (under mu when threads share v; mu may be NULL). */
hearth_status hearth_vocab_bytes_once(hearth_vocab_bytes *v, pthread_mutex_t *mu, const hearth_tokenizer *tok,
                                     hearth_err *err);
void hearth_vocab_bytes_free(hearth_vocab_bytes *v);

/* ---- JSON Schema (json_schema.c) ----
 *
 * The subset: type (one or a list), properties, required,
 * additionalProperties (false, true or a schema), items, enum and const of
 * strings, booleans and null, anyOf / oneOf whose alternatives start with
 * different bytes (an object or null: yes; two objects: no), $ref into
 * $defs / definitions (recursion included), and annotations (title,
 * description, default, examples). Any other keyword is refused by name, so
 * nothing is silently loosened. The root must be an object. */
typedef struct hearth_schema hearth_schema;

hearth_status hearth_schema_compile(hearth_schema **out, const json_t *schema, hearth_err *err);
void hearth_schema_free(hearth_schema *s);

/* One open container: its node, and for an object the properties given and
 * those the key typed so far can still be. */
typedef struct {
    int16_t node, value; /* value: the node of the value being read in it (array: its items) */
    uint16_t klen;       /* the key's bytes typed */
    uint8_t free;        /* the key is no property: an additional one */
    uint64_t seen, cand;
} schema_frame;

typedef struct {
    hearth_json_state j;
    int16_t scalar, pending; /* the node of the scalar being read / the container about to open, or -1 */
    uint16_t epos;           /* enum: bytes of its text matched */
    uint64_t ecand;          /* enum: values still matching */
    schema_frame f[32];      /* one per open container; only j.depth of them are live */
} hearth_schema_state;

void hearth_schema_init(const hearth_schema *s, hearth_schema_state *st);
/* dst = src, the live frames only. */
void hearth_schema_copy(hearth_schema_state *dst, const hearth_schema_state *src);
/* Feed bytes: 1 if the output is still the start of a value the schema accepts. */
int hearth_schema_feed(const hearth_schema *s, hearth_schema_state *st, const uint8_t *b, size_t n);
int hearth_schema_step(const hearth_schema *s, hearth_schema_state *st, uint8_t c);

/* A sampler constraint over vocabulary v (borrowed: it must outlive the
 * constraint): the output is one JSON object that schema accepts (the
 * constraint takes the schema; NULL: any object, JSON mode), ending with one
 * of end_ids (copied). On failure the schema is freed too. */
hearth_status hearth_json_constraint(hearth_constraint *out, const hearth_vocab_bytes *v, hearth_schema *schema,
                                     const int32_t *end_ids, int n_end, hearth_err *err);
/* The same over v built from tok at its first use (under mu when threads
 * share v; mu may be NULL). */
hearth_status hearth_json_constraint_lazy(hearth_constraint *out, hearth_vocab_bytes *v, pthread_mutex_t *mu,
                                          const hearth_tokenizer *tok, hearth_schema *schema, const int32_t *end_ids,
                                          int n_end, hearth_err *err);

#endif
