/* kernels.h - the arithmetic that dominates a forward pass: a weight matrix
 * times one activation vector (decoding a token) or times a block of them
 * (prefilling a prompt), for every weight format, spread over a thread pool;
 * attention over a KV cache of f32, bf16 or q8_0 rows, and those rows'
 * formats; the SwiGLU activation; softmax.
 *
 * Kernel paths. One binary carries three versions of every kernel: plain C
 * (the definition, runs anywhere), AVX2+FMA+F16C, and AVX-512 (F, BW, VL,
 * VNNI and BF16: Zen 4, Sapphire Rapids and later). The best path this CPU
 * runs is chosen at the first use, or the one named by the environment
 * variable RUN_KERNELS (plain, avx2, avx512), or by kernels_use(). The
 * AVX-512 path does bf16 arithmetic with the BF16 dot product where it is
 * faster than FMAs (timed once; RUN_BF16_DOT=instruction or fma decides
 * instead): the same sums either way, but for denormal values (below
 * 1.2e-38), which the instruction takes and gives as 0.
 *
 * Exactness. Formats whose activations stay fp32 (weights f32, f16, bf16)
 * give the same bits on every path, for any thread count, for a token alone
 * or in a block. Every such dot product w . x is summed in one order, the
 * order of k: acc = 0, then acc = fma(w[k], x[k], acc) for k = 0 .. K-1.
 * (The kernels keep it by putting 16 rows, not 16 values of k, in a
 * vector's lanes: see the grouped layouts below.) Attention, SwiGLU and
 * softmax use one e^x (see kernel_exp in kernels_path.h), the "16-lane
 * order" for their sums (lane l of 16 accumulates, in increasing k, the
 * k with k = l (mod 16); then a halving tree adds the lanes:
 * s8[l] = acc[l] + acc[l+8], s4[l] = s8[l] + s8[l+4], s2[l] = s4[l] + s4[l+2],
 * result = s2[0] + s2[1]) and the orders stated at attend().
 *
 * Quantized formats (q8, q4) multiply integers: each token's activations are
 * rounded per block of 32 to int8 (scale = max |x| / 127), each block's dot
 * product is an exact int32 sum, and a row's result is, over the blocks b in
 * order, acc = fma((float)isum_b, wscale_b * xscale_b, acc). That too is the
 * same on every path, thread count and block size (integer sums do not
 * depend on order), and differs from fp32 activations by the rounding of x.
 *
 * bf16 arithmetic (Matrix.math = MATH_BF16, for bf16 weights): activations
 * rounded to bf16 (to nearest even), products accumulated in fp32 in pairs
 * as the AVX-512 BF16 dot product does: over the column pairs (2c, 2c+1) in
 * order (a missing last column adds nothing), acc = acc + w[2c+1] x[2c+1],
 * then acc = acc + w[2c] x[2c], with exact products (so a fused
 * multiply-add gives the same sums). Faster where that instruction runs at
 * full rate; less exact. */
#ifndef KERNELS_H
#define KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "threads.h"
#include "util.h"

typedef enum { WEIGHT_F32, WEIGHT_F16, WEIGHT_BF16, WEIGHT_Q8, WEIGHT_Q4 } WeightType;

/* How bf16 weights are multiplied: exactly (fp32 activations) or with
 * activations rounded to bf16 (see above). */
typedef enum { MATH_EXACT, MATH_BF16 } MathMode;

/* Layouts. A matrix as a checkpoint stores it is row-major: [rows][cols].
 * The products need the "grouped" layouts below, made at load time: rows
 * come in groups of ROW_GROUP (the last group zero-padded), a group's rows
 * side by side, so that one vector load holds the same column(s) of all 16
 * rows; each lane then computes one row's dot product in the order of k.
 *   f32, f16: data [group][col][row 0..15].
 *   bf16: data [group][col pair][row 0..15][2]: columns 2c and 2c+1 of a
 *       row side by side (the 32 bits the AVX-512 BF16 dot product takes;
 *       widening to fp32 is then a shift for 2c and a mask for 2c+1); when
 *       cols is odd the last pair's second value is 0.
 *   q8 and q4 (always grouped): columns split into blocks of QUANT_BLOCK,
 *       each with an f16 scale per row, stored interleaved so that one
 *       64-byte load holds 4 consecutive columns of all 16 rows of a group,
 *       the shape the integer dot products (vpdpbusd: 4 byte products into
 *       each 32-bit lane) consume:
 *   q8: data [group][block][k4 0..7][row 0..15][4] int8 q, w = q * scale,
 *       q in -127..127; 512 bytes per group and block.
 *   q4: data [group][block][k4 0..3][row 0..15][4] bytes; the low nibble of
 *       byte i holds column 4*k4 + i, the high nibble column 16 + 4*k4 + i;
 *       a nibble u in 0..15 means w = (u - 8) * scale; 256 bytes per group
 *       and block.
 *   scales: [group][block][row 0..15] f16. */
