#!/usr/bin/env bash
# Makes .venv-bench/, the Python environment of the model benchmark's baselines
# (bench/baselines.py, run by build/bin/kiln-bench-models): Debian's torch, torchvision, onnx and
# numpy from the system site packages, plus ONNX Runtime and, if it installs here, Apache TVM
# from PyPI. TVM is optional: a failure to install it is reported and tolerated (the benchmark
# then leaves its column out). Idempotent; safe to re-run.
#
#   bash scripts/setup-bench-env.sh [VENV_DIR]     (default: .venv-bench in the repository)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-bench}"
PY=/usr/bin/python3

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup-bench-env: creating $VENV"
  "$PY" -m venv --system-site-packages "$VENV" || {
    echo "setup-bench-env: cannot create the venv (is python3-venv installed? see scripts/install-deps.sh)" >&2
    exit 1
  }
fi
PIP=("$VENV/bin/pip" install --disable-pip-version-check -q)
# Keep Debian's numpy (torch 1.13 is built against numpy 1.x): pin it to the installed version.
NUMPY_VERSION="$("$PY" -c 'import numpy; print(numpy.__version__)')"
CONSTRAINTS="$VENV/constraints.txt"
echo "numpy==$NUMPY_VERSION" > "$CONSTRAINTS"

if "$VENV/bin/python" -c 'import onnxruntime' 2>/dev/null; then
  echo "setup-bench-env: onnxruntime present"
else
  echo "setup-bench-env: installing onnxruntime"
  "${PIP[@]}" -c "$CONSTRAINTS" onnxruntime || {
    echo "setup-bench-env: installing onnxruntime failed" >&2
    exit 1
  }
fi

# TVM: its ONNX frontend needs onnx >= 1.13 (onnx.helper.tensor_dtype_to_np_dtype); the venv's
# copy shadows Debian's 1.12 there only (the exporter runs on /usr/bin/python3, not in the venv).
# TVM_FFI_DISABLE_TORCH_C_DLPACK: importing tvm would otherwise try to JIT a torch extension.
export TVM_FFI_DISABLE_TORCH_C_DLPACK=1
if "$VENV/bin/python" -c 'import tvm' 2>/dev/null; then
  echo "setup-bench-env: apache-tvm present"
elif "${PIP[@]}" -c "$CONSTRAINTS" apache-tvm && "$VENV/bin/python" -c 'import tvm' 2>/dev/null; then
  echo "setup-bench-env: apache-tvm installed"
else
  echo "setup-bench-env: apache-tvm did not install; the benchmark runs without the TVM baseline" >&2
fi
if "$VENV/bin/python" -c 'import tvm' 2>/dev/null &&
  ! "$VENV/bin/python" -c 'from onnx.helper import tensor_dtype_to_np_dtype' 2>/dev/null; then
  "${PIP[@]}" -c "$CONSTRAINTS" "onnx>=1.13" ||
    echo "setup-bench-env: could not install onnx>=1.13 for TVM's ONNX frontend" >&2
fi
"$VENV/bin/python" - <<'PYEOF'
import importlib
import sys
for name in ("numpy", "torch", "onnx", "onnxruntime", "tvm"):
    if name == "tvm":
        sys.modules["torch"] = None  # as bench/baselines.py does: keeps tvm's import fast
    try:
        m = importlib.import_module(name)
        print(f"setup-bench-env: {name} {getattr(m, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001 - report whatever fails to import
        print(f"setup-bench-env: {name} unavailable ({type(e).__name__}: {e})")
PYEOF
