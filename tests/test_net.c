/* test_net.c - the forward pass against reference logits, and its invariants.
 *
 * tests/data/forward_golden.json holds, for several checkpoint shapes, the
 * logits that the independent numpy reference (../shared/tools/ref_forward.py,
 * via scripts/make_golden.py) computes for 40 tokens. The checkpoints are
 * regenerated here by the same deterministic tool (tests/make_checkpoint).
 * Beyond matching the reference, the logits must be bit-identical whatever
 * the thread count, with --dtype f32, one token at a time or in a block, and
 * from a sharded copy of the checkpoint. KV caches of bf16 and q8_0: against
 * the reference fed keys and values rounded the same way
 * (tests/data/kv_cache_golden.json, scripts/make_kv_golden.py), and within a
 * bound of the exact logits; their sizes on paper. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../json.h"
#include "../net.h"
#include "test.h"

/* The approximate formats: the largest logit error we accept over the whole
 * vocabulary, relative to the largest exact logit. These small random
 * shapes, whose rows are only 2 to 8 blocks of 32 long, amplify rounding;
 * measured here: q8 (int8 weights and activations) up to 5.3e-2, q4 (its
 * embedding and head q8) up to 0.60, bf16 arithmetic up to 1.1e-2. On the
 * Qwen2.5-0.5B shape: 3.9e-2, 0.42 and 6.7e-3 (llama.cpp's Q8_0, Q4_0 and
 * BF16 give 3.7e-2, 0.50 and 6.7e-3). */
#define Q8_TOLERANCE 6.0e-2
#define Q4_TOLERANCE 0.65
#define BF16_MATH_TOLERANCE 2.0e-2

/* KV caches of bf16 and q8_0 against the exact logits, over the whole
 * vocabulary, relative to the largest exact logit: what the rounding of
 * keys and values costs (that it is that rounding and nothing else is
 * tested by test_kernels, and by test_kv_cache against the reference fed
 * the same rounded keys and values). Per value, bf16 errs by at most 2^-8
 * of it, as bf16 arithmetic rounds activations; q8_0 by half a step of its
 * block, max|x| / 254: about 1% of a typical value of a block of 32.
 * Measured here over every case: bf16 3.0e-3 to 1.0e-2 (MQA: 8 query heads
 * on one rounded key/value head), q8_0 1.2e-2 to 2.2e-2; on the
 * Qwen2.5-0.5B shape (random weights, 40 tokens, run fwd --logits) 4.5e-3
 * and 1.5e-2. */
#define KV_BF16_TOLERANCE 1.5e-2
#define KV_Q8_0_TOLERANCE 3.5e-2

static char work[512];

/* Logits of every position [n, vocab], feeding the tokens `block` at a
 * time, the passes watched by `probe` (or none). */
static float *run_logits_probed(const char *dir, ModelOptions opt, const int *tokens, int n, int block, const Probe *probe) {
    Model m;
    Error e;
    if (model_load(&m, dir, &opt, &e) != 0) {
        CHECK(0, "model_load %s: %s", dir, e.msg);
        return NULL;
    }
    m.probe = probe;
    size_t vocab = (size_t)m.config.vocab_size;
    float *all = xmalloc((size_t)n * vocab * sizeof(float));
    KVCache kv;
    kv_cache_init(&kv, &m, m.max_context);
    for (int done = 0; done < n; done += block) {
        int b = n - done < block ? n - done : block;
        const float *logits = forward(&m, &kv, tokens + done, b, done, true);
        memcpy(all + done * vocab, logits, (size_t)b * vocab * sizeof(float));
    }
    kv_cache_free(&kv);
    model_free(&m);
    return all;
}

static float *run_logits(const char *dir, ModelOptions opt, const int *tokens, int n, int block) {
    return run_logits_probed(dir, opt, tokens, n, block, NULL);
}

typedef struct {
    double rel_err;    /* max |got - want| / max |want| over the sampled logits */
    int argmax_agree;  /* positions whose argmax over the whole vocabulary agrees */
} Agreement;

/* The golden positions of a case: every one, or (long cases) every
 * "every"-th. */
static size_t golden_every(const JsonValue *c) {
    const JsonValue *every = json_get(c, "every");
    return every ? (size_t)every->number.integer : 1;
}

/* The logits against the golden `positions` of case c (its sampled ids,
 * every golden_every-th position). */
static Agreement compare(const JsonValue *c, const JsonValue *positions, const float *logits, int vocab) {
    const JsonValue *ids = json_get(c, "sample_ids");
    double max_abs = 0, max_diff = 0;
    Agreement a = {0, 0};
    for (size_t p = 0; p < positions->len; p++) {
        const JsonValue *pos = &positions->items[p], *want = json_get(pos, "logits");
        const float *row = logits + p * golden_every(c) * (size_t)vocab;
        max_abs = fmax(max_abs, json_get(pos, "max_abs")->number.value);
        for (size_t i = 0; i < ids->len; i++)
            max_diff = fmax(max_diff, fabs(row[ids->items[i].number.integer] - want->items[i].number.value));
        int best = 0;
        for (int id = 1; id < vocab; id++)
            if (row[id] > row[best]) best = id;
        a.argmax_agree += best == json_get(pos, "argmax")->number.integer;
    }
    a.rel_err = max_diff / max_abs;
    return a;
}

/* max |got - exact| / max |exact| over every logit. */
static double whole_vocabulary_error(const float *got, const float *exact, size_t n) {
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        max_diff = fmax(max_diff, fabs(got[i] - exact[i]));
        max_abs = fmax(max_abs, fabs(exact[i]));
    }
    return max_diff / max_abs;
}

/* ---- mixtures of experts: where rounding changes a route ---- */

