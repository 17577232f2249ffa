/* test_core.c - status messages, half conversions, files, the thread pool, argmax. */
#include "testhelp.h"

#include "core/argmax.h"
#include "core/file.h"
#include "core/half.h"
#include "core/hist.h"
#include "core/pool.h"
#include "core/status.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

TEST(err_set_and_wrap) {
    hearth_err err = {0};
    CHECK_EQ(hearth_err_set(&err, HEARTH_EFORMAT, "tensor %s: bad", "x.weight"), HEARTH_EFORMAT);
    CHECK_STR(err.msg, "tensor x.weight: bad");
    hearth_err_wrap(&err, HEARTH_EFORMAT, "loading %s", "m.gguf");
    CHECK_STR(err.msg, "loading m.gguf: tensor x.weight: bad");
    CHECK_EQ(err.status, HEARTH_EFORMAT);
    CHECK_STR(hearth_status_name(HEARTH_ENOMEM), "out of memory");
}

TEST(half_roundtrip) {
    /* Every finite f16 value survives f16 -> f32 -> f16. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;
        float f = hearth_f16_to_f32((uint16_t)h);
        CHECK_MSG(hearth_f32_to_f16(f) == h, "f16 %04x -> %g -> %04x", h, f, hearth_f32_to_f16(f));
    }
    CHECK_NEAR(hearth_f16_to_f32(0x3c00), 1.0, 0);
    CHECK_NEAR(hearth_f16_to_f32(0xc000), -2.0, 0);
    CHECK_EQ(hearth_f32_to_f16(1e6f), 0x7c00); /* overflow -> inf */
    CHECK_NEAR(hearth_bf16_to_f32(hearth_f32_to_bf16(3.140625f)), 3.140625, 0);
    /* round to nearest even: 1 + 2^-8 lies exactly between two bf16 values */
    CHECK_EQ(hearth_f32_to_bf16(1.00390625f), 0x3f80);
}

TEST(file_errors_name_the_path) {
    hearth_err err = {0};
    hearth_mmap m;
    CHECK_EQ(hearth_mmap_open(&m, "/nonexistent/x.gguf", &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, "/nonexistent/x.gguf");
    char path[512];
    snprintf(path, sizeof path, "%s/f.txt", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("hello", f);
    fclose(f);
    char *buf;
    size_t n;
    CHECK_EQ(hearth_file_read(path, &buf, &n, &err), HEARTH_OK);
    CHECK_EQ(n, 5);
    CHECK_STR(buf, "hello");
    free(buf);
    CHECK_EQ(hearth_mmap_open(&m, path, &err), HEARTH_OK);
    CHECK_EQ(m.size, 5);
    CHECK(memcmp(m.data, "hello", 5) == 0);
    hearth_mmap_close(&m);
}

typedef struct { atomic_int hits[1000]; } pool_ctx;

static void pool_task(void *ctx, int task, int n_tasks) {
    (void)n_tasks;
    atomic_fetch_add(&((pool_ctx *)ctx)->hits[task], 1);
}

TEST(pool_runs_every_task_once) {
    hearth_pool *p;
    CHECK_EQ(hearth_pool_new(&p, 4, NULL), HEARTH_OK);
    pool_ctx *c = calloc(1, sizeof *c);
    for (int round = 0; round < 200; round++) {
        int n = 1 + (round * 37) % 1000;
        for (int i = 0; i < 1000; i++) atomic_store(&c->hits[i], 0);
        hearth_pool_run(p, pool_task, c, n);
        for (int i = 0; i < 1000; i++) CHECK_EQ(atomic_load(&c->hits[i]), i < n ? 1 : 0);
    }
    free(c);
    hearth_pool_free(p);
}

#include "core/sha256.h"

static void hex(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

TEST(sha256_known_answers) {
    uint8_t d[32];
    char h[65];
    hearth_sha256 s;
    hearth_sha256_init(&s);
    hearth_sha256_final(&s, d);
    hex(d, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hearth_sha256_init(&s);
    hearth_sha256_update(&s, "abc", 3);
    hearth_sha256_final(&s, d);
    hex(d, h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* two blocks, fed in uneven pieces */
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hearth_sha256_init(&s);
    for (size_t i = 0; i < strlen(m); i += 7) hearth_sha256_update(&s, m + i, strlen(m) - i < 7 ? strlen(m) - i : 7);
    hearth_sha256_final(&s, d);
    hex(d, h);
    CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* hearth_argmax is the plain loop's answer (the first index of the maximum; NaNs never win, a NaN at 0 stays)
 * on rows of every length up to 40 and of 1000, with ties, signed zeros, infinities and NaNs. */
TEST(argmax_is_the_first_maximum) {
    static const float pool[] = {0.0f, -0.0f, 1.0f, 1.0f, -1.0f, 2.5f, -INFINITY, INFINITY, NAN, 2.5f, -3.0f};
    uint64_t r = 12345;
    float x[1000];
    for (int trial = 0; trial < 3000; trial++) {
        int n = trial % 41 ? trial % 41 : 1000;
        for (int i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int pick = (int)((r >> 33) % 11);
            x[i] = trial % 3 ? pool[pick] : (float)((r >> 40) % 1000) * 0.01f;
            if (trial % 7 == 0 && pick > 8) x[i] = NAN;
        }
        int want = 0;
        for (int i = 1; i < n; i++)
            if (x[i] > x[want]) want = i;
        CHECK_MSG(hearth_argmax(x, n) == want, "trial %d n %d: %d, want %d", trial, n, hearth_argmax(x, n), want);
    }
}

/* A bucket holds what is at or below its bound (Prometheus's le); past the last, the +Inf one; merge adds. */
TEST(hist_buckets_are_upper_bounds) {
    static const double le[] = {0.1, 1.0, 10.0};
    hearth_hist h, g;
    hearth_hist_init(&h, le, 3);
    hearth_hist_init(&g, le, 3);
    const double v[] = {0.05, 0.1, 0.5, 1.0, 9.0, 11.0, 1e9};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) hearth_hist_observe(&h, v[i]);
    CHECK_EQ(h.counts[0], 2); /* 0.05 and 0.1 */
    CHECK_EQ(h.counts[1], 2);
    CHECK_EQ(h.counts[2], 1);
    CHECK_EQ(h.counts[3], 2);
    CHECK_EQ(h.count, 7);
    CHECK_NEAR(h.sum, 1e9 + 21.65, 1e-3);
    hearth_hist_observe(&g, 0.2);
    hearth_hist_merge(&g, &h);
    CHECK_EQ(g.counts[1], 3);
    CHECK_EQ(g.count, 8);
}
