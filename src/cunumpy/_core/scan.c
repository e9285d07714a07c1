/* Device-array detection: the device array type, cached, found through sys.modules. */
#include "scan.h"

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
