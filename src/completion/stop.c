/* stop.c - the stop-string matcher (see stop.h for the contract). */
#define _GNU_SOURCE /* memmem */
#include "completion/stop.h"

#include <stdlib.h>
#include <string.h>

hearth_status hearth_stop_init(hearth_stop *m, const char *const *strs, int n, hearth_err *err) {
    memset(m, 0, sizeof *m);
    if (n < 0 || n > HEARTH_STOP_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "stop: at most %d stop strings, got %d", HEARTH_STOP_MAX, n);
    for (int i = 0; i < n; i++) {
        size_t len = strs[i] ? strlen(strs[i]) : 0;
        if (len == 0) return hearth_err_set(err, HEARTH_EINVAL, "stop[%d] is empty", i);
        if (len > HEARTH_STOP_MAX_LEN)
            return hearth_err_set(err, HEARTH_EINVAL, "stop[%d] is %zu bytes long; the limit is %d", i, len,
                                  HEARTH_STOP_MAX_LEN);
        if (len > m->max_len) m->max_len = len;
    }
    m->held = malloc(m->max_len + 1);
    if (!m->held) return hearth_err_set(err, HEARTH_ENOMEM, "stop: out of memory");
    for (int i = 0; i < n; i++) {
        m->lens[i] = strlen(strs[i]);
        m->strs[i] = malloc(m->lens[i] + 1);
        if (!m->strs[i]) {
            hearth_stop_deinit(m);
            return hearth_err_set(err, HEARTH_ENOMEM, "stop: out of memory");
        }
        memcpy(m->strs[i], strs[i], m->lens[i] + 1);
        m->n = i + 1;
    }
    return HEARTH_OK;
}

void hearth_stop_deinit(hearth_stop *m) {
    for (int i = 0; i < m->n; i++) free(m->strs[i]);
    free(m->held);
    memset(m, 0, sizeof *m);
}

/* Length of the longest suffix of buf[0,n) that is a proper prefix of some
 * stop string. */
static size_t partial_tail(const hearth_stop *m, const char *buf, size_t n) {
    size_t best = 0;
    for (int i = 0; i < m->n; i++) {
        size_t k = m->lens[i] - 1 < n ? m->lens[i] - 1 : n;
        for (; k > best; k--)
            if (!memcmp(buf + n - k, m->strs[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

size_t hearth_stop_feed(hearth_stop *m, const char *text, size_t len, char *out, int *hit) {
    *hit = m->hit;
    if (m->hit) return 0;
    if (m->n == 0) {
        memcpy(out, text, len);
        return len;
    }
    /* The window is the held tail followed by the new text. */
    memcpy(out, m->held, m->n_held);
    memcpy(out + m->n_held, text, len);
    size_t n = m->n_held + len;
    m->n_held = 0;
    size_t first = n;
    int which = -1;
    for (int i = 0; i < m->n; i++) {
        const char *p = memmem(out, n, m->strs[i], m->lens[i]);
        if (p && (size_t)(p - out) < first) first = (size_t)(p - out), which = i;
    }
    if (which >= 0) {
        m->hit = *hit = 1;
        m->which = which;
        return first;
    }
    size_t keep = partial_tail(m, out, n);
    memcpy(m->held, out + n - keep, keep);
    m->n_held = keep;
    return n - keep;
}

size_t hearth_stop_flush(hearth_stop *m, char *out) {
    if (m->hit) return 0;
    size_t n = m->n_held;
    memcpy(out, m->held, n);
    m->n_held = 0;
    return n;
}
