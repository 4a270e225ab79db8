#!/usr/bin/env bash
# `kiln tune` end to end on a tiny ONNX model (one 3x3 conv, one dense): the task list; a short
# tune writes one JSON line per trial with the documented fields; a second run with the same log
# and a larger --trials resumes (reports the logged trials, measures only the difference); the
# network check times candidates inside the model and logs those times, which are not trials;
# `kiln compile --tuning-log` uses the tuned configs and the compiled model computes what the
# --opt-level 0 build computes; bad flags give clear errors.
set -u
KILN="$1"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3

# x [1,8,10,10] -> conv 3x3 (8->16, pad 1) -> relu -> flatten [1,1600] -> gemm (1600->24).
$PY - "$TMP/m.onnx" "$TMP/x.npy" <<'EOF' || fail "could not write the model (onnx helper)"
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(7)
w = numpy_helper.from_array(rng.uniform(-0.3, 0.3, (16, 8, 3, 3)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.uniform(-0.1, 0.1, (16,)).astype(np.float32), "b")
fw = numpy_helper.from_array(rng.uniform(-0.05, 0.05, (24, 1600)).astype(np.float32), "fw")
fb = numpy_helper.from_array(rng.uniform(-0.1, 0.1, (24,)).astype(np.float32), "fb")
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 1, 1, 1],
                     kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c"], ["r"], name="relu1"),
    helper.make_node("Flatten", ["r"], ["f"], name="flat", axis=1),
    helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
]
g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24])], [w, b, fw, fb])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
np.save(sys.argv[2], rng.uniform(-1, 1, (1, 8, 10, 10)).astype(np.float32))
EOF

# A short tune: the task list names both workloads and their nodes; one log line per trial.
LOG="$TMP/tune.jsonl"
"$KILN" tune "$TMP/m.onnx" --log "$LOG" --trials 4 --timeout 5 --verify 0 --network-check 0 >"$TMP/out1" 2>"$TMP/err1" \
  || fail "tune: $(cat "$TMP/out1" "$TMP/err1")"
grep -q "2 tunable task(s)" "$TMP/out1" || fail "task count: $(cat "$TMP/out1")"
grep -q "1/2 conv2d .*nodes: conv1" "$TMP/out1" || fail "conv task not listed: $(cat "$TMP/out1")"
grep -q "2/2 dense .*nodes: fc" "$TMP/out1" || fail "dense task not listed: $(cat "$TMP/out1")"
grep -q "task 2/2 dense trial 4/4 best .* GFLOP/s" "$TMP/err1" || fail "progress: $(cat "$TMP/err1")"
grep -q "task 1/2 conv2d: 4 trials (0 resumed from the log, 4 new" "$TMP/out1" \
  || fail "first-run summary: $(cat "$TMP/out1")"
grep -q "default GFLOP/s *best GFLOP/s *speedup *trials" "$TMP/out1" || fail "table: $(cat "$TMP/out1")"
[ "$(wc -l <"$LOG")" -eq 8 ] || fail "expected 8 log lines (2 tasks x 4 trials), got $(wc -l <"$LOG")"
$PY - "$LOG" 4 <<'EOF' || fail "log lines lack the documented fields"
import json, sys, collections
per_task = collections.Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    for k in ("config", "costs", "error", "kiln_record", "task", "target", "template",
              "timestamp", "version", "workload"):
        assert k in r, f"missing {k}: {r}"
    assert isinstance(r["config"]["index"], int) and "knobs" in r["config"], r["config"]
    if r["error"] is None:
        assert r["costs"]["mean"] > 0 and len(r["costs"]["runs"]) > 0, r["costs"]
    per_task[r["task"]] += 1
assert len(per_task) == 2 and all(n == int(sys.argv[2]) for n in per_task.values()), per_task
assert any(t.startswith("conv2d") for t in per_task) and any(t.startswith("dense") for t in per_task), per_task
EOF

