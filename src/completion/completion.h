/* completion.h - the completion seam (DESIGN §1): prepare -> execute -> sink
 * -> one terminal summary. Protocol adapters (api/) turn JSON into a neutral
 * hearth_cpl_request, call hearth_cpl_start, pull semantic events with
 * hearth_cpl_step, and render the one hearth_cpl_summary; they never see
 * token ids, the template or the engine.
 *
 *   prepare (inside hearth_cpl_start): resolve settings (request > server
 *     flag > model defaults > built-in), render the chat template, tokenize,
 *     check the context, build the sink, submit to the engine. Everything
 *     that can reject a request happens here, before any HTTP header.
 *   execute (hearth_cpl_step): pull token events from the engine's bounded
 *     per-request queue (a consumer that stops pulling pauses the sequence),
 *     cancel when the client is gone.
 *   sink: detokenize, stop strings, reasoning split, tool calls (sink.h).
 *   summary: finish reason and usage, settled once.
 *
 * Threads: a hearth_cpl_ctx is shared by all request threads (read-only after
 * creation). A hearth_cpl belongs to the thread that started it, except
 * hearth_cpl_cancel, which any thread may call. */
#ifndef HEARTH_COMPLETION_H
#define HEARTH_COMPLETION_H

#include "completion/adapters.h"
#include "core/hist.h"
#include "completion/infill.h"
#include "completion/sink.h"
#include "engine/engine.h"
#include "io/model_config.h"

#include <jansson.h>

/* Settings that resolve by precedence; each has a has_ flag. */
typedef struct hearth_cpl_params {
    int has_temperature, has_top_p, has_top_k, has_min_p, has_repetition_penalty, has_presence_penalty,
        has_frequency_penalty, has_max_tokens, has_seed;
    float temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
    int top_k, max_tokens;
    uint64_t seed;
    /* llama.cpp's samplers (engine/sampler.h); the windows: -1 = the whole context, 0 = off */
    int has_repeat_last_n, has_typical_p, has_top_n_sigma, has_xtc_probability, has_xtc_threshold,
        has_dry_multiplier, has_dry_base, has_dry_allowed_length, has_dry_penalty_last_n, has_dynatemp_range,
        has_dynatemp_exponent, has_mirostat, has_mirostat_tau, has_mirostat_eta;
    int repeat_last_n, dry_allowed_length, dry_penalty_last_n, mirostat;
    float typical_p, top_n_sigma, xtc_probability, xtc_threshold, dry_multiplier, dry_base, dynatemp_range,
        dynatemp_exponent, mirostat_tau, mirostat_eta;
} hearth_cpl_params;

/* Take every field `over` sets; keep the rest of `base`. */
void hearth_cpl_params_overlay(hearth_cpl_params *base, const hearth_cpl_params *over);
/* The model layer from generation_config.json (do_sample=false = greedy). */
void hearth_cpl_params_from_gen(hearth_cpl_params *p, const hearth_gen_defaults *g);

/* A neutral request: what an adapter hands to prepare. It owns its members
 * (hearth_cpl_request_deinit frees them). */
