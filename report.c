/* report.c - collecting a run's inside through the model's probe, and
 * writing it as an HTML page (report_page.h) with the numbers as JSON. */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "report_page.h"
#include "unicode.h"

enum {
    OUTLIERS = 3,              /* largest activations kept per layer and position */
    LENS_ROWS = 8,             /* rows of logit-lens logits computed at once */
    ATTENTION_BUDGET = 1000000 /* attention weights kept at most */
};

/* One layer at one position. */
typedef struct {
    float resid;               /* |x| after the layer */
    float attn, mlp;           /* |what attention adds|, |what the MLP adds| */
    int lens_id;               /* the logit lens: the most probable token ... */
    float lens_prob;           /* ... and its probability */
    int top_dim[OUTLIERS];     /* the dimensions of x with the largest |value|, largest first */
    float top_val[OUTLIERS];
} LayerPoint;

typedef struct {
    int pos;
    double ms;
    SamplerTrace trace;
} ReportStep;

struct Report {
    Model *m;
    const Tokenizer *t;
    const Probe *next;
    Probe probe;
    int n_layers, n_heads, dim, vocab;
    int n_positions;           /* positions the latest pass reached */
    int cap;                   /* positions room is made for in embed_norm and points */
    float *embed_norm;         /* [cap] |embedding| */
    LayerPoint *points;        /* [cap][n_layers] */
    int k;                     /* experts per token in a mixture, else 0 */
    int *experts;              /* [cap][n_layers][k] the experts the router chose, most probable first (-1: a dense layer) */
    float *expert_weights;     /* [cap][n_layers][k] their weights in the token's output */
    int attn_keep;             /* positions whose attention is kept */
    float *attn;               /* [n_layers * n_heads][attn_keep * (attn_keep + 1) / 2]: row q, key k at q(q+1)/2 + k */
    float *lens_logits;        /* [LENS_ROWS][vocab] */
    ReportStep *steps;
    int n_steps, steps_cap;
    double seconds;            /* spent in the probe's callbacks */
};

/* ---- collecting ---- */

static double norm(const float *v, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
    return sqrt(ss);
}

/* Room for statistics up to position `end` (within REPORT_MAX_POSITIONS). */
static void reserve_positions(Report *r, int end) {
    if (end <= r->cap) return;
    int cap = r->cap ? r->cap : 64;
    while (cap < end) cap *= 2;
    if (cap > REPORT_MAX_POSITIONS) cap = REPORT_MAX_POSITIONS;
    r->embed_norm = xrealloc(r->embed_norm, (size_t)cap, sizeof *r->embed_norm);
    r->points = xrealloc(r->points, (size_t)cap * r->n_layers, sizeof *r->points);
    memset(r->points + (size_t)r->cap * r->n_layers, 0, (size_t)(cap - r->cap) * r->n_layers * sizeof *r->points);
    if (r->k) {
        size_t old = (size_t)r->cap * r->n_layers * r->k, all = (size_t)cap * r->n_layers * r->k;
        r->experts = xrealloc(r->experts, all, sizeof *r->experts);
        r->expert_weights = xrealloc(r->expert_weights, all, sizeof *r->expert_weights);
        memset(r->experts + old, 0xFF, (all - old) * sizeof *r->experts);  /* -1 */
        memset(r->expert_weights + old, 0, (all - old) * sizeof *r->expert_weights);
    }
    r->cap = cap;
}

/* The OUTLIERS largest |x[i]| of one row. */
static void find_outliers(LayerPoint *p, const float *x, int n) {
    for (int k = 0; k < OUTLIERS; k++) p->top_dim[k] = -1, p->top_val[k] = 0;
    for (int i = 0; i < n; i++) {
        int k = OUTLIERS;
        while (k > 0 && (p->top_dim[k - 1] < 0 || fabsf(x[i]) > fabsf(p->top_val[k - 1]))) k--;
        if (k == OUTLIERS) continue;
        memmove(p->top_dim + k + 1, p->top_dim + k, (OUTLIERS - 1 - k) * sizeof *p->top_dim);
        memmove(p->top_val + k + 1, p->top_val + k, (OUTLIERS - 1 - k) * sizeof *p->top_val);
        p->top_dim[k] = i, p->top_val[k] = x[i];
    }
}

/* The logit lens of rows[n][dim] at positions pos..: the final norm and the
 * output head, then the most probable token and its probability. */
