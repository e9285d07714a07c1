"""cunumpy.xp, the compatibility module of API.md section 0.4a."""

import subprocess
import sys

import array_api_compat.numpy as compat_numpy
import numpy as np
import pytest

import cunumpy
from cunumpy import _backend
from cunumpy.xp import array_backend, to_numpy


@pytest.fixture
def listeners():
    """Listeners added by a test are removed afterwards, whatever happened."""
    added = []

    def add(callback):
        added.append(array_backend.add_listener(callback))
        return callback

    yield add
    for callback in added:
        if callback in _backend._listeners:
            array_backend.remove_listener(callback)


def test_reexports_are_the_top_level_functions():
    import cunumpy.xp as compat

    for name in compat.__all__:
        if name in ("array_backend", "ArrayBackend", "to_host_async"):
            continue
        assert getattr(compat, name) is getattr(cunumpy, name) or name.endswith("_backend"), name
    assert compat.to_numpy is cunumpy.to_numpy and to_numpy is cunumpy.to_numpy
    assert compat.numpy_backend is cunumpy.numpy_backend and compat.cupy_backend is cunumpy.cupy_backend
    with pytest.raises(AttributeError, match="no_such_name"):
        compat.no_such_name  # noqa: B018


def test_to_host_async_of_host_data():
    import cunumpy.xp as compat

    assert compat.to_host_async(np.arange(3)).result().tolist() == [0, 1, 2]


def test_array_backend_reads_the_global_state():
    with cunumpy.use_backend("numpy"):
        assert array_backend.backend == "numpy" and array_backend.xp is compat_numpy
        array_backend.set("numpy")
        assert cunumpy.get_backend() == "numpy"
    with pytest.raises(ValueError, match="numpy"):
        array_backend.set("torch")
    assert "array backend" in repr(array_backend)


def test_array_backend_follows_device_switch(device_only):
    import array_api_compat.cupy as compat_cupy

    assert array_backend.backend == "cupy" and array_backend.xp is compat_cupy
    with array_backend.use_backend("numpy") as name:
        assert name == "numpy" and cunumpy.get_backend() == "numpy"
    assert array_backend.backend == "cupy"


def test_listener_called_after_every_switch(listeners):
    seen = []
    before = (array_backend.xp, cunumpy.get_backend())
    listeners(lambda ns: seen.append((ns, cunumpy.get_backend())))
    with cunumpy.use_backend("numpy"):
        array_backend.set("numpy")
        with array_backend.use_backend("numpy"):
            pass
    # entry, set, inner entry, inner exit, then the outer exit back to the previous backend;
    # each call sees the switch already complete
    assert seen == [(compat_numpy, "numpy")] * 4 + [before]


def test_listener_sees_device_switch_and_exit(device_only, listeners):
    import array_api_compat.cupy as compat_cupy

    seen = []
    listeners(lambda ns: seen.append(ns))
    with cunumpy.use_backend("numpy"):
        assert seen == [compat_numpy]
    assert seen == [compat_numpy, compat_cupy]


def test_raising_listener_on_set_leaves_the_switch_complete(listeners):
    calls = []

    def bad(ns):
        raise RuntimeError("listener failed")

    with cunumpy.use_backend("numpy"):
        listeners(bad)
        listeners(lambda ns: calls.append(ns))
        with pytest.raises(RuntimeError, match="listener failed"):
            array_backend.set("numpy")
        assert calls == [compat_numpy]  # the second listener still ran
        assert cunumpy.get_backend() == "numpy" and cunumpy.zeros is compat_numpy.zeros
        array_backend.remove_listener(bad)


def test_raising_listener_on_use_backend_entry_restores_the_previous_backend(device_only, listeners):
    body_ran = []

    def refuse_numpy(ns):
        if ns is compat_numpy:
            raise RuntimeError("no numpy here")

    listeners(refuse_numpy)
    with pytest.raises(RuntimeError, match="no numpy here"), cunumpy.use_backend("numpy"):
        body_ran.append(True)
    assert not body_ran
    assert cunumpy.get_backend() == "cupy" and type(cunumpy.zeros(2)).__module__ == "cupy"
    assert cunumpy.numpy_backend is False and cunumpy.cupy_backend is True


def test_raising_listener_on_use_backend_exit_still_restores(device_only, listeners):
    armed = []

    def refuse_after_arming(ns):
        if armed:
            raise RuntimeError("exit listener failed")

    listeners(refuse_after_arming)
    with pytest.raises(RuntimeError, match="exit listener failed"), cunumpy.use_backend("numpy"):
        armed.append(True)
    assert cunumpy.get_backend() == "cupy"


def test_add_listener_checks_its_argument():
    with pytest.raises(TypeError, match="callback"):
        array_backend.add_listener(42)
    with pytest.raises(ValueError, match="callback"):
        array_backend.remove_listener(print)


def test_import_cunumpy_does_not_import_the_compat_module():
    code = "import sys, cunumpy; print('cunumpy.xp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


def test_compat_module_imports_nothing_heavy():
    code = (
        "import sys, cunumpy; before = set(sys.modules)\n"
        "from cunumpy.xp import array_backend, to_numpy\n"
        "print(sorted(m for m in set(sys.modules) - before if m != 'cunumpy.xp'))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
