/* template.h - a Jinja subset interpreter for model chat templates.
 *
 * Renders a model's own `chat_template` (tokenizer_config.json or the GGUF key
 * tokenizer.chat_template) byte for byte as transformers' apply_chat_template
 * does: a jinja2 ImmutableSandboxedEnvironment with trim_blocks=True,
 * lstrip_blocks=True, keep_trailing_newline=False, the loopcontrols extension,
 * the {% generation %} tag, and transformers' globals (raise_exception,
 * strftime_now, namespace, dict) and its tojson filter (ensure_ascii=False).
 *
 * Values follow Python/jinja2 semantics: truthiness, str() of None/True/lists
 * (printed as Python repr), default Undefined (prints "", is falsy, iterates as
 * empty, but an attribute or item of it is an error), immutable lists and
 * dicts (list.append and friends are a sandbox error, as in transformers).
 *
 * Threading: a parsed hearth_tmpl is read-only during rendering, so any number
 * of threads may render the same template at once. hearth_tmpl_set_now is the
 * one mutator; call it before sharing the template. */
#ifndef HEARTH_TEMPLATE_H
#define HEARTH_TEMPLATE_H

#include "hearth.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_tmpl hearth_tmpl;

/* Parse a template. On success *out owns the parsed template (free it with
 * hearth_tmpl_free); the source is copied, the caller keeps `src`. On failure
 * *out is NULL and err names the line and the construct
 * ("template line 12: unknown filter 'foo'"). Returns HEARTH_EFORMAT for a
 * malformed template, HEARTH_ENOMEM when out of memory. */
hearth_status hearth_tmpl_parse(hearth_tmpl **out, const char *src, size_t len, hearth_err *err);

/* Free a template from hearth_tmpl_parse (NULL is fine). */
void hearth_tmpl_free(hearth_tmpl *t);

/* Fix the clock that strftime_now reads: unix_seconds is formatted as UTC.
 * A negative value restores the default, the local time at render. Goldens use
 * this to make templates that print today's date reproducible. */
void hearth_tmpl_set_now(hearth_tmpl *t, int64_t unix_seconds);

/* Render with a context given as a jansson object (its keys become the
 * template's variables; NULL = no variables). On success *out is a malloc'd,
 * NUL-terminated string the caller frees, and *len (if not NULL) its length.
 * On failure *out is NULL and err says what failed and on which template line:
 * a template's raise_exception("msg") gives HEARTH_EINVAL with msg in the
 * message; other runtime errors (an attribute of an undefined value, a type
 * error) give HEARTH_EINVAL too. `context` is only read. */
hearth_status hearth_tmpl_render(const hearth_tmpl *t, const json_t *context, char **out, size_t *len,
                                 hearth_err *err);

/* Chat convenience: builds the context transformers builds for
 * apply_chat_template and renders it.
 *   messages  a JSON array of message objects. As transformers does, keys whose
 *             value is null are dropped, and a message with reasoning under
 *             `reasoning_content`, `thinking` or `reasoning` gets it under
 *             both `thinking` and `reasoning_content`.
 *   tools     a JSON array of tool schemas, or NULL (the template sees
 *             tools = None, as transformers passes it; documents = None too).
 *   add_generation_prompt, bos_token, eos_token (NULL = not defined).
 *   extra     a JSON object of extra kwargs (enable_thinking, ...) merged in
 *             last, so it overrides bos_token/eos_token; may be NULL.
 * Ownership and errors as hearth_tmpl_render. */
hearth_status hearth_tmpl_render_chat(const hearth_tmpl *t, const json_t *messages, const json_t *tools,
                                      int add_generation_prompt, const char *bos_token, const char *eos_token,
                                      const json_t *extra, char **out, size_t *len, hearth_err *err);

#endif
