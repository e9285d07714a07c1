/* Segment sums, cell offsets and run boundaries, pure C (no Python), shared by segment.c and
 * tests/c. Keys are read through a byte stride as int32, int64 or uint64. */
#ifndef CUNUMPY__CORE_SEGMENT_KERNELS_H
#define CUNUMPY__CORE_SEGMENT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "key_types.h"

/* A key as int64; uint64 keys above INT64_MAX become INT64_MAX (out of any range). */
static inline int64_t cn_skey(cn_key_type t, const char *p)
{
    switch (t) {
    case CN_KEY_I8: { int8_t v; memcpy(&v, p, 1); return v; }
    case CN_KEY_U8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case CN_KEY_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case CN_KEY_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case CN_KEY_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: break;
    }
    if (t == CN_KEY_I32) {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    if (t == CN_KEY_I64) {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    uint64_t u;
    memcpy(&u, p, 8);
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
}

/* Index of the first key >= n_segments, or -1. */
static ptrdiff_t cn_segment_check(cn_key_type t, const char *keys, ptrdiff_t ks, size_t n,
                                  int64_t n_segments)
{
    for (size_t i = 0; i < n; i++) {
        if (cn_skey(t, keys + (ptrdiff_t)i * ks) >= n_segments)
            return (ptrdiff_t)i;
    }
    return -1;
}

/* out[k, :] = sum of rows i with keys[i] == k (out is C-contiguous (n_segments, m), zeroed
 * here); rows with negative keys are dropped. Keys >= n_segments are skipped and the first
 * one's row is returned (-1 if none), so the caller can raise.
 *
 * Two loops: where neighbouring keys repeat (sorted or clustered keys), a run of equal keys
 * is summed in registers and added to memory once; where they do not (scattered keys), each
 * row is added directly and the output row of a later key is prefetched, which keeps the
 * random accesses overlapped. A sample of the keys picks the loop. */
#define CN_SEGMENT_PREFETCH 16

/* A uint64 key as int64, clamped (a function: the test on narrower types would warn). */
static inline int64_t cn_seg_clamp_u64(uint64_t u)
{
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
}

#define CN_SEG_READ_KEY(KT, KSUF, i)                                                               \
    ({                                                                                             \
        KT kr_;                                                                                    \
        memcpy(&kr_, keys + (ptrdiff_t)(i) * ks, sizeof kr_);                                      \
        (KSUF) == CN_KEY_U64 ? cn_seg_clamp_u64((uint64_t)kr_) : (int64_t)kr_;                     \
    })

/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_SEGMENT_SUM(NAME, T, KT, KSUF)                                                   \
    static int NAME##_runs_likely(const char *keys, ptrdiff_t ks, size_t n)                        \
    {                                                                                              \
        size_t sample = n < 1024 ? n : 1024, equal = 0;                                            \
        for (size_t i = 1; i < sample; i++)                                                        \
            equal += CN_SEG_READ_KEY(KT, KSUF, i) == CN_SEG_READ_KEY(KT, KSUF, i - 1);             \
        return equal * 4 >= sample;                                                                \
    }                                                                                              \
    /* Rows of M values (M fixed at compile time, or m when M == 0). */                            \
    static inline __attribute__((always_inline)) ptrdiff_t NAME##_m(const char *keys, ptrdiff_t ks, size_t n, const char *vals,   \
                                     ptrdiff_t vs0, ptrdiff_t vs1, size_t m, T *out,               \
                                     int64_t n_segments, int runs)                                 \
    {                                                                                              \
        ptrdiff_t bad = -1;                                                                        \
        const uint64_t nseg = (uint64_t)n_segments;                                                \
        if (runs && m <= 4) {                                                                      \
            int64_t cur = -1;                                                                      \
            T acc[4] = {0, 0, 0, 0};                                                               \
            for (size_t i = 0; i < n; i++) {                                                       \
                int64_t k = CN_SEG_READ_KEY(KT, KSUF, i);                                          \
                const char *row = vals + (ptrdiff_t)i * vs0;                                       \
                if (k == cur) {                                                                    \
                    for (size_t j = 0; j < m; j++)                                                 \
                        acc[j] += *(const T *)(row + (ptrdiff_t)j * vs1);                          \
                    continue;                                                                      \
                }                                                                                  \
                if (cur >= 0) {                                                                    \
                    T *o = out + (size_t)cur * m;                                                  \
                    for (size_t j = 0; j < m; j++)                                                 \
                        o[j] += acc[j];                                                            \
                }                                                                                  \
                if ((uint64_t)k < nseg) {                                                          \
                    cur = k;                                                                       \
                    for (size_t j = 0; j < m; j++)                                                 \
                        acc[j] = *(const T *)(row + (ptrdiff_t)j * vs1);                           \
                } else {                                                                           \
                    if (k >= 0 && bad < 0)                                                         \
                        bad = (ptrdiff_t)i;                                                        \
                    cur = -1;                                                                      \
                }                                                                                  \
            }                                                                                      \
            if (cur >= 0) {                                                                        \
                T *o = out + (size_t)cur * m;                                                      \
                for (size_t j = 0; j < m; j++)                                                     \
                    o[j] += acc[j];                                                                \
            }                                                                                      \
            return bad;                                                                            \
        }                                                                                          \
        /* Prefetch only when the output does not sit in L2 anyway. */                             \
        const size_t pf_end = nseg * m * sizeof(T) > 262144 ? n : 0;                               \
        for (size_t i = 0; i < n; i++) {                                                           \
            if (i + CN_SEGMENT_PREFETCH < pf_end) {                                                \
                int64_t kp = CN_SEG_READ_KEY(KT, KSUF, i + CN_SEGMENT_PREFETCH);                   \
                if ((uint64_t)kp < nseg)                                                           \
                    __builtin_prefetch(out + (size_t)kp * m, 1, 3);                                \
            }                                                                                      \
            int64_t k = CN_SEG_READ_KEY(KT, KSUF, i);                                              \
            if ((uint64_t)k >= nseg) {                                                             \
                if (k >= 0 && bad < 0)                                                             \
                    bad = (ptrdiff_t)i;                                                            \
                continue;                                                                          \
            }                                                                                      \
            const char *row = vals + (ptrdiff_t)i * vs0;                                           \
            T *o = out + (size_t)k * m;                                                            \
            for (size_t j = 0; j < m; j++)                                                         \
                o[j] += *(const T *)(row + (ptrdiff_t)j * vs1);                                    \
        }                                                                                          \
        return bad;                                                                                \
    }                                                                                              \
    static ptrdiff_t NAME(const char *keys, ptrdiff_t ks, size_t n, const char *vals,              \
                          ptrdiff_t vs0, ptrdiff_t vs1, size_t m, T *out, int64_t n_segments)      \
    {                                                                                              \
        memset(out, 0, (size_t)n_segments * m * sizeof(T));                                        \
        if (n == 0 || m == 0)                                                                      \
            return cn_segment_check(KSUF, keys, ks, n, n_segments);                                \
        int runs = NAME##_runs_likely(keys, ks, n);                                                \
        /* Constant m lets the compiler unroll the row loops and keep sums in registers. */        \
        switch (m) {                                                                               \
        case 1: return NAME##_m(keys, ks, n, vals, vs0, vs1, 1, out, n_segments, runs);            \
        case 2: return NAME##_m(keys, ks, n, vals, vs0, vs1, 2, out, n_segments, runs);            \
        case 3: return NAME##_m(keys, ks, n, vals, vs0, vs1, 3, out, n_segments, runs);            \
        case 4: return NAME##_m(keys, ks, n, vals, vs0, vs1, 4, out, n_segments, runs);            \
        default: return NAME##_m(keys, ks, n, vals, vs0, vs1, m, out, n_segments, runs);           \
        }                                                                                          \
    }
/* NOLINTEND(bugprone-macro-parentheses) */

CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_i32, double, int32_t, CN_KEY_I32)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_i64, double, int64_t, CN_KEY_I64)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_u64, double, uint64_t, CN_KEY_U64)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_i32, float, int32_t, CN_KEY_I32)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_i64, float, int64_t, CN_KEY_I64)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_u64, float, uint64_t, CN_KEY_U64)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_i8, double, int8_t, CN_KEY_I8)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_u8, double, uint8_t, CN_KEY_U8)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_i16, double, int16_t, CN_KEY_I16)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_u16, double, uint16_t, CN_KEY_U16)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_d_u32, double, uint32_t, CN_KEY_U32)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_i8, float, int8_t, CN_KEY_I8)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_u8, float, uint8_t, CN_KEY_U8)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_i16, float, int16_t, CN_KEY_I16)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_u16, float, uint16_t, CN_KEY_U16)
CN_DEFINE_SEGMENT_SUM(cn_segment_sum_f_u32, float, uint32_t, CN_KEY_U32)

