/* net.c - loading a checkpoint's weights and running the transformer. */
#include "net.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tokens per forward call: a prompt goes through in blocks of this many. */
enum { BLOCK_TOKENS = 128 };

/* The context when none is asked for: the model's, up to this many positions. */
enum { DEFAULT_CONTEXT = 4096 };

/* ---- weights ---- */

static WeightType weight_type_of(DType t) {
    return t == DTYPE_F32 ? WEIGHT_F32 : t == DTYPE_F16 ? WEIGHT_F16 : WEIGHT_BF16;
}

/* Loading state: which of the checkpoint's tensors the model has used, so
 * that one it never uses (a sign of a misread architecture) is refused;
 * where the matrices come from and go. */
typedef struct {
    Model *m;
    bool *used;                /* [st.n_tensors] */
    PreparedFile *from;        /* the matrices are views into this prepared file, or NULL: laid out from the checkpoint */
    PreparedWriter *to;        /* the laid-out matrices are written here (and freed), or NULL */
    bool shapes_only;          /* only check every tensor's presence and shape: read no weight */
    bool prepared_failed;      /* the error came from the prepared file, not the checkpoint */
    size_t written, total;     /* bytes written to `to` so far, and in all */
    const ModelOptions *opt;   /* its progress callback */
} Loader;

/* The checkpoint's tensor of the language model's tensor `name`: an
 * image-text Gemma 3 keeps "model.X" as "language_model.model.X" (as
 * published) or "model.language_model.X" (as transformers 4.52 and later
 * save it), and "lm_head.weight" as "language_model.lm_head.weight" or as
 * it is. */
static const Tensor *find_language_tensor(const Model *m, const char *name) {
    if (!m->config.multimodal) return st_find(&m->st, name);
    char moved[256];
    bool in_model = strncmp(name, "model.", 6) == 0;
    snprintf(moved, sizeof moved, "language_model.%s", name);
    const Tensor *t = st_find(&m->st, moved);
    if (t || !in_model) return t ? t : st_find(&m->st, name);
    snprintf(moved, sizeof moved, "model.language_model.%s", name + 6);
    return st_find(&m->st, moved);
}

/* The tensor `name`, which must have shape [rows, cols] (cols 0: [rows]). */
static const Tensor *find_tensor(Loader *ld, const char *name, int rows, int cols, Error *e) {
    const SafeTensors *st = &ld->m->st;
    const Tensor *t = find_language_tensor(ld->m, name);
    if (!t) {
        fail(e, "%s: tensor '%s' is missing", st->files[0].path, name);
        return NULL;
    }
    int ndim = cols ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != rows || (cols && t->shape[1] != cols)) {
        char got[128];
        if (cols) fail(e, "%s: tensor '%s' has shape %s, expected [%d, %d]", t->file, name, tensor_shape_text(t, got, sizeof got), rows, cols);
        else fail(e, "%s: tensor '%s' has shape %s, expected [%d]", t->file, name, tensor_shape_text(t, got, sizeof got), rows);
        return NULL;
    }
    ld->used[t - st->tensors] = true;
    return t;
}

/* Whether a tensor is the embedding or the output head (kept q8 under q4),
 * or a router (kept as stored). */
static bool is_head(const char *name) { return strcmp(name, "model.embed_tokens.weight") == 0 || strcmp(name, "lm_head.weight") == 0; }
static bool is_router(const char *name) { return ends_with(name, ".mlp.gate.weight"); }

/* The format the matrix `name` of `cols` columns, stored as `stored`, runs
 * in when the model runs as `chosen`: the chosen one, but for rows that do
 * not split into blocks of 32 (they stay as stored under q8 and q4), the
 * embedding and the output head under q4 (q8: the logits are the most
 * sensitive to rounding, and a token's embedding row is read alone, not
 * streamed), and the routers of a mixture of experts (as stored under q8
 * and q4: they choose, and are small). */
static WeightType matrix_format(const char *name, int cols, WeightType stored, WeightType chosen) {
    bool quantized = chosen == WEIGHT_Q8 || chosen == WEIGHT_Q4;
    if (quantized && (cols % QUANT_BLOCK != 0 || is_router(name))) return stored;
    return chosen == WEIGHT_Q4 && is_head(name) ? WEIGHT_Q8 : chosen;
}

/* A matrix copied from the mapped checkpoint into the grouped layout the
 * products read (kernels.h) in the format `want`; the mapping's pages are
 * then given back. When a prepared file is being made, the copy goes into
 * it and is freed (the file is mapped once complete). */
static int lay_out(Loader *ld, const Tensor *t, const char *name, WeightType want, Matrix *out, Error *e) {
    ThreadPool *pool = ld->m->pool;
    Matrix view = {.type = weight_type_of(t->dtype), .rows = (int)t->shape[0], .cols = (int)t->shape[1], .data = t->data,
                   .math = MATH_EXACT, .layout = LAYOUT_ROWS};
    if (want == view.type) *out = matrix_grouped(&view, pool);
    else if (want == WEIGHT_Q8) *out = matrix_to_q8(&view, pool);
    else if (want == WEIGHT_Q4) *out = matrix_to_q4(&view, pool);
    else *out = matrix_to_f32(&view, pool);
    release_mapped(t->data, t->nbytes);
    if (!ld->to) return 0;
    int rc = prepared_add(ld->to, name, out, e);
    ld->written += matrix_bytes(out);
    matrix_free(out);
    *out = (Matrix){0};
    if (rc == 0 && ld->opt->progress) ld->opt->progress(ld->opt->progress_ctx, ld->to->path, (double)ld->written / (double)ld->total);
    return rc;
}

/* A matrix in the format matrix_format gives it: a view into the prepared
 * file, or laid out from the checkpoint. */
static int load_matrix(Loader *ld, const char *name, int rows, int cols, Matrix *out, Error *e) {
    const Tensor *t = find_tensor(ld, name, rows, cols, e);
    if (!t) return -1;
    Model *m = ld->m;
    WeightType want = matrix_format(name, cols, weight_type_of(t->dtype), m->dtype);
    if (ld->shapes_only) return 0;
    if (ld->from) {
        if (prepared_matrix(ld->from, name, want, rows, cols, out, e) != 0) return ld->prepared_failed = true, -1;
    } else if (lay_out(ld, t, name, want, out, e) != 0) {
        return -1;
    }
    /* bf16 arithmetic in the layers; the output head and the routers stay
     * exact: the head runs for one token per forward pass, so exactness
     * there costs nothing, and a router's choice is not to be rounded. */
    if (out->type == WEIGHT_BF16 && !is_head(name) && !is_router(name)) out->math = m->math;
    return 0;
}

/* A small vector (a norm's weights, a bias) widened to floats; when not
 * `present` (the architecture has no such tensor), NULL. */
static int load_vector(Loader *ld, const char *name, int n, bool present, float **out, Error *e) {
    *out = NULL;
    if (!present) return 0;
    const Tensor *t = find_tensor(ld, name, n, 0, e);
    if (!t) return -1;
    if (ld->shapes_only) return 0;
    Matrix view = {.type = weight_type_of(t->dtype), .rows = 1, .cols = n, .data = t->data, .math = MATH_EXACT,
                   .layout = LAYOUT_ROWS};
    *out = xmalloc((size_t)n * sizeof(float));
    matrix_row(*out, &view, 0);
    return 0;
}

