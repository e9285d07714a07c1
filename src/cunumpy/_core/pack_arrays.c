/* The launch packer's device arrays: reading them (CuPy's attribute protocol, the CUDA Array
 * Interface, or the C struct of a NumPy array for the fake CuPy and host arrays) and packing the
 * array kinds of the checker table (pointers and views): address, shape and element strides.
 *
 * Device arrays already seen in a slot are recognised through a weak reference, so the
 * common case (the same arrays every step) costs an identity test per argument: a CuPy
 * array's data pointer, dtype and contiguity never change for the life of the object. */
#include "pack_plan.h"

#include <structmember.h>

/* ---------------------------------------------------------------- small helpers */

static int has_attr(PyObject *obj, PyObject *name)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_HasAttrWithError(obj, name);
#else
    PyObject *r = NULL;
    int rc = _PyObject_LookupAttr(obj, name, &r);
    Py_XDECREF(r);
    return rc;
#endif
}

/* A device id read from an attribute value: an int, or an object with an int `id` (CuPy's
 * Device). -1 when it is neither (unknown device); never raises. */
static long long device_id_of(PyObject *v)
{
    PyObject *id = NULL;
    long long r = -1;
    if (PyLong_Check(v))
        id = Py_NewRef(v);
    else if (cn_optional_attr(v, cn_str.id, &id) < 0)
        PyErr_Clear();
    if (id != NULL && PyLong_Check(id) && !PyBool_Check(id)) {
        r = PyLong_AsLongLong(id);
        if (r == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            r = -1;
        }
    }
    Py_XDECREF(id);
    return r < 0 ? -1 : r;
}

/* 1 if `obj` follows CuPy's attribute protocol (it has `data` with a `ptr`), 0 if not, -1 on
 * error. Such objects are read through their attributes, others through the interface. */
CN_INTERNAL int cn_has_data_ptr(PyObject *obj)
{
    PyObject *data = NULL;
    if (cn_optional_attr(obj, cn_str.data, &data) < 0)
        return -1;
    if (data == NULL)
        return 0;
    int r = has_attr(data, cn_str.ptr);
    Py_DECREF(data);
    return r;
}

/* The pending exception as text (for a message that wraps it); clears it. */
static PyObject *take_error_text(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : PyUnicode_FromString("unknown error");
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (text == NULL) {
        PyErr_Clear();
        text = PyUnicode_FromString("unknown error");
    }
    return text;
}

/* Item size from an array-interface typestr such as "<f8". */
static Py_ssize_t typestr_itemsize(PyObject *typestr)
{
    const char *t = PyUnicode_Check(typestr) ? PyUnicode_AsUTF8(typestr) : NULL;
    if (t == NULL) {
        PyErr_Clear();
        return 1;
    }
    Py_ssize_t v = 0;
    /* Skip the byte order and kind characters, not past the end of a short typestr. */
    const char *c = t;
    for (int skip = 0; skip < 2 && *c != '\0'; skip++)
        c++;
    for (; *c >= '0' && *c <= '9' && v < 1 << 20; c++)
        v = v * 10 + (*c - '0');
    return v > 0 ? v : 1;
}

/* Read a sequence of up to MAX_NDIM Python ints into out; returns the length or -1. */
static Py_ssize_t read_ints(PyObject *seq, long long *out, const char *what)
{
    if (!PyTuple_Check(seq) && !PyList_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "the array's %s is not a tuple", what);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_NDIM) {
        PyErr_Format(PyExc_TypeError, "arrays with more than %d dimensions are not supported", MAX_NDIM);
        return -1;
    }
    /* An item's __index__ may change a list while it is read: read a tuple snapshot. */
    PyObject *snap = PyTuple_Check(seq) ? Py_NewRef(seq) : PyList_AsTuple(seq);
    if (snap == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(snap, k));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(snap);
            return -1;
        }
        out[k] = v;
    }
    Py_DECREF(snap);
    return n;
}

/* ---------------------------------------------------------------- the slot's cache */

static PyObject *weak_target(PyObject *ref)
{
    /* Borrowed-style: returns the referent (or NULL) without keeping a new reference. */
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) <= 0) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(obj); /* the caller holds the argument, so the object stays alive */
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    return obj == Py_None ? NULL : obj;
#endif
}

/* Both change the entry with no Python code between the first and the last write (the old
 * references are released after), so under the GIL a reader sees an old or a new entry whole. */
