"""Which NumPy names the fake ``cupy`` namespace exposes, and how each is wrapped.

The fake is built from NumPy by rule rather than by hand: every public NumPy function,
ufunc and scalar type becomes a strict wrapper unless it is listed here as absent from
CuPy. The lists are data so that they can be checked against a CuPy release in one place.

The names are checked against CuPy 14.2.0 (``tests/data/cupy_names.json``, written by
``tests/data/make_cupy_names.py``; ``tests/unit/test_fake_cupy_names.py`` asserts that the
fake exposes no name CuPy lacks). ``MIN_CUPY_VERSION`` is 14.0.0: a name that CuPy added in
14.1 or 14.2 would pass these checks but be missing on a minimum installation.
"""

from __future__ import annotations

#: NumPy names CuPy 14.2 does not provide (datetime, masked and record arrays,
#: object/string dtypes, NumPy-only helpers, and functions NumPy 2 added that CuPy lacks).
#: ``poly1d`` exists in CuPy but is CuPy's own class holding device coefficients; NumPy's
#: cannot stand in for it, so the fake leaves it out.
ABSENT_FROM_CUPY = frozenset(
    [
        "False_",
        "True_",
        "ScalarType",
        "sctypeDict",
        "typecodes",
        "little_endian",
        "asmatrix",
        "bmat",
        "matrix",
        "memmap",
        "recarray",
        "record",
        "busday_count",
        "busday_offset",
        "busdaycalendar",
        "is_busday",
        "datetime_as_string",
        "datetime_data",
        "datetime64",
        "timedelta64",
        "isnat",
        "einsum_path",
        "frompyfunc",
        "fromregex",
        "getbufsize",
        "setbufsize",
        "geterr",
        "seterr",
        "geterrcall",
        "seterrcall",
        "errstate",
        "get_include",
        "info",
        "nested_iters",
        "nditer",
        "ndenumerate",
        "show_runtime",
        "test",
        "str_",
        "bytes_",
        "void",
        "object_",
        "character",
        "flexible",
        "clongdouble",
        "complex256",
        "float128",
        "longdouble",
        "poly1d",
        "block",
        "geomspace",
        "histogram_bin_edges",
        "insert",
        "nanpercentile",
        "nanquantile",
        "polyder",
        "polydiv",
        "polyint",
        "spacing",
        "unstack",
        "matvec",
        "vecdot",
        "vecmat",
        "char",
        "core",
        "ctypeslib",
        "dtypes",
        "emath",
        "f2py",
        "ma",
        "polynomial",
        "rec",
        "strings",
        "typing",
    ]
)

#: NumPy 1.x names CuPy 14.2 still has and NumPy 2 dropped: fake name -> NumPy name (a
#: constant, dtype or function the fake forwards to; ``np.exceptions`` for the warnings).
LEGACY_ALIASES = {
    "Inf": "inf",
    "Infinity": "inf",
    "infty": "inf",
    "PINF": "inf",
    "NAN": "nan",
    "NaN": "nan",
    "cfloat": "complex128",
    "complex_": "complex128",
    "float_": "float64",
    "singlecomplex": "complex64",
    "alltrue": "all",
    "sometrue": "any",
    "product": "prod",
    "cumproduct": "cumprod",
    "round_": "round",
    "in1d": "isin",
    "trapz": "trapezoid",
    "AxisError": "exceptions.AxisError",
    "ComplexWarning": "exceptions.ComplexWarning",
    "ModuleDeprecationWarning": "exceptions.ModuleDeprecationWarning",
    "RankWarning": "exceptions.RankWarning",
    "TooHardError": "exceptions.TooHardError",
    "VisibleDeprecationWarning": "exceptions.VisibleDeprecationWarning",
}

#: Creation functions: host data (lists, NumPy arrays, scalars) is accepted and copied.
CREATION = frozenset(
    [
        "array",
        "asarray",
        "asanyarray",
        "ascontiguousarray",
        "asfortranarray",
        "zeros",
        "ones",
        "empty",
        "full",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "identity",
        "tri",
        "indices",
        "diag_indices",
        "tril_indices",
        "triu_indices",
        "bartlett",
        "blackman",
        "hamming",
        "hanning",
        "kaiser",
        "frombuffer",
        "fromfile",
        "fromstring",
        "fromiter",
        "loadtxt",
        "genfromtxt",
        "load",
        "fromfunction",
    ]
)

