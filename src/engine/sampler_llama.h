/* sampler_llama.h - llama.cpp's filters and draws inside hearth's sampler
 * (sampler.c): each works on the sampler's sorted candidates cand[0..keep)
 * with their weights at temperature 1 in probs[] (sampler.h gives the
 * order). Internal to the engine. */
#ifndef HEARTH_ENGINE_SAMPLER_LLAMA_H
#define HEARTH_ENGINE_SAMPLER_LLAMA_H

#include "engine/sampler.h"

/* top_n_sigma: the prefix within top_n_sigma standard deviations (of every finite logit) of the best, mx. */
int hearth_smp_top_n_sigma(const hearth_sampler *s, const float *logits, float mx, int keep);
/* typical_p: the locally typical part of what is left, in cand's order. */
int hearth_smp_typical(hearth_sampler *s, int keep);
/* XTC, when u (uniform in [0, 1)) falls within its chance. */
int hearth_smp_xtc(hearth_sampler *s, int keep, double u);
/* Dynamic temperature (dynatemp_range > 0): the temperature from the entropy of what is left, normalized by
 * log(n_norm) (the candidates llama.cpp would count: what the filters left, else the whole vocabulary). */
float hearth_smp_dynatemp(const hearth_sampler *s, int keep, int n_norm);
/* Mirostat 2's weight floor at the temperature: a surprise of at most mu bits is a weight of at least
 * z 2^-mu (z = s->mz, the sum of all the weights). */
float hearth_smp_mirostat_floor(const hearth_sampler *s);
/* Mirostat (1 or 2) over the n sorted candidates at the request's temperature (2: those within mu bits, the
 * sum over all in s->mz): truncate by the target surprise mu, draw with u, update mu; the chosen id (logprobs
 * into lp when asked). */
int32_t hearth_smp_mirostat(hearth_sampler *s, const float *logits, float mx, int n, double u, hearth_logprobs *lp);

/* llama.cpp's infill sampler (llama_sampler_infill) on cand[0..keep), n_ratio the candidates llama.cpp would
 * count (what earlier filters left, else the whole vocabulary): sorts them best first; when the ends of
 * generation hold more than a third of the mass per candidate (3 p_eog n > p_text), only they stay; else a
 * token whose text starts another's takes that one's probability (the likelier of the two stays; among the
 * best 1024), then only the ends and what holds at least 0.2 stay, or, with none of the latter, the first end
 * alone (without ends, the best). Returns what is left. */
int hearth_smp_infill(hearth_sampler *s, const float *logits, float mx, int keep, int n_ratio);

#endif
