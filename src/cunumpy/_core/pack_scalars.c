/* The launch packer's values: the scalar and struct kinds of the checker table. Python and
 * NumPy scalars are range-checked and cast to the parameter's type (NumPy scalar types through
 * the per-parameter table of actions built in Python); a struct takes its packed value. */
#include "pack_plan.h"

#include <float.h>
#include <math.h>

static const char *scalar_kind_name(const slot_t *s)
{
    switch (s->scalar) {
    case S_BOOL:
        return "a bool";
    case S_INT:
    case S_UINT:
        return "an integer";
    case S_FLOAT:
        return "a floating";
    default:
        return "a complex";
    }
}

/* Python int -> integer parameter, range-checked. `value` is a PyLong. */
static int put_int(plan_t *p, Py_ssize_t i, PyObject *value, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    int bits = (int)(8 * s->itemsize);
    int ovf = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &ovf);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (s->scalar == S_INT) {
        long long lo = bits == 64 ? (long long)(-9223372036854775807LL - 1) : -(1LL << (bits - 1));
        long long hi = bits == 64 ? 9223372036854775807LL : (1LL << (bits - 1)) - 1;
        if (ovf != 0 || v < lo || v > hi) {
            cn_arg_error(PyExc_OverflowError, p, i, "%R is out of range for %S [%lld, %lld]", value, s->dtype, lo, hi);
            return -1;
        }
        switch (bits) {
        case 8: { int8_t x = (int8_t)v; memcpy(out, &x, 1); break; }
        case 16: { int16_t x = (int16_t)v; memcpy(out, &x, 2); break; }
        case 32: { int32_t x = (int32_t)v; memcpy(out, &x, 4); break; }
        default: memcpy(out, &v, 8); break;
        }
        return 0;
    }
    unsigned long long hi = bits == 64 ? 18446744073709551615ULL : (1ULL << bits) - 1;
    unsigned long long u;
    if (ovf < 0 || (ovf == 0 && v < 0)) {
        u = 0;
        goto range;
    }
    if (ovf > 0) {
        u = PyLong_AsUnsignedLongLong(value);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto range;
        }
    }
    else {
        u = (unsigned long long)v;
    }
    if (u > hi)
        goto range;
    switch (bits) {
    case 8: { uint8_t x = (uint8_t)u; memcpy(out, &x, 1); break; }
    case 16: { uint16_t x = (uint16_t)u; memcpy(out, &x, 2); break; }
    case 32: { uint32_t x = (uint32_t)u; memcpy(out, &x, 4); break; }
    default: memcpy(out, &u, 8); break;
    }
    return 0;
range:
    cn_arg_error(PyExc_OverflowError, p, i, "%R is out of range for %S [0, %llu]", value, s->dtype, hi);
    return -1;
}

static void put_float(const slot_t *s, double d, unsigned char *out)
{
    if (s->itemsize == 4) {
        float f = (float)d;
        memcpy(out, &f, 4);
    }
    else {
        memcpy(out, &d, 8);
    }
}

static void put_complex(const slot_t *s, Py_complex c, unsigned char *out)
{
    if (s->itemsize == 8) {
        float f[2] = {(float)c.real, (float)c.imag};
        memcpy(out, f, 8);
    }
    else {
        double d[2] = {c.real, c.imag};
        memcpy(out, d, 16);
    }
}

/* A double for a float or complex<float> parameter: past FLT_MAX it would silently become inf
 * (the C conversion is even undefined): an OverflowError naming the kernel and the parameter,
 * as for integers. An infinity passed as such stays one. */
static int check_single_range(plan_t *p, Py_ssize_t i, PyObject *obj, double re, double im)
{
    const slot_t *s = &p->slots[i];
    int single = (s->scalar == S_FLOAT && s->itemsize == 4) || (s->scalar == S_COMPLEX && s->itemsize == 8);
    if (!single || ((!isfinite(re) || fabs(re) <= FLT_MAX) && (!isfinite(im) || fabs(im) <= FLT_MAX)))
        return 0;
    if (PyFloat_CheckExact(obj) || PyComplex_CheckExact(obj))
        cn_arg_error(PyExc_OverflowError, p, i, "%R is out of range for %S (largest finite value 3.4028235e+38)",
                  obj, s->dtype);
    else
        cn_arg_error(PyExc_OverflowError, p, i, "the value is out of range for %S (largest finite value 3.4028235e+38)",
                  s->dtype);
    return -1;
}

