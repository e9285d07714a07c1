/* Packing of CudaStruct values and the re-pack check of CudaStructArguments.
 *
 * A StructPacker is built once per CudaStruct: a LaunchPlan laid out like the C struct
 * (pack.h), so every field gets the checks and casts of a kernel parameter of its type. A
 * packed value is a numpy.void of the struct's dtype that owns a private copy of the bytes.
 * CudaStruct derives from StructCaller, whose tp_call takes the keyword dict of S(**values)
 * as it is, and CudaStructValue from StructValue, created here without a Python __init__.
 *
 * CudaStructArguments keep a StructState in the instance: the field objects of the last
 * pack (kept alive: the packed bytes hold their addresses), what can change in place under
 * a fixed identity (the C struct of NumPy arrays, the shape of other device arrays), how
 * each field is read, and the packed value. The "has anything changed" check reads each
 * field and compares; where the instance dict and the class are provably unchanged since the
 * last check (PEP 509 dict versions, type version tags) plain attributes are not re-read. */
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
    cn_ndarray_t r;
    /* A NumPy array is read from its C struct by the plan itself (cn_plan_pack_one with host). */
    if (!host || !is_array_kind(kind) || cn_is_device(obj) || cn_read_ndarray(obj, &r))
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
        PyObject *obj = host ? host_or_self(values[i], host, cn_plan_kind(k->plan, i)) : Py_NewRef(values[i]);
        if (obj == NULL) {
            rc = -1;
            break;
        }
        rc = cn_plan_pack_one(k->plan, i, obj, buf, host);
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

/* The values of dict `values` in field order, as a tuple (a key's __eq__ or a value's
 * __index__ may change the dict later); TypeError unless it has every field and no other. */
static PyObject *ordered_values(packer_t *k, PyObject *values)
{
    PyObject *ordered = PyTuple_New(k->n);
    if (ordered == NULL)
        return NULL;
    Py_ssize_t i = 0;
    if (PyDict_GET_SIZE(values) == k->n) {
        /* Keywords written in field order (the usual call) are the interned field names
         * themselves: matched by position without a lookup. No Python code runs here. */
        Py_ssize_t pos = 0;
        PyObject *key, *v;
        while (i < k->n && PyDict_Next(values, &pos, &key, &v) && key == PyTuple_GET_ITEM(k->names, i)) {
            PyTuple_SET_ITEM(ordered, i, Py_NewRef(v));
            i++;
        }
    }
    for (; i < k->n; i++) {
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
    return ordered;
}

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
    PyObject *ordered = ordered_values(k, values);
    if (ordered == NULL)
        return NULL;
    PyObject *r = pack_values(k, &PyTuple_GET_ITEM(ordered, 0), host);
    Py_DECREF(ordered);
    return r;
}

/* ---------------------------------------------------------------- CudaStructValue */

typedef struct {
    PyObject_HEAD
    PyObject *owner;  /* the CudaStruct */
    PyObject *packed; /* numpy.void */
    PyObject *values; /* tuple: the source value of each field, in field order */
    PyObject *weakrefs;
} value_t;

static PyTypeObject value_type;

static int value_traverse(value_t *v, visitproc visit, void *arg)
{
    Py_VISIT(v->owner);
    Py_VISIT(v->packed);
    Py_VISIT(v->values);
    return 0;
}

static int value_clear(value_t *v)
{
    Py_CLEAR(v->owner);
    Py_CLEAR(v->packed);
    Py_CLEAR(v->values);
    return 0;
}

static void value_dealloc(value_t *v)
{
    PyObject_GC_UnTrack(v);
    if (v->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)v);
    value_clear(v);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

/* A new value of `type` (StructValue or a subclass). */
static PyObject *new_value_object(PyTypeObject *type, PyObject *owner, PyObject *packed, PyObject *values)
{
    value_t *v = (value_t *)type->tp_alloc(type, 0);
    if (v == NULL)
        return NULL;
    v->owner = Py_NewRef(owner);
    v->packed = Py_NewRef(packed);
    v->values = Py_NewRef(values);
    return (PyObject *)v;
}

