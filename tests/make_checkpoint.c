/* make_checkpoint.c - writes a small random-weight Qwen2, Qwen3, Qwen3-MoE,
 * Llama, Mistral or Gemma 3 checkpoint in the Hugging Face layout
 * (config.json + model.safetensors, or shards with an index),
 * deterministically from a seed, so tests need no committed weights.
 *
 * usage: make_checkpoint OUTDIR [--seed N] [--dtype bf16|f16|f32] [--multimodal]
 *                               [--shards N] [--router-groups G] [--set key=json]...
 * --multimodal (gemma3_text): the same language model, with the same
 * values, as an image-text Gemma 3 checkpoint writes it: config.json's
 * "text_config" (the end tokens stay at the root), tensors under
 * "language_model.", and a small vision tower. 
 * --set overrides or adds a config.json field (the value is JSON text);
 * the shapes and the architecture ("model_type", "attention_bias",
 * "mlp_bias", qwen3_moe's "num_experts", "moe_intermediate_size",
 * "decoder_sparse_step", "mlp_only_layers") are read back from the
 * resulting config. --router-groups G gives the experts of each group of G
 * (0..G-1, G..2G-1, ...) the same router row, so that their probabilities
 * tie exactly: the test of how ties are broken. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../sampler.h"
#include "../util.h"

/* ---- the config: ordered key/value pairs, values as JSON text ---- */

typedef struct {
    const char *key;
    char *value;
} Field;

static Field fields[64] = {
    {"architectures", "[\"Qwen2ForCausalLM\"]"},
    {"bos_token_id", "151643"},
    {"eos_token_id", "151645"},
    {"hidden_act", "\"silu\""},
    {"hidden_size", "64"},
    {"intermediate_size", "176"},
    {"max_position_embeddings", "32768"},
    {"model_type", "\"qwen2\""},
    {"num_attention_heads", "4"},
    {"num_hidden_layers", "2"},
    {"num_key_value_heads", "2"},
    {"rms_norm_eps", "1e-06"},
    {"rope_theta", "1000000.0"},
    {"tie_word_embeddings", "true"},
    {"torch_dtype", "\"bfloat16\""},
    {"vocab_size", "151936"},
};
static int n_fields = 16;

static void set_field(const char *key, char *value) {
    for (int i = 0; i < n_fields; i++)
        if (strcmp(fields[i].key, key) == 0) {
            fields[i].value = value;
            return;
        }
    if (n_fields == 64) die("too many --set fields");
    fields[n_fields++] = (Field){key, value};
}

static const char *get_field(const char *key) {
    for (int i = 0; i < n_fields; i++)
        if (strcmp(fields[i].key, key) == 0) return fields[i].value;
    return NULL;
}

static long field_int(const char *key, long fallback) {
    const char *v = get_field(key);
    return v ? strtol(v, NULL, 10) : fallback;
}

/* ---- deterministic numbers: splitmix64, and a bell curve made from sums of
 * uniforms (exact float arithmetic, the same on every machine) ---- */

static Rng rng;

static float next_uniform(void) { return (float)(rng_next(&rng) >> 40) / 16777216.0f; }

/* Approximately standard normal: the sum of 4 uniforms has variance 1/3. */
static float next_normal(void) {
    float s = next_uniform() + next_uniform() + next_uniform() + next_uniform();
    return (s - 2.0f) * 1.7320508f;
}

/* ---- dtypes ---- */

typedef enum { BF16, F16, F32 } DType;
static const char *dtype_names[] = {"BF16", "F16", "F32"};
static const size_t dtype_sizes[] = {2, 2, 4};

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);  /* round to nearest even */
}

/* IEEE half from float, round to nearest even (values here are normal and small). */
static uint16_t to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int exp = (int)((u >> 23) & 0xFF) - 127 + 15;
    uint32_t mant = u & 0x7FFFFF;
    if (exp <= 0) {  /* subnormal half */
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++;
    return (uint16_t)(sign | half);
}

/* ---- tensors ---- */

typedef struct {
    char name[128];
    int ndim;
    long shape[2];
    float std, mean;
    unsigned char *data;  /* encoded in the output dtype */
    size_t nbytes;
} Tensor;

static Tensor tensors[4096];
static int n_tensors;

