/* Packing of CudaStruct values and the re-pack check of CudaStructArguments.
 *
 * A StructPacker is built once per CudaStruct: a LaunchPlan laid out like the C struct
 * (pack.h), so every field gets the checks and casts of a kernel parameter of its type. A
 * packed value is a numpy.void of the struct's dtype that owns a private copy of the bytes.
 *
 * CudaStructArguments keep a StructState in the instance: the field objects of the last
 * pack (kept alive: the packed bytes hold their addresses), the shape and strides of view
 * fields, and the packed value. The "has anything changed" check reads each field attribute
 * and compares identities (and view shapes/strides); only a change packs again. */
#include "common.h"
#include "pack.h"

#include <stddef.h>
#include <string.h>
#include <structmember.h>

static PyObject *s_shape_attr, *s_strides_attr, *s_cai_attr, *s_ai_attr, *s_packer_attr, *s_state_attr;

/* ---------------------------------------------------------------- host arrays (explicit option) */

/* A NumPy host array seen through __cuda_array_interface__ (the same dict as its
 * __array_interface__), so that the device-array checks accept it when packing is asked to
 * take host memory (the CPU emulation). Not weak-referenceable: never cached by a slot. */
typedef struct {
    PyObject_HEAD
    PyObject *interface;
} host_view_t;

static void host_view_dealloc(host_view_t *v)
{
    Py_XDECREF(v->interface);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

static PyMemberDef host_view_members[] = {
    {"__cuda_array_interface__", T_OBJECT_EX, offsetof(host_view_t, interface), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject host_view_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.HostArrayView",
    .tp_basicsize = sizeof(host_view_t),
    .tp_dealloc = (destructor)host_view_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A host array's __array_interface__ presented as __cuda_array_interface__.",
    .tp_members = host_view_members,
};

static int is_array_kind(int kind) { return kind != CN_K_SCALAR && kind != CN_K_STRUCT; }

static int lookup_attr(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, out);
#else
    return _PyObject_LookupAttr(obj, name, out);
#endif
}

/* `obj` itself, or for a host array (host packing only) a view of its array interface.
 * New reference, or NULL with an exception. */
static PyObject *host_or_self(PyObject *obj, int host, int kind)
{
    if (!host || !is_array_kind(kind) || cn_is_device(obj))
        return Py_NewRef(obj);
    PyObject *cai = NULL;
    if (lookup_attr(obj, s_cai_attr, &cai) < 0)
        return NULL;
    if (cai != NULL) {
        Py_DECREF(cai);
        return Py_NewRef(obj);
    }
    PyObject *ai = NULL;
    if (lookup_attr(obj, s_ai_attr, &ai) < 0)
        return NULL;
    if (ai == NULL)
        return Py_NewRef(obj);
    host_view_t *v = PyObject_New(host_view_t, &host_view_type);
    if (v == NULL) {
        Py_DECREF(ai);
        return NULL;
    }
    v->interface = ai;
    return (PyObject *)v;
}

/* ---------------------------------------------------------------- the packer */

typedef struct {
    PyObject_HEAD
    PyObject *plan;       /* LaunchPlan laid out as the struct */
    PyObject *name;       /* struct name */
    PyObject *names;      /* tuple of interned field names */
    PyObject *empty;      /* numpy.empty */
    PyObject *empty_args; /* (VALUES_PER_CHUNK, dtype) */
    Py_ssize_t n;
    Py_ssize_t itemsize;
    /* Packed values are items of a chunk array of the struct dtype, handed out once each:
     * creating a structured array costs microseconds, taking an item of one does not. Each
     * value keeps its chunk alive; the chunk's memory is written through `chunk_view`. */
    PyObject *chunk;
    Py_buffer chunk_view;
    Py_ssize_t chunk_next;
} packer_t;

#define VALUES_PER_CHUNK 64

static PyTypeObject packer_type;

static void packer_dealloc(packer_t *k)
{
    Py_XDECREF(k->plan);
    Py_XDECREF(k->name);
    Py_XDECREF(k->names);
    Py_XDECREF(k->empty);
    Py_XDECREF(k->empty_args);
    if (k->chunk != NULL) {
        PyBuffer_Release(&k->chunk_view);
        Py_DECREF(k->chunk);
    }
    Py_TYPE(k)->tp_free((PyObject *)k);
}

/* A new numpy.void of the struct dtype holding the `itemsize` bytes at `bytes`. */
static PyObject *new_value(packer_t *k, const unsigned char *bytes)
{
    if (k->chunk == NULL || k->chunk_next >= VALUES_PER_CHUNK) {
        PyObject *chunk = PyObject_Call(k->empty, k->empty_args, NULL);
        if (chunk == NULL)
            return NULL;
        Py_buffer view;
        if (PyObject_GetBuffer(chunk, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(chunk);
            return NULL;
        }
        if (view.len != VALUES_PER_CHUNK * k->itemsize) {
            PyBuffer_Release(&view);
            Py_DECREF(chunk);
            PyErr_Format(PyExc_RuntimeError, "struct '%U': the packing buffer has %zd bytes, expected %zd", k->name,
                         view.len, VALUES_PER_CHUNK * k->itemsize);
            return NULL;
        }
        if (k->chunk != NULL) {
            PyBuffer_Release(&k->chunk_view);
            Py_DECREF(k->chunk);
        }
        k->chunk = chunk;
        k->chunk_view = view;
        k->chunk_next = 0;
    }
    Py_ssize_t index = k->chunk_next++;
    memcpy((unsigned char *)k->chunk_view.buf + index * k->itemsize, bytes, (size_t)k->itemsize);
    /* A strong reference: a finalizer run by the allocation may pack again and drop the chunk. */
    PyObject *chunk = Py_NewRef(k->chunk);
    PyObject *value = PySequence_GetItem(chunk, index);
    Py_DECREF(chunk);
    return value;
}

/* Pack `values` (one object per field, field order) into a new numpy.void. */
static PyObject *pack_values(packer_t *k, PyObject *const *values, int host)
{
    /* Pack into a private buffer first: field checks run Python code (__index__, properties)
     * that may pack other values of this struct meanwhile. */
    unsigned char small[512];
    unsigned char *buf = k->itemsize <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)k->itemsize);
    if (buf == NULL)
        return PyErr_NoMemory();
    memset(buf, 0, (size_t)k->itemsize);
    int rc = 0;
    for (Py_ssize_t i = 0; i < k->n && rc == 0; i++) {
        PyObject *obj = host_or_self(values[i], host, cn_plan_kind(k->plan, i));
        if (obj == NULL) {
            rc = -1;
            break;
        }
        rc = cn_plan_pack_one(k->plan, i, obj, buf);
        Py_DECREF(obj);
    }
    PyObject *out = rc == 0 ? new_value(k, buf) : NULL;
    if (buf != small)
        PyMem_Free(buf);
    return out;
}

