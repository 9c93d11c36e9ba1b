# SPDX-License-Identifier: MIT
"""Write small random-init Hugging Face Reformer checkpoints and their golden logits.

Each case writes tests/goldens/reformer_<name>/:

  config.json          HF ReformerConfig fields as save_pretrained writes them (model_type "reformer")
  model.safetensors    the weights under HF's parameter names, plus the LSH rotations the logits were computed with,
                       `reformer.encoder.layers.{i}.attention.self_attention.rotations` [H, dh, hashes, rot/2]
  ids.json             JSON array of random token ids in [0, vocab_size)
  logits.npy           float32 [n, vocab_size] from reformer_model.py (HF's eval forward, float32)

Rotations: with "hf_seed", drawn as HF draws them on the CPU with config.hash_seed set (reformer_rotations.py: the same
tensor for every LSH layer); with "layer_seeds", layer i's from torch.manual_seed(base + i), so that the layers differ.
Weights are drawn larger than HF's init (matrices N(0, 0.2), embeddings N(0, 0.5), axial N(0, 1), LayerNorm gains
U(0.8, 1.2), biases N(0, 0.1)) so that attention is far from uniform. A seed is kept only if no bucket decision is
within a relative 1e-5 of a tie (reformer_model.py records the gaps), so float32 rounding elsewhere cannot flip one.

Usage:
    /usr/bin/python3 tools/reference/make_reformer_goldens.py [--out tests/goldens] [--only NAME ...]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reformer_model as rm  # noqa: E402
import reformer_rotations  # noqa: E402
import safetensors_io  # noqa: E402

SEED = 20240801
MIN_HASH_GAP = 1e-5

CASES = [
    {
        # Mixed local and LSH layers, factorised buckets [4, 8], one round; 500 tokens padded to the lcm 32.
        # The checkpoint also carries the scalar mask constants and lm_head.decoder.bias some HF versions store.
        "name": "mixed_factorized",
        "n": 500,
        "config": dict(attn_layers=["local", "lsh", "local", "lsh"], hidden_size=64, num_attention_heads=2,
                       attention_head_size=32, feed_forward_size=128, hidden_act="relu", vocab_size=80,
                       local_attn_chunk_length=16, local_num_chunks_before=1, lsh_attn_chunk_length=32,
                       lsh_num_chunks_before=1, num_buckets=[4, 8], num_hashes=1, axial_pos_shape=[16, 64],
                       axial_pos_embds_dim=[16, 48], max_position_embeddings=1024, hash_seed=11),
        "rotations": "hf_seed",
        "extras": True,
    },
    {
        # LSH only, int buckets, four rounds, two chunks before; 1000 tokens padded to 1008.
        "name": "hashes_int",
        "n": 1000,
        "config": dict(attn_layers=["lsh", "lsh", "lsh"], hidden_size=48, num_attention_heads=3,
                       attention_head_size=16, feed_forward_size=96, hidden_act="gelu", vocab_size=64,
                       local_attn_chunk_length=64, local_num_chunks_before=1, lsh_attn_chunk_length=16,
                       lsh_num_chunks_before=2, num_buckets=16, num_hashes=4, axial_pos_shape=[32, 32],
                       axial_pos_embds_dim=[24, 24], max_position_embeddings=1024, hash_seed=None),
        "rotations": "layer_seeds",
        "extras": False,
    },
    {
        # enwik8's layout scaled down: learned (not axial) positions, byte vocabulary, two rounds; 401 -> 416 tokens.
        "name": "learned_positions",
        "n": 401,
        "config": dict(attn_layers=["local", "local", "lsh", "local"], hidden_size=64, num_attention_heads=4,
                       attention_head_size=16, feed_forward_size=128, hidden_act="relu", vocab_size=258,
                       local_attn_chunk_length=16, local_num_chunks_before=1, lsh_attn_chunk_length=32,
                       lsh_num_chunks_before=1, num_buckets=8, num_hashes=2, axial_pos_embds=False,
                       axial_pos_shape=[32, 32], axial_pos_embds_dim=[16, 48], max_position_embeddings=512,
                       hash_seed=5),
        "rotations": "hf_seed",
        "extras": False,
    },
    {
        # 40 tokens padded to 64 (> the local chunk 8): the LSH layer takes HF's unchunked path (64 <= chunk 64),
        # the local layer eight chunks; tanh GELU.
        "name": "short_unchunked",
        "n": 40,
        "config": dict(attn_layers=["local", "lsh"], hidden_size=32, num_attention_heads=2, attention_head_size=16,
                       feed_forward_size=64, hidden_act="gelu_new", vocab_size=50, local_attn_chunk_length=8,
                       local_num_chunks_before=1, lsh_attn_chunk_length=64, lsh_num_chunks_before=1, num_buckets=4,
                       num_hashes=2, axial_pos_shape=[8, 16], axial_pos_embds_dim=[8, 24],
                       max_position_embeddings=128, hash_seed=3),
        "rotations": "hf_seed",
        "extras": False,
    },
    {
        # Eight rounds over a short sequence (40 -> 48 tokens, 3 chunks of 16 per round) with 2 chunks before: windows
        # wrap across rounds and often hold a query's own position more than once, so rows that see only copies of
        # themselves (HF's -1e5 + log k in float32) occur; factorised buckets [2, 4].
        "name": "wrapping_rounds",
        "n": 40,
        "config": dict(attn_layers=["lsh", "local", "lsh"], hidden_size=32, num_attention_heads=2, attention_head_size=16,
                       feed_forward_size=64, hidden_act="relu", vocab_size=40, local_attn_chunk_length=8,
                       local_num_chunks_before=1, lsh_attn_chunk_length=16, lsh_num_chunks_before=2,
                       num_buckets=[2, 4], num_hashes=8, axial_pos_shape=[16, 16], axial_pos_embds_dim=[8, 24],
                       max_position_embeddings=256, hash_seed=None),
        "rotations": "layer_seeds",
        "extras": False,
    },
]


def hf_config(overrides):
    """A config.json as HF's ReformerConfig.save_pretrained writes one (the fields this family reads, and a few
    generic ones)."""
    c = {
        "architectures": ["ReformerModelWithLMHead"],
        "model_type": "reformer",
        "attention_head_size": 64,
        "attn_layers": ["local", "lsh"],
        "axial_norm_std": 1.0,
        "axial_pos_embds": True,
        "axial_pos_shape": [64, 64],
        "axial_pos_embds_dim": [64, 192],
        "chunk_size_feed_forward": 0,
        "chunk_size_lm_head": 0,
        "eos_token_id": 2,
        "feed_forward_size": 512,
        "hash_seed": None,
        "hidden_act": "relu",
        "hidden_dropout_prob": 0.05,
        "hidden_size": 256,
        "initializer_range": 0.02,
        "is_decoder": True,
        "layer_norm_eps": 1e-12,
        "local_attention_probs_dropout_prob": 0.05,
        "local_attn_chunk_length": 64,
        "local_num_chunks_after": 0,
        "local_num_chunks_before": 1,
        "lsh_attention_probs_dropout_prob": 0.0,
        "lsh_attn_chunk_length": 64,
        "lsh_num_chunks_after": 0,
        "lsh_num_chunks_before": 1,
        "max_position_embeddings": 4096,
        "num_attention_heads": 2,
        "num_buckets": None,
        "num_hashes": 1,
        "pad_token_id": 0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.30.2",
        "use_cache": True,
        "vocab_size": 320,
    }
    c.update(overrides)
    c["num_hidden_layers"] = len(c["attn_layers"])
    return c


def random_state(config, gen):
    d, H, dh, F, V = (config[k] for k in ("hidden_size", "num_attention_heads", "attention_head_size",
                                          "feed_forward_size", "vocab_size"))
    inner = H * dh

    def normal(shape, std):
        return (torch.randn(shape, generator=gen) * std).numpy().astype(np.float32)

    def gain(shape):
        return (0.8 + 0.4 * torch.rand(shape, generator=gen)).numpy().astype(np.float32)

    s = {"reformer.embeddings.word_embeddings.weight": normal((V, d), 0.5)}
    if config["axial_pos_embds"]:
        s0, s1 = config["axial_pos_shape"]
        d0, d1 = config["axial_pos_embds_dim"]
        s["reformer.embeddings.position_embeddings.weights.0"] = normal((s0, 1, d0), 1.0)
        s["reformer.embeddings.position_embeddings.weights.1"] = normal((1, s1, d1), 1.0)
    else:
        s["reformer.embeddings.position_embeddings.embedding.weight"] = normal((config["max_position_embeddings"], d), 0.5)
    for i, kind in enumerate(config["attn_layers"]):
        p = f"reformer.encoder.layers.{i}."
        sa = p + "attention.self_attention."
        s[p + "attention.layer_norm.weight"] = gain(d)
        s[p + "attention.layer_norm.bias"] = normal(d, 0.1)
        if kind == "lsh":
            s[sa + "query_key.weight"] = normal((inner, d), 0.2)
        else:
            s[sa + "query.weight"] = normal((inner, d), 0.2)
            s[sa + "key.weight"] = normal((inner, d), 0.2)
        s[sa + "value.weight"] = normal((inner, d), 0.2)
        s[p + "attention.output.dense.weight"] = normal((d, inner), 0.2)
        s[p + "feed_forward.layer_norm.weight"] = gain(d)
        s[p + "feed_forward.layer_norm.bias"] = normal(d, 0.1)
        s[p + "feed_forward.dense.dense.weight"] = normal((F, d), 0.2)
        s[p + "feed_forward.dense.dense.bias"] = normal(F, 0.1)
        s[p + "feed_forward.output.dense.weight"] = normal((d, F), 0.2)
        s[p + "feed_forward.output.dense.bias"] = normal(d, 0.1)
    s["reformer.encoder.layer_norm.weight"] = gain(2 * d)
    s["reformer.encoder.layer_norm.bias"] = normal(2 * d, 0.1)
    s["lm_head.decoder.weight"] = normal((V, 2 * d), 0.2)
    s["lm_head.bias"] = normal(V, 0.1)
    return s


def rotations_for(case, config, seed):
    if case["rotations"] == "hf_seed":
        return reformer_rotations.hf_rotations(config, config["hash_seed"])
    shape = (config["num_attention_heads"], config["attention_head_size"], config["num_hashes"],
             rm.rotation_size(config["num_buckets"]) // 2)
    out = {}
    for i, kind in enumerate(config["attn_layers"]):
        if kind == "lsh":
            torch.manual_seed(seed + i)
            out[rm.ROTATIONS.format(i)] = torch.randn(shape, dtype=torch.float32).numpy()
    return out


def extras(config):
    """Buffers some HF versions save: the scalar mask constants, and lm_head.decoder.bias (tied to lm_head.bias)."""
    s = {}
    for i, kind in enumerate(config["attn_layers"]):
        sa = f"reformer.encoder.layers.{i}.attention.self_attention."
        s[sa + "mask_value_float16"] = np.array(-1e4, dtype=np.float32)
        s[sa + "mask_value_float32"] = np.array(-1e9, dtype=np.float32)
        if kind == "lsh":
            s[sa + "self_mask_value_float16"] = np.array(-1e3, dtype=np.float32)
            s[sa + "self_mask_value_float32"] = np.array(-1e5, dtype=np.float32)
    return s


def make_case(case, index, out_dir):
    config = hf_config(case["config"])
    for attempt in range(50):
        seed = SEED + 1000 * index + attempt
        gen = torch.Generator().manual_seed(seed)
        state = random_state(config, gen)
        state.update(rotations_for(case, config, seed))
        ids = torch.randint(0, config["vocab_size"], (case["n"],), generator=gen).tolist()
        model = rm.ReformerLM(config, state)
        logits = model.logits(ids)
        gap = model.hash_margin()
        if gap >= MIN_HASH_GAP:
            break
        print(f"  {case['name']}: seed {seed} has a bucket decision within {gap:.2e} of a tie; next seed")
    else:
        raise SystemExit(f"{case['name']}: no seed without near-ties")
    if case["extras"]:
        state.update(extras(config))
        state["lm_head.decoder.bias"] = state["lm_head.bias"].copy()
    d = os.path.join(out_dir, "reformer_" + case["name"])
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    safetensors_io.save(os.path.join(d, "model.safetensors"), state, metadata={"format": "pt"})
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump(ids, f)
    np.save(os.path.join(d, "logits.npy"), logits)
    # The check the C++ test repeats: the checkpoint as written gives the same logits.
    again = rm.load_checkpoint(d).logits(ids)
    assert np.array_equal(again, logits)
    lcm, min_chunk = rm.Config(config).lcm_chunk_length(), rm.Config(config).min_chunk_length()
    padded = case["n"] if case["n"] % lcm == 0 or case["n"] <= min_chunk else (case["n"] // lcm + 1) * lcm
    print(f"{d}: n {case['n']} (padded {padded}), layers {config['attn_layers']}, buckets {config['num_buckets']}, "
          f"hashes {config['num_hashes']}, seed {seed}, smallest bucket gap {gap:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for i, case in enumerate(CASES):
        if args.only and case["name"] not in args.only:
            continue
        make_case(case, i, os.path.normpath(args.out))


if __name__ == "__main__":
    main()
