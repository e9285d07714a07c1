"""The type stub of the C extension (_core.pyi) is installed and names exactly what the
extension defines, so that type checkers (mypy in `make lint`, and users' through py.typed)
neither miss a function nor accept one that does not exist."""

import ast
import inspect
from pathlib import Path

import pytest

import cunumpy
from cunumpy import _native


def _stub_names():
    stub = Path(cunumpy.__file__).with_name("_core.pyi")
    assert stub.is_file(), "_core.pyi is not installed beside the package"
    tree = ast.parse(stub.read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


@pytest.mark.skipif(not _native.HAVE_C_CORE, reason="the C extension is not built")
def test_stub_names_what_the_extension_defines():
    module = _native.core
    defined = {n for n in dir(module) if not n.startswith("__")}
    assert set(_stub_names()) == defined


@pytest.mark.skipif(not _native.HAVE_C_CORE, reason="the C extension is not built")
def test_stub_parameters_match_the_text_signatures():
    module = _native.core
    for name, node in _stub_names().items():
        obj = getattr(module, name)
        if not isinstance(node, ast.FunctionDef) or getattr(obj, "__text_signature__", None) is None:
            continue
        wanted = list(inspect.signature(obj).parameters)
        args = node.args
        got = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        assert got == wanted, name
