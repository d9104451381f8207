/* test_kernels.c - the arithmetic kernels against plain double-precision
 * arithmetic written here, and their promises, on every kernel path this
 * CPU runs: every weight format, every shape tail, the same bits as the
 * plain C path, for one token or a block and for any number of threads.
 * The KV cache's formats against blocks worked out by hand, and attention
 * over a bf16 or q8_0 cache: exactly attention over an f32 cache holding
 * the rounded values.
 *   test_kernels --paths   prints the paths this CPU runs, one a line */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels.h"
#include "../util.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;

static float uniform(void) {  /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

/* A value of x rounded to bf16 by truncation: any bf16 value will do. */
static uint16_t truncate_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static double bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A random rows x cols matrix stored as `type` (f32, f16 or bf16) in the
 * row-major layout of a file, and its exact values in double. */
static Matrix random_rows(WeightType type, int rows, int cols, double *exact) {
    size_t n = (size_t)rows * cols;
    Matrix m = {.type = type, .rows = rows, .cols = cols, .math = MATH_EXACT, .layout = LAYOUT_ROWS};
    if (type == WEIGHT_F32) {
        float *w = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) exact[i] = w[i] = uniform();
        m.data = m.owned = w;
        return m;
    }
    uint16_t *w = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        float f = uniform();
        if (type == WEIGHT_BF16) {
            w[i] = truncate_bf16(f);
            exact[i] = bf16_value(w[i]);
        } else {  /* f16: a random sign, exponent in [-8, 0) and mantissa */
            int e = 7 + (int)((uniform() + 1) * 4), mant = (int)((uniform() + 1) * 512);
            w[i] = (uint16_t)((f < 0 ? 0x8000 : 0) | e << 10 | mant);
            exact[i] = (f < 0 ? -1 : 1) * ldexp(1024 + mant, e - 25);
        }
    }
    m.data = m.owned = w;
    return m;
}

/* The same, grouped as the products read it. */
static Matrix random_matrix(WeightType type, int rows, int cols, double *exact, ThreadPool *pool) {
    Matrix file = random_rows(type, rows, cols, exact), m = matrix_grouped(&file, pool);
    matrix_free(&file);
    return m;
}

/* max |Y - W X| over the outputs, relative to the largest |W X| */
static double matmul_error(const float *Y, const double *W, const float *X, int rows, int cols, int n) {
    double max_err = 0, max_ref = 0;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            double ref = 0;
            for (int k = 0; k < cols; k++) ref += W[(size_t)r * cols + k] * X[(size_t)t * cols + k];
            max_err = fmax(max_err, fabs(Y[(size_t)t * rows + r] - ref));
            max_ref = fmax(max_ref, fabs(ref));
        }
    return max_err / max_ref;
}

static bool same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* The promises every format keeps on this path: matmul = matmul_plain bit
 * for bit, a block = one token at a time, any thread count. Returns the
 * block's output [n][rows] (the caller frees it). */
static float *check_invariants(const char *what, const Matrix *W, const float *X, int n, ThreadPool *pools[3]) {
    int rows = W->rows, cols = W->cols;
    size_t size = (size_t)n * rows;
    float *block = xmalloc(size * sizeof(float)), *other = xmalloc(size * sizeof(float));
    matmul(block, X, W, n, pools[1]);
    matmul_plain(other, X, W, n);
    CHECK(same(block, other, size), "%s %s %dx%d: = the plain C definition, bit for bit", kernels_in_use(), what, rows, cols);
    for (int t = 0; t < n; t++) matmul(other + (size_t)t * rows, X + (size_t)t * cols, W, 1, pools[1]);
    CHECK(same(block, other, size), "%s %s %dx%d: a block = one token at a time", kernels_in_use(), what, rows, cols);
    for (int p = 0; p < 3; p += 2) {
        matmul(other, X, W, n, pools[p]);
        CHECK(same(block, other, size), "%s %s %dx%d: %d threads = 2 threads", kernels_in_use(), what, rows, cols,
              pool_size(pools[p]));
    }
    free(other);
    return block;
}

static const int shapes[][2] = {{37, 64}, {12, 896}, {50, 100}, {7, 3}, {130, 40}, {16, 1000}, {9, 45}, {5, 60}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0], N_TOKENS = 13 };

