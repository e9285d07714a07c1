/* Morton (Z-order) keys on the host (API.md section 9.1): BMI2 pdep where the processor has
 * a fast one (checked once at run time), magic-bit spreading otherwise. */
#include "common.h"

#include <assert.h>

#include "buffer_args.h"
#include "morton_kernels.h"
#include "cutovers.h"
#include "thread_pool.h"

/* Parallel drivers: fixed chunks of CN_ELEMENT_CHUNK elements, each element independent. */
typedef struct {
    int ndim, levels, pdep;
    size_t n;
    const double *pos;
    ptrdiff_t s0, s1;
    const double *lower, *scale;
    uint64_t *out;
    ptrdiff_t *bad; /* per chunk: first non-finite row or -1 */
} morton_keys_job;

static void morton_keys_chunk(void *ctx, size_t chunk)
{
    const morton_keys_job *j = ctx;
    size_t a = chunk * CN_ELEMENT_CHUNK;
    size_t len = j->n - a < CN_ELEMENT_CHUNK ? j->n - a : CN_ELEMENT_CHUNK;
    const double *pos = j->pos + (ptrdiff_t)a * j->s0;
    ptrdiff_t bad;
#if CN_HAVE_PDEP_BUILD
    if (j->pdep)
        bad = cn_morton_keys_pdep(j->ndim, len, pos, j->s0, j->s1, j->lower, j->scale, j->levels,
                                  j->out + a);
    else
#endif
        bad = cn_morton_keys_magic(j->ndim, len, pos, j->s0, j->s1, j->lower, j->scale,
                                   j->levels, j->out + a);
    j->bad[chunk] = bad < 0 ? -1 : bad + (ptrdiff_t)a;
}

typedef struct {
    int ndim, pdep;
    size_t n;
    const uint64_t *const *cells;
    const size_t *step;
    uint64_t *out;
} morton_encode_job;

static void morton_encode_chunk(void *ctx, size_t chunk)
{
    const morton_encode_job *j = ctx;
    size_t a = chunk * CN_ELEMENT_CHUNK;
    size_t len = j->n - a < CN_ELEMENT_CHUNK ? j->n - a : CN_ELEMENT_CHUNK;
    const uint64_t *cells[3];
    assert(j->ndim == 2 || j->ndim == 3); /* checked by the caller */
    for (int d = 0; d < j->ndim; d++)
        cells[d] = j->cells[d] + a * j->step[d];
#if CN_HAVE_PDEP_BUILD
    if (j->pdep)
        cn_morton_encode_pdep(j->ndim, len, cells, j->step, j->out + a);
    else
#endif
        cn_morton_encode_magic(j->ndim, len, cells, j->step, j->out + a);
}

typedef struct {
    int ndim, pdep;
    size_t n;
    const uint64_t *keys;
    uint64_t *const *out;
} morton_decode_job;

static void morton_decode_chunk(void *ctx, size_t chunk)
{
    const morton_decode_job *j = ctx;
    size_t a = chunk * CN_ELEMENT_CHUNK;
    size_t len = j->n - a < CN_ELEMENT_CHUNK ? j->n - a : CN_ELEMENT_CHUNK;
    uint64_t *out[3];
    assert(j->ndim == 2 || j->ndim == 3); /* checked by the caller */
    for (int d = 0; d < j->ndim; d++)
        out[d] = j->out[d] + a;
#if CN_HAVE_PDEP_BUILD
    if (j->pdep)
        cn_morton_decode_pdep(j->ndim, len, j->keys + a, out);
    else
#endif
        cn_morton_decode_magic(j->ndim, len, j->keys + a, out);
}

/* 1: pdep, 0: magic bits; -1 until first use. */
static int use_pdep = -1;

static int pdep_active(void)
{
    if (use_pdep < 0)
        use_pdep = cn_pdep_usable();
    return use_pdep;
}

PyDoc_STRVAR(morton_method_doc,
             "morton_method(name=None)\n--\n\n"
             "The bit-spreading method in use, 'pdep' or 'magic'. With name ('pdep', 'magic' or\n"
             "'auto') select it first; 'pdep' needs a processor with BMI2 (ValueError).");

static PyObject *morton_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1)
        return cn_raise(CN_ERR_TYPE, "morton_method() takes at most 1 argument (%zd given)", nargs);
    if (nargs == 1 && args[0] != Py_None) {
        const char *name = PyUnicode_Check(args[0]) ? PyUnicode_AsUTF8(args[0]) : NULL;
        if (name == NULL)
            return cn_raise(CN_ERR_TYPE, "morton_method(): 'name' must be a str");
        if (strcmp(name, "auto") == 0) {
            use_pdep = cn_pdep_usable();
        } else if (strcmp(name, "magic") == 0) {
            use_pdep = 0;
        } else if (strcmp(name, "pdep") == 0) {
#if CN_HAVE_PDEP_BUILD
            __builtin_cpu_init();
            if (!__builtin_cpu_supports("bmi2"))
                return cn_raise(CN_ERR_VALUE, "morton_method(): this processor has no BMI2 pdep");
            use_pdep = 1;
#else
            return cn_raise(CN_ERR_VALUE, "morton_method(): pdep is not available in this build");
#endif
        } else {
            return cn_raise(CN_ERR_VALUE,
                            "morton_method(): 'name' must be 'pdep', 'magic' or 'auto', got %R",
                            args[0]);
        }
    }
    return PyUnicode_FromString(pdep_active() ? "pdep" : "magic");
}

