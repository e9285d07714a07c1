/* Philox4x32-10 and the uniform/normal transforms, pure C (no Python), shared by philox.c and
 * tests/c. The numbers must match cuda/include/cunumpy/random.cuh bit for bit. */
#ifndef CUNUMPY__CORE_PHILOX_KERNELS_H
#define CUNUMPY__CORE_PHILOX_KERNELS_H

#include <assert.h>
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CN_HAVE_AVX2_BUILD 1
#define CN_AVX2 __attribute__((target("avx2")))

/* Four Philox blocks at once: each 64-bit lane holds one 32-bit word (vpmuludq multiplies the
 * low halves into full 64-bit products). Bit-identical to cn_philox4x32_10. */
CN_AVX2 static inline void cn_philox4_avx2(__m256i c[4], __m256i k0, __m256i k1)
{
    const __m256i m0 = _mm256_set1_epi64x(CN_PHILOX_M0), m1 = _mm256_set1_epi64x(CN_PHILOX_M1);
    const __m256i w0 = _mm256_set1_epi64x(CN_PHILOX_W0), w1 = _mm256_set1_epi64x(CN_PHILOX_W1);
    const __m256i low = _mm256_set1_epi64x(0xffffffffLL);
    __m256i c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
    for (int r = 0; r < 10; r++) {
        __m256i p0 = _mm256_mul_epu32(c0, m0);
        __m256i p1 = _mm256_mul_epu32(c2, m1);
        c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), k0);
        c1 = _mm256_and_si256(p1, low);
        c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), k1);
        c3 = _mm256_and_si256(p0, low);
        k0 = _mm256_and_si256(_mm256_add_epi64(k0, w0), low);
        k1 = _mm256_and_si256(_mm256_add_epi64(k1, w1), low);
    }
    c[0] = c0;
    c[1] = c1;
    c[2] = c2;
    c[3] = c3;
}

/* (lo | hi << 32) >> 11, times 2**-53, exactly: the 53-bit integer is split into two parts
 * below 2**52 that convert exactly through the 2**52 exponent trick. */
CN_AVX2 static inline __m256d cn_u53_avx2(__m256i lo, __m256i hi)
{
    const __m256i magic = _mm256_set1_epi64x(0x4330000000000000LL);
    const __m256d two52 = _mm256_set1_pd(4503599627370496.0);
    __m256i w_hi = _mm256_srli_epi64(hi, 11);                     /* top 21 bits */
    __m256i w_lo = _mm256_or_si256(_mm256_srli_epi64(lo, 11),     /* low 32 bits */
                                   _mm256_and_si256(_mm256_slli_epi64(hi, 21),
                                                    _mm256_set1_epi64x(0xffe00000LL)));
    __m256d d_hi = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(w_hi, magic)), two52);
    __m256d d_lo = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(w_lo, magic)), two52);
    __m256d x = _mm256_add_pd(_mm256_mul_pd(d_hi, _mm256_set1_pd(4294967296.0)), d_lo);
    return _mm256_mul_pd(x, _mm256_set1_pd(0x1.0p-53));
}

CN_AVX2 static inline __m256i cn_load4(const uint64_t *p, size_t i, size_t step)
{
    return step ? _mm256_loadu_si256((const __m256i *)(p + i)) : _mm256_set1_epi64x((long long)p[0]);
}

/* Uniform kinds only; returns how many leading entries it filled (a multiple of 4). */
CN_AVX2 static size_t cn_philox_uniform_avx2(int two, size_t n, const uint64_t *seed,
                                             size_t seed_step, const uint64_t *stream,
                                             size_t stream_step, const uint64_t *counter,
                                             size_t counter_step, double *out0, double *out1)
{
    const __m256i low = _mm256_set1_epi64x(0xffffffffLL);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i s = cn_load4(seed, i, seed_step), st = cn_load4(stream, i, stream_step);
        __m256i ct = cn_load4(counter, i, counter_step);
        __m256i c[4] = {_mm256_and_si256(ct, low), _mm256_srli_epi64(ct, 32),
                        _mm256_and_si256(st, low), _mm256_srli_epi64(st, 32)};
        cn_philox4_avx2(c, _mm256_and_si256(s, low), _mm256_srli_epi64(s, 32));
        _mm256_storeu_pd(out0 + i, cn_u53_avx2(c[0], c[1]));
        if (two)
            _mm256_storeu_pd(out1 + i, cn_u53_avx2(c[2], c[3]));
    }
    return i;
}

static int cn_avx2_usable(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#else
#define CN_HAVE_AVX2_BUILD 0
#endif

/* Fill out0[i] (and out1[i] for the two-output kinds) for i < n. Each input is read at
 * index i * step (step 0 broadcasts one value, step 1 walks an array). */
static void cn_philox_fill(int kind, size_t n, const uint64_t *seed, size_t seed_step,
                           const uint64_t *stream, size_t stream_step, const uint64_t *counter,
                           size_t counter_step, double *out0, double *out1)
{
    /* The two-output kinds always come with their second output. */
    assert(out1 != NULL || kind == CN_RNG_UNIFORM || kind == CN_RNG_NORMAL);
    size_t done = 0;
#if CN_HAVE_AVX2_BUILD
    /* Pool threads may get here at once: an atomic flag, decided by whoever is first. */
    static int avx2_flag = -1;
    int avx2 = __atomic_load_n(&avx2_flag, __ATOMIC_RELAXED);
    if (avx2 < 0) {
        avx2 = cn_avx2_usable();
        __atomic_store_n(&avx2_flag, avx2, __ATOMIC_RELAXED);
    }
    if (avx2 && (kind == CN_RNG_UNIFORM || kind == CN_RNG_UNIFORM2))
        done = cn_philox_uniform_avx2(kind == CN_RNG_UNIFORM2, n, seed, seed_step, stream,
                                      stream_step, counter, counter_step, out0, out1);
#endif
    if (kind == CN_RNG_UNIFORM) {
        for (size_t i = done; i < n; i++) {
            cn_u32x4 x = cn_philox_block(seed[i * seed_step], stream[i * stream_step],
                                         counter[i * counter_step]);
            out0[i] = cn_u53(x.v[0], x.v[1]);
        }
    } else if (kind == CN_RNG_UNIFORM2) {
        for (size_t i = done; i < n; i++) {
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
