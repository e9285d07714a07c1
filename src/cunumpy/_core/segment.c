/* Segment sums, cell offsets and run boundaries on the host (API.md sections 9.3 to 9.5). */
#include "common.h"

#include <stdlib.h>

#include "buffer_args.h"
#include "segment_kernels.h"
#include "cutovers.h"
#include "thread_pool.h"

/* One segment sum: rows [0, n) into out (zeroed by the kernel); -1 or the first bad row. */
typedef struct {
    int is_double;
    cn_key_type kt;
    const char *keys;
    ptrdiff_t ks;
    size_t n;
    const char *vals;
    ptrdiff_t vs0, vs1;
    size_t m;
    void *out;
    int64_t nseg;
    ptrdiff_t bad;
} segment_job;

static void run_job(segment_job *j)
{
#define CN_SEGMENT_CALL(SUF, P)                                                                    \
    j->bad = cn_segment_sum_##P##_##SUF(j->keys, j->ks, j->n, j->vals, j->vs0, j->vs1, j->m,       \
                                        j->out, j->nseg)
    if (j->is_double)
        CN_KEY_DISPATCH_X(j->kt, CN_SEGMENT_CALL, d)
    else
        CN_KEY_DISPATCH_X(j->kt, CN_SEGMENT_CALL, f)
#undef CN_SEGMENT_CALL
}

/* Large sums with a small output are cut into a fixed number of parts (from n and the output
 * size only, never from the thread count), run on the pool: part 0 sums into out, every other
 * part into a private output, and the parts are added in order. One thread computes the very
 * same parts one after the other, so the bits do not depend on the threads. */
#define CN_SEGMENT_PART_MIN ((size_t)1 << 18)
#define CN_SEGMENT_MAX_PARTS 8

typedef struct {
    segment_job *parts;
} segment_parts;

static void segment_part(void *ctx, size_t p)
{
    run_job(&((segment_parts *)ctx)->parts[p]);
}

static size_t segment_part_count(const segment_job *job)
{
    size_t elems = (size_t)job->nseg * job->m;
    size_t parts = job->n / CN_SEGMENT_PART_MIN;
    if (parts > CN_SEGMENT_MAX_PARTS)
        parts = CN_SEGMENT_MAX_PARTS;
    /* Private outputs stay under a quarter of the input rows. */
    while (parts > 1 && elems * 4 * (parts - 1) > job->n)
        parts--;
    return parts;
}

/* Called without the GIL. Returns -1 when memory for the parts runs out (nothing written). */
static int run_segment_sum(segment_job *job)
{
    size_t parts = segment_part_count(job);
    if (parts < 2) {
        run_job(job);
        return 0;
    }
    size_t elems = (size_t)job->nseg * job->m;
    size_t isz = job->is_double ? sizeof(double) : sizeof(float);
    segment_job part[CN_SEGMENT_MAX_PARTS];
    char *scratch = malloc((parts - 1) * (elems ? elems : 1) * isz);
    if (scratch == NULL)
        return -1;
    size_t step = job->n / parts;
    for (size_t p = 0; p < parts; p++) {
        size_t begin = p * step, end = p + 1 == parts ? job->n : begin + step;
        part[p] = *job;
        part[p].keys += (ptrdiff_t)begin * job->ks;
        part[p].vals += (ptrdiff_t)begin * job->vs0;
        part[p].n = end - begin;
        if (p > 0)
            part[p].out = scratch + (p - 1) * elems * isz;
    }
    segment_parts ctx = {part};
    cn_parallel_for_n(parts, segment_part, &ctx, job->n, CN_SEGMENT_SUM_CUTOVER);
    for (size_t p = 1; p < parts; p++) {
        if (job->is_double) {
            double *o = job->out;
            const double *q = part[p].out;
            for (size_t e = 0; e < elems; e++)
                o[e] += q[e];
        } else {
            float *o = job->out;
            const float *q = part[p].out;
            for (size_t e = 0; e < elems; e++)
                o[e] += q[e];
        }
    }
    job->bad = -1;
    for (size_t p = 0; p < parts && job->bad < 0; p++) {
        if (part[p].bad >= 0)
            job->bad = part[p].bad + (ptrdiff_t)(p * step);
    }
    free(scratch);
    return 0;
}

