/* net.c - loading a Qwen2 checkpoint and running its forward pass. */
#include "net.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

/* ---- config.json ---- */

/* config[key] as an integer in [lo, hi]; `fallback` when absent (or an
 * error when fallback < lo, i.e. the field is required). */
static int config_int(const char *path, const JsonValue *root, const char *key, long long lo, long long hi,
                      long long fallback, int *out, Error *e) {
    const JsonValue *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) {
        if (fallback < lo) return fail(e, "%s: \"%s\" is missing", path, key);
        *out = (int)fallback;
        return 0;
    }
    if (v->type != JSON_NUMBER || !v->number.is_integer)
        return fail(e, "%s: \"%s\" must be an integer, not %s", path, key,
                    v->type == JSON_NUMBER ? "a fraction" : json_type_name(v->type));
    if (v->number.integer < lo || v->number.integer > hi)
        return fail(e, "%s: \"%s\" is %lld, outside [%lld, %lld]", path, key, (long long)v->number.integer, lo, hi);
    *out = (int)v->number.integer;
    return 0;
}

/* config[key] as a positive finite number below `hi`, or `fallback`. */
static int config_float(const char *path, const JsonValue *root, const char *key, double hi, double fallback,
                        float *out, Error *e) {
    const JsonValue *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) {
        *out = (float)fallback;
        return 0;
    }
    if (v->type != JSON_NUMBER) return fail(e, "%s: \"%s\" must be a number, not %s", path, key, json_type_name(v->type));
    if (!(v->number.value > 0 && v->number.value < hi))
        return fail(e, "%s: \"%s\" is %g, outside (0, %g)", path, key, v->number.value, hi);
    *out = (float)v->number.value;
    if (*out == 0) return fail(e, "%s: \"%s\" is %g, too small for a float (it would be 0)", path, key, v->number.value);
    return 0;
}

/* A string field that, when present, must have the one value run implements. */
static int config_expect(const char *path, const JsonValue *root, const char *key, const char *want, Error *e) {
    const JsonValue *v = json_get(root, key);
    if (v && (v->type != JSON_STRING || strcmp(v->string, want) != 0))
        return fail(e, "%s: \"%s\" must be \"%s\" (run implements Qwen2 only)", path, key, want);
    return 0;
}

/* eos_token_id: absent, one id, or a list of ids. */
int read_eos_ids(const char *path, const JsonValue *root, int ids[MAX_EOS_IDS], int *n_ids, Error *e) {
    const JsonValue *v = json_get(root, "eos_token_id");
    if (!v || v->type == JSON_NULL) return 0;
    const JsonValue *items = v->type == JSON_ARRAY ? v->items : v;
    size_t n = v->type == JSON_ARRAY ? v->len : 1;
    if (n > MAX_EOS_IDS) return fail(e, "%s: more than %d eos_token_id values", path, MAX_EOS_IDS);
    for (size_t i = 0; i < n; i++)
        if (items[i].type != JSON_NUMBER || !items[i].number.is_integer || items[i].number.integer < 0 ||
            items[i].number.integer > INT32_MAX)
            return fail(e, "%s: \"eos_token_id\" must be a token id or a list of them", path);
    for (size_t i = 0; i < n; i++) ids[i] = (int)items[i].number.integer;
    *n_ids = (int)n;
    return 0;
}

