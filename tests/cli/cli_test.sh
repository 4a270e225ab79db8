#!/usr/bin/env bash
# The kiln command line end to end: compile an ONNX model, run it on an .npy input written by
# the test, check the output against the conformance reference, and the documented errors;
# bench (text and --json), inspect (--graph, --fused, --tir with a real and a bad kernel name),
# compare (a model whose optimized build agrees), the gemm demo, and bad flags. Hostile inputs
# (issue 26), each a one-line error with exit code 1: --output-dir that cannot hold outputs, a
# tampered module directory (truncated lib.so, FIFO graph.json, params.bin -> /dev/zero), a
# .npy whose header claims 12 GiB, bad --input-shape specs, NaN tolerances, unreadable numbers;
# bfloat16 inputs and outputs through uint16 / float32 .npy files; a memory plan beyond 64 bits;
# weights in an external data file (ONNX's own writer), and that file missing; a float16 model.
set -u
KILN="$1"
SUITE=/usr/share/libonnx-testdata/data/node
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if [ -d "$SUITE/test_relu" ]; then
  "$KILN" compile "$SUITE/test_relu/model.onnx" -o "$TMP/relu" >"$TMP/log" 2>&1 || fail "compile: $(cat "$TMP/log")"
  [ -f "$TMP/relu/graph.json" ] && [ -f "$TMP/relu/lib.so" ] || fail "module files missing"
  # A float32 [3,4,5] input with known values: relu keeps positives, zeroes negatives.
  /usr/bin/python3 - "$TMP/x.npy" <<'PY' || fail "could not write the input"
import struct, sys
vals = [((i * 37) % 11) - 5.5 for i in range(60)]
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4, 5), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<60f", *vals))
PY
  "$KILN" run "$TMP/relu" --input x="$TMP/x.npy" --output-dir "$TMP/out" >"$TMP/log" 2>&1 || fail "run: $(cat "$TMP/log")"
  [ -f "$TMP/out/y.npy" ] || fail "output file y.npy missing: $(cat "$TMP/log")"
  /usr/bin/python3 - "$TMP/out/y.npy" <<'PY' || fail "wrong relu output"
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<H", data[8:10])[0]
got = struct.unpack("<60f", data[10 + n:])
want = [max(0.0, ((i * 37) % 11) - 5.5) for i in range(60)]
sys.exit(0 if list(got) == want else 1)
PY
  # A wrong input shape is refused with a message naming the input.
  "$KILN" run "$TMP/relu" --input y="$TMP/x.npy" >"$TMP/log" 2>&1 && fail "unknown input accepted"
  grep -q "x" "$TMP/log" || fail "unknown-input error does not list the inputs: $(cat "$TMP/log")"
fi
# An unsupported operator is named with its domain, opset and node.
/usr/bin/python3 - "$TMP/unsupported.onnx" <<'PY' || fail "could not write the unsupported-op model"
import sys, onnx
from onnx import helper, TensorProto
n = helper.make_node("Frobnicate", ["x"], ["y"], name="frob")
g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
"$KILN" compile "$TMP/unsupported.onnx" -o "$TMP/unsupported" >"$TMP/log" 2>&1 && fail "Frobnicate accepted"
grep -q "Frobnicate (domain ai.onnx, opset 13, node 'frob')" "$TMP/log" || fail "unsupported-op message: $(cat "$TMP/log")"
# A truncated file.
head -c 20 "$KILN" >"$TMP/bad.onnx"
"$KILN" compile "$TMP/bad.onnx" -o "$TMP/bad" >"$TMP/log" 2>&1 && fail "garbage accepted"
grep -q "is not a valid ONNX model\|is not an ONNX model" "$TMP/log" || fail "bad-file message: $(cat "$TMP/log")"

