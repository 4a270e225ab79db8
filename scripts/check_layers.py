#!/usr/bin/env python3
"""Checks Kiln's layering (DESIGN.md). Prints each violation with file:line and exits 1 if
there is any. The rules:

1. Library code (src/<layer>/, include/kiln/<layer>/) includes headers only of its own layer and
   the layers below it (LAYERS, lowest first); so the runtime includes nothing of the compiler.
   Every #include is resolved the way the compiler does -- a quoted include first against the
   including file's folder, then against the include path -- so `#include "../x.h"` and
   `#include "foo.h"` are judged by the file they reach, not by their spelling.
2. A layer's private headers (the .h files in src/<layer>/) are its own: another layer includes
   the public headers in include/kiln/<layer>/ instead, even when it sits above.
3. LLVM headers (<llvm/...>, <llvm-c/...>) appear only under src/target/llvm/.
4. A test or benchmark file may use only the layers its binary links, i.e. the layers at or
   below the library it links (kiln_<layer>, or `kiln`: every library layer). The library of a
   test folder comes from its `kiln_test(<binary> <folder> <labels> <library>)` line in
   CMakeLists.txt; folders and files built otherwise are listed in BINARIES below. Helper
   headers shared between tests (tests/common/, or another folder's *_util.h) count through
   whoever includes them: a test including "e2e/e2e_util.h" uses every layer that header uses.
   A .cc file under tests/ or bench/ that no binary claims is an error.
   Library code never includes a test or benchmark file.

Usage: check_layers.py [ROOT] | --self-test"""
import os
import re
import sys

