/* embed.c - the pooling a checkpoint asks for, pooling itself, and inputs
 * run through the engine to their vectors. */
#include "embed.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "json.h"

const char *pooling_name(PoolingMode mode) {
    return mode == POOL_MEAN ? "mean" : mode == POOL_CLS ? "CLS token" : "last token";
}

/* The pooling mode of a Pooling module's config.json: exactly one of the
 * modes it may switch on, and one this code does. */
static int read_pooling_config(Pooling *p, const char *path, Error *e) {
    JsonDoc doc;
    if (json_parse_file(&doc, path, e) != 0) return -1;
    static const struct {
        const char *key;
        int mode;              /* a PoolingMode, or -1: not done here */
    } modes[] = {{"pooling_mode_lasttoken", POOL_LAST}, {"pooling_mode_mean_tokens", POOL_MEAN},
                 {"pooling_mode_cls_token", POOL_CLS},  {"pooling_mode_max_tokens", -1},
                 {"pooling_mode_mean_sqrt_len_tokens", -1}, {"pooling_mode_weightedmean_tokens", -1}};
    int on = 0, rc = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0] && rc == 0; i++) {
        const JsonValue *v = json_get(&doc.root, modes[i].key);
        if (!v || v->type != JSON_BOOL || !v->boolean) continue;
        if (modes[i].mode < 0) rc = fail(e, "%s: %s is not supported (last token, mean or CLS)", path, modes[i].key);
        else p->mode = (PoolingMode)modes[i].mode, on++;
    }
    if (rc == 0 && on != 1) rc = fail(e, "%s: expected one pooling mode switched on, found %d", path, on);
    json_free(&doc);
    return rc;
}

int pooling_load(Pooling *p, const char *model, Error *e) {
    *p = (Pooling){.mode = POOL_LAST, .normalize = true};
    char *modules_path = model_path(model, "modules.json");
    struct stat st;
    if (stat(modules_path, &st) != 0) {
        free(modules_path);
        return 0;
    }
    JsonDoc doc;
    int rc = json_parse_file(&doc, modules_path, e);
    bool parsed = rc == 0;
    if (rc == 0 && doc.root.type != JSON_ARRAY) rc = fail(e, "%s: expected a list of modules", modules_path);
    bool pooled = false;
    p->normalize = false;
    for (size_t i = 0; parsed && rc == 0 && i < doc.root.len; i++) {
        const JsonValue *type = json_get(&doc.root.items[i], "type"), *path = json_get(&doc.root.items[i], "path");
        if (!type || type->type != JSON_STRING) {
            rc = fail(e, "%s: module %zu has no \"type\"", modules_path, i);
        } else if (strcmp(type->string, "sentence_transformers.models.Normalize") == 0) {
            p->normalize = true;
        } else if (strcmp(type->string, "sentence_transformers.models.Pooling") == 0) {
            if (!path || path->type != JSON_STRING || strstr(path->string, "..")) {
                rc = fail(e, "%s: the Pooling module has no usable \"path\"", modules_path);
                continue;
            }
            char *folder = model_path(model, path->string), *config = path_join(folder, "config.json");
            rc = read_pooling_config(p, config, e);
            free(folder), free(config);
            pooled = true;
        }
    }
    if (rc == 0 && !pooled) rc = fail(e, "%s: no sentence_transformers.models.Pooling module", modules_path);
    if (parsed) json_free(&doc);
    free(modules_path);
    return rc;
}

/* v[n] scaled to length 1 (the norm summed in double); a zero vector stays zero. */
static void normalize(float *v, int n) {
    double norm = 0;
    for (int d = 0; d < n; d++) norm += (double)v[d] * v[d];
    norm = sqrt(norm);
    for (int d = 0; d < n && norm > 0; d++) v[d] = (float)(v[d] / norm);
}

