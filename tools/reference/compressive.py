# SPDX-License-Identifier: MIT
"""Compressive Transformer memory (Rae et al. 2019) for the reference family's attention kind "compressive".

Spec: converter/reference-family.md. A layer of this kind keeps, between calls (segments), two memories of its
ATTENTION INPUTS (the rows its q/k/v projections read: LN_a(x) for pre-LN, x for post-LN):

  mem   FIFO of the most recent inputs: mem_len .. mem_len + rate - 1 rows once full, empty at the start
  cmem  compressed memory: at most cmem_len rows, empty at the start

A call (one segment) of n rows a_0..a_{n-1}:
  keys and values = k(ctx), v(ctx) with ctx = [cmem; mem; a]; query i sees every memory row and a_0..a_i
  (scaled dot product, dh^-0.5, no position term: positions are in the embeddings)
  then mem = mem ++ a; e = floor(max(0, len(mem) - mem_len) / rate) * rate oldest rows leave mem, in groups of
  `rate`, each group compressed to one row, appended to cmem; cmem keeps its last cmem_len rows.

Compression of a group g [rate, d]:
  conv  Conv1d(d, d, kernel_size=rate, stride=rate) (weight `layers.{i}.attn.compress.weight` [d, d, rate], bias
        `layers.{i}.attn.compress.bias` [d]): out[o] = b[o] + sum_{t, c} W[o, c, t] g[t, c]
  mean  g.mean(0)        max  g.max(0)

With segment lengths and mem_len multiples of rate, e is the segment length once mem is full: the paper's scheme
(the n_s oldest memories compressed into n_s / rate). Other lengths keep the rest in mem until a group is whole.
"""

import torch
import torch.nn.functional as F

COMPRESSIONS = ("conv", "mean", "max")


def empty_memory(d, dtype):
    return {"mem": torch.zeros(0, d, dtype=dtype), "cmem": torch.zeros(0, d, dtype=dtype)}


def compress(groups, spec, conv):
    """groups [g, rate, d] -> [g, d]."""
    if spec["compression"] == "mean":
        return groups.mean(1)
    if spec["compression"] == "max":
        return groups.amax(1)
    g, rate, d = groups.shape
    # Conv1d over the evicted rows laid out as [1, d, g * rate], stride = kernel = rate.
    return F.conv1d(groups.reshape(1, g * rate, d).transpose(1, 2), conv.weight, conv.bias, stride=rate)[0].t()


def attend(attn, a):
    """One call of a compressive layer: attn (model.Attention of kind "compressive"), a [n, d] -> out [n, d]; updates
    attn.memory."""
    spec = attn.spec
    n, d = a.shape
    if attn.memory is None:
        attn.memory = empty_memory(d, a.dtype)
    mem, cmem = attn.memory["mem"], attn.memory["cmem"]
    ctx = torch.cat([cmem, mem, a], 0)
    P = ctx.shape[0] - n
    q = attn.split_heads(attn.q(a))                   # [H, n, dh]
    k = attn.split_heads(attn.k(ctx))                 # [H, P + n, dh]
    v = attn.split_heads(attn.v(ctx))
    dh = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-1, -2)) * (dh ** -0.5)
    i = torch.arange(n).view(-1, 1)
    j = torch.arange(P + n).view(1, -1)
    scores = scores.masked_fill(j - P > i, float("-inf"))  # the memories are all in the past
    o = torch.matmul(torch.softmax(scores, dim=-1), v)
    out = attn.out(o.transpose(-3, -2).reshape(n, d))

    mem = torch.cat([mem, a.detach()], 0)
    M, C, rate = spec["mem_len"], spec["cmem_len"], spec["rate"]
    e = max(0, mem.shape[0] - M) // rate * rate
    if e > 0:
        compressed = compress(mem[:e].reshape(e // rate, rate, d), spec, getattr(attn, "compress", None))
        cmem = torch.cat([cmem, compressed.detach()], 0)[-C:]
        mem = mem[e:]
    attn.memory = {"mem": mem, "cmem": cmem}
    return out


def reset(model):
    """Empties every compressive layer's memories."""
    for layer in model.layers:
        layer.attn.memory = None


@torch.no_grad()
def evaluate(model, ids, segment):
    """Logits [n, V] of `ids` fed `segment` tokens per call from empty memories, positions continuing."""
    import numpy as np

    reset(model)
    t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    out = [model(t[s:s + segment], pos0=s) for s in range(0, len(ids), segment)]
    return torch.cat(out, 0).cpu().numpy()
