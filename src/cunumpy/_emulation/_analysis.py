"""Performance analysis of emulated launches: what a GPU's memory system and warp schedulers
would see of a launch, per source line, without a GPU.

The counting runs in the C runtime (``src/cunumpy/_core/emu/emu_analysis.c``) on a kernel
library built with checks mode 3 (every access reported with its code address) and
``-fsanitize-coverage=trace-pc`` (every basic block); this module maps the runtime's rows (per
code address) to source lines, adds the occupancy from ``nvcc``'s resource usage and the
architecture tables below, and formats the result. The counting rules are stated in
``docs/guides/performance-analysis.md``.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ARCHS", "KernelAnalysis", "analyzed_launches", "occupancy"]

#: compiler flags of an analysed library (beside checks mode 3)
ANALYSIS_FLAGS = ("-DCUNUMPY_EMU_ANALYSIS=1", "-fsanitize-coverage=trace-pc,trace-cmp")

# Classes of the runtime's rows (emu_analysis.h).
_GLOBAL_LOAD, _GLOBAL_STORE, _SHARED_LOAD, _SHARED_STORE, _GLOBAL_ATOMIC, _SHARED_ATOMIC, _BLOCK, _BARRIER, _BRANCH = (
    range(9)
)

#: The per-line and total figures, in the order of the tables.
MEMORY_KEYS = (
    "global_load_requests",
    "global_load_sectors",
    "global_load_ideal_sectors",
    "global_store_requests",
    "global_store_sectors",
    "global_store_ideal_sectors",
    "shared_load_requests",
    "shared_load_wavefronts",
    "shared_load_ideal_wavefronts",
    "shared_store_requests",
    "shared_store_wavefronts",
    "shared_store_ideal_wavefronts",
    "shared_bank_conflicts",
    "atomic_requests",
    "atomic_same_address_max",
    "divergent_branches",
    "active_lanes_avg",
    "barriers",
)
OCCUPANCY_KEYS = (
    "registers_per_thread",
    "local_bytes_per_thread",
    "static_shared_bytes",
    "occupancy",
    "occupancy_limiter",
)

# ---------------------------------------------------------------------------------------------
# Architecture limits, per SM unless said otherwise. Sources: the CUDA C++ Programming Guide,
# "Compute Capabilities", table "Technical Specifications per Compute Capability" (threads,
# warps, blocks, registers, shared memory per SM and per block), and the CUDA toolkit's
# include/cuda_occupancy.h (register allocation unit 256 per warp and 4 sub-partitions for
# cc 7.x to 9.x, shared memory allocation unit 256 bytes for cc 7.x and 128 for 8.x/9.x, the
# 1 KiB of shared memory the driver reserves per block from cc 8.0 on, the per-block register
# check rounded to the sub-partitions). Shared memory per SM is the largest carveout (the
# driver picks the carveout a launch needs).
_ARCH_FIELDS = (
    "max_warps",
    "max_blocks",
    "regs",
    "regs_per_block",
    "smem",
    "smem_per_block",
    "smem_reserved",
    "smem_unit",
)
_K = 1024
ARCHS: dict[str, dict[str, int]] = {
    name: dict(zip(_ARCH_FIELDS, values))
    for name, values in {
        # warps, blocks, registers, per block, shared per SM, per block, reserved, unit
        "sm_70": (64, 32, 65536, 65536, 96 * _K, 96 * _K, 0, 256),
        "sm_75": (32, 16, 65536, 65536, 64 * _K, 64 * _K, 0, 256),
        "sm_80": (64, 32, 65536, 65536, 164 * _K, 163 * _K, _K, 128),
        "sm_86": (48, 16, 65536, 65536, 100 * _K, 99 * _K, _K, 128),
        "sm_89": (48, 24, 65536, 65536, 100 * _K, 99 * _K, _K, 128),
        "sm_90": (64, 32, 65536, 65536, 228 * _K, 227 * _K, _K, 128),
    }.items()
}
_REG_UNIT = 256  # registers are allocated per warp in units of 256 (cuda_occupancy.h)
_SUB_PARTITIONS = 4


def check_arch(arch: object, what: str) -> str:
    """``arch`` as one of ARCHS' names (``"sm_90"``, also ``"90"`` or ``"sm90"``)."""
    if not isinstance(arch, str):
        raise TypeError(f"{what}: 'arch' must be a str such as 'sm_90', not {type(arch).__name__}")
    name = arch.strip().lower()
    if name.isdigit():
        name = "sm_" + name
    elif name.startswith("sm") and not name.startswith("sm_"):
        name = "sm_" + name[2:]
    if name not in ARCHS:
        raise ValueError(f"{what}: unknown arch {arch!r}; choose from {', '.join(ARCHS)}")
    return name


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def occupancy(
    arch: str, threads_per_block: int, registers: int, shared_bytes: int
) -> tuple[float, str, dict[str, int]]:
    """Theoretical occupancy of a launch on ``arch``.

    Parameters
    ----------
    arch : str
        An architecture of :data:`ARCHS`.
    threads_per_block : int
        The block's threads.
    registers : int
        Registers per thread.
    shared_bytes : int
        Static plus dynamic shared memory per block.

    Returns
    -------
    tuple of (float, str, dict)
        Resident warps over the maximum, the limiter (``"threads"``, ``"blocks"``,
        ``"registers"``, ``"shared memory"`` or ``"none"``) and the blocks per SM each resource
        allows.
    """
    a = ARCHS[check_arch(arch, "occupancy()")]
    warps = -(-threads_per_block // 32)
    limits: dict[str, int] = {}
    limits["threads"] = a["max_warps"] // warps
    limits["blocks"] = a["max_blocks"]
    per_warp = _round_up(registers * 32, _REG_UNIT)
    if per_warp == 0:
        limits["registers"] = 1 << 30
    elif per_warp * _round_up(warps, _SUB_PARTITIONS) > a["regs_per_block"] or per_warp * warps > a["regs_per_block"]:
        limits["registers"] = 0  # the launch itself fails
    else:
        limits["registers"] = (a["regs"] // _SUB_PARTITIONS // per_warp) * _SUB_PARTITIONS // warps
    if shared_bytes > a["smem_per_block"]:
        limits["shared memory"] = 0  # the launch itself fails
    else:
        smem = _round_up(shared_bytes + a["smem_reserved"], a["smem_unit"])
        limits["shared memory"] = a["smem"] // smem if smem else 1 << 30
    blocks = min(limits.values())
    ratio = blocks * warps / a["max_warps"]
    if ratio >= 1.0:
        return 1.0, "none", limits
    limiter = next(k for k in ("threads", "blocks", "registers", "shared memory") if limits[k] == blocks)
    return ratio, limiter, limits


# ---------------------------------------------------------------------------------------------
# Resource usage from nvcc

_usage_cache: dict = {}
_usage_lock = threading.Lock()
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
_FUNC_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def _demangled_base(name: str) -> str:
    """``copy`` from ``_Z4copyPfPKfi`` (a plain name stays as it is)."""
    m = re.match(r"_Z(\d+)(\w+)", name)
    if m is None:
        return name
    n = int(m.group(1))
    return m.group(2)[:n]


def resource_usage(kernel, arch: str) -> tuple[dict[str, Any], str]:
    """(registers_per_thread, local_bytes_per_thread, static_shared_bytes) of ``kernel``'s entry
    from ``nvcc --resource-usage`` for ``arch``, and a note ("" when found). Cached per source."""
    from ..cuda._source import cuda_include_dir

    empty = {"registers_per_thread": None, "local_bytes_per_thread": None, "static_shared_bytes": None}
    key = (kernel.source, kernel.name, arch)
    with _usage_lock:
        if key in _usage_cache:
            return _usage_cache[key]
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        result = (empty, "occupancy needs nvcc (the CUDA toolkit), which was not found on PATH")
    else:
        with tempfile.TemporaryDirectory(prefix="cunumpy-usage-") as tmp:
            src = Path(tmp) / "kernel.cu"
            src.write_text(kernel.source)
            command = [nvcc, f"-arch={arch}", "-cubin", "--resource-usage", "-o", os.devnull, "-I", cuda_include_dir()]
            if kernel.source_dir is not None:
                command += ["-I", str(kernel.source_dir)]
            try:
                done = subprocess.run(
                    [*command, str(src)], capture_output=True, text=True, timeout=300, cwd=tmp, check=False
                )
                out = done.stdout + done.stderr
            except (OSError, subprocess.SubprocessError) as exc:
                out, done = str(exc), None
            result = _parse_usage(out, kernel.name, empty)
            if done is None or (done.returncode != 0 and result[0]["registers_per_thread"] is None):
                first = out.strip().splitlines()[:3]
                result = (empty, "nvcc could not compile the kernel for its resource usage: " + " ".join(first))
    with _usage_lock:
        _usage_cache[key] = result
    return result


def _parse_usage(out: str, name: str, empty: dict) -> tuple[dict[str, Any], str]:
    entries: dict[str, dict[str, int]] = {}
    current = None
    for line in out.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            entries[current] = {"registers_per_thread": 0, "local_bytes_per_thread": 0, "static_shared_bytes": 0}
            continue
        if current is None:
            continue
        m = _FUNC_PROPS.search(line)
        if m:
            entries[current]["local_bytes_per_thread"] = int(m.group(1))
            continue
        m = _USED.search(line)
        if m and "Used" in line:
            entries[current]["registers_per_thread"] = int(m.group(1))
            sm = re.search(r"(\d+) bytes smem", line)
            entries[current]["static_shared_bytes"] = int(sm.group(1)) if sm else 0
    base = name.split("<", 1)[0].strip()
    chosen = [v for k, v in entries.items() if _demangled_base(k) == base]
    if not chosen and len(entries) == 1:
        chosen = list(entries.values())
    if not chosen:
        return empty, f"nvcc's resource usage names no entry '{base}' (a template kernel is not instantiated there)"
    return dict(chosen[0]), ""


# ---------------------------------------------------------------------------------------------
# Source lines


_frames_cache: dict[tuple[str, int], list[tuple[str, int]]] = {}
_frames_lock = threading.Lock()


def _frames(lib: str, offsets: list[int]) -> dict[int, list[tuple[str, int]]]:
    """{offset: [(path, line), ...] innermost frame first} from addr2line (cached per library
    and offset: a library's file never changes under its name, the cache key is its hash)."""
    with _frames_lock:
        known = {o: _frames_cache[(lib, o)] for o in offsets if (lib, o) in _frames_cache}
    missing = [o for o in offsets if o not in known]
    if missing:
        found = _run_addr2line(lib, missing)
        with _frames_lock:
            for o in missing:
                if o in found:
                    _frames_cache[(lib, o)] = found[o]
        known.update(found)
    return known


def _run_addr2line(lib: str, offsets: list[int]) -> dict[int, list[tuple[str, int]]]:
    tool = shutil.which("addr2line")
    if tool is None or not offsets:
        return {}
    result: dict[int, list[tuple[str, int]]] = {}
    try:
        done = subprocess.run(
            [tool, "-e", lib, "-i", "-a"] + [hex(o) for o in offsets],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    current = None
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("0x"):
            current = int(line, 16)
            result[current] = []
            continue
        if current is None or line.startswith("??"):
            continue
        path, _, lineno = line.rpartition(":")
        lineno = lineno.split(" ", 1)[0]
        if path and lineno.isdigit() and lineno != "0":
            result[current].append((path, int(lineno)))
    return result


class _Source:
    """The text of source lines: the kernel's own source for its pseudo file, files otherwise."""

    def __init__(self, kernel, pseudo: str):
        self.kernel_lines = kernel.source.splitlines()
        self.pseudo = pseudo
        self.files: dict[str, list[str]] = {}

    def display(self, path: str) -> str:
        return path if os.path.exists(path) else os.path.basename(path)

    def lines_of(self, path: str) -> list[str] | None:
        if os.path.basename(path) == self.pseudo and not os.path.exists(path):
            return self.kernel_lines
        if path not in self.files:
            try:
                self.files[path] = Path(path).read_text(errors="replace").splitlines()
            except OSError:
                self.files[path] = []
        return self.files[path]

    def text(self, path: str, line: int) -> str:
        lines = self.lines_of(path) or []
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


# ---------------------------------------------------------------------------------------------
# The result


class LineAnalysis:
    """The figures of one source line: ``file``, ``line``, ``text`` and ``metrics``."""

    __slots__ = ("file", "line", "metrics", "text")

    def __init__(self, file: str, line: int, text: str, metrics: dict[str, Any]):
        self.file = file
        self.line = line
        self.text = text
        self.metrics = metrics

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.metrics.items() if v}
        return f"LineAnalysis({self.file}:{self.line} {self.text!r} {shown})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"file": self.file, "line": self.line, "text": self.text, "metrics": dict(self.metrics)}


def _empty_metrics() -> dict[str, Any]:
    m: dict[str, Any] = dict.fromkeys(MEMORY_KEYS, 0)
    m["active_lanes_avg"] = None
    m["_lanes"] = 0
    m["_block_execs"] = 0
    return m


def _finish(m: dict[str, Any]) -> dict[str, Any]:
    lanes, execs = m.pop("_lanes"), m.pop("_block_execs")
    m["active_lanes_avg"] = round(lanes / execs, 4) if execs else None
    m["shared_bank_conflicts"] = (
        m["shared_load_wavefronts"]
        - m["shared_load_ideal_wavefronts"]
        + m["shared_store_wavefronts"]
        - m["shared_store_ideal_wavefronts"]
    )
    return m


#: The keys of the memory classes' rows: (requests, counted, ideal).
_MEMORY_KEYS = {
    cls: (f"{name}_requests", f"{name}_{unit}", f"{name}_ideal_{unit}")
    for cls, name, unit in (
        (_GLOBAL_LOAD, "global_load", "sectors"),
        (_GLOBAL_STORE, "global_store", "sectors"),
        (_SHARED_LOAD, "shared_load", "wavefronts"),
        (_SHARED_STORE, "shared_store", "wavefronts"),
    )
}


def _add_row(
    m: dict[str, Any], cls: int, requests: int, a: int, ideal: int, divergent: int, same_max: int, lanes: int
) -> None:
    if cls != _BRANCH:
        m["_block_execs"] += requests
        m["_lanes"] += lanes
    keys = _MEMORY_KEYS.get(cls)
    if keys is not None:
        m[keys[0]] += requests
        m[keys[1]] += a
        m[keys[2]] += ideal
    elif cls in (_GLOBAL_ATOMIC, _SHARED_ATOMIC):
        m["atomic_requests"] += requests
        m["atomic_same_address_max"] = max(m["atomic_same_address_max"], same_max)
    elif cls == _BRANCH:
        m["divergent_branches"] += divergent
    elif cls == _BARRIER:
        m["barriers"] += requests


def _cost(m: dict[str, Any]) -> float:
    """How much a line wastes, for the ordering of tables: excess sectors and wavefronts,
    divergent branches, atomic serialisation."""
    return float(
        (m["global_load_sectors"] - m["global_load_ideal_sectors"])
        + (m["global_store_sectors"] - m["global_store_ideal_sectors"])
        + m["shared_bank_conflicts"]
        + 4 * m["divergent_branches"]
        + (m["atomic_same_address_max"] - 1 if m["atomic_same_address_max"] > 1 else 0)
    )


class KernelAnalysis:
    """What the GPU's memory system and warp schedulers would see of one emulated launch.

    Made by :func:`analyze_kernel` and :func:`analyzed_launches`, not by user code.

    Parameters
    ----------
    kernel, grid, block, shared_mem, arch, totals, lines, notes
        The attributes of the same names (below).
    source : dict of str to list of str
        The lines of each source file the analysis names, for the text and HTML views.

    Attributes
    ----------
    kernel : str
        The kernel's name.
    grid, block : tuple of int
        The launch shape (3 entries each).
    shared_mem : int
        Dynamic shared memory per block, in bytes.
    arch : str
        The architecture of the occupancy figures (``"sm_90"``).
    totals : dict
        The figures of the whole launch (keys in the guide).
    lines : list of LineAnalysis
        One entry per source line with any count, in file and line order.
    notes : list of str
        What could not be computed and why (occupancy without ``nvcc``).
    """

    def __init__(
        self,
        kernel: str,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        shared_mem: int,
        arch: str,
        totals: dict[str, Any],
        lines: list[LineAnalysis],
        notes: list[str],
        source: dict[str, list[str]],
    ) -> None:
        self.kernel: str = kernel
        self.grid: tuple[int, ...] = tuple(grid)
        self.block: tuple[int, ...] = tuple(block)
        self.shared_mem: int = shared_mem
        self.arch: str = arch
        self.totals: dict[str, Any] = totals
        self.lines: list[LineAnalysis] = lines
        self.notes: list[str] = notes
        self._source = source  # {file: [text lines]} for the HTML view

    def __repr__(self) -> str:
        return (
            f"<KernelAnalysis of '{self.kernel}' grid={self.grid} block={self.block} arch={self.arch}: "
            f"{len(self.lines)} line(s)>"
        )

    def line(self, number: int, file: str | None = None) -> LineAnalysis | None:
        """The entry of source line ``number`` (of ``file``, default: any), or None."""
        for entry in self.lines:
            if entry.line == number and (file is None or entry.file == file):
                return entry
        return None

    def to_dict(self) -> dict[str, Any]:
        """The analysis as plain JSON-ready data.

        Returns
        -------
        dict
            ``kernel``, ``grid``, ``block``, ``shared_mem``, ``arch``, ``totals``, ``lines``
            (each ``file``, ``line``, ``text``, ``metrics``) and ``notes``.
        """
        return {
            "kernel": self.kernel,
            "grid": list(self.grid),
            "block": list(self.block),
            "shared_mem": self.shared_mem,
            "arch": self.arch,
            "totals": dict(self.totals),
            "lines": [entry.to_dict() for entry in self.lines],
            "notes": list(self.notes),
        }

    def to_text(self, limit: int = 20) -> str:
        """A table of the costliest lines first, each with its source text, then the totals.

        Parameters
        ----------
        limit : int, optional
            The most lines shown.

        Returns
        -------
        str
            The table.
        """
        t = self.totals
        out = [
            f"kernel '{self.kernel}' grid={self.grid} block={self.block} shared_mem={self.shared_mem} arch={self.arch}",
            "  line  gld req/sect/ideal   gst req/sect/ideal   shared wf/ideal  confl  atom  div  lanes  source",
        ]
        ranked = sorted(self.lines, key=lambda e: (-_cost(e.metrics), e.file, e.line))
        for entry in ranked[:limit]:
            m = entry.metrics
            wf = m["shared_load_wavefronts"] + m["shared_store_wavefronts"]
            ideal = m["shared_load_ideal_wavefronts"] + m["shared_store_ideal_wavefronts"]
            lanes = "" if m["active_lanes_avg"] is None else f"{m['active_lanes_avg']:.1f}"
            out.append(
                f"{entry.line:6d}  "
                f"{m['global_load_requests']:>5}/{m['global_load_sectors']}/{m['global_load_ideal_sectors']}".ljust(28)
                + f"{m['global_store_requests']}/{m['global_store_sectors']}/{m['global_store_ideal_sectors']}".ljust(
                    21
                )
                + f"{wf}/{ideal}".ljust(17)
                + f"{m['shared_bank_conflicts']:>5}  {m['atomic_requests']:>4}  {m['divergent_branches']:>3}  "
                + f"{lanes:>5}  {entry.text}"
            )
        if len(ranked) > limit:
            out.append(f"  ... {len(ranked) - limit} more line(s)")

        def ratio(a: int, b: int) -> str:
            return f"{a / b:.2f}x ideal" if b else "-"

        out.append(
            "totals: global loads {} requests, {} sectors ({}); stores {} requests, {} sectors ({})".format(
                t["global_load_requests"],
                t["global_load_sectors"],
                ratio(t["global_load_sectors"], t["global_load_ideal_sectors"]),
                t["global_store_requests"],
                t["global_store_sectors"],
                ratio(t["global_store_sectors"], t["global_store_ideal_sectors"]),
            )
        )
        out.append(
            f"        shared {t['shared_load_requests'] + t['shared_store_requests']} requests, "
            f"{t['shared_load_wavefronts'] + t['shared_store_wavefronts']} wavefronts, "
            f"{t['shared_bank_conflicts']} bank conflicts; atomics {t['atomic_requests']} requests "
            f"(at most {t['atomic_same_address_max']} lanes on one address); barriers {t['barriers']}"
        )
        lanes = t["active_lanes_avg"]
        out.append(
            f"        divergent branches {t['divergent_branches']}, active lanes "
            f"{'-' if lanes is None else f'{lanes:.2f}'} of 32"
        )
        if t.get("occupancy") is not None:
            out.append(
                f"        occupancy {t['occupancy']:.0%} ({t['occupancy_limiter']}): "
                f"{t['registers_per_thread']} registers, {t['local_bytes_per_thread']} local bytes per thread, "
                f"{t['static_shared_bytes']} static shared bytes"
            )
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out)

    def to_html(self, path: str | os.PathLike[str]) -> Path:
        """Write one self-contained page: the kernel's source with each line's figures beside
        it, the costly lines coloured, and the totals.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write.

        Returns
        -------
        pathlib.Path
            The file written.
        """
        target = Path(path)
        by_line = {(e.file, e.line): e for e in self.lines}
        worst = max((_cost(e.metrics) for e in self.lines), default=0.0)
        rows = []
        for file, lines in self._source.items():
            rows.append(f'<tr class="file"><td colspan="4">{html.escape(file)}</td></tr>')
            for number, text in enumerate(lines, 1):
                entry = by_line.get((file, number))
                figures, style = "", ""
                if entry is not None:
                    m = entry.metrics
                    parts = []
                    if m["global_load_requests"] or m["global_store_requests"]:
                        parts.append(
                            f"global {m['global_load_requests'] + m['global_store_requests']} req, "
                            f"{m['global_load_sectors'] + m['global_store_sectors']} sectors "
                            f"(ideal {m['global_load_ideal_sectors'] + m['global_store_ideal_sectors']})"
                        )
                    if m["shared_load_requests"] or m["shared_store_requests"]:
                        parts.append(
                            f"shared {m['shared_load_wavefronts'] + m['shared_store_wavefronts']} wavefronts "
                            f"({m['shared_bank_conflicts']} conflicts)"
                        )
                    if m["atomic_requests"]:
                        parts.append(f"atomics {m['atomic_requests']} (max {m['atomic_same_address_max']} same)")
                    if m["divergent_branches"]:
                        parts.append(f"divergent {m['divergent_branches']}")
                    if m["active_lanes_avg"] is not None and m["active_lanes_avg"] < 32:
                        parts.append(f"lanes {m['active_lanes_avg']:.1f}")
                    if m["barriers"]:
                        parts.append(f"barriers {m['barriers']}")
                    figures = "; ".join(parts)
                    cost = _cost(m)
                    if cost > 0 and worst > 0:
                        alpha = 0.15 + 0.6 * cost / worst
                        style = f' style="background: rgba(220, 60, 40, {alpha:.2f})"'
                rows.append(
                    f'<tr{style} id="L{number}"><td class="n">{number}</td>'
                    f'<td><pre>{html.escape(text)}</pre></td><td class="f">{html.escape(figures)}</td></tr>'
                )
        totals = html.escape(self.to_text(limit=0))
        page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Analysis of {html.escape(self.kernel)}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; }}
