/* threads.h - a persistent pool of worker threads.
 *
 * The threads are created once; pool_run hands every thread the same task and
 * returns when all have finished it. The caller's own thread takes part as
 * thread 0, so a pool of 1 runs the task inline. */
#ifndef THREADS_H
#define THREADS_H

typedef struct ThreadPool ThreadPool;

/* A task: thread `thread` of `n_threads` does its share of the work in arg. */
typedef void (*PoolTask)(void *arg, int thread, int n_threads);

ThreadPool *pool_new(int n_threads);
void pool_run(ThreadPool *pool, PoolTask task, void *arg);
int pool_size(const ThreadPool *pool);
void pool_free(ThreadPool *pool);

/* The number of CPUs online, for the default thread count. */
int cpu_count(void);

#endif
