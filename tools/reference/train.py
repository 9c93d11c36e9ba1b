# SPDX-License-Identifier: MIT
"""Train a small byte-level reference-family model on the King James Bible.

Text source: Debian package `bible-kjv-text` (compressed data file /usr/lib/bible.data), read with
the `bible` program from package `bible-kjv`:

    bible -f Gen1:1-Rev22:21

`-f` turns pretty-printing off, so every verse is one line prefixed with its reference
("Ge1:1 In the beginning ..."). The reference and the following space are stripped; verses are
joined with "\n". The result is 4,137,850 bytes of ASCII. The last `--holdout` fraction (cut at a
verse boundary) is validation text and is never trained on; it is written next to the checkpoint
as heldout.txt.

Run with Debian's OpenBLAS for speed (Debian's torch links the reference BLAS):

    LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp \
        OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \
        nice -n 10 /usr/bin/python3 tools/reference/train.py --time-budget 1680 --out examples/models/kjv-byte

(OMP_WAIT_POLICY=PASSIVE keeps the two threads from spinning against each other when the machine
is shared with other work.)

See tools/reference/README.md for how to unpack OpenBLAS.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from model import ReferenceModel  # noqa: E402

REF_RE = re.compile(rb"^[0-9A-Za-z]+?[0-9]+:[0-9]+ ")


def kjv_text():
    """The whole KJV as bytes, one verse per line, verse references removed."""
    if not shutil.which("bible"):
        sys.exit("the `bible` program is missing: apt-get install -y bible-kjv bible-kjv-text")
    raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, stdout=subprocess.PIPE).stdout
    lines = []
    for line in raw.split(b"\n"):
        line = line.rstrip()
        if not line:
            continue
        m = REF_RE.match(line)
        if not m:
            raise ValueError(f"unexpected line without a verse reference: {line[:60]!r}")
        lines.append(line[m.end():])
    return b"\n".join(lines) + b"\n"


def split_text(text, holdout):
    """Split at the first verse boundary after (1 - holdout) of the text."""
    cut = text.index(b"\n", int(len(text) * (1.0 - holdout))) + 1
    return text[:cut], text[cut:]


def make_config(args):
    return {
        "model_type": "tern-reference",
        "vocab_size": 256,
        "hidden_size": args.d,
        "num_layers": args.layers,
        "num_heads": args.heads,
        "intermediate_size": args.ffn or 4 * args.d,
        "max_position_embeddings": args.ctx,
        "position_embedding": args.positions,
        "norm_position": "pre",
        "final_norm": True,
        "activation": "gelu",
        "linear_bias": True,
        "layer_norm_eps": 1e-5,
        "tie_word_embeddings": True,
        "lm_head_bias": False,
        "attention": {"kind": "sliding", "window": args.window} if args.window else {"kind": "dense"},
    }


def init_weights(model, num_layers):
    """GPT-2 style init: N(0, 0.02), residual output projections scaled by 1/sqrt(2N)."""
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            torch.nn.init.ones_(p)
        elif name.endswith(".bias") or name == "lm_head_bias":
            torch.nn.init.zeros_(p)
        elif name.endswith("attn.out.weight") or name.endswith("mlp.fc2.weight"):
            torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * num_layers))
        else:
            torch.nn.init.normal_(p, 0.0, 0.02)


def lr_at(step, progress, warmup, peak, floor_frac):
    """Linear warmup over `warmup` steps, then cosine decay to floor_frac*peak as progress goes 0 -> 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, max(0.0, progress))
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def evaluate(model, data, ctx, stride=None, max_windows=None, batch=16):
    """Bits per byte of `data` (uint8 array); every byte after the first is scored exactly once.

    stride=None: consecutive windows of ctx predicted bytes; a byte is predicted from the bytes
    before it inside its window (between 1 and ctx bytes of context).
    stride=s: sliding windows advancing by s; the first window scores all its bytes, later ones only
    the bytes not yet scored (so every byte gets at least ctx-s bytes of context).
    """
    model.eval()
    n = len(data)
    stride = stride or ctx
    last = max(0, n - 1 - ctx)  # start of the final window
    starts = list(range(0, last + 1, stride))
    if starts[-1] != last:
        starts.append(last)
    if max_windows:
        starts = starts[:max_windows]
    total_bits, total_count = 0.0, 0
    scored_until = 1  # bytes [1, scored_until) are scored; byte 0 has no prediction
    for i in range(0, len(starts), batch):
        chunk = starts[i:i + batch]
        w = min(ctx, n - 1)
        x = torch.stack([torch.from_numpy(data[s:s + w + 1].astype(np.int64)) for s in chunk])
        logp = torch.log_softmax(model(x[:, :-1]).float(), dim=-1)
        tgt_lp = logp.gather(-1, x[:, 1:, None]).squeeze(-1)  # row j predicts byte s+1+j
        for row, s in enumerate(chunk):
            first = max(s + 1, scored_until)
            end = s + 1 + w
            if first >= end:
                continue
            total_bits += -tgt_lp[row, first - s - 1:].sum().item() / math.log(2)
            total_count += end - first
            scored_until = end
    model.train()
    return total_bits / max(1, total_count)


