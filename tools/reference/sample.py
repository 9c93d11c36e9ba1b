# SPDX-License-Identifier: MIT
"""Generate text from (or score text with) a byte-level reference-family checkpoint.

    /usr/bin/python3 tools/reference/sample.py examples/models/kjv-byte --prompt "And God said" --bytes 400
    /usr/bin/python3 tools/reference/sample.py examples/models/kjv-byte --score examples/models/kjv-byte/heldout.txt
    /usr/bin/python3 tools/reference/sample.py examples/models/kjv-stream --score heldout.txt --streamed

Generation samples byte by byte (temperature, optional top-k, seeded); once the text exceeds
max_position_embeddings only the most recent bytes are fed. Scoring reports bits per byte over
non-overlapping windows of max_position_embeddings bytes (the same measure train.py reports as
val_bpb) and, with --stride, over sliding windows. --streamed scores the file as one stream from
position 0, every byte after the first predicted once, as a streaming session of a model with
sliding-window attention and sinusoidal or no positions sees it (`long_document`, `tern-run --score
--segment N`); the same number train.py reports as val_bpb_streamed.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import load_checkpoint  # noqa: E402


@torch.no_grad()
def generate(model, prompt, n_bytes, temperature=0.8, top_k=0, seed=0):
    """Continue `prompt` (bytes) by `n_bytes` bytes; returns the new bytes."""
    g = torch.Generator().manual_seed(seed)
    ctx = model.cfg["max_position_embeddings"]
    ids = list(prompt) or [ord("\n")]
    out = []
    for _ in range(n_bytes):
        x = torch.tensor(ids[-ctx:], dtype=torch.long)
        logits = model(x)[-1].double()
        if temperature <= 0:
            nxt = int(logits.argmax())
        else:
            logits = logits / temperature
            if top_k:
                kth = torch.topk(logits, top_k).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g))
        nxt = min(nxt, 255)
        ids.append(nxt)
        out.append(nxt)
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--prompt", default="In the beginning")
    ap.add_argument("--bytes", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--score", metavar="FILE", help="report bits per byte of FILE instead of sampling")
    ap.add_argument("--stride", type=int, default=0, help="with --score: also sliding windows with this stride")
    ap.add_argument("--streamed", action="store_true",
                    help="with --score: the file as one stream (sliding-window layers, no learned positions)")
    ap.add_argument("--max-bytes", type=int, default=0, help="with --score: only the first N bytes of FILE")
    ap.add_argument("--write-json", metavar="OUT",
                    help="with --score --streamed: also write {file, bytes, bits_per_byte, command} to OUT")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    model = load_checkpoint(args.checkpoint, dtype=torch.float32)
    if args.score:
        from train import evaluate

        data = np.frombuffer(open(args.score, "rb").read(), dtype=np.uint8)
        if args.max_bytes:
            data = data[:args.max_bytes]
        if args.streamed:
            from train import evaluate_streamed

            kinds = model.cfg["attention"]
            kinds = kinds if isinstance(kinds, list) else [kinds]
            if any(k["kind"] != "sliding" for k in kinds) or model.cfg["position_embedding"] == "learned":
                sys.exit("--streamed needs sliding-window attention in every layer and sinusoidal or no positions")
            window = max(k["window"] for k in kinds)
            bpb = evaluate_streamed(model, data, window)
            print(f"{args.score}: {len(data)} bytes, {bpb:.4f} bits/byte (one stream from position 0)")
            if args.write_json:
                import json

                with open(args.write_json, "w") as f:
                    json.dump({"file": os.path.basename(args.score), "bytes": len(data), "bits_per_byte": bpb,
                               "command": " ".join(["tools/reference/sample.py"] + sys.argv[1:])}, f, indent=2)
                    f.write("\n")
            return
        ctx = model.cfg["max_position_embeddings"]
        print(f"{args.score}: {len(data)} bytes, {evaluate(model, data, ctx):.4f} bits/byte "
              f"(non-overlapping {ctx}-byte windows)")
        if args.stride:
            print(f"{evaluate(model, data, ctx, stride=args.stride):.4f} bits/byte (sliding, stride {args.stride})")
        return
    prompt = args.prompt.encode("utf-8")
    text = generate(model, prompt, args.bytes, args.temperature, args.top_k, args.seed)
    sys.stdout.write((prompt + text).decode("utf-8", errors="replace") + "\n")


if __name__ == "__main__":
    main()
