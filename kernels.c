/* kernels.c - matrix products for every weight format: plain scalar
 * definitions first, then the AVX2+FMA versions chosen at build time. */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define KERNELS_AVX2 1
#endif

const char *weight_type_name(WeightType t) {
    static const char *names[] = {"f32", "f16", "bf16", "q8"};
    return names[t];
}

size_t matrix_bytes(const Matrix *m) {
    size_t n = (size_t)m->rows * (size_t)m->cols;
    switch (m->type) {
    case WEIGHT_F32: return n * 4;
    case WEIGHT_F16:
    case WEIGHT_BF16: return n * 2;
    case WEIGHT_Q8: return n + n / Q8_BLOCK * sizeof(float);
    }
    return 0;
}

/* ---- scalar definitions ---- */

float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;  /* bf16 is the top half of a float */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, u;
    if (exp == 0x1F) {  /* infinity or NaN */
        u = sign | 0x7F800000 | (mant << 13);
    } else if (exp != 0) {  /* normal: rebias the exponent from 15 to 127 */
        u = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        u = sign;
    } else {  /* subnormal half: normalise it, it is a normal float */
        uint32_t shifts = 0;
        while (!(mant & 0x400)) mant <<= 1, shifts++;
        u = sign | ((113 - shifts) << 23) | ((mant & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* W[r][k] as a float. */
static float weight_at(const Matrix *W, int r, int k) {
    size_t i = (size_t)r * (size_t)W->cols + (size_t)k;
    switch (W->type) {
    case WEIGHT_F32: return ((const float *)W->data)[i];
    case WEIGHT_F16: return f16_to_f32(((const uint16_t *)W->data)[i]);
    case WEIGHT_BF16: return bf16_to_f32(((const uint16_t *)W->data)[i]);
    case WEIGHT_Q8: return (float)((const int8_t *)W->data)[i] * W->scales[i / Q8_BLOCK];
    }
    return 0;
}

/* The final step of every dot product: the 8 lanes added pairwise. */
static float sum_lanes(const float lane[8]) {
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

static float row_dot_scalar(const Matrix *W, int r, const float *x) {
    float lane[8] = {0};
    for (int k = 0; k < W->cols; k++) lane[k % 8] += weight_at(W, r, k) * x[k];
    return sum_lanes(lane);
}

void matmul_plain(float *Y, const float *X, const Matrix *W, int n_tokens) {
    for (int t = 0; t < n_tokens; t++)
        for (int r = 0; r < W->rows; r++) Y[(size_t)t * W->rows + r] = row_dot_scalar(W, r, X + (size_t)t * W->cols);
}

void matrix_row(float *out, const Matrix *W, int r) {
    for (int k = 0; k < W->cols; k++) out[k] = weight_at(W, r, k);
}

/* ---- threads: each thread owns a contiguous range of output rows ---- */

/* Rows [*r0, *r1) for one thread, cut at multiples of 12 (the row tiles). */
static void row_range(int rows, int thread, int n_threads, int *r0, int *r1) {
    long tiles = (rows + 11) / 12;
    long a = tiles * thread / n_threads * 12, b = tiles * (thread + 1) / n_threads * 12;
    *r0 = (int)(a < rows ? a : rows);
    *r1 = (int)(b < rows ? b : rows);
}

typedef struct {
    const Matrix *W;
    const float *X;
    int n_tokens;
    float *Y;
} MatmulJob;

#ifndef KERNELS_AVX2

static void matmul_task(void *arg, int thread, int n_threads) {
    MatmulJob *job = arg;
    int r0, r1;
    row_range(job->W->rows, thread, n_threads, &r0, &r1);
    for (int t = 0; t < job->n_tokens; t++)
        for (int r = r0; r < r1; r++)
            job->Y[(size_t)t * job->W->rows + r] = row_dot_scalar(job->W, r, job->X + (size_t)t * job->W->cols);
}

static float dot(const float *a, const float *b, int n) {
    float lane[8] = {0};
    for (int k = 0; k < n; k++) lane[k % 8] += a[k] * b[k];
    return sum_lanes(lane);
}

static void axpy(float a, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

void softmax(float *x, int n) {
    float max = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) max = fmaxf(max, x[i]);
    for (int i = 0; i < n; i++) sum += x[i] = expf(x[i] - max);
    for (int i = 0; i < n; i++) x[i] /= sum;
}

static void swiglu_range(float *gate, const float *up, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void attend_heads(const float *q, int group, const float *keys, const float *values, int n, int hd, float *scores,
                  float *out) {
    float scale = sqrtf((float)hd);
    for (int g = 0; g < group; g++) {
        const float *qg = q + (size_t)g * hd;
        float *sg = scores + (size_t)g * n, *og = out + (size_t)g * hd;
        for (int t = 0; t < n; t++) sg[t] = dot(qg, keys + (size_t)t * hd, hd) / scale;
        softmax(sg, n);
        memset(og, 0, (size_t)hd * sizeof(float));
        for (int t = 0; t < n; t++) axpy(sg[t], values + (size_t)t * hd, og, hd);
    }
}

#else

/* ---- AVX2 + FMA ---- */

/* Same order as sum_lanes: (l0+l4, l1+l5, l2+l6, l3+l7), then pairs, then one. */
static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight weights W[i..i+8) (i = r * cols + k) widened to floats in registers. */
static inline __attribute__((always_inline)) __m256 load_weights8(WeightType type, const Matrix *W, size_t i) {
    switch (type) {
    case WEIGHT_F32: return _mm256_loadu_ps((const float *)W->data + i);
    case WEIGHT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)W->data + i)));
    case WEIGHT_BF16: {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)W->data + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    case WEIGHT_Q8: {
        __m128i q = _mm_loadl_epi64((const __m128i *)((const int8_t *)W->data + i));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(W->scales[i / Q8_BLOCK]));
    }
    }
    return _mm256_setzero_ps();
}

