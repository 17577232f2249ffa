/* hist.h - a Prometheus-style histogram: counts of observations at or below
 * each of up to HEARTH_HIST_MAX upper bounds (cumulative when written out),
 * their sum and their number. Not locked: its owner serializes. */
#ifndef HEARTH_CORE_HIST_H
#define HEARTH_CORE_HIST_H

#define HEARTH_HIST_MAX 24

typedef struct {
    const double *le; /* ascending upper bounds (borrowed, static); +Inf is implied */
    int n;
    long counts[HEARTH_HIST_MAX + 1]; /* per bucket, not cumulative; [n]: above the last bound */
    double sum;
    long count;
} hearth_hist;

/* n bounds at most HEARTH_HIST_MAX. */
void hearth_hist_init(hearth_hist *h, const double *le, int n);
void hearth_hist_observe(hearth_hist *h, double v);
/* Add src's observations to dst (the same bounds). */
void hearth_hist_merge(hearth_hist *dst, const hearth_hist *src);

#endif
