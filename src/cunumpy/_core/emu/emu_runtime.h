/* The CPU emulator's runtime, internal interface (pure C, no Python): fibers and their
 * stacks (emu_fiber.c) and the launch, worker pool, block scheduler and collectives
 * (emu_runtime.c). emu_module.c is the Python boundary; tests/c/test_emu*.c drive the same
 * functions directly. */
#ifndef CUNUMPY__CORE_EMU_EMU_RUNTIME_H
#define CUNUMPY__CORE_EMU_EMU_RUNTIME_H

#include "emu_abi.h"
#include "emu_check.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define EMU_INTERNAL __attribute__((visibility("hidden")))
#else
#define EMU_INTERNAL
#endif

/* For the functions in which fibers wait (the switch's return-stack note in emu_fiber.c says
 * why there must be one copy of each): not inlined, and with GCC not cloned for constant
 * arguments either (GCC's interprocedural constant propagation would otherwise make a second
 * copy of such a function, and so a second call site of the switch). */
#if defined(__clang__)
#define EMU_ONE_COPY __attribute__((noinline))
#elif defined(__GNUC__)
#define EMU_ONE_COPY __attribute__((noipa))
#else
#define EMU_ONE_COPY
#endif

/* Address sanitizer: stack switches must be announced to it. */
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifndef EMU_ASAN
#define EMU_ASAN 0
#endif

/* Thread sanitizer: every fiber is a TSan fiber, and every switch is announced to it, so that
 * it keeps one shadow stack and one clock per fiber instead of mixing a worker's fibers up. */
#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#endif
#ifndef EMU_TSAN
#define EMU_TSAN 0
#endif

/* Hand-written context switch where we have one; ucontext elsewhere. */
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__) && !defined(CUNUMPY_EMU_FORCE_UCONTEXT)
#define EMU_ASM_SWITCH 1
#else
#define EMU_ASM_SWITCH 0
#endif

/* ---- fibers ---------------------------------------------------------------------------- */

typedef struct emu_context {
    void *sp;               /* saved stack pointer (assembly switch) */
    void *ucontext;         /* ucontext_t * (fallback switch), owned by the stack pool slot */
    const void *stack_low;  /* for ASan: the stack's lowest usable address and size */
    size_t stack_size;
    void *asan_fake_stack;
    void *tsan_fiber;       /* for TSan: its fiber (a worker's own stack: learned at the first switch) */
} emu_context;

/* Switches from `from` (saving the running state into it) to `to`. `from_done` says the
 * context being left is finished and never resumed (ASan may drop its fake stack).
 * Without ASan the assembly switch is called directly from the caller (no wrapper call on
 * the hot path; hidden visibility makes it a direct call, not one through the PLT). */
#if EMU_ASM_SWITCH
EMU_INTERNAL void cn_emu_switch_asm(void **save_sp, void *load_sp);
#endif
#if EMU_ASM_SWITCH && !EMU_ASAN && !EMU_TSAN
static inline void emu_context_switch(emu_context *from, emu_context *to, int from_done)
{
    (void)from_done;
    cn_emu_switch_asm(&from->sp, to->sp);
}
#else
EMU_INTERNAL void emu_context_switch(emu_context *from, emu_context *to, int from_done);
#endif

/* Releases what a context made by emu_context_make holds besides its stack (a TSan fiber). */
EMU_INTERNAL void emu_context_forget(emu_context *ctx);
/* Before a siglongjmp out of a fiber to a jump buffer set in `ctx`: tells TSan the code runs
 * on `ctx` again (it looks the buffer up in the running fiber's state), and ASan that the
 * stack changes; returns whether ASan was told, to pass to emu_context_landed after the jump. */
EMU_INTERNAL int emu_context_jump_to(emu_context *ctx);
EMU_INTERNAL void emu_context_landed(int announced);

