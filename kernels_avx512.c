/* kernels_avx512.c - the AVX-512 path (F, BW, VL, VNNI, BF16; built with
 * those flags, run only on CPUs that have them). A vector of 16 floats is
 * exactly the 16 lanes of the 16-lane order. SwiGLU and softmax are the
 * AVX2 path's (they are not where the time goes). */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__AVX512BF16__)
#include <immintrin.h>
#include <stdlib.h>

#include "kernels_path.h"

#define INLINE static inline __attribute__((always_inline))

void avx2_quantize_row(int8_t *q, float *scale, int32_t *sum, const float *x, int cols);
void avx2_swiglu(float *gate, const float *up, size_t n);
void avx2_softmax(float *x, int n);
void avx2_attend(float *out, const float *q, size_t ld, int n_q, int pos, const float *keys, const float *values,
                 int group, int hd, float *scratch);

/* The halving tree over the 16 lanes. */
INLINE float hsum16(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v), hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The halving tree of 16 vectors at once: lane i of the result is
 * hsum16(v[i]), each sum added in the same order as hsum16 adds it, with
 * shuffles shared between the vectors (about 3 operations per sum instead
 * of 9). */
INLINE __m512 hsum16x16(const __m512 v[16]) {
    __m512 x[8], w[4], u[2];
    /* s8: lane l + lane l+8, two vectors' halves side by side. */
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* s4: each 128-bit quarter one vector's 4 sums. */
    for (int i = 0; i < 4; i++)
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* s2, then s1 */
    for (int i = 0; i < 2; i++)
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 s = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* Lane 4c + j holds the sum of v[4j + c]. */
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
}

/* Weights W[i .. i + 16) widened to floats; `mask` selects the ones inside
 * the row (the rest are 0). */
enum { FULL_MASK = 0xFFFF };

INLINE __m512 load16(WeightType type, const void *data, size_t i, __mmask16 mask) {
    if (mask == FULL_MASK) {  /* known at compile time in the main loops: plain loads */
        switch (type) {
        case WEIGHT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)data + i)));
        case WEIGHT_BF16:
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)data + i))), 16));
        default: return _mm512_loadu_ps((const float *)data + i);
        }
    }
    switch (type) {
    case WEIGHT_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const uint16_t *)data + i));
    case WEIGHT_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, (const uint16_t *)data + i)), 16));
    default: return _mm512_maskz_loadu_ps(mask, (const float *)data + i);
    }
}

