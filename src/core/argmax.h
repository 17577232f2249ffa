/* argmax.h - the first index of a float row's maximum, as the loop
 * `if (x[i] > x[best]) best = i` finds it (NaNs never win; a NaN at 0 stays
 * the answer), without that loop's chain of dependent loads: eight running
 * maximums, then the first index holding theirs. */
#ifndef HEARTH_CORE_ARGMAX_H
#define HEARTH_CORE_ARGMAX_H

static inline int hearth_argmax(const float *x, int n) {
    if (n <= 0 || !(x[0] == x[0])) return 0;
    float m[8];
    for (int k = 0; k < 8; k++) m[k] = x[0];
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float mx = m[0];
    for (int k = 1; k < 8; k++) mx = m[k] > mx ? m[k] : mx;
    for (i = 0; i < n; i++)
        if (x[i] == mx) return i;
    return 0;
}

#endif
