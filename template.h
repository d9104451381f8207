/* template.h - chat templates: the part of Jinja that Hugging Face chat
 * templates use, rendering byte for byte what Python's jinja2 renders with
 * transformers' settings (an ImmutableSandboxedEnvironment with trim_blocks,
 * lstrip_blocks and the loop controls break/continue; transformers' own
 * tojson filter, raise_exception and strftime_now).
 *
 * What is understood (Python's semantics wherever Jinja passes them on):
 *   text, {{ expression }}, {# comments #}, {% raw %}, whitespace control
 *   with - and +;
 *   {% if %}/elif/else, {% for %} (tuple targets, `if` filters, else,
 *   recursive loops, loop.index/index0/revindex/revindex0/first/last/length/
 *   previtem/nextitem/depth/cycle()/changed()), break, continue, {% set %}
 *   (names, tuples, namespace attributes, blocks), {% macro %}, {% with %},
 *   {% filter %}, {% generation %};
 *   expressions: literals, lists, tuples, dicts, + - * / // % ** ~, unary
 *   - and +, comparisons (chained), and/or/not, in/not in, `is` tests,
 *   conditional expressions, indexing, slicing, attributes (dict.key falls
 *   back to dict['key'] as in Jinja), calls with keyword arguments, filters;
 *   Jinja's Undefined: prints as nothing, is false, iterates as empty, and
 *   fails (with Jinja's message) when used any other way;
 *   the str, dict and list methods templates call, printf-style % and
 *   str.format, range, dict, namespace, raise_exception, strftime_now.
 * jinja/names.c lists every filter and test.
 *
 * Known differences from jinja2: integers are 64-bit (Python's are not:
 * what would overflow is an error), \N{...} escapes and complex numbers
 * are not supported, case mapping (upper, lower, title) knows ASCII,
 * Latin-1, Latin Extended-A, Greek and Cyrillic, and the repr of a
 * generator or method has no memory address; call blocks, includes and
 * the other tags that need more than one template are refused.
 *
 * A template is untrusted input: rendering is bounded by the limits below
 * (deep nesting needs up to about 1 MiB of stack), and every error is one
 * line that names the template line, e.g.
 * "template line 3: 'dict object' has no attribute 'content'".
 * A parsed template is read-only while it renders, so threads may render
 * the same one at once. */
#ifndef TEMPLATE_H
#define TEMPLATE_H

#include <stddef.h>
#include <time.h>

#include "json.h"
#include "util.h"

/* Limits on rendering an untrusted template. */
#define TEMPLATE_MAX_OUTPUT ((size_t)16 << 20)  /* bytes of rendered text, and of any one string */
#define TEMPLATE_MAX_MEMORY ((size_t)256 << 20) /* bytes of values a render may allocate */
#define TEMPLATE_MAX_ITERATIONS 1000000         /* loop iterations, items filtered, printed, sorted */
#define TEMPLATE_MAX_DEPTH 1000                 /* nesting of macro calls, blocks and expressions */
#define TEMPLATE_MAX_TEXT ((size_t)1 << 20)     /* bytes of template text */

typedef struct Template Template;

/* Parses a template (UTF-8 text of len bytes). On a syntax error returns
 * NULL with "template line N: ..." in e. */
Template *template_parse(const char *text, size_t len, Error *e);
void template_free(Template *t);

/* Renders t with the variables of vars, a JSON object, e.g.
 *   {"messages": [{"role": "user", "content": "Hi"}],
 *    "add_generation_prompt": true, "bos_token": "<s>", "tools": null}
 * (JSON null is Python's None; a variable that vars does not have is
 * undefined; transformers passes tools=None and documents=None when there
 * are none, and its special tokens such as bos_token and eos_token). now is
 * the time strftime_now formats, or NULL for the current local time.
 * Returns the text (NUL-terminated, *out_len bytes) for the caller to free,
 * or NULL with the error in e. */
char *template_render(const Template *t, const JsonValue *vars, const struct tm *now, size_t *out_len, Error *e);

#endif
