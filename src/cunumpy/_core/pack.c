/* Per-call argument checking and packing for CUDA launches.
 *
 * A LaunchPlan is built once per kernel from its parsed signature (one spec per parameter);
 * `plan.pack(*args)` then expands __cuda_args__ objects, checks every argument against its
 * parameter and writes the launch buffer: a table of one pointer per parameter followed by
 * the parameter values, exactly what cuLaunchKernel takes as `kernelParams`. `launch` hands
 * that buffer to the CUDA driver found in the process (loaded by CuPy); nothing here loads
 * a CUDA library by itself.
 *
 * Device arrays already seen in a slot are recognised through a weak reference, so the
 * common case (the same arrays every step) costs an identity test per argument: a CuPy
 * array's data pointer, dtype and contiguity never change for the life of the object. */
#include "common.h"
#include "pack.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include <structmember.h>
#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define CN_HAVE_DLFCN 1
#endif

enum { K_POINTER = 0, K_VOID_POINTER = 1, K_VIEW = 2, K_CVIEW = 3, K_SCALAR = 4, K_STRUCT = 5 };
enum { S_BOOL = 0, S_INT = 1, S_UINT = 2, S_FLOAT = 3, S_COMPLEX = 4 };
/* Actions for NumPy scalar types (values of the per-parameter table built in Python). */
enum { A_INDEX = 0, A_TRUTH = 1, A_FLOAT = 2, A_COMPLEX = 3 };

#define MAX_NDIM 16
#define MAX_FLATTEN_DEPTH 8
#define CACHE_BYTES (8 * (1 + 2 * MAX_NDIM))

typedef struct {
    int kind;
    int scalar;          /* S_* for K_SCALAR */
    Py_ssize_t itemsize; /* element size (pointers, views), value size (scalars, structs) */
    int ndim;            /* views */
    Py_ssize_t size;     /* bytes in the launch buffer */
    Py_ssize_t offset;   /* offset of the value in the launch buffer */
    PyObject *dtype;     /* numpy dtype (element, scalar or struct); NULL for void* */
    PyObject *typestr;   /* dtype.str, for __cuda_array_interface__ objects */
    PyObject *table;     /* dict: NumPy scalar type -> action (scalars) */
    PyObject *label;     /* "parameter 2 'double* x'" for messages */
    /* cache of the last device array accepted in this slot */
    PyObject *seen;      /* weak reference or NULL */
    PyObject *seen_shape;/* views: the shape the cached value was made from */
    long long seen_dev;  /* device id of the cached array (-1: unknown) */
    /* Bumped on every change of the cache: a reader that ran Python code (a .shape read, a
     * comparison, a GC pass) between its check and its copy re-checks it, because another
     * thread may have replaced the entry meanwhile (one kernel launched from many threads). */
    unsigned long long generation;
    unsigned char cached[CACHE_BYTES];
} slot_t;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    Py_ssize_t table_bytes; /* n * sizeof(void*) */
    Py_ssize_t total;       /* table + values */
    PyObject *name;         /* kernel name for messages */
    PyObject *void_type;    /* numpy.void */
    PyObject *generic_type; /* numpy.generic */
    slot_t *slots;
    /* Fast path of CudaKernel calls (configure_fast): a 1-D block, the size from the first
     * array, and the block already validated on device `fast_dev`. */
    int fast_ok;
    long long fast_block;
    long long fast_max_grid;
    long long fast_dev;    /* device id the checks were made on */
    PyObject *fast_getter; /* callable returning the current device id */
    int is_struct;         /* the fields of a struct (cn_struct_plan_new): messages name the field */
} plan_t;