static int read_doubles(PyObject *seq, double *out, int count, const char *name)
{
    /* A tuple snapshot: an item's __float__ may change a list while it is read. */
    PyObject *fast = PySequence_Check(seq) ? PySequence_Tuple(seq) : NULL;
    if (fast == NULL) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "'%s' must be a sequence of floats", name);
        }
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != count) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "'%s' must have %d entries", name, count);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

PyDoc_STRVAR(morton_keys_into_doc,
             "morton_keys_into(positions, lower, scale, levels, out)\n--\n\n"
             "Keys of float64 positions (n, 2) or (n, 3), any strides, into a C-contiguous\n"
             "uint64 out (n,). ValueError naming the row if a position is not finite.");

static PyObject *morton_keys_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5)
        return cn_raise(CN_ERR_TYPE, "morton_keys_into() takes 5 arguments (%zd given)", nargs);
    long levels = PyLong_AsLong(args[3]);
    if (levels == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer p, o;
    if (cn_get_buffer(args[0], &p, 0, 2, "positions") < 0)
        return NULL;
    if (cn_get_buffer(args[4], &o, 1, 1, "out") < 0) {
        PyBuffer_Release(&p);
        return NULL;
    }
    int ndim = (int)p.shape[1];
    size_t n = (size_t)p.shape[0];
    double lower[3], scale[3];
    if (ndim != 2 && ndim != 3) {
        PyErr_Format(PyExc_ValueError, "'positions' must have shape (n, 2) or (n, 3), got (%zd, %d)",
                     p.shape[0], ndim);
        goto fail;
    }
    if (levels < 1 || levels > (ndim == 2 ? 32 : 21)) {
        PyErr_Format(PyExc_ValueError, "'levels' must be in [1, %d] for %d-D, got %ld",
                     ndim == 2 ? 32 : 21, ndim, levels);
        goto fail;
    }
    if (cn_buffer_kind(&p) != CN_KIND_FLOAT || p.itemsize != 8 || p.strides[0] % 8 != 0 ||
        p.strides[1] % 8 != 0 || ((uintptr_t)p.buf & 7) != 0) {
        PyErr_SetString(PyExc_TypeError, "'positions' must be aligned float64");
        goto fail;
    }
    if (cn_require_contig(&o, CN_KIND_UINT, 8, (Py_ssize_t)n, "out") < 0 ||
        read_doubles(args[1], lower, ndim, "lower") < 0 ||
        read_doubles(args[2], scale, ndim, "scale") < 0)
        goto fail;
    {
        ptrdiff_t bad;
        const double *pos = p.buf;
        ptrdiff_t s0 = p.strides[0] / 8, s1 = p.strides[1] / 8;
        size_t nchunks = CN_CHUNKS(n, CN_ELEMENT_CHUNK);
        ptrdiff_t bad_one = -1;
        ptrdiff_t *bads = nchunks > 1 ? PyMem_Calloc(nchunks, sizeof(ptrdiff_t)) : &bad_one;
        if (bads == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        morton_keys_job job = {ndim, (int)levels, pdep_active(), n, pos, s0, s1,
                               lower, scale, o.buf, bads};
        if (cn_pool_prepare() < 0) {
            if (bads != &bad_one)
                PyMem_Free(bads);
            goto fail;
        }
        CN_BEGIN_NOGIL
        cn_parallel_for_n(nchunks, morton_keys_chunk, &job, n, CN_MORTON_KEYS_CUTOVER);
        CN_END_NOGIL
        /* The first bad row over the chunks in order: the same row as one pass would find. */
        bad = -1;
        for (size_t c = 0; c < nchunks && bad < 0; c++)
            bad = bads[c];
        if (bads != &bad_one)
            PyMem_Free(bads);
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "'positions' must be finite; row %zd is not", bad);
            goto fail;
        }
    }
    PyBuffer_Release(&o);
    PyBuffer_Release(&p);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&o);
    PyBuffer_Release(&p);
    return NULL;
}

PyDoc_STRVAR(morton_encode_into_doc,
             "morton_encode_into(cells, out)\n--\n\n"
             "Interleave 2 or 3 C-contiguous uint64 cell arrays (each 1 or n elements) into a\n"
             "C-contiguous uint64 out (n,). Cells must already be in range.");

