# SPDX-License-Identifier: MIT
"""Write small random-init Transformer-XL checkpoints in Hugging Face's layout and their golden log-probabilities.

Each case writes tests/goldens/transfo_xl_<name>/:

  config.json        HF's TransfoXLConfig keys (model_type "transfo-xl"), plus "tgt_len": the segment length the
                     golden was evaluated with (a key older HF configs carried)
  model.safetensors  HF state_dict names; tied weights stored once under their word_emb name, as save_pretrained
                     does, unless the case keeps the tied copies too (as a converted pytorch_model.bin has them)
  ids.json           JSON array of random token ids in [0, vocab_size), several segments long
  logits.npy         float32 [n, vocab_size]: TransfoXLLMHeadModel's prediction_scores (log-probabilities), the
                     ids fed tgt_len per call with the memory carried from HF's init_mems (mem_len zero vectors),
                     computed in float64 by transfo_xl_model.py from the stored weights, then rounded

Weights are drawn large (see draw()) so that attention and the output distribution are far from uniform; the script
prints the mean entropy of the output next to that of the uniform distribution. Case i is seeded with SEED + i.

Usage:
    /usr/bin/python3 tools/reference/make_transfo_xl_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import math
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import transfo_xl_model as txl  # noqa: E402

SEED = 20240801

CASES = [
    {
        # Adaptive input and softmax: div_val 2, three cutoffs, tie_projs mixed; clamp_len below the longest distance;
        # same_length; post-LN; per-layer biases; the inv_freq buffer in the file.
        "name": "adaptive",
        "segments": 5,
        "config": {"vocab_size": 250, "cutoffs": [30, 80, 160], "d_model": 32, "d_embed": 32, "n_head": 4, "d_head": 8,
                   "d_inner": 64, "div_val": 2, "pre_lnorm": False, "n_layer": 2, "mem_len": 24, "tgt_len": 16,
                   "clamp_len": 20, "same_length": True, "untie_r": True, "tie_projs": [False, True, False, True],
                   "tie_word_embeddings": True},
        "inv_freq": True,
        "tied_copies": False,
    },
    {
        # No adaptivity: div_val 1, no cutoffs, d_embed = d_model (no projections); pre-LN; biases shared by the
        # layers (untie_r false); no clamp; not same_length; n_head * d_head != d_model.
        "name": "plain",
        "segments": 4,
        "config": {"vocab_size": 96, "cutoffs": [], "d_model": 32, "d_embed": 32, "n_head": 2, "d_head": 12,
                   "d_inner": 48, "div_val": 1, "pre_lnorm": True, "n_layer": 3, "mem_len": 20, "tgt_len": 12,
                   "clamp_len": 0, "same_length": False, "untie_r": False, "tie_projs": [False],
                   "tie_word_embeddings": True},
        "inv_freq": False,
        "tied_copies": False,
    },
    {
        # div_val 1 with cutoffs: one embedding table, a softmax whose clusters are row ranges of one output layer;
        # d_embed != d_model so every cluster has a projection (one tied to emb_projs.0); untied output layer;
        # memory shorter than a segment; tied copies kept in the file.
        "name": "div1_proj",
        "segments": 4,
        "config": {"vocab_size": 120, "cutoffs": [40, 90], "d_model": 32, "d_embed": 24, "n_head": 4, "d_head": 8,
                   "d_inner": 64, "div_val": 1, "pre_lnorm": False, "n_layer": 2, "mem_len": 8, "tgt_len": 12,
                   "clamp_len": 10, "same_length": True, "untie_r": True, "tie_projs": [False, True, False],
                   "tie_word_embeddings": False},
        "inv_freq": True,
        "tied_copies": True,
    },
]


def hf_config(case):
    """A config.json as HF's TransfoXLConfig.to_dict() writes it, with the case's values."""
    c = dict(case["config"])
    config = {
        "architectures": ["TransfoXLLMHeadModel"], "model_type": "transfo-xl", "adaptive": True, "attn_type": 0,
        "d_embed": c["d_embed"], "d_head": c["d_head"], "d_inner": c["d_inner"], "d_model": c["d_model"],
        "div_val": c["div_val"], "dropatt": 0.0, "dropout": 0.1, "eos_token_id": 0, "init": "normal",
        "init_range": 0.01, "init_std": 0.02, "layer_norm_epsilon": 1e-5, "proj_init_std": 0.01,
        "sample_softmax": -1, "transformers_version": "4.30.2",
    }
    config.update(c)
    return dict(sorted(config.items()))


def draw(name, shape, rng):
    """Random weights, large enough that attention and the softmax are far from uniform."""
    if name.endswith("layer_norm.weight"):
        return rng.uniform(0.8, 1.2, size=shape)
    if "layer_norm.bias" in name or "CoreNet" in name and name.endswith("bias"):
        return rng.normal(0.0, 0.1, size=shape)
    if "emb_layers" in name:
        return rng.normal(0.0, 0.25, size=shape)
    if "emb_projs" in name or "out_projs" in name:
        return rng.normal(0.0, 1.0 / math.sqrt(shape[1]) if len(shape) == 2 else 0.2, size=shape)
    if "r_w_bias" in name or "r_r_bias" in name:
        return rng.normal(0.0, 0.3, size=shape)
    if "cluster" in name:
        return rng.normal(0.0, 0.5, size=shape)
    if name.startswith("crit.out_layers"):
        return rng.normal(0.0, 0.3, size=shape)
    if "qkv_net" in name or "r_net" in name:
        return rng.normal(0.0, 0.25, size=shape)
    return rng.normal(0.0, 0.2, size=shape)


def make_case(i, case, out_root):
    rng = np.random.default_rng(SEED + i)
    config = hf_config(case)
    c = txl.read_config(config)
    shapes, tied = txl.parameter_shapes(c)
    stored = {}
    for name, shape in shapes.items():
        if name not in tied:
            stored[name] = draw(name, shape, rng).astype(np.float32)
    if case["tied_copies"]:
        for name, source in tied.items():
            stored[name] = stored[source].copy()
    if case["inv_freq"]:
        stored["transformer.pos_emb.inv_freq"] = txl.inv_freq(c["d_model"]).numpy().astype(np.float32)

    d = os.path.join(out_root, "transfo_xl_" + case["name"])
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    safetensors_io.save(os.path.join(d, "model.safetensors"), stored, metadata={"format": "pt"})
    n = case["segments"] * c["tgt_len"]
    ids = rng.integers(0, c["vocab_size"], size=n).tolist()
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump(ids, f)
        f.write("\n")

    # From the files, so that what the runtime reads is what is tested.
    model = txl.load_checkpoint(d, dtype=torch.float64)
    log_probs = txl.evaluate(model, ids, c["tgt_len"])
    np.save(os.path.join(d, "logits.npy"), log_probs.astype(np.float32))
    # The memory matters: without it (every segment on its own) the later segments differ.
    alone = np.concatenate([txl.evaluate(model, ids[s:s + c["tgt_len"]], c["tgt_len"])
                            for s in range(0, n, c["tgt_len"])], 0)
    t = c["tgt_len"]
    mem_effect = np.linalg.norm(alone[t:] - log_probs[t:]) / np.linalg.norm(log_probs[t:])
    # Probabilities sum to one in every row.
    assert np.allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-9)
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"transfo_xl_{case['name']:10s} n={n} tgt_len={t} mem_len={c['mem_len']} V={c['vocab_size']} "
          f"mean entropy {txl.mean_entropy(log_probs):.2f} nats (uniform {math.log(c['vocab_size']):.2f}); "
          f"segments without memory differ by {mem_effect:.3f} relative; {size / 1024:.0f} KiB")


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