INLINE __mmask16 tail_mask(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

static size_t element_size(WeightType type) { return type == WEIGHT_F32 ? 4 : 2; }

/* ---- fp32 activations ---- */

/* One token: R rows at a time straight from the weights, the next R rows
 * prefetched at the same pace (decoding is bound by memory bandwidth). */
INLINE void matvec_rows(WeightType type, const Matrix *w, int r, int R, const float *x, float *y) {
    int K = w->cols;
    size_t esize = element_size(type), step_bytes = (size_t)R * 16 * esize;
    const char *next = (const char *)w->data + (size_t)(r + R) * K * esize;
    __m512 acc[4];
    for (int j = 0; j < R; j++) acc[j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        for (size_t at = 0; at < step_bytes; at += 64) _mm_prefetch(next + (size_t)k / 16 * step_bytes + at, _MM_HINT_T0);
        __m512 xv = _mm512_loadu_ps(x + k);
        for (int j = 0; j < R; j++) acc[j] = _mm512_fmadd_ps(load16(type, w->data, (size_t)(r + j) * K + k, FULL_MASK), xv, acc[j]);
    }
    if (k < K) {
        __mmask16 mask = tail_mask(K - k);
        __m512 xv = _mm512_maskz_loadu_ps(mask, x + k);
        for (int j = 0; j < R; j++) acc[j] = _mm512_fmadd_ps(load16(type, w->data, (size_t)(r + j) * K + k, mask), xv, acc[j]);
    }
    for (int j = 0; j < R; j++) y[r + j] = hsum16(acc[j]);
}

INLINE void matvec_range(WeightType type, const Matrix *w, const float *x, float *y, int r0, int r1) {
    int r = r0;
    for (; r + 4 <= r1; r += 4) matvec_rows(type, w, r, 4, x, y);
    for (; r < r1; r++) matvec_rows(type, w, r, 1, x, y);
}

/* Spreads the prefetch of `lines` cache lines from p evenly over `steps`
 * steps: at each step, prefetches the lines now due (`due` carries the
 * remainder) and returns where the next line is. */
INLINE const char *prefetch_step(const char *p, int lines, int steps, int *due) {
    for (*due += lines; *due >= steps && steps > 0; *due -= steps, p += 64) _mm_prefetch(p, _MM_HINT_T0);
    return p;
}

/* A block of tokens, straight from the weights: a register tile of DR rows
 * x DT tokens over the whole row, each weight vector widened once and used
 * for DT tokens; the rows' weights stay in cache while the tokens go by. */
enum { DR = 4, DT = 6, DIRECT_TOKEN_BLOCK = 64 };

INLINE void direct_tile(WeightType type, int R, int T, const void *wdata, const float *x, int K, float *out, size_t ldo,
                        const char *prefetch, int lines) {
    __m512 a[DT][DR];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < R; j++) a[t][j] = _mm512_setzero_ps();
    int k = 0, steps = K / 16, due = 0;
    for (; k + 16 <= K; k += 16) {
        prefetch = prefetch_step(prefetch, lines, steps, &due);
        __m512 wv[DR];
        for (int j = 0; j < R; j++) wv[j] = load16(type, wdata, (size_t)j * K + k, FULL_MASK);
        for (int t = 0; t < T; t++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)t * K + k);
            for (int j = 0; j < R; j++) a[t][j] = _mm512_fmadd_ps(wv[j], xv, a[t][j]);
        }
    }
    if (k < K) {
        __mmask16 mask = tail_mask(K - k);
        __m512 wv[DR];
        for (int j = 0; j < R; j++) wv[j] = load16(type, wdata, (size_t)j * K + k, mask);
        for (int t = 0; t < T; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(mask, x + (size_t)t * K + k);
            for (int j = 0; j < R; j++) a[t][j] = _mm512_fmadd_ps(wv[j], xv, a[t][j]);
        }
    }
    for (int i = 0; i < R * T; i += 16) {
        __m512 v[16];
        float sums[16];
        for (int m = 0; m < 16; m++) v[m] = i + m < R * T ? a[(i + m) / R][(i + m) % R] : _mm512_setzero_ps();
        _mm512_storeu_ps(sums, hsum16x16(v));
        for (int m = 0; m < 16 && i + m < R * T; m++) out[(size_t)((i + m) / R) * ldo + (i + m) % R] = sums[m];
    }
}

INLINE void direct_tiles(WeightType type, int R, const Matrix *w, const float *x, int t0, int t1, float *out, int r) {
    int K = w->cols;
    const char *wdata = (const char *)w->data + (size_t)r * K * element_size(type);
    /* The tiles share out the prefetch of the next rows, so that memory
     * keeps streaming while any of them computes. */
    size_t row_bytes = (size_t)R * K * element_size(type);
    const char *next = (const char *)wdata + row_bytes;
    int tiles = (t1 - t0 + DT - 1) / DT, lines = (int)((row_bytes + 63) / 64);
    for (int i = 0, t = t0; i < tiles; i++) {
        const float *xt = x + (size_t)t * K;
        float *o = out + (size_t)t * w->rows + r;
        const char *pf = next + (size_t)64 * (lines * i / tiles);
        int pl = lines * (i + 1) / tiles - lines * i / tiles;
        int T = (t1 - t + (tiles - i) - 1) / (tiles - i);  /* the tokens left, spread evenly over the tiles left */
        t += T;
        switch (T) {
        case 6: direct_tile(type, R, 6, wdata, xt, K, o, (size_t)w->rows, pf, pl); break;
        case 5: direct_tile(type, R, 5, wdata, xt, K, o, (size_t)w->rows, pf, pl); break;
        case 4: direct_tile(type, R, 4, wdata, xt, K, o, (size_t)w->rows, pf, pl); break;
        case 3: direct_tile(type, R, 3, wdata, xt, K, o, (size_t)w->rows, pf, pl); break;
        case 2: direct_tile(type, R, 2, wdata, xt, K, o, (size_t)w->rows, pf, pl); break;
        default: direct_tile(type, R, 1, wdata, xt, K, o, (size_t)w->rows, pf, pl); break;
        }
    }
}