/* The last, partial group of 8 along a row (cols not a multiple of 8),
 * zero-filled: zeros add nothing to a dot product. */
static __m256 load_weights_tail(const Matrix *W, int r, int k) {
    float w[8] = {0};
    for (int j = 0; k + j < W->cols; j++) w[j] = weight_at(W, r, k + j);
    return _mm256_loadu_ps(w);
}

static __m256 load_tail(const float *x, int n) {
    float v[8] = {0};
    memcpy(v, x, (size_t)n * sizeof *x);
    return _mm256_loadu_ps(v);
}

static size_t element_size(WeightType type) { return type == WEIGHT_F32 ? 4 : type == WEIGHT_Q8 ? 1 : 2; }

/* Matrix-vector (one token): R rows at a time straight from the weights,
 * each row with its own 8-lane accumulator. Decoding is bound by memory
 * bandwidth: while these rows are read, the next R rows are prefetched at
 * the same pace, which keeps the memory busy (the hardware prefetchers alone
 * lose track of several short interleaved streams). */
static inline __attribute__((always_inline)) void matvec_rows(WeightType type, const Matrix *W, int r, int R,
                                                              const float *x, float *y) {
    int K = W->cols, kfull = K & ~7;
    size_t esize = element_size(type), step_bytes = (size_t)R * 8 * esize;
    const char *next = (const char *)W->data + (size_t)(r + R) * K * esize;
    __m256 acc[4];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int k = 0; k < kfull; k += 8) {
        for (size_t at = 0; at < step_bytes; at += 64) _mm_prefetch(next + (size_t)k / 8 * step_bytes + at, _MM_HINT_T0);
        __m256 xv = _mm256_loadu_ps(x + k);
        for (int j = 0; j < R; j++)
            acc[j] = _mm256_fmadd_ps(load_weights8(type, W, (size_t)(r + j) * K + k), xv, acc[j]);
    }
    if (kfull < K) {
        __m256 xv = load_tail(x + kfull, K - kfull);
        for (int j = 0; j < R; j++) acc[j] = _mm256_fmadd_ps(load_weights_tail(W, r + j, kfull), xv, acc[j]);
    }
    for (int j = 0; j < R; j++) y[r + j] = hsum(acc[j]);
}

static inline __attribute__((always_inline)) void matvec_range(WeightType type, const Matrix *W, const float *x,
                                                               float *y, int r0, int r1) {
    int r = r0;
    for (; r + 4 <= r1; r += 4) matvec_rows(type, W, r, 4, x, y);
    for (; r < r1; r++) matvec_rows(type, W, r, 1, x, y);
}

/* One copy of the loop per weight format, so the format is not tested in it. */
static void matvec_f32(const Matrix *W, const float *x, float *y, int r0, int r1) { matvec_range(WEIGHT_F32, W, x, y, r0, r1); }
static void matvec_f16(const Matrix *W, const float *x, float *y, int r0, int r1) { matvec_range(WEIGHT_F16, W, x, y, r0, r1); }
static void matvec_bf16(const Matrix *W, const float *x, float *y, int r0, int r1) { matvec_range(WEIGHT_BF16, W, x, y, r0, r1); }

