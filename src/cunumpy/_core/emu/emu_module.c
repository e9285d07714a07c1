/* Python boundary of the CPU emulator runtime: cunumpy._core.emu_launch and friends.
 * The kernel library is loaded by the Python layer (ctypes); it passes the addresses of the
 * library's exported functions, which this file checks for shape only (they are trusted, as
 * ctypes function pointers are). */
#include "../common.h"

#include "emu_analysis.h"
#include "emu_runtime.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define EMU_MAX_SHARED_MEM ((Py_ssize_t)1 << 30)

static PyObject *emu_bad_threads_variable(void)
{
    const char *raw = getenv("CUNUMPY_EMULATION_THREADS");
    PyObject *value = PyUnicode_DecodeFSDefault(raw != NULL ? raw : "");
    if (value == NULL)
        return NULL;
    PyErr_Format(PyExc_ValueError, "CUNUMPY_EMULATION_THREADS must be a positive integer, got %R", value);
    Py_DECREF(value);
    return NULL;
}

/* A function address given as a non-negative int; 0 allowed only when `optional`. */
static int emu_read_address(PyObject *obj, const char *name, int optional, void **out)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "emu_launch(): '%s' must be an int (a function address), not %.100s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "emu_launch(): '%s' must be a function address (a non-negative int)", name);
        return -1;
    }
    if (v == 0 && !optional) {
        PyErr_Format(PyExc_ValueError, "emu_launch(): '%s' must not be 0", name);
        return -1;
    }
    if (v > (unsigned long long)UINTPTR_MAX) {
        PyErr_Format(PyExc_ValueError, "emu_launch(): '%s' is not an address", name);
        return -1;
    }
    *out = (void *)(uintptr_t)v;
    return 0;
}

/* An int keyword (anything with __index__), saturated to the Py_ssize_t range. */
static int emu_read_size(PyObject *obj, const char *name, Py_ssize_t *out)
{
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "emu_launch(): '%s' must be an int, not %.100s", name, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    *out = PyNumber_AsSsize_t(index, NULL);
    Py_DECREF(index);
    return 0;
}

/* A 3-tuple of positive ints (1 or 2 items are padded with 1). */
static int emu_read_dim3(PyObject *obj, const char *name, cunumpy_emu_dim3 *out)
{
    /* A tuple snapshot: an item's __index__ may change a list while it is read. */
    PyObject *tuple = PySequence_Check(obj) && !PyUnicode_Check(obj) ? PySequence_Tuple(obj) : NULL;
    if (tuple == NULL) {
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "emu_launch(): '%s' must be a tuple of 1 to 3 ints, not %.100s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    if (n < 1 || n > 3) {
        Py_DECREF(tuple);
        PyErr_Format(PyExc_ValueError, "emu_launch(): '%s' must have 1 to 3 items, got %zd", name, n);
        return -1;
    }
    unsigned int v[3] = {1, 1, 1};
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        PyObject *index = PyNumber_Index(item);
        if (index == NULL) {
            Py_DECREF(tuple);
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "emu_launch(): '%s' items must be ints, got %.100s", name,
                             Py_TYPE(item)->tp_name);
            }
            return -1;
        }
        int overflow = 0;
        const long long x = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
        if (overflow != 0 || x < 1 || x > (long long)UINT_MAX) {
            Py_DECREF(tuple);
            PyErr_Format(PyExc_ValueError, "emu_launch(): '%s' items must be positive and fit 32 bits", name);
            return -1;
        }
        v[i] = (unsigned int)x;
    }
    Py_DECREF(tuple);
    out->x = v[0];
    out->y = v[1];
    out->z = v[2];
    return 0;
}

/* The launch's memory: a sequence of (lo, hi, base, itemsize, flags, name, what) tuples. */
static int emu_read_regions(PyObject *obj, emu_region **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    if (obj == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(obj, "emu_launch(): 'regions' must be a sequence of tuples");
    if (seq == NULL)
        return -1;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    emu_region *r = calloc(n > 0 ? (size_t)n : 1, sizeof *r);
    if (r == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        unsigned long long lo, hi, base, itemsize;
        int flags;
        const char *name, *what;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "KKKKiss", &lo, &hi, &base, &itemsize, &flags, &name,
                                                      &what)) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError,
                             "emu_launch(): regions[%zd] must be a tuple (lo, hi, base, itemsize, flags, name, what)",
                             i);
            }
            free(r);
            Py_DECREF(seq);
            return -1;
        }
        if (hi < lo || (lo == 0) != (hi == 0) || itemsize == 0) {
            PyErr_Format(PyExc_ValueError, "emu_launch(): regions[%zd] is not a valid range", i);
            free(r);
            Py_DECREF(seq);
            return -1;
        }
        r[i].lo = (uintptr_t)lo;
        r[i].hi = (uintptr_t)hi;
        r[i].base = (uintptr_t)base;
        r[i].itemsize = (size_t)itemsize;
        r[i].flags = flags;
        (void)snprintf(r[i].name, sizeof r[i].name, "%s", name);
        (void)snprintf(r[i].what, sizeof r[i].what, "%s", what);
    }
    Py_DECREF(seq);
    *out = r;
    *count = (size_t)n;
    return 0;
}

