/* In-place compaction along one axis, pure C (no Python), shared by compact.c and tests/c.
 *
 * Each array is a set of lanes: a lane is a run of `elsize` bytes per position along the
 * axis, `stride` bytes apart (a contiguous row of an (n, 3) array is one lane of 24 bytes;
 * a component-major (3, n) array compacted along its last axis is three lanes of 8 bytes).
 *
 * Two phases over fixed blocks of CN_COMPACT_BLOCK positions (fixed: the result never depends
 * on the thread count). Scan: each block reads its part of the mask once into a bitmap and
 * counts its live positions; a serial prefix sum gives each block its destination offset.
 * Move: each block moves its live positions to its offset, found in the bitmap a word at a
 * time (vpcompress on AVX-512 for contiguous 4 and 8-byte lanes, count-trailing-zeros
 * otherwise); no index list is built. Writes stay in [offset, offset + count) of the block.
 * The move runs lane by lane (see cn_compact_move_chunks). In place, a block's destinations may
 * be sources of an earlier block of the same lane not yet moved: a block waits for exactly
 * those blocks (their `done` flags). Chunks start in increasing order, so the lowest
 * unfinished block of a lane never waits. */
#ifndef CUNUMPY__CORE_COMPACT_KERNELS_H
#define CUNUMPY__CORE_COMPACT_KERNELS_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *base;
    ptrdiff_t stride;         /* bytes between positions along the axis */
    size_t elsize;            /* bytes moved per position and lane */
    size_t nlanes;
    const ptrdiff_t *lanes;   /* byte offset of each lane from base */
} cn_compact_array;

#define CN_COMPACT_BLOCK ((size_t)1 << 15) /* positions per block, a multiple of 64 */

typedef struct {
    const char *mask;
    ptrdiff_t mask_stride;
    size_t n;
    const cn_compact_array *arrays;
    size_t narrays;
    uint64_t *bits;           /* ceil(n / 64) words: bit j of word w is mask[64 w + j] != 0 */
    size_t *offset;           /* per block: its count after the scan, its offset after the sum */
    int *done;                /* per move chunk: set (release) once its sources are read */
} cn_compact_job;