static PyObject *s_dtype, *s_shape, *s_strides, *s_data, *s_ptr, *s_cai, *s_cuda_args, *s_typestr;
static PyObject *s_device_id, *s_device, *s_mask;
static PyObject *s_plan, *s_call_slow, *s_launch_1d, *s_n_threads, *s_grid, *s_block, *s_shared_mem, *s_stream;

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
static void slot_forget(slot_t *s)
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
        slot_forget(s);
        return;
    }
    PyObject *ref = PyWeakref_NewRef(obj, NULL); /* may run a GC pass, hence other threads */
    if (ref == NULL) {
        PyErr_Clear();
        slot_forget(s);
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

static int dtype_equal(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

static PyObject *arg_error(PyObject *exc, const plan_t *p, Py_ssize_t i, const char *fmt, ...)
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
} array_info_t;

static void info_clear(array_info_t *a)
{
    Py_CLEAR(a->dtype_or_typestr);
    Py_CLEAR(a->shape);
}

/* Attributes of a device array (cupy.ndarray: attributes; others: __cuda_array_interface__).
 * Returns 0, or -1 with an exception set. */
static int array_info(PyObject *obj, int is_device, array_info_t *a)
{
    memset(a, 0, sizeof(*a));
    a->dev = -1;
    PyObject *strides = NULL, *data = NULL, *ptr = NULL, *cai = NULL;
    if (is_device) {
        a->dtype_or_typestr = PyObject_GetAttr(obj, s_dtype);
        if (a->dtype_or_typestr == NULL)
            goto fail;
        a->shape = PyObject_GetAttr(obj, s_shape);
        if (a->shape == NULL || (a->ndim = read_ints(a->shape, a->shape_v, "shape")) < 0)
            goto fail;
        strides = PyObject_GetAttr(obj, s_strides);
        if (strides == NULL || read_ints(strides, a->strides_v, "strides") != a->ndim) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "the array's strides do not match its shape");
            goto fail;
        }
        a->strides_known = 1;
        data = PyObject_GetAttr(obj, s_data);
        if (data == NULL)
            goto fail;
        ptr = PyObject_GetAttr(data, s_ptr);
        if (ptr == NULL)
            goto fail;
        /* The device of the memory (cupy.cuda.MemoryPointer.device_id); unknown if absent. */
        PyObject *dev = NULL;
#if PY_VERSION_HEX >= 0x030D0000
        if (PyObject_GetOptionalAttr(data, s_device_id, &dev) < 0)
            goto fail;
#else
        if (_PyObject_LookupAttr(data, s_device_id, &dev) < 0)
            goto fail;
#endif
        if (dev != NULL) {
            if (PyLong_Check(dev)) {
                a->dev = PyLong_AsLongLong(dev);
                if (a->dev == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    a->dev = -1;
                }
            }
            Py_DECREF(dev);
        }
    }
    else {
        cai = PyObject_GetAttr(obj, s_cai);
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
        PyObject *ts = PyDict_GetItemWithError(cai, s_typestr);
        PyObject *shape = PyDict_GetItemWithError(cai, s_shape);
        PyObject *st = PyDict_GetItemWithError(cai, s_strides);
        PyObject *dt = PyDict_GetItemWithError(cai, s_data);
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
        PyObject *mask = PyDict_GetItemWithError(cai, s_mask);
        PyObject *stream = mask == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(cai, s_stream);
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

/* Host arrays and other non-device objects get one message that says how to fix the call. */
static PyObject *not_device(const plan_t *p, Py_ssize_t i, PyObject *obj)
{
    return arg_error(PyExc_TypeError, p, i,
                     "expected a device array (an object with __cuda_array_interface__), got %.200s; "
                     "CudaKernel never copies arrays to the device: create the array on the device "
                     "(xp.asarray on the CuPy backend, xp.to_cupy or xp.as_device_array) once, "
                     "where the data is made",
                     Py_TYPE(obj)->tp_name);
}

/* An array whose memory lives on a device other than the current one (`cur`). */
static PyObject *other_device(const plan_t *p, Py_ssize_t i, long long dev, long long cur)
{
    return arg_error(PyExc_ValueError, p, i,
                     "the array is on device %lld but the launch runs on the current device %lld; "
                     "make device %lld current (with cupy.cuda.Device(%lld):) or pass arrays of device %lld",
                     dev, cur, dev, dev, cur);
}

static int dtype_matches(const slot_t *s, const array_info_t *a, int is_device)
{
    if (is_device)
        return dtype_equal(a->dtype_or_typestr, s->dtype);
    return PyUnicode_Check(a->dtype_or_typestr) &&
           PyUnicode_Compare(a->dtype_or_typestr, s->typestr) == 0;
}

/* ---------------------------------------------------------------- per-kind packing */

typedef struct {
    PyObject **items;  /* borrowed (kept alive by args or by `keep`) */
    Py_ssize_t n, cap; /* cap = number of parameters: more are counted, not stored */
    PyObject *keep;    /* list of __cuda_args__ results */
    PyObject *first;   /* first device array with ndim >= 1 (borrowed) */
    PyObject *first_shape; /* its shape (owned) */
    int composite_first; /* a packed struct value (whose arrays are hidden) came before it */
    int struct_seen;
    PyTypeObject *void_type;
    long long cur_dev;   /* the current device, or -1: no device check */
} flat_t;


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
    if (s->kind != K_VIEW && s->kind != K_CVIEW) {
        memcpy(out, s->cached, (size_t)s->size);
        return 1;
    }
    /* A view also depends on the shape, which CuPy lets code assign in place. Reading
     * and comparing it runs Python code: the entry is copied only if no other thread
     * changed it meanwhile (else the full packing runs). */
    unsigned long long generation = s->generation;
    PyObject *seen_shape = Py_XNewRef(s->seen_shape);
    PyObject *shape = obj == f->first ? Py_NewRef(f->first_shape) : PyObject_GetAttr(obj, s_shape);
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

static int pack_array(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f, int host)
{
    slot_t *s = &p->slots[i];
    array_info_t a;
    /* Arrays read from their C struct skip the cache: reading costs less than the lookup. */
    int got = raw_array_info(obj, host, &a);
    int is_device = got != 0 || cn_is_device(obj); /* read from the struct: the dtype is an object */
    if (got == 0) {
        int cached = is_device ? pack_cached(p, i, obj, out, f) : 0;
        if (cached != 0)
            return cached < 0 ? -1 : 0;
        if (!is_device) {
            int has = has_attr(obj, s_cai);
            if (has < 0)
                return -1;
            if (!has) {
                not_device(p, i, obj);
                return -1;
            }
        }
        got = array_info(obj, is_device, &a) < 0 ? -1 : 2;
    }
    if (got < 0) {
        PyObject *why = take_error_text();
        arg_error(PyExc_TypeError, p, i, "cannot read the device array: %U", why);
        Py_DECREF(why);
        return -1;
    }
    int rc = -1;
    if (f->cur_dev >= 0 && a.dev >= 0 && a.dev != f->cur_dev) {
        other_device(p, i, a.dev, f->cur_dev);
        goto done;
    }
    if (s->kind != K_VOID_POINTER) {
        int eq = dtype_matches(s, &a, is_device);
        if (eq < 0)
            goto done;
        if (!eq) {
            arg_error(PyExc_TypeError, p, i, "expected dtype %S, got %S (arrays are never cast or copied)",
                      s->dtype, a.dtype_or_typestr);
            goto done;
        }
    }
    /* The parsed signature does not keep const, so whether the kernel writes the array is
     * unknown: read-only memory is refused rather than possibly written. */
    if (a.read_only) {
        arg_error(PyExc_TypeError, p, i,
                  "the array is read-only (__cuda_array_interface__ data[1] is True) and CudaKernel "
                  "cannot tell whether the kernel writes it; pass a writable array");
        goto done;
    }
    Py_ssize_t itemsize = s->itemsize;
    if (s->kind == K_VOID_POINTER) {
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
    if (s->kind == K_POINTER || s->kind == K_VOID_POINTER || s->kind == K_CVIEW) {
        if (!c_contiguous(&a, itemsize)) {
            arg_error(PyExc_TypeError, p, i,
                      "the array is not C-contiguous (e.g. a[:, 0:3]); pass xp.ascontiguousarray(a) "
                      "or declare the parameter as an ArrayND<T> view");
            goto done;
        }
    }
    unsigned long long ptr = a.ptr;
    memcpy(out, &ptr, 8);
    if (s->kind == K_VIEW || s->kind == K_CVIEW) {
        if (a.ndim != s->ndim) {
            arg_error(PyExc_TypeError, p, i, "expected a %d-dimensional array, got %zd dimensions", s->ndim,
                      a.ndim);
            goto done;
        }
        for (int k = 0; k < s->ndim; k++)
            memcpy(out + 8 + 8 * k, &a.shape_v[k], 8);
        if (s->kind == K_VIEW) {
            for (int k = 0; k < s->ndim; k++) {
                long long st;
                if (a.strides_known) {
                    if (a.strides_v[k] % itemsize != 0) {
                        arg_error(PyExc_TypeError, p, i,
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
                            arg_error(PyExc_TypeError, p, i, "the array's shape is too large");
                            goto done;
                        }
                    }
                }
                memcpy(out + 8 + 8 * s->ndim + 8 * k, &st, 8);
            }
        }
    }
    if (is_device && got == 2) /* not read from the C struct */
        slot_remember(s, obj, a.shape, a.dev, out, s->size);
    rc = 0;
done:
    info_clear(&a);
    return rc;
}

static const char *scalar_kind_name(const slot_t *s)
{
    switch (s->scalar) {
    case S_BOOL:
        return "a bool";
    case S_INT:
    case S_UINT:
        return "an integer";
    case S_FLOAT:
        return "a floating";
    default:
        return "a complex";
    }
}

/* Python int -> integer parameter, range-checked. `value` is a PyLong. */
static int put_int(plan_t *p, Py_ssize_t i, PyObject *value, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    int bits = (int)(8 * s->itemsize);
    int ovf = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &ovf);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (s->scalar == S_INT) {
        long long lo = bits == 64 ? (long long)(-9223372036854775807LL - 1) : -(1LL << (bits - 1));
        long long hi = bits == 64 ? 9223372036854775807LL : (1LL << (bits - 1)) - 1;
        if (ovf != 0 || v < lo || v > hi) {
            arg_error(PyExc_OverflowError, p, i, "%R is out of range for %S [%lld, %lld]", value, s->dtype, lo, hi);
            return -1;
        }
        switch (bits) {
        case 8: { int8_t x = (int8_t)v; memcpy(out, &x, 1); break; }
        case 16: { int16_t x = (int16_t)v; memcpy(out, &x, 2); break; }
        case 32: { int32_t x = (int32_t)v; memcpy(out, &x, 4); break; }
        default: memcpy(out, &v, 8); break;
        }
        return 0;
    }
    unsigned long long hi = bits == 64 ? 18446744073709551615ULL : (1ULL << bits) - 1;
    unsigned long long u;
    if (ovf < 0 || (ovf == 0 && v < 0)) {
        u = 0;
        goto range;
    }
    if (ovf > 0) {
        u = PyLong_AsUnsignedLongLong(value);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto range;
        }
    }
    else {
        u = (unsigned long long)v;
    }
    if (u > hi)
        goto range;
    switch (bits) {
    case 8: { uint8_t x = (uint8_t)u; memcpy(out, &x, 1); break; }
    case 16: { uint16_t x = (uint16_t)u; memcpy(out, &x, 2); break; }
    case 32: { uint32_t x = (uint32_t)u; memcpy(out, &x, 4); break; }
    default: memcpy(out, &u, 8); break;
    }
    return 0;
range:
    arg_error(PyExc_OverflowError, p, i, "%R is out of range for %S [0, %llu]", value, s->dtype, hi);
    return -1;
}

