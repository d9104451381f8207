/* kernels_path.h - inside the kernels: what each kernel path (plain C,
 * AVX2, AVX-512) provides, and the scalar definitions they all share. Only
 * kernels*.c include it; kernels.h is the public surface. */
#ifndef KERNELS_PATH_H
#define KERNELS_PATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* Activations rounded to int8 per block of QUANT_BLOCK (quantized formats). */
typedef struct {
    const int8_t *q;        /* [n][cols] */
    const float *scale;     /* [n][cols / QUANT_BLOCK]: x ~ q * scale */
    const int32_t *sum;     /* [n][cols / QUANT_BLOCK]: sum of q over the block */
} QuantizedRows;

/* Activations of the float formats as the products take them: tokens in
 * tiles of TOKEN_TILE (the last tile holds the rest), each tile column by
 * column, so that a kernel broadcasts x[t][k] of the tile's tokens from
 * consecutive addresses. For n tokens of K values, tile i starts at token
 * TOKEN_TILE * i, at xp + TOKEN_TILE * i * K, and holds
 * w = tile_width(n, TOKEN_TILE * i) tokens as [k][w]. One token's tile is x
 * itself. For bf16 arithmetic the values are x rounded to bf16, as floats;
 * or, where a path multiplies with the BF16 dot product (bf16_pairs below),
 * as that instruction's operand: a tile holds [pair c][w] 32-bit words, the
 * bf16 of x[2c] in the low half and of x[2c+1] (0 past the last column) in
 * the high half, token t's word of pair c at the index tile_index(n, K, t, c)
 * gives in floats. */
enum { TOKEN_TILE = 12 };

static inline int tile_width(int n, int t) {
    int first = t - t % TOKEN_TILE;
    return n - first < TOKEN_TILE ? n - first : TOKEN_TILE;
}

static inline size_t tile_index(int n, int K, int t, int k) {
    size_t first = (size_t)(t - t % TOKEN_TILE);
    return first * (size_t)K + (size_t)k * (size_t)tile_width(n, t) + (size_t)(t % TOKEN_TILE);
}

/* Where weight (r, k) of a grouped f32, f16 or bf16 matrix is (in values). */
static inline size_t grouped_index(const Matrix *w, int r, int k) {
    size_t group = (size_t)(r / ROW_GROUP), lane = (size_t)(r % ROW_GROUP);
    if (w->type != WEIGHT_BF16) return (group * (size_t)w->cols + (size_t)k) * ROW_GROUP + lane;
    size_t pairs = ((size_t)w->cols + 1) / 2;
    return ((group * pairs + (size_t)(k / 2)) * ROW_GROUP + lane) * 2 + (size_t)(k % 2);
}

/* Bytes of one group of 16 rows of a grouped f32, f16 or bf16 matrix. */
static inline size_t group_bytes(WeightType type, int K) {
    return type == WEIGHT_F32 ? (size_t)K * 64 : type == WEIGHT_F16 ? (size_t)K * 32 : ((size_t)K + 1) / 2 * 64;
}

/* Tokens per block of a product: the block's activations (about 1 MB) stay
 * in the cache while the groups of rows go by; a whole number of tiles. */
static inline int token_block(int K) {
    int block = (1 << 20) / (4 * K) / TOKEN_TILE * TOKEN_TILE;
    return block > TOKEN_TILE ? block : TOKEN_TILE;
}

/* Spreads the prefetch of `lines` cache lines from p evenly over `steps`
 * steps: at each step, prefetches the lines now due (`due` carries the
 * remainder) and returns where the next line is. */
static inline const char *prefetch_step(const char *p, int lines, int steps, int *due) {
    for (*due += lines; *due >= steps && steps > 0; *due -= steps, p += 64) __builtin_prefetch(p, 0, 3);
    return p;
}

/* One path's kernels. Row ranges [r0, r1) are whole row groups (r0 a
 * multiple of ROW_GROUP, r1 too unless it is w->rows). */
