/* test_io.c - the GGUF reader: a real model file, files written here and read
 * back value by value, and broken files (every truncation, patched fields,
 * random byte flips) that must give an error naming the file and the thing at
 * fault, never a crash. */
#define _GNU_SOURCE
#include "testhelp.h"

#include "core/dtype.h"
#include "core/half.h"
#include "io/gguf.h"
#include "test_io_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------- the small file */

/* Where the interesting fields of the small file are, for patching. */
typedef struct {
    size_t version, n_kv, str_len, str_type, align_val, key_u8;
    size_t info[3]; /* start of each tensor info */
} small_offs;

#define SMALL_NKV 17
static float small_a[12];
static uint8_t small_b[68];
static uint16_t small_c[8];

static const gw_tensor small_tensors[3] = {
    {"tok.a", 2, {4, 3, 1, 1}, HEARTH_DT_F32, small_a, sizeof small_a},
    {"tok.b", 2, {32, 2, 1, 1}, HEARTH_DT_Q8_0, small_b, sizeof small_b},
    {"tok.c", 1, {8, 1, 1, 1}, HEARTH_DT_F16, small_c, sizeof small_c},
};

/* A valid v3 file with every value type, a string with a NUL inside, a string
 * array, a nested array, alignment 64 and three tensors. */
static void build_small(gw_buf *w, small_offs *o) {
    for (int i = 0; i < 12; i++) small_a[i] = (float)i * 0.5f;
    for (int i = 0; i < 68; i++) small_b[i] = (uint8_t)(i * 7 + 1);
    for (int i = 0; i < 8; i++) small_c[i] = hearth_f32_to_f16((float)i - 3.0f);

    memset(o, 0, sizeof *o);
    gw_header(w, 3, 3, SMALL_NKV);
    o->version = 4;
    o->n_kv = 16;
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv(w, "general.alignment", GW_U32);
    o->align_val = w->n;
    gw_u32(w, 64);
    o->key_u8 = w->n;
    gw_kv(w, "t.u8", GW_U8), gw_u8(w, 200);
    gw_kv(w, "t.i8", GW_I8), gw_u8(w, (uint8_t)-5);
    gw_kv(w, "t.u16", GW_U16), gw_put(w, &(uint16_t){65000}, 2);
    gw_kv(w, "t.i16", GW_I16), gw_put(w, &(int16_t){-300}, 2);
    gw_kv(w, "t.i32", GW_I32), gw_put(w, &(int32_t){-70000}, 4);
    gw_kv(w, "t.u64", GW_U64), gw_u64(w, 1ull << 40);
    gw_kv(w, "t.i64", GW_I64), gw_put(w, &(int64_t){-(1ll << 40)}, 8);
    gw_kv_f32(w, "t.f32", 0.5f);
    gw_kv(w, "t.f64", GW_F64), gw_put(w, &(double){-2.25}, 8);
    gw_kv(w, "t.bool", GW_BOOL), gw_u8(w, 1);
    o->str_type = w->n + 8 + strlen("t.str_nul");
    gw_kv(w, "t.str_nul", GW_STRING);
    o->str_len = w->n;
    gw_strn(w, "a\0b", 3);
    gw_kv(w, "tokenizer.ggml.tokens", GW_ARRAY);
    gw_u32(w, GW_STRING), gw_u64(w, 4);
    gw_str(w, "<s>"), gw_strn(w, "", 0), gw_strn(w, "x\0y", 3), gw_str(w, "hello");
    gw_kv(w, "t.arr_i32", GW_ARRAY);
    gw_u32(w, GW_I32), gw_u64(w, 3);
    gw_put(w, (int32_t[]){1, -2, 3}, 12);
    gw_kv(w, "t.nested", GW_ARRAY); /* [[1, 2], [3]] as u8 */
    gw_u32(w, GW_ARRAY), gw_u64(w, 2);
    gw_u32(w, GW_U8), gw_u64(w, 2), gw_u8(w, 1), gw_u8(w, 2);
    gw_u32(w, GW_U8), gw_u64(w, 1), gw_u8(w, 3);
    gw_kv(w, "t.big_u64", GW_U64), gw_u64(w, UINT64_MAX);
    gw_tensors(w, small_tensors, 3, 64, o->info);
}

