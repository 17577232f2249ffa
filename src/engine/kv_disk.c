/* kv_disk.c - the prefix cache's disk tier (kv_disk.h): files named by key,
 * an in-memory index of them (hash chains over the key, a use tick for LRU),
 * checksummed on read, renamed into place on write. */
#define _GNU_SOURCE /* syncfs */
#include "engine/kv_disk.h"

#include "core/checksum.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "HKVBLK02"

typedef struct {
    char magic[8];
    uint8_t key[32];
    uint64_t n_meta, n_data;
    uint64_t sum; /* hearth_checksum64 of meta, then of data from there */
} file_header;

typedef struct {
    uint8_t key[32];
    uint64_t bytes, used; /* file size; last use (a tick) */
    int durable, live, next; /* next: hash chain, -1 ends it */
} entry;

struct hearth_kv_disk {
    char *dir;
    uint64_t budget, bytes, tick;
    entry *e;
    int n_e, cap_e;
    int *buckets, n_buckets; /* chain heads, -1 = empty */
    int *spare, n_spare;     /* dead entries to reuse */
    uint8_t dirty_sub[256];  /* subdirectories with a rename not yet fsynced */
    int dirty_top;
    hearth_kv_disk_stats st;
};

static unsigned bucket_of(const hearth_kv_disk *d, const uint8_t key[32]) {
    unsigned h;
    memcpy(&h, key, sizeof h);
    return h & (unsigned)(d->n_buckets - 1);
}

static int find(const hearth_kv_disk *d, const uint8_t key[32]) {
    for (int i = d->buckets[bucket_of(d, key)]; i >= 0; i = d->e[i].next)
        if (!memcmp(d->e[i].key, key, 32)) return i;
    return -1;
}

static void path_of(const hearth_kv_disk *d, const uint8_t key[32], char *out, size_t cap) {
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
    snprintf(out, cap, "%s/%02x/%s.kvb", d->dir, key[0], hex);
}

/* Room for one more entry: chains at most ~1 deep on average. */
static int grow(hearth_kv_disk *d) {
    if (d->n_spare > 0 || d->n_e < d->cap_e) return 0;
    int cap = d->cap_e ? 2 * d->cap_e : 256;
    entry *e = realloc(d->e, sizeof *e * (size_t)cap);
    if (!e) return -1;
    d->e = e;
    int *spare = realloc(d->spare, sizeof *spare * (size_t)cap);
    if (!spare) return -1;
    d->spare = spare;
    d->cap_e = cap;
    if (cap <= d->n_buckets) return 0;
    int *b = malloc(sizeof *b * (size_t)cap);
    if (!b) return -1;
    free(d->buckets);
    d->buckets = b;
    d->n_buckets = cap;
    for (int i = 0; i < cap; i++) b[i] = -1;
    for (int i = 0; i < d->n_e; i++)
        if (d->e[i].live) {
            unsigned h = bucket_of(d, d->e[i].key);
            d->e[i].next = b[h];
            b[h] = i;
        }
    return 0;
}

static int add(hearth_kv_disk *d, const uint8_t key[32], uint64_t bytes, int durable) {
    if (grow(d)) return -1;
    int i = d->n_spare > 0 ? d->spare[--d->n_spare] : d->n_e++;
    entry *x = &d->e[i];
    memcpy(x->key, key, 32);
    x->bytes = bytes;
    x->used = ++d->tick;
    x->durable = durable;
    x->live = 1;
    unsigned h = bucket_of(d, key);
    x->next = d->buckets[h];
    d->buckets[h] = i;
    d->bytes += bytes;
    d->st.files++;
    return i;
}

static void drop(hearth_kv_disk *d, int i) {
    char path[4200];
    path_of(d, d->e[i].key, path, sizeof path);
    unlink(path);
    int *pp = &d->buckets[bucket_of(d, d->e[i].key)];
    while (*pp != i) pp = &d->e[*pp].next;
    *pp = d->e[i].next;
    d->e[i].live = 0;
    d->bytes -= d->e[i].bytes;
    d->st.files--;
    d->spare[d->n_spare++] = i;
}

/* Least recently used first, until the files fit the budget. */
static void fit_budget(hearth_kv_disk *d) {
    while (d->bytes > d->budget) {
        int lru = -1;
        for (int i = 0; i < d->n_e; i++)
            if (d->e[i].live && (lru < 0 || d->e[i].used < d->e[lru].used)) lru = i;
        if (lru < 0) return;
        drop(d, lru);
        d->st.removed++;
    }
}

