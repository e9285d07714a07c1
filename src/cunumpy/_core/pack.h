/* The launch packer's per-parameter checks, shared with struct.c: a LaunchPlan whose slots
 * sit at the offsets of a C struct (no pointer table) packs struct fields with exactly the
 * checks and casts of kernel parameters. Messages then name the struct and the field. */
#ifndef CUNUMPY__CORE_PACK_H
#define CUNUMPY__CORE_PACK_H

#include "common.h"

/* Slot kinds of a plan (the `kind` of a spec). */
enum { CN_K_POINTER = 0, CN_K_VOID_POINTER = 1, CN_K_VIEW = 2, CN_K_CVIEW = 3, CN_K_SCALAR = 4, CN_K_STRUCT = 5 };

/* A LaunchPlan for the fields of struct `name` (specs as for launch_plan), its values at
 * `offsets` (a tuple of ints, one per spec) in a buffer of `itemsize` bytes. New reference
 * or NULL with an exception (ValueError for offsets that overlap or leave the buffer). */
CN_INTERNAL PyObject *cn_struct_plan_new(PyObject *name, PyObject *specs, PyObject *offsets, Py_ssize_t itemsize,
                                         PyObject *void_type, PyObject *generic_type);

/* Number of slots, and the kind of slot i, of a plan made by cn_struct_plan_new. */
CN_INTERNAL Py_ssize_t cn_plan_size(PyObject *plan);
CN_INTERNAL int cn_plan_kind(PyObject *plan, Py_ssize_t i);

/* Check `obj` against slot i and write its value at the slot's offset in `buf` (the whole
 * struct, zeroed by the caller: only the bytes of the value are written). With `host`, a NumPy host array is accepted for an array slot (its host address is
 * stored). 0, or -1 with an exception naming the struct and the field. */
CN_INTERNAL int cn_plan_pack_one(PyObject *plan, Py_ssize_t i, PyObject *obj, unsigned char *buf, int host);

/* What the C struct of a NumPy array says about its memory, read without running Python code
 * (see register_ndarray_type in pack.c). The pointers are borrowed from the array. */
typedef struct {
    PyObject *descr; /* the dtype object */
    char *data;
    int nd;
    int flags; /* NumPy's NPY_ARRAY_* bits */
    const Py_ssize_t *dims;
    const Py_ssize_t *strides; /* bytes */
} cn_ndarray_t;

#define CN_NPY_C_CONTIGUOUS 0x0001
#define CN_NPY_WRITEABLE 0x0400

/* NumPy's ndarray object starts with these fields (PyArrayObject_fields, the same in NumPy 1.x
 * and 2.x: its C-API inline functions read them). Reading them costs no Python call, where the
 * attributes (shape, strides, data) each build objects. Used only after register_ndarray_type()
 * (pack.c) compared what they say about probe arrays with what NumPy reports through Python. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} cn_ndarray_fields;

CN_INTERNAL extern PyTypeObject *cn_ndarray_type;     /* numpy.ndarray once verified, else NULL */
CN_INTERNAL extern PyTypeObject *cn_fake_device_type; /* the fake CuPy's ndarray once registered */
CN_INTERNAL extern Py_ssize_t cn_fake_host_offset;    /* offset of its slot holding the host array */

/* 1 with *out filled when `obj` is exactly numpy.ndarray and its layout was verified, else 0. */
static inline int cn_read_ndarray(PyObject *obj, cn_ndarray_t *out)
{
    if (cn_ndarray_type == NULL || !Py_IS_TYPE(obj, cn_ndarray_type))
        return 0;
    const cn_ndarray_fields *f = (const cn_ndarray_fields *)obj;
    out->descr = f->descr;
    out->data = f->data;
    out->nd = f->nd;
    out->flags = f->flags;
    out->dims = f->dimensions;
    out->strides = f->strides;
    return 1;
}

/* The host array behind an array of the fake CuPy, exactly of the registered type (borrowed;
 * NULL for anything else, or when the slot is empty or holds something else than an ndarray). */
static inline PyObject *cn_fake_host_array(PyObject *obj)
{
    if (cn_fake_device_type == NULL || !Py_IS_TYPE(obj, cn_fake_device_type))
        return NULL;
    PyObject *host = *(PyObject **)((char *)obj + cn_fake_host_offset);
    if (host == NULL || cn_ndarray_type == NULL || !Py_IS_TYPE(host, cn_ndarray_type))
        return NULL;
    return host;
}

#endif /* CUNUMPY__CORE_PACK_H */
