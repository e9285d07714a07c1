/* Stable argsort of integer keys on the host (API.md section 9.2): LSD radix sort. */
#include "common.h"

#include <stdlib.h>

#include "buffer_args.h"
#include "cutovers.h"
#include "thread_pool.h"

/* The scratch area of large-key sorts is kept between calls: on fresh memory the page faults
 * cost about a third of a sort of a million 64-bit keys. One area, up to 256 MiB, taken by one
 * call at a time (the GIL is released, so a second concurrent call gets ordinary memory). */
#define CN_SCRATCH_KEEP_MAX ((size_t)256 << 20)
static void *scratch = NULL;
static size_t scratch_size = 0;
static int scratch_busy = 0;

static void *scratch_alloc(size_t size)
{
    if (size <= CN_SCRATCH_KEEP_MAX && !__atomic_exchange_n(&scratch_busy, 1, __ATOMIC_ACQUIRE)) {
        /* The owner replaces the area; a concurrent call only compares its own (live)
         * pointer with `scratch`, so `scratch` is never a freed address: new one first. */
        void *area = __atomic_load_n(&scratch, __ATOMIC_RELAXED);
        if (scratch_size < size) {
            void *grown = malloc(size);
            __atomic_store_n(&scratch, grown, __ATOMIC_RELEASE);
            free(area);
            area = grown;
            scratch_size = area != NULL ? size : 0;
        }
        if (area != NULL)
            return area;
        __atomic_store_n(&scratch_busy, 0, __ATOMIC_RELEASE);
    }
    return malloc(size);
}

static void scratch_free(void *ptr)
{
    if (ptr != NULL && ptr == __atomic_load_n(&scratch, __ATOMIC_ACQUIRE))
        __atomic_store_n(&scratch_busy, 0, __ATOMIC_RELEASE);
    else
        free(ptr);
}

/* Small sorts stay on the calling thread (cutovers.h). */
#define CN_SORT_PARALLEL_FOR(n, nchunks, fn, ctx) cn_parallel_for_n((nchunks), (fn), (ctx), (n), CN_SORT_CUTOVER)
#define CN_SORT_SCRATCH_ALLOC(size) scratch_alloc(size)
#define CN_SORT_SCRATCH_FREE(ptr) scratch_free(ptr)
#include "sort_kernels.h"

PyDoc_STRVAR(radix_argsort_doc,
             "radix_argsort(keys, order, sorted_keys)\n--\n\n"
             "Stable argsort of 1-D integer (8 to 64-bit) or bool keys (any strides): the order\n"
             "(C-contiguous int64) and the sorted keys (C-contiguous, the keys' type).");

static PyObject *radix_argsort(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return cn_raise(CN_ERR_TYPE, "radix_argsort() takes 3 arguments (%zd given)", nargs);
    Py_buffer k, o, s;
    if (cn_get_buffer(args[0], &k, 0, 1, "keys") < 0)
        return NULL;
    if (cn_get_buffer(args[1], &o, 1, -1, "order") < 0)
        goto fail_k;
    if (cn_get_buffer(args[2], &s, 1, -1, "sorted_keys") < 0)
        goto fail_o;
    cn_kind kind = cn_buffer_kind(&k);
    cn_key_type t;
    if (kind == CN_KIND_INT && k.itemsize == 4)
        t = CN_KEY_I32;
    else if (kind == CN_KIND_UINT && k.itemsize == 4)
        t = CN_KEY_U32;
    else if (kind == CN_KIND_INT && k.itemsize == 8)
        t = CN_KEY_I64;
    else if (kind == CN_KIND_UINT && k.itemsize == 8)
        t = CN_KEY_U64;
    else if (kind == CN_KIND_INT && k.itemsize == 1)
        t = CN_KEY_I8;
    else if ((kind == CN_KIND_UINT || kind == CN_KIND_BOOL) && k.itemsize == 1)
        t = CN_KEY_U8;
    else if (kind == CN_KIND_INT && k.itemsize == 2)
        t = CN_KEY_I16;
    else if (kind == CN_KIND_UINT && k.itemsize == 2)
        t = CN_KEY_U16;
    else {
        PyErr_SetString(PyExc_TypeError, "'keys' must be 8, 16, 32 or 64-bit integers or bool here");
        goto fail;
    }
    Py_ssize_t n = k.shape[0];
    if (cn_require_contig(&o, CN_KIND_INT, 8, n, "order") < 0 ||
        cn_require_contig(&s, kind, k.itemsize, n, "sorted_keys") < 0)
        goto fail;
    int status;
    if (cn_pool_prepare() < 0)
        goto fail;
    CN_BEGIN_NOGIL
    status = cn_radix_argsort(t, k.buf, k.strides[0], (size_t)n, o.buf, s.buf);
    CN_END_NOGIL
    if (status != CN_SORT_OK) {
        PyErr_NoMemory();
        goto fail;
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&o);
    PyBuffer_Release(&k);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&s);
fail_o:
    PyBuffer_Release(&o);
fail_k:
    PyBuffer_Release(&k);
    return NULL;
}

/* ---- gathering rows by the order (the payloads of sort_by_key), in fixed chunks of rows ---- */
typedef struct {
    const char *src;
    char *dst;
    const int64_t *order;
    size_t n, row;     /* rows, bytes per row */
    ptrdiff_t *bad;    /* per chunk: first position with an index out of range, or -1 */
} take_job;