CN_INTERNAL void cn_slot_forget(slot_t *s)
{
    PyObject *seen = s->seen, *shape = s->seen_shape;
    s->seen = NULL;
    s->seen_shape = NULL;
    s->generation++;
    Py_XDECREF(seen);
    Py_XDECREF(shape);
}

static void slot_remember(slot_t *s, PyObject *obj, PyObject *shape, long long dev, const void *value,
                          Py_ssize_t size)
{
    if (Py_TYPE(obj)->tp_weaklistoffset == 0 || size > CACHE_BYTES) {
        cn_slot_forget(s);
        return;
    }
    PyObject *ref = PyWeakref_NewRef(obj, NULL); /* may run a GC pass, hence other threads */
    if (ref == NULL) {
        PyErr_Clear();
        cn_slot_forget(s);
        return;
    }
    PyObject *old_seen = s->seen, *old_shape = s->seen_shape;
    s->seen = ref;
    s->seen_shape = Py_XNewRef(shape);
    s->seen_dev = dev;
    memcpy(s->cached, value, (size_t)size);
    s->generation++;
    Py_XDECREF(old_seen);
    Py_XDECREF(old_shape);
}

/* ---------------------------------------------------------------- arrays read from their C struct */

CN_INTERNAL PyTypeObject *cn_ndarray_type;
CN_INTERNAL PyTypeObject *cn_fake_device_type;
CN_INTERNAL Py_ssize_t cn_fake_host_offset;

/* 1 if the C struct of `probe` says what `expect` = (data address, shape, strides, flags)
 * does, 0 if not, -1 on error. */
static int probe_agrees(PyObject *probe, PyObject *expect)
{
    if (!PyTuple_Check(expect) || PyTuple_GET_SIZE(expect) != 4) {
        PyErr_SetString(PyExc_TypeError, "register_ndarray_type(): each probe needs (data, shape, strides, flags)");
        return -1;
    }
    const cn_ndarray_fields *f = (const cn_ndarray_fields *)probe;
    unsigned long long data = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(expect, 0));
    long flags = PyLong_AsLong(PyTuple_GET_ITEM(expect, 3));
    if (PyErr_Occurred())
        return -1;
    PyObject *shape = PyTuple_GET_ITEM(expect, 1), *strides = PyTuple_GET_ITEM(expect, 2);
    if (!PyTuple_Check(shape) || !PyTuple_Check(strides) || PyTuple_GET_SIZE(shape) != PyTuple_GET_SIZE(strides))
        return 0;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if ((unsigned long long)(uintptr_t)f->data != data || f->nd != nd || f->flags != (int)flags)
        return 0;
    for (Py_ssize_t k = 0; k < nd; k++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
        Py_ssize_t st = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, k));
        if (PyErr_Occurred())
            return -1;
        if (f->dimensions[k] != d || f->strides[k] != st)
            return 0;
    }
    return 1;
}

PyDoc_STRVAR(register_ndarray_type_doc,
             "register_ndarray_type(ndarray, probes)\n--\n\n"
             "Read NumPy arrays (exactly of type `ndarray`) from their C struct when packing, after\n"
             "checking it on `probes`: pairs (array, (data address, shape, strides, flags)) with the\n"
             "values NumPy reports. Returns whether the fast reading is enabled.");

static PyObject *register_ndarray_type(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]))
        return cn_raise(CN_ERR_TYPE, "register_ndarray_type(ndarray, probes) takes a type and a tuple");
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *probes = args[1];
    int ok = type->tp_basicsize >= (Py_ssize_t)sizeof(cn_ndarray_fields) && PyTuple_GET_SIZE(probes) > 0;
    for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(probes); k++) {
        PyObject *pair = PyTuple_GET_ITEM(probes, k);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2)
            return cn_raise(CN_ERR_TYPE, "register_ndarray_type(): probes are (array, expected) pairs");
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(pair, 0), type)) {
            ok = 0;
            break;
        }
        int agrees = probe_agrees(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
        if (agrees < 0)
            return NULL;
        ok = agrees;
    }
    PyTypeObject *old = cn_ndarray_type;
    cn_ndarray_type = ok ? (PyTypeObject *)Py_NewRef(type) : NULL;
    Py_XDECREF(old);
    return PyBool_FromLong(ok);
}

