/* net.h - the transformer: its weights (mapped from the prepared file that
 * holds them in the layouts the products read, or laid out in memory from
 * the mapped checkpoint), the KV cache of a sequence (keys and values in f32,
 * or rounded to bf16 or q8_0 as they are written), and the forward pass.
 *
 * One forward pass serves every use: a prompt (a block of tokens of one
 * sequence), a single decoding step, or a batch of several sequences at once
 * (the server's slots), each sequence with its own KV cache and position.
 * The weights are read once per pass for all the tokens in it. */
#ifndef NET_H
#define NET_H

#include <pthread.h>
#include <stdbool.h>

#include "config.h"
#include "kernels.h"
#include "moe.h"
#include "prepared.h"
#include "safetensors.h"
#include "threads.h"
#include "util.h"

typedef struct {
    float *attn_norm;          /* [dim] input_layernorm */
    Matrix wq, wk, wv;         /* [n_heads * head_dim, dim], [n_kv_heads * head_dim, dim] x 2 */
    float *bq, *bk, *bv;       /* their biases, or NULL */
    float *q_norm, *k_norm;    /* [head_dim] per-head RMSNorm of q and k (qwen3, gemma3), or NULL */
    Matrix wo;                 /* [dim, n_heads * head_dim] */
    float *bo;                 /* its bias, or NULL */
    float *attn_out_norm;      /* [dim] gemma3's post_attention_layernorm of the attention output, or NULL */
    float *mlp_norm;           /* [dim] post_attention_layernorm (gemma3: pre_feedforward_layernorm) */
    float *mlp_out_norm;       /* [dim] gemma3's post_feedforward_layernorm of the MLP output, or NULL */
    Matrix w_gate, w_up;       /* [hidden_dim, dim] a dense MLP */
    Matrix w_down;             /* [dim, hidden_dim] */
    float *b_gate, *b_up, *b_down; /* their biases, or NULL */
    MoeWeights *moe;           /* a sparse layer's experts in place of the dense MLP (moe.h), else NULL */
} LayerWeights;

typedef struct {
    Matrix embed;              /* [vocab_size, dim] token embeddings */
    LayerWeights *layers;      /* [n_layers] */
    float *final_norm;         /* [dim] */
    Matrix lm_head;            /* [vocab_size, dim]: a copy of embed's view when tied */
} TransformerWeights;

/* The keys and values of one sequence's past tokens: what attention looks
 * back at. Layer after layer, each [n_kv_heads][rows] rows of head_dim
 * values in the cache's format (kernels.h: f32, bf16 or q8_0, rounded as
 * they are written): a full layer has a row per position (rows =
 * capacity), a sliding layer only a ring of rows = ring (position p in row
 * p % ring), enough for its window and the tokens of one forward pass. */
typedef struct {
    void *keys;                /* the layers' rows, one after the other */
    void *values;              /* the same */
    KVType key_type, value_type; /* their formats */
    int capacity;              /* positions it holds */
    int ring;                  /* rows of a sliding layer (capacity when its window does not save any) */
} KVCache;

/* Scratch space for the activations of up to max_tokens tokens. */
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
    float *local_inv_freq;     /* gemma3's sliding layers' own RoPE (else NULL): [head_dim / 2] */
    float *local_cos, *local_sin; /* [max_tokens, head_dim / 2] */
    float *scratch;            /* [n_threads, scratch_floats] attention's working space */
    size_t scratch_floats;
    float *logits;             /* [logits_rows, vocab_size] */
    int logits_rows;
    MoeScratch moe;            /* the sparse layers' working space and routes (moe.h) */
} RunState;

typedef enum { DTYPE_AS_STORED, DTYPE_AS_BF16, DTYPE_AS_F16, DTYPE_AS_F32, DTYPE_AS_Q8, DTYPE_AS_Q4 } DTypeChoice;

