"""Every code block of the documentation runs, or says why it cannot run here.

The pages of docs/, README.md and src/cunumpy/LLM_GUIDE.md are read as Markdown:
- ```python blocks run, in page order and in one namespace per page, in a fresh
  interpreter: once on NumPy and once on the fake CuPy (CUNUMPY_FAKE_CUPY=1
  CUNUMPY_BACKEND=cupy, where CUDA launches emulate on the CPU by themselves);
- a block whose first line is a comment "not run here: <reason>" is shown, not run (a GPU,
  a cluster, a Mac);
- shell blocks (sh, bash, console) are commands: each says either "not run here:
  <reason>" or "CI runs this: <where>" in its first line;
- other code (cuda, c++, toml, ...) must be marked the same way; the code of the tutorials
  is included from examples/ ({literalinclude}), which tests/unit/test_examples.py runs;
- text blocks (output, file trees) are not code.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "src" / "cunumpy" / "LLM_GUIDE.md"]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(\{[^}]*\})?\s*([^\s`]*)")
PYTHON = {"python", "py", "python3"}
SHELL = {"sh", "bash", "console", "shell"}
TEXT = {"text", "", "none"}
NOT_RUN = re.compile(r"^\s*(#|//)\s*not run here:\s*\S")
CI_RUNS = re.compile(r"^\s*#\s*CI runs this:\s*\S")


def blocks(path):
    """(first line number, language, text) of each fenced code block of a Markdown file."""
    out, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, directive, lang = m.group(2), m.group(3), m.group(4).lower()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        if directive is None or directive == "{code-block}":
            if directive == "{code-block}":
                body = [b for b in body if not b.startswith(":")]
            out.append((i + 1, lang, "\n".join(body)))
        i = j + 1
    return out


def _first_code_line(text):
    return next((line for line in text.splitlines() if line.strip()), "")


def _runnable(path):
    return [
        (line, text)
        for line, lang, text in blocks(path)
        if lang in PYTHON and not NOT_RUN.match(_first_code_line(text))
    ]


RUNNER = r"""
import json, sys, traceback
name, blocks = sys.argv[1], json.load(open(sys.argv[2]))
namespace = {"__name__": "__main__"}
for line, text in blocks:
    try:
        exec(compile(text, f"{name}:{line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"the block at {name} line {line} failed")
"""

ENVIRONMENTS = {
    "numpy": {},
    "fake-cupy": {"CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_BACKEND": "cupy"},
}

CASES = [(page, env) for page in PAGES if _runnable(page) for env in ENVIRONMENTS]


@pytest.mark.parametrize("page,env", CASES, ids=[f"{p.relative_to(ROOT)}-{e}" for p, e in CASES])
def test_python_blocks_run(page, env, tmp_path):
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(_runnable(page)))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    environment.update(ENVIRONMENTS[env], MPLBACKEND="Agg")
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(page.relative_to(ROOT)), str(spec)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_other_block_is_marked(page):
    unmarked = []
    for line, lang, text in blocks(page):
        first = _first_code_line(text)
        if lang in PYTHON or lang in TEXT:
            continue
        if NOT_RUN.match(first) or (lang in SHELL and CI_RUNS.match(first)):
            continue
        unmarked.append(f"line {line} ({lang})")
    assert not unmarked, f"{page.relative_to(ROOT)}: code blocks neither run nor marked: {', '.join(unmarked)}"


def test_the_block_reader():
    sample = ROOT / "build" / "docs" / "_block_reader_sample.md"
    sample.parent.mkdir(parents=True, exist_ok=True)
    sample.write_text(
        "a\n```python\nx = 1\n```\n```{toctree}\nindex\n```\n```sh\n# not run here: a GPU\nnvidia-smi\n```\n"
        "```{code-block} python\n:caption: c\n# not run here: needs MPI\ny = 2\n```\n"
    )
    found = blocks(sample)
    assert [(lang, text) for _, lang, text in found] == [
        ("python", "x = 1"),
        ("sh", "# not run here: a GPU\nnvidia-smi"),
        ("python", "# not run here: needs MPI\ny = 2"),
    ]
    assert _runnable(sample) == [(2, "x = 1")]
