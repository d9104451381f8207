/* membw.c - how fast this machine reads memory: the bound on decoding speed.
 *
 * usage: membw [THREADS]  (default 2)
 * Each thread sums its share of a 1 GiB buffer, sequentially, several times;
 * the best pass gives GB/s. Built and run by scripts/bench.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)1 << 30)

typedef struct {
    const uint64_t *data;
    size_t n;
    uint64_t sum;
} Share;

static void *sum_share(void *arg) {
    Share *s = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0;  /* four sums keep several loads in flight */
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a += s->data[i];
        b += s->data[i + 1];
        c += s->data[i + 2];
        d += s->data[i + 3];
    }
    s->sum = a + b + c + d;
    return NULL;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 64) threads = 2;
    uint64_t *buf = malloc(BYTES);
    if (!buf) return 1;
    memset(buf, 1, BYTES);
    double best = 1e9;
    for (int pass = 0; pass < 5; pass++) {
        pthread_t t[64];
        Share s[64];
        double t0 = seconds();
        for (int i = 0; i < threads; i++) {
            s[i] = (Share){buf + BYTES / 8 / threads * i, BYTES / 8 / threads, 0};
            pthread_create(&t[i], NULL, sum_share, &s[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        double dt = seconds() - t0;
        if (dt < best) best = dt;
    }
    printf("%.1f\n", BYTES / best / 1e9);
    free(buf);
    return 0;
}
