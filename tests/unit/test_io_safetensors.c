/* test_io_safetensors.c - safetensors files and sharded dirs written here and
 * read back; malformed headers, offsets, dtypes, indexes and missing shards
 * must be rejected with a message naming the file and tensor. */
#define _GNU_SOURCE
#include "testhelp.h"

#include "core/dtype.h"
#include "core/half.h"
#include "io/safetensors.h"
#include "test_io_util.h"

#include <sys/stat.h>
#include <unistd.h>

/* u64 header length | header | data */
static int write_st(const char *path, const char *header, const void *data, size_t n) {
    gw_buf w = {0};
    gw_u64(&w, strlen(header));
    gw_put(&w, header, strlen(header));
    gw_put(&w, data, n);
    int rc = write_file(path, w.b, w.n);
    gw_free(&w);
    return rc;
}

/* The data of the small file: a = f32 [2,3] 0..5, b = f16 [4] {-1, 0.5, 2, 3},
 * c = bf16 scalar 1.5. 34 bytes. */
static void small_data(uint8_t out[34]) {
    for (int i = 0; i < 6; i++) {
        float f = (float)i;
        memcpy(out + 4 * i, &f, 4);
    }
    float hv[4] = {-1, 0.5f, 2, 3};
    for (int i = 0; i < 4; i++) {
        uint16_t h = hearth_f32_to_f16(hv[i]);
        memcpy(out + 24 + 2 * i, &h, 2);
    }
    uint16_t bf = hearth_f32_to_bf16(1.5f);
    memcpy(out + 32, &bf, 2);
}

#define SMALL_HEADER                                                                                 \
    "{\"__metadata__\":{\"format\":\"pt\"},"                                                         \
    "\"c\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[32,34]},"                              \
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"                             \
    "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]}}"

