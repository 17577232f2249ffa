/* sink.h - from generated token ids to semantic events.
 *
 * The pipeline, per token: incremental detokenization (never broken UTF-8)
 * -> stop strings with hold-back -> reasoning split (<think>) -> tool-call
 * parsing -> events (content, reasoning, tool_call). End-of-generation ids
 * are not text: they end the stream and are never decoded. Pieces that are
 * still undecided are held back; hearth_sink_finish releases them.
 *
 * Memory: everything is allocated by hearth_sink_init (the tool-call capture
 * may grow while a call is captured); feeding a token allocates nothing.
 * One sink per generation stream; it runs on the consumer's thread. */
#ifndef HEARTH_COMPLETION_SINK_H
#define HEARTH_COMPLETION_SINK_H

#include "completion/reasoning.h"
#include "completion/stop.h"
#include "completion/toolcall.h"
#include "tok/tok.h"

#include <stdint.h>

typedef enum { HEARTH_CPL_CONTENT = 0, HEARTH_CPL_REASONING = 1, HEARTH_CPL_TOOL_CALL = 2 } hearth_cpl_event_kind;

/* One semantic event. Strings are valid during the callback only. */
typedef struct {
    hearth_cpl_event_kind kind;
    const char *text; /* CONTENT, REASONING: the new text (not NUL-terminated) */
    size_t len;
    int index;             /* TOOL_CALL: 0, 1, ... in order */
    const char *id;        /* TOOL_CALL: "call_..." */
    const char *name;      /* TOOL_CALL: function name */
    const char *arguments; /* TOOL_CALL: JSON object text */
} hearth_cpl_event;

typedef void (*hearth_cpl_event_fn)(void *user, const hearth_cpl_event *ev);

typedef struct {
    const hearth_tokenizer *tok;
    hearth_detok detok;
    hearth_stop stop;
    hearth_reasoning rsn;
    hearth_toolcall tc;
    const int32_t *end_ids; /* ids that end the stream (not text) */
    int n_end;
    char *dbuf;  /* [HEARTH_DETOK_MAX_OUT] detokenizer output */
    char *sbuf;  /* [stop out cap] released by the stop matcher */
    int stopped; /* a stop string matched: the stream is over */
    /* llama-server's line rules for code completion (hearth_cpl_request's n_indent, t_max_predict_ms), set
     * after init; 0 = off. limited: one of them ended the stream (a length end, not a stop) */
    int n_indent;
    double t_max_s;
    double t_first;
    int seen_nl, line_ws, line_text, limited;
    int include_stop; /* the matched stop string is output too (vLLM's include_stop_str_in_output) */
    int n_tool_calls;
    uint64_t call_seed; /* for tool-call ids */
    hearth_cpl_event_fn fn;
    void *user;
} hearth_sink;

/* stops: the request's stop strings; end_ids: borrowed, must outlive the
 * sink; reasoning: split <think> (in_reasoning: the prompt opened it);
 * tools: parse tool calls. EINVAL names a bad stop string. */
hearth_status hearth_sink_init(hearth_sink *s, const hearth_tokenizer *tok, const char *const *stops, int n_stops,
                               const int32_t *end_ids, int n_end, int reasoning, int in_reasoning, int tools,
                               hearth_err *err);
void hearth_sink_deinit(hearth_sink *s);

/* Feed one generated id; events go to fn. Returns 1 when the stream is over
 * (a stop string matched or an end id came): the caller stops generating. */
int hearth_sink_push(hearth_sink *s, int32_t id, hearth_cpl_event_fn fn, void *user);
/* End of stream: release what is held. */
void hearth_sink_finish(hearth_sink *s, hearth_cpl_event_fn fn, void *user);

/* Text of one token alone (special tokens included) into out[cap], NUL-
 * terminated; returns its length. For logprob reports. */
size_t hearth_sink_token_text(const hearth_tokenizer *tok, int32_t id, char *out, size_t cap);

#endif