# A small CNN written with ONNX's helper API: conv 3x3 + relu, a 1x1 conv, a residual add,
# global average pool, flatten, gemm. Node names are set, so `compare` can match groups.
/usr/bin/python3 - "$TMP/small.onnx" <<'PY' || fail "could not write the small model (onnx helper)"
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(0)
def init(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
    helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
    helper.make_node("Relu", ["a"], ["r2"], name="relu2"),
    helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
    helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
    helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1),
]
g = helper.make_graph(nodes, "small",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
    [init("w1", 16, 3, 3, 3), init("b1", 16), init("w2", 16, 16, 1, 1), init("w3", 10, 16),
     init("b3", 10)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
PY
SMALL="$TMP/small.onnx"

# bench: compiles a model file (compile time reported), median/min/max, --json.
"$KILN" bench "$SMALL" --threads 1 --repeat 5 --warmup 1 --json "$TMP/bench.json" >"$TMP/log" 2>&1 || fail "bench: $(cat "$TMP/log")"
grep -q "compiled .* in [0-9]* ms (opt-level 2): [0-9]* kernels; memory plan:" "$TMP/log" || fail "bench compile line: $(cat "$TMP/log")"
grep -q "latency over 5 runs (1 warm-up), 1 thread(s): median [0-9.]* ms, min [0-9.]* ms, max [0-9.]* ms" "$TMP/log" || fail "bench latency line: $(cat "$TMP/log")"
/usr/bin/python3 - "$TMP/bench.json" "$SMALL" <<'PY' || fail "bench --json: $(cat "$TMP/bench.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["model"] == sys.argv[2] and r["threads"] == 1 and r["repeat"] == 5, r
assert 0 < r["min_ms"] <= r["median_ms"] <= r["max_ms"], r
assert r["compile_ms"] > 0 and r["kernels"] >= 1 and r["memory_plan_bytes"] > 0, r
PY
# bench on a compiled module directory: no compile time; compile options are refused.
"$KILN" compile "$SMALL" -o "$TMP/small" >"$TMP/log" 2>&1 || fail "compile small: $(cat "$TMP/log")"
"$KILN" bench "$TMP/small" --repeat 3 --json "$TMP/bench2.json" >"$TMP/log" 2>&1 || fail "bench dir: $(cat "$TMP/log")"
grep -q "module $TMP/small: [0-9]* kernels" "$TMP/log" || fail "bench dir line: $(cat "$TMP/log")"
grep -q '"compile_ms": null' "$TMP/bench2.json" || fail "bench dir json: $(cat "$TMP/bench2.json")"
# --profile: the slowest nodes with their share; every node in the JSON, times summing to the total.
"$KILN" bench "$TMP/small" --repeat 3 --profile 2 --json "$TMP/bench3.json" >"$TMP/log" 2>&1 || fail "bench --profile: $(cat "$TMP/log")"
grep -q "profile over 3 runs: [0-9]* nodes, [0-9.]* ms in kernels; the 2 slowest:" "$TMP/log" || fail "profile line: $(cat "$TMP/log")"
[ "$(grep -c "^ *[0-9.]* ms *[0-9.]*%  " "$TMP/log")" -eq 2 ] || fail "profile rows: $(cat "$TMP/log")"
# The roofline: the machine's peak and bandwidth measured in the run, per kernel its GFLOP/s, GB/s
# and share of the roofline (graph.json's flops / bytes).
grep -q "roofline, measured now on [0-9]* thread(s): [0-9.]* GFLOP/s fp32 multiply-add peak, [0-9.]* GB/s copy bandwidth" "$TMP/log" || fail "roofline line: $(cat "$TMP/log")"
grep -q '"flops": *[1-9]' "$TMP/small/graph.json" || fail "graph.json flops: $(head -c 600 "$TMP/small/graph.json")"
/usr/bin/python3 - "$TMP/bench3.json" <<'PY' || fail "bench --profile json: $(cat "$TMP/bench3.json")"
import json, sys
r = json.load(open(sys.argv[1]))
p = r["profile"]
assert len(p) >= 2 and all(n["ms"] >= 0 and n["func"] for n in p), p
assert p == sorted(p, key=lambda n: -n["ms"]), p
assert all(n["bytes"] > 0 and n["flops"] >= 0 and n["roofline_fraction"] >= 0 for n in p), p
assert any(n["flops"] > 0 for n in p), p
assert r["roofline"]["gflops"] > 0 and r["roofline"]["gbs"] > 0 and r["roofline"]["threads"] >= 1, r
PY
# Nodes may share a name (a Conv1d's ReLU, fused into the convolution, and the squeeze after it
# both carry the ONNX output's): the profile attributes costs and implementations by node.
/usr/bin/python3 - "$TMP/conv1d.onnx" <<'PY' || fail "could not write the Conv1d model"
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((32, 16, 3)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
                       helper.make_node("Relu", ["c"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 64])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
"$KILN" compile "$TMP/conv1d.onnx" -o "$TMP/conv1d" >"$TMP/log" 2>&1 || fail "compile conv1d: $(cat "$TMP/log")"
"$KILN" bench "$TMP/conv1d" --repeat 2 --profile 5 --json "$TMP/bench4.json" >"$TMP/log" 2>&1 || fail "bench conv1d: $(cat "$TMP/log")"
/usr/bin/python3 - "$TMP/bench4.json" "$TMP/conv1d/graph.json" <<'PY' || fail "profile by node: $(cat "$TMP/bench4.json")"
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
nodes = json.load(open(sys.argv[2]))["nodes"]
names = [n["name"] for n in p]
assert len(names) != len(set(names)), names  # the case this checks: a name shared by two nodes
for n in p:
    a = nodes[n["node"]]["attrs"]
    assert n["func"] == a["func_name"] and n["flops"] == a.get("flops", 0) and n["impl"] == a.get("impl", ""), (n, a)
assert any(n["impl"] == "conv2d_nchwc.cpu" and n["flops"] > 0 for n in p), p
PY
"$KILN" bench "$TMP/small" --opt-level 0 >"$TMP/log" 2>&1 && fail "bench dir --opt-level accepted"
grep -q "\-\-opt-level applies to a model file, not to the compiled module" "$TMP/log" || fail "bench dir --opt-level message: $(cat "$TMP/log")"
"$KILN" bench "$TMP/nothing.onnx" >"$TMP/log" 2>&1 && fail "missing model accepted"
grep -q "model file '$TMP/nothing.onnx' does not exist" "$TMP/log" || fail "missing-model message: $(cat "$TMP/log")"
"$KILN" bench "$SMALL" --threads 0 >"$TMP/log" 2>&1 && fail "--threads 0 accepted"
grep -q "threads" "$TMP/log" || fail "--threads 0 message: $(cat "$TMP/log")"
"$KILN" bench "$SMALL" --repeat x >"$TMP/log" 2>&1 && fail "--repeat x accepted"
grep -q "repeat" "$TMP/log" || fail "--repeat x message: $(cat "$TMP/log")"

# Hostile inputs (issue 26): every one a one-line error with exit code 1, never an abort or a hang.
one_error() {  # one_error LOG WHAT: exactly one line, starting "kiln CMD: error: "
  [ "$(wc -l <"$1")" -eq 1 ] && grep -q "^kiln [a-z]*: error: " "$1" || fail "$2 is not a one-line error: $(cat "$1")"
  grep -q "terminate called\|Aborted\|core dumped" "$1" && fail "$2 aborted: $(cat "$1")"
  return 0
}
# --output-dir that cannot hold the outputs: a regular file, a path under a file, unwritable.
: >"$TMP/afile"
"$KILN" run "$TMP/small" --output-dir "$TMP/afile" >/dev/null 2>"$TMP/log"; rc=$?
[ $rc -eq 1 ] || fail "--output-dir FILE: exit code $rc: $(cat "$TMP/log")"
grep -q "^kiln run: error: --output-dir '$TMP/afile': it exists and is not a directory$" "$TMP/log" || fail "--output-dir FILE message: $(cat "$TMP/log")"
one_error "$TMP/log" "--output-dir FILE"
"$KILN" run "$TMP/small" --output-dir "$TMP/afile/sub/dir" >/dev/null 2>"$TMP/log"; rc=$?
[ $rc -eq 1 ] || fail "--output-dir FILE/sub: exit code $rc: $(cat "$TMP/log")"
grep -q "^kiln run: error: --output-dir '$TMP/afile/sub/dir': '$TMP/afile' exists and is not a directory$" "$TMP/log" || fail "--output-dir FILE/sub message: $(cat "$TMP/log")"
"$KILN" run "$TMP/small" --output-dir /proc/1 >/dev/null 2>"$TMP/log"; rc=$?
[ $rc -eq 1 ] || fail "--output-dir /proc/1: exit code $rc: $(cat "$TMP/log")"
grep -q "^kiln run: error: --output-dir '/proc/1': cannot write there: " "$TMP/log" || fail "--output-dir unwritable message: $(cat "$TMP/log")"
if [ "$(id -u)" -ne 0 ]; then  # root writes anywhere: only /proc above tells
  mkdir -p "$TMP/ro" && chmod 555 "$TMP/ro"
  "$KILN" run "$TMP/small" --output-dir "$TMP/ro/out" >/dev/null 2>"$TMP/log" && fail "--output-dir under a read-only directory accepted"
  grep -q "^kiln run: error: --output-dir '$TMP/ro/out': cannot create the directory: Permission denied" "$TMP/log" || fail "--output-dir read-only message: $(cat "$TMP/log")"
  chmod 755 "$TMP/ro"
fi
# A tampered module directory: a truncated lib.so (was SIGBUS), a FIFO named graph.json (was a
# hang), params.bin linked to /dev/zero (was read until memory ran out).
cp -r "$TMP/small" "$TMP/tampered"
head -c $(( $(stat -c %s "$TMP/small/lib.so") / 2 )) "$TMP/small/lib.so" >"$TMP/tampered/lib.so"
"$KILN" run "$TMP/tampered" >/dev/null 2>"$TMP/log"; rc=$?
[ $rc -eq 1 ] || fail "truncated lib.so: exit code $rc: $(cat "$TMP/log")"
grep -q "^kiln run: error: Module::load: cannot load '$TMP/tampered/lib.so': truncated or corrupt ([0-9]* bytes): its .* lies beyond the end of the file$" "$TMP/log" || fail "truncated lib.so message: $(cat "$TMP/log")"
cp "$TMP/small/lib.so" "$TMP/tampered/lib.so"
rm "$TMP/tampered/graph.json" && mkfifo "$TMP/tampered/graph.json"
timeout 60 "$KILN" run "$TMP/tampered" >/dev/null 2>"$TMP/log"; rc=$?
[ $rc -eq 1 ] || fail "graph.json FIFO: exit code $rc (124: it hung): $(cat "$TMP/log")"
grep -q "^kiln run: error: graph '$TMP/tampered/graph.json': not a regular file (a FIFO)$" "$TMP/log" || fail "graph.json FIFO message: $(cat "$TMP/log")"
rm "$TMP/tampered/graph.json" && cp "$TMP/small/graph.json" "$TMP/tampered/graph.json"
rm "$TMP/tampered/params.bin" && ln -s /dev/zero "$TMP/tampered/params.bin"
timeout 60 "$KILN" run "$TMP/tampered" >/dev/null 2>"$TMP/log"; rc=$?
[ $rc -eq 1 ] || fail "params.bin -> /dev/zero: exit code $rc: $(cat "$TMP/log")"
grep -q "^kiln run: error: params file '$TMP/tampered/params.bin': not a regular file (a symbolic link to '/dev/zero', a character device)$" "$TMP/log" || fail "params.bin -> /dev/zero message: $(cat "$TMP/log")"
# A 358-byte .npy whose header claims 4 GiB: refused before allocating (under a 4 GiB limit).
/usr/bin/python3 - "$TMP/lying.npy" <<'PY' || fail "could not write the lying .npy"
import sys
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 32768, 32768), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
data = b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode()
open(sys.argv[1], "wb").write(data + b"\x01" * (358 - len(data)))
PY
[ "$(stat -c %s "$TMP/lying.npy")" -eq 358 ] || fail "the lying .npy is not 358 bytes"
(ulimit -v 4194304; "$KILN" run "$TMP/small" --input x="$TMP/lying.npy" >/dev/null 2>"$TMP/log"); rc=$?
[ $rc -eq 1 ] || fail "lying .npy: exit code $rc: $(cat "$TMP/log")"
grep -q "^kiln run: error: npy file '$TMP/lying.npy': truncated data (expected 12884901888 bytes (12.0 GiB) for shape (1, 3, 32768, 32768) of '<f4', the file has 230 after its header)$" "$TMP/log" || fail "lying .npy message: $(cat "$TMP/log")"
# --input-shape: a name the model does not have, a static dimension contradicted, a wrong rank,
# a negative dimension.
"$KILN" compile "$SMALL" -o "$TMP/shape" --input-shape nope=1,2 >/dev/null 2>"$TMP/log" && fail "--input-shape of an unknown input accepted"
grep -q "^kiln compile: error: --input-shape 'nope': the model has no input of that name; its inputs: 'x'$" "$TMP/log" || fail "--input-shape unknown message: $(cat "$TMP/log")"
"$KILN" compile "$SMALL" -o "$TMP/shape" --input-shape x=1,3,32,16 >/dev/null 2>"$TMP/log" && fail "--input-shape against a static dimension accepted"
grep -q "^kiln compile: error: --input-shape x=1,3,32,16: dimension 2 of input 'x' is 16 in the model, the option gives 32 (only symbolic dimensions can be set; the model's shape is \[1, 3, 16, 16\])$" "$TMP/log" || fail "--input-shape static message: $(cat "$TMP/log")"
"$KILN" inspect "$SMALL" --input-shape x=1,3,16 >/dev/null 2>"$TMP/log" && fail "--input-shape of another rank accepted"
grep -q "input 'x' has 4 dimension(s) in the model (\[1, 3, 16, 16\]), the option gives 3" "$TMP/log" || fail "--input-shape rank message: $(cat "$TMP/log")"
"$KILN" compile "$SMALL" -o "$TMP/shape" --input-shape x=-1,3,16,16 >/dev/null 2>"$TMP/log" && fail "negative --input-shape accepted"
grep -q "^kiln compile: error: --input-shape 'x=-1,3,16,16': dimension 0 is negative (-1)$" "$TMP/log" || fail "negative --input-shape message: $(cat "$TMP/log")"
/usr/bin/python3 - "$TMP/negdim.onnx" <<'PY' || fail "could not write the negative-dimension model"
import sys, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, -3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, -3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
"$KILN" compile "$TMP/negdim.onnx" -o "$TMP/negdim" >/dev/null 2>"$TMP/log" && fail "a negative model dimension accepted"
grep -q "input 'x' dimension 1 is negative (-3); give the input's shape with --input-shape x=D1,D2,...$" "$TMP/log" || fail "negative model dimension message: $(cat "$TMP/log")"

# A symbolic dimension (a batch exported as dynamic) names the option that sets it.
/usr/bin/python3 - "$TMP/symdim.onnx" <<'PY' || fail "could not write the symbolic-dimension model"
import sys, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
"$KILN" compile "$TMP/symdim.onnx" -o "$TMP/symdim" >/dev/null 2>"$TMP/log" && fail "a symbolic model dimension accepted without a shape"
grep -q "input 'x' dimension 0 is symbolic ('batch'); give the input's shape with --input-shape x=D1,D2,... (the model's shape is \[batch, 3\])$" "$TMP/log" || fail "symbolic model dimension message: $(cat "$TMP/log")"
"$KILN" compile "$TMP/symdim.onnx" -o "$TMP/symdim" --input-shape x=2,3 >/dev/null 2>"$TMP/log" || fail "--input-shape for a symbolic dimension: $(cat "$TMP/log")"
# Numeric options: NaN and negative tolerances refused, readable range messages.
"$KILN" compare "$SMALL" --atol nan >/dev/null 2>"$TMP/log" && fail "--atol nan accepted"
grep -q "\-\-atol: expected a finite number >= 0, got 'nan'" "$TMP/log" || fail "--atol nan message: $(cat "$TMP/log")"
"$KILN" compare "$SMALL" --rtol NaN >/dev/null 2>"$TMP/log" && fail "--rtol NaN accepted"
grep -q "\-\-rtol: expected a finite number >= 0, got 'NaN'" "$TMP/log" || fail "--rtol NaN message: $(cat "$TMP/log")"
"$KILN" compare "$SMALL" --rtol -0.5 >/dev/null 2>"$TMP/log" && fail "--rtol -0.5 accepted"
grep -q "\-\-rtol: expected a finite number >= 0, got '-0.5'" "$TMP/log" || fail "--rtol -0.5 message: $(cat "$TMP/log")"
"$KILN" bench "$SMALL" --threads abc >/dev/null 2>"$TMP/log" && fail "--threads abc accepted"
grep -q "\-\-threads: expected an integer from 1 to 1024, got 'abc'" "$TMP/log" || fail "--threads abc message: $(cat "$TMP/log")"
grep -q "1797693" "$TMP/log" && fail "a 300-digit range in a message: $(cat "$TMP/log")"
"$KILN" demo --gemm --size abc >/dev/null 2>"$TMP/log" && fail "--size abc accepted"
grep -q "\-\-size: expected an integer from 32 to 8192, got 'abc'" "$TMP/log" || fail "--size abc message: $(cat "$TMP/log")"

# bfloat16: .npy has none, so `run` reads a uint16 .npy of the bit patterns and writes a bfloat16
# output as float32 (with a note); random bfloat16 inputs work too.
/usr/bin/python3 - "$TMP/bf.onnx" "$TMP/bf_x.npy" <<'PY' || fail "could not write the bfloat16 model"
import sys, numpy as np, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0]),
                       helper.make_node("Cast", ["x"], ["z"], to=TensorProto.FLOAT)], "g",
                      [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3, 2]),
                       helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), sys.argv[1])