INLINE void gemm_direct(WeightType type, const Matrix *w, const float *x, int n, float *out, int r0, int r1) {
    for (int t0 = 0; t0 < n; t0 += DIRECT_TOKEN_BLOCK) {
        int t1 = n - t0 < DIRECT_TOKEN_BLOCK ? n : t0 + DIRECT_TOKEN_BLOCK;
        int r = r0;
        for (; r + DR <= r1; r += DR) direct_tiles(type, DR, w, x, t0, t1, out, r);
        for (; r < r1; r++) direct_tiles(type, 1, w, x, t0, t1, out, r);
    }
}

static void matmul_float(float *out, const float *x, const Matrix *w, int n, int r0, int r1) {
    if (n > 1) {
        switch (w->type) {
        case WEIGHT_F16: gemm_direct(WEIGHT_F16, w, x, n, out, r0, r1); break;
        case WEIGHT_BF16: gemm_direct(WEIGHT_BF16, w, x, n, out, r0, r1); break;
        default: gemm_direct(WEIGHT_F32, w, x, n, out, r0, r1); break;
        }
        return;
    }
    switch (w->type) {
    case WEIGHT_F16: matvec_range(WEIGHT_F16, w, x, out, r0, r1); break;
    case WEIGHT_BF16: matvec_range(WEIGHT_BF16, w, x, out, r0, r1); break;
    default: matvec_range(WEIGHT_F32, w, x, out, r0, r1); break;
    }
}

/* ---- bf16 arithmetic: vdpbf16ps, 32 products into 16 lanes. A register
 * tile of BF_R rows x BF_T tokens runs over the whole row. ---- */

enum { BF_R = 4, BF_T = 6, BF_TOKEN_BLOCK = 128 };

INLINE __mmask32 tail_mask32(int n) { return n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1); }

INLINE __m512bh load_bh(const uint16_t *p, __mmask32 mask) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, p); }

INLINE void bf16_tile(int R, int T, const uint16_t *w, const uint16_t *x, int K, float *out, size_t ldo,
                      const char *prefetch, int lines) {
    __m512 a[BF_T][BF_R];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < R; j++) a[t][j] = _mm512_setzero_ps();
    int k = 0, steps = K / 32, due = 0;
    for (; k + 32 <= K; k += 32) {
        prefetch = prefetch_step(prefetch, lines, steps, &due);
        __m512bh wv[BF_R];
        for (int j = 0; j < R; j++) wv[j] = (__m512bh)_mm512_loadu_si512(w + (size_t)j * K + k);
        for (int t = 0; t < T; t++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x + (size_t)t * K + k);
            for (int j = 0; j < R; j++) a[t][j] = _mm512_dpbf16_ps(a[t][j], wv[j], xv);
        }
    }
    if (k < K) {
        __mmask32 mask = tail_mask32(K - k);
        __m512bh wv[BF_R];
        for (int j = 0; j < R; j++) wv[j] = load_bh(w + (size_t)j * K + k, mask);
        for (int t = 0; t < T; t++) {
            __m512bh xv = load_bh(x + (size_t)t * K + k, mask);
            for (int j = 0; j < R; j++) a[t][j] = _mm512_dpbf16_ps(a[t][j], wv[j], xv);
        }
    }
    /* The sums, 16 accumulators at a time ([t][j] order). */
    for (int i = 0; i < R * T; i += 16) {
        __m512 v[16];
        float sums[16];
        for (int m = 0; m < 16; m++) v[m] = i + m < R * T ? a[(i + m) / R][(i + m) % R] : _mm512_setzero_ps();
        _mm512_storeu_ps(sums, hsum16x16(v));
        for (int m = 0; m < 16 && i + m < R * T; m++) out[(size_t)((i + m) / R) * ldo + (i + m) % R] = sums[m];
    }
}

