/* The pure C part of the CUDA signature parser: tokens, kernel search, types, parameters.
 *
 * Shared by cudasig.c (which converts results to Python objects) and the C unit test
 * tests/c/test_cudasig.c (which runs it under the sanitizers). Nothing here touches Python;
 * the includer may route allocations through CS_MALLOC/CS_CALLOC/CS_REALLOC/CS_FREE. */
#ifndef CUNUMPY__CORE_CUDASIG_PARSE_H
#define CUNUMPY__CORE_CUDASIG_PARSE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CS_MALLOC
#define CS_MALLOC malloc
#define CS_CALLOC calloc
#define CS_REALLOC realloc
#define CS_FREE free
#endif

/* Status codes, equal to cn_status's CN_ERR_NOMEM and CN_ERR_VALUE (common.h). */
#define CS_ERR_NOMEM (-1)
#define CS_ERR_VALUE (-2)

enum { TK_IDENT = 0, TK_NUMBER = 1, TK_PUNCT = 2, TK_STRING = 3 };

#define MAX_VIEW_NDIM 16
#define MAX_EXTERN_NESTING 64
#define ERR_CAP 640
#define CTYPE_CAP 64

typedef struct {
    int kind;
    const char *p;
    size_t len;
} tok_t;

typedef struct {
    tok_t *v;
    size_t n, cap;
} toks_t;

static int toks_push(toks_t *t, int kind, const char *p, size_t len)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        tok_t *v = (tok_t *)CS_REALLOC(t->v, cap * sizeof(tok_t));
        if (v == NULL)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n].kind = kind;
    t->v[t->n].p = p;
    t->v[t->n].len = len;
    t->n++;
    return 0;
}