static void put_float(const slot_t *s, double d, unsigned char *out)
{
    if (s->itemsize == 4) {
        float f = (float)d;
        memcpy(out, &f, 4);
    }
    else {
        memcpy(out, &d, 8);
    }
}

static void put_complex(const slot_t *s, Py_complex c, unsigned char *out)
{
    if (s->itemsize == 8) {
        float f[2] = {(float)c.real, (float)c.imag};
        memcpy(out, f, 8);
    }
    else {
        double d[2] = {c.real, c.imag};
        memcpy(out, d, 16);
    }
}

/* A double for a float or complex<float> parameter: past FLT_MAX it would silently become inf
 * (the C conversion is even undefined): an OverflowError naming the kernel and the parameter,
 * as for integers. An infinity passed as such stays one. */
static int check_single_range(plan_t *p, Py_ssize_t i, PyObject *obj, double re, double im)
{
    const slot_t *s = &p->slots[i];
    int single = (s->scalar == S_FLOAT && s->itemsize == 4) || (s->scalar == S_COMPLEX && s->itemsize == 8);
    if (!single || ((!isfinite(re) || fabs(re) <= FLT_MAX) && (!isfinite(im) || fabs(im) <= FLT_MAX)))
        return 0;
    if (PyFloat_CheckExact(obj) || PyComplex_CheckExact(obj))
        arg_error(PyExc_OverflowError, p, i, "%R is out of range for %S (largest finite value 3.4028235e+38)",
                  obj, s->dtype);
    else
        arg_error(PyExc_OverflowError, p, i, "the value is out of range for %S (largest finite value 3.4028235e+38)",
                  s->dtype);
    return -1;
}

/* An int too large for a double: the OverflowError names the kernel and the parameter. */
static double int_as_double(plan_t *p, Py_ssize_t i, PyObject *obj)
{
    double d = PyLong_AsDouble(obj);
    if (d == -1.0 && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        arg_error(PyExc_OverflowError, p, i, "the int is out of range for %S", p->slots[i].dtype);
    }
    return d;
}

static int put_number(plan_t *p, Py_ssize_t i, PyObject *obj, int action, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    switch (action) {
    case A_INDEX: {
        PyObject *v = PyNumber_Index(obj);
        if (v == NULL)
            return -1;
        int r = put_int(p, i, v, out);
        Py_DECREF(v);
        return r;
    }
    case A_TRUTH: {
        int t = PyObject_IsTrue(obj);
        if (t < 0)
            return -1;
        if (s->scalar == S_FLOAT)
            put_float(s, (double)t, out);
        else if (s->scalar == S_COMPLEX)
            put_complex(s, (Py_complex){(double)t, 0.0}, out);
        else {
            memset(out, 0, (size_t)s->itemsize);
            out[0] = (unsigned char)t; /* little-endian targets only (CUDA) */
        }
        return 0;
    }
    case A_FLOAT: {
        double d = PyFloat_AsDouble(obj);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (check_single_range(p, i, obj, d, 0.0) < 0)
            return -1;
        if (s->scalar == S_COMPLEX)
            put_complex(s, (Py_complex){d, 0.0}, out);
        else
            put_float(s, d, out);
        return 0;
    }
    default: {
        Py_complex c = PyComplex_AsCComplex(obj);
        if (c.real == -1.0 && PyErr_Occurred())
            return -1;
        if (check_single_range(p, i, obj, c.real, c.imag) < 0)
            return -1;
        put_complex(s, c, out);
        return 0;
    }
    }
}

