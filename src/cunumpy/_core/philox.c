/* Philox4x32-10 counter-based random numbers on the host (API.md section 8.3). */
#include "common.h"

#include "buffer_args.h"
#include "philox_kernels.h"
#include "cutovers.h"
#include "thread_pool.h"

/* Scalar broadcast: an input of one element is read with step 0, else it needs n. */
static int input_step(const Py_buffer *v, Py_ssize_t n, const char *name, size_t *step)
{
    Py_ssize_t count = cn_buffer_count(v);
    if (count == 1) {
        *step = 0;
        return 0;
    }
    if (count != n) {
        PyErr_Format(PyExc_ValueError, "'%s' must have 1 or %zd elements, got %zd", name, n, count);
        return -1;
    }
    *step = 1;
    return 0;
}

typedef struct {
    size_t n;
    const uint32_t *counters, *key0, *key1;
    size_t s0, s1;
    uint32_t *out;
} philox_raw_job;

static void philox_raw_chunk(void *ctx, size_t chunk)
{
    const philox_raw_job *j = ctx;
    size_t a = chunk * CN_ELEMENT_CHUNK;
    size_t end = j->n - a < CN_ELEMENT_CHUNK ? j->n : a + CN_ELEMENT_CHUNK;
    for (size_t i = a; i < end; i++) {
        const uint32_t *c = j->counters + 4 * i;
        cn_u32x4 x = {{c[0], c[1], c[2], c[3]}};
        cn_u32x4 y = cn_philox4x32_10(x, j->key0[i * j->s0], j->key1[i * j->s1]);
        memcpy(j->out + 4 * i, y.v, sizeof y.v);
    }
}

PyDoc_STRVAR(philox4x32_10_into_doc,
             "philox4x32_10_into(counters, key0, key1, out)\n--\n\n"
             "Philox4x32-10 of n counters (C-contiguous uint32, 4n words) under keys of 1 or n\n"
             "uint32 words each, written to out (uint32, 4n words).");

static PyObject *philox4x32_10_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return cn_raise(CN_ERR_TYPE, "philox4x32_10_into() takes 4 arguments (%zd given)", nargs);
    Py_buffer c, k0, k1, o;
    if (cn_get_buffer(args[0], &c, 0, -1, "counters") < 0)
        return NULL;
    if (cn_get_buffer(args[1], &k0, 0, -1, "key0") < 0)
        goto fail_c;
    if (cn_get_buffer(args[2], &k1, 0, -1, "key1") < 0)
        goto fail_k0;
    if (cn_get_buffer(args[3], &o, 1, -1, "out") < 0)
        goto fail_k1;
    Py_ssize_t words = cn_buffer_count(&c);
    size_t s0, s1;
    if (cn_require_contig(&c, CN_KIND_UINT, 4, -1, "counters") < 0 || words % 4 != 0 ||
        cn_require_contig(&k0, CN_KIND_UINT, 4, -1, "key0") < 0 ||
        cn_require_contig(&k1, CN_KIND_UINT, 4, -1, "key1") < 0 ||
        cn_require_contig(&o, CN_KIND_UINT, 4, words, "out") < 0 ||
        input_step(&k0, words / 4, "key0", &s0) < 0 || input_step(&k1, words / 4, "key1", &s1) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "'counters' must hold a multiple of 4 words");
        goto fail;
    }
    {
        const uint32_t *cw = c.buf, *kw0 = k0.buf, *kw1 = k1.buf;
        uint32_t *ow = o.buf;
        size_t n = (size_t)words / 4;
        philox_raw_job job = {n, cw, kw0, kw1, s0, s1, ow};
        if (cn_pool_prepare() < 0)
            goto fail;
        CN_BEGIN_NOGIL
        cn_parallel_for_n(CN_CHUNKS(n, CN_ELEMENT_CHUNK), philox_raw_chunk, &job, n, CN_PHILOX_CUTOVER);
        CN_END_NOGIL
    }
    PyBuffer_Release(&o);
    PyBuffer_Release(&k1);
    PyBuffer_Release(&k0);
    PyBuffer_Release(&c);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&o);
fail_k1:
    PyBuffer_Release(&k1);
fail_k0:
    PyBuffer_Release(&k0);
fail_c:
    PyBuffer_Release(&c);
    return NULL;
}

typedef struct {
    int kind;
    size_t n;
    const uint64_t *seed, *stream, *counter;
    size_t seed_step, stream_step, counter_step;
    double *out0, *out1;
} philox_fill_job;

