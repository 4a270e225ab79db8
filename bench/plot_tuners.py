#!/usr/bin/python3
"""Plots kiln-bench-tuners' curves (the TVM paper's Figure 12): best GFLOP/s found vs number of
trials, one panel per workload, one line per tuner: the median over the seeds in bold, each
seed's own curve faint.

usage: /usr/bin/python3 bench/plot_tuners.py CURVES.csv OUT.png
CURVES.csv has the columns workload,tuner,seed,trial,best_gflops (as kiln-bench-tuners writes it;
a file without the seed column is one seed).
"""
import csv
import statistics
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"xgb": ("C3", "-"), "random": ("C0", "--"), "ga": ("C2", "-."), "grid": ("C7", ":")}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_tuners.py CURVES.csv OUT.png")
    curves = OrderedDict()  # workload -> tuner -> seed -> [gflops after trial 1, 2, ...]
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            t = curves.setdefault(row["workload"], OrderedDict()).setdefault(row["tuner"], {})
            curve = t.setdefault(row.get("seed", "0"), [])
            trial = int(row["trial"])
            while len(curve) < trial:
                curve.append(curve[-1] if curve else 0.0)
            curve[trial - 1] = float(row["best_gflops"])
    if not curves:
        sys.exit(f"plot_tuners.py: no curves in {sys.argv[1]}")
    n = len(curves)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, (wl, tuners) in zip(axes.flat, curves.items()):
        best = max(max(c) for seeds in tuners.values() for c in seeds.values())
        for name, seeds in tuners.items():
            color, ls = STYLE.get(name, (None, "-"))
            n_trials = max(len(c) for c in seeds.values())
            for c in seeds.values():
                if len(seeds) > 1:
                    ax.plot(range(1, len(c) + 1), c, color=color, linestyle=ls, alpha=0.25,
                            linewidth=0.8)
            median = [
                statistics.median(c[min(t, len(c) - 1)] for c in seeds.values())
                for t in range(n_trials)
            ]
            label = name if len(seeds) == 1 else f"{name} (median of {len(seeds)} seeds)"
            ax.plot(range(1, n_trials + 1), median, label=label, color=color, linestyle=ls,
                    linewidth=1.8)
        ax.axhline(0.95 * best, color="gray", linewidth=0.8, linestyle=":", label="95% of best")
        ax.set_title(f"{wl}")
        ax.set_xlabel("number of trials")
        ax.set_ylabel("best GFLOP/s so far")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle("Kiln conv2d tuners (TVM Figure 12)", fontsize=11)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
