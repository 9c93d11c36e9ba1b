#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""An independent check of streaming_bench's sinks and window numbers (docs/streaming.md): streams the first N ids of
a text, one verse a document (<s> ids </s>, the ids of tokenizer.model), token by token through
check_llama_checkpoint.py's float64 numpy Llama with the reference code's semantics (streaming-llm's
StartRecentKVCache and the Llama pos_shift attention): keys cached before rotation, cache entry e rotated as position
e and the new row as position `held`; after each token the cache is cut back to the first S and the last W entries.
Prints the mean NLL over the targets that are not <s>, to compare with
    streaming_bench score MODEL.tern TEXT --policy sinks --budget S+W --sinks S --per-line --tokens N
Usage (from the repository root): sinks_reference.py S W N TEXT [CHECKPOINT_DIR]"""
import math
import sys

import numpy as np
sys.path.insert(0, "tools/reference")
from check_llama_checkpoint import Llama64
import sentencepiece as spm

S, W, N, TEXT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
CKPT = sys.argv[5] if len(sys.argv) > 5 else "examples/models/kjv-llama"
m = Llama64(CKPT)
sp = spm.SentencePieceProcessor(model_file=CKPT + "/tokenizer.model")
ids = []
for v in open(TEXT, "rb").read().split(b"\n"):
    if v:
        ids += [1] + sp.encode(v.decode()) + [2]
    if len(ids) >= N:
        break
ids = ids[:N]
c, w = m.c, m.w
H, KV, d, L = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["num_hidden_layers"]
ck = [np.zeros((KV, 0, d)) for _ in range(L)]
cv = [np.zeros((KV, 0, d)) for _ in range(L)]
total, count = 0.0, 0
for t in range(N - 1):
    x = w["model.embed_tokens.weight"][[ids[t]]]
    held = ck[0].shape[1]
    for l in range(L):
        p = f"model.layers.{l}."
        h = m._rms(x, p + "input_layernorm.weight")
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(1, H, d).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(1, KV, d).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(1, KV, d).transpose(1, 0, 2)
        ck[l] = np.concatenate([ck[l], k], axis=1)
        cv[l] = np.concatenate([cv[l], v], axis=1)
        kr = m._rope(ck[l], np.arange(held + 1, dtype=np.float64))
        qr = m._rope(q, np.array([held], dtype=np.float64))
        heads = []
        for hh in range(H):
            g = hh // (H // KV)
            s = qr[hh] @ kr[g].T / math.sqrt(d)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            heads.append((s / s.sum(axis=-1, keepdims=True)) @ cv[l][g])
        x = x + np.stack(heads, axis=1).reshape(1, H * d) @ w[p + "self_attn.o_proj.weight"].T
        h = m._rms(x, p + "post_attention_layernorm.weight")
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + ((gate / (1.0 + np.exp(-gate))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        if ck[l].shape[1] > S + W:
            keep = list(range(S)) + list(range(ck[l].shape[1] - W, ck[l].shape[1]))
            ck[l], cv[l] = ck[l][:, keep], cv[l][:, keep]
    logits = (m._rms(x, "model.norm.weight") @ w["model.embed_tokens.weight"].T)[0]
    if ids[t + 1] != 1:
        mx = logits.max()
        total += math.log(np.exp(logits - mx).sum()) + mx - logits[ids[t + 1]]
        count += 1
print(f"S {S} W {W}: {count} scored, mean NLL {total / count:.6f}, perplexity {math.exp(total / count):.4f}")
