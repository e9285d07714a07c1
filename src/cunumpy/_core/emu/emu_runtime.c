/* The CPU emulator's launch machinery: the worker pool, the per-block fiber scheduler, the
 * collective operations of the ABI, traps, and checked execution (faults become errors).
 *
 * A launch hands blocks out through an atomic counter to the workers, in chunks of
 * consecutive blocks (emu_take_blocks; the calling thread is worker 0, pool threads the
 * others). A worker runs one block at a time: in loop mode it calls the kernel library's
 * block function once; in fiber mode it runs one fiber per CUDA thread on pooled stacks, all on its own OS thread, switching only when a fiber waits in a
 * collective or finishes. A fiber that waits hands control straight to the next ready fiber;
 * the worker's own context regains control only when no fiber of the block is ready, and
 * then the block is finished, failed, or stuck (an error naming what waits on what). Every
 * collective of a kernel library comes through one entry (emu_api_collective), which records
 * why the fiber waits and picks the next one; the library then switches itself (see the note
 * at the switch in emu_fiber.c). A fiber runs its thread in every block of the launch and
 * waits at its end for the next block. Whoever makes a waiting fiber ready writes its result
 * and state.
 *
 * Errors: the first failing block stops the hand-out (other workers finish the chunks they
 * hold and take no more). Blocks are handed out in increasing order and every block handed
 * out runs to its end, so the error reported, the one of the lowest failing block index, is
 * the same whatever the timing. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* siglongjmp leaves a fiber stack for the worker's: glibc's fortified longjmp would take
 * that for a corrupt jump. */
#undef _FORTIFY_SOURCE

#include "emu_runtime.h"
#include "emu_analysis.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define EMU_MESSAGE 1024
#define EMU_MAX_FIBER_STACKS 16384u
#define EMU_ALTSTACK_BYTES ((size_t)64 * 1024)
#define EMU_MAX_CHUNK 64u /* blocks handed out at once, at most */
#ifndef EMU_PREFETCH_LINES
#define EMU_PREFETCH_LINES 3
#endif

enum { EMU_RUN = 0, EMU_BARRIER, EMU_WARP, EMU_ACTIVEMASK, EMU_DONE };

/* Warp operation codes (shuffle kinds first, matching CUNUMPY_EMU_SHFL_*). */
enum { EMU_OP_SHFL_IDX = 0, EMU_OP_SHFL_UP, EMU_OP_SHFL_DOWN, EMU_OP_SHFL_XOR, EMU_OP_SYNCWARP, EMU_OP_BALLOT };

static const char *const emu_op_names[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                           "__shfl_xor_sync", "__syncwarp", "__ballot_sync/__any_sync/__all_sync"};

/* What a switch into or out of a fiber touches (pub, state, the saved stack pointer) shares
 * the struct's first cache line; one fiber per 128 bytes, 64-byte aligned. */
typedef struct __attribute__((aligned(64))) emu_fiber {
    cunumpy_emu_thread pub; /* first: the worker's `current` points here */
    int state;
    int op;            /* the pending warp operation and its mask (for error reports) */
    unsigned int mask;
    emu_context ctx;
    struct emu_worker *worker;
    const void *site;  /* __activemask call site */
} emu_fiber;

typedef struct emu_group { /* lanes of one warp meeting in one warp operation */
    unsigned int mask, arrived;
    int op;
} emu_group;

/* A warp's lanes' operands live here, not in the fibers: the lane completing an operation
 * reads 32 operands from a few cache lines (it writes the results into the lanes' thread
 * records, whose cache line their switch reads anyway). A lane's slots belong to the one
 * operation it waits in (a lane waits in one at a time). */
typedef struct __attribute__((aligned(64))) emu_warp {
    uint64_t value[CUNUMPY_EMU_WARP_SIZE];  /* shuffle operand, or ballot predicate (0/1) */
    int arg[CUNUMPY_EMU_WARP_SIZE];
    unsigned char width[CUNUMPY_EMU_WARP_SIZE];
    unsigned int present; /* lanes that exist in this block */
    unsigned int live;    /* present and not finished */
    unsigned int activemask_waiting;
    int n_groups;
    emu_group groups[CUNUMPY_EMU_WARP_SIZE];
} emu_warp;

typedef struct emu_launch emu_launch;

typedef struct emu_worker {
    cunumpy_emu_worker pub; /* first: the ABI's view */
    int index;
    int fiber_mode;
    emu_launch *launch;
    emu_context main_ctx;
    emu_fpstate fpstate; /* the OS thread's, restored after every block */
    emu_stack_pool stacks;
    emu_fiber *fibers;
    size_t fibers_cap;
    emu_warp *warps;
    struct emu_fiber **ready;    /* ring of the ready fibers, ready_mask + 1 (a power of two) slots */
    struct emu_fiber **identity; /* fibers 0, 1, ..., n-1: the ready ring after a barrier */
    unsigned int n_threads, ready_head, ready_count, ready_mask, barrier_waiting, done_count;
    unsigned int fibers_parked; /* fibers made in this launch and waiting for the next block */
    int barrier_sum;
    int barrier_site; /* the source line of the __syncthreads() the waiting threads called (0: unknown) */
    size_t stacks_trim; /* the pool holds more stacks than the process may keep: shrink it */
    void *altstack;
    emu_check_worker cw; /* the __shared__ arena and the checks' per-block state */
    uintptr_t stack_lo, stack_hi; /* this OS thread's stack */
    /* current block and error state */
    uint64_t block_linear;
    int failed;
    emu_failure failure;
    char error[EMU_MESSAGE];
    sigjmp_buf jump;
    volatile sig_atomic_t in_kernel;
    volatile int fault_signal;
    volatile int fault_code;
    volatile int fault_write; /* 1 write, 0 read, -1 unknown */
    void *volatile fault_address;
    volatile int jump_announced; /* the sanitizer was told of the jump's stack switch */
    cunumpy_emu_thread fault_thread; /* the faulting thread, copied before the jump (in loop
                                      * mode its struct lives on the stack the jump leaves) */
    int fault_thread_valid;
    uint64_t chunk_done; /* blocks of the current chunk finished (added to the launch's count) */
    /* pool thread */
    pthread_t thread;
    int started;
    unsigned long seen_generation;
} emu_worker;

enum { EMU_CANCEL_NONE = 0, EMU_CANCEL_TIMEOUT, EMU_CANCEL_INTERRUPT };

struct emu_launch {
    const emu_launch_params *params;
    void *const *args;
    uint64_t total_blocks;
    atomic_uint_least64_t next_block;
    atomic_uint_least64_t blocks_done;
    atomic_int stop;
    atomic_int cancel; /* EMU_CANCEL_*: stop at the next check point, or by force (the cancel signal) */
    pthread_mutex_t error_lock;
    int failed;
    emu_failure failure;
    uint64_t error_block;
    char error[EMU_MESSAGE + 256];
    emu_check check;
    uintptr_t text_lo, text_hi; /* the kernel library's code: where a forced stop may jump from */
    size_t tls_size;            /* of the kernel library's thread-local block */
    int workers;
    pthread_t caller;
    struct timespec started;
};

/* ---- messages ---------------------------------------------------------------------------- */

static void emu_block_coords(const emu_worker *w, char *out, size_t size)
{
    (void)snprintf(out, size, "block (%u, %u, %u)", w->pub.block_idx.x, w->pub.block_idx.y, w->pub.block_idx.z);
}