static int pack_scalar(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyBool_Type) {
        if (s->scalar == S_BOOL || s->scalar == S_INT || s->scalar == S_UINT)
            return put_number(p, i, obj, A_TRUTH, out);
        arg_error(PyExc_TypeError, p, i, "a Python bool is not accepted for %s parameter", scalar_kind_name(s));
        return -1;
    }
    if (t == &PyLong_Type)
        goto python_int;
    if (t == &PyFloat_Type)
        goto python_float;
    if (t == &PyComplex_Type)
        goto python_complex;
    {
        PyObject *action = PyDict_GetItemWithError(s->table, (PyObject *)t);
        if (action != NULL)
            return put_number(p, i, obj, (int)PyLong_AsLong(action), out);
        if (PyErr_Occurred())
            return -1;
    }
    if (PyObject_TypeCheck(obj, (PyTypeObject *)p->generic_type)) {
        PyObject *dt = PyObject_GetAttr(obj, s_dtype);
        if (dt == NULL)
            return -1;
        arg_error(PyExc_TypeError, p, i, "a NumPy %S scalar does not cast safely to %S", dt, s->dtype);
        Py_DECREF(dt);
        return -1;
    }
    if (PyLong_Check(obj))
        goto python_int;
    if (PyFloat_Check(obj))
        goto python_float;
    if (PyComplex_Check(obj))
        goto python_complex;
    arg_error(PyExc_TypeError, p, i, "expected %s scalar, got %.200s", scalar_kind_name(s), t->tp_name);
    return -1;
python_int:
    if (s->scalar == S_INT || s->scalar == S_UINT)
        return put_int(p, i, obj, out);
    if (s->scalar == S_FLOAT || s->scalar == S_COMPLEX) {
        double d = int_as_double(p, i, obj);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (check_single_range(p, i, obj, d, 0.0) < 0)
            return -1;
        if (s->scalar == S_COMPLEX)
            put_complex(s, (Py_complex){d, 0.0}, out);
        else
            put_float(s, d, out);
        return 0;
    }
    arg_error(PyExc_TypeError, p, i, "a Python int is not accepted for a bool parameter (pass True/False)");
    return -1;
python_float:
    if (s->scalar == S_FLOAT || s->scalar == S_COMPLEX)
        return put_number(p, i, obj, A_FLOAT, out);
    arg_error(PyExc_TypeError, p, i, "a Python float is not accepted for %s parameter", scalar_kind_name(s));
    return -1;
python_complex:
    if (s->scalar == S_COMPLEX)
        return put_number(p, i, obj, A_COMPLEX, out);
    arg_error(PyExc_TypeError, p, i, "a Python complex is not accepted for %s parameter", scalar_kind_name(s));
    return -1;
}

