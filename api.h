/* api.h - the JSON of the OpenAI-style API that `run serve` speaks.
 *
 * Requests: the body of POST /v1/chat/completions or /v1/completions,
 * untrusted, checked field by field and turned into generation settings on
 * top of the server's defaults; a bad field is an error message (the
 * server's 400). Responses: the objects and server-sent-event chunks that
 * the OpenAI API reference describes, written into a growable buffer.
 * POST /v1/embeddings has its own request and response at the end. */
#ifndef API_H
#define API_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "generate.h"
#include "json.h"
#include "reply.h"
#include "util.h"

/* {"error":{"message":...,"type":...,"code":...}} for an HTTP status. */
void api_error(Buf *b, int status, const char *message);

/* ---- requests ---- */

typedef enum { API_CHAT, API_COMPLETION } ApiKind;

/* response_format's type. */
typedef enum { API_FORMAT_TEXT, API_FORMAT_JSON_OBJECT, API_FORMAT_JSON_SCHEMA } ApiFormat;

/* tool_choice: none (the default without tools), auto (with them), required, a named function. */
typedef enum { API_TOOLS_NONE, API_TOOLS_AUTO, API_TOOLS_REQUIRED, API_TOOLS_NAMED } ApiToolChoice;

typedef struct {
    ApiKind kind;
    JsonDoc doc;               /* the parsed body, which the fields below point into */
    JsonValue messages;        /* chat: the messages as the chat template sees them: role, content
                                  (a string), name, tool_calls (each call's arguments parsed from
                                  their JSON text), tool_call_id, reasoning_content */
    const JsonValue *template_kwargs; /* chat: "chat_template_kwargs" (an object) or NULL */
    const JsonValue *tools;    /* chat: "tools" as given (a non-empty list of functions), or NULL */
    ApiToolChoice tool_choice;
    const char *tool_name;     /* API_TOOLS_NAMED: the function's name */
    bool parallel_tool_calls;  /* several calls in one reply (the default) */
    ApiFormat format;
    const JsonValue *schema;   /* API_FORMAT_JSON_SCHEMA: the schema (an object or a boolean) */
    const char *grammar;       /* "grammar" (llama.cpp's field): GBNF text, or NULL */
    bool reasoning_inline;     /* reasoning_format "none": <think>...</think> stays in the content */
    const char *prompt;        /* completion: the prompt text, or NULL when given as ids */
    size_t prompt_len;
    const JsonValue *prompt_ids; /* completion: the prompt as token ids (integers >= 0), or NULL */
    GenerationConfig generation; /* the defaults with the request's settings on top (its
                                    sampling.bias points at `bias`) */
    bool seed_given;
    const char *stops[MAX_STOP_STRINGS];
    int n_stops;
    int logprobs;              /* -1: none; else this many top tokens with each */
    bool stream, include_usage;
    LogitBias *bias;           /* [n_bias] logit_bias, by token id (ids not checked against a vocabulary) */
    int n_bias;
    void **owned;              /* [n_owned] memory the messages are made of */
    size_t n_owned;
    JsonDoc *arguments;        /* [n_arguments] the tool calls' arguments, parsed */
    size_t n_arguments;
} ApiRequest;

/* Reads a request body of kind `kind`. On a bad body returns -1 with the
 * message for the client in e (e.g. "'temperature' must be a number"),
 * and nothing to free. */
int api_parse_request(ApiRequest *r, ApiKind kind, const char *body, size_t len, const GenerationConfig *defaults,
                      Error *e);
void api_request_free(ApiRequest *r);

/* ---- responses ---- */

/* What the server says of one reply. */
typedef struct {
    ApiKind kind;
    const char *id;            /* "chatcmpl-..." or "cmpl-..." */
    const char *model;
    long long created;         /* Unix time */
} ApiReply;

typedef struct {
    int prompt_tokens, cached_tokens, completion_tokens;
} ApiUsage;

/* The finish_reason of a stop: "length", or "tool_calls" when the reply
 * made calls, else "stop". */
const char *api_finish_reason(StopReason stop, bool tool_calls);

/* The log-probabilities of a reply's tokens, as the API shows them: a
 * chat's logprobs.content items, or a completion's parallel lists. */
typedef struct {
    int n;                     /* tokens added */
    Buf content;               /* chat: the items, comma-separated */
    Buf tokens, values, top;   /* completion: tokens, token_logprobs, top_logprobs items */
} ApiLogprobs;

/* Adds one step's token (the token texts are the tokenizer's bytes for the ids). */
void api_logprobs_add(ApiLogprobs *l, ApiKind kind, const Tokenizer *t, const Step *step);
void api_logprobs_free(ApiLogprobs *l);

/* The whole non-streamed response of a completion (or of a chat, whose
 * text is all content); logprobs NULL for none. */
void api_response(Buf *b, const ApiReply *r, const char *text, size_t len, const ApiLogprobs *logprobs,
                  StopReason stop, const ApiUsage *u);

/* A chat's whole response: the message the reply parser made of the text
 * (content, null when there are only calls; reasoning_content when the
 * reply thought; tool_calls), with finish_reason "tool_calls" when it
 * made calls and was not cut short. */
void api_chat_response(Buf *b, const ApiReply *r, const ReplyParser *reply, const ApiLogprobs *logprobs, StopReason stop,
                       const ApiUsage *u);

/* Server-sent events: "data: {chunk}\n\n". The first chunk of a chat says
 * the role; then a completion's text (api_stream_text), or a chat's deltas
 * (api_stream_events: one chunk per event of the parser's last feed, as
 * OpenAI sends them: content, reasoning_content, a tool call's index, id,
 * type and name, then fragments of its arguments; the logprobs, or NULL,
 * with the first); the last chunk has the finish_reason, then the usage
 * when asked, then [DONE]. */
void api_stream_start(Buf *b, const ApiReply *r);
void api_stream_text(Buf *b, const ApiReply *r, const char *text, size_t len, const ApiLogprobs *logprobs);
void api_stream_events(Buf *b, const ApiReply *r, const ReplyParser *reply, const ApiLogprobs *logprobs);
void api_stream_end(Buf *b, const ApiReply *r, const char *finish, const ApiUsage *usage);

/* ---- embeddings ---- */

enum { API_MAX_EMBED_INPUTS = 2048 };  /* inputs of one request at most, as OpenAI's API */

/* One input to embed: a text, or token ids. */
typedef struct {
    const char *text;          /* NULL when given as ids */
    size_t len;
    const JsonValue *ids;      /* a non-empty array of integers >= 0, or NULL */
} ApiEmbedInput;

typedef struct {
    JsonDoc doc;               /* the parsed body, which the inputs point into */
    ApiEmbedInput *inputs;     /* [n_inputs] */
    int n_inputs;
    bool base64;               /* "encoding_format": "base64": each vector's float32s, little-endian */
    int dimensions;            /* 0: the whole vector; else its first this many components */
} ApiEmbedRequest;

/* Reads the body of POST /v1/embeddings: "input" (a string, a list of
 * strings, token ids, or a list of token-id lists), "encoding_format"
 * ("float" or "base64"), "dimensions", and "model" and "user" (strings).
 * On a bad body returns -1 with the message for the client in e. */
int api_parse_embeddings(ApiEmbedRequest *r, const char *body, size_t len, Error *e);
void api_embed_request_free(ApiEmbedRequest *r);

/* {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
 * "model", "usage"} for vectors[n][dim]. */
void api_embeddings_response(Buf *b, const char *model, const float *vectors, int n, int dim, bool base64,
                             int prompt_tokens);

#endif
