# SPDX-License-Identifier: MIT
"""PyTorch reference for facebookresearch/adaptive-span language models (Sukhbaatar et al. 2019).

The inference path of that codebase, ported module for module: TransformerSeq, TransformerSeqLayer,
MultiHeadSeqAttention, SeqAttention, FeedForwardLayer, AdaptiveSpan and AdaptiveMask (models.py,
adaptive_span.py), including the memory trim and the cache length, and trainer.py's full_eval loop, which feeds
the sequence block by block with one cache of past hidden states per layer, zeros at the start.

Module and parameter names are the codebase's, so state_dict() is a checkpoint it loads (wrapped in a module
with attribute `module`, as its DataParallel training does, every name gains the prefix "module.").
Left out: dropout (inference), the span loss, adaptive input/output and persistent memory.

Shapes: B batch, M block, H heads, D head_dim, d = H*D hidden size, L attn_span, L' = L minus the trim.

    import adaptive_span_model as asm
    model = asm.load_checkpoint("tests/goldens/adaptive_span_learned")   # float64
    log_probs = asm.evaluate(model, ids, block_size=64)                   # np.ndarray [n, V]
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def keys_before_each_query(scores):
    """[B, M, M+L] scores of the block's queries against [cache; block] -> [B, M, L].

    Row i keeps columns i .. i+L-1: the L keys strictly before query i, oldest first, so column l is at distance
    L - l (the codebase's _unskew)."""
    B, M, width = scores.size()
    L = width - M
    flat = F.pad(scores.reshape(B, -1), (0, M))   # B x (M*(M+L) + M)
    return flat.view(B, M, M + L + 1)[:, :, :L]


def place_keys_in_block(attn):
    """Inverse of keys_before_each_query: [B, M, L] weights -> [B, M, M+L] over [cache; block], zero elsewhere
    (the codebase's _skew)."""
    B, M, L = attn.size()
    flat = F.pad(attn, (0, M + 1)).reshape(B, -1)[:, :-M]   # B x (M*(M+L))
    return flat.view(B, M, M + L)


class AdaptiveMask(nn.Module):
    """Soft mask over the key axis: 1 for recent keys, a ramp of `ramp_size` down to 0 beyond z * max_size."""

    def __init__(self, max_size, ramp_size, shape):
        super().__init__()
        self._max_size = max_size
        self._ramp_size = ramp_size
        self.current_val = nn.Parameter(torch.zeros(*shape))          # z, [H, 1, 1]
        self.register_buffer("mask_template", torch.linspace(1 - max_size, 0, steps=max_size))  # [L]

    def forward(self, x):
        mask = (self.mask_template + self.current_val * self._max_size) / self._ramp_size + 1
        mask = mask.clamp(0, 1)                                        # [H, 1, L]
        if x.size(-1) < self._max_size:
            mask = mask[:, :, -x.size(-1):]                            # the trimmed window keeps the most recent keys
        return x * mask

    def get_current_max_size(self):
        size = math.ceil(self.current_val.max().item() * self._max_size) + self._ramp_size
        return max(0, min(self._max_size, size))


class AdaptiveSpan(nn.Module):
    """Learned span per head: masks attention after the softmax and trims keys no head of the layer can reach."""

    def __init__(self, attn_span, adapt_span_ramp, adapt_span_cache, nb_heads):
        super().__init__()
        self._max_span = attn_span
        self._adapt_cache = adapt_span_cache
        self._nb_heads = nb_heads
        self._mask = AdaptiveMask(attn_span, adapt_span_ramp, (nb_heads, 1, 1))

    def forward(self, attn):
        """attn [B*H, M, L'] after softmax -> masked and renormalised with sum + 1e-8."""
        BH, M = attn.size(0), attn.size(1)
        attn = attn.reshape(BH // self._nb_heads, self._nb_heads, M, -1)
        attn = self._mask(attn)
        attn = attn / (attn.sum(-1, keepdim=True) + 1e-8)
        return attn.view(BH, M, -1)

    def get_trim_len(self):
        """Oldest keys the mask zeroes for every head, rounded down to a multiple of 64."""
        L = self._max_span
        trim = min(L - 1, L - self._mask.get_current_max_size())
        return math.floor(trim / 64) * 64

    def trim_memory(self, query, key, value, key_pe):
        """key, value [B*H, cache+M, D] -> [B*H, L'+M, D]; key_pe [1, D, L] -> [1, D, L']."""
        trim = self.get_trim_len()
        cache = key.size(1) - query.size(1)
        trim_cache = trim - (self._max_span - cache)
        if trim_cache > 0:
            key, value = key[:, trim_cache:, :], value[:, trim_cache:, :]
        elif trim_cache < 0:  # a cache shorter than the window: pad with zero keys in front
            key = F.pad(key, [0, 0, -trim_cache, 0])
            value = F.pad(value, [0, 0, -trim_cache, 0])
        if trim > 0 and key_pe is not None:
            key_pe = key_pe[:, :, trim:]
        return key, value, key_pe

    def get_cache_size(self):
        if self._adapt_cache:
            # 64 more than needed, as the codebase keeps room for spans that grow while training
            return min(self._max_span, self._max_span - self.get_trim_len() + 64)
        return self._max_span


class SeqAttention(nn.Module):
    """One head group: each query attends the attn_span positions before it (not itself), content + position."""

    def __init__(self, head_dim, nb_heads, attn_span, adapt_span_params):
        super().__init__()
        self.head_dim = head_dim
        self.attn_span = attn_span
        self.adapt_span_enabled = adapt_span_params["adapt_span_enabled"]
        if self.adapt_span_enabled:
            self.adaptive_span = AdaptiveSpan(attn_span, adapt_span_params["adapt_span_ramp"],
                                              adapt_span_params["adapt_span_cache"], nb_heads)

    def forward(self, query, key, value, key_pe):
        """query [B*H, M, D]; key, value [B*H, cache+M, D]; key_pe [1, D, L] -> [B*H, M, D]."""
        if self.adapt_span_enabled:
            key, value, key_pe = self.adaptive_span.trim_memory(query, key, value, key_pe)
        content = keys_before_each_query(torch.matmul(query, key.transpose(-1, -2)))   # [B*H, M, L']
        position = torch.matmul(query, key_pe)                                            # [B*H, M, L']
        attn = F.softmax((content + position) / math.sqrt(self.head_dim), dim=-1)
        if self.adapt_span_enabled:
            attn = self.adaptive_span(attn)
        return torch.matmul(place_keys_in_block(attn), value)

    def get_cache_size(self):
        return self.adaptive_span.get_cache_size() if self.adapt_span_enabled else self.attn_span


class MultiHeadSeqAttention(nn.Module):
    def __init__(self, hidden_size, nb_heads, attn_span, adapt_span_params):
        super().__init__()
        assert hidden_size % nb_heads == 0
        self.nb_heads = nb_heads
        self.head_dim = hidden_size // nb_heads
        self.attn = SeqAttention(self.head_dim, nb_heads, attn_span, adapt_span_params)
        self.proj_query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.proj_out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.proj_val = nn.Linear(hidden_size, hidden_size, bias=False)
        self.proj_key = nn.Linear(hidden_size, hidden_size, bias=False)

    def split_heads(self, x):
        """[B, T, H*D] -> [B*H, T, D]; head h owns columns h*D .. h*D+D-1."""
        B, T = x.size(0), x.size(1)
        return x.view(B, T, self.nb_heads, self.head_dim).transpose(1, 2).reshape(B * self.nb_heads, T, self.head_dim)

    def forward(self, query, key, value, key_pe):
        B, M = query.size(0), query.size(1)
        q = self.split_heads(self.proj_query(query))
        k = self.split_heads(self.proj_key(key))
        v = self.split_heads(self.proj_val(value))
        out = self.attn(q, k, v, key_pe)                                    # [B*H, M, D]
        out = out.view(B, self.nb_heads, M, self.head_dim).transpose(1, 2).reshape(B, M, -1)
        return self.proj_out(out)


class FeedForwardLayer(nn.Module):
    def __init__(self, hidden_size, inner_hidden_size):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, inner_hidden_size)
        self.fc2 = nn.Linear(inner_hidden_size, hidden_size)

    def forward(self, h):
        return self.fc2(F.relu(self.fc1(h)))


class TransformerSeqLayer(nn.Module):
    """Post-LN block; attends over [cache; block] of its own input hidden states."""

    def __init__(self, hidden_size, inner_hidden_size, nb_heads, attn_span, adapt_span_params):
        super().__init__()
        self.attn = MultiHeadSeqAttention(hidden_size, nb_heads, attn_span, adapt_span_params)
        self.norm1 = nn.LayerNorm(hidden_size)
        self.ff = FeedForwardLayer(hidden_size, inner_hidden_size)
        self.norm2 = nn.LayerNorm(hidden_size)

    def forward(self, h, h_cache, key_pe):
        h_all = torch.cat([h_cache, h], dim=1)                              # [B, cache+M, d]
        h = self.norm1(h + self.attn(h, h_all, h_all, key_pe))
        return self.norm2(h + self.ff(h))


class TransformerSeq(nn.Module):
    def __init__(self, vocab_size, hidden_size, inner_hidden_size, nb_heads, nb_layers, attn_span,
                 adapt_span_params, **unused):
        super().__init__()
        self.in_emb = nn.Embedding(vocab_size, hidden_size)
        self.out_emb = nn.Linear(hidden_size, vocab_size)
        self.key_pe = nn.Parameter(torch.randn(1, hidden_size // nb_heads, attn_span))   # [1, D, L]
        self.layers = nn.ModuleList(
            TransformerSeqLayer(hidden_size, inner_hidden_size, nb_heads, attn_span, adapt_span_params)
            for _ in range(nb_layers))

    def forward(self, x, h_cache):
        """x [B, M] ids, h_cache: per layer [B, cache, d] -> (log-probs [B, M, V], next caches)."""
        block = x.size(1)
        h = self.in_emb(x)
        next_cache = []
        for layer, cache in zip(self.layers, h_cache):
            size = layer.attn.attn.get_cache_size()
            if size > block:
                next_cache.append(torch.cat([cache[:, -size + block:, :], h], dim=1).detach())
            else:
                next_cache.append(h[:, -size:, :].detach())
            h = layer(h, cache, self.key_pe)
        return F.log_softmax(self.out_emb(h), dim=-1), next_cache


def initial_cache(model, batch=1):
    """full_eval's starting caches: zeros of each layer's cache length."""
    d = model.in_emb.weight.size(1)
    dtype = model.in_emb.weight.dtype
    return [torch.zeros(batch, layer.attn.attn.get_cache_size(), d, dtype=dtype) for layer in model.layers]


@torch.no_grad()
def evaluate(model, ids, block_size):
    """trainer.py's full_eval on one sequence: blocks of block_size (the last may be shorter), caches from zeros.
    Returns the log-probabilities [n, V] at every position as float64 numpy."""
    model.eval()
    data = torch.tensor(ids, dtype=torch.long).view(1, -1)
    cache = initial_cache(model)
    out = []
    for pos in range(0, data.size(1), block_size):
        log_probs, cache = model(data[:, pos:pos + block_size], cache)
        out.append(log_probs[0])
    return torch.cat(out).double().numpy()


def model_kwargs(config):
    """config.json (converter/adaptive-span.md) -> TransformerSeq keyword arguments."""
    mp, ap = config["model_params"], config["adapt_span_params"]
    return dict(vocab_size=config["vocab_size"], hidden_size=mp["hidden_size"],
                inner_hidden_size=mp["inner_hidden_size"], nb_heads=mp["nb_heads"], nb_layers=mp["nb_layers"],
                attn_span=mp["attn_span"],
                adapt_span_params={"adapt_span_enabled": ap["adapt_span_enabled"],
                                   "adapt_span_ramp": ap.get("adapt_span_ramp", 32),
                                   "adapt_span_cache": ap.get("adapt_span_cache", False)})


def load_checkpoint(directory, dtype=torch.float64):
    """A converted checkpoint directory (config.json + *.safetensors, names with or without "module.") -> model."""
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    model = TransformerSeq(**model_kwargs(config))
    tensors = safetensors_io.load_dir(directory)
    state = {k[len("module."):] if k.startswith("module.") else k: torch.from_numpy(np.asarray(v, np.float32))
             for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("._mask.mask_template")]  # a buffer the model rebuilds
    if missing or unexpected:
        raise ValueError(f"{directory}: missing tensors {missing}, unexpected tensors {unexpected}")
    model.block_size = config["model_params"]["block_size"]
    return model.to(dtype).eval()
