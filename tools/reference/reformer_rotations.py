# SPDX-License-Identifier: MIT
"""Export LSH rotations for a Hugging Face Reformer checkpoint, drawn exactly as HF's code draws them.

HF's LSHSelfAttention._hash_vectors draws fresh rotations from torch's RNG on every forward call:

    if self.hash_seed is not None:
        torch.manual_seed(self.hash_seed)
    random_rotations = torch.randn((num_attention_heads, attention_head_size, num_hashes, rotation_size // 2),
                                   device=vectors.device, dtype=vectors.dtype)

so with config.hash_seed set, every LSH layer of every call on the CPU uses the same float32 tensor, which this
script reproduces with torch.manual_seed(seed); torch.randn(shape). (Without hash_seed HF's rotations are whatever
the global RNG holds, and CUDA draws differ from the CPU's: there is nothing to reproduce.) The tensors are written
as `reformer.encoder.layers.{i}.attention.self_attention.rotations` [heads, head_dim, num_hashes, rotation_size/2]
for each LSH layer i, the names tern-convert and reformer_model.py read.

Usage:
    /usr/bin/python3 tools/reference/reformer_rotations.py CHECKPOINT_DIR [--seed S] [--out FILE]

--seed defaults to config.json's hash_seed; --out defaults to CHECKPOINT_DIR/lsh_rotations.safetensors (tern-convert
reads every *.safetensors file of the directory).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reformer_model as rm  # noqa: E402
import safetensors_io  # noqa: E402


def hf_rotations(config, seed):
    """The rotations HF's _hash_vectors draws on the CPU with hash_seed = seed: {layer name: float32 ndarray}."""
    heads, dh = config["num_attention_heads"], config["attention_head_size"]
    shape = (heads, dh, config["num_hashes"], rm.rotation_size(config["num_buckets"]) // 2)
    out = {}
    for i, kind in enumerate(config["attn_layers"]):
        if kind != "lsh":
            continue
        torch.manual_seed(seed)
        out[rm.ROTATIONS.format(i)] = torch.randn(shape, dtype=torch.float32).numpy()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        config = json.load(f)
    seed = args.seed if args.seed is not None else config.get("hash_seed")
    if seed is None:
        sys.exit("reformer_rotations.py: config.json has no hash_seed; pass --seed")
    tensors = hf_rotations(config, int(seed))
    out = args.out or os.path.join(args.checkpoint, "lsh_rotations.safetensors")
    safetensors_io.save(out, tensors, metadata={"hash_seed": str(seed)})
    print(f"wrote {out}: {len(tensors)} rotation tensors of shape {list(next(iter(tensors.values())).shape)}"
          if tensors else f"wrote {out}: no LSH layers")


if __name__ == "__main__":
    main()
