/* trace.c - the lines of -v and -vv. */
#include "trace.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* Text with C escapes for control characters and quotes. */
static void print_escaped(FILE *f, const char *text, size_t len) {
    for (size_t k = 0; k < len; k++) {
        unsigned char ch = (unsigned char)text[k];
        if (ch == '\n') fputs("\\n", f);
        else if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7F) fprintf(f, "\\x%02x", ch);
        else fputc(ch, f);
    }
}

void trace_token_text(FILE *f, const Tokenizer *t, int id) {
    size_t len;
    char *text = t ? tokenizer_decode(t, &id, 1, &len) : NULL;
    if (!text) return;
    fputc('"', f);
    print_escaped(f, text, len);
    fputc('"', f);
    free(text);
}

void trace_step(FILE *f, const Tokenizer *t, const SamplerTrace *trace, int pos, double ms) {
    const SamplerStage *model = &trace->stages[0];
    fprintf(f, "pos %5d  token %6d ", pos, trace->chosen);
    trace_token_text(f, t, trace->chosen);
    fprintf(f, "  p=%.4g  top:", model->chosen_prob);
    for (int i = 0, shown = 0; i < model->n && shown < 3; i++) {
        if (model->ids[i] == trace->chosen) continue;
        fputc(' ', f);
        trace_token_text(f, t, model->ids[i]);
        fprintf(f, " %.4g", model->probs[i]);
        shown++;
    }
    fprintf(f, "  %.1f ms\n", ms);
}

void trace_vectors(void *ctx, ProbeStep step, int layer, int pos, int n, const float *rows, int width) {
    const Trace *t = ctx;
    bool main_step = step == PROBE_Q || step == PROBE_K || step == PROBE_V || step == PROBE_RESID_ATTN || step == PROBE_RESID;
    if (t->level < 2 && !main_step) return;
    const float *v = rows + (size_t)(n - 1) * width;
    double ss = 0;
    for (int i = 0; i < width; i++) ss += (double)v[i] * v[i];
    int show = t->level > 1 ? 8 : 4;
    (void)pos;
    if (layer >= 0) fprintf(t->out, "layer %2d ", layer);
    const char *name = probe_step_name(step);
    fprintf(t->out, "%-10s [", name);
    for (int i = 0; i < show && i < width; i++) fprintf(t->out, "%s%.6f", i ? ", " : "", v[i]);
    fprintf(t->out, "%s] |%s|=%.6f\n", width > show ? ", ..." : "", name, sqrt(ss));
}
