/* The CPU emulator's memory checks: shadow, regions, the __shared__ arena, memcheck answers
 * and reports, racecheck and initcheck bookkeeping (emu_check.h says how they fit). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "emu_check.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- shadow ------------------------------------------------------------------------------ */

/* The shadow covers the user address space: 47 bits on x86-64, 48 on aarch64 (a kernel with a
 * smaller address space fails the mapping, and the launch falls back to checks mode 2). */
#if defined(__x86_64__)
#define EMU_SHADOW_BYTES ((size_t)1 << 44)
#elif defined(__aarch64__)
#define EMU_SHADOW_BYTES ((size_t)1 << 45)
#else
#define EMU_SHADOW_BYTES 0
#endif
#define EMU_POISON 0xfa

static int emu_shadow_state; /* 1 mapped, -1 not available */
static pthread_once_t emu_shadow_once = PTHREAD_ONCE_INIT;

static void emu_shadow_map(void)
{
    emu_shadow_state = -1;
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)) && defined(MAP_FIXED_NOREPLACE)
    const char *env = getenv("CUNUMPY_EMULATION_SHADOW");
    if (env != NULL && strcmp(env, "0") == 0)
        return; /* tests of the fallback (checks mode 2) */
    void *want = (void *)(uintptr_t)CUNUMPY_EMU_SHADOW_OFFSET;
    void *got = mmap(want, EMU_SHADOW_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == MAP_FAILED)
        return;
    if (got != want) { /* a kernel older than MAP_FIXED_NOREPLACE placed it elsewhere */
        munmap(got, EMU_SHADOW_BYTES);
        return;
    }
    /* Reads of untouched shadow map the shared zero page; poisoning commits a few pages. Keep
     * it out of core dumps, and without huge pages (a poisoned redzone would commit 2 MiB). */
#ifdef MADV_DONTDUMP
    madvise(got, EMU_SHADOW_BYTES, MADV_DONTDUMP);
#endif
#ifdef MADV_NOHUGEPAGE
    madvise(got, EMU_SHADOW_BYTES, MADV_NOHUGEPAGE);
#endif
    /* The shadow's own shadow is inaccessible (AddressSanitizer's shadow gap): an instrumented
     * access to the shadow (a pointer made from an integer) faults in its check instead of
     * changing what the checks see. */
    uint8_t *gap = (uint8_t *)(((uintptr_t)got >> 3) + (uintptr_t)CUNUMPY_EMU_SHADOW_OFFSET);
    if (mprotect(gap, EMU_SHADOW_BYTES >> 3, PROT_NONE) != 0) {
        munmap(got, EMU_SHADOW_BYTES);
        return;
    }
    emu_shadow_state = 1;
#endif
}

int emu_shadow_contains(uintptr_t lo, uintptr_t hi)
{
    const uintptr_t base = (uintptr_t)CUNUMPY_EMU_SHADOW_OFFSET;
    return emu_shadow_state == 1 && hi > base && lo < base + EMU_SHADOW_BYTES;
}

int emu_shadow_available(void)
{
    pthread_once(&emu_shadow_once, emu_shadow_map);
    return emu_shadow_state == 1;
}

static inline uint8_t *emu_shadow_of(uintptr_t addr)
{
    return (uint8_t *)((addr >> 3) + (uintptr_t)CUNUMPY_EMU_SHADOW_OFFSET);
}

/* Addresses the shadow covers. */
static inline int emu_shadowed(uintptr_t lo, uintptr_t hi)
{
    return EMU_SHADOW_BYTES != 0 && lo < hi && hi <= ((uintptr_t)EMU_SHADOW_BYTES << 3);
}

void emu_shadow_clear(uintptr_t lo, uintptr_t hi)
{
    if (emu_shadow_state != 1 || !emu_shadowed(lo, hi))
        return;
    uint8_t *a = emu_shadow_of(lo), *b = emu_shadow_of(hi + 7);
    memset(a, 0, (size_t)(b - a));
}

void emu_shadow_poison(uintptr_t lo, uintptr_t hi)
{
    if (emu_shadow_state != 1 || !emu_shadowed(lo, hi))
        return;
    /* Whole granules inside [lo, hi) are poisoned; a granule that starts accessible and ends
     * poisoned keeps its accessible prefix (ASan's encoding: k = the first k bytes are
     * accessible). A granule poisoned at its start only cannot be expressed and stays
     * accessible: nothing is ever reported that is not an error. */
    uintptr_t first = (lo + 7) & ~(uintptr_t)7;
    const uintptr_t last = hi & ~(uintptr_t)7;
    if ((lo & 7) != 0 && hi >= first) {
        uint8_t *s = emu_shadow_of(lo);
        if (*s == 0)
            *s = (uint8_t)(lo & 7);
    }
    if (first < last)
        memset(emu_shadow_of(first), EMU_POISON, (size_t)((last - first) >> 3));
}

/* ---- range lists ---------------------------------------------------------------------------- */

