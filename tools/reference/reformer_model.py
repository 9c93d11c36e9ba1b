# SPDX-License-Identifier: MIT
"""PyTorch reference for Hugging Face Reformer checkpoints (ReformerModelWithLMHead in eval mode).

Written from transformers' modeling_reformer.py and following its steps one by one, in float32 as HF runs them
(the float32 rounding of the LSH log-sum-exps is part of HF's numbers: converter/reformer.md):

  - ReformerModel.forward: right-pads the ids with pad_token_id to a multiple of the lcm of the chunk lengths when
    n > the smallest chunk length and n is not such a multiple (with an attention mask of 1 for real tokens, 0 for
    pads), and slices the output back to n.
  - ReformerEmbeddings: word embedding + axial (AxialPositionEmbeddings, eval path) or learned positions.
  - ReformerEncoder: reversible residual, two streams starting equal; per layer
        attn_output = attn_output + Wo · SelfAttention(LayerNorm_a(hidden))
        hidden      = hidden + FeedForward(LayerNorm_f(attn_output))
    then LayerNorm over cat([attn_output, hidden]) (2 * hidden_size).
  - LSHSelfAttention: _hash_vectors, _stable_argsort, _gather_by_expansion, _len_and_dim_norm, _look_adjacent,
    _compute_attn_mask, the self mask, logsumexp, ReverseSort, the softmax over rounds.
  - LocalSelfAttention: q, k / sqrt(dh), v; chunked with _look_adjacent; causal and padding masks.
  - ReformerOnlyLMHead: Linear(2 * hidden_size -> vocab) with the tied bias.

HF draws the LSH rotations from torch's RNG on every call. Here they are an input: `rotations[layer]` of shape
[heads, head_dim, num_hashes, rotation_size / 2], read from the checkpoint tensor
`reformer.encoder.layers.{i}.attention.self_attention.rotations` (see reformer_rotations.py, which draws them
exactly as HF does when config.hash_seed is set).

Usage:
    import reformer_model as rm
    model = rm.load_checkpoint("tests/goldens/reformer_mixed_factorized")
    logits = model.logits([1, 2, 3])          # np.ndarray float32 [n, vocab]
"""

import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

ROTATIONS = "reformer.encoder.layers.{}.attention.self_attention.rotations"

ACTIVATIONS = {
    "relu": torch.nn.functional.relu,
    "gelu": torch.nn.functional.gelu,  # HF GELUActivation: the exact (erf) form
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
}


def bucket_factors(num_buckets):
    """num_buckets as HF accepts it (int, or list of factors) -> list of factors."""
    return [int(num_buckets)] if isinstance(num_buckets, int) else [int(f) for f in num_buckets]


def rotation_size(num_buckets):
    return sum(bucket_factors(num_buckets))


class Config:
    def __init__(self, d):
        self.raw = d
        self.vocab_size = d["vocab_size"]
        self.hidden_size = d["hidden_size"]
        self.num_attention_heads = d["num_attention_heads"]
        self.attention_head_size = d["attention_head_size"]
        self.attn_layers = list(d["attn_layers"])
        self.feed_forward_size = d["feed_forward_size"]
        self.hidden_act = d["hidden_act"]
        self.layer_norm_eps = d.get("layer_norm_eps", 1e-12)
        self.axial_pos_embds = d.get("axial_pos_embds", True)
        self.axial_pos_shape = list(d.get("axial_pos_shape", [64, 64]))
        self.axial_pos_embds_dim = list(d.get("axial_pos_embds_dim", [64, 192]))
        self.max_position_embeddings = d["max_position_embeddings"]
        self.local_attn_chunk_length = d["local_attn_chunk_length"]
        self.local_num_chunks_before = d["local_num_chunks_before"]
        self.local_num_chunks_after = d["local_num_chunks_after"]
        self.lsh_attn_chunk_length = d["lsh_attn_chunk_length"]
        self.lsh_num_chunks_before = d["lsh_num_chunks_before"]
        self.lsh_num_chunks_after = d["lsh_num_chunks_after"]
        self.num_buckets = d["num_buckets"]
        self.num_hashes = d["num_hashes"]
        self.pad_token_id = d.get("pad_token_id", 0)
        self.is_decoder = d.get("is_decoder", False)
        kinds = set(self.attn_layers)
        if not kinds <= {"lsh", "local"}:
            raise ValueError(f"attn_layers: only 'lsh' and 'local', got {self.attn_layers}")
        if self.num_buckets is None and "lsh" in kinds:
            raise ValueError("num_buckets is null: HF would pick it from the first sequence length")

    def chunk_lengths(self):
        kinds = set(self.attn_layers)
        return [c for kind, c in (("lsh", self.lsh_attn_chunk_length), ("local", self.local_attn_chunk_length))
                if kind in kinds]

    def lcm_chunk_length(self):
        """HF _get_least_common_mult_chunk_len."""
        return int(np.lcm.reduce(self.chunk_lengths()))

    def min_chunk_length(self):
        """HF _get_min_chunk_len."""
        return min(self.chunk_lengths())


