#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Compares the logits of an aarch64 build with an x86-64 build's, on every golden and the shipped models.

    tools/cross/compare_logits.py [--x86 build] [--arm build-aarch64] [--tolerance 1e-5] [--only NAME ...]

Each model is converted once by the x86 tern-convert; both builds' tern-run then run the same ids (the golden's
ids.json, or 256 seeded random ids below 256 for examples/models/kjv-byte (its context) and kjv-llama) as tern-run --ids runs them (one
call, or the model's evaluation segment where its file records one) on one thread, the aarch64 one under
qemu-aarch64 -L <its sysroot> (from its CMake cache), and write every position's logits with
--logits-out. A model passes when max|arm - x86| <= tolerance * max|x86|: relative to the logits' scale, since an
element-wise ratio is meaningless where a logit is near zero. Prints one line per model and exits 1 when any fails
or cannot run. The standard library only: no numpy on the machine it runs on.
"""
import argparse
import json
import os
import random
import shlex
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_npy_f32(path):
    """A float32 .npy (C order) as (shape, flat list)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    header_len = struct.unpack("<H" if major == 1 else "<I", data[8:10] if major == 1 else data[8:12])[0]
    start = (10 if major == 1 else 12) + header_len
    header = data[start - header_len:start].decode("latin1")
    if "'<f4'" not in header or "'fortran_order': False" not in header:
        raise ValueError(f"{path}: not C-order float32 ({header.strip()})")
    shape = tuple(int(x) for x in header.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
    count = len(data[start:]) // 4
    return shape, struct.unpack(f"<{count}f", data[start:start + 4 * count])


def emulator(arm_build):
    """qemu-aarch64 -L <sysroot>, as the toolchain file (cmake/toolchains/aarch64-linux-gnu.cmake) found them."""
    cache = os.path.join(arm_build, "CMakeCache.txt")
    values = {}
    with open(cache) as f:
        for line in f:
            key, _, value = line.partition("=")
            values[key.split(":")[0]] = value.strip()
    qemu, sysroot = values.get("TERN_QEMU_AARCH64", ""), values.get("TERN_SYSROOT", "")
    if not qemu or qemu.endswith("NOTFOUND") or not sysroot:
        sys.exit(f"compare_logits: {cache} names no TERN_QEMU_AARCH64 and TERN_SYSROOT: is {arm_build} a build of "
                 "tools/cross/aarch64.sh, with qemu-user installed?")
    return [qemu, "-L", sysroot]


def run(cmd, what):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {shlex.join(cmd)}\n{done.stdout.strip()}")


def cases(only):
    """(name, checkpoint directory, ids file or None) for every golden and the shipped models."""
    goldens = os.path.join(ROOT, "tests", "goldens")
    found = [(n, os.path.join(goldens, n), os.path.join(goldens, n, "ids.json"))
             for n in sorted(os.listdir(goldens)) if os.path.isfile(os.path.join(goldens, n, "ids.json"))]
    found.append(("kjv-byte", os.path.join(ROOT, "examples", "models", "kjv-byte"), None))
    found.append(("kjv-llama", os.path.join(ROOT, "examples", "models", "kjv-llama"), None))
    return [c for c in found if not only or c[0] in only]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--x86", default=os.path.join(ROOT, "build"), help="the x86-64 build directory (default build)")
    ap.add_argument("--arm", default=os.path.join(ROOT, "build-aarch64"),
                    help="the aarch64 build directory (default build-aarch64)")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="max |arm - x86| / max |x86| (default 1e-5)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these cases only (golden names, kjv-byte or kjv-llama)")
    args = ap.parse_args()
    convert = os.path.join(args.x86, "converter", "tern-convert")
    x86_run = os.path.join(args.x86, "examples", "tern-run")
    arm_run = os.path.join(args.arm, "examples", "tern-run")
    for tool in (convert, x86_run, arm_run):
        if not os.access(tool, os.X_OK):
            sys.exit(f"compare_logits: {tool} is not built (build both directories first: see docs/arm64-android.md)")
    launcher = emulator(args.arm)
    todo = cases(args.only)
    if not todo:
        sys.exit(f"compare_logits: no case named {' '.join(args.only)}")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tern-compare-") as tmp:
        for name, checkpoint, ids_path in todo:
            start = time.monotonic()
            model = os.path.join(tmp, name + ".tern")
            try:
                run([convert, checkpoint, "-o", model, "--quiet"], "tern-convert")
                if ids_path is None:
                    rng = random.Random(1)
                    ids_path = os.path.join(tmp, name + "-ids.json")
                    with open(ids_path, "w") as f:
                        json.dump([rng.randrange(256) for _ in range(256)], f)
                with open(ids_path) as f:
                    n = len(json.load(f))
                # --max-tokens n: the models without a context limit (Transformer-XL, compressive) need one.
                common = ["--ids", ids_path, "--threads", "1", "--max-tokens", str(n)]
                outputs = {}
                for arch, cmd in (("x86-64", [x86_run]), ("aarch64", launcher + [arm_run])):
                    outputs[arch] = os.path.join(tmp, f"{name}-{arch}.npy")
                    run(cmd + [model] + common + ["--logits-out", outputs[arch]], f"tern-run ({arch})")
                shape_x, x = read_npy_f32(outputs["x86-64"])
                shape_a, a = read_npy_f32(outputs["aarch64"])
                if shape_x != shape_a:
                    raise RuntimeError(f"shapes differ: x86-64 {shape_x}, aarch64 {shape_a}")
                scale = max(abs(v) for v in x)
                diff = max(abs(p - q) for p, q in zip(a, x))
                rel = diff / scale if scale > 0 else diff
                ok = rel <= args.tolerance
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {name:32s} [{shape_x[0]} x {shape_x[1]}]  max|diff| {diff:.3g}  "
                      f"relative {rel:.3g}  ({time.monotonic() - start:.0f} s)", flush=True)
            except (RuntimeError, ValueError, OSError) as e:
                failed += 1
                print(f"FAIL {name:32s} {e}", flush=True)
    print(f"compare_logits: {len(todo) - failed} of {len(todo)} within {args.tolerance:g} of x86-64's scale")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
