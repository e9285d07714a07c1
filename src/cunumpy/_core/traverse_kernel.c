/* HostKernel, the callable base of PyccelKernel: the no-conversion path in C, the conversion
 * path delegated to Python; and the registration of the traversal files (see traverse.h). */
#include "traverse.h"

CN_INTERNAL struct cn_traverse_strings cn_trv;

/* --------------------------------------------------------------------------- HostKernel */

/* The callable base of PyccelKernel: the no-conversion path in C, the conversion path
 * delegated to `convert(self, args, kwargs)`. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *kernel;
    int use_cupy; /* -1: decide per call, 0: never, 1: always */
    PyObject *modules;
    PyObject *state;   /* object whose `backend` attribute (or dict whose "backend" key)
                          names the active backend */
    PyObject *convert; /* convert(self, args: tuple, kwargs: dict | None) */
    PyObject *weakrefs;
    int flags;         /* HK_* below */
} HostKernelObject;

/* Calls with keyword arguments always take the convert path (Kernel: launch keywords). */
#define HK_KEYWORDS_CONVERT 1
/* A positional argument whose class defines __cuda_args__ takes the convert path (Kernel
 * with dispatch="arrays": argument objects are device arguments). */
#define HK_ARGUMENT_OBJECTS 2
#define HK_ALL_FLAGS (HK_KEYWORDS_CONVERT | HK_ARGUMENT_OBJECTS)

/* 1 if a positional argument's class defines __cuda_args__ (looked up on the type, as the
 * launch code does), else 0. The type attribute cache makes this a few loads per argument. */
static int has_argument_object(PyObject *const *args, Py_ssize_t nargs)
{
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyTypeObject *tp = Py_TYPE(args[i]);
        if (tp == &PyFloat_Type || tp == &PyLong_Type || tp == &PyBool_Type)
            continue;
        if (_PyType_Lookup(tp, cn_trv.cuda_args) != NULL)
            return 1;
    }
    return 0;
}

