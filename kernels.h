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

/* out[t][r] = sum over k of w[r][k] * x[t][k], for t < n_tokens and r < w->rows.
 * x is [n_tokens][w->cols], out is [n_tokens][w->rows]. */
void matmul(float *out, const float *x, const Matrix *w, int n_tokens, ThreadPool *pool);

/* The same product computed plainly, one scalar at a time: the definition
 * that the SIMD kernels follow. */
void matmul_plain(float *out, const float *x, const Matrix *w, int n_tokens);

/* out[k] = w[row][k] widened to float: an embedding lookup. */
void matrix_row(float *out, const Matrix *w, int row);

/* A copy of src converted to f32, or quantized to q8 (cols must be a
 * multiple of Q8_BLOCK); the copy owns its memory. */
Matrix matrix_to_f32(const Matrix *src, ThreadPool *pool);
Matrix matrix_to_q8(const Matrix *src, ThreadPool *pool);
void matrix_free(Matrix *m);

/* Causal attention for a block of n_q consecutive query tokens at positions
 * pos .. pos + n_q - 1, for the `group` query heads that share one key/value
 * head. Query token i attends over the keys and values of positions
 * 0 .. pos + i (keys and values are [pos + n_q][hd]):
 *   out[i][g] = sum over t <= pos + i of softmax_t(q[i][g] . k_t / sqrt(hd)) v_t.
 * Token i's heads are at q + i * ld and out + i * ld, head after head
 * ([group][hd]). scratch holds attend_scratch_floats(group, n_q, pos + n_q)
 * floats. */
void attend(float *out, const float *q, size_t ld, int n_q, int pos, const float *keys, const float *values, int group,
            int hd, float *scratch);
size_t attend_scratch_floats(int group, int n_q, int n_keys);

/* Query tokens per attend() call that the forward pass hands a thread. */
enum { ATTEND_QUERY_BLOCK = 16 };

/* x = softmax(x) = e^x_i / sum_j e^x_j over n values, in place. */
void softmax(float *x, int n);

/* The SwiGLU activation, elementwise over n values: gate = silu(gate) * up,
 * where silu(g) = g / (1 + e^-g). */
void swiglu(float *gate, const float *up, size_t n, ThreadPool *pool);

/* Conversions of single 16-bit floats. */
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);

#endif
