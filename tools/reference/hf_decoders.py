# SPDX-License-Identifier: MIT
"""Float64 reference for Hugging Face decoder-only checkpoints: what an importer of these `model_type`s must compute.

    llama  mistral  qwen2  qwen3  gemma2  gemma3_text  phi3  gpt2

Written from the published architectures, following the semantics of current `transformers` (4.5x and the v5
`rope_parameters` layout; where v4.45 computes something else, DEFAULTS.md and tests/goldens/README.md say so).

A checkpoint directory holds config.json and model.safetensors, or `model.safetensors.index.json` and its shards
(F32, F16 or BF16 tensors). Every key missing from config.json takes the default of its model_type's config class
(`DEFAULTS` below, one table per model_type).

    m = load_checkpoint("tests/goldens/hf_llama_mha")           # float64
    logits = m.logits([1, 2, 3])                                  # np.ndarray [3, vocab], one uncached call
    gen = Generator(m); first = gen.prompt(ids[:P]); row = gen.step(tok)   # KV-cached, one token a call

Semantics in one place (config keys as transformers reads them):

* RMSNorm: y = x / sqrt(mean(x^2) + eps) * w; Gemma's is * (1 + w). GPT-2 uses LayerNorm (with bias).
* RoPE: half-split `rotate_half` layout (pairs i and i + d/2), on the first int(head_dim * partial_rotary_factor)
  dims (Phi-3 only; the rest pass through). inv_freq from rope_type default / linear / dynamic / yarn / longrope /
  llama3 as modeling_rope_utils computes it; cos and sin are multiplied by the attention factor (yarn, longrope).
  dynamic and longrope depend on the call: seq_len = max(position) + 1 of the positions fed in that call.
* Cached generation stores keys after rotation. For dynamic NTK the keys therefore keep the frequencies of the
  call that produced them (as transformers' DynamicCache does): cached steps differ from an uncached forward once
  the sequence passes max_position_embeddings. For longrope, `generate` (Phi3ForCausalLM.prepare_inputs_for_
  generation) drops the cache and recomputes the whole sequence at the step where it first passes
  original_max_position_embeddings, so cached steps equal the uncached forward; `Generator` does the same.
* Sliding window w: the query at position i sees keys j with i - w < j <= i (masking_utils.sliding_window_overlay:
  kv_idx > q_idx - sliding_window, and kv_idx <= q_idx), i.e. itself and the w - 1 before it.
"""

import copy
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

FULL = "full_attention"
SLIDING = "sliding_attention"

# ---------------------------------------------------------------------------------------------------------------
# Config defaults: for each model_type, every key this module reads and its config class's default.
# None means "derived" (see resolve_config): num_key_value_heads -> num_attention_heads, head_dim ->
# hidden_size // num_attention_heads, layer_types -> the family's rule, n_inner -> 4 * n_embd.

DEFAULTS = {
    "llama": {  # LlamaConfig
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": None, "head_dim": None, "hidden_act": "silu",
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
    },
    "mistral": {  # MistralConfig
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "hidden_act": "silu",
        "max_position_embeddings": 4096 * 32, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "rope_theta": 10000.0, "rope_scaling": None, "sliding_window": 4096,
    },
    "qwen2": {  # Qwen2Config
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": None, "hidden_act": "silu",
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "rope_theta": 10000.0, "rope_scaling": None, "use_sliding_window": False, "sliding_window": 4096,
        "max_window_layers": 28, "layer_types": None,
    },
    "qwen3": {  # Qwen3Config
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "hidden_act": "silu",
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "use_sliding_window": False,
        "sliding_window": 4096, "max_window_layers": 28, "layer_types": None,
    },
    "gemma2": {  # Gemma2Config
        "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True, "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False,
        "query_pre_attn_scalar": 256, "sliding_window": 4096, "layer_types": None,
        "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0,
    },
    "gemma3_text": {  # Gemma3TextConfig
        "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True, "rope_theta": 1000000.0, "rope_scaling": None, "attention_bias": False,
        "query_pre_attn_scalar": 256, "sliding_window": 4096, "layer_types": None, "sliding_window_pattern": 6,
        "final_logit_softcapping": None, "attn_logit_softcapping": None, "rope_local_base_freq": 10000.0,
    },
    "phi3": {  # Phi3Config
        "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": None, "head_dim": None, "hidden_act": "silu",
        "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False, "rope_theta": 10000.0, "rope_scaling": None, "partial_rotary_factor": 1.0,
        "sliding_window": None,
    },
    "gpt2": {  # GPT2Config (tie_word_embeddings: PretrainedConfig's default)
        "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False, "tie_word_embeddings": True,
    },
}

