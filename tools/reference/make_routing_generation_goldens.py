# SPDX-License-Identifier: MIT
"""Golden logits of continuing a sequence through routing layers one token at a time (routing_steps.py, the
definition in runtime/src/ops/routing.h) on the routing goldens' weights.

For each case, tests/goldens/<name>/ gets:

  generation.json        {"prompt": P, "ids": [...]}: P prompt ids, then one id per step (random, fed as given)
  generation_logits.npy  float32 [1 + steps, vocab]: the prompt call's last row, then each step's logits

Prompts are longer than the routing windows of some layers, so the steps change clusters' members (a key enters and
evicts the weakest, a query joins only if it beats the w-th best so far) as well as filling them. The ids are drawn
again (next seed) until every top-w cut of the prompt is at least 1e-3 from a tie (make_goldens.py's margin) and
every decision of a step at least 1e-4, so float32 rounding elsewhere cannot flip one.

Usage:
    /usr/bin/python3 tools/reference/make_routing_generation_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from model import ReferenceModel  # noqa: E402
from routing_steps import Stepper  # noqa: E402

SEED = 20261206
MIN_PROMPT_GAP = 1e-3
MIN_STEP_GAP = 1e-4

CASES = [
    ("routing_only", 100, 48),            # window 48: clusters full after the prompt, every step competes
    ("routing_mixed", 150, 48),           # local heads in chunks of 32, window 64; a sliding layer; window 1024
    ("groups_routing_sliding", 200, 48),  # routing groups beside sliding groups; windows 64 and 128
]


def run(model, ids, prompt):
    routing = [b.attn for b in model.layers]
    for attn in routing:
        attn.gaps = []
    s = Stepper(model)
    rows = [s.prompt(ids[:prompt])[-1]]
    prompt_gap = min([g for attn in routing for g in attn.gaps] or [float("inf")])
    for attn in routing:
        del attn.gaps
    for token in ids[prompt:]:
        rows.append(s.step(token))
    return np.stack(rows).astype(np.float32), prompt_gap, s.min_gap


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for k, (name, prompt, steps) in enumerate(CASES):
        if args.only and name not in args.only:
            continue
        d = os.path.join(args.out, name)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        model = ReferenceModel(cfg).double().eval()
        model.load_state(safetensors_io.load_dir(d))
        for attempt in range(200):
            seed = SEED + 1000 * k + attempt
            rng = np.random.default_rng(seed)
            ids = rng.integers(0, cfg["vocab_size"], size=prompt + steps).tolist()
            logits, prompt_gap, step_gap = run(model, ids, prompt)
            if prompt_gap >= MIN_PROMPT_GAP and step_gap >= MIN_STEP_GAP:
                break
        else:
            raise RuntimeError(f"{name}: no ids with clear routing decisions")
        with open(os.path.join(d, "generation.json"), "w") as f:
            json.dump({"prompt": prompt, "ids": ids, "seed": seed}, f)
            f.write("\n")
        np.save(os.path.join(d, "generation_logits.npy"), logits)
        print(f"{name}: prompt {prompt} + {steps} steps, seed {seed} (attempt {attempt + 1}), closest prompt cut "
              f"{prompt_gap:.1e}, closest step decision {step_gap:.1e}")


if __name__ == "__main__":
    main()
