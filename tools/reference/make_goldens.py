# SPDX-License-Identifier: MIT
"""Write small random-init reference-family checkpoints and their golden logits.

For every case below, tests/goldens/<name>/ gets:
  config.json                 the model config (some cases rely on the spec's defaults on purpose)
  model.safetensors           random weights (F32, or F16 for tiny_f16); one case is split into
                              model-00001-of-00002.safetensors + model-00002-of-00002.safetensors
  ids.json                    JSON array of random token ids in [0, vocab_size)
  logits.npy                  float32 [n, vocab_size], np.save format

Logits are computed by tools/reference/model.py in float64 from the weights exactly as stored
(i.e. after rounding to F32/F16), then rounded to float32.

Weights are drawn large on purpose (matrices N(0, 0.2), query/key N(0, 0.3) or the case's "qk_std",
embeddings N(0, 0.5), LayerNorm gains U(0.8, 1.2), biases N(0, 0.1)) so attention patterns and
logits are far from uniform and mistakes in the runtime show up as large errors. The script prints, per case, the mean entropy of
the attention rows next to that of uniform attention over the same visible keys.

Case i is seeded with SEED + i, so new cases go at the end of CASES and leave the earlier files
unchanged. The first four use dense attention; the others cover the windowed and sparse kinds
(sliding, chunked, strided and fixed, merged and split heads, and a per-layer mix), routing, and layers whose
heads are split into groups of different kinds.

Usage:
    /usr/bin/python3 tools/reference/make_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from model import ReferenceModel, head_groups, logits_for, visibility_mask  # noqa: E402

SEED = 20240611

CASES = [
    {
        "name": "pre_tied_learned_gelu",
        "n": 1024,
        "dtype": "F32",
        # Minimal config: pre-LN, learned positions, gelu, linear biases, tied head, final norm,
        # intermediate_size 4*d and eps 1e-5 all come from the spec's defaults.
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 1024,
        },
    },
    {
        "name": "post_untied_sinusoidal_relu",
        "n": 512,
        "dtype": "F32",
        "shards": 2,
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "intermediate_size": 128,
            "max_position_embeddings": 512,
            "position_embedding": "sinusoidal",
            "norm_position": "post",
            "final_norm": False,
            "activation": "relu",
            "linear_bias": True,
            "layer_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "lm_head_bias": True,
            "attention": {"kind": "dense"},
        },
    },
    {
        "name": "pre_untied_nobias_gelutanh",
        "n": 256,
        "dtype": "F32",
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "intermediate_size": 96,
            "max_position_embeddings": 256,
            "position_embedding": "learned",
            "norm_position": "pre",
            "final_norm": True,
            "activation": "gelu_tanh",
            "linear_bias": False,
            "layer_norm_eps": 1e-6,
            "tie_word_embeddings": False,
            "lm_head_bias": False,
            "attention": [{"kind": "dense"}, {"kind": "dense"}],
        },
    },
    {
        "name": "tiny_f16",
        "n": 64,
        "dtype": "F16",
        # Tied head that still has a head bias (allowed by the spec).
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 64,
            "position_embedding": "learned",
            "norm_position": "pre",
            "activation": "gelu",
            "tie_word_embeddings": True,
            "lm_head_bias": True,
        },
    },
    # ---- windowed and sparse attention kinds (converter/reference-family.md, "Attention objects").
    # Vocab 64 and d 32-48 keep the files small; n spans many windows, chunks, blocks and strides.
    {
        "name": "sliding_w64",
        "n": 2048,
        "dtype": "F32",
        "qk_std": 0.4,  # d = 32: larger query/key weights keep the attention sharp
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 2048,
            "position_embedding": "sinusoidal",
            "attention": {"kind": "sliding", "window": 64},
        },
    },
    {
        "name": "chunked_c128",
        "n": 2048,
        "dtype": "F32",
        "qk_std": 0.4,  # d = 32: larger query/key weights keep the attention sharp
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 2048,
            "position_embedding": "learned",
            # chunks_after names only future keys, so a causal model ignores it.
            "attention": {"kind": "chunked", "chunk": 128, "chunks_before": 1, "chunks_after": 1},
        },
    },
    {
        "name": "strided_merged",
        "n": 1024,
        "dtype": "F32",
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 48,
            "num_layers": 2,
            "num_heads": 4,
            "intermediate_size": 128,
            "max_position_embeddings": 1024,
            "attention": {"kind": "strided", "stride": 32, "heads": "merged"},
        },
    },
    {
        "name": "strided_split",
        "n": 512,
        "dtype": "F32",
        "qk_std": 0.4,  # d = 32: larger query/key weights keep the attention sharp
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 512,
            "norm_position": "post",
            "attention": {"kind": "strided", "stride": 16, "heads": "split"},
        },
    },
    {
        "name": "fixed_merged",
        "n": 1024,
        "dtype": "F32",
        "qk_std": 0.4,  # d = 32: larger query/key weights keep the attention sharp
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 1024,
            # "heads" left to its default, "merged"
            "attention": {"kind": "fixed", "block": 64, "summary": 8},
        },
    },
    {
        "name": "fixed_split",
        "n": 512,
        "dtype": "F32",
        "qk_std": 0.4,  # d = 32: larger query/key weights keep the attention sharp
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 512,
            "attention": {"kind": "fixed", "block": 32, "summary": 4, "heads": "split"},
        },
    },
    {
        "name": "mixed_layers",
        "n": 300,
        "dtype": "F32",
        "qk_std": 0.4,  # d = 32: larger query/key weights keep the attention sharp
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 3,
            "num_heads": 4,
            "max_position_embeddings": 300,
            "attention": [
                {"kind": "sliding", "window": 16},
                {"kind": "dense"},
                {"kind": "fixed", "block": 16, "summary": 2, "heads": "merged"},
            ],
        },
    },
    {
        "name": "routing_only",
        "n": 400,
        "dtype": "F32",
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 512,
            "attention": {"kind": "routing", "clusters": 6, "window": 48},
        },
    },
    {
        "name": "routing_mixed",
        "n": 700,
        "dtype": "F32",
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 64,
            "num_layers": 3,
            "num_heads": 4,
            "max_position_embeddings": 1024,
            "attention": [
                # two local heads (chunks of 32 and the one before) next to two routing heads
                {"kind": "routing", "clusters": 8, "window": 64, "local_heads": 2, "local_chunk": 32},
                {"kind": "sliding", "window": 32},
                # a window longer than the sequence: every cluster holds every position
                {"kind": "routing", "clusters": 3, "window": 1024, "local_heads": 1, "local_chunk": 100},
            ],
        },
    },
    {
        "name": "groups_strided_fixed",
        "n": 512,
        "dtype": "F32",
        "qk_std": 0.4,
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 64,
            "hidden_size": 48,
            "num_layers": 2,
            "num_heads": 6,
            "max_position_embeddings": 512,
            "attention": [
                # Sparse Transformer heads side by side in one layer, in groups of unequal size
                {"kind": "groups", "groups": [
                    {"num_heads": 2, "kind": "strided", "stride": 16},
                    {"num_heads": 3, "kind": "fixed", "block": 32, "summary": 4},
                    {"num_heads": 1, "kind": "sliding", "window": 24},
                ]},
                {"kind": "groups", "groups": [
                    {"num_heads": 4, "kind": "fixed", "block": 16, "summary": 2, "heads": "split"},
                    {"num_heads": 2, "kind": "strided", "stride": 12, "heads": "split"},
                ]},
            ],
        },
    },
    {
        "name": "groups_routing_sliding",
        "n": 600,
        "dtype": "F32",
        "config": {
            "model_type": "tern-reference",
            "vocab_size": 256,
            "hidden_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "max_position_embeddings": 1024,
            "attention": [
                # Routing Transformer: routing heads beside local sliding-window heads
                {"kind": "groups", "groups": [
                    {"num_heads": 2, "kind": "routing", "clusters": 6, "window": 64},
                    {"num_heads": 2, "kind": "sliding", "window": 32},
                ]},
                {"kind": "groups", "groups": [
                    {"num_heads": 1, "kind": "sliding", "window": 48},
                    {"num_heads": 3, "kind": "routing", "clusters": 4, "window": 128, "local_heads": 1,
                     "local_chunk": 32},
                ]},
            ],
        },
    },
]

# Smallest gap allowed between the last score a routing cluster keeps and the first it drops: float32 rounding in
# the runtime moves scores by ~1e-5, so a closer cut could pick a different member there. A case whose draw has a
# closer cut is redrawn with the next seed of its own sequence (seed + 1000 * attempt).
MIN_ROUTING_GAP = 1e-3


def random_weights(model, rng, qk_std=0.3):
    """dict name -> float64 array with the golden init."""
    out = {}
    for name, p in model.param_map().items():
        shape = tuple(p.shape)
        if name.endswith("norm.weight"):
            a = rng.uniform(0.8, 1.2, shape)
        elif name.endswith(".bias"):
            a = rng.normal(0.0, 0.1, shape)
        elif name == "embed.weight":
            a = rng.normal(0.0, 0.5, shape)
        elif name == "pos_embed.weight":
            a = rng.normal(0.0, 0.3, shape)
        elif name.endswith("centroids"):  # google-research's init: unit-variance rows, layer-normalised
            a = rng.normal(0.0, 1.0, shape)
            a = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-6)
        elif name.endswith(("attn.q.weight", "attn.k.weight")):
            a = rng.normal(0.0, qk_std, shape)  # sharper attention
        else:
            a = rng.normal(0.0, 0.2, shape)
        out[name] = a
    return out


def split_names(names, shards):
    """Split sorted names into `shards` contiguous groups of roughly equal count."""
    names = sorted(names)
    k = -(-len(names) // shards)
    return [names[i * k:(i + 1) * k] for i in range(shards)]


@torch.no_grad()
def attention_entropy(model, ids):
    """Mean entropy (nats) of the attention rows, and of uniform attention over the same visible keys."""
    ents, uniform = [], []

    def hook(mod, inp, out):
        x = inp[0]
        q, k = mod.split_heads(mod.q(x)), mod.split_heads(mod.k(x))
        for a, b, spec in head_groups(mod.spec, mod.num_heads):
            if spec["kind"] == "routing":  # no [n, n] visibility: its clusters depend on the inputs
                continue
            qg, kg = q[a:b], k[a:b]
            H, n, dh = qg.shape
            mask = visibility_mask(spec, H, n)
            p = torch.softmax(((qg @ kg.transpose(-1, -2)) * dh ** -0.5).masked_fill(~mask, float("-inf")), -1)
            ents.append(float(-(p * torch.log(p.clamp_min(1e-300))).sum(-1)[:, 1:].mean()))
            uniform.append(float(torch.log(mask.sum(-1)[:, 1:].double()).mean()))

    hooks = [layer.attn.register_forward_hook(hook) for layer in model.layers]
    logits_for(model, ids)
    for h in hooks:
        h.remove()
    if not ents:
        return float("nan"), float("nan")
    return float(np.mean(ents)), float(np.mean(uniform))


def routing_gap(model, stored, ids):
    """Smallest top-w cut gap of the routing layers (inf when the model has none) for weights `stored`."""
    routing = [layer.attn for layer in model.layers
               if any(g["kind"] == "routing" for _, _, g in head_groups(layer.attn.spec, layer.attn.num_heads))]
    if not routing:
        return float("inf")
    model.load_state(stored)
    for attn in routing:
        attn.gaps = []
    logits_for(model, ids)
    gaps = [g for attn in routing for g in attn.gaps]
    for attn in routing:
        del attn.gaps
    return min(gaps) if gaps else float("inf")


def draw(case, model, seed):
    """Weights (float64, and as stored) and ids of one case; routing cases are redrawn until every cut is clear."""
    np_dtype = {"F32": np.float32, "F16": np.float16}[case["dtype"]]
    for attempt in range(50):
        rng = np.random.default_rng(seed + 1000 * attempt)
        weights = random_weights(model, rng, case.get("qk_std", 0.3))
        stored = {k: v.astype(np_dtype) for k, v in weights.items()}
        ids = rng.integers(0, case["config"]["vocab_size"], size=case["n"]).tolist()
        assert len(set(ids)) > 1
        gap = routing_gap(model, stored, ids)
        if gap >= MIN_ROUTING_GAP:
            return stored, ids, seed + 1000 * attempt, gap
    raise RuntimeError(f"{case['name']}: no draw with routing cuts at least {MIN_ROUTING_GAP} apart")


def make_case(case, out_root, seed):
    name = case["name"]
    cfg = case["config"]
    model = ReferenceModel(cfg).double().eval()
    stored, ids, seed, gap = draw(case, model, seed)
    vocab = cfg["vocab_size"]

    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    meta = {"generator": "tools/reference/make_goldens.py", "case": name, "seed": str(seed)}
    shards = case.get("shards", 1)
    if shards == 1:
        safetensors_io.save(os.path.join(d, "model.safetensors"), stored, metadata=meta)
    else:
        for i, group in enumerate(split_names(stored, shards)):
            fn = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            safetensors_io.save(os.path.join(d, fn), {k: stored[k] for k in group}, metadata=meta)
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump(ids, f)
        f.write("\n")

    # Goldens from the weights as stored (re-read from disk, so the file itself is what is tested).
    model.load_state(safetensors_io.load_dir(d))
    logits = logits_for(model, ids)
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))

    p = torch.softmax(torch.from_numpy(logits), -1)
    ent = float(-(p * torch.log(p)).sum(-1).mean())
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    att, att_uniform = attention_entropy(model, ids)
    print(f"{name:30s} n={case['n']:5d} dtype={case['dtype']} shards={shards} "
          f"logit std {logits.std():.2f}, mean entropy {ent:.2f} nats (uniform {np.log(vocab):.2f}), "
          f"attention entropy {att:.2f} (uniform {att_uniform:.2f}), {size / 1024:.0f} KiB"
          + (f", closest routing cut {gap:.2e}" if gap != float("inf") else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "goldens"))
    ap.add_argument("--only", nargs="+", metavar="NAME", help="write only these cases (same seeds as a full run)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    names = [c["name"] for c in CASES]
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        ap.error(f"unknown case(s) {unknown}; cases are {names}")
    for i, case in enumerate(CASES):
        if args.only is None or case["name"] in args.only:
            make_case(case, args.out, SEED + i)


if __name__ == "__main__":
    main()
