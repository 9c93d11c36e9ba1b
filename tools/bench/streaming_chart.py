#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Draws the perplexity of each segment of tools/bench/streaming_bench's score runs, one line a policy (slide, shift,
window, sinks), the same relative to slide's (the policies differ by less than the segments do), and, where the
results hold the soaks, their resident set against the tokens generated (Debian's python3-matplotlib). The results
file is tools/bench/streaming/results.json: {"score": {policy: the --json of a score run}, "soak": the --json of the
soak run, "soak_direct": the same with --direct}.
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
    fig, axes = plt.subplots(1, 3 if soak else 2, figsize=(17 if soak else 12, 4.4), squeeze=False)
    ax, ax_rel = axes[0][0], axes[0][1]
    runs = {p: doc["score"][p] for p in ["slide", "shift", "window", "sinks"] if p in doc["score"]}
    base = runs.get("slide")
    for policy, run in runs.items():
        color, line, label = STYLE[policy]
        xs = [s["end_token"] / 1e3 for s in run["segments"]]
        ys = [s["perplexity"] for s in run["segments"]]
        ax.plot(xs, ys, line, color=color, label=f"{label}: {run['perplexity']:.3f}", marker=".", markersize=4)
        if base:
            rel = [100 * (y / b["perplexity"] - 1) for y, b in zip(ys, base["segments"])]
            ax_rel.plot(xs, rel, line, color=color, label=label, marker=".", markersize=4)
    first = next(iter(runs.values()))
    ax.set_xlabel("tokens streamed (thousands)")
    ax.set_ylabel(f"perplexity of each {first['segment']:,}-token segment")
    ax.set_title(f"kjv-llama, cache budget {first['budget']} tokens")
    ax.grid(alpha=0.3)
    ax.legend(title="policy: overall perplexity", fontsize=8)
    ax_rel.set_xlabel("tokens streamed (thousands)")
    ax_rel.set_ylabel("segment perplexity vs slide's (%)")
    ax_rel.set_title("relative to slide")
    ax_rel.grid(alpha=0.3)
    ax_rel.legend(fontsize=8)
    if soak:
        ax = axes[0][2]
        top = 0
        for run, color, label in [(soak, "C2", "tern_generator_next"),
                                  (doc.get("soak_direct"), "C0", "tern_session_append (--direct)")]:
            if not run:
                continue
            xs = [m["tokens"] / 1e3 for m in run["marks"]]
            ys = [m["rss_bytes"] / 2**20 for m in run["marks"]]
            peak = run["peak_rss_bytes"] / 2**20
            ax.plot(xs, ys, "o-", color=color, markersize=4,
                    label=f"{label}: peak {peak:.2f} MiB, {100 * run['peak_over_rss_10000']:+.1f}%")
            ax.axhline(run["rss_after_10000_bytes"] / 2**20 * 1.01, color=color, linestyle=":", linewidth=1)
            top = max(top, max(ys), peak)
        ax.set_ylim(0, top * 1.25)
        ax.set_xlabel("tokens generated (thousands)")
        ax.set_ylabel("resident set, VmRSS (MiB)")
        ax.set_title(f"sinks soak: {soak['sink_tokens']} + {soak['sink_window']}, {soak['tokens']:,} tokens "
                     "(dotted: +1% of RSS at 10,000)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
