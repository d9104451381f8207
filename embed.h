/* embed.h - sentence embeddings: how a checkpoint turns its tokens' hidden
 * states into one vector.
 *
 * A sentence-transformers checkpoint (Qwen3-Embedding, ...) says so in its
 * files: modules.json lists a Pooling module (whose folder's config.json
 * picks the CLS token, the mean of the tokens, or the last token) and
 * perhaps a Normalize module (the vector scaled to length 1). Without
 * modules.json: the last token, normalised - what a causal model's last
 * position has seen all of. The hidden states are the final norm's output,
 * the input of the output head (Chunk.hidden in net.h), which the engine
 * (engine.h) gives for several inputs at once: embed_run drives it, for
 * `run embed` and the server's /v1/embeddings alike. */
#ifndef EMBED_H
#define EMBED_H

#include <stdbool.h>

#include "engine.h"
#include "generate.h"
#include "tokenizer.h"
#include "util.h"

typedef enum { POOL_LAST, POOL_MEAN, POOL_CLS } PoolingMode;

typedef struct {
    PoolingMode mode;
    bool normalize;            /* scaled to unit length */
} Pooling;

/* The pooling of checkpoint MODEL (a folder, or a file in it), read from
 * modules.json and its Pooling module's config.json; the default without
 * modules.json. An error for a broken file or a pooling it does not do. */
int pooling_load(Pooling *p, const char *model, Error *e);

/* "last token", "mean", "CLS token". */
const char *pooling_name(PoolingMode mode);

/* out[dim] = the pooled (and perhaps normalised) vector of hidden[n][dim]. */
void pool(float *out, const float *hidden, int n, int dim, const Pooling *p);

/* v[keep] = the first keep of its dim components, scaled to unit length
 * again when p normalises: a shorter vector of a model trained for it
 * (Matryoshka), as the API's "dimensions" asks. */
void shorten(float *v, int keep, const Pooling *p);

typedef enum {
    EMBED_DONE,                /* every vector is in out */
    EMBED_REFUSED,             /* the engine took no more work: its queue is full, or it is draining */
    EMBED_STOPPED,             /* the engine stopped before the inputs ran */
    EMBED_CANCELLED,           /* `gone` said so: the inputs under way were dropped */
} EmbedOutcome;

/* The vectors of inputs[0..n) (token ids, each 1 to the engine's context
 * long) into out[n][dim]: the engine runs them `wave` at a time, so that
 * each wave's prompts share forward passes (settings: any valid
 * generation settings; none is used), and each is pooled by p. `gone`
 * (may be NULL) is asked every 100 ms whether the caller still wants them
 * (a client that closed its connection does not). */
EmbedOutcome embed_run(float *out, Engine *engine, const TokenIds *inputs, int n, int wave, int dim, const Pooling *p,
                       const GenerationConfig *settings, bool (*gone)(void *ctx), void *ctx);

#endif
