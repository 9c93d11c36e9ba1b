#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Makes the side-by-side benchmark's models from one random initialisation (fixed seed):

  OUT/dense/      tern-reference checkpoint (config.json + model.safetensors): GPT-2-like, pre-LN, learned
                  positions, GELU tanh approximation (llama.cpp's GPT-2 graph uses ggml_gelu, the tanh form),
                  tied embeddings, dense causal attention, context CTX
  OUT/windowed/   the same weights with sliding-window attention (window W) and the position table extended to
                  WINDOW_CTX rows (the first CTX rows are the dense model's)
  OUT/dense.onnx  the dense model for ONNX Runtime (torch.onnx.export, opset 14, dynamic sequence length)
  OUT/dense.gguf  the dense model as a llama.cpp GPT-2-architecture GGUF, F32 (written with gguf-py from the
                  llama.cpp sources shipped in node-llama-cpp: pass --gguf-py DIR)
  OUT/dense-f16.gguf the dense model's matrices and token_embd as F16 (llama-quantize's F16)
  OUT/dense-q8_0.gguf, OUT/dense-q4_0.gguf
                  the same weights quantised by gguf-py (gguf.quants.quantize, whose Q8_0 and Q4_0 encoders follow
                  ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref: blocks of 32 along the input, one float16
                  scale each), with the tensor types llama-quantize would choose for this model without an imatrix
                  (src/llama-quant.cpp, llama_tensor_get_type and tensor_allows_quantization): the 2-D ".weight"
                  matrices attn_qkv, attn_output, ffn_up, ffn_down in the file's type; position_embd, the norms and
                  all biases F32. token_embd is also the (tied) output head, so llama-quantize gives it the output
                  head's type: Q8_0 in the Q8_0 file; Q6_K in the Q4_0 file, which gguf-py cannot encode, so it is
                  Q8_0 there too (a little more precision than llama-quantize keeps; 256 x 512, 0.5% of the weights).
                  Checked against llama_model_quantize() of the same libllama on OUT/dense.gguf: every tensor of both
                  files byte for byte the same, but for that token_embd.

With --arch llama it makes the Llama-architecture model instead (llama_model.py: d 768, 12 layers, 12 heads over 3
key/value heads, SwiGLU 2048, RoPE, vocab 32000, untied head, context 8192; about 123 M parameters), as OUT/dense/ in
Hugging Face's layout (converted by tern-convert's Llama importer), OUT/dense.onnx and OUT/dense*.gguf; no windowed
model.

Runs under Debian's /usr/bin/python3 (python3-torch, python3-numpy). torch.onnx.export in torch 1.13 serialises the
graph itself and does not need the `onnx` Python module.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))
import model as ref  # noqa: E402
import safetensors_io  # noqa: E402


def config(a, attention, ctx):
    return {
        "model_type": "tern-reference",
        "vocab_size": a.vocab,
        "hidden_size": a.d,
        "num_layers": a.layers,
        "num_heads": a.heads,
        "intermediate_size": 4 * a.d,
        "max_position_embeddings": ctx,
        "position_embedding": "learned",
        "norm_position": "pre",
        "final_norm": True,
        "activation": "gelu_tanh",
        "linear_bias": True,
        "layer_norm_eps": 1e-5,
        "tie_word_embeddings": True,
        "attention": attention,
    }


def init_weights(m, a, rng_ctx):
    """Deterministic random init with a scale that keeps activations O(1) through the layers."""
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name == "pos_embed.weight":
                continue
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name == "embed.weight":
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:  # linear [out, in]
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p.shape[1]))
        # positions: drawn for the longest table so the dense model's rows are a prefix of the windowed model's
        pos = 0.3 * torch.randn((rng_ctx, a.d), generator=g)
    return pos


class OnnxWrapper(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):  # ids [n] int64 -> logits [n, V]
        return self.m(ids)


