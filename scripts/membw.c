/* membw.c - the machine's limits that bound run's speed: how fast it reads
 * memory (the bound on decoding: every token reads every weight once) and
 * its peak fp32 multiply-add rate (the bound on prefill).
 *
 * usage: membw [THREADS]          memory read bandwidth in GB/s (default 2 threads)
 *        membw --flops [THREADS]  fp32 FMA peak in GFLOP/s over that many threads
 * Each thread sums its share of a 1 GiB buffer sequentially, several times,
 * and the best pass counts; or runs independent chains of fused
 * multiply-adds on the widest vectors the CPU has (AVX-512, else AVX2+FMA).
 * Built and run by scripts/bench.sh and scripts/bench_vs_llamacpp.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)1 << 30)
#define MAX_THREADS 64
#define FMA_ROUNDS 50000000L /* per thread: 12 chains each */

typedef struct {
    const uint64_t *data;
    size_t n;
    uint64_t sum;
    int wide; /* flops: use AVX-512 */
    double flops;
} Share;

static void *sum_share(void *arg) {
    Share *s = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0; /* four sums keep several loads in flight */
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a += s->data[i];
        b += s->data[i + 1];
        c += s->data[i + 2];
        d += s->data[i + 3];
    }
    s->sum = a + b + c + d;
    return NULL;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* 12 independent chains of multiply-adds: enough to cover the FMA latency
 * on both pipes. */
__attribute__((target("avx512f"))) static double fma_avx512(void) {
    __m512 acc[12], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long r = 0; r < FMA_ROUNDS; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
    float out[16], sum = 0;
    for (int i = 0; i < 12; i++) {
        _mm512_storeu_ps(out, acc[i]);
        sum += out[0];
    }
    return sum > -1 ? (double)FMA_ROUNDS * 12 * 16 * 2 : 0;
}

__attribute__((target("avx2,fma"))) static double fma_avx2(void) {
    __m256 acc[12], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long r = 0; r < FMA_ROUNDS; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
    float out[8], sum = 0;
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(out, acc[i]);
        sum += out[0];
    }
    return sum > -1 ? (double)FMA_ROUNDS * 12 * 8 * 2 : 0;
}
#endif

static void *fma_share(void *arg) {
    Share *s = arg;
#if defined(__x86_64__)
    s->flops = s->wide ? fma_avx512() : fma_avx2();
#endif
    return NULL;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The best of `passes` runs of `work` on `threads` threads, in seconds. */
static double best_time(int threads, int passes, void *(*work)(void *), Share *s) {
    double best = 1e9;
    for (int pass = 0; pass < passes; pass++) {
        pthread_t t[MAX_THREADS];
        double t0 = seconds();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, work, &s[i]);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        double dt = seconds() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    int flops = argc > 1 && strcmp(argv[1], "--flops") == 0;
    int threads = argc > 1 + flops ? atoi(argv[1 + flops]) : 2;
    if (threads < 1 || threads > MAX_THREADS) threads = 2;
    Share s[MAX_THREADS];
    if (flops) {
#if defined(__x86_64__)
        __builtin_cpu_init();
        int wide = __builtin_cpu_supports("avx512f");
        if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 1;
        for (int i = 0; i < threads; i++) s[i] = (Share){.wide = wide};
        double dt = best_time(threads, 3, fma_share, s);
        printf("%.1f\n", s[0].flops * threads / dt / 1e9);
        return 0;
#else
        return 1;
#endif
    }
    uint64_t *buf = malloc(BYTES);
    if (!buf) return 1;
    memset(buf, 1, BYTES);
    for (int i = 0; i < threads; i++) s[i] = (Share){buf + BYTES / 8 / threads * i, BYTES / 8 / threads, 0, 0, 0};
    double dt = best_time(threads, 5, sum_share, s);
    printf("%.1f\n", BYTES / dt / 1e9);
    free(buf);
    return 0;
}