static int host_flag(PyObject *obj, int *out)
{
    int t = PyObject_IsTrue(obj);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

PyDoc_STRVAR(packer_pack_doc, "pack(values, host)\n--\n\nPack a tuple with one value per field (field order).");

static PyObject *packer_pack(packer_t *k, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return cn_raise(CN_ERR_TYPE, "pack() takes exactly 2 arguments (%zd given)", nargs);
    if (!PyTuple_Check(args[0]))
        return cn_raise(CN_ERR_TYPE, "struct '%U': pack() takes a tuple of field values", k->name);
    if (PyTuple_GET_SIZE(args[0]) != k->n)
        return cn_raise(CN_ERR_TYPE, "struct '%U' has %zd fields, got %zd values", k->name, k->n,
                        PyTuple_GET_SIZE(args[0]));
    int host;
    if (host_flag(args[1], &host) < 0)
        return NULL;
    PyObject *values = Py_NewRef(args[0]);
    PyObject *r = pack_values(k, &PyTuple_GET_ITEM(values, 0), host);
    Py_DECREF(values);
    return r;
}

/* TypeError listing the missing and the unknown fields of a mapping. */
static PyObject *field_mismatch(packer_t *k, PyObject *values)
{
    PyObject *missing = PyList_New(0), *unknown = PyList_New(0), *keys = NULL;
    if (missing == NULL || unknown == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        int has = PyDict_Contains(values, PyTuple_GET_ITEM(k->names, i));
        if (has < 0 || (!has && PyList_Append(missing, PyTuple_GET_ITEM(k->names, i)) < 0))
            goto done;
    }
    keys = PyDict_Keys(values);
    if (keys == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(keys); j++) {
        int has = PySequence_Contains(k->names, PyList_GET_ITEM(keys, j));
        if (has < 0 || (!has && PyList_Append(unknown, PyList_GET_ITEM(keys, j)) < 0))
            goto done;
    }
    PyErr_Format(PyExc_TypeError, "struct '%U': every field is required; missing fields %R, unknown fields %R",
                 k->name, missing, unknown);
done:
    Py_XDECREF(missing);
    Py_XDECREF(unknown);
    Py_XDECREF(keys);
    return NULL;
}

PyDoc_STRVAR(packer_pack_dict_doc,
             "pack_dict(values, host)\n--\n\nPack a dict {field: value}; every field required, no others.");

static PyObject *packer_pack_dict(packer_t *k, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return cn_raise(CN_ERR_TYPE, "pack_dict() takes exactly 2 arguments (%zd given)", nargs);
    PyObject *values = args[0];
    if (!PyDict_Check(values))
        return cn_raise(CN_ERR_TYPE, "struct '%U': pack_dict() takes a dict", k->name);
    int host;
    if (host_flag(args[1], &host) < 0)
        return NULL;
    /* Values in field order, as a tuple: a key's __eq__ or a value's __index__ may change the dict. */
    PyObject *ordered = PyTuple_New(k->n);
    if (ordered == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *v = PyDict_GetItemWithError(values, PyTuple_GET_ITEM(k->names, i));
        if (v == NULL) {
            Py_DECREF(ordered);
            return PyErr_Occurred() ? NULL : field_mismatch(k, values);
        }
        PyTuple_SET_ITEM(ordered, i, Py_NewRef(v));
    }
    if (PyDict_GET_SIZE(values) != k->n) {
        Py_DECREF(ordered);
        return field_mismatch(k, values);
    }
    PyObject *r = pack_values(k, &PyTuple_GET_ITEM(ordered, 0), host);
    Py_DECREF(ordered);
    return r;
}

/* ---------------------------------------------------------------- CudaStructArguments state */

typedef struct {
    PyObject_HEAD
    PyObject *packer;
    PyObject *values; /* tuple: the field objects of the last pack */
    PyObject *shapes; /* tuple: (shape, strides) for CuPy arrays in view fields, else None */
    PyObject *packed; /* numpy.void */
    int host;
    int always; /* an array field holds something other than a CuPy array: re-pack every time */
} state_t;

static void state_dealloc(state_t *s)
{
    Py_XDECREF(s->packer);
    Py_XDECREF(s->values);
    Py_XDECREF(s->shapes);
    Py_XDECREF(s->packed);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *state_get_packed(state_t *s, void *c) { return Py_NewRef(s->packed); }
static PyObject *state_get_host(state_t *s, void *c) { return PyBool_FromLong(s->host); }

static PyGetSetDef state_getset[] = {
    {"packed", (getter)state_get_packed, NULL, "the packed value", NULL},
    {"host_arrays", (getter)state_get_host, NULL, "packed with host arrays accepted", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject state_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.StructState",
    .tp_basicsize = sizeof(state_t),
    .tp_dealloc = (destructor)state_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The packed state of a CudaStructArguments instance (dropped by copies and pickling).",
    .tp_getset = state_getset,
};

/* getattr(obj, field) with a missing attribute turned into an AttributeError naming the field. */
static PyObject *read_field(packer_t *k, PyObject *obj, Py_ssize_t i)
{
    PyObject *v = PyObject_GetAttr(obj, PyTuple_GET_ITEM(k->names, i));
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_AttributeError,
                     "%.200s: field '%U' of struct '%U' is not set (every field must be an attribute of "
                     "the same name, plain or property)",
                     Py_TYPE(obj)->tp_name, PyTuple_GET_ITEM(k->names, i), k->name);
    }
    return v;
}

/* The shape of a CuPy array in a view field, None otherwise; sets *volatile_field when the
 * field holds an array object whose address or shape may change unseen. Only the shape: a
 * CuPy array's strides change only with it (the in-place `a.shape = ...`), its data pointer
 * never. */
static PyObject *shape_key(packer_t *k, Py_ssize_t i, PyObject *v, int *volatile_field)
{
    int kind = cn_plan_kind(k->plan, i);
    if (!is_array_kind(kind))
        return Py_NewRef(Py_None);
    if (!cn_is_device(v)) {
        *volatile_field = 1;
        return Py_NewRef(Py_None);
    }
    if (kind != CN_K_VIEW && kind != CN_K_CVIEW)
        return Py_NewRef(Py_None);
    return PyObject_GetAttr(v, s_shape_attr);
}

/* Read every field, pack, store a new state in the instance; returns the packed value. */
static PyObject *repack_object(packer_t *k, PyObject *obj, int host)
{
    PyObject *values = PyTuple_New(k->n), *shapes = NULL, *packed = NULL;
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *v = read_field(k, obj, i);
        if (v == NULL)
            goto fail;
        PyTuple_SET_ITEM(values, i, v);
    }
    packed = pack_values(k, &PyTuple_GET_ITEM(values, 0), host);
    if (packed == NULL)
        goto fail;
    shapes = PyTuple_New(k->n);
    if (shapes == NULL)
        goto fail;
    int always = 0;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *key = shape_key(k, i, PyTuple_GET_ITEM(values, i), &always);
        if (key == NULL)
            goto fail;
        PyTuple_SET_ITEM(shapes, i, key);
    }
    state_t *s = PyObject_New(state_t, &state_type);
    if (s == NULL)
        goto fail;
    s->packer = Py_NewRef((PyObject *)k);
    s->values = values;
    s->shapes = shapes;
    s->packed = Py_NewRef(packed);
    s->host = host;
    s->always = always;
    int rc = PyObject_GenericSetAttr(obj, s_state_attr, (PyObject *)s);
    Py_DECREF(s);
    if (rc < 0) {
        Py_DECREF(packed);
        return NULL;
    }
    return packed;