/* Records the failure of the worker's current block; formats "block (...), thread (...): msg". */
static void emu_set_error(emu_worker *w, int with_thread, const char *fmt, ...)
{
    char where[128], body[EMU_MESSAGE - 160];
    emu_block_coords(w, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    const cunumpy_emu_thread *t = w->pub.current;
    if (with_thread && t != NULL)
        (void)snprintf(w->error, sizeof w->error, "%s, thread (%u, %u, %u): %s", where, t->thread_idx.x, t->thread_idx.y,
                       t->thread_idx.z, body);
    else
        (void)snprintf(w->error, sizeof w->error, "%s: %s", where, body);
    w->failed = 1;
    w->failure = EMU_FAIL_ERROR;
}

static void emu_thread_coords(const emu_worker *w, unsigned int linear, char *out, size_t size)
{
    const unsigned int bx = w->pub.block_dim.x, by = w->pub.block_dim.y;
    (void)snprintf(out, size, "(%u, %u, %u)", linear % bx, (linear / bx) % by, linear / (bx * by));
}

/* ---- fiber scheduling -------------------------------------------------------------------- */

static inline void emu_ready_push(emu_worker *w, unsigned int i)
{
    w->ready[(w->ready_head + w->ready_count) & w->ready_mask] = &w->fibers[i];
    w->ready_count++;
}

static inline emu_fiber *emu_ready_pop(emu_worker *w)
{
    emu_fiber *f = w->ready[w->ready_head];
    w->ready_head = (w->ready_head + 1u) & w->ready_mask;
    w->ready_count--;
    return f;
}

/* Leaves the running fiber (which has recorded why it waits, or finished): straight into
 * the next ready fiber, or back to the worker. Returns when this fiber is resumed. */
/* The context to run when the running fiber waits or finishes: the next ready fiber (which
 * becomes the worker's current thread), or the worker's own. */
static inline emu_context *emu_pick_next(emu_worker *w)
{
    emu_context *to = &w->main_ctx;
    const unsigned int count = w->ready_count;
    if (__builtin_expect(count > 0 && !w->failed, 1)) {
        const unsigned int head = w->ready_head, mask = w->ready_mask;
        emu_fiber *const *ring = w->ready;
        emu_fiber *next = ring[head];
        w->ready_head = (head + 1u) & mask;
        w->ready_count = count - 1u;
        w->pub.current = &next->pub;
        to = &next->ctx;
        /* The fibers' stacks do not all fit in the first-level cache (a block's stacks are
         * resumed round robin): fetch the frames the fiber after the next one will pop, and
         * the record of the one after that, while these two switches run. */
        if (count > 2) {
            const char *sp = (const char *)ring[(head + 1u) & mask]->ctx.sp;
            for (int line = 0; line < EMU_PREFETCH_LINES; ++line)
                __builtin_prefetch(sp + (ptrdiff_t)64 * line);
            __builtin_prefetch(ring[(head + 2u) & mask]);
        }
    }
    return to;
}

static EMU_ONE_COPY void emu_fiber_leave(emu_worker *w, emu_fiber *self)
{
    emu_context *to = emu_pick_next(w);
    emu_context_switch(&self->ctx, to, 0); /* the fiber is resumed later: ASan keeps its fake stack */
    /* Not a tail call: the switch must return here, to the one call site every waiting fiber
     * shares, not straight into the different collectives that called this. */
    __asm__ volatile("" ::: "memory");
}

/* Whether a kernel library may switch fibers itself (CUNUMPY_EMU_OP_SWITCH): with the assembly
 * switch of x86-64, whose frame layout the library's switch follows, and without the
 * sanitizers, which must be told of every switch. */
#if EMU_ASM_SWITCH && defined(__x86_64__) && !EMU_ASAN && !EMU_TSAN
#define EMU_LIBRARY_SWITCH 1
#else
#define EMU_LIBRARY_SWITCH 0
#endif

/* The running fiber `self` waits (its state and whatever resumes it are recorded): either the
 * library switches (it asked to and may), or the switch happens here and this returns when
 * the fiber is resumed. Whoever makes a waiting fiber ready again sets its state and result. */
static inline cunumpy_emu_wait emu_wait(emu_worker *w, emu_fiber *self, int library_switch)
{
    if (EMU_LIBRARY_SWITCH && library_switch) {
        emu_context *to = emu_pick_next(w);
        return (cunumpy_emu_wait){&self->ctx.sp, to->sp};
    }
    emu_fiber_leave(w, self);
    return (cunumpy_emu_wait){NULL, NULL};
}

static const cunumpy_emu_wait emu_go_on = {NULL, NULL};

/* Fails the launch from inside a fiber or a loop-mode thread: never returns. */
static void emu_abort_thread(emu_worker *w) __attribute__((noreturn));
static void emu_abort_thread(emu_worker *w)
{
    if (w->fiber_mode) {
        emu_fiber *self = (emu_fiber *)w->pub.current;
        self->state = EMU_DONE;
        emu_context_switch(&self->ctx, &w->main_ctx, 1);
        abort(); /* the worker never resumes a failed fiber */
    }
    siglongjmp(w->jump, 1);
}

static emu_worker *emu_worker_of(cunumpy_emu_worker *pub) { return (emu_worker *)pub; }

/* A check point: a launch being stopped (timeout, Ctrl-C) fails the thread here. */
static void emu_cancelled(emu_worker *w) __attribute__((noinline, cold, noreturn));
static void emu_cancelled(emu_worker *w)
{
    emu_set_error(w, 1, "stopped");
    w->failure = atomic_load(&w->launch->cancel) == EMU_CANCEL_INTERRUPT ? EMU_FAIL_INTERRUPT : EMU_FAIL_TIMEOUT;
    emu_abort_thread(w);
}

static inline void emu_check_cancel(emu_worker *w)
{
    if (__builtin_expect(atomic_load_explicit(&w->launch->cancel, memory_order_relaxed) != 0, 0))
        emu_cancelled(w);
}

static void emu_require_fibers(emu_worker *w, const char *what)
{
    if (!w->fiber_mode) {
        emu_set_error(w, 1, "%s needs fiber mode, but the kernel was launched in loop mode", what);
        emu_abort_thread(w);
    }
}

static void emu_barrier_release(emu_worker *w, const emu_fiber *self);

/* The thread of `self` returned: checks what waits on it, then waits for the next block. An
 * exited thread no longer takes part in the block's barriers (as on the GPUs CUDA supports,
 * Volta and later): when every thread still alive waits at __syncthreads(), the barrier
 * completes (`if (i >= n) return; ... __syncthreads();` works). */
static cunumpy_emu_wait emu_thread_exit(emu_worker *w, emu_fiber *self, int library_switch)
{
    self->state = EMU_DONE;
    w->done_count++;
    const unsigned int lane = self->pub.linear % CUNUMPY_EMU_WARP_SIZE;
    emu_warp *warp = &w->warps[self->pub.linear / CUNUMPY_EMU_WARP_SIZE];
    warp->live &= ~(1u << lane);
    for (int g = 0; g < warp->n_groups; ++g)
        if (warp->groups[g].mask & (1u << lane)) {
            emu_set_error(w, 1,
                          "inconsistent warp operations: %s with mask 0x%08x can never complete, lane %u "
                          "exited without calling it",
                          emu_op_names[warp->groups[g].op], warp->groups[g].mask, lane);
            break;
        }
    if (w->failed) {
        emu_context_switch(&self->ctx, &w->main_ctx, 1);
        abort(); /* the fibers of a failed block are never resumed */
    }
    if (w->barrier_waiting > 0 && w->barrier_waiting + w->done_count == w->n_threads)
        emu_barrier_release(w, NULL);
    return emu_wait(w, self, library_switch);
}

/* A fiber runs its CUDA thread of one block after another: when the thread returns it waits
 * in emu_fiber_leave like a thread at a collective, and the next block resumes it there.
 * Fibers are made once per launch, not per block, and every switch between them, the ones
 * into a thread's start and out of its end included, leaves from and resumes at the one call
 * site in emu_fiber_leave (the return-stack note at the switch says why that matters). */
static void emu_fiber_entry(void *arg)
{
    emu_fiber *self = (emu_fiber *)arg;
    emu_worker *w = self->worker;
    for (;;) {
        /* The prelude's thread functions never return (they wait in CUNUMPY_EMU_OP_EXIT at
         * the end of each block); one that does is finished here. */
        w->launch->params->thread_fn(w->launch->args);
        (void)emu_thread_exit(w, self, 0);
    }
}

/* The scheduler's view when no fiber is ready: releases lanes waiting in __activemask (grouped
 * by call site) and says whether any fiber became ready. */
static int emu_release_activemask(emu_worker *w)
{
    int released = 0;
    const unsigned int n_warps = (w->n_threads + CUNUMPY_EMU_WARP_SIZE - 1) / CUNUMPY_EMU_WARP_SIZE;
    for (unsigned int wi = 0; wi < n_warps; ++wi) {
        emu_warp *warp = &w->warps[wi];
        while (warp->activemask_waiting != 0u) {
            const int first = __builtin_ctz(warp->activemask_waiting);
            const void *site = w->fibers[wi * CUNUMPY_EMU_WARP_SIZE + (unsigned int)first].site;
            unsigned int group = 0;
            for (unsigned int m = warp->activemask_waiting; m != 0u; m &= m - 1u) {
                const unsigned int lane = (unsigned int)__builtin_ctz(m);
                if (w->fibers[wi * CUNUMPY_EMU_WARP_SIZE + lane].site == site)
                    group |= 1u << lane;
            }
            for (unsigned int m = group; m != 0u; m &= m - 1u) {
                const unsigned int i = wi * CUNUMPY_EMU_WARP_SIZE + (unsigned int)__builtin_ctz(m);
                w->fibers[i].pub.result = group;
                w->fibers[i].state = EMU_RUN;
                emu_ready_push(w, i);
            }
            warp->activemask_waiting &= ~group;
            released = 1;
        }
    }
    return released;
}

/* No fiber can run and some have not finished: say what they wait for. */
static void emu_report_stuck(emu_worker *w)
{
    unsigned int at_barrier = 0, in_warp = 0, done = 0, first_warp = 0, first_barrier = 0;
    int have_warp = 0, have_barrier = 0;
    for (unsigned int i = 0; i < w->n_threads; ++i) {
        const emu_fiber *f = &w->fibers[i];
        if (f->state == EMU_BARRIER) {
            if (!have_barrier)
                first_barrier = i;
            have_barrier = 1;
            at_barrier++;
        } else if (f->state == EMU_WARP) {
            if (!have_warp)
                first_warp = i;
            have_warp = 1;
            in_warp++;
        } else if (f->state == EMU_DONE) {
            done++;
        }
    }
    char coords[64];
    w->pub.current = NULL;
    if (have_warp) {
        const emu_fiber *f = &w->fibers[first_warp];
        emu_thread_coords(w, first_warp, coords, sizeof coords);
        emu_set_error(w, 0,
                      "inconsistent warp operations or barriers: %u thread(s) wait in warp operations that cannot "
                      "complete (thread %s waits in %s with mask 0x%08x), %u at __syncthreads(), %u exited",
                      in_warp, coords, emu_op_names[f->op], f->mask, at_barrier, done);
    } else {
        emu_thread_coords(w, have_barrier ? first_barrier : 0, coords, sizeof coords);
        emu_set_error(w, 0,
                      "barrier divergence: %u of %u thread(s) wait at __syncthreads() (thread %s first) and "
                      "%u exited without reaching it",
                      at_barrier, w->n_threads, coords, done);
    }
}

static int emu_prepare_fibers(emu_worker *w, unsigned int n)
{
    if (w->fibers_cap < n) {
        for (unsigned int i = 0; i < w->fibers_cap; ++i)
            emu_context_forget(&w->fibers[i].ctx);
        free(w->fibers);
        free(w->warps);
        free(w->ready);
        free(w->identity);
        unsigned int ring = 1;
        while (ring < n)
            ring <<= 1;
        const size_t n_warps = (n + CUNUMPY_EMU_WARP_SIZE - 1) / CUNUMPY_EMU_WARP_SIZE;
        w->fibers = aligned_alloc(64, n * sizeof *w->fibers);
        w->warps = aligned_alloc(64, n_warps * sizeof *w->warps);
        w->ready = calloc(ring, sizeof *w->ready); /* NOLINT(bugprone-sizeof-expression): fiber pointers */
        w->identity = calloc(n, sizeof *w->identity); /* NOLINT(bugprone-sizeof-expression): fiber pointers */
        w->fibers_cap = 0;
        w->ready_mask = 0;
        if (w->fibers == NULL || w->warps == NULL || w->ready == NULL || w->identity == NULL)
            return -1;
        memset(w->fibers, 0, n * sizeof *w->fibers);
        memset(w->warps, 0, n_warps * sizeof *w->warps);
        for (unsigned int i = 0; i < n; ++i)
            w->identity[i] = &w->fibers[i];
        w->fibers_cap = n;
        w->ready_mask = ring - 1;
    }
    if (emu_stack_pool_reserve(&w->stacks, n) != 0)
        return -1;
    return 0;
}

/* Runs every thread of the worker's current block as fibers. 0, or -1 with w->error set. */
static int emu_run_block_fibers(emu_worker *w)
{
    const unsigned int n = w->n_threads;
    const unsigned int bx = w->pub.block_dim.x, by = w->pub.block_dim.y;
    /* Fibers parked at the end of the previous block go on. Not with the ucontext fallback:
     * swapcontext restores a fiber's own floating-point state, which would carry a change
     * into the next block (fresh contexts start from the worker's). */
    if (EMU_ASM_SWITCH && w->fibers_parked == n) {
        for (unsigned int i = 0; i < n; ++i)
            w->fibers[i].state = EMU_RUN;
    } else {
        for (unsigned int i = 0; i < n; ++i) {
            emu_fiber *f = &w->fibers[i];
            f->pub.thread_idx.x = i % bx;
            f->pub.thread_idx.y = (i / bx) % by;
            f->pub.thread_idx.z = i / (bx * by);
            f->pub.linear = i;
            f->worker = w;
            f->state = EMU_RUN;
            f->ctx.ucontext =
                w->stacks.ucontexts != NULL ? (char *)w->stacks.ucontexts + i * sizeof(ucontext_t) : NULL;
            /* Stacks are a power-of-two stride apart, so their tops would all fall into the same
             * cache sets and evict each other at every switch: start each one a few cache lines
             * lower than the previous (cache colouring; costs at most 16 KiB of each stack). */
            const size_t colour = (size_t)(i % 256u) * 64u;
            emu_context_make(&f->ctx, emu_stack_low(&w->stacks, i), w->stacks.stack_size - colour, emu_fiber_entry,
                             f);
        }
    }
    w->fibers_parked = 0;
    memcpy(w->ready, w->identity, n * sizeof *w->ready); /* NOLINT(bugprone-sizeof-expression): fiber pointers */
    const unsigned int n_warps = (n + CUNUMPY_EMU_WARP_SIZE - 1) / CUNUMPY_EMU_WARP_SIZE;
    for (unsigned int wi = 0; wi < n_warps; ++wi) {
        const unsigned int left = n - wi * CUNUMPY_EMU_WARP_SIZE;
        const unsigned int present = left >= 32 ? 0xffffffffu : ((1u << left) - 1u);
        w->warps[wi].present = present;
        w->warps[wi].live = present;
        w->warps[wi].activemask_waiting = 0;
        w->warps[wi].n_groups = 0;
    }
    w->ready_head = 0;
    w->ready_count = n;
    w->barrier_waiting = 0;
    w->barrier_sum = 0;
    w->done_count = 0;
    for (;;) {
        if (w->ready_count > 0) {
            emu_fiber *next = emu_ready_pop(w);
            w->pub.current = &next->pub;
            emu_context_switch(&w->main_ctx, &next->ctx, 0);
        }
        if (w->failed)
            return -1;
        if (w->done_count == n) {
            w->fibers_parked = n;
            return 0;
        }
        if (w->ready_count == 0 && !emu_release_activemask(w)) {
            emu_report_stuck(w);
            return -1;
        }
    }
}

/* ---- collectives (the ABI's api table) --------------------------------------------------- */

/* A barrier that cannot be passed: loop mode, a stopped launch. */
static void emu_barrier_refused(emu_worker *w) __attribute__((noinline, cold));
static void emu_barrier_refused(emu_worker *w)
{
    emu_require_fibers(w, "__syncthreads()");
    emu_check_cancel(w);
    emu_set_error(w, 1, "__syncthreads() refused");
    emu_abort_thread(w);
}

/* Threads alive at two different __syncthreads() of the kernel at once: divergence, even where
 * a GPU's hardware barrier would let it pass (CUDA leaves it undefined). */
static void emu_barrier_diverged(emu_worker *w, int site) __attribute__((noinline, cold, noreturn));
static void emu_barrier_diverged(emu_worker *w, int site)
{
    unsigned int first = 0;
    for (unsigned int i = 0; i < w->n_threads; ++i)
        if (w->fibers[i].state == EMU_BARRIER) {
            first = i;
            break;
        }
    char coords[64];
    emu_thread_coords(w, first, coords, sizeof coords);
    emu_set_error(w, 1,
                  "barrier divergence: this thread reached the __syncthreads() of line %d while %u thread(s) of the "
                  "block (thread %s first) wait at the __syncthreads() of line %d",
                  site, w->barrier_waiting, coords, w->barrier_site);
    emu_abort_thread(w);
}

/* Completes the barrier the block's live threads wait at, some threads having exited: every
 * waiting fiber but `self` (the one that goes on, or NULL) joins the ready ring in index order. */
static void emu_barrier_release(emu_worker *w, const emu_fiber *self)
{
    const int sum = w->barrier_sum;
    w->cw.block_epoch++; /* racecheck: accesses before and after are ordered */
    w->barrier_waiting = 0;
    w->barrier_sum = 0;
    w->barrier_site = 0;
    for (unsigned int i = 0; i < w->n_threads; ++i) {
        emu_fiber *f = &w->fibers[i];
        if (f == self) {
            f->pub.result = (uint64_t)sum;
        } else if (f->state == EMU_BARRIER) {
            f->state = EMU_RUN;
            f->pub.result = (uint64_t)sum;
            emu_ready_push(w, i);
        }
    }
}

static inline __attribute__((always_inline)) cunumpy_emu_wait emu_barrier(cunumpy_emu_worker *pub, int predicate,
                                                                           int site, int library_switch)
{
    emu_worker *w = emu_worker_of(pub);
    /* one test for the cases that fail */
    if (__builtin_expect(!w->fiber_mode | (atomic_load_explicit(&w->launch->cancel, memory_order_relaxed) != 0), 0))
        emu_barrier_refused(w);
    emu_fiber *self = (emu_fiber *)pub->current;
    if (w->barrier_waiting == 0)
        w->barrier_site = site;
    else if (__builtin_expect(site != w->barrier_site && site != 0 && w->barrier_site != 0, 0))
        emu_barrier_diverged(w, site);
    w->barrier_sum += predicate != 0;
    const unsigned int waiting = ++w->barrier_waiting;
    if (waiting == w->n_threads) {
        /* Every thread of the block waits here, so none is ready and none waits elsewhere:
         * the ready ring becomes all threads in index order but this one, which goes on. */
        const int sum = w->barrier_sum;
        const unsigned int n = w->n_threads, me = self->pub.linear;
        w->cw.block_epoch++; /* racecheck: accesses before and after are ordered */
        w->barrier_waiting = 0;
        w->barrier_sum = 0;
        emu_fiber *const fibers = w->fibers;
        for (unsigned int i = 0; i < n; ++i) {
            fibers[i].state = EMU_RUN;
            fibers[i].pub.result = (uint64_t)sum;
        }
        memcpy(w->ready, w->identity, (n - 1) * sizeof *w->ready); /* NOLINT(bugprone-sizeof-expression): fiber pointers */
        if (me != n - 1)
            w->ready[me] = w->identity[n - 1];
        w->ready_head = 0;
        w->ready_count = n - 1;
        return emu_go_on;
    }
    if (__builtin_expect(waiting + w->done_count == w->n_threads, 0)) {
        /* the others alive wait here, and the rest exited: they count as arrived */
        emu_barrier_release(w, self);
        return emu_go_on;
    }
    self->state = EMU_BARRIER;
    return emu_wait(w, self, library_switch);
}

static cunumpy_emu_wait emu_api_collective(cunumpy_emu_worker *pub, int op, unsigned int mask, uint64_t value,
                                           int arg, int width);

static int emu_api_syncthreads_count(cunumpy_emu_worker *pub, int predicate)
{
    (void)emu_api_collective(pub, CUNUMPY_EMU_OP_BARRIER, 0, predicate != 0, 0, 0);
    return (int)pub->current->result;
}

static void emu_api_syncthreads(cunumpy_emu_worker *pub) { (void)emu_api_syncthreads_count(pub, 0); }

/* Results of a completed shuffle group for every lane of `mask`, from the lanes' operands: a
 * lane whose source lane is outside its segment gets its own value (as on a GPU). A source
 * lane inside the segment that `mask` does not name is undefined on a GPU: the lane gets its
 * own value and the function returns the first such lane (its source in bits 8 and up), or -1.
 * One loop per kind, so that the loop body has no branch on the kind. */
#define EMU_SHUFFLE_LOOP(SOURCE_AND_VALID)                                                                             \
    for (unsigned int m = mask; m != 0u; m &= m - 1u) {                                                                \
        const unsigned int lane = (unsigned int)__builtin_ctz(m);                                                      \
        const unsigned int width = warp->width[lane];                                                                  \
        const unsigned int seg_start = lane & ~(width - 1u);                                                           \
        const unsigned int a = (unsigned int)warp->arg[lane];                                                          \
        unsigned int src;                                                                                              \
        int valid;                                                                                                     \
        SOURCE_AND_VALID;                                                                                              \
        const unsigned int named = valid ? (mask >> src) & 1u : 1u;                                                    \
        out[lane].pub.result = valid && named ? warp->value[src] : warp->value[lane];                                  \
        out[lane].state = EMU_RUN;                                                                                     \
        if (__builtin_expect(!named, 0) && bad < 0)                                                                    \
            bad = (int)(lane | (src << 8));                                                                            \
    }

/* ... written into the lanes' thread records (`out`: the warp's fibers), which are released. */
static int emu_shuffle_results(emu_warp *warp, int op, unsigned int mask, emu_fiber *out)
{
    int bad = -1;
    switch (op) {
    case EMU_OP_SHFL_IDX:
        EMU_SHUFFLE_LOOP(src = seg_start | (a & (width - 1u)); valid = 1);
        break;
    case EMU_OP_SHFL_UP:
        EMU_SHUFFLE_LOOP(src = lane - a; valid = a <= lane && src >= seg_start);
        break;
    case EMU_OP_SHFL_DOWN:
        EMU_SHUFFLE_LOOP(src = lane + a; valid = a <= 31u && src <= seg_start + width - 1u);
        break;
    default: /* xor */
        EMU_SHUFFLE_LOOP(src = lane ^ (a & 31u); valid = src <= seg_start + width - 1u);
        break;
    }
    return bad;
}
#undef EMU_SHUFFLE_LOOP

/* A shuffle whose lane reads a lane its mask does not name: undefined on a GPU. */
static void emu_shuffle_unnamed(emu_worker *w, int op, unsigned int mask, int bad) __attribute__((noinline, cold, noreturn));
static void emu_shuffle_unnamed(emu_worker *w, int op, unsigned int mask, int bad)
{
    const emu_fiber *self = (const emu_fiber *)w->pub.current;
    const unsigned int lane = (unsigned int)bad & 0xffu, src = (unsigned int)bad >> 8;
    const unsigned int warp = self->pub.linear / CUNUMPY_EMU_WARP_SIZE;
    char coords[64];
    emu_thread_coords(w, warp * CUNUMPY_EMU_WARP_SIZE + lane, coords, sizeof coords);
    emu_set_error(w, 0,
                  "%s with mask 0x%08x: lane %u (thread %s) reads lane %u, which the mask does not name; the value "
                  "is undefined on a GPU (name every lane read in the mask, or keep the source inside it)",
                  emu_op_names[op], mask, lane, coords, src);
    emu_abort_thread(w);
}

/* The checks of a warp operation, in the order their errors are reported; called when the
 * fast test in emu_warp_op failed, so one of them fails the launch. */
static void emu_warp_op_invalid(emu_worker *w, int op, unsigned int mask, int width, unsigned int lane,
                                unsigned int warp_index) __attribute__((noinline, cold));
static void emu_warp_op_invalid(emu_worker *w, int op, unsigned int mask, int width, unsigned int lane,
                                unsigned int warp_index)
{
    const unsigned int bit = 1u << lane;
    const emu_warp *warp = &w->warps[warp_index];
    if (!(mask & bit)) {
        emu_set_error(w, 1, "%s called with mask 0x%08x, which does not name the calling lane %u", emu_op_names[op],
                      mask, lane);
    } else if (mask & ~warp->present) {
        emu_set_error(w, 1, "%s called with mask 0x%08x, which names lanes that do not exist (warp %u has lanes 0x%08x)",
                      emu_op_names[op], mask, warp_index, warp->present);
    } else if (mask & ~warp->live) {
        emu_set_error(w, 1,
                      "inconsistent warp operations: %s called with mask 0x%08x, which names lanes that have "
                      "exited (0x%08x)",
                      emu_op_names[op], mask, mask & ~warp->live);
    } else {
        emu_set_error(w, 1, "%s called with width %d; it must be a power of two from 1 to 32", emu_op_names[op],
                      width);
    }
    emu_abort_thread(w);
}

static inline __attribute__((always_inline)) cunumpy_emu_wait emu_warp_op(cunumpy_emu_worker *pub, int op,
                                                                           unsigned int mask, uint64_t value,
                                                                           int arg, int width, int library_switch)
{
    emu_worker *w = emu_worker_of(pub);
    if (__builtin_expect(!w->fiber_mode | (atomic_load_explicit(&w->launch->cancel, memory_order_relaxed) != 0), 0)) {
        emu_require_fibers(w, emu_op_names[op]);
        emu_check_cancel(w);
    }
    emu_fiber *self = (emu_fiber *)pub->current;
    const unsigned int lane = self->pub.linear % CUNUMPY_EMU_WARP_SIZE;
    const unsigned int warp_index = self->pub.linear / CUNUMPY_EMU_WARP_SIZE;
    const unsigned int bit = 1u << lane;
    emu_warp *warp = &w->warps[warp_index];
    /* One test for the valid case (live lanes are present; syncwarp and ballot pass 32). */
    if (__builtin_expect(!(mask & bit) || (mask & ~warp->live) || (unsigned int)(width - 1) > 31u ||
                             (width & (width - 1)) != 0,
                         0))
        emu_warp_op_invalid(w, op, mask, width, lane, warp_index);
    warp->value[lane] = value;
    warp->arg[lane] = arg;
    warp->width[lane] = (unsigned char)width;
    if (mask == bit) { /* alone: nothing to wait for */
        if (op == EMU_OP_BALLOT) {
            self->pub.result = value ? bit : 0u;
        } else if (op == EMU_OP_SYNCWARP) {
            self->pub.result = 0;
        } else if (__builtin_expect(emu_shuffle_results(warp, op, mask, self - lane) >= 0, 0)) {
            emu_shuffle_unnamed(w, op, mask, emu_shuffle_results(warp, op, mask, self - lane));
        }
        return emu_go_on;
    }
    /* Join the lanes already waiting in the same operation with the same mask. A lane named
     * by another group may first take part in this one (CUDA allows it: a sparse shuffle
     * among some lanes before a full-warp one), so a mismatch is only certain when a group
     * can never complete: a lane it names exits, or the block stalls (emu_report_stuck). */
    emu_group *group = NULL;
    for (int g = 0; g < warp->n_groups; ++g) {
        emu_group *candidate = &warp->groups[g];
        if (candidate->mask == mask && candidate->op == op && !(candidate->arrived & bit)) {
            group = candidate;
            break;
        }
    }
    if (group == NULL) {
        group = &warp->groups[warp->n_groups++];
        group->mask = mask;
        group->arrived = 0;
        group->op = op;
    }
    group->arrived |= bit;
    if (group->arrived != mask) {
        self->op = op;
        self->mask = mask;
        self->state = EMU_WARP;
        return emu_wait(w, self, library_switch);
    }
    /* Everyone is here: this lane computes every lane's result, then releases the others. */
    emu_fiber *const base = self - lane;
    if (op == EMU_OP_BALLOT || op == EMU_OP_SYNCWARP) {
        unsigned int votes = 0;
        if (op == EMU_OP_BALLOT) {
            for (unsigned int m = mask; m != 0u; m &= m - 1u) {
                const unsigned int l = (unsigned int)__builtin_ctz(m);
                votes |= (unsigned int)warp->value[l] << l;
            }
        } else {
            w->cw.warp_gen[warp_index & 31u]++; /* racecheck: the lanes' accesses are ordered */
        }
        for (unsigned int m = mask; m != 0u; m &= m - 1u) {
            const unsigned int l = (unsigned int)__builtin_ctz(m);
            base[l].pub.result = votes;
            base[l].state = EMU_RUN;
        }
    } else {
        const int bad = emu_shuffle_results(warp, op, mask, base);
        if (__builtin_expect(bad >= 0, 0))
            emu_shuffle_unnamed(w, op, mask, bad);
    }
    /* The others go to the front of the ready ring, in lane order: the warp's next operation
     * then runs while its 32 fibers' stacks are still in the cache, instead of after every
     * other warp's. */
    const unsigned int ring_mask = w->ready_mask;
    emu_fiber **const ring = w->ready;
    unsigned int head = w->ready_head;
    const unsigned int others = mask & ~bit;
    for (unsigned int m = others; m != 0u; m &= m - 1u)
        head = (head - 1u) & ring_mask; /* room for them all */
    w->ready_head = head;
    w->ready_count += (unsigned int)__builtin_popcount(others);
    for (unsigned int m = others; m != 0u; m &= m - 1u) {
        ring[head] = base + __builtin_ctz(m);
        head = (head + 1u) & ring_mask;
    }
    *group = warp->groups[--warp->n_groups];
    return emu_go_on;
}

static void emu_api_syncwarp(cunumpy_emu_worker *pub, unsigned int mask)
{
    (void)emu_api_collective(pub, EMU_OP_SYNCWARP, mask, 0, 0, 32);
}

static uint64_t emu_api_shfl(cunumpy_emu_worker *pub, int kind, unsigned int mask, uint64_t value, int arg, int width)
{
    if (kind < EMU_OP_SHFL_IDX || kind > EMU_OP_SHFL_XOR) {
        emu_worker *w = emu_worker_of(pub);
        emu_set_error(w, 1, "unknown shuffle kind %d", kind);
        emu_abort_thread(w);
    }
    (void)emu_api_collective(pub, kind, mask, value, arg, width);
    return pub->current->result;
}

static unsigned int emu_api_ballot(cunumpy_emu_worker *pub, unsigned int mask, int predicate)
{
    (void)emu_api_collective(pub, EMU_OP_BALLOT, mask, predicate != 0, 0, 32);
    return (unsigned int)pub->current->result;
}

/* The ABI's collective: every operation in one entry, so that the kernel library's calls of
 * it (and the fibers waiting in them) share one call site in the runtime. */
static cunumpy_emu_wait emu_api_collective(cunumpy_emu_worker *pub, int op, unsigned int mask, uint64_t value,
                                           int arg, int width)
{
    const int library_switch = (op & CUNUMPY_EMU_OP_SWITCH) != 0;
    op &= ~CUNUMPY_EMU_OP_SWITCH;
    if (op == CUNUMPY_EMU_OP_BARRIER)
        return emu_barrier(pub, value != 0, arg, library_switch);
    if (op >= EMU_OP_SHFL_IDX && op <= EMU_OP_BALLOT)
        return emu_warp_op(pub, op, mask, op == EMU_OP_BALLOT ? value != 0 : value, arg, width, library_switch);
    emu_worker *w = emu_worker_of(pub);
    if (op == CUNUMPY_EMU_OP_EXIT && w->fiber_mode) {
        if (w->launch->params->analysis != NULL)
            emu_analysis_exit(w->launch->params->analysis, pub->current->linear);
        return emu_thread_exit(w, (emu_fiber *)pub->current, library_switch);
    }
    emu_set_error(w, 1, "unknown collective operation %d", op);
    emu_abort_thread(w);
}

static unsigned int __attribute__((noinline)) emu_api_activemask(cunumpy_emu_worker *pub)
{
    const void *site = __builtin_return_address(0);
    emu_worker *w = emu_worker_of(pub);
    emu_require_fibers(w, "__activemask()");
    emu_fiber *self = (emu_fiber *)pub->current;
    const unsigned int lane = self->pub.linear % CUNUMPY_EMU_WARP_SIZE;
    emu_warp *warp = &w->warps[self->pub.linear / CUNUMPY_EMU_WARP_SIZE];
    self->site = site;
    self->state = EMU_ACTIVEMASK;
    warp->activemask_waiting |= 1u << lane;
    emu_fiber_leave(w, self);
    return (unsigned int)self->pub.result;
}

static void emu_api_trap(cunumpy_emu_worker *pub, const char *message)
{
    emu_worker *w = emu_worker_of(pub);
    emu_set_error(w, 1, "%s", message != NULL ? message : "trap");
    /* the prelude's division check (checks.h) reports what would be SIGFPE: a fault */
    if (message != NULL && strncmp(message, "integer division by zero", 24) == 0)
        w->failure = EMU_FAIL_FAULT;
    emu_abort_thread(w);
}

/* ---- memory checks (the ABI's side of emu_check.c) --------------------------------------- */

static int emu_pool_arenas(emu_check_worker **out, int max);

static size_t emu_api_shared_register(cunumpy_emu_worker *pub, size_t size, size_t align, size_t itemsize,
                                      const char *name)
{
    emu_worker *w = emu_worker_of(pub);
    emu_check_worker *arenas[EMU_MAX_WORKERS];
    const int n = emu_pool_arenas(arenas, EMU_MAX_WORKERS);
    char message[300];
    const size_t offset = emu_shared_register(w->launch->check.layout, size, align, itemsize, name, arenas, n, message,
                                              sizeof message);
    if (offset == (size_t)-1) {
        emu_set_error(w, 1, "%s", message);
        emu_abort_thread(w);
    }
    return offset;
}

/* Fails the running thread with a memcheck error for an access at `addr`. */
static void emu_memcheck_fail(emu_worker *w, const char *text, const void *pc) __attribute__((noreturn));
static void emu_memcheck_fail(emu_worker *w, const char *text, const void *pc)
{
    char where[320];
    emu_format_pc(pc, where, sizeof where);
    const int shadow = strstr(text, "inside the memory checks' shadow") != NULL; /* a wild pointer: a fault */
    emu_set_error(w, 1, "%s%s at %s", shadow ? "" : "memcheck: ", text, where);
    w->failure = shadow ? EMU_FAIL_FAULT : EMU_FAIL_MEMCHECK;
    emu_abort_thread(w);
}

static void emu_api_bad_access(cunumpy_emu_worker *pub, const void *addr, size_t size, int kind, const void *pc)
{
    emu_worker *w = emu_worker_of(pub);
    if (!w->in_kernel || w->launch == NULL)
        return; /* instrumented code run outside a launch's kernel code (the report may return) */
    char text[700];
    if (!emu_check_describe(&w->launch->check, &w->cw, (uintptr_t)addr, size, kind, text, sizeof text))
        (void)snprintf(text, sizeof text, "invalid %s of %zu bytes at address %p",
                       (kind & CUNUMPY_EMU_ACCESS_WRITE) ? "write" : "read", size, addr);
    emu_memcheck_fail(w, text, pc);
}

static void emu_api_access(cunumpy_emu_worker *pub, const void *addr, size_t size, int kind, const void *pc)
{
    emu_worker *w = emu_worker_of(pub);
    if (__builtin_expect(!w->in_kernel || w->launch == NULL, 0))
        return; /* not a kernel's access (a library constructor, say) */
    /* A check point: a spinning loop spends its time here, in the runtime, where the cancel
     * signal does not stop it (it stops only the kernel library's own code). */
    emu_check_cancel(w);
    char text[700];
    emu_check *c = &w->launch->check;
    emu_analysis *an = w->launch->params->analysis;
    if (__builtin_expect(an != NULL, 0)) {
        if (pub->current != NULL)
            (void)emu_analysis_event(an, c, &w->cw, pub->current->linear, w->fiber_mode, (uintptr_t)addr, size, kind,
                                     pc);
        if (kind & CUNUMPY_EMU_ACCESS_EVENTS)
            return; /* a basic block, a barrier, a comparison: no memory to check */
    }
    const int fine = c->racecheck ? emu_check_access(c, &w->cw, pub->current, (uintptr_t)addr, size, kind, pc, text,
                                                     sizeof text)
                                  : emu_check_access_plain(c, &w->cw, pub->current, (uintptr_t)addr, size, kind, pc,
                                                           text, sizeof text);
    if (__builtin_expect(fine == 0, 1))
        return;
    emu_memcheck_fail(w, text, pc);
}

static void emu_api_fence(cunumpy_emu_worker *pub)
{
    emu_worker *w = emu_worker_of(pub);
    if (w->launch != NULL)
        emu_check_fence(&w->launch->check, &w->cw);
}

static const cunumpy_emu_api emu_api = {
    CUNUMPY_EMU_ABI_VERSION, emu_api_syncthreads, emu_api_syncthreads_count, emu_api_syncwarp,  emu_api_shfl,
    emu_api_ballot,          emu_api_activemask,  emu_api_trap,           emu_api_shared_register,
    emu_api_bad_access,      emu_api_access,      emu_api_fence,           emu_api_collective,
};

/* ---- faults, timeouts and interrupts ------------------------------------------------------
 * Every launch runs with handlers for the faults a kernel can raise (SIGSEGV, SIGBUS, SIGFPE)
 * and for the cancel signal; each worker has an alternate signal stack (a stack overflow
 * faults on the fiber's own stack). A fault inside a kernel jumps back to the worker, which
 * fails the block with a message; a fault elsewhere goes to the handler that was there before.
 * A stopped launch (timeout, Ctrl-C) fails its threads at the next check point (between blocks,
 * at every collective); a thread that reaches none (a spinning loop) is sent the cancel signal,
 * whose handler leaves the kernel when the thread is executing the kernel library's own code
 * (not, say, inside printf, where a jump could leave a lock held: it is signalled again). */

#define EMU_CANCEL_SIGNAL SIGURG
#define EMU_SIGNAL_CANCEL (-1)

static _Thread_local emu_worker *emu_tls_worker;
static struct sigaction emu_previous_segv, emu_previous_bus, emu_previous_fpe, emu_previous_cancel;
/* The signals that stop a launch of the main thread when Python handles them (a Python handler
 * runs only between bytecodes, so it would run when the launch ends): Ctrl-C, and a handler of
 * SIGALRM (signal.alarm) or SIGTERM that raises. The launch stops, then the handler runs. */
static const int emu_interrupt_signals[3] = {SIGINT, SIGALRM, SIGTERM};
static struct sigaction emu_previous_interrupt[3];
static int emu_interrupt_installed[3];
static volatile sig_atomic_t emu_interrupt_signal; /* the signal that stopped the last launch */
static _Atomic(emu_launch *) emu_interrupt_launch; /* the launch SIGINT stops */

static uintptr_t emu_context_pc(void *context)
{
#if defined(__x86_64__) && defined(__linux__)
    return context ? (uintptr_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP] : 0;
#elif defined(__aarch64__) && defined(__linux__)
    return context ? (uintptr_t)((ucontext_t *)context)->uc_mcontext.pc : 0;
#else
    (void)context;
    return 0;
#endif
}

/* 1 for a write, 0 for a read, -1 unknown (x86-64 page faults say which). */
static int emu_context_write(int sig, void *context)
{
#if defined(__x86_64__) && defined(__linux__)
    if (context != NULL && sig == SIGSEGV)
        return (((ucontext_t *)context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)context;
#endif
    (void)sig;
    return -1;
}

static void emu_chain(const struct sigaction *previous, int sig, siginfo_t *info, void *context)
{
    if (previous->sa_flags & SA_SIGINFO) {
        if (previous->sa_sigaction != NULL)
            previous->sa_sigaction(sig, info, context);
    } else if (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN) {
        previous->sa_handler(sig);
    } else if (previous->sa_handler == SIG_DFL && sig != EMU_CANCEL_SIGNAL) {
        (void)signal(sig, SIG_DFL);
        if (info == NULL || info->si_code <= 0)
            (void)raise(sig); /* sent, not raised by a fault: returning would not repeat it */
        /* a fault: returning repeats the faulting access, now with the default action */
    }
}

/* Leaves the kernel for the worker's jump buffer (a fault, or a forced stop). */
static void emu_leave_kernel(emu_worker *w, int sig, siginfo_t *info, void *context)
{
    w->in_kernel = 0;
    w->fault_signal = sig;
    w->fault_address = info != NULL ? info->si_addr : NULL;
    w->fault_code = info != NULL ? info->si_code : 0;
    w->fault_write = emu_context_write(sig, context);
    w->fault_thread_valid = w->pub.current != NULL;
    if (w->fault_thread_valid)
        w->fault_thread = *w->pub.current;
    /* the jump buffer is the worker's own context's; in loop mode the jump stays on its stack */
    w->jump_announced = w->fiber_mode ? emu_context_jump_to(&w->main_ctx) : 0;
    siglongjmp(w->jump, 2);
}

static void emu_fault_handler(int sig, siginfo_t *info, void *context)
{
    emu_worker *w = emu_tls_worker;
    if (w != NULL && w->in_kernel)
        emu_leave_kernel(w, sig, info, context);
    /* Not ours: hand it to whoever handled it before. */
    emu_chain(sig == SIGBUS ? &emu_previous_bus : (sig == SIGFPE ? &emu_previous_fpe : &emu_previous_segv), sig,
              info, context);
}

/* Leaves the kernel if the launch is being stopped and this thread runs the kernel's code. */
static void emu_stop_here(void *context)
{
    emu_worker *w = emu_tls_worker;
    if (w == NULL || !w->in_kernel || w->launch == NULL || atomic_load(&w->launch->cancel) == EMU_CANCEL_NONE)
        return;
    const uintptr_t pc = emu_context_pc(context);
    if (pc >= w->launch->text_lo && pc < w->launch->text_hi)
        emu_leave_kernel(w, EMU_SIGNAL_CANCEL, NULL, context);
}

static void emu_cancel_handler(int sig, siginfo_t *info, void *context)
{
    const int ours = info != NULL && info->si_code == SI_TKILL && info->si_pid == getpid();
    if (ours)
        emu_stop_here(context);
    else
        emu_chain(&emu_previous_cancel, sig, info, context);
}

static void emu_kick_workers(emu_launch *launch);

static void emu_interrupt_handler(int sig, siginfo_t *info, void *context)
{
    for (int i = 0; i < 3; ++i)
        if (emu_interrupt_signals[i] == sig)
            emu_chain(&emu_previous_interrupt[i], sig, info, context); /* Python records the signal */
    emu_interrupt_signal = sig;
    emu_launch *launch = atomic_load(&emu_interrupt_launch);
    if (launch == NULL)
        return;
    int none = EMU_CANCEL_NONE;
    atomic_compare_exchange_strong(&launch->cancel, &none, EMU_CANCEL_INTERRUPT);
    emu_kick_workers(launch);
    emu_stop_here(context);
}

static void emu_install_handlers(int interruptible)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = emu_fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &emu_previous_segv);
    sigaction(SIGBUS, &sa, &emu_previous_bus);
    sigaction(SIGFPE, &sa, &emu_previous_fpe);
    sa.sa_sigaction = emu_cancel_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(EMU_CANCEL_SIGNAL, &sa, &emu_previous_cancel);
    if (interruptible) {
        /* Only over a handler (Python's, the same function for every signal it handles): never
         * turn an ignored or default disposition into one. */
        struct sigaction python;
        sigaction(SIGINT, NULL, &python);
        for (int i = 0; i < 3; ++i) {
            struct sigaction now;
            sigaction(emu_interrupt_signals[i], NULL, &now);
            const int handled = (now.sa_flags & SA_SIGINFO) || (now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN);
            const int same = (now.sa_flags & SA_SIGINFO) == (python.sa_flags & SA_SIGINFO) &&
                             ((now.sa_flags & SA_SIGINFO) ? now.sa_sigaction == python.sa_sigaction
                                                          : now.sa_handler == python.sa_handler);
            emu_interrupt_installed[i] = handled && (i == 0 || same);
            if (emu_interrupt_installed[i]) {
                sa.sa_sigaction = emu_interrupt_handler;
                sigaction(emu_interrupt_signals[i], &sa, &emu_previous_interrupt[i]);
            }
        }
        emu_interrupt_signal = 0;
    }
}