/* An int too large for a double: the OverflowError names the kernel and the parameter. */
static double int_as_double(plan_t *p, Py_ssize_t i, PyObject *obj)
{
    double d = PyLong_AsDouble(obj);
    if (d == -1.0 && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        cn_arg_error(PyExc_OverflowError, p, i, "the int is out of range for %S", p->slots[i].dtype);
    }
    return d;
}

static int put_number(plan_t *p, Py_ssize_t i, PyObject *obj, int action, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    switch (action) {
    case A_INDEX: {
        PyObject *v = PyNumber_Index(obj);
        if (v == NULL)
            return -1;
        int r = put_int(p, i, v, out);
        Py_DECREF(v);
        return r;
    }
    case A_TRUTH: {
        int t = PyObject_IsTrue(obj);
        if (t < 0)
            return -1;
        if (s->scalar == S_FLOAT)
            put_float(s, (double)t, out);
        else if (s->scalar == S_COMPLEX)
            put_complex(s, (Py_complex){(double)t, 0.0}, out);
        else {
            memset(out, 0, (size_t)s->itemsize);
            out[0] = (unsigned char)t; /* little-endian targets only (CUDA) */
        }
        return 0;
    }
    case A_FLOAT: {
        double d = PyFloat_AsDouble(obj);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (check_single_range(p, i, obj, d, 0.0) < 0)
            return -1;
        if (s->scalar == S_COMPLEX)
            put_complex(s, (Py_complex){d, 0.0}, out);
        else
            put_float(s, d, out);
        return 0;
    }
    default: {
        Py_complex c = PyComplex_AsCComplex(obj);
        if (c.real == -1.0 && PyErr_Occurred())
            return -1;
        if (check_single_range(p, i, obj, c.real, c.imag) < 0)
            return -1;
        put_complex(s, c, out);
        return 0;
    }
    }
}

CN_INTERNAL int cn_pack_scalar(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f,
                               int host)
{
    slot_t *s = &p->slots[i];
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyBool_Type) {
        if (s->scalar == S_BOOL || s->scalar == S_INT || s->scalar == S_UINT)
            return put_number(p, i, obj, A_TRUTH, out);
        cn_arg_error(PyExc_TypeError, p, i, "a Python bool is not accepted for %s parameter", scalar_kind_name(s));
        return -1;
    }
    if (t == &PyLong_Type)
        goto python_int;
    if (t == &PyFloat_Type)
        goto python_float;
    if (t == &PyComplex_Type)
        goto python_complex;
    {
        PyObject *action = PyDict_GetItemWithError(s->table, (PyObject *)t);
        if (action != NULL)
            return put_number(p, i, obj, (int)PyLong_AsLong(action), out);
        if (PyErr_Occurred())
            return -1;
    }
    if (PyObject_TypeCheck(obj, (PyTypeObject *)p->generic_type)) {
        PyObject *dt = PyObject_GetAttr(obj, cn_str.dtype);
        if (dt == NULL)
            return -1;
        cn_arg_error(PyExc_TypeError, p, i, "a NumPy %S scalar does not cast safely to %S", dt, s->dtype);
        Py_DECREF(dt);
        return -1;
    }
    if (PyLong_Check(obj))
        goto python_int;
    if (PyFloat_Check(obj))
        goto python_float;
    if (PyComplex_Check(obj))
        goto python_complex;
    cn_arg_error(PyExc_TypeError, p, i, "expected %s scalar, got %.200s", scalar_kind_name(s), t->tp_name);
    return -1;
python_int:
    if (s->scalar == S_INT || s->scalar == S_UINT)
        return put_int(p, i, obj, out);
    if (s->scalar == S_FLOAT || s->scalar == S_COMPLEX) {
        double d = int_as_double(p, i, obj);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (check_single_range(p, i, obj, d, 0.0) < 0)
            return -1;
        if (s->scalar == S_COMPLEX)
            put_complex(s, (Py_complex){d, 0.0}, out);
        else
            put_float(s, d, out);
        return 0;
    }
    cn_arg_error(PyExc_TypeError, p, i, "a Python int is not accepted for a bool parameter (pass True/False)");
    return -1;
python_float:
    if (s->scalar == S_FLOAT || s->scalar == S_COMPLEX)
        return put_number(p, i, obj, A_FLOAT, out);
    cn_arg_error(PyExc_TypeError, p, i, "a Python float is not accepted for %s parameter", scalar_kind_name(s));
    return -1;
