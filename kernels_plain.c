/* kernels_plain.c - the plain C path: every kernel one scalar at a time
 * (the KV cache's rows turned into floats value by value too), written to be
 * read. It is the definition the SIMD paths follow bit for bit
 * (tests/test_kernels.c holds them to it) and runs on any CPU. */
#include <math.h>
#include <stdlib.h>

#include "kernels_path.h"

/* W[r][k] of a grouped f32, f16 or bf16 matrix as a float. */
static float weight_at(const Matrix *w, int r, int k) {
    size_t i = grouped_index(w, r, k);
    switch (w->type) {
    case WEIGHT_F32: return ((const float *)w->data)[i];
    case WEIGHT_F16: return f16_to_f32(((const uint16_t *)w->data)[i]);
    case WEIGHT_BF16: return bf16_to_f32(((const uint16_t *)w->data)[i]);
    default: return 0;
    }
}

/* a . b in the 16-lane order. */
static float dot16(const float *a, const float *b, int n) {
    float lane[16] = {0};
    for (int k = 0; k < n; k++) lane[k % 16] = fmaf(a[k], b[k], lane[k % 16]);
    return sum_lanes16(lane);
}

/* Each output a chain of fused multiply-adds in the order of k. */
static void matmul_float(float *out, const float *xp, const Matrix *w, int n, int r0, int r1) {
    int K = w->cols;
    for (int t = 0; t < n; t++)
        for (int r = r0; r < r1; r++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc = fmaf(weight_at(w, r, k), xp[tile_index(n, K, t, k)], acc);
            out[(size_t)t * w->rows + r] = acc;
        }
}

/* bf16 arithmetic: per column pair, the product of the second column, then
 * of the first, added to the sum (products of two bf16 are exact; a
 * missing last column adds nothing). */
static void matmul_bf16(float *out, const float *xp, const Matrix *w, int n, int r0, int r1) {
    int K = w->cols;
    for (int t = 0; t < n; t++)
        for (int r = r0; r < r1; r++) {
            float acc = 0;
            for (int k = 0; k < K; k += 2) {
                if (k + 1 < K) acc += weight_at(w, r, k + 1) * xp[tile_index(n, K, t, k + 1)];
                acc += weight_at(w, r, k) * xp[tile_index(n, K, t, k)];
            }
            out[(size_t)t * w->rows + r] = acc;
        }
}

/* q8 and q4: an exact integer sum per block, then acc = fma(sum, scales, acc). */
static void matmul_quant(float *out, const QuantizedRows *x, const Matrix *w, int n, int r0, int r1) {
    int K = w->cols, blocks = K / QUANT_BLOCK;
    for (int t = 0; t < n; t++)
        for (int r = r0; r < r1; r++) {
            const int8_t *xq = x->q + (size_t)t * K;
            float acc = 0;
            for (int b = 0; b < blocks; b++) {
                int32_t isum = 0;
                for (int j = 0; j < QUANT_BLOCK; j++) isum += quant_value(w, r, b * QUANT_BLOCK + j) * xq[b * QUANT_BLOCK + j];
                acc = fmaf((float)isum, quant_scale(w, r, b) * x->scale[(size_t)t * blocks + b], acc);
            }
            out[(size_t)t * w->rows + r] = acc;
        }
}