static int config_check(const char *path, const JsonValue *root, Config *c, Error *e) {
    if (root->type != JSON_OBJECT) return fail(e, "%s: not a JSON object", path);
    if (config_expect(path, root, "model_type", "qwen2", e) || config_expect(path, root, "hidden_act", "silu", e)) return -1;
    const JsonValue *scaling = json_get(root, "rope_scaling");
    if (scaling && scaling->type != JSON_NULL) return fail(e, "%s: \"rope_scaling\" is not supported", path);
    const JsonValue *sliding = json_get(root, "use_sliding_window");
    if (sliding && sliding->type == JSON_BOOL && sliding->boolean)
        return fail(e, "%s: sliding-window attention (\"use_sliding_window\": true) is not supported", path);
    if (config_int(path, root, "hidden_size", 1, 1 << 16, 0, &c->dim, e) ||
        config_int(path, root, "intermediate_size", 1, 1 << 20, 0, &c->hidden_dim, e) ||
        config_int(path, root, "num_hidden_layers", 1, 1024, 0, &c->n_layers, e) ||
        config_int(path, root, "num_attention_heads", 1, 1024, 0, &c->n_heads, e) ||
        config_int(path, root, "num_key_value_heads", 1, 1024, c->n_heads, &c->n_kv_heads, e) ||
        config_int(path, root, "vocab_size", 1, 1 << 24, 0, &c->vocab_size, e) ||
        config_int(path, root, "max_position_embeddings", 1, 1 << 24, 32768, &c->max_pos, e) ||
        config_float(path, root, "rope_theta", 1e30, 10000.0, &c->rope_theta, e) ||
        config_float(path, root, "rms_norm_eps", 1.0, 1e-6, &c->norm_eps, e))
        return -1;
    if (!json_get(root, "head_dim") && c->dim % c->n_heads != 0)
        return fail(e, "%s: hidden_size %d is not a multiple of num_attention_heads %d", path, c->dim, c->n_heads);
    if (config_int(path, root, "head_dim", 2, 4096, c->dim / c->n_heads, &c->head_dim, e)) return -1;
    if (c->head_dim % 2 != 0) return fail(e, "%s: head_dim %d is odd (RoPE rotates pairs)", path, c->head_dim);
    if (c->n_heads % c->n_kv_heads != 0)
        return fail(e, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, c->n_heads,
                    c->n_kv_heads);
    if ((long long)c->n_heads * c->head_dim > (1 << 20))
        return fail(e, "%s: num_attention_heads x head_dim is too large", path);
    const JsonValue *tie = json_get(root, "tie_word_embeddings");
    if (tie && tie->type != JSON_BOOL && tie->type != JSON_NULL)
        return fail(e, "%s: \"tie_word_embeddings\" must be true or false", path);
    c->tied_embeddings = tie && tie->type == JSON_BOOL && tie->boolean;
    if (config_int(path, root, "bos_token_id", -1, INT32_MAX, -1, &c->bos_id, e)) return -1;
    return read_eos_ids(path, root, c->eos_ids, &c->n_eos, e);
}

int config_parse(Config *c, const char *text, size_t len, const char *label, Error *e) {
    memset(c, 0, sizeof *c);
    JsonDoc doc;
    Error je;
    if (json_parse(&doc, text, len, &je) != 0) return fail(e, "%s: %s", label, je.msg);
    int rc = config_check(label, &doc.root, c, e);
    json_free(&doc);
    return rc;
}

int config_load(Config *c, const char *path, Error *e) {
    memset(c, 0, sizeof *c);
    JsonDoc doc;
    if (json_parse_file(&doc, path, e) != 0) return -1;
    int rc = config_check(path, &doc.root, c, e);
    json_free(&doc);
    return rc;
}

/* ---- weights ---- */

static WeightType weight_type_of(DType t) {
    return t == DTYPE_F32 ? WEIGHT_F32 : t == DTYPE_F16 ? WEIGHT_F16 : WEIGHT_BF16;
}

/* The tensor `name`, which must have shape [rows, cols] (cols 0: [rows]). */
static const Tensor *find_tensor(const Model *m, const char *name, int rows, int cols, Error *e) {
    const Tensor *t = st_find(&m->st, name);
    if (!t) {
        fail(e, "%s: tensor '%s' is missing", m->st.files[0].path, name);
        return NULL;
    }
    int ndim = cols ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != rows || (cols && t->shape[1] != cols)) {
        char got[128];
        if (cols) fail(e, "%s: tensor '%s' has shape %s, expected [%d, %d]", t->file, name, tensor_shape_text(t, got, sizeof got), rows, cols);
        else fail(e, "%s: tensor '%s' has shape %s, expected [%d]", t->file, name, tensor_shape_text(t, got, sizeof got), rows);
        return NULL;
    }
    return t;
}

/* A matrix as a view into the mapping, converted when another dtype is asked for. */
static int load_matrix(Model *m, const char *name, int rows, int cols, Matrix *out, Error *e) {
    const Tensor *t = find_tensor(m, name, rows, cols, e);
    if (!t) return -1;
    Matrix view = {weight_type_of(t->dtype), rows, cols, t->data, NULL, NULL};
    if (m->dtype == view.type) *out = view;
    else if (m->dtype == WEIGHT_Q8 && cols % Q8_BLOCK == 0) *out = matrix_to_q8(&view, m->pool);
    else if (m->dtype == WEIGHT_Q8) *out = view;  /* rows that don't split into blocks stay as stored */
    else *out = matrix_to_f32(&view, m->pool);
    return 0;
}

