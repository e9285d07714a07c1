/* The C path of CudaKernel calls: __call__ and prepare_args of the class in C (kernel_call,
 * kernel_prepare) for the launch forms a plan was configured for, and cuLaunchKernel of the
 * driver already loaded in the process. */
#include "pack_plan.h"

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define CN_HAVE_DLFCN 1
#endif

/* ---------------------------------------------------------------- CudaKernel.__call__ */

/* kernel(*args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None).
 *
 * Every launch form is decided here once the general path (kernel._call_slow) has validated a
 * launch on the current device and left its limits in the plan (configure_device): check and
 * pack the arguments, take or infer the size, compute grid and block, check the stream's device
 * and the device limits; a zero-size launch returns at once, any other goes to
 * kernel._launch_fast(packed, grid, block, shared_mem, stream, args). Whatever is unusual (a
 * size of another type, a callable n_threads_from, a limit exceeded, a size that is wrong)
 * goes to kernel._call_slow(*args, **kwargs), which starts over and gives the error: the
 * messages and their order are those of the general path. Packing errors and the stream's
 * device are reported here, with the general path's messages, once the sizes were read. */
/* self.<name>(*args, **kwargs) for a vectorcall's arguments (the Python paths of the kernel). */
static PyObject *call_python_path(PyObject *name, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[40];
    PyObject **stack = small;
    if (nargs + nkw + 1 > 40) {
        stack = (PyObject **)PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof(PyObject *));
        if (stack == NULL)
            return PyErr_NoMemory();
    }
    stack[0] = self;
    for (Py_ssize_t k = 0; k < nargs + nkw; k++)
        stack[1 + k] = args[k];
    PyObject *r = PyObject_VectorcallMethod(name, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

static PyObject *slow_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return call_python_path(cn_str.call_slow, self, args, nargs, kwnames);
}

static int kw_is(PyObject *name, PyObject *interned)
{
    return name == interned || (PyUnicode_Check(name) && PyUnicode_Compare(name, interned) == 0);
}

/* An explicit stream must belong to the current device `cur` (CuPy streams carry
 * `device_id`; a negative id, as on the null stream, means "the current device"). */
static int check_stream(const plan_t *p, PyObject *stream, long long cur)
{
    PyObject *dev = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(stream, cn_str.device_id, &dev) < 0)
        return -1;
#else
    if (_PyObject_LookupAttr(stream, cn_str.device_id, &dev) < 0)
        return -1;
#endif
    if (dev == NULL)
        return 0;
    long long id = -1;
    if (PyLong_Check(dev)) {
        id = PyLong_AsLongLong(dev);
        if (id == -1 && PyErr_Occurred())
            PyErr_Clear();
    }
    Py_DECREF(dev);
    if (id >= 0 && id != cur) {
        PyErr_Format(PyExc_ValueError,
                     "kernel '%U': the stream is on device %lld but the launch runs on the current device "
                     "%lld; pass a stream of device %lld or make device %lld current",
                     p->name, id, cur, cur, id);
        return -1;
    }
    return 0;
}

/* The current device from the plan's getter: >= 0, or -1 when unknown. NULL-free: -2 with an
 * exception when the getter raised. */
static long long current_device(plan_t *p)
{
    if (p->fast_getter == NULL)
        return -1; /* disabled meanwhile */
    PyObject *get = Py_NewRef(p->fast_getter); /* the call may reconfigure the plan */
    PyObject *dev = PyObject_CallNoArgs(get);
    Py_DECREF(get);
    if (dev == NULL)
        return -2;
    long long cur = -1;
    if (PyLong_Check(dev)) {
        cur = PyLong_AsLongLong(dev);
        if (cur == -1 && PyErr_Occurred())
            PyErr_Clear();
    }
    Py_DECREF(dev);
    return cur < 0 ? -1 : cur;
}

