/* reasoning.h - split a model's `<think>...</think>` reasoning from its answer.
 *
 * Models such as Qwen3 and DeepSeek-R1 think in `<think>...</think>` before
 * answering; their templates often open the tag in the generation prompt, so
 * the output starts inside it. The splitter turns the decoded text stream into
 * reasoning pieces and content pieces (`reasoning_content` and `content` of
 * the OpenAI message), with the tags removed:
 *   - at the start of the output (after optional whitespace) `<think>` opens
 *     reasoning; anywhere else it is ordinary content;
 *   - in reasoning, `</think>` closes it; everything after is content;
 *   - whitespace right after either tag is dropped (the newline(s) templates
 *     and models put there are layout, not text).
 * Tags split across pieces are held back until they are decided, so a partial
 * tag is never released. Output without tags is content, unchanged.
 *
 * No allocation; one splitter per generation stream. */
#ifndef HEARTH_COMPLETION_REASONING_H
#define HEARTH_COMPLETION_REASONING_H

#include <stddef.h>

typedef enum { HEARTH_TEXT_CONTENT = 0, HEARTH_TEXT_REASONING = 1 } hearth_text_kind;

/* Receives each released piece (n > 0). */
typedef void (*hearth_text_fn)(void *user, hearth_text_kind kind, const char *s, size_t n);

#define HEARTH_REASONING_HOLD 64 /* leading whitespace + a partial tag */

typedef struct {
    int enabled;
    int state;    /* 0 = start (a <think> may open), 1 = reasoning, 2 = content */
    int skip_ws;  /* drop whitespace until the next other byte */
    char held[HEARTH_REASONING_HOLD];
    size_t n_held;
} hearth_reasoning;

/* enabled = 0: every byte is content. in_reasoning = 1: the prompt already
 * opened <think> (the output starts inside it). */
void hearth_reasoning_init(hearth_reasoning *r, int enabled, int in_reasoning);
void hearth_reasoning_feed(hearth_reasoning *r, const char *s, size_t n, hearth_text_fn fn, void *user);
/* End of stream: release what is held (an unfinished tag is text). */
void hearth_reasoning_flush(hearth_reasoning *r, hearth_text_fn fn, void *user);

#endif
