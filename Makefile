# cunumpy developer commands. `make demo` and `make test` do all the set-up themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DEPS   := $(VENV)/.deps-installed
BUILT  := $(VENV)/.cunumpy-installed
SAN_SITE := build/asan-site
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

C_SOURCES  := $(wildcard src/cunumpy/_core/*.c src/cunumpy/_core/*.h src/cunumpy/_core/*/*.c src/cunumpy/_core/*/*.h)
PY_SOURCES := $(shell find src/cunumpy -name '*.py' -o -name '*.md' -o -name '*.cuh' -o -name '*.typed' 2>/dev/null)

.PHONY: all demo test test-unit test-fake test-mpi test-c test-tsan check-c bench gpu-check install clean

all: install

# The virtual environment with the build tools.
$(DEPS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "meson-python>=0.16" "meson>=1.3" ninja
	touch $@

# Dependencies install with pip's normal build isolation: some (pyccel) are sdists with
# build backends of their own. Only cunumpy itself is built without isolation, so that
# build/release is reused incrementally. `make demo` needs only the demo extra.
$(VENV)/.req-%: $(DEPS) tools/print_requirements.py
	$(PYTHON) tools/print_requirements.py $(subst +, ,$*) > $(VENV)/requirements-$*.txt
	$(PY) -m pip install -q -r $(VENV)/requirements-$*.txt
	touch $@

$(BUILT): $(DEPS) meson.build pyproject.toml $(C_SOURCES) $(PY_SOURCES)
	$(PY) -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=build/release .
	touch $@

install: $(BUILT) $(VENV)/.req-test+mpi+compiled

demo: $(BUILT) $(VENV)/.req-demo
	$(PY) examples/demo.py

test: test-unit test-fake test-mpi check-c

test-unit: install
	$(PYTEST) tests/unit

test-fake: install
	CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy $(PYTEST) tests/unit

test-mpi: install
	@if ls tests/mpi/test_*.py >/dev/null 2>&1; then \
	  for n in 2 4; do \
	    $(VENV)/bin/mpiexec -n $$n $(PY) -m pytest -q -p no:cacheprovider tests/mpi || exit 1; \
	  done; \
	else echo "no MPI tests yet"; fi

# The C core under AddressSanitizer and UndefinedBehaviorSanitizer: the C unit tests, then
# the unit tests against an extension built with the sanitizers. The fake CuPy is installed
# so the device-side C paths (traversal, launch packing) run too; `on_backend` tests cover both.
check-c: $(DEPS)
	rm -rf $(SAN_SITE)
	$(PY) -m pip install -q --no-build-isolation --no-deps --target $(SAN_SITE) \
	  -Cbuild-dir=build/asan -Csetup-args=-Dbuildtype=debugoptimized \
	  -Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false .
	$(MAKE) test-c
	$(MAKE) test-tsan
	CUNUMPY_FAKE_CUPY=1 PYTHONMALLOC=malloc PYTHONPATH=$(SAN_SITE) ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  $(PYTEST) -m "not nosan" tests/unit

# C unit tests of _core (pure C parts), each compiled with the sanitizers and run.
test-c:
	@mkdir -p build/ctests
	@for t in $(wildcard tests/c/test_*.c); do \
	  exe=build/ctests/$$(basename $$t .c); \
	  gcc -std=c11 -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
	    -Isrc/cunumpy/_core $$t -o $$exe -lm -lpthread || exit 1; \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 $$exe || exit 1; \
	done; echo "C unit tests passed"

# The thread pool and parallel compaction under ThreadSanitizer (the fork test forks a
# process that has threads, which TSan allows with die_after_fork=0).
test-tsan:
	@mkdir -p build/ctests
	gcc -std=c11 -g -O1 -fsanitize=thread -Isrc/cunumpy/_core tests/c/test_thread_pool.c \
	  -o build/ctests/test_thread_pool_tsan -lm -lpthread
	TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 build/ctests/test_thread_pool_tsan

bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Real-GPU checks: run on a machine with an NVIDIA GPU and CuPy.
gpu-check:
	bash tests/gpu/run.sh

clean:
	rm -rf build dist $(VENV)
