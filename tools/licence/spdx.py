#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks, or adds, the SPDX licence line (LICENSE: MIT) at the top of every tracked source file.

  tools/licence/spdx.py [--fix] [--root DIR]

The line is the file's first, in the comment syntax of its language: `// SPDX-License-Identifier: MIT` in C, C++,
GLSL, FlatBuffers schemas and JavaScript; `# ...` in Python, shell, CMake, pkg-config and suppression files, after a
`#!` line where there is one; `/* ... */` in C files, the public headers and the linker version script. Data is left alone: models, tokenizers, JSON,
NumPy and safetensors files, text corpora, fuzzing seeds and dictionaries, and Markdown. Without --fix it lists the
files that lack the line and exits with 1 (a ctest entry runs it so); with --fix it adds the line to them.
The file list is `git ls-files` in DIR (default: the repository this script is in); outside a git checkout there
is nothing to check, and it exits with 77 (ctest's skip code here).
"""
import argparse
import os
import subprocess
import sys

TAG = "SPDX-License-Identifier: MIT"
SLASH = ("//", {".c", ".h", ".cpp", ".inc", ".comp", ".glsl", ".fbs", ".js"})
HASH = ("#", {".py", ".sh", ".cmake", ".supp"})
HASH_NAMES = {"CMakeLists.txt", "run"}  # .ci/run
HASH_SUFFIXES = (".cmake.in", ".pc.in")
BLOCK_NAMES = {"tern.map.in"}
SKIP_DIRS = ("tests/fuzz/corpus/", "tests/fuzz/regressions/")


def comment_for(path):
    """The licence line for this file, or None when the file is not source."""
    if path.startswith(SKIP_DIRS):
        return None
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if name in BLOCK_NAMES or ext == ".c" or path.startswith("runtime/include/"):
        return "/* " + TAG + " */"  # C89-style where a C compiler reads it (the public headers, the C examples)
    if ext in SLASH[1]:
        return SLASH[0] + " " + TAG
    if ext in HASH[1] or name in HASH_NAMES or name.endswith(HASH_SUFFIXES):
        return HASH[0] + " " + TAG
    return None


def has_line(text):
    # The first two lines: the second when the first is a #! line.
    return any(TAG in line for line in text.split("\n", 2)[:2])


def add_line(text, line):
    if text.startswith("#!"):
        first, _, rest = text.partition("\n")
        return first + "\n" + line + "\n" + rest
    return line + "\n" + text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fix", action="store_true", help="add the line where it is missing")
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = parser.parse_args()
    try:
        listed = subprocess.run(["git", "-C", args.root, "ls-files", "-z"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        print("spdx: %s is not a git checkout; nothing to check" % args.root)
        return 77
    missing = []
    for path in sorted(p for p in listed.decode().split("\0") if p):
        line = comment_for(path)
        full = os.path.join(args.root, path)
        if line is None or not os.path.isfile(full):
            continue
        with open(full, encoding="utf-8") as f:
            text = f.read()
        if has_line(text):
            continue
        missing.append(path)
        if args.fix:
            with open(full, "w", encoding="utf-8") as f:
                f.write(add_line(text, line))
    if args.fix:
        print("spdx: added the licence line to %d file(s)" % len(missing))
        return 0
    for path in missing:
        print("spdx: %s has no '%s' line at its top" % (path, TAG))
    if missing:
        print("spdx: run tools/licence/spdx.py --fix to add it")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