/* q8 rows, a block of Q8_BLOCK columns at a time, so that each row's scale
 * is fetched once per block and x once per step for all R rows. The weights
 * are the same floats q * scale as load_weights8 gives, summed in the same
 * order. */
static inline __attribute__((always_inline)) void matvec_q8_rows(const Matrix *W, int r, int R, const float *x, float *y) {
    int K = W->cols, blocks = K / Q8_BLOCK;
    const int8_t *q = (const int8_t *)W->data + (size_t)r * K;
    const float *scales = W->scales + (size_t)r * blocks;
    const char *next = (const char *)(q + (size_t)R * K);
    __m256 acc[4];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        _mm_prefetch(next + (size_t)b * R * Q8_BLOCK, _MM_HINT_T0);
        if (R > 2) _mm_prefetch(next + (size_t)b * R * Q8_BLOCK + 64, _MM_HINT_T0);
        __m256 scale[4];
        for (int j = 0; j < R; j++) scale[j] = _mm256_set1_ps(scales[(size_t)j * blocks + b]);
        for (int k = b * Q8_BLOCK; k < (b + 1) * Q8_BLOCK; k += 8) {
            __m256 xv = _mm256_loadu_ps(x + k);
            for (int j = 0; j < R; j++) {
                __m128i bytes = _mm_loadl_epi64((const __m128i *)(q + (size_t)j * K + k));
                __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), scale[j]);
                acc[j] = _mm256_fmadd_ps(w, xv, acc[j]);
            }
        }
    }
    for (int j = 0; j < R; j++) y[r + j] = hsum(acc[j]);
}

static void matvec_q8(const Matrix *W, const float *x, float *y, int r0, int r1) {
    int r = r0;
    for (; r + 4 <= r1; r += 4) matvec_q8_rows(W, r, 4, x, y);
    for (; r < r1; r++) matvec_q8_rows(W, r, 1, x, y);
}

static void matvec(const Matrix *W, const float *x, float *y, int r0, int r1) {
    switch (W->type) {
    case WEIGHT_F32: matvec_f32(W, x, y, r0, r1); break;
    case WEIGHT_F16: matvec_f16(W, x, y, r0, r1); break;
    case WEIGHT_BF16: matvec_bf16(W, x, y, r0, r1); break;
    case WEIGHT_Q8: matvec_q8(W, x, y, r0, r1); break;
    }
}

/* Matrix-matrix (a block of tokens). TILE_R rows at a time, the weights are
 * widened once into a float panel, KC columns at a time, and reused for every
 * token of the block. A register tile of TILE_R rows x TILE_T tokens keeps 12
 * accumulators busy with 8 loads for 12 FMAs. The accumulators persist in
 * memory between column chunks, so every sum still runs over k in order,
 * exactly as in matvec. */
enum { TILE_R = 6, TILE_T = 2, KC = 512, TOKEN_BLOCK = 128 };

/* panel[k/8][j][0..8) = W[r+j][k0+k .. k0+k+8): the R rows' groups of 8 for
 * one step of k side by side, zero-padded past the end of the rows. */
static void pack_panel(const Matrix *W, int r, int R, int k0, int kc, float *panel) {
    int kfull = kc & ~7;
    for (int j = 0; j < R; j++) {
        size_t row = (size_t)(r + j) * W->cols + k0;
        for (int k = 0; k < kfull; k += 8) {
            __m256 w;
            switch (W->type) {
            case WEIGHT_F32: w = load_weights8(WEIGHT_F32, W, row + k); break;
            case WEIGHT_F16: w = load_weights8(WEIGHT_F16, W, row + k); break;
            case WEIGHT_BF16: w = load_weights8(WEIGHT_BF16, W, row + k); break;
            default: w = load_weights8(WEIGHT_Q8, W, row + k); break;
            }
            _mm256_store_ps(panel + (k / 8 * R + j) * 8, w);
        }
        if (kfull < kc) _mm256_store_ps(panel + (kfull / 8 * R + j) * 8, load_weights_tail(W, r + j, k0 + kfull));
    }
}

