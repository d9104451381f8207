/* test_threads.c - the pool runs every part of a task exactly once, however
 * many parts and threads; the CPU count follows the affinity mask; the
 * cgroup quota is read from made-up /proc and /sys trees as the kernel
 * writes them. */
#define _GNU_SOURCE /* sched_setaffinity */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../threads.h"
#include "../util.h"
#include "test.h"

enum { MAX_PARTS = 100 };

typedef struct {
    atomic_int runs[MAX_PARTS];
    atomic_int bad_count;  /* calls told another n_parts */
    int n_parts;
} Counts;

static void count_part(void *arg, int part, int n_parts) {
    Counts *c = arg;
    if (n_parts != c->n_parts || part < 0 || part >= n_parts) atomic_fetch_add(&c->bad_count, 1);
    else atomic_fetch_add(&c->runs[part], 1);
}

static void test_parts(void) {
    int threads[] = {1, 2, 3, 8}, parts[] = {1, 2, 3, 7, 100};
    for (int ti = 0; ti < 4; ti++) {
        ThreadPool *pool = pool_new(threads[ti]);
        CHECK(pool_size(pool) == threads[ti], "a pool of %d threads", threads[ti]);
        for (int pi = 0; pi < 5; pi++) {
            bool once = true;
            for (int rep = 0; rep < 300; rep++) {
                Counts c = {.n_parts = parts[pi]};
                pool_run_parts(pool, parts[pi], count_part, &c);
                once &= atomic_load(&c.bad_count) == 0;
                for (int p = 0; p < parts[pi]; p++) once &= atomic_load(&c.runs[p]) == 1;
            }
            CHECK(once, "%d threads, %d parts: every part runs once, 300 times over", threads[ti], parts[pi]);
        }
        Counts c = {.n_parts = threads[ti]};
        pool_run(pool, count_part, &c);
        bool once = atomic_load(&c.bad_count) == 0;
        for (int p = 0; p < threads[ti]; p++) once &= atomic_load(&c.runs[p]) == 1;
        CHECK(once, "%d threads: pool_run runs one part per thread", threads[ti]);
        /* A decoded token's few thousand values stay with the caller; a
         * prompt block's hundred thousand go to every thread. */
        CHECK(pool_parts_for_values(pool, 896) == 1 && pool_parts_for_values(pool, 128 * 896) == threads[ti],
              "%d threads: 896 values in 1 part, 114,688 in %d", threads[ti], threads[ti]);
        pool_free(pool);
    }
}

/* Runs of different part counts one after another: a worker late for one
 * run must take nothing from it that the next run's count allows (this
 * once took a part too many and hung the caller). */
static void test_alternating_runs(void) {
    ThreadPool *pool = pool_new(2);
    bool once = true;
    for (int rep = 0; rep < 200000 && once; rep++) {
        int n = rep % 2 ? 1 + rep % 7 : 7 + rep % 93;
        Counts c = {.n_parts = n};
        pool_run_parts(pool, n, count_part, &c);
        once &= atomic_load(&c.bad_count) == 0;
        for (int p = 0; p < n; p++) once &= atomic_load(&c.runs[p]) == 1;
    }
    CHECK(once, "200000 runs of alternating part counts: every part of each runs once");
    pool_free(pool);
}

static void test_cpu_count(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpu_count();
    CHECK(n >= 1 && n <= online, "cpu_count %d is within [1, %ld]", n, online);
    cpu_set_t saved, one;
    if (sched_getaffinity(0, sizeof saved, &saved) != 0) return;
    CPU_ZERO(&one);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &saved)) {
            CPU_SET(i, &one);
            break;
        }
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "pinning to one CPU");
    CHECK(cpu_count() == 1, "pinned to one CPU: cpu_count is 1 (got %d)", cpu_count());
    sched_setaffinity(0, sizeof saved, &saved);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *root, const char *rel, char *out, size_t size) {
    snprintf(out, size, "%s/%s", root, rel);
    mkdir(out, 0755);
}

/* A made-up machine: proc/ with mountinfo and cgroup, and the cgroup trees. */
static void test_cgroup(void) {
    char root[] = "/tmp/test_threads_XXXXXX", proc[256], dir[256], text[2048];
    if (!mkdtemp(root)) die("mkdtemp failed");
    make_dir(root, "proc", proc, sizeof proc);
    make_dir(root, "v2", dir, sizeof dir);
    make_dir(root, "v2/box", dir, sizeof dir);
    make_dir(root, "v2/box/app", dir, sizeof dir);
    make_dir(root, "cpu", dir, sizeof dir);
    make_dir(root, "cpu/job", dir, sizeof dir);

    /* cgroup v2: the group's own cpu.max says max, its parent 1.5 CPUs. */
    snprintf(text, sizeof text, "30 22 0:27 / %s/v2 rw,relatime - cgroup2 cgroup2 rw\n", root);
    write_text(proc, "mountinfo", text);
    write_text(proc, "cgroup", "0::/box/app\n");
    snprintf(dir, sizeof dir, "%s/v2/box/app", root);
    write_text(dir, "cpu.max", "max 100000\n");
    CHECK(cgroup_cpu_limit(proc) == 0, "v2: no quota anywhere: 0");
    snprintf(dir, sizeof dir, "%s/v2/box", root);
    write_text(dir, "cpu.max", "150000 100000\n");
    CHECK(cgroup_cpu_limit(proc) == 2, "v2: a parent's 1.5 CPUs round up to 2 (got %d)", cgroup_cpu_limit(proc));
    snprintf(dir, sizeof dir, "%s/v2/box/app", root);
    write_text(dir, "cpu.max", "50000 100000\n");
    CHECK(cgroup_cpu_limit(proc) == 1, "v2: the tightest along the path: 1 (got %d)", cgroup_cpu_limit(proc));

    /* cgroup v1: the cpu controller's hierarchy, quota and period files. */
    snprintf(text, sizeof text,
             "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
             "31 30 0:28 / %s/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
             "34 30 0:31 / /nonexistent/memory rw,relatime - cgroup cgroup rw,memory\n",
             root);
    write_text(proc, "mountinfo", text);
    write_text(proc, "cgroup", "4:memory:/job\n2:cpu,cpuacct:/job\n0::/\n");
    snprintf(dir, sizeof dir, "%s/cpu/job", root);
    write_text(dir, "cpu.cfs_quota_us", "-1\n");
    write_text(dir, "cpu.cfs_period_us", "100000\n");
    CHECK(cgroup_cpu_limit(proc) == 0, "v1: quota -1 is no quota");
    write_text(dir, "cpu.cfs_quota_us", "300000\n");
    CHECK(cgroup_cpu_limit(proc) == 3, "v1: 300000 / 100000 is 3 CPUs (got %d)", cgroup_cpu_limit(proc));
    write_text(proc, "mountinfo", "garbage\n\n- - -\n");
    CHECK(cgroup_cpu_limit(proc) == 0, "an unreadable mountinfo gives no quota");

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

int main(void) {
    test_parts();
    test_alternating_runs();
    test_cpu_count();
    test_cgroup();
    return test_summary("test_threads");
}
