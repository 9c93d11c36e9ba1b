# SPDX-License-Identifier: MIT
"""Plain PyTorch implementation of Tern's reference family ("model_type": "tern-reference").

The specification lives in converter/reference-family.md. This file follows it literally and is
meant to be read next to it: the module tree reproduces the safetensors parameter names exactly
(`embed.weight`, `layers.0.attn.q.weight`, ...), so `state_dict()` of a model is a checkpoint.

Attention is pluggable per layer: ATTENTION_KINDS maps the "kind" of an attention object to a
function `fn(q, k, v, spec) -> out` on head-split tensors [..., H, n, dh]. Every kind other than
dense is computed the plainest way: an explicit boolean visibility mask [H, n, n] built from the
table in the spec (`visibility_mask`), applied to the full score matrix before the softmax.
Adding a kind means adding its rule to VISIBILITY, ATTENTION_KINDS and ATTENTION_PARAMS. A "groups"
object splits a layer's heads into consecutive groups, each with its own attention object
(`grouped_attention`).

Usage:
    cfg = json.load(open("config.json"))
    m = ReferenceModel(cfg).double()
    m.load_state(safetensors_io.load_dir(checkpoint_dir))
    logits = m(torch.tensor(ids))          # [n, V]
"""

import copy
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_TYPE = "tern-reference"


# --------------------------------------------------------------------------------------------
# config


def normalize_config(cfg):
    """Return a copy of `cfg` with every default of the spec filled in and values validated.

    `attention` is always expanded to a list with one object per layer.
    """
    c = copy.deepcopy(dict(cfg))
    if c.get("model_type") != MODEL_TYPE:
        raise ValueError(f"model_type must be {MODEL_TYPE!r}, got {c.get('model_type')!r}")
    for key in ("vocab_size", "hidden_size", "num_layers", "num_heads", "max_position_embeddings"):
        if key not in c:
            raise ValueError(f"config is missing required key {key!r}")
        if not isinstance(c[key], int) or c[key] <= 0:
            raise ValueError(f"{key} must be a positive int, got {c[key]!r}")
    d, h = c["hidden_size"], c["num_heads"]
    if d % h:
        raise ValueError(f"num_heads ({h}) must divide hidden_size ({d})")
    c.setdefault("intermediate_size", 4 * d)
    c.setdefault("position_embedding", "learned")
    c.setdefault("norm_position", "pre")
    c.setdefault("final_norm", c["norm_position"] == "pre")
    c.setdefault("activation", "gelu")
    c.setdefault("linear_bias", True)
    c.setdefault("layer_norm_eps", 1e-5)
    c.setdefault("tie_word_embeddings", True)
    c.setdefault("lm_head_bias", False)
    c.setdefault("attention", {"kind": "dense"})

    if c["position_embedding"] not in ("learned", "sinusoidal", "none"):
        raise ValueError(f"position_embedding: unknown value {c['position_embedding']!r}")
    if c["norm_position"] not in ("pre", "post"):
        raise ValueError(f"norm_position: unknown value {c['norm_position']!r}")
    if c["activation"] not in ACTIVATIONS:
        raise ValueError(f"activation: unknown value {c['activation']!r}")
    att = c["attention"]
    if isinstance(att, dict):
        att = [copy.deepcopy(att) for _ in range(c["num_layers"])]
    if not isinstance(att, list) or len(att) != c["num_layers"]:
        raise ValueError("attention must be an object or a list with one object per layer")
    c["attention"] = [normalize_attention(a, h, f"attention[{i}]") for i, a in enumerate(att)]
    return c


