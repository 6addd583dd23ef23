# gpufleet front door. `make run` and `make test` work on a fresh Debian 12 machine: each installs
# what is missing (scripts/install-deps.sh), builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 30
GPUFLEET = $(BUILD)/gpufleet

.PHONY: all deps build run test asan fuzz bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: a live view of this machine's GPUs; simulated GPUs (clearly labelled) where there are none.
run: build
	@if $(GPUFLEET) backends >/dev/null 2>&1; then \
	  exec $(GPUFLEET) watch; \
	else \
	  echo "No usable GPU backend here ($(GPUFLEET) backends says why): showing SIMULATED GPUs."; sleep 2; \
	  exec $(GPUFLEET) --backend sim watch; \
	fi

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite once more under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: deps
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGF_SANITIZE=ON -DGF_BENCH=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ctest --test-dir build-asan --output-on-failure -j $(JOBS)

# Each libFuzzer target for FUZZ_SECONDS, starting from its seed corpus.
fuzz:
	@scripts/install-deps.sh --ci
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGF_FUZZ=ON -DGF_TESTS=OFF -DGF_BENCH=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_nvidia_smi_csv fuzz_fdinfo fuzz_estimate
	@for t in nvidia_smi_csv fdinfo estimate; do \
	  mkdir -p fuzz/corpus-work/$$t; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 fuzz/corpus-work/$$t fuzz/corpus/$$t \
	    > build-fuzz/$$t.log 2>&1; rc=$$?; tail -n 12 build-fuzz/$$t.log; [ $$rc -eq 0 ] || exit 1; \
	done

bench: deps
	@bench/run.sh

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-bench
