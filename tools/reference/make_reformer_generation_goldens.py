# SPDX-License-Identifier: MIT
"""Golden logits of Hugging Face Reformer's cached generation (reformer_cached.py) on the Reformer goldens' weights.

For each case, tests/goldens/reformer_<name>/ gets:

  generation.json        {"prompt": P, "ids": [...]}: P prompt ids, then one id per step (random, fed as given, so
                         each step's computation is fixed whatever a sampler would pick)
  generation_logits.npy  float32 [1 + steps, vocab]: the prompt call's last row, then each step's logits

The ids are drawn again (next seed) until no bucket decision of the prompt or of any step is within a relative 1e-5
of a tie (the margin make_reformer_goldens.py keeps), so float32 rounding elsewhere cannot flip one.

Usage:
    /usr/bin/python3 tools/reference/make_reformer_generation_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reformer_cached as rc  # noqa: E402
import reformer_model as rm  # noqa: E402

SEED = 20261205
MIN_HASH_GAP = 1e-5

# Prompts longer than the LSH chunk and not a multiple of it (so HF pads them and counts the padding bucket), and one
# shorter than the chunk (its steps attend to every cached position until the sequence reaches a chunk, then hash).
CASES = [
    ("mixed_factorized", 75, 48),   # chunk 32 (local 16): 75 -> 96 padded; factorised buckets, one round
    ("hashes_int", 45, 48),         # chunk 16, two before, four rounds: padded 48, the padding bucket in the offsets
    ("learned_positions", 70, 48),  # chunk 32 (local 16), two rounds, learned positions, byte vocabulary
    ("wrapping_rounds", 37, 48),    # chunk 16, eight rounds, two before: windows wrap over a short sequence
    ("short_unchunked", 40, 48),    # chunk 64: unchunked prompt, full attention until 64 tokens, then hashed
]


def run(model, ids, prompt):
    gen = rc.CachedReformer(model)
    for _, attn in model.layers:
        if isinstance(attn, rm.LSHAttention):
            attn.hash_margins = []
    rows = [gen.prompt(ids[:prompt])[-1]]
    for token in ids[prompt:]:
        rows.append(gen.step(token))
    return np.stack(rows).astype(np.float32), model.hash_margin()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, prompt, steps in CASES:
        if args.only and name not in args.only:
            continue
        directory = os.path.join(args.out, "reformer_" + name)
        model = rm.load_checkpoint(directory)
        for attempt in range(50):
            rng = np.random.default_rng(SEED + attempt)
            ids = [int(x) for x in rng.integers(0, model.cfg.vocab_size, prompt + steps)]
            logits, margin = run(model, ids, prompt)
            if margin >= MIN_HASH_GAP:
                break
        else:
            sys.exit(f"{name}: no ids without a near-tie bucket decision in 50 draws")
        with open(os.path.join(directory, "generation.json"), "w") as f:
            json.dump({"prompt": prompt, "ids": ids}, f)
            f.write("\n")
        np.save(os.path.join(directory, "generation_logits.npy"), logits)
        print(f"{name}: prompt {prompt}, {steps} steps, smallest hash margin {margin:.2e} (draw {attempt})")


if __name__ == "__main__":
    main()
