/* Buffer-protocol helpers shared by the algorithm files of _core (no NumPy C API). */
#ifndef CUNUMPY__CORE_BUFFER_ARGS_H
#define CUNUMPY__CORE_BUFFER_ARGS_H

#include "common.h"

/* Element kinds of a buffer format: signed/unsigned integer, float, complex, bool. */
typedef enum { CN_KIND_OTHER = 0, CN_KIND_INT, CN_KIND_UINT, CN_KIND_FLOAT, CN_KIND_COMPLEX,
               CN_KIND_BOOL } cn_kind;

static inline cn_kind cn_buffer_kind(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || (*f == '<' && PY_LITTLE_ENDIAN) || (*f == '>' && !PY_LITTLE_ENDIAN))
        f++;
    if (f[0] == 'Z' && (f[1] == 'f' || f[1] == 'd') && f[2] == '\0')
        return CN_KIND_COMPLEX;
    if (f[0] == '\0' || f[1] != '\0')
        return CN_KIND_OTHER;
    switch (f[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return CN_KIND_INT;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': return CN_KIND_UINT;
    case 'e': case 'f': case 'd': return CN_KIND_FLOAT;
    case '?': return CN_KIND_BOOL;
    default: return CN_KIND_OTHER;
    }
}

/* 1 if a buffer format describes Python object references ('O'), alone or inside a struct
 * ("T{O:a:d:b:}"). Field names between colons are skipped, so a field named "O" is no object.
 * Such elements must never be copied as bytes: a duplicated pointer is released twice. */
static inline int cn_format_has_objects(const char *f)
{
    if (f == NULL)
        return 0;
    for (; *f != '\0'; f++) {
        if (*f == ':') {
            f++;
            while (*f != '\0' && *f != ':')
                f++;
            if (*f == '\0')
                return 0;
        } else if (*f == 'O') {
            return 1;
        }
    }
    return 0;
}

/* Get a strided buffer of `obj` (writable if asked) with `ndim` dimensions (-1: any).
 * On failure a Python exception naming `name` is set and -1 returned. */
static inline int cn_get_buffer(PyObject *obj, Py_buffer *view, int writable, int ndim, const char *name)
{
    int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(writable ? PyExc_ValueError : PyExc_TypeError,
                     "'%s' must be a%s strided buffer (a NumPy array), not %.100s", name,
                     writable ? " writable" : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (ndim >= 0 && view->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "'%s' must have %d dimension(s), got %d", name, ndim,
                     view->ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Number of elements of a buffer. */
static inline Py_ssize_t cn_buffer_count(const Py_buffer *v)
{
    return v->itemsize ? v->len / v->itemsize : 0;
}

/* 1 if the buffer is C-contiguous. */
static inline int cn_buffer_c_contig(const Py_buffer *v)
{
    return PyBuffer_IsContiguous(v, 'C');
}

/* Require a C-contiguous buffer of `kind` and `itemsize` with `count` elements (-1: any). */
static inline int cn_require_contig(const Py_buffer *v, cn_kind kind, Py_ssize_t itemsize,
                             Py_ssize_t count, const char *name)
{
    if (cn_buffer_kind(v) != kind || v->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "'%s' has the wrong element type (format '%s')", name,
                     v->format ? v->format : "B");
        return -1;
    }
    if (!cn_buffer_c_contig(v)) {
        PyErr_Format(PyExc_ValueError, "'%s' must be C-contiguous", name);
        return -1;
    }
    /* The kernels read and write these buffers as typed C arrays. */
    Py_ssize_t align = kind == CN_KIND_COMPLEX ? itemsize / 2 : itemsize;
    if (align > 1 && (uintptr_t)v->buf % (uintptr_t)align != 0) {
        PyErr_Format(PyExc_ValueError, "'%s' must be aligned (a NumPy array with flags.aligned)",
                     name);
        return -1;
    }
    if (count >= 0 && cn_buffer_count(v) != count) {
        PyErr_Format(PyExc_ValueError, "'%s' must have %zd elements, got %zd", name, count,
                     cn_buffer_count(v));
        return -1;
    }
    return 0;
}

#endif /* CUNUMPY__CORE_BUFFER_ARGS_H */