static void emu_restore_handlers(int interruptible)
{
    sigaction(SIGSEGV, &emu_previous_segv, NULL);
    sigaction(SIGBUS, &emu_previous_bus, NULL);
    sigaction(SIGFPE, &emu_previous_fpe, NULL);
    sigaction(EMU_CANCEL_SIGNAL, &emu_previous_cancel, NULL);
    for (int i = 0; interruptible && i < 3; ++i)
        if (emu_interrupt_installed[i]) {
            sigaction(emu_interrupt_signals[i], &emu_previous_interrupt[i], NULL);
            emu_interrupt_installed[i] = 0;
        }
}

/* ---- describing a fault ---------------------------------------------------------------------- */

static void emu_describe_fault(emu_worker *w, emu_launch *launch)
{
    const int sig = w->fault_signal;
    w->fault_signal = 0;
    w->pub.current = w->fault_thread_valid ? &w->fault_thread : NULL;
    if (sig == EMU_SIGNAL_CANCEL) {
        emu_set_error(w, 1, "stopped");
        w->failure = atomic_load(&launch->cancel) == EMU_CANCEL_INTERRUPT ? EMU_FAIL_INTERRUPT : EMU_FAIL_TIMEOUT;
        return;
    }
    if (sig == SIGFPE) {
        const char *what = w->fault_code == FPE_INTDIV || w->fault_code == FPE_INTOVF
                               ? "integer division by zero (or INT_MIN / -1); a GPU does not trap there but gives "
                                 "an undefined result, so this is a bug of the kernel"
                               : "arithmetic exception (SIGFPE)";
        emu_set_error(w, 1, "%s", what);
        w->failure = EMU_FAIL_FAULT;
        return;
    }
    const uintptr_t addr = (uintptr_t)w->fault_address;
    const char *what = sig == SIGBUS ? "bus error" : "segmentation fault";
    const char *access = w->fault_write == 1 ? "write" : (w->fault_write == 0 ? "read" : "access");
    /* a fiber's stack overflowing into its guard */
    const long stack = w->fiber_mode ? emu_stack_pool_guard_hit(&w->stacks, addr) : -1;
    if (stack >= 0 && (unsigned long)stack < w->n_threads) {
        w->pub.current = &w->fibers[stack].pub;
        emu_set_error(w, 1,
                      "stack overflow: the thread used more than its %zu KiB of stack (CUDA allows 512 KiB of local "
                      "memory per thread): large local arrays or deep recursion (fault at %p)",
                      w->stacks.stack_size / 1024, w->fault_address);
        w->failure = EMU_FAIL_FAULT;
        return;
    }
    if (w->stack_lo != 0 && addr < w->stack_lo && addr + (1u << 20) >= w->stack_lo) {
        emu_set_error(w, 1, "stack overflow of the worker thread (loop mode): large local arrays or deep recursion "
                            "(fault at %p)",
                      w->fault_address);
        w->failure = EMU_FAIL_FAULT;
        return;
    }
    char text[700];
    const int kind = w->fault_write == 1 ? CUNUMPY_EMU_ACCESS_WRITE : 0;
    /* size 0: not known from a fault (the description takes the element size of the array) */
    if (emu_check_describe(&launch->check, &w->cw, addr, 0, kind, text, sizeof text)) {
        emu_set_error(w, 1, "memcheck: %s (a %s at address %p)", text, what, w->fault_address);
        w->failure = EMU_FAIL_MEMCHECK;
        return;
    }
    if (addr < 65536)
        emu_set_error(w, 1, "%s: null pointer %s (address %p)", what, access, w->fault_address);
    else if (emu_shadow_contains(addr, addr + 1))
        emu_set_error(w, 1,
                      "%s: invalid %s at address %p, inside the memory checks' shadow (a wild pointer, made from an "
                      "integer?)",
                      what, access,
                      (void *)((addr - (uintptr_t)CUNUMPY_EMU_SHADOW_OFFSET) << 3)); /* the gap's: the access's */
    else
        emu_set_error(w, 1,
                      "%s: invalid %s at address %p, not near any argument of the launch (a wild or dangling "
                      "pointer)",
                      what, access, w->fault_address);
    w->failure = EMU_FAIL_FAULT;
}

