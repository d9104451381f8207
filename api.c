/* api.c - OpenAI-style requests in, response objects and event chunks out;
 * embeddings' requests and lists of vectors. */
#include "api.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void api_error(Buf *b, int status, const char *message) {
    const char *type = status == 401 ? "authentication_error" : status == 404 ? "not_found_error" :
                       status == 503 ? "unavailable_error" : status >= 500 ? "server_error" : "invalid_request_error";
    buf_puts(b, "{\"error\":{\"message\":");
    buf_json_string(b, message, strlen(message));
    buf_printf(b, ",\"type\":\"%s\",\"code\":%d}}", type, status);
}

/* ---- reading requests ---- */

/* Field `key` of the body when it is present and not null. */
static const JsonValue *field(const JsonValue *root, const char *key) {
    const JsonValue *v = json_get(root, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

static int number_field(const JsonValue *root, const char *key, double *out, Error *e) {
    const JsonValue *v = field(root, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER) return fail(e, "'%s' must be a number, not %s", key, json_type_name(v->type));
    *out = v->number.value;
    return 0;
}

/* An integer field in [lo, hi]; *given says whether it was there. */
static int integer_field(const JsonValue *root, const char *key, long long lo, long long hi, long long *out,
                         bool *given, Error *e) {
    const JsonValue *v = field(root, key);
    if (given) *given = v != NULL;
    if (!v) return 0;
    if (v->type != JSON_NUMBER) return fail(e, "'%s' must be an integer, not %s", key, json_type_name(v->type));
    /* A whole number too large for 64 bits (1e20) is out of range, not a fraction. */
    double x = v->number.value;
    if (!v->number.is_integer && x == floor(x)) return fail(e, "'%s' must be in [%lld, %lld]", key, lo, hi);
    if (!v->number.is_integer) return fail(e, "'%s' must be an integer, not a fraction", key);
    if (v->number.integer < lo || v->number.integer > hi) return fail(e, "'%s' must be in [%lld, %lld]", key, lo, hi);
    *out = v->number.integer;
    return 0;
}

static int bool_field(const JsonValue *root, const char *key, bool *out, Error *e) {
    const JsonValue *v = field(root, key);
    if (!v) return 0;
    if (v->type != JSON_BOOL) return fail(e, "'%s' must be a boolean, not %s", key, json_type_name(v->type));
    *out = v->boolean;
    return 0;
}

/* Refuses the members of object v that are not in allowed[] (NULL-ended),
 * naming the first; `where` says whose they are. */
static int only_members(const JsonValue *v, const char *const *allowed, const char *where, Error *e) {
    for (size_t i = 0; i < v->len; i++) {
        int k = 0;
        while (allowed[k] && strcmp(allowed[k], v->members[i].key) != 0) k++;
        if (!allowed[k]) return fail(e, "%s'%.60s' is not supported", where, v->members[i].key);
    }
    return 0;
}

/* "stop": a string or a list of at most MAX_STOP_STRINGS non-empty strings. */
static int read_stops(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *v = field(root, "stop");
    if (!v) return 0;
    const JsonValue *items = v->type == JSON_STRING ? v : v->type == JSON_ARRAY ? v->items : NULL;
    size_t n = v->type == JSON_STRING ? 1 : v->type == JSON_ARRAY ? v->len : 0;
    if (!items) return fail(e, "'stop' must be a string or a list of strings, not %s", json_type_name(v->type));
    if (n > MAX_STOP_STRINGS) return fail(e, "'stop' may hold at most %d strings", MAX_STOP_STRINGS);
    for (size_t i = 0; i < n; i++) {
        if (items[i].type != JSON_STRING) return fail(e, "'stop' must be a string or a list of strings");
        if (items[i].len == 0 || strlen(items[i].string) != items[i].len)
            return fail(e, "a stop string must be non-empty and hold no NUL");
        r->stops[r->n_stops++] = items[i].string;
    }
    return 0;
}

/* The sampling settings, the length limit, n, seed, stream and stop. */
static int read_settings(ApiRequest *r, const JsonValue *root, Error *e) {
    SamplerConfig *s = &r->generation.sampling;
    long long top_k = s->top_k, n = 1, seed = 0, max_tokens = 0;
    bool given;
    if (number_field(root, "temperature", &s->temperature, e) || number_field(root, "top_p", &s->top_p, e) ||
        number_field(root, "min_p", &s->min_p, e) || number_field(root, "repetition_penalty", &s->repeat_penalty, e) ||
        number_field(root, "presence_penalty", &s->presence_penalty, e) ||
        number_field(root, "frequency_penalty", &s->frequency_penalty, e) ||
        integer_field(root, "top_k", -1, 1 << 30, &top_k, NULL, e) || integer_field(root, "n", 1, 1 << 30, &n, NULL, e) ||
        integer_field(root, "seed", INT64_MIN, INT64_MAX, &seed, &r->seed_given, e) ||
        bool_field(root, "stream", &r->stream, e) || read_stops(r, root, e))
        return -1;
    if (n != 1) return fail(e, "'n' must be 1: one choice per request");
    s->top_k = top_k < 0 ? 0 : (int)top_k;  /* -1 is off, as in vLLM */
    if (r->seed_given) s->seed = (uint64_t)seed;
    const char *length_keys[] = {"max_tokens", "max_completion_tokens"};
    for (int i = 0; i < 2; i++) {
        if (integer_field(root, length_keys[i], INT64_MIN, INT64_MAX, &max_tokens, &given, e)) return -1;
        if (!given) continue;
        if (max_tokens < -1)
            return fail(e, "'%s' must be -1 (until an end token or a full context), 0 (the prompt only) or more",
                        length_keys[i]);
        r->generation.max_new = max_tokens > 1 << 30 ? 1 << 30 : (int)max_tokens;
    }
    const JsonValue *options = field(root, "stream_options");
    if (options && options->type != JSON_OBJECT)
        return fail(e, "'stream_options' must be an object, not %s", json_type_name(options->type));
    static const char *const option_keys[] = {"include_usage", NULL};
    if (options && (only_members(options, option_keys, "stream_options: ", e) ||
                    bool_field(options, "include_usage", &r->include_usage, e)))
        return -1;
    Error bad;
    if (sampler_check_config(s, &bad) != 0) return fail(e, "%s", bad.msg);
    return 0;
}

/* Chat: "logprobs" true and "top_logprobs" 0..20. Completion: "logprobs" 0..20. */
static int read_logprobs(ApiRequest *r, const JsonValue *root, Error *e) {
    long long top = 0;
    bool wanted = false, given;
    if (r->kind == API_COMPLETION) {
        if (integer_field(root, "logprobs", 0, MAX_TOP_LOGPROBS, &top, &given, e)) return -1;
        r->logprobs = given ? (int)top : -1;
        return 0;
    }
    if (bool_field(root, "logprobs", &wanted, e) ||
        integer_field(root, "top_logprobs", 0, MAX_TOP_LOGPROBS, &top, &given, e))
        return -1;
    if (given && !wanted) return fail(e, "'top_logprobs' needs 'logprobs': true");
    r->logprobs = wanted ? (int)top : -1;
    return 0;
}

/* ---- messages ---- */

/* Keeps p (the request's memory) until api_request_free. */
static void *keep(ApiRequest *r, void *p) {
    r->owned = xrealloc(r->owned, r->n_owned + 1, sizeof *r->owned);
    r->owned[r->n_owned++] = p;
    return p;
}

static JsonValue string_value(const char *s) { return (JsonValue){.type = JSON_STRING, .len = strlen(s), .string = s}; }

static JsonMember member(const char *key, JsonValue value) {
    return (JsonMember){.key = key, .key_len = strlen(key), .value = value};
}

/* A message's content: a string, or a list of {"type": "text", "text": ...}
 * parts, joined; an assistant's may be null. */
static int read_content(ApiRequest *r, const JsonValue *content, size_t i, const char **out, Error *e) {
    if (!content || content->type == JSON_NULL) return *out = "", 0;
    if (content->type == JSON_STRING) return *out = content->string, 0;
    if (content->type != JSON_ARRAY)
        return fail(e, "messages[%zu].content must be a string or a list of text parts, not %s", i, json_type_name(content->type));
    Buf joined = {0};
    buf_add(&joined, "", 0);
    for (size_t p = 0; p < content->len; p++) {
        const JsonValue *part = &content->items[p], *type = json_get(part, "type"), *text = json_get(part, "text");
        if (part->type != JSON_OBJECT || !type || type->type != JSON_STRING || strcmp(type->string, "text") != 0 ||
            !text || text->type != JSON_STRING) {
            buf_free(&joined);
            return fail(e, "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": \"...\"}", i, p);
        }
        buf_add(&joined, text->string, text->len);
    }
    *out = keep(r, joined.data);
    return 0;
}

/* Whether s is a function name OpenAI allows: 1 to 64 of [a-zA-Z0-9_-]. */
static bool function_name_ok(const JsonValue *s) {
    return s && s->type == JSON_STRING && s->len >= 1 && s->len <= 64 &&
           strspn(s->string, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == s->len;
}

/* An assistant's "tool_calls": each {"id", "type": "function", "function":
 * {"name", "arguments": JSON text}} with its arguments parsed, as vLLM and
 * llama-server hand them to the template (whose tojson would otherwise
 * show the model an escaped string). */
static int read_tool_calls(ApiRequest *r, const JsonValue *calls, size_t i, JsonValue *out, Error *e) {
    static const char *const call_keys[] = {"id", "type", "function", NULL}, *const function_keys[] = {"name", "arguments", NULL};
    char where[64];
    if (calls->type != JSON_ARRAY) return fail(e, "messages[%zu].tool_calls must be a list, not %s", i, json_type_name(calls->type));
    JsonValue *items = keep(r, xcalloc(calls->len + 1, sizeof *items));
    r->arguments = xrealloc(r->arguments, r->n_arguments + calls->len + 1, sizeof *r->arguments);
    for (size_t j = 0; j < calls->len; j++) {
        const JsonValue *c = &calls->items[j];
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu]", i, j);
        if (c->type != JSON_OBJECT) return fail(e, "%s must be an object", where);
        const JsonValue *id = json_get(c, "id"), *type = json_get(c, "type"), *function = json_get(c, "function");
        char prefix[80];
        snprintf(prefix, sizeof prefix, "%s: ", where);
        if (only_members(c, call_keys, prefix, e)) return -1;
        if (id && id->type != JSON_STRING) return fail(e, "%s.id must be a string", where);
        if (type && !(type->type == JSON_STRING && strcmp(type->string, "function") == 0))
            return fail(e, "%s.type must be \"function\"", where);
        if (!function || function->type != JSON_OBJECT) return fail(e, "%s.function must be an object", where);
        snprintf(prefix, sizeof prefix, "%s.function: ", where);
        if (only_members(function, function_keys, prefix, e)) return -1;
        const JsonValue *name = json_get(function, "name"), *arguments = json_get(function, "arguments");
        if (!name || name->type != JSON_STRING) return fail(e, "%s.function.name must be a string", where);
        if (!arguments || arguments->type != JSON_STRING) return fail(e, "%s.function.arguments must be a string (JSON text)", where);
        JsonDoc *doc = &r->arguments[r->n_arguments];
        Error why;
        if (json_parse(doc, arguments->string, arguments->len, &why) != 0)
            return fail(e, "%s.function.arguments is not JSON: %s", where, why.msg);
        r->n_arguments++;
        JsonMember *f = keep(r, xcalloc(2, sizeof *f)), *m = keep(r, xcalloc(3, sizeof *m));
        f[0] = member("name", *name);
        f[1] = member("arguments", doc->root);
        size_t n = 0;
        if (id) m[n++] = member("id", *id);
        m[n++] = member("type", string_value("function"));
        m[n++] = member("function", (JsonValue){.type = JSON_OBJECT, .len = 2, .members = f});
        items[j] = (JsonValue){.type = JSON_OBJECT, .len = n, .members = m};
    }
    *out = (JsonValue){.type = JSON_ARRAY, .len = calls->len, .items = items};
    return 0;
}

/* One message, as the template sees it. */
static int read_message(ApiRequest *r, const JsonValue *m, size_t i, JsonValue *out, Error *e) {
    static const char *const keys[] = {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content",
                                       "refusal", "annotations", NULL};
    if (m->type != JSON_OBJECT) return fail(e, "messages[%zu] must be an object, not %s", i, json_type_name(m->type));
    char prefix[48];
    snprintf(prefix, sizeof prefix, "messages[%zu]: ", i);
    if (only_members(m, keys, prefix, e)) return -1;
    const JsonValue *role = json_get(m, "role");
    if (!role || role->type != JSON_STRING) return fail(e, "messages[%zu].role must be a string", i);
    const char *name = role->string;
    if (strcmp(name, "developer") == 0) name = "system";
    bool assistant = strcmp(name, "assistant") == 0, tool = strcmp(name, "tool") == 0;
    if (strcmp(name, "system") != 0 && strcmp(name, "user") != 0 && !assistant && !tool)
        return fail(e, "messages[%zu].role: unknown role '%.40s' (system, user, assistant or tool)", i, role->string);
    const JsonValue *content = json_get(m, "content"), *calls = field(m, "tool_calls"), *call_id = json_get(m, "tool_call_id");
    const JsonValue *who = field(m, "name"), *reasoning = field(m, "reasoning_content");
    const JsonValue *refusal = field(m, "refusal"), *annotations = field(m, "annotations");
    if (!assistant && (!content || content->type == JSON_NULL)) return fail(e, "messages[%zu].content is missing", i);
    if (calls && !assistant) return fail(e, "messages[%zu]: only an assistant's message has tool_calls", i);
    if (reasoning && !assistant) return fail(e, "messages[%zu]: only an assistant's message has reasoning_content", i);
    if (reasoning && reasoning->type != JSON_STRING) return fail(e, "messages[%zu].reasoning_content must be a string", i);
    if (tool && (!call_id || call_id->type != JSON_STRING)) return fail(e, "messages[%zu].tool_call_id is missing (a tool's message answers a call)", i);
    if (!tool && call_id) return fail(e, "messages[%zu]: only a tool's message has tool_call_id", i);
    if (who && who->type != JSON_STRING) return fail(e, "messages[%zu].name must be a string", i);
    if (refusal) return fail(e, "messages[%zu].refusal: a refusal in the history is not supported", i);
    if (annotations && !(annotations->type == JSON_ARRAY && annotations->len == 0))
        return fail(e, "messages[%zu].annotations are not supported", i);
    const char *text = "";
    if (read_content(r, content, i, &text, e)) return -1;
    JsonMember *members = keep(r, xcalloc(6, sizeof *members));
    size_t n = 0;
    members[n++] = member("role", string_value(name));
    members[n++] = member("content", string_value(text));
    if (who) members[n++] = member("name", *who);
    if (calls) {
        JsonValue list;
        if (read_tool_calls(r, calls, i, &list, e)) return -1;
        members[n++] = member("tool_calls", list);
    }
    if (tool) members[n++] = member("tool_call_id", *call_id);
    if (reasoning) members[n++] = member("reasoning_content", *reasoning);
    *out = (JsonValue){.type = JSON_OBJECT, .len = n, .members = members};
    return 0;
}

/* "messages": a non-empty list of messages. */
static int read_messages(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *messages = json_get(root, "messages");
    if (!messages || messages->type != JSON_ARRAY) return fail(e, "'messages' must be a list of messages");
    if (messages->len == 0) return fail(e, "'messages' must not be empty");
    JsonValue *items = keep(r, xcalloc(messages->len, sizeof *items));
    for (size_t i = 0; i < messages->len; i++)
        if (read_message(r, &messages->items[i], i, &items[i], e)) return -1;
    r->messages = (JsonValue){.type = JSON_ARRAY, .len = messages->len, .items = items};
    const JsonValue *kwargs = field(root, "chat_template_kwargs");
    if (kwargs && kwargs->type != JSON_OBJECT) return fail(e, "'chat_template_kwargs' must be an object");
    r->template_kwargs = kwargs;
    return 0;
}

/* ---- tools, response_format, logit_bias, reasoning_format ---- */

/* "tools": a non-empty list of {"type": "function", "function": {"name",
 * "description", "parameters", "strict"}} with distinct names; passed to
 * the template as given. */
static int read_tools(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *tools = field(root, "tools");
    if (!tools) return 0;
    if (tools->type != JSON_ARRAY || tools->len == 0) return fail(e, "'tools' must be a non-empty list of functions");
    for (size_t i = 0; i < tools->len; i++) {
        const JsonValue *t = &tools->items[i], *type = json_get(t, "type"), *f = json_get(t, "function");
        if (t->type != JSON_OBJECT || !type || type->type != JSON_STRING || strcmp(type->string, "function") != 0)
            return fail(e, "tools[%zu] must be {\"type\": \"function\", \"function\": {...}} (no other kind of tool is supported)", i);
        if (!f || f->type != JSON_OBJECT) return fail(e, "tools[%zu].function must be an object", i);
        const JsonValue *name = json_get(f, "name"), *description = field(f, "description"),
                        *parameters = field(f, "parameters"), *strict = field(f, "strict");
        if (!function_name_ok(name)) return fail(e, "tools[%zu].function.name must be 1 to 64 letters, digits, '_' or '-'", i);
        if (description && description->type != JSON_STRING) return fail(e, "tools[%zu].function.description must be a string", i);
        if (parameters && parameters->type != JSON_OBJECT) return fail(e, "tools[%zu].function.parameters must be a JSON Schema object", i);
        if (strict && strict->type != JSON_BOOL) return fail(e, "tools[%zu].function.strict must be a boolean", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_get(json_get(&tools->items[j], "function"), "name")->string, name->string) == 0)
                return fail(e, "tools[%zu]: the function name '%s' is given twice", i, name->string);
    }
    r->tools = tools;
    return 0;
}

/* The function named `name` among the tools, or NULL. */
static const JsonValue *find_tool(const JsonValue *tools, const char *name) {
    for (size_t i = 0; tools && i < tools->len; i++) {
        const JsonValue *f = json_get(&tools->items[i], "function");
        if (strcmp(json_get(f, "name")->string, name) == 0) return f;
    }
    return NULL;
}

/* "tool_choice": none, auto, required or {"type": "function", "function":
 * {"name": ...}}; "parallel_tool_calls". */
static int read_tool_choice(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *choice = field(root, "tool_choice");
    r->tool_choice = r->tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
    r->parallel_tool_calls = true;
    if (bool_field(root, "parallel_tool_calls", &r->parallel_tool_calls, e)) return -1;
    if (!choice) return 0;
    if (choice->type == JSON_STRING) {
        const char *names[] = {"none", "auto", "required"};
        int k = 0;
        while (k < 3 && strcmp(choice->string, names[k]) != 0) k++;
        if (k == 3) return fail(e, "'tool_choice' must be \"none\", \"auto\", \"required\" or a function");
        r->tool_choice = (ApiToolChoice)k;
    } else {
        const JsonValue *type = json_get(choice, "type"), *f = json_get(choice, "function"), *name = json_get(f, "name");
        if (choice->type != JSON_OBJECT || !type || type->type != JSON_STRING || strcmp(type->string, "function") != 0 ||
            !name || name->type != JSON_STRING)
            return fail(e, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        if (!find_tool(r->tools, name->string))
            return fail(e, "'tool_choice' names the function '%.64s', which 'tools' does not list", name->string);
        r->tool_choice = API_TOOLS_NAMED;
        r->tool_name = name->string;
    }
    if (!r->tools && r->tool_choice == API_TOOLS_REQUIRED) return fail(e, "'tool_choice' \"required\" needs 'tools'");
    return 0;
}

/* The schema of any JSON value: a json_schema without "schema". */
static const JsonValue any_value = {.type = JSON_BOOL, .boolean = true};

/* "response_format": {"type": "text"}, {"type": "json_object"} or
 * {"type": "json_schema", "json_schema": {"name", "description", "schema",
 * "strict"}}; and llama.cpp's "json_schema" and "grammar" beside it. */
static int read_format(ApiRequest *r, const JsonValue *root, Error *e) {
    static const char *const format_keys[] = {"type", "json_schema", "schema", NULL},
                             *const schema_keys[] = {"name", "description", "schema", "strict", NULL};
    const JsonValue *format = field(root, "response_format"), *schema = field(root, "json_schema"),
                    *grammar = field(root, "grammar");
    r->format = API_FORMAT_TEXT;
    if (format) {
        const JsonValue *type = json_get(format, "type");
        if (format->type != JSON_OBJECT || !type || type->type != JSON_STRING)
            return fail(e, "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
        if (only_members(format, format_keys, "response_format: ", e)) return -1;
        const JsonValue *inner = field(format, "json_schema"), *direct = field(format, "schema");
        if (strcmp(type->string, "text") == 0 && !inner && !direct) {
        } else if (strcmp(type->string, "json_object") == 0 && !inner) {
            r->format = API_FORMAT_JSON_OBJECT;
            if (direct) r->format = API_FORMAT_JSON_SCHEMA, r->schema = direct;  /* llama-server's form */
        } else if (strcmp(type->string, "json_schema") == 0 && inner && !direct) {
            if (inner->type != JSON_OBJECT) return fail(e, "response_format.json_schema must be an object");
            if (only_members(inner, schema_keys, "response_format.json_schema: ", e)) return -1;
            const JsonValue *name = field(inner, "name"), *strict = field(inner, "strict"),
                            *description = field(inner, "description");
            if (name && name->type != JSON_STRING) return fail(e, "response_format.json_schema.name must be a string");
            if (strict && strict->type != JSON_BOOL) return fail(e, "response_format.json_schema.strict must be a boolean");
            if (description && description->type != JSON_STRING)
                return fail(e, "response_format.json_schema.description must be a string");
            r->format = API_FORMAT_JSON_SCHEMA;
            r->schema = field(inner, "schema");
            if (!r->schema) r->schema = &any_value;
        } else {
            return fail(e, "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                           "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}");
        }
        if (r->schema && r->schema->type != JSON_OBJECT && r->schema->type != JSON_BOOL)
            return fail(e, "the response format's schema must be a JSON Schema (an object)");
    }
    if (schema) {
        if (r->format != API_FORMAT_TEXT) return fail(e, "give one of 'response_format' and 'json_schema'");
        if (schema->type != JSON_OBJECT && schema->type != JSON_BOOL) return fail(e, "'json_schema' must be a JSON Schema (an object)");
        r->format = API_FORMAT_JSON_SCHEMA;
        r->schema = schema;
    }
    if (grammar) {
        if (grammar->type != JSON_STRING) return fail(e, "'grammar' must be a string (GBNF)");
        if (r->format != API_FORMAT_TEXT) return fail(e, "give one of 'grammar' and a JSON response format");
        if (r->tool_choice != API_TOOLS_NONE) return fail(e, "'grammar' and tool calls cannot be combined: give 'tool_choice': \"none\"");
        r->grammar = grammar->string;
    }
    return 0;
}

/* A logit_bias entry and where it stood in the object. */
typedef struct {
    LogitBias bias;
    size_t at;
} BiasEntry;

static int compare_bias(const void *a, const void *b) {
    const BiasEntry *x = a, *y = b;
    if (x->bias.id != y->bias.id) return x->bias.id < y->bias.id ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* "logit_bias": {"token id": bias in [-100, 100]}; a repeated id takes its
 * last value, as Python's json (OpenAI's) does. */
static int read_logit_bias(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *bias = field(root, "logit_bias");
    if (!bias) return 0;
    if (bias->type != JSON_OBJECT) return fail(e, "'logit_bias' must be an object of token ids and biases");
    BiasEntry *entries = xmalloc((bias->len + 1) * sizeof *entries);
    for (size_t i = 0; i < bias->len; i++) {
        const JsonMember *m = &bias->members[i];
        if (m->key_len == 0 || m->key_len > 9 || strspn(m->key, "0123456789") != m->key_len) {
            free(entries);
            return fail(e, "'logit_bias' keys must be token ids (decimal integers), not '%.40s'", m->key);
        }
        if (m->value.type != JSON_NUMBER || !(m->value.number.value >= -100 && m->value.number.value <= 100)) {
            free(entries);
            return fail(e, "'logit_bias' values must be numbers in [-100, 100]");
        }
        entries[i] = (BiasEntry){{(int)strtol(m->key, NULL, 10), (float)m->value.number.value}, i};
    }
    /* By id, and of each id the last one given. */
    qsort(entries, bias->len, sizeof *entries, compare_bias);
    r->bias = xmalloc((bias->len + 1) * sizeof *r->bias);
    for (size_t i = 0; i < bias->len; i++)
        if (i + 1 == bias->len || entries[i + 1].bias.id != entries[i].bias.id) r->bias[r->n_bias++] = entries[i].bias;
    free(entries);
    r->generation.sampling.bias = r->bias;
    r->generation.sampling.n_bias = r->n_bias;
    return 0;
}

/* "reasoning_format" (llama-server's): "auto" or "deepseek" puts a reply's
 * <think>...</think> in reasoning_content; "none" leaves it in the content. */
static int read_reasoning_format(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *v = field(root, "reasoning_format");
    if (!v) return 0;
    if (v->type != JSON_STRING || !(strcmp(v->string, "none") == 0 || strcmp(v->string, "auto") == 0 ||
                                    strcmp(v->string, "deepseek") == 0))
        return fail(e, "'reasoning_format' must be \"auto\", \"deepseek\" or \"none\"");
    r->reasoning_inline = strcmp(v->string, "none") == 0;
    return 0;
}

/* The body's members: each one this server reads, or one that changes
 * nothing in a reply (the model's name, and what OpenAI keeps for
 * accounting or caching); any other is refused by name, never ignored. */
static int check_members(const JsonValue *root, ApiKind kind, Error *e) {
    static const char *const common[] = {
        "model", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
        "n", "seed", "stream", "stream_options", "stop", "max_tokens", "logprobs", "logit_bias", "response_format",
        "json_schema", "grammar", "user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key",
        "cache_prompt", NULL};
    static const char *const chat[] = {"messages", "max_completion_tokens", "top_logprobs", "chat_template_kwargs", "tools",
                                       "tool_choice", "parallel_tool_calls", "reasoning_format", "modalities", "prediction", NULL};
    static const char *const completion[] = {"prompt", "echo", "best_of", "suffix", NULL};
    const char *const *own = kind == API_CHAT ? chat : completion;
    for (size_t i = 0; i < root->len; i++) {
        const char *key = root->members[i].key;
        int a = 0, b = 0;
        while (common[a] && strcmp(common[a], key) != 0) a++;
        while (own[b] && strcmp(own[b], key) != 0) b++;
        if (!common[a] && !own[b]) return fail(e, "'%.60s' is not supported", key);
    }
    /* Accepted only with the value that changes nothing. */
    const JsonValue *modalities = field(root, "modalities"), *echo = field(root, "echo"), *best_of = field(root, "best_of"),
                    *suffix = field(root, "suffix");
    if (modalities && !(modalities->type == JSON_ARRAY && modalities->len == 1 && modalities->items[0].type == JSON_STRING &&
                        strcmp(modalities->items[0].string, "text") == 0))
        return fail(e, "'modalities' must be [\"text\"]: only text is supported");
    if (echo && !(echo->type == JSON_BOOL && !echo->boolean)) return fail(e, "'echo' is not supported (only false)");
    if (best_of && !(best_of->type == JSON_NUMBER && best_of->number.value == 1)) return fail(e, "'best_of' must be 1");
    if (suffix && !(suffix->type == JSON_STRING && suffix->len == 0)) return fail(e, "'suffix' is not supported");
    return 0;
}

/* Whether v is an array of integers >= 0 (token ids). */
static bool token_array(const JsonValue *v) {
    if (v->type != JSON_ARRAY) return false;
    for (size_t i = 0; i < v->len; i++) {
        double id = v->items[i].type == JSON_NUMBER ? v->items[i].number.value : -1;
        if (!(id >= 0 && id <= INT_MAX && id == floor(id))) return false;
    }
    return true;
}

/* The prompt, as the API takes it: a string, token ids, or either one
 * inside an array of one (several prompts would be several choices). */
static int read_prompt(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *prompt = json_get(root, "prompt");
    if (prompt && prompt->type == JSON_ARRAY && prompt->len > 0 &&
        (prompt->items[0].type == JSON_STRING || prompt->items[0].type == JSON_ARRAY)) {
        if (prompt->len > 1) return fail(e, "'prompt' may hold one prompt only (n = 1)");
        prompt = &prompt->items[0];
    }
    if (prompt && prompt->type == JSON_STRING) {
        r->prompt = prompt->string;
        r->prompt_len = prompt->len;
        return 0;
    }
    if (prompt && token_array(prompt)) {
        r->prompt_ids = prompt;
        return 0;
    }
    return fail(e, "'prompt' must be a string or an array of token ids");
}

int api_parse_request(ApiRequest *r, ApiKind kind, const char *body, size_t len, const GenerationConfig *defaults,
                      Error *e) {
    *r = (ApiRequest){.kind = kind, .generation = *defaults, .logprobs = -1};
    Error parse;
    if (json_parse(&r->doc, body, len, &parse) != 0) return fail(e, "the body is not JSON: %s", parse.msg);
    const JsonValue *root = &r->doc.root;
    bool bad = root->type != JSON_OBJECT ? fail(e, "the body must be a JSON object") :
               check_members(root, kind, e) || read_settings(r, root, e) || read_logprobs(r, root, e) ||
               read_logit_bias(r, root, e) ||
               (kind == API_CHAT ? read_messages(r, root, e) || read_tools(r, root, e) || read_tool_choice(r, root, e) ||
                                       read_reasoning_format(r, root, e)
                                 : read_prompt(r, root, e)) ||
               read_format(r, root, e);
    int rc = bad ? -1 : 0;
    if (rc != 0) api_request_free(r);
    return rc;
}

void api_request_free(ApiRequest *r) {
    json_free(&r->doc);
    for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
    for (size_t i = 0; i < r->n_arguments; i++) json_free(&r->arguments[i]);
    free(r->owned);
    free(r->arguments);
    free(r->bias);
    *r = (ApiRequest){0};
}

/* ---- responses ---- */

const char *api_finish_reason(StopReason stop, bool tool_calls) {
    return stop == STOP_LENGTH || stop == STOP_CONTEXT_FULL ? "length" : tool_calls ? "tool_calls" : "stop";
}

/* A token's text and its bytes: "token":"...","logprob":x,"bytes":[...] */
static void token_fields(Buf *b, const Tokenizer *t, TokenLogprob lp) {
    size_t len = 0;
    const char *text = tokenizer_token(t, lp.id, &len);
    if (!text) len = 0;
    buf_puts(b, "\"token\":");
    buf_json_string(b, text ? text : "", len);
    buf_puts(b, ",\"logprob\":");
    buf_json_float(b, lp.logprob);
    buf_puts(b, ",\"bytes\":[");
    for (size_t i = 0; i < len; i++) buf_printf(b, "%s%u", i ? "," : "", (unsigned char)text[i]);
    buf_puts(b, "]");
}

void api_logprobs_add(ApiLogprobs *l, ApiKind kind, const Tokenizer *t, const Step *step) {
    const char *comma = l->n++ ? "," : "";
    if (kind == API_CHAT) {
        buf_printf(&l->content, "%s{", comma);
        token_fields(&l->content, t, step->chosen);
        buf_puts(&l->content, ",\"top_logprobs\":[");
        for (int i = 0; i < step->n_top; i++) {
            buf_puts(&l->content, i ? ",{" : "{");
            token_fields(&l->content, t, step->top[i]);
            buf_puts(&l->content, "}");
        }
        buf_puts(&l->content, "]}");
        return;
    }
    size_t len = 0;
    const char *text = tokenizer_token(t, step->chosen.id, &len);
    buf_puts(&l->tokens, comma);
    buf_json_string(&l->tokens, text ? text : "", text ? len : 0);
    buf_puts(&l->values, comma);
    buf_json_float(&l->values, step->chosen.logprob);
    buf_printf(&l->top, "%s{", comma);
    for (int i = 0; i < step->n_top; i++) {
        text = tokenizer_token(t, step->top[i].id, &len);
        buf_puts(&l->top, i ? "," : "");
        buf_json_string(&l->top, text ? text : "", text ? len : 0);
        buf_puts(&l->top, ":");
        buf_json_float(&l->top, step->top[i].logprob);
    }
    buf_puts(&l->top, "}");
}

void api_logprobs_free(ApiLogprobs *l) {
    buf_free(&l->content);
    buf_free(&l->tokens);
    buf_free(&l->values);
    buf_free(&l->top);
    *l = (ApiLogprobs){0};
}

static const char *or_empty(const Buf *b) { return b->data ? b->data : ""; }

/* "logprobs":... of a choice. */
static void logprobs_member(Buf *b, ApiKind kind, const ApiLogprobs *l) {
    buf_puts(b, "\"logprobs\":");
    if (!l) buf_puts(b, "null");
    else if (kind == API_CHAT) buf_printf(b, "{\"content\":[%s]}", or_empty(&l->content));
    else
        buf_printf(b, "{\"tokens\":[%s],\"token_logprobs\":[%s],\"top_logprobs\":[%s]}", or_empty(&l->tokens),
                   or_empty(&l->values), or_empty(&l->top));
}

/* The members every object starts with: id, object, created, model. */
static void head(Buf *b, const ApiReply *r, bool chunk) {
    const char *object = r->kind == API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    buf_puts(b, "{\"id\":");
    buf_json_string(b, r->id, strlen(r->id));
    buf_printf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, r->created);
    buf_json_string(b, r->model, strlen(r->model));
}

static void usage_member(Buf *b, const ApiUsage *u) {
    buf_printf(b,
               "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
               "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
               u->prompt_tokens, u->completion_tokens, u->prompt_tokens + u->completion_tokens, u->cached_tokens);
}

void api_response(Buf *b, const ApiReply *r, const char *text, size_t len, const ApiLogprobs *logprobs,
                  StopReason stop, const ApiUsage *u) {
    head(b, r, false);
    buf_puts(b, ",\"choices\":[{\"index\":0,");
    if (r->kind == API_CHAT) buf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
    else buf_puts(b, "\"text\":");
    buf_json_string(b, text, len);
    buf_puts(b, r->kind == API_CHAT ? "}," : ",");
    logprobs_member(b, r->kind, logprobs);
    buf_printf(b, ",\"finish_reason\":\"%s\"}],", api_finish_reason(stop, false));
    usage_member(b, u);
    buf_puts(b, "}");
}

/* A tool call of a message: {"id", "type", "function": {"name", "arguments"}}. */
static void call_object(Buf *b, const ReplyCall *c) {
    buf_puts(b, "{\"id\":");
    buf_json_string(b, c->id, strlen(c->id));
    buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
    buf_json_string(b, c->name, strlen(c->name));
    buf_puts(b, ",\"arguments\":");
    buf_json_string(b, c->arguments.data ? c->arguments.data : "", c->arguments.len);
    buf_puts(b, "}}");
}

void api_chat_response(Buf *b, const ApiReply *r, const ReplyParser *reply, const ApiLogprobs *logprobs, StopReason stop,
                       const ApiUsage *u) {
    head(b, r, false);
    buf_puts(b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
    /* Only calls: the content is null, as OpenAI gives it. */
    if (reply->n_calls && reply->content.len == 0) buf_puts(b, "null");
    else buf_json_string(b, reply->content.data ? reply->content.data : "", reply->content.len);
    if (reply->has_reasoning) {
        buf_puts(b, ",\"reasoning_content\":");
        buf_json_string(b, reply->reasoning.data ? reply->reasoning.data : "", reply->reasoning.len);
    }
    if (reply->n_calls) {
        buf_puts(b, ",\"tool_calls\":[");
        for (int i = 0; i < reply->n_calls; i++) {
            if (i) buf_puts(b, ",");
            call_object(b, &reply->calls[i]);
        }
        buf_puts(b, "]");
    }
    buf_puts(b, "},");
    logprobs_member(b, r->kind, logprobs);
    buf_printf(b, ",\"finish_reason\":\"%s\"}],", api_finish_reason(stop, reply->n_calls > 0));
    usage_member(b, u);
    buf_puts(b, "}");
}

/* One event: a chunk with one choice: a chat's delta (the members of the
 * delta object, "" for none) or a completion's text, its logprobs, its
 * finish_reason. */
static void chunk(Buf *b, const ApiReply *r, const char *delta, const char *text, size_t len, const ApiLogprobs *logprobs,
                  const char *finish) {
    buf_puts(b, "data: ");
    head(b, r, true);
    buf_puts(b, ",\"choices\":[{\"index\":0,");
    if (r->kind == API_CHAT) {
        buf_printf(b, "\"delta\":{%s},", delta);
    } else {
        buf_puts(b, "\"text\":");
        buf_json_string(b, text, len);
        buf_puts(b, ",");
    }
    logprobs_member(b, r->kind, logprobs);
    buf_puts(b, ",\"finish_reason\":");
    if (finish) buf_printf(b, "\"%s\"", finish);
    else buf_puts(b, "null");
    buf_puts(b, "}]}\n\n");
}

void api_stream_start(Buf *b, const ApiReply *r) {
    if (r->kind == API_CHAT) chunk(b, r, "\"role\":\"assistant\",\"content\":\"\"", NULL, 0, NULL, NULL);
}

void api_stream_text(Buf *b, const ApiReply *r, const char *text, size_t len, const ApiLogprobs *logprobs) {
    Buf delta = {0};
    buf_puts(&delta, "\"content\":");
    buf_json_string(&delta, text, len);
    chunk(b, r, delta.data, text, len, logprobs, NULL);
    buf_free(&delta);
}

void api_stream_events(Buf *b, const ApiReply *r, const ReplyParser *reply, const ApiLogprobs *logprobs) {
    if (reply->n_events == 0 && logprobs) api_stream_text(b, r, "", 0, logprobs);
    for (int i = 0; i < reply->n_events; i++) {
        const ReplyEvent *e = &reply->events[i];
        Buf delta = {0};
        if (e->kind == REPLY_CONTENT || e->kind == REPLY_REASONING) {
            buf_puts(&delta, e->kind == REPLY_CONTENT ? "\"content\":" : "\"reasoning_content\":");
            buf_json_string(&delta, e->text, e->len);
        } else if (e->kind == REPLY_CALL) {
            /* The call's index, id, type and name first; arguments follow. */
            const ReplyCall *c = &reply->calls[e->call];
            buf_printf(&delta, "\"tool_calls\":[{\"index\":%d,\"id\":", e->call);
            buf_json_string(&delta, c->id, strlen(c->id));
            buf_puts(&delta, ",\"type\":\"function\",\"function\":{\"name\":");
            buf_json_string(&delta, c->name, strlen(c->name));
            buf_puts(&delta, ",\"arguments\":\"\"}}]");
        } else {
            buf_printf(&delta, "\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":", e->call);
            buf_json_string(&delta, e->text, e->len);
            buf_puts(&delta, "}}]");
        }
        chunk(b, r, delta.data, NULL, 0, i == 0 ? logprobs : NULL, NULL);
        buf_free(&delta);
    }
}

void api_stream_end(Buf *b, const ApiReply *r, const char *finish, const ApiUsage *usage) {
    chunk(b, r, "", "", 0, NULL, finish);
    if (usage) {
        buf_puts(b, "data: ");
        head(b, r, true);
        buf_puts(b, ",\"choices\":[],");
        usage_member(b, usage);
        buf_puts(b, "}\n\n");
    }
    buf_puts(b, "data: [DONE]\n\n");
}

/* ---- embeddings ---- */

/* An "input" item: a string, or token ids (a non-empty list). */
static int read_embed_input(ApiEmbedInput *in, const JsonValue *v, const char *where, Error *e) {
    if (v->type == JSON_STRING) {
        *in = (ApiEmbedInput){.text = v->string, .len = v->len};
        return 0;
    }
    if (!token_array(v)) return fail(e, "%s must be a string or a list of token ids (integers >= 0)", where);
    if (v->len == 0) return fail(e, "%s is an empty list of token ids", where);
    *in = (ApiEmbedInput){.ids = v};
    return 0;
}

/* "input": one string, token ids, or a list of strings or of id lists. */
static int read_embed_inputs(ApiEmbedRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *input = field(root, "input");
    if (!input) return fail(e, "'input' is missing: a string, a list of strings, token ids or a list of token-id lists");
    bool one = input->type != JSON_ARRAY || input->len == 0 || input->items[0].type == JSON_NUMBER;
    if (!one && input->len > API_MAX_EMBED_INPUTS) return fail(e, "'input' may hold at most %d items", API_MAX_EMBED_INPUTS);
    r->n_inputs = one ? 1 : (int)input->len;
    r->inputs = xcalloc((size_t)r->n_inputs, sizeof *r->inputs);
    if (one) return read_embed_input(&r->inputs[0], input, "'input'", e);
    for (int i = 0; i < r->n_inputs; i++) {
        char where[32];
        snprintf(where, sizeof where, "'input'[%d]", i);
        if (read_embed_input(&r->inputs[i], &input->items[i], where, e) != 0) return -1;
    }
    return 0;
}

int api_parse_embeddings(ApiEmbedRequest *r, const char *body, size_t len, Error *e) {
    *r = (ApiEmbedRequest){0};
    Error parse;
    if (json_parse(&r->doc, body, len, &parse) != 0) return fail(e, "the body is not JSON: %s", parse.msg);
    const JsonValue *root = &r->doc.root, *format = field(root, "encoding_format");
    const char *strings[] = {"model", "user"};
    long long dimensions = 0;
    static const char *const members[] = {"input", "model", "encoding_format", "dimensions", "user", NULL};
    int rc = root->type != JSON_OBJECT ? fail(e, "the body must be a JSON object") :
             only_members(root, members, "", e) ? -1 : read_embed_inputs(r, root, e);
    for (int i = 0; i < 2 && rc == 0; i++) {
        const JsonValue *v = field(root, strings[i]);
        if (v && v->type != JSON_STRING) rc = fail(e, "'%s' must be a string, not %s", strings[i], json_type_name(v->type));
    }
    if (rc == 0 && format && (format->type != JSON_STRING || (strcmp(format->string, "float") != 0 &&
                                                              strcmp(format->string, "base64") != 0)))
        rc = fail(e, "'encoding_format' must be \"float\" or \"base64\"");
    if (rc == 0) rc = integer_field(root, "dimensions", 1, INT_MAX, &dimensions, NULL, e);
    r->base64 = rc == 0 && format && strcmp(format->string, "base64") == 0;
    r->dimensions = (int)dimensions;
    if (rc != 0) api_embed_request_free(r);
    return rc;
}

void api_embed_request_free(ApiEmbedRequest *r) {
    json_free(&r->doc);
    free(r->inputs);
    *r = (ApiEmbedRequest){0};
}

/* v[n] as base64 (RFC 4648) of its float32s in little-endian byte order. */
static void base64_floats(Buf *b, const float *v, int n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char *bytes = xmalloc((size_t)n * 4 + 1);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) bytes[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    size_t len = (size_t)n * 4;
    char quad[4];
    for (size_t i = 0; i < len; i += 3) {
        uint32_t group = (uint32_t)bytes[i] << 16 | (i + 1 < len ? (uint32_t)bytes[i + 1] << 8 : 0) |
                         (i + 2 < len ? bytes[i + 2] : 0);
        for (int k = 0; k < 4; k++) quad[k] = digits[(group >> (18 - 6 * k)) & 63];
        if (i + 1 >= len) quad[2] = '=';
        if (i + 2 >= len) quad[3] = '=';
        buf_add(b, quad, 4);
    }
    free(bytes);
}

void api_embeddings_response(Buf *b, const char *model, const float *vectors, int n, int dim, bool base64,
                             int prompt_tokens) {
    buf_puts(b, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < n; i++) {
        const float *v = vectors + (size_t)i * dim;
        buf_printf(b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        if (base64) {
            buf_puts(b, "\"");
            base64_floats(b, v, dim);
            buf_puts(b, "\"");
        } else {
            buf_puts(b, "[");
            for (int d = 0; d < dim; d++) {
                if (d) buf_puts(b, ",");
                buf_json_float(b, v[d]);
            }
            buf_puts(b, "]");
        }
        buf_puts(b, "}");
    }
    buf_puts(b, "],\"model\":");
    buf_json_string(b, model, strlen(model));
    buf_printf(b, ",\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d}}", prompt_tokens, prompt_tokens);
}
