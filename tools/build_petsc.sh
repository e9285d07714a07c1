#!/usr/bin/env bash
# Build PETSc and petsc4py from their PyPI sdists into wheels and install them into a
# Python environment. PETSc has no binary wheels on PyPI and Debian's python3-petsc4py is
# built for NumPy 1.x (it does not import with NumPy 2), so the source build is the one
# route that fits the project's environment. Slow (PETSc took 84 minutes on the shared
# 2-core machine, petsc4py more than 15 more): the wheels are kept in WHEELS and reused.
#
# usage: tools/build_petsc.sh PYTHON [WHEELS]
set -euo pipefail
PY=${1:?usage: build_petsc.sh PYTHON [WHEELS]}
WHEELS=${2:-build/petsc-wheels}
VERSION=${PETSC_VERSION:-3.26.1}
mkdir -p "$WHEELS"
WHEELS=$(cd "$WHEELS" && pwd)

# A small serial PETSc: no MPI (petsc4py then uses PETSc's MPI stand-in), no Fortran,
# system BLAS/LAPACK, nothing downloaded at configure time.
export PETSC_CONFIGURE_OPTIONS="${PETSC_CONFIGURE_OPTIONS:---with-mpi=0 --with-fc=0 --with-debugging=0 --with-x=0 --with-shared-libraries=1 --COPTFLAGS=-O2 --CXXOPTFLAGS=-O2 --with-cxx=0}"
export MAKEFLAGS="-j$(nproc)"

start=$(date +%s)
if ! ls "$WHEELS"/petsc-"$VERSION"-*.whl >/dev/null 2>&1; then
  "$PY" -m pip wheel -v --no-deps "petsc==$VERSION" -w "$WHEELS"
fi
"$PY" -m pip install --no-deps "$WHEELS"/petsc-"$VERSION"-*.whl
echo "petsc wheel ready after $(( $(date +%s) - start )) s"
if ! ls "$WHEELS"/petsc4py-"$VERSION"-*.whl >/dev/null 2>&1; then
  # petsc4py finds the PETSc just installed; its other build requirements are ordinary.
  "$PY" -m pip install -q "cython>=3" setuptools wheel
  "$PY" -m pip wheel -v --no-deps --no-build-isolation "petsc4py==$VERSION" -w "$WHEELS"
fi
"$PY" -m pip install --no-deps "$WHEELS"/petsc4py-"$VERSION"-*.whl
"$PY" -c "from petsc4py import PETSc; print('petsc4py', PETSc.Sys.getVersion(), PETSc.ScalarType)"
echo "petsc4py ready after $(( $(date +%s) - start )) s"
