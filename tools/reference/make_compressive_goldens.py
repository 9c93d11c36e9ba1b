# SPDX-License-Identifier: MIT
"""Write small random-init reference-family checkpoints with compressive memory and their golden logits.

Each case writes tests/goldens/compressive_<name>/ (reference family, converter/reference-family.md):

  config.json        model_type "tern-reference", every layer {"kind": "compressive", ...}, plus "segment_length":
                     the tokens per call of the evaluation (the converter records it in the file)
  model.safetensors  F32 weights (the conv compression's as layers.{i}.attn.compress.{weight,bias})
  ids.json           random ids in [0, vocab_size), many segments long
  logits.npy         float32 [n, vocab_size]: model.py fed segment_length tokens per call from empty memories
                     (compressive.py), positions continuing, in float64 from the stored weights

Every case runs enough segments that each layer compresses several times (printed). Case i is seeded SEED + i.

Usage:
    /usr/bin/python3 tools/reference/make_compressive_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compressive  # noqa: E402
import safetensors_io  # noqa: E402
from make_goldens import random_weights  # noqa: E402
from model import ReferenceModel, load_checkpoint  # noqa: E402

SEED = 20240901

CASES = [
    {
        # Pre-LN, sinusoidal positions; conv compression at rate 4 and mean at rate 2; segments and mem_len multiples
        # of the rates (the paper's scheme: each full segment evicts exactly one segment of memories).
        "name": "conv_mean",
        "segments": 8,
        "config": {
            "model_type": "tern-reference", "vocab_size": 64, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
            "max_position_embeddings": 1024, "position_embedding": "sinusoidal", "segment_length": 16,
            "attention": [{"kind": "compressive", "mem_len": 16, "cmem_len": 8, "rate": 4, "compression": "conv"},
                          {"kind": "compressive", "mem_len": 12, "cmem_len": 6, "rate": 2, "compression": "mean"}],
        },
    },
    {
        # Post-LN, learned positions, no linear biases (so no q/k/v bias, and the conv keeps its own bias); max and
        # conv compression at rates 3 and 2 with a segment of 7: groups straddle segments and leftovers wait in mem.
        "name": "max_conv_post",
        "segments": 12,
        "config": {
            "model_type": "tern-reference", "vocab_size": 64, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
            "intermediate_size": 64, "max_position_embeddings": 128, "position_embedding": "learned",
            "norm_position": "post", "activation": "relu", "linear_bias": False, "segment_length": 7,
            "attention": [{"kind": "compressive", "mem_len": 10, "cmem_len": 5, "rate": 3, "compression": "max"},
                          {"kind": "compressive", "mem_len": 6, "cmem_len": 4, "rate": 2, "compression": "conv"}],
        },
    },
]


def compressions(spec, n, segment):
    """How many rows each segment boundary compresses, in total, for a layer fed n tokens `segment` at a time."""
    mem, total = 0, 0
    for s in range(0, n, segment):
        mem += min(segment, n - s)
        e = max(0, mem - spec["mem_len"]) // spec["rate"] * spec["rate"]
        mem -= e
        total += e // spec["rate"]
    return total


def make_case(i, case, out_root):
    rng = np.random.default_rng(SEED + i)
    config = case["config"]
    T = config["segment_length"]
    n = case["segments"] * T
    model = ReferenceModel(config).double()
    weights = random_weights(model, rng, qk_std=0.4)
    model.load_state(weights)
    d = os.path.join(out_root, "compressive_" + case["name"])
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    safetensors_io.save(os.path.join(d, "model.safetensors"), {k: v.astype(np.float32) for k, v in weights.items()})
    ids = rng.integers(0, config["vocab_size"], size=n).tolist()
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump(ids, f)
        f.write("\n")

    m = load_checkpoint(d)  # float64 from the stored weights
    logits = compressive.evaluate(m, ids, T)
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
    m32 = load_checkpoint(d, dtype=torch.float32)
    e32 = np.linalg.norm(compressive.evaluate(m32, ids, T) - logits) / np.linalg.norm(logits)
    assert e32 < 1e-5, f"{case['name']}: float32 vs float64 rel err {e32:.1e}"
    # The memories matter: the same ids with memories emptied before every segment differ after the first one.
    alone = np.concatenate([compressive.evaluate(m, ids[s:s + T], T) for s in range(0, n, T)], 0)
    effect = np.linalg.norm(alone[T:] - logits[T:]) / np.linalg.norm(logits[T:])
    counts = [compressions(a, n, T) for a in m.cfg["attention"]]
    print(f"compressive_{case['name']:14s} n={n} segment={T}: compressed rows per layer {counts}; "
          f"memories change later segments by {effect:.3f} relative; float32 rel err {e32:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens")))
    ap.add_argument("--only", nargs="*", help="case names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for i, case in enumerate(CASES):
        if args.only and case["name"] not in args.only:
            continue
        make_case(i, case, args.out)


if __name__ == "__main__":
    main()
