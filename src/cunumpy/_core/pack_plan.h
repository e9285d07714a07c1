/* The launch packer's own types and functions, shared by its files:
 *
 *   pack_kinds.c    the checker table: per kind of parameter, what its spec holds, what an
 *                   argument must be and which function packs it; the messages of a slot
 *   pack_arrays.c   device arrays: reading them and packing pointers and views
 *   pack_scalars.c  scalars and struct values
 *   pack_plan.c     the LaunchPlan: built from the specs, flattening __cuda_args__, pack(),
 *                   prepare(), its configuration for the C path; plans laid out as a struct
 *   pack_launch.c   the C path of CudaKernel calls (__call__, prepare_args) and the driver
 *
 * A LaunchPlan is built once per kernel from its parsed signature (one spec per parameter);
 * `plan.pack(*args)` then expands __cuda_args__ objects, checks every argument against its
 * parameter and writes the launch buffer: a table of one pointer per parameter followed by
 * the parameter values, exactly what cuLaunchKernel takes as `kernelParams`. `launch` hands
 * that buffer to the CUDA driver found in the process (loaded by CuPy); nothing here loads
 * a CUDA library by itself. The rest of the core sees pack.h only. */
#ifndef CUNUMPY__CORE_PACK_PLAN_H
#define CUNUMPY__CORE_PACK_PLAN_H

#include "common.h"
#include "pack.h"

#include <string.h>

enum { S_BOOL = 0, S_INT = 1, S_UINT = 2, S_FLOAT = 3, S_COMPLEX = 4 };
/* Actions for NumPy scalar types (values of the per-parameter table built in Python). */
enum { A_INDEX = 0, A_TRUTH = 1, A_FLOAT = 2, A_COMPLEX = 3 };
/* Launch-size rules of n_threads_from that the C path applies itself. */
enum { INFER_PYTHON = -1, INFER_AUTO = 0, INFER_FIRST_ARRAY = 1, INFER_LAST_AXIS = 2 };

#define MAX_NDIM 16
#define MAX_FLATTEN_DEPTH 8
#define CACHE_BYTES ((Py_ssize_t)8 * (1 + 2 * MAX_NDIM))

typedef struct {
    int kind;            /* CN_K_*: its row of the checker table */
    unsigned flags;      /* CN_KIND_* of that row */
    int scalar;          /* S_* for CN_K_SCALAR */
    Py_ssize_t itemsize; /* element size (pointers, views), value size (scalars, structs) */
    int ndim;            /* views */
    Py_ssize_t size;     /* bytes in the launch buffer */
    Py_ssize_t offset;   /* offset of the value in the launch buffer */
    PyObject *dtype;     /* numpy dtype (element, scalar or struct); NULL for void* */
    PyObject *typestr;   /* dtype.str, for __cuda_array_interface__ objects */
    PyObject *table;     /* dict: NumPy scalar type -> action (scalars) */
    PyObject *label;     /* "parameter 2 'double* x'" for messages */
    /* cache of the last device array accepted in this slot */
    PyObject *seen;      /* weak reference or NULL */
    PyObject *seen_shape;/* views: the shape the cached value was made from */
    long long seen_dev;  /* device id of the cached array (-1: unknown) */
    /* Bumped on every change of the cache: a reader that ran Python code (a .shape read, a
     * comparison, a GC pass) between its check and its copy re-checks it, because another
     * thread may have replaced the entry meanwhile (one kernel launched from many threads). */
    unsigned long long generation;
    unsigned char cached[CACHE_BYTES];
} slot_t;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    Py_ssize_t table_bytes; /* n * sizeof(void*) */
    Py_ssize_t total;       /* table + values */
    PyObject *name;         /* kernel name for messages */
    PyObject *void_type;    /* numpy.void */
    PyObject *generic_type; /* numpy.generic */
    slot_t *slots;
    /* The C path of CudaKernel calls. configure_launch: the kernel's block and inference rule;
     * configure_device: the limits of device `fast_dev` (the one the general path validated a
     * launch on) and how to ask for the current device. */
    int blk_nd;
    long long blk[3];
    int infer;             /* INFER_*: the rule of n_threads_from ("auto", ...), or Python's */
    int fast_ok;           /* configure_device was called */
    long long fast_dev;    /* device id the limits are of */
    long long lim_block[3], lim_grid[3], lim_threads, lim_shared;
    PyObject *fast_getter; /* callable returning the current device id */
    /* prepare(): values made from the packed bytes (configure_prepare). Per slot: None (the
     * argument itself), or the dtype of its value, made as items of a chunk array. */
    PyObject *empty;       /* numpy.empty, NULL until configured */
    PyObject *value_dtypes;
    PyObject *prep_cupy;   /* the CuPy module (or None) when prep_getter was set */
    PyObject *prep_getter; /* its current-device getter, or None */
    cn_chunk_t *chunks;    /* one per parameter, NULL until configured */
    int is_struct;         /* the fields of a struct (cn_struct_plan_new): messages name the field */
} plan_t;

