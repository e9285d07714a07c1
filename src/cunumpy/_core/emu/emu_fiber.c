/* Fibers for the CPU emulator: a user-space context switch written by hand for x86-64 and
 * aarch64 (ucontext elsewhere), and pooled fiber stacks with guard pages.
 *
 * Why not ucontext everywhere: swapcontext saves and restores the signal mask with a
 * system call, which makes it a few hundred ns per switch; a block of 1024 threads meeting
 * at a barrier switches 1024 times. The hand-written switch saves only the general and vector
 * registers the calling convention says a callee must preserve (the floating-point control
 * state is kept per block, not per fiber: emu_fpstate in emu_runtime.h says why). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "emu_runtime.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#if EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* ---- the assembly switch ------------------------------------------------------------------
 * void cn_emu_switch_asm(void **save_sp, void *load_sp): pushes the callee-saved state on the
 * current stack, stores the stack pointer in *save_sp, loads load_sp and pops the state saved
 * there by an earlier switch (or laid out by emu_context_make), then returns into that context.
 * cn_emu_start_asm is where a new fiber's first switch "returns" to: it calls entry(arg),
 * both laid out in callee-saved registers by emu_context_make; entry never returns. */
#if EMU_ASM_SWITCH && defined(__x86_64__)
/* Frame (low to high): r15, r14, r13, r12, rbx, rbp, return address: 56 bytes. The floating-
 * point control state (MXCSR, x87 control word) is not part of it: see emu_fpstate in
 * emu_runtime.h.
 * The switch ends with `ret`, which the processor predicts from its return stack: the return
 * address pushed by this switch's call. The runtime's fibers wait at a few call sites (the
 * switch inside each collective), so the fiber resumed was almost always suspended at the
 * same site as the one leaving and the prediction is right, down to the returns that follow.
 * Popping the address and jumping to it instead (predicted by the indirect-branch predictor)
 * is faster only between contexts suspended at different sites, and leaves the return stack
 * one entry off, so that every switch costs a mispredicted return in the resumed fiber: a
 * 256-thread barrier took 56 instead of 35 ns per thread that way (measured on a loaded
 * 2-core Xeon).
 * That holds while the fibers wait at one site. They do not at the start and the end of every
 * block (a thread starts where it waited for the block, and ends where the others wait in a
 * collective) nor wherever a kernel's collectives differ, and there every resumed fiber
 * mispredicted two or three returns (the leave, the collective, the kernel's call). So the
 * kernel libraries switch fibers themselves (emu_abi.h, collective; the prelude's
 * switch_fiber): the same frame, resumed by `pop`s and an indirect jump at the kernel's call
 * site, which the branch predictor learns per site, and no return through the runtime. This
 * switch then serves the worker's own context and the fallback (sanitizer builds, aarch64
 * libraries). Measured (one worker, 256-thread blocks, thread CPU time, 2-core EPYC): one
 * barrier per thread 40.2 -> 14.6 ns per thread, eight 92 -> 66 ns. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cn_emu_switch_asm\n"
        ".hidden cn_emu_switch_asm\n"
        ".type cn_emu_switch_asm,@function\n"
        "cn_emu_switch_asm:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size cn_emu_switch_asm, .-cn_emu_switch_asm\n"
        ".p2align 4\n"
        ".globl cn_emu_start_asm\n"
        ".hidden cn_emu_start_asm\n"
        ".type cn_emu_start_asm,@function\n"
        "cn_emu_start_asm:\n"
        "    .cfi_startproc\n"
        "    .cfi_undefined rip\n"
        "    movq %r13, %rdi\n"
        "    callq *%r12\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size cn_emu_start_asm, .-cn_emu_start_asm\n");
#define EMU_FRAME_BYTES 56
#elif EMU_ASM_SWITCH && defined(__aarch64__)
/* Frame (low to high): x19..x30 (96 bytes), d8..d15 (64): 160 bytes. Returns with `ret`, as
 * on x86-64 (return-stack prediction; also, with branch target identification a `br` could
 * land only on a BTI instruction, which the code after a call is not). FPCR is not part of
 * the frame: see emu_fpstate in emu_runtime.h. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cn_emu_switch_asm\n"
        ".hidden cn_emu_switch_asm\n"
        ".type cn_emu_switch_asm,%function\n"
        "cn_emu_switch_asm:\n"
        "    sub sp, sp, #160\n"
        "    stp x19, x20, [sp, #0]\n"
        "    stp x21, x22, [sp, #16]\n"
        "    stp x23, x24, [sp, #32]\n"
        "    stp x25, x26, [sp, #48]\n"
        "    stp x27, x28, [sp, #64]\n"
        "    stp x29, x30, [sp, #80]\n"
        "    stp d8, d9, [sp, #96]\n"
        "    stp d10, d11, [sp, #112]\n"
        "    stp d12, d13, [sp, #128]\n"
        "    stp d14, d15, [sp, #144]\n"
        "    mov x9, sp\n"
        "    str x9, [x0]\n"
        "    mov sp, x1\n"
        "    ldp x19, x20, [sp, #0]\n"
        "    ldp x21, x22, [sp, #16]\n"
        "    ldp x23, x24, [sp, #32]\n"
        "    ldp x25, x26, [sp, #48]\n"
        "    ldp x27, x28, [sp, #64]\n"
        "    ldp x29, x30, [sp, #80]\n"
        "    ldp d8, d9, [sp, #96]\n"
        "    ldp d10, d11, [sp, #112]\n"
        "    ldp d12, d13, [sp, #128]\n"
        "    ldp d14, d15, [sp, #144]\n"
        "    add sp, sp, #160\n"
        "    ret\n"
        ".size cn_emu_switch_asm, .-cn_emu_switch_asm\n"
        ".p2align 4\n"
        ".globl cn_emu_start_asm\n"
        ".hidden cn_emu_start_asm\n"
        ".type cn_emu_start_asm,%function\n"
        "cn_emu_start_asm:\n"
        "    mov x0, x20\n"
        "    blr x19\n"
        "    brk #0\n"
        ".size cn_emu_start_asm, .-cn_emu_start_asm\n");
#define EMU_FRAME_BYTES 160
#endif

#if EMU_ASM_SWITCH
extern void cn_emu_start_asm(void) EMU_INTERNAL;
#endif

/* ---- switching ---------------------------------------------------------------------------- */

