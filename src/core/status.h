/* status.h - status codes and the error struct every fallible function fills.
 *
 * A function that can fail returns a hearth_status and, when given a non-NULL
 * hearth_err, writes a message that names the thing at fault (file, tensor,
 * field). The message is for people; callers branch on the status only. */
#ifndef HEARTH_CORE_STATUS_H
#define HEARTH_CORE_STATUS_H

#include "hearth.h"

#include <stdarg.h>

/* Write a printf-style message into err (if not NULL) and return st, so that
 * error paths read `return hearth_err_set(err, HEARTH_EFORMAT, "...", ...);`. */
hearth_status hearth_err_set(hearth_err *err, hearth_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with more context ("loading x.gguf: <old>"). */
hearth_status hearth_err_wrap(hearth_err *err, hearth_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Always-on assert for programmer errors (never for bad input). */
#define HEARTH_ASSERT(cond)                                                        \
    do {                                                                           \
        if (!(cond)) hearth_assert_fail(__FILE__, __LINE__, #cond);                \
    } while (0)

_Noreturn void hearth_assert_fail(const char *file, int line, const char *expr);

#endif
