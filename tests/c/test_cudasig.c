/* C unit test of the CUDA signature parser (cudasig_parse.h), run under ASan/UBSan by
 * `make test-c`: known signatures, errors, and a deterministic fuzz loop over random token
 * soups and random bytes that must never read out of bounds, leak or crash. */
#include "cudasig_parse.h"

#include <assert.h>
#include <stdint.h>

#include "check.h"

typedef struct {
    const char *name;
    kernel_t found;
    int n_found;
} find_t;

static int find_named(const kernel_t *k, void *ctx)
{
    find_t *f = (find_t *)ctx;
    f->n_found++;
    if (f->name != NULL && k->name->len == strlen(f->name) && memcmp(k->name->p, f->name, k->name->len) == 0) {
        f->found = *k;
        return 1;
    }
    return 0;
}

/* Parse parameter `index` of kernel `name`; returns the status, fills `out` and `err`. */
static int parse_one(const char *src, const char *name, long index, param_t *out, char *err, size_t errcap)
{
    toks_t tv = {0};
    toks_t structs = {0};
    int status = CS_ERR_VALUE;
    if (tokenize(src, strlen(src), &tv) < 0 || toks_push(&structs, TK_IDENT, "S", 1) < 0) {
        status = CS_ERR_NOMEM;
        goto done;
    }
    find_t f = {name, {0}, 0};
    if (!find_kernels(&tv, find_named, &f)) {
        snprintf(err, errcap, "kernel not found");
        goto done;
    }
    range_t *parts = NULL;
    long np = split_top(tv.v, f.found.open, f.found.close, &parts);
    if (np < 0) {
        status = CS_ERR_NOMEM;
        goto done;
    }
    if (index < np) {
        sbuf_t b = {err, errcap, 0};
        err[0] = '\0';
        subst_t sub = {NULL, 0, NULL};
        status = parse_param(&tv.v[parts[index].start], parts[index].stop - parts[index].start, &structs, &sub,
                             out, &b);
    }
    CS_FREE(parts);
done:
    toks_free(&tv);
    toks_free(&structs);
    return status;
}