/* ---- workers ----------------------------------------------------------------------------- */

static void emu_record_error(emu_launch *launch, emu_worker *w)
{
    pthread_mutex_lock(&launch->error_lock);
    if (!launch->failed || w->block_linear < launch->error_block) {
        launch->failed = 1;
        launch->failure = w->failure ? w->failure : EMU_FAIL_ERROR;
        launch->error_block = w->block_linear;
        (void)snprintf(launch->error, sizeof launch->error, "emulated kernel '%s' failed in %s",
                       launch->params->kernel_name ? launch->params->kernel_name : "?", w->error);
    }
    pthread_mutex_unlock(&launch->error_lock);
    atomic_store(&launch->stop, 1);
}

/* Blocks are handed out in chunks of consecutive blocks, in increasing order (one atomic
 * operation per chunk, not per block): large chunks while many blocks are left, single blocks
 * at the end so that the workers finish together. A worker runs every block of a chunk it
 * took, unless one of them fails or the launch is stopped, so the lowest failing block always
 * runs and the error reported does not depend on the timing (see the file's comment). Returns
 * 0 when no block is left. */
static int emu_take_blocks(emu_launch *launch, uint64_t *first, uint64_t *end)
{
    const uint64_t total = launch->total_blocks;
    uint64_t next = atomic_load_explicit(&launch->next_block, memory_order_relaxed);
    for (;;) {
        if (next >= total)
            return 0;
        uint64_t chunk = (total - next) / (8u * (uint64_t)launch->workers);
        chunk = chunk < 1 ? 1 : (chunk > EMU_MAX_CHUNK ? EMU_MAX_CHUNK : chunk);
        if (atomic_compare_exchange_weak_explicit(&launch->next_block, &next, next + chunk, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *first = next;
            *end = next + chunk;
            return 1;
        }
    }
}

/* The block after the worker's current one (block_idx.x fastest). */
static void emu_next_block(emu_worker *w)
{
    const emu_launch_params *p = w->launch->params;
    w->block_linear++;
    w->cw.block_linear = w->block_linear;
    if (++w->pub.block_idx.x == p->grid.x) {
        w->pub.block_idx.x = 0;
        if (++w->pub.block_idx.y == p->grid.y) {
            w->pub.block_idx.y = 0;
            w->pub.block_idx.z++;
        }
    }
}

static void emu_set_block(emu_worker *w, uint64_t b)
{
    const emu_launch_params *p = w->launch->params;
    w->block_linear = b;
    w->cw.block_linear = b;
    w->pub.block_idx.x = (unsigned int)(b % p->grid.x);
    b /= p->grid.x;
    w->pub.block_idx.y = (unsigned int)(b % p->grid.y);
    w->pub.block_idx.z = (unsigned int)(b / p->grid.y);
}

/* This OS thread's stack, once per thread (glibc reads /proc/self/maps for the main thread). */
static _Thread_local uintptr_t emu_my_stack[2];

/* The main thread's stack without reading /proc/self/maps (which pthread_getattr_np does for
 * it: 0.3 ms in a Python process, a third of a new process's first launch), with the bounds
 * glibc gives: the stack mapping ends with the page holding the program's file name, which the
 * kernel copies to the top of the initial stack (AT_EXECFN), and may grow down by the soft
 * stack limit from there; the stack in use ends at the page after __libc_stack_end. -1 where
 * that does not apply (other threads, no limit, anything odd). */
#if defined(__linux__) && defined(__GLIBC__)
extern void *__libc_stack_end; /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp): glibc's own symbol */
#endif
static int emu_main_thread_stack(uintptr_t *lo, uintptr_t *hi)
{
#if defined(__linux__) && defined(__GLIBC__)
    if (getpid() != (pid_t)syscall(SYS_gettid))
        return -1;
    struct rlimit limit;
    if (getrlimit(RLIMIT_STACK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return -1;
    const char *file = (const char *)getauxval(AT_EXECFN);
    const uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (file == NULL || page == 0 || (page & (page - 1)) != 0)
        return -1;
    const uintptr_t top = ((uintptr_t)file + strlen(file) + 1 + sizeof(void *) + page - 1) & ~(page - 1);
    const uintptr_t end = ((uintptr_t)__libc_stack_end & ~(page - 1)) + page;
    if (here >= end || end > top || top - here > limit.rlim_cur)
        return -1; /* this frame is not on that stack */
    *hi = end;
    *lo = top - (uintptr_t)limit.rlim_cur;
    return 0;
#else
    (void)lo;
    (void)hi;
    return -1;
#endif
}

static void emu_thread_stack(uintptr_t *lo, uintptr_t *hi)
{
    if (emu_my_stack[1] == 0 && emu_main_thread_stack(&emu_my_stack[0], &emu_my_stack[1]) != 0) {
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void *addr = NULL;
            size_t size = 0;
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
                emu_my_stack[0] = (uintptr_t)addr;
                emu_my_stack[1] = (uintptr_t)addr + size;
            }
            pthread_attr_destroy(&attr);
        }
    }
    *lo = emu_my_stack[0];
    *hi = emu_my_stack[1];
}

