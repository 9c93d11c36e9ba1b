# SPDX-License-Identifier: MIT
"""Golden last hidden states: tests/goldens/hidden_states/<case>/ for some of the hf_<case> checkpoints.

transformers' base models (LlamaModel, GPT2Model, Gemma2Model, ...) return last_hidden_state: the rows the LM head
reads, after the final norm. hf_decoders.py (the float64 forward the hf_* goldens come from, cross-checked against
transformers' modeling code by crosscheck_transformers.py) gives them; each case gets

  ids.json     random ids (seeded), longer than the hf_* prompts: more than one call part (256 rows) where the
               checkpoint's positions allow it
  hidden.npy   float32 [n, hidden_size]: last_hidden_state of ids in one uncached call (float64, rounded)
  pooled.npy   float32 [hidden_size]: its plain mean over the n positions (float64, rounded)

Cases: llama_mha (untied head), gemma2 (tied head followed by the final logit soft-cap, which the hidden state comes
before), gpt2 (LayerNorm ln_f; n_positions 64).

Usage:
    /usr/bin/python3 tools/reference/make_hidden_goldens.py [--goldens tests/goldens]
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_decoders as hd  # noqa: E402

SEED = 20261207
CASES = {"llama_mha": 300, "gemma2": 300, "gpt2": 60}  # case: tokens


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goldens", default=os.path.join(here, "..", "..", "tests", "goldens"))
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    for case, n in CASES.items():
        model = hd.load_checkpoint(os.path.join(args.goldens, "hf_" + case))
        ids = rng.integers(0, model.cfg["vocab_size"], size=n).tolist()
        hidden = model.hidden_states(ids)
        out = os.path.join(args.goldens, "hidden_states", case)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "ids.json"), "w") as f:
            json.dump(ids, f)
        np.save(os.path.join(out, "hidden.npy"), hidden.astype(np.float32))
        np.save(os.path.join(out, "pooled.npy"), hidden.mean(axis=0).astype(np.float32))
        print(f"{case}: {n} tokens, hidden {hidden.shape}, |pooled| {np.linalg.norm(hidden.mean(axis=0)):.4g}")


if __name__ == "__main__":
    main()
