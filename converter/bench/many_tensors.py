#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Times tern-convert on checkpoints whose safetensors header lists many tensors (not a test: it prints numbers).

Each checkpoint is the tiny tern-reference model of tests/fuzz/data/convert_config/ plus N one-element tensors the
importer does not use, laid out in the data segment in the reverse of their name order (so the overlap check's sort
has work to do). The conversion reads and validates every header entry, indexes every name, reports them unused
and writes the model.

  converter/bench/many_tensors.py [--tern-convert build/converter/tern-convert] [N ...]   (default N: 10k 50k 100k 200k)
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "fuzz", "data", "convert_config", "model.safetensors")
CONFIG = os.path.join(ROOT, "tests", "fuzz", "corpus", "convert_config", "ref_dense.json")


def make_checkpoint(directory, n_extra):
    with open(DATA, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + hlen])
    data = blob[8 + hlen :]
    base = len(data)
    for i in range(n_extra):
        at = base + 4 * (n_extra - 1 - i)
        header["extra.%07d" % i] = {"dtype": "F32", "shape": [1], "data_offsets": [at, at + 4]}
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data + struct.pack("<f", 0.5) * n_extra)
    with open(CONFIG, "rb") as src, open(os.path.join(directory, "config.json"), "wb") as dst:
        dst.write(src.read())
    return len(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern-convert", default=os.path.join(ROOT, "build", "converter", "tern-convert"))
    ap.add_argument("counts", nargs="*", type=int, default=[10000, 50000, 100000, 200000])
    args = ap.parse_args()
    print("| tensors | header MiB | tern-convert s | us per tensor |")
    print("|---:|---:|---:|---:|")
    for n in args.counts:
        with tempfile.TemporaryDirectory(prefix="tern-many-") as d:
            header_bytes = make_checkpoint(d, n)
            start = time.perf_counter()
            r = subprocess.run([args.tern_convert, d, "-o", os.path.join(d, "out.tern"), "--quiet"],
                               capture_output=True, text=True)
            seconds = time.perf_counter() - start
            if r.returncode != 0:
                sys.exit("tern-convert failed on %d tensors: %s" % (n, r.stderr.strip()))
            print("| %d | %.1f | %.2f | %.1f |" % (n, header_bytes / 2**20, seconds, 1e6 * seconds / max(n, 1)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
