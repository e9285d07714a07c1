"""Write ``tests/data/cupy_names.json``: the public names of a real CuPy release.

Run it with a Python that has the **real** CuPy installed (a GPU is not needed: only
imports, ``dir()`` and ``inspect`` are used), e.g.::

    /tmp/cupyenv/bin/python tests/data/make_cupy_names.py --cupy-source /path/to/cupy-14.2.0

``make fidelity`` runs it in ``build/venv-cupy`` (the real CuPy of ``make test-real-cupy``),
and ``tests/realcupy/test_real_cupy_surface.py`` checks there that the committed file is what
it writes (all but ``device_properties``, which needs the CuPy source tree). The unit tests
(``tests/unit/test_fake_cupy_names.py``) only read the JSON, where no real CuPy is installed. The file covers just the modules and classes the fake CuPy
(``cunumpy._fake_cupy``) provides, so that it stays small:

* ``modules``: public names (no leading underscore; ``from __future__`` features and
  foreign modules such as ``warnings`` left out; names a module ``__getattr__`` provides
  lazily, see ``LAZY``, added) of each module; ``missing_modules``:
  modules that do not exist in this release (e.g. ``cupyx.scipy.integrate``);
* ``classes``: public attributes of the classes the fake imitates;
* ``signatures``: the parameters of the callables cunumpy calls on the device path
  (``inspect.signature``, else the signature line Cython embeds in the docstring);
* ``device_attributes``: ``Device.attributes`` keys with their ``cudaDevAttr`` codes
  (``runtime.cudaDevAttr<Key>``);
* ``device_properties``: keys of ``runtime.getDeviceProperties()`` -- read from a GPU when
  one is usable, else from ``cupy_backends/cuda/api/runtime.pyx`` of the CuPy source tree
  given with ``--cupy-source`` (entries for HIP builds and CUDA < 13 left out).

The names are those of the CuPy release that ran the script (14.2.0 for the committed
file), not of ``MIN_CUPY_VERSION``: names added after the minimum would not be caught.
"""

from __future__ import annotations
import __future__

import argparse
import importlib
import inspect
import json
import pathlib
import re
import sys
import types

#: Modules the fake provides (``cupyx.scipy.integrate``/``optimize`` are probed too: they
#: are absent in CuPy 14, and the fake must not provide them either).
MODULES = [
    "cupy",
    "cupy.linalg",
    "cupy.fft",
    "cupy.fft.config",
    "cupy.random",
    "cupy.testing",
    "cupy.lib",
    "cupy.lib.stride_tricks",
    "cupy.exceptions",
    "cupy.cuda",
    "cupy.cuda.runtime",
    "cupy.cuda.driver",
    "cupy.cuda.memory",
    "cupy.cuda.pinned_memory",
    "cupy.cuda.device",
    "cupy.cuda.stream",
    "cupy.cuda.nvtx",
    "cupyx",
    "cupyx.scipy",
    "cupyx.scipy.special",
    "cupyx.scipy.linalg",
    "cupyx.scipy.interpolate",
    "cupyx.scipy.signal",
    "cupyx.scipy.ndimage",
    "cupyx.scipy.fft",
    "cupyx.scipy.stats",
    "cupyx.scipy.spatial",
    "cupyx.scipy.spatial.distance",
    "cupyx.scipy.sparse",
    "cupyx.scipy.sparse.linalg",
    "cupyx.scipy.sparse.csgraph",
    "cupyx.scipy.fftpack",
    "cupyx.scipy.integrate",
    "cupyx.scipy.optimize",
]

#: Names that modules with a ``__getattr__`` provide lazily (``dir()`` misses them).
LAZY = {
    "cupy.random": ["Generator"],
    "cupyx.scipy": "_submodules",  # the attribute of cupyx.scipy listing its subpackages
}

#: Classes the fake imitates.
CLASSES = [
    "cupy.ndarray",
    "cupy.random.Generator",
    "cupy.random.RandomState",
    "cupy.random.BitGenerator",
    "cupy.cuda.Device",
    "cupy.cuda.Stream",
    "cupy.cuda.ExternalStream",
    "cupy.cuda.Event",
    "cupy.cuda.Memory",
    "cupy.cuda.MemoryPointer",
    "cupy.cuda.MemoryPool",
    "cupy.cuda.PinnedMemoryPool",
]