static int backend_is_cupy(PyObject *state)
{
    PyObject *b;
    if (PyDict_CheckExact(state)) {
        /* The backend state's __dict__: one lookup of an interned key. */
        b = PyDict_GetItemWithError(state, cn_trv.backend); /* borrowed */
        if (b == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (b == cn_trv.numpy)
            return 0;
        return b == cn_trv.cupy || (PyUnicode_Check(b) && PyUnicode_Compare(b, cn_trv.cupy) == 0);
    }
    b = PyObject_GetAttr(state, cn_trv.backend);
    if (b == NULL)
        return -1;
    int r = b == cn_trv.cupy ? 1 : (PyUnicode_Check(b) && PyUnicode_Compare(b, cn_trv.cupy) == 0);
    Py_DECREF(b);
    return r;
}

/* A vectorcall's arguments as a positional tuple and a keyword dict (*kw NULL without
 * keywords). -1 with an exception set, nothing to release. */
static int vectorcall_to_tuple_dict(PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject **pos,
                                    PyObject **kw)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    *kw = NULL;
    *pos = PyTuple_New(nargs);
    if (*pos == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(*pos, i, Py_NewRef(args[i]));
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)
        return 0;
    *kw = PyDict_New();
    if (*kw == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        if (PyDict_SetItem(*kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
            goto fail;
    }
    return 0;
fail:
    Py_CLEAR(*pos);
    Py_CLEAR(*kw);
    return -1;
}

static PyObject *hk_convert(HostKernelObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *pos, *kw;
    if (vectorcall_to_tuple_dict(args, nargsf, kwnames, &pos, &kw) < 0)
        return NULL;
    if (kw == NULL)
        kw = Py_NewRef(Py_None);
    PyObject *stack[3] = {(PyObject *)self, pos, kw};
    PyObject *convert = Py_NewRef(self->convert);
    PyObject *r = PyObject_Vectorcall(convert, stack, 3, NULL);
    Py_DECREF(convert);
    Py_DECREF(pos);
    Py_DECREF(kw);
    return r;
}

static PyObject *hk_call(PyObject *op, PyObject *pos, PyObject *kw);

/* The call through the class's current tp_call (a __call__ assigned after the class was made). */
static PyObject *hk_call_replaced(PyObject *op, ternaryfunc call, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    PyObject *pos, *kw;
    if (vectorcall_to_tuple_dict(args, nargsf, kwnames, &pos, &kw) < 0)
        return NULL;
    PyObject *r = call(op, pos, kw);
    Py_DECREF(pos);
    Py_XDECREF(kw);
    return r;
}

static PyObject *hk_vectorcall_impl(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *hk_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    /* Before CPython 3.12 the instance's vectorcall pointer is used even after __call__ is
     * assigned on the class (unittest.mock.patch.object(PyccelKernel, "__call__", ...)),
     * which replaces tp_call: follow tp_call then. One pointer compare per call. */
    ternaryfunc call = Py_TYPE(op)->tp_call;
    if (CN_UNLIKELY(call != hk_call && call != NULL))
        return hk_call_replaced(op, call, args, nargsf, kwnames);
    return hk_vectorcall_impl(op, args, nargsf, kwnames);
}

static PyObject *hk_vectorcall_impl(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    HostKernelObject *self = (HostKernelObject *)op;
    if (CN_UNLIKELY(self->kernel == NULL))
        return cn_raise(CN_ERR_TYPE, "%.100s object is not initialised", Py_TYPE(op)->tp_name);
    int convert = self->use_cupy;
    if (CN_UNLIKELY(self->flags != 0)) {
        if ((self->flags & HK_KEYWORDS_CONVERT) && kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
            return hk_convert(self, args, nargsf, kwnames);
        if (convert < 0 && (self->flags & HK_ARGUMENT_OBJECTS) &&
            has_argument_object(args, PyVectorcall_NARGS(nargsf)))
            return hk_convert(self, args, nargsf, kwnames);
    }
    if (convert < 0) {
        convert = backend_is_cupy(self->state);
        if (convert < 0)
            return NULL;
        if (!convert) {
            Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
            Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
            convert = cn_reaches_device(args, nargs, args + nargs, nkw, self->modules);
            if (convert < 0)
                return NULL;
        }
    }
    if (!convert) {
        /* A strong reference for the call: another thread may _configure() a new kernel
         * (Kernel does on a selection change) while this one runs. */
        PyObject *kernel = Py_NewRef(self->kernel);
        PyObject *r = PyObject_Vectorcall(kernel, args, nargsf, kwnames);
        Py_DECREF(kernel);
        return r;
    }
    return hk_convert(self, args, nargsf, kwnames);
}

static PyObject *hk_call(PyObject *op, PyObject *pos, PyObject *kw)
{
    /* Reached for subclasses without the vectorcall flag and through HostKernel.__call__
     * (super().__call__ of a replacing __call__): the work itself, never tp_call again. */
    Py_ssize_t nargs = PyTuple_GET_SIZE(pos);
    Py_ssize_t nkw = kw == NULL ? 0 : PyDict_GET_SIZE(kw);
    PyObject **stack = PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nargs; i++)
        stack[i] = PyTuple_GET_ITEM(pos, i);
    PyObject *kwnames = NULL;
    if (nkw > 0) {
        kwnames = PyTuple_New(nkw);
        if (kwnames == NULL) {
            PyMem_Free(stack);
            return NULL;
        }
        Py_ssize_t p = 0, i = 0;
        PyObject *k, *v;
        while (PyDict_Next(kw, &p, &k, &v)) {
            PyTuple_SET_ITEM(kwnames, i, Py_NewRef(k));
            stack[nargs + i++] = v;
        }
    }
    PyObject *r = hk_vectorcall_impl(op, stack, (size_t)nargs, kwnames);
    Py_XDECREF(kwnames);
    PyMem_Free(stack);
    return r;
}

PyDoc_STRVAR(hk_configure_doc,
             "_configure(kernel, use_cupy, object_modules, state, convert, flags=0)\n--\n\n"
             "Set what a call needs: the wrapped callable, True/False/None, the object module\n"
             "prefixes, the backend state object and the conversion-path callable. flags: 1 sends\n"
             "calls with keyword arguments to convert; 2 sends calls with a positional argument\n"
             "whose class defines __cuda_args__ to convert (when use_cupy is None).");

static PyObject *hk_configure(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    HostKernelObject *self = (HostKernelObject *)op;
    if (nargs != 5 && nargs != 6)
        return cn_raise(CN_ERR_TYPE, "_configure() takes 5 or 6 arguments (%zd given)", nargs);
    long flags = 0;
    if (nargs == 6) {
        if (!PyLong_CheckExact(args[5]))
            return cn_raise(CN_ERR_TYPE, "flags must be an int, not %.100s", Py_TYPE(args[5])->tp_name);
        flags = PyLong_AsLong(args[5]);
        if (flags == -1 && PyErr_Occurred())
            return NULL;
        if (flags < 0 || (flags & ~(long)HK_ALL_FLAGS) != 0)
            return cn_raise(CN_ERR_VALUE, "flags must combine 1 and 2, got %ld", flags);
    }
    if (!PyCallable_Check(args[0]))
        return cn_raise(CN_ERR_TYPE, "kernel must be callable, not %.100s", Py_TYPE(args[0])->tp_name);
    int use_cupy;
    if (args[1] == Py_None)
        use_cupy = -1;
    else if (args[1] == Py_True || args[1] == Py_False)
        use_cupy = args[1] == Py_True;
    else
        return cn_raise(CN_ERR_TYPE, "use_cupy must be True, False or None, not %.100s",
                        Py_TYPE(args[1])->tp_name);
    if (cn_check_modules(args[2], "_configure") < 0)
        return NULL;
    if (!PyCallable_Check(args[4]))
        return cn_raise(CN_ERR_TYPE, "convert must be callable");
    Py_XSETREF(self->kernel, Py_NewRef(args[0]));
    self->use_cupy = use_cupy;
    Py_XSETREF(self->modules, Py_NewRef(args[2]));
    Py_XSETREF(self->state, Py_NewRef(args[3]));
    Py_XSETREF(self->convert, Py_NewRef(args[4]));
    self->flags = (int)flags;
    Py_RETURN_NONE;
}

static PyObject *hk_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    HostKernelObject *self = (HostKernelObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = hk_vectorcall;
    self->use_cupy = -1;
    return (PyObject *)self;
}

static int hk_traverse(PyObject *op, visitproc visit, void *arg)
{
    HostKernelObject *self = (HostKernelObject *)op;
    Py_VISIT(self->kernel);
    Py_VISIT(self->modules);
    Py_VISIT(self->state);
    Py_VISIT(self->convert);
    return 0;
}

static int hk_clear(PyObject *op)
{
    HostKernelObject *self = (HostKernelObject *)op;
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->modules);
    Py_CLEAR(self->state);
    Py_CLEAR(self->convert);
    return 0;
}

static void hk_dealloc(PyObject *op)
{
    HostKernelObject *self = (HostKernelObject *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs(op);
    hk_clear(op);
    /* The type is static; a Python subclass's reference is dropped by subtype_dealloc. */
    tp->tp_free(op);
}

static PyMethodDef hk_methods[] = {
    {"_configure", (PyCFunction)(void (*)(void))hk_configure, METH_FASTCALL, hk_configure_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(hk_doc, "HostKernel()\n--\n\nBase of PyccelKernel: calls the wrapped function directly "
                     "unless conversion is needed.");

static PyTypeObject HostKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cunumpy._core.HostKernel",
    .tp_basicsize = sizeof(HostKernelObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = hk_doc,
    .tp_new = hk_new,
    .tp_dealloc = hk_dealloc,
    .tp_traverse = hk_traverse,
    .tp_clear = hk_clear,
    .tp_call = hk_call,
    .tp_vectorcall_offset = offsetof(HostKernelObject, vectorcall),
    .tp_weaklistoffset = offsetof(HostKernelObject, weakrefs),
    .tp_methods = hk_methods,
};

PyDoc_STRVAR(enable_vectorcall_doc,
             "enable_vectorcall(cls)\n--\n\n"
             "Give a Python subclass of HostKernel the fast call protocol of its base (CPython\n"
             "before 3.12 does not inherit it). Refused when the subclass defines __call__.");

static PyObject *enable_vectorcall(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &HostKernelType))
        return cn_raise(CN_ERR_TYPE, "enable_vectorcall(): expected a subclass of HostKernel");
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (tp->tp_call != hk_call || tp->tp_vectorcall_offset != HostKernelType.tp_vectorcall_offset)
        Py_RETURN_FALSE;
    tp->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    Py_RETURN_TRUE;
}

static PyMethodDef kernel_methods[] = {
    {"enable_vectorcall", enable_vectorcall, METH_O, enable_vectorcall_doc},
    {NULL, NULL, 0, NULL},
};

static int measure_plain_basicsize(void)
{
    PyObject *ns = PyDict_New();
    if (ns == NULL)
        return -1;
    PyObject *cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O)O", "_Plain",
                                          (PyObject *)&PyBaseObject_Type, ns);
    Py_DECREF(ns);
    if (cls == NULL)
        return -1;
    cn_trv.plain_basicsize = ((PyTypeObject *)cls)->tp_basicsize;
    Py_DECREF(cls);
    return 0;
}

