/* config.h - config.json: the architecture of a checkpoint, read and checked.
 *
 * Three families share one transformer; what differs between them is a
 * handful of fields here (which biases exist, a norm on queries and keys,
 * how RoPE's frequencies are scaled), never a second forward pass:
 *
 *   model_type  q/k/v bias  o bias  MLP bias  q/k norm  RoPE scaling
 *   qwen2       yes         no      no        no        none
 *   qwen3       if attention_bias   no        yes       none
 *   llama       if attention_bias   mlp_bias  no        none or llama3
 */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "util.h"

#define MAX_EOS_IDS 8

typedef enum { ARCH_QWEN2, ARCH_QWEN3, ARCH_LLAMA } Architecture;

/* Llama 3.1's RoPE scaling ("rope_type": "llama3"): long wavelengths are
 * slowed down by `factor`, short ones kept, the band between blended. */
typedef struct {
    bool enabled;
    float factor;
    float low_freq_factor;
    float high_freq_factor;
    int original_max_pos;      /* original_max_position_embeddings */
} RopeScaling;

typedef struct {
    Architecture arch;         /* model_type */
    int dim;                   /* hidden_size: width of the residual stream */
    int hidden_dim;            /* intermediate_size: width of the MLP */
    int n_layers;              /* num_hidden_layers */
    int n_heads;               /* num_attention_heads: query heads */
    int n_kv_heads;            /* num_key_value_heads: each serves n_heads / n_kv_heads queries */
    int head_dim;              /* head_dim, or hidden_size / num_attention_heads */
    int vocab_size;
    int max_pos;               /* max_position_embeddings */
    float rope_theta;          /* RoPE base frequency */
    RopeScaling rope_scaling;
    float norm_eps;            /* rms_norm_eps */
    bool qkv_bias;             /* q_proj, k_proj and v_proj have biases */
    bool o_bias;               /* o_proj has a bias */
    bool mlp_bias;             /* gate_proj, up_proj and down_proj have biases */
    bool qk_norm;              /* an RMSNorm over each head of q and of k, before RoPE */
    bool tied_embeddings;      /* tie_word_embeddings: the output head is the embedding matrix */
    int bos_id;                /* bos_token_id, or -1 */
    int eos_ids[MAX_EOS_IDS];  /* eos_token_id (a number or a list) */
    int n_eos;
} Config;

/* Reads and checks config.json: every field present, in range, consistent,
 * and an architecture run implements. */
int config_load(Config *c, const char *path, Error *e);

/* The same checks on the text of a config.json already in memory (which
 * need not be NUL-terminated); `label` names it in errors. */
int config_parse(Config *c, const char *text, size_t len, const char *label, Error *e);

/* eos_token_id of a config.json or generation_config.json (root): absent
 * (leaves *n_ids as it is), one id, or a list of ids. */
int read_eos_ids(const char *path, const JsonValue *root, int ids[MAX_EOS_IDS], int *n_ids, Error *e);

/* "Qwen2", "Qwen3" or "Llama". */
const char *architecture_name(Architecture a);

/* The rotation frequency of each pair of a head's dimensions:
 * inv_freq[j] = theta^(-2j / head_dim) radians per position, rescaled as
 * rope_scaling says; computed in float32, as transformers does. */
void rope_frequencies(float *inv_freq, const Config *c);

#endif
