#!/usr/bin/env bash
# The GPU check of the CUDA back end, in two halves (docs/gpu.md):
#
#   scripts/gpu-check.sh prepare [DIR]   here, with the compiler: builds the runtime alone
#                                        (libkiln_runtime.so, kiln-run; no LLVM), compiles the
#                                        paper's models and a set of ONNX node tests for
#                                        `cuda -arch=sm_90`, and writes the CPU build's outputs
#                                        on the same seeded inputs as the reference.
#   scripts/gpu-check.sh device [DIR]    on the GPU machine (the device tool, DIR carried):
#                                        runs every module on the GPU with kiln-run and compares
#                                        each output with its reference (max abs error, 1e-4
#                                        relative to the reference's scale); prints one line per
#                                        check and a summary; exit 1 when any check fails.
#
# DIR defaults to gpu-check/ (ignored by git). MODELS and NODE_TESTS override the lists (the
# device tool carries at most 64 MiB: resnet18's params alone are 47 MB, so it goes in a run of
# its own). On the device, REPEAT (default 30) timed runs per model follow the checked one, and
# TORCH_MODELS / TORCH_COMPILE name the models bench/gpu_torch.py times in PyTorch.
set -euo pipefail
mode=${1:?usage: gpu-check.sh prepare|device [DIR]}
dir=${2:-gpu-check}
MODELS=${MODELS:-"mobilenet_v2 dqn dcgan resnet18"}
NODE_TESTS=${NODE_TESTS:-"test_relu test_sigmoid test_tanh test_exp test_log test_softmax_axis_1
test_add_bcast test_mul_bcast test_matmul_2d test_gemm_default_matrix_bias test_conv_with_strides_padding
test_maxpool_2d_pads test_averagepool_2d_pads test_globalaveragepool test_reduce_mean_keepdims_example
test_transpose_default test_concat_2d_axis_1 test_batchnorm_example test_leakyrelu test_pow
test_erf test_gather_0 test_slice test_clip test_layer_normalization_2d_axis1"}

if [ "$mode" = prepare ]; then
  kiln=${KILN:-build/bin/kiln}
  mkdir -p "$dir/models" "$dir/nodes"
  /usr/bin/python3 scripts/export_models.py build/models --models "$(echo $MODELS | tr ' ' ,)" >/dev/null
  cmake -S . -B "$dir/rt-build" -G Ninja -DKILN_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$dir/rt-build" >/dev/null
  mkdir -p "$dir/rt/bin" "$dir/rt/lib"
  cp "$dir/rt-build/bin/kiln-run" "$dir/rt/bin/"
  cp "$dir/rt-build/lib/libkiln_runtime.so" "$dir/rt/lib/"
  for m in $MODELS; do
    "$kiln" compile "build/models/$m.onnx" --target 'cuda -arch=sm_90' -o "$dir/models/$m.cuda" >/dev/null
    "$kiln" compile "build/models/$m.onnx" -o "$dir/tmp-$m.cpu" >/dev/null
    "$kiln" run "$dir/tmp-$m.cpu" --seed 7 --output-dir "$dir/models/$m.ref" >/dev/null
    rm -rf "$dir/tmp-$m.cpu"
    echo "prepared model $m"
  done
  data=/usr/share/libonnx-testdata/data/node
  for t in $NODE_TESTS; do
    [ -d "$data/$t" ] || { echo "no node test $t"; continue; }
    if "$kiln" compile "$data/$t/model.onnx" --target 'cuda -arch=sm_90' -o "$dir/nodes/$t" \
        >"$dir/nodes/$t.log" 2>&1; then
      /usr/bin/python3 scripts/onnx_pb_to_npy.py "$data/$t/model.onnx" "$data/$t/test_data_set_0" \
        "$dir/nodes/$t.data"
      echo "prepared node test $t"
    else
      echo "node test $t does not compile for cuda: $(tail -1 "$dir/nodes/$t.log")"
    fi
  done
  # A dense layer the shared-memory template takes (M, N, K multiples of 16), numpy's result.
  /usr/bin/python3 - "$dir/gemm_tiled" <<'PY'
import os, sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
out = sys.argv[1]; os.makedirs(out + ".data", exist_ok=True)
rng = np.random.default_rng(5)
a = rng.uniform(-1, 1, (128, 256)).astype(np.float32)
b = rng.uniform(-1, 1, (512, 256)).astype(np.float32)
c = rng.uniform(-1, 1, (512,)).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("Gemm", ["a", "b", "c"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])],
    "gemm_tiled", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [128, 256])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 512])],
    [numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + ".onnx")
np.save(out + ".data/input_a.npy", a)
np.save(out + ".data/output_y.npy", np.maximum(a.astype(np.float64) @ b.T.astype(np.float64) + c, 0).astype(np.float32))
PY
  "$kiln" compile "$dir/gemm_tiled.onnx" --target 'cuda -arch=sm_90' -o "$dir/nodes/gemm_tiled"
  mv "$dir/gemm_tiled.data" "$dir/nodes/" && rm "$dir/gemm_tiled.onnx"
  grep -q dense_tiled.gpu "$dir/nodes/gemm_tiled/graph.json" || echo "gemm_tiled: not on the tiled template"
  # The paper's conv layers C1-C12 (bench/paper_layers.h), each a model, for timing against
  # cuDNN on the device (LAYERS=1).
  if [ "${LAYERS:-0}" = 1 ]; then
    mkdir -p "$dir/layers"
    /usr/bin/python3 - "$dir/layers" <<'PY'
