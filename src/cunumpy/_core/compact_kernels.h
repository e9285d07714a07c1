/* In-place compaction along one axis, pure C (no Python), shared by compact.c and tests/c.
 *
 * Each array is a set of lanes: a lane is a run of `elsize` bytes per position along the
 * axis, `stride` bytes apart (a contiguous row of an (n, 3) array is one lane of 24 bytes;
 * a component-major (3, n) array compacted along its last axis is three lanes of 8 bytes).
 * The mask is read once, a chunk at a time; the live positions of a chunk are then moved in
 * every lane of every array while they are still in L1. */
#ifndef CUNUMPY__CORE_COMPACT_KERNELS_H
#define CUNUMPY__CORE_COMPACT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *base;
    ptrdiff_t stride;         /* bytes between positions along the axis */
    size_t elsize;            /* bytes moved per position and lane */
    size_t nlanes;
    const ptrdiff_t *lanes;   /* byte offset of each lane from base */
} cn_compact_array;

#define CN_COMPACT_CHUNK 2048

/* Move positions src[0..count) to dst0, dst0 + 1, ... in one lane. */
static inline void cn_compact_lane(char *base, ptrdiff_t stride, size_t elsize,
                                   const size_t *src, size_t count, size_t dst0)
{
#define CN_MOVE_FIXED(T)                                                                           \
    for (size_t t = 0; t < count; t++) {                                                           \
        T v;                                                                                       \
        memcpy(&v, base + (ptrdiff_t)src[t] * stride, sizeof v);                                   \
        memcpy(base + (ptrdiff_t)(dst0 + t) * stride, &v, sizeof v);                               \
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
        for (size_t t = 0; t < count; t++)
            memmove(base + (ptrdiff_t)(dst0 + t) * stride, base + (ptrdiff_t)src[t] * stride,
                    elsize);
        break;
    }
#undef CN_MOVE_FIXED
}

/* Returns the number of live positions (mask byte != 0) among n; moves them to the front. */
static size_t cn_compact(const char *mask, ptrdiff_t ms, size_t n, const cn_compact_array *arrays,
                         size_t narrays)
{
    size_t i = 0;
    /* The all-live prefix stays where it is. */
    if (ms == 1) {
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, mask + i, 8);
            /* Every byte nonzero? (bool bytes are 0 or 1; other nonzero bytes count as live) */
            uint64_t z = (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
            if (z)
                break;
            i += 8;
        }
    }
    while (i < n && mask[(ptrdiff_t)i * ms])
        i++;
    size_t live = i;
    size_t src[CN_COMPACT_CHUNK];
    while (i < n) {
        size_t end = n - i < CN_COMPACT_CHUNK ? n : i + CN_COMPACT_CHUNK;
        size_t count = 0;
        for (; i < end; i++) {
            src[count] = i;
            count += mask[(ptrdiff_t)i * ms] != 0;
        }
        if (count == 0)
            continue;
        for (size_t a = 0; a < narrays; a++) {
            const cn_compact_array *arr = &arrays[a];
            for (size_t l = 0; l < arr->nlanes; l++)
                cn_compact_lane(arr->base + arr->lanes[l], arr->stride, arr->elsize, src, count,
                                live);
        }
        live += count;
    }
    return live;
}

#endif /* CUNUMPY__CORE_COMPACT_KERNELS_H */