#if EMU_ASAN
/* The context that switched to the running one, so that a context whose stack ASan had not
 * told us yet (a worker's own stack) learns it when the first fiber starts or resumes. */
static _Thread_local emu_context *emu_switch_origin;

static void emu_asan_arrived(emu_context *self)
{
    const void *low = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(self ? self->asan_fake_stack : NULL, &low, &size);
    emu_context *origin = emu_switch_origin;
    if (origin != NULL && origin->stack_low == NULL) {
        origin->stack_low = low;
        origin->stack_size = size;
    }
}
#endif

typedef struct emu_start_record {
    void (*entry)(void *);
    void *arg;
} emu_start_record;

#if EMU_ASAN || EMU_TSAN || !EMU_ASM_SWITCH
void emu_context_switch(emu_context *from, emu_context *to, int from_done)
{
#if EMU_TSAN
    if (from->tsan_fiber == NULL)
        from->tsan_fiber = __tsan_get_current_fiber(); /* a worker's own stack */
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
#if EMU_ASAN
    emu_switch_origin = from;
    __sanitizer_start_switch_fiber(from_done ? NULL : &from->asan_fake_stack, to->stack_low, to->stack_size);
#else
    (void)from_done;
#endif
#if EMU_ASM_SWITCH
    cn_emu_switch_asm(&from->sp, to->sp);
#else
    swapcontext((ucontext_t *)from->ucontext, (ucontext_t *)to->ucontext);
#endif
#if EMU_ASAN
    emu_asan_arrived(from);
#endif
}
#endif

#if EMU_ASAN || !EMU_ASM_SWITCH
/* First code a new fiber runs (through the fallback switch, or under ASan): tells ASan the
 * switch is complete, then runs the entry. */
static void emu_fiber_begin(void (*entry)(void *), void *arg)
{
#if EMU_ASAN
    emu_asan_arrived(NULL);
#endif
    entry(arg);
    abort(); /* entries switch away for good instead of returning */
}
#endif

#if EMU_ASAN && EMU_ASM_SWITCH
typedef struct emu_asan_start {
    void (*entry)(void *);
    void *arg;
} emu_asan_start;

