"""Fail on a circle of #include among the C, C++ and CUDA files of the package.

import-linter keeps the Python layers in one direction; this does the same for the headers:
the C core (src/cunumpy/_core), the emulator's headers (src/cunumpy/_emulation/include) and
the CUDA headers shipped to kernels (src/cunumpy/cuda/include). An include is resolved the way
the compilers see it here: a quoted name beside the including file first, then in each of the
three include roots; an angle-bracket name in the include roots only. Names that resolve to no
file of the tree (system and CUDA headers) are not followed. Prints each circle found, as a
chain of files, and exits 1 when there is one.

Usage: python tools/check_includes.py [ROOT]   (ROOT: the repository, default: its parent folder)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SUFFIXES = {".h", ".c", ".cuh", ".cu", ".cpp", ".hpp"}
INCLUDE_ROOTS = ("src/cunumpy/_core", "src/cunumpy/_emulation/include", "src/cunumpy/cuda/include")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in (root / "src").rglob("*") if p.suffix in SUFFIXES and p.is_file())


def _resolve(name: str, quoted: bool, here: Path, roots: list[Path]) -> Path | None:
    candidates = ([here.parent] if quoted else []) + roots
    for d in candidates:
        path = d / name
        if path.is_file():
            return path.resolve()
    return None


def include_graph(root: Path) -> dict[Path, list[Path]]:
    """Each source file of the tree and the files of the tree it includes, in order."""
    roots = [root / r for r in INCLUDE_ROOTS]
    graph: dict[Path, list[Path]] = {}
    for path in _sources(root):
        text = _COMMENT.sub("", path.read_text(encoding="utf-8", errors="replace"))
        targets = []
        for kind, name in _INCLUDE.findall(text):
            target = _resolve(name.strip(), kind == '"', path, roots)
            if target is not None and target != path.resolve():
                targets.append(target)
        graph[path.resolve()] = targets
    return graph


def circles(graph: dict[Path, list[Path]]) -> list[list[Path]]:
    """Every back edge of a depth-first walk, as the circle it closes."""
    found: list[list[Path]] = []
    state: dict[Path, int] = {}  # 1: on the current path, 2: done
    path: list[Path] = []

    def visit(node: Path) -> None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]).resolve() if len(argv) > 1 else Path(__file__).resolve().parent.parent
    graph = include_graph(root)
    found = circles(graph)
    for chain in found:
        print("include circle: " + " -> ".join(str(p.relative_to(root)) for p in chain))
    edges = sum(len(v) for v in graph.values())
    print(f"check_includes: {len(found)} circles among {len(graph)} C/C++/CUDA files ({edges} includes)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
