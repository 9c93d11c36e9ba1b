# SPDX-License-Identifier: MIT
"""Train a small Llama-architecture model on the King James Bible, saved in Hugging Face's layout.

Output (examples/models/kjv-llama/ by default): config.json as transformers' LlamaConfig.save_pretrained writes it,
generation_config.json, model.safetensors (F16, Hugging Face tensor names, no lm_head.weight: tied embeddings),
tokenizer.model (a SentencePiece BPE model trained here on the training text) and train_summary.json.

Data: the text and the train/held-out split of train.py (`kjv_text`, `split_text`): one verse a line, the last 5%
(Colossians 1:12 to the end of Revelation) held out; the held-out text is examples/models/kjv-byte/heldout.txt byte
for byte, and is not copied. Every verse is one document, BOS + its tokens + EOS, so the model learns to end a verse
with EOS (EOS stands for the newline after it). A training window is ctx + 1 tokens of the documents in book order
starting at a random document's BOS, so every window starts at position 0 with BOS (as a prompt does) and later
verses see the verses before them.

Tokenizer: SentencePiece BPE (libsentencepiece's trainer through the python3-sentencepiece binding) trained on the
training verses with Llama's settings: byte_fallback (any text encodes), <unk>=0, <s>=1, </s>=2, no pad, identity
normalization, dummy prefix, extra whitespace kept, digits split. The input comes from an iterator and the model is
written from memory, so the file holds no paths and is the same bytes on every run.

Model: LlamaForCausalLM's forward exactly (pre-norm RMSNorm with rms_norm_eps, rotary embeddings in the half-split
rotate_half layout with rope_theta, grouped-query attention, SwiGLU MLP, no biases, final norm, tied head), in
float32. Parameter names are the safetensors names.

    apt-get install -y bible-kjv-text python3-sentencepiece
    LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp \\
        OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \\
        nice -n 10 /usr/bin/python3 tools/reference/train_llama.py --time-budget 1500 --out examples/models/kjv-llama

(OpenBLAS unpacked as tools/reference/README.md describes.) Check the result with check_llama_checkpoint.py.
"""

import argparse
import hashlib
import io
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from train import kjv_text, lr_at, split_text  # noqa: E402

BOS, EOS, UNK = 1, 2, 0
TRANSFORMERS_VERSION = "4.45.1"
HELDOUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models", "kjv-byte",
                       "heldout.txt")


# ---------------------------------------------------------------------------------------------------------------
# tokenizer and documents

def train_tokenizer(verses, vocab_size, model_type="bpe"):
    """SentencePiece model (serialized ModelProto bytes) trained on `verses` (list of str)."""
    try:
        import sentencepiece as spm
    except ImportError:
        sys.exit("the SentencePiece binding is missing: apt-get install -y python3-sentencepiece")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(verses), model_writer=out, model_type=model_type, vocab_size=vocab_size,
        byte_fallback=True, character_coverage=1.0, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, allow_whitespace_only_pieces=True,
        unk_id=UNK, bos_id=BOS, eos_id=EOS, pad_id=-1, max_sentence_length=16384, num_threads=1,
        minloglevel=2)
    return out.getvalue()


def load_tokenizer(model_bytes_or_path):
    import sentencepiece as spm

    if isinstance(model_bytes_or_path, (bytes, bytearray)):
        return spm.SentencePieceProcessor(model_proto=bytes(model_bytes_or_path))
    return spm.SentencePieceProcessor(model_file=model_bytes_or_path)


def verses_of(text):
    """bytes, one verse a line -> list of str (ASCII)."""
    return [v.decode("utf-8") for v in text.split(b"\n") if v]


def documents(sp, verses):
    """Token stream [BOS v1 EOS BOS v2 EOS ...] (int64 array) and the start of every document in it."""
    docs = [[BOS] + ids + [EOS] for ids in sp.encode(verses)]
    starts = np.cumsum([0] + [len(d) for d in docs[:-1]])
    return np.fromiter((t for d in docs for t in d), dtype=np.int64), starts.astype(np.int64)


