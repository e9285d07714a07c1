"""Fake CuPy kernel objects: they construct like CuPy's and run through the CPU emulation.

Calling or compiling one goes to the launch hook: :data:`_launch_hook` when set (tests set
one), else the CPU emulation's hook of the calling thread and context (API.md section 15):
an ``emulated_launches()`` block's, else the automatic emulation, which refuses with
``EmulationUnavailable`` (a ``NotImplementedError``) when ``CUNUMPY_EMULATION=0`` or no C++
compiler is found.
"""

from __future__ import annotations

import functools

#: ``None``, or a callable ``hook(action, kernel, args, kwargs)`` that takes over every
#: launch ("launch") and compilation ("compile") of the kernel objects below and
#: returns the result CuPy would return.
_launch_hook = None


def _dispatch(action: str, kernel, args=(), kwargs=None):
    hook = _launch_hook
    if hook is None:
        from .._emulation._launch import fake_cupy_hook

        hook = fake_cupy_hook()
    return hook(action, kernel, args, kwargs or {})


def cuda_kernel_hook():
    """CudaKernel's launch hook on the fake CuPy (the fake module's ``__cunumpy_launch_hook__``,
    which ``cunumpy.kernels`` asks until the CPU emulation is loaded): loads the emulation, which
    then gives CudaKernel its own lookup, and returns the hook of the calling thread and context
    (None where launches take the device path, the fake's refusal)."""
    from .._emulation._launch import current_hook  # loaded with the first launch, as in _dispatch

    return current_hook()


class RawKernel:
    """``cupy.RawKernel(code, name, options=(), ...)``."""

    def __init__(
        self,
        code,
        name,
        options=(),
        backend="nvrtc",
        translate_cucomplex=False,
        *,
        enable_cooperative_groups=False,
        jitify=False,
    ):
        self.code = code
        self.name = name
        self.options = tuple(options)
        self.backend = backend
        self.translate_cucomplex = translate_cucomplex
        self.enable_cooperative_groups = enable_cooperative_groups
        self.jitify = jitify
        self.max_dynamic_shared_size_bytes = 0
        self.preferred_shared_memory_carveout = -1
        self.module = None

    def __call__(self, grid, block, args, *, shared_mem=0):
        return _dispatch("launch", self, (grid, block, args), {"shared_mem": shared_mem})

    def compile(self, log_stream=None):
        return _dispatch("compile", self)

    @property
    def attributes(self) -> dict:
        return {
            "max_threads_per_block": self.max_threads_per_block,
            "shared_size_bytes": 0,
            "const_size_bytes": 0,
            "local_size_bytes": 0,
            "num_regs": 0,
            "ptx_version": 90,
            "binary_version": 90,
            "cache_mode_ca": 0,
            "max_dynamic_shared_size_bytes": self.max_dynamic_shared_size_bytes,
            "preferred_shared_memory_carveout": self.preferred_shared_memory_carveout,
        }

    max_threads_per_block = 1024
    shared_size_bytes = 0
    const_size_bytes = 0
    local_size_bytes = 0
    num_regs = 0


class RawModule:
    """``cupy.RawModule(code=None, *, path=None, options=(), ...)``."""

    def __init__(
        self,
        code=None,
        *,
        path=None,
        options=(),
        backend="nvrtc",
        translate_cucomplex=False,
        enable_cooperative_groups=False,
        name_expressions=None,
        jitify=False,
    ):
        if (code is None) == (path is None):
            raise TypeError("Exactly one of `code` and `path` keyword arguments must be given.")
        self.code = code
        self.path = path
        self.options = tuple(options)
        self.backend = backend
        self.name_expressions = tuple(name_expressions or ())
        self.enable_cooperative_groups = enable_cooperative_groups
        self.name = path or "<RawModule>"

    def get_function(self, name) -> RawKernel:
        kernel = RawKernel(
            self.code, name, self.options, self.backend, enable_cooperative_groups=self.enable_cooperative_groups
        )
        kernel.module = self
        return kernel

    def compile(self, log_stream=None):
        return _dispatch("compile", self)

    def get_global(self, name):
        return _dispatch("read globals of", self, (name,))

    def get_texref(self, name):
        return _dispatch("read textures of", self, (name,))


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name="kernel", ...)``."""

    def __init__(
        self,
        in_params,
        out_params,
        operation,
        name="kernel",
        reduce_dims=True,
        preamble="",
        no_return=False,
        return_tuple=False,
        loop_prep="",
        after_loop="",
        options=(),
    ):
        self.in_params = in_params
        self.out_params = out_params
        self.operation = operation
        self.name = name
        self.reduce_dims = reduce_dims
        self.preamble = preamble
        self.no_return = no_return
        self.return_tuple = return_tuple
        self.options = tuple(options)

    def __call__(self, *args, **kwargs):
        return _dispatch("launch", self, args, kwargs)


class ReductionKernel:
    """``cupy.ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, ...)``."""

    def __init__(
        self,
        in_params,
        out_params,
        map_expr,
        reduce_expr,
        post_map_expr,
        identity,
        name="reduce_kernel",
        reduce_type=None,
        reduce_dims=True,
        preamble="",
        options=(),
    ):
        self.in_params = in_params
        self.out_params = out_params
        self.map_expr = map_expr
        self.reduce_expr = reduce_expr
        self.post_map_expr = post_map_expr
        self.identity = identity
        self.name = name
        self.reduce_type = reduce_type
        self.reduce_dims = reduce_dims
        self.preamble = preamble
        self.options = tuple(options)

    def __call__(self, *args, **kwargs):
        return _dispatch("launch", self, args, kwargs)


def fuse(*args, **kwargs):
    """``cupy.fuse`` as a plain decorator: the function runs unchanged (no kernel fusion).

    Works as ``@fuse``, ``@fuse()`` and ``@fuse(kernel_name=...)``.
    """
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _fused(args[0])
    return _fused


def _fused(function):
    @functools.wraps(function)
    def fused(*args, **kwargs):
        return function(*args, **kwargs)

    return fused


def memoize(for_each_device=False):
    """``cupy.memoize``: a plain cache of the decorated function's results."""

    def decorator(function):
        return functools.lru_cache(maxsize=None)(function)

    return decorator


def clear_memo():
    return None