/* A norm's weights w, as x / rms * weight takes them: w, or 1 + w for
 * Gemma's x / rms * (1 + w) (the sum in float32, as transformers has it). */
static int load_norm(Loader *ld, const char *name, int n, bool present, float **out, Error *e) {
    if (load_vector(ld, name, n, present, out, e)) return -1;
    for (int i = 0; *out && ld->m->config.norm_plus_one && i < n; i++) (*out)[i] += 1.0f;
    return 0;
}

/* "model.layers.<l>.<suffix>", written into buf. */
static const char *layer_name(char *buf, int l, const char *suffix) {
    snprintf(buf, 128, "model.layers.%d.%s", l, suffix);
    return buf;
}

/* A sparse layer's MLP: the router and every expert's three matrices. */
static int load_experts(Loader *ld, int l, LayerWeights *w, Error *e) {
    const Config *c = &ld->m->config;
    int E = c->moe.n_experts, hidden = c->moe.hidden_dim;
    MoeWeights *moe = w->moe = xcalloc(1, sizeof *moe);
    moe->experts = xcalloc((size_t)E, sizeof *moe->experts);
    char n[128], suffix[96];
    if (load_matrix(ld, layer_name(n, l, "mlp.gate.weight"), E, c->dim, &moe->router, e)) return -1;
    for (int x = 0; x < E; x++) {
        Expert *ex = &moe->experts[x];
        snprintf(suffix, sizeof suffix, "mlp.experts.%d.gate_proj.weight", x);
        if (load_matrix(ld, layer_name(n, l, suffix), hidden, c->dim, &ex->gate, e)) return -1;
        snprintf(suffix, sizeof suffix, "mlp.experts.%d.up_proj.weight", x);
        if (load_matrix(ld, layer_name(n, l, suffix), hidden, c->dim, &ex->up, e)) return -1;
        snprintf(suffix, sizeof suffix, "mlp.experts.%d.down_proj.weight", x);
        if (load_matrix(ld, layer_name(n, l, suffix), c->dim, hidden, &ex->down, e)) return -1;
    }
    return 0;
}

/* A dense layer's MLP. */
static int load_mlp(Loader *ld, int l, LayerWeights *w, Error *e) {
    const Config *c = &ld->m->config;
    char n[128];
    if (load_matrix(ld, layer_name(n, l, "mlp.gate_proj.weight"), c->hidden_dim, c->dim, &w->w_gate, e) ||
        load_matrix(ld, layer_name(n, l, "mlp.up_proj.weight"), c->hidden_dim, c->dim, &w->w_up, e) ||
        load_matrix(ld, layer_name(n, l, "mlp.down_proj.weight"), c->dim, c->hidden_dim, &w->w_down, e) ||
        load_vector(ld, layer_name(n, l, "mlp.gate_proj.bias"), c->hidden_dim, c->mlp_bias, &w->b_gate, e) ||
        load_vector(ld, layer_name(n, l, "mlp.up_proj.bias"), c->hidden_dim, c->mlp_bias, &w->b_up, e) ||
        load_vector(ld, layer_name(n, l, "mlp.down_proj.bias"), c->dim, c->mlp_bias, &w->b_down, e))
        return -1;
    return 0;
}

static int load_layer(Loader *ld, int l, LayerWeights *w, Error *e) {
    const Config *c = &ld->m->config;
    int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    bool sandwich = c->sandwich_norms;
    char n[128];
    if (load_norm(ld, layer_name(n, l, "input_layernorm.weight"), c->dim, true, &w->attn_norm, e) ||
        load_matrix(ld, layer_name(n, l, "self_attn.q_proj.weight"), q_dim, c->dim, &w->wq, e) ||
        load_matrix(ld, layer_name(n, l, "self_attn.k_proj.weight"), kv_dim, c->dim, &w->wk, e) ||
        load_matrix(ld, layer_name(n, l, "self_attn.v_proj.weight"), kv_dim, c->dim, &w->wv, e) ||
        load_vector(ld, layer_name(n, l, "self_attn.q_proj.bias"), q_dim, c->qkv_bias, &w->bq, e) ||
        load_vector(ld, layer_name(n, l, "self_attn.k_proj.bias"), kv_dim, c->qkv_bias, &w->bk, e) ||
        load_vector(ld, layer_name(n, l, "self_attn.v_proj.bias"), kv_dim, c->qkv_bias, &w->bv, e) ||
        load_norm(ld, layer_name(n, l, "self_attn.q_norm.weight"), c->head_dim, c->qk_norm, &w->q_norm, e) ||
        load_norm(ld, layer_name(n, l, "self_attn.k_norm.weight"), c->head_dim, c->qk_norm, &w->k_norm, e) ||
        load_matrix(ld, layer_name(n, l, "self_attn.o_proj.weight"), c->dim, q_dim, &w->wo, e) ||
        load_vector(ld, layer_name(n, l, "self_attn.o_proj.bias"), c->dim, c->o_bias, &w->bo, e) ||
        load_norm(ld, layer_name(n, l, "post_attention_layernorm.weight"), c->dim, true,
                  sandwich ? &w->attn_out_norm : &w->mlp_norm, e) ||
        (sandwich && load_norm(ld, layer_name(n, l, "pre_feedforward_layernorm.weight"), c->dim, true, &w->mlp_norm, e)) ||
        load_norm(ld, layer_name(n, l, "post_feedforward_layernorm.weight"), c->dim, sandwich, &w->mlp_out_norm, e))
        return -1;
    return layer_is_sparse(c, l) ? load_experts(ld, l, w, e) : load_mlp(ld, l, w, e);
}

/* Whether the tensor `name` is one run leaves unread as transformers does
 * (an untied lm_head.weight beside tied embeddings, RoPE's precomputed
 * inv_freq buffers) or an image-text checkpoint's vision tower. */
