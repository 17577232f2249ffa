/* status.c - status names and error messages. */
#include "core/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hearth_status_name(hearth_status st) {
    switch (st) {
    case HEARTH_OK: return "ok";
    case HEARTH_EINVAL: return "invalid argument";
    case HEARTH_ENOMEM: return "out of memory";
    case HEARTH_EIO: return "I/O error";
    case HEARTH_EFORMAT: return "bad format";
    case HEARTH_ENOTSUP: return "not supported";
    case HEARTH_ENOENT: return "not found";
    case HEARTH_ERANGE: return "out of range";
    case HEARTH_EBUSY: return "busy";
    case HEARTH_ECANCELED: return "canceled";
    }
    return "unknown status";
}

hearth_status hearth_err_set(hearth_err *err, hearth_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

hearth_status hearth_err_wrap(hearth_err *err, hearth_status st, const char *fmt, ...) {
    if (err) {
        char old[sizeof err->msg];
        memcpy(old, err->msg, sizeof old);
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof err->msg)
            snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %.*s", (int)(sizeof old - 1), old);
        err->status = st;
    }
    return st;
}

void hearth_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "hearth: assertion failed at %s:%d: %s\n", file, line, expr);
    abort();
}