static void logit_lens(Report *r, int layer, int pos, int n, const float *rows) {
    for (int i = 0; i < n; i += LENS_ROWS) {
        int block = n - i < LENS_ROWS ? n - i : LENS_ROWS;
        logits_of_residual(r->m, r->lens_logits, rows + (size_t)i * r->dim, block);
        for (int j = 0; j < block; j++) {
            const float *logits = r->lens_logits + (size_t)j * r->vocab;
            int best = argmax(logits, r->vocab);
            double sum = 0;
            for (int v = 0; v < r->vocab; v++) sum += exp((double)logits[v] - logits[best]);
            LayerPoint *p = &r->points[(size_t)(pos + i + j) * r->n_layers + layer];
            p->lens_id = best;
            p->lens_prob = (float)(1 / sum);
        }
    }
}

static void on_vectors(void *ctx, ProbeStep step, int layer, int pos, int n, const float *rows, int width) {
    Report *r = ctx;
    if (r->next && r->next->vectors) r->next->vectors(r->next->ctx, step, layer, pos, n, rows, width);
    double t0 = now_seconds();
    if (step == PROBE_EMBEDDING) {
        /* Positions from pos on are being run again: the steps that chose
         * tokens after it belong to a past sequence. */
        r->n_positions = pos + n;
        while (r->n_steps > 0 && r->steps[r->n_steps - 1].pos > pos) r->n_steps--;
    }
    int kept = pos + n < REPORT_MAX_POSITIONS ? n : REPORT_MAX_POSITIONS - pos;  /* rows whose statistics are kept */
    if (kept <= 0) return;
    reserve_positions(r, pos + kept);
    for (int i = 0; i < kept; i++) {
        const float *x = rows + (size_t)i * width;
        LayerPoint *p = layer >= 0 ? &r->points[(size_t)(pos + i) * r->n_layers + layer] : NULL;
        if (step == PROBE_EMBEDDING) r->embed_norm[pos + i] = (float)norm(x, width);
        else if (step == PROBE_ATTN_OUT) p->attn = (float)norm(x, width);
        else if (step == PROBE_MLP_OUT) p->mlp = (float)norm(x, width);
        else if (step == PROBE_RESID) p->resid = (float)norm(x, width), find_outliers(p, x, width);
    }
    if (step == PROBE_RESID) logit_lens(r, layer, pos, kept, rows);
    r->seconds += now_seconds() - t0;
}

static void on_router(void *ctx, int layer, int pos, int n, int k, const int *experts, const float *weights) {
    Report *r = ctx;
    if (r->next && r->next->router) r->next->router(r->next->ctx, layer, pos, n, k, experts, weights);
    int kept = pos + n < REPORT_MAX_POSITIONS ? n : REPORT_MAX_POSITIONS - pos;
    if (kept <= 0) return;
    reserve_positions(r, pos + kept);
    size_t at = ((size_t)pos * r->n_layers + layer) * k, stride = (size_t)r->n_layers * k;
    for (int i = 0; i < kept; i++) {
        memcpy(r->experts + at + i * stride, experts + (size_t)i * k, (size_t)k * sizeof *experts);
        memcpy(r->expert_weights + at + i * stride, weights + (size_t)i * k, (size_t)k * sizeof *weights);
    }
}

static void on_attention(void *ctx, int layer, int head, int query, const float *probs) {
    Report *r = ctx;
    if (r->next && r->next->attention) r->next->attention(r->next->ctx, layer, head, query, probs);
    size_t tri = (size_t)r->attn_keep * (r->attn_keep + 1) / 2;
    float *dst = r->attn + ((size_t)layer * r->n_heads + head) * tri + (size_t)query * (query + 1) / 2;
    memcpy(dst, probs, (size_t)(query + 1) * sizeof *probs);
}

