#!/usr/bin/env python3
"""Runs ONNX backend tests as a user would, through the kiln CLI only, independently of
kiln-onnx-conformance: for each test, `kiln compile model.onnx` (with `--input-shape` for
inputs whose declared shape is not static, from the test data, as a user who knows their
shapes would), then `kiln run` on the test's inputs written as .npy, then each output .npy
compared with the reference (ONNX's tolerances: rtol 1e-3, atol 1e-7 for floats, NaN equal to
NaN; exact for integers and booleans). A test whose inputs or outputs the CLI cannot express (a
sequence, an empty optional) counts as such, not as passed.

    scripts/conformance-cli.py [--kiln build/bin/kiln] [--suite DIR]... [--filter S]
                               [--runner-passing FILE] [--list FILE] [--jobs N]

--runner-passing takes the file `kiln-onnx-conformance --write-passing` wrote for the same
suites and prints the tests on which the two disagree (plain lines only: "# bound" lines are
the runner's second count, which the CLI cannot reproduce). Exit status 0; the counts are the
result. Uses /usr/bin/python3's onnx and numpy.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
DATA = "/usr/share/libonnx-testdata/data"


def value_kind(value_info):
    """'tensor', or what .npy cannot hold: 'sequence', 'optional', 'map'."""
    t = value_info.type
    for kind, field in (("sequence", "sequence_type"), ("optional", "optional_type"),
                        ("map", "map_type")):
        if t.HasField(field):
            return kind
    return "tensor"


def read_tensor(path, kind="tensor"):
    """(array, is_bfloat16) of the TensorProto in a .pb file (for an optional input, of the
    OptionalProto's tensor: None when it is empty); bfloat16 as uint16 bit patterns, as kiln
    run reads a bfloat16 input."""
    raw = open(path, "rb").read()
    if kind == "optional":
        o = onnx.OptionalProto()
        o.ParseFromString(raw)
        if not o.HasField("tensor_value"):
            return None, False
        t = o.tensor_value
    else:
        t = onnx.TensorProto()
        t.ParseFromString(raw)
    if t.data_type == onnx.TensorProto.BFLOAT16:
        a = np.frombuffer(t.raw_data, dtype=np.uint16) if t.raw_data else \
            np.array(t.int32_data, dtype=np.uint16)
        return a.reshape(tuple(t.dims)), True
    return numpy_helper.to_array(t), False


def bf16_bits_to_f32(a):
    return (a.astype(np.uint32) << 16).view(np.float32)


def compare(got, want):
    """'' when `got` matches `want`, else what differs."""
    if tuple(got.shape) != tuple(want.shape):
        return "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if want.dtype.kind in "fc" or got.dtype.kind in "fc":
        g = got.astype(np.float64).ravel()
        w = want.astype(np.float64).ravel()
        both_nan = np.isnan(g) & np.isnan(w)
        same_inf = np.isinf(w) & (g == w)
        with np.errstate(invalid="ignore"):
            ok = both_nan | same_inf | (np.abs(g - w) <= 1e-7 + 1e-3 * np.abs(w))
        if not ok.all():
            i = int(np.argmin(ok))
            return "element %d is %r, expected %r" % (i, g[i], w[i])
        return ""
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype)
    if not np.array_equal(got, want):
        i = int(np.argmin((got == want).ravel()))
        return "element %d differs" % i
    return ""


def static_shape(value_info):
    dims = value_info.type.tensor_type.shape.dim
    if not value_info.type.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in dims)


def run_test(kiln, test_dir):
    """(outcome, detail): outcome is passed, wrong, refused or not-expressible."""
    model_path = os.path.join(test_dir, "model.onnx")
    data = os.path.join(test_dir, "test_data_set_0")
    try:
        model = onnx.load(model_path)
    except Exception as e:  # a model onnx cannot load: kiln is asked anyway below
        model = None
    inits = {i.name for i in model.graph.initializer} if model else set()
    inputs = [i for i in model.graph.input if i.name not in inits] if model else []
    outputs = list(model.graph.output) if model else []
    with tempfile.TemporaryDirectory() as tmp:
        run_args, shape_args = [], []
        for k, vi in enumerate(inputs):
            path = os.path.join(data, "input_%d.pb" % k)
            if not os.path.exists(path):
                return "refused", "the test data has no input %d" % k
            kind = value_kind(vi)
            optional_tensor = kind == "optional" and \
                vi.type.optional_type.elem_type.HasField("tensor_type")
            if kind != "tensor" and not optional_tensor:
                return "not-expressible", "input %s is of %s type" % (vi.name, kind)
            a, _ = read_tensor(path, kind)
            if a is None:
                return "not-expressible", "input %s is an empty optional" % vi.name
            f = os.path.join(tmp, "in%d.npy" % k)
            np.save(f, a)
            run_args += ["--input", "%s=%s" % (vi.name, f)]
            if not static_shape(vi):
                shape_args += ["--input-shape", "%s=%s" % (vi.name, ",".join(map(str, a.shape)))]
        want = []
        for k, vi in enumerate(outputs):
            if value_kind(vi) != "tensor":
                return "not-expressible", "output %s is of %s type" % (vi.name, value_kind(vi))
            a, bf16 = read_tensor(os.path.join(data, "output_%d.pb" % k))
            want.append(bf16_bits_to_f32(a) if bf16 else a)
        mod = os.path.join(tmp, "mod")
        c = subprocess.run([kiln, "compile", model_path, "-o", mod] + shape_args,
                           capture_output=True, text=True, timeout=300)
        if c.returncode != 0:
            return "refused", (c.stderr.strip().splitlines() or ["?"])[-1]
        out_dir = os.path.join(tmp, "out")
        r = subprocess.run([kiln, "run", mod, "--threads", "1", "--output-dir", out_dir] + run_args,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return "refused", (r.stderr.strip().splitlines() or ["?"])[-1]
        files = [line.rsplit(" -> ", 1)[1] for line in r.stdout.splitlines()
                 if line.startswith("output ") and " -> " in line]
        if len(files) != len(want):
            return "wrong", "%d outputs, expected %d" % (len(files), len(want))
        for k, (f, w) in enumerate(zip(files, want)):
            why = compare(np.load(f), w)
            if why:
                return "wrong", "output %d: %s" % (k, why)
    return "passed", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--suite", action="append", help="suite name under %s or a directory" % DATA)
    ap.add_argument("--filter", default="")
    ap.add_argument("--skip", help="kiln-onnx-conformance's skip file (tests not run)")
    ap.add_argument("--runner-passing", help="kiln-onnx-conformance --write-passing output")
    ap.add_argument("--list", help="write 'suite/test outcome detail' lines here")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    kiln = os.path.abspath(args.kiln)
    skip = set()
    if args.skip:
        skip = {l.split("#")[0].strip() for l in open(args.skip) if l.split("#")[0].strip()}
    tests = []
    for s in args.suite or SUITES:
        d = s if os.path.isdir(s) else os.path.join(DATA, s)
        for t in sorted(os.listdir(d)):
            if args.filter in t and t not in skip and os.path.isdir(os.path.join(d, t)):
                tests.append((os.path.basename(d), t, os.path.join(d, t)))

    def one(item):
        suite, name, path = item
        try:
            return item, run_test(kiln, path)
        except subprocess.TimeoutExpired:
            return item, ("refused", "timed out")
        except Exception as e:  # noqa: BLE001 -- the script's own trouble, counted and named
            return item, ("script-error", "%s: %s" % (type(e).__name__, e))

    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for (suite, name, _), res in pool.map(one, tests):
            results[(suite, name)] = res
    counts = {}
    for (suite, _), (outcome, _) in results.items():
        counts.setdefault(suite, {}).setdefault(outcome, 0)
        counts[suite][outcome] += 1
    kinds = ["passed", "wrong", "refused", "not-expressible", "script-error"]
    total = {k: sum(c.get(k, 0) for c in counts.values()) for k in kinds}
    for suite in sorted(counts):
        n = sum(counts[suite].values())
        print("%-18s %4d tests: " % (suite, n) + ", ".join("%s %d" % (k, counts[suite].get(k, 0))
                                                         for k in kinds))
    print("%-18s %4d tests: " % ("all", len(results)) + ", ".join("%s %d" % (k, total[k])
                                                                 for k in kinds))
    if args.list:
        with open(args.list, "w") as f:
            for (suite, name), (outcome, detail) in sorted(results.items()):
                f.write("%s/%s %s %s\n" % (suite, name, outcome, detail))
    if args.runner_passing:
        runner = set()
        for line in open(args.runner_passing):
            line = line.strip()
            if line and not line.startswith("#") and not line.endswith("# bound"):
                runner.add(line.split()[0])
        cli = {name for (_, name), (o, _) in results.items() if o == "passed"}
        names = {name for (_, name) in results}
        runner &= names
        for name in sorted(runner - cli):
            detail = [r for (s, n), r in results.items() if n == name][0]
            print("runner passes, CLI does not: %s (%s: %s)" % (name, detail[0], detail[1]))
        for name in sorted(cli - runner):
            print("CLI passes, runner does not: %s" % name)
        print("runner %d passing, CLI %d, both %d" % (len(runner), len(cli), len(runner & cli)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