# autotune (the knob API) sits below topi: schedule templates declare their knobs on its config
# spaces, and a tuning task carries a closure that instantiates its template, so autotune needs
# no topi/graph. tuning (whole-model search: task extraction, the in-network check, the tools' log
# writing; src/tuning/, include/kiln/tuning/) sits above graph and frontend: it compiles models,
# and graph (whose strategies build one workload's task, graph/tuning.h) never includes it.
LAYERS = ["support", "runtime", "ir", "arith", "te", "tir", "target", "autotune", "topi", "graph",
          "frontend", "tuning", "accel", "tools", "python"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# The library `kiln` is the whole compiler: every layer below the command line.
KILN_ALL = RANK["tools"] - 1
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
KILN_TEST = re.compile(r'^\s*kiln_test\(\s*(\S+)\s+(\S+)\s+("[^"]*"|\S+)\s+([^\s)]+)', re.M)
SOURCE_EXT = (".h", ".cc", ".cpp", ".def")

# Test and benchmark binaries not declared with kiln_test(): path (folder or file, relative to
# the root; the longest match wins) -> the library the binary links.
BINARIES = {
    "bench": "kiln",
    "tests/models": "kiln",
    "tests/deploy/export_fixture.cc": "kiln",
    "tests/deploy/deploy_test.cc": "kiln_runtime",  # a deployed model needs the runtime alone
}
HELPERS_ONLY = ["tests/common"]  # no binary of their own; checked through their includers


def rel_of(path, root):
    return os.path.relpath(path, root).replace(os.sep, "/")


def layer_of(rel):
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[:2] == ["include", "kiln"] and len(parts) > 3:
        return parts[2]
    return None


def library_rank(lib):
    """The highest layer rank a binary linking `lib` may use, or None if `lib` is unknown."""
    if lib == "kiln":
        return KILN_ALL
    if lib.startswith("kiln_") and lib[5:] in RANK:
        return RANK[lib[5:]]
    return None


def test_binaries(root):
    """Folder/file -> library, from CMakeLists.txt's kiln_test() lines plus BINARIES."""
    rules = {}
    cmake = os.path.join(root, "CMakeLists.txt")
    if os.path.exists(cmake):
        with open(cmake, encoding="utf-8") as f:
            text = f.read()
        for m in KILN_TEST.finditer(text):
            if "$" not in m.group(2):  # skip the function's own definition
                rules["tests/" + m.group(2)] = m.group(4)
    rules.update(BINARIES)
    return rules


def binary_of(rel, rules):
    best = None
    for key in rules:
        if rel == key or rel.startswith(key + "/"):
            if best is None or len(key) > len(best):
                best = key
    return best


class Checker:
    def __init__(self, root):
        self.root = root
        self.errors = []
        self.uses_memo = {}

    def resolve(self, rel, kind, inc):
        """The file an #include reaches, relative to the root, or None (system or missing)."""
        search = []
        if kind == '"':
            search.append(os.path.dirname(os.path.join(self.root, rel)))
        search.append(os.path.join(self.root, "include"))
        if rel.startswith("tests/"):
            search.append(os.path.join(self.root, "tests"))  # kiln_test's include directory
        for d in search:
            p = os.path.normpath(os.path.join(d, inc))
            if os.path.isfile(p):
                r = rel_of(p, self.root)
                if not r.startswith("../"):
                    return r
        return None

    def includes(self, rel):
        """Yields (line, spelling, resolved path or None, kiln layer reached or None)."""
        with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, inc = m.group(1), m.group(2)
                target = self.resolve(rel, kind, inc)
                layer = layer_of(target) if target else None
                if target is None and inc.startswith("kiln/") and inc.count("/") >= 2:
                    layer = inc.split("/")[1]  # a kiln header not in this tree: judge by name
                yield lineno, inc, target, layer

    def check_llvm(self, rel, lineno, inc):
        if inc.startswith(("llvm/", "llvm-c/")) and not rel.startswith("src/target/llvm/"):
            self.errors.append(f"{rel}:{lineno}: LLVM header <{inc}> outside src/target/llvm/")

    def check_library_file(self, rel, layer):
        for lineno, inc, target, tlayer in self.includes(rel):
            self.check_llvm(rel, lineno, inc)
            if target and target.startswith(("tests/", "bench/")):
                self.errors.append(f"{rel}:{lineno}: library code includes the test/bench file "
                                   f"{target}")
                continue
            if tlayer is None or tlayer not in RANK:
                continue
            if RANK[tlayer] > RANK[layer]:
                self.errors.append(f"{rel}:{lineno}: layer '{layer}' includes <{inc}> of the "
                                   f"higher layer '{tlayer}'")
            elif target and target.startswith("src/") and tlayer != layer:
                self.errors.append(f"{rel}:{lineno}: layer '{layer}' includes {target}, a private "
                                   f"header of layer '{tlayer}' (use include/kiln/{tlayer}/)")

    def uses(self, rel, stack=()):
        """Layers a test/bench file uses, directly or through the test/bench headers it
        includes: {layer: (line in rel, spelling, via)}."""
        if rel in self.uses_memo:
            return self.uses_memo[rel]
        if rel in stack:
            return {}
        out = {}
        for lineno, inc, target, tlayer in self.includes(rel):
            self.check_llvm(rel, lineno, inc)
            if tlayer in RANK:
                out.setdefault(tlayer, (lineno, inc, None))
            elif target and target.startswith(("tests/", "bench/")):
                for lay, (_, inner, via) in self.uses(target, stack + (rel,)).items():
                    out.setdefault(lay, (lineno, inc, via or f"{target}: <{inner}>"))
        self.uses_memo[rel] = out
        return out

    def check_test_file(self, rel, rules):
        key = binary_of(rel, rules)
        if key is None:
            if rel.endswith((".cc", ".cpp")) and not any(rel.startswith(h + "/")
                                                        for h in HELPERS_ONLY):
                self.errors.append(f"{rel}: no test binary builds this file (add a kiln_test() in "
                                   f"CMakeLists.txt or a rule to BINARIES in "
                                   f"scripts/check_layers.py)")
            self.uses(rel)  # still checks its LLVM includes
            return
        lib = rules[key]
        limit = library_rank(lib)
        if limit is None:
            self.errors.append(f"{rel}: its binary links '{lib}', which is no layer library")
            return
        for lay, (lineno, inc, via) in sorted(self.uses(rel).items()):
            if RANK[lay] > limit:
                how = f" (via {via})" if via else ""
                self.errors.append(f"{rel}:{lineno}: uses layer '{lay}' through <{inc}>{how}, "
                                   f"but its binary links only {lib}")

    def run(self):
        rules = test_binaries(self.root)
        for top in ("src", "include", "tests", "bench"):
            for dirpath, dirs, files in os.walk(os.path.join(self.root, top)):
                dirs.sort()
                for fn in sorted(files):
                    if not fn.endswith(SOURCE_EXT):
                        continue
                    rel = rel_of(os.path.join(dirpath, fn), self.root)
                    if top in ("tests", "bench"):
                        self.check_test_file(rel, rules)
                        continue
                    layer = layer_of(rel)
                    if layer is None:
                        continue
                    if layer not in RANK:
                        self.errors.append(f"{rel}: unknown layer '{layer}' (add it to DESIGN.md "
                                           f"and scripts/check_layers.py)")
                        continue
                    self.check_library_file(rel, layer)
        return self.errors


def main(root):
    errors = Checker(root).run()
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} violation(s)")
        return 1
    print("check_layers: ok")
    return 0