static bool ignored_tensor(const Model *m, const char *name) {
    const Config *c = &m->config;
    const Tensor *head = find_language_tensor(m, "lm_head.weight");
    if (c->tied_embeddings && head && strcmp(head->name, name) == 0) return true;
    if (ends_with(name, "rotary_emb.inv_freq")) return true;
    const char *vision[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."};
    for (size_t i = 0; c->multimodal && i < sizeof vision / sizeof vision[0]; i++)
        if (strncmp(name, vision[i], strlen(vision[i])) == 0) return true;
    return false;
}

/* Every tensor must have been used, but for those ignored_tensor names. */
static int check_all_used(Loader *ld, Error *e) {
    const SafeTensors *st = &ld->m->st;
    for (size_t i = 0; i < st->n_tensors; i++) {
        const char *name = st->tensors[i].name;
        if (!ld->used[i] && !ignored_tensor(ld->m, name))
            return fail(e, "%s: tensor '%s' is not part of a %s model with this config.json", st->tensors[i].file, name,
                        architecture_name(ld->m->config.arch));
    }
    return 0;
}

/* Every weight, through the loader ld (its `from` and `to` set). */
static int load_weights(Model *m, Loader *ld, Error *e) {
    const Config *c = &m->config;
    TransformerWeights *w = &m->weights;
    ld->m = m;
    ld->used = xcalloc(m->st.n_tensors, sizeof(bool));
    int rc = load_matrix(ld, "model.embed_tokens.weight", c->vocab_size, c->dim, &w->embed, e);
    w->layers = xcalloc((size_t)c->n_layers, sizeof(LayerWeights));
    for (int l = 0; rc == 0 && l < c->n_layers; l++) rc = load_layer(ld, l, &w->layers[l], e);
    if (rc == 0) rc = load_norm(ld, "model.norm.weight", c->dim, true, &w->final_norm, e);
    if (rc == 0 && !c->tied_embeddings) rc = load_matrix(ld, "lm_head.weight", c->vocab_size, c->dim, &w->lm_head, e);
    if (rc == 0 && c->tied_embeddings) {
        w->lm_head = w->embed;
        w->lm_head.owned = NULL;  /* the embedding matrix owns the memory */
    }
    if (rc == 0) rc = check_all_used(ld, e);
    if (rc == 0 && ld->from && prepared_check_end(ld->from, e) != 0) rc = -1, ld->prepared_failed = true;
    free(ld->used);
    return rc;
}

static void free_weights(Model *m) {
    TransformerWeights *w = &m->weights;
    matrix_free(&w->embed);
    matrix_free(&w->lm_head);
    for (int l = 0; w->layers && l < m->config.n_layers; l++) {
        LayerWeights *lw = &w->layers[l];
        Matrix *mats[] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) matrix_free(mats[i]);
        float *vecs[] = {lw->attn_norm, lw->mlp_norm, lw->bq, lw->bk, lw->bv, lw->q_norm, lw->k_norm, lw->bo,
                         lw->attn_out_norm, lw->mlp_out_norm, lw->b_gate, lw->b_up, lw->b_down};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) free(vecs[i]);
        if (lw->moe) moe_weights_free(lw->moe, &m->config);
        free(lw->moe);
    }
    free(w->layers);
    free(w->final_norm);
    memset(w, 0, sizeof *w);
}

size_t model_weight_bytes(const Model *m) {
    const Config *c = &m->config;
    const TransformerWeights *w = &m->weights;
    size_t total = matrix_bytes(&w->embed) + (c->tied_embeddings ? 0 : matrix_bytes(&w->lm_head));
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        total += matrix_bytes(&lw->wq) + matrix_bytes(&lw->wk) + matrix_bytes(&lw->wv) + matrix_bytes(&lw->wo) +
                 matrix_bytes(&lw->w_gate) + matrix_bytes(&lw->w_up) + matrix_bytes(&lw->w_down) +
                 (lw->moe ? moe_weight_bytes(lw->moe, c) : 0);
    }
    return total;
}

/* ---- the weights on paper ---- */

/* Adds a rows x cols matrix `name` to the plan: its bytes in the format it
 * runs in, its parameters; `read` says whether a decoded token reads it. */
static void plan_matrix(WeightPlan *p, const char *name, int rows, int cols, WeightType stored, WeightType type, bool read) {
    Matrix m = {.type = matrix_format(name, cols, stored, type), .rows = rows, .cols = cols, .layout = LAYOUT_GROUPED};
    size_t bytes = matrix_bytes(&m);
    double params = (double)rows * cols;
    p->bytes += bytes;
    p->params += params;
    p->bytes_per_token += read ? bytes : 0;
    p->active_params += read ? params : 0;
}

void weight_plan(WeightPlan *p, const Config *c, WeightType stored, WeightType type) {
    *p = (WeightPlan){0};
    int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    char n[128], suffix[96];
    /* The embedding: a token reads one row of it, unless it is the head too;
     * its parameters count as active (as a model's "A3B" counts them). */
    plan_matrix(p, "model.embed_tokens.weight", c->vocab_size, c->dim, stored, type, c->tied_embeddings);
    if (!c->tied_embeddings) p->active_params += (double)c->vocab_size * c->dim;
    for (int l = 0; l < c->n_layers; l++) {
        plan_matrix(p, "q_proj", q_dim, c->dim, stored, type, true);
        plan_matrix(p, "k_proj", kv_dim, c->dim, stored, type, true);
        plan_matrix(p, "v_proj", kv_dim, c->dim, stored, type, true);
        plan_matrix(p, "o_proj", c->dim, q_dim, stored, type, true);
        if (!layer_is_sparse(c, l)) {
            plan_matrix(p, "gate_proj", c->hidden_dim, c->dim, stored, type, true);
            plan_matrix(p, "up_proj", c->hidden_dim, c->dim, stored, type, true);
            plan_matrix(p, "down_proj", c->dim, c->hidden_dim, stored, type, true);
            continue;
        }
        plan_matrix(p, layer_name(n, l, "mlp.gate.weight"), c->moe.n_experts, c->dim, stored, type, true);
        for (int x = 0; x < c->moe.n_experts; x++) {
            bool chosen = x < c->moe.n_used;  /* a token reads n_used of them */
            snprintf(suffix, sizeof suffix, "mlp.experts.%d", x);
            plan_matrix(p, layer_name(n, l, suffix), c->moe.hidden_dim, c->dim, stored, type, chosen);
            plan_matrix(p, n, c->moe.hidden_dim, c->dim, stored, type, chosen);
            plan_matrix(p, n, c->dim, c->moe.hidden_dim, stored, type, chosen);
        }
    }
    if (!c->tied_embeddings) plan_matrix(p, "lm_head.weight", c->vocab_size, c->dim, stored, type, true);
}

/* ---- the KV cache and the scratch space ---- */

int kv_cache_ring(const Config *c, int capacity) {
    if (c->sliding_window == 0) return capacity;
    long rows = (long)c->sliding_window - 1 + BLOCK_TOKENS;
    rows = (rows + ATTEND_KEY_BLOCK - 1) / ATTEND_KEY_BLOCK * ATTEND_KEY_BLOCK;
    return rows < capacity ? (int)rows : capacity;
}

/* The rows of layer l in a cache of `capacity` positions, and the rows of
 * the layers before it. */
static int layer_rows(const Config *c, int capacity, int ring, int l) { return layer_is_sliding(c, l) ? ring : capacity; }

static size_t rows_before(const Config *c, int capacity, int ring, int l) {
    size_t rows = 0;
    for (int i = 0; i < l; i++) rows += (size_t)layer_rows(c, capacity, ring, i);
    return rows;
}

/* Bytes of the keys (or the values) of a cache of `capacity` positions held as t. */
static size_t kv_half_bytes(const Config *c, int capacity, KVType t) {
    size_t n = kv_row_bytes(t, c->head_dim);
    if (mul_size(n, rows_before(c, capacity, kv_cache_ring(c, capacity), c->n_layers), &n) ||
        mul_size(n, (size_t)c->n_kv_heads, &n))
        return SIZE_MAX;
    return n;
}