/* One chunk [a, b) of cn_cell_offsets (a > 0 reads row a - 1 as its predecessor): writes the
 * starts of the cells after that row's key up to the chunk's last key (and, for the last
 * chunk, the ends). Every write stays in off[0 .. n_cells]. Returns -1 or the first bad row. */
static ptrdiff_t cn_cell_offsets_chunk(cn_key_type t, const char *keys, ptrdiff_t ks, size_t n,
                                       size_t a, size_t b, int64_t n_cells, int64_t *off)
{
    int64_t prev = 0, next = 0;
    if (a > 0) {
        prev = cn_skey(t, keys + (ptrdiff_t)(a - 1) * ks);
        if (prev < 0 || prev >= n_cells)
            return (ptrdiff_t)(a - 1);
        next = prev + 1;
    }
    for (size_t i = a; i < b; i++) {
        int64_t k = cn_skey(t, keys + (ptrdiff_t)i * ks);
        if (k < prev || k >= n_cells)
            return (ptrdiff_t)i;
        while (next <= k)
            off[next++] = (int64_t)i;
        prev = k;
    }
    if (b == n) {
        while (next <= n_cells)
            off[next++] = (int64_t)n;
    }
    return -1;
}

/* Offsets of n sorted cell ids in [0, n_cells): off has n_cells + 1 entries. Returns -1, or
 * the first row that is out of range or smaller than its predecessor (off then unspecified). */
