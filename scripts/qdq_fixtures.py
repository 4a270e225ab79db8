#!/usr/bin/env python3
"""Small QDQ models quantized by ONNX Runtime, with inputs and ONNX Runtime's int8 outputs: the
fixtures of Kiln's int8 tests (tests/graph/quantize_realize_test.cc).

For each case: a tiny float model (built with onnx.helper, random weights, seeded) is quantized
by onnxruntime.quantization.quantize_static (QDQ format, min-max calibration over random
inputs), then run by ONNX Runtime (all graph optimizations, so its QDQ → QLinearConv /
QGemm fusions and MLAS int8 kernels compute) on a fresh random input. Writes into OUT_DIR:
  <case>.onnx, <case>_in.npy, <case>_ort.npy (ONNX Runtime's output, float32: the model ends in
  DequantizeLinear), <case>_ort_float.npy (the same with ONNX Runtime's graph optimizations
  off: dequantize, float op, quantize), and <case>.json {"out_scale": s} (the output's quantization step, so the
  test can count differences in quantization units).

Also keeps residual_s8's float model (quantize_src_fp32.onnx) and its calibration inputs
(calibration/batch.npy) for the `kiln quantize` test, and with --ort MODEL X.npy Y.npy runs
ONNX Runtime on any model (Y.json gets the output's quantization step), and with
--entropy-range X.npy OUT.json writes the range ONNX Runtime's entropy calibration (its
HistogramCollector with the defaults: 128 bins, 128 levels) finds for the samples of the stack
X, collected one sample at a time.

Needs numpy, onnx and onnxruntime (the benchmark venv). Usage: qdq_fixtures.py OUT_DIR
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)


class Reader(CalibrationDataReader):
    def __init__(self, name, shape, seed, n=8):
        rng = np.random.default_rng(seed)
        self.data = [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]
        self.i = 0

    def get_next(self):
        if self.i >= len(self.data):
            return None
        self.i += 1
        return self.data[self.i - 1]


def conv_model(rng, c, o, k, stride=1, pad=0, group=1, bias=True, act=None, hw=10):
    """x [1, c, hw, hw] -> Conv (-> Relu / Clip)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = (rng.standard_normal((o, c // group, k, k)) * 0.3).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(o).astype(np.float32), "b"))
        ins.append("b")
    pads = [pad, pad, pad, pad] if isinstance(pad, int) else pad
    nodes = [helper.make_node("Conv", ins, ["c"], kernel_shape=[k, k], strides=[stride, stride],
                              pads=pads, group=group)]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif act == "clip":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [1, c, hw, hw]


def gemm_model(rng, k, n, bias=True, matmul=False, m=4):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    if matmul:
        w = (rng.standard_normal((k, n)) * 0.3).astype(np.float32)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
        inits = [numpy_helper.from_array(w, "w")]
    else:
        w = (rng.standard_normal((n, k)) * 0.3).astype(np.float32)
        ins = ["x", "w"] + (["b"] if bias else [])
        nodes = [helper.make_node("Gemm", ins, ["y"], transB=1)]
        inits = [numpy_helper.from_array(w, "w")]
        if bias:
            inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b"))
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [m, k]


def matmul_rows_model(rng, k=32, n=48, shape=(2, 6)):
    """A transformer's projection: x [*shape, k] MatMul w [k, n], + b (the data has leading
    axes: the importer writes reshape -> 2-D matmul -> reshape)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [*shape, k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = (rng.standard_normal((k, n)) * 0.3).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [*shape, k]


def residual_model(rng, c=16, hw=8):
    """conv -> relu -> conv, + x, relu: the Add stays between dequantize / quantize."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = []
    for i in range(2):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((c, c, 3, 3)) * 0.2).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), f"b{i}"))
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c1", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [1, c, hw, hw]