/* The experts each token went to in each sparse layer: [layer][position][k],
 * most probable first. */
typedef struct {
    int n_layers, n, k;
    int *experts;
} Routes;

static void record_route(void *ctx, int layer, int pos, int n_tokens, int k, const int *experts, const float *weights) {
    (void)weights;
    Routes *r = ctx;
    for (int t = 0; t < n_tokens && pos + t < r->n; t++) {
        memcpy(r->experts + ((size_t)layer * r->n + pos + t) * k, experts + (size_t)t * k, (size_t)k * sizeof(int));
    }
}

/* Whether two routes have the same experts (the order of choice does not
 * change the output's terms). */
static bool same_experts(const int *a, const int *b, int k) {
    for (int i = 0; i < k; i++) {
        bool found = false;
        for (int j = 0; j < k; j++) found |= a[i] == b[j];
        if (!found) return false;
    }
    return true;
}

/* Logits, and the routes taken, of a checkpoint with experts. */
static float *run_routed(const char *dir, ModelOptions opt, const int *tokens, int n, const Config *c, Routes *r) {
    *r = (Routes){.n_layers = c->n_layers, .n = n, .k = c->moe.n_used};
    r->experts = xcalloc((size_t)c->n_layers * n * r->k, sizeof(int));
    Probe probe = {.ctx = r, .router = record_route};
    return run_logits_probed(dir, opt, tokens, n, 128, &probe);
}

/* The routes of the exact pass are the reference's, in its order (torch.topk's):
 * golden[sparse layer][position][k]. */
static void check_routes(const char *name, const Config *c, const Routes *r, const JsonValue *golden) {
    int agree = 0, all = 0, s = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!layer_is_sparse(c, l)) continue;
        const JsonValue *layer = &golden->items[s++];
        for (int p = 0; p < r->n; p++, all++) {
            const JsonValue *want = &layer->items[p];
            bool same = true;
            for (int j = 0; j < r->k; j++) same &= r->experts[((size_t)l * r->n + p) * r->k + j] == want->items[j].number.integer;
            agree += same;
        }
    }
    CHECK(s == (int)golden->len && agree == all, "%s: each token's experts are the reference's, in its order (%d/%d)", name,
          agree, all);
}

/* Whether position p took the same route in every layer. */
static bool same_route(const Routes *a, const Routes *b, int p) {
    for (int l = 0; l < a->n_layers; l++)
        if (!same_experts(a->experts + ((size_t)l * a->n + p) * a->k, b->experts + ((size_t)l * b->n + p) * b->k, a->k))
            return false;
    return true;
}

/* An approximate format (q8, q4, bf16 arithmetic) on a mixture of experts:
 * rounding may send a token whose best experts are close to another one,
 * a jump no tolerance bounds. So the logits must be within twice the
 * format's tolerance of the exact ones at the positions whose route did
 * not change - twice, for what reaches them through attention from those
 * that changed. Measured here: q8 and bf16 arithmetic keep 30 to 40 of the
 * 40 routes (errors up to 9.5e-2 and 2.0e-2), q4 21 to 28 (errors up to
 * 0.54), but 1 where 64 experts crowd the 8th place. */
static void check_routed(const char *name, const char *format, const char *dir, ModelOptions opt, const int *tokens, int n,
                         const Config *c, const float *exact, const Routes *exact_routes, double tolerance) {
    Routes r;
    float *got = run_routed(dir, opt, tokens, n, c, &r);
    double max_diff = 0, max_abs = 0;
    int same = 0;
    for (int p = 0; p < n; p++) {
        if (!same_route(exact_routes, &r, p)) continue;
        same++;
        for (size_t i = (size_t)p * c->vocab_size; i < (size_t)(p + 1) * c->vocab_size; i++) {
            max_diff = fmax(max_diff, fabs(got[i] - exact[i]));
            max_abs = fmax(max_abs, fabs(exact[i]));
        }
    }
    double err = max_abs > 0 ? max_diff / max_abs : 0;
    CHECK(same > 0 && err <= 2 * tolerance, "%s: %s logits within %.1e over the whole vocabulary at the %d/%d positions whose "
          "routes are the exact ones' (rel err %.2e)", name, format, 2 * tolerance, same, n, err);
    printf("%s: %s rel err %.2e over the whole vocabulary at the %d/%d positions whose routes are unchanged\n", name, format,
           err, same, n);
    free(got);
    free(r.experts);
}

/* ---- KV caches of bf16 and q8_0 ---- */

/* The logits with a KV cache of bf16, and of q8_0 where the head dim
 * allows, within their bounds of the exact ones. In a mixture of experts
 * (exact_routes not NULL) the rounding may send a token to other experts,
 * and every later token sees it: the positions before the first whose
 * route changed are compared (at least one: the first token attends only
 * to itself). */
static void check_kv_bound(const char *name, const char *dir, const int *tokens, int n, const Config *c, const float *exact,
                           const Routes *exact_routes) {
    KVType types[] = {KV_BF16, KV_Q8_0};
    double tolerances[] = {KV_BF16_TOLERANCE, KV_Q8_0_TOLERANCE};
    for (int i = 0; i < 2; i++) {
        if (!kv_type_fits(types[i], c->head_dim)) continue;
        ModelOptions opt = {.threads = 2, .cache_type_k = types[i], .cache_type_v = types[i]};
        Routes routes = {0};
        float *got = exact_routes ? run_routed(dir, opt, tokens, n, c, &routes) : run_logits(dir, opt, tokens, n, 128);
        int same = n;
        for (int p = 0; exact_routes && p < n && same == n; p++)
            if (!same_route(exact_routes, &routes, p)) same = p;
        if (got && same > 0) {
            double err = whole_vocabulary_error(got, exact, (size_t)same * c->vocab_size);
            CHECK(err <= tolerances[i], "%s: %s KV cache: logits within %.1e of the exact ones over the whole vocabulary at "
                  "positions 0..%d (rel err %.2e)", name, kv_type_name(types[i]), tolerances[i], same - 1, err);
            printf("%s: %s KV cache rel err %.2e over the whole vocabulary (positions 0..%d of %d)\n", name,
                   kv_type_name(types[i]), err, same - 1, n);
        }
        CHECK(got && same > 0, "%s: %s KV cache: logits, and a first position routed as exactly", name, kv_type_name(types[i]));
        free(got);
        free(routes.experts);
    }
}

