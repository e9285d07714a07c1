#!/usr/bin/env bash
# make test-gpu (and make gpu-check): everything that needs a real NVIDIA GPU, in one command.
#
#   1. Is there a GPU? `nvidia-smi -L` (else /dev/nvidia0). Without one: one line, exit 0.
#      With one, `make test-gpu` runs `make install` first (TEST_GPU_MAKE_INSTALL=1).
#   2. The `gpu` extra (cupy-cuda13x) into the Python that runs the tests (.venv, or $PYTHON),
#      unless CuPy already imports there. A machine without PyPI installs it from a wheel
#      folder: TEST_GPU_WHEELS=dir (default .whl when it exists), with --no-index.
#      TEST_GPU_INSTALL=0 skips the step.
#   3. CuPy must then really run on the GPU (a failure here is an error, not a skip).
#   4. pytest tests/gpu (CUNUMPY_REQUIRE_CUDA=1: a GPU requirement that is not met fails):
#      the real-GPU tests and the emulator-versus-GPU parity of every shipped header and
#      example kernel (test_emulator_parity_gpu.py).
#   5. The GPU benchmarks: tests/gpu/bench_*.py, benchmarks/launch_checks.py.
#   6. One summary line, the last line of the output; exit 1 if anything failed.
#
# Each step has a time limit (TEST_GPU_STEP_LIMIT, seconds) so that the whole stays under
# 10 minutes; logs and the JUnit XML go to build/test-gpu/ (TEST_GPU_OUT).
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
OUT=${TEST_GPU_OUT:-build/test-gpu}
LIMIT=${TEST_GPU_STEP_LIMIT:-300}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# ------------------------------------------------------------------ 1. a GPU?
gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi -L 2>/dev/null | grep -m1 '^GPU ' || true)
    [ -n "$gpu" ] || why="nvidia-smi lists no GPU"
elif ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    gpu="a device node $(ls /dev/nvidia[0-9]* | head -1) (no nvidia-smi)"
else
    why="no nvidia-smi and no /dev/nvidia* device"
fi
if [ -z "$gpu" ]; then
    echo "test-gpu: no NVIDIA GPU on this machine ($why): nothing run, exit 0"
    exit 0
fi

mkdir -p "$OUT"
rm -f "$OUT"/*.log "$OUT"/junit.xml
echo "test-gpu: $gpu"
failures=()
if [ "${TEST_GPU_MAKE_INSTALL:-0}" = 1 ]; then  # make test-gpu: .venv and the C extension first
    echo "test-gpu: make install"
    if ! make -s install >"$OUT/make-install.log" 2>&1; then
        tail -20 "$OUT/make-install.log"
        echo "test-gpu: FAILED: make install (see $OUT/make-install.log); $((SECONDS - start)) s"
        exit 1
    fi
fi

# ------------------------------------------------------------------ 2. the gpu extra
if [ "${TEST_GPU_INSTALL:-1}" != 0 ] && ! "$PY" -c "import cupy" >/dev/null 2>&1; then
    wheels=${TEST_GPU_WHEELS:-}
    [ -z "$wheels" ] && [ -d .whl ] && wheels=.whl
    requirements=$("$PY" tools/print_requirements.py gpu | grep -i cupy)
    if [ -n "$wheels" ]; then
        echo "test-gpu: installing $requirements from $wheels (no index)"
        "$PY" -m pip install -q --no-index --find-links "$wheels" $requirements >"$OUT/install.log" 2>&1
    else
        echo "test-gpu: installing $requirements"
        "$PY" -m pip install -q $requirements >"$OUT/install.log" 2>&1
    fi || { tail -20 "$OUT/install.log"; failures+=("install"); }
fi

# ------------------------------------------------------------------ 3. CuPy on the GPU
probe=$(timeout -k 10 120 "$PY" - <<'EOF' 2>&1
import cunumpy as xp, cupy
if not xp.cupy_available():
    raise SystemExit(f"CuPy {cupy.__version__} cannot use the GPU: {xp.backend_info()['cuda_unavailable_reason']}")
p = cupy.cuda.runtime.getDeviceProperties(0)
print(f"CuPy {cupy.__version__} on {p['name'].decode() if isinstance(p['name'], bytes) else p['name']} "
      f"(sm_{p['major']}{p['minor']}, driver {cupy.cuda.runtime.driverGetVersion()})")
EOF
)
if [ $? -ne 0 ]; then
    echo "$probe" | tail -5
    echo "test-gpu: FAILED: a GPU is present but CuPy cannot use it (see above); $((SECONDS - start)) s"
    exit 1
fi
probe=$(echo "$probe" | tail -1)
echo "test-gpu: $probe"

# ------------------------------------------------------------------ 4. tests/gpu
echo "test-gpu: == pytest tests/gpu"
CUNUMPY_REQUIRE_CUDA=1 timeout -k 10 "$LIMIT" "$PY" -m pytest -q -p no:cacheprovider -rfEs \
    --junitxml="$OUT/junit.xml" tests/gpu 2>&1 | tee "$OUT/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failures+=("pytest")
counts=$("$PY" - "$OUT/junit.xml" <<'EOF' 2>/dev/null
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
parity = sum(1 for s in suites for c in s.iter("testcase")
             if "test_emulator_parity_gpu" in c.get("classname", "") and not list(c))
passed = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
print(f"{passed} passed, {total['failures'] + total['errors']} failed, {total['skipped']} skipped "
      f"({parity} emulator-vs-GPU parity cases passed)")
EOF
)
[ -n "$counts" ] || counts="no test report (pytest did not finish: see $OUT/pytest.log)"

# ------------------------------------------------------------------ 5. benchmarks
benches_ok=0
benches=(tests/gpu/bench_*.py benchmarks/launch_checks.py)
for bench in "${benches[@]}"; do
    echo "test-gpu: == $bench"
    log="$OUT/$(basename "$bench" .py).log"
    if timeout -k 10 "$LIMIT" "$PY" "$bench" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
        benches_ok=$((benches_ok + 1))
    else
        failures+=("$bench")
    fi
done

# ------------------------------------------------------------------ 6. summary
if [ ${#failures[@]} -eq 0 ]; then verdict="passed"; else verdict="FAILED (${failures[*]})"; fi
echo "test-gpu: $verdict: $probe; tests: $counts; benchmarks: $benches_ok/${#benches[@]} ran; $((SECONDS - start)) s"
[ ${#failures[@]} -eq 0 ]
