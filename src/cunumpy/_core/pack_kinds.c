/* The checker table of the launch packer: one row per kind of kernel parameter (a struct
 * field is packed as a parameter of its type). A row says what a spec of that kind must hold,
 * what an argument must be (its flags) and which function checks and packs it. The plan
 * (pack_plan.c) and the struct packer (struct_pack.c, struct_state.c) go through it and never
 * test kind numbers themselves; _reference/pack.py's _KINDS is its Python twin. */
#include "pack_plan.h"

#include <stdarg.h>

#define SIZES(...) (unsigned char)(__VA_ARGS__)
#define B1 (1u << 0)
#define B2 (1u << 1)
#define B4 (1u << 2)
#define B8 (1u << 3)
#define B16 (1u << 4)

/* The item sizes a scalar parameter of each S_* code may have. */
static const unsigned char scalar_sizes[] = {
    [S_BOOL] = SIZES(B1),
    [S_INT] = SIZES(B1 | B2 | B4 | B8),
    [S_UINT] = SIZES(B1 | B2 | B4 | B8),
    [S_FLOAT] = SIZES(B4 | B8),
    [S_COMPLEX] = SIZES(B8 | B16),
};

CN_INTERNAL const cn_kind_t cn_kinds[CN_K_COUNT] = {
    /* T* x: a C-contiguous device array of dtype T; its address */
    [CN_K_POINTER] = {.flags = CN_KIND_ARRAY | CN_KIND_TYPED | CN_KIND_CONTIGUOUS, .pack = cn_pack_array},
    /* void* x: a C-contiguous device array of any dtype; its address */
    [CN_K_VOID_POINTER] = {.flags = CN_KIND_ARRAY | CN_KIND_CONTIGUOUS, .pack = cn_pack_array},
    /* ArrayND<T> x: a device array of dtype T and any strides; address, shape, element strides */
    [CN_K_VIEW] = {.flags = CN_KIND_ARRAY | CN_KIND_TYPED | CN_KIND_SHAPE | CN_KIND_STRIDES, .pack = cn_pack_array},
    /* CArrayND<T> x: a C-contiguous device array of dtype T; address, shape */
    [CN_K_CVIEW] = {.flags = CN_KIND_ARRAY | CN_KIND_TYPED | CN_KIND_CONTIGUOUS | CN_KIND_SHAPE, .pack = cn_pack_array},
    /* bool, integers, floating and complex: a Python or NumPy scalar that fits, cast */
    [CN_K_SCALAR] = {.flags = CN_KIND_TYPED, .pack = cn_pack_scalar, .n_codes = S_COMPLEX + 1, .code_sizes = scalar_sizes},
    /* a struct by value: a packed value of exactly its dtype, copied */
    [CN_K_STRUCT] = {.flags = CN_KIND_TYPED, .pack = cn_pack_struct, .max_size = (Py_ssize_t)1 << 20},
};

static int size_allowed(unsigned char sizes, Py_ssize_t itemsize)
{
    for (int b = 0; b < 5; b++) {
        if (itemsize == ((Py_ssize_t)1 << b))
            return (sizes >> b) & 1;
    }
    return 0;
}

/* The checks in the order launch_plan has always made them: the first invalid field is named. */
CN_INTERNAL const char *cn_spec_error(Py_ssize_t kind, PyObject *label, PyObject *dtype, PyObject *typestr,
                                      PyObject *table, Py_ssize_t itemsize, Py_ssize_t ndim, Py_ssize_t scalar,
                                      Py_ssize_t size, Py_ssize_t align)
{
    if (kind < 0 || kind >= CN_K_COUNT)
        return "kind";
    const cn_kind_t *k = &cn_kinds[kind];
    int typed = (k->flags & CN_KIND_TYPED) != 0;
    if (!PyUnicode_Check(label))
        return "label";
    if (typed && (dtype == Py_None || !PyUnicode_Check(typestr)))
        return "dtype";
    if (!PyDict_Check(table))
        return "table";
    if ((k->flags & CN_KIND_SHAPE) && (ndim < 1 || ndim > MAX_NDIM))
        return "ndim";
    if (k->n_codes > 0 && (scalar < 0 || scalar >= k->n_codes))
        return "scalar";
    if (typed && itemsize <= 0)
        return "itemsize";
    if (align < 1 || align > 16 || (align & (align - 1)) != 0)
        return "align";
    if (k->n_codes > 0 && !size_allowed(k->code_sizes[scalar], itemsize))
        return "itemsize";
    if (size != cn_value_size(k->flags, itemsize, ndim) || (k->max_size > 0 && (size <= 0 || size > k->max_size)))
        return "size";
    return NULL;
}

/* ---------------------------------------------------------------- messages of a slot */

CN_INTERNAL int cn_dtype_equal(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

CN_INTERNAL PyObject *cn_arg_error(PyObject *exc, const plan_t *p, Py_ssize_t i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (detail == NULL)
        return NULL;
    if (p->is_struct)
        PyErr_Format(exc, "struct '%U': %U: %U", p->name, p->slots[i].label, detail);
    else
        PyErr_Format(exc, "kernel '%U': argument %zd (%U): %U", p->name, i, p->slots[i].label, detail);
    Py_DECREF(detail);
    return NULL;
}
