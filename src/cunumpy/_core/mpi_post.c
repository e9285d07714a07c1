/* The common case of cunumpy.mpi.exchange(), checked in one call and posted in another.
 *
 * exchange_plain(receives, sends, array_type, host, get_size, proc_null) looks at every
 * (array, rank, tag) descriptor of both sequences and returns a tuple snapshot of each and
 * a flag, (receives, sends, checked), when every one is in the common form; None otherwise, and the Python
 * slow path then normalises the descriptors or raises the error that names the bad one.
 * get_size() (the communicator's Get_size) is called once, after the structure of every
 * descriptor passed, so a malformed exchange never touches the communicator.
 *
 * The common form: an exact tuple of three; `array` of exactly `array_type`; `rank` and `tag`
 * exact ints, 0 <= rank < size or rank == proc_null, tag >= 0. With `host` true the array
 * must also give a C-contiguous buffer (writable for a receive) whose format holds no Python
 * objects; without it (device arrays) an array of the fake CuPy is checked the same way on
 * its host array, and the caller checks a real CuPy array. The checks read the arrays' C
 * structs (pack.h; the layout verified by register_ndarray_type), not their attributes.
 *
 * exchange_post(irecv, isend, receives, sends) then posts every receive with
 * irecv(array, rank, tag), every send with isend(...), and returns the list of requests.
 * exchange_host() does all of it, and the wait, in one call for host arrays. */
#include "common.h"

#include "buffer_args.h"
#include "pack.h"

/* dtypes found free of Python objects (strong references, so an address is never reused by
 * another dtype while it is here). NumPy's built-in dtypes are singletons: a few entries
 * cover every halo and particle exchange; a dtype that does not fit is checked each time. */
#define PLAIN_DTYPES 32
static PyObject *plain_dtypes[PLAIN_DTYPES];
static int n_plain_dtypes;

/* 1 when the dtype `descr` holds no Python objects, 0 when it does or cannot tell. */
static int dtype_without_objects(PyObject *descr)
{
    for (int k = 0; k < n_plain_dtypes; k++)
        if (plain_dtypes[k] == descr)
            return 1;
    PyObject *has = PyObject_GetAttrString(descr, "hasobject");
    if (has == NULL) {
        PyErr_Clear();
        return 0;
    }
    int objects = PyObject_IsTrue(has);
    Py_DECREF(has);
    if (objects != 0) {
        PyErr_Clear();
        return 0;
    }
    if (n_plain_dtypes < PLAIN_DTYPES)
        plain_dtypes[n_plain_dtypes++] = Py_NewRef(descr);
    return 1;
}

/* 1 when `array` (exactly numpy.ndarray, or exactly the fake CuPy's ndarray) is C-contiguous,
 * writable if asked, without Python objects, read from its C struct; 0 when it is not;
 * -1 when its struct cannot be read (not a verified layout): the caller decides otherwise. */
static int struct_plain(PyObject *array, int writable)
{
    cn_ndarray_t a;
    if (!cn_read_array_memory(array, &a))
        return -1;
    if (!(a.flags & CN_NPY_C_CONTIGUOUS) || (writable && !(a.flags & CN_NPY_WRITEABLE)))
        return 0;
    return dtype_without_objects(a.descr);
}

/* 1 when a host buffer is C-contiguous (writable if asked) and holds no Python objects. */
static int buffer_plain(PyObject *array, int writable)
{
    int plain = struct_plain(array, writable);
    if (plain >= 0)
        return plain;
    Py_buffer view;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(array, &view, flags) < 0) {
        PyErr_Clear();
        return 0;
    }
    int objects = cn_format_has_objects(view.format);
    PyBuffer_Release(&view);
    return !objects;
}

/* 1 when every descriptor of `items` (a tuple) has the common structure (ranks are checked
 * later, by plain_ranks), else 0. Never raises. */