x = np.array([[1.5, -2, 3.25], [-0.5, 7, -8]], dtype=np.float32)
np.save(sys.argv[2], (x.view(np.uint32) >> 16).astype(np.uint16))
PY
"$KILN" compile "$TMP/bf.onnx" -o "$TMP/bf" >"$TMP/log" 2>&1 || fail "compile bfloat16 model: $(cat "$TMP/log")"
"$KILN" run "$TMP/bf" --input x="$TMP/bf_x.npy" --output-dir "$TMP/bf_out" >"$TMP/log" 2>"$TMP/err" || fail "run bfloat16: $(cat "$TMP/log" "$TMP/err")"
grep -q "^input x: bfloat16\[2, 3\] from $TMP/bf_x.npy (uint16 bit patterns)$" "$TMP/log" || fail "bfloat16 input line: $(cat "$TMP/log")"
grep -q "^note: output y is bfloat16, which .npy cannot hold: written as float32" "$TMP/err" || fail "bfloat16 output note: $(cat "$TMP/err")"
/usr/bin/python3 - "$TMP/bf_out" <<'PY' || fail "bfloat16 outputs wrong"
import sys, numpy as np
x = np.array([[1.5, -2, 3.25], [-0.5, 7, -8]], dtype=np.float32)
y, z = np.load(sys.argv[1] + "/y.npy"), np.load(sys.argv[1] + "/z.npy")
assert y.dtype == np.float32 and (y == x.T).all(), y
assert (z == x).all(), z
PY
"$KILN" run "$TMP/bf" >"$TMP/log" 2>&1 || fail "run bfloat16 with random inputs: $(cat "$TMP/log")"
"$KILN" run --help | grep -q "a bfloat16 input is read from a uint16 .npy" || fail "run --help does not mention bfloat16"
# A byte size beyond 64 bits in the compile summary: named, not "0 B".
/usr/bin/python3 - "$TMP/huge.onnx" <<'PY' || fail "could not write the huge model"
import sys, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4294967296, 4294967296])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4294967296, 4294967296])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), sys.argv[1])
PY
"$KILN" compile "$TMP/huge.onnx" -o "$TMP/huge" >"$TMP/log" 2>&1; rc=$?
if [ $rc -eq 0 ]; then  # (a later check may refuse such a model at compile time: then no summary)
  grep -q "memory plan: more than 16 EiB: tensor 0 (float32\[4294967296, 4294967296\]) has more bytes than a 64-bit size can count" "$TMP/log" || fail "overflowing memory plan: $(cat "$TMP/log")"
  grep -q " 0 B" "$TMP/log" && fail "overflowing memory plan printed 0 B: $(cat "$TMP/log")"
