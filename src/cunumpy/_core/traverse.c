/* PyccelKernel's hot path: the per-call conversion decision, the traversal that builds host
 * copies of device arrays (one per array, also across containers) with the copy-back plan,
 * and the conversion of returned host arrays. The copies themselves are Python callables
 * passed in, so transfer accounting stays in one place. Twin: _reference/traverse.py. */
#include "common.h"

static PyObject *str_backend;     /* "backend" */
static PyObject *str_cupy;        /* "cupy" */
static PyObject *str_numpy;       /* "numpy" */
static PyObject *str_module;      /* "__module__" */
static PyObject *str_copy_dunder; /* "__copy__" */
static PyObject *str_cuda_args;   /* "__cuda_args__" */
static PyObject *empty_tuple;
static PyObject *copy_copy;       /* copy.copy */
static PyObject *copy_protocol[3]; /* "__reduce_ex__", "__reduce__", "__getstate__" */
static Py_ssize_t plain_basicsize; /* tp_basicsize of an instance of `class C: pass` */

/* --------------------------------------------------------------------------- pointer memo */

/* Open-addressing map from an object's address to what the traversal made of it. Keys are
 * strong references: a callback may drop the caller's last reference to a container. */
typedef struct {
    PyObject *key;
    PyObject *value;    /* host copy / container copy; NULL while a tuple is being built */
    Py_ssize_t array;   /* index into the array list for device arrays, else -1 */
} memo_entry;

typedef struct {
    memo_entry *slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t used;
    memo_entry inline_slots[32];
} memo_table;

static void memo_init(memo_table *m)
{
    memset(m->inline_slots, 0, sizeof(m->inline_slots));
    m->slots = m->inline_slots;
    m->mask = 31;
    m->used = 0;
}

static void memo_free(memo_table *m)
{
    for (size_t i = 0; i <= m->mask; i++) {
        Py_XDECREF(m->slots[i].key);
        Py_XDECREF(m->slots[i].value);
    }
    if (m->slots != m->inline_slots)
        PyMem_Free(m->slots);
    m->slots = NULL;
}