def pool_model(rng, c=32, hw=7):
    """conv -> relu -> GlobalAveragePool -> Flatten -> Gemm (ResNet's head)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32),
                                     "w"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((10, c)) * 0.3).astype(np.float32),
                                     "fw"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [1, c, hw, hw]


def inverted_residual_model(rng, c=24, e=96, hw=10, stride=1):
    """MobileNet-v2's block: 1x1 expand -> Clip(0, 6) -> 3x3 depthwise -> Clip(0, 6) -> 1x1
    project (-> + x when the stride is 1): int8 tensors of 24 and 96 channels in a chain."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shapes = {"we": (e, c, 1, 1), "wd": (e, 1, 3, 3), "wp": (c, e, 1, 1)}
    inits = [numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    for name, shape in shapes.items():
        fan_in = shape[1] * shape[2] * shape[3]
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name))
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape[0]) * 0.3).astype(np.float32), "b" + name[1]))
    out = "y" if stride != 1 else "p"
    nodes = [helper.make_node("Conv", ["x", "we", "be"], ["ce"], kernel_shape=[1, 1]),
             helper.make_node("Clip", ["ce", "lo", "hi"], ["re"]),
             helper.make_node("Conv", ["re", "wd", "bd"], ["cd"], kernel_shape=[3, 3],
                              strides=[stride, stride], pads=[1, 1, 1, 1], group=e),
             helper.make_node("Clip", ["cd", "lo", "hi"], ["rd"]),
             helper.make_node("Conv", ["rd", "wp", "bp"], [out], kernel_shape=[1, 1])]
    if stride == 1:
        nodes.append(helper.make_node("Add", ["p", "x"], ["y"]))
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [1, c, hw, hw]


def stem_maxpool_model(rng, hw=20):
    """ResNet's stem: 7x7 stride-2 conv -> Relu -> 3x3 stride-2 MaxPool -> 1x1 conv."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array((rng.standard_normal((16, 3, 7, 7)) * 0.1).astype(np.float32),
                                     "w0"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b0"),
             numpy_helper.from_array((rng.standard_normal((16, 16, 1, 1)) * 0.3).astype(np.float32),
                                     "w1"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1")]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[7, 7],
                              strides=[2, 2], pads=[3, 3, 3, 3]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("MaxPool", ["r0"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p", "w1", "b1"], ["y"], kernel_shape=[1, 1])]
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), [1, 3, hw, hw]


# name: (builder, per_channel, activation type)
CASES = {
    "conv3x3_pc_s8_bias_relu": (lambda r: conv_model(r, 16, 32, 3, pad=1, act="relu"), True, "s8"),
    "conv3x3_pc_u8_bias": (lambda r: conv_model(r, 16, 32, 3, pad=1), True, "u8"),
    "conv1x1_pt_u8_nobias": (lambda r: conv_model(r, 32, 16, 1, bias=False), False, "u8"),
    "conv1x1_pt_s8_relu": (lambda r: conv_model(r, 8, 16, 1, act="relu"), False, "s8"),
    "conv7x7_s2_stem_s8": (lambda r: conv_model(r, 3, 16, 7, stride=2, pad=3, hw=20), True, "s8"),
    "conv3x3_s2_asym_s8": (lambda r: conv_model(r, 8, 16, 3, stride=2, pad=[0, 0, 1, 1]), True,
                           "s8"),
    "conv3x3_clip6_s8": (lambda r: conv_model(r, 16, 16, 3, pad=1, act="clip"), True, "s8"),
    "conv_o24_s8": (lambda r: conv_model(r, 8, 24, 3, pad=1), True, "s8"),
    "depthwise_s8": (lambda r: conv_model(r, 32, 32, 3, pad=1, group=32), True, "s8"),
    "depthwise_s2_u8_relu": (lambda r: conv_model(r, 16, 16, 3, stride=2, pad=[0, 0, 1, 1],
                                                  group=16, act="relu", hw=11), True, "u8"),
    "depthwise_c40_clip6_s8": (lambda r: conv_model(r, 40, 40, 3, stride=2, pad=1, group=40,
                                                    act="clip", hw=9), True, "s8"),
    "conv_c24_to_o40_u8": (lambda r: conv_model(r, 24, 40, 3, pad=1, hw=8), True, "u8"),
    "inverted_residual_s8": (lambda r: inverted_residual_model(r), True, "s8"),
    "inverted_residual_s2_u8": (lambda r: inverted_residual_model(r, c=16, e=48, hw=9,
                                                                   stride=2), True, "u8"),
    "stem_maxpool_s8": (lambda r: stem_maxpool_model(r), True, "s8"),
    "gemm_pc_s8_bias": (lambda r: gemm_model(r, 64, 48), True, "s8"),
    "gemm_pt_u8_bias": (lambda r: gemm_model(r, 40, 20), False, "u8"),
    "matmul_pt_s8": (lambda r: gemm_model(r, 32, 16, matmul=True), False, "s8"),
    "residual_s8": (lambda r: residual_model(r), True, "s8"),
    "residual_u8": (lambda r: residual_model(r), False, "u8"),
    "pool_head_s8": (lambda r: pool_model(r), True, "s8"),
    "grouped_relu_s8": (lambda r: conv_model(r, 32, 64, 3, pad=1, group=8, act="relu"), True,
                        "s8"),
    "grouped_s2_u8": (lambda r: conv_model(r, 48, 48, 3, stride=2, pad=1, group=3, hw=11), True,
                      "u8"),
    "matmul_rows_u8_bias": (lambda r: matmul_rows_model(r), True, "u8"),
    "conv_o12_relu_s8": (lambda r: conv_model(r, 16, 12, 3, pad=1, act="relu"), True, "s8"),
}

LATER = ["depthwise_s2_u8_relu", "depthwise_c40_clip6_s8", "conv_c24_to_o40_u8",
         "inverted_residual_s8", "inverted_residual_s2_u8", "stem_maxpool_s8",
         "grouped_relu_s8", "grouped_s2_u8", "matmul_rows_u8_bias", "conv_o12_relu_s8"]


def output_scale(model):
    """The scale of the DequantizeLinear that writes the graph's output."""
    out = model.graph.output[0].name
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == out:
            return float(inits[n.input[1]])
    raise SystemExit(f"no DequantizeLinear writes the output {out}")


