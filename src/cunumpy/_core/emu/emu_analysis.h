/* Performance analysis of an emulated launch (pure C, no Python): what a GPU's memory system
 * and warp schedulers would see of the launch, collected from the accesses of a kernel library
 * built with checks mode 3 and CUNUMPY_EMU_ANALYSIS (the prelude then also reports the start of
 * every basic block and every __syncthreads(), see emu_abi.h's CUNUMPY_EMU_ACCESS_BLOCK).
 *
 * Every event (an access, a basic block, a barrier) is kept with the thread's linear index in
 * its block and the code address that made it. When a warp's events are complete (the end of
 * the block; in loop mode, where the threads of a block run one after the other, as soon as
 * the next warp starts), they are grouped: the k-th execution of an instruction (code address)
 * by each lane of a warp is one warp-level execution of it (a "request"), and each request is
 * counted by the rules of docs/guides/performance-analysis.md into a table per code address
 * and class. The Python layer maps code addresses to source lines. */
#ifndef CUNUMPY__CORE_EMU_EMU_ANALYSIS_H
#define CUNUMPY__CORE_EMU_EMU_ANALYSIS_H

#include "emu_check.h"

#include <stddef.h>
#include <stdint.h>

/* Classes of events (a row of the result is per code address and class). */
enum {
    EMU_AN_GLOBAL_LOAD = 0,
    EMU_AN_GLOBAL_STORE = 1,
    EMU_AN_SHARED_LOAD = 2,
    EMU_AN_SHARED_STORE = 3,
    EMU_AN_GLOBAL_ATOMIC = 4,
    EMU_AN_SHARED_ATOMIC = 5,
    EMU_AN_BLOCK = 6,   /* a basic block of the kernel's code */
    EMU_AN_BARRIER = 7, /* __syncthreads() and friends */
    EMU_AN_BRANCH = 8,  /* divergent warp-level executions of a branch (at its comparison's address) */
    EMU_AN_COMPARE = 9, /* events only: a comparison (the branch that follows is its line's) */
    EMU_AN_EXITED = 10  /* events only: the thread returned from the kernel */
};

/* The figures of one code address and class, summed over the launch's warp-level executions. */
typedef struct emu_analysis_row {
    uint32_t pc; /* offset from the kernel library's load address */
    int cls;
    uint64_t requests;    /* warp-level executions */
    uint64_t a;           /* sectors (global), wavefronts (shared), active lanes (block), lanes (atomic) */
    uint64_t ideal;       /* ideal sectors or wavefronts */
    uint64_t divergent;   /* branch: executions whose lanes went on to different code */
    uint64_t same_max;    /* atomic: the most lanes of one request on one address */
    uint64_t lanes;       /* the lanes of the requests, summed */
} emu_analysis_row;

typedef struct emu_analysis emu_analysis;

/* A new collector; `allocs` holds n triples (lo, hi, start): the bytes [lo, hi) of an argument
 * and the first byte of the allocation that owns them (sectors count from there). NULL when out
 * of memory. */
EMU_CHECK_INTERNAL emu_analysis *emu_analysis_new(const uintptr_t *allocs, size_t n);
EMU_CHECK_INTERNAL void emu_analysis_free(emu_analysis *a);

/* One event of thread `linear` of the worker's current block (`fiber_mode`: the threads of a
 * block interleave). Returns 1 when the event is not a memory access (a basic block, a
 * barrier: the caller checks nothing more), 0 otherwise. An event that cannot be recorded (out
 * of memory) marks the collector failed. */
EMU_CHECK_INTERNAL int emu_analysis_event(emu_analysis *a, const emu_check *c, const emu_check_worker *cw,
                                          unsigned int linear, int fiber_mode, uintptr_t addr, size_t size, int kind,
                                          const void *pc);
/* Thread `linear` of the current block returned from the kernel: its later events in the block
 * (the runtime's glue) are not the kernel's. */
EMU_CHECK_INTERNAL void emu_analysis_exit(emu_analysis *a, unsigned int linear);
/* The end of a block of `n_threads` threads: its events are counted. */
EMU_CHECK_INTERNAL void emu_analysis_block_end(emu_analysis *a, unsigned int n_threads);
/* The rows collected (valid until emu_analysis_free); -1 when the collector failed. */
EMU_CHECK_INTERNAL long emu_analysis_rows(emu_analysis *a, const emu_analysis_row **rows);

#endif /* CUNUMPY__CORE_EMU_EMU_ANALYSIS_H */