/* acc[t][j] += panel row j times token t over one column chunk of kc. */
static inline __attribute__((always_inline)) void tile(int R, int T, const float *panel, const float *x, size_t ldx,
                                                       int kc, float *acc) {
    __m256 a[TILE_R * TILE_T];
    for (int i = 0; i < R * T; i++) a[i] = _mm256_load_ps(acc + 8 * i);
    for (int k = 0; k < kc; k += 8) {
        __m256 xv[TILE_T];
        for (int t = 0; t < T; t++)
            xv[t] = k + 8 <= kc ? _mm256_loadu_ps(x + t * ldx + k) : load_tail(x + t * ldx + k, kc - k);
        for (int j = 0; j < R; j++) {
            __m256 w = _mm256_load_ps(panel + (k / 8 * R + j) * 8);
            /* Keeps w in a register: otherwise gcc folds this load into
             * each FMA below and loads it T times. */
            __asm__("" : "+x"(w));
            for (int t = 0; t < T; t++) a[t * R + j] = _mm256_fmadd_ps(w, xv[t], a[t * R + j]);
        }
    }
    for (int i = 0; i < R * T; i++) _mm256_store_ps(acc + 8 * i, a[i]);
}

/* The tile shapes, each compiled with its sizes known. */
static void tile_dispatch(int R, int T, const float *panel, const float *x, size_t ldx, int kc, float *acc) {
    if (R == TILE_R && T == TILE_T) tile(TILE_R, TILE_T, panel, x, ldx, kc, acc);
    else if (R == TILE_R) tile(TILE_R, 1, panel, x, ldx, kc, acc);
    else if (T == TILE_T) tile(1, TILE_T, panel, x, ldx, kc, acc);
    else tile(1, 1, panel, x, ldx, kc, acc);
}

static void gemm(const Matrix *W, const float *X, int n, float *Y, int r0, int r1) {
    _Alignas(32) float panel[TILE_R * KC];
    _Alignas(32) float acc[TOKEN_BLOCK * TILE_R * 8];
    int K = W->cols;
    for (int t0 = 0; t0 < n; t0 += TOKEN_BLOCK) {
        int tn = n - t0 < TOKEN_BLOCK ? n - t0 : TOKEN_BLOCK;
        for (int r = r0; r < r1;) {
            int R = r1 - r >= TILE_R ? TILE_R : 1;
            memset(acc, 0, sizeof acc);
            for (int k0 = 0; k0 < K; k0 += KC) {
                int kc = K - k0 < KC ? K - k0 : KC;
                pack_panel(W, r, R, k0, kc, panel);
                for (int t = 0; t < tn; t += TILE_T) {
                    int T = tn - t < TILE_T ? tn - t : TILE_T;
                    tile_dispatch(R, T, panel, X + (size_t)(t0 + t) * K + k0, (size_t)K, kc, acc + (size_t)t * R * 8);
                }
            }
            for (int t = 0; t < tn; t++)
                for (int j = 0; j < R; j++) Y[(size_t)(t0 + t) * W->rows + r + j] = hsum(_mm256_load_ps(acc + (t * R + j) * 8));
            r += R;
        }
    }
}

static void matmul_task(void *arg, int thread, int n_threads) {
    MatmulJob *job = arg;
    int r0, r1;
    row_range(job->W->rows, thread, n_threads, &r0, &r1);
    if (r0 >= r1) return;
    if (job->n_tokens == 1) matvec(job->W, job->X, job->Y, r0, r1);
    else gemm(job->W, job->X, job->n_tokens, job->Y, r0, r1);
}

static float dot(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= n; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    if (k < n) acc = _mm256_fmadd_ps(load_tail(a + k, n - k), load_tail(b + k, n - k), acc);
    return hsum(acc);
}

/* e^x for 8 floats, to about 1 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by
 * a polynomial (Cephes' coefficients), 2^n put into the exponent bits. */
static __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.37f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

/* Applies f to x[0..n) 8 at a time; the last partial group goes through a
 * zero-padded copy, so every element is computed the same way. */
static void map8(float *x, int n, __m256 (*f)(__m256, __m256), __m256 arg) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(x + i), arg));
    if (i < n) {
        float v[8];
        _mm256_storeu_ps(v, f(load_tail(x + i, n - i), arg));
        memcpy(x + i, v, (size_t)(n - i) * sizeof(float));
    }
}

static __m256 exp_minus(__m256 x, __m256 max) { return exp8(_mm256_sub_ps(x, max)); }
static __m256 divide(__m256 x, __m256 sum) { return _mm256_div_ps(x, sum); }

void softmax(float *x, int n) {
    float max = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) max = fmaxf(max, x[i]);
    map8(x, n, exp_minus, _mm256_set1_ps(max));
    for (int i = 0; i < n; i++) sum += x[i];
    map8(x, n, divide, _mm256_set1_ps(sum));
}

