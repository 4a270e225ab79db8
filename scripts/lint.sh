#!/usr/bin/env bash
# Kiln's lint, run by `make lint` and by ctest (the `kiln-lint` test, so `make test` and CI fail
# when it fails). It runs every check and reports all failures, not just the first:
#   1. format: clang-format 14 (the tree's .clang-format) --dry-run -Werror over every tracked
#      *.h / *.cc (every *.h / *.cc under src, include, tests, bench outside a git checkout);
#   2. layers: scripts/check_layers.py and its self-test;
#   3. op names: scripts/check_op_names.py (with scripts/op_name_allowlist.txt) and its self-test;
#   4. size: no source file under src/ over 800 lines (split a file by what its parts do).
# Usage: scripts/lint.sh [ROOT]. CLANG_FORMAT=path picks the clang-format binary.
set -uo pipefail

ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT" || exit 2
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
failed=()

# 1. Formatting. Other clang-format versions format differently, so insist on 14.
CF=${CLANG_FORMAT:-}
if [ -z "$CF" ]; then
  if command -v clang-format-14 >/dev/null; then CF=clang-format-14; else CF=clang-format; fi
fi
if ! command -v "$CF" >/dev/null; then
  echo "lint: $CF not found (scripts/install-deps.sh installs clang-format 14)"
  failed+=(format)
elif ! "$CF" --version | grep -q 'version 14\.'; then
  echo "lint: $("$CF" --version) is not clang-format 14; set CLANG_FORMAT to a clang-format 14"
  failed+=(format)
else
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.h' '*.cc')
  else
    mapfile -t files < <(find src include tests bench -name '*.h' -o -name '*.cc' | sort)
  fi
  # Files deleted in the working tree but still tracked are skipped.
  existing=()
  for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
  if printf '%s\0' "${existing[@]}" | xargs -0 -n 50 "$CF" --dry-run -Werror --style=file; then
    echo "lint: format ok (${#existing[@]} files, $("$CF" --version | grep -o 'version [0-9.]*'))"
  else
    echo "lint: format FAILED: run \`make format\` (clang-format 14) and commit the result"
    failed+=(format)
  fi
fi

# 2 and 3. The checks and their self-tests.
for check in check_layers check_op_names; do
  "$PY" "scripts/$check.py" --self-test || failed+=("$check self-test")
  "$PY" "scripts/$check.py" "$ROOT" || failed+=("$check")
done

# 4. File size.
long=$(find src -name '*.h' -o -name '*.cc' | sort | xargs wc -l | awk '$2 != "total" && $1 > 800')
if [ -n "$long" ]; then
  echo "lint: files over 800 lines (split them by what their parts do):"
  echo "$long"
  failed+=(size)
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: FAILED: ${failed[*]}"
  exit 1
fi
echo "lint: ok"
