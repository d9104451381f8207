/* kernels_avx2.c - the AVX2 + FMA + F16C path (built with those flags, run
 * only on CPUs that have them). Vectors of 8 floats: in the products, rows
 * 0..7 and 8..15 of a group; in attention and softmax, the 16 lanes of the
 * 16-lane order as two vectors, `lo` (lanes 0..7) and `hi` (lanes 8..15);
 * a tile of bf16 or q8_0 KV cache rows widened 8 values at a time. */
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <stdlib.h>

#include "kernels_path.h"

#define INLINE static inline __attribute__((always_inline))

/* The halving tree over lanes lo (0..7) and hi (8..15). */
INLINE float hsum16(__m256 lo, __m256 hi) {
    __m256 v = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The first n floats of x (at most 8), zero-padded to a vector. */
static __m256 load_partial(const float *x, int n) {
    float v[8] = {0};
    memcpy(v, x, (size_t)(n <= 0 ? 0 : n > 8 ? 8 : n) * sizeof *x);
    return _mm256_loadu_ps(v);
}

/* ---- the float formats: lanes are rows of a group (grouped layouts,
 * kernels.h), rows 0..7 in `lo` vectors and 8..15 in `hi`; each lane one
 * row's chain of FMAs in the order of k. A tile of P groups x T tokens (up
 * to 4 of a tile of activations, whose width is ldx) widens each weight
 * vector once and uses it for the T tokens, whose x[k] it broadcasts. ---- */

enum { MAX_P = 2, SUB_T = 4 };

/* Columns 2c and 2c+1 of a group's rows, widened: v[0], v[1] the lo and hi
 * of column 2c, v[2], v[3] of column 2c+1. */
INLINE void load_pair(WeightType type, const char *group, int c, __m256 v[4]) {
    switch (type) {
    case WEIGHT_BF16:
        for (int h = 0; h < 2; h++) {
            __m256i pairs = _mm256_loadu_si256((const __m256i *)(group + (size_t)c * 64 + h * 32));
            v[h] = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
            v[2 + h] = _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32((int)0xFFFF0000u)));
        }
        return;
    case WEIGHT_F16:
        for (int i = 0; i < 4; i++) v[i] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(group + (size_t)c * 64 + i * 16)));
        return;
    default:
        for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps((const float *)(group + (size_t)c * 128 + i * 32));
    }
}

/* Column 2c alone (the last one of an odd count): v[0] lo, v[1] hi. */
INLINE void load_first(WeightType type, const char *group, int c, __m256 v[2]) {
    for (int h = 0; h < 2; h++)
        switch (type) {
        case WEIGHT_BF16:
            v[h] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(group + (size_t)c * 64 + h * 32)), 16));
            break;
        case WEIGHT_F16: v[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(group + (size_t)c * 64 + h * 16))); break;
        default: v[h] = _mm256_loadu_ps((const float *)(group + (size_t)c * 128 + h * 32));
        }
}

/* A tile's sums to out (token t's rows at out + t * ldo), the rows from
 * the tile's first row to the end of the range being rows_left. */
INLINE void store_tile(int P, int T, __m256 acc[][MAX_P][2], float *out, size_t ldo, int rows_left) {
    for (int t = 0; t < T; t++)
        for (int p = 0; p < P; p++)
            for (int h = 0; h < 2; h++) {
                int rows = rows_left - 16 * p - 8 * h;
                float *o = out + (size_t)t * ldo + 16 * p + 8 * h;
                if (rows >= 8) {
                    _mm256_storeu_ps(o, acc[t][p][h]);
                } else if (rows > 0) {
                    float v[8];
                    _mm256_storeu_ps(v, acc[t][p][h]);
                    memcpy(o, v, (size_t)rows * sizeof(float));
                }
            }
}

/* One column's weights (v[p][at], v[p][at + 1]: lo and hi of group p)
 * times the T tokens' x of that column. */
