/* hearth.h - the public C API of hearth: load a model and generate with it,
 * embedded in another program, without HTTP.
 *
 * Threading: unless a function says otherwise, an object may be used by one
 * thread at a time. Ownership: `_new` returns an object the caller frees with
 * the matching `_free`; strings returned as `const char *` stay owned by the
 * object they came from. */
#ifndef HEARTH_H
#define HEARTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEARTH_VERSION "0.1.0"

/* Status codes. They grow at the end only. */
typedef enum hearth_status {
    HEARTH_OK = 0,
    HEARTH_EINVAL,    /* a bad argument or request field */
    HEARTH_ENOMEM,    /* out of memory (host or device) */
    HEARTH_EIO,       /* a read or write failed */
    HEARTH_EFORMAT,   /* a file or document is malformed */
    HEARTH_ENOTSUP,   /* valid, but not supported by this build or model */
    HEARTH_ENOENT,    /* a file, tensor or key is missing */
    HEARTH_ERANGE,    /* a value outside its allowed range (context length, ids) */
    HEARTH_EBUSY,     /* a queue or pool is at capacity */
    HEARTH_ECANCELED, /* the caller canceled the operation */
} hearth_status;

/* Filled by fallible functions: the status again and a message that names the
 * thing at fault. Caller-owned storage; zero-initialise before use. */
typedef struct hearth_err {
    hearth_status status;
    char msg[512];
} hearth_err;

/* A static, human-readable name for a status code. */
const char *hearth_status_name(hearth_status st);

/* The library version string (HEARTH_VERSION). */
const char *hearth_version(void);

/* ---- a loaded model with its engine ----
 *
 *   hearth_open_opts o = {.model = "SmolLM2-135M-Instruct.Q4_1.gguf"};
 *   hearth *h; hearth_err err = {0};
 *   if (hearth_open(&h, &o, &err)) { fprintf(stderr, "%s\n", err.msg); ... }
 *   hearth_gen_opts g; hearth_gen_opts_default(&g); g.temperature = 0;
 *   hearth_generate_text(h, "The capital of France is", &g, print_piece, NULL, &res, &err);
 *   hearth_close(h);
 */
typedef struct hearth hearth;

typedef struct {
    const char *model;  /* a GGUF file or a Hugging Face model directory */
    const char *device; /* "cpu", "cuda", "cuda:N"; NULL = cpu */
    int threads;        /* CPU threads; 0 = one per core */
    int ctx;            /* context length; 0 = the model's, at most 4096 */
    int parallel;       /* sequences generated at once (continuous batching); 0 = 4 */
    int spec_ngram;     /* speculative decoding by prompt lookup: up to this many drafted tokens checked behind each
                           token (the output is unchanged; `hearth serve --spec-ngram`); 0 = off */
} hearth_open_opts;

/* Load the model, its tokenizer and start its engine thread. *out is freed
 * with hearth_close. Errors name the file and what is wrong with it. */
hearth_status hearth_open(hearth **out, const hearth_open_opts *o, hearth_err *err);
/* Cancel what is running, stop the engine, free everything. */
void hearth_close(hearth *h);

typedef struct {
    int max_tokens;      /* default 128 */
    float temperature;   /* default 0.8; 0 = greedy */
    float top_p, min_p;  /* defaults 1 and 0 (off) */
    int top_k;           /* default 0 (off) */
    float repetition_penalty, presence_penalty, frequency_penalty; /* defaults 1, 0, 0 */
    uint64_t seed;
    int has_seed;        /* 0: a fresh seed per call */
    int ignore_eos;      /* 1: do not stop at end-of-generation tokens */
    int add_special;     /* 1 (default): add the model's bos as its tokenizer says */
    int json;            /* 1: the output is one JSON object (JSON mode) */
    const char *json_schema; /* or one object this JSON Schema (its JSON text) accepts; NULL = none. The
                                subset and the refusals of the server's response_format. */
} hearth_gen_opts;

void hearth_gen_opts_default(hearth_gen_opts *g);

/* Receives decoded text as it is generated (always whole UTF-8 characters).
 * Return non-zero to stop generating. */
typedef int (*hearth_piece_fn)(void *user, const char *text, size_t len);

typedef struct {
    int prompt_tokens, completion_tokens, cached_tokens;
    const char *finish_reason; /* "stop", "length", "canceled" (static string) */
    double ttft_s;             /* submit to first token */
    double decode_tok_s;       /* tokens per second after the first */
} hearth_gen_result;

/* Generate a continuation of a raw prompt (no chat template). Any number of
 * threads may call this at once on one hearth: the engine batches them. */
hearth_status hearth_generate_text(hearth *h, const char *prompt, const hearth_gen_opts *g, hearth_piece_fn fn,
                                   void *user, hearth_gen_result *res, hearth_err *err);

/* An embedding of text: the final-normed hidden state of its last token
 * (last-token pooling), L2-normalized, into out[cap]; *dim is the model's
 * hidden size (ERANGE, with *dim set, when cap is smaller). Batched with
 * whatever else runs, with the same bits as alone. */
hearth_status hearth_embed(hearth *h, const char *text, float *out, int cap, int *dim, hearth_err *err);

#ifdef __cplusplus
}
#endif

#endif