# GPT2Config.attribute_map: the common names are aliases of GPT-2's own keys.
GPT2_ALIASES = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions",
                "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"}

ARCHITECTURES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM", "gpt2": "GPT2LMHeadModel",
}


# ---------------------------------------------------------------------------------------------------------------
# activations (transformers' ACT2FN names)

def _gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


ACTIVATIONS = {
    "silu": torch.nn.functional.silu,
    "swish": torch.nn.functional.silu,
    "gelu": lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))),
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "gelu_fast": lambda x: 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x))),
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "relu": torch.relu,
}


# ---------------------------------------------------------------------------------------------------------------
# config resolution

def _get(raw, defaults, key):
    return raw[key] if key in raw else defaults[key]


def _rope_block(params, theta_default):
    """One layer type's rope parameters: rope_type (legacy key "type" accepted), rope_theta and the scaling keys."""
    p = dict(params or {})
    rope_type = p.get("rope_type", p.get("type", "default"))
    p["rope_type"] = rope_type
    p["rope_theta"] = float(p.get("rope_theta", theta_default))
    p.pop("type", None)
    return p


def _rope_params(raw, defaults, layer_types):
    """{layer_type: rope params} from either v5's `rope_parameters` (flat or nested by layer type) or the older
    `rope_scaling` + `rope_theta` (+ Gemma 3's `rope_local_base_freq`). As in v5's convert_rope_params_to_dict, a
    non-empty `rope_scaling` takes precedence over `rope_parameters`, and a `rope_theta` inside the dict over the
    top-level one."""
    theta = float(raw.get("rope_theta", defaults.get("rope_theta", 10000.0)))
    scaling = raw.get("rope_scaling") or None
    params = scaling if scaling else (raw.get("rope_parameters") or None)
    types = sorted(set(layer_types))
    nested = isinstance(params, dict) and params and set(params).issubset({FULL, SLIDING})
    if nested:
        return {t: _rope_block(params.get(t), theta) for t in types}
    out = {t: _rope_block(params, theta) for t in types}
    if raw["model_type"] == "gemma3_text":
        # Gemma 3: local (sliding) layers use rope_local_base_freq with plain RoPE; scaling only on global layers.
        local = float(raw.get("rope_local_base_freq", defaults["rope_local_base_freq"]))
        if SLIDING in out:
            out[SLIDING] = {"rope_type": "default", "rope_theta": local}
    return out


