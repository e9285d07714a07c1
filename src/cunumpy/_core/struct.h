/* The struct packer's files (struct_pack.c: packing values; struct_state.c: the re-pack check
 * of CudaStructArguments) share the packer. */
#ifndef CUNUMPY__CORE_STRUCT_H
#define CUNUMPY__CORE_STRUCT_H

#include "common.h"
#include "pack.h"

typedef struct {
    PyObject_HEAD
    PyObject *plan;       /* LaunchPlan laid out as the struct */
    PyObject *name;       /* struct name */
    PyObject *names;      /* tuple of interned field names */
    PyObject *empty;      /* numpy.empty */
    PyObject *empty_args; /* (CN_VALUES_PER_CHUNK, dtype) */
    Py_ssize_t n;
    Py_ssize_t itemsize;
    cn_chunk_t chunk;     /* packed values are its items */
} cn_packer_t;

CN_INTERNAL extern PyTypeObject cn_packer_type;

/* The `host` argument of the packer's methods as 0 or 1: 0, or -1 with an exception. */
static inline int host_flag(PyObject *obj, int *out)
{
    int t = PyObject_IsTrue(obj);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

/* Pack `values` (one object per field, field order) into a new numpy.void; with `host`, NumPy
 * host arrays are accepted for array fields. */
CN_INTERNAL PyObject *cn_pack_values(cn_packer_t *k, PyObject *const *values, int host);

/* struct_state.c: StructPacker.repack and StructPacker.current, and its registration. */
CN_INTERNAL PyObject *cn_packer_repack(cn_packer_t *k, PyObject *const *args, Py_ssize_t nargs);
CN_INTERNAL PyObject *cn_packer_current(cn_packer_t *k, PyObject *obj);
CN_INTERNAL int cn_register_struct_state(PyObject *module);

#endif /* CUNUMPY__CORE_STRUCT_H */