static KVType kv_type_named(const char *name) {
    KVType t = KV_F32;
    Error e;
    CHECK(kv_type_parse(&t, name, &e) == 0, "kv_cache_golden.json: %s", e.msg);
    return t;
}

/* One entry of tests/data/kv_cache_golden.json: the logits of case c's
 * checkpoint with its keys and values held as the entry says, against the
 * reference fed keys and values rounded the same way (scripts/make_kv_golden.py).
 * The tolerance is 3x the entry's noise, or 1e-4 (the f32 path's) if more:
 * the noise is how far the rounded reference itself moves when its keys and
 * values move by 1e-6 of themselves before rounding (as run's, computed in
 * other orders, do): a value at a rounding boundary may go either way. The
 * exact logits must be farther than the tolerance, so that the comparison
 * tells the rounding from none. Then the same bits for any thread count and
 * block of tokens. */
static void test_kv_cache(const JsonValue *entry, const JsonValue *c) {
    const char *name = json_get(c, "name")->string;
    const char *key_name = json_get(entry, "key_type")->string, *value_name = json_get(entry, "value_type")->string;
    const JsonValue *tok = json_get(c, "tokens"), *positions = json_get(entry, "positions");
    int n = (int)tok->len;
    int *tokens = xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->items[i].number.integer;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", work, name);  /* written by test_case */
    Config cfg;
    Error e;
    char *config_path = model_path(dir, "config.json");
    CHECK(config_load(&cfg, config_path, &e) == 0, "%s: config loads", name);
    free(config_path);
    size_t bytes = (size_t)n * cfg.vocab_size * sizeof(float);
    ModelOptions opt = {.threads = 2, .cache_type_k = kv_type_named(key_name), .cache_type_v = kv_type_named(value_name)};
    float *logits = run_logits(dir, opt, tokens, n, 128), *exact = run_logits(dir, (ModelOptions){.threads = 2}, tokens, n, 128);
    if (logits && exact) {
        Agreement a = compare(c, positions, logits, cfg.vocab_size), f32 = compare(c, positions, exact, cfg.vocab_size);
        double tolerance = fmax(1e-4, 3 * json_get(entry, "noise")->number.value);
        CHECK(a.rel_err <= tolerance, "%s, keys %s, values %s: logits within %.1e of the reference fed the same rounded keys "
              "and values (rel err %.2e)", name, key_name, value_name, tolerance, a.rel_err);
        CHECK(f32.rel_err > tolerance, "%s, keys %s, values %s: the exact logits are farther from those (%.2e)", name, key_name,
              value_name, f32.rel_err);
        printf("%s, keys %s, values %s: rel err %.2e against the rounded reference (tolerance %.1e, argmax %d/%zu); %.2e from "
               "the exact logits\n", name, key_name, value_name, a.rel_err, tolerance, a.argmax_agree, positions->len,
               whole_vocabulary_error(logits, exact, (size_t)n * cfg.vocab_size));
        float *single = run_logits(dir, opt, tokens, n, 1), *sevens = run_logits(dir, opt, tokens, n, 7);
        ModelOptions one = opt, three = opt;
        one.threads = 1, three.threads = 3;
        float *t1 = run_logits(dir, one, tokens, n, 128), *t3 = run_logits(dir, three, tokens, n, 128);
        CHECK(single && sevens && t1 && t3 && memcmp(logits, single, bytes) == 0 && memcmp(logits, sevens, bytes) == 0 &&
                  memcmp(logits, t1, bytes) == 0 && memcmp(logits, t3, bytes) == 0,
              "%s, keys %s, values %s: the same bits 1 or 7 tokens at a time, with -t 1 and -t 3", name, key_name, value_name);
        free(single), free(sevens), free(t1), free(t3);
    }
    free(logits), free(exact), free(tokens);
}

/* Two sequences through caches of q8_0 keys and bf16 values in one pass:
 * each gets its logits alone (the server's slots), and a prompt continued
 * from a cache that holds its start (the prompt cache) gets what it gets
 * in one pass from position 0. */