static int emu_range_cmp(const void *a, const void *b)
{
    const uintptr_t x = ((const uintptr_t *)a)[0], y = ((const uintptr_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* Sorts [lo, hi) pairs and merges the overlapping and touching ones; returns the new count. */
static size_t emu_ranges_normalize(uintptr_t *r, size_t n)
{
    if (n == 0)
        return 0;
    qsort(r, n, 2 * sizeof *r, emu_range_cmp);
    size_t out = 0;
    for (size_t i = 1; i < n; ++i) {
        if (r[2 * i] <= r[2 * out + 1]) {
            if (r[2 * i + 1] > r[2 * out + 1])
                r[2 * out + 1] = r[2 * i + 1];
        } else {
            ++out;
            r[2 * out] = r[2 * i];
            r[2 * out + 1] = r[2 * i + 1];
        }
    }
    return out + 1;
}

/* Whether [lo, hi) lies inside one range of the sorted, merged list. */
static int emu_ranges_contain(const uintptr_t *r, size_t n, uintptr_t lo, uintptr_t hi)
{
    size_t a = 0, b = n;
    while (a < b) { /* the first range with r.lo > lo */
        const size_t m = (a + b) / 2;
        if (r[2 * m] <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a > 0 && hi <= r[2 * (a - 1) + 1];
}

static int emu_ranges_push(uintptr_t **r, size_t *n, size_t *cap, uintptr_t lo, uintptr_t hi)
{
    if (lo >= hi)
        return 0;
    if (*n == *cap) {
        const size_t cap2 = *cap ? *cap * 2 : 64;
        uintptr_t *grown = realloc(*r, cap2 * 2 * sizeof **r);
        if (grown == NULL)
            return -1;
        *r = grown;
        *cap = cap2;
    }
    (*r)[2 * *n] = lo;
    (*r)[2 * *n + 1] = hi;
    ++*n;
    return 0;
}

/* ---- spans: unions of overlapping regions, with racecheck/initcheck state ------------------ */

/* Racecheck's record of one granule: the last write and a read since. 32 bytes: thread ids
 * are kept modulo 2^32, code addresses as offsets in the kernel library, counters in 16 bits
 * (wrapping can only hide a hazard, never invent one). */
typedef struct emu_cell {
    uint32_t stamp;           /* the launch that wrote the cell: others' cells are empty */
    uint32_t writer, reader;  /* 1 + global thread id; 0: none */
    uint32_t write_pc, read_pc;
    uint16_t write_epoch, read_epoch; /* the block's barriers completed at the access */
    uint8_t write_warp_gen, read_warp_gen;
    uint16_t write_fences; /* the writer block's __threadfence() count at the write */
    uint8_t write_atomic, readers_many;
} emu_cell;

static void *emu_table_alloc(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void emu_table_free(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes == 0 ? 1 : bytes);
}

/* Racecheck's tables of global memory are kept from launch to launch (a fresh table costs a
 * page fault per 4 KiB and the kernel's zeroing, more than the checks themselves on an
 * elementwise kernel); the launch stamp of a cell tells whether it is this launch's. */
static atomic_uint emu_stamps;
#define EMU_CELL_POOL 8
#define EMU_CELL_POOL_BYTES ((size_t)1 << 30)
static pthread_mutex_t emu_cell_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *table;
    size_t bytes;
} emu_cell_pool[EMU_CELL_POOL];

static void *emu_cells_take(size_t bytes, size_t *got)
{
    pthread_mutex_lock(&emu_cell_pool_lock);
    int best = -1;
    for (int i = 0; i < EMU_CELL_POOL; ++i)
        if (emu_cell_pool[i].table != NULL && emu_cell_pool[i].bytes >= bytes &&
            (best < 0 || emu_cell_pool[i].bytes < emu_cell_pool[best].bytes))
            best = i;
    void *table = NULL;
    if (best >= 0) {
        table = emu_cell_pool[best].table;
        *got = emu_cell_pool[best].bytes;
        emu_cell_pool[best].table = NULL;
    }
    pthread_mutex_unlock(&emu_cell_pool_lock);
    if (table == NULL) {
        table = emu_table_alloc(bytes);
        *got = bytes;
    }
    return table;
}

static void emu_cells_give(void *table, size_t bytes)
{
    if (table == NULL)
        return;
    pthread_mutex_lock(&emu_cell_pool_lock);
    size_t total = bytes;
    int slot = -1;
    for (int i = 0; i < EMU_CELL_POOL; ++i) {
        if (emu_cell_pool[i].table == NULL)
            slot = slot < 0 ? i : slot;
        else
            total += emu_cell_pool[i].bytes;
    }
    if (slot >= 0 && total <= EMU_CELL_POOL_BYTES) {
        emu_cell_pool[slot].table = table;
        emu_cell_pool[slot].bytes = bytes;
        table = NULL;
    }
    pthread_mutex_unlock(&emu_cell_pool_lock);
    emu_table_free(table, bytes);
}

typedef struct emu_span {
    uintptr_t lo, hi;
    size_t granule;
    size_t first, count; /* its regions: regions[first .. first + count) */
    int output_only;      /* every region of the span is output-only */
    emu_cell *cells;      /* racecheck, one per granule */
    size_t n_cells, cells_bytes;
    unsigned char *written; /* initcheck, one per byte, output-only spans */
} emu_span;

static int emu_region_cmp(const void *a, const void *b)
{
    const emu_region *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int emu_build_spans(emu_check *c)
{
    if (c->n_regions > 1)
        qsort(c->regions, c->n_regions, sizeof *c->regions, emu_region_cmp);
    c->spans = calloc(c->n_regions ? c->n_regions : 1, sizeof *c->spans);
    if (c->spans == NULL)
        return -1;
    c->n_spans = 0;
    for (size_t i = 0; i < c->n_regions; ++i) {
        const emu_region *r = &c->regions[i];
        if (r->lo >= r->hi)
            continue; /* empty: a null pointer, reported by address */
        emu_span *last = c->n_spans ? &c->spans[c->n_spans - 1] : NULL;
        if (last != NULL && r->lo < last->hi) {
            if (r->hi > last->hi)
                last->hi = r->hi;
            if (r->itemsize < last->granule)
                last->granule = r->itemsize;
            last->count = i + 1 - last->first;
            last->output_only &= (r->flags & EMU_REGION_OUTPUT_ONLY) != 0;
            continue;
        }
        emu_span *s = &c->spans[c->n_spans++];
        s->lo = r->lo;
        s->hi = r->hi;
        s->granule = r->itemsize ? r->itemsize : 1;
        s->first = i;
        s->count = 1;
        s->output_only = (r->flags & EMU_REGION_OUTPUT_ONLY) != 0;
    }
    for (size_t i = 0; i < c->n_spans; ++i) {
        emu_span *s = &c->spans[i];
        if (s->granule > 16 || (s->granule & (s->granule - 1)) != 0)
            s->granule = 1; /* records and odd sizes: byte cells */
        if (c->racecheck) {
            s->n_cells = (s->hi - s->lo + s->granule - 1) / s->granule;
            s->cells = emu_cells_take(s->n_cells * sizeof *s->cells, &s->cells_bytes);
            if (s->cells == NULL)
                return -1;
        }
        if (c->initcheck && s->output_only) {
            s->written = emu_table_alloc(s->hi - s->lo);
            if (s->written == NULL)
                return -1;
        }
    }
    return 0;
}

/* The index of the first span starting after `addr` (the spans are sorted). */
static size_t emu_span_after(const emu_check *c, uintptr_t addr)
{
    size_t a = 0, b = c->n_spans;
    while (a < b) {
        const size_t m = (a + b) / 2;
        if (c->spans[m].lo <= addr)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* The span holding [lo, hi), or NULL. */
static emu_span *emu_span_of(const emu_check *c, uintptr_t lo, uintptr_t hi)
{
    const size_t a = emu_span_after(c, lo);
    if (a == 0)
        return NULL;
    emu_span *s = &c->spans[a - 1];
    return hi <= s->hi ? s : NULL;
}

/* ---- the __shared__ arena ------------------------------------------------------------------ */

#define EMU_MAX_SHARED_DECLS 4096

static pthread_mutex_t emu_layouts_lock = PTHREAD_MUTEX_INITIALIZER;
static emu_shared_layout *emu_layouts;

emu_shared_layout *emu_shared_layout_of(const void *library)
{
    pthread_mutex_lock(&emu_layouts_lock);
    emu_shared_layout *l = emu_layouts;
    while (l != NULL && l->library != library)
        l = l->next;
    if (l == NULL) {
        l = calloc(1, sizeof *l);
        if (l != NULL) {
            /* Fixed capacity: readers (checks mode 2) look declarations up without the lock. */
            l->decls = calloc(EMU_MAX_SHARED_DECLS, sizeof *l->decls);
            if (l->decls == NULL) {
                free(l);
                l = NULL;
            } else {
                l->library = library;
                l->cap = EMU_MAX_SHARED_DECLS;
                l->next = emu_layouts;
                emu_layouts = l;
            }
        }
    }
    pthread_mutex_unlock(&emu_layouts_lock);
    return l;
}

size_t emu_shared_register(emu_shared_layout *l, size_t size, size_t align, size_t itemsize, const char *name,
                           emu_check_worker *const *arenas, int n_arenas, char *error, size_t error_size)
{
    if (align < 16)
        align = 16;
    if ((align & (align - 1)) != 0 || align > 4096)
        align = 4096;
    pthread_mutex_lock(&emu_layouts_lock);
    /* A 64-byte poisoned gap between variables: an overflow of one into the next is caught. */
    const size_t start = l->used == 0 ? 0 : l->used + 64;
    const size_t offset = (start + align - 1) & ~(align - 1);
    size_t result = (size_t)-1;
    if (size > EMU_STATIC_SHARED_BYTES || offset > EMU_STATIC_SHARED_BYTES - size) {
        (void)snprintf(error, error_size,
                       "the kernel's __shared__ variables need more than %zu KiB (registering '%s', %zu bytes); CUDA "
                       "allows 48 KiB of static shared memory per block",
                       (size_t)EMU_STATIC_SHARED_BYTES / 1024, name ? name : "?", size);
    } else if (l->count >= l->cap) {
        (void)snprintf(error, error_size, "more than %d __shared__ declarations in one kernel library",
                       EMU_MAX_SHARED_DECLS);
    } else {
        emu_shared_decl *d = &l->decls[l->count];
        d->offset = offset;
        d->size = size;
        d->itemsize = itemsize ? itemsize : 1;
        (void)snprintf(d->name, sizeof d->name, "%s", name ? name : "?");
        __atomic_store_n(&l->count, l->count + 1, __ATOMIC_RELEASE);
        l->used = offset + size;
        result = offset;
        /* Every arena showing this library shows the new variable too (mode 1), before any
         * kernel code can use it. */
        for (int i = 0; i < n_arenas; ++i)
            if (arenas[i] != NULL && arenas[i]->arena_layout == l)
                while (arenas[i]->arena_decls < l->count)
                    emu_check_arena_add(arenas[i], l, arenas[i]->arena_decls);
    }
    pthread_mutex_unlock(&emu_layouts_lock);
    return result;
}

/* The declaration holding arena offset `off`, or the nearest one (distance in *gap). */
static const emu_shared_decl *emu_decl_near(const emu_shared_layout *l, size_t off, int *inside)
{
    const size_t n = l ? __atomic_load_n(&l->count, __ATOMIC_ACQUIRE) : 0;
    const emu_shared_decl *best = NULL;
    size_t best_gap = (size_t)-1;
    *inside = 0;
    for (size_t i = 0; i < n; ++i) { /* few declarations: a scan */
        const emu_shared_decl *d = &l->decls[i];
        if (off >= d->offset && off < d->offset + d->size) {
            *inside = 1;
            return d;
        }
        const size_t gap = off < d->offset ? d->offset - off : off - (d->offset + d->size);
        if (gap < best_gap) {
            best_gap = gap;
            best = d;
        }
    }
    return best;
}

static size_t emu_page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

int emu_check_arena(emu_check *c, emu_check_worker *cw)
{
    for (int i = 0; i < EMU_SPAN_HINTS; ++i)
        cw->span_hint[i] = NULL; /* the spans are the launch's */
    cw->span_hint_next = 0;
    const size_t page = emu_page();
    const size_t need = (EMU_DYNAMIC_SHARED_OFFSET + c->shared_mem + EMU_REDZONE + page - 1) & ~(page - 1);
    if (cw->arena == NULL || cw->arena_size < need) {
        if (cw->arena != NULL) {
            emu_shadow_clear((uintptr_t)cw->arena, (uintptr_t)cw->arena + cw->arena_size);
            munmap(cw->arena, cw->arena_size);
            cw->arena = NULL;
        }
        void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        cw->arena = p;
        cw->arena_size = need;
        cw->arena_layout = NULL;
        cw->arena_dynamic_valid = 0;
    }
    if (c->mode != 1)
        return 0;
    const uintptr_t base = (uintptr_t)cw->arena;
    if (cw->arena_layout != c->layout) {
        /* Everything of the static part but the library's variables, and the gaps around it. */
        emu_shadow_poison(base, base + EMU_DYNAMIC_SHARED_OFFSET);
        cw->arena_layout = c->layout;
        cw->arena_decls = 0;
    }
    pthread_mutex_lock(&emu_layouts_lock);
    const size_t n = c->layout ? c->layout->count : 0;
    for (size_t i = cw->arena_decls; i < n; ++i)
        emu_check_arena_add(cw, c->layout, i);
    pthread_mutex_unlock(&emu_layouts_lock);
    if (!cw->arena_dynamic_valid || cw->arena_dynamic != c->shared_mem) {
        const uintptr_t dyn = base + EMU_DYNAMIC_SHARED_OFFSET;
        const size_t old = cw->arena_dynamic_valid ? cw->arena_dynamic : 0;
        const size_t span = (old > c->shared_mem ? old : c->shared_mem) + EMU_REDZONE;
        emu_shadow_poison(dyn, dyn + (span < cw->arena_size - EMU_DYNAMIC_SHARED_OFFSET
                                          ? span
                                          : cw->arena_size - EMU_DYNAMIC_SHARED_OFFSET));
        emu_shadow_clear(dyn, dyn + c->shared_mem);
        emu_shadow_poison(dyn + c->shared_mem, dyn + c->shared_mem + 1); /* a partial last granule */
        if (c->shared_mem & 7)
            *emu_shadow_of(dyn + c->shared_mem) = (uint8_t)(c->shared_mem & 7);
        cw->arena_dynamic = c->shared_mem;
        cw->arena_dynamic_valid = 1;
    }
    return 0;
}

void emu_check_arena_add(emu_check_worker *cw, const emu_shared_layout *layout, size_t decl)
{
    if (cw->arena == NULL || cw->arena_layout != layout || decl < cw->arena_decls)
        return;
    const emu_shared_decl *d = &layout->decls[decl];
    const uintptr_t lo = (uintptr_t)cw->arena + EMU_STATIC_SHARED_OFFSET + d->offset;
    emu_shadow_clear(lo, lo + d->size);
    if ((d->size & 7) != 0 && emu_shadow_state == 1)
        *emu_shadow_of(lo + d->size) = (uint8_t)(d->size & 7); /* offsets are 16-aligned */
    cw->arena_decls = decl + 1;
}

/* ---- begin and end of a launch ----------------------------------------------------------------- */

int emu_check_allow(emu_check *c, uintptr_t lo, uintptr_t hi)
{
    return emu_ranges_push(&c->internal, &c->n_internal, &c->cap_internal, lo, hi);
}

static int emu_collect_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    emu_check *c = data;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        const uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
        if (emu_check_allow(c, lo & ~(uintptr_t)4095, (lo + ph->p_memsz + 4095) & ~(uintptr_t)4095) != 0)
            return 1;
    }
    return 0;
}

static int emu_poison_push(emu_check *c, uintptr_t lo, uintptr_t hi)
{
    return emu_ranges_push(&c->poisoned, &c->n_poisoned, &c->cap_poisoned, lo, hi);
}

int emu_check_begin(emu_check *c, char *error, size_t error_size)
{
    pthread_mutex_init(&c->lock, NULL);
    c->stamp = atomic_fetch_add(&emu_stamps, 1) + 1;
    if (c->stamp == 0)
        c->stamp = atomic_fetch_add(&emu_stamps, 1) + 1; /* 0 marks a fresh table's cells */
    c->threads_per_block = c->block.x * c->block.y * c->block.z;
    if (emu_build_spans(c) != 0) {
        (void)snprintf(error, error_size, "out of memory for the checks' tables");
        return -1;
    }
    if (c->mode == 0)
        return 0;
    /* The loaded modules: the kernel library's data, the runtime's tables, libc's. */
    if (dl_iterate_phdr(emu_collect_module, c) != 0) {
        (void)snprintf(error, error_size, "out of memory for the checks' tables");
        return -1;
    }
    c->n_internal = emu_ranges_normalize(c->internal, c->n_internal);
    if (c->racecheck && c->n_blocks <= ((uint64_t)1 << 26)) {
        c->block_fences = calloc((size_t)c->n_blocks, sizeof *c->block_fences);
        if (c->block_fences == NULL) {
            (void)snprintf(error, error_size, "out of memory for the checks' tables");
            return -1;
        }
    }
    if (c->mode != 1)
        return 0;
    /* Redzones around every region, less the regions and the internal ranges. */
    uintptr_t *zones = NULL;
    size_t n = 0, cap = 0;
    int oom = 0;
    for (size_t i = 0; i < c->n_regions && !oom; ++i) {
        const emu_region *r = &c->regions[i];
        if (r->lo == 0 && r->hi == 0)
            continue;
        const uintptr_t rz = emu_redzone_of(r->lo, r->hi);
        const uintptr_t below = r->lo > rz + 4096 ? r->lo - rz : 4096;
        oom |= emu_ranges_push(&zones, &n, &cap, below, r->lo) != 0;
        oom |= emu_ranges_push(&zones, &n, &cap, r->hi, r->hi + rz) != 0;
    }
    uintptr_t *keep = NULL;
    size_t n_keep = 0, cap_keep = 0;
    for (size_t i = 0; i < c->n_spans && !oom; ++i)
        oom |= emu_ranges_push(&keep, &n_keep, &cap_keep, c->spans[i].lo, c->spans[i].hi) != 0;
    for (size_t i = 0; i < c->n_internal && !oom; ++i)
        oom |= emu_ranges_push(&keep, &n_keep, &cap_keep, c->internal[2 * i], c->internal[2 * i + 1]) != 0;
    if (oom) {
        free(zones);
        free(keep);
        (void)snprintf(error, error_size, "out of memory for the checks' tables");
        return -1;
    }
    n = emu_ranges_normalize(zones, n);
    n_keep = emu_ranges_normalize(keep, n_keep);
    /* zones minus keep, both sorted and merged */
    size_t k = 0;
    for (size_t i = 0; i < n && !oom; ++i) {
        /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): zones is NULL only when n is 0 */
        uintptr_t lo = zones[2 * i];
        const uintptr_t hi = zones[2 * i + 1];
        /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): keep is NULL only when n_keep is 0 */
        while (k < n_keep && keep[2 * k + 1] <= lo)
            ++k;
        size_t j = k;
        while (lo < hi) {
            if (j >= n_keep || keep[2 * j] >= hi) {
                oom |= emu_poison_push(c, lo, hi) != 0;
                break;
            }
            if (keep[2 * j] > lo)
                oom |= emu_poison_push(c, lo, keep[2 * j]) != 0;
            lo = keep[2 * j + 1] > lo ? keep[2 * j + 1] : lo;
            ++j;
        }
    }
    free(zones);
    free(keep);
    if (oom) {
        (void)snprintf(error, error_size, "out of memory for the checks' tables");
        return -1;
    }
    for (size_t i = 0; i < c->n_poisoned; ++i)
        emu_shadow_poison(c->poisoned[2 * i], c->poisoned[2 * i + 1]);
    return 0;
}

void emu_check_end(emu_check *c)
{
    for (size_t i = 0; i < c->n_poisoned; ++i)
        emu_shadow_clear(c->poisoned[2 * i], c->poisoned[2 * i + 1]);
    for (size_t i = 0; i < c->n_spans; ++i) {
        emu_cells_give(c->spans[i].cells, c->spans[i].cells_bytes);
        emu_table_free(c->spans[i].written, c->spans[i].hi - c->spans[i].lo);
    }
    free(c->spans);
    free(c->internal);
    free(c->poisoned);
    free(c->block_fences);
    free(c->groups);
    c->groups = NULL;
    c->spans = NULL;
    c->internal = NULL;
    c->poisoned = NULL;
    c->block_fences = NULL;
    c->n_spans = c->n_internal = c->n_poisoned = 0;
    pthread_mutex_destroy(&c->lock);
}

void emu_check_worker_allow(const emu_check *c, emu_check_worker *cw, uintptr_t lo, uintptr_t hi)
{
    if (lo >= hi || cw->n_own >= (int)(sizeof cw->own / sizeof cw->own[0]))
        return;
    cw->own[cw->n_own][0] = lo;
    cw->own[cw->n_own][1] = hi;
    cw->n_own++;
    if (c->mode == 1) {
        /* Only what the launch poisoned (the arena has its own shadow). */
        for (size_t i = 0; i < c->n_poisoned; ++i) {
            const uintptr_t a = c->poisoned[2 * i] > lo ? c->poisoned[2 * i] : lo;
            const uintptr_t b = c->poisoned[2 * i + 1] < hi ? c->poisoned[2 * i + 1] : hi;
            if (a < b)
                emu_shadow_clear(a, b);
        }
    }
}

void emu_check_worker_release(emu_check_worker *cw)
{
    if (cw->arena != NULL) {
        emu_shadow_clear((uintptr_t)cw->arena, (uintptr_t)cw->arena + cw->arena_size);
        munmap(cw->arena, cw->arena_size);
    }
    free(cw->atomic_done);
    emu_table_free(cw->shared_cells, cw->shared_cap * sizeof(emu_cell));
    emu_table_free(cw->shared_written, cw->shared_cap);
    memset(cw, 0, sizeof *cw);
}

/* ---- descriptions -------------------------------------------------------------------------- */

void emu_format_pc(const void *pc, char *out, size_t size)
{
    Dl_info info;
    if (pc != NULL && dladdr(pc, &info) != 0 && info.dli_fname != NULL && info.dli_fbase != NULL)
        (void)snprintf(out, size, "<pc:%s+0x%" PRIxPTR ">", info.dli_fname, (uintptr_t)pc - (uintptr_t)info.dli_fbase);
    else
        (void)snprintf(out, size, "<pc:?+0x%" PRIxPTR ">", (uintptr_t)pc);
}

static const char *emu_kind_verb(int kind)
{
    if (kind & CUNUMPY_EMU_ACCESS_ATOMIC)
        return "atomic access";
    return (kind & CUNUMPY_EMU_ACCESS_WRITE) ? "write" : "read";
}

static const char *emu_kind_prep(int kind)
{
    if (kind & CUNUMPY_EMU_ACCESS_ATOMIC)
        return "on";
    return (kind & CUNUMPY_EMU_ACCESS_WRITE) ? "to" : "from";
}

/* "element 12 (byte offset 96" for an address of a variable starting at base. */
static void emu_element_text(uintptr_t addr, uintptr_t base, size_t itemsize, char *out, size_t size)
{
    const long long off = (long long)(addr - base);
    const long long item = itemsize ? (long long)itemsize : 1;
    long long element = off / item;
    if (off < 0 && off % item != 0)
        element -= 1; /* floor */
    (void)snprintf(out, size, "element %lld (byte offset %lld", element, off);
}

static int emu_describe_shared(const emu_check *c, const emu_check_worker *cw, uintptr_t addr, size_t size,
                               int kind, char *out, size_t out_size)
{
    const uintptr_t base = (uintptr_t)cw->arena + EMU_STATIC_SHARED_OFFSET;
    char element[96];
    if (addr - (uintptr_t)cw->arena < EMU_STATIC_SHARED_OFFSET + EMU_STATIC_SHARED_BYTES + EMU_REDZONE / 2) {
        /* offsets from the static part; the leading redzone gives "negative" ones */
        const long long soff = (long long)(addr - base);
        const size_t off = soff < 0 ? 0 : (size_t)soff;
        int inside = 0;
        const emu_shared_decl *d = emu_decl_near(c->layout, off, &inside);
        if (d == NULL) {
            (void)snprintf(out, out_size, "%s of %zu bytes %s __shared__ memory at byte offset %lld, where no __shared__ "
                                          "variable lies",
                           emu_kind_verb(kind), size, emu_kind_prep(kind), soff);
            return 1;
        }
        emu_element_text(addr, base + d->offset, d->itemsize, element, sizeof element);
        const long long past = soff - (long long)(d->offset + d->size);
        char where[64];
        if (soff < (long long)d->offset)
            (void)snprintf(where, sizeof where, "%lld bytes before its start", (long long)d->offset - soff);
        else if (past >= 0)
            (void)snprintf(where, sizeof where, "%lld bytes past its end", past);
        else
            (void)snprintf(where, sizeof where, "straddling its end");
        (void)snprintf(out, out_size, "out-of-bounds %s of %zu bytes %s __shared__ '%s' (%zu elements, %zu bytes) at %s, %s)",
                       emu_kind_verb(kind), size, emu_kind_prep(kind), d->name, d->size / d->itemsize, d->size, element,
                       where);
        return 1;
    }
    const uintptr_t dyn = (uintptr_t)cw->arena + EMU_DYNAMIC_SHARED_OFFSET;
    const long long doff = (long long)(addr - dyn);
    const char *name = c->dynamic_name[0] ? c->dynamic_name : "extern __shared__ memory";
    if (c->shared_mem == 0)
        (void)snprintf(out, out_size,
                       "%s of %zu bytes %s %s at byte offset %lld, but the launch gave no dynamic shared memory "
                       "(shared_mem=0): pass shared_mem= with the bytes the kernel uses",
                       emu_kind_verb(kind), size, emu_kind_prep(kind), name, doff);
    else
        (void)snprintf(out, out_size,
                       "out-of-bounds %s of %zu bytes %s %s at byte offset %lld, %lld bytes %s: the launch gave "
                       "shared_mem=%zu bytes",
                       emu_kind_verb(kind), size, emu_kind_prep(kind), name, doff,
                       doff < 0 ? -doff : doff - (long long)c->shared_mem, doff < 0 ? "before its start" : "past its end",
                       c->shared_mem);
    return 1;
}

int emu_check_describe(const emu_check *c, const emu_check_worker *cw, uintptr_t addr, size_t size, int kind,
                       char *out, size_t out_size)
{
    /* size 0: unknown (a fault): an element of the array the address belongs to */
    if (cw != NULL && cw->arena != NULL && addr - (uintptr_t)cw->arena < cw->arena_size)
        return emu_describe_shared(c, cw, addr, size ? size : 1, kind, out, out_size);
    /* An empty array is passed as a null pointer. */
    if (addr < 65536) {
        for (size_t i = 0; i < c->n_regions; ++i) {
            const emu_region *r = &c->regions[i];
            if (r->lo == 0 && r->hi == 0 && r->itemsize > 0) {
                (void)snprintf(out, out_size,
                               "%s of %zu bytes %s '%s' (%s) at element %zu: the array is empty, so the kernel got a "
                               "null pointer",
                               emu_kind_verb(kind), size ? size : r->itemsize, emu_kind_prep(kind), r->name, r->what,
                               (size_t)addr / r->itemsize);
                return 1;
            }
        }
        return 0;
    }
    /* The nearest region: the one ending at or before addr, or starting after it. */
    const emu_region *best = NULL;
    uintptr_t best_gap = UINTPTR_MAX;
    for (size_t i = 0; i < c->n_regions; ++i) {
        const emu_region *r = &c->regions[i];
        if (r->lo == r->hi)
            continue;
        uintptr_t gap;
        if (addr + size <= r->lo)
            gap = r->lo - addr;
        else if (addr >= r->hi)
            gap = addr - r->hi + 1;
        else if (addr < r->lo || addr + size > r->hi)
            gap = 0; /* straddles an edge */
        else
            continue; /* inside: not this one */
        if (gap < best_gap) {
            best_gap = gap;
            best = r;
        }
    }
    if (best == NULL || best_gap > emu_redzone_of(best->lo, best->hi) + 4096)
        return 0;
    if (size == 0)
        size = best->itemsize ? best->itemsize : 1;
    char element[96], where[80];
    emu_element_text(addr, best->base, best->itemsize, element, sizeof element);
    if (addr < best->lo)
        (void)snprintf(where, sizeof where, "%" PRIuPTR " bytes before its start", best->lo - addr);
    else if (addr >= best->hi)
        (void)snprintf(where, sizeof where, "%" PRIuPTR " bytes past its end", addr - best->hi);
    else
        (void)snprintf(where, sizeof where, "straddling its end");
    (void)snprintf(out, out_size, "out-of-bounds %s of %zu bytes %s '%s' (%s) at %s, %s)", emu_kind_verb(kind), size,
                   emu_kind_prep(kind), best->name, best->what, element, where);
    return 1;
}

/* ---- per-access answers (modes 2 and 3) ------------------------------------------------------- */

static int emu_own_contains(const emu_check_worker *cw, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < cw->n_own; ++i)
        if (lo >= cw->own[i][0] && hi <= cw->own[i][1])
            return 1;
    return 0;
}

/* Whether an address outside every region is still one memcheck refuses: within the redzone of
 * a region and not the runtime's own memory. */
static int emu_near_region(const emu_check *c, uintptr_t lo, uintptr_t hi)
{
    const size_t a = emu_span_after(c, lo);
    int near = 0;
    if (a > 0 && lo < c->spans[a - 1].hi + emu_redzone_of(c->spans[a - 1].lo, c->spans[a - 1].hi))
        near = 1; /* past the end of (or straddling) the span before */
    if (a < c->n_spans && hi + emu_redzone_of(c->spans[a].lo, c->spans[a].hi) > c->spans[a].lo)
        near = 1; /* before the start of the next */
    for (size_t i = 0; !near && i < c->n_regions; ++i) /* empty regions: null pointers */
        near = c->regions[i].lo == 0 && c->regions[i].hi == 0 && lo < 65536;
    return near;
}

static void emu_thread_text(const emu_check *c, uint64_t gid, char *out, size_t size)
{
    const uint64_t tpb = c->threads_per_block ? c->threads_per_block : 1;
    const uint64_t b = gid / tpb, t = gid % tpb;
    (void)snprintf(out, size, "thread (%u, %u, %u) of block (%u, %u, %u)", (unsigned)(t % c->block.x),
                   (unsigned)((t / c->block.x) % c->block.y), (unsigned)(t / ((uint64_t)c->block.x * c->block.y)),
                   (unsigned)(b % c->grid.x), (unsigned)((b / c->grid.x) % c->grid.y),
                   (unsigned)(b / ((uint64_t)c->grid.x * c->grid.y)));
}

enum { EMU_FINDING_RACE = 1, EMU_FINDING_INIT = 2 };

typedef struct emu_access {
    uint64_t gid;        /* global thread id */
    uint64_t block_base; /* global id of the block's thread 0: a thread g is of this block iff
                          * g - block_base < threads_per_block (no division per access) */
    uint32_t cell_id; /* 1 + gid, modulo 2^32 */
    unsigned int linear;
    uint16_t epoch;
    uint8_t warp_gen;
    int atomic, write;
    const void *pc;
} emu_access;

/* Where an access went, told in words only when a report needs it. */
typedef struct emu_where {
    const emu_span *span;        /* global memory, or NULL */
    const emu_shared_decl *decl; /* a static __shared__ variable, or NULL */
    uintptr_t addr, var_base;    /* the access, and element 0 of a shared variable */
    size_t itemsize;
} emu_where;

static uint32_t emu_pc_offset(const emu_check *c, const void *pc)
{
    return (uint32_t)((uintptr_t)pc - c->pc_base);
}

static const void *emu_pc_of(const emu_check *c, uint32_t offset)
{
    return (const void *)(c->pc_base + offset);
}

static void emu_where_text(const emu_check *c, const emu_where *w, char *variable, size_t vsize, char *element,
                           size_t esize)
{
    if (w->span != NULL) {
        const emu_region *r = &c->regions[w->span->first];
        for (size_t i = w->span->first; i < w->span->first + w->span->count; ++i)
            if (w->addr >= c->regions[i].lo && w->addr < c->regions[i].hi) {
                r = &c->regions[i];
                break;
            }
        (void)snprintf(variable, vsize, "'%s'", r->name);
        emu_element_text(w->addr, r->base, r->itemsize, element, esize);
    } else if (w->decl != NULL) {
        (void)snprintf(variable, vsize, "__shared__ '%s'", w->decl->name);
        emu_element_text(w->addr, w->var_base, w->itemsize, element, esize);
    } else {
        (void)snprintf(variable, vsize, "%s", c->dynamic_name[0] ? c->dynamic_name : "extern __shared__ memory");
        emu_element_text(w->addr, w->var_base, 1, element, esize);
    }
    const size_t n = strlen(element);
    if (n + 1 < esize) {
        element[n] = ')';
        element[n + 1] = '\0';
    }
}

/* Whether an earlier access (thread gid, barrier epoch, warp generation) is ordered before the
 * current one `a`, for two accesses of the same block; other blocks are handled by the caller. */
static int emu_ordered_in_block(const emu_check *c, uint64_t gid, uint16_t epoch, uint8_t warp_gen,
                                const emu_access *a)
{
    (void)c;
    if (gid == a->gid)
        return 1;
    if (epoch != a->epoch)
        return 1; /* a __syncthreads() between them */
    const unsigned int other = (unsigned int)(gid - a->block_base);
    if (other / 32 == a->linear / 32 && warp_gen != a->warp_gen)
        return 1; /* a __syncwarp() between them */
    return 0;
}

/* The global thread id of a cell's 1 + id, in the current launch. */
static uint64_t emu_cell_gid(uint32_t id) { return (uint64_t)(id - 1u); }

/* One group of findings: the same kind of hazard (or initcheck finding) on the same variable
 * between the same two code addresses. */
typedef struct emu_report_group {
    int kind; /* EMU_FINDING_* */
    const char *hazard;
    const void *variable; /* the span or the __shared__ declaration, NULL for dynamic shared memory */
    const void *pc1, *pc2;
    uint64_t count, same_warp, cross_block; /* findings; pairs within one warp; pairs across blocks */
    uintptr_t lo, hi;                       /* the lowest and highest address */
    emu_where where;                        /* of the first finding */
    char example[1024];                     /* the first finding's threads and lines */
} emu_report_group;

/* The group of a finding, counted (under the lock): NULL when the finding joined an existing
 * group or the table is full; else a new group whose example the caller writes. */
static emu_report_group *emu_report_join(emu_check *c, int kind, const char *hazard, const emu_where *where,
                                         const void *pc1, const void *pc2, int same_warp, int cross)
{
    const void *variable = where->span != NULL ? (const void *)where->span : (const void *)where->decl;
    c->reports_total++;
    emu_report_group *g = c->groups;
    for (int i = 0; i < c->n_reports; ++i, ++g)
        if (g->kind == kind && g->hazard == hazard && g->variable == variable && g->pc1 == pc1 && g->pc2 == pc2) {
            g->count++;
            g->same_warp += (uint64_t)(same_warp != 0);
            g->cross_block += (uint64_t)(cross != 0);
            if (where->addr < g->lo)
                g->lo = where->addr;
            if (where->addr > g->hi)
                g->hi = where->addr;
            return NULL;
        }
    if (c->groups == NULL)
        c->groups = calloc(EMU_REPORT_GROUPS, sizeof *c->groups);
    if (c->groups == NULL || c->n_reports >= EMU_REPORT_GROUPS) {
        c->reports_dropped++;
        return NULL;
    }
    g = &c->groups[c->n_reports++];
    g->kind = kind;
    g->hazard = hazard;
    g->variable = variable;
    g->pc1 = pc1;
    g->pc2 = pc2;
    g->count = 1;
    g->same_warp = (uint64_t)(same_warp != 0);
    g->cross_block = (uint64_t)(cross != 0);
    g->lo = g->hi = where->addr;
    g->where = *where;
    g->example[0] = '\0';
    return g;
}

static const char *emu_access_verb(int atomic, int write)
{
    return atomic ? "made an atomic access" : (write ? "wrote" : "read");
}

static void emu_race_text(emu_check *c, const char *hazard, uint64_t first, uint32_t first_pc, int first_atomic,
                          const emu_access *a, const emu_where *where, int cross_block)
{
    const uint64_t tpb = c->threads_per_block;
    const unsigned int w1 = (unsigned int)((first % tpb) / 32), w2 = a->linear / 32;
    const void *pc1 = emu_pc_of(c, first_pc);
    const int first_read = strcmp(hazard, "write-after-read") == 0;
    pthread_mutex_lock(&c->lock);
    /* A pair with an atomic is not told to use __syncwarp(): atomics on one element usually
     * come from every warp of the block, and which pair the order of the threads shows first
     * says nothing about the others. */
    const int one_warp = !cross_block && w1 == w2 && !a->atomic && !first_atomic;
    emu_report_group *g = emu_report_join(c, EMU_FINDING_RACE, hazard, where, pc1, a->pc, one_warp, cross_block);
    if (g != NULL) {
        char t1[96], t2[96], p1[300], p2[300];
        emu_thread_text(c, first, t1, sizeof t1);
        emu_thread_text(c, a->gid, t2, sizeof t2);
        emu_format_pc(pc1, p1, sizeof p1);
        emu_format_pc(a->pc, p2, sizeof p2);
        (void)snprintf(g->example, sizeof g->example, "%s %s at %s, then %s %s at %s", t1,
                       emu_access_verb(first_atomic && !first_read, !first_read), p1, t2,
                       emu_access_verb(a->atomic, a->write), p2);
    }
    pthread_mutex_unlock(&c->lock);
}

/* Racecheck of one cell. `shared`: the cell is shared memory (same block only). */
static void emu_race_cell(emu_check *c, emu_check_worker *cw, emu_cell *cell, const emu_access *a, int shared,
                          const emu_where *where)
{
    const uint64_t tpb = c->threads_per_block;
    const uint64_t my_block = cw->block_linear;
    if (cell->stamp != c->stamp) { /* a cell of an earlier launch (or block): empty */
        const emu_cell empty = {.stamp = c->stamp};
        *cell = empty; /* two stores, not a call of memset */
    }
    /* against the last write. A plain read of a value written atomically is not reported: it
     * is how every atomicCAS loop starts (a GPU's aligned load is a whole value). */
    if (cell->writer != 0 && cell->writer != a->cell_id && !(cell->write_atomic && (a->atomic || !a->write))) {
        const uint64_t w = emu_cell_gid(cell->writer);
        const int cross = !shared && w - a->block_base >= tpb;
        int ordered;
        (void)my_block;
        if (!cross)
            ordered = emu_ordered_in_block(c, w, cell->write_epoch, cell->write_warp_gen, a);
        else
            ordered = c->block_fences != NULL && (uint16_t)c->block_fences[w / tpb] != cell->write_fences &&
                      cw->atomic_done != NULL && cw->atomic_done[a->linear]; /* fence after it, atomic before */
        if (!ordered)
            emu_race_text(c, a->write ? "write-after-write" : "read-after-write", w, cell->write_pc, cell->write_atomic, a,
                          where, cross);
    }
    if (a->write) {
        /* against the plain reads since the last write; an atomic too (a thread reading its bin
         * of a shared histogram while others still add to it). Atomic reads are not recorded. */
        if (cell->reader != 0 && (cell->reader != a->cell_id || cell->readers_many)) {
            const uint64_t r = emu_cell_gid(cell->reader);
            const int cross = !shared && r - a->block_base >= tpb;
            const int ordered = !cross && cell->reader != a->cell_id &&
                                emu_ordered_in_block(c, r, cell->read_epoch, cell->read_warp_gen, a);
            const int other_ordered = cell->read_epoch != a->epoch; /* the other readers' barrier count */
            if (!ordered && !(cell->reader == a->cell_id && other_ordered))
                emu_race_text(c, "write-after-read", r, cell->read_pc, 0, a, where, cross);
        }
        cell->writer = a->cell_id;
        cell->write_pc = emu_pc_offset(c, a->pc);
        cell->write_epoch = a->epoch;
        cell->write_warp_gen = a->warp_gen;
        cell->write_fences = c->block_fences != NULL ? (uint16_t)c->block_fences[my_block] : 0;
        cell->write_atomic = (uint8_t)a->atomic;
        cell->reader = 0;
        cell->readers_many = 0;
    } else if (!a->atomic) {
        const int stale = cell->reader != 0 && emu_cell_gid(cell->reader) - a->block_base < tpb &&
                          cell->read_epoch != a->epoch;
        if (cell->reader == 0 || stale) {
            cell->readers_many = 0;
        } else if (cell->reader != a->cell_id) {
            cell->readers_many = 1;
        }
        /* the latest reader is kept (its code address for the report) */
        cell->reader = a->cell_id;
        cell->read_pc = emu_pc_offset(c, a->pc);
        cell->read_epoch = a->epoch;
        cell->read_warp_gen = a->warp_gen;
    }
}

static void emu_init_report(emu_check *c, const emu_access *a, const emu_where *where, const char *what_format)
{
    pthread_mutex_lock(&c->lock);
    emu_report_group *g = emu_report_join(c, EMU_FINDING_INIT, NULL, where, a->pc, NULL, 0, 0);
    if (g != NULL) {
        char t[96], pc[300], variable[160], element[96], what[400];
        emu_thread_text(c, a->gid, t, sizeof t);
        emu_format_pc(a->pc, pc, sizeof pc);
        emu_where_text(c, where, variable, sizeof variable, element, sizeof element);
        (void)snprintf(what, sizeof what, what_format, variable, element);
        (void)snprintf(g->example, sizeof g->example, "initcheck: %s by %s at %s", what, t, pc);
    }
    pthread_mutex_unlock(&c->lock);
}

static int emu_shared_cells_ready(emu_check *c, emu_check_worker *cw, size_t bytes)
{
    (void)c;
    if (cw->shared_cap >= bytes)
        return 0;
    emu_table_free(cw->shared_cells, cw->shared_cap * sizeof(emu_cell));
    emu_table_free(cw->shared_written, cw->shared_cap);
    cw->shared_cells = emu_table_alloc(bytes * sizeof(emu_cell));
    cw->shared_written = emu_table_alloc(bytes);
    cw->shared_cap = cw->shared_cells && cw->shared_written ? bytes : 0;
    cw->shared_dirty = 0; /* fresh tables are zero */
    return cw->shared_cap ? 0 : -1;
}

/* `at`: the byte's index in the tracking tables (static part first, then dynamic memory). */
static void emu_track_shared(emu_check *c, emu_check_worker *cw, const emu_access *a, size_t at, size_t size,
                             const emu_where *where)
{
    if (emu_shared_cells_ready(c, cw, EMU_STATIC_SHARED_BYTES + c->shared_mem) != 0)
        return;
    if (at + size > cw->shared_dirty)
        cw->shared_dirty = at + size;
    if (c->initcheck && !a->write && !a->atomic) {
        for (size_t i = 0; i < size; ++i)
            if (!cw->shared_written[at + i]) {
                char format[200];
                (void)snprintf(format, sizeof format,
                               "read of %zu bytes of %%s %%s, which no thread of block %" PRIu64 " wrote in this launch", size,
                               cw->block_linear);
                emu_init_report(c, a, where, format);
                break;
            }
    }
    if (a->write || a->atomic)
        memset(cw->shared_written + at, 1, size);
    if (c->racecheck)
        for (size_t i = 0; i < size; ++i)
            emu_race_cell(c, cw, &cw->shared_cells[at + i], a, 1, where);
}

/* Always inlined: in racecheck's path a call per access more costs about a tenth of its time. */
static inline __attribute__((always_inline)) void emu_track_global(emu_check *c, emu_check_worker *cw,
                                                                   const emu_access *a, emu_span *s, uintptr_t addr,
                                                                   size_t size)
{
    const emu_where where = {s, NULL, addr, 0, 0};
    if (s->written != NULL) {
        unsigned char *w = s->written + (addr - s->lo);
        if (!a->write && !a->atomic) {
            for (size_t i = 0; i < size; ++i)
                if (!w[i]) {
                    char format[200];
                    (void)snprintf(format, sizeof format,
                                   "read of %zu bytes of output-only argument %%s %%s before any thread of the launch wrote "
                                   "it",
                                   size);
                    emu_init_report(c, a, &where, format);
                    break;
                }
        } else {
            memset(w, 1, size);
        }
    }
    if (s->cells != NULL) {
        const unsigned int shift = (unsigned int)__builtin_ctzll(s->granule); /* a power of two */
        const size_t first = (addr - s->lo) >> shift, last = (addr + size - 1 - s->lo) >> shift;
        for (size_t i = first; i <= last && i < s->n_cells; ++i)
            emu_race_cell(c, cw, &s->cells[i], a, 0, &where);
    }
}

/* The span among the worker's last ones that holds [addr, end), or NULL. */
static inline emu_span *emu_span_hinted(const emu_check_worker *cw, uintptr_t addr, uintptr_t end)
{
    for (int i = 0; i < EMU_SPAN_HINTS; ++i) {
        emu_span *h = cw->span_hint[i];
        if (h != NULL && addr >= h->lo && end <= h->hi)
            return h;
    }
    return NULL;
}

/* The tracking of a plain access to an output-only argument under initcheck (racecheck takes
 * emu_check_access), kept out of the short path below so that it keeps a small frame. */
static __attribute__((noinline)) int emu_track_plain(emu_check *c, emu_check_worker *cw, unsigned int linear,
                                                     emu_span *s, uintptr_t addr, size_t size, int write,
                                                     const void *pc)
{
    emu_access a;
    a.linear = linear;
    a.block_base = cw->block_linear * c->threads_per_block;
    a.gid = a.block_base + a.linear;
    a.cell_id = (uint32_t)(a.gid + 1u);
    a.epoch = (uint16_t)cw->block_epoch;
    a.warp_gen = (uint8_t)cw->warp_gen[(a.linear / 32) & 31];
    a.atomic = 0;
    a.write = write;
    a.pc = pc;
    emu_track_global(c, cw, &a, s, addr, size);
    return 0;
}

/* Without racecheck, the common case first, kept small: a plain access inside an argument the
 * worker touched lately. Anything else (shared memory, atomics, a span not among the hints, an
 * address outside every argument) takes the full path, emu_check_access. Racecheck calls that
 * directly: its tracking is inlined there, and a layer more would cost it a tenth. */
int emu_check_access_plain(emu_check *c, emu_check_worker *cw, const cunumpy_emu_thread *t, uintptr_t addr,
                           size_t size, int kind, const void *pc, char *error, size_t error_size)
{
    const uintptr_t end = addr + (size ? size : 1);
    if ((kind & CUNUMPY_EMU_ACCESS_ATOMIC) == 0 &&
        (cw->arena == NULL || addr - (uintptr_t)cw->arena >= cw->arena_size)) {
        emu_span *s = emu_span_hinted(cw, addr, end);
        if (s != NULL) {
            if (s->written != NULL) /* initcheck's table of an output-only argument */
                return emu_track_plain(c, cw, t ? t->linear : 0, s, addr, end - addr,
                                       (kind & CUNUMPY_EMU_ACCESS_WRITE) != 0, pc);
            return 0;
        }
    }
    return emu_check_access(c, cw, t, addr, size, kind, pc, error, error_size);
}

int emu_check_access(emu_check *c, emu_check_worker *cw, const cunumpy_emu_thread *t, uintptr_t addr, size_t size,
                     int kind, const void *pc, char *error, size_t error_size)
{
    const uintptr_t end = addr + (size ? size : 1);
    const int tracking = c->mode == 3 && (c->racecheck || c->initcheck);
    emu_access a;
    if (tracking) {
        a.linear = t ? t->linear : 0;
        a.block_base = cw->block_linear * c->threads_per_block;
        a.gid = a.block_base + a.linear;
        a.cell_id = (uint32_t)(a.gid + 1u);
        a.epoch = (uint16_t)cw->block_epoch;
        a.warp_gen = (uint8_t)cw->warp_gen[(a.linear / 32) & 31];
        a.atomic = (kind & CUNUMPY_EMU_ACCESS_ATOMIC) != 0;
        a.write = (kind & CUNUMPY_EMU_ACCESS_WRITE) != 0;
        a.pc = pc;
        if (a.atomic && cw->atomic_done != NULL && a.linear < c->threads_per_block)
            cw->atomic_done[a.linear] = 1;
    }
    /* __shared__ memory */
    if (cw->arena != NULL && addr - (uintptr_t)cw->arena < cw->arena_size) {
        const size_t at = (size_t)(addr - (uintptr_t)cw->arena);
        if (at >= EMU_STATIC_SHARED_OFFSET && at < EMU_STATIC_SHARED_OFFSET + EMU_STATIC_SHARED_BYTES) {
            const size_t off = at - EMU_STATIC_SHARED_OFFSET;
            int inside = 0;
            const emu_shared_decl *d = emu_decl_near(c->layout, off, &inside);
            if (inside && off + size <= d->offset + d->size) {
                if (tracking) {
                    const emu_where where = {NULL, d, addr, (uintptr_t)cw->arena + EMU_STATIC_SHARED_OFFSET + d->offset,
                                             d->itemsize};
                    emu_track_shared(c, cw, &a, off, size, &where);
                }
                return 0;
            }
        } else if (at >= EMU_DYNAMIC_SHARED_OFFSET && at - EMU_DYNAMIC_SHARED_OFFSET + size <= c->shared_mem) {
            if (tracking) {
                const emu_where where = {NULL, NULL, addr, (uintptr_t)cw->arena + EMU_DYNAMIC_SHARED_OFFSET, 1};
                emu_track_shared(c, cw, &a, EMU_STATIC_SHARED_BYTES + (at - EMU_DYNAMIC_SHARED_OFFSET), size, &where);
            }
            return 0;
        }
        emu_check_describe(c, cw, addr, size, kind, error, error_size);
        return -1;
    }
    emu_span *s = emu_span_hinted(cw, addr, end);
    if (s == NULL) {
        s = emu_span_of(c, addr, end);
        if (s != NULL) {
            cw->span_hint[cw->span_hint_next] = s;
            cw->span_hint_next = (cw->span_hint_next + 1u) % EMU_SPAN_HINTS;
        }
    }
    if (s != NULL) {
        if (tracking)
            emu_track_global(c, cw, &a, s, addr, end - addr);
        return 0;
    }
    if (__builtin_expect(emu_shadow_contains(addr, end), 0)) {
        (void)snprintf(error, error_size,
                       "%s of %zu bytes %s address 0x%" PRIxPTR ", inside the memory checks' shadow (a wild pointer, "
                       "made from an integer?)",
                       emu_kind_verb(kind), size, emu_kind_prep(kind), addr);
        return -1;
    }
    if (!emu_near_region(c, addr, end) || emu_own_contains(cw, addr, end) ||
        emu_ranges_contain(c->internal, c->n_internal, addr, end))
        return 0;
    if (!emu_check_describe(c, cw, addr, size, kind, error, error_size))
        return 0;
    return -1;
}

int emu_check_block_start(emu_check *c, emu_check_worker *cw)
{
    if (c->mode != 3 || !(c->racecheck || c->initcheck))
        return 0; /* the orderings below are read by racecheck alone */
    cw->block_epoch = 0;
    memset(cw->warp_gen, 0, sizeof cw->warp_gen);
    if (cw->atomic_cap < c->threads_per_block) {
        free(cw->atomic_done);
        cw->atomic_done = calloc(c->threads_per_block, 1);
        cw->atomic_cap = cw->atomic_done ? c->threads_per_block : 0;
        if (cw->atomic_done == NULL)
            return -1;
    }
    memset(cw->atomic_done, 0, c->threads_per_block);
    const size_t tracked = EMU_STATIC_SHARED_BYTES + c->shared_mem;
    if (emu_shared_cells_ready(c, cw, tracked) != 0)
        return -1;
    /* Shared memory is the block's: nothing of an earlier block (or launch) is written or
     * ordered. Only the entries ever set are cleared. */
    const size_t dirty = cw->shared_dirty < cw->shared_cap ? cw->shared_dirty : cw->shared_cap;
    memset(cw->shared_written, 0, dirty);
    memset(cw->shared_cells, 0, dirty * sizeof(emu_cell));
    cw->shared_dirty = 0;
    return 0;
}

void emu_check_fence(emu_check *c, emu_check_worker *cw)
{
    if (c->block_fences != NULL && cw->block_linear < c->n_blocks)
        c->block_fences[cw->block_linear]++;
}

/* The groups' text, the largest first (16 at most). */
const char *emu_check_reports(emu_check *c, const char **kind)
{
    if (c->n_reports == 0)
        return "";
    int order[EMU_REPORT_GROUPS];
    for (int i = 0; i < c->n_reports; ++i)
        order[i] = i;
    for (int i = 1; i < c->n_reports; ++i) /* few groups: insertion sort, stable */
        for (int j = i; j > 0 && c->groups[order[j]].count > c->groups[order[j - 1]].count; --j) {
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    *kind = "initcheck";
    for (int i = 0; i < c->n_reports; ++i)
        if (c->groups[i].kind == EMU_FINDING_RACE)
            *kind = "racecheck";
    size_t used = 0;
    const int shown = c->n_reports < 16 ? c->n_reports : 16;
    used += (size_t)snprintf(c->reports, sizeof c->reports, ", in %d group(s)%s", c->n_reports,
                             c->reports_dropped ? " and more" : "");
    if (shown < c->n_reports || c->reports_dropped)
        used += (size_t)snprintf(c->reports + used, sizeof c->reports - used, " (the %d largest shown)", shown);
    if (used < sizeof c->reports)
        used += (size_t)snprintf(c->reports + used, sizeof c->reports - used, ":");
    for (int k = 0; k < shown && used + 8 < sizeof c->reports; ++k) {
        const emu_report_group *g = &c->groups[order[k]];
        char times[64] = "";
        if (g->count > 1)
            (void)snprintf(times, sizeof times, " (%llu times)", (unsigned long long)g->count);
        if (g->kind == EMU_FINDING_INIT) {
            used += (size_t)snprintf(c->reports + used, sizeof c->reports - used, "\n  - %s%s", g->example, times);
            continue;
        }
        char variable[160], element[96], range[260];
        emu_where w = g->where;
        w.addr = g->lo;
        emu_where_text(c, &w, variable, sizeof variable, element, sizeof element);
        if (g->hi != g->lo) {
            char last[96];
            w.addr = g->hi;
            emu_where_text(c, &w, variable, sizeof variable, last, sizeof last);
            (void)snprintf(range, sizeof range, "%s to %s", element, last);
        } else {
            (void)snprintf(range, sizeof range, "%s", element);
        }
        char why[300];
        if (g->cross_block == g->count)
            (void)snprintf(why, sizeof why,
                           "in different blocks, which are not ordered (use atomics, or split the work into two kernels)");
        else if (g->same_warp == g->count)
            (void)snprintf(why, sizeof why,
                           "each pair in one warp with no __syncwarp() between them: warp-synchronous code is a race "
                           "under independent thread scheduling (Volta and later)");
        else if (g->cross_block == 0)
            (void)snprintf(why, sizeof why, "with no __syncthreads() between them");
        else
            (void)snprintf(why, sizeof why,
                           "with no __syncthreads() between them (%llu of the pairs in different blocks, which are "
                           "not ordered)",
                           (unsigned long long)g->cross_block);
        used += (size_t)snprintf(c->reports + used, sizeof c->reports - used, "\n  - racecheck: %s hazard on %s %s%s: %s, %s",
                                 g->hazard, variable, range, times, g->example, why);
    }
    return c->reports;
}
