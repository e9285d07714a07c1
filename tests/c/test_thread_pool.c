/* The thread pool, the parallel compaction and the parallel radix sort, pure C: built with
 * ASan/UBSan by `make test-c` and with ThreadSanitizer by `make test-tsan`. */
#include "thread_pool.c"

#include <stdio.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compact_kernels.h"
/* Every pass of the sort on the pool, with no cut-over: the threaded paths at test sizes. */
#define CN_SORT_PARALLEL_FOR(n, nchunks, fn, ctx) cn_parallel_for_n((nchunks), (fn), (ctx), (n), 0)
#include "sort_kernels.h"

#include "check.h"

static void add_square(void *ctx, size_t c)
{
    /* Each chunk owns its slot: no two threads write the same word. */
    ((size_t *)ctx)[c] = c * c;
}

static void note_worker(void *ctx, size_t c)
{
    /* Slow chunks, so that the workers surely take some of them. */
    struct timespec pause = {0, 200000};
    nanosleep(&pause, NULL);
    ((int *)ctx)[c] = in_worker;
}

/* The workers really run chunks (not only the calling thread). */
static void test_workers_take_chunks(int threads)
{
    cn_pool_resize(threads);
    int ran_on_worker[64] = {0};
    cn_parallel_for(64, note_worker, ran_on_worker);
    int on_workers = 0;
    for (int c = 0; c < 64; c++)
        on_workers += ran_on_worker[c];
    CHECK(threads == 1 ? on_workers == 0 : on_workers > 0);
}

static void test_parallel_for(int threads)
{
    cn_pool_resize(threads);
    CHECK(cn_pool_threads() == threads);
    CHECK(cn_pool_workers() == threads - 1);
    size_t out[1000];
    for (int round = 0; round < 50; round++) {
        memset(out, 0xff, sizeof out);
        size_t n = (size_t)(round * 19 % 1000) + 1;
        cn_parallel_for(n, add_square, out);
        for (size_t c = 0; c < n; c++)
            CHECK(out[c] == c * c);
    }
}

/* Compaction of three arrays by a pseudo-random mask; returns the live count. */
static size_t compact_once(size_t n, unsigned density, double *a, uint32_t *b, double *c3)
{
    char *mask = malloc(n);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        mask[i] = (char)(x % 100 < density);
        a[i] = (double)i;
        b[i] = (uint32_t)i;
        for (int k = 0; k < 3; k++)
            c3[3 * i + k] = (double)i + 0.25 * k;
    }
    ptrdiff_t lane0 = 0;
    cn_compact_array arrays[3] = {
        {(char *)a, 8, 8, 1, &lane0},
        {(char *)b, 4, 4, 1, &lane0},
        {(char *)c3, 24, 24, 1, &lane0},
    };
    size_t nblocks = cn_compact_blocks(n);
    cn_compact_job job = {mask, 1, n, arrays, 3, NULL, NULL, NULL};
    job.bits = malloc(((n + 63) / 64) * sizeof(uint64_t));
    job.offset = malloc((nblocks + 1) * sizeof(size_t));
    job.done = calloc(cn_compact_move_chunks(&job), sizeof(int));
    cn_parallel_for(nblocks, cn_compact_scan_block, &job);
    size_t live = cn_compact_offsets(&job);
    cn_parallel_for(cn_compact_move_chunks(&job), cn_compact_move_chunk, &job);
    /* Every live position in order, checked against the mask. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mask[i])
            continue;
        CHECK(a[k] == (double)i && b[k] == (uint32_t)i && c3[3 * k + 2] == (double)i + 0.5);
        k++;
    }
    CHECK(k == live);
    free(job.bits);
    free(job.offset);
    free(job.done);
    free(mask);
    return live;
}

static void test_compact(int threads)
{
    cn_pool_resize(threads);
    size_t n = 5 * CN_COMPACT_BLOCK + 77;
    double *a = malloc(n * sizeof(double)), *c3 = malloc(3 * n * sizeof(double));
    uint32_t *b = malloc(n * sizeof(uint32_t));
    unsigned densities[] = {0, 3, 50, 97, 100};
    for (int d = 0; d < 5; d++)
        compact_once(n, densities[d], a, b, c3);
    free(a);
    free(b);
    free(c3);
}

/* The same order and sorted keys for every thread count, and a stable argsort: 30-bit keys
 * (64-bit records), 63-bit keys (128-bit records), sorted and reversed keys (the scan). */
static void test_sort(int threads, int64_t **first_orders)
{
    cn_pool_resize(threads);
    size_t n = 3 * CN_SORT_CHUNK_MIN + 4099;
    int64_t *keys = malloc(n * sizeof(int64_t)), *sorted = malloc(n * sizeof(int64_t));
    int64_t *order = malloc(n * sizeof(int64_t));
    for (int pattern = 0; pattern < 4; pattern++) {
        uint64_t state = 88172645463325252ull;
        for (size_t i = 0; i < n; i++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            keys[i] = pattern == 0   ? (int64_t)(state >> 34)
                      : pattern == 1 ? (int64_t)(state >> 1) - (int64_t)(state >> 2)
                      : pattern == 2 ? (int64_t)i
                                     : (int64_t)(n - i) / 3;
        }
        CHECK(cn_radix_argsort(CN_KEY_I64, (const char *)keys, 8, n, order, (char *)sorted) ==
              CN_SORT_OK);
        int ok = 1;
        for (size_t i = 0; i < n; i++) {
            ok &= order[i] >= 0 && (size_t)order[i] < n && sorted[i] == keys[order[i]];
            if (i > 0)
                ok &= sorted[i - 1] < sorted[i] || (sorted[i - 1] == sorted[i] && order[i - 1] < order[i]);
        }
        CHECK(ok);
        if (first_orders[pattern] == NULL) {
            first_orders[pattern] = malloc(n * sizeof(int64_t));
            memcpy(first_orders[pattern], order, n * sizeof(int64_t));
        } else {
            CHECK(memcmp(first_orders[pattern], order, n * sizeof(int64_t)) == 0);
        }
    }
    free(keys);
    free(sorted);
    free(order);
}

static void test_fork(void)
{
    cn_pool_resize(3);
    size_t out[64];
    cn_parallel_for(64, add_square, out);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child has no workers until it needs them; then it gets a fresh set. */
        int ok = cn_pool_workers() == 0;
        memset(out, 0, sizeof out);
        cn_parallel_for(64, add_square, out);
        ok = ok && out[63] == 63 * 63 && cn_pool_workers() == 2;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_start_failure(void)
{
    cn_pool_resize(1);
    cn_pool_fail_next_start();
    cn_pool_resize(4);
    CHECK(cn_pool_take_start_failure() == 1);
    CHECK(cn_pool_take_start_failure() == 0);
    CHECK(cn_pool_threads() == 1 && cn_pool_workers() == 0);
    size_t out[10];
    cn_parallel_for(10, add_square, out);
    CHECK(out[9] == 81);
}

int main(void)
{
    CHECK(cn_pool_install_fork_handlers() == 0);
    int counts[] = {1, 2, 3, 8};
    int64_t *sort_orders[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) {
        test_parallel_for(counts[i]);
        test_workers_take_chunks(counts[i]);
        test_compact(counts[i]);
        test_sort(counts[i], sort_orders);
    }
    for (int p = 0; p < 4; p++)
        free(sort_orders[p]);
    test_fork();
    test_start_failure();
    cn_pool_resize(1); /* joins the workers: nothing left running at exit */
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("thread pool C tests passed\n");
    return 0;
}