static void test_kv_batch(const JsonValue *c) {
    const JsonValue *tok = json_get(c, "tokens");
    int tokens[64], n = (int)tok->len;
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->items[i].number.integer;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", work, json_get(c, "name")->string);  /* written by test_case */
    Model m;
    Error e;
    ModelOptions opt = {.threads = 2, .context = 64, .cache_type_k = KV_Q8_0, .cache_type_v = KV_BF16};
    if (model_load(&m, dir, &opt, &e) != 0) {
        CHECK(0, "kv batch: %s", e.msg);
        return;
    }
    size_t vocab = (size_t)m.config.vocab_size;
    KVCache alone[2], together[2];
    for (int i = 0; i < 2; i++) kv_cache_init(&alone[i], &m, 64), kv_cache_init(&together[i], &m, 64);
    CHECK(alone[0].key_type == KV_Q8_0 && alone[0].value_type == KV_BF16, "a model's caches take its types");
    forward(&m, &alone[1], tokens, 20, 0, false);
    forward(&m, &together[1], tokens, 20, 0, false);
    Chunk chunks[2] = {
        {.cache = &together[0], .tokens = tokens, .n_tokens = 25, .pos = 0, .all_logits = true},
        {.cache = &together[1], .tokens = tokens + 20, .n_tokens = 5, .pos = 20, .all_logits = true},
    };
    float *want = xmalloc(30 * vocab * sizeof(float));
    for (int i = 0; i < 2; i++) {
        const float *got = forward(&m, &alone[i], chunks[i].tokens, chunks[i].n_tokens, chunks[i].pos, true);
        memcpy(want + (i ? 25 : 0) * vocab, got, (size_t)chunks[i].n_tokens * vocab * sizeof(float));
    }
    const float *got = forward_batch(&m, chunks, 2);
    CHECK(memcmp(got, want, 30 * vocab * sizeof(float)) == 0, "%s, keys q8_0, values bf16: a batch of two sequences: each gets "
          "its logits alone", json_get(c, "name")->string);
    CHECK(memcmp(want + 20 * vocab, want + 25 * vocab, 5 * vocab * sizeof(float)) == 0,
          "keys q8_0, values bf16: a prompt continued from a kept cache = the same prompt in one pass from 0");
    for (int i = 0; i < 2; i++) kv_cache_free(&alone[i]), kv_cache_free(&together[i]);
    free(want);
    model_free(&m);
}

/* The KV cache of a 32k context on paper, worked out by hand:
 * Llama-3.1-8B: 32 layers x 8 key/value heads x 32768 positions, keys and
 * values, rows of 128 values: f32 512 bytes, bf16 256, q8_0 4 blocks of 34 =
 * 136; gemma-3-1b: 26 layers, 1 head of 256, 4 full layers of 32768 rows and
 * 22 sliding ones with a ring of 640 rows (window 512 - 1 + 128 tokens of a
 * pass, to whole tiles of 64): 145152 rows of 1024, 512 or 272 bytes. */
static void test_kv_memory(void) {
    const char *llama = "{\"model_type\": \"llama\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                        "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, "
                        "\"vocab_size\": 128256, \"max_position_embeddings\": 131072, \"rope_theta\": 500000.0}";
    const char *gemma = "{\"model_type\": \"gemma3_text\", \"hidden_size\": 1152, \"intermediate_size\": 6912, "
                        "\"num_hidden_layers\": 26, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 256, "
                        "\"vocab_size\": 262144, \"max_position_embeddings\": 32768, \"sliding_window\": 512, "
                        "\"sliding_window_pattern\": 6, \"query_pre_attn_scalar\": 256, \"rope_local_base_freq\": 10000.0, "
                        "\"hidden_activation\": \"gelu_pytorch_tanh\"}";
    Config c;
    Error e;
    if (config_parse(&c, llama, strlen(llama), "llama-3.1-8b", &e) != 0) {
        CHECK(0, "%s", e.msg);
        return;
    }
    size_t rows = 2ull * 32 * 8 * 32768;
    CHECK(kv_cache_bytes(&c, 32768, KV_F32, KV_F32) == rows * 512 && kv_cache_bytes(&c, 32768, KV_BF16, KV_BF16) == rows * 256 &&
              kv_cache_bytes(&c, 32768, KV_Q8_0, KV_Q8_0) == rows * 136 &&
              kv_cache_bytes(&c, 32768, KV_Q8_0, KV_F32) == rows / 2 * (136 + 512),
          "Llama-3.1-8B, 32k positions: KV cache f32 %zu, bf16 %zu, q8_0 %zu bytes", rows * 512, rows * 256, rows * 136);
    WeightPlan plan;
    weight_plan(&plan, &c, WEIGHT_BF16, WEIGHT_BF16);
    size_t gib24 = 24ull << 30;
    CHECK(plan.bytes + rows * 136 + (1ull << 30) < gib24, "Llama-3.1-8B: bf16 weights (%.2f GB) + a 32k q8_0 KV cache "
          "(%.2f GB) + 1 GB fit 24 GiB", plan.bytes / 1e9, rows * 136 / 1e9);
    if (config_parse(&c, gemma, strlen(gemma), "gemma-3-1b", &e) != 0) {
        CHECK(0, "%s", e.msg);
        return;
    }
    rows = 2ull * (4 * 32768 + 22 * 640);
    CHECK(kv_cache_ring(&c, 32768) == 640 && kv_cache_bytes(&c, 32768, KV_F32, KV_F32) == rows * 1024 &&
              kv_cache_bytes(&c, 32768, KV_BF16, KV_BF16) == rows * 512 && kv_cache_bytes(&c, 32768, KV_Q8_0, KV_Q8_0) == rows * 272,
          "gemma-3-1b, 32k positions: KV cache f32 %zu, bf16 %zu, q8_0 %zu bytes", rows * 1024, rows * 512, rows * 272);
}