/* A small vector (a norm's weights, a bias) widened to floats; with
 * `optional`, a missing tensor gives NULL. */
static int load_vector(Model *m, const char *name, int n, bool optional, float **out, Error *e) {
    *out = NULL;
    if (optional && !st_find(&m->st, name)) return 0;
    const Tensor *t = find_tensor(m, name, n, 0, e);
    if (!t) return -1;
    Matrix view = {weight_type_of(t->dtype), 1, n, t->data, NULL, NULL};
    *out = xmalloc((size_t)n * sizeof(float));
    matrix_row(*out, &view, 0);
    return 0;
}

/* "model.layers.<l>.<suffix>", written into buf. */
static const char *layer_name(char *buf, int l, const char *suffix) {
    snprintf(buf, 128, "model.layers.%d.%s", l, suffix);
    return buf;
}

static int load_layer(Model *m, int l, LayerWeights *w, Error *e) {
    const Config *c = &m->config;
    int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    char n[128];
    if (load_vector(m, layer_name(n, l, "input_layernorm.weight"), c->dim, false, &w->attn_norm, e) ||
        load_matrix(m, layer_name(n, l, "self_attn.q_proj.weight"), q_dim, c->dim, &w->wq, e) ||
        load_matrix(m, layer_name(n, l, "self_attn.k_proj.weight"), kv_dim, c->dim, &w->wk, e) ||
        load_matrix(m, layer_name(n, l, "self_attn.v_proj.weight"), kv_dim, c->dim, &w->wv, e) ||
        load_vector(m, layer_name(n, l, "self_attn.q_proj.bias"), q_dim, true, &w->bq, e) ||
        load_vector(m, layer_name(n, l, "self_attn.k_proj.bias"), kv_dim, true, &w->bk, e) ||
        load_vector(m, layer_name(n, l, "self_attn.v_proj.bias"), kv_dim, true, &w->bv, e) ||
        load_matrix(m, layer_name(n, l, "self_attn.o_proj.weight"), c->dim, q_dim, &w->wo, e) ||
        load_vector(m, layer_name(n, l, "post_attention_layernorm.weight"), c->dim, false, &w->mlp_norm, e) ||
        load_matrix(m, layer_name(n, l, "mlp.gate_proj.weight"), c->hidden_dim, c->dim, &w->w_gate, e) ||
        load_matrix(m, layer_name(n, l, "mlp.up_proj.weight"), c->hidden_dim, c->dim, &w->w_up, e) ||
        load_matrix(m, layer_name(n, l, "mlp.down_proj.weight"), c->dim, c->hidden_dim, &w->w_down, e))
        return -1;
    return 0;
}

static int load_weights(Model *m, Error *e) {
    const Config *c = &m->config;
    TransformerWeights *w = &m->weights;
    if (load_matrix(m, "model.embed_tokens.weight", c->vocab_size, c->dim, &w->embed, e)) return -1;
    w->layers = xcalloc((size_t)c->n_layers, sizeof(LayerWeights));
    for (int l = 0; l < c->n_layers; l++)
        if (load_layer(m, l, &w->layers[l], e)) return -1;
    if (load_vector(m, "model.norm.weight", c->dim, false, &w->final_norm, e)) return -1;
    if (!c->tied_embeddings) return load_matrix(m, "lm_head.weight", c->vocab_size, c->dim, &w->lm_head, e);
    w->lm_head = w->embed;
    w->lm_head.owned = NULL;  /* the embedding matrix owns the memory */
    return 0;
}

static void free_weights(Model *m) {
    TransformerWeights *w = &m->weights;
    matrix_free(&w->embed);
    matrix_free(&w->lm_head);
    for (int l = 0; w->layers && l < m->config.n_layers; l++) {
        LayerWeights *lw = &w->layers[l];
        Matrix *mats[] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) matrix_free(mats[i]);
        free(lw->attn_norm);
        free(lw->mlp_norm);
        free(lw->bq);
        free(lw->bk);
        free(lw->bv);
    }
    free(w->layers);
    free(w->final_norm);
}

