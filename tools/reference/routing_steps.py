# SPDX-License-Identifier: MIT
"""A reference-family sequence continued one token at a time, as Tern defines continuation for routing layers
(runtime/src/ops/routing.h, "Continuing a sequence"; converter/reference-family.md, Routing attention).

The first call runs whole: model.py's forward, whose routing clusters see the whole call. Every later position t is
a step. In each layer, its attention input row is appended to that layer's cache of attention inputs (rows keep the
values they had when their position ran), and its attention output is the LAST ROW of the layer's attention over the
cached rows 0..t: for a routing head, routing_attention of the prefix, whose top-w clusters then range over 0..t.
This is written out by brute force (the whole prefix recomputed each step), independently of the runtime's bounded
state (per cluster its w best keys and the w best query scores so far).

Usage:
    s = Stepper(model)                 # model.py's ReferenceModel, float64, eval
    first = s.prompt(ids[:P])          # [P, V]
    row = s.step(ids[P])               # [V], position P
    s.min_gap                          # the closest top-w decision any step made (see step())
"""

import numpy as np
import torch
import torch.nn.functional as F

from model import ROUTING_NORM_EPS, head_groups


class Stepper:
    def __init__(self, model):
        self.m = model
        self.cache = [None] * len(model.layers)  # per layer: attention inputs [t, d]
        self.t = 0
        self.min_gap = float("inf")

    @torch.no_grad()
    def prompt(self, ids):
        captured = {}
        hooks = [block.attn.register_forward_hook(lambda mod, inp, out, i=i: captured.__setitem__(i, inp[0]))
                 for i, block in enumerate(self.m.layers)]
        try:
            logits = self.m(torch.as_tensor(np.asarray(ids, dtype=np.int64)))
        finally:
            for h in hooks:
                h.remove()
        self.cache = [captured[i] for i in range(len(self.m.layers))]
        self.t = len(ids)
        return logits.numpy()

    @torch.no_grad()
    def step(self, token):
        m, t = self.m, self.t
        x = m.embed(torch.tensor([token]))
        if not m.no_positions:
            x = x + m.positions(1, t)
        for i, block in enumerate(m.layers):
            a_in = block.attn_norm(x) if block.pre else x
            self.cache[i] = torch.cat([self.cache[i], a_in])
            self.record_gaps(block.attn, self.cache[i])
            a = block.attn(self.cache[i])[-1:]  # position t's row of the attention over 0..t
            if block.pre:
                x = x + a
                x = x + block.mlp(block.mlp_norm(x))
            else:
                x = block.attn_norm(x + a)
                x = block.mlp_norm(x + block.mlp(x))
        self.t += 1
        return m.head(x)[0].numpy()

    def record_gaps(self, attn, prefix):
        """The margins of the step's top-w decisions in every routing head: how far the cluster's w-th key score is
        from the next (which keys the cluster holds), and how far the new query's score is from the w-th best of the
        earlier queries (whether it joins). Float32 rounding elsewhere must not flip them."""
        n = prefix.shape[0]
        q = attn.split_heads(attn.q(prefix))
        k = attn.split_heads(attn.k(prefix))
        groups = head_groups(attn.spec, attn.num_heads)
        modules = attn.groups if attn.spec["kind"] == "groups" else [attn]
        for (a, b, spec), module in zip(groups, modules):
            if spec["kind"] != "routing":
                continue
            w = min(spec["window"], n)
            if w >= n:  # every position joins every cluster
                continue
            L = spec["local_heads"]
            qn = F.layer_norm(q[a + L:b], (q.shape[-1],), eps=ROUTING_NORM_EPS)
            kn = F.layer_norm(k[a + L:b], (k.shape[-1],), eps=ROUTING_NORM_EPS)
            mu = module.centroids
            for r in range(b - a - L):
                for c in range(mu.shape[1]):
                    sk = torch.sort(kn[r] @ mu[r, c], descending=True).values
                    sq = qn[r] @ mu[r, c]
                    earlier = torch.sort(sq[:-1], descending=True).values
                    self.min_gap = min(self.min_gap, float(sk[w - 1] - sk[w]), float(abs(sq[-1] - earlier[w - 1])))