else
  one_error "$TMP/log" "compile of a model whose tensor bytes overflow"
fi

# inspect: summary, --graph, --fused, --tir with a real kernel name and a bad one.
"$KILN" inspect "$SMALL" >"$TMP/log" 2>&1 || fail "inspect: $(cat "$TMP/log")"
grep -q "graph: [0-9]* nodes after optimization" "$TMP/log" && grep -q "kernels: [0-9]* functions for [0-9]* fused groups" "$TMP/log" \
  && grep -q "memory plan: " "$TMP/log" || fail "inspect summary: $(cat "$TMP/log")"
"$KILN" inspect "$SMALL" --graph >"$TMP/graph.txt" 2>&1 || fail "inspect --graph: $(cat "$TMP/graph.txt")"
grep -q "= input x : float32\[1, 3, 16, 16\]" "$TMP/graph.txt" && grep -q "conv2d[a-z_]*(.*# conv1" "$TMP/graph.txt" \
  && grep -q "^output %" "$TMP/graph.txt" || fail "inspect --graph: $(cat "$TMP/graph.txt")"
"$KILN" inspect "$SMALL" --fused >"$TMP/fused.txt" 2>&1 || fail "inspect --fused: $(cat "$TMP/fused.txt")"
grep -q "^fused_[a-z0-9_]* (x[0-9]*): {.*relu" "$TMP/fused.txt" && grep -q "^memory plan: .*(no sharing: " "$TMP/fused.txt" \
  || fail "inspect --fused: $(cat "$TMP/fused.txt")"