static const char *emu_failure_name(emu_failure f)
{
    switch (f) {
    case EMU_FAIL_MEMCHECK:
        return "memcheck";
    case EMU_FAIL_FAULT:
        return "fault";
    case EMU_FAIL_RACECHECK:
        return "racecheck";
    case EMU_FAIL_INITCHECK:
        return "initcheck";
    case EMU_FAIL_TIMEOUT:
        return "timeout";
    case EMU_FAIL_INTERRUPT:
        return "interrupt";
    default:
        return "error";
    }
}

/* analysis=: None, or a sequence of (lo, hi, start) int triples (the arguments' bytes and the
 * first byte of the allocation owning them). */
static int emu_read_analysis(PyObject *obj, emu_analysis **out)
{
    *out = NULL;
    if (obj == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(obj, "emu_launch(): 'analysis' must be None or a sequence of (lo, hi, start)");
    if (seq == NULL)
        return -1;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uintptr_t *triples = malloc((size_t)(n > 0 ? n : 1) * 3 * sizeof *triples);
    if (triples == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        unsigned long long lo, hi, start;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "KKK", &lo, &hi, &start)) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "emu_launch(): 'analysis' entries must be (lo, hi, start) tuples");
            }
            free(triples);
            Py_DECREF(seq);
            return -1;
        }
        triples[3 * i] = (uintptr_t)lo;
        triples[3 * i + 1] = (uintptr_t)hi;
        triples[3 * i + 2] = (uintptr_t)start;
    }
    Py_DECREF(seq);
    *out = emu_analysis_new(triples, (size_t)n);
    free(triples);
    if (*out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The rows of a finished analysis as a list of (pc, class, requests, a, ideal, divergent, same_max,
 * lanes). */
static PyObject *emu_analysis_result(emu_analysis *an)
{
    const emu_analysis_row *rows = NULL;
    const long n = emu_analysis_rows(an, &rows);
    if (n < 0)
        return PyErr_NoMemory();
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (long i = 0; i < n; ++i) {
        const emu_analysis_row *r = &rows[i];
        PyObject *t = Py_BuildValue("(kiKKKKKK)", (unsigned long)r->pc, r->cls, (unsigned long long)r->requests,
                                    (unsigned long long)r->a, (unsigned long long)r->ideal,
                                    (unsigned long long)r->divergent, (unsigned long long)r->same_max,
                                    (unsigned long long)r->lanes);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

PyDoc_STRVAR(emu_launch_doc,
             "emu_launch(bind, thread_fn, block_fn, grid, block, args, *, params=None, shared_mem=0,\n"
             "           fibers=False, checked=False, workers=0, kernel_name='kernel', checks=0,\n"
             "           racecheck=False, initcheck=False, regions=None, dynamic_shared_name='',\n"
             "           library=0, timeout=0.0, interruptible=False, analysis=None)\n--\n\n"
             "Run an emulated CUDA kernel launch (see src/cunumpy/_core/emu/emu_abi.h). bind, thread_fn\n"
             "and block_fn are addresses of a kernel library's cunumpy_emu_bind, cunumpy_emu_thread_<k>\n"
             "and cunumpy_emu_block_<k> (block_fn may be 0 with fibers=True, thread_fn 0 without);\n"
             "grid and block are tuples of up to 3 ints; args exposes the array of parameter pointers\n"
             "through the buffer protocol (or None for no parameters) and is not kept; params, the\n"
             "buffer those pointers point into, is copied (so the kernel never reads Python memory).\n"
             "fibers=True runs every CUDA thread as a fiber (barriers, warp operations). checks is the\n"
             "library's checks mode (emu_abi.h); regions describes the launch's memory as tuples\n"
             "(lo, hi, base, itemsize, flags, name, what); racecheck/initcheck need checks=3.\n"
             "library is the dlopen handle (its TLS block); timeout stops the launch after that many\n"
             "seconds; interruptible=True (the main thread) lets SIGINT stop it. workers=0 uses\n"
             "CUNUMPY_EMULATION_THREADS or the CPU count. The GIL is released while blocks run. A\n"
             "failure raises RuntimeError(message) whose attribute kind is one of 'error', 'memcheck',\n"
             "'fault', 'racecheck', 'initcheck', 'timeout'; an interrupted launch raises what Python's\n"
             "SIGINT handler raises (KeyboardInterrupt). analysis (checks=3): a sequence of (lo, hi, start)\n"
             "triples (an argument's bytes, its allocation's first byte) turns on the performance analysis\n"
             "(emu_analysis.h); the launch then returns a list of (pc, class, requests, a, ideal, divergent,\n"
             "same_max, lanes) rows instead of None.");

static PyObject *emu_launch(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"bind",      "thread_fn",  "block_fn",   "grid",    "block",     "args",
                               "params",    "shared_mem", "fibers",     "checked", "workers",   "kernel_name",
                               "checks",    "racecheck",  "initcheck",  "regions", "dynamic_shared_name",
                               "library",   "timeout",    "interruptible", "analysis", NULL};
    PyObject *bind_obj, *thread_obj, *block_obj, *grid_obj, *blockdim_obj, *args_obj;
    PyObject *params_obj = Py_None, *shared_obj = NULL, *workers_obj = NULL, *name_obj = NULL;
    PyObject *regions_obj = Py_None, *library_obj = NULL, *analysis_obj = Py_None;
    const char *dynamic_name = "";
    Py_ssize_t shared_mem = 0, workers = 0;
    int fibers = 0, checked = 0, checks = 0, racecheck = 0, initcheck = 0, interruptible = 0;
    double timeout = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO|$OOppOOippOsOdpO:emu_launch", keywords, &bind_obj,
                                     &thread_obj, &block_obj, &grid_obj, &blockdim_obj, &args_obj, &params_obj,
                                     &shared_obj, &fibers, &checked, &workers_obj, &name_obj, &checks, &racecheck,
                                     &initcheck, &regions_obj, &dynamic_name, &library_obj, &timeout,
                                     &interruptible, &analysis_obj))
        return NULL;
    if ((shared_obj != NULL && emu_read_size(shared_obj, "shared_mem", &shared_mem) < 0) ||
        (workers_obj != NULL && emu_read_size(workers_obj, "workers", &workers) < 0))
        return NULL;
    if (name_obj != NULL && !PyUnicode_Check(name_obj))
        return cn_raise(CN_ERR_TYPE, "emu_launch(): 'kernel_name' must be a str, not %.100s",
                        Py_TYPE(name_obj)->tp_name);
    if (checks < 0 || checks > 3)
        return cn_raise(CN_ERR_VALUE, "emu_launch(): 'checks' must be from 0 to 3, got %d", checks);
    if (!(timeout >= 0.0) || timeout > 1e9)
        return cn_raise(CN_ERR_VALUE, "emu_launch(): 'timeout' must be a number of seconds >= 0, got %g", timeout);
    emu_launch_params p;
    memset(&p, 0, sizeof p);
    void *bind = NULL, *thread_fn = NULL, *block_fn = NULL, *library = NULL;
    if (emu_read_address(bind_obj, "bind", 0, &bind) < 0 ||
        emu_read_address(thread_obj, "thread_fn", !fibers, &thread_fn) < 0 ||
        emu_read_address(block_obj, "block_fn", fibers, &block_fn) < 0 ||
        (library_obj != NULL && library_obj != Py_None && emu_read_address(library_obj, "library", 1, &library) < 0))
        return NULL;
    if (emu_read_dim3(grid_obj, "grid", &p.grid) < 0 || emu_read_dim3(blockdim_obj, "block", &p.block) < 0)
        return NULL;
    const char *name = "kernel";
    if (name_obj != NULL) {
        name = PyUnicode_AsUTF8(name_obj);
        if (name == NULL) {
            PyErr_Clear();
            return cn_raise(CN_ERR_VALUE, "emu_launch(): 'kernel_name' must be encodable as UTF-8");
        }
    }
    const char *bad_shape = emu_check_shape(p.grid, p.block);
    if (bad_shape != NULL)
        return cn_raise(CN_ERR_VALUE, "emu_launch() of kernel '%s': %s", name, bad_shape);
    if (shared_mem < 0 || shared_mem > EMU_MAX_SHARED_MEM)
        return cn_raise(CN_ERR_VALUE, "emu_launch(): 'shared_mem' must be from 0 to %zd bytes, got %zd",
                        EMU_MAX_SHARED_MEM, shared_mem);
    if (workers < 0)
        return cn_raise(CN_ERR_VALUE, "emu_launch(): 'workers' must be >= 0 (0: the default), got %zd", workers);
    if (workers == 0) {
        /* Read here, with the GIL: os.environ may be changed by another thread. */
        workers = emu_default_workers();
        if (workers < 0)
            return emu_bad_threads_variable();
    }
    if (checks == 1 && !emu_shadow_available())
        return cn_raise(CN_ERR_VALUE, "emu_launch(): checks=1 needs the shadow memory, which this process could "
                                      "not map (see emu_shadow_available())");

    /* The parameter buffer and the pointers into it, copied: the caller's objects are not kept
     * nor read without the GIL, and pointers into the buffer are moved to the copy. */
    void **arg_copy = NULL;
    char *param_copy = NULL;
    Py_ssize_t n_args = 0, param_len = 0;
    uintptr_t param_lo = 0;
    if (params_obj != Py_None) {
        Py_buffer view;
        if (PyObject_GetBuffer(params_obj, &view, PyBUF_SIMPLE) < 0)
            return NULL;
        param_copy = malloc(view.len > 0 ? (size_t)view.len + 16 : 16);
        if (param_copy == NULL) {
            PyBuffer_Release(&view);
            return PyErr_NoMemory();
        }
        /* the copy keeps the source's alignment modulo 16 */
        param_lo = (uintptr_t)view.buf;
        param_len = view.len;
        memcpy(param_copy + (param_lo & 15), view.buf, (size_t)view.len);
        PyBuffer_Release(&view);
    }
    if (args_obj != Py_None) {
        Py_buffer view;
        if (PyObject_GetBuffer(args_obj, &view, PyBUF_SIMPLE) < 0) {
            free(param_copy);
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError,
                             "emu_launch(): 'args' must expose an array of pointers through the buffer protocol "
                             "(e.g. a ctypes array of c_void_p) or be None, not %.100s",
                             Py_TYPE(args_obj)->tp_name);
            }
            return NULL;
        }
        if (view.len % (Py_ssize_t)sizeof(void *) != 0) {
            PyBuffer_Release(&view);
            free(param_copy);
            return cn_raise(CN_ERR_VALUE, "emu_launch(): 'args' must hold whole pointers (%zd bytes given)",
                            view.len);
        }
        arg_copy = malloc(view.len > 0 ? (size_t)view.len : 1);
        if (arg_copy == NULL) {
            PyBuffer_Release(&view);
            free(param_copy);
            return PyErr_NoMemory();
        }
        memcpy(arg_copy, view.buf, (size_t)view.len);
        n_args = view.len / (Py_ssize_t)sizeof(void *);
        PyBuffer_Release(&view);
        if (param_copy != NULL)
            for (Py_ssize_t i = 0; i < n_args; ++i) {
                const uintptr_t a = (uintptr_t)arg_copy[i];
                if (a >= param_lo && a < param_lo + (uintptr_t)param_len)
                    arg_copy[i] = param_copy + (param_lo & 15) + (a - param_lo);
            }
    }
    emu_region *regions = NULL;
    size_t n_regions = 0;
    if (emu_read_regions(regions_obj, &regions, &n_regions) < 0) {
        free(arg_copy);
        free(param_copy);
        return NULL;
    }
    emu_analysis *analysis = NULL;
    if (checks == 3 && emu_read_analysis(analysis_obj, &analysis) < 0) {
        free(arg_copy);
        free(param_copy);
        free(regions);
        return NULL;
    }

    p.bind = (cunumpy_emu_bind_fn)bind;
    p.thread_fn = (cunumpy_emu_thread_fn)thread_fn;
    p.block_fn = (cunumpy_emu_block_fn)block_fn;
    p.args = (void *const *)arg_copy;
    p.shared_mem = (size_t)shared_mem;
    p.fibers = fibers;
    p.checked = checked;
    p.workers = (int)(workers > EMU_MAX_WORKERS ? EMU_MAX_WORKERS : workers);
    p.kernel_name = name;
    p.checks = checks;
    p.racecheck = racecheck;
    p.initcheck = initcheck;
    p.regions = regions;
    p.n_regions = n_regions;
    p.dynamic_shared_name = dynamic_name;
    p.library = library;
    p.timeout = timeout;
    p.interruptible = interruptible;
    p.analysis = analysis;
    char error[8192];
    emu_failure failure = EMU_FAIL_NONE;
    int status;
    CN_BEGIN_NOGIL
    status = emu_launch_run(&p, error, sizeof error, &failure);
    CN_END_NOGIL
    free(arg_copy);
    free(param_copy);
    free(regions);
    if (status != 0) {
        emu_analysis_free(analysis);
        if (failure == EMU_FAIL_INTERRUPT && PyErr_CheckSignals() < 0)
            return NULL; /* Python's SIGINT handler raised (KeyboardInterrupt) */
        /* RuntimeError(message) with the reason as its `kind` attribute. */
        PyObject *exc = PyObject_CallFunction(PyExc_RuntimeError, "s", error);
        if (exc == NULL)
            return NULL;
        PyObject *kind = PyUnicode_FromString(emu_failure_name(failure));
        if (kind == NULL || PyObject_SetAttrString(exc, "kind", kind) < 0) {
            Py_XDECREF(kind);
            Py_DECREF(exc);
            return NULL;
        }
        Py_DECREF(kind);
        PyErr_SetObject(PyExc_RuntimeError, exc);
        Py_DECREF(exc);
        return NULL;
    }
    if (analysis != NULL) {
        PyObject *result = emu_analysis_result(analysis);
        emu_analysis_free(analysis);
        return result;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(emu_shadow_available_doc,
             "emu_shadow_available()\n--\n\n"
             "Whether this process has the shadow memory of checks mode 1 (mapped on first call at\n"
             "CUNUMPY_EMU_SHADOW_OFFSET; False where the address space has no room for it, or with\n"
             "CUNUMPY_EMULATION_SHADOW=0).");

static PyObject *emu_shadow_available_py(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(emu_shadow_available());
}

PyDoc_STRVAR(emu_switch_benchmark_doc,
             "emu_switch_benchmark(n=1000000)\n--\n\n"
             "(fiber_ns, ucontext_ns): the cost of one context switch of the emulator's fibers and of one\n"
             "ucontext swapcontext, measured in this call by ping-ponging between two contexts: 7 rounds\n"
             "alternating n round trips of the fiber switch and n/50 (at least 200) of swapcontext, in\n"
             "thread CPU time, the best round of each (ucontext_ns is 0.0 in sanitizer builds).");

static PyObject *emu_switch_benchmark_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs > 1)
        return cn_raise(CN_ERR_TYPE, "emu_switch_benchmark() takes at most 1 argument (%zd given)", nargs);
    Py_ssize_t n = 1000000;
    if (nargs == 1) {
        n = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
        if (n == -1 && PyErr_Occurred())
            return NULL;
        if (n < 1 || n > ((Py_ssize_t)1 << 34))
            return cn_raise(CN_ERR_VALUE, "emu_switch_benchmark(): 'n' must be from 1 to 2**34, got %zd", n);
    }
    double fiber_ns = 0.0, ucontext_ns = 0.0;
    int status;
    CN_BEGIN_NOGIL
    status = emu_switch_benchmark((long)n, &fiber_ns, &ucontext_ns);
    CN_END_NOGIL
    if (status != 0)
        return PyErr_NoMemory();
    return Py_BuildValue("(dd)", fiber_ns, ucontext_ns);
}

