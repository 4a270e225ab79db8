#!/usr/bin/env python3
"""Roofline audit of compiled zoo modules (issue 27: every kernel within 3x of its roofline).

For each module directory, runs `kiln bench DIR --profile` at one thread and reads its per-kernel
rows (time, share, GFLOP/s, GB/s, % of the roofline that `kiln bench` measured on this machine).
Prints, per model, the share of kernel time that runs within 3x of the roofline (>= 33.3%) and
the kernels below it that take at least --min-share of the model's kernel time, grouped by
kernel (a kernel run by several nodes counts once, with its summed time).

  python3 bench/zoo/roofline_audit.py --kiln build/bin/kiln build/models-zoo/*_O2.kiln
"""
import argparse
import collections
import os
import re
import subprocess
import sys

ROW = re.compile(r"\s+([\d.]+) ms\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+(\S+)\s+\((\S+), (\S+)\)")


def profile(kiln, module, repeat):
    out = subprocess.run([kiln, "bench", module, "--threads", "1", "--repeat", str(repeat),
                          "--profile", "100000"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            rows.append({"ms": float(m.group(1)), "gflops": float(m.group(3)),
                         "gbs": float(m.group(4)), "roof": float(m.group(5)),
                         "kernel": m.group(7), "impl": m.group(8)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="+", help="compiled module directories")
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--min-share", type=float, default=1.0,
                    help="list kernels below the bar that take at least this %% of kernel time")
    a = ap.parse_args()
    worst = []
    for module in a.modules:
        name = os.path.basename(module.rstrip("/")).replace("_O2.kiln", "")
        rows = profile(a.kiln, module, a.repeat)
        total = sum(r["ms"] for r in rows)
        if total <= 0:
            print(f"{name}: no kernel rows")
            continue
        by_kernel = collections.defaultdict(lambda: {"ms": 0.0, "weighted": 0.0, "sum": 0.0, "n": 0})
        for r in rows:
            k = by_kernel[(r["kernel"], r["impl"])]
            k["ms"] += r["ms"]
            k["weighted"] += r["roof"] * r["ms"]
            k["sum"] += r["roof"]
            k["n"] += 1
        for v in by_kernel.values():  # % of the roofline, time-weighted over the kernel's nodes
            v["roof"] = v["weighted"] / v["ms"] if v["ms"] > 0 else v["sum"] / v["n"]
        ok = sum(r["ms"] for r in rows if r["roof"] >= 100.0 / 3)
        print(f"{name}: {total:.2f} ms in kernels, {100 * ok / total:.1f}% of it within 3x of "
              f"the roofline")
        below = sorted(((k, v) for k, v in by_kernel.items() if v["roof"] < 100.0 / 3),
                       key=lambda kv: -kv[1]["ms"])
        for (kernel, impl), v in below:
            share = 100 * v["ms"] / total
            if share < a.min_share:
                continue
            roof = v["roof"]
            print(f"    {share:5.1f}%  {roof:5.1f}% of roofline  {kernel} ({impl}, {v['n']} nodes)")
            worst.append((share, name, kernel, impl, roof))
    print(f"\nkernels below 1/3 of the roofline with >= {a.min_share}% of their model's kernel "
          f"time: {len(worst)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
