#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The side-by-side benchmark's Llama-architecture model (make_model.py --arch llama): random init, fixed seed, in
Hugging Face's LlamaForCausalLM layout, and the same weights for ONNX Runtime and llama.cpp.

Architecture (as transformers' modeling_llama computes it): token embedding; per layer x += o(attn(rmsnorm(x))),
x += down(silu(gate(h)) * up(h)) with h = rmsnorm(x); final RMSNorm; an untied LM head. Attention: grouped-query
(num_key_value_heads kv heads, each shared by heads / kv_heads query heads), rotary positions in the half-split
(`rotate_half`) layout with inv_freq = theta^(-2i / head_dim), causal, scale 1 / sqrt(head_dim); no biases.

    OUT/dense/        config.json (model_type llama) + model.safetensors (HF tensor names, float32)
    OUT/dense.onnx    LlamaTorch below, exported by torch.onnx (opset 14, dynamic sequence length)
    OUT/dense*.gguf   general.architecture llama, F32 / F16 / Q8_0 / Q4_0 (see write_gguf)
"""

import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))
import safetensors_io  # noqa: E402


def hf_config(a):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": a.vocab,
        "hidden_size": a.d,
        "intermediate_size": a.ffn,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.d // a.heads,
        "hidden_act": "silu",
        "max_position_embeddings": a.ctx,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }


def random_weights(a):
    """HF name -> float32 array [out, in] (torch.nn.Linear's layout); scales keep activations O(1) over the layers."""
    g = torch.Generator().manual_seed(a.seed)
    hd = a.d // a.heads

    def linear(out, inp):
        return (torch.randn((out, inp), generator=g) / math.sqrt(inp)).numpy()

    def norm(n):
        return (1.0 + 0.1 * torch.randn((n,), generator=g)).numpy()

    t = {"model.embed_tokens.weight": (0.5 * torch.randn((a.vocab, a.d), generator=g)).numpy()}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(a.d)
        t[p + "self_attn.q_proj.weight"] = linear(a.heads * hd, a.d)
        t[p + "self_attn.k_proj.weight"] = linear(a.kv_heads * hd, a.d)
        t[p + "self_attn.v_proj.weight"] = linear(a.kv_heads * hd, a.d)
        # the residual branches' outputs scaled down so that the stream does not grow with depth
        t[p + "self_attn.o_proj.weight"] = linear(a.d, a.heads * hd) / math.sqrt(2 * a.layers)
        t[p + "post_attention_layernorm.weight"] = norm(a.d)
        t[p + "mlp.gate_proj.weight"] = linear(a.ffn, a.d)
        t[p + "mlp.up_proj.weight"] = linear(a.ffn, a.d)
        t[p + "mlp.down_proj.weight"] = linear(a.d, a.ffn) / math.sqrt(2 * a.layers)
    t["model.norm.weight"] = norm(a.d)
    t["lm_head.weight"] = linear(a.vocab, a.d)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in t.items()}


class LlamaTorch(torch.nn.Module):
    """float32 forward of the checkpoint for torch.onnx.export: ids [n] int64 -> logits [n, vocab]."""

    def __init__(self, cfg, tensors):
        super().__init__()
        self.cfg = cfg
        for k, v in tensors.items():  # buffers, so that export keeps them as initializers
            self.register_buffer(k.replace(".", "_"), torch.from_numpy(v))

    def _w(self, k):
        return getattr(self, k.replace(".", "_"))

    def _rms(self, x, k):
        eps = self.cfg["rms_norm_eps"]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self._w(k)

    def forward(self, ids):
        c = self.cfg
        H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        n = ids.shape[0]
        x = self._w("model.embed_tokens.weight")[ids]  # [n, d]
        pos = torch.arange(n, dtype=torch.float32)
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))  # [hd / 2]
        ang = pos[:, None] * inv_freq[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[None]  # [1, n, hd]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[None]
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)

        def rope(t):  # [h, n, hd]
            half = hd // 2
            rot = torch.cat([-t[..., half:], t[..., :half]], -1)
            return t * cos + rot * sin

        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self._rms(x, p + "input_layernorm.weight")
            q = (h @ self._w(p + "self_attn.q_proj.weight").t()).view(n, H, hd).transpose(0, 1)
            k = (h @ self._w(p + "self_attn.k_proj.weight").t()).view(n, KV, hd).transpose(0, 1)
            v = (h @ self._w(p + "self_attn.v_proj.weight").t()).view(n, KV, hd).transpose(0, 1)
            q, k = rope(q), rope(k)
            # each kv head serves H / KV consecutive query heads (repeat_kv); expand + reshape keeps n dynamic in
            # the exported graph, where repeat_interleave was traced with the example's length
            k = k[:, None].expand(KV, H // KV, n, hd).reshape(H, n, hd)
            v = v[:, None].expand(KV, H // KV, n, hd).reshape(H, n, hd)
            s = (q @ k.transpose(1, 2)) / math.sqrt(hd) + mask
            o = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(n, H * hd)
            x = x + o @ self._w(p + "self_attn.o_proj.weight").t()
            h = self._rms(x, p + "post_attention_layernorm.weight")
            gate = h @ self._w(p + "mlp.gate_proj.weight").t()
            up = h @ self._w(p + "mlp.up_proj.weight").t()
            x = x + (torch.nn.functional.silu(gate) * up) @ self._w(p + "mlp.down_proj.weight").t()
        x = self._rms(x, "model.norm.weight")
        return x @ self._w("lm_head.weight").t()


def gguf_rope_rows(w, heads):
    """HF's half-split rotary rows -> the interleaved pairs llama.cpp's LLAMA graph rotates (ggml rope mode 0): within
    each head, rows (j, j + hd/2) become rows (2j, 2j + 1), as llama.cpp's convert_hf_to_gguf.py permutes q and k."""
    out, inp = w.shape
    return w.reshape(heads, 2, out // heads // 2, inp).swapaxes(1, 2).reshape(out, inp)


def write_gguf(path, tensors, cfg, gguf_py, weights="F32"):
    """weights: F32, F16, Q8_0 or Q4_0, the 2-D matrices' type, with the tensor types llama-quantize chooses for a
    Llama model without an imatrix (src/llama-quant.cpp): the norms F32; output.weight Q8_0 in the Q8_0 file and Q6_K in
    the Q4_0 file, which gguf-py cannot encode, so Q8_0 there (32000 x 768: 20% of this model's weights, read once per
    token); token_embd in the file's type (it is only gathered from)."""
    sys.path.insert(0, gguf_py)
    import gguf

    Q = gguf.GGMLQuantizationType
    matrix_type = {"F32": Q.F32, "F16": Q.F16, "Q8_0": Q.Q8_0, "Q4_0": Q.Q4_0}[weights]
    file_type = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
                 "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[weights]
    head_type = {"F32": Q.F32, "F16": Q.F16}.get(weights, Q.Q8_0)

    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tern-peers-llama")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(file_type)
    w.add_tokenizer_model("none")  # ids in, logits out: no tokenizer
    w.add_vocab_size(cfg["vocab_size"])
    f = lambda k: np.ascontiguousarray(tensors[k], dtype=np.float32)  # noqa: E731

    def add_matrix(name, x, qtype=matrix_type):
        x = np.ascontiguousarray(x)
        if qtype == Q.F32:
            w.add_tensor(name, x)
        elif qtype == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    add_matrix("token_embd.weight", f("model.embed_tokens.weight"))
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", f(p + "input_layernorm.weight"))
        add_matrix(b + "attn_q.weight", gguf_rope_rows(f(p + "self_attn.q_proj.weight"), cfg["num_attention_heads"]))
        add_matrix(b + "attn_k.weight", gguf_rope_rows(f(p + "self_attn.k_proj.weight"), cfg["num_key_value_heads"]))
        add_matrix(b + "attn_v.weight", f(p + "self_attn.v_proj.weight"))
        add_matrix(b + "attn_output.weight", f(p + "self_attn.o_proj.weight"))
        w.add_tensor(b + "ffn_norm.weight", f(p + "post_attention_layernorm.weight"))
        add_matrix(b + "ffn_gate.weight", f(p + "mlp.gate_proj.weight"))
        add_matrix(b + "ffn_up.weight", f(p + "mlp.up_proj.weight"))
        add_matrix(b + "ffn_down.weight", f(p + "mlp.down_proj.weight"))
    w.add_tensor("output_norm.weight", f("model.norm.weight"))
    add_matrix("output.weight", f("lm_head.weight"), head_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make(a):
    """Writes OUT/dense/, OUT/dense.onnx and the four GGUF files; returns the parameter count."""
    cfg = hf_config(a)
    tensors = random_weights(a)
    d = os.path.join(a.out, "dense")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    safetensors_io.save(os.path.join(d, "model.safetensors"), tensors)
    with torch.no_grad():
        torch.onnx.export(LlamaTorch(cfg, tensors).eval(), (torch.arange(16, dtype=torch.int64) % a.vocab,),
                          os.path.join(a.out, "dense.onnx"), input_names=["ids"], output_names=["logits"],
                          dynamic_axes={"ids": {0: "n"}, "logits": {0: "n"}}, opset_version=14,
                          do_constant_folding=True)
    for weights, name in (("F32", "dense.gguf"), ("F16", "dense-f16.gguf"), ("Q8_0", "dense-q8_0.gguf"),
                          ("Q4_0", "dense-q4_0.gguf")):
        write_gguf(os.path.join(a.out, name), tensors, cfg, a.gguf_py, weights)
    return sum(v.size for v in tensors.values())
