/* stop.h - stop strings matched on decoded text across token boundaries.
 *
 * The generated text arrives in pieces that do not respect stop strings: "###"
 * may come as "#", "##". The matcher holds back the longest tail of what it has
 * seen that could still be the start of a stop string, so that no byte of a
 * stop string is ever released to the client, and reports the first complete
 * occurrence. Text before a stop string is released; the stop string and
 * everything after it are dropped (OpenAI semantics: the stop sequence is not
 * part of the output).
 *
 * Invariants: the held tail is shorter than the longest stop string; since
 * stop strings are valid UTF-8 and so is the input, a released prefix never
 * splits a UTF-8 sequence. All memory is allocated by hearth_stop_init; feed
 * and flush allocate nothing. One matcher belongs to one generation stream. */
#ifndef HEARTH_COMPLETION_STOP_H
#define HEARTH_COMPLETION_STOP_H

#include "core/status.h"

#include <stddef.h>

#define HEARTH_STOP_MAX 16          /* stop strings per request */
#define HEARTH_STOP_MAX_LEN 256     /* bytes per stop string */

typedef struct {
    char *strs[HEARTH_STOP_MAX]; /* owned copies */
    size_t lens[HEARTH_STOP_MAX];
    int n;
    size_t max_len;
    char *held; /* [max_len] the tail that may begin a stop string */
    size_t n_held;
    int hit;   /* a stop string was found; all later input is dropped */
    int which; /* hit: the index of the stop string found (of those complete in the feed that found one,
                  the first to begin; the lower index on a tie) */
} hearth_stop;

/* Copy n stop strings (each 1..HEARTH_STOP_MAX_LEN bytes of valid UTF-8).
 * n == 0 makes a matcher that passes everything through. EINVAL names the bad
 * entry ("stop[2] is empty"). On failure nothing needs freeing. */
hearth_status hearth_stop_init(hearth_stop *m, const char *const *strs, int n, hearth_err *err);
void hearth_stop_deinit(hearth_stop *m);

/* Bytes of output buffer a feed of len bytes may need. */
static inline size_t hearth_stop_out_cap(const hearth_stop *m, size_t len) { return m->max_len + len; }

/* Feed decoded text. Writes the bytes now safe to release to out (which must
 * hold hearth_stop_out_cap(m, len) bytes) and returns their count. Sets *hit
 * to 1 when a stop string completed: out then holds the text before it, and
 * the stream is over (further feeds release nothing). */
size_t hearth_stop_feed(hearth_stop *m, const char *text, size_t len, char *out, int *hit);

/* End of stream without a stop string: release the held tail into out
 * (m->max_len bytes are enough); returns its length. */
size_t hearth_stop_flush(hearth_stop *m, char *out);

#endif