INLINE void add_column(int P, int T, __m256 acc[][MAX_P][2], __m256 v[][4], int at, const float *x) {
    for (int t = 0; t < T; t++) {
        __m256 xv = _mm256_set1_ps(x[t]);
        for (int p = 0; p < P; p++)
            for (int h = 0; h < 2; h++) acc[t][p][h] = _mm256_fmadd_ps(v[p][at + h], xv, acc[t][p][h]);
    }
}

INLINE void float_tile(WeightType type, bool second_first, int P, int T, const char *groups, size_t gbytes, const float *xt,
                       int ldx, int K, float *out, size_t ldo, int rows_left, const char *prefetch, int lines) {
    __m256 acc[SUB_T][MAX_P][2];
    for (int t = 0; t < T; t++)
        for (int p = 0; p < P; p++) acc[t][p][0] = acc[t][p][1] = _mm256_setzero_ps();
    int pairs = K / 2, due = 0;
    for (int c = 0; c < pairs; c++) {
        prefetch = prefetch_step(prefetch, lines, pairs, &due);
        __m256 v[MAX_P][4];
        for (int p = 0; p < P; p++) load_pair(type, groups + p * gbytes, c, v[p]);
        const float *x = xt + (size_t)2 * c * ldx;
        if (second_first) {
            add_column(P, T, acc, v, 2, x + ldx);
            add_column(P, T, acc, v, 0, x);
        } else {
            add_column(P, T, acc, v, 0, x);
            add_column(P, T, acc, v, 2, x + ldx);
        }
    }
    if (K % 2) {
        __m256 v[MAX_P][4];
        for (int p = 0; p < P; p++) load_first(type, groups + p * gbytes, pairs, v[p]);
        add_column(P, T, acc, v, 0, xt + (size_t)(K - 1) * ldx);
    }
    store_tile(P, T, acc, out, ldo, rows_left);
}

/* float_tile with P and T known to the compiler (P = 2 only for one token). */
INLINE void float_tiles(WeightType type, bool second_first, int P, int T, const char *groups, size_t gbytes, const float *xt,
                        int ldx, int K, float *out, size_t ldo, int rows_left, const char *prefetch, int lines) {
    if (P == 2) float_tile(type, second_first, 2, 1, groups, gbytes, xt, ldx, K, out, ldo, rows_left, prefetch, lines);
    else if (T == 4) float_tile(type, second_first, 1, 4, groups, gbytes, xt, ldx, K, out, ldo, rows_left, prefetch, lines);
    else if (T == 3) float_tile(type, second_first, 1, 3, groups, gbytes, xt, ldx, K, out, ldo, rows_left, prefetch, lines);
    else if (T == 2) float_tile(type, second_first, 1, 2, groups, gbytes, xt, ldx, K, out, ldo, rows_left, prefetch, lines);
    else float_tile(type, second_first, 1, 1, groups, gbytes, xt, ldx, K, out, ldo, rows_left, prefetch, lines);
}

/* The groups of rows [r0, r1) times every tile of tokens, each tile in
 * sub-tiles of at most SUB_T tokens; the next groups prefetched, shared out
 * between the sub-tiles. */
INLINE void float_range(WeightType type, bool second_first, const Matrix *w, const float *xp, int n, float *out, int r0,
                        int r1) {
    int K = w->cols, g_end = (r1 + ROW_GROUP - 1) / ROW_GROUP, block = token_block(K);
    size_t gbytes = group_bytes(type, K);
    const char *data = w->data;
    for (int t0 = 0; t0 < n; t0 += block) {
        int t1 = n - t0 < block ? n : t0 + block, subtiles = 0;
        for (int t = t0; t < t1; t += TOKEN_TILE) subtiles += (tile_width(n, t) + SUB_T - 1) / SUB_T;
        for (int g = r0 / ROW_GROUP; g < g_end;) {
            int P = n == 1 && g + 2 <= g_end ? 2 : 1, lines = (int)((size_t)P * gbytes / 64), i = 0;
            const char *groups = data + (size_t)g * gbytes, *next = groups + (size_t)P * gbytes;
            for (int t = t0; t < t1; t += TOKEN_TILE) {
                int width = tile_width(n, t), parts = (width + SUB_T - 1) / SUB_T;
                for (int s = 0, u = 0; s < parts; s++, i++) {
                    int T = (width - u + (parts - s) - 1) / (parts - s);  /* spread evenly: 6 = 3 + 3 */
                    int from = lines * i / subtiles, pl = lines * (i + 1) / subtiles - from;
                    float_tiles(type, second_first, P, T, groups, gbytes, xp + (size_t)t * K + u, width, K,
                                out + (size_t)(t + u) * w->rows + g * ROW_GROUP, (size_t)w->rows, r1 - g * ROW_GROUP,
                                next + (size_t)64 * from, pl);
                    u += T;
                }
            }
            g += P;
        }
    }
}

