/* server.h - `run serve`: an OpenAI-style HTTP server for one model.
 *
 * One thread accepts connections, one thread per connection reads its
 * requests (http.c) and writes the responses, and one engine thread runs
 * the model for every request at once: `parallel` slots, each a Sequence
 * with its own KV cache; each engine step is one forward pass over the next
 * token of every decoding slot and a chunk of each new prompt. A slot keeps
 * its tokens and cache after a request, and a new request goes to the free
 * slot whose tokens its prompt shares the longest start with, so that a
 * conversation's next turn computes only its new tokens. Requests that find
 * no free slot wait in a bounded queue; past it they get 503. */
#ifndef SERVER_H
#define SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "generate.h"
#include "net.h"
#include "tokenizer.h"
#include "util.h"

typedef struct {
    const char *host;          /* the address to listen on, e.g. "127.0.0.1" */
    int port;                  /* 0: any free port */
    int parallel;              /* slots: requests generated at once */
    int queue;                 /* requests waiting for a slot at most */
    int max_connections;       /* open connections at most */
    size_t max_body;           /* bytes of a request body at most */
    double timeout;            /* seconds a request's head, and then its body, may take to arrive */
    const char *api_key;       /* when not NULL: the Bearer token every request but /health needs */
    const char *model_name;    /* the "model" of responses and /v1/models */
    GenerationConfig defaults; /* the settings of a request that gives none */
    bool seed_given;           /* defaults.sampling.seed was chosen: else each request gets a fresh one */
} ServerOptions;

/* Serves model m (with tokenizer t and chat template, which may be NULL
 * for a model without one) until SIGINT or SIGTERM: then it stops
 * accepting, ends the replies under way, and returns 0. Returns -1 with e
 * when it cannot listen. */
int server_run(Model *m, Tokenizer *t, const ChatTemplate *template, const ServerOptions *o, Error *e);

#endif