/* Offsets inside tensor info i (names are all 5 bytes long). */
#define INFO_NDIMS(o, i) ((o)->info[i] + 8 + 5)
#define INFO_NE0(o, i) ((o)->info[i] + 8 + 5 + 4)
#define INFO_TYPE(o, i) (INFO_NE0(o, i) + 8 * (size_t)small_tensors[i].n_dims)
#define INFO_OFFSET(o, i) (INFO_TYPE(o, i) + 4)

static void patch_u32(gw_buf *w, size_t at, uint32_t v) { memcpy(w->b + at, &v, 4); }
static void patch_u64(gw_buf *w, size_t at, uint64_t v) { memcpy(w->b + at, &v, 8); }

TEST(gguf_small_file_values) {
    gw_buf w = {0};
    small_offs o;
    build_small(&w, &o);
    char path[512];
    tmp_path(path, sizeof path, "small.gguf");
    CHECK(write_file(path, w.b, w.n) == 0);
    gw_free(&w);

    hearth_err err = {0};
    hearth_gguf *g = NULL;
    CHECK_MSG(hearth_gguf_open(&g, path, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_STR(hearth_gguf_path(g), path);
    CHECK_EQ(hearth_gguf_version(g), 3);
    CHECK_EQ(hearth_gguf_alignment(g), 64);
    CHECK_EQ(hearth_gguf_n_kv(g), SMALL_NKV);
    CHECK_STR(hearth_gguf_key_at(g, 0), "general.architecture");
    CHECK(hearth_gguf_key_at(g, SMALL_NKV) == NULL);
    CHECK(hearth_gguf_key_at(g, -1) == NULL);
    CHECK_EQ(hearth_gguf_find_key(g, "t.u8"), 2);
    CHECK_EQ(hearth_gguf_find_key(g, "t.u"), -1);
    CHECK_EQ(hearth_gguf_kv_type(g, 2), HEARTH_GGUF_U8);
    CHECK_EQ(hearth_gguf_kv_type(g, hearth_gguf_find_key(g, "t.nested")), HEARTH_GGUF_ARRAY);

    int64_t v;
    struct { const char *key; int64_t want; } ints[] = {
        {"t.u8", 200}, {"t.i8", -5}, {"t.u16", 65000}, {"t.i16", -300}, {"t.i32", -70000},
        {"t.u64", 1ll << 40}, {"t.i64", -(1ll << 40)}, {"t.bool", 1}, {"general.alignment", 64},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        CHECK_MSG(hearth_gguf_get_int(g, ints[i].key, &v, &err) == HEARTH_OK, "%s", err.msg);
        CHECK_MSG(v == ints[i].want, "%s: %lld", ints[i].key, (long long)v);
    }
    double d;
    CHECK_EQ(hearth_gguf_get_float(g, "t.f32", &d, &err), HEARTH_OK);
    CHECK_NEAR(d, 0.5, 0);
    CHECK_EQ(hearth_gguf_get_float(g, "t.f64", &d, &err), HEARTH_OK);
    CHECK_NEAR(d, -2.25, 0);
    CHECK_EQ(hearth_gguf_get_float(g, "t.i32", &d, &err), HEARTH_OK);
    CHECK_NEAR(d, -70000, 0);
    CHECK_EQ(hearth_gguf_get_float(g, "t.big_u64", &d, &err), HEARTH_OK);
    CHECK_NEAR(d, 18446744073709551615.0, 0);
    int b = 0;
    CHECK_EQ(hearth_gguf_get_bool(g, "t.bool", &b, &err), HEARTH_OK);
    CHECK_EQ(b, 1);

    /* getter errors: missing key, wrong type, out of range; messages name key and file */
    CHECK_EQ(hearth_gguf_get_int(g, "no.such.key", &v, &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, "no.such.key");
    CHECK_CONTAINS(err.msg, path);
    CHECK_EQ(hearth_gguf_get_int(g, "t.f32", &v, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "t.f32");
    CHECK_CONTAINS(err.msg, path);
    CHECK_EQ(hearth_gguf_get_int(g, "t.big_u64", &v, &err), HEARTH_ERANGE);
    CHECK_CONTAINS(err.msg, "t.big_u64");
    CHECK_EQ(hearth_gguf_get_float(g, "t.str_nul", &d, &err), HEARTH_EFORMAT);
    CHECK_EQ(hearth_gguf_get_float(g, "t.bool", &d, &err), HEARTH_EFORMAT);
    CHECK_EQ(hearth_gguf_get_bool(g, "t.f64", &b, &err), HEARTH_EFORMAT);
    const char *s;
    size_t len;
    CHECK_EQ(hearth_gguf_get_str(g, "t.u8", &s, &len, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "t.u8");
    CHECK_EQ(hearth_gguf_get_str(g, "nope", &s, &len, &err), HEARTH_ENOENT);

    CHECK_EQ(hearth_gguf_get_str(g, "general.architecture", &s, &len, &err), HEARTH_OK);
    CHECK_STR(s, "llama");
    CHECK_EQ(len, 5);
    CHECK_EQ(hearth_gguf_get_str(g, "t.str_nul", &s, &len, &err), HEARTH_OK);
    CHECK_EQ(len, 3);
    CHECK(memcmp(s, "a\0b", 4) == 0); /* including the terminating NUL */

    hearth_gguf_type et;
    uint64_t n;
    const void *data;
    CHECK_EQ(hearth_gguf_get_arr(g, "t.arr_i32", &et, &n, &data, &err), HEARTH_OK);
    CHECK_EQ(et, HEARTH_GGUF_I32);
    CHECK_EQ(n, 3);
    int32_t arr[3];
    memcpy(arr, data, sizeof arr);
    CHECK(arr[0] == 1 && arr[1] == -2 && arr[2] == 3);
    CHECK_EQ(hearth_gguf_get_arr(g, "t.nested", &et, &n, &data, &err), HEARTH_OK);
    CHECK_EQ(et, HEARTH_GGUF_ARRAY);
    CHECK_EQ(n, 2);
    CHECK(data == NULL);
    CHECK_EQ(hearth_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, &err), HEARTH_OK);
    CHECK_EQ(et, HEARTH_GGUF_STRING);
    CHECK_EQ(n, 4);
    CHECK(data == NULL);
    CHECK_EQ(hearth_gguf_get_arr(g, "t.u8", &et, &n, &data, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "t.u8");
    CHECK_STR(hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 0, &len), "<s>");
    CHECK_EQ(len, 3);
    CHECK_STR(hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 1, &len), "");
    CHECK_EQ(len, 0);
    s = hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 2, &len);
    CHECK(s && len == 3 && memcmp(s, "x\0y", 4) == 0);
    CHECK_STR(hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 3, NULL), "hello");
    CHECK(hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 4, &len) == NULL);
    CHECK(hearth_gguf_arr_str(g, "t.arr_i32", 0, &len) == NULL);
    CHECK(hearth_gguf_arr_str(g, "missing", 0, &len) == NULL);

    CHECK_EQ(hearth_gguf_n_tensors(g), 3);
    CHECK(hearth_gguf_tensor_at(g, 3) == NULL);
    CHECK(hearth_gguf_find_tensor(g, "tok.d") == NULL);
    for (int i = 0; i < 3; i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        CHECK(t == hearth_gguf_find_tensor(g, small_tensors[i].name));
        CHECK_STR(t->name, small_tensors[i].name);
        CHECK_EQ(t->n_dims, small_tensors[i].n_dims);
        for (int k = 0; k < 4; k++) CHECK_EQ(t->ne[k], small_tensors[i].ne[k]);
        CHECK_EQ(t->type, small_tensors[i].type);
        CHECK_EQ(t->nbytes, small_tensors[i].nbytes);
        CHECK_EQ((uintptr_t)t->data % 64, 0);
        CHECK(memcmp(t->data, small_tensors[i].data, t->nbytes) == 0);
    }
    const hearth_gguf_tensor *last = hearth_gguf_tensor_at(g, 2);
    CHECK_EQ((size_t)((const char *)last->data - (const char *)hearth_gguf_tensor_at(g, 0)->data) +
                 hearth_gguf_data_offset(g) + last->nbytes,
             hearth_gguf_file_size(g));
    CHECK_NEAR(((const float *)hearth_gguf_find_tensor(g, "tok.a")->data)[11], 5.5, 0);
    hearth_gguf_close(g);
}