def resolve_config(raw):
    """config.json dict -> flat dict of everything the forward needs (all defaults applied)."""
    mt = raw.get("model_type")
    if mt not in DEFAULTS:
        raise ValueError(f"unsupported model_type {mt!r} (supported: {', '.join(DEFAULTS)})")
    d = DEFAULTS[mt]
    raw = dict(raw)
    c = {"model_type": mt}
    if mt == "gpt2":
        for alias, key in GPT2_ALIASES.items():
            if alias in raw and key not in raw:
                raw[key] = raw[alias]
        c.update(vocab_size=_get(raw, d, "vocab_size"), hidden_size=_get(raw, d, "n_embd"),
                 num_hidden_layers=_get(raw, d, "n_layer"), num_attention_heads=_get(raw, d, "n_head"),
                 max_position_embeddings=_get(raw, d, "n_positions"),
                 layer_norm_epsilon=float(_get(raw, d, "layer_norm_epsilon")),
                 hidden_act=_get(raw, d, "activation_function"),
                 tie_word_embeddings=bool(_get(raw, d, "tie_word_embeddings")),
                 scale_attn_weights=bool(_get(raw, d, "scale_attn_weights")),
                 scale_attn_by_inverse_layer_idx=bool(_get(raw, d, "scale_attn_by_inverse_layer_idx")))
        n_inner = _get(raw, d, "n_inner")
        c["intermediate_size"] = n_inner if n_inner is not None else 4 * c["hidden_size"]
        c["num_key_value_heads"] = c["num_attention_heads"]
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
        c["layer_types"] = [FULL] * c["num_hidden_layers"]
        c["sliding_window"] = None
        return c

    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "max_position_embeddings", "tie_word_embeddings"):
        c[k] = _get(raw, d, k)
    c["rms_norm_eps"] = float(_get(raw, d, "rms_norm_eps"))
    c["num_key_value_heads"] = _get(raw, d, "num_key_value_heads") or c["num_attention_heads"]
    # head_dim: a class parameter for llama/mistral/qwen3/gemma*, read with getattr by qwen2 and phi3 (so a
    # head_dim key in config.json counts there too); None -> hidden_size // num_attention_heads.
    hd = raw.get("head_dim", d.get("head_dim"))
    c["head_dim"] = hd if hd else c["hidden_size"] // c["num_attention_heads"]
    gemma = mt in ("gemma2", "gemma3_text")
    c["hidden_act"] = _get(raw, d, "hidden_activation") if gemma else _get(raw, d, "hidden_act")
    n = c["num_hidden_layers"]

    # biases
    c["qkv_bias"] = c["o_bias"] = c["mlp_bias"] = False
    if mt in ("llama", "qwen3", "gemma2", "gemma3_text"):
        c["qkv_bias"] = c["o_bias"] = bool(_get(raw, d, "attention_bias"))
    if mt == "llama":
        c["mlp_bias"] = bool(_get(raw, d, "mlp_bias"))
    if mt == "qwen2":
        c["qkv_bias"] = True  # q/k/v always biased, o_proj never

    # attention pattern
    sw = raw.get("sliding_window", d.get("sliding_window"))
    layer_types = raw.get("layer_types")
    if mt in ("qwen2", "qwen3"):
        # the config sets sliding_window = None unless use_sliding_window; default layer_types: the first
        # max_window_layers layers full, the rest sliding (when a window is set).
        if not _get(raw, d, "use_sliding_window"):
            sw = None
        if layer_types is None:
            mwl = _get(raw, d, "max_window_layers")
            layer_types = [SLIDING if sw is not None and i >= mwl else FULL for i in range(n)]
    elif mt == "gemma2":
        if layer_types is None:
            layer_types = [SLIDING if (i + 1) % 2 else FULL for i in range(n)]  # layer 0 sliding, 1 full, ...
    elif mt == "gemma3_text":
        if layer_types is None:
            pattern = _get(raw, d, "sliding_window_pattern")
            layer_types = [SLIDING if (i + 1) % pattern else FULL for i in range(n)]
    else:  # llama, mistral, phi3: one kind for every layer (llama never windows)
        if mt == "llama":
            sw = None
        layer_types = [SLIDING if sw is not None else FULL] * n
    if len(layer_types) != n:
        raise ValueError(f"layer_types has {len(layer_types)} entries for {n} layers")
    if any(t == SLIDING for t in layer_types) and not sw:
        raise ValueError("sliding_attention layers need a sliding_window")
    c["layer_types"] = list(layer_types)
    c["sliding_window"] = sw

    # scores scaling, soft-caps, norms
    c["scaling"] = (float(_get(raw, d, "query_pre_attn_scalar")) ** -0.5 if gemma else c["head_dim"] ** -0.5)
    c["attn_softcap"] = _get(raw, d, "attn_logit_softcapping") if gemma else None
    c["final_softcap"] = _get(raw, d, "final_logit_softcapping") if gemma else None
    c["norm_plus_one"] = gemma
    c["sandwich"] = gemma
    c["embed_scale"] = math.sqrt(c["hidden_size"]) if gemma else 1.0
    c["qk_norm"] = mt in ("qwen3", "gemma3_text")
    c["fused"] = mt == "phi3"

    # rope
    rp = raw.get("rope_parameters") if isinstance(raw.get("rope_parameters"), dict) else {}
    prf = 1.0
    if mt == "phi3":
        prf = float(rp.get("partial_rotary_factor", raw.get("partial_rotary_factor", d["partial_rotary_factor"])))
    c["rotary_dim"] = int(c["head_dim"] * prf)
    c["original_max_position_embeddings"] = (
        raw.get("original_max_position_embeddings", d.get("original_max_position_embeddings")))
    c["rope"] = _rope_params(raw, d, c["layer_types"])
    for t, p in c["rope"].items():
        if p["rope_type"] in ("su",) or (mt == "phi3" and p["rope_type"] == "yarn"):
            p["rope_type"] = "longrope"  # Phi3Config maps the old names "su" / "yarn" to longrope
        if p["rope_type"] not in ROPE_INIT:
            raise ValueError(f"unsupported rope_type {p['rope_type']!r}")
    return c