typedef struct {
    int chat;                /* 1: messages through the chat template; 0: a raw prompt */
    json_t *messages;        /* chat: array in the transformers chat format (content a string or null,
                                tool_calls[].function.arguments an object) */
    json_t *tools;           /* chat: array of tool schemas, or NULL */
    int parse_tools;         /* look for tool calls in the output */
    json_t *template_kwargs; /* extra template variables (enable_thinking, ...), or NULL */
    char *prompt;            /* text: the prompt (NUL-terminated), or NULL when prompt_ids */
    int32_t *prompt_ids;     /* text: the prompt as token ids */
    int n_prompt_ids;
    const char *prompt_field; /* the request field that holds the prompt, for errors */
    hearth_cpl_params p;
    char *stop[HEARTH_STOP_MAX];
    int n_stop;
    hearth_logit_bias *bias;
    int n_bias;
    int logprobs;     /* record each token's logprob */
    int top_logprobs; /* and the N most likely alternatives (0..HEARTH_MAX_TOP_LOGPROBS) */
    int ignore_eos;   /* do not stop at end-of-generation ids */
    int32_t stop_token_ids[HEARTH_STOP_MAX]; /* ids that end the answer too, not shown (vLLM's stop_token_ids) */
    int n_stop_token_ids;
    int min_tokens;   /* end-of-generation and stop ids cannot come before this many tokens (vLLM's) */
    int prompt_logprobs; /* vLLM's: each prompt token's logprob and this many alternatives
                            (hearth_cpl_prompt_logprobs); -1 = not asked */
    int echo;         /* text: the prompt comes back before the answer (hearth_cpl_echo), with each prompt
                         token's logprob when logprobs are asked for; max_tokens 0 then asks for the prompt's
                         alone */
    int no_special;   /* text: without the special tokens the tokenizer adds (BOS, ...) */
    int embed;        /* an embedding, not text: the prompt's last hidden state (hearth_cpl_embedding) */
    int json_object;  /* JSON mode: the output is one JSON object (completion/json_mode.h) */
    json_t *json_schema;      /* or one object this JSON Schema accepts (owned), or NULL */
    char *grammar;            /* or text that this GBNF grammar accepts (owned; completion/grammar.h), or NULL */
    const char *format_field; /* the request field that asked for one of the three, for errors */
    int continue_final; /* chat: the last message is the assistant's start of its answer (a prefill): the
                           prompt ends inside it, with no generation prompt, and the output continues it */
    int32_t *allowed_ids;     /* vLLM's allowed_token_ids (owned), or NULL */
    int n_allowed;
    char **bad_words;         /* vLLM's bad_words (owned strings) */
    int n_bad_words;
    int include_stop;         /* vLLM's include_stop_str_in_output: a matched stop string ends the output */
    int keep_special;         /* vLLM's skip_special_tokens false: special tokens' text is output */
    int truncate_prompt;      /* vLLM's truncate_prompt_tokens: keep the prompt's last N tokens (-1: the context) */
    int priority;             /* vLLM's priority: lower is admitted sooner (only with priority scheduling) */
    char *cache_salt;         /* vLLM's cache_salt (owned), or NULL: the prefix cache shares this request's blocks
                                 only with requests of the same salt (tenants cannot time each other's prompts) */
    int repeat_penalty_llama; /* the repetition penalty came as llama-server's repeat_penalty: its window is the
                                 last 64 tokens unless repeat_last_n (the request's or the server's) says */
    char **dry_breakers; /* DRY's sequence breakers (owned strings), or NULL: llama.cpp's "\n", ":", "\"", "*" */
    int n_dry_breakers;
    char *model;        /* the request's model name (owned), or NULL: a LoRA adapter's name runs that adapter,
                           any other the base model (hearth_cpl_model says which ran) */
    int prompt_only;    /* with max_tokens 0: compute the prompt alone, into the prefix cache, and answer
                           nothing (llama-server's n_predict 0; echo does it too) */
    int infill_sampler; /* llama.cpp's infill sampler after the other filters (engine/sampler.h) */
    int n_indent;       /* llama-server's: a line after the first newline whose indentation is less than this
                           many spaces and tabs ends the text before that line's first character (0 = off) */
    int t_max_predict_ms; /* llama-server's: once this long has passed since the first token, a newline ends
                             the text (0 = off). Both end it as max_tokens would ("length") */
    hearth_cpl_infill *infill; /* text: fill in the middle (owned), or NULL: the prompt is laid out around
                                  `prompt` (special tokens in it parsed, none added) as infill.h says, the
                                  model's FIM pad, repo and file-separator tokens end the answer too, and
                                  hearth_cpl_infill_text gives the whole prompt's text */
} hearth_cpl_request;

void hearth_cpl_request_init(hearth_cpl_request *r);
void hearth_cpl_request_deinit(hearth_cpl_request *r);

/* Why a request was refused before generation. `status` says the class:
 * EINVAL / ERANGE / ENOTSUP = the request is at fault (400), EBUSY = queue
 * full (429; 503 when shutting), ENOMEM / EIO = the server (500/503). */
