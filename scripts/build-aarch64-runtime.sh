#!/usr/bin/env bash
# Cross-builds what an aarch64 board needs to run a module compiled with
# `kiln compile --target 'llvm -mtriple=aarch64-linux-gnu ...'`: libkiln_runtime.so and the
# kiln-run runner (cmake/runtime_only.cmake, cmake/aarch64-linux-gnu.cmake). The normal build
# does the same into build/aarch64 when the cross compiler is installed; this script is for a
# build folder of its own (e.g. to copy bin/ and lib/ to a board).
#   scripts/build-aarch64-runtime.sh [BUILD_DIR]      (default build-aarch64)
# Then: qemu-aarch64 -L /usr/aarch64-linux-gnu BUILD_DIR/bin/kiln-run MODULE_DIR
# or, on the board: BUILD_DIR/bin/kiln-run MODULE_DIR (it finds ../lib/libkiln_runtime.so).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-aarch64}
if ! command -v aarch64-linux-gnu-g++ >/dev/null; then
  echo "build-aarch64-runtime: aarch64-linux-gnu-g++ is not on PATH" \
       "(Debian/Ubuntu: apt-get install g++-aarch64-linux-gnu)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$out" -G Ninja -DKILN_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake "${launcher[@]}"
cmake --build "$out" -j "$(nproc)"
echo "build-aarch64-runtime: $out/bin/kiln-run and $out/lib/libkiln_runtime.so"
