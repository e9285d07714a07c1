"""The fast paths of struct packing and of the CudaStructArguments change check.

``S(**values)`` goes straight into C (StructCaller's tp_call) and builds a StructValue there;
NumPy arrays (host arrays, and the host arrays of the fake CuPy) are read from their C struct;
the change check skips re-reading plain attributes while the instance dict and the class are
unchanged. Each shortcut must give the bytes and errors of the slow path, and see every change.

Tests named ``test_device_*`` need device arrays: the fake CuPy (CUNUMPY_FAKE_CUPY=1) takes the
C-struct path, the CuPy stand-in (run in a subprocess in a plain run) the attribute path.
"""

import gc
import os
import subprocess
import sys
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest

from cunumpy import _native, _reference
from cunumpy._native import core
from cunumpy.arguments import CudaStruct, CudaStructArguments, CudaStructValue

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _device_module():
    cupy = sys.modules.get("cupy")
    if cupy is not None and getattr(cupy, "__cunumpy_fake__", False):
        return cupy
    return None


def _fake_cupy_active():
    cupy = _device_module()
    return cupy is not None and not getattr(cupy, "__cunumpy_standin__", False)


@pytest.fixture
def dev():
    cupy = _device_module()
    if cupy is None:
        pytest.skip("device arrays need the fake CuPy (CUNUMPY_FAKE_CUPY=1) or the stand-in plugin")
    return lambda a: cupy.asarray(np.asarray(a))


