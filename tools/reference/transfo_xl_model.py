# SPDX-License-Identifier: MIT
"""PyTorch reference for Transformer-XL (Dai et al. 2019) as Hugging Face's TransfoXLLMHeadModel computes it in eval mode.

Follows HF transformers' (deprecated) transfo_xl code fact for fact; what the runtime must reproduce:

  * Adaptive input: token t in cluster i ([l_i, r_i) by `cutoffs`) -> emb_layers.i[t - l_i] (width d_embed / div_val^i)
    -> emb_projs.i (as F.linear, weight [d_model, d_i]) -> * sqrt(d_model). With div_val 1 there is one table and
    a projection only when d_embed != d_model; the cutoffs then only shape the softmax.
  * Memory: per layer the mem_len layer INPUTS of the previous tokens. HF's init_mems starts every layer with
    mem_len zero vectors that are attended like any other (not masked), so mlen = mem_len on every segment.
    After a segment: new_mem = cat(mem, layer_input)[-mem_len:]. mem_len 0: no memory at all.
  * Positions use HF's float32 frequencies (the checkpoint's buffer transformer.pos_emb.inv_freq when present),
    the angles p * f_k and their sin / cos in float64.
  * Relative attention (RelPartialLearnableMultiHeadAttn): cat = [mem; h] (pre_lnorm: layer_norm(cat)),
    q|k|v = chunk(qkv_net(cat), 3), q = its last qlen rows; r = r_net(pos_emb) with pos_emb over the positions
    [klen-1, ..., 0] clamped at clamp_len (when clamp_len > 0), pos_emb = cat(sin(p f), cos(p f)),
    f_k = 1 / 10000^(2k / d_model). score = ((q + r_w_bias) k^T + rel_shift((q + r_r_bias) r^T)) / sqrt(d_head),
    which for query i and key j is the relative distance mlen + i - j. Mask: j > mlen + i, and with same_length
    also j <= i - mask_shift_len (HF's formula), masked by finfo.min before the softmax. o_net, residual, then
    post-LN (layer_norm(h + out)) or pre-LN (h + out).
  * Feed-forward: CoreNet.0 (d_inner, bias) -> ReLU -> CoreNet.3 (d_model, bias); post-LN or pre-LN as above.
  * Projected adaptive log-softmax, forward() without labels: head = [out_layers.0 rows of the shortlist;
    cluster_weight], log_softmax over shortlist + n_clusters columns; cluster i >= 1 adds head column
    cutoffs[0] + i - 1 (the cluster columns in order; HF's log_prob() reads column -i instead, which is not what
    the model's forward uses) to the log_softmax of its tail logits. Each logit: hidden @ out_projs.i (when
    present) then F.linear(out_layers.i). With div_val 1 every cluster reads rows [l_i, r_i) of out_layers.0.
  * Tying: tie_word_embeddings -> crit.out_layers.i.weight is word_emb.emb_layers.i.weight; tie_projs[i] ->
    crit.out_projs.i is word_emb.emb_projs.i (div_val > 1) or emb_projs.0 (div_val 1, d_embed != d_model).

Parameters live in a dict keyed by HF's state_dict names (tied ones stored once, under the word_emb name).

    import transfo_xl_model as txl
    model = txl.load_checkpoint("tests/goldens/transfo_xl_adaptive", dtype=torch.float64)
    log_probs = txl.evaluate(model, ids, tgt_len=16)      # np.ndarray [n, V], segment by segment with memory
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

# TransfoXLConfig's defaults (those of transfo-xl-wt103).
DEFAULTS = {
    "vocab_size": 267735, "cutoffs": [20000, 40000, 200000], "d_model": 1024, "d_embed": 1024, "n_head": 16,
    "d_head": 64, "d_inner": 4096, "div_val": 4, "pre_lnorm": False, "n_layer": 18, "mem_len": 1600,
    "clamp_len": 1000, "same_length": True, "proj_share_all_but_first": True, "attn_type": 0, "sample_softmax": -1,
    "untie_r": True, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
}


def read_config(raw):
    """HF config.json dict -> dict with every field the model uses (defaults filled, tie_projs derived)."""
    c = dict(DEFAULTS)
    c.update({k: v for k, v in raw.items() if v is not None})
    if "tie_projs" not in raw or raw["tie_projs"] is None:
        c["tie_projs"] = [False] + [bool(c["proj_share_all_but_first"])] * len(c["cutoffs"])
    if "tie_word_embeddings" not in raw and "tie_weight" in raw:
        c["tie_word_embeddings"] = bool(raw["tie_weight"])
    if c["attn_type"] != 0:
        raise ValueError("only attn_type 0 (relative positions) exists in HF's code")
    if c["sample_softmax"] > 0:
        raise ValueError("sampled softmax is not implemented in HF's code")
    if len(c["tie_projs"]) != len(c["cutoffs"]) + 1:
        raise ValueError("tie_projs needs one entry per cluster")
    return c


def clusters(c):
    """[(l_i, r_i, d_i)] of the adaptive softmax (and of the embedding when div_val > 1)."""
    ends = [0] + list(c["cutoffs"]) + [c["vocab_size"]]
    return [(ends[i], ends[i + 1], c["d_embed"] // (c["div_val"] ** i)) for i in range(len(ends) - 1)]


def parameter_shapes(c):
    """{name: shape} of every parameter TransfoXLLMHeadModel holds, tied copies included; and {tied name: source}."""
    shapes, tied = {}, {}
    d, de, H, dh, V = c["d_model"], c["d_embed"], c["n_head"], c["d_head"], c["vocab_size"]
    cl = clusters(c)
    if c["div_val"] == 1:
        shapes["transformer.word_emb.emb_layers.0.weight"] = (V, de)
        if d != de:
            shapes["transformer.word_emb.emb_projs.0"] = (d, de)
    else:
        for i, (l, r, di) in enumerate(cl):
            shapes[f"transformer.word_emb.emb_layers.{i}.weight"] = (r - l, di)
            shapes[f"transformer.word_emb.emb_projs.{i}"] = (d, di)
    if not c["untie_r"]:
        shapes["transformer.r_w_bias"] = (H, dh)
        shapes["transformer.r_r_bias"] = (H, dh)
    for layer in range(c["n_layer"]):
        p = f"transformer.layers.{layer}."
        shapes[p + "dec_attn.qkv_net.weight"] = (3 * H * dh, d)
        shapes[p + "dec_attn.o_net.weight"] = (d, H * dh)
        shapes[p + "dec_attn.layer_norm.weight"] = (d,)
        shapes[p + "dec_attn.layer_norm.bias"] = (d,)
        shapes[p + "dec_attn.r_net.weight"] = (H * dh, d)
        if c["untie_r"]:
            shapes[p + "dec_attn.r_w_bias"] = (H, dh)
            shapes[p + "dec_attn.r_r_bias"] = (H, dh)
        shapes[p + "pos_ff.CoreNet.0.weight"] = (c["d_inner"], d)
        shapes[p + "pos_ff.CoreNet.0.bias"] = (c["d_inner"],)
        shapes[p + "pos_ff.CoreNet.3.weight"] = (d, c["d_inner"])
        shapes[p + "pos_ff.CoreNet.3.bias"] = (d,)
        shapes[p + "pos_ff.layer_norm.weight"] = (d,)
        shapes[p + "pos_ff.layer_norm.bias"] = (d,)
    if len(cl) > 1:
        shapes["crit.cluster_weight"] = (len(cl) - 1, de)
        shapes["crit.cluster_bias"] = (len(cl) - 1,)
    if c["div_val"] == 1:
        shapes["crit.out_layers.0.weight"] = (V, de)
        shapes["crit.out_layers.0.bias"] = (V,)
        if c["tie_word_embeddings"]:
            tied["crit.out_layers.0.weight"] = "transformer.word_emb.emb_layers.0.weight"
        if d != de:
            for i in range(len(cl)):
                shapes[f"crit.out_projs.{i}"] = (d, de)
                if c["tie_projs"][i]:
                    tied[f"crit.out_projs.{i}"] = "transformer.word_emb.emb_projs.0"
    else:
        for i, (l, r, di) in enumerate(cl):
            shapes[f"crit.out_layers.{i}.weight"] = (r - l, di)
            shapes[f"crit.out_layers.{i}.bias"] = (r - l,)
            shapes[f"crit.out_projs.{i}"] = (d, di)
            if c["tie_word_embeddings"]:
                tied[f"crit.out_layers.{i}.weight"] = f"transformer.word_emb.emb_layers.{i}.weight"
            if c["tie_projs"][i]:
                tied[f"crit.out_projs.{i}"] = f"transformer.word_emb.emb_projs.{i}"
    return shapes, tied


def inv_freq(d_model):
    """HF's buffer transformer.pos_emb.inv_freq: 1 / 10000^(2k / d_model), computed (and stored) in float32."""
    return 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))


