/* Module init of cunumpy._core: shared helpers and the registration of every file's functions. */
#include "common.h"

#include <stdarg.h>

CN_INTERNAL PyObject *cn_raise(cn_status status, const char *fmt, ...)
{
    PyObject *type;
    switch (status) {
    case CN_ERR_NOMEM:
        return PyErr_NoMemory();
    case CN_ERR_TYPE:
        type = PyExc_TypeError;
        break;
    case CN_ERR_OVERFLOW:
        type = PyExc_OverflowError;
        break;
    case CN_ERR_INDEX:
        type = PyExc_IndexError;
        break;
    case CN_ERR_PYTHON:
        return NULL;
    default:
        type = PyExc_ValueError;
        break;
    }
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg != NULL) {
        PyErr_SetObject(type, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

CN_INTERNAL int cn_intern_strings(const cn_string_t *names, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        *names[k].slot = PyUnicode_InternFromString(names[k].text);
        if (*names[k].slot == NULL)
            return -1;
    }
    return 0;
}

static int cn_exec(PyObject *module)
{
    typedef int (*register_fn)(PyObject *);
    static const register_fn parts[] = {
        cn_register_scan,    cn_register_traverse, cn_register_cudasig,
        cn_register_pack,    cn_register_morton,   cn_register_philox,
        cn_register_segment, cn_register_sort,     cn_register_compact,
        cn_register_extents, cn_register_struct,  cn_register_bitgen,
        cn_register_emu,     cn_register_mpi_post,
        cn_register_thread_pool,
    };
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        if (parts[i](module) < 0)
            return -1;
    }
    return 0;
}

static struct PyModuleDef cn_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cunumpy._core",
    .m_doc = "C core of cunumpy: argument traversal, CUDA signatures, launch packing and host algorithms.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *module = PyModule_Create(&cn_module);
    if (module == NULL)
        return NULL;
    if (cn_exec(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
