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

/* A hash map of 64-bit keys to indexes, cleared by the slots it used. */
typedef struct emu_an_map {
    uint64_t *keys; /* key + 1; 0: empty */
    uint32_t *vals;
    uint32_t *used;
    size_t cap, n;
} emu_an_map;

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
    uint32_t *lane_pos;
    size_t cap_lane_pos;
    emu_an_event *warp_tmp;
    size_t cap_warp_tmp;
    uint32_t *scratch;
    size_t cap_scratch;
    emu_an_map ids, reqs;
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

static void emu_an_map_free(emu_an_map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
}

void emu_analysis_free(emu_analysis *a)
{
    if (a == NULL)
        return;
    free(a->allocs);
    free(a->events);
    free(a->sorted);
    free(a->lane_pos);
    free(a->warp_tmp);
    free(a->scratch);
    emu_an_map_free(&a->ids);
    emu_an_map_free(&a->reqs);
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
    row->lanes += n;
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

static int emu_an_map_reserve(emu_an_map *m, size_t entries)
{
    for (size_t i = 0; i < m->n; ++i)
        m->keys[m->used[i]] = 0;
    m->n = 0;
    if (m->cap >= 2 * entries)
        return 0;
    size_t cap = 64;
    while (cap < 2 * entries)
        cap *= 2;
    free(m->keys);
    free(m->vals);
    free(m->used);
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    m->used = malloc(cap * sizeof *m->used);
    m->cap = cap;
    if (m->keys == NULL || m->vals == NULL || m->used == NULL) {
        m->cap = 0;
        return -1;
    }
    return 0;
}

/* The value of `key`, or `fresh` (then *added is 1) when the key is new. */
static inline uint32_t emu_an_map_get(emu_an_map *m, uint64_t key, uint32_t fresh, int *added)
{
    key += 1;
    size_t j = (size_t)emu_an_hash(key) & (m->cap - 1);
    while (m->keys[j] != 0) {
        if (m->keys[j] == key) {
            *added = 0;
            return m->vals[j];
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = fresh;
    m->used[m->n++] = (uint32_t)j;
    *added = 1;
    return fresh;
}

/* Grows *p to hold `want` elements of `size` bytes; -1 when out of memory. */
static int emu_an_grow(void **p, size_t *cap, size_t want, size_t size)
{
    if (*cap >= want)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < want)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* The events of one warp, by lane and each lane's in its order: the k-th execution of an
 * instruction (class and code address) by each lane makes request (instruction, k). The
 * requests' events are gathered (stably: by lane) and counted. */
static void emu_an_warp(emu_analysis *a, emu_an_event *e, size_t m)
{
    if (emu_an_map_reserve(&a->ids, m) != 0 || emu_an_map_reserve(&a->reqs, m) != 0 ||
        emu_an_grow((void **)&a->warp_tmp, &a->cap_warp_tmp, m, sizeof *a->warp_tmp) != 0 ||
        emu_an_grow((void **)&a->scratch, &a->cap_scratch, 3 * m + 1, sizeof *a->scratch) != 0) {
        a->failed = 1;
        return;
    }
    uint32_t *stamp = a->scratch, *count = a->scratch + m, *req = a->scratch + 2 * m;
    uint32_t n_ids = 0, n_req = 0;
    /* the first lane's events, the reference: a lane whose instructions are the same, in the
     * same order (a warp that does not diverge), takes their requests without a lookup */
    size_t ref_to = 1;
    while (ref_to < m && e[ref_to].linear == e[0].linear)
        ++ref_to;
    const size_t ref_n = ref_to;
    for (size_t i = 0; i < m; ++i) {
        if (i >= ref_n && e[i].linear != e[i - 1].linear) {
            /* a new lane: the same instructions as the reference? */
            size_t j = 0;
            while (j < ref_n && i + j < m && e[i + j].linear == e[i].linear && e[i + j].pc == e[j].pc &&
                   e[i + j].cls == e[j].cls)
                ++j;
            if (j == ref_n && (i + j == m || e[i + j].linear != e[i].linear)) {
                for (size_t q = 0; q < ref_n; ++q) {
                    e[i + q].seq = e[q].seq;
                    req[e[q].seq]++;
                }
                i += ref_n - 1;
                continue;
            }
        }
        int added;
        const uint32_t id = emu_an_map_get(&a->ids, ((uint64_t)e[i].pc << 8) | e[i].cls, n_ids, &added);
        if (added) {
            stamp[id] = UINT32_MAX;
            n_ids++;
        }
        if (stamp[id] != e[i].linear) {
            stamp[id] = e[i].linear;
            count[id] = 0;
        }
        const uint32_t k = count[id]++;
        const uint32_t r = emu_an_map_get(&a->reqs, ((uint64_t)id << 32) | k, n_req, &added);
        if (added)
            req[n_req++] = 0;
        req[r]++;
        e[i].seq = r;
    }
    uint32_t at = 0;
    for (uint32_t r = 0; r < n_req; ++r) {
        const uint32_t c = req[r];
        req[r] = at;
        at += c;
    }
    for (size_t i = 0; i < m; ++i)
        a->warp_tmp[req[e[i].seq]++] = e[i];
    size_t from = 0;
    for (uint32_t r = 0; r < n_req; ++r) {
        emu_an_request(a, a->warp_tmp + from, req[r] - from);
        from = req[r];
    }
}

/* Counts the buffer's events (of threads below n_threads), warp by warp. */
static void emu_an_flush(emu_analysis *a, unsigned int n_threads)
{
    const size_t n = a->n_events;
    a->warp_of_buffer = UINT32_MAX;
    a->n_events = 0;
    if (n == 0 || a->failed)
        return;
    if (emu_an_grow((void **)&a->sorted, &a->cap_sorted, n, sizeof *a->sorted) != 0 ||
        emu_an_grow((void **)&a->lane_pos, &a->cap_lane_pos, (size_t)n_threads + 1, sizeof *a->lane_pos) != 0) {
        a->failed = 1;
        return;
    }
    /* already by thread (fibers that never wait run one after the other)? */
    size_t i0 = 1;
    while (i0 < n && a->events[i0].linear >= a->events[i0 - 1].linear)
        ++i0;
    if (i0 == n) {
        size_t from = 0;
        while (from < n) {
            const uint32_t warp = a->events[from].linear / 32u;
            size_t to = from + 1;
            while (to < n && a->events[to].linear / 32u == warp)
                ++to;
            emu_an_warp(a, a->events + from, to - from);
            from = to;
        }
        return;
    }
    /* a stable counting sort by thread */
    uint32_t *pos = a->lane_pos;
    memset(pos, 0, ((size_t)n_threads + 1) * sizeof *pos);
    for (size_t i = 0; i < n; ++i)
        pos[a->events[i].linear + 1]++;
    for (unsigned int t = 0; t < n_threads; ++t)
        pos[t + 1] += pos[t];
    for (size_t i = 0; i < n; ++i)
        a->sorted[pos[a->events[i].linear]++] = a->events[i];
    size_t from = 0;
    while (from < n) {
        const uint32_t warp = a->sorted[from].linear / 32u;
        size_t to = from + 1;
        while (to < n && a->sorted[to].linear / 32u == warp)
            ++to;
        emu_an_warp(a, a->sorted + from, to - from);
        from = to;
    }
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
        if (a->last_block[lane] == UINT32_MAX)
            continue; /* the thread returned: the runtime's glue */
        if (ev.cls == EMU_AN_COMPARE) {
            a->last_cmp[lane] = ev.pc + 1u;
            continue;
        }
        if (ev.cls == EMU_AN_EXITED) {
            const uint32_t prev = a->last_block[lane];
            if (prev != 0 && a->last_cmp[lane] != 0)
                a->events[prev - 1].branch = a->last_cmp[lane] - 1u;
            a->last_block[lane] = UINT32_MAX;
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
        if (a->last_block[lane] != 0 && a->last_block[lane] != UINT32_MAX && a->last_cmp[lane] != 0)
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
    emu_an_flush(a, n_threads);
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
        if (atomic && !write)
            return 0; /* an atomic load: the first half of a compare-and-swap loop that implements an
                       * atomic the GPU has as one instruction (float atomicAdd); the CAS is counted */
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

void emu_analysis_exit(emu_analysis *a, unsigned int linear)
{
    if (a->failed)
        return;
    if (a->n_events == a->cap_events) {
        const size_t cap = a->cap_events ? 2 * a->cap_events : 4096;
        emu_an_event *ev = realloc(a->events, cap * sizeof *ev);
        if (ev == NULL) {
            a->failed = 1;
            return;
        }
        a->events = ev;
        a->cap_events = cap;
    }
    emu_an_event *ev = &a->events[a->n_events++];
    memset(ev, 0, sizeof *ev);
    ev->linear = linear;
    ev->cls = EMU_AN_EXITED;
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