fail:
    Py_XDECREF(values);
    Py_XDECREF(shapes);
    Py_XDECREF(packed);
    return NULL;
}

/* The instance dict of `obj` when plain attribute reads may bypass getattr (generic
 * attribute lookup, no __getattribute__/__getattr__ of its own); else NULL. New reference. */
static PyObject *plain_dict(PyObject *obj)
{
    if (Py_TYPE(obj)->tp_getattro != PyObject_GenericGetAttr || Py_TYPE(obj)->tp_dictoffset == 0)
        return NULL;
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL || !PyDict_CheckExact(dict)) {
        PyErr_Clear();
        Py_XDECREF(dict);
        return NULL;
    }
    return dict;
}

/* getattr(obj, name), from the instance dict `dict` (may be NULL) when the type has no data
 * descriptor of that name: the same value, without the generic lookup. New reference. */
static PyObject *get_attr_fast(PyObject *obj, PyObject *dict, PyObject *name)
{
    if (dict != NULL) {
        PyObject *descr = _PyType_Lookup(Py_TYPE(obj), name);
        if (descr == NULL || Py_TYPE(descr)->tp_descr_set == NULL) {
            PyObject *v = PyDict_GetItemWithError(dict, name);
            if (v != NULL)
                return Py_NewRef(v);
            if (PyErr_Occurred())
                return NULL;
        }
    }
    return PyObject_GetAttr(obj, name);
}

