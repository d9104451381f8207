/* test_json.c - the JSON parser against RFC 8259: documents that must parse
 * (with the values they must give) and documents that must be refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../json.h"
#include "test.h"

static int parse(JsonDoc *doc, const char *text, Error *e) { return json_parse(doc, text, strlen(text), e); }

/* A document that must be refused, with an error naming the position. */
static void refuse(const char *text, const char *where) {
    JsonDoc doc;
    Error e = {{0}};
    int rc = parse(&doc, text, &e);
    CHECK(rc == -1, "refused: %s", text);
    CHECK(strstr(e.msg, where) != NULL, "error for %s names '%s' (got '%s')", text, where, e.msg);
}

static void accept(const char *text) {
    JsonDoc doc;
    Error e;
    int rc = parse(&doc, text, &e);
    CHECK(rc == 0, "accepted: %s (%s)", text, rc ? e.msg : "");
    if (rc == 0) json_free(&doc);
}

static void test_scalars(void) {
    JsonDoc doc;
    Error e;
    CHECK(parse(&doc, " true ", &e) == 0 && doc.root.type == JSON_BOOL && doc.root.boolean, "true");
    json_free(&doc);
    CHECK(parse(&doc, "false", &e) == 0 && doc.root.type == JSON_BOOL && !doc.root.boolean, "false");
    json_free(&doc);
    CHECK(parse(&doc, "null", &e) == 0 && doc.root.type == JSON_NULL, "null");
    json_free(&doc);
}

