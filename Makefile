# cunumpy developer commands. `make demo` and `make test` do all the set-up themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DEPS   := $(VENV)/.deps-installed
BUILT  := $(VENV)/.cunumpy-installed
SAN_SITE := build/asan-site
# The unit suites run on PYTEST_WORKERS processes (pytest-xdist; 0 runs them in-process).
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# WERROR=1 (CI: .ci/run sets it) builds the C core with -Werror (meson's werror option); the
# default build does not, so that a newer compiler's new warning never stops an install. The
# setting is remembered in $(BUILD_FLAGS_STAMP), so that changing it rebuilds.
WERROR ?= 0
MESON_WERROR := -Csetup-args=-Dwerror=$(if $(filter 1 true yes,$(WERROR)),true,false)
BUILD_FLAGS_STAMP := build/.meson-werror-$(if $(filter 1 true yes,$(WERROR)),on,off)

C_SOURCES  := $(wildcard src/cunumpy/_core/*.c src/cunumpy/_core/*.h src/cunumpy/_core/*/*.c src/cunumpy/_core/*/*.h)
PY_SOURCES := $(shell find src -name '*.py' -o -name '*.md' -o -name '*.cuh' -o -name '*.h' -o -name '*.typed' -o -path '*/_emulation/include/*' -type f 2>/dev/null)

.PHONY: all lint lint-c demo demo-mpi docs test-docs test test-unit wheel test-wheel test-fake test-sanitize test-mpi test-c test-tsan test-emu-aarch64 test-asan check-c bench gpu-check install clean petsc test-petsc test-real-cupy fidelity test-gpu

all: install

# The virtual environment with the build tools (and tomli, which reads pyproject.toml for
# tools/print_requirements.py on Python 3.10).
$(DEPS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "meson-python>=0.16" "meson>=1.3" ninja "tomli>=2; python_version < '3.11'"
	touch $@

# Dependencies install with pip's normal build isolation: some (pyccel) are sdists with
# build backends of their own. Only cunumpy itself is built without isolation, so that
# build/release is reused incrementally. `make demo` needs only the demo extra.
$(VENV)/.req-%: $(DEPS) tools/print_requirements.py
	$(PY) tools/print_requirements.py $(subst +, ,$*) > $(VENV)/requirements-$*.txt
	$(PY) -m pip install -q -r $(VENV)/requirements-$*.txt
	touch $@

$(BUILD_FLAGS_STAMP):
	@mkdir -p build
	rm -f build/.meson-werror-*
	touch $@

$(BUILT): $(DEPS) meson.build pyproject.toml $(C_SOURCES) $(PY_SOURCES) $(BUILD_FLAGS_STAMP)
	$(PY) -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=build/release $(MESON_WERROR) .
	touch $@

install: $(BUILT) $(VENV)/.req-test+mpi+compiled

demo: $(BUILT) $(VENV)/.req-demo
	$(PY) examples/demo.py

# The demo's loop split over MPI ranks (examples/pic_mpi.py): one rank, then two on NumPy and
# two on the fake CuPy, each compared bit for bit with the one-rank run.
PIC_MPI_RUN := build/demo/pic_mpi_1rank.npz
demo-mpi: $(BUILT) $(VENV)/.req-mpi
	$(VENV)/bin/mpiexec -n 1 $(PY) examples/pic_mpi.py --save $(PIC_MPI_RUN)
	$(VENV)/bin/mpiexec -n 2 $(PY) examples/pic_mpi.py --compare $(PIC_MPI_RUN)
	CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy $(VENV)/bin/mpiexec -n 2 $(PY) examples/pic_mpi.py --compare $(PIC_MPI_RUN)

# `make test` runs every part below, one after another, each even when an earlier one failed
# (tools/run_parts.py): a line when a part starts, at the end one line per part (passed or
# failed, minutes), and a non-zero exit status if any part failed. check-c's four parts run as
# parts of their own. `make -k test-docs test-unit ...` is the plain-make equivalent.
TEST_PARTS := test-docs test-unit test-fake test-sanitize test-mpi test-c test-emu-aarch64 test-tsan \
  test-asan test-real-cupy
test: install
	@$(PY) tools/run_parts.py --make "$(MAKE)" $(TEST_PARTS)

# The static checks (pyproject.toml configures each): ruff's linter and formatter (--check:
# run `ruff format .` before committing) over the tree, mypy over
# src/cunumpy and the typing test tests/typing/, the import contracts of the architecture
# (lint-imports reads src/, where the extension is not built: PYTHONPATH), the annotations of
# the public API (none may lack one), no circle of #include among the C/C++/CUDA files
# (tools/check_includes.py) and clang-tidy over the C core (lint-c). .ci/run runs it
# before the tests.
lint: $(BUILT) $(VENV)/.req-lint
	$(PY) -m ruff check --no-cache .
	$(PY) -m ruff format --check --no-cache .
	$(PY) -m mypy --cache-dir build/mypy-cache
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache
	$(PY) tools/check_annotations.py
	$(PY) tools/check_includes.py
	$(MAKE) lint-c

# clang-tidy over the C core and the emulator's runtime, src/cunumpy/_core/emu/ (.clang-tidy,
# tools/lint_c.sh).
lint-c: $(DEPS)
	PY=$(PY) bash tools/lint_c.sh

# The documentation site: docs/ -> build/docs/html with Sphinx, every warning an error. -E
# rereads every page, so warnings of unchanged pages are reported again (and docstrings of a
# reinstalled package are read anew). Only the base dependencies and the docs extra are needed.
DOCS_HTML := build/docs/html
docs: $(BUILT) $(VENV)/.req-docs
	$(PY) -m sphinx -E -W --keep-going -q -b html -d build/docs/doctrees docs $(DOCS_HTML)
	@echo "docs: open $(DOCS_HTML)/index.html"

# The built site checked: numpydoc docstrings of every public name, the code blocks of the
# pages and of LLM_GUIDE.md run, internal links resolve, and headless Chromium opens pages
# and measures that no code block or table is wider than its column (tests/docs/test_site.py
# installs Debian's chromium when it is missing and it runs as root; without root its tests
# skip with the package named, which -rs prints; under CI=true they fail).
test-docs: docs install
	$(PY) -m pytest -q -rs -p no:cacheprovider -n $(PYTEST_WORKERS) tests/docs

# test-fake runs the whole suite under the fake CuPy, so the NumPy run skips the tests that
# re-run a file under the fake in a child process (tests/unit/_fake_support.py).
#
# UNIT_LOAD=N runs it while N CPU-bound processes compete for the machine (tools/load.py):
# .ci/run runs `make test UNIT_LOAD=2`, so that no wall-clock bound of a test can pass only on
# an idle machine. Only this part runs loaded (the NumPy-backend unit suite; the other parts
# run the same time-related tests again), which keeps CI's total time in bounds.
UNIT_LOAD ?= 0
test-unit: install
	CUNUMPY_TESTS_FAKE_SUITE=separate $(if $(filter-out 0,$(UNIT_LOAD)),$(PY) tools/load.py $(UNIT_LOAD) --) \
	  $(PYTEST) tests/unit

test-fake: install
	CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy $(PYTEST) tests/unit

# The emulator's racecheck and initcheck must find nothing in correct kernels: the emulator's
# feature tests, the test kernels of every shipped header and the example kernel package run
# again with both checks on (on the fake CuPy, so that the device paths emulate too), and the
# emulator-versus-GPU parity cases with their "GPU" side emulated.
SANITIZE_CORPUS := tests/unit/test_emulation_kernels.py tests/unit/test_emulation_headers.py \
  tests/unit/test_emulation_complex.py tests/unit/test_emulation_half.py \
  tests/unit/test_emulation_cooperative_groups.py tests/unit/test_emulation_launches.py \
  tests/unit/test_integration_emulation.py tests/unit/test_parity.py tests/unit/test_kernel_testing.py
test-sanitize: install
	CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy CUNUMPY_EMULATION_SANITIZE=racecheck,initcheck \
	  $(PYTEST) $(SANITIZE_CORPUS)
	CUNUMPY_FAKE_CUPY=1 CUNUMPY_GPU_PARITY_DRY_RUN=1 CUNUMPY_EMULATION_SANITIZE=racecheck,initcheck \
	  $(PY) -m pytest -q -p no:cacheprovider tests/gpu/test_emulator_parity_gpu.py

# Every rank runs tests/mpi, on NumPy and on the fake CuPy (whose device pointers are host
# memory, so both the staged and the CUDA-aware path really go through MPI). Each job is
# bounded: `timeout` ends a hung mpiexec, and a per-test watchdog (tests/mpi/conftest.py)
# ends a hung rank first.
MPI_TIMEOUT := 600
test-mpi: install
	@if ls tests/mpi/test_*.py >/dev/null 2>&1; then \
	  for fake in 0 1; do for n in 2 4; do \
	    if [ $$fake = 1 ]; then env="CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy"; else env=""; fi; \
	    echo "== mpiexec -n $$n $${env:-(NumPy backend)}"; \
	    env $$env timeout -k 10 $(MPI_TIMEOUT) $(VENV)/bin/mpiexec -n $$n \
	      $(PY) -m pytest -q -p no:cacheprovider tests/mpi || exit 1; \
	  done; done; \
	else echo "no MPI tests yet"; fi

# The C core under AddressSanitizer and UndefinedBehaviorSanitizer: the C unit tests, the
# aarch64 and ThreadSanitizer runs, then the unit tests against an extension built with the
# sanitizers (test-asan). The fake CuPy is installed so the device-side C paths (traversal,
# launch packing) run too; `on_backend` tests cover both.
check-c: $(DEPS)
	$(MAKE) test-c
	$(MAKE) test-emu-aarch64
	$(MAKE) test-tsan
	$(MAKE) test-asan

test-asan: $(DEPS)
	rm -rf $(SAN_SITE)
	$(PY) -m pip install -q --no-build-isolation --no-deps --target $(SAN_SITE) \
	  -Cbuild-dir=build/asan -Csetup-args=-Dbuildtype=debugoptimized $(MESON_WERROR) \
	  -Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false .
	CUNUMPY_FAKE_CUPY=1 PYTHONMALLOC=malloc PYTHONPATH=$(SAN_SITE) ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  $(PYTEST) -m "not nosan" tests/unit

# C unit tests of _core (pure C parts), each compiled with the sanitizers and run. The ucontext
# variant of the emulator's tests runs without LeakSanitizer: its tracer, stopping the pool's
# threads at exit, now and then faulted on a fiber stack's guard region after swapcontext
# switches (ASan does not fully support swapcontext); the assembly variant checks leaks. A test
# tests/c/test_X.c may come with tests/c/test_X_kernels.cpp: CUDA kernels compiled by g++
# against the emulator prelude and linked in (the emulator runtime's tests).
SAN_FLAGS := -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer
test-c:
	@mkdir -p build/ctests
	@for t in $(wildcard tests/c/test_*.c); do \
	  exe=build/ctests/$$(basename $$t .c); extra=""; \
	  kernels=$${t%.c}_kernels.cpp; \
	  if [ -f $$kernels ]; then \
	    g++ -std=c++17 $(SAN_FLAGS) -Wall -Wextra -Wno-unknown-pragmas -Isrc/cunumpy/_emulation/include \
	      -Isrc/cunumpy/cuda/include -c $$kernels -o $$exe.kernels.o || exit 1; \
	    extra="$$exe.kernels.o -lstdc++"; \
	  fi; \
	  gcc -std=c11 $(SAN_FLAGS) -Isrc/cunumpy/_core $$t $$extra -o $$exe -lm -lpthread || exit 1; \
	  leaks=1; case $$exe in *ucontext*) leaks=0;; esac; \
	  ASAN_OPTIONS=detect_leaks=$$leaks UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $$exe || exit 1; \
	done; echo "C unit tests passed"

# The emulator runtime's C tests (test_emu*.c and their kernels) cross-compiled for aarch64
# and run under qemu-user, so the hand-written aarch64 context switch runs on x86-64 machines
# too. tools/test_emu_aarch64.sh installs gcc/g++-aarch64-linux-gnu and qemu-user with apt-get
# when they are missing and it runs as root; without them and without root or apt it prints
# why and skips (exit 0), so it never fails a machine for lack of the packages. Measured on
# the shared 2-core development machine under load: 1 min 43 s from a machine without the
# packages (download, install, build, run), 35 s with them; within check-c's budget, so
# check-c (and `make test`) runs it.
test-emu-aarch64:
	bash tools/test_emu_aarch64.sh

# A binary wheel with the C core prebuilt, in dist/: it installs without a compiler (the CPU
# emulation of CUDA kernels still needs one at run time). Built from the same build directory
# as `make install`, so it costs a few seconds after it. test-wheel installs it into a fresh
# venv with every compiler replaced by one that fails and binary wheels only, then runs a
# smoke test outside the checkout (tools/wheel_smoke.sh); .ci/run runs it after `make test`.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
wheel: $(DEPS) $(BUILD_FLAGS_STAMP)
	rm -f dist/cunumpy-$(VERSION)-*.whl
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -Cbuild-dir=build/release $(MESON_WERROR) -w dist .
	@ls dist/cunumpy-$(VERSION)-*.whl

test-wheel: wheel
	bash tools/wheel_smoke.sh $(PYTHON) $$(ls dist/cunumpy-$(VERSION)-*.whl) build/wheel-venv

# PETSc and petsc4py, built from their PyPI sdists (no binary wheels exist; Debian's
# python3-petsc4py is built for NumPy 1 and does not import with NumPy 2). Measured on the
# shared 2-core development machine: PETSc 84 minutes, petsc4py more than 15 more. So
# `make test` (and CI) does not do it and tests/unit/test_petsc.py skips its petsc4py
# tests there; the wheels are cached in PETSC_WHEELS and reused by later runs.
PETSC_WHEELS ?= $(HOME)/.cache/cunumpy/petsc-wheels

petsc: install
	bash tools/build_petsc.sh $(PY) $(PETSC_WHEELS)

test-petsc: petsc
	$(PYTEST) -rs tests/unit/test_petsc.py
	CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy $(PYTEST) -rs tests/unit/test_petsc.py

# The thread pool and parallel compaction under ThreadSanitizer (the fork test forks a
# process that has threads, which TSan allows with die_after_fork=0), then the emulator's
# runtime: its workers run blocks in parallel, and every fiber is announced to TSan (emu_fiber.c),
# so it tells the fibers of a worker apart. The ucontext variant is left out: swapcontext
# under TSan is slower than its watchdog allows, and the runtime code is the same.
test-tsan:
	@mkdir -p build/ctests
	gcc -std=c11 -g -O1 -fsanitize=thread -Isrc/cunumpy/_core tests/c/test_thread_pool.c \
	  -o build/ctests/test_thread_pool_tsan -lm -lpthread
	TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 build/ctests/test_thread_pool_tsan
	g++ -std=c++17 -g -O1 -fsanitize=thread -Wno-tsan -Isrc/cunumpy/_emulation/include \
	  -Isrc/cunumpy/cuda/include -c tests/c/test_emu_kernels.cpp -o build/ctests/test_emu_tsan.kernels.o
	gcc -std=c11 -g -O1 -fsanitize=thread -Isrc/cunumpy/_core tests/c/test_emu.c \
	  build/ctests/test_emu_tsan.kernels.o -lstdc++ -o build/ctests/test_emu_tsan -lm -lpthread
	TSAN_OPTIONS=halt_on_error=1 build/ctests/test_emu_tsan

# benchmarks/mpi_exchange.py re-launches itself under `mpiexec -n 2` when started plainly.
bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Real-GPU checks: run on a machine with an NVIDIA GPU and CuPy.
gpu-check:
	bash tests/gpu/run.sh

# Everything that needs a GPU, as one command (tests/gpu/run.sh): without a GPU it prints one
# line and exits 0 before installing anything; with one it runs `make install`, installs the
# gpu extra, tests/gpu (with the emulator-versus-GPU parity of every shipped header and example
# kernel) and the GPU benchmarks, and ends with one summary line. Meant to stay under 10 minutes.
test-gpu:
	@TEST_GPU_MAKE_INSTALL=1 bash tests/gpu/run.sh

# The real CuPy without a GPU: the `gpu` extra in a separate environment (build/venv-cupy),
# where cunumpy must fall back with the driver's reason, the fake must still install on
# request, and the fake's API surface is compared with the real one (tests/realcupy).
# From nothing (no build/venv-cupy, empty pip cache) it took 25 s on the shared 2-core
# development machine, 14 s of it the set-up (the CuPy wheel is 70 MB).
test-real-cupy: install
	bash tests/realcupy/run.sh

# Rewrites the generated part of src/cunumpy/_fake_cupy/FIDELITY.md and tests/data/cupy_names.json
# from the real CuPy (after changing the fake or the pinned CuPy release).
fidelity: install
	bash tests/realcupy/run.sh write

clean:
	rm -rf build dist $(VENV)