python_complex:
    if (s->scalar == S_COMPLEX)
        return put_number(p, i, obj, A_COMPLEX, out);
    cn_arg_error(PyExc_TypeError, p, i, "a Python complex is not accepted for %s parameter", scalar_kind_name(s));
    return -1;
}

/* A NumPy floating scalar (np.float32, np.float16): its dtype's kind is 'f'. */
static int vector_real_scalar(PyObject *item)
{
    PyObject *dt = PyObject_GetAttrString(item, "dtype");
    if (dt == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *kind = PyObject_GetAttrString(dt, "kind");
    Py_DECREF(dt);
    if (kind == NULL) {
        PyErr_Clear();
        return 0;
    }
    int real = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "f") == 0;
    Py_DECREF(kind);
    return real;
}

/* A CUDA vector type by value (float2, uint4) from a tuple: each component a Python or NumPy
 * number of the vector's kind (an int for integer vectors; an int or a float for floating ones),
 * converted by NumPy into a structured scalar of the vector's dtype (out of range: OverflowError). */
static int pack_vector_tuple(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out)
{
    slot_t *s = &p->slots[i];
    Py_ssize_t n = PyTuple_GET_SIZE(obj);
    if (n != s->ndim) {
        cn_arg_error(PyExc_TypeError, p, i, "expected a tuple of %d numbers, got %zd", s->ndim, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyTuple_GET_ITEM(obj, k);
        int ok = PyIndex_Check(item);
        if (!ok && s->scalar == S_FLOAT)
            ok = PyFloat_Check(item) || vector_real_scalar(item);
        if (!ok) {
            cn_arg_error(PyExc_TypeError, p, i, "component %zd: expected %s, got %.200s", k,
                         s->scalar == S_FLOAT ? "a real number" : "an integer", Py_TYPE(item)->tp_name);
            return -1;
        }
    }
    PyObject *kw = Py_BuildValue("{sO}", "dtype", s->dtype);
    if (kw == NULL)
        return -1;
    PyObject *targs = PyTuple_Pack(1, obj);
    if (targs == NULL) {
        Py_DECREF(kw);
        return -1;
    }
    PyObject *value = PyObject_Call(p->void_type, targs, kw);
    Py_DECREF(targs);
    Py_DECREF(kw);
    if (value == NULL) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyObject *why = NULL, *type, *tb;
            PyErr_Fetch(&type, &why, &tb);
            cn_arg_error(PyExc_OverflowError, p, i, "a component is out of range for dtype %S: %S", s->dtype,
                         why ? why : Py_None);
            Py_XDECREF(type);
            Py_XDECREF(why);
            Py_XDECREF(tb);
        }
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(value);
        return -1;
    }
    int rc = 0;
    if (view.len != s->size) {
        cn_arg_error(PyExc_TypeError, p, i, "the vector value has %zd bytes, expected %zd", view.len, s->size);
        rc = -1;
    }
    else {
        memcpy(out, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    Py_DECREF(value);
    return rc;
}

CN_INTERNAL int cn_pack_struct(plan_t *p, Py_ssize_t i, PyObject *obj, unsigned char *out, const flat_t *f,
                               int host)
{
    slot_t *s = &p->slots[i];
    if (s->ndim > 0 && PyTuple_Check(obj))
        return pack_vector_tuple(p, i, obj, out);
    if (Py_TYPE(obj) != (PyTypeObject *)p->void_type) {
        if (s->ndim > 0)
            cn_arg_error(PyExc_TypeError, p, i,
                         "expected a tuple of %d numbers or a structured scalar of dtype %S, got %.200s", s->ndim,
                         s->dtype, Py_TYPE(obj)->tp_name);
        else
            cn_arg_error(PyExc_TypeError, p, i,
                         "expected a packed value of the struct (a CudaStructValue or CudaStructArguments), got %.200s",
                         Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *dt = PyObject_GetAttr(obj, cn_str.dtype);
    if (dt == NULL)
        return -1;
    int eq = cn_dtype_equal(dt, s->dtype);
    if (eq <= 0) {
        if (eq == 0)
            cn_arg_error(PyExc_TypeError, p, i, "the packed value has dtype %S, expected the struct's %S", dt, s->dtype);
        Py_DECREF(dt);
        return -1;
    }
    Py_DECREF(dt);
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return -1;
    int rc = 0;
    if (view.len != s->size) {
        cn_arg_error(PyExc_TypeError, p, i, "the packed value has %zd bytes, expected %zd", view.len, s->size);
        rc = -1;
    }
    else {
        memcpy(out, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return rc;
}