size_t model_weight_bytes(const Model *m) {
    const Config *c = &m->config;
    const TransformerWeights *w = &m->weights;
    size_t total = matrix_bytes(&w->embed) + (c->tied_embeddings ? 0 : matrix_bytes(&w->lm_head));
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        total += matrix_bytes(&lw->wq) + matrix_bytes(&lw->wk) + matrix_bytes(&lw->wv) + matrix_bytes(&lw->wo) +
                 matrix_bytes(&lw->w_gate) + matrix_bytes(&lw->w_up) + matrix_bytes(&lw->w_down);
    }
    return total;
}

/* ---- run state ---- */

/* Tokens per forward call: a prompt goes through in blocks of this many. */
#define BLOCK_TOKENS 128

/* Bytes of the KV cache for seq_len positions, or 0 on overflow. */
static size_t kv_bytes(const Config *c, int seq_len) {
    size_t n = 2 * sizeof(float);
    if (mul_size(n, (size_t)c->n_layers, &n) || mul_size(n, (size_t)c->n_kv_heads, &n) ||
        mul_size(n, (size_t)c->head_dim, &n) || mul_size(n, (size_t)seq_len, &n))
        return 0;
    return n;
}

size_t model_kv_bytes(const Model *m) { return kv_bytes(&m->config, m->seq_len); }

static void alloc_state(Model *m) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    size_t T = (size_t)(m->seq_len < BLOCK_TOKENS ? m->seq_len : BLOCK_TOKENS);
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t cache = (size_t)c->n_layers * kv_dim * (size_t)m->seq_len;
    s->max_tokens = (int)T;
    s->x = xcalloc(T * c->dim, sizeof(float));
    s->xb = xcalloc(T * c->dim, sizeof(float));
    s->q = xcalloc(T * q_dim, sizeof(float));
    s->k = xcalloc(T * kv_dim, sizeof(float));
    s->v = xcalloc(T * kv_dim, sizeof(float));
    s->att = xcalloc(T * q_dim, sizeof(float));
    s->out = xcalloc(T * c->dim, sizeof(float));
    s->gate = xcalloc(T * c->hidden_dim, sizeof(float));
    s->up = xcalloc(T * c->hidden_dim, sizeof(float));
    s->inv_freq = xcalloc((size_t)c->head_dim / 2, sizeof(float));
    s->rope_cos = xcalloc(T * c->head_dim / 2, sizeof(float));
    s->rope_sin = xcalloc(T * c->head_dim / 2, sizeof(float));
    s->scratch_floats = attend_scratch_floats(c->n_heads / c->n_kv_heads, ATTEND_QUERY_BLOCK, m->seq_len);
    s->scores = xcalloc((size_t)pool_size(m->pool) * s->scratch_floats, sizeof(float));
    s->key_cache = xcalloc(cache, sizeof(float));
    s->value_cache = xcalloc(cache, sizeof(float));
    s->logits_rows = 1;
    s->logits = xcalloc((size_t)c->vocab_size, sizeof(float));
    /* Pair j turns at theta^(-2j / head_dim) radians per position, computed
     * in float32 as transformers does. */
    for (int j = 0; j < c->head_dim / 2; j++) {
        float exponent = (float)(2 * j) / (float)c->head_dim;
        s->inv_freq[j] = 1.0f / (float)pow(c->rope_theta, exponent);
    }
}

static void free_state(RunState *s) {
    float *bufs[] = {s->x, s->xb, s->q, s->k, s->v, s->att, s->out, s->gate, s->up, s->inv_freq,
                     s->rope_cos, s->rope_sin, s->scores, s->key_cache, s->value_cache, s->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(s, 0, sizeof *s);
}

/* ---- loading ---- */

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The weights of MODEL: the .safetensors (or index) file given, or the
 * folder's model.safetensors, or its model.safetensors.index.json. */
static char *weights_path(const char *model, Error *e) {
    struct stat st;
    if (stat(model, &st) != 0) {
        fail(e, "%s: no such file or folder", model);
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) return xstrdup(model);
    char *single = path_join(model, "model.safetensors");
    if (is_file(single)) return single;
    free(single);
    char *index = path_join(model, "model.safetensors.index.json");
    if (is_file(index)) return index;
    free(index);
    fail(e, "%s: no model.safetensors or model.safetensors.index.json in this folder", model);
    return NULL;
}

static int parse_dtype_option(const char *name, WeightType stored, WeightType *out, Error *e) {
    if (!name) {
        *out = stored;
        return 0;
    }
    if (strcmp(name, "f32") == 0) *out = WEIGHT_F32;
    else if (strcmp(name, "q8") == 0) *out = WEIGHT_Q8;
    else if (strcmp(name, weight_type_name(stored)) == 0) *out = stored;
    else return fail(e, "--dtype %s: the weights are stored as %s; choose %s, f32 or q8", name, weight_type_name(stored), weight_type_name(stored));
    return 0;
}

/* Physical memory of the machine, in bytes. */
static size_t physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : SIZE_MAX;
}

