#!/usr/bin/env python3
"""PyTorch's time for the paper's models on a GPU, batch 1, the same models as
scripts/export_models.py builds (seeded, random weights): eager, and torch.compile for the
models named by --compile. Prints one line per model: "torch NAME eager MS [compiled MS]".
Run by scripts/gpu-check.sh on the GPU machine, beside Kiln's time for the same model.

usage: gpu_torch.py [--models a,b] [--compile a,b] [--repeat N]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import export_models  # noqa: E402


def time_ms(fn, x, repeat):
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sum(times) / len(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mobilenet_v2,dqn,dcgan")
    ap.add_argument("--compile", default="")
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for name in a.models.split(","):
        model, x = export_models.build(name)
        model = model.cuda().eval()
        x = x.cuda()
        with torch.no_grad():
            mean, best = time_ms(model, x, a.repeat)
            line = f"torch {name} eager mean {mean:.3f} ms min {best:.3f} ms"
            if name in a.compile.split(","):
                cm = torch.compile(model)
                cmean, cbest = time_ms(cm, x, a.repeat)
                line += f"; compiled mean {cmean:.3f} ms min {cbest:.3f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    main()