static PyObject *dims_tuple(const long long *v, int nd)
{
    PyObject *t = PyTuple_New(nd);
    for (int k = 0; t != NULL && k < nd; k++) {
        PyObject *x = PyLong_FromLongLong(v[k]);
        if (x == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *kernel_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *n_threads = Py_None, *grid = Py_None, *block = Py_None, *shared = NULL, *stream = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + k];
        if (kw_is(name, cn_str.stream))
            stream = value;
        else if (kw_is(name, cn_str.n_threads))
            n_threads = value;
        else if (kw_is(name, cn_str.grid))
            grid = value;
        else if (kw_is(name, cn_str.block))
            block = value;
        else if (kw_is(name, cn_str.shared_mem))
            shared = value;
        else
            return slow_call(self, args, nargs, kwnames); /* the TypeError of an unknown keyword */
    }
    PyObject *plan_obj = PyObject_GetAttr(self, cn_str.plan);
    if (plan_obj == NULL)
        return NULL;
    if (!Py_IS_TYPE(plan_obj, &cn_plan_type) || !((plan_t *)plan_obj)->fast_ok) {
        Py_DECREF(plan_obj);
        return slow_call(self, args, nargs, kwnames);
    }
    plan_t *p = (plan_t *)plan_obj;
    PyObject *out = NULL;
    pack_result_t res = {0};
    /* Sizes first, as the general path reads them. */
    long long nt[3] = {1, 1, 1}, gr[3] = {1, 1, 1}, blk[3] = {1, 1, 1}, g[3] = {1, 1, 1};
    int nt_nd = 0, gr_nd = 0, blk_nd;
    if (n_threads != Py_None && (nt_nd = cn_read_dims(n_threads, nt, 0)) == 0)
        goto slow;
    if (grid != Py_None && (gr_nd = cn_read_dims(grid, gr, 0)) == 0)
        goto slow;
    if (nt_nd && gr_nd)
        goto slow; /* pass exactly one */
    if (block != Py_None) {
        if ((blk_nd = cn_read_dims(block, blk, 1)) == 0 || blk[0] * blk[1] * blk[2] > 1024)
            goto slow;
    }
    else {
        blk_nd = p->blk_nd;
        for (int k = 0; k < 3; k++)
            blk[k] = p->blk[k];
    }
    long long shared_mem = 0;
    if (shared != NULL) {
        if (!PyLong_CheckExact(shared))
            goto slow;
        int overflow = 0;
        shared_mem = PyLong_AsLongLongAndOverflow(shared, &overflow);
        if (overflow || shared_mem < 0) {
            PyErr_Clear();
            goto slow;
        }
    }
    if (!nt_nd && !gr_nd && p->infer == INFER_PYTHON)
        goto slow; /* a callable n_threads_from, or None: Python calls it or says why not */
    /* The current device, read once per call: the arrays and the stream must live on it. */
    long long cur = current_device(p);
    if (cur == -2)
        goto done;
    if (cur != p->fast_dev)
        goto slow; /* no limits known for this device yet */
    if (cn_pack_call(p, args, nargs, cur, &res, 0) < 0)
        goto done;
    int g_nd;
    if (gr_nd) {
        g_nd = gr_nd;
        for (int k = 0; k < 3; k++)
            g[k] = gr[k];
    }
    else {
        if (!nt_nd) {
            /* inference from the first array's shape */
            if (!res.has_first || res.struct_first || !res.dims_ok)
                goto slow;
            if (p->infer == INFER_AUTO) {
                if (res.nd < blk_nd)
                    goto slow;
                nt_nd = blk_nd;
                for (int k = 0; k < blk_nd; k++)
                    nt[k] = res.dims[k];
            }
            else {
                nt_nd = 1;
                nt[0] = res.dims[p->infer == INFER_FIRST_ARRAY ? 0 : res.nd - 1];
            }
        }
        if (blk_nd == 1 && nt_nd > 1)
            blk_nd = nt_nd; /* the other block entries are already 1 */
        else if (blk_nd != nt_nd)
            goto slow;
        g_nd = nt_nd;
        for (int k = 0; k < nt_nd; k++)
            g[k] = nt[k] / blk[k] + (nt[k] % blk[k] != 0);
    }
    if (cur >= 0 && stream != Py_None && check_stream(p, stream, cur) < 0)
        goto done;
    /* The device's limits: a launch beyond them is the general path's error. */
    for (int k = 0; k < 3; k++) {
        if (blk[k] > p->lim_block[k] || g[k] > p->lim_grid[k])
            goto slow;
    }
    if (blk[0] * blk[1] * blk[2] > p->lim_threads || shared_mem > p->lim_shared)
        goto slow;
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    {
        PyObject *tuple = PyTuple_New(nargs);
        PyObject *gt = dims_tuple(g, g_nd), *bt = dims_tuple(blk, blk_nd);
        PyObject *sm = PyLong_FromLongLong(shared_mem);
        if (tuple != NULL && gt != NULL && bt != NULL && sm != NULL) {
            for (Py_ssize_t k = 0; k < nargs; k++)
                PyTuple_SET_ITEM(tuple, k, Py_NewRef(args[k]));
            PyObject *call_args[7] = {self, res.packed, gt, bt, sm, stream, tuple};
            out = PyObject_VectorcallMethod(cn_str.launch_fast, call_args, 7, NULL);
        }
        Py_XDECREF(tuple);
        Py_XDECREF(gt);
        Py_XDECREF(bt);
        Py_XDECREF(sm);
    }
    goto done;
slow:
    cn_result_clear(&res);
    Py_DECREF(plan_obj);
    return slow_call(self, args, nargs, kwnames);
done:
    cn_result_clear(&res);
    Py_DECREF(plan_obj);
    return out;
}

