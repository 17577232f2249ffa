/* api_internal.h - what the adapters in api/ share: the server state, the
 * running-request registry, counters, a growable string, error bodies and
 * the OpenAI request parser. Private to api/. */
#ifndef HEARTH_API_INTERNAL_H
#define HEARTH_API_INTERNAL_H

#include "api/api.h"
#include "core/hist.h"

#include <pthread.h>
#include <stdatomic.h>

enum { API_LOADING = 0, API_READY = 1, API_SHUTTING = 2 };

/* ---- growable string ---- */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} api_buf;
void api_buf_put(api_buf *b, const char *s, size_t n);
void api_buf_puts(api_buf *b, const char *s);
void api_buf_free(api_buf *b);

/* ---- a running completion (streamed or not) ---- */
typedef struct api_job api_job;

/* HTTP statuses counted one by one in /stats and /metrics. */
#define API_N_CODES 12
extern const int API_CODES[API_N_CODES];

struct hearth_api {
    char *model_id, *api_key;
    int runtime_lora; /* hearth_api_opts */
    atomic_int state;
    hearth_cpl_ctx *cpl;
    hearth_engine *engine;
    double t_start;
    pthread_mutex_t mu; /* guards everything below */
    api_job *jobs;      /* running completions */
    int n_jobs;
    long by_code[API_N_CODES + 1]; /* last: any other */
    long n_ok, n_canceled, n_client_gone, n_error, n_rejected;
    long n_stop, n_length; /* n_ok by finish reason (a tool call ends as a stop, as vLLM counts it) */
    long prompt_tokens, completion_tokens, cached_tokens;
    double ttft_sum, gen_s_sum;
    long ttft_n;
    /* vLLM's request histograms (their buckets in server.c): time to first token, each gap between two tokens
     * as the client was sent them, the whole request, and its wait for a slot */
    hearth_hist h_ttft, h_itl, h_e2e, h_queue;
};

/* The model a job runs, as responses name it: its LoRA adapter's name, else the served model's id. */
const char *api_job_model(const api_job *j);

/* A response's id: prefix, then 24 random letters and digits. */
void api_make_id(char *out, size_t cap, const char *prefix);

/* Count a response by status code. */
void api_count_status(hearth_api *a, int status);