@pytest.mark.skipif(_device_module() is not None, reason="device tests already run in this process")
def test_standin_runs_the_device_tests():
    """Plain run: the device tests against the CuPy stand-in (attribute path), in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_cuda_standin",
         str(Path(__file__)), "-k", "test_device_"],
        capture_output=True, text=True, env=env, cwd=str(REPO),
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout, result.stdout[-2000:]


class Interface:
    """The same memory seen only through an array interface dict (the generic path)."""

    def __init__(self, a):
        self.__cuda_array_interface__ = a.__array_interface__


def _outcome(fn):
    try:
        return ("ok", fn().tobytes())
    except Exception as exc:
        return (type(exc).__name__, str(exc).split(" got ")[0])


# ------------------------------------------------------------------ NumPy arrays read from their C struct


def test_host_arrays_read_from_the_c_struct_match_the_interface_path():
    S = CudaStruct("R", [("x", "double*"), ("v", "Array2D<double>"), ("c", "CArray2D<double>"), ("raw", "void*")])
    base = np.arange(24.0).reshape(4, 6)
    read_only = np.arange(3.0)
    read_only.flags.writeable = False
    cases = [
        (base[0], base, base, base),
        (base[1], base[:, ::2], base[1:], base[0]),
        (base[0], base.T, base, base),  # F-ordered view
        (np.zeros(0), np.zeros((0, 3)), np.zeros((2, 0)), np.zeros(0)),  # empty arrays
        (base[:, 0], base, base, base),  # not contiguous
        (read_only, base, base, base),  # read-only
        (base[0].astype(np.float32), base, base, base),  # wrong dtype
        (base[0], base[None], base, base),  # wrong rank
        (base[0], np.broadcast_to(base[0], (3, 6)), base, base),  # zero strides
        (base[0], base, base[:, ::2], np.arange(6, dtype=np.int16)[::2]),
    ]
    for values in cases:
        fast = _outcome(lambda: S._packer.pack(values, True))
        slow = _outcome(lambda: S._packer.pack(tuple(Interface(a) for a in values), False))
        assert fast == slow, values


def test_arrays_with_more_than_16_dimensions_are_refused():
    S = CudaStruct("D", [("v", "Array2D<double>")])
    with pytest.raises(TypeError, match="field 'v'.*more than 16 dimensions"):
        S.pack({"v": np.zeros((1,) * 17)}, host_arrays=True)


def test_register_ndarray_type_checks_the_layout_on_probes():
    a = np.zeros((3, 4))
    good = (a, (a.__array_interface__["data"][0], a.shape, a.strides, a.flags.num))
    bad = (a, (a.__array_interface__["data"][0] + 8, a.shape, a.strides, a.flags.num))
    S = CudaStruct("P", [("x", "double*")])
    x = np.arange(3.0)
    try:
        assert core.register_ndarray_type(np.ndarray, (good, bad)) is False
        # Disabled: host arrays go through their __array_interface__, with the same result.
        assert int(S.pack({"x": x}, host_arrays=True).packed["x"]) == x.__array_interface__["data"][0]
        assert core.register_ndarray_type(np.ndarray, ((a, (0, (3,), (8,), 0)),)) is False
        assert core.register_ndarray_type(np.ndarray, ((np.float64(1.0), good[1]),)) is False
        assert core.register_ndarray_type(np.ndarray, ()) is False
        with pytest.raises(TypeError):
            core.register_ndarray_type(np.ndarray, (a,))
        with pytest.raises(TypeError):
            core.register_ndarray_type(np.ndarray, ((a, (1, 2)),))
        with pytest.raises(TypeError):
            core.register_ndarray_type("ndarray", ())
        assert core.register_ndarray_type(np.ndarray, (good,)) is True
    finally:
        assert _native._register_ndarray_type() is bool(_native.HAVE_C_CORE)
    assert _reference.register_ndarray_type(np.ndarray, (good,)) is False
    with pytest.raises(TypeError):
        _reference.register_ndarray_type(np.ndarray, [good])


def test_register_fake_device_type_needs_an_object_slot():
    class NoSlot:
        pass

    class Slotted:
        __slots__ = ("_a",)

    cupy = _device_module()
    try:
        assert core.register_fake_device_type(NoSlot, "_a") is False
        assert core.register_fake_device_type(Slotted, "_b") is False
        assert core.register_fake_device_type(Slotted, "_a") is True
        with pytest.raises(TypeError):
            core.register_fake_device_type(Slotted, 3)
    finally:
        if _fake_cupy_active():
            assert core.register_fake_device_type(cupy.ndarray, "_a") is True
        else:
            core.register_fake_device_type(NoSlot, "_a")
    assert _reference.register_fake_device_type(Slotted, "_a") is False


# ------------------------------------------------------------------ S(**values) and CudaStructValue


def test_call_takes_keywords_in_any_order_and_equal_non_interned_names():
    S = CudaStruct("K", [("n", "long long"), ("d", "double"), ("b", "bool")])
    want = S(n=3, d=0.5, b=True).tobytes()
    assert S(b=True, d=0.5, n=3).tobytes() == want
    assert S(**{"d": 0.5, "n": 3, "b": True}).tobytes() == want
    built = {"".join(["n"]): 3, "".join(["d"]): 0.5, "".join(["b"]): True}
    assert S(**built).tobytes() == want
    with pytest.raises(TypeError, match=r"struct 'K' takes its fields as keyword arguments.*got 1 positional"):
        S(3, d=0.5, b=True)
    with pytest.raises(TypeError, match=r"missing fields \['n', 'd', 'b'\]"):
        S()
    with pytest.raises(TypeError, match=r"missing fields \['b'\], unknown fields \['c'\]"):
        S(n=1, d=0.5, c=2)


def test_struct_value_attributes_and_mapping_protocol():
    S = CudaStruct("V", [("n", "int"), ("d", "double")])
    value = S(d=2.5, n=4)
    assert isinstance(value, CudaStructValue) and isinstance(value, core.StructValue)
    assert value.struct is S and value["n"] == 4 and value["d"] == 2.5
    assert "n" in value and "z" not in value and list(value) == ["n", "d"] and value.keys() == ("n", "d")
    assert value.values == {"n": 4, "d": 2.5} and value.__cuda_args__() == (value.packed,)
    assert value.tobytes() == value.packed.tobytes() and repr(value) == "<CudaStructValue V (16 bytes)>"
    with pytest.raises(KeyError, match="no field 'z'"):
        value["z"]
    with pytest.raises(KeyError, match="no field"):
        value[["unhashable"]]
    with pytest.raises(AttributeError):
        value.packed = None
    with pytest.raises(AttributeError):
        value.other = 1  # no instance dict
    ref = weakref.ref(value)
    del value
    gc.collect()
    assert ref() is None
    direct = CudaStructValue(S, S(n=1, d=0.0).packed, (1, 0.0))
    assert direct["n"] == 1
    with pytest.raises(TypeError):
        CudaStructValue(S, direct.packed, [1, 0.0])


def test_a_struct_without_packer_and_bad_attach_raise_type_errors():
    empty = CudaStruct.__new__(CudaStruct)
    with pytest.raises(TypeError, match="no packer"):
        empty(n=1)
    S = CudaStruct("A", [("n", "int")])
    with pytest.raises(TypeError, match="_attach"):
        S._attach(S._packer, dict)
    with pytest.raises(TypeError, match="_attach"):
        S._attach(None, CudaStructValue)
    assert S(n=2).packed["n"] == 2


def test_twin_caller_and_value_behave_like_c():
    S = CudaStruct("TW", [("n", "long long"), ("x", "double*")])
    from cunumpy.kernels._cuda_kernel import _spec

    specs = tuple(
        (_spec(0, p)[0], f"field '{p.name}' ({S._type_text(p)} {p.name})") + _spec(0, p)[2:] for p in S.fields
    )
    packer = _reference.struct_packer(
        S.name, specs, S.offsets, S.itemsize, S.dtype, S.field_names, np.void, np.generic, np.empty
    )

    class TwinValue(_reference.StructValue):
        __slots__ = ()

    twin = _reference.StructCaller()
    with pytest.raises(TypeError, match="no packer"):
        twin(n=1, x=None)
    with pytest.raises(TypeError, match="_attach"):
        twin._attach(packer, dict)
    twin._attach(packer, TwinValue)
    assert _outcome(lambda: twin(n=1, x=np.zeros(2)).packed) == _outcome(lambda: S(n=1, x=np.zeros(2)).packed)
    for call in (lambda s: s(1, x=None), lambda s: s(n=1), lambda s: s(n=1.5, x=None)):
        assert _outcome(lambda: call(twin).packed)[0] == _outcome(lambda: call(S).packed)[0] != "ok"
    x = _device_module().asarray(np.zeros(2)) if _device_module() is not None else None
    if x is not None:
        got, want = twin(n=1, x=x), S(n=1, x=x)
        assert got.packed.tobytes() == want.packed.tobytes() and got._values == want._values == (1, x)
        assert got.__cuda_args__() == (got.packed,) and got.struct is twin


# ------------------------------------------------------------------ CudaStructArguments: what the check must see


class Host(CudaStructArguments):
    struct_name = "Host"
    fields = (("x", "double*"), ("v", "Array2D<double>"), ("n", "long long"))

    def __init__(self, x, v, n):
        self.x, self.v, self.n = x, v, n
        self.pack(host_arrays=True)


def _armed(obj):
    """Check twice: the second check runs with the instance dict trusted (the fast route)."""
    p = obj.packed
    assert obj.packed is p
    return p


def test_in_place_changes_of_host_arrays_are_seen():
    h = Host(np.zeros(6), np.zeros((2, 3)), 6)
    p = _armed(h)
    h.v.shape = (3, 2)  # the same object, reshaped in place
    assert list(h.packed["v"]["shape"]) == [3, 2] and h.packed is not p
    p = _armed(h)
    h.x.shape = (2, 3)  # a pointer field: same address, still contiguous, nothing to re-pack
    assert h.packed.tobytes() == p.tobytes()
    p = _armed(h)
    h.x.dtype = np.int64  # the dtype changed in place
    with pytest.raises(TypeError, match="field 'x'.*expected dtype float64"):
        h.packed
    h.x = np.zeros(6)
    p = _armed(h)
    h.x.flags.writeable = False
    with pytest.raises(TypeError, match="field 'x'.*read-only"):
        h.packed
    h.x = np.zeros(6)
    _armed(h)
    with warnings.catch_warnings():  # deprecated in NumPy 2.4, still possible
        warnings.simplefilter("ignore", DeprecationWarning)
        h.v.strides = (8, 16)  # other strides, same shape
    assert list(h.packed["v"]["strides"]) == [1, 2]


def test_ndarray_subclasses_are_packed_again_every_time():
    class Sub(np.ndarray):
        pass

    h = Host(np.zeros(6), np.zeros((2, 3)).view(Sub), 6)
    p = h.packed
    assert h.packed is not p and h.packed.tobytes() == p.tobytes()
    h.v.shape = (3, 2)
    assert list(h.packed["v"]["shape"]) == [3, 2]


def test_changes_behind_the_attribute_protocol_are_seen():
    h = Host(np.zeros(6), np.zeros((2, 3)), 6)
    _armed(h)
    vars(h)["n"] = 7
    assert h.packed["n"] == 7
    _armed(h)
    h.__dict__.update(n=8)
    assert h.packed["n"] == 8
    _armed(h)
    h.n = 9  # same object, different scalar
    assert h.packed["n"] == 9
    _armed(h)
    del h.n
    with pytest.raises(AttributeError, match="field 'n' of struct 'Host' is not set"):
        h.packed
    h.n = 10
    assert h.packed["n"] == 10


def test_class_changes_after_packing_are_seen():
    class A(Host):
        pass

    class B(Host):
        n = property(lambda self: 77)

    a = A(np.zeros(6), np.zeros((2, 3)), 6)
    _armed(a)
    A.n = property(lambda self: 42)  # a data descriptor now hides the instance attribute
    assert a.packed["n"] == 42
    _armed(a)
    del A.n
    assert a.packed["n"] == 6
    _armed(a)
    a.__class__ = B
    assert a.packed["n"] == 77


def test_class_attributes_slots_and_getattr_hooks_as_fields():
    class Cls(CudaStructArguments):
        struct_name = "Cls"
        fields = (("n", "int"), ("m", "int"))
        n = 1

        def __init__(self):
            self.m = 2

    c = Cls()
    _armed(c)
    Cls.n = 3
    assert c.packed["n"] == 3
    c.n = 4  # the instance attribute now shadows the class attribute
    _armed(c)
    assert c.packed["n"] == 4

    class Slot(CudaStructArguments):
        __slots__ = ("n",)
        struct_name = "Slot"
        fields = (("n", "int"),)

    s = Slot()
    s.n = 1
    _armed(s)
    s.n = 2
    assert s.packed["n"] == 2

    class Hook(CudaStructArguments):
        struct_name = "Hook"
        fields = (("n", "int"),)
        value = 1

        def __getattr__(self, name):
            if name == "n":
                return Hook.value
            raise AttributeError(name)

    h = Hook()
    _armed(h)
    Hook.value = 5
    assert h.packed["n"] == 5


def test_a_field_changed_while_the_check_reads_the_others_is_seen_next_time():
    class Racy(CudaStructArguments):
        struct_name = "Racy"
        fields = (("n", "int"), ("x", "double*"))

        def __init__(self):
            self.n, self.calls, self.arr = 0, 0, np.zeros(2)

        @property
        def x(self):
            # The getter changes the plain field read before it, during the check.
            self.calls += 1
            if self.calls % 3 == 0:
                self.n += 1
            return self.arr

    r = Racy()
    r.pack(host_arrays=True)
    for _ in range(12):
        r.packed
        assert r.packed["n"] in (r.n, r.n - 1)
    assert r.packed["n"] == r.n or r.packed["n"] == r.n - 1
    r.calls = 1  # the next getter call does not change n
    assert r.packed["n"] == r.n


def test_the_check_does_not_use_another_packers_state():
    class A(CudaStructArguments):
        struct_name = "A"
        fields = (("n", "int"),)

    other = CudaStruct("A", [("n", "long long")])
    a = A()
    a.n = 3
    other._packer.repack(a, False)  # a state made by a packer that is not the class's
    assert a.packed.dtype == A.struct.dtype and a.packed["n"] == 3


# ------------------------------------------------------------------ device arrays


class Dev(CudaStructArguments):
    struct_name = "Dev"
    fields = (("x", "double*"), ("v", "Array2D<double>"), ("n", "int"))

    def __init__(self, x, v):
        self.x, self.v, self.n = x, v, 3
        self.pack()


def test_device_struct_packs_the_same_bytes_as_the_attributes_say(dev):
    S = CudaStruct("DS", [("x", "double*"), ("v", "Array2D<double>"), ("c", "CArray1D<double>")])
    x, v, c = dev(np.zeros(5)), dev(np.zeros((4, 6)))[:, ::2], dev(np.zeros(0))
    p = S(x=x, v=v, c=c).packed
    assert int(p["x"]) == x.data.ptr and int(p["c"]["data"]) == c.data.ptr  # 0 on the fake CuPy
    assert list(p["v"]["shape"]) == [4, 3] and list(p["v"]["strides"]) == [6, 2]
    assert int(p["v"]["data"]) == v.data.ptr


def test_device_in_place_changes_are_seen_after_the_check_is_armed(dev):
    d = Dev(dev(np.zeros(6)), dev(np.zeros((2, 3))))
    p = _armed(d)
    d.v.shape = (3, 2)
    assert list(d.packed["v"]["shape"]) == [3, 2] and d.packed is not p
    p = _armed(d)
    d.x.shape = (2, 3)  # a pointer field reshaped: same address
    assert d.packed.tobytes() == p.tobytes()
    _armed(d)
    d.n = 4
    assert d.packed["n"] == 4
    _armed(d)
    d.x = dev(np.zeros(6))
    assert int(d.packed["x"]) == d.x.data.ptr
    _armed(d)
    del d.v
    with pytest.raises(AttributeError, match="field 'v' of struct 'Dev' is not set"):
        d.packed


def test_device_host_buffer_changed_under_the_fake_array_is_seen(dev):
    if not _fake_cupy_active():
        pytest.skip("the fake CuPy's host buffer")
    from cunumpy._fake_cupy import host_buffer

    d = Dev(dev(np.zeros(6)), dev(np.zeros((2, 3))))
    _armed(d)
    host_buffer(d.v).shape = (3, 2)  # the NumPy array inside, changed in place
    assert list(d.packed["v"]["shape"]) == [3, 2]


def test_device_fake_arrays_with_an_unusual_host_buffer_take_the_attribute_path(dev):
    if not _fake_cupy_active():
        pytest.skip("the fake CuPy's host buffer")
    cupy = _device_module()

    class Matrixish(np.ndarray):
        pass

    S = CudaStruct("U", [("v", "Array2D<double>")])
    a = dev(np.zeros((2, 3)))
    object.__setattr__(a, "_a", np.zeros((2, 3)).view(Matrixish))
    assert list(S(v=a).packed["v"]["shape"]) == [2, 3]
    blank = cupy.ndarray.__new__(cupy.ndarray)  # the slot is empty
    with pytest.raises((TypeError, AttributeError)):
        S(v=blank)

    class SubArray(cupy.ndarray):
        pass

    sub = SubArray.__new__(SubArray)
    object.__setattr__(sub, "_a", np.zeros((2, 3)))
    object.__setattr__(sub, "_base", None)
    assert list(S(v=sub).packed["v"]["shape"]) == [2, 3]
    with pytest.raises(TypeError, match="field 'v'.*more than 16 dimensions"):
        S(v=dev(np.zeros((1,) * 17)))


def test_device_property_returning_new_arrays_with_the_check_armed(dev):
    class Fresh(CudaStructArguments):
        struct_name = "Fresh2"
        fields = (("n", "int"), ("x", "double*"))

        def __init__(self):
            self.n = 1

        @property
        def x(self):
            return dev(np.zeros(2))

    f = Fresh()
    seen = {f.packed.tobytes()}
    for _ in range(10):
        p = f.packed
        assert int(p["x"]) != 0
        seen.add(p.tobytes())
    f.n = 2
    assert f.packed["n"] == 2