Report *report_new(Model *m, const Tokenizer *t, const Probe *next) {
    Report *r = xcalloc(1, sizeof *r);
    const Config *c = &m->config;
    *r = (Report){.m = m, .t = t, .next = next, .n_layers = c->n_layers, .n_heads = c->n_heads, .dim = c->dim,
                  .vocab = c->vocab_size, .k = c->moe.n_experts > 0 ? c->moe.n_used : 0};
    /* As many positions as fit the budget: heads x keep^2 / 2 weights. */
    int keep = (int)sqrt(2.0 * ATTENTION_BUDGET / ((double)c->n_layers * c->n_heads));
    if (keep > REPORT_MAX_ATTENTION) keep = REPORT_MAX_ATTENTION;
    if (keep > m->max_context) keep = m->max_context;
    r->attn_keep = keep;
    r->attn = xcalloc((size_t)c->n_layers * c->n_heads * ((size_t)keep * (keep + 1) / 2), sizeof *r->attn);
    r->lens_logits = xmalloc((size_t)LENS_ROWS * c->vocab_size * sizeof *r->lens_logits);
    r->probe = (Probe){.ctx = r, .vectors = on_vectors, .attention = on_attention, .attention_until = keep,
                       .router = r->k ? on_router : NULL};
    m->probe = &r->probe;
    return r;
}

void report_free(Report *r) {
    if (!r) return;
    r->m->probe = r->next;
    free(r->embed_norm);
    free(r->points);
    free(r->experts);
    free(r->expert_weights);
    free(r->attn);
    free(r->lens_logits);
    free(r->steps);
    free(r);
}

void report_add_step(Report *r, int pos, const SamplerTrace *trace, double ms) {
    while (r->n_steps > 0 && r->steps[r->n_steps - 1].pos >= pos) r->n_steps--;
    if (r->n_steps == REPORT_MAX_STEPS) return;
    if (r->n_steps == r->steps_cap) {
        r->steps_cap = r->steps_cap ? 2 * r->steps_cap : 64;
        r->steps = xrealloc(r->steps, (size_t)r->steps_cap, sizeof *r->steps);
    }
    r->steps[r->n_steps++] = (ReportStep){.pos = pos, .ms = ms, .trace = *trace};
}

/* ---- writing JSON ---- */

/* A JSON string of s[0..len): ill-formed UTF-8 as U+FFFD, and <, > and &
 * escaped so that nothing in it can end the page's <script> element. */
static void put_string(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len;) {
        uint32_t c;
        bool truncated;
        size_t used = utf8_next(s + i, len - i, &c, &truncated);
        if (c == UTF8_INVALID) fputs("\\ufffd", f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", (char)c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x2028 || c == 0x2029) fprintf(f, "\\u%04x", (unsigned)c);
        else fwrite(s + i, 1, used, f);
        i += used;
    }
    fputc('"', f);
}

/* A number, or null when it is not finite. */
static void put_number(FILE *f, const char *format, double v) {
    if (isfinite(v)) fprintf(f, format, v);
    else fputs("null", f);
}

/* An attention weight with 5 decimals and no trailing zeros. */
static void put_weight(FILE *f, float v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.5f", v);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '0') n--;
    if (buf[n - 1] == '.') n--;
    fwrite(buf, 1, n, f);
}

/* Marks id as one whose text the page needs. */
static void need_token(bool *needed, int vocab, int id) {
    if (id >= 0 && id < vocab) needed[id] = true;
}

/* "vocab": {"id": [text, spelling], ...} for the ids marked. */
static void put_vocab(FILE *f, const Report *r, const bool *needed) {
    fputs("\"vocab\": {", f);
    bool first = true;
    for (int id = 0; id < r->vocab; id++) {
        if (!needed[id]) continue;
        fprintf(f, "%s\"%d\": [", first ? "" : ",\n", id);
        first = false;
        size_t len = 0;
        char *text = r->t && id < tokenizer_vocab_size(r->t) ? tokenizer_decode(r->t, &id, 1, &len) : NULL;
        char *spelling = r->t && id < tokenizer_vocab_size(r->t) ? tokenizer_spelling(r->t, id) : NULL;
        char fallback[32];
        snprintf(fallback, sizeof fallback, "#%d", id);
        put_string(f, text ? text : fallback, text ? len : strlen(fallback));
        fputc(',', f);
        put_string(f, spelling ? spelling : fallback, strlen(spelling ? spelling : fallback));
        fputc(']', f);
        free(text);
        free(spelling);
    }
    fputs("},\n", f);
}

