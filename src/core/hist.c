/* hist.c - the histogram of hist.h. */
#include "core/hist.h"

#include <string.h>

void hearth_hist_init(hearth_hist *h, const double *le, int n) {
    memset(h, 0, sizeof *h);
    h->le = le;
    h->n = n < HEARTH_HIST_MAX ? n : HEARTH_HIST_MAX;
}

void hearth_hist_observe(hearth_hist *h, double v) {
    int i = 0;
    while (i < h->n && v > h->le[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void hearth_hist_merge(hearth_hist *dst, const hearth_hist *src) {
    for (int i = 0; i <= dst->n && i <= src->n; i++) dst->counts[i] += src->counts[i];
    dst->sum += src->sum;
    dst->count += src->count;
}