size_t kv_cache_bytes(const Config *c, int capacity, KVType key_type, KVType value_type) {
    size_t keys = kv_half_bytes(c, capacity, key_type), values = kv_half_bytes(c, capacity, value_type);
    return keys < SIZE_MAX - values ? keys + values : SIZE_MAX;
}

void kv_cache_init(KVCache *kv, const Model *m, int capacity) {
    kv->key_type = m->cache_type_k;
    kv->value_type = m->cache_type_v;
    kv->keys = xcalloc(kv_half_bytes(&m->config, capacity, kv->key_type), 1);
    kv->values = xcalloc(kv_half_bytes(&m->config, capacity, kv->value_type), 1);
    kv->capacity = capacity;
    kv->ring = kv_cache_ring(&m->config, capacity);
}

int kv_cache_reusable(const Model *m, const KVCache *kv, int filled, int keep) {
    const Config *c = &m->config;
    if (kv->ring == kv->capacity) return keep;
    /* The ring holds positions filled - ring .. filled - 1; the tokens from
     * `keep` on need the window before it. */
    int needed = keep - c->sliding_window + 1 > 0 ? keep - c->sliding_window + 1 : 0;
    return filled - kv->ring <= needed ? keep : 0;
}

void kv_cache_free(KVCache *kv) {
    free(kv->keys);
    free(kv->values);
    memset(kv, 0, sizeof *kv);
}

static void alloc_state(Model *m) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    size_t T = BLOCK_TOKENS, q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    s->max_tokens = (int)T;
    s->x = xcalloc_aligned(T * c->dim, sizeof(float));
    s->xb = xcalloc_aligned(T * c->dim, sizeof(float));
    s->q = xcalloc_aligned(T * q_dim, sizeof(float));
    s->k = xcalloc_aligned(T * kv_dim, sizeof(float));
    s->v = xcalloc_aligned(T * kv_dim, sizeof(float));
    s->att = xcalloc_aligned(T * q_dim, sizeof(float));
    s->out = xcalloc_aligned(T * c->dim, sizeof(float));
    s->gate = xcalloc_aligned(T * c->hidden_dim, sizeof(float));
    s->up = xcalloc_aligned(T * c->hidden_dim, sizeof(float));
    s->inv_freq = xcalloc_aligned((size_t)c->head_dim / 2, sizeof(float));
    s->rope_cos = xcalloc_aligned(T * c->head_dim / 2, sizeof(float));
    s->rope_sin = xcalloc_aligned(T * c->head_dim / 2, sizeof(float));
    if (c->rope_local_theta > 0) {
        s->local_inv_freq = xcalloc_aligned((size_t)c->head_dim / 2, sizeof(float));
        s->local_cos = xcalloc_aligned(T * c->head_dim / 2, sizeof(float));
        s->local_sin = xcalloc_aligned(T * c->head_dim / 2, sizeof(float));
        rope_frequencies(s->local_inv_freq, c, true);
    }
    s->scratch_floats = attend_scratch_floats(c->n_heads / c->n_kv_heads, ATTEND_QUERY_BLOCK, c->head_dim);
    s->scratch = xcalloc_aligned((size_t)pool_size(m->pool) * s->scratch_floats, sizeof(float));
    s->logits_rows = 1;
    s->logits = xcalloc_aligned((size_t)c->vocab_size, sizeof(float));
    rope_frequencies(s->inv_freq, c, false);
    if (c->moe.n_experts > 0) moe_scratch_init(&s->moe, c, (int)T);
}

static void free_state(RunState *s) {
    float *bufs[] = {s->x, s->xb, s->q, s->k, s->v, s->att, s->out, s->gate, s->up, s->inv_freq,
                     s->rope_cos, s->rope_sin, s->local_inv_freq, s->local_cos, s->local_sin, s->scratch, s->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) xfree_aligned(bufs[i]);
    moe_scratch_free(&s->moe);
    memset(s, 0, sizeof *s);
}

/* ---- loading ---- */

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A file given as MODEL must be the weights: a single .safetensors file or
 * the index of shards, not another file of the folder or one shard. */
static int check_weights_file(const char *path, Error *e) {
    if (ends_with(path, ".gguf"))
        return fail(e, "%s is a GGUF file (llama.cpp's format), which run does not read: pass a Hugging Face checkpoint "
                    "folder (config.json, *.safetensors, tokenizer.json)", path);
    if (ends_with(path, ".json") && !ends_with(path, "model.safetensors.index.json"))
        return fail(e, "%s: pass the checkpoint folder that holds it, not one of its files", path);
    char *index = model_path(path, "model.safetensors.index.json");
    bool sharded = ends_with(path, ".safetensors") && is_file(index);
    free(index);
    if (sharded) return fail(e, "%s is one shard of a sharded checkpoint: pass the folder that holds it", path);
    return 0;
}

/* The weights of MODEL: the .safetensors (or index) file given, or the
 * folder's model.safetensors, or its model.safetensors.index.json. */
static char *weights_path(const char *model, Error *e) {
    struct stat st;
    if (stat(model, &st) != 0) {
        fail(e, "%s: no such file or folder", model);
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) return check_weights_file(model, e) == 0 ? xstrdup(model) : NULL;
    char *single = path_join(model, "model.safetensors");
    if (is_file(single)) return single;
    free(single);
    char *index = path_join(model, "model.safetensors.index.json");
    if (is_file(index)) return index;
    free(index);
    fail(e, "%s: no model.safetensors or model.safetensors.index.json in this folder", model);
    return NULL;
}

/* The format to run the big matrices in: as stored, or a conversion. */
static int choose_dtype(DTypeChoice choice, WeightType stored, WeightType *out, Error *e) {
    static const WeightType chosen[] = {[DTYPE_AS_BF16] = WEIGHT_BF16, [DTYPE_AS_F16] = WEIGHT_F16, [DTYPE_AS_F32] = WEIGHT_F32,
                                        [DTYPE_AS_Q8] = WEIGHT_Q8, [DTYPE_AS_Q4] = WEIGHT_Q4};
    *out = choice == DTYPE_AS_STORED ? stored : chosen[choice];
    /* Half precisions are only run as stored: converting one into the other would round. */
    bool half = *out == WEIGHT_BF16 || *out == WEIGHT_F16;
    if (half && *out != stored)
        return fail(e, "the weights are stored as %s: they can run as %s, f32, q8 or q4, not %s", weight_type_name(stored),
                    weight_type_name(stored), weight_type_name(*out));
    return 0;
}

/* The weights in the chosen format (every expert of a mixture: all are
 * loaded) and the KV cache must fit in this machine's memory. */
static int check_memory(const Model *m, WeightType stored, Error *e) {
    WeightPlan plan;
    weight_plan(&plan, &m->config, stored, m->dtype);
    size_t kv = kv_cache_bytes(&m->config, m->max_context, m->cache_type_k, m->cache_type_v), limit = memory_limit();
    if (plan.bytes < limit && kv < limit - plan.bytes) return 0;
    return fail(e, "the weights take %.1f GB as %s and the KV cache %.1f GB (context %d, keys %s, values %s): more than the "
                "%.1f GB this machine can hold", (double)plan.bytes / 1e9, weight_type_name(m->dtype), (double)kv / 1e9,
                m->max_context, kv_type_name(m->cache_type_k), kv_type_name(m->cache_type_v), (double)limit / 1e9);
}

