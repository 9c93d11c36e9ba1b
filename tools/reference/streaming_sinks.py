# SPDX-License-Identifier: MIT
"""Float64 reference for attention sinks and context shift on rotary (Llama-family) checkpoints of hf_decoders.py.

Attention sinks (StreamingLLM, Xiao et al. 2023), as mit-han-lab/streaming-llm's eval_long_ppl.py runs them with
StartRecentKVCache and the Llama pos_shift attention (runtime/src/ops/sink_cache.h states the same facts):

* keys are cached BEFORE rotation; in a call of n rows against `held` cache entries, entry e (cache order) is
  rotated as position e and the call's row r (query and key) as position held + r; a query sees every entry and
  the call's rows up to its own; nothing is evicted inside a call;
* after each call the cache is cut back to its first S entries and its W most recent (when it holds more than
  S + W), so after tokens 0..P-1 it holds positions {0..min(S, P)-1} and {max(S, P-W)..P-1};
* the call's rotary frequencies are those of a call whose keys end at index held + n (pos_shift computes
  `rotary_emb(value_states, seq_len=kv_seq_len)`; only dynamic NTK depends on it).

Context shift (llama.cpp's, the generator policy TERN_CONTEXT_SHIFT): a dense cache, slot j = position j, keys
stored rotated. When it holds max_tokens tokens and one more comes, it keeps the last K = min(keep, max_tokens - 1)
entries: they move to slots 0..K-1, each key re-rotated by -(P - K) positions (R(p - d) k = R(-d) R(p) k, cos/sin
of the angle -d * inv_freq, the attention factor not applied again), values just moved; the token then runs at
position K.

    m = hf_decoders.load_checkpoint("tests/goldens/hf_llama_gqa")
    s = SinkStream(m, sinks=4, window=24); rows = s.call(ids[:40]); rows = s.call(ids[40:41])   # [n, vocab]
    g = ShiftGenerator(m, max_tokens=32, keep=12); last = g.prompt(ids[:20]); row = g.append(tok)

    /usr/bin/python3 tools/reference/streaming_sinks.py --selftest
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_decoders as hf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDENS = os.path.join(HERE, "..", "..", "tests", "goldens")


def _check_rotary(model):
    c = model.cfg
    if c["model_type"] == "gpt2":
        raise ValueError("attention sinks and context shift need a rotary model (gpt2 has learned positions)")
    if any(t != hf.FULL for t in c["layer_types"]):
        raise ValueError("attention sinks and context shift are defined here for dense (full) attention layers only")


def _causal_attend(model, q, k, v, q_index, k_index, layer_type):
    """Dense attention of q [H, n, d] over k, v [KV, m, d] (already rotated), query at index q_index[r] seeing the
    keys with k_index <= q_index[r]."""
    return model._attend(q, k, v, np.asarray(q_index), np.asarray(k_index), layer_type)


class SinkStream:
    """Attention sinks: `call(ids)` runs one call of any length and returns every row's logits [n, vocab].
    absolute=True rotates every key and query at its absolute position instead (the frequencies of a call ending at
    the absolute position): StreamingLLM without pos_shift, only to show that the goldens tell the two apart."""

    def __init__(self, model, sinks, window, absolute=False):
        _check_rotary(model)
        if sinks < 0 or window <= 0:
            raise ValueError(f"sinks {sinks} must be >= 0 and window {window} > 0")
        self.m, self.sinks, self.window = model, int(sinks), int(window)
        self.layers = len(model.cfg["layer_types"])
        KV, D = model.cfg["num_key_value_heads"], model.cfg["head_dim"]
        # per layer: unrotated keys and values [KV, held, d], in cache order
        self.k = [torch.zeros(KV, 0, D, dtype=torch.float64) for _ in range(self.layers)]
        self.v = [torch.zeros(KV, 0, D, dtype=torch.float64) for _ in range(self.layers)]
        self.positions = np.zeros(0, dtype=np.int64)  # the absolute position each entry holds
        self.fed = 0
        self.absolute = absolute

    @property
    def held(self):
        return len(self.positions)

    def call(self, ids):
        ids = [int(t) for t in ids]
        n, held = len(ids), self.held
        if n == 0:
            raise ValueError("a call needs at least one token")
        total = held + n
        index = np.arange(total)
        # frequencies of a call whose keys end at index held + n, for every index of the call
        at = index
        if self.absolute:
            at = np.concatenate([self.positions, np.arange(self.fed, self.fed + n)])
        ropes = {t: hf.rope_tables(self.m.cfg, t, at, np.full(total, at[-1] + 1)) for t in self.m.cfg["rope"]}

        def attend(i, lt, q, k, v):
            cos, sin = ropes[lt]
            keys = torch.cat([self.k[i], k], dim=1)  # unrotated, cache order then the call's rows
            vals = torch.cat([self.v[i], v], dim=1)
            self.k[i], self.v[i] = keys, vals
            qr = hf.apply_rope(q, cos[held:], sin[held:])
            kr = hf.apply_rope(keys, cos, sin)
            return _causal_attend(self.m, qr, kr, vals, index[held:], index, lt)

        with torch.no_grad():
            logits = self.m.decode(ids, attend).numpy()
        self.positions = np.concatenate([self.positions, np.arange(self.fed, self.fed + n)])
        self.fed += n
        self._cut()
        return logits

    def _cut(self):
        """StartRecentKVCache: keep [0:S] and [len-W:len] once the cache holds more than S + W."""
        size = self.held
        if size <= self.sinks + self.window:
            return
        keep = np.concatenate([np.arange(self.sinks), np.arange(size - self.window, size)])
        sel = torch.as_tensor(keep)
        self.k = [k[:, sel] for k in self.k]
        self.v = [v[:, sel] for v in self.v]
        self.positions = self.positions[keep]

    def expected_positions(self):
        """What sink_cache.h says the cache holds after self.fed tokens."""
        P, S, W = self.fed, self.sinks, self.window
        return np.concatenate([np.arange(min(S, P)), np.arange(max(S, P - W), P)])


def shift_cos_sin(c, layer_type, d, factor_again=False):
    """cos, sin [1, rotary_dim] of the angle -d * inv_freq, without the attention factor (the stored keys carry it
    already; factor_again=True multiplies it in once more, a mistake make_sinks_goldens.py shows the goldens catch)."""
    p = c["rope"][layer_type]
    inv, af = hf.ROPE_INIT[p["rope_type"]](c, p, c["max_position_embeddings"])
    ang = -float(d) * inv
    emb = np.concatenate([ang, ang])[None, :]
    scale = af if factor_again else 1.0
    return torch.from_numpy(np.cos(emb) * scale), torch.from_numpy(np.sin(emb) * scale)


class ShiftGenerator:
    """Context shift: `prompt(ids)` (at most max_tokens) returns the last row's logits, `append(token)` one row."""

    def __init__(self, model, max_tokens, keep, factor_again=False):
        _check_rotary(model)
        dynamic = {p["rope_type"] for p in model.cfg["rope"].values()} & set(hf.CALL_DEPENDENT)
        if dynamic:
            raise ValueError(f"a context shift needs static rotary frequencies, not {sorted(dynamic)}")
        if max_tokens < 2 or keep < 0:
            raise ValueError(f"max_tokens {max_tokens} must be >= 2 and keep {keep} >= 0")
        self.m, self.max_tokens, self.keep = model, int(max_tokens), int(keep)
        self.layers = len(model.cfg["layer_types"])
        self.k = None  # per layer: keys as stored, rotated at their slot [KV, P, d]
        self.v = None
        self.k_raw = None  # per layer: the same keys unrotated, only for the selftest's independent check
        self.position = 0
        self.shifts = 0
        self.factor_again = factor_again

    def _run(self, ids):
        n, p0 = len(ids), self.position
        pos = np.arange(p0, p0 + n)
        ropes = {t: hf.rope_tables(self.m.cfg, t, pos, np.full(n, p0 + n)) for t in self.m.cfg["rope"]}

        def attend(i, lt, q, k, v):
            cos, sin = ropes[lt]
            kr = hf.apply_rope(k, cos, sin)
            self.k[i] = torch.cat([self.k[i], kr], dim=1)
            self.v[i] = torch.cat([self.v[i], v], dim=1)
            self.k_raw[i] = torch.cat([self.k_raw[i], k], dim=1)
            return _causal_attend(self.m, hf.apply_rope(q, cos, sin), self.k[i], self.v[i], pos,
                                  np.arange(p0 + n), lt)

        with torch.no_grad():
            logits = self.m.decode(ids, attend).numpy()
        self.position += n
        return logits

    def prompt(self, ids):
        ids = [int(t) for t in ids]
        if not 0 < len(ids) <= self.max_tokens:
            raise ValueError(f"prompt of {len(ids)} tokens: need 1..{self.max_tokens}")
        KV, D = self.m.cfg["num_key_value_heads"], self.m.cfg["head_dim"]
        empty = lambda: [torch.zeros(KV, 0, D, dtype=torch.float64) for _ in range(self.layers)]  # noqa: E731
        self.k, self.v, self.k_raw = empty(), empty(), empty()
        self.position = 0
        return self._run(ids)[-1]

    def shift(self):
        """Keep the last K entries, moved to slots 0..K-1, keys re-rotated by -(P - K)."""
        P = self.position
        K = min(self.keep, self.max_tokens - 1)
        d = P - K
        for i, lt in enumerate(self.m.cfg["layer_types"]):
            cos, sin = shift_cos_sin(self.m.cfg, lt, d, self.factor_again)
            self.k[i] = hf.apply_rope(self.k[i][:, d:], cos, sin)
            self.v[i] = self.v[i][:, d:]
            self.k_raw[i] = self.k_raw[i][:, d:]
        self.position = K
        self.shifts += 1

    def append(self, token):
        if self.k is None:
            raise ValueError("append before prompt")
        if self.position >= self.max_tokens:
            self.shift()
        return self._run([int(token)])[-1]

    def keys_rotated_afresh(self):
        """Independent of the shift: the unrotated keys rotated at their slots 0..P-1 (rope_tables, attention factor
        included), per layer [KV, P, d]."""
        P = self.position
        out = []
        for i, lt in enumerate(self.m.cfg["layer_types"]):
            cos, sin = hf.rope_tables(self.m.cfg, lt, np.arange(P), np.full(P, P))
            out.append(hf.apply_rope(self.k_raw[i], cos, sin))
        return out


