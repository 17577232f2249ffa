/* clock.c - monotonic time in seconds. */
#define _POSIX_C_SOURCE 200809L
#include "core/clock.h"

#include <time.h>

double hearth_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