# A fused group holds several ops: conv1's group also holds relu1 (fusion at opt-level 2).
grep -q "{conv2d[a-z_]* %[0-9]*, .*relu %[0-9]*}" "$TMP/fused.txt" || fail "no fused conv+relu group: $(cat "$TMP/fused.txt")"
KERNEL=$(grep -o "^fused_conv2d[a-z_]*_[0-9]*" "$TMP/fused.txt" | head -1)
[ -n "$KERNEL" ] || fail "no conv2d kernel in --fused: $(cat "$TMP/fused.txt")"
"$KILN" inspect "$SMALL" --tir "$KERNEL" >"$TMP/tir.txt" 2>&1 || fail "inspect --tir: $(cat "$TMP/tir.txt")"
grep -q "^func $KERNEL(" "$TMP/tir.txt" && grep -q "for (" "$TMP/tir.txt" || fail "inspect --tir: $(cat "$TMP/tir.txt")"
"$KILN" inspect "$SMALL" --tir no_such_kernel >"$TMP/log" 2>&1 && fail "bad --tir name accepted"
grep -q "\-\-tir 'no_such_kernel': the model has no kernel of that name; its kernels: .*$KERNEL" "$TMP/log" \
  || fail "bad --tir message: $(cat "$TMP/log")"
"$KILN" inspect "$SMALL" --graph --fused >"$TMP/log" 2>&1 && fail "--graph --fused accepted"
grep -q "excludes" "$TMP/log" || fail "--graph --fused message: $(cat "$TMP/log")"
"$KILN" inspect builtin:nope >"$TMP/log" 2>&1 && fail "unknown built-in accepted"
grep -q "unknown built-in model 'nope'; the built-in models: resnet18" "$TMP/log" || fail "built-in message: $(cat "$TMP/log")"

