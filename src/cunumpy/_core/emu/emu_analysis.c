/* Performance analysis of an emulated launch: see emu_analysis.h, and
 * docs/guides/performance-analysis.md for the counting rules implemented here. */
#include "emu_analysis.h"

#include <stdlib.h>
#include <string.h>

/* One recorded event. `where` is (space << 40) | offset: the space names the allocation or the
 * __shared__ variable (1 + index), the offset counts from its first byte. For a basic block it
 * is the code address of the lane's next basic block (EMU_AN_EXIT: none, the thread ended). */
typedef struct emu_an_event {
    uint64_t where;
    uint32_t pc;
    uint32_t linear;
    uint32_t seq; /* arrival order; then the execution count k of (lane, pc) */
    uint32_t branch; /* a basic block: the address of the comparison deciding where it goes */
    uint16_t size;
    uint8_t cls;
    uint8_t pad;
} emu_an_event;

#define EMU_AN_SPACE_SHIFT 40
#define EMU_AN_OFFSET_MASK (((uint64_t)1 << EMU_AN_SPACE_SHIFT) - 1)
#define EMU_AN_EXIT ((uint64_t)0xffffffffu)
#define EMU_AN_SHARED_SPACE ((uint64_t)1 << 20) /* shared variables: this + index; dynamic: + 0xfffff */

typedef struct emu_an_slot {
    uint64_t key; /* (pc << 8 | cls) + 1; 0: empty */
    emu_analysis_row row;
} emu_an_slot;

struct emu_analysis {
    uintptr_t *allocs; /* (lo, hi, start) triples sorted by lo */
    size_t n_allocs;
    emu_an_event *events;
    size_t n_events, cap_events;
    uint32_t warp_of_buffer; /* loop mode: the warp whose events the buffer holds */
    int failed;
    /* scratch for grouping */
    emu_an_event *sorted;
    size_t cap_sorted;
    uint32_t *last_block; /* per thread of the block: index of its last basic-block event + 1 */
    uint32_t *last_cmp;   /* per thread: the address of its last comparison in that block + 1 */
    size_t cap_threads;
    /* the table of rows, open addressing */
    emu_an_slot *slots;
    size_t n_slots, cap_slots;
    emu_analysis_row *rows;
};

static int emu_an_cmp_alloc(const void *x, const void *y)
{
    const uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
    return (a > b) - (a < b);
}

emu_analysis *emu_analysis_new(const uintptr_t *allocs, size_t n)
{
    emu_analysis *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->allocs = malloc((n > 0 ? n : 1) * 3 * sizeof *a->allocs);
    a->cap_slots = 256;
    a->slots = calloc(a->cap_slots, sizeof *a->slots);
    if (a->allocs == NULL || a->slots == NULL) {
        emu_analysis_free(a);
        return NULL;
    }
    if (n > 0)
        memcpy(a->allocs, allocs, n * 3 * sizeof *a->allocs);
    qsort(a->allocs, n, 3 * sizeof *a->allocs, emu_an_cmp_alloc);
    a->n_allocs = n;
    a->warp_of_buffer = UINT32_MAX;
    return a;
}

void emu_analysis_free(emu_analysis *a)
{
    if (a == NULL)
        return;
    free(a->allocs);
    free(a->events);
    free(a->sorted);
    free(a->last_block);
    free(a->last_cmp);
    free(a->slots);
    free(a->rows);
    free(a);
}

/* ---- the table of rows ------------------------------------------------------------------- */

