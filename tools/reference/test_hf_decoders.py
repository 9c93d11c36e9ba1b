# SPDX-License-Identifier: MIT
"""Checks of hf_decoders.py and the hf_* goldens.

  1. Every hf_* golden reloads (sharded, BF16, F16 included) and reproduces logits.npy and generation_logits.npy.
  2. Cached generation equals the uncached forward: each cached row t equals the last row of one uncached call on
     ids[:t+1] (dynamic NTK: with each position rotated by the frequencies of the call that fed it); a plain
     past_key_values loop over longrope differs after the switch, as transformers' does.
  3. Window rule: through the attention kernel, the query at i averages exactly the keys j with i - w < j <= i.
  4. Sensitivity: nudging any one tensor of a golden (every norm gain, bias, matrix) changes its logits; each
     window case differs from dense attention and from window +- 1; soft-caps, q/k norms, Gemma 3's local theta and
     every RoPE scaling change the logits where they apply.
  5. Config defaults: keys left out of config.json take the class defaults (hf_llama_gqa, hf_gpt2), legacy and v5
     spellings resolve alike (rope "type" / "rope_type", rope_scaling / rope_parameters, Gemma 3 pattern /
     layer_types / nested rope_parameters).

Usage:
    /usr/bin/python3 tools/reference/test_hf_decoders.py [--goldens tests/goldens]
"""

import argparse
import copy
import glob
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_decoders as hd  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def load_case(d):
    m = hd.load_checkpoint(d)
    with open(os.path.join(d, "ids.json")) as f:
        ids = json.load(f)
    with open(os.path.join(d, "generation.json")) as f:
        gen = json.load(f)
    return m, ids, gen


def variant(m, **changes):
    """The same weights under a changed config.json."""
    raw = copy.deepcopy(m.raw)
    for k, v in changes.items():
        if v is None:
            raw.pop(k, None)
        else:
            raw[k] = v
    out = hd.HFDecoder.__new__(hd.HFDecoder)
    out.raw, out.cfg, out.w = raw, hd.resolve_config(raw), m.w
    return out


def gen_rows(m, ids, P, recompute=True):
    g = hd.Generator(m, recompute_longrope=recompute)
    return np.stack([g.prompt(ids[:P])] + [g.step(t) for t in ids[P:]])


def test_goldens(root):
    dirs = sorted(glob.glob(os.path.join(root, "hf_*")))
    check(len(dirs) >= 13, f"{len(dirs)} hf_* goldens found")
    for d in dirs:
        name = os.path.basename(d)
        m, ids, gen = load_case(d)
        e = rel(m.logits(ids), np.load(os.path.join(d, "logits.npy")))
        check(e < 1e-6, f"{name}: prompt logits reproduce (rel {e:.1e})")
        P, all_ids = gen["prompt"], gen["ids"]
        check(all_ids[:P] == ids, f"{name}: generation prompt is ids.json")
        rows = gen_rows(m, all_ids, P)
        e = rel(rows, np.load(os.path.join(d, "generation_logits.npy")))
        check(e < 1e-6 and rows.shape[0] >= 9, f"{name}: {rows.shape[0] - 1} generation steps reproduce (rel {e:.1e})")

        # cached == uncached
        lens = hd.generation_call_lens(P, len(all_ids)) if "dynamic" in m.rope_types() else None
        worst = 0.0
        for t in range(P - 1, len(all_ids)):
            with torch.no_grad():
                ref = m.forward(all_ids[:t + 1], call_lens=None if lens is None else lens[:t + 1])[-1].numpy()
            worst = max(worst, rel(rows[t - P + 1], ref))
        check(worst < 1e-10, f"{name}: cached rows equal the uncached forward of each prefix (worst rel {worst:.1e})")

        if "dynamic" in m.rope_types():
            mpe = m.cfg["max_position_embeddings"]
            plain = np.stack([m.logits(all_ids[:t + 1])[-1] for t in range(P - 1, len(all_ids))])
            k = mpe - P + 1  # first row whose call is longer than max_position_embeddings
            check(rel(rows[:k], plain[:k]) < 1e-10 and rel(rows[k + 1:], plain[k + 1:]) > 1e-3,
                  f"{name}: dynamic NTK rows equal a same-length uncached call up to max_position_embeddings "
                  f"and differ after it (stale keys in the cache), rel {rel(rows[k + 1:], plain[k + 1:]):.2f}")
        if "longrope" in m.rope_types():
            omp = m.cfg["original_max_position_embeddings"]
            loop = gen_rows(m, all_ids, P, recompute=False)
            k = omp - P + 1  # the row of the step that takes the sequence past original_max_position_embeddings
            check(rel(loop[:k], rows[:k]) < 1e-12 and rel(loop[k:], rows[k:]) > 1e-3,
                  f"{name}: longrope switches to long factors at length {omp + 1}; a plain cached loop keeps the "
                  f"short keys and differs from then on (rel {rel(loop[k:], rows[k:]):.2f})")


