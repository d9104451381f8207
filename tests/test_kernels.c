/* test_kernels.c - the arithmetic kernels against plain double-precision
 * arithmetic written here, and their promises: every weight format, every
 * shape tail, the same bits for one token or a block and for any number of
 * threads. */
#include <math.h>
#include <stdint.h>
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

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);  /* truncation: any bf16 value will do */
}

/* A random rows x cols matrix stored as `type`, and its exact values in double. */
static Matrix random_matrix(WeightType type, int rows, int cols, double *exact) {
    size_t n = (size_t)rows * cols;
    Matrix m = {type, rows, cols, NULL, NULL, NULL};
    if (type == WEIGHT_BF16) {
        uint16_t *w = xmalloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            w[i] = to_bf16(uniform());
            uint32_t u = (uint32_t)w[i] << 16;
            float f;
            memcpy(&f, &u, 4);
            exact[i] = f;
        }
        m.data = m.owned = w;
    } else {
        float *w = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) exact[i] = w[i] = uniform();
        m.data = m.owned = w;
    }
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

static void test_matmul(ThreadPool *pools[3]) {
    WeightType types[] = {WEIGHT_F32, WEIGHT_BF16};
    int shapes[][2] = {{37, 64}, {12, 896}, {50, 100}, {7, 3}, {130, 40}};
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int rows = shapes[si][0], cols = shapes[si][1], n = 13;
            double *exact = xmalloc((size_t)rows * cols * sizeof(double));
            Matrix W = random_matrix(types[ti], rows, cols, exact);
            float *X = xmalloc((size_t)n * cols * sizeof(float));
            for (int i = 0; i < n * cols; i++) X[i] = uniform();
            float *block = xmalloc((size_t)n * rows * sizeof(float)), *single = xmalloc((size_t)n * rows * sizeof(float));
            float *scalar = xmalloc((size_t)n * rows * sizeof(float)), *other = xmalloc((size_t)n * rows * sizeof(float));
            const char *name = weight_type_name(types[ti]);

            matmul(block, X, &W, n, pools[1]);
            CHECK(matmul_error(block, exact, X, rows, cols, n) < 1e-5, "%s %dx%d: matmul = W X (rel err %.1e)", name, rows,
                  cols, matmul_error(block, exact, X, rows, cols, n));
            matmul_plain(scalar, X, &W, n);
            CHECK(matmul_error(scalar, exact, X, rows, cols, n) < 1e-5, "%s %dx%d: scalar matmul = W X", name, rows, cols);
            for (int t = 0; t < n; t++) matmul(single + (size_t)t * rows, X + (size_t)t * cols, &W, 1, pools[1]);
            CHECK(memcmp(block, single, (size_t)n * rows * sizeof(float)) == 0, "%s %dx%d: a block = one token at a time",
                  name, rows, cols);
            for (int p = 0; p < 3; p += 2) {
                matmul(other, X, &W, n, pools[p]);
                CHECK(memcmp(block, other, (size_t)n * rows * sizeof(float)) == 0, "%s %dx%d: %d threads = 2 threads", name,
                      rows, cols, pool_size(pools[p]));
            }
            Matrix f32 = matrix_to_f32(&W, pools[1]);
            matmul(other, X, &f32, n, pools[1]);
            CHECK(memcmp(block, other, (size_t)n * rows * sizeof(float)) == 0, "%s %dx%d: converted to f32, the same bits",
                  name, rows, cols);
            matrix_free(&f32);
            free(exact), free(X), free(block), free(single), free(scalar), free(other);
            matrix_free(&W);
        }
}

static void test_q8(ThreadPool *pool) {
    int rows = 30, cols = 96, n = 5;
    double *exact = xmalloc((size_t)rows * cols * sizeof(double));
    Matrix W = random_matrix(WEIGHT_F32, rows, cols, exact);
    Matrix Q = matrix_to_q8(&W, pool);
    /* Each weight is within half a step (scale / 2) of its block's grid, and
     * the scale is the block's largest magnitude / 127. */
    bool within = true, scales = true;
    float *row = xmalloc((size_t)cols * sizeof(float));
    for (int r = 0; r < rows; r++) {
        matrix_row(row, &Q, r);
        for (int b = 0; b < cols / Q8_BLOCK; b++) {
            double amax = 0, s = Q.scales[r * (cols / Q8_BLOCK) + b];
            for (int j = 0; j < Q8_BLOCK; j++) amax = fmax(amax, fabs(exact[r * cols + b * Q8_BLOCK + j]));
            scales &= fabs(s - amax / 127) <= 1e-6 * amax;
            for (int j = 0; j < Q8_BLOCK; j++) within &= fabs(row[b * Q8_BLOCK + j] - exact[r * cols + b * Q8_BLOCK + j]) <= s / 2 * 1.0001;
        }
    }
    CHECK(scales, "q8: scale = max |w| / 127 per block of 32");
    CHECK(within, "q8: every weight within half a step of its value");
    float *X = xmalloc((size_t)n * cols * sizeof(float)), *block = xmalloc((size_t)n * rows * sizeof(float));
    float *single = xmalloc((size_t)n * rows * sizeof(float));
    for (int i = 0; i < n * cols; i++) X[i] = uniform();
    matmul(block, X, &Q, n, pool);
    for (int t = 0; t < n; t++) matmul(single + (size_t)t * rows, X + (size_t)t * cols, &Q, 1, pool);
    CHECK(memcmp(block, single, (size_t)n * rows * sizeof(float)) == 0, "q8: a block = one token at a time");
    CHECK(matmul_error(block, exact, X, rows, cols, n) < 2e-2, "q8: matmul close to W X (rel err %.1e)",
          matmul_error(block, exact, X, rows, cols, n));
    free(row), free(X), free(block), free(single), free(exact);
    matrix_free(&Q);
    matrix_free(&W);
}