def packed_windows(stream, starts, ctx, alone=False):
    """Split a document stream into windows of whole documents, each at most ctx + 1 tokens and starting at a BOS:
    list of (begin, end) into `stream`. A window's tokens 0..n-2 are inputs and 1..n-1 targets. alone=True: one
    document a window."""
    bounds = list(starts) + [len(stream)]
    if alone:
        return list(zip(bounds[:-1], bounds[1:]))
    out, b = [], 0
    for i in range(1, len(bounds)):
        if bounds[i] - b > ctx + 1:
            if bounds[i - 1] == b:
                raise ValueError(f"a document of {bounds[i] - b} tokens is longer than ctx + 1")
            out.append((b, bounds[i - 1]))
            b = bounds[i - 1]
    out.append((b, len(stream)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# model: LlamaForCausalLM

def make_config(args, vocab_size):
    """config.json as transformers 4.45's LlamaConfig(...).save_pretrained writes it: to_diff_dict, keys sorted."""
    head_dim = args.head_dim or args.hidden // args.heads
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": args.init_std,
        "intermediate_size": args.intermediate,
        "max_position_embeddings": args.max_positions,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": args.rms_eps,
        "rope_scaling": None,
        "rope_theta": args.rope_theta,
        "tie_word_embeddings": True,
        "torch_dtype": "float16",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def generation_config():
    """generation_config.json as save_pretrained writes GenerationConfig.from_model_config(config)."""
    return {"_from_model_config": True, "bos_token_id": BOS, "eos_token_id": EOS,
            "transformers_version": TRANSFORMERS_VERSION}


def write_json(path, obj, sort_keys=True):
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=sort_keys) + "\n")


