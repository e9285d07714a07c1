/* Python side of the thread pool: its size from CUNUMPY_NUM_THREADS, the run-time setter and
 * getter, the warning after a failed start, and test hooks. */
#include "common.h"

#include <sched.h>
#include <stdlib.h>

#include "thread_pool.h"

/* Parse CUNUMPY_NUM_THREADS strictly (a whole decimal number from 1 to the maximum, blanks
 * around it allowed); anything else warns and means one thread. Unset or empty: the CPUs this
 * process may use. */
static int threads_from_environment(void)
{
    const char *text = getenv("CUNUMPY_NUM_THREADS");
    if (text == NULL || *text == '\0')
        return 0;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    long value = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        if (value <= CN_POOL_MAX_THREADS)
            value = value * 10 + (*p - '0');
        digits++;
        p++;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (digits > 0 && *p == '\0' && value >= 1 && value <= CN_POOL_MAX_THREADS)
        return (int)value;
    PyObject *shown = PyUnicode_DecodeFSDefault(text);
    if (shown == NULL)
        return -1;
    int rc = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                              "CUNUMPY_NUM_THREADS=%R is not a whole number from 1 to %d; "
                              "using one thread",
                              shown, CN_POOL_MAX_THREADS);
    Py_DECREF(shown);
    return rc < 0 ? -1 : 1;
}

static int default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n < CN_POOL_MAX_THREADS ? n : CN_POOL_MAX_THREADS;
    }
    return 1;
}

CN_INTERNAL int cn_pool_prepare(void)
{
    if (CN_UNLIKELY(cn_pool_wanted() == 0)) {
        int n = threads_from_environment();
        if (n < 0)
            return -1;
        cn_pool_decide(n > 0 ? n : default_threads());
    }
    if (CN_UNLIKELY(cn_pool_take_start_failure())) {
        if (PyErr_WarnEx(PyExc_RuntimeWarning,
                         "cunumpy could not start its worker threads; running on one thread",
                         1) < 0)
            return -1;
    }
    return 0;
}

PyDoc_STRVAR(get_num_threads_doc, "get_num_threads()\n--\n\nThreads the host algorithms use.");

static PyObject *get_num_threads(PyObject *self, PyObject *unused)
{
    if (cn_pool_prepare() < 0)
        return NULL;
    return PyLong_FromLong(cn_pool_threads());
}

PyDoc_STRVAR(set_num_threads_doc,
             "set_num_threads(n)\n--\n\nUse n threads (1 to 1024) from now on; waits for a "
             "running parallel call.");

static PyObject *set_num_threads(PyObject *self, PyObject *arg)
{
    if (!PyLong_Check(arg) || PyBool_Check(arg))
        return cn_raise(CN_ERR_TYPE, "'n' must be an int, not %s", Py_TYPE(arg)->tp_name);
    int overflow = 0;
    long n = PyLong_AsLongAndOverflow(arg, &overflow);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || n < 1 || n > CN_POOL_MAX_THREADS)
        return cn_raise(CN_ERR_VALUE, "'n' must be from 1 to %d, got %R", CN_POOL_MAX_THREADS,
                        arg);
    if (cn_pool_prepare() < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    cn_pool_resize((int)n);
    Py_END_ALLOW_THREADS
    if (cn_pool_prepare() < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(pool_fail_next_start_doc,
             "_pool_fail_next_start()\n--\n\nTest hook: the next start of the workers fails as "
             "if thread creation failed.");

static PyObject *pool_fail_next_start(PyObject *self, PyObject *unused)
{
    Py_BEGIN_ALLOW_THREADS
    cn_pool_fail_next_start();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

PyDoc_STRVAR(pool_workers_doc, "_pool_workers()\n--\n\nWorker threads running now (tests).");

static PyObject *pool_workers(PyObject *self, PyObject *unused)
{
    return PyLong_FromLong(cn_pool_workers());
}

PyDoc_STRVAR(pool_ignore_cutover_doc,
             "_pool_ignore_cutover(on)\n--\n\nTests and benchmarks: with on true, inputs below an "
             "algorithm's cut-over use the pool too (the results are the same bits).");

static PyObject *pool_ignore_cutover(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    cn_pool_ignore_cutover(on);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(pool_jobs_doc, "_pool_jobs()\n--\n\nJobs handed to the worker threads so far (tests).");

static PyObject *pool_jobs(PyObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLong(cn_pool_jobs());
}

static PyMethodDef pool_methods[] = {
    {"get_num_threads", get_num_threads, METH_NOARGS, get_num_threads_doc},
    {"set_num_threads", set_num_threads, METH_O, set_num_threads_doc},
    {"_pool_fail_next_start", pool_fail_next_start, METH_NOARGS, pool_fail_next_start_doc},
    {"_pool_workers", pool_workers, METH_NOARGS, pool_workers_doc},
    {"_pool_ignore_cutover", pool_ignore_cutover, METH_O, pool_ignore_cutover_doc},
    {"_pool_jobs", pool_jobs, METH_NOARGS, pool_jobs_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_thread_pool(PyObject *module)
{
    if (cn_pool_install_fork_handlers() != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    return PyModule_AddFunctions(module, pool_methods);
}