PyDoc_STRVAR(emu_workers_doc, "emu_workers()\n--\n\n"
                              "The worker count of a launch with workers=0: CUNUMPY_EMULATION_THREADS, else the\n"
                              "CPUs this process may run on (ValueError when the variable is not a positive int).");

static PyObject *emu_workers(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    const int n = emu_default_workers();
    if (n < 0)
        return emu_bad_threads_variable();
    return PyLong_FromLong(n);
}

static PyMethodDef emu_methods[] = {
    {"emu_launch", (PyCFunction)(void (*)(void))emu_launch, METH_VARARGS | METH_KEYWORDS, emu_launch_doc},
    {"emu_switch_benchmark", (PyCFunction)(void (*)(void))emu_switch_benchmark_py, METH_FASTCALL,
     emu_switch_benchmark_doc},
    {"emu_workers", emu_workers, METH_NOARGS, emu_workers_doc},
    {"emu_shadow_available", emu_shadow_available_py, METH_NOARGS, emu_shadow_available_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_emu(PyObject *module)
{
    if (PyModule_AddFunctions(module, emu_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "EMU_ABI_VERSION", CUNUMPY_EMU_ABI_VERSION) < 0 ||
        PyModule_AddObject(module, "EMU_SHADOW_OFFSET", PyLong_FromUnsignedLongLong(CUNUMPY_EMU_SHADOW_OFFSET)) < 0)
        return -1;
#if EMU_ASM_SWITCH && defined(__x86_64__)
    const char *kind = "x86-64 assembly";
#elif EMU_ASM_SWITCH && defined(__aarch64__)
    const char *kind = "aarch64 assembly";
#else
    const char *kind = "ucontext";
#endif
    return PyModule_AddStringConstant(module, "EMU_CONTEXT_SWITCH", kind);
}