/* Bit k of the result is set when byte k of `w` is nonzero. */
static inline uint64_t cn_nonzero_bytes_to_bits(uint64_t w)
{
    uint64_t high = ((w & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | w;
    high = (high >> 7) & 0x0101010101010101ull; /* byte k: 1 if nonzero */
    return (high * 0x0102040810204080ull) >> 56;
}

static void cn_compact_scan_block(void *ctx, size_t b)
{
    cn_compact_job *job = ctx;
    size_t start = b * CN_COMPACT_BLOCK;
    size_t end = job->n - start < CN_COMPACT_BLOCK ? job->n : start + CN_COMPACT_BLOCK;
    size_t count = 0;
    for (size_t i0 = start; i0 < end; i0 += 64) {
        size_t len = end - i0 < 64 ? end - i0 : 64;
        uint64_t word = 0;
        size_t j = 0;
        if (job->mask_stride == 1) {
            for (; j + 8 <= len; j += 8) {
                uint64_t w;
                memcpy(&w, job->mask + i0 + j, 8);
                word |= cn_nonzero_bytes_to_bits(w) << j;
            }
        }
        for (; j < len; j++)
            word |= (uint64_t)(job->mask[(ptrdiff_t)(i0 + j) * job->mask_stride] != 0) << j;
        job->bits[i0 / 64] = word;
        count += (size_t)__builtin_popcountll(word);
    }
    job->offset[b] = count;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CN_HAVE_AVX512_BUILD 1

/* Contiguous 4 and 8-byte lanes with AVX-512: a masked load reads only the live elements of
 * a group, vpcompress packs them, a masked store writes exactly their count (every write
 * stays in [dst, dst + count)). */
/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_COMPACT_AVX512(NAME, T, GROUP, MASK_T, LOAD, COMPRESS, STORE)                    \
    __attribute__((target("avx512f"))) static size_t NAME(char *base, const uint64_t *bits,       \
                                                          size_t start, size_t end, size_t dst)   \
    {                                                                                              \
        T *a = (T *)(void *)base;                                                                  \
        for (size_t i0 = start; i0 < end; i0 += 64) {                                              \
            uint64_t word = bits[i0 / 64];                                                         \
            size_t len = end - i0 < 64 ? end - i0 : 64;                                            \
            if (word == 0)                                                                         \
                continue;                                                                          \
            if (dst == i0 && word == (len == 64 ? ~0ull : (1ull << len) - 1)) {                    \
                dst += len;                                                                        \
                continue;                                                                          \
            }                                                                                      \
            for (size_t g = 0; g < len; g += GROUP) {                                              \
                MASK_T m = (MASK_T)(word >> g);                                                    \
                if (m == 0)                                                                        \
                    continue;                                                                      \
                unsigned count = (unsigned)__builtin_popcount((unsigned)m);                        \
                STORE(a + dst, (MASK_T)((1u << count) - 1), COMPRESS(m, LOAD(m, a + i0 + g)));     \
                dst += count;                                                                      \
            }                                                                                      \
        }                                                                                          \
        return dst;                                                                                \
    }
/* NOLINTEND(bugprone-macro-parentheses) */
CN_DEFINE_COMPACT_AVX512(cn_compact_run8_avx512, int64_t, 8, __mmask8, _mm512_maskz_loadu_epi64,
                         _mm512_maskz_compress_epi64, _mm512_mask_storeu_epi64)
CN_DEFINE_COMPACT_AVX512(cn_compact_run4_avx512, int32_t, 16, __mmask16, _mm512_maskz_loadu_epi32,
                         _mm512_maskz_compress_epi32, _mm512_mask_storeu_epi32)

/* Contiguous rows of q = 2 or 3 eight-byte words ((n, 2) and (n, 3) float64): a group of 8
 * rows is q vectors; the row mask is spread to one bit per word (pdep) and each vector is
 * compressed as above. Stores end within the group's own, already loaded, words. */
__attribute__((target("avx512f,bmi2"))) static size_t
cn_compact_rows_avx512(char *base, size_t q, const uint64_t *bits, size_t start, size_t end,
                       size_t dst)
{
    int64_t *a = (int64_t *)(void *)base;
    uint32_t spread[3] = {0, 0, 0};
    for (size_t r = 0; r < q; r++)
        for (size_t k = 0; k < 8; k++)
            spread[r] |= 1u << (r + q * k);
    for (size_t i0 = start; i0 < end; i0 += 64) {
        uint64_t word = bits[i0 / 64];
        size_t len = end - i0 < 64 ? end - i0 : 64;
        if (word == 0)
            continue;
        if (dst == i0 && word == (len == 64 ? ~0ull : (1ull << len) - 1)) {
            dst += len;
            continue;
        }
        for (size_t g = 0; g < len; g += 8) {
            unsigned m = (unsigned)(word >> g) & 0xffu;
            if (m == 0)
                continue;
            uint32_t words = 0;
            for (size_t r = 0; r < q; r++)
                words |= _pdep_u32(m, spread[r]);
            const int64_t *src = a + (i0 + g) * q;
            int64_t *out = a + dst * q;
            for (size_t z = 0; z < q; z++) {
                __mmask8 mz = (__mmask8)(words >> (8 * z));
                unsigned k = (unsigned)__builtin_popcount(mz);
                __m512i v = _mm512_maskz_loadu_epi64(mz, src + 8 * z);
                _mm512_mask_storeu_epi64(out, (__mmask8)((1u << k) - 1),
                                         _mm512_maskz_compress_epi64(mz, v));
                out += k;
            }
            dst += (size_t)__builtin_popcount(m);
        }
    }
    return dst;
}

static inline int cn_compact_avx512(void)
{
    /* Pool threads may ask at once: an atomic flag, decided by whoever is first. */
    static int flag = -1;
    int have = __atomic_load_n(&flag, __ATOMIC_RELAXED);
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2") ? 1 : 0;
        __atomic_store_n(&flag, have, __ATOMIC_RELAXED);
    }
    return have;
}
#else
#define CN_HAVE_AVX512_BUILD 0
#endif

/* Move the live positions of [start, end) of one lane to dst, dst + 1, ...; returns the end.
 * Only live positions are read and written. */
static inline size_t cn_compact_lane(char *base, ptrdiff_t stride, size_t elsize,
                                     const uint64_t *bits, size_t start, size_t end, size_t dst)
{
#if CN_HAVE_AVX512_BUILD
    if ((elsize == 8 || elsize == 4) && stride == (ptrdiff_t)elsize &&
        ((uintptr_t)base % elsize) == 0 && cn_compact_avx512())
        return elsize == 8 ? cn_compact_run8_avx512(base, bits, start, end, dst)
                           : cn_compact_run4_avx512(base, bits, start, end, dst);
    if ((elsize == 16 || elsize == 24) && stride == (ptrdiff_t)elsize &&
        ((uintptr_t)base % 8) == 0 && cn_compact_avx512())
        return cn_compact_rows_avx512(base, elsize / 8, bits, start, end, dst);
#endif
    /* Otherwise one live position at a time, found with count-trailing-zeros. */
#define CN_MOVE_FIXED(T)                                                                           \
    for (size_t i0 = start; i0 < end; i0 += 64) {                                                  \
        uint64_t word = bits[i0 / 64];                                                             \
        size_t len = end - i0 < 64 ? end - i0 : 64;                                                \
        if (dst == i0 && word == (len == 64 ? ~0ull : (1ull << len) - 1)) {                        \
            dst += len; /* all live and already in place */                                        \
            continue;                                                                              \
        }                                                                                          \
        while (word != 0) {                                                                        \
            size_t j = (size_t)__builtin_ctzll(word);                                              \
            word &= word - 1;                                                                      \
            T v;                                                                                   \
            memcpy(&v, base + (ptrdiff_t)(i0 + j) * stride, sizeof v);                             \
            memcpy(base + (ptrdiff_t)dst * stride, &v, sizeof v);                                  \
            dst++;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    break;
    switch (elsize) {
    case 1: CN_MOVE_FIXED(uint8_t)
    case 2: CN_MOVE_FIXED(uint16_t)
    case 4: CN_MOVE_FIXED(uint32_t)
    case 8: CN_MOVE_FIXED(uint64_t)
    case 16: {
        typedef struct { uint64_t a, b; } pair;
        CN_MOVE_FIXED(pair)
    }
    case 24: {
        typedef struct { uint64_t a, b, c; } triple;
        CN_MOVE_FIXED(triple)
    }
    default:
        /* memmove: an overlapping view (stride < elsize) must not corrupt memory. */
        for (size_t i = start; i < end; i++) {
            if ((bits[i / 64] >> (i % 64)) & 1) {
                if (dst != i)
                    memmove(base + (ptrdiff_t)dst * stride, base + (ptrdiff_t)i * stride, elsize);
                dst++;
            }
        }
        break;
    }
#undef CN_MOVE_FIXED
    return dst;
}

static inline size_t cn_compact_blocks(size_t n)
{
    return (n + CN_COMPACT_BLOCK - 1) / CN_COMPACT_BLOCK;
}

/* The lanes of all arrays, counted in order: the move phase runs lane by lane. */
static inline size_t cn_compact_lanes(const cn_compact_job *job)
{
    size_t lanes = 0;
    for (size_t a = 0; a < job->narrays; a++)
        lanes += job->arrays[a].nlanes;
    return lanes;
}

/* Chunks of the move phase: every block of the first lane, then of the second, and so on.
 * Lane by lane rather than block by block over all lanes: a destination is then written soon
 * after its bytes were read as sources (the distance is 30% of one lane at 70% live, not of
 * all arrays together), so its cache line is usually still in the cache and the store does
 * not have to fetch it from memory again. `done` holds one flag per chunk. */
static inline size_t cn_compact_move_chunks(const cn_compact_job *job)
{
    return cn_compact_lanes(job) * cn_compact_blocks(job->n);
}

static void cn_compact_move_chunk(void *ctx, size_t chunk)
{
    cn_compact_job *job = ctx;
    size_t nblocks = cn_compact_blocks(job->n);
    size_t unit = chunk / nblocks, b = chunk % nblocks;
    size_t start = b * CN_COMPACT_BLOCK;
    size_t end = job->n - start < CN_COMPACT_BLOCK ? job->n : start + CN_COMPACT_BLOCK;
    size_t dst = job->offset[b], count = job->offset[b + 1] - dst;
    int *done = job->done != NULL ? job->done + unit * nblocks : NULL; /* NULL: serial */
    if (count > 0 && dst < start && done != NULL) {
        /* Blocks of this lane whose sources overlap [dst, dst + count) must have read them. */
        size_t first = dst / CN_COMPACT_BLOCK, last = (dst + count - 1) / CN_COMPACT_BLOCK;
        if (last >= b)
            last = b - 1;
        for (size_t c = first; c <= last; c++) {
            while (!__atomic_load_n(&done[c], __ATOMIC_ACQUIRE))
                sched_yield();
        }
    }
    if (count > 0) {
        const cn_compact_array *arr = job->arrays;
        size_t l = unit;
        while (l >= arr->nlanes) {
            l -= arr->nlanes;
            arr++;
        }
        char *lane = arr->base + arr->lanes[l];
        cn_compact_lane(lane, arr->stride, arr->elsize, job->bits, start, end, dst);
    }
    if (done != NULL)
        __atomic_store_n(&done[b], 1, __ATOMIC_RELEASE);
}

/* Between the phases: counts to offsets; offset[nblocks] is the total. */
static size_t cn_compact_offsets(cn_compact_job *job)
{
    size_t nblocks = cn_compact_blocks(job->n), sum = 0;
    for (size_t b = 0; b < nblocks; b++) {
        size_t c = job->offset[b];
        job->offset[b] = sum;
        sum += c;
    }
    job->offset[nblocks] = sum;
    return sum;
}

/* Serial driver (tests/c): bits and offset (nblocks + 1) are the caller's; done may be NULL
 * (chunks run in order, none waits) or hold cn_compact_move_chunks zeroed flags. Returns the
 * number of live positions. */
static size_t cn_compact_serial(cn_compact_job *job)
{
    size_t nblocks = cn_compact_blocks(job->n);
    for (size_t b = 0; b < nblocks; b++)
        cn_compact_scan_block(job, b);
    size_t live = cn_compact_offsets(job);
    for (size_t c = 0, chunks = cn_compact_move_chunks(job); c < chunks; c++)
        cn_compact_move_chunk(job, c);
    return live;
}

/* Serial compaction with its own scratch (tests/c); SIZE_MAX when memory runs out. */
static inline size_t cn_compact(const char *mask, ptrdiff_t ms, size_t n,
                                const cn_compact_array *arrays, size_t narrays)
{
    size_t nblocks = cn_compact_blocks(n);
    cn_compact_job job = {mask, ms, n, arrays, narrays, NULL, NULL, NULL};
    job.bits = malloc(((n + 63) / 64 + 1) * sizeof(uint64_t));
    job.offset = malloc((nblocks + 1) * sizeof(size_t));
    size_t live = SIZE_MAX;
    if (job.bits != NULL && job.offset != NULL)
        live = cn_compact_serial(&job);
    free(job.bits);
    free(job.offset);
    return live;
}

#endif /* CUNUMPY__CORE_COMPACT_KERNELS_H */
