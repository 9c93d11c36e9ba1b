# SPDX-License-Identifier: MIT
"""Turn a facebookresearch/adaptive-span checkpoint (.pt) into a directory tern-convert reads.

That codebase saves torch.save({'iter_no', 'model': state_dict, 'optimizer', 'logger', ...}); the model is
wrapped in DataParallel while training, so its parameter names usually start with "module.". This script writes

    OUT_DIR/model.safetensors   every tensor of the 'model' state dict, as float32, names unchanged
    OUT_DIR/config.json         "model_type": "adaptive-span" with the model's settings (converter/adaptive-span.md)

The checkpoint does not record the settings, so pass the flags the model was trained with, as in that codebase's
experiments/*.sh (their defaults are the codebase's defaults). Training-only flags are accepted and ignored.
Every setting the tensors reveal is checked against them; --vocab-size defaults to the embedding's row count.

    /usr/bin/python3 tools/pt2safetensors.py enwik8.pt out/enwik8 \\
        --nlayers 12 --hid-sz 512 --inner-hid-sz 2048 --nheads 8 --attn-span 8192 --block-sz 512 \\
        --adapt-span --adapt-span-loss 0.0000005 --adapt-span-cache
    ./build/converter/tern-convert out/enwik8 -o enwik8.tern
"""

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import safetensors_io  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="the .pt file saved by the adaptive-span codebase")
    ap.add_argument("out_dir", help="directory to write model.safetensors and config.json into")
    # model_params (the codebase's config.py: flag, dest, default)
    ap.add_argument("--hid-sz", "--hidden-sz", dest="hidden_size", type=int, default=256)
    ap.add_argument("--inner-hid-sz", dest="inner_hidden_size", type=int, default=1024)
    ap.add_argument("--nlayers", dest="nb_layers", type=int, default=8)
    ap.add_argument("--block-sz", dest="block_size", type=int, default=64)
    ap.add_argument("--nheads", dest="nb_heads", type=int, default=2)
    ap.add_argument("--attn-span", dest="attn_span", type=int, default=32)
    # adapt_span_params
    ap.add_argument("--adapt-span", dest="adapt_span_enabled", action="store_true")
    ap.add_argument("--adapt-span-ramp", dest="adapt_span_ramp", type=int, default=32)
    ap.add_argument("--adapt-span-cache", dest="adapt_span_cache", action="store_true")
    # data_params: the codebase derives it from the data
    ap.add_argument("--vocab-size", dest="vocab_size", type=int, default=None)
    args, ignored = ap.parse_known_args(argv)
    if ignored:
        print(f"pt2safetensors: ignoring options that do not change the model: {' '.join(ignored)}", file=sys.stderr)
    return args


def load_state_dict(path):
    import torch

    obj = torch.load(path, map_location="cpu")
    state = obj["model"] if isinstance(obj, dict) and "model" in obj else obj
    if not isinstance(state, dict) or not state:
        raise SystemExit(f"{path}: no 'model' state dict inside")
    out = {}
    for name, t in state.items():
        if not torch.is_tensor(t):
            raise SystemExit(f"{path}: entry {name} of the state dict is not a tensor")
        if not t.is_floating_point():
            raise SystemExit(f"{path}: tensor {name} has dtype {t.dtype}, expected floating point")
        out[name] = t.detach().to(torch.float32).contiguous().numpy()
    return out


def check(cond, message):
    if not cond:
        raise SystemExit(f"pt2safetensors: {message}")


def check_against_flags(state, args):
    """Every setting the tensors show must match the flags; returns the vocabulary size."""
    prefix = "module." if "module.in_emb.weight" in state else ""
    names = [n[len(prefix):] if n.startswith(prefix) else n for n in state]
    unsupported = [n for n in names if "persistent_memory" in n or n.startswith(("in_emb.emb_", "out_emb.out_"))]
    check(not unsupported, f"persistent memory and adaptive input/output are not supported (tensors {unsupported[:3]})")

    def shape(name):
        check(prefix + name in state, f"the checkpoint has no tensor {prefix + name}")
        return tuple(state[prefix + name].shape)

    V, d = shape("in_emb.weight")
    check(d == args.hidden_size, f"in_emb.weight is [{V}, {d}]: pass --hid-sz {d}, not {args.hidden_size}")
    vocab = args.vocab_size if args.vocab_size is not None else V
    check(vocab == V, f"in_emb.weight has {V} rows, but --vocab-size is {vocab}")
    layers = {int(m.group(1)) for m in (re.match(r"layers\.(\d+)\.", n) for n in names) if m}
    check(layers == set(range(args.nb_layers)), f"the checkpoint has {len(layers)} layers: pass --nlayers {len(layers)}")
    check(d % args.nb_heads == 0, f"--nheads {args.nb_heads} does not divide the hidden size {d}")
    want_pe = (1, d // args.nb_heads, args.attn_span)
    check(shape("key_pe") == want_pe, f"key_pe is {list(shape('key_pe'))}, expected {list(want_pe)} from "
                                      f"--hid-sz {d} --nheads {args.nb_heads} --attn-span {args.attn_span}")
    fc1 = shape("layers.0.ff.fc1.weight")
    check(fc1 == (args.inner_hidden_size, d), f"layers.0.ff.fc1.weight is {list(fc1)}: pass --inner-hid-sz {fc1[0]}")
    learned = any(n.endswith("adaptive_span._mask.current_val") for n in names)
    check(learned == args.adapt_span_enabled,
          "the checkpoint has learned spans: pass --adapt-span" if learned else
          "--adapt-span is given, but the checkpoint has no learned spans (adaptive_span._mask.current_val)")
    if learned:
        z = shape("layers.0.attn.attn.adaptive_span._mask.current_val")
        check(z == (args.nb_heads, 1, 1), f"the learned spans are {list(z)}: pass --nheads {z[0]}")
    return vocab


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    state = load_state_dict(args.checkpoint)
    vocab = check_against_flags(state, args)
    config = {
        "model_type": "adaptive-span",
        "vocab_size": vocab,
        "model_params": {
            "hidden_size": args.hidden_size,
            "inner_hidden_size": args.inner_hidden_size,
            "nb_layers": args.nb_layers,
            "block_size": args.block_size,
            "nb_heads": args.nb_heads,
            "attn_span": args.attn_span,
        },
        "adapt_span_params": {
            "adapt_span_enabled": args.adapt_span_enabled,
            "adapt_span_ramp": args.adapt_span_ramp,
            "adapt_span_cache": args.adapt_span_cache,
        },
    }
    os.makedirs(args.out_dir, exist_ok=True)
    safetensors_io.save(os.path.join(args.out_dir, "model.safetensors"), state,
                        metadata={"source": os.path.basename(args.checkpoint), "converted_by": "tools/pt2safetensors.py"})
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    total = sum(int(np.prod(t.shape)) for t in state.values())
    print(f"{args.out_dir}: {len(state)} tensors, {total} parameters, config.json for adaptive-span "
          f"({args.nb_layers} layers, d {args.hidden_size}, attn_span {args.attn_span}, "
          f"{'learned spans' if args.adapt_span_enabled else 'fixed span'})")


if __name__ == "__main__":
    main()
