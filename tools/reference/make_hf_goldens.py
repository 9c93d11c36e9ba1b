# SPDX-License-Identifier: MIT
"""Random-init Hugging Face decoder checkpoints (HF layout) and their float64 golden logits: tests/goldens/hf_<case>/.

Each directory gets
  config.json            as save_pretrained writes it (sorted keys, class-specific keys, architectures, torch_dtype,
                         transformers_version); two cases leave keys out so their class defaults apply
  model.safetensors      HF parameter names (or model-0000k-of-0000n.safetensors + model.safetensors.index.json);
                         F32, F16 or BF16 as torch_dtype says; a tied head is not stored
  ids.json               the prompt (random ids)
  logits.npy             float32 [n, vocab]: logits of the prompt in one uncached call (float64 forward, rounded)
  generation.json        {"prompt": P, "ids": P prompt ids then one id per step, "seed": ...}
  generation_logits.npy  float32 [1 + steps, vocab]: the prompt call's last row, then each cached one-token step's
                         (hf_decoders.Generator: keys cached after rotation; longrope recomputed at its switch)

Weights are drawn so that every parameter matters: norm gains U(0.6, 1.4) (Gemma's stored w of (1 + w) U(-0.4, 0.4);
q/k norm gains U(2, 3), Gemma's w U(1, 2)),
biases N(0, 0.2), matrices N(0, 1/sqrt(fan_in)) scaled up for q and k so attention is far from uniform.

Usage:
    /usr/bin/python3 tools/reference/make_hf_goldens.py [--out tests/goldens] [--only CASE ...]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_decoders as hd  # noqa: E402
import safetensors_io  # noqa: E402

SEED = 20260311
TRANSFORMERS_VERSION = "4.57.1"

# The keys save_pretrained writes for each class (beyond the case's own), with that class's values.
SAVED = {
    "llama": {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
              "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 2048, "mlp_bias": False,
              "pretraining_tp": 1, "rms_norm_eps": 1e-6, "rope_scaling": None, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "use_cache": True},
    "mistral": {"attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
                "initializer_range": 0.02, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False, "use_cache": True},
    "qwen2": {"attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
              "initializer_range": 0.02, "max_position_embeddings": 32768, "max_window_layers": 28,
              "rms_norm_eps": 1e-6, "rope_scaling": None, "rope_theta": 10000.0, "sliding_window": 4096,
              "tie_word_embeddings": False, "use_cache": True, "use_sliding_window": False},
    "qwen3": {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
              "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 32768,
              "max_window_layers": 28, "rms_norm_eps": 1e-6, "rope_scaling": None, "rope_theta": 10000.0,
              "sliding_window": None, "tie_word_embeddings": False, "use_cache": True, "use_sliding_window": False},
    "gemma2": {"attention_bias": False, "attention_dropout": 0.0, "attn_logit_softcapping": 50.0,
               "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
               "final_logit_softcapping": 30.0, "hidden_act": "gelu_pytorch_tanh",
               "hidden_activation": "gelu_pytorch_tanh", "initializer_range": 0.02, "max_position_embeddings": 8192,
               "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
               "sliding_window": 4096, "tie_word_embeddings": True, "use_cache": True},
    "gemma3_text": {"attention_bias": False, "attention_dropout": 0.0, "attn_logit_softcapping": None,
                    "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
                    "final_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh",
                    "initializer_range": 0.02, "max_position_embeddings": 131072, "pad_token_id": 0,
                    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-6, "rope_local_base_freq": 10000.0,
                    "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 4096,
                    "tie_word_embeddings": True, "use_cache": True},
    "phi3": {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0,
             "eos_token_id": 2, "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 4096,
             "original_max_position_embeddings": 4096, "pad_token_id": None, "partial_rotary_factor": 1.0,
             "resid_pdrop": 0.0, "rms_norm_eps": 1e-5, "rope_scaling": None, "rope_theta": 10000.0,
             "sliding_window": None, "tie_word_embeddings": False, "use_cache": True},
    "gpt2": {"activation_function": "gelu_new", "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1,
             "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-5, "n_inner": None,
             "reorder_and_upcast_attn": False, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False,
             "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
             "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
             "tie_word_embeddings": True, "use_cache": True},
}

# name, model_type, config (overrides of SAVED), keys left out of config.json, dtype, shards, prompt, steps, note
CASES = [
    dict(name="llama_mha", mt="llama", shards=2, prompt=24, steps=10,
         cfg=dict(vocab_size=320, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, head_dim=12, rms_norm_eps=1e-5, attention_bias=True, mlp_bias=True,
                  rope_theta=500.0)),
    dict(name="llama_gqa", mt="llama", prompt=30, steps=10,
         cfg=dict(vocab_size=288, hidden_size=48, intermediate_size=72, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, tie_word_embeddings=True),
         drop=["head_dim", "rms_norm_eps", "rope_theta", "hidden_act", "attention_bias", "mlp_bias",
               "max_position_embeddings", "rope_scaling", "pretraining_tp", "attention_dropout"]),
    dict(name="llama3_rope_scaling", mt="llama", prompt=32, steps=10,
         cfg=dict(vocab_size=256, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                  rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                "original_max_position_embeddings": 64, "rope_type": "llama3"})),
    dict(name="llama_linear_scaling", mt="llama", prompt=20, steps=10,
         cfg=dict(vocab_size=256, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, head_dim=12, rope_theta=100.0,
                  rope_scaling={"type": "linear", "factor": 4.0})),
    dict(name="llama_dynamic", mt="llama", prompt=28, steps=12,
         cfg=dict(vocab_size=256, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, head_dim=12, max_position_embeddings=32, rope_theta=1000.0,
                  rope_scaling={"rope_type": "dynamic", "factor": 3.0})),
    dict(name="llama_yarn", mt="llama", prompt=36, steps=10,
         cfg=dict(vocab_size=256, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=12, max_position_embeddings=256,
                  rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                "beta_fast": 32.0, "beta_slow": 1.0})),
    dict(name="mistral_window", mt="mistral", prompt=12, steps=12,
         cfg=dict(vocab_size=300, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=12, sliding_window=8, max_position_embeddings=1024)),
    dict(name="qwen2", mt="qwen2", prompt=20, steps=10,
         cfg=dict(vocab_size=320, hidden_size=48, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, use_sliding_window=True, sliding_window=6,
                  max_window_layers=1, rope_theta=1000.0)),
    dict(name="qwen3", mt="qwen3", dtype="bfloat16", prompt=24, steps=10,
         cfg=dict(vocab_size=320, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=512, tie_word_embeddings=True,
                  rope_theta=1000.0)),
    dict(name="gemma2", mt="gemma2", prompt=16, steps=10,
         cfg=dict(vocab_size=320, hidden_size=48, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=36, sliding_window=6,
                  attn_logit_softcapping=6.0, final_logit_softcapping=5.0, max_position_embeddings=512)),
    dict(name="gemma3_text", mt="gemma3_text", prompt=18, steps=10,
         cfg=dict(vocab_size=320, hidden_size=48, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=24, sliding_window=5,
                  sliding_window_pattern=2, rope_theta=100000.0, rope_local_base_freq=100.0,
                  rope_scaling={"rope_type": "linear", "factor": 8.0}, max_position_embeddings=512)),
    dict(name="phi3", mt="phi3", prompt=20, steps=10,
         cfg=dict(vocab_size=320, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=96, original_max_position_embeddings=24,
                  partial_rotary_factor=0.75, sliding_window=16, rope_theta=1000.0,
                  rope_scaling={"type": "longrope",
                                "short_factor": [1.0, 1.1, 1.3, 1.7, 2.2, 3.0],
                                "long_factor": [1.5, 2.5, 4.0, 7.0, 11.0, 16.0]})),
    dict(name="gpt2", mt="gpt2", dtype="float16", prompt=28, steps=10,
         cfg=dict(vocab_size=300, n_embd=48, n_head=4, n_layer=2, n_positions=64, n_ctx=64),
         drop=["n_inner", "activation_function", "layer_norm_epsilon", "scale_attn_weights",
               "tie_word_embeddings", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"]),
]


def make_config(case):
    cfg = dict(SAVED[case["mt"]])
    cfg.update(case["cfg"])
    for k in case.get("drop", []):
        cfg.pop(k, None)
    cfg["model_type"] = case["mt"]
    cfg["architectures"] = [hd.ARCHITECTURES[case["mt"]]]
    cfg["torch_dtype"] = case.get("dtype", "float32")
    cfg["transformers_version"] = TRANSFORMERS_VERSION
    return cfg


def random_weights(model_cfg, names, rng):
    """{name: float32 array} for every expected tensor name."""
    c = model_cfg
    gemma = c.get("norm_plus_one", False)
    V, d = c["vocab_size"], c["hidden_size"]
    H, KV, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    w = {}

    def mat(shape, fan_in, gain=1.0):
        return (rng.standard_normal(shape) * gain / np.sqrt(fan_in)).astype(np.float32)

    for n in names:
        if n.endswith(("embed_tokens.weight", "wte.weight")):
            w[n] = rng.standard_normal((V, d)).astype(np.float32)
        elif n.endswith("wpe.weight"):
            w[n] = (0.5 * rng.standard_normal((c["max_position_embeddings"], d))).astype(np.float32)
        elif n == "lm_head.weight":
            w[n] = mat((V, d), d, 2.0)
        elif n.endswith(("q_norm.weight", "k_norm.weight")):
            # q/k norms fix the scale of q and k: larger gains keep attention far from uniform
            lo, hi = (1.0, 2.0) if gemma else (2.0, 3.0)
            w[n] = rng.uniform(lo, hi, D).astype(np.float32)
        elif n.endswith(("norm.weight", "layernorm.weight")):
            lo, hi = (-0.4, 0.4) if gemma else (0.6, 1.4)
            w[n] = rng.uniform(lo, hi, d).astype(np.float32)
        elif n.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            w[n] = rng.uniform(0.6, 1.4, d).astype(np.float32)
        elif n.endswith(".bias"):
            w[n] = None  # sized from its weight below
        elif n.endswith("qkv_proj.weight"):
            w[n] = np.concatenate([mat((H * D, d), d, 2.0), mat((KV * D, d), d, 2.0), mat((KV * D, d), d)])
        elif n.endswith(("q_proj.weight", "k_proj.weight")):
            rows = H * D if "q_proj" in n else KV * D
            w[n] = mat((rows, d), d, 2.0)
        elif n.endswith("v_proj.weight"):
            w[n] = mat((KV * D, d), d)
        elif n.endswith("o_proj.weight"):
            w[n] = mat((d, H * D), H * D)
        elif n.endswith("gate_up_proj.weight"):
            w[n] = mat((2 * c["intermediate_size"], d), d, 1.5)
        elif n.endswith(("gate_proj.weight", "up_proj.weight")):
            w[n] = mat((c["intermediate_size"], d), d, 1.5)
        elif n.endswith("down_proj.weight"):
            w[n] = mat((d, c["intermediate_size"]), c["intermediate_size"])
        elif n.endswith("attn.c_attn.weight"):  # Conv1D [in, out]
            w[n] = np.concatenate([mat((d, d), d, 2.0), mat((d, d), d, 2.0), mat((d, d), d)], axis=1)
        elif n.endswith("attn.c_proj.weight"):
            w[n] = mat((d, d), d)
        elif n.endswith("mlp.c_fc.weight"):
            w[n] = mat((d, c["intermediate_size"]), d, 1.5)
        elif n.endswith("mlp.c_proj.weight"):
            w[n] = mat((c["intermediate_size"], d), c["intermediate_size"])
        else:
            raise KeyError(n)
    for n in names:
        if w[n] is None:
            wn = w[n[: -len(".bias")] + ".weight"]
            if n.endswith(("ln_1.bias", "ln_2.bias", "ln_f.bias")):
                size = d
            elif ".c_" in n:  # Conv1D bias: output features are the weight's columns
                size = wn.shape[1]
            else:
                size = wn.shape[0]
            w[n] = (0.2 * rng.standard_normal(size)).astype(np.float32)
    return w


def write_weights(directory, tensors, dtype, shards):
    for fn in os.listdir(directory):
        if fn.endswith(".safetensors") or fn.endswith(".safetensors.index.json"):
            os.remove(os.path.join(directory, fn))
    if dtype == "float16":
        tensors = {k: v.astype(np.float16) for k, v in tensors.items()}
    bf16 = tuple(tensors) if dtype == "bfloat16" else ()
    meta = {"format": "pt"}
    if shards == 1:
        safetensors_io.save(os.path.join(directory, "model.safetensors"), tensors, meta, bf16=bf16)
        return
    names = sorted(tensors)
    groups = [names[i::shards] for i in range(shards)]
    weight_map, total = {}, 0
    for s, group in enumerate(groups):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k] for k in group}
        safetensors_io.save(os.path.join(directory, fn), part, meta, bf16=tuple(k for k in group if k in bf16))
        for k in group:
            weight_map[k] = fn
            total += part[k].size * (2 if (k in bf16 or part[k].dtype == np.float16) else 4)
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": int(total)}, "weight_map": dict(sorted(weight_map.items()))}, f,
                  indent=2, sort_keys=True)
        f.write("\n")


def attention_stats(model, ids):
    """Mean attention entropy / entropy of uniform attention over the same keys, and the largest |score|."""
    c = model.cfg
    stats = {"ratio": [], "max_score": 0.0}
    orig = model._attend

    def hook(q, k, v, q_pos, k_pos, layer_type, extra_scale=1.0):
        H, KV = q.shape[0], k.shape[0]
        kk = k.repeat_interleave(H // KV, dim=0)
        s = (q @ kk.transpose(-1, -2)) * (c.get("scaling", c["head_dim"] ** -0.5) * extra_scale)
        stats["max_score"] = max(stats["max_score"], float(s.abs().max()))
        out = orig(q, k, v, q_pos, k_pos, layer_type, extra_scale)
        if c.get("attn_softcap"):
            s = torch.tanh(s / c["attn_softcap"]) * c["attn_softcap"]
        qp, kp = torch.as_tensor(q_pos)[:, None], torch.as_tensor(k_pos)[None, :]
        vis = kp <= qp
        if layer_type == hd.SLIDING:
            vis = vis & (kp > qp - c["sliding_window"])
        pr = torch.softmax(s.masked_fill(~vis, float("-inf")), -1)
        ent = -(pr * torch.log(pr.clamp_min(1e-300))).sum(-1)
        cnt = vis.sum(-1).double()
        keep = cnt > 1
        stats["ratio"].append(float((ent[:, keep] / torch.log(cnt[keep])).mean()))
        return out

    model._attend = hook
    try:
        model.logits(ids)
    finally:
        model._attend = orig
    return float(np.mean(stats["ratio"])), stats["max_score"]


def build(case, out_root, seed):
    directory = os.path.join(out_root, "hf_" + case["name"])
    os.makedirs(directory, exist_ok=True)
    raw = make_config(case)
    with open(os.path.join(directory, "config.json"), "w") as f:
        f.write(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    cfg = hd.resolve_config(raw)
    names = hd.HFDecoder.expected_names(type("M", (), {"cfg": cfg})())
    rng = np.random.default_rng(seed)
    tensors = random_weights(cfg, names, rng)
    write_weights(directory, tensors, raw["torch_dtype"], case.get("shards", 1))

    model = hd.load_checkpoint(directory)  # from the stored (rounded) values
    P, S = case["prompt"], case["steps"]
    ids = [int(x) for x in rng.integers(0, cfg["vocab_size"], P + S)]
    with open(os.path.join(directory, "ids.json"), "w") as f:
        json.dump(ids[:P], f)
        f.write("\n")
    np.save(os.path.join(directory, "logits.npy"), model.logits(ids[:P]).astype(np.float32))
    gen = hd.Generator(model)
    rows = [gen.prompt(ids[:P])] + [gen.step(t) for t in ids[P:]]
    with open(os.path.join(directory, "generation.json"), "w") as f:
        json.dump({"prompt": P, "ids": ids, "seed": seed}, f)
        f.write("\n")
    np.save(os.path.join(directory, "generation_logits.npy"), np.stack(rows).astype(np.float32))
    ratio, max_score = attention_stats(model, ids[:P])
    size = sum(os.path.getsize(os.path.join(directory, fn)) for fn in os.listdir(directory))
    print(f"hf_{case['name']}: prompt {P}, {S} steps, layers {cfg['layer_types']}, attention entropy "
          f"{ratio:.2f} of uniform, max |score| {max_score:.1f}, {size / 1024:.0f} KiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for k, case in enumerate(CASES):
        if args.only and case["name"] not in args.only:
            continue
        build(case, args.out, SEED + 101 * k)


if __name__ == "__main__":
    main()