static void philox_fill_chunk(void *ctx, size_t chunk)
{
    const philox_fill_job *j = ctx;
    size_t a = chunk * CN_ELEMENT_CHUNK;
    size_t len = j->n - a < CN_ELEMENT_CHUNK ? j->n - a : CN_ELEMENT_CHUNK;
    /* AVX2 (four blocks per instruction) is picked inside when the processor has it. */
    cn_philox_fill(j->kind, len, j->seed + a * j->seed_step, j->seed_step,
                   j->stream + a * j->stream_step, j->stream_step,
                   j->counter + a * j->counter_step, j->counter_step, j->out0 + a,
                   j->out1 != NULL ? j->out1 + a : NULL);
}

/* Every element is independent: fixed chunks on the pool. */
static void philox_fill_loop(int kind, size_t n, const uint64_t *seed, size_t seed_step,
                             const uint64_t *stream, size_t stream_step, const uint64_t *counter,
                             size_t counter_step, double *out0, double *out1)
{
    philox_fill_job job = {kind,      n,           seed,         stream, counter,
                           seed_step, stream_step, counter_step, out0,   out1};
    cn_parallel_for_n(CN_CHUNKS(n, CN_ELEMENT_CHUNK), philox_fill_chunk, &job, n, CN_PHILOX_CUTOVER);
}

PyDoc_STRVAR(philox_fill_doc,
             "philox_fill(kind, seed, stream, counter, out0, out1=None)\n--\n\n"
             "kind 0 uniform, 1 uniform2, 2 normal, 3 normal2. seed/stream/counter: C-contiguous\n"
             "uint64 with 1 or n elements; out0/out1: C-contiguous float64 with n elements.");

static PyObject *philox_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5 || nargs > 6)
        return cn_raise(CN_ERR_TYPE, "philox_fill() takes 5 or 6 arguments (%zd given)", nargs);
    long kind = PyLong_AsLong(args[0]);
    if (kind == -1 && PyErr_Occurred())
        return NULL;
    if (kind < 0 || kind > 3)
        return cn_raise(CN_ERR_VALUE, "philox_fill(): 'kind' must be 0..3, got %ld", kind);
    int two = kind == CN_RNG_UNIFORM2 || kind == CN_RNG_NORMAL2;
    if (two != (nargs == 6 && args[5] != Py_None))
        return cn_raise(CN_ERR_TYPE, "philox_fill(): 'out1' is needed exactly for kinds 1 and 3");
    Py_buffer in[3], o0, o1;
    static const char *names[3] = {"seed", "stream", "counter"};
    int got = 0;
    for (; got < 3; got++) {
        if (cn_get_buffer(args[1 + got], &in[got], 0, -1, names[got]) < 0)
            goto fail_in;
    }
    if (cn_get_buffer(args[4], &o0, 1, -1, "out0") < 0)
        goto fail_in;
    if (two && cn_get_buffer(args[5], &o1, 1, -1, "out1") < 0)
        goto fail_o0;
    {
        Py_ssize_t n = cn_buffer_count(&o0);
        size_t step[3];
        if (cn_require_contig(&o0, CN_KIND_FLOAT, 8, -1, "out0") < 0 ||
            (two && cn_require_contig(&o1, CN_KIND_FLOAT, 8, n, "out1") < 0))
            goto fail;
        for (int i = 0; i < 3; i++) {
            if (cn_require_contig(&in[i], CN_KIND_UINT, 8, -1, names[i]) < 0 ||
                (n > 0 && input_step(&in[i], n, names[i], &step[i]) < 0))
                goto fail;
        }
        if (n > 0) {
            double *out1 = two ? o1.buf : NULL;
            if (cn_pool_prepare() < 0)
                goto fail;
            CN_BEGIN_NOGIL
            philox_fill_loop((int)kind, (size_t)n, in[0].buf, step[0], in[1].buf, step[1],
                             in[2].buf, step[2], o0.buf, out1);
            CN_END_NOGIL
        }
    }
    if (two)
        PyBuffer_Release(&o1);
    PyBuffer_Release(&o0);
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&in[i]);
    Py_RETURN_NONE;
fail:
    if (two)
        PyBuffer_Release(&o1);
fail_o0:
    PyBuffer_Release(&o0);
fail_in:
    while (got-- > 0)
        PyBuffer_Release(&in[got]);
    return NULL;
}

static PyMethodDef philox_methods[] = {
    {"philox4x32_10_into", (PyCFunction)(void (*)(void))philox4x32_10_into, METH_FASTCALL,
     philox4x32_10_into_doc},
    {"philox_fill", (PyCFunction)(void (*)(void))philox_fill, METH_FASTCALL, philox_fill_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_philox(PyObject *module)
{
    return PyModule_AddFunctions(module, philox_methods);
}