# compare: the optimized small model agrees with opt-level 0, group by group.
"$KILN" compare "$SMALL" --seed 3 >"$TMP/log" 2>&1; rc=$?
[ $rc -eq 0 ] || fail "compare exit code $rc: $(cat "$TMP/log")"
grep -q "^AGREE" "$TMP/log" && grep -q "^[1-9][0-9]* groups compared" "$TMP/log" \
  && grep -q "output y float32\[1, 10\]: max abs error" "$TMP/log" || fail "compare output: $(cat "$TMP/log")"
# -v lists every group; the convolutions' blocked outputs [1, 1, 16, 16, 16] are converted back
# to [1, 16, 16, 16] before comparing (a wrong conversion would not agree).
"$KILN" compare "$SMALL" -v >"$TMP/log" 2>&1 || fail "compare -v: $(cat "$TMP/log")"
grep -q "^  agree  r1 (fused_conv2d[a-z_]*_[0-9]*) float32\[.*\] vs float32\[1, 16, 16, 16\]: max abs error" "$TMP/log" \
  || fail "compare -v output: $(cat "$TMP/log")"
# With zero tolerance the built-in ResNet-18's first group differs in rounding (batch norm is
# folded into the convolution's weights at opt-level 2): named with its ops, exit code 1.
"$KILN" compare builtin:resnet18 --input-shape data=1,3,32,32 --rtol 0 --atol 0 >"$TMP/log" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "compare with zero tolerance: exit code $rc, expected 1: $(cat "$TMP/log")"
grep -q "^DIFFER: first group whose output differs: 'relu' (kernel fused_conv2d[a-z_]*_[0-9]*, after 0 groups that agree)" "$TMP/log" \
  && grep -q "^    %[0-9]* = conv2d[a-z_]*(.*# conv1$" "$TMP/log" && grep -q "max abs error .*; worst element \[0, " "$TMP/log" \
  || fail "compare DIFFER output: $(cat "$TMP/log")"