static void matmul_float(float *out, const float *xp, const Matrix *w, int n, int r0, int r1) {
    /* The weight type as a constant, so that the always-inlined range is
     * built once per type. */
    switch (w->type) {
    case WEIGHT_F16: float_range(WEIGHT_F16, false, w, xp, n, out, r0, r1); break;
    case WEIGHT_BF16: float_range(WEIGHT_BF16, false, w, xp, n, out, r0, r1); break;
    default: float_range(WEIGHT_F32, false, w, xp, n, out, r0, r1); break;
    }
}

/* bf16 arithmetic: the same tiles over activations rounded to bf16, each
 * column pair's second column first; products of two bf16 are exact, so
 * the fused multiply-add adds them as the BF16 dot product does. */
static void matmul_bf16(float *out, const float *xp, const Matrix *w, int n, int r0, int r1) {
    float_range(WEIGHT_BF16, true, w, xp, n, out, r0, r1);
}

/* ---- quantized weights: lanes are rows. For 4 columns (one "step") the
 * 16 rows of a group are 64 bytes, two vectors (rows 0..7, 8..15); the
 * token's 4 quantized activations are broadcast. vpmaddubsw multiplies
 * unsigned by signed bytes into 16-bit pairs: q8 weights go in as |q| with
 * the sign moved onto x (so no pair overflows), q4 nibbles as they are (the
 * sum then holds 8 * sum(x) too much). ---- */

enum { QUANT_TOKENS = 2 };

