"""MetalKernel and metal_available (API.md 2.13). Without MLX (this machine, CI) a call
raises ImportError after the arguments were validated; every validation rule is tested."""

import sys

import numpy as np
import pytest

import cunumpy as xp

MetalKernel = xp.kernels.MetalKernel
BODY = "uint i = thread_position_in_grid.x; out[i] = a[i] * s[0];"


def kernel(**kw):
    return MetalKernel(BODY, ["a", "s"], ["out"], **kw)


def test_metal_available_never_raises():
    assert xp.kernels.metal_available() in (True, False)
    if "mlx" not in sys.modules:
        try:
            import mlx.core  # noqa: F401
        except ImportError:
            assert xp.kernels.metal_available() is False


def test_constructor_validation():
    with pytest.raises(ValueError, match="output"):
        MetalKernel(BODY, ["a"], [])
    with pytest.raises(ValueError, match="repeated"):
        MetalKernel(BODY, ["a", "a"], ["out"])
    with pytest.raises(ValueError, match="repeated"):
        MetalKernel(BODY, ["out"], ["out"])
    with pytest.raises(ValueError, match="float64"):
        kernel(float64="promote")
    with pytest.raises(ValueError, match="threadgroup"):
        kernel(threadgroup=0)
    with pytest.raises(ValueError, match="threadgroup"):
        kernel(threadgroup=(1, 1, 1, 1))
    with pytest.raises(TypeError, match="threadgroup"):
        kernel(threadgroup="big")
    with pytest.raises(TypeError, match="source"):
        MetalKernel(3, ["a"], ["out"])
    with pytest.raises(TypeError, match="inputs"):
        MetalKernel(BODY, "a", ["out"])
    with pytest.raises(ValueError, match="identifier"):
        MetalKernel(BODY, ["a b"], ["out"])
    with pytest.raises(ValueError, match="name"):
        kernel(name="not valid")
    k = kernel(threadgroup=(8, 8), atomic_outputs=True, init_value=0)
    assert k.inputs == ("a", "s") and k.outputs == ("out",) and k.threadgroup == (8, 8)
    assert k.atomic_outputs and k.init_value == 0 and k.float64 == "error"


def test_call_validation_before_mlx():
    k = kernel()
    a, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="2 input"):
        k(a, out=out)
    with pytest.raises(TypeError, match="1 output"):
        k(a, 2.0, out=(out, out))
    with pytest.raises(TypeError, match="'a'.*float64"):
        k(np.ones(4), 2.0, out=out)
    with pytest.raises(TypeError, match="'out'.*float64"):
        k(a, 2.0, out=np.zeros(4))
    with pytest.raises(TypeError, match="complex"):
        kernel(float64="cast")(np.ones(4, np.complex128), 2.0, out=out)
    with pytest.raises(TypeError, match="NumPy array"):
        k([1.0, 2.0], 2.0, out=out)
    with pytest.raises(TypeError, match="out"):
        k(a, 2.0, out=[[0.0]])
    with pytest.raises(ValueError, match="n_threads"):
        k(a, 2.0, out=out, n_threads=-1)
    with pytest.raises(TypeError, match="template"):
        k(a, 2.0, out=out, template=3)


@pytest.mark.skipif(xp.kernels.metal_available(), reason="MLX with a Metal GPU is present")
def test_call_without_mlx_raises_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlx", None)  # as on a machine without MLX
    k = kernel(float64="cast")
    with pytest.raises(ImportError, match=r"cunumpy\[metal\]"):
        k(np.ones(4), 2.0, out=np.zeros(4))


def test_mlx_without_metal_gpu_is_a_runtime_error(monkeypatch):
    import types

    mlx = types.ModuleType("mlx")
    core = types.ModuleType("mlx.core")
    core.metal = types.SimpleNamespace(is_available=lambda: False)
    mlx.core = core
    monkeypatch.setitem(sys.modules, "mlx", mlx)
    monkeypatch.setitem(sys.modules, "mlx.core", core)
    assert xp.kernels.metal_available() is False
    with pytest.raises(RuntimeError, match="Metal GPU"):
        kernel()(np.ones(4, np.float32), 2.0, out=np.zeros(4, np.float32))


def test_mlx_path_with_a_stand_in(monkeypatch):
    """The MLX call as MLX documents it, with a stand-in that computes the example body."""
    import types

    from _events import Events

    seen = {}

    def metal_kernel(**spec):
        seen["spec"] = spec

        def run(*, inputs, grid, threadgroup, output_shapes, output_dtypes, template=None, init_value=None):
            seen["call"] = dict(
                grid=grid, threadgroup=threadgroup, template=template, init_value=init_value, dtypes=output_dtypes
            )
            a, s = inputs
            return [(a * s[0]).reshape(output_shapes[0])]

        return run

    mlx = types.ModuleType("mlx")
    core = types.ModuleType("mlx.core")
    core.metal = types.SimpleNamespace(is_available=lambda: True)
    core.fast = types.SimpleNamespace(metal_kernel=metal_kernel)
    core.array = lambda a: np.array(a)
    core.float32, core.int32 = "mx.float32", "mx.int32"
    mlx.core = core
    monkeypatch.setitem(sys.modules, "mlx", mlx)
    monkeypatch.setitem(sys.modules, "mlx.core", core)
    assert xp.kernels.metal_available() is True
    k = kernel(float64="cast", init_value=0)
    out = np.zeros(5)
    with Events() as events:
        result = k(np.arange(5.0), 3.0, out=out, template={"N": 5})
    assert result is out
    np.testing.assert_allclose(out, 3.0 * np.arange(5.0))
    assert seen["spec"]["input_names"] == ["a", "s"] and seen["spec"]["output_names"] == ["out"]
    assert seen["call"]["grid"] == (5, 1, 1) and seen["call"]["threadgroup"] == (256, 1, 1)
    assert seen["call"]["template"] == [("N", 5)] and seen["call"]["init_value"] == 0
    assert seen["call"]["dtypes"] == ["mx.float32"]
    assert [e.nbytes for e in events.kinds("to_device")] == [20, 4]
    assert [e.nbytes for e in events.kinds("to_host")] == [20]
    # An int scalar becomes a 1-element int32 array; several outputs come back as a tuple.
    two = MetalKernel(BODY, ["a", "s"], ["out", "other"])
    core.int32 = "mx.int32"
    with pytest.raises(TypeError, match="2 output"):
        two(np.ones(2, np.float32), 2, out=np.zeros(2, np.float32))


def test_numpy_scalar_inputs_are_checked_like_arrays():
    k = kernel()
    out = np.zeros(2, np.float32)
    with pytest.raises(TypeError, match="'s'.*float64"):
        k(np.ones(2, np.float32), np.float64(2.0), out=out)