static inline uint64_t emu_an_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static emu_analysis_row *emu_an_row(emu_analysis *a, uint32_t pc, int cls)
{
    if (2 * (a->n_slots + 1) > a->cap_slots) {
        const size_t cap = a->cap_slots * 2;
        emu_an_slot *slots = calloc(cap, sizeof *slots);
        if (slots == NULL) {
            a->failed = 1;
            return NULL;
        }
        for (size_t i = 0; i < a->cap_slots; ++i) {
            if (a->slots[i].key == 0)
                continue;
            size_t j = (size_t)emu_an_hash(a->slots[i].key) & (cap - 1);
            while (slots[j].key != 0)
                j = (j + 1) & (cap - 1);
            slots[j] = a->slots[i];
        }
        free(a->slots);
        a->slots = slots;
        a->cap_slots = cap;
    }
    const uint64_t key = (((uint64_t)pc << 8) | (uint64_t)cls) + 1;
    size_t j = (size_t)emu_an_hash(key) & (a->cap_slots - 1);
    while (a->slots[j].key != 0 && a->slots[j].key != key)
        j = (j + 1) & (a->cap_slots - 1);
    if (a->slots[j].key == 0) {
        a->slots[j].key = key;
        memset(&a->slots[j].row, 0, sizeof a->slots[j].row);
        a->slots[j].row.pc = pc;
        a->slots[j].row.cls = cls;
        a->n_slots++;
    }
    return &a->slots[j].row;
}

/* ---- counting one request ---------------------------------------------------------------- */

typedef struct emu_an_span {
    uint64_t lo, hi;
} emu_an_span;

static void emu_an_sort_spans(emu_an_span *s, size_t n)
{
    for (size_t i = 1; i < n; ++i) {
        const emu_an_span v = s[i];
        size_t j = i;
        while (j > 0 && s[j - 1].lo > v.lo) {
            s[j] = s[j - 1];
            --j;
        }
        s[j] = v;
    }
}

/* Distinct bytes of the spans, and distinct `unit`-byte segments (unit a power of two). */
static void emu_an_cover(emu_an_span *s, size_t n, unsigned int shift, uint64_t *bytes, uint64_t *units)
{
    emu_an_sort_spans(s, n);
    uint64_t total = 0, count = 0, last_unit = UINT64_MAX;
    uint64_t lo = s[0].lo, hi = s[0].hi;
    for (size_t i = 1; i <= n; ++i) {
        if (i < n && s[i].lo <= hi) {
            if (s[i].hi > hi)
                hi = s[i].hi;
            continue;
        }
        total += hi - lo;
        const uint64_t u_lo = lo >> shift, u_hi = (hi - 1) >> shift;
        count += u_hi - u_lo + (u_lo == last_unit ? 0u : 1u);
        last_unit = u_hi;
        if (i < n) {
            lo = s[i].lo;
            hi = s[i].hi;
        }
    }
    *bytes = total;
    *units = count;
}

static int emu_an_cmp_u64(const void *x, const void *y)
{
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Wavefronts of one phase of a shared request: the most distinct 4-byte words in one bank. */
static uint64_t emu_an_phase(const emu_an_event *e, size_t n)
{
    uint64_t words[32 * 8];
    size_t m = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t first = e[i].where >> 2, last = (e[i].where + (e[i].size ? e[i].size : 1u) - 1u) >> 2;
        for (uint64_t wd = first; wd <= last && m < sizeof words / sizeof *words; ++wd)
            words[m++] = wd;
    }
    if (m == 0)
        return 0;
    qsort(words, m, sizeof *words, emu_an_cmp_u64);
    unsigned int per_bank[32] = {0};
    unsigned int most = 0;
    for (size_t i = 0; i < m; ++i) {
        if (i > 0 && words[i] == words[i - 1])
            continue; /* the same word: a broadcast */
        const unsigned int bank = (unsigned int)(words[i] & 31u);
        if (++per_bank[bank] > most)
            most = per_bank[bank];
    }
    return most;
}