static void test_matmul(ThreadPool *pools[3]) {
    WeightType types[] = {WEIGHT_F32, WEIGHT_BF16, WEIGHT_F16};
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t si = 0; si < N_SHAPES; si++) {
            int rows = shapes[si][0], cols = shapes[si][1], n = N_TOKENS;
            double *exact = xmalloc((size_t)rows * cols * sizeof(double));
            Matrix W = random_matrix(types[ti], rows, cols, exact, pools[1]);
            float *X = xmalloc((size_t)n * cols * sizeof(float));
            for (int i = 0; i < n * cols; i++) X[i] = uniform();
            const char *name = weight_type_name(types[ti]);
            bool rows_kept = true;
            float *row = xmalloc((size_t)cols * sizeof(float));
            for (int r = 0; r < rows; r++) {
                matrix_row(row, &W, r);
                for (int k = 0; k < cols; k++) rows_kept &= row[k] == (float)exact[(size_t)r * cols + k];
            }
            free(row);
            CHECK(rows_kept, "%s %dx%d: grouped, each row read back as stored", name, rows, cols);
            float *Y = check_invariants(name, &W, X, n, pools);
            double err = matmul_error(Y, exact, X, rows, cols, n);
            CHECK(err < 1e-5, "%s %s %dx%d: matmul = W X (rel err %.1e)", kernels_in_use(), name, rows, cols, err);
            Matrix f32 = matrix_to_f32(&W, pools[1]);
            float *other = xmalloc((size_t)n * rows * sizeof(float));
            matmul(other, X, &f32, n, pools[1]);
            CHECK(same(Y, other, (size_t)n * rows), "%s %s %dx%d: converted to f32, the same bits", kernels_in_use(), name,
                  rows, cols);
            if (types[ti] == WEIGHT_BF16) {
                /* bf16 arithmetic: x rounded to bf16, then exact products. */
                W.math = MATH_BF16;
                float *Yb = check_invariants("bf16 arithmetic", &W, X, n, pools);
                double max_err = 0, max_ref = 0;
                for (int t = 0; t < n; t++)
                    for (int r = 0; r < rows; r++) {
                        double ref = 0;
                        for (int k = 0; k < cols; k++) {
                            float x = X[(size_t)t * cols + k];
                            ref += exact[(size_t)r * cols + k] * bf16_value(f32_to_bf16(x));
                        }
                        max_err = fmax(max_err, fabs(Yb[(size_t)t * rows + r] - ref));
                        max_ref = fmax(max_ref, fabs(ref));
                    }
                CHECK(max_err / max_ref < 1e-5, "%s bf16 arithmetic %dx%d: = W round(X) (rel err %.1e)", kernels_in_use(),
                      rows, cols, max_err / max_ref);
                free(Yb);
            }
            matrix_free(&f32);
            free(exact), free(X), free(Y), free(other);
            matrix_free(&W);
        }
}

/* Every batch size from 1 to 14 tokens (the server's decode steps are
 * small batches): each token's output the same bits as alone and as plain C. */
static void test_batch_sizes(ThreadPool *pools[3]) {
    int rows = 21, cols = 96;
    double *exact = xmalloc((size_t)rows * cols * sizeof(double));
    float *X = xmalloc((size_t)14 * cols * sizeof(float));
    for (int i = 0; i < 14 * cols; i++) X[i] = uniform();
    Matrix W[6];
    W[0] = random_matrix(WEIGHT_F32, rows, cols, exact, pools[1]);
    W[1] = random_matrix(WEIGHT_F16, rows, cols, exact, pools[1]);
    W[2] = random_matrix(WEIGHT_BF16, rows, cols, exact, pools[1]);
    W[3] = random_matrix(WEIGHT_BF16, rows, cols, exact, pools[1]);
    W[3].math = MATH_BF16;
    W[4] = matrix_to_q8(&W[2], pools[1]);
    W[5] = matrix_to_q4(&W[2], pools[1]);
    const char *names[6] = {"f32", "f16", "bf16", "bf16 arithmetic", "q8", "q4"};
    for (int i = 0; i < 6; i++)
        for (int n = 1; n <= 14; n++) {
            char what[64];
            snprintf(what, sizeof what, "%s, %d tokens,", names[i], n);
            free(check_invariants(what, &W[i], X, n, pools));
        }
    for (int i = 0; i < 6; i++) matrix_free(&W[i]);
    free(exact), free(X);
}

/* The quantized formats: each weight within its format's step of the
 * original, and the product = the integer arithmetic kernels.h defines,
 * computed here in double from the test's own rounding of x. */
