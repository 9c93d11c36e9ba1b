# SPDX-License-Identifier: MIT
"""Full-scale Reformer check: a random-init model with google/reformer-enwik8's exact config, converted and run.

Writes (never into the repository) a checkpoint with HF's parameter names and enwik8's config.json (12 layers,
d 1024, 8 heads x 128, ffn 4096, local chunk 128, LSH chunk 256 with 512 buckets and 4 hashes, axial positions
128 x 512, about 150M parameters / 600 MB in float32), converts it with tern-convert (no rotations in the checkpoint:
drawn from --hash-seed), prints the planner's bytes for a few lengths, and scores one sequence of --n random bytes
with tern-bench (load, session creation, one warm-up and --reps timed forwards, peak RSS, per-op profile).

Usage (from the repository root, after building):
    /usr/bin/python3 tools/bench/reformer_enwik8.py [--work /tmp/reformer-enwik8] [--n 65536] [--threads 2]
        [--reps 1] [--plan 4096,16384,65536] [--config CONFIG.json] [--one-forward] [--f16-activations]

--one-forward runs --n random bytes through `tern-run --ids` instead: a single forward (no warm-up), its wall time,
CPU time and the process's peak RSS against the target (the model's weights + 512 MiB), and the sequence's score
in bits per byte from the logits it wrote; on a busy 2-core machine that halves the run.
--f16-activations runs the sessions with activation_storage F16 (the residual streams stored as float16).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
import safetensors_io  # noqa: E402

# google/reformer-enwik8's config.json (transformers 4.30 field set), the fields this family reads.
ENWIK8 = {
    "architectures": ["ReformerModelWithLMHead"],
    "model_type": "reformer",
    "attention_head_size": 128,
    "attn_layers": ["local", "local", "lsh", "local", "local", "local", "lsh", "local", "local", "local", "lsh", "local"],
    "axial_norm_std": 1.0,
    "axial_pos_embds": True,
    "axial_pos_embds_dim": [256, 768],
    "axial_pos_shape": [128, 512],
    "chunk_size_feed_forward": 0,
    "chunk_size_lm_head": 0,
    "eos_token_id": 2,
    "feed_forward_size": 4096,
    "hash_seed": None,
    "hidden_act": "relu",
    "hidden_dropout_prob": 0.05,
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "is_decoder": True,
    "layer_norm_eps": 1e-12,
    "local_attention_probs_dropout_prob": 0.05,
    "local_attn_chunk_length": 128,
    "local_num_chunks_after": 0,
    "local_num_chunks_before": 1,
    "lsh_attention_probs_dropout_prob": 0.0,
    "lsh_attn_chunk_length": 256,
    "lsh_num_chunks_after": 0,
    "lsh_num_chunks_before": 1,
    "max_position_embeddings": 65536,
    "num_attention_heads": 8,
    "num_buckets": 512,
    "num_hashes": 4,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "tie_word_embeddings": False,
    "vocab_size": 258,
}


def make_checkpoint(config, directory, seed=0):
    """HF-style init: matrices and embeddings N(0, initializer_range), axial N(0, axial_norm_std), LayerNorm 1 / 0."""
    rng = np.random.default_rng(seed)
    d, H, dh, F, V = (config[k] for k in ("hidden_size", "num_attention_heads", "attention_head_size",
                                          "feed_forward_size", "vocab_size"))
    std, inner = config["initializer_range"], H * dh

    def normal(shape, s=std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(s)

    t = {"reformer.embeddings.word_embeddings.weight": normal((V, d))}
    (s0, s1), (d0, d1) = config["axial_pos_shape"], config["axial_pos_embds_dim"]
    t["reformer.embeddings.position_embeddings.weights.0"] = normal((s0, 1, d0), config["axial_norm_std"])
    t["reformer.embeddings.position_embeddings.weights.1"] = normal((1, s1, d1), config["axial_norm_std"])
    for i, kind in enumerate(config["attn_layers"]):
        p = f"reformer.encoder.layers.{i}."
        sa = p + "attention.self_attention."
        for ln in ("attention.layer_norm.", "feed_forward.layer_norm."):
            t[p + ln + "weight"] = np.ones(d, np.float32)
            t[p + ln + "bias"] = np.zeros(d, np.float32)
        for name in (["query_key", "value"] if kind == "lsh" else ["query", "key", "value"]):
            t[sa + name + ".weight"] = normal((inner, d))
        t[p + "attention.output.dense.weight"] = normal((d, inner))
        t[p + "feed_forward.dense.dense.weight"] = normal((F, d))
        t[p + "feed_forward.dense.dense.bias"] = np.zeros(F, np.float32)
        t[p + "feed_forward.output.dense.weight"] = normal((d, F))
        t[p + "feed_forward.output.dense.bias"] = np.zeros(d, np.float32)
    t["reformer.encoder.layer_norm.weight"] = np.ones(2 * d, np.float32)
    t["reformer.encoder.layer_norm.bias"] = np.zeros(2 * d, np.float32)
    t["lm_head.decoder.weight"] = normal((V, 2 * d))
    t["lm_head.bias"] = np.zeros(V, np.float32)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    safetensors_io.save(os.path.join(directory, "model.safetensors"), t, metadata={"format": "pt"})
    return sum(a.size for a in t.values())


def score(logits, ids):
    """Prints the bits per byte of predicting each next byte from the logits [n, vocab]."""
    bits = 0.0
    for start in range(0, len(ids) - 1, 4096):
        rows = np.asarray(logits[start:min(start + 4096, len(ids) - 1)], np.float64)
        top = rows.max(axis=1, keepdims=True)
        lse = np.log(np.exp(rows - top).sum(axis=1)) + top[:, 0]
        nxt = np.asarray(ids[start + 1:start + 1 + len(rows)])
        bits += float((lse - rows[np.arange(len(rows)), nxt]).sum()) / np.log(2)
    print(f"score: {bits / (len(ids) - 1):.6f} bits per byte over {len(ids) - 1} predictions", flush=True)


def run(cmd):
    """Runs cmd; prints and returns its wall seconds. Also prints the child's own CPU seconds (user + system) and peak
    RSS from wait4: CPU seconds hardly move when other processes share the cores, wall seconds do."""
    print("$ " + " ".join(cmd), flush=True)
    start = time.time()
    child = subprocess.Popen(cmd)
    _, status, usage = os.wait4(child.pid, 0)
    run.peak_rss = usage.ru_maxrss * 1024
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.time() - start
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, cmd)
    print(f"  wall {seconds:.1f} s, CPU {usage.ru_utime + usage.ru_stime:.1f} s (user {usage.ru_utime:.1f}, "
          f"system {usage.ru_stime:.1f}), peak RSS {usage.ru_maxrss / 2**20:.2f} GiB", flush=True)
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/reformer-enwik8")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--config", help="a config.json to use instead of enwik8's")
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--plan", default="4096,16384,65536")
    ap.add_argument("--one-forward", action="store_true", help="one forward with tern-run --ids (see above)")
    ap.add_argument("--f16-activations", action="store_true", help="activation_storage F16 (see above)")
    args = ap.parse_args()
    storage = ["--f16-activations"] if args.f16_activations else []
    config = ENWIK8
    if args.config:
        with open(args.config) as f:
            config = json.load(f)
    ckpt = os.path.join(args.work, "checkpoint")
    model = os.path.join(args.work, "enwik8.tern")
    if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
        start = time.time()
        params = make_checkpoint(config, ckpt)
        print(f"checkpoint: {params / 1e6:.1f}M parameters, {params * 4 / 2**20:.0f} MiB, written in "
              f"{time.time() - start:.1f} s", flush=True)
    seconds = run([os.path.join(args.build, "converter", "tern-convert"), ckpt, "-o", model])
    print(f"converted in {seconds:.1f} s", flush=True)
    run([os.path.join(args.build, "examples", "tern-run"), model, "--plan", args.plan, "--max-tokens", str(args.n)] +
        storage)
    if args.one_forward:
        data = os.path.join(args.work, f"random{args.n}.json")
        with open(data, "w") as f:
            json.dump(np.random.default_rng(0).integers(0, 256, args.n).tolist(), f)
        logits = os.path.join(args.work, f"logits{args.n}.npy")
        seconds = run([os.path.join(args.build, "examples", "tern-run"), model, "--ids", data, "--threads", args.threads,
                       "--max-tokens", str(args.n), "--logits-out", logits] + storage)
        print(f"one forward of {args.n} tokens (with load and session creation): {seconds:.1f} s", flush=True)
        weights = sum(a.nbytes for a in safetensors_io.load(os.path.join(ckpt, "model.safetensors")).values())
        target = weights + 512 * 2**20
        print(f"peak RSS {run.peak_rss:,} bytes; target: weights {weights:,} + 512 MiB = {target:,} bytes: "
              f"{'within' if run.peak_rss <= target else 'over'} by {abs(target - run.peak_rss):,}", flush=True)
        score(np.load(logits, mmap_mode="r"), json.load(open(data)))
        return
    run([os.path.join(args.build, "examples", "tern-bench"), model, "-p", str(args.n), "-n", "0", "-r", str(args.reps),
         "-t", args.threads, "--profile"])


if __name__ == "__main__":
    main()