#: Callables cunumpy (outside the fake) calls on the device path, and a few neighbours.
SIGNATURES = [
    "cupy.array",
    "cupy.asarray",
    "cupy.ascontiguousarray",
    "cupy.zeros",
    "cupy.empty",
    "cupy.ndarray.get",
    "cupy.ndarray.set",
    "cupy.ndarray.fill",
    "cupy.get_default_memory_pool",
    "cupy.get_default_pinned_memory_pool",
    "cupy.cuda.Device",
    "cupy.cuda.Device.use",
    "cupy.cuda.Device.synchronize",
    "cupy.cuda.Stream",
    "cupy.cuda.Stream.record",
    "cupy.cuda.Stream.wait_event",
    "cupy.cuda.Stream.synchronize",
    "cupy.cuda.Stream.use",
    "cupy.cuda.ExternalStream",
    "cupy.cuda.Event",
    "cupy.cuda.Event.record",
    "cupy.cuda.Event.synchronize",
    "cupy.cuda.get_current_stream",
    "cupy.cuda.get_elapsed_time",
    "cupy.cuda.alloc_pinned_memory",
    "cupy.cuda.alloc",
    "cupy.cuda.MemoryPool.free_all_blocks",
    "cupy.cuda.MemoryPool.set_limit",
    "cupy.cuda.PinnedMemoryPool.free_all_blocks",
    "cupy.cuda.nvtx.RangePush",
    "cupy.cuda.nvtx.RangePop",
    "cupy.cuda.nvtx.RangePushC",
    "cupy.cuda.nvtx.Mark",
    "cupy.cuda.nvtx.MarkC",
    "cupy.cuda.runtime.getDevice",
    "cupy.cuda.runtime.setDevice",
    "cupy.cuda.runtime.getDeviceCount",
    "cupy.cuda.runtime.memGetInfo",
    "cupy.cuda.runtime.getDeviceProperties",
    "cupy.cuda.runtime.deviceGetAttribute",
    "cupy.cuda.runtime.driverGetVersion",
    "cupy.cuda.runtime.runtimeGetVersion",
    "cupy.cuda.runtime.deviceSynchronize",
    "cupyx.empty_pinned",
    "cupyx.zeros_pinned",
    "cupyx.empty_like_pinned",
    "cupyx.zeros_like_pinned",
    "cupy.random.default_rng",
]


def _foreign(owner: str, value) -> bool:
    """``from __future__`` features and modules from outside CuPy (``warnings`` …)."""
    if isinstance(value, __future__._Feature):
        return True
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] not in ("cupy", "cupyx", "cupy_backends")
    return False