static void test_quantized(ThreadPool *pools[3]) {
    int qshapes[][2] = {{30, 96}, {16, 64}, {45, 896}, {3, 32}};
    for (int format = 0; format < 2; format++)
        for (int si = 0; si < 4; si++) {
            WeightType type = format == 0 ? WEIGHT_Q8 : WEIGHT_Q4;
            const char *name = weight_type_name(type);
            int rows = qshapes[si][0], cols = qshapes[si][1], n = 5, blocks = cols / QUANT_BLOCK;
            double *exact = xmalloc((size_t)rows * cols * sizeof(double));
            Matrix W = random_matrix(WEIGHT_BF16, rows, cols, exact, pools[1]);
            Matrix Q = type == WEIGHT_Q8 ? matrix_to_q8(&W, pools[1]) : matrix_to_q4(&W, pools[1]);
            /* q8: within half a step of max|w| / 127 (plus the f16 rounding
             * of the step); q4: no worse per block than the plain rule
             * scale = M / -8 (M the value of largest magnitude). */
            bool close = true;
            double *dq = xmalloc((size_t)rows * cols * sizeof(double));
            float *row = xmalloc((size_t)cols * sizeof(float));
            for (int r = 0; r < rows; r++) {
                matrix_row(row, &Q, r);
                for (int b = 0; b < blocks; b++) {
                    const double *w = exact + (size_t)r * cols + b * QUANT_BLOCK;
                    double amax = 0, M = 0, err = 0, plain_err = 0;
                    for (int j = 0; j < QUANT_BLOCK; j++) {
                        amax = fmax(amax, fabs(w[j]));
                        if (fabs(w[j]) > fabs(M)) M = w[j];
                    }
                    for (int j = 0; j < QUANT_BLOCK; j++) {
                        double got = row[b * QUANT_BLOCK + j];
                        dq[(size_t)r * cols + b * QUANT_BLOCK + j] = got;
                        err += (got - w[j]) * (got - w[j]);
                        if (type == WEIGHT_Q8) close &= fabs(got - w[j]) <= amax / 127 / 2 * 1.001 + 1e-12;
                        double d = M / -8, q = fmin(fmax(round(w[j] / d), -8), 7);
                        plain_err += (w[j] - q * d) * (w[j] - q * d);
                    }
                    if (type == WEIGHT_Q4) close &= err <= plain_err * 1.01 + 1e-12;
                }
            }
            CHECK(close, "%s %dx%d: every weight close to its value", name, rows, cols);
            float *X = xmalloc((size_t)n * cols * sizeof(float));
            for (int i = 0; i < n * cols; i++) X[i] = uniform() * (i % 7 == 0 ? 4 : 1);
            for (int p = 0; p < KERNEL_PATHS; p++) {
                if (!kernel_path_supported(p)) continue;
                kernels_use(kernel_path_name(p), NULL);
                float *Y = check_invariants(name, &Q, X, n, pools);
                /* The test's own rounding of x: per block, scale = max|x| / 127. */
                double max_err = 0, max_ref = 0;
                for (int t = 0; t < n; t++)
                    for (int r = 0; r < rows; r++) {
                        double ref = 0;
                        for (int b = 0; b < blocks; b++) {
                            const float *x = X + (size_t)t * cols + b * QUANT_BLOCK;
                            double amax = 0;
                            for (int j = 0; j < QUANT_BLOCK; j++) amax = fmax(amax, fabs(x[j]));
                            for (int j = 0; j < QUANT_BLOCK; j++)
                                ref += dq[(size_t)r * cols + b * QUANT_BLOCK + j] * round(x[j] / amax * 127) * (amax / 127);
                        }
                        max_err = fmax(max_err, fabs(Y[(size_t)t * rows + r] - ref));
                        max_ref = fmax(max_ref, fabs(ref));
                    }
                CHECK(max_err / max_ref < 1e-5, "%s %s %dx%d: = the integer arithmetic (rel err %.1e)", kernels_in_use(), name,
                      rows, cols, max_err / max_ref);
                double err = matmul_error(Y, exact, X, rows, cols, n), tolerance = type == WEIGHT_Q8 ? 2e-2 : 1.5e-1;
                CHECK(err < tolerance, "%s %s %dx%d: close to W X (rel err %.1e)", kernels_in_use(), name, rows, cols, err);
                free(Y);
            }
            free(row), free(X), free(exact), free(dq);
            matrix_free(&Q);
            matrix_free(&W);
        }
}

static void test_conversions(void) {
    /* Every half-precision value against ldexp arithmetic, and back. */
    bool all = true, back = true, ties = true;
    for (uint32_t h = 0; h < 65536; h++) {
        int exp = (h >> 10) & 31, mant = h & 1023;
        double v = exp == 0 ? ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, exp - 25);
        if (h & 0x8000) v = -v;
        float got = f16_to_f32((uint16_t)h);
        all &= isnan(v) ? isnan(got) : got == v;
        if (!isnan(v)) back &= f32_to_f16((float)v) == h;
        /* Halfway to the next value up rounds to the even one of the two. */
        if (exp < 31 && !(h & 0x8000) && h != 0x7BFF) {
            double up = exp == 0 ? ldexp(mant + 1, -24) : ldexp(1024 + mant + 1, exp - 25);
            uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            ties &= f32_to_f16((float)((v + up) / 2)) == want;
        }
    }
    CHECK(all, "f16 -> f32 exact for all 65536 values");
    CHECK(back, "f32 -> f16 gives back every finite f16 value");
    CHECK(ties, "f32 -> f16 rounds halfway cases to even");
    CHECK(f32_to_f16(65520.0f) == 0x7C00 && f32_to_f16(65519.0f) == 0x7BFF && f32_to_f16(1e-9f) == 0,
          "f32 -> f16 overflows to infinity from 65520, underflows to 0");
    CHECK(bf16_to_f32(0x3F80) == 1.0f && bf16_to_f32(0xC040) == -3.0f && bf16_to_f32(0x0001) == ldexp(1, -133),
          "bf16 -> f32 (1, -3, smallest subnormal)");
    CHECK(f32_to_bf16(1.0f + ldexp(1, -8)) == 0x3F80 && f32_to_bf16(1.0f + 3 * ldexp(1, -8)) == 0x3F82 &&
              f32_to_bf16(1.0f + ldexp(1, -8) + ldexp(1, -20)) == 0x3F81,
          "f32 -> bf16 rounds to nearest, ties to even");
}

/* How a case of attention looks back: its scale, soft cap, window and ring. */
typedef struct {
    int hd, group, n_q, pos;   /* head dim, heads per key/value head, query tokens, first position */
    int window, rows;          /* AttendSpec's (rows 0: one per position) */
    float softcap, scale;      /* scale 0: 1 / sqrt(hd) */
} AttentionCase;

/* softmax(cap(q k * scale)) v in double for the query vector at position p
 * over the positions its window holds, keys[t] and values[t] by position. */
static double attention_error(const float *out, const float *q, const float *keys, const float *values, int p, int hd,
                              const AttendSpec *spec) {
    int first = spec->window && p >= spec->window ? p - spec->window + 1 : 0;
    double *w = xmalloc((size_t)(p + 1) * sizeof(double)), max = -INFINITY, sum = 0, err = 0;
    for (int t = first; t <= p; t++) {
        w[t] = 0;
        for (int i = 0; i < hd; i++) w[t] += (double)q[i] * keys[(size_t)t * hd + i];
        w[t] *= spec->scale;
        if (spec->softcap > 0) w[t] = spec->softcap * tanh(w[t] / spec->softcap);
        max = fmax(max, w[t]);
    }
    for (int t = first; t <= p; t++) sum += w[t] = exp(w[t] - max);
    for (int i = 0; i < hd; i++) {
        double ref = 0;
        for (int t = first; t <= p; t++) ref += w[t] / sum * values[(size_t)t * hd + i];
        err = fmax(err, fabs(out[i] - ref));
    }
    free(w);
    return err;
}

