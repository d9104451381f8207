/* config.c - reading and checking config.json. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- typed fields ---- */

/* obj[key] as an integer in [lo, hi]; `fallback` when absent (or an error
 * when fallback < lo, i.e. the field is required). */
static int config_int(const char *path, const JsonValue *obj, const char *key, long long lo, long long hi,
                      long long fallback, int *out, Error *e) {
    const JsonValue *v = json_get(obj, key);
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

/* obj[key] as a positive finite number below `hi`, or `fallback` (a
 * negative fallback: the field is required). */
static int config_float(const char *path, const JsonValue *obj, const char *key, double hi, double fallback,
                        float *out, Error *e) {
    const JsonValue *v = json_get(obj, key);
    if (!v || v->type == JSON_NULL) {
        if (fallback < 0) return fail(e, "%s: \"%s\" is missing", path, key);
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

/* obj[key] as a boolean, or `fallback` when absent or null. */
static int config_bool(const char *path, const JsonValue *obj, const char *key, bool fallback, bool *out, Error *e) {
    const JsonValue *v = json_get(obj, key);
    if (!v || v->type == JSON_NULL) {
        *out = fallback;
        return 0;
    }
    if (v->type != JSON_BOOL) return fail(e, "%s: \"%s\" must be true or false", path, key);
    *out = v->boolean;
    return 0;
}

/* A string field that, when present, must have the one value run implements. */
static int config_expect(const char *path, const JsonValue *obj, const char *key, const char *want, Error *e) {
    const JsonValue *v = json_get(obj, key);
    if (v && (v->type != JSON_STRING || strcmp(v->string, want) != 0))
        return fail(e, "%s: \"%s\" must be \"%s\" (the only value run implements)", path, key, want);
    return 0;
}

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

/* ---- the architecture ---- */

static const struct {
    const char *model_type;
    Architecture arch;
    const char *name;
} architectures[] = {
    {.model_type = "qwen2", .arch = ARCH_QWEN2, .name = "Qwen2"},
    {.model_type = "qwen3", .arch = ARCH_QWEN3, .name = "Qwen3"},
    {.model_type = "llama", .arch = ARCH_LLAMA, .name = "Llama"},
    {.model_type = "qwen3_moe", .arch = ARCH_QWEN3_MOE, .name = "Qwen3-MoE"},
    {.model_type = "mistral", .arch = ARCH_MISTRAL, .name = "Mistral"},
    {.model_type = "gemma3_text", .arch = ARCH_GEMMA3, .name = "Gemma3"},
};
enum { N_ARCHITECTURES = sizeof architectures / sizeof architectures[0] };

const char *architecture_name(Architecture a) {
    for (int i = 0; i < N_ARCHITECTURES; i++)
        if (architectures[i].arch == a) return architectures[i].name;
    return "?";
}

/* model_type, and the object that holds the language model's fields: the
 * root, or an image-text Gemma 3's "text_config". */
static int read_architecture(const char *path, const JsonValue *root, Config *c, const JsonValue **text, Error *e) {
    const JsonValue *v = json_get(root, "model_type");
    *text = root;
    if (!v || v->type == JSON_NULL) return fail(e, "%s: \"model_type\" is missing", path);
    if (v->type != JSON_STRING) return fail(e, "%s: \"model_type\" must be a string", path);
    if (strcmp(v->string, "gemma3") == 0) {
        *text = json_get(root, "text_config");
        if (!*text || (*text)->type != JSON_OBJECT)
            return fail(e, "%s: a gemma3 (image-text) config needs a \"text_config\" object", path);
        if (config_expect(path, *text, "model_type", "gemma3_text", e)) return -1;
        c->arch = ARCH_GEMMA3;
        c->multimodal = true;
        return 0;
    }
    for (int i = 0; i < N_ARCHITECTURES; i++)
        if (strcmp(v->string, architectures[i].model_type) == 0) {
            c->arch = architectures[i].arch;
            return 0;
        }
    return fail(e, "%s: model_type \"%.64s\" is not supported (run implements qwen2, qwen3, qwen3_moe, llama, mistral, "
                "gemma3_text and gemma3)", path, v->string);
}

/* The biases, norms and activation each family's modules are built with
 * (transformers' modeling_qwen2, _qwen3, _qwen3_moe, _llama, _mistral and
 * _gemma3). */
static int read_layout(const char *path, const JsonValue *root, Config *c, Error *e) {
    bool attention_bias = false, mlp_bias = false;
    if (config_bool(path, root, "attention_bias", false, &attention_bias, e) ||
        config_bool(path, root, "mlp_bias", false, &mlp_bias, e))
        return -1;
    if (c->arch == ARCH_MISTRAL) attention_bias = false;
    c->qkv_bias = c->arch == ARCH_QWEN2 || attention_bias;
    c->o_bias = c->arch != ARCH_QWEN2 && attention_bias;
    c->mlp_bias = c->arch == ARCH_LLAMA && mlp_bias;
    c->qk_norm = c->arch == ARCH_QWEN3 || c->arch == ARCH_QWEN3_MOE || c->arch == ARCH_GEMMA3;
    bool gemma = c->arch == ARCH_GEMMA3;
    c->norm_plus_one = c->sandwich_norms = gemma;
    c->act = gemma ? ACT_GELU_TANH : ACT_SILU;
    if (!gemma) return config_expect(path, root, "hidden_act", "silu", e);
    /* Gemma3TextConfig names the activation hidden_activation (hidden_act is not read). */
    bool bidirectional = false;
    if (config_expect(path, root, "hidden_activation", "gelu_pytorch_tanh", e) ||
        config_bool(path, root, "use_bidirectional_attention", false, &bidirectional, e))
        return -1;
    if (bidirectional) return fail(e, "%s: bidirectional attention (an embedding model) is not supported", path);
    return 0;
}

/* qwen3_moe's experts, with Qwen3MoeConfig's defaults for absent fields
 * (128 experts, 8 per token, width 768, no renormalisation, every layer
 * sparse); mlp_only_layers lists layers that keep a dense MLP. */
static int read_experts(const char *path, const JsonValue *root, Config *c, Error *e) {
    MoeConfig *moe = &c->moe;
    if (c->arch != ARCH_QWEN3_MOE) return 0;
    if (config_int(path, root, "num_experts", 0, 1 << 16, 128, &moe->n_experts, e) ||
        config_int(path, root, "moe_intermediate_size", 1, 1 << 20, 768, &moe->hidden_dim, e) ||
        config_int(path, root, "decoder_sparse_step", 1, 1024, 1, &moe->sparse_step, e) ||
        config_bool(path, root, "norm_topk_prob", false, &moe->norm_topk_prob, e))
        return -1;
    if (config_int(path, root, "num_experts_per_tok", 1, 1 << 16, 8, &moe->n_used, e)) return -1;
    if (moe->n_experts > 0 && moe->n_used > moe->n_experts)
        return fail(e, "%s: num_experts_per_tok %d is more than num_experts %d", path, moe->n_used, moe->n_experts);
    const JsonValue *only = json_get(root, "mlp_only_layers");
    if (!only || only->type == JSON_NULL) return 0;
    if (only->type != JSON_ARRAY) return fail(e, "%s: \"mlp_only_layers\" must be a list of layer numbers", path);
    for (size_t i = 0; i < only->len; i++) {
        const JsonValue *v = &only->items[i];
        if (v->type != JSON_NUMBER || !v->number.is_integer || v->number.integer < 0 || v->number.integer >= c->n_layers)
            return fail(e, "%s: \"mlp_only_layers\" must hold layer numbers in [0, %d)", path, c->n_layers);
        moe->dense[v->number.integer / 64] |= (uint64_t)1 << (v->number.integer % 64);
    }
    return 0;
}

bool layer_is_sparse(const Config *c, int l) {
    const MoeConfig *moe = &c->moe;
    return moe->n_experts > 0 && (l + 1) % moe->sparse_step == 0 && !(moe->dense[l / 64] >> (l % 64) & 1);
}

/* The scaling of one set of RoPE parameters: none ("default"), "linear",
 * or llama's "llama3". */
static int read_scaling(const char *path, const JsonValue *params, Config *c, Error *e) {
    const JsonValue *type = json_get(params, "rope_type");
    if (!type) type = json_get(params, "type");
    if (!type || type->type == JSON_NULL || (type->type == JSON_STRING && strcmp(type->string, "default") == 0)) return 0;
    if (type->type != JSON_STRING) return fail(e, "%s: \"rope_type\" must be a string", path);
    RopeScaling *s = &c->rope_scaling;
    if (strcmp(type->string, "linear") == 0) {
        s->kind = ROPE_LINEAR;
        return config_float(path, params, "factor", 1e6, -1, &s->factor, e);
    }
    if (strcmp(type->string, "llama3") != 0)
        return fail(e, "%s: RoPE scaling \"%.64s\" is not supported (run implements none, linear and llama3)", path,
                    type->string);
    if (c->arch != ARCH_LLAMA) return fail(e, "%s: llama3 RoPE scaling in a model that is not llama", path);
    s->kind = ROPE_LLAMA3;
    if (config_float(path, params, "factor", 1e6, -1, &s->factor, e) ||
        config_float(path, params, "low_freq_factor", 1e6, -1, &s->low_freq_factor, e) ||
        config_float(path, params, "high_freq_factor", 1e6, -1, &s->high_freq_factor, e) ||
        config_int(path, params, "original_max_position_embeddings", 1, 1 << 24, 0, &s->original_max_pos, e))
        return -1;
    if (!(s->high_freq_factor > s->low_freq_factor))
        return fail(e, "%s: RoPE scaling: high_freq_factor must be larger than low_freq_factor", path);
    return 0;
}

/* RoPE: the base frequency and the scaling, from "rope_scaling" (transformers
 * 4) or "rope_parameters" (transformers 5, which also moves rope_theta there
 * and gives Gemma 3 one set per layer type). Gemma 3's sliding layers have
 * their own base (rope_local_base_freq) and no scaling. */
static int read_rope(const char *path, const JsonValue *root, Config *c, Error *e) {
    const JsonValue *params = json_get(root, "rope_parameters");
    if (!params || params->type == JSON_NULL) params = json_get(root, "rope_scaling");
    if (params && params->type != JSON_NULL && params->type != JSON_OBJECT)
        return fail(e, "%s: \"rope_scaling\" must be an object or null", path);
    if (params && params->type == JSON_NULL) params = NULL;
    const JsonValue *local = NULL;
    if (params && json_get(params, "full_attention")) {
        local = json_get(params, "sliding_attention");
        params = json_get(params, "full_attention");
        if (params->type != JSON_OBJECT || (local && local->type != JSON_OBJECT))
            return fail(e, "%s: \"rope_parameters\" of each layer type must be an object", path);
    }
    bool gemma = c->arch == ARCH_GEMMA3;
    const JsonValue *theta_holder = params && json_get(params, "rope_theta") ? params : root;
    if (config_float(path, theta_holder, "rope_theta", 1e30, gemma ? 1e6 : 10000.0, &c->rope_theta, e) ||
        (params && read_scaling(path, params, c, e)))
        return -1;
    if (!gemma) return 0;
    if (!local) return config_float(path, root, "rope_local_base_freq", 1e30, 10000.0, &c->rope_local_theta, e);
    const JsonValue *type = json_get(local, "rope_type");
    if (type && !(type->type == JSON_STRING && strcmp(type->string, "default") == 0))
        return fail(e, "%s: RoPE scaling of the sliding layers is not supported", path);
    return config_float(path, local, "rope_theta", 1e30, 10000.0, &c->rope_local_theta, e);
}

/* Qwen2's and Qwen3's sliding-window attention is not implemented: refuse a
 * config that uses it ("sliding_window" counts only with
 * "use_sliding_window": true). */
static int refuse_sliding_window(const char *path, const JsonValue *root, Error *e) {
    bool use = false;
    if (config_bool(path, root, "use_sliding_window", false, &use, e)) return -1;
    if (use) return fail(e, "%s: sliding-window attention (\"use_sliding_window\": true) is not supported", path);
    return 0;
}

bool layer_is_sliding(const Config *c, int l) { return c->sliding[l / 64] >> (l % 64) & 1; }

static void set_sliding(Config *c, int l) { c->sliding[l / 64] |= (uint64_t)1 << (l % 64); }

/* Which layers slide and how far back they see. mistral: every layer, when
 * sliding_window is set (absent: MistralConfig's 4096; null: no window).
 * gemma3: the "sliding_attention" entries of layer_types, else every layer
 * but each sliding_window_pattern-th (6 when absent); sliding_window 4096
 * when absent, null: the sliding layers see everything (their RoPE still
 * differs). */
static int read_sliding(const char *path, const JsonValue *root, Config *c, Error *e) {
    if (c->arch != ARCH_MISTRAL && c->arch != ARCH_GEMMA3) return refuse_sliding_window(path, root, e);
    const JsonValue *w = json_get(root, "sliding_window");
    if (!(w && w->type == JSON_NULL) && config_int(path, root, "sliding_window", 1, 1 << 24, 4096, &c->sliding_window, e))
        return -1;
    if (c->arch == ARCH_MISTRAL) {
        for (int l = 0; c->sliding_window && l < c->n_layers; l++) set_sliding(c, l);
        return 0;
    }
    const JsonValue *types = json_get(root, "layer_types");
    if (!types || types->type == JSON_NULL) {
        int pattern;
        if (config_int(path, root, "sliding_window_pattern", 1, MAX_LAYERS, 6, &pattern, e)) return -1;
        for (int l = 0; l < c->n_layers; l++)
            if ((l + 1) % pattern != 0) set_sliding(c, l);
        return 0;
    }
    if (types->type != JSON_ARRAY || (int)types->len != c->n_layers)
        return fail(e, "%s: \"layer_types\" must be a list of %d layer types", path, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        const JsonValue *t = &types->items[l];
        bool sliding = t->type == JSON_STRING && strcmp(t->string, "sliding_attention") == 0;
        if (!sliding && !(t->type == JSON_STRING && strcmp(t->string, "full_attention") == 0))
            return fail(e, "%s: \"layer_types\" holds \"sliding_attention\" or \"full_attention\" only", path);
        if (sliding) set_sliding(c, l);
    }
    return 0;
}

/* Gemma 3's scalings: embeddings times sqrt(hidden_size) (transformers casts
 * the scale to the embeddings' dtype; run's activations are float32, so it
 * is sqrt(hidden_size) in float32, as transformers has it for float32
 * weights), scores times query_pre_attn_scalar^-0.5, and the soft caps. The
 * other families: scores times 1/sqrt(head_dim), nothing else. */
static int read_scales(const char *path, const JsonValue *root, Config *c, Error *e) {
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    c->embed_scale = 1.0f;
    if (c->arch != ARCH_GEMMA3) return 0;
    float scalar;
    if (config_float(path, root, "query_pre_attn_scalar", 1e30, 256, &scalar, e) ||
        config_float(path, root, "attn_logit_softcapping", 1e30, 0, &c->attn_softcap, e) ||
        config_float(path, root, "final_logit_softcapping", 1e30, 0, &c->final_softcap, e))
        return -1;
    c->attn_scale = (float)pow(scalar, -0.5);
    c->embed_scale = (float)sqrt((double)c->dim);
    return 0;
}

/* The fallbacks of absent fields: most families need the shapes written
 * out (-1: required); Gemma3TextConfig has defaults for every field, and an
 * image-text checkpoint's text_config names only a few. */
typedef struct {
    long long dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, max_pos;
    bool tied;
} Fallbacks;

static const Fallbacks gemma3_fallbacks = {.dim = 2304, .hidden_dim = 9216, .n_layers = 26, .n_heads = 8, .n_kv_heads = 4,
                                           .head_dim = 256, .vocab_size = 262208, .max_pos = 131072, .tied = true};

static int config_check(const char *path, const JsonValue *root, Config *c, Error *e) {
    if (root->type != JSON_OBJECT) return fail(e, "%s: not a JSON object", path);
    const JsonValue *text;  /* the language model's fields */
    if (read_architecture(path, root, c, &text, e) || read_layout(path, text, c, e)) return -1;
    bool gemma = c->arch == ARCH_GEMMA3;
    Fallbacks f = gemma ? gemma3_fallbacks : (Fallbacks){-1, -1, -1, -1, -1, -1, -1, 32768, false};
    if (config_int(path, text, "hidden_size", 1, 1 << 16, f.dim, &c->dim, e) ||
        config_int(path, text, "intermediate_size", 1, 1 << 20, f.hidden_dim, &c->hidden_dim, e) ||
        config_int(path, text, "num_hidden_layers", 1, MAX_LAYERS, f.n_layers, &c->n_layers, e) ||
        config_int(path, text, "num_attention_heads", 1, 1024, f.n_heads, &c->n_heads, e) ||
        config_int(path, text, "num_key_value_heads", 1, 1024, gemma ? f.n_kv_heads : c->n_heads, &c->n_kv_heads, e) ||
        config_int(path, text, "vocab_size", 1, 1 << 24, f.vocab_size, &c->vocab_size, e) ||
        config_int(path, text, "max_position_embeddings", 1, 1 << 24, f.max_pos, &c->max_pos, e) ||
        config_float(path, text, "rms_norm_eps", 1.0, 1e-6, &c->norm_eps, e) || read_rope(path, text, c, e))
        return -1;
    const JsonValue *head_dim = json_get(text, "head_dim");
    if (!gemma && (!head_dim || head_dim->type == JSON_NULL) && c->dim % c->n_heads != 0)
        return fail(e, "%s: hidden_size %d is not a multiple of num_attention_heads %d", path, c->dim, c->n_heads);
    if (config_int(path, text, "head_dim", 2, 4096, gemma ? f.head_dim : c->dim / c->n_heads, &c->head_dim, e)) return -1;
    if (c->head_dim % 2 != 0) return fail(e, "%s: head_dim %d is odd (RoPE rotates pairs)", path, c->head_dim);
    if (c->n_heads % c->n_kv_heads != 0)
        return fail(e, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, c->n_heads,
                    c->n_kv_heads);
    if ((long long)c->n_heads * c->head_dim > (1 << 20))
        return fail(e, "%s: num_attention_heads x head_dim is too large", path);
    if (config_bool(path, text, "tie_word_embeddings", f.tied, &c->tied_embeddings, e) || read_sliding(path, text, c, e) ||
        read_scales(path, text, c, e) || read_experts(path, text, c, e))
        return -1;
    /* The end tokens: the language model's, else (an image-text checkpoint) the root's. */
    if (config_int(path, text, "bos_token_id", -1, INT32_MAX, gemma ? 2 : -1, &c->bos_id, e) ||
        read_eos_ids(path, text, c->eos_ids, &c->n_eos, e))
        return -1;
    if (text != root && c->n_eos == 0 && read_eos_ids(path, root, c->eos_ids, &c->n_eos, e)) return -1;
    if (text != root && !json_get(text, "bos_token_id") &&
        config_int(path, root, "bos_token_id", -1, INT32_MAX, c->bos_id, &c->bos_id, e))
        return -1;
    if (gemma && c->n_eos == 0) c->eos_ids[c->n_eos++] = 1;  /* Gemma3TextConfig's eos_token_id */
    return 0;
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

/* ---- RoPE frequencies ---- */

void rope_frequencies(float *inv_freq, const Config *c, bool local) {
    int half = c->head_dim / 2;
    double theta = local ? c->rope_local_theta : c->rope_theta;
    for (int j = 0; j < half; j++) {
        float exponent = (float)(2 * j) / (float)c->head_dim;
        inv_freq[j] = 1.0f / (float)pow(theta, exponent);
    }
    const RopeScaling *s = &c->rope_scaling;
    if (local || s->kind == ROPE_PLAIN) return;
    if (s->kind == ROPE_LINEAR) {
        for (int j = 0; j < half; j++) inv_freq[j] /= s->factor;
        return;
    }
    /* Llama 3.1: a wavelength shorter than original / high_freq_factor
     * positions is kept, one longer than original / low_freq_factor is
     * stretched by `factor`, and those between are blended smoothly. */
    float low_wavelen = (float)s->original_max_pos / s->low_freq_factor;
    float high_wavelen = (float)s->original_max_pos / s->high_freq_factor;
    for (int j = 0; j < half; j++) {
        float wavelen = 2.0f * (float)M_PI / inv_freq[j];
        if (wavelen < high_wavelen) continue;
        if (wavelen > low_wavelen) {
            inv_freq[j] /= s->factor;
            continue;
        }
        float smooth = ((float)s->original_max_pos / wavelen - s->low_freq_factor) /
                       (s->high_freq_factor - s->low_freq_factor);
        inv_freq[j] = (1 - smooth) * inv_freq[j] / s->factor + smooth * inv_freq[j];
    }
}