int model_load(Model *m, const char *model, const ModelOptions *opt, Error *e) {
    memset(m, 0, sizeof *m);
    char *path = weights_path(model, e);
    if (!path) return -1;
    char *config_path = model_path(model, "config.json");
    int rc = config_load(&m->config, config_path, e);
    free(config_path);
    if (rc != 0) {
        free(path);
        return -1;
    }
    const Config *c = &m->config;

    m->seq_len = opt->context ? opt->context : (c->max_pos < 4096 ? c->max_pos : 4096);
    /* What grows with the context: the KV cache, and each thread's rows of
     * attention scores (one per query head of a key/value head). */
    int threads = opt->threads > 0 ? opt->threads : cpu_count();
    size_t kv = kv_bytes(c, m->seq_len),
           scores = (size_t)threads * attend_scratch_floats(c->n_heads / c->n_kv_heads, ATTEND_QUERY_BLOCK, m->seq_len) * sizeof(float);
    if (m->seq_len < 1 || m->seq_len > c->max_pos)
        rc = fail(e, "context %d is outside [1, %d] (max_position_embeddings)", m->seq_len, c->max_pos);
    else if (kv == 0 || kv + scores > physical_memory() / 2)
        rc = fail(e, "context %d needs %.1f GB (KV cache and attention scores), more than this machine can hold; "
                  "use a smaller -c", m->seq_len, kv ? (double)(kv + scores) / 1e9 : INFINITY);
    else
        rc = st_open(&m->st, path, e);
    free(path);
    if (rc != 0) return -1;
    const Tensor *embed = st_find(&m->st, "model.embed_tokens.weight");
    if (!embed) {
        fail(e, "%s: tensor 'model.embed_tokens.weight' is missing", m->st.files[0].path);
        st_close(&m->st);
        return -1;
    }
    if (parse_dtype_option(opt->dtype, weight_type_of(embed->dtype), &m->dtype, e) != 0) {
        st_close(&m->st);
        return -1;
    }
    m->pool = pool_new(threads);
    if (load_weights(m, e) != 0) {
        model_free(m);
        return -1;
    }
    alloc_state(m);
    return 0;
}

/* Reads one byte of every page of the mapped files. */
static void *touch_pages(void *arg) {
    const SafeTensors *st = arg;
    long page = sysconf(_SC_PAGESIZE);
    volatile unsigned char sink = 0;
    for (int f = 0; f < st->n_files; f++)
        for (size_t at = 0; at < st->files[f].size; at += (size_t)page) sink ^= ((const unsigned char *)st->files[f].map)[at];
    (void)sink;
    return NULL;
}

void model_warm_up(Model *m) {
    m->warming_up = pthread_create(&m->warm_up, NULL, touch_pages, &m->st) == 0;
}

static void wait_for_warm_up(Model *m) {
    if (m->warming_up) pthread_join(m->warm_up, NULL);
    m->warming_up = false;
}

void model_free(Model *m) {
    wait_for_warm_up(m);
    free_weights(m);
    free_state(&m->state);
    st_close(&m->st);
    pool_free(m->pool);
    memset(m, 0, sizeof *m);
}

/* ---- the forward pass ---- */

/* out = x / sqrt(mean(x^2) + eps) * weight, with the mean in double precision
 * as the reference takes it. */
static void rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double rms = sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = (float)(x[i] / rms) * weight[i];
}

static void add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