static void toks_free(toks_t *t)
{
    CS_FREE(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

static int is_ident_start(unsigned char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static int is_ident_char(unsigned char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

static int tok_eq(const tok_t *t, int kind, const char *text)
{
    size_t n = strlen(text);
    return t->kind == kind && t->len == n && memcmp(t->p, text, n) == 0;
}

static int is_punct(const tok_t *t, const char *text) { return tok_eq(t, TK_PUNCT, text); }
static int is_ident(const tok_t *t, const char *text) { return tok_eq(t, TK_IDENT, text); }

static int tok_same(const tok_t *a, const tok_t *b)
{
    return a->kind == b->kind && a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}

/* Tokens without comments and preprocessor lines. Returns 0, or -1 on allocation failure. */
static int tokenize(const char *s, size_t n, toks_t *out)
{
    size_t i = 0;
    int line_start = 1;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            line_start = 1;
            i++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            i++;
            continue;
        }
        if (c == '/' && i + 1 < n && s[i + 1] == '/') {
            while (i < n && s[i] != '\n')
                i++;
            continue;
        }
        if (c == '/' && i + 1 < n && s[i + 1] == '*') {
            size_t j = i + 2;
            while (j + 1 < n && !(s[j] == '*' && s[j + 1] == '/'))
                j++;
            i = (j + 1 < n) ? j + 2 : n;
            continue;
        }
        if (c == '#' && line_start) {
            while (i < n && s[i] != '\n') {
                if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\n') {
                    i += 2;
                    continue;
                }
                if (s[i] == '\\' && i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n') {
                    i += 3;
                    continue;
                }
                i++;
            }
            continue;
        }
        line_start = 0;
        size_t j = i + 1;
        int kind;
        if (is_ident_start(c)) {
            while (j < n && is_ident_char((unsigned char)s[j]))
                j++;
            kind = TK_IDENT;
        }
        else if (c >= '0' && c <= '9') {
            while (j < n && (is_ident_char((unsigned char)s[j]) || s[j] == '.' || s[j] == '\''))
                j++;
            kind = TK_NUMBER;
        }
        else if (c == '"' || c == '\'') {
            while (j < n && s[j] != (char)c && s[j] != '\n')
                j += (s[j] == '\\') ? 2 : 1;
            j = (j + 1 < n) ? j + 1 : n;
            kind = TK_STRING;
        }
        else {
            kind = TK_PUNCT;
            if ((c == ':' || c == '&') && i + 1 < n && s[i + 1] == (char)c)
                j = i + 2; /* :: and && */
            else if (c == '.' && i + 2 < n && s[i + 1] == '.' && s[i + 2] == '.')
                j = i + 3;
        }
        if (toks_push(out, kind, s + i, j - i) < 0)
            return -1;
        i = j;
    }
    return 0;
}

/* Index of the token closing the group opened at i, or n when unbalanced. */
static size_t matching(const tok_t *t, size_t n, size_t i, const char *open, const char *close)
{
    long depth = 0;
    for (size_t j = i; j < n; j++) {
        if (t[j].kind != TK_PUNCT)
            continue;
        if (is_punct(&t[j], open))
            depth++;
        else if (is_punct(&t[j], close)) {
            depth--;
            if (depth == 0)
                return j;
        }
    }
    return n;
}

typedef struct {
    const tok_t *name;
    long template_at; /* -1 when not a template */
    size_t open, close; /* parameter tokens are (open, close) exclusive */
    int is_def, extern_c;
} kernel_t;

static const char *const ATTRIBUTE_CALLS[] = {"__launch_bounds__", "__attribute__", "__declspec",
                                              "alignas", "__align__", NULL};

static int in_list(const tok_t *t, const char *const *list)
{
    if (t->kind != TK_IDENT)
        return 0;
    for (; *list; list++)
        if (is_ident(t, *list))
            return 1;
    return 0;
}

/* Calls `visit` for every __global__ function in order; stops when it returns nonzero. */
typedef int (*visit_fn)(const kernel_t *k, void *ctx);

static int find_kernels(const toks_t *tv, visit_fn visit, void *ctx)
{
    const tok_t *t = tv->v;
    size_t n = tv->n;
    long stack[MAX_EXTERN_NESTING];
    int sp = 0;
    long depth = 0;
    size_t decl_start = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].kind == TK_PUNCT) {
            if (is_punct(&t[i], "{")) {
                if (i >= 2 && is_ident(&t[i - 2], "extern") && tok_eq(&t[i - 1], TK_STRING, "\"C\"")) {
                    if (sp < MAX_EXTERN_NESTING)
                        stack[sp++] = depth;
                }
                depth++;
                decl_start = i + 1;
            }
            else if (is_punct(&t[i], "}")) {
                depth--;
                if (sp > 0 && stack[sp - 1] == depth)
                    sp--;
                decl_start = i + 1;
            }
            else if (is_punct(&t[i], ";")) {
                decl_start = i + 1;
            }
            continue;
        }
        if (!is_ident(&t[i], "__global__"))
            continue;
        kernel_t k;
        k.extern_c = sp > 0;
        k.template_at = -1;
        for (size_t j = decl_start; j < i; j++) {
            if (is_ident(&t[j], "extern") && j + 1 < i && tok_eq(&t[j + 1], TK_STRING, "\"C\""))
                k.extern_c = 1;
            if (is_ident(&t[j], "template") && k.template_at < 0)
                k.template_at = (long)j;
        }
        size_t j = i + 1;
        k.name = NULL;
        while (j < n) {
            if (is_punct(&t[j], ";") || is_punct(&t[j], "{") || is_punct(&t[j], "}"))
                break;
            if (t[j].kind == TK_IDENT && j + 1 < n && is_punct(&t[j + 1], "(")) {
                if (in_list(&t[j], ATTRIBUTE_CALLS)) {
                    j = matching(t, n, j + 1, "(", ")") + 1;
                    continue;
                }
                k.name = &t[j];
                break;
            }
            j++;
        }
        if (k.name == NULL)
            continue;
        size_t close = matching(t, n, j + 1, "(", ")");
        if (close >= n)
            continue;
        k.is_def = 0;
        for (size_t m = close + 1; m < n; m++) {
            if (is_punct(&t[m], "{")) {
                k.is_def = 1;
                break;
            }
            if (is_punct(&t[m], ";") || is_punct(&t[m], "}") || is_punct(&t[m], "("))
                break;
        }
        k.open = j + 2;
        k.close = close;
        if (visit(&k, ctx))
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- text and splitting */

