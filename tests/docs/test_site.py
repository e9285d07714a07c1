"""The built site (build/docs/html, made by `make docs`): every internal link resolves,
no page carries a Sphinx error marker, and headless Chromium opens the index, a tutorial
and an API page.

Chromium is Debian's `chromium` package. When it is missing and the test runs as root with
apt-get (a CI machine), the session installs it; elsewhere the browser test skips with the
reason, except under CI=true, where a missing browser fails.
"""

import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

BROWSER_PAGES = ["index.html", "tutorials/porting.html", "api/kernels.html"]
# What each of those pages must show once the browser has run its scripts.
EXPECTED = {
    "index.html": "One NumPy-like namespace",
    "tutorials/porting.html": "Port a host kernel to CUDA",
    "api/kernels.html": "cunumpy.kernels.CudaKernel",
}
ERROR_MARKERS = ('class="system-message"', 'class="problematic"')


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and not (tag == "link" and attrs.get("rel") in ("preload",)):
                self.links.append(attrs[key])


def _parse(text):
    parser = _Links()
    parser.feed(text)
    return parser


def broken_links(site, page, text, cache):
    """The internal links of ``page`` (HTML text) that lead nowhere."""
    broken = []
    for link in _parse(text).links:
        parts = urlsplit(link)
        if parts.scheme in ("http", "https", "mailto", "data", "javascript") or parts.netloc:
            continue
        target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
        if parts.scheme == "file":
            target = Path(unquote(parts.path))
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file() or site.resolve() not in (target.resolve(), *target.resolve().parents):
            broken.append(f"{link} (no file {target})")
            continue
        if parts.fragment and target.suffix == ".html":
            if target not in cache:
                cache[target] = _parse(target.read_text(encoding="utf-8")).ids
            if unquote(parts.fragment) not in cache[target]:
                broken.append(f"{link} (no anchor #{parts.fragment})")
    return broken


def _pages(site):
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)


def test_every_internal_link_of_every_page_resolves(built_site):
    cache, problems = {}, []
    for page in _pages(built_site):
        for link in broken_links(built_site, page, page.read_text(encoding="utf-8"), cache):
            problems.append(f"{page.relative_to(built_site)}: {link}")
    assert not problems, "broken internal links:\n" + "\n".join(problems[:50])


def test_no_page_has_a_sphinx_error_marker(built_site):
    marked = [
        str(p.relative_to(built_site))
        for p in _pages(built_site)
        if any(m in p.read_text(encoding="utf-8") for m in ERROR_MARKERS)
    ]
    assert not marked, f"pages with Sphinx error markers: {marked}"


def test_the_site_has_every_page_of_the_table_of_contents(built_site):
    for page in [
        "install.html",
        "getting-started.html",
        "changelog.html",
        "compatibility.html",
        "tutorials/porting.html",
        "tutorials/structs.html",
        "tutorials/mpi-halo.html",
        "tutorials/pic.html",
        "guides/testing.html",
        "guides/emulator.html",
        "guides/performance.html",
        "api/index.html",
        "api/cunumpy.html",
    ]:
        assert (built_site / page).is_file(), page


def test_the_link_checker_finds_broken_links(tmp_path):
    (tmp_path / "a.html").write_text(
        '<p id="here"></p><a href="b.html#there">x</a><a href="#here">y</a>'
        '<a href="missing.html">z</a><a href="https://example.org/">w</a>'
    )
    (tmp_path / "b.html").write_text('<h1 id="elsewhere"></h1>')
    found = broken_links(tmp_path, tmp_path / "a.html", (tmp_path / "a.html").read_text(), {})
    assert len(found) == 2 and "no anchor #there" in found[0] and "missing.html" in found[1]


# --------------------------------------------------------------------------- the browser


def _find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _install_chromium():
    """Debian's chromium, installed once per machine (a lock serialises the test workers)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "chromium is not installed (Debian: apt-get install chromium), and this test installs it only as root"
    lock_path = Path(tempfile.gettempdir()) / "cunumpy-chromium-install.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _find_chromium():
            return None
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
            if done.returncode != 0:
                return f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def chromium():
    path = _find_chromium()
    if path is None:
        reason = _install_chromium()
        path = _find_chromium()
        if path is None:
            message = f"headless Chromium is needed to check the site in a browser: {reason}"
            if os.environ.get("CI", "") == "true":
                pytest.fail(message)
            pytest.skip(message)
    return path


def _dump_dom(chromium, page):
    """The document after the browser loaded the page and ran its scripts."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=3000",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("name", BROWSER_PAGES)
def test_the_page_opens_in_headless_chromium(built_site, chromium, name):
    page = built_site / name
    assert page.is_file(), f"missing page {name}"
    dom = _dump_dom(chromium, page)
    assert "<html" in dom and EXPECTED[name] in dom, dom[:2000]
    assert not any(m in dom for m in ERROR_MARKERS), f"{name} shows a Sphinx error marker"
    broken = broken_links(built_site, page, dom, {})
    assert not broken, f"{name}: broken links after the scripts ran: {broken}"


def test_no_page_points_to_the_internal_specification(built_site):
    """Docstrings written for maintainers cite API.md sections; the site's readers have no API.md."""
    citing = [str(p.relative_to(built_site)) for p in _pages(built_site) if "API.md" in p.read_text(encoding="utf-8")]
    assert not citing, f"pages citing API.md: {citing}"


# --------------------------------------------------------------------------- widths

