#!/usr/bin/env bash
# The kiln command line end to end: compile an ONNX model, run it on an .npy input written by
# the test, check the output against the conformance reference, and the documented errors.
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
  # An unsupported operator is named with its domain, opset and node.
  "$KILN" compile "$SUITE/test_lrn/model.onnx" -o "$TMP/lrn" >"$TMP/log" 2>&1 && fail "LRN accepted"
  grep -q "LRN (domain ai.onnx, opset" "$TMP/log" || fail "unsupported-op message: $(cat "$TMP/log")"
fi
# A truncated file.
head -c 20 "$KILN" >"$TMP/bad.onnx"
"$KILN" compile "$TMP/bad.onnx" -o "$TMP/bad" >"$TMP/log" 2>&1 && fail "garbage accepted"
grep -q "is not a valid ONNX model\|is not an ONNX model" "$TMP/log" || fail "bad-file message: $(cat "$TMP/log")"
echo "cli: ok"
