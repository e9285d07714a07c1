/* The CPU emulator's memory checks (pure C, no Python): memcheck, racecheck and initcheck.
 *
 * A launch describes the memory it gives the kernel as regions (pointer and view arguments,
 * pointer fields of structs: the Python layer names them), and the runtime adds what its own
 * code and the kernel library's built-ins touch (internal ranges: parameter buffer, worker
 * state, fiber stacks, loaded modules, TLS). The __shared__ variables of a block live in a
 * per-worker arena laid out by emu_shared_register, static variables first, then the
 * launch's dynamic shared memory.
 *
 * Checks mode 1 (inline, the default): the kernel library checks every access against a
 * shadow byte per 8 bytes at CUNUMPY_EMU_SHADOW_OFFSET (GCC's kernel-address sanitizer
 * instrumentation with that offset). Before a launch the bytes within EMU_REDZONE of every
 * region, and every byte of the arena but the variables, are poisoned (except internal and
 * region bytes); a failed check calls bad_access, which names the variable. After the launch
 * the shadow is cleared again.
 * Modes 2 and 3 call emu_check_access for every access, which answers the same question from
 * the region table (no shadow), and in mode 3 also tracks who read and wrote what for
 * racecheck and initcheck. */
#ifndef CUNUMPY__CORE_EMU_EMU_CHECK_H
#define CUNUMPY__CORE_EMU_EMU_CHECK_H

#include "emu_abi.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define EMU_CHECK_INTERNAL __attribute__((visibility("hidden")))
#else
#define EMU_CHECK_INTERNAL
#endif

/* How far before the start and past the end of a region a stray access is still caught by the
 * checks: the region's own size, at least EMU_REDZONE and at most EMU_REDZONE_MAX (farther ones
 * are caught only when they hit unmapped memory). A larger redzone costs a larger write to the
 * shadow before and after each launch (an eighth of it). */
#define EMU_REDZONE ((uintptr_t)64 * 1024)
#define EMU_REDZONE_MAX ((uintptr_t)4 * 1024 * 1024)

static inline uintptr_t emu_redzone_of(uintptr_t lo, uintptr_t hi)
{
    const uintptr_t size = hi - lo;
    return size < EMU_REDZONE ? EMU_REDZONE : (size > EMU_REDZONE_MAX ? EMU_REDZONE_MAX : size);
}

/* The arena of a worker: a redzone, the static __shared__ variables in EMU_STATIC_SHARED_BYTES
 * (the limit of one kernel's static variables; CUDA's is 48 KiB), a redzone, then dynamic shared
 * memory, then a redzone. Offsets of variables count from the start of the static part. */
#define EMU_STATIC_SHARED_BYTES ((size_t)256 * 1024)
#define EMU_STATIC_SHARED_OFFSET ((size_t)EMU_REDZONE)
#define EMU_DYNAMIC_SHARED_OFFSET (EMU_STATIC_SHARED_OFFSET + EMU_STATIC_SHARED_BYTES + (size_t)EMU_REDZONE)

enum {
    EMU_REGION_CONST = 1,       /* a const pointer parameter: the kernel should not write it */
    EMU_REGION_OUTPUT_ONLY = 2, /* initcheck: reads before a write are reported */
};

/* Memory a launch gives the kernel. */
typedef struct emu_region {
    uintptr_t lo, hi; /* the bytes the kernel may access, [lo, hi) */
    uintptr_t base;   /* element 0: indexes in reports count from here */
    size_t itemsize;
    int flags;
    char name[96];  /* "out", "args.efield" */
    char what[128]; /* "float64, 64 elements", for reports */
} emu_region;

/* One __shared__ variable of a kernel library. */
typedef struct emu_shared_decl {
    size_t offset, size, itemsize;
    char name[64];
} emu_shared_decl;

/* The static __shared__ layout of one kernel library, grown as declarations register. */
typedef struct emu_shared_layout {
    const void *library; /* the library's bind function: its identity */
    size_t used;         /* bytes of the arena's static part in use */
    size_t count, cap;
    emu_shared_decl *decls; /* by increasing offset */
    struct emu_shared_layout *next;
} emu_shared_layout;

