/* sha256.h - SHA-256 (FIPS 180-4), for content-addressed cache keys and
 * model fingerprints. Incremental: init, update any number of times, final. */
#ifndef HEARTH_CORE_SHA256_H
#define HEARTH_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t len; /* bytes hashed so far */
    uint8_t buf[64];
    size_t n_buf;
} hearth_sha256;

void hearth_sha256_init(hearth_sha256 *s);
void hearth_sha256_update(hearth_sha256 *s, const void *data, size_t n);
void hearth_sha256_final(hearth_sha256 *s, uint8_t out[32]);

#endif
