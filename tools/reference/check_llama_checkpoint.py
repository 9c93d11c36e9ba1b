# SPDX-License-Identifier: MIT
"""Check a Hugging Face Llama checkpoint written by train_llama.py (examples/models/kjv-llama) from its files alone.

    /usr/bin/python3 tools/reference/check_llama_checkpoint.py examples/models/kjv-llama

Loads config.json, model.safetensors and tokenizer.model afresh and runs its own float64 numpy implementation of
LlamaForCausalLM's forward (written from Hugging Face's modeling_llama semantics, sharing no code with
train_llama.py's module; LlamaConfig's defaults for keys the file lacks; with a KV cache for generation), then:

1. files: the tensors by Hugging Face name, F16, with the shapes the config gives; no lm_head.weight when
   tie_word_embeddings; the tokenizer's <unk>/<s>/</s> at 0/1/2 with byte fallback, and its size the config's vocab.
2. logits: numpy float64 against train_llama.py's module (float64 and float32) on held-out windows, and against
   hf_decoders.py (the float64 reference for Hugging Face decoders) when it is importable from this directory or
   --hf-decoders DIR; cached one-token-a-call logits against the uncached forward.
3. held-out bits per byte, as train_llama.py defines val_bpb (verses as BOS + tokens + EOS, packed into windows of
   whole verses of at most --ctx + 1 tokens, every text token and EOS scored, the sum over the file's bytes).
4. generation from --prompt (default: 10 prompts) greedy, at temperature 0.8, and at tern-run's defaults
   (temperature 0.7, top-k 40): the text and the number of tokens until EOS.

Exit status 1 when a check fails (a file, a logits comparison above its tolerance, or --require-eos with a
generation that did not stop).
"""

import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

LLAMA_DEFAULTS = {  # transformers' LlamaConfig defaults for the keys read here
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "head_dim": None, "hidden_act": "silu",
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
}

PROMPTS = [
    "And God said",
    "The LORD is my shepherd",
    "In the beginning",
    "And it came to pass",
    "Blessed are",
    "Jesus answered and said unto them,",
    "Thus saith the LORD of hosts,",
    "And the king",
    "My son,",
    "For God so loved the world,",
]


