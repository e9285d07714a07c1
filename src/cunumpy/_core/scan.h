/* Device-array detection (scan.c): the device array type, found through sys.modules. */
#ifndef CUNUMPY__CORE_SCAN_H
#define CUNUMPY__CORE_SCAN_H

#include "common.h"

/* The device array type (cupy.ndarray, real or fake), looked up through sys.modules and
 * cached; never imports CuPy. Borrowed reference or NULL when CuPy is not imported. */
CN_INTERNAL PyTypeObject *cn_device_type(void);

/* 1 if `obj` is a device array, 0 otherwise. Never raises. */
static inline int cn_is_device(PyObject *obj)
{
    PyTypeObject *t = cn_device_type();
    if (t == NULL)
        return 0;
    return Py_IS_TYPE(obj, t) || PyType_IsSubtype(Py_TYPE(obj), t);
}

#endif /* CUNUMPY__CORE_SCAN_H */
