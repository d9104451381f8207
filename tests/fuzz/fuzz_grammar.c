/* fuzz_grammar.c - libFuzzer target: grammar_new on arbitrary bytes (the
 * input up to its first NUL is the grammar, the rest a text). A grammar that
 * compiles is run on the text byte by byte, checking what grammar.h promises:
 * a rejected byte ends the parse, and reading the text at once or byte by
 * byte reaches the same state. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "../../grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t grammar_len = nul ? (size_t)(nul - data) : size;
    const char *text = (const char *)data + grammar_len + (nul != NULL);
    size_t text_len = size - grammar_len - (nul != NULL);
    Error e;
    Grammar *g = grammar_new((const char *)data, grammar_len, &e);
    if (!g) {
        assert(strchr(e.msg, '\n') == NULL && e.msg[0] != '\0');
        return 0;
    }
    GrammarState s = grammar_start(g);
    for (size_t i = 0; i < text_len && s >= 0; i++) s = grammar_advance(g, s, text + i, 1);
    GrammarState whole = grammar_advance(g, grammar_start(g), text, text_len);
    assert(whole == s || grammar_error(g) != NULL);
    if (s >= 0) (void)grammar_finished(g, s);
    grammar_free(g);
    return 0;
}
