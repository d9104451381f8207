/* kernels_avx512.c - the AVX-512 path (F, BW, VL, VNNI, BF16; built with
 * those flags, run only on CPUs that have them). In the products a vector
 * of 16 floats holds the 16 rows of a group; in attention, the 16 lanes of
 * the 16-lane order (a tile of bf16 or q8_0 KV cache rows is widened to
 * floats 16 values at a time). SwiGLU and softmax are the AVX2 path's (they are not
 * where the time goes). */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__AVX512BF16__)
#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "kernels_path.h"

#define INLINE static inline __attribute__((always_inline))

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

INLINE __mmask16 tail_mask(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* ---- the float formats: lanes are the 16 rows of a group (grouped
 * layouts, kernels.h), each lane one row's chain of FMAs in the order of k.
 * A tile of P groups x T tokens (one tile of activations) widens each
 * weight vector once and uses it for the T tokens, whose x[k] it
 * broadcasts. ---- */

enum { MAX_P = 4 };

/* Columns 2c and 2c+1 of a group's rows, widened to floats. */
INLINE void load_pair(WeightType type, const char *group, int c, __m512 *first, __m512 *second) {
    switch (type) {
    case WEIGHT_BF16: {
        __m512i v = _mm512_loadu_si512(group + (size_t)c * 64);
        *first = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        *second = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
        return;
    }
    case WEIGHT_F16:
        *first = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + (size_t)c * 64)));
        *second = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + (size_t)c * 64 + 32)));
        return;
    default:
        *first = _mm512_loadu_ps(group + (size_t)c * 128);
        *second = _mm512_loadu_ps(group + (size_t)c * 128 + 64);
    }
}

/* Column 2c alone (the last one of an odd count). */
INLINE __m512 load_first(WeightType type, const char *group, int c) {
    switch (type) {
    case WEIGHT_BF16: return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(group + (size_t)c * 64), 16));
    case WEIGHT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + (size_t)c * 64)));
    default: return _mm512_loadu_ps(group + (size_t)c * 128);
    }
}

/* A tile's sums to out (token t's rows at out + t * ldo); rows_left: the
 * rows from the tile's first row to the end of the range. */
INLINE void store_tile(int P, int T, __m512 acc[][MAX_P], float *out, size_t ldo, int rows_left) {
    for (int t = 0; t < T; t++)
        for (int p = 0; p < P && rows_left - 16 * p > 0; p++)
            _mm512_mask_storeu_ps(out + (size_t)t * ldo + 16 * p, tail_mask(rows_left - 16 * p), acc[t][p]);
}

/* One column's weights w (P groups) times the T tokens' x of that column. */
INLINE void add_column(int P, int T, __m512 acc[][MAX_P], const __m512 w[MAX_P], const float *x) {
    for (int t = 0; t < T; t++) {
        __m512 xv = _mm512_set1_ps(x[t]);
        for (int p = 0; p < P; p++) acc[t][p] = _mm512_fmadd_ps(w[p], xv, acc[t][p]);
    }
}

INLINE void float_tile(WeightType type, bool second_first, int P, int T, const char *groups, size_t gbytes, const float *xt,
                       int K, float *out, size_t ldo, int rows_left, const char *prefetch, int lines) {
    __m512 acc[TOKEN_TILE][MAX_P];
    for (int t = 0; t < T; t++)
        for (int p = 0; p < P; p++) acc[t][p] = _mm512_setzero_ps();
    int pairs = K / 2, due = 0;
    for (int c = 0; c < pairs; c++) {
        prefetch = prefetch_step(prefetch, lines, pairs, &due);
        __m512 first[MAX_P], second[MAX_P];
        for (int p = 0; p < P; p++) load_pair(type, groups + p * gbytes, c, &first[p], &second[p]);
        const float *x = xt + (size_t)2 * c * T;
        if (second_first) {
            add_column(P, T, acc, second, x + T);
            add_column(P, T, acc, first, x);
        } else {
            add_column(P, T, acc, first, x);
            add_column(P, T, acc, second, x + T);
        }
    }
    if (K % 2) {
        __m512 last[MAX_P];
        for (int p = 0; p < P; p++) last[p] = load_first(type, groups + p * gbytes, pairs);
        add_column(P, T, acc, last, xt + (size_t)(K - 1) * T);
    }
    store_tile(P, T, acc, out, ldo, rows_left);
}