void pool(float *out, const float *hidden, int n, int dim, const Pooling *p) {
    /* The pooled vector, summed in double. */
    for (int d = 0; d < dim; d++) {
        double x;
        if (p->mode == POOL_MEAN) {
            x = 0;
            for (int t = 0; t < n; t++) x += hidden[(size_t)t * dim + d];
            x /= n;
        } else {
            x = hidden[(size_t)(p->mode == POOL_CLS ? 0 : n - 1) * dim + d];
        }
        out[d] = (float)x;
    }
    if (p->normalize) normalize(out, dim);
}

void shorten(float *v, int keep, const Pooling *p) {
    if (p->normalize) normalize(v, keep);
}

/* ---- inputs through the engine ---- */

/* A wave of inputs in the engine: how many have ended, and whether one
 * was ended before all its tokens ran (their events come on the engine's
 * thread). */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int ended;
    bool interrupted;
} Wave;

static void on_event(void *ctx, EngineRequest *r, const EngineEvent *event) {
    (void)r;
    Wave *w = ctx;
    if (event->kind != ENGINE_ENDED) return;
    pthread_mutex_lock(&w->lock);
    w->ended++;
    /* A request for hidden states that ran to its end ends by its length. */
    if (event->stop != STOP_LENGTH) w->interrupted = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

/* Waits until the wave's n requests have ended, cancelling them all once
 * `gone` says the caller has left; returns whether it did. */
static bool wait_wave(Wave *w, Engine *engine, EngineRequest *r, int n, bool (*gone)(void *ctx), void *ctx) {
    bool cancelled = false;
    pthread_mutex_lock(&w->lock);
    while (w->ended < n) {
        if (!cancelled && gone && gone(ctx)) {
            cancelled = true;
            pthread_mutex_unlock(&w->lock);
            for (int i = 0; i < n; i++) engine_cancel(engine, &r[i]);
            pthread_mutex_lock(&w->lock);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&w->changed, &w->lock, &until);
    }
    pthread_mutex_unlock(&w->lock);
    return cancelled;
}

EmbedOutcome embed_run(float *out, Engine *engine, const TokenIds *inputs, int n, int wave, int dim, const Pooling *p,
                       const GenerationConfig *settings, bool (*gone)(void *ctx), void *ctx) {
    EngineRequest *r = xcalloc((size_t)wave, sizeof *r);
    EngineRequest **all = xcalloc((size_t)wave, sizeof *all);
    float **hidden = xcalloc((size_t)wave, sizeof *hidden);
    Wave w;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.changed, NULL);
    EmbedOutcome outcome = EMBED_DONE;
    for (int first = 0; first < n && outcome == EMBED_DONE; first += wave) {
        int k = n - first < wave ? n - first : wave;
        /* The wave's requests: every prompt token's hidden state, no token
         * generated; after the first wave, work already under way. */
        for (int i = 0; i < k; i++) {
            const TokenIds *in = &inputs[first + i];
            hidden[i] = xmalloc(in->n * (size_t)dim * sizeof(float));
            r[i] = (EngineRequest){.prompt = in->ids, .n_prompt = (int)in->n, .generation = *settings, .seed_given = true,
                                   .logprobs = -1, .hidden = hidden[i], .under_way = first > 0, .on_event = on_event,
                                   .ctx = &w};
            all[i] = &r[i];
        }
        w.ended = 0;
        w.interrupted = false;
        if (!engine_submit(engine, all, k)) outcome = EMBED_REFUSED;
        else if (wait_wave(&w, engine, r, k, gone, ctx)) outcome = EMBED_CANCELLED;
        else if (w.interrupted) outcome = EMBED_STOPPED;  /* refused, or ended by engine_stop */
        /* The vectors, once every request of the wave ran to its end. */
        for (int i = 0; i < k && outcome == EMBED_DONE; i++) pool(out + (size_t)(first + i) * dim, hidden[i], r[i].n_prompt, dim, p);
        for (int i = 0; i < k; i++) free(hidden[i]);
    }
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.changed);
    free(r), free(all), free(hidden);
    return outcome;
}