static int parse_name(const char *name, uint8_t key[32]) {
    if (strlen(name) != 68 || strcmp(name + 64, ".kvb")) return 0;
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(name + 2 * i, "%2x", &v) != 1) return 0;
        key[i] = (uint8_t)v;
    }
    return 1;
}

typedef struct {
    uint8_t key[32];
    uint64_t bytes;
    long long mtime;
} found;

static int by_mtime(const void *a, const void *b) {
    long long x = ((const found *)a)->mtime, y = ((const found *)b)->mtime;
    return x < y ? -1 : x > y;
}

/* Index what the directory holds, oldest first; leftover temporary files go. */
static hearth_status scan(hearth_kv_disk *d, hearth_err *err) {
    found *f = NULL;
    int n = 0, cap = 0;
    char path[4200];
    for (int s = 0; s < 256; s++) {
        snprintf(path, sizeof path, "%s/%02x", d->dir, s);
        DIR *dir = opendir(path);
        if (!dir) continue;
        struct dirent *de;
        while ((de = readdir(dir))) {
            char file[4400];
            snprintf(file, sizeof file, "%s/%s", path, de->d_name);
            struct stat sb;
            uint8_t key[32];
            if (strstr(de->d_name, ".tmp.")) {
                unlink(file);
                continue;
            }
            if (!parse_name(de->d_name, key) || key[0] != s || stat(file, &sb) || !S_ISREG(sb.st_mode)) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                found *g = realloc(f, sizeof *f * (size_t)cap);
                if (!g) {
                    closedir(dir);
                    free(f);
                    return hearth_err_set(err, HEARTH_ENOMEM, "kv disk cache: out of memory indexing %s", d->dir);
                }
                f = g;
            }
            memcpy(f[n].key, key, 32);
            f[n].bytes = (uint64_t)sb.st_size;
            f[n++].mtime = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        }
        closedir(dir);
    }
    if (n) qsort(f, (size_t)n, sizeof *f, by_mtime);
    for (int i = 0; i < n; i++)
        if (find(d, f[i].key) < 0 && add(d, f[i].key, f[i].bytes, 1) < 0) {
            free(f);
            return hearth_err_set(err, HEARTH_ENOMEM, "kv disk cache: out of memory indexing %s", d->dir);
        }
    free(f);
    fit_budget(d);
    return HEARTH_OK;
}

hearth_status hearth_kv_disk_open(hearth_kv_disk **out, const char *dir, uint64_t budget, hearth_err *err) {
    *out = NULL;
    if (!dir || !*dir || strlen(dir) > 4000) return hearth_err_set(err, HEARTH_EINVAL, "kv disk cache: bad directory");
    if (mkdir(dir, 0700) && errno != EEXIST)
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot create %s: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: %s is not a directory", dir);
    if (access(dir, R_OK | W_OK | X_OK))
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: %s is not writable: %s", dir, strerror(errno));
    hearth_kv_disk *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir)) || !(d->buckets = malloc(sizeof *d->buckets * 256))) {
        hearth_kv_disk_close(d);
        return hearth_err_set(err, HEARTH_ENOMEM, "kv disk cache: out of memory");
    }
    d->n_buckets = 256;
    for (int i = 0; i < 256; i++) d->buckets[i] = -1;
    d->budget = budget;
    hearth_status st = scan(d, err);
    if (st != HEARTH_OK) {
        hearth_kv_disk_close(d);
        return st;
    }
    *out = d;
    return HEARTH_OK;
}

void hearth_kv_disk_close(hearth_kv_disk *d) {
    if (!d) return;
    free(d->dir);
    free(d->e);
    free(d->buckets);
    free(d->spare);
    free(d);
}

int hearth_kv_disk_has(const hearth_kv_disk *d, const uint8_t key[32]) { return find(d, key) >= 0; }

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static int fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static uint64_t checksum(const void *meta, size_t n_meta, const void *data, size_t n_data) {
    return hearth_checksum64(data, n_data, hearth_checksum64(meta, n_meta, 0));
}

