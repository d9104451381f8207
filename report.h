/* report.h - a run seen from inside, written as one self-contained HTML page.
 *
 * A Report watches the forward passes of one sequence through the model's
 * probe and keeps, for each position: each layer's residual-stream norm,
 * the norms of what attention and the MLP add, the largest activations, the
 * logit lens (the token the final norm and output head make of the residual
 * stream after each layer, with its probability), each head's attention
 * weights, and in a mixture of experts the experts the router chose for the
 * token in each sparse layer with their weights. The caller adds each sampling step (the sampler's trace). At the
 * end report_write puts it all as JSON into a page whose script draws it.
 *
 * It is bounded: attention is kept for the first positions only, as many as
 * fit about 1.5 million weights (at most REPORT_MAX_ATTENTION), the other
 * statistics for the first REPORT_MAX_POSITIONS positions; the page says
 * what was left out. A position run again (a chat after /reset) replaces
 * what was kept for it. Without a Report, nothing of this is computed. */
#ifndef REPORT_H
#define REPORT_H

#include <stddef.h>

#include "net.h"
#include "sampler.h"
#include "tokenizer.h"
#include "util.h"

enum { REPORT_MAX_ATTENTION = 512, REPORT_MAX_POSITIONS = 4096, REPORT_MAX_STEPS = 4096 };

typedef struct Report Report;

/* What the run was, for the page's run panel. */
typedef struct {
    const char *command;       /* "gen", "chat", "fwd" */
    const char *model;         /* the checkpoint's path */
    const char *sampling;      /* the sampler's settings as text, or NULL */
    int threads;
    size_t kv_bytes;           /* the KV cache */
    double load_seconds;
    int prompt_tokens;         /* tokens fed as prompts, and their time */
    double prompt_seconds;
    int decode_tokens;         /* tokens fed one at a time, and their time */
    double decode_seconds;
} ReportRun;

/* Starts watching m's forward passes (m->probe is the report's while it
 * lives). `next`, when not NULL, is shown every step too (the trace of
 * -vv). t may be NULL (fwd without a tokenizer): tokens are shown as ids. */
Report *report_new(Model *m, const Tokenizer *t, const Probe *next);

/* Stops watching (m->probe back to `next`) and frees it. */
void report_free(Report *r);

/* Records a sampling step that chose the token at position pos, in ms
 * milliseconds (sampling and the token's forward pass). Steps recorded
 * earlier at pos or later are forgotten, and so are those after the first
 * position of a later pass. */
void report_add_step(Report *r, int pos, const SamplerTrace *trace, double ms);

/* Writes the page for the sequence tokens[0..n) (the positions the passes
 * ran; a last step may choose the token at position n, an end token that
 * was not fed). */
int report_write(Report *r, const char *path, const int *tokens, int n, const ReportRun *run, Error *e);

#endif
