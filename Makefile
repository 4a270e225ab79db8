# Kiln's two commands: `make demo` and `make test`. Each does all the set-up on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test lint bench bench-tuners format clean

all: build

deps:
	@bash scripts/install-deps.sh

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
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

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
	rm -rf $(BUILD)