/* One warp-level execution: e[0..n) are the lanes' events (distinct lanes, by lane order). */
static void emu_an_request(emu_analysis *a, const emu_an_event *e, size_t n)
{
    emu_analysis_row *row = emu_an_row(a, e[0].pc, e[0].cls);
    if (row == NULL)
        return;
    row->requests++;
    emu_an_span spans[32];
    switch (e[0].cls) {
    case EMU_AN_GLOBAL_LOAD:
    case EMU_AN_GLOBAL_STORE: {
        for (size_t i = 0; i < n; ++i)
            spans[i] = (emu_an_span){e[i].where, e[i].where + (e[i].size ? e[i].size : 1u)};
        uint64_t bytes, sectors;
        emu_an_cover(spans, n, 5, &bytes, &sectors);
        row->a += sectors;
        row->ideal += (bytes + 31) / 32;
        break;
    }
    case EMU_AN_SHARED_LOAD:
    case EMU_AN_SHARED_STORE: {
        uint16_t size = 0;
        for (size_t i = 0; i < n; ++i) {
            spans[i] = (emu_an_span){e[i].where, e[i].where + (e[i].size ? e[i].size : 1u)};
            if (e[i].size > size)
                size = e[i].size;
        }
        uint64_t bytes, units;
        emu_an_cover(spans, n, 7, &bytes, &units);
        row->ideal += (bytes + 127) / 128;
        /* 8-byte accesses are served per half-warp, 16-byte (and wider) per quarter-warp */
        const unsigned int lanes = size <= 4 ? 32u : (size <= 8 ? 16u : 8u);
        size_t i = 0;
        while (i < n) {
            const unsigned int phase = (e[i].linear % 32u) / lanes;
            size_t j = i + 1;
            while (j < n && (e[j].linear % 32u) / lanes == phase)
                ++j;
            row->a += emu_an_phase(e + i, j - i);
            i = j;
        }
        break;
    }
    case EMU_AN_GLOBAL_ATOMIC:
    case EMU_AN_SHARED_ATOMIC: {
        uint64_t addrs[32];
        for (size_t i = 0; i < n; ++i)
            addrs[i] = e[i].where;
        qsort(addrs, n, sizeof *addrs, emu_an_cmp_u64);
        uint64_t most = 0, run = 0;
        for (size_t i = 0; i < n; ++i) {
            run = (i > 0 && addrs[i] == addrs[i - 1]) ? run + 1 : 1;
            if (run > most)
                most = run;
        }
        row->a += n;
        if (most > row->same_max)
            row->same_max = most;
        break;
    }
    case EMU_AN_BLOCK: {
        row->a += n;
        for (size_t i = 1; i < n; ++i)
            if (e[i].where != e[0].where) {
                emu_analysis_row *branch = emu_an_row(a, e[0].branch, EMU_AN_BRANCH);
                if (branch != NULL) {
                    branch->requests++;
                    branch->divergent++;
                }
                break;
            }
        break;
    }
    default: /* barriers: requests only */
        break;
    }
}

/* ---- grouping a buffer of events --------------------------------------------------------- */

/* Order for grouping: warp, class, code address, then lane and arrival (a lane's executions of
 * one instruction in order). */