static void test_numbers(void) {
    struct {
        const char *text;
        double value;
        int is_integer;
        long long integer;
    } cases[] = {
        {"0", 0, 1, 0},
        {"-0", 0, 1, 0},
        {"42", 42, 1, 42},
        {"-17", -17, 1, -17},
        {"9007199254740993", 9007199254740992.0, 1, 9007199254740993LL},  /* 2^53+1 kept exact */
        {"9223372036854775807", 9223372036854775807.0, 1, 9223372036854775807LL},
        {"-9223372036854775808", -9223372036854775808.0, 1, (-9223372036854775807LL - 1)},
        {"9223372036854775808", 9223372036854775808.0, 0, 0},  /* past int64: not an integer */
        {"1.5", 1.5, 0, 0},
        {"-2.5e3", -2500, 0, 0},
        {"1e-06", 1e-06, 0, 0},
        {"1E+2", 100, 0, 0},
        {"1000000.0", 1000000.0, 0, 0},
        {"0.1", 0.1, 0, 0},
        {"123456789012345678901234567890", 1.2345678901234568e29, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        JsonDoc doc;
        Error e;
        int rc = parse(&doc, cases[i].text, &e);
        CHECK(rc == 0 && doc.root.type == JSON_NUMBER, "number %s parses", cases[i].text);
        if (rc != 0) continue;
        CHECK(doc.root.number.value == cases[i].value, "number %s = %.17g (got %.17g)", cases[i].text,
              cases[i].value, doc.root.number.value);
        CHECK(doc.root.number.is_integer == (cases[i].is_integer != 0), "number %s is_integer", cases[i].text);
        if (cases[i].is_integer)
            CHECK(doc.root.number.integer == cases[i].integer, "number %s exact integer", cases[i].text);
        json_free(&doc);
    }
    CHECK(signbit(0.0) == 0, "sanity");
}

static void test_strings(void) {
    struct {
        const char *text;
        const char *want;
        size_t len;
    } cases[] = {
        {"\"\"", "", 0},
        {"\"abc\"", "abc", 3},
        {"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8},
        {"\"\\u0041\\u00e9\\u4e2d\"", "A\xc3\xa9\xe4\xb8\xad", 6},
        {"\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80", 4},        /* surrogate pair -> U+1F600 */
        {"\"a\\u0000b\"", "a\0b", 3},                          /* embedded NUL kept */
        {"\"\xe4\xbd\xa0\xe5\xa5\xbd\"", "\xe4\xbd\xa0\xe5\xa5\xbd", 6},  /* raw UTF-8 */
        {"\"\\u010a\"", "\xc4\x8a", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        JsonDoc doc;
        Error e;
        int rc = parse(&doc, cases[i].text, &e);
        CHECK(rc == 0 && doc.root.type == JSON_STRING, "string %s parses", cases[i].text);
        if (rc != 0) continue;
        CHECK(doc.root.len == cases[i].len && memcmp(doc.root.string, cases[i].want, cases[i].len) == 0,
              "string %s decodes", cases[i].text);
        CHECK(doc.root.string[doc.root.len] == '\0', "string %s is NUL-terminated", cases[i].text);
        json_free(&doc);
    }
}

static void test_containers(void) {
    JsonDoc doc;
    Error e;
    const char *text = "{\"a\": [1, 2, {\"b\": null}], \"c\": {}, \"d\": [], \"a\": 5,\n \"e\": \"x\"}";
    CHECK(parse(&doc, text, &e) == 0, "nested document parses");
    CHECK(doc.root.type == JSON_OBJECT && doc.root.len == 5, "object has 5 members in order");
    CHECK(json_get(&doc.root, "a")->type == JSON_NUMBER, "the last of a repeated key wins");
    const JsonValue *a = &doc.root.members[0].value;
    CHECK(a->type == JSON_ARRAY && a->len == 3, "the first 'a' is still there, an array of 3");
    CHECK(a && a->items[1].number.integer == 2, "a[1] == 2");
    CHECK(a && json_get(&a->items[2], "b") && json_get(&a->items[2], "b")->type == JSON_NULL, "a[2].b is null");
    CHECK(json_get(&doc.root, "c")->type == JSON_OBJECT && json_get(&doc.root, "c")->len == 0, "empty object");
    CHECK(json_get(&doc.root, "d")->type == JSON_ARRAY && json_get(&doc.root, "d")->len == 0, "empty array");
    CHECK(json_get(&doc.root, "zz") == NULL, "missing key gives NULL");
    CHECK(json_get(a, "x") == NULL, "json_get on an array gives NULL");
    CHECK(strcmp(doc.root.members[4].key, "e") == 0, "member order kept");
    json_free(&doc);
}

static void test_depth(void) {
    char deep[2 * JSON_MAX_DEPTH + 8];
    size_t n = JSON_MAX_DEPTH;
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    accept(deep);
    /* One level more is refused, and a huge depth does not overflow the stack. */
    char deeper[2 * JSON_MAX_DEPTH + 8];
    memset(deeper, '[', n + 1);
    memset(deeper + n + 1, ']', n + 1);
    deeper[2 * n + 2] = '\0';
    refuse(deeper, "nesting too deep");
    static char huge[1000001];
    memset(huge, '[', sizeof huge - 1);
    refuse(huge, "nesting too deep");
}

static void test_invalid(void) {
    refuse("", "line 1, column 1: unexpected end of input");
    refuse("   ", "line 1, column 4");
    refuse("{\"a\": 1,\n  \"b\" 2}", "line 2, column 7: expected ':'");
    refuse("[1, 2", "unexpected end of input");
    refuse("[1 2]", "expected ',' or ']'");
    refuse("[1,]", "line 1, column 4");
    refuse("{\"a\":1,}", "expected a string key");
    refuse("{a:1}", "expected a string key");
    refuse("01", "unexpected data after");
    refuse("1.", "digit expected after '.'");
    refuse(".5", "unexpected character");
    refuse("1e", "digit expected in exponent");
    refuse("+1", "unexpected character");
    refuse("-", "bad number");
    refuse("tru", "unexpected character");
    refuse("nul", "unexpected character");
    refuse("True", "unexpected character");
    refuse("\"abc", "unterminated string");
    refuse("\"a\\x\"", "unknown escape");
    refuse("\"\\u12\"", "bad \\u escape");
    refuse("\"\\u12G4\"", "bad \\u escape");
    refuse("\"\\uD800\"", "high surrogate");
    refuse("\"\\uD800\\u0041\"", "high surrogate");
    refuse("\"\\uDC00\"", "lone low surrogate");
    refuse("\"a\tb\"", "control character");
    refuse("\"a\nb\"", "control character");
    refuse("\"\xff\"", "invalid UTF-8");
    refuse("\"\xc0\xaf\"", "invalid UTF-8");          /* overlong '/' */
    refuse("\"\xed\xa0\x80\"", "invalid UTF-8");      /* encoded surrogate */
    refuse("\"\xe4\xbd\"", "invalid UTF-8");          /* truncated sequence */
    refuse("\"\xf4\x90\x80\x80\"", "invalid UTF-8");  /* above U+10FFFF */
    refuse("{} {}", "unexpected data after");
    refuse("[\"a\"]]", "unexpected data after");
    refuse("'a'", "unexpected character");
    refuse("[NaN]", "unexpected character");
    refuse("[Infinity]", "unexpected character");
    refuse("{\"a\" : [1, {\"b\": [}]}", "unexpected character");
    /* Text that is not NUL-terminated is never read past its length. */
    JsonDoc doc;
    Error e;
    CHECK(json_parse(&doc, "[1, 2]xyz", 6, &e) == 0 && doc.root.len == 2, "length bounds the input");
    json_free(&doc);
    CHECK(json_parse(&doc, "\"abc\"", 4, &e) == -1, "string cut by the length is unterminated");
}

static void test_valid_misc(void) {
    accept("  {\"k\" :\t[ true , false , null , -1.5e-3 , \"\" ] }\r\n");
    accept("\"\\u0000\"");
    accept("[[[]]]");
    accept("1e400");   /* out of double range: parses (to infinity), RFC leaves the range open */
}

/* Big containers (their children move to a block of their own past 64 KiB)
 * holding small ones, and a big object: every value where it belongs; and
 * an error deep inside a big container frees everything (the sanitizers
 * check that). */
static void test_big(void) {
    enum { N = 20000 };
    char *text = xmalloc((size_t)N * 64 + 64);
    size_t n = 0;
    n += (size_t)sprintf(text + n, "{\"list\": [");
    for (int i = 0; i < N; i++) n += (size_t)sprintf(text + n, "%s[%d, \"s%d\"]", i ? "," : "", i, i);
    n += (size_t)sprintf(text + n, "], \"map\": {");
    for (int i = 0; i < N; i++) n += (size_t)sprintf(text + n, "%s\"k%d\": %d", i ? "," : "", i, i);
    n += (size_t)sprintf(text + n, "}}");
    JsonDoc doc;
    Error e;
    CHECK(json_parse(&doc, text, n, &e) == 0, "big document parses");
    const JsonValue *list = json_get(&doc.root, "list"), *map = json_get(&doc.root, "map");
    bool ok = list && list->len == N && map && map->len == N;
    for (int i = 0; ok && i < N; i++) {
        const JsonValue *pair = &list->items[i];
        char key[16];
        sprintf(key, "s%d", i);
        ok = pair->len == 2 && pair->items[0].number.integer == i && strcmp(pair->items[1].string, key) == 0;
        sprintf(key, "k%d", i);
        ok = ok && strcmp(map->members[i].key, key) == 0 && map->members[i].value.number.integer == i;
    }
    CHECK(ok, "big array of small arrays, and big object: every value in place");
    json_free(&doc);
    CHECK(json_parse(&doc, text, n - 2, &e) == -1, "big document cut short is refused");
    free(text);
}

/* Whether two trees hold the same values, with the same keys in the same order. */
static bool same_tree(const JsonValue *a, const JsonValue *b) {
    if (a->type != b->type || a->len != b->len) return false;
    switch (a->type) {
    case JSON_NULL: return true;
    case JSON_BOOL: return a->boolean == b->boolean;
    case JSON_NUMBER:
        return a->number.value == b->number.value && a->number.is_integer == b->number.is_integer &&
               a->number.integer == b->number.integer;
    case JSON_STRING: return memcmp(a->string, b->string, a->len) == 0;
    case JSON_ARRAY:
        for (size_t i = 0; i < a->len; i++)
            if (!same_tree(&a->items[i], &b->items[i])) return false;
        return true;
    case JSON_OBJECT:
        for (size_t i = 0; i < a->len; i++) {
            const JsonMember *x = &a->members[i], *y = &b->members[i];
            if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) != 0) return false;
            if (!same_tree(&x->value, &y->value)) return false;
        }
        return true;
    }
    return false;
}

/* json_parse_except of text without skip gives the tree json_parse gives of want. */
static void skip_gives(const char *text, const char *const *skip, const char *want) {
    JsonDoc got, expect;
    Error e;
    int rc = json_parse_except(&got, text, strlen(text), skip, NULL, &e);
    CHECK(rc == 0, "json_parse_except accepts %s (%s)", text, rc ? e.msg : "");
    if (rc != 0) return;
    CHECK(parse(&expect, want, &e) == 0, "the expected tree %s parses", want);
    CHECK(same_tree(&got.root, &expect.root), "%s without %s%s is %s", text, skip && skip[0] ? skip[0] : "nothing",
          skip && skip[0] && skip[1] ? ", ..." : "", want);
    json_free(&got);
    json_free(&expect);
}

static void test_skip(void) {
    const char *doc = "{\"a\": {\"b\": [1, 2], \"c\": \"x\", \"d\": {\"e\": null}}, \"f\": 3}";
    skip_gives(doc, (const char *const[]){"a.b", NULL}, "{\"a\": {\"c\": \"x\", \"d\": {\"e\": null}}, \"f\": 3}");
    skip_gives(doc, (const char *const[]){"a.c", NULL}, "{\"a\": {\"b\": [1, 2], \"d\": {\"e\": null}}, \"f\": 3}");
    skip_gives(doc, (const char *const[]){"a.d", NULL}, "{\"a\": {\"b\": [1, 2], \"c\": \"x\"}, \"f\": 3}");
    skip_gives(doc, (const char *const[]){"a.d.e", NULL}, "{\"a\": {\"b\": [1, 2], \"c\": \"x\", \"d\": {}}, \"f\": 3}");
    skip_gives(doc, (const char *const[]){"f", NULL}, "{\"a\": {\"b\": [1, 2], \"c\": \"x\", \"d\": {\"e\": null}}}");
    skip_gives(doc, (const char *const[]){"a", NULL}, "{\"f\": 3}");
    skip_gives(doc, (const char *const[]){"a.b", "a.d", "f", NULL}, "{\"a\": {\"c\": \"x\"}}");
    skip_gives(doc, (const char *const[]){"a", "a.b", NULL}, "{\"f\": 3}");
    /* Paths that match nothing: absent names, a prefix, a longer path, a path
     * through an array, a path of the root itself. */
    skip_gives(doc, (const char *const[]){"zz", "a.zz", "a.b.c", "a.b.0", "", "ab", "a.", ".a", NULL}, doc);
    skip_gives(doc, (const char *const[]){NULL}, doc);
    skip_gives(doc, NULL, doc);
    /* An array breaks the path: no member inside one is skipped, not even by
     * a path with an empty name in the array's place. */
    skip_gives("{\"a\": [{\"b\": 1, \"c\": 2}], \"b\": 3}", (const char *const[]){"a.b", "a..b", "b", NULL},
               "{\"a\": [{\"b\": 1, \"c\": 2}]}");
    skip_gives("[{\"a\": 1}]", (const char *const[]){"a", NULL}, "[{\"a\": 1}]");
    skip_gives("\"a\"", (const char *const[]){"a", NULL}, "\"a\"");
    /* A repeated member is skipped every time. */
    skip_gives("{\"a\": 1, \"b\": 2, \"a\": {\"x\": []}}", (const char *const[]){"a", NULL}, "{\"b\": 2}");
    /* Names are compared decoded and whole; a name may hold a dot, but no
     * path can name it. */
    skip_gives("{\"m\\u006fdel\": {\"vocab\": {\"\\u00e9\\n\": 1}, \"x\": 1}}", (const char *const[]){"model.vocab", NULL},
               "{\"model\": {\"x\": 1}}");
    skip_gives("{\"a.b\": 1, \"a\": {\"b\": 2, \"bc\": 3}}", (const char *const[]){"a.b", NULL},
               "{\"a.b\": 1, \"a\": {\"bc\": 3}}");
    /* Everything valid inside a skipped value is accepted: escapes, surrogate
     * pairs, raw UTF-8, long numbers, the deepest nesting allowed. */
    skip_gives("{\"v\": [\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\uD83D\\uDE00\", \"\xe4\xbd\xa0\", "
               "123456789012345678901234567890123456789012345678901234567890123456789e-5, -0.5E+3, true, false, "
               "null, {}, []], \"w\": 0}",
               (const char *const[]){"v", NULL}, "{\"w\": 0}");
    char deep[2 * JSON_MAX_DEPTH + 32];
    size_t n = JSON_MAX_DEPTH - 1;  /* the value of v is at depth 1 */
    strcpy(deep, "{\"v\": ");
    memset(deep + 6, '[', n);
    memset(deep + 6 + n, ']', n);
    strcpy(deep + 6 + 2 * n, ", \"w\": 0}");
    skip_gives(deep, (const char *const[]){"v", NULL}, "{\"w\": 0}");
}

/* A skipped value is checked as json_parse checks it: the same documents are
 * refused, with the same error at the same line and column. */
static void refused_alike(const char *text, size_t len, const char *what) {
    const char *const skip[] = {"model.vocab", "model.merges", NULL};
    JsonDoc doc;
    Error whole = {{0}}, part = {{0}};
    int rc_whole = json_parse(&doc, text, len, &whole);
    int rc_part = json_parse_except(&doc, text, len, skip, NULL, &part);
    CHECK(rc_whole == -1 && rc_part == -1, "both refuse %.*s", (int)len, text);
    CHECK(strcmp(whole.msg, part.msg) == 0, "same error for %.*s ('%s' and '%s')", (int)len, text, whole.msg,
          part.msg);
    if (what) CHECK(strstr(whole.msg, what) != NULL, "error for %.*s names '%s' (got '%s')", (int)len, text, what,
                    whole.msg);
}

static void test_skip_errors(void) {
    struct {
        const char *value, *what;
    } cases[] = {
        {"\"\xff\"", "line 1, column 22: invalid UTF-8"},
        {"{\"\xc0\xaf\": 1}", "line 1, column 23: invalid UTF-8"},
        {"[\"a\\n\", \"\xed\xa0\x80\"]", "line 1, column 30: invalid UTF-8"},
        {"[\"\\uD800\"]", "line 1, column 23: high surrogate"},
        {"[\"\\uD800\\u0041\"]", "high surrogate"},
        {"\"\\uDC00\"", "line 1, column 22: lone low surrogate"},
        {"\"a\tb\"", "line 1, column 23: control character"},
        {"[1,\n \"a\nb\"]", "line 2, column 4: control character"},
        {"\"a\\x\"", "line 1, column 23: unknown escape"},
        {"{\"\\u12G4\": 1}", "line 1, column 23: bad \\u escape"},
        {"[1.]", "line 1, column 22: bad number (digit expected after '.')"},
        {"[-]", "line 1, column 22: bad number"},
        {"1e+", "digit expected in exponent"},
        {"01", "line 1, column 22: expected ',' or '}'"},
        {"[1, 2,]", "line 1, column 27: unexpected character"},
        {"{\"a\": 1,}", "line 1, column 29: expected a string key"},
        {"{\"a\" 1}", "expected ':' after key"},
        {"[tru]", "unexpected character"},
        {"[1 2]", "expected ',' or ']'"},
    };
    char text[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = snprintf(text, sizeof text, "{\"model\": {\"vocab\": %s, \"x\": 1}}", cases[i].value);
        refused_alike(text, (size_t)n, cases[i].what);
    }
    /* Too deep inside a skipped value (its value is at depth 2). */
    char deep[JSON_MAX_DEPTH + 64];
    int n = sprintf(deep, "{\"model\": {\"merges\": ");
    memset(deep + n, '[', JSON_MAX_DEPTH - 1);
    refused_alike(deep, (size_t)n + JSON_MAX_DEPTH - 1, "line 1, column 276: nesting too deep");
    /* Cut anywhere, a document with skipped values is refused alike:
     * unterminated strings, numbers, words, containers. */
    const char *whole = "{\"model\": {\"vocab\": {\"a\\u00e9\": 1.5e3, \"b\": [true, null, \"c\\\"d\"]},\n"
                        " \"merges\": [\"x y\", [\"z\", \"w\"]], \"x\": false}}";
    for (size_t cut = 0; cut < strlen(whole); cut++) refused_alike(whole, cut, NULL);
}

/* A big skipped value leaves nothing in the tree. (That nothing of it is
 * allocated cannot be seen from here: json.h keeps the arena's blocks opaque.) */
static void test_skip_big(void) {
    enum { N = 100000 };
    char *text = xmalloc((size_t)N * 48 + 64);
    size_t n = (size_t)sprintf(text, "{\"model\": {\"vocab\": {");
    for (int i = 0; i < N; i++)
        n += (size_t)sprintf(text + n, "%s\"tok\\u00e9n_%d\\n\": [%d, \"%d.5\"]", i ? ", " : "", i, i, i);
    n += (size_t)sprintf(text + n, "}, \"x\": 1}}");
    CHECK(n > 4000000, "the big document has %zu bytes", n);
    JsonDoc doc, want;
    Error e;
    const char *const skip[] = {"model.vocab", NULL};
    CHECK(json_parse_except(&doc, text, n, skip, NULL, &e) == 0, "big document parses without model.vocab");
    CHECK(parse(&want, "{\"model\": {\"x\": 1}}", &e) == 0, "the expected tree parses");
    CHECK(same_tree(&doc.root, &want.root), "big document without model.vocab is {\"model\": {\"x\": 1}}");
    json_free(&doc);
    json_free(&want);
    CHECK(json_parse(&doc, text, n, &e) == 0 && json_get(json_get(&doc.root, "model"), "vocab")->len == N,
          "json_parse keeps all %d members of model.vocab", N);
    json_free(&doc);
    free(text);
}

/* Where the skipped values lay, counted by hand: the last copy of a
 * repeated member, {0, 0} for a path that is not there. */
static void test_skip_spans(void) {
    const char *text = "{\"m\": {\"v\":  {\"x\": [1]}, \"g\": [\"a b\"], \"v\": 7 }, \"v\": 2}";
    const char *const skip[] = {"m.v", "m.g", "absent", "v", NULL};
    JsonSpan spans[4] = {{9, 9}, {9, 9}, {9, 9}, {9, 9}};
    JsonDoc doc;
    Error e;
    CHECK(json_parse_except(&doc, text, strlen(text), skip, spans, &e) == 0, "the document parses");
    CHECK(spans[0].start == 44 && spans[0].end == 45, "m.v: its last copy, the 7 at 44 (got %zu..%zu)", spans[0].start,
          spans[0].end);
    CHECK(spans[1].start == 30 && spans[1].end == 37, "m.g: [\"a b\"] at 30..37 (got %zu..%zu)", spans[1].start,
          spans[1].end);
    CHECK(spans[2].start == 0 && spans[2].end == 0, "a path not there: {0, 0}");
    CHECK(spans[3].start == 54 && spans[3].end == 55, "v: the 2 at 54 (got %zu..%zu)", spans[3].start, spans[3].end);
    CHECK(memcmp(text + 30, "[\"a b\"]", 7) == 0 && text[44] == '7' && text[54] == '2', "the offsets above are right");
    json_free(&doc);
}

int main(void) {
    test_skip_spans();
    test_scalars();
    test_numbers();
    test_strings();
    test_containers();
    test_depth();
    test_invalid();
    test_valid_misc();
    test_big();
    test_skip();
    test_skip_errors();
    test_skip_big();
    return test_summary("test_json");
}