static void test_known_signatures(void)
{
    const char *src = "// __global__ void commented(int x)\n"
                      "#define M __global__ void m(int)\n"
                      "extern \"C\" __global__ void __launch_bounds__(128) k(const double* __restrict__ a,\n"
                      "    unsigned long long n, Array2D<float> v, CArrayView<int, 16> w, S s, void* p,\n"
                      "    std::size_t q, thrust::complex<double> z) {}\n";
    struct {
        long index;
        const char *ctype, *dtype;
        int pointer, ndim, contiguous;
    } want[] = {
        {0, "double", "float64", 1, 0, 0},
        {1, "unsigned long long", "uint64", 0, 0, 0},
        {2, "Array2D<float>", "float32", 0, 2, 0},
        {3, "CArray16D<int>", "int32", 0, 16, 1},
        {4, "S", "", 0, 0, 0},
        {5, "void", NULL, 1, 0, 0},
        {6, "size_t", "uint64", 0, 0, 0},
        {7, "complex<double>", "complex128", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        param_t p;
        char err[ERR_CAP];
        memset(&p, 0, sizeof(p));
        int st = parse_one(src, "k", want[i].index, &p, err, sizeof(err));
        CHECK(st == 0);
        if (st != 0) {
            fprintf(stderr, "  parameter %ld: %s\n", want[i].index, err);
            continue;
        }
        CHECK(strcmp(p.kind.ctype, want[i].ctype) == 0);
        if (want[i].dtype == NULL)
            CHECK(p.kind.dtype == NULL);
        else if (want[i].dtype[0] == '\0')
            CHECK(p.kind.struct_name != NULL);
        else
            CHECK(p.kind.dtype != NULL && strcmp(p.kind.dtype, want[i].dtype) == 0);
        CHECK(p.pointer == want[i].pointer);
        CHECK(p.kind.view_ndim == want[i].ndim && p.kind.contiguous == want[i].contiguous);
    }
}

static void test_errors_name_the_problem(void)
{
    struct {
        const char *decl, *needle;
    } bad[] = {
        {"double** p", "pointer-to-pointer"}, {"MACRO(x)", "macro"},
        {"half h", "unknown type"},          {"double& r", "reference"},       {"void v", "void"},
        {"Array17D<double> v", "1 to 16"},   {"Array2D<double>* v", "by value"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char src[256], err[ERR_CAP];
        snprintf(src, sizeof(src), "extern \"C\" __global__ void k(%s) {}", bad[i].decl);
        param_t p;
        int st = parse_one(src, "k", 0, &p, err, sizeof(err));
        CHECK(st == CS_ERR_VALUE);
        CHECK(strstr(err, bad[i].needle) != NULL);
        if (strstr(err, bad[i].needle) == NULL)
            fprintf(stderr, "  '%s': got '%s'\n", bad[i].decl, err);
    }
}

/* ---------------------------------------------------------------- fuzzing */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *const WORDS[] = {
    "extern", "\"C\"", "__global__", "void", "k", "(", ")", "{", "}", ";", ",", "*", "&", "<", ">", "::",
    "const", "double", "int", "unsigned", "long", "template", "typename", "T", "Array2D", "ArrayView",
    "CArray3D", "3", "99999", "=", "[", "]", "S", "std", "complex", "float", "#define", "\n", "//", "/*",
    "*/", "...", "__launch_bounds__", "'", "\"", "\\", "\xc3\xa9", "x",
};

static int parse_all(const kernel_t *k, void *ctx)
{
    const toks_t *tv = (const toks_t *)ctx;
    range_t *parts = NULL;
    if (k->close < k->open)
        return 0;
    long np = k->close > k->open ? split_top(tv->v, k->open, k->close, &parts) : 0;
    toks_t structs = {0};
    toks_push(&structs, TK_IDENT, "S", 1);
    tok_t tname = {TK_IDENT, "T", 1};
    toks_t targ = {0};
    tokenize("unsigned long", 13, &targ);
    subst_t sub = {&tname, 1, &targ};
    for (long i = 0; i < np; i++) {
        char err[ERR_CAP];
        sbuf_t b = {err, sizeof(err), 0};
        param_t p;
        err[0] = '\0';
        parse_param(&tv->v[parts[i].start], parts[i].stop - parts[i].start, &structs, &sub, &p, &b);
        CHECK(strlen(err) < sizeof(err));
    }
    CS_FREE(parts);
    toks_free(&structs);
    toks_free(&targ);
    return 0;
}

static void fuzz_one(const char *buf, size_t len)
{
    toks_t tv = {0};
    if (tokenize(buf, len, &tv) == 0)
        find_kernels(&tv, parse_all, &tv);
    toks_free(&tv);
}

static void test_fuzz(int rounds)
{
    char buf[2048];
    for (int r = 0; r < rounds; r++) {
        size_t len = 0;
        if (r % 4 == 0) {
            /* raw bytes, exactly `len` of them: no terminator to lean on */
            len = (size_t)(next_random() % 200);
            char *raw = (char *)malloc(len ? len : 1);
            for (size_t i = 0; i < len; i++)
                raw[i] = (char)(next_random() & 0xff);
            fuzz_one(raw, len);
            free(raw);
            continue;
        }
        size_t n_words = (size_t)(next_random() % 80);
        for (size_t w = 0; w < n_words; w++) {
            const char *word = WORDS[next_random() % (sizeof(WORDS) / sizeof(WORDS[0]))];
            size_t wl = strlen(word);
            if (len + wl + 1 >= sizeof(buf))
                break;
            memcpy(buf + len, word, wl);
            len += wl;
            if (next_random() & 1)
                buf[len++] = ' ';
        }
        char *exact = (char *)malloc(len ? len : 1);
        memcpy(exact, buf, len);
        fuzz_one(exact, len);
        free(exact);
    }
}

int main(void)
{
    test_known_signatures();
    test_errors_name_the_problem();
    test_fuzz(30000);
    if (failures) {
        fprintf(stderr, "test_cudasig: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cudasig: ok\n");
    return 0;
}
