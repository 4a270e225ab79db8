#!/usr/bin/env python3
"""ONNX Runtime baseline of kiln-bench-lowprec: times one ONNX model (the int8 QDQ model that
Kiln runs too) and prints one JSON line {"median_ms", "min_ms", "reps"}.

    .venv-bench/bin/python bench/lowprec_ort.py MODEL.onnx --threads N [--warmup 3] [--reps 20]

All graph optimizations (ONNX Runtime fuses the QDQ patterns into its int8 kernels),
intra_op_num_threads = N, inter_op 1, sequential execution; a seeded random float32 input of
the model's input shape. Benchmark only: Kiln itself never runs Python.
"""
import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(0).standard_normal(inp.shape).astype(np.float32)
    feed = {inp.name: x}
    for _ in range(a.warmup):
        sess.run(None, feed)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times), "min_ms": min(times),
                      "reps": len(times)}))


if __name__ == "__main__":
    main()
