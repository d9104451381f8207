/* test_template.c - chat templates against Python's jinja2.
 *
 * tests/data/templates/golden.json holds what jinja2 3.1.2, set up as
 * Hugging Face transformers sets it up, rendered (scripts/
 * make_template_golden.py): the Qwen2.5 and Qwen3 chat templates and
 * hand-written templates in the style of other models' over a corpus of
 * conversations (tests/data/templates/conversations) with their options,
 * and small templates for each construct. Every case must render byte for
 * byte what jinja2 rendered, or fail where jinja2 failed: on the same
 * template line, and with the same message for runtime errors (for syntax
 * errors the wording is our own).
 *
 * Then what no golden file can show: the limits that keep an untrusted
 * template from looping, recursing or allocating without end (jinja2 has
 * none of ours), and the errors for bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../json.h"
#include "../template.h"
#include "../unicode.h"
#include "test.h"

#define DATA "tests/data/templates/"

/* ---- helpers ---- */

static char *read_data(const char *name, size_t *len) {
    char *path = path_join(DATA, name), *text;
    Error e;
    if (read_file(path, &text, len, &e) != 0) die("%s", e.msg);
    free(path);
    return text;
}

/* Renders text with vars; returns the output or NULL with the error in e. */
static char *render_text(const char *text, size_t len, const JsonValue *vars, const struct tm *now, size_t *out_len,
                         Error *e) {
    Template *t = template_parse(text, len, e);
    if (!t) return NULL;
    char *out = template_render(t, vars, now, out_len, e);
    template_free(t);
    return out;
}

/* Parses JSON text into doc (dies on error: the tests' own JSON). */
static void parse_json(JsonDoc *doc, const char *text) {
    Error e;
    if (json_parse(doc, text, strlen(text), &e) != 0) die("test JSON: %s", e.msg);
}

