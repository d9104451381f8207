/* kernels.h - the arithmetic that dominates a forward pass: a weight matrix
 * times one activation vector (decoding a token) or times a block of them
 * (prefilling a prompt), for every weight format, spread over a thread pool.
 *
 * Every dot product is summed in one fixed order, the same in every kernel:
 * lane l (0..7) accumulates the products of the elements k = l (mod 8) in
 * increasing k, then the 8 lanes are added pairwise. So a token gives
 * bit-identical outputs whether it comes alone or in a block, and whatever the
 * number of threads. */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "threads.h"

typedef enum { WEIGHT_F32, WEIGHT_F16, WEIGHT_BF16, WEIGHT_Q8 } WeightType;

/* q8: weights are stored as int8 in blocks of Q8_BLOCK along a row, each
 * block with one float scale: w = q * scale. */
#define Q8_BLOCK 32

typedef struct {
    WeightType type;
    int rows, cols;
    const void *data;      /* [rows][cols]: float, uint16_t (f16, bf16) or int8_t (q8) */
    const float *scales;   /* q8 only: [rows][cols / Q8_BLOCK] */
    void *owned;           /* memory this matrix allocated (f32 and q8 copies), else NULL */
} Matrix;

const char *weight_type_name(WeightType t);

/* Bytes of memory the matrix's weights occupy. */
size_t matrix_bytes(const Matrix *m);

/* Y[t][r] = sum over k of W[r][k] * X[t][k], for t < n_tokens and r < W->rows.
 * X is [n_tokens][W->cols], Y is [n_tokens][W->rows]. */
void matmul(ThreadPool *pool, const Matrix *W, const float *X, int n_tokens, float *Y);

/* The same product computed plainly, one scalar at a time: the definition
 * that the SIMD kernels follow, and the fallback when AVX2 is missing. */
void matmul_scalar(const Matrix *W, const float *X, int n_tokens, float *Y);

/* out[k] = W[r][k] widened to float: an embedding lookup. */
void matrix_row(const Matrix *W, int r, float *out);

/* A copy of src converted to f32, or quantized to q8 (cols must be a
 * multiple of Q8_BLOCK); the copy owns its memory. */
Matrix matrix_to_f32(ThreadPool *pool, const Matrix *src);
Matrix matrix_to_q8(ThreadPool *pool, const Matrix *src);
void matrix_free(Matrix *m);

/* Attention for one query position, for the `group` query heads that share
 * one key/value head: out[g] = the weighted sum of v_t with weights
 * softmax over t of q[g] . k_t / sqrt(hd), over the n keys and values
 * ([n][hd] each). q and out hold the heads one after another ([group][hd]);
 * scores is scratch space for group * n floats. */
void attend_heads(const float *q, int group, const float *keys, const float *values, int n, int hd, float *scores,
                  float *out);

/* The SwiGLU activation, elementwise over n values: gate = silu(gate) * up,
 * where silu(g) = g / (1 + e^-g). */
void swiglu(ThreadPool *pool, float *gate, const float *up, size_t n);

/* Conversions of single 16-bit floats. */
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);

#endif