static int key_type(const Py_buffer *k, const char *name, cn_key_type *t)
{
    cn_kind kind = cn_buffer_kind(k);
    int is_int = kind == CN_KIND_INT, is_uint = kind == CN_KIND_UINT;
    switch (is_int || is_uint ? k->itemsize : 0) {
    case 1: case 2: case 4: case 8: *t = cn_key_type_of((size_t)k->itemsize, is_uint); return 0;
    default:
        PyErr_Format(PyExc_TypeError, "'%s' must be 8 to 64-bit integers here (format '%s')",
                     name, k->format ? k->format : "B");
        return -1;
    }
    return 0;
}

static int read_count(PyObject *obj, const char *name, int64_t *value)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "'%s' must be >= 0, got %lld", name, v);
        return -1;
    }
    *value = (int64_t)v;
    return 0;
}

PyDoc_STRVAR(segment_check_keys_doc,
             "segment_check_keys(keys, n_segments)\n--\n\n"
             "ValueError naming the row if a key (1-D int32/int64/uint64) is >= n_segments.");

static PyObject *segment_check_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return cn_raise(CN_ERR_TYPE, "segment_check_keys() takes 2 arguments (%zd given)", nargs);
    int64_t nseg;
    cn_key_type t;
    if (read_count(args[1], "n_segments", &nseg) < 0)
        return NULL;
    Py_buffer k;
    if (cn_get_buffer(args[0], &k, 0, 1, "keys") < 0)
        return NULL;
    if (key_type(&k, "keys", &t) < 0) {
        PyBuffer_Release(&k);
        return NULL;
    }
    ptrdiff_t bad;
    CN_BEGIN_NOGIL
    bad = cn_segment_check(t, k.buf, k.strides[0], (size_t)k.shape[0], nseg);
    CN_END_NOGIL
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError,
                     "'keys' must be < n_segments = %lld; keys[%zd] is out of range",
                     (long long)nseg, bad);
        PyBuffer_Release(&k);
        return NULL;
    }
    PyBuffer_Release(&k);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(segment_sum_into_doc,
             "segment_sum_into(values, keys, out, check_first)\n--\n\n"
             "out[k] = sum of values[i] with keys[i] == k; negative keys dropped. values: float32\n"
             "or float64 (n, m), any aligned strides; keys: 1-D int32/int64/uint64 (n,); out:\n"
             "C-contiguous (n_segments, m) of the values' type, overwritten. A key >= n_segments\n"
             "raises ValueError, before out is touched when check_first is true.");

static PyObject *segment_sum_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return cn_raise(CN_ERR_TYPE, "segment_sum_into() takes 4 arguments (%zd given)", nargs);
    int check_first = PyObject_IsTrue(args[3]);
    if (check_first < 0)
        return NULL;
    Py_buffer v, k, o;
    cn_key_type kt;
    if (cn_get_buffer(args[0], &v, 0, 2, "values") < 0)
        return NULL;
    if (cn_get_buffer(args[1], &k, 0, 1, "keys") < 0)
        goto fail_v;
    if (cn_get_buffer(args[2], &o, 1, 2, "out") < 0)
        goto fail_k;
    if (key_type(&k, "keys", &kt) < 0)
        goto fail;
    Py_ssize_t n = v.shape[0], m = v.shape[1];
    int is_double = cn_buffer_kind(&v) == CN_KIND_FLOAT && v.itemsize == 8;
    int is_float = cn_buffer_kind(&v) == CN_KIND_FLOAT && v.itemsize == 4;
    if (!is_double && !is_float) {
        PyErr_SetString(PyExc_TypeError, "'values' must be float32 or float64 here");
        goto fail;
    }
    if (((uintptr_t)v.buf % (size_t)v.itemsize) != 0 || v.strides[0] % v.itemsize != 0 ||
        v.strides[1] % v.itemsize != 0) {
        PyErr_SetString(PyExc_ValueError, "'values' must be aligned");
        goto fail;
    }
    if (k.shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "'keys' must have %zd entries (one per row of values), got %zd",
                     n, k.shape[0]);
        goto fail;
    }
    if (cn_require_contig(&o, CN_KIND_FLOAT, v.itemsize, -1, "out") < 0)
        goto fail;
    if (o.shape[1] != m) {
        PyErr_Format(PyExc_ValueError, "'out' must have %zd columns, got %zd", m, o.shape[1]);
        goto fail;
    }
    {
        int64_t nseg = o.shape[0];
        ptrdiff_t bad = -1;
        int nomem = 0;
        if (cn_pool_prepare() < 0)
            goto fail;
        CN_BEGIN_NOGIL
        if (check_first)
            bad = cn_segment_check(kt, k.buf, k.strides[0], (size_t)n, nseg);
        if (bad < 0) {
            segment_job job = {is_double, kt, k.buf, k.strides[0], (size_t)n, v.buf,
                               v.strides[0], v.strides[1], (size_t)m, o.buf, nseg, -1};
            nomem = run_segment_sum(&job) < 0;
            bad = job.bad;
        }
        CN_END_NOGIL
        if (nomem) {
            PyErr_NoMemory();
            goto fail;
        }
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError,
                         "'keys' must be < n_segments = %lld; keys[%zd] is out of range",
                         (long long)nseg, bad);
            goto fail;
        }
    }
    PyBuffer_Release(&o);
    PyBuffer_Release(&k);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&o);