typedef struct {
    char *buf;
    size_t cap, len;
} sbuf_t;

static void sb_put(sbuf_t *b, const char *p, size_t n)
{
    if (b->cap == 0)
        return;
    for (size_t i = 0; i < n && b->len + 1 < b->cap; i++)
        b->buf[b->len++] = p[i];
    b->buf[b->len] = '\0';
}

static void sb_puts(sbuf_t *b, const char *s) { sb_put(b, s, strlen(s)); }

/* The tokens as text: words separated by one space, ", " after commas (as the twin). */
static void text_of(const tok_t *t, size_t n, sbuf_t *b)
{
    int prev = -1;
    for (size_t i = 0; i < n; i++) {
        int word = t[i].kind == TK_IDENT || t[i].kind == TK_NUMBER;
        if (((prev == TK_IDENT || prev == TK_NUMBER) && word) ||
            (i > 0 && t[i].kind == TK_IDENT &&
             (is_punct(&t[i - 1], ">") || is_punct(&t[i - 1], "*") || is_punct(&t[i - 1], "&"))))
            sb_put(b, " ", 1);
        sb_put(b, t[i].p, t[i].len);
        if (is_punct(&t[i], ","))
            sb_put(b, " ", 1);
        prev = t[i].kind;
    }
}

typedef struct {
    size_t start, stop;
} range_t;

/* Split t[start:stop] at top-level commas; returns the number of parts or -1 (no memory). */
static long split_top(const tok_t *t, size_t start, size_t stop, range_t **parts)
{
    size_t cap = 8, count = 0;
    range_t *r = (range_t *)CS_MALLOC(cap * sizeof(range_t));
    if (r == NULL)
        return -1;
    long depth = 0;
    size_t cur = start;
    for (size_t j = start; j <= stop; j++) {
        int cut = (j == stop);
        if (!cut && t[j].kind == TK_PUNCT && t[j].len == 1) {
            char c = t[j].p[0];
            if (c == '(' || c == '[' || c == '{' || c == '<')
                depth++;
            else if (c == ')' || c == ']' || c == '}' || c == '>')
                depth--;
            else if (c == ',' && depth == 0)
                cut = 1;
        }
        if (!cut)
            continue;
        if (count == cap) {
            cap *= 2;
            range_t *nr = (range_t *)CS_REALLOC(r, cap * sizeof(range_t));
            if (nr == NULL) {
                CS_FREE(r);
                return -1;
            }
            r = nr;
        }
        r[count].start = cur;
        r[count].stop = j;
        count++;
        cur = j + 1;
    }
    *parts = r;
    return (long)count;
}

/* ---------------------------------------------------------------- types */

static const char *const QUALIFIERS[] = {"const",    "volatile",          "__restrict__", "__restrict",
                                         "restrict", "__grid_constant__", "struct",       "class",
                                         "typename", "register",          NULL};
static const char *const BUILTIN[] = {"signed", "unsigned", "char", "short", "int",
                                      "long",   "float",    "double", "bool", "void", NULL};

typedef struct {
    const char *ctype;
    const char *dtype; /* "" for void */
} scalar_t;

