"""LLM_GUIDE.md and README.md are written by hand, short, and checked against the facts the
site is generated from: every name they cite exists in the installed package (whose
docstrings make the API reference), every environment variable they name is read by the
package, and their code runs (tests/docs/test_code_blocks.py). The guide stays short."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "src" / "cunumpy" / "LLM_GUIDE.md"
TEXTS = [GUIDE, ROOT / "README.md"]
NAME = re.compile(r"\b(xp|cunumpy|kernel_testing|kt)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
ENV = re.compile(r"\bCUNUMPY_[A-Z_]+\b")
# Placeholders and names of the backends' own namespaces that prose uses generically.
# "cunumpy.emulation" is a logger name (logging.getLogger), not a module
PLACEHOLDERS = {"xp.f", "xp.name", "xp.numpy_backend", "xp.cupy_backend", "cunumpy.emulation"}
ROOTS = {
    "xp": "cunumpy",
    "cunumpy": "cunumpy",
    "kernel_testing": "cunumpy.kernel_testing",
    "kt": "cunumpy.kernel_testing",
}


def cited_names(text):
    for match in NAME.finditer(text):
        name = match.group(1) + match.group(2)
        if name.rsplit(".", 1)[-1] not in ("py", "md", "cu", "cuh"):  # file names
            yield name


def resolves(dotted):
    root, *parts = dotted.split(".")
    module_name = ROOTS[root]
    obj = importlib.import_module(module_name)
    for i, part in enumerate(parts):
        if part.endswith("_") and i == len(parts) - 1:  # `xp.rng.philox_*`: a family of names
            return any(n.startswith(part) for n in dir(obj))
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:  # a submodule not imported by its package (cunumpy.kernel_testing, cunumpy.xp)
            module_name = f"{module_name}.{'.'.join(parts[: i + 1])}" if i == 0 else None
            obj = importlib.import_module(module_name) if module_name else None
        except ImportError:
            obj = None
        if obj is None:
            return False
    return True


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the guide names the old private paths
@pytest.mark.parametrize("path", TEXTS, ids=[p.name for p in TEXTS])
def test_every_cited_name_exists(path):
    missing = sorted(
        {n for n in cited_names(path.read_text(encoding="utf-8")) if n not in PLACEHOLDERS and not resolves(n)}
    )
    assert not missing, f"{path.name} cites names the package does not have: {missing}"


@pytest.mark.parametrize("path", TEXTS, ids=[p.name for p in TEXTS])
def test_every_environment_variable_is_read_by_the_package(path):
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py"))
    named = set(ENV.findall(path.read_text(encoding="utf-8")))
    unread = sorted(v for v in named if v not in sources)
    assert not unread, f"{path.name} names variables the package never reads: {unread}"


def test_the_guide_stays_short():
    # 700 lines before the rewrite that made it the short form of the site; 460 until release
    # 0.8.0 added the performance analysis, CUDA code as written (vector types, globals, name
    # expressions), the distributed particle-in-cell example and the emulation prebuild, each
    # in a few lines with the details on the site.
    assert len(GUIDE.read_text(encoding="utf-8").splitlines()) <= 520


def test_the_name_check_finds_a_missing_name():
    assert resolves("xp.algorithms.compact_by_mask") and resolves("kernel_testing.check_parity")
    assert not resolves("xp.algorithms.compact_by_maks") and not resolves("xp.CudaKernel")


def _fixture_table(text):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| test | no variables |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_site_and_the_guide_have_the_same_fixture_table():
    site = (ROOT / "docs" / "guides" / "testing.md").read_text(encoding="utf-8")
    assert _fixture_table(site) == _fixture_table(GUIDE.read_text(encoding="utf-8"))
