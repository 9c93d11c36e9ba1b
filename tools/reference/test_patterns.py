# SPDX-License-Identifier: MIT
"""Checks of the attention kinds in model.py against the table in converter/reference-family.md.

  1. Masks: model.visibility_mask agrees, entry by entry, with `visible` below, a per-(h, i, j)
     evaluation of the table written separately (plain Python integers, one `if` per row of the
     table), for many attention objects including edge cases, and for every layer of every golden
     at its full length (all rows up to 600 tokens, sampled rows beyond). Every query sees itself.
  2. The mask is what the forward pass uses: in a one-layer model, changing the token at j changes
     the logits at i exactly when some head's query i sees key j (or j = i), and leaves them
     bit-identical otherwise. masked_attention with a dense object equals dense_attention.
  3. Causality: changing tokens after position i never changes the logits at positions <= i, for
     small models of every kind and for every golden checkpoint.
  4. Sensitivity: each golden's logits move far beyond check_logits.py's tolerance (1e-4 relative)
     when its pattern is perturbed by one (window +-1, one chunk more or less, stride +-1, summary
     +-1, heads merged/split, split halves swapped), so the goldens pin each pattern down.
  5. Config validation: bad attention objects are rejected, defaults are filled in.

Usage:
    /usr/bin/python3 tools/reference/test_patterns.py [--goldens tests/goldens] [--quick]
"""

import argparse
import glob
import json
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as model_module  # noqa: E402
from model import (ReferenceModel, dense_attention, load_checkpoint, logits_for, masked_attention,  # noqa: E402
                   normalize_config, visibility_mask)

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)


# ---------------------------------------------------------------------------------------------
# the table, one (h, i, j) at a time


def visible(spec, H, h, i, j):
    """Whether query i sees key j in head h (of H), straight from the "Attention objects" table."""
    if j > i:  # every kind is causal
        return False
    kind = spec.get("kind", "dense")
    if kind == "groups":  # consecutive heads, each group by its own rule over its own heads
        start = 0
        for group in spec["groups"]:
            if h < start + group["num_heads"]:
                return visible(group, group["num_heads"], h - start, i, j)
            start += group["num_heads"]
        raise ValueError(f"head {h} beyond the groups")
    second_half = h >= H // 2
    split = spec.get("heads", "merged") == "split"
    if kind == "dense":
        return True
    if kind == "sliding":
        return i - spec["window"] < j
    if kind == "chunked":
        C = spec["chunk"]
        return j // C >= i // C - spec.get("chunks_before", 1)
    if kind == "strided":
        l = spec["stride"]
        if not split:
            return i - l < j or (i - j) % l == 0
        if not second_half:
            return i - l < j
        return (i - j) % l == 0
    if kind == "fixed":
        l, c = spec["block"], spec["summary"]
        if not split:
            return j // l == i // l or j % l >= l - c
        if not second_half:
            return j // l == i // l
        return j % l >= l - c or j == i
    raise ValueError(kind)


def static_mask(spec):
    """Whether the pattern is fixed by positions alone (routing's clusters depend on the inputs)."""
    if spec.get("kind") == "groups":
        return all(static_mask(g) for g in spec["groups"])
    return spec.get("kind", "dense") != "routing"


def table_mask(spec, H, n, rows):
    """np.bool_ [H, len(rows), n] from `visible`."""
    out = np.zeros((H, len(rows), n), dtype=bool)
    for h in range(H):
        for r, i in enumerate(rows):
            for j in range(n):
                out[h, r, j] = visible(spec, H, h, i, j)
    return out


