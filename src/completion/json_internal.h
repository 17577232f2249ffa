/* json_internal.h - the JSON automaton's modes and its one-byte step, for
 * json_schema.c, which follows the same bytes with a schema's rules on top.
 * Private to completion/. */
#ifndef HEARTH_COMPLETION_JSON_INTERNAL_H
#define HEARTH_COMPLETION_JSON_INTERNAL_H

#include "completion/json_mode.h"

enum hearth_json_mode {
    J_TOP,       /* before the top-level object */
    J_VALUE,     /* a value (after ':' or an array's ',') */
    J_ARR_FIRST, /* after '[': a value or ']' */
    J_OBJ_FIRST, /* after '{': a key or '}' */
    J_OBJ_KEY,   /* after an object's ',': a key */
    J_COLON,     /* after a key */
    J_AFTER,     /* after a value: ',' or the container's end */
    J_STR,       /* in a string (key: it is an object's key) */
    J_ESC,       /* after a backslash */
    J_HEX,       /* in \uXXXX (hex: digits left) */
    J_MINUS,     /* after a number's '-' */
    J_ZERO,      /* a number's leading 0 */
    J_INT,       /* integer digits */
    J_DOT,       /* after '.' */
    J_FRAC,      /* fraction digits */
    J_E,         /* after 'e' */
    J_ESIGN,     /* after the exponent's sign */
    J_EXP,       /* exponent digits */
    J_LIT,       /* in true / false / null (lit, pos) */
    J_DONE,      /* the object is complete */
};

#define J_MAX_DEPTH 32

/* One byte: 1 if the output is still the start of a JSON object. */
int hearth_json_step(hearth_json_state *s, uint8_t c);

#endif
