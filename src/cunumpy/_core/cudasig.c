/* CUDA __global__ signature parser: comments, preprocessor lines, templates, qualifiers,
 * pointer depth, array views (ArrayND / CArrayND / ArrayView<T, N>) and structs by value.
 *
 * The parsing itself is plain C in cudasig_parse.h (also run by tests/c/test_cudasig.c under
 * the sanitizers); the two entry points here convert the result, or one error message naming
 * the parameter, at the Python boundary. _reference/cudasig.py is the same algorithm in Python
 * and the tests compare the two. */
#include "common.h"

#define CS_MALLOC PyMem_RawMalloc
#define CS_CALLOC PyMem_RawCalloc
#define CS_REALLOC PyMem_RawRealloc
#define CS_FREE PyMem_RawFree
#include "cudasig_parse.h"

_Static_assert(CS_ERR_NOMEM == CN_ERR_NOMEM && CS_ERR_VALUE == CN_ERR_VALUE, "status codes differ");

/* ---------------------------------------------------------------- Python boundary */

typedef struct {
    const tok_t *name;
    size_t name_len;
    const char *name_p;
    kernel_t chosen;
    int found;
} pick_t;

static int pick_kernel(const kernel_t *k, void *ctx)
{
    pick_t *p = (pick_t *)ctx;
    if (k->name->len != p->name_len || memcmp(k->name->p, p->name_p, p->name_len) != 0)
        return 0;
    if (!p->found || (k->is_def && !p->chosen.is_def)) {
        p->chosen = *k;
        p->found = 1;
    }
    return p->chosen.is_def;
}

typedef struct {
    PyObject *list;
    PyObject *seen; /* set of the names in list: a membership test per kernel stays O(1) */
    int failed;
} names_t;

static int collect_name(const kernel_t *k, void *ctx)
{
    names_t *c = (names_t *)ctx;
    PyObject *s = PyUnicode_DecodeUTF8(k->name->p, (Py_ssize_t)k->name->len, "surrogatepass");
    if (s == NULL) {
        c->failed = 1;
        return 1;
    }
    int has = PySet_Contains(c->seen, s);
    if (has < 0 || (has == 0 && (PyList_Append(c->list, s) < 0 || PySet_Add(c->seen, s) < 0))) {
        Py_DECREF(s);
        c->failed = 1;
        return 1;
    }
    Py_DECREF(s);
    return 0;
}

static const char *utf8_of(PyObject *obj, const char *what, const char *fn, Py_ssize_t *len)
{
    if (!PyUnicode_Check(obj)) {
        cn_raise(CN_ERR_TYPE, "%s(): '%s' must be a str, not %.100s", fn, what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    const char *text = PyUnicode_AsUTF8AndSize(obj, len);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        /* Lone surrogates cannot be CUDA source text. */
        PyErr_Clear();
        cn_raise(CN_ERR_VALUE, "%s(): '%s' is not valid UTF-8 text (it contains a lone surrogate)", fn, what);
    }
    return text;
}

PyDoc_STRVAR(kernel_names_doc, "cuda_kernel_names(source)\n--\n\n"
                               "__global__ function names in order of first appearance, comments ignored.");

static PyObject *cuda_kernel_names(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1)
        return cn_raise(CN_ERR_TYPE, "cuda_kernel_names() takes exactly 1 argument (%zd given)", nargs);
    Py_ssize_t len;
    const char *src = utf8_of(args[0], "source", "cuda_kernel_names", &len);
    if (src == NULL)
        return NULL;
    toks_t tv = {0};
    if (tokenize(src, (size_t)len, &tv) < 0) {
        toks_free(&tv);
        return PyErr_NoMemory();
    }
    names_t c = {PyList_New(0), PySet_New(NULL), 0};
    if (c.list == NULL || c.seen == NULL) {
        Py_XDECREF(c.list);
        Py_XDECREF(c.seen);
        toks_free(&tv);
        return NULL;
    }
    find_kernels(&tv, collect_name, &c);
    toks_free(&tv);
    Py_DECREF(c.seen);
    if (c.failed) {
        Py_DECREF(c.list);
        return NULL;
    }
    return c.list;
}