SPECS = [
    ({"kind": "dense"}, 3),
    ({"kind": "sliding", "window": 1}, 2),
    ({"kind": "sliding", "window": 5}, 3),
    ({"kind": "sliding", "window": 200}, 1),  # wider than the sequence: dense
    ({"kind": "chunked", "chunk": 1}, 2),
    ({"kind": "chunked", "chunk": 7}, 2),  # chunks_before defaults to 1
    ({"kind": "chunked", "chunk": 7, "chunks_before": 0}, 2),
    ({"kind": "chunked", "chunk": 5, "chunks_before": 3, "chunks_after": 2}, 2),
    ({"kind": "strided", "stride": 1}, 2),
    ({"kind": "strided", "stride": 6}, 3),  # heads defaults to merged
    ({"kind": "strided", "stride": 6, "heads": "split"}, 2),
    ({"kind": "strided", "stride": 4, "heads": "split"}, 6),
    ({"kind": "strided", "stride": 1, "heads": "split"}, 4),
    ({"kind": "fixed", "block": 1, "summary": 1}, 2),
    ({"kind": "fixed", "block": 8, "summary": 3}, 3),
    ({"kind": "fixed", "block": 8, "summary": 8}, 2),  # every key is a summary: dense
    ({"kind": "fixed", "block": 8, "summary": 1, "heads": "split"}, 2),
    ({"kind": "fixed", "block": 6, "summary": 2, "heads": "split"}, 4),
    ({"kind": "fixed", "block": 1, "summary": 1, "heads": "split"}, 2),
    # head groups: each group's rule on its own heads, in order
    ({"kind": "groups", "groups": [{"num_heads": 1, "kind": "sliding", "window": 3},
                                   {"num_heads": 2, "kind": "strided", "stride": 4, "heads": "split"},
                                   {"num_heads": 1, "kind": "fixed", "block": 6, "summary": 2}]}, 4),
    ({"kind": "groups", "groups": [{"num_heads": 2, "kind": "fixed", "block": 5, "summary": 1, "heads": "split"},
                                   {"num_heads": 1, "kind": "chunked", "chunk": 4, "chunks_before": 0}]}, 3),
]


def golden_dirs(root):
    """The golden directories of the reference family (other model types have their own references)."""
    out = []
    for d in sorted(glob.glob(os.path.join(root, "*", "config.json"))):
        with open(d) as f:
            cfg = json.load(f)
        # Compressive goldens are evaluated segment by segment: make_compressive_goldens.py checks them.
        if cfg.get("model_type") == model_module.MODEL_TYPE and "compressive" not in json.dumps(cfg.get("attention")):
            out.append(os.path.dirname(d))
    return out


def test_masks(goldens, quick):
    for spec, H in SPECS:
        n = 61
        want = table_mask(spec, H, n, range(n))
        got = visibility_mask(spec, H, n).numpy()
        check(got.shape == (H, n, n) and np.array_equal(got, want),
              f"mask == table, {json.dumps(spec)}, H={H}, n={n} ({int(want.sum())} visible pairs)")
        check(all(got[h, i, i] for h in range(H) for i in range(n)), f"every query sees itself, {json.dumps(spec)}")
    rng = random.Random(0)
    for d in goldens:
        with open(os.path.join(d, "config.json")) as f:
            raw = json.load(f)  # as written: `visible` applies the spec's defaults itself
        with open(os.path.join(d, "ids.json")) as f:
            n = len(json.load(f))
        H = raw["num_heads"]
        att = raw.get("attention", {"kind": "dense"})
        layers = [(f"layer {L}", a) for L, a in enumerate(att)] if isinstance(att, list) else [("all layers", att)]
        for L, spec in layers:
            if spec.get("kind", "dense") == "dense" or not static_mask(spec):
                continue
            limit = 150 if quick else 600
            rows = list(range(n)) if n <= limit else sorted(set(rng.sample(range(n), 100)) | {0, n - 1})
            want = table_mask(spec, H, n, rows)
            got = visibility_mask(spec, H, n).numpy()[:, rows, :]
            check(np.array_equal(got, want), f"mask == table, golden {os.path.basename(d)} ({L}, "
                                             f"{json.dumps(spec)}, H={H}, n={n}, {len(rows)} rows)")


# ---------------------------------------------------------------------------------------------
# small random models


def random_model(cfg, seed, qk_std=0.4):
    rng = np.random.default_rng(seed)
    m = ReferenceModel(cfg).double().eval()
    t = {}
    for name, p in m.param_map().items():
        shape = tuple(p.shape)
        if name.endswith("norm.weight"):
            t[name] = rng.uniform(0.8, 1.2, shape)
        elif name in ("embed.weight", "pos_embed.weight"):
            t[name] = rng.normal(0, 0.5, shape)
        elif name.endswith(("attn.q.weight", "attn.k.weight")):
            t[name] = rng.normal(0, qk_std, shape)
        else:
            t[name] = rng.normal(0, 0.2 if name.endswith("weight") else 0.1, shape)
    m.load_state(t)
    return m