int model_open(Model *m, const char *model, const ModelOptions *opt, Error *e) {
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
    m->weights_path = path;

    m->max_context = opt->context ? opt->context : (c->max_pos < DEFAULT_CONTEXT ? c->max_pos : DEFAULT_CONTEXT);
    m->cache_type_k = opt->cache_type_k;
    m->cache_type_v = opt->cache_type_v;
    size_t kv = kv_cache_bytes(c, m->max_context, m->cache_type_k, m->cache_type_v);
    const Tensor *embed = NULL;
    if (m->max_context < 1 || m->max_context > c->max_pos)
        rc = fail(e, "a context of %d positions is outside [1, %d] (max_position_embeddings)", m->max_context, c->max_pos);
    else if (!kv_type_fits(m->cache_type_k, c->head_dim) || !kv_type_fits(m->cache_type_v, c->head_dim))
        rc = fail(e, "a q8_0 KV cache needs head_dim to be a multiple of %d (blocks of %d values); this model's is %d: "
                  "use f32 or bf16", QUANT_BLOCK, QUANT_BLOCK, c->head_dim);
    else if (kv > memory_limit() / 2)
        rc = fail(e, "a KV cache for a context of %d positions takes %.1f GB, more than this machine can hold",
                  m->max_context, kv == SIZE_MAX ? INFINITY : (double)kv / 1e9);
    else if (st_open(&m->st, path, e) != 0)
        rc = -1;
    else if (!(embed = find_language_tensor(m, "model.embed_tokens.weight")))
        rc = fail(e, "%s: tensor '%smodel.embed_tokens.weight' is missing", m->st.files[0].path,
                  c->multimodal ? "language_model." : "");
    else if (choose_dtype(opt->dtype, weight_type_of(embed->dtype), &m->dtype, e) != 0)
        rc = -1;
    else if (opt->math == MATH_BF16 && m->dtype != WEIGHT_BF16)
        rc = fail(e, "bf16 arithmetic needs bf16 weights (these run as %s)", weight_type_name(m->dtype));
    else if (check_memory(m, weight_type_of(embed->dtype), e) != 0)
        rc = -1;
    m->stored = embed ? weight_type_of(embed->dtype) : WEIGHT_BF16;
    m->math = opt->math;
    if (rc == 0) {
        /* Every tensor the architecture needs, of the right shape, and no other. */
        Loader ld = {.shapes_only = true, .opt = opt};
        rc = load_weights(m, &ld, e);
        free_weights(m);
    }
    if (rc != 0) model_free(m);
    return rc;
}

/* The matrices laid out in memory, with the reason in m->prepared_note. */
static int load_in_memory(Model *m, const ModelOptions *opt, const char *reason, Error *e) {
    fail(&m->prepared_note, "%.400s: the weights are laid out in memory", reason);
    Loader ld = {.opt = opt};
    return load_weights(m, &ld, e);
}

/* The weights through the prepared file: mapped when it is there and up to
 * date, else made first (each matrix laid out, written and freed) and then
 * mapped; laid out in memory when it cannot be written. */
static int load_prepared(Model *m, const ModelOptions *opt, Error *e) {
    uint64_t key = prepared_key(&m->st);
    Error why;
    int found = prepared_find(&m->prepared, m->weights_path, key, m->dtype, &why);
    if (found == 0) {
        Loader ld = {.from = &m->prepared, .opt = opt};
        int rc = load_weights(m, &ld, e);
        if (rc == 0 || !ld.prepared_failed) return rc;
        /* A table that does not fit the checkpoint: made again. */
        why = *e;
        found = -1;
        free_weights(m);
        prepared_close(&m->prepared);
    }
    if (found < 0) fail(&m->prepared_note, "%.400s: made again", why.msg);

    WeightPlan plan;
    weight_plan(&plan, &m->config, m->stored, m->dtype);
    PreparedWriter w;
    if (prepared_create(&w, m->weights_path, key, m->dtype, plan.bytes, &why) != 0) return load_in_memory(m, opt, why.msg, e);
    Loader ld = {.to = &w, .opt = opt, .total = plan.bytes};
    int rc = load_weights(m, &ld, e);
    free_weights(m);
    if (rc != 0) {
        prepared_abandon(&w);
        return ld.prepared_failed ? load_in_memory(m, opt, e->msg, e) : -1;
    }
    if (prepared_commit(&w, &why) != 0) return load_in_memory(m, opt, why.msg, e);
    if (prepared_find(&m->prepared, m->weights_path, key, m->dtype, e) != 0) return -1;
    m->prepared.made_now = true;
    Loader again = {.from = &m->prepared, .opt = opt};
    return load_weights(m, &again, e);
}

static void map_pages_part(void *arg, int part, int n_parts) { prepared_map_pages(arg, part, n_parts); }

int model_load(Model *m, const char *model, const ModelOptions *opt, Error *e) {
    if (model_open(m, model, opt, e) != 0) return -1;
    m->pool = pool_new(opt->threads > 0 ? opt->threads : cpu_count());
    int rc = opt->no_prepared ? load_weights(m, &(Loader){.opt = opt}, e) : load_prepared(m, opt, e);
    if (rc != 0) {
        model_free(m);
        return -1;
    }
    /* The prepared weights' pages mapped now, by all the threads. */
    if (m->prepared.mapped) pool_run(m->pool, map_pages_part, &m->prepared);
    alloc_state(m);
    return 0;
}

void model_free(Model *m) {
    free_weights(m);
    free_state(&m->state);
    prepared_close(&m->prepared);
    st_close(&m->st);
    pool_free(m->pool);
    free(m->weights_path);
    memset(m, 0, sizeof *m);
}

/* ---- the forward pass ---- */

/* Row i of a matrix of rows `width` floats wide. */
static float *row(float *rows, int i, int width) { return rows + (size_t)i * (size_t)width; }

/* The sum of squares of x[0..n) in double precision: in SQUARE_LANES
 * partial sums (lane j takes the i with i = j mod SQUARE_LANES, in order),
 * which the compiler keeps in vectors, then the lanes in order. One order
 * everywhere, so every path and thread count gets the same bits; a single
 * running sum waited on each addition (a prefill spent 2% of its time here). */
enum { SQUARE_LANES = 8 };

static double sum_of_squares(const float *x, int n) {
    double lane[SQUARE_LANES] = {0};
    int i = 0;
    for (; i + SQUARE_LANES <= n; i += SQUARE_LANES)
        for (int j = 0; j < SQUARE_LANES; j++) lane[j] += (double)x[i + j] * x[i + j];
    double ss = 0;
    for (int j = 0; j < SQUARE_LANES; j++) ss += lane[j];
    for (; i < n; i++) ss += (double)x[i] * x[i];
    return ss;
}