/* The steps that chose the tokens of tokens[0..n) (and an end token at n). */
static void put_steps(FILE *f, const Report *r, const int *tokens, int n, bool *needed) {
    fputs("\"steps\": [", f);
    bool first = true;
    for (int s = 0; s < r->n_steps; s++) {
        const ReportStep *st = &r->steps[s];
        if (st->pos > n || (st->pos < n && tokens[st->pos] != st->trace.chosen)) continue;
        fprintf(f, "%s{\"pos\": %d, \"chosen\": %d, \"ms\": ", first ? "" : ",\n", st->pos, st->trace.chosen);
        first = false;
        need_token(needed, r->vocab, st->trace.chosen);
        put_number(f, "%.3f", st->ms);
        fputs(", \"stages\": [", f);
        for (int k = 0; k < st->trace.n_stages; k++) {
            const SamplerStage *sg = &st->trace.stages[k];
            fprintf(f, "%s{\"name\": \"%s\", \"left\": %d, \"chosen_prob\": ", k ? ", " : "", sg->name, sg->n_left);
            put_number(f, "%.8g", sg->chosen_prob);
            fputs(", \"ids\": [", f);
            for (int i = 0; i < sg->n; i++) fprintf(f, "%s%d", i ? "," : "", sg->ids[i]), need_token(needed, r->vocab, sg->ids[i]);
            fputs("], \"probs\": [", f);
            for (int i = 0; i < sg->n; i++) fputs(i ? "," : "", f), put_number(f, "%.8g", sg->probs[i]);
            fputs("]}", f);
        }
        fputs("]}", f);
    }
    fputs("],\n", f);
}

/* The LayerPoint fields, as the page names them. */
typedef enum { FIELD_RESID, FIELD_ATTN, FIELD_MLP, FIELD_LENS_ID, FIELD_LENS_PROB, FIELD_OUTLIERS, N_FIELDS } PointField;

static void put_field(FILE *f, const LayerPoint *pt, PointField field) {
    switch (field) {
    case FIELD_RESID: put_number(f, "%.5g", pt->resid); break;
    case FIELD_ATTN: put_number(f, "%.5g", pt->attn); break;
    case FIELD_MLP: put_number(f, "%.5g", pt->mlp); break;
    case FIELD_LENS_ID: fprintf(f, "%d", pt->lens_id); break;
    case FIELD_LENS_PROB: put_number(f, "%.7g", pt->lens_prob); break;
    default:  /* [dim, value, dim, value, ...] */
        fputc('[', f);
        for (int k = 0; k < OUTLIERS && pt->top_dim[k] >= 0; k++) {
            fprintf(f, "%s%d,", k ? "," : "", pt->top_dim[k]);
            put_number(f, "%.5g", pt->top_val[k]);
        }
        fputc(']', f);
    }
}

/* A mixture's routes: "experts" and "expert_weights", an array per layer
 * over positions of each token's choices, most probable first ([] for a
 * dense layer). */
