"""Builds the fake ``cupy`` and ``cupyx`` module objects from NumPy and the parts above."""

from __future__ import annotations

import types

import numpy as np

from . import _cuda, _functions, _kernels, _names, _random
from ._functions import strict, ufunc
from ._ndarray import _counterparts, flatiter, ndarray

#: The fake's names follow CuPy 14.2.0 (see ``_names``); it reports the minimum version.
VERSION = "14.0.0"


def _module(name: str, doc: str, attributes: dict) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(attributes)
    module.__cunumpy_fake__ = True
    return module


def _main_namespace() -> dict:
    created = _functions.creation_functions()
    names: dict = {}
    for name in dir(np):
        if name.startswith("_") or name in _names.ABSENT_FROM_CUPY:
            continue
        obj = getattr(np, name)
        if isinstance(obj, types.ModuleType):
            continue
        if name in created:
            names[name] = created[name]
        elif isinstance(obj, np.ufunc):
            names[name] = ufunc(obj, name)
        elif isinstance(obj, type):
            special = {
                "ndarray": ndarray,
                "flatiter": flatiter,
                "ufunc": ufunc,
                "vectorize": _functions.vectorize,
                "broadcast": _functions.broadcast,
            }
            names[name] = special.get(name, obj)
        elif name in ("mgrid", "ogrid", "r_", "c_"):
            names[name] = _functions._IndexHelper(obj, name)
        elif callable(obj) and not isinstance(obj, type):
            names[name] = strict(
                obj,
                name,
                host_ok=name in _names.ARRAY_LIKE_ROUTINES,
                permissive=name in _names.PERMISSIVE,
                device_bool=name in _names.DEVICE_BOOL_RESULT,
            )
        else:
            names[name] = obj
    for alias, target in _names.LEGACY_ALIASES.items():
        if alias in names:
            continue
        obj = np
        for part in target.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            continue
        if isinstance(obj, (type, float)):
            names[alias] = obj  # constants, dtypes and exception classes as they are
        else:
            names[alias] = strict(obj, alias)
    names.update(
        NINF=-np.inf,
        NZERO=-0.0,
        PZERO=0.0,
        msort=strict(lambda a: np.sort(a, axis=0), "msort"),
        apply_along_axis=_functions.apply_along_axis,
        apply_over_axes=_functions.apply_over_axes,
        piecewise=_functions.piecewise,
        take=_functions.take,
        histogramdd=_functions.histogramdd,
        histogram2d=_functions.histogram2d,
        put=_functions.put,
        place=_functions.place,
        asnumpy=_functions.asnumpy,
        get_array_module=_functions.get_array_module,
        from_dlpack=_functions.from_dlpack,
        fromDlpack=_functions.from_dlpack,
        show_config=_functions.show_config,
        fuse=_kernels.fuse,
        memoize=_kernels.memoize,
        clear_memo=_kernels.clear_memo,
        RawKernel=_kernels.RawKernel,
        RawModule=_kernels.RawModule,
        ElementwiseKernel=_kernels.ElementwiseKernel,
        ReductionKernel=_kernels.ReductionKernel,
        get_default_memory_pool=_cuda.get_default_memory_pool,
        get_default_pinned_memory_pool=_cuda.get_default_pinned_memory_pool,
        is_available=_cuda.is_available,
    )
    return names


def _cuda_modules() -> dict[str, types.ModuleType]:
    c = _cuda
    runtime = _module(
        "cupy.cuda.runtime",
        "Fake CUDA runtime: one device, 16 GiB free.",
        dict(
            getDevice=c.getDevice,
            setDevice=c.setDevice,
            getDeviceCount=c.getDeviceCount,
            deviceSynchronize=c.deviceSynchronize,
            memGetInfo=c.memGetInfo,
            getDeviceProperties=c.getDeviceProperties,
            deviceGetAttribute=c.deviceGetAttribute,
            driverGetVersion=c.driverGetVersion,
            runtimeGetVersion=c.runtimeGetVersion,
            streamSynchronize=c.streamSynchronize,
            eventSynchronize=c.eventSynchronize,
            CUDARuntimeError=c.CUDARuntimeError,
            is_hip=False,
            **{f"cudaDevAttr{name}": code for name, code in c.DEVICE_ATTRIBUTE_CODES.items()},
        ),
    )
    driver = _module(
        "cupy.cuda.driver",
        "Fake CUDA driver API.",
        dict(CUDADriverError=c.CUDADriverError, get_build_version=lambda: c.DRIVER_VERSION),
    )
    memory = _module(
        "cupy.cuda.memory",
        "Fake device memory: host buffers behind MemoryPointer.",
        dict(
            Memory=c.Memory,
            MemoryPointer=c.MemoryPointer,
            MemoryPool=c.MemoryPool,
            alloc=c.alloc,
            set_allocator=c.set_allocator,
            get_allocator=c.get_allocator,
        ),
    )
    pinned_memory = _module(
        "cupy.cuda.pinned_memory",
        "Fake pinned memory: unavailable.",
        dict(
            PinnedMemoryPool=c.PinnedMemoryPool,
            alloc_pinned_memory=c.alloc_pinned_memory,
            set_pinned_memory_allocator=c.set_pinned_memory_allocator,
        ),
    )
    device = _module("cupy.cuda.device", "Fake devices.", dict(Device=c.Device, get_device_id=c.getDevice))
    stream = _module(
        "cupy.cuda.stream",
        "Fake streams and events.",
        dict(
            Stream=c.Stream,
            ExternalStream=c.ExternalStream,
            Event=c.Event,
            get_current_stream=c.get_current_stream,
            get_elapsed_time=c.get_elapsed_time,
        ),
    )
    nvtx = _module(
        "cupy.cuda.nvtx",
        "NVTX no-ops.",
        dict(
            RangePush=c.RangePush,
            RangePushC=c.RangePushC,
            RangePop=c.RangePop,
            Mark=c.Mark,
            MarkC=c.MarkC,
            RangeStart=c.RangeStart,
            RangeEnd=c.RangeEnd,
            available=True,
        ),
    )
    cuda = _module(
        "cupy.cuda",
        "Fake cupy.cuda: device 0, streams that are always done, memory-pool stubs.",
        dict(
            Device=c.Device,
            Stream=c.Stream,
            ExternalStream=c.ExternalStream,
            Event=c.Event,
            get_current_stream=c.get_current_stream,
            get_elapsed_time=c.get_elapsed_time,
            Memory=c.Memory,
            MemoryPointer=c.MemoryPointer,
            MemoryPool=c.MemoryPool,
            PinnedMemoryPool=c.PinnedMemoryPool,
            alloc=c.alloc,
            alloc_pinned_memory=c.alloc_pinned_memory,
            set_allocator=c.set_allocator,
            set_pinned_memory_allocator=c.set_pinned_memory_allocator,
            get_allocator=c.get_allocator,
            get_device_id=c.getDevice,
            is_available=c.is_available,
            runtime=runtime,
            driver=driver,
            memory=memory,
            pinned_memory=pinned_memory,
            device=device,
            stream=stream,
            nvtx=nvtx,
        ),
    )
    mods = {m.__name__: m for m in (cuda, runtime, driver, memory, pinned_memory, device, stream, nvtx)}
    return mods


