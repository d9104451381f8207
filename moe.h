/* moe.h - the mixture-of-experts MLP of qwen3_moe (transformers'
 * Qwen3MoeSparseMoeBlock).
 *
 * A sparse layer has n_experts experts, each a SwiGLU MLP of its own
 * (down(silu(gate(x)) * up(x)), width moe_intermediate_size), and a router,
 * a matrix that gives each expert a score for the token. The softmax of the
 * scores is a probability per expert; the token goes to the n_used most
 * probable (chosen as torch.topk chooses, ties included: see top_experts),
 * and its output is the sum of their outputs, each weighted by its
 * probability (by its share of the chosen ones' sum when norm_topk_prob).
 * So a token reads n_used experts, not all of them.
 *
 * The experts are ordinary Matrix values, one per checkpoint tensor
 * (mlp.experts.E.gate_proj.weight ...), in the format and grouped layout of
 * the other matrices; the router stays in its stored format and is
 * multiplied exactly (it decides, so it is not rounded, as llama.cpp keeps
 * it too). A block of tokens is grouped by expert: each expert's tokens are
 * gathered into consecutive rows and go through its matrices in one
 * product, so an expert's weights are read once per block, and the products
 * of all the chosen experts run in one pass of the thread pool. Each token's
 * result is then added up over its experts in increasing expert number (the
 * order transformers adds them in), so it does not depend on which other
 * tokens share the block. */
#ifndef MOE_H
#define MOE_H

#include "config.h"
#include "kernels.h"
#include "threads.h"

typedef struct {
    Matrix gate, up;           /* [hidden_dim, dim] */
    Matrix down;               /* [dim, hidden_dim] */
} Expert;

/* The MLP of a sparse layer. */
typedef struct {
    Matrix router;             /* [n_experts, dim] mlp.gate: each expert's score */
    Expert *experts;           /* [n_experts] */
} MoeWeights;

/* Working space for blocks of up to max_tokens tokens, and the router's
 * choices for the latest block. Rows: a token's input once per expert it
 * goes to, grouped by expert (max_tokens * n_used rows). */
typedef struct {
    int max_tokens;
    float *probs;              /* [max_tokens][n_experts] the router's scores, then the softmax of them */
    int *chosen;               /* [max_tokens][n_used] each token's experts, most probable first */
    float *weight;             /* [max_tokens][n_used] the weight of each in the token's output */
    int *first_row;            /* [n_experts + 1] the first row of each expert's tokens */
    int *next_row;             /* [n_experts] grouping's count */
    int *token_of;             /* [rows] the token of each row */
    float *weight_of;          /* [rows] the weight of the row's expert for its token */
    float *x;                  /* [rows][dim] the inputs, grouped by expert */
    float *gate, *up;          /* [rows][hidden_dim] gate(x), up(x); then silu(gate) * up in gate */
    float *y;                  /* [rows][dim] each expert's output */
    MatmulProduct *products;   /* [2 * n_experts] */
    struct ExpertCandidate *candidates; /* [n_experts] top_experts' working space */
} MoeScratch;

void moe_scratch_init(MoeScratch *s, const Config *c, int max_tokens);
void moe_scratch_free(MoeScratch *s);

/* out[t] = the mixture's output for x[t], for the n tokens of a block
 * (n <= s->max_tokens; x and out are [n][dim]); s->chosen and s->weight
 * then hold each token's route. */
void moe_forward(float *out, const float *x, int n, const MoeWeights *w, const Config *c, MoeScratch *s,
                 ThreadPool *pool);

/* An expert in the running, for top_experts. */
typedef struct ExpertCandidate {
    float prob;
    int expert;
} ExpertCandidate;

/* The k most probable of n_experts experts, most probable first, exactly as
 * PyTorch's torch.topk on the CPU picks and orders them - equal
 * probabilities included, which it leaves in the order its selection
 * algorithm happens to leave them, not by expert number. That order is
 * libstdc++'s: std::nth_element to put the k-th in place, then std::sort of
 * those before it when k * 64 > n_experts (every Qwen3-MoE release:
 * 8 of 128), else std::partial_sort, each under "greater probability; NaN
 * first". `work` has room for n_experts candidates. */
void top_experts(int *chosen, const float *probs, int n_experts, int k, ExpertCandidate *work);

/* The bytes of a sparse layer's weights as run, and of what one token
 * reads of them (the router and n_used experts). */
size_t moe_weight_bytes(const MoeWeights *w, const Config *c);
size_t moe_bytes_per_token(const MoeWeights *w, const Config *c);

void moe_weights_free(MoeWeights *w, const Config *c);

#endif
