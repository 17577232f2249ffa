/* testhelp.h - the in-house C test runner's assertion macros.
 *
 * A test is `TEST(name) { ... }` in any C file under tests/unit; it registers
 * itself at start-up. CHECK* macros record the failure with file:line and
 * return from the test. The runner (runner.c) prints failures, then the
 * summary line `N passed, N failed`, and exits non-zero on any failure. */
#ifndef HEARTH_TESTHELP_H
#define HEARTH_TESTHELP_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, const char *file, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Absolute path of a file under the repository root (tests/fixtures/...),
 * in a static buffer valid until the next call. */
const char *test_path(const char *rel);
/* A fresh scratch directory for this test run (created once). */
const char *test_tmpdir(void);

#define TEST(name)                                                                 \
    static void test_##name(void);                                                 \
    __attribute__((constructor)) static void test_reg_##name(void) {               \
        test_register(#name, __FILE__, test_##name);                               \
    }                                                                              \
    static void test_##name(void)

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) { test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); return; } \
    } while (0)

#define CHECK_MSG(cond, ...)                                                       \
    do {                                                                           \
        if (!(cond)) { test_fail(__FILE__, __LINE__, __VA_ARGS__); return; }       \
    } while (0)

#define CHECK_EQ(a, b)                                                             \
    do {                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                        \
        if (a_ != b_) {                                                            \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
            return;                                                                \
        }                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                      \
    do {                                                                           \
        double a_ = (double)(a), b_ = (double)(b);                                 \
        if (!(fabs(a_ - b_) <= (tol))) {                                           \
            test_fail(__FILE__, __LINE__, "%s ~= %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol)); \
            return;                                                                \
        }                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                            \
    do {                                                                           \
        const char *a_ = (a), *b_ = (b);                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                   \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,    \
                      a_ ? a_ : "(null)", b_ ? b_ : "(null)");                     \
            return;                                                                \
        }                                                                          \
    } while (0)

/* The message of a failed call must contain a substring. */
#define CHECK_CONTAINS(hay, needle)                                                \
    do {                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                    \
        if (!h_ || !strstr(h_, n_)) {                                              \
            test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_); \
            return;                                                                \
        }                                                                          \
    } while (0)

#endif