/* keys[t] of every position, as a ring of `rows` rows holds the last ones. */
static float *as_ring(const float *keys, int n, int rows, int hd) {
    float *ring = xcalloc((size_t)rows * hd, sizeof(float));
    for (int t = n > rows ? n - rows : 0; t < n; t++) memcpy(ring + (size_t)(t % rows) * hd, keys + (size_t)t * hd, (size_t)hd * sizeof(float));
    return ring;
}

/* Rows of `type` holding the f32 rows of a ring (n_rows of hd), and those
 * rows as the cache gives them back (rounded). */
static void *typed_rows(KVType type, const float *rows, int n_rows, int hd, float *rounded) {
    size_t row_bytes = kv_row_bytes(type, hd);
    char *typed = xcalloc((size_t)n_rows, row_bytes);
    for (int r = 0; r < n_rows; r++) kv_row_store(typed + r * row_bytes, type, rows + (size_t)r * hd, hd);
    kv_rows_load(rounded, type, typed, (size_t)n_rows * hd);
    return typed;
}

/* One case with keys and values held as spec->key_type and value_type:
 * the plain path gives exactly what it gives over f32 rows holding the
 * rounded values, and every path the plain path's bits, for a block or a
 * token alone. */
static void check_typed_attention(const AttentionCase *k, AttendSpec spec, const float *q, size_t ld, const float *ring_keys,
                                  const float *ring_values) {
    int hd = k->hd, group = k->group, n_q = k->n_q, pos = k->pos;
    size_t ring = (size_t)spec.rows * hd;
    float *rounded_keys = xmalloc(ring * sizeof(float)), *rounded_values = xmalloc(ring * sizeof(float));
    void *keys = typed_rows(spec.key_type, ring_keys, spec.rows, hd, rounded_keys);
    void *values = typed_rows(spec.value_type, ring_values, spec.rows, hd, rounded_values);
    float *want = xcalloc(n_q * ld, sizeof(float)), *plain = xcalloc(n_q * ld, sizeof(float)), *out = xmalloc(n_q * ld * sizeof(float));
    float *alone = xmalloc((size_t)group * hd * sizeof(float)), *scratch = xmalloc(attend_scratch_floats(group, n_q, hd) * sizeof(float));
    AttendSpec as_f32 = spec;
    as_f32.key_type = as_f32.value_type = KV_F32;
    kernels_use("plain", NULL);
    attend(want, q, ld, n_q, pos, rounded_keys, rounded_values, group, hd, &as_f32, scratch);
    attend(plain, q, ld, n_q, pos, keys, values, group, hd, &spec, scratch);
    bool rounding_shows = false;
    for (size_t i = 0; i < ring && spec.key_type != KV_F32; i++) rounding_shows |= rounded_keys[i] != ring_keys[i];
    for (size_t i = 0; i < ring && spec.value_type != KV_F32; i++) rounding_shows |= rounded_values[i] != ring_values[i];
    bool exact = true;
    for (int i = 0; i < n_q; i++) exact &= same(plain + i * ld, want + i * ld, (size_t)group * hd);
    CHECK(exact && rounding_shows, "plain attention over keys %s, values %s (%d tokens x %d heads of %d at %d, window %d): = over "
          "f32 rows of the rounded values", kv_type_name(spec.key_type), kv_type_name(spec.value_type), n_q, group, hd, pos,
          spec.window);
    for (int p = 1; p < KERNEL_PATHS; p++) {
        if (!kernel_path_supported(p)) continue;
        kernels_use(kernel_path_name(p), NULL);
        memset(out, 0, n_q * ld * sizeof(float));
        attend(out, q, ld, n_q, pos, keys, values, group, hd, &spec, scratch);
        bool same_bits = true, as_alone = true;
        for (int i = 0; i < n_q; i++) {
            same_bits &= same(out + i * ld, plain + i * ld, (size_t)group * hd);
            attend(alone, q + i * ld, ld, 1, pos + i, keys, values, group, hd, &spec, scratch);
            as_alone &= same(alone, out + i * ld, (size_t)group * hd);
        }
        CHECK(same_bits && as_alone, "%s attention over keys %s, values %s (%d heads of %d, window %d, %d rows): = the plain C "
              "definition, and a token alone = in its block", kernels_in_use(), kv_type_name(spec.key_type),
              kv_type_name(spec.value_type), group, hd, spec.window, spec.rows);
    }
    free(rounded_keys), free(rounded_values), free(keys), free(values), free(want), free(plain), free(out), free(alone), free(scratch);
}

