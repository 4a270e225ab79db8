#!/usr/bin/env python3
"""Checks Kiln's layering (DESIGN.md): a layer includes headers only of itself and the layers
below it, the runtime includes nothing of the compiler, and LLVM headers appear only under
src/target/llvm/. Prints each violation with file:line and exits 1 if there is any."""
import os
import re
import sys

# autotune sits below topi: schedule templates declare their knobs on its config spaces, and a
# tuning task carries a closure that instantiates its template, so autotune needs no topi/graph.
LAYERS = ["support", "runtime", "ir", "arith", "te", "tir", "target", "autotune", "topi", "graph",
          "frontend", "accel", "tools", "python"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def layer_of(rel):
    parts = rel.split(os.sep)
    if parts[0] == "src" and len(parts) > 1:
        return parts[1]
    if parts[:2] == ["include", "kiln"] and len(parts) > 2:
        return parts[2]
    return None


def main(root):
    errors = []
    for top in ("src", "include"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for fn in files:
                if not fn.endswith((".h", ".cc", ".cpp", ".def")):
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, root)
                layer = layer_of(rel)
                if layer is None or layer not in RANK:
                    if layer is not None:
                        errors.append(f"{rel}: unknown layer '{layer}' (add it to DESIGN.md and "
                                      f"scripts/check_layers.py)")
                    continue
                in_llvm_dir = rel.startswith(os.path.join("src", "target", "llvm") + os.sep)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if (inc.startswith("llvm/") or inc.startswith("llvm-c/")) and not in_llvm_dir:
                            errors.append(f"{rel}:{lineno}: LLVM header <{inc}> outside "
                                          f"src/target/llvm/")
                        if inc.startswith("kiln/"):
                            parts = inc.split("/")
                            target = parts[1] if len(parts) > 2 else None
                            if target in RANK and RANK[target] > RANK[layer]:
                                errors.append(f"{rel}:{lineno}: layer '{layer}' includes <{inc}> "
                                              f"of the higher layer '{target}'")
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} violation(s)")
        return 1
    print("check_layers: ok")
    return 0


def self_test():
    """Builds a small tree with one violation of each rule and checks they are all found."""
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/runtime/bad.cc": '#include "kiln/ir/expr.h"\n',          # runtime -> compiler
            "src/arith/bad.cc": '#include "kiln/te/tensor.h"\n',          # lower -> higher
            "include/kiln/tir/bad.h": "#include <llvm/IR/Module.h>\n",   # LLVM outside llvm/
            "src/target/llvm/ok.cc": "#include <llvm/IR/Module.h>\n",     # allowed
            "src/te/ok.cc": '#include "kiln/arith/analyzer.h"\n',         # allowed
        }
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(root)
        text = out.getvalue()
        expect = ["src/runtime/bad.cc:1: layer 'runtime' includes <kiln/ir/expr.h>",
                  "src/arith/bad.cc:1: layer 'arith' includes <kiln/te/tensor.h>",
                  "include/kiln/tir/bad.h:1: LLVM header <llvm/IR/Module.h> outside"]
        missing = [e for e in expect if e not in text]
        if rc != 1 or missing or "ok.cc" in text:
            print("check_layers self-test FAILED:\n" + text)
            return 1
    print("check_layers self-test: ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
