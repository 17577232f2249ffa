/* dtype.c - the table of element types. */
#include "core/dtype.h"

static const hearth_dtype_info *lookup(uint32_t t) {
    static const hearth_dtype_info f32 = {"f32", 1, 4}, f16 = {"f16", 1, 2}, bf16 = {"bf16", 1, 2},
                                   q4_0 = {"q4_0", 32, 18}, q4_1 = {"q4_1", 32, 20},
                                   q5_0 = {"q5_0", 32, 22}, q5_1 = {"q5_1", 32, 24},
                                   q8_0 = {"q8_0", 32, 34}, q8_1 = {"q8_1", 32, 36},
                                   q2_k = {"q2_K", 256, 84}, q3_k = {"q3_K", 256, 110},
                                   q4_k = {"q4_K", 256, 144}, q5_k = {"q5_K", 256, 176},
                                   q6_k = {"q6_K", 256, 210}, iq4_nl = {"iq4_nl", 32, 18},
                                   iq4_xs = {"iq4_xs", 256, 136},
                                   q8_k = {"q8_K", 256, 292}, e4m3 = {"e4m3", 1, 1};
    switch (t) {
    case HEARTH_DT_F32: return &f32;
    case HEARTH_DT_F16: return &f16;
    case HEARTH_DT_BF16: return &bf16;
    case HEARTH_DT_Q4_0: return &q4_0;
    case HEARTH_DT_Q4_1: return &q4_1;
    case HEARTH_DT_Q5_0: return &q5_0;
    case HEARTH_DT_Q5_1: return &q5_1;
    case HEARTH_DT_Q8_0: return &q8_0;
    case HEARTH_DT_Q8_1: return &q8_1;
    case HEARTH_DT_Q2_K: return &q2_k;
    case HEARTH_DT_Q3_K: return &q3_k;
    case HEARTH_DT_Q4_K: return &q4_k;
    case HEARTH_DT_Q5_K: return &q5_k;
    case HEARTH_DT_Q6_K: return &q6_k;
    case HEARTH_DT_IQ4_NL: return &iq4_nl;
    case HEARTH_DT_IQ4_XS: return &iq4_xs;
    case HEARTH_DT_Q8_K: return &q8_k;
    case HEARTH_DT_E4M3: return &e4m3;
    }
    return NULL;
}

const hearth_dtype_info *hearth_dtype_get(uint32_t type) { return lookup(type); }

const hearth_dtype_info *hearth_dtype_get_ggml(uint32_t type) {
    return type >= HEARTH_DT_INTERNAL ? NULL : lookup(type);
}

const char *hearth_ggml_type_name(uint32_t type) {
    static const char *const names[] = {
        "f32",     "f16",     "q4_0",   "q4_1",   NULL,      NULL,    "q5_0",    "q5_1",   "q8_0",    "q8_1",
        "q2_K",    "q3_K",    "q4_K",   "q5_K",   "q6_K",    "q8_K",  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
        "iq4_nl",  "iq3_s",   "iq2_s",  "iq4_xs", "i8",      "i16",   "i32",     "i64",    "f64",     "iq1_m",
        "bf16",    NULL,      NULL,     NULL,     "tq1_0",   "tq2_0", NULL,      NULL,     NULL,      "mxfp4"};
    return type < sizeof names / sizeof *names ? names[type] : NULL;
}

size_t hearth_dtype_row_bytes(uint32_t type, int64_t n) {
    const hearth_dtype_info *d = lookup(type);
    if (!d || n < 0 || n % d->block) return 0;
    return (size_t)(n / d->block) * (size_t)d->block_bytes;
}
