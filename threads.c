/* threads.c - the worker pool, and the CPUs the process may use.
 *
 * A run publishes its task, then its generation, part count and next part
 * in one atomic word, `work` = generation << 32 | parts << 16 | next part to
 * take. Every thread takes parts by compare-and-swap on that word, so a part
 * taken belongs to that generation's run and is one of its parts, and a
 * worker that wakes late (after the run ended) takes nothing from it. (With
 * the part count apart from the word, a worker could read the next run's
 * count beside the old word and take a part the old run does not have.) The caller returns when all parts are done, not
 * when every worker has shown up: a descheduled worker never holds a run
 * up unless it is in the middle of a part.
 *
 * Waiting threads (workers between runs, the caller at the end of one) spin
 * briefly, since runs come in quick bursts during a forward pass, then sleep
 * on a condition variable, so that a busy machine gets the CPU back. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* How long a waiting thread spins before it sleeps, in pause instructions
 * (a pause takes tens of cycles: this is some tens of microseconds). */
#define SPIN_LIMIT 2000

struct ThreadPool {
    int n_threads;             /* including the caller's thread */
    pthread_t *workers;        /* [n_threads - 1] */
    _Atomic(PoolTask) task;    /* the current run */
    _Atomic(void *) arg;
    atomic_uint_least64_t work;/* generation << 32 | parts << 16 | next part to take */
    atomic_int done;           /* parts of the current run finished */
    atomic_int sleepers;       /* workers asleep on `wake` */
    atomic_bool caller_asleep; /* the caller asleep on `finished` */
    atomic_bool stop;          /* set to end the workers */
    pthread_mutex_t lock;
    pthread_cond_t wake, finished;
    void *scratch;             /* pool_scratch's buffer, scratch_bytes long */
    size_t scratch_bytes;
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The fields of `work`. */
enum { MAX_PARTS = 0xFFFF };
static uint32_t generation_of(uint64_t work) { return (uint32_t)(work >> 32); }
static int parts_of(uint64_t work) { return (int)((work >> 16) & MAX_PARTS); }
static int next_part_of(uint64_t work) { return (int)(work & MAX_PARTS); }

/* Marks one part done; the thread that finishes the last wakes the caller
 * if it went to sleep. */
static void part_done(ThreadPool *p, int n_parts) {
    if (atomic_fetch_add(&p->done, 1) + 1 == n_parts && atomic_load(&p->caller_asleep)) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->finished);
        pthread_mutex_unlock(&p->lock);
    }
}

/* Takes and runs parts of generation g until none is left. The task read
 * before the first part taken is g's: a later run cannot have been
 * published while a part of g was still untaken. */
static void take_parts(ThreadPool *p, uint32_t g) {
    PoolTask task = atomic_load_explicit(&p->task, memory_order_relaxed);
    void *arg = atomic_load_explicit(&p->arg, memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&p->work, memory_order_acquire);
    while (generation_of(w) == g && next_part_of(w) < parts_of(w)) {
        if (atomic_compare_exchange_weak_explicit(&p->work, &w, w + 1, memory_order_acq_rel, memory_order_acquire)) {
            task(arg, next_part_of(w), parts_of(w));
            part_done(p, parts_of(w));
            w = atomic_load_explicit(&p->work, memory_order_acquire);
        }
    }
}

/* Waits until the generation differs from `seen` (or the pool stops) and
 * returns the new one. */