static ptrdiff_t cn_cell_offsets(cn_key_type t, const char *keys, ptrdiff_t ks, size_t n,
                                 int64_t n_cells, int64_t *off)
{
    return cn_cell_offsets_chunk(t, keys, ks, n, 0, n, n_cells, off);
}

/* Runs of sorted keys; signed or unsigned 64-bit comparison. Rows [a, b) of n: a row starts a
 * run if it is row 0 or differs from the row before it (row a - 1 is read for that), so chunks
 * of rows count and fill independently. With unique == NULL only counts the runs that start in
 * the rows. Otherwise writes them at run indices base, base + 1, ...: unique and starts, the
 * stop of the run before each (stops[base - 1] belongs to the run before the chunk), and with
 * b == n the last stop. Returns the number of runs, or -(1 + i) when row i is smaller than row
 * i - 1. The outputs hold `capacity` runs from base on (the count of a first pass): if the keys
 * changed since (another thread writing them) and there are more runs, returns CN_RUNS_CHANGED
 * without writing past them. */
#define CN_RUNS_CHANGED PTRDIFF_MIN
/* The loops are specialised per key type. The count is branch-free: per block of
 * CN_RUNS_BLOCK rows (a trip count the vectoriser likes) it adds up k[i] != k[i - 1] and ORs
 * k[i] < k[i - 1]; only when that OR is set does an exact scalar scan find the first unsorted
 * row. Both passes may read a key more than once (as a row and as the next row's predecessor,
 * and the fill again to store a run's key): a key written in between can only make the answer
 * wrong or the fill's count disagree, because every write of the fill is bounded by the
 * capacity. A contiguous input gets its own copy of the loops (the stride a constant), which
 * the compiler vectorises. */
#define CN_RUNS_BLOCK 64

#define CN_RUNS_LD(T, i)                                                                           \
    ({                                                                                             \
        T v_;                                                                                      \
        memcpy(&v_, keys + (ptrdiff_t)(i) * ks, sizeof v_);                                        \
        v_;                                                                                        \
    })

/* Run r of the fill starts at row ROW with key VALUE (a T): store it, end run r - 1 there, or
 * return CN_RUNS_CHANGED when the capacity is used up (names of cn_runs_fill_body's locals). */