TEST(gguf_version2_is_read) {
    gw_buf w = {0};
    small_offs o;
    build_small(&w, &o);
    patch_u32(&w, o.version, 2);
    char path[512];
    tmp_path(path, sizeof path, "v2.gguf");
    CHECK(write_file(path, w.b, w.n) == 0);
    gw_free(&w);
    hearth_err err = {0};
    hearth_gguf *g;
    CHECK_MSG(hearth_gguf_open(&g, path, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(hearth_gguf_version(g), 2);
    CHECK_EQ(hearth_gguf_n_tensors(g), 3);
    hearth_gguf_close(g);
}

/* Every strict prefix of the file must be rejected with a message naming the
 * file; none may crash (ASan run included). */
TEST(gguf_every_truncation_is_an_error) {
    gw_buf w = {0};
    small_offs o;
    build_small(&w, &o);
    char path[512];
    tmp_path(path, sizeof path, "trunc.gguf");
    CHECK(write_file(path, w.b, w.n) == 0);
    hearth_err err = {0};
    hearth_gguf *g;
    CHECK_EQ(hearth_gguf_open(&g, path, &err), HEARTH_OK);
    hearth_gguf_close(g);
    for (size_t len = w.n; len-- > 0;) {
        CHECK(truncate(path, (off_t)len) == 0);
        err = (hearth_err){0};
        hearth_status st = hearth_gguf_open(&g, path, &err);
        CHECK_MSG(st != HEARTH_OK, "prefix of %zu bytes (of %zu) opened", len, w.n);
        CHECK(g == NULL);
        CHECK_EQ(st, HEARTH_EFORMAT);
        CHECK_CONTAINS(err.msg, path);
    }
    gw_free(&w);
}

typedef struct {
    const char *what;
    void (*patch)(gw_buf *w, const small_offs *o);
    hearth_status want;
    const char *msg1, *msg2; /* substrings the error must contain (besides the path) */
} corruption;

static void p_magic(gw_buf *w, const small_offs *o) { memcpy(w->b, "GGML", 4); }
static void p_version1(gw_buf *w, const small_offs *o) { patch_u32(w, o->version, 1); }
static void p_version9(gw_buf *w, const small_offs *o) { patch_u32(w, o->version, 9); }
static void p_bigendian(gw_buf *w, const small_offs *o) { patch_u32(w, o->version, 0x03000000u); }
static void p_nkv_huge(gw_buf *w, const small_offs *o) { patch_u64(w, o->n_kv, 1ull << 40); }
static void p_ntensors_huge(gw_buf *w, const small_offs *o) { patch_u64(w, 8, UINT64_MAX); }
static void p_strlen(gw_buf *w, const small_offs *o) { patch_u64(w, o->str_len, 1ull << 50); }
static void p_valtype(gw_buf *w, const small_offs *o) { patch_u32(w, o->str_type, 13); }
static void p_keylen(gw_buf *w, const small_offs *o) { patch_u64(w, o->key_u8, w->n); }
static void p_keynul(gw_buf *w, const small_offs *o) { w->b[o->key_u8 + 8 + 1] = 0; }
static void p_dupkey(gw_buf *w, const small_offs *o) { memcpy(w->b + o->key_u8 + 8, "t.i8", 4); } /* t.u8 -> t.i8 */
static void p_align3(gw_buf *w, const small_offs *o) { patch_u32(w, o->align_val, 48); }
static void p_align0(gw_buf *w, const small_offs *o) { patch_u32(w, o->align_val, 0); }
static void p_ndims5(gw_buf *w, const small_offs *o) { patch_u32(w, INFO_NDIMS(o, 1), 5); }
static void p_ndims0(gw_buf *w, const small_offs *o) { patch_u32(w, INFO_NDIMS(o, 1), 0); }
static void p_ne0(gw_buf *w, const small_offs *o) { patch_u64(w, INFO_NE0(o, 1), 0); }
static void p_ne_overflow(gw_buf *w, const small_offs *o) {
    patch_u64(w, INFO_NE0(o, 0), 1ull << 40);
    patch_u64(w, INFO_NE0(o, 0) + 8, 1ull << 40);
}
static void p_ne_block(gw_buf *w, const small_offs *o) { patch_u64(w, INFO_NE0(o, 1), 16); }
static void p_type(gw_buf *w, const small_offs *o) { patch_u32(w, INFO_TYPE(o, 1), 99); }
/* a type ggml has and hearth does not read: named as ggml names it */
static void p_type_iq2(gw_buf *w, const small_offs *o) { patch_u32(w, INFO_TYPE(o, 1), 16); }
/* hearth's internal KV element type is no type a file may carry */
static void p_type_e4m3(gw_buf *w, const small_offs *o) { patch_u32(w, INFO_TYPE(o, 2), HEARTH_DT_E4M3); }
static void p_misaligned(gw_buf *w, const small_offs *o) {
    uint64_t off;
    memcpy(&off, w->b + INFO_OFFSET(o, 1), 8);
    patch_u64(w, INFO_OFFSET(o, 1), off + 4);
}
static void p_pastend(gw_buf *w, const small_offs *o) { patch_u64(w, INFO_OFFSET(o, 1), 1ull << 20); }
static void p_offset_wrap(gw_buf *w, const small_offs *o) { patch_u64(w, INFO_OFFSET(o, 2), UINT64_MAX - 63); }
static void p_bigger(gw_buf *w, const small_offs *o) { patch_u64(w, INFO_NE0(o, 2) , 64); }
static void p_dupname(gw_buf *w, const small_offs *o) { w->b[o->info[2] + 8 + 4] = 'a'; } /* tok.c -> tok.a */
static void p_emptyname(gw_buf *w, const small_offs *o) { patch_u64(w, o->info[0], 0); }

TEST(gguf_corrupt_fields_are_named) {
    static const corruption cases[] = {
        {"wrong magic", p_magic, HEARTH_EFORMAT, "not a GGUF file", "47 47 4d 4c"},
        {"version 1", p_version1, HEARTH_ENOTSUP, "version 1", "need 2 or 3"},
        {"version 9", p_version9, HEARTH_ENOTSUP, "version 9", ""},
        {"big-endian", p_bigendian, HEARTH_ENOTSUP, "big-endian", ""},
        {"n_kv huge", p_nkv_huge, HEARTH_EFORMAT, "implausible", "1099511627776 metadata"},
        {"n_tensors huge", p_ntensors_huge, HEARTH_EFORMAT, "implausible", "tensors"},
        {"string length past end", p_strlen, HEARTH_EFORMAT, "key t.str_nul", "past end of file"},
        {"unknown value type", p_valtype, HEARTH_EFORMAT, "key t.str_nul", "unknown value type 13"},
        {"key length past end", p_keylen, HEARTH_EFORMAT, "metadata entry #2", "past end of file"},
        {"key with NUL", p_keynul, HEARTH_EFORMAT, "metadata entry #2", "NUL"},
        {"duplicate key", p_dupkey, HEARTH_EFORMAT, "duplicate metadata key t.i8", ""},
        {"alignment 48", p_align3, HEARTH_EFORMAT, "general.alignment", "48 is not a power of two"},
        {"alignment 0", p_align0, HEARTH_EFORMAT, "general.alignment", "not a power of two"},
        {"n_dims 5", p_ndims5, HEARTH_EFORMAT, "tensor tok.b", "n_dims 5"},
        {"n_dims 0", p_ndims0, HEARTH_EFORMAT, "tensor tok.b", "n_dims 0"},
        {"ne 0", p_ne0, HEARTH_EFORMAT, "tensor tok.b", "ne[0] = 0 (dimensions must be > 0)"},
        {"ne overflow", p_ne_overflow, HEARTH_EFORMAT, "tensor tok.a", "ne[1] = 1099511627776: element count overflows"},
        {"ne0 not a block multiple", p_ne_block, HEARTH_EFORMAT, "tensor tok.b", "not a multiple of the q8_0 block size 32"},
        {"unknown tensor type", p_type, HEARTH_ENOTSUP, "tensor tok.b", "unknown tensor type 99"},
        {"unsupported ggml type", p_type_iq2, HEARTH_ENOTSUP, "tensor tok.b",
         "tensor type iq2_xxs (ggml type 16) is not supported"},
        {"internal tensor type", p_type_e4m3, HEARTH_ENOTSUP, "tensor tok.c", "unknown tensor type 65536"},
        {"misaligned offset", p_misaligned, HEARTH_EFORMAT, "tensor tok.b", "not a multiple of the alignment 64"},
        {"offset past end", p_pastend, HEARTH_EFORMAT, "tensor tok.b: data [", "past end of file (size"},
        {"offset wraps", p_offset_wrap, HEARTH_EFORMAT, "tensor tok.c: data offset 18446744073709551552", "past end of file"},
        {"data bigger than file", p_bigger, HEARTH_EFORMAT, "tensor tok.c", "past end of file"},
        {"duplicate tensor", p_dupname, HEARTH_EFORMAT, "duplicate tensor name tok.a", ""},
        {"empty tensor name", p_emptyname, HEARTH_EFORMAT, "tensor #0", "empty tensor name"},
    };
    gw_buf good = {0};
    small_offs o;
    build_small(&good, &o);
    char path[512];
    tmp_path(path, sizeof path, "corrupt.gguf");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gw_buf w = {0};
        gw_put(&w, good.b, good.n);
        cases[i].patch(&w, &o);
        CHECK(write_file(path, w.b, w.n) == 0);
        gw_free(&w);
        hearth_err err = {0};
        hearth_gguf *g = (hearth_gguf *)&err; /* must be reset to NULL on failure */
        hearth_status st = hearth_gguf_open(&g, path, &err);
        CHECK_MSG(st == cases[i].want, "%s: status %s (%s), want %s", cases[i].what, hearth_status_name(st),
                  err.msg, hearth_status_name(cases[i].want));
        CHECK_MSG(g == NULL, "%s: out not reset", cases[i].what);
        CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, cases[i].msg1) && strstr(err.msg, cases[i].msg2),
                  "%s: message \"%s\"", cases[i].what, err.msg);
    }
    gw_free(&good);
}

