/* server.c - sockets, connections, routes and the OpenAI bytes of each
 * reply (and of each embeddings request's vectors); the model runs in the
 * engine (engine.c), under the grammar tools.c makes of a request, and a
 * chat's text is read by reply.c. GET / sends the chat page (chat_page.h). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "buf.h"
#include "chat_page.h"
#include "embed.h"
#include "engine.h"
#include "http.h"
#include "metrics.h"
#include "reply.h"
#include "signals.h"
#include "tools.h"

/* Refused connections being closed at once, at most; each is given a
 * second to take its 503 (see linger_close). */
enum { MAX_CLOSING = 64 };

/* ---- the shared state ---- */

typedef struct Server Server;

/* One completion request, from the connection that made it to the engine
 * and back. The engine's events (on the engine thread) write its reply's
 * bytes into `out` under the server's lock; the connection sends them. */
typedef struct {
    EngineRequest engine;
    Server *s;
    ApiRequest request;
    TokenIds prompt;
    ThinkStart think;          /* chat: where the reply starts with respect to thinking */
    Grammar *grammar;          /* the reply's grammar (response_format, tools), or NULL */
    ReplyGrammar plan;         /* its text and triggers */
    ReplyParser parser;        /* chat: the reply's text as reasoning, content and tool calls */
    ApiReply reply;
    char id[48];
    StopReason stop;
    Buf text;                  /* not streamed: a completion's text so far */
    ApiLogprobs logprobs;      /* not streamed: its tokens' log-probabilities */
    Buf out;                   /* bytes for the connection to send (under the lock) */
    bool done;                 /* the engine is finished with it: out is all there is (under the lock) */
    bool cancel_sent;          /* the connection asked the engine to drop it */
    double submitted, last_token; /* when it was handed to the engine, and when its last token came */
} Job;

struct Server {
    Model *model;
    Tokenizer *tokenizer;
    const ChatTemplate *template;
    const ServerOptions *opt;
    Engine *engine;
    pthread_mutex_t lock;      /* the jobs' `out` and `done`, and everything below */
    pthread_cond_t progress;   /* connections wait for their job's output on it */
    pthread_cond_t idle;       /* the last connection's end is signalled on it */
    int connections;
    atomic_bool stopping;      /* idle connections close */
    atomic_bool draining;      /* new requests are refused, /health says so */
    atomic_int embedding;      /* embeddings requests under way (a drain lets them finish) */
    Metrics metrics;
    int closing[MAX_CLOSING];  /* refused connections, shut for writing, read until they close */
    double closing_until[MAX_CLOSING];
    int n_closing;
    pthread_mutex_t text_lock; /* the tokenizer's encoder and the template are not thread-safe */
    TemplateCaps caps;         /* what the chat template does with tools and thinking */
};

/* ---- the engine's events: a reply's bytes ---- */

/* Appends bytes for the job's connection and wakes it; `done` when they
 * are the last. */
static void post(Job *job, const Buf *b, bool done) {
    Server *s = job->s;
    pthread_mutex_lock(&s->lock);
    if (b->len) buf_add(&job->out, b->data, b->len);
    if (done) job->done = true;
    pthread_cond_broadcast(&s->progress);
    pthread_mutex_unlock(&s->lock);
}

static ApiUsage usage_of(const Job *job) {
    return (ApiUsage){.prompt_tokens = (int)job->prompt.n, .cached_tokens = job->engine.cached,
                      .completion_tokens = job->engine.generated};
}

/* A stream's first chunk (the role of a chat's reply). */
static void on_started(Job *job) {
    if (!job->request.stream) return;
    Buf b = {0};
    api_stream_start(&b, &job->reply);
    post(job, &b, false);
    buf_free(&b);
}

/* One step's text and log-probabilities: a stream's chunks (a chat's text
 * read by its parser first), or kept for the whole response. */
static void on_token(Job *job, const Step *step) {
    double now = now_seconds();
    if (job->engine.generated == 1) metrics_first_token(&job->s->metrics, now - job->submitted);
    else metrics_token_gap(&job->s->metrics, now - job->last_token);
    job->last_token = now;
    bool logprobs = job->request.logprobs >= 0 && step->stop != STOP_EOS, chat = job->request.kind == API_CHAT;
    if (chat) reply_feed(&job->parser, step->text, step->len);
    if (job->request.stream) {
        ApiLogprobs one = {0};
        if (logprobs) api_logprobs_add(&one, job->request.kind, job->s->tokenizer, step);
        Buf b = {0};
        if (chat) api_stream_events(&b, &job->reply, &job->parser, logprobs ? &one : NULL);
        else if (step->len || logprobs) api_stream_text(&b, &job->reply, step->text, step->len, logprobs ? &one : NULL);
        post(job, &b, false);
        buf_free(&b);
        api_logprobs_free(&one);
    } else {
        if (!chat) buf_add(&job->text, step->text, step->len);
        if (logprobs) api_logprobs_add(&job->logprobs, job->request.kind, job->s->tokenizer, step);
    }
}

/* The end: the text held back, then the last chunks (the whole response
 * when not streamed). A request cancelled or refused says nothing more. */
static void on_ended(Job *job, const EngineEvent *event) {
    Buf b = {0};
    /* A grammar whose parse outgrew its bounds cut the reply short: as
     * the length limit does, so that a reply that says "stop" is whole. */
    StopReason stop = event->stop == STOP_GRAMMAR && job->grammar && grammar_error(job->grammar) ? STOP_LENGTH : event->stop;
    job->stop = stop;
    bool chat = job->request.kind == API_CHAT, stream = job->request.stream;
    if (!job->engine.cancelled && !job->engine.refused) {
        ApiUsage usage = usage_of(job);
        if (chat) {
            reply_feed(&job->parser, event->text, event->len);
            if (stream) api_stream_events(&b, &job->reply, &job->parser, NULL);
            reply_end(&job->parser);
            if (stream) api_stream_events(&b, &job->reply, &job->parser, NULL);
        }
        if (stream) {
            if (!chat && event->len) api_stream_text(&b, &job->reply, event->text, event->len, NULL);
            api_stream_end(&b, &job->reply, api_finish_reason(stop, chat && job->parser.n_calls > 0),
                           job->request.include_usage ? &usage : NULL);
        } else if (chat) {
            api_chat_response(&b, &job->reply, &job->parser, job->request.logprobs >= 0 ? &job->logprobs : NULL,
                              stop, &usage);
        } else {
            buf_add(&job->text, event->text, event->len);
            api_response(&b, &job->reply, job->text.data ? job->text.data : "", job->text.len,
                         job->request.logprobs >= 0 ? &job->logprobs : NULL, stop, &usage);
        }
    }
    post(job, &b, true);
    buf_free(&b);
}

