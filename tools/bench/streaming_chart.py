#!/usr/bin/python3
"""Draws the perplexity of each segment of tools/bench/streaming_bench's score runs, one line a policy (slide, shift,
window, sinks), and, where the results hold the soak, its resident set against the tokens generated (Debian's
python3-matplotlib). The results file is tools/bench/streaming/results.json: {"score": {policy: the --json of a
score run}, "soak": the --json of the soak run}.
Usage: streaming_chart.py RESULTS.json OUT.png|OUT.svg"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"slide": ("C0", "-", "slide (refill, keep B/2)"), "shift": ("C1", "--", "shift (re-rotate, keep B/2)"),
         "window": ("C3", ":", "window (recent B only)"), "sinks": ("C2", "-", "sinks (4 + recent B-4)")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("out")
    a = ap.parse_args()
    doc = json.load(open(a.results))
    soak = doc.get("soak")
    fig, axes = plt.subplots(1, 2 if soak else 1, figsize=(12 if soak else 7, 4.2), squeeze=False)
    ax = axes[0][0]
    budget = None
    for policy in ["slide", "shift", "window", "sinks"]:
        run = doc["score"].get(policy)
        if not run:
            continue
        budget = run["budget"]
        color, line, label = STYLE[policy]
        xs = [s["end_token"] / 1e3 for s in run["segments"]]
        ys = [s["perplexity"] for s in run["segments"]]
        ax.plot(xs, ys, line, color=color, label=f"{label}: {run['perplexity']:.2f}", marker=".", markersize=4)
    ax.set_xlabel("tokens streamed (thousands)")
    ax.set_ylabel(f"perplexity of each {doc['score'][next(iter(doc['score']))]['segment']:,}-token segment")
    ax.set_title(f"kjv-llama, cache budget {budget} tokens")
    ax.grid(alpha=0.3)
    ax.legend(title="policy: overall perplexity", fontsize=8)
    if soak:
        ax = axes[0][1]
        xs = [m["tokens"] / 1e3 for m in soak["marks"]]
        ys = [m["rss_bytes"] / 2**20 for m in soak["marks"]]
        ax.plot(xs, ys, "o-", color="C2", label="RSS (VmRSS)")
        base = soak["rss_after_10000_bytes"] / 2**20
        ax.axhline(base * 1.01, color="gray", linestyle=":", label="1% above RSS after 10,000 tokens")
        ax.axhline(soak["peak_rss_bytes"] / 2**20, color="C3", linestyle="--", label="peak (VmHWM)")
        ax.set_ylim(0, max(max(ys), soak["peak_rss_bytes"] / 2**20) * 1.15)
        ax.set_xlabel("tokens generated (thousands)")
        ax.set_ylabel("MiB")
        ax.set_title(f"sinks soak: {soak['sink_tokens']} + {soak['sink_window']}, {soak['tokens']:,} tokens")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
