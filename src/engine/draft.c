/* draft.c - prompt lookup: the continuation of the latest earlier match of the suffix. */
#include "engine/draft.h"

#include <string.h>

/* The latest i < n - g with ids[i, i + g) == ids[n - g, n), or -1. */
static int latest_match(const int32_t *ids, int n, int g) {
    const int32_t *suf = ids + n - g, last = ids[n - 1];
    for (int i = n - g - 1; i >= 0; i--)
        if (ids[i + g - 1] == last && !memcmp(ids + i, suf, sizeof *ids * (size_t)(g - 1))) return i;
    return -1;
}

int hearth_draft_ngram(const int32_t *ids, int n, int g_min, int g_max, int k, int32_t *out) {
    if (g_min < 1) g_min = 1;
    if (k <= 0) return 0;
    for (int g = g_max < n - 1 ? g_max : n - 1; g >= g_min; g--) {
        int i = latest_match(ids, n, g);
        if (i < 0) continue;
        int from = i + g, m = n - from < k ? n - from : k; /* from < n: the match ends before the suffix does */
        memcpy(out, ids + from, sizeof *ids * (size_t)m);
        return m;
    }
    return 0;
}
