#!/usr/bin/env bash
# Makes .venv-bench/, the Python environment of the model benchmark's baselines
# (bench/baselines.py, run by build/bin/kiln-bench-models): Debian's torch, torchvision, onnx and
# numpy from the system site packages, plus ONNX Runtime and, if it installs here, Apache TVM
# from PyPI. TVM is optional: a failure to install it is reported and tolerated (the benchmark
# then leaves its column out); so are xgboost and cloudpickle, which TVM's MetaSchedule tuner
# needs (bench/tvm_metaschedule.py). Idempotent; safe to re-run.
#
#   bash scripts/setup-bench-env.sh [--ort-only] [VENV_DIR]   (default: .venv-bench in the repository)
#
# --ort-only stops after ONNX Runtime: what the tests need (`make deps` runs it; the int8 tests
# compare Kiln with ONNX Runtime's int8 kernels, tests/int8/).
set -uo pipefail

ORT_ONLY=0
if [ "${1:-}" = "--ort-only" ]; then
  ORT_ONLY=1
  shift
fi
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

# onnxruntime.quantization (the int8 tests' fixtures) also needs ml_dtypes and onnx >= 1.13
# (onnx.reference), which onnxruntime does not pull in: without them every int8 test skipped in
# a fresh clone. The venv's onnx shadows Debian's 1.12 there only.
if "$VENV/bin/python" -c 'import onnxruntime.quantization' 2>/dev/null; then
  echo "setup-bench-env: onnxruntime present"
else
  echo "setup-bench-env: installing onnxruntime"
  "${PIP[@]}" -c "$CONSTRAINTS" onnxruntime ml_dtypes "onnx>=1.13" || {
    echo "setup-bench-env: installing onnxruntime failed" >&2
    exit 1
  }
fi

[ "$ORT_ONLY" = 1 ] && exit 0

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

# MetaSchedule (bench/tvm_metaschedule.py, docs/tvm-baseline.md): TVM's own auto-tuner needs
# xgboost (its default cost model) and cloudpickle (its builder/runner worker pools). Optional
# like TVM: without xgboost the script falls back to the random cost model and says so.
# apache-tvm 0.27.0.post1 accepts apache-tvm-ffi >= 0.1.14.post0, but with 0.1.15 its save_json
# (which MetaSchedule's mutators call on every task) segfaults: keep tvm-ffi at 0.1.14.
if "$VENV/bin/python" -c 'import tvm' 2>/dev/null; then
  if "$VENV/bin/python" -c 'import tvm_ffi, sys; sys.exit(not tvm_ffi.__version__.startswith("0.1.15"))' 2>/dev/null &&
    "$VENV/bin/python" -c 'import tvm, sys; sys.exit(tvm.__version__ != "0.27.0.post1")' 2>/dev/null; then
    "${PIP[@]}" -c "$CONSTRAINTS" "apache-tvm-ffi==0.1.14.post1" ||
      echo "setup-bench-env: could not pin apache-tvm-ffi 0.1.14 (MetaSchedule will crash)" >&2
  fi
  if "$VENV/bin/python" -c 'import xgboost, cloudpickle' 2>/dev/null; then
    echo "setup-bench-env: xgboost and cloudpickle present"
  else
    "${PIP[@]}" -c "$CONSTRAINTS" xgboost cloudpickle ||
      echo "setup-bench-env: xgboost/cloudpickle did not install; MetaSchedule falls back to its random cost model" >&2
  fi
fi
"$VENV/bin/python" - <<'PYEOF'
import importlib
import sys
for name in ("numpy", "torch", "onnx", "onnxruntime", "tvm", "tvm_ffi", "xgboost", "cloudpickle"):
    if name in ("tvm", "tvm_ffi"):
        sys.modules["torch"] = None  # as bench/baselines.py does: keeps tvm's import fast
    try:
        m = importlib.import_module(name)
        print(f"setup-bench-env: {name} {getattr(m, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001 - report whatever fails to import
        print(f"setup-bench-env: {name} unavailable ({type(e).__name__}: {e})")
PYEOF
