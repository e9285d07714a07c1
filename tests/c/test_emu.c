/* C unit tests of the CPU emulator runtime (src/cunumpy/_core/emu/), run under ASan/UBSan by
 * `make test-c`. The runtime sources are compiled into this file; the kernels come from
 * test_emu_kernels.cpp, compiled by g++ against the prelude and linked in, so the tests run
 * the same ABI a kernel library uses. A watchdog alarm turns any hang into a failure. */
#include "emu/emu_check.c"
#include "emu/emu_fiber.c"
#include "emu/emu_runtime.c"
#include "emu/emu_analysis.c" /* the runtime calls its hooks */

#include <fenv.h>
#include <math.h>
#include <time.h>

#include "check.h"

#define DECLARE_KERNEL(k)                                                                                              \
    void cunumpy_emu_thread_##k(void *const *args);                                                                   \
    void cunumpy_emu_block_##k(cunumpy_emu_worker *w, void *const *args);
void cunumpy_emu_bind(cunumpy_emu_worker *w);
int cunumpy_emu_abi_version(void);
DECLARE_KERNEL(axpy)
DECLARE_KERNEL(builtins)
DECLARE_KERNEL(reverse)
DECLARE_KERNEL(reverse_dynamic)
DECLARE_KERNEL(sync_count)
DECLARE_KERNEL(shfl)
DECLARE_KERNEL(vote)
DECLARE_KERNEL(activemask)
DECLARE_KERNEL(reduce_scan)
DECLARE_KERNEL(block_sum)
DECLARE_KERNEL(atomics)
DECLARE_KERNEL(trap_at)
DECLARE_KERNEL(assert_fail)
DECLARE_KERNEL(barrier_divergence)
DECLARE_KERNEL(deadlock)
DECLARE_KERNEL(mask_mismatch)
DECLARE_KERNEL(mask_absent)
DECLARE_KERNEL(mask_exited)
DECLARE_KERNEL(null_deref)
DECLARE_KERNEL(overflow)
DECLARE_KERNEL(headers)
DECLARE_KERNEL(bounds)
DECLARE_KERNEL(intrinsics)
DECLARE_KERNEL(rounding)
DECLARE_KERNEL(rounding_sync)

static char last_error[1024];

/* One launch; returns the runtime's status, the message in last_error. */
static int launch(const char *name, cunumpy_emu_thread_fn thread_fn, cunumpy_emu_block_fn block_fn, int fibers,
                  cunumpy_emu_dim3 grid, cunumpy_emu_dim3 block, void *const *args, size_t shared_mem, int checked,
                  int workers)
{
    emu_launch_params p;
    memset(&p, 0, sizeof p);
    p.bind = cunumpy_emu_bind;
    p.thread_fn = thread_fn;
    p.block_fn = block_fn;
    p.args = args;
    p.grid = grid;
    p.block = block;
    p.shared_mem = shared_mem;
    p.fibers = fibers;
    p.checked = checked;
    p.workers = workers;
    p.kernel_name = name;
    last_error[0] = '\0';
    emu_failure failure = EMU_FAIL_NONE;
    return emu_launch_run(&p, last_error, sizeof last_error, &failure);
}

