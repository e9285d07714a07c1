/* The ABI between the CPU emulator's C runtime (src/cunumpy/_core/emu/) and a kernel
 * library built from CUDA source by the host C++ compiler against the prelude
 * (cunumpy/_emulation/include/cunumpy_emu/prelude.h).
 *
 * Where this file lives: the one source copy is src/cunumpy/_core/emu/emu_abi.h (the
 * runtime includes it from here). meson installs a copy beside the prelude, as
 * cunumpy/_emulation/include/cunumpy_emu/emu_abi.h; the prelude includes "emu_abi.h" from
 * its own directory when that copy exists and otherwise reaches this file through the
 * source tree (../../../_core/emu/emu_abi.h), so both an installed package and a checkout work.
 *
 * Plain C, includable from C and C++. Any change to a struct layout or to the meaning of a
 * call bumps CUNUMPY_EMU_ABI_VERSION; the Python layer compares the library's
 * cunumpy_emu_abi_version() with cunumpy._core.EMU_ABI_VERSION before launching.
 *
 * Symbols a kernel library exports, with C linkage:
 *   int  cunumpy_emu_abi_version(void);                 (prelude)
 *   void cunumpy_emu_bind(cunumpy_emu_worker *w);       (prelude) stores w in the library's
 *        thread_local pointer; the runtime calls it on every worker thread before that
 *        thread runs blocks of a launch.
 *   void cunumpy_emu_thread_<k>(void *const *args);    runs the CUDA thread of its fiber, the
 *        worker's `current` one (fiber mode), in every block of the launch: at the end of
 *        each it calls collective(CUNUMPY_EMU_OP_EXIT), which resumes it for the next block,
 *        so it never returns (a thread function that returns is finished by the runtime).
 *        args[i] points at the value of parameter i (CUDA's kernelParams convention).
 *   void cunumpy_emu_block_<k>(cunumpy_emu_worker *w, void *const *args);  runs every thread
 *        of w's current block as a plain loop, x fastest (loop mode: no barrier, no warp
 *        operation). The prelude's CUNUMPY_EMU_EXPORT_KERNEL(k, kernel) defines both.
 *
 * The runtime's Python entry (src/cunumpy/_core/emu/emu_module.c):
 *   cunumpy._core.emu_launch(bind, thread_fn, block_fn, grid, block, args, *, shared_mem=0,
 *                            fibers=False, checked=False, workers=0, kernel_name="kernel")
 *   bind/thread_fn/block_fn: the addresses above as ints (block_fn may be 0 with fibers=True,
 *   thread_fn 0 without); grid/block: 1 to 3 positive ints; args: None or an object exposing
 *   the void* array through the buffer protocol (copied, not kept). Releases the GIL while the
 *   blocks run; launches from several threads run one after the other. Errors: TypeError or
 *   ValueError naming the argument; RuntimeError "emulated kernel '<name>' failed in block
 *   (x, y, z)[, thread (x, y, z)]: <what>" for a trap, an assertion, barrier divergence,
 *   inconsistent warp operations, or a fault under checked=True. When several blocks fail,
 *   the lowest block index (x fastest) is reported: blocks are handed out in that order and
 *   every block handed out runs to its end.
 *   Also: cunumpy._core.EMU_ABI_VERSION, EMU_CONTEXT_SWITCH ("x86-64 assembly", "aarch64
 *   assembly" or "ucontext"), emu_workers() (the default worker count) and
 *   emu_switch_benchmark(n) -> (fiber_ns, ucontext_ns).
 */
#ifndef CUNUMPY__CORE_EMU_EMU_ABI_H
#define CUNUMPY__CORE_EMU_EMU_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUNUMPY_EMU_ABI_VERSION 3

/* CUDA's warp size; warps are formed from the linear thread index (x fastest). */
#define CUNUMPY_EMU_WARP_SIZE 32

/* Shuffle kinds for cunumpy_emu_api.shfl. */
#define CUNUMPY_EMU_SHFL_IDX 0
#define CUNUMPY_EMU_SHFL_UP 1
#define CUNUMPY_EMU_SHFL_DOWN 2
#define CUNUMPY_EMU_SHFL_XOR 3

typedef struct cunumpy_emu_dim3 {
    unsigned int x, y, z;
} cunumpy_emu_dim3;

