/* C unit tests of the pure-C algorithm kernels of _core (run under ASan and UBSan by
 * `make test-c`): each kernel against a plain reference written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compact_kernels.h"
#include "morton_kernels.h"
#include "philox_kernels.h"
#include "segment_kernels.h"
#include "sort_kernels.h"

#include "check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* ---------------------------------------------------------------- Philox */

static void test_philox(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        cn_u32x4 c = {{kat[t][0], kat[t][1], kat[t][2], kat[t][3]}};
        cn_u32x4 r = cn_philox4x32_10(c, kat[t][4], kat[t][5]);
        for (int j = 0; j < 4; j++)
            CHECK(r.v[j] == kat[t][6 + j]);
    }
    /* The fill loop: uniforms in [0, 1), broadcasting with step 0, normals finite. */
    enum { N = 1000 };
    uint64_t seed = 42, stream[N], counter = 7;
    double u[N], u0[N], u1[N], z0[N], z1[N];
    for (int i = 0; i < N; i++)
        stream[i] = (uint64_t)i;
    cn_philox_fill(CN_RNG_UNIFORM, N, &seed, 0, stream, 1, &counter, 0, u, NULL);
    cn_philox_fill(CN_RNG_UNIFORM2, N, &seed, 0, stream, 1, &counter, 0, u0, u1);
    cn_philox_fill(CN_RNG_NORMAL2, N, &seed, 0, stream, 1, &counter, 0, z0, z1);
    double mean = 0;
    for (int i = 0; i < N; i++) {
        CHECK(u[i] >= 0.0 && u[i] < 1.0);
        CHECK(u[i] == u0[i]);
        CHECK(isfinite(z0[i]) && isfinite(z1[i]));
        cn_u32x4 b = cn_philox_block(seed, stream[i], counter);
        CHECK(u1[i] == (double)((((uint64_t)b.v[3] << 32) | b.v[2]) >> 11) * 0x1.0p-53);
        mean += u[i];
    }
    CHECK(fabs(mean / N - 0.5) < 0.05);
    /* The extreme uniform: all ones gives the largest double below 1. */
    CHECK(cn_u53(0xffffffffu, 0xffffffffu) == 1.0 - 0x1.0p-53);
    CHECK(cn_u53(0, 0) == 0.0);
}

/* ---------------------------------------------------------------- Morton */

static void test_morton(void)
{
    for (int i = 0; i < 10000; i++) {
        uint64_t a = next_u64() & 0x1fffff, b = next_u64() & 0x1fffff, c = next_u64() & 0x1fffff;
        uint64_t k3 = cn_spread3(a) | (cn_spread3(b) << 1) | (cn_spread3(c) << 2);
        CHECK(cn_compact3(k3) == a && cn_compact3(k3 >> 1) == b && cn_compact3(k3 >> 2) == c);
        uint64_t x = next_u64() & 0xffffffff, y = next_u64() & 0xffffffff;
        uint64_t k2 = cn_spread2(x) | (cn_spread2(y) << 1);
        CHECK(cn_compact2(k2) == x && cn_compact2(k2 >> 1) == y);
        /* bit 3b + a holds bit b of axis a */
        int bit = (int)(next_u64() % 21);
        CHECK(((k3 >> (3 * bit + 1)) & 1) == ((b >> bit) & 1));
    }
    enum { N = 513 };
    double pos[N * 3];
    for (int i = 0; i < N * 3; i++)
        pos[i] = (double)(next_u64() % 100000) / 25000.0 - 1.0; /* [-1, 3), partly outside */
    pos[0] = 2.0; /* exactly the upper bound of axis 0 */
    double lower[3] = {0.0, 2.0, -1.0}, upper[3] = {2.0, 0.0, 1.0}, scale[3];
    int levels = 21;
    for (int a = 0; a < 3; a++)
        scale[a] = (double)(1u << levels) / (upper[a] - lower[a]);
    uint64_t magic[N], pdep[N];
    CHECK(cn_morton_keys_magic(3, N, pos, 3, 1, lower, scale, levels, magic) == -1);
    CHECK(cn_compact3(magic[0]) == (1u << levels) - 1);
    for (int i = 0; i < N; i++) {
        uint64_t want = 0;
        for (int a = 0; a < 3; a++) {
            double t = floor((pos[3 * i + a] - lower[a]) * scale[a]);
            t = t < 0 ? 0 : t > (double)((1u << levels) - 1) ? (double)((1u << levels) - 1) : t;
            want |= cn_spread3((uint64_t)t) << a;
        }
        CHECK(magic[i] == want);
    }
#if CN_HAVE_PDEP_BUILD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("bmi2")) {
        CHECK(cn_morton_keys_pdep(3, N, pos, 3, 1, lower, scale, levels, pdep) == -1);
        CHECK(memcmp(magic, pdep, sizeof magic) == 0);
        uint64_t cx[N], cy[N], cz[N], again[N];
        uint64_t *outs[3] = {cx, cy, cz};
        cn_morton_decode_pdep(3, N, pdep, outs);
        const uint64_t *ins[3] = {cx, cy, cz};
        size_t steps[3] = {1, 1, 1};
        cn_morton_encode_magic(3, N, ins, steps, again);
        CHECK(memcmp(again, magic, sizeof again) == 0);
        cn_morton_encode_pdep(3, N, ins, steps, again);
        CHECK(memcmp(again, magic, sizeof again) == 0);
    }
