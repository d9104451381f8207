/* kernels_avx2.c - the AVX2 + FMA + F16C path (built with those flags, run
 * only on CPUs that have them). Vectors of 8 floats; the 16 lanes of the
 * 16-lane order are two vectors, `lo` (lanes 0..7) and `hi` (lanes 8..15). */
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

/* Eight weights W[i..i+8) widened to floats. */
INLINE __m256 load8(WeightType type, const void *data, size_t i) {
    switch (type) {
    case WEIGHT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)data + i)));
    case WEIGHT_BF16: {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)data + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    default: return _mm256_loadu_ps((const float *)data + i);
    }
}

/* Weights W[r][k .. min(k + 8, K)) widened, zero-padded. */
static __m256 load8_tail(const Matrix *w, int r, int k) {
    float v[8] = {0};
    size_t i = (size_t)r * w->cols;
    for (int j = 0; k + j < w->cols && j < 8; j++) {
        size_t at = i + (size_t)(k + j);
        v[j] = w->type == WEIGHT_F32 ? ((const float *)w->data)[at]
               : w->type == WEIGHT_F16 ? f16_to_f32(((const uint16_t *)w->data)[at])
                                       : bf16_to_f32(((const uint16_t *)w->data)[at]);
    }
    return _mm256_loadu_ps(v);
}

static size_t element_size(WeightType type) { return type == WEIGHT_F32 ? 4 : 2; }

/* ---- fp32 activations ---- */

/* Matrix-vector (one token): R rows at a time straight from the weights.
 * Decoding is bound by memory bandwidth: while these rows are read, the
 * next R rows are prefetched at the same pace. */
INLINE void matvec_rows(WeightType type, const Matrix *w, int r, int R, const float *x, float *y) {
    int K = w->cols, k16 = K & ~15;
    size_t esize = element_size(type), step_bytes = (size_t)R * 16 * esize;
    const char *next = (const char *)w->data + (size_t)(r + R) * K * esize;
    __m256 lo[4], hi[4];
    for (int j = 0; j < R; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    for (int k = 0; k < k16; k += 16) {
        for (size_t at = 0; at < step_bytes; at += 64) _mm_prefetch(next + (size_t)k / 16 * step_bytes + at, _MM_HINT_T0);
        __m256 xl = _mm256_loadu_ps(x + k), xh = _mm256_loadu_ps(x + k + 8);
        for (int j = 0; j < R; j++) {
            size_t i = (size_t)(r + j) * K + k;
            lo[j] = _mm256_fmadd_ps(load8(type, w->data, i), xl, lo[j]);
            hi[j] = _mm256_fmadd_ps(load8(type, w->data, i + 8), xh, hi[j]);
        }
    }
    if (k16 < K) {
        __m256 xl = load_partial(x + k16, K - k16), xh = load_partial(x + k16 + 8, K - k16 - 8);
        for (int j = 0; j < R; j++) {
            lo[j] = _mm256_fmadd_ps(load8_tail(w, r + j, k16), xl, lo[j]);
            hi[j] = _mm256_fmadd_ps(load8_tail(w, r + j, k16 + 8), xh, hi[j]);
        }
    }
    for (int j = 0; j < R; j++) y[r + j] = hsum16(lo[j], hi[j]);
}

INLINE void matvec_range(WeightType type, const Matrix *w, const float *x, float *y, int r0, int r1) {
    int r = r0;
    for (; r + 4 <= r1; r += 4) matvec_rows(type, w, r, 4, x, y);
    for (; r < r1; r++) matvec_rows(type, w, r, 1, x, y);
}

/* Matrix-matrix (a block of tokens). TILE_R rows at a time, the weights are
 * widened once into a float panel, KC columns at a time, and reused for
 * every token. A register tile of TILE_R rows x TILE_T tokens x 2 halves
 * keeps 12 accumulators busy. They persist in memory between column chunks,
 * so every sum still runs over k in order, exactly as in matvec. */
enum { TILE_R = 3, TILE_T = 2, KC = 512, TOKEN_BLOCK = 64 };

/* panel[k/16][j][0..16) = W[r+j][k0+k .. k0+k+16), zero-padded past the rows' end. */
static void pack_panel(const Matrix *w, int r, int R, int k0, int kc, float *panel) {
    for (int j = 0; j < R; j++) {
        size_t row = (size_t)(r + j) * w->cols + k0;
        for (int k = 0; k < kc; k += 8) {
            __m256 v;
            if (k + 8 <= kc) {
                switch (w->type) {
                case WEIGHT_F16: v = load8(WEIGHT_F16, w->data, row + k); break;
                case WEIGHT_BF16: v = load8(WEIGHT_BF16, w->data, row + k); break;
                default: v = load8(WEIGHT_F32, w->data, row + k); break;
                }
            } else {
                v = load8_tail(w, r + j, k0 + k);
            }
            _mm256_store_ps(panel + ((size_t)(k / 16) * R + j) * 16 + k % 16, v);
        }
        if (kc % 16 != 0 && kc % 16 <= 8) _mm256_store_ps(panel + ((size_t)(kc / 16) * R + j) * 16 + 8, _mm256_setzero_ps());
    }
}

/* acc[t][j] (16 floats) += panel row j times token t over a chunk of kc. */
INLINE void tile(int R, int T, const float *panel, const float *x, size_t ldx, int kc, float *acc) {
    __m256 a[TILE_T][TILE_R][2];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < R; j++)
            for (int h = 0; h < 2; h++) a[t][j][h] = _mm256_load_ps(acc + ((size_t)t * R + j) * 16 + h * 8);
    for (int k = 0; k < kc; k += 16) {
        __m256 xv[TILE_T][2];
        for (int t = 0; t < T; t++)
            for (int h = 0; h < 2; h++)
                xv[t][h] = k + h * 8 + 8 <= kc ? _mm256_loadu_ps(x + t * ldx + k + h * 8)
                                               : load_partial(x + t * ldx + k + h * 8, kc - k - h * 8);
        for (int j = 0; j < R; j++)
            for (int h = 0; h < 2; h++) {
                __m256 wv = _mm256_load_ps(panel + ((size_t)(k / 16) * R + j) * 16 + h * 8);
                /* Keeps wv in a register: otherwise gcc folds this load into
                 * each FMA below and loads it T times. */
                __asm__("" : "+x"(wv));
                for (int t = 0; t < T; t++) a[t][j][h] = _mm256_fmadd_ps(wv, xv[t][h], a[t][j][h]);
            }
    }
    for (int t = 0; t < T; t++)
        for (int j = 0; j < R; j++)
            for (int h = 0; h < 2; h++) _mm256_store_ps(acc + ((size_t)t * R + j) * 16 + h * 8, a[t][j][h]);
}