static void emu_asan_start_entry(void *p)
{
    emu_asan_start s = *(emu_asan_start *)p;
    emu_fiber_begin(s.entry, s.arg);
}
#endif

#if !EMU_ASM_SWITCH
static void emu_ucontext_start(unsigned int hi, unsigned int lo)
{
    emu_start_record *r = (emu_start_record *)(((uintptr_t)hi << 16 << 16) | (uintptr_t)lo);
    emu_fiber_begin(r->entry, r->arg);
}
#endif

void emu_context_forget(emu_context *ctx)
{
#if EMU_TSAN
    if (ctx->tsan_fiber != NULL)
        __tsan_destroy_fiber(ctx->tsan_fiber);
#endif
    ctx->tsan_fiber = NULL;
}

int emu_context_jump_to(emu_context *ctx)
{
    int announced = 0;
#if EMU_TSAN
    if (ctx->tsan_fiber != NULL && ctx->tsan_fiber != __tsan_get_current_fiber())
        __tsan_switch_to_fiber(ctx->tsan_fiber, 0);
#endif
#if EMU_ASAN
    /* From a fiber's stack to the worker's: ASan must know, or it goes on taking the fiber's
     * stack for the thread's (its no-return handling and LeakSanitizer's scan of the thread
     * then read the wrong range). */
    if (ctx->stack_low != NULL) {
        __sanitizer_start_switch_fiber(NULL, ctx->stack_low, ctx->stack_size);
        announced = 1;
    }
#endif
    (void)ctx;
    return announced;
}

void emu_context_landed(int announced)
{
#if EMU_ASAN
    if (announced)
        __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#else
    (void)announced;
#endif
}

void emu_context_make(emu_context *ctx, void *stack_low, size_t stack_size, void (*entry)(void *), void *arg)
{
    emu_context_forget(ctx); /* a context made again (the next launch) */
#if EMU_TSAN
    ctx->tsan_fiber = __tsan_create_fiber(0);
#endif
    ctx->stack_low = stack_low;
    ctx->stack_size = stack_size;
    ctx->asan_fake_stack = NULL;
#if EMU_ASAN
    /* The frames of a fiber left for good (the kernel's thread function never returns) keep
     * their redzones poisoned: clear them before the stack is used again. */
    __asan_unpoison_memory_region(stack_low, stack_size);
#endif
    char *top = (char *)stack_low + stack_size;
#if EMU_ASM_SWITCH
#if EMU_ASAN
    /* The start record lives at the top of the fiber's own stack. */
    top -= 64;
    emu_asan_start *s = (emu_asan_start *)top;
    s->entry = entry;
    s->arg = arg;
    entry = emu_asan_start_entry;
    arg = s;
#endif
    top = (char *)((uintptr_t)top & ~(uintptr_t)15) - 16;
    uint64_t *frame = (uint64_t *)(top - EMU_FRAME_BYTES);
    memset(frame, 0, EMU_FRAME_BYTES);
#if defined(__x86_64__)
    frame[2] = (uint64_t)(uintptr_t)arg;   /* r13 */
    frame[3] = (uint64_t)(uintptr_t)entry; /* r12 */
    frame[6] = (uint64_t)(uintptr_t)cn_emu_start_asm;
#else
    frame[0] = (uint64_t)(uintptr_t)entry;             /* x19 */
    frame[1] = (uint64_t)(uintptr_t)arg;               /* x20 */
    frame[11] = (uint64_t)(uintptr_t)cn_emu_start_asm; /* x30: where the switch returns */
#endif
    ctx->sp = frame;
#else
    top -= 64;
    emu_start_record *r = (emu_start_record *)top;
    r->entry = entry;
    r->arg = arg;
    ucontext_t *uc = (ucontext_t *)ctx->ucontext;
    getcontext(uc);
    uc->uc_stack.ss_sp = stack_low;
    uc->uc_stack.ss_size = (size_t)(top - (char *)stack_low) & ~(size_t)15;
    uc->uc_link = NULL;
    uintptr_t p = (uintptr_t)r;
    makecontext(uc, (void (*)(void))emu_ucontext_start, 2, (unsigned int)(p >> 16 >> 16), (unsigned int)p);
#endif
}

/* ---- stacks -------------------------------------------------------------------------------- */

