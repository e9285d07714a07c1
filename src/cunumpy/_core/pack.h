/* The launch packer as the rest of the core sees it (struct_*.c): a LaunchPlan whose slots sit
 * at the offsets of a C struct (no pointer table) packs struct fields with exactly the checks
 * and casts of kernel parameters, through the same checker table (pack_kinds.c). Messages
 * then name the struct and the field. Also what both read of NumPy arrays without running
 * Python code, and the chunk arrays their packed values are items of. */
#ifndef CUNUMPY__CORE_PACK_H
#define CUNUMPY__CORE_PACK_H

#include "common.h"
#include "scan.h"

/* Slot kinds of a plan (the `kind` of a spec); the rows of the checker table. */
enum { CN_K_POINTER = 0, CN_K_VOID_POINTER = 1, CN_K_VIEW = 2, CN_K_CVIEW = 3, CN_K_SCALAR = 4, CN_K_STRUCT = 5 };
#define CN_K_COUNT 6

/* What a slot of each kind takes (the checker table's flags): code outside the table asks
 * these, never the kind numbers. */
enum {
    CN_KIND_ARRAY = 1 << 0,      /* a device array: its address is packed (8 bytes) */
    CN_KIND_TYPED = 1 << 1,      /* the spec gives a dtype, and an array's must be it */
    CN_KIND_CONTIGUOUS = 1 << 2, /* the array must be C-contiguous */
    CN_KIND_SHAPE = 1 << 3,      /* a view: the shape follows the address (8 bytes per dimension) */
    CN_KIND_STRIDES = 1 << 4,    /* ... then the strides in elements (8 bytes per dimension) */
};

/* A LaunchPlan for the fields of struct `name` (specs as for launch_plan), its values at
 * `offsets` (a tuple of ints, one per spec) in a buffer of `itemsize` bytes. New reference
 * or NULL with an exception (ValueError for offsets that overlap or leave the buffer). */
CN_INTERNAL PyObject *cn_struct_plan_new(PyObject *name, PyObject *specs, PyObject *offsets, Py_ssize_t itemsize,
                                         PyObject *void_type, PyObject *generic_type);

/* Number of slots, and the CN_KIND_* flags of slot i, of a plan made by cn_struct_plan_new. */
CN_INTERNAL Py_ssize_t cn_plan_size(PyObject *plan);
CN_INTERNAL unsigned cn_plan_flags(PyObject *plan, Py_ssize_t i);

/* Check `obj` against slot i and write its value at the slot's offset in `buf` (the whole
 * struct, zeroed by the caller: only the bytes of the value are written). With `host`, a NumPy
 * host array is accepted for an array slot (its host address is stored). 0, or -1 with an
 * exception naming the struct and the field. */
CN_INTERNAL int cn_plan_pack_one(PyObject *plan, Py_ssize_t i, PyObject *obj, unsigned char *buf, int host);

/* getattr(obj, name) that tells "absent" (0, *out NULL) from an error (-1). */
static inline int cn_optional_attr(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, out);
#else
    return _PyObject_LookupAttr(obj, name, out);
#endif
}

/* ---------------------------------------------------------------- values in chunk arrays */

/* Packed values handed out to Python are items of a chunk array (numpy.empty(64, dtype)),
 * each used once: creating a structured array costs microseconds, taking an item of one does
 * not. Each value keeps its chunk alive; the chunk's memory is written through `view`. */
#define CN_VALUES_PER_CHUNK 64

typedef struct {
    PyObject *array; /* NULL until filled */
    Py_buffer view;
    Py_ssize_t next;
} cn_chunk_t;

/* 1 when the chunk has no item left: make a new array and give it to cn_chunk_fill. */
static inline int cn_chunk_full(const cn_chunk_t *c) { return c->array == NULL || c->next >= CN_VALUES_PER_CHUNK; }

/* Make `array` (a new reference, stolen) the chunk, for values of `size` bytes: 0; 1 when its
 * buffer has another length (*len, released: the caller raises its own message); -1 with an
 * exception. The array's making ran Python code, which may have filled the chunk meanwhile:
 * that array is replaced. */
CN_INTERNAL int cn_chunk_fill(cn_chunk_t *c, PyObject *array, Py_ssize_t size, Py_ssize_t *len);

/* The next item of a chunk that is not full, holding the `size` bytes at `bytes`. */
CN_INTERNAL PyObject *cn_chunk_take(cn_chunk_t *c, const unsigned char *bytes, Py_ssize_t size);

CN_INTERNAL void cn_chunk_clear(cn_chunk_t *c);

/* ---------------------------------------------------------------- NumPy arrays read in C */

/* What the C struct of a NumPy array says about its memory, read without running Python code
 * (see register_ndarray_type in pack_arrays.c). The pointers are borrowed from the array. */
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
 * (pack_arrays.c) compared what they say about probe arrays with what NumPy reports through
 * Python. */
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

/* The C struct of `obj` when it is a NumPy array or an array of the fake CuPy (then its host
 * array's): 1 with *out filled, else 0. */
static inline int cn_read_array_memory(PyObject *obj, cn_ndarray_t *out)
{
    PyObject *host = cn_fake_host_array(obj);
    return cn_read_ndarray(host != NULL ? host : obj, out);
}

#endif /* CUNUMPY__CORE_PACK_H */