static uint32_t wait_for_run(ThreadPool *p, uint32_t seen) {
    for (int spins = 0; spins < SPIN_LIMIT; spins++) {
        uint32_t g = generation_of(atomic_load_explicit(&p->work, memory_order_acquire));
        if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed)) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    while (generation_of(atomic_load(&p->work)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return generation_of(atomic_load(&p->work));
}

static void *worker_main(void *arg) {
    ThreadPool *p = arg;
    uint32_t seen = 0;
    for (;;) {
        seen = wait_for_run(p, seen);
        if (atomic_load(&p->stop)) return NULL;
        take_parts(p, seen);
    }
}

ThreadPool *pool_new(int n_threads) {
    ThreadPool *p = xcalloc(1, sizeof *p);
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    p->workers = xcalloc((size_t)p->n_threads, sizeof(pthread_t));
    for (int i = 1; i < p->n_threads; i++)
        if (pthread_create(&p->workers[i - 1], NULL, worker_main, p) != 0) die("cannot create worker thread %d", i);
    return p;
}

/* Wakes the sleeping workers after `work` changed; the lock pairs with
 * their check-then-wait. */
static void wake_workers(ThreadPool *p) {
    if (atomic_load(&p->sleepers) == 0) return;
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

/* Waits until all n_parts parts of the run are done. */
static void wait_for_parts(ThreadPool *p, int n_parts) {
    for (int spins = 0; spins < SPIN_LIMIT; spins++) {
        if (atomic_load_explicit(&p->done, memory_order_acquire) == n_parts) return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->caller_asleep, true);
    while (atomic_load(&p->done) != n_parts) pthread_cond_wait(&p->finished, &p->lock);
    atomic_store(&p->caller_asleep, false);
    pthread_mutex_unlock(&p->lock);
}

void pool_run_parts(ThreadPool *p, int n_parts, PoolTask task, void *arg) {
    if (n_parts < 1) return;
    if (n_parts > MAX_PARTS) die("a pool run of %d parts: at most %d", n_parts, MAX_PARTS);
    if (p->n_threads == 1 || n_parts == 1) {
        for (int i = 0; i < n_parts; i++) task(arg, i, n_parts);
        return;
    }
    atomic_store_explicit(&p->task, task, memory_order_relaxed);
    atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t g = generation_of(atomic_load(&p->work)) + 1;
    atomic_store(&p->work, (uint64_t)g << 32 | (uint64_t)n_parts << 16);
    wake_workers(p);
    take_parts(p, g);
    wait_for_parts(p, n_parts);
}

void pool_run(ThreadPool *p, PoolTask task, void *arg) { pool_run_parts(p, p->n_threads, task, arg); }

int pool_size(const ThreadPool *p) { return p->n_threads; }

/* See pool_parts_for_values. */
enum { ALONE_VALUES = 8192 };

int pool_parts_for_values(const ThreadPool *p, size_t values) { return values <= ALONE_VALUES ? 1 : p->n_threads; }

void *pool_scratch(ThreadPool *p, size_t bytes) {
    if (bytes > p->scratch_bytes) {
        free(p->scratch);
        p->scratch = xmalloc_huge(bytes);
        p->scratch_bytes = bytes;
    }
    return p->scratch;
}

void pool_free(ThreadPool *p) {
    if (!p) return;
    atomic_store(&p->stop, true);
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->finished);
    free(p->workers);
    free(p->scratch);
    free(p);
}

/* ---- how many CPUs ---- */

/* Reads a small text file into buf (NUL-terminated); 0 on success. */
static int read_small(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    return 0;
}

/* The quota in CPUs, rounded up, of one cgroup folder, or 0 for none:
 * v2 "cpu.max" holds "QUOTA PERIOD" or "max PERIOD"; v1 holds the quota
 * (-1 for none) and the period in two files. */
static int folder_limit(const char *dir, bool v2) {
    char path[4096 + 32], text[128];
    long long quota = -1, period = 0;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        if (read_small(path, text, sizeof text) != 0 || sscanf(text, "%lld %lld", &quota, &period) != 2) return 0;
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        if (read_small(path, text, sizeof text) != 0 || sscanf(text, "%lld", &quota) != 1) return 0;
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        if (read_small(path, text, sizeof text) != 0 || sscanf(text, "%lld", &period) != 1) return 0;
    }
    if (quota <= 0 || period <= 0) return 0;
    long long cpus = (quota + period - 1) / period;
    return cpus > 4096 ? 4096 : (int)cpus;
}

/* The tightest quota from `mount`/`rel` up to `mount` (limits set on a
 * parent group bind its children too). */
static int path_limit(const char *mount, const char *rel, bool v2) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s%s", mount, strcmp(rel, "/") == 0 ? "" : rel) >= (int)sizeof dir) return 0;
    size_t base = strlen(mount);
    int best = 0;
    for (;;) {
        int cpus = folder_limit(dir, v2);
        if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < base) break;
        *slash = 0;
    }
    return best;
}

/* Whether the comma-separated list has `word`. */
static bool has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *at = list; (at = strstr(at, word)) != NULL; at += n)
        if ((at == list || at[-1] == ',') && (at[n] == ',' || at[n] == 0 || at[n] == ' ' || at[n] == '\n')) return true;
    return false;
}

/* The process's group path for cgroup v2 (controllers "") or for the v1
 * hierarchy that has the cpu controller, from <proc_dir>/cgroup lines
 * "ID:CONTROLLERS:PATH". */
static bool group_path(const char *proc_dir, bool v2, char *out, size_t size) {
    char path[4096 + 16], line[4096];
    snprintf(path, sizeof path, "%s/cgroup", proc_dir);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        bool match = v2 ? c1[1] == 0 : has_word(c1 + 1, "cpu");
        if (!match) continue;
        c2[1 + strcspn(c2 + 1, "\n")] = 0;
        found = snprintf(out, size, "%s", c2 + 1) < (int)size;
    }
    fclose(f);
    return found;
}

int cgroup_cpu_limit(const char *proc_dir) {
    char path[4096 + 16], line[8192];
    snprintf(path, sizeof path, "%s/mountinfo", proc_dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int best = 0;
    /* mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS] - FSTYPE SOURCE SUPEROPTIONS */
    while (fgets(line, sizeof line, f)) {
        char root[4096], mount[4096], fstype[64], super[1024] = "";
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mount) != 2 ||
            sscanf(dash + 3, "%63s %*s %1023s", fstype, super) < 1)
            continue;
        bool v2 = strcmp(fstype, "cgroup2") == 0;
        if (!v2 && !(strcmp(fstype, "cgroup") == 0 && has_word(super, "cpu"))) continue;
        char group[4096];
        if (!group_path(proc_dir, v2, group, sizeof group)) continue;
        /* The group path is relative to the hierarchy's root; the mount
         * shows the part of it under `root`. */
        size_t n = strlen(root);
        const char *rel = strcmp(root, "/") == 0 ? group : strncmp(group, root, n) == 0 ? group + n : "/";
        int cpus = path_limit(mount, *rel ? rel : "/", v2);
        if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
    }
    fclose(f);
    return best;
}

int cpu_count(void) {
    int n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n < 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online < 1 ? 1 : (int)online;
    }
    int quota = cgroup_cpu_limit("/proc/self");
    return quota > 0 && quota < n ? quota : n;
}