def write_gguf(path, tensors, a, gguf_py, weights="F32"):
    """weights: F32, F16, Q8_0 or Q4_0 (the matrices' type; see the module docstring for which tensors stay F32)."""
    sys.path.insert(0, gguf_py)
    import gguf

    Q = gguf.GGMLQuantizationType
    matrix_type = {"F32": Q.F32, "F16": Q.F16, "Q8_0": Q.Q8_0, "Q4_0": Q.Q4_0}[weights]
    file_type = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
                 "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[weights]
    # the tied token_embd / output head: llama-quantize's output-head type (Q6_K for Q4_0, not encodable: Q8_0)
    embd_type = {"F32": Q.F32, "F16": Q.F16}.get(weights, Q.Q8_0)

    w = gguf.GGUFWriter(path, "gpt2")
    w.add_name("tern-peers-dense")
    w.add_block_count(a.layers)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.d)
    w.add_feed_forward_length(4 * a.d)
    w.add_head_count(a.heads)
    w.add_layer_norm_eps(1e-5)
    w.add_file_type(file_type)
    w.add_tokenizer_model("none")  # ids in, logits out: no tokenizer
    w.add_vocab_size(a.vocab)
    # ggml dims are reversed numpy dims, so PyTorch's [out, in] Linear layout is what llama.cpp's loader wants.
    f = lambda k: np.ascontiguousarray(tensors[k], dtype=np.float32)  # noqa: E731

    def add_matrix(name, x, qtype=matrix_type):
        if qtype == Q.F32:
            w.add_tensor(name, x)
        elif qtype == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:  # uint8 [rows, blocks * block bytes]; the writer recovers the element shape from the type
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    add_matrix("token_embd.weight", f("embed.weight"), embd_type)
    w.add_tensor("position_embd.weight", f("pos_embed.weight"))
    for i in range(a.layers):
        p, b = f"layers.{i}.", f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", f(p + "attn_norm.weight"))
        w.add_tensor(b + "attn_norm.bias", f(p + "attn_norm.bias"))
        qkv_w = np.concatenate([f(p + f"attn.{x}.weight") for x in "qkv"], axis=0)  # [3d, d]
        qkv_b = np.concatenate([f(p + f"attn.{x}.bias") for x in "qkv"], axis=0)
        add_matrix(b + "attn_qkv.weight", qkv_w)
        w.add_tensor(b + "attn_qkv.bias", qkv_b)
        add_matrix(b + "attn_output.weight", f(p + "attn.out.weight"))
        w.add_tensor(b + "attn_output.bias", f(p + "attn.out.bias"))
        w.add_tensor(b + "ffn_norm.weight", f(p + "mlp_norm.weight"))
        w.add_tensor(b + "ffn_norm.bias", f(p + "mlp_norm.bias"))
        add_matrix(b + "ffn_up.weight", f(p + "mlp.fc1.weight"))      # [F, d]
        w.add_tensor(b + "ffn_up.bias", f(p + "mlp.fc1.bias"))
        add_matrix(b + "ffn_down.weight", f(p + "mlp.fc2.weight"))    # [d, F]
        w.add_tensor(b + "ffn_down.bias", f(p + "mlp.fc2.bias"))
    w.add_tensor("output_norm.weight", f("final_norm.weight"))
    w.add_tensor("output_norm.bias", f("final_norm.bias"))
    # no output.weight: llama.cpp ties the head to token_embd when it is absent
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2",
                    help="gpt2: the GPT-2-like model and its windowed twin; llama: the Llama-architecture model")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int, help="llama only (default 3)")
    ap.add_argument("--ffn", type=int, help="llama only: SwiGLU width (default 2048)")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--window-ctx", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    a = ap.parse_args()
    defaults = {"gpt2": dict(layers=6, d=512, heads=8, vocab=256),
                "llama": dict(layers=12, d=768, heads=12, kv_heads=3, ffn=2048, vocab=32000)}[a.arch]
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    if a.arch == "llama":
        import llama_model

        n_params = llama_model.make(a)
        print(f"make_model: llama, {a.layers} layers, d {a.d}, {a.heads} heads / {a.kv_heads} kv heads, ffn {a.ffn}, "
              f"vocab {a.vocab}, ctx {a.ctx}, {n_params / 1e6:.1f} M parameters -> {a.out}")
        return

    cfg = config(a, {"kind": "dense"}, a.ctx)
    m = ref.ReferenceModel(cfg).float().eval()
    pos = init_weights(m, a, max(a.ctx, a.window_ctx))
    with torch.no_grad():
        m.pos_embed.weight.copy_(pos[: a.ctx])
    tensors = m.export_state(np.float32)

    for sub, c, t in (("dense", cfg, tensors),
                      ("windowed", config(a, {"kind": "sliding", "window": a.window}, a.window_ctx),
                       dict(tensors, **{"pos_embed.weight": pos.numpy().astype(np.float32)}))):
        d = os.path.join(a.out, sub)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=1)
        safetensors_io.save(os.path.join(d, "model.safetensors"), t)

    with torch.no_grad():
        torch.onnx.export(OnnxWrapper(m), (torch.arange(16, dtype=torch.int64) % a.vocab,),
                          os.path.join(a.out, "dense.onnx"), input_names=["ids"], output_names=["logits"],
                          dynamic_axes={"ids": {0: "n"}, "logits": {0: "n"}}, opset_version=14,
                          do_constant_folding=True)
    write_gguf(os.path.join(a.out, "dense.gguf"), tensors, a, a.gguf_py)
    write_gguf(os.path.join(a.out, "dense-f16.gguf"), tensors, a, a.gguf_py, "F16")
    write_gguf(os.path.join(a.out, "dense-q8_0.gguf"), tensors, a, a.gguf_py, "Q8_0")
    write_gguf(os.path.join(a.out, "dense-q4_0.gguf"), tensors, a, a.gguf_py, "Q4_0")
    n_params = sum(v.size for k, v in tensors.items())
    print(f"make_model: {a.layers} layers, d {a.d}, {a.heads} heads, vocab {a.vocab}, ctx {a.ctx}, "
          f"{n_params / 1e6:.1f} M parameters; windowed: sliding {a.window}, ctx {a.window_ctx} -> {a.out}")


if __name__ == "__main__":
    main()