static void put_routes(FILE *f, const Report *r, int n) {
    if (!r->k) return;
    for (int field = 0; field < 2; field++) {
        fprintf(f, ",\n\"%s\": [", field ? "expert_weights" : "experts");
        for (int l = 0; l < r->n_layers; l++) {
            fputs(l ? ",\n[" : "[", f);
            for (int p = 0; p < n; p++) {
                size_t at = ((size_t)p * r->n_layers + l) * r->k;
                fputs(p ? ",[" : "[", f);
                for (int j = 0; j < r->k && r->experts[at] >= 0; j++) {
                    if (j) fputc(',', f);
                    if (field) put_number(f, "%.6g", r->expert_weights[at + j]);
                    else fprintf(f, "%d", r->experts[at + j]);
                }
                fputc(']', f);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
}

/* "layers": for each field, an array per layer over positions 0..n-1. */
static void put_layers(FILE *f, const Report *r, int n, bool *needed) {
    static const char *names[N_FIELDS] = {"resid", "attn_add", "mlp_add", "lens_id", "lens_prob", "outliers"};
    fprintf(f, "\"layers\": {\"positions\": %d, \"embed_norm\": [", n);
    for (int p = 0; p < n; p++) fputs(p ? "," : "", f), put_number(f, "%.5g", r->embed_norm[p]);
    fputc(']', f);
    for (PointField field = 0; field < N_FIELDS; field++) {
        fprintf(f, ",\n\"%s\": [", names[field]);
        for (int l = 0; l < r->n_layers; l++) {
            fputs(l ? ",\n[" : "[", f);
            for (int p = 0; p < n; p++) fputs(p ? "," : "", f), put_field(f, &r->points[(size_t)p * r->n_layers + l], field);
            fputc(']', f);
        }
        fputc(']', f);
    }
    put_routes(f, r, n);
    fputs("},\n", f);
    for (int p = 0; p < n; p++)
        for (int l = 0; l < r->n_layers; l++) need_token(needed, r->vocab, r->points[(size_t)p * r->n_layers + l].lens_id);
}

static void put_attention(FILE *f, const Report *r, int n) {
    size_t tri = (size_t)r->attn_keep * (r->attn_keep + 1) / 2;
    fprintf(f, "\"attention\": {\"positions\": %d, \"weights\": [", n);
    for (int l = 0; l < r->n_layers; l++) {
        fputs(l ? ",\n[" : "[", f);
        for (int h = 0; h < r->n_heads; h++) {
            fputs(h ? ",\n[" : "[", f);
            const float *w = r->attn + ((size_t)l * r->n_heads + h) * tri;
            for (size_t i = 0; i < (size_t)n * (n + 1) / 2; i++) fputs(i ? "," : "", f), put_weight(f, w[i]);
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputs("]},\n", f);
}

static void put_run(FILE *f, const Report *r, const ReportRun *run) {
    const Config *c = &r->m->config;
    fprintf(f, "\"model\": {\"type\": ");
    put_string(f, architecture_name(c->arch), strlen(architecture_name(c->arch)));
    fprintf(f, ", \"layers\": %d, \"heads\": %d, \"kv_heads\": %d, \"dim\": %d, \"head_dim\": %d, \"hidden_dim\": %d, "
               "\"vocab\": %d, \"max_context\": %d, \"weights\": \"%s\", \"math\": \"%s\", \"weight_bytes\": %zu, "
               "\"experts\": %d, \"experts_per_token\": %d, \"expert_dim\": %d},\n",
            c->n_layers, c->n_heads, c->n_kv_heads, c->dim, c->head_dim, c->hidden_dim, c->vocab_size, r->m->max_context,
            weight_type_name(r->m->dtype), r->m->math == MATH_BF16 ? "bf16" : "exact", model_weight_bytes(r->m),
            c->moe.n_experts, c->moe.n_experts > 0 ? c->moe.n_used : 0, c->moe.hidden_dim);
    fputs("\"run\": {\"command\": ", f);
    put_string(f, run->command, strlen(run->command));
    fputs(", \"model\": ", f);
    put_string(f, run->model, strlen(run->model));
    fputs(", \"sampling\": ", f);
    if (run->sampling) put_string(f, run->sampling, strlen(run->sampling));
    else fputs("null", f);
    fprintf(f, ", \"threads\": %d, \"kernels\": \"%s\", \"kv_bytes\": %zu, \"load_seconds\": ", run->threads,
            kernels_in_use(), run->kv_bytes);
    put_number(f, "%.4f", run->load_seconds);
    fprintf(f, ", \"prompt_tokens\": %d, \"prompt_seconds\": ", run->prompt_tokens);
    put_number(f, "%.4f", run->prompt_seconds);
    fprintf(f, ", \"decode_tokens\": %d, \"decode_seconds\": ", run->decode_tokens);
    put_number(f, "%.4f", run->decode_seconds);
    fputs(", \"report_seconds\": ", f);
    put_number(f, "%.4f", r->seconds);
    fputs("},\n", f);
}

int report_write(Report *r, const char *path, const int *tokens, int n, const ReportRun *run, Error *e) {
    FILE *f = fopen(path, "w");
    if (!f) return fail(e, "%s: cannot create: %s", path, strerror(errno));
    int ran = n < r->n_positions ? n : r->n_positions;  /* positions the passes ran */
    int stats = ran < REPORT_MAX_POSITIONS ? ran : REPORT_MAX_POSITIONS;
    int attention = stats < r->attn_keep ? stats : r->attn_keep;
    bool *needed = xcalloc((size_t)r->vocab, sizeof *needed);

    fputs(report_page_head, f);
    fputs("<script id=\"data\" type=\"application/json\">{\n", f);
    put_run(f, r, run);
    fputs("\"tokens\": [", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", tokens[i]), need_token(needed, r->vocab, tokens[i]);
    fputs("],\n", f);
    put_steps(f, r, tokens, n, needed);
    put_layers(f, r, stats, needed);
    put_attention(f, r, attention);
    put_vocab(f, r, needed);
    fprintf(f, "\"left_out\": {\"statistics_from\": %d, \"attention_from\": %d, \"positions\": %d}\n}</script>\n",
            stats, attention, ran);
    fputs(report_page_tail, f);
    free(needed);
    if (ferror(f) | (fclose(f) != 0)) return fail(e, "%s: write failed", path);
    return 0;
}
