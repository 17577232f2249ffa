/* hearth.h - the public C API of hearth: load a model and generate with it,
 * embedded in another program, without HTTP.
 *
 * Threading: unless a function says otherwise, an object may be used by one
 * thread at a time. Ownership: `_new` returns an object the caller frees with
 * the matching `_free`; strings returned as `const char *` stay owned by the
 * object they came from. */
#ifndef HEARTH_H
#define HEARTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEARTH_VERSION "0.1.0"

/* Status codes. They grow at the end only. */
typedef enum hearth_status {
    HEARTH_OK = 0,
    HEARTH_EINVAL,    /* a bad argument or request field */
    HEARTH_ENOMEM,    /* out of memory (host or device) */
    HEARTH_EIO,       /* a read or write failed */
    HEARTH_EFORMAT,   /* a file or document is malformed */
    HEARTH_ENOTSUP,   /* valid, but not supported by this build or model */
    HEARTH_ENOENT,    /* a file, tensor or key is missing */
    HEARTH_ERANGE,    /* a value outside its allowed range (context length, ids) */
    HEARTH_EBUSY,     /* a queue or pool is at capacity */
    HEARTH_ECANCELED, /* the caller canceled the operation */
} hearth_status;

/* Filled by fallible functions: the status again and a message that names the
 * thing at fault. Caller-owned storage; zero-initialise before use. */
typedef struct hearth_err {
    hearth_status status;
    char msg[512];
} hearth_err;

/* A static, human-readable name for a status code. */
const char *hearth_status_name(hearth_status st);

/* The library version string (HEARTH_VERSION). */
const char *hearth_version(void);

#ifdef __cplusplus
}
#endif

#endif