INLINE __m256i dot4_q8(__m256i w, __m256i w_abs, __m256i x) {
    __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

INLINE __m256i dot4_u(__m256i u, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

INLINE int32_t x_word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Rows of group g for T tokens from t: out[t][g*16 + row]. */
INLINE void quant_group(int T, WeightType type, const QuantizedRows *x, const Matrix *w, size_t g, int t0, float *out,
                        int row_end) {
    int K = w->cols, blocks = K / QUANT_BLOCK;
    const uint8_t *data = w->data;
    const uint16_t *scales = w->scales + g * (size_t)blocks * ROW_GROUP;
    __m256 acc[QUANT_TOKENS][2];
    for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        __m256i isum[QUANT_TOKENS][2];
        for (int t = 0; t < T; t++) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
        if (type == WEIGHT_Q8) {
            const uint8_t *block = data + (g * blocks + (size_t)b) * 512;
            for (int s = 0; s < 8; s++) {
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(block + s * 64));
                __m256i w1 = _mm256_loadu_si256((const __m256i *)(block + s * 64 + 32));
                __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
                for (int t = 0; t < T; t++) {
                    __m256i xv = _mm256_set1_epi32(x_word(x->q + (size_t)(t0 + t) * K + b * QUANT_BLOCK + s * 4));
                    isum[t][0] = _mm256_add_epi32(isum[t][0], dot4_q8(w0, a0, xv));
                    isum[t][1] = _mm256_add_epi32(isum[t][1], dot4_q8(w1, a1, xv));
                }
            }
        } else {
            const uint8_t *block = data + (g * blocks + (size_t)b) * 256;
            __m256i nibble = _mm256_set1_epi8(15);
            for (int s = 0; s < 4; s++) {
                __m256i v0 = _mm256_loadu_si256((const __m256i *)(block + s * 64));
                __m256i v1 = _mm256_loadu_si256((const __m256i *)(block + s * 64 + 32));
                __m256i l0 = _mm256_and_si256(v0, nibble), l1 = _mm256_and_si256(v1, nibble);
                __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), nibble);
                __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), nibble);
                for (int t = 0; t < T; t++) {
                    const int8_t *xb = x->q + (size_t)(t0 + t) * K + b * QUANT_BLOCK;
                    __m256i xl = _mm256_set1_epi32(x_word(xb + s * 4)), xh = _mm256_set1_epi32(x_word(xb + 16 + s * 4));
                    isum[t][0] = _mm256_add_epi32(isum[t][0], _mm256_add_epi32(dot4_u(l0, xl), dot4_u(h0, xh)));
                    isum[t][1] = _mm256_add_epi32(isum[t][1], _mm256_add_epi32(dot4_u(l1, xl), dot4_u(h1, xh)));
                }
            }
            for (int t = 0; t < T; t++) {
                __m256i offset = _mm256_set1_epi32(8 * x->sum[(size_t)(t0 + t) * blocks + b]);
                isum[t][0] = _mm256_sub_epi32(isum[t][0], offset);
                isum[t][1] = _mm256_sub_epi32(isum[t][1], offset);
            }
        }
        __m256 s0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + (size_t)b * ROW_GROUP)));
        __m256 s1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + (size_t)b * ROW_GROUP + 8)));
        for (int t = 0; t < T; t++) {
            __m256 xs = _mm256_set1_ps(x->scale[(size_t)(t0 + t) * blocks + b]);
            acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t][0]), _mm256_mul_ps(s0, xs), acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t][1]), _mm256_mul_ps(s1, xs), acc[t][1]);
        }
    }
    int rows = row_end - (int)g * ROW_GROUP;
    for (int t = 0; t < T; t++) {
        float *o = out + (size_t)(t0 + t) * w->rows + g * ROW_GROUP;
        if (rows >= ROW_GROUP) {
            _mm256_storeu_ps(o, acc[t][0]);
            _mm256_storeu_ps(o + 8, acc[t][1]);
        } else {
            float v[16];
            _mm256_storeu_ps(v, acc[t][0]);
            _mm256_storeu_ps(v + 8, acc[t][1]);
            memcpy(o, v, (size_t)rows * sizeof(float));
        }
    }
}

INLINE void quant_range(WeightType type, float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1) {
    for (size_t g = (size_t)r0 / ROW_GROUP; g * ROW_GROUP < (size_t)r1; g++) {
        int t = 0;
        for (; t + QUANT_TOKENS <= n; t += QUANT_TOKENS) quant_group(QUANT_TOKENS, type, x, w, g, t, out, r1);
        for (; t < n; t++) quant_group(1, type, x, w, g, t, out, r1);
    }
}

static void matmul_quant(float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1) {
    if (w->type == WEIGHT_Q8) quant_range(WEIGHT_Q8, out, x, w, n, r0, r1);
    else quant_range(WEIGHT_Q4, out, x, w, n, r0, r1);
}

void avx2_quantize_row(int8_t *q, float *scale, int32_t *sum, const float *x, int cols) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int b = 0; b < cols / QUANT_BLOCK; b++) {
        const float *xb = x + b * QUANT_BLOCK;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4), inverse = amax > 0 ? 127.0f / amax : 0;
        __m256 inv = _mm256_set1_ps(inverse);
        __m256i i32[4], total = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            i32[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
            total = _mm256_add_epi32(total, i32[i]);
        }
        __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(i32[0], i32[1]), _mm256_packs_epi32(i32[2], i32[3]));
        bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * QUANT_BLOCK), bytes);
        __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
        t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0x4E));
        t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0xB1));
        sum[b] = _mm_cvtsi128_si32(t4);
        scale[b] = amax / 127.0f;
    }
}