table {{ border-collapse: collapse; }}
td {{ padding: 0 0.6em; vertical-align: top; }}
td.n {{ color: #888; text-align: right; }}
td.f {{ font-size: 0.85em; color: #222; }}
pre {{ margin: 0; }}
tr.file td {{ font-weight: bold; padding-top: 0.8em; }}
</style></head>
<body>
<h1>Kernel <code>{html.escape(self.kernel)}</code></h1>
<p>grid {self.grid}, block {self.block}, dynamic shared memory {self.shared_mem} bytes, {html.escape(self.arch)}.
Counted in the CPU emulation by the rules of cunumpy's performance-analysis guide; not a timing.</p>
<table id="source">
{"".join(rows)}
</table>
<h2>Totals</h2>
<pre id="totals">{totals}</pre>
</body></html>
"""
        target.write_text(page, encoding="utf-8")
        return target


def build(kernel, lib, rows, grid, block, shared_mem: int, arch: str, pseudo: str, skip_dirs: tuple) -> KernelAnalysis:
    """The KernelAnalysis of a launch from the runtime's rows."""
    frames = _frames(str(lib.path), sorted({r[0] for r in rows})) if lib is not None else {}
    source = _Source(kernel, pseudo)
    per_line: dict[tuple[str, int], dict[str, Any]] = {}
    totals = _empty_metrics()
    for pc, cls, requests, a, ideal, divergent, same_max, lanes in rows:
        chain = frames.get(pc, [])
        user = next(((p, n) for p, n in chain if not p.startswith(skip_dirs)), None)
        if user is None or os.path.basename(user[0]).startswith("cunumpy-emulation-stubs"):
            continue  # the runtime's glue (the block loop, the entry stubs)
        if cls in (_BLOCK, _BRANCH) and chain and chain[0][0].startswith(skip_dirs):
            continue  # the basic blocks and branches of built-ins (a barrier's own paths) are not the kernel's
        if cls in (_BLOCK, _BRANCH) and "__shared__" in source.text(user[0], user[1]):
            continue  # the emulation's first-use guard of a __shared__ variable (a thread_local)
        key = (source.display(user[0]), user[1])
        m = per_line.get(key)
        if m is None:
            m = per_line[key] = _empty_metrics()
            m["_path"] = user[0]
        _add_row(m, cls, requests, a, ideal, divergent, same_max, lanes)
        _add_row(totals, cls, requests, a, ideal, divergent, same_max, lanes)
    lines = []
    files: dict[str, list[str]] = {}
    for (file, number), m in sorted(per_line.items()):
        path = m.pop("_path")
        lines.append(LineAnalysis(file, number, source.text(path, number), _finish(m)))
        if file not in files:
            files[file] = source.lines_of(path) or []
    totals = _finish(totals)
    notes: list[str] = []
    usage, note = resource_usage(kernel, arch)
    totals.update(usage)
    threads = block[0] * block[1] * block[2]
    if usage["registers_per_thread"] is None:
        notes.append(note)
        totals["occupancy"] = None
        totals["occupancy_limiter"] = None
    else:
        ratio, limiter, _ = occupancy(
            arch, threads, usage["registers_per_thread"], usage["static_shared_bytes"] + shared_mem
        )
        totals["occupancy"] = ratio
        totals["occupancy_limiter"] = limiter
    return KernelAnalysis(kernel.name, grid, block, shared_mem, arch, totals, lines, notes, files)


# ---------------------------------------------------------------------------------------------
# Collectors

_collectors: list[tuple[str, list]] = []
_collectors_lock = threading.Lock()
#: every analysis made under CUNUMPY_EMULATION_ANALYZE (the pytest plugin reports them)
session_analyses: list[KernelAnalysis] = []


def environment_arch() -> str | None:
    """The arch CUNUMPY_EMULATION_ANALYZE asks for, or None."""
    value = os.environ.get("CUNUMPY_EMULATION_ANALYZE", "").strip()
    if value.lower() in ("", "0", "false", "no", "off"):
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        return "sm_90"
    return check_arch(value, "CUNUMPY_EMULATION_ANALYZE")


def active_arch() -> str | None:
    """The arch of the innermost analyzed_launches() block, else the environment's, else None."""
    with _collectors_lock:
        if _collectors:
            return _collectors[-1][0]
    return environment_arch()


def deliver(analysis: KernelAnalysis) -> None:
    """Hands a launch's analysis to every open analyzed_launches() list (and the session's)."""
    with _collectors_lock:
        targets = [lst for _, lst in _collectors]
    for lst in targets:
        lst.append(analysis)
    if environment_arch() is not None:
        session_analyses.append(analysis)


@contextlib.contextmanager
def analyzed_launches(arch: str = "sm_90") -> Iterator[list[KernelAnalysis]]:
    """Analyse every emulated launch inside the block.

    Parameters
    ----------
    arch : str, optional
        The architecture of the occupancy figures (``"sm_70"`` to ``"sm_90"``).

    Yields
    ------
    list of KernelAnalysis
        Receives the analysis of each emulated launch made inside the block, in order,
        including the automatic emulation of launches under the fake CuPy.
    """
    arch = check_arch(arch, "analyzed_launches()")
    found: list[KernelAnalysis] = []
    entry = (arch, found)
    with _collectors_lock:
        _collectors.append(entry)
    try:
        yield found
    finally:
        with _collectors_lock:
            _collectors.remove(entry)


def session_report(path: str | None = None, limit: int = 10) -> str:
    """The end-of-session table of the pytest plugin (the worst lines of every kernel analysed
    under CUNUMPY_EMULATION_ANALYZE), and the JSON file at ``path``."""
    analyses = list(session_analyses)
    if path:
        Path(path).write_text(json.dumps([a.to_dict() for a in analyses], indent=1), encoding="utf-8")
    if not analyses:
        return ""
    rows = []
    for a in analyses:
        for e in a.lines:
            m = e.metrics
            sectors = m["global_load_sectors"] + m["global_store_sectors"]
            ideal = m["global_load_ideal_sectors"] + m["global_store_ideal_sectors"]
            rows.append((_cost(m), a.kernel, e, sectors, ideal))
    rows.sort(key=lambda r: -r[0])
    out = [f"cunumpy kernel analysis: {len(analyses)} launch(es); the costliest lines:"]
    out.append("  kernel               line  sectors/ideal  conflicts  divergent  source")
    for cost, kernel, e, sectors, ideal in rows[:limit]:
        if cost <= 0:
            break
        m = e.metrics
        out.append(
            f"  {kernel[:20]:20} {e.line:5d}  {sectors:>7}/{ideal:<6}  {m['shared_bank_conflicts']:>9}  "
            f"{m['divergent_branches']:>9}  {e.text[:60]}"
        )
    if len(out) == 2:
        out.append("  (no line with excess sectors, bank conflicts or divergence)")
    return "\n".join(out)