static PyMethodDef kernel_call_def = {
    "__call__", (PyCFunction)(void (*)(void))kernel_call, METH_FASTCALL | METH_KEYWORDS,
    "kernel(*args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None)\n\n"
    "Check the arguments and launch the kernel (see CudaKernel)."};

PyDoc_STRVAR(kernel_call_method_doc,
             "kernel_call_method(cls)\n--\n\n"
             "The __call__ method for class `cls` (CudaKernel): in C, the rest through\n"
             "cls._call_slow. Instances need `_plan` (a LaunchPlan or None) and `_launch_fast`.");

static PyObject *kernel_call_method(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls))
        return cn_raise(CN_ERR_TYPE, "kernel_call_method(): expected a class, got %.100s", Py_TYPE(cls)->tp_name);
    return PyDescr_NewMethod((PyTypeObject *)cls, &kernel_call_def);
}

/* kernel.prepare_args(*args): in C once kernel._prepare_slow configured the plan
 * (configure_prepare) and while the CuPy module it saw is the one imported; else through
 * _prepare_slow, which does the same in Python and configures the plan. */
static PyObject *kernel_prepare(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *plan_obj = kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0 ? PyObject_GetAttr(self, cn_str.plan) : NULL;
    if (plan_obj == NULL && PyErr_Occurred())
        return NULL;
    plan_t *p = plan_obj != NULL && Py_IS_TYPE(plan_obj, &cn_plan_type) ? (plan_t *)plan_obj : NULL;
    PyObject *cupy = NULL;
    if (p != NULL && p->empty != NULL) {
        cupy = PyDict_GetItemWithError(PyImport_GetModuleDict(), cn_str.cupy);
        if (cupy == NULL && PyErr_Occurred()) {
            Py_DECREF(plan_obj);
            return NULL;
        }
        if (cupy == NULL)
            cupy = Py_None;
    }
    if (p == NULL || p->empty == NULL || cupy != p->prep_cupy) {
        Py_XDECREF(plan_obj);
        return call_python_path(cn_str.prepare_slow, self, args, nargs, kwnames);
    }
    /* As _current_device_or_none: a getter that fails or gives no id means "no check". */
    long long cur = -1;
    if (p->prep_getter != Py_None) {
        PyObject *get = Py_NewRef(p->prep_getter); /* the call may reconfigure the plan */
        PyObject *dev = PyObject_CallNoArgs(get);
        Py_DECREF(get);
        if (dev == NULL)
            PyErr_Clear();
        else {
            if (PyLong_CheckExact(dev)) {
                cur = PyLong_AsLongLong(dev);
                if (cur == -1 && PyErr_Occurred())
                    PyErr_Clear();
            }
            Py_DECREF(dev);
        }
        if (cur < 0)
            cur = -1;
    }
    PyObject *out = cn_prepare_values(p, args, nargs, cur);
    Py_DECREF(plan_obj);
    return out;
}

static PyMethodDef kernel_prepare_def = {
    "prepare_args", (PyCFunction)(void (*)(void))kernel_prepare, METH_FASTCALL | METH_KEYWORDS,
    "prepare_args(*args) -> tuple\n\n"
    "The values a launch would pass, without launching: arguments flattened through\n"
    "__cuda_args__, checked, scalars cast to their parameters' NumPy types, array views packed.\n"
    "Same errors as a call."};