TEST(gguf_nested_arrays_bounded) {
    char path[512];
    tmp_path(path, sizeof path, "deep.gguf");
    for (int depth = 1; depth <= 12; depth++) {
        gw_buf w = {0};
        gw_header(&w, 3, 0, 1);
        gw_kv(&w, "deep", GW_ARRAY);
        for (int d = 1; d < depth; d++) gw_u32(&w, GW_ARRAY), gw_u64(&w, 1);
        gw_u32(&w, GW_U8), gw_u64(&w, 1), gw_u8(&w, 7);
        CHECK(write_file(path, w.b, w.n) == 0);
        gw_free(&w);
        hearth_err err = {0};
        hearth_gguf *g;
        hearth_status st = hearth_gguf_open(&g, path, &err);
        if (depth <= 8) {
            CHECK_MSG(st == HEARTH_OK, "depth %d: %s", depth, err.msg);
            hearth_gguf_type et;
            uint64_t n;
            CHECK_EQ(hearth_gguf_get_arr(g, "deep", &et, &n, NULL, &err), HEARTH_OK);
            CHECK_EQ(et, depth == 1 ? HEARTH_GGUF_U8 : HEARTH_GGUF_ARRAY);
            CHECK_EQ(hearth_gguf_n_tensors(g), 0);
            hearth_gguf_close(g);
        } else {
            CHECK_EQ(st, HEARTH_EFORMAT);
            CHECK_CONTAINS(err.msg, "key deep");
            CHECK_CONTAINS(err.msg, "nested deeper");
        }
    }
}

