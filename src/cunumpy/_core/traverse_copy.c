/* PyccelKernel's conversion path: host copies of the device arrays reachable from the
 * arguments (one per array, also across containers), the copy-back plan of the outputs, and
 * the conversion of returned host arrays back to the device (see traverse.h). */
#include "traverse.h"

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
    int plain = tp->tp_new == PyBaseObject_Type.tp_new && tp->tp_basicsize == cn_trv.plain_basicsize &&
                _PyType_Lookup(tp, cn_trv.copy_dunder) == NULL;
    /* The copy protocol must be object's own, or copy.copy could do something else. */
    for (int i = 0; plain && i < 3; i++)
        plain = _PyType_Lookup(tp, cn_trv.copy_protocol[i]) == _PyType_Lookup(&PyBaseObject_Type, cn_trv.copy_protocol[i]);
    PyObject *copy;
    if (plain) {
        copy = tp->tp_new(tp, cn_trv.empty_tuple, NULL);
    }
    else {
        copy = PyObject_CallOneArg(cn_trv.copy_copy, obj);
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
    PyObject *source = cn_instance_dict(obj);
    if (source == NULL)
        return NULL;
    PyObject *copy = shallow_instance(obj);
    PyObject *target = copy ? cn_instance_dict(copy) : NULL;
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
        PyObject *copy = tp == &PyDict_Type ? PyDict_New() : PyObject_CallOneArg(cn_trv.copy_copy, obj);
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
    Py_SETREF(copy, cn_rebuild_tuple(obj, copy));
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
        is_object = cn_traversed_object(obj, t->modules);
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
    PyObject *modules = nargs > 3 ? args[3] : cn_trv.empty_tuple;
    PyObject *outputs = nargs > 4 ? args[4] : Py_None;
    if (cn_check_call_args(pos, kw, "host_arguments") < 0 || cn_check_modules(modules, "host_arguments") < 0)
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
        Py_SETREF(copy, cn_rebuild_tuple(obj, copy));
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


static PyMethodDef copy_methods[] = {
    {"host_arguments", (PyCFunction)(void (*)(void))host_arguments, METH_FASTCALL, host_arguments_doc},
    {"device_result", (PyCFunction)(void (*)(void))device_result, METH_FASTCALL, device_result_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_traverse_copy(PyObject *module) { return PyModule_AddFunctions(module, copy_methods); }