#define LAUNCH(k, fibers, grid, block, args, shared, checked, workers)                                                 \
    launch(#k, cunumpy_emu_thread_##k, cunumpy_emu_block_##k, fibers, grid, block, args, shared, checked, workers)

static cunumpy_emu_dim3 d3(unsigned x, unsigned y, unsigned z)
{
    cunumpy_emu_dim3 d = {x, y, z};
    return d;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the context switch itself ------------------------------------------------------------ */

typedef struct {
    emu_context main, fiber;
    long steps;
    double acc;
    int fiber_registers_ok;
} switch_test;

/* Eight integers and eight doubles live across every switch, on both sides with different
 * values: they fill the callee-saved general and vector registers (x86-64: rbx, rbp, r12-r15;
 * aarch64: x19-x28, d8-d15), so a register the switch fails to save or restore shows up as a
 * wrong value on one side. */
#define LIVE_VALUES(p, v)                                                                                              \
    const long p##0 = v[0], p##1 = v[1], p##2 = v[2], p##3 = v[3], p##4 = v[4], p##5 = v[5], p##6 = v[6], p##7 = v[7];  \
    const double p##d0 = (double)v[8], p##d1 = (double)v[9], p##d2 = (double)v[10], p##d3 = (double)v[11],            \
                 p##d4 = (double)v[12], p##d5 = (double)v[13], p##d6 = (double)v[14], p##d7 = (double)v[15]
#define LIVE_OK(p, v)                                                                                                  \
    (p##0 == v[0] && p##1 == v[1] && p##2 == v[2] && p##3 == v[3] && p##4 == v[4] && p##5 == v[5] && p##6 == v[6] &&  \
     p##7 == v[7] && p##d0 == (double)v[8] && p##d1 == (double)v[9] && p##d2 == (double)v[10] &&                      \
     p##d3 == (double)v[11] && p##d4 == (double)v[12] && p##d5 == (double)v[13] && p##d6 == (double)v[14] &&          \
     p##d7 == (double)v[15])

/* Values read from volatile memory: the compiler can neither fold the checks nor recompute
 * the values after the switch, so it keeps them in registers (or spills them) across it. */
static void fill_live(volatile long *v, long seed)
{
    for (int j = 0; j < 16; ++j)
        v[j] = seed * (j + 1) + j;
}

static void switch_fiber(void *arg)
{
    switch_test *s = (switch_test *)arg;
    /* Values live across switches in callee-saved registers and on this stack. */
    double local = 0.5;
    long k = 0;
    for (;;) {
        local += 1.0;
        k += 3;
        s->steps++;
        s->acc = local + (double)k;
        volatile long v[16];
        fill_live(v, -3 * s->steps - 1);
        LIVE_VALUES(f, v);
        emu_context_switch(&s->fiber, &s->main, 0);
        s->fiber_registers_ok &= LIVE_OK(f, v);
    }
}

static void test_switch(void)
{
    emu_stack_pool pool = {0};
    CHECK(emu_stack_pool_reserve(&pool, 1) == 0);
    switch_test s;
    memset(&s, 0, sizeof s);
    ucontext_t uc_main, uc_fiber;
    s.main.ucontext = &uc_main;
    s.fiber.ucontext = &uc_fiber;
    emu_context_make(&s.fiber, emu_stack_low(&pool, 0), pool.stack_size, switch_fiber, &s);
    volatile double mine = 1.25;
    long mine_k = 7;
    s.fiber_registers_ok = 1;
    int main_registers_ok = 1;
    for (int i = 1; i <= 1000; ++i) {
        volatile long v[16];
        fill_live(v, 5 * i + 2);
        LIVE_VALUES(m, v);
        emu_context_switch(&s.main, &s.fiber, 0);
        main_registers_ok &= LIVE_OK(m, v);
        mine_k += i;
        CHECK(s.steps == i);
        CHECK(s.acc == 0.5 + i + 3.0 * i);
    }
    CHECK(mine == 1.25 && mine_k == 7 + 1000 * 1001 / 2);
    CHECK(main_registers_ok);
    CHECK(s.fiber_registers_ok);
    emu_stack_pool_release(&pool);

    double fiber_ns = 0, uc_ns = 0;
    CHECK(emu_switch_benchmark(100000, &fiber_ns, &uc_ns) == 0);
    CHECK(fiber_ns > 0.0);
    printf("  switch: %.1f ns (ucontext %.1f ns)\n", fiber_ns, uc_ns);
}

/* The floating-point control state is the worker's, per block (emu_fpstate): a kernel that
 * changes the rounding mode (host code, not CUDA) changes it for the rest of its block only;
 * every block starts with the launching thread's mode, and the launching thread keeps it. */
static void test_rounding_mode(void)
{
    enum { BLOCKS = 6, T = 64 };
    int *seen = calloc(BLOCKS * T * 2, sizeof *seen);
    void *args[] = {&seen};
    for (int fibers = 0; fibers < 2; ++fibers) {
        memset(seen, 0, BLOCKS * T * 2 * sizeof *seen);
        CHECK(fegetround() == FE_TONEAREST);
        if (fibers)
            CHECK(LAUNCH(rounding_sync, 1, d3(BLOCKS, 1, 1), d3(T, 1, 1), args, 0, 0, 1) == 0);
        else
            CHECK(LAUNCH(rounding, 0, d3(BLOCKS, 1, 1), d3(T, 1, 1), args, 0, 0, 1) == 0);
        CHECK(fegetround() == FE_TONEAREST);
        int ok = 1;
        for (int b = 0; b < BLOCKS; ++b) {
            /* thread 0 of each block saw the launching thread's mode before it changed it */
            ok &= seen[2 * (b * T)] == FE_TONEAREST;
            if (fibers && EMU_ASM_SWITCH) /* after the barrier every thread sees thread 0's change (the
                                            ucontext fallback keeps a state per fiber) */
                for (int t = 0; t < T; ++t)
                    ok &= seen[2 * (b * T + t) + 1] == FE_UPWARD;
        }
        CHECK(ok);
    }
    free(seen);
}

/* ---- loop and fiber modes ------------------------------------------------------------------ */

static void test_axpy(void)
{
    enum { N = 100003 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; ++i)
        x[i] = i, y[i] = 1.0;
    double a = 2.0;
    long long n = N;
    void *args[] = {&a, &x, &y, &n};
    CHECK(LAUNCH(axpy, 0, d3((N + 255) / 256, 1, 1), d3(256, 1, 1), args, 0, 0, 2) == 0);
    int ok = 1;
    for (int i = 0; i < N; ++i)
        ok &= y[i] == 2.0 * i + 1.0;
    CHECK(ok);
    /* the same kernel through its thread entry, as fibers */
    CHECK(LAUNCH(axpy, 1, d3((N + 255) / 256, 1, 1), d3(256, 1, 1), args, 0, 0, 2) == 0);
    ok = 1;
    for (int i = 0; i < N; ++i)
        ok &= y[i] == 4.0 * i + 1.0;
    CHECK(ok);
    free(x);
    free(y);
}

static void test_builtins(int fibers)
{
    const cunumpy_emu_dim3 grid = d3(3, 2, 2), block = d3(5, 3, 2);
    const unsigned total = 12 * 30;
    unsigned *out = calloc(12 * total, sizeof *out);
    void *args[] = {&out};
    CHECK(LAUNCH(builtins, fibers, grid, block, args, 0, 0, 3) == 0);
    int ok = 1;
    for (unsigned bz = 0; bz < 2; ++bz)
        for (unsigned by = 0; by < 2; ++by)
            for (unsigned bx = 0; bx < 3; ++bx)
                for (unsigned tz = 0; tz < 2; ++tz)
                    for (unsigned ty = 0; ty < 3; ++ty)
                        for (unsigned tx = 0; tx < 5; ++tx) {
                            const unsigned b = bx + 3 * (by + 2 * bz), t = tx + 5 * (ty + 3 * tz);
                            const unsigned *r = out + 12 * (b * 30 + t);
                            const unsigned want[12] = {tx, ty, tz, bx, by, bz, 5, 3, 2, 3, 2, 2};
                            ok &= memcmp(r, want, sizeof want) == 0;
                        }
    CHECK(ok);
    free(out);
}

static void test_shared_and_barrier(void)
{
    /* Many blocks on several workers: each block needs its own shared copy. */
    enum { BLOCKS = 64, T = 200 };
    int *in = malloc(BLOCKS * T * sizeof *in), *out = calloc(BLOCKS * T, sizeof *out);
    for (int i = 0; i < BLOCKS * T; ++i)
        in[i] = i * 3 + 1;
    void *args[] = {&in, &out};
    for (int dyn = 0; dyn < 2; ++dyn) {
        memset(out, 0, BLOCKS * T * sizeof *out);
        if (dyn)
            CHECK(LAUNCH(reverse_dynamic, 1, d3(BLOCKS, 1, 1), d3(T, 1, 1), args, T * sizeof(int), 0, 4) == 0);
        else
            CHECK(LAUNCH(reverse, 1, d3(BLOCKS, 1, 1), d3(T, 1, 1), args, 0, 0, 4) == 0);
        int ok = 1;
        for (int b = 0; b < BLOCKS; ++b)
            for (int t = 0; t < T; ++t)
                ok &= out[b * T + t] == in[b * T + (T - 1 - t)];
        CHECK(ok);
    }
    free(in);
    free(out);
}

static void test_sync_count(void)
{
    const int T = 70;
    int *out = calloc(5 * T, sizeof *out);
    void *args[] = {&out};
    CHECK(LAUNCH(sync_count, 1, d3(1, 1, 1), d3(7, 5, 2), args, 0, 0, 1) == 0);
    int ok = 1;
    for (int t = 0; t < T; ++t)
        ok &= out[5 * t] == 24 && out[5 * t + 1] == 1 && out[5 * t + 2] == 0 && out[5 * t + 3] == 1 &&
              out[5 * t + 4] == 0;
    CHECK(ok);
    free(out);
}

/* What a shuffle returns, computed independently of the runtime. */
static long long expect_shfl(int kind, unsigned mask, int arg, int width, int t, int type)
{
    const int lane = t & 31, base = t - lane;
    const int start = lane & ~(width - 1), end = start + width - 1;
    int src;
    int valid = 1;
    if (kind == 0)
        src = start + (arg & (width - 1));
    else if (kind == 1)
        src = lane - arg, valid = src >= start;
    else if (kind == 2)
        src = lane + arg, valid = src <= end;
    else
        src = lane ^ arg, valid = src <= end;
    if (!valid || !(mask & (1u << src)))
        src = lane;
    const long long v = 1000 + base + src;
    (void)type;
    return v;
}

/* Whether some lane of `mask` reads a lane inside its segment that `mask` does not name
 * (undefined on a GPU: the launch fails). */
static int shfl_unnamed(int kind, unsigned mask, int arg, int width)
{
    for (int lane = 0; lane < 32; ++lane) {
        if (!(mask & (1u << lane)))
            continue;
        const int start = lane & ~(width - 1), end = start + width - 1;
        int src, valid = 1;
        if (kind == 0)
            src = start + (arg & (width - 1));
        else if (kind == 1)
            src = lane - arg, valid = src >= start;
        else if (kind == 2)
            src = lane + arg, valid = src <= end;
        else
            src = lane ^ arg, valid = src <= end;
        if (valid && !(mask & (1u << src)))
            return 1;
    }
    return 0;
}

static void test_shuffles(void)
{
    const unsigned masks[] = {0xffffffffu, 0x0000ffffu, 0xa5a5a5a5u, 0x00000001u};
    const int widths[] = {32, 16, 8, 4, 2, 1};
    long long *out = calloc(1024, sizeof *out);
    int ok = 1;
    for (int type = 0; type < 6; ++type)
        for (int kind = 0; kind < 4; ++kind)
            for (size_t m = 0; m < sizeof masks / sizeof masks[0]; ++m)
                for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; ++wi) {
                    if (type != 0 && (m != 0 || wi > 1))
                        continue; /* every type with the full mask and two widths */
                    const int width = widths[wi];
                    const int arg = kind == 0 ? 5 : (kind == 3 ? 3 : 2);
                    unsigned mask = masks[m];
                    int kind_ = kind;
                    int width_ = width;
                    void *args[] = {&kind_, &mask, (void *)&arg, &width_, &type, &out};
                    /* 64 threads: two full warps */
                    if (shfl_unnamed(kind, mask, arg, width)) {
                        if (LAUNCH(shfl, 1, d3(1, 1, 1), d3(64, 1, 1), args, 0, 0, 1) == 0 ||
                            strstr(last_error, "which the mask does not name") == NULL) {
                            fprintf(stderr, "  shfl kind %d mask %08x width %d: no error for an unnamed lane\n", kind,
                                    mask, width);
                            ok = 0;
                        }
                        continue;
                    }
                    if (LAUNCH(shfl, 1, d3(1, 1, 1), d3(64, 1, 1), args, 0, 0, 1) != 0) {
                        fprintf(stderr, "  shfl kind %d mask %08x width %d: %s\n", kind, mask, width, last_error);
                        ok = 0;
                        continue;
                    }
                    for (int t = 0; t < 64; ++t) {
                        const long long want = (mask & (1u << (t & 31))) ? expect_shfl(kind, mask, arg, width, t, type)
                                                                         : -1;
                        if (out[t] != want) {
                            fprintf(stderr, "  shfl kind %d mask %08x width %d type %d t %d: %lld != %lld\n", kind,
                                    mask, width, type, t, out[t], want);
                            ok = 0;
                            break;
                        }
                    }
                }
    /* A partial last warp: 40 threads, the second warp has lanes 0-7; its mask is 0xff. */
    {
        int kind = 2, arg = 1, width = 8, type = 0;
        unsigned mask = 0xffu;
        void *args[] = {&kind, &mask, &arg, &width, &type, &out};
        /* threads 0-31 are outside 0xff only for lanes >= 8 */
        CHECK(LAUNCH(shfl, 1, d3(1, 1, 1), d3(40, 1, 1), args, 0, 0, 1) == 0);
        for (int t = 0; t < 40; ++t) {
            const long long want = ((t & 31) < 8) ? expect_shfl(kind, mask, arg, width, t, 0) : -1;
            ok &= out[t] == want;
        }
    }
    CHECK(ok);
    free(out);
}

static void test_votes(void)
{
    const unsigned masks[] = {0xffffffffu, 0x0f0f00ffu, 0x00000004u};
    unsigned *out = calloc(4 * 128, sizeof *out); /* 2 blocks of 64 */
    int ok = 1;
    for (size_t m = 0; m < 3; ++m) {
        unsigned mask = masks[m];
        void *args[] = {&mask, &out};
        CHECK(LAUNCH(vote, 1, d3(2, 1, 1), d3(64, 1, 1), args, 0, 0, 2) == 0);
        unsigned ballot = 0;
        for (int l = 0; l < 32; ++l)
            if ((mask & (1u << l)) && l % 3 == 0)
                ballot |= 1u << l;
        for (int t = 0; t < 128; ++t) {
            const unsigned *r = out + 4 * t;
            if (!(mask & (1u << (t & 31)))) {
                ok &= r[0] == 0xdeadu;
                continue;
            }
            ok &= r[0] == ballot;
            ok &= r[1] == (ballot != 0 ? 2u : 0u);
            ok &= r[2] == (1u + (ballot == mask ? 2u : 0u));
            ok &= r[3] == 7u;
        }
    }
    CHECK(ok);
    free(out);
}

static void test_activemask(void)
{
    unsigned *out = calloc(48, sizeof *out);
    int split = 10;
    void *args[] = {&split, &out};
    CHECK(LAUNCH(activemask, 1, d3(1, 1, 1), d3(48, 1, 1), args, 0, 0, 1) == 0);
    int ok = 1;
    for (int t = 0; t < 48; ++t) {
        const unsigned present = t < 32 ? 0xffffffffu : 0xffffu;
        const unsigned want = (t & 31) < split ? (0x3ffu & present) : (present & ~0x3ffu);
        ok &= out[t] == want;
    }
    CHECK(ok);
    free(out);
}

static void test_reduce_scan(void)
{
    const cunumpy_emu_dim3 shapes[] = {{256, 1, 1}, {100, 1, 1}, {5, 4, 3}, {1, 1, 1}, {33, 1, 1}};
    long long *out = calloc(8 * 1024, sizeof *out); /* 2 blocks of at most 256 */
    int ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        const int n = (int)(shapes[s].x * shapes[s].y * shapes[s].z);
        void *args[] = {&out};
        if (LAUNCH(reduce_scan, 1, d3(2, 1, 1), shapes[s], args, 0, 0, 2) != 0) {
            fprintf(stderr, "  reduce_scan: %s\n", last_error);
            ok = 0;
            continue;
        }
        long long sum = 0, mn = 1 << 30, mx = -(1 << 30), run = 0, sum1 = 0;
        for (int t = 0; t < n; ++t) {
            const int v = (t * 7) % 11 - 3;
            sum += v, sum1 += t + 1;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        for (int bt = 0; bt < 2 * n; ++bt) { /* both blocks */
            const int t = bt % n;
            if (t == 0)
                run = 0;
            const int v = (t * 7) % 11 - 3;
            const long long *r = out + 8 * bt;
            int good = r[0] == sum && r[1] == mn && r[2] == mx && r[3] == run && r[4] == run + v && r[5] == sum1;
            run += v;
            /* sparse warp sum over lanes 0, 5, 10, 31 present in this warp */
            const int warp = t >> 5, lane = t & 31;
            const int in_warp = n - warp * 32 >= 32 ? 32 : n - warp * 32;
            const unsigned present = in_warp >= 32 ? 0xffffffffu : ((1u << in_warp) - 1u);
            const unsigned sparse = 0x80000421u & present;
            if (sparse & (1u << lane)) {
                unsigned ws = 0;
                for (int l = 0; l < 32; ++l)
                    if (sparse & (1u << l))
                        ws += (unsigned)(((warp * 32 + l) * 7) % 11 - 3);
                good &= r[6] == (long long)ws;
            } else {
                good &= r[6] == -99;
            }
            good &= r[7] == lane;
            if (!good) {
                fprintf(stderr, "  reduce_scan shape %zu thread %d wrong\n", s, t);
                ok = 0;
                break;
            }
        }
    }
    CHECK(ok);
    free(out);
}

static void test_block_sum(void)
{
    enum { N = 100000 };
    double *x = malloc(N * sizeof *x);
    double want = 0.0;
    for (int i = 0; i < N; ++i)
        x[i] = (double)(i % 17), want += x[i];
    double sum = 0.0, *sum_ptr = &sum;
    long long n = N;
    void *args[] = {&x, &sum_ptr, &n};
    CHECK(LAUNCH(block_sum, 1, d3((N + 255) / 256, 1, 1), d3(256, 1, 1), args, 0, 0, 2) == 0);
    CHECK(sum == want);
    free(x);
}

static void test_atomics(int fibers)
{
    const unsigned blocks = 500, threads = 128;
    const unsigned long long count = (unsigned long long)blocks * threads;
    unsigned long long total = 0;
    int imax = -1, imin = 1;
    unsigned inc = 0, cas = 0;
    double dsum = 0.0;
    long long lsum = 0;
    void *args[] = {&(unsigned long long *){&total}, &(int *){&imax}, &(int *){&imin}, &(unsigned *){&inc},
                    &(double *){&dsum}, &(long long *){&lsum}, &(unsigned *){&cas}};
    CHECK(LAUNCH(atomics, fibers, d3(blocks, 1, 1), d3(threads, 1, 1), args, 0, 0, 4) == 0);
    CHECK(total == count * (count - 1) / 2);
    CHECK(imax == 63999);
    CHECK(imin == -(int)(63999 % 99991));
    CHECK(inc == count);
    CHECK(dsum == (double)count);
    CHECK(lsum == -(long long)(count * (count - 1) / 2));
    CHECK(cas == count);
}

static void test_stack_reuse(void)
{
    enum { T = 64 };
    int *in = calloc(T, sizeof *in), *out = calloc(T, sizeof *out);
    void *args[] = {&in, &out};
    CHECK(LAUNCH(reverse, 1, d3(1, 1, 1), d3(T, 1, 1), args, 0, 0, 1) == 0);
    char *base = emu_pool.slots[0]->stacks.base;
    CHECK(base != NULL);
    for (int i = 0; i < 20; ++i)
        CHECK(LAUNCH(reverse, 1, d3(1, 1, 1), d3(T, 1, 1), args, 0, 0, 1) == 0);
    CHECK(emu_pool.slots[0]->stacks.base == base); /* the same mapping, not a new one per launch */
    free(in);
    free(out);
#if EMU_TSAN
    return; /* 16 workers of 1024 fibers: more fibers at once than ThreadSanitizer can track */
#endif
    /* Fiber stacks of all workers stay under EMU_MAX_FIBER_STACKS: 1024-thread blocks get at
     * most 16 workers however many are asked for. */
    enum { BIG = 1024, BLOCKS = 20 };
    in = calloc(BIG * BLOCKS, sizeof *in);
    out = calloc(BIG * BLOCKS, sizeof *out);
    for (int i = 0; i < BIG * BLOCKS; ++i)
        in[i] = i;
    void *big_args[] = {&in, &out};
    CHECK(LAUNCH(reverse, 1, d3(BLOCKS, 1, 1), d3(BIG, 1, 1), big_args, 0, 0, 64) == 0);
    CHECK(emu_pool.n_slots <= (int)(EMU_MAX_FIBER_STACKS / BIG));
    CHECK(out[0] == BIG - 1 && out[BIG * BLOCKS - 1] == BIG * (BLOCKS - 1));
    free(in);
    free(out);
}

static void test_headers(void)
{
    enum { N = 50 };
    double u[N];
    unsigned long long keys[N];
    double a_data[N * 2];
    for (int i = 0; i < N; ++i)
        a_data[2 * i] = i, a_data[2 * i + 1] = -1;
    struct {
        double *data;
        long long shape[2], strides[2];
    } view = {a_data, {N, 2}, {2, 1}};
    long long n = N;
    double *up = u;
    unsigned long long *kp = keys;
    void *args[] = {&up, &kp, &view, &n};
    CHECK(LAUNCH(headers, 0, d3(2, 1, 1), d3(32, 1, 1), args, 0, 0, 1) == 0);
    int ok = 1;
    for (int i = 0; i < N; ++i) {
        ok &= u[i] >= 0.0 && u[i] < 1.0;
        ok &= a_data[2 * i + 1] == 2.0 * i;
        /* interleave bits of i (x, even bits) and N-1-i (y, odd bits) */
        unsigned long long want = 0;
        for (int b = 0; b < 16; ++b)
            want |= ((unsigned long long)((i >> b) & 1) << (2 * b)) |
                    ((unsigned long long)(((N - 1 - i) >> b) & 1) << (2 * b + 1));
        ok &= keys[i] == want;
    }
    CHECK(ok);
    CHECK(u[0] != u[1]);
}

static void test_intrinsics(void)
{
    long long o[64] = {0};
    double d[16] = {0};
    unsigned cells[8] = {5, 3, 1, 1, 10, 0, 4, 1};
    long long *op = o;
    double *dp = d;
    unsigned *cp = cells;
    void *args[] = {&op, &dp, &cp};
    CHECK(LAUNCH(intrinsics, 0, d3(1, 1, 1), d3(1, 1, 1), args, 0, 0, 1) == 0);
    const long long want[] = {8, 40, 31, 32, 63, 4, 0, 0x80000000ll, 0x80000000ll, 0x44332211ll, 3, 15,
                              0x3f800000ll, 0x3ff00000ll, 2, 0, 2147483647ll, 0, 3, 1, 8, 1073741824ll, -4, 7, 2,
                              12345, 1, 8, 1, 5, 3, 1, 1, 10, 0, 4, 1, 3, 13};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i)
        if (o[i] != want[i]) {
            fprintf(stderr, "  intrinsic %zu: %lld != %lld\n", i, o[i], want[i]);
            failures++;
        }
    const unsigned want_cells[8] = {9, 2, 9, 2, 8, 7, 11, 2};
    CHECK(memcmp(cells, want_cells, sizeof cells) == 0);
    const double want_d[] = {0.5, 0.25, 1.0, 0.25, 1.0, 0.5, 7.0, 0.5, 7.0, 0.0, 4.75, 1.0};
    for (size_t i = 0; i < sizeof want_d / sizeof want_d[0]; ++i)
        if (fabs(d[i] - want_d[i]) > 1e-12) {
            fprintf(stderr, "  math %zu: %.17g != %.17g\n", i, d[i], want_d[i]);
            failures++;
        }
}

/* ---- errors ------------------------------------------------------------------------------- */

static void expect_error(const char *what, int status, const char *needle1, const char *needle2, double started)
{
    const double took = now_s() - started;
    if (status == 0 || strstr(last_error, needle1) == NULL || (needle2 && strstr(last_error, needle2) == NULL)) {
        fprintf(stderr, "  %s: status %d, message '%s' lacks '%s'/'%s'\n", what, status, last_error, needle1,
                needle2 ? needle2 : "");
        failures++;
    }
    if (took > 5.0) {
        fprintf(stderr, "  %s took %.1f s\n", what, took);
        failures++;
    }
}

static void test_errors(void)
{
    double t0;
    /* __trap in both modes; the lowest failing block is reported whatever the workers do */
    for (int fibers = 0; fibers < 2; ++fibers) {
        int block = 7, thread = 3;
        void *args[] = {&block, &thread};
        t0 = now_s();
        expect_error("trap", LAUNCH(trap_at, fibers, d3(40, 1, 1), d3(16, 1, 1), args, 0, 0, 4),
                     "emulated kernel 'trap_at' failed in block (7, 0, 0), thread (3, 0, 0)", "__trap()", t0);
    }
    {
        int v = 41;
        void *args[] = {&v};
        t0 = now_s();
        expect_error("assert", LAUNCH(assert_fail, 0, d3(1, 1, 1), d3(4, 1, 1), args, 0, 0, 1), "assertion",
                     "v == 42", t0);
        v = 42;
        CHECK(LAUNCH(assert_fail, 1, d3(1, 1, 1), d3(4, 1, 1), args, 0, 0, 1) == 0);
    }
    for (int exiters = 0; exiters <= 62; exiters += 31) {
        void *args[] = {&exiters};
        t0 = now_s();
        expect_error("barrier divergence", LAUNCH(barrier_divergence, 1, d3(3, 1, 1), d3(64, 1, 1), args, 0, 0, 2),
                     "block (0, 0, 0)", "barrier divergence", t0);
    }
    {
        /* exited threads count as arrived: one thread left alive passes both barriers */
        int exiters = 63;
        void *args[] = {&exiters};
        CHECK(LAUNCH(barrier_divergence, 1, d3(3, 1, 1), d3(64, 1, 1), args, 0, 0, 2) == 0);
    }
    t0 = now_s();
    expect_error("deadlock", LAUNCH(deadlock, 1, d3(1, 1, 1), d3(32, 1, 1), NULL, 0, 0, 1), "'deadlock'", "block (0, 0, 0)",
                 t0);
    t0 = now_s();
    expect_error("mask mismatch", LAUNCH(mask_mismatch, 1, d3(2, 1, 1), d3(32, 1, 1), NULL, 0, 0, 2),
                 "inconsistent warp operations", "block (0, 0, 0)", t0);
    t0 = now_s();
    expect_error("absent lanes", LAUNCH(mask_absent, 1, d3(1, 1, 1), d3(20, 1, 1), NULL, 0, 0, 1), "do not exist",
                 NULL, t0);
    t0 = now_s();
    expect_error("exited lane", LAUNCH(mask_exited, 1, d3(1, 1, 1), d3(32, 1, 1), NULL, 0, 0, 1), "exited", NULL, t0);
    /* a collective in loop mode is an error, not undefined behaviour */
    {
        int small_in[4] = {0}, small_out[4] = {0};
        int *pin = small_in, *pout = small_out;
        void *args[] = {&pin, &pout};
        t0 = now_s();
        expect_error("loop-mode barrier", LAUNCH(reverse, 0, d3(1, 1, 1), d3(4, 1, 1), args, 0, 0, 1), "fiber mode",
                     NULL, t0);
    }
    /* bounds-checked view */
    {
        int data[8];
        struct {
            int *data;
            long long shape[1];
        } a = {data, {8}};
        void *args[] = {&a};
        t0 = now_s();
        expect_error("bounds", LAUNCH(bounds, 0, d3(1, 1, 1), d3(8, 1, 1), args, 0, 0, 1), "thread (7, 0, 0)",
                     "index 8 out of bounds for axis 0 with size 8", t0);
    }
    /* launch shape */
    CHECK(LAUNCH(axpy, 0, d3(1, 1, 1), d3(1025, 1, 1), NULL, 0, 0, 1) != 0 && strstr(last_error, "block") != NULL);
    CHECK(LAUNCH(axpy, 0, d3(0, 1, 1), d3(1, 1, 1), NULL, 0, 0, 1) != 0 && strstr(last_error, "grid") != NULL);
}

static void test_checked_faults(void)
{
    for (int fibers = 0; fibers < 2; ++fibers) {
        int *p = NULL;
        int thread = 5;
        void *args[] = {&p, &thread};
        const double t0 = now_s();
        expect_error("null dereference", LAUNCH(null_deref, fibers, d3(4, 1, 1), d3(32, 1, 1), args, 0, 1, 2),
                     "'null_deref' failed in block (0, 0, 0)", "null pointer", t0);
    }
    {
        int buf[32];
        int *p = buf;
        void *args[] = {&p};
        const double t0 = now_s();
        expect_error("stack overflow", LAUNCH(overflow, 1, d3(1, 1, 1), d3(32, 1, 1), args, 0, 1, 1),
                     "stack overflow", NULL, t0);
    }
    /* the runtime still works afterwards, and the previous handlers are back */
    test_axpy();
    struct sigaction now;
    sigaction(SIGSEGV, NULL, &now);
    CHECK(now.sa_sigaction != emu_fault_handler);
}

int main(void)
{
    alarm(120); /* any hang fails the test instead of blocking the suite */
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(cunumpy_emu_abi_version() == CUNUMPY_EMU_ABI_VERSION);
    test_switch();
    test_rounding_mode();
    test_axpy();
    test_builtins(0);
    test_builtins(1);
    test_shared_and_barrier();
    test_sync_count();
    test_shuffles();
    test_votes();
    test_activemask();
    test_reduce_scan();
    test_block_sum();
    test_atomics(0);
    test_atomics(1);
    test_stack_reuse();
    test_headers();
    test_intrinsics();
    test_errors();
    test_checked_faults();
    if (failures) {
        fprintf(stderr, "test_emu: %d failure(s)\n", failures);
        return 1;
    }
    puts("test_emu: all passed");
    return 0;
}
