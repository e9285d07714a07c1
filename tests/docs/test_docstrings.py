"""Every public function and class of cunumpy has a numpydoc docstring, with the sections
that apply to it, and every public method and property has at least a summary line.

"Public" is what the API reference documents: the names in ``__all__`` of each public
module (docs/api/), defined in cunumpy itself. The NumPy/CuPy names forwarded at the top
level are the backends' own, and the launcher helpers re-exported by ``cunumpy.mpi`` are
documented by their package, maybempi.

Sections, per callable:
- Parameters: names every parameter of the signature (a class: of its constructor), and
  only those (``*arrays`` and ``**options`` by that spelling);
- Returns (or Yields): a function with a ``return <value>`` (a generator: ``yield``);
- Raises: names every exception class the function (a class: its constructor) raises
  itself with ``raise Name(...)``.
"""

import ast
import importlib
import inspect
import textwrap

import pytest

docscrape = pytest.importorskip("numpydoc.docscrape", reason="needs the docs extra (make test-docs)")

MODULES = [
    "cunumpy",
    "cunumpy.kernels",
    "cunumpy.arguments",
    "cunumpy.cuda",
    "cunumpy.memory",
    "cunumpy.mpi",
    "cunumpy.profiling",
    "cunumpy.rng",
    "cunumpy.algorithms",
    "cunumpy.optimize",
    "cunumpy.integrate",
    "cunumpy.scipy",
    "cunumpy.petsc",
    "cunumpy.threads",
    "cunumpy.kernel_testing",
    "cunumpy.xp",
]


def _target(obj):
    """The function behind a pytest fixture definition (``kernel_testing.backend``)."""
    for attr in ("_get_wrapped_function", "_fixture_function"):
        inner = getattr(obj, attr, None)
        if callable(inner) and attr == "_get_wrapped_function":
            return inner()
        if inner is not None:
            return inner
    return getattr(obj, "__wrapped__", obj) if type(obj).__name__.startswith("Fixture") else obj


def public_objects():
    """(qualified name, object) for each public function and class, each object once."""
    seen, out = set(), []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = _target(getattr(module, name))
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if not (getattr(obj, "__module__", "") or "").startswith("cunumpy"):
                continue  # forwarded NumPy/CuPy names; maybempi's launcher helpers
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            out.append((f"{module_name}.{name}", obj))
    return out


PUBLIC = public_objects()


def _doc(obj):
    text = inspect.getdoc(obj) or ""
    return docscrape.NumpyDocString(text), text


def _signature_names(obj):
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__") or next(
            (c.__dict__["__init__"] for c in obj.__mro__ if "__init__" in c.__dict__ and c is not object), None
        )
        if init is None or not inspect.isfunction(init):
            return []
        target, skip_first = init, True
    else:
        target, skip_first = obj, False
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return []
    if skip_first and params:
        params = params[1:]
    names = []
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            names.append("*" + p.name)
        elif p.kind is p.VAR_KEYWORD:
            names.append("**" + p.name)
        else:
            names.append(p.name)
    return names


def _documented_names(doc):
    names = []
    for entry in doc["Parameters"] + doc["Other Parameters"]:
        for name in entry.name.split(","):
            name = name.strip()
            if name:
                names.append(name)
    return names


class _BodyScan(ast.NodeVisitor):
    """Returns with a value, yields and raised exception names of one function body,
    nested functions and classes left out."""

    def __init__(self):
        self.returns = self.yields = False
        self.raises = set()
        self.depth = 0

    def _nested(self, node):
        if self.depth == 0:
            self.depth += 1
            self.generic_visit(node)
            self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _nested

    def visit_Lambda(self, node):
        pass

    def visit_ClassDef(self, node):
        pass

    def visit_Return(self, node):
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            self.returns = True

    def visit_Yield(self, node):
        self.yields = True

    visit_YieldFrom = visit_Yield

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            exc = exc.func
        if isinstance(exc, ast.Name) and exc.id[:1].isupper():
            self.raises.add(exc.id)
        self.generic_visit(node)


def _scan(function):
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    scan = _BodyScan()
    scan.visit(tree.body[0])
    return scan