/* Records the memory of this worker that the kernel's code touches (mode 1: unpoisons it). */
static void emu_worker_allow_own(emu_worker *w, emu_launch *launch)
{
    emu_check *c = &launch->check;
    emu_check_worker *cw = &w->cw;
    cw->n_own = 0;
    if (c->mode == 0)
        return;
    /* The worker's state, the fibers and the parameter buffer are read by the kernel library
     * without instrumentation (the prelude's runtime_load, load_param): not listed. */
    if (w->stacks.base != NULL)
        emu_check_worker_allow(c, cw, (uintptr_t)w->stacks.base,
                               (uintptr_t)w->stacks.base + w->stacks.count * w->stacks.stride);
    uintptr_t lo, hi;
    emu_thread_stack(&lo, &hi);
    w->stack_lo = lo;
    w->stack_hi = hi;
    emu_check_worker_allow(c, cw, lo, hi);
    /* the kernel library's thread-local block (the bound worker, file-scope __shared__) */
    if (launch->params->library != NULL && launch->tls_size > 0) {
        void *tls = NULL;
        if (dlinfo(launch->params->library, RTLD_DI_TLS_DATA, &tls) == 0 && tls != NULL)
            emu_check_worker_allow(c, cw, (uintptr_t)tls, (uintptr_t)tls + launch->tls_size);
    }
}