struct emu_span;
struct emu_cell;
struct emu_report_group;

/* What the checks keep per worker (embedded in the runtime's worker). */
typedef struct emu_check_worker {
    char *arena; /* the worker's __shared__ arena (a mapping of arena_size bytes) */
    size_t arena_size;
    const emu_shared_layout *arena_layout; /* whose variables the arena's shadow shows (mode 1) */
    size_t arena_decls;                    /* how many of them */
    size_t arena_dynamic;                  /* the dynamic bytes its shadow shows as accessible */
    int arena_dynamic_valid;
    /* the current block (racecheck, initcheck) */
    uint64_t block_linear;
    uint32_t block_epoch;  /* barriers completed in the block */
    uint32_t warp_gen[32]; /* __syncwarp() completions of each warp of the block */
    unsigned char *atomic_done; /* per thread of the block: made an atomic access */
    size_t atomic_cap;
    struct emu_cell *shared_cells; /* racecheck: per arena byte in use */
    unsigned char *shared_written; /* initcheck: per arena byte in use */
    size_t shared_cap;             /* bytes covered by the two tables */
    size_t shared_dirty;           /* the tables' entries from 0 to here may be set */
#define EMU_SPAN_HINTS 4
    /* the spans of the worker's recent accesses (this launch's): a kernel's accesses go to a
     * few arrays in turn (axpy: x, y, y), each found again without a search */
    struct emu_span *span_hint[EMU_SPAN_HINTS];
    unsigned int span_hint_next; /* the entry a miss replaces */
    /* ranges of this worker that the kernel's code touches (its state, stacks, TLS) */
    uintptr_t own[16][2];
    int n_own;
} emu_check_worker;

typedef struct emu_check {
    int mode; /* the library's checks mode, CUNUMPY_EMU_CHECKS (0 to 3) */
    int racecheck, initcheck;
    const char *kernel_name;
    emu_region *regions; /* sorted by lo */
    size_t n_regions;
    struct emu_span *spans; /* unions of overlapping regions, sorted */
    size_t n_spans;
    uintptr_t *internal; /* [lo, hi) pairs, sorted and merged */
    size_t n_internal, cap_internal;
    uintptr_t *poisoned; /* shadow byte ranges written before the launch: [lo, hi) pairs */
    size_t n_poisoned, cap_poisoned;
    size_t shared_mem;
    char dynamic_name[96]; /* the extern __shared__ names, for reports */
    emu_shared_layout *layout;
    /* racecheck across blocks: each block's count of __threadfence() calls */
    uint32_t *block_fences;
    uint64_t n_blocks;
    unsigned int threads_per_block;
    cunumpy_emu_dim3 grid, block;
    uintptr_t pc_base; /* the kernel library's load address: code addresses are kept from here */
    unsigned int stamp; /* this launch's, in racecheck's cells */
    /* collected race and init findings, grouped by kind, variable and the pair of code
     * addresses (the launch fails with them at its end, the largest groups first) */
    pthread_mutex_t lock;
    int n_reports;                /* groups */
    int reports_dropped;          /* findings of groups beyond EMU_REPORT_GROUPS */
    uint64_t reports_total;       /* findings */
    struct emu_report_group *groups; /* EMU_REPORT_GROUPS, allocated at the first finding */
    char reports[6144];
} emu_check;

#define EMU_REPORT_GROUPS 64

/* Whether [lo, hi) overlaps the shadow mapping (its shadow gap included). */
EMU_CHECK_INTERNAL int emu_shadow_contains(uintptr_t lo, uintptr_t hi);

/* Maps the shadow (once per process); 1 when checks mode 1 can be used. */
EMU_CHECK_INTERNAL int emu_shadow_available(void);

/* The static __shared__ layout of `library` (created on first use). */
EMU_CHECK_INTERNAL emu_shared_layout *emu_shared_layout_of(const void *library);

/* Prepares `check` for a launch: sorts and merges regions, collects the runtime's own ranges
 * that do not depend on the workers, poisons the shadow (mode 1). 0, or -1 with `error` set. */