PyDoc_STRVAR(register_fake_device_type_doc,
             "register_fake_device_type(type, slot)\n--\n\n"
             "Arrays exactly of `type` (the fake CuPy's ndarray) keep their host ndarray in the slot\n"
             "named `slot`: packing reads it from there. Returns whether it is enabled.");

static PyObject *register_fake_device_type(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyUnicode_Check(args[1]))
        return cn_raise(CN_ERR_TYPE, "register_fake_device_type(type, slot) takes a type and a str");
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *descr = PyDict_GetItemWithError(type->tp_dict, args[1]);
    if (descr == NULL && PyErr_Occurred())
        return NULL;
    int ok = descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type);
    Py_ssize_t offset = 0;
    if (ok) {
        const PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        ok = m->type == T_OBJECT_EX && m->offset >= (Py_ssize_t)sizeof(PyObject) &&
             m->offset <= type->tp_basicsize - (Py_ssize_t)sizeof(PyObject *);
        offset = m->offset;
    }
    PyTypeObject *old = cn_fake_device_type;
    cn_fake_host_offset = offset;
    cn_fake_device_type = ok ? (PyTypeObject *)Py_NewRef(type) : NULL;
    Py_XDECREF(old);
    return PyBool_FromLong(ok);
}

/* ---------------------------------------------------------------- reading a device array */

typedef struct {
    PyObject *dtype_or_typestr; /* new reference */
    PyObject *shape;            /* new reference */
    long long shape_v[MAX_NDIM];
    long long strides_v[MAX_NDIM]; /* bytes */
    Py_ssize_t ndim;
    int strides_known; /* 0: C-contiguous by definition (CAI strides None) */
    unsigned long long ptr;
    long long dev; /* device id of the memory (CuPy's data.device_id); -1 if unknown */
    int read_only; /* __cuda_array_interface__ data[1] is true */
    int from_attrs; /* read through the attribute protocol, with strides: .flags may disagree */
} array_info_t;

static void info_clear(array_info_t *a)
{
    Py_CLEAR(a->dtype_or_typestr);
    Py_CLEAR(a->shape);
}

/* Attributes of a device array: CuPy's attribute protocol (`attrs`: cupy.ndarray and objects
 * with `data.ptr`) or __cuda_array_interface__. Returns 0, or -1 with an exception set.
 *
 * The attribute protocol is `.dtype`, `.shape`, `.strides` (bytes), `.data.ptr` and the device
 * from `.data.device_id` or `.device` (an int or an object with `.id`); without `.strides` the
 * array must say `.flags.c_contiguous` (then it is read as C-contiguous). */