/* bf16_tile with the token count T (1..BF_T) known to the compiler. */
INLINE void bf16_tiles(int R, int T, const uint16_t *w, const uint16_t *x, int K, float *out, size_t ldo,
                       const char *prefetch, int lines) {
    switch (T) {
    case 6: bf16_tile(R, 6, w, x, K, out, ldo, prefetch, lines); return;
    case 5: bf16_tile(R, 5, w, x, K, out, ldo, prefetch, lines); return;
    case 4: bf16_tile(R, 4, w, x, K, out, ldo, prefetch, lines); return;
    case 3: bf16_tile(R, 3, w, x, K, out, ldo, prefetch, lines); return;
    case 2: bf16_tile(R, 2, w, x, K, out, ldo, prefetch, lines); return;
    default: bf16_tile(R, 1, w, x, K, out, ldo, prefetch, lines); return;
    }
}

static void bf16_tile_dispatch(int R, int T, const uint16_t *w, const uint16_t *x, int K, float *out, size_t ldo,
                               const char *prefetch, int lines) {
    if (R == BF_R) bf16_tiles(BF_R, T, w, x, K, out, ldo, prefetch, lines);
    else bf16_tiles(1, T, w, x, K, out, ldo, prefetch, lines);
}

static void matmul_bf16(float *out, const uint16_t *x, const Matrix *w, int n, int r0, int r1) {
    int K = w->cols;
    const uint16_t *data = w->data;
    for (int t0 = 0; t0 < n; t0 += BF_TOKEN_BLOCK) {
        int tn = n - t0 < BF_TOKEN_BLOCK ? n - t0 : BF_TOKEN_BLOCK;
        for (int r = r0; r < r1;) {
            int R = r1 - r >= BF_R ? BF_R : 1;
            /* The block's first tile reads the rows from memory: it
             * prefetches the next rows as it goes. */
            const char *next = (const char *)(data + (size_t)(r + R) * K);
            int lines = (int)(((size_t)R * K * sizeof(uint16_t) + 63) / 64);
            for (int t = t0; t < t0 + tn; t += BF_T) {
                int T = t0 + tn - t < BF_T ? t0 + tn - t : BF_T;
                bf16_tile_dispatch(R, T, data + (size_t)r * K, x + (size_t)t * K, K, out + (size_t)t * w->rows + r,
                                   (size_t)w->rows, next, t == t0 ? lines : 0);
            }
            r += R;
        }
    }
}

/* ---- quantized weights with vpdpbusd: lanes are the 16 rows of a group;
 * each instruction adds 4 unsigned-by-signed byte products into each lane.
 * q8 weights go in as q + 128 (q xor 0x80) and q4 nibbles as they are, so
 * each block's sum holds offset * sum(x) too much (128 or 8), taken off
 * before it is scaled. A tile is Q_G groups x Q_T tokens. ---- */

enum { Q_G = 2, Q_T = 6 };

