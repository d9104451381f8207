/* schema.h - JSON Schema to a GBNF grammar (grammar.h) whose sentences are
 * JSON texts valid under the schema.
 *
 * Supported: `type` (a name or a list), `properties`, `required`,
 * `additionalProperties` (false, true or a schema; absent counts as false:
 * only the named properties are written), `enum`, `const`, `anyOf`,
 * `oneOf` (when its branches cannot both match: different types or
 * consts), a single-schema `allOf`, `$ref` to `#`, `#/$defs/...` and
 * `#/definitions/...` (recursion too), `items`, `minItems`, `maxItems`,
 * `minLength`, `maxLength`, `pattern` (the regular-expression subset schemas
 * use: literals, `.`, classes, `\d \w \s` and their negations, groups,
 * `|`, `* + ? {m,n}`, `^` and `$` at the ends), `format` `date`, `time`,
 * `date-time`, `uuid`, and `minimum`, `maximum`, `exclusiveMinimum`,
 * `exclusiveMaximum` on integers (and integral ones on numbers).
 * Annotations (title, description, default, examples, $schema, $id,
 * $comment) are ignored; any other keyword is refused, naming it.
 *
 * The grammar writes one form of each valid text: properties in the
 * schema's order, no escapes where a plain character will do, numbers of at
 * most 16 digits, and whitespace between tokens in runs of at most
 * SCHEMA_MAX_SPACE, so that a model cannot run on forever inside a valid
 * prefix. */
#ifndef SCHEMA_H
#define SCHEMA_H

#include <stddef.h>

#include "json.h"
#include "util.h"

enum {
    SCHEMA_MAX_SPACE = 16,     /* whitespace bytes between two JSON tokens */
    SCHEMA_MAX_DEPTH = 64,     /* nesting of schemas inside schemas */
    SCHEMA_MAX_GRAMMAR = 1 << 20,  /* bytes of GBNF a schema may make */
    SCHEMA_MAX_PREFIX = 32,    /* bytes of a rule prefix (schema_gbnf_rules) */
};

/* The GBNF of the JSON Schema text[0..len): a fresh NUL-terminated string,
 * or NULL with one line in e, e.g. "schema at /properties/age: keyword
 * 'multipleOf' is not supported". */
char *schema_to_gbnf(const char *text, size_t len, Error *e);

/* For grammars that hold several schemas (a tool call's arguments, one
 * schema per tool): the rules of one parsed schema, named <prefix>1 (the
 * schema's own), <prefix>2, ... (prefix: 1 to SCHEMA_MAX_PREFIX letters,
 * digits or '-'); they use the rules of schema_gbnf_basics() (ws, value,
 * string, ...), which the grammar holds once. A fresh string, or NULL with
 * the reason in e. */
char *schema_gbnf_rules(const JsonValue *schema, const char *prefix, Error *e);
const char *schema_gbnf_basics(void);

#endif
