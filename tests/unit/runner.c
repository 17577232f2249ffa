/* runner.c - runs every registered TEST (or those whose name contains
 * argv[1]); last line `N passed, N failed`; exit 1 on any failure. */
#define _GNU_SOURCE
#include "testhelp.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { const char *name, *file; test_fn fn; } test_case;

static test_case g_tests[4096];
static int g_n_tests;
static int g_cur_failed;

void test_register(const char *name, const char *file, test_fn fn) {
    if (g_n_tests < (int)(sizeof g_tests / sizeof g_tests[0]))
        g_tests[g_n_tests++] = (test_case){name, file, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("  FAIL %s:%d: %s\n", file, line, msg);
    g_cur_failed = 1;
}

const char *test_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("HEARTH_ROOT");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
    return buf;
}

const char *test_tmpdir(void) {
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/hearth-test-XXXXXX");
        if (!mkdtemp(dir)) { perror("mkdtemp"); exit(2); }
    }
    return dir;
}

static int cmp_tests(const void *a, const void *b) {
    const test_case *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    qsort(g_tests, (size_t)g_n_tests, sizeof g_tests[0], cmp_tests);
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < g_n_tests; i++) {
        if (filter && !strstr(g_tests[i].name, filter) && !strstr(g_tests[i].file, filter)) continue;
        g_cur_failed = 0;
        g_tests[i].fn();
        if (g_cur_failed) {
            printf("FAIL %s (%s)\n", g_tests[i].name, g_tests[i].file);
            failed++;
        } else {
            printf("ok   %s\n", g_tests[i].name);
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