static void test_case(const JsonValue *c) {
    const char *name = json_get(c, "name")->string, *args = json_get(c, "args")->string;
    const JsonValue *tok = json_get(c, "tokens");
    int n = (int)tok->len;
    int *tokens = xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->items[i].number.integer;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", work, name);
    test_checkpoint(dir, args);
    Config cfg;
    Error e;
    char *config_path = model_path(dir, "config.json");
    CHECK(config_load(&cfg, config_path, &e) == 0, "%s: config loads", name);
    free(config_path);
    size_t bytes = (size_t)n * cfg.vocab_size * sizeof(float);

    ModelOptions opt = {.threads = 2};
    float *logits = run_logits(dir, opt, tokens, n, 128);
    if (!logits) return;
    Agreement a = compare(c, json_get(c, "positions"), logits, cfg.vocab_size);
    CHECK(a.rel_err <= 1e-4, "%s: logits match the reference (rel err %.2e)", name, a.rel_err);
    int golden = (int)json_get(c, "positions")->len;
    CHECK(a.argmax_agree == golden, "%s: argmax agrees at %d/%d positions", name, a.argmax_agree, golden);
    printf("%s: rel err %.2e, argmax %d/%d\n", name, a.rel_err, a.argmax_agree, golden);

    /* The same numbers, bit for bit, however the work is divided. */
    float *one_at_a_time = run_logits(dir, opt, tokens, n, 1);
    CHECK(one_at_a_time && memcmp(logits, one_at_a_time, bytes) == 0, "%s: 1 token at a time = 40 at once", name);
    float *blocks_of_7 = run_logits(dir, opt, tokens, n, 7);
    CHECK(blocks_of_7 && memcmp(logits, blocks_of_7, bytes) == 0, "%s: blocks of 7 = 40 at once", name);
    int thread_counts[] = {1, 3};
    for (int i = 0; i < 2; i++) {
        ModelOptions t = {.threads = thread_counts[i]};
        float *other = run_logits(dir, t, tokens, n, 128);
        CHECK(other && memcmp(logits, other, bytes) == 0, "%s: -t %d gives identical logits", name, thread_counts[i]);
        free(other);
    }
    /* A mixture of experts: the routes of the exact pass, for the approximate formats. */
    bool moe = cfg.moe.n_experts > 0;
    Routes routes = {0};
    if (moe) {
        free(run_routed(dir, opt, tokens, n, &cfg, &routes));
        check_routes(name, &cfg, &routes, json_get(c, "routes"));
    }

    ModelOptions f32 = {.threads = 2, .dtype = DTYPE_AS_F32};
    float *converted = run_logits(dir, f32, tokens, n, 128);
    CHECK(converted && memcmp(logits, converted, bytes) == 0, "%s: --dtype f32 gives identical logits", name);

    /* q8 against the exact logits (which match the reference) over the
     * whole vocabulary; a model with no width that splits into blocks of 32
     * keeps every matrix as stored. */
    ModelOptions q8 = {.threads = 2, .dtype = DTYPE_AS_Q8};
    float *quantized = run_logits(dir, q8, tokens, n, 128);
    if (quantized && cfg.dim % QUANT_BLOCK != 0 && cfg.hidden_dim % QUANT_BLOCK != 0) {
        CHECK(memcmp(logits, quantized, bytes) == 0, "%s: q8 leaves matrices that do not split into blocks as stored", name);
    } else if (quantized && moe) {
        check_routed(name, "q8", dir, q8, tokens, n, &cfg, logits, &routes, Q8_TOLERANCE);
    } else if (quantized) {
        double err = whole_vocabulary_error(quantized, logits, (size_t)n * cfg.vocab_size);
        CHECK(err <= Q8_TOLERANCE, "%s: q8 logits within %.1e over the whole vocabulary (rel err %.2e)", name, Q8_TOLERANCE, err);
        printf("%s: q8 rel err %.2e over the whole vocabulary\n", name, err);
    }
    ModelOptions q4 = {.threads = 2, .dtype = DTYPE_AS_Q4};
    float *q4_logits = run_logits(dir, q4, tokens, n, 128);
    if (q4_logits && moe) {
        check_routed(name, "q4", dir, q4, tokens, n, &cfg, logits, &routes, Q4_TOLERANCE);
    } else if (q4_logits) {
        double err = whole_vocabulary_error(q4_logits, logits, (size_t)n * cfg.vocab_size);
        CHECK(err <= Q4_TOLERANCE, "%s: q4 logits within %.1e over the whole vocabulary (rel err %.2e)", name, Q4_TOLERANCE, err);
        printf("%s: q4 rel err %.2e over the whole vocabulary\n", name, err);
    }
    if (q4_logits) {
        float *single = run_logits(dir, q4, tokens, n, 1);
        CHECK(single && memcmp(q4_logits, single, bytes) == 0, "%s: q4, 1 token at a time = 40 at once", name);
        free(single);
    }
    ModelOptions bf16_math = {.threads = 3, .math = MATH_BF16};
    bool bf16_weights = !strstr(args, "--dtype");  /* make_checkpoint writes bf16 unless told otherwise */
    float *bf16_logits = bf16_weights ? run_logits(dir, bf16_math, tokens, n, 128) : NULL;
    if (bf16_logits && moe) {
        check_routed(name, "bf16 arithmetic", dir, bf16_math, tokens, n, &cfg, logits, &routes, BF16_MATH_TOLERANCE);
    } else if (bf16_logits) {
        double err = whole_vocabulary_error(bf16_logits, logits, (size_t)n * cfg.vocab_size);
        CHECK(err <= BF16_MATH_TOLERANCE, "%s: bf16 arithmetic within %.1e over the whole vocabulary (rel err %.2e)", name,
              BF16_MATH_TOLERANCE, err);
        printf("%s: bf16 arithmetic rel err %.2e over the whole vocabulary\n", name, err);
    }
    if (bf16_logits) {
        float *single = run_logits(dir, bf16_math, tokens, n, 1);
        CHECK(single && memcmp(bf16_logits, single, bytes) == 0, "%s: bf16 arithmetic, 1 token at a time = 40 at once", name);
        free(single);
    }
    check_kv_bound(name, dir, tokens, n, &cfg, logits, moe ? &routes : NULL);
    free(q4_logits);
    free(bf16_logits);
    free(tokens);
    free(logits);
    free(one_at_a_time);
    free(blocks_of_7);
    free(converted);
    free(quantized);
    free(routes.experts);
}