INLINE int32_t x_word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE void quant_tile(int G, int T, WeightType type, const QuantizedRows *x, const Matrix *w, size_t g0, int t0,
                       float *out, int row_end) {
    int K = w->cols, blocks = K / QUANT_BLOCK;
    const uint8_t *data = w->data;
    size_t block_bytes = type == WEIGHT_Q8 ? 512 : 256;
    __m512 acc[Q_T][Q_G];
    for (int t = 0; t < T; t++)
        for (int g = 0; g < G; g++) acc[t][g] = _mm512_setzero_ps();
    const __m512i flip = _mm512_set1_epi8((char)0x80), nibble = _mm512_set1_epi8(15);
    for (int b = 0; b < blocks; b++) {
        __m512i isum[Q_T][Q_G];
        for (int t = 0; t < T; t++)
            for (int g = 0; g < G; g++) isum[t][g] = _mm512_setzero_si512();
        const int8_t *xb = x->q + (size_t)t0 * K + (size_t)b * QUANT_BLOCK;
        if (type == WEIGHT_Q8) {
            for (int s = 0; s < 8; s++) {
                __m512i wv[Q_G];
                for (int g = 0; g < G; g++)
                    wv[g] = _mm512_xor_si512(_mm512_loadu_si512(data + ((g0 + g) * blocks + (size_t)b) * block_bytes + s * 64), flip);
                for (int t = 0; t < T; t++) {
                    __m512i xv = _mm512_set1_epi32(x_word(xb + (size_t)t * K + s * 4));
                    for (int g = 0; g < G; g++) isum[t][g] = _mm512_dpbusd_epi32(isum[t][g], wv[g], xv);
                }
            }
        } else {
            for (int s = 0; s < 4; s++) {
                __m512i lo[Q_G], hi[Q_G];
                for (int g = 0; g < G; g++) {
                    __m512i v = _mm512_loadu_si512(data + ((g0 + g) * blocks + (size_t)b) * block_bytes + s * 64);
                    lo[g] = _mm512_and_si512(v, nibble);
                    hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
                }
                for (int t = 0; t < T; t++) {
                    __m512i xl = _mm512_set1_epi32(x_word(xb + (size_t)t * K + s * 4));
                    __m512i xh = _mm512_set1_epi32(x_word(xb + (size_t)t * K + 16 + s * 4));
                    for (int g = 0; g < G; g++) {
                        isum[t][g] = _mm512_dpbusd_epi32(isum[t][g], lo[g], xl);
                        isum[t][g] = _mm512_dpbusd_epi32(isum[t][g], hi[g], xh);
                    }
                }
            }
        }
        int offset = type == WEIGHT_Q8 ? 128 : 8;
        __m512 ws[Q_G];
        for (int g = 0; g < G; g++)
            ws[g] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w->scales + ((g0 + g) * blocks + (size_t)b) * ROW_GROUP)));
        for (int t = 0; t < T; t++) {
            size_t tb = (size_t)(t0 + t) * blocks + b;
            __m512i correction = _mm512_set1_epi32(offset * x->sum[tb]);
            __m512 xs = _mm512_set1_ps(x->scale[tb]);
            for (int g = 0; g < G; g++)
                acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum[t][g], correction)), _mm512_mul_ps(ws[g], xs),
                                            acc[t][g]);
        }
    }
    for (int t = 0; t < T; t++)
        for (int g = 0; g < G; g++) {
            int first = (int)(g0 + g) * ROW_GROUP, rows = row_end - first;
            float *o = out + (size_t)(t0 + t) * w->rows + first;
            _mm512_mask_storeu_ps(o, tail_mask(rows), acc[t][g]);
        }
}

/* quant_tile with the token count T (1..Q_T) known to the compiler. */
INLINE void quant_tiles(int G, int T, WeightType type, const QuantizedRows *x, const Matrix *w, size_t g0, int t0,
                        float *out, int row_end) {
    switch (T) {
    case 6: quant_tile(G, 6, type, x, w, g0, t0, out, row_end); break;
    case 5: quant_tile(G, 5, type, x, w, g0, t0, out, row_end); break;
    case 4: quant_tile(G, 4, type, x, w, g0, t0, out, row_end); break;
    case 3: quant_tile(G, 3, type, x, w, g0, t0, out, row_end); break;
    case 2: quant_tile(G, 2, type, x, w, g0, t0, out, row_end); break;
    default: quant_tile(G, 1, type, x, w, g0, t0, out, row_end); break;
    }
}

INLINE void quant_range(WeightType type, float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1) {
    size_t g_end = ((size_t)r1 + ROW_GROUP - 1) / ROW_GROUP;
    for (size_t g = (size_t)r0 / ROW_GROUP; g < g_end;) {
        int G = g + Q_G <= g_end ? Q_G : 1;
        for (int t = 0; t < n; t += Q_T) {
            int T = n - t < Q_T ? n - t : Q_T;
            if (G == Q_G) quant_tiles(Q_G, T, type, x, w, g, t, out, r1);
            else quant_tiles(1, T, type, x, w, g, t, out, r1);
        }
        g += (size_t)G;
    }
}

static void matmul_quant(float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1) {
    if (w->type == WEIGHT_Q8) quant_range(WEIGHT_Q8, out, x, w, n, r0, r1);
    else quant_range(WEIGHT_Q4, out, x, w, n, r0, r1);
}

/* ---- attention ---- */

/* kernel_exp (kernels_path.h) on 16 floats, step for step. */
INLINE __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(EXP_MIN)), _mm512_set1_ps(EXP_MAX));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i scale = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(scale));
}

