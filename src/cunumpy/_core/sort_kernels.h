/* Stable LSD radix argsort of integer keys, pure C (no Python), shared by sort.c and tests/c.
 *
 * Keys are mapped to unsigned "ordered" values (sign bit flipped for signed types). A first
 * pass finds the bits in which keys differ and whether the input is already sorted; sorted
 * input costs one more copy pass and nothing else. Only the differing bit range is sorted, in
 * digits of at most 11 bits; a digit in which every key falls into one bucket is skipped.
 * When the differing bits fit in 32 bits the passes move 32-bit keys. */
#ifndef CUNUMPY__CORE_SORT_KERNELS_H
#define CUNUMPY__CORE_SORT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "key_types.h"

#ifndef CN_STATUS_DEFINED_FOR_KERNELS
#define CN_SORT_OK 0
#define CN_SORT_NOMEM (-1)
#else
#define CN_SORT_OK CN_OK
#define CN_SORT_NOMEM CN_ERR_NOMEM
#endif

#ifndef CN_RADIX_MAX_BITS
#define CN_RADIX_MAX_BITS 11
#endif
#define CN_RADIX_MAX_DIGITS 8

/* Scratch memory of the large-key path; an includer may route it to a reusable buffer. */
#ifndef CN_SORT_SCRATCH_ALLOC
#define CN_SORT_SCRATCH_ALLOC(size) malloc(size)
#define CN_SORT_SCRATCH_FREE(ptr) free(ptr)
#endif

/* ---- per-type helpers: read one ordered value, write one back ---- */
#define CN_DEFINE_KEY_IO(SUF, T, UT, FLIP)                                                         \
    static inline uint64_t cn_key_get_##SUF(const char *p)                                         \
    {                                                                                              \
        T v;                                                                                       \
        memcpy(&v, p, sizeof v);                                                                   \
        return (uint64_t)((UT)v ^ (UT)(FLIP));                                                     \
    }                                                                                              \
    static inline void cn_key_put_##SUF(char *p, uint64_t o)                                       \
    {                                                                                              \
        UT u = (UT)o ^ (UT)(FLIP);                                                                 \
        memcpy(p, &u, sizeof u);                                                                   \
    }                                                                                              \
    /* diff = OR of (key ^ first key); returns 1 if non-decreasing. */                             \
    static int cn_key_scan_##SUF(const char *base, ptrdiff_t stride, size_t n, uint64_t *first,    \
                                 uint64_t *diff)                                                   \
    {                                                                                              \
        uint64_t f = cn_key_get_##SUF(base), d = 0, prev = f;                                      \
        size_t unsorted = 0;                                                                       \
        for (size_t i = 1; i < n; i++) {                                                           \
            uint64_t o = cn_key_get_##SUF(base + (ptrdiff_t)i * stride);                           \
            d |= o ^ f;                                                                            \
            unsorted += o < prev;                                                                  \
            prev = o;                                                                              \
        }                                                                                          \
        *first = f;                                                                                \
        *diff = d;                                                                                 \
        return unsorted == 0;                                                                      \
    }

CN_DEFINE_KEY_IO(i32, int32_t, uint32_t, 0x80000000u)
CN_DEFINE_KEY_IO(u32, uint32_t, uint32_t, 0u)
CN_DEFINE_KEY_IO(i64, int64_t, uint64_t, 0x8000000000000000ull)
CN_DEFINE_KEY_IO(u64, uint64_t, uint64_t, 0ull)
CN_DEFINE_KEY_IO(i8, int8_t, uint8_t, 0x80u)
CN_DEFINE_KEY_IO(u8, uint8_t, uint8_t, 0u)
CN_DEFINE_KEY_IO(i16, int16_t, uint16_t, 0x8000u)
CN_DEFINE_KEY_IO(u16, uint16_t, uint16_t, 0u)

static inline uint64_t cn_key_get(cn_key_type t, const char *p)
{
    switch (t) {
    case CN_KEY_I32: return cn_key_get_i32(p);
    case CN_KEY_U32: return cn_key_get_u32(p);
    case CN_KEY_I64: return cn_key_get_i64(p);
    case CN_KEY_I8: return cn_key_get_i8(p);
    case CN_KEY_U8: return cn_key_get_u8(p);
    case CN_KEY_I16: return cn_key_get_i16(p);
    case CN_KEY_U16: return cn_key_get_u16(p);
    default: return cn_key_get_u64(p);
    }
}

static inline void cn_key_put(cn_key_type t, char *p, uint64_t o)
{
    switch (t) {
    case CN_KEY_I32: cn_key_put_i32(p, o); break;
    case CN_KEY_U32: cn_key_put_u32(p, o); break;
    case CN_KEY_I64: cn_key_put_i64(p, o); break;
    case CN_KEY_I8: cn_key_put_i8(p, o); break;
    case CN_KEY_U8: cn_key_put_u8(p, o); break;
    case CN_KEY_I16: cn_key_put_i16(p, o); break;
    case CN_KEY_U16: cn_key_put_u16(p, o); break;
    default: cn_key_put_u64(p, o); break;
    }
}

/* ---- conversion into the working width, with all digit histograms in the same pass ---- */
/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_CONVERT(SUF, W)                                                                  \
    static void cn_radix_convert_##SUF##_##W(const char *base, ptrdiff_t stride, size_t n,         \
                                             W *out, int ndig, const int *shift, W mask,           \
                                             size_t *hist, size_t nb)                              \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            W k = (W)cn_key_get_##SUF(base + (ptrdiff_t)i * stride);                               \
            out[i] = k;                                                                            \
            for (int d = 0; d < ndig; d++)                                                         \
                hist[(size_t)d * nb + ((k >> shift[d]) & mask)]++;                                 \
        }                                                                                          \
    }