#define CN_RUNS_RECORD(T, ROW, VALUE)                                                              \
    do {                                                                                           \
        if (r >= end)                                                                              \
            return CN_RUNS_CHANGED;                                                                \
        T rec_ = (VALUE);                                                                          \
        memcpy(unique + r * sizeof(T), &rec_, sizeof(T));                                          \
        starts[r] = (int64_t)(ROW);                                                                \
        if (r > 0)                                                                                 \
            stops[r - 1] = (int64_t)(ROW);                                                         \
        r++;                                                                                       \
    } while (0)

/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_RUNS(SUF, T, UT, ATTR, MASKFN)                                                   \
    /* Exact scalar count of rows [a, b) (a > 0 or a == 1 past row 0), or -(1 + first bad row). */ \
    ATTR static inline __attribute__((always_inline)) ptrdiff_t cn_runs_exact_##SUF(               \
        const char *keys, ptrdiff_t ks, size_t a, size_t b)                                        \
    {                                                                                              \
        ptrdiff_t runs = 0;                                                                        \
        T prev = CN_RUNS_LD(T, a - 1);                                                             \
        for (size_t i = a; i < b; i++) {                                                           \
            T v = CN_RUNS_LD(T, i);                                                                \
            if (v < prev)                                                                          \
                return -(ptrdiff_t)(i + 1);                                                        \
            runs += v != prev;                                                                     \
            prev = v;                                                                              \
        }                                                                                          \
        return runs;                                                                               \
    }                                                                                              \
    ATTR static inline __attribute__((always_inline)) ptrdiff_t cn_runs_count_body_##SUF(          \
        const char *keys, ptrdiff_t ks, size_t a, size_t b)                                        \
    {                                                                                              \
        if (a >= b)                                                                                \
            return 0;                                                                              \
        size_t first = a == 0 ? 1 : a, i = first, runs = a == 0;                                   \
        unsigned unsorted = 0;                                                                     \
        for (; i + CN_RUNS_BLOCK <= b; i += CN_RUNS_BLOCK) {                                       \
            UT changes = 0, down = 0; /* same width as T: the lanes line up, 64 fits */            \
            const char *blk = keys + (ptrdiff_t)(i - 1) * ks;                                      \
            for (int j = 0; j < CN_RUNS_BLOCK; j++) {                                              \
                T v, p;                                                                            \
                memcpy(&p, blk + (ptrdiff_t)j * ks, sizeof p);                                     \
                memcpy(&v, blk + (ptrdiff_t)(j + 1) * ks, sizeof v);                               \
                changes = (UT)(changes + (v != p));                                                \
                down |= v < p;                                                                     \
            }                                                                                      \
            runs += changes;                                                                       \
            unsorted |= (unsigned)down; /* 0 or 1 */                                               \
        }                                                                                          \
        for (; i < b; i++) {                                                                       \
            T v = CN_RUNS_LD(T, i), p = CN_RUNS_LD(T, i - 1);                                      \
            runs += v != p;                                                                        \
            unsorted |= v < p;                                                                     \
        }                                                                                          \
        if (!unsorted)                                                                             \
            return (ptrdiff_t)runs;                                                                \
        ptrdiff_t exact = cn_runs_exact_##SUF(keys, ks, first, b);                                 \
        return exact < 0 ? exact : exact + (a == 0);                                               \
    }                                                                                              \
    ATTR static ptrdiff_t cn_runs_count_##SUF(const char *keys, ptrdiff_t ks, size_t a, size_t b)  \
    {                                                                                              \
        if (ks == (ptrdiff_t)sizeof(T))                                                            \
            return cn_runs_count_body_##SUF(keys, (ptrdiff_t)sizeof(T), a, b);                     \
        return cn_runs_count_body_##SUF(keys, ks, a, b);                                           \
    }                                                                                              \
    /* Writes the runs that start in rows [a, b) from run index base on (see above). */            \
    ATTR static inline __attribute__((always_inline)) ptrdiff_t cn_runs_fill_body_##SUF(           \
        const char *keys, ptrdiff_t ks, size_t n, size_t a, size_t b, char *unique,                \
        int64_t *starts, int64_t *stops, size_t base, size_t capacity)                             \
    {                                                                                              \
        size_t r = base, end = base + capacity, i = a;                                             \
        T prev;                                                                                    \
        if (a >= b)                                                                                \
            return 0;                                                                              \
        if (a == 0) {                                                                              \
            prev = CN_RUNS_LD(T, 0);                                                               \
            if (capacity == 0)                                                                     \
                return CN_RUNS_CHANGED;                                                            \
            memcpy(unique + r * sizeof(T), &prev, sizeof(T));                                      \
            starts[r] = 0;                                                                         \
            r++;                                                                                   \
            i = 1;                                                                                 \
        } else {                                                                                   \
            prev = CN_RUNS_LD(T, a - 1);                                                           \
        }                                                                                          \
        /* Blocks of CN_RUNS_BLOCK rows: a vectorised compare gives a bit per run start, and       \
         * only the set bits are visited (runs are usually longer than one row). An unsorted       \
         * block goes to the row loop below, which finds the bad row. */                           \
        while (ks == (ptrdiff_t)sizeof(T) && i + CN_RUNS_BLOCK <= b) {                             \
            const char *blk = keys + (ptrdiff_t)(i - 1) * ks;                                      \
            uint64_t starts_mask;                                                                  \
            if (MASKFN(blk, &starts_mask))                                                         \
                break;                                                                             \
            while (starts_mask) {                                                                  \
                size_t row = i + (size_t)__builtin_ctzll(starts_mask);                             \
                starts_mask &= starts_mask - 1;                                                    \
                CN_RUNS_RECORD(T, row, CN_RUNS_LD(T, row));                                        \
            }                                                                                      \
            i += CN_RUNS_BLOCK;                                                                    \
        }                                                                                          \
        if (i < b)                                                                                 \
            prev = CN_RUNS_LD(T, i - 1);                                                           \
        for (; i < b; i++) {                                                                       \
            T v = CN_RUNS_LD(T, i);                                                                \
            if (__builtin_expect(v != prev, 0)) {                                                  \
                if (v < prev)                                                                      \
                    return -(ptrdiff_t)(i + 1);                                                    \
                CN_RUNS_RECORD(T, i, v);                                                           \
            }                                                                                      \
            prev = v;                                                                              \
        }                                                                                          \
        if (b == n && r > 0)                                                                       \
            stops[r - 1] = (int64_t)n;                                                             \
        return (ptrdiff_t)(r - base);                                                              \
    }                                                                                              \
    ATTR static ptrdiff_t cn_runs_fill_##SUF(const char *keys, ptrdiff_t ks, size_t n, size_t a,   \
                                             size_t b, char *unique, int64_t *starts,              \
                                             int64_t *stops, size_t base, size_t capacity)         \
    {                                                                                              \
        if (ks == (ptrdiff_t)sizeof(T))                                                            \
            return cn_runs_fill_body_##SUF(keys, (ptrdiff_t)sizeof(T), n, a, b, unique, starts,    \
                                           stops, base, capacity);                                 \
        return cn_runs_fill_body_##SUF(keys, ks, n, a, b, unique, starts, stops, base, capacity);  \
    }