/* Combination of builtin words -> scalar type; returns 0 when invalid. */
static int builtin_type(const tok_t *t, size_t n, scalar_t *out)
{
    int cnt[10] = {0};
    for (size_t i = 0; i < n; i++) {
        for (int w = 0; BUILTIN[w]; w++)
            if (is_ident(&t[i], BUILTIN[w]))
                cnt[w]++;
    }
    enum { S, U, CH, SH, IN, LO, FL, DO, BO, VO };
    int longs = cnt[LO], sign = cnt[S] + cnt[U];
    if (sign > 1 || longs > 2)
        return 0;
    for (int w = 0; w < 10; w++)
        if (w != LO && cnt[w] > 1)
            return 0;
    int uns = cnt[U] == 1;
    int nbase = cnt[CH] + cnt[SH] + cnt[IN] + cnt[FL] + cnt[DO] + cnt[BO] + cnt[VO];
    if (nbase == 1 && (cnt[FL] || cnt[DO] || cnt[BO] || cnt[VO])) {
        if (sign || longs)
            return 0;
        if (cnt[FL])
            *out = (scalar_t){"float", "float32"};
        else if (cnt[DO])
            *out = (scalar_t){"double", "float64"};
        else if (cnt[BO])
            *out = (scalar_t){"bool", "bool"};
        else
            *out = (scalar_t){"void", ""};
        return 1;
    }
    if (nbase == 1 && cnt[CH]) {
        if (longs)
            return 0;
        if (uns)
            *out = (scalar_t){"unsigned char", "uint8"};
        else
            *out = (scalar_t){cnt[S] ? "signed char" : "char", "int8"};
        return 1;
    }
    if (cnt[SH] && nbase == 1 + cnt[IN]) {
        if (longs)
            return 0;
        *out = uns ? (scalar_t){"unsigned short", "uint16"} : (scalar_t){"short", "int16"};
        return 1;
    }
    if (nbase == cnt[IN]) {
        if (longs == 0) {
            if (nbase == 0 && sign == 0)
                return 0;
            *out = uns ? (scalar_t){"unsigned int", "uint32"} : (scalar_t){"int", "int32"};
            return 1;
        }
        if (longs == 2)
            *out = uns ? (scalar_t){"unsigned long long", "uint64"} : (scalar_t){"long long", "int64"};
        else
            *out = uns ? (scalar_t){"unsigned long", "uint64"} : (scalar_t){"long", "int64"};
        return 1;
    }
    return 0;
}

static const char *const TYPEDEFS[][2] = {
    {"int8_t", "int8"},     {"uint8_t", "uint8"},   {"int16_t", "int16"},  {"uint16_t", "uint16"},
    {"int32_t", "int32"},   {"uint32_t", "uint32"}, {"int64_t", "int64"},  {"uint64_t", "uint64"},
    {"ptrdiff_t", "int64"}, {"ssize_t", "int64"},   {"size_t", "uint64"},  {NULL, NULL},
};
static const char *const TYPEDEF_PREFIXES[] = {"", "::", "std::", "::std::", NULL};
static const char *const COMPLEX_PREFIXES[] = {"",           "::",         "std::",         "::std::",
                                               "thrust::",   "::thrust::", "cuda::std::",   "::cuda::std::",
                                               NULL};

static int all_builtin(const tok_t *t, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!in_list(&t[i], BUILTIN))
            return 0;
    return 1;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Scalar type written as tokens; returns 1 and fills out, 0 when not a scalar, -1 no memory. */
static int scalar_type(const tok_t *t, size_t n, scalar_t *out)
{
    if (all_builtin(t, n))
        return builtin_type(t, n, out);
    char text[256];
    sbuf_t b = {text, sizeof(text), 0};
    text[0] = '\0';
    text_of(t, n, &b);
    if (b.len + 1 >= sizeof(text))
        return 0; /* far longer than any scalar type */
    for (int p = 0; TYPEDEF_PREFIXES[p]; p++) {
        if (!starts_with(text, TYPEDEF_PREFIXES[p]))
            continue;
        const char *rest = text + strlen(TYPEDEF_PREFIXES[p]);
        for (int k = 0; TYPEDEFS[k][0]; k++) {
            if (strcmp(rest, TYPEDEFS[k][0]) == 0) {
                *out = (scalar_t){TYPEDEFS[k][0], TYPEDEFS[k][1]};
                return 1;
            }
        }
    }
    for (int p = 0; COMPLEX_PREFIXES[p]; p++) {
        if (!starts_with(text, COMPLEX_PREFIXES[p]))
            continue;
        const char *rest = text + strlen(COMPLEX_PREFIXES[p]);
        size_t rl = strlen(rest);
        if (!(starts_with(rest, "complex<") && rl > 8 && rest[rl - 1] == '>'))
            continue;
        toks_t inner = {0};
        if (tokenize(rest + 8, rl - 9, &inner) < 0)
            return -1;
        /* Drop qualifiers in place. */
        size_t m = 0;
        for (size_t i = 0; i < inner.n; i++)
            if (!in_list(&inner.v[i], QUALIFIERS))
                inner.v[m++] = inner.v[i];
        int found = 0;
        scalar_t base;
        if (all_builtin(inner.v, m) && builtin_type(inner.v, m, &base)) {
            if (strcmp(base.dtype, "float32") == 0) {
                *out = (scalar_t){"complex<float>", "complex64"};
                found = 1;
            }
            else if (strcmp(base.dtype, "float64") == 0) {
                *out = (scalar_t){"complex<double>", "complex128"};
                found = 1;
            }
        }
        toks_free(&inner);
        return found;
    }
    return 0;
}

