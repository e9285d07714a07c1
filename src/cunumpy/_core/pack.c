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
/* Launch-size rules of n_threads_from that the C path applies itself. */
enum { INFER_PYTHON = -1, INFER_AUTO = 0, INFER_FIRST_ARRAY = 1, INFER_LAST_AXIS = 2 };

#define VALUES_PER_CHUNK 64

/* The values handed out by prepare() for one slot: items of a NumPy array, each used once
 * (a structured item is a view of the array's memory). */
struct value_chunk {
    PyObject *array;
    Py_buffer view;
    Py_ssize_t next;
};

#define MAX_NDIM 16
#define MAX_FLATTEN_DEPTH 8
#define CACHE_BYTES ((Py_ssize_t)8 * (1 + 2 * MAX_NDIM))

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
    /* The C path of CudaKernel calls. configure_launch: the kernel's block and inference rule;
     * configure_device: the limits of device `fast_dev` (the one the general path validated a
     * launch on) and how to ask for the current device. */
    int blk_nd;
    long long blk[3];
    int infer;             /* INFER_*: the rule of n_threads_from ("auto", ...), or Python's */
    int fast_ok;           /* configure_device was called */
    long long fast_dev;    /* device id the limits are of */
    long long lim_block[3], lim_grid[3], lim_threads, lim_shared;
    PyObject *fast_getter; /* callable returning the current device id */
    /* prepare(): values made from the packed bytes (configure_prepare). Per slot: None (the
     * argument itself), or the dtype of its value, made as items of a chunk array. */
    PyObject *empty;       /* numpy.empty, NULL until configured */
    PyObject *value_dtypes;
    PyObject *prep_cupy;   /* the CuPy module (or None) when prep_getter was set */
    PyObject *prep_getter; /* its current-device getter, or None */
    struct value_chunk *chunks;
    int is_struct;         /* the fields of a struct (cn_struct_plan_new): messages name the field */
} plan_t;

static PyObject *s_dtype, *s_shape, *s_strides, *s_data, *s_ptr, *s_cai, *s_cuda_args, *s_typestr;
static PyObject *s_device_id, *s_device, *s_mask, *s_flags, *s_c_contiguous, *s_id;
static PyObject *s_prepare_slow, *s_cupy;
static PyObject *s_plan, *s_call_slow, *s_launch_fast, *s_n_threads, *s_grid, *s_block, *s_shared_mem, *s_stream;

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

/* getattr(obj, name) that tells "absent" (0, *out NULL) from an error (-1). */
static int optional_attr(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, out);
#else
    return _PyObject_LookupAttr(obj, name, out);
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
    else if (optional_attr(v, s_id, &id) < 0)
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
static int has_data_ptr(PyObject *obj)
{
    PyObject *data = NULL;
    if (optional_attr(obj, s_data, &data) < 0)
        return -1;
    if (data == NULL)
        return 0;
    int r = has_attr(data, s_ptr);
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
        a->dtype_or_typestr = PyObject_GetAttr(obj, s_dtype);
        if (a->dtype_or_typestr == NULL)
            goto fail;
        a->shape = PyObject_GetAttr(obj, s_shape);
        if (a->shape == NULL || (a->ndim = read_ints(a->shape, a->shape_v, "shape")) < 0)
            goto fail;
        if (optional_attr(obj, s_strides, &strides) < 0)
            goto fail;
        if (strides != NULL && strides != Py_None) {
            if (read_ints(strides, a->strides_v, "strides") != a->ndim) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "the array's strides do not match its shape");
                goto fail;
            }
            a->strides_known = 1;
        }
        else {
            /* No strides: only an array that says it is C-contiguous can be read. */
            PyObject *flags = PyObject_GetAttr(obj, s_flags);
            if (flags == NULL) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "the array has neither strides nor flags.c_contiguous");
                goto fail;
            }
            PyObject *cc = PyObject_GetAttr(flags, s_c_contiguous);
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
        data = PyObject_GetAttr(obj, s_data);
        if (data == NULL)
            goto fail;
        ptr = PyObject_GetAttr(data, s_ptr);
        if (ptr != NULL && !PyLong_Check(ptr))
            Py_SETREF(ptr, PyNumber_Index(ptr)); /* e.g. a NumPy integer in a test double */
        if (ptr == NULL)
            goto fail;
        /* The device of the memory (cupy.cuda.MemoryPointer.device_id), else the array's
         * `.device`; unknown if neither says. */
        PyObject *dev = NULL;
        if (optional_attr(data, s_device_id, &dev) < 0)
            goto fail;
        if (dev == NULL && optional_attr(obj, s_device, &dev) < 0)
            goto fail;
        if (dev != NULL) {
            a->dev = device_id_of(dev);
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
    PyTypeObject *generic_type; /* numpy.generic */
    /* The first array's shape as numbers when it was read without Python (an array of the
     * fake CuPy: first_shape stays NULL); else parsed from first_shape when needed. */
    int first_nd;
    int first_dims_ok;
    long long first_dims[MAX_NDIM];
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
    PyObject *shape = obj == f->first && f->first_shape != NULL ? Py_NewRef(f->first_shape)
                                                                 : PyObject_GetAttr(obj, s_shape);
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
            int duck = has_data_ptr(obj);
            if (duck > 0) {
                got = array_info(obj, 1, &a) < 0 ? -1 : 3;
                is_device = 1;
                if (got < 0) {
                    /* Unreadable attributes: a complete interface still serves. */
                    PyObject *type, *value, *tb;
                    PyErr_Fetch(&type, &value, &tb);
                    int has = has_attr(obj, s_cai);
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
                int has = has_attr(obj, s_cai);
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
            memcpy(out + 8 + 8 * (size_t)k, &a.shape_v[k], 8);
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
                memcpy(out + 8 + 8 * (size_t)(s->ndim + k), &st, 8);
            }
        }
    }
    if (cupy && got == 2) /* a CuPy array, not read from the C struct */
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