static inline size_t memo_hash(PyObject *key)
{
    uintptr_t h = (uintptr_t)key >> 4;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

static memo_entry *memo_find(memo_table *m, PyObject *key)
{
    size_t i = memo_hash(key) & m->mask;
    for (;;) {
        memo_entry *e = &m->slots[i];
        if (e->key == key)
            return e;
        if (e->key == NULL)
            return NULL;
        i = (i + 1) & m->mask;
    }
}

static int memo_grow(memo_table *m)
{
    size_t cap = (m->mask + 1) * 2;
    memo_entry *slots = PyMem_Calloc(cap, sizeof(memo_entry));
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i <= m->mask; i++) {
        memo_entry *e = &m->slots[i];
        if (e->key == NULL)
            continue;
        size_t j = memo_hash(e->key) & (cap - 1);
        while (slots[j].key != NULL)
            j = (j + 1) & (cap - 1);
        slots[j] = *e;
    }
    if (m->slots != m->inline_slots)
        PyMem_Free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

/* Insert a new key (absent by contract); returns the entry or NULL with MemoryError set. */
static memo_entry *memo_add(memo_table *m, PyObject *key)
{
    if ((m->used + 1) * 2 > m->mask + 1 && memo_grow(m) < 0) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t i = memo_hash(key) & m->mask;
    while (m->slots[i].key != NULL)
        i = (i + 1) & m->mask;
    memo_entry *e = &m->slots[i];
    e->key = Py_NewRef(key);
    e->value = NULL;
    e->array = -1;
    m->used++;
    return e;
}

/* --------------------------------------------------------------------------- shared tests */

/* 1 if the class of `obj` is in one of the `modules` prefixes and its instances carry a
 * __dict__ (the only attributes traversed), 0 if not, -1 on error. */
static int traversed_object(PyObject *obj, PyObject *modules)
{
    if (PyTuple_GET_SIZE(modules) == 0)
        return 0;
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp->tp_dictoffset == 0 || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return 0;
    PyObject *module = PyDict_GetItemWithError(tp->tp_dict, str_module); /* borrowed */
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

/* The instance dict of a traversed object (new reference) or NULL with an error set. */
static PyObject *instance_dict(PyObject *obj)
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

/* --------------------------------------------------------------------------- reachability */

/* Types seen to be leaves: not a device array type, not a container, and without an
 * instance __dict__ (so never a traversed object). The device type never changes once
 * found, so the answer stays true; strong references keep the addresses from reuse. */
#define N_LEAF_TYPES 8
static PyTypeObject *leaf_types[N_LEAF_TYPES];

/* Containers the traversals look into: exact lists, tuples and dicts, and the subclasses users
 * pass as records, rebuilt with their own type: namedtuples (tuple subclasses with _make) and
 * dict subclasses (OrderedDict, defaultdict, ...). Exact types cost one compare. */
static PyObject *str_make; /* "_make" */

static int is_namedtuple_type(PyTypeObject *tp)
{
    PyObject *make = PyObject_GetAttr((PyObject *)tp, str_make);
    if (make == NULL) {
        PyErr_Clear();
        return 0;
    }
    int callable = PyCallable_Check(make);
    Py_DECREF(make);
    return callable;
}

static inline int tuple_like(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return tp == &PyTuple_Type || (PyTuple_Check(obj) && is_namedtuple_type(tp));
}

static inline int list_tuple_dict(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return tp == &PyList_Type || tp == &PyTuple_Type || tp == &PyDict_Type || PyDict_Check(obj) ||
           tuple_like(obj);
}

/* A namedtuple of `proto`'s type holding `items` (a plain tuple); steals nothing. */
static PyObject *rebuild_tuple(PyObject *proto, PyObject *items)
{
    if (Py_TYPE(proto) == &PyTuple_Type)
        return Py_NewRef(items);
    return PyObject_CallMethodOneArg((PyObject *)Py_TYPE(proto), str_make, items);
}

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
    int t = traversed_object(obj, modules);
    if (t <= 0) {
        if (t == 0)
            remember_leaf(tp);
        return t;
    }
    PyObject *d = instance_dict(obj);
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
            is_object = traversed_object(obj, modules);
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
            PyObject *d = is_object ? instance_dict(obj) : Py_NewRef(obj);
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

static int reaches_device_impl(PyObject *const *args, Py_ssize_t nargs, PyObject *const *kwvalues,
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

static int check_modules(PyObject *modules, const char *fname)
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
static int check_call_args(PyObject *pos, PyObject *kw, const char *fname)
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
    PyObject *modules = nargs > 2 ? args[2] : empty_tuple;
    if (check_call_args(args[0], kw, "reaches_device") < 0 || check_modules(modules, "reaches_device") < 0)
        return NULL;
    PyObject *values = kw == Py_None ? PyList_New(0) : PyDict_Values(kw);
    if (values == NULL)
        return NULL;
    Py_ssize_t npos = PyTuple_GET_SIZE(args[0]), nkw = PyList_GET_SIZE(values);
    int r = reaches_device_impl(npos ? &PyTuple_GET_ITEM(args[0], 0) : NULL, npos,
                                nkw ? &PyList_GET_ITEM(values, 0) : NULL, nkw, modules);
    Py_DECREF(values);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

/* --------------------------------------------------------------------------- host copies */

typedef struct {
    PyObject *device;
    PyObject *host;
    int output;
} array_entry;

typedef struct {
    memo_table memo;
    array_entry *arrays;
    Py_ssize_t n_arrays, cap_arrays;
    PyObject *to_host;
    PyObject *modules;
} traversal;

static PyObject *visit_value(traversal *t, PyObject *obj, int output);

static PyObject *visit_device(traversal *t, PyObject *obj, int output)
{
    memo_entry *e = memo_find(&t->memo, obj);
    if (e != NULL) {
        /* e->array is -1 if obj was met as a traversed object before a callback changed its
         * __class__ to a device array type; its copy is reused as is. */
        if (output && e->array >= 0)
            t->arrays[e->array].output = 1;
        return Py_NewRef(e->value);
    }
    PyObject *host = PyObject_CallOneArg(t->to_host, obj);
    if (host == NULL)
        return NULL;
    if (t->n_arrays == t->cap_arrays) {
        Py_ssize_t cap = t->cap_arrays ? 2 * t->cap_arrays : 16;
        array_entry *grown = PyMem_Realloc(t->arrays, (size_t)cap * sizeof(array_entry));
        if (grown == NULL) {
            Py_DECREF(host);
            PyErr_NoMemory();
            return NULL;
        }
        t->arrays = grown;
        t->cap_arrays = cap;
    }
    e = memo_add(&t->memo, obj);
    if (e == NULL) {
        Py_DECREF(host);
        return NULL;
    }
    e->value = Py_NewRef(host);
    e->array = t->n_arrays;
    t->arrays[t->n_arrays++] = (array_entry){Py_NewRef(obj), Py_NewRef(host), output};
    return host;
}

/* A new instance of obj's class sharing nothing yet; its __dict__ is filled by the caller.
 * Plain classes are built directly, anything with its own copy protocol through copy.copy. */
static PyObject *shallow_instance(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    int plain = tp->tp_new == PyBaseObject_Type.tp_new && tp->tp_basicsize == plain_basicsize &&
                _PyType_Lookup(tp, str_copy_dunder) == NULL;
    /* The copy protocol must be object's own, or copy.copy could do something else. */
    for (int i = 0; plain && i < 3; i++)
        plain = _PyType_Lookup(tp, copy_protocol[i]) == _PyType_Lookup(&PyBaseObject_Type, copy_protocol[i]);
    PyObject *copy;
    if (plain) {
        copy = tp->tp_new(tp, empty_tuple, NULL);
    }
    else {
        copy = PyObject_CallOneArg(copy_copy, obj);
        if (copy != NULL && copy == obj) {
            Py_DECREF(copy);
            PyErr_Format(PyExc_TypeError,
                         "copy.copy() of a %.100s object returned the object itself; it cannot be "
                         "converted without modifying the caller's object", tp->tp_name);
            return NULL;
        }
    }
    return copy;
}

/* target[key] = converted value, for every item of `source`. Keys and values are held
 * while a callback runs; a callback that changes `source` cannot crash the iteration. */
static int fill_dict(traversal *t, PyObject *source, PyObject *target, int output)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(source, &pos, &key, &value)) {
        Py_INCREF(key);
        Py_INCREF(value);
        PyObject *converted = visit_value(t, value, output);
        int rc = converted == NULL ? -1 : PyDict_SetItem(target, key, converted);
        Py_XDECREF(converted);
        Py_DECREF(value);
        Py_DECREF(key);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static PyObject *visit_object(traversal *t, PyObject *obj, int output)
{
    PyObject *source = instance_dict(obj);
    if (source == NULL)
        return NULL;
    PyObject *copy = shallow_instance(obj);
    PyObject *target = copy ? instance_dict(copy) : NULL;
    memo_entry *e = target ? memo_add(&t->memo, obj) : NULL;
    if (e == NULL) {
        Py_XDECREF(target);
        Py_XDECREF(copy);
        Py_DECREF(source);
        return NULL;
    }
    e->value = Py_NewRef(copy);
    int rc = fill_dict(t, source, target, output);
    Py_DECREF(target);
    Py_DECREF(source);
    if (rc < 0) {
        Py_DECREF(copy);
        return NULL;
    }
    return copy;
}

static PyObject *visit_container(traversal *t, PyObject *obj, int output)
{
    PyTypeObject *tp = Py_TYPE(obj);
    memo_entry *e = memo_add(&t->memo, obj);
    if (e == NULL)
        return NULL;
    if (PyDict_Check(obj)) {
        /* A subclass is copied with copy.copy (its type and state: default_factory, ...), then
         * every value replaced. */
        PyObject *copy = tp == &PyDict_Type ? PyDict_New() : PyObject_CallOneArg(copy_copy, obj);
        if (copy == NULL)
            return NULL;
        if (!PyDict_Check(copy)) {
            Py_DECREF(copy);
            return cn_raise(CN_ERR_TYPE, "copy.copy() of a %.100s argument did not return a dict",
                            tp->tp_name);
        }
        e->value = Py_NewRef(copy);
        if (fill_dict(t, obj, copy, output) < 0) {
            Py_DECREF(copy);
            return NULL;
        }
        return copy;
    }
    if (tp == &PyList_Type) {
        PyObject *copy = PyList_New(0);
        if (copy == NULL)
            return NULL;
        e->value = Py_NewRef(copy);
        /* Re-read the size: a callback may have changed the caller's list. */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
            PyObject *item = Py_NewRef(PyList_GET_ITEM(obj, i));
            PyObject *value = visit_value(t, item, output);
            Py_DECREF(item);
            if (value == NULL || PyList_Append(copy, value) < 0) {
                Py_XDECREF(value);
                Py_DECREF(copy);
                return NULL;
            }
            Py_DECREF(value);
        }
        return copy;
    }
    /* Tuple: built after its items; meeting it again before that is a cycle through it. */
    Py_ssize_t n = PyTuple_GET_SIZE(obj);
    PyObject *copy = PyTuple_New(n);
    if (copy == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = visit_value(t, PyTuple_GET_ITEM(obj, i), output);
        if (value == NULL) {
            Py_DECREF(copy);
            return NULL;
        }
        PyTuple_SET_ITEM(copy, i, value);
    }
    Py_SETREF(copy, rebuild_tuple(obj, copy));
    if (copy == NULL)
        return NULL;
    /* The table may have grown while the items were visited: look the entry up again. */
    e = memo_find(&t->memo, obj);
    e->value = Py_NewRef(copy);
    return copy;
}

static PyObject *visit_value(traversal *t, PyObject *obj, int output)
{
    if (cn_is_device(obj))
        return visit_device(t, obj, output);
    int is_object = 0;
    if (!list_tuple_dict(obj)) {
        is_object = traversed_object(obj, t->modules);
        if (is_object < 0)
            return NULL;
        if (!is_object)
            return Py_NewRef(obj);
    }
    memo_entry *e = memo_find(&t->memo, obj);
    if (e != NULL) {
        if (e->value == NULL)
            return cn_raise(CN_ERR_VALUE, "a reference cycle through a tuple cannot be converted "
                            "(use a list in the cycle)");
        return Py_NewRef(e->value);
    }
    if (Py_EnterRecursiveCall(" while converting kernel arguments"))
        return NULL;
    PyObject *r = is_object ? visit_object(t, obj, output) : visit_container(t, obj, output);
    Py_LeaveRecursiveCall();
    return r;
}

static void traversal_free(traversal *t)
{
    for (Py_ssize_t i = 0; i < t->n_arrays; i++) {
        Py_DECREF(t->arrays[i].device);
        Py_DECREF(t->arrays[i].host);
    }
    PyMem_Free(t->arrays);
    memo_free(&t->memo);
}

/* Is argument slot `key` (a positional index or a keyword name) a declared output? */
static int slot_is_output(PyObject *outputs, PyObject *key)
{
    if (outputs == Py_None)
        return 1;
    return PySequence_Contains(outputs, key);
}

PyDoc_STRVAR(host_arguments_doc,
             "host_arguments(args, kwargs, to_host, object_modules=(), outputs=None)\n--\n\n"
             "Host versions of a call's arguments: every device array reachable through lists,\n"
             "tuples, dicts and objects whose class module starts with a prefix in object_modules\n"
             "is replaced by to_host(array), called once per array (aliasing is kept); the\n"
             "containers and objects on the way are copied, the caller's are left alone.\n"
             "outputs: None (every argument) or a tuple of positional indices and keyword names\n"
             "whose arrays must be copied back.\n\n"
             "Returns (host_args, host_kwargs, n_arrays, copy_back) with copy_back a list of\n"
             "(device, host) pairs in discovery order.");

static PyObject *host_arguments(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 5)
        return cn_raise(CN_ERR_TYPE, "host_arguments() takes 3 to 5 arguments (%zd given)", nargs);
    PyObject *pos = args[0], *kw = args[1], *to_host = args[2];
    PyObject *modules = nargs > 3 ? args[3] : empty_tuple;
    PyObject *outputs = nargs > 4 ? args[4] : Py_None;
    if (check_call_args(pos, kw, "host_arguments") < 0 || check_modules(modules, "host_arguments") < 0)
        return NULL;
    if (!PyCallable_Check(to_host))
        return cn_raise(CN_ERR_TYPE, "host_arguments(): 'to_host' must be callable, not %.100s",
                        Py_TYPE(to_host)->tp_name);
    if (outputs != Py_None && !PyTuple_Check(outputs))
        return cn_raise(CN_ERR_TYPE, "host_arguments(): 'outputs' must be a tuple or None, not %.100s",
                        Py_TYPE(outputs)->tp_name);

    Py_ssize_t n = PyTuple_GET_SIZE(pos);
    PyObject *keys = kw == Py_None ? PyList_New(0) : PyDict_Keys(kw);
    PyObject *values = kw == Py_None ? PyList_New(0) : PyDict_Values(kw);
    PyObject *host_pos = PyTuple_New(n);
    PyObject *host_kw = kw == Py_None ? Py_NewRef(Py_None) : PyDict_New();
    char *is_out = NULL;
    traversal t = {.arrays = NULL, .n_arrays = 0, .cap_arrays = 0, .to_host = to_host, .modules = modules};
    memo_init(&t.memo);
    PyObject *result = NULL;
    if (keys == NULL || values == NULL || host_pos == NULL || host_kw == NULL)
        goto done;
    Py_ssize_t nkw = PyList_GET_SIZE(keys);
    is_out = PyMem_Malloc((size_t)(n + nkw + 1));
    if (is_out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n + nkw; i++) {
        PyObject *key = i < n ? PyLong_FromSsize_t(i) : Py_NewRef(PyList_GET_ITEM(keys, i - n));
        if (key == NULL)
            goto done;
        int o = slot_is_output(outputs, key);
        Py_DECREF(key);
        if (o < 0)
            goto done;
        is_out[i] = (char)o;
    }
    /* Declared outputs first: every array they reach is then flagged, whichever path
     * reaches it later. */
    for (int phase = 1; phase >= 0; phase--) {
        for (Py_ssize_t i = 0; i < n + nkw; i++) {
            if (is_out[i] != phase)
                continue;
            PyObject *src = i < n ? PyTuple_GET_ITEM(pos, i) : PyList_GET_ITEM(values, i - n);
            PyObject *v = visit_value(&t, src, phase);
            if (v == NULL)
                goto done;
            if (i < n) {
                PyTuple_SET_ITEM(host_pos, i, v);
            }
            else {
                int rc = PyDict_SetItem(host_kw, PyList_GET_ITEM(keys, i - n), v);
                Py_DECREF(v);
                if (rc < 0)
                    goto done;
            }
        }
    }
    if (kw != Py_None) {
        /* Keep the caller's keyword order. */
        PyObject *ordered = PyDict_New();
        if (ordered == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < nkw; i++) {
            PyObject *k = PyList_GET_ITEM(keys, i);
            /* A key's __hash__/__eq__ may raise (or change) on this second lookup. */
            PyObject *v = PyDict_GetItemWithError(host_kw, k); /* borrowed */
            if (v == NULL && !PyErr_Occurred())
                PyErr_Format(PyExc_KeyError, "keyword argument %R changed its hash during the "
                             "conversion", k);
            if (v == NULL || PyDict_SetItem(ordered, k, v) < 0) {
                Py_DECREF(ordered);
                goto done;
            }
        }
        Py_SETREF(host_kw, ordered);
    }
    PyObject *plan = PyList_New(0);
    if (plan == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < t.n_arrays; i++) {
        if (!t.arrays[i].output)
            continue;
        PyObject *pair = PyTuple_Pack(2, t.arrays[i].device, t.arrays[i].host);
        if (pair == NULL || PyList_Append(plan, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(plan);
            goto done;
        }
        Py_DECREF(pair);
    }
    result = Py_BuildValue("(OOnN)", host_pos, host_kw, t.n_arrays, plan);
done:
    PyMem_Free(is_out);
    traversal_free(&t);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(host_pos);
    Py_XDECREF(host_kw);
    return result;
}

/* --------------------------------------------------------------------------- results */

typedef struct {
    memo_table memo;
    PyObject *to_device;
    PyObject *is_array; /* a type (isinstance) or a predicate */
} result_walk;

static PyObject *result_visit(result_walk *w, PyObject *obj)
{
    int hit;
    if (PyType_Check(w->is_array))
        hit = PyObject_TypeCheck(obj, (PyTypeObject *)w->is_array);
    else {
        PyObject *r = PyObject_CallOneArg(w->is_array, obj);
        if (r == NULL)
            return NULL;
        hit = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (hit < 0)
            return NULL;
    }
    PyTypeObject *tp = Py_TYPE(obj);
    if (!hit && tp != &PyList_Type && !tuple_like(obj))
        return Py_NewRef(obj);
    memo_entry *e = memo_find(&w->memo, obj);
    if (e != NULL) {
        if (e->value == NULL)
            return cn_raise(CN_ERR_VALUE, "a reference cycle through a returned tuple cannot be converted");
        return Py_NewRef(e->value);
    }
    if (hit) {
        PyObject *device = PyObject_CallOneArg(w->to_device, obj);
        if (device == NULL)
            return NULL;
        e = memo_add(&w->memo, obj);
        if (e == NULL) {
            Py_DECREF(device);
            return NULL;
        }
        e->value = Py_NewRef(device);
        return device;
    }
    if (memo_add(&w->memo, obj) == NULL || Py_EnterRecursiveCall(" while converting a kernel result"))
        return NULL;
    PyObject *copy = NULL;
    if (tp == &PyList_Type) {
        copy = PyList_New(0);
        if (copy == NULL)
            goto out;
        memo_find(&w->memo, obj)->value = Py_NewRef(copy);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
            PyObject *item = Py_NewRef(PyList_GET_ITEM(obj, i));
            PyObject *v = result_visit(w, item);
            Py_DECREF(item);
            if (v == NULL || PyList_Append(copy, v) < 0) {
                Py_XDECREF(v);
                Py_CLEAR(copy);
                goto out;
            }
            Py_DECREF(v);
        }
    }
    else {
        Py_ssize_t n = PyTuple_GET_SIZE(obj);
        copy = PyTuple_New(n);
        if (copy == NULL)
            goto out;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = result_visit(w, PyTuple_GET_ITEM(obj, i));
            if (v == NULL) {
                Py_CLEAR(copy);
                goto out;
            }
            PyTuple_SET_ITEM(copy, i, v);
        }
        Py_SETREF(copy, rebuild_tuple(obj, copy));
        if (copy == NULL)
            goto out;
        memo_find(&w->memo, obj)->value = Py_NewRef(copy);
    }
out:
    Py_LeaveRecursiveCall();
    return copy;
}