def self_test():
    """Builds a small tree with violations of each rule and allowed cases beside them, and
    checks that exactly the violations are found."""
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            "CMakeLists.txt": ('function(kiln_test name dir label deps)\n'
                               '  file(GLOB s ${CMAKE_SOURCE_DIR}/tests/${dir}/*.cc)\n'
                               'endfunction()\n'
                               'kiln_test(kiln-test-arith arith "unit;fuzz" kiln_arith)\n'
                               'kiln_test(kiln-test-topi topi numerics kiln_topi)\n'
                               'kiln_test(kiln-test-e2e e2e "numerics;fuzz" kiln_target)\n'),
            "include/kiln/ir/expr.h": "",
            "include/kiln/te/tensor.h": "",
            "include/kiln/graph/graph.h": "",
            "include/kiln/target/build.h": "",
            "src/arith/analyzer_impl.h": "",
            "src/graph/op_attrs.h": "",
            "src/frontend/converter.h": "",
            "src/target/target_info.h": "",
            # Rule 1, by name and by resolution.
            "src/runtime/bad.cc": '#include "kiln/ir/expr.h"\n',           # runtime -> compiler
            "src/arith/bad.cc": '#include "kiln/te/tensor.h"\n',           # lower -> higher
            "include/kiln/te/bad_rel.h": '#include "../graph/graph.h"\n',  # relative, higher
            "src/graph/bad_rel.cc": '#include "../frontend/converter.h"\n',
            "src/graph/bad_tuning.cc": '#include "kiln/tuning/tasks.h"\n',  # graph -> tuning
            "include/kiln/tuning/tasks.h": '#include "kiln/graph/graph.h"\n',  # tuning -> graph
            "src/tuning/ok.cc": '#include "kiln/tuning/tasks.h"\n#include "kiln/graph/graph.h"\n',
            # Rule 2: a private header of a lower layer.
            "src/tir/bad_private.cc": '#include "../arith/analyzer_impl.h"\n',
            # Rule 3.
            "include/kiln/tir/bad.h": "#include <llvm/IR/Module.h>\n",    # LLVM outside llvm/
            # Allowed.
            "src/target/llvm/ok.cc": ('#include <llvm/IR/Module.h>\n'
                                      '#include "../target_info.h"\n'),  # own layer, relative
            "src/te/ok.cc": '#include "kiln/arith/analyzer.h"\n',          # lower, by name
            "src/graph/ok_local.cc": '#include "op_attrs.h"\n#include <vector>\n',
            # Rule 4: tests.
            "tests/common/producer.h": '#include "kiln/ir/expr.h"\n',
            "tests/e2e/e2e_util.h": ('#include "common/producer.h"\n'
                                     '#include "kiln/target/build.h"\n'),
            "tests/arith/bad_test.cc": '#include "kiln/te/tensor.h"\n',    # above kiln_arith
            "tests/arith/bad_via_test.cc": '#include "e2e/e2e_util.h"\n',  # target, via a helper
            "tests/arith/ok_test.cc": '#include "common/producer.h"\n',    # ir <= arith
            "tests/topi/ok_test.cc": '#include "e2e/e2e_util.h"\n',        # target <= topi
            "tests/orphan/x_test.cc": '#include "kiln/ir/expr.h"\n',       # no binary
            "tests/orphan/helper.h": '#include "kiln/ir/expr.h"\n',        # headers: fine
            "tests/deploy/deploy_test.cc": '#include "kiln/ir/expr.h"\n',  # runtime only
            "tests/deploy/export_fixture.cc": '#include "kiln/graph/graph.h"\n',
            "bench/ok.cc": '#include "kiln/graph/graph.h"\n#include "bench_util.h"\n',
            "bench/bench_util.h": '#include "kiln/ir/expr.h"\n',
            "bench/bad_llvm.cc": "#include <llvm/IR/Module.h>\n",
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
        expect = [
            "src/runtime/bad.cc:1: layer 'runtime' includes <kiln/ir/expr.h> of the higher layer "
            "'ir'",
            "src/arith/bad.cc:1: layer 'arith' includes <kiln/te/tensor.h> of the higher layer "
            "'te'",
            "include/kiln/te/bad_rel.h:1: layer 'te' includes <../graph/graph.h> of the higher "
            "layer 'graph'",
            "src/graph/bad_rel.cc:1: layer 'graph' includes <../frontend/converter.h> of the "
            "higher layer 'frontend'",
            "src/graph/bad_tuning.cc:1: layer 'graph' includes <kiln/tuning/tasks.h> of the "
            "higher layer 'tuning'",
            "src/tir/bad_private.cc:1: layer 'tir' includes src/arith/analyzer_impl.h, a private "
            "header of layer 'arith'",
            "include/kiln/tir/bad.h:1: LLVM header <llvm/IR/Module.h> outside",
            "tests/arith/bad_test.cc:1: uses layer 'te' through <kiln/te/tensor.h>, but its "
            "binary links only kiln_arith",
            "tests/arith/bad_via_test.cc:1: uses layer 'target' through <e2e/e2e_util.h> (via "
            "tests/e2e/e2e_util.h: <kiln/target/build.h>), but its binary links only kiln_arith",
            "tests/orphan/x_test.cc: no test binary builds this file",
            "tests/deploy/deploy_test.cc:1: uses layer 'ir' through <kiln/ir/expr.h>, but its "
            "binary links only kiln_runtime",
            "bench/bad_llvm.cc:1: LLVM header <llvm/IR/Module.h> outside",
        ]
        missing = [e for e in expect if e not in text]
        bad_lines = [ln for ln in text.splitlines() if ln and not ln.startswith("check_layers:")
                     and not any(ln.startswith(e.split(":")[0] + ":") for e in expect)]
        if rc != 1 or missing or bad_lines or f"{len(expect)} violation(s)" not in text:
            print("check_layers self-test FAILED\nmissing: %s\nunexpected: %s\n%s" %
                  (missing, bad_lines, text))
            return 1
    print("check_layers self-test: ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
