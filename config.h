/* config.h - config.json: the architecture of a checkpoint, read and checked.
 *
 * The families share one transformer; what differs between them is a
 * handful of fields here (which biases exist, a norm on queries and keys,
 * how RoPE's frequencies are scaled, experts in place of an MLP, which
 * layers see only a window of the past), never a second forward pass:
 *
 *   model_type   q/k/v bias  o bias  MLP bias  q/k norm  MLP              sliding layers
 *   qwen2        yes         no      no        no        SwiGLU           none
 *   qwen3        if attention_bias   no        yes       SwiGLU           none
 *   llama        if attention_bias   mlp_bias  no        SwiGLU           none
 *   qwen3_moe    if attention_bias   no        yes       experts (MoeConfig) none
 *   mistral      no          no      no        no        SwiGLU           all, if sliding_window
 *   gemma3_text  if attention_bias   no        yes       GELU-tanh gated  from layer_types
 *
 * RoPE scaling: none or linear for all, llama3 for llama.
 *
 * Gemma 3 (transformers' modeling_gemma3) also scales the embeddings by
 * sqrt(hidden_size), keeps RMSNorm weights as w of x * (1 + w), puts
 * "sandwich" norms on the attention and MLP outputs, scales scores by
 * query_pre_attn_scalar^-0.5, may soft-cap scores and logits, and gives its
 * sliding layers their own unscaled RoPE base. Its image-text checkpoints
 * (model_type "gemma3", Gemma3ForConditionalGeneration) hold the same
 * language model under "text_config"; run uses that and not the vision tower.
 */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "util.h"

#define MAX_EOS_IDS 8

typedef enum { ARCH_QWEN2, ARCH_QWEN3, ARCH_LLAMA, ARCH_QWEN3_MOE, ARCH_MISTRAL, ARCH_GEMMA3 } Architecture;

/* The MLP's gate activation: silu (SwiGLU) or GELU's tanh form (gelu_pytorch_tanh). */
typedef enum { ACT_SILU, ACT_GELU_TANH } Activation;

enum { MAX_LAYERS = 1024 };

/* A mixture of experts (qwen3_moe, transformers' Qwen3MoeSparseMoeBlock):
 * in a sparse layer the MLP is n_experts SwiGLU MLPs ("experts") of width
 * hidden_dim, and a router that picks n_used of them for each token. */
typedef struct {
    int n_experts;             /* num_experts (0: no sparse layer) */
    int n_used;                /* num_experts_per_tok */
    int hidden_dim;            /* moe_intermediate_size */
    bool norm_topk_prob;       /* the chosen experts' weights are rescaled to sum to 1 */
    int sparse_step;           /* decoder_sparse_step: layer l may be sparse when (l + 1) % step == 0 */
    uint64_t dense[MAX_LAYERS / 64]; /* bit l: layer l is in mlp_only_layers (a dense MLP) */
} MoeConfig;

/* RoPE scaling: none; "linear" (every frequency divided by `factor`); or
 * Llama 3.1's "llama3" (long wavelengths slowed down by `factor`, short
 * ones kept, the band between blended). */
typedef enum { ROPE_PLAIN, ROPE_LINEAR, ROPE_LLAMA3 } RopeKind;

typedef struct {
    RopeKind kind;
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
    MoeConfig moe;             /* qwen3_moe's experts, else all 0 */
    Activation act;            /* the MLP's gate activation */
    int sliding_window;        /* a sliding layer's query sees the last this many positions (0: all of them) */
    uint64_t sliding[MAX_LAYERS / 64]; /* bit l: layer l is a sliding layer */
    float rope_local_theta;    /* gemma3: the sliding layers' RoPE base, unscaled (0: they use rope_theta as the others) */
    float attn_scale;          /* a score is q . k times this: 1/sqrt(head_dim), or query_pre_attn_scalar^-0.5 */
    float attn_softcap;        /* 0, or scores become cap * tanh(score / cap) (attn_logit_softcapping) */
    float final_softcap;       /* 0, or logits become cap * tanh(logit / cap) (final_logit_softcapping) */
    float embed_scale;         /* embeddings are multiplied by this: 1, or gemma3's sqrt(hidden_size) */
    bool norm_plus_one;        /* the RMSNorm weights w scale by (1 + w) (gemma3) */
    bool sandwich_norms;       /* norms on the attention and MLP outputs, and pre_feedforward_layernorm before the MLP */
    bool multimodal;           /* an image-text checkpoint: the language model's tensors under "language_model" */
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

/* Whether layer l's MLP is a mixture of experts (else a dense MLP). */
bool layer_is_sparse(const Config *c, int l);

/* Whether layer l is a sliding layer (a window of the past, gemma3's local RoPE). */
bool layer_is_sliding(const Config *c, int l);

/* "Qwen2", "Qwen3", "Llama", "Qwen3-MoE", "Mistral" or "Gemma3". */
const char *architecture_name(Architecture a);

/* The rotation frequency of each pair of a head's dimensions:
 * inv_freq[j] = theta^(-2j / head_dim) radians per position, rescaled as
 * rope_scaling says; computed in float32, as transformers does. `local`:
 * gemma3's sliding layers' frequencies (rope_local_theta, unscaled). */
void rope_frequencies(float *inv_freq, const Config *c, bool local);

#endif
