# SPDX-License-Identifier: MIT
"""Compare logits written by the runtime against a reference.

The runtime writes logits with
    tern-run MODEL.tern --ids ids.json --logits-out out.npy

Reference, one of:
    --golden DIR        DIR/logits.npy (a directory made by make_goldens.py)
    --expected FILE     any .npy of shape [n, V]
    --checkpoint DIR    run tools/reference/model.py live (float64) on the checkpoint in DIR, with
                        --ids FILE (default DIR/ids.json); a transfo-xl checkpoint runs transfo_xl_model.py,
                        a reformer checkpoint reformer_model.py
                        segment by segment (--segment N)

Prints the max abs error, the relative error ||a-b|| / ||b|| and the top-1 agreement, and exits
with status 1 if the relative error exceeds --tol (default 1e-4) or the shapes differ.

Examples:
    /usr/bin/python3 tools/reference/check_logits.py out.npy --golden tests/goldens/tiny_f16
    /usr/bin/python3 tools/reference/check_logits.py out.npy --checkpoint examples/models/kjv-byte --ids ids.json
"""

import argparse
import json
import os
import sys

import numpy as np


def reference_logits(args):
    if args.golden:
        return np.load(os.path.join(args.golden, "logits.npy")), f"golden {args.golden}"
    if args.expected:
        return np.load(args.expected), args.expected
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch

    from model import load_checkpoint, logits_for

    ids_path = args.ids or os.path.join(args.checkpoint, "ids.json")
    with open(ids_path) as f:
        ids = json.load(f)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        model_type = json.load(f).get("model_type")
    if model_type == "transfo-xl":  # segment by segment with HF's memory (transfo_xl_model.py)
        import transfo_xl_model as txl

        xl = txl.load_checkpoint(args.checkpoint, dtype=torch.float64)
        segment = args.segment or xl.c.get("tgt_len", 128)
        return txl.evaluate(xl, ids, segment), f"transfo_xl_model.py on {args.checkpoint}, segments of {segment}"
    if model_type == "reformer":  # HF's eval forward in float32, rotations from the checkpoint (reformer_model.py)
        import reformer_model as rm

        return rm.load_checkpoint(args.checkpoint).logits(ids), f"reformer_model.py on {args.checkpoint} with {ids_path}"
    model = load_checkpoint(args.checkpoint, dtype=torch.float64)
    return logits_for(model, ids), f"model.py on {args.checkpoint} with {ids_path}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("actual", help="logits .npy written by the runtime")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--golden", metavar="DIR")
    src.add_argument("--expected", metavar="FILE")
    src.add_argument("--checkpoint", metavar="DIR")
    ap.add_argument("--ids", metavar="FILE", help="token ids (JSON array) for --checkpoint")
    ap.add_argument("--segment", type=int, help="transfo-xl checkpoints: tokens per segment (default: config tgt_len, else 128)")
    ap.add_argument("--tol", type=float, default=1e-4, help="maximum relative error (default 1e-4)")
    args = ap.parse_args()

    actual = np.load(args.actual).astype(np.float64)
    expected, what = reference_logits(args)
    expected = np.asarray(expected, dtype=np.float64)

    # Accept a leading batch dimension of 1 from the runtime.
    if actual.ndim == 3 and actual.shape[0] == 1:
        actual = actual[0]
    if actual.shape != expected.shape:
        print(f"shape mismatch: actual {list(actual.shape)}, expected {list(expected.shape)} ({what})")
        sys.exit(1)
    if not np.all(np.isfinite(actual)):
        print(f"actual logits contain {int((~np.isfinite(actual)).sum())} non-finite values")
        sys.exit(1)

    diff = actual - expected
    max_abs = float(np.abs(diff).max())
    rel = float(np.linalg.norm(diff) / np.linalg.norm(expected))
    flat = actual.reshape(-1, actual.shape[-1])
    flat_e = expected.reshape(-1, expected.shape[-1])
    top1 = float(np.mean(flat.argmax(-1) == flat_e.argmax(-1)))
    worst_row = int(np.abs(diff).reshape(flat.shape).max(-1).argmax())
    print(f"reference: {what}")
    print(f"shape {list(actual.shape)}  max abs err {max_abs:.3e}  rel err {rel:.3e}  "
          f"top-1 agreement {top1:.4f}  worst position {worst_row}")
    if rel > args.tol:
        print(f"FAIL: rel err {rel:.3e} > tol {args.tol:.1e}")
        sys.exit(1)
    print(f"PASS (tol {args.tol:.1e})")


if __name__ == "__main__":
    main()