/* float_tile with the token count T (1..TOKEN_TILE) known to the compiler,
 * for a P that the caller passes as a constant. */
INLINE void float_tiles_of(WeightType type, bool second_first, int P, int T, const char *groups, size_t gbytes,
                           const float *xt, int K, float *out, size_t ldo, int rows_left, const char *prefetch, int lines) {
    switch (T) {
    case 12: float_tile(type, second_first, P, 12, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 11: float_tile(type, second_first, P, 11, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 10: float_tile(type, second_first, P, 10, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 9: float_tile(type, second_first, P, 9, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 8: float_tile(type, second_first, P, 8, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 7: float_tile(type, second_first, P, 7, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 6: float_tile(type, second_first, P, 6, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 5: float_tile(type, second_first, P, 5, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 4: float_tile(type, second_first, P, 4, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 3: float_tile(type, second_first, P, 3, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 2: float_tile(type, second_first, P, 2, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    default: float_tile(type, second_first, P, 1, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    }
}

/* float_tile with P and T known to the compiler (a P or T that it does not
 * know costs the loop tests and moves of registers at every column): P = 4
 * only for T <= 5. */
INLINE void float_tiles(WeightType type, bool second_first, int P, int T, const char *groups, size_t gbytes, const float *xt,
                        int K, float *out, size_t ldo, int rows_left, const char *prefetch, int lines) {
    if (P == 4) {
        switch (T) {
        case 5: float_tile(type, second_first, 4, 5, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        case 4: float_tile(type, second_first, 4, 4, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        case 3: float_tile(type, second_first, 4, 3, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        case 2: float_tile(type, second_first, 4, 2, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        default: float_tile(type, second_first, 4, 1, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        }
    }
    if (P == 2) float_tiles_of(type, second_first, 2, T, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines);
    else float_tiles_of(type, second_first, 1, T, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines);
}

/* ---- bf16 arithmetic with vdpbf16ps: lanes the rows of a group again;
 * each instruction adds one column pair's two products (the pair's 32 bits
 * of the bf16 layout times a token's pair, broadcast). The tokens' pairs
 * come prepared as words (bf16_pairs): made on the fly, each word would be
 * stored and at once loaded again, and a load that waits on a wider store
 * stalls. ---- */

INLINE void bf16_tile(int P, int T, const char *groups, size_t gbytes, const float *xt, int K, float *out, size_t ldo,
                      int rows_left, const char *prefetch, int lines) {
    __m512 acc[TOKEN_TILE][MAX_P];
    for (int t = 0; t < T; t++)
        for (int p = 0; p < P; p++) acc[t][p] = _mm512_setzero_ps();
    const int32_t *words = (const int32_t *)xt;
    int pairs = (K + 1) / 2, due = 0;
    for (int c = 0; c < pairs; c++) {
        prefetch = prefetch_step(prefetch, lines, pairs, &due);
        __m512bh wv[MAX_P];
        for (int p = 0; p < P; p++) wv[p] = (__m512bh)_mm512_loadu_si512(groups + p * gbytes + (size_t)c * 64);
        for (int t = 0; t < T; t++) {
            __m512bh xv = (__m512bh)_mm512_set1_epi32(words[(size_t)c * T + t]);
            for (int p = 0; p < P; p++) acc[t][p] = _mm512_dpbf16_ps(acc[t][p], wv[p], xv);
        }
    }
    store_tile(P, T, acc, out, ldo, rows_left);
}

/* bf16_tile with T known to the compiler, for a constant P. */
INLINE void bf16_tiles_of(int P, int T, const char *groups, size_t gbytes, const float *xt, int K, float *out,
                          size_t ldo, int rows_left, const char *prefetch, int lines) {
    switch (T) {
    case 12: bf16_tile(P, 12, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 11: bf16_tile(P, 11, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 10: bf16_tile(P, 10, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 9: bf16_tile(P, 9, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 8: bf16_tile(P, 8, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 7: bf16_tile(P, 7, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 6: bf16_tile(P, 6, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 5: bf16_tile(P, 5, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 4: bf16_tile(P, 4, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 3: bf16_tile(P, 3, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    case 2: bf16_tile(P, 2, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    default: bf16_tile(P, 1, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
    }
}

/* bf16_tile with P and T known to the compiler, as float_tiles. */
INLINE void bf16_tiles(int P, int T, const char *groups, size_t gbytes, const float *xt, int K, float *out,
                       size_t ldo, int rows_left, const char *prefetch, int lines) {
    if (P == 4) {
        switch (T) {
        case 5: bf16_tile(4, 5, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        case 4: bf16_tile(4, 4, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        case 3: bf16_tile(4, 3, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        case 2: bf16_tile(4, 2, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        default: bf16_tile(4, 1, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines); return;
        }
    }
    if (P == 2) bf16_tiles_of(2, T, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines);
    else bf16_tiles_of(1, T, groups, gbytes, xt, K, out, ldo, rows_left, prefetch, lines);
}

/* TSC cycles of 16384 products per lane in 8 chains, by the BF16 dot
 * product (2 per instruction) or by fp32 FMAs. */
static uint64_t cycles_of_products(bool bf16_dot) {
    __m512 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
    uint64_t start = __rdtsc();
    if (bf16_dot) {
        __m512bh ones = (__m512bh)_mm512_set1_epi32(0x3F803F80);  /* bf16 1.0, twice */
        for (int i = 0; i < 1024; i++)
            for (int j = 0; j < 8; j++) acc[j] = _mm512_dpbf16_ps(acc[j], ones, ones);
    } else {
        for (int i = 0; i < 2048; i++)
            for (int j = 0; j < 8; j++) acc[j] = _mm512_fmadd_ps(acc[j], _mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    }
    uint64_t cycles = __rdtsc() - start;
    volatile float sink = _mm512_reduce_add_ps(acc[0]);
    (void)sink;
    return cycles;
}

/* Whether the instruction is clearly the faster way (by a quarter: where
 * the two are about even, as on some Intel Xeons, the FMA tiles win, gcc
 * compiling them without spilling accumulators): each timed 8 times,
 * alternately, after a first round that wakes the vector units up; the
 * least time of each. */
static bool bf16_dot_is_faster(void) {
    uint64_t dot = UINT64_MAX, fma = UINT64_MAX;
    for (int round = 0; round < 9; round++) {
        uint64_t d = cycles_of_products(true), f = cycles_of_products(false);
        if (round == 0) continue;
        dot = d < dot ? d : dot;
        fma = f < fma ? f : fma;
    }
    return dot * 4 < fma * 3;
}

/* Whether bf16 arithmetic uses the BF16 dot product or FMAs on this CPU:
 * the sums are the same (products of bf16 are exact; only denormals, which
 * the instruction flushes to 0, differ), but the instruction
 * does twice the products of an FMA per cycle on some CPUs (AMD Zen 4) and
 * the same on others (some Intel Xeons). Measured once, unless RUN_BF16_DOT says
 * `instruction` or `fma` (see bf16_dot_setting). */
static bool bf16_dot_instruction(void) {
    static _Atomic int choice;  /* 0: not yet; 1: the instruction; 2: FMAs */
    int c = atomic_load(&choice);
    if (c == 0) {
        Bf16Dot setting = bf16_dot_setting();
        if (setting == BF16_DOT_INSTRUCTION) c = 1;
        else if (setting == BF16_DOT_FMA) c = 2;
        else c = bf16_dot_is_faster() ? 1 : 2;
        atomic_store(&choice, c);
    }
    return c == 1;
}

/* The groups of rows [r0, r1) times every tile of tokens (fp32 activations
 * and weights of `type`, or bf16 arithmetic): P groups at a time (4 for up
 * to 5 tokens: memory bound, more rows in flight; else 2). Past 5 tokens the
 * next P groups are prefetched, shared out between the tiles (a few percent
 * faster prefill); up to 5, the hardware's prefetcher alone reads faster
 * (on Zen 4 decoding bf16 streamed 57 GB/s with it, 67 without). */
INLINE void tile_range(WeightType type, bool bf16_math, const Matrix *w, const float *xp, int n, float *out, int r0, int r1) {
    int K = w->cols;
    size_t gbytes = group_bytes(type, K);
    const char *data = w->data;
    bool instruction = bf16_math && bf16_dot_instruction();
    int g_end = (r1 + ROW_GROUP - 1) / ROW_GROUP, block = token_block(K);
    for (int t0 = 0; t0 < n; t0 += block) {
        int t1 = n - t0 < block ? n : t0 + block, tiles = (t1 - t0 + TOKEN_TILE - 1) / TOKEN_TILE;
        for (int g = r0 / ROW_GROUP; g < g_end;) {
            int P = n <= 5 ? 4 : 2;
            if (g + P > g_end) P = 1;
            const char *groups = data + (size_t)g * gbytes, *next = groups + (size_t)P * gbytes;
            int lines = n <= 5 ? 0 : (int)((size_t)P * gbytes / 64);
            for (int i = 0, t = t0; t < t1; t += TOKEN_TILE, i++) {
                int from = lines * i / tiles, pl = lines * (i + 1) / tiles - from, rows_left = r1 - g * ROW_GROUP;
                float *o = out + (size_t)t * w->rows + g * ROW_GROUP;
                const float *xt = xp + (size_t)t * K;
                if (instruction)
                    bf16_tiles(P, tile_width(n, t), groups, gbytes, xt, K, o, (size_t)w->rows, rows_left, next + (size_t)64 * from, pl);
                else
                    float_tiles(type, bf16_math, P, tile_width(n, t), groups, gbytes, xt, K, o, (size_t)w->rows, rows_left,
                                next + (size_t)64 * from, pl);
            }
            g += P;
        }
    }
}

static void matmul_float(float *out, const float *xp, const Matrix *w, int n, int r0, int r1) {
    /* The weight type as a constant, so that the always-inlined range is
     * built once per type. */
    switch (w->type) {
    case WEIGHT_F16: tile_range(WEIGHT_F16, false, w, xp, n, out, r0, r1); break;
    case WEIGHT_BF16: tile_range(WEIGHT_BF16, false, w, xp, n, out, r0, r1); break;
    default: tile_range(WEIGHT_F32, false, w, xp, n, out, r0, r1); break;
    }
}

/* bf16 arithmetic: the BF16 dot product, or the fp32 tiles over the rounded
 * activations with each pair's second column first (the same sums). */
static void matmul_bf16(float *out, const float *xp, const Matrix *w, int n, int r0, int r1) {
    tile_range(WEIGHT_BF16, true, w, xp, n, out, r0, r1);
}

/* ---- quantized weights with vpdpbusd: lanes are the 16 rows of a group;
 * each instruction adds 4 unsigned-by-signed byte products into each lane.
 * q8 weights go in as q + 128 (q xor 0x80) and q4 nibbles as they are, so
 * each block's sum holds offset * sum(x) too much (128 or 8), taken off
 * before it is scaled. A tile is G groups (see quant_range) x up to Q_T
 * tokens. ---- */

enum { Q_G = 2, Q_G_WIDE = 4, Q_T = 6 };

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
    __m512 acc[Q_T][Q_G_WIDE];
    for (int t = 0; t < T; t++)
        for (int g = 0; g < G; g++) acc[t][g] = _mm512_setzero_ps();
    const __m512i flip = _mm512_set1_epi8((char)0x80), nibble = _mm512_set1_epi8(15);
    for (int b = 0; b < blocks; b++) {
        __m512i isum[Q_T][Q_G_WIDE];
        for (int t = 0; t < T; t++)
            for (int g = 0; g < G; g++) isum[t][g] = _mm512_setzero_si512();
        const int8_t *xb = x->q + (size_t)t0 * K + (size_t)b * QUANT_BLOCK;
        if (type == WEIGHT_Q8) {
            for (int s = 0; s < 8; s++) {
                __m512i wv[Q_G_WIDE];
                for (int g = 0; g < G; g++)
                    wv[g] = _mm512_xor_si512(_mm512_loadu_si512(data + ((g0 + g) * blocks + (size_t)b) * block_bytes + s * 64), flip);
                for (int t = 0; t < T; t++) {
                    __m512i xv = _mm512_set1_epi32(x_word(xb + (size_t)t * K + s * 4));
                    for (int g = 0; g < G; g++) isum[t][g] = _mm512_dpbusd_epi32(isum[t][g], wv[g], xv);
                }
            }
        } else {
            for (int s = 0; s < 4; s++) {
                __m512i lo[Q_G_WIDE], hi[Q_G_WIDE];
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
        __m512 ws[Q_G_WIDE];
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

/* The groups of rows [r0, r1) times every tile of tokens, G groups at a
 * time: 2, or 4 for up to 3 tokens (decoding: each group's chain of dot
 * products waits on its previous step, so more groups in flight keep up
 * with the memory; q4 on Zen 4 read a third more bytes per second, q8 on
 * Zen 5 4-27% more), fewer for the last groups. */
INLINE void quant_range(WeightType type, float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1) {
    size_t g_end = ((size_t)r1 + ROW_GROUP - 1) / ROW_GROUP;
    int wide = n <= 3 ? Q_G_WIDE : Q_G;
    for (size_t g = (size_t)r0 / ROW_GROUP; g < g_end;) {
        int G = wide;
        while (g + (size_t)G > g_end) G /= 2;
        for (int t = 0; t < n; t += Q_T) {
            int T = n - t < Q_T ? n - t : Q_T;
            if (G == Q_G_WIDE) quant_tiles(Q_G_WIDE, T, type, x, w, g, t, out, r1);
            else if (G == Q_G) quant_tiles(Q_G, T, type, x, w, g, t, out, r1);
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
INLINE float tile_weights(const float *qg, int vectors, const float *k, int len, const AttendSpec *spec, bool first, float *m,
                          float *l, float *p) {
    __m512 qv[MAX_HEAD_VECTORS], s[ATTEND_KEY_BLOCK / 16];
    for (int d = 0; d < vectors; d++) qv[d] = _mm512_loadu_ps(qg + 16 * d);
    int chunks = (len + 15) / 16;
    __m512 tile_max = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < chunks; c++) {
        int n = len - 16 * c < 16 ? len - 16 * c : 16;
        s[c] = scores16(qv, vectors, k + (size_t)c * 16 * vectors * 16, n, spec->scale);
        if (spec->softcap > 0) {
            float capped[16];
            _mm512_storeu_ps(capped, s[c]);
            for (int j = 0; j < n; j++) capped[j] = attend_cap(spec, capped[j]);
            s[c] = _mm512_loadu_ps(capped);
        }
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
INLINE void attend_vectors(int vectors, float *out, const float *q, size_t ld, int n_q, int pos, const void *keys,
                           const void *values, int group, const AttendSpec *spec, float *scratch) {
    int hd = vectors * 16, heads_at_once = vectors <= 4 ? 6 : vectors <= 8 ? 2 : 1;
    float *max = scratch, *sum = max + (size_t)n_q * group, *p = sum + (size_t)n_q * group;  /* p: [group][tile] */
    float *tile_k = scratch + attend_tile_offset(group, n_q), *tile_v = tile_k + (size_t)ATTEND_KEY_BLOCK * hd;
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++) memset(out + i * ld + (size_t)g * hd, 0, (size_t)hd * sizeof(float));
    for (int t0 = attend_first_tile(spec, pos); t0 < pos + n_q; t0 += ATTEND_KEY_BLOCK) {
        /* The rows the block's queries see of this tile, as floats. */
        int span_from, span = attend_tile_span(spec, t0, pos, n_q, &span_from);
        if (span <= 0) continue;
        const float *tk = attend_rows(&kernels_avx512, spec->key_type, keys, span_from % spec->rows, span, hd, tile_k);
        const float *tv = attend_rows(&kernels_avx512, spec->value_type, values, span_from % spec->rows, span, hd, tile_v);
        for (int i = t0 > pos ? t0 - pos : 0; i < n_q; i++) {
            int from;
            bool first;
            int len = attend_part(spec, t0, pos + i, &from, &first);
            if (len <= 0) continue;
            const float *k = tk + (size_t)(from - span_from) * hd, *v = tv + (size_t)(from - span_from) * hd;
            float a[MAX_GROUP];
            for (int g = 0; g < group; g++) {
                size_t at = (size_t)i * group + g;
                a[g] = tile_weights(q + i * ld + (size_t)g * hd, vectors, k, len, spec, first, max + at, sum + at,
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
static void attend_tiles(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values,
                         int group, int hd, const AttendSpec *spec, float *scratch) {
    if (hd % 16 != 0 || hd / 16 > MAX_HEAD_VECTORS || group > MAX_GROUP)
        avx2_attend(out, q, ld, n_q, pos, keys, values, group, hd, spec, scratch);
    else if (hd == 64)
        attend_vectors(4, out, q, ld, n_q, pos, keys, values, group, spec, scratch);
    else if (hd == 128)
        attend_vectors(8, out, q, ld, n_q, pos, keys, values, group, spec, scratch);
    else if (hd == 256)
        attend_vectors(16, out, q, ld, n_q, pos, keys, values, group, spec, scratch);
    else
        attend_vectors(hd / 16, out, q, ld, n_q, pos, keys, values, group, spec, scratch);
}

/* Rows of a KV cache as floats, 16 values at a time (n is whole rows: for
 * q8_0, whole blocks of 32). */
static void kv_load(float *out, KVType t, const void *rows, size_t n) {
    size_t i = 0;
    if (t == KV_BF16) {
        const uint16_t *h = rows;
        for (; i + 16 <= n; i += 16) {
            __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i)));
            _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
        }
        for (; i < n; i++) out[i] = bf16_to_f32(h[i]);
    } else if (t == KV_Q8_0) {
        const uint8_t *block = rows;
        for (; i < n; i += QUANT_BLOCK, block += Q8_0_BLOCK_BYTES) {
            uint16_t half;
            memcpy(&half, block, 2);
            __m512 d = _mm512_set1_ps(f16_to_f32(half));
            for (int j = 0; j < QUANT_BLOCK; j += 16) {
                __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(block + 2 + j)));
                _mm512_storeu_ps(out + i + j, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
            }
        }
    } else {
        memcpy(out, rows, n * sizeof(float));
    }
}

/* ---- the MLP's gates: gate[i] = step(gate[i], up[i]), 16 at a time, the
 * last few under a mask; each step as the plain path's, in float. ---- */

INLINE __m512 swiglu16(__m512 g, __m512 u) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

/* gelu_step (kernels_path.h) on 16 values, times u. */
INLINE __m512 gelu16(__m512 g, __m512 u) {
    __m512 cubic = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    __m512 t = _mm512_mul_ps(_mm512_set1_ps(GELU_SQRT_2_OVER_PI), _mm512_fmadd_ps(_mm512_set1_ps(GELU_CUBIC), cubic, g));
    __m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), t));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

INLINE void gate_rows(float *gate, const float *up, size_t n, __m512 (*step)(__m512, __m512)) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask((int)(n - i < 16 ? n - i : 16));
        _mm512_mask_storeu_ps(gate + i, m, step(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
    }
}

static void swiglu_gate(float *gate, const float *up, size_t n) { gate_rows(gate, up, n, swiglu16); }
static void gelu_gate(float *gate, const float *up, size_t n) { gate_rows(gate, up, n, gelu16); }

const KernelPath kernels_avx512 = {
    .name = "avx512",
    .matmul_float = matmul_float,
    .matmul_bf16 = matmul_bf16,
    .bf16_pairs = bf16_dot_instruction,
    .matmul_quant = matmul_quant,
    .quantize_row = avx2_quantize_row,
    .attend = attend_tiles,
    .kv_load = kv_load,
    .swiglu = swiglu_gate,
    .gelu = gelu_gate,
    .softmax = avx2_softmax,
};
#endif
