/* bench_kernels.c - the speed of one thread in each matrix kernel, in
 * GFLOP/s of its own CPU time (so that other processes sharing the machine
 * disturb it less than wall-clock figures), for Qwen2.5-0.5B's matrix shapes,
 * and of attention over a KV cache in each of its formats.
 *
 * usage: bench_kernels [PATH]   (PATH: plain, avx2, avx512; default: best)
 * Built and run by scripts/bench_kernels.sh. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels.h"

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned rng = 12345;
static float uniform(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

typedef struct {
    const char *name;
    WeightType type;
    MathMode math;
} Format;

int main(int argc, char **argv) {
    Error e;
    if (kernels_use(argc > 1 ? argv[1] : NULL, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    int shapes[][2] = {{896, 896}, {4864, 896}, {896, 4864}};
    Format formats[] = {{"f32", WEIGHT_F32, MATH_EXACT},  {"bf16", WEIGHT_BF16, MATH_EXACT}, {"bf16*", WEIGHT_BF16, MATH_BF16},
                        {"q8", WEIGHT_Q8, MATH_EXACT},    {"q4", WEIGHT_Q4, MATH_EXACT}};
    int token_counts[] = {1, 128};
    ThreadPool *pool = pool_new(1);
    printf("kernels %s, 1 thread, GFLOP/s of CPU time (bf16* = bf16 arithmetic)\n", kernels_in_use());
    printf("%-12s", "rows x cols");
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
        for (int t = 0; t < 2; t++) {
            char label[32];
            snprintf(label, sizeof label, "%s n=%d", formats[f].name, token_counts[t]);
            printf(" %11s", label);
        }
    printf("\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *w = aligned_alloc(64, (n * 4 + 63) / 64 * 64);  /* aligned as the forward pass aligns them */
        uint16_t *w16 = aligned_alloc(64, (n * 2 + 63) / 64 * 64);
        for (size_t i = 0; i < n; i++) w16[i] = f32_to_bf16(w[i] = uniform() * 0.05f);
        Matrix f32_rows = {WEIGHT_F32, rows, cols, w, NULL, NULL, MATH_EXACT, LAYOUT_ROWS};
        Matrix bf16_rows = {WEIGHT_BF16, rows, cols, w16, NULL, NULL, MATH_EXACT, LAYOUT_ROWS};
        Matrix f32 = matrix_grouped(&f32_rows, pool), bf16 = matrix_grouped(&bf16_rows, pool);
        float *x = aligned_alloc(64, (size_t)128 * cols * sizeof(float)), *y = malloc((size_t)128 * rows * sizeof(float));
        for (int i = 0; i < 128 * cols; i++) x[i] = uniform();
        printf("%5d x %-5d", rows, cols);
        for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
            Matrix m = formats[f].type == WEIGHT_F32 ? f32 : bf16;
            m.math = formats[f].math;
            if (formats[f].type == WEIGHT_Q8) m = matrix_to_q8(&bf16, pool);
            if (formats[f].type == WEIGHT_Q4) m = matrix_to_q4(&bf16, pool);
            for (int t = 0; t < 2; t++) {
                int tokens = token_counts[t], reps = 0;
                double start = cpu_seconds(), elapsed;
                do {
                    matmul(y, x, &m, tokens, pool);
                    reps++;
                    elapsed = cpu_seconds() - start;
                } while (elapsed < 0.3);
                printf(" %11.1f", 2.0 * n * tokens * reps / elapsed / 1e9);
                fflush(stdout);
            }
            if (formats[f].type == WEIGHT_Q8 || formats[f].type == WEIGHT_Q4) matrix_free(&m);
        }
        printf("\n");
        matrix_free(&f32), matrix_free(&bf16);
        free(w), free(w16), free(x), free(y);
    }
    /* Attention: a block of 32 query tokens x 7 heads of 64 at depth 4096
     * (Qwen2.5-0.5B's shape), 2 x 2 x hd flops per query and key, with the
     * KV cache in each of its formats. */
    int group = 7, hd = 64, n_q = ATTEND_QUERY_BLOCK, depth = 4096, n_keys = depth + n_q;
    size_t ld = (size_t)group * hd;
    float *q = malloc((size_t)n_q * ld * sizeof(float)), *out = malloc((size_t)n_q * ld * sizeof(float));
    float *keys = malloc((size_t)n_keys * hd * sizeof(float)), *values = malloc((size_t)n_keys * hd * sizeof(float));
    float *scratch = malloc(attend_scratch_floats(group, n_q, hd) * sizeof(float));
    for (size_t i = 0; i < (size_t)n_q * ld; i++) q[i] = uniform();
    for (size_t i = 0; i < (size_t)n_keys * hd; i++) keys[i] = uniform(), values[i] = uniform();
    for (int t = 0; t < KV_TYPES; t++) {
        KVType type = (KVType)t;
        size_t row_bytes = kv_row_bytes(type, hd);
        char *typed_keys = malloc((size_t)n_keys * row_bytes), *typed_values = malloc((size_t)n_keys * row_bytes);
        for (int r = 0; r < n_keys; r++) {
            kv_row_store(typed_keys + r * row_bytes, type, keys + (size_t)r * hd, hd);
            kv_row_store(typed_values + r * row_bytes, type, values + (size_t)r * hd, hd);
        }
        AttendSpec spec = {.scale = 1.0f / sqrtf((float)hd), .rows = n_keys, .key_type = type, .value_type = type};
        int n_tokens[] = {n_q, 1};
        for (int b = 0; b < 2; b++) {
            int reps = 0, n = n_tokens[b];
            double start = cpu_seconds(), elapsed;
            do {
                attend(out, q, ld, n, depth, typed_keys, typed_values, group, hd, &spec, scratch);
                reps++;
                elapsed = cpu_seconds() - start;
            } while (elapsed < 0.3);
            printf("attention, KV cache %-4s, %2d token%s x %d heads of %d at depth %d: %.1f GFLOP/s\n", kv_type_name(type), n,
                   n == 1 ? " " : "s", group, hd, depth, 4.0 * hd * group * ((double)n * depth + n * (n + 1) / 2.0) * reps / elapsed / 1e9);
        }
        free(typed_keys), free(typed_values);
    }
    free(q), free(out), free(keys), free(values), free(scratch);
    pool_free(pool);
    return 0;
}