static void quantize_row(int8_t *q, float *scale, int32_t *sum, const float *x, int cols) {
    for (int b = 0; b < cols / QUANT_BLOCK; b++) {
        const float *xb = x + b * QUANT_BLOCK;
        float amax = 0;
        for (int j = 0; j < QUANT_BLOCK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float inverse = amax > 0 ? 127.0f / amax : 0;
        int32_t s = 0;
        for (int j = 0; j < QUANT_BLOCK; j++) s += q[b * QUANT_BLOCK + j] = (int8_t)nearbyintf(xb[j] * inverse);
        scale[b] = amax / 127.0f;
        sum[b] = s;
    }
}

/* Rows of a KV cache as floats, value by value (see kernels.h). */
static void plain_kv_load(float *out, KVType t, const void *rows, size_t n) {
    if (t == KV_F32) {
        for (size_t i = 0; i < n; i++) out[i] = ((const float *)rows)[i];
    } else if (t == KV_BF16) {
        for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(((const uint16_t *)rows)[i]);
    } else {  /* q8_0: q * d, d the f16 at the start of the values' block */
        for (size_t b = 0; b < n / QUANT_BLOCK; b++) {
            const uint8_t *block = (const uint8_t *)rows + b * Q8_0_BLOCK_BYTES;
            uint16_t half;
            memcpy(&half, block, 2);
            float d = f16_to_f32(half);
            for (int j = 0; j < QUANT_BLOCK; j++) out[b * QUANT_BLOCK + j] = (float)(int8_t)block[2 + j] * d;
        }
    }
}

/* The attention of the query vector q at position p, tile after tile of
 * keys (see kernels.h); tile_k and tile_v hold a tile's rows as floats. */
static void attend_one(float *out, const float *q, int p, const void *keys, const void *values, int hd,
                       const AttendSpec *spec, float *scores, float *tile_k, float *tile_v) {
    float m = -INFINITY, l = 0;
    for (int d = 0; d < hd; d++) out[d] = 0;
    for (int t0 = attend_first_tile(spec, p); t0 <= p; t0 += ATTEND_KEY_BLOCK) {
        int from;
        bool first;
        int len = attend_part(spec, t0, p, &from, &first);
        const float *k = attend_rows(&kernels_plain, spec->key_type, keys, from % spec->rows, len, hd, tile_k);
        const float *v = attend_rows(&kernels_plain, spec->value_type, values, from % spec->rows, len, hd, tile_v);
        float tile_max = -INFINITY;
        for (int t = 0; t < len; t++) {
            scores[t] = attend_cap(spec, dot16(q, k + (size_t)t * hd, hd) * spec->scale);
            tile_max = fmaxf(tile_max, scores[t]);
        }
        float new_max = fmaxf(m, tile_max), a = first ? 0 : kernel_exp(m - new_max), lane[16] = {0};
        for (int t = 0; t < len; t++) {
            scores[t] = kernel_exp(scores[t] - new_max);
            lane[t % 16] += scores[t];
        }
        l = l * a + sum_lanes16(lane);
        for (int d = 0; d < hd; d++) {
            float o = out[d] * a;
            for (int t = 0; t < len; t++) o = fmaf(scores[t], v[(size_t)t * hd + d], o);
            out[d] = o;
        }
        m = new_max;
    }
    for (int d = 0; d < hd; d++) out[d] /= l;
}

static void plain_attend(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values,
                         int group, int hd, const AttendSpec *spec, float *scratch) {
    float *tile_k = scratch + attend_tile_offset(group, n_q), *tile_v = tile_k + (size_t)ATTEND_KEY_BLOCK * hd;
    for (int i = 0; i < n_q; i++)
        for (int g = 0; g < group; g++)
            attend_one(out + i * ld + (size_t)g * hd, q + i * ld + (size_t)g * hd, pos + i, keys, values, hd, spec, scratch,
                       tile_k, tile_v);
}

static void plain_swiglu(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + kernel_exp(-gate[i])) * up[i];
}

static void plain_gelu(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gelu_step(gate[i]) * up[i];
}

static void plain_softmax(float *x, int n) {
    float max = -INFINITY, lane[16] = {0};
    for (int i = 0; i < n; i++) max = fmaxf(max, x[i]);
    for (int i = 0; i < n; i++) lane[i % 16] += x[i] = kernel_exp(x[i] - max);
    float sum = sum_lanes16(lane);
    for (int i = 0; i < n; i++) x[i] /= sum;
}

const KernelPath kernels_plain = {
    .name = "plain",
    .matmul_float = matmul_float,
    .matmul_bf16 = matmul_bf16,
    .matmul_quant = matmul_quant,
    .quantize_row = quantize_row,
    .attend = plain_attend,
    .kv_load = plain_kv_load,
    .swiglu = plain_swiglu,
    .gelu = plain_gelu,
    .softmax = plain_softmax,
};