@torch.no_grad()
def evaluate_streamed(model, data, window, segment=512):
    """Bits per byte of `data` read as one stream from position 0, for a model whose every layer attends to a
    sliding window of `window` keys (with computed positions, or none): what a streaming session with that model
    gives.

    The logits at position i depend only on the ids i - L*(window-1) .. i (L layers, each reaching window-1 back),
    so each segment of `segment` positions is computed exactly from that many ids before it, at their absolute
    positions. Every byte after the first is predicted once, from the logits of the byte before it.
    """
    model.eval()
    n = len(data)
    lead = model.cfg["num_layers"] * (window - 1)
    total_bits = 0.0
    for s in range(0, n - 1, segment):
        e = min(n - 1, s + segment)  # positions s..e-1 predict bytes s+1..e
        a = max(0, s - lead)
        x = torch.from_numpy(data[a:e].astype(np.int64))
        logp = torch.log_softmax(model(x, pos0=a).float(), dim=-1)[s - a:]
        tgt = torch.from_numpy(data[s + 1:e + 1].astype(np.int64))
        total_bits += -logp.gather(-1, tgt[:, None]).sum().item() / math.log(2)
    model.train()
    return total_bits / max(1, n - 1)


def save_checkpoint(model, cfg, out_dir, metadata):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    safetensors_io.save(tmp, model.export_state(np.float16), metadata=metadata)
    os.replace(tmp, os.path.join(out_dir, "model.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="examples/models/kjv-byte")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=768, help="intermediate_size (0: 4*d)")
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32, help="windows per step")
    ap.add_argument("--steps", type=int, default=3000, help="maximum number of steps")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="seconds; if set, the cosine schedule follows max(step/steps, elapsed/budget) and "
                         "training stops when either reaches 1 (for machines with fluctuating load)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--holdout", type=float, default=0.05, help="fraction of the text held out (end of the book)")
    ap.add_argument("--seed", type=int, default=1611)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--save-every", type=int, default=500)
    ap.add_argument("--bench", type=int, default=0, help="only time this many steps, then exit")
    ap.add_argument("--window", type=int, default=0,
                    help="sliding-window attention of this many keys in every layer (0: dense)")
    ap.add_argument("--positions", choices=("learned", "sinusoidal", "none"), default="learned")
    ap.add_argument("--max-offset", type=int, default=0,
                    help="sinusoidal positions: each step's windows start at one random absolute position below "
                         "this, so that the model meets the positions a long stream reaches (0: every window at 0)")
    args = ap.parse_args()
    if args.max_offset and args.positions != "sinusoidal":
        ap.error("--max-offset needs --positions sinusoidal (a learned table ends at --ctx)")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    text = kjv_text()
    train_text, val_text = split_text(text, args.holdout)
    train = np.frombuffer(train_text, dtype=np.uint8)
    val = np.frombuffer(val_text, dtype=np.uint8)
    print(f"text: {len(text)} bytes; train {len(train)}, validation {len(val)} (last {args.holdout:.0%})", flush=True)

    cfg = make_config(args)
    model = ReferenceModel(cfg)
    init_weights(model, args.layers)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"config: {json.dumps(cfg)}\nparameters: {nparams} ({2 * nparams / 1e6:.2f} MB in F16)", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    if not args.bench:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "heldout.txt"), "wb") as f:
            f.write(val_text)

    steps = args.bench or args.steps
    window = args.ctx + 1  # ctx inputs, ctx targets
    t0 = time.time()
    t_log, tok_log = time.time(), 0
    loss_ema = None
    history = []
    steps_done = 0
    for step in range(steps):
        progress = (step - args.warmup) / max(1, steps - args.warmup)
        if args.time_budget and not args.bench:
            progress = max(progress, (time.time() - t0) / args.time_budget)
            if progress >= 1.0:
                print(f"time budget reached after {step} steps", flush=True)
                break
        lr = lr_at(step, progress, args.warmup, args.lr, args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train) - window, size=args.batch)
        xb = torch.from_numpy(np.stack([train[s:s + window] for s in starts]).astype(np.int64))
        pos0 = int(rng.integers(0, args.max_offset)) if args.max_offset else 0
        logits = model(xb[:, :-1], pos0=pos0)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), xb[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps_done = step + 1

        tok_log += args.batch * args.ctx
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        if (step + 1) % args.log_every == 0 or step == 0:
            now = time.time()
            print(f"step {step + 1:5d}/{steps}  loss {loss.item():.4f}  bpb {loss.item() / math.log(2):.3f}  "
                  f"(ema {loss_ema / math.log(2):.3f})  lr {lr:.2e}  {tok_log / (now - t_log):.0f} tok/s  "
                  f"elapsed {now - t0:.0f}s", flush=True)
            t_log, tok_log = now, 0
        if args.bench:
            continue
        if (step + 1) % args.eval_every == 0:
            vb = evaluate(model, val, args.ctx, max_windows=200)
            history.append((step + 1, loss_ema / math.log(2), vb))
            print(f"  eval step {step + 1}: val bpb (first 200 windows) {vb:.3f}", flush=True)
        if (step + 1) % args.save_every == 0:
            save_checkpoint(model, cfg, args.out, {"step": str(step + 1), "status": "training"})
            print(f"  saved checkpoint at step {step + 1}", flush=True)

    if args.bench:
        return
    train_time = time.time() - t0
    # Final numbers on the F16-rounded weights, i.e. exactly what is shipped.
    model.load_state(model.export_state(np.float16))
    val_bpb = evaluate(model, val, args.ctx)
    val_bpb_slide = evaluate(model, val, args.ctx, stride=args.ctx // 2)
    sub = np.random.default_rng(0).integers(0, len(train) - args.ctx, size=200)
    train_eval = np.concatenate([train[s:s + args.ctx] for s in sorted(sub)])
    train_bpb = evaluate(model, train_eval, args.ctx)
    streamed = {}
    if args.window and args.positions != "learned":
        streamed["val_bpb_streamed"] = round(evaluate_streamed(model, val, args.window), 4)
        print(f"validation streamed from position 0: {streamed['val_bpb_streamed']} bits per byte", flush=True)
    summary = {
        "steps": steps_done,
        "batch": args.batch,
        "ctx": args.ctx,
        "bytes_seen": steps_done * args.batch * args.ctx,
        "train_seconds": round(train_time),
        "parameters": nparams,
        "train_bpb_200_windows": round(train_bpb, 4),
        "val_bpb": round(val_bpb, 4),
        "val_bpb_sliding_stride_%d" % (args.ctx // 2): round(val_bpb_slide, 4),
        **streamed,
        "train_bytes": len(train),
        "val_bytes": len(val),
        "history": history,
        "command": " ".join(sys.argv),
    }
    print("final:", json.dumps(summary), flush=True)
    save_checkpoint(model, cfg, args.out, {
        "step": str(steps_done), "status": "final",
        "val_bpb": f"{val_bpb:.4f}", "train_bpb": f"{train_bpb:.4f}",
        "data": "KJV via `bible -f Gen1:1-Rev22:21` (Debian bible-kjv-text), references stripped",
    })
    with open(os.path.join(args.out, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
