/* The thread pool of the C core (see thread_pool.h); pure C, its Python side is threads.c. */
#define _POSIX_C_SOURCE 200809L /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp): the POSIX feature-test macro */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "thread_pool.h"


/* `state` guards everything below; `job_lock` is held by the one caller whose job the workers
 * run (a second concurrent caller runs its chunks itself instead of waiting). */
static pthread_mutex_t state = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;

static int wanted = 0;          /* threads asked for (0: not decided yet) */
static pthread_t *workers = NULL;
static int nworkers = 0;         /* started worker threads (wanted - 1 once started) */
static int started = 0;          /* workers started for the current `wanted` */
static int quitting = 0;
static unsigned long generation = 0;
static int pending = 0;          /* workers not yet finished with the current generation */
static int fail_next_start = 0;  /* test hook: the next start fails as pthread_create would */
static int start_failed = 0;     /* a start failed; reported once as a warning */

static cn_chunk_fn job_fn;
static void *job_ctx;
static size_t job_chunks;
static size_t job_next;          /* atomic: next chunk to take */

static _Thread_local int in_worker = 0;
static int ignore_cutover = 0;   /* atomic */
static unsigned long jobs_run = 0; /* atomic: jobs published to the workers */

static void run_chunks(cn_chunk_fn fn, void *ctx, size_t nchunks)
{
    for (;;) {
        size_t c = __atomic_fetch_add(&job_next, 1, __ATOMIC_RELAXED);
        if (c >= nchunks)
            break;
        fn(ctx, c);
    }
}

static void *worker_main(void *arg)
{
    in_worker = 1;
    /* The generation when this worker was created (no job was running then): a job published
     * before the worker first takes the lock is still seen as new. */
    unsigned long seen = (unsigned long)(uintptr_t)arg;
    pthread_mutex_lock(&state);
    for (;;) {
        while (generation == seen && !quitting)
            pthread_cond_wait(&work_ready, &state);
        if (quitting)
            break;
        seen = generation;
        cn_chunk_fn fn = job_fn;
        void *ctx = job_ctx;
        size_t nchunks = job_chunks;
        pthread_mutex_unlock(&state);
        run_chunks(fn, ctx, nchunks);
        pthread_mutex_lock(&state);
        if (--pending == 0)
            pthread_cond_signal(&work_done);
    }
    pthread_mutex_unlock(&state);
    return NULL;
}

