# SPDX-License-Identifier: MIT
"""Writes tests/goldens/sinks/<case>/: attention-sink and context-shift fixtures on the hf_llama_* checkpoints.

Each case reuses a checkpoint of tests/goldens by name ("model") and holds
  case.json   sinks: {"kind": "sinks", "model", "sink_tokens": S, "sink_window": W, "calls": [[ids], ...]}
              shift: {"kind": "shift", "model", "max_tokens": L, "keep": K, "prompt": [ids], "appended": [ids]}
  logits.npy  float32, rounded from streaming_sinks.py's float64:
              sinks: every row of every call, concatenated [sum of call lengths, vocab];
              shift: the prompt's last row, then one row per appended token [1 + len(appended), vocab].

Ids are random in [0, vocab) from a numpy Generator seeded per case, so the files regenerate bit for bit:

    /usr/bin/python3 tools/reference/make_sinks_goldens.py           # write
    /usr/bin/python3 tools/reference/make_sinks_goldens.py --check   # recompute and compare with the files

For each case it also prints how far the fixture is from what a wrong implementation would give (dense attention
without eviction, keys rotated at absolute positions, dynamic frequencies left unscaled, the yarn attention factor
applied again in the shift), so a test at 1e-4 can tell them apart.
"""

import argparse
import copy
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_decoders as hf  # noqa: E402
import streaming_sinks as ss  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDENS = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "goldens"))
OUT = os.path.join(GOLDENS, "sinks")

# name: (kind, model, seed, parameters, call lengths / (prompt, appended))
CASES = [
    ("gqa_s4_w24", "sinks", "hf_llama_gqa", 101, dict(S=4, W=24), [40] + [1] * 30 + [5] + [1] * 20),
    ("mha_s4_w24", "sinks", "hf_llama_mha", 102, dict(S=4, W=24), [10, 10] + [1] * 40 + [6]),
    ("gqa_window_only", "sinks", "hf_llama_gqa", 103, dict(S=0, W=16), [12] + [1] * 38),
    ("dynamic_s2_w20", "sinks", "hf_llama_dynamic", 104, dict(S=2, W=20), [10] + [1] * 40),
    # calls whose held + n passes max_position_embeddings 32, so dynamic NTK scales their frequencies
    ("dynamic_s2_w20_calls", "sinks", "hf_llama_dynamic", 105, dict(S=2, W=20),
     [10] + [1] * 20 + [14] + [1] * 5 + [30]),
    ("gqa_shift", "shift", "hf_llama_gqa", 201, dict(L=32, K=12), (20, 60)),
    ("mha_shift", "shift", "hf_llama_mha", 202, dict(L=24, K=8), (24, 40)),
    ("yarn_shift", "shift", "hf_llama_yarn", 203, dict(L=20, K=6), (10, 30)),
]


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def unscaled(model):
    """The model with its dynamic rope read as default (the frequencies of any length <= max_position_embeddings)."""
    m = copy.copy(model)
    m.cfg = copy.deepcopy(model.cfg)
    for p in m.cfg["rope"].values():
        p["rope_type"] = "default"
    return m


def run_sinks(model, S, W, calls, absolute=False):
    s = ss.SinkStream(model, S, W, absolute=absolute)
    rows = [s.call(c) for c in calls]
    if not np.array_equal(s.positions, s.expected_positions()):
        raise AssertionError(f"sink cache holds {s.positions.tolist()}")
    return np.concatenate(rows)


def run_shift(model, L, K, prompt, appended, factor_again=False):
    g = ss.ShiftGenerator(model, L, K, factor_again=factor_again)
    rows = [g.prompt(prompt)] + [g.append(t) for t in appended]
    return np.array(rows), g.shifts


def make_case(name, kind, model_name, seed, par, shape, models):
    m = models[model_name]
    rng = np.random.default_rng(seed)
    V = m.cfg["vocab_size"]
    notes = []
    if kind == "sinks":
        S, W = par["S"], par["W"]
        ids = rng.integers(0, V, sum(shape)).tolist()
        calls, at = [], 0
        for n in shape:
            calls.append(ids[at:at + n])
            at += n
        logits = run_sinks(m, S, W, calls)
        meta = {"kind": "sinks", "model": model_name, "sink_tokens": S, "sink_window": W, "calls": calls}
        # rows up to the end of the first call that passes S + W equal the uncached forward; the cut follows it
        ends = np.cumsum([len(c) for c in calls])
        assert ends[-1] > S + W, f"{name} never evicts"
        cut = int(ends[np.argmax(ends > S + W)])
        assert rel(m.logits(ids[:cut]), logits[:cut]) < 1e-9  # (dynamic: the prefix's own frequencies)
        dense = m.logits(ids)
        notes.append(f"dense (no eviction) rows {cut}..: rel {rel(dense[cut:], logits[cut:]):.2f}")
        absolute = run_sinks(m, S, W, calls, absolute=True)
        notes.append(f"absolute positions: rel {rel(absolute, logits):.1e}")
        if "dynamic" in m.rope_types():
            notes.append(f"unscaled frequencies: rel {rel(run_sinks(unscaled(m), S, W, calls), logits):.2e}")
        rows = len(ids)
    else:
        L, K = par["L"], par["K"]
        P, A = shape
        ids = rng.integers(0, V, P + A).tolist()
        prompt, appended = ids[:P], ids[P:]
        logits, shifts = run_shift(m, L, K, prompt, appended)
        meta = {"kind": "shift", "model": model_name, "max_tokens": L, "keep": K, "prompt": prompt,
                "appended": appended}
        dense = m.logits(ids)[P - 1:]
        first = L - P + 1  # rows before the first shift
        assert rel(dense[:first], logits[:first]) < 1e-9
        notes.append(f"{shifts} shifts; dense (no shift) rows {first}..: rel {rel(dense[first:], logits[first:]):.2f}")
        if any(p["rope_type"] == "yarn" for p in m.cfg["rope"].values()):
            again, _ = run_shift(m, L, K, prompt, appended, factor_again=True)
            notes.append(f"attention factor applied again: rel {rel(again, logits):.2e}")
        rows = 1 + len(appended)
    out = logits.astype(np.float32)
    assert out.shape == (rows, V), out.shape
    return meta, out, notes


def case_json(meta):
    """One key a line, each call's ids on one line."""
    lines = []
    for k, v in meta.items():
        if k == "calls":
            inner = ",\n".join("    " + json.dumps(c) for c in v)
            lines.append(f'  "calls": [\n{inner}\n  ]')
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files instead of writing them")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    models = {n: hf.load_checkpoint(os.path.join(GOLDENS, n)) for n in sorted({c[2] for c in CASES})}
    bad = 0
    for name, kind, model_name, seed, par, shape in CASES:
        meta, logits, notes = make_case(name, kind, model_name, seed, par, shape, models)
        d = os.path.join(args.out, name)
        text = case_json(meta)
        if args.check:
            same = (open(os.path.join(d, "case.json")).read() == text
                    and np.array_equal(np.load(os.path.join(d, "logits.npy")), logits))
            bad += not same
            print(f"{'ok  ' if same else 'DIFF'} {name}")
            continue
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "case.json"), "w") as f:
            f.write(text)
        np.save(os.path.join(d, "logits.npy"), logits)
        print(f"{name:22s} {kind:5s} {model_name:17s} rows {logits.shape[0]:3d}  " + "; ".join(notes))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
