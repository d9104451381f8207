/* threads.c - the worker pool: workers wait for a new task by watching a
 * generation counter, spinning briefly (tasks come in quick bursts during a
 * forward pass) and then sleeping on a condition variable (when idle). */
#include "threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

/* How long an idle worker spins before it sleeps, in pause instructions. */
#define SPIN_LIMIT 20000

struct ThreadPool {
    int n_threads;           /* including the caller's thread */
    pthread_t *workers;      /* [n_threads - 1] */
    PoolTask task;           /* the current task and its argument */
    void *arg;
    atomic_uint generation;  /* incremented to start each task */
    atomic_int running;      /* workers that have not finished the current task */
    bool stop;               /* set (under lock) to end the workers */
    pthread_mutex_t lock;
    pthread_cond_t wake;
};

typedef struct {
    ThreadPool *pool;
    int index;
} WorkerArg;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until the generation differs from `seen` and returns it. */
static unsigned wait_for_task(ThreadPool *p, unsigned seen) {
    for (int spins = 0; spins < SPIN_LIMIT; spins++) {
        unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen) pthread_cond_wait(&p->wake, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return atomic_load_explicit(&p->generation, memory_order_acquire);
}

static void *worker_main(void *varg) {
    WorkerArg *wa = varg;
    ThreadPool *p = wa->pool;
    int index = wa->index;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_task(p, seen);
        if (p->stop) return NULL;
        p->task(p->arg, index, p->n_threads);
        atomic_fetch_sub_explicit(&p->running, 1, memory_order_release);
    }
}

ThreadPool *pool_new(int n_threads) {
    ThreadPool *p = xcalloc(1, sizeof *p);
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->workers = xcalloc((size_t)p->n_threads, sizeof(pthread_t));
    for (int i = 1; i < p->n_threads; i++) {
        WorkerArg *wa = xmalloc(sizeof *wa);
        *wa = (WorkerArg){p, i};
        if (pthread_create(&p->workers[i - 1], NULL, worker_main, wa) != 0) die("cannot create worker thread %d", i);
    }
    return p;
}

/* Publishes a new generation; the lock pairs with the sleepers' wait. */
static void start_generation(ThreadPool *p) {
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

void pool_run(ThreadPool *p, PoolTask task, void *arg) {
    if (p->n_threads == 1) {
        task(arg, 0, 1);
        return;
    }
    p->task = task;
    p->arg = arg;
    atomic_store_explicit(&p->running, p->n_threads - 1, memory_order_relaxed);
    start_generation(p);
    task(arg, 0, p->n_threads);
    while (atomic_load_explicit(&p->running, memory_order_acquire) > 0) cpu_relax();
}

int pool_size(const ThreadPool *p) { return p->n_threads; }

void pool_free(ThreadPool *p) {
    if (!p) return;
    p->stop = true;
    start_generation(p);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p->workers);
    free(p);
}

int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