"$KILN" compare "$TMP/nothing.onnx" >"$TMP/log" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "compare on a missing file: exit code $rc, expected 2: $(cat "$TMP/log")"
"$KILN" compare "$SMALL" --rtol -1 >"$TMP/log" 2>&1 && fail "negative --rtol accepted"
grep -q "rtol" "$TMP/log" || fail "--rtol message: $(cat "$TMP/log")"

# The small model with its weights in an external data file, written by ONNX's own
# onnx.save(save_as_external_data=True) into a sub-folder: compiled from there, it computes
# bit for bit what the model with its weights inside does. Without the data file: one error
# naming the tensor and the file.
/usr/bin/python3 - "$SMALL" "$TMP/ext" <<'PY' || fail "could not write the external-data model"
import os, sys, onnx
m = onnx.load(sys.argv[1])
os.makedirs(sys.argv[2], exist_ok=True)
onnx.save(m, os.path.join(sys.argv[2], "small.onnx"), save_as_external_data=True,
          all_tensors_to_one_file=True, location="small.weights", size_threshold=0)
PY
[ -f "$TMP/ext/small.weights" ] || fail "onnx.save wrote no external data file"
for m in "$SMALL" "$TMP/ext/small.onnx"; do
  d="$TMP/mod_$(basename "$(dirname "$m")")"
  "$KILN" compile "$m" -o "$d" >"$TMP/log" 2>&1 || fail "compile $m: $(cat "$TMP/log")"
  "$KILN" run "$d" --seed 4 --output-dir "$d/out" >"$TMP/log" 2>&1 || fail "run $m: $(cat "$TMP/log")"