/* Worth asking whether `obj` is a device array other than CuPy's: not a Python or NumPy
 * scalar, not a NumPy host array, not a packed struct. */
static int maybe_duck(PyObject *obj, const flat_t *f)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || t == &PyComplex_Type ||
        t == &PyUnicode_Type || obj == Py_None || (cn_ndarray_type != NULL && t == cn_ndarray_type))
        return 0;
    return !PyObject_TypeCheck(obj, f->generic_type);
}

/* The shape of a device array that is not CuPy's, for the launch-size inference: `.shape` of an
 * object with `data.ptr`, the interface's shape otherwise; a new reference, or NULL (no
 * exception: an unreadable object is reported by the packing itself). */
static PyObject *duck_shape(PyObject *obj)
{
    PyObject *shape = NULL;
    int duck = has_data_ptr(obj);
    if (duck > 0) {
        shape = PyObject_GetAttr(obj, s_shape);
    }
    else if (duck == 0) {
        PyObject *cai = NULL;
        if (optional_attr(obj, s_cai, &cai) > 0 && PyDict_Check(cai)) {
            shape = PyDict_GetItemWithError(cai, s_shape);
            Py_XINCREF(shape);
        }
        Py_XDECREF(cai);
    }
    if (shape != NULL && !PyTuple_Check(shape)) {
        /* a list shape: as a tuple (len, shape[0] read like the CuPy path) */
        PyObject *t = PySequence_Check(shape) ? PySequence_Tuple(shape) : NULL;
        Py_SETREF(shape, t);
    }
    if (shape == NULL)
        PyErr_Clear();
    return shape;
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
            cn_ndarray_t r;
            PyObject *host = cn_fake_host_array(obj);
            if (host != NULL && cn_read_ndarray(host, &r) && r.nd <= MAX_NDIM) {
                /* The fake CuPy's shape is its host array's: read without the Python property. */
                if (r.nd >= 1) {
                    f->first = obj;
                    f->first_nd = r.nd;
                    for (int d = 0; d < r.nd; d++)
                        f->first_dims[d] = r.dims[d];
                    f->first_dims_ok = 1;
                    f->composite_first = f->struct_seen;
                }
                goto store;
            }
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
        else if (f->first == NULL && maybe_duck(obj, f)) {
            PyObject *shape = duck_shape(obj);
            if (shape != NULL) {
                if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) >= 1) {
                    f->first = obj;
                    f->first_shape = shape; /* owned */
                    f->composite_first = f->struct_seen;
                }
                else {
                    Py_DECREF(shape);
                }
            }
        }
    store:
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
    if (p->chunks != NULL) {
        for (Py_ssize_t i = 0; i < p->n; i++) {
            if (p->chunks[i].array != NULL) {
                PyBuffer_Release(&p->chunks[i].view);
                Py_DECREF(p->chunks[i].array);
            }
        }
        PyMem_Free(p->chunks);
    }
    Py_XDECREF(p->empty);
    Py_XDECREF(p->value_dtypes);
    Py_XDECREF(p->prep_cupy);
    Py_XDECREF(p->prep_getter);
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

