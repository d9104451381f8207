/* test_embed.c - embeddings against the numpy reference
 * (tests/data/embed_golden.json, scripts/make_embed_golden.py): the final
 * norm's hidden states of several inputs fed at once through the engine's
 * batched pass, pooled by the last token, the mean and the CLS token and
 * normalised, within 1e-4; embed_run's waves (the same vectors, a refusal
 * while draining, a caller that leaves); shorten; and the pooling read from
 * sentence-transformers' files. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../embed.h"
#include "../engine.h"
#include "../json.h"
#include "test.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int ended;

static void on_event(void *ctx, EngineRequest *r, const EngineEvent *event) {
    (void)ctx, (void)r;
    if (event->kind != ENGINE_ENDED) return;
    pthread_mutex_lock(&lock);
    ended++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static bool always_gone(void *ctx) {
    (void)ctx;
    return true;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *path = path_join(dir, name);
    FILE *f = fopen(path, "w");
    if (!f) die("%s: cannot create", path);
    fputs(text, f);
    fclose(f);
    free(path);
}

static void test_vectors(const JsonValue *golden, const char *dir) {
    Model m;
    Error e;
    ModelOptions opt = {.threads = 2, .context = 64};
    if (model_load(&m, dir, &opt, &e) != 0) die("%s", e.msg);
    GenerationConfig g;
    if (generation_config_load(&g, dir, &m.config, -1, &e) != 0) die("%s", e.msg);
    Tokenizer *t = tokenizer_load("tests/data/qwen2.5-tokenizer.json", &e);
    if (!t) die("%s", e.msg);
    Engine *engine = engine_start(&m, t, &(EngineOptions){.slots = 2, .queue = 4, .defaults = g});
    const JsonValue *inputs = json_get(golden, "inputs");
    int n = (int)inputs->len, dim = m.config.dim;
    EngineRequest req[8];
    EngineRequest *all[8];
    int *ids[8];
    float *hidden[8];
    for (int i = 0; i < n; i++) {
        const JsonValue *list = &inputs->items[i];
        ids[i] = xmalloc(list->len * sizeof(int));
        for (size_t t = 0; t < list->len; t++) ids[i][t] = (int)list->items[t].number.integer;
        hidden[i] = xmalloc(list->len * (size_t)dim * sizeof(float));
        req[i] = (EngineRequest){.prompt = ids[i], .n_prompt = (int)list->len, .generation = g, .logprobs = -1,
                                 .hidden = hidden[i], .on_event = on_event};
        all[i] = &req[i];
    }
    ended = 0;
    CHECK(engine_submit(engine, all, n), "%d inputs taken at once", n);
    pthread_mutex_lock(&lock);
    while (ended < n) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    const char *names[] = {"last", "mean", "cls"};
    const PoolingMode modes[] = {POOL_LAST, POOL_MEAN, POOL_CLS};
    float *v = xmalloc((size_t)dim * sizeof *v);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n; i++) {
            pool(v, hidden[i], req[i].n_prompt, dim, &(Pooling){.mode = modes[k], .normalize = true});
            const JsonValue *want = &json_get(golden, names[k])->items[i];
            double err = want->len == (size_t)dim ? 0 : INFINITY;
            for (int d = 0; d < dim && want->len == (size_t)dim; d++) err = fmax(err, fabs(v[d] - want->items[d].number.value));
            CHECK(err < 1e-4, "input %d pooled by %s: the reference's vector within 1e-4 (err %.1e)", i, names[k], err);
            CHECK(req[i].generated == 0, "input %d: no token generated", i);
        }
    /* embed_run: the inputs in waves of 2 through the same engine, mean-pooled. */
    TokenIds inputs_ids[8] = {{0}};
    for (int i = 0; i < n; i++)
        for (int t = 0; t < req[i].n_prompt; t++) token_ids_push(&inputs_ids[i], ids[i][t]);
    float *all_vectors = xmalloc((size_t)n * dim * sizeof(float));
    Pooling mean = {.mode = POOL_MEAN, .normalize = true};
    EmbedOutcome done = embed_run(all_vectors, engine, inputs_ids, n, 2, dim, &mean, &g, NULL, NULL);
    double worst = done == EMBED_DONE ? 0 : INFINITY;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < dim; d++)
            worst = fmax(worst, fabs(all_vectors[(size_t)i * dim + d] - json_get(golden, "mean")->items[i].items[d].number.value));
    CHECK(worst < 1e-4, "embed_run, %d inputs in waves of 2: the reference's mean-pooled vectors (err %.1e)", n, worst);
    /* shorten: the first 8 components of a unit vector, of length 1 again. */
    float first8[8];
    memcpy(first8, all_vectors, sizeof first8);
    shorten(first8, 8, &mean);
    double norm = 0, scale = 0;
    for (int d = 0; d < 8; d++) norm += (double)first8[d] * first8[d], scale += (double)all_vectors[d] * all_vectors[d];
    CHECK(fabs(norm - 1) < 1e-6 && fabs(first8[3] - all_vectors[3] / sqrt(scale)) < 1e-6,
          "shorten: the first 8 components scaled to length 1");
    CHECK(embed_run(all_vectors, engine, inputs_ids, n, 2, dim, &mean, &g, always_gone, NULL) == EMBED_CANCELLED,
          "embed_run: a caller that has left cancels it");
    engine_drain(engine);
    CHECK(embed_run(all_vectors, engine, inputs_ids, n, 2, dim, &mean, &g, NULL, NULL) == EMBED_REFUSED,
          "embed_run: a draining engine takes no new request");
    for (int i = 0; i < n; i++) token_ids_free(&inputs_ids[i]);
    free(all_vectors);
    /* Without normalising, the mean of one token is its hidden state. */
    pool(v, hidden[2], 1, dim, &(Pooling){.mode = POOL_MEAN, .normalize = false});
    CHECK(memcmp(v, hidden[2], (size_t)dim * sizeof(float)) == 0, "a one-token mean, not normalised: the state itself");
    engine_stop(engine);
    engine_free(engine);
    for (int i = 0; i < n; i++) free(ids[i]), free(hidden[i]);
    free(v);
    model_free(&m);
    tokenizer_free(t);
}

