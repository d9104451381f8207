/* fuzz_json.c - libFuzzer target: json_parse on arbitrary bytes. A parsed
 * document is walked in full, checking what json.h promises of it; and
 * json_parse_except, skipping some members, must accept or refuse the same
 * bytes with the same error. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "../../json.h"

static void walk(const JsonValue *v) {
    switch (v->type) {
    case JSON_STRING:
        assert(v->string[v->len] == '\0');
        break;
    case JSON_NUMBER:
        /* An exact integer and the nearest double must agree. */
        if (v->number.is_integer) assert(v->number.value == (double)v->number.integer);
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < v->len; i++) walk(&v->items[i]);
        break;
    case JSON_OBJECT:
        for (size_t i = 0; i < v->len; i++) {
            const JsonMember *m = &v->members[i];
            assert(m->key[m->key_len] == '\0');
            /* Every key without a NUL in it finds a member (the last of that name). */
            if (strlen(m->key) == m->key_len) assert(json_get(v, m->key) != NULL);
            walk(&m->value);
        }
        break;
    case JSON_NULL:
    case JSON_BOOL:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const skip[] = {"model.vocab", "model.merges", "a", NULL};
    JsonDoc doc, part;
    Error e, e_part;
    int rc = json_parse(&doc, (const char *)data, size, &e);
    int rc_part = json_parse_except(&part, (const char *)data, size, skip, NULL, &e_part);
    assert(rc == rc_part);
    if (rc != 0) {
        assert(strncmp(e.msg, "line ", 5) == 0 && doc.arena == NULL);
        assert(strcmp(e.msg, e_part.msg) == 0 && part.arena == NULL);
        return 0;
    }
    walk(&doc.root);
    walk(&part.root);
    json_free(&doc);
    json_free(&part);
    return 0;
}
