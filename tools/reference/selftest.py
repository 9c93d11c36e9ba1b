# SPDX-License-Identifier: MIT
"""Self-checks of the Python reference side.

  1. safetensors_io round trip (F32, F16, BF16, metadata, header alignment, sharded directories).
  2. Activations: the fused torch kernels used by model.py match the written-out formulas.
  3. The sinusoidal table matches pe[p,2i] = sin(p/10000^(2i/d)), pe[p,2i+1] = cos(...).
  4. model.py against an independent numpy forward pass written straight from the spec, with
     attention computed position by position (one softmax per query over the keys it sees, from
     test_patterns.visible), for dense and every windowed/sparse kind.
  5. Causality: logits at positions <= i do not change when tokens after i change.
  6. Every golden under tests/goldens reloads and reproduces its logits.npy, a float32 forward
     stays well inside check_logits.py's default tolerance, and its attention is far from uniform.

Usage:
    /usr/bin/python3 tools/reference/selftest.py [--goldens tests/goldens]
"""

import argparse
import glob
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from model import (ACTIVATIONS, ReferenceModel, gelu_erf, gelu_tanh, head_groups, load_checkpoint,  # noqa: E402
                   logits_for, normalize_config, sinusoidal_table, visibility_mask)
from test_patterns import static_mask, visible  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)


