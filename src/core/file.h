/* file.h - read-only memory maps and whole-file reads.
 *
 * Weights are mapped, not read into buffers (a backend may still keep a
 * re-laid copy of some): a hearth_mmap stays valid until hearth_mmap_close,
 * and every tensor pointer into it dies with it. */
#ifndef HEARTH_CORE_FILE_H
#define HEARTH_CORE_FILE_H

#include "core/status.h"

#include <stddef.h>

typedef struct hearth_mmap {
    void *data;  /* NULL for an empty file */
    size_t size; /* bytes */
} hearth_mmap;

/* Map path read-only. On failure *m is zeroed and err names the path. */
hearth_status hearth_mmap_open(hearth_mmap *m, const char *path, hearth_err *err);
void hearth_mmap_close(hearth_mmap *m);
/* Tells the kernel that the whole pages within [p, p + n) of a map will not
 * be read soon (a tensor a backend copied): they leave the process's
 * resident set; a later read maps them in again. */
void hearth_mmap_drop(const void *p, size_t n);

/* Read a whole file into a NUL-terminated malloc'd buffer the caller frees.
 * *len (optional) receives the byte count without the NUL. */
hearth_status hearth_file_read(const char *path, char **out, size_t *len, hearth_err *err);

/* 1 if path names an existing directory / regular file, else 0. */
int hearth_path_is_dir(const char *path);
int hearth_path_is_file(const char *path);

#endif