/* The same weights split over three shards give the same logits. */
static void test_sharded(const JsonValue *c) {
    const JsonValue *tok = json_get(c, "tokens");
    int n = (int)tok->len, tokens[64];
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->items[i].number.integer;
    char dir[1024], args[1024];
    snprintf(dir, sizeof dir, "%s/sharded", work);
    snprintf(args, sizeof args, "%s --shards 3", json_get(c, "args")->string);
    test_checkpoint(dir, args);
    ModelOptions opt = {.threads = 2};
    float *logits = run_logits(dir, opt, tokens, n, 128);
    if (!logits) return;
    Agreement a = compare(c, json_get(c, "positions"), logits, 2048);
    CHECK(a.rel_err <= 1e-4 && a.argmax_agree == (int)json_get(c, "positions")->len, "%s, sharded: matches the reference (rel err %.2e)",
          json_get(c, "name")->string, a.rel_err);
    free(logits);
}

/* A batch of three sequences at different positions - a prompt, a decoding
 * step, a prompt continuing a cached one - gives each exactly the logits it
 * gets alone. */
static void test_batch(const JsonValue *c) {
    const JsonValue *tok = json_get(c, "tokens");
    int tokens[64], n = (int)tok->len;
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->items[i].number.integer;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/batch", work);
    test_checkpoint(dir, json_get(c, "args")->string);
    Model m;
    Error e;
    ModelOptions opt = {.threads = 2, .context = 64};
    if (model_load(&m, dir, &opt, &e) != 0) {
        CHECK(0, "batch: %s", e.msg);
        return;
    }
    size_t vocab = (size_t)m.config.vocab_size;
    KVCache alone[3], together[3];
    for (int i = 0; i < 3; i++) kv_cache_init(&alone[i], &m, 64), kv_cache_init(&together[i], &m, 64);
    /* Sequence 1 and 2 have tokens in their caches already. */
    forward(&m, &alone[1], tokens, 20, 0, false);
    forward(&m, &together[1], tokens, 20, 0, false);
    forward(&m, &alone[2], tokens + 5, 9, 0, false);
    forward(&m, &together[2], tokens + 5, 9, 0, false);
    Chunk chunks[3] = {
        {.cache = &together[0], .tokens = tokens, .n_tokens = 17, .pos = 0, .all_logits = true},
        {.cache = &together[1], .tokens = tokens + 20, .n_tokens = 1, .pos = 20, .all_logits = false},
        {.cache = &together[2], .tokens = tokens + 30, .n_tokens = 6, .pos = 9, .all_logits = false},
    };
    float *want = xmalloc(19 * vocab * sizeof(float));
    for (int i = 0; i < 3; i++) {
        const float *got = forward(&m, &alone[i], chunks[i].tokens, chunks[i].n_tokens, chunks[i].pos, chunks[i].all_logits);
        size_t rows = i == 0 ? 17 : 1, at = i == 0 ? 0 : 16 + (size_t)i;
        memcpy(want + at * vocab, got, rows * vocab * sizeof(float));
    }
    const float *got = forward_batch(&m, chunks, 3);
    CHECK(memcmp(got, want, 19 * vocab * sizeof(float)) == 0, "%s: a batch of three sequences: each gets its logits alone",
          json_get(c, "name")->string);
    for (int i = 0; i < 3; i++) kv_cache_free(&alone[i]), kv_cache_free(&together[i]);
    free(want);
    model_free(&m);
}

/* ---- config.json and checkpoint errors ---- */

static const char *good_config =
    "{\"hidden_size\": 64, \"intermediate_size\": 176, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"vocab_size\": 151936, \"model_type\": \"qwen2\", %s}";

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* A config made of good_config with `extra` members (later ones win). */
static void config_refused(const char *extra, const char *want) {
    char text[2048], path[1024];
    snprintf(text, sizeof text, good_config, extra);
    snprintf(path, sizeof path, "%s/config.json", work);
    write_text(path, text);
    Config c;
    Error e = {{0}};
    CHECK(config_load(&c, path, &e) == -1 && strstr(e.msg, want) && strstr(e.msg, path),
          "config with %s refused: '%s' (got '%s')", extra, want, e.msg);
}