typedef struct {
    int context;               /* longest sequence (KV cache capacity); 0: min(max_position_embeddings, 4096) */
    int threads;               /* 0: one per CPU */
    DTypeChoice dtype;         /* the format of the big matrices */
    MathMode math;             /* MATH_BF16: bf16 weights times activations rounded to bf16 */
    bool no_prepared;          /* lay the matrices out in memory at each load: no prepared file (prepared.h) */
    KVType cache_type_k, cache_type_v; /* the KV caches' formats (KV_F32: exact, the default) */
    /* While a prepared file is being made: told its path and the fraction
     * written so far, after each matrix. May be NULL. */
    void (*progress)(void *ctx, const char *path, double done);
    void *progress_ctx;
} ModelOptions;

/* What a probe is shown: one step of the forward pass for a block of
 * n_tokens tokens, rows of `width` floats. */
typedef enum {
    PROBE_EMBEDDING,           /* the token embeddings: the residual stream before layer 0 */
    PROBE_ATTN_NORM,           /* the normalised input of attention */
    PROBE_Q, PROBE_K, PROBE_V, /* queries, keys, values (after norms and RoPE) */
    PROBE_ATTN_HEADS,          /* the heads' outputs, before o_proj */
    PROBE_ATTN_OUT,            /* what attention adds to the residual stream */
    PROBE_RESID_ATTN,          /* the residual stream after attention */
    PROBE_MLP_NORM,            /* the normalised input of the MLP */
    PROBE_MLP_HIDDEN,          /* silu(gate) * up */
    PROBE_MLP_OUT,             /* what the MLP adds */
    PROBE_RESID,               /* the residual stream after the layer */
    PROBE_FINAL_NORM,          /* the final norm's output (layer -1) */
    PROBE_STEPS
} ProbeStep;

const char *probe_step_name(ProbeStep step);

/* Watches a forward pass: the trace of `fwd -v` and the HTML report are
 * probes. Each callback may be NULL. Only single-sequence passes are probed. */
typedef struct {
    void *ctx;
    /* Step `step` of layer `layer` (-1 outside the layers) for tokens at
     * positions pos .. pos + n_tokens - 1: rows[n_tokens][width]. */
    void (*vectors)(void *ctx, ProbeStep step, int layer, int pos, int n_tokens, const float *rows, int width);
    /* Each head's attention weights for the query at position `query`, over
     * keys 0..query: probs[query + 1], for the queries at positions below
     * attention_until. Computing them is extra work done only for the probe. */
    void (*attention)(void *ctx, int layer, int head, int query, const float *probs);
    int attention_until;
    /* The routes of a sparse layer `layer` for tokens at positions
     * pos .. pos + n_tokens - 1: token i's k experts, most probable first,
     * experts[i * k ..], and their weights in its output, weights[i * k ..]. */
    void (*router)(void *ctx, int layer, int pos, int n_tokens, int k, const int *experts, const float *weights);
} Probe;

typedef struct {
    Config config;
    TransformerWeights weights;
    RunState state;
    int max_context;           /* the largest KV cache capacity a forward pass accepts */
    WeightType dtype;          /* format of the big matrices */
    WeightType stored;         /* their format in the checkpoint */
    MathMode math;             /* how bf16 matrices multiply */
    KVType cache_type_k, cache_type_v; /* the format of the keys and values of its KV caches */
    SafeTensors st;            /* the mapped checkpoint */
    char *weights_path;        /* its model.safetensors (or index) */
    PreparedFile prepared;     /* the mapped prepared file the matrices are views into, if any */
    Error prepared_note;       /* why the prepared file was made again or not used, else "" */
    ThreadPool *pool;
    const Probe *probe;        /* when set, forward shows it each step */
} Model;

/* Opens MODEL (a checkpoint folder or a file in it) without reading a
 * weight: config.json, the checkpoint's headers (every tensor's name,
 * dtype and shape), the format the matrices run in, the context. What
 * `info` shows; model_free undoes it. */
int model_open(Model *m, const char *model, const ModelOptions *opt, Error *e);