EMU_CHECK_INTERNAL int emu_check_begin(emu_check *check, char *error, size_t error_size);
/* Adds [lo, hi) to the ranges the kernel's code may touch (before emu_check_begin). */
EMU_CHECK_INTERNAL int emu_check_allow(emu_check *check, uintptr_t lo, uintptr_t hi);
/* Clears the shadow written for the launch and frees its tables. */
EMU_CHECK_INTERNAL void emu_check_end(emu_check *check);

/* Maps a worker's shared arena for a launch of `check` (and in mode 1 poisons its shadow:
 * everything but the library's variables and the launch's dynamic shared memory). 0, or -1
 * when out of memory. */
EMU_CHECK_INTERNAL int emu_check_arena(emu_check *check, emu_check_worker *cw);
/* Unpoisons a newly registered variable in an arena that shows `layout` (mode 1). */
EMU_CHECK_INTERNAL void emu_check_arena_add(emu_check_worker *cw, const emu_shared_layout *layout, size_t decl);
/* Records a range of the worker's own state (see own[] above); mode 1 clears its shadow. */
EMU_CHECK_INTERNAL void emu_check_worker_allow(const emu_check *check, emu_check_worker *cw, uintptr_t lo,
                                               uintptr_t hi);
EMU_CHECK_INTERNAL void emu_check_worker_release(emu_check_worker *cw);

/* Registers a __shared__ variable in `layout`: its offset in the arena's static part, or
 * (size_t)-1 when the static part is full (`error` then says why). The arenas given that show
 * the layout are updated (mode 1) under the same lock. */
EMU_CHECK_INTERNAL size_t emu_shared_register(emu_shared_layout *layout, size_t size, size_t align,
                                              size_t itemsize, const char *name, emu_check_worker *const *arenas,
                                              int n_arenas, char *error, size_t error_size);

/* Shadow byte writes (mode 1). */
EMU_CHECK_INTERNAL void emu_shadow_poison(uintptr_t lo, uintptr_t hi);
EMU_CHECK_INTERNAL void emu_shadow_clear(uintptr_t lo, uintptr_t hi);

/* What the runtime knows about an address, for a report: writes "a write of 8 bytes to 'out'
 * (...) at element 256 (byte offset 2048, 0 bytes past the end)" and returns 1 when the address
 * is near a region or in the arena, 0 otherwise. */
EMU_CHECK_INTERNAL int emu_check_describe(const emu_check *check, const emu_check_worker *cw, uintptr_t addr,
                                          size_t size, int kind, char *out, size_t out_size);

/* A code address as "<pc:/path/lib.so+0x1234>" (the Python layer turns it into file:line). */
EMU_CHECK_INTERNAL void emu_format_pc(const void *pc, char *out, size_t size);

/* The memcheck question for one access (modes 2 and 3): 0 allowed, -1 refused. Mode 3 also
 * records the access for racecheck and initcheck. */
EMU_CHECK_INTERNAL int emu_check_access(emu_check *check, emu_check_worker *cw, const cunumpy_emu_thread *t,
                                        uintptr_t addr, size_t size, int kind, const void *pc, char *error,
                                        size_t error_size);
/* The same, with a short path for plain accesses to the arguments (launches without racecheck). */
EMU_CHECK_INTERNAL int emu_check_access_plain(emu_check *check, emu_check_worker *cw, const cunumpy_emu_thread *t,
                                              uintptr_t addr, size_t size, int kind, const void *pc, char *error,
                                              size_t error_size);

/* Racecheck and initcheck bookkeeping of the worker's block: a new block (its tables reset),
 * a __threadfence() of a thread of the block. Barriers and __syncwarp() bump block_epoch and
 * warp_gen directly. */
EMU_CHECK_INTERNAL int emu_check_block_start(emu_check *check, emu_check_worker *cw);
EMU_CHECK_INTERNAL void emu_check_fence(emu_check *check, emu_check_worker *cw);

/* The report text of a launch's collected race and init findings ("" when none). */
EMU_CHECK_INTERNAL const char *emu_check_reports(emu_check *check, const char **kind);

#endif /* CUNUMPY__CORE_EMU_EMU_CHECK_H */
