/* Morton (Z-order) keys, pure C (no Python), shared by morton.c and tests/c. Bit ndim*b + a of
 * a key holds bit b of axis a. Must match cuda/include/cunumpy/morton.cuh bit for bit. */
#ifndef CUNUMPY__CORE_MORTON_KERNELS_H
#define CUNUMPY__CORE_MORTON_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CN_HAVE_PDEP_BUILD 1
#else
#define CN_HAVE_PDEP_BUILD 0
#endif

#define CN_MORTON_MASK2 0x5555555555555555ull
#define CN_MORTON_MASK3 0x1249249249249249ull

static inline uint64_t cn_spread2(uint64_t x)
{
    x &= 0xffffffffull;
    x = (x | (x << 16)) & 0x0000ffff0000ffffull;
    x = (x | (x << 8)) & 0x00ff00ff00ff00ffull;
    x = (x | (x << 4)) & 0x0f0f0f0f0f0f0f0full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    x = (x | (x << 1)) & 0x5555555555555555ull;
    return x;
}

static inline uint64_t cn_compact2(uint64_t x)
{
    x &= 0x5555555555555555ull;
    x = (x | (x >> 1)) & 0x3333333333333333ull;
    x = (x | (x >> 2)) & 0x0f0f0f0f0f0f0f0full;
    x = (x | (x >> 4)) & 0x00ff00ff00ff00ffull;
    x = (x | (x >> 8)) & 0x0000ffff0000ffffull;
    x = (x | (x >> 16)) & 0x00000000ffffffffull;
    return x;
}

static inline uint64_t cn_spread3(uint64_t x)
{
    x &= 0x1fffffull;
    x = (x | (x << 32)) & 0x001f00000000ffffull;
    x = (x | (x << 16)) & 0x001f0000ff0000ffull;
    x = (x | (x << 8)) & 0x100f00f00f00f00full;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}

static inline uint64_t cn_compact3(uint64_t x)
{
    x &= 0x1249249249249249ull;
    x = (x | (x >> 2)) & 0x10c30c30c30c30c3ull;
    x = (x | (x >> 4)) & 0x100f00f00f00f00full;
    x = (x | (x >> 8)) & 0x001f0000ff0000ffull;
    x = (x | (x >> 16)) & 0x001f00000000ffffull;
    x = (x | (x >> 32)) & 0x00000000001fffffull;
    return x;
}

/* floor((x - lower) * scale) clipped to [0, 2**levels - 1]; NaN goes to 0. */
static inline uint64_t cn_morton_cell(double x, double lower, double scale, int levels)
{
    double t = (x - lower) * scale;
    double top = (double)((1ull << levels) - 1ull);
    if (!(t > 0.0))
        return 0;
    if (t >= top)
        return (uint64_t)top;
    return (uint64_t)t;
}

static inline int cn_finite(double x)
{
    return x - x == 0.0;
}

/* Keys of n points: position i, axis a at pos[i * s0 + a * s1] (strides in doubles). Returns
 * -1 when all positions are finite, else the first row holding NaN or infinity. */
#define CN_MORTON_KEYS_BODY(SPREAD2, SPREAD3)                                                      \
    {                                                                                              \
        ptrdiff_t bad = -1;                                                                        \
        if (ndim == 2) {                                                                           \
            for (size_t i = 0; i < n; i++) {                                                       \
                const double *p = pos + (ptrdiff_t)i * s0;                                         \
                double x = p[0], y = p[s1];                                                        \
                if (!(cn_finite(x) & cn_finite(y)) && bad < 0)                                     \
                    bad = (ptrdiff_t)i;                                                            \
                out[i] = SPREAD2(cn_morton_cell(x, lower[0], scale[0], levels)) |                  \
                         (SPREAD2(cn_morton_cell(y, lower[1], scale[1], levels)) << 1);            \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++) {                                                       \
                const double *p = pos + (ptrdiff_t)i * s0;                                         \
                double x = p[0], y = p[s1], z = p[2 * s1];                                         \
                if (!(cn_finite(x) & cn_finite(y) & cn_finite(z)) && bad < 0)                      \
                    bad = (ptrdiff_t)i;                                                            \
                out[i] = SPREAD3(cn_morton_cell(x, lower[0], scale[0], levels)) |                  \
                         (SPREAD3(cn_morton_cell(y, lower[1], scale[1], levels)) << 1) |           \
                         (SPREAD3(cn_morton_cell(z, lower[2], scale[2], levels)) << 2);            \
            }                                                                                      \
        }                                                                                          \
        return bad;                                                                                \
    }

