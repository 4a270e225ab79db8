#!/usr/bin/python3
"""Generates the seed corpus of the libFuzzer targets (fuzz/, docs/fuzzing.md).

    scripts/fuzz-corpus.py OUT_DIR [--kiln build/bin/kiln]

writes OUT_DIR/{onnx_import,module,npy,record}/ with small valid inputs of each reader:

- onnx_import: one-to-three-node ONNX models made with the `onnx` package (conv, pooling,
  matmul/gemm, elementwise, reshape/transpose/concat/slice, reductions, softmax, a shape
  subgraph folded at import, an initializer, a symbolic dimension, an If and a Loop).
- module: module directories compiled by `kiln compile` from a few of those models, each as
  graph.json + "\\n#KILN-PARAMS#\\n" + params.bin (module_fuzz.cc's format); one also carries
  "\\n#KILN-LIB#\\n" + lib.so. Skipped (with a note) when the kiln binary is not there.
- npy: arrays of every supported dtype and rank 0-4 written by numpy, and a format-2.0 file.
- record: tuning-log lines (a success, a failure, an in-network record, a partial line), as
  autotune::Record::to_json writes them.

Deterministic: the same files every run (fixed seeds).
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(26)


def model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def init(name, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return numpy_helper.from_array(np.asarray(shape, dtype=dtype), name)
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(dtype), name)


def onnx_models():
    m = {}
    m["conv_relu"] = model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])],
        [vi("x", [1, 3, 6, 6])], [vi("y", [1, 4, 6, 6])],
        [init("w", [4, 3, 3, 3]), init("b", [4])])
    m["pool"] = model(
        [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["p"], ["y"])],
        [vi("x", [1, 2, 4, 4])], [vi("y", [1, 2, 1, 1])])
    m["gemm"] = model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
        [vi("x", [2, 8])], [vi("y", [2, 4])], [init("w", [4, 8]), init("b", [4])])
    m["matmul_add"] = model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "x2"], ["y"])],
        [vi("x", [3, 5]), vi("x2", [3, 2])], [vi("y", [3, 2])], [init("w", [5, 2])])
    m["elementwise"] = model(
        [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Sigmoid", ["m"], ["s"]),
         helper.make_node("Clip", ["s", "lo", "hi"], ["y"])],
        [vi("a", [2, 3]), vi("b", [1, 3])], [vi("y", [2, 3])],
        [numpy_helper.from_array(np.array(0.1, np.float32), "lo"),
         numpy_helper.from_array(np.array(0.9, np.float32), "hi")])
    # Channel concats written in place (kiln_view nodes and storage_offset in graph.json):
    # concat(a, b) is a prefix of concat(a, b, e).
    m["concat_views"] = model(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
         helper.make_node("Concat", ["a", "b"], ["c1"], axis=1),
         helper.make_node("Sigmoid", ["c1"], ["d"]), helper.make_node("Relu", ["b"], ["e"]),
         helper.make_node("Concat", ["a", "b", "e"], ["c2"], axis=1),
         helper.make_node("Tanh", ["c2"], ["y"])],
        [vi("x", [1, 16, 2, 2])], [vi("y", [1, 48, 2, 2]), vi("d", [1, 32, 2, 2])])
    m["reshape_transpose"] = model(
        [helper.make_node("Reshape", ["x", "s"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
         helper.make_node("Concat", ["t", "t"], ["y"], axis=0)],
        [vi("x", [2, 3, 2])], [vi("y", [8, 3])], [init("s", [3, 4], np.int64)])
    m["slice_reduce"] = model(
        [helper.make_node("Slice", ["x", "st", "en"], ["s"]),
         helper.make_node("ReduceSum", ["s", "ax"], ["r"], keepdims=0),
         helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        [vi("x", [4, 6])], [vi("y", [4])],
        [init("st", [0, 1], np.int64), init("en", [4, 5], np.int64), init("ax", [1], np.int64)])
    m["shape_subgraph"] = model(
        [helper.make_node("Shape", ["x"], ["sh"]),
         helper.make_node("Gather", ["sh", "i0"], ["d0"], axis=0),
         helper.make_node("Unsqueeze", ["d0", "ax"], ["d"]),
         helper.make_node("Concat", ["d", "m1"], ["ns"], axis=0),
         helper.make_node("Reshape", ["x", "ns"], ["y"])],
        [vi("x", [2, 3, 4])], [vi("y", [2, 12])],
        [numpy_helper.from_array(np.array(0, np.int64), "i0"), init("ax", [0], np.int64),
         init("m1", [-1], np.int64)])
    m["symbolic_batch"] = model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["N", 4])], [vi("y", ["N", 4])])
    then_g = helper.make_graph([helper.make_node("Neg", ["a"], ["o"])], "then", [], [vi("o", [2])])
    else_g = helper.make_graph([helper.make_node("Abs", ["a"], ["o"])], "else", [], [vi("o", [2])])
    m["if"] = model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        [vi("a", [2])], [vi("y", [2])],
        [numpy_helper.from_array(np.array(True), "c")])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL),
                 vi("v_in", [2])], [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "one")])
    m["loop"] = model(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        [vi("x", [2])], [vi("y", [2])], [numpy_helper.from_array(np.array(3, np.int64), "n")])
    m["batchnorm"] = model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"])],
        [vi("x", [1, 3, 2, 2])], [vi("y", [1, 3, 2, 2])],
        [init("s", [3]), init("b", [3]), init("mu", [3]),
         numpy_helper.from_array(np.abs(RNG.standard_normal(3)).astype(np.float32) + 1, "var")])
    m["hardmax_topk"] = model(
        [helper.make_node("Hardmax", ["x"], ["h"]),
         helper.make_node("TopK", ["h", "k"], ["y", "i"], axis=-1)],
        [vi("x", [2, 5])], [vi("y", [2, 2]), vi("i", [2, 2], TensorProto.INT64)],
        [init("k", [2], np.int64)])
    return m


def npy_files():
    out = {}
    dtypes = ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?"]
    shapes = [(), (3,), (2, 3), (1, 2, 2), (2, 1, 2, 2), (0, 3)]
    for k, dt in enumerate(dtypes):
        shape = shapes[k % len(shapes)]
        a = (RNG.standard_normal(shape) * 10).astype(dt)
        buf = io.BytesIO()
        np.save(buf, a)
        out[f"{dt.replace('?', 'b1')}_{'x'.join(map(str, shape)) or 'scalar'}.npy"] = buf.getvalue()
    buf = io.BytesIO()
    np.lib.format.write_array(buf, RNG.standard_normal((2, 2)).astype("f4"), version=(2, 0))
    out["f4_v2.npy"] = buf.getvalue()
    return out


def records():
    base = {"kiln_record": 1, "task": "dense_nopack(A:float32[2,8],B:float32[4,8])",
            "template": "dense.cpu", "version": "1", "workload": "dense|2,8|4,8|float32",
            "target": "llvm -mcpu=znver4", "config": {"tile_y": [1, 2], "tile_x": [2, 2]},
            "timestamp": 1795000000.0, "compile_s": 0.12}
    ok = dict(base, costs={"mean": 1.5e-6, "std": 1e-8, "runs": [1.5e-6, 1.49e-6, 1.52e-6]},
              error=None)
    ref = dict(ok, costs=dict(ok["costs"], ref_runs=[1e-3, 1e-3, 1.1e-3]))
    net = dict(ok, protocol="network")
    fail = dict(base, costs=None, error={"kind": "runtime_error", "message": "segfault"})
    lines = {
        "ok.jsonl": [ok],
        "mixed.jsonl": [ok, fail, ref, net],
        "failure.jsonl": [fail],
    }
    out = {k: "".join(json.dumps(r) + "\n" for r in v).encode() for k, v in lines.items()}
    out["partial.jsonl"] = (json.dumps(ok) + "\n" + json.dumps(ok)[:70]).encode()
    return out


def modules(models, kiln, tmp):
    out = {}
    for name in ("conv_relu", "gemm", "slice_reduce", "hardmax_topk", "concat_views"):
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(models[name], path)
        mdir = os.path.join(tmp, name + ".kiln")
        r = subprocess.run([kiln, "compile", path, "-o", mdir, "--opt-level", "1"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"fuzz-corpus: kiln compile {name} failed:\n{r.stderr}", file=sys.stderr)
            continue
        with open(os.path.join(mdir, "graph.json"), "rb") as f:
            data = f.read()
        pb = os.path.join(mdir, "params.bin")
        if os.path.exists(pb):
            with open(pb, "rb") as f:
                data += b"\n#KILN-PARAMS#\n" + f.read()
        out[name] = data
        if name == "gemm":
            with open(os.path.join(mdir, "lib.so"), "rb") as f:
                lib = f.read()
            if b"\n#KILN-PARAMS#\n" not in data:
                data += b"\n#KILN-PARAMS#\n"
            out[name + "_lib"] = data + b"\n#KILN-LIB#\n" + lib
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--kiln", default="build/bin/kiln")
    args = ap.parse_args()

    def write(sub, name, data):
        d = os.path.join(args.out, sub)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    models = onnx_models()
    for name, m in models.items():
        write("onnx_import", name + ".onnx", m.SerializeToString())
    for name, data in npy_files().items():
        write("npy", name, data)
    for name, data in records().items():
        write("record", name, data)
    os.makedirs(os.path.join(args.out, "module"), exist_ok=True)
    if os.access(args.kiln, os.X_OK):
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in modules(models, args.kiln, tmp).items():
                write("module", name, data)
    else:
        print(f"fuzz-corpus: {args.kiln} not found: no module seeds", file=sys.stderr)
    counts = {d: len(os.listdir(os.path.join(args.out, d))) for d in sorted(os.listdir(args.out))}
    print("fuzz-corpus: " + ", ".join(f"{d} {n}" for d, n in counts.items()))


if __name__ == "__main__":
    main()