#else
    (void)pdep;
#endif
    pos[7] = NAN;
    CHECK(cn_morton_keys_magic(3, N, pos, 3, 1, lower, scale, levels, magic) == 2);
}

/* ---------------------------------------------------------------- radix argsort */

/* A stable reference: insertion sort of indices by the ordered value. */
static void reference_argsort(cn_key_type t, const char *keys, size_t isz, size_t n, int64_t *order)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = cn_key_get(t, keys + i * isz);
        size_t j = i;
        while (j > 0 && cn_key_get(t, keys + (size_t)order[j - 1] * isz) > v) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = (int64_t)i;
    }
}

static void check_sort(cn_key_type t, size_t n, int pattern)
{
    size_t isz = cn_key_size(t);
    char *keys = malloc(n * isz + 1), *sorted = malloc(n * isz + 1);
    int64_t *order = malloc((n + 1) * sizeof(int64_t)), *want = malloc((n + 1) * sizeof(int64_t));
    for (size_t i = 0; i < n; i++) {
        uint64_t v = next_u64();
        if (pattern == 1)
            v &= 0x3fffffff; /* 30-bit */
        else if (pattern == 2)
            v = v % 5; /* few distinct */
        else if (pattern == 3)
            v = 12345; /* all equal */
        else if (pattern == 4)
            v = (uint64_t)i; /* sorted */
        else if (pattern == 5)
            v = (uint64_t)(n - i) << 40; /* reversed, high bits only */
        else if (pattern == 6)
            v = (uint64_t)(-(int64_t)(v % 1000)); /* negative */
        memcpy(keys + i * isz, &v, isz);
    }
    CHECK(cn_radix_argsort(t, keys, (ptrdiff_t)isz, n, order, sorted) == CN_SORT_OK);
    reference_argsort(t, keys, isz, n, want);
    for (size_t i = 0; i < n; i++) {
        CHECK(order[i] == want[i]);
        CHECK(memcmp(sorted + i * isz, keys + (size_t)want[i] * isz, isz) == 0);
        if (order[i] != want[i])
            break;
    }
    free(keys);
    free(sorted);
    free(order);
    free(want);
}

/* A stable argsort is a permutation under which keys never decrease and equal keys keep
 * their original order; checked directly for sizes too large for the quadratic reference. */
static void check_sort_large(cn_key_type t, size_t n, int pattern)
{
    size_t isz = cn_key_size(t);
    char *keys = malloc(n * isz), *sorted = malloc(n * isz);
    int64_t *order = malloc(n * sizeof(int64_t));
    char *seen = calloc(n, 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = next_u64();
        if (pattern == 1)
            v &= 0x3fffffff;
        else if (pattern == 2)
            v %= 3;
        else if (pattern == 3)
            v = (uint64_t)(-(int64_t)(v % 100000));
        else if (pattern == 4)
            v = (v & 0xff00000000000000ull) | (v & 0xf); /* two separated bit groups */
        memcpy(keys + i * isz, &v, isz);
    }
    CHECK(cn_radix_argsort(t, keys, (ptrdiff_t)isz, n, order, sorted) == CN_SORT_OK);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        int64_t o = order[i];
        ok &= o >= 0 && (size_t)o < n && !seen[o];
        if (!ok)
            break;
        seen[o] = 1;
        ok &= memcmp(sorted + i * isz, keys + (size_t)o * isz, isz) == 0;
        if (i > 0) {
            uint64_t a = cn_key_get(t, keys + (size_t)order[i - 1] * isz), b = cn_key_get(t, keys + (size_t)o * isz);
            ok &= a < b || (a == b && order[i - 1] < o);
        }
    }
    CHECK(ok);
    free(keys);
    free(sorted);
    free(order);
    free(seen);
}