def positional_embedding(positions, freq, dtype):
    """[klen] float positions, [d_model / 2] frequencies -> [klen, d_model]: sin in the first half, cos in the
    second (not interleaved)."""
    angles = torch.outer(positions.to(torch.float64), freq.to(torch.float64))
    return torch.cat([angles.sin(), angles.cos()], dim=-1).to(dtype)


def rel_shift(x):
    """[qlen, klen, H] scores against r (rows ordered by position klen-1 .. 0) -> indexed by key: entry (i, j) becomes
    the score at relative distance mlen + i - j for j <= mlen + i (above that the entries are garbage, masked later)."""
    qlen, klen = x.shape[0], x.shape[1]
    padded = torch.cat([x.new_zeros((qlen, 1) + tuple(x.shape[2:])), x], dim=1)
    return padded.view((klen + 1, qlen) + tuple(x.shape[2:]))[1:].view_as(x)


class TransfoXL:
    """Eval-mode TransfoXLLMHeadModel, batch size 1. `params`: {HF name: tensor}, tied names resolved on lookup."""

    def __init__(self, config, params):
        self.c = read_config(config)
        self.params = params
        _, self.tied = parameter_shapes(self.c)

    def p(self, name):
        return self.params[self.tied.get(name, name)]

    def has(self, name):
        return name in self.params or name in self.tied

    @property
    def dtype(self):
        return next(iter(self.params.values())).dtype

    def init_mems(self):
        """HF's init_mems: mem_len zero vectors per layer (None without memory)."""
        if self.c["mem_len"] <= 0:
            return None
        return [torch.zeros(self.c["mem_len"], self.c["d_model"], dtype=self.dtype) for _ in range(self.c["n_layer"])]

    def embed(self, ids):
        c, d = self.c, self.c["d_model"]
        if c["div_val"] == 1:
            out = self.p("transformer.word_emb.emb_layers.0.weight")[ids]
            if c["d_embed"] != d:
                out = F.linear(out, self.p("transformer.word_emb.emb_projs.0"))
        else:
            out = torch.zeros(len(ids), d, dtype=self.dtype)
            for i, (l, r, _) in enumerate(clusters(c)):
                sel = ((ids >= l) & (ids < r)).nonzero().view(-1)
                if sel.numel() == 0:
                    continue
                e = self.p(f"transformer.word_emb.emb_layers.{i}.weight")[ids[sel] - l]
                out[sel] = F.linear(e, self.p(f"transformer.word_emb.emb_projs.{i}"))
        return out * (d ** 0.5)

    def mask(self, qlen, mlen):
        """[qlen, klen] bool, True where a key is hidden (HF's dec_attn_mask)."""
        klen = mlen + qlen
        ones = torch.ones(qlen, klen, dtype=torch.bool)
        future = torch.triu(ones, diagonal=1 + mlen)
        if not self.c["same_length"]:
            return future
        mask_len = klen - self.c["mem_len"]
        shift = qlen - mask_len if mask_len > 0 else qlen
        return future | torch.tril(ones, diagonal=-shift)

    def attention(self, layer, h, r, mem, mask):
        c = self.c
        H, dh = c["n_head"], c["d_head"]
        p = f"transformer.layers.{layer}.dec_attn."
        qlen = h.shape[0]
        cat = h if mem is None else torch.cat([mem, h], 0)
        x = cat
        if c["pre_lnorm"]:
            x = F.layer_norm(cat, (c["d_model"],), self.p(p + "layer_norm.weight"), self.p(p + "layer_norm.bias"),
                             c["layer_norm_epsilon"])
        q, k, v = torch.chunk(F.linear(x, self.p(p + "qkv_net.weight")), 3, dim=-1)
        q = q[-qlen:]
        klen = k.shape[0]
        q, k, v = q.view(qlen, H, dh), k.view(klen, H, dh), v.view(klen, H, dh)
        rk = F.linear(r, self.p(p + "r_net.weight")).view(klen, H, dh)
        bias_w = self.p(p + "r_w_bias" if c["untie_r"] else "transformer.r_w_bias")
        bias_r = self.p(p + "r_r_bias" if c["untie_r"] else "transformer.r_r_bias")
        content = torch.einsum("ind,jnd->ijn", q + bias_w, k)            # [qlen, klen, H]
        position = rel_shift(torch.einsum("ind,jnd->ijn", q + bias_r, rk))
        score = (content + position) * (1.0 / dh ** 0.5)
        if mask.any():
            score = score.masked_fill(mask[:, :, None], torch.finfo(score.dtype).min)
        prob = torch.softmax(score, dim=1)
        vec = torch.einsum("ijn,jnd->ind", prob, v).reshape(qlen, H * dh)
        out = F.linear(vec, self.p(p + "o_net.weight"))
        if c["pre_lnorm"]:
            return h + out
        return F.layer_norm(h + out, (c["d_model"],), self.p(p + "layer_norm.weight"), self.p(p + "layer_norm.bias"),
                            c["layer_norm_epsilon"])

    def feed_forward(self, layer, h):
        c = self.c
        p = f"transformer.layers.{layer}.pos_ff."

        def core(x):
            x = F.relu(F.linear(x, self.p(p + "CoreNet.0.weight"), self.p(p + "CoreNet.0.bias")))
            return F.linear(x, self.p(p + "CoreNet.3.weight"), self.p(p + "CoreNet.3.bias"))

        ln = (c["d_model"],), self.p(p + "layer_norm.weight"), self.p(p + "layer_norm.bias"), c["layer_norm_epsilon"]
        if c["pre_lnorm"]:
            return h + core(F.layer_norm(h, *ln))
        return F.layer_norm(h + core(h), *ln)

    def logit(self, hidden, weight, bias, proj):
        if proj is not None:
            hidden = F.linear(hidden, proj.t())
        return F.linear(hidden, weight, bias)

    def log_softmax_head(self, hidden):
        """ProjectedAdaptiveLogSoftmax.forward(hidden) without labels: [n, V] log-probabilities."""
        c = self.c
        cl = clusters(c)

        def proj(i):
            name = f"crit.out_projs.{i}"
            return self.p(name) if self.has(name) else None

        def weight_bias(i):
            l, r, _ = cl[i]
            if c["div_val"] == 1:
                return self.p("crit.out_layers.0.weight")[l:r], self.p("crit.out_layers.0.bias")[l:r]
            return self.p(f"crit.out_layers.{i}.weight"), self.p(f"crit.out_layers.{i}.bias")

        if len(cl) == 1:
            w, b = weight_bias(0)
            return torch.log_softmax(self.logit(hidden, w, b, proj(0)), dim=-1)
        w0, b0 = weight_bias(0)
        head_w = torch.cat([w0, self.p("crit.cluster_weight")], 0)
        head_b = torch.cat([b0, self.p("crit.cluster_bias")], 0)
        head = torch.log_softmax(self.logit(hidden, head_w, head_b, proj(0)), dim=1)
        shortlist = c["cutoffs"][0]
        out = hidden.new_empty((hidden.shape[0], c["vocab_size"]))
        out[:, :shortlist] = head[:, :shortlist]
        for i in range(1, len(cl)):
            l, r, _ = cl[i]
            w, b = weight_bias(i)
            tail = torch.log_softmax(self.logit(hidden, w, b, proj(i)), dim=1)
            out[:, l:r] = head[:, shortlist + i - 1, None] + tail
        return out

    @torch.no_grad()
    def segment(self, ids, mems):
        """One HF forward call: ids [qlen] with mems (list per layer or None) -> (log_probs [qlen, V], new mems)."""
        c = self.c
        ids = torch.as_tensor(ids, dtype=torch.long)
        qlen = ids.shape[0]
        h = self.embed(ids)
        mlen = 0 if mems is None else mems[0].shape[0]
        klen = mlen + qlen
        positions = torch.arange(klen - 1, -1, -1.0, dtype=torch.float64)
        if c["clamp_len"] > 0:
            positions = positions.clamp(max=c["clamp_len"])
        freq = self.params.get("transformer.pos_emb.inv_freq", inv_freq(c["d_model"]))
        r = positional_embedding(positions, freq, h.dtype)
        mask = self.mask(qlen, mlen)
        hids = []
        for layer in range(c["n_layer"]):
            hids.append(h)
            h = self.attention(layer, h, r, None if mems is None else mems[layer], mask)
            h = self.feed_forward(layer, h)
        new_mems = None
        if mems is not None:
            new_mems = [torch.cat([m, x], 0)[-c["mem_len"]:] for m, x in zip(mems, hids)]
        return self.log_softmax_head(h), new_mems