def rel_err(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


# ---------------------------------------------------------------------------------------------
# independent numpy forward, straight from converter/reference-family.md


def np_layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_act(kind, x):
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "gelu":
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    raise ValueError(kind)


def np_forward(cfg, t, ids):
    c = normalize_config(cfg)
    t = {k: np.asarray(v, np.float64) for k, v in t.items()}
    n, d, H = len(ids), c["hidden_size"], c["num_heads"]
    dh = d // H
    eps = c["layer_norm_eps"]

    def lin(x, name):
        y = x @ t[name + ".weight"].T
        return y + t[name + ".bias"] if c["linear_bias"] else y

    if c["position_embedding"] == "learned":
        pos = t["pos_embed.weight"][:n]
    else:
        pos = np.zeros((n, d))
        for p in range(n):
            for i in range(0, d, 2):
                ang = p / 10000.0 ** (i / d)
                pos[p, i] = math.sin(ang)
                if i + 1 < d:
                    pos[p, i + 1] = math.cos(ang)
    x = t["embed.weight"][np.asarray(ids)] + pos

    def attn(x, L):
        q, k, v = (lin(x, f"layers.{L}.attn.{m}") for m in "qkv")
        out = np.zeros_like(x)
        for h in range(H):
            sl = slice(h * dh, (h + 1) * dh)
            for i in range(n):
                keys = [j for j in range(i + 1) if visible(c["attention"][L], H, h, i, j)]
                s = np.array([q[i, sl] @ k[j, sl] for j in keys]) / math.sqrt(dh)
                w = np.exp(s - s.max())
                w /= w.sum()
                out[i, sl] = w @ v[keys, sl]
        return lin(out, f"layers.{L}.attn.out")

    def mlp(x, L):
        return lin(np_act(c["activation"], lin(x, f"layers.{L}.mlp.fc1")), f"layers.{L}.mlp.fc2")

    def ln(x, name):
        return np_layer_norm(x, t[name + ".weight"], t[name + ".bias"], eps)

    for L in range(c["num_layers"]):
        if c["norm_position"] == "pre":
            x = x + attn(ln(x, f"layers.{L}.attn_norm"), L)
            x = x + mlp(ln(x, f"layers.{L}.mlp_norm"), L)
        else:
            x = ln(x + attn(x, L), f"layers.{L}.attn_norm")
            x = ln(x + mlp(x, L), f"layers.{L}.mlp_norm")
    if c["final_norm"]:
        x = ln(x, "final_norm")
    head = t["embed.weight"] if c["tie_word_embeddings"] else t["lm_head.weight"]
    logits = x @ head.T
    if c["lm_head_bias"]:
        logits = logits + t["lm_head.bias"]
    return logits


# ---------------------------------------------------------------------------------------------


def test_safetensors():
    rng = np.random.default_rng(0)
    t = {
        "a": rng.normal(size=(3, 5)).astype(np.float32),
        "b.weight": rng.normal(size=(7,)).astype(np.float16),
        "c": np.array(2.5, dtype=np.float32),
        "z": rng.normal(size=(4, 1, 2)).astype(np.float32),
    }
    with tempfile.TemporaryDirectory() as tmp:
        fn = os.path.join(tmp, "x.safetensors")
        safetensors_io.save(fn, t, metadata={"k": "v"}, bf16={"z"})
        back, meta = safetensors_io.load(fn, with_metadata=True)
        with open(fn, "rb") as f:
            (hn,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(hn))
        check(hn % 8 == 0, "safetensors: header length is a multiple of 8")
        check(header["z"]["dtype"] == "BF16" and header["b.weight"]["dtype"] == "F16"
              and header["a"]["dtype"] == "F32", "safetensors: dtypes recorded")
        check(meta == {"k": "v"}, "safetensors: metadata round trip")
        ok = all(np.array_equal(back[k], t[k]) and back[k].dtype == t[k].dtype for k in "a b.weight c".split())
        check(ok, "safetensors: F32/F16/scalar round trip is exact")
        bf_err = np.abs(back["z"] - t["z"]).max() / np.abs(t["z"]).max()
        check(back["z"].dtype == np.float32 and bf_err < 2 ** -8, f"safetensors: BF16 round trip (rel err {bf_err:.1e})")
        # sharded directory
        d2 = os.path.join(tmp, "ckpt")
        os.makedirs(d2)
        safetensors_io.save(os.path.join(d2, "model-00001-of-00002.safetensors"), {"a": t["a"]})
        safetensors_io.save(os.path.join(d2, "model-00002-of-00002.safetensors"), {"c": t["c"]})
        merged = safetensors_io.load_dir(d2)
        check(sorted(merged) == ["a", "c"], "safetensors: multi-file directory merge")


def test_activations():
    x = torch.linspace(-8, 8, 2001, dtype=torch.float64)
    e1 = (ACTIVATIONS["gelu"](x) - gelu_erf(x)).abs().max().item()
    e2 = (ACTIVATIONS["gelu_tanh"](x) - gelu_tanh(x)).abs().max().item()
    e3 = (ACTIVATIONS["gelu"](x) - ACTIVATIONS["gelu_tanh"](x)).abs().max().item()
    check(e1 < 1e-12, f"gelu (fused) == 0.5x(1+erf(x/sqrt2)) (max err {e1:.1e})")
    check(e2 < 1e-12, f"gelu_tanh (fused) == tanh formula (max err {e2:.1e})")
    check(e3 > 1e-4, f"gelu and gelu_tanh differ ({e3:.1e})")


def test_sinusoidal():
    n, d = 300, 64
    pe = sinusoidal_table(n, d).numpy()
    ref = np.zeros((n, d))
    for p in range(n):
        for i in range(d // 2):
            ref[p, 2 * i] = math.sin(p / 10000 ** (2 * i / d))
            ref[p, 2 * i + 1] = math.cos(p / 10000 ** (2 * i / d))
    err = np.abs(pe - ref).max()
    check(err < 1e-12, f"sinusoidal table matches the formula (max err {err:.1e})")


def random_case(cfg, n, seed):
    rng = np.random.default_rng(seed)
    m = ReferenceModel(cfg).double().eval()
    t = {}
    for name, p in m.param_map().items():
        if name.endswith("norm.weight"):
            t[name] = rng.uniform(0.8, 1.2, tuple(p.shape))
        elif name in ("embed.weight", "pos_embed.weight"):
            t[name] = rng.normal(0, 0.5, tuple(p.shape))
        else:
            t[name] = rng.normal(0, 0.2 if name.endswith("weight") else 0.1, tuple(p.shape))
    m.load_state(t)
    ids = rng.integers(0, cfg["vocab_size"], n).tolist()
    return m, t, ids


SMALL_CONFIGS = [
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 3,
     "max_position_embeddings": 40},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 2,
     "max_position_embeddings": 40, "norm_position": "post", "position_embedding": "sinusoidal",
     "activation": "relu", "tie_word_embeddings": False, "lm_head_bias": True, "intermediate_size": 40},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 3, "num_heads": 4,
     "max_position_embeddings": 40, "activation": "gelu_tanh", "linear_bias": False, "layer_norm_eps": 1e-6,
     "tie_word_embeddings": False, "attention": [{"kind": "dense"}] * 3},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 16, "num_layers": 1, "num_heads": 1,
     "max_position_embeddings": 40, "lm_head_bias": True, "norm_position": "post", "final_norm": True},
    # windowed and sparse attention kinds, with periods well inside the 33-40 tokens of the tests
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 4,
     "max_position_embeddings": 40, "attention": {"kind": "sliding", "window": 6}},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 2,
     "max_position_embeddings": 40, "position_embedding": "sinusoidal", "norm_position": "post",
     "attention": {"kind": "chunked", "chunk": 5, "chunks_before": 1, "chunks_after": 1}},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 3,
     "max_position_embeddings": 40, "attention": {"kind": "strided", "stride": 4}},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 4,
     "max_position_embeddings": 40, "attention": {"kind": "strided", "stride": 5, "heads": "split"}},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 3,
     "max_position_embeddings": 40, "attention": {"kind": "fixed", "block": 8, "summary": 2, "heads": "merged"}},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 2,
     "max_position_embeddings": 40, "activation": "relu",
     "attention": {"kind": "fixed", "block": 6, "summary": 1, "heads": "split"}},
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 3, "num_heads": 4,
     "max_position_embeddings": 40, "linear_bias": False,
     "attention": [{"kind": "sliding", "window": 3}, {"kind": "dense"}, {"kind": "fixed", "block": 4, "summary": 1}]},
    # heads in groups of different kinds within a layer
    {"model_type": "tern-reference", "vocab_size": 50, "hidden_size": 24, "num_layers": 2, "num_heads": 4,
     "max_position_embeddings": 40,
     "attention": {"kind": "groups", "groups": [{"num_heads": 1, "kind": "strided", "stride": 3},
                                                {"num_heads": 2, "kind": "fixed", "block": 5, "summary": 1, "heads": "split"},
                                                {"num_heads": 1, "kind": "sliding", "window": 4}]}},
]