static void on_event(void *ctx, EngineRequest *r, const EngineEvent *event) {
    (void)r;
    Job *job = ctx;
    switch (event->kind) {
    case ENGINE_STARTED: on_started(job); break;
    case ENGINE_TOKEN: on_token(job, event->step); break;
    case ENGINE_ENDED: on_ended(job, event); break;
    }
}

/* ---- connections: reading ---- */

typedef struct {
    Server *s;
    int fd;
    char *in;                  /* bytes received and not yet read: [HTTP_MAX_HEAD] */
    size_t n_in;
    double send_timeout;       /* seconds a send may wait for room */
    char peer[64];
    const char *origin;        /* the current request's Origin header, or NULL */
} Conn;

enum { RECEIVED = 1, CLOSED = 0, TIMED_OUT = -1, STOPPED = -2 };

/* Waits for more bytes (into c->in) until `deadline`. An idle connection
 * (between requests) also ends when the server stops. */
static int receive(Conn *c, double deadline, bool idle) {
    for (;;) {
        if (idle && atomic_load(&c->s->stopping)) return STOPPED;
        double left = deadline - now_seconds();
        if (left <= 0) return TIMED_OUT;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int rc = poll(&p, 1, left > 0.1 ? 100 : (int)(left * 1000) + 1);
        if (rc < 0 && errno != EINTR) return CLOSED;
        if (rc <= 0) continue;
        if (c->n_in == HTTP_MAX_HEAD) return RECEIVED;  /* full: the parser says 431 */
        ssize_t got = recv(c->fd, c->in + c->n_in, HTTP_MAX_HEAD - c->n_in, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return CLOSED;
        c->n_in += (size_t)got;
        return RECEIVED;
    }
}

/* Drops the first n received bytes. */
static void consume(Conn *c, size_t n) {
    memmove(c->in, c->in + n, c->n_in - n);
    c->n_in -= n;
}

/* ---- connections: writing ---- */

/* Sends all of data (waiting for room at most timeout seconds at a time);
 * -1 when the client is gone. */
static int send_all(Conn *c, const char *data, size_t len) {
    while (len > 0) {
        ssize_t sent = send(c->fd, data, len, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            if (poll(&p, 1, (int)(c->send_timeout * 1000)) <= 0) return -1;
            continue;
        }
        if (sent <= 0) return -1;
        data += sent;
        len -= (size_t)sent;
    }
    return 0;
}

/* The CORS headers of a response to a request from an allowed origin. */
static void cors_headers(const Conn *c, Buf *b) {
    const ServerOptions *o = c->s->opt;
    if (!c->origin || !c->origin[0]) return;
    for (int i = 0; i < o->n_cors; i++)
        if (strcmp(o->cors[i], "*") == 0 || strcmp(o->cors[i], c->origin) == 0) {
            buf_printf(b, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n", strcmp(o->cors[i], "*") == 0 ? "*" : c->origin);
            return;
        }
}

/* A whole response with a body of `type`; `extra` holds more header lines. */
static int respond_typed(Conn *c, int status, const char *type, const char *extra, const Buf *body, bool keep_alive) {
    Buf b = {0};
    buf_printf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n%s", status,
               http_reason(status), type, body->len, keep_alive ? "keep-alive" : "close", extra ? extra : "");
    cors_headers(c, &b);
    buf_add(&b, "\r\n", 2);
    buf_add(&b, body->data ? body->data : "", body->len);
    int rc = send_all(c, b.data, b.len);
    buf_free(&b);
    return rc;
}

static int respond(Conn *c, int status, const char *extra, const Buf *body, bool keep_alive) {
    return respond_typed(c, status, "application/json", extra, body, keep_alive);
}

static int respond_error(Conn *c, int status, const char *message, const char *extra, bool keep_alive) {
    Buf body = {0};
    api_error(&body, status, message);
    int rc = respond(c, status, extra, &body, keep_alive);
    buf_free(&body);
    return rc;
}

/* Whether the client closed its end (a read would see the end of the stream). */
static bool client_left(const Conn *c) {
    char byte;
    ssize_t rc = recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- the request handlers ---- */

/* What a handler did, for the log line. */
typedef struct {
    int status;
    int prompt_tokens, cached_tokens, generated_tokens;
    bool close;                /* the connection must close after it */
} Outcome;

/* The access log: one line per request on standard error, as text or as
 * a JSON object. */
static void log_request(const Conn *c, const HttpRequest *r, const Outcome *o, double start) {
    double ms = (now_seconds() - start) * 1e3;
    if (!c->s->opt->log_json) {
        fprintf(stderr, "%s %s %s %d prompt=%d cached=%d generated=%d %.1fms\n", c->peer, r->method, r->path, o->status,
                o->prompt_tokens, o->cached_tokens, o->generated_tokens, ms);
        return;
    }
    Buf b = {0};
    buf_puts(&b, "{\"client\":");
    buf_json_string(&b, c->peer, strlen(c->peer));
    buf_puts(&b, ",\"method\":");
    buf_json_string(&b, r->method, strlen(r->method));
    buf_puts(&b, ",\"path\":");
    buf_json_string(&b, r->path, strlen(r->path));
    buf_printf(&b, ",\"status\":%d,\"prompt_tokens\":%d,\"cached_tokens\":%d,\"generated_tokens\":%d,\"ms\":%.1f}\n",
               o->status, o->prompt_tokens, o->cached_tokens, o->generated_tokens, ms);
    fputs(b.data, stderr);
    buf_free(&b);
}

/* The request's tokens: a chat's rendered messages (with its tools), or a
 * completion's prompt; *think says how the chat's reply starts. */
static int tokenize_request(Server *s, const ApiRequest *r, TokenIds *ids, ThinkStart *think, Error *e) {
    int rc = 0;
    pthread_mutex_lock(&s->text_lock);
    if (r->kind == API_COMPLETION && r->prompt_ids) {
        int vocab = s->model->config.vocab_size;
        for (size_t i = 0; i < r->prompt_ids->len && rc == 0; i++) {
            double id = r->prompt_ids->items[i].number.value;
            if (id >= vocab) rc = fail(e, "'prompt' token %.0f is not below the vocabulary size %d", id, vocab);
            else token_ids_push(ids, (int)id);
        }
    } else if (r->kind == API_COMPLETION) {
        tokenizer_encode(s->tokenizer, r->prompt, r->prompt_len, ENCODE_PROMPT, ids);
    } else if (!s->template) {
        rc = fail(e, "the model has no chat template: use /v1/completions");
    } else {
        size_t len;
        char *text = chat_template_render(s->template, &r->messages, r->tools, true, r->template_kwargs, &len, e);
        if (text) tokenizer_encode(s->tokenizer, text, len, ENCODE_ADDED_TOKENS, ids);
        else rc = -1;
        if (text) *think = think_start(&s->caps, text, len);
        free(text);
    }
    pthread_mutex_unlock(&s->text_lock);
    int capacity = s->model->max_context;
    if (rc == 0 && ids->n == 0) rc = fail(e, "the prompt is empty");
    if (rc == 0 && (int)ids->n > capacity)
        rc = fail(e, "the prompt is %zu tokens, longer than the context of %d: shorten it, or start the server with a "
                     "larger -c", ids->n, capacity);
    return rc;
}

/* Hands a job to the engine; false when every slot and the queue are
 * taken or the server is stopping. */
static bool submit(Server *s, Job *job) {
    const ApiRequest *r = &job->request;
    job->s = s;
    job->engine = (EngineRequest){.prompt = job->prompt.ids, .n_prompt = (int)job->prompt.n, .generation = r->generation,
                                  .seed_given = r->seed_given || s->opt->seed_given, .stops = r->stops,
                                  .n_stops = r->n_stops, .logprobs = r->logprobs, .grammar = job->grammar,
                                  .triggers = job->plan.triggers, .n_triggers = job->plan.n_triggers,
                                  .on_event = on_event, .ctx = job};
    EngineRequest *one = &job->engine;
    job->submitted = now_seconds();
    return engine_submit(s->engine, &one, 1);
}

/* Sends what the engine has written for the job until it is done; a client
 * that goes away cancels it. Streams are sent as they come (in chunks of
 * the chunked encoding for HTTP/1.1); a whole response at the end. */
static void relay(Conn *c, Job *job, bool chunked, Outcome *o) {
    Server *s = c->s;
    bool gone = false;
    Buf pending = {0};
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (job->out.len && job->request.stream && !gone) {
            Buf out = job->out;
            job->out = pending;
            pthread_mutex_unlock(&s->lock);
            Buf frame = {0};
            if (chunked) buf_printf(&frame, "%zx\r\n", out.len);
            buf_add(&frame, out.data, out.len);
            if (chunked) buf_add(&frame, "\r\n", 2);
            gone = send_all(c, frame.data, frame.len) != 0;
            buf_free(&frame);
            out.len = 0;
            pending = out;
            pthread_mutex_lock(&s->lock);
            continue;
        }
        if (job->done) break;
        if (!gone && client_left(c)) gone = true;
        if (gone && !job->cancel_sent) {
            job->cancel_sent = true;
            engine_cancel(s->engine, &job->engine);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->progress, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
    buf_free(&pending);
    o->cached_tokens = job->engine.cached;
    o->generated_tokens = job->engine.generated;
    if (!job->engine.refused) metrics_tokens(&s->metrics, (int)job->prompt.n, job->engine.cached, job->engine.generated);
    if (gone || job->engine.cancelled) {
        o->status = 499;  /* the client closed the connection (nginx's code, for the log) */
        o->close = true;
    } else if (job->engine.refused) {
        o->status = 503;
        respond_error(c, 503, "the server is shutting down", "Retry-After: 1\r\n", false);
        o->close = true;
    } else if (job->request.stream) {
        if (chunked && send_all(c, "0\r\n\r\n", 5) != 0) o->close = true;
        if (!chunked) o->close = true;
    } else if (respond(c, 200, NULL, &job->out, !o->close) != 0) {
        o->close = true;
    }
}

/* What the reply must follow and how its text is read: the logit bias's
 * ids checked against the vocabulary, the grammar of response_format and
 * tools (tools.h) compiled, a chat's reply parser set up. */
static int prepare_reply(Server *s, Job *job, Error *e) {
    const ApiRequest *r = &job->request;
    int vocab = s->model->config.vocab_size;
    for (int i = 0; i < r->n_bias; i++)
        if (r->bias[i].id >= vocab) return fail(e, "'logit_bias' token %d is not below the vocabulary size %d", r->bias[i].id, vocab);
    if (reply_grammar(&job->plan, r, &s->caps, job->think, e) != 0) return -1;
    Error why;
    if (job->plan.gbnf && !(job->grammar = grammar_new(job->plan.gbnf, strlen(job->plan.gbnf), &why)))
        return fail(e, "%s%s", r->grammar ? "'grammar': " : "the reply's grammar: ", why.msg);
    static atomic_ullong calls;
    uint64_t seed = mix64((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)job ^ atomic_fetch_add(&calls, 1) << 32);
    bool tools = r->tools && r->tool_choice != API_TOOLS_NONE;
    if (r->kind == API_CHAT) reply_init(&job->parser, tools ? s->caps.syntax : TOOL_SYNTAX_NONE, !r->reasoning_inline, job->think, seed);
    return 0;
}

static void handle_completion(Conn *c, const HttpRequest *http, const char *body, size_t len, ApiKind kind, Outcome *o) {
    Server *s = c->s;
    Job *job = xcalloc(1, sizeof *job);
    Error e;
    if (api_parse_request(&job->request, kind, body, len, &s->opt->defaults, &e) != 0) {
        o->status = 400;
        respond_error(c, 400, e.msg, NULL, !o->close);
        free(job);
        return;
    }
    if (tokenize_request(s, &job->request, &job->prompt, &job->think, &e) != 0 || prepare_reply(s, job, &e) != 0) {
        o->status = 400;
        respond_error(c, 400, e.msg, NULL, !o->close);
    } else {
        o->prompt_tokens = (int)job->prompt.n;
        static atomic_ullong counter;
        snprintf(job->id, sizeof job->id, "%s-%llx%06llx", kind == API_CHAT ? "chatcmpl" : "cmpl",
                 (unsigned long long)time(NULL), atomic_fetch_add(&counter, 1) & 0xffffff);
        job->reply = (ApiReply){.kind = kind, .id = job->id, .model = s->opt->model_name, .created = (long long)time(NULL)};
        if (!submit(s, job)) {
            o->status = 503;
            respond_error(c, 503, atomic_load(&s->draining) ? "the server is shutting down"
                                  : "the server is busy: every slot and the queue are taken; retry later",
                          "Retry-After: 1\r\n", !o->close);
        } else {
            bool chunked = http->minor_version == 1;
            o->status = 200;
            if (job->request.stream) {
                Buf head = {0};
                buf_printf(&head, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n%s",
                           chunked ? "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n" : "Connection: close\r\n");
                cors_headers(c, &head);
                buf_add(&head, "\r\n", 2);
                if (send_all(c, head.data, head.len) != 0) o->close = true;
                buf_free(&head);
            }
            relay(c, job, chunked, o);
        }
    }
    token_ids_free(&job->prompt);
    grammar_free(job->grammar);
    free(job->plan.gbnf);
    reply_free(&job->parser);
    api_request_free(&job->request);
    buf_free(&job->text);
    buf_free(&job->out);
    api_logprobs_free(&job->logprobs);
    free(job);
}

/* POST /tokenize {"content": text, "add_special": false, "with_pieces": false}. */
static void handle_tokenize(Conn *c, const char *body, size_t len, Outcome *o) {
    Server *s = c->s;
    JsonDoc doc;
    Error e;
    Buf out = {0};
    if (json_parse(&doc, body, len, &e) != 0) {
        o->status = 400;
        respond_error(c, 400, "the body is not JSON", NULL, !o->close);
        return;
    }
    const JsonValue *content = json_get(&doc.root, "content"), *special = json_get(&doc.root, "add_special"),
                    *pieces = json_get(&doc.root, "with_pieces");
    if (!content || content->type != JSON_STRING || (special && special->type != JSON_BOOL) ||
        (pieces && pieces->type != JSON_BOOL)) {
        o->status = 400;
        respond_error(c, 400, "expected {\"content\": string, \"add_special\": boolean, \"with_pieces\": boolean}", NULL,
                      !o->close);
        json_free(&doc);
        return;
    }
    TokenIds ids = {0};
    pthread_mutex_lock(&s->text_lock);
    tokenizer_encode(s->tokenizer, content->string, content->len,
                     special && special->boolean ? ENCODE_PROMPT : ENCODE_ADDED_TOKENS, &ids);
    pthread_mutex_unlock(&s->text_lock);
    buf_puts(&out, "{\"tokens\":[");
    for (size_t i = 0; i < ids.n; i++) {
        if (i) buf_puts(&out, ",");
        if (pieces && pieces->boolean) {
            size_t n;
            const char *piece = tokenizer_token(s->tokenizer, ids.ids[i], &n);
            buf_printf(&out, "{\"id\":%d,\"piece\":", ids.ids[i]);
            buf_json_string(&out, piece ? piece : "", piece ? n : 0);
            buf_puts(&out, "}");
        } else {
            buf_printf(&out, "%d", ids.ids[i]);
        }
    }
    buf_puts(&out, "]}");
    o->status = 200;
    respond(c, 200, NULL, &out, !o->close);
    token_ids_free(&ids);
    buf_free(&out);
    json_free(&doc);
}

/* POST /detokenize {"tokens": [ids]}. */
static void handle_detokenize(Conn *c, const char *body, size_t len, Outcome *o) {
    Server *s = c->s;
    JsonDoc doc;
    Error e;
    if (json_parse(&doc, body, len, &e) != 0) {
        o->status = 400;
        respond_error(c, 400, "the body is not JSON", NULL, !o->close);
        return;
    }
    const JsonValue *tokens = json_get(&doc.root, "tokens");
    int vocab = tokenizer_vocab_size(s->tokenizer);
    bool ok = tokens && tokens->type == JSON_ARRAY;
    int *ids = xmalloc((ok ? tokens->len : 0) * sizeof *ids + 1);
    for (size_t i = 0; ok && i < tokens->len; i++) {
        const JsonValue *v = &tokens->items[i];
        ok = v->type == JSON_NUMBER && v->number.is_integer && v->number.integer >= 0 && v->number.integer < vocab;
        if (ok) ids[i] = (int)v->number.integer;
    }
    if (!ok) {
        o->status = 400;
        char message[128];
        snprintf(message, sizeof message, "expected {\"tokens\": [ids]} with ids in [0, %d)", vocab);
        respond_error(c, 400, message, NULL, !o->close);
    } else {
        size_t n;
        char *text = tokenizer_decode(s->tokenizer, ids, tokens->len, &n);
        Buf out = {0};
        buf_puts(&out, "{\"content\":");
        buf_json_string(&out, text, n);
        buf_puts(&out, "}");
        o->status = 200;
        respond(c, 200, NULL, &out, !o->close);
        buf_free(&out);
        free(text);
    }
    free(ids);
    json_free(&doc);
}

/* A model object of the list; GET /v1/models/{id} answers one alone. */
static void model_object(Buf *out, const Server *s) {
    buf_puts(out, "{\"id\":");
    buf_json_string(out, s->opt->model_name, strlen(s->opt->model_name));
    buf_printf(out, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"run\"}", (long long)time(NULL));
}

static void handle_models(Conn *c, const char *id, Outcome *o) {
    Buf out = {0};
    if (!id) {
        buf_puts(&out, "{\"object\":\"list\",\"data\":[");
        model_object(&out, c->s);
        buf_puts(&out, "]}");
    } else if (strcmp(id, c->s->opt->model_name) == 0) {
        model_object(&out, c->s);
    } else {
        o->status = 404;
        respond_error(c, 404, "no such model: this server serves the one GET /v1/models lists", NULL, !o->close);
        return;
    }
    o->status = 200;
    respond(c, 200, NULL, &out, !o->close);
    buf_free(&out);
}

/* GET /props: what a client may want to know before it asks. */
static void handle_props(Conn *c, Outcome *o) {
    const Server *s = c->s;
    Buf out = {0};
    buf_puts(&out, "{\"model\":");
    buf_json_string(&out, s->opt->model_name, strlen(s->opt->model_name));
    buf_printf(&out, ",\"model_type\":\"%s\",\"slots\":%d,\"context_per_slot\":%d,\"vocab_size\":%d,\"embedding_size\":%d",
               architecture_name(s->model->config.arch), s->opt->parallel, s->model->max_context, s->model->config.vocab_size,
               s->model->config.dim);
    if (s->template)
        buf_printf(&out, ",\"chat_template\":{\"tools\":%s,\"thinking\":%s,\"tool_call_syntax\":\"%s\"}}",
                   s->caps.tools ? "true" : "false", s->caps.thinking ? "true" : "false", tool_syntax_name(s->caps.syntax));
    else buf_puts(&out, ",\"chat_template\":null}");
    o->status = 200;
    respond(c, 200, NULL, &out, !o->close);
    buf_free(&out);
}

/* GET /metrics in Prometheus' text format. */
static void handle_metrics(Conn *c, Outcome *o) {
    Server *s = c->s;
    EngineLoad load = engine_load(s->engine);
    Buf out = {0};
    metrics_write(&out, &s->metrics, &(MetricsLoad){.slots = s->opt->parallel, .busy_slots = load.busy_slots,
                                                   .queued = load.queued});
    o->status = 200;
    respond_typed(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, &out, !o->close);
    buf_free(&out);
}

/* GET /health: 200 while taking requests; 503 "draining" after SIGTERM,
 * so that a load balancer sends no more. */
static void handle_health(Conn *c, Outcome *o) {
    bool draining = atomic_load(&c->s->draining);
    Buf out = {0};
    buf_printf(&out, "{\"status\":\"%s\"}", draining ? "draining" : "ok");
    o->status = draining ? 503 : 200;
    respond(c, o->status, NULL, &out, !o->close);
    buf_free(&out);
}

/* ---- embeddings and the chat page ---- */

/* The token ids of each input to embed; an error names the first that has
 * no token, an id past the vocabulary, or more tokens than a slot's context. */
static int tokenize_inputs(Server *s, const ApiEmbedRequest *r, TokenIds *ids, Error *e) {
    int vocab = s->model->config.vocab_size, capacity = s->model->max_context, rc = 0;
    pthread_mutex_lock(&s->text_lock);
    for (int i = 0; i < r->n_inputs && rc == 0; i++) {
        const ApiEmbedInput *in = &r->inputs[i];
        if (in->text) tokenizer_encode(s->tokenizer, in->text, in->len, ENCODE_PROMPT, &ids[i]);
        for (size_t k = 0; in->ids && k < in->ids->len && rc == 0; k++) {
            double id = in->ids->items[k].number.value;
            if (id >= vocab) rc = fail(e, "'input'[%d]: token %.0f is not below the vocabulary size %d", i, id, vocab);
            else token_ids_push(&ids[i], (int)id);
        }
        if (rc == 0 && ids[i].n == 0) rc = fail(e, "'input'[%d] has no tokens: there is nothing to embed", i);
        if (rc == 0 && (int)ids[i].n > capacity)
            rc = fail(e, "'input'[%d] is %zu tokens, longer than the context of %d: shorten it, or start the server with a "
                         "larger -c", i, ids[i].n, capacity);
    }
    pthread_mutex_unlock(&s->text_lock);
    return rc;
}

/* embed_run's `gone`: whether the client of connection ctx closed its end. */
static bool connection_gone(void *ctx) { return client_left(ctx); }

/* The vectors of a request's inputs, and the response: the list, 503 when
 * the engine takes no more work, nothing when the client left. */
static void embed_and_respond(Conn *c, const ApiEmbedRequest *r, const TokenIds *inputs, Outcome *o) {
    Server *s = c->s;
    const ServerOptions *opt = s->opt;
    int dim = s->model->config.dim, keep = r->dimensions ? r->dimensions : dim;
    float *vectors = xmalloc((size_t)r->n_inputs * dim * sizeof(float));
    /* A drain waits for the request to end, from its first wave to its last. */
    atomic_fetch_add(&s->embedding, 1);
    EmbedOutcome done = embed_run(vectors, s->engine, inputs, r->n_inputs, opt->parallel, dim, opt->pooling,
                                  &opt->defaults, connection_gone, c);
    atomic_fetch_sub(&s->embedding, 1);
    if (done == EMBED_DONE) {
        /* "dimensions": each vector's first components, packed. */
        for (int i = 0; i < r->n_inputs && keep < dim; i++) {
            memmove(vectors + (size_t)i * keep, vectors + (size_t)i * dim, (size_t)keep * sizeof(float));
            shorten(vectors + (size_t)i * keep, keep, opt->pooling);
        }
        metrics_tokens(&s->metrics, o->prompt_tokens, 0, 0);
        Buf out = {0};
        api_embeddings_response(&out, opt->model_name, vectors, r->n_inputs, keep, r->base64, o->prompt_tokens);
        o->status = 200;
        respond(c, 200, NULL, &out, !o->close);
        buf_free(&out);
    } else if (done == EMBED_CANCELLED) {
        o->status = 499;  /* the client closed the connection */
        o->close = true;
    } else {
        o->status = 503;
        o->close = o->close || done == EMBED_STOPPED;
        respond_error(c, 503, done == EMBED_STOPPED || atomic_load(&s->draining) ? "the server is shutting down"
                              : "the server is busy: every slot and the queue are taken; retry later",
                      "Retry-After: 1\r\n", !o->close);
    }
    free(vectors);
}

/* POST /v1/embeddings: a vector per input, the inputs run through the
 * engine --parallel at a time (each wave batched in shared passes). */
static void handle_embeddings(Conn *c, const char *body, size_t len, Outcome *o) {
    Server *s = c->s;
    ApiEmbedRequest r;
    Error e;
    o->status = 400;
    if (!s->opt->pooling) {
        respond_error(c, 400, s->opt->no_pooling, NULL, !o->close);
        return;
    }
    if (api_parse_embeddings(&r, body, len, &e) != 0) {
        respond_error(c, 400, e.msg, NULL, !o->close);
        return;
    }
    TokenIds *inputs = xcalloc((size_t)r.n_inputs, sizeof *inputs);
    int rc = tokenize_inputs(s, &r, inputs, &e);
    if (rc == 0 && r.dimensions > s->model->config.dim)
        rc = fail(&e, "'dimensions' must be at most the model's %d", s->model->config.dim);
    for (int i = 0; i < r.n_inputs; i++) o->prompt_tokens += (int)inputs[i].n;
    if (rc != 0) respond_error(c, 400, e.msg, NULL, !o->close);
    else embed_and_respond(c, &r, inputs, o);
    for (int i = 0; i < r.n_inputs; i++) token_ids_free(&inputs[i]);
    free(inputs);
    api_embed_request_free(&r);
}

/* GET /: the chat page. Its Content-Security-Policy lets it run only its
 * own script and style (named by their hashes) and talk only to this
 * server, so that even text that slipped into its HTML could not act. */
static void handle_page(Conn *c, Outcome *o) {
    char headers[1024];
    snprintf(headers, sizeof headers, "Content-Security-Policy: %s\r\nX-Content-Type-Options: nosniff\r\n"
             "Referrer-Policy: no-referrer\r\nCache-Control: no-cache\r\n", chat_page_csp);
    Buf page = {.data = (char *)chat_page, .len = sizeof chat_page - 1};
    o->status = 200;
    respond_typed(c, 200, "text/html; charset=utf-8", headers, &page, !o->close);
}

/* Compares the Authorization header with "Bearer KEY" in time that does
 * not depend on where they differ. */
static bool authorized(const Server *s, const HttpRequest *r) {
    const char *key = s->opt->api_key;
    if (!key) return true;
    if (r->authorization_too_long || strncmp(r->authorization, "Bearer ", 7) != 0) return false;
    const char *given = r->authorization + 7;
    size_t n_given = strlen(given), n_key = strlen(key);
    unsigned diff = n_given != n_key;
    for (size_t i = 0; i < n_key; i++) diff |= (unsigned char)key[i] ^ (unsigned char)given[i < n_given ? i : 0];
    return diff == 0;
}

typedef enum {
    ROUTE_CHAT, ROUTE_COMPLETIONS, ROUTE_TOKENIZE, ROUTE_DETOKENIZE, ROUTE_MODELS, ROUTE_MODEL, ROUTE_HEALTH,
    ROUTE_METRICS, ROUTE_PROPS, ROUTE_EMBEDDINGS, ROUTE_PAGE, ROUTE_NONE
} Route;

static const struct {
    const char *path, *method;  /* a path ending in '/' (but "/") takes one more segment: /v1/models/{id} */
} routes[ROUTE_NONE] = {
    [ROUTE_CHAT] = {"/v1/chat/completions", "POST"}, [ROUTE_COMPLETIONS] = {"/v1/completions", "POST"},
    [ROUTE_TOKENIZE] = {"/tokenize", "POST"},         [ROUTE_DETOKENIZE] = {"/detokenize", "POST"},
    [ROUTE_MODELS] = {"/v1/models", "GET"},           [ROUTE_MODEL] = {"/v1/models/", "GET"},
    [ROUTE_HEALTH] = {"/health", "GET"},              [ROUTE_METRICS] = {"/metrics", "GET"},
    [ROUTE_PROPS] = {"/props", "GET"},               [ROUTE_EMBEDDINGS] = {"/v1/embeddings", "POST"},
    [ROUTE_PAGE] = {"/", "GET"},
};

/* The route of a path; *rest is the segment after a route ending in '/'. */
static Route find_route(const char *path, const char **rest) {
    for (int i = 0; i < ROUTE_NONE; i++) {
        size_t n = strlen(routes[i].path);
        if (n > 1 && routes[i].path[n - 1] == '/' ? strncmp(path, routes[i].path, n) == 0 && path[n] && !strchr(path + n, '/')
                                         : strcmp(path, routes[i].path) == 0) {
            *rest = path + n;
            return (Route)i;
        }
    }
    return ROUTE_NONE;
}

/* The endpoint a request is counted under in /metrics: its route, so that
 * arbitrary paths do not make arbitrarily many series. */
static const char *endpoint_name(const char *path) {
    const char *rest;
    Route route = find_route(path, &rest);
    return route == ROUTE_MODEL ? "/v1/models/{id}" : route == ROUTE_NONE ? "other" : routes[route].path;
}

/* Routes one request to its handler. */
static void dispatch(Conn *c, const HttpRequest *r, const char *body, size_t len, Outcome *o) {
    const char *rest;
    Route route = find_route(r->path, &rest);
    if (route == ROUTE_NONE) {
        o->status = 404;
        respond_error(c, 404, "no such endpoint", NULL, !o->close);
        return;
    }
    /* A browser's CORS preflight: the methods and headers it may send. */
    if (strcmp(r->method, "OPTIONS") == 0) {
        char allow[160];
        snprintf(allow, sizeof allow, "Allow: %s, OPTIONS\r\nAccess-Control-Allow-Methods: %s, OPTIONS\r\n"
                 "Access-Control-Allow-Headers: Authorization, Content-Type\r\nAccess-Control-Max-Age: 600\r\n",
                 routes[route].method, routes[route].method);
        o->status = 204;
        respond(c, 204, allow, &(Buf){0}, !o->close);
        return;
    }
    if (strcmp(r->method, routes[route].method) != 0) {
        char allow[64];
        snprintf(allow, sizeof allow, "Allow: %s, OPTIONS\r\n", routes[route].method);
        o->status = 405;
        respond_error(c, 405, "method not allowed", allow, !o->close);
        return;
    }
    if (route != ROUTE_HEALTH && route != ROUTE_METRICS && route != ROUTE_PAGE && !authorized(c->s, r)) {
        o->status = 401;
        respond_error(c, 401, "a valid API key is needed: 'Authorization: Bearer KEY'", "WWW-Authenticate: Bearer\r\n",
                      !o->close);
        return;
    }
    switch (route) {
    case ROUTE_CHAT: handle_completion(c, r, body, len, API_CHAT, o); break;
    case ROUTE_COMPLETIONS: handle_completion(c, r, body, len, API_COMPLETION, o); break;
    case ROUTE_TOKENIZE: handle_tokenize(c, body, len, o); break;
    case ROUTE_DETOKENIZE: handle_detokenize(c, body, len, o); break;
    case ROUTE_MODELS: handle_models(c, NULL, o); break;
    case ROUTE_MODEL: handle_models(c, rest, o); break;
    case ROUTE_HEALTH: handle_health(c, o); break;
    case ROUTE_METRICS: handle_metrics(c, o); break;
    case ROUTE_PROPS: handle_props(c, o); break;
    case ROUTE_EMBEDDINGS: handle_embeddings(c, body, len, o); break;
    case ROUTE_PAGE: handle_page(c, o); break;
    case ROUTE_NONE: break;
    }
}

/* ---- connections: one request after another ---- */

/* Reads a body of Content-Length bytes, or a chunked one, into *body.
 * Returns 0, or the status of the error (408 for a body that does not come
 * in time, 400 for a bad one, 413 for one too large). */
static int read_body(Conn *c, const HttpRequest *r, char **body, size_t *len) {
    const ServerOptions *opt = c->s->opt;
    double deadline = now_seconds() + opt->timeout;
    if (!r->chunked) {
        size_t want = r->content_length > 0 ? (size_t)r->content_length : 0;
        *body = xmalloc(want + 1);
        *len = 0;
        while (*len < want) {
            if (c->n_in == 0) {
                int got = receive(c, deadline, false);
                if (got == TIMED_OUT) return 408;
                if (got != RECEIVED) return 400;
            }
            size_t take = want - *len < c->n_in ? want - *len : c->n_in;
            memcpy(*body + *len, c->in, take);
            *len += take;
            consume(c, take);
        }
        (*body)[*len] = '\0';
        return 0;
    }
    *body = xmalloc(opt->max_body + 1);
    *len = 0;
    HttpChunked chunked = {0};
    for (;;) {
        size_t used;
        int rc = http_chunked_feed(&chunked, c->in, c->n_in, *body, len, opt->max_body, &used);
        consume(c, used);
        if (rc != HTTP_NEED_MORE) {
            (*body)[*len] = '\0';
            return rc;
        }
        int got = receive(c, deadline, false);
        if (got == TIMED_OUT) return 408;
        if (got != RECEIVED) return 400;
    }
}

/* Reads and answers one request; false when the connection is to close. */
static bool serve_one(Conn *c) {
    const ServerOptions *opt = c->s->opt;
    HttpRequest *r = xmalloc(sizeof *r);
    double start = now_seconds(), deadline = start + opt->timeout;
    int status;
    while ((status = http_parse_head(r, c->in, c->n_in)) == HTTP_NEED_MORE) {
        int got = receive(c, deadline, c->n_in == 0);
        if (got == RECEIVED) continue;
        /* A request that does not come in time is dropped (slowloris). */
        if (got == TIMED_OUT && c->n_in > 0) respond_error(c, 408, "the request did not arrive in time", NULL, false);
        free(r);
        return false;
    }
    start = now_seconds();
    Outcome o = {.status = status, .close = true};
    char *body = NULL;
    size_t len = 0;
    if (status != 0) {
        respond_error(c, status, status == 431 ? "the request line and headers exceed 16 KiB" : "malformed request", NULL,
                      false);
        strcpy(r->method, "-");
        strcpy(r->path, "-");
    } else {
        consume(c, r->head_len);
        c->origin = r->origin;
        o.close = !r->keep_alive;
        bool has_body = r->chunked || r->content_length > 0;
        if (strcmp(r->method, "POST") == 0 && !r->chunked && r->content_length < 0) {
            o.status = 411, o.close = true;
            respond_error(c, 411, "a request body needs Content-Length or chunked encoding", NULL, false);
        } else if (r->content_length > (long long)opt->max_body) {
            o.status = 413, o.close = true;
            respond_error(c, 413, "the request body is too large (see --max-body)", NULL, false);
        } else {
            if (has_body && r->expect_continue && c->n_in == 0) send_all(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
            int rc = read_body(c, r, &body, &len);
            if (rc != 0) {
                o.status = rc, o.close = true;
                respond_error(c, rc, rc == 408 ? "the request body did not arrive in time" : rc == 413 ?
                              "the request body is too large (see --max-body)" : "malformed chunked body", NULL, false);
            } else {
                dispatch(c, r, body, len, &o);
            }
        }
    }
    log_request(c, r, &o, start);
    metrics_request(&c->s->metrics, endpoint_name(r->path), o.status);
    c->origin = NULL;
    free(body);
    free(r);
    return !o.close;
}

/* Closes the connection after its last response: first our side, then
 * what the client still sends (a body we refused) is read and dropped for
 * a moment, so that the close does not reset the connection before the
 * client has read the response. */
static void linger_close(Conn *c) {
    shutdown(c->fd, SHUT_WR);
    double deadline = now_seconds() + 1;
    char scratch[4096];
    for (size_t total = 0; total < ((size_t)8 << 20);) {
        double left = deadline - now_seconds();
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        ssize_t got = recv(c->fd, scratch, sizeof scratch, 0);
        if (got <= 0 && !(got < 0 && (errno == EINTR || errno == EAGAIN))) break;
        if (got > 0) total += (size_t)got;
    }
    close(c->fd);
}

static void *connection_main(void *arg) {
    Conn *c = arg;
    Server *s = c->s;
    c->in = xmalloc(HTTP_MAX_HEAD);
    while (serve_one(c)) {}
    linger_close(c);
    free(c->in);
    free(c);
    pthread_mutex_lock(&s->lock);
    if (--s->connections == 0) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- listening ---- */

static int listen_on(const ServerOptions *o, int *port, Error *e) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *list;
    char service[16];
    snprintf(service, sizeof service, "%d", o->port);
    int rc = getaddrinfo(o->host, service, &hints, &list);
    if (rc != 0) return fail(e, "--host %s: %s", o->host, gai_strerror(rc));
    int fd = socket(list->ai_family, SOCK_STREAM, 0), one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, list->ai_addr, list->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        freeaddrinfo(list);
        return fail(e, "cannot listen on %s port %d: %s", o->host, o->port, strerror(err));
    }
    freeaddrinfo(list);
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof addr;
    getsockname(fd, (struct sockaddr *)&addr, &addr_len);
    *port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port : ((struct sockaddr_in *)&addr)->sin_port);
    return fd;
}

/* Takes a new connection: its own thread, or a 503 when there are too many. */
static void accept_one(Server *s, int listen_fd) {
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof addr;
    int fd = accept(listen_fd, (struct sockaddr *)&addr, &addr_len);
    if (fd < 0) return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Conn *c = xcalloc(1, sizeof *c);
    *c = (Conn){.s = s, .fd = fd, .send_timeout = s->opt->timeout};
    char host[48] = "?";
    if (addr.ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)&addr)->sin_addr, host, sizeof host);
    else if (addr.ss_family == AF_INET6) inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&addr)->sin6_addr, host, sizeof host);
    snprintf(c->peer, sizeof c->peer, "%s", host);
    pthread_mutex_lock(&s->lock);
    bool room = s->connections < s->opt->max_connections;
    if (room) s->connections++;
    pthread_mutex_unlock(&s->lock);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    if (room && pthread_create(&thread, &attr, connection_main, c) == 0) {
        pthread_attr_destroy(&attr);
        return;
    }
    pthread_attr_destroy(&attr);
    if (room) {
        pthread_mutex_lock(&s->lock);
        s->connections--;
        pthread_mutex_unlock(&s->lock);
    }
    c->send_timeout = 0;  /* the accepting thread must not wait for a client */
    respond_error(c, 503, "too many open connections; retry later", "Retry-After: 1\r\n", false);
    free(c);
    /* Closing now, with the request unread, would reset the connection
     * before the client reads the 503: the accept loop reads it away first. */
    shutdown(fd, SHUT_WR);
    if (s->n_closing == MAX_CLOSING) {
        close(fd);
        return;
    }
    s->closing[s->n_closing] = fd;
    s->closing_until[s->n_closing++] = now_seconds() + 1;
}

