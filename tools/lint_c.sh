#!/usr/bin/env bash
# clang-tidy (.clang-tidy: bugprone-*, cert-*, clang-analyzer-*, performance-*) over the C core
# and the emulator's runtime (src/cunumpy/_core/emu/), two files at a time. Prints every finding
# and a count; exits 1 on any. Debian's clang-tidy is installed with apt-get when missing and this
# runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
if ! command -v clang-tidy >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q clang-tidy >/dev/null
    else
        echo "lint_c: clang-tidy is not installed (apt-get install clang-tidy)"; exit 1
    fi
fi
include=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
files=(src/cunumpy/_core/*.c src/cunumpy/_core/emu/*.c)
out=$(mktemp); trap 'rm -f "$out"' EXIT
printf '%s\n' "${files[@]}" |
  xargs -P 2 -I{} clang-tidy --quiet {} -- -std=c11 -D_GNU_SOURCE -I"$include" -Isrc/cunumpy/_core >"$out" 2>/dev/null || true
# A finding in a header is reported once per file that includes it: counted once.
findings=$(grep -E 'warning:|error:' "$out" | sed -E 's#^'"$PWD"'/##' | sort -u || true)
if [ -n "$findings" ]; then echo "$findings"; fi
count=$(printf '%s' "$findings" | grep -c . || true)
echo "lint_c: $count clang-tidy findings in ${#files[@]} files"
[ "$count" = 0 ]