enum { QUANT_BLOCK = 32, ROW_GROUP = 16 };

typedef enum { LAYOUT_GROUPED, LAYOUT_ROWS } Layout;

typedef struct {
    WeightType type;
    int rows, cols;
    const void *data;        /* see the layouts above */
    const uint16_t *scales;  /* q8/q4: f16 scales, see above */
    void *owned;             /* memory this matrix allocated (converted copies), else NULL */
    MathMode math;           /* bf16 weights: MATH_BF16 rounds activations to bf16 */
    Layout layout;           /* f32/f16/bf16: LAYOUT_ROWS as a file stores them; products need LAYOUT_GROUPED */
} Matrix;

const char *weight_type_name(WeightType t);

/* Bytes of memory the matrix's weights occupy (with a group's padding). */
size_t matrix_bytes(const Matrix *m);

/* out[t][r] = sum over k of w[r][k] * x[t][k], for t < n_tokens and r < w->rows.
 * x is [n_tokens][w->cols], out is [n_tokens][w->rows]; w is grouped. */
void matmul(float *out, const float *x, const Matrix *w, int n_tokens, ThreadPool *pool);

/* One product of a batch: out = x w^T for n_tokens rows, as matmul. */
typedef struct {
    float *out;                /* [n_tokens][w->rows] */
    const float *x;            /* [n_tokens][w->cols] */
    const Matrix *w;
    int n_tokens;
} MatmulProduct;

/* matmul of each of n products, with the same results, in one run of the
 * pool: their row groups are shared out between the threads together, so
 * that many small products (the experts of a mixture) keep every thread
 * busy. Consecutive products with the same x, token count and width, whose
 * formats prepare activations alike, prepare them once. */
void matmul_batch(const MatmulProduct *products, int n, ThreadPool *pool);

/* The same product on the plain C path, one scalar at a time: the
 * definition that the SIMD kernels follow, bit for bit. */
void matmul_plain(float *out, const float *x, const Matrix *w, int n_tokens);

/* out[k] = w[row][k] widened to float (any layout): an embedding lookup. */
void matrix_row(float *out, const Matrix *w, int row);

/* Grouped copies of src that own their memory: of a row-major f32, f16 or
 * bf16 matrix in its format (matrix_grouped); of any matrix converted to
 * f32, or quantized to q8 or q4 (cols must be a multiple of QUANT_BLOCK).
 * Per block, the scale d (rounded to f16) is the one among a few candidates
 * that gives the least squared error sum (w - d q)^2 over the block, with
 * q = clamp(round(w / d)):
 *   q8: d = max|w| / 127, q in -127..127;
 *   q4: d = M / {-8, -7.5, -8.5, -9}, M the weight of largest magnitude
 *       (signed), q in -8..7. */
Matrix matrix_grouped(const Matrix *src, ThreadPool *pool);
Matrix matrix_to_f32(const Matrix *src, ThreadPool *pool);
Matrix matrix_to_q8(const Matrix *src, ThreadPool *pool);
Matrix matrix_to_q4(const Matrix *src, ThreadPool *pool);
void matrix_free(Matrix *m);

/* A grouped matrix of `type` and shape rows x cols over `bytes`, which hold
 * its matrix_bytes() as the copies above lay them out in one block from
 * data (q8/q4: the weights, then the scales); it owns nothing. */
Matrix matrix_view(WeightType type, int rows, int cols, const void *bytes);

/* ---- the KV cache's formats ---- */

/* How a KV cache holds keys or values (llama.cpp's names for -ctk/-ctv):
 *   KV_F32   floats, as computed: exact (the default);
 *   KV_BF16  each value rounded to bf16 (to nearest even): 2 bytes a value;
 *   KV_Q8_0  a row in blocks of QUANT_BLOCK values laid out as llama.cpp's
 *            block_q8_0: the scale d as an f16 (2 bytes, little-endian), then
 *            32 int8 q; 34 bytes for 32 values, a value being q * d. d is
 *            max |x| / 127 over the block rounded to f16 (the largest finite
 *            f16, 65504, if that overflows); q = x / d rounded to nearest
 *            even and clamped to [-127, 127] (all 0 when d is 0). Rows must
 *            be whole blocks.
 * A stored value read back is exact as a float (q * d multiplies 8 bits by
 * 11), and attend() computes with exactly those floats: what a cache of
 * another type changes is the rounding of what is stored, nothing else. */
typedef enum { KV_F32, KV_BF16, KV_Q8_0 } KVType;
enum { KV_TYPES = 3 };

/* "f32", "bf16", "q8_0". */
const char *kv_type_name(KVType t);

/* The type called `name`; fails, naming the types there are, for another
 * name (llama.cpp's f16, q4_0 and the rest are not kept here). */
