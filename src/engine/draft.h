/* draft.h - the tokens a sequence will likely produce next, for speculative
 * decoding by prompt lookup (vLLM's "ngram" method, llama.cpp's lookup
 * decoding): text that quotes, edits or repeats its context continues as it
 * did the last time its last few tokens appeared. The engine feeds the drafts
 * through one forward beside the sequence's last token and keeps those that
 * the sequence's own sampler would have chosen (engine.c), so no output
 * changes; the drafts only decide how many tokens one forward yields. */
#ifndef HEARTH_ENGINE_DRAFT_H
#define HEARTH_ENGINE_DRAFT_H

#include <stdint.h>

/* Up to k tokens into out: those that followed the most recent earlier
 * occurrence of ids' last g tokens, for the largest g in [g_min, g_max] that
 * occurs earlier. Returns how many (0: no earlier occurrence). */
int hearth_draft_ngram(const int32_t *ids, int n, int g_min, int g_max, int k, int32_t *out);

#endif