# Resume: the same log, a larger budget; only the difference is measured, per task.
"$KILN" tune "$TMP/m.onnx" --log "$LOG" --trials 7 --tuner random --timeout 5 --verify 0 --network-check 0 >"$TMP/out2" 2>"$TMP/err2" \
  || fail "resumed tune: $(cat "$TMP/out2" "$TMP/err2")"
grep -q "task 1/2 conv2d: 7 trials (4 resumed from the log, 3 new" "$TMP/out2" || fail "resume: $(cat "$TMP/out2")"
grep -q "task 2/2 dense: 7 trials (4 resumed from the log, 3 new" "$TMP/out2" || fail "resume: $(cat "$TMP/out2")"
[ "$(wc -l <"$LOG")" -eq 14 ] || fail "expected 14 log lines after resuming, got $(wc -l <"$LOG")"
$PY - "$LOG" 7 <<'EOF' || fail "resumed log: a config measured twice or wrong counts"
import json, sys, collections
seen = collections.defaultdict(set)
for line in open(sys.argv[1]):
    r = json.loads(line)
    i = r["config"]["index"]
    assert i not in seen[r["task"]], f"config {i} of {r['task']} measured twice"
    seen[r["task"]].add(i)
assert all(len(s) == int(sys.argv[2]) for s in seen.values()), {k: len(v) for k, v in seen.items()}
EOF
# --tasks picks tasks by their listed number; nothing is left to do at this budget.
"$KILN" tune "$TMP/m.onnx" --log "$LOG" --trials 7 --tasks 2 --network-check 0 >"$TMP/out3" 2>&1 || fail "--tasks: $(cat "$TMP/out3")"
grep -q "tuning 1 task(s)" "$TMP/out3" && ! grep -q "task 1/2 conv2d:" "$TMP/out3" || fail "--tasks 2: $(cat "$TMP/out3")"
[ "$(wc -l <"$LOG")" -eq 14 ] || fail "a complete task measured again: $(wc -l <"$LOG") lines"

# The network check: nothing left to tune, so only the check runs: 4 variants (each task's
# tuned, default, 2nd and 3rd config), 2 rounds, one in-model time per candidate per round
# (the dense kernel's node is "fc_padded_matmul" after layout alteration: still attributed).
"$KILN" tune "$TMP/m.onnx" --log "$LOG" --trials 7 --network-check 2 >"$TMP/outn" 2>&1 \
  || fail "tune --network-check: $(cat "$TMP/outn")"
grep -q "4 model variants compiled and profiled in .* s; 16 in-model times logged" "$TMP/outn" \
  || fail "network check summary: $(cat "$TMP/outn")"
grep -q "conv2d N1 C8 H10 W10 O16 K3x3 .*: tuned[a-z() ]* [0-9.]* ms, [a-z0-9]* [0-9.]* ms, [a-z0-9]* [0-9.]* ms, [a-z0-9]* [0-9.]* ms -> " "$TMP/outn" \
  || fail "network check line: $(cat "$TMP/outn")"
[ "$(wc -l <"$LOG")" -eq 30 ] || fail "expected 30 log lines after the check, got $(wc -l <"$LOG")"
$PY - "$LOG" <<'EOF' || fail "in-model records"
import json, sys, collections
n = collections.Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("protocol") == "network":
        assert r["error"] is None and r["costs"]["mean"] > 0, r
        n[(r["task"].split("(")[0], r["config"]["index"])] += 1
assert len(n) == 8 and all(v == 2 for v in n.values()), n
EOF
# They are not trials: a resumed run still counts 7 and measures nothing.
"$KILN" tune "$TMP/m.onnx" --log "$LOG" --trials 7 --network-check 0 >"$TMP/outn2" 2>&1 \
  || fail "tune after the check: $(cat "$TMP/outn2")"
grep -q "task 1/2 conv2d: 7 trials (7 resumed from the log, 0 new" "$TMP/outn2" \
  || fail "in-model records counted as trials: $(cat "$TMP/outn2")"
"$KILN" tune "$TMP/m.onnx" --log "$LOG" --network-check -1 >"$TMP/outn3" 2>&1 \
  && fail "tune --network-check -1 accepted"
grep -q "network-check" "$TMP/outn3" || fail "bad --network-check message: $(cat "$TMP/outn3")"