TEST(gguf_open_errors) {
    hearth_err err = {0};
    hearth_gguf *g;
    CHECK_EQ(hearth_gguf_open(&g, "/nonexistent/m.gguf", &err), HEARTH_ENOENT);
    CHECK_CONTAINS(err.msg, "/nonexistent/m.gguf");
    CHECK(hearth_gguf_open(&g, test_tmpdir(), &err) != HEARTH_OK);
    char path[512];
    tmp_path(path, sizeof path, "empty.gguf");
    CHECK(write_file(path, "", 0) == 0);
    CHECK_EQ(hearth_gguf_open(&g, path, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, "not a GGUF file");
}

/* Random byte flips in the header: open either fails with a message naming
 * the file, or succeeds and then every accessor works on every entry. */
TEST(gguf_random_flips_never_crash) {
    gw_buf good = {0};
    small_offs o;
    build_small(&good, &o);
    size_t header_end = o.info[2] + 64; /* infos + padding; flips in data are harmless */
    char path[512];
    tmp_path(path, sizeof path, "flip.gguf");
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int opened = 0, rejected = 0;
    for (int iter = 0; iter < 1500; iter++) {
        gw_buf w = {0};
        gw_put(&w, good.b, good.n);
        int flips = 1 + iter % 4;
        for (int f = 0; f < flips; f++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(rng >> 33) % header_end;
            w.b[at] ^= (uint8_t)(1u << ((rng >> 20) & 7));
        }
        CHECK(write_file(path, w.b, w.n) == 0);
        gw_free(&w);
        hearth_err err = {0};
        hearth_gguf *g;
        if (hearth_gguf_open(&g, path, &err) != HEARTH_OK) {
            CHECK_CONTAINS(err.msg, path);
            rejected++;
            continue;
        }
        opened++;
        for (int64_t i = 0; i < hearth_gguf_n_kv(g); i++) {
            const char *k = hearth_gguf_key_at(g, i);
            CHECK(k && hearth_gguf_find_key(g, k) == i);
            int64_t iv;
            double dv;
            const char *s;
            size_t len;
            hearth_gguf_type et;
            uint64_t n;
            const void *data;
            hearth_gguf_get_int(g, k, &iv, &err);
            hearth_gguf_get_float(g, k, &dv, &err);
            hearth_gguf_get_str(g, k, &s, &len, &err);
            if (hearth_gguf_get_arr(g, k, &et, &n, &data, &err) == HEARTH_OK && et == HEARTH_GGUF_STRING)
                for (uint64_t j = 0; j < n; j++) CHECK(hearth_gguf_arr_str_at(g, i, j, &len) != NULL);
        }
        for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
            const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
            CHECK(hearth_gguf_find_tensor(g, t->name) == t);
            const uint8_t *p = t->data;
            volatile uint8_t sum = 0;
            for (size_t j = 0; j < t->nbytes; j++) sum ^= p[j];
        }
        hearth_gguf_close(g);
    }
    CHECK(opened > 0 && rejected > 0);
    gw_free(&good);
}