/* What pack_call gives: the packed buffer, what the launch-size inference needs, and (when
 * asked for) the flattened arguments. */
typedef struct {
    PyObject *packed;      /* bytes */
    PyObject *items;       /* tuple of the flattened arguments (want_items), else NULL */
    int has_first;         /* a first array with at least one dimension was found */
    int struct_first;      /* a packed struct value (hiding its arrays) came before it */
    int dims_ok;           /* dims/nd hold its shape as numbers */
    int nd;
    long long dims[MAX_NDIM];
    PyObject *shape;       /* its shape as a tuple when it was read as one, else NULL */
} pack_result_t;

static void result_clear(pack_result_t *r)
{
    Py_CLEAR(r->packed);
    Py_CLEAR(r->items);
    Py_CLEAR(r->shape);
}

/* Check and pack one call into `res` (new references); 0, or -1 with an exception. */
static int pack_call(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur_dev, pack_result_t *res,
                     int want_items)
{
    memset(res, 0, sizeof(*res));
    PyObject *small[32];
    flat_t f = {small, 0, p->n, NULL, NULL, NULL, 0, 0, (PyTypeObject *)p->void_type, cur_dev,
                (PyTypeObject *)p->generic_type, 0, 0, {0}};
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
    if (want_items) {
        res->items = PyTuple_New(p->n);
        if (res->items == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < p->n; i++)
            PyTuple_SET_ITEM(res->items, i, Py_NewRef(f.items[i]));
    }
    res->packed = packed;
    packed = NULL;
    res->has_first = f.first != NULL;
    res->struct_first = f.first ? f.composite_first : f.struct_seen;
    res->shape = f.first_shape;
    f.first_shape = NULL;
    if (f.first_dims_ok) {
        res->dims_ok = 1;
        res->nd = f.first_nd;
        memcpy(res->dims, f.first_dims, sizeof(long long) * (size_t)f.first_nd);
    }
    else if (res->shape != NULL && PyTuple_Check(res->shape) && PyTuple_GET_SIZE(res->shape) <= MAX_NDIM) {
        /* A shape tuple of exact ints (as CuPy gives) is read here; anything else is left to
         * the general path in Python. */
        Py_ssize_t nd = PyTuple_GET_SIZE(res->shape);
        res->dims_ok = 1;
        for (Py_ssize_t k = 0; k < nd && res->dims_ok; k++) {
            PyObject *v = PyTuple_GET_ITEM(res->shape, k);
            long long d = PyLong_CheckExact(v) ? PyLong_AsLongLong(v) : -1;
            if (d == -1 && PyErr_Occurred())
                PyErr_Clear();
            if (d < 0)
                res->dims_ok = 0;
            res->dims[k] = d;
        }
        res->nd = (int)nd;
    }
    rc = 0;
done:
    if (rc < 0)
        result_clear(res);
    Py_XDECREF(packed);
    Py_XDECREF(f.first_shape);
    Py_XDECREF(f.keep);
    if (f.items != small)
        PyMem_Free(f.items);
    return rc;
}

/* The keyword `device` of pack() and prepare(); the only one they take. */
static int device_keyword(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fn, long long *cur)
{
    *cur = -1;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        if (!(PyUnicode_Check(name) && PyUnicode_Compare(name, s_device) == 0)) {
            cn_raise(CN_ERR_TYPE, "%s() got an unexpected keyword argument '%S'", fn, name);
            return -1;
        }
        if (device_arg(args[nargs + k], cur) < 0)
            return -1;
    }
    return 0;
}

static PyObject *plan_pack(plan_t *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    long long cur;
    if (device_keyword(args, nargs, kwnames, "pack", &cur) < 0)
        return NULL;
    pack_result_t res;
    if (pack_call(p, args, nargs, cur, &res, 0) < 0)
        return NULL;
    PyObject *shape = NULL;
    if (res.has_first) {
        if (res.shape != NULL)
            shape = Py_NewRef(res.shape);
        else {
            shape = PyTuple_New(res.nd);
            for (int k = 0; shape != NULL && k < res.nd; k++) {
                PyObject *v = PyLong_FromLongLong(res.dims[k]);
                if (v == NULL)
                    Py_CLEAR(shape);
                else
                    PyTuple_SET_ITEM(shape, k, v);
            }
            if (shape == NULL) {
                result_clear(&res);
                return NULL;
            }
        }
    }
    PyObject *out = Py_BuildValue("(ONN)", res.packed, shape ? shape : Py_NewRef(Py_None),
                                  PyBool_FromLong(res.struct_first));
    result_clear(&res);
    return out;
}