# Verification (on by default): the default and the 2 fastest of the conv's 4 trials measured
# twice more, logged; a run with nothing new to search verifies nothing.
VLOG="$TMP/verify.jsonl"
"$KILN" tune "$TMP/m.onnx" --log "$VLOG" --trials 4 --tasks 1 --verify 2 --network-check 0 >"$TMP/outv" 2>&1 \
  || fail "tune --verify: $(cat "$TMP/outv")"
grep -q "task 1/2 conv2d: 4 trials (0 resumed from the log, 4 new, 6 verification runs)" "$TMP/outv" \
  || fail "verification summary: $(cat "$TMP/outv")"
[ "$(wc -l <"$VLOG")" -eq 10 ] || fail "expected 10 log lines (4 trials + 6 verifications), got $(wc -l <"$VLOG")"
"$KILN" tune "$TMP/m.onnx" --log "$VLOG" --trials 4 --tasks 1 --verify 2 --network-check 0 >"$TMP/outv2" 2>&1 \
  || fail "tune --verify again: $(cat "$TMP/outv2")"
[ "$(wc -l <"$VLOG")" -eq 10 ] || fail "a spent budget verified again: $(wc -l <"$VLOG") lines"

# A wall-clock budget instead of a trial count: both tasks stop at their share of 0.05 min.
BLOG="$TMP/budget.jsonl"
"$KILN" tune "$TMP/m.onnx" --log "$BLOG" --minutes 0.05 --verify 0 --network-check 0 >"$TMP/outb" 2>&1 \
  || fail "tune --minutes: $(cat "$TMP/outb")"
grep -q "time budget: 0.05 min in all" "$TMP/outb" || fail "budget line: $(cat "$TMP/outb")"
[ "$(grep -c "stopped at its .* s share of the budget" "$TMP/outb")" -ge 1 ] \
  || fail "no task stopped at its budget: $(cat "$TMP/outb")"
[ -s "$BLOG" ] || fail "tune --minutes logged nothing"
"$KILN" tune "$TMP/m.onnx" --log "$BLOG" --minutes -1 >"$TMP/outb2" 2>&1 \
  && fail "tune --minutes -1 accepted"
grep -q "minutes" "$TMP/outb2" || fail "bad --minutes message: $(cat "$TMP/outb2")"

# Compile with the log: both workloads tuned; the result equals the unoptimized build's.
"$KILN" compile "$TMP/m.onnx" -o "$TMP/tuned" --tuning-log "$LOG" >"$TMP/out4" 2>&1 \
  || fail "compile --tuning-log: $(cat "$TMP/out4")"
grep -q "2 workload(s) tuned" "$TMP/out4" || fail "tuning report: $(cat "$TMP/out4")"
grep -q "tuned *conv2d_nchwc(.*, 8 timed inside a model: chosen by those" "$TMP/out4" \
  || fail "conv not tuned by its in-model times: $(cat "$TMP/out4")"
"$KILN" bench "$TMP/m.onnx" --tuning-log "$LOG" --repeat 2 --threads 1 >"$TMP/out4b" 2>&1 || fail "bench --tuning-log: $(cat "$TMP/out4b")"
grep -q "2 workload(s) tuned" "$TMP/out4b" || fail "bench tuning report: $(cat "$TMP/out4b")"
# The log was tuned on 1 thread (kiln tune's default): a build for 2 threads uses none of it.
"$KILN" bench "$TMP/m.onnx" --tuning-log "$LOG" --repeat 2 --threads 2 >"$TMP/out4c" 2>&1 || fail "bench --threads 2 --tuning-log: $(cat "$TMP/out4c")"
grep -q "0 workload(s) tuned, 2 with default configs" "$TMP/out4c" || fail "2-thread tuning report: $(cat "$TMP/out4c")"
grep -q "measured with another thread count" "$TMP/out4c" || fail "2-thread ignore reason: $(cat "$TMP/out4c")"
"$KILN" compile "$TMP/m.onnx" -o "$TMP/tuned2" --tuning-log "$LOG" --tuning-threads 2 >"$TMP/out4d" 2>&1 \
  || fail "compile --tuning-threads 2: $(cat "$TMP/out4d")"
