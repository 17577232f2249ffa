/* file.c - mmap and whole-file reads with errors that name the path. */
#define _GNU_SOURCE
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

hearth_status hearth_mmap_open(hearth_mmap *m, const char *path, hearth_err *err) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hearth_err_set(err, errno == ENOENT ? HEARTH_ENOENT : HEARTH_EIO, "%s: %s", path,
                              strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return hearth_err_set(err, HEARTH_EIO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return hearth_err_set(err, HEARTH_EIO, "%s: mmap: %s", path, strerror(e));
        }
        m->data = p;
        m->size = (size_t)st.st_size;
    }
    close(fd);
    return HEARTH_OK;
}

void hearth_mmap_close(hearth_mmap *m) {
    if (m->data) munmap(m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

void hearth_mmap_drop(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !p) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

hearth_status hearth_file_read(const char *path, char **out, size_t *len, hearth_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return hearth_err_set(err, errno == ENOENT ? HEARTH_ENOENT : HEARTH_EIO, "%s: %s", path,
                              strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    hearth_status st = HEARTH_OK;
    if (!buf) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path); goto done; }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { st = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path); goto done; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) { st = hearth_err_set(err, HEARTH_EIO, "%s: read error", path); goto done; }
    buf[n] = '\0';
    *out = buf;
    buf = NULL;
    if (len) *len = n;
done:
    free(buf);
    fclose(f);
    return st;
}

int hearth_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int hearth_path_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
