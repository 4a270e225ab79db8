#!/usr/bin/env python3
"""Converts an ONNX node test's data set (input_N.pb, output_N.pb) to .npy files named after the
model's inputs and outputs: OUT/input_<name>.npy and OUT/output_<name>.npy (scripts/gpu-check.sh).

usage: onnx_pb_to_npy.py MODEL.onnx DATA_SET_DIR OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    model_path, data_dir, out_dir = sys.argv[1:4]
    model = onnx.load(model_path)
    inits = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    outputs = [o.name for o in model.graph.output]
    os.makedirs(out_dir, exist_ok=True)
    for kind, names in (("input", inputs), ("output", outputs)):
        for k, name in enumerate(names):
            pb = os.path.join(data_dir, f"{kind}_{k}.pb")
            if not os.path.exists(pb):
                continue
            t = onnx.TensorProto()
            with open(pb, "rb") as f:
                t.ParseFromString(f.read())
            np.save(os.path.join(out_dir, f"{kind}_{name}.npy"), numpy_helper.to_array(t))


if __name__ == "__main__":
    main()