/* model_open, then the weights, every shape checked, and the scratch space.
 * The matrices are views into the prepared file of the checkpoint in that
 * format (prepared.h), which is made first when it is missing or out of
 * date; with opt->no_prepared, or when no such file can be written, they
 * are laid out in memory instead. */
int model_load(Model *m, const char *model, const ModelOptions *opt, Error *e);
void model_free(Model *m);


/* The weights of a model with config c, stored as `stored`, when it runs
 * as `type` (each matrix in the format loading gives it), on paper: bytes
 * and parameters in all, and what a decoded token reads - every matrix but
 * the embedding table (one row) and, in a sparse layer, the experts not
 * chosen. */
typedef struct {
    size_t bytes;              /* every matrix, every expert */
    size_t bytes_per_token;
    double params;             /* the matrices' parameters (not the norms') */
    double active_params;      /* those a token uses: the embedding, attention, router, chosen experts, head */
} WeightPlan;

void weight_plan(WeightPlan *p, const Config *c, WeightType stored, WeightType type);

/* Bytes of the weights as run, and of a KV cache of `capacity` positions
 * (every full layer's rows, a ring per sliding layer) with keys and values
 * held as key_type and value_type (SIZE_MAX if that is more than memory
 * can address). */
size_t model_weight_bytes(const Model *m);
size_t kv_cache_bytes(const Config *c, int capacity, KVType key_type, KVType value_type);

/* The rows of a sliding layer's ring in a cache of `capacity` positions:
 * its window and the tokens of a forward pass, rounded up to whole key
 * tiles, or capacity if that is not less. */
int kv_cache_ring(const Config *c, int capacity);

/* How many of the `filled` positions of kv a new sequence that shares the
 * first `keep` of them can reuse: keep, or 0 when a sliding layer's ring
 * no longer holds the window before position keep. */
int kv_cache_reusable(const Model *m, const KVCache *kv, int filled, int keep);

/* A KV cache for capacity (<= m->max_context) positions, in the model's
 * formats (m->cache_type_k, m->cache_type_v); free with kv_cache_free. */
void kv_cache_init(KVCache *kv, const Model *m, int capacity);
void kv_cache_free(KVCache *kv);

/* A run of consecutive tokens of one sequence, for forward_batch: tokens[i]
 * is at position pos + i, and positions 0 .. pos - 1 are already in cache. */
typedef struct {
    KVCache *cache;
    const int *tokens;         /* [n_tokens] */
    int n_tokens;
    int pos;
    bool all_logits;           /* the logits of every token, else of the last only */
    float *hidden;             /* when not NULL: [n_tokens][dim] receives each token's final-normed
                                  hidden state (the input of the output head: embeddings) */
} Chunk;

/* Runs the chunks' tokens through the model in one pass (at most
 * state.max_tokens tokens in all; pos + n_tokens <= cache capacity),
 * adding their keys and values to their caches. Returns the logits: for
 * each chunk in order, n_tokens rows if all_logits else one, of vocab_size
 * floats. Every row is exactly what the chunk would get alone. */
float *forward_batch(Model *m, const Chunk *chunks, int n_chunks);

/* One chunk: tokens[0..n) (n <= state.max_tokens) at positions pos.. of kv. */
float *forward(Model *m, KVCache *kv, const int *tokens, int n, int pos, bool all_logits);

/* Any number of tokens, in blocks; returns the last token's logits. */
float *forward_prompt(Model *m, KVCache *kv, const int *tokens, int n, int pos);

/* forward_prompt that also gives every token's logits to `each`, block by
 * block: rows[n_rows][vocab_size] of tokens[first .. first + n_rows). */
typedef void (*LogitRows)(void *ctx, const float *rows, int first, int n_rows);
float *forward_prompt_each(Model *m, KVCache *kv, const int *tokens, int n, int pos, LogitRows each, void *ctx);

/* The logit lens: the final norm and the output head applied to rows of a
 * residual stream, rows[n][dim] -> logits[n][vocab_size] (n <= state.max_tokens). */
void logits_of_residual(Model *m, float *logits, const float *rows, int n);

#endif