/* ---------------------------------------------------------------- per-source memo
 *
 * CudaKernel.all_from_file parses one file once per kernel: tokenizing the whole file and
 * walking all its kernels each time made a file of n kernels cost O(n^2). The tokens and the
 * kernel chosen for each name (the first definition, else the first declaration, as
 * pick_kernel) are kept for the last source object parsed. The memo is a capsule: a call
 * holds its own reference, so another thread replacing the memo (when a GC pass or a message
 * runs Python code) cannot free the tokens in use. Tokens point into the source's UTF-8
 * buffer, kept alive by the memo's reference to the (immutable) str. */
typedef struct {
    PyObject *source; /* the str the tokens point into */
    toks_t tv;
    kernel_t *kernels;
    size_t nk, cap;
    PyObject *index; /* dict: kernel name -> index into kernels */
    int failed;
} memo_t;

static PyObject *memo_capsule = NULL;

static void memo_free(memo_t *m)
{
    Py_XDECREF(m->source);
    Py_XDECREF(m->index);
    toks_free(&m->tv);
    PyMem_RawFree(m->kernels);
    PyMem_RawFree(m);
}

static void memo_destroy(PyObject *capsule)
{
    memo_free((memo_t *)PyCapsule_GetPointer(capsule, "cunumpy.cudasig.memo"));
}

static int memo_visit(const kernel_t *k, void *ctx)
{
    memo_t *m = (memo_t *)ctx;
    PyObject *name = PyUnicode_DecodeUTF8(k->name->p, (Py_ssize_t)k->name->len, "surrogatepass");
    if (name == NULL) {
        m->failed = 1;
        return 1;
    }
    PyObject *at = PyDict_GetItemWithError(m->index, name); /* borrowed */
    if (at == NULL && PyErr_Occurred()) {
        Py_DECREF(name);
        m->failed = 1;
        return 1;
    }
    if (at != NULL) {
        kernel_t *chosen = &m->kernels[PyLong_AsSize_t(at)];
        if (k->is_def && !chosen->is_def)
            *chosen = *k;
        Py_DECREF(name);
        return 0;
    }
    if (m->nk == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        kernel_t *grown = (kernel_t *)PyMem_RawRealloc(m->kernels, cap * sizeof(kernel_t));
        if (grown == NULL) {
            Py_DECREF(name);
            PyErr_NoMemory();
            m->failed = 1;
            return 1;
        }
        m->kernels = grown;
        m->cap = cap;
    }
    PyObject *index = PyLong_FromSize_t(m->nk);
    if (index == NULL || PyDict_SetItem(m->index, name, index) < 0) {
        Py_XDECREF(index);
        Py_DECREF(name);
        m->failed = 1;
        return 1;
    }
    Py_DECREF(index);
    Py_DECREF(name);
    m->kernels[m->nk++] = *k;
    return 0;
}