/* NOLINTEND(bugprone-macro-parentheses) */
CN_DEFINE_CONVERT(i32, uint32_t)
CN_DEFINE_CONVERT(u32, uint32_t)
CN_DEFINE_CONVERT(i64, uint32_t)
CN_DEFINE_CONVERT(u64, uint32_t)
CN_DEFINE_CONVERT(i8, uint32_t)
CN_DEFINE_CONVERT(u8, uint32_t)
CN_DEFINE_CONVERT(i16, uint32_t)
CN_DEFINE_CONVERT(u16, uint32_t)
CN_DEFINE_CONVERT(i64, uint64_t)
CN_DEFINE_CONVERT(u64, uint64_t)

/* ---- one scatter pass; IMPLICIT: the input index is the position itself ---- */
/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_PASS(NAME, W, IIN, IOUT, IMPLICIT)                                               \
    static void NAME(size_t n, const W *kin, const IIN *iin, W *kout, IOUT *iout, int shift,       \
                     W mask, size_t *pos)                                                          \
    {                                                                                              \
        (void)iin;                                                                                 \
        for (size_t i = 0; i < n; i++) {                                                           \
            W k = kin[i];                                                                          \
            size_t p = pos[(k >> shift) & mask]++;                                                 \
            kout[p] = k;                                                                           \
            iout[p] = (IMPLICIT) ? (IOUT)i : (IOUT)iin[i];                                         \
        }                                                                                          \
    }
/* NOLINTEND(bugprone-macro-parentheses) */
CN_DEFINE_PASS(cn_pass_w32_first_u32, uint32_t, uint32_t, uint32_t, 1)
CN_DEFINE_PASS(cn_pass_w32_u32_u32, uint32_t, uint32_t, uint32_t, 0)
CN_DEFINE_PASS(cn_pass_w32_u32_i64, uint32_t, uint32_t, int64_t, 0)
CN_DEFINE_PASS(cn_pass_w32_first_i64, uint32_t, int64_t, int64_t, 1)
CN_DEFINE_PASS(cn_pass_w32_i64_i64, uint32_t, int64_t, int64_t, 0)
CN_DEFINE_PASS(cn_pass_w64_first_u32, uint64_t, uint32_t, uint32_t, 1)
CN_DEFINE_PASS(cn_pass_w64_u32_u32, uint64_t, uint32_t, uint32_t, 0)
CN_DEFINE_PASS(cn_pass_w64_u32_i64, uint64_t, uint32_t, int64_t, 0)
CN_DEFINE_PASS(cn_pass_w64_first_i64, uint64_t, int64_t, int64_t, 1)
CN_DEFINE_PASS(cn_pass_w64_i64_i64, uint64_t, int64_t, int64_t, 0)

static inline int cn_bit_width(uint64_t x)
{
    return x ? 64 - __builtin_clzll(x) : 0;
}

/* Passes over the digits that split the keys, ping-ponging between two buffers; the last one
 * writes the order. Leaves the sorted working keys in *sorted_keys. */
/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_RADIX(W, WS)                                                                     \
    static int cn_radix_passes_##WS(size_t n, W *k0, W *k1, int ndig, const int *shift, W mask,    \
                                    size_t *hist, size_t nb, int64_t *order, W **sorted_keys)      \
    {                                                                                              \
        int active[CN_RADIX_MAX_DIGITS], m = 0;                                                    \
        for (int d = 0; d < ndig; d++) {                                                           \
            size_t *h = hist + (size_t)d * nb, sum = 0;                                            \
            int one_bucket = 0;                                                                    \
            for (size_t b = 0; b < nb; b++) {                                                      \
                size_t c = h[b];                                                                   \
                one_bucket |= c == n;                                                              \
                h[b] = sum; /* exclusive prefix sum: the first position of each bucket */          \
                sum += c;                                                                          \
            }                                                                                      \
            if (!one_bucket)                                                                       \
                active[m++] = d;                                                                   \
        }                                                                                          \
        int wide = n > (size_t)UINT32_MAX;                                                         \
        void *i0 = NULL, *i1 = NULL;                                                               \
        if (m > 1) {                                                                               \
            size_t isz = wide ? sizeof(int64_t) : sizeof(uint32_t);                                \
            i0 = malloc(n * isz);                                                                  \
            i1 = malloc(n * isz);                                                                  \
            if (i0 == NULL || i1 == NULL) {                                                        \
                free(i0);                                                                          \
                free(i1);                                                                          \
                return CN_SORT_NOMEM;                                                              \
            }                                                                                      \
        }                                                                                          \
        W *kin = k0, *kout = k1;                                                                   \
        void *iin = NULL, *iout = i1;                                                              \
        if (m == 0) { /* callers handle equal keys as sorted input; kept for safety */             \
            for (size_t i = 0; i < n; i++)                                                         \
                order[i] = (int64_t)i;                                                             \
            *sorted_keys = k0;                                                                     \
            return CN_SORT_OK;                                                                     \
        }                                                                                          \
        for (int j = 0; j < m; j++) {                                                              \
            int d = active[j], first = j == 0, last = j == m - 1;                                  \
            size_t *pos = hist + (size_t)d * nb;                                                   \
            if (last) {                                                                            \
                if (first)                                                                         \
                    cn_pass_##WS##_first_i64(n, kin, NULL, kout, order, shift[d], mask, pos);      \
                else if (wide)                                                                     \
                    cn_pass_##WS##_i64_i64(n, kin, iin, kout, order, shift[d], mask, pos);         \
                else                                                                               \
                    cn_pass_##WS##_u32_i64(n, kin, iin, kout, order, shift[d], mask, pos);         \
            } else if (wide) {                                                                     \
                if (first)                                                                         \
                    cn_pass_##WS##_first_i64(n, kin, NULL, kout, iout, shift[d], mask, pos);       \
                else                                                                               \
                    cn_pass_##WS##_i64_i64(n, kin, iin, kout, iout, shift[d], mask, pos);          \
            } else {                                                                               \
                if (first)                                                                         \
                    cn_pass_##WS##_first_u32(n, kin, NULL, kout, iout, shift[d], mask, pos);       \
                else                                                                               \
                    cn_pass_##WS##_u32_u32(n, kin, iin, kout, iout, shift[d], mask, pos);          \
            }                                                                                      \
            W *kt = kin;                                                                           \
            kin = kout;                                                                            \
            kout = kt;                                                                             \
            iin = iout;                                                                            \
            iout = (iout == i1) ? i0 : i1;                                                         \
        }                                                                                          \
        *sorted_keys = kin;                                                                        \
        free(i0);                                                                                  \
        free(i1);                                                                                  \
        return CN_SORT_OK;                                                                         \
    }
