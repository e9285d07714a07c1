/* The re-pack check of CudaStructArguments.
 *
 * CudaStructArguments keep a StructState in the instance: the field objects of the last
 * pack (kept alive: the packed bytes hold their addresses), what can change in place under
 * a fixed identity (the C struct of NumPy arrays, the shape of other device arrays), how
 * each field is read, and the packed value. The "has anything changed" check reads each
 * field and compares; where the instance dict and the class are provably unchanged since the
 * last check (PEP 509 dict versions, type version tags) plain attributes are not re-read. */
#include "struct.h"

#include <string.h>

static PyObject *s_shape_attr, *s_packer_attr, *s_state_attr;
static PyObject *s_data_attr, *s_ptr_attr, *s_strides_attr, *s_dtype_attr, *s_flags_attr, *s_c_contiguous_attr,
    *s_cai_attr;

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
 * device array in a view field (CuPy changes shape and strides together, in place), and for
 * any other array object (a test double of a CuPy array, an object with only a
 * __cuda_array_interface__) everything the packer reads from it: its data pointer, shape,
 * strides, dtype and flags.c_contiguous, or its whole interface dict. */
enum { SIG_NONE = 0, SIG_NDARRAY = 1, SIG_SHAPE = 2, SIG_OBJECT = 3 };

