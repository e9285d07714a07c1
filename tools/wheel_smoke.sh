#!/usr/bin/env bash
# `make test-wheel`: install the wheel of `make wheel` into a fresh virtual environment on a
# machine "without a compiler" and run a smoke test from outside the checkout.
#
# No compiler: CC, CXX and the PATH entries for cc/gcc/c++/g++ point at a script that fails,
# and pip takes binary wheels only (--only-binary=:all:), so nothing can be compiled during the
# install: the C core must come prebuilt in the wheel. The dependencies (NumPy,
# array-api-compat, maybempi) are binary wheels from the package index.
# Usage: tools/wheel_smoke.sh PYTHON WHEEL VENV
set -euo pipefail
python=$1 wheel=$2 venv=$3
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
rm -rf "$venv"
"$python" -m venv "$venv"
venv=$(cd "$venv" && pwd)
nocc="$venv/no-compiler"
mkdir -p "$nocc"
for name in cc gcc c++ g++ clang clang++; do
    printf '#!/bin/sh\necho "%s: no compiler on this machine (wheel smoke test)" >&2\nexit 1\n' "$name" >"$nocc/$name"
    chmod +x "$nocc/$name"
done
export CC="$nocc/cc" CXX="$nocc/c++" PATH="$nocc:$PATH"
"$venv/bin/python" -m pip install -q --only-binary=:all: "$wheel"
cd "$venv"   # away from the checkout: the installed package is the one imported
"$venv/bin/python" - "$venv" <<'PY'
import sys

import cunumpy as xp
from cunumpy._native import HAVE_C_CORE

venv = sys.argv[1]
assert xp.__file__.startswith(venv), f"imported {xp.__file__}, not the wheel installed in {venv}"
assert HAVE_C_CORE, "the wheel's C core did not import"
a = xp.asarray([3.0, 1.0, 2.0])
keys, order, values = xp.algorithms.sort_by_key(xp.asarray([3, 1, 2]), a)  # the C core's sort
assert keys.tolist() == [1, 2, 3] and order.tolist() == [1, 2, 0] and values.tolist() == [1.0, 2.0, 3.0]
print(f"wheel smoke test: cunumpy {xp.__version__} with its C core from {venv}")
PY
"$venv/bin/python" -m cunumpy info | head -1
