#!/usr/bin/python3
"""Plots kiln-bench-tuners' curves (the TVM paper's Figure 12): best GFLOP/s found vs number of
trials, one panel per workload, one line per tuner.

usage: /usr/bin/python3 bench/plot_tuners.py CURVES.csv OUT.png
CURVES.csv has the columns workload,tuner,trial,best_gflops (as kiln-bench-tuners writes it).
"""
import csv
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"xgb": ("C3", "-"), "random": ("C0", "--"), "ga": ("C2", "-."), "grid": ("C7", ":")}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_tuners.py CURVES.csv OUT.png")
    curves = OrderedDict()  # workload -> tuner -> ([trial], [gflops])
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            t = curves.setdefault(row["workload"], OrderedDict()).setdefault(row["tuner"], ([], []))
            t[0].append(int(row["trial"]))
            t[1].append(float(row["best_gflops"]))
    if not curves:
        sys.exit(f"plot_tuners.py: no curves in {sys.argv[1]}")
    n = len(curves)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, (wl, tuners) in zip(axes.flat, curves.items()):
        best = max(max(g) for _, g in tuners.values())
        for name, (trials, gflops) in tuners.items():
            color, ls = STYLE.get(name, (None, "-"))
            ax.plot(trials, gflops, label=name, color=color, linestyle=ls)
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