TEST(st_single_file_values) {
    char path[512];
    tmp_path(path, sizeof path, "small.safetensors");
    uint8_t data[34];
    small_data(data);
    CHECK(write_st(path, SMALL_HEADER, data, sizeof data) == 0);
    hearth_err err = {0};
    hearth_st_set *s;
    CHECK_MSG(hearth_st_open_file(&s, path, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(hearth_st_n_tensors(s), 3);
    CHECK_STR(hearth_st_tensor_at(s, 0)->name, "a"); /* sorted by name */
    CHECK_STR(hearth_st_tensor_at(s, 1)->name, "b");
    CHECK_STR(hearth_st_tensor_at(s, 2)->name, "c");
    CHECK(hearth_st_tensor_at(s, 3) == NULL);
    CHECK(hearth_st_find(s, "__metadata__") == NULL);
    CHECK(hearth_st_find(s, "d") == NULL);

    const hearth_st_tensor *a = hearth_st_find(s, "a");
    CHECK(a);
    CHECK_EQ(a->type, HEARTH_DT_F32);
    CHECK_EQ(a->n_dims, 2);
    CHECK(a->shape[0] == 2 && a->shape[1] == 3 && a->shape[2] == 1);
    CHECK_EQ(a->nbytes, 24);
    CHECK_EQ(hearth_st_numel(a), 6);
    CHECK_STR(hearth_st_tensor_file(s, a), path);
    for (int i = 0; i < 6; i++) {
        float f;
        memcpy(&f, (const uint8_t *)a->data + 4 * i, 4);
        CHECK_NEAR(f, i, 0);
    }
    const hearth_st_tensor *b = hearth_st_find(s, "b");
    CHECK(b && b->type == HEARTH_DT_F16 && b->n_dims == 1 && b->shape[0] == 4 && b->nbytes == 8);
    CHECK((const uint8_t *)b->data == (const uint8_t *)a->data + 24);
    uint16_t h;
    memcpy(&h, (const uint8_t *)b->data + 2, 2);
    CHECK_NEAR(hearth_f16_to_f32(h), 0.5, 0);
    const hearth_st_tensor *c = hearth_st_find(s, "c");
    CHECK(c && c->type == HEARTH_DT_BF16 && c->n_dims == 0 && c->nbytes == 2);
    CHECK_EQ(hearth_st_numel(c), 1);
    memcpy(&h, c->data, 2);
    CHECK_NEAR(hearth_bf16_to_f32(h), 1.5, 0);
    hearth_st_close(s);
}

TEST(st_every_truncation_is_an_error) {
    char path[512];
    tmp_path(path, sizeof path, "trunc.safetensors");
    uint8_t data[34];
    small_data(data);
    CHECK(write_st(path, SMALL_HEADER, data, sizeof data) == 0);
    size_t full = 8 + strlen(SMALL_HEADER) + sizeof data;
    for (size_t len = full; len-- > 0;) {
        CHECK(truncate(path, (off_t)len) == 0);
        hearth_err err = {0};
        hearth_st_set *s;
        hearth_status st = hearth_st_open_file(&s, path, &err);
        CHECK_MSG(st == HEARTH_EFORMAT, "prefix %zu: %s (%s)", len, hearth_status_name(st), err.msg);
        CHECK(s == NULL);
        CHECK_CONTAINS(err.msg, path);
    }
}

TEST(st_malformed_headers_are_named) {
    static const struct {
        const char *what, *header;
        hearth_status want;
        const char *msg1, *msg2;
    } cases[] = {
        {"bad JSON", "{\"a\":{\"dtype\":\"F32\",", HEARTH_EFORMAT, "header JSON", "line 1"},
        {"not an object", "[1,2]", HEARTH_EFORMAT, "not an object", ""},
        {"entry not an object", "{\"a\":3}", HEARTH_EFORMAT, "tensor a", "not an object"},
        {"missing dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", HEARTH_EFORMAT, "tensor a", "dtype"},
        {"unknown dtype", "{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", HEARTH_EFORMAT,
         "tensor a", "unknown dtype Q4"},
        {"unsupported dtype", "{\"w.ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
         HEARTH_ENOTSUP, "tensor w.ids", "dtype I64 not supported"},
        {"negative shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", HEARTH_EFORMAT,
         "tensor a", "shape[0]"},
        {"float shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", HEARTH_EFORMAT,
         "tensor a", "shape[0]"},
        {"nine dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}",
         HEARTH_ENOTSUP, "tensor a", "9 dimensions"},
        {"offsets arity", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", HEARTH_EFORMAT,
         "tensor a", "data_offsets"},
        {"offsets reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", HEARTH_EFORMAT,
         "tensor a", "outside the data buffer"},
        {"offsets past end", "{\"big\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
         HEARTH_EFORMAT, "tensor big", "data_offsets [8, 24) outside the data buffer (16 bytes)"},
        {"size mismatch", "{\"m\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", HEARTH_EFORMAT,
         "tensor m", "hold 16 bytes, shape [2, 3] x F32 needs 24"},
        {"shape overflow",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}",
         HEARTH_EFORMAT, "tensor a", "overflows"},
        {"duplicate key",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         HEARTH_EFORMAT, "header JSON", "duplicate"},
    };
    char path[512];
    tmp_path(path, sizeof path, "bad.safetensors");
    uint8_t data[16] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(write_st(path, cases[i].header, data, sizeof data) == 0);
        hearth_err err = {0};
        hearth_st_set *s = (hearth_st_set *)&err;
        hearth_status st = hearth_st_open_file(&s, path, &err);
        CHECK_MSG(st == cases[i].want, "%s: %s (%s)", cases[i].what, hearth_status_name(st), err.msg);
        CHECK(s == NULL);
        CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, cases[i].msg1) && strstr(err.msg, cases[i].msg2),
                  "%s: message \"%s\"", cases[i].what, err.msg);
    }

    /* header length field past the end of the file */
    gw_buf w = {0};
    gw_u64(&w, 1000);
    gw_put(&w, "{}", 2);
    CHECK(write_file(path, w.b, w.n) == 0);
    gw_free(&w);
    hearth_err err = {0};
    hearth_st_set *s;
    CHECK_EQ(hearth_st_open_file(&s, path, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "header length 1000 past end of file (size 10)");
    CHECK_EQ(hearth_st_open_file(&s, "/nonexistent/model.safetensors", &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, "/nonexistent/model.safetensors");

    /* an empty header and a zero-size tensor are valid */
    CHECK(write_st(path, "{\"z\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[0,0]}}", "", 0) == 0);
    CHECK_MSG(hearth_st_open_file(&s, path, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(hearth_st_n_tensors(s), 1);
    CHECK_EQ(hearth_st_find(s, "z")->nbytes, 0);
    CHECK_EQ(hearth_st_numel(hearth_st_find(s, "z")), 0);
    hearth_st_close(s);
}

/* A fresh model dir under the scratch dir. */
static const char *model_dir(char *buf, size_t cap, const char *name) {
    tmp_path(buf, cap, name);
    mkdir(buf, 0755);
    return buf;
}

static void file_in(char *buf, size_t cap, const char *dir, const char *name) {
    snprintf(buf, cap, "%s/%s", dir, name);
}

/* Two shards: shard 1 holds x.w (f32 [2]) and x.b (f16 [2]); shard 2 y.w (bf16 [3]). */
static int write_sharded(const char *dir, const char *index) {
    char p[600];
    float x[2] = {1.25f, -4};
    uint16_t xb[2] = {hearth_f32_to_f16(7), hearth_f32_to_f16(-0.25f)};
    uint8_t d1[12];
    memcpy(d1, x, 8);
    memcpy(d1 + 8, xb, 4);
    file_in(p, sizeof p, dir, "model-00001-of-00002.safetensors");
    if (write_st(p,
                 "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"x.b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
                 d1, sizeof d1))
        return -1;
    uint16_t y[3] = {hearth_f32_to_bf16(3), hearth_f32_to_bf16(-2), hearth_f32_to_bf16(0.5f)};
    file_in(p, sizeof p, dir, "model-00002-of-00002.safetensors");
    if (write_st(p, "{\"y.w\":{\"dtype\":\"BF16\",\"shape\":[3,1],\"data_offsets\":[0,6]}}", y, sizeof y)) return -1;
    file_in(p, sizeof p, dir, "model.safetensors.index.json");
    return write_text(p, index);
}

#define GOOD_INDEX                                                                                  \
    "{\"metadata\":{\"total_size\":18},\"weight_map\":{"                                            \
    "\"y.w\":\"model-00002-of-00002.safetensors\",\"x.w\":\"model-00001-of-00002.safetensors\","    \
    "\"x.b\":\"model-00001-of-00002.safetensors\"}}"

TEST(st_sharded_dir) {
    char dir[512], p[600];
    model_dir(dir, sizeof dir, "sharded");
    CHECK(write_sharded(dir, GOOD_INDEX) == 0);
    hearth_err err = {0};
    hearth_st_set *s;
    CHECK_MSG(hearth_st_open_dir(&s, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(hearth_st_n_tensors(s), 3);
    const hearth_st_tensor *t = hearth_st_find(s, "x.w");
    CHECK(t && t->type == HEARTH_DT_F32 && t->shape[0] == 2);
    float f;
    memcpy(&f, (const uint8_t *)t->data + 4, 4);
    CHECK_NEAR(f, -4, 0);
    file_in(p, sizeof p, dir, "model-00001-of-00002.safetensors");
    CHECK_STR(hearth_st_tensor_file(s, t), p);
    t = hearth_st_find(s, "x.b");
    uint16_t h;
    memcpy(&h, t->data, 2);
    CHECK_NEAR(hearth_f16_to_f32(h), 7, 0);
    t = hearth_st_find(s, "y.w");
    CHECK(t && t->type == HEARTH_DT_BF16 && t->n_dims == 2 && t->shape[0] == 3 && t->shape[1] == 1);
    memcpy(&h, (const uint8_t *)t->data + 2, 2);
    CHECK_NEAR(hearth_bf16_to_f32(h), -2, 0);
    file_in(p, sizeof p, dir, "model-00002-of-00002.safetensors");
    CHECK_STR(hearth_st_tensor_file(s, t), p);
    hearth_st_close(s);
}

TEST(st_single_file_dir) {
    char dir[512], p[600];
    model_dir(dir, sizeof dir, "single");
    file_in(p, sizeof p, dir, "model.safetensors");
    uint8_t data[34];
    small_data(data);
    CHECK(write_st(p, SMALL_HEADER, data, sizeof data) == 0);
    hearth_err err = {0};
    hearth_st_set *s;
    CHECK_MSG(hearth_st_open_dir(&s, dir, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(hearth_st_n_tensors(s), 3);
    CHECK_STR(hearth_st_tensor_file(s, hearth_st_find(s, "b")), p);
    hearth_st_close(s);

    char empty[512];
    model_dir(empty, sizeof empty, "empty_model");
    CHECK_EQ(hearth_st_open_dir(&s, empty, &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, empty);
    CHECK_CONTAINS(err.msg, "no model.safetensors");
}

TEST(st_bad_index) {
    static const struct {
        const char *what, *index;
        hearth_status want;
        const char *msg1, *msg2;
    } cases[] = {
        {"missing shard",
         "{\"weight_map\":{\"x.w\":\"model-00001-of-00002.safetensors\",\"z\":\"model-00003-of-00003.safetensors\"}}",
         HEARTH_ENOENT, "model-00003-of-00003.safetensors", "holding tensor z) not found"},
        {"wrong shard",
         "{\"weight_map\":{\"x.w\":\"model-00002-of-00002.safetensors\",\"y.w\":\"model-00002-of-00002.safetensors\","
         "\"x.b\":\"model-00001-of-00002.safetensors\"}}",
         HEARTH_EFORMAT, "tensor x.w: listed in shard model-00002-of-00002.safetensors but found in", "00001"},
        {"tensor absent",
         "{\"weight_map\":{\"x.w\":\"model-00001-of-00002.safetensors\",\"q.w\":\"model-00001-of-00002.safetensors\"}}",
         HEARTH_EFORMAT, "tensor q.w", "not found in any shard"},
        {"escape", "{\"weight_map\":{\"x.w\":\"../model-00001-of-00002.safetensors\"}}", HEARTH_EFORMAT,
         "weight_map[x.w]", "inside the model dir"},
        {"absolute", "{\"weight_map\":{\"x.w\":\"/etc/passwd\"}}", HEARTH_EFORMAT, "weight_map[x.w]", ""},
        {"not a string", "{\"weight_map\":{\"x.w\":3}}", HEARTH_EFORMAT, "weight_map[x.w]", ""},
        {"no weight_map", "{\"metadata\":{}}", HEARTH_EFORMAT, "weight_map", ""},
        {"bad JSON", "{\"weight_map\":{", HEARTH_EFORMAT, "JSON", "line 1"},
    };
    char dir[512];
    model_dir(dir, sizeof dir, "badindex");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(write_sharded(dir, cases[i].index) == 0);
        hearth_err err = {0};
        hearth_st_set *s = (hearth_st_set *)&err;
        hearth_status st = hearth_st_open_dir(&s, dir, &err);
        CHECK_MSG(st == cases[i].want, "%s: %s (%s)", cases[i].what, hearth_status_name(st), err.msg);
        CHECK(s == NULL);
        CHECK_MSG(strstr(err.msg, "model.safetensors.index.json") && strstr(err.msg, cases[i].msg1) &&
                      strstr(err.msg, cases[i].msg2),
                  "%s: message \"%s\"", cases[i].what, err.msg);
    }

    /* the same tensor in two shards */
    char p[600];
    CHECK(write_sharded(dir, GOOD_INDEX) == 0);
    file_in(p, sizeof p, dir, "model-00002-of-00002.safetensors");
    uint8_t d[8] = {0};
    CHECK(write_st(p,
                   "{\"y.w\":{\"dtype\":\"BF16\",\"shape\":[3,1],\"data_offsets\":[0,6]},"
                   "\"x.b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[6,8]}}",
                   d, sizeof d) == 0);
    hearth_err err = {0};
    hearth_st_set *s;
    CHECK_EQ(hearth_st_open_dir(&s, dir, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "tensor x.b appears twice");
    CHECK_CONTAINS(err.msg, "model-00002-of-00002.safetensors");

    /* a broken shard is named, not the index */
    CHECK(write_sharded(dir, GOOD_INDEX) == 0);
    CHECK(write_st(p, "{\"y.w\":{\"dtype\":\"BF16\",\"shape\":[3,1],\"data_offsets\":[0,60]}}", d, sizeof d) == 0);
    CHECK_EQ(hearth_st_open_dir(&s, dir, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, p);
    CHECK_CONTAINS(err.msg, "tensor y.w");
}