import sys, numpy as np
from onnx import helper, numpy_helper, TensorProto, save
layers = [("C1",224,3,64,7,2),("C2",56,64,64,3,1),("C3",56,64,64,1,1),("C4",56,64,128,3,2),
          ("C5",56,64,128,1,2),("C6",28,128,128,3,1),("C7",28,128,256,3,2),("C8",28,128,256,1,2),
          ("C9",14,256,256,3,1),("C10",14,256,512,3,2),("C11",14,256,512,1,2),("C12",7,512,512,3,1)]
rng = np.random.default_rng(9)
for name, hw, ic, oc, k, st in layers:
    w = rng.uniform(-0.1, 0.1, (oc, ic, k, k)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4, strides=[st, st])],
        name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ic, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{sys.argv[1]}/{name}.onnx")
    open(f"{sys.argv[1]}/{name}.shape", "w").write(f"{hw} {ic} {oc} {k} {st}\n")
PY
    for f in "$dir"/layers/*.onnx; do
      "$kiln" compile "$f" --target 'cuda -arch=sm_90' -o "${f%.onnx}.cuda" >/dev/null && rm "$f"
    done
  fi
  rm -rf "$dir/rt-build"
  du -sh "$dir"
  exit 0
fi

[ "$mode" = device ] || { echo "usage: gpu-check.sh prepare|device [DIR]"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
run=$dir/rt/bin/kiln-run
shopt -s nullglob
fail=0
compare() {  # compare OUT_DIR REF_DIR LABEL
  python3 - "$1" "$2" "$3" <<'PY' || fail=1
import sys, os, numpy as np
out, ref, label = sys.argv[1:]
ok = True
for f in sorted(os.listdir(ref)):
    if not f.endswith('.npy'): continue
    a = np.load(os.path.join(out, f)); b = np.load(os.path.join(ref, f))
    if a.shape != b.shape:
        print(f"FAIL {label} {f}: shape {a.shape} vs {b.shape}"); ok = False; continue
    scale = max(1.0, float(np.abs(b.astype(np.float64)).max()) if b.size else 1.0)
    err = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if b.size else 0.0
    good = err <= 1e-4 * scale and np.isfinite(a).all() == np.isfinite(b).all()
    print(f"{'ok  ' if good else 'FAIL'} {label} {f}: max abs err {err:.3g} (scale {scale:.3g})")
    ok = ok and good
sys.exit(0 if ok else 1)
PY
}
for m in $dir/models/*.cuda; do
  name=$(basename "$m" .cuda)
  out=$(mktemp -d)
  if "$run" "$m" --seed 7 --output-dir "$out" --repeat "${REPEAT:-30}" > "$out/log" 2>&1; then
    echo "kiln $name: $(tail -1 "$out/log")"
    compare "$out" "$dir/models/$name.ref" "model $name"
  else
    echo "FAIL model $name: $(tail -3 "$out/log")"; fail=1
  fi
done
for t in $dir/nodes/*.data; do
  name=$(basename "$t" .data)
  out=$(mktemp -d)
  args=()
  for f in "$t"/input_*.npy; do
    n=$(basename "$f" .npy); args+=(--input "${n#input_}=$f")
  done
  if "$run" "$dir/nodes/$name" "${args[@]}" --output-dir "$out" > "$out/log" 2>&1; then
    mkdir -p "$out/ref"; for f in "$t"/output_*.npy; do n=$(basename "$f"); cp "$f" "$out/ref/${n#output_}"; done
    compare "$out" "$out/ref" "node $name"
  else
    echo "FAIL node $name: $(tail -3 "$out/log")"; fail=1
  fi
done
# The paper's conv layers: Kiln, then PyTorch's conv2d (cuDNN) on the same shapes.
for l in $dir/layers/*.cuda; do
  name=$(basename "$l" .cuda)
  echo "kiln $name: $("$run" "$l" --repeat "${REPEAT:-30}" 2>&1 | tail -1)"
done
if [ -d "$dir/layers" ]; then
  python3 - "$dir/layers" <<'PY'
import sys, glob, os, torch
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False  # fp32, as Kiln computes
for f in sorted(glob.glob(sys.argv[1] + "/*.shape")):
    hw, ic, oc, k, st = map(int, open(f).read().split())
    x = torch.randn(1, ic, hw, hw, device="cuda"); w = torch.randn(oc, ic, k, k, device="cuda")
    fn = lambda: torch.nn.functional.conv2d(x, w, stride=st, padding=k // 2)
    for _ in range(10): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(100): fn()
    e.record(); e.synchronize()
    print(f"cudnn {os.path.basename(f)[:-6]}: {s.elapsed_time(e) / 100:.4f} ms")
PY
fi
# PyTorch on the same GPU, the same models (seeded as export_models.py builds them), batch 1.
if [ -n "${TORCH_MODELS:-}" ]; then
  timeout "${TORCH_TIMEOUT:-300}" python3 bench/gpu_torch.py --models "$TORCH_MODELS" \
    --compile "${TORCH_COMPILE:-}" || echo "gpu_torch.py did not finish"
fi
echo "gpu-check: $([ $fail = 0 ] && echo all checks passed || echo some checks FAILED)"
exit $fail