/* ---- e^x, SwiGLU, softmax, attention ---- */

/* kernel_exp (kernels_path.h) on 8 floats, step for step. */
INLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_MIN)), _mm256_set1_ps(EXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

INLINE __m256 swiglu8(__m256 g, __m256 u) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* gate[i] = step(gate[i], up[i]) 8 at a time, the last few through a
 * partial load (step is inlined: the callers pass a constant). */
INLINE void gate_rows(float *gate, const float *up, size_t n, __m256 (*step)(__m256, __m256)) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, step(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[8];
        _mm256_storeu_ps(g, step(load_partial(gate + i, (int)(n - i)), load_partial(up + i, (int)(n - i))));
        memcpy(gate + i, g, (n - i) * sizeof(float));
    }
}

void avx2_swiglu(float *gate, const float *up, size_t n) { gate_rows(gate, up, n, swiglu8); }

/* gelu_step (kernels_path.h) on 8 values, times u. */
INLINE __m256 gelu8(__m256 g, __m256 u) {
    __m256 cubic = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    __m256 t = _mm256_mul_ps(_mm256_set1_ps(GELU_SQRT_2_OVER_PI), _mm256_fmadd_ps(_mm256_set1_ps(GELU_CUBIC), cubic, g));
    __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), t));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void avx2_gelu(float *gate, const float *up, size_t n) { gate_rows(gate, up, n, gelu8); }

/* x[0..n) = e^(x - max), returning their sum in the 16-lane order. */
static float exp_and_sum(float *x, int n, float max) {
    __m256 lanes[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, m = _mm256_set1_ps(max);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        lanes[(i / 8) & 1] = _mm256_add_ps(lanes[(i / 8) & 1], e);
    }
    if (i < n) {
        float e[8] = {0};
        _mm256_storeu_ps(e, exp8(_mm256_sub_ps(load_partial(x + i, n - i), m)));
        memset(e + (n - i), 0, (size_t)(8 - (n - i)) * sizeof(float));
        memcpy(x + i, e, (size_t)(n - i) * sizeof(float));
        lanes[(i / 8) & 1] = _mm256_add_ps(lanes[(i / 8) & 1], _mm256_loadu_ps(e));
    }
    return hsum16(lanes[0], lanes[1]);
}

void avx2_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) max = fmaxf(max, x[i]);
    __m256 sum = _mm256_set1_ps(exp_and_sum(x, n, max));
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), sum));
    for (; i < n; i++) x[i] /= _mm256_cvtss_f32(sum);
}

/* q . k in the 16-lane order. */
static float dot16(const float *q, const float *k, int n) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), hi);
    }
    if (i < n) {
        lo = _mm256_fmadd_ps(load_partial(q + i, n - i), load_partial(k + i, n - i), lo);
        hi = _mm256_fmadd_ps(load_partial(q + i + 8, n - i - 8), load_partial(k + i + 8, n - i - 8), hi);
    }
    return hsum16(lo, hi);
}

/* o = o * a + sum over t < len of p[t] v_t, column by column in t order. */
static void weigh_values(float *o, float a, const float *p, const float *v, int len, int hd) {
    __m256 av = _mm256_set1_ps(a);
    int d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 acc[4];
        for (int i = 0; i < 4; i++) acc[i] = _mm256_mul_ps(_mm256_loadu_ps(o + d + 8 * i), av);
        for (int t = 0; t < len; t++) {
            __m256 pt = _mm256_set1_ps(p[t]);
            for (int i = 0; i < 4; i++) acc[i] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v + (size_t)t * hd + d + 8 * i), acc[i]);
        }
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(o + d + 8 * i, acc[i]);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(o + d), av);
        for (int t = 0; t < len; t++) acc = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(v + (size_t)t * hd + d), acc);
        _mm256_storeu_ps(o + d, acc);
    }
    for (; d < hd; d++) {
        float acc = o[d] * a;
        for (int t = 0; t < len; t++) acc = fmaf(p[t], v[(size_t)t * hd + d], acc);
        o[d] = acc;
    }
}