static int pack_struct(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    if (Py_TYPE(obj) != (PyTypeObject *)p->void_type) {
        arg_error(PyExc_TypeError, p, i,
                  "expected a packed value of the struct (a CudaStructValue or CudaStructArguments), got %.200s",
                  Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *dt = PyObject_GetAttr(obj, s_dtype);
    if (dt == NULL)
        return -1;
    int eq = dtype_equal(dt, s->dtype);
    if (eq <= 0) {
        if (eq == 0)
            arg_error(PyExc_TypeError, p, i, "the packed value has dtype %S, expected the struct's %S", dt, s->dtype);
        Py_DECREF(dt);
        return -1;
    }
    Py_DECREF(dt);
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return -1;
    int rc = 0;
    if (view.len != s->size) {
        arg_error(PyExc_TypeError, p, i, "the packed value has %zd bytes, expected %zd", view.len, s->size);
        rc = -1;
    }
    else {
        memcpy(out, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return rc;
}

/* ---------------------------------------------------------------- flattening */


static int needs_expansion(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || t == &PyComplex_Type)
        return 0;
    if (cn_is_device(obj))
        return 0;
    return _PyType_Lookup(t, s_cuda_args) != NULL;
}

static int flatten(PyObject *const *args, Py_ssize_t nargs, flat_t *f, int depth)
{
    for (Py_ssize_t k = 0; k < nargs; k++) {
        PyObject *obj = args[k];
        if (needs_expansion(obj)) {
            if (depth >= MAX_FLATTEN_DEPTH) {
                PyErr_SetString(PyExc_TypeError, "__cuda_args__ nested too deeply");
                return -1;
            }
            PyObject *r = PyObject_CallMethodNoArgs(obj, s_cuda_args);
            if (r == NULL)
                return -1;
            if (!PyTuple_Check(r)) {
                PyErr_Format(PyExc_TypeError, "%.200s.__cuda_args__() must return a tuple, not %.200s",
                             Py_TYPE(obj)->tp_name, Py_TYPE(r)->tp_name);
                Py_DECREF(r);
                return -1;
            }
            if (f->keep == NULL && (f->keep = PyList_New(0)) == NULL) {
                Py_DECREF(r);
                return -1;
            }
            int err = PyList_Append(f->keep, r);
            Py_DECREF(r);
            if (err < 0)
                return -1;
            if (flatten(&PyTuple_GET_ITEM(r, 0), PyTuple_GET_SIZE(r), f, depth + 1) < 0)
                return -1;
            continue;
        }
        if (f->first == NULL && cn_is_device(obj)) {
            PyObject *shape = PyObject_GetAttr(obj, s_shape);
            if (shape == NULL)
                return -1;
            int nd = PyTuple_Check(shape) ? (int)PyTuple_GET_SIZE(shape) : 1;
            if (nd >= 1) {
                f->first = obj;
                f->first_shape = shape; /* owned */
                f->composite_first = f->struct_seen;
            }
            else {
                Py_DECREF(shape);
            }
        }
        else if (f->first == NULL && Py_TYPE(obj) == f->void_type) {
            f->struct_seen = 1;
        }
        if (f->n < f->cap)
            f->items[f->n] = obj;
        f->n++;
    }
    return 0;
}

/* ---------------------------------------------------------------- the plan type */

static void plan_dealloc(plan_t *p)
{
    if (p->slots != NULL) {
        for (Py_ssize_t i = 0; i < p->n; i++) {
            slot_t *s = &p->slots[i];
            Py_XDECREF(s->dtype);
            Py_XDECREF(s->typestr);
            Py_XDECREF(s->table);
            Py_XDECREF(s->label);
            slot_forget(s);
        }
        PyMem_Free(p->slots);
    }
    Py_XDECREF(p->fast_getter);
    Py_XDECREF(p->name);
    Py_XDECREF(p->void_type);
    Py_XDECREF(p->generic_type);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

PyDoc_STRVAR(pack_doc,
             "pack(*args, device=None) -> (packed, first_shape, struct_first)\n--\n\n"
             "Check the arguments of one launch and pack them: `packed` holds one pointer per\n"
             "parameter followed by the values (cuLaunchKernel's kernelParams); `first_shape` is\n"
             "the shape of the first device array with at least one dimension (None if none),\n"
             "and `struct_first` tells whether a packed struct value (whose arrays are hidden)\n"
             "came before it. With `device` (the current device id), a CuPy array on another\n"
             "device raises ValueError.");

/* A device id given from Python: None -> -1 (no check); an int >= 0; else TypeError. */
static int device_arg(PyObject *obj, long long *out)
{
    if (obj == Py_None) {
        *out = -1;
        return 0;
    }
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "device must be an int or None, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v < 0 ? -1 : v;
    return 0;
}

/* Check and pack one call. On success returns 0 with `*packed` and `*first_shape` (new
 * references; the shape may be NULL) and `*struct_first` set; -1 with an exception. */
static int pack_call(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur_dev,
                     PyObject **packed_out, PyObject **first_shape, int *struct_first)
{
    PyObject *small[32];
    flat_t f = {small, 0, p->n, NULL, NULL, NULL, 0, 0, (PyTypeObject *)p->void_type, cur_dev};
    if (p->n > 32) {
        f.items = (PyObject **)PyMem_Malloc((size_t)p->n * sizeof(PyObject *));
        if (f.items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    PyObject *packed = NULL;
    int rc = -1;
    if (flatten(args, nargs, &f, 0) < 0)
        goto done;
    if (f.n != p->n) {
        PyErr_Format(PyExc_TypeError, "kernel '%U' takes %zd argument%s, got %zd%s", p->name, p->n,
                     p->n == 1 ? "" : "s", f.n, f.keep ? " (after expanding __cuda_args__)" : "");
        goto done;
    }
    packed = PyBytes_FromStringAndSize(NULL, p->total);
    if (packed == NULL)
        goto done;
    unsigned char *buf = (unsigned char *)PyBytes_AS_STRING(packed);
    memset(buf + p->table_bytes, 0, (size_t)(p->total - p->table_bytes));
    for (Py_ssize_t i = 0; i < p->n; i++) {
        slot_t *s = &p->slots[i];
        unsigned char *out = buf + s->offset;
        void *where = out;
        memcpy(buf + i * (Py_ssize_t)sizeof(void *), &where, sizeof(void *));
        PyObject *obj = f.items[i];
        int r;
        switch (s->kind) {
        case K_SCALAR:
            r = pack_scalar(p, i, obj, out);
            break;
        case K_STRUCT:
            r = pack_struct(p, i, obj, out);
            break;
        default:
            r = pack_array(p, i, obj, out, &f, 0);
            break;
        }
        if (r < 0)
            goto done;
    }
    *packed_out = packed;
    packed = NULL;
    *first_shape = f.first_shape;
    f.first_shape = NULL;
    *struct_first = f.first ? f.composite_first : f.struct_seen;
    rc = 0;
done:
    Py_XDECREF(packed);
    Py_XDECREF(f.first_shape);
    Py_XDECREF(f.keep);
    if (f.items != small)
        PyMem_Free(f.items);
    return rc;
}

static PyObject *plan_pack(plan_t *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *packed, *shape;
    int struct_first;
    long long cur = -1;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        if (!(PyUnicode_Check(name) && PyUnicode_Compare(name, s_device) == 0))
            return cn_raise(CN_ERR_TYPE, "pack() got an unexpected keyword argument '%S'", name);
        if (device_arg(args[nargs + k], &cur) < 0)
            return NULL;
    }
    if (pack_call(p, args, nargs, cur, &packed, &shape, &struct_first) < 0)
        return NULL;
    return Py_BuildValue("(NNN)", packed, shape ? shape : Py_NewRef(Py_None), PyBool_FromLong(struct_first));
}

PyDoc_STRVAR(configure_fast_doc,
             "configure_fast(block, device, max_grid, device_getter) or configure_fast(None)\n--\n\n"
             "Enable (or disable) the fast path of kernel calls: 1-D block `block` validated on\n"
             "`device`, whose largest grid x dimension is `max_grid`; `device_getter()` returns\n"
             "the current device.");

static PyObject *plan_configure_fast(plan_t *p, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs == 1 && args[0] == Py_None) {
        p->fast_ok = 0;
        Py_CLEAR(p->fast_getter);
        Py_RETURN_NONE;
    }
    if (nargs != 4)
        return cn_raise(CN_ERR_TYPE, "configure_fast() takes 4 arguments or None");
    long long block = PyLong_AsLongLong(args[0]);
    if (block == -1 && PyErr_Occurred())
        return NULL;
    long long max_grid = PyLong_AsLongLong(args[2]);
    if (max_grid == -1 && PyErr_Occurred())
        return NULL;
    if (block < 1 || max_grid < 0)
        return cn_raise(CN_ERR_VALUE, "configure_fast(): block must be >= 1 and max_grid >= 0");
    if (!PyCallable_Check(args[3]))
        return cn_raise(CN_ERR_TYPE, "configure_fast(): device_getter must be callable");
    long long dev = PyLong_Check(args[1]) ? PyLong_AsLongLong(args[1]) : -1;
    if (dev == -1 && PyErr_Occurred())
        return NULL;
    if (dev < 0)
        return cn_raise(CN_ERR_VALUE, "configure_fast(): device must be an int >= 0");
    p->fast_block = block;
    p->fast_max_grid = max_grid;
    p->fast_dev = dev;
    Py_XSETREF(p->fast_getter, Py_NewRef(args[3]));
    p->fast_ok = 1;
    Py_RETURN_NONE;
}

static PyObject *plan_forget(plan_t *p, PyObject *unused)
{
    for (Py_ssize_t i = 0; i < p->n; i++)
        slot_forget(&p->slots[i]);
    Py_RETURN_NONE;
}

static PyObject *plan_get_size(plan_t *p, void *c) { return PyLong_FromSsize_t(p->n); }

static PyObject *plan_get_offsets(plan_t *p, void *c)
{
    PyObject *t = PyTuple_New(p->n);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < p->n; i++) {
        PyObject *v = Py_BuildValue("(nn)", p->slots[i].offset, p->slots[i].size);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyMethodDef plan_methods[] = {
    {"pack", (PyCFunction)(void (*)(void))plan_pack, METH_FASTCALL | METH_KEYWORDS, pack_doc},
    {"forget", (PyCFunction)plan_forget, METH_NOARGS, "Drop the cached device arrays of every slot."},
    {"configure_fast", (PyCFunction)(void (*)(void))plan_configure_fast, METH_FASTCALL, configure_fast_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef plan_getset[] = {
    {"n_params", (getter)plan_get_size, NULL, "number of parameters", NULL},
    {"layout", (getter)plan_get_offsets, NULL, "(offset, size) of each value in the packed buffer", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject plan_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.LaunchPlan",
    .tp_basicsize = sizeof(plan_t),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Per-kernel argument plan built by launch_plan(); see pack().",
    .tp_methods = plan_methods,
    .tp_getset = plan_getset,
};

static int get_item_ssize(PyObject *t, Py_ssize_t k, Py_ssize_t *out)
{
    *out = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, k));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

PyDoc_STRVAR(launch_plan_doc,
             "launch_plan(name, specs, void_type, generic_type)\n--\n\n"
             "Build the argument plan of kernel `name`. One spec per parameter:\n"
             "(kind, label, dtype, typestr, itemsize, ndim, scalar, size, align, table) with kind\n"
             "0 pointer, 1 void*, 2 ArrayND, 3 CArrayND, 4 scalar, 5 struct; scalar 0 bool,\n"
             "1 signed, 2 unsigned, 3 float, 4 complex; table maps NumPy scalar types to actions\n"
             "(0 by value as integer, 1 truth value, 2 as float, 3 as complex).");

static PyObject *launch_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return cn_raise(CN_ERR_TYPE, "launch_plan() takes exactly 4 arguments (%zd given)", nargs);
    PyObject *name = args[0], *specs = args[1], *void_type = args[2], *generic_type = args[3];
    if (!PyUnicode_Check(name))
        return cn_raise(CN_ERR_TYPE, "launch_plan(): 'name' must be a str");
    if (!PyTuple_Check(specs))
        return cn_raise(CN_ERR_TYPE, "launch_plan(): 'specs' must be a tuple");
    if (!PyType_Check(void_type) || !PyType_Check(generic_type))
        return cn_raise(CN_ERR_TYPE, "launch_plan(): 'void_type' and 'generic_type' must be types");
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    plan_t *p = PyObject_New(plan_t, &plan_type);
    if (p == NULL)
        return NULL;
    p->n = 0;
    p->slots = NULL;
    p->void_type = p->generic_type = NULL;
    p->fast_ok = 0;
    p->fast_dev = -1;
    p->fast_getter = NULL;
    p->is_struct = 0;
    p->name = Py_NewRef(name);
    p->void_type = Py_NewRef(void_type);
    p->generic_type = Py_NewRef(generic_type);
    p->slots = (slot_t *)PyMem_Calloc(n ? (size_t)n : 1, sizeof(slot_t));
    if (p->slots == NULL) {
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    p->n = n;
    p->table_bytes = n * (Py_ssize_t)sizeof(void *);
    Py_ssize_t off = p->table_bytes;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sp = PyTuple_GET_ITEM(specs, i);
        slot_t *s = &p->slots[i];
        if (!PyTuple_Check(sp) || PyTuple_GET_SIZE(sp) != 10) {
            Py_DECREF(p);
            return cn_raise(CN_ERR_TYPE, "launch_plan(): spec %zd must be a 10-tuple", i);
        }
        Py_ssize_t kind, itemsize, ndim, scalar, size, align;
        if (get_item_ssize(sp, 0, &kind) < 0 || get_item_ssize(sp, 4, &itemsize) < 0 ||
            get_item_ssize(sp, 5, &ndim) < 0 || get_item_ssize(sp, 6, &scalar) < 0 ||
            get_item_ssize(sp, 7, &size) < 0 || get_item_ssize(sp, 8, &align) < 0) {
            Py_DECREF(p);
            return NULL;
        }
        PyObject *label = PyTuple_GET_ITEM(sp, 1), *dtype = PyTuple_GET_ITEM(sp, 2);
        PyObject *typestr = PyTuple_GET_ITEM(sp, 3), *table = PyTuple_GET_ITEM(sp, 9);
        const char *bad = NULL;
        if (kind < K_POINTER || kind > K_STRUCT)
            bad = "kind";
        else if (!PyUnicode_Check(label))
            bad = "label";
        else if (kind != K_VOID_POINTER && (dtype == Py_None || !PyUnicode_Check(typestr)))
            bad = "dtype";
        else if (!PyDict_Check(table))
            bad = "table";
        else if ((kind == K_VIEW || kind == K_CVIEW) && (ndim < 1 || ndim > MAX_NDIM))
            bad = "ndim";
        else if (kind == K_SCALAR && (scalar < S_BOOL || scalar > S_COMPLEX))
            bad = "scalar";
        else if (kind != K_VOID_POINTER && itemsize <= 0)
            bad = "itemsize";
        else if (align < 1 || align > 16 || (align & (align - 1)) != 0)
            bad = "align";
        else if (kind == K_SCALAR && !((scalar == S_BOOL && itemsize == 1) ||
                                       ((scalar == S_INT || scalar == S_UINT) &&
                                        (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8)) ||
                                       (scalar == S_FLOAT && (itemsize == 4 || itemsize == 8)) ||
                                       (scalar == S_COMPLEX && (itemsize == 8 || itemsize == 16))))
            bad = "itemsize";
        if (bad == NULL) {
            Py_ssize_t need = kind == K_POINTER || kind == K_VOID_POINTER ? 8
                              : kind == K_VIEW                          ? 8 * (1 + 2 * ndim)
                              : kind == K_CVIEW                         ? 8 * (1 + ndim)
                                                                        : itemsize;
            if (size != need || (kind == K_STRUCT && (size <= 0 || size > (1 << 20))))
                bad = "size";
        }
        if (bad != NULL) {
            Py_DECREF(p);
            return cn_raise(CN_ERR_VALUE, "launch_plan(): invalid %s in spec %zd", bad, i);
        }
        s->kind = (int)kind;
        s->scalar = (int)scalar;
        s->itemsize = itemsize;
        s->ndim = (int)ndim;
        s->size = size;
        off = (off + align - 1) / align * align;
        s->offset = off;
        off += size;
        s->dtype = dtype == Py_None ? NULL : Py_NewRef(dtype);
        s->typestr = Py_NewRef(typestr);
        s->table = Py_NewRef(table);
        s->label = Py_NewRef(label);
    }
    p->total = off;
    return (PyObject *)p;
}

/* ---------------------------------------------------------------- CudaKernel.__call__ */

/* kernel(*args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None).
 *
 * The common call (no size given, a 1-D block, the size from the first array) is decided
 * here: check and pack, infer the grid, compare it with the device limit; a zero-size launch
 * returns at once, any other goes to kernel._launch_1d(packed, grid_x, stream, args).
 * Everything else is handled by kernel._call_slow(*args, **kwargs). */
static PyObject *slow_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[40];
    PyObject **stack = small;
    if (nargs + nkw + 1 > 40) {
        stack = (PyObject **)PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof(PyObject *));
        if (stack == NULL)
            return PyErr_NoMemory();
    }
    stack[0] = self;
    for (Py_ssize_t k = 0; k < nargs + nkw; k++)
        stack[1 + k] = args[k];
    PyObject *r = PyObject_VectorcallMethod(s_call_slow, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

static int kw_is(PyObject *name, PyObject *interned)
{
    return name == interned || (PyUnicode_Check(name) && PyUnicode_Compare(name, interned) == 0);
}

/* An explicit stream must belong to the current device `cur` (CuPy streams carry
 * `device_id`; a negative id, as on the null stream, means "the current device"). */
static int check_stream(const plan_t *p, PyObject *stream, long long cur)
{
    PyObject *dev = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(stream, s_device_id, &dev) < 0)
        return -1;
#else
    if (_PyObject_LookupAttr(stream, s_device_id, &dev) < 0)
        return -1;
#endif
    if (dev == NULL)
        return 0;
    long long id = -1;
    if (PyLong_Check(dev)) {
        id = PyLong_AsLongLong(dev);
        if (id == -1 && PyErr_Occurred())
            PyErr_Clear();
    }
    Py_DECREF(dev);
    if (id >= 0 && id != cur) {
        PyErr_Format(PyExc_ValueError,
                     "kernel '%U': the stream is on device %lld but the launch runs on the current device "
                     "%lld; pass a stream of device %lld or make device %lld current",
                     p->name, id, cur, cur, id);
        return -1;
    }
    return 0;
}

static PyObject *kernel_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *stream = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + k];
        if (kw_is(name, s_stream))
            stream = value;
        else if ((kw_is(name, s_n_threads) || kw_is(name, s_grid) || kw_is(name, s_block)) && value == Py_None)
            continue;
        else if (kw_is(name, s_shared_mem) && PyLong_CheckExact(value) && PyLong_AsLong(value) == 0)
            continue;
        else
            return slow_call(self, args, nargs, kwnames);
    }
    PyObject *plan_obj = PyObject_GetAttr(self, s_plan);
    if (plan_obj == NULL)
        return NULL;
    if (!Py_IS_TYPE(plan_obj, &plan_type) || !((plan_t *)plan_obj)->fast_ok) {
        Py_DECREF(plan_obj);
        return slow_call(self, args, nargs, kwnames);
    }
    plan_t *p = (plan_t *)plan_obj;
    PyObject *packed = NULL, *shape = NULL, *out = NULL;
    int struct_first = 0;
    /* The current device, read once per call: the arrays and the stream must live on it. */
    long long cur = -1;
    PyObject *dev = PyObject_CallNoArgs(p->fast_getter);
    if (dev == NULL) {
        Py_DECREF(plan_obj);
        return NULL;
    }
    if (PyLong_Check(dev)) {
        cur = PyLong_AsLongLong(dev);
        if (cur == -1 && PyErr_Occurred())
            PyErr_Clear();
    }
    Py_DECREF(dev);
    if (cur < 0)
        cur = -1;
    if (pack_call(p, args, nargs, cur, &packed, &shape, &struct_first) < 0) {
        Py_DECREF(plan_obj);
        return NULL;
    }
    if (cur >= 0 && stream != Py_None && check_stream(p, stream, cur) < 0)
        goto done;
    if (!struct_first && shape != NULL && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) >= 1) {
        long long n0 = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0));
        if (n0 == -1 && PyErr_Occurred())
            PyErr_Clear();
        else if (n0 >= 0) {
            long long g0 = n0 / p->fast_block + (n0 % p->fast_block != 0);
            if (cur == p->fast_dev && g0 <= p->fast_max_grid) {
                if (g0 == 0) {
                    out = Py_NewRef(Py_None);
                    goto done;
                }
                PyObject *tuple = PyTuple_New(nargs);
                if (tuple == NULL)
                    goto done;
                for (Py_ssize_t k = 0; k < nargs; k++)
                    PyTuple_SET_ITEM(tuple, k, Py_NewRef(args[k]));
                PyObject *grid = PyLong_FromLongLong(g0);
                if (grid == NULL) {
                    Py_DECREF(tuple);
                    goto done;
                }
                PyObject *call_args[5] = {self, packed, grid, stream, tuple};
                out = PyObject_VectorcallMethod(s_launch_1d, call_args, 5, NULL);
                Py_DECREF(grid);
                Py_DECREF(tuple);
                goto done;
            }
        }
    }
    Py_XDECREF(packed);
    Py_XDECREF(shape);
    Py_DECREF(plan_obj);
    return slow_call(self, args, nargs, kwnames);