static PyObject *value_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *owner, *packed, *values;
    static char *kwlist[] = {"struct", "packed", "values", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!:StructValue", kwlist, &owner, &packed, &PyTuple_Type,
                                     &values))
        return NULL;
    return new_value_object(type, owner, packed, values);
}

static PyObject *value_cuda_args(value_t *v, PyObject *unused) { return PyTuple_Pack(1, v->packed); }

static PyMethodDef value_methods[] = {
    {"__cuda_args__", (PyCFunction)value_cuda_args, METH_NOARGS, "__cuda_args__() -> (packed,)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef value_members[] = {
    {"struct", T_OBJECT_EX, offsetof(value_t, owner), READONLY, "the CudaStruct"},
    {"packed", T_OBJECT_EX, offsetof(value_t, packed), READONLY, "the packed value (numpy.void)"},
    {"_values", T_OBJECT_EX, offsetof(value_t, values), READONLY, "the source values in field order"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject value_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.StructValue",
    .tp_basicsize = sizeof(value_t),
    .tp_dealloc = (destructor)value_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "StructValue(struct, packed, values)\n--\n\nBase of CudaStructValue: the struct, the packed "
              "value and the source values (a tuple in field order), kept alive together.",
    .tp_traverse = (traverseproc)value_traverse,
    .tp_clear = (inquiry)value_clear,
    .tp_weaklistoffset = offsetof(value_t, weakrefs),
    .tp_methods = value_methods,
    .tp_members = value_members,
    .tp_new = value_new,
};

/* ---------------------------------------------------------------- CudaStruct.__call__ */

/* The base of CudaStruct. Its tp_call takes the keyword dict of S(**values) as it comes,
 * where a Python __call__ or a vectorcall entry would first copy or unpack it. */
typedef struct {
    PyObject_HEAD
    PyObject *packer;     /* StructPacker, set by _attach() */
    PyObject *value_type; /* StructValue or a subclass */
} caller_t;

static int caller_traverse(caller_t *c, visitproc visit, void *arg)
{
    Py_VISIT(c->packer);
    Py_VISIT(c->value_type);
    return 0;
}

static int caller_clear(caller_t *c)
{
    Py_CLEAR(c->packer);
    Py_CLEAR(c->value_type);
    return 0;
}

static void caller_dealloc(caller_t *c)
{
    PyObject_GC_UnTrack(c);
    caller_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *caller_call(caller_t *c, PyObject *args, PyObject *kwargs)
{
    packer_t *k = (packer_t *)c->packer;
    if (k == NULL)
        return cn_raise(CN_ERR_TYPE, "%.200s: the struct has no packer (StructCaller._attach was not called)",
                        Py_TYPE(c)->tp_name);
    if (PyTuple_GET_SIZE(args) != 0)
        return cn_raise(CN_ERR_TYPE, "struct '%U' takes its fields as keyword arguments (S(name=value, ...)), "
                        "got %zd positional argument%s", k->name, PyTuple_GET_SIZE(args),
                        PyTuple_GET_SIZE(args) == 1 ? "" : "s");
    PyObject *empty = NULL;
    if (kwargs == NULL && (kwargs = empty = PyDict_New()) == NULL)
        return NULL;
    PyObject *ordered = ordered_values(k, kwargs);
    Py_XDECREF(empty);
    if (ordered == NULL)
        return NULL;
    PyObject *packed = pack_values(k, &PyTuple_GET_ITEM(ordered, 0), 0);
    PyObject *value = packed != NULL ? new_value_object((PyTypeObject *)c->value_type, (PyObject *)c, packed, ordered)
                                     : NULL;
    Py_XDECREF(packed);
    Py_DECREF(ordered);
    return value;
}

static PyObject *caller_attach(caller_t *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !Py_IS_TYPE(args[0], &packer_type) || !PyType_Check(args[1]) ||
        !PyType_IsSubtype((PyTypeObject *)args[1], &value_type))
        return cn_raise(CN_ERR_TYPE, "_attach(packer, value_type) takes a StructPacker and a StructValue subclass");
    Py_XSETREF(c->packer, Py_NewRef(args[0]));
    Py_XSETREF(c->value_type, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef caller_methods[] = {
    {"_attach", (PyCFunction)(void (*)(void))caller_attach, METH_FASTCALL,
     "_attach(packer, value_type)\n--\n\nPack calls with `packer` into instances of `value_type`."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject caller_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.StructCaller",
    .tp_basicsize = sizeof(caller_t),
    .tp_dealloc = (destructor)caller_dealloc,
    .tp_call = (ternaryfunc)caller_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Base of CudaStruct: calling it with the fields as keywords packs a value.",
    .tp_traverse = (traverseproc)caller_traverse,
    .tp_clear = (inquiry)caller_clear,
    .tp_methods = caller_methods,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- CudaStructArguments state */

/* PEP 509 dict versions: a dict's version changes with every change of its content and is
 * unique across dicts, so an unchanged version means the same values under the same keys.
 * Relied on where its behaviour is known (3.10 to 3.12); elsewhere every field is read. */
#if PY_VERSION_HEX < 0x030D0000
#define CN_DICT_VERSIONS 1
static uint64_t dict_version(PyObject *dict)
{
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return ((PyDictObject *)dict)->ma_version_tag;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}
#else
#define CN_DICT_VERSIONS 0
static uint64_t dict_version(PyObject *dict) { return 0; }
#endif

/* How a field's value is read: from the instance dict (a plain attribute: the type has no data
 * descriptor of that name), or through getattr (property, slot, class attribute, ...). */
enum { READ_DICT = 0, READ_GETATTR = 1 };
/* What can change under a fixed identity: nothing (scalars, structs, CuPy pointers: a CuPy
 * array's address never changes), the C struct of a NumPy array (host arrays and the host
 * arrays of the fake CuPy: `a.shape = ...` changes them in place), the shape of another
 * device array in a view field (CuPy changes shape and strides together, in place). */
enum { SIG_NONE = 0, SIG_NDARRAY = 1, SIG_SHAPE = 2 };

typedef struct {
    PyObject *value; /* borrowed from the state's `values` */
    int read;
    int sig;
    PyObject *shape; /* SIG_SHAPE: the shape it was packed with */
    PyObject *descr; /* SIG_NDARRAY: the dtype object (held: compared by identity) */
    char *data;
    int nd, flags;
    Py_ssize_t dims[16], strides[16];
} field_state_t;

typedef struct {
    PyObject_VAR_HEAD
    PyObject *packer;
    PyObject *values; /* tuple: the field objects of the last pack */
    PyObject *packed; /* numpy.void */
    int host;
    int always; /* an array field holds an object whose changes cannot be seen: re-pack every time */
    /* The class and the instance dict as they were when the fields were last found unchanged:
     * only compared, never dereferenced (a version matches only the same, unchanged object). */
    PyTypeObject *type;
    unsigned int type_version; /* 0: no valid version tag, read modes unknown */
    PyObject *dict;
    uint64_t dict_version;
    field_state_t fields[];
} state_t;

static void state_dealloc(state_t *s)
{
    for (Py_ssize_t i = 0; i < Py_SIZE(s); i++) {
        Py_XDECREF(s->fields[i].shape);
        Py_XDECREF(s->fields[i].descr);
    }
    Py_XDECREF(s->packer);
    Py_XDECREF(s->values);
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
    .tp_basicsize = offsetof(state_t, fields),
    .tp_itemsize = sizeof(field_state_t),
    .tp_dealloc = (destructor)state_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The packed state of a CudaStructArguments instance (dropped by copies and pickling).",
    .tp_getset = state_getset,
};

/* The class's version tag, 0 when it has none (then nothing is cached about the class). */
static unsigned int type_version(PyTypeObject *t)
{
    return (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? t->tp_version_tag : 0;
}

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

/* 1 if getattr(obj, name) is the instance dict's item whenever the dict has it: the class
 * has no data descriptor of that name. */
static int dict_shadows_class(PyObject *obj, PyObject *name)
{
    PyObject *descr = _PyType_Lookup(Py_TYPE(obj), name);
    return descr == NULL || Py_TYPE(descr)->tp_descr_set == NULL;
}

/* getattr(obj, name), from the instance dict `dict` (may be NULL) when the type has no data
 * descriptor of that name: the same value, without the generic lookup. New reference. */
static PyObject *get_attr_fast(PyObject *obj, PyObject *dict, PyObject *name)
{
    if (dict != NULL && dict_shadows_class(obj, name)) {
        PyObject *v = PyDict_GetItemWithError(dict, name);
        if (v != NULL)
            return Py_NewRef(v);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_GetAttr(obj, name);
}

/* Record in `f` what of field value `v` (slot i) can change in place. 0, or -1 with an
 * exception; sets *always when the value is an array object whose changes cannot be seen. */
static int field_signature(packer_t *k, Py_ssize_t i, PyObject *v, field_state_t *f, int *always)
{
    int kind = cn_plan_kind(k->plan, i);
    f->sig = SIG_NONE;
    if (!is_array_kind(kind))
        return 0;
    cn_ndarray_t r;
    PyObject *host = cn_fake_host_array(v);
    if (cn_read_ndarray(host != NULL ? host : v, &r) && r.nd <= 16) {
        f->sig = SIG_NDARRAY;
        f->descr = Py_NewRef(r.descr);
        f->data = r.data;
        f->nd = r.nd;
        f->flags = r.flags;
        memcpy(f->dims, r.dims, (size_t)r.nd * sizeof(Py_ssize_t));
        memcpy(f->strides, r.strides, (size_t)r.nd * sizeof(Py_ssize_t));
        return 0;
    }
    if (!cn_is_device(v)) {
        *always = 1;
        return 0;
    }
    if (kind != CN_K_VIEW && kind != CN_K_CVIEW)
        return 0;
    f->sig = SIG_SHAPE;
    f->shape = PyObject_GetAttr(v, s_shape_attr);
    return f->shape == NULL ? -1 : 0;
}

/* SIG_SHAPE: 1 if the device array `v` still has the recorded shape, 0 if not, -1 on error. */
static int same_shape(const field_state_t *f, PyObject *v)
{
    PyObject *now = PyObject_GetAttr(v, s_shape_attr);
    if (now == NULL)
        return -1;
    int eq = now == f->shape ? 1 : PyObject_RichCompareBool(now, f->shape, Py_EQ);
    Py_DECREF(now);
    return eq;
}

/* 1 if field value `v` (the object recorded in `f`) is as recorded, 0 if not, -1 on error.
 * Inline: the check runs it for every field. */
static inline int same_signature(const field_state_t *f, PyObject *v)
{
    if (f->sig == SIG_NONE)
        return 1;
    if (f->sig == SIG_NDARRAY) {
        cn_ndarray_t r;
        PyObject *host = cn_fake_host_array(v);
        if (!cn_read_ndarray(host != NULL ? host : v, &r))
            return 0;
        if (r.descr != f->descr || r.data != f->data || r.nd != f->nd || r.flags != f->flags)
            return 0;
        for (int d = 0; d < r.nd; d++)
            if (r.dims[d] != f->dims[d] || r.strides[d] != f->strides[d])
                return 0;
        return 1;
    }
    return same_shape(f, v);
}

static PyObject *repack_fields(packer_t *k, PyObject *obj, int host);

/* Read every field, pack, store a new state in the instance; returns the packed value. The
 * recursion is counted, as in unchanged(). */
static PyObject *repack_object(packer_t *k, PyObject *obj, int host)
{
    if (Py_EnterRecursiveCall(" while packing a CudaStructArguments"))
        return NULL;
    PyObject *r = repack_fields(k, obj, host);
    Py_LeaveRecursiveCall();
    return r;
}

static PyObject *repack_fields(packer_t *k, PyObject *obj, int host)
{
    PyObject *values = PyTuple_New(k->n), *packed = NULL, *dict = NULL;
    state_t *s = NULL;
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *v = read_field(k, obj, i);
        if (v == NULL)
            goto fail;
        PyTuple_SET_ITEM(values, i, v);
    }
    s = PyObject_NewVar(state_t, &state_type, k->n);
    if (s == NULL)
        goto fail;
    s->packer = Py_NewRef((PyObject *)k);
    s->values = Py_NewRef(values);
    s->packed = NULL;
    s->host = host;
    s->always = 0;
    s->type = NULL;
    s->type_version = 0;
    s->dict = NULL;
    s->dict_version = 0;
    memset(s->fields, 0, (size_t)k->n * sizeof(field_state_t));
    /* What can change in place is recorded before packing: a change made meanwhile by Python
     * code that packing runs (__index__, a shape read) is then seen by the next check. */
    for (Py_ssize_t i = 0; i < k->n; i++) {
        s->fields[i].value = PyTuple_GET_ITEM(values, i);
        if (field_signature(k, i, s->fields[i].value, &s->fields[i], &s->always) < 0)
            goto fail;
    }
    packed = pack_values(k, &PyTuple_GET_ITEM(values, 0), host);
    if (packed == NULL)
        goto fail;
    s->packed = Py_NewRef(packed);
    if (PyObject_GenericSetAttr(obj, s_state_attr, (PyObject *)s) < 0)
        goto fail;
    /* How each field is read, valid while the class keeps its version tag (the lookup first
     * gives the class one if it can have one). The dict itself is trusted only from the first
     * check that finds every field unchanged: packing ran Python code that may have changed it. */
    dict = plain_dict(obj);
    int class_packer_is_k = _PyType_Lookup(Py_TYPE(obj), s_packer_attr) == (PyObject *)k;
    unsigned int tv = type_version(Py_TYPE(obj));
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *name = PyTuple_GET_ITEM(k->names, i);
        int in_dict = 0;
        if (dict != NULL && dict_shadows_class(obj, name)) {
            PyObject *v = PyDict_GetItemWithError(dict, name);
            if (v == NULL && PyErr_Occurred())
                PyErr_Clear();
            in_dict = v != NULL && v == s->fields[i].value;
        }
        s->fields[i].read = in_dict ? READ_DICT : READ_GETATTR;
    }
    /* Recorded only for the class's own packer: an unchanged class then also means that its
     * packer is still `k` (the descriptors skip looking it up). */
    if (class_packer_is_k && tv != 0 && tv == type_version(Py_TYPE(obj))) {
        s->type = Py_TYPE(obj);
        s->type_version = tv;
    }
    Py_XDECREF(dict);
    Py_DECREF(s);
    Py_DECREF(values);
    return packed;
fail:
    Py_XDECREF(s);
    Py_XDECREF(values);
    Py_XDECREF(packed);
    Py_XDECREF(dict);
    return NULL;
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

/* The last instance found unchanged with a trusted dict, and its state: a later check of the
 * same instance with the dict still at that version (so still holding that state) skips the
 * dict lookup of the state. Only compared until the version matches; then the state is alive. */
static struct {
    PyObject *obj, *dict;
    uint64_t version;
    state_t *state;
} last_checked;

static int unchanged_fields(packer_t *k, state_t *s, PyObject *obj, PyObject *dict);

/* 1 if every field of `obj` is what state `s` was packed from, 0 if not, -1 on error. Reading a
 * field may come back here without a Python frame in between (a property or descriptor in C
 * that packs the same object): the recursion is counted, so it ends in a RecursionError. */
static int unchanged(packer_t *k, state_t *s, PyObject *obj, PyObject *dict)
{
    if (Py_EnterRecursiveCall(" while checking the fields of a CudaStructArguments"))
        return -1;
    int r = unchanged_fields(k, s, obj, dict);
    Py_LeaveRecursiveCall();
    return r;
}

static int unchanged_fields(packer_t *k, state_t *s, PyObject *obj, PyObject *dict)
{
    if (s->always)
        return 0;
    /* Modes are trusted only while the class is unchanged; plain attributes are not even read
     * while the instance dict is unchanged too. */
    int modes = s->type == Py_TYPE(obj) && s->type_version != 0 && s->type_version == type_version(Py_TYPE(obj));
    /* The version before any field is read: a change made while they are read (a property
     * that assigns another field) leaves the dict at a newer version, never trusted below. */
    uint64_t version = dict != NULL ? dict_version(dict) : 0;
    int dict_same = CN_DICT_VERSIONS && modes && dict != NULL && dict == s->dict && version == s->dict_version;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        const field_state_t *f = &s->fields[i];
        if (dict_same && f->read == READ_DICT) {
            /* The same object (held by the state): only what may change in place is read. */
            int same = same_signature(f, f->value);
            if (same <= 0)
                return same;
            continue;
        }
        PyObject *name = PyTuple_GET_ITEM(k->names, i), *v;
        if (modes && dict != NULL && f->read == READ_DICT) {
            v = PyDict_GetItemWithError(dict, name);
            if (v == NULL && PyErr_Occurred())
                return -1;
            v = v != NULL ? Py_NewRef(v) : PyObject_GetAttr(obj, name);
        }
        else if (modes)
            v = PyObject_GetAttr(obj, name);
        else
            v = get_attr_fast(obj, dict, name);
        if (v == NULL) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError))
                Py_XDECREF(read_field(k, obj, i)); /* the message naming the field */
            return -1;
        }
        int same = v == f->value ? same_signature(f, v) : 0;
        Py_DECREF(v);
        if (same <= 0)
            return same;
    }
    /* Found unchanged: later checks skip the plain attributes while the dict stays as it was
     * before this one read them. */
    if (CN_DICT_VERSIONS && modes && dict != NULL) {
        s->dict = dict;
        s->dict_version = version;
        last_checked.obj = obj;
        last_checked.dict = dict;
        last_checked.version = version;
        last_checked.state = s;
    }
    return 1;
}

/* The packed value of state `s` (held, released here) if nothing changed, else a new pack. */
static PyObject *current_from_state(packer_t *k, PyObject *obj, PyObject *dict, state_t *s)
{
    int host = 0;
    if (s != NULL) {
        host = s->host;
        int same = unchanged(k, s, obj, dict);
        PyObject *packed = same > 0 ? Py_NewRef(s->packed) : NULL;
        Py_DECREF(s);
        if (same != 0)
            return packed;
    }
    return repack_object(k, obj, host);
}

/* The current packed value of `obj`: the stored one when nothing changed, else a new pack. */
static PyObject *current_packed(packer_t *k, PyObject *obj)
{
    PyObject *dict = plain_dict(obj);
    PyObject *packed = current_from_state(k, obj, dict, stored_state(k, obj, dict));
    Py_XDECREF(dict);
    return packed;
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

/* The current packed value of a CudaStructArguments instance. While its class is unchanged
 * since the stored state was made, the class's packer is the state's (no lookup). */
static PyObject *args_current(PyObject *self)
{
    PyObject *dict = plain_dict(self);
    if (dict != NULL) {
        state_t *s;
        if (CN_DICT_VERSIONS && last_checked.obj == self && last_checked.dict == dict &&
            last_checked.version == dict_version(dict))
            s = last_checked.state; /* the unchanged dict still holds it */
        else {
            PyObject *st = PyDict_GetItemWithError(dict, s_state_attr);
            s = st != NULL && Py_IS_TYPE(st, &state_type) ? (state_t *)st : NULL;
        }
        if (s != NULL && s->type == Py_TYPE(self) && s->type_version != 0 &&
            s->type_version == type_version(Py_TYPE(self))) {
            Py_INCREF(s);
            PyObject *packed = current_from_state((packer_t *)s->packer, self, dict, s);
            Py_DECREF(dict);
            return packed;
        }
        PyErr_Clear();
        Py_DECREF(dict);
    }
    packer_t *k = class_packer(self);
    if (k == NULL)
        return NULL;
    PyObject *packed = current_packed(k, self);
    Py_DECREF(k);
    return packed;
}

static PyObject *args_cuda_args(PyObject *self, PyObject *unused)
{
    PyObject *packed = args_current(self);
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

static PyObject *args_packed(PyObject *self, void *c) { return args_current(self); }

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
    if (PyType_Ready(&host_view_type) < 0 || PyType_Ready(&packer_type) < 0 || PyType_Ready(&state_type) < 0 ||
        PyType_Ready(&value_type) < 0 || PyType_Ready(&caller_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "StructPacker", (PyObject *)&packer_type) < 0 ||
        PyModule_AddObjectRef(module, "StructState", (PyObject *)&state_type) < 0 ||
        PyModule_AddObjectRef(module, "StructValue", (PyObject *)&value_type) < 0 ||
        PyModule_AddObjectRef(module, "StructCaller", (PyObject *)&caller_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, struct_methods);
}