static void test_attention(void) {
    AttentionCase cases[] = {
        {64, 7, 5, 150, 0, 0, 0, 0}, {16, 1, 3, 0, 0, 0, 0, 0}, {20, 2, 40, 30, 0, 0, 0, 0}, {128, 3, 1, 300, 0, 0, 0, 0},
        {64, 2, 33, 64, 0, 0, 0, 0}, {28, 2, 3, 70, 0, 0, 0, 0},
        /* Windows that start inside a tile, at its edge, cover it; rings of keys; Gemma's scale and soft caps. */
        {64, 4, 32, 200, 7, 0, 0, 0}, {32, 2, 20, 100, 64, 128, 0, 0}, {256, 4, 9, 400, 70, 128, 0, 0},
        {64, 3, 1, 1000, 512, 576, 0, 0}, {20, 2, 12, 50, 1, 0, 0, 0}, {64, 2, 6, 10, 4, 0, 2.5f, 0},
        {256, 1, 4, 90, 0, 0, 50.0f, 0.0625f}, {48, 8, 17, 129, 65, 128, 1.0f, 0},
    };
    /* The KV cache formats of keys and values tried on each case. */
    KVType typed[][2] = {{KV_BF16, KV_BF16}, {KV_Q8_0, KV_Q8_0}, {KV_Q8_0, KV_F32}, {KV_F32, KV_BF16}, {KV_BF16, KV_Q8_0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        AttentionCase k = cases[c];
        int hd = k.hd, group = k.group, n_q = k.n_q, pos = k.pos, n = pos + n_q;
        AttendSpec spec = {.scale = k.scale ? k.scale : 1.0f / sqrtf((float)hd), .softcap = k.softcap, .window = k.window,
                           .rows = k.rows ? k.rows : n};
        size_t ld = (size_t)group * hd + 3;  /* rows of q wider than one head group */
        float *q = xmalloc(n_q * ld * sizeof(float)), *keys = xmalloc((size_t)n * hd * sizeof(float));
        float *values = xmalloc((size_t)n * hd * sizeof(float)), *out = xmalloc(n_q * ld * sizeof(float));
        float *plain = xmalloc(n_q * ld * sizeof(float)), *alone = xmalloc((size_t)group * hd * sizeof(float));
        float *scratch = xmalloc(attend_scratch_floats(group, n_q, hd) * sizeof(float));
        for (size_t i = 0; i < n_q * ld; i++) q[i] = 3 * uniform();
        for (int i = 0; i < n * hd; i++) keys[i] = uniform(), values[i] = uniform();
        float *ring_keys = as_ring(keys, n, spec.rows, hd), *ring_values = as_ring(values, n, spec.rows, hd);
        kernels_use("plain", NULL);
        memset(plain, 0, n_q * ld * sizeof(float));
        attend(plain, q, ld, n_q, pos, ring_keys, ring_values, group, hd, &spec, scratch);
        for (int p = 0; p < KERNEL_PATHS; p++) {
            if (!kernel_path_supported(p)) continue;
            kernels_use(kernel_path_name(p), NULL);
            memset(out, 0, n_q * ld * sizeof(float));
            attend(out, q, ld, n_q, pos, ring_keys, ring_values, group, hd, &spec, scratch);
            double err = 0;
            bool same_bits = true, as_alone = true;
            for (int i = 0; i < n_q; i++) {
                for (int g = 0; g < group; g++)
                    err = fmax(err, attention_error(out + i * ld + g * hd, q + i * ld + g * hd, keys, values, pos + i, hd, &spec));
                same_bits &= same(out + i * ld, plain + i * ld, (size_t)group * hd);
                /* A query token alone, at its position, gives the same bits. */
                attend(alone, q + i * ld, ld, 1, pos + i, ring_keys, ring_values, group, hd, &spec, scratch);
                as_alone &= same(alone, out + i * ld, (size_t)group * hd);
            }
            CHECK(err < 1e-6, "%s attention, %d tokens x %d heads of %d at %d, window %d, %d rows, cap %g: softmax(cap(q k * "
                  "scale)) v (err %.1e)", kernels_in_use(), n_q, group, hd, pos, spec.window, spec.rows, spec.softcap, err);
            CHECK(same_bits, "%s attention, %d heads of %d, window %d: = the plain C definition", kernels_in_use(), group, hd,
                  spec.window);
            CHECK(as_alone, "%s attention, %d heads of %d, window %d: a token alone = in its block", kernels_in_use(), group, hd,
                  spec.window);
        }
        for (size_t t = 0; t < sizeof typed / sizeof typed[0]; t++) {
            AttendSpec typed_spec = spec;
            typed_spec.key_type = typed[t][0], typed_spec.value_type = typed[t][1];
            if (kv_type_fits(typed_spec.key_type, hd) && kv_type_fits(typed_spec.value_type, hd))
                check_typed_attention(&k, typed_spec, q, ld, ring_keys, ring_values);
        }
        free(q), free(keys), free(values), free(out), free(plain), free(alone), free(scratch), free(ring_keys), free(ring_values);
    }
}

/* ---- the KV cache's formats ---- */

/* The value a bf16 rounding to nearest even gives, found by looking at
 * the two bf16 values around x in double precision. */
static float nearest_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t down_bits = u & 0xFFFF0000u, up_bits = down_bits + 0x10000u;
    float down, up;
    memcpy(&down, &down_bits, 4);
    memcpy(&up, &up_bits, 4);
    double to_down = fabs((double)x - down), to_up = fabs((double)up - x);
    if (to_down != to_up) return to_down < to_up ? down : up;
    return (down_bits >> 16) % 2 == 0 ? down : up;
}