static void take_chunk(void *ctx, size_t c)
{
    const take_job *j = ctx;
    size_t a = c * CN_ELEMENT_CHUNK, b = j->n - a < CN_ELEMENT_CHUNK ? j->n : a + CN_ELEMENT_CHUNK;
    size_t n = j->n, row = j->row;
    j->bad[c] = -1;
    /* Each index is read once and checked before use: whatever writes the order meanwhile,
     * every read stays inside src and every write inside dst. */
#define CN_TAKE_LOOP(T)                                                                            \
    for (size_t i = a; i < b; i++) {                                                               \
        uint64_t k = (uint64_t)__atomic_load_n(&j->order[i], __ATOMIC_RELAXED);                    \
        if (k >= n) {                                                                              \
            j->bad[c] = (ptrdiff_t)i;                                                              \
            return;                                                                                \
        }                                                                                          \
        T v;                                                                                       \
        memcpy(&v, j->src + k * sizeof(T), sizeof(T));                                             \
        memcpy(j->dst + i * sizeof(T), &v, sizeof(T));                                             \
    }
    switch (row) {
    case 8: CN_TAKE_LOOP(uint64_t) break;
    case 4: CN_TAKE_LOOP(uint32_t) break;
    case 2: CN_TAKE_LOOP(uint16_t) break;
    case 1: CN_TAKE_LOOP(uint8_t) break;
    default:
        for (size_t i = a; i < b; i++) {
            uint64_t k = (uint64_t)__atomic_load_n(&j->order[i], __ATOMIC_RELAXED);
            if (k >= n) {
                j->bad[c] = (ptrdiff_t)i;
                return;
            }
            memcpy(j->dst + i * row, j->src + k * row, row);
        }
    }
#undef CN_TAKE_LOOP
}

PyDoc_STRVAR(take_rows_doc,
             "take_rows(src, order, dst)\n--\n\n"
             "dst[i] = src[order[i]] along the first axis: src and dst C-contiguous with the same\n"
             "shape and element size (no Python objects), order C-contiguous int64 with one index\n"
             "in [0, len(src)) per row. ValueError naming the first bad position.");

static PyObject *take_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return cn_raise(CN_ERR_TYPE, "take_rows() takes 3 arguments (%zd given)", nargs);
    Py_buffer sv, ov, dv;
    PyObject *result = NULL;
    if (cn_get_buffer(args[0], &sv, 0, -1, "src") < 0)
        return NULL;
    if (cn_get_buffer(args[1], &ov, 0, 1, "order") < 0)
        goto fail_s;
    if (cn_get_buffer(args[2], &dv, 1, -1, "dst") < 0)
        goto fail_o;
    if (cn_format_has_objects(sv.format) || cn_format_has_objects(dv.format)) {
        PyErr_SetString(PyExc_TypeError,
                        "'src' and 'dst' must not hold Python objects (rows move as raw bytes)");
        goto done;
    }
    if (sv.ndim < 1 || dv.ndim != sv.ndim || !cn_buffer_c_contig(&sv) || !cn_buffer_c_contig(&dv)) {
        PyErr_SetString(PyExc_ValueError,
                        "'src' and 'dst' must be C-contiguous with the same number of dimensions, "
                        "at least one");
        goto done;
    }
    for (int d = 0; d < sv.ndim; d++) {
        if (sv.shape[d] != dv.shape[d]) {
            PyErr_Format(PyExc_ValueError, "'dst' must have the shape of 'src' (axis %d: %zd, not %zd)",
                         d, sv.shape[d], dv.shape[d]);
            goto done;
        }
    }
    if (sv.itemsize != dv.itemsize) {
        PyErr_SetString(PyExc_ValueError, "'dst' must have the element size of 'src'");
        goto done;
    }
    Py_ssize_t n = sv.shape[0];
    if (cn_require_contig(&ov, CN_KIND_INT, 8, n, "order") < 0)
        goto done;
    {
        size_t row = n > 0 ? (size_t)(sv.len / n) : 0;
        size_t nchunks = CN_CHUNKS((size_t)n, CN_ELEMENT_CHUNK);
        ptrdiff_t bad_one = -1, bad = -1;
        ptrdiff_t *bads = nchunks > 1 ? PyMem_Malloc(nchunks * sizeof(ptrdiff_t)) : &bad_one;
        if (bads == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        take_job job = {sv.buf, dv.buf, ov.buf, (size_t)n, row, bads};
        if (n > 0 && row > 0) {
            if (cn_pool_prepare() < 0) {
                if (bads != &bad_one)
                    PyMem_Free(bads);
                goto done;
            }
            CN_BEGIN_NOGIL
            cn_parallel_for_n(nchunks, take_chunk, &job, (size_t)n, CN_TAKE_CUTOVER);
            for (size_t c = 0; c < nchunks && bad < 0; c++)
                bad = bads[c];
            CN_END_NOGIL
        }
        if (bads != &bad_one)
            PyMem_Free(bads);
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "'order' must hold indices in [0, %zd); order[%zd] is not",
                         n, bad);
            goto done;
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&dv);
fail_o:
    PyBuffer_Release(&ov);
fail_s:
    PyBuffer_Release(&sv);
    return result;
}

static PyMethodDef sort_methods[] = {
    {"radix_argsort", (PyCFunction)(void (*)(void))radix_argsort, METH_FASTCALL, radix_argsort_doc},
    {"take_rows", (PyCFunction)(void (*)(void))take_rows, METH_FASTCALL, take_rows_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_sort(PyObject *module)
{
    return PyModule_AddFunctions(module, sort_methods);
}