/* 1 to 3 positive (`positive`, at most 1024 each) or non-negative ints from an exact int or a tuple/list of exact
 * ints (no bool): the number of dimensions, or 0 when `obj` is anything else (the Python path
 * then gives the error or handles the unusual type). */
static int read_dims(PyObject *obj, long long *out, int positive)
{
    PyObject *const *items;
    Py_ssize_t n;
    if (PyLong_CheckExact(obj)) {
        items = &obj;
        n = 1;
    }
    else if (PyTuple_CheckExact(obj)) {
        items = &PyTuple_GET_ITEM(obj, 0);
        n = PyTuple_GET_SIZE(obj);
    }
    else if (PyList_CheckExact(obj)) {
        items = &PyList_GET_ITEM(obj, 0);
        n = PyList_GET_SIZE(obj);
    }
    else
        return 0;
    if (n < 1 || n > 3)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        /* exact ints only: reading them runs no Python code, so a list cannot change here */
        if (!PyLong_CheckExact(items[k]))
            return 0;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(items[k], &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        if (v < 0 || (positive && (v == 0 || v > 1024))) /* a block entry: at most 1024 threads */
            return 0;
        out[k] = v;
    }
    return (int)n;
}

PyDoc_STRVAR(configure_launch_doc,
             "configure_launch(block, infer)\n--\n\n"
             "The kernel's block (1 to 3 positive ints) and launch-size rule: 0 \"auto\", 1\n"
             "\"first_array\", 2 \"last_axis\", -1 decided in Python (a callable or None).");

static PyObject *plan_configure_launch(plan_t *p, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return cn_raise(CN_ERR_TYPE, "configure_launch() takes 2 arguments (%zd given)", nargs);
    long long blk[3] = {1, 1, 1};
    int nd = read_dims(args[0], blk, 1);
    if (nd == 0 || blk[0] * blk[1] * blk[2] > 1024)
        return cn_raise(CN_ERR_VALUE, "configure_launch(): block must be 1 to 3 positive ints, at most 1024 threads");
    long infer = PyLong_Check(args[1]) ? PyLong_AsLong(args[1]) : -2;
    if (infer == -1 && PyErr_Occurred())
        return NULL;
    if (infer < INFER_PYTHON || infer > INFER_LAST_AXIS)
        return cn_raise(CN_ERR_VALUE, "configure_launch(): infer must be -1, 0, 1 or 2");
    p->blk_nd = nd;
    for (int k = 0; k < 3; k++)
        p->blk[k] = k < nd ? blk[k] : 1;
    p->infer = (int)infer;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(configure_device_doc,
             "configure_device(device, max_block, max_grid, max_threads, max_shared, device_getter)\n"
             "or configure_device(None)\n--\n\n"
             "Enable (or disable) the C path of kernel calls on `device`, whose limits are\n"
             "`max_block` and `max_grid` (3 ints each), `max_threads` threads per block and\n"
             "`max_shared` bytes of dynamic shared memory; `device_getter()` returns the current device.");

static PyObject *plan_configure_device(plan_t *p, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs == 1 && args[0] == Py_None) {
        p->fast_ok = 0;
        Py_CLEAR(p->fast_getter);
        Py_RETURN_NONE;
    }
    if (nargs != 6)
        return cn_raise(CN_ERR_TYPE, "configure_device() takes 6 arguments or None");
    long long dev = PyLong_Check(args[0]) ? PyLong_AsLongLong(args[0]) : -1;
    if (dev == -1 && PyErr_Occurred())
        return NULL;
    if (dev < 0)
        return cn_raise(CN_ERR_VALUE, "configure_device(): device must be an int >= 0");
    long long block[3], grid[3];
    if (!PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[1]) != 3 ||
        PyTuple_GET_SIZE(args[2]) != 3)
        return cn_raise(CN_ERR_TYPE, "configure_device(): max_block and max_grid must be tuples of 3 ints");
    for (int k = 0; k < 3; k++) {
        block[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[1], k));
        grid[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[2], k));
        if (PyErr_Occurred())
            return NULL;
    }
    long long threads = PyLong_AsLongLong(args[3]);
    long long shared = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyCallable_Check(args[5]))
        return cn_raise(CN_ERR_TYPE, "configure_device(): device_getter must be callable");
    for (int k = 0; k < 3; k++) {
        p->lim_block[k] = block[k];
        p->lim_grid[k] = grid[k];
    }
    p->lim_threads = threads;
    p->lim_shared = shared;
    p->fast_dev = dev;
    Py_XSETREF(p->fast_getter, Py_NewRef(args[5]));
    p->fast_ok = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(configure_prepare_doc,
             "configure_prepare(empty, dtypes, cupy, device_getter)\n--\n\n"
             "How prepare() makes the values: `empty` is numpy.empty, `dtypes` one entry per\n"
             "parameter: None (the argument itself) or the dtype of the value made from the packed\n"
             "bytes (as many bytes as the parameter has). CudaKernel.prepare_args runs in C while\n"
             "sys.modules['cupy'] is `cupy` (None: not imported), asking `device_getter()` (None:\n"
             "no device) for the current device.");

