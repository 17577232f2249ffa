/* grammar.h - structured output by a context-free grammar in llama.cpp's
 * GBNF (llama-server's `grammar`, vLLM's `guided_grammar`), and vLLM's
 * `guided_choice` (one of a list of strings) and `guided_regex` (rewritten as
 * GBNF by grammar_regex.c), enforced token by token.
 *
 * GBNF: rules `name ::= alternatives`, the output must match `root`.
 * Alternatives are sequences separated by `|`; a sequence's items are
 * "literals" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [character
 * classes] (ranges, ^ to negate), `.` (any character), rule names and
 * ( groups ), each optionally followed by *, +, ?, {m}, {m,} or {m,n}.
 * `#` starts a comment. A rule ends at a newline outside parentheses, unless
 * the next line continues it with `|`.
 *
 * Compiled as llama.cpp does it: every rule a list of alternatives of
 * elements (a character set or a rule reference), repetitions rewritten into
 * helper rules. The matcher's state is a set of stacks of element positions
 * (the top: the character set the next code point must match; an empty stack:
 * the output is complete), advanced one code point at a time; a token's bytes
 * may end inside a UTF-8 sequence, which is then checked against the range of
 * code points it can still become. Left recursion is refused at compile time
 * (its expansion would never end); the sets are bounded (GRAMMAR_MAX_INTS
 * ints, stacks 512 deep), and a code point that would overflow them is
 * refused, never crashes.
 *
 * A compiled grammar is immutable and may be shared by threads; a state and
 * a constraint belong to one request. */
#ifndef HEARTH_COMPLETION_GRAMMAR_H
#define HEARTH_COMPLETION_GRAMMAR_H

#include "completion/json_mode.h"
#include "core/status.h"
#include "engine/sampler.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_grammar hearth_grammar;

/* Compile GBNF text (len bytes, not NUL-terminated necessarily). EINVAL
 * names the line and what is wrong ("line 3: rule 'value' is used but not
 * defined").
 * On failure *out is NULL. */
hearth_status hearth_grammar_compile(hearth_grammar **out, const char *text, size_t len, hearth_err *err);
/* A grammar whose output is exactly one of n strings (n >= 1, each valid
 * UTF-8, may be empty); _text returns its GBNF (malloc'd; NULL: out of memory). */
hearth_status hearth_grammar_choices(hearth_grammar **out, const char *const *choices, int n, hearth_err *err);
char *hearth_grammar_choices_text(const char *const *choices, int n);
/* A regular expression (vLLM's guided_regex; the subset grammar_regex.c
 * lists) as GBNF text, *gbnf malloc'd. EINVAL / ENOTSUP name the offset and
 * the construct. */
hearth_status hearth_grammar_from_regex(char **gbnf, const char *re, size_t len, hearth_err *err);
void hearth_grammar_free(hearth_grammar *g);
/* Rules after compilation (helper rules included), for tests and logs. */
int hearth_grammar_n_rules(const hearth_grammar *g);

/* A matcher state: the stacks (a flat buffer of [len, positions...] entries)
 * and a UTF-8 sequence begun but not finished. */
typedef struct {
    int32_t *buf;
    int len, cap;
    uint32_t cp;  /* the code point's bits so far */
    uint8_t need; /* its continuation bytes still to come */
    uint8_t seq;  /* its length in bytes */
} hearth_grammar_state;

/* Before the first byte of the output. ENOMEM. */
hearth_status hearth_grammar_state_init(const hearth_grammar *g, hearth_grammar_state *s);
void hearth_grammar_state_deinit(hearth_grammar_state *s);
/* Feed bytes: 1 if the output is still the start of something the grammar
 * accepts (s advanced; scratch is a second state used as work space), 0 if
 * not (s is then unspecified: feed a copy to test). */
int hearth_grammar_feed(const hearth_grammar *g, hearth_grammar_state *s, hearth_grammar_state *scratch,
                        const uint8_t *b, size_t n);
/* dst = src (dst's buffer grows as needed). 0 on out of memory. */
int hearth_grammar_state_copy(hearth_grammar_state *dst, const hearth_grammar_state *src);
/* The output is complete (may end here). */
int hearth_grammar_done(const hearth_grammar_state *s);
/* More output may follow. */
int hearth_grammar_open(const hearth_grammar_state *s);

/* A sampler constraint over vocabulary v (borrowed, must outlive it): the
 * output matches g (taken: freed with the constraint, or here on failure),
 * then ends with one of end_ids (copied), which are allowed only once the
 * output is complete (and then only they, if nothing more can follow). */
hearth_status hearth_grammar_constraint(hearth_constraint *out, const hearth_vocab_bytes *v, hearth_grammar *g,
                                        const int32_t *end_ids, int n_end, hearth_err *err);

#endif