/* out = x / sqrt(mean(x^2) + eps) * weight, with the mean in double precision
 * as the reference takes it. out may be x. */
static void rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double rms = sqrt(sum_of_squares(x, n) / n + eps);
    for (int i = 0; i < n; i++) out[i] = (float)(x[i] / rms) * weight[i];
}

/* rmsnorm of each of n rows of x into out. */
static void rmsnorm_rows(float *out, const float *x, const float *weight, int n, int width, float eps) {
    for (int i = 0; i < n; i++) rmsnorm(row(out, i, width), x + (size_t)i * width, weight, width, eps);
}

typedef struct {
    float *out;
    const float *x, *weight;
    int n, width;
    float eps;
} NormJob;

static void norm_part(void *arg, int part, int n_parts) {
    const NormJob *job = arg;
    int from = (int)((long)job->n * part / n_parts), to = (int)((long)job->n * (part + 1) / n_parts);
    rmsnorm_rows(row(job->out, from, job->width), job->x + (size_t)from * job->width, job->weight, to - from, job->width,
                 job->eps);
}

/* rmsnorm_rows of the residual stream's n rows (dim wide), the rows shared
 * out between the threads (a prompt's block would otherwise keep one
 * thread busy while the others wait). */
static void norm_rows(Model *m, float *out, const float *x, const float *weight, int n) {
    NormJob job = {out, x, weight, n, m->config.dim, m->config.norm_eps};
    pool_run_parts(m->pool, pool_parts_for_values(m->pool, (size_t)n * job.width), norm_part, &job);
}

/* y[i] += x for each of the n rows of y; nothing when x is NULL (no bias). */
static void add_to_rows(float *y, const float *x, int n, int width) {
    if (!x) return;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < width; j++) y[(size_t)i * width + j] += x[j];
}