done:
    Py_XDECREF(packed);
    Py_XDECREF(shape);
    Py_DECREF(plan_obj);
    return out;
}

static PyMethodDef kernel_call_def = {
    "__call__", (PyCFunction)(void (*)(void))kernel_call, METH_FASTCALL | METH_KEYWORDS,
    "kernel(*args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None)\n\n"
    "Check the arguments and launch the kernel (see CudaKernel)."};

PyDoc_STRVAR(kernel_call_method_doc,
             "kernel_call_method(cls)\n--\n\n"
             "The __call__ method for class `cls` (CudaKernel): the fast path in C, the rest through\n"
             "cls._call_slow. Instances need `_plan` (a LaunchPlan or None) and `_launch_1d`.");

static PyObject *kernel_call_method(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls))
        return cn_raise(CN_ERR_TYPE, "kernel_call_method(): expected a class, got %.100s", Py_TYPE(cls)->tp_name);
    return PyDescr_NewMethod((PyTypeObject *)cls, &kernel_call_def);
}

/* ---------------------------------------------------------------- the driver launch */

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shmem, void *stream, void **params, void **extra);
static launch_fn cu_launch = NULL;
static int driver_looked = 0;

static void find_driver(void)
{
    if (driver_looked)
        return;
    driver_looked = 1;
#ifdef CN_HAVE_DLFCN
    /* Only a driver that is already loaded (by CuPy) is used: RTLD_NOLOAD never loads one. */
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    for (int k = 0; names[k] && cu_launch == NULL; k++) {
        void *h = dlopen(names[k], RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL)
            cu_launch = (launch_fn)dlsym(h, "cuLaunchKernel");
    }
#endif
}