typedef struct {
    hearth_status status;
    char param[64]; /* the request field at fault, or "" */
    char code[48];  /* a machine-readable code ("context_length_exceeded"), or "" */
    char msg[512];
} hearth_cpl_error;

typedef struct hearth_cpl_ctx hearth_cpl_ctx;

typedef struct {
    hearth_engine *engine;             /* borrowed; outlives the context */
    const hearth_tokenizer *tok;       /* borrowed */
    const hearth_model_config *cfg;    /* borrowed (eos ids, vocabulary size) */
    int ctx;                           /* context length */
    const char *chat_template;         /* template source (copied) or NULL = chat unavailable */
    size_t chat_template_len;
    hearth_cpl_params flags;           /* the server's flags */
    hearth_cpl_params model_defaults;  /* generation_config.json */
    const char *const *adapters;       /* the engine's LoRA adapters' names, copied */
    const int *adapter_ids;            /* their ids (NULL: 1..n_adapters) */
    int n_adapters;
    int spm_infill;                    /* infill prompts put the suffix first (llama-server's --spm-infill) */
    int priority_scheduling;           /* requests may carry a priority (vLLM's --scheduling-policy priority) */
} hearth_cpl_ctx_opts;

/* Parse the template, collect the end-of-generation ids. EFORMAT names the
 * template line at fault. */
hearth_status hearth_cpl_ctx_new(hearth_cpl_ctx **out, const hearth_cpl_ctx_opts *o, hearth_err *err);
void hearth_cpl_ctx_free(hearth_cpl_ctx *c);
int hearth_cpl_ctx_has_chat(const hearth_cpl_ctx *c);
/* The LoRA adapters that a request's model name selects (the server's admin routes load and unload them). */
hearth_adapter_names *hearth_cpl_adapters(hearth_cpl_ctx *c);
const hearth_tokenizer *hearth_cpl_ctx_tok(const hearth_cpl_ctx *c);

typedef enum {
    HEARTH_CPL_FINISH_STOP = 0,
    HEARTH_CPL_FINISH_LENGTH,
    HEARTH_CPL_FINISH_TOOL_CALLS,
    HEARTH_CPL_FINISH_CANCELED, /* the client left, or the server is stopping */
    HEARTH_CPL_FINISH_ERROR,    /* the engine failed after the start; see error */
} hearth_cpl_finish;

/* "stop", "length", "tool_calls", "cancelled", "error" */
const char *hearth_cpl_finish_name(hearth_cpl_finish f);

/* The one terminal result. */
typedef struct {
    hearth_cpl_finish finish;
    int prompt_tokens;     /* tokens of the rendered prompt */
    int completion_tokens; /* tokens generated up to the end (an end-of-generation id counts); so far, while it runs */
    int cached_tokens;     /* prompt tokens served from the prefix cache */
    int client_gone;       /* CANCELED because the client disconnected */
    const char *stop_sequence; /* STOP by a stop string: which one (owned by the completion); else NULL */
    double queue_s, ttft_s, total_s; /* ttft: start -> first token pulled */
    char error[256];
} hearth_cpl_summary;

typedef struct hearth_cpl hearth_cpl;

/* Prepare and submit. On HEARTH_OK *out is the running completion (free it
 * with hearth_cpl_free); the request is only read. On failure *out is NULL and
 * e says why (nothing was started). */
hearth_status hearth_cpl_start(hearth_cpl_ctx *c, const hearth_cpl_request *r, hearth_cpl **out,
                               hearth_cpl_error *e);
/* The name of the LoRA adapter the completion runs with, NULL for the base model. */
const char *hearth_cpl_model(const hearth_cpl *q);
/* Observe into h (the caller's; it must outlive q) each gap between two of q's tokens as hearth_cpl_step pulls
 * them: the inter-token latency the client sees. */
void hearth_cpl_track_itl(hearth_cpl *q, hearth_hist *h);