/* CUDA gives a thread up to 512 KiB of local memory; a fiber gets that much stack (address
 * space only: a page is committed when first touched, usually a few per fiber). Below each
 * stack, a guard region: an overflow faults there (and the fault names the stack and the
 * thread). Kernels are compiled with -fstack-clash-protection, which touches every page of a
 * large frame in order, so no frame can step over the guard into the next stack. */
#define EMU_STACK_BYTES ((size_t)512 * 1024)
#define EMU_GUARD_BYTES ((size_t)64 * 1024)

static atomic_size_t emu_stacks_reserved; /* stacks of every pool of the process */

size_t emu_stack_pools_total(void) { return atomic_load(&emu_stacks_reserved); }

void emu_stack_pool_release(emu_stack_pool *pool)
{
    if (pool->base != NULL) {
#if EMU_ASAN
        /* frames left for good poisoned their redzones: the addresses may be mapped again */
        __asan_unpoison_memory_region(pool->base, pool->count * pool->stride);
#endif
        munmap(pool->base, pool->count * pool->stride);
        atomic_fetch_sub(&emu_stacks_reserved, pool->count);
    }
    free(pool->ucontexts);
    memset(pool, 0, sizeof *pool);
}

int emu_stack_pool_reserve(emu_stack_pool *pool, size_t count)
{
    if (pool->count >= count)
        return 0;
    emu_stack_pool_release(pool);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t guard = EMU_GUARD_BYTES > page ? EMU_GUARD_BYTES : page;
    const size_t stride = guard + EMU_STACK_BYTES;
    /* One mapping, PROT_NONE, then each stack made usable: 2 mappings per stack (guard and
     * stack), the kernel's limit on mappings (vm.max_map_count) being the scarce resource. */
    char *base = mmap(NULL, count * stride, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return -1;
    for (size_t i = 0; i < count; ++i) {
        if (mprotect(base + i * stride + guard, EMU_STACK_BYTES, PROT_READ | PROT_WRITE) != 0) {
            munmap(base, count * stride);
            return -1;
        }
    }
#if !EMU_ASM_SWITCH
    pool->ucontexts = calloc(count, sizeof(ucontext_t));
    if (pool->ucontexts == NULL) {
        munmap(base, count * stride);
        return -1;
    }
#endif
    pool->base = base;
    pool->count = count;
    pool->stride = stride;
    pool->guard = guard;
    pool->stack_size = EMU_STACK_BYTES;
    atomic_fetch_add(&emu_stacks_reserved, count);
    return 0;
}

long emu_stack_pool_guard_hit(const emu_stack_pool *pool, uintptr_t addr)
{
    const uintptr_t base = (uintptr_t)pool->base;
    if (pool->base == NULL || addr < base || addr >= base + pool->count * pool->stride)
        return -1;
    const uintptr_t off = addr - base;
    return off % pool->stride < pool->guard ? (long)(off / pool->stride) : -1;
}

void *emu_stack_low(const emu_stack_pool *pool, size_t i)
{
    return pool->base + i * pool->stride + (pool->stride - pool->stack_size);
}

/* ---- switch benchmark ---------------------------------------------------------------------- */

typedef struct emu_pingpong {
    emu_context main, fiber;
    ucontext_t uc_main, uc_fiber;
} emu_pingpong;

/* Both sides of a ping-pong run this same loop, so every switch leaves from and resumes at
 * the same call site, as the fibers of a block do at a collective (see the return-stack note
 * at the switch): one copy of the loop for both. */
static void EMU_ONE_COPY emu_pingpong_loop(emu_context *self, emu_context *other, long trips)
{
    for (long i = 0; i < trips; ++i)
        emu_context_switch(self, other, 0);
}

static void EMU_ONE_COPY emu_pingpong_uc_loop(ucontext_t *self, ucontext_t *other, long trips)
{
    for (long i = 0; i < trips; ++i)
        swapcontext(self, other);
}

static void emu_pingpong_fiber(void *p)
{
    emu_pingpong *pp = (emu_pingpong *)p;
    for (;;)
        emu_pingpong_loop(&pp->fiber, &pp->main, LONG_MAX);
}

static emu_pingpong *emu_uc_pingpong;

static void emu_pingpong_ucontext(void)
{
    for (;;)
        emu_pingpong_uc_loop(&emu_uc_pingpong->uc_fiber, &emu_uc_pingpong->uc_main, LONG_MAX);
}

/* CPU time of this thread: on a loaded machine wall time would count the time the thread
 * waited for a core, which is not the switch's cost. */
static double emu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Time per switch of one ping-pong run of `trips` round trips. */
static double emu_fiber_run_ns(emu_pingpong *pp, long trips)
{
    const double t0 = emu_now_ns();
    emu_pingpong_loop(&pp->main, &pp->fiber, trips);
    return (emu_now_ns() - t0) / (2.0 * (double)trips);
}

#if !EMU_ASAN
static double emu_ucontext_run_ns(emu_pingpong *pp, long trips)
{
    const double t0 = emu_now_ns();
    emu_pingpong_uc_loop(&pp->uc_main, &pp->uc_fiber, trips);
    return (emu_now_ns() - t0) / (2.0 * (double)trips);
}
#endif

/* Both switches are measured the same way: EMU_BENCH_ROUNDS rounds, alternating one run of
 * the runtime's switch and one of swapcontext so that a disturbance (another process, a
 * frequency change) falls on both alike, each run timed in this thread's CPU time, and the
 * best run of each side kept. A run of swapcontext makes n / 50 round trips (at least 200),
 * so that both runs of a round last about as long. One warm-up run of each first. */
#define EMU_BENCH_ROUNDS 7

int emu_switch_benchmark(long n, double *fiber_ns, double *ucontext_ns)
{
    if (n < 1)
        n = 1;
    emu_stack_pool pool = {0};
    if (emu_stack_pool_reserve(&pool, 2) != 0)
        return -1;
    emu_pingpong *pp = calloc(1, sizeof *pp);
    if (pp == NULL) {
        emu_stack_pool_release(&pool);
        return -1;
    }
    /* The runtime's own switch (ucontext where no assembly switch exists). */
    pp->main.ucontext = &pp->uc_main;
    pp->fiber.ucontext = &pp->uc_fiber;
    emu_context_make(&pp->fiber, emu_stack_low(&pool, 0), pool.stack_size, emu_pingpong_fiber, pp);
    emu_context_switch(&pp->main, &pp->fiber, 0); /* starts the fiber */
    (void)emu_fiber_run_ns(pp, n / 10 + 1); /* warm-up */
    double best_fiber = 0.0;

    /* swapcontext, the usual portable way, on a context of its own (the fallback runtime's
     * contexts above are ucontexts too, but go through the runtime's wrapper). */
    const long m = n / 50 > 200 ? n / 50 : 200;
    emu_uc_pingpong = pp;
    getcontext(&pp->uc_fiber);
    pp->uc_fiber.uc_stack.ss_sp = emu_stack_low(&pool, 1);
    pp->uc_fiber.uc_stack.ss_size = pool.stack_size;
    pp->uc_fiber.uc_link = NULL;
    makecontext(&pp->uc_fiber, emu_pingpong_ucontext, 0);
#if EMU_ASAN
    /* ASan does not follow raw swapcontext stack switches well; the figure is not needed
     * under the sanitizers. */
    double best_uc = 0.0;
    (void)m;
    for (int r = 0; r < EMU_BENCH_ROUNDS; ++r) {
        const double f = emu_fiber_run_ns(pp, n);
        best_fiber = r == 0 || f < best_fiber ? f : best_fiber;
    }
#else
    swapcontext(&pp->uc_main, &pp->uc_fiber); /* starts the ucontext fiber */
    (void)emu_ucontext_run_ns(pp, m / 10 + 1); /* warm-up */
    double best_uc = 0.0;
    for (int r = 0; r < EMU_BENCH_ROUNDS; ++r) {
        const double f = emu_fiber_run_ns(pp, n);
        const double u = emu_ucontext_run_ns(pp, m);
        best_fiber = r == 0 || f < best_fiber ? f : best_fiber;
        best_uc = r == 0 || u < best_uc ? u : best_uc;
    }
#endif
    *fiber_ns = best_fiber;
    *ucontext_ns = best_uc;
    /* Both fibers are parked for good; their stacks go with the pool. */
    free(pp);
    emu_stack_pool_release(&pool);
    return 0;
}