enum { MAX_HEAD_VECTORS = 16, MAX_GROUP = 64 };

/* Scores of one query (hd/16 vectors in qv) against keys k[0..len), len <= 16,
 * in the 16-lane order, times scale; lanes past len are 0. */
INLINE __m512 scores16(const __m512 *qv, int vectors, const float *k, int len, float scale) {
    __m512 acc[16];
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    if (len == 16) {
        for (int j = 0; j < 16; j++)
            for (int d = 0; d < vectors; d++) acc[j] = _mm512_fmadd_ps(qv[d], _mm512_loadu_ps(k + (size_t)j * vectors * 16 + 16 * d), acc[j]);
    } else {
        for (int j = 0; j < len; j++)
            for (int d = 0; d < vectors; d++) acc[j] = _mm512_fmadd_ps(qv[d], _mm512_loadu_ps(k + (size_t)j * vectors * 16 + 16 * d), acc[j]);
    }
    return _mm512_maskz_mul_ps(tail_mask(len), hsum16x16(acc), _mm512_set1_ps(scale));
}

/* One query's scores over a tile of len keys, turned into p = e^(s - m')
 * (p[len..] = 0) with the running maximum and sum updated; returns the
 * factor a = e^(m - m') by which the earlier output shrinks. */
INLINE float tile_weights(const float *qg, int vectors, const float *k, int len, float scale, bool first, float *m, float *l,
                          float *p) {
    __m512 qv[MAX_HEAD_VECTORS], s[ATTEND_KEY_BLOCK / 16];
    for (int d = 0; d < vectors; d++) qv[d] = _mm512_loadu_ps(qg + 16 * d);
    int chunks = (len + 15) / 16;
    __m512 tile_max = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < chunks; c++) {
        int n = len - 16 * c < 16 ? len - 16 * c : 16;
        s[c] = scores16(qv, vectors, k + (size_t)c * 16 * vectors * 16, n, scale);
        tile_max = _mm512_mask_max_ps(tile_max, tail_mask(n), tile_max, s[c]);
    }
    float new_max = _mm512_reduce_max_ps(tile_max);
    if (!first) new_max = fmaxf(*m, new_max);
    float a = first ? 0 : kernel_exp(*m - new_max);
    __m512 lanes = _mm512_setzero_ps(), mv = _mm512_set1_ps(new_max);
    for (int c = 0; c < chunks; c++) {
        int n = len - 16 * c < 16 ? len - 16 * c : 16;
        s[c] = _mm512_maskz_mov_ps(tail_mask(n), exp16(_mm512_sub_ps(s[c], mv)));
        lanes = _mm512_add_ps(lanes, s[c]);
        _mm512_storeu_ps(p + 16 * c, s[c]);
    }
    float tile_sum = hsum16(lanes);
    *l = first ? tile_sum : *l * a + tile_sum;
    *m = new_max;
    return a;
}

/* o_h = o_h a_h + sum over t < len of p_h[t] v_t for H heads at once, in t
 * order, so that each value vector is loaded once for all of them. */
INLINE void weigh_values(int H, int vectors, float *const *o, const float *a, const float *const *p, const float *v, int len) {
    __m512 acc[6][MAX_HEAD_VECTORS];
    for (int h = 0; h < H; h++)
        for (int d = 0; d < vectors; d++) acc[h][d] = _mm512_mul_ps(_mm512_loadu_ps(o[h] + 16 * d), _mm512_set1_ps(a[h]));
    for (int t = 0; t < len; t++) {
        __m512 vv[MAX_HEAD_VECTORS];
        for (int d = 0; d < vectors; d++) vv[d] = _mm512_loadu_ps(v + (size_t)t * vectors * 16 + 16 * d);
        for (int h = 0; h < H; h++) {
            __m512 b = _mm512_set1_ps(p[h][t]);
            for (int d = 0; d < vectors; d++) acc[h][d] = _mm512_fmadd_ps(b, vv[d], acc[h][d]);
        }
    }
    for (int h = 0; h < H; h++)
        for (int d = 0; d < vectors; d++) _mm512_storeu_ps(o[h] + 16 * d, acc[h][d]);
}