/* Client-liveness probe: non-zero when the client has gone. */
typedef int (*hearth_cpl_gone_fn)(void *ctx);

/* hearth_cpl_step returns, with no event, after this many seconds without a
 * token, so that a stream can send a keep-alive (SSE comment). */
#define HEARTH_CPL_IDLE_RETURN_S 5.0

/* Execute: wait for the next tokens (polling gone() while waiting, when
 * given), run them through the sink, and deliver the events to fn. Returns 1
 * while the completion goes on (possibly with no event, after
 * HEARTH_CPL_IDLE_RETURN_S without a token), 0 once it is over (the summary
 * is settled; later calls return 0 at once). */
int hearth_cpl_step(hearth_cpl *q, hearth_cpl_event_fn fn, void *user, hearth_cpl_gone_fn gone, void *gone_ctx);

/* Prepare without starting: the prompt tokens r renders to (its template
 * and tokenizer, as hearth_cpl_start would), into *ids (malloc'd; the caller
 * frees it) and *n. Errors as there. */
hearth_status hearth_cpl_tokenize(hearth_cpl_ctx *c, const hearth_cpl_request *r, int32_t **ids, int *n,
                                  hearth_cpl_error *e);
/* The context length: the most tokens a sequence holds. */
int hearth_cpl_ctx_len(const hearth_cpl_ctx *c);
/* A chat request's prompt as its template renders it (*out malloc'd, NUL-terminated; *len without the NUL). */
hearth_status hearth_cpl_render(hearth_cpl_ctx *c, const hearth_cpl_request *r, char **out, size_t *len,
                                hearth_cpl_error *e);
/* The chat template's source (NULL: none) and the settings a request starts from (built-in < model < flags). */
const char *hearth_cpl_chat_template(const hearth_cpl_ctx *c);
const char *hearth_cpl_bos_text(const hearth_cpl_ctx *c); /* the BOS / EOS tokens' text, or NULL */
const char *hearth_cpl_eos_text(const hearth_cpl_ctx *c);
const hearth_cpl_params *hearth_cpl_defaults(const hearth_cpl_ctx *c);

/* embed: once the completion is over (hearth_cpl_step returned 0), the
 * embedding - the final-normed hidden state of the prompt's last token
 * (last-token pooling), normalized as hearth_seq_embedding's norm says (2: L2)
 * - in [*dim] floats owned by q until the next call; NULL if the completion
 * failed. */
const float *hearth_cpl_embedding(hearth_cpl *q, int norm, int *dim);

/* echo: the prompt's text (the request's string, or its ids decoded), and,
 * once the engine has computed the whole prompt, its tokens' records with
 * logprobs ([0] without one: logprob NAN), *n = the prompt's
 * tokens; lp NULL when logprobs were not asked for or the prompt was never
 * computed. Returns the text, NULL without echo. */
const char *hearth_cpl_echo(const hearth_cpl *q, size_t *text_len, const hearth_logprobs **lp, int *n);
/* An infill request's whole prompt as laid out (infill.h), as text with its special tokens; NULL for others. */
const char *hearth_cpl_infill_text(const hearth_cpl *q, size_t *len);

/* Logprob records of the tokens pulled so far (end ids excluded), in order;
 * NULL/0 when the request did not ask for logprobs. */
const hearth_logprobs *hearth_cpl_logprobs(const hearth_cpl *q, int *n);
/* prompt_logprobs: a record for each prompt token (the first's logprob NaN: nothing before it scores it),
 * with its rank; NULL (and *n 0) when not asked or not yet computed. */
const hearth_logprobs *hearth_cpl_prompt_logprobs(const hearth_cpl *q, int *n);
const hearth_cpl_summary *hearth_cpl_summary_get(const hearth_cpl *q);
const hearth_cpl_ctx *hearth_cpl_context(const hearth_cpl *q);
/* Ask it to stop (any thread); the next step settles it as CANCELED. */
void hearth_cpl_cancel(hearth_cpl *q);
/* Release (cancels if still running). */
void hearth_cpl_free(hearth_cpl *q);

#endif