PyDoc_STRVAR(driver_available_doc,
             "driver_available()\n--\n\nTrue when a CUDA driver with cuLaunchKernel is loaded in the process.");

static PyObject *driver_available(PyObject *self, PyObject *unused)
{
    find_driver();
    return PyBool_FromLong(cu_launch != NULL);
}

PyDoc_STRVAR(launch_doc,
             "launch(function, gx, gy, gz, bx, by, bz, shared_mem, stream, packed)\n--\n\n"
             "cuLaunchKernel with the buffer of LaunchPlan.pack(); returns the CUresult (0 = success).\n"
             "`function` and `stream` are the driver handles as integers.");

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10)
        return cn_raise(CN_ERR_TYPE, "launch() takes exactly 10 arguments (%zd given)", nargs);
    find_driver();
    if (cu_launch == NULL)
        return cn_raise(CN_ERR_VALUE, "launch(): no CUDA driver is loaded in this process");
    unsigned long long f = PyLong_AsUnsignedLongLong(args[0]);
    if (f == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    unsigned dims[7];
    for (int k = 0; k < 7; k++) {
        unsigned long v = PyLong_AsUnsignedLong(args[1 + k]);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (v > 0xffffffffUL)
            return cn_raise(CN_ERR_OVERFLOW, "launch(): launch dimension %lu too large", v);
        dims[k] = (unsigned)v;
    }
    unsigned long long stream = PyLong_AsUnsignedLongLong(args[8]);
    if (stream == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (!PyBytes_Check(args[9]))
        return cn_raise(CN_ERR_TYPE, "launch(): 'packed' must be the bytes of LaunchPlan.pack()");
    if (f == 0)
        return cn_raise(CN_ERR_VALUE, "launch(): null function handle");
    void **params = (void **)(void *)PyBytes_AS_STRING(args[9]);
    int r = cu_launch((void *)(uintptr_t)f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6],
                      (void *)(uintptr_t)stream, PyBytes_GET_SIZE(args[9]) ? params : NULL, NULL);
    return PyLong_FromLong(r);
}