/* Join every worker (caller holds job_lock, not state). */
static void stop_workers(void)
{
    pthread_mutex_lock(&state);
    quitting = 1;
    pthread_cond_broadcast(&work_ready);
    int count = nworkers;
    pthread_t *threads = workers;
    pthread_mutex_unlock(&state);
    for (int i = 0; i < count; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_lock(&state);
    free(workers);
    workers = NULL;
    nworkers = 0;
    started = 0;
    quitting = 0;
    pthread_mutex_unlock(&state);
}

/* Start wanted - 1 workers (caller holds job_lock). On failure keep none and use one thread. */
static void start_workers(void)
{
    int want = wanted - 1;
    started = 1;
    if (want <= 0)
        return;
    pthread_t *threads = malloc((size_t)want * sizeof(pthread_t));
    int made = 0;
    if (threads != NULL && !fail_next_start) {
        sigset_t all, old;
        sigfillset(&all);
        /* Workers never take signals: Python's handlers run on the main thread. */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_mutex_lock(&state);
        void *now = (void *)(uintptr_t)generation;
        pthread_mutex_unlock(&state);
        for (; made < want; made++) {
            if (pthread_create(&threads[made], NULL, worker_main, now) != 0)
                break;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_lock(&state);
    workers = threads;
    nworkers = made;
    pthread_mutex_unlock(&state);
    if (made < want) {
        fail_next_start = 0;
        stop_workers();
        started = 1;
        wanted = 1;
        start_failed = 1;
    }
}

void cn_parallel_for(size_t nchunks, cn_chunk_fn fn, void *ctx)
{
    if (nchunks == 0)
        return;
    int threads = __atomic_load_n(&wanted, __ATOMIC_RELAXED);
    if (nchunks == 1 || threads <= 1 || in_worker || pthread_mutex_trylock(&job_lock) != 0) {
        for (size_t c = 0; c < nchunks; c++)
            fn(ctx, c);
        return;
    }
    if (!started)
        start_workers();
    pthread_mutex_lock(&state);
    if (nworkers == 0) {
        pthread_mutex_unlock(&state);
        pthread_mutex_unlock(&job_lock);
        for (size_t c = 0; c < nchunks; c++)
            fn(ctx, c);
        return;
    }
    job_fn = fn;
    job_ctx = ctx;
    job_chunks = nchunks;
    __atomic_store_n(&job_next, 0, __ATOMIC_RELAXED);
    pending = nworkers;
    generation++;
    __atomic_fetch_add(&jobs_run, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&work_ready);
    pthread_mutex_unlock(&state);
    run_chunks(fn, ctx, nchunks);
    pthread_mutex_lock(&state);
    while (pending > 0)
        pthread_cond_wait(&work_done, &state);
    pthread_mutex_unlock(&state);
    pthread_mutex_unlock(&job_lock);
}

void cn_parallel_for_n(size_t nchunks, cn_chunk_fn fn, void *ctx, size_t n, size_t cutover)
{
    if (n < cutover && !__atomic_load_n(&ignore_cutover, __ATOMIC_RELAXED)) {
        for (size_t c = 0; c < nchunks; c++)
            fn(ctx, c);
        return;
    }
    cn_parallel_for(nchunks, fn, ctx);
}

void cn_pool_ignore_cutover(int on)
{
    __atomic_store_n(&ignore_cutover, on, __ATOMIC_RELAXED);
}

unsigned long cn_pool_jobs(void)
{
    return __atomic_load_n(&jobs_run, __ATOMIC_RELAXED);
}

int cn_pool_threads(void)
{
    int n = __atomic_load_n(&wanted, __ATOMIC_RELAXED);
    return n > 0 ? n : 1;
}

/* A child of fork has none of the parent's workers: it starts with a fresh pool of the same
 * size. The locks are held across fork so the child copies a consistent state. */
static void before_fork(void)
{
    pthread_mutex_lock(&job_lock);
    pthread_mutex_lock(&state);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&state);
    pthread_mutex_unlock(&job_lock);
}

static void after_fork_child(void)
{
    pthread_mutex_init(&state, NULL);
    pthread_mutex_init(&job_lock, NULL);
    pthread_cond_init(&work_ready, NULL);
    pthread_cond_init(&work_done, NULL);
    free(workers);
    workers = NULL;
    nworkers = 0;
    started = 0;
    quitting = 0;
    pending = 0;
}

/* ---- controls (thread_pool.h) ---- */

int cn_pool_wanted(void)
{
    return __atomic_load_n(&wanted, __ATOMIC_ACQUIRE);
}

void cn_pool_decide(int n)
{
    int zero = 0;
    __atomic_compare_exchange_n(&wanted, &zero, n, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void cn_pool_resize(int n)
{
    pthread_mutex_lock(&job_lock);
    if (n != wanted || !started) {
        if (started)
            stop_workers();
        __atomic_store_n(&wanted, n, __ATOMIC_RELEASE);
    }
    if (!started && n > 1)
        start_workers();
    pthread_mutex_unlock(&job_lock);
}

int cn_pool_take_start_failure(void)
{
    return __atomic_exchange_n(&start_failed, 0, __ATOMIC_ACQ_REL);
}

void cn_pool_fail_next_start(void)
{
    pthread_mutex_lock(&job_lock);
    fail_next_start = 1;
    pthread_mutex_unlock(&job_lock);
}

int cn_pool_workers(void)
{
    pthread_mutex_lock(&state);
    int n = nworkers;
    pthread_mutex_unlock(&state);
    return n;
}

int cn_pool_install_fork_handlers(void)
{
    static int installed = 0;
    if (installed)
        return 0;
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
        return -1;
    installed = 1;
    return 0;
}

/* Exported (the rest of the module is hidden) so that threadpoolctl recognises this library
 * by a symbol no other extension named _core has. */
__attribute__((visibility("default"))) int cunumpy_pool_threads(void)
{
    return cn_pool_threads();
}