int kv_type_parse(KVType *t, const char *name, Error *e);

/* Whether rows of hd values can be held as t (q8_0: whole blocks of 32). */
bool kv_type_fits(KVType t, int hd);

/* Bytes of one row of hd values held as t. */
size_t kv_row_bytes(KVType t, int hd);

/* Stores x[0..hd) as t into row, and reads n consecutive values (whole
 * rows) back as floats: the definitions the kernel paths follow. */
void kv_row_store(void *row, KVType t, const float *x, int hd);
void kv_rows_load(float *out, KVType t, const void *rows, size_t n);

/* How attention looks back: the scale of its scores, an optional soft cap,
 * an optional window, and where each position's key and value are and in
 * which format. */
typedef struct {
    float scale;               /* a score is q . k times this */
    float softcap;             /* 0, or a score s becomes softcap * tanh(s / softcap) */
    int window;                /* 0, or the query at position p sees positions p - window + 1 .. p only */
    int rows;                  /* position t's key and value are row t % rows (a ring: a multiple of
                                  ATTEND_KEY_BLOCK, or more rows than positions) */
    KVType key_type, value_type; /* the rows' formats: kv_row_bytes(type, hd) bytes a row */
} AttendSpec;

/* Causal attention for a block of n_q consecutive query tokens at positions
 * pos .. pos + n_q - 1, for the `group` query heads that share one key/value
 * head. Query token i attends over the keys and values of positions
 * lo(pos + i) .. pos + i, lo(p) = max(0, p - window + 1) with a window, else 0:
 *   out[i][g] = sum over those t of softmax_t(cap(q[i][g] . k_t * scale)) v_t.
 * Token i's heads are at q + i * ld and out + i * ld, head after head
 * ([group][hd]). keys and values hold rows in the spec's formats; k_t and
 * v_t are their values as floats (kv_rows_load). scratch holds
 * attend_scratch_floats(group, n_q, hd) floats (whatever the number of keys).
 * The keys are taken in tiles of the ATTEND_KEY_BLOCK positions from a
 * multiple of ATTEND_KEY_BLOCK, each tile read once for all the block's
 * queries (flash attention; a tile of bf16 or q8_0 rows is turned into
 * floats once for all of them); a query takes the part of a tile it sees. Per
 * query, a score is s = (q . k in the 16-lane order) * scale, then
 * softcap * tanhf(s / softcap) with a cap; per tile, with m the running
 * maximum, m' = max(m, the tile's scores), a = e^(m - m') (0 for the first
 * tile the query sees), p_t = e^(s_t - m'), the running sum l = l a + (the
 * part's p_t added as 16 lanes (t - first t of the part) mod 16, then the
 * halving tree), the output o = o a, then o += p_t v_t for t in order (fma);
 * at the end out = o / l. So a query's result does not depend on n_q or pos,
 * and a cache of bf16 or q8_0 rows gives exactly what an f32 cache holding
 * their values gives. */
void attend(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values, int group,
            int hd, const AttendSpec *spec, float *scratch);
size_t attend_scratch_floats(int group, int n_q, int hd);

/* Query tokens per attend() call that the forward pass hands a thread, and
 * key positions per tile. */
enum { ATTEND_QUERY_BLOCK = 32, ATTEND_KEY_BLOCK = 64 };

/* The SwiGLU activation, elementwise over n values: gate = silu(gate) * up,
 * where silu(g) = g / (1 + e^-g). */
void swiglu(float *gate, const float *up, size_t n, ThreadPool *pool);

/* Gemma's gated GELU, elementwise over n values: gate = gelu(gate) * up,
 * gelu(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (transformers'
 * gelu_pytorch_tanh), in float through e^x (gelu_step in kernels_path.h):
 * the same bits on every path. */
void gelu_tanh_gate(float *gate, const float *up, size_t n, ThreadPool *pool);

/* x = softmax(x) over n values: e^(x_i - max) / sum, the sum taken in 16
 * lanes (i mod 16) and the halving tree. */
void softmax(float *x, int n);

/* Conversions of single 16-bit floats. */
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);
/* Rounded to nearest even (NaN stays NaN). */
uint16_t f32_to_bf16(float f);
uint16_t f32_to_f16(float f);

/* ---- kernel paths ---- */
enum { KERNEL_PATHS = 3 };

/* The name of path i < KERNEL_PATHS ("plain", "avx2", "avx512"), and whether
 * this CPU can run it. */
const char *kernel_path_name(int i);
bool kernel_path_supported(int i);

/* Uses the path `name`, or with NULL or "" the best this CPU runs; fails for
 * a name that is unknown or that this CPU cannot run. */
int kernels_use(const char *name, Error *e);

/* The path in use (chosen at the first use if kernels_use was not called:
 * RUN_KERNELS if it names a path this CPU runs, else the best). */
const char *kernels_in_use(void);

#endif