/* cos and sin of every pair's angle at the positions of the block. */
static void rope_tables(Model *m, int n, int pos) {
    RunState *s = &m->state;
    int half = m->config.head_dim / 2;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < half; j++) {
            float angle = (float)(pos + i) * s->inv_freq[j];
            s->rope_cos[i * half + j] = (float)cos(angle);
            s->rope_sin[i * half + j] = (float)sin(angle);
        }
}

/* Rotates each head's pairs (j, j + head_dim/2) by the position's angles:
 * the "half rotation" layout of Hugging Face's Qwen2. */
static void rope(float *v, int n_heads, int head_dim, const float *cos_, const float *sin_) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *x = v + h * head_dim;
        for (int j = 0; j < half; j++) {
            float a = x[j], b = x[j + half];
            x[j] = a * cos_[j] - b * sin_[j];
            x[j + half] = b * cos_[j] + a * sin_[j];
        }
    }
}

static float *cache_row(const Model *m, float *cache, int layer, int kv_head, int position) {
    const Config *c = &m->config;
    return cache + (((size_t)layer * c->n_kv_heads + kv_head) * m->seq_len + position) * c->head_dim;
}

typedef struct {
    const Model *m;
    int layer, n, pos;
} AttentionJob;

/* The work is cut into (key/value head, block of query tokens) items, split
 * between the threads: each item is one attend() over the cached keys and
 * values of that head. */
static void attention_task(void *arg, int thread, int n_threads) {
    const AttentionJob *job = arg;
    const Model *m = job->m;
    const Config *c = &m->config;
    const RunState *s = &m->state;
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    int blocks = (job->n + ATTEND_QUERY_BLOCK - 1) / ATTEND_QUERY_BLOCK;
    long items = (long)blocks * c->n_kv_heads;
    float *scratch = s->scores + (size_t)thread * s->scratch_floats;
    for (long item = items * thread / n_threads; item < items * (thread + 1) / n_threads; item++) {
        int h = (int)(item % c->n_kv_heads), first = (int)(item / c->n_kv_heads) * ATTEND_QUERY_BLOCK;
        int n_q = job->n - first < ATTEND_QUERY_BLOCK ? job->n - first : ATTEND_QUERY_BLOCK;
        size_t at = (size_t)first * c->n_heads * hd + (size_t)h * group * hd;
        attend(s->att + at, s->q + at, (size_t)c->n_heads * hd, n_q, job->pos + first,
               cache_row(m, s->key_cache, job->layer, h, 0), cache_row(m, s->value_cache, job->layer, h, 0), group, hd,
               scratch);
    }
}

/* "name [v0, v1, v2, v3] |v|=norm" for the -v trace. */
static void trace(const Model *m, int layer, const char *name, const float *v, int n) {
    if (!m->trace) return;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
    int show = m->trace_level > 1 ? 8 : 4;
    if (layer >= 0) fprintf(m->trace, "layer %2d ", layer);
    fprintf(m->trace, "%-10s [", name);
    for (int i = 0; i < show && i < n; i++) fprintf(m->trace, "%s%.6f", i ? ", " : "", v[i]);
    fprintf(m->trace, "%s] |%s|=%.6f\n", n > show ? ", ..." : "", name, sqrt(ss));
}

