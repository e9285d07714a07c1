#!/usr/bin/env bash
# Real-GPU checks in one go: the tests in tests/gpu, then the GPU benchmarks.
# Needs cunumpy installed (make install) and CuPy with a CUDA device.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONUNBUFFERED=1
status=0
"$PY" -c "import cupy, cunumpy as xp; print('CuPy', cupy.__version__, 'usable:', xp.cupy_available())" || status=1
"$PY" -m pytest -q -p no:cacheprovider -rs tests/gpu || status=1
for bench in tests/gpu/bench_*.py benchmarks/launch_checks.py; do
    echo "== $bench"
    "$PY" "$bench" || status=1
done
exit $status