fail_k:
    PyBuffer_Release(&k);
fail_v:
    PyBuffer_Release(&v);
    return NULL;
}

/* Cell offsets in fixed chunks of rows (each chunk writes the starts of the cells that begin
 * in it): the same offsets for any thread count. */
#define CN_OFFSETS_CHUNK ((size_t)1 << 16)

typedef struct {
    cn_key_type t;
    const char *keys;
    ptrdiff_t ks;
    size_t n;
    int64_t n_cells;
    int64_t *off;
    ptrdiff_t *bad;
} offsets_job;

static void offsets_chunk(void *ctx, size_t c)
{
    const offsets_job *j = ctx;
    size_t a = c * CN_OFFSETS_CHUNK, b = j->n - a < CN_OFFSETS_CHUNK ? j->n : a + CN_OFFSETS_CHUNK;
    j->bad[c] = cn_cell_offsets_chunk(j->t, j->keys, j->ks, j->n, a, b, j->n_cells, j->off);
}

PyDoc_STRVAR(cell_offsets_into_doc,
             "cell_offsets_into(sorted_cells, n_cells, out)\n--\n\n"
             "Offsets (C-contiguous int64, n_cells + 1) of sorted cell ids in [0, n_cells).");

static PyObject *cell_offsets_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return cn_raise(CN_ERR_TYPE, "cell_offsets_into() takes 3 arguments (%zd given)", nargs);
    int64_t ncells;
    cn_key_type t;
    if (read_count(args[1], "n_cells", &ncells) < 0)
        return NULL;
    Py_buffer k, o;
    if (cn_get_buffer(args[0], &k, 0, 1, "sorted_cells") < 0)
        return NULL;
    if (cn_get_buffer(args[2], &o, 1, -1, "out") < 0) {
        PyBuffer_Release(&k);
        return NULL;
    }
    if (ncells >= PY_SSIZE_T_MAX) {
        PyErr_Format(PyExc_ValueError, "'n_cells' is too large, got %lld", (long long)ncells);
        goto fail;
    }
    if (key_type(&k, "sorted_cells", &t) < 0 ||
        cn_require_contig(&o, CN_KIND_INT, 8, (Py_ssize_t)ncells + 1, "out") < 0)
        goto fail;
    {
        ptrdiff_t bad;
        size_t rows = (size_t)k.shape[0];
        size_t nchunks = rows > CN_OFFSETS_CHUNK ? CN_CHUNKS(rows, CN_OFFSETS_CHUNK) : 0;
        ptrdiff_t *bads = nchunks ? PyMem_Malloc(nchunks * sizeof(ptrdiff_t)) : NULL;
        if (nchunks && bads == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        if (cn_pool_prepare() < 0) {
            PyMem_Free(bads);
            goto fail;
        }
        CN_BEGIN_NOGIL
        if (nchunks == 0) {
            bad = cn_cell_offsets(t, k.buf, k.strides[0], rows, ncells, o.buf);
        } else {
            offsets_job job = {t, k.buf, k.strides[0], rows, ncells, o.buf, bads};
            cn_parallel_for_n(nchunks, offsets_chunk, &job, rows, CN_OFFSETS_CUTOVER);
            /* The first bad row over the chunks in order: the row one pass would stop at. */
            bad = -1;
            for (size_t c = 0; c < nchunks && bad < 0; c++)
                bad = bads[c];
        }
        CN_END_NOGIL
        PyMem_Free(bads);
        if (bad >= 0) {
            int64_t key = cn_skey(t, (const char *)k.buf + bad * k.strides[0]);
            if (key < 0 || key >= ncells)
                PyErr_Format(PyExc_ValueError,
                             "'sorted_cells' must be in [0, n_cells = %lld); sorted_cells[%zd] "
                             "is out of range",
                             (long long)ncells, bad);
            else
                PyErr_Format(PyExc_ValueError,
                             "'sorted_cells' must be sorted (non-decreasing); sorted_cells[%zd] < "
                             "sorted_cells[%zd]",
                             bad, bad - 1);
            goto fail;
        }
    }
    PyBuffer_Release(&o);
    PyBuffer_Release(&k);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&o);
    PyBuffer_Release(&k);
    return NULL;
}

