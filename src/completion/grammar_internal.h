/* grammar_internal.h - what the GBNF parser (grammar.c) and the regular
 * expression rewriter (grammar_regex.c) both read: hex digits and one UTF-8
 * sequence of their source text. */
#ifndef HEARTH_COMPLETION_GRAMMAR_INTERNAL_H
#define HEARTH_COMPLETION_GRAMMAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* 0..15, or -1. */
static inline int gram_hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The UTF-8 sequence at s (avail bytes): its length, *cp its code point; 0
 * if it is not one (a stray continuation byte, a sequence cut short). */
static inline int gram_utf8(const uint8_t *s, size_t avail, uint32_t *cp) {
    int n = *s < 0x80 ? 1 : (*s >> 5) == 6 ? 2 : (*s >> 4) == 14 ? 3 : (*s >> 3) == 30 ? 4 : 0;
    if (!n || (size_t)n > avail) return 0;
    uint32_t v = n == 1 ? *s : (uint32_t)(*s & (0x7F >> n));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    *cp = v;
    return n;
}

#endif