def run_ort(model, x_npy, y_npy):
    """--ort MODEL X.npy Y.npy: ONNX Runtime's output of MODEL on X, and its output scale."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: np.load(x_npy)})[0]
    np.save(y_npy, y.astype(np.float32))
    with open(y_npy[:-4] + ".json", "w") as f:
        json.dump({"out_scale": output_scale(onnx.load(model))}, f)


def entropy_range(x_npy, out_json):
    """--entropy-range X.npy OUT.json: {"lo", "hi", "bins"} of ONNX Runtime's entropy method."""
    from onnxruntime.quantization.calibrate import HistogramCollector
    hc = HistogramCollector(method="entropy", symmetric=False, num_bins=128,
                            num_quantized_bins=128, percentile=99.999, scenario="same")
    for sample in np.load(x_npy):
        hc.collect({"x": [sample]})
    bins = len(hc.histogram_dict["x"][0])
    lo, hi = hc.compute_collection_result()["x"][:2]
    with open(out_json, "w") as f:
        json.dump({"lo": float(lo), "hi": float(hi), "bins": bins}, f)


def main():
    if sys.argv[1] == "--ort":
        run_ort(*sys.argv[2:5])
        return
    if sys.argv[1] == "--entropy-range":
        entropy_range(*sys.argv[2:4])
        return
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    # The cases added later take the seeds after the first 15 (whose data stays as it was).
    order = sorted(k for k in CASES if k not in LATER) + LATER
    for seed, name in enumerate(order):
        build, per_channel, act = CASES[name]
        rng = np.random.default_rng(1000 + seed)
        model, shape = build(rng)
        fp = os.path.join(out_dir, name + "_fp32.onnx")
        qp = os.path.join(out_dir, name + ".onnx")
        onnx.save(model, fp)
        qt = QuantType.QInt8 if act == "s8" else QuantType.QUInt8
        quantize_static(fp, qp, Reader("x", shape, seed), quant_format=QuantFormat.QDQ,
                        per_channel=per_channel, activation_type=qt, weight_type=QuantType.QInt8)
        if name == "residual_s8":
            # The float model and calibration data of the `kiln quantize` test.
            os.replace(fp, os.path.join(out_dir, "quantize_src_fp32.onnx"))
            cal = os.path.join(out_dir, "calibration")
            os.makedirs(cal, exist_ok=True)
            np.save(os.path.join(cal, "batch.npy"),
                    np.stack([d["x"] for d in Reader("x", shape, seed).data]))
        else:
            os.remove(fp)
        x = np.random.default_rng(2000 + seed).standard_normal(shape).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0]
        # The same model with ONNX Runtime's graph optimizations off: DequantizeLinear, the float
        # op and QuantizeLinear run as written (float sums). Where MLAS's int8 kernels saturate
        # (u8 x s8 pairs in int16 on CPUs without VNNI), this is the reference within one unit.
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
        yf = sess.run(None, {"x": x})[0]
        np.save(os.path.join(out_dir, name + "_in.npy"), x)
        np.save(os.path.join(out_dir, name + "_ort.npy"), y.astype(np.float32))
        np.save(os.path.join(out_dir, name + "_ort_float.npy"), yf.astype(np.float32))
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump({"out_scale": output_scale(onnx.load(qp))}, f)
        print("qdq_fixtures:", name, y.shape)


if __name__ == "__main__":
    main()
