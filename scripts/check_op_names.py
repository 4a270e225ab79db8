#!/usr/bin/env python3
"""Checks that code outside op registrations does not decide things by comparing op names
(issue 25: an op's implementation is chosen once, by its strategy, and recorded on the node;
later stages read that record instead of `if (op == "conv2d") ...` chains).

It finds comparisons of an op name with a string literal -- `op == "x"`, `op != "x"`,
`n.op == "x"`, `node->op != "x"`, `"x" == op` -- in the C++ files (.h, .cc) of

    src/graph/     except the op registrations: src/graph/ops/
    src/tools/     the command line
    src/autotune/  the knob API
    src/tuning/    whole-model tuning (task extraction, ...)

Comparisons in // comments are ignored. The tree has such comparisons today, so the check reads
an allowlist, scripts/op_name_allowlist.txt: one `path count` a line (paths relative to the
repository root, `#` starts a comment). It fails (exit 1), printing file:line for each
comparison of the file, when a file has more comparisons than its allowed count or a file not
listed has any. A file with fewer than allowed is reported as a note (shrink its count). The
allowlist only ever shrinks; `--write-allowlist` regenerates it from the tree.

Usage: check_op_names.py [ROOT] [--write-allowlist] | --self-test"""
import os
import re
import sys

SCOPES = ["src/graph", "src/tools", "src/autotune", "src/tuning"]
EXEMPT = [re.compile(r"^src/graph/ops/")]
ALLOWLIST = os.path.join("scripts", "op_name_allowlist.txt")
# `op` as a whole identifier (also `.op`, `->op`) compared with a string literal, either side.
COMPARE = re.compile(r'(?<![A-Za-z0-9_])op\s*(?:==|!=)\s*"|"\s*(?:==|!=)\s*(?:[A-Za-z_]\w*(?:\.|->))*op(?![A-Za-z0-9_])')


def strip_line_comment(line):
    """Returns `line` without a trailing // comment (a // inside a string literal is kept)."""
    in_str = None
    i = 0
    while i < len(line):
        c = line[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == in_str:
                in_str = None
        elif c in "\"'":
            in_str = c
        elif line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def in_scope(rel):
    rel = rel.replace(os.sep, "/")
    if not rel.endswith((".h", ".cc")):
        return False
    if not any(rel.startswith(s + "/") for s in SCOPES):
        return False
    return not any(e.search(rel) for e in EXEMPT)


def find_comparisons(root):
    """Returns {path: [(line number, line text), ...]} with one entry per comparison."""
    found = {}
    for scope in SCOPES:
        for dirpath, dirs, files in os.walk(os.path.join(root, scope)):
            dirs.sort()
            for fn in sorted(files):
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if not in_scope(rel):
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        for _ in COMPARE.finditer(strip_line_comment(line)):
                            found.setdefault(rel, []).append((lineno, line.strip()))
    return found


def read_allowlist(path):
    allowed = {}
    if not os.path.exists(path):
        return allowed
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise SystemExit(f"{path}:{lineno}: expected `path count`, got '{line}'")
            allowed[parts[0]] = int(parts[1])
    return allowed


def write_allowlist(path, found):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Op-name comparisons still allowed, per file (scripts/check_op_names.py).\n"
                "# Counts only go down: replace a comparison by the op's strategy or a recorded\n"
                "# attribute, then lower the count (or delete the line).\n")
        for rel in sorted(found):
            f.write(f"{rel} {len(found[rel])}\n")


def main(root, write=False):
    found = find_comparisons(root)
    allow_path = os.path.join(root, ALLOWLIST)
    if write:
        write_allowlist(allow_path, found)
        print(f"check_op_names: wrote {ALLOWLIST} ({len(found)} file(s))")
        return 0
    allowed = read_allowlist(allow_path)
    errors = 0
    for rel in sorted(found):
        hits = found[rel]
        limit = allowed.get(rel, 0)
        if len(hits) <= limit:
            continue
        errors += 1
        for lineno, text in hits:
            print(f"{rel}:{lineno}: op name compared with a string: {text}")
        if rel in allowed:
            print(f"{rel}: {len(hits)} op-name comparison(s), {ALLOWLIST} allows {limit}")
        else:
            print(f"{rel}: {len(hits)} op-name comparison(s), and the file is not in "
                  f"{ALLOWLIST}")
    for rel in sorted(allowed):
        n = len(found.get(rel, []))
        if n < allowed[rel]:
            print(f"check_op_names: note: {rel} has {n} comparison(s), the allowlist allows "
                  f"{allowed[rel]}: lower its count in {ALLOWLIST}")
    if errors:
        print(f"check_op_names: {errors} file(s) over their allowance; decide by the op's "
              f"strategy or a recorded node attribute, not by its name")
        return 1
    print("check_op_names: ok")
    return 0


def self_test():
    """Builds a small tree and checks every rule: over the allowance, not listed, within the
    allowance, exempt registration files, out-of-scope folders, comments and lookalikes."""
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            # 2 comparisons, 1 allowed: fails, both lines printed.
            "src/graph/build.cc": 'if (n.op == "conv2d") {}\nif (op != "dense") {}\n',
            # Not listed: fails.
            "src/tools/cmd.cc": 'bool f() { return "relu" == node->op; }\n',
            # Within its allowance (2 on one line, 3 allowed): passes, with a note.
            "src/autotune/ok.cc": 'if (op == "a" || op == "b") {}\n',
            # Not listed, but only in comments and lookalike names: passes.
            "src/tuning/quiet.cc": ('// if (op == "conv2d") was the old way\n'
                                    'if (my_op == "x" || top == "y") {}\n'
                                    'std::string s = "// op == \\"x\\""; if (opt == "z") {}\n'),
            # Registrations and other layers are out of scope.
            "src/graph/ops/nn.cc": 'if (op == "conv2d") {}\n',
            "src/runtime/exec.cc": 'if (op == "tvm_op") {}\n',
            ALLOWLIST: "# comment\nsrc/graph/build.cc 1\nsrc/autotune/ok.cc 3\n",
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
        expect = ['src/graph/build.cc:1: op name compared with a string: if (n.op == "conv2d")',
                  'src/graph/build.cc:2: op name compared with a string: if (op != "dense")',
                  "src/graph/build.cc: 2 op-name comparison(s), scripts/op_name_allowlist.txt "
                  "allows 1",
                  'src/tools/cmd.cc:1: op name compared with a string: bool f() { return "relu"',
                  "src/tools/cmd.cc: 1 op-name comparison(s), and the file is not in",
                  "note: src/autotune/ok.cc has 2 comparison(s), the allowlist allows 3",
                  "check_op_names: 2 file(s) over their allowance"]
        missing = [e for e in expect if e not in text]
        unexpected = [w for w in ("quiet.cc", "ops/nn.cc", "runtime", "ok.cc:")
                      if w in text]
        if rc != 1 or missing or unexpected:
            print("check_op_names self-test FAILED (rc=%d)\nmissing: %s\nunexpected: %s\n%s" %
                  (rc, missing, unexpected, text))
            return 1
        # --write-allowlist makes the tree pass.
        with contextlib.redirect_stdout(io.StringIO()):
            main(root, write=True)
            rc = main(root)
        if rc != 0:
            print("check_op_names self-test FAILED: the written allowlist does not pass")
            return 1
    print("check_op_names self-test: ok")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--self-test"]:
        sys.exit(self_test())
    write = "--write-allowlist" in args
    args = [a for a in args if a != "--write-allowlist"]
    sys.exit(main(args[0] if args else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__))), write))
