/* test_buf.c - the growable buffer and its JSON literals: the strings read
 * back by the JSON parser (json.c) and the floats by strtof. */
#include <stdlib.h>
#include <string.h>

#include "../buf.h"
#include "../json.h"
#include "test.h"

static void test_growth(void) {
    Buf b = {0};
    for (int i = 0; i < 1000; i++) buf_printf(&b, "%d,", i % 10);
    CHECK(b.len == 2000 && b.data[b.len] == '\0' && strncmp(b.data + 1990, "5,6,7,8,9,", 10) == 0,
          "1000 appends: 2000 bytes, NUL-terminated");
    buf_add(&b, "", 0);
    CHECK(b.len == 2000, "an empty append adds nothing");
    buf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0, "freed: empty again");
}

static void test_json_string(void) {
    Buf b = {0};
    buf_json_string(&b, "a\"\\\n\x01\xff\xe2\x82\xac", 9);
    CHECK(strcmp(b.data, "\"a\\\"\\\\\\n\\u0001\\ufffd\xe2\x82\xac\"") == 0, "a JSON string: escapes, U+FFFD for a bad byte (%s)", b.data);
    buf_free(&b);
    /* Overlong forms and surrogates are ill-formed: each byte becomes U+FFFD. */
    buf_json_string(&b, "\xc0\xaf\xed\xa0\x80", 5);
    JsonDoc doc;
    Error e;
    CHECK(json_parse(&doc, b.data, b.len, &e) == 0 && doc.root.type == JSON_STRING &&
              strcmp(doc.root.string, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") == 0,
          "an overlong '/' and a surrogate: five U+FFFD (%s)", b.data);
    json_free(&doc);
    buf_free(&b);
}

static void test_json_float(void) {
    const float values[] = {0.1f, -3.4028235e38f, 1.17549435e-38f, 16777217.0f, 2.7182817f};
    for (int i = 0; i < 5; i++) {
        Buf b = {0};
        buf_json_float(&b, values[i]);
        CHECK(strtof(b.data, NULL) == values[i], "float %d reads back the same (%s)", i, b.data);
        buf_free(&b);
    }
    Buf b = {0};
    buf_json_float(&b, 1.0 / 0.0);
    buf_puts(&b, " ");
    buf_json_float(&b, 0.0 / 0.0);
    CHECK(strcmp(b.data, "3.4e+38 0") == 0, "infinity and NaN become finite JSON numbers (%s)", b.data);
    buf_free(&b);
}

int main(void) {
    test_growth();
    test_json_string();
    test_json_float();
    return test_summary("test_buf");
}
