#!/usr/bin/env bash
# make test-real-cupy / make fidelity: the real CuPy without a GPU (issue 27 items 13, 14).
#
# Installs cunumpy's `gpu` extra (cupy-cuda13x, pinned by tests/realcupy/constraints.txt to
# the release the committed data describe) into a virtual environment of its own,
# build/venv-cupy, together with cunumpy itself (a wheel of the current tree, built from
# .venv's incremental build directory), SciPy (the fake's cupyx.scipy is built on it) and
# pytest; every other version is taken from .venv (pip freeze as constraints), so within
# one CI run the wheels come from the same pip cache. CuPy's wheel imports without a
# driver and raises cudaErrorInsufficientDriver on every device call.
#
#   run.sh          run tests/realcupy there
#   run.sh write    rewrite the generated part of src/cunumpy/_fake_cupy/FIDELITY.md and
#                   tests/data/cupy_names.json from the real CuPy, then run the tests
#
# The environment is kept between runs and made again when constraints.txt changes;
# cunumpy is reinstalled on every run.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
VENV=${REAL_CUPY_VENV:-build/venv-cupy}
WHEELS=build/realcupy-wheel
STAMP=$VENV/.gpu-extra-installed
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
start=$SECONDS

fresh=0
if [ ! -f "$STAMP" ] || [ tests/realcupy/constraints.txt -nt "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    fresh=1
fi
rm -rf "$WHEELS"
PATH="$PWD/.venv/bin:$PATH" "$PY" -m pip wheel -q --no-deps --no-build-isolation \
    -Cbuild-dir=build/release -w "$WHEELS" .
wheel=$(ls "$WHEELS"/cunumpy-*.whl)
if [ $fresh = 1 ]; then
    "$PY" -m pip freeze --exclude-editable --exclude cunumpy | grep -v ' @ ' > "$WHEELS/venv-versions.txt" || true
    "$VENV/bin/python" -m pip install -q -c tests/realcupy/constraints.txt -c "$WHEELS/venv-versions.txt" \
        "$wheel[gpu]" scipy pytest
    touch "$STAMP"
else
    "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
fi
echo "real-cupy: $("$VENV/bin/python" -c 'from importlib import metadata as m; print("cupy-cuda13x", m.version("cupy-cuda13x"), "in", __import__("sys").prefix)') (set-up $((SECONDS - start)) s)"

if [ "${1:-}" = write ]; then
    "$VENV/bin/python" -W ignore tests/realcupy/surface.py --write
    "$VENV/bin/python" -W ignore tests/data/make_cupy_names.py
fi
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/realcupy
echo "real-cupy: took $((SECONDS - start)) s"
