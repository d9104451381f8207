/* json.h - a complete RFC 8259 JSON parser.
 *
 * A document is parsed into a tree of JsonValue nodes that all live in one
 * arena owned by the JsonDoc, so freeing the document frees everything.
 * The parser knows no schema: callers walk the tree with the getters below. */
#ifndef JSON_H
#define JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Deepest nesting of arrays and objects accepted (hostile input cannot
 * overflow the stack). */
#define JSON_MAX_DEPTH 256

/* The largest file json_parse_file reads. A parsed document can take about
 * 20 times the bytes of its text (a value is 40 bytes, "0," is 2), so this
 * bounds what a hostile file can make us allocate; the biggest real
 * tokenizer.json files are a few tens of MB. */
#define JSON_MAX_FILE_BYTES ((size_t)128 << 20)

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue JsonValue;
typedef struct JsonMember JsonMember;

struct JsonValue {
    JsonType type;
    size_t len;                /* string: bytes; array: items; object: members */
    union {
        bool boolean;          /* JSON_BOOL */
        struct {
            double value;      /* JSON_NUMBER, as the nearest double */
            bool is_integer;   /* written without fraction or exponent, fits int64 */
            int64_t integer;   /* exact value when is_integer */
        } number;
        const char *string;    /* JSON_STRING: UTF-8, NUL-terminated, may hold NULs */
        JsonValue *items;      /* JSON_ARRAY: [len] */
        JsonMember *members;   /* JSON_OBJECT: [len], in document order */
    };
};

struct JsonMember {
    const char *key;           /* UTF-8, NUL-terminated */
    size_t key_len;
    JsonValue value;
};

typedef struct {
    JsonValue root;
    struct JsonBlock *arena;   /* every node and string of the tree */
} JsonDoc;

/* Parses text[0..len) (which need not be NUL-terminated). On failure returns
 * -1 with e.g. "line 3, column 17: expected ',' or '}'" in e; the document
 * then holds nothing to free. */
int json_parse(JsonDoc *doc, const char *text, size_t len, Error *e);

/* json_parse without the members named in skip, a NULL-ended list of paths
 * from the root written as member names joined by dots ("model.vocab"; a path
 * never goes through an array). Such a member is missing from the tree, every
 * copy of it if its key repeats, yet its value is still read through and held
 * to the same rules, so a document is accepted or refused exactly as
 * json_parse would, with the same error; nothing of the value is allocated,
 * so skipping a big one saves its memory and time. A NULL or empty skip
 * parses everything. When spans is not NULL, spans[i] tells where the value
 * of skip[i] lay in text (its last copy; {0, 0} when there is none). */
typedef struct {
    size_t start, end;         /* the value is text[start .. end) */
} JsonSpan;

int json_parse_except(JsonDoc *doc, const char *text, size_t len, const char *const *skip, JsonSpan *spans,
                      Error *e);

void json_free(JsonDoc *doc);

/* Parses the file at path (at most JSON_MAX_FILE_BYTES); errors name the
 * file: "path: line 3, column 17: ...". */
int json_parse_file(JsonDoc *doc, const char *path, Error *e);

/* Maps the file at path read-only for parsing (at most JSON_MAX_FILE_BYTES;
 * *text is NULL when it is empty), for callers that also read its bytes.
 * Undo with unmap_file. */
int json_map_file(const char *path, const void **text, size_t *len, Error *e);

/* The member named key of an object, or NULL when v is not an object or has
 * no such member. If a key repeats, the last one wins, as in Python's json. */
const JsonValue *json_get(const JsonValue *v, const char *key);

/* Name of a type, for error messages: "null", "a boolean", "a number", ... */
const char *json_type_name(JsonType t);

#endif
