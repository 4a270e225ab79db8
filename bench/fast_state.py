#!/usr/bin/python3
"""The machine's fast and slow states in the logs of a kiln-bench-tuners run.

    bench/fast_state.py DIR [--factor 1.2] [--trials 150]

DIR holds the logs of `kiln-bench-tuners --keep-logs DIR` (LAYER-TUNER-seedS.jsonl, measured
with --metric relative, so every record has costs.ref_runs: the default config timed after each
repeat). A measurement is in the fast state when the fastest of its reference repeats is at most
FACTOR x the 10th percentile of all the layer's reference repeats. Per layer it prints:
  - the share of measurements in the fast state, and how long fast and slow stretches lasted
    (the logs of one layer's tuners, merged by timestamp);
  - the spread of a config's relative time (max / min over its measurements, geometric mean
    over configs measured more than once), over all measurements and within the fast state;
  - the ratio slow / fast of a config's relative time (median in each state), for configs
    measured in both;
  - Figure 12's trials to 95% of the best, counting only fast-state measurements in the curves
    and the bar, and random / xgb (a tuner that never reached it counts at the budget).
Standard library only.
"""
import argparse
import collections
import glob
import json
import math
import os
import statistics


def gmean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--factor", type=float, default=1.2)
    ap.add_argument("--trials", type=int, default=150)
    a = ap.parse_args()
    runs = collections.defaultdict(dict)  # layer -> run name -> [(timestamp, config, rel, ref)]
    for path in sorted(glob.glob(os.path.join(a.dir, "*-seed*.jsonl"))):
        name = os.path.basename(path)[: -len(".jsonl")]
        layer = name.split("-")[0]
        rows = []
        for line in open(path):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            c = r.get("costs") or {}
            if not c.get("runs") or len(c.get("ref_runs", [])) != len(c["runs"]):
                rows.append(None)  # a failed or unpaired measurement: a trial all the same
                continue
            ref = min(c["ref_runs"])
            config = json.dumps(r["config"]["knobs"], sort_keys=True)
            rows.append((r["timestamp"], config, min(c["runs"]) / ref, ref, c["ref_runs"]))
        runs[layer][name] = rows
    if not runs:
        raise SystemExit(f"{a.dir}: no LAYER-TUNER-seedS.jsonl logs with ref_runs")
    ratios = []
    for layer, by_run in runs.items():
        rows = [x for v in by_run.values() for x in v if x]
        refs = sorted(r for x in rows for r in x[4])
        limit = a.factor * refs[len(refs) // 10]
        fast = lambda x: x[3] <= limit
        # Stretches of one state, the layer's measurements in time order.
        seq = sorted(rows)
        stretch = {True: [], False: []}
        t0, state = seq[0][0], fast(seq[0])
        for x in seq[1:]:
            if fast(x) != state:
                stretch[state].append(x[0] - t0)
                t0, state = x[0], fast(x)
        stretch[state].append(seq[-1][0] - t0)
        share = sum(map(fast, rows)) / len(rows)
        print(f"{layer}: {len(rows)} measurements, reference p10 {refs[len(refs) // 10] * 1e3:.3f} ms; "
              f"fast state {share:.0%} of them; stretches fast mean "
              f"{statistics.mean(stretch[True] or [0]):.1f} s (max {max(stretch[True] or [0]):.1f}), "
              f"slow mean {statistics.mean(stretch[False] or [0]):.1f} s (max {max(stretch[False] or [0]):.1f})")
        by_cfg = collections.defaultdict(list)
        for x in rows:
            by_cfg[x[1]].append(x)
        spread_all, spread_fast, slow_over_fast = [], [], []
        for ms in by_cfg.values():
            rel = [x[2] for x in ms]
            if len(rel) > 1:
                spread_all.append(max(rel) / min(rel))
            f = [x[2] for x in ms if fast(x)]
            s = [x[2] for x in ms if not fast(x)]
            if len(f) > 1:
                spread_fast.append(max(f) / min(f))
            if f and s:
                slow_over_fast.append(statistics.median(s) / statistics.median(f))
        print(f"  relative time, max / min per config: all {gmean(spread_all):.3f} ({len(spread_all)} "
              f"configs), fast state {gmean(spread_fast):.3f} ({len(spread_fast)}); slow / fast "
              f"{gmean(slow_over_fast):.3f} ({len(slow_over_fast)} configs measured in both)")
        # Figure 12 on the fast-state measurements.
        curves = {}
        for name, v in by_run.items():
            best, c = 0.0, []
            for x in v:
                if x and fast(x):
                    best = max(best, 1 / x[2])
                c.append(best)
            curves[name] = c
        bar = max(max(c) for c in curves.values())
        print(f"  fast state only: best {bar:.3f}x the default's speed; trials to 95% of it:")
        seeds = sorted({n.split("seed")[1] for n in by_run})
        for seed in seeds:
            need = {}
            for name, c in curves.items():
                if name.endswith("seed" + seed):
                    tuner = name.split("-")[1]
                    need[tuner] = next((i + 1 for i, x in enumerate(c) if x >= 0.95 * bar), 0)
            cells = " ".join(f"{t} {n or '>' + str(a.trials)}" for t, n in sorted(need.items()))
            line = f"    seed {seed}: {cells}"
            x, r = need.get("xgb"), need.get("random")
            if x is not None and r is not None and (x or r):
                ratio = (r or a.trials) / (x or a.trials)
                ratios.append(ratio)
                line += f"; random / xgb {'>=' if not r else '<=' if not x else ''}{ratio:.2f}"
            print(line)
    if ratios:
        print(f"geomean random / xgb, fast state only, over {len(ratios)} runs: {gmean(ratios):.2f}")


if __name__ == "__main__":
    main()