/* Runs blocks of `launch` until none are left or the launch stops. */
static void emu_worker_run(emu_worker *w, emu_launch *launch)
{
    const emu_launch_params *p = launch->params;
    w->launch = launch;
    w->fiber_mode = p->fibers;
    w->failed = 0;
    w->failure = EMU_FAIL_NONE;
    w->error[0] = '\0';
    w->fault_signal = 0;
    w->pub.current = NULL;
    w->pub.block_dim = p->block;
    w->pub.grid_dim = p->grid;
    w->pub.api = &emu_api;
    w->n_threads = p->block.x * p->block.y * p->block.z;
    memset(&w->main_ctx, 0, sizeof w->main_ctx); /* this OS thread's stack: ASan learns it anew */
    w->fibers_parked = 0;                        /* fibers are made anew for every launch */
#if !EMU_ASM_SWITCH
    ucontext_t main_uc;
    w->main_ctx.ucontext = &main_uc;
#endif
    w->block_linear = 0;
    if (emu_check_arena(&launch->check, &w->cw) != 0) {
        (void)snprintf(w->error, sizeof w->error, "block (0, 0, 0): out of memory for %zu bytes of shared memory",
                       p->shared_mem);
        w->failure = EMU_FAIL_ERROR;
        emu_record_error(launch, w);
        return;
    }
    w->pub.static_shared = w->cw.arena + EMU_STATIC_SHARED_OFFSET;
    w->pub.dynamic_shared = w->cw.arena + EMU_DYNAMIC_SHARED_OFFSET;
    w->pub.dynamic_shared_bytes = p->shared_mem;
    if (w->fiber_mode) {
        if (w->stacks_trim != 0 && w->stacks.count > w->stacks_trim)
            emu_stack_pool_release(&w->stacks);
        w->stacks_trim = 0;
        if (emu_prepare_fibers(w, w->n_threads) != 0) {
            (void)snprintf(w->error, sizeof w->error,
                           "block (0, 0, 0): out of memory or of memory mappings for %u fiber stacks of %u KiB (each "
                           "stack is two memory mappings; the system's limit is vm.max_map_count)",
                           w->n_threads, 512u);
            w->failure = EMU_FAIL_ERROR;
            emu_record_error(launch, w);
            return;
        }
    }
    p->bind(&w->pub);

    stack_t old_stack;
    int altstack_set = 0;
    if (w->altstack == NULL)
        w->altstack = malloc(EMU_ALTSTACK_BYTES);
    if (w->altstack != NULL) {
        stack_t ss;
        ss.ss_sp = w->altstack;
        ss.ss_size = EMU_ALTSTACK_BYTES;
        ss.ss_flags = 0;
        altstack_set = sigaltstack(&ss, &old_stack) == 0;
    }
    emu_worker_allow_own(w, launch);
    emu_tls_worker = w;
    emu_fpstate_save(&w->fpstate);
    w->jump_announced = 0;
    if (sigsetjmp(w->jump, 1) != 0) {
        /* A trap in loop mode, a fault, or a forced stop. */
        emu_context_landed(w->jump_announced);
        w->jump_announced = 0;
        w->in_kernel = 0;
        if (w->fault_signal != 0)
            emu_describe_fault(w, launch);
        emu_record_error(launch, w);
        goto done;
    }
    for (;;) {
        if (atomic_load_explicit(&launch->stop, memory_order_relaxed))
            break;
        uint64_t b, end;
        if (!emu_take_blocks(launch, &b, &end))
            break;
        emu_set_block(w, b);
        w->chunk_done = 0;
        for (;;) {
            if (atomic_load_explicit(&launch->cancel, memory_order_relaxed) != EMU_CANCEL_NONE)
                goto stopped; /* the launch reports the stop itself */
            if (emu_check_block_start(&launch->check, &w->cw) != 0) {
                emu_set_error(w, 0, "out of memory for the racecheck/initcheck tables");
                emu_record_error(launch, w);
                goto stopped;
            }
            w->in_kernel = 1;
            int status = 0;
            if (w->fiber_mode)
                status = emu_run_block_fibers(w);
            else
                p->block_fn(&w->pub, launch->args);
            w->in_kernel = 0;
            emu_fpstate_restore_sse(&w->fpstate);
            if (status != 0) {
                emu_record_error(launch, w);
                goto stopped;
            }
            if (p->analysis != NULL)
                emu_analysis_block_end(p->analysis, w->n_threads);
            w->chunk_done++;
            if (++b == end)
                break;
            emu_next_block(w);
        }
        atomic_fetch_add_explicit(&launch->blocks_done, w->chunk_done, memory_order_relaxed);
        w->chunk_done = 0;
        emu_fpstate_restore(&w->fpstate);
    }
stopped:
    atomic_fetch_add_explicit(&launch->blocks_done, w->chunk_done, memory_order_relaxed);
    w->chunk_done = 0;
done:
    w->in_kernel = 0;
    emu_fpstate_restore(&w->fpstate);
    emu_tls_worker = NULL;
    if (altstack_set) {
        /* The previous alternate stack, or none. */
        if (old_stack.ss_flags & SS_DISABLE) {
            stack_t off;
            memset(&off, 0, sizeof off);
            off.ss_flags = SS_DISABLE;
            sigaltstack(&off, NULL);
        } else {
            sigaltstack(&old_stack, NULL);
        }
    }
    w->cw.n_own = 0;
    w->pub.current = NULL;
    p->bind(NULL); /* the library's thread-local pointer no longer names this worker */
    w->launch = NULL;
}

