#!/usr/bin/env bash
# The emulator runtime's C tests (tests/c/test_emu*.c with their kernels) cross-compiled for
# aarch64 and run under qemu-user, so that the hand-written aarch64 context switch is executed
# on an x86-64 machine. Installs the cross compiler and qemu with apt-get when they are missing
# and this runs as root; anywhere else without them it says so, naming the packages, and skips
# (exit status 0), except under CI=true, where a test that cannot run fails (exit status 1).
# Usage: tools/test_emu_aarch64.sh [build-dir]
set -u
cd "$(dirname "$0")/.."
OUT=${1:-build/ctests-aarch64}
CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
CXX=${AARCH64_CXX:-aarch64-linux-gnu-g++}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
PACKAGES="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user"

if [ "$(uname -m)" = aarch64 ]; then
    echo "test-emu-aarch64: SKIPPED, this machine is aarch64: make test-c runs these tests natively"
    exit 0
fi

# Not run: a skip (exit 0) for a user's machine, a failure under CI=true.
skip() {
    if [ "${CI:-}" = "true" ]; then
        echo "test-emu-aarch64: FAILED (CI=true, where every test must run): $*"
        exit 1
    fi
    echo "test-emu-aarch64: SKIPPED, $*"
    exit 0
}

have_tools() { command -v "$CC" >/dev/null && command -v "$CXX" >/dev/null && command -v "$QEMU" >/dev/null; }

if ! have_tools; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "test-emu-aarch64: installing $PACKAGES with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        # The package lists may be missing or stale (a fresh container): update once on failure.
        apt-get install -y -q --no-install-recommends $PACKAGES >/dev/null ||
            { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $PACKAGES >/dev/null; } ||
            skip "apt-get could not install $PACKAGES"
        have_tools || skip "$CC, $CXX or $QEMU still missing after apt-get installed $PACKAGES"
    else
        skip "$CC, $CXX or $QEMU is missing: install the Debian packages $PACKAGES" \
             "(as root with apt-get this target installs them), or name a cross toolchain by AARCH64_CC/AARCH64_CXX"
    fi
fi

mkdir -p "$OUT"
# The runtime at -O2 (as the extension builds it); the kernels at -O1 as `make test-c` builds
# them: at -O2 g++ merges the two __activemask() call sites of test_emu_kernels.cpp's
# k_activemask into one, and the runtime groups lanes by call site.
WARN="-g -Wall -Wextra -Werror -Wno-unknown-pragmas"
status=0
for t in tests/c/test_emu*.c; do
    name=$(basename "$t" .c)
    exe="$OUT/$name"
    kernels="${t%.c}_kernels.cpp"
    "$CXX" -std=c++17 -O1 $WARN -Isrc/cunumpy/_emulation/include -Isrc/cunumpy/cuda/include -c "$kernels" \
        -o "$exe.kernels.o" || exit 1
    "$CC" -std=c11 -O2 $WARN -Isrc/cunumpy/_core "$t" "$exe.kernels.o" -o "$exe" -lstdc++ -lm -lpthread || exit 1
    echo "== $name (aarch64, $QEMU)"
    "$QEMU" -L "$SYSROOT" "$exe" || status=1
done
[ $status = 0 ] && echo "aarch64 emulator tests passed"
exit $status