CN_INTERNAL int cn_register_traverse(PyObject *module)
{
    cn_trv.backend = PyUnicode_InternFromString("backend");
    cn_trv.cupy = PyUnicode_InternFromString("cupy");
    cn_trv.numpy = PyUnicode_InternFromString("numpy");
    cn_trv.module = PyUnicode_InternFromString("__module__");
    cn_trv.copy_dunder = PyUnicode_InternFromString("__copy__");
    cn_trv.cuda_args = PyUnicode_InternFromString("__cuda_args__");
    cn_trv.make = PyUnicode_InternFromString("_make");
    cn_trv.empty_tuple = PyTuple_New(0);
    cn_trv.copy_protocol[0] = PyUnicode_InternFromString("__reduce_ex__");
    cn_trv.copy_protocol[1] = PyUnicode_InternFromString("__reduce__");
    cn_trv.copy_protocol[2] = PyUnicode_InternFromString("__getstate__");
    if (!cn_trv.copy_protocol[0] || !cn_trv.copy_protocol[1] || !cn_trv.copy_protocol[2])
        return -1;
    if (!cn_trv.backend || !cn_trv.cupy || !cn_trv.numpy || !cn_trv.module || !cn_trv.copy_dunder || !cn_trv.cuda_args || !cn_trv.make ||
        !cn_trv.empty_tuple)
        return -1;
    PyObject *copy_module = PyImport_ImportModule("copy");
    if (copy_module == NULL)
        return -1;
    cn_trv.copy_copy = PyObject_GetAttrString(copy_module, "copy");
    Py_DECREF(copy_module);
    if (cn_trv.copy_copy == NULL || measure_plain_basicsize() < 0)
        return -1;
    if (PyType_Ready(&HostKernelType) < 0)
        return -1;
    Py_INCREF(&HostKernelType);
    if (PyModule_AddObject(module, "HostKernel", (PyObject *)&HostKernelType) < 0) {
        Py_DECREF(&HostKernelType);
        return -1;
    }
    if (PyModule_AddFunctions(module, kernel_methods) < 0)
        return -1;
    if (cn_register_traverse_scan(module) < 0)
        return -1;
    return cn_register_traverse_copy(module);
}