/* ------------------------------------------------------ the real model */

#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

TEST(gguf_real_smollm2) {
    const char *path = test_path(SMOL);
    if (access(path, R_OK) != 0) {
        printf("  note: %s absent, test skipped\n", path);
        return;
    }
    hearth_err err = {0};
    hearth_gguf *g;
    CHECK_MSG(hearth_gguf_open(&g, path, &err) == HEARTH_OK, "%s", err.msg);
    CHECK_EQ(hearth_gguf_version(g), 3);
    const char *arch;
    CHECK_EQ(hearth_gguf_get_str(g, "general.architecture", &arch, NULL, &err), HEARTH_OK);
    CHECK_STR(arch, "llama");
    int64_t v;
    CHECK_EQ(hearth_gguf_get_int(g, "llama.block_count", &v, &err), HEARTH_OK);
    CHECK_EQ(v, 30);
    CHECK_EQ(hearth_gguf_get_int(g, "llama.embedding_length", &v, &err), HEARTH_OK);
    CHECK_EQ(v, 576);
    CHECK_EQ(hearth_gguf_get_int(g, "llama.attention.head_count_kv", &v, &err), HEARTH_OK);
    CHECK_EQ(v, 3);
    double eps;
    CHECK_EQ(hearth_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &eps, &err), HEARTH_OK);
    CHECK_NEAR(eps, 1e-5, 1e-12);

    hearth_gguf_type et;
    uint64_t n;
    const void *data;
    CHECK_EQ(hearth_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, &err), HEARTH_OK);
    CHECK_EQ(et, HEARTH_GGUF_STRING);
    CHECK_EQ(n, 49152);
    CHECK_STR(hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 0, NULL), "<|endoftext|>");
    CHECK_STR(hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", 2, NULL), "<|im_end|>");
    CHECK_EQ(hearth_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n, &data, &err), HEARTH_OK);
    CHECK_EQ(et, HEARTH_GGUF_I32);
    CHECK_EQ(n, 49152);
    CHECK_EQ(hearth_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n, &data, &err), HEARTH_OK);
    CHECK_EQ(n, 48900);

    /* 30 blocks x 9 tensors + token_embd + output_norm; output.weight is tied */
    CHECK_EQ(hearth_gguf_n_tensors(g), 272);
    CHECK(hearth_gguf_find_tensor(g, "output.weight") == NULL);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t);
    CHECK_EQ(t->n_dims, 2);
    CHECK(t->ne[0] == 576 && t->ne[1] == 49152 && t->ne[2] == 1 && t->ne[3] == 1);
    CHECK_EQ(t->type, HEARTH_DT_Q8_0);
    CHECK_EQ(t->nbytes, (size_t)49152 * 576 / 32 * 34);
    t = hearth_gguf_find_tensor(g, "blk.29.attn_k.weight");
    CHECK(t);
    CHECK(t->ne[0] == 576 && t->ne[1] == 192);
    CHECK_EQ(t->type, HEARTH_DT_Q4_1);
    t = hearth_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    CHECK(t && t->ne[0] == 1536 && t->ne[1] == 576 && t->type == HEARTH_DT_Q4_1);
    t = hearth_gguf_find_tensor(g, "output_norm.weight");
    CHECK(t && t->n_dims == 1 && t->ne[0] == 576 && t->type == HEARTH_DT_F32);
    /* RMSNorm gains of a trained model: finite and mostly positive */
    const float *gain = t->data;
    int pos = 0;
    for (int i = 0; i < 576; i++) {
        CHECK(isfinite(gain[i]));
        pos += gain[i] > 0;
    }
    CHECK(pos > 500);
    size_t total = 0;
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        t = hearth_gguf_tensor_at(g, i);
        CHECK_EQ((uintptr_t)t->data % hearth_gguf_alignment(g), 0);
        total += t->nbytes;
    }
    CHECK(total > 90u * 1000 * 1000 && total <= hearth_gguf_file_size(g));
    hearth_gguf_close(g);
}