#: Routines CuPy documents as taking array-likes (besides the creation functions).
ARRAY_LIKE_ROUTINES = frozenset(["diff", "unique", "roll", "cumsum"])

#: Parameters CuPy converts with ``cupy.asarray``/``cupy.array`` (host data and lists are
#: copied to the device), keyed by the fake function's qualified name. Read from CuPy
#: 14.2's Python sources; the other parameters of these functions follow the usual rules.
HOST_DATA_PARAMETERS = {
    "cupy.tril": frozenset({"m"}),
    "cupy.triu": frozenset({"m"}),
    "cupy.vander": frozenset({"x"}),
    "cupy.cross": frozenset({"a", "b"}),
    "cupy.linalg.cross": frozenset({"x1", "x2", "a", "b"}),
    "cupy.gradient": frozenset({"f"}),
    "cupy.unwrap": frozenset({"p"}),
    "cupy.real": frozenset({"val"}),
    "cupy.imag": frozenset({"val"}),
    "cupy.around": frozenset({"a"}),
    "cupy.round": frozenset({"a"}),
    "cupy.round_": frozenset({"a"}),
    "cupy.isclose": frozenset({"a", "b"}),
    "cupy.extract": frozenset({"condition"}),
    "cupy.cov": frozenset({"m", "y"}),
    "cupy.average": frozenset({"a", "weights"}),
    "cupy.require": frozenset({"a"}),
    "cupy.delete": frozenset({"obj"}),
    "cupy.append": frozenset({"arr", "values"}),
    "cupy.resize": frozenset({"a"}),
    "cupy.tile": frozenset({"A"}),
    "cupy.diag": frozenset({"v"}),
    "cupy.asarray_chkfinite": frozenset({"a"}),
    "cupy.fft.fftshift": frozenset({"x"}),
    "cupy.fft.ifftshift": frozenset({"x"}),
}

#: Functions whose refusal of host data is not the usual TypeError in CuPy (an explicit
#: check): qualified name -> exception. ``cupy.linalg`` checks with ``_assert_cupy_array``,
#: which raises ``LinAlgError`` (a ValueError).
REFUSAL_EXCEPTIONS = {
    "cupy.delete": "ValueError",
    "cupy.histogram": "ValueError",
    **{
        f"cupy.linalg.{n}": "LinAlgError"
        for n in (["cholesky", "qr", "svd", "solve", "lstsq", "inv", "pinv", "tensorinv", "matrix_power", "cond"])
    },
}

#: Functions CuPy implements as ``a.<method>(...)`` on their first argument (CuPy 14.2's
#: Python sources): a list there fails with AttributeError in CuPy; the fake's refusal is
#: an exception that is both a TypeError and an AttributeError.
METHOD_DELEGATING = frozenset(
    [
        "all",
        "amax",
        "amin",
        "any",
        "argmax",
        "argmin",
        "argpartition",
        "argsort",
        "choose",
        "clip",
        "diagonal",
        "dot",
        "matrix_transpose",
        "mean",
        "nanmean",
        "nanstd",
        "nanvar",
        "nonzero",
        "prod",
        "ptp",
        "ravel",
        "repeat",
        "reshape",
        "sort_complex",
        "squeeze",
        "std",
        "sum",
        "swapaxes",
        "trace",
        "transpose",
        "var",
    ]
)

#: Functions that take any object (dtypes, shapes, scalars) and only see through fake
#: arrays; no strictness applies.
PERMISSIVE = frozenset(
    [
        "result_type",
        "can_cast",
        "promote_types",
        "min_scalar_type",
        "common_type",
        "issubdtype",
        "isdtype",
        "mintypecode",
        "typename",
        "binary_repr",
        "base_repr",
        "broadcast_shapes",
        "isscalar",
        "ndim",
        "shape",
        "size",
        "iscomplexobj",
        "isrealobj",
        "may_share_memory",
        "shares_memory",
        "iterable",
        "format_float_positional",
        "format_float_scientific",
    ]
)

#: Parameter names that hold one array: fake arrays are unwrapped, host arrays with
#: ``ndim > 0`` and lists are refused.
ARRAY_PARAMETERS = frozenset(
    [
        "a",
        "a1",
        "a2",
        "ar",
        "ar1",
        "ar2",
        "arr",
        "array",
        "ary",
        "b",
        "condition",
        "element",
        "test_elements",
        "x",
        "x1",
        "x2",
        "y",
        "xp",
        "fp",
        "v",
        "m",
        "p",
        "values",
        "vals",
        "val",
        "ind",
        "indices",
        "mask",
        "weights",
        "aweights",
        "fweights",
        "bins",
        "src",
        "dst",
        "sample",
        "filt",
        "f",
        "z",
        "a_min",
        "a_max",
        "to_begin",
        "to_end",
        "out",
        "where",
    ]
)