class RMSNorm(torch.nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float() if dtype != torch.float64 else x
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(positions, head_dim, theta, dtype):
    """LlamaRotaryEmbedding (rope_type default): inv_freq over the even dims, emb = cat(freqs, freqs). In float32 as
    transformers computes it (whatever the model's dtype), except that a float64 model gets float64 angles."""
    ft = torch.float64 if dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(ft) / head_dim))
    freqs = positions.to(ft)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class Attention(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.kv, self.d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        hs = c["hidden_size"]
        self.q_proj = torch.nn.Linear(hs, self.h * self.d, bias=False)
        self.k_proj = torch.nn.Linear(hs, self.kv * self.d, bias=False)
        self.v_proj = torch.nn.Linear(hs, self.kv * self.d, bias=False)
        self.o_proj = torch.nn.Linear(self.h * self.d, hs, bias=False)

    def forward(self, x, cos, sin, mask):
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv  # repeat_kv: query head i reads key/value head i // rep
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        p = torch.softmax(s.float() if s.dtype != torch.float64 else s, dim=-1).to(q.dtype)
        return self.o_proj((p @ v).transpose(1, 2).reshape(b, n, self.h * self.d))


class MLP(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        hs, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = torch.nn.Linear(hs, i, bias=False)
        self.up_proj = torch.nn.Linear(hs, i, bias=False)
        self.down_proj = torch.nn.Linear(i, hs, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = torch.nn.ModuleList([DecoderLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class LlamaForCausalLM(torch.nn.Module):
    """model.* parameters by Hugging Face name; the head is model.embed_tokens.weight (tie_word_embeddings)."""

    def __init__(self, config):
        super().__init__()
        if not config.get("tie_word_embeddings") or config.get("attention_bias") or config.get("mlp_bias"):
            raise ValueError("this module implements tied embeddings without biases only")
        if config.get("rope_scaling") or config.get("hidden_act", "silu") != "silu":
            raise ValueError("this module implements plain RoPE and SiLU only")
        self.cfg = dict(config)
        self.model = LlamaModel(self.cfg)

    def forward(self, ids):
        """ids [batch, n] or [n] (positions 0..n-1) -> logits [batch, n, vocab] or [n, vocab]."""
        single = ids.dim() == 1
        ids = ids[None] if single else ids
        n = ids.shape[1]
        x = self.model.embed_tokens(ids)
        cos, sin = rope_cos_sin(torch.arange(n), self.cfg["head_dim"], self.cfg["rope_theta"], x.dtype)
        mask = torch.full((n, n), float("-inf"), dtype=x.dtype).triu(1)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        logits = self.model.norm(x) @ self.model.embed_tokens.weight.t()
        return logits[0] if single else logits

    def export_state(self, dtype=np.float16):
        return {n: p.detach().cpu().numpy().astype(dtype) for n, p in self.named_parameters()}

    def load_state(self, state):
        own = dict(self.named_parameters())
        missing = set(own) - set(state)
        extra = set(state) - set(own)
        if missing or extra:
            raise ValueError(f"checkpoint mismatch: missing {sorted(missing)}, unexpected {sorted(extra)}")
        with torch.no_grad():
            for n, p in own.items():
                if tuple(state[n].shape) != tuple(p.shape):
                    raise ValueError(f"{n}: shape {list(state[n].shape)}, expected {list(p.shape)}")
                p.copy_(torch.from_numpy(np.asarray(state[n], dtype=np.float64)).to(p.dtype))


def load_checkpoint(directory, dtype=torch.float32):
    """(LlamaForCausalLM, SentencePieceProcessor) from a directory this script wrote."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    model = LlamaForCausalLM(cfg).to(dtype)
    model.load_state(safetensors_io.load_dir(directory))
    model.eval()
    return model, load_tokenizer(os.path.join(directory, "tokenizer.model"))


def init_weights(model, std, num_layers):
    """N(0, std) for the embedding and every projection (LlamaPreTrainedModel._init_weights), o_proj and down_proj
    scaled by 1/sqrt(2 * layers) as in GPT-2; norms at 1."""
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            torch.nn.init.ones_(p)
        elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
            torch.nn.init.normal_(p, 0.0, std / math.sqrt(2 * num_layers))
        else:
            torch.nn.init.normal_(p, 0.0, std)


# ---------------------------------------------------------------------------------------------------------------
# evaluation and generation

@torch.no_grad()
def evaluate(model, stream, starts, ctx, n_bytes, batch=16, max_windows=None, alone=False):
    """Held-out loss over documents packed into windows of whole documents (packed_windows), every window from a
    BOS at position 0 (alone=True: every document by itself). Every EOS and text token is scored (BOS targets are
    not: a BOS always follows an EOS).
    Returns (bits per byte of the text the documents hold: the sum over tokens / n_bytes, nats per scored token)."""
    model.eval()
    wins = packed_windows(stream, starts, ctx, alone)[:max_windows]
    nats, count = 0.0, 0
    for i in range(0, len(wins), batch):
        chunk = wins[i:i + batch]
        n = max(e - b for b, e in chunk)
        x = np.zeros((len(chunk), n), dtype=np.int64)
        valid = np.zeros((len(chunk), n - 1), dtype=bool)
        for r, (b, e) in enumerate(chunk):
            x[r, :e - b] = stream[b:e]
            valid[r, :e - b - 1] = True
        x = torch.from_numpy(x)
        logp = torch.log_softmax(model(x[:, :-1]).float(), dim=-1)
        tgt = x[:, 1:]
        lp = logp.gather(-1, tgt[..., None]).squeeze(-1)
        keep = torch.from_numpy(valid) & (tgt != BOS)
        nats -= lp[keep].double().sum().item()
        count += int(keep.sum())
    model.train()
    return nats / math.log(2) / n_bytes, nats / max(1, count)


@torch.no_grad()
def generate(model, sp, prompt, max_new_tokens=200, temperature=0.8, top_k=0, seed=0):
    """BOS + prompt, continued until EOS or max_new_tokens. Returns (new ids without the EOS, stopped at EOS)."""
    g = torch.Generator().manual_seed(seed)
    ids = [BOS] + sp.encode(prompt)
    new = []
    for _ in range(max_new_tokens):
        logits = model(torch.tensor(ids, dtype=torch.long))[-1].double()
        if temperature <= 0:
            nxt = int(logits.argmax())
        else:
            logits = logits / temperature
            if top_k:
                kth = torch.topk(logits, top_k).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g))
        if nxt == EOS:
            return new, True
        ids.append(nxt)
        new.append(nxt)
    return new, False


# ---------------------------------------------------------------------------------------------------------------

def save_checkpoint(model, cfg, out_dir, sp_model):
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "config.json"), cfg)
    write_json(os.path.join(out_dir, "generation_config.json"), generation_config())
    with open(os.path.join(out_dir, "tokenizer.model"), "wb") as f:
        f.write(sp_model)
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    safetensors_io.save(tmp, model.export_state(np.float16), metadata={"format": "pt"})
    os.replace(tmp, os.path.join(out_dir, "model.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="examples/models/kjv-llama")
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--tokenizer-type", choices=("bpe", "unigram"), default="bpe")
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=0, help="0: hidden / heads")
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--rms-eps", type=float, default=1e-5)
    ap.add_argument("--max-positions", type=int, default=1024, help="max_position_embeddings in config.json")
    ap.add_argument("--init-std", type=float, default=0.02, help="initializer_range")
    ap.add_argument("--ctx", type=int, default=256, help="training window, tokens")
    ap.add_argument("--batch", type=int, default=16, help="windows per step")
    ap.add_argument("--steps", type=int, default=4000, help="maximum number of steps")
    ap.add_argument("--time-budget", type=float, default=1500,
                    help="seconds (0: none); the cosine schedule follows max(step/steps, elapsed/budget) and "
                         "training stops when either reaches 1")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--holdout", type=float, default=0.05, help="fraction of the text held out (end of the book)")
    ap.add_argument("--seed", type=int, default=1611)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--save-every", type=int, default=500)
    ap.add_argument("--bench", type=int, default=0, help="only time this many steps, then exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    text = kjv_text()
    train_text, val_text = split_text(text, args.holdout)
    heldout_sha = hashlib.sha256(val_text).hexdigest()
    if os.path.exists(HELDOUT) and args.holdout == 0.05:
        with open(HELDOUT, "rb") as f:
            if f.read() != val_text:
                sys.exit(f"the held-out text differs from {HELDOUT}")
    train_verses, val_verses = verses_of(train_text), verses_of(val_text)
    print(f"text: {len(text)} bytes; train {len(train_text)} ({len(train_verses)} verses), "
          f"validation {len(val_text)} ({len(val_verses)} verses)", flush=True)

    t = time.time()
    sp_model = train_tokenizer(train_verses, args.vocab, args.tokenizer_type)
    sp = load_tokenizer(sp_model)
    assert sp.bos_id() == BOS and sp.eos_id() == EOS and sp.unk_id() == UNK and sp.pad_id() == -1
    train_stream, train_starts = documents(sp, train_verses)
    val_stream, val_starts = documents(sp, val_verses)
    for vs in (train_verses[:2000], val_verses):
        bad = [v for v in vs if sp.decode(sp.encode(v)) != v]
        if bad:
            sys.exit(f"tokenizer does not round-trip {len(bad)} verses, e.g. {bad[0]!r}")
    print(f"tokenizer: {args.tokenizer_type}, {sp.get_piece_size()} pieces, sha256 "
          f"{hashlib.sha256(sp_model).hexdigest()[:16]} ({time.time() - t:.1f}s); train {len(train_stream)} tokens "
          f"({len(train_text) / len(train_stream):.2f} bytes/token with BOS/EOS), validation {len(val_stream)}",
          flush=True)

    cfg = make_config(args, sp.get_piece_size())
    model = LlamaForCausalLM(cfg)
    init_weights(model, args.init_std, args.layers)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"config: {json.dumps(cfg)}\nparameters: {nparams} ({2 * nparams / 1e6:.2f} MB in F16)", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    # windows of ctx + 1 tokens starting at a document's BOS
    usable = train_starts[train_starts + args.ctx + 1 <= len(train_stream)]
    offs = np.arange(args.ctx + 1)
    steps = args.bench or args.steps
    t0 = time.time()
    t_log, tok_log = time.time(), 0
    loss_ema = None
    history = []
    steps_done = 0
    for step in range(steps):
        progress = (step - args.warmup) / max(1, steps - args.warmup)
        if args.time_budget and not args.bench:
            progress = max(progress, (time.time() - t0) / args.time_budget)
            if progress >= 1.0:
                print(f"time budget reached after {step} steps", flush=True)
                break
        lr = lr_at(step, progress, args.warmup, args.lr, args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        xb = torch.from_numpy(train_stream[rng.choice(usable, size=args.batch)[:, None] + offs])
        tgt = xb[:, 1:].masked_fill(xb[:, 1:] == BOS, -100)  # a BOS after an EOS is not text
        logits = model(xb[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps_done = step + 1

        tok_log += args.batch * args.ctx
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        if (step + 1) % args.log_every == 0 or step == 0:
            now = time.time()
            print(f"step {step + 1:5d}/{steps}  loss {loss.item():.4f}  (ema {loss_ema:.4f})  lr {lr:.2e}  "
                  f"{tok_log / (now - t_log):.0f} tok/s  elapsed {now - t0:.0f}s", flush=True)
            t_log, tok_log = now, 0
        if args.bench:
            continue
        if (step + 1) % args.eval_every == 0:
            vb, vl = evaluate(model, val_stream, val_starts, args.ctx, len(val_text), max_windows=64)
            history.append([step + 1, round(loss_ema, 4), round(vl, 4)])
            print(f"  eval step {step + 1}: validation (first 64 windows) {vl:.4f} nats/token", flush=True)
        if (step + 1) % args.save_every == 0:
            save_checkpoint(model, cfg, args.out, sp_model)
            print(f"  saved checkpoint at step {step + 1}", flush=True)

    if args.bench:
        return
    train_time = time.time() - t0
    # Final numbers on the F16-rounded weights, i.e. exactly what is shipped.
    model.load_state(model.export_state(np.float16))
    val_bpb, val_loss = evaluate(model, val_stream, val_starts, args.ctx, len(val_text))
    # each held-out verse alone (BOS verse EOS, no earlier verses), as a prompt from scratch sees it
    alone_bpb, alone_loss = evaluate(model, val_stream, val_starts, args.ctx, len(val_text), alone=True)
    sub = sorted(np.random.default_rng(0).choice(len(train_verses) - 8, size=200, replace=False))
    sub_verses = [v for s in sub for v in train_verses[s:s + 8]]
    sub_stream, sub_starts = documents(sp, sub_verses)
    train_bpb, train_loss = evaluate(model, sub_stream, sub_starts, args.ctx,
                                     sum(len(v) + 1 for v in sub_verses))
    samples = []
    for i, prompt in enumerate(["And God said", "The LORD is my shepherd", "In the beginning"]):
        for temp in (0.0, 0.8):
            new, stopped = generate(model, sp, prompt, 200, temp, seed=i)
            samples.append({"prompt": prompt, "temperature": temp, "seed": i, "tokens": len(new),
                            "eos": stopped, "text": sp.decode(sp.encode(prompt) + new)})
            print(f"  sample T={temp} ({len(new)} tokens, {'EOS' if stopped else 'no EOS'}): {samples[-1]['text']}",
                  flush=True)
    summary = {
        "steps": steps_done,
        "batch": args.batch,
        "ctx": args.ctx,
        "tokens_seen": steps_done * args.batch * args.ctx,
        "train_seconds": round(train_time),
        "parameters": nparams,
        "tokenizer": {"type": args.tokenizer_type, "vocab_size": sp.get_piece_size(),
                      "sha256": hashlib.sha256(sp_model).hexdigest()},
        "train_tokens": len(train_stream),
        "train_bytes": len(train_text),
        "val_tokens": len(val_stream),
        "val_bytes": len(val_text),
        "val_sha256": heldout_sha,
        "train_loss_1600_verses": round(train_loss, 4),
        "train_bpb_1600_verses": round(train_bpb, 4),
        "val_loss": round(val_loss, 4),
        "val_bpb": round(val_bpb, 4),
        "val_loss_verses_alone": round(alone_loss, 4),
        "val_bpb_verses_alone": round(alone_bpb, 4),
        "history": history,
        "samples": samples,
        "command": " ".join(sys.argv),
    }
    print("final:", json.dumps({k: v for k, v in summary.items() if k not in ("history", "samples")}), flush=True)
    save_checkpoint(model, cfg, args.out, sp_model)
    write_json(os.path.join(args.out, "train_summary.json"), summary, sort_keys=False)
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