PyDoc_STRVAR(kernel_prepare_method_doc,
             "kernel_prepare_method(cls)\n--\n\n"
             "The prepare_args method for class `cls` (CudaKernel): in C once configured, else\n"
             "cls._prepare_slow.");

static PyObject *kernel_prepare_method(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls))
        return cn_raise(CN_ERR_TYPE, "kernel_prepare_method(): expected a class, got %.100s",
                        Py_TYPE(cls)->tp_name);
    return PyDescr_NewMethod((PyTypeObject *)cls, &kernel_prepare_def);
}

/* ---------------------------------------------------------------- the driver launch */

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shmem, void *stream, void **params, void **extra);
static launch_fn cu_launch = NULL;
static int driver_looked = 0;

static void find_driver(void)
{
    if (driver_looked)
        return;
    driver_looked = 1;
#ifdef CN_HAVE_DLFCN
    /* Only a driver that is already loaded (by CuPy) is used: RTLD_NOLOAD never loads one. */
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    for (int k = 0; names[k] && cu_launch == NULL; k++) {
        void *h = dlopen(names[k], RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL)
            cu_launch = (launch_fn)dlsym(h, "cuLaunchKernel");
    }
#endif
}

PyDoc_STRVAR(driver_available_doc,
             "driver_available()\n--\n\nTrue when a CUDA driver with cuLaunchKernel is loaded in the process.");

static PyObject *driver_available(PyObject *self, PyObject *unused)
{
    find_driver();
    return PyBool_FromLong(cu_launch != NULL);
}

PyDoc_STRVAR(launch_doc,
             "launch(function, gx, gy, gz, bx, by, bz, shared_mem, stream, packed)\n--\n\n"
             "cuLaunchKernel with the buffer of LaunchPlan.pack(); returns the CUresult (0 = success).\n"
             "`function` and `stream` are the driver handles as integers.");

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10)
        return cn_raise(CN_ERR_TYPE, "launch() takes exactly 10 arguments (%zd given)", nargs);
    find_driver();
    if (cu_launch == NULL)
        return cn_raise(CN_ERR_VALUE, "launch(): no CUDA driver is loaded in this process");
    unsigned long long f = PyLong_AsUnsignedLongLong(args[0]);
    if (f == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    unsigned dims[7];
    for (int k = 0; k < 7; k++) {
        unsigned long v = PyLong_AsUnsignedLong(args[1 + k]);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (v > 0xffffffffUL)
            return cn_raise(CN_ERR_OVERFLOW, "launch(): launch dimension %lu too large", v);
        dims[k] = (unsigned)v;
    }
    unsigned long long stream = PyLong_AsUnsignedLongLong(args[8]);
    if (stream == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (!PyBytes_Check(args[9]))
        return cn_raise(CN_ERR_TYPE, "launch(): 'packed' must be the bytes of LaunchPlan.pack()");
    if (f == 0)
        return cn_raise(CN_ERR_VALUE, "launch(): null function handle");
    void **params = (void **)(void *)PyBytes_AS_STRING(args[9]);
    int r = cu_launch((void *)(uintptr_t)f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6],
                      (void *)(uintptr_t)stream, PyBytes_GET_SIZE(args[9]) ? params : NULL, NULL);
    return PyLong_FromLong(r);
}

PyDoc_STRVAR(packed_address_doc,
             "packed_address(packed)\n--\n\nAddress of the pointer table of a packed buffer (for\n"
             "cupy.cuda.driver.launchKernel); valid while `packed` is alive.");

static PyObject *packed_address(PyObject *self, PyObject *packed)
{
    if (!PyBytes_Check(packed))
        return cn_raise(CN_ERR_TYPE, "packed_address(): expected bytes, got %.100s", Py_TYPE(packed)->tp_name);
    return PyLong_FromVoidPtr(PyBytes_AS_STRING(packed));
}

static PyMethodDef launch_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, launch_doc},
    {"driver_available", driver_available, METH_NOARGS, driver_available_doc},
    {"packed_address", packed_address, METH_O, packed_address_doc},
    {"kernel_call_method", kernel_call_method, METH_O, kernel_call_method_doc},
    {"kernel_prepare_method", kernel_prepare_method, METH_O, kernel_prepare_method_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_pack_launch(PyObject *module) { return PyModule_AddFunctions(module, launch_methods); }