#: Parameter names that hold a sequence of arrays (each item follows the array rule).
SEQUENCE_PARAMETERS = frozenset(["arrays", "tup", "choices", "condlist", "choicelist", "keys", "multi_index"])

#: ``*args`` names whose items are arrays.
VARIADIC_ARRAY_PARAMETERS = frozenset(["arys", "xi", "operands"])

#: Functions whose ``*args`` items are arrays.
VARIADIC_ARRAY_FUNCTIONS = frozenset(["broadcast_arrays", "ix_"])

#: NumPy returns a Python bool where CuPy returns a 0-d device array.
DEVICE_BOOL_RESULT = frozenset(["allclose", "array_equiv"])

#: ``cupy.linalg`` functions (CuPy 14.2; ``LinAlgError`` is added as NumPy's class).
LINALG = [
    "cholesky",
    "qr",
    "svd",
    "eigh",
    "eigvalsh",
    "eig",
    "eigvals",
    "norm",
    "cond",
    "det",
    "matrix_rank",
    "slogdet",
    "solve",
    "tensorsolve",
    "lstsq",
    "inv",
    "pinv",
    "tensorinv",
    "matrix_power",
    "cross",
    "matmul",
    "matrix_transpose",
]

#: ``cupy.fft`` (CuPy 14.2).
FFT = [
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

#: ``cupy.random`` legacy functions forwarded to one global RandomState.
RANDOM_FUNCTIONS = [
    "beta",
    "binomial",
    "chisquare",
    "choice",
    "dirichlet",
    "exponential",
    "f",
    "gamma",
    "geometric",
    "gumbel",
    "hypergeometric",
    "laplace",
    "logistic",
    "lognormal",
    "logseries",
    "multinomial",
    "multivariate_normal",
    "negative_binomial",
    "noncentral_chisquare",
    "noncentral_f",
    "normal",
    "pareto",
    "permutation",
    "poisson",
    "power",
    "rand",
    "randint",
    "randn",
    "random",
    "random_integers",
    "random_sample",
    "ranf",
    "rayleigh",
    "sample",
    "bytes",
    "shuffle",
    "standard_cauchy",
    "standard_exponential",
    "standard_gamma",
    "standard_normal",
    "standard_t",
    "triangular",
    "uniform",
    "vonmises",
    "wald",
    "weibull",
    "zipf",
]

#: ``cupy.random.RandomState`` methods: CuPy 14.2's RandomState lacks ``bytes``,
#: ``multinomial``, ``random``, ``random_integers``, ``ranf`` and ``sample`` (module-level
#: functions only) and has ``tomaxint``.
RANDOM_STATE_METHODS = [
    n for n in RANDOM_FUNCTIONS if n not in ("bytes", "multinomial", "random", "random_integers", "ranf", "sample")
] + ["tomaxint"]

#: ``cupy.random.Generator`` methods (CuPy 14.2 has no ``normal``, ``choice``,
#: ``permutation`` or ``shuffle`` on a Generator: use ``standard_normal``/``integers``).
GENERATOR_METHODS = [
    "beta",
    "binomial",
    "chisquare",
    "dirichlet",
    "exponential",
    "f",
    "gamma",
    "geometric",
    "hypergeometric",
    "integers",
    "logseries",
    "poisson",
    "power",
    "random",
    "standard_exponential",
    "standard_gamma",
    "standard_normal",
    "uniform",
]

#: ``cupy.exceptions`` (NumPy's classes; CuPy 14.2 lacks ``DTypePromotionError``).
EXCEPTIONS = [
    "AxisError",
    "ComplexWarning",
    "ModuleDeprecationWarning",
    "RankWarning",
    "TooHardError",
    "VisibleDeprecationWarning",
]

#: ``cupy.testing`` assertion helpers (NumPy's, taking device or host arrays).
TESTING = [
    "assert_allclose",
    "assert_array_almost_equal",
    "assert_array_almost_equal_nulp",
    "assert_array_max_ulp",
    "assert_array_equal",
    "assert_array_less",
]