static PyObject *plan_configure_prepare(plan_t *p, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyCallable_Check(args[0]) || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != p->n ||
        (args[3] != Py_None && !PyCallable_Check(args[3])))
        return cn_raise(CN_ERR_TYPE, "configure_prepare(empty, dtypes, cupy, device_getter) takes numpy.empty, one "
                                     "dtype or None per parameter, the CuPy module or None and a callable or None");
    if (p->chunks == NULL) {
        p->chunks = (struct value_chunk *)PyMem_Calloc(p->n ? (size_t)p->n : 1, sizeof(struct value_chunk));
        if (p->chunks == NULL)
            return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < p->n; i++) {
        if (p->chunks[i].array != NULL) {
            PyObject *old = p->chunks[i].array;
            PyBuffer_Release(&p->chunks[i].view);
            p->chunks[i].array = NULL;
            Py_DECREF(old);
        }
    }
    Py_XSETREF(p->empty, Py_NewRef(args[0]));
    Py_XSETREF(p->value_dtypes, Py_NewRef(args[1]));
    Py_XSETREF(p->prep_cupy, Py_NewRef(args[2]));
    Py_XSETREF(p->prep_getter, Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

/* The value of slot i for prepare(): a new item of the slot's chunk holding `bytes`. */
static PyObject *slot_value(plan_t *p, Py_ssize_t i, const unsigned char *bytes)
{
    struct value_chunk *c = &p->chunks[i];
    Py_ssize_t size = p->slots[i].size;
    if (c->array == NULL || c->next >= VALUES_PER_CHUNK) {
        /* Held: configure_prepare may replace them while numpy.empty runs Python code. */
        PyObject *dtype = Py_NewRef(PyTuple_GET_ITEM(p->value_dtypes, i));
        PyObject *empty = Py_NewRef(p->empty);
        PyObject *array = PyObject_CallFunction(empty, "nO", (Py_ssize_t)VALUES_PER_CHUNK, dtype);
        Py_DECREF(empty);
        Py_DECREF(dtype);
        if (array == NULL)
            return NULL;
        Py_buffer view;
        if (PyObject_GetBuffer(array, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(array);
            return NULL;
        }
        if (view.len != VALUES_PER_CHUNK * size) {
            PyBuffer_Release(&view);
            Py_DECREF(array);
            return cn_raise(CN_ERR_VALUE, "kernel '%U': the value dtype of parameter %zd does not have %zd bytes",
                            p->name, i, size);
        }
        /* The allocation ran Python code: another call may have installed a chunk meanwhile. */
        if (c->array != NULL) {
            PyObject *old = c->array;
            PyBuffer_Release(&c->view);
            c->array = NULL;
            Py_DECREF(old);
        }
        c->array = array;
        c->view = view;
        c->next = 0;
    }
    Py_ssize_t index = c->next++;
    memcpy((unsigned char *)c->view.buf + index * size, bytes, (size_t)size);
    PyObject *array = Py_NewRef(c->array); /* a finalizer run by the allocation may replace it */
    PyObject *value = PySequence_GetItem(array, index);
    Py_DECREF(array);
    return value;
}

/* prepare_args: the values a launch would pass, from the packed bytes. */
static PyObject *prepare_values(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur)
{
    pack_result_t res;
    if (pack_call(p, args, nargs, cur, &res, 1) < 0)
        return NULL;
    PyObject *out = PyTuple_New(p->n);
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(res.packed);
    for (Py_ssize_t i = 0; out != NULL && i < p->n; i++) {
        PyObject *v;
        if (PyTuple_GET_ITEM(p->value_dtypes, i) == Py_None)
            v = Py_NewRef(PyTuple_GET_ITEM(res.items, i));
        else
            v = slot_value(p, i, buf + p->slots[i].offset);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, v);
    }
    result_clear(&res);
    return out;
}

PyDoc_STRVAR(prepare_doc,
             "prepare(*args, device=None) -> tuple\n--\n\n"
             "Check and pack like pack(), then return one value per parameter: the argument itself\n"
             "where configure_prepare() gave None, else a value of the given dtype holding the\n"
             "packed bytes (a NumPy scalar, or a record for an array view).");

static PyObject *plan_prepare(plan_t *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (p->empty == NULL)
        return cn_raise(CN_ERR_TYPE, "prepare(): call configure_prepare() first");
    long long cur;
    if (device_keyword(args, nargs, kwnames, "prepare", &cur) < 0)
        return NULL;
    return prepare_values(p, args, nargs, cur);
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
    {"prepare", (PyCFunction)(void (*)(void))plan_prepare, METH_FASTCALL | METH_KEYWORDS, prepare_doc},
    {"configure_launch", (PyCFunction)(void (*)(void))plan_configure_launch, METH_FASTCALL, configure_launch_doc},
    {"configure_device", (PyCFunction)(void (*)(void))plan_configure_device, METH_FASTCALL, configure_device_doc},
    {"configure_prepare", (PyCFunction)(void (*)(void))plan_configure_prepare, METH_FASTCALL,
     configure_prepare_doc},
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
    p->blk_nd = 1;
    p->blk[0] = 128;
    p->blk[1] = p->blk[2] = 1;
    p->infer = INFER_PYTHON;
    p->empty = NULL;
    p->value_dtypes = NULL;
    p->prep_cupy = NULL;
    p->prep_getter = NULL;
    p->chunks = NULL;
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
 * Every launch form is decided here once the general path (kernel._call_slow) has validated a
 * launch on the current device and left its limits in the plan (configure_device): check and
 * pack the arguments, take or infer the size, compute grid and block, check the stream's device
 * and the device limits; a zero-size launch returns at once, any other goes to
 * kernel._launch_fast(packed, grid, block, shared_mem, stream, args). Whatever is unusual (a
 * size of another type, a callable n_threads_from, a limit exceeded, a size that is wrong)
 * goes to kernel._call_slow(*args, **kwargs), which starts over and gives the error: the
 * messages and their order are those of the general path. Packing errors and the stream's
 * device are reported here, with the general path's messages, once the sizes were read. */
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

/* The current device from the plan's getter: >= 0, or -1 when unknown. NULL-free: -2 with an
 * exception when the getter raised. */
static long long current_device(plan_t *p)
{
    if (p->fast_getter == NULL)
        return -1; /* disabled meanwhile */
    PyObject *get = Py_NewRef(p->fast_getter); /* the call may reconfigure the plan */
    PyObject *dev = PyObject_CallNoArgs(get);
    Py_DECREF(get);
    if (dev == NULL)
        return -2;
    long long cur = -1;
    if (PyLong_Check(dev)) {
        cur = PyLong_AsLongLong(dev);
        if (cur == -1 && PyErr_Occurred())
            PyErr_Clear();
    }
    Py_DECREF(dev);
    return cur < 0 ? -1 : cur;
}

static PyObject *dims_tuple(const long long *v, int nd)
{
    PyObject *t = PyTuple_New(nd);
    for (int k = 0; t != NULL && k < nd; k++) {
        PyObject *x = PyLong_FromLongLong(v[k]);
        if (x == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *kernel_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *n_threads = Py_None, *grid = Py_None, *block = Py_None, *shared = NULL, *stream = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + k];
        if (kw_is(name, s_stream))
            stream = value;
        else if (kw_is(name, s_n_threads))
            n_threads = value;
        else if (kw_is(name, s_grid))
            grid = value;
        else if (kw_is(name, s_block))
            block = value;
        else if (kw_is(name, s_shared_mem))
            shared = value;
        else
            return slow_call(self, args, nargs, kwnames); /* the TypeError of an unknown keyword */
    }
    PyObject *plan_obj = PyObject_GetAttr(self, s_plan);
    if (plan_obj == NULL)
        return NULL;
    if (!Py_IS_TYPE(plan_obj, &plan_type) || !((plan_t *)plan_obj)->fast_ok) {
        Py_DECREF(plan_obj);
        return slow_call(self, args, nargs, kwnames);
    }
    plan_t *p = (plan_t *)plan_obj;
    PyObject *out = NULL;
    pack_result_t res = {0};
    /* Sizes first, as the general path reads them. */
    long long nt[3] = {1, 1, 1}, gr[3] = {1, 1, 1}, blk[3] = {1, 1, 1}, g[3] = {1, 1, 1};
    int nt_nd = 0, gr_nd = 0, blk_nd;
    if (n_threads != Py_None && (nt_nd = read_dims(n_threads, nt, 0)) == 0)
        goto slow;
    if (grid != Py_None && (gr_nd = read_dims(grid, gr, 0)) == 0)
        goto slow;
    if (nt_nd && gr_nd)
        goto slow; /* pass exactly one */
    if (block != Py_None) {
        if ((blk_nd = read_dims(block, blk, 1)) == 0 || blk[0] * blk[1] * blk[2] > 1024)
            goto slow;
    }
    else {
        blk_nd = p->blk_nd;
        for (int k = 0; k < 3; k++)
            blk[k] = p->blk[k];
    }
    long long shared_mem = 0;
    if (shared != NULL) {
        if (!PyLong_CheckExact(shared))
            goto slow;
        int overflow = 0;
        shared_mem = PyLong_AsLongLongAndOverflow(shared, &overflow);
        if (overflow || shared_mem < 0) {
            PyErr_Clear();
            goto slow;
        }
    }
    if (!nt_nd && !gr_nd && p->infer == INFER_PYTHON)
        goto slow; /* a callable n_threads_from, or None: Python calls it or says why not */
    /* The current device, read once per call: the arrays and the stream must live on it. */
    long long cur = current_device(p);
    if (cur == -2)
        goto done;
    if (cur != p->fast_dev)
        goto slow; /* no limits known for this device yet */
    if (pack_call(p, args, nargs, cur, &res, 0) < 0)
        goto done;
    int g_nd;
    if (gr_nd) {
        g_nd = gr_nd;
        for (int k = 0; k < 3; k++)
            g[k] = gr[k];
    }
    else {
        if (!nt_nd) {
            /* inference from the first array's shape */
            if (!res.has_first || res.struct_first || !res.dims_ok)
                goto slow;
            if (p->infer == INFER_AUTO) {
                if (res.nd < blk_nd)
                    goto slow;
                nt_nd = blk_nd;
                for (int k = 0; k < blk_nd; k++)
                    nt[k] = res.dims[k];
            }
            else {
                nt_nd = 1;
                nt[0] = res.dims[p->infer == INFER_FIRST_ARRAY ? 0 : res.nd - 1];
            }
        }
        if (blk_nd == 1 && nt_nd > 1)
            blk_nd = nt_nd; /* the other block entries are already 1 */
        else if (blk_nd != nt_nd)
            goto slow;
        g_nd = nt_nd;
        for (int k = 0; k < nt_nd; k++)
            g[k] = nt[k] / blk[k] + (nt[k] % blk[k] != 0);
    }
    if (cur >= 0 && stream != Py_None && check_stream(p, stream, cur) < 0)
        goto done;
    /* The device's limits: a launch beyond them is the general path's error. */
    for (int k = 0; k < 3; k++) {
        if (blk[k] > p->lim_block[k] || g[k] > p->lim_grid[k])
            goto slow;
    }
    if (blk[0] * blk[1] * blk[2] > p->lim_threads || shared_mem > p->lim_shared)
        goto slow;
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    {
        PyObject *tuple = PyTuple_New(nargs);
        PyObject *gt = dims_tuple(g, g_nd), *bt = dims_tuple(blk, blk_nd);
        PyObject *sm = PyLong_FromLongLong(shared_mem);
        if (tuple != NULL && gt != NULL && bt != NULL && sm != NULL) {
            for (Py_ssize_t k = 0; k < nargs; k++)
                PyTuple_SET_ITEM(tuple, k, Py_NewRef(args[k]));
            PyObject *call_args[7] = {self, res.packed, gt, bt, sm, stream, tuple};
            out = PyObject_VectorcallMethod(s_launch_fast, call_args, 7, NULL);
        }
        Py_XDECREF(tuple);
        Py_XDECREF(gt);
        Py_XDECREF(bt);
        Py_XDECREF(sm);
    }
    goto done;
slow:
    result_clear(&res);
    Py_DECREF(plan_obj);
    return slow_call(self, args, nargs, kwnames);
done:
    result_clear(&res);
    Py_DECREF(plan_obj);
    return out;
}

static PyMethodDef kernel_call_def = {
    "__call__", (PyCFunction)(void (*)(void))kernel_call, METH_FASTCALL | METH_KEYWORDS,
    "kernel(*args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None)\n\n"
    "Check the arguments and launch the kernel (see CudaKernel)."};

PyDoc_STRVAR(kernel_call_method_doc,
             "kernel_call_method(cls)\n--\n\n"
             "The __call__ method for class `cls` (CudaKernel): in C, the rest through\n"
             "cls._call_slow. Instances need `_plan` (a LaunchPlan or None) and `_launch_fast`.");

static PyObject *kernel_call_method(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls))
        return cn_raise(CN_ERR_TYPE, "kernel_call_method(): expected a class, got %.100s", Py_TYPE(cls)->tp_name);
    return PyDescr_NewMethod((PyTypeObject *)cls, &kernel_call_def);
}

