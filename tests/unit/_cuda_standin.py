"""A minimal device-array stand-in registered as ``cupy`` (pytest plugin: ``-p _cuda_standin``).

It lets the device-side checks of CudaKernel run in a plain test run, where the fake CuPy is
not installed: arrays expose dtype, shape, strides, flags, data.ptr and
``__cuda_array_interface__`` over host memory; RawModule constructs but cannot run, like the
fake's. Installed only when no ``cupy`` is imported yet.
"""

import sys
import types

import numpy as np


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class _Flags:
    def __init__(self, a):
        self.c_contiguous = bool(a.flags.c_contiguous)
        self.f_contiguous = bool(a.flags.f_contiguous)


class ndarray:
    def __init__(self, a):
        self._a = a

    dtype = property(lambda self: self._a.dtype)

    @property
    def shape(self):
        return self._a.shape

    @shape.setter
    def shape(self, value):  # in place, as CuPy allows
        self._a = self._a.reshape(value)

    strides = property(lambda self: self._a.strides)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    ndim = property(lambda self: self._a.ndim)
    flags = property(lambda self: _Flags(self._a))

    @property
    def data(self):
        return _Pointer(self._a.__array_interface__["data"][0])

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": self._a.shape,
            "typestr": self._a.dtype.str,
            "data": (self.data.ptr, False),
            "strides": None if self._a.flags.c_contiguous else self._a.strides,
            "version": 3,
        }

    def __getitem__(self, key):
        return ndarray(self._a[key])

    @property
    def T(self):
        return ndarray(self._a.T)

    def get(self):
        return self._a.copy()


class RawModule:
    def __init__(self, code=None, options=(), name_expressions=None, **kw):
        self.code = code

    def compile(self, log_stream=None):
        return None

    def get_function(self, name):
        raise NotImplementedError("the CuPy stand-in cannot run CUDA kernels")


class Device:
    def __init__(self, i=0):
        self.id = i
        self.attributes = {
            "MaxBlockDimX": 1024,
            "MaxBlockDimY": 1024,
            "MaxBlockDimZ": 64,
            "MaxGridDimX": 2**31 - 1,
            "MaxGridDimY": 65535,
            "MaxGridDimZ": 65535,
            "MaxThreadsPerBlock": 1024,
            "MaxSharedMemoryPerBlock": 49152,
            "MaxSharedMemoryPerBlockOptin": 49152,
        }

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _install():
    if "cupy" in sys.modules:
        return
    cupy = types.ModuleType("cupy")
    cupy.__cunumpy_fake__ = True
    cupy.__cunumpy_standin__ = True
    cupy.__version__ = "14.0.0"
    cupy.ndarray = ndarray
    cupy.asarray = lambda a, dtype=None: ndarray(np.asarray(a, dtype=dtype))
    cupy.is_available = lambda: True
    cupy.RawModule = RawModule
    runtime = types.SimpleNamespace(
        getDevice=lambda: 0,
        getDeviceCount=lambda: 1,
        getDeviceProperties=lambda i: {"name": b"CuPy stand-in"},
    )
    cupy.cuda = types.SimpleNamespace(Device=Device, runtime=runtime)
    sys.modules["cupy"] = cupy


_install()