static void tile_dispatch(int R, int T, const float *panel, const float *x, size_t ldx, int kc, float *acc) {
    if (R == TILE_R && T == TILE_T) tile(TILE_R, TILE_T, panel, x, ldx, kc, acc);
    else if (R == TILE_R) tile(TILE_R, 1, panel, x, ldx, kc, acc);
    else if (T == TILE_T) tile(1, TILE_T, panel, x, ldx, kc, acc);
    else tile(1, 1, panel, x, ldx, kc, acc);
}

static void gemm(const Matrix *w, const float *X, int n, float *Y, int r0, int r1) {
    _Alignas(32) float panel[TILE_R * KC];
    _Alignas(32) float acc[TOKEN_BLOCK * TILE_R * 16];
    int K = w->cols;
    for (int t0 = 0; t0 < n; t0 += TOKEN_BLOCK) {
        int tn = n - t0 < TOKEN_BLOCK ? n - t0 : TOKEN_BLOCK;
        for (int r = r0; r < r1;) {
            int R = r1 - r >= TILE_R ? TILE_R : 1;
            memset(acc, 0, sizeof acc);
            for (int k0 = 0; k0 < K; k0 += KC) {
                int kc = K - k0 < KC ? K - k0 : KC;
                pack_panel(w, r, R, k0, kc, panel);
                for (int t = 0; t < tn; t += TILE_T) {
                    int T = tn - t < TILE_T ? tn - t : TILE_T;
                    tile_dispatch(R, T, panel, X + (size_t)(t0 + t) * K + k0, (size_t)K, kc, acc + (size_t)t * R * 16);
                }
            }
            for (int t = 0; t < tn; t++)
                for (int j = 0; j < R; j++) {
                    const float *a = acc + ((size_t)t * R + j) * 16;
                    Y[(size_t)(t0 + t) * w->rows + r + j] = hsum16(_mm256_load_ps(a), _mm256_load_ps(a + 8));
                }
            r += R;
        }
    }
}

static void matmul_float(float *out, const float *x, const Matrix *w, int n, int r0, int r1) {
    if (n > 1) {
        gemm(w, x, n, out, r0, r1);
        return;
    }
    switch (w->type) {
    case WEIGHT_F16: matvec_range(WEIGHT_F16, w, x, out, r0, r1); break;
    case WEIGHT_BF16: matvec_range(WEIGHT_BF16, w, x, out, r0, r1); break;
    default: matvec_range(WEIGHT_F32, w, x, out, r0, r1); break;
    }
}