def test_against_numpy():
    for i, cfg in enumerate(SMALL_CONFIGS):
        m, t, ids = random_case(cfg, 33, 100 + i)
        got = logits_for(m, ids)
        want = np_forward(cfg, t, ids)
        e = rel_err(got, want)
        check(e < 1e-12, f"model.py == independent numpy forward, config {i} (rel err {e:.1e})")


def test_causality():
    for i, cfg in enumerate(SMALL_CONFIGS):
        m, t, ids = random_case(cfg, 40, 200 + i)
        base = logits_for(m, ids)
        rng = np.random.default_rng(i)
        worst = 0.0
        changed_later = True
        for cut in (0, 7, 20, 38):
            ids2 = list(ids)
            for j in range(cut + 1, len(ids)):
                ids2[j] = int((ids2[j] + rng.integers(1, cfg["vocab_size"])) % cfg["vocab_size"])
            other = logits_for(m, ids2)
            worst = max(worst, float(np.abs(other[: cut + 1] - base[: cut + 1]).max()))
            changed_later &= bool(np.abs(other[cut + 1:] - base[cut + 1:]).max() > 1e-6)
        check(worst == 0.0 and changed_later,
              f"causality, config {i}: earlier logits unchanged (max diff {worst:.1e}), later ones change")


def attention_entropy(model, ids):
    """Mean entropy (nats) of the attention rows of every head, and of uniform attention over the same keys."""
    ents, uniform = [], []

    def hook(mod, inp, out):
        x = inp[0]
        q, k = mod.split_heads(mod.q(x)), mod.split_heads(mod.k(x))
        for a, b, spec in head_groups(mod.spec, mod.num_heads):
            if not static_mask(spec):  # routing: no [n, n] visibility, its clusters depend on the inputs
                continue
            qg, kg = q[..., a:b, :, :], k[..., a:b, :, :]
            H, n, dh = qg.shape[-3], qg.shape[-2], qg.shape[-1]
            mask = visibility_mask(spec, H, n)
            s = (qg @ kg.transpose(-1, -2)) * dh ** -0.5
            s = s.masked_fill(~mask, float("-inf"))
            p = torch.softmax(s, -1)
            ents.append(float(-(p * torch.log(p.clamp_min(1e-300))).sum(-1)[..., 1:].mean()))
            uniform.append(float(torch.log(mask.sum(-1)[..., 1:].double()).mean()))

    hs = [layer.attn.register_forward_hook(hook) for layer in model.layers]
    logits_for(model, ids)
    for h in hs:
        h.remove()
    if not ents:  # routing heads only
        return None, None
    return float(np.mean(ents)), float(np.mean(uniform))


