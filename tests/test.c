/* test.c - counting checks and printing the summary line. */
#include "test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void test_json(JsonDoc *doc, const char *name) {
    char *path = path_join("tests/data", name);
    Error e;
    if (json_parse_file(doc, path, &e) != 0) die("%s", e.msg);
    free(path);
}

static char tests_folder[256], scratch[512];

void test_init(const char *argv0) {
    const char *slash = strrchr(argv0, '/');
    snprintf(tests_folder, sizeof tests_folder, "%.*s", slash ? (int)(slash - argv0) : 1, slash ? argv0 : ".");
}

const char *test_scratch(const char *name) {
    snprintf(scratch, sizeof scratch, "%s/%.200s", tests_folder, name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", scratch, scratch);
    if (system(cmd) != 0) die("cannot make %s", scratch);
    return scratch;
}

void test_checkpoint(const char *dir, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/make_checkpoint '%.1000s' %.2000s", tests_folder, dir, args);
    if (system(cmd) != 0) die("cannot run %s", cmd);
}
