/* The LaunchPlan (see pack_plan.h): built from the specs of a kernel's parameters, it
 * flattens the arguments of a call (__cuda_args__ objects expanded), checks and packs each
 * through the checker table, and makes the values of prepare(); configure_launch and
 * configure_device set up the C path of calls (pack_launch.c). Plans laid out as a C struct
 * pack CudaStruct fields (pack.h). */
#include "pack_plan.h"

CN_INTERNAL struct cn_pack_strings cn_str;

/* ---------------------------------------------------------------- flattening */

static int needs_expansion(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || t == &PyComplex_Type)
        return 0;
    if (cn_is_device(obj))
        return 0;
    return _PyType_Lookup(t, cn_str.cuda_args) != NULL;
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
    int duck = cn_has_data_ptr(obj);
    if (duck > 0) {
        shape = PyObject_GetAttr(obj, cn_str.shape);
    }
    else if (duck == 0) {
        PyObject *cai = NULL;
        if (cn_optional_attr(obj, cn_str.cai, &cai) > 0 && PyDict_Check(cai)) {
            shape = PyDict_GetItemWithError(cai, cn_str.shape);
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
            PyObject *r = PyObject_CallMethodNoArgs(obj, cn_str.cuda_args);
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
            PyObject *shape = PyObject_GetAttr(obj, cn_str.shape);
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
            cn_slot_forget(s);
        }
        PyMem_Free(p->slots);
    }
    Py_XDECREF(p->fast_getter);
    if (p->chunks != NULL) {
        for (Py_ssize_t i = 0; i < p->n; i++)
            cn_chunk_clear(&p->chunks[i]);
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

CN_INTERNAL void cn_result_clear(pack_result_t *r)
{
    Py_CLEAR(r->packed);
    Py_CLEAR(r->items);
    Py_CLEAR(r->shape);
}

/* Check and pack one call into `res` (new references); 0, or -1 with an exception. */
CN_INTERNAL int cn_pack_call(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur_dev,
                             pack_result_t *res, int want_items)
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
        if (cn_kinds[s->kind].pack(p, i, obj, out, &f, 0) < 0)
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
        cn_result_clear(res);
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
        if (!(PyUnicode_Check(name) && PyUnicode_Compare(name, cn_str.device) == 0)) {
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
    if (cn_pack_call(p, args, nargs, cur, &res, 0) < 0)
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
                cn_result_clear(&res);
                return NULL;
            }
        }
    }
    PyObject *out = Py_BuildValue("(ONN)", res.packed, shape ? shape : Py_NewRef(Py_None),
                                  PyBool_FromLong(res.struct_first));
    cn_result_clear(&res);
    return out;
}

/* 1 to 3 positive (`positive`, at most 1024 each) or non-negative ints from an exact int or a tuple/list of exact
 * ints (no bool): the number of dimensions, or 0 when `obj` is anything else (the Python path
 * then gives the error or handles the unusual type). */
