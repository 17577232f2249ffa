/* toolcall.h - tool calls parsed out of the generated content.
 *
 * Two formats, the ones open models are trained on:
 *   Hermes / Qwen:  <tool_call>{"name": "f", "arguments": {...}}</tool_call>
 *                   (any number, anywhere in the content; text around them
 *                   stays content; a missing closing tag at the end of the
 *                   output is tolerated)
 *   Llama 3 JSON:   the whole output is {"name": "f", "parameters": {...}}
 *                   (or "arguments"), optionally after <|python_tag|>, or a
 *                   JSON array of such objects, or several joined by ';'.
 * The parser sees the content stream (after stop strings and the reasoning
 * split). Text that may still become a tool call is held back: a partial
 * `<tool_call>` tag, the inside of an open one, and - only when the content
 * starts with '{' or '[' - the whole output, which is decided at the end. Whatever
 * does not parse as a tool call is released as content, byte for byte (but
 * for a leading <|python_tag|>, which is a marker, not text), so nothing the
 * model wrote is lost.
 *
 * Memory: a capture buffer allocated at init and grown (doubling) only while
 * a call is being captured, up to HEARTH_TOOLCALL_MAX_BYTES; a longer capture
 * is released as content. One parser per generation stream. */
#ifndef HEARTH_COMPLETION_TOOLCALL_H
#define HEARTH_COMPLETION_TOOLCALL_H

#include "completion/reasoning.h"
#include "core/status.h"

#include <stddef.h>

#define HEARTH_TOOLCALL_MAX_BYTES (1 << 20)

/* A parsed call: name and arguments as a compact JSON object text (both
 * NUL-terminated, valid during the callback only). */
typedef void (*hearth_tool_fn)(void *user, int index, const char *name, const char *arguments);

typedef struct {
    int enabled;
    int state;   /* 0 = start, 1 = text, 2 = inside <tool_call>, 3 = whole-output JSON */
    int skip_ws; /* drop whitespace after a parsed call */
    char held[64]; /* leading whitespace / a partial tag */
    size_t n_held;
    char *cap; /* captured call text */
    size_t n_cap, cap_size;
    int n_calls;
} hearth_toolcall;

/* enabled = 0: content passes through untouched (no tools in the request). */
hearth_status hearth_toolcall_init(hearth_toolcall *t, int enabled, hearth_err *err);
void hearth_toolcall_deinit(hearth_toolcall *t);
/* Feed content text; content pieces go to text_fn (kind CONTENT), calls to
 * tool_fn in order. */
void hearth_toolcall_feed(hearth_toolcall *t, const char *s, size_t n, hearth_text_fn text_fn, hearth_tool_fn tool_fn,
                          void *user);
void hearth_toolcall_flush(hearth_toolcall *t, hearth_text_fn text_fn, hearth_tool_fn tool_fn, void *user);

/* Parse one call object text {"name": ..., "arguments"|"parameters": {...}}
 * (arguments may also be a JSON string holding an object). On success returns
 * 1 and calls tool_fn; 0 if the text is not a call. Exposed for tests. */
int hearth_toolcall_parse_one(hearth_toolcall *t, const char *s, size_t n, hearth_tool_fn tool_fn, void *user);

#endif