typedef struct {
    PyObject *value; /* borrowed from the state's `values` */
    int read;
    int sig;
    PyObject *shape; /* SIG_SHAPE: the shape it was packed with */
    PyObject *descr; /* SIG_NDARRAY: the dtype object (held: compared by identity) */
    PyObject *seen;  /* SIG_OBJECT: what the packer read from the object (compared with ==) */
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
        Py_XDECREF(s->fields[i].seen);
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
static PyObject *read_field(cn_packer_t *k, PyObject *obj, Py_ssize_t i)
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

/* getattr(obj, name), or None when it has no such attribute; NULL with another error. */
static PyObject *attr_or_none(PyObject *obj, PyObject *name)
{
    PyObject *v = NULL;
    if (cn_optional_attr(obj, name, &v) < 0)
        return NULL;
    return v != NULL ? v : Py_NewRef(Py_None);
}

/* What the packer reads from an array object that is neither a NumPy array nor a CuPy array:
 * (data.ptr, shape, strides, dtype, flags.c_contiguous) through CuPy's attribute protocol, or
 * a copy of its __cuda_array_interface__. New reference, or NULL with an exception. */
static PyObject *object_signature(PyObject *v)
{
    PyObject *data = NULL, *ptr = NULL;
    if (cn_optional_attr(v, s_data_attr, &data) < 0)
        return NULL;
    if (data != NULL) {
        int rc = cn_optional_attr(data, s_ptr_attr, &ptr);
        Py_DECREF(data);
        if (rc < 0)
            return NULL;
    }
    if (ptr == NULL) {
        PyObject *cai = PyObject_GetAttr(v, s_cai_attr);
        if (cai == NULL)
            return NULL;
        PyObject *copy = PyDict_Check(cai) ? PyDict_Copy(cai) : NULL;
        if (copy == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
        Py_DECREF(cai);
        return copy;
    }
    PyObject *items[5] = {ptr, NULL, NULL, NULL, NULL};
    PyObject *flags = NULL;
    if ((items[1] = attr_or_none(v, s_shape_attr)) == NULL || (items[2] = attr_or_none(v, s_strides_attr)) == NULL ||
        (items[3] = attr_or_none(v, s_dtype_attr)) == NULL || (flags = attr_or_none(v, s_flags_attr)) == NULL ||
        (items[4] = attr_or_none(flags, s_c_contiguous_attr)) == NULL) {
        for (int j = 0; j < 5; j++)
            Py_XDECREF(items[j]);
        Py_XDECREF(flags);
        return NULL;
    }
    Py_DECREF(flags);
    PyObject *t = PyTuple_New(5);
    for (int j = 0; j < 5; j++) {
        if (t != NULL)
            PyTuple_SET_ITEM(t, j, items[j]);
        else
            Py_DECREF(items[j]);
    }
    return t;
}

/* Record in `f` what of field value `v` (slot i) can change in place. 0, or -1 with an
 * exception; sets *always when the value is an array object whose changes cannot be seen. */
static int field_signature(cn_packer_t *k, Py_ssize_t i, PyObject *v, field_state_t *f, int *always)
{
    unsigned flags = cn_plan_flags(k->plan, i);
    f->sig = SIG_NONE;
    if (!(flags & CN_KIND_ARRAY))
        return 0;
    cn_ndarray_t r;
    if (cn_read_array_memory(v, &r) && r.nd <= 16) {
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
        /* Another array object: what the packer reads from it, compared at each check; an
         * object that cannot be read so is re-packed every time (packing reports the error). */
        f->seen = object_signature(v);
        if (f->seen == NULL) {
            PyErr_Clear();
            *always = 1;
            return 0;
        }
        f->sig = SIG_OBJECT;
        return 0;
    }
    if (!(flags & CN_KIND_SHAPE))
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
    /* Arrays are the fields whose in-place state is read: their check stays on the straight path. */
    if (CN_LIKELY(f->sig == SIG_NDARRAY)) {
        cn_ndarray_t r;
        if (!cn_read_array_memory(v, &r))
            return 0;
        if (r.descr != f->descr || r.data != f->data || r.nd != f->nd || r.flags != f->flags)
            return 0;
        for (int d = 0; d < r.nd; d++)
            if (r.dims[d] != f->dims[d] || r.strides[d] != f->strides[d])
                return 0;
        return 1;
    }
    if (f->sig == SIG_OBJECT) {
        PyObject *now = object_signature(v);
        if (now == NULL) {
            PyErr_Clear(); /* unreadable now: re-packing reports why */
            return 0;
        }
        int eq = PyObject_RichCompareBool(now, f->seen, Py_EQ);
        Py_DECREF(now);
        if (eq < 0)
            PyErr_Clear(); /* an uncomparable value counts as changed */
        return eq > 0;
    }
    return same_shape(f, v);
}

static PyObject *repack_fields(cn_packer_t *k, PyObject *obj, int host);

/* Read every field, pack, store a new state in the instance; returns the packed value. The
 * recursion is counted, as in unchanged(). */
static PyObject *repack_object(cn_packer_t *k, PyObject *obj, int host)
{
    if (Py_EnterRecursiveCall(" while packing a CudaStructArguments"))
        return NULL;
    PyObject *r = repack_fields(k, obj, host);
    Py_LeaveRecursiveCall();
    return r;
}

static PyObject *repack_fields(cn_packer_t *k, PyObject *obj, int host)
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
    packed = cn_pack_values(k, &PyTuple_GET_ITEM(values, 0), host);
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
static state_t *stored_state(cn_packer_t *k, PyObject *obj, PyObject *dict)
{
    PyObject *st = NULL;
    if (dict != NULL) {
        st = PyDict_GetItemWithError(dict, s_state_attr);
        Py_XINCREF(st);
    }
    if (st == NULL && cn_optional_attr(obj, s_state_attr, &st) < 0) {
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

static int unchanged_fields(cn_packer_t *k, state_t *s, PyObject *obj, PyObject *dict);

/* 1 if every field of `obj` is what state `s` was packed from, 0 if not, -1 on error. Reading a
 * field may come back here without a Python frame in between (a property or descriptor in C
 * that packs the same object): the recursion is counted, so it ends in a RecursionError. */
static int unchanged(cn_packer_t *k, state_t *s, PyObject *obj, PyObject *dict)
{
    if (Py_EnterRecursiveCall(" while checking the fields of a CudaStructArguments"))
        return -1;
    int r = unchanged_fields(k, s, obj, dict);
    Py_LeaveRecursiveCall();
    return r;
}

static int unchanged_fields(cn_packer_t *k, state_t *s, PyObject *obj, PyObject *dict)
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
static PyObject *current_from_state(cn_packer_t *k, PyObject *obj, PyObject *dict, state_t *s)
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
static PyObject *current_packed(cn_packer_t *k, PyObject *obj)
{
    PyObject *dict = plain_dict(obj);
    PyObject *packed = current_from_state(k, obj, dict, stored_state(k, obj, dict));
    Py_XDECREF(dict);
    return packed;
}

CN_INTERNAL PyObject *cn_packer_repack(cn_packer_t *k, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return cn_raise(CN_ERR_TYPE, "repack() takes exactly 2 arguments (%zd given)", nargs);
    int host;
    if (host_flag(args[1], &host) < 0)
        return NULL;
    return repack_object(k, args[0], host);
}

CN_INTERNAL PyObject *cn_packer_current(cn_packer_t *k, PyObject *obj) { return current_packed(k, obj); }

/* ---------------------------------------------------------------- CudaStructArguments descriptors */

static cn_packer_t *class_packer(PyObject *self)
{
    /* A class attribute (set by CudaStructArguments.__init_subclass__). */
    PyObject *k = _PyType_Lookup(Py_TYPE(self), s_packer_attr);
    Py_XINCREF(k);
    if (k == NULL)
        k = Py_NewRef(Py_None);
    if (!Py_IS_TYPE(k, &cn_packer_type)) {
        Py_DECREF(k);
        PyErr_Format(PyExc_TypeError,
                     "%.200s has no struct: set 'struct_name' and 'fields' in a subclass before packing",
                     Py_TYPE(self)->tp_name);
        return NULL;
    }
    return (cn_packer_t *)k;
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
            PyObject *packed = current_from_state((cn_packer_t *)s->packer, self, dict, s);
            Py_DECREF(dict);
            return packed;
        }
        PyErr_Clear();
        Py_DECREF(dict);
    }
    cn_packer_t *k = class_packer(self);
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


static PyMethodDef struct_state_methods[] = {
    {"struct_arguments_descriptors", (PyCFunction)(void (*)(void))struct_arguments_descriptors, METH_FASTCALL,
     struct_arguments_descriptors_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_struct_state(PyObject *module)
{
    const cn_string_t names[] = {
        {&s_shape_attr, "shape"},
        {&s_packer_attr, "_cunumpy_packer"},
        {&s_state_attr, "_cunumpy_struct_state"},
        {&s_data_attr, "data"},
        {&s_ptr_attr, "ptr"},
        {&s_strides_attr, "strides"},
        {&s_dtype_attr, "dtype"},
        {&s_flags_attr, "flags"},
        {&s_c_contiguous_attr, "c_contiguous"},
        {&s_cai_attr, "__cuda_array_interface__"}};
    if (cn_intern_strings(names, sizeof(names) / sizeof(names[0])) < 0)
        return -1;
    if (PyType_Ready(&state_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "StructState", (PyObject *)&state_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, struct_state_methods);
}