# kind -> {key: (minimum, default or None if required)} for the integer parameters of each kind.
ATTENTION_PARAMS = {
    "dense": {},
    "sliding": {"window": (1, None)},
    "chunked": {"chunk": (1, None), "chunks_before": (0, 1), "chunks_after": (0, 0)},
    "strided": {"stride": (1, None)},
    "fixed": {"block": (1, None), "summary": (1, None)},
    "compressive": {"mem_len": (1, None), "cmem_len": (1, None), "rate": (1, None)},  # tools/reference/compressive.py
    # routing heads h >= local_heads; local heads h < local_heads see their chunk and the one before
    "routing": {"clusters": (1, None), "window": (1, None), "local_heads": (0, 0), "local_chunk": (1, 1)},
}
MAX_ATTENTION_PARAM = 2 ** 31 - 1  # the converter stores them as int32
# The kinds a head group of a "groups" object may have: each runs on its own heads from the layer's q, k and v.
GROUP_KINDS = ("dense", "sliding", "chunked", "strided", "fixed", "routing")
SPLIT_KINDS = ("strided", "fixed")  # kinds with a "heads": "merged" | "split" layout


def normalize_attention(a, num_heads, where="attention"):
    """Validate one attention object and return a copy with its defaults filled in."""
    if not isinstance(a, dict):
        raise ValueError(f"{where} must be an object, got {a!r}")
    a = copy.deepcopy(a)
    kind = a.setdefault("kind", "dense")
    if kind == "groups":
        return normalize_groups(a, num_heads, where)
    if kind not in ATTENTION_PARAMS:
        raise ValueError(f"{where}: unknown kind {kind!r}")
    if kind == "routing" and a.get("local_heads") and "local_chunk" not in a:
        raise ValueError(f"{where}.local_chunk is missing (local_heads > 0)")
    for key, (minimum, default) in ATTENTION_PARAMS[kind].items():
        if key not in a:
            if default is None:
                raise ValueError(f"{where}.{key} is missing")
            a[key] = default
        v = a[key]
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= MAX_ATTENTION_PARAM:
            raise ValueError(f"{where}.{key} must be an integer in [{minimum}, {MAX_ATTENTION_PARAM}], got {v!r}")
    if kind in SPLIT_KINDS:
        heads = a.setdefault("heads", "merged")
        if heads not in ("merged", "split"):
            raise ValueError(f"{where}.heads must be \"merged\" or \"split\", got {heads!r}")
        if heads == "split" and num_heads % 2:
            raise ValueError(f"{where}.heads: \"split\" needs an even num_heads, got {num_heads}")
    if kind == "compressive":
        from compressive import COMPRESSIONS

        if a.setdefault("compression", "conv") not in COMPRESSIONS:
            raise ValueError(f"{where}.compression must be one of {COMPRESSIONS}, got {a['compression']!r}")
    if kind == "routing" and a["local_heads"] >= num_heads:
        raise ValueError(f"{where}.local_heads ({a['local_heads']}) must leave at least one of {num_heads} heads routing")
    if kind == "fixed" and a["summary"] > a["block"]:
        raise ValueError(f"{where}.summary ({a['summary']}) exceeds block ({a['block']})")
    return a


def normalize_groups(a, num_heads, where):
    """{"kind": "groups", "groups": [{"num_heads": h_g, "kind": ..., ...}, ...]}: heads split in order."""
    groups = a.get("groups")
    if not isinstance(groups, list) or not groups:
        raise ValueError(f"{where}.groups must be a non-empty list of head groups")
    unknown = sorted(set(a) - {"kind", "groups"})
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}")
    out, total = [], 0
    for g, group in enumerate(groups):
        at = f"{where}.groups[{g}]"
        if not isinstance(group, dict):
            raise ValueError(f"{at} must be an object, got {group!r}")
        heads = group.get("num_heads")
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"{at}.num_heads must be a positive integer, got {heads!r}")
        if group.get("kind", "dense") not in GROUP_KINDS:
            raise ValueError(f"{at}.kind must be one of {GROUP_KINDS}, got {group.get('kind')!r}")
        spec = normalize_attention({k: v for k, v in group.items() if k != "num_heads"}, heads, at)
        out.append({"num_heads": heads, **spec})
        total += heads
    if total != num_heads:
        raise ValueError(f"{where}.groups have {total} heads in all, but num_heads is {num_heads}")
    return {"kind": "groups", "groups": out}


