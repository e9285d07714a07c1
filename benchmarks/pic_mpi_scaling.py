"""Weak and strong scaling of examples/pic_mpi.py on 1, 2 and 4 MPI ranks.

    .venv/bin/python benchmarks/pic_mpi_scaling.py [--ranks 1 2 4] [--steps 20] [--repeats 1]

Each configuration is one `mpiexec -n N` job of the example with --json; the table gives
the wall time of the loop and its split into compute (sort, deposit, SOR updates, push),
halo exchange, migration and diagnostics, each the slowest rank's. Weak scaling keeps the
particles per rank fixed (the grid is fixed: more ranks, thinner slabs); strong scaling
keeps the total. Beside every figure: the cores of the machine, the load average just
before the job, and the free cores that leaves (cores - load, at least 0); a job with more
ranks than free cores is marked oversubscribed, and its figures measure the sharing of
cores as much as the code. Set CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy to time the device
path on the fake CuPy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "examples" / "pic_mpi.py"


def mpiexec() -> str:
    found = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if found is None:
        raise SystemExit("no mpiexec: install the mpi extra (MPICH)")
    return found


def run(ranks: int, extra: list[str]) -> dict:
    load = os.getloadavg()[0]
    command = [mpiexec(), "-n", str(ranks), sys.executable, str(PROGRAM), "--json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    cores = os.cpu_count() or 1
    figures["cores"] = cores
    figures["load"] = load
    figures["free"] = max(0.0, cores - load)
    figures["oversubscribed"] = ranks > figures["free"]
    return figures


def table(title: str, rows: list[dict], weak: bool) -> str:
    base = rows[0]
    side = 1 << base["levels"]
    lines = [
        f"**{title}** ({base['backend']}, {side}x{side} cells, "
        f"{rows[0]['steps']} steps of {rows[0]['sweeps']} SOR sweeps)",
        "",
        "| ranks | particles | total s | compute s | exchange s | migration s | diagnostics s | "
        "speed-up / efficiency | cores, load before, free | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if weak:  # efficiency: time on the first row's ranks / time on these
            scale = f"{base['seconds'] / r['seconds']:.0%} efficiency"
        else:
            scale = f"{base['seconds'] / r['seconds']:.2f}x speed-up"
        note = "oversubscribed" if r["oversubscribed"] else ""
        lines.append(
            f"| {r['ranks']} | {r['particles']} | {r['seconds']:.3f} | {r['compute_s']:.3f} | {r['exchange_s']:.3f} | "
            f"{r['migration_s']:.3f} | {r['diagnostics_s']:.3f} | {scale} | "
            f"{r['cores']}, {r['load']:.1f}, {r['free']:.1f} | {note} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--levels", type=int, default=6)
    parser.add_argument("--particles-per-rank", type=int, default=20_000, help="weak scaling")
    parser.add_argument("--particles", type=int, default=40_000, help="strong scaling")
    args = parser.parse_args()
    common = [f"--steps={args.steps}", f"--levels={args.levels}"]
    weak = [run(n, [*common, f"--particles-per-rank={args.particles_per_rank}"]) for n in args.ranks]
    strong = [run(n, [*common, f"--particles={args.particles}"]) for n in args.ranks]
    print(table(f"Weak scaling, {args.particles_per_rank} particles per rank", weak, weak=True))
    print()
    print(table(f"Strong scaling, {args.particles} particles", strong, weak=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
