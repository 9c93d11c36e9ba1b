# SPDX-License-Identifier: MIT
"""Write a random-init Hugging Face Transformer-XL checkpoint (config.json + model.safetensors) for benchmarks.

By default the config is transfo-xl-wt103's (18 layers, d_model 1024, 16 heads x 64, d_inner 4096, vocab 267,735,
cutoffs [20000, 40000, 200000], div_val 4, tie_projs [F, T, T, T], mem_len 1600, clamp_len 1000, same_length,
post-LN): about 1.1 GB of float32. Weights follow HF's init (normal, std init_std; projections proj_init_std;
LayerNorm gains N(1, init_std); biases 0). Tied tensors are stored once, as save_pretrained stores them, together
with HF's inv_freq buffer.

The file is written one tensor at a time (the header first, from the shapes), so the script never holds more than
one tensor in memory. Nothing it writes belongs in the repository.

Usage:
    /usr/bin/python3 tools/bench/make_random_transfo_xl.py OUT_DIR [--config CONFIG.json] [--seed S]
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import transfo_xl_model as txl  # noqa: E402

# transfo-xl-wt103's config.json (HF hub, transformers 4.30), the keys the model reads.
WT103 = {
    "architectures": ["TransfoXLLMHeadModel"], "model_type": "transfo-xl", "adaptive": True, "attn_type": 0,
    "clamp_len": 1000, "cutoffs": [20000, 40000, 200000], "d_embed": 1024, "d_head": 64, "d_inner": 4096,
    "d_model": 1024, "div_val": 4, "dropatt": 0.0, "dropout": 0.1, "eos_token_id": 0, "init": "normal",
    "init_range": 0.01, "init_std": 0.02, "layer_norm_epsilon": 1e-05, "mem_len": 1600, "n_head": 16, "n_layer": 18,
    "pre_lnorm": False, "proj_init_std": 0.01, "same_length": True, "sample_softmax": -1,
    "tie_projs": [False, True, True, True], "tie_word_embeddings": True, "untie_r": True, "vocab_size": 267735,
}


def init(name, shape, rng, c):
    if name.endswith("layer_norm.weight"):
        return (1.0 + c.get("init_std", 0.02) * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if name.endswith(".bias") or name == "crit.cluster_bias":
        return np.zeros(shape, dtype=np.float32)
    std = c.get("proj_init_std", 0.01) if ("emb_projs" in name or "out_projs" in name) else c.get("init_std", 0.02)
    return (std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--config", help="an HF config.json (default: transfo-xl-wt103's)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    config = dict(WT103)
    if args.config:
        with open(args.config) as f:
            config = json.load(f)
    c = txl.read_config(config)
    shapes, tied = txl.parameter_shapes(c)
    names = [n for n in shapes if n not in tied]
    shapes = {n: tuple(shapes[n]) for n in names}
    names.append("transformer.pos_emb.inv_freq")
    shapes["transformer.pos_emb.inv_freq"] = (c["d_model"] // 2,)
    names.sort()

    header, offset = {}, 0
    for n in names:
        size = 4 * int(np.prod(shapes[n]))
        header[n] = {"dtype": "F32", "shape": list(shapes[n]), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * ((-len(hbytes)) % 8)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    rng = np.random.default_rng(args.seed)
    path = os.path.join(args.out, "model.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for n in names:
            if n == "transformer.pos_emb.inv_freq":
                a = txl.inv_freq(c["d_model"]).numpy().astype(np.float32)
            else:
                a = init(n, shapes[n], rng, config)
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
    params = offset // 4
    print(f"wrote {path}: {len(names)} tensors, {params / 1e6:.1f} M parameters, {offset / 2**20:.0f} MiB "
          f"({len(tied)} tied tensors stored once)")


if __name__ == "__main__":
    main()