/* ---- the pool ---------------------------------------------------------------------------- */

static struct {
    pthread_mutex_t launch_lock; /* one launch at a time */
    pthread_mutex_t lock;
    pthread_cond_t wake, finished_cond;
    unsigned long generation;
    emu_launch *launch;
    int participants; /* workers of the current launch, the caller included */
    int joined;       /* pool workers that took part in it */
    int finished;     /* ... and are done with it */
    int closed;       /* the caller is done: a worker waking up now takes no part */
    int n_slots;
    emu_worker *slots[EMU_MAX_WORKERS];
} emu_pool = {.launch_lock = PTHREAD_MUTEX_INITIALIZER,
              .lock = PTHREAD_MUTEX_INITIALIZER,
              .wake = PTHREAD_COND_INITIALIZER,
              .finished_cond = PTHREAD_COND_INITIALIZER};

/* The arenas of the workers (for a new __shared__ variable; called inside a launch, whose
 * workers' slots do not change). */
static int emu_pool_arenas(emu_check_worker **out, int max)
{
    int n = 0;
    for (int i = 0; i < emu_pool.n_slots && n < max; ++i)
        if (emu_pool.slots[i] != NULL)
            out[n++] = &emu_pool.slots[i]->cw;
    return n;
}

static void emu_kick_workers(emu_launch *launch)
{
    /* pthread_kill is async-signal-safe: this also runs in the SIGINT handler. */
    for (int i = 1; i < launch->workers && i < emu_pool.n_slots; ++i)
        if (emu_pool.slots[i] != NULL && emu_pool.slots[i]->started)
            pthread_kill(emu_pool.slots[i]->thread, EMU_CANCEL_SIGNAL);
    pthread_kill(launch->caller, EMU_CANCEL_SIGNAL);
}

static void emu_unblock_worker_signals(void)
{
    /* Created with every signal blocked; a fault while blocked would kill the process without
     * running any handler, so faults stay deliverable, and so does the cancel signal. */
    sigset_t faults;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    sigaddset(&faults, SIGFPE);
    sigaddset(&faults, SIGILL);
    sigaddset(&faults, EMU_CANCEL_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
}

static void *emu_pool_thread(void *arg)
{
    emu_worker *w = (emu_worker *)arg;
    emu_unblock_worker_signals();
    pthread_mutex_lock(&emu_pool.lock);
    for (;;) {
        while (emu_pool.generation == w->seen_generation)
            pthread_cond_wait(&emu_pool.wake, &emu_pool.lock);
        w->seen_generation = emu_pool.generation;
        emu_launch *launch = emu_pool.launch;
        /* A worker that wakes after the caller ran out of blocks takes no part: the caller does
         * not wait for workers to wake, only for those that joined to finish. */
        const int take_part = w->index < emu_pool.participants && !emu_pool.closed;
        if (take_part)
            emu_pool.joined++;
        pthread_mutex_unlock(&emu_pool.lock);
        if (take_part)
            emu_worker_run(w, launch);
        pthread_mutex_lock(&emu_pool.lock);
        if (take_part && ++emu_pool.finished == emu_pool.joined && emu_pool.closed)
            pthread_cond_signal(&emu_pool.finished_cond);
    }
    return NULL;
}

/* ---- the watchdog of timeouts ------------------------------------------------------------------ */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started;
    emu_launch *launch;
    struct timespec deadline;
} emu_watch = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t emu_watch_once = PTHREAD_ONCE_INIT;

static void emu_watch_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&emu_watch.cond, &attr);
    pthread_condattr_destroy(&attr);
}

static void emu_timespec_add(struct timespec *t, double seconds)
{
    const double whole = (double)(long long)seconds;
    t->tv_sec += (time_t)whole;
    t->tv_nsec += (long)((seconds - whole) * 1e9);
    while (t->tv_nsec >= 1000000000L) {
        t->tv_nsec -= 1000000000L;
        t->tv_sec += 1;
    }
}

static int emu_timespec_passed(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static void *emu_watch_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&emu_watch.lock);
    for (;;) {
        while (emu_watch.launch == NULL)
            pthread_cond_wait(&emu_watch.cond, &emu_watch.lock);
        emu_launch *launch = emu_watch.launch;
        pthread_cond_timedwait(&emu_watch.cond, &emu_watch.lock, &emu_watch.deadline);
        if (emu_watch.launch != launch || !emu_timespec_passed(&emu_watch.deadline))
            continue;
        int none = EMU_CANCEL_NONE;
        atomic_compare_exchange_strong(&launch->cancel, &none, EMU_CANCEL_TIMEOUT);
        emu_kick_workers(launch);
        /* Until the launch ends: every 20 ms again (a worker was outside the kernel's code). */
        clock_gettime(CLOCK_MONOTONIC, &emu_watch.deadline);
        emu_timespec_add(&emu_watch.deadline, 0.02);
    }
    return NULL;
}

/* Watches `launch` (NULL: stops watching); 0, or -1 when the watchdog cannot start. */
static int emu_watch_launch(emu_launch *launch, double timeout)
{
    pthread_once(&emu_watch_once, emu_watch_init);
    pthread_mutex_lock(&emu_watch.lock);
    int status = 0;
    if (launch != NULL && !emu_watch.started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attr, emu_watch_thread, NULL) == 0)
            emu_watch.started = 1;
        else
            status = -1;
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (status == 0) {
        emu_watch.launch = launch;
        if (launch != NULL) {
            clock_gettime(CLOCK_MONOTONIC, &emu_watch.deadline);
            emu_timespec_add(&emu_watch.deadline, timeout);
        }
        pthread_cond_signal(&emu_watch.cond);
    }
    pthread_mutex_unlock(&emu_watch.lock);
    return status;
}

/* The launch whose shadow is poisoned now (set under the launch lock): a child forked while it
 * runs inherits the poisoned shadow of a launch that never ends there, and clears it. */
static emu_check *emu_active_check;

/* After fork the child has none of the pool's threads: forget them (their slots, stacks
 * included, stay valid memory) and start afresh. */
static void emu_pool_after_fork_child(void)
{
    pthread_mutex_init(&emu_pool.launch_lock, NULL);
    pthread_mutex_init(&emu_pool.lock, NULL);
    pthread_cond_init(&emu_pool.wake, NULL);
    pthread_cond_init(&emu_pool.finished_cond, NULL);
    for (int i = 0; i < emu_pool.n_slots; ++i)
        if (emu_pool.slots[i] != NULL)
            emu_pool.slots[i]->started = 0;
    if (emu_active_check != NULL) {
        for (size_t i = 0; i < emu_active_check->n_poisoned; ++i)
            emu_shadow_clear(emu_active_check->poisoned[2 * i], emu_active_check->poisoned[2 * i + 1]);
        emu_active_check = NULL;
    }
    pthread_mutex_init(&emu_watch.lock, NULL);
    emu_watch_init();
    emu_watch.started = 0;
    emu_watch.launch = NULL;
}

static pthread_once_t emu_pool_once = PTHREAD_ONCE_INIT;
static void emu_pool_init(void) { pthread_atfork(NULL, NULL, emu_pool_after_fork_child); }


/* Makes slots 0..n-1 exist and pool threads 1..n-1 run; returns how many workers are usable. */
static int emu_pool_ensure(int n)
{
    for (int i = 0; i < n; ++i) {
        if (emu_pool.slots[i] == NULL) {
            emu_worker *w = calloc(1, sizeof *w);
            if (w == NULL)
                return i > 0 ? i : 0;
            w->index = i;
            emu_pool.slots[i] = w;
            if (emu_pool.n_slots < i + 1)
                emu_pool.n_slots = i + 1;
        }
        emu_worker *w = emu_pool.slots[i];
        if (i > 0 && !w->started) {
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setstacksize(&attr, 8u << 20);
            /* Pool threads take no signals meant for the process (faults are synchronous and
             * still arrive). */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            pthread_mutex_lock(&emu_pool.lock);
            w->seen_generation = emu_pool.generation;
            pthread_mutex_unlock(&emu_pool.lock);
            const int rc = pthread_create(&w->thread, &attr, emu_pool_thread, w);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            pthread_attr_destroy(&attr);
            if (rc != 0)
                return i;
            w->started = 1;
        }
    }
    return n;
}

/* Keeps the fiber stacks of all workers within EMU_MAX_FIBER_STACKS (two memory mappings each):
 * workers that do not take part give theirs back, and those holding more than this launch
 * needs shrink when the total would pass the limit. */
static void emu_pool_trim_stacks(int workers, unsigned int per_block, int fibers)
{
    size_t total = 0;
    for (int i = 0; i < emu_pool.n_slots; ++i) {
        emu_worker *w = emu_pool.slots[i];
        if (w == NULL)
            continue;
        if (i >= workers && w->stacks.count > 0)
            emu_stack_pool_release(&w->stacks); /* idle: no fiber of it is alive between launches */
        const size_t need = fibers && i < workers ? per_block : 0;
        total += w->stacks.count > need ? w->stacks.count : need;
    }
    if (total <= EMU_MAX_FIBER_STACKS)
        return;
    for (int i = 0; i < workers && i < emu_pool.n_slots; ++i)
        if (emu_pool.slots[i] != NULL && emu_pool.slots[i]->stacks.count > (fibers ? per_block : 0))
            emu_pool.slots[i]->stacks_trim = fibers ? per_block : 1;
}

