/* fuzz_schema.c - libFuzzer target: schema_to_gbnf on arbitrary bytes. A
 * schema it converts must give a grammar that compiles, and the grammar is
 * run on the schema text itself (any text will do). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../grammar.h"
#include "../../schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Error e;
    char *gbnf = schema_to_gbnf((const char *)data, size, &e);
    if (!gbnf) {
        assert(strchr(e.msg, '\n') == NULL && e.msg[0] != '\0');
        return 0;
    }
    Grammar *g = grammar_new(gbnf, strlen(gbnf), &e);
    assert(g != NULL);
    (void)grammar_matches(g, (const char *)data, size);
    grammar_free(g);
    free(gbnf);
    return 0;
}
