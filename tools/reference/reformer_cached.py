# SPDX-License-Identifier: MIT
"""Hugging Face Reformer's cached generation (use_cache=True, past_buckets_states), step by step as
modeling_reformer.py runs it, on the reference model of reformer_model.py.

HF's generate() runs the prompt as one call (padded as in reformer_model.py), keeping per layer the attention input
LayerNorm_a(hidden) of every real position ("states") and, for an LSH layer whose call was chunked, the buckets of
every round ([1, heads, hashes, n], with the rounds' offsets of that call). Every later call is one token, and its
layers read that cache; nothing cached is ever recomputed:

  - LSH layer, buckets cached (LSHSelfAttention._get_relevant_hid_states_and_buckets): the new query qk is hashed
    with the same rotations (its rounds offset by buckets + 1 when the cached buckets reach past
    hashes * buckets - 1, i.e. when the prompt's padding bucket was counted); per head and round, the cached buckets
    plus the new one are stable-argsorted; the new token's index i in that order gives a window of
    chunk * (1 + before + after) sorted slots starting at (i // chunk - before) * chunk, taken modulo the L = cached + 1
    positions (so a window may hold a position several times); keys and values are projected from the states of
    those positions (per head), keys normalised as always; the query raw; only the self mask applies (a slot holding
    the new token scores -1e5; every other slot is an earlier position); per round log-sum-exp and output, then the
    softmax over rounds. The new bucket is appended to the cache.
  - LSH layer, no buckets cached (the prompt took the unchunked path): full attention over every cached state and
    itself, self-masked; when L >= chunk, all L positions are hashed (no padding bucket) and cached as the buckets
    that later steps sort.
  - Local layer (LocalSelfAttention._retrieve_relevant_hidden_states): keys and values from the cached states from
    ((cached // chunk) - before) * chunk on (a negative start counts from the end, as a Python slice does), and the
    token itself; no mask.

Usage:
    import reformer_model as rm, reformer_cached as rc
    model = rm.load_checkpoint("tests/goldens/reformer_mixed_factorized")
    gen = rc.CachedReformer(model)
    prompt_logits = gen.prompt(ids)        # np.float32 [n, vocab]
    step_logits = gen.step(token)          # np.float32 [vocab]
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reformer_model as rm  # noqa: E402


@torch.no_grad()
def lsh_step(attn, hidden, past_buckets, past_states):
    """One token through LSHSelfAttention with a cache. hidden [1, 1, d] -> (out [1, 1, heads*dh], buckets to cache:
    the new [1, heads, hashes, 1] when buckets were cached, all L positions' when hashed now, else None)."""
    H, dh, nh, C = attn.heads, attn.dh, attn.num_hashes, attn.chunk
    d = hidden.shape[-1]
    q = rm._split_heads(hidden @ attn.w_qk.T, H, dh)  # [1, H, 1, dh]
    kv = torch.cat([past_states, hidden], dim=1)  # [1, L, d]
    L = kv.shape[1]
    if past_buckets is None:
        qk_all = rm._split_heads(kv @ attn.w_qk.T, H, dh)  # [1, H, L, dh]
        v_all = rm._split_heads(kv @ attn.w_v.T, H, dh)
        new_buckets = attn.hash_vectors(qk_all, None).view(1, H, nh, -1) if L >= C else None
        dots = torch.matmul(q, attn.len_and_dim_norm(qk_all).transpose(-1, -2))  # [1, H, 1, L]
        q_idx = (L - 1) * torch.ones(1, H, 1, dtype=torch.long)
        kv_idx = torch.arange(L)[None, None, :].expand(1, H, L)
        dots = torch.where(torch.ne(q_idx.unsqueeze(-1), kv_idx.unsqueeze(-2)), dots, attn.self_mask_value)
        lse = torch.logsumexp(dots, dim=-1, keepdim=True)
        out = torch.matmul(torch.exp(dots - lse), v_all)  # [1, H, 1, dh]
        return rm._merge_heads(out, H, dh), new_buckets

    max_bucket = int(np.prod(rm.bucket_factors(attn.num_buckets)))
    increase = bool(past_buckets.max() > nh * max_bucket - 1)
    query_buckets = attn.hash_vectors(q, None, increase_num_buckets=increase)  # [1, H, nh]
    concat = torch.cat([past_buckets, query_buckets.unsqueeze(-1)], dim=-1)  # [1, H, nh, L]
    order = rm._stable_argsort(concat, dim=-1)
    where = (order == L - 1).nonzero()  # one row (0, h, r, i) per head and round, in that order
    total = C * (1 + attn.before + attn.after)
    start = ((where[:, -1] // C) - attn.before) * C
    slots = (start[:, None] + torch.arange(total)[None, :]).flatten() % L
    index = where.unsqueeze(1).expand(where.shape[0], total, 4).flatten(0, 1).clone()
    index[:, -1] = slots
    positions = order[tuple(index.t())]  # [H * nh * total]
    states = kv.reshape(-1, d).index_select(0, positions).reshape(1, H, -1, d)  # [1, H, nh * total, d]
    positions = positions.reshape(1, H, nh, total)
    per_head_qk = attn.w_qk.reshape(H, dh, d).transpose(-2, -1)
    per_head_v = attn.w_v.reshape(H, dh, d).transpose(-2, -1)
    qk = rm._split_seq(torch.einsum("balh,ahr->balr", states, per_head_qk), nh, -1, H, dh)  # [1, H, nh, total, dh]
    v = rm._split_seq(torch.einsum("balh,ahr->balr", states, per_head_v), nh, -1, H, dh)
    query = q.unsqueeze(2).repeat(1, 1, nh, 1, 1)  # [1, H, nh, 1, dh]
    dots = torch.matmul(query, attn.len_and_dim_norm(qk).transpose(-1, -2))  # [1, H, nh, 1, total]
    q_idx = positions.new_ones(positions.shape[:-1] + (1,)) * positions.max()
    dots = torch.where(torch.ne(q_idx.unsqueeze(-1), positions.unsqueeze(-2)), dots, attn.self_mask_value)
    lse = torch.logsumexp(dots, dim=-1, keepdim=True)  # [1, H, nh, 1, 1]
    out = torch.matmul(torch.exp(dots - lse), v)  # [1, H, nh, 1, dh]
    lse = lse.flatten(start_dim=2, end_dim=3).squeeze(-1)  # [1, H, nh]
    out = out.flatten(start_dim=2, end_dim=3)  # [1, H, nh, dh]
    if nh > 1:
        out = rm._split_seq(out, nh, 1, H, dh)  # [1, H, nh, 1, dh]
        lse = rm._split_seq(lse, nh, 1, H).unsqueeze(-1)  # [1, H, nh, 1, 1]
        out = torch.sum(out * torch.exp(lse - torch.logsumexp(lse, dim=2, keepdim=True)), dim=2)
    return rm._merge_heads(out, H, dh), query_buckets.view(1, H, nh, 1)


@torch.no_grad()
def local_step(attn, hidden, past_states):
    """One token through LocalSelfAttention with a cache. hidden [1, 1, d] -> out [1, 1, heads*dh]."""
    H, dh, C = attn.heads, attn.dh, attn.chunk
    start = ((past_states.shape[1] // C) - attn.before) * C
    kv = torch.cat([past_states[:, start:], hidden], dim=1)
    q = rm._split_heads(hidden @ attn.w_q.T, H, dh)
    k = rm._split_heads(kv @ attn.w_k.T, H, dh) / torch.sqrt(torch.tensor(dh, dtype=torch.float32))
    v = rm._split_heads(kv @ attn.w_v.T, H, dh)
    dots = torch.matmul(q, k.transpose(-1, -2))
    lse = torch.logsumexp(dots, dim=-1, keepdim=True)
    return rm._merge_heads(torch.matmul(torch.exp(dots - lse), v), H, dh)


class CachedReformer:
    def __init__(self, model):
        self.model = model
        self.cache = None  # per layer (buckets or None, states [1, cached, d])

    def prompt(self, ids):
        self.cache = []
        return self.model.forward(list(ids), cache=self.cache)[0].numpy().astype(np.float32)

    @torch.no_grad()
    def step(self, token):
        m = self.model
        cached = self.cache[0][1].shape[1]
        h = m.embed(torch.tensor([[token]], dtype=torch.long), start=cached)
        hidden, attn_output = h, h
        for li, (p, attn) in enumerate(m.layers):
            normed = m._ln(hidden, p + "attention.layer_norm.", m.d)
            past_buckets, past_states = self.cache[li]
            if isinstance(attn, rm.LSHAttention):
                a, buckets = lsh_step(attn, normed, past_buckets, past_states)
                if past_buckets is not None:
                    buckets = torch.cat([past_buckets, buckets], dim=-1)
            else:
                a, buckets = local_step(attn, normed, past_states), None
            self.cache[li] = (buckets, torch.cat([past_states, normed], dim=1))
            attn_output, hidden = m.layer_rest(p, a, attn_output, hidden)
        return m.head(attn_output, hidden)[0, 0].numpy().astype(np.float32)