static void attention_block(Model *m, int l, int n, int pos) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    const LayerWeights *w = &m->weights.layers[l];
    int dim = c->dim, hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd, last = n - 1;

    /* Normalise, then project to queries, keys and values. */
    for (int i = 0; i < n; i++) rmsnorm(s->xb + (size_t)i * dim, s->x + (size_t)i * dim, w->attn_norm, dim, c->norm_eps);
    if (m->trace_level > 1) trace(m, l, "attn_norm", s->xb + (size_t)last * dim, dim);
    matmul(s->q, s->xb, &w->wq, n, m->pool);
    matmul(s->k, s->xb, &w->wk, n, m->pool);
    matmul(s->v, s->xb, &w->wv, n, m->pool);
    for (int i = 0; i < n; i++) {
        float *q = s->q + (size_t)i * q_dim, *k = s->k + (size_t)i * kv_dim, *v = s->v + (size_t)i * kv_dim;
        if (w->bq) add(q, w->bq, q_dim);
        if (w->bk) add(k, w->bk, kv_dim);
        if (w->bv) add(v, w->bv, kv_dim);
        /* Rotate queries and keys by their position, and append keys and
         * values to the cache. */
        rope(q, c->n_heads, hd, s->rope_cos + (size_t)i * hd / 2, s->rope_sin + (size_t)i * hd / 2);
        rope(k, c->n_kv_heads, hd, s->rope_cos + (size_t)i * hd / 2, s->rope_sin + (size_t)i * hd / 2);
        for (int h = 0; h < c->n_kv_heads; h++) {
            memcpy(cache_row(m, s->key_cache, l, h, pos + i), k + h * hd, (size_t)hd * sizeof(float));
            memcpy(cache_row(m, s->value_cache, l, h, pos + i), v + h * hd, (size_t)hd * sizeof(float));
        }
    }
    trace(m, l, "q", s->q + (size_t)last * q_dim, q_dim);
    trace(m, l, "k", s->k + (size_t)last * kv_dim, kv_dim);
    trace(m, l, "v", s->v + (size_t)last * kv_dim, kv_dim);

    /* Every query head attends over its position and all earlier ones. */
    AttentionJob job = {m, l, n, pos};
    pool_run(m->pool, attention_task, &job);
    if (m->trace_level > 1) trace(m, l, "attn_out", s->att + (size_t)last * q_dim, q_dim);

    /* The heads' outputs are mixed back into the residual stream. */
    matmul(s->out, s->att, &w->wo, n, m->pool);
    add(s->x, s->out, n * dim);
    trace(m, l, "x+attn", s->x + (size_t)last * dim, dim);
}

static void mlp_block(Model *m, int l, int n) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    const LayerWeights *w = &m->weights.layers[l];
    int dim = c->dim, hidden = c->hidden_dim, last = n - 1;

    /* Normalise, then the SwiGLU MLP: down(silu(gate(x)) * up(x)). */
    for (int i = 0; i < n; i++) rmsnorm(s->xb + (size_t)i * dim, s->x + (size_t)i * dim, w->mlp_norm, dim, c->norm_eps);
    if (m->trace_level > 1) trace(m, l, "mlp_norm", s->xb + (size_t)last * dim, dim);
    matmul(s->gate, s->xb, &w->w_gate, n, m->pool);
    matmul(s->up, s->xb, &w->w_up, n, m->pool);
    swiglu(s->gate, s->up, (size_t)n * hidden, m->pool);
    if (m->trace_level > 1) trace(m, l, "mlp_hidden", s->gate + (size_t)last * hidden, hidden);
    matmul(s->out, s->gate, &w->w_down, n, m->pool);
    add(s->x, s->out, n * dim);
    trace(m, l, "x+mlp", s->x + (size_t)last * dim, dim);
}

float *forward(Model *m, const int *tokens, int n, int pos, bool all_logits) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    int dim = c->dim;
    wait_for_warm_up(m);

    /* Each token's embedding starts its residual stream. */
    for (int i = 0; i < n; i++) matrix_row(s->x + (size_t)i * dim, &m->weights.embed, tokens[i]);
    if (m->trace_level > 1) trace(m, -1, "embedding", s->x + (size_t)(n - 1) * dim, dim);
    rope_tables(m, n, pos);

    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, l, n, pos);
        mlp_block(m, l, n);
    }

    /* The final norm and the output head turn the residual stream into
     * logits: of the last token only, unless every token's are wanted. */
    int first = all_logits ? 0 : n - 1, rows = n - first;
    if (rows > s->logits_rows) {
        free(s->logits);
        s->logits = xcalloc((size_t)rows * c->vocab_size, sizeof(float));
        s->logits_rows = rows;
    }
    for (int i = first; i < n; i++)
        rmsnorm(s->xb + (size_t)(i - first) * dim, s->x + (size_t)i * dim, m->weights.final_norm, dim, c->norm_eps);
    if (m->trace_level > 1) trace(m, -1, "final_norm", s->xb + (size_t)(rows - 1) * dim, dim);
    matmul(s->logits, s->xb, &m->weights.lm_head, rows, m->pool);
    return s->logits;
}

float *forward_prompt(Model *m, const int *tokens, int n, int pos) {
    float *logits = NULL;
    for (int done = 0; done < n; done += m->state.max_tokens) {
        int block = n - done < m->state.max_tokens ? n - done : m->state.max_tokens;
        logits = forward(m, tokens + done, block, pos + done, false);
    }
    return logits;
}