class Llama64:
    """LlamaForCausalLM in float64 numpy, from the checkpoint's files."""

    def __init__(self, directory):
        with open(os.path.join(directory, "config.json")) as f:
            raw = json.load(f)
        if raw.get("model_type") != "llama":
            raise ValueError(f"model_type {raw.get('model_type')!r}, expected 'llama'")
        c = {k: raw.get(k, v) for k, v in LLAMA_DEFAULTS.items()}
        if c["num_key_value_heads"] is None:
            c["num_key_value_heads"] = c["num_attention_heads"]
        if c["head_dim"] is None:
            c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
        if c["rope_scaling"] or c["attention_bias"] or c["mlp_bias"] or c["hidden_act"] != "silu":
            raise ValueError("only plain RoPE, no biases and SiLU are implemented here")
        self.c = c
        self.raw = raw
        self.f16 = safetensors_io.load_dir(directory)
        self.w = {k: v.astype(np.float64) for k, v in self.f16.items()}

    def expected_shapes(self):
        c = self.c
        hs, hd, i = c["hidden_size"], c["head_dim"], c["intermediate_size"]
        qd, kvd = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
        out = {"model.embed_tokens.weight": (c["vocab_size"], hs), "model.norm.weight": (hs,)}
        if not c["tie_word_embeddings"]:
            out["lm_head.weight"] = (c["vocab_size"], hs)
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            out.update({p + "self_attn.q_proj.weight": (qd, hs), p + "self_attn.k_proj.weight": (kvd, hs),
                        p + "self_attn.v_proj.weight": (kvd, hs), p + "self_attn.o_proj.weight": (hs, qd),
                        p + "mlp.gate_proj.weight": (i, hs), p + "mlp.up_proj.weight": (i, hs),
                        p + "mlp.down_proj.weight": (hs, i), p + "input_layernorm.weight": (hs,),
                        p + "post_attention_layernorm.weight": (hs,)})
        return out

    def _rms(self, x, name):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.c["rms_norm_eps"]) * self.w[name]

    def _rope(self, t, pos):
        """t [heads, n, d]: element i pairs with i + d/2 (rotate_half), angle pos * theta^(-2i/d)."""
        d = t.shape[-1]
        ang = pos[:, None] * self.c["rope_theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)[None, :]
        cos, sin = np.cos(ang), np.sin(ang)
        a, b = t[..., :d // 2], t[..., d // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def new_cache(self):
        return {"pos": 0, "k": [None] * self.c["num_hidden_layers"], "v": [None] * self.c["num_hidden_layers"]}

    def forward(self, ids, cache=None):
        """logits [len(ids), vocab] of ids at positions cache['pos']... (0... without a cache)."""
        c, w = self.c, self.w
        H, KV, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        p0 = cache["pos"] if cache else 0
        pos = np.arange(p0, p0 + n, dtype=np.float64)
        x = w["model.embed_tokens.weight"][ids]
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = self._rms(x, p + "input_layernorm.weight")
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, H, d).transpose(1, 0, 2)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, KV, d).transpose(1, 0, 2)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, KV, d).transpose(1, 0, 2)
            q, k = self._rope(q, pos), self._rope(k, pos)
            if cache is not None:
                if cache["k"][l] is not None:
                    k = np.concatenate([cache["k"][l], k], axis=1)
                    v = np.concatenate([cache["v"][l], v], axis=1)
                cache["k"][l], cache["v"][l] = k, v
            total = k.shape[1]
            # query at absolute position p0 + i sees keys 0 .. p0 + i
            visible = np.arange(total)[None, :] <= (p0 + np.arange(n))[:, None]
            heads = []
            for hh in range(H):
                g = hh // (H // KV)  # repeat_kv: key/value head of query head hh
                s = q[hh] @ k[g].T / math.sqrt(d)
                s = np.where(visible, s, -np.inf)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                heads.append((s / s.sum(axis=-1, keepdims=True)) @ v[g])
            attn = np.stack(heads, axis=1).reshape(n, H * d)
            x = x + attn @ w[p + "self_attn.o_proj.weight"].T
            h = self._rms(x, p + "post_attention_layernorm.weight")
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            x = x + ((gate / (1.0 + np.exp(-gate))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ \
                w[p + "mlp.down_proj.weight"].T
        if cache is not None:
            cache["pos"] = p0 + n
        x = self._rms(x, "model.norm.weight")
        head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
        return x @ head.T


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def sample_next(logits, temperature, top_k, rng):
    if temperature <= 0:
        return int(np.argmax(logits))
    z = logits / temperature
    if top_k:
        kth = np.sort(z)[-top_k]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max())
    p /= p.sum()
    return int(rng.choice(len(p), p=p))


def generate(m, sp, prompt, max_new, temperature, top_k, seed):
    """BOS + prompt, KV-cached; returns (new ids without EOS, stopped at EOS)."""
    rng = np.random.default_rng(seed)
    cache = m.new_cache()
    logits = m.forward([m.c["bos_token_id"]] + sp.encode(prompt), cache)[-1]
    new = []
    for _ in range(max_new):
        t = sample_next(logits, temperature, top_k, rng)
        if t == m.c["eos_token_id"]:
            return new, True
        new.append(t)
        logits = m.forward([t], cache)[-1]
    return new, False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--heldout", default=os.path.join(HERE, "..", "..", "examples", "models", "kjv-byte",
                                                      "heldout.txt"))
    ap.add_argument("--ctx", type=int, default=256, help="window of the bits-per-byte measure (train_llama --ctx)")
    ap.add_argument("--no-score", action="store_true", help="skip the held-out bits per byte")
    ap.add_argument("--prompt", action="append", help="generation prompt (repeatable; default: 10 prompts)")
    ap.add_argument("--max-new", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0, help="sampling seed of the first prompt (+1 for each next)")
    ap.add_argument("--require-eos", action="store_true", help="fail when a generation does not reach EOS")
    ap.add_argument("--hf-decoders", metavar="DIR", help="directory holding hf_decoders.py (default: this one)")
    ap.add_argument("--json", metavar="OUT", help="write the results as JSON")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import sentencepiece as spm
    import torch

    torch.set_num_threads(args.threads)
    failures = []
    results = {"checkpoint": args.checkpoint}

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            failures.append(what)

    # 1. files
    m = Llama64(args.checkpoint)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.checkpoint, "tokenizer.model"))
    shapes = m.expected_shapes()
    got = {k: tuple(v.shape) for k, v in m.f16.items()}
    check(got == shapes, f"tensor names and shapes ({len(got)} tensors; missing {sorted(set(shapes) - set(got))}, "
                         f"unexpected {sorted(set(got) - set(shapes))})")
    check(all(v.dtype == np.float16 for v in m.f16.values()), "every tensor F16")
    _, meta, _ = safetensors_io.read_header(os.path.join(args.checkpoint, "model.safetensors"))
    check(meta.get("format") == "pt", f"safetensors metadata format 'pt' ({meta})")
    check(sp.get_piece_size() == m.c["vocab_size"], f"tokenizer size {sp.get_piece_size()} = vocab_size")
    check((sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 2, -1)
          and (m.c["bos_token_id"], m.c["eos_token_id"]) == (1, 2), "<unk> 0, <s> 1, </s> 2, no pad")
    check(all(sp.is_byte(3 + b) and sp.id_to_piece(3 + b) == f"<0x{b:02X}>" for b in range(256)),
          "byte pieces <0x00>..<0xFF> at 3..258")
    s = "\u03a9mega \u00fcn\u00efcode \u2603 text"
    check(sp.decode(sp.encode(s)) == s and sp.unk_id() not in sp.encode(s)
          and sp.encode("\u2603", out_type=str)[-3:] == ["<0xE2>", "<0x98>", "<0x83>"],
          "byte fallback: any text encodes without <unk>")
    results["parameters"] = int(sum(v.size for v in m.f16.values()))
    print(f"      {results['parameters']} parameters, {sp.get_piece_size()} tokenizer pieces", flush=True)

    # 2. logits
    with open(args.heldout, "rb") as f:
        heldout = f.read()
    verses = [v.decode("utf-8") for v in heldout.split(b"\n") if v]
    from train_llama import documents, load_checkpoint, packed_windows  # noqa: E402

    stream, starts = documents(sp, verses)
    wins = packed_windows(stream, starts, args.ctx)
    ids_a = stream[wins[0][0]:wins[0][1] - 1]
    ids_b = stream[wins[len(wins) // 2][0]:wins[len(wins) // 2][1] - 1]
    ref_a, ref_b = m.forward(ids_a), m.forward(ids_b)
    results["logits"] = {}
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        tm, _ = load_checkpoint(args.checkpoint, dtype=dtype)
        with torch.no_grad():
            la = tm(torch.from_numpy(ids_a)).double().numpy()
            lb = tm(torch.from_numpy(ids_b)).double().numpy()
        e = max(rel_err(la, ref_a), rel_err(lb, ref_b))
        results["logits"][f"train_llama_{str(dtype)[6:]}"] = e
        check(e < tol, f"train_llama.py module ({str(dtype)[6:]}) vs numpy float64: max |diff| / max |logit| "
                       f"{e:.2e} (tol {tol:g}; {len(ids_a)} + {len(ids_b)} positions)")
    hd_dir = args.hf_decoders or HERE
    if os.path.exists(os.path.join(hd_dir, "hf_decoders.py")):
        sys.path.insert(0, hd_dir)
        import hf_decoders  # noqa: E402

        hm = hf_decoders.load_checkpoint(args.checkpoint)
        e = max(rel_err(hm.logits(list(map(int, ids_a))), ref_a), rel_err(hm.logits(list(map(int, ids_b))), ref_b))
        results["logits"]["hf_decoders"] = e
        check(e < 1e-10, f"hf_decoders.py ({hd_dir}) vs numpy float64: {e:.2e} (tol 1e-10)")
    else:
        print(f"skip  hf_decoders.py not found in {hd_dir} (--hf-decoders DIR)", flush=True)
    cache = m.new_cache()
    rows = [m.forward(ids_a[:17], cache)] + [m.forward(ids_a[i:i + 1], cache) for i in range(17, 64)]
    e = rel_err(np.concatenate(rows), ref_a[:64])
    results["logits"]["cached_vs_uncached"] = e
    check(e < 1e-10, f"KV-cached (17-token prompt, then one token a call) vs uncached forward: {e:.2e}")

    # 3. held-out bits per byte
    if not args.no_score:
        nats, count = 0.0, 0
        for b, e in wins:
            x = stream[b:e]
            logits = m.forward(x[:-1])
            z = logits - logits.max(axis=-1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
            lp = logp[np.arange(len(x) - 1), x[1:]]
            keep = x[1:] != m.c["bos_token_id"]
            nats -= lp[keep].sum()
            count += int(keep.sum())
        bpb = nats / math.log(2) / len(heldout)
        results.update(val_bpb=bpb, val_loss=nats / count, val_bytes=len(heldout), val_tokens_scored=count)
        print(f"      held-out {os.path.basename(args.heldout)}: {len(heldout)} bytes, {count} tokens scored, "
              f"{nats / count:.4f} nats/token, {bpb:.4f} bits per byte", flush=True)

    # 4. generation
    prompts = args.prompt or PROMPTS
    results["generations"] = []
    for mode, temp, top_k in (("greedy", 0.0, 0), ("T=0.8", 0.8, 0), ("T=0.7 top-k 40", 0.7, 40)):
        counts = []
        for i, prompt in enumerate(prompts):
            new, stopped = generate(m, sp, prompt, args.max_new, temp, top_k, args.seed + i)
            text = sp.decode(sp.encode(prompt) + new)
            counts.append(len(new) if stopped else None)
            results["generations"].append({"mode": mode, "prompt": prompt, "seed": args.seed + i,
                                           "tokens": len(new), "eos": stopped, "text": text})
            print(f"      [{mode}] {len(new):3d} tokens, {'EOS' if stopped else 'NO EOS'}: {text}", flush=True)
            if args.require_eos:
                check(stopped, f"[{mode}] {prompt!r} ends with EOS within {args.max_new} tokens")
        done = [c for c in counts if c is not None]
        print(f"      [{mode}] EOS in {len(done)}/{len(counts)}; tokens until EOS: {counts}"
              + (f" (median {int(np.median(done))}, max {max(done)})" if done else ""), flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