typedef struct {
    const char *name;
    /* out[t][r] for r0 <= r < r1, t < n: weights f32, f16 or bf16 (math
     * exact, grouped), activations fp32 in tiles, the order of k. out is
     * [n][w->rows]. */
    void (*matmul_float)(float *out, const float *xp, const Matrix *w, int n, int r0, int r1);
    /* The same with bf16 weights and bf16 arithmetic (activations in tiles,
     * rounded to bf16). */
    void (*matmul_bf16)(float *out, const float *xp, const Matrix *w, int n, int r0, int r1);
    /* Whether matmul_bf16 takes its activations as column pairs (see the
     * tiles above); NULL: as floats. */
    bool (*bf16_pairs)(void);
    /* The same for q8 and q4 weights and quantized activations. */
    void (*matmul_quant)(float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1);
    /* One token's activations x[cols] rounded per block (cols a multiple of
     * QUANT_BLOCK): scale = max|x| / 127, q = round(x * (1 / scale)). */
    void (*quantize_row)(int8_t *q, float *scale, int32_t *sum, const float *x, int cols);
    /* attend() of kernels.h. */
    void (*attend)(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values,
                   int group, int hd, const AttendSpec *spec, float *scratch);
    /* n values of KV cache rows of type t (whole rows) as floats:
     * kv_rows_load() of kernels.h. */
    void (*kv_load)(float *out, KVType t, const void *rows, size_t n);
    /* gate[i] = gate[i] / (1 + e^-gate[i]) * up[i] for i < n. */
    void (*swiglu)(float *gate, const float *up, size_t n);
    /* gate[i] = gelu(gate[i]) * up[i] for i < n, as gelu_step says. */
    void (*gelu)(float *gate, const float *up, size_t n);
    /* softmax() of kernels.h. */
    void (*softmax)(float *x, int n);
} KernelPath;

extern const KernelPath kernels_plain, kernels_avx2, kernels_avx512;

/* The AVX2 path's kernels that the AVX-512 path uses as they are. */
void avx2_quantize_row(int8_t *q, float *scale, int32_t *sum, const float *x, int cols);
void avx2_swiglu(float *gate, const float *up, size_t n);
void avx2_gelu(float *gate, const float *up, size_t n);
void avx2_softmax(float *x, int n);
void avx2_kv_load(float *out, KVType t, const void *rows, size_t n);
void avx2_attend(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values,
                 int group, int hd, const AttendSpec *spec, float *scratch);

/* How bf16 arithmetic is done where the BF16 dot product exists:
 * RUN_BF16_DOT=instruction or fma, else whichever is faster (measured by
 * the AVX-512 path). Read once, in kernels.c beside RUN_KERNELS. */
typedef enum { BF16_DOT_FASTER = 1, BF16_DOT_INSTRUCTION, BF16_DOT_FMA } Bf16Dot;
Bf16Dot bf16_dot_setting(void);

/* ---- attention's walk over the keys, shared by every path ---- */

/* The first key tile the query at position p sees starts here. */
static inline int attend_first_tile(const AttendSpec *a, int p) {
    int lo = a->window > 0 && p >= a->window ? p - a->window + 1 : 0;
    return lo - lo % ATTEND_KEY_BLOCK;
}

/* The part of the key tile at t0 that the query at position p sees:
 * positions *from .. *from + len - 1 (len <= 0: none), and whether it is the
 * first tile the query sees. Returns len. */
static inline int attend_part(const AttendSpec *a, int t0, int p, int *from, bool *first) {
    int lo = a->window > 0 && p >= a->window ? p - a->window + 1 : 0;
    int end = t0 + ATTEND_KEY_BLOCK < p + 1 ? t0 + ATTEND_KEY_BLOCK : p + 1;
    *from = t0 > lo ? t0 : lo;
    *first = t0 <= lo;
    return end - *from;
}

/* The part of the key tile at t0 that any of the n_q queries at pos..
 * sees: positions *from .. *from + n - 1 (the parts of consecutive queries
 * overlap or touch, so their union is one run). Returns n (<= 0: none). */
static inline int attend_tile_span(const AttendSpec *a, int t0, int pos, int n_q, int *from) {
    int first_from = 0, end = 0;
    bool any = false;
    for (int i = t0 > pos ? t0 - pos : 0; i < n_q; i++) {
        int f;
        bool first;
        int len = attend_part(a, t0, pos + i, &f, &first);
        if (len <= 0) continue;
        if (!any) first_from = f;
        any = true;
        end = f + len;
    }
    *from = first_from;
    return any ? end - first_from : 0;
}

/* Bytes of a q8_0 block of the KV cache: an f16 scale, 32 int8. */
enum { Q8_0_BLOCK_BYTES = 2 + QUANT_BLOCK };

