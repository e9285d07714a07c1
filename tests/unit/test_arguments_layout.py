"""CudaStruct.verify_layout without a GPU: the compile-time check with nvcc for sm_90, for every
struct the argument tests define (16-D views, bool and complex<double> fields, awkward padding)."""

import sys
from pathlib import Path

import pytest

from cunumpy import _struct_layout
from cunumpy.arguments import CudaStruct

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_arguments as ta

HAVE_NVCC = _struct_layout.toolkit_compiler()[0] is not None
_skip_without_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="the CUDA toolkit (nvcc) is not installed")


def needs_nvcc(test):
    """Skipped without nvcc; not run under the sanitizer build (nvcc crashes with ASan preloaded)."""
    return pytest.mark.nosan(_skip_without_nvcc(test))


def every_test_struct():
    """The structs defined by test_arguments.py, and a few more with awkward layouts."""
    structs = [CudaStruct(f"Scalar{k}", [("pad", "char"), ("v", c)]) for k, (c, _, _) in enumerate(ta.SCALAR_TYPES)]
    structs += ta.committed_structs()
    structs += [
        ta.DeviceArgs.struct,
        ta.PickledArgs.struct,
        CudaStruct(
            "Views",
            [
                ("x", "const double*"),
                ("raw", "void*"),
                ("n", "int"),
                ("a", "Array2D<float>"),
                ("c", "CArray3D<int>"),
                ("big", "Array16D<double>"),
                ("cbig", "CArray16D<bool>"),
            ],
        ),
        CudaStruct("P", [("b", "bool"), ("c", "complex<double>"), ("s", "short"), ("x", "double*"), ("t", "char")]),
        CudaStruct("Tail", [("d", "double"), ("b", "bool")]),
        CudaStruct(
            "Mixed",
            [
                ("f", "complex<float>"),
                ("u8", "uint8_t"),
                ("z", "complex<double>"),
                ("i", "int16_t"),
                ("v", "Array1D<complex<double>>"),
                ("k", "size_t"),
                ("e", "bool"),
            ],
        ),
        CudaStruct.from_signature(ta.MarkerArgumentsHost.__init__, "FromSignature"),
        CudaStruct.from_pyccel_class(ta.PYCCEL_SOURCE, "MarkerArguments", "FromPyccel", contiguous=True),
    ]
    return structs


@needs_nvcc
def test_every_test_struct_matches_the_compiler_layout():
    structs = every_test_struct()
    results = _struct_layout.compile_time_layouts(structs)
    for s, r in zip(structs, results):
        assert r == {"sizeof": s.itemsize, "alignof": s.alignment, **dict(zip(s.field_names, s.offsets))}


@needs_nvcc
def test_verify_layout_returns_the_dict_and_reads_a_header():
    marker, field = ta.committed_structs()
    result = marker.verify_layout()
    # One flat dict, as earlier releases and the guide's examples have it.
    assert result == {"sizeof": marker.itemsize, "alignof": 8, **dict(zip(marker.field_names, marker.offsets))}
    assert list(result)[:2] == ["sizeof", "alignof"] and "offsets" not in result
    small = CudaStruct("Small", [("data", "double*"), ("n", "int")]).verify_layout()
    assert small == {"sizeof": 16, "alignof": 8, "data": 0, "n": 8}
    assert field.verify_layout(ta.HEADER)["alignof"] == 16


@needs_nvcc
def test_a_wrong_layout_lists_every_difference(tmp_path):
    S = CudaStruct("W", [("b", "bool"), ("z", "complex<double>"), ("n", "int")])
    header = tmp_path / "w.cuh"
    header.write_text("#pragma once\nstruct W { bool b; char pad[20]; complex<double> z; int n; };\n")
    with pytest.raises(ValueError) as info:
        S.verify_layout(str(header))
    text = str(info.value)
    assert "struct 'W'" in text and "sizeof: compiler 48, dtype 48" not in text
    assert "sizeof: compiler 64, dtype 48" in text
    assert "offsetof z: compiler 32, dtype 16" in text and "offsetof n: compiler 48, dtype 32" in text
    assert "offsetof b" not in text


@needs_nvcc
def test_a_definition_that_does_not_compile_is_a_value_error(tmp_path):
    header = tmp_path / "bad.cuh"
    header.write_text("struct B { int n; oops };\n")
    with pytest.raises(ValueError, match="does not compile"):
        CudaStruct("B", [("n", "int")]).verify_layout(header)
    with pytest.raises(ValueError, match="does not exist"):
        CudaStruct("B", [("n", "int")]).verify_layout(tmp_path / "absent.cuh")


def test_without_any_toolkit_runtime_error_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(_struct_layout, "_gpu_usable", lambda: False)
    monkeypatch.setattr(_struct_layout, "toolkit_compiler", lambda: (None, "no CUDA toolkit found (test)"))
    with pytest.raises(RuntimeError, match="needs a usable GPU with CuPy, or the CUDA toolkit.*no CUDA toolkit found"):
        CudaStruct("S", [("n", "int")]).verify_layout()


def test_toolkit_lookup_without_nvcc(monkeypatch, tmp_path):
    monkeypatch.setattr(_struct_layout.shutil, "which", lambda name: None)
    monkeypatch.setattr(_struct_layout, "_toolkit_root", lambda: None)
    kind, why = _struct_layout.toolkit_compiler()
    assert kind is None and "nvcc" in why


def test_layout_source_is_the_probe_kernel():
    S = CudaStruct("S", [("x", "double*"), ("a", "Array2D<double>"), ("z", "complex<double>")])
    src = S.layout_source()
    assert 'extern "C" __global__ void cunumpy_layout_S(unsigned long long* out)' in src
    assert "out[0] = sizeof(S);" in src and "out[1] = alignof(S);" in src and "out[4] =" in src
    assert "#include <cunumpy/array_view.cuh>" in src and S.declaration in src
    with_header = S.layout_source("args.cuh")
    assert '#include "args.cuh"' in with_header and "struct S {" not in with_header


@needs_nvcc
def test_the_gpu_probe_source_compiles_for_sm_90(tmp_path):
    """The probe that verify_layout runs on a GPU (offsets by address arithmetic) compiles."""
    import subprocess

    S = every_test_struct()[-5]
    src = tmp_path / "probe.cu"
    src.write_text(S.layout_source())
    _kind, nvcc = _struct_layout.toolkit_compiler()
    opts = _struct_layout._include_options(_struct_layout._toolkit_root(), ())
    proc = subprocess.run(
        [nvcc, "-arch=sm_90", "--std=c++17", "-ptx", str(src), "-o", str(tmp_path / "p.ptx"), *opts],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
