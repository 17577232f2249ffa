/* sampler.h - turn logits into the next token, per request.
 *
 * Order (as mlx-lm/transformers document it for this project): logit
 * processors (repetition penalty over prompt + output or its last
 * repeat_last_n tokens, presence/frequency penalties over the output,
 * logit_bias, min_tokens' ban, allowed_token_ids, bad_words, DRY) -> top_p -> min_p -> top_k -> top_n_sigma
 * -> typical_p -> XTC -> temperature draw (a dynamic temperature with
 * dynatemp_range; mirostat instead of the filters). The four prefix filters are
 * computed on the processed distribution at temperature 1 and keep the
 * intersection of their prefixes; typical_p keeps the locally typical part
 * of what is left, and XTC, at its chance, drops every token left above its
 * threshold but the least likely (both as llama.cpp's, on what is left,
 * renormalized). Temperature 0 is argmax. Same seed => same draws. Logprobs are those of the
 * processed distribution (after penalties and bias, before filters and
 * temperature). All buffers are sized at init; sampling allocates nothing. */
#ifndef HEARTH_ENGINE_SAMPLER_H
#define HEARTH_ENGINE_SAMPLER_H

#include "core/status.h"
#include "engine/dry.h"
#include "ops/ops.h"

#include <stdint.h>

#define HEARTH_MAX_TOP_LOGPROBS 20
#define HEARTH_SAMPLER_MAX_BAN 32 /* ids min_tokens holds back */

typedef struct {
    int32_t id;
    float bias;
} hearth_logit_bias;

/* A constraint on the tokens a request may produce (structured output),
 * implemented above the engine (completion/json_mode.c): before each draw the
 * sampler asks it which tokens the draw could reach are allowed (or, for
 * logprobs, has it mask them all), and tells it every token taken. mask must
 * leave at least one token allowed. hearth_sampler_init takes it on success
 * (the sampler calls free at deinit); on failure it stays the caller's. */
typedef struct {
    void *self;
    int (*allows)(void *self, int32_t id);
    void (*mask)(void *self, float *logits, int vocab); /* logits[id] = -INFINITY where forbidden */
    void (*accept)(void *self, int32_t id);
    void (*free)(void *self);
} hearth_constraint;

/* Token sequences: sequence i is ids[off[i] .. off[i + 1]). */
typedef struct {
    int n;
    const int32_t *off; /* [n + 1] */
    const int32_t *ids;
} hearth_token_seqs;

#define HEARTH_BAD_WORD_MAX 64 /* tokens of one bad word */

/* What llama.cpp's infill sampler reads of the vocabulary (hearth_sampling's
 * infill): every token's text (a special token's is empty; borrowed, it
 * outlives the sampler) and the ends of generation (copied). */
#define HEARTH_INFILL_MAX_EOG 32
typedef struct {
    const uint32_t *off;    /* [vocab + 1] into bytes */
    const uint8_t *bytes;
    const uint8_t *special; /* [vocab] 1: no text */
    int32_t eog[HEARTH_INFILL_MAX_EOG]; /* the ids that end the text; eog[0] is chosen when nothing else is left */
    int n_eog;
} hearth_infill_vocab;

/* Resolved sampling settings of one request (defaults: hearth_sampling_default). */
typedef struct hearth_sampling {
    float temperature;        /* 0 = greedy */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    int top_k;                /* 0 = off */
    float repetition_penalty; /* 1 = off (HF: divide positive logits, multiply negative) */
    float presence_penalty;   /* 0 = off (OpenAI) */
    float frequency_penalty;  /* 0 = off (OpenAI) */
    uint64_t seed;
    int has_seed;             /* 0: seeded from the clock and a counter */
    const hearth_logit_bias *logit_bias; /* borrowed; copied at init */
    int n_logit_bias;
    int top_logprobs;         /* top-N alternatives to report, 0..HEARTH_MAX_TOP_LOGPROBS */
    int min_tokens;           /* min_ban's ids cannot be drawn before this many tokens were accepted (vLLM's
                                 min_tokens: the end-of-generation and stop ids); 0 = off */
    int32_t min_ban[HEARTH_SAMPLER_MAX_BAN];
    int n_min_ban;
    hearth_constraint constraint; /* .mask NULL: none; applied after the processors, before the filters */
    int repeat_last_n;        /* repetition_penalty over the last N tokens of prompt + output only; 0 = all of them */
    float top_n_sigma;        /* <= 0 = off; else keep the logits >= max - top_n_sigma * their standard deviation */
    float typical_p;          /* 1 = off; else locally typical sampling with this mass */
    float xtc_probability;    /* 0 = off; XTC's chance a draw ... */
    float xtc_threshold;      /* ... drops the tokens with at least this probability but the least likely (> 0.5: off) */
    hearth_dry_params dry;    /* .multiplier 0 = off */
    int dry_last_n;           /* DRY scans the last N tokens of prompt + output (> 0 when DRY is on) */
    const hearth_dry_breakers *dry_breakers; /* borrowed (NULL: none); copied at init */
    float dynatemp_range;     /* > 0: the temperature moves within temperature +- this with the entropy (llama.cpp's) */
    float dynatemp_exponent;
    int mirostat;             /* 1, 2: llama.cpp's mirostat draws (instead of the filters), target surprise tau */
    float mirostat_tau, mirostat_eta;
    const int32_t *allowed_ids; /* vLLM's allowed_token_ids: only these can be drawn (borrowed; copied); */
    int n_allowed;              /* 0 = no such limit */
    int infill;               /* llama.cpp's infill sampler after the filters, before the temperature (llama-server's
                                 "infill" in samplers, for code completion): mostly ends when ends of generation
                                 are likely enough, merges a token into another whose text starts its own, keeps
                                 what has 0.2 of the mass (hearth_smp_infill) */
    hearth_infill_vocab infill_vocab;
    hearth_token_seqs bad_words; /* vLLM's bad_words: a sequence's last token is never drawn where it would
                                    complete the sequence in the output (borrowed; copied) */
} hearth_sampling;

