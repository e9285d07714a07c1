"""This package is numbered after the earlier release on the package index (issue 33 item 8):
0.8.0 and later, while the index's cunumpy is 0.7.1, a different implementation."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import cunumpy as xp
from cunumpy import _backend

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_after_the_earlier_release():
    numbers = tuple(int(p) for p in re.findall(r"\d+", xp.__version__)[:3])
    assert numbers >= (0, 8, 0)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{xp.__version__}"' in text
    assert f"## {xp.__version__}" in (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    xp.require_version("0.8.0")


def test_require_version_refuses_the_earlier_release_and_says_how_to_get_this_one(monkeypatch):
    monkeypatch.setattr(_backend, "installed_version", lambda: "0.7.1")
    with pytest.raises(ImportError) as info:
        xp.require_version("0.8.0")
    text = str(info.value)
    assert "cunumpy 0.8.0 or newer is required, but 0.7.1 is installed" in text
    assert "make install" in text and "make wheel" in text and "python -m cunumpy info" in text
    assert "pip install --upgrade cunumpy" not in text  # that installs 0.7.1 again
    xp.require_version("0.7.0")


def test_info_names_the_version_first():
    out = subprocess.run(
        [sys.executable, "-m", "cunumpy", "info"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.splitlines()[0] == f"cunumpy {xp.__version__}"


def test_install_page_tells_the_two_apart():
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert "0.7.1" in text and "python -m cunumpy info" in text and "make wheel" in text
