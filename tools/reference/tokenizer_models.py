#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a tiny Llama checkpoint directory that holds a tokenizer: config.json (1 layer, hidden size 8, a
vocabulary covering every id of the tokenizer, added tokens included), model.safetensors with random weights, and
the tokenizer.json (and tokenizer_config.json, when given) copied beside them, for tern-convert to convert. Only the
tokenizer matters: the tokenizer check (tools/bench/tokenizer_check.cpp) never runs the model.

    python3 tools/reference/tokenizer_models.py TOKENIZER.json OUT_DIR [--config tokenizer_config.json]

Python 3 standard library only (safetensors written by hand, float32).
"""

import argparse
import json
import os
import random
import shutil
import struct

HIDDEN = 8
HEADS = 2
KV_HEADS = 1
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 16


def vocab_size(tokenizer):
    """One more than the largest id of the model's vocabulary and the added tokens."""
    model = tokenizer["model"]
    vocab = model["vocab"]
    ids = list(vocab.values()) if isinstance(vocab, dict) else [len(vocab) - 1]
    ids += [t["id"] for t in tokenizer.get("added_tokens", [])]
    return max(ids) + 1


def special_id(tokenizer, config, key):
    """The id of tokenizer_config.json's bos_token / eos_token (a string or an AddedToken object), or None."""
    token = config.get(key)
    if isinstance(token, dict):
        token = token.get("content")
    if not token:
        return None
    for t in tokenizer.get("added_tokens", []):
        if t["content"] == token:
            return t["id"]
    vocab = tokenizer["model"]["vocab"]
    if isinstance(vocab, dict):
        return vocab.get(token)
    return next((i for i, (piece, _) in enumerate(vocab) if piece == token), None)


def write_safetensors(path, tensors, rng):
    """tensors: [(name, shape)], each filled with small random float32 values."""
    header, blobs, offset = {}, [], 0
    for name, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        blob = struct.pack("<%df" % count, *(rng.uniform(-0.1, 0.1) for _ in range(count)))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for blob in blobs:
            f.write(blob)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tokenizer", help="a tokenizer.json")
    parser.add_argument("out", help="the checkpoint directory to write")
    parser.add_argument("--config", help="a tokenizer_config.json to copy beside it")
    args = parser.parse_args()

    with open(args.tokenizer, encoding="utf-8") as f:
        tokenizer = json.load(f)
    tokenizer_config = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            tokenizer_config = json.load(f)
    vocab = vocab_size(tokenizer)
    os.makedirs(args.out, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
        "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": 1,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    for key in ("bos_token", "eos_token"):
        token_id = special_id(tokenizer, tokenizer_config, key)
        if token_id is not None:
            config[key + "_id"] = token_id
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    layer = "model.layers.0."
    tensors = [
        ("model.embed_tokens.weight", (vocab, HIDDEN)),
        (layer + "input_layernorm.weight", (HIDDEN,)),
        (layer + "self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN)),
        (layer + "self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN)),
        (layer + "self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN)),
        (layer + "self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM)),
        (layer + "post_attention_layernorm.weight", (HIDDEN,)),
        (layer + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN)),
        (layer + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN)),
        (layer + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE)),
        ("model.norm.weight", (HIDDEN,)),
    ]
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, random.Random(vocab))
    shutil.copyfile(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    if args.config:
        shutil.copyfile(args.config, os.path.join(args.out, "tokenizer_config.json"))


if __name__ == "__main__":
    main()
