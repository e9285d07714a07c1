/* Packing of CudaStruct values.
 *
 * A StructPacker is built once per CudaStruct: a LaunchPlan laid out like the C struct
 * (pack.h), so every field gets the checks and casts of a kernel parameter of its type, through
 * the launch packer's checker table. A packed value is a numpy.void of the struct's dtype that
 * owns a private copy of the bytes. CudaStruct derives from StructCaller, whose tp_call takes
 * the keyword dict of S(**values) as it is, and CudaStructValue from StructValue, created here
 * without a Python __init__. The re-pack check of CudaStructArguments is struct_state.c. */
#include "struct.h"

#include <stddef.h>
#include <string.h>
#include <structmember.h>

static PyObject *s_cai_attr, *s_ai_attr;

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

/* `obj` itself, or for a host array (host packing only) a view of its array interface.
 * New reference, or NULL with an exception. */
static PyObject *host_or_self(PyObject *obj, int host, unsigned flags)
{
    cn_ndarray_t r;
    /* A NumPy array is read from its C struct by the plan itself (cn_plan_pack_one with host). */
    if (!host || !(flags & CN_KIND_ARRAY) || cn_is_device(obj) || cn_read_ndarray(obj, &r))
        return Py_NewRef(obj);
    PyObject *cai = NULL;
    if (cn_optional_attr(obj, s_cai_attr, &cai) < 0)
        return NULL;
    if (cai != NULL) {
        Py_DECREF(cai);
        return Py_NewRef(obj);
    }
    PyObject *ai = NULL;
    if (cn_optional_attr(obj, s_ai_attr, &ai) < 0)
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

static void packer_dealloc(cn_packer_t *k)
{
    Py_XDECREF(k->plan);
    Py_XDECREF(k->name);
    Py_XDECREF(k->names);
    Py_XDECREF(k->empty);
    Py_XDECREF(k->empty_args);
    cn_chunk_clear(&k->chunk);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

/* A new numpy.void of the struct dtype holding the `itemsize` bytes at `bytes`. */
static PyObject *new_value(cn_packer_t *k, const unsigned char *bytes)
{
    if (cn_chunk_full(&k->chunk)) {
        PyObject *chunk = PyObject_Call(k->empty, k->empty_args, NULL);
        if (chunk == NULL)
            return NULL;
        Py_ssize_t len;
        int r = cn_chunk_fill(&k->chunk, chunk, k->itemsize, &len);
        if (r > 0)
            PyErr_Format(PyExc_RuntimeError, "struct '%U': the packing buffer has %zd bytes, expected %zd", k->name,
                         len, CN_VALUES_PER_CHUNK * k->itemsize);
        if (r != 0)
            return NULL;
    }
    return cn_chunk_take(&k->chunk, bytes, k->itemsize);
}

/* Pack `values` (one object per field, field order) into a new numpy.void. */
CN_INTERNAL PyObject *cn_pack_values(cn_packer_t *k, PyObject *const *values, int host)
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
        PyObject *obj = host ? host_or_self(values[i], host, cn_plan_flags(k->plan, i)) : Py_NewRef(values[i]);
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

PyDoc_STRVAR(packer_pack_doc, "pack(values, host)\n--\n\nPack a tuple with one value per field (field order).");

static PyObject *packer_pack(cn_packer_t *k, PyObject *const *args, Py_ssize_t nargs)
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
    PyObject *r = cn_pack_values(k, &PyTuple_GET_ITEM(values, 0), host);
    Py_DECREF(values);
    return r;
}

/* TypeError listing the missing and the unknown fields of a mapping. */
static PyObject *field_mismatch(cn_packer_t *k, PyObject *values)
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
static PyObject *ordered_values(cn_packer_t *k, PyObject *values)
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

static PyObject *packer_pack_dict(cn_packer_t *k, PyObject *const *args, Py_ssize_t nargs)
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
    PyObject *r = cn_pack_values(k, &PyTuple_GET_ITEM(ordered, 0), host);
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
    cn_packer_t *k = (cn_packer_t *)c->packer;
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
    PyObject *packed = cn_pack_values(k, &PyTuple_GET_ITEM(ordered, 0), 0);
    PyObject *value = packed != NULL ? new_value_object((PyTypeObject *)c->value_type, (PyObject *)c, packed, ordered)
                                     : NULL;
    Py_XDECREF(packed);
    Py_DECREF(ordered);
    return value;
}

static PyObject *caller_attach(caller_t *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !Py_IS_TYPE(args[0], &cn_packer_type) || !PyType_Check(args[1]) ||
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

/* ---------------------------------------------------------------- the packer type */

static PyObject *packer_get_plan(cn_packer_t *k, void *c) { return Py_NewRef(k->plan); }
static PyObject *packer_get_names(cn_packer_t *k, void *c) { return Py_NewRef(k->names); }

static PyMethodDef packer_methods[] = {
    {"pack", (PyCFunction)(void (*)(void))packer_pack, METH_FASTCALL, packer_pack_doc},
    {"pack_dict", (PyCFunction)(void (*)(void))packer_pack_dict, METH_FASTCALL, packer_pack_dict_doc},
    {"repack", (PyCFunction)(void (*)(void))cn_packer_repack, METH_FASTCALL,
     "repack(obj, host)\n--\n\nPack from the field attributes of `obj` now and store the state in it."},
    {"current", (PyCFunction)cn_packer_current, METH_O,
     "current(obj)\n--\n\nThe packed value of `obj`, packed again only if a field changed."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef packer_getset[] = {
    {"plan", (getter)packer_get_plan, NULL, "the LaunchPlan laid out as the struct", NULL},
    {"names", (getter)packer_get_names, NULL, "field names", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

CN_INTERNAL PyTypeObject cn_packer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.StructPacker",
    .tp_basicsize = sizeof(cn_packer_t),
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
    cn_packer_t *k = PyObject_New(cn_packer_t, &cn_packer_type);
    if (k == NULL) {
        Py_DECREF(interned);
        Py_DECREF(plan);
        return NULL;
    }
    k->plan = plan;
    k->name = Py_NewRef(name);
    k->names = interned;
    k->empty = Py_NewRef(args[8]);
    k->empty_args = Py_BuildValue("(iO)", CN_VALUES_PER_CHUNK, dtype);
    k->chunk.array = NULL;
    k->chunk.next = 0;
    k->n = n;
    k->itemsize = itemsize;
    if (k->empty_args == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    return (PyObject *)k;
}

static PyMethodDef struct_pack_methods[] = {
    {"struct_packer", (PyCFunction)(void (*)(void))struct_packer, METH_FASTCALL, struct_packer_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_struct(PyObject *module)
{
    const cn_string_t names[] = {{&s_cai_attr, "__cuda_array_interface__"}, {&s_ai_attr, "__array_interface__"}};
    if (cn_intern_strings(names, sizeof(names) / sizeof(names[0])) < 0)
        return -1;
    if (PyType_Ready(&host_view_type) < 0 || PyType_Ready(&cn_packer_type) < 0 || PyType_Ready(&value_type) < 0 ||
        PyType_Ready(&caller_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "StructPacker", (PyObject *)&cn_packer_type) < 0 ||
        PyModule_AddObjectRef(module, "StructValue", (PyObject *)&value_type) < 0 ||
        PyModule_AddObjectRef(module, "StructCaller", (PyObject *)&caller_type) < 0)
        return -1;
    if (PyModule_AddFunctions(module, struct_pack_methods) < 0)
        return -1;
    return cn_register_struct_state(module);
}
