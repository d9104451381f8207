/* embed.h - sentence embeddings: how a checkpoint turns its tokens' hidden
 * states into one vector.
 *
 * A sentence-transformers checkpoint (Qwen3-Embedding, ...) says so in its
 * files: modules.json lists a Pooling module (whose folder's config.json
 * picks the CLS token, the mean of the tokens, or the last token) and
 * perhaps a Normalize module (the vector scaled to length 1). Without
 * modules.json: the last token, normalised - what a causal model's last
 * position has seen all of. The hidden states are the final norm's output,
 * the input of the output head (Chunk.hidden in net.h). */
#ifndef EMBED_H
#define EMBED_H

#include <stdbool.h>

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

#endif