def evaluate(model, ids, tgt_len):
    """Log-probabilities [n, V] of the whole sequence fed tgt_len tokens per call, memory carried (from zeros)."""
    mems = model.init_mems()
    out = []
    for s in range(0, len(ids), tgt_len):
        lp, mems = model.segment(ids[s:s + tgt_len], mems)
        out.append(lp.numpy())
    return np.concatenate(out, 0)


def load_checkpoint(directory, dtype=torch.float64):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    tensors = safetensors_io.load_dir(directory)
    c = read_config(config)
    shapes, tied = parameter_shapes(c)
    params = {}
    for name, shape in shapes.items():
        if name in tied:
            continue
        if name not in tensors:
            raise KeyError(f"{directory}: missing tensor {name}")
        if tuple(tensors[name].shape) != tuple(shape):
            raise ValueError(f"{directory}: {name} has shape {tensors[name].shape}, expected {shape}")
        params[name] = torch.from_numpy(np.asarray(tensors[name], dtype=np.float64)).to(dtype)
    if "transformer.pos_emb.inv_freq" in tensors:  # HF's buffer, float32 values as HF computed them
        params["transformer.pos_emb.inv_freq"] = torch.from_numpy(
            np.asarray(tensors["transformer.pos_emb.inv_freq"], dtype=np.float64))
    return TransfoXL(config, params)


def mean_entropy(log_probs):
    p = np.exp(log_probs)
    return float(-(p * log_probs).sum(-1).mean())


if __name__ == "__main__":
    model = load_checkpoint(sys.argv[1])
    with open(os.path.join(sys.argv[1], "ids.json")) as f:
        ids = json.load(f)
    tgt = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    lp = evaluate(model, ids, tgt)
    print(lp.shape, "mean entropy", mean_entropy(lp), "uniform", math.log(lp.shape[1]))