/* The attention of kernels.h for head dims of `vectors` x 16: key tiles
 * outermost, so each tile is read once for all the queries of the block;
 * each query's arithmetic as the plain definition has it. */
INLINE void attend_vectors(int vectors, float *out, const float *q, size_t ld, int n_q, int pos, const float *keys,
                           const float *values, int group, float *scratch) {
    int hd = vectors * 16, heads_at_once = vectors <= 4 ? 6 : vectors <= 8 ? 2 : 1;
    float scale = 1.0f / sqrtf((float)hd);
    float *max = scratch, *sum = max + (size_t)n_q * group, *p = sum + (size_t)n_q * group;  /* p: [group][tile] */
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++) memset(out + i * ld + (size_t)g * hd, 0, (size_t)hd * sizeof(float));
    for (int t0 = 0; t0 < pos + n_q; t0 += ATTEND_KEY_BLOCK) {
        const float *k = keys + (size_t)t0 * hd, *v = values + (size_t)t0 * hd;
        for (int i = t0 > pos ? t0 - pos : 0; i < n_q; i++) {
            int end = pos + i + 1, len = end - t0 < ATTEND_KEY_BLOCK ? end - t0 : ATTEND_KEY_BLOCK;
            float a[MAX_GROUP];
            for (int g = 0; g < group; g++) {
                size_t at = (size_t)i * group + g;
                a[g] = tile_weights(q + i * ld + (size_t)g * hd, vectors, k, len, scale, t0 == 0, max + at, sum + at,
                                    p + (size_t)g * ATTEND_KEY_BLOCK);
            }
            for (int g = 0; g < group; g += heads_at_once) {
                int H = group - g < heads_at_once ? group - g : heads_at_once;
                float *o[6];
                const float *ph[6];
                for (int h = 0; h < H; h++) o[h] = out + i * ld + (size_t)(g + h) * hd, ph[h] = p + (size_t)(g + h) * ATTEND_KEY_BLOCK;
                switch (H) {
                case 6: weigh_values(6, vectors, o, a + g, ph, v, len); break;
                case 5: weigh_values(5, vectors, o, a + g, ph, v, len); break;
                case 4: weigh_values(4, vectors, o, a + g, ph, v, len); break;
                case 3: weigh_values(3, vectors, o, a + g, ph, v, len); break;
                case 2: weigh_values(2, vectors, o, a + g, ph, v, len); break;
                default: weigh_values(1, vectors, o, a + g, ph, v, len); break;
                }
            }
        }
    }
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++) {
            float *o = out + i * ld + (size_t)g * hd;
            __m512 l = _mm512_set1_ps(sum[(size_t)i * group + g]);
            for (int d = 0; d < vectors; d++) _mm512_storeu_ps(o + 16 * d, _mm512_div_ps(_mm512_loadu_ps(o + 16 * d), l));
        }
}

/* Head dims 64 and 128 compiled with their sizes known; others that are a
 * multiple of 16 at run time; the rest go to the AVX2 version, which
 * computes the same. */
static void attend_tiles(float *out, const float *q, size_t ld, int n_q, int pos, const float *keys, const float *values,
                         int group, int hd, float *scratch) {
    if (hd % 16 != 0 || hd / 16 > MAX_HEAD_VECTORS || group > MAX_GROUP)
        avx2_attend(out, q, ld, n_q, pos, keys, values, group, hd, scratch);
    else if (hd == 64)
        attend_vectors(4, out, q, ld, n_q, pos, keys, values, group, scratch);
    else if (hd == 128)
        attend_vectors(8, out, q, ld, n_q, pos, keys, values, group, scratch);
    else
        attend_vectors(hd / 16, out, q, ld, n_q, pos, keys, values, group, scratch);
}

const KernelPath kernels_avx512 = {
    .name = "avx512",
    .matmul_float = matmul_float,
    .matmul_bf16 = matmul_bf16,
    .matmul_quant = matmul_quant,
    .quantize_row = avx2_quantize_row,
    .attend = attend_tiles,
    .swiglu = avx2_swiglu,
    .softmax = avx2_softmax,
};
#endif