static void test_sort(void)
{
    for (int t = 0; t < 8; t++)
        for (int p = 0; p < 5; p++)
            check_sort_large((cn_key_type)t, 70001 + (size_t)p, p);
    static const size_t sizes[] = {0, 1, 2, 3, 17, 1000, 3001};
    for (int t = 0; t < 8; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int p = 0; p < 7; p++)
                check_sort((cn_key_type)t, sizes[s], p);
    /* strided input: every other int64 */
    int64_t keys[200], order[100], sorted[100], want[100];
    for (int i = 0; i < 200; i++)
        keys[i] = (int64_t)(next_u64() % 50) - 25;
    CHECK(cn_radix_argsort(CN_KEY_I64, (const char *)keys, 16, 100, order, (char *)sorted) == 0);
    int64_t compact[100];
    for (int i = 0; i < 100; i++)
        compact[i] = keys[2 * i];
    reference_argsort(CN_KEY_I64, (const char *)compact, 8, 100, want);
    CHECK(memcmp(order, want, sizeof order) == 0);
}

/* ---------------------------------------------------------------- segments */

static void test_segments(void)
{
    enum { N = 2000, M = 5, S = 37 };
    int64_t keys[N];
    double vals[N * M], out[S * M], want[S * M];
    for (int i = 0; i < N; i++) {
        keys[i] = (int64_t)(next_u64() % (S + 5)) - 5; /* some negative: dropped */
        if (i % 7 == 0 && i > 0)
            keys[i] = keys[i - 1]; /* runs */
        for (int j = 0; j < M; j++)
            vals[i * M + j] = (double)(int)(next_u64() % 100);
    }
    for (size_t m = 0; m <= M; m++) {
        memset(want, 0, sizeof want);
        for (int i = 0; i < N; i++)
            if (keys[i] >= 0)
                for (size_t j = 0; j < m; j++)
                    want[keys[i] * (int64_t)m + (int64_t)j] += vals[i * M + j];
        CHECK(cn_segment_sum_d_i64((const char *)keys, 8, N, (const char *)vals, M * 8, 8, m, out, S) == -1);
        CHECK(memcmp(out, want, S * m * sizeof(double)) == 0);
    }
    keys[100] = S; /* out of range: reported, nothing out of bounds */
    CHECK(cn_segment_sum_d_i64((const char *)keys, 8, N, (const char *)vals, M * 8, 8, 1, out, S) == 100);
    CHECK(cn_segment_check(CN_KEY_I64, (const char *)keys, 8, N, S) == 100);
    uint64_t big = UINT64_MAX;
    CHECK(cn_segment_check(CN_KEY_U64, (const char *)&big, 8, 1, S) == 0);

    int64_t cells[] = {0, 0, 2, 2, 4}, off[7];
    CHECK(cn_cell_offsets(CN_KEY_I64, (const char *)cells, 8, 5, 6, off) == -1);
    int64_t expect[] = {0, 2, 2, 4, 4, 5, 5};
    CHECK(memcmp(off, expect, sizeof off) == 0);
    int64_t unsorted[] = {0, 2, 1};
    CHECK(cn_cell_offsets(CN_KEY_I64, (const char *)unsorted, 8, 3, 6, off) == 2);
    CHECK(cn_cell_offsets(CN_KEY_I64, (const char *)cells, 8, 5, 4, off) == 4);

    uint64_t u[] = {1, 1, 0x8000000000000000ull, UINT64_MAX, UINT64_MAX};
    uint64_t uniq[3];
    int64_t st[3], sp[3];
    CHECK(cn_segment_runs(1, 8, (const char *)u, 8, 5, NULL, NULL, NULL, 0) == 3);
    CHECK(cn_segment_runs(1, 8, (const char *)u, 8, 5, (char *)uniq, st, sp, 3) == 3);
    CHECK(uniq[1] == 0x8000000000000000ull && st[2] == 3 && sp[2] == 5 && sp[0] == 2);
    CHECK(cn_segment_runs(0, 8, (const char *)u, 8, 5, NULL, NULL, NULL, 0) == -3); /* signed view */
    /* Outputs sized for fewer runs than the keys now have (keys written in between): no write
     * past them. ASan sees a write to uniq2[2] or st2[2]. */
    uint64_t uniq2[2];
    int64_t st2[2], sp2[2];
    CHECK(cn_segment_runs(1, 8, (const char *)u, 8, 5, (char *)uniq2, st2, sp2, 2) == CN_RUNS_CHANGED);
}

/* The per-type loops on more rows than one 64-row block: signed and unsigned 64-bit keys
 * (the vector mask path), a strided view, an unsorted row in the second block, and outputs one
 * run too short. A run starts every 3 rows. */