static PyObject *morton_encode_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[0]))
        return cn_raise(CN_ERR_TYPE, "morton_encode_into(cells: tuple, out)");
    Py_ssize_t ndim = PyTuple_GET_SIZE(args[0]);
    if (ndim != 2 && ndim != 3)
        return cn_raise(CN_ERR_VALUE, "morton_encode_into(): 2 or 3 cell arrays are needed");
    Py_buffer c[3], o;
    int got = 0;
    for (; got < ndim; got++) {
        if (cn_get_buffer(PyTuple_GET_ITEM(args[0], got), &c[got], 0, -1, "cells") < 0)
            goto fail_c;
    }
    if (cn_get_buffer(args[1], &o, 1, -1, "out") < 0)
        goto fail_c;
    {
        Py_ssize_t n = cn_buffer_count(&o);
        const uint64_t *cells[3];
        size_t step[3];
        if (cn_require_contig(&o, CN_KIND_UINT, 8, -1, "out") < 0)
            goto fail;
        for (int a = 0; a < ndim; a++) {
            Py_ssize_t count = cn_buffer_count(&c[a]);
            if (cn_require_contig(&c[a], CN_KIND_UINT, 8, -1, "cells") < 0)
                goto fail;
            if (count != n && count != 1) {
                PyErr_Format(PyExc_ValueError, "cell array %d has %zd elements, expected 1 or %zd",
                             a, count, n);
                goto fail;
            }
            cells[a] = c[a].buf;
            step[a] = count == n ? 1 : 0;
        }
        if (n > 0) {
            morton_encode_job job = {(int)ndim, pdep_active(), (size_t)n, cells, step, o.buf};
            if (cn_pool_prepare() < 0)
                goto fail;
            CN_BEGIN_NOGIL
            cn_parallel_for_n(CN_CHUNKS((size_t)n, CN_ELEMENT_CHUNK), morton_encode_chunk, &job,
                              (size_t)n, CN_MORTON_DECODE_CUTOVER);
            CN_END_NOGIL
        }
    }
    PyBuffer_Release(&o);
    while (got-- > 0)
        PyBuffer_Release(&c[got]);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&o);
fail_c:
    while (got-- > 0)
        PyBuffer_Release(&c[got]);
    return NULL;
}

PyDoc_STRVAR(morton_decode_into_doc,
             "morton_decode_into(keys, outs)\n--\n\n"
             "Split C-contiguous uint64 keys (n,) into 2 or 3 C-contiguous uint64 arrays (n,).");

static PyObject *morton_decode_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1]))
        return cn_raise(CN_ERR_TYPE, "morton_decode_into(keys, outs: tuple)");
    Py_ssize_t ndim = PyTuple_GET_SIZE(args[1]);
    if (ndim != 2 && ndim != 3)
        return cn_raise(CN_ERR_VALUE, "morton_decode_into(): 2 or 3 output arrays are needed");
    Py_buffer k, o[3];
    if (cn_get_buffer(args[0], &k, 0, -1, "keys") < 0)
        return NULL;
    int got = 0;
    for (; got < ndim; got++) {
        if (cn_get_buffer(PyTuple_GET_ITEM(args[1], got), &o[got], 1, -1, "outs") < 0)
            goto fail;
    }
    {
        Py_ssize_t n = cn_buffer_count(&k);
        uint64_t *outs[3];
        if (cn_require_contig(&k, CN_KIND_UINT, 8, -1, "keys") < 0)
            goto fail;
        for (int a = 0; a < ndim; a++) {
            if (cn_require_contig(&o[a], CN_KIND_UINT, 8, n, "outs") < 0)
                goto fail;
            outs[a] = o[a].buf;
        }
        morton_decode_job job = {(int)ndim, pdep_active(), (size_t)n, k.buf, outs};
        if (cn_pool_prepare() < 0)
            goto fail;
        CN_BEGIN_NOGIL
        cn_parallel_for_n(CN_CHUNKS((size_t)n, CN_ELEMENT_CHUNK), morton_decode_chunk, &job,
                          (size_t)n, CN_MORTON_DECODE_CUTOVER);
        CN_END_NOGIL
    }
    while (got-- > 0)
        PyBuffer_Release(&o[got]);
    PyBuffer_Release(&k);
    Py_RETURN_NONE;
fail:
    while (got-- > 0)
        PyBuffer_Release(&o[got]);
    PyBuffer_Release(&k);
    return NULL;
}

static PyMethodDef morton_methods[] = {
    {"morton_method", (PyCFunction)(void (*)(void))morton_method, METH_FASTCALL, morton_method_doc},
    {"morton_keys_into", (PyCFunction)(void (*)(void))morton_keys_into, METH_FASTCALL,
     morton_keys_into_doc},
    {"morton_encode_into", (PyCFunction)(void (*)(void))morton_encode_into, METH_FASTCALL,
     morton_encode_into_doc},
    {"morton_decode_into", (PyCFunction)(void (*)(void))morton_decode_into, METH_FASTCALL,
     morton_decode_into_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_morton(PyObject *module)
{
    return PyModule_AddFunctions(module, morton_methods);
}