static void add(const char *name, long rows, long cols, float std, float mean) {
    if (n_tensors == 4096) die("too many tensors");
    Tensor *t = &tensors[n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->std = std;
    t->mean = mean;
}

static void fill(Tensor *t, DType dt) {
    size_t n = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
    t->nbytes = n * dtype_sizes[dt];
    t->data = xmalloc(t->nbytes);
    for (size_t i = 0; i < n; i++) {
        float v = next_normal() * t->std + t->mean;
        if (dt == BF16) {
            uint16_t h = to_bf16(v);
            memcpy(t->data + 2 * i, &h, 2);
        } else if (dt == F16) {
            uint16_t h = to_f16(v);
            memcpy(t->data + 2 * i, &h, 2);
        } else {
            memcpy(t->data + 4 * i, &v, 4);
        }
    }
}

/* Rows r of t become copies of row r - r % group (after fill). */
static void tie_rows(Tensor *t, int group) {
    size_t row_bytes = t->nbytes / (size_t)t->shape[0];
    for (long r = 0; r < t->shape[0]; r++)
        if (r % group) memcpy(t->data + (size_t)r * row_bytes, t->data + (size_t)(r - r % group) * row_bytes, row_bytes);
}

/* qwen3_moe: whether layer l has experts (cf. config.c's layer_is_sparse). */
static int sparse_layer(long l, long experts, long step) {
    const char *only = get_field("mlp_only_layers");
    for (const char *p = only; p && *p; p++)
        if ((*p >= '0' && *p <= '9') && (p == only || p[-1] < '0' || p[-1] > '9') && strtol(p, NULL, 10) == l) return 0;
    return experts > 0 && (l + 1) % step == 0;
}

static int by_name(const void *a, const void *b) { return strcmp(((const Tensor *)a)->name, ((const Tensor *)b)->name); }

/* Writes tensors[first..last) as one safetensors file, in name order. */
static void write_safetensors(const char *path, int first, int last, DType dt) {
    size_t cap = 65536, len = 0, off = 0;
    char *hdr = xmalloc(cap);
    len += (size_t)snprintf(hdr, cap, "{");
    for (int i = first; i < last; i++) {
        Tensor *t = &tensors[i];
        char shape[64];
        if (t->ndim == 2) snprintf(shape, sizeof shape, "[%ld,%ld]", t->shape[0], t->shape[1]);
        else snprintf(shape, sizeof shape, "[%ld]", t->shape[0]);
        if (cap - len < 512) hdr = xrealloc(hdr, cap *= 2, 1);
        len += (size_t)snprintf(hdr + len, cap - len, "\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]},",
                                t->name, dtype_names[dt], shape, off, off + t->nbytes);
        off += t->nbytes;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "\"__metadata__\":{\"format\":\"pt\"}}");
    while (len % 8) hdr[len++] = ' ';  /* pad so the data starts 8-byte aligned */
    FILE *f = fopen(path, "wb");
    if (!f) die("%s: cannot create", path);
    uint64_t n = len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(n >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, len, f);
    for (int i = first; i < last; i++) fwrite(tensors[i].data, 1, tensors[i].nbytes, f);
    if (fclose(f) != 0) die("%s: write failed", path);
    free(hdr);
}

/* Whether an image-text checkpoint keeps the field `key` at the root of
 * config.json rather than in its text_config. */
static int root_field(const char *key) {
    return strcmp(key, "architectures") == 0 || strcmp(key, "eos_token_id") == 0 || strcmp(key, "torch_dtype") == 0;
}

static void write_config(const char *dir, int multimodal) {
    char *path = path_join(dir, "config.json");
    FILE *f = fopen(path, "w");
    if (!f) die("%s: cannot create", path);
    fprintf(f, "{\n");
    if (multimodal) {
        fprintf(f, "  \"model_type\": \"gemma3\",\n  \"vision_config\": {\"model_type\": \"siglip_vision_model\"},\n");
        for (int i = 0; i < n_fields; i++)
            if (root_field(fields[i].key)) fprintf(f, "  \"%s\": %s,\n", fields[i].key, fields[i].value);
        fprintf(f, "  \"text_config\": {\n");
    }
    int first = 1;
    for (int i = 0; i < n_fields; i++) {
        if (multimodal && root_field(fields[i].key)) continue;
        fprintf(f, "%s  \"%s\": %s", first ? "" : ",\n", fields[i].key, fields[i].value);
        first = 0;
    }
    fprintf(f, multimodal ? "\n  }\n}\n" : "\n}\n");
    fclose(f);
    free(path);
}

int main(int argc, char **argv) {
    if (argc < 2) die_usage("usage: make_checkpoint OUTDIR [--seed N] [--dtype bf16|f16|f32] [--shards N] [--set key=json]...");
    const char *dir = argv[1];
    uint64_t seed = 0;
    DType dt = BF16;
    int shards = 1, router_groups = 1, multimodal = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--multimodal") == 0) {
            multimodal = 1;
            continue;
        }
        if (i + 1 >= argc) die_usage("%s needs a value", argv[i]);
        const char *flag = argv[i], *val = argv[++i];
        if (strcmp(flag, "--seed") == 0) seed = strtoull(val, NULL, 10);
        else if (strcmp(flag, "--shards") == 0) shards = atoi(val);
        else if (strcmp(flag, "--router-groups") == 0) router_groups = atoi(val);
        else if (strcmp(flag, "--dtype") == 0) {
            if (strcmp(val, "bf16") == 0) dt = BF16;
            else if (strcmp(val, "f16") == 0) dt = F16;
            else if (strcmp(val, "f32") == 0) dt = F32;
            else die_usage("--dtype: bf16, f16 or f32");
        } else if (strcmp(flag, "--set") == 0) {
            char *eq = strchr(val, '=');
            if (!eq) die_usage("--set needs key=json");
            *eq = '\0';
            set_field(val, eq + 1);
        } else die_usage("unknown flag %s", flag);
    }
    if (shards < 1) die_usage("--shards must be at least 1");
    if (router_groups < 1) die_usage("--router-groups must be at least 1");
    if (!get_field("model_type")) die_usage("model_type is not set");
    set_field("torch_dtype", dt == BF16 ? "\"bfloat16\"" : dt == F16 ? "\"float16\"" : "\"float32\"");

    long D = field_int("hidden_size", 0), H = field_int("intermediate_size", 0), L = field_int("num_hidden_layers", 0);
    long nh = field_int("num_attention_heads", 1), nkv = field_int("num_key_value_heads", nh);
    long hd = field_int("head_dim", D / nh), V = field_int("vocab_size", 0);
    const char *tie = get_field("tie_word_embeddings"), *type = get_field("model_type");
    const char *attention_bias = get_field("attention_bias"), *mlp_bias_field = get_field("mlp_bias");
    int tied = tie && strcmp(tie, "true") == 0;
    /* Which biases and norms the family's modules have (cf. config.h). */
    int qwen2 = strcmp(type, "\"qwen2\"") == 0, llama = strcmp(type, "\"llama\"") == 0;
    int mistral = strcmp(type, "\"mistral\"") == 0, gemma = strcmp(type, "\"gemma3_text\"") == 0;
    int moe = strcmp(type, "\"qwen3_moe\"") == 0, qwen3 = moe || gemma || strcmp(type, "\"qwen3\"") == 0;
    if (multimodal && !gemma) die_usage("--multimodal makes gemma3_text checkpoints only");
    long experts = moe ? field_int("num_experts", 128) : 0, F = field_int("moe_intermediate_size", 768);
    long step = field_int("decoder_sparse_step", 1);
    int attn_bias = !mistral && attention_bias && strcmp(attention_bias, "true") == 0;
    float norm_mean = gemma ? 0 : 1;  /* Gemma's norms scale by 1 + w: drawn around 0 */
    int qkv_bias = qwen2 || attn_bias, o_bias = !qwen2 && attn_bias;
    int mlp_bias = llama && mlp_bias_field && strcmp(mlp_bias_field, "true") == 0;

    /* Shapes and scales as the architecture has them (cf. gen_model.py). */
    add("model.embed_tokens.weight", V, D, 0.06f, 0);
    for (long l = 0; l < L; l++) {
        char p[96];
        int sparse = moe && sparse_layer(l, experts, step);
        struct { const char *name; long rows, cols; float std, mean; int present; } layer[] = {
            {"input_layernorm.weight", D, 0, 0.1f, norm_mean, 1},
            {"post_attention_layernorm.weight", D, 0, 0.1f, norm_mean, 1},
            {"pre_feedforward_layernorm.weight", D, 0, 0.1f, norm_mean, gemma},
            {"post_feedforward_layernorm.weight", D, 0, 0.1f, norm_mean, gemma},
            {"self_attn.q_proj.weight", nh * hd, D, 1 / sqrtf((float)D), 0, 1},
            {"self_attn.q_proj.bias", nh * hd, 0, 0.1f, 0, qkv_bias},
            {"self_attn.k_proj.weight", nkv * hd, D, 1 / sqrtf((float)D), 0, 1},
            {"self_attn.k_proj.bias", nkv * hd, 0, 0.5f, 0, qkv_bias},
            {"self_attn.v_proj.weight", nkv * hd, D, 1 / sqrtf((float)D), 0, 1},
            {"self_attn.v_proj.bias", nkv * hd, 0, 0.1f, 0, qkv_bias},
            {"self_attn.q_norm.weight", hd, 0, 0.1f, norm_mean, qwen3},
            {"self_attn.k_norm.weight", hd, 0, 0.1f, norm_mean, qwen3},
            {"self_attn.o_proj.weight", D, nh * hd, 1 / sqrtf((float)(nh * hd)), 0, 1},
            {"self_attn.o_proj.bias", D, 0, 0.1f, 0, o_bias},
            {"mlp.gate_proj.weight", H, D, 1 / sqrtf((float)D), 0, !sparse},
            {"mlp.gate_proj.bias", H, 0, 0.1f, 0, mlp_bias},
            {"mlp.up_proj.weight", H, D, 1 / sqrtf((float)D), 0, !sparse},
            {"mlp.up_proj.bias", H, 0, 0.1f, 0, mlp_bias},
            {"mlp.down_proj.weight", D, H, 1 / sqrtf((float)H), 0, !sparse},
            {"mlp.down_proj.bias", D, 0, 0.1f, 0, mlp_bias},
            {"mlp.gate.weight", experts, D, 1 / sqrtf((float)D), 0, sparse},
        };
        for (size_t k = 0; k < sizeof layer / sizeof layer[0]; k++) {
            if (!layer[k].present) continue;
            snprintf(p, sizeof p, "model.layers.%ld.%s", l, layer[k].name);
            add(p, layer[k].rows, layer[k].cols, layer[k].std, layer[k].mean);
        }
        /* A sparse layer's experts, each a SwiGLU MLP of width F. */
        for (long e = 0; sparse && e < experts; e++) {
            static const char *proj[] = {"gate", "up", "down"};
            for (int k = 0; k < 3; k++) {
                snprintf(p, sizeof p, "model.layers.%ld.mlp.experts.%ld.%s_proj.weight", l, e, proj[k]);
                add(p, k < 2 ? F : D, k < 2 ? D : F, 1 / sqrtf((float)(k < 2 ? D : F)), 0);
            }
        }
    }
    add("model.norm.weight", D, 0, 0.1f, norm_mean);
    if (!tied) add("lm_head.weight", V, D, 1 / sqrtf((float)D), 0);
    if (multimodal) {
        /* The language model's tensors move under "language_model."; a
         * vision tower and projector follow (drawn last: the language
         * model's values are those of the text-only checkpoint). */
        for (int i = 0; i < n_tensors; i++) {
            char moved[sizeof tensors[i].name];
            memcpy(moved, tensors[i].name, sizeof moved);
            if (snprintf(tensors[i].name, sizeof tensors[i].name, "language_model.%s", moved) >= (int)sizeof moved)
                die("tensor name too long: %s", moved);
        }
        add("vision_tower.vision_model.embeddings.patch_embedding.weight", 16, 48, 0.1f, 0);
        add("vision_tower.vision_model.post_layernorm.weight", 16, 0, 0.1f, 1);
        add("multi_modal_projector.mm_input_projection_weight", 16, D, 0.1f, 0);
    }

    /* Values are drawn in architectural order, then written in name order. */
    rng_seed(&rng, seed);
    for (int i = 0; i < n_tensors; i++) {
        fill(&tensors[i], dt);
        if (ends_with(tensors[i].name, ".mlp.gate.weight")) tie_rows(&tensors[i], router_groups);
    }
    qsort(tensors, (size_t)n_tensors, sizeof tensors[0], by_name);

    mkdir(dir, 0755);
    write_config(dir, multimodal);
    if (shards == 1) {
        char *path = path_join(dir, "model.safetensors");
        write_safetensors(path, 0, n_tensors, dt);
        free(path);
    } else {
        char *ipath = path_join(dir, "model.safetensors.index.json");
        FILE *idx = fopen(ipath, "w");
        if (!idx) die("%s: cannot create", ipath);
        size_t total = 0;
        for (int i = 0; i < n_tensors; i++) total += tensors[i].nbytes;
        fprintf(idx, "{\n  \"metadata\": {\"total_size\": %zu},\n  \"weight_map\": {\n", total);
        for (int s = 0; s < shards; s++) {
            int first = n_tensors * s / shards, last = n_tensors * (s + 1) / shards;
            char name[64];
            snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
            char *path = path_join(dir, name);
            write_safetensors(path, first, last, dt);
            free(path);
            for (int i = first; i < last; i++)
                fprintf(idx, "    \"%s\": \"%s\"%s\n", tensors[i].name, name, i + 1 < n_tensors ? "," : "");
        }
        fprintf(idx, "  }\n}\n");
        fclose(idx);
        free(ipath);
    }
    for (int i = 0; i < n_tensors; i++) free(tensors[i].data);
    return 0;
}