/* The stored state of `obj` if it belongs to packer `k`, else NULL (no exception). */
static state_t *stored_state(packer_t *k, PyObject *obj, PyObject *dict)
{
    PyObject *st = NULL;
    if (dict != NULL) {
        st = PyDict_GetItemWithError(dict, s_state_attr);
        Py_XINCREF(st);
    }
    if (st == NULL && lookup_attr(obj, s_state_attr, &st) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (st == NULL)
        return NULL;
    if (!Py_IS_TYPE(st, &state_type) || ((state_t *)st)->packer != (PyObject *)k) {
        Py_DECREF(st);
        return NULL;
    }
    return (state_t *)st;
}

/* 1 if every field of `obj` is what state `s` was packed from, 0 if not, -1 on error. */
static int unchanged(packer_t *k, state_t *s, PyObject *obj, PyObject *dict)
{
    if (s->always)
        return 0;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *v = get_attr_fast(obj, dict, PyTuple_GET_ITEM(k->names, i));
        if (v == NULL) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError))
                Py_XDECREF(read_field(k, obj, i)); /* the message naming the field */
            return -1;
        }
        int same = v == PyTuple_GET_ITEM(s->values, i);
        PyObject *key = PyTuple_GET_ITEM(s->shapes, i);
        if (same && key != Py_None) {
            int ignored = 0;
            PyObject *now = shape_key(k, i, v, &ignored);
            if (now == NULL) {
                Py_DECREF(v);
                return -1;
            }
            int eq = now == key ? 1 : PyObject_RichCompareBool(now, key, Py_EQ);
            Py_DECREF(now);
            if (eq < 0) {
                Py_DECREF(v);
                return -1;
            }
            same = eq;
        }
        Py_DECREF(v);
        if (!same)
            return 0;
    }
    return 1;
}