/* Renders a template (text) with variables (JSON text); the output or NULL. */
static char *render_json(const char *text, const char *vars_json, Error *e) {
    JsonDoc vars;
    parse_json(&vars, vars_json);
    size_t n;
    char *out = render_text(text, strlen(text), &vars.root, NULL, &n, e);
    json_free(&vars);
    return out;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* ---- the golden cases ---- */

typedef struct {
    char *name;
    JsonDoc doc;
} Conversation;

/* The conversations, each parsed once. */
static Conversation conversations[64];
static int n_conversations;

static const JsonValue *conversation(const char *name) {
    for (int i = 0; i < n_conversations; i++)
        if (strcmp(conversations[i].name, name) == 0) return &conversations[i].doc.root;
    if (n_conversations == 64) die("too many conversations");
    char file[128];
    snprintf(file, sizeof file, DATA "conversations/%s.json", name);
    Conversation *c = &conversations[n_conversations++];
    c->name = xstrdup(name);
    Error e;
    if (json_parse_file(&c->doc, file, &e) != 0) die("%s", e.msg);
    return &c->doc.root;
}

static bool in_list(const JsonValue *list, const char *key) {
    for (size_t i = 0; list && i < list->len; i++)
        if (strcmp(list->items[i].string, key) == 0) return true;
    return false;
}

/* A case's variables: the conversation's members without the "without"
 * ones and with the kwargs on top (the members array is the caller's to
 * free). */
static JsonValue case_vars(const JsonValue *c, const JsonValue *default_vars) {
    const JsonValue *vars = json_get(c, "vars");
    if (vars) return *default_vars;
    const JsonValue *conv = conversation(json_get(c, "conversation")->string), *kwargs = json_get(c, "kwargs"),
                    *without = json_get(c, "without");
    JsonValue out = {.type = JSON_OBJECT};
    out.members = xcalloc(conv->len + kwargs->len + 1, sizeof(JsonMember));
    for (size_t i = 0; i < conv->len; i++)
        if (!in_list(without, conv->members[i].key) && !json_get(kwargs, conv->members[i].key))
            out.members[out.len++] = conv->members[i];
    for (size_t i = 0; i < kwargs->len; i++) out.members[out.len++] = kwargs->members[i];
    return out;
}

/* The error types whose message we give as jinja2 does: everything raised
 * while rendering (raise_exception's TemplateError included). */
static bool message_must_match(const char *type) {
    return strcmp(type, "TemplateSyntaxError") != 0 && strcmp(type, "TemplateAssertionError") != 0 &&
           strcmp(type, "SyntaxError") != 0;
}

/* The golden cases' template files, each parsed once: every case that
 * names one renders that same parse, so the goldens also check that one
 * parse renders many times, each time from its variables alone. */
enum { MAX_TEMPLATE_FILES = 32 };
static struct {
    char *name;
    Template *t; /* NULL: the parse failed with e */
    Error e;
} parsed_files[MAX_TEMPLATE_FILES];
static int n_parsed_files;

/* Renders the template file name (parsed at its first use) with vars. */
static char *render_file(const char *name, const JsonValue *vars, const struct tm *now, size_t *out_len, Error *e) {
    int i = 0;
    while (i < n_parsed_files && strcmp(parsed_files[i].name, name) != 0) i++;
    if (i == n_parsed_files) {
        if (i == MAX_TEMPLATE_FILES) die("golden.json names more than %d template files", MAX_TEMPLATE_FILES);
        size_t len;
        char *text = read_data(name, &len);
        parsed_files[i].name = xstrdup(name);
        parsed_files[i].t = template_parse(text, len, &parsed_files[i].e);
        n_parsed_files++;
        free(text);
    }
    if (!parsed_files[i].t) {
        *e = parsed_files[i].e;
        return NULL;
    }
    return template_render(parsed_files[i].t, vars, now, out_len, e);
}

static void check_case(const JsonValue *c, const JsonValue *default_vars, const struct tm *now, int *n_outputs,
                       int *n_errors) {
    const char *name = json_get(c, "name")->string;
    const JsonValue *file = json_get(c, "template_file"), *text = json_get(c, "template");
    JsonValue vars = case_vars(c, default_vars);
    Error e = {{0}};
    size_t out_len = 0;
    char *out = file ? render_file(file->string, &vars, now, &out_len, &e)
                     : render_text(text->string, text->len, &vars, now, &out_len, &e);
    const JsonValue *want = json_get(c, "output"), *error = json_get(c, "error");
    if (want) {
        (*n_outputs)++;
        bool same = out && out_len == want->len && memcmp(out, want->string, out_len) == 0;
        if (!same && out) {
            size_t at = 0;
            while (at < out_len && at < want->len && out[at] == want->string[at]) at++;
            CHECK(false, "%s: differs from jinja2 at byte %zu: got \"%.60s\", want \"%.60s\"", name, at, out + at,
                  want->string + at);
        } else CHECK(same, "%s: jinja2 renders it, we fail with: %s", name, e.msg);
    } else {
        (*n_errors)++;
        const JsonValue *line = json_get(error, "line");
        const char *type = json_get(error, "type")->string, *message = json_get(error, "message")->string;
        CHECK(!out, "%s: jinja2 fails (%s: %s), we render \"%.80s\"", name, type, message, out ? out : "");
        if (!out) {
            char prefix[64] = "template line ";
            if (line->type == JSON_NUMBER)
                snprintf(prefix, sizeof prefix, "template line %lld: ", (long long)line->number.integer);
            CHECK(starts_with(e.msg, prefix), "%s: error '%s' should start with '%s' (jinja2: %s)", name, e.msg, prefix,
                  message);
            if (message_must_match(type) && starts_with(e.msg, prefix)) {
                /* Our error is one line: jinja2's control characters become spaces. */
                char want_msg[512];
                snprintf(want_msg, sizeof want_msg, "%s", message);
                for (char *p = want_msg; *p; p++)
                    if ((unsigned char)*p < 0x20 || *p == 0x7F) *p = ' ';
                CHECK(strcmp(e.msg + strlen(prefix), want_msg) == 0, "%s: message '%s', jinja2's '%s: %s'", name,
                      e.msg + strlen(prefix), type, want_msg);
            }
        }
    }
    if (vars.members != default_vars->members) free(vars.members);
    free(out);
}

static void test_golden(void) {
    JsonDoc golden;
    Error e;
    if (json_parse_file(&golden, DATA "golden.json", &e) != 0) die("%s", e.msg);
    /* jinja2's strftime_now read this time */
    struct tm now = {0};
    if (sscanf(json_get(&golden.root, "now")->string, "%d-%d-%d %d:%d:%d", &now.tm_year, &now.tm_mon, &now.tm_mday,
               &now.tm_hour, &now.tm_min, &now.tm_sec) != 6)
        die("golden.json: bad time");
    now.tm_year -= 1900;
    now.tm_mon -= 1;
    timegm(&now); /* the day of the week and of the year */
    const JsonValue *cases = json_get(&golden.root, "cases"), *default_vars = json_get(&golden.root, "default_vars");
    int n_outputs = 0, n_errors = 0;
    for (size_t i = 0; i < cases->len; i++) check_case(&cases->items[i], default_vars, &now, &n_outputs, &n_errors);
    for (int i = 0; i < n_parsed_files; i++) {
        template_free(parsed_files[i].t);
        free(parsed_files[i].name);
    }
    printf("golden: %d renderings and %d errors compared with jinja2\n", n_outputs, n_errors);
    CHECK(n_outputs > 400 && n_errors > 100, "golden.json has its cases (%d, %d)", n_outputs, n_errors);
    for (int i = 0; i < n_conversations; i++) {
        json_free(&conversations[i].doc);
        free(conversations[i].name);
    }
    json_free(&golden);
}

/* ---- limits on untrusted templates ---- */

/* The template fails with an error that contains what. */
static void refuse(const char *text, const char *what) {
    Error e = {{0}};
    char *out = render_json(text, "{}", &e);
    CHECK(out == NULL && strstr(e.msg, what) != NULL, "'%.60s' fails with '%s' (got '%s')", text, what,
          out ? "output" : e.msg);
    free(out);
}

static void test_limits(void) {
    /* 10^10 iterations: stopped at the iteration limit */
    refuse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop iterations");
    refuse("{% for i in range(100000) %}{% for j in range(100000) %}{% if j > 5 %}{% continue %}{% endif %}x{% endfor "
           "%}{% endfor %}",
           "loop iterations");
    /* 100 MB of output */
    refuse("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "longer than 16 MiB");
    /* strings that double each time */
    refuse("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
           "16 MiB");
    refuse("{{ 'x' * 100000000 }}", "16 MiB");
    refuse("{{ ('x' * 1000)|center(1000000000) }}", "16 MiB");
    /* many big strings kept alive: the memory limit */
    refuse("{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = ns.l + ['x' * 8000000] %}{% endfor %}",
           "memory");
    /* endless recursion */
    refuse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nests deeper");
    refuse("{% set ns = namespace() %}{% set ns.items = [ns] %}{% for x in ns.items recursive %}{{ loop(x.items) }}{% "
           "endfor %}",
           "deeper");
    /* values nested without end */
    refuse("{% set ns = namespace(t=[]) %}{% for i in range(100000) %}{% set ns.t = [ns.t] %}{% endfor %}{{ ns.t }}",
           "nested too deeply");
    refuse(
        "{% set ns = namespace(t=[]) %}{% for i in range(5000) %}{% set ns.t = [ns.t] %}{% endfor %}{{ ns.t == ns.t }}",
        "nested too deeply");
    refuse(
        "{% set ns = namespace(t=[]) %}{% for i in range(5000) %}{% set ns.t = [ns.t] %}{% endfor %}{{ ns.t|tojson }}",
        "nested too deeply");
    refuse("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested too deeply");

    /* expressions nested deeper than the parser goes */
    char *deep = xmalloc(20000);
    size_t n = 0;
    n += (size_t)sprintf(deep + n, "{{ ");
    for (int i = 0; i < 3000; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 3000; i++) deep[n++] = ')';
    strcpy(deep + n, " }}");
    refuse(deep, "nested too deeply");
    /* a long chain of operators is as deep */
    n = (size_t)sprintf(deep, "{{ 1");
    for (int i = 0; i < 3000; i++) n += (size_t)sprintf(deep + n, " + 1");
    strcpy(deep + n, " }}");
    refuse(deep, "nested too deeply");
    n = (size_t)sprintf(deep, "{{ x");
    for (int i = 0; i < 3000; i++) n += (size_t)sprintf(deep + n, "|trim");
    strcpy(deep + n, " }}");
    refuse(deep, "nested too deeply");
    n = 0;
    for (int i = 0; i < 1000; i++) n += (size_t)sprintf(deep + n, "{%% if true %%}");
    refuse(deep, "nested too deeply");
    free(deep);

    /* up to the limits, all is well: 100 levels of macro recursion, 90,000 iterations */
    Error e;
    char *out = render_json(
        "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}done{% endif %}{% endmacro %}{{ f(30) }}", "{}", &e);
    CHECK(out && strcmp(out, "done") == 0, "recursion 30 deep renders (%s)", out ? out : e.msg);
    free(out);
    out = render_json("{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}ok", "{}", &e);
    CHECK(out && strcmp(out, "ok") == 0, "90,000 iterations render (%s)", out ? out : e.msg);
    free(out);
}

/* ---- bad input ---- */

static void test_bad_input(void) {
    Error e = {{0}};
    /* invalid UTF-8 */
    CHECK(template_parse("ok \xff\xfe", 5, &e) == NULL && strstr(e.msg, "UTF-8"), "invalid UTF-8 refused (%s)", e.msg);
    CHECK(template_parse("\xe2\x82", 2, &e) == NULL, "truncated UTF-8 refused");
    /* too large */
    size_t big = TEMPLATE_MAX_TEXT + 1;
    char *text = xmalloc(big);
    memset(text, 'a', big);
    CHECK(template_parse(text, big, &e) == NULL && strstr(e.msg, "larger"), "oversized template refused (%s)", e.msg);
    free(text);
    /* variables that are not an object */
    Template *t = template_parse("x", 1, &e);
    JsonDoc vars;
    parse_json(&vars, "[1, 2]");
    size_t n;
    CHECK(template_render(t, &vars.root, NULL, &n, &e) == NULL && strstr(e.msg, "object"),
          "array of variables refused");
    json_free(&vars);
    CHECK(template_render(t, NULL, NULL, &n, &e) == NULL, "no variables refused");
    template_free(t);
    /* NUL bytes in the template and in the variables go through */
    t = template_parse("a\0{{ s }}\0b", 11, &e);
    parse_json(&vars, "{\"s\": \"x\\u0000y\"}");
    char *out = t ? template_render(t, &vars.root, NULL, &n, &e) : NULL;
    CHECK(out && n == 7 && memcmp(out, "a\0x\0y\0b", 7) == 0, "NUL bytes are kept");
    free(out);
    json_free(&vars);
    template_free(t);
    /* an error message is one line, whatever raise_exception is given */
    out = render_json("\n{{ raise_exception('two\\nlines') }}", "{}", &e);
    CHECK(!out && strcmp(e.msg, "template line 2: two lines") == 0, "one-line error (%s)", e.msg);
    /* and valid UTF-8, even when it quotes one byte of a character */
    out = render_json("{{ '{0!\xc3\xa9}'.format(1) }}", "{}", &e);
    char *fixed;
    size_t fixed_len;
    CHECK(!out && utf8_lossy(e.msg, strlen(e.msg), &fixed, &fixed_len) == 0, "valid UTF-8 error (%s)", e.msg);
    template_free(NULL);
}

/* ---- the API's other promises ---- */

static void test_api(void) {
    /* (one parse rendering many times is checked by the golden cases:
     * every case of a template file renders the same parse) */
    Error e;
    /* strftime_now without a given time formats the current year */
    char *out = render_json("{{ strftime_now('%Y') }}", "{}", &e);
    time_t now = time(NULL);
    struct tm local;
    localtime_r(&now, &local);
    char year[16];
    snprintf(year, sizeof year, "%d", local.tm_year + 1900);
    CHECK(out && strcmp(out, year) == 0, "strftime_now uses the current time (%s)", out ? out : e.msg);
    free(out);
}

int main(void) {
    test_golden();
    test_limits();
    test_bad_input();
    test_api();
    return test_summary("test_template");
}
