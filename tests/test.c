/* test.c - counting checks and printing the summary line. */
#include "test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util.h"

static int n_passed, n_failed;

void check_at(bool ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        n_passed++;
        return;
    }
    n_failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s:%d: ", file, line);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    fflush(stdout);
}

int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}

char *test_data(const char *name, unsigned long *len) {
    char *path = path_join("tests/data", name), *data;
    size_t n;
    Error e;
    if (read_file(path, &data, &n, &e) != 0) die("%s", e.msg);
    free(path);
    if (len) *len = n;
    return data;
}