/* kernel.prepare_args(*args): in C once kernel._prepare_slow configured the plan
 * (configure_prepare) and while the CuPy module it saw is the one imported; else through
 * _prepare_slow, which does the same in Python and configures the plan. */
static PyObject *kernel_prepare(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *plan_obj = kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0 ? PyObject_GetAttr(self, s_plan) : NULL;
    if (plan_obj == NULL && PyErr_Occurred())
        return NULL;
    plan_t *p = plan_obj != NULL && Py_IS_TYPE(plan_obj, &plan_type) ? (plan_t *)plan_obj : NULL;
    PyObject *cupy = NULL;
    if (p != NULL && p->empty != NULL) {
        cupy = PyDict_GetItemWithError(PyImport_GetModuleDict(), s_cupy);
        if (cupy == NULL && PyErr_Occurred()) {
            Py_DECREF(plan_obj);
            return NULL;
        }
        if (cupy == NULL)
            cupy = Py_None;
    }
    if (p == NULL || p->empty == NULL || cupy != p->prep_cupy) {
        Py_XDECREF(plan_obj);
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
        PyObject *r = PyObject_VectorcallMethod(s_prepare_slow, stack, (size_t)(nargs + 1), kwnames);
        if (stack != small)
            PyMem_Free(stack);
        return r;
    }
    /* As _current_device_or_none: a getter that fails or gives no id means "no check". */
    long long cur = -1;
    if (p->prep_getter != Py_None) {
        PyObject *get = Py_NewRef(p->prep_getter); /* the call may reconfigure the plan */
        PyObject *dev = PyObject_CallNoArgs(get);
        Py_DECREF(get);
        if (dev == NULL)
            PyErr_Clear();
        else {
            if (PyLong_CheckExact(dev)) {
                cur = PyLong_AsLongLong(dev);
                if (cur == -1 && PyErr_Occurred())
                    PyErr_Clear();
            }
            Py_DECREF(dev);
        }
        if (cur < 0)
            cur = -1;
    }
    PyObject *out = prepare_values(p, args, nargs, cur);
    Py_DECREF(plan_obj);
    return out;
}