/* Reads and drops what refused connections still send; closes each at its
 * end or after its second. */
static void drain_closing(Server *s, const struct pollfd *p) {
    double now = now_seconds();
    for (int i = s->n_closing - 1; i >= 0; i--) {
        char scratch[4096];
        bool end = now >= s->closing_until[i];
        if (!end && p[i].revents) end = recv(s->closing[i], scratch, sizeof scratch, MSG_DONTWAIT) <= 0;
        if (!end) continue;
        close(s->closing[i]);
        s->n_closing--;
        s->closing[i] = s->closing[s->n_closing];
        s->closing_until[i] = s->closing_until[s->n_closing];
    }
}

/* Whether a reply or an embeddings request is under way (between the
 * waves of the latter the engine may be idle for a moment). */
static bool busy(Server *s) { return !engine_idle(s->engine) || atomic_load(&s->embedding) > 0; }

int server_run(Model *m, Tokenizer *t, const ChatTemplate *template, const ServerOptions *o, Error *e) {
    int port = 0, listen_fd = listen_on(o, &port, e);
    if (listen_fd < 0) return -1;
    /* SIGINT and SIGTERM drain the server (signals.h); a client that goes
     * away is a failed write, not a signal. */
    if (signals_catch(true, e) != 0) {
        close(listen_fd);
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    Server s = {.model = m, .tokenizer = t, .template = template, .opt = o};
    pthread_mutex_init(&s.lock, NULL);
    pthread_mutex_init(&s.text_lock, NULL);
    pthread_cond_init(&s.progress, NULL);
    pthread_cond_init(&s.idle, NULL);
    atomic_init(&s.stopping, false);
    atomic_init(&s.draining, false);
    atomic_init(&s.embedding, 0);
    metrics_init(&s.metrics);
    s.caps = template_caps(template);
    EngineOptions eo = {.slots = o->parallel, .queue = o->queue, .defaults = o->defaults};
    s.engine = engine_start(m, t, &eo);
    fprintf(stderr, "listening on http://%s%s%s:%d (%d slot%s of %d tokens)\n", strchr(o->host, ':') ? "[" : "", o->host,
            strchr(o->host, ':') ? "]" : "", port, o->parallel, o->parallel == 1 ? "" : "s", m->max_context);

    /* Accepts until a signal comes down the pipe. */
    struct pollfd p[MAX_CLOSING + 2];
    for (;;) {
        p[0] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = signals_fd(), .events = POLLIN};
        for (int i = 0; i < s.n_closing; i++) p[i + 2] = (struct pollfd){.fd = s.closing[i], .events = POLLIN};
        int n = poll(p, (nfds_t)s.n_closing + 2, s.n_closing ? 100 : -1);
        if (n < 0 && errno != EINTR) break;
        if (p[1].revents) break;
        drain_closing(&s, p + 2);
        if (n > 0 && (p[0].revents & POLLIN)) accept_one(&s, listen_fd);
    }
    for (int i = 0; i < s.n_closing; i++) close(s.closing[i]);
    close(listen_fd);

    /* Drains: no new connection or request; the replies under way run on
     * for drain_timeout seconds at most, or until a second signal. */
    int signals = signals_take();
    atomic_store(&s.draining, true);
    engine_drain(s.engine);
    double deadline = now_seconds() + o->drain_timeout;
    bool again = signals > 1;
    if (busy(&s) && !again)
        fprintf(stderr, "draining: the replies under way finish (%g s at most; a second signal ends them now)\n",
                o->drain_timeout);
    while (!again && busy(&s) && now_seconds() < deadline) {
        struct pollfd w = {.fd = signals_fd(), .events = POLLIN};
        again = poll(&w, 1, 50) > 0;
    }
    if (busy(&s)) fprintf(stderr, "stopping: ending the replies under way\n");
    atomic_store(&s.stopping, true);
    engine_stop(s.engine);
    pthread_mutex_lock(&s.lock);
    while (s.connections > 0) pthread_cond_wait(&s.idle, &s.lock);
    pthread_mutex_unlock(&s.lock);
    engine_free(s.engine);
    metrics_free(&s.metrics);
    pthread_mutex_destroy(&s.lock);
    pthread_mutex_destroy(&s.text_lock);
    pthread_cond_destroy(&s.progress);
    pthread_cond_destroy(&s.idle);
    return 0;
}