static int array_info(PyObject *obj, int attrs, array_info_t *a)
{
    memset(a, 0, sizeof(*a));
    a->dev = -1;
    PyObject *strides = NULL, *data = NULL, *ptr = NULL, *cai = NULL;
    if (attrs) {
        a->dtype_or_typestr = PyObject_GetAttr(obj, cn_str.dtype);
        if (a->dtype_or_typestr == NULL)
            goto fail;
        a->shape = PyObject_GetAttr(obj, cn_str.shape);
        if (a->shape == NULL || (a->ndim = read_ints(a->shape, a->shape_v, "shape")) < 0)
            goto fail;
        if (cn_optional_attr(obj, cn_str.strides, &strides) < 0)
            goto fail;
        if (strides != NULL && strides != Py_None) {
            if (read_ints(strides, a->strides_v, "strides") != a->ndim) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "the array's strides do not match its shape");
                goto fail;
            }
            a->strides_known = 1;
            a->from_attrs = 1;
        }
        else {
            /* No strides: only an array that says it is C-contiguous can be read. */
            PyObject *flags = PyObject_GetAttr(obj, cn_str.flags);
            if (flags == NULL) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "the array has neither strides nor flags.c_contiguous");
                goto fail;
            }
            PyObject *cc = PyObject_GetAttr(flags, cn_str.c_contiguous);
            Py_DECREF(flags);
            int is_c = cc == NULL ? -1 : PyObject_IsTrue(cc);
            Py_XDECREF(cc);
            if (is_c < 0)
                goto fail;
            if (!is_c) {
                PyErr_SetString(PyExc_TypeError, "the array has no strides and is not C-contiguous");
                goto fail;
            }
        }
        for (Py_ssize_t k = 0; k < a->ndim; k++) {
            if (a->shape_v[k] < 0) {
                PyErr_Format(PyExc_TypeError, "the array's shape has a negative extent (%lld)", a->shape_v[k]);
                goto fail;
            }
        }
        data = PyObject_GetAttr(obj, cn_str.data);
        if (data == NULL)
            goto fail;
        ptr = PyObject_GetAttr(data, cn_str.ptr);
        if (ptr != NULL && !PyLong_Check(ptr))
            Py_SETREF(ptr, PyNumber_Index(ptr)); /* e.g. a NumPy integer in a test double */
        if (ptr == NULL)
            goto fail;
        /* The device of the memory (cupy.cuda.MemoryPointer.device_id), else the array's
         * `.device`; unknown if neither says. */
        PyObject *dev = NULL;
        if (cn_optional_attr(data, cn_str.device_id, &dev) < 0)
            goto fail;
        if (dev == NULL && cn_optional_attr(obj, cn_str.device, &dev) < 0)
            goto fail;
        if (dev != NULL) {
            a->dev = device_id_of(dev);
            Py_DECREF(dev);
        }
    }
    else {
        cai = PyObject_GetAttr(obj, cn_str.cai);
        if (cai == NULL)
            goto fail;
        if (!PyDict_Check(cai)) {
            PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
            goto fail;
        }
        /* Read a private copy: a key's __eq__ (in the lookups) or an item's __index__ (in
         * read_ints) may change the object's dict and free the borrowed values. */
        Py_SETREF(cai, PyDict_Copy(cai));
        if (cai == NULL)
            goto fail;
        PyObject *ts = PyDict_GetItemWithError(cai, cn_str.typestr);
        PyObject *shape = PyDict_GetItemWithError(cai, cn_str.shape);
        PyObject *st = PyDict_GetItemWithError(cai, cn_str.strides);
        PyObject *dt = PyDict_GetItemWithError(cai, cn_str.data);
        if (PyErr_Occurred())
            goto fail;
        if (ts == NULL || shape == NULL || dt == NULL || !PyTuple_Check(dt) || PyTuple_GET_SIZE(dt) < 1) {
            PyErr_SetString(PyExc_TypeError, "incomplete __cuda_array_interface__");
            goto fail;
        }
        a->dtype_or_typestr = Py_NewRef(ts);
        a->shape = Py_NewRef(shape);
        if ((a->ndim = read_ints(shape, a->shape_v, "shape")) < 0)
            goto fail;
        /* What the CUDA Array Interface asks a consumer to honour, refused rather than ignored:
         * a mask (elements to skip), a producer stream (work to wait for), negative extents. */
        PyObject *mask = PyDict_GetItemWithError(cai, cn_str.mask);
        PyObject *stream = mask == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(cai, cn_str.stream);
        if (PyErr_Occurred())
            goto fail;
        if (mask != NULL && mask != Py_None) {
            PyErr_SetString(PyExc_TypeError, "a masked __cuda_array_interface__ ('mask' is not None) is "
                                             "not supported: the kernel would read masked elements");
            goto fail;
        }
        /* None: nothing to wait for. 1, the legacy default stream, is ordered with every
         * blocking stream (CuPy's and the default ones) by CUDA itself. Others are refused. */
        int legacy = stream != NULL && PyLong_CheckExact(stream) && PyLong_AsLong(stream) == 1;
        if (stream != NULL && stream != Py_None && !legacy) {
            PyErr_Format(PyExc_TypeError,
                         "the __cuda_array_interface__ names a producer stream (%R) that CudaKernel does "
                         "not wait for: synchronize it and export the array with 'stream': None",
                         stream);
            goto fail;
        }
        for (Py_ssize_t k = 0; k < a->ndim; k++) {
            if (a->shape_v[k] < 0) {
                PyErr_Format(PyExc_TypeError, "the array's shape has a negative extent (%lld)", a->shape_v[k]);
                goto fail;
            }
        }
        if (PyTuple_GET_SIZE(dt) >= 2) {
            int ro = PyObject_IsTrue(PyTuple_GET_ITEM(dt, 1));
            if (ro < 0)
                goto fail;
            a->read_only = ro;
        }
        if (st != NULL && st != Py_None) {
            if (read_ints(st, a->strides_v, "strides") != a->ndim) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "the array's strides do not match its shape");
                goto fail;
            }
            a->strides_known = 1;
        }
        ptr = Py_NewRef(PyTuple_GET_ITEM(dt, 0));
    }
    a->ptr = PyLong_AsUnsignedLongLong(ptr);
    if (a->ptr == (unsigned long long)-1 && PyErr_Occurred())
        goto fail;
    Py_XDECREF(strides);
    Py_XDECREF(data);
    Py_XDECREF(ptr);
    Py_XDECREF(cai);
    return 0;