typedef struct {
    PyObject **items;  /* borrowed (kept alive by args or by `keep`) */
    Py_ssize_t n, cap; /* cap = number of parameters: more are counted, not stored */
    PyObject *keep;    /* list of __cuda_args__ results */
    PyObject *first;   /* first device array with ndim >= 1 (borrowed) */
    PyObject *first_shape; /* its shape (owned) */
    int composite_first; /* a packed struct value (whose arrays are hidden) came before it */
    int struct_seen;
    PyTypeObject *void_type;
    long long cur_dev;   /* the current device, or -1: no device check */
    PyTypeObject *generic_type; /* numpy.generic */
    /* The first array's shape as numbers when it was read without Python (an array of the
     * fake CuPy: first_shape stays NULL); else parsed from first_shape when needed. */
    int first_nd;
    int first_dims_ok;
    long long first_dims[MAX_NDIM];
} flat_t;

/* What cn_pack_call gives: the packed buffer, what the launch-size inference needs, and (when
 * asked for) the flattened arguments. */
typedef struct {
    PyObject *packed;      /* bytes */
    PyObject *items;       /* tuple of the flattened arguments (want_items), else NULL */
    int has_first;         /* a first array with at least one dimension was found */
    int struct_first;      /* a packed struct value (hiding its arrays) came before it */
    int dims_ok;           /* dims/nd hold its shape as numbers */
    int nd;
    long long dims[MAX_NDIM];
    PyObject *shape;       /* its shape as a tuple when it was read as one, else NULL */
} pack_result_t;

/* Interned attribute and keyword names (pack_plan.c makes them). */
struct cn_pack_strings {
    PyObject *dtype, *shape, *strides, *data, *ptr, *cai, *cuda_args, *typestr;
    PyObject *device_id, *device, *mask, *flags, *c_contiguous, *id;
    PyObject *prepare_slow, *cupy;
    PyObject *plan, *call_slow, *launch_fast, *n_threads, *grid, *block, *shared_mem, *stream;
    PyObject *cuda_kernel_module, *not_device_advice;
};
CN_INTERNAL extern struct cn_pack_strings cn_str;

/* ---------------------------------------------------------------- the checker table */

/* Check argument `obj` against slot i of `p` and write its value at `out`: 0, or -1 with an
 * exception naming the kernel (or struct) and the parameter (or field). `f` holds what the
 * flattening of the call found (the current device, the first array); `host` accepts NumPy
 * host arrays for array slots (struct packing for the CPU emulation). */
typedef int (*cn_pack_fn)(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f, int host);

typedef struct {
    cn_pack_fn pack;
    const unsigned char *code_sizes; /* scalars: per S_* code, the item sizes allowed (bit n: 2**n bytes) */
    Py_ssize_t max_size;             /* largest value in bytes (0: no limit beyond the kind's) */
    unsigned flags;                  /* CN_KIND_* */
    int n_codes;                     /* scalars: the S_* codes a spec may give (0: none) */
} cn_kind_t;

CN_INTERNAL extern const cn_kind_t cn_kinds[CN_K_COUNT];

/* Bytes of a value of a kind with `flags`: an address or the item, then the shape and the
 * strides of a view. */
static inline Py_ssize_t cn_value_size(unsigned flags, Py_ssize_t itemsize, Py_ssize_t ndim)
{
    Py_ssize_t size = (flags & CN_KIND_ARRAY) ? 8 : itemsize;
    if (flags & CN_KIND_SHAPE)
        size += 8 * ndim;
    if (flags & CN_KIND_STRIDES)
        size += 8 * ndim;
    return size;
}

/* The first field of a launch_plan spec that is invalid ("kind", "label", ...), or NULL. */
CN_INTERNAL const char *cn_spec_error(Py_ssize_t kind, PyObject *label, PyObject *dtype, PyObject *typestr,
                                      PyObject *table, Py_ssize_t itemsize, Py_ssize_t ndim, Py_ssize_t scalar,
                                      Py_ssize_t size, Py_ssize_t align);

/* The error of argument i of a call of `p`: "kernel 'k': argument i (label): detail", or for
 * a struct "struct 's': label: detail". Returns NULL. */
CN_INTERNAL PyObject *cn_arg_error(PyObject *exc, const plan_t *p, Py_ssize_t i, const char *fmt, ...);

CN_INTERNAL int cn_dtype_equal(PyObject *a, PyObject *b);

/* The rows' packing functions (pack_arrays.c, pack_scalars.c). */
CN_INTERNAL int cn_pack_array(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f, int host);
CN_INTERNAL int cn_pack_scalar(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f,
                               int host);
CN_INTERNAL int cn_pack_struct(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f,
                               int host);

/* ---------------------------------------------------------------- shared by the files */

/* pack_arrays.c */
CN_INTERNAL int cn_has_data_ptr(PyObject *obj);
CN_INTERNAL void cn_slot_forget(slot_t *s);
CN_INTERNAL int cn_register_pack_arrays(PyObject *module);

/* pack_plan.c */
CN_INTERNAL extern PyTypeObject cn_plan_type;
CN_INTERNAL int cn_pack_call(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur_dev,
                             pack_result_t *res, int want_items);
CN_INTERNAL void cn_result_clear(pack_result_t *r);
CN_INTERNAL PyObject *cn_prepare_values(plan_t *p, PyObject *const *args, Py_ssize_t nargs, long long cur);
CN_INTERNAL int cn_read_dims(PyObject *obj, long long *out, int positive);

/* pack_launch.c */
CN_INTERNAL int cn_register_pack_launch(PyObject *module);

#endif /* CUNUMPY__CORE_PACK_PLAN_H */
