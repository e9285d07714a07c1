"""The fake CuPy's API surface against the real CuPy of this environment (issue 27 item 14).

Every public name the fake provides exists in the real CuPy (cupy, cupy.cuda and its
modules, cupy.random, cupy.linalg, cupy.fft, cupyx, cupyx.scipy.*); every CuPy attribute
cunumpy's own code uses exists; where the real CuPy exposes a Python-level signature, the
fake takes the same parameter names or the difference is listed with a reason; and the
generated part of src/cunumpy/_fake_cupy/FIDELITY.md is what this comparison writes.
tests/data/cupy_names.json (read by tests/unit/test_fake_cupy_names.py where no real CuPy
is installed) is what tests/data/make_cupy_names.py writes from this CuPy.
"""

import json
import pathlib
import subprocess
import sys

import pytest
import surface

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def result():
    return surface.gaps()


def test_real_cupy_is_the_pinned_release(result):
    import cupy

    assert not getattr(cupy, "__cunumpy_fake__", False)
    pinned = (ROOT / "tests" / "realcupy" / "constraints.txt").read_text()
    assert f"cupy-cuda13x=={cupy.__version__}" in pinned
    assert result["version"] == cupy.__version__


def test_every_module_of_the_fake_exists_and_was_compared(result):
    assert not result["fake_modules_cupy_lacks"]
    assert result["modules_checked"] == len(surface.fake_modules()) - len(
        [m for m, n, r in result["missing"] if n == "(the whole module)"]
    )
    assert result["names_checked"] > 1500 and result["parameters_checked"] > 500


def test_every_public_name_of_the_fake_exists_in_real_cupy(result):
    assert not result["fake_extra"], result["fake_extra"]
    assert not result["class_extra"], result["class_extra"]


def test_every_cupy_attribute_cunumpy_uses_exists(result):
    uses = result["uses"]
    # the scan must see the device path (a scan that finds nothing would pass vacuously)
    for expected in (
        "cupy.cuda.runtime.getDeviceCount",
        "cupy.cuda.get_current_stream",
        "cupy.ascontiguousarray",
        "cupy.cuda.Event",
        "cupy.RawModule",
    ):
        assert expected in uses, sorted(uses)
    assert not result["uses_missing"], {u: uses[u] for u in result["uses_missing"]}


def test_cunumpy_use_scan_follows_bound_names(tmp_path):
    (tmp_path / "m.py").write_text(
        "import sys\n"
        "def f():\n"
        "    cp = sys.modules['cupy']\n"
        "    return cp.cuda.runtime.getDevice(), cp.zeros(3).sum()\n"
        "def g():\n"
        "    import cupyx.scipy.special as special\n"
        "    return special.erf, sys.modules['cupy'].cuda.nvtx.RangePop\n"
        "def h():\n"
        "    cupy = sys.modules.get('cupy')\n"
        "    return cupy.cuda.Stream.null, getattr(getattr(cupy, 'cuda', None), 'Event', None)\n"
    )
    uses = surface.cupy_uses(tmp_path)
    assert set(uses) == {
        "cupy.cuda.runtime.getDevice",
        "cupy.zeros",
        "cupyx.scipy.special.erf",
        "cupy.cuda.nvtx.RangePop",
        "cupy.cuda.Stream.null",
        "cupy.cuda.Event",
    }, uses
    assert surface.resolve_on_real("cupy.cuda.runtime.getDevice")
    assert not surface.resolve_on_real("cupy.cuda.runtime.no_such_call")


def test_every_difference_has_a_reason(result):
    problems = surface.errors(result)
    assert not problems, "\n".join(problems)


def test_fidelity_md_is_generated_from_this_comparison(result):
    expected = surface.updated_text(surface.render(result))
    actual = surface.FIDELITY.read_text()
    assert surface.BEGIN in actual and surface.END in actual
    assert actual == expected, (
        "src/cunumpy/_fake_cupy/FIDELITY.md is stale: run `make fidelity` (tests/realcupy/surface.py --write) "
        "and commit the result"
    )


def test_cupy_names_json_is_what_make_cupy_names_writes(tmp_path):
    """The committed snapshot matches this CuPy (device_properties come from CuPy's source
    tree, which is not here: that entry is compared for presence only)."""
    out = tmp_path / "names.json"
    subprocess.run(
        [sys.executable, "-W", "ignore", str(ROOT / "tests" / "data" / "make_cupy_names.py"), "--output", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    fresh = json.loads(out.read_text())
    committed = json.loads((ROOT / "tests" / "data" / "cupy_names.json").read_text())
    assert committed["device_properties"]["keys"]
    fresh.pop("device_properties"), committed.pop("device_properties")
    for key in committed:
        assert fresh[key] == committed[key], f"tests/data/cupy_names.json: {key!r} differs; run `make fidelity`"