static void test_config(void) {
    char text[2048], path[1024];
    snprintf(path, sizeof path, "%s/config.json", work);
    snprintf(text, sizeof text, good_config, "\"eos_token_id\": [151645, 151643], \"head_dim\": 16, \"rope_theta\": 10000");
    write_text(path, text);
    Config c;
    Error e;
    CHECK(config_load(&c, path, &e) == 0, "good config loads");
    CHECK(c.dim == 64 && c.hidden_dim == 176 && c.n_layers == 2 && c.n_heads == 4 && c.n_kv_heads == 2 &&
              c.head_dim == 16 && c.vocab_size == 151936 && c.rope_theta == 10000.0f,
          "config fields read");
    CHECK(c.n_eos == 2 && c.eos_ids[0] == 151645 && c.eos_ids[1] == 151643, "eos id list read");
    CHECK(c.norm_eps == 1e-6f && c.max_pos == 32768 && !c.tied_embeddings && c.bos_id == -1, "defaults for absent fields");

    config_refused("\"hidden_size\": null", "\"hidden_size\" is missing");
    config_refused("\"num_attention_heads\": 0", "\"num_attention_heads\" is 0, outside [1, 1024]");
    config_refused("\"num_hidden_layers\": -2", "\"num_hidden_layers\" is -2");
    config_refused("\"vocab_size\": \"151936\"", "\"vocab_size\" must be an integer, not a string");
    config_refused("\"hidden_size\": 64.5", "must be an integer, not a fraction");
    config_refused("\"hidden_size\": 1000000000000", "outside [1, 65536]");
    config_refused("\"intermediate_size\": 99999999999999999999999", "must be an integer");
    config_refused("\"num_key_value_heads\": 3", "not a multiple of num_key_value_heads 3");
    config_refused("\"hidden_size\": 66", "hidden_size 66 is not a multiple of num_attention_heads 4");
    config_refused("\"head_dim\": 15", "head_dim 15 is odd");
    config_refused("\"model_type\": \"gemma2\"", "model_type \"gemma2\" is not supported");
    config_refused("\"hidden_act\": \"gelu\"", "\"hidden_act\" must be \"silu\"");
    config_refused("\"rope_scaling\": {\"type\": \"yarn\"}", "RoPE scaling \"yarn\" is not supported");
    config_refused("\"use_sliding_window\": true", "sliding-window");
    config_refused("\"rms_norm_eps\": -1", "\"rms_norm_eps\" is -1");
    config_refused("\"rope_theta\": \"big\"", "\"rope_theta\" must be a number");
    config_refused("\"rope_theta\": 1e-300", "\"rope_theta\" is 1e-300, too small for a float");
    config_refused("\"rms_norm_eps\": 1e-50", "\"rms_norm_eps\" is 1e-50, too small for a float");
    config_refused("\"tie_word_embeddings\": \"yes\"", "true or false");
    config_refused("\"eos_token_id\": [1, \"2\"]", "eos_token_id");
    /* qwen3_moe: the experts' fields, with transformers' defaults. */
    snprintf(text, sizeof text, good_config, "\"model_type\": \"qwen3_moe\", \"num_hidden_layers\": 6, \"num_experts\": 16, "
             "\"moe_intermediate_size\": 32, \"decoder_sparse_step\": 2, \"mlp_only_layers\": [3], \"norm_topk_prob\": true");
    write_text(path, text);
    CHECK(config_load(&c, path, &e) == 0 && c.arch == ARCH_QWEN3_MOE && c.qk_norm && c.moe.n_experts == 16 &&
              c.moe.n_used == 8 && c.moe.hidden_dim == 32 && c.moe.norm_topk_prob,
          "qwen3_moe config read");
    CHECK(!layer_is_sparse(&c, 0) && layer_is_sparse(&c, 1) && !layer_is_sparse(&c, 2) && !layer_is_sparse(&c, 3) &&
              layer_is_sparse(&c, 5),
          "qwen3_moe: every second layer sparse, but those in mlp_only_layers");
    snprintf(text, sizeof text, good_config, "\"model_type\": \"qwen3_moe\", \"num_experts\": 0");
    write_text(path, text);
    CHECK(config_load(&c, path, &e) == 0 && !layer_is_sparse(&c, 0) && !layer_is_sparse(&c, 1), "qwen3_moe with 0 experts: dense");
    config_refused("\"model_type\": \"qwen3_moe\", \"num_experts\": 4, \"num_experts_per_tok\": 5",
                   "num_experts_per_tok 5 is more than num_experts 4");
    config_refused("\"model_type\": \"qwen3_moe\", \"num_experts\": 4", "num_experts_per_tok 8 is more than num_experts 4");
    config_refused("\"model_type\": \"qwen3_moe\", \"mlp_only_layers\": [2]", "\"mlp_only_layers\" must hold layer numbers in [0, 2)");
    config_refused("\"model_type\": \"qwen3_moe\", \"mlp_only_layers\": 1", "\"mlp_only_layers\" must be a list");
    config_refused("\"model_type\": \"qwen3_moe\", \"decoder_sparse_step\": 0", "\"decoder_sparse_step\" is 0");
    config_refused("\"model_type\": \"qwen3_moe\", \"num_experts\": -1", "\"num_experts\" is -1");

    write_text(path, "{\"hidden_size\": 64,");
    CHECK(config_load(&c, path, &e) == -1 && strstr(e.msg, "line 1, column 20"), "config that is not JSON (%s)", e.msg);
    write_text(path, "[]");
    CHECK(config_load(&c, path, &e) == -1 && strstr(e.msg, "not a JSON object"), "config that is an array (%s)", e.msg);
    /* config_parse reads exactly len bytes and names the text by its label. */
    const char *partial = "{\"model_type\": \"qwen2\", \"hidden_size\": 64}, \"intermediate_size\": 176";
    CHECK(config_parse(&c, partial, 42, "memory", &e) == -1 && strcmp(e.msg, "memory: \"intermediate_size\" is missing") == 0,
          "config_parse of the first 42 bytes (%s)", e.msg);
}

/* Loading refuses a checkpoint that disagrees with its config. */
static void load_refused(const char *dir, const char *config_extra, ModelOptions opt, const char *want) {
    char text[2048], path[1024], extra[1024];
    snprintf(extra, sizeof extra, "\"tie_word_embeddings\": true, %s", config_extra);
    snprintf(text, sizeof text, good_config, extra);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, text);
    Model m;
    Error e = {{0}};
    CHECK(model_load(&m, dir, &opt, &e) == -1 && strstr(e.msg, want), "with %s, loading refused: '%s' (got '%s')",
          config_extra, want, e.msg);
}

