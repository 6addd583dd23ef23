# gpufleet front door. `make run` and `make test` work on a fresh Debian 12 machine: each installs
# what is missing (scripts/install-deps.sh), builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
# Tests mostly wait (on agents, browsers, timeouts), not compute: twice as many at once as cores.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
FUZZ_SECONDS ?= 30
GPUFLEET = $(BUILD)/gpufleet

.PHONY: all deps build web run test asan tsan release tidy format format-check fuzz bench bench-build package clean

all: build

# DEPS_ARGS=--build: only what building needs (the container image's build stage).
DEPS_ARGS ?=
deps:
	@scripts/install-deps.sh $(DEPS_ARGS)

# The packager's build type (-O3, no debug info) with warnings as errors: the suite runs on what is shipped,
# and a warning GCC gives only at -O3 fails here first. `make asan` has the debuggable build.
build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DGF_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The dashboard: web/dist, which `gpufleet serve --static web/dist` serves. npm ci only when package-lock.json
# changed since the last install (stamp in node_modules); the build itself takes a few seconds.
web: deps
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); if (a < 20 || (a === 20 && b < 19)) { console.error("web: Vite 8 needs Node >= 20.19, this is " + process.version); process.exit(1); }'
	@cd web && if [ ! -f node_modules/.gf-npm-ci ] || [ package-lock.json -nt node_modules/.gf-npm-ci ]; then \
	  npm ci --no-audit --no-fund && touch node_modules/.gf-npm-ci; fi
	@cd web && npm run --silent build

# The main job: the agent with its dashboard (http://127.0.0.1:9401/); simulated GPUs, clearly labelled,
# where no backend finds real ones. ARGS are passed to `gpufleet serve` (e.g. ARGS="--listen 0.0.0.0:9401").
ARGS ?=
run: build web
	@if $(GPUFLEET) backends >/dev/null 2>&1; then \
	  exec $(GPUFLEET) serve $(ARGS); \
	else \
	  echo "No usable GPU backend here ($(GPUFLEET) backends says why): serving SIMULATED GPUs."; \
	  exec $(GPUFLEET) --backend sim serve $(ARGS); \
	fi

test: build web
	@ctest --test-dir $(BUILD) --output-on-failure -j $(TEST_JOBS)

# What the container image ships (Dockerfile), staged in PACKAGE_DIR and checked: the binary starts, and
# the Debian packages it needs at run time are listed (scripts/package.sh). CI runs it as the image does.
PACKAGE_DIR ?= $(BUILD)/stage
package: build web
	@scripts/package.sh $(BUILD) $(PACKAGE_DIR)

# The whole suite once more under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: deps web
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGF_SANITIZE=ON -DGF_WERROR=ON -DGF_BENCH=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ctest --test-dir build-asan --output-on-failure -j $(TEST_JOBS)

# The tests of the threaded areas under ThreadSanitizer (ctest labels `threads`: the agent's loop and its
# servers, the sampler hub, the store's checkpointer, the cluster's fetches; `integration` and `python`:
# the agent binary under real clients); only their targets are built. halt_on_error: the first race fails its test;
# tests/tsan.supp names races outside our code.
TSAN_TARGETS = gpufleet fake_nvml fake_nvml_old standin gf_integration_tests \
  $(addprefix gf_test_,platform launch node sampler scheduler server store cluster)
tsan: deps web
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGF_TSAN=ON -DGF_WERROR=ON -DGF_BENCH=OFF >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TARGETS)
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --test-dir build-tsan --output-on-failure -j $(TEST_JOBS) -L '^(threads|integration|python)$$'

# A packager's build: plain `-DCMAKE_BUILD_TYPE=Release`, in a folder of its own, warnings as errors. CI
# does not need it: `make test` builds the same configuration.
release: deps
	@cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGF_WERROR=ON >/dev/null
	@cmake --build build-release -j $(JOBS)

# clang-tidy's short list (.clang-tidy) over src/, with the compile commands of the dev build.
# clang-tidy over src/, but cluster/exec_client.cpp: its Asio coroutines need C++20 coroutine support that
# Debian 12's clang 14 lacks with libstdc++ 12 (GCC builds it; its code is checked by the GCC warnings).
tidy: build
	@run-clang-tidy -quiet -p $(BUILD) -j $(JOBS) -extra-arg=-Wno-unknown-warning-option '$(CURDIR)/src/(?!cluster/exec_client\.cpp)' >$(BUILD)/tidy.log 2>&1 \
	  || { grep -E 'error:|warning:' -A3 $(BUILD)/tidy.log | head -100; echo "clang-tidy: findings above"; exit 1; }
	@echo "clang-tidy: no findings"

FORMAT_FILES = $(shell git ls-files '*.cpp' '*.hpp')
format:
	@clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "clang-format: clean"

# Each libFuzzer target for FUZZ_SECONDS, starting from its seed corpus.
fuzz:
	@scripts/install-deps.sh --ci
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGF_FUZZ=ON -DGF_TESTS=OFF -DGF_BENCH=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_nvidia_smi_csv fuzz_nvidia_smi_mig fuzz_kernel_xid fuzz_accept_encoding fuzz_fdinfo fuzz_drm_fdinfo fuzz_estimate fuzz_api_request fuzz_kube fuzz_manifest fuzz_prometheus_response fuzz_agent_request fuzz_host_stats fuzz_socketio fuzz_socketio_session fuzz_ws_frame fuzz_url fuzz_exec_stream
	@for t in nvidia_smi_csv nvidia_smi_mig kernel_xid accept_encoding fdinfo drm_fdinfo estimate api_request kube manifest prometheus_response agent_request host_stats socketio socketio_session ws_frame url exec_stream; do \
	  mkdir -p fuzz/corpus-work/$$t; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 fuzz/corpus-work/$$t fuzz/corpus/$$t \
	    > build-fuzz/$$t.log 2>&1; rc=$$?; tail -n 12 build-fuzz/$$t.log; \
	  if [ $$rc -ne 0 ]; then \
	    echo "--- $$t: the report ---"; \
	    first=$$(grep -n -m1 -E 'check failed|ERROR: |runtime error|==[0-9]+==' build-fuzz/$$t.log | cut -d: -f1); \
	    [ -z "$$first" ] || sed -n "$$first,+45p" build-fuzz/$$t.log; \
	    exit 1; \
	  fi; \
	done

bench: deps
	@bench/run.sh

# Builds every benchmark program (a plain build does not), without running them: CI's check that they build.
bench-build: build
	@cmake --build $(BUILD) -j $(JOBS) --target gf_benches

clean:
	rm -rf $(BUILD) build-asan build-tsan build-release build-fuzz build-bench
