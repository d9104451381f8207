/* server.h - `run serve`: an OpenAI-style HTTP server for one model.
 *
 * One thread accepts connections, and one thread per connection reads its
 * requests (http.c), turns them into token ids (api.c, the chat template,
 * the tokenizer) and writes the responses. The model runs in the engine
 * (engine.h: slots, batching, the prompt cache), whose events become the
 * reply's bytes here. Requests that find no free slot wait in a bounded
 * queue; past it they get 503. GET / is the chat page (chat_page.html,
 * built into the binary as chat_page.h): a person's way in. */
#ifndef SERVER_H
#define SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "embed.h"
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
    const char *const *cors;   /* [n_cors] origins a browser may call from ("*": any); none by default */
    int n_cors;
    double drain_timeout;      /* seconds SIGTERM waits for the replies under way */
    bool log_json;             /* the access log as JSON lines */
    const Pooling *pooling;    /* how /v1/embeddings makes a vector (embed.h); NULL: it answers */
    const char *no_pooling;    /*   400 with this message */
} ServerOptions;

/* Serves model m (with tokenizer t and chat template, which may be NULL
 * for a model without one) until SIGINT or SIGTERM: then it stops
 * accepting, lets the replies under way finish (for drain_timeout seconds
 * at most; a second signal ends them at once), and returns 0. Returns -1
 * with e when it cannot listen. */
int server_run(Model *m, Tokenizer *t, const ChatTemplate *template, const ServerOptions *o, Error *e);

#endif
