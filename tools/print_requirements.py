"""Print the requirements of cunumpy and the given extras, one per line, from pyproject.toml.

The Makefile installs these with pip's normal build isolation (some, like pyccel, are
sdists with their own build backends) and then builds cunumpy alone without isolation,
so the incremental meson build directory is reused. Self-references such as
``cunumpy[test,compiled]`` are expanded.
"""

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads(Path(__file__).resolve().parents[1].joinpath("pyproject.toml").read_text())["project"]
    name = project["name"]
    optional = project.get("optional-dependencies", {})
    seen: set[str] = set()
    out = list(project.get("dependencies", []))

    def add(extra: str) -> None:
        if extra in seen:
            return
        if extra not in optional:
            sys.exit(f"print_requirements: no extra {extra!r} in pyproject.toml")
        seen.add(extra)
        for req in optional[extra]:
            self_ref = re.fullmatch(rf"{re.escape(name)}\[([^\]]*)\]", req.replace(" ", ""))
            if self_ref:
                for inner in self_ref.group(1).split(","):
                    add(inner)
            elif req not in out:
                out.append(req)

    for extra in extras:
        add(extra)
    return out


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
