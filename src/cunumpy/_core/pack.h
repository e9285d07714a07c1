/* The launch packer's per-parameter checks, shared with struct.c: a LaunchPlan whose slots
 * sit at the offsets of a C struct (no pointer table) packs struct fields with exactly the
 * checks and casts of kernel parameters. Messages then name the struct and the field. */
#ifndef CUNUMPY__CORE_PACK_H
#define CUNUMPY__CORE_PACK_H

#include "common.h"

/* Slot kinds of a plan (the `kind` of a spec). */
enum { CN_K_POINTER = 0, CN_K_VOID_POINTER = 1, CN_K_VIEW = 2, CN_K_CVIEW = 3, CN_K_SCALAR = 4, CN_K_STRUCT = 5 };

/* A LaunchPlan for the fields of struct `name` (specs as for launch_plan), its values at
 * `offsets` (a tuple of ints, one per spec) in a buffer of `itemsize` bytes. New reference
 * or NULL with an exception (ValueError for offsets that overlap or leave the buffer). */
CN_INTERNAL PyObject *cn_struct_plan_new(PyObject *name, PyObject *specs, PyObject *offsets, Py_ssize_t itemsize,
                                         PyObject *void_type, PyObject *generic_type);

/* Number of slots, and the kind of slot i, of a plan made by cn_struct_plan_new. */
CN_INTERNAL Py_ssize_t cn_plan_size(PyObject *plan);
CN_INTERNAL int cn_plan_kind(PyObject *plan, Py_ssize_t i);

/* Check `obj` against slot i and write its value at the slot's offset in `buf` (the whole
 * struct). 0, or -1 with an exception naming the struct and the field. */
CN_INTERNAL int cn_plan_pack_one(PyObject *plan, Py_ssize_t i, PyObject *obj, unsigned char *buf);

#endif /* CUNUMPY__CORE_PACK_H */
