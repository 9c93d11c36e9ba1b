# SPDX-License-Identifier: MIT
"""RoPE frequency tables as Hugging Face transformers computes them (modeling_rope_utils.py, the 5.x rules; the 4.45
differences are noted in docs/models-llama.md), in PyTorch float32, for the converter's unit test.

    /usr/bin/python3 tools/reference/rope_tables.py > tests/fixtures/rope_tables.json

Each case is what the converter reads from a config.json: rope_theta, head_dim, partial_rotary_factor,
max_position_embeddings, a top-level original_max_position_embeddings (Phi-3 keeps it there) and the scaling
object (rope_scaling or rope_parameters). The output lists each case with inv_freq, long_inv_freq (longrope) and
attention_factor. Written from transformers' code step by step, independently of the converter's C++.
"""
import json
import math

import torch


def rope_type(scaling):
    if not scaling:
        return "default"
    return scaling.get("rope_type", scaling.get("type", "default"))


def default_inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))


def original_max(case):
    # standardize_rope_params: the config's own field first (Phi-3), then the scaling object's, then
    # max_position_embeddings.
    if case.get("original_max_position_embeddings") is not None:
        return case["original_max_position_embeddings"]
    scaling = case.get("scaling") or {}
    return scaling.get("original_max_position_embeddings", case["max_position_embeddings"])


def compute(case):
    scaling = case.get("scaling") or {}
    kind = rope_type(scaling)
    base = case["rope_theta"]
    dim = int(case["head_dim"] * case.get("partial_rotary_factor", 1.0))
    max_pos = case["max_position_embeddings"]
    attention_factor = 1.0
    long_inv_freq = None
    if kind in ("default", "dynamic"):
        # dynamic: at init seq_len = max_position_embeddings, so the base is unchanged.
        inv_freq = default_inv_freq(base, dim)
    elif kind == "linear":
        inv_freq = default_inv_freq(base, dim)
        inv_freq /= scaling["factor"]
    elif kind == "llama3":
        inv_freq = default_inv_freq(base, dim)
        factor = scaling["factor"]
        low_freq_factor = scaling["low_freq_factor"]
        high_freq_factor = scaling["high_freq_factor"]
        old_context_len = original_max(case)
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    elif kind == "yarn":
        orig = original_max(case)
        factor = scaling.get("factor")
        if factor is None:
            factor = max_pos / orig

        def get_mscale(scale, mscale=1):
            if scale <= 1:
                return 1.0
            return 0.1 * mscale * math.log(scale) + 1.0

        attention_factor = scaling.get("attention_factor")
        mscale = scaling.get("mscale")
        mscale_all_dim = scaling.get("mscale_all_dim")
        if attention_factor is None:
            if mscale and mscale_all_dim:
                attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
            else:
                attention_factor = get_mscale(factor)
        beta_fast = scaling.get("beta_fast") or 32
        beta_slow = scaling.get("beta_slow") or 1
        truncate = scaling.get("truncate", True)

        def find_correction_dim(num_rotations):
            return (dim * math.log(orig / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

        low = find_correction_dim(beta_fast)
        high = find_correction_dim(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
        extrapolation = 1.0 / pos_freqs
        interpolation = 1.0 / (factor * pos_freqs)
        extrapolation_factor = 1 - ramp
        inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    elif kind == "longrope":
        orig = original_max(case)
        factor = scaling.get("factor")
        if factor is None:
            factor = max_pos / orig
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        inv_freq = 1.0 / (torch.tensor(scaling["short_factor"], dtype=torch.float32) * base**shape)
        long_inv_freq = 1.0 / (torch.tensor(scaling["long_factor"], dtype=torch.float32) * base**shape)
    else:
        raise ValueError(kind)
    out = {"inv_freq": [float(x) for x in inv_freq.float()], "attention_factor": float(attention_factor)}
    if long_inv_freq is not None:
        out["long_inv_freq"] = [float(x) for x in long_inv_freq.float()]
    return out


def factors(n, seed, lo, hi):
    g = torch.Generator().manual_seed(seed)
    return [round(float(x), 6) for x in lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)]


CASES = [
    {"name": "default_llama2", "rope_theta": 10000.0, "head_dim": 128, "max_position_embeddings": 4096},
    {"name": "default_qwen_theta_1e6", "rope_theta": 1000000.0, "head_dim": 64, "max_position_embeddings": 32768},
    {"name": "default_partial_phi4mini", "rope_theta": 10000.0, "head_dim": 128, "partial_rotary_factor": 0.75,
     "max_position_embeddings": 131072, "original_max_position_embeddings": 4096},
    {"name": "linear_gemma3_global", "rope_theta": 1000000.0, "head_dim": 256, "max_position_embeddings": 131072,
     "scaling": {"rope_type": "linear", "factor": 8.0}},
    {"name": "linear_legacy_type_key", "rope_theta": 10000.0, "head_dim": 64, "max_position_embeddings": 2048,
     "scaling": {"type": "linear", "factor": 2}},
    {"name": "dynamic", "rope_theta": 10000.0, "head_dim": 64, "max_position_embeddings": 2048,
     "scaling": {"rope_type": "dynamic", "factor": 4.0}},
    {"name": "llama3_8b_31", "rope_theta": 500000.0, "head_dim": 128, "max_position_embeddings": 131072,
     "scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192}},
    {"name": "llama3_32", "rope_theta": 500000.0, "head_dim": 64, "max_position_embeddings": 131072,
     "scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192}},
    {"name": "yarn_qwen", "rope_theta": 1000000.0, "head_dim": 128, "max_position_embeddings": 32768,
     "scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    {"name": "yarn_mscale_untruncated", "rope_theta": 10000.0, "head_dim": 64, "max_position_embeddings": 163840,
     "scaling": {"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0, "beta_fast": 32,
                 "beta_slow": 1, "original_max_position_embeddings": 4096, "truncate": False}},
    {"name": "yarn_attention_factor_no_original", "rope_theta": 10000.0, "head_dim": 32,
     "max_position_embeddings": 4096,
     "scaling": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.25, "beta_fast": 16, "beta_slow": 2}},
    {"name": "longrope_phi3_mini_128k", "rope_theta": 10000.0, "head_dim": 96, "max_position_embeddings": 131072,
     "original_max_position_embeddings": 4096,
     "scaling": {"type": "longrope", "short_factor": factors(48, 1, 1.0, 1.2),
                 "long_factor": factors(48, 2, 1.0, 40.0)}},
    {"name": "longrope_factor_inside", "rope_theta": 250000.0, "head_dim": 64, "max_position_embeddings": 32768,
     "scaling": {"rope_type": "longrope", "factor": 8.0, "original_max_position_embeddings": 4096,
                 "short_factor": factors(32, 3, 1.0, 2.0), "long_factor": factors(32, 4, 1.0, 16.0)}},
]


def main():
    out = []
    for case in CASES:
        row = dict(case)
        row.update(compute(case))
        out.append(row)
    print(json.dumps({"generator": "tools/reference/rope_tables.py", "torch": torch.__version__, "cases": out},
                     indent=1))


if __name__ == "__main__":
    main()
