/* session.h - what the library API and the verbs share: pick a backend, load the
 * model and its tokenizer, size the KV cache. */
#ifndef HEARTH_LIB_SESSION_H
#define HEARTH_LIB_SESSION_H

#include "engine/kv.h"
#include "model/model.h"
#include "tok/tok.h"

typedef struct {
    const char *model_path;
    const char *device;  /* "cpu", "cuda", "cuda:N"; NULL = cuda when present, else cpu */
    int threads;         /* CPU threads, 0 = one per core */
    int ctx;             /* context length, 0 = min(model's, 4096) */
    int max_tokens;      /* rows per forward (prefill chunk / batch), 0 = 512 on the CPU, 8192 on a GPU of
                          * 70+ GiB, 2048 on a smaller one */
    int n_slots;         /* sequence slots, 0 = the device's default (4 on the CPU, 256 on a GPU) */
    int need_tokenizer;  /* fail if the model has none */
    double kv_budget_mib; /* KV pool size; 0 = room for n_slots full contexts + cache headroom */
    const char *kv_type;  /* "f32", "f16" or "fp8" (= "e4m3"); NULL = f16 (as llama.cpp) */
    const char *const *lora; /* LoRA adapters, "NAME=DIR" or "DIR" (named after its last component): ids 1.. */
    int n_lora;
    int spec_tokens;     /* drafted tokens a sequence a step (hearth_engine_opts): logit rows for them */
    int prompt_logprob_rows; /* logit rows a step beyond those, for prompt logprobs (want_prompt_logprobs: a
                                request scores this many prompt positions a step) */
    const char *cache_dir;   /* the prefix cache's disk tier (kv_disk.h), NULL = none */
    double cache_disk_gib;   /* its byte budget, 0 = 16 GiB */
    double cache_write_mib_s; /* most MiB a second that evictions write there, 0 = 128 */
} hearth_session_opts;

typedef struct {
    const hearth_ops *ops;
    void *ops_ctx;
    hearth_model *model;
    hearth_kv *kv;
    hearth_kv_disk *disk;  /* the KV cache's disk tier, NULL = none; flushed at close */
    hearth_tokenizer *tok; /* NULL when the model has none */
    int ctx, max_tokens, kv_blocks, n_slots;
    int cuda_device; /* index when ops is the CUDA backend */
    hearth_dtype kv_type;
    double load_s;
} hearth_session;

/* The device a session of opts.device opens: device itself, or when NULL "cuda" where a GPU is present,
 * else "cpu". */
const char *hearth_session_device(const char *device);

/* Open everything; on failure prints nothing, fills err, cleans up. */
hearth_status hearth_session_open(hearth_session *s, const hearth_session_opts *o, hearth_err *err);
void hearth_session_close(hearth_session *s);

#endif