hearth_status hearth_kv_disk_put(hearth_kv_disk *d, const uint8_t key[32], const void *meta, size_t n_meta,
                                 const void *data, size_t n_data, int durable, hearth_err *err) {
    if (find(d, key) >= 0) return HEARTH_OK;
    char path[4200], tmp[4300], sub[4100];
    path_of(d, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(sub, sizeof sub, "%s/%02x", d->dir, key[0]);
    int created = mkdir(sub, 0700) == 0;
    if (!created && errno != EEXIST)
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot create %s: %s", sub, strerror(errno));
    file_header h = {.n_meta = n_meta, .n_data = n_data};
    memcpy(h.magic, MAGIC, 8);
    memcpy(h.key, key, 32);
    h.sum = checksum(meta, n_meta, data, n_data);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600); /* prompts' KV: the owner's only */
    int ok = fd >= 0 && !write_all(fd, &h, sizeof h) && !write_all(fd, meta, n_meta) &&
             !write_all(fd, data, n_data) && (!durable || !fsync(fd));
    if (fd >= 0 && close(fd)) ok = 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot write %s: %s", path, strerror(e));
    }
    if (durable && (fsync_path(sub) || (created && fsync_path(d->dir))))
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot sync %s: %s", sub, strerror(errno));
    if (!durable) d->dirty_sub[key[0]] = 1, d->dirty_top |= created;
    if (add(d, key, hearth_kv_disk_file_bytes(n_meta, n_data), durable) < 0) {
        unlink(path);
        return hearth_err_set(err, HEARTH_ENOMEM, "kv disk cache: out of memory for its index");
    }
    d->st.writes++;
    fit_budget(d);
    return HEARTH_OK;
}

int hearth_kv_disk_get(hearth_kv_disk *d, const uint8_t key[32], void *meta, size_t n_meta, void *data,
                       size_t n_data) {
    int i = find(d, key);
    if (i < 0) {
        d->st.misses++;
        return 0;
    }
    char path[4200];
    path_of(d, key, path, sizeof path);
    int fd = open(path, O_RDONLY);
    if (fd < 0 && errno == ENOENT) { /* removed behind our back (another server on the same directory) */
        drop(d, i);
        d->st.misses++;
        return 0;
    }
    file_header h;
    int ok = fd >= 0 && !read_all(fd, &h, sizeof h) && !memcmp(h.magic, MAGIC, 8) && !memcmp(h.key, key, 32);
    if (ok && (h.n_meta != n_meta || h.n_data != n_data)) { /* another layout's block: not ours, not corrupt */
        close(fd);
        d->st.misses++;
        return 0;
    }
    ok = ok && !read_all(fd, meta, n_meta) && !read_all(fd, data, n_data) &&
         checksum(meta, n_meta, data, n_data) == h.sum;
    if (fd >= 0) close(fd);
    if (!ok) {
        drop(d, i);
        d->st.corrupt++;
        d->st.misses++;
        return 0;
    }
    d->e[i].used = ++d->tick;
    d->st.hits++;
    return 1;
}

hearth_status hearth_kv_disk_sync(hearth_kv_disk *d, hearth_err *err) {
    char path[4200];
    int pending = 0;
    for (int i = 0; i < d->n_e && pending < 8; i++) pending += d->e[i].live && !d->e[i].durable;
    if (pending >= 8) { /* many files: one syncfs of the directory's file system beats an fsync each (~7 ms here) */
        int fd = open(d->dir, O_RDONLY | O_DIRECTORY);
        int rc = fd >= 0 ? syncfs(fd) : -1;
        if (fd >= 0) close(fd);
        if (rc)
            return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot sync %s: %s", d->dir, strerror(errno));
        for (int i = 0; i < d->n_e; i++) d->e[i].durable = 1;
        memset(d->dirty_sub, 0, sizeof d->dirty_sub);
        d->dirty_top = 0;
        return HEARTH_OK;
    }
    for (int i = 0; i < d->n_e; i++) {
        entry *x = &d->e[i];
        if (!x->live || x->durable) continue;
        path_of(d, x->key, path, sizeof path);
        if (fsync_path(path))
            return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot sync %s: %s", path, strerror(errno));
        x->durable = 1;
    }
    for (int s = 0; s < 256; s++) {
        if (!d->dirty_sub[s]) continue;
        snprintf(path, sizeof path, "%s/%02x", d->dir, s);
        if (fsync_path(path))
            return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot sync %s: %s", path, strerror(errno));
        d->dirty_sub[s] = 0;
    }
    if (d->dirty_top && fsync_path(d->dir))
        return hearth_err_set(err, HEARTH_EIO, "kv disk cache: cannot sync %s: %s", d->dir, strerror(errno));
    d->dirty_top = 0;
    return HEARTH_OK;
}

void hearth_kv_disk_stats_get(const hearth_kv_disk *d, hearth_kv_disk_stats *out) {
    *out = d->st;
    out->bytes = d->bytes;
}

uint64_t hearth_kv_disk_budget(const hearth_kv_disk *d) { return d->budget; }
void hearth_kv_disk_note_skip(hearth_kv_disk *d) { d->st.skipped++; }
uint64_t hearth_kv_disk_file_bytes(size_t n_meta, size_t n_data) { return sizeof(file_header) + n_meta + n_data; }