def test_goldens(root):
    # Only the reference family's goldens; other model types have their own references.
    dirs = []
    for fn in sorted(glob.glob(os.path.join(root, "*", "config.json"))):
        with open(fn) as f:
            cfg = json.load(f)
        # Compressive goldens are evaluated segment by segment: make_compressive_goldens.py checks them.
        if cfg.get("model_type") == "tern-reference" and "compressive" not in json.dumps(cfg.get("attention")):
            dirs.append(os.path.dirname(fn))
    check(len(dirs) >= 4, f"found {len(dirs)} reference-family golden directories under {root}")
    for d in dirs:
        name = os.path.basename(d)
        m = load_checkpoint(d)
        ids = json.load(open(os.path.join(d, "ids.json")))
        want = np.load(os.path.join(d, "logits.npy"))
        got = logits_for(m, ids)
        e = rel_err(want, got)
        check(want.dtype == np.float32 and want.shape == (len(ids), m.cfg["vocab_size"]) and e < 1e-6,
              f"golden {name}: reload reproduces logits.npy {list(want.shape)} (rel err {e:.1e})")
        m32 = load_checkpoint(d, dtype=torch.float32)
        e32 = rel_err(logits_for(m32, ids), got)
        check(e32 < 1e-5, f"golden {name}: a float32 forward is within 1e-5 of it (rel err {e32:.1e})")
        check(len(set(ids)) > min(len(ids), m.cfg["vocab_size"]) // 4 and 0 <= min(ids) and max(ids) < m.cfg["vocab_size"],
              f"golden {name}: ids are random and in range")
        if len(ids) <= 512 and all(static_mask(a) for a in m.cfg["attention"]):
            # an independent numpy recomputation of the whole golden (slow for long ones)
            t = safetensors_io.load_dir(d)
            e2 = rel_err(np_forward(json.load(open(os.path.join(d, "config.json"))), t, ids), got)
            check(e2 < 1e-12, f"golden {name}: independent numpy forward agrees (rel err {e2:.1e})")
        ent, uni = attention_entropy(m, ids)
        if ent is not None:
            check(ent < 0.75 * uni, f"golden {name}: attention far from uniform "
                                    f"(mean entropy {ent:.2f} nats vs uniform {uni:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--goldens", default=os.path.join(here, "..", "..", "tests", "goldens"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    test_safetensors()
    test_activations()
    test_sinusoidal()
    test_against_numpy()
    test_causality()
    test_goldens(args.goldens)
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("\nall checks passed")


if __name__ == "__main__":
    main()
