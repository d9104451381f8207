/* moe.c - the mixture-of-experts MLP: the router's choice of experts (as
 * torch.topk makes it), the grouping of a block's tokens by expert, and the
 * experts' products. */
#include "moe.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- the choice of experts, as torch.topk makes it ----
 *
 * PyTorch's CPU topk pairs each value with its index and hands the pairs to
 * libstdc++ under a comparison of the values alone, so equal values come out
 * in whatever order the algorithm leaves them. The functions below take the
 * same steps as libstdc++'s (bits/stl_algo.h, bits/stl_heap.h: introselect,
 * introsort, the binary heap), comparison for comparison and move for move,
 * so that they leave equal values where it does. */

typedef ExpertCandidate Candidate;

/* torch.topk's "comes before": a greater probability, NaN before any number. */
static bool before(Candidate a, Candidate b) { return (isnan(a.prob) && !isnan(b.prob)) || a.prob > b.prob; }

static void swap(Candidate *a, Candidate *b) {
    Candidate t = *a;
    *a = *b;
    *b = t;
}

/* floor(log2(n)) for n >= 1. */
static int log2_floor(int n) {
    int l = 0;
    while (n >>= 1) l++;
    return l;
}

/* -- the binary heap: h[0] is the candidate that comes last -- */

/* Moves v up from the hole towards `top` past the parents it comes after. */
static void heap_push(Candidate *h, int hole, int top, Candidate v) {
    int parent = (hole - 1) / 2;
    while (hole > top && before(h[parent], v)) {
        h[hole] = h[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = v;
}

/* Fills the hole by moving it down to a leaf along the children that come
 * later, then puts v there and moves it up. */
static void heap_adjust(Candidate *h, int hole, int len, Candidate v) {
    int top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (before(h[child], h[child - 1])) child--;
        h[hole] = h[child];
        hole = child;
    }
    if (len % 2 == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    heap_push(h, hole, top, v);
}

static void heap_make(Candidate *h, int len) {
    for (int parent = (len - 2) / 2; len >= 2 && parent >= 0; parent--) heap_adjust(h, parent, len, h[parent]);
}

/* Puts the heap's top into *out and the candidate that was in *out into the heap. */
static void heap_pop_into(Candidate *h, int len, Candidate *out) {
    Candidate v = *out;
    *out = h[0];
    heap_adjust(h, 0, len, v);
}

/* The `middle` first of a[0..n) after a[middle..n) was offered to their heap
 * (std::partial_sort's selection). */
static void heap_select(Candidate *a, int middle, int n) {
    heap_make(a, middle);
    for (int i = middle; i < n; i++)
        if (before(a[i], a[0])) heap_pop_into(a, middle, &a[i]);
}

static void heap_sort(Candidate *h, int len) {
    for (; len > 1; len--) heap_pop_into(h, len - 1, &h[len - 1]);
}

/* -- partitions and insertion sorts -- */

/* a[i] moves left past the candidates it comes before (a[0] stops it). */
static void insert_unguarded(Candidate *a, int i) {
    Candidate v = a[i];
    for (; before(v, a[i - 1]); i--) a[i] = a[i - 1];
    a[i] = v;
}

static void insertion_sort(Candidate *a, int n) {
    for (int i = 1; i < n; i++) {
        if (before(a[i], a[0])) {
            Candidate v = a[i];
            memmove(a + 1, a, (size_t)i * sizeof *a);
            a[0] = v;
        } else {
            insert_unguarded(a, i);
        }
    }
}

/* Swaps into a[0] the median of a[1], a[mid] and a[n - 1]. */
static void median_to_first(Candidate *a, int x, int y, int z) {
    if (before(a[x], a[y])) {
        if (before(a[y], a[z])) swap(&a[0], &a[y]);
        else if (before(a[x], a[z])) swap(&a[0], &a[z]);
        else swap(&a[0], &a[x]);
    } else if (before(a[x], a[z])) {
        swap(&a[0], &a[x]);
    } else if (before(a[y], a[z])) {
        swap(&a[0], &a[z]);
    } else {
        swap(&a[0], &a[y]);
    }
}

/* Splits a[0..n) around the median of three moved to a[0]: returns cut,
 * with a[1..cut) not after the pivot and a[cut..n) not before it. */
static int partition(Candidate *a, int n) {
    median_to_first(a, 1, n / 2, n - 1);
    int first = 1, last = n;
    for (;;) {
        while (before(a[first], a[0])) first++;
        last--;
        while (before(a[0], a[last])) last--;
        if (first >= last) return first;
        swap(&a[first], &a[last]);
        first++;
    }
}

/* std::sort: quicksort down to runs of 16 (heapsort past a depth limit),
 * then insertion sort over the whole. */
static void quicksort_runs(Candidate *a, int n, int depth) {
    while (n > 16) {
        if (depth == 0) {
            heap_select(a, n, n);
            heap_sort(a, n);
            return;
        }
        depth--;
        int cut = partition(a, n);
        quicksort_runs(a + cut, n - cut, depth);
        n = cut;
    }
}

static void sort_candidates(Candidate *a, int n) {
    if (n == 0) return;
    quicksort_runs(a, n, 2 * log2_floor(n));
    if (n <= 16) {
        insertion_sort(a, n);
        return;
    }
    insertion_sort(a, 16);
    for (int i = 16; i < n; i++) insert_unguarded(a, i);
}

/* std::nth_element: a[nth] is the candidate a sort would put there, none
 * before it comes after it and none after it comes before it. */
static void nth_element(Candidate *a, int nth, int n) {
    if (nth == n) return;
    int first = 0, last = n, depth = 2 * log2_floor(n);
    while (last - first > 3) {
        if (depth == 0) {
            heap_select(a + first, nth + 1 - first, last - first);
            swap(&a[first], &a[nth]);
            return;
        }
        depth--;
        int cut = first + partition(a + first, last - first);
        if (cut <= nth) first = cut;
        else last = cut;
    }
    insertion_sort(a + first, last - first);
}

void top_experts(int *chosen, const float *probs, int n_experts, int k, ExpertCandidate *work) {
    Candidate *a = work;
    for (int e = 0; e < n_experts; e++) a[e] = (Candidate){.prob = probs[e], .expert = e};
    if ((long)k * 64 <= n_experts) {
        heap_select(a, k, n_experts);
        heap_sort(a, k);
    } else {
        nth_element(a, k - 1, n_experts);
        sort_candidates(a, k - 1);
    }
    for (int j = 0; j < k; j++) chosen[j] = a[j].expert;
}

/* ---- scratch space ---- */

void moe_scratch_init(MoeScratch *s, const Config *c, int max_tokens) {
    const MoeConfig *moe = &c->moe;
    size_t T = (size_t)max_tokens, rows = T * (size_t)moe->n_used, E = (size_t)moe->n_experts;
    s->max_tokens = max_tokens;
    s->probs = xcalloc_aligned(T * E, sizeof(float));
    s->chosen = xcalloc(rows, sizeof(int));
    s->weight = xcalloc(rows, sizeof(float));
    s->first_row = xcalloc(E + 1, sizeof(int));
    s->next_row = xcalloc(E, sizeof(int));
    s->token_of = xcalloc(rows, sizeof(int));
    s->weight_of = xcalloc(rows, sizeof(float));
    s->x = xcalloc_aligned(rows * (size_t)c->dim, sizeof(float));
    s->gate = xcalloc_aligned(rows * (size_t)moe->hidden_dim, sizeof(float));
    s->up = xcalloc_aligned(rows * (size_t)moe->hidden_dim, sizeof(float));
    s->y = xcalloc_aligned(rows * (size_t)c->dim, sizeof(float));
    s->products = xcalloc(2 * E, sizeof(MatmulProduct));
    s->candidates = xcalloc(E, sizeof *s->candidates);
}

void moe_scratch_free(MoeScratch *s) {
    void *bufs[] = {s->chosen, s->weight, s->first_row, s->next_row, s->token_of, s->weight_of, s->products, s->candidates};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    float *aligned[] = {s->probs, s->x, s->gate, s->up, s->y};
    for (size_t i = 0; i < sizeof aligned / sizeof aligned[0]; i++) xfree_aligned(aligned[i]);
    memset(s, 0, sizeof *s);
}

/* ---- the forward pass ---- */

/* Each token's experts and their weights, from the router's scores. */
static void route(MoeScratch *s, int n, const MoeConfig *moe) {
    int E = moe->n_experts, k = moe->n_used;
    for (int t = 0; t < n; t++) {
        float *probs = s->probs + (size_t)t * E, *weight = s->weight + (size_t)t * k;
        int *chosen = s->chosen + (size_t)t * k;
        softmax(probs, E);
        top_experts(chosen, probs, E, k, s->candidates);
        float sum = 0;
        for (int j = 0; j < k; j++) sum += weight[j] = probs[chosen[j]];
        if (moe->norm_topk_prob)
            for (int j = 0; j < k; j++) weight[j] /= sum;
    }
}

/* The rows of expert e's tokens. */
static int expert_rows(const MoeScratch *s, int e) { return s->first_row[e + 1] - s->first_row[e]; }

/* Expert e's input: the rows of its tokens, or, for an expert with one
 * token, that token's row of x in place, so that experts in a row with the
 * same token (all of them, when decoding) share one preparation of it. */
static const float *expert_input(const MoeScratch *s, const float *x, int e, int dim) {
    int first = s->first_row[e];
    return expert_rows(s, e) == 1 ? x + (size_t)s->token_of[first] * dim : s->x + (size_t)first * dim;
}

/* Gives each (token, choice) a row, the rows of each expert together in
 * token order, and copies the token's input there (but for an expert that
 * reads it in place, see expert_input). */
static void group_by_expert(MoeScratch *s, const float *x, int n, const Config *c) {
    int E = c->moe.n_experts, k = c->moe.n_used;
    memset(s->first_row, 0, ((size_t)E + 1) * sizeof *s->first_row);
    for (int i = 0; i < n * k; i++) s->first_row[s->chosen[i] + 1]++;
    for (int e = 0; e < E; e++) s->first_row[e + 1] += s->first_row[e];
    memcpy(s->next_row, s->first_row, (size_t)E * sizeof *s->next_row);
    for (int t = 0; t < n; t++)
        for (int j = 0; j < k; j++) {
            int e = s->chosen[t * k + j], row = s->next_row[e]++;
            s->token_of[row] = t;
            s->weight_of[row] = s->weight[t * k + j];
            if (expert_rows(s, e) > 1) memcpy(s->x + (size_t)row * c->dim, x + (size_t)t * c->dim, (size_t)c->dim * sizeof(float));
        }
}

void moe_forward(float *out, const float *x, int n, const MoeWeights *w, const Config *c, MoeScratch *s,
                 ThreadPool *pool) {
    int E = c->moe.n_experts, rows = n * c->moe.n_used, dim = c->dim, hidden = c->moe.hidden_dim;

    /* The router scores every expert; each token takes the most probable. */
    matmul(s->probs, x, &w->router, n, pool);
    route(s, n, &c->moe);

    /* Each chosen expert's tokens go through its SwiGLU MLP together: the
     * gate and up products of every expert in one pass (an expert's two
     * share their prepared input), then the down products. */
    group_by_expert(s, x, n, c);
    MatmulProduct *p = s->products;
    int m = 0;
    for (int e = 0; e < E; e++) {
        int first = s->first_row[e], count = expert_rows(s, e);
        if (count == 0) continue;
        const float *in = expert_input(s, x, e, dim);
        p[m++] = (MatmulProduct){s->gate + (size_t)first * hidden, in, &w->experts[e].gate, count};
        p[m++] = (MatmulProduct){s->up + (size_t)first * hidden, in, &w->experts[e].up, count};
    }
    matmul_batch(p, m, pool);
    swiglu(s->gate, s->up, (size_t)rows * hidden, pool);
    m = 0;
    for (int e = 0; e < E; e++) {
        int first = s->first_row[e], count = s->first_row[e + 1] - first;
        if (count > 0) p[m++] = (MatmulProduct){s->y + (size_t)first * dim, s->gate + (size_t)first * hidden, &w->experts[e].down, count};
    }
    matmul_batch(p, m, pool);

    /* Each token's output: its experts' outputs times their weights, added
     * up in increasing expert number (the order of the rows). */
    memset(out, 0, (size_t)n * dim * sizeof(float));
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)s->token_of[r] * dim;
        const float *y = s->y + (size_t)r * dim;
        for (int d = 0; d < dim; d++) o[d] += s->weight_of[r] * y[d];
    }
}

/* ---- the weights ---- */

static size_t expert_bytes(const Expert *x) { return matrix_bytes(&x->gate) + matrix_bytes(&x->up) + matrix_bytes(&x->down); }

size_t moe_weight_bytes(const MoeWeights *w, const Config *c) {
    size_t total = matrix_bytes(&w->router);
    for (int e = 0; e < c->moe.n_experts; e++) total += expert_bytes(&w->experts[e]);
    return total;
}

size_t moe_bytes_per_token(const MoeWeights *w, const Config *c) {
    return matrix_bytes(&w->router) + (size_t)c->moe.n_used * expert_bytes(&w->experts[0]);
}

void moe_weights_free(MoeWeights *w, const Config *c) {
    matrix_free(&w->router);
    for (int e = 0; w->experts && e < c->moe.n_experts; e++) {
        matrix_free(&w->experts[e].gate);
        matrix_free(&w->experts[e].up);
        matrix_free(&w->experts[e].down);
    }
    free(w->experts);
}