def test_window_rule():
    raw = {"model_type": "mistral", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
           "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1, "sliding_window": 4}
    m = hd.HFDecoder.__new__(hd.HFDecoder)
    m.cfg = hd.resolve_config(raw)
    n, w = 12, 4
    q = torch.zeros(1, n, 8, dtype=torch.float64)  # equal scores: the output is the mean of the visible values
    k = torch.zeros(1, n, 8, dtype=torch.float64)
    v = torch.eye(n, dtype=torch.float64)[None]
    pos = np.arange(n)
    out = m._attend(q, k, v, pos, pos, hd.SLIDING)[0].numpy()
    expect = np.zeros((n, n))
    for i in range(n):
        seen = [j for j in range(n) if i - w < j <= i]
        expect[i, seen] = 1.0 / len(seen)
    check(np.abs(out - expect).max() < 1e-15, "sliding window 4: query i sees exactly keys i-3 .. i")
    out = m._attend(q, k, v, pos, pos, hd.FULL)[0].numpy()
    check(np.abs(out - np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]).max() < 1e-15,
          "full attention: query i sees keys 0 .. i")


def test_sensitivity(root):
    for d in sorted(glob.glob(os.path.join(root, "hf_*"))):
        name = os.path.basename(d)
        m, ids, gen = load_case(d)
        base = m.logits(ids)
        rng = np.random.default_rng(5)
        dead = []
        for tname, t in sorted(m.w.items()):
            saved = t.clone()
            t += 0.05 * (t.std() if t.numel() > 1 and float(t.std()) > 0 else 1.0) * torch.from_numpy(
                rng.standard_normal(tuple(t.shape)))
            if rel(m.logits(ids), base) < 1e-4:
                dead.append(tname)
            t.copy_(saved)
        check(not dead, f"{name}: each of its {len(m.w)} tensors changes the logits{' ' + str(dead) if dead else ''}")

        c = m.cfg
        if any(lt == hd.SLIDING for lt in c["layer_types"]):
            w = c["sliding_window"]
            dense = variant(m, sliding_window=10 ** 6)
            check(rel(dense.logits(ids), base) > 1e-2, f"{name}: window {w} differs from dense "
                  f"(rel {rel(dense.logits(ids), base):.2f})")
            for dw in (-1, 1):
                e = rel(variant(m, sliding_window=w + dw).logits(ids), base)
                check(e > 1e-3, f"{name}: window {w} differs from window {w + dw} (rel {e:.3f})")
        if c.get("attn_softcap"):
            e = rel(variant(m, attn_logit_softcapping=1e6).logits(ids), base)
            check(e > 1e-2, f"{name}: attention soft-cap {c['attn_softcap']} matters (rel {e:.2f})")
        if c.get("final_softcap"):
            e = rel(variant(m, final_logit_softcapping=1e6).logits(ids), base)
            check(e > 1e-2, f"{name}: final soft-cap {c['final_softcap']} matters (rel {e:.2f})")
        if c["model_type"] == "gemma3_text":
            e = rel(variant(m, rope_local_base_freq=m.raw["rope_theta"]).logits(ids), base)
            check(e > 1e-2, f"{name}: rope_local_base_freq differs from rope_theta in effect (rel {e:.2f})")
            e = rel(variant(m, rope_scaling={"rope_type": "default"}).logits(ids), base)
            check(e > 1e-2, f"{name}: linear scaling on the global layer matters (rel {e:.2f})")
        if c["model_type"] == "gemma2":
            e = rel(variant(m, query_pre_attn_scalar=c["head_dim"]).logits(ids), base)
            check(e > 1e-2, f"{name}: query_pre_attn_scalar {m.raw['query_pre_attn_scalar']} != head_dim matters "
                  f"(rel {e:.2f})")
        scaled = m.raw.get("rope_scaling")
        if scaled and c["model_type"] != "gemma3_text":
            P, all_ids = gen["prompt"], gen["ids"]
            plain = variant(m, rope_scaling=None)
            e = rel(gen_rows(plain, all_ids, P), gen_rows(m, all_ids, P))
            check(e > 1e-3, f"{name}: rope_scaling {hd.resolve_config(m.raw)['rope'][c['layer_types'][0]]['rope_type']}"
                  f" changes the generation logits (rel {e:.3f})")