/* The current packed value of `obj`: the stored one when nothing changed, else a new pack. */
static PyObject *current_packed(packer_t *k, PyObject *obj)
{
    PyObject *dict = plain_dict(obj);
    state_t *s = stored_state(k, obj, dict);
    int host = 0;
    if (s != NULL) {
        host = s->host;
        int same = unchanged(k, s, obj, dict);
        if (same != 0) {
            PyObject *packed = same > 0 ? Py_NewRef(s->packed) : NULL;
            Py_DECREF(s);
            Py_XDECREF(dict);
            return packed;
        }
        Py_DECREF(s);
    }
    Py_XDECREF(dict);
    return repack_object(k, obj, host);
}

PyDoc_STRVAR(packer_repack_doc,
             "repack(obj, host)\n--\n\nPack from the field attributes of `obj` now and store the state in it.");

static PyObject *packer_repack(packer_t *k, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return cn_raise(CN_ERR_TYPE, "repack() takes exactly 2 arguments (%zd given)", nargs);
    int host;
    if (host_flag(args[1], &host) < 0)
        return NULL;
    return repack_object(k, args[0], host);
}

PyDoc_STRVAR(packer_current_doc,
             "current(obj)\n--\n\nThe packed value of `obj`, packed again only if a field changed.");

static PyObject *packer_current(packer_t *k, PyObject *obj) { return current_packed(k, obj); }

static PyObject *packer_get_plan(packer_t *k, void *c) { return Py_NewRef(k->plan); }
static PyObject *packer_get_names(packer_t *k, void *c) { return Py_NewRef(k->names); }

