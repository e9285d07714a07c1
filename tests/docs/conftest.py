"""The documentation tests read the site `make docs` built into build/docs/html."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "docs" / "html"


@pytest.fixture(scope="session")
def built_site():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site in {SITE}: run `make docs` first (`make test-docs` does)")
    return SITE