/* NOLINTEND(bugprone-macro-parentheses) */
CN_DEFINE_RADIX(uint32_t, w32)
CN_DEFINE_RADIX(uint64_t, w64)

/* ---- keys that differ only in their low 32 bits, n < 2**32: (key << 32 | index) pairs ----
 * One 8-byte store per element and pass instead of two, and half the write streams. */
#define CN_DEFINE_PACK(SUF)                                                                        \
    static void cn_radix_pack_##SUF(const char *base, ptrdiff_t stride, size_t n, uint64_t *out,   \
                                    int ndig, const int *shift, uint64_t mask, size_t *hist,       \
                                    size_t nb)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            uint64_t k = (uint32_t)cn_key_get_##SUF(base + (ptrdiff_t)i * stride);                 \
            out[i] = (k << 32) | i;                                                                \
            for (int d = 0; d < ndig; d++)                                                         \
                hist[(size_t)d * nb + ((k >> shift[d]) & mask)]++;                                 \
        }                                                                                          \
    }
CN_DEFINE_PACK(i32)
CN_DEFINE_PACK(u32)
CN_DEFINE_PACK(i64)
CN_DEFINE_PACK(u64)
CN_DEFINE_PACK(i8)
CN_DEFINE_PACK(u8)
CN_DEFINE_PACK(i16)
CN_DEFINE_PACK(u16)