def problems(obj):
    """What the docstring of ``obj`` lacks, as a list of sentences."""
    doc, text = _doc(obj)
    if not text.strip():
        return ["no docstring"]
    out = []
    if not doc["Summary"]:
        out.append("no summary line")
    expected = _signature_names(obj)
    documented = _documented_names(doc)
    missing = [n for n in expected if n not in documented and n.lstrip("*") not in documented]
    extra = [n for n in documented if n not in expected and "*" + n not in expected and "**" + n not in expected]
    if missing:
        out.append(f"Parameters does not describe {', '.join(missing)}")
    if extra:
        out.append(f"Parameters describes {', '.join(extra)}, which the signature lacks")
    function = obj
    if inspect.isclass(obj):
        function = obj.__dict__.get("__init__")
    scan = _scan(function) if inspect.isfunction(function) else None
    if scan is not None:
        if not inspect.isclass(obj):
            if scan.yields and not (doc["Yields"] or doc["Returns"]):
                out.append("no Yields section (it is a generator)")
            elif scan.returns and not scan.yields and not doc["Returns"]:
                out.append("no Returns section (it returns a value)")
        raises_text = " ".join(entry.type + " " + entry.name for entry in doc["Raises"])
        unnamed = sorted(name for name in scan.raises if name not in raises_text)
        if unnamed:
            out.append(f"Raises does not name {', '.join(unnamed)}")
    return out


@pytest.mark.parametrize("name,obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_public_callable_has_a_numpydoc_docstring(name, obj):
    found = problems(obj)
    assert not found, f"{name}: " + "; ".join(found)


def _members(cls):
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            yield name, value.__doc__
        elif isinstance(value, (staticmethod, classmethod)):
            yield name, value.__func__.__doc__
        elif inspect.isfunction(value) or type(value).__name__ in (
            "getset_descriptor",
            "member_descriptor",
            "method_descriptor",
        ):
            yield name, value.__doc__


MEMBERS = [(f"{name}.{member}", doc) for name, obj in PUBLIC if inspect.isclass(obj) for member, doc in _members(obj)]


@pytest.mark.parametrize("name,doc", MEMBERS, ids=[n for n, _ in MEMBERS])
def test_public_method_and_property_has_a_summary(name, doc):
    assert doc and doc.strip(), f"{name} has no docstring"


def test_the_check_finds_what_it_should():
    def bad(a, b):
        if a:
            raise ValueError("a")
        return a + b

    def good(a, *rest):
        """Add.

        Parameters
        ----------
        a : int
            First.
        *rest : int
            More.

        Returns
        -------
        int
            The sum.

        Raises
        ------
        ValueError
            When ``a`` is zero.
        """
        if not a:
            raise ValueError("a")
        return a + sum(rest)

    bad.__doc__ = "Add.\n\nParameters\n----------\na : int\n    First.\nc : int\n    None.\n"
    found = problems(bad)
    assert any("does not describe b" in p for p in found)
    assert any("describes c" in p for p in found)
    assert any("Returns" in p for p in found)
    assert any("ValueError" in p for p in found)
    assert problems(good) == []


def test_every_public_name_has_one_entry_in_the_built_reference(built_site):
    """The API pages list every public name of every module (data and markers too)."""
    ids = set()
    for page in (built_site / "api").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        ids.update(_ids(text))
    missing = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            owner = getattr(_target(obj), "__module__", "") or ""
            if module_name == "cunumpy" and not owner.startswith("cunumpy") and name not in ("MIN_CUPY_VERSION",):
                continue  # forwarded NumPy/CuPy names
            if f"{module_name}.{name}" in ids:
                continue
            # cunumpy.xp re-exports the top-level functions: one entry, at the top level.
            if (
                module_name == "cunumpy.xp"
                and f"cunumpy.{name}" in ids
                and getattr(importlib.import_module("cunumpy"), name, None) is obj
            ):
                continue
            missing.append(f"{module_name}.{name}")
    assert not missing, f"not in the API reference: {', '.join(missing)}"


def _ids(text):
    import re

    return re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', text)