static PyMethodDef packer_methods[] = {
    {"pack", (PyCFunction)(void (*)(void))packer_pack, METH_FASTCALL, packer_pack_doc},
    {"pack_dict", (PyCFunction)(void (*)(void))packer_pack_dict, METH_FASTCALL, packer_pack_dict_doc},
    {"repack", (PyCFunction)(void (*)(void))packer_repack, METH_FASTCALL, packer_repack_doc},
    {"current", (PyCFunction)packer_current, METH_O, packer_current_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef packer_getset[] = {
    {"plan", (getter)packer_get_plan, NULL, "the LaunchPlan laid out as the struct", NULL},
    {"names", (getter)packer_get_names, NULL, "field names", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject packer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.StructPacker",
    .tp_basicsize = sizeof(packer_t),
    .tp_dealloc = (destructor)packer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Packing plan of one CudaStruct, built by struct_packer().",
    .tp_methods = packer_methods,
    .tp_getset = packer_getset,
};

PyDoc_STRVAR(struct_packer_doc,
             "struct_packer(name, specs, offsets, itemsize, dtype, names, void_type, generic_type, empty)\n--\n\n"
             "The packing plan of struct `name`: `specs` as for launch_plan (one per field), the\n"
             "field `offsets`, the struct's `itemsize` and structured `dtype`, the field `names`;\n"
             "`empty` is numpy.empty (packed values are numpy.void of `dtype`).");

static PyObject *struct_packer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9)
        return cn_raise(CN_ERR_TYPE, "struct_packer() takes exactly 9 arguments (%zd given)", nargs);
    PyObject *name = args[0], *specs = args[1], *offsets = args[2], *dtype = args[4], *names = args[5];
    Py_ssize_t itemsize = PyLong_AsSsize_t(args[3]);
    if (itemsize == -1 && PyErr_Occurred())
        return NULL;
    if (!PyTuple_Check(names) || !PyTuple_Check(specs) || PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(specs))
        return cn_raise(CN_ERR_TYPE, "struct_packer(): 'names' must be a tuple with one str per spec");
    if (!PyCallable_Check(args[8]))
        return cn_raise(CN_ERR_TYPE, "struct_packer(): 'empty' must be callable");
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    PyObject *interned = PyTuple_New(n);
    if (interned == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(s)) {
            Py_DECREF(interned);
            return cn_raise(CN_ERR_TYPE, "struct_packer(): field names must be str");
        }
        Py_INCREF(s);
        PyUnicode_InternInPlace(&s);
        PyTuple_SET_ITEM(interned, i, s);
    }
    PyObject *plan = cn_struct_plan_new(name, specs, offsets, itemsize, args[6], args[7]);
    if (plan == NULL) {
        Py_DECREF(interned);
        return NULL;
    }
    packer_t *k = PyObject_New(packer_t, &packer_type);
    if (k == NULL) {
        Py_DECREF(interned);
        Py_DECREF(plan);
        return NULL;
    }
    k->plan = plan;
    k->name = Py_NewRef(name);
    k->names = interned;
    k->empty = Py_NewRef(args[8]);
    k->empty_args = Py_BuildValue("(iO)", VALUES_PER_CHUNK, dtype);
    k->chunk = NULL;
    k->chunk_next = 0;
    k->n = n;
    k->itemsize = itemsize;
    if (k->empty_args == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    return (PyObject *)k;
}

/* ---------------------------------------------------------------- CudaStructArguments descriptors */

static packer_t *class_packer(PyObject *self)
{
    /* A class attribute (set by CudaStructArguments.__init_subclass__). */
    PyObject *k = _PyType_Lookup(Py_TYPE(self), s_packer_attr);
    Py_XINCREF(k);
    if (k == NULL)
        k = Py_NewRef(Py_None);
    if (!Py_IS_TYPE(k, &packer_type)) {
        Py_DECREF(k);
        PyErr_Format(PyExc_TypeError,
                     "%.200s has no struct: set 'struct_name' and 'fields' in a subclass before packing",
                     Py_TYPE(self)->tp_name);
        return NULL;
    }
    return (packer_t *)k;
}

static PyObject *args_cuda_args(PyObject *self, PyObject *unused)
{
    packer_t *k = class_packer(self);
    if (k == NULL)
        return NULL;
    PyObject *packed = current_packed(k, self);
    Py_DECREF(k);
    if (packed == NULL)
        return NULL;
    PyObject *t = PyTuple_New(1);
    if (t == NULL) {
        Py_DECREF(packed);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, packed);
    return t;
}

static PyObject *args_packed(PyObject *self, void *c)
{
    packer_t *k = class_packer(self);
    if (k == NULL)
        return NULL;
    PyObject *packed = current_packed(k, self);
    Py_DECREF(k);
    return packed;
}

static PyMethodDef cuda_args_def = {
    "__cuda_args__", (PyCFunction)args_cuda_args, METH_NOARGS,
    "__cuda_args__() -> (packed,)\n\nThe packed struct value, packed again if a field changed."};

static PyGetSetDef packed_def = {"packed", (getter)args_packed, NULL,
                                 "The packed struct value (numpy.void), packed again if a field changed.", NULL};

PyDoc_STRVAR(struct_arguments_descriptors_doc,
             "struct_arguments_descriptors(cls, state_name)\n--\n\n"
             "(__cuda_args__ method, packed property) for class `cls` (CudaStructArguments); the\n"
             "packer is the class attribute `_cunumpy_packer`, the state the attribute `state_name`.");

static PyObject *struct_arguments_descriptors(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyUnicode_Check(args[1]))
        return cn_raise(CN_ERR_TYPE, "struct_arguments_descriptors(cls, state_name) takes a class and a str");
    PyObject *state = Py_NewRef(args[1]);
    PyUnicode_InternInPlace(&state);
    Py_XSETREF(s_state_attr, state);
    PyObject *m = PyDescr_NewMethod((PyTypeObject *)args[0], &cuda_args_def);
    if (m == NULL)
        return NULL;
    PyObject *g = PyDescr_NewGetSet((PyTypeObject *)args[0], &packed_def);
    if (g == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    return Py_BuildValue("(NN)", m, g);
}

static PyMethodDef struct_methods[] = {
    {"struct_packer", (PyCFunction)(void (*)(void))struct_packer, METH_FASTCALL, struct_packer_doc},
    {"struct_arguments_descriptors", (PyCFunction)(void (*)(void))struct_arguments_descriptors, METH_FASTCALL,
     struct_arguments_descriptors_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_struct(PyObject *module)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&s_shape_attr, "shape"},
                 {&s_strides_attr, "strides"},
                 {&s_cai_attr, "__cuda_array_interface__"},
                 {&s_ai_attr, "__array_interface__"},
                 {&s_packer_attr, "_cunumpy_packer"},
                 {&s_state_attr, "_cunumpy_struct_state"}};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].slot = PyUnicode_InternFromString(names[k].text);
        if (*names[k].slot == NULL)
            return -1;
    }
    if (PyType_Ready(&host_view_type) < 0 || PyType_Ready(&packer_type) < 0 || PyType_Ready(&state_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "StructPacker", (PyObject *)&packer_type) < 0 ||
        PyModule_AddObjectRef(module, "StructState", (PyObject *)&state_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, struct_methods);
}
