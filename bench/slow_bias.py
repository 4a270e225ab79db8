#!/usr/bin/python3
"""Does a candidate slow the default timed right after it? A check on kiln-bench-tuners logs.

    bench/slow_bias.py DIR [--factor 1.2] [--neighbours 3]

DIR holds the logs of `kiln-bench-tuners --keep-logs DIR` (LAYER-TUNER-seedS.jsonl, measured
with --metric relative: every record has costs.ref_runs, the default config timed after each of
the candidate's repeats). Measurements are bucketed by their relative time (fastest repeat over
the reference's fastest) and, per tuner, it prints for each bucket:
  - the share made in a slow period of the machine (the reference's fastest repeat over FACTOR
    x the 10th percentile of the references so far in that run: autotune::MachineState);
  - the reference's fastest repeat over the median of the same of the NEIGHBOURS measurements
    before and after it in the run: about 1 in every bucket when a candidate does not slow the
    default timed after it, above 1 for the candidates that do (the slow state itself is
    shared with the neighbours, save at the edges of a slow period).
A slow period makes every candidate look faster against the default (6-8% on the sixteenth
session's logs), so measurements made in one move into the buckets below where they belong;
where the configs thin out (the fastest ones), that alone raises a bucket's slow share.
Standard library only.
"""
import argparse
import collections
import glob
import json
import os
import re
import statistics

BUCKETS = [(0, 0.9), (0.9, 1.0), (1.0, 1.2), (1.2, 1.5), (1.5, 2.0), (2.0, 3.0), (3.0, float("inf"))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--factor", type=float, default=1.2)
    ap.add_argument("--neighbours", type=int, default=3)
    a = ap.parse_args()
    # tuner -> bucket -> [count, slow, [reference over its neighbours]]
    agg = collections.defaultdict(lambda: {b: [0, 0, []] for b in BUCKETS})
    for path in sorted(glob.glob(os.path.join(a.dir, "*-seed*.jsonl"))):
        m = re.match(r"(.+)-(.+)-seed(\d+)\.jsonl$", os.path.basename(path))
        if not m:
            continue
        tuner = m.group(2)
        recs = []
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                c = r.get("costs")
                if c and c.get("ref_runs") and c.get("runs") and len(c["runs"]) == len(c["ref_runs"]):
                    recs.append((r["timestamp"], min(c["runs"]), min(c["ref_runs"]), c["ref_runs"]))
        recs.sort()
        refmins = [x[2] for x in recs]
        seen = []
        k = a.neighbours
        for i, (_, run, ref, ref_runs) in enumerate(recs):
            limit = a.factor * sorted(seen)[len(seen) // 10] if seen else 0
            slow = limit > 0 and ref > limit
            seen.extend(ref_runs)
            near = refmins[max(0, i - k):i] + refmins[i + 1:i + 1 + k]
            rel = run / ref
            for b in BUCKETS:
                if b[0] <= rel < b[1]:
                    e = agg[tuner][b]
                    e[0] += 1
                    e[1] += slow
                    if near:
                        e[2].append(ref / statistics.median(near))
    for tuner in sorted(agg):
        print(f"{tuner}: relative time, measurements, share slow, reference over its neighbours "
              "(median, mean)")
        for b, (n, slow, norm) in agg[tuner].items():
            if n:
                hi = "" if b[1] == float("inf") else f"{b[1]:.1f}"
                print(f"  {b[0]:.1f}-{hi:4s} {n:6d}  {slow / n:.2f}  "
                      f"{statistics.median(norm):.3f} {statistics.mean(norm):.3f}")


if __name__ == "__main__":
    main()