/* A new reference to the memo of `source` (built if it is not the last one), or NULL. */
static PyObject *memo_of(PyObject *source, const char *src, Py_ssize_t len)
{
    if (memo_capsule != NULL) {
        memo_t *m = (memo_t *)PyCapsule_GetPointer(memo_capsule, "cunumpy.cudasig.memo");
        if (m != NULL && m->source == source)
            return Py_NewRef(memo_capsule);
    }
    memo_t *m = (memo_t *)PyMem_RawCalloc(1, sizeof(memo_t));
    if (m == NULL)
        return PyErr_NoMemory();
    m->source = Py_NewRef(source);
    m->index = PyDict_New();
    if (m->index == NULL) {
        memo_free(m);
        return NULL;
    }
    if (tokenize(src, (size_t)len, &m->tv) < 0) {
        memo_free(m);
        return PyErr_NoMemory();
    }
    find_kernels(&m->tv, memo_visit, m);
    if (m->failed) {
        memo_free(m);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(m, "cunumpy.cudasig.memo", memo_destroy);
    if (capsule == NULL) {
        memo_free(m);
        return NULL;
    }
    Py_XSETREF(memo_capsule, Py_NewRef(capsule));
    return capsule;
}

static PyObject *param_tuple(const param_t *p)
{
    PyObject *name = NULL, *sname = NULL, *ctype = NULL, *dtype = NULL;
    name = PyUnicode_DecodeUTF8(p->name.len ? p->name.p : "", (Py_ssize_t)p->name.len, "surrogatepass");
    if (p->kind.struct_name != NULL)
        sname = PyUnicode_DecodeUTF8(p->kind.struct_name->p, (Py_ssize_t)p->kind.struct_name->len,
                                     "surrogatepass");
    else
        sname = Py_NewRef(Py_None);
    /* A struct's C type is its name, whatever its length. */
    if (sname != NULL)
        ctype = p->kind.struct_name ? Py_NewRef(sname) : PyUnicode_FromString(p->kind.ctype);
    dtype = p->kind.dtype ? PyUnicode_FromString(p->kind.dtype) : Py_NewRef(Py_None);
    if (name == NULL || sname == NULL || ctype == NULL || dtype == NULL) {
        Py_XDECREF(name);
        Py_XDECREF(sname);
        Py_XDECREF(ctype);
        Py_XDECREF(dtype);
        return NULL;
    }
    return Py_BuildValue("(NNNNNiN)", name, ctype, dtype, PyBool_FromLong(p->pointer == 1), sname,
                         p->kind.view_ndim, PyBool_FromLong(p->kind.contiguous));
}

PyDoc_STRVAR(parse_doc,
             "cuda_parse_signature(source, name, struct_names=(), template_args=None)\n--\n\n"
             "(params, is_template, extern_c) of the __global__ function `name`; one\n"
             "(name, ctype, dtype_name | None, pointer, struct_name | None, view_ndim, contiguous)\n"
             "tuple per parameter. ValueError naming the parameter when it cannot be checked.");

static PyObject *cuda_parse_signature(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fn = "cuda_parse_signature";
    if (nargs < 2 || nargs > 4)
        return cn_raise(CN_ERR_TYPE, "%s() takes 2 to 4 arguments (%zd given)", fn, nargs);
    Py_ssize_t src_len, name_len;
    const char *src = utf8_of(args[0], "source", fn, &src_len);
    if (src == NULL)
        return NULL;
    const char *kname = utf8_of(args[1], "name", fn, &name_len);
    if (kname == NULL)
        return NULL;
    PyObject *snames = nargs > 2 ? args[2] : NULL;
    PyObject *targs = nargs > 3 ? args[3] : Py_None;
    if (snames != NULL && !PyTuple_Check(snames))
        return cn_raise(CN_ERR_TYPE, "%s(): 'struct_names' must be a tuple of str", fn);
    if (targs != Py_None && !PyTuple_Check(targs))
        return cn_raise(CN_ERR_TYPE, "%s(): 'template_args' must be None or a tuple of str", fn);
    Py_ssize_t n_snames = snames ? PyTuple_GET_SIZE(snames) : 0;
    Py_ssize_t n_targs = targs != Py_None ? PyTuple_GET_SIZE(targs) : 0;
    for (Py_ssize_t i = 0; i < n_snames; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(snames, i)))
            return cn_raise(CN_ERR_TYPE, "%s(): 'struct_names' must be a tuple of str", fn);
    for (Py_ssize_t i = 0; i < n_targs; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(targs, i)))
            return cn_raise(CN_ERR_TYPE, "%s(): 'template_args' must be None or a tuple of str", fn);

    PyObject *result = NULL;
    toks_t tv = {0}, structs = {0};
    PyObject *memo = NULL;    /* the source's memo (tv borrowed from it), or NULL */
    const memo_t *mm = NULL;
    toks_t *targ_toks = NULL;
    tok_t *tnames = NULL;
    range_t *tparts = NULL, *parts = NULL;
    param_t *params = NULL;
    size_t n_tparams = 0;
    char errbuf[ERR_CAP];
    sbuf_t err = {errbuf, sizeof(errbuf), 0};
    errbuf[0] = '\0';
    cn_status st = CN_ERR_NOMEM;

    /* Only exact str objects are memoised (a subclass could be mutable in ways that matter). */
    memo = PyUnicode_CheckExact(args[0]) ? memo_of(args[0], src, src_len) : NULL;
    if (memo == NULL && PyErr_Occurred()) {
        st = CN_ERR_PYTHON;
        goto fail;
    }
    mm = memo ? (const memo_t *)PyCapsule_GetPointer(memo, "cunumpy.cudasig.memo") : NULL;
    if (mm != NULL) {
        tv = mm->tv; /* borrowed: not freed below */
    } else if (tokenize(src, (size_t)src_len, &tv) < 0) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n_snames; i++) {
        Py_ssize_t l;
        const char *p = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(snames, i), &l);
        if (p == NULL) {
            st = CN_ERR_PYTHON;
            goto fail;
        }
        if (toks_push(&structs, TK_IDENT, p, (size_t)l) < 0)
            goto fail;
    }
    pick_t pick = {NULL, (size_t)name_len, kname, {0}, 0};
    if (mm != NULL) {
        PyObject *at = PyDict_GetItemWithError(mm->index, args[1]);
        if (at == NULL && PyErr_Occurred()) {
            st = CN_ERR_PYTHON;
            goto fail;
        }
        if (at != NULL) {
            pick.chosen = mm->kernels[PyLong_AsSize_t(at)];
            pick.found = 1;
        }
    } else {
        find_kernels(&tv, pick_kernel, &pick);
    }
    if (!pick.found) {
        cn_raise(CN_ERR_VALUE, "no __global__ function named '%s' in the source", kname);
        st = CN_ERR_PYTHON;
        goto fail;
    }
    const kernel_t *k = &pick.chosen;
    const tok_t *t = tv.v;
    int is_template = k->template_at >= 0;
    if (is_template) {
        size_t at = (size_t)k->template_at;
        size_t close = (at + 1 < tv.n && is_punct(&t[at + 1], "<")) ? matching(t, tv.n, at + 1, "<", ">") : tv.n;
        if (close >= tv.n) {
            cn_raise(CN_ERR_VALUE, "kernel '%s': malformed template parameter list", kname);
            st = CN_ERR_PYTHON;
            goto fail;
        }
        long np = 0;
        if (close > at + 2) {
            np = split_top(t, at + 2, close, &tparts);
            if (np < 0)
                goto fail;
        }
        n_tparams = (size_t)np;
        tnames = (tok_t *)PyMem_RawCalloc(n_tparams ? n_tparams : 1, sizeof(tok_t));
        targ_toks = (toks_t *)PyMem_RawCalloc(n_tparams ? n_tparams : 1, sizeof(toks_t));
        if (tnames == NULL || targ_toks == NULL)
            goto fail;
        size_t required = 0;
        for (size_t i = 0; i < n_tparams; i++) {
            size_t s0 = tparts[i].start, s1 = tparts[i].stop;
            size_t def = s1;
            for (size_t j = s0; j < s1; j++) {
                if (is_punct(&t[j], "=")) {
                    def = j;
                    break;
                }
            }
            const char *problem = NULL;
            size_t idents = 0;
            const tok_t *last = NULL;
            for (size_t j = s0; j < def; j++) {
                if (is_punct(&t[j], "..."))
                    problem = "variadic template parameters cannot be checked";
                if (t[j].kind == TK_IDENT) {
                    idents++;
                    last = &t[j];
                }
            }
            if (s0 == s1 || (problem == NULL && idents == 0))
                problem = "malformed template parameter list";
            if (problem != NULL) {
                cn_raise(CN_ERR_VALUE, "kernel '%s': %s", kname, problem);
                st = CN_ERR_PYTHON;
                goto fail;
            }
            tnames[i].kind = -1;
            if (idents > 1)
                tnames[i] = *last;
            if (def == s1)
                required++;
            if (targs != Py_None && (Py_ssize_t)i < n_targs) {
                Py_ssize_t l;
                const char *p = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(targs, i), &l);
                if (p == NULL) {
                    st = CN_ERR_PYTHON;
                    goto fail;
                }
                if (tokenize(p, (size_t)l, &targ_toks[i]) < 0)
                    goto fail;
            }
            else if (def < s1) {
                for (size_t j = def + 1; j < s1; j++)
                    if (toks_push(&targ_toks[i], t[j].kind, t[j].p, t[j].len) < 0)
                        goto fail;
            }
        }
        if (targs == Py_None) {
            cn_raise(CN_ERR_VALUE, "kernel '%s' is a template with %zu parameter(s): pass template_args", kname,
                     n_tparams);
            st = CN_ERR_PYTHON;
            goto fail;
        }
        if ((size_t)n_targs < required || (size_t)n_targs > n_tparams) {
            cn_raise(CN_ERR_VALUE, "kernel '%s' takes %zu to %zu template arguments, got %zd", kname, required,
                     n_tparams, n_targs);
            st = CN_ERR_PYTHON;
            goto fail;
        }
    }
    else if (targs != Py_None) {
        cn_raise(CN_ERR_VALUE, "kernel '%s' is not a template, but template_args were given", kname);
        st = CN_ERR_PYTHON;
        goto fail;
    }
    subst_t sub = {tnames, n_tparams, targ_toks};
    long np = 0;
    if (k->close > k->open) {
        np = split_top(t, k->open, k->close, &parts);
        if (np < 0)
            goto fail;
        if (np == 1 && parts[0].stop - parts[0].start == 1 && is_ident(&t[parts[0].start], "void"))
            np = 0;
    }
    params = (param_t *)PyMem_RawCalloc(np ? (size_t)np : 1, sizeof(param_t));
    if (params == NULL)
        goto fail;
    for (long i = 0; i < np; i++) {
        const tok_t *pt = &t[parts[i].start];
        size_t pn = parts[i].stop - parts[i].start;
        if (pn == 0) {
            cn_raise(CN_ERR_VALUE, "kernel '%s': parameter %ld is empty", kname, i);
            st = CN_ERR_PYTHON;
            goto fail;
        }
        err.len = 0;
        errbuf[0] = '\0';
        int r = parse_param(pt, pn, &structs, &sub, &params[i], &err);
        if (r == CN_ERR_NOMEM)
            goto fail;
        if (r != 0) {
            char decl[256];
            sbuf_t d = {decl, sizeof(decl), 0};
            decl[0] = '\0';
            text_of(pt, pn, &d);
            cn_raise(CN_ERR_VALUE, "kernel '%s': cannot check parameter %ld '%s': %s", kname, i, decl, errbuf);
            st = CN_ERR_PYTHON;
            goto fail;
        }
    }
    PyObject *tuple = PyTuple_New(np);
    if (tuple == NULL) {
        st = CN_ERR_PYTHON;
        goto fail;
    }
    for (long i = 0; i < np; i++) {
        PyObject *item = param_tuple(&params[i]);
        if (item == NULL) {
            Py_DECREF(tuple);
            st = CN_ERR_PYTHON;
            goto fail;
        }
        PyTuple_SET_ITEM(tuple, i, item);
    }
    result = Py_BuildValue("(NNN)", tuple, PyBool_FromLong(is_template), PyBool_FromLong(k->extern_c));
    st = CN_OK;
fail:
    if (st == CN_ERR_NOMEM)
        PyErr_NoMemory();
    if (mm == NULL)
        toks_free(&tv);
    Py_XDECREF(memo);
    toks_free(&structs);
    if (targ_toks != NULL) {
        for (size_t i = 0; i < n_tparams; i++)
            toks_free(&targ_toks[i]);
        PyMem_RawFree(targ_toks);
    }
    PyMem_RawFree(tnames);
    PyMem_RawFree(tparts);
    PyMem_RawFree(parts);
    PyMem_RawFree(params);
    return result;
}

static PyMethodDef cudasig_methods[] = {
    {"cuda_kernel_names", (PyCFunction)(void (*)(void))cuda_kernel_names, METH_FASTCALL, kernel_names_doc},
    {"cuda_parse_signature", (PyCFunction)(void (*)(void))cuda_parse_signature, METH_FASTCALL, parse_doc},
    {NULL, NULL, 0, NULL},
};

CN_INTERNAL int cn_register_cudasig(PyObject *module) { return PyModule_AddFunctions(module, cudasig_methods); }