# ---------------------------------------------------------------------------------------------------------------
# rotary frequencies (modeling_rope_utils), in float64

def _default_inv_freq(theta, dim):
    return 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))


def _rope_default(c, p, seq_len):
    return _default_inv_freq(p["rope_theta"], c["rotary_dim"]), 1.0


def _rope_linear(c, p, seq_len):
    return _default_inv_freq(p["rope_theta"], c["rotary_dim"]) / float(p["factor"]), 1.0


def _rope_dynamic(c, p, seq_len):
    dim, mpe, factor = c["rotary_dim"], c["max_position_embeddings"], float(p["factor"])
    seq_len = max(seq_len, mpe)
    base = p["rope_theta"] * ((factor * seq_len / mpe) - (factor - 1)) ** (dim / (dim - 2))
    return _default_inv_freq(base, dim), 1.0


def _rope_yarn(c, p, seq_len):
    """transformers 4.5x: with original_max_position_embeddings in the dict, factor = max_position_embeddings /
    original and the correction range uses the original length (v5 keeps an explicit factor instead; the two agree
    when factor equals that ratio). v4.45 used max_position_embeddings for the range and the explicit factor."""
    dim, base = c["rotary_dim"], p["rope_theta"]
    factor = float(p["factor"])
    if "original_max_position_embeddings" in p:
        omp = p["original_max_position_embeddings"]
        factor = c["max_position_embeddings"] / omp
    else:
        omp = c["max_position_embeddings"]
    mscale, mscale_all = p.get("mscale"), p.get("mscale_all_dim")

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    af = p.get("attention_factor")
    if af is None:
        af = get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if (mscale and mscale_all) \
            else get_mscale(factor)
    beta_fast = p.get("beta_fast") or 32
    beta_slow = p.get("beta_slow") or 1

    def corr_dim(rot):
        return (dim * math.log(omp / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extra = 1.0 - ramp  # weight of the unscaled (extrapolated) frequency
    pos = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv = (1.0 / (factor * pos)) * (1.0 - extra) + (1.0 / pos) * extra
    return inv, float(af)


def _rope_longrope(c, p, seq_len):
    dim, base = c["rotary_dim"], p["rope_theta"]
    omp = c["original_max_position_embeddings"]
    if omp:
        factor = c["max_position_embeddings"] / omp
    else:
        omp = c["max_position_embeddings"]
        factor = p.get("factor")
    af = p.get("attention_factor")
    if af is None:
        af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(omp))
    ext = np.asarray(p["long_factor"] if seq_len > omp else p["short_factor"], dtype=np.float64)
    if ext.shape != (dim // 2,):
        raise ValueError(f"longrope factors need {dim // 2} entries, got {ext.shape}")
    inv = 1.0 / (ext * base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    return inv, float(af)


def _rope_llama3(c, p, seq_len):
    inv = _default_inv_freq(p["rope_theta"], c["rotary_dim"])
    factor, lo, hi = float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"])
    old = p["original_max_position_embeddings"]
    low_wl, high_wl = old / lo, old / hi
    wl = 2 * math.pi / inv
    out = np.where(wl > low_wl, inv / factor, inv)
    smooth = (old / wl - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wl < high_wl) & ~(wl > low_wl)
    return np.where(medium, smoothed, out), 1.0


ROPE_INIT = {"default": _rope_default, "linear": _rope_linear, "dynamic": _rope_dynamic, "yarn": _rope_yarn,
             "longrope": _rope_longrope, "llama3": _rope_llama3}
CALL_DEPENDENT = ("dynamic", "longrope")


def rope_tables(c, layer_type, positions, call_lens):
    """cos, sin [n, rotary_dim] (attention factor included) for `positions`, each computed with the frequencies of
    a call whose max(position) + 1 was call_lens[k]."""
    p = c["rope"][layer_type]
    fn = ROPE_INIT[p["rope_type"]]
    positions = np.asarray(positions, dtype=np.float64)
    call_lens = np.asarray(call_lens, dtype=np.int64)
    cos = np.empty((len(positions), c["rotary_dim"]))
    sin = np.empty_like(cos)
    for L in np.unique(call_lens):
        sel = call_lens == L
        inv, af = fn(c, p, int(L))
        ang = positions[sel, None] * inv[None, :]
        emb = np.concatenate([ang, ang], axis=-1)
        cos[sel] = np.cos(emb) * af
        sin[sel] = np.sin(emb) * af
    return torch.from_numpy(cos), torch.from_numpy(sin)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    """x [H, n, head_dim]; rotates the first rotary_dim dims (half-split pairs), passes the rest."""
    r = cos.shape[-1]
    xr, xp = x[..., :r], x[..., r:]
    return torch.cat([xr * cos + rotate_half(xr) * sin, xp], dim=-1)


# ---------------------------------------------------------------------------------------------------------------
# checkpoint I/O

def _cached(cache, i, k, v, positions):
    """Layer i's keys and values [heads, m, d] with their positions after appending this call's k, v at `positions`
    to cache[i] (a list of one (k, v, positions) per layer, grown as layers run); without a cache, the call's own."""
    if cache is None:
        return k, v, positions
    if len(cache) <= i:
        cache.append((k, v, positions))
    else:
        pk, pv, pp = cache[i]
        cache[i] = (torch.cat([pk, k], 1), torch.cat([pv, v], 1), np.concatenate([pp, positions]))
    return cache[i]


def load_weights(directory):
    """{name: np.ndarray float32/float16} from model.safetensors, a sharded index, or every *.safetensors."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        out = {}
        for fn in sorted(set(weight_map.values())):
            part = safetensors_io.load(os.path.join(directory, fn))
            for name, arr in part.items():
                if weight_map.get(name) != fn:
                    raise ValueError(f"{fn}: tensor {name} is not mapped to this shard in the index")
                out[name] = arr
        missing = set(weight_map) - set(out)
        if missing:
            raise ValueError(f"index names tensors no shard holds: {sorted(missing)[:5]}")
        return out
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        return safetensors_io.load(single)
    return safetensors_io.load_dir(directory)


def load_checkpoint(directory):
    with open(os.path.join(directory, "config.json")) as f:
        raw = json.load(f)
    return HFDecoder(raw, load_weights(directory))


# ---------------------------------------------------------------------------------------------------------------
# the model

class HFDecoder:
    """Float64 forward of one checkpoint. Weights are kept under their HF names (after dropping a leading
    `transformer.` for GPT-2 checkpoints saved without it being absent, i.e. both spellings load)."""

    def __init__(self, raw_config, weights):
        self.raw = copy.deepcopy(raw_config)
        self.cfg = resolve_config(raw_config)
        self.w = {}
        for k, v in weights.items():
            self.w[k] = torch.from_numpy(np.asarray(v, dtype=np.float64))
        if self.cfg["model_type"] == "gpt2" and "transformer.wte.weight" not in self.w:
            self.w = {("lm_head.weight" if k == "lm_head.weight" else "transformer." + k): v
                      for k, v in self.w.items()}
        self._check_names()

    # names -------------------------------------------------------------------------------------------------
    def expected_names(self):
        c = self.cfg
        names = []
        if c["model_type"] == "gpt2":
            names += ["transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
                      "transformer.ln_f.bias"]
            for i in range(c["num_hidden_layers"]):
                p = f"transformer.h.{i}."
                for m in ("ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
                    names += [p + m + ".weight", p + m + ".bias"]
        else:
            names += ["model.embed_tokens.weight", "model.norm.weight"]
            for i in range(c["num_hidden_layers"]):
                p = f"model.layers.{i}."
                norms = ["input_layernorm", "post_attention_layernorm"]
                if c["sandwich"]:
                    norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
                names += [p + n + ".weight" for n in norms]
                if c["fused"]:
                    names += [p + "self_attn.qkv_proj.weight", p + "self_attn.o_proj.weight",
                              p + "mlp.gate_up_proj.weight", p + "mlp.down_proj.weight"]
                    continue
                for proj in ("q", "k", "v"):
                    names.append(p + f"self_attn.{proj}_proj.weight")
                    if c["qkv_bias"]:
                        names.append(p + f"self_attn.{proj}_proj.bias")
                names.append(p + "self_attn.o_proj.weight")
                if c["o_bias"]:
                    names.append(p + "self_attn.o_proj.bias")
                if c["qk_norm"]:
                    names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
                for proj in ("gate", "up", "down"):
                    names.append(p + f"mlp.{proj}_proj.weight")
                    if c["mlp_bias"]:
                        names.append(p + f"mlp.{proj}_proj.bias")
        if not c["tie_word_embeddings"]:
            names.append("lm_head.weight")
        return names

    def _check_names(self):
        want = self.expected_names()
        missing = [n for n in want if n not in self.w]
        if missing:
            raise ValueError(f"checkpoint lacks {missing[:6]}{' ...' if len(missing) > 6 else ''}")
        # HF drops the causal-mask buffers GPT-2 checkpoints may carry (attn.bias, attn.masked_bias); a tied head
        # saved anyway is ignored (the head is the embedding).
        extra = [n for n in self.w if n not in set(want) and not n.endswith(("attn.bias", "attn.masked_bias"))
                 and n != "lm_head.weight"]
        if extra:
            raise ValueError(f"checkpoint has tensors this config does not use: {extra[:6]}")

    # pieces ------------------------------------------------------------------------------------------------
    def _rms(self, x, name):
        c = self.cfg
        w = self.w[name]
        if c["norm_plus_one"]:
            w = 1.0 + w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["rms_norm_eps"]) * w

    def _ln(self, x, name):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.w[name + ".weight"], self.w[name + ".bias"],
                                              self.cfg["layer_norm_epsilon"])

    def _lin(self, x, name, bias=False):
        y = x @ self.w[name + ".weight"].T
        if bias:
            y = y + self.w[name + ".bias"]
        return y

    def _conv1d(self, x, name):  # GPT-2 Conv1D: weight [in, out]
        return x @ self.w[name + ".weight"] + self.w[name + ".bias"]

    def _attend(self, q, k, v, q_pos, k_pos, layer_type, extra_scale=1.0):
        """q [H, n, d], k/v [KV, m, d]; q_pos [n], k_pos [m] absolute positions."""
        c = self.cfg
        H, KV = q.shape[0], k.shape[0]
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        s = (q @ k.transpose(-1, -2)) * (c.get("scaling", c["head_dim"] ** -0.5) * extra_scale)
        if c.get("attn_softcap"):
            s = torch.tanh(s / c["attn_softcap"]) * c["attn_softcap"]
        qp = torch.as_tensor(q_pos)[:, None]
        kp = torch.as_tensor(k_pos)[None, :]
        vis = kp <= qp
        if layer_type == SLIDING:
            vis = vis & (kp > qp - c["sliding_window"])
        s = s.masked_fill(~vis, float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    # forward ------------------------------------------------------------------------------------------------
    def forward(self, ids, positions=None, call_lens=None, cache=None):
        """One call. ids [n]; positions default to len(cache) + arange(n); call_lens (per fed position, the
        max(position) + 1 whose frequencies rotate it) default to max(positions) + 1 for every position.
        cache: list per layer of (k [KV, m, d], v, k_pos [m]) — extended in place. Returns logits [n, V]."""
        c = self.cfg
        ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        n = ids.shape[0]
        past = 0 if not cache else int(cache[0][2].shape[0])
        if positions is None:
            positions = np.arange(past, past + n)
        positions = np.asarray(positions, dtype=np.int64)
        if call_lens is None:
            call_lens = np.full(n, int(positions.max()) + 1)
        if c["model_type"] == "gpt2":
            return self._forward_gpt2(ids, positions, cache)
        ropes = {t: rope_tables(c, t, positions, call_lens) for t in c["rope"]}

        def attend(i, layer_type, q, k, v):
            return self._rope_cache_attend(i, layer_type, q, k, v, positions, ropes, cache)

        return self.decode(ids, attend)

    def _rope_cache_attend(self, i, layer_type, q, k, v, positions, ropes, cache):
        """forward's attention step of layer i: rotates the call's q [H, n, d] and k [KV, n, d] at `positions` with
        `ropes` (rope_tables per layer type), appends k and v to cache[i] when there is a cache (keys cached after
        rotation) and attends over it. Returns [H, n, d]."""
        cos, sin = ropes[layer_type]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k, v, k_pos = _cached(cache, i, k, v, positions)
        return self._attend(q, k, v, positions, k_pos, layer_type)

    def decode(self, ids, attend):
        """The Llama-family decoder (every model_type but gpt2) with its attention step left to
        `attend(i, layer_type, q, k, v)`: q [H, n, d], k and v [KV, n, d] are the call's rows of layer i, q and k NOT
        rotated (after the q/k norms where the model has them); it returns the attention output [H, n, d] before
        o_proj. forward passes _rope_cache_attend; streaming_sinks.py passes its sink cache and context shift, which
        rotate keys their own way. ids [n]. Returns logits [n, V]."""
        c = self.cfg
        ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        n = ids.shape[0]
        x = self.w["model.embed_tokens.weight"][ids] * c["embed_scale"]
        H, KV, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        for i, lt in enumerate(c["layer_types"]):
            p = f"model.layers.{i}."
            h = self._rms(x, p + "input_layernorm.weight")
            if c["fused"]:
                qkv = self._lin(h, p + "self_attn.qkv_proj")
                q, k, v = qkv.split([H * D, KV * D, KV * D], dim=-1)
            else:
                q = self._lin(h, p + "self_attn.q_proj", c["qkv_bias"])
                k = self._lin(h, p + "self_attn.k_proj", c["qkv_bias"])
                v = self._lin(h, p + "self_attn.v_proj", c["qkv_bias"])
            q = q.view(n, H, D).transpose(0, 1)
            k = k.view(n, KV, D).transpose(0, 1)
            v = v.view(n, KV, D).transpose(0, 1)
            if c["qk_norm"]:
                q = self._rms(q, p + "self_attn.q_norm.weight")
                k = self._rms(k, p + "self_attn.k_norm.weight")
            a = attend(i, lt, q, k, v)
            a = a.transpose(0, 1).reshape(n, H * D)
            a = self._lin(a, p + "self_attn.o_proj", c["o_bias"])
            if c["sandwich"]:
                a = self._rms(a, p + "post_attention_layernorm.weight")
                x = x + a
                h = self._rms(x, p + "pre_feedforward_layernorm.weight")
            else:
                x = x + a
                h = self._rms(x, p + "post_attention_layernorm.weight")
            act = ACTIVATIONS[c["hidden_act"]]
            if c["fused"]:
                gate, up = self._lin(h, p + "mlp.gate_up_proj").chunk(2, dim=-1)
            else:
                gate = self._lin(h, p + "mlp.gate_proj", c["mlp_bias"])
                up = self._lin(h, p + "mlp.up_proj", c["mlp_bias"])
            m = self._lin(act(gate) * up, p + "mlp.down_proj", c["mlp_bias"])
            if c["sandwich"]:
                m = self._rms(m, p + "post_feedforward_layernorm.weight")
            x = x + m
        x = self._rms(x, "model.norm.weight")
        self.last_hidden = x  # transformers' last_hidden_state: the head's input, after the final norm
        head = self.w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else self.w["lm_head.weight"]
        logits = x @ head.T
        if c.get("final_softcap"):
            logits = torch.tanh(logits / c["final_softcap"]) * c["final_softcap"]
        return logits

    def _forward_gpt2(self, ids, positions, cache):
        c = self.cfg
        n = ids.shape[0]
        H, D = c["num_attention_heads"], c["head_dim"]
        if int(positions.max()) >= c["max_position_embeddings"]:
            raise ValueError(f"position {int(positions.max())} beyond n_positions {c['max_position_embeddings']}")
        x = self.w["transformer.wte.weight"][ids] + self.w["transformer.wpe.weight"][torch.as_tensor(positions)]
        act = ACTIVATIONS[c["hidden_act"]]
        for i in range(c["num_hidden_layers"]):
            p = f"transformer.h.{i}."
            h = self._ln(x, p + "ln_1")
            q, k, v = self._conv1d(h, p + "attn.c_attn").split(c["hidden_size"], dim=-1)
            q, k, v = (t.view(n, H, D).transpose(0, 1) for t in (q, k, v))
            k, v, k_pos = _cached(cache, i, k, v, positions)
            scale = 1.0
            if not c["scale_attn_weights"]:
                scale = D ** 0.5  # undo the 1/sqrt(d) _attend applies
            if c["scale_attn_by_inverse_layer_idx"]:
                scale /= float(i + 1)
            a = self._attend(q, k, v, positions, k_pos, FULL, extra_scale=scale)
            a = a.transpose(0, 1).reshape(n, H * D)
            x = x + self._conv1d(a, p + "attn.c_proj")
            h = self._ln(x, p + "ln_2")
            x = x + self._conv1d(act(self._conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        x = self._ln(x, "transformer.ln_f")
        self.last_hidden = x  # transformers' last_hidden_state: the head's input, after ln_f
        head = self.w["transformer.wte.weight"] if c["tie_word_embeddings"] else self.w["lm_head.weight"]
        return x @ head.T

    def logits(self, ids):
        """Uncached forward of the whole sequence in one call: np.ndarray [n, V] float64."""
        with torch.no_grad():
            return self.forward(ids).numpy()

    def hidden_states(self, ids):
        """Uncached forward of the whole sequence in one call, returning transformers' last_hidden_state of the base
        model (LlamaModel, GPT2Model, ...): the rows the head reads, np.ndarray [n, hidden_size] float64."""
        with torch.no_grad():
            self.forward(ids)
            return self.last_hidden.numpy()

    def rope_types(self):
        return {p["rope_type"] for p in self.cfg["rope"].values()} if self.cfg["model_type"] != "gpt2" else set()


class Generator:
    """KV-cached continuation as transformers runs it: `prompt(ids)` in one call, then `step(token)` one position a
    call, keys cached after rotation. For longrope, at the step where the sequence first passes
    original_max_position_embeddings the cache is dropped and the whole sequence recomputed (what `generate` does
    for Phi-3); set recompute_longrope=False for a plain loop over past_key_values instead."""

    def __init__(self, model, recompute_longrope=True):
        self.m = model
        self.recompute_longrope = recompute_longrope
        self.ids = []
        self.cache = None

    def _longrope_switch(self, new_len):
        c = self.m.cfg
        if not self.recompute_longrope or "longrope" not in self.m.rope_types():
            return False
        omp = c["original_max_position_embeddings"] or c["max_position_embeddings"]
        return len(self.ids) <= omp < new_len

    def prompt(self, ids):
        self.ids = [int(t) for t in ids]
        self.cache = []
        with torch.no_grad():
            return self.m.forward(self.ids, cache=self.cache)[-1].numpy()

    def step(self, token):
        if self._longrope_switch(len(self.ids) + 1):
            return self.prompt(self.ids + [int(token)])
        self.ids.append(int(token))
        with torch.no_grad():
            return self.m.forward([int(token)], cache=self.cache)[-1].numpy()


def generation_call_lens(prompt_len, total_len):
    """For each position of a prompt + one-token steps, the max(position) + 1 of the call that fed it: the prompt's
    length for prompt positions, t + 1 for the step at t. With dynamic NTK an uncached forward that rotates each
    position with its own call's frequencies (forward(..., call_lens=...)) reproduces the cached rows."""
    lens = np.full(total_len, prompt_len, dtype=np.int64)
    lens[prompt_len:] = np.arange(prompt_len, total_len) + 1
    return lens