def test_config_rules(root):
    def res(**raw):
        return hd.resolve_config(raw)

    m, _, _ = load_case(os.path.join(root, "hf_llama_gqa"))
    c = m.cfg
    check(c["rms_norm_eps"] == 1e-6 and c["head_dim"] == 12 and c["hidden_act"] == "silu"
          and c["rope"][hd.FULL] == {"rope_type": "default", "rope_theta": 10000.0} and not c["qkv_bias"]
          and c["max_position_embeddings"] == 2048, "hf_llama_gqa: left-out keys take LlamaConfig's defaults")
    m, _, _ = load_case(os.path.join(root, "hf_gpt2"))
    c = m.cfg
    check(c["hidden_act"] == "gelu_new" and c["layer_norm_epsilon"] == 1e-5 and c["intermediate_size"] == 4 * 48
          and c["tie_word_embeddings"] and c["scale_attn_weights"], "hf_gpt2: left-out keys take GPT2Config's defaults")
    bare = {k[len("transformer."):]: v.numpy() for k, v in m.w.items()}  # older GPT-2 files: no prefix, mask buffers
    bare["h.0.attn.bias"] = np.tril(np.ones((1, 1, 64, 64), np.float32))
    ids = list(range(5, 25))
    check(rel(hd.HFDecoder(m.raw, bare).logits(ids), m.logits(ids)) == 0.0,
          "gpt2: names without `transformer.` (and attn.bias buffers) load the same model")
    check(res(model_type="gpt2", hidden_size=32, num_attention_heads=2)["hidden_size"] == 32,
          "GPT-2 accepts hidden_size / num_attention_heads as aliases of n_embd / n_head")

    check(res(model_type="qwen2", num_hidden_layers=4, use_sliding_window=True, sliding_window=8,
              max_window_layers=2)["layer_types"] == [hd.FULL, hd.FULL, hd.SLIDING, hd.SLIDING],
          "qwen2: layers >= max_window_layers slide when use_sliding_window")
    check(res(model_type="qwen2", num_hidden_layers=4, sliding_window=8, max_window_layers=2)["layer_types"]
          == [hd.FULL] * 4, "qwen2: no window without use_sliding_window")
    check(res(model_type="qwen3")["head_dim"] == 128 and res(model_type="qwen3")["rope"][hd.FULL]["rope_theta"] == 1e4,
          "qwen3: head_dim defaults to 128")
    check(res(model_type="gemma2", num_hidden_layers=4)["layer_types"] == [hd.SLIDING, hd.FULL] * 2,
          "gemma2: even layers (0, 2, ...) slide")
    g3 = res(model_type="gemma3_text", num_hidden_layers=7)
    check(g3["layer_types"] == [hd.SLIDING] * 5 + [hd.FULL, hd.SLIDING],
          "gemma3: default pattern 6 (5 local, 1 global)")
    check(g3["rope"][hd.SLIDING]["rope_theta"] == 1e4 and g3["rope"][hd.FULL]["rope_theta"] == 1e6,
          "gemma3: local theta 10000, global 1e6 by default")
    nested = res(model_type="gemma3_text", num_hidden_layers=3, layer_types=[hd.SLIDING, hd.SLIDING, hd.FULL],
                 rope_parameters={hd.SLIDING: {"rope_type": "default", "rope_theta": 50.0},
                                  hd.FULL: {"rope_type": "linear", "factor": 2.0, "rope_theta": 9e4}})
    check(nested["rope"][hd.SLIDING]["rope_theta"] == 50.0 and nested["rope"][hd.FULL]["rope_type"] == "linear"
          and nested["layer_types"][2] == hd.FULL, "gemma3: v5 nested rope_parameters and explicit layer_types")
    a = res(model_type="llama", rope_scaling={"type": "linear", "factor": 2.0}, rope_theta=50.0)
    b = res(model_type="llama", rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 50.0})
    check(a["rope"] == b["rope"], "llama: legacy rope_scaling/type + rope_theta equal v5 rope_parameters")
    check(res(model_type="phi3", rope_scaling={"type": "su", "short_factor": [1.0] * 48,
                                                "long_factor": [1.0] * 48})["rope"][hd.FULL]["rope_type"] == "longrope",
          "phi3: rope type 'su' means longrope")
    check(res(model_type="mistral")["layer_types"] == [hd.SLIDING] * 32 and res(model_type="mistral")[
        "sliding_window"] == 4096, "mistral: every layer slides, window 4096 by default")
    check(res(model_type="phi3", num_attention_heads=4, hidden_size=64, partial_rotary_factor=0.5)["rotary_dim"] == 8,
          "phi3: partial_rotary_factor rotates int(head_dim * factor) dims")


