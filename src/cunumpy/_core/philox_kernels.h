/* Philox4x32-10 and the uniform/normal transforms, pure C (no Python), shared by philox.c and
 * tests/c. The numbers must match cuda/include/cunumpy/random.cuh bit for bit. */
#ifndef CUNUMPY__CORE_PHILOX_KERNELS_H
#define CUNUMPY__CORE_PHILOX_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define CN_PHILOX_M0 0xD2511F53u
#define CN_PHILOX_M1 0xCD9E8D57u
#define CN_PHILOX_W0 0x9E3779B9u
#define CN_PHILOX_W1 0xBB67AE85u

typedef struct {
    uint32_t v[4];
} cn_u32x4;

static inline cn_u32x4 cn_philox4x32_10(cn_u32x4 c, uint32_t k0, uint32_t k1)
{
    uint32_t c0 = c.v[0], c1 = c.v[1], c2 = c.v[2], c3 = c.v[3];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)CN_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)CN_PHILOX_M1 * c2;
        c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        c1 = (uint32_t)p1;
        c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c3 = (uint32_t)p0;
        k0 += CN_PHILOX_W0;
        k1 += CN_PHILOX_W1;
    }
    cn_u32x4 out = {{c0, c1, c2, c3}};
    return out;
}

/* Counter words (counter_lo, counter_hi, stream_lo, stream_hi), key (seed_lo, seed_hi). */
static inline cn_u32x4 cn_philox_block(uint64_t seed, uint64_t stream, uint64_t counter)
{
    cn_u32x4 c = {{(uint32_t)counter, (uint32_t)(counter >> 32), (uint32_t)stream,
                   (uint32_t)(stream >> 32)}};
    return cn_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Top 53 bits of the 64-bit word (lo | hi << 32), scaled into [0, 1). */
static inline double cn_u53(uint32_t lo, uint32_t hi)
{
    uint64_t w = (uint64_t)lo | ((uint64_t)hi << 32);
    return (double)(w >> 11) * 0x1.0p-53;
}

#define CN_TWO_PI 6.283185307179586476925286766559

static inline void cn_box_muller(double u0, double u1, double *z0, double *z1)
{
    double r = sqrt(-2.0 * log(1.0 - u0));
    double a = CN_TWO_PI * u1;
    *z0 = r * cos(a);
    *z1 = r * sin(a);
}

enum { CN_RNG_UNIFORM = 0, CN_RNG_UNIFORM2 = 1, CN_RNG_NORMAL = 2, CN_RNG_NORMAL2 = 3 };

/* Fill out0[i] (and out1[i] for the two-output kinds) for i < n. Each input is read at
 * index i * step (step 0 broadcasts one value, step 1 walks an array). */
static void cn_philox_fill(int kind, size_t n, const uint64_t *seed, size_t seed_step,
                           const uint64_t *stream, size_t stream_step, const uint64_t *counter,
                           size_t counter_step, double *out0, double *out1)
{
    if (kind == CN_RNG_UNIFORM) {
        for (size_t i = 0; i < n; i++) {
            cn_u32x4 x = cn_philox_block(seed[i * seed_step], stream[i * stream_step],
                                         counter[i * counter_step]);
            out0[i] = cn_u53(x.v[0], x.v[1]);
        }
    } else if (kind == CN_RNG_UNIFORM2) {
        for (size_t i = 0; i < n; i++) {
            cn_u32x4 x = cn_philox_block(seed[i * seed_step], stream[i * stream_step],
                                         counter[i * counter_step]);
            out0[i] = cn_u53(x.v[0], x.v[1]);
            out1[i] = cn_u53(x.v[2], x.v[3]);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            cn_u32x4 x = cn_philox_block(seed[i * seed_step], stream[i * stream_step],
                                         counter[i * counter_step]);
            double z0, z1;
            cn_box_muller(cn_u53(x.v[0], x.v[1]), cn_u53(x.v[2], x.v[3]), &z0, &z1);
            out0[i] = z0;
            if (kind == CN_RNG_NORMAL2)
                out1[i] = z1;
        }
    }
}

#endif /* CUNUMPY__CORE_PHILOX_KERNELS_H */