def head_groups(spec, num_heads):
    """[(first head, end head, attention object)] of a layer: its groups in order, or one group of every head."""
    if spec["kind"] != "groups":
        return [(0, num_heads, spec)]
    out, h0 = [], 0
    for g in spec["groups"]:
        out.append((h0, h0 + g["num_heads"], g))
        h0 += g["num_heads"]
    return out


# --------------------------------------------------------------------------------------------
# building blocks


# The written-out formulas; the model uses the equivalent fused torch kernels (faster to train),
# and tools/reference/selftest.py checks that the two agree.
def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),                        # exact erf form
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": torch.relu,
}


def sinusoidal_table(n, d, dtype=torch.float64, pos0=0):
    """pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(p / 10000^(2i/d)) for p in [pos0, pos0 + n).
    Computed in float64."""
    pos = torch.arange(pos0, pos0 + n, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.to(dtype)


def dense_attention(q, k, v, spec):
    """Causal softmax attention. q, k, v: [..., H, n, dh] -> [..., H, n, dh]."""
    n, dh = q.shape[-2], q.shape[-1]
    scores = torch.matmul(q, k.transpose(-1, -2)) * (dh ** -0.5)
    future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


# The table "Attention objects" of converter/reference-family.md, one rule per kind: whether query i
# sees key j in head h of H, before the causal condition j <= i that every kind adds. h, i and j are
# integer tensors that broadcast against each other; `s` is a normalized attention object.
def _dense(s, H, h, i, j):
    return torch.ones_like(i - j, dtype=torch.bool)


def _sliding(s, H, h, i, j):
    return i - s["window"] < j


def _chunked(s, H, h, i, j):
    C = s["chunk"]
    return j // C >= i // C - s["chunks_before"]  # chunks_after only names future keys


def _strided(s, H, h, i, j):
    l = s["stride"]
    local = i - l < j
    every_lth = (i - j) % l == 0
    if s["heads"] == "merged":
        return local | every_lth
    return torch.where(h < H // 2, local, every_lth)


def _fixed(s, H, h, i, j):
    l, c = s["block"], s["summary"]
    own_block = j // l == i // l
    summary = j % l >= l - c
    if s["heads"] == "merged":
        return own_block | summary
    return torch.where(h < H // 2, own_block, summary | (j == i))


VISIBILITY = {"dense": _dense, "sliding": _sliding, "chunked": _chunked, "strided": _strided, "fixed": _fixed}


def visibility_mask(spec, num_heads, n):
    """BoolTensor [H, n, n]: mask[h, i, j] is true when query i sees key j in head h."""
    spec = normalize_attention(spec, num_heads)
    if spec["kind"] == "groups":  # each group's rule on its own heads
        return torch.cat([visibility_mask(g, g["num_heads"], n) for g in spec["groups"]])
    h = torch.arange(num_heads).view(-1, 1, 1)
    i = torch.arange(n).view(1, -1, 1)
    j = torch.arange(n).view(1, 1, -1)
    mask = (j <= i) & VISIBILITY[spec["kind"]](spec, num_heads, h, i, j)
    return mask.expand(num_heads, n, n)


def masked_attention(q, k, v, spec):
    """Softmax attention restricted to visibility_mask(spec). q, k, v: [..., H, n, dh] -> [..., H, n, dh]."""
    H, n, dh = q.shape[-3], q.shape[-2], q.shape[-1]
    mask = visibility_mask(spec, H, n).to(q.device)
    scores = torch.matmul(q, k.transpose(-1, -2)) * (dh ** -0.5)
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


ROUTING_NORM_EPS = 1e-6  # layer norm without gain of queries and keys, as google-research's routing_transformer
ROUTING_COUNT_EPS = 1e-2  # outputs are divided by (number of clusters the query joined + this)


def top_window(scores, w):
    """Positions of the w largest scores, ties to the lower position, returned in position order."""
    order = torch.sort(scores, descending=True, stable=True).indices[:w]
    return torch.sort(order).values


def routing_attention(q, k, v, spec, centroids, gaps=None):
    """Routing attention (Roy et al. 2020) of one sequence. q, k, v: [H, n, dh]; centroids [H - L, K, dh].

    Heads h < L = local_heads: chunked local attention (own chunk of local_chunk and the one before).
    Routing head h >= L, written out per cluster c:
      q^ = LN(q), k^ = LN(k)                      no gain or bias, eps ROUTING_NORM_EPS
      Q_c = top-w positions of q^ . mu_c,  K_c = top-w positions of k^ . mu_c   (w = min(window, n))
      query i in Q_c attends the keys j in K_c with j <= i: softmax(q^_i . k^_j * dh^-0.5) v_j
      (no such key: the cluster adds zero for that query)
      out_i = sum over the clusters c with i in Q_c / (their count + ROUTING_COUNT_EPS)
    If `gaps` is a list, the smallest score gap across each top-w cut is appended to it (for golden robustness).
    """
    H, n, dh = q.shape
    L = spec["local_heads"]
    out = torch.zeros_like(v)
    if L:
        local = {"kind": "chunked", "chunk": spec["local_chunk"], "chunks_before": 1}
        out[:L] = masked_attention(q[:L], k[:L], v[:L], local)
    w = min(spec["window"], n)
    qn = F.layer_norm(q[L:], (dh,), eps=ROUTING_NORM_EPS)
    kn = F.layer_norm(k[L:], (dh,), eps=ROUTING_NORM_EPS)
    for r in range(H - L):
        total = torch.zeros(n, dh, dtype=v.dtype)
        count = torch.zeros(n, dtype=v.dtype)
        for c in range(centroids.shape[1]):
            sq, sk = qn[r] @ centroids[r, c], kn[r] @ centroids[r, c]
            qi, ki = top_window(sq, w), top_window(sk, w)
            if gaps is not None and w < n:
                for s in (sq, sk):
                    top = torch.sort(s, descending=True).values
                    gaps.append(float(top[w - 1] - top[w]))
            scores = (qn[r][qi] @ kn[r][ki].t()) * dh ** -0.5
            visible = ki[None, :] <= qi[:, None]
            p = torch.softmax(scores.masked_fill(~visible, float("-inf")), -1)
            p = torch.nan_to_num(p, nan=0.0)  # a query with no visible key in this cluster
            total[qi] += p @ v[L + r][ki]
            count[qi] += 1
        out[L + r] = total / (count + ROUTING_COUNT_EPS)[:, None]
    return out


# kind -> function(q, k, v, spec) computing attention on head-split tensors. Dense keeps its own
# function (a plain causal mask); it gives the same result as masked_attention with a dense spec.
ATTENTION_KINDS = {
    "dense": dense_attention,
    "sliding": masked_attention,
    "chunked": masked_attention,
    "strided": masked_attention,
    "fixed": masked_attention,
}


class Centroids(nn.Module):
    """The trained k-means centroids of one group's routing heads, [routing heads, clusters, dh]."""

    def __init__(self, heads, spec, dh):
        super().__init__()
        self.centroids = nn.Parameter(torch.zeros(heads - spec["local_heads"], spec["clusters"], dh))


class Attention(nn.Module):
    def __init__(self, d, num_heads, bias, spec):
        super().__init__()
        self.num_heads = num_heads
        self.spec = spec
        self.q = nn.Linear(d, d, bias=bias)
        self.k = nn.Linear(d, d, bias=bias)
        self.v = nn.Linear(d, d, bias=bias)
        self.out = nn.Linear(d, d, bias=bias)
        dh = d // num_heads
        if spec["kind"] == "routing":  # trained k-means centroids of the routing heads
            self.centroids = nn.Parameter(torch.zeros(num_heads - spec["local_heads"], spec["clusters"], dh))
        if spec["kind"] == "groups":  # layers.{i}.attn.groups.{g}.centroids for each routing group g
            self.groups = nn.ModuleList([Centroids(b - a, g, dh) if g["kind"] == "routing" else nn.Module()
                                         for a, b, g in head_groups(spec, num_heads)])
        if spec["kind"] == "compressive":  # memories kept between calls (compressive.py)
            self.memory = None
            if spec["compression"] == "conv":
                self.compress = nn.Conv1d(d, d, spec["rate"], stride=spec["rate"])

    def split_heads(self, x):
        # [..., n, d] -> [..., H, n, dh]; head h owns features h*dh .. h*dh+dh-1
        *lead, n, d = x.shape
        return x.view(*lead, n, self.num_heads, d // self.num_heads).transpose(-3, -2)

    def attend(self, q, k, v, spec, centroids):
        """One attention object on head-split q, k, v [..., heads, n, dh]."""
        if spec["kind"] == "routing":
            if q.dim() != 3:
                raise ValueError("routing attention runs one sequence at a time")
            return routing_attention(q, k, v, spec, centroids, getattr(self, "gaps", None))
        return ATTENTION_KINDS[spec["kind"]](q, k, v, spec)

    def forward(self, x):
        if self.spec["kind"] == "compressive":
            import compressive

            return compressive.attend(self, x)
        q = self.split_heads(self.q(x))
        k = self.split_heads(self.k(x))
        v = self.split_heads(self.v(x))
        if self.spec["kind"] == "groups":
            # each group on its own heads h in [a, b), outputs back in head order
            o = torch.cat([self.attend(q[..., a:b, :, :], k[..., a:b, :, :], v[..., a:b, :, :], g,
                                       getattr(module, "centroids", None))
                           for (a, b, g), module in zip(head_groups(self.spec, self.num_heads), self.groups)], dim=-3)
        else:
            o = self.attend(q, k, v, self.spec, getattr(self, "centroids", None))
        o = o.transpose(-3, -2).reshape(x.shape)  # heads concatenated
        return self.out(o)


class MLP(nn.Module):
    def __init__(self, d, f, bias, activation):
        super().__init__()
        self.fc1 = nn.Linear(d, f, bias=bias)
        self.fc2 = nn.Linear(f, d, bias=bias)
        self.act = ACTIVATIONS[activation]

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        d = cfg["hidden_size"]
        eps = cfg["layer_norm_eps"]
        self.pre = cfg["norm_position"] == "pre"
        self.attn_norm = nn.LayerNorm(d, eps=eps)
        self.attn = Attention(d, cfg["num_heads"], cfg["linear_bias"], cfg["attention"][layer])
        self.mlp_norm = nn.LayerNorm(d, eps=eps)
        self.mlp = MLP(d, cfg["intermediate_size"], cfg["linear_bias"], cfg["activation"])

    def forward(self, x):
        if self.pre:
            x = x + self.attn(self.attn_norm(x))
            x = x + self.mlp(self.mlp_norm(x))
        else:
            x = self.attn_norm(x + self.attn(x))
            x = self.mlp_norm(x + self.mlp(x))
        return x


# --------------------------------------------------------------------------------------------
# model


class ReferenceModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg = normalize_config(cfg)
        V, d, P = cfg["vocab_size"], cfg["hidden_size"], cfg["max_position_embeddings"]
        self.embed = nn.Embedding(V, d)
        if cfg["position_embedding"] == "learned":
            self.pos_embed = nn.Embedding(P, d)
        else:
            self.pos_embed = None
            self.register_buffer("sinusoidal", sinusoidal_table(P, d, torch.float32), persistent=False)
        # "none": no position is added; causal attention alone tells the layers where a token is.
        self.no_positions = cfg["position_embedding"] == "none"
        self.layers = nn.ModuleList([Block(cfg, i) for i in range(cfg["num_layers"])])
        self.final_norm = nn.LayerNorm(d, eps=cfg["layer_norm_eps"]) if cfg["final_norm"] else None
        if cfg["tie_word_embeddings"]:
            self.lm_head = None
            self.lm_head_bias = nn.Parameter(torch.zeros(V)) if cfg["lm_head_bias"] else None
        else:
            self.lm_head = nn.Linear(d, V, bias=cfg["lm_head_bias"])
            self.lm_head_bias = None

    # The sinusoidal table is rebuilt in float64 whenever the model is cast, so that a float64
    # model uses an exact table rather than an upcast float32 one.
    def _apply(self, fn):
        super()._apply(fn)
        if self.pos_embed is None:
            t = self.embed.weight
            self.sinusoidal = sinusoidal_table(self.cfg["max_position_embeddings"], self.cfg["hidden_size"],
                                               t.dtype).to(t.device)
        return self

    def positions(self, n, pos0=0):
        beyond = pos0 + n > self.cfg["max_position_embeddings"]
        if self.pos_embed is not None:
            if beyond:
                raise ValueError(f"sequence of {pos0 + n} tokens exceeds max_position_embeddings "
                                 f"{self.cfg['max_position_embeddings']}")
            return self.pos_embed.weight[pos0:pos0 + n]
        if beyond:  # sinusoidal positions are computed, so they have no end (as in Tern's runtime)
            t = self.embed.weight
            return sinusoidal_table(n, self.cfg["hidden_size"], t.dtype, pos0).to(t.device)
        return self.sinusoidal[pos0:pos0 + n]

    def forward(self, ids, pos0=0):
        """ids: LongTensor [n] or [B, n] -> logits [n, V] or [B, n, V]. pos0: position of the first id (a later
        segment of a stream, for compressive layers, whose memories carry over between calls)."""
        n = ids.shape[-1]
        x = self.embed(ids)
        if not self.no_positions:
            x = x + self.positions(n, pos0)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)

    def head(self, x):
        """The last layer's output x [..., d] -> logits [..., V]: final norm, then the (tied or untied) head."""
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.lm_head is not None:
            return self.lm_head(x)
        logits = torch.matmul(x, self.embed.weight.t())
        if self.lm_head_bias is not None:
            logits = logits + self.lm_head_bias
        return logits

    # ---- checkpoint names <-> parameters

    def param_map(self):
        """dict safetensors name -> Parameter, exactly the names of the spec."""
        out = {}
        for name, p in self.named_parameters():
            if name == "lm_head_bias":  # tied head with a bias
                name = "lm_head.bias"
            out[name] = p
        return out

    def expected_names(self):
        return sorted(self.param_map())

    def load_state(self, tensors, strict=True):
        """Copy a dict name -> np.ndarray (any float dtype) into the parameters (cast to their dtype)."""
        params = self.param_map()
        missing = sorted(set(params) - set(tensors))
        unexpected = sorted(set(tensors) - set(params))
        if strict and (missing or unexpected):
            raise ValueError(f"checkpoint mismatch: missing {missing}, unexpected {unexpected}")
        with torch.no_grad():
            for name, p in params.items():
                if name not in tensors:
                    continue
                a = np.asarray(tensors[name])
                if tuple(a.shape) != tuple(p.shape):
                    raise ValueError(f"{name}: checkpoint shape {list(a.shape)}, expected {list(p.shape)}")
                p.copy_(torch.from_numpy(a.astype(np.float64)).to(p.dtype))
        return self

    def export_state(self, dtype=np.float32):
        """dict name -> np.ndarray in `dtype`, ready for safetensors_io.save."""
        return {name: p.detach().cpu().double().numpy().astype(dtype) for name, p in self.param_map().items()}


# --------------------------------------------------------------------------------------------
# helpers


def load_checkpoint(directory, dtype=torch.float64):
    """Build a model from a checkpoint directory (config.json + *.safetensors)."""
    import safetensors_io

    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    m = ReferenceModel(cfg).to(dtype)
    m.load_state(safetensors_io.load_dir(directory))
    m.eval()
    return m


@torch.no_grad()
def logits_for(model, ids):
    """Run `ids` (list of ints) through the model; returns np.ndarray [n, V] in the model's dtype."""
    t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    return model(t).cpu().numpy()
