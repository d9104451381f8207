/* net.h - the Qwen2 transformer: its configuration, its weights (views into
 * the mapped checkpoint, or converted copies), the state a forward pass needs
 * (activations and the KV cache), and the forward pass itself. */
#ifndef NET_H
#define NET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "json.h"
#include "kernels.h"
#include "safetensors.h"
#include "threads.h"
#include "util.h"

#define MAX_EOS_IDS 8

typedef struct {
    int dim;              /* hidden_size: width of the residual stream */
    int hidden_dim;       /* intermediate_size: width of the MLP */
    int n_layers;         /* num_hidden_layers */
    int n_heads;          /* num_attention_heads: query heads */
    int n_kv_heads;       /* num_key_value_heads: each serves n_heads / n_kv_heads queries */
    int head_dim;         /* head_dim, or hidden_size / num_attention_heads */
    int vocab_size;
    int max_pos;          /* max_position_embeddings */
    float rope_theta;     /* RoPE base frequency */
    float norm_eps;       /* rms_norm_eps */
    bool tied_embeddings; /* tie_word_embeddings: the output head is the embedding matrix */
    int bos_id;           /* bos_token_id, or -1 (ids past the vocabulary are never produced) */
    int eos_ids[MAX_EOS_IDS]; /* eos_token_id (a number or a list) */
    int n_eos;
} Config;

/* eos_token_id of a config.json or generation_config.json (root): absent
 * (leaves *n_ids as it is), one id, or a list of ids. */
int read_eos_ids(const char *path, const JsonValue *root, int ids[MAX_EOS_IDS], int *n_ids, Error *e);

/* Reads and checks config.json: every field present, in range, consistent. */
int config_load(Config *c, const char *path, Error *e);

/* The same checks on the text of a config.json already in memory (which
 * need not be NUL-terminated); `label` names it in errors. */
int config_parse(Config *c, const char *text, size_t len, const char *label, Error *e);

typedef struct {
    float *attn_norm;          /* [dim] input_layernorm */
    Matrix wq, wk, wv;         /* [n_heads * head_dim, dim], [n_kv_heads * head_dim, dim] x 2 */
    float *bq, *bk, *bv;       /* their biases, or NULL */
    Matrix wo;                 /* [dim, n_heads * head_dim] */
    float *mlp_norm;           /* [dim] post_attention_layernorm */
    Matrix w_gate, w_up;       /* [hidden_dim, dim] */
    Matrix w_down;             /* [dim, hidden_dim] */
} LayerWeights;

typedef struct {
    Matrix embed;              /* [vocab_size, dim] token embeddings */
    LayerWeights *layers;      /* [n_layers] */
    float *final_norm;         /* [dim] */
    Matrix lm_head;            /* [vocab_size, dim]: a copy of embed's view when tied */
} TransformerWeights;

/* Activations for a block of up to max_tokens tokens, and the KV cache. */
typedef struct {
    int max_tokens;            /* tokens per forward call */
    float *x;                  /* [max_tokens, dim] residual stream */
    float *xb;                 /* [max_tokens, dim] normalised input of a sublayer */
    float *q;                  /* [max_tokens, n_heads * head_dim] */
    float *k, *v;              /* [max_tokens, n_kv_heads * head_dim] */
    float *att;                /* [max_tokens, n_heads * head_dim] attention output */
    float *out;                /* [max_tokens, dim] a sublayer's output */
    float *gate, *up;          /* [max_tokens, hidden_dim] */
    float *inv_freq;           /* [head_dim / 2] RoPE frequency of each pair */
    float *rope_cos, *rope_sin;/* [max_tokens, head_dim / 2] at each token's position */
    float *scores;             /* [n_threads, scratch_floats] attention's scratch space */
    size_t scratch_floats;
    float *key_cache;          /* [n_layers, n_kv_heads, seq_len, head_dim] */
    float *value_cache;        /* same */
    float *logits;             /* [logits_rows, vocab_size] */
    int logits_rows;
} RunState;

typedef struct {
    int context;               /* KV cache length; 0: min(max_position_embeddings, 4096) */
    int threads;               /* 0: one per CPU */
    const char *dtype;         /* "bf16", "f16", "f32", "q8", or NULL: as stored */
} ModelOptions;

typedef struct {
    Config config;
    TransformerWeights weights;
    RunState state;
    int seq_len;               /* context length: positions the KV cache holds */
    WeightType dtype;          /* format of the big matrices */
    SafeTensors st;            /* the mapped checkpoint */
    ThreadPool *pool;
    pthread_t warm_up;         /* the thread mapping the weights in, see model_warm_up */
    bool warming_up;
    FILE *trace;               /* when set, forward prints each layer's values here */
    int trace_level;           /* 1: first 4 values and norms; 2: more */
} Model;

/* Loads MODEL (a checkpoint folder or a file in it): config, weights with
 * every shape checked, and the run state. */
int model_load(Model *m, const char *model, const ModelOptions *opt, Error *e);
void model_free(Model *m);

/* Starts mapping every page of the weights in on a background thread, so
 * that the first forward pass (which waits for it) does not stop at each
 * page for a fault, and whatever the caller does meanwhile (loading the
 * tokenizer) overlaps with it. */
void model_warm_up(Model *m);

/* Bytes of the weights as run, and of the KV cache. */
size_t model_weight_bytes(const Model *m);
size_t model_kv_bytes(const Model *m);

/* Runs tokens[0..n) at positions pos..pos+n-1 (n <= state.max_tokens,
 * pos + n <= seq_len), adding them to the KV cache. Returns the logits of the
 * last token [vocab_size], or of every token [n, vocab_size] if all_logits. */
float *forward(Model *m, const int *tokens, int n, int pos, bool all_logits);

/* Feeds any number of tokens in blocks; returns the last token's logits. */
float *forward_prompt(Model *m, const int *tokens, int n, int pos);

#endif
