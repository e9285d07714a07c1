/* One process-wide pool of worker threads for the host algorithms (pure C, no Python).
 *
 * A parallel job is `fn(ctx, chunk)` for every chunk of [0, nchunks). The caller fixes the
 * chunking (from the input size, never from the thread count) and combines per-chunk results
 * in chunk order, so results do not depend on how many threads ran. The calling thread takes
 * part; workers start lazily on the first job that has use for them. */
#ifndef CUNUMPY__CORE_THREAD_POOL_H
#define CUNUMPY__CORE_THREAD_POOL_H

#include <stddef.h>

typedef void (*cn_chunk_fn)(void *ctx, size_t chunk);

/* Run fn(ctx, c) for c in [0, nchunks) and return when all are done. Chunks run on any
 * thread and start in increasing order (a chunk may wait for a lower one, never the reverse); with one thread (or while another job holds the pool, or from a worker)
 * they run on the calling thread in increasing order. Never touches Python. */
void cn_parallel_for(size_t nchunks, cn_chunk_fn fn, void *ctx);

/* cn_parallel_for for an input of n elements: below `cutover` elements every chunk runs on the
 * calling thread (handing a job to the workers costs more than they would save; each caller
 * measures its own cut-over). The chunks and so the results are the same either way. */
void cn_parallel_for_n(size_t nchunks, cn_chunk_fn fn, void *ctx, size_t n, size_t cutover);

/* Threads a job may use now (1 = the calling thread only). */
int cn_pool_threads(void);

#define CN_POOL_MAX_THREADS 1024

/* Controls, for threads.c and the C tests. */
int cn_pool_wanted(void);            /* 0 until a size is decided */
void cn_pool_decide(int n);          /* the first decision wins (from CUNUMPY_NUM_THREADS) */
void cn_pool_resize(int n);          /* waits for a running job; starts the workers now */
int cn_pool_take_start_failure(void); /* 1 once after workers failed to start (then 1 thread) */
void cn_pool_fail_next_start(void);  /* test hook: the next start fails like pthread_create */
int cn_pool_workers(void);           /* worker threads running now */
int cn_pool_install_fork_handlers(void); /* a child of fork starts with a fresh pool */
void cn_pool_ignore_cutover(int on);  /* tests, benchmarks: cn_parallel_for_n ignores cut-overs */
unsigned long cn_pool_jobs(void);     /* jobs handed to the workers so far (tests) */

#endif /* CUNUMPY__CORE_THREAD_POOL_H */