/* ---- bf16 arithmetic, without the BF16 instruction: each 32-bit pair of
 * bf16 split into its odd element (the high half) and even one (the low
 * half shifted up), odd first; products of bf16 are exact, so the fma is
 * the instruction's add. ---- */

INLINE __m256 odd_half(__m256i v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u))); }
INLINE __m256 even_half(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }

/* The first n bf16 of p (at most 16), zero-padded to a vector. */
static __m256i load_bf16_partial(const uint16_t *p, int n) {
    uint16_t v[16] = {0};
    memcpy(v, p, (size_t)(n <= 0 ? 0 : n > 16 ? 16 : n) * 2);
    return _mm256_loadu_si256((const __m256i *)v);
}

INLINE __m256 pair_fma(__m256i w, __m256i x, __m256 acc) {
    acc = _mm256_fmadd_ps(odd_half(w), odd_half(x), acc);
    return _mm256_fmadd_ps(even_half(w), even_half(x), acc);
}

static void matmul_bf16(float *out, const uint16_t *x, const Matrix *w, int n, int r0, int r1) {
    int K = w->cols, k32 = K & ~31;
    const uint16_t *data = w->data;
    for (int t = 0; t < n; t++) {
        const uint16_t *xt = x + (size_t)t * K;
        for (int r = r0; r < r1; r++) {
            const uint16_t *wr = data + (size_t)r * K;
            __m256 lo = _mm256_setzero_ps(), hi = lo;
            for (int k = 0; k < k32; k += 32) {
                lo = pair_fma(_mm256_loadu_si256((const __m256i *)(wr + k)), _mm256_loadu_si256((const __m256i *)(xt + k)), lo);
                hi = pair_fma(_mm256_loadu_si256((const __m256i *)(wr + k + 16)),
                              _mm256_loadu_si256((const __m256i *)(xt + k + 16)), hi);
            }
            if (k32 < K) {
                lo = pair_fma(load_bf16_partial(wr + k32, K - k32), load_bf16_partial(xt + k32, K - k32), lo);
                hi = pair_fma(load_bf16_partial(wr + k32 + 16, K - k32 - 16), load_bf16_partial(xt + k32 + 16, K - k32 - 16), hi);
            }
            out[(size_t)t * w->rows + r] = hsum16(lo, hi);
        }
    }
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

void avx2_quantize_row(int8_t *q, float *scale, int32_t *sum, const float *x, int cols);
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

void avx2_swiglu(float *gate, const float *up, size_t n);
void avx2_swiglu(float *gate, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[8];
        _mm256_storeu_ps(g, swiglu8(load_partial(gate + i, (int)(n - i)), load_partial(up + i, (int)(n - i))));
        memcpy(gate + i, g, (n - i) * sizeof(float));
    }
}

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

void avx2_softmax(float *x, int n);
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

void avx2_attend(float *out, const float *q, size_t ld, int n_q, int pos, const float *keys, const float *values,
                 int group, int hd, float *scratch);
void avx2_attend(float *out, const float *q, size_t ld, int n_q, int pos, const float *keys, const float *values,
                 int group, int hd, float *scratch) {
    float scale = 1.0f / sqrtf((float)hd);
    float *max = scratch, *sum = max + (size_t)n_q * group, *p = sum + (size_t)n_q * group;
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++) memset(out + i * ld + (size_t)g * hd, 0, (size_t)hd * sizeof(float));
    /* Tile after tile of keys, each for every query that sees into it. */
    for (int t0 = 0; t0 < pos + n_q; t0 += ATTEND_KEY_BLOCK) {
        const float *k = keys + (size_t)t0 * hd, *v = values + (size_t)t0 * hd;
        for (int i = t0 > pos ? t0 - pos : 0; i < n_q; i++) {
            int end = pos + i + 1, len = end - t0 < ATTEND_KEY_BLOCK ? end - t0 : ATTEND_KEY_BLOCK;
            for (int g = 0; g < group; g++) {
                const float *qg = q + i * ld + (size_t)g * hd;
                float *m = max + (size_t)i * group + g, *l = sum + (size_t)i * group + g, tile_max = -INFINITY;
                for (int t = 0; t < len; t++) {
                    p[t] = dot16(qg, k + (size_t)t * hd, hd) * scale;
                    tile_max = fmaxf(tile_max, p[t]);
                }
                float new_max = t0 == 0 ? tile_max : fmaxf(*m, tile_max), a = t0 == 0 ? 0 : kernel_exp(*m - new_max);
                float tile_sum = exp_and_sum(p, len, new_max);
                *l = t0 == 0 ? tile_sum : *l * a + tile_sum;
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
    .swiglu = avx2_swiglu,
    .softmax = avx2_softmax,
};
#endif