def _look_adjacent(vectors, before, after):
    """HF EfficientAttentionMixin._look_adjacent: [b, h, chunks, len, ...] -> [b, h, chunks, len * (1+before+after), ...],
    circular over the chunk axis."""
    if before == 0 and after == 0:
        return vectors
    slices = []
    for i in range(-before, after + 1):
        slices.append(vectors if i == 0 else torch.cat([vectors[:, :, i:, ...], vectors[:, :, :i, ...]], dim=2))
    return torch.cat(slices, dim=3)


def _split_heads(x, heads, dh):
    """[b, n, heads*dh] -> [b, heads, n, dh]"""
    return x.view(x.shape[0], x.shape[1], heads, dh).transpose(2, 1)


def _merge_heads(x, heads, dh):
    """[b, heads, n, dh] -> [b, n, heads*dh]"""
    x = x.permute(0, 2, 1, 3)
    return torch.reshape(x, (x.shape[0], -1, heads * dh))


def _split_seq(x, f1, f2, heads, dh=None):
    """HF _split_seq_length_dim_to: [b, h, n(, dh)] -> [b, h, f1, f2(, dh)]"""
    shape = (x.shape[0], heads, f1, f2)
    return torch.reshape(x, shape + ((dh,) if x.dim() == 4 else ()))


def _stable_argsort(vector, dim):
    """HF _stable_argsort: argsort of len * value + index, which makes torch's argsort stable."""
    offset = torch.arange(vector.shape[dim]).view(1, 1, -1).expand(vector.shape)
    return torch.argsort(vector.shape[dim] * vector + (offset % vector.shape[dim]), dim=dim)