def _strict_module(name: str, numpy_module, names, doc: str) -> types.ModuleType:
    return _module(name, doc, {n: strict(getattr(numpy_module, n), n, module=name) for n in names})


def _testing_module() -> types.ModuleType:
    import numpy.testing as npt

    def host(value):
        return value.get() if type(value) is ndarray else value

    def forward(name):
        check = getattr(npt, name)

        def assertion(actual, desired, *args, **kwargs):
            return check(host(actual), host(desired), *args, **kwargs)

        assertion.__name__ = assertion.__qualname__ = name
        assertion.__module__ = "cupy.testing"
        assertion.__doc__ = f"NumPy's ``testing.{name}`` on device or host arrays."
        return assertion

    return _module(
        "cupy.testing",
        "Fake cupy.testing: NumPy's assertions on device arrays.",
        {n: forward(n) for n in _names.TESTING},
    )


def _random_module() -> types.ModuleType:
    r = _random
    attributes = dict(
        default_rng=r.default_rng,
        Generator=r.Generator,
        BitGenerator=r.BitGenerator,
        XORWOW=r.XORWOW,
        MRG32k3a=r.MRG32k3a,
        Philox4x3210=r.Philox4x3210,
        RandomState=r.RandomState,
        get_random_state=r.get_random_state,
        set_random_state=r.set_random_state,
        reset_states=r.reset_states,
        seed=r.seed,
    )
    attributes.update(r.legacy_functions())
    return _module("cupy.random", "Fake cupy.random: NumPy generators producing device arrays.", attributes)


def build() -> dict[str, types.ModuleType]:
    """Every fake module, keyed by its import name (nothing is registered here)."""
    cupy = _module(
        "cupy",
        "cunumpy's strict host stand-in for CuPy (no CUDA; kernel launches run in cunumpy's CPU emulation).",
        _main_namespace(),
    )
    cupy.__version__ = VERSION
    # Launches of cunumpy's CudaKernel on the fake CuPy run in the CPU emulation: the kernels
    # ask the active CuPy for the hook (cunumpy.kernels does not import the emulation).
    cupy.__cunumpy_launch_hook__ = _kernels.cuda_kernel_hook
    cupy.__path__ = []  # a package: unknown submodules fail like missing CuPy modules
    modules = {"cupy": cupy}
    modules.update(_cuda_modules())
    cupy.cuda = modules["cupy.cuda"]
    linalg = _strict_module("cupy.linalg", np.linalg, _names.LINALG, "Fake cupy.linalg (NumPy underneath).")
    linalg.LinAlgError = np.linalg.LinAlgError
    fft = _strict_module("cupy.fft", np.fft, _names.FFT, "Fake cupy.fft (NumPy underneath).")
    fft.config = _module(
        "cupy.fft.config",
        "cuFFT plan-cache settings (no-ops).",
        dict(enable_nd_planning=True, get_plan_cache=lambda: None, show_plan_cache_info=lambda: None),
    )
    stride_tricks = _strict_module(
        "cupy.lib.stride_tricks",
        np.lib.stride_tricks,
        ["as_strided", "sliding_window_view"],
        "Fake cupy.lib.stride_tricks.",
    )
    lib = _module("cupy.lib", "Fake cupy.lib.", dict(stride_tricks=stride_tricks))
    exceptions = _module(
        "cupy.exceptions",
        "NumPy's exception classes, as CuPy re-exports them.",
        {n: getattr(np.exceptions, n) for n in _names.EXCEPTIONS if hasattr(np.exceptions, n)},
    )
    for module in (linalg, fft, fft.config, _random_module(), _testing_module(), lib, stride_tricks, exceptions):
        modules[module.__name__] = module
        parent, _, child = module.__name__.rpartition(".")
        setattr(modules[parent], child, module)
    from . import _cupyx

    modules.update(_cupyx.build())
    _counterparts.update({"numpy": cupy, "numpy.linalg": linalg, "numpy.fft": fft})
    return modules
