/* In-place compaction by a mask on the host (API.md section 9.6). */
#include "common.h"

#include <stdlib.h>

#include "buffer_args.h"
#include "compact_kernels.h"
#include "cutovers.h"
#include "thread_pool.h"

/* Describe one array (compaction axis first) as lanes. Rows whose other dimensions form one
 * contiguous block are a single lane; otherwise every index of the other dimensions is a lane. */
static int describe(const Py_buffer *v, cn_compact_array *arr, ptrdiff_t **lanes_out)
{
    int nd = v->ndim;
    arr->base = v->buf;
    arr->stride = v->strides[0];
    size_t block = (size_t)v->itemsize;
    int d = nd - 1;
    /* Collapse trailing dimensions that are contiguous with the element size so far. */
    while (d >= 1 && (v->shape[d] == 1 || v->strides[d] == (Py_ssize_t)block)) {
        block *= (size_t)v->shape[d];
        d--;
    }
    arr->elsize = block;
    size_t nlanes = 1;
    for (int j = 1; j <= d; j++)
        nlanes *= (size_t)v->shape[j];
    ptrdiff_t *lanes = malloc((nlanes ? nlanes : 1) * sizeof(ptrdiff_t));
    if (lanes == NULL)
        return -1;
    /* Odometer over dimensions 1..d. */
    for (size_t l = 0; l < nlanes; l++) {
        size_t rest = l;
        ptrdiff_t off = 0;
        for (int j = d; j >= 1; j--) {
            size_t idx = rest % (size_t)v->shape[j];
            rest /= (size_t)v->shape[j];
            off += (ptrdiff_t)idx * v->strides[j];
        }
        lanes[l] = off;
    }
    arr->nlanes = block == 0 ? 0 : nlanes;
    arr->lanes = lanes;
    *lanes_out = lanes;
    return 0;
}

PyDoc_STRVAR(compact_in_place_doc,
             "compact_in_place(mask, arrays)\n--\n\n"
             "Move the positions where the 1-D mask (bool, any strides) is true to the front of\n"
             "every writable array of the tuple along its first axis, in place and in order;\n"
             "returns their count. Every array needs len(mask) entries along that axis.");

static PyObject *compact_in_place(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1]))
        return cn_raise(CN_ERR_TYPE, "compact_in_place(mask, arrays: tuple)");
    Py_ssize_t na = PyTuple_GET_SIZE(args[1]);
    Py_buffer m;
    if (cn_get_buffer(args[0], &m, 0, 1, "mask") < 0)
        return NULL;
    if (cn_buffer_kind(&m) != CN_KIND_BOOL || m.itemsize != 1) {
        PyBuffer_Release(&m);
        return cn_raise(CN_ERR_TYPE, "'mask' must be a boolean array");
    }
    Py_ssize_t n = m.shape[0];
    Py_buffer *views = PyMem_Calloc((size_t)(na ? na : 1), sizeof(Py_buffer));
    cn_compact_array *arrs = PyMem_Calloc((size_t)(na ? na : 1), sizeof(cn_compact_array));
    ptrdiff_t **lanes = PyMem_Calloc((size_t)(na ? na : 1), sizeof(ptrdiff_t *));
    Py_ssize_t got = 0;
    PyObject *result = NULL;
    if (views == NULL || arrs == NULL || lanes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < na; got++) {
        if (cn_get_buffer(PyTuple_GET_ITEM(args[1], got), &views[got], 1, -1, "arrays") < 0)
            goto done;
        if (views[got].ndim < 1 || views[got].shape[0] != n) {
            PyErr_Format(PyExc_ValueError,
                         "array %zd must have %zd entries along the compaction axis, got %zd", got,
                         n, views[got].ndim < 1 ? (Py_ssize_t)0 : views[got].shape[0]);
            got++;
            goto done;
        }
        /* Raw byte moves would duplicate object pointers and drop others without a
         * reference count (use after free): refused here whatever the caller checked. */
        if (cn_format_has_objects(views[got].format)) {
            PyErr_Format(PyExc_TypeError,
                         "array %zd holds Python objects (format '%s'); compaction moves raw "
                         "bytes and cannot move object references",
                         got, views[got].format);
            got++;
            goto done;
        }
    }
    for (Py_ssize_t a = 0; a < na; a++) {
        if (describe(&views[a], &arrs[a], &lanes[a]) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (cn_pool_prepare() < 0)
        goto done;
    {
        /* Scratch: one bit per position, two words per block; small inputs stay on the stack. */
        size_t nblocks = cn_compact_blocks((size_t)n);
        size_t words = ((size_t)n + 63) / 64;
        uint64_t bits_small[CN_COMPACT_BLOCK / 64];
        size_t offset_small[2];
        cn_compact_job job = {m.buf, m.strides[0], (size_t)n, arrs, (size_t)na,
                              bits_small, offset_small, NULL};
        if (nblocks > 1) {
            job.bits = PyMem_RawMalloc(words * sizeof(uint64_t));
            job.offset = PyMem_RawMalloc((nblocks + 1) * sizeof(size_t));
            job.done = PyMem_RawCalloc(cn_compact_move_chunks(&job) + 1, sizeof(int));
            if (job.bits == NULL || job.offset == NULL || job.done == NULL) {
                PyMem_RawFree(job.bits);
                PyMem_RawFree(job.offset);
                PyMem_RawFree(job.done);
                PyErr_NoMemory();
                goto done;
            }
        }
        size_t live;
        CN_BEGIN_NOGIL
        if (nblocks <= 1) {
            live = cn_compact_serial(&job);
        } else {
            cn_parallel_for_n(nblocks, cn_compact_scan_block, &job, (size_t)n, CN_COMPACT_CUTOVER);
            live = cn_compact_offsets(&job);
            cn_parallel_for_n(cn_compact_move_chunks(&job), cn_compact_move_chunk, &job, (size_t)n,
                              CN_COMPACT_CUTOVER);
        }
        CN_END_NOGIL
        if (nblocks > 1) {
            PyMem_RawFree(job.bits);
            PyMem_RawFree(job.offset);
            PyMem_RawFree(job.done);
        }
        result = PyLong_FromSize_t(live);
    }
done:
    if (lanes != NULL) {
        for (Py_ssize_t a = 0; a < na; a++)
            free(lanes[a]);
    }
    while (got-- > 0)
        PyBuffer_Release(&views[got]);
    PyMem_Free(lanes);
    PyMem_Free(arrs);
    PyMem_Free(views);
    PyBuffer_Release(&m);
    return result;
}

static PyMethodDef compact_methods[] = {
    {"compact_in_place", (PyCFunction)(void (*)(void))compact_in_place, METH_FASTCALL,
     compact_in_place_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_compact(PyObject *module)
{
    return PyModule_AddFunctions(module, compact_methods);
}