/* Four dot products of q with keys k0..k3 at once, each summed exactly as
 * dot() sums it. */
static void dot4(const float *q, const float *k0, const float *k1, const float *k2, const float *k3, int n, float *out) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 qv = _mm256_loadu_ps(q + k);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + k), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + k), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + k), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + k), a3);
    }
    if (k < n) {
        __m256 qv = load_tail(q + k, n - k);
        a0 = _mm256_fmadd_ps(qv, load_tail(k0 + k, n - k), a0);
        a1 = _mm256_fmadd_ps(qv, load_tail(k1 + k, n - k), a1);
        a2 = _mm256_fmadd_ps(qv, load_tail(k2 + k, n - k), a2);
        a3 = _mm256_fmadd_ps(qv, load_tail(k3 + k, n - k), a3);
    }
    out[0] = hsum(a0);
    out[1] = hsum(a1);
    out[2] = hsum(a2);
    out[3] = hsum(a3);
}

/* out += sum over t of p[t] * v_t, in order of t, for up to 64 columns of
 * the values (from `col`), kept in registers across all t. */
static void weighted_sum64(const float *p, const float *values, int n, int hd, int col, int width, float *out) {
    __m256 acc[8];
    int vecs = width / 8;
    for (int i = 0; i < vecs; i++) acc[i] = _mm256_loadu_ps(out + col + 8 * i);
    for (int t = 0; t < n; t++) {
        __m256 pt = _mm256_set1_ps(p[t]);
        const float *v = values + (size_t)t * hd + col;
        for (int i = 0; i < vecs; i++) acc[i] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v + 8 * i), acc[i]);
    }
    for (int i = 0; i < vecs; i++) _mm256_storeu_ps(out + col + 8 * i, acc[i]);
}

/* Keys and values are read this many at a time, once for all the query heads
 * that share them (a block of 64 keys of 64 floats is 16 KB: it stays in L1). */
enum { ATTENTION_BLOCK = 64 };

static void attend_heads(const float *q, int group, const float *keys, const float *values, int n, int hd, float *scores,
                  float *out) {
    float scale = sqrtf((float)hd);
    for (int t0 = 0; t0 < n; t0 += ATTENTION_BLOCK) {
        int t1 = n - t0 < ATTENTION_BLOCK ? n : t0 + ATTENTION_BLOCK;
        for (int g = 0; g < group; g++) {
            const float *qg = q + (size_t)g * hd;
            float *sg = scores + (size_t)g * n;
            int t = t0;
            for (; t + 4 <= t1; t += 4) {
                const float *k = keys + (size_t)t * hd;
                dot4(qg, k, k + hd, k + 2 * hd, k + 3 * hd, hd, sg + t);
                for (int i = 0; i < 4; i++) sg[t + i] /= scale;
            }
            for (; t < t1; t++) sg[t] = dot(qg, keys + (size_t)t * hd, hd) / scale;
        }
    }
    for (int g = 0; g < group; g++) softmax(scores + (size_t)g * n, n);
    /* Each output column sums over t in order, block after block, exactly as
     * one pass would. */
    memset(out, 0, (size_t)group * hd * sizeof(float));
    int vector_cols = hd & ~7;
    for (int t0 = 0; t0 < n; t0 += ATTENTION_BLOCK) {
        int len = n - t0 < ATTENTION_BLOCK ? n - t0 : ATTENTION_BLOCK;
        const float *v = values + (size_t)t0 * hd;
        for (int g = 0; g < group; g++) {
            const float *p = scores + (size_t)g * n + t0;
            float *og = out + (size_t)g * hd;
            for (int col = 0; col < vector_cols; col += 64)
                weighted_sum64(p, v, len, hd, col, vector_cols - col < 64 ? vector_cols - col : 64, og);
            for (int col = vector_cols; col < hd; col++)  /* columns past the last group of 8 */
                for (int t = 0; t < len; t++) og[col] = fmaf(p[t], v[(size_t)t * hd + col], og[col]);
        }
    }
}

/* gate = silu(gate) * up = gate / (1 + e^-gate) * up, 8 at a time (the
 * ranges given to threads start at multiples of 8). */
