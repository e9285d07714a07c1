/* The per-call conversion decision of PyccelKernel: is a device array reachable from the
 * arguments (through lists, tuples, dicts and the __dict__ of the objects of given modules)?
 * A memo-free scan within a budget, then an exact one with a memo (see traverse.h). */
#include "traverse.h"

/* --------------------------------------------------------------------------- shared tests */

CN_INTERNAL int cn_traversed_object(PyObject *obj, PyObject *modules)
{
    if (PyTuple_GET_SIZE(modules) == 0)
        return 0;
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp->tp_dictoffset == 0 || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return 0;
    PyObject *module = PyDict_GetItemWithError(tp->tp_dict, cn_trv.module); /* borrowed */
    if (module == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyUnicode_Check(module))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(modules);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t hit = PyUnicode_Tailmatch(module, PyTuple_GET_ITEM(modules, i), 0,
                                             PY_SSIZE_T_MAX, -1);
        if (hit != 0)
            return hit < 0 ? -1 : 1;
    }
    return 0;
}

CN_INTERNAL PyObject *cn_instance_dict(PyObject *obj)
{
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (d != NULL && !PyDict_Check(d)) {
        Py_DECREF(d);
        PyErr_Format(PyExc_TypeError, "the __dict__ of a %.100s object is not a dict",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return d;
}

CN_INTERNAL int cn_is_namedtuple_type(PyTypeObject *tp)
{
    PyObject *make = PyObject_GetAttr((PyObject *)tp, cn_trv.make);
    if (make == NULL) {
        PyErr_Clear();
        return 0;
    }
    int callable = PyCallable_Check(make);
    Py_DECREF(make);
    return callable;
}

CN_INTERNAL PyObject *cn_rebuild_tuple(PyObject *proto, PyObject *items)
{
    if (Py_TYPE(proto) == &PyTuple_Type)
        return Py_NewRef(items);
    return PyObject_CallMethodOneArg((PyObject *)Py_TYPE(proto), cn_trv.make, items);
}


/* --------------------------------------------------------------------------- reachability */

/* Types seen to be leaves: not a device array type, not a container, and without an
 * instance __dict__ (so never a traversed object). The device type never changes once
 * found, so the answer stays true; strong references keep the addresses from reuse. */
#define N_LEAF_TYPES 8
static PyTypeObject *leaf_types[N_LEAF_TYPES];

static inline int known_leaf(PyTypeObject *tp)
{
    for (int i = 0; i < N_LEAF_TYPES && leaf_types[i] != NULL; i++) {
        if (leaf_types[i] == tp)
            return 1;
    }
    return 0;
}

static void remember_leaf(PyTypeObject *tp)
{
    if (tp->tp_dictoffset != 0 && (tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return;
    for (int i = 0; i < N_LEAF_TYPES; i++) {
        if (leaf_types[i] == tp)
            return;
        if (leaf_types[i] == NULL) {
            Py_INCREF(tp);
            leaf_types[i] = tp;
            return;
        }
    }
}

/* Fast scan without a memo: 1 found, 0 not found, 2 gave up (budget spent: deep, wide or
 * cyclic structure), -1 error. */
static int scan_fast(PyObject *obj, PyObject *modules, Py_ssize_t *budget)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (known_leaf(tp))
        return 0;
    if (cn_is_device(obj))
        return 1;
    if (--*budget < 0)
        return 2;
    if (tp == &PyList_Type || tuple_like(obj)) {
        for (Py_ssize_t i = 0; i < Py_SIZE(obj); i++) {
            PyObject *item = tp == &PyList_Type ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i);
            int r = scan_fast(item, modules, budget);
            if (r != 0)
                return r;
        }
        return 0;
    }
    if (PyDict_Check(obj)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(obj, &pos, &key, &value)) {
            int r = scan_fast(value, modules, budget);
            if (r != 0)
                return r;
        }
        return 0;
    }
    int t = cn_traversed_object(obj, modules);
    if (t <= 0) {
        if (t == 0)
            remember_leaf(tp);
        return t;
    }
    PyObject *d = cn_instance_dict(obj);
    if (d == NULL)
        return -1;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int r = 0;
    while (r == 0 && PyDict_Next(d, &pos, &key, &value))
        r = scan_fast(value, modules, budget);
    Py_DECREF(d);
    return r;
}

/* Exact scan with a memo of visited containers and an explicit stack (any depth): 1, 0 or
 * -1. The stack holds strong references: an object's __dict__ may be created on demand. */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
} object_stack;