/* The floating-point control state (x86-64: MXCSR and the x87 control word; aarch64: FPCR):
 * rounding mode, flush-to-zero, exception masks. The assembly switch does not save it per
 * fiber, although the psABIs make it callee-saved, because reading and writing it is a large
 * part of a switch's cost (a load of MXCSR or FPCR waits for the floating-point operations in
 * flight) and no fiber changes it: CUDA device code has no way to set a rounding or denormal
 * mode (rounding is chosen per operation, __fadd_rz and the like), so every fiber of a block
 * runs with the worker thread's state. A kernel that calls a host function such as
 * fesetround() anyway changes it for the fibers of its block that run after it, and for
 * nothing else: the worker saves its state before a launch and restores it after each block
 * (emu_fpstate_restore_sse after every block, emu_fpstate_restore after every chunk of blocks
 * and at the end; off the switch path), so the calling thread and the next block see the
 * state the launch started with. The ucontext fallback keeps a state per
 * fiber (swapcontext saves it), which is the same for kernels that leave it alone. */
typedef struct emu_fpstate {
#if defined(__x86_64__)
    uint32_t mxcsr;
    uint16_t x87_control;
#elif defined(__aarch64__)
    uint64_t fpcr;
#else
    int unused;
#endif
} emu_fpstate;

