/* Byte extents of host arrays: the bounds test with which the Python wrappers of the host
 * algorithms skip their exact (and per pair costly) overlap checks when no two arrays can
 * share memory. It only reads the arrays' C structs (see cn_read_ndarray in pack.h) and never
 * writes or dereferences their data. */
#include "common.h"

#include "pack.h"

/* Arrays compared without a heap allocation; more are rare (a call with many payloads). */
#define CN_EXTENTS_ON_STACK 16

static PyObject *itemsize_name; /* interned "itemsize" */

/* First and last byte address that `obj` can touch, read from its C struct: 1 when `obj` is
 * exactly numpy.ndarray (with a verified layout) and holds at least one byte, 0 when it is
 * not, is empty, or its extent does not fit the address arithmetic (the caller must then
 * decide another way). -1 with an exception only when its itemsize cannot be read. */
static int byte_extent(PyObject *obj, uintptr_t *first, uintptr_t *last)
{
    cn_ndarray_t a;
    if (!cn_read_ndarray(obj, &a))
        return 0;
    Py_ssize_t low = 0, high = 0; /* byte offsets of the lowest and highest element */
    for (int k = 0; k < a.nd; k++) {
        Py_ssize_t dim = a.dims[k], span;
        if (dim <= 0)
            return 0;
        if (__builtin_mul_overflow(dim - 1, a.strides[k], &span))
            return 0;
        if (span < 0 ? __builtin_add_overflow(low, span, &low) : __builtin_add_overflow(high, span, &high))
            return 0;
    }
    /* Held while its attribute is read: the array's reference is only borrowed. */
    PyObject *descr = Py_NewRef(a.descr);
    PyObject *size_obj = PyObject_GetAttr(descr, itemsize_name);
    Py_DECREF(descr);
    if (size_obj == NULL)
        return -1;
    Py_ssize_t itemsize = PyLong_AsSsize_t(size_obj);
    Py_DECREF(size_obj);
    if (itemsize == -1 && PyErr_Occurred())
        return -1;
    if (itemsize <= 0 || __builtin_add_overflow(high, itemsize - 1, &high))
        return 0;
    uintptr_t base = (uintptr_t)a.data;
    /* Offsets are signed; an extent that wraps around the address space is "unknown". */
    uintptr_t lo = base + (uintptr_t)low, hi = base + (uintptr_t)high;
    if ((low < 0 && lo > base) || (high > 0 && hi < base))
        return 0;
    *first = lo;
    *last = hi;
    return 1;
}

PyDoc_STRVAR(extents_disjoint_doc,
             "extents_disjoint(arrays)\n--\n\n"
             "True when every item of the tuple `arrays` is exactly a numpy.ndarray holding at least\n"
             "one byte and no two items' byte extents (lowest to highest byte an element can\n"
             "touch) intersect: then no two share memory. False when any two may, or any item is\n"
             "not such an array (the caller decides with exact tests). Reads no array data.");

static PyObject *extents_disjoint(PyObject *self, PyObject *arrays)
{
    if (!PyTuple_Check(arrays))
        return cn_raise(CN_ERR_TYPE, "extents_disjoint() takes a tuple of arrays, not %.100s",
                        Py_TYPE(arrays)->tp_name);
    Py_ssize_t count = PyTuple_GET_SIZE(arrays);
    uintptr_t stack[2 * CN_EXTENTS_ON_STACK];
    uintptr_t *ext = stack;
    if (count > CN_EXTENTS_ON_STACK) {
        ext = PyMem_Malloc(2 * (size_t)count * sizeof(uintptr_t));
        if (ext == NULL)
            return PyErr_NoMemory();
    }
    int disjoint = 1;
    for (Py_ssize_t i = 0; i < count && disjoint; i++) {
        /* The tuple holds its items: reading the itemsize runs no code that could drop them. */
        int known = byte_extent(PyTuple_GET_ITEM(arrays, i), &ext[2 * i], &ext[2 * i + 1]);
        if (known < 0) {
            disjoint = -1;
            break;
        }
        disjoint = known;
        for (Py_ssize_t j = 0; j < i && disjoint; j++) {
            if (ext[2 * i] <= ext[2 * j + 1] && ext[2 * j] <= ext[2 * i + 1])
                disjoint = 0;
        }
    }
    if (ext != stack)
        PyMem_Free(ext);
    if (disjoint < 0)
        return NULL;
    return PyBool_FromLong(disjoint);
}

static PyMethodDef extents_methods[] = {
    {"extents_disjoint", (PyCFunction)extents_disjoint, METH_O, extents_disjoint_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_extents(PyObject *module)
{
    if (itemsize_name == NULL) {
        itemsize_name = PyUnicode_InternFromString("itemsize");
        if (itemsize_name == NULL)
            return -1;
    }
    return PyModule_AddFunctions(module, extents_methods);
}
