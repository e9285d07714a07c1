/* Parallel uniform draws from NumPy bit generators (API.md section 8.2, random_streams).
 *
 * A NumPy Generator's `random()` takes one `next_double` of its bit generator per value and
 * `uniform(low, high)` computes `low + (high - low) * next_double`. For bit generators that can
 * jump ahead (PCG64, PCG64DXSM), the Python side makes one copy per chunk of the output,
 * advanced to the chunk's first draw; here each pool thread runs one copy over its chunk.
 * The values are the sequential draw's, bit for bit, for any number of threads and chunks.
 *
 * Each bit generator is reached through NumPy's C interface for random numbers: its capsule
 * named "BitGenerator" holds a `bitgen_t` (numpy/random/bitgen.h), whose layout is part of
 * NumPy's documented C API. */
#include "common.h"

#include "buffer_args.h"
#include "thread_pool.h"

typedef struct {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} cn_numpy_bitgen;

typedef struct {
    cn_numpy_bitgen **gens;
    size_t n, chunk;
    double low, range;
    int plain; /* random(): the draws as they are; uniform(): low + range * draw */
    double *out;
} bitgen_job;

static void bitgen_chunk(void *ctx, size_t c)
{
    const bitgen_job *j = ctx;
    cn_numpy_bitgen *g = j->gens[c];
    size_t a = c * j->chunk, end = j->n - a < j->chunk ? j->n : a + j->chunk;
    if (j->plain) {
        for (size_t i = a; i < end; i++)
            j->out[i] = g->next_double(g->state);
    } else {
        /* Two roundings, like NumPy's random_uniform (the build has -ffp-contract=off). */
        for (size_t i = a; i < end; i++)
            j->out[i] = j->low + j->range * g->next_double(g->state);
    }
}

PyDoc_STRVAR(bitgen_fill_doc,
             "bitgen_fill(bit_generators, chunk, out, low, range, plain)\n--\n\n"
             "Fill out (C-contiguous float64, n values) with chunk values per NumPy bit\n"
             "generator (a tuple of k, (k - 1) * chunk < n <= k * chunk): next_double, or\n"
             "low + range * next_double when plain is false. The bit generators must not be\n"
             "used by anything else during the call.");

static PyObject *bitgen_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6)
        return cn_raise(CN_ERR_TYPE, "bitgen_fill() takes 6 arguments (%zd given)", nargs);
    if (!PyTuple_Check(args[0]))
        return cn_raise(CN_ERR_TYPE, "'bit_generators' must be a tuple");
    Py_ssize_t k = PyTuple_GET_SIZE(args[0]);
    Py_ssize_t chunk = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (chunk == -1 && PyErr_Occurred())
        return NULL;
    double low = PyFloat_AsDouble(args[3]);
    if (low == -1.0 && PyErr_Occurred())
        return NULL;
    double range = PyFloat_AsDouble(args[4]);
    if (range == -1.0 && PyErr_Occurred())
        return NULL;
    int plain = PyObject_IsTrue(args[5]);
    if (plain < 0)
        return NULL;
    if (k < 1 || chunk < 1)
        return cn_raise(CN_ERR_VALUE, "need at least one bit generator and a positive 'chunk'");
    cn_numpy_bitgen **gens = PyMem_Calloc((size_t)k, sizeof *gens); /* NOLINT(bugprone-sizeof-expression): an array of pointers */
    if (gens == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < k; i++) {
        /* The tuple holds the bit generators, and so their states, alive during the call. */
        PyObject *cap = PyObject_GetAttrString(PyTuple_GET_ITEM(args[0], i), "capsule");
        if (cap == NULL || !PyCapsule_IsValid(cap, "BitGenerator")) {
            Py_XDECREF(cap);
            PyErr_Format(PyExc_TypeError,
                         "bit generator %zd has no NumPy 'BitGenerator' capsule", i);
            goto done;
        }
        gens[i] = PyCapsule_GetPointer(cap, "BitGenerator");
        Py_DECREF(cap);
        if (gens[i] == NULL)
            goto done;
        if (gens[i]->next_double == NULL) {
            PyErr_Format(PyExc_TypeError, "bit generator %zd has no next_double", i);
            goto done;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            if (gens[j] == gens[i] || gens[j]->state == gens[i]->state) {
                PyErr_Format(PyExc_ValueError, "bit generators %zd and %zd share one state", j, i);
                goto done;
            }
        }
    }
    Py_buffer o;
    if (cn_get_buffer(args[2], &o, 1, -1, "out") < 0)
        goto done;
    Py_ssize_t n = cn_buffer_count(&o);
    if (cn_require_contig(&o, CN_KIND_FLOAT, 8, -1, "out") < 0) {
        PyBuffer_Release(&o);
        goto done;
    }
    if (n < 1 || (n - 1) / chunk + 1 != k) {
        PyBuffer_Release(&o);
        PyErr_Format(PyExc_ValueError, "%zd bit generators of %zd draws do not cover 'out' (%zd values) exactly", k,
                     chunk, n);
        goto done;
    }
    if (cn_pool_prepare() < 0) {
        PyBuffer_Release(&o);
        goto done;
    }
    {
        bitgen_job job = {gens, (size_t)n, (size_t)chunk, low, range, plain, o.buf};
        CN_BEGIN_NOGIL
        cn_parallel_for((size_t)k, bitgen_chunk, &job);
        CN_END_NOGIL
    }
    PyBuffer_Release(&o);
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(gens);
    return result;
}

static PyMethodDef bitgen_methods[] = {
    {"bitgen_fill", (PyCFunction)(void (*)(void))bitgen_fill, METH_FASTCALL, bitgen_fill_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_bitgen(PyObject *module)
{
    return PyModule_AddFunctions(module, bitgen_methods);
}