static void test_conversions(void) {
    /* Every half-precision value against ldexp arithmetic. */
    bool all = true;
    for (uint32_t h = 0; h < 65536; h++) {
        int exp = (h >> 10) & 31, mant = h & 1023;
        double v = exp == 0 ? ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, exp - 25);
        if (h & 0x8000) v = -v;
        float got = f16_to_f32((uint16_t)h);
        all &= isnan(v) ? isnan(got) : got == v;
    }
    CHECK(all, "f16 -> f32 exact for all 65536 values");
    CHECK(bf16_to_f32(0x3F80) == 1.0f && bf16_to_f32(0xC040) == -3.0f && bf16_to_f32(0x0001) == ldexp(1, -133),
          "bf16 -> f32 (1, -3, smallest subnormal)");
}

static void test_attention(void) {
    int hd_cases[] = {64, 16, 20, 128}, groups[] = {1, 7, 2, 3};
    for (int c = 0; c < 4; c++) {
        int hd = hd_cases[c], group = groups[c], n = c == 0 ? 150 : 37;  /* 150 keys: several blocks */
        float *q = xmalloc((size_t)group * hd * sizeof(float)), *keys = xmalloc((size_t)n * hd * sizeof(float));
        float *values = xmalloc((size_t)n * hd * sizeof(float)), *scores = xmalloc((size_t)group * n * sizeof(float));
        float *out = xmalloc((size_t)group * hd * sizeof(float)), *alone = xmalloc((size_t)hd * sizeof(float));
        for (int i = 0; i < group * hd; i++) q[i] = 3 * uniform();
        for (int i = 0; i < n * hd; i++) keys[i] = uniform(), values[i] = uniform();
        attend(out, q, 0, 1, n - 1, keys, values, group, hd, scores);
        double err = 0;
        bool same = true;
        for (int g = 0; g < group; g++) {
            double w[150], max = -INFINITY, sum = 0;
            for (int t = 0; t < n; t++) {
                w[t] = 0;
                for (int i = 0; i < hd; i++) w[t] += (double)q[g * hd + i] * keys[t * hd + i];
                w[t] /= sqrt(hd);
                max = fmax(max, w[t]);
            }
            for (int t = 0; t < n; t++) sum += w[t] = exp(w[t] - max);
            for (int i = 0; i < hd; i++) {
                double ref = 0;
                for (int t = 0; t < n; t++) ref += w[t] / sum * values[t * hd + i];
                err = fmax(err, fabs(out[g * hd + i] - ref));
            }
            /* A head computed alone gives the same bits as in its group. */
            attend(alone, q + g * hd, 0, 1, n - 1, keys, values, 1, hd, scores);
            same &= memcmp(alone, out + g * hd, (size_t)hd * sizeof(float)) == 0;
        }
        CHECK(err < 1e-6, "attention, %d heads of %d: softmax(q k / sqrt(d)) v (err %.1e)", group, hd, err);
        CHECK(same, "attention, %d heads of %d: each head as if alone", group, hd);
        free(q), free(keys), free(values), free(scores), free(out), free(alone);
    }
}

static void test_swiglu(ThreadPool *pool) {
    float gate[101], up[101], want[101];
    for (int i = 0; i < 101; i++) {
        gate[i] = 20 * uniform(), up[i] = uniform();
        want[i] = (float)(gate[i] / (1 + exp(-(double)gate[i])) * up[i]);
    }
    gate[0] = -100, want[0] = 0;  /* e^100 overflows nothing */
    swiglu(gate, up, 101, pool);
    bool close = true;
    for (int i = 0; i < 101; i++) close &= fabs(gate[i] - want[i]) <= 1e-6 * (1 + fabs(want[i]));
    CHECK(close, "swiglu = g / (1 + e^-g) * u");
}

int main(void) {
    ThreadPool *pools[3] = {pool_new(1), pool_new(2), pool_new(3)};
    test_matmul(pools);
    test_q8(pools[1]);
    test_conversions();
    test_attention();
    test_swiglu(pools[1]);
    for (int i = 0; i < 3; i++) pool_free(pools[i]);
    return test_summary("test_kernels");
}
