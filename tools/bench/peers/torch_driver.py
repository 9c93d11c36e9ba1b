#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Side-by-side driver for PyTorch eager (tools/bench/peers/run.py): tools/reference/model.py in float32 under
torch.inference_mode, torch.set_num_threads(THREADS). Run it with LD_LIBRARY_PATH pointing at OpenBLAS's libblas.so.3
(Debian's torch links libblas.so.3, the reference BLAS by default); the BLAS actually mapped is reported.
Usage: torch_driver.py CHECKPOINT_DIR IDS.i32 N THREADS WARM LOGITS.f32   (prints one JSON line)"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import model as ref  # noqa: E402


def main():
    ckpt, ids_path, n, threads, warm, out = sys.argv[1:7]
    n, threads, warm = int(n), int(threads), int(warm)
    torch.set_num_threads(threads)
    ids = torch.from_numpy(np.fromfile(ids_path, dtype=np.int32, count=n).astype(np.int64))
    t0 = time.perf_counter()
    m = ref.load_checkpoint(ckpt, dtype=torch.float32)
    t1 = time.perf_counter()
    times = []
    with torch.inference_mode():
        for _ in range(warm + 1):
            a = time.perf_counter()
            logits = m(ids)
            times.append((time.perf_counter() - a) * 1e3)
    logits.numpy().astype(np.float32).tofile(out)
    blas = sorted({line.split()[-1] for line in open("/proc/self/maps") if "blas" in line.split()[-1]})
    print(json.dumps({"load_ms": (t1 - t0) * 1e3, "first_ms": times[0], "warm_ms": times[1:],
                      "torch": torch.__version__, "blas": blas}))


if __name__ == "__main__":
    main()
