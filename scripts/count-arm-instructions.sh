#!/usr/bin/env bash
# Guest instructions an aarch64 module executes for one inference, counted under qemu-user by
# scripts/qemu_insn_count.c (built here with the host's cc). For each module directory it runs
# the cross-built kiln-run with one thread, its inputs from files when given, and prints the
# process's total and the total minus the runner's start-up (`kiln-run --help`: the loader,
# libstdc++ and the runtime's initialisation), which is close to the model's own count (it still
# includes reading graph.json, lib.so and params.bin). Not a measure of ARM speed: see
# docs/aarch64.md.
#   scripts/count-arm-instructions.sh [-c CPU] [-r RUNNER] MODULE_DIR[:NAME=INPUT.npy] ...
# RUNNER defaults to build/aarch64/bin/kiln-run, CPU to max.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cpu=max
runner=$root/build/aarch64/bin/kiln-run
while getopts "c:r:" o; do
  case $o in
    c) cpu=$OPTARG ;;
    r) runner=$OPTARG ;;
    *) echo "usage: $0 [-c CPU] [-r RUNNER] MODULE_DIR[:NAME=INPUT.npy] ..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-c CPU] [-r RUNNER] MODULE_DIR[:NAME=INPUT.npy] ..." >&2; exit 2; }
command -v qemu-aarch64 >/dev/null || { echo "qemu-aarch64 not found (apt-get install qemu-user)" >&2; exit 1; }
[ -x "$runner" ] || { echo "$runner not found (build kiln with g++-aarch64-linux-gnu installed)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -shared -fPIC -O2 -o "$tmp/insn.so" "$root/scripts/qemu_insn_count.c"
count() {
  qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "$cpu" -plugin "$tmp/insn.so" -d plugin \
    -D "$tmp/log" "$runner" "$@" >/dev/null
  sed -n 's/^insns: //p' "$tmp/log"
}
base=$(count --help)
printf "%-40s %16s %16s\n" module "instructions" "minus start-up"
for spec in "$@"; do
  dir=${spec%%:*}
  args=("$dir" --threads 1)
  [ "$spec" != "$dir" ] && args+=(--input "${spec#*:}")
  n=$(count "${args[@]}")
  printf "%-40s %16s %16s\n" "$dir" "$n" "$((n - base))"
done
echo "(-cpu $cpu; start-up, kiln-run --help: $base instructions)"