static void add(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* The tokens of a forward pass and where each belongs. */
typedef struct {
    const Chunk *chunks;
    int n_chunks;
    int n;                     /* tokens in all */
    int *first_item;           /* [n_chunks + 1] the chunks' first attention items, see attention_task */
} Batch;

/* RoPE, in one place: the angles of every token's position (for gemma3's
 * sliding layers, at their own frequencies too), then the rotation of each
 * head's pairs (j, j + head_dim/2) by them - the "half rotation" layout of
 * transformers' rotate_half. */
static void angles(float *cos_, float *sin_, const float *inv_freq, int half, const Batch *b) {
    int i = 0;
    for (int c = 0; c < b->n_chunks; c++)
        for (int t = 0; t < b->chunks[c].n_tokens; t++, i++)
            for (int j = 0; j < half; j++) {
                float angle = (float)(b->chunks[c].pos + t) * inv_freq[j];
                cos_[i * half + j] = (float)cos(angle);
                sin_[i * half + j] = (float)sin(angle);
            }
}

static void rope_angles(Model *m, const Batch *b) {
    RunState *s = &m->state;
    int half = m->config.head_dim / 2;
    angles(s->rope_cos, s->rope_sin, s->inv_freq, half, b);
    if (s->local_inv_freq) angles(s->local_cos, s->local_sin, s->local_inv_freq, half, b);
}

static void rope_rotate(float *v, int n_heads, int head_dim, const float *cos_, const float *sin_) {
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

/* The first of a cache's rows (keys or values, held as t) for layer l,
 * key/value head h: layer_rows rows of head_dim values. */
static void *cache_head(const Model *m, void *cache, KVType t, const KVCache *kv, int l, int h) {
    const Config *c = &m->config;
    size_t rows = rows_before(c, kv->capacity, kv->ring, l) * c->n_kv_heads + (size_t)h * layer_rows(c, kv->capacity, kv->ring, l);
    return (char *)cache + rows * kv_row_bytes(t, c->head_dim);
}

/* How layer l's queries look back over a cache (kernels.h). */
static AttendSpec attend_spec(const Config *c, const KVCache *kv, int l) {
    bool sliding = layer_is_sliding(c, l);
    return (AttendSpec){.scale = c->attn_scale, .softcap = c->attn_softcap, .window = sliding ? c->sliding_window : 0,
                        .rows = layer_rows(c, kv->capacity, kv->ring, l), .key_type = kv->key_type,
                        .value_type = kv->value_type};
}

/* Shows a probe one step: rows[n][width] of a single-chunk pass. */
static void show(const Model *m, const Batch *b, ProbeStep step, int layer, const float *rows, int n, int width) {
    if (m->probe && m->probe->vectors && b->n_chunks == 1) m->probe->vectors(m->probe->ctx, step, layer, b->chunks[0].pos, n, rows, width);
}

typedef struct {
    const Model *m;
    const Batch *b;
    int layer;
} AttentionJob;

/* The attention work is cut into items, each one attend() over the cache
 * of one key/value head for a block of ATTEND_QUERY_BLOCK of one chunk's
 * query tokens, split between the threads. */
static void count_attention_items(Batch *b, int n_kv_heads) {
    b->first_item = xmalloc(((size_t)b->n_chunks + 1) * sizeof *b->first_item);
    b->first_item[0] = 0;
    for (int ci = 0; ci < b->n_chunks; ci++) {
        int blocks = (b->chunks[ci].n_tokens + ATTEND_QUERY_BLOCK - 1) / ATTEND_QUERY_BLOCK;
        b->first_item[ci + 1] = b->first_item[ci] + blocks * n_kv_heads;
    }
}

static void attention_task(void *arg, int thread, int n_threads) {
    const AttentionJob *job = arg;
    const Model *m = job->m;
    const Config *c = &m->config;
    const RunState *s = &m->state;
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads, items = job->b->first_item[job->b->n_chunks];
    size_t ld = (size_t)c->n_heads * hd;
    float *scratch = s->scratch + (size_t)thread * s->scratch_floats;
    int chunk = 0, token0 = 0;  /* the chunk of the item, and the index of its first token in the batch */
    for (int item = (int)((long)items * thread / n_threads); item < (int)((long)items * (thread + 1) / n_threads); item++) {
        while (item >= job->b->first_item[chunk + 1]) token0 += job->b->chunks[chunk++].n_tokens;
        const Chunk *ch = &job->b->chunks[chunk];
        int local = item - job->b->first_item[chunk], h = local % c->n_kv_heads, first = local / c->n_kv_heads * ATTEND_QUERY_BLOCK;
        int n_q = ch->n_tokens - first < ATTEND_QUERY_BLOCK ? ch->n_tokens - first : ATTEND_QUERY_BLOCK;
        size_t at = (size_t)(token0 + first) * ld + (size_t)h * group * hd;
        AttendSpec spec = attend_spec(c, ch->cache, job->layer);
        const KVCache *kv = ch->cache;
        attend(s->att + at, s->q + at, ld, n_q, ch->pos + first, cache_head(m, kv->keys, kv->key_type, kv, job->layer, h),
               cache_head(m, kv->values, kv->value_type, kv, job->layer, h), group, hd, &spec, scratch);
    }
}

/* For a probe: each head's attention weights, as the definition has them -
 * softmax over the keys the query sees (as the cache holds them) of
 * cap(q . k_t * scale); 0 for those before a sliding layer's window. */
static void show_attention(const Model *m, const Batch *b, int l) {
    const Probe *p = m->probe;
    if (!p || !p->attention || b->n_chunks != 1 || b->chunks[0].pos >= p->attention_until) return;
    const Config *c = &m->config;
    const Chunk *ch = &b->chunks[0];
    AttendSpec spec = attend_spec(c, ch->cache, l);
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    float *probs = xmalloc((size_t)(ch->pos + ch->n_tokens) * sizeof(float)), *key = xmalloc((size_t)hd * sizeof(float));
    size_t row_bytes = kv_row_bytes(spec.key_type, hd);
    for (int i = 0; i < ch->n_tokens && ch->pos + i < p->attention_until; i++)
        for (int h = 0; h < c->n_heads; h++) {
            const float *q = m->state.q + ((size_t)i * c->n_heads + h) * hd;
            const char *keys = cache_head(m, ch->cache->keys, spec.key_type, ch->cache, l, h / group);
            int query = ch->pos + i, first = spec.window && query >= spec.window ? query - spec.window + 1 : 0;
            for (int t = 0; t < first; t++) probs[t] = 0;
            for (int t = first; t <= query; t++) {
                double dot = 0;
                kv_rows_load(key, spec.key_type, keys + (size_t)(t % spec.rows) * row_bytes, (size_t)hd);
                for (int j = 0; j < hd; j++) dot += (double)q[j] * key[j];
                float score = (float)(dot * spec.scale);
                probs[t] = spec.softcap > 0 ? spec.softcap * tanhf(score / spec.softcap) : score;
            }
            softmax(probs + first, query + 1 - first);
            p->attention(p->ctx, l, h, query, probs);
        }
    free(probs);
    free(key);
}

/* A norm of each row of s->out when the architecture has one (gemma3's
 * sandwich norms on a sublayer's output). */
static void norm_output(Model *m, const float *weight, int n) {
    if (weight) norm_rows(m, m->state.out, m->state.out, weight, n);
}

static void attention_block(Model *m, const Batch *b, int l) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    const LayerWeights *w = &m->weights.layers[l];
    int n = b->n, dim = c->dim, hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;

    /* Normalise, then project to queries, keys and values: one batch of
     * products, so that x is prepared once for the three and the threads
     * share out the rows of all of them (k's and v's alone are few). */
    norm_rows(m, s->xb, s->x, w->attn_norm, n);
    show(m, b, PROBE_ATTN_NORM, l, s->xb, n, dim);
    MatmulProduct qkv[3] = {{s->q, s->xb, &w->wq, n}, {s->k, s->xb, &w->wk, n}, {s->v, s->xb, &w->wv, n}};
    matmul_batch(qkv, 3, m->pool);
    add_to_rows(s->q, w->bq, n, q_dim);
    add_to_rows(s->k, w->bk, n, kv_dim);
    add_to_rows(s->v, w->bv, n, kv_dim);

    /* Qwen3 and Gemma 3 normalise each head of q and k; then both are
     * rotated by their position (gemma3's sliding layers at their own
     * frequencies), and the keys and values join their sequence's cache
     * in its formats (a sliding layer's ring: position p in row p % ring). */
    bool local = layer_is_sliding(c, l) && s->local_inv_freq;
    const float *cos_ = local ? s->local_cos : s->rope_cos, *sin_ = local ? s->local_sin : s->rope_sin;
    int i = 0;
    for (int ci = 0; ci < b->n_chunks; ci++) {
        const Chunk *ch = &b->chunks[ci];
        int rows = layer_rows(c, ch->cache->capacity, ch->cache->ring, l);
        for (int t = 0; t < ch->n_tokens; t++, i++) {
            float *q = row(s->q, i, q_dim), *k = row(s->k, i, kv_dim), *v = row(s->v, i, kv_dim);
            if (w->q_norm) rmsnorm_rows(q, q, w->q_norm, c->n_heads, hd, c->norm_eps);
            if (w->k_norm) rmsnorm_rows(k, k, w->k_norm, c->n_kv_heads, hd, c->norm_eps);
            rope_rotate(q, c->n_heads, hd, cos_ + (size_t)i * (hd / 2), sin_ + (size_t)i * (hd / 2));
            rope_rotate(k, c->n_kv_heads, hd, cos_ + (size_t)i * (hd / 2), sin_ + (size_t)i * (hd / 2));
            for (int h = 0; h < c->n_kv_heads; h++) {
                const KVCache *kv = ch->cache;
                size_t row = (size_t)((ch->pos + t) % rows);
                char *key = cache_head(m, kv->keys, kv->key_type, kv, l, h), *value = cache_head(m, kv->values, kv->value_type, kv, l, h);
                kv_row_store(key + row * kv_row_bytes(kv->key_type, hd), kv->key_type, k + h * hd, hd);
                kv_row_store(value + row * kv_row_bytes(kv->value_type, hd), kv->value_type, v + h * hd, hd);
            }
        }
    }
    show(m, b, PROBE_Q, l, s->q, n, q_dim);
    show(m, b, PROBE_K, l, s->k, n, kv_dim);
    show(m, b, PROBE_V, l, s->v, n, kv_dim);

    /* Every query head attends over its position and the earlier ones of
     * its own sequence (a sliding layer's: those in its window). */
    AttentionJob job = {.m = m, .b = b, .layer = l};
    pool_run(m->pool, attention_task, &job);
    show_attention(m, b, l);
    show(m, b, PROBE_ATTN_HEADS, l, s->att, n, q_dim);

    /* The heads' outputs are mixed back into the residual stream. */
    matmul(s->out, s->att, &w->wo, n, m->pool);
    add_to_rows(s->out, w->bo, n, dim);
    norm_output(m, w->attn_out_norm, n);
    show(m, b, PROBE_ATTN_OUT, l, s->out, n, dim);
    add(s->x, s->out, (size_t)n * dim);
    show(m, b, PROBE_RESID_ATTN, l, s->x, n, dim);
}

/* For a probe: each token's experts and their weights in layer l. */
static void show_router(const Model *m, const Batch *b, int l) {
    const Probe *p = m->probe;
    if (p && p->router && b->n_chunks == 1)
        p->router(p->ctx, l, b->chunks[0].pos, b->n, m->config.moe.n_used, m->state.moe.chosen, m->state.moe.weight);
}

static void mlp_block(Model *m, const Batch *b, int l) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    const LayerWeights *w = &m->weights.layers[l];
    int n = b->n, dim = c->dim, hidden = c->hidden_dim;

    norm_rows(m, s->xb, s->x, w->mlp_norm, n);
    show(m, b, PROBE_MLP_NORM, l, s->xb, n, dim);
    if (w->moe) {
        /* A mixture of experts: the router picks each token's experts, whose
         * SwiGLU MLPs' outputs it adds up, weighted (moe.h). */
        moe_forward(s->out, s->xb, n, w->moe, c, &s->moe, m->pool);
        show_router(m, b, l);
    } else {
        /* The gated MLP: down(act(gate(x)) * up(x)), act silu (SwiGLU) or
         * Gemma's GELU; gate and up in one batch, as q, k and v. */
        MatmulProduct gate_up[2] = {{s->gate, s->xb, &w->w_gate, n}, {s->up, s->xb, &w->w_up, n}};
        matmul_batch(gate_up, 2, m->pool);
        add_to_rows(s->gate, w->b_gate, n, hidden);
        add_to_rows(s->up, w->b_up, n, hidden);
        if (c->act == ACT_GELU_TANH) gelu_tanh_gate(s->gate, s->up, (size_t)n * hidden, m->pool);
        else swiglu(s->gate, s->up, (size_t)n * hidden, m->pool);
        show(m, b, PROBE_MLP_HIDDEN, l, s->gate, n, hidden);
        matmul(s->out, s->gate, &w->w_down, n, m->pool);
        add_to_rows(s->out, w->b_down, n, dim);
    }
    norm_output(m, w->mlp_out_norm, n);
    show(m, b, PROBE_MLP_OUT, l, s->out, n, dim);
    add(s->x, s->out, (size_t)n * dim);
    show(m, b, PROBE_RESID, l, s->x, n, dim);
}

