/* dry.h - the DRY ("don't repeat yourself") repetition penalty, as
 * llama.cpp and koboldcpp define it: a token that would extend a sequence
 * already seen in the context, once that repeat is at least allowed_length
 * tokens long, has its logit lowered by multiplier * base^(length -
 * allowed_length). A sequence breaker (by default a token containing a
 * newline, ':', '"' or '*') ends every repeat: matches are not counted
 * across the latest one, and a token that is a breaker by itself is never
 * penalized. */
#ifndef HEARTH_ENGINE_DRY_H
#define HEARTH_ENGINE_DRY_H

#include <stdint.h>

#define HEARTH_DRY_MAX_TAIL 20 /* tokens after a breaker's head (llama.cpp's MAX_SEQ_LEN) */

/* Sequence breakers as token sequences: entry i is token head[i] followed
 * by tail[off[i] .. off[i + 1]) (none: the head holds a breaker string by
 * itself; else its text ends with the start of one and the tail's tokens
 * are the rest). Sorted by head. */
typedef struct hearth_dry_breakers {
    int n;
    int32_t *head; /* [n] */
    int32_t *off;  /* [n + 1] */
    int32_t *tail; /* [off[n]] */
} hearth_dry_breakers;

void hearth_dry_breakers_free(hearth_dry_breakers *b);
/* A copy of src (EINVAL-free: returns 0, or -1 out of memory). */
int hearth_dry_breakers_copy(hearth_dry_breakers *dst, const hearth_dry_breakers *src);

typedef struct {
    float multiplier; /* 0 = off */
    float base;       /* >= 1 */
    int allowed_length;
} hearth_dry_params;

/* Lower logits[vocab] for the tokens that would extend a repeat of the
 * context's end, h[0..n) oldest first (the last penalty_last_n tokens of
 * prompt and output). z is scratch of 2n ints, pairs of n. */
void hearth_dry_apply(const hearth_dry_params *p, const hearth_dry_breakers *b, const int32_t *h, int n, int32_t *z,
                      int64_t *pairs, float *logits, int vocab);

#endif