CN_INTERNAL int cn_read_dims(PyObject *obj, long long *out, int positive)
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
    int nd = cn_read_dims(args[0], blk, 1);
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
        p->chunks = (cn_chunk_t *)PyMem_Calloc(p->n ? (size_t)p->n : 1, sizeof(cn_chunk_t));
        if (p->chunks == NULL)
            return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < p->n; i++)
        cn_chunk_clear(&p->chunks[i]);
    Py_XSETREF(p->empty, Py_NewRef(args[0]));
    Py_XSETREF(p->value_dtypes, Py_NewRef(args[1]));
    Py_XSETREF(p->prep_cupy, Py_NewRef(args[2]));
    Py_XSETREF(p->prep_getter, Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

/* The value of slot i for prepare(): a new item of the slot's chunk holding `bytes`. */
static PyObject *slot_value(plan_t *p, Py_ssize_t i, const unsigned char *bytes)
{
    cn_chunk_t *c = &p->chunks[i];
    Py_ssize_t size = p->slots[i].size;
    if (cn_chunk_full(c)) {
        /* Held: configure_prepare may replace them while numpy.empty runs Python code. */
        PyObject *dtype = Py_NewRef(PyTuple_GET_ITEM(p->value_dtypes, i));
        PyObject *empty = Py_NewRef(p->empty);
        PyObject *array = PyObject_CallFunction(empty, "nO", (Py_ssize_t)CN_VALUES_PER_CHUNK, dtype);
        Py_DECREF(empty);
        Py_DECREF(dtype);
        if (array == NULL)
            return NULL;
        Py_ssize_t len;
        int r = cn_chunk_fill(c, array, size, &len);
        if (r > 0)
            return cn_raise(CN_ERR_VALUE, "kernel '%U': the value dtype of parameter %zd does not have %zd bytes",
                            p->name, i, size);
        if (r < 0)
            return NULL;
    }
    return cn_chunk_take(c, bytes, size);
}

/* prepare_args: the values a launch would pass, from the packed bytes. */
CN_INTERNAL PyObject *cn_prepare_values(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur)
{
    pack_result_t res;
    if (cn_pack_call(p, args, nargs, cur, &res, 1) < 0)
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
    cn_result_clear(&res);
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
    return cn_prepare_values(p, args, nargs, cur);
}

static PyObject *plan_forget(plan_t *p, PyObject *unused)
{
    for (Py_ssize_t i = 0; i < p->n; i++)
        cn_slot_forget(&p->slots[i]);
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

CN_INTERNAL PyTypeObject cn_plan_type = {
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
    plan_t *p = PyObject_New(plan_t, &cn_plan_type);
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
        const char *bad = cn_spec_error(kind, label, dtype, typestr, table, itemsize, ndim, scalar, size, align);
        if (bad != NULL) {
            Py_DECREF(p);
            return cn_raise(CN_ERR_VALUE, "launch_plan(): invalid %s in spec %zd", bad, i);
        }
        s->kind = (int)kind;
        s->flags = cn_kinds[kind].flags;
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

/* ---------------------------------------------------------------- values in chunk arrays (pack.h) */

CN_INTERNAL void cn_chunk_clear(cn_chunk_t *c)
{
    if (c->array != NULL) {
        PyObject *old = c->array;
        PyBuffer_Release(&c->view);
        c->array = NULL;
        Py_DECREF(old);
    }
}

CN_INTERNAL int cn_chunk_fill(cn_chunk_t *c, PyObject *array, Py_ssize_t size, Py_ssize_t *len)
{
    Py_buffer view;
    if (PyObject_GetBuffer(array, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(array);
        return -1;
    }
    if (view.len != CN_VALUES_PER_CHUNK * size) {
        *len = view.len;
        PyBuffer_Release(&view);
        Py_DECREF(array);
        return 1;
    }
    cn_chunk_clear(c);
    c->array = array;
    c->view = view;
    c->next = 0;
    return 0;
}

CN_INTERNAL PyObject *cn_chunk_take(cn_chunk_t *c, const unsigned char *bytes, Py_ssize_t size)
{
    Py_ssize_t index = c->next++;
    memcpy((unsigned char *)c->view.buf + index * size, bytes, (size_t)size);
    /* A strong reference: a finalizer run by the allocation of an item may pack again and
     * replace the chunk. */
    PyObject *array = Py_NewRef(c->array);
    PyObject *value = PySequence_GetItem(array, index);
    Py_DECREF(array);
    return value;
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

CN_INTERNAL unsigned cn_plan_flags(PyObject *plan, Py_ssize_t i) { return ((plan_t *)plan)->slots[i].flags; }

CN_INTERNAL int cn_plan_pack_one(PyObject *plan, Py_ssize_t i, PyObject *obj, unsigned char *buf, int host)
{
    plan_t *p = (plan_t *)plan;
    slot_t *s = &p->slots[i];
    unsigned char *out = buf + s->offset; /* zeroed by the caller */
    flat_t f = {NULL, 0, 0, NULL, NULL, NULL, 0, 0, (PyTypeObject *)p->void_type, -1,
                (PyTypeObject *)p->generic_type};
    return cn_kinds[s->kind].pack(p, i, obj, out, &f, host);
}

/* ---------------------------------------------------------------- registration */

static PyMethodDef plan_functions[] = {
    {"launch_plan", (PyCFunction)(void (*)(void))launch_plan, METH_FASTCALL, launch_plan_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_pack(PyObject *module)
{
    const cn_string_t names[] = {
        {&cn_str.dtype, "dtype"}, {&cn_str.shape, "shape"}, {&cn_str.strides, "strides"},
        {&cn_str.data, "data"}, {&cn_str.ptr, "ptr"}, {&cn_str.cai, "__cuda_array_interface__"},
        {&cn_str.cuda_args, "__cuda_args__"}, {&cn_str.typestr, "typestr"}, {&cn_str.plan, "_plan"},
        {&cn_str.call_slow, "_call_slow"}, {&cn_str.launch_fast, "_launch_fast"},
        {&cn_str.prepare_slow, "_prepare_slow"}, {&cn_str.cupy, "cupy"}, {&cn_str.n_threads, "n_threads"},
        {&cn_str.grid, "grid"}, {&cn_str.block, "block"}, {&cn_str.shared_mem, "shared_mem"},
        {&cn_str.stream, "stream"}, {&cn_str.device_id, "device_id"}, {&cn_str.device, "device"},
        {&cn_str.mask, "mask"}, {&cn_str.flags, "flags"}, {&cn_str.c_contiguous, "c_contiguous"},
        {&cn_str.id, "id"}, {&cn_str.cuda_kernel_module, "cunumpy.kernels._cuda_kernel"},
        {&cn_str.not_device_advice, "_not_device_advice"},
    };
    if (cn_intern_strings(names, sizeof(names) / sizeof(names[0])) < 0)
        return -1;
    if (PyType_Ready(&cn_plan_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "LaunchPlan", (PyObject *)&cn_plan_type) < 0)
        return -1;
    if (PyModule_AddFunctions(module, plan_functions) < 0)
        return -1;
    if (cn_register_pack_arrays(module) < 0)
        return -1;
    return cn_register_pack_launch(module);
}
