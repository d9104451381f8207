/* trace.h - what -v and -vv print: a token's text for people, a line per
 * generated token (gen and chat -v), and each layer's vectors as a probe
 * (fwd -v, gen and chat -vv). */
#ifndef TRACE_H
#define TRACE_H

#include <stdio.h>

#include "net.h"
#include "sampler.h"
#include "tokenizer.h"

/* "text" of token id, in quotes with C escapes for control characters and
 * quotes; nothing without a tokenizer. */
void trace_token_text(FILE *f, const Tokenizer *t, int id);

/* -v's line for a token generated at position pos: the token, its
 * probability, the top 3 alternatives, the step's milliseconds. */
void trace_step(FILE *f, const Tokenizer *t, const SamplerTrace *trace, int pos, double ms);

/* The layer trace: each step's first values and L2 norm, of the last token
 * of the pass. Level 1 shows q, k, v and the residual stream; level 2
 * every step. A Probe's `vectors` with ctx a Trace. */
typedef struct {
    FILE *out;
    int level;
} Trace;

void trace_vectors(void *ctx, ProbeStep step, int layer, int pos, int n, const float *rows, int width);

#endif