static inline void emu_fpstate_save(emu_fpstate *s)
{
#if defined(__x86_64__)
    __asm__ volatile("stmxcsr %0" : "=m"(s->mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(s->x87_control));
#elif defined(__aarch64__)
    __asm__ volatile("mrs %0, fpcr" : "=r"(s->fpcr));
#else
    (void)s;
#endif
}

/* Loads the parts of `s` that differ from the current state (a load is the costly part). */
static inline void emu_fpstate_restore(const emu_fpstate *s)
{
    emu_fpstate now;
    emu_fpstate_save(&now);
#if defined(__x86_64__)
    if (now.mxcsr != s->mxcsr)
        __asm__ volatile("ldmxcsr %0" : : "m"(s->mxcsr));
    if (now.x87_control != s->x87_control)
        __asm__ volatile("fldcw %0" : : "m"(s->x87_control));
#elif defined(__aarch64__)
    if (now.fpcr != s->fpcr)
        __asm__ volatile("msr fpcr, %0" : : "r"(s->fpcr));
#else
    (void)now;
    (void)s;
#endif
}

/* The same for MXCSR alone (x86-64), which a change of the rounding mode (fesetround) or of
 * the exceptions (feenableexcept) also changes: checked after every block, cheaper than the
 * x87 control word, which the worker checks after every chunk of blocks. Elsewhere: the whole
 * state. */
static inline void emu_fpstate_restore_sse(const emu_fpstate *s)
{
#if defined(__x86_64__)
    uint32_t now;
    __asm__ volatile("stmxcsr %0" : "=m"(now));
    if (now != s->mxcsr)
        __asm__ volatile("ldmxcsr %0" : : "m"(s->mxcsr));
#else
    emu_fpstate_restore(s);
#endif
}

/* Prepares `ctx` to start `entry(arg)` on the given stack at the next switch into it.
 * `entry` must never return (it switches away when done). */
EMU_INTERNAL void emu_context_make(emu_context *ctx, void *stack_low, size_t stack_size, void (*entry)(void *),
                                   void *arg);

/* A pool of fiber stacks: one mapping, each stack preceded by a PROT_NONE guard region. */
typedef struct emu_stack_pool {
    char *base;
    size_t count;     /* stacks available */
    size_t stride;    /* guard + stack */
    size_t guard;
    size_t stack_size;
    void *ucontexts;  /* one ucontext_t per stack when the fallback switch is used */
} emu_stack_pool;

/* Makes sure `pool` has at least `count` stacks; 0 on success, -1 when out of memory or of
 * memory mappings. */
EMU_INTERNAL int emu_stack_pool_reserve(emu_stack_pool *pool, size_t count);
EMU_INTERNAL void emu_stack_pool_release(emu_stack_pool *pool);
EMU_INTERNAL void *emu_stack_low(const emu_stack_pool *pool, size_t i);
/* The stack whose guard region holds `addr` (a stack overflow), or -1. */
EMU_INTERNAL long emu_stack_pool_guard_hit(const emu_stack_pool *pool, uintptr_t addr);
/* Stacks reserved by every pool of the process (each is two memory mappings). */
EMU_INTERNAL size_t emu_stack_pools_total(void);

/* Switch cost in ns per switch: the runtime's switch and a ucontext swapcontext, measured
 * in the same call by ping-ponging `n` times between two contexts. 0 on success. */
EMU_INTERNAL int emu_switch_benchmark(long n, double *fiber_ns, double *ucontext_ns);

/* ---- launches -------------------------------------------------------------------------- */

typedef struct emu_launch_params {
    cunumpy_emu_bind_fn bind;
    cunumpy_emu_thread_fn thread_fn; /* fiber mode */
    cunumpy_emu_block_fn block_fn;   /* loop mode */
    void *const *args;
    cunumpy_emu_dim3 grid, block;
    size_t shared_mem;
    int fibers;
    int checked; /* kept for callers of earlier versions: faults are always caught now */
    int workers; /* 0: CUNUMPY_EMULATION_THREADS or the CPU count */
    const char *kernel_name;
    /* memory checks (emu_check.h) */
    int checks;          /* the library's CUNUMPY_EMU_CHECKS, 0 to 3 */
    int racecheck, initcheck;
    emu_region *regions; /* the launch's memory (sorted in place) */
    size_t n_regions;
    const char *dynamic_shared_name; /* the extern __shared__ names, for reports */
    void *library;                   /* the library's dlopen handle (its TLS block), or NULL */
    /* stopping */
    double timeout;    /* seconds; 0: none */
    int interruptible; /* called from the main thread: SIGINT stops the launch */
    struct emu_analysis *analysis; /* performance analysis (emu_analysis.h, checks 3), or NULL */
} emu_launch_params;

/* Why a launch failed (the Python layer picks the exception class from it). */
typedef enum {
    EMU_FAIL_NONE = 0,
    EMU_FAIL_ERROR,     /* a trap, an assertion, barrier divergence, a warp mask mismatch */
    EMU_FAIL_MEMCHECK,  /* an access outside the launch's memory */
    EMU_FAIL_FAULT,     /* a fault elsewhere: a wild pointer, a stack overflow, division by zero */
    EMU_FAIL_RACECHECK,
    EMU_FAIL_INITCHECK,
    EMU_FAIL_TIMEOUT,
    EMU_FAIL_INTERRUPT, /* SIGINT while the launch ran */
} emu_failure;

/* Limits checked by emu_check_shape (CUDA's). */
#define EMU_MAX_BLOCK_THREADS 1024u
#define EMU_MAX_WORKERS 256

/* NULL when the shape is legal, else a static message naming `grid` or `block`. */
EMU_INTERNAL const char *emu_check_shape(cunumpy_emu_dim3 grid, cunumpy_emu_dim3 block);

/* Default worker count: CUNUMPY_EMULATION_THREADS when set (a positive integer; -1 when
 * it is set to anything else), otherwise the CPUs this process may run on. */
EMU_INTERNAL int emu_default_workers(void);

/* Runs a launch to completion (blocks in parallel on the worker pool, the calling thread
 * included). Returns 0, or -1 with a message naming the kernel and the block (and thread
 * where known) in `error` and what failed in `*failure`. Launches from several threads are
 * serialised. */
EMU_INTERNAL int emu_launch_run(const emu_launch_params *params, char *error, size_t error_size,
                                emu_failure *failure);

#endif /* CUNUMPY__CORE_EMU_EMU_RUNTIME_H */
