/* PyccelKernel's hot path, shared by its files:
 *
 *   traverse_scan.c    the per-call conversion decision: does a device array reach the call
 *   traverse_copy.c    host copies of the device arrays of the arguments (one per array, also
 *                      across containers) with the copy-back plan, and device results
 *   traverse_kernel.c  HostKernel, the C base of PyccelKernel, and the registration
 *
 * The copies themselves are Python callables passed in, so transfer accounting stays in one
 * place. Twin: _reference/traverse.py. */
#ifndef CUNUMPY__CORE_TRAVERSE_H
#define CUNUMPY__CORE_TRAVERSE_H

#include "common.h"
#include "scan.h"

#include <string.h>

/* Interned names and objects the traversals use (traverse_kernel.c makes them). */
struct cn_traverse_strings {
    PyObject *backend, *cupy, *numpy; /* "backend", "cupy", "numpy" */
    PyObject *module;                 /* "__module__" */
    PyObject *copy_dunder;            /* "__copy__" */
    PyObject *cuda_args;              /* "__cuda_args__" */
    PyObject *make;                   /* "_make" */
    PyObject *empty_tuple;
    PyObject *copy_copy;              /* copy.copy */
    PyObject *copy_protocol[3];       /* "__reduce_ex__", "__reduce__", "__getstate__" */
    Py_ssize_t plain_basicsize;       /* tp_basicsize of an instance of `class C: pass` */
};
CN_INTERNAL extern struct cn_traverse_strings cn_trv;

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

static inline void memo_init(memo_table *m)
{
    memset(m->inline_slots, 0, sizeof(m->inline_slots));
    m->slots = m->inline_slots;
    m->mask = 31;
    m->used = 0;
}

static inline void memo_free(memo_table *m)
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

static inline memo_entry *memo_find(memo_table *m, PyObject *key)
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

static inline int memo_grow(memo_table *m)
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
static inline memo_entry *memo_add(memo_table *m, PyObject *key)
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

/* --------------------------------------------------------------------------- containers

 * Containers the traversals look into: exact lists, tuples and dicts, and the subclasses users
 * pass as records, rebuilt with their own type: namedtuples (tuple subclasses with _make) and
 * dict subclasses (OrderedDict, defaultdict, ...). Exact types cost one compare. */

CN_INTERNAL int cn_is_namedtuple_type(PyTypeObject *tp);
static inline int tuple_like(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return tp == &PyTuple_Type || (PyTuple_Check(obj) && cn_is_namedtuple_type(tp));
}

static inline int list_tuple_dict(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return tp == &PyList_Type || tp == &PyTuple_Type || tp == &PyDict_Type || PyDict_Check(obj) ||
           tuple_like(obj);
}


/* A namedtuple of `proto`'s type holding `items` (a plain tuple); steals nothing. */
CN_INTERNAL PyObject *cn_rebuild_tuple(PyObject *proto, PyObject *items);

/* 1 if the class of `obj` is in one of the `modules` prefixes and its instances carry a
 * __dict__ (the only attributes traversed), 0 if not, -1 on error. */
CN_INTERNAL int cn_traversed_object(PyObject *obj, PyObject *modules);

/* The instance dict of a traversed object (new reference) or NULL with an error set. */
CN_INTERNAL PyObject *cn_instance_dict(PyObject *obj);

/* --------------------------------------------------------------------------- the files */

/* traverse_scan.c: 1 if a device array is reachable from the arguments, 0 if not, -1 on
 * error; the checks of the Python entry points' arguments; its Python functions. */
CN_INTERNAL int cn_reaches_device(PyObject *const *args, Py_ssize_t nargs, PyObject *const *kwvalues,
                                  Py_ssize_t nkw, PyObject *modules);
CN_INTERNAL int cn_check_modules(PyObject *modules, const char *fname);
CN_INTERNAL int cn_check_call_args(PyObject *pos, PyObject *kw, const char *fname);
CN_INTERNAL int cn_register_traverse_scan(PyObject *module);

/* traverse_copy.c */
CN_INTERNAL int cn_register_traverse_copy(PyObject *module);

#endif /* CUNUMPY__CORE_TRAVERSE_H */
