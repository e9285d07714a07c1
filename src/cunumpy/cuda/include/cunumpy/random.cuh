// cunumpy/random.cuh: stateless Philox4x32-10 random numbers for CUDA kernels.
//
// Pure functions of (seed, stream, counter), all unsigned long long: key (seed_lo, seed_hi),
// counter words (counter_lo, counter_hi, stream_lo, stream_hi). cunumpy_uniform is
// bit-identical to xp.rng.philox_uniform on the host; the normals agree up to the last bits
// (device sqrt/log/sin/cos). Typical use: seed = run seed, stream = particle id, counter =
// time step, with a distinct counter per random decision.
//
// Also compiles as plain C++ (and C99) on the host, where it is used to test the host code.
#ifndef CUNUMPY_RANDOM_CUH
#define CUNUMPY_RANDOM_CUH

#if defined(__CUDACC__) || defined(__HIPCC__)
#define CUNUMPY_RANDOM_FN __host__ __device__ __forceinline__
#else
#define CUNUMPY_RANDOM_FN static inline
#endif

#if !defined(__CUDACC_RTC__) && !defined(__HIPCC_RTC__)
#include <math.h>
#endif

typedef struct {
    unsigned int x, y, z, w;
} cunumpy_u32x4;

CUNUMPY_RANDOM_FN unsigned int cunumpy_philox_mulhi(unsigned int a, unsigned int b)
{
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return (unsigned int)(((unsigned long long)a * b) >> 32);
#endif
}

CUNUMPY_RANDOM_FN cunumpy_u32x4 cunumpy_philox4x32_10(cunumpy_u32x4 ctr, unsigned int key0,
                                                      unsigned int key1)
{
    for (int round = 0; round < 10; ++round) {
        unsigned int hi0 = cunumpy_philox_mulhi(0xD2511F53u, ctr.x);
        unsigned int lo0 = 0xD2511F53u * ctr.x;
        unsigned int hi1 = cunumpy_philox_mulhi(0xCD9E8D57u, ctr.z);
        unsigned int lo1 = 0xCD9E8D57u * ctr.z;
        cunumpy_u32x4 next;
        next.x = hi1 ^ ctr.y ^ key0;
        next.y = lo1;
        next.z = hi0 ^ ctr.w ^ key1;
        next.w = lo0;
        ctr = next;
        key0 += 0x9E3779B9u;
        key1 += 0xBB67AE85u;
    }
    return ctr;
}

CUNUMPY_RANDOM_FN cunumpy_u32x4 cunumpy_philox_block(unsigned long long seed,
                                                     unsigned long long stream,
                                                     unsigned long long counter)
{
    cunumpy_u32x4 c;
    c.x = (unsigned int)counter;
    c.y = (unsigned int)(counter >> 32);
    c.z = (unsigned int)stream;
    c.w = (unsigned int)(stream >> 32);
    return cunumpy_philox4x32_10(c, (unsigned int)seed, (unsigned int)(seed >> 32));
}

// Top 53 bits of (lo | hi << 32), times 2**-53: a double in [0, 1).
CUNUMPY_RANDOM_FN double cunumpy_u53(unsigned int lo, unsigned int hi)
{
    unsigned long long w = (unsigned long long)lo | ((unsigned long long)hi << 32);
    return (double)(w >> 11) * 1.1102230246251565404236316680908203125e-16;
}

CUNUMPY_RANDOM_FN double cunumpy_uniform(unsigned long long seed, unsigned long long stream,
                                         unsigned long long counter)
{
    cunumpy_u32x4 r = cunumpy_philox_block(seed, stream, counter);
    return cunumpy_u53(r.x, r.y);
}

CUNUMPY_RANDOM_FN void cunumpy_uniform2(unsigned long long seed, unsigned long long stream,
                                        unsigned long long counter, double *u0, double *u1)
{
    cunumpy_u32x4 r = cunumpy_philox_block(seed, stream, counter);
    *u0 = cunumpy_u53(r.x, r.y);
    *u1 = cunumpy_u53(r.z, r.w);
}

// Box-Muller: radius sqrt(-2 log(1 - u0)), angle 2 pi u1.
CUNUMPY_RANDOM_FN void cunumpy_normal2(unsigned long long seed, unsigned long long stream,
                                       unsigned long long counter, double *z0, double *z1)
{
    double u0, u1;
    cunumpy_uniform2(seed, stream, counter, &u0, &u1);
    double r = sqrt(-2.0 * log(1.0 - u0));
    double a = 6.283185307179586476925286766559 * u1;
    *z0 = r * cos(a);
    *z1 = r * sin(a);
}

CUNUMPY_RANDOM_FN double cunumpy_normal(unsigned long long seed, unsigned long long stream,
                                        unsigned long long counter)
{
    double z0, z1;
    cunumpy_normal2(seed, stream, counter, &z0, &z1);
    return z0;
}

#endif // CUNUMPY_RANDOM_CUH