PyDoc_STRVAR(packed_address_doc,
             "packed_address(packed)\n--\n\nAddress of the pointer table of a packed buffer (for\n"
             "cupy.cuda.driver.launchKernel); valid while `packed` is alive.");

static PyObject *packed_address(PyObject *self, PyObject *packed)
{
    if (!PyBytes_Check(packed))
        return cn_raise(CN_ERR_TYPE, "packed_address(): expected bytes, got %.100s", Py_TYPE(packed)->tp_name);
    return PyLong_FromVoidPtr(PyBytes_AS_STRING(packed));
}

/* ---------------------------------------------------------------- struct fields (pack.h) */

CN_INTERNAL PyObject *cn_struct_plan_new(PyObject *name, PyObject *specs, PyObject *offsets, Py_ssize_t itemsize,
                                         PyObject *void_type, PyObject *generic_type)
{
    PyObject *args[4] = {name, specs, void_type, generic_type};
    plan_t *p = (plan_t *)launch_plan(NULL, args, 4);
    if (p == NULL)
        return NULL;
    if (!PyTuple_Check(offsets) || PyTuple_GET_SIZE(offsets) != p->n) {
        Py_DECREF(p);
        return cn_raise(CN_ERR_TYPE, "struct plan: 'offsets' must be a tuple with one int per field");
    }
    if (itemsize <= 0 || itemsize > (1 << 20)) {
        Py_DECREF(p);
        return cn_raise(CN_ERR_VALUE, "struct plan: invalid itemsize %zd", itemsize);
    }
    Py_ssize_t end = 0;
    for (Py_ssize_t i = 0; i < p->n; i++) {
        Py_ssize_t off;
        if (get_item_ssize(offsets, i, &off) < 0) {
            Py_DECREF(p);
            return NULL;
        }
        /* Fields in order, without overlap, inside the struct. */
        if (off < end || off > itemsize - p->slots[i].size) {
            Py_DECREF(p);
            return cn_raise(CN_ERR_VALUE, "struct plan: field %zd at offset %zd overlaps or leaves the %zd bytes",
                            i, off, itemsize);
        }
        p->slots[i].offset = off;
        end = off + p->slots[i].size;
    }
    p->table_bytes = 0;
    p->total = itemsize;
    p->is_struct = 1;
    return (PyObject *)p;
}

CN_INTERNAL Py_ssize_t cn_plan_size(PyObject *plan) { return ((plan_t *)plan)->n; }

CN_INTERNAL int cn_plan_kind(PyObject *plan, Py_ssize_t i) { return ((plan_t *)plan)->slots[i].kind; }

CN_INTERNAL int cn_plan_pack_one(PyObject *plan, Py_ssize_t i, PyObject *obj, unsigned char *buf, int host)
{
    plan_t *p = (plan_t *)plan;
    slot_t *s = &p->slots[i];
    unsigned char *out = buf + s->offset; /* zeroed by the caller */
    flat_t f = {NULL, 0, 0, NULL, NULL, NULL, 0, 0, (PyTypeObject *)p->void_type, -1};
    switch (s->kind) {
    case K_SCALAR:
        return pack_scalar(p, i, obj, out);
    case K_STRUCT:
        return pack_struct(p, i, obj, out);
    default:
        return pack_array(p, i, obj, out, &f, host);
    }
}

static PyMethodDef pack_methods[] = {
    {"launch_plan", (PyCFunction)(void (*)(void))launch_plan, METH_FASTCALL, launch_plan_doc},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, launch_doc},
    {"driver_available", driver_available, METH_NOARGS, driver_available_doc},
    {"packed_address", packed_address, METH_O, packed_address_doc},
    {"kernel_call_method", kernel_call_method, METH_O, kernel_call_method_doc},
    {"register_ndarray_type", (PyCFunction)(void (*)(void))register_ndarray_type, METH_FASTCALL,
     register_ndarray_type_doc},
    {"register_fake_device_type", (PyCFunction)(void (*)(void))register_fake_device_type, METH_FASTCALL,
     register_fake_device_type_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_pack(PyObject *module)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&s_dtype, "dtype"},     {&s_shape, "shape"},         {&s_strides, "strides"},
                 {&s_data, "data"},       {&s_ptr, "ptr"},             {&s_cai, "__cuda_array_interface__"},
                 {&s_cuda_args, "__cuda_args__"}, {&s_typestr, "typestr"},
                 {&s_plan, "_plan"},      {&s_call_slow, "_call_slow"}, {&s_launch_1d, "_launch_1d"},
                 {&s_n_threads, "n_threads"}, {&s_grid, "grid"},     {&s_block, "block"},
                 {&s_shared_mem, "shared_mem"}, {&s_stream, "stream"},
                 {&s_device_id, "device_id"}, {&s_device, "device"}, {&s_mask, "mask"}};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].slot = PyUnicode_InternFromString(names[k].text);
        if (*names[k].slot == NULL)
            return -1;
    }
    if (PyType_Ready(&plan_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "LaunchPlan", (PyObject *)&plan_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, pack_methods);
}