static void test_load_errors(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/mismatch", work);
    test_checkpoint(dir, "--seed 9");
    ModelOptions opt = {.threads = 1};
    load_refused(dir, "\"num_hidden_layers\": 3", opt, "tensor 'model.layers.2.input_layernorm.weight' is missing");
    load_refused(dir, "\"intermediate_size\": 100", opt,
                 "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [176, 64], expected [100, 64]");
    load_refused(dir, "\"vocab_size\": 1000", opt, "'model.embed_tokens.weight' has shape [151936, 64], expected [1000, 64]");
    load_refused(dir, "\"tie_word_embeddings\": false", opt, "tensor 'lm_head.weight' is missing");
    load_refused(dir, "\"max_position_embeddings\": 100", (ModelOptions){.context = 200, .threads = 1}, "context of 200 positions is outside [1, 100]");
    load_refused(dir, "\"num_hidden_layers\": 1024, \"max_position_embeddings\": 16000000", (ModelOptions){.context = 16000000, .threads = 1},
                 "more than this machine can hold");
    load_refused(dir, "\"vocab_size\": 151936", (ModelOptions){.threads = 1, .dtype = DTYPE_AS_F16}, "the weights are stored as bf16: they can run as bf16, f32, q8 or q4, not f16");
    load_refused(dir, "\"vocab_size\": 151936", (ModelOptions){.threads = 1, .dtype = DTYPE_AS_Q8, .math = MATH_BF16}, "bf16 arithmetic needs bf16 weights (these run as q8)");
    load_refused(dir, "\"vocab_size\": 151936", (ModelOptions){.threads = 1, .cache_type_v = KV_Q8_0},
                 "a q8_0 KV cache needs head_dim to be a multiple of 32 (blocks of 32 values); this model's is 16: use f32 or bf16");
    load_refused(dir, "\"num_hidden_layers\": 1024, \"max_position_embeddings\": 16000000",
                 (ModelOptions){.context = 16000000, .threads = 1, .cache_type_k = KV_BF16, .cache_type_v = KV_BF16},
                 "more than this machine can hold");
    Model m;
    Error e;
    CHECK(model_load(&m, "build/no-such-model", &opt, &e) == -1 && strstr(e.msg, "no such file or folder"), "missing folder (%s)", e.msg);

    /* A mixture of experts whose config.json says other experts than it has. */
    snprintf(dir, sizeof dir, "%s/moe-mismatch", work);
    test_checkpoint(dir, "--set model_type='\"qwen3_moe\"' --set vocab_size=256 --set num_experts=4 --set num_experts_per_tok=2 "
                         "--set moe_intermediate_size=32");
    const char *moe = "\"model_type\": \"qwen3_moe\", \"vocab_size\": 256, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32";
    char extra[512];
    snprintf(extra, sizeof extra, "%s, \"num_experts\": 3", moe);
    load_refused(dir, extra, opt, "tensor 'model.layers.0.mlp.gate.weight' has shape [4, 64], expected [3, 64]");
    snprintf(extra, sizeof extra, "%s, \"num_experts\": 4, \"moe_intermediate_size\": 48", moe);
    load_refused(dir, extra, opt, "tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' has shape [32, 64], expected [48, 64]");
    snprintf(extra, sizeof extra, "%s, \"num_experts\": 4, \"mlp_only_layers\": [1]", moe);
    load_refused(dir, extra, opt, "tensor 'model.layers.1.mlp.gate_proj.weight' is missing");
    snprintf(extra, sizeof extra, "%s, \"num_experts\": 4, \"intermediate_size\": 176, \"decoder_sparse_step\": 2", moe);
    load_refused(dir, extra, opt, "tensor 'model.layers.0.mlp.gate_proj.weight' is missing");
    /* The memory check counts every expert, chosen or not: 2 layers x 65536
     * experts x 3 matrices x 1048576 x 64 bf16 values = 52776.6 GB. */
    snprintf(extra, sizeof extra, "%s, \"num_experts\": 65536, \"moe_intermediate_size\": 1048576", moe);
    load_refused(dir, extra, opt, "the weights take 52776.6 GB as bf16");
    snprintf(extra, sizeof extra, "\"model_type\": \"qwen3\", \"vocab_size\": 256");
    load_refused(dir, extra, opt, "tensor 'model.layers.0.mlp.gate_proj.weight' is missing");
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    snprintf(work, sizeof work, "%.400s", test_scratch("work-net"));

    unsigned long len;
    char *text = test_data("forward_golden.json", &len);
    JsonDoc doc;
    Error e;
    if (json_parse(&doc, text, len, &e) != 0) {
        printf("forward_golden.json: %s\n", e.msg);
        return 1;
    }
    const JsonValue *cases = json_get(&doc.root, "cases");
    for (size_t i = 0; i < cases->len; i++) test_case(&cases->items[i]);
    for (size_t i = 0; i < cases->len; i++) {
        const char *name = json_get(&cases->items[i], "name")->string;
        if (strcmp(name, "mha") == 0 || strcmp(name, "qwen3moe-top1-step2-untied") == 0 || strcmp(name, "gemma3-image-text") == 0 ||
            strcmp(name, "mistral-window-5") == 0)
            test_sharded(&cases->items[i]);
        if (strcmp(name, "llama-gqa-llama3-scaling") == 0 || strcmp(name, "qwen3moe-top8-of-64-bias") == 0 ||
            strcmp(name, "gemma3-mqa-softcaps-untied") == 0)
            test_batch(&cases->items[i]);
    }
    unsigned long kv_len;
    char *kv_text = test_data("kv_cache_golden.json", &kv_len);
    JsonDoc kv_doc;
    if (json_parse(&kv_doc, kv_text, kv_len, &e) != 0) {
        printf("kv_cache_golden.json: %s\n", e.msg);
        return 1;
    }
    const JsonValue *entries = json_get(&kv_doc.root, "entries");
    for (size_t i = 0; i < entries->len; i++) {
        const char *name = json_get(&entries->items[i], "name")->string;
        for (size_t j = 0; j < cases->len; j++)
            if (strcmp(json_get(&cases->items[j], "name")->string, name) == 0) test_kv_cache(&entries->items[i], &cases->items[j]);
    }
    for (size_t i = 0; i < cases->len; i++)
        if (strcmp(json_get(&cases->items[i], "name")->string, "qwen3-head-dim-32") == 0) test_kv_batch(&cases->items[i]);
    json_free(&kv_doc);
    free(kv_text);
    json_free(&doc);
    free(text);
    test_config();
    test_kv_memory();
    test_load_errors();
    return test_summary("test_net");
}