/* Runs in fixed chunks of rows (from the size only): a first call counts the runs of every
 * chunk, a second writes each chunk's runs from the sum of the counts before it. */
#define CN_RUNS_CHUNK ((size_t)1 << 16)

typedef struct {
    int is_unsigned;
    size_t isz;
    const char *keys;
    ptrdiff_t ks;
    size_t n;
    char *unique;
    int64_t *starts, *stops;
    const int64_t *base;   /* fill: first run index of each chunk */
    int64_t *count;        /* count: runs per chunk (or -(1 + row)); fill: runs written */
} runs_job;

static void runs_chunk(void *ctx, size_t c)
{
    const runs_job *j = ctx;
    size_t a = c * CN_RUNS_CHUNK, b = j->n - a < CN_RUNS_CHUNK ? j->n : a + CN_RUNS_CHUNK;
    if (j->unique == NULL) {
        j->count[c] = cn_segment_runs_rows(j->is_unsigned, j->isz, j->keys, j->ks, j->n, a, b,
                                           NULL, NULL, NULL, 0, 0);
        return;
    }
    size_t base = (size_t)j->base[c], capacity = (size_t)(j->base[c + 1] - j->base[c]);
    ptrdiff_t got = cn_segment_runs_rows(j->is_unsigned, j->isz, j->keys, j->ks, j->n, a, b,
                                         j->unique, j->starts, j->stops, base, capacity);
    /* Fewer runs than counted would leave entries unwritten: as wrong as more. */
    j->count[c] = got == (ptrdiff_t)capacity ? 1 : 0;
}

static size_t runs_chunks(size_t n)
{
    return n == 0 ? 1 : CN_CHUNKS(n, CN_RUNS_CHUNK);
}

PyDoc_STRVAR(segment_runs_doc,
             "segment_runs(sorted_keys, unique=None, starts=None, stops=None, chunk_runs=None)\n--\n\n"
             "Number of runs of 1-D sorted integer keys (8 to 64-bit, signed or unsigned);\n"
             "with the C-contiguous outputs (unique of the keys' type, int64 starts/stops,\n"
             "one entry per run) also fill them. ValueError if the keys are not sorted.\n"
             "chunk_runs (int64, one entry per SEGMENT_RUNS_CHUNK rows, at least one): a count\n"
             "stores the runs of every chunk there and a fill takes them from there instead of\n"
             "counting again; segment_runs(keys, chunk_runs) counts.");