/* Gemma's final_logit_softcapping: logits become cap * tanh(logit / cap). */
static void soft_cap_logits(const Config *c, float *logits, size_t n) {
    for (size_t i = 0; c->final_softcap > 0 && i < n; i++) logits[i] = c->final_softcap * tanhf(logits[i] / c->final_softcap);
}

/* Room for `rows` rows of logits. */
static void reserve_logits(Model *m, int rows) {
    RunState *s = &m->state;
    if (rows <= s->logits_rows) return;
    xfree_aligned(s->logits);
    s->logits = xcalloc_aligned((size_t)rows * m->config.vocab_size, sizeof(float));
    s->logits_rows = rows;
}

float *forward_batch(Model *m, const Chunk *chunks, int n_chunks) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    int dim = c->dim;
    Batch b = {.chunks = chunks, .n_chunks = n_chunks, .n = 0};
    /* The callers keep every position inside its cache; a pass that would
     * write past one (or past the scratch space) is a bug, stopped here
     * before anything is written. */
    for (int i = 0; i < n_chunks; i++) {
        const Chunk *ch = &chunks[i];
        if (ch->n_tokens < 1 || ch->pos < 0 || ch->pos > ch->cache->capacity - ch->n_tokens)
            die("a forward pass of %d tokens at position %d, outside a KV cache of %d positions", ch->n_tokens, ch->pos,
                ch->cache->capacity);
        b.n += ch->n_tokens;
    }
    if (b.n > s->max_tokens) die("a forward pass of %d tokens, more than the %d its scratch space holds", b.n, s->max_tokens);
    count_attention_items(&b, c->n_kv_heads);

    /* Each token's embedding (gemma3: times sqrt(hidden_size)) starts its
     * residual stream. */
    int i = 0;
    for (int ci = 0; ci < n_chunks; ci++)
        for (int t = 0; t < chunks[ci].n_tokens; t++, i++) matrix_row(row(s->x, i, dim), &m->weights.embed, chunks[ci].tokens[t]);
    for (size_t j = 0; c->embed_scale != 1.0f && j < (size_t)b.n * dim; j++) s->x[j] *= c->embed_scale;
    show(m, &b, PROBE_EMBEDDING, -1, s->x, b.n, dim);
    rope_angles(m, &b);

    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, &b, l);
        mlp_block(m, &b, l);
    }

    /* The final norm and the output head turn the residual stream into
     * logits: of each chunk's last token, or of all its tokens. */
    int rows = 0;
    i = 0;
    for (int ci = 0; ci < n_chunks; ci++) {
        int n = chunks[ci].n_tokens, first = chunks[ci].all_logits ? 0 : n - 1;
        for (int t = first; t < n; t++) rmsnorm(row(s->xb, rows++, dim), row(s->x, i + t, dim), m->weights.final_norm, dim, c->norm_eps);
        i += n;
    }
    show(m, &b, PROBE_FINAL_NORM, -1, s->xb, rows, dim);
    /* Every token's final-normed state, for the chunks that ask for it. */
    i = 0;
    for (int ci = 0; ci < n_chunks; ci++) {
        for (int t = 0; chunks[ci].hidden && t < chunks[ci].n_tokens; t++)
            rmsnorm(row(chunks[ci].hidden, t, dim), row(s->x, i + t, dim), m->weights.final_norm, dim, c->norm_eps);
        i += chunks[ci].n_tokens;
    }
    reserve_logits(m, rows);
    matmul(s->logits, s->xb, &m->weights.lm_head, rows, m->pool);
    soft_cap_logits(c, s->logits, (size_t)rows * c->vocab_size);
    free(b.first_item);
    return s->logits;
}

float *forward(Model *m, KVCache *kv, const int *tokens, int n, int pos, bool all_logits) {
    Chunk chunk = {.cache = kv, .tokens = tokens, .n_tokens = n, .pos = pos, .all_logits = all_logits};
    return forward_batch(m, &chunk, 1);
}

float *forward_prompt(Model *m, KVCache *kv, const int *tokens, int n, int pos) {
    return forward_prompt_each(m, kv, tokens, n, pos, NULL, NULL);
}

float *forward_prompt_each(Model *m, KVCache *kv, const int *tokens, int n, int pos, LogitRows each, void *ctx) {
    float *logits = NULL;
    for (int done = 0; done < n; done += m->state.max_tokens) {
        int block = n - done < m->state.max_tokens ? n - done : m->state.max_tokens;
        logits = forward(m, kv, tokens + done, block, pos + done, each != NULL);
        if (!each) continue;
        each(ctx, logits, done, block);
        logits += (size_t)(block - 1) * m->config.vocab_size;
    }
    return logits;
}

void logits_of_residual(Model *m, float *logits, const float *rows, int n) {
    const Config *c = &m->config;
    norm_rows(m, m->state.xb, rows, m->weights.final_norm, n);
    matmul(logits, m->state.xb, &m->weights.lm_head, n, m->pool);
    soft_cap_logits(c, logits, (size_t)n * c->vocab_size);
}

const char *probe_step_name(ProbeStep step) {
    static const char *names[PROBE_STEPS] = {
        [PROBE_EMBEDDING] = "embedding", [PROBE_ATTN_NORM] = "attn_norm", [PROBE_Q] = "q", [PROBE_K] = "k",
        [PROBE_V] = "v", [PROBE_ATTN_HEADS] = "attn_heads", [PROBE_ATTN_OUT] = "attn_out",
        [PROBE_RESID_ATTN] = "x+attn", [PROBE_MLP_NORM] = "mlp_norm", [PROBE_MLP_HIDDEN] = "mlp_hidden",
        [PROBE_MLP_OUT] = "mlp_out", [PROBE_RESID] = "x+mlp", [PROBE_FINAL_NORM] = "final_norm"};
    return step < PROBE_STEPS ? names[step] : "?";
}
