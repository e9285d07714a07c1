/* Device-array detection: the cached device type and the per-call "any device argument" scan. */
#include "common.h"

static PyObject *cached_type = NULL; /* strong reference to cupy.ndarray once seen */
static PyObject *cupy_name = NULL;   /* interned "cupy" */

CN_INTERNAL PyTypeObject *cn_device_type(void)
{
    if (CN_LIKELY(cached_type != NULL))
        return (PyTypeObject *)cached_type;
    PyObject *modules = PyImport_GetModuleDict();
    if (modules == NULL || cupy_name == NULL)
        return NULL;
    PyObject *cupy = PyDict_GetItemWithError(modules, cupy_name); /* borrowed */
    if (cupy == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *type = PyObject_GetAttrString(cupy, "ndarray");
    if (type == NULL) {
        /* A partially imported module: look again next time. */
        PyErr_Clear();
        return NULL;
    }
    if (!PyType_Check(type)) {
        Py_DECREF(type);
        return NULL;
    }
    cached_type = type;
    return (PyTypeObject *)cached_type;
}

/* 1 if obj, or (depth > 0) an item of a list/tuple obj, is a device array. */
static int contains_device(PyObject *obj, int depth)
{
    if (cn_is_device(obj))
        return 1;
    if (depth <= 0)
        return 0;
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        /* A list may be mutated by nothing here (no Python code runs), so indexing is safe. */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (contains_device(items[i], depth - 1))
                return 1;
        }
    }
    return 0;
}

PyDoc_STRVAR(any_device_doc,
             "any_device(args, kwargs=None, depth=1)\n--\n\n"
             "True if a positional or keyword argument is a device array, looking `depth`\n"
             "levels into tuples and lists. Never imports CuPy.");

static PyObject *any_device(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3)
        return cn_raise(CN_ERR_TYPE, "any_device() takes 1 to 3 arguments (%zd given)", nargs);
    PyObject *pos = args[0];
    if (!PyTuple_Check(pos) && !PyList_Check(pos))
        return cn_raise(CN_ERR_TYPE, "any_device(): 'args' must be a tuple or list, not %.100s",
                        Py_TYPE(pos)->tp_name);
    PyObject *kw = nargs > 1 ? args[1] : Py_None;
    if (kw != Py_None && !PyDict_Check(kw))
        return cn_raise(CN_ERR_TYPE, "any_device(): 'kwargs' must be a dict or None, not %.100s",
                        Py_TYPE(kw)->tp_name);
    long depth = 1;
    if (nargs > 2) {
        depth = PyLong_AsLong(args[2]);
        if (depth == -1 && PyErr_Occurred())
            return NULL;
        if (depth < 0 || depth > 64)
            return cn_raise(CN_ERR_VALUE, "any_device(): 'depth' must be in [0, 64], got %ld", depth);
    }
    if (cn_device_type() == NULL)
        Py_RETURN_FALSE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pos);
    PyObject **items = PySequence_Fast_ITEMS(pos);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (contains_device(items[i], (int)depth))
            Py_RETURN_TRUE;
    }
    if (kw != Py_None) {
        Py_ssize_t pos_i = 0;
        PyObject *key, *value;
        while (PyDict_Next(kw, &pos_i, &key, &value)) {
            if (contains_device(value, (int)depth))
                Py_RETURN_TRUE;
        }
    }
    Py_RETURN_FALSE;
}

PyDoc_STRVAR(device_type_doc,
             "device_type()\n--\n\nThe cached device array type, or None while CuPy is not imported.");

static PyObject *device_type(PyObject *self, PyObject *unused)
{
    PyTypeObject *t = cn_device_type();
    if (t == NULL)
        Py_RETURN_NONE;
    return Py_NewRef((PyObject *)t);
}

static PyMethodDef scan_methods[] = {
    {"any_device", (PyCFunction)(void (*)(void))any_device, METH_FASTCALL, any_device_doc},
    {"device_type", device_type, METH_NOARGS, device_type_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_scan(PyObject *module)
{
    cupy_name = PyUnicode_InternFromString("cupy");
    if (cupy_name == NULL)
        return -1;
    return PyModule_AddFunctions(module, scan_methods);
}
