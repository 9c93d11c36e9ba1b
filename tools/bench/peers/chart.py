#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Draws time and peak memory against sequence length from the JSON of tools/bench/peers.sh: every runtime on the
dense model, and Tern on the same weights with sliding-window attention; and, where the JSON has them, generation
tokens/s against the tokens already in the cache (Debian's python3-matplotlib).
Usage: chart.py PEERS.json OUT.png|OUT.svg [--threads T]"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from run import describe  # noqa: E402  (run.py beside this file)

LABEL = {"tern": "Tern (dense)", "ort": "ONNX Runtime", "llama-fa": "llama.cpp, flash attention",
         "llama": "llama.cpp", "torch": "PyTorch eager", "tern-windowed": "Tern (sliding window)",
         "tern-f16kv": "Tern (F16 KV)"}
STYLE = {"tern": ("C0", "o-"), "ort": ("C1", "s--"), "llama-fa": ("C2", "^--"), "llama": ("C4", "v:"),
         "torch": ("C3", "d:"), "tern-windowed": ("C0", "*-"), "tern-f16kv": ("C5", "o--")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=0, help="thread count to draw (default: the one measured at the most lengths)")
    a = ap.parse_args()
    doc = json.load(open(a.json))
    rows = [r for r in doc["dense"] + doc["windowed"] if r["rc"] == 0]
    counts = {}
    for r in rows:
        counts[r["threads"]] = counts.get(r["threads"], 0) + 1
    t = a.threads or max(counts, key=lambda k: (counts[k], -k))  # the thread count measured at the most lengths
    decode = [r for r in doc.get("decode", []) if r["rc"] == 0 and r["threads"] == t]
    fig, axes = plt.subplots(1, 3 if decode else 2, figsize=(15 if decode else 10, 4.2))
    ax_t, ax_m = axes[0], axes[1]
    for rt in ["tern", "ort", "llama-fa", "llama", "torch", "tern-windowed"]:
        pts = sorted((r["n"], r["steady_ms"] / 1e3, r["peak_rss_bytes"] / 2**30) for r in rows
                     if r["runtime"] == rt and r["threads"] == t)
        if not pts:
            continue
        color, style = STYLE[rt]
        ns = [p[0] for p in pts]
        ax_t.plot(ns, [p[1] for p in pts], style, color=color, label=LABEL[rt])
        ax_m.plot(ns, [p[2] for p in pts], style, color=color, label=LABEL[rt])
    budget = doc["budget_bytes"] / 2**30
    ax_m.axhline(budget, color="grey", lw=0.8)
    ax_m.text(0.02, budget * 1.08, f"{budget:.0f} GiB budget", color="grey", fontsize=8,
              transform=ax_m.get_yaxis_transform())
    for ax, title, unit in ((ax_t, "forward time (steady state)", "seconds"), (ax_m, "peak RSS of the process", "GiB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (tokens, one forward)")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", lw=0.3)
    ax_t.legend(fontsize=8)
    if decode:
        ax_d = axes[2]
        for rt in ["tern", "tern-f16kv", "llama-fa", "llama"]:
            pts = sorted((r["depth"], r["tokens_per_s"]) for r in decode if r["runtime"] == rt)
            if pts:
                color, style = STYLE[rt]
                ax_d.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, label=LABEL[rt])
        ax_d.set_xlabel("tokens in the cache before generating (D)")
        ax_d.set_ylabel("tokens/s")
        ax_d.set_ylim(bottom=0)
        ax_d.set_title(f"generation, tg{doc['decode_tokens']}@dD (one token per call)", fontsize=10)
        ax_d.grid(True, lw=0.3)
        ax_d.legend(fontsize=8)
    m = doc["model"]
    window = doc.get("windowed_attention")
    fig.suptitle(f"{describe(m, short=True)}, F32, {t} thread(s)"
                 + (f"; sliding window {window['window']}" if window else ""), fontsize=10)
    fig.subplots_adjust(left=0.05 if decode else 0.07, right=0.98, bottom=0.13, top=0.86, wspace=0.25)
    fig.savefig(a.out, dpi=90)


if __name__ == "__main__":
    main()