PyDoc_STRVAR(device_result_doc,
             "device_result(result, to_device, is_array)\n--\n\n"
             "The kernel result with every host array (is_array: a type or a predicate) replaced\n"
             "by to_device(array), also inside returned tuples and lists (not dicts); the same\n"
             "host array returned twice becomes one device array.");

static PyObject *device_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return cn_raise(CN_ERR_TYPE, "device_result() takes 3 arguments (%zd given)", nargs);
    if (!PyCallable_Check(args[1]) || !PyCallable_Check(args[2]))
        return cn_raise(CN_ERR_TYPE, "device_result(): 'to_device' and 'is_array' must be callable");
    result_walk w = {.to_device = args[1], .is_array = args[2]};
    memo_init(&w.memo);
    PyObject *r = result_visit(&w, args[0]);
    memo_free(&w.memo);
    return r;
}

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
        if (_PyType_Lookup(tp, str_cuda_args) != NULL)
            return 1;
    }
    return 0;
}

static int backend_is_cupy(PyObject *state)
{
    PyObject *b;
    if (PyDict_CheckExact(state)) {
        /* The backend state's __dict__: one lookup of an interned key. */
        b = PyDict_GetItemWithError(state, str_backend); /* borrowed */
        if (b == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (b == str_numpy)
            return 0;
        return b == str_cupy || (PyUnicode_Check(b) && PyUnicode_Compare(b, str_cupy) == 0);
    }
    b = PyObject_GetAttr(state, str_backend);
    if (b == NULL)
        return -1;
    int r = b == str_cupy ? 1 : (PyUnicode_Check(b) && PyUnicode_Compare(b, str_cupy) == 0);
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
            convert = reaches_device_impl(args, nargs, args + nargs, nkw, self->modules);
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
    if (check_modules(args[2], "_configure") < 0)
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

static PyMethodDef traverse_methods[] = {
    {"reaches_device", (PyCFunction)(void (*)(void))reaches_device, METH_FASTCALL, reaches_device_doc},
    {"host_arguments", (PyCFunction)(void (*)(void))host_arguments, METH_FASTCALL, host_arguments_doc},
    {"device_result", (PyCFunction)(void (*)(void))device_result, METH_FASTCALL, device_result_doc},
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
    plain_basicsize = ((PyTypeObject *)cls)->tp_basicsize;
    Py_DECREF(cls);
    return 0;
}

CN_INTERNAL int cn_register_traverse(PyObject *module)
{
    str_backend = PyUnicode_InternFromString("backend");
    str_cupy = PyUnicode_InternFromString("cupy");
    str_numpy = PyUnicode_InternFromString("numpy");
    str_module = PyUnicode_InternFromString("__module__");
    str_copy_dunder = PyUnicode_InternFromString("__copy__");
    str_cuda_args = PyUnicode_InternFromString("__cuda_args__");
    str_make = PyUnicode_InternFromString("_make");
    empty_tuple = PyTuple_New(0);
    copy_protocol[0] = PyUnicode_InternFromString("__reduce_ex__");
    copy_protocol[1] = PyUnicode_InternFromString("__reduce__");
    copy_protocol[2] = PyUnicode_InternFromString("__getstate__");
    if (!copy_protocol[0] || !copy_protocol[1] || !copy_protocol[2])
        return -1;
    if (!str_backend || !str_cupy || !str_numpy || !str_module || !str_copy_dunder || !str_cuda_args || !str_make ||
        !empty_tuple)
        return -1;
    PyObject *copy_module = PyImport_ImportModule("copy");
    if (copy_module == NULL)
        return -1;
    copy_copy = PyObject_GetAttrString(copy_module, "copy");
    Py_DECREF(copy_module);
    if (copy_copy == NULL || measure_plain_basicsize() < 0)
        return -1;
    if (PyType_Ready(&HostKernelType) < 0)
        return -1;
    Py_INCREF(&HostKernelType);
    if (PyModule_AddObject(module, "HostKernel", (PyObject *)&HostKernelType) < 0) {
        Py_DECREF(&HostKernelType);
        return -1;
    }
    return PyModule_AddFunctions(module, traverse_methods);
}
