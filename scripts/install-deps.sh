#!/usr/bin/env bash
# Installs what Kiln needs to build, test and benchmark, from Debian's packages only.
# Idempotent: does nothing when every package is already installed.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  llvm-16-dev libzstd-dev zlib1g-dev libedit-dev libxml2-dev libffi-dev libncurses-dev  # LLVM codegen + ORC JIT
  libgtest-dev libgmock-dev libbenchmark-dev                         # tests and benchmarks
  libopenblas-dev                                                    # GEMM baseline in bench/
  libdnnl-dev                                                        # oneDNN: conv baseline in bench/
  nlohmann-json3-dev                                                 # JSON (records, graph)
  libcli11-dev                                                       # the kiln command line
  libonnx-dev libprotobuf-dev protobuf-compiler                      # ONNX model format (frontend)
  libonnx-testdata                                                   # ONNX conformance tests
  libxgboost-dev                                                     # the tuner's cost model (gradient-boosted trees)
  python3-torch python3-torchvision python3-onnx python3-numpy python3-venv  # reference models and data (tests only)
  python3-matplotlib                                                 # tuner curves plot (bench/plot_tuners.py)
  clang-format
  clang-16 libclang-rt-16-dev                                        # libFuzzer + ASan/UBSan: make fuzz (fuzz/)
  stress-ng                                                          # scripts/flaky-check.sh's CPU load
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user                # aarch64: cross linker, runtime, tests under qemu
  ocl-icd-libopencl1 pocl-opencl-icd                                 # OpenCL: the ICD loader and PoCL (GPU kernels run on the CPU)
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