# ---------------------------------------------------------------------------------------------------------------
# selftest

FAILURES = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)


def _calls(cuts):
    """[10, 1, 1, 1, 5] -> "10, 3 x 1, 5"."""
    out, i = [], 0
    while i < len(cuts):
        j = i
        while j < len(cuts) and cuts[j] == cuts[i]:
            j += 1
        out.append(f"{j - i} x {cuts[i]}" if j - i > 1 else str(cuts[i]))
        i = j
    return ", ".join(out)


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _stream(model, sinks, window, ids, cuts):
    """Feeds ids cut into calls of the given lengths; returns every row [len(ids), vocab] and the stream."""
    s, rows, at = SinkStream(model, sinks, window), [], 0
    for n in cuts:
        rows.append(s.call(ids[at:at + n]))
        at += n
        if not np.array_equal(s.positions, s.expected_positions()):
            check(False, f"cache after {s.fed} tokens holds {s.positions.tolist()}")
    assert at == len(ids)
    return np.concatenate(rows), s


def _load(name):
    return hf.load_checkpoint(os.path.join(GOLDENS, name))


def selftest():
    rng = np.random.default_rng(1234)
    models = {name: _load(name) for name in ("hf_llama_gqa", "hf_llama_mha", "hf_llama_dynamic", "hf_llama_yarn")}

    print("(a) sinks before any eviction, and a first call longer than S + W, against HFDecoder.logits "
          "(uncached, one call):")
    for name, S, W, cuts in [("hf_llama_gqa", 4, 24, [5, 1, 1, 7, 1, 13]), ("hf_llama_mha", 4, 24, [1] * 28),
                             ("hf_llama_dynamic", 2, 20, [10] + [1] * 12)]:
        m = models[name]
        ids = rng.integers(0, m.cfg["vocab_size"], sum(cuts))
        got, _ = _stream(m, S, W, ids, cuts)
        e = _rel(got, m.logits(ids))
        check(e < 1e-9, f"{name} S={S} W={W}, calls {_calls(cuts)}: all {len(ids)} rows, rel {e:.1e}")
    for name, S, W, first in [("hf_llama_gqa", 4, 24, 40), ("hf_llama_mha", 2, 8, 30),
                              ("hf_llama_dynamic", 2, 20, 36)]:
        m = models[name]
        ids = rng.integers(0, m.cfg["vocab_size"], first + 3)
        got, s = _stream(m, S, W, ids, [first, 1, 1, 1])
        e = _rel(got[:first], m.logits(ids[:first]))
        check(e < 1e-9, f"{name} S={S} W={W}: first call of {first} > S+W, its {first} rows, rel {e:.1e} "
              f"(dynamic frequencies of length {first} where the model is dynamic)")
        later = _rel(got[first:], m.logits(ids)[first:])
        check(later > 1e-3, f"{name}: the 3 rows after the cut differ from the uncached forward (rel {later:.2f}), "
              f"cache holds {s.held} = S+W entries")

    print("(b) S + W >= total length: any cut into calls equals the uncached forward:")
    for name in ("hf_llama_gqa", "hf_llama_mha", "hf_llama_yarn"):
        m = models[name]
        for trial in range(3):
            total = int(rng.integers(20, 50))
            ids = rng.integers(0, m.cfg["vocab_size"], total)
            cuts, left = [], total
            while left:
                cuts.append(int(min(left, rng.integers(1, 9))))
                left -= cuts[-1]
            S = int(rng.integers(0, 5))
            got, _ = _stream(m, S, total - S + int(rng.integers(0, 3)), ids, cuts)
            e = _rel(got, m.logits(ids))
            check(e < 1e-9, f"{name} S={S}, {total} tokens in {len(cuts)} calls: rel {e:.1e}")
    m = models["hf_llama_dynamic"]
    ids = rng.integers(0, m.cfg["vocab_size"], 30)
    got, _ = _stream(m, 2, 40, ids, [7, 1, 1, 9, 1, 11])
    e = _rel(got, m.logits(ids))
    check(e < 1e-9, f"hf_llama_dynamic: 30 tokens (<= max_position_embeddings 32, no scaling) in 6 calls, rel {e:.1e}")

    print("(a') after evictions, each call against HFDecoder.forward on a cache of the stream's unrotated keys "
          "rotated at indices 0..held-1 (same frequencies), queries at held..:")
    for name, S, W, cuts in [("hf_llama_gqa", 4, 24, [40] + [1] * 10 + [5, 1]), ("hf_llama_dynamic", 2, 20,
                                                                                 [10] + [1] * 20 + [14, 1])]:
        m = models[name]
        c = m.cfg
        ids = rng.integers(0, c["vocab_size"], sum(cuts))
        s, worst, at = SinkStream(m, S, W), 0.0, 0
        for n in cuts:
            held = s.held
            cache = []
            for i, lt in enumerate(c["layer_types"]):
                cos, sin = hf.rope_tables(c, lt, np.arange(held), np.full(held, held + n))
                cache.append((hf.apply_rope(s.k[i], cos, sin), s.v[i].clone(), np.arange(held)))
            with torch.no_grad():
                want = m.forward(ids[at:at + n], positions=np.arange(held, held + n),
                                 call_lens=np.full(n, held + n), cache=cache if held else None).numpy()
            got = s.call(ids[at:at + n])
            worst = max(worst, _rel(got, want))
            at += n
        check(worst < 1e-12, f"{name} S={S} W={W}, {len(cuts)} calls: worst rel {worst:.1e}")

    print("(c) context shift: before the first shift against HFDecoder.logits; after each shift the stored keys "
          "against the unrotated keys rotated afresh at their new slots:")
    for name, L, K, prompt, steps in [("hf_llama_gqa", 32, 12, 20, 60), ("hf_llama_mha", 24, 8, 24, 40),
                                      ("hf_llama_yarn", 20, 6, 10, 30)]:
        m = models[name]
        ids = rng.integers(0, m.cfg["vocab_size"], prompt + steps)
        g = ShiftGenerator(m, L, K)
        rows = [g.prompt(ids[:prompt])]
        full = m.logits(ids)
        unshifted = L - prompt + 1  # the prompt's row and the appends before the first shift
        worst_keys, after_shift = 0.0, []
        for t in range(prompt, prompt + steps):
            before = g.shifts
            rows.append(g.append(ids[t]))
            if g.shifts != before:
                fresh = g.keys_rotated_afresh()
                worst_keys = max(worst_keys, max(float((a - b).abs().max() / b.abs().max())
                                                 for a, b in zip(g.k, fresh)))
                after_shift.append(_rel(rows[-1], full[t]))
        rows = np.array(rows)
        e = _rel(rows[:unshifted], full[prompt - 1:prompt - 1 + unshifted])
        check(e < 1e-9, f"{name} L={L} K={K}: prompt {prompt} and {unshifted - 1} appends before the first shift, "
              f"rel {e:.1e}")
        check(g.shifts >= 2 and worst_keys < 1e-12,
              f"{name}: {g.shifts} shifts, keys re-rotated by -(P-K) vs rotated afresh at slots 0..K: "
              f"worst rel {worst_keys:.1e}")
        check(min(after_shift) > 1e-3, f"{name}: rows right after a shift differ from the uncached forward "
              f"(rel {min(after_shift):.2f}..{max(after_shift):.2f})")
    try:
        ShiftGenerator(models["hf_llama_dynamic"], 16, 4)
        check(False, "dynamic rope refused by ShiftGenerator")
    except ValueError as err:
        check(True, f"dynamic rope refused by ShiftGenerator ({err})")

    print(f"\n{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        sys.exit(selftest())
    ap.print_help()


if __name__ == "__main__":
    main()
