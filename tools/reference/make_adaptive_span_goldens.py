# SPDX-License-Identifier: MIT
"""Write small random-init facebookresearch/adaptive-span checkpoints and their golden log-probabilities.

Each case builds adaptive_span_model.TransformerSeq (a port of that codebase's model), gives it random weights and
chosen learned spans, saves it as that codebase does (torch.save of {'iter_no', 'model', 'optimizer', 'logger'},
names with the DataParallel "module." prefix or without), converts the .pt with tools/pt2safetensors.py and
writes tests/goldens/adaptive_span_<name>/:

  config.json          written by pt2safetensors.py from the case's training flags
  model.safetensors    written by pt2safetensors.py
  ids.json             JSON array of random token ids in [0, vocab_size)
  logits.npy           float32 [n, vocab_size]: log-probabilities from the codebase's block-by-block evaluation
                       (trainer.py full_eval: blocks of block_size, caches starting as zeros), in float64 from the
                       converted weights, then rounded

The spans (current_val, z) differ per head and per layer, some near 0 and some near 1, so heads reach different
distances and layers trim their memory by different multiples of 64. Case i is seeded with SEED + i.

Usage:
    /usr/bin/python3 tools/reference/make_adaptive_span_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adaptive_span_model as asm  # noqa: E402

SEED = 20240720
HERE = os.path.dirname(os.path.abspath(__file__))
PT2SAFETENSORS = os.path.join(HERE, "..", "pt2safetensors.py")

CASES = [
    {
        # Learned spans with the adaptive cache: the layers trim 128, 64 and 0 of the 192 keys.
        "name": "learned",
        "n": 384,
        "module_prefix": True,
        "flags": ["--hid-sz", "32", "--inner-hid-sz", "64", "--nlayers", "3", "--block-sz", "64", "--nheads", "4",
                  "--attn-span", "192", "--adapt-span", "--adapt-span-ramp", "32", "--adapt-span-cache",
                  "--adapt-span-loss", "0.000002", "--lr", "0.07"],
        "spans": [[0.0, 0.05, 0.12, 0.15], [0.02, 0.4, 0.26, 0.1], [1.0, 0.55, 0.03, 0.7]],
    },
    {
        # Adaptive span disabled: plain attention over the previous 100 tokens, saved without "module.".
        "name": "fixed_span",
        "n": 160,
        "module_prefix": False,
        "flags": ["--hid-sz", "32", "--inner-hid-sz", "48", "--nlayers", "2", "--block-sz", "32", "--nheads", "2",
                  "--attn-span", "100"],
        "spans": None,
    },
    {
        # A block longer than the span, no adaptive cache, a short ramp; one head reaches the whole span.
        "name": "long_block",
        "n": 512,
        "module_prefix": True,
        "flags": ["--hid-sz", "32", "--inner-hid-sz", "64", "--nlayers", "2", "--block-sz", "128", "--nheads", "2",
                  "--attn-span", "64", "--adapt-span", "--adapt-span-ramp", "16"],
        "spans": [[0.1, 0.9], [0.3, 0.0]],
    },
]


def flag_value(flags, name, default=None):
    return type(default)(flags[flags.index(name) + 1]) if name in flags else default


def build_model(case, vocab, rng):
    f = case["flags"]
    adaptive = "--adapt-span" in f
    model = asm.TransformerSeq(
        vocab_size=vocab, hidden_size=flag_value(f, "--hid-sz", 0), inner_hidden_size=flag_value(f, "--inner-hid-sz", 0),
        nb_heads=flag_value(f, "--nheads", 0), nb_layers=flag_value(f, "--nlayers", 0),
        attn_span=flag_value(f, "--attn-span", 0),
        adapt_span_params={"adapt_span_enabled": adaptive, "adapt_span_ramp": flag_value(f, "--adapt-span-ramp", 32),
                           "adapt_span_cache": "--adapt-span-cache" in f})
    # Weights drawn large so that attention and the output distribution are far from uniform.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("current_val"):
                continue
            if name == "key_pe":
                std = 1.0
            elif "norm" in name and name.endswith("weight"):
                p.copy_(torch.from_numpy(rng.uniform(0.8, 1.2, size=p.shape)))
                continue
            elif name.endswith("bias"):
                std = 0.1
            elif "proj_query" in name or "proj_key" in name:
                std = 0.35
            elif name == "in_emb.weight":
                std = 0.5
            else:
                std = 0.25
            p.copy_(torch.from_numpy(rng.normal(0.0, std, size=p.shape)))
        if adaptive:
            for layer, z in zip(model.layers, case["spans"]):
                layer.attn.attn.adaptive_span._mask.current_val.copy_(torch.tensor(z).view(-1, 1, 1))
    return model


class DataParallelLike(torch.nn.Module):
    """Holds the model as `module`, so that state_dict() names carry the "module." prefix as in the codebase."""

    def __init__(self, module):
        super().__init__()
        self.module = module


def save_reference_checkpoint(model, path, wrap):
    holder = DataParallelLike(model) if wrap else model
    optimizer = torch.optim.Adagrad(holder.parameters(), lr=0.07)
    torch.save({"iter_no": 0, "model": holder.state_dict(), "optimizer": optimizer.state_dict(),
                "logger": {}}, path)


def spans_summary(model):
    out = []
    for layer in model.layers:
        a = getattr(layer.attn.attn, "adaptive_span", None)
        if a is None:
            out.append("fixed")
            continue
        z = a._mask.current_val.detach().view(-1).tolist()
        L, R = a._max_span, a._mask._ramp_size
        reach = [max(0, min(L, math.ceil(v * L) + R)) for v in z]
        out.append(f"reach {reach} trim {a.get_trim_len()} cache {a.get_cache_size()}")
    return "; ".join(out)


def make_case(i, case, out_root, vocab=64):
    seed = SEED + i
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = build_model(case, vocab, rng)
    d = os.path.join(out_root, "adaptive_span_" + case["name"])
    if os.path.isdir(d):
        shutil.rmtree(d)
    with tempfile.TemporaryDirectory() as tmp:
        pt = os.path.join(tmp, case["name"] + ".pt")
        save_reference_checkpoint(model, pt, case["module_prefix"])
        subprocess.run([sys.executable, PT2SAFETENSORS, pt, d] + case["flags"], check=True)
    ids = rng.integers(0, vocab, size=case["n"]).tolist()
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump(ids, f)
        f.write("\n")
    # From the converted files, so that what the runtime reads is what is tested.
    converted = asm.load_checkpoint(d, dtype=torch.float64)
    log_probs = asm.evaluate(converted, ids, converted.block_size)
    np.save(os.path.join(d, "logits.npy"), log_probs.astype(np.float32))
    # The float32 model straight from memory agrees (the .pt round trip lost nothing).
    direct = asm.evaluate(model.float(), ids, converted.block_size)
    err = np.linalg.norm(direct - log_probs) / np.linalg.norm(log_probs)
    assert err < 1e-5, f"{case['name']}: float32 model vs converted float64 model: rel err {err:.1e}"
    p = np.exp(log_probs)
    entropy = float(-(p * log_probs).sum(-1).mean())
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"adaptive_span_{case['name']:12s} n={case['n']} block={converted.block_size} "
          f"mean entropy {entropy:.2f} nats (uniform {math.log(vocab):.2f}), {size / 1024:.0f} KiB; {spans_summary(converted)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..", "..", "tests", "goldens")))
    ap.add_argument("--only", nargs="*", help="case names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for i, case in enumerate(CASES):
        if args.only and case["name"] not in args.only:
            continue
        make_case(i, case, args.out)


if __name__ == "__main__":
    main()