fail:
    Py_XDECREF(strides);
    Py_XDECREF(data);
    Py_XDECREF(ptr);
    Py_XDECREF(cai);
    info_clear(a);
    return -1;
}

/* The same information from the C struct of a NumPy array, for an array of the fake CuPy (as
 * its attributes report it: data.ptr is 0 for an empty array, strides always given, device 0)
 * or, with `host`, a NumPy host array (as its __array_interface__ reports it: strides only when
 * not C-contiguous, read-only flag). 1 when read, 0 when `obj` is neither, -1 with an error. */
static int raw_array_info(PyObject *obj, int host, array_info_t *a)
{
    PyObject *inner = cn_fake_host_array(obj);
    cn_ndarray_t r;
    if (!cn_read_ndarray(inner != NULL ? inner : obj, &r) || (inner == NULL && !host))
        return 0;
    /* Every field is set below; the shape and strides arrays up to ndim only (clearing the
     * whole struct would cost more than the rest of the reading). */
    a->shape = NULL;
    a->read_only = 0;
    a->from_attrs = 0;
    if (r.nd > MAX_NDIM) {
        a->dtype_or_typestr = NULL;
        PyErr_Format(PyExc_TypeError, "arrays with more than %d dimensions are not supported", MAX_NDIM);
        return -1;
    }
    a->ndim = r.nd;
    int empty = 0;
    for (int k = 0; k < r.nd; k++) {
        a->shape_v[k] = r.dims[k];
        a->strides_v[k] = r.strides[k];
        empty |= r.dims[k] == 0;
    }
    a->dtype_or_typestr = Py_NewRef(r.descr);
    if (inner != NULL) {
        a->strides_known = 1;
        a->ptr = empty ? 0 : (unsigned long long)(uintptr_t)r.data;
        a->dev = 0;
    }
    else {
        a->strides_known = !(r.flags & CN_NPY_C_CONTIGUOUS);
        a->ptr = (unsigned long long)(uintptr_t)r.data;
        a->dev = -1;
        a->read_only = !(r.flags & CN_NPY_WRITEABLE);
    }
    return 1;
}

/* 1 when `obj` says `.flags.c_contiguous` is false (an array object is not contiguous when it
 * says so, whatever its strides say, as release 0.7.1 judged it), 0 when it says true or has no
 * flags, -1 with an exception. */
static int flags_say_not_contiguous(PyObject *obj)
{
    PyObject *flags = NULL;
    if (cn_optional_attr(obj, cn_str.flags, &flags) < 0)
        return -1;
    if (flags == NULL)
        return 0;
    PyObject *cc = NULL;
    int rc = cn_optional_attr(flags, cn_str.c_contiguous, &cc);
    Py_DECREF(flags);
    if (rc < 0)
        return -1;
    if (cc == NULL)
        return 0;
    int is_c = PyObject_IsTrue(cc);
    Py_DECREF(cc);
    return is_c < 0 ? -1 : !is_c;
}

static int c_contiguous(const array_info_t *a, Py_ssize_t itemsize)
{
    if (!a->strides_known)
        return 1;
    long long expected = itemsize;
    int beyond = 0; /* expected no longer fits: no stride can match it (a hostile interface) */
    for (Py_ssize_t k = a->ndim - 1; k >= 0; k--) {
        if (a->shape_v[k] == 0)
            return 1;
        if (a->shape_v[k] != 1 && (beyond || a->strides_v[k] != expected))
            return 0;
        if (!beyond && __builtin_mul_overflow(expected, a->shape_v[k], &expected))
            beyond = 1;
    }
    return 1;
}

/* The advice of not_device() for the active backend: _not_device_advice(obj) of
   cunumpy.kernels._cuda_kernel (loaded wherever a CudaKernel exists; looked up, never
   imported here), which on the NumPy backend names what runs a kernel on the CPU. The
   device-backend text where that cannot be had. */