static void swiglu_range(float *gate, const float *up, size_t from, size_t to) {
    size_t i = from;
    for (; i + 8 <= to; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(up + i)));
    }
    if (i < to) {
        float g[8] = {0}, u[8] = {0};
        memcpy(g, gate + i, (to - i) * sizeof(float));
        memcpy(u, up + i, (to - i) * sizeof(float));
        swiglu_range(g, u, 0, 8);
        memcpy(gate + i, g, (to - i) * sizeof(float));
    }
}

#endif

typedef struct {
    float *gate;
    const float *up;
    size_t n;
} SwigluJob;

static void swiglu_task(void *arg, int thread, int n_threads) {
    SwigluJob *job = arg;
    size_t groups = (job->n + 7) / 8, from = groups * thread / n_threads * 8, to = groups * (thread + 1) / n_threads * 8;
    swiglu_range(job->gate, job->up, from, to < job->n ? to : job->n);
}

void swiglu(float *gate, const float *up, size_t n, ThreadPool *pool) {
    SwigluJob job = {gate, up, n};
    pool_run(pool, swiglu_task, &job);
}

size_t attend_scratch_floats(int group, int n_q, int n_keys) {
    (void)n_q;
    return (size_t)group * (size_t)n_keys;
}

void attend(float *out, const float *q, size_t ld, int n_q, int pos, const float *keys, const float *values, int group,
            int hd, float *scratch) {
    for (int i = 0; i < n_q; i++)
        attend_heads(q + (size_t)i * ld, group, keys, values, pos + i + 1, hd, scratch, out + (size_t)i * ld);
}

void matmul(float *Y, const float *X, const Matrix *W, int n_tokens, ThreadPool *pool) {
    MatmulJob job = {W, X, n_tokens, Y};
    pool_run(pool, matmul_task, &job);
}

/* ---- conversions made at load time ---- */

typedef struct {
    const Matrix *src;
    Matrix *dst;
} ConvertJob;

static void to_f32_task(void *arg, int thread, int n_threads) {
    ConvertJob *job = arg;
    int r0, r1;
    row_range(job->src->rows, thread, n_threads, &r0, &r1);
    float *out = job->dst->owned;
    for (int r = r0; r < r1; r++) matrix_row(out + (size_t)r * job->src->cols, job->src, r);
}

/* Each block of Q8_BLOCK weights gets scale = max|w| / 127 and q = round(w / scale). */
static void to_q8_task(void *arg, int thread, int n_threads) {
    ConvertJob *job = arg;
    const Matrix *src = job->src;
    int r0, r1;
    row_range(src->rows, thread, n_threads, &r0, &r1);
    int8_t *q = (int8_t *)job->dst->data;
    float *scales = (float *)job->dst->scales, w[Q8_BLOCK];
    for (int r = r0; r < r1; r++)
        for (int b = 0; b < src->cols / Q8_BLOCK; b++) {
            float amax = 0;
            for (int j = 0; j < Q8_BLOCK; j++) {
                w[j] = weight_at(src, r, b * Q8_BLOCK + j);
                amax = fmaxf(amax, fabsf(w[j]));
            }
            float scale = amax / 127.0f;
            size_t i = (size_t)r * src->cols + (size_t)b * Q8_BLOCK;
            scales[i / Q8_BLOCK] = scale;
            for (int j = 0; j < Q8_BLOCK; j++) q[i + j] = (int8_t)(scale > 0 ? lrintf(w[j] / scale) : 0);
        }
}

Matrix matrix_to_f32(const Matrix *src, ThreadPool *pool) {
    Matrix m = {WEIGHT_F32, src->rows, src->cols, NULL, NULL, NULL};
    m.owned = xmalloc_huge((size_t)src->rows * (size_t)src->cols * sizeof(float));
    m.data = m.owned;
    ConvertJob job = {src, &m};
    pool_run(pool, to_f32_task, &job);
    return m;
}

Matrix matrix_to_q8(const Matrix *src, ThreadPool *pool) {
    Matrix m = {WEIGHT_Q8, src->rows, src->cols, NULL, NULL, NULL};
    size_t n = (size_t)src->rows * (size_t)src->cols;
    /* One allocation: the scales first (aligned), then the int8 weights. */
    m.owned = xmalloc_huge(n / Q8_BLOCK * sizeof(float) + n);
    m.scales = m.owned;
    m.data = (int8_t *)m.owned + n / Q8_BLOCK * sizeof(float);
    ConvertJob job = {src, &m};
    pool_run(pool, to_q8_task, &job);
    return m;
}

void matrix_free(Matrix *m) {
    free(m->owned);
    m->owned = NULL;
}
