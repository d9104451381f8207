/* test.h - the tiny harness every tests/test_*.c uses: checks that are
 * counted, a failure line that says where and why, and the closing summary. */
#ifndef TEST_H
#define TEST_H

#include <stdbool.h>

#include "../json.h"

/* Records one check; on failure prints "FAIL file:line: <message>". */
void check_at(bool ok, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* CHECK(condition, "what is being checked %d", ...): the macro only adds
 * the file and line to check_at. */
#define CHECK(cond, ...) check_at((cond), __FILE__, __LINE__, __VA_ARGS__)

/* Prints "<name>: N passed, N failed" and returns the process exit status. */
int test_summary(const char *name);

/* Reads tests/data/<name> (tests run from the repository root); dies on error. */
char *test_data(const char *name, unsigned long *len);

/* Parses the JSON file tests/data/<name> into doc (json_free it); dies on error. */
void test_json(JsonDoc *doc, const char *name);

/* Remembers where the test programs are (from argv[0]): the checkpoint
 * writer sits beside them, and scratch folders go there too. */
void test_init(const char *argv0);

/* A fresh scratch folder <tests folder>/<name>; the path is valid until the next call. */
const char *test_scratch(const char *name);

/* Writes a random-weight checkpoint into dir with tests/make_checkpoint and
 * its arguments (shell words); dies when it fails. */
void test_checkpoint(const char *dir, const char *args);

#endif
