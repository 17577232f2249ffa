/* utf8.c - UTF-8 decoding with Rust's error semantics, the GPT-2 byte map,
 * and the Unicode character classes the pre-tokenizers use.
 *
 * HF tokenizers is Rust: its lossy conversions replace each "maximal
 * subpart" of an invalid sequence by one U+FFFD (Unicode 3.9 / W3C), and
 * its char::is_whitespace is the White_Space property. Both are reproduced
 * here exactly, since decode output is compared byte for byte. */
#include "tok/tok_internal.h"

#include <utf8proc.h>

int tok_utf8_check(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t c;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        c = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return -k;
        unsigned x = s[k];
        if (x < lo || x > hi) return -k;
        lo = 0x80;
        hi = 0xBF;
        c = (c << 6) | (x & 0x3F);
    }
    *cp = c;
    return need + 1;
}

int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    int k = tok_utf8_check(s, n, cp);
    return k > 0 ? k : 0;
}

int tok_utf8_encode(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int tok_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = tok_utf8_check(u + i, n - i, &cp);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

int tok_utf8_incomplete_len(const unsigned char *s, size_t n) {
    uint32_t cp;
    int k = tok_utf8_check(s, n, &cp);
    /* invalid only because the buffer ended: a prefix of a valid sequence */
    if (k < 0 && (size_t)(-k) == n && n < 4 && s[0] >= 0xC2 && s[0] <= 0xF4) return (int)n;
    return 0;
}

hearth_status tok_utf8_lossy(tok_buf *out, const unsigned char *s, size_t n) {
    hearth_status st = tok_buf_reserve(out, n + n * 2);
    if (st) return st;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80) j++;
        if (j > i) {
            tok_buf_put(out, s + i, j - i);
            i = j;
            continue;
        }
        uint32_t cp;
        int k = tok_utf8_check(s + i, n - i, &cp);
        if (k > 0) {
            tok_buf_put(out, s + i, (size_t)k);
            i += (size_t)k;
        } else {
            st = tok_buf_put(out, "\xEF\xBF\xBD", 3);
            if (st) return st;
            i += (size_t)(-k);
        }
    }
    return HEARTH_OK;
}

int tok_is_whitespace(uint32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int tok_is_punctuation(uint32_t c) {
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return 1;
    default:
        return 0;
    }
}

/* bytes_to_unicode(): printable Latin-1 bytes map to themselves; the other
 * 68 bytes, in increasing order, to U+0100.. U+0143. */
uint32_t tok_byte_to_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
    if (b <= 0x20) return 256u + (uint32_t)b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (uint32_t)(b - 0x7F);
    return 256u + 33u + 34u; /* 0xAD */
}

int tok_cp_to_byte(uint32_t c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c >= 256 && c < 256 + 33) return (int)(c - 256);
    if (c >= 256 + 33 && c < 256 + 67) return (int)(c - 256 - 33 + 0x7F);
    if (c == 256 + 67) return 0xAD;
    return -1;
}
