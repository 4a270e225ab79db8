#!/usr/bin/env python3
"""Register-spill audit of compiled modules: where LLVM ran out of vector registers.

For each module's lib.so, disassembles every function (objdump) and counts its FMAs and its
vector (ymm/zmm) loads and stores addressed off the stack pointer: spills, reloads, and kernel
slices LLVM hoisted into stack slots. A kernel whose stack traffic is a large fraction of its
FMAs is worth reading (the thirty-eighth session found conv2d_nchwc's fully unrolled short
reductions this way on a 16-register AVX2 machine). The counts are static (instructions, not
executions): weigh them with `kiln bench --profile` or `perf record` before acting.

  python3 bench/zoo/spill_audit.py build/models-zoo/*_O2.kiln [--min-ratio 0.3] [--top 40]
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def audit(lib):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", lib], capture_output=True,
                         text=True, check=True).stdout
    counts = collections.defaultdict(lambda: [0, 0])
    fn = None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            fn = m.group(1)
            continue
        if fn is None or "\t" not in line:
            continue
        ins = line.split("\t", 1)[1]
        if ins.startswith(("vfmadd", "vfnmadd", "vfmsub", "vfnmsub")):
            counts[fn][0] += 1
        if "(%rsp)" in ins and re.search(r"%[yz]mm", ins):
            counts[fn][1] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="+", help="module directories (with lib.so)")
    ap.add_argument("--min-ratio", type=float, default=0.3,
                    help="list functions with at least this many stack accesses per FMA")
    ap.add_argument("--top", type=int, default=40, help="at most this many rows")
    args = ap.parse_args()
    rows = []
    for d in args.modules:
        lib = os.path.join(d, "lib.so")
        if not os.path.exists(lib):
            sys.exit(f"spill_audit: {lib}: no such file")
        for fn, (fma, stack) in audit(lib).items():
            if fma >= 16 and stack / fma >= args.min_ratio:
                rows.append((stack / fma, os.path.basename(d.rstrip("/")), fn, fma, stack))
    rows.sort(key=lambda r: (-r[0], -r[3]))
    print(f"{'stack/FMA':>9}  {'FMAs':>5}  {'stack':>5}  module: function")
    for ratio, mod, fn, fma, stack in rows[:args.top]:
        print(f"{ratio:9.2f}  {fma:5d}  {stack:5d}  {mod}: {fn}")
    print(f"{len(rows)} function(s) at or above {args.min_ratio} stack accesses per FMA")


if __name__ == "__main__":
    main()