# The pages whose code blocks and tables are checked at 1280 px: the ones the browser opens
# above, and those with the widest code and tables.
WIDTH_PAGES = [
    *BROWSER_PAGES,
    "getting-started.html",
    "tutorials/mpi-halo.html",
    "guides/testing.html",
    "guides/emulator.html",
    "guides/ordering.html",
    "guides/pyodide.html",
    "guides/pyccel-kernel.html",
]
WIDTH = 1280

# Run by the browser after the page has loaded: every code block (<pre>) and table that is
# wider than its column (its content scrolls or sticks out), written into the document.
_MEASURE = """
<script>
window.addEventListener("load", () => {
  const column = document.querySelector("article.bd-article") || document.body;
  const right = column.getBoundingClientRect().right;
  const found = [];
  const describe = (el) => (el.textContent || "").trim().slice(0, 60).replace(/\\s+/g, " ");
  for (const el of column.querySelectorAll("pre, table")) {
    const box = el.getBoundingClientRect();
    const scroller = el.tagName === "TABLE" ? el.closest(".pst-scrollable-table-container") || el : el;
    if (scroller.scrollWidth > scroller.clientWidth + 1 || box.right > right + 1) {
      found.push(`${el.tagName.toLowerCase()} (${Math.round(scroller.scrollWidth)} px in ` +
                 `${Math.round(scroller.clientWidth)} px): ${describe(el)}`);
    }
  }
  const out = document.createElement("pre");
  out.id = "cunumpy-width-check";
  out.textContent = JSON.stringify({column: Math.round(column.getBoundingClientRect().width), found});
  document.body.appendChild(out);
});
</script>
"""


def _overflowing(chromium, page, width):
    """(column width, [descriptions of the code blocks and tables wider than their column])
    of ``page`` in a ``width``-pixel window. A copy of the page with the measuring script is
    written beside it (so that its stylesheets load) and removed again."""
    text = page.read_text(encoding="utf-8")
    probe = page.with_name(f".width-check-{os.getpid()}-{page.name}")
    probe.write_text(text.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    try:
        with tempfile.TemporaryDirectory() as profile:
            done = subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--hide-scrollbars",
                    f"--window-size={width},1000",
                    f"--user-data-dir={profile}",
                    "--virtual-time-budget=5000",
                    "--dump-dom",
                    probe.resolve().as_uri(),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
    finally:
        probe.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="cunumpy-width-check"[^>]*>(.*?)</pre>', done.stdout, re.S)
    assert found, "the measuring script did not run: " + done.stdout[-1000:]
    result = json.loads(html.unescape(found.group(1)))
    return result["column"], result["found"]


@pytest.mark.parametrize("name", WIDTH_PAGES)
def test_no_code_block_or_table_is_wider_than_its_column_at_1280_px(built_site, chromium, name):
    page = built_site / name
    assert page.is_file(), f"missing page {name}"
    column, found = _overflowing(chromium, page, WIDTH)
    assert column > 300, f"{name}: the article column is only {column} px wide at {WIDTH} px"
    assert not found, f"{name} at {WIDTH} px, column {column} px: cut off or scrolling:\n" + "\n".join(found)


def test_the_width_check_finds_a_code_line_that_does_not_fit(built_site, chromium, tmp_path):
    # a page of the built site with one unbreakable code line and one over-wide table added
    page = built_site / "install.html"
    wide = "x" * 400
    extra = f'<pre style="white-space: pre">{wide}</pre><table style="width: 3000px"><tr><td>t</td></tr></table>'
    text = page.read_text(encoding="utf-8").replace("</article>", extra + "</article>", 1)
    probe = page.with_name(f".width-check-planted-{os.getpid()}.html")
    probe.write_text(text, encoding="utf-8")
    try:
        _, found = _overflowing(chromium, probe, WIDTH)
    finally:
        probe.unlink(missing_ok=True)
    assert any(f.startswith("pre ") and wide[:60] in f for f in found), found
    assert any(f.startswith("table ") for f in found), found


def test_no_page_has_an_empty_section_navigation(built_site):
    # the theme's left sidebar on a page without sub-pages: a heading over nothing
    empty = re.compile(r'Section Navigation</p>\s*<div class="bd-toc-item navbar-nav"></div>')
    found = [str(p.relative_to(built_site)) for p in _pages(built_site) if empty.search(p.read_text(encoding="utf-8"))]
    assert not found, f"pages with an empty 'Section Navigation' heading: {found}"


ANALYSIS_SOURCE = r"""
extern "C" __global__ void transpose_naive(float* out, const float* in) {
    __shared__ float tile[32][32];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}
"""


def test_the_analysis_page_opens_in_headless_chromium(chromium, tmp_path):
    """KernelAnalysis.to_html: one self-contained page with the source and its figures."""
    import numpy as np

    from cunumpy import kernel_testing as kt
    from cunumpy.kernels import CudaKernel

    if kt.emulation_compiler() is None:
        pytest.skip("needs a C++ compiler for the CPU emulation")
    x = np.arange(1024, dtype=np.float32)
    analysis = kt.analyze_kernel(
        CudaKernel(ANALYSIS_SOURCE, "transpose_naive"), np.zeros_like(x), x, grid=1, block=(32, 32)
    )
    page = analysis.to_html(tmp_path / "analysis.html")
    dom = _dump_dom(chromium, page)
    assert "tile[threadIdx.x][threadIdx.y]" in dom and "992 conflicts" in dom, dom[:3000]