done
cmp -s "$TMP/mod_$(basename "$TMP")/out/y.npy" "$TMP/mod_ext/out/y.npy" || fail "external weights give another output"
mv "$TMP/ext/small.weights" "$TMP/ext/moved.weights"
"$KILN" compile "$TMP/ext/small.onnx" -o "$TMP/ext_missing" >"$TMP/log" 2>&1 && fail "missing external data accepted"
one_error "$TMP/log" "compile without the external data file"
grep -q "tensor '[a-z0-9]*': its external data file '$TMP/ext/small.weights': cannot open: No such file" "$TMP/log" \
  || fail "missing external data message: $(cat "$TMP/log")"

# A float16 model (computed in float32, float16 at its interface): run on a float16 .npy gives
# the exact float16 relu; bench makes float16 random inputs itself.
/usr/bin/python3 - "$TMP/half.onnx" "$TMP/half_x.npy" <<'PY' || fail "could not write the float16 model"
import sys, numpy as np, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3, 5])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3, 5])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), sys.argv[1])
np.save(sys.argv[2], (np.arange(15, dtype=np.float32).reshape(3, 5) / 3 - 2.4).astype(np.float16))
PY
"$KILN" compile "$TMP/half.onnx" -o "$TMP/half" >"$TMP/log" 2>&1 || fail "compile float16: $(cat "$TMP/log")"
"$KILN" run "$TMP/half" --input x="$TMP/half_x.npy" --output-dir "$TMP/half_out" >"$TMP/log" 2>&1 || fail "run float16: $(cat "$TMP/log")"
/usr/bin/python3 - "$TMP/half_x.npy" "$TMP/half_out/y.npy" <<'PY' || fail "float16 relu output"
import sys, numpy as np
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if y.dtype == np.float16 and np.array_equal(y, np.maximum(x, 0)) else 1)
PY
"$KILN" bench "$TMP/half" --repeat 3 >"$TMP/log" 2>&1 || fail "bench float16 with random inputs: $(cat "$TMP/log")"

# The paper's matrix product stays reachable as `demo --gemm`; ResNet options are refused there.
"$KILN" demo --gemm --size 128 --threads 1 --out "$TMP/demo" >"$TMP/log" 2>&1 || fail "demo --gemm: $(cat "$TMP/log")"
grep -q "Max relative error vs naive C++ reference" "$TMP/log" || fail "demo --gemm output: $(cat "$TMP/log")"
"$KILN" demo --size 128 >"$TMP/log" 2>&1 && fail "demo --size without --gemm accepted"
grep -q "\-\-size is an option of \`kiln demo --gemm\`" "$TMP/log" || fail "demo --size message: $(cat "$TMP/log")"
echo "cli: ok"