void hearth_sampling_default(hearth_sampling *p);

typedef struct {
    int32_t id;
    float logprob;
} hearth_token_logprob;

/* The chosen token's logprob and the top-N alternatives, most likely first. */
typedef struct {
    hearth_token_logprob chosen;
    hearth_token_logprob top[HEARTH_MAX_TOP_LOGPROBS];
    int n_top;
    int rank; /* the chosen token's among all (1 = likeliest) where the host scored the row; 0 = not counted */
} hearth_logprobs;

typedef struct hearth_sampler {
    hearth_sampling p;
    int vocab;
    uint64_t rng[4];
    hearth_logit_bias *bias;   /* owned copy */
    int32_t *out_counts;       /* [vocab] occurrences in the output */
    int n_out;                 /* tokens accepted */
    uint8_t *in_context;       /* [vocab] seen in prompt or output */
    int32_t *cand;             /* [vocab] candidate ids (scratch) */
    float *probs;              /* [vocab] scratch */
    int32_t *sel;              /* [vocab] scratch: the best candidates in order */
    int32_t *hist;             /* ring of the last hist_cap tokens of prompt + output (repeat_last_n, DRY), or NULL */
    int hist_cap;
    long long hist_n;          /* tokens pushed */
    int32_t *win_counts;       /* [vocab] occurrences in the last repeat_last_n tokens, or NULL */
    int32_t *dry_buf;          /* [3 * dry_last_n]: the window, then hearth_dry_apply's scratch */
    int64_t *dry_pairs;        /* [dry_last_n] */
    hearth_dry_breakers breakers; /* owned copy */
    float *typ_score;          /* [vocab] typical_p's scratch */
    int32_t *typ_order;        /* [vocab] */
    uint8_t *allowed;          /* [vocab] 1 = may be drawn, or NULL */
    float mu;                  /* mirostat's surprise bound */
    double mz;                 /* mirostat 2: the step's sum of weights at the temperature */
    int32_t *bad_off, *bad_ids; /* owned copies of p.bad_words */
} hearth_sampler;

/* Caller-owned storage. EINVAL names a bad setting (negative temperature,
 * top_p outside (0,1], bias id outside the vocabulary, ...). */
hearth_status hearth_sampler_init(hearth_sampler *s, const hearth_sampling *p, int vocab, hearth_err *err);
void hearth_sampler_deinit(hearth_sampler *s);
/* The prompt's ids count for the repetition penalty. */
void hearth_sampler_accept_prompt(hearth_sampler *s, const int32_t *ids, int n);
/* Choose a token from logits[vocab] (modified in place by the processors);
 * fills lp if non-NULL. Does not accept it: call hearth_sampler_accept. */
int32_t hearth_sampler_sample(hearth_sampler *s, float *logits, hearth_logprobs *lp);
void hearth_sampler_accept(hearth_sampler *s, int32_t id);

/* The logprob of token chosen under logits[vocab] as they are (log-softmax),
 * and the n_top most likely tokens' (n_top <= HEARTH_MAX_TOP_LOGPROBS). */
void hearth_logprobs_fill(const float *logits, int vocab, int32_t chosen, int n_top, hearth_logprobs *lp);

/* The same choice made by the backend's pick op (ops/ops.h), so that only a
 * few bytes per row leave the device: possible when the settings have no
 * processors, no constraint and no filter past top_p / min_p / top_k (the
 * pick's truncation keeps the prefix the host's does, up to its integer
 * weights; its draw is its own, of the same distribution), where the
 * backend's pick truncates (truncates 1: ops->pick_truncates). Returns 1 and
 * fills *p (drawing the key from the sampler's stream) when it is; 0 when the
 * full logits must come to the host for hearth_sampler_sample. */
int hearth_sampler_pick_params(hearth_sampler *s, int want_logprobs, int truncates, hearth_pick_params *p);
/* What hearth_sampler_pick_params would return, drawing nothing. Once 1 it
 * stays 1 whatever tokens the sampler accepts (min_tokens' ban only ends). */
int hearth_sampler_by_pick(const hearth_sampler *s, int truncates);
/* The token of a pick made with those params, and its logprobs into lp (if non-NULL). */
int32_t hearth_sampler_from_pick(const hearth_sampler *s, const hearth_pick *pk, hearth_logprobs *lp);

#endif
