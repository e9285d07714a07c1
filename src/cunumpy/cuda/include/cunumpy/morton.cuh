// cunumpy/morton.cuh: Morton (Z-order) keys for CUDA kernels.
//
// Bit ndim*b + a of a key holds bit b of axis a (axis 0 lowest). With scales from
// xp.algorithms.morton_scales(lower, upper, levels), cunumpy_morton_key2/3 equal
// xp.algorithms.morton_keys bit for bit: per axis the cell is floor((x - lower) * scale)
// clipped to [0, 2**levels - 1] (levels <= 32 in 2-D, <= 21 in 3-D).
//
// Also compiles as plain C++ (and C99) on the host, where it is used to test the host code.
#ifndef CUNUMPY_MORTON_CUH
#define CUNUMPY_MORTON_CUH

#if defined(__CUDACC__) || defined(__HIPCC__)
#define CUNUMPY_MORTON_FN __host__ __device__ __forceinline__
#else
#define CUNUMPY_MORTON_FN static inline
#endif

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_spread2(unsigned long long x)
{
    x &= 0xffffffffull;
    x = (x | (x << 16)) & 0x0000ffff0000ffffull;
    x = (x | (x << 8)) & 0x00ff00ff00ff00ffull;
    x = (x | (x << 4)) & 0x0f0f0f0f0f0f0f0full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    x = (x | (x << 1)) & 0x5555555555555555ull;
    return x;
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_compact2(unsigned long long x)
{
    x &= 0x5555555555555555ull;
    x = (x | (x >> 1)) & 0x3333333333333333ull;
    x = (x | (x >> 2)) & 0x0f0f0f0f0f0f0f0full;
    x = (x | (x >> 4)) & 0x00ff00ff00ff00ffull;
    x = (x | (x >> 8)) & 0x0000ffff0000ffffull;
    x = (x | (x >> 16)) & 0x00000000ffffffffull;
    return x;
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_spread3(unsigned long long x)
{
    x &= 0x1fffffull;
    x = (x | (x << 32)) & 0x001f00000000ffffull;
    x = (x | (x << 16)) & 0x001f0000ff0000ffull;
    x = (x | (x << 8)) & 0x100f00f00f00f00full;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_compact3(unsigned long long x)
{
    x &= 0x1249249249249249ull;
    x = (x | (x >> 2)) & 0x10c30c30c30c30c3ull;
    x = (x | (x >> 4)) & 0x100f00f00f00f00full;
    x = (x | (x >> 8)) & 0x001f0000ff0000ffull;
    x = (x | (x >> 16)) & 0x001f00000000ffffull;
    x = (x | (x >> 32)) & 0x00000000001fffffull;
    return x;
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_encode2(unsigned long long ix,
                                                            unsigned long long iy)
{
    return cunumpy_morton_spread2(ix) | (cunumpy_morton_spread2(iy) << 1);
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_encode3(unsigned long long ix,
                                                            unsigned long long iy,
                                                            unsigned long long iz)
{
    return cunumpy_morton_spread3(ix) | (cunumpy_morton_spread3(iy) << 1) |
           (cunumpy_morton_spread3(iz) << 2);
}

// floor((x - lower) * scale) clipped to [0, 2**levels - 1] (NaN gives 0).
CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_cell(double x, double lower, double scale,
                                                         int levels)
{
    double t = (x - lower) * scale;
    double top = (double)((1ull << levels) - 1ull);
    if (!(t > 0.0))
        return 0ull;
    if (t >= top)
        return (unsigned long long)top;
    return (unsigned long long)t;
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_key2(double x, double y, double lower_x,
                                                         double lower_y, double scale_x,
                                                         double scale_y, int levels)
{
    return cunumpy_morton_encode2(cunumpy_morton_cell(x, lower_x, scale_x, levels),
                                  cunumpy_morton_cell(y, lower_y, scale_y, levels));
}

CUNUMPY_MORTON_FN unsigned long long cunumpy_morton_key3(double x, double y, double z,
                                                         double lower_x, double lower_y,
                                                         double lower_z, double scale_x,
                                                         double scale_y, double scale_z,
                                                         int levels)
{
    return cunumpy_morton_encode3(cunumpy_morton_cell(x, lower_x, scale_x, levels),
                                  cunumpy_morton_cell(y, lower_y, scale_y, levels),
                                  cunumpy_morton_cell(z, lower_z, scale_z, levels));
}

#endif // CUNUMPY_MORTON_CUH