def small_config(attention, layers, heads, n, **extra):
    cfg = {"model_type": "tern-reference", "vocab_size": 40, "hidden_size": 8 * heads, "num_layers": layers,
           "num_heads": heads, "max_position_embeddings": n, "attention": attention}
    cfg.update(extra)
    return cfg


def test_one_layer_dependencies():
    """With one layer, logits at i depend on token j exactly when some head's query i sees key j, or j = i."""
    n = 40
    for k, (spec, H) in enumerate(SPECS):
        cfg = small_config(spec, 1, H, n, norm_position=("post" if k % 2 else "pre"))
        m = random_model(cfg, 300 + k)
        rng = np.random.default_rng(k)
        ids = rng.integers(0, 40, n).tolist()
        base = logits_for(m, ids)
        ok = True
        bad = None
        for j in range(n):
            ids2 = list(ids)
            ids2[j] = (ids2[j] + 1 + int(rng.integers(0, 39))) % 40
            diff = np.abs(logits_for(m, ids2) - base).max(-1)  # [n]
            for i in range(n):
                expect = j == i or any(visible(spec, H, h, i, j) for h in range(H))
                got = diff[i] > 1e-9
                exact_zero = diff[i] == 0.0
                if expect != got or (not expect and not exact_zero):
                    ok = False
                    bad = bad or (i, j, float(diff[i]), expect)
        check(ok, f"one layer: logits at i depend on token j iff visible, {json.dumps(spec)}, H={H}"
                  + (f" (first mismatch i={bad[0]} j={bad[1]} diff {bad[2]:.1e}, expected "
                     f"{'a change' if bad[3] else 'none'})" if bad else ""))


def test_dense_paths_agree():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 50, 8, generator=g, dtype=torch.float64) * 3 for _ in range(3))
    e = float((masked_attention(q, k, v, {"kind": "dense"}) - dense_attention(q, k, v, {"kind": "dense"})).abs().max())
    check(e < 1e-14, f"masked_attention(dense) == dense_attention (max diff {e:.1e})")


def causality(m, ids, cuts, vocab, rng):
    base = logits_for(m, ids)
    worst, changed_later = 0.0, True
    for cut in cuts:
        ids2 = list(ids)
        for j in range(cut + 1, len(ids)):
            ids2[j] = int((ids2[j] + rng.integers(1, vocab)) % vocab)
        other = logits_for(m, ids2)
        worst = max(worst, float(np.abs(other[: cut + 1] - base[: cut + 1]).max()))
        if cut + 1 < len(ids):
            changed_later &= bool(np.abs(other[cut + 1:] - base[cut + 1:]).max() > 1e-6)
    return worst, changed_later


def test_causality_small():
    n = 70
    cases = [(spec, H) for spec, H in SPECS] + [
        ([{"kind": "sliding", "window": 4}, {"kind": "dense"}, {"kind": "fixed", "block": 5, "summary": 2}], 2),
        ([{"kind": "strided", "stride": 3, "heads": "split"}, {"kind": "chunked", "chunk": 4, "chunks_before": 0}], 2),
    ]
    for k, (att, H) in enumerate(cases):
        layers = len(att) if isinstance(att, list) else 2
        m = random_model(small_config(att, layers, H, n), 400 + k)
        rng = np.random.default_rng(k)
        ids = rng.integers(0, 40, n).tolist()
        worst, later = causality(m, ids, (0, 9, 33, 68), 40, rng)
        check(worst == 0.0 and later, f"causality, {json.dumps(att)}: earlier logits unchanged "
                                      f"(max diff {worst:.1e}), later ones change")


# ---------------------------------------------------------------------------------------------
# goldens


