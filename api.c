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
    if (options && bool_field(options, "include_usage", &r->include_usage, e)) return -1;
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
    r->joined[r->n_joined++] = joined.data;
    *out = joined.data;
    return 0;
}

/* "messages": a non-empty list of {"role": system|user|assistant, "content"}. */
static int read_messages(ApiRequest *r, const JsonValue *root, Error *e) {
    const JsonValue *messages = json_get(root, "messages");
    if (!messages || messages->type != JSON_ARRAY) return fail(e, "'messages' must be a list of messages");
    if (messages->len == 0) return fail(e, "'messages' must not be empty");
    size_t n = messages->len;
    r->items = xcalloc(n, sizeof *r->items);
    r->fields = xcalloc(2 * n, sizeof *r->fields);
    r->joined = xcalloc(n, sizeof *r->joined);
    for (size_t i = 0; i < n; i++) {
        const JsonValue *m = &messages->items[i];
        if (m->type != JSON_OBJECT) return fail(e, "messages[%zu] must be an object, not %s", i, json_type_name(m->type));
        const JsonValue *role = json_get(m, "role");
        if (!role || role->type != JSON_STRING) return fail(e, "messages[%zu].role must be a string", i);
        const char *name = role->string;
        if (strcmp(name, "developer") == 0) name = "system";
        if (strcmp(name, "system") != 0 && strcmp(name, "user") != 0 && strcmp(name, "assistant") != 0)
            return fail(e, "messages[%zu].role: unknown role '%.40s' (system, user or assistant)", i, role->string);
        const JsonValue *content = json_get(m, "content");
        if (strcmp(name, "assistant") != 0 && (!content || content->type == JSON_NULL))
            return fail(e, "messages[%zu].content is missing", i);
        const char *text = "";
        if (read_content(r, content, i, &text, e)) return -1;
        r->fields[2 * i] = (JsonMember){.key = "role", .key_len = 4, .value = {.type = JSON_STRING, .len = strlen(name), .string = name}};
        r->fields[2 * i + 1] = (JsonMember){.key = "content", .key_len = 7, .value = {.type = JSON_STRING, .len = strlen(text), .string = text}};
        r->items[i] = (JsonValue){.type = JSON_OBJECT, .len = 2, .members = r->fields + 2 * i};
    }
    r->messages = (JsonValue){.type = JSON_ARRAY, .len = n, .items = r->items};
    const JsonValue *kwargs = field(root, "chat_template_kwargs");
    if (kwargs && kwargs->type != JSON_OBJECT) return fail(e, "'chat_template_kwargs' must be an object");
    r->template_kwargs = kwargs;
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
    int rc = root->type != JSON_OBJECT ? fail(e, "the body must be a JSON object") :
             read_settings(r, root, e) || read_logprobs(r, root, e) ? -1 :
             kind == API_CHAT ? read_messages(r, root, e) : read_prompt(r, root, e);
    if (rc != 0) api_request_free(r);
    return rc;
}

void api_request_free(ApiRequest *r) {
    json_free(&r->doc);
    for (int i = 0; i < r->n_joined; i++) free(r->joined[i]);
    free(r->joined);
    free(r->items);
    free(r->fields);
    *r = (ApiRequest){0};
}

/* ---- responses ---- */

const char *api_finish_reason(StopReason stop) {
    return stop == STOP_LENGTH || stop == STOP_CONTEXT_FULL ? "length" : "stop";
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
    buf_printf(b, ",\"finish_reason\":\"%s\"}],", api_finish_reason(stop));
    usage_member(b, u);
    buf_puts(b, "}");
}

/* One event: a chunk with one choice whose members are `choice`. */
static void chunk_event(Buf *b, const ApiReply *r, const char *choice_start, const char *text, size_t len,
                        const ApiLogprobs *logprobs, const char *finish) {
    buf_puts(b, "data: ");
    head(b, r, true);
    buf_printf(b, ",\"choices\":[{\"index\":0,%s", choice_start);
    if (text) {
        buf_puts(b, r->kind == API_CHAT ? "\"delta\":{\"content\":" : "\"text\":");
        buf_json_string(b, text, len);
        buf_puts(b, r->kind == API_CHAT ? "}," : ",");
    } else if (r->kind == API_CHAT && !*choice_start) {
        buf_puts(b, "\"delta\":{},");
    }
    logprobs_member(b, r->kind, logprobs);
    buf_puts(b, ",\"finish_reason\":");
    if (finish) buf_printf(b, "\"%s\"", finish);
    else buf_puts(b, "null");
    buf_puts(b, "}]}\n\n");
}

void api_stream_start(Buf *b, const ApiReply *r) {
    if (r->kind == API_CHAT) chunk_event(b, r, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},", NULL, 0, NULL, NULL);
}

void api_stream_text(Buf *b, const ApiReply *r, const char *text, size_t len, const ApiLogprobs *logprobs) {
    chunk_event(b, r, "", text, len, logprobs, NULL);
}

void api_stream_end(Buf *b, const ApiReply *r, StopReason stop, const ApiUsage *usage) {
    chunk_event(b, r, "", r->kind == API_CHAT ? NULL : "", 0, NULL, api_finish_reason(stop));
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
    int rc = root->type != JSON_OBJECT ? fail(e, "the body must be a JSON object") : read_embed_inputs(r, root, e);
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
