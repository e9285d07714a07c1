"""List the public functions and methods of cunumpy that lack type annotations.

The public API is what a user's type checker sees through ``py.typed``: the names in
``__all__`` of cunumpy and of its public submodules (and of ``cunumpy._emulation``, whose
names ``cunumpy.kernel_testing`` re-exports), and the public methods of the public classes
among them. A function counts as annotated when its return and every parameter
(``self``/``cls`` aside) carry an annotation. Exit status 1 when any is missing (``make lint``
runs it so: the threshold is zero); ``--count`` only prints the count.

    python tools/check_annotations.py [--count]
"""

from __future__ import annotations

import importlib
import inspect
import sys

MODULES = [
    "cunumpy",
    "cunumpy._emulation",
    "cunumpy.algorithms",
    "cunumpy.arguments",
    "cunumpy.cuda",
    "cunumpy.integrate",
    "cunumpy.kernels",
    "cunumpy.kernel_testing",
    "cunumpy.memory",
    "cunumpy.mpi",
    "cunumpy.optimize",
    "cunumpy.petsc",
    "cunumpy.profiling",
    "cunumpy.rng",
    "cunumpy.scipy",
    "cunumpy.threads",
    "cunumpy.xp",
]


def _missing(function) -> list[str]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a text signature
        return []
    missing = [
        name
        for i, (name, p) in enumerate(signature.parameters.items())
        if p.annotation is inspect.Parameter.empty and not (i == 0 and name in ("self", "cls"))
    ]
    if signature.return_annotation is inspect.Signature.empty and function.__name__ != "__init__":
        missing.append("return")
    return missing


def _own_functions(module_name: str):
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name, None)
        if inspect.isfunction(obj) and obj.__module__.startswith("cunumpy"):
            yield f"{module_name}.{name}", obj
        elif inspect.isclass(obj) and obj.__module__.startswith("cunumpy"):
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    yield f"{module_name}.{name}.{attr}", value


def main() -> int:
    seen: set[int] = set()
    problems = []
    total = 0
    for module_name in MODULES:
        for qualname, function in _own_functions(module_name):
            if id(function) in seen:
                continue
            seen.add(id(function))
            total += 1
            missing = _missing(function)
            if missing:
                problems.append(f"{qualname}: {', '.join(missing)}")
    if problems and "--count" not in sys.argv:
        print("\n".join(problems))
    print(f"check_annotations: {len(problems)} of {total} public functions and methods lack annotations")
    return 1 if problems and "--count" not in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