def rel_err(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def swapped_halves(spec, H, n):
    m = ORIGINAL_MASK(spec, H, n)
    return torch.cat([m[H // 2:], m[: H // 2]])


ORIGINAL_MASK = visibility_mask


def mutants(spec):
    """(description, replacement attention object or mask function) for patterns one step off `spec`."""
    kind = spec.get("kind", "dense")
    s = dict(spec)
    out = []
    if kind == "groups":
        # each group one step off (objects only), and the groups laid over the heads in the reverse order
        groups = spec["groups"]
        for g, group in enumerate(groups):
            for what, mutant in mutants(group):
                try:  # e.g. "split" heads need an even group
                    if callable(mutant):
                        continue
                    model_module.normalize_attention(mutant, group["num_heads"])
                except ValueError:
                    continue
                out.append((f"group {g}: {what}", {**s, "groups": groups[:g] + [mutant] + groups[g + 1:]}))
        if groups != groups[::-1] and static_mask(spec):  # a routing group keeps its own centroids
            out.append(("groups reversed", {**s, "groups": groups[::-1]}))
        return out
    if kind == "sliding":
        out += [("window - 1", {**s, "window": s["window"] - 1}), ("window + 1", {**s, "window": s["window"] + 1})]
    elif kind == "chunked":
        b = s.get("chunks_before", 1)
        out += [("chunks_before + 1", {**s, "chunks_before": b + 1}),
                ("chunk - 1", {**s, "chunk": s["chunk"] - 1})]
        if b > 0:
            out.append(("chunks_before - 1", {**s, "chunks_before": b - 1}))
    elif kind == "strided":
        other = "merged" if s.get("heads", "merged") == "split" else "split"
        out += [("stride - 1", {**s, "stride": s["stride"] - 1}), ("stride + 1", {**s, "stride": s["stride"] + 1}),
                (f"heads {other}", {**s, "heads": other})]
        if other == "merged":
            out.append(("split halves swapped", swapped_halves))
    elif kind == "fixed":
        other = "merged" if s.get("heads", "merged") == "split" else "split"
        out += [("summary - 1", {**s, "summary": s["summary"] - 1}), ("summary + 1", {**s, "summary": s["summary"] + 1}),
                ("block - 1", {**s, "block": s["block"] - 1}), (f"heads {other}", {**s, "heads": other})]
        if other == "merged":
            out.append(("split halves swapped", swapped_halves))
    return out


def test_goldens(root, quick):
    for d in golden_dirs(root):
        name = os.path.basename(d)
        m = load_checkpoint(d)
        with open(os.path.join(d, "ids.json")) as f:
            ids = json.load(f)
        want = np.load(os.path.join(d, "logits.npy")).astype(np.float64)
        kinds = {a["kind"] for a in m.cfg["attention"]}
        if kinds == {"dense"}:
            continue
        got = logits_for(m, ids)
        check(rel_err(got, want) < 1e-6, f"golden {name}: model.py reproduces logits.npy (rel err {rel_err(got, want):.1e})")
        rng = np.random.default_rng(7)
        n = len(ids)
        cuts = (n // 3,) if quick else (0, n // 3, n - 2)
        # Routing membership is a top-w over the whole sequence, so earlier outputs depend on later tokens
        # (converter/reference-family.md, Routing attention): causality holds for the position-fixed patterns only.
        if all(static_mask(a) for a in m.cfg["attention"]):
            worst, later = causality(m, ids, cuts, m.cfg["vocab_size"], rng)
            check(worst == 0.0 and later, f"golden {name}: causality at cuts {cuts} (max diff {worst:.1e})")
        if quick:
            continue
        # Perturb each distinct attention object in every layer that uses it.
        specs = []
        for spec in m.cfg["attention"]:
            if spec not in specs:
                specs.append(spec)
        for spec in specs:
            targets = [layer for layer in m.layers if layer.attn.spec == spec]
            for what, mutant in mutants(spec):
                saved = [layer.attn.spec for layer in m.layers]
                try:
                    if callable(mutant):
                        target_specs = [layer.attn.spec for layer in targets]
                        model_module.visibility_mask = lambda s, H, n_, f=mutant, ts=target_specs: \
                            f(s, H, n_) if any(s is t for t in ts) else ORIGINAL_MASK(s, H, n_)
                    else:
                        for layer in targets:
                            layer.attn.spec = model_module.normalize_attention(mutant, m.cfg["num_heads"])
                    e = rel_err(logits_for(m, ids), want)
                finally:
                    model_module.visibility_mask = ORIGINAL_MASK
                    for layer, s in zip(m.layers, saved):
                        layer.attn.spec = s
                check(e > 1e-2, f"golden {name}: {json.dumps(spec)} with {what} differs from the golden "
                                f"(rel err {e:.2e})")


# ---------------------------------------------------------------------------------------------
# config validation


def test_validation():
    base = {"model_type": "tern-reference", "vocab_size": 10, "hidden_size": 8, "num_layers": 2, "num_heads": 2,
            "max_position_embeddings": 16}
    bad = [
        {"kind": "sparse"},
        {"kind": "sliding"},
        {"kind": "sliding", "window": 0},
        {"kind": "sliding", "window": 2.0},
        {"kind": "sliding", "window": True},
        {"kind": "sliding", "window": 2 ** 31},
        {"kind": "chunked", "chunk": 0},
        {"kind": "chunked", "chunk": 4, "chunks_before": -1},
        {"kind": "chunked", "chunk": 4, "chunks_after": -1},
        {"kind": "strided", "stride": 0},
        {"kind": "strided", "stride": 4, "heads": "both"},
        {"kind": "fixed", "block": 0, "summary": 1},
        {"kind": "fixed", "block": 4, "summary": 0},
        {"kind": "fixed", "block": 4, "summary": 5},
        {"kind": "fixed", "block": 4},
        "dense",
        {"kind": "groups"},
        {"kind": "groups", "groups": []},
        {"kind": "groups", "groups": [{"num_heads": 1}]},  # 1 head of 2
        {"kind": "groups", "groups": [{"num_heads": 1}, {"num_heads": 2}]},
        {"kind": "groups", "groups": [{"kind": "dense"}, {"num_heads": 1}]},
        {"kind": "groups", "groups": [{"num_heads": 1, "kind": "groups", "groups": [{"num_heads": 1}]},
                                      {"num_heads": 1}]},
        {"kind": "groups", "groups": [{"num_heads": 1, "kind": "compressive", "mem_len": 2, "cmem_len": 2, "rate": 2},
                                      {"num_heads": 1}]},
        {"kind": "groups", "groups": [{"num_heads": 1, "kind": "strided", "stride": 2, "heads": "split"},
                                      {"num_heads": 1}]},
    ]
    for a in bad:
        try:
            normalize_config({**base, "attention": a})
            check(False, f"rejects attention {json.dumps(a)}")
        except ValueError as e:
            check(True, f"rejects attention {json.dumps(a)}: {e}")
    for a in ({"kind": "strided", "stride": 4, "heads": "split"}, {"kind": "fixed", "block": 4, "summary": 1, "heads": "split"}):
        try:
            normalize_config({**base, "num_heads": 1, "attention": a})
            check(False, f"rejects split heads with an odd head count, {json.dumps(a)}")
        except ValueError as e:
            check(True, f"rejects split heads with an odd head count: {e}")
    for att in ([{"kind": "dense"}], [{"kind": "dense"}] * 3):
        try:
            normalize_config({**base, "attention": att})
            check(False, f"rejects an attention list of {len(att)} for 2 layers")
        except ValueError:
            check(True, f"rejects an attention list of {len(att)} for 2 layers")
    c = normalize_config({**base, "attention": [{"kind": "chunked", "chunk": 4}, {"kind": "fixed", "block": 4, "summary": 4}]})
    check(c["attention"] == [{"kind": "chunked", "chunk": 4, "chunks_before": 1, "chunks_after": 0},
                             {"kind": "fixed", "block": 4, "summary": 4, "heads": "merged"}],
          f"defaults filled in: {c['attention']}")
    c = normalize_config({**base, "attention": {}})
    check(c["attention"] == [{"kind": "dense"}] * 2, "an object without kind is dense (as in the converter)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--goldens", default=os.path.join(here, "..", "..", "tests", "goldens"))
    ap.add_argument("--quick", action="store_true", help="fewer mask rows and causality cuts, no sensitivity checks")
    args = ap.parse_args()
    torch.set_num_threads(1)
    test_validation()
    test_masks(golden_dirs(args.goldens), args.quick)
    test_dense_paths_agree()
    test_one_layer_dependencies()
    test_causality_small()
    test_goldens(args.goldens, args.quick)
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("\nall checks passed")


if __name__ == "__main__":
    main()