typedef struct {
    char ctype[CTYPE_CAP];
    const char *dtype; /* NULL for void* and structs */
    const tok_t *struct_name;
    int view_ndim, contiguous;
} kind_t;

static int all_digits(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* Classify a type; returns 0 and fills `k`, CS_ERR_VALUE with `err` set, or CS_ERR_NOMEM. */
static int classify(const tok_t *t, size_t n, const toks_t *structs, kind_t *k, sbuf_t *err)
{
    memset(k, 0, sizeof(*k));
    /* Array views: Name<...> */
    if (n >= 4 && t[0].kind == TK_IDENT && is_punct(&t[1], "<") && is_punct(&t[n - 1], ">")) {
        const char *name = t[0].p;
        size_t nl = t[0].len;
        int contiguous = nl > 0 && name[0] == 'C';
        const char *base = contiguous ? name + 1 : name;
        size_t bl = contiguous ? nl - 1 : nl;
        const tok_t *elem = &t[2];
        size_t elem_n = n - 3;
        long ndim = -1;
        int is_view = 0;
        if (bl == 9 && memcmp(base, "ArrayView", 9) == 0) {
            range_t *parts = NULL;
            long np = split_top(t, 2, n - 1, &parts);
            if (np < 0)
                return CS_ERR_NOMEM;
            if (np == 2 && parts[1].stop - parts[1].start == 1 && t[parts[1].start].kind == TK_NUMBER &&
                all_digits(t[parts[1].start].p, t[parts[1].start].len) && t[parts[1].start].len <= 3) {
                const tok_t *d = &t[parts[1].start];
                ndim = 0;
                for (size_t i = 0; i < d->len; i++)
                    ndim = ndim * 10 + (d->p[i] - '0');
                elem = &t[parts[0].start];
                elem_n = parts[0].stop - parts[0].start;
                is_view = 1;
            }
            CS_FREE(parts);
        }
        else if (bl >= 7 && memcmp(base, "Array", 5) == 0 && base[bl - 1] == 'D') {
            const char *digits = base + 5;
            size_t dl = bl - 6;
            if (all_digits(digits, dl) && dl <= 2 && digits[0] != '0') {
                ndim = 0;
                for (size_t i = 0; i < dl; i++)
                    ndim = ndim * 10 + (digits[i] - '0');
                is_view = 1;
            }
        }
        if (is_view) {
            if (ndim < 1 || ndim > MAX_VIEW_NDIM) {
                char m[96];
                (void)snprintf(m, sizeof(m), "array views have 1 to %d dimensions, not %ld", MAX_VIEW_NDIM, ndim);
                sb_puts(err, m);
                return CS_ERR_VALUE;
            }
            tok_t clean[64];
            size_t m = 0;
            int too_long = 0;
            for (size_t i = 0; i < elem_n; i++) {
                if (in_list(&elem[i], QUALIFIERS))
                    continue;
                if (m == 64) {
                    too_long = 1;
                    break;
                }
                clean[m++] = elem[i];
            }
            scalar_t sc;
            int r = too_long ? 0 : scalar_type(clean, m, &sc);
            if (r < 0)
                return CS_ERR_NOMEM;
            if (r == 0 || sc.dtype[0] == '\0') {
                sb_puts(err, "unsupported array view element type '");
                if (too_long)
                    text_of(elem, elem_n, err);
                else
                    text_of(clean, m, err);
                sb_puts(err, "'");
                return CS_ERR_VALUE;
            }
            (void)snprintf(k->ctype, CTYPE_CAP, "%s%ldD<%s>", contiguous ? "CArray" : "Array", ndim, sc.ctype);
            k->dtype = sc.dtype;
            k->view_ndim = (int)ndim;
            k->contiguous = contiguous;
            return 0;
        }
    }
    scalar_t sc;
    int r = scalar_type(t, n, &sc);
    if (r < 0)
        return CS_ERR_NOMEM;
    if (r == 1) {
        (void)snprintf(k->ctype, CTYPE_CAP, "%s", sc.ctype); /* a known short name: never truncated */
        k->dtype = sc.dtype;
        return 0;
    }
    if (n == 1 && t[0].kind == TK_IDENT) {
        for (size_t i = 0; i < structs->n; i++) {
            if (tok_same(&t[0], &structs->v[i])) {
                size_t l = t[0].len < CTYPE_CAP - 1 ? t[0].len : CTYPE_CAP - 1;
                memcpy(k->ctype, t[0].p, l);
                k->ctype[l] = '\0';
                k->dtype = "";
                k->struct_name = &structs->v[i];
                return 0;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (is_punct(&t[i], "(")) {
            sb_puts(err, "'");
            text_of(t, n, err);
            sb_puts(err, "' looks like a macro or function type");
            return CS_ERR_VALUE;
        }
    }
    sb_puts(err, "unknown type '");
    text_of(t, n, err);
    sb_puts(err, "' (not a scalar, array view or declared struct)");
    return CS_ERR_VALUE;
}

/* ---------------------------------------------------------------- parameters */

typedef struct {
    tok_t name; /* points into the source or a template argument; len 0 when unnamed */
    kind_t kind;
    int pointer;
} param_t;

typedef struct {
    const tok_t *tparam_names; /* one per template parameter; kind -1 when unnamed */
    size_t n_tparams;
    toks_t *targs; /* replacement tokens per template parameter */
} subst_t;

static void unsupported(sbuf_t *err, const tok_t *t, size_t n, const char *why)
{
    sb_puts(err, "'");
    text_of(t, n, err);
    sb_puts(err, "' cannot be checked");
    if (why != NULL) {
        sb_puts(err, " (");
        sb_puts(err, why);
        sb_puts(err, ")");
    }
}

static int parse_param(const tok_t *t0, size_t n0, const toks_t *structs, const subst_t *sub, param_t *out,
                       sbuf_t *err)
{
    for (size_t j = 0; j < n0; j++) {
        if (is_punct(&t0[j], "=")) {
            n0 = j;
            break;
        }
    }
    toks_t ex = {0};
    toks_t ty = {0};
    int status = CS_ERR_NOMEM;
    for (size_t j = 0; j < n0; j++) {
        int replaced = 0;
        if (t0[j].kind == TK_IDENT) {
            for (size_t m = 0; m < sub->n_tparams; m++) {
                if (sub->tparam_names[m].kind == TK_IDENT && tok_same(&t0[j], &sub->tparam_names[m])) {
                    for (size_t q = 0; q < sub->targs[m].n; q++) {
                        const tok_t *r = &sub->targs[m].v[q];
                        if (toks_push(&ex, r->kind, r->p, r->len) < 0)
                            goto done;
                    }
                    replaced = 1;
                    break;
                }
            }
        }
        if (!replaced && toks_push(&ex, t0[j].kind, t0[j].p, t0[j].len) < 0)
            goto done;
    }
    const tok_t *t = ex.v;
    size_t n = ex.n;
    int pointer = 0;
    long depth = 0;
    const tok_t *name = NULL;
    status = CS_ERR_VALUE;
    size_t j = 0;
    while (j < n) {
        const tok_t *c = &t[j];
        if (c->kind == TK_PUNCT) {
            if (is_punct(c, "<")) {
                depth++;
                if (toks_push(&ty, c->kind, c->p, c->len) < 0)
                    goto nomem;
            }
            else if (is_punct(c, ">")) {
                depth--;
                if (toks_push(&ty, c->kind, c->p, c->len) < 0)
                    goto nomem;
            }
            else if (depth > 0) {
                static const char *const bad[] = {"(", ")", "*", "&", "&&", "[", "]", "...", ";", "{", "}", NULL};
                for (int b = 0; bad[b]; b++) {
                    if (is_punct(c, bad[b])) {
                        unsupported(err, t, n, NULL);
                        goto done;
                    }
                }
                if (toks_push(&ty, c->kind, c->p, c->len) < 0)
                    goto nomem;
            }
            else if (is_punct(c, "*")) {
                if (name != NULL) {
                    sb_puts(err, "a '*' after the parameter name");
                    goto done;
                }
                pointer++;
            }
            else if (is_punct(c, "&") || is_punct(c, "&&")) {
                sb_puts(err, "reference parameters cannot be checked");
                goto done;
            }
            else if (is_punct(c, "[")) {
                size_t close = matching(t, n, j, "[", "]");
                if (close >= n || name == NULL) {
                    sb_puts(err, "malformed array parameter");
                    goto done;
                }
                pointer++;
                j = close + 1;
                continue;
            }
            else if (is_punct(c, "::")) {
                if (toks_push(&ty, c->kind, c->p, c->len) < 0)
                    goto nomem;
            }
            else if (is_punct(c, "...")) {
                sb_puts(err, "variadic parameters cannot be checked");
                goto done;
            }
            else {
                unsupported(err, t, n, "macro or unsupported syntax");
                goto done;
            }
        }
        else if (c->kind == TK_IDENT) {
            if (depth > 0) {
                if (toks_push(&ty, c->kind, c->p, c->len) < 0)
                    goto nomem;
            }
            else if (in_list(c, QUALIFIERS)) {
                /* ignored */
            }
            else if (name != NULL) {
                unsupported(err, t, n, "macro or unsupported syntax");
                goto done;
            }
            else if (ty.n > 0 && !in_list(c, BUILTIN) && !is_punct(&ty.v[ty.n - 1], "::") &&
                     (pointer > 0 || is_punct(&ty.v[ty.n - 1], ">") || ty.v[ty.n - 1].kind == TK_IDENT)) {
                name = c;
            }
            else if (pointer > 0) {
                unsupported(err, t, n, "type after '*'");
                goto done;
            }
            else if (toks_push(&ty, c->kind, c->p, c->len) < 0) {
                goto nomem;
            }
        }
        else {
            if (depth > 0) {
                if (toks_push(&ty, c->kind, c->p, c->len) < 0)
                    goto nomem;
            }
            else {
                unsupported(err, t, n, "macro or unsupported syntax");
                goto done;
            }
        }
        j++;
    }
    if (depth != 0) {
        sb_puts(err, "unbalanced '<' '>'");
        goto done;
    }
    if (ty.n == 0) {
        sb_puts(err, "no type");
        goto done;
    }
    int r = classify(ty.v, ty.n, structs, &out->kind, err);
    if (r != 0) {
        status = r;
        goto done;
    }
    if (pointer > 1) {
        sb_puts(err, "pointer-to-pointer parameters cannot be checked");
        goto done;
    }
    /* A struct by pointer is an array of that struct (a structured array of its dtype). */
    if (pointer && out->kind.view_ndim) {
        sb_puts(err, "array views are passed by value, not by pointer");
        goto done;
    }
    if (out->kind.dtype != NULL && out->kind.dtype[0] == '\0' && out->kind.struct_name == NULL && pointer != 1) {
        sb_puts(err, "'void' is only valid as 'void*'");
        goto done;
    }
    /* Copy the token itself: its text lives in the source or a template argument, both alive
     * until the caller returns, while `ex` is freed below. */
    if (name != NULL)
        out->name = *name;
    else
        out->name.len = 0;
    out->pointer = pointer;
    if (out->kind.dtype != NULL && out->kind.dtype[0] == '\0')
        out->kind.dtype = NULL;
    status = 0;
    goto done;
nomem:
    status = CS_ERR_NOMEM;
done:
    toks_free(&ex);
    toks_free(&ty);
    return status;
}

#endif /* CUNUMPY__CORE_CUDASIG_PARSE_H */