static int emu_an_cmp_lane(const void *x, const void *y)
{
    const emu_an_event *a = x, *b = y;
    const uint32_t wa = a->linear / 32u, wb = b->linear / 32u;
    if (wa != wb)
        return wa < wb ? -1 : 1;
    if (a->cls != b->cls)
        return a->cls < b->cls ? -1 : 1;
    if (a->pc != b->pc)
        return a->pc < b->pc ? -1 : 1;
    if (a->linear != b->linear)
        return a->linear < b->linear ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Within one (warp, class, address): execution count k, then lane. */
static int emu_an_cmp_k(const void *x, const void *y)
{
    const emu_an_event *a = x, *b = y;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return (a->linear > b->linear) - (a->linear < b->linear);
}

static void emu_an_flush(emu_analysis *a)
{
    const size_t n = a->n_events;
    a->warp_of_buffer = UINT32_MAX;
    if (n == 0)
        return;
    emu_an_event *s = a->events;
    qsort(s, n, sizeof *s, emu_an_cmp_lane);
    size_t i = 0;
    while (i < n) {
        /* the run of one (warp, class, pc) */
        size_t j = i;
        uint32_t k = 0;
        while (j < n && s[j].linear / 32u == s[i].linear / 32u && s[j].cls == s[i].cls && s[j].pc == s[i].pc) {
            k = (j > i && s[j].linear == s[j - 1].linear) ? k + 1 : 0;
            s[j].seq = k;
            ++j;
        }
        qsort(s + i, j - i, sizeof *s, emu_an_cmp_k);
        size_t r = i;
        while (r < j) {
            size_t q = r + 1;
            while (q < j && s[q].seq == s[r].seq)
                ++q;
            emu_an_request(a, s + r, q - r);
            r = q;
        }
        i = j;
    }
    a->n_events = 0;
}

/* Links every basic-block event to the lane's next one (`where`) and to the comparison that
 * decided it (`branch`: the lane's last comparison in the block, else the block's own address),
 * then drops the comparisons from the buffer. */
static void emu_an_link_blocks(emu_analysis *a, unsigned int n_threads)
{
    if (a->cap_threads < n_threads) {
        uint32_t *t = realloc(a->last_block, n_threads * sizeof *t);
        if (t != NULL)
            a->last_block = t;
        uint32_t *u = realloc(a->last_cmp, n_threads * sizeof *u);
        if (u != NULL)
            a->last_cmp = u;
        if (t == NULL || u == NULL) {
            a->failed = 1;
            a->n_events = 0;
            return;
        }
        a->cap_threads = n_threads;
    }
    memset(a->last_block, 0, n_threads * sizeof *a->last_block);
    memset(a->last_cmp, 0, n_threads * sizeof *a->last_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < a->n_events; ++i) {
        emu_an_event ev = a->events[i];
        const uint32_t lane = ev.linear;
        if (lane >= n_threads)
            continue;
        if (ev.cls == EMU_AN_COMPARE) {
            a->last_cmp[lane] = ev.pc + 1u;
            continue;
        }
        if (ev.cls == EMU_AN_BLOCK) {
            const uint32_t prev = a->last_block[lane];
            if (prev != 0) {
                emu_an_event *p = &a->events[prev - 1];
                p->where = ev.pc;
                p->branch = a->last_cmp[lane] ? a->last_cmp[lane] - 1u : p->pc;
            }
            a->last_cmp[lane] = 0;
            ev.where = EMU_AN_EXIT;
            ev.branch = ev.pc;
            a->last_block[lane] = (uint32_t)(kept + 1);
        }
        a->events[kept++] = ev;
    }
    /* the threads' last blocks: decided by their last comparison, if any */
    for (unsigned int lane = 0; lane < n_threads; ++lane)
        if (a->last_block[lane] != 0 && a->last_cmp[lane] != 0)
            a->events[a->last_block[lane] - 1].branch = a->last_cmp[lane] - 1u;
    a->n_events = kept;
}

void emu_analysis_block_end(emu_analysis *a, unsigned int n_threads)
{
    if (a->failed) {
        a->n_events = 0;
        return;
    }
    emu_an_link_blocks(a, n_threads);
    emu_an_flush(a);
}

/* ---- recording --------------------------------------------------------------------------- */

/* The allocation holding [addr, addr + size): its index + 1, 0 when none. */
static size_t emu_an_find_alloc(const emu_analysis *a, uintptr_t addr)
{
    size_t lo = 0, hi = a->n_allocs;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (a->allocs[3 * mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* regions may overlap (views of one array): look back over the few that start before */
    for (size_t i = lo; i > 0 && lo - i < 64; --i)
        if (addr >= a->allocs[3 * (i - 1)] && addr < a->allocs[3 * (i - 1) + 1])
            return i;
    return 0;
}

int emu_analysis_event(emu_analysis *a, const emu_check *c, const emu_check_worker *cw, unsigned int linear,
                       int fiber_mode, uintptr_t addr, size_t size, int kind, const void *pc)
{
    int cls;
    uint64_t where = 0;
    int memory = 0;
    if (kind & CUNUMPY_EMU_ACCESS_BLOCK) {
        cls = EMU_AN_BLOCK;
    } else if (kind & CUNUMPY_EMU_ACCESS_COMPARE) {
        cls = EMU_AN_COMPARE;
    } else if (kind & CUNUMPY_EMU_ACCESS_BARRIER) {
        cls = EMU_AN_BARRIER;
    } else {
        memory = 1;
        const int atomic = (kind & CUNUMPY_EMU_ACCESS_ATOMIC) != 0, write = (kind & CUNUMPY_EMU_ACCESS_WRITE) != 0;
        const uintptr_t arena = (uintptr_t)cw->arena;
        if (cw->arena != NULL && addr >= arena && addr < arena + cw->arena_size) {
            const uintptr_t off = addr - arena;
            uint64_t space = 0, start = 0;
            if (off >= EMU_DYNAMIC_SHARED_OFFSET) {
                space = EMU_AN_SHARED_SPACE + 0xfffffu;
                start = EMU_DYNAMIC_SHARED_OFFSET;
            } else if (off >= EMU_STATIC_SHARED_OFFSET && c->layout != NULL) {
                const uintptr_t rel = off - EMU_STATIC_SHARED_OFFSET;
                const emu_shared_layout *layout = c->layout;
                size_t lo = 0, hi = layout->count;
                while (lo < hi) {
                    const size_t mid = (lo + hi) / 2;
                    if (layout->decls[mid].offset <= rel)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                if (lo == 0)
                    return 0;
                space = EMU_AN_SHARED_SPACE + lo;
                start = EMU_STATIC_SHARED_OFFSET + layout->decls[lo - 1].offset;
            } else {
                return 0;
            }
            where = (space << EMU_AN_SPACE_SHIFT) | ((off - start) & EMU_AN_OFFSET_MASK);
            cls = atomic ? EMU_AN_SHARED_ATOMIC : (write ? EMU_AN_SHARED_STORE : EMU_AN_SHARED_LOAD);
        } else {
            const size_t i = emu_an_find_alloc(a, addr);
            if (i == 0)
                return 0; /* not an argument's memory (the thread's own stack, say) */
            where = ((uint64_t)i << EMU_AN_SPACE_SHIFT) | ((addr - a->allocs[3 * (i - 1) + 2]) & EMU_AN_OFFSET_MASK);
            cls = atomic ? EMU_AN_GLOBAL_ATOMIC : (write ? EMU_AN_GLOBAL_STORE : EMU_AN_GLOBAL_LOAD);
        }
    }
    if (a->failed)
        return !memory;
    /* loop mode runs the threads of a block in order: a warp is complete when the next starts */
    const uint32_t warp = linear / 32u;
    if (!fiber_mode && warp != a->warp_of_buffer) {
        if (a->n_events > 0)
            emu_analysis_block_end(a, c->block.x * c->block.y * c->block.z);
        a->warp_of_buffer = warp;
    }
    if (a->n_events == a->cap_events) {
        const size_t cap = a->cap_events ? 2 * a->cap_events : 4096;
        emu_an_event *ev = realloc(a->events, cap * sizeof *ev);
        if (ev == NULL) {
            a->failed = 1;
            return !memory;
        }
        a->events = ev;
        a->cap_events = cap;
    }
    emu_an_event *ev = &a->events[a->n_events];
    ev->where = where;
    ev->pc = (uint32_t)((uintptr_t)pc - c->pc_base);
    ev->linear = linear;
    ev->seq = (uint32_t)a->n_events;
    ev->branch = 0;
    ev->size = (uint16_t)(size > 0xffffu ? 0xffffu : size);
    ev->cls = (uint8_t)cls;
    ev->pad = 0;
    a->n_events++;
    return !memory;
}

long emu_analysis_rows(emu_analysis *a, const emu_analysis_row **rows)
{
    if (a->failed)
        return -1;
    free(a->rows);
    a->rows = malloc((a->n_slots > 0 ? a->n_slots : 1) * sizeof *a->rows);
    if (a->rows == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < a->cap_slots; ++i)
        if (a->slots[i].key != 0)
            a->rows[n++] = a->slots[i].row;
    *rows = a->rows;
    return (long)n;
}