static void test_segment_runs_blocks(void)
{
    enum { N = 200, R = (N + 2) / 3 };
    uint64_t u[N], strided[2 * N], uniq[R];
    int64_t s[N], st[R], sp[R];
    for (size_t i = 0; i < N; i++) {
        u[i] = 0x7ffffffffffffff0ull + i / 3; /* crosses INT64_MAX: unsigned order only */
        s[i] = -100 + (int64_t)(i / 3);
        strided[2 * i] = u[i];
        strided[2 * i + 1] = 0;
    }
    CHECK(cn_segment_runs(1, 8, (const char *)u, 8, N, NULL, NULL, NULL, 0) == R);
    CHECK(cn_segment_runs(1, 8, (const char *)u, 8, N, (char *)uniq, st, sp, R) == R);
    int ok = 1;
    for (size_t r = 0; r < R; r++)
        ok &= uniq[r] == u[3 * r] && st[r] == (int64_t)(3 * r) &&
              sp[r] == (int64_t)(3 * r + 3 < N ? 3 * r + 3 : N);
    CHECK(ok);
    CHECK(cn_segment_runs(1, 8, (const char *)strided, 16, N, NULL, NULL, NULL, 0) == R);
    CHECK(cn_segment_runs(1, 8, (const char *)strided, 16, N, (char *)uniq, st, sp, R) == R);
    CHECK(uniq[R - 1] == u[N - 1] && st[R - 1] == 3 * (R - 1) && sp[R - 1] == N);
    /* The signed view of the same bits is unsorted where they cross INT64_MAX (row 48). */
    CHECK(cn_segment_runs(0, 8, (const char *)u, 8, N, NULL, NULL, NULL, 0) == -(48 + 1));
    CHECK(cn_segment_runs(0, 8, (const char *)u, 8, N, (char *)uniq, st, sp, R) == -(48 + 1));
    CHECK(cn_segment_runs(0, 8, (const char *)s, 8, N, (char *)uniq, st, sp, R) == R);
    CHECK((int64_t)uniq[R - 1] == s[N - 1] && st[1] == 3);
    s[100] = -1000;
    CHECK(cn_segment_runs(0, 8, (const char *)s, 8, N, NULL, NULL, NULL, 0) == -(100 + 1));
    CHECK(cn_segment_runs(0, 8, (const char *)s, 8, N, (char *)uniq, st, sp, R) == -(100 + 1));
    /* Capacity for fewer runs, on the heap so ASan sees a write past it. */
    uint64_t *uniq_short = malloc((R - 1) * sizeof *uniq_short);
    int64_t *st_short = malloc((R - 1) * sizeof *st_short), *sp_short = malloc((R - 1) * sizeof *sp_short);
    CHECK(cn_segment_runs(1, 8, (const char *)u, 8, N, (char *)uniq_short, st_short, sp_short,
                          R - 1) == CN_RUNS_CHANGED);
    free(uniq_short);
    free(st_short);
    free(sp_short);
}

/* ---------------------------------------------------------------- compaction */

static void test_compact(void)
{
    enum { N = 5000 };
    static char mask[N];
    static double a[N], a0[N];
    static double b[3][N], b0[3][N]; /* component-major: 3 lanes */
    static int32_t c[N][3], c0[N][3]; /* rows of 12 bytes: one lane */
    for (int i = 0; i < N; i++) {
        mask[i] = i < 37 || (next_u64() % 3 == 0);
        a[i] = a0[i] = i;
        for (int j = 0; j < 3; j++) {
            b[j][i] = b0[j][i] = i * 10 + j;
            c[i][j] = c0[i][j] = i * 3 + j;
        }
    }
    ptrdiff_t one_lane[1] = {0};
    ptrdiff_t b_lanes[3] = {0, (ptrdiff_t)sizeof b[0], 2 * (ptrdiff_t)sizeof b[0]};
    cn_compact_array arrays[3] = {
        {(char *)a, 8, 8, 1, one_lane},
        {(char *)b, 8, 8, 3, b_lanes},
        {(char *)c, 12, 12, 1, one_lane},
    };
    size_t live = cn_compact(mask, 1, N, arrays, 3);
    size_t j = 0;
    for (int i = 0; i < N; i++) {
        if (!mask[i])
            continue;
        CHECK(a[j] == a0[i]);
        for (int k = 0; k < 3; k++) {
            CHECK(b[k][j] == b0[k][i]);
            CHECK(c[j][k] == c0[i][k]);
        }
        j++;
    }
    CHECK(live == j);
    /* strided mask, all false, all true */
    char wide_mask[2 * N];
    memset(wide_mask, 0, sizeof wide_mask);
    CHECK(cn_compact(wide_mask, 2, N, arrays, 1) == 0);
    memset(wide_mask, 1, sizeof wide_mask);
    CHECK(cn_compact(wide_mask, 2, N, arrays, 1) == N);
    CHECK(cn_compact(wide_mask, 1, 0, arrays, 3) == 0);
}

int main(void)
{
    test_philox();
    test_morton();
    test_sort();
    test_segments();
    test_segment_runs_blocks();
    test_compact();
    if (failures) {
        fprintf(stderr, "test_algorithms: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_algorithms: all checks passed\n");
    return 0;
}