static ptrdiff_t cn_morton_keys_magic(int ndim, size_t n, const double *pos, ptrdiff_t s0,
                                      ptrdiff_t s1, const double *lower, const double *scale,
                                      int levels, uint64_t *out)
    CN_MORTON_KEYS_BODY(cn_spread2, cn_spread3)

/* Encode n cells: axis a of key i is cells[a][i * step[a]]. */
static void cn_morton_encode_magic(int ndim, size_t n, const uint64_t *const *cells,
                                   const size_t *step, uint64_t *out)
{
    if (ndim == 2) {
        for (size_t i = 0; i < n; i++)
            out[i] = cn_spread2(cells[0][i * step[0]]) | (cn_spread2(cells[1][i * step[1]]) << 1);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = cn_spread3(cells[0][i * step[0]]) | (cn_spread3(cells[1][i * step[1]]) << 1) |
                     (cn_spread3(cells[2][i * step[2]]) << 2);
    }
}

static void cn_morton_decode_magic(int ndim, size_t n, const uint64_t *keys, uint64_t *const *out)
{
    if (ndim == 2) {
        for (size_t i = 0; i < n; i++) {
            out[0][i] = cn_compact2(keys[i]);
            out[1][i] = cn_compact2(keys[i] >> 1);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            out[0][i] = cn_compact3(keys[i]);
            out[1][i] = cn_compact3(keys[i] >> 1);
            out[2][i] = cn_compact3(keys[i] >> 2);
        }
    }
}

#if CN_HAVE_PDEP_BUILD
#define CN_BMI2 __attribute__((target("bmi2")))
CN_BMI2 static inline uint64_t cn_spread2_pdep(uint64_t x)
{
    return _pdep_u64(x, CN_MORTON_MASK2);
}
CN_BMI2 static inline uint64_t cn_spread3_pdep(uint64_t x)
{
    return _pdep_u64(x, CN_MORTON_MASK3);
}

CN_BMI2 static ptrdiff_t cn_morton_keys_pdep(int ndim, size_t n, const double *pos, ptrdiff_t s0,
                                             ptrdiff_t s1, const double *lower,
                                             const double *scale, int levels, uint64_t *out)
    CN_MORTON_KEYS_BODY(cn_spread2_pdep, cn_spread3_pdep)

CN_BMI2 static void cn_morton_encode_pdep(int ndim, size_t n, const uint64_t *const *cells,
                                          const size_t *step, uint64_t *out)
{
    /* pdep keeps only as many bits as the mask has, like the magic-bit masks. */
    if (ndim == 2) {
        for (size_t i = 0; i < n; i++)
            out[i] = _pdep_u64(cells[0][i * step[0]], CN_MORTON_MASK2) |
                     _pdep_u64(cells[1][i * step[1]], CN_MORTON_MASK2 << 1);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = _pdep_u64(cells[0][i * step[0]], CN_MORTON_MASK3) |
                     _pdep_u64(cells[1][i * step[1]], CN_MORTON_MASK3 << 1) |
                     _pdep_u64(cells[2][i * step[2]], CN_MORTON_MASK3 << 2);
    }
}

CN_BMI2 static void cn_morton_decode_pdep(int ndim, size_t n, const uint64_t *keys,
                                          uint64_t *const *out)
{
    if (ndim == 2) {
        for (size_t i = 0; i < n; i++) {
            out[0][i] = _pext_u64(keys[i], CN_MORTON_MASK2);
            out[1][i] = _pext_u64(keys[i], CN_MORTON_MASK2 << 1);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            out[0][i] = _pext_u64(keys[i], CN_MORTON_MASK3);
            out[1][i] = _pext_u64(keys[i], CN_MORTON_MASK3 << 1);
            out[2][i] = _pext_u64(keys[i], CN_MORTON_MASK3 << 2);
        }
    }
}

/* 1 if pdep is present and fast (it is microcoded, hundreds of cycles, before AMD Zen 3). */
static int cn_pdep_usable(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("bmi2"))
        return 0;
    if (__builtin_cpu_is("amd") && (__builtin_cpu_is("znver1") || __builtin_cpu_is("znver2")))
        return 0;
    return 1;
}
#else
static int cn_pdep_usable(void)
{
    return 0;
}
#endif

#endif /* CUNUMPY__CORE_MORTON_KERNELS_H */
