/* clock.h - monotonic time in seconds. */
#ifndef HEARTH_CORE_CLOCK_H
#define HEARTH_CORE_CLOCK_H

double hearth_time_now(void);

#endif