def public_names(owner: str, obj) -> list[str]:
    names = []
    for name in dir(obj):
        if name.startswith("_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001 - a property that needs a device, say
            names.append(name)
            continue
        if not _foreign(owner, value):
            names.append(name)
    return sorted(names)


def resolve(path: str):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


_EMBEDDED = re.compile(r"^\s*[\w.]+\((.*)\)(\s*->.*)?$")


def parameters(obj) -> dict:
    """``{"source": ..., "parameters": [...]}``; ``self`` is dropped."""
    try:
        signature = inspect.signature(obj)
        names = [p.name for p in signature.parameters.values() if p.name != "self"]
        return {"source": "inspect", "text": str(signature), "parameters": names}
    except (TypeError, ValueError):
        pass
    doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    match = _EMBEDDED.match(doc[0]) if doc else None
    if match is None:
        return {"source": None, "text": None, "parameters": None}
    names = []
    for item in filter(None, (s.strip() for s in match.group(1).split(","))):
        item = item.split("=")[0].strip().split()[-1].lstrip("*")
        if item not in ("self", "/") and item:
            names.append(item)
    return {"source": "docstring", "text": doc[0].strip(), "parameters": names}


def device_properties(source: str | None):
    import cupy

    try:
        keys = sorted(cupy.cuda.runtime.getDeviceProperties(0))
        return {"source": "getDeviceProperties(0)", "keys": keys}
    except Exception as exc:  # noqa: BLE001 - the failure is recorded in the output
        failure = f"{type(exc).__name__}: {exc}"
    if source is None:
        return {"source": None, "keys": None, "error": failure}
    text = (pathlib.Path(source) / "cupy_backends/cuda/api/runtime.pyx").read_text()
    body = text[text.index("cpdef getDeviceProperties") :]
    body = body[: body.index("\ncpdef ", 1)]
    body = body.split("IF CUPY_HIP_VERSION > 0:  # HIP-only props")[0]
    cuda12_only = re.search(r"if 0 < CUPY_CUDA_VERSION < 13000:(.*?)elif", body, re.S).group(1)
    keys = set(re.findall(r"^\s+'(\w+)':", body, re.M)) | set(re.findall(r"properties\['(\w+)'\]", body))
    keys -= set(re.findall(r"properties\['(\w+)'\]", cuda12_only)) - set(
        re.findall(r"properties\['(\w+)'\]", body.split("elif CUPY_CUDA_VERSION >= 13000:")[1])
    )
    return {
        "source": f"cupy_backends/cuda/api/runtime.pyx of the CuPy {cupy.__version__} sources (no usable GPU: {failure})",
        "keys": sorted(keys),
    }


def _dump(data: dict) -> str:
    """JSON with one line per module/class/signature (small, and diffs stay readable)."""
    lines = ["{"]
    items = list(data.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, dict) and value:
            lines.append(f" {json.dumps(key)}: {{")
            entries = list(value.items())
            for j, (k, v) in enumerate(entries):
                lines.append(f"  {json.dumps(k)}: {json.dumps(v)}" + ("," if j < len(entries) - 1 else ""))
            lines.append(" }" + comma)
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cupy-source", help="CuPy source tree of the same release (for device_properties)")
    parser.add_argument("--output", default=str(pathlib.Path(__file__).with_name("cupy_names.json")))
    args = parser.parse_args()

    import cupy

    if getattr(cupy, "__cunumpy_fake__", False):
        sys.exit("make_cupy_names.py needs the real CuPy, not cunumpy's fake")
    data = {
        "cupy_version": cupy.__version__,
        "generated_by": "tests/data/make_cupy_names.py",
        "modules": {},
        "missing_modules": {},
        "classes": {},
        "signatures": {},
    }
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            # ``cupy.cuda.driver`` is an attribute (``cupy_backends``), not importable.
            parent, _, child = name.rpartition(".")
            module = getattr(sys.modules.get(parent), child, None)
            if not isinstance(module, types.ModuleType):
                data["missing_modules"][name] = f"{type(exc).__name__}: {exc}"
                continue
        names = set(public_names(name, module))
        lazy = LAZY.get(name, [])
        for extra in getattr(module, lazy) if isinstance(lazy, str) else lazy:
            if hasattr(module, extra):
                names.add(extra)
        data["modules"][name] = sorted(names)
    for name in CLASSES:
        data["classes"][name] = public_names(name, resolve(name))
    for name in SIGNATURES:
        data["signatures"][name] = parameters(resolve(name))
    runtime = cupy.cuda.runtime
    data["device_attributes"] = {
        k[len("cudaDevAttr") :]: int(getattr(runtime, k)) for k in sorted(dir(runtime)) if k.startswith("cudaDevAttr")
    }
    data["device_properties"] = device_properties(args.cupy_source)
    output = pathlib.Path(args.output)
    if data["device_properties"]["keys"] is None and output.exists():
        # no GPU and no source tree here: keep the keys the committed file has
        previous = json.loads(output.read_text()).get("device_properties") or {}
        if previous.get("keys"):
            data["device_properties"] = previous
    pathlib.Path(args.output).write_text(_dump(data))
    print(f"wrote {args.output} (CuPy {cupy.__version__})")


if __name__ == "__main__":
    main()