/* Rows of a KV cache as floats, 8 values at a time (n is whole rows: for
 * q8_0, whole blocks of 32). */
void avx2_kv_load(float *out, KVType t, const void *rows, size_t n) {
    size_t i = 0;
    if (t == KV_BF16) {
        const uint16_t *h = rows;
        for (; i + 8 <= n; i += 8) {
            __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
            _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
        }
        for (; i < n; i++) out[i] = bf16_to_f32(h[i]);
    } else if (t == KV_Q8_0) {
        const uint8_t *block = rows;
        for (; i < n; i += QUANT_BLOCK, block += Q8_0_BLOCK_BYTES) {
            uint16_t half;
            memcpy(&half, block, 2);
            __m256 d = _mm256_set1_ps(f16_to_f32(half));
            for (int j = 0; j < QUANT_BLOCK; j += 8) {
                __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(block + 2 + j)));
                _mm256_storeu_ps(out + i + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
            }
        }
    } else {
        memcpy(out, rows, n * sizeof(float));
    }
}

void avx2_attend(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values,
                 int group, int hd, const AttendSpec *spec, float *scratch) {
    float *max = scratch, *sum = max + (size_t)n_q * group, *p = sum + (size_t)n_q * group;
    float *tile_k = scratch + attend_tile_offset(group, n_q), *tile_v = tile_k + (size_t)ATTEND_KEY_BLOCK * hd;
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++) memset(out + i * ld + (size_t)g * hd, 0, (size_t)hd * sizeof(float));
    /* Tile after tile of keys (as floats), each for every query that sees into it. */
    for (int t0 = attend_first_tile(spec, pos); t0 < pos + n_q; t0 += ATTEND_KEY_BLOCK) {
        int span_from, span = attend_tile_span(spec, t0, pos, n_q, &span_from);
        if (span <= 0) continue;
        const float *tk = attend_rows(&kernels_avx2, spec->key_type, keys, span_from % spec->rows, span, hd, tile_k);
        const float *tv = attend_rows(&kernels_avx2, spec->value_type, values, span_from % spec->rows, span, hd, tile_v);
        for (int i = t0 > pos ? t0 - pos : 0; i < n_q; i++) {
            int from;
            bool first;
            int len = attend_part(spec, t0, pos + i, &from, &first);
            if (len <= 0) continue;
            const float *k = tk + (size_t)(from - span_from) * hd, *v = tv + (size_t)(from - span_from) * hd;
            for (int g = 0; g < group; g++) {
                const float *qg = q + i * ld + (size_t)g * hd;
                float *m = max + (size_t)i * group + g, *l = sum + (size_t)i * group + g, tile_max = -INFINITY;
                for (int t = 0; t < len; t++) {
                    p[t] = attend_cap(spec, dot16(qg, k + (size_t)t * hd, hd) * spec->scale);
                    tile_max = fmaxf(tile_max, p[t]);
                }
                float new_max = first ? tile_max : fmaxf(*m, tile_max), a = first ? 0 : kernel_exp(*m - new_max);
                float tile_sum = exp_and_sum(p, len, new_max);
                *l = first ? tile_sum : *l * a + tile_sum;
                *m = new_max;
                weigh_values(out + i * ld + (size_t)g * hd, a, p, v, len, hd);
            }
        }
    }
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++) {
            float *o = out + i * ld + (size_t)g * hd, l = sum[(size_t)i * group + g];
            for (int d = 0; d < hd; d++) o[d] /= l;
        }
}

const KernelPath kernels_avx2 = {
    .name = "avx2",
    .matmul_float = matmul_float,
    .matmul_bf16 = matmul_bf16,
    .matmul_quant = matmul_quant,
    .quantize_row = avx2_quantize_row,
    .attend = avx2_attend,
    .kv_load = avx2_kv_load,
    .swiglu = avx2_swiglu,
    .gelu = avx2_gelu,
    .softmax = avx2_softmax,
};
#endif