/* Where in attend()'s scratch its tiles of keys and values as floats
 * start: after each query vector's running maximum and sum and a tile of
 * scores, rounded up to whole 64-byte lines. */
static inline size_t attend_tile_offset(int group, int n_q) {
    size_t floats = (size_t)group * (size_t)n_q * (2 + ATTEND_KEY_BLOCK);
    return (floats + 15) / 16 * 16;
}

/* Rows row .. row + n - 1 of a KV cache of type t as floats: the cache's
 * own memory when it holds f32, else those rows turned into floats in
 * `tile` by the path's kv_load. */
static inline const float *attend_rows(const KernelPath *path, KVType t, const void *cache, int row, int n, int hd,
                                       float *tile) {
    const char *at = (const char *)cache + (size_t)row * kv_row_bytes(t, hd);
    if (t == KV_F32) return (const float *)at;
    path->kv_load(tile, t, at, (size_t)n * (size_t)hd);
    return tile;
}

/* A score after the soft cap, when there is one. */
static inline float attend_cap(const AttendSpec *a, float s) { return a->softcap > 0 ? a->softcap * tanhf(s / a->softcap) : s; }

/* ---- scalar definitions shared by every path ---- */

/* e^x for a float, to about 1 ulp, the way every path computes it: x is
 * clamped to [EXP_MIN, EXP_MAX], x = n ln2 + r with n = round(x / ln2) and
 * |r| <= ln2 / 2 (ln2 in two parts, so r is exact), e^r by a degree-6
 * polynomial (Cephes' coefficients) evaluated with fused multiply-adds, and
 * 2^n put into the exponent bits. */
#define EXP_MIN -87.33f
#define EXP_MAX 88.37f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

static inline float kernel_exp(float x) {
    x = fminf(fmaxf(x, EXP_MIN), EXP_MAX);
    float n = nearbyintf(x * EXP_LOG2E);
    float r = fmaf(-n, EXP_LN2_HI, x);
    r = fmaf(-n, EXP_LN2_LO, r);
    float p = EXP_P0;
    p = fmaf(p, r, EXP_P1);
    p = fmaf(p, r, EXP_P2);
    p = fmaf(p, r, EXP_P3);
    p = fmaf(p, r, EXP_P4);
    p = fmaf(p, r, EXP_P5);
    p = fmaf(p, r * r, r + 1.0f);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* GELU's tanh form, g/2 (1 + tanh(u)) with u = sqrt(2/pi) (g + 0.044715 g^3),
 * written as g / (1 + e^(-2u)) (the same function: 1 + tanh(u) =
 * 2 / (1 + e^(-2u))) so that it needs only kernel_exp; in float, each path
 * step for step as here. */
#define GELU_SQRT_2_OVER_PI 0.7978845608f
#define GELU_CUBIC 0.044715f

static inline float gelu_step(float g) {
    float u = GELU_SQRT_2_OVER_PI * fmaf(GELU_CUBIC, g * g * g, g);
    return g / (1.0f + kernel_exp(-2.0f * u));
}

/* The halving tree over 16 lanes. */
static inline float sum_lanes16(const float lane[16]) {
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = lane[l] + lane[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* Weight (r, k) of a q8 or q4 matrix as its integer q (w = q * scale), and
 * the scale of row r's block b. */
static inline int quant_value(const Matrix *w, int r, int k) {
    size_t blocks = (size_t)w->cols / QUANT_BLOCK, group = (size_t)r / ROW_GROUP, b = (size_t)k / QUANT_BLOCK;
    int lane = r % ROW_GROUP, j = k % QUANT_BLOCK;
    const uint8_t *data = w->data;
    if (w->type == WEIGHT_Q8)
        return (int8_t)data[((group * blocks + b) * 8 + (size_t)j / 4) * 64 + (size_t)lane * 4 + (size_t)j % 4];
    int half = j / 16, jj = j % 16;
    uint8_t byte = data[((group * blocks + b) * 4 + (size_t)jj / 4) * 64 + (size_t)lane * 4 + (size_t)jj % 4];
    return (half ? byte >> 4 : byte & 15) - 8;
}

static inline float quant_scale(const Matrix *w, int r, int b) {
    size_t blocks = (size_t)w->cols / QUANT_BLOCK;
    return f16_to_f32(w->scales[((size_t)r / ROW_GROUP * blocks + (size_t)b) * ROW_GROUP + (size_t)r % ROW_GROUP]);
}

static inline float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

#endif