static int plain_descriptors(PyObject *items, PyTypeObject *array_type, int host, int writable, int *unchecked)
{
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3)
            return 0;
        PyObject *array = PyTuple_GET_ITEM(item, 0);
        PyObject *rank = PyTuple_GET_ITEM(item, 1);
        PyObject *tag = PyTuple_GET_ITEM(item, 2);
        if (Py_TYPE(array) != array_type || !PyLong_CheckExact(rank) || !PyLong_CheckExact(tag))
            return 0;
        int overflow = 0;
        long t = PyLong_AsLongAndOverflow(tag, &overflow);
        if (overflow || t < 0) {
            PyErr_Clear();
            return 0;
        }
        if (host) {
            if (!buffer_plain(array, writable))
                return 0;
        } else {
            /* An array of the fake CuPy: its host array is read; a real CuPy array (-1) is
             * checked by the caller. */
            int plain = struct_plain(array, writable);
            if (plain == 0)
                return 0;
            if (plain < 0)
                *unchecked = 1;
        }
    }
    return 1;
}

/* 1 when every rank of `items` (checked by plain_descriptors) is in [0, size) or proc_null. */
static int plain_ranks(PyObject *items, long size, long proc_null)
{
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        int overflow = 0;
        long r = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(PyTuple_GET_ITEM(items, i), 1), &overflow);
        if (overflow || (r == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        if ((r < 0 || r >= size) && r != proc_null)
            return 0;
    }
    return 1;
}

/* Call post(array, rank, tag) for every descriptor of `items`, appending to `requests`. */
static int post_all(PyObject *post, PyObject *items, PyObject *requests)
{
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i);
        PyObject *args[3] = {PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), PyTuple_GET_ITEM(item, 2)};
        PyObject *request = PyObject_Vectorcall(post, args, 3, NULL);
        if (request == NULL)
            return -1;
        int failed = PyList_Append(requests, request);
        Py_DECREF(request);
        if (failed < 0)
            return -1;
    }
    return 0;
}

/* A tuple snapshot of an exact list or tuple (new reference); NULL without an exception for
 * anything else. The snapshot is what is both checked and posted, so a list changed by
 * another thread between the two cannot slip an unchecked descriptor in. */
static PyObject *snapshot(PyObject *items)
{
    if (PyTuple_CheckExact(items))
        return Py_NewRef(items);
    if (PyList_CheckExact(items))
        return PyList_AsTuple(items);
    return NULL;
}

/* Check both descriptor sequences: 1 with new references to their tuple snapshots in
 * *receives_out and *sends_out and *unchecked set when they are in the common form, 0 when
 * not (nothing returned), -1 with an exception when get_size() failed. */
static int check_plain(PyObject *receives_in, PyObject *sends_in, PyTypeObject *array_type, int host,
                       PyObject *get_size, long proc_null, PyObject **receives_out, PyObject **sends_out,
                       int *unchecked)
{
    PyObject *receives = snapshot(receives_in);
    if (receives == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *sends = snapshot(sends_in);
    if (sends == NULL) {
        Py_DECREF(receives);
        return PyErr_Occurred() ? -1 : 0;
    }
    int status = 0;
    if (PyTuple_GET_SIZE(receives) == 0 && PyTuple_GET_SIZE(sends) == 0) {
        status = 1; /* nothing to check, and nothing to ask the communicator */
    } else if (plain_descriptors(receives, array_type, host, 1, unchecked) &&
               plain_descriptors(sends, array_type, host, 0, unchecked)) {
        PyObject *size_object = PyObject_CallNoArgs(get_size);
        long size = size_object == NULL ? -1 : PyLong_AsLong(size_object);
        Py_XDECREF(size_object);
        if (size == -1 && PyErr_Occurred())
            status = -1;
        else if (plain_ranks(receives, size, proc_null) && plain_ranks(sends, size, proc_null))
            status = 1;
    }
    if (status == 1) {
        *receives_out = receives;
        *sends_out = sends;
    } else {
        Py_DECREF(receives);
        Py_DECREF(sends);
    }
    return status;
}

PyDoc_STRVAR(exchange_plain_doc,
             "exchange_plain(receives, sends, array_type, host, get_size, proc_null)\n--\n\n"
             "(receives, sends, checked) when every descriptor of an exchange is in the common form,\n"
             "receives and sends as tuples, else None. checked is False when some device array could\n"
             "not be read in C (a real CuPy array: the caller checks its contiguity). get_size() is\n"
             "called once, after the structure of every descriptor passed.");

static PyObject *exchange_plain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6)
        return PyErr_Format(PyExc_TypeError, "exchange_plain() takes 6 arguments, got %zd", nargs);
    if (!PyType_Check(args[2]))
        return PyErr_Format(PyExc_TypeError, "exchange_plain(): 'array_type' must be a type");
    int host = PyObject_IsTrue(args[3]);
    if (host < 0)
        return NULL;
    long proc_null = PyLong_AsLong(args[5]);
    if (proc_null == -1 && PyErr_Occurred())
        return NULL;
    PyObject *receives = NULL, *sends = NULL;
    int unchecked = 0;
    int status = check_plain(args[0], args[1], (PyTypeObject *)args[2], host, args[4], proc_null, &receives, &sends,
                             &unchecked);
    if (status < 0)
        return NULL;
    if (status == 0)
        Py_RETURN_NONE;
    PyObject *result = Py_BuildValue("(OOO)", receives, sends, unchecked ? Py_False : Py_True);
    Py_DECREF(receives);
    Py_DECREF(sends);
    return result;
}

