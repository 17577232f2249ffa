/* api.h - the protocol adapters behind the HTTP server: routes, auth, server
 * state, the OpenAI endpoints (chat completions, completions, responses, embeddings, models), the
 * Anthropic Messages API (messages, count_tokens), plus /health, /stats and
 * /metrics.
 *
 * An adapter turns JSON into a neutral hearth_cpl_request, starts it on the
 * completion seam, and renders the semantic events and the one summary -
 * either as one JSON document or as server-sent events; the two are
 * renderings of the same events. Everything that can reject a request is
 * checked before any header is sent (DESIGN §3).
 *
 * Life cycle: new (state "loading": completions get 503, /health 503) ->
 * set_ready (the model is loaded) -> begin_shutdown (new completions 503,
 * running ones go on) -> cancel_all (running ones end with an error event)
 * -> free once the HTTP server has stopped. */
#ifndef HEARTH_API_H
#define HEARTH_API_H

#include "completion/completion.h"
#include "net/http.h"

typedef struct hearth_api hearth_api;

typedef struct {
    const char *model_id; /* the name /v1/models lists and responses carry */
    const char *api_key;  /* NULL or "": no auth; else the key (Bearer or x-api-key) on every route but /health */
    int runtime_lora;     /* POST /v1/load_lora_adapter and /v1/unload_lora_adapter are served (lora_admin.c) */
} hearth_api_opts;

hearth_status hearth_api_new(hearth_api **out, const hearth_api_opts *o, hearth_err *err);
/* The handler to give hearth_http_start. */
hearth_http_handler hearth_api_handler(hearth_api *a);
/* The model is loaded: serve completions through c (borrowed; outlives the api). */
void hearth_api_set_ready(hearth_api *a, hearth_cpl_ctx *c, hearth_engine *e);
/* Refuse new completions (503); running ones go on. */
void hearth_api_begin_shutdown(hearth_api *a);
/* Completions running now. */
int hearth_api_active(hearth_api *a);
/* Cancel every running completion (they end with an error event). */
void hearth_api_cancel_all(hearth_api *a);
/* After hearth_http_stop. */
void hearth_api_free(hearth_api *a);

#endif