static PyObject *not_device_advice(PyObject *obj)
{
    PyObject *advice = NULL;
    PyObject *module = PyImport_GetModule(cn_str.cuda_kernel_module);
    if (module != NULL) {
        advice = PyObject_CallMethodOneArg(module, cn_str.not_device_advice, obj);
        Py_DECREF(module);
        if (advice != NULL && !PyUnicode_Check(advice))
            Py_CLEAR(advice);
    }
    if (advice == NULL) {
        PyErr_Clear();
        advice = PyUnicode_FromString("CudaKernel never copies arrays to the device: create the array on the device "
                                      "(xp.asarray on the CuPy backend, xp.to_cupy or xp.as_device_array) once, "
                                      "where the data is made");
    }
    return advice;
}

/* Host arrays and other non-device objects get one message that says how to fix the call. */
static PyObject *not_device(const plan_t *p, Py_ssize_t i, PyObject *obj)
{
    PyObject *advice = not_device_advice(obj);
    if (advice == NULL)
        return NULL;
    cn_arg_error(PyExc_TypeError, p, i, "expected a device array (an object with __cuda_array_interface__), got %.200s; %U",
                 Py_TYPE(obj)->tp_name, advice);
    Py_DECREF(advice);
    return NULL;
}

/* An array whose memory lives on a device other than the current one (`cur`). */
static PyObject *other_device(const plan_t *p, Py_ssize_t i, long long dev, long long cur)
{
    return cn_arg_error(PyExc_ValueError, p, i,
                     "the array is on device %lld but the launch runs on the current device %lld; "
                     "make device %lld current (with cupy.cuda.Device(%lld):) or pass arrays of device %lld",
                     dev, cur, dev, dev, cur);
}

/* A pointer to a struct (slot ndim = -sizeof) also takes raw bytes: a uint8 array whose last
 * axis is the struct's size (CuPy has no structured dtypes). 1, 0, or -1 with an exception. */
static int struct_bytes(const slot_t *s, const array_info_t *a, int is_device)
{
    if (s->kind != CN_K_POINTER || s->ndim >= 0 || a->ndim < 1 || a->shape_v[a->ndim - 1] != -(long long)s->ndim)
        return 0;
    if (!is_device)
        return PyUnicode_Check(a->dtype_or_typestr) && PyUnicode_CompareWithASCIIString(a->dtype_or_typestr, "|u1") == 0;
    static PyObject *u1 = NULL;
    if (u1 == NULL && (u1 = PyUnicode_InternFromString("|u1")) == NULL)
        return -1;
    return cn_dtype_equal(a->dtype_or_typestr, u1);
}

static int dtype_matches(const slot_t *s, const array_info_t *a, int is_device)
{
    if (is_device)
        return cn_dtype_equal(a->dtype_or_typestr, s->dtype);
    return PyUnicode_Check(a->dtype_or_typestr) &&
           PyUnicode_Compare(a->dtype_or_typestr, s->typestr) == 0;
}

/* ---------------------------------------------------------------- the array kinds */

/* A device array already accepted in slot i, recognised by identity (weak reference): 1 with
 * its cached value copied to `out`, 0 if not cached (or changed), -1 with an exception. */
static int pack_cached(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f)
{
    slot_t *s = &p->slots[i];
    if (s->seen == NULL || weak_target(s->seen) != obj)
        return 0;
    if (f->cur_dev >= 0 && s->seen_dev >= 0 && s->seen_dev != f->cur_dev) {
        other_device(p, i, s->seen_dev, f->cur_dev);
        return -1;
    }
    if (!(s->flags & CN_KIND_SHAPE)) {
        memcpy(out, s->cached, (size_t)s->size);
        return 1;
    }
    /* A view also depends on the shape, which CuPy lets code assign in place. Reading
     * and comparing it runs Python code: the entry is copied only if no other thread
     * changed it meanwhile (else the full packing runs). */
    unsigned long long generation = s->generation;
    PyObject *seen_shape = Py_XNewRef(s->seen_shape);
    PyObject *shape = obj == f->first && f->first_shape != NULL ? Py_NewRef(f->first_shape)
                                                                 : PyObject_GetAttr(obj, cn_str.shape);
    if (shape == NULL) {
        Py_XDECREF(seen_shape);
        return -1;
    }
    int same = shape == seen_shape ||
               (seen_shape != NULL && PyObject_RichCompareBool(shape, seen_shape, Py_EQ) == 1);
    Py_DECREF(shape);
    Py_XDECREF(seen_shape);
    if (PyErr_Occurred())
        return -1;
    if (same && s->generation == generation) {
        memcpy(out, s->cached, (size_t)s->size);
        return 1;
    }
    return 0;
}