static PyObject *segment_runs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 5 || nargs == 3)
        return cn_raise(CN_ERR_TYPE, "segment_runs() takes 1, 2, 4 or 5 arguments (%zd given)",
                        nargs);
    int fill = nargs >= 4;
    PyObject *chunk_arg = nargs == 2 ? args[1] : nargs == 5 ? args[4] : Py_None;
    Py_buffer k, u, s, e, cr;
    int have_u = 0, have_s = 0, have_e = 0, have_cr = 0;
    int64_t *counts = NULL, *bases = NULL;
    PyObject *result = NULL;
    if (cn_get_buffer(args[0], &k, 0, 1, "sorted_keys") < 0)
        return NULL;
    cn_kind kind = cn_buffer_kind(&k);
    if ((kind != CN_KIND_INT && kind != CN_KIND_UINT) ||
        (k.itemsize != 1 && k.itemsize != 2 && k.itemsize != 4 && k.itemsize != 8)) {
        cn_raise(CN_ERR_TYPE, "'sorted_keys' must be 8 to 64-bit integers here");
        goto done;
    }
    if (fill) {
        if (cn_get_buffer(args[1], &u, 1, 1, "unique") < 0)
            goto done;
        have_u = 1;
        if (cn_get_buffer(args[2], &s, 1, 1, "starts") < 0)
            goto done;
        have_s = 1;
        if (cn_get_buffer(args[3], &e, 1, 1, "stops") < 0)
            goto done;
        have_e = 1;
    }
    size_t n = (size_t)k.shape[0], nch = runs_chunks(n);
    if (chunk_arg != Py_None) {
        if (cn_get_buffer(chunk_arg, &cr, 1, 1, "chunk_runs") < 0)
            goto done;
        have_cr = 1;
        if (cn_require_contig(&cr, CN_KIND_INT, 8, (Py_ssize_t)nch, "chunk_runs") < 0)
            goto done;
    }
    /* Private copies: the caller's chunk_runs may change under us (and a fill validates it). */
    counts = PyMem_Malloc(nch * sizeof(int64_t));
    bases = PyMem_Malloc((nch + 1) * sizeof(int64_t));
    if (counts == NULL || bases == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int is_unsigned = kind == CN_KIND_UINT;
    size_t isz = (size_t)k.itemsize;
    runs_job job = {is_unsigned, isz, k.buf, k.strides[0], n, NULL, NULL, NULL, bases, counts};
    ptrdiff_t runs = 0, bad = -1;
    if (cn_pool_prepare() < 0)
        goto done;
    if (!fill || !have_cr) {
        CN_BEGIN_NOGIL
        cn_parallel_for_n(nch, runs_chunk, &job, n, CN_RUNS_CUTOVER);
        CN_END_NOGIL
        /* The first unsorted row over the chunks in order: the row one pass would stop at. */
        for (size_t c = 0; c < nch && bad < 0; c++) {
            if (counts[c] < 0)
                bad = (ptrdiff_t)(-counts[c] - 1);
            else
                runs += (ptrdiff_t)counts[c];
        }
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError,
                         "'sorted_keys' must be sorted (non-decreasing); sorted_keys[%zd] < "
                         "sorted_keys[%zd]",
                         bad, bad - 1);
            goto done;
        }
        if (have_cr)
            memcpy(cr.buf, counts, nch * sizeof(int64_t));
    } else {
        memcpy(counts, cr.buf, nch * sizeof(int64_t));
        for (size_t c = 0; c < nch; c++) {
            size_t rows = c + 1 < nch ? CN_RUNS_CHUNK : n - c * CN_RUNS_CHUNK;
            if (counts[c] < 0 || (uint64_t)counts[c] > (uint64_t)rows) {
                PyErr_Format(PyExc_ValueError,
                             "'chunk_runs' must hold the run counts of a count call; "
                             "chunk_runs[%zu] = %lld",
                             c, (long long)counts[c]);
                goto done;
            }
            runs += (ptrdiff_t)counts[c];
        }
    }
    if (!fill) {
        result = PyLong_FromSsize_t(runs);
        goto done;
    }
    if (cn_require_contig(&u, kind, k.itemsize, runs, "unique") < 0 ||
        cn_require_contig(&s, CN_KIND_INT, 8, runs, "starts") < 0 ||
        cn_require_contig(&e, CN_KIND_INT, 8, runs, "stops") < 0)
        goto done;
    bases[0] = 0;
    for (size_t c = 0; c < nch; c++)
        bases[c + 1] = bases[c] + counts[c];
    job.unique = u.buf;
    job.starts = s.buf;
    job.stops = e.buf;
    int consistent = 1;
    CN_BEGIN_NOGIL
    if (n > 0)
        cn_parallel_for_n(nch, runs_chunk, &job, n, CN_RUNS_CUTOVER);
    for (size_t c = 0; c < nch && n > 0; c++)
        consistent &= counts[c] == 1;
    CN_END_NOGIL
    /* The keys are read twice with the GIL released: a second read that disagrees with the
     * first (another thread wrote them) is an error, never a longer write. */
    if (!consistent) {
        PyErr_SetString(PyExc_ValueError,
                        "'sorted_keys' changed while being read (another thread wrote "
                        "them); the runs are not consistent");
        goto done;
    }
    result = PyLong_FromSsize_t(runs);
done:
    PyMem_Free(counts);
    PyMem_Free(bases);
    if (have_cr)
        PyBuffer_Release(&cr);
    if (have_e)
        PyBuffer_Release(&e);
    if (have_s)
        PyBuffer_Release(&s);
    if (have_u)
        PyBuffer_Release(&u);
    PyBuffer_Release(&k);
    return result;
}

static PyMethodDef segment_methods[] = {
    {"segment_check_keys", (PyCFunction)(void (*)(void))segment_check_keys, METH_FASTCALL,
     segment_check_keys_doc},
    {"segment_sum_into", (PyCFunction)(void (*)(void))segment_sum_into, METH_FASTCALL,
     segment_sum_into_doc},
    {"cell_offsets_into", (PyCFunction)(void (*)(void))cell_offsets_into, METH_FASTCALL,
     cell_offsets_into_doc},
    {"segment_runs", (PyCFunction)(void (*)(void))segment_runs, METH_FASTCALL, segment_runs_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_segment(PyObject *module)
{
    if (PyModule_AddIntConstant(module, "SEGMENT_RUNS_CHUNK", (long)CN_RUNS_CHUNK) < 0)
        return -1;
    return PyModule_AddFunctions(module, segment_methods);
}