/* One CUDA thread (one fiber in fiber mode; one loop iteration in loop mode). In loop mode
 * the block loop owns the struct and rewrites thread_idx/linear at every iteration. */
typedef struct cunumpy_emu_thread {
    cunumpy_emu_dim3 thread_idx;
    unsigned int linear; /* thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z) */
    uint64_t result;     /* what the last collective call of the thread returns (see collective) */
    /* runtime-private fields may follow; kernel code reads only the ones above */
} cunumpy_emu_thread;

struct cunumpy_emu_api;

/* One OS worker thread of a launch. It runs one block at a time, and in fiber mode every
 * fiber of that block runs on this OS thread, so thread_local storage in the kernel library
 * (the prelude's __shared__) is one copy per running block. */
typedef struct cunumpy_emu_worker {
    cunumpy_emu_thread *current; /* the running CUDA thread; updated at every fiber switch */
    cunumpy_emu_dim3 block_idx, block_dim, grid_dim;
    void *dynamic_shared;        /* extern __shared__ storage of the current block, 16-byte aligned */
    size_t dynamic_shared_bytes; /* the launch's shared_mem */
    const struct cunumpy_emu_api *api;
    char *static_shared;         /* base of the block's __shared__ variables (offsets from shared_register) */
    /* runtime-private fields follow; the prelude reads only the ones above */
} cunumpy_emu_worker;

/* Operations of cunumpy_emu_api.collective: the shuffle kinds above, then these. */
#define CUNUMPY_EMU_OP_SYNCWARP 4
#define CUNUMPY_EMU_OP_BALLOT 5
#define CUNUMPY_EMU_OP_BARRIER 6 /* value: the predicate (__syncthreads_count and friends); arg: the
                                  * call's source line, 0 when unknown (threads alive at two lines
                                  * at once are barrier divergence) */
#define CUNUMPY_EMU_OP_EXIT 7    /* the thread returned: it waits for the next block */
/* Added to an operation by a library that switches fibers itself (see collective). */
#define CUNUMPY_EMU_OP_SWITCH 0x100

/* What collective returns: when save_sp is not NULL, the calling fiber must store its stack
 * pointer in *save_sp and continue on load_sp, in the frame layout of the runtime's switch
 * (emu_fiber.c: the callee-saved registers r15, r14, r13, r12, rbx, rbp from low to high
 * addresses, then the address to resume at), by `pop`s and an indirect jump. */
typedef struct cunumpy_emu_wait {
    void **save_sp;
    void *load_sp;
} cunumpy_emu_wait;

/* Access kinds for cunumpy_emu_api.access and bad_access (bits). */
#define CUNUMPY_EMU_ACCESS_WRITE 1
#define CUNUMPY_EMU_ACCESS_ATOMIC 2
/* Events of a library built for performance analysis (checks mode 3 with CUNUMPY_EMU_ANALYSIS;
 * addr is NULL and size 0): a basic block of the kernel's code starts (GCC's
 * -fsanitize-coverage=trace-pc), a thread reaches a block-wide barrier, a comparison is made
 * (-fsanitize-coverage=trace-cmp). */
#define CUNUMPY_EMU_ACCESS_BLOCK 16
#define CUNUMPY_EMU_ACCESS_BARRIER 32
#define CUNUMPY_EMU_ACCESS_COMPARE 64
#define CUNUMPY_EMU_ACCESS_EVENTS (CUNUMPY_EMU_ACCESS_BLOCK | CUNUMPY_EMU_ACCESS_BARRIER | CUNUMPY_EMU_ACCESS_COMPARE)

/* How a kernel library checks its memory accesses (the prelude's CUNUMPY_EMU_CHECKS):
 *   0  not at all (the explicit performance option);
 *   1  inline shadow checks (GCC -fsanitize=kernel-address with the shadow at
 *      CUNUMPY_EMU_SHADOW_OFFSET): the runtime poisons the bytes around every argument, a check
 *      that fails calls bad_access;
 *   2  a call per access (the same instrumentation, outlined): access() checks each address
 *      against the launch's memory (where the shadow cannot be mapped);
 *   3  a call per access with reads, writes and atomics told apart (GCC -fsanitize=thread
 *      instrumentation): access() does memcheck, racecheck and initcheck. */
