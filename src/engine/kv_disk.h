/* kv_disk.h - the prefix cache's disk tier: a directory of checksummed files,
 * one a KV block, named by the block's 32-byte key (DESIGN §3: the same key
 * names a block in backend memory and on disk, so the tiers are one cache).
 *
 * A file is DIR/<2 hex>/<64 hex>.kvb: a header (magic, the key, the sizes of
 * its two parts, a 64-bit checksum over both: core/checksum.h), then the parts: what the caller needs to
 * check the block is the one it wants (its layout and token ids), then the
 * block's bytes. Written to a temporary name and renamed, so a reader never
 * sees a half-written file under the key; a torn or corrupt file (a crash
 * before its fsync, a disk error) fails its checksum, is removed and reads as
 * a miss. Files past the byte budget are removed least recently used first.
 *
 * Durable means on disk: a put with durable 1 fsyncs the file before the
 * rename and its directory after; other puts (blocks evicted from memory
 * during serving) are made durable by the next hearth_kv_disk_sync. One
 * thread at a time (the engine's, or the owner's once the engine stopped). */
#ifndef HEARTH_ENGINE_KV_DISK_H
#define HEARTH_ENGINE_KV_DISK_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_kv_disk hearth_kv_disk;

typedef struct {
    long files;          /* blocks on disk */
    uint64_t bytes;      /* their size */
    long hits, misses;   /* gets that found a valid file, and those that did not */
    long writes, removed; /* puts, and files removed for the budget */
    long corrupt;        /* files found torn or corrupt (removed) */
    long skipped;        /* blocks not written on eviction: over the write rate (hearth_kv_disk_note_skip) */
} hearth_kv_disk_stats;

/* Open (creating it if needed) the directory; what it holds already is
 * indexed (oldest first by modification time). budget: bytes kept, > 0. */
hearth_status hearth_kv_disk_open(hearth_kv_disk **out, const char *dir, uint64_t budget, hearth_err *err);
void hearth_kv_disk_close(hearth_kv_disk *d);

int hearth_kv_disk_has(const hearth_kv_disk *d, const uint8_t key[32]);
/* Store the two parts under key (replacing nothing: a key already stored is
 * left as it is). EIO names the path on a write failure. */
hearth_status hearth_kv_disk_put(hearth_kv_disk *d, const uint8_t key[32], const void *meta, size_t n_meta,
                                 const void *data, size_t n_data, int durable, hearth_err *err);
/* 1 and the parts in meta / data when a valid file of exactly these sizes
 * is stored under key; else 0 (a file of other sizes is left, a corrupt one
 * removed). */
int hearth_kv_disk_get(hearth_kv_disk *d, const uint8_t key[32], void *meta, size_t n_meta, void *data,
                       size_t n_data);
/* Every file put without durable made durable, and the directories: an fsync each, or with many pending
 * one syncfs of the directory's file system. */
hearth_status hearth_kv_disk_sync(hearth_kv_disk *d, hearth_err *err);
void hearth_kv_disk_stats_get(const hearth_kv_disk *d, hearth_kv_disk_stats *out);
uint64_t hearth_kv_disk_budget(const hearth_kv_disk *d);
/* The size of the file of a put of these parts (its header and both parts). */
uint64_t hearth_kv_disk_file_bytes(size_t n_meta, size_t n_data);
void hearth_kv_disk_note_skip(hearth_kv_disk *d);

#endif