CN_INTERNAL int cn_pack_array(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f, int host)
{
    slot_t *s = &p->slots[i];
    array_info_t a;
    /* Arrays read from their C struct skip the cache: reading costs less than the lookup. */
    int got = raw_array_info(obj, host, &a);
    int cupy = got == 0 && cn_is_device(obj);
    int is_device = got != 0 || cupy; /* the dtype is an object (else a typestr) */
    if (got == 0) {
        int cached = cupy ? pack_cached(p, i, obj, out, f) : 0;
        if (cached != 0)
            return cached < 0 ? -1 : 0;
        if (cupy) {
            got = array_info(obj, 1, &a) < 0 ? -1 : 2;
        }
        else {
            /* CuPy's attribute protocol when the object has data.ptr (test doubles, other
             * device arrays), else its __cuda_array_interface__. */
            int duck = cn_has_data_ptr(obj);
            if (duck > 0) {
                got = array_info(obj, 1, &a) < 0 ? -1 : 3;
                is_device = 1;
                if (got < 0) {
                    /* Unreadable attributes: a complete interface still serves. */
                    PyObject *type, *value, *tb;
                    PyErr_Fetch(&type, &value, &tb);
                    int has = has_attr(obj, cn_str.cai);
                    if (has > 0 && array_info(obj, 0, &a) == 0) {
                        got = 3;
                        is_device = 0;
                        Py_XDECREF(type);
                        Py_XDECREF(value);
                        Py_XDECREF(tb);
                    }
                    else {
                        PyErr_Clear();
                        PyErr_Restore(type, value, tb);
                    }
                }
            }
            else if (duck == 0) {
                int has = has_attr(obj, cn_str.cai);
                if (has < 0)
                    return -1;
                if (!has) {
                    not_device(p, i, obj);
                    return -1;
                }
                got = array_info(obj, 0, &a) < 0 ? -1 : 3;
            }
            else {
                got = -1;
            }
        }
    }
    if (got < 0) {
        PyObject *why = take_error_text();
        cn_arg_error(PyExc_TypeError, p, i, "cannot read the device array: %U", why);
        Py_DECREF(why);
        return -1;
    }
    int rc = -1;
    if (f->cur_dev >= 0 && a.dev >= 0 && a.dev != f->cur_dev) {
        other_device(p, i, a.dev, f->cur_dev);
        goto done;
    }
    int raw_bytes = 0;
    if (s->flags & CN_KIND_TYPED) {
        int eq = dtype_matches(s, &a, is_device);
        if (eq < 0)
            goto done;
        if (!eq) {
            eq = raw_bytes = struct_bytes(s, &a, is_device);
            if (eq < 0)
                goto done;
        }
        if (!eq && s->kind == CN_K_POINTER && s->ndim < 0) {
            cn_arg_error(PyExc_TypeError, p, i,
                         "expected a structured array of dtype %S, or uint8 bytes with a last axis of %d, got %S "
                         "(arrays are never cast or copied)",
                         s->dtype, -s->ndim, a.dtype_or_typestr);
            goto done;
        }
        if (!eq) {
            cn_arg_error(PyExc_TypeError, p, i, "expected dtype %S, got %S (arrays are never cast or copied)",
                      s->dtype, a.dtype_or_typestr);
            goto done;
        }
    }
    if (s->kind == CN_K_POINTER && s->ndim > 0) {
        /* A pointer to a CUDA vector type (uint4*, float2*): the scalar dtype with a last axis
         * of the vector length, aligned as the vector type is. */
        if (a.ndim < 1 || a.shape_v[a.ndim - 1] != s->ndim) {
            cn_arg_error(PyExc_TypeError, p, i,
                         "a vector of %d components takes an array whose last axis has length %d, got shape "
                         "with %s %lld",
                         s->ndim, s->ndim, a.ndim < 1 ? "no axes:" : "last axis", a.ndim < 1 ? 0LL : a.shape_v[a.ndim - 1]);
            goto done;
        }
        Py_ssize_t bytes = s->itemsize * s->ndim;
        unsigned long long align = (unsigned long long)(s->ndim == 3 ? s->itemsize : (bytes < 16 ? bytes : 16));
        if (a.ptr % align != 0) {
            cn_arg_error(PyExc_TypeError, p, i,
                         "the array's address %p is not aligned to %llu bytes, as the vector type must be",
                         (void *)(uintptr_t)a.ptr, align);
            goto done;
        }
    }
    /* The parsed signature does not keep const, so whether the kernel writes the array is
     * unknown: read-only memory is refused rather than possibly written. */
    if (a.read_only) {
        cn_arg_error(PyExc_TypeError, p, i,
                  "the array is read-only (__cuda_array_interface__ data[1] is True) and CudaKernel "
                  "cannot tell whether the kernel writes it; pass a writable array");
        goto done;
    }
    Py_ssize_t itemsize = raw_bytes ? 1 : s->itemsize;
    if (!(s->flags & CN_KIND_TYPED)) {
        /* Contiguity of a void* argument is judged with the array's own item size. */
        itemsize = 1;
        if (a.ndim > 0 && a.strides_known) {
            if (is_device) {
                PyObject *isz = PyObject_GetAttrString(a.dtype_or_typestr, "itemsize");
                if (isz != NULL) {
                    itemsize = PyLong_AsSsize_t(isz);
                    Py_DECREF(isz);
                }
                if (itemsize <= 0) {
                    PyErr_Clear();
                    itemsize = 1;
                }
            }
            else {
                itemsize = typestr_itemsize(a.dtype_or_typestr);
            }
        }
    }
    if (s->flags & CN_KIND_CONTIGUOUS) {
        int not_c = !c_contiguous(&a, itemsize);
        if (!not_c && a.from_attrs && (not_c = flags_say_not_contiguous(obj)) < 0)
            goto done;
        if (not_c) {
            cn_arg_error(PyExc_TypeError, p, i,
                      "the array is not C-contiguous (e.g. a[:, 0:3]); pass xp.ascontiguousarray(a) "
                      "or declare the parameter as an ArrayND<T> view");
            goto done;
        }
    }
    unsigned long long ptr = a.ptr;
    memcpy(out, &ptr, 8);
    if (s->flags & CN_KIND_SHAPE) {
        if (a.ndim != s->ndim) {
            cn_arg_error(PyExc_TypeError, p, i, "expected a %d-dimensional array, got %zd dimensions", s->ndim,
                      a.ndim);
            goto done;
        }
        for (int k = 0; k < s->ndim; k++)
            memcpy(out + 8 + 8 * (size_t)k, &a.shape_v[k], 8);
        if (s->flags & CN_KIND_STRIDES) {
            for (int k = 0; k < s->ndim; k++) {
                long long st;
                if (a.strides_known) {
                    if (a.strides_v[k] % itemsize != 0) {
                        cn_arg_error(PyExc_TypeError, p, i,
                                  "stride %lld bytes of axis %d is not a multiple of the item size %zd",
                                  a.strides_v[k], k, itemsize);
                        goto done;
                    }
                    st = a.strides_v[k] / itemsize;
                }
                else {
                    st = 1;
                    for (int m = k + 1; m < s->ndim; m++) {
                        if (__builtin_mul_overflow(st, a.shape_v[m], &st)) {
                            cn_arg_error(PyExc_TypeError, p, i, "the array's shape is too large");
                            goto done;
                        }
                    }
                }
                memcpy(out + 8 + 8 * (size_t)(s->ndim + k), &st, 8);
            }
        }
    }
    if (cupy && got == 2 && !(s->kind == CN_K_POINTER && s->ndim != 0)) /* a CuPy array, not read from the C struct;
                                                                          vectors: the shape is checked each time */
        slot_remember(s, obj, a.shape, a.dev, out, s->size);
    rc = 0;
done:
    info_clear(&a);
    return rc;
}

static PyMethodDef arrays_methods[] = {
    {"register_ndarray_type", (PyCFunction)(void (*)(void))register_ndarray_type, METH_FASTCALL,
     register_ndarray_type_doc},
    {"register_fake_device_type", (PyCFunction)(void (*)(void))register_fake_device_type, METH_FASTCALL,
     register_fake_device_type_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_pack_arrays(PyObject *module) { return PyModule_AddFunctions(module, arrays_methods); }