PyDoc_STRVAR(exchange_host_doc,
             "exchange_host(receives, sends, get_size, proc_null, irecv, isend, waitall)\n--\n\n"
             "The whole common case of a host exchange in one call: None, with nothing posted, when a\n"
             "descriptor is not in the common form or get_size() failed (the slow path then reports\n"
             "it); else every receive and send posted, waitall(requests) called, and True returned\n"
             "(False when both sequences are empty: nothing posted, nothing waited for). An error\n"
             "while posting or waiting is raised.");

static PyObject *exchange_host(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7)
        return PyErr_Format(PyExc_TypeError, "exchange_host() takes 7 arguments, got %zd", nargs);
    if (cn_ndarray_type == NULL)
        Py_RETURN_NONE; /* the NumPy layout is not verified: the slow path checks */
    long proc_null = PyLong_AsLong(args[3]);
    if (proc_null == -1 && PyErr_Occurred())
        return NULL;
    PyObject *receives = NULL, *sends = NULL;
    int unchecked = 0;
    int status =
        check_plain(args[0], args[1], cn_ndarray_type, 1, args[2], proc_null, &receives, &sends, &unchecked);
    if (status <= 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *result = NULL;
    if (PyTuple_GET_SIZE(receives) == 0 && PyTuple_GET_SIZE(sends) == 0) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    PyObject *requests = PyList_New(0);
    if (requests == NULL)
        goto done;
    if (post_all(args[4], receives, requests) == 0 && post_all(args[5], sends, requests) == 0) {
        PyObject *waited = PyObject_CallOneArg(args[6], requests);
        if (waited != NULL) {
            Py_DECREF(waited);
            result = Py_NewRef(Py_True);
        }
    }
    Py_DECREF(requests);
done:
    Py_DECREF(receives);
    Py_DECREF(sends);
    return result;
}

PyDoc_STRVAR(exchange_post_doc,
             "exchange_post(irecv, isend, receives, sends)\n--\n\n"
             "Post every receive with irecv(array, rank, tag), then every send with isend(...);\n"
             "receives and sends are the tuples exchange_plain() returned. The list of requests.");

static PyObject *exchange_post(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "exchange_post() takes 4 arguments, got %zd", nargs);
    /* receives and sends come from exchange_plain(): exact tuples of 3-tuples, re-checked
     * here because a malformed call must raise, never read past a tuple. */
    for (int k = 2; k < 4; k++) {
        PyObject *items = args[k];
        if (!PyTuple_CheckExact(items))
            return PyErr_Format(PyExc_TypeError, "exchange_post(): descriptors must be a tuple");
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
            PyObject *item = PyTuple_GET_ITEM(items, i);
            if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3)
                return PyErr_Format(PyExc_TypeError, "exchange_post(): a descriptor is not a 3-tuple");
        }
    }
    PyObject *requests = PyList_New(0);
    if (requests == NULL)
        return NULL;
    if (post_all(args[0], args[2], requests) < 0 || post_all(args[1], args[3], requests) < 0) {
        Py_DECREF(requests);
        return NULL;
    }
    return requests;
}

static PyMethodDef mpi_post_methods[] = {
    {"exchange_host", (PyCFunction)(void (*)(void))exchange_host, METH_FASTCALL, exchange_host_doc},
    {"exchange_plain", (PyCFunction)(void (*)(void))exchange_plain, METH_FASTCALL, exchange_plain_doc},
    {"exchange_post", (PyCFunction)(void (*)(void))exchange_post, METH_FASTCALL, exchange_post_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_mpi_post(PyObject *module)
{
    return PyModule_AddFunctions(module, mpi_post_methods);
}