#define CUNUMPY_EMU_SHADOW_OFFSET 0x200000000000ULL

/* Collective operations. Every call is made by the current CUDA thread of `w`; the fibers
 * named by the call meet, the result is computed for all of them, then they resume. Masks
 * name lanes of the caller's warp; the caller must be in its mask and every lane named must
 * exist, be alive and call the same operation with the same mask, otherwise the launch fails
 * with a RuntimeError naming the kernel, block and thread (never a hang). In loop mode every
 * collective fails the launch the same way (the kernel needed fiber mode). */
typedef struct cunumpy_emu_api {
    int abi_version; /* CUNUMPY_EMU_ABI_VERSION of the runtime */
    void (*syncthreads)(cunumpy_emu_worker *w);
    /* Barrier that returns, to every thread of the block, how many threads passed a nonzero
     * predicate; __syncthreads_and/_or derive from it. */
    int (*syncthreads_count)(cunumpy_emu_worker *w, int predicate);
    void (*syncwarp)(cunumpy_emu_worker *w, unsigned int mask);
    /* kind: CUNUMPY_EMU_SHFL_*; value: the raw bits of a value of up to 8 bytes; arg: source
     * lane (idx), delta (up/down) or lane mask (xor); width: a power of two in [1, 32]. A
     * source lane outside the segment, or not named in mask, yields the caller's own value. */
    uint64_t (*shfl)(cunumpy_emu_worker *w, int kind, unsigned int mask, uint64_t value, int arg, int width);
    unsigned int (*ballot)(cunumpy_emu_worker *w, unsigned int mask, int predicate);
    /* Lanes of the caller's warp that reach this same call site together (the runtime lets
     * the warp run until every live lane is blocked, then groups lanes by call site). */
    unsigned int (*activemask)(cunumpy_emu_worker *w);
    /* Fails the launch with `message` (a RuntimeError naming kernel, block and thread);
     * never returns. */
    void (*trap)(cunumpy_emu_worker *w, const char *message);
    /* Places a __shared__ variable of the library (called once per declaration and template
     * instance): returns its offset from static_shared, the same in every block and worker. */
    size_t (*shared_register)(cunumpy_emu_worker *w, size_t size, size_t align, size_t itemsize, const char *name);
    /* An access that an inline check found outside the launch's memory (checks mode 1): fails
     * the launch with a memcheck error; never returns. `pc` is the access's code address. */
    void (*bad_access)(cunumpy_emu_worker *w, const void *addr, size_t size, int kind, const void *pc);
    /* Every access of checks modes 2 and 3, before it happens: returns when it may happen,
     * fails the launch (never returns) when memcheck refuses it. */
    void (*access)(cunumpy_emu_worker *w, const void *addr, size_t size, int kind, const void *pc);
    /* __threadfence() under checks mode 3 (racecheck orders a block's writes before its later
     * atomics). */
    void (*fence)(cunumpy_emu_worker *w);
    /* Every collective of the ABI in one call (op: CUNUMPY_EMU_SHFL_*, CUNUMPY_EMU_OP_*; mask,
     * value, arg, width as for shfl; the predicate of a barrier or a ballot in value). Its
     * result is in the calling thread's `result` once the call is over: after the switch when
     * the return value asks for one (only with CUNUMPY_EMU_OP_SWITCH in op; without it the
     * runtime switches, and the call returns when the thread may go on). A library that
     * switches itself resumes the next fiber by an indirect jump, predicted per call site,
     * instead of a return through the runtime, which the processor's return-address
     * prediction gets wrong whenever the fiber resumed waits at another call site: at the
     * start and the end of every block and wherever a kernel's collectives differ. */
    cunumpy_emu_wait (*collective)(cunumpy_emu_worker *w, int op, unsigned int mask, uint64_t value, int arg,
                                   int width);
} cunumpy_emu_api;

typedef int (*cunumpy_emu_abi_version_fn)(void);
typedef void (*cunumpy_emu_bind_fn)(cunumpy_emu_worker *w);
typedef void (*cunumpy_emu_thread_fn)(void *const *args);
typedef void (*cunumpy_emu_block_fn)(cunumpy_emu_worker *w, void *const *args);

#ifdef __cplusplus
}
#endif

#endif /* CUNUMPY__CORE_EMU_EMU_ABI_H */