def test_rope_formulas():
    # llama3: each frequency against the piecewise rule written out
    c = {"rotary_dim": 16}
    p = {"rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 64}
    got, _ = hd.ROPE_INIT["llama3"](c, p, 1)
    want = []
    for i in range(8):
        f = 10000.0 ** (-2 * i / 16)
        wl = 2 * math.pi / f
        if wl < 64 / 4:
            want.append(f)
        elif wl > 64 / 1:
            want.append(f / 8)
        else:
            s = (64 / wl - 1) / (4 - 1)
            want.append((1 - s) * f / 8 + s * f)
    check(np.allclose(got, want, rtol=1e-14), "llama3 frequencies: keep / smooth / divide by wavelength")
    # yarn: ramp ends, and the attention factor 0.1 ln(s) + 1
    c = {"rotary_dim": 12, "max_position_embeddings": 256}
    inv, af = hd.ROPE_INIT["yarn"](c, {"rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64}, 1)
    base = 10000.0 ** (-np.arange(0, 12, 2) / 12)
    check(abs(af - (0.1 * math.log(4) + 1)) < 1e-15 and abs(inv[0] - base[0]) < 1e-15
          and abs(inv[-1] - base[-1] / 4) < 1e-15, "yarn: highest frequency kept, lowest divided by factor, "
          "attention factor 0.1 ln 4 + 1")
    # dynamic: unchanged up to max_position_embeddings, then base * (f L / M - (f - 1))^(d / (d - 2))
    c = {"rotary_dim": 12, "max_position_embeddings": 32}
    p = {"rope_theta": 1000.0, "factor": 3.0}
    same = hd.ROPE_INIT["dynamic"](c, p, 20)[0]
    check(np.allclose(same, 1000.0 ** (-np.arange(0, 12, 2) / 12), rtol=1e-15), "dynamic: plain RoPE up to 32")
    big = hd.ROPE_INIT["dynamic"](c, p, 40)[0]
    b = 1000.0 * (3.0 * 40 / 32 - 2.0) ** (12 / 10)
    check(np.allclose(big, b ** (-np.arange(0, 12, 2) / 12), rtol=1e-14), "dynamic: base grows with the call length")
    # longrope attention factor
    c = {"rotary_dim": 4, "max_position_embeddings": 96, "original_max_position_embeddings": 24}
    p = {"rope_theta": 1e4, "short_factor": [1.0, 2.0], "long_factor": [3.0, 4.0]}
    inv_s, af = hd.ROPE_INIT["longrope"](c, p, 24)
    inv_l, _ = hd.ROPE_INIT["longrope"](c, p, 25)
    check(abs(af - math.sqrt(1 + math.log(4) / math.log(24))) < 1e-15 and np.allclose(inv_s * [1, 2], inv_l * [3, 4])
          and inv_s[0] == 1.0, "longrope: short factors up to original_max, long beyond; sqrt(1 + ln s / ln orig)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--goldens", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    test_window_rule()
    test_rope_formulas()
    test_config_rules(args.goldens)
    test_goldens(args.goldens)
    test_sensitivity(args.goldens)
    print(f"\n{len(FAILURES)} failed" if FAILURES else "\nall passed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