static void test_pooling_files(const char *dir) {
    Pooling p;
    Error e;
    CHECK(pooling_load(&p, dir, &e) == 0 && p.mode == POOL_LAST && p.normalize, "no modules.json: the last token, normalised");
    write_file(dir, "modules.json",
               "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
               "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
               "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]");
    char *folder = path_join(dir, "1_Pooling");
    mkdir(folder, 0755);
    write_file(folder, "config.json", "{\"word_embedding_dimension\":64,\"pooling_mode_cls_token\":false,"
                                      "\"pooling_mode_mean_tokens\":true,\"pooling_mode_lasttoken\":false}");
    CHECK(pooling_load(&p, dir, &e) == 0 && p.mode == POOL_MEAN && p.normalize, "modules.json: mean, then Normalize");
    write_file(folder, "config.json", "{\"pooling_mode_cls_token\":true}");
    write_file(dir, "modules.json", "[{\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    CHECK(pooling_load(&p, dir, &e) == 0 && p.mode == POOL_CLS && !p.normalize, "CLS without Normalize: not normalised");
    write_file(folder, "config.json", "{\"pooling_mode_max_tokens\":true}");
    CHECK(pooling_load(&p, dir, &e) == -1 && strstr(e.msg, "pooling_mode_max_tokens is not supported"),
          "max pooling refused (%s)", e.msg);
    write_file(folder, "config.json", "{\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":true}");
    CHECK(pooling_load(&p, dir, &e) == -1 && strstr(e.msg, "found 2"), "two modes at once refused (%s)", e.msg);
    write_file(dir, "modules.json", "[{\"path\":\"../x\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    CHECK(pooling_load(&p, dir, &e) == -1 && strstr(e.msg, "no usable"), "a path out of the folder refused (%s)", e.msg);
    write_file(dir, "modules.json", "{\"broken\":");
    CHECK(pooling_load(&p, dir, &e) == -1 && strstr(e.msg, "modules.json"), "broken JSON refused, naming the file (%s)", e.msg);
    free(folder);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    char dir[600];
    snprintf(dir, sizeof dir, "%.500s/model", test_scratch("work-embed"));
    JsonDoc doc;
    test_json(&doc, "embed_golden.json");
    test_checkpoint(dir, json_get(&doc.root, "checkpoint")->string);
    test_vectors(&doc.root, dir);
    test_pooling_files(dir);
    json_free(&doc);
    return test_summary("test_embed");
}