grep -q "0 workload(s) tuned" "$TMP/out4d" || fail "compile --tuning-threads 2 report: $(cat "$TMP/out4d")"
"$KILN" compile "$TMP/m.onnx" -o "$TMP/ref" --opt-level 0 >"$TMP/out5" 2>&1 || fail "compile -O0: $(cat "$TMP/out5")"
"$KILN" run "$TMP/tuned" --input x="$TMP/x.npy" --output-dir "$TMP/o_tuned" >"$TMP/out6" 2>&1 || fail "run tuned: $(cat "$TMP/out6")"
"$KILN" run "$TMP/ref" --input x="$TMP/x.npy" --output-dir "$TMP/o_ref" >"$TMP/out7" 2>&1 || fail "run ref: $(cat "$TMP/out7")"
$PY - "$TMP/o_tuned/y.npy" "$TMP/o_ref/y.npy" <<'EOF' || fail "tuned build differs from the -O0 build"
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape == (1, 24), (a.shape, b.shape)
assert np.abs(b).max() > 0.1, "reference output is degenerate"
err = np.abs(a - b).max() / np.abs(b).max()
print("max rel err", err)
assert err < 1e-4, err
EOF

# Bad flags.
"$KILN" tune "$TMP/m.onnx" --log "$TMP/t2.jsonl" --tuner foo >"$TMP/e" 2>&1 && fail "unknown tuner accepted"
grep -q "unknown tuner; choose one of xgb, random, grid, ga" "$TMP/e" || fail "tuner message: $(cat "$TMP/e")"
"$KILN" tune "$TMP/m.onnx" --log "$TMP/no/such/dir/t.jsonl" >"$TMP/e" 2>&1 && fail "missing log dir accepted"
grep -q "directory '$TMP/no/such/dir' does not exist" "$TMP/e" || fail "log dir message: $(cat "$TMP/e")"
"$KILN" tune "$TMP/m.onnx" --log "$TMP/t2.jsonl" --tasks 3 >"$TMP/e" 2>&1 && fail "--tasks 3 accepted"
grep -q "there is no task 3; the model has 2 tunable task(s)" "$TMP/e" || fail "--tasks message: $(cat "$TMP/e")"
"$KILN" compile "$TMP/m.onnx" -o "$TMP/x" --tuning-log "$TMP/none.jsonl" >"$TMP/e" 2>&1 && fail "missing tuning log accepted"
grep -q "\-\-tuning-log '$TMP/none.jsonl': no such file" "$TMP/e" || fail "missing tuning log message: $(cat "$TMP/e")"
# A log that is not a regular file is named as what it is (it was "no such file"; a FIFO must
# not be waited on).
mkfifo "$TMP/fifo.jsonl"
for bad in "/dev/zero:a character device" "$TMP/fifo.jsonl:a FIFO" "$TMP:a directory"; do
  path="${bad%%:*}" kind="${bad#*:}"
  for cmd in compile bench; do
    out=(); [ $cmd = compile ] && out=(-o "$TMP/x")
    timeout 60 "$KILN" $cmd "$TMP/m.onnx" "${out[@]}" --tuning-log "$path" >"$TMP/e" 2>&1 && fail "$cmd accepted --tuning-log $path"
    grep -q "tuning log '$path': not a regular file ($kind)" "$TMP/e" || fail "$cmd --tuning-log $path message: $(cat "$TMP/e")"
  done
done
"$KILN" tune "$TMP/m.onnx" >"$TMP/e" 2>&1 && fail "missing --log accepted"
grep -q "\-\-log is required" "$TMP/e" || fail "missing --log message: $(cat "$TMP/e")"
"$KILN" tune "$TMP/none.onnx" --log "$TMP/t2.jsonl" >"$TMP/e" 2>&1 && fail "missing model accepted"
grep -q "none.onnx" "$TMP/e" || fail "missing model message: $(cat "$TMP/e")"
echo "PASS"