static void test_kv_formats(void) {
    CHECK(kv_row_bytes(KV_F32, 128) == 512 && kv_row_bytes(KV_BF16, 128) == 256 && kv_row_bytes(KV_Q8_0, 128) == 136 &&
              kv_row_bytes(KV_Q8_0, 32) == 34 && kv_row_bytes(KV_BF16, 20) == 40,
          "KV row bytes: f32 4 a value, bf16 2, q8_0 34 per 32");
    CHECK(kv_type_fits(KV_Q8_0, 64) && !kv_type_fits(KV_Q8_0, 16) && !kv_type_fits(KV_Q8_0, 48) && kv_type_fits(KV_BF16, 20),
          "q8_0 needs whole blocks of 32, the others fit any head_dim");
    const char *names[] = {"f32", "bf16", "q8_0"};
    for (int i = 0; i < KV_TYPES; i++) {
        KVType t = KV_Q8_0;
        Error e;
        CHECK(kv_type_parse(&t, names[i], &e) == 0 && (int)t == i && strcmp(kv_type_name(t), names[i]) == 0,
              "KV type '%s' parsed and named", names[i]);
    }
    const char *refused[] = {"f16", "q4_0", "Q8_0", "q8", "", "bf16 "};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        KVType t;
        Error e = {{0}};
        CHECK(kv_type_parse(&t, refused[i], &e) != 0 && strstr(e.msg, "f32 (exact), bf16 and q8_0"),
              "KV type '%s' refused, the types listed: %s", refused[i], e.msg);
    }

    /* bf16: each value to the nearest bf16, ties to even. */
    enum { HD = 96 };
    float x[HD], back[HD];
    uint16_t bf[HD];
    for (int i = 0; i < HD; i++) x[i] = uniform() * ldexpf(1, i % 20 - 10);
    x[0] = 1.0f + ldexpf(1, -8), x[1] = 1.0f + 3 * ldexpf(1, -8), x[2] = -0.0f;  /* ties: to 1 and to 1 + 2^-6 */
    kv_row_store(bf, KV_BF16, x, HD);
    kv_rows_load(back, KV_BF16, bf, HD);
    bool nearest = true;
    for (int i = 0; i < HD; i++) nearest &= back[i] == nearest_bf16(x[i]) && bf[i] == truncate_bf16(back[i]);
    CHECK(nearest && back[0] == 1.0f && back[1] == 1.0f + ldexpf(1, -6), "bf16 KV rows: each value rounded to the nearest bf16, "
          "ties to even");

    /* q8_0 by hand: amax 127/32 makes d = 1/32 exactly (f16 0x2800);
     * x = (j - 16) / 32 + offsets that round up, down and to even. */
    float block[32], got[32];
    uint8_t bytes[34];
    int8_t want[32];
    for (int j = 0; j < 32; j++) block[j] = (float)(j - 16) / 32, want[j] = (int8_t)(j - 16);
    block[31] = 127.0f / 32, want[31] = 127;            /* the largest |x| */
    block[1] = (-15 + 0.5f) / 32, want[1] = -14;         /* -14.5: a tie, to even */
    block[2] = (-14 + 0.5f) / 32, want[2] = -14;         /* -13.5: a tie, to even */
    block[3] = (-13 + 0.49f) / 32, want[3] = -13;        /* down */
    block[4] = (-12 + 0.51f) / 32, want[4] = -11;        /* up */
    kv_row_store(bytes, KV_Q8_0, block, 32);
    kv_rows_load(got, KV_Q8_0, bytes, 32);
    bool as_hand = bytes[0] == 0x00 && bytes[1] == 0x28;  /* f16 1/32, little-endian */
    for (int j = 0; j < 32; j++) as_hand &= (int8_t)bytes[2 + j] == want[j] && got[j] == want[j] / 32.0f;
    CHECK(as_hand, "q8_0 KV block: scale f16 1/32 first, then q = round(x / d) to even; read back as q * d");

    /* amax 1: d = f16(1/127) = 0x2008 (1/127 = 2^-7 x 1.00787..., its 10-bit
     * mantissa rounds to 8/1024), a little under 1/127: 1 / d = 127.008. */
    for (int j = 0; j < 32; j++) block[j] = j % 2 ? 1.0f : -1.0f / (j + 1);
    kv_row_store(bytes, KV_Q8_0, block, 32);
    kv_rows_load(got, KV_Q8_0, bytes, 32);
    float d = ldexpf(1 + 8.0f / 1024, -7);
    bool rounded = bytes[0] == 0x08 && bytes[1] == 0x20;
    for (int j = 0; j < 32; j++)
        rounded &= j % 2 ? (int8_t)bytes[2 + j] == 127 && got[j] == 127 * d
                         : (int8_t)bytes[2 + j] == (int8_t)nearbyint(block[j] / (double)d);
    CHECK(rounded, "q8_0 KV block of amax 1: d = f16(1/127) = 0x2008; 1 / d = 127.008 gives 127, read back as 127 d");

    /* A block too large for an f16 scale keeps the largest; a zero block is 0. */
    for (int j = 0; j < 32; j++) block[j] = j == 5 ? -1e9f : 1e6f;
    kv_row_store(bytes, KV_Q8_0, block, 32);
    kv_rows_load(got, KV_Q8_0, bytes, 32);
    CHECK(bytes[0] == 0xFF && bytes[1] == 0x7B && got[5] == -127 * 65504.0f && got[0] == 15 * 65504.0f,
          "q8_0 KV block beyond f16: scale 65504, values clamped (%g, %g)", got[5], got[0]);
    memset(block, 0, sizeof block);
    block[7] = -0.0f;
    kv_row_store(bytes, KV_Q8_0, block, 32);
    kv_rows_load(got, KV_Q8_0, bytes, 32);
    bool zeros = true;
    for (int j = 0; j < 34; j++) zeros &= bytes[j] == 0;
    CHECK(zeros && got[7] == 0, "q8_0 KV block of zeros: scale 0, every q 0");

    /* Random rows: every value within d/2 of x, d within f16 rounding of max|x| / 127. */
    enum { ROWS = 50, D = 128 };
    float *rows = xmalloc(ROWS * D * sizeof(float)), *read = xmalloc(ROWS * D * sizeof(float));
    uint8_t *q8 = xmalloc(ROWS * kv_row_bytes(KV_Q8_0, D));
    for (int i = 0; i < ROWS * D; i++) rows[i] = uniform() * ldexpf(1, i / D % 12 - 6);
    for (int r = 0; r < ROWS; r++) kv_row_store(q8 + r * kv_row_bytes(KV_Q8_0, D), KV_Q8_0, rows + r * D, D);
    kv_rows_load(read, KV_Q8_0, q8, ROWS * D);
    bool within = true;
    for (int b = 0; b < ROWS * D / 32; b++) {
        double amax = 0;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(rows[b * 32 + j]));
        uint16_t half;
        memcpy(&half, q8 + b * 34, 2);
        double scale = f16_to_f32(half);
        within &= fabs(scale - amax / 127) <= ldexp(amax / 127, -11);
        for (int j = 0; j < 32; j++) within &= fabs(read[b * 32 + j] - (double)rows[b * 32 + j]) <= scale / 2 * (1 + ldexp(1, -10));
    }
    CHECK(within, "q8_0 KV rows: d = max|x| / 127 to f16 precision, every value within d/2");
    free(rows), free(read), free(q8);
}

