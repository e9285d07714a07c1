/* Shared by every C file of cunumpy._core: Python include, visibility, error and GIL macros. */
#ifndef CUNUMPY__CORE_COMMON_H
#define CUNUMPY__CORE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

/* Symbols shared between the files of _core but not exported from the shared object. */
#if defined(__GNUC__)
#define CN_INTERNAL __attribute__((visibility("hidden")))
#else
#define CN_INTERNAL
#endif

#define CN_LIKELY(x) __builtin_expect(!!(x), 1)
#define CN_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Release the GIL around a pure C loop. Nothing inside may touch a Python object. */
#define CN_BEGIN_NOGIL Py_BEGIN_ALLOW_THREADS
#define CN_END_NOGIL Py_END_ALLOW_THREADS

/* Pure C helpers return a status; the boundary turns it into a Python exception once. */
typedef enum {
    CN_OK = 0,
    CN_ERR_NOMEM = -1,
    CN_ERR_VALUE = -2,
    CN_ERR_TYPE = -3,
    CN_ERR_OVERFLOW = -4,
    CN_ERR_INDEX = -5,
    CN_ERR_PYTHON = -6 /* a Python exception is already set */
} cn_status;

/* Set the Python exception for `status` with a printf-style message; returns NULL. */
CN_INTERNAL PyObject *cn_raise(cn_status status, const char *fmt, ...);

/* Interned strings a file makes at registration: *slot = the interned `text`. */
typedef struct {
    PyObject **slot;
    const char *text;
} cn_string_t;

/* Intern every string of `names` (n of them): 0, or -1 with an exception. */
CN_INTERNAL int cn_intern_strings(const cn_string_t *names, size_t n);

/* Registration of each file's functions into the module (module.c calls them in order). */
CN_INTERNAL int cn_register_scan(PyObject *module);
CN_INTERNAL int cn_register_traverse(PyObject *module);
CN_INTERNAL int cn_register_cudasig(PyObject *module);
CN_INTERNAL int cn_register_pack(PyObject *module);
CN_INTERNAL int cn_register_morton(PyObject *module);
CN_INTERNAL int cn_register_philox(PyObject *module);
CN_INTERNAL int cn_register_bitgen(PyObject *module);
CN_INTERNAL int cn_register_segment(PyObject *module);
CN_INTERNAL int cn_register_sort(PyObject *module);
CN_INTERNAL int cn_register_compact(PyObject *module);
CN_INTERNAL int cn_register_extents(PyObject *module);
CN_INTERNAL int cn_register_mpi_post(PyObject *module);
CN_INTERNAL int cn_register_struct(PyObject *module);
CN_INTERNAL int cn_register_emu(PyObject *module);
CN_INTERNAL int cn_register_thread_pool(PyObject *module);

/* Decide the pool size (CUNUMPY_NUM_THREADS) and report a failed worker start as a warning;
 * call with the GIL before a parallel section. -1 with an exception set on error. */
CN_INTERNAL int cn_pool_prepare(void);

/* Elements per chunk of the element-wise parallel loops (Philox, Morton). Fixed, so results
 * never depend on the thread count; one chunk or less stays on the calling thread. A multiple
 * of 4 so vectorised kernels see the same groups of four. */
#define CN_ELEMENT_CHUNK ((size_t)1 << 14)
#define CN_CHUNKS(n, chunk) (((n) + (chunk) - 1) / (chunk))

#endif /* CUNUMPY__CORE_COMMON_H */