static int stack_push(object_stack *s, PyObject *obj)
{
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 64;
        PyObject **grown = PyMem_Realloc(s->items, (size_t)cap * sizeof(PyObject *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->items = grown;
        s->cap = cap;
    }
    s->items[s->n++] = Py_NewRef(obj);
    return 0;
}

static int scan_memo(object_stack *stack, PyObject *modules, memo_table *seen)
{
    while (stack->n > 0) {
        PyObject *obj = stack->items[--stack->n]; /* owned */
        int r = 0;
        if (cn_is_device(obj)) {
            Py_DECREF(obj);
            return 1;
        }
        PyTypeObject *tp = Py_TYPE(obj);
        int is_object = 0;
        int container = list_tuple_dict(obj);
        if (!container) {
            is_object = cn_traversed_object(obj, modules);
            if (is_object <= 0) {
                Py_DECREF(obj);
                if (is_object < 0)
                    return -1;
                continue;
            }
        }
        if (memo_find(seen, obj) != NULL) {
            Py_DECREF(obj);
            continue;
        }
        if (memo_add(seen, obj) == NULL) {
            Py_DECREF(obj);
            return -1;
        }
        if (container && !PyDict_Check(obj)) {
            for (Py_ssize_t i = Py_SIZE(obj) - 1; r == 0 && i >= 0; i--)
                r = stack_push(stack, tp == &PyList_Type ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i));
        }
        else {
            PyObject *d = is_object ? cn_instance_dict(obj) : Py_NewRef(obj);
            if (d == NULL) {
                r = -1;
            }
            else {
                Py_ssize_t pos = 0;
                PyObject *key, *value;
                while (r == 0 && PyDict_Next(d, &pos, &key, &value))
                    r = stack_push(stack, value);
                Py_DECREF(d);
            }
        }
        Py_DECREF(obj);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* Nodes the memo-free scan may visit before switching to the exact scan. */
#define SCAN_BUDGET 4096

/* cn_device_type() for the per-call decision: while CuPy is not imported, the negative
 * answer is reused as long as sys.modules has not changed (its dict version tag), which
 * saves a lookup in a dict of a thousand modules on every call. */
static PyTypeObject *device_type_now(void)
{
    static PyTypeObject *found = NULL; /* cn_device_type() caches it for good once found */
    if (CN_LIKELY(found != NULL))
        return found;
#if PY_VERSION_HEX < 0x030C0000
    static PyObject *absent_in = NULL; /* borrowed: compared by address only */
    static uint64_t absent_tag = 0;
    PyObject *modules = PyImport_GetModuleDict();
    if (modules != NULL && modules == absent_in && ((PyDictObject *)modules)->ma_version_tag == absent_tag)
        return NULL;
    found = cn_device_type();
    if (found == NULL && modules != NULL && PyDict_Check(modules)) {
        absent_in = modules;
        absent_tag = ((PyDictObject *)modules)->ma_version_tag;
    }
#else
    found = cn_device_type();
#endif
    return found;
}

CN_INTERNAL int cn_reaches_device(PyObject *const *args, Py_ssize_t nargs, PyObject *const *kwvalues,
                                  Py_ssize_t nkw, PyObject *modules)
{
    if (device_type_now() == NULL)
        return 0;
    Py_ssize_t budget = SCAN_BUDGET;
    int r = 0;
    /* args and kwvalues are adjacent in a vectorcall, not in general: two loops. */
    for (Py_ssize_t i = 0; r == 0 && i < nargs; i++) {
        if (!known_leaf(Py_TYPE(args[i])))
            r = scan_fast(args[i], modules, &budget);
    }
    for (Py_ssize_t i = 0; r == 0 && i < nkw; i++) {
        if (!known_leaf(Py_TYPE(kwvalues[i])))
            r = scan_fast(kwvalues[i], modules, &budget);
    }
    if (r != 2)
        return r;
    memo_table seen;
    memo_init(&seen);
    object_stack stack = {NULL, 0, 0};
    r = 0;
    for (Py_ssize_t i = nkw - 1; r == 0 && i >= 0; i--)
        r = stack_push(&stack, kwvalues[i]);
    for (Py_ssize_t i = nargs - 1; r == 0 && i >= 0; i--)
        r = stack_push(&stack, args[i]);
    if (r == 0)
        r = scan_memo(&stack, modules, &seen);
    for (Py_ssize_t i = 0; i < stack.n; i++)
        Py_DECREF(stack.items[i]);
    PyMem_Free(stack.items);
    memo_free(&seen);
    return r;
}

CN_INTERNAL int cn_check_modules(PyObject *modules, const char *fname)
{
    if (!PyTuple_Check(modules)) {
        PyErr_Format(PyExc_TypeError, "%s(): 'object_modules' must be a tuple of str, not %.100s",
                     fname, Py_TYPE(modules)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(modules); i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(modules, i))) {
            PyErr_Format(PyExc_TypeError, "%s(): 'object_modules' must be a tuple of str, "
                         "item %zd is %.100s", fname, i, Py_TYPE(PyTuple_GET_ITEM(modules, i))->tp_name);
            return -1;
        }
    }
    return 0;
}

/* Unpack (args tuple, kwargs dict or None) for the Python-level entry points. */
CN_INTERNAL int cn_check_call_args(PyObject *pos, PyObject *kw, const char *fname)
{
    if (!PyTuple_Check(pos)) {
        PyErr_Format(PyExc_TypeError, "%s(): 'args' must be a tuple, not %.100s", fname,
                     Py_TYPE(pos)->tp_name);
        return -1;
    }
    if (kw != Py_None && !PyDict_Check(kw)) {
        PyErr_Format(PyExc_TypeError, "%s(): 'kwargs' must be a dict or None, not %.100s", fname,
                     Py_TYPE(kw)->tp_name);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(reaches_device_doc,
             "reaches_device(args, kwargs=None, object_modules=())\n--\n\n"
             "True if a device array is reachable from the arguments through lists, tuples,\n"
             "dicts and the __dict__ of objects whose class module starts with a prefix in\n"
             "object_modules. Terminates on reference cycles; never imports CuPy.");

static PyObject *reaches_device(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3)
        return cn_raise(CN_ERR_TYPE, "reaches_device() takes 1 to 3 arguments (%zd given)", nargs);
    PyObject *kw = nargs > 1 ? args[1] : Py_None;
    PyObject *modules = nargs > 2 ? args[2] : cn_trv.empty_tuple;
    if (cn_check_call_args(args[0], kw, "reaches_device") < 0 || cn_check_modules(modules, "reaches_device") < 0)
        return NULL;
    PyObject *values = kw == Py_None ? PyList_New(0) : PyDict_Values(kw);
    if (values == NULL)
        return NULL;
    Py_ssize_t npos = PyTuple_GET_SIZE(args[0]), nkw = PyList_GET_SIZE(values);
    int r = cn_reaches_device(npos ? &PyTuple_GET_ITEM(args[0], 0) : NULL, npos,
                                nkw ? &PyList_GET_ITEM(values, 0) : NULL, nkw, modules);
    Py_DECREF(values);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}


static PyMethodDef scan_methods[] = {
    {"reaches_device", (PyCFunction)(void (*)(void))reaches_device, METH_FASTCALL, reaches_device_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_traverse_scan(PyObject *module) { return PyModule_AddFunctions(module, scan_methods); }
