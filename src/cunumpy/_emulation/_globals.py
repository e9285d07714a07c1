"""``__constant__`` and ``__device__`` variables under the CPU emulation.

The translation unit of a library exports one accessor per variable the source declares
(``cunumpy_emu_global_<name>``: its address and ``sizeof``), so the memory of a variable is
the library's own, as a CUDA module's is. Values a program sets with
``CudaKernel.set_global`` are kept on the kernel (with a generation number) and copied into a
library the first time a launch of that kernel uses it after the value was set; a library
keeps what kernels write into its variables between launches, as a CUDA module does.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import numpy as np

from ..cuda._globals import CudaGlobal, declared_globals

ACCESSOR_PREFIX = "cunumpy_emu_global_"

_ACCESSOR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong))

_lock = threading.Lock()
#: library path -> {variable name: generation of the value copied in}
_applied: dict = {}
#: kernel -> the library of its last emulated launch (get_global reads there)
_last_library: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def declarations_of(kernel) -> dict[str, CudaGlobal]:
    """The declared globals of a kernel's source and headers (cached on the kernel)."""
    found = getattr(kernel, "_global_declarations", None)
    if found is None:
        from ..kernels._cuda_kernel import _LazyHeaders

        found = declared_globals(kernel.source, list(_LazyHeaders(kernel)), kernel.options)
        kernel._global_declarations = found
    return found


def accessor_source(names) -> str:
    """The C++ accessors of the variables ``names`` (appended to a translation unit)."""
    return "".join(
        f'extern "C" __attribute__((visibility("default"), used)) CUNUMPY_EMU_NOINSTR void *{ACCESSOR_PREFIX}{n}'
        f"(unsigned long long *cunumpy_emu_size) {{ *cunumpy_emu_size = sizeof({n}); return (void *)&({n}); }}\n"
        for n in names
    )


def address(lib, name: str) -> tuple[int, int]:
    """(address, bytes) of variable ``name`` in a loaded library; KeyError when it has none."""
    try:
        fn = lib.symbol_address(ACCESSOR_PREFIX + name)
    except AttributeError:
        raise KeyError(name) from None
    size = ctypes.c_ulonglong(0)
    ptr = _ACCESSOR(fn)(ctypes.byref(size))
    return int(ptr or 0), int(size.value)


def apply(kernel, lib) -> None:
    """Copy the values set on ``kernel`` since ``lib`` last received them; remember ``lib`` as
    the kernel's last library."""
    pending = getattr(kernel, "_pending_globals", None)
    with _lock:
        try:
            _last_library[kernel] = lib
            kernel._emulated_library = _last_view  # CudaKernel.get_global without CuPy reads here
        except (TypeError, AttributeError):
            pass
        if not pending:
            return
        applied = _applied.setdefault(str(lib.path), {})
        todo = [(name, gen, data) for name, (gen, data) in pending.items() if applied.get(name, 0) < gen]
        for name, gen, data in todo:
            try:
                ptr, size = address(lib, name)
            except KeyError:
                raise ValueError(
                    f"kernel '{kernel.name}': variable '{name}' is not in the compiled source (the "
                    "preprocessor left it out), so it cannot be set"
                ) from None
            if size != len(data):
                raise ValueError(
                    f"kernel '{kernel.name}': __constant__/__device__ variable '{name}' has {size} bytes in the "
                    f"compiled source, the value set has {len(data)}"
                )
            ctypes.memmove(ptr, data, size)
            applied[name] = gen


def last_library(kernel):
    """The library of the kernel's last emulated launch, or None."""
    with _lock:
        return _last_library.get(kernel)


def view(kernel, lib, decl: CudaGlobal) -> np.ndarray:
    """A NumPy array over variable ``decl`` in ``lib`` (it shares the library's memory); a
    vector type's components are a last axis of the scalar dtype."""
    try:
        ptr, size = address(lib, decl.name)
    except KeyError:
        raise ValueError(
            f"kernel '{kernel.name}': variable '{decl.name}' is not in the compiled source (the preprocessor left it out)"
        ) from None
    raw = (ctypes.c_char * size).from_address(ptr)
    flat = np.frombuffer(raw, dtype=np.uint8)  # type: ignore[call-overload]  # a ctypes buffer
    dtype: Any = decl.dtype
    shape = decl.shape if decl.shape is not None else (size // dtype.itemsize,)
    if dtype.names is not None:
        scalar = dtype.fields[dtype.names[0]][0]
        return flat.view(scalar).reshape((*shape, len(dtype.names)))
    return flat.view(dtype).reshape(shape)


def _last_view(kernel, decl: CudaGlobal) -> np.ndarray:
    lib = last_library(kernel)
    return view(kernel, lib, decl)


def add_regions(kernel, lib, marshalled) -> None:
    """The variables as memory regions of a launch: memcheck bounds them (an access past
    one is reported), a ``__constant__`` one is read-only, and one never set from Python nor
    initialised in the source is unwritten for initcheck (a read of it is reported)."""
    from ._arguments import REGION_CONST, REGION_OUTPUT_ONLY

    decls = declarations_of(kernel)
    if not decls:
        return
    pending = getattr(kernel, "_pending_globals", None) or {}
    with _lock:
        applied = dict(_applied.get(str(lib.path), {}))
    for name, decl in decls.items():
        try:
            ptr, size = address(lib, name)
        except KeyError:
            continue
        if not ptr or not size:
            continue
        flags = 0
        if decl.space == "__constant__":
            flags |= REGION_CONST
            if not decl.initialized and name not in pending and name not in applied:
                flags |= REGION_OUTPUT_ONLY
        shape = decl.shape if decl.shape is not None else (size // decl.dtype.itemsize,)
        what = f"{decl.space} {decl.ctype}" + "".join(f"[{n}]" for n in shape)
        marshalled.regions.append((ptr, ptr + size, ptr, decl.dtype.itemsize, flags, name, what))