/* GELU's tanh form in double precision, as transformers' gelu_pytorch_tanh
 * defines it. */
static double gelu_tanh(double g) { return 0.5 * g * (1 + tanh(sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))); }

/* swiglu and gelu_tanh_gate on N values: within float rounding of the
 * definitions in double precision, and every path and thread count the
 * plain C bits (N past pool_parts_for_values' few, the threads share the
 * work). */
static void test_gated(ThreadPool *pools[3], bool gelu, int N) {
    size_t bytes = (size_t)N * sizeof(float);
    float *gate = xmalloc(bytes), *up = xmalloc(bytes), *want = xmalloc(bytes), *got = xmalloc(bytes), *plain = xmalloc(bytes);
    for (int i = 0; i < N; i++) {
        gate[i] = (gelu ? 12 : 20) * uniform(), up[i] = uniform();
        want[i] = (float)((gelu ? gelu_tanh(gate[i]) : gate[i] / (1 + exp(-(double)gate[i]))) * up[i]);
    }
    gate[0] = -100, want[0] = 0;  /* e^100 overflows nothing */
    gate[1] = 1e20f, want[1] = 1e20f * up[1];  /* g^3 overflows (GELU) */
    void (*gated)(float *, const float *, size_t, ThreadPool *) = gelu ? gelu_tanh_gate : swiglu;
    const char *name = gelu ? "gelu_tanh_gate = gelu(g) * u" : "swiglu = g / (1 + e^-g) * u";
    kernels_use("plain", NULL);
    memcpy(plain, gate, bytes);
    gated(plain, up, N, pools[0]);
    for (int p = 0; p < KERNEL_PATHS; p++) {
        if (!kernel_path_supported(p)) continue;
        kernels_use(kernel_path_name(p), NULL);
        bool close = true, same_bits = true;
        for (int t = 0; t < 3; t++) {
            memcpy(got, gate, bytes);
            gated(got, up, N, pools[t]);
            for (int i = 0; i < N; i++) close &= fabs(got[i] - want[i]) <= 1e-6 * (1 + fabs(want[i]));
            same_bits &= same(got, plain, N);
        }
        CHECK(close, "%s %s (%d values)", kernels_in_use(), name, N);
        CHECK(same_bits, "%s %s (%d values): the plain C definition, any thread count", kernels_in_use(), name, N);
    }
    free(gate), free(up), free(want), free(got), free(plain);
}

static void test_softmax(void) {
    enum { N = 203 };
    float x[N], plain[N], got[N];
    double want[N], max = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++) max = fmax(max, x[i] = 30 * uniform());
    for (int i = 0; i < N; i++) sum += want[i] = exp(x[i] - max);
    kernels_use("plain", NULL);
    memcpy(plain, x, sizeof x);
    softmax(plain, N);
    for (int p = 0; p < KERNEL_PATHS; p++) {
        if (!kernel_path_supported(p)) continue;
        kernels_use(kernel_path_name(p), NULL);
        memcpy(got, x, sizeof x);
        softmax(got, N);
        bool close = true;
        for (int i = 0; i < N; i++) close &= fabs(got[i] - want[i] / sum) <= 1e-6 * want[i] / sum + 1e-12;
        CHECK(close, "%s softmax = e^(x - max) / sum", kernels_in_use());
        CHECK(same(got, plain, N), "%s softmax = the plain C definition", kernels_in_use());
    }
}

/* matmul_batch: several products in one pass give each exactly what matmul
 * gives it alone - products of every format and of bf16 arithmetic mixed,
 * pairs that share their activations (the same x, tokens and width) and
 * pairs that do not, one token and many, on 1 to 3 threads. */