static int cn_radix_packed(cn_key_type t, const char *keys, ptrdiff_t stride, size_t n,
                           uint64_t high, int ndig, const int *shift, size_t nb, size_t *hist,
                           int64_t *order, char *sorted_out, size_t isz)
{
    /* The outputs double as the two buffers (the order always has 8 bytes per entry, 64-bit
     * sorted keys too): no fresh pages to fault in. */
    uint64_t *a = (uint64_t *)(void *)order, *b = NULL, *spare = NULL;
    if (isz == 8) {
        b = (uint64_t *)(void *)sorted_out;
    } else {
        spare = b = malloc(n * sizeof(uint64_t));
        if (b == NULL)
            return CN_SORT_NOMEM;
    }
    uint64_t mask = nb - 1;
    switch (t) {
    case CN_KEY_I32: cn_radix_pack_i32(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    case CN_KEY_U32: cn_radix_pack_u32(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    case CN_KEY_I64: cn_radix_pack_i64(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    case CN_KEY_I8: cn_radix_pack_i8(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    case CN_KEY_U8: cn_radix_pack_u8(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    case CN_KEY_I16: cn_radix_pack_i16(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    case CN_KEY_U16: cn_radix_pack_u16(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    default: cn_radix_pack_u64(keys, stride, n, a, ndig, shift, mask, hist, nb); break;
    }
    for (int d = 0; d < ndig; d++) {
        size_t *pos = hist + (size_t)d * nb, sum = 0;
        int one_bucket = 0;
        for (size_t q = 0; q < nb; q++) {
            size_t c = pos[q];
            one_bucket |= c == n;
            pos[q] = sum;
            sum += c;
        }
        if (one_bucket)
            continue;
        int sh = shift[d] + 32;
        for (size_t i = 0; i < n; i++) {
            /* After the first pass `a` is the buffer the scatter below filled whole (a
             * permutation: the counts sum to n), never uninitialised. */
            uint64_t v = a[i]; // NOLINT(clang-analyzer-core.uninitialized.Assign)
            b[pos[(v >> sh) & mask]++] = v;
        }
        uint64_t *tmp = a;
        a = b;
        b = tmp;
    }
    /* Unpack in place: a is one of the outputs or the spare buffer. */
    for (size_t i = 0; i < n; i++) {
        uint64_t v = a[i]; // NOLINT(clang-analyzer-core.uninitialized.Assign): filled whole, as above
        order[i] = (int64_t)(v & 0xffffffffu);
        cn_key_put(t, sorted_out + i * isz, high | (v >> 32));
    }
    free(spare);
    return CN_SORT_OK;
}

/* ---- hybrid: one MSD pass on the top digit, then LSD inside each bucket while it is in cache.
 * For large inputs this replaces most passes over memory by passes over L2-sized ranges. */
typedef struct {
    uint64_t k, i;
} cn_rec128;

/* tests/c sets this to 1 to run the copy path that a concurrent writer falls back to. */
#ifndef CN_SORT_FORCE_COPY
#define CN_SORT_FORCE_COPY 0
#endif

#ifndef CN_HYBRID_MIN
#define CN_HYBRID_MIN 65536 /* below this the plain LSD passes already run in cache */
#endif
#define CN_INSERTION_MAX 48    /* buckets up to this size: stable insertion sort */
/* The buckets of the top pass are sorted independently, in a fixed number of groups of
 * consecutive buckets: an includer may run the groups on threads (each bucket's result is the
 * same whichever thread sorts it). */
#define CN_SORT_BUCKET_GROUPS 64
/* Every pass runs in chunks fixed by the input size n alone; the includer may run them on
 * threads (and keep inputs below its cut-over on the calling thread). */
#ifndef CN_SORT_PARALLEL_FOR
#define CN_SORT_PARALLEL_FOR(n, nchunks, fn, ctx)                                                  \
    do {                                                                                           \
        (void)(n);                                                                                 \
        for (size_t c_ = 0; c_ < (nchunks); c_++)                                                  \
            fn((ctx), c_);                                                                         \
    } while (0)
#endif
/* Chunks of the top pass: at least 64K keys, at most 1024 chunks (their counters are
 * 2 * 8 bytes per chunk and bucket). */
#define CN_SORT_CHUNK_MIN ((size_t)1 << 16)
#define CN_SORT_MAX_CHUNKS ((size_t)1024)
static inline size_t cn_sort_chunk_len(size_t n)
{
    size_t len = (n + CN_SORT_MAX_CHUNKS - 1) / CN_SORT_MAX_CHUNKS;
    return len < CN_SORT_CHUNK_MIN ? CN_SORT_CHUNK_MIN : len;
}
#define CN_BUCKET_HIST ((size_t)6 * 2048) /* counters for up to 6 digits of 11 bits (or 8 of 8) */

#define CN_UNLIKELY_K(x) __builtin_expect(!!(x), 0)
#define CN_REC64_KEY(r) ((r) >> 32)
#define CN_REC64_MAKE(k, i) (((uint64_t)(uint32_t)(k) << 32) | (uint64_t)(i))
#define CN_REC128_KEY(r) ((r).k)
static inline cn_rec128 cn_rec128_make(uint64_t k, uint64_t i)
{
    cn_rec128 r = {k, i};
    return r;
}
#define CN_REC128_MAKE(k, i) cn_rec128_make((k), (i))

/* Loop bodies of the top pass (names of cn_top_count / cn_top_scatter's locals). */
#define CN_TOP_COUNT_LOOP(S)                                                                       \
    for (size_t x = x0; x < x1; x++) {                                                             \
        uint64_t k = cn_key_get_##S(keys + (ptrdiff_t)x * stride) & wmask;                         \
        h[(k >> tsh) & bmask]++;                                                                   \
    }
#define CN_TOP_SCATTER_LOOP(S, MAKE)                                                               \
    for (size_t x = x0; x < x1; x++) {                                                             \
        uint64_t k = cn_key_get_##S(keys + (ptrdiff_t)x * stride) & wmask;                         \
        size_t b = (k >> tsh) & bmask;                                                             \
        size_t q = p[b]++;                                                                         \
        if (CN_UNLIKELY_K(q >= l[b])) {                                                            \
            j->overflow[c] = 1;                                                                    \
            return;                                                                                \
        }                                                                                          \
        a[q] = MAKE(k, x);                                                                         \
    }

/* NOLINTBEGIN(bugprone-macro-parentheses): the macro's parameters are types, attributes
 * and name suffixes, which cannot be parenthesised. */
#define CN_DEFINE_HYBRID(SUF, REC, KEY, MAKE)                                                     \
    /* Stable LSD sort of a[0..m) on the bits where its keys differ below `top`, using tmp. */     \
    static void cn_bucket_sort_##SUF(REC *a, REC *tmp, size_t m, int top, size_t *hist)            \
    {                                                                                              \
        if (m <= CN_INSERTION_MAX) {                                                               \
            for (size_t x = 1; x < m; x++) {                                                       \
                REC r = a[x];                                                                      \
                uint64_t kr = KEY(r);                                                              \
                size_t y = x;                                                                      \
                while (y > 0 && KEY(a[y - 1]) > kr) {                                              \
                    a[y] = a[y - 1];                                                               \
                    y--;                                                                           \
                }                                                                                  \
                a[y] = r;                                                                          \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        uint64_t first = KEY(a[0]), diff = 0;                                                      \
        for (size_t x = 1; x < m; x++)                                                             \
            diff |= KEY(a[x]) ^ first;                                                             \
        if (top < 64)                                                                              \
            diff &= ((uint64_t)1 << top) - 1;                                                      \
        if (diff == 0)                                                                             \
            return;                                                                                \
        int lo = __builtin_ctzll(diff), hi = cn_bit_width(diff);                                   \
        /* Large buckets: digits up to 11 bits (fewer passes); small ones: 8 bits (fewer       \
         * counters to clear). Widths are balanced over the digits. */                          \
        int maxw = m >= 2048 ? 11 : 8;                                                             \
        int ndig = (hi - lo + maxw - 1) / maxw;                                                    \
        int width = (hi - lo + ndig - 1) / ndig;                                                   \
        size_t nb = (size_t)1 << width;                                                            \
        uint64_t dmask = nb - 1;                                                                   \
        memset(hist, 0, (size_t)ndig * nb * sizeof(size_t));                                       \
        for (size_t x = 0; x < m; x++) {                                                           \
            uint64_t k = KEY(a[x]) >> lo;                                                          \
            for (int d = 0; d < ndig; d++)                                                         \
                hist[(size_t)d * nb + ((k >> (width * d)) & dmask)]++;                             \
        }                                                                                          \
        REC *src = a, *dst = tmp;                                                                  \
        for (int d = 0; d < ndig; d++) {                                                           \
            size_t sum = 0, *h = hist + (size_t)d * nb;                                            \
            int one_bucket = 0;                                                                    \
            for (size_t b = 0; b < nb; b++) {                                                      \
                size_t c = h[b];                                                                   \
                one_bucket |= c == m;                                                              \
                h[b] = sum;                                                                        \
                sum += c;                                                                          \
            }                                                                                      \
            if (one_bucket)                                                                        \
                continue;                                                                          \
            int sh = lo + width * d;                                                               \
            for (size_t x = 0; x < m; x++) {                                                       \
                REC r = src[x];                                                                    \
                dst[h[(KEY(r) >> sh) & dmask]++] = r;                                              \
            }                                                                                      \
            REC *t = src;                                                                          \
            src = dst;                                                                             \
            dst = t;                                                                               \
        }                                                                                          \
        if (src != a)                                                                              \
            memcpy(a, src, m * sizeof(REC));                                                       \
    }                                                                                              \
    typedef struct {                                                                               \
        REC *a, *tmp;                                                                              \
        const size_t *start;                                                                       \
        size_t nb;                                                                                 \
        int tsh, nomem;                                                                            \
    } cn_buckets_##SUF;                                                                            \
    static void cn_bucket_group_##SUF(void *ctx, size_t g)                                         \
    {                                                                                              \
        cn_buckets_##SUF *j = ctx;                                                                 \
        size_t b0 = g * j->nb / CN_SORT_BUCKET_GROUPS, b1 = (g + 1) * j->nb / CN_SORT_BUCKET_GROUPS; \
        if (b0 >= b1)                                                                              \
            return;                                                                                \
        size_t *hist = malloc(CN_BUCKET_HIST * sizeof(size_t));                                    \
        if (hist == NULL) {                                                                        \
            __atomic_store_n(&j->nomem, 1, __ATOMIC_RELAXED);                                      \
            return;                                                                                \
        }                                                                                          \
        for (size_t b = b0; b < b1; b++) {                                                         \
            size_t m = j->start[b + 1] - j->start[b];                                              \
            if (m > 1)                                                                             \
                cn_bucket_sort_##SUF(j->a + j->start[b], j->tmp + j->start[b], m, j->tsh, hist);   \
        }                                                                                          \
        free(hist);                                                                                \
    }                                                                                              \
    /* The top pass in fixed chunks of the input (from n only): each chunk counts its keys per     \
     * bucket, one exclusive prefix over (bucket, chunk) gives every chunk its own range in        \
     * every bucket, and the chunks scatter into their ranges. Chunk c's range in bucket b         \
     * follows chunk c - 1's, so the scatter is stable and the same for any thread count. */       \
    typedef struct {                                                                               \
        cn_key_type t;                                                                             \
        const char *keys;                                                                          \
        ptrdiff_t stride;                                                                          \
        size_t n, len, nb;                                                                         \
        uint64_t wmask;                                                                            \
        int tsh, copied;                                                                           \
        REC *a, *tmp;                                                                              \
        size_t *pos, *lim; /* [chunk][bucket]: next write and end of each chunk's range */         \
        unsigned char *overflow; /* per chunk: the keys changed between count and scatter */       \
    } cn_top_##SUF;                                                                                \
    static void cn_top_count_##SUF(void *ctx, size_t c)                                            \
    {                                                                                              \
        cn_top_##SUF *j = ctx;                                                                     \
        size_t x0 = c * j->len, x1 = j->n - x0 < j->len ? j->n : x0 + j->len;                      \
        size_t *h = j->pos + c * j->nb, bmask = j->nb - 1;                                         \
        int tsh = j->tsh;                                                                          \
        memset(h, 0, j->nb * sizeof(size_t));                                                      \
        if (j->copied) {                                                                           \
            for (size_t x = x0; x < x1; x++) {                                                     \
                uint64_t k = cn_key_get(j->t, j->keys + (ptrdiff_t)x * j->stride) & j->wmask;      \
                REC r = MAKE(k, x);                                                                \
                j->tmp[x] = r;                                                                     \
                h[(KEY(r) >> tsh) & bmask]++;                                                      \
            }                                                                                      \
        } else {                                                                                   \
            const char *keys = j->keys;                                                            \
            ptrdiff_t stride = j->stride;                                                          \
            uint64_t wmask = j->wmask;                                                             \
            CN_KEY_DISPATCH(j->t, CN_TOP_COUNT_LOOP)                                               \
        }                                                                                          \
    }                                                                                              \
    static void cn_top_scatter_##SUF(void *ctx, size_t c)                                          \
    {                                                                                              \
        cn_top_##SUF *j = ctx;                                                                     \
        size_t x0 = c * j->len, x1 = j->n - x0 < j->len ? j->n : x0 + j->len;                      \
        size_t *p = j->pos + c * j->nb, bmask = j->nb - 1;                                         \
        const size_t *l = j->lim + c * j->nb;                                                      \
        int tsh = j->tsh;                                                                          \
        REC *a = j->a;                                                                             \
        if (j->copied) { /* tmp is private and was counted: every range fills exactly */           \
            for (size_t x = x0; x < x1; x++) {                                                     \
                REC r = j->tmp[x];                                                                 \
                a[p[(KEY(r) >> tsh) & bmask]++] = r;                                               \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        /* The keys are read a second time and another thread may have written them since the      \
         * count: every write stays inside this chunk's range of its bucket. If none would         \
         * leave it, the chunk's writes filled its ranges exactly (they sum to its length). */     \
        const char *keys = j->keys;                                                                \
        ptrdiff_t stride = j->stride;                                                              \
        uint64_t wmask = j->wmask;                                                                 \
        CN_KEY_DISPATCH_X(j->t, CN_TOP_SCATTER_LOOP, MAKE)                                         \
    }                                                                                              \
    /* Sort n keys (ordered values, working key = ordered & wmask) into a; top digit first. */     \
    static int cn_hybrid_##SUF(cn_key_type t, const char *keys, ptrdiff_t stride, size_t n,        \
                                uint64_t wmask, int hi, int top_bits, REC *a, REC *tmp,            \
                                int force_copy)                                                    \
    {                                                                                              \
        size_t nb = (size_t)1 << top_bits;                                                         \
        size_t len = cn_sort_chunk_len(n), nch = (n + len - 1) / len;                              \
        size_t *pos = malloc(2 * nch * nb * sizeof(size_t));                                       \
        size_t *start = malloc((nb + 1) * sizeof(size_t));                                         \
        unsigned char *overflow = calloc(nch, 1);                                                  \
        if (pos == NULL || start == NULL || overflow == NULL) {                                    \
            free(pos);                                                                             \
            free(start);                                                                           \
            free(overflow);                                                                        \
            return CN_SORT_NOMEM;                                                                  \
        }                                                                                          \
        cn_top_##SUF top = {t, keys, stride, n, len, nb, wmask, hi - top_bits, force_copy,         \
                            a, tmp, pos, pos + nch * nb, overflow};                                \
        for (;;) {                                                                                 \
            CN_SORT_PARALLEL_FOR(n, nch, cn_top_count_##SUF, &top);                                \
            size_t sum = 0;                                                                        \
            for (size_t b = 0; b < nb; b++) {                                                      \
                start[b] = sum;                                                                    \
                for (size_t c = 0; c < nch; c++) {                                                 \
                    size_t cnt = pos[c * nb + b];                                                  \
                    pos[c * nb + b] = sum;                                                         \
                    sum += cnt;                                                                    \
                    top.lim[c * nb + b] = sum;                                                     \
                }                                                                                  \
            }                                                                                      \
            start[nb] = n;                                                                         \
            CN_SORT_PARALLEL_FOR(n, nch, cn_top_scatter_##SUF, &top);                              \
            if (top.copied || memchr(overflow, 1, nch) == NULL)                                    \
                break;                                                                             \
            /* The keys changed under us: redo the pass from a private copy, read once. */         \
            top.copied = 1;                                                                        \
        }                                                                                          \
        cn_buckets_##SUF job = {a, tmp, start, nb, top.tsh, 0};                                    \
        CN_SORT_PARALLEL_FOR(n, CN_SORT_BUCKET_GROUPS, cn_bucket_group_##SUF, &job);               \
        free(pos);                                                                                 \
        free(start);                                                                               \
        free(overflow);                                                                            \
        return job.nomem ? CN_SORT_NOMEM : CN_SORT_OK;                                             \
    }
/* NOLINTEND(bugprone-macro-parentheses) */

CN_DEFINE_HYBRID(r64, uint64_t, CN_REC64_KEY, CN_REC64_MAKE)
CN_DEFINE_HYBRID(r128, cn_rec128, CN_REC128_KEY, CN_REC128_MAKE)

/* ---- passes over the elements in fixed chunks: the sortedness scan and the unpacking ---- */
#define CN_SORT_ELEMENT_CHUNK ((size_t)1 << 16)

static int cn_key_scan(cn_key_type t, const char *base, ptrdiff_t stride, size_t n,
                       uint64_t *first, uint64_t *diff)
{
    switch (t) {
    case CN_KEY_I32: return cn_key_scan_i32(base, stride, n, first, diff);
    case CN_KEY_U32: return cn_key_scan_u32(base, stride, n, first, diff);
    case CN_KEY_I64: return cn_key_scan_i64(base, stride, n, first, diff);
    case CN_KEY_I8: return cn_key_scan_i8(base, stride, n, first, diff);
    case CN_KEY_U8: return cn_key_scan_u8(base, stride, n, first, diff);
    case CN_KEY_I16: return cn_key_scan_i16(base, stride, n, first, diff);
    case CN_KEY_U16: return cn_key_scan_u16(base, stride, n, first, diff);
    default: return cn_key_scan_u64(base, stride, n, first, diff);
    }
}

typedef struct {
    cn_key_type t;
    const char *keys;
    ptrdiff_t stride;
    size_t n, isz;
    int64_t *order;
    char *sorted_out;
    const void *recs;   /* unpack: uint64 (key << 32 | index) or cn_rec128 records */
    uint64_t high;      /* unpack of 64-bit records: the key bits they leave out */
    uint64_t *first, *diff; /* scan: per chunk */
    unsigned char *unsorted;
} cn_sort_elems;

static inline size_t cn_sort_elems_end(const cn_sort_elems *j, size_t x0)
{
    return j->n - x0 < CN_SORT_ELEMENT_CHUNK ? j->n : x0 + CN_SORT_ELEMENT_CHUNK;
}

/* The first key, the OR of (key ^ first) and sortedness of one chunk; a chunk after the first
 * also compares its first key with the key before it. */
static void cn_sort_scan_chunk(void *ctx, size_t c)
{
    cn_sort_elems *j = ctx;
    size_t x0 = c * CN_SORT_ELEMENT_CHUNK, x1 = cn_sort_elems_end(j, x0);
    const char *p = j->keys + (ptrdiff_t)x0 * j->stride;
    int sorted = cn_key_scan(j->t, p, j->stride, x1 - x0, &j->first[c], &j->diff[c]);
    if (sorted && x0 > 0 && cn_key_get(j->t, p - j->stride) > j->first[c])
        sorted = 0;
    j->unsorted[c] = (unsigned char)!sorted;
}

static void cn_sort_identity_chunk(void *ctx, size_t c)
{
    const cn_sort_elems *j = ctx;
    size_t x0 = c * CN_SORT_ELEMENT_CHUNK, x1 = cn_sort_elems_end(j, x0);
    for (size_t i = x0; i < x1; i++) {
        j->order[i] = (int64_t)i;
        memcpy(j->sorted_out + i * j->isz, j->keys + (ptrdiff_t)i * j->stride, j->isz);
    }
}

/* In place when recs is the order itself: each element is read before it is written. */
static void cn_sort_unpack64_chunk(void *ctx, size_t c)
{
    const cn_sort_elems *j = ctx;
    size_t x0 = c * CN_SORT_ELEMENT_CHUNK, x1 = cn_sort_elems_end(j, x0);
    const uint64_t *a = j->recs;
    int64_t *order = j->order;
    char *out = j->sorted_out;
    uint64_t high = j->high;
    size_t isz = j->isz;
#define CN_UNPACK64_LOOP(S)                                                                        \
    for (size_t i = x0; i < x1; i++) {                                                             \
        uint64_t v = a[i];                                                                         \
        order[i] = (int64_t)(v & 0xffffffffu);                                                     \
        cn_key_put_##S(out + i * isz, high | (v >> 32));                                           \
    }
    CN_KEY_DISPATCH(j->t, CN_UNPACK64_LOOP)
#undef CN_UNPACK64_LOOP
}

static void cn_sort_unpack128_chunk(void *ctx, size_t c)
{
    const cn_sort_elems *j = ctx;
    size_t x0 = c * CN_SORT_ELEMENT_CHUNK, x1 = cn_sort_elems_end(j, x0);
    const cn_rec128 *a = j->recs;
    int64_t *order = j->order;
    char *out = j->sorted_out;
    size_t isz = j->isz;
#define CN_UNPACK128_LOOP(S)                                                                       \
    for (size_t i = x0; i < x1; i++) {                                                             \
        order[i] = (int64_t)a[i].i;                                                                \
        cn_key_put_##S(out + i * isz, a[i].k);                                                     \
    }
    CN_KEY_DISPATCH(j->t, CN_UNPACK128_LOOP)
#undef CN_UNPACK128_LOOP
}

/* First key, differing bits and sortedness of all keys, from chunks in parallel. Returns -1
 * when memory for the per-chunk results runs out. */
static int cn_sort_scan(cn_sort_elems *j, uint64_t *first, uint64_t *diff)
{
    size_t nch = (j->n + CN_SORT_ELEMENT_CHUNK - 1) / CN_SORT_ELEMENT_CHUNK;
    if (nch <= 1)
        return cn_key_scan(j->t, j->keys, j->stride, j->n, first, diff);
    unsigned char *mem = malloc(nch * (2 * sizeof(uint64_t) + 1));
    if (mem == NULL)
        return -1;
    j->first = (uint64_t *)(void *)mem;
    j->diff = j->first + nch;
    j->unsorted = mem + 2 * nch * sizeof(uint64_t);
    CN_SORT_PARALLEL_FOR(j->n, nch, cn_sort_scan_chunk, j);
    /* A bit differs somewhere iff it differs inside a chunk or between two chunks' firsts. */
    uint64_t f = j->first[0], d = 0;
    int sorted = 1;
    for (size_t c = 0; c < nch; c++) {
        d |= j->diff[c] | (j->first[c] ^ f);
        sorted &= !j->unsorted[c];
    }
    free(mem);
    *first = f;
    *diff = d;
    return sorted;
}

static void cn_sort_elements(cn_sort_elems *j, void (*fn)(void *, size_t))
{
    CN_SORT_PARALLEL_FOR(j->n, (j->n + CN_SORT_ELEMENT_CHUNK - 1) / CN_SORT_ELEMENT_CHUNK, fn, j);
}

/* Stable argsort of n keys of type `t` at `keys` (byte stride `stride`). Writes the order
 * (int64, contiguous) and the sorted keys (type `t`, contiguous). Returns 0 or CN_SORT_NOMEM. */
static int cn_radix_argsort(cn_key_type t, const char *keys, ptrdiff_t stride, size_t n,
                            int64_t *order, char *sorted_out)
{
    size_t isz = cn_key_size(t);
    if (n == 0)
        return CN_SORT_OK;
    uint64_t first, diff;
    cn_sort_elems el = {t, keys, stride, n, isz, order, sorted_out, NULL, 0, NULL, NULL, NULL};
    int sorted = cn_sort_scan(&el, &first, &diff);
    if (sorted < 0)
        return CN_SORT_NOMEM;
    /* Equal keys are sorted: the chunks are read at different times, and a concurrent writer
     * can make a boundary look unsorted while every key read equals the first. */
    if (sorted || diff == 0) {
        cn_sort_elements(&el, cn_sort_identity_chunk);
        return CN_SORT_OK;
    }
    int lo = __builtin_ctzll(diff), hi = cn_bit_width(diff);
    int nbits = hi - lo;
    int ndig = (nbits + CN_RADIX_MAX_BITS - 1) / CN_RADIX_MAX_BITS;
    int width = (nbits + ndig - 1) / ndig;
    if (ndig < 1 || ndig > CN_RADIX_MAX_DIGITS || width < 1 || width > CN_RADIX_MAX_BITS)
        return CN_SORT_NOMEM; /* unreachable: 1 <= nbits <= 64 */
    size_t nb = (size_t)1 << width;
    int shift[CN_RADIX_MAX_DIGITS];
    for (int d = 0; d < ndig; d++)
        shift[d] = lo + d * width;
    size_t *hist = calloc((size_t)ndig * nb, sizeof(size_t));
    if (hist == NULL)
        return CN_SORT_NOMEM;
    int status = CN_SORT_OK;
    if (n >= CN_HYBRID_MIN) {
        free(hist);
        int top_bits = n > ((size_t)1 << 21) ? 11 : 8;
        if (top_bits > nbits)
            top_bits = nbits;
        if (hi <= 32 && n <= (size_t)UINT32_MAX) {
            /* (key << 32 | index) records; the outputs double as the two buffers. */
            uint64_t *a = (uint64_t *)(void *)order, *tmp, *spare = NULL;
            if (isz == 8) {
                tmp = (uint64_t *)(void *)sorted_out;
            } else {
                spare = tmp = malloc(n * sizeof(uint64_t));
                if (tmp == NULL)
                    return CN_SORT_NOMEM;
            }
            status = cn_hybrid_r64(t, keys, stride, n, 0xffffffffu, hi, top_bits, a, tmp,
                                   CN_SORT_FORCE_COPY);
            if (status == CN_SORT_OK) {
                el.recs = a;
                el.high = first & ~(uint64_t)0xffffffffu;
                cn_sort_elements(&el, cn_sort_unpack64_chunk);
            }
            free(spare);
        } else {
            cn_rec128 *a = CN_SORT_SCRATCH_ALLOC(2 * n * sizeof(cn_rec128)), *tmp = a + n;
            if (a == NULL)
                status = CN_SORT_NOMEM;
            else
                status = cn_hybrid_r128(t, keys, stride, n, ~(uint64_t)0, hi, top_bits, a, tmp,
                                        CN_SORT_FORCE_COPY);
            if (status == CN_SORT_OK) {
                el.recs = a;
                cn_sort_elements(&el, cn_sort_unpack128_chunk);
            }
            if (a != NULL)
                CN_SORT_SCRATCH_FREE(a);
        }
        return status;
    }
    if (hi <= 32 && n <= (size_t)UINT32_MAX) {
        status = cn_radix_packed(t, keys, stride, n, first & ~(uint64_t)0xffffffffu, ndig, shift,
                                 nb, hist, order, sorted_out, isz);
    } else if (hi <= 32) {
        /* Keys differ only in the low 32 bits: sort those and restore the shared high bits. */
        uint32_t *k0 = malloc(n * sizeof(uint32_t)), *k1 = malloc(n * sizeof(uint32_t)), *ks;
        if (k0 == NULL || k1 == NULL) {
            status = CN_SORT_NOMEM;
        } else {
            switch (t) {
            case CN_KEY_I32: cn_radix_convert_i32_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            case CN_KEY_U32: cn_radix_convert_u32_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            case CN_KEY_I64: cn_radix_convert_i64_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            case CN_KEY_I8: cn_radix_convert_i8_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            case CN_KEY_U8: cn_radix_convert_u8_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            case CN_KEY_I16: cn_radix_convert_i16_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            case CN_KEY_U16: cn_radix_convert_u16_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            default: cn_radix_convert_u64_uint32_t(keys, stride, n, k0, ndig, shift, (uint32_t)(nb - 1), hist, nb); break;
            }
            status = cn_radix_passes_w32(n, k0, k1, ndig, shift, (uint32_t)(nb - 1), hist, nb, order, &ks);
            if (status == CN_SORT_OK) {
                uint64_t high = first & ~(uint64_t)0xffffffffu;
                for (size_t i = 0; i < n; i++)
                    cn_key_put(t, sorted_out + i * isz, high | ks[i]);
            }
        }
        free(k0);
        free(k1);
    } else {
        uint64_t *k0 = malloc(n * sizeof(uint64_t)), *k1 = malloc(n * sizeof(uint64_t)), *ks;
        if (k0 == NULL || k1 == NULL) {
            status = CN_SORT_NOMEM;
        } else {
            if (t == CN_KEY_I64)
                cn_radix_convert_i64_uint64_t(keys, stride, n, k0, ndig, shift, nb - 1, hist, nb);
            else
                cn_radix_convert_u64_uint64_t(keys, stride, n, k0, ndig, shift, nb - 1, hist, nb);
            status = cn_radix_passes_w64(n, k0, k1, ndig, shift, nb - 1, hist, nb, order, &ks);
            if (status == CN_SORT_OK) {
                for (size_t i = 0; i < n; i++)
                    cn_key_put(t, sorted_out + i * isz, ks[i]);
            }
        }
        free(k0);
        free(k1);
    }
    free(hist);
    return status;
}

#endif /* CUNUMPY__CORE_SORT_KERNELS_H */
