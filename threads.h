/* threads.h - a persistent pool of worker threads, and how many CPUs the
 * process may use.
 *
 * The threads are created once. pool_run_parts cuts a task into parts and
 * returns when every part has run once; each thread, the caller's included,
 * takes the next part not yet taken until none is left. So a thread that
 * the system deschedules holds up at most the part it is running: the
 * others take the rest. A pool of 1 runs the parts inline, in order. */
#ifndef THREADS_H
#define THREADS_H

#include <stddef.h>

typedef struct ThreadPool ThreadPool;

/* A task: do part `part` of `n_parts` of the work in arg. Parts of one run
 * may run at the same time on different threads, each part on one thread;
 * a part may use scratch memory of its own indexed by `part`. */
typedef void (*PoolTask)(void *arg, int part, int n_parts);

ThreadPool *pool_new(int n_threads);
void pool_run_parts(ThreadPool *pool, int n_parts, PoolTask task, void *arg);
/* pool_run_parts with one part per thread. */
void pool_run(ThreadPool *pool, PoolTask task, void *arg);
/* The parts for simple work on `values` values (a row-by-row or
 * value-by-value pass): 1, so that the caller does it alone, when they are
 * few enough (a decoded token's activations, say) that handing a part to
 * another thread would take about as long as the work; else one per thread. */
int pool_parts_for_values(const ThreadPool *pool, size_t values);
int pool_size(const ThreadPool *pool);
/* A buffer of at least `bytes` (contents undefined, aligned for any
 * vector), owned by the pool and kept for the next caller: scratch memory
 * for the one caller that runs the pool at a time. Valid until the next
 * pool_scratch or pool_free. */
void *pool_scratch(ThreadPool *pool, size_t bytes);
void pool_free(ThreadPool *pool);

/* The CPUs this process may run on: the CPUs in its affinity mask (taskset,
 * cpuset), at most the CPU quota of its control group rounded up (cgroup v2
 * cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, the tightest along the
 * group's path); at least 1. The default thread count. */
int cpu_count(void);

/* The cgroup CPU quota in CPUs (rounded up) that the files under proc_dir
 * (normally "/proc/self": its mountinfo and cgroup) lead to, or 0 when no
 * quota applies or nothing can be read. */
int cgroup_cpu_limit(const char *proc_dir);

#endif