static PyMethodDef kernel_prepare_def = {
    "prepare_args", (PyCFunction)(void (*)(void))kernel_prepare, METH_FASTCALL | METH_KEYWORDS,
    "prepare_args(*args) -> tuple\n\n"
    "The values a launch would pass, without launching: arguments flattened through\n"
    "__cuda_args__, checked, scalars cast to their parameters' NumPy types, array views packed.\n"
    "Same errors as a call."};

PyDoc_STRVAR(kernel_prepare_method_doc,
             "kernel_prepare_method(cls)\n--\n\n"
             "The prepare_args method for class `cls` (CudaKernel): in C once configured, else\n"
             "cls._prepare_slow.");

static PyObject *kernel_prepare_method(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls))
        return cn_raise(CN_ERR_TYPE, "kernel_prepare_method(): expected a class, got %.100s",
                        Py_TYPE(cls)->tp_name);
    return PyDescr_NewMethod((PyTypeObject *)cls, &kernel_prepare_def);
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
    flat_t f = {NULL, 0, 0, NULL, NULL, NULL, 0, 0, (PyTypeObject *)p->void_type, -1,
                (PyTypeObject *)p->generic_type};
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
    {"kernel_prepare_method", kernel_prepare_method, METH_O, kernel_prepare_method_doc},
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
                 {&s_plan, "_plan"},      {&s_call_slow, "_call_slow"}, {&s_launch_fast, "_launch_fast"},
                 {&s_prepare_slow, "_prepare_slow"}, {&s_cupy, "cupy"},
                 {&s_n_threads, "n_threads"}, {&s_grid, "grid"},     {&s_block, "block"},
                 {&s_shared_mem, "shared_mem"}, {&s_stream, "stream"},
                 {&s_device_id, "device_id"}, {&s_device, "device"}, {&s_mask, "mask"},
                 {&s_flags, "flags"}, {&s_c_contiguous, "c_contiguous"}, {&s_id, "id"}};
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
