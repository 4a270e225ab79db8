# Kiln's two commands: `make demo` and `make test`. Each does all the set-up on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test lint bench bench-tuners format clean fuzz fuzz-build

all: build

# Debian packages, then ONNX Runtime from PyPI in .venv-bench (the int8 tests' reference).
deps:
	@bash scripts/install-deps.sh
	@bash scripts/setup-bench-env.sh --ort-only

$(BUILD)/build.ninja:
	@$(MAKE) --no-print-directory deps
	cmake -S . -B $(BUILD) -G Ninja

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/bin/kiln demo
	./$(BUILD)/bin/kiln demo --gemm

# ctest runs lint too (the test `kiln-lint`), so `make test` and CI fail when lint fails.
# Then each libFuzzer target runs FUZZ_TEST_RUNS inputs from a fixed seed (the same inputs at
# any load for a given binary and CPU; a finding fails the step). Open search: `make fuzz`.
test: build fuzz-build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	bash scripts/fuzz.sh -r $(FUZZ_TEST_RUNS) -b $(FUZZ_BUILD) -k $(BUILD)/bin/kiln

# Fuzzing (fuzz/, docs/fuzzing.md): libFuzzer targets for the ONNX importer, the module loader,
# the .npy reader and the tuning-log reader, built with clang 16, ASan and UBSan in their own
# build directory. `make fuzz FUZZ_SECONDS=600` runs each target 10 minutes.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TEST_RUNS ?= 200000

$(FUZZ_BUILD)/build.ninja:
	@$(MAKE) --no-print-directory deps
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DKILN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-16 \
	  -DCMAKE_C_COMPILER=clang-16

fuzz-build: $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target kiln-fuzz-all

fuzz: build fuzz-build
	bash scripts/fuzz.sh -t $(FUZZ_SECONDS) -b $(FUZZ_BUILD) -k $(BUILD)/bin/kiln

# Formatting (clang-format 14, --dry-run -Werror), layering, op-name comparisons: scripts/lint.sh.
lint:
	bash scripts/lint.sh

bench: build
	bash scripts/setup-bench-env.sh
	./$(BUILD)/bin/kiln-bench-gemm
	./$(BUILD)/bin/kiln-bench-ops
	./$(BUILD)/bin/kiln-bench-models

bench-tuners: build
	./$(BUILD)/bin/kiln-bench-tuners --trials 400 --rotate-mb 8 --remeasure 5

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