class LSHAttention:
    """LSHSelfAttention.forward without cache, dropout or head mask (eval)."""

    def __init__(self, cfg, w_qk, w_v, rotations):
        self.cfg = cfg
        self.heads = cfg.num_attention_heads
        self.dh = cfg.attention_head_size
        self.chunk = cfg.lsh_attn_chunk_length
        self.before = cfg.lsh_num_chunks_before
        self.after = cfg.lsh_num_chunks_after
        self.num_hashes = cfg.num_hashes
        self.num_buckets = cfg.num_buckets
        self.w_qk, self.w_v = w_qk, w_v
        self.rotations = rotations  # [heads, dh, num_hashes, rot/2]
        self.self_mask_value = torch.tensor(-1e5, dtype=torch.float32)
        self.mask_value = torch.tensor(-1e9, dtype=torch.float32)
        self.hash_margins = []  # per call: the smallest gap between the best and second-best rotated value

    def hash_vectors(self, vectors, attention_mask, increase_num_buckets=False):
        """HF _hash_vectors with the given rotations. vectors [b, h, n, dh] -> buckets [b, h, hashes * n].
        increase_num_buckets: the rounds' offsets count the padding bucket although no token here is padding (HF's
        cached step, when the cached buckets came from a padded prompt)."""
        batch = vectors.shape[0]
        factors = bucket_factors(self.num_buckets)
        num_buckets = int(np.prod(factors))
        rotated = torch.einsum("bmtd,mdhr->bmhtr", vectors, self.rotations)
        if len(factors) == 1:
            rotated = torch.cat([rotated, -rotated], dim=-1)
            self._note_margin(rotated)
            buckets = torch.argmax(rotated, dim=-1)
        else:
            buckets, cur_sum, cur_product = None, 0, 1
            for f in factors:
                part = rotated[..., cur_sum:cur_sum + f // 2]
                cur_sum += f // 2
                part = torch.cat([part, -part], dim=-1)
                self._note_margin(part)
                a = torch.argmax(part, dim=-1)
                buckets = a if buckets is None else buckets + cur_product * a
                cur_product *= f
        if attention_mask is not None and attention_mask.sum().item() < batch * attention_mask.shape[-1]:
            num_buckets += 1  # an extra bucket for padding tokens only
            keep = attention_mask.to(torch.bool)[:, None, None, :].expand(buckets.shape)
            buckets = torch.where(keep, buckets, torch.tensor(num_buckets - 1, dtype=torch.long))
        elif increase_num_buckets:
            num_buckets += 1
        offsets = (torch.arange(self.num_hashes) * num_buckets).view(1, 1, -1, 1)
        offsets = offsets.expand((batch, self.heads) + offsets.shape[-2:])
        return (buckets + offsets).flatten(start_dim=2, end_dim=3)

    def _note_margin(self, values):
        top2 = torch.topk(values, 2, dim=-1).values
        gap = (top2[..., 0] - top2[..., 1]) / top2[..., 0].abs().clamp_min(1e-30)
        self.hash_margins.append(float(gap.min()))

    def len_and_dim_norm(self, x):
        """HF _len_and_dim_norm (_len_norm with epsilon 1e-6, then * rsqrt(head size))."""
        variance = torch.mean(x ** 2, -1, keepdim=True)
        x = x * torch.rsqrt(variance + 1e-6)
        return x * torch.rsqrt(torch.tensor(self.dh, dtype=x.dtype))

    def gather_by_expansion(self, vectors, idxs):
        expanded = idxs.unsqueeze(-1).expand(-1, -1, -1, self.dh)
        return torch.gather(vectors.repeat(1, 1, self.num_hashes, 1), 2, expanded)

    def compute_attn_mask(self, q_idx, k_idx, attention_mask, dots_shape, standard):
        if attention_mask is not None:
            attention_mask = attention_mask.to(torch.bool)[:, None, :]
            if not standard:
                attention_mask = attention_mask[:, None, :].expand(q_idx.shape[:-1] + (-1,))
                attention_mask = torch.gather(attention_mask, -1, k_idx)
            attention_mask = attention_mask.unsqueeze(-2).expand(dots_shape)
        mask = None
        if self.cfg.is_decoder:
            causal = torch.ge(q_idx.unsqueeze(-1), k_idx.unsqueeze(-2))
            mask = causal if attention_mask is None else causal * attention_mask
        else:
            mask = attention_mask
        return mask

    def __call__(self, hidden, attention_mask):
        b, n = hidden.shape[0], hidden.shape[1]
        qk = _split_heads(hidden @ self.w_qk.T, self.heads, self.dh)
        v = _split_heads(hidden @ self.w_v.T, self.heads, self.dh)
        standard = n <= self.chunk
        self.last_buckets = None  # what HF returns for its cache: [b, h, hashes * n] or None (unchunked)
        if not standard:
            buckets = self.hash_vectors(qk, attention_mask)
            self.last_buckets = buckets
            sorted_idx = _stable_argsort(buckets, dim=-1)
            indices = torch.arange(sorted_idx.shape[-1]).view(1, 1, -1).expand(sorted_idx.shape)
            undo_idx = sorted_idx.new(*sorted_idx.size())
            undo_idx.scatter_(-1, sorted_idx, indices)
            idx_per_hash = sorted_idx % n
            qk = self.gather_by_expansion(qk, idx_per_hash)
            v = self.gather_by_expansion(v, idx_per_hash)
            qk = _split_seq(qk, -1, self.chunk, self.heads, self.dh)
            v = _split_seq(v, -1, self.chunk, self.heads, self.dh)
        else:
            idx_per_hash = torch.arange(n).repeat(b, self.heads, 1)
        keys = self.len_and_dim_norm(qk)
        query = qk
        # _attend
        if not standard:
            keys = _look_adjacent(keys, self.before, self.after)
            v = _look_adjacent(v, self.before, self.after)
        dots = torch.matmul(query, keys.transpose(-1, -2))
        if not standard:
            q_idx = _split_seq(idx_per_hash, -1, self.chunk, self.heads)
            k_idx = _look_adjacent(q_idx, self.before, self.after)
        else:
            q_idx = k_idx = idx_per_hash
        mask = self.compute_attn_mask(q_idx, k_idx, attention_mask, dots.shape, standard)
        if mask is not None:
            dots = torch.where(mask, dots, self.mask_value)
        self_mask = torch.ne(q_idx.unsqueeze(-1), k_idx.unsqueeze(-2))
        dots = torch.where(self_mask, dots, self.self_mask_value)
        logits = torch.logsumexp(dots, dim=-1, keepdim=True)
        probs = torch.exp(dots - logits)
        out = torch.matmul(probs, v)
        if out.dim() > 4:
            logits = logits.flatten(start_dim=2, end_dim=3).squeeze(-1)
            out = out.flatten(start_dim=2, end_dim=3)
        if not standard:
            # ReverseSort
            out = torch.gather(out, 2, undo_idx.unsqueeze(-1).expand(out.shape))
            logits = torch.gather(logits, 2, undo_idx)
            if self.num_hashes > 1:
                out = _split_seq(out, self.num_hashes, n, self.heads, self.dh)
                logits = _split_seq(logits, self.num_hashes, n, self.heads, self.dh).unsqueeze(-1)
                probs_vectors = torch.exp(logits - torch.logsumexp(logits, dim=2, keepdim=True))
                out = torch.sum(out * probs_vectors, dim=2)
        return _merge_heads(out, self.heads, self.dh)


class LocalAttention:
    """LocalSelfAttention.forward without cache, dropout or head mask (eval)."""

    def __init__(self, cfg, w_q, w_k, w_v):
        self.cfg = cfg
        self.heads = cfg.num_attention_heads
        self.dh = cfg.attention_head_size
        self.chunk = cfg.local_attn_chunk_length
        self.before = cfg.local_num_chunks_before
        self.after = cfg.local_num_chunks_after
        self.w_q, self.w_k, self.w_v = w_q, w_k, w_v
        self.mask_value = torch.tensor(-1e9, dtype=torch.float32)

    def __call__(self, hidden, attention_mask):
        b, n = hidden.shape[0], hidden.shape[1]
        q = _split_heads(hidden @ self.w_q.T, self.heads, self.dh)
        k = _split_heads(hidden @ self.w_k.T, self.heads, self.dh)
        v = _split_heads(hidden @ self.w_v.T, self.heads, self.dh)
        k = k / torch.sqrt(torch.tensor(self.dh, dtype=k.dtype))
        indices = torch.arange(n).repeat(b, self.heads, 1)
        standard = n <= self.chunk
        if not standard:
            q = _split_seq(q, -1, self.chunk, self.heads, self.dh)
            k = _split_seq(k, -1, self.chunk, self.heads, self.dh)
            v = _split_seq(v, -1, self.chunk, self.heads, self.dh)
            q_idx = _split_seq(indices, -1, self.chunk, self.heads)
            k_idx = _split_seq(indices, -1, self.chunk, self.heads)
            k = _look_adjacent(k, self.before, self.after)
            v = _look_adjacent(v, self.before, self.after)
            k_idx = _look_adjacent(k_idx, self.before, self.after)
        else:
            q_idx = k_idx = indices
        dots = torch.matmul(q, k.transpose(-1, -2))
        # _compute_attn_mask
        mask = None
        if attention_mask is not None:
            m = attention_mask.to(torch.bool)[:, None, :]
            if not standard:
                m = _split_seq(m, -1, self.chunk, 1)
                m = _look_adjacent(m, self.before, self.after)
            mask = m.unsqueeze(-2).expand(dots.shape)
        if self.cfg.is_decoder:
            causal = torch.ge(q_idx.unsqueeze(-1), k_idx.unsqueeze(-2))
            mask = causal if mask is None else causal * mask
        if mask is not None:
            dots = torch.where(mask, dots, self.mask_value)
        logits = torch.logsumexp(dots, dim=-1, keepdim=True)
        probs = torch.exp(dots - logits)
        out = torch.matmul(probs, v)
        if not standard:
            out = out.flatten(start_dim=2, end_dim=3)
        return _merge_heads(out, self.heads, self.dh)


class ReformerLM:
    def __init__(self, config_dict, state):
        cfg = Config(config_dict)
        self.cfg = cfg
        t = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in state.items()}
        self.t = t
        d = cfg.hidden_size
        self.layers = []
        for i, kind in enumerate(cfg.attn_layers):
            p = f"reformer.encoder.layers.{i}."
            sa = p + "attention.self_attention."
            if kind == "lsh":
                attn = LSHAttention(cfg, t[sa + "query_key.weight"], t[sa + "value.weight"], t[ROTATIONS.format(i)])
            else:
                attn = LocalAttention(cfg, t[sa + "query.weight"], t[sa + "key.weight"], t[sa + "value.weight"])
            self.layers.append((p, attn))
        self.act = ACTIVATIONS[cfg.hidden_act]
        self.d = d

    def _ln(self, x, prefix, width):
        return torch.nn.functional.layer_norm(x, (width,), self.t[prefix + "weight"], self.t[prefix + "bias"],
                                              self.cfg.layer_norm_eps)

    def embed(self, ids, start=0):
        """ids [1, n] at positions start .. start + n - 1."""
        cfg, t = self.cfg, self.t
        n = ids.shape[1]
        position_ids = torch.arange(start, start + n, dtype=torch.long).unsqueeze(0)
        x = torch.nn.functional.embedding(ids, t["reformer.embeddings.word_embeddings.weight"])
        if cfg.axial_pos_embds:
            # AxialPositionEmbeddings.forward, eval path.
            shape = cfg.axial_pos_shape
            if int(np.prod(shape)) < n:
                raise ValueError("axial_pos_shape multiplies to less than the sequence length")
            weights = [t[f"reformer.embeddings.position_embeddings.weights.{a}"] for a in range(len(shape))]
            broadcast = [w.expand((1,) + tuple(shape) + w.shape[-1:]) for w in weights]
            cols = -(-(int(position_ids.max()) + 1) // shape[1])
            pe = torch.cat([w[:, :cols] for w in broadcast], dim=-1)
            pe = torch.reshape(pe, (1, -1, pe.shape[-1]))
            pe = torch.index_select(pe[0], 0, position_ids[0]).unsqueeze(0)
        else:
            pe = torch.nn.functional.embedding(position_ids, t["reformer.embeddings.position_embeddings.embedding.weight"])
        return x + pe

    @torch.no_grad()
    def forward(self, ids_list, cache=None):
        """Logits [1, n, vocab]. With `cache` (an empty list), also what HF's use_cache keeps of this first call, one
        (buckets, states) per layer (reformer_cached.py): an LSH layer's buckets [1, heads, hashes, n] (None when the
        call was unchunked; local layers have none) and its attention input LayerNorm_a(hidden) [1, n, d], both
        without the padding."""
        cfg, t = self.cfg, self.t
        ids = torch.tensor([ids_list], dtype=torch.long)
        n = ids.shape[1]
        lcm, min_chunk = cfg.lcm_chunk_length(), cfg.min_chunk_length()
        attention_mask = None
        if n % lcm != 0 and n > min_chunk:
            pad = lcm - n % lcm
            ids = torch.cat([ids, torch.full((1, pad), cfg.pad_token_id, dtype=torch.long)], dim=-1)
            attention_mask = torch.cat([torch.ones((1, n), dtype=torch.uint8), torch.zeros((1, pad), dtype=torch.uint8)],
                                       dim=-1)
        h = self.embed(ids)
        hidden, attn_output = torch.chunk(torch.cat([h, h], dim=-1), 2, dim=-1)
        for p, attn in self.layers:
            normed = self._ln(hidden, p + "attention.layer_norm.", self.d)
            a = attn(normed, attention_mask)
            if cache is not None:
                buckets = getattr(attn, "last_buckets", None)
                if buckets is not None:
                    buckets = buckets.view(1, cfg.num_attention_heads, cfg.num_hashes, -1)[..., :n]
                cache.append((buckets, normed[:, :n]))
            attn_output, hidden = self.layer_rest(p, a, attn_output, hidden)
        return self.head(attn_output[:, :n], hidden[:, :n])

    def layer_rest(self, p, a, attn_output, hidden):
        """The layer after its attention a: attn_output += Wo a; hidden += FeedForward(LayerNorm_f(attn_output))."""
        t = self.t
        attn_output = attn_output + a @ t[p + "attention.output.dense.weight"].T
        f = self._ln(attn_output, p + "feed_forward.layer_norm.", self.d)
        f = self.act(f @ t[p + "feed_forward.dense.dense.weight"].T + t[p + "feed_forward.dense.dense.bias"])
        f = f @ t[p + "feed_forward.output.dense.weight"].T + t[p + "feed_forward.output.dense.bias"]
        return attn_output, hidden + f

    def head(self, attn_output, hidden):
        """LayerNorm over cat([attn_output, hidden]), then the LM head: logits [1, n, vocab]."""
        t = self.t
        out = self._ln(torch.cat([attn_output, hidden], dim=-1), "reformer.encoder.layer_norm.", 2 * self.d)
        bias = t["lm_head.bias"] if "lm_head.bias" in t else t["lm_head.decoder.bias"]
        return out @ t["lm_head.decoder.weight"].T + bias

    def logits(self, ids_list):
        return self.forward(ids_list)[0].numpy().astype(np.float32)

    def hash_margin(self):
        """Smallest relative gap between the chosen bucket and the runner-up over every LSH call so far."""
        margins = [m for _, a in self.layers if isinstance(a, LSHAttention) for m in a.hash_margins]
        return min(margins) if margins else math.inf


def load_checkpoint(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    return ReformerLM(config, safetensors_io.load_dir(directory))
