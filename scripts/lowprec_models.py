#!/usr/bin/env python3
"""Models of kiln-bench-lowprec: torchvision ResNet-50 and MobileNet-v2 with random weights,
exported to ONNX (float32) and quantized ONCE by ONNX Runtime's quantize_static (QDQ format,
per-channel int8 weights, int8 activations, min-max calibration on random inputs), so that Kiln
and ONNX Runtime run the same int8 model. Also writes the random inputs of the agreement checks
and ONNX Runtime's int8 outputs for them.

    .venv-bench/bin/python scripts/lowprec_models.py OUTDIR [--models resnet50,mobilenet_v2]
        [--inputs 20] [--calibration 8] [--force]

For each model NAME, OUTDIR gets NAME_fp32.onnx, NAME_int8.onnx, NAME.inputs.npy (float32
[n, 1, 3, 224, 224], seeded), NAME_int8.ort.npy (ONNX Runtime's outputs, [n, 1, 1000]) and
NAME_int8.json ({"out_scale": the quantization step of the output}). Batch norms get random
affine parameters and running statistics calibrated on random batches (scripts/export_models.py's
helper), so activations keep a sensible range through the depth. Files newer than this script
are kept unless --force is given. Benchmark data only: Kiln itself never runs Python.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def build(name):
    import torchvision
    torch.manual_seed({"resnet50": 50, "mobilenet_v2": 2}[name])
    m = getattr(torchvision.models, name)(weights=None).eval()
    try:
        import export_models
        export_models.calibrate_batch_norms(m, lambda: torch.randn(4, 3, 224, 224), 4)
    except Exception as e:  # the helper is optional: plain initial statistics otherwise
        print("lowprec_models: batch-norm calibration skipped:", e)
    return m.eval()


def output_scale(path):
    model = onnx.load(path)
    out = model.graph.output[0].name
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == out:
            return float(inits[n.input[1]])
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--models", default="resnet50,mobilenet_v2")
    ap.add_argument("--inputs", type=int, default=20)
    ap.add_argument("--calibration", type=int, default=8)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    import onnxruntime as ort

    class Reader(CalibrationDataReader):
        def __init__(self, n):
            rng = np.random.default_rng(7)
            self.data = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
                         for _ in range(n)]

        def get_next(self):
            return self.data.pop() if self.data else None

    for name in a.models.split(","):
        fp = os.path.join(a.outdir, name + "_fp32.onnx")
        qp = os.path.join(a.outdir, name + "_int8.onnx")
        if (not a.force and os.path.exists(qp) and
                os.path.getmtime(qp) > os.path.getmtime(os.path.abspath(__file__))):
            print("lowprec_models:", name, "is up to date")
            continue
        m = build(name)
        with torch.no_grad():
            torch.onnx.export(m, torch.randn(1, 3, 224, 224), fp, opset_version=13,
                              input_names=["input"], output_names=["output"])
        quantize_static(fp, qp, Reader(a.calibration), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8)
        rng = np.random.default_rng(11)
        xs = rng.standard_normal((a.inputs, 1, 3, 224, 224)).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
        ys = np.stack([sess.run(None, {"input": x})[0] for x in xs]).astype(np.float32)
        np.save(os.path.join(a.outdir, name + ".inputs.npy"), xs)
        np.save(os.path.join(a.outdir, name + "_int8.ort.npy"), ys)
        with open(os.path.join(a.outdir, name + "_int8.json"), "w") as f:
            json.dump({"out_scale": output_scale(qp)}, f)
        print("lowprec_models:", name, "written")


if __name__ == "__main__":
    main()