const char *emu_check_shape(cunumpy_emu_dim3 grid, cunumpy_emu_dim3 block)
{
    if (block.x == 0 || block.y == 0 || block.z == 0)
        return "block: every dimension must be at least 1";
    if (block.x > 1024 || block.y > 1024 || block.z > 64)
        return "block: dimensions are limited to (1024, 1024, 64)";
    if ((uint64_t)block.x * block.y * block.z > EMU_MAX_BLOCK_THREADS)
        return "block: at most 1024 threads per block";
    if (grid.x == 0 || grid.y == 0 || grid.z == 0)
        return "grid: every dimension must be at least 1";
    if (grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u)
        return "grid: dimensions are limited to (2147483647, 65535, 65535)";
    return NULL;
}

int emu_default_workers(void)
{
    const char *env = getenv("CUNUMPY_EMULATION_THREADS");
    if (env != NULL && env[0] != '\0') {
        char *end = NULL;
        errno = 0;
        const long v = strtol(env, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n') /* strtol always sets end */
            ++end;
        if (errno != 0 || end == env || *end != '\0' || v < 1)
            return -1;
        return v > EMU_MAX_WORKERS ? EMU_MAX_WORKERS : (int)v;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0)
            return n > EMU_MAX_WORKERS ? EMU_MAX_WORKERS : n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > EMU_MAX_WORKERS ? EMU_MAX_WORKERS : (int)n);
}

/* The kernel library's code and thread-local block size, from its program headers. */
typedef struct emu_library_scan {
    uintptr_t base, text_lo, text_hi;
    size_t tls_size;
} emu_library_scan;

static int emu_scan_library(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    emu_library_scan *scan = data;
    if ((uintptr_t)info->dlpi_addr != scan->base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            scan->text_lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
            scan->text_hi = scan->text_lo + ph->p_memsz;
        } else if (ph->p_type == PT_TLS) {
            scan->tls_size = ph->p_memsz;
        }
    }
    return 1;
}

static void emu_find_library(emu_launch *launch)
{
    const emu_launch_params *p = launch->params;
    Dl_info info;
    const void *entry = p->fibers ? (const void *)p->thread_fn : (const void *)p->block_fn;
    if (dladdr(entry, &info) == 0 || info.dli_fbase == NULL)
        return;
    emu_library_scan scan = {(uintptr_t)info.dli_fbase, 0, 0, 0};
    dl_iterate_phdr(emu_scan_library, &scan);
    launch->text_lo = scan.text_lo;
    launch->text_hi = scan.text_hi;
    launch->tls_size = scan.tls_size;
    launch->check.pc_base = scan.base;
}

static double emu_elapsed(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - since->tv_sec) + 1e-9 * (double)(now.tv_nsec - since->tv_nsec);
}

int emu_launch_run(const emu_launch_params *params, char *error, size_t error_size, emu_failure *failure)
{
    *failure = EMU_FAIL_ERROR;
    const char *bad = emu_check_shape(params->grid, params->block);
    if (bad != NULL) {
        (void)snprintf(error, error_size, "emulated kernel '%s': %s", params->kernel_name ? params->kernel_name : "?", bad);
        return -1;
    }
    if (params->bind == NULL || (params->fibers ? params->thread_fn == NULL : params->block_fn == NULL)) {
        (void)snprintf(error, error_size, "emulated kernel '%s': missing %s", params->kernel_name,
                       params->bind == NULL ? "bind function" : (params->fibers ? "thread function" : "block function"));
        return -1;
    }
    if (params->checks < 0 || params->checks > 3 || (params->checks == 1 && !emu_shadow_available())) {
        (void)snprintf(error, error_size, "emulated kernel '%s': checks mode %d is not available in this process",
                       params->kernel_name, params->checks);
        return -1;
    }
    pthread_once(&emu_pool_once, emu_pool_init);
    emu_launch launch;
    memset(&launch, 0, sizeof launch);
    launch.params = params;
    launch.args = params->args;
    launch.total_blocks = (uint64_t)params->grid.x * params->grid.y * params->grid.z;
    atomic_init(&launch.next_block, 0);
    atomic_init(&launch.blocks_done, 0);
    atomic_init(&launch.stop, 0);
    atomic_init(&launch.cancel, EMU_CANCEL_NONE);
    pthread_mutex_init(&launch.error_lock, NULL);
    launch.caller = pthread_self();
    clock_gettime(CLOCK_MONOTONIC, &launch.started);
    emu_check *check = &launch.check;
    check->mode = params->checks;
    check->racecheck = params->racecheck && params->checks == 3;
    check->initcheck = params->initcheck && params->checks == 3;
    check->kernel_name = params->kernel_name;
    check->regions = params->regions;
    check->n_regions = params->regions != NULL ? params->n_regions : 0;
    check->shared_mem = params->shared_mem;
    (void)snprintf(check->dynamic_name, sizeof check->dynamic_name, "%s",
                   params->dynamic_shared_name ? params->dynamic_shared_name : "");
    check->layout = emu_shared_layout_of((const void *)params->bind);
    check->grid = params->grid;
    check->block = params->block;
    check->n_blocks = launch.total_blocks;
    if (check->layout == NULL) {
        pthread_mutex_destroy(&launch.error_lock);
        (void)snprintf(error, error_size, "emulated kernel '%s': out of memory", params->kernel_name);
        return -1;
    }

    int workers = params->workers > 0 ? params->workers : emu_default_workers();
    if (workers < 1)
        workers = 1;
    if (workers > EMU_MAX_WORKERS)
        workers = EMU_MAX_WORKERS;
    if ((uint64_t)workers > launch.total_blocks)
        workers = (int)launch.total_blocks;
    if (params->checks == 3)
        workers = 1; /* the tracking tables are not shared between workers; reports come in block order
                      * (and the library's hooks find the one worker without a TLS lookup) */
    const unsigned int per_block = params->block.x * params->block.y * params->block.z;
    if (params->fibers) {
        /* Every fiber stack is two mappings (guard and stack) and the kernel caps a process's
         * mappings (vm.max_map_count, 65530 by default): keep the stacks of all workers
         * together under EMU_MAX_FIBER_STACKS. */
        const int cap = (int)(EMU_MAX_FIBER_STACKS / per_block);
        if (workers > cap)
            workers = cap > 0 ? cap : 1;
    }

    pthread_mutex_lock(&emu_pool.launch_lock);
    workers = emu_pool_ensure(workers);
    if (workers < 1) {
        pthread_mutex_unlock(&emu_pool.launch_lock);
        pthread_mutex_destroy(&launch.error_lock);
        (void)snprintf(error, error_size, "emulated kernel '%s': out of memory for the workers", params->kernel_name);
        return -1;
    }
    launch.workers = workers;
    emu_pool_trim_stacks(workers, per_block, params->fibers);
    emu_find_library(&launch);
    char check_error[256];
    if (emu_check_begin(check, check_error, sizeof check_error) != 0) {
        emu_check_end(check);
        pthread_mutex_unlock(&emu_pool.launch_lock);
        pthread_mutex_destroy(&launch.error_lock);
        (void)snprintf(error, error_size, "emulated kernel '%s': %s", params->kernel_name, check_error);
        return -1;
    }
    emu_active_check = check;
    emu_install_handlers(params->interruptible);
    if (params->interruptible)
        atomic_store(&emu_interrupt_launch, &launch);
    const int watched = params->timeout > 0 && emu_watch_launch(&launch, params->timeout) == 0;
    if (workers > 1) {
        pthread_mutex_lock(&emu_pool.lock);
        emu_pool.launch = &launch;
        emu_pool.participants = workers;
        emu_pool.joined = 0;
        emu_pool.finished = 0;
        emu_pool.closed = 0;
        emu_pool.generation++;
        pthread_cond_broadcast(&emu_pool.wake);
        pthread_mutex_unlock(&emu_pool.lock);
    }
    emu_worker_run(emu_pool.slots[0], &launch);
    if (workers > 1) {
        pthread_mutex_lock(&emu_pool.lock);
        emu_pool.closed = 1;
        while (emu_pool.finished < emu_pool.joined)
            pthread_cond_wait(&emu_pool.finished_cond, &emu_pool.lock);
        emu_pool.launch = NULL;
        pthread_mutex_unlock(&emu_pool.lock);
    }
    if (watched)
        emu_watch_launch(NULL, 0);
    if (params->interruptible)
        atomic_store(&emu_interrupt_launch, NULL);
    emu_restore_handlers(params->interruptible);

    int status = 0;
    const int cancel = atomic_load(&launch.cancel);
    const unsigned long long done = (unsigned long long)atomic_load(&launch.blocks_done);
    /* A launch whose every block finished is a success, even when the stop came in time to
     * be seen (timeout=1e-9 on a launch that finishes anyway). */
    if (cancel != EMU_CANCEL_NONE && (done < launch.total_blocks || launch.failed)) {
        if (cancel == EMU_CANCEL_TIMEOUT)
            (void)snprintf(error, error_size,
                           "emulated kernel '%s' timed out: it ran longer than timeout=%g s and was stopped after %.2f s, "
                           "with %llu of %llu blocks finished",
                           params->kernel_name, params->timeout, emu_elapsed(&launch.started), done,
                           (unsigned long long)launch.total_blocks);
        else
            (void)snprintf(error, error_size,
                           "emulated kernel '%s' was interrupted (%s) after %.2f s, with %llu of %llu blocks finished",
                           params->kernel_name,
                           emu_interrupt_signal == SIGALRM ? "SIGALRM"
                                                           : (emu_interrupt_signal == SIGTERM ? "SIGTERM" : "SIGINT"),
                           emu_elapsed(&launch.started), done, (unsigned long long)launch.total_blocks);
        *failure = cancel == EMU_CANCEL_TIMEOUT ? EMU_FAIL_TIMEOUT : EMU_FAIL_INTERRUPT;
        status = -1;
    } else if (launch.failed) {
        (void)snprintf(error, error_size, "%s", launch.error);
        *failure = launch.failure;
        status = -1;
    } else {
        const char *kind = NULL;
        const char *reports = emu_check_reports(check, &kind);
        if (reports[0] != '\0') {
            (void)snprintf(error, error_size, "emulated kernel '%s': %s found %llu problem(s)%s", params->kernel_name,
                           kind, (unsigned long long)check->reports_total, reports);
            *failure = strcmp(kind, "racecheck") == 0 ? EMU_FAIL_RACECHECK : EMU_FAIL_INITCHECK;
            status = -1;
        }
    }
    emu_check_end(check);
    emu_active_check = NULL;
    pthread_mutex_unlock(&emu_pool.launch_lock);
    pthread_mutex_destroy(&launch.error_lock);
    return status;
}