static void test_matmul_batch(ThreadPool *pools[3]) {
    enum { N = 8, COLS = 96 };
    static const int rows[N] = {40, 16, 33, 7, 64, 5, 48, 17}, tokens[N] = {5, 5, 1, 1, 12, 12, 3, 3};
    static const WeightType types[N] = {WEIGHT_Q8, WEIGHT_Q4, WEIGHT_BF16, WEIGHT_BF16, WEIGHT_F32, WEIGHT_F16, WEIGHT_BF16, WEIGHT_Q8};
    Matrix w[N];
    float *x[N], *want[N], *got[N];
    MatmulProduct products[N];
    for (int i = 0; i < N; i++) {
        double *exact = xmalloc((size_t)rows[i] * COLS * sizeof(double));
        Matrix file = random_rows(types[i] == WEIGHT_F16 ? WEIGHT_F16 : types[i] == WEIGHT_F32 ? WEIGHT_F32 : WEIGHT_BF16, rows[i], COLS, exact);
        w[i] = types[i] == WEIGHT_Q8 ? matrix_to_q8(&file, pools[1]) : types[i] == WEIGHT_Q4 ? matrix_to_q4(&file, pools[1])
                                                                    : matrix_grouped(&file, pools[1]);
        if (i == 6) w[i].math = MATH_BF16;  /* bf16 arithmetic beside the exact bf16 product 3 */
        matrix_free(&file);
        free(exact);
        /* Products 0-1, 2-3 (one token), 4-5 share their x; 6-7 do not (another format). */
        x[i] = i % 2 && i != 7 ? x[i - 1] : xmalloc((size_t)tokens[i] * COLS * sizeof(float));
        if (x[i] != (i ? x[i - 1] : NULL))
            for (int k = 0; k < tokens[i] * COLS; k++) x[i][k] = uniform();
        want[i] = xmalloc((size_t)tokens[i] * rows[i] * sizeof(float));
        got[i] = xmalloc((size_t)tokens[i] * rows[i] * sizeof(float));
        matmul(want[i], x[i], &w[i], tokens[i], pools[1]);
        products[i] = (MatmulProduct){.out = got[i], .x = x[i], .w = &w[i], .n_tokens = tokens[i]};
    }
    for (int p = 0; p < 3; p++) {
        for (int i = 0; i < N; i++) memset(got[i], 0xFF, (size_t)tokens[i] * rows[i] * sizeof(float));
        matmul_batch(products, N, pools[p]);
        bool all = true;
        for (int i = 0; i < N; i++) all &= same(got[i], want[i], (size_t)tokens[i] * rows[i]);
        CHECK(all, "%s: matmul_batch of %d products of mixed formats on %d threads = each matmul alone", kernels_in_use(), N,
              pool_size(pools[p]));
    }
    for (int i = 0; i < N; i++) {
        if (!(i % 2 && i != 7)) free(x[i]);
        free(want[i]), free(got[i]);
        matrix_free(&w[i]);
    }
}

/* Whether a /proc/cpuinfo flags line lists flag. */
static bool has_flag(const char *line, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = strstr(line, flag); p; p = strstr(p + 1, flag))
        if (p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return true;
    return false;
}

/* The best path for this CPU as the kernel's flags describe it (Linux's
 * /proc/cpuinfo, which also drops what the OS does not save), not as the
 * CPUID code under test reads it; NULL when there is no such file. */
static const char *best_path_from_cpuinfo(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NULL;
    static char line[1 << 15];
    const char *best = NULL;
    while (!best && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        const char *avx512[] = {"avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16"};
        bool has_avx2 = has_flag(line, "avx2") && has_flag(line, "fma") && has_flag(line, "f16c"), has_avx512 = has_avx2;
        for (int i = 0; i < 5; i++) has_avx512 = has_avx512 && has_flag(line, avx512[i]);
        best = has_avx512 ? "avx512" : has_avx2 ? "avx2" : "plain";
    }
    fclose(f);
    return best;
}

static void test_paths(void) {
    Error e;
    CHECK(kernel_path_supported(0), "the plain path runs everywhere");
    CHECK(kernels_use("sse9", &e) != 0 && strstr(e.msg, "sse9"), "an unknown path is refused: %s", e.msg);
    const char *best = best_path_from_cpuinfo();
    CHECK(kernels_use(NULL, &e) == 0 && best && strcmp(kernels_in_use(), best) == 0,
          "the best path is chosen: %s, the CPU's flags say %s", kernels_in_use(), best ? best : "(no /proc/cpuinfo)");
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--paths") == 0) {
        for (int p = 0; p < KERNEL_PATHS; p++)
            if (kernel_path_supported(p)) printf("%s\n", kernel_path_name(p));
        return 0;
    }
    ThreadPool *pools[3] = {pool_new(1), pool_new(2), pool_new(3)};
    test_paths();
    for (int p = 0; p < KERNEL_PATHS; p++) {
        if (!kernel_path_supported(p)) continue;
        kernels_use(kernel_path_name(p), NULL);
        printf("path %s\n", kernel_path_name(p));
        test_matmul(pools);
        test_batch_sizes(pools);
        test_matmul_batch(pools);
    }
    test_quantized(pools);
    test_conversions();
    test_attention();
    test_kv_formats();
    for (int i = 0; i < 2; i++) {
        test_gated(pools, false, i ? 20011 : 301);
        test_gated(pools, true, i ? 20011 : 301);
    }
    test_softmax();
    for (int i = 0; i < 3; i++) pool_free(pools[i]);
    return test_summary("test_kernels");
}