/* ---- responses ---- */
/* OpenAI error body {"error":{"message","type","param","code"}}; param/code may be NULL. */
void api_error(hearth_http_response *r, int status, const char *type, const char *param, const char *code,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A JSON body (steals v). */
void api_json(hearth_http_response *r, int status, json_t *v);
/* The status and body for a refused start. */
void api_cpl_error(hearth_api *a, hearth_http_response *r, const hearth_cpl_error *e);

/* ---- requests ---- */
typedef struct {
    int stream, include_usage, continuous_usage; /* continuous_usage: each chunk carries its choice's usage so far */
    int n;                      /* choices (chat and text completions), 0 = 1 */
    const json_t *prompts;      /* text completions: a batch of prompts (strings or arrays of ids; borrowed from
                                   the body, read while the request starts), or NULL for one: n choices each */
    int logprobs, top_logprobs; /* as the request gave them (0 = none) */
    int prompt_logprobs;        /* vLLM's: 1 + the alternatives a prompt token's record lists; 0 = not asked */
    json_t *echo;               /* Responses: request fields the response repeats (owned), or NULL */
} api_req_opts;

/* Most choices (n, times the prompts of a batch) a chat or text completion
 * asks for: each is a sequence of its own. */
#define API_MAX_CHOICES 64

/* Parse an OpenAI chat / text completion body, or an Anthropic messages
 * body, into r (initialised by the caller). 0 on success; else 1 and e names
 * the field (status EINVAL or ENOTSUP). count_only: /v1/messages/count_tokens
 * (max_tokens is not required). */
int api_parse_chat(const json_t *body, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e);
int api_parse_text(const json_t *body, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e);
int api_parse_messages(const json_t *body, int count_only, hearth_cpl_request *r, api_req_opts *o,
                       hearth_cpl_error *e);
int api_parse_responses(const json_t *body, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e);

/* The parsers' pieces (openai_request.c). Each returns 1 with e filled when
 * the field is wrong, else 0; a null value counts as absent. */
int api_fail(hearth_cpl_error *e, hearth_status st, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *api_type_name(const json_t *v); /* "an object", "a string", ... */
json_t *api_field(const json_t *o, const char *k); /* NULL when absent or null */
int api_get_number(const json_t *b, const char *k, double lo, double hi, int *has, float *out, hearth_cpl_error *e);
int api_get_int(const json_t *b, const char *k, long long lo, long long hi, int *has, long long *out,
                hearth_cpl_error *e);
int api_get_bool(const json_t *b, const char *k, int *out, hearth_cpl_error *e);
/* An array of min..max token ids (non-negative integers) appended to out[*n] (room for max); 1 (e filled, naming
 * field k) when it is not one. */
int api_token_ids(const json_t *v, const char *k, size_t min, size_t max, int32_t *out, int *n,
                  hearth_cpl_error *e);
char *api_dup_str(const char *s, size_t n); /* NUL-terminated copy, or NULL */
/* The body is an object, and its model a string if given (any name is served: a LoRA adapter's runs it,
 * another the base model); with r, r->model takes it. */
int api_check_body(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e);
int api_parse_stops(const json_t *stop, const char *param, hearth_cpl_request *r, hearth_cpl_error *e);
/* llama-server's sampling fields (repeat_penalty, repeat_last_n, typical_p, top_n_sigma, xtc_*, dry_*, dynatemp_*,
 * mirostat*) into r (llama_sampling.c). */
int api_parse_llama_sampling(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e);
int api_parse_llama_samplers(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e);
/* vLLM's allowed_token_ids, bad_words, include_stop_str_in_output, skip_special_tokens,
 * spaces_between_special_tokens and truncate_prompt_tokens into r (vllm_fields.c). */
int api_parse_vllm_fields(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e);
/* Of those, the two that requests for embeddings and scores take as well: truncate_prompt_tokens and priority. */
int api_parse_pooling_fields(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e);
void api_name_tool_result(const json_t *messages, json_t *tool_msg);
/* tool_choice that forces a call (name: that tool; NULL: any of r->tools,
 * set already): the answer is constrained to one call in the whole-output
 * JSON form that the tool-call parser reads (completion/toolcall.h),
 * {"name": ..., "arguments": {...}}, the arguments by the tool's parameters'
 * schema when one tool can be called, any object otherwise. */
int api_force_tool(hearth_cpl_request *r, const char *name, hearth_cpl_error *e);
/* A structured-output format {type: text | json_object | json_schema}; the
 * schema is holder's "schema" (OpenAI nests it in json_schema, the Responses
 * and Anthropic APIs do not). param names the field in errors. */
int api_parse_format(const json_t *fmt, const char *param, const json_t *holder, hearth_cpl_request *r,
                     hearth_cpl_error *e);
/* A function tool, its fields checked, appended to fns in the chat format's
 * shape ({type: function, function: {name, description, parameters}}). */
int api_add_function_tool(json_t *fns, size_t i, const json_t *name, const json_t *desc, const json_t *params,
                          hearth_cpl_error *e);
/* r offers the tools fns (stolen) to the model, unless none or empty. */
void api_offer_tools(hearth_cpl_request *r, json_t *fns, int none);

/* ---- jobs ---- */
typedef struct api_proto api_proto;

struct api_job {
    hearth_api *a;
    hearth_cpl *q;
    hearth_http_conn *conn;
    const api_proto *proto;
    api_req_opts o;
    char id[48];
    long created;
    /* non-streamed: the accumulated answer */
    api_buf content, reasoning;
    json_t *tool_calls;
    /* streamed */
    api_buf out;       /* the SSE bytes of the current step */
    int phase;      /* 0 = nothing sent, 1 = streaming, 2 = over */
    int lp_sent;    /* logprob records already sent */
    int echo_sent;  /* the proto's echo_chunk went out */
    int index;      /* the choice it renders (n > 1) */
    int over;       /* its completion ended (n > 1: each choice's own) */
    api_job **kids; /* n > 1: the choices after the first, each a job of its own (this one is choice 0) */
    int n_kids;
    long text_off;  /* bytes of text sent (legacy logprobs text_offset) */
    json_t *chunks; /* the chunks of the current step */
    int blk_kind;   /* Anthropic, Responses: the open content block's / output item's event kind, or -1 */
    int n_blk;      /* Anthropic, Responses: blocks / items closed so far (the open one's index) */
    int seq;        /* Responses: the next event's sequence_number */
    json_t *output; /* Responses: the output items done so far */
    json_t *echo;   /* Responses: request fields the response repeats */
    hearth_hist itl; /* its inter-token gaps (hearth_cpl_track_itl), into the server's at its end */
    api_job *prev, *next;
};

/* What differs between /v1/chat/completions, /v1/completions and /v1/messages. */
struct api_proto {
    const char *chunk_object, *id_prefix;
    /* the request body into r (api_parse_chat, ...) */
    int (*parse)(const json_t *body, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e);
    /* streamed as typed events (Anthropic, Responses), into j->out: the
     * first events (before any token), each semantic event, and the last
     * ones once the summary is settled; the bytes of a keep-alive. NULL for
     * OpenAI chunks through the hooks below. */
    void (*ev_start)(api_job *j);
    hearth_cpl_event_fn ev_event;
    void (*ev_end)(api_job *j);
    const char *ev_idle;
    /* streamed: turn an event into a chunk appended to j->chunks */
    void (*chunk_event)(api_job *j, const hearth_cpl_event *ev);
    /* streamed: the first chunk (chat: the role), or NULL */
    json_t *(*first_chunk)(api_job *j);
    /* streamed: attach logprob records [from, to) to chunk c */
    void (*chunk_logprobs)(api_job *j, json_t *c, int from, int to);
    /* streamed: a chunk with an empty delta/text (to carry logprobs or the finish reason) */
    json_t *(*empty_chunk)(api_job *j);
    /* streamed: set the finish reason on a chunk */
    void (*chunk_finish)(api_job *j, json_t *c, const char *finish);
    /* streamed, or NULL: a chunk that goes before this step's others, once (the echoed prompt), or NULL while
     * it is not ready; over: the completion ended */
    json_t *(*echo_chunk)(api_job *j, int over);
    /* the whole response (non-streamed) */
    json_t *(*full)(api_job *j);
};

/* Start the completion of r (already parsed) and answer: the whole JSON, or
 * a stream. Counts and registers the job. */
void api_run(hearth_api *a, const hearth_http_request *rq, const api_proto *p, hearth_cpl_request *r,
             const api_req_opts *o, hearth_http_response *resp);

/* Pieces the renderers share. */
json_t *api_usage(const hearth_cpl_summary *s);
json_t *api_chunk_base(api_job *j); /* {"id","object","created","model"} */
/* Text of token id for logprob reports, and its UTF-8 bytes as a JSON array. */
json_t *api_token_string(api_job *j, int32_t id);
/* vLLM's prompt_logprobs of the job's prompt: [null, {"<id>": {logprob, rank, decoded_token}, ...}, ...] (the
 * prompt token, then its alternatives), or NULL when the request did not ask. */
json_t *api_prompt_logprobs(api_job *j);
json_t *api_token_bytes(json_t *token_string);

/* A server-sent event into out: "event: <event>" (when not NULL) and the data line. */
void api_sse_put(api_buf *out, const char *event, const json_t *v);
/* net's liveness probe for hearth_cpl_step (conn: a hearth_http_conn). */
int api_conn_gone(void *conn);

extern const api_proto API_CHAT, API_TEXT, API_MESSAGES, API_RESPONSES, API_LLAMA, API_INFILL;
/* llama-server's GET /props (admin.c) and POST /apply-template (tokenize.c). */
void api_props(hearth_api *a, hearth_http_response *r);
void api_apply_template(hearth_api *a, const json_t *body, hearth_http_response *r);
/* llama-server's /completion body (llama_completion.c), rewritten as a text request. */
int api_parse_llama_completion(const json_t *b, hearth_cpl_request *r, api_req_opts *o, hearth_cpl_error *e);

/* anthropic_messages.c */
/* Rewrite an OpenAI-shaped error response as Anthropic's
 * {"type":"error","error":{"type","message"}}; other responses are left alone. */
void api_anthropic_error(hearth_http_response *r);
/* POST /v1/messages/count_tokens. */
void api_count_tokens(hearth_api *a, const json_t *body, hearth_http_response *r);

/* embeddings.c: POST /v1/embeddings */
/* native: llama-server's /embedding (its fields and answer's shape) rather than OpenAI's /v1/embeddings */
void api_embeddings(hearth_api *a, const hearth_http_request *rq, const json_t *body, hearth_http_response *r,
                    int native);
/* The embeddings of n requests (each a prompt or ids, set by the caller) run as one batch: each takes like's model
 * (an adapter's name selects it), truncate_prompt and priority, and is deinit'd here. On success (0) vecs[i] is
 * malloc'd with *dim floats (normalized as hearth_seq_embedding's norm says), tokens[i] its prompt's count, and
 * model_out (HEARTH_ADAPTER_NAME_MAX bytes, or NULL) the name of what answered; else 1, e says why, vecs[] NULL. */
int api_embed_batch(hearth_api *a, const hearth_http_request *rq, hearth_cpl_request *reqs, size_t n,
                    const hearth_cpl_request *like, int norm, float **vecs, int *dim, int *tokens, char *model_out,
                    hearth_cpl_error *e);

/* score.c: vLLM's POST /score (alias /v1/score) and the rerank routes (vLLM's /rerank, /v1/rerank, /v2/rerank:
 * Jina's and Cohere's shape; llama-server's /reranking, /v1/reranking), scored by the cosine of the texts'
 * embeddings, as vLLM scores with an embedding model. */
void api_score(hearth_api *a, const hearth_http_request *rq, const json_t *body, hearth_http_response *r);
void api_rerank(hearth_api *a, const hearth_http_request *rq, const json_t *body, hearth_http_response *r);

/* tokenize.c: POST /tokenize and /detokenize (vLLM's and llama-server's shapes) */
void api_tokenize(hearth_api *a, const json_t *body, hearth_http_response *r);
void api_detokenize(hearth_api *a, const json_t *body, hearth_http_response *r);

/* web_page.c: the chat page */
void api_web_page(hearth_http_response *r);

/* admin.c */
void api_health(hearth_api *a, hearth_http_response *r);
void api_models(hearth_api *a, const char *path, hearth_http_response *r);
void api_stats(hearth_api *a, hearth_http_response *r);
/* POST /admin/cache/flush: the prefix cache's blocks written to its disk tier and fsynced; 200 only then. */
void api_cache_flush(hearth_api *a, hearth_http_response *r);
void api_pause(hearth_api *a, const hearth_http_request *rq, hearth_http_response *r, int pause);
/* POST /v1/load_lora_adapter and /v1/unload_lora_adapter (lora_admin.c) */
void api_lora_load(hearth_api *a, json_t *body, hearth_http_response *r);
void api_lora_unload(hearth_api *a, json_t *body, hearth_http_response *r);
void api_is_paused(hearth_api *a, hearth_http_response *r);
void api_slots(hearth_api *a, const hearth_http_request *rq, hearth_http_response *r);
void api_metrics(hearth_api *a, hearth_http_response *r);

#endif