/* NOLINTEND(bugprone-macro-parentheses) */

/* The fill's block mask: bit j set when row i + j starts a run (blk points at row i - 1, and
 * rows i - 1 .. i + CN_RUNS_BLOCK - 1 are readable); returns nonzero when the block is not
 * sorted or has no vector version (the row loop then takes over). */
static inline int cn_runs_mask_none(const char *blk, uint64_t *mask)
{
    (void)blk;
    *mask = 0;
    return 1;
}

#define CN_DEFINE_RUNS_ALL(PRE, ATTR, MASK_I64, MASK_U64)                                          \
    CN_DEFINE_RUNS(PRE##i8, int8_t, uint8_t, ATTR, cn_runs_mask_none)                              \
    CN_DEFINE_RUNS(PRE##u8, uint8_t, uint8_t, ATTR, cn_runs_mask_none)                             \
    CN_DEFINE_RUNS(PRE##i16, int16_t, uint16_t, ATTR, cn_runs_mask_none)                           \
    CN_DEFINE_RUNS(PRE##u16, uint16_t, uint16_t, ATTR, cn_runs_mask_none)                          \
    CN_DEFINE_RUNS(PRE##i32, int32_t, uint32_t, ATTR, cn_runs_mask_none)                           \
    CN_DEFINE_RUNS(PRE##u32, uint32_t, uint32_t, ATTR, cn_runs_mask_none)                          \
    CN_DEFINE_RUNS(PRE##i64, int64_t, uint64_t, ATTR, MASK_I64)                                    \
    CN_DEFINE_RUNS(PRE##u64, uint64_t, uint64_t, ATTR, MASK_U64)

CN_DEFINE_RUNS_ALL(base_, , cn_runs_mask_none, cn_runs_mask_none)
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* 64-bit compares need SSE4.2/AVX2 to vectorise; the baseline build has only SSE2. */
#define CN_RUNS_HAVE_AVX2 1
#define CN_RUNS_AVX2 __attribute__((target("avx2")))

/* flip = the sign bit for unsigned keys (so a signed compare orders them), else 0. */
CN_RUNS_AVX2 static inline int cn_runs_mask_avx2_64(const char *blk, uint64_t *mask,
                                                    long long flip)
{
    const __m256i f = _mm256_set1_epi64x(flip);
    __m256i down = _mm256_setzero_si256();
    uint64_t m = 0;
    for (int j = 0; j < CN_RUNS_BLOCK; j += 4) {
        __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)(blk + (ptrdiff_t)j * 8));
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(blk + (ptrdiff_t)(j + 1) * 8));
        __m256i same = _mm256_cmpeq_epi64(v, p);
        m |= (uint64_t)(~(unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(same)) & 15u) << j;
        down = _mm256_or_si256(down, _mm256_cmpgt_epi64(_mm256_xor_si256(p, f),
                                                        _mm256_xor_si256(v, f)));
    }
    *mask = m;
    return !_mm256_testz_si256(down, down);
}
CN_RUNS_AVX2 static inline int cn_runs_mask_avx2_i64(const char *blk, uint64_t *mask)
{
    return cn_runs_mask_avx2_64(blk, mask, 0);
}
CN_RUNS_AVX2 static inline int cn_runs_mask_avx2_u64(const char *blk, uint64_t *mask)
{
    return cn_runs_mask_avx2_64(blk, mask, (long long)INT64_MIN);
}

CN_DEFINE_RUNS_ALL(avx2_, CN_RUNS_AVX2, cn_runs_mask_avx2_i64, cn_runs_mask_avx2_u64)
static inline int cn_runs_use_avx2(void)
{
    static int have = -1; /* a benign race: every thread stores the same answer */
    if (have < 0)
        have = __builtin_cpu_supports("avx2") ? 1 : 0;
    return have;
}
#endif

/* Return the count (unique == NULL) or the fill of the run kernels PRE (base_ or avx2_) for
 * the key type of the keys (names of cn_segment_runs_rows's parameters). */
#define CN_RUNS_RETURN_COUNT(SUF, PRE) return cn_runs_count_##PRE##SUF(keys, ks, a, b)
#define CN_RUNS_RETURN_FILL(SUF, PRE)                                                              \
    return cn_runs_fill_##PRE##SUF(keys, ks, n, a, b, unique, starts, stops, base, capacity)
#define CN_RUNS_DISPATCH(PRE)                                                                      \
    do {                                                                                           \
        cn_key_type t_ = cn_key_type_of(isz, is_unsigned);                                         \
        if (unique == NULL)                                                                        \
            CN_KEY_DISPATCH_X(t_, CN_RUNS_RETURN_COUNT, PRE)                                       \
        CN_KEY_DISPATCH_X(t_, CN_RUNS_RETURN_FILL, PRE)                                            \
    } while (0)

static ptrdiff_t cn_segment_runs_rows(int is_unsigned, size_t isz, const char *keys, ptrdiff_t ks,
                                      size_t n, size_t a, size_t b, char *unique, int64_t *starts,
                                      int64_t *stops, size_t base, size_t capacity)
{
#ifdef CN_RUNS_HAVE_AVX2
    if (cn_runs_use_avx2())
        CN_RUNS_DISPATCH(avx2_);
#endif
    CN_RUNS_DISPATCH(base_);
}

static inline ptrdiff_t cn_segment_runs(int is_unsigned, size_t isz, const char *keys, ptrdiff_t ks,
                                 size_t n, char *unique, int64_t *starts, int64_t *stops,
                                 size_t capacity)
{
    return cn_segment_runs_rows(is_unsigned, isz, keys, ks, n, 0, n, unique, starts, stops, 0,
                                capacity);
}

#endif /* CUNUMPY__CORE_SEGMENT_KERNELS_H */
