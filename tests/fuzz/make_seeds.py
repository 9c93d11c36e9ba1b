#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the fuzz targets' seed inputs and the checkpoint the config target converts (stdlib only, seeded).

    python3 tests/fuzz/make_seeds.py build/converter/tern-convert

data/convert_config/model.safetensors holds the tensors of two tiny models side by side, a tern-reference one
(V 16, d 8, 2 heads, 2 layers, every optional tensor present) and an adaptive-span one (same sizes, span 8), so
that a fuzzed config of either model_type can convert. corpus/convert_config/ gets configs for it,
corpus/safetensors/ small checkpoints in each float dtype, corpus/model_load/ the configs converted to .tern.
Both text targets also get inputs nested just past the converter's limit of 64 levels (in the whole header, in
__metadata__, in a tensor entry, in config fields), and regressions/ keeps the 100,000-level inputs that once
overflowed the stack.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
V, D, H, F, N, P, SPAN = 16, 8, 2, 16, 2, 16, 8


def reference_shapes():
    s = {"embed.weight": [V, D], "pos_embed.weight": [P, D], "final_norm.weight": [D], "final_norm.bias": [D],
         "lm_head.weight": [V, D], "lm_head.bias": [V]}
    for i in range(N):
        l = f"layers.{i}."
        for n in ("attn_norm", "mlp_norm"):
            s[l + n + ".weight"] = s[l + n + ".bias"] = [D]
        for n in ("q", "k", "v", "out"):
            s[l + f"attn.{n}.weight"] = [D, D]
            s[l + f"attn.{n}.bias"] = [D]
        s[l + "mlp.fc1.weight"], s[l + "mlp.fc1.bias"] = [F, D], [F]
        s[l + "mlp.fc2.weight"], s[l + "mlp.fc2.bias"] = [D, F], [D]
    return s


def adaptive_span_shapes():
    s = {"in_emb.weight": [V, D], "key_pe": [1, D // H, SPAN], "out_emb.weight": [V, D], "out_emb.bias": [V]}
    for i in range(N):
        l = f"layers.{i}."
        for n in ("proj_query", "proj_key", "proj_val", "proj_out"):
            s[l + f"attn.{n}.weight"] = [D, D]
        s[l + "attn.attn.adaptive_span._mask.current_val"] = [H, 1, 1]
        s[l + "attn.attn.adaptive_span._mask.mask_template"] = [SPAN]
        for n in ("norm1", "norm2"):
            s[l + n + ".weight"] = s[l + n + ".bias"] = [D]
        s[l + "ff.fc1.weight"], s[l + "ff.fc1.bias"] = [F, D], [F]
        s[l + "ff.fc2.weight"], s[l + "ff.fc2.bias"] = [D, F], [D]
    return s


def values(name, shape, rng):
    n = 1
    for d in shape:
        n *= d
    if name.endswith("mask_template"):
        return [float(1 - SPAN + i) for i in range(SPAN)]  # linspace(1 - L, 0, L)
    if name.endswith("current_val"):
        return [rng.uniform(0.2, 0.9) for _ in range(n)]
    # Multiples of 1/64 in [-2, 2]: exact in F16 and BF16 too.
    return [rng.randint(-128, 128) / 64.0 for _ in range(n)]


def encode(vals, dtype):
    if dtype == "F32":
        return struct.pack(f"<{len(vals)}f", *vals)
    if dtype == "F16":
        return struct.pack(f"<{len(vals)}e", *vals)
    return b"".join(struct.pack("<f", v)[2:] for v in vals)  # BF16: the high half of the F32


def safetensors(shapes, dtype, seed, metadata=None):
    rng = random.Random(seed)
    header, data = ({"__metadata__": metadata} if metadata else {}), b""
    for name in sorted(shapes):
        raw = encode(values(name, shapes[name], rng), dtype)
        header[name] = {"dtype": dtype, "shape": shapes[name], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def reference_config(**kw):
    c = {"model_type": "tern-reference", "vocab_size": V, "hidden_size": D, "num_layers": N, "num_heads": H,
         "intermediate_size": F, "max_position_embeddings": P}
    c.update(kw)
    return c


def adaptive_span_config(enabled):
    return {"model_type": "adaptive-span", "vocab_size": V,
            "model_params": {"hidden_size": D, "inner_hidden_size": F, "nb_layers": N, "block_size": 4,
                             "nb_heads": H, "attn_span": SPAN},
            "adapt_span_params": {"adapt_span_enabled": enabled, "adapt_span_ramp": 4, "adapt_span_cache": True}}


CONFIGS = {
    "ref_dense": reference_config(),
    "ref_post_sinusoidal_relu": reference_config(norm_position="post", position_embedding="sinusoidal",
                                                 activation="relu", tie_word_embeddings=False, lm_head_bias=True),
    "ref_sliding": reference_config(attention={"kind": "sliding", "window": 3}, activation="gelu_tanh"),
    "ref_chunked": reference_config(attention={"kind": "chunked", "chunk": 4, "chunks_before": 1, "chunks_after": 0}),
    "ref_strided_split": reference_config(attention={"kind": "strided", "stride": 3, "heads": "split"}),
    "ref_fixed_mixed": reference_config(attention=[{"kind": "fixed", "block": 4, "summary": 1},
                                                   {"kind": "dense"}], linear_bias=False),
    "as_fixed": adaptive_span_config(False),
    "as_learned": adaptive_span_config(True),
}


def nested(depth, inner=""):
    return "[" * depth + inner + "]" * depth


def nested_objects(depth, inner="1"):
    return '{"kind":' * depth + inner + "}" * depth


def with_field(config, field, text):
    """config's JSON text with `field` set to the raw JSON `text` (which may not be valid JSON)."""
    c = dict(config)
    c.pop(field, None)
    return ('{"%s": %s, ' % (field, text) + json.dumps(c)[1:]).encode()


def header_only(text):
    h = text.encode()
    return struct.pack("<Q", len(h)) + h


def write_deep_seeds():
    """Nesting at and past the 64-level limit: seeds to mutate, and the stack overflows of issue 20 kept as regressions."""
    deep = 100000  # about 200 KB of brackets: overflowed the recursive dump in the error messages
    st = {
        "deep_header": header_only(nested(65)),
        "deep_metadata": header_only('{"__metadata__": {"format": %s}}' % nested(63, '"pt"')),
        "deep_shape": header_only('{"w": {"dtype": "F32", "shape": %s, "data_offsets": [0, 4]}}' % nested(70, "1")),
    }
    for name, data in st.items():
        write(os.path.join(HERE, f"corpus/safetensors/{name}.safetensors"), data)
    write(os.path.join(HERE, "regressions/safetensors/nested-100k-header"), header_only(nested(deep)))
    write(os.path.join(HERE, "regressions/safetensors/nested-100k-metadata"),
          header_only('{"__metadata__": %s}' % nested(deep)))
    write(os.path.join(HERE, "regressions/safetensors/nested-100k-shape"),
          header_only('{"w": {"dtype": "F32", "shape": %s, "data_offsets": [0, 4]}}' % nested(deep)))
    base = reference_config()
    cfg = {
        "deep_field": with_field(base, "hidden_size", nested(64, "8")),
        "deep_attention": with_field(base, "attention", nested_objects(64, '"dense"')),
        "deep_at_limit": with_field(base, "hidden_size", nested(62, "8")),
    }
    for name, data in cfg.items():
        write(os.path.join(HERE, f"corpus/convert_config/{name}.json"), data)
    write(os.path.join(HERE, "regressions/convert_config/nested-100k-field.json"), with_field(base, "hidden_size", nested(deep)))
    write(os.path.join(HERE, "regressions/convert_config/nested-100k-model-type.json"),
          with_field(base, "model_type", nested(deep, "\"x\"")))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def byte_level_chars():
    """GPT-2's printable stand-in for each byte (tokenizers' bytes_char)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def tokenizer_seeds():
    """Two small tokenizer.json files exercising most of the pipeline: a byte-level BPE (Llama 3's pre-tokenizer
    pattern, NFC, added tokens with every flag, a template) and a Metaspace Unigram with byte fallback."""
    chars = byte_level_chars()
    vocab = {chars[b]: b for b in range(256)}
    merges = []
    for a, b in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("Ġ", "s"), ("o", "n")]:
        vocab.setdefault(a, len(vocab))
        vocab.setdefault(b, len(vocab))
        vocab[a + b] = len(vocab)
        merges.append(f"{a} {b}")
    n = len(vocab)
    added = [
        {"id": n, "content": "<|begin|>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True},
        {"id": n + 1, "content": "<|end|>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False,
         "special": True},
        {"id": n + 2, "content": "word", "single_word": True, "lstrip": False, "rstrip": False, "normalized": True,
         "special": False},
    ]
    pattern = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    bpe = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|begin|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<|begin|>": {"id": "<|begin|>", "ids": [n], "tokens": ["<|begin|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }
    pieces = [["<unk>", 0.0]] + [[f"<0x{b:02X}>", 0.0] for b in range(256)]
    rng = random.Random(5)
    for word in ["▁the", "▁and", "▁of", "the", "▁in", "▁a", "e", "t", "a", "o", "n", "▁", "s", "h", "r", "d"]:
        pieces.append([word, -rng.uniform(1.0, 12.0)])
    unigram = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": True},
    }
    return {"hf_bpe": bpe, "hf_unigram": unigram}


def write_tokenizer_seeds(tern_convert):
    """corpus/model_load/hf_*.tern: tiny Llama checkpoints (tools/reference/tokenizer_models.py) carrying them."""
    make_model = os.path.join(HERE, "../../tools/reference/tokenizer_models.py")
    for name, tokenizer in tokenizer_seeds().items():
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            with open(path, "w") as f:
                json.dump(tokenizer, f, ensure_ascii=False)
            subprocess.run([sys.executable, make_model, path, os.path.join(tmp, "ckpt")], check=True)
            out = os.path.join(HERE, f"corpus/model_load/{name}.tern")
            subprocess.run([tern_convert, os.path.join(tmp, "ckpt"), "-o", out, "--quiet"], check=True)


def varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def proto_field(number, value):
    """One protobuf field: an int as a varint, bytes/str as length-delimited, a float as fixed32."""
    if isinstance(value, float):
        return varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, (bool, int)):
        return varint(number << 3) + varint(int(value))
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def sentencepiece_model(pieces, model_type, byte_fallback=False, user_defined=(), normalizer="identity",
                        add_dummy_prefix=True):
    """A sentencepiece.ModelProto (sentencepiece_model.proto field numbers): <unk>, <s>, </s>, the pieces scored
    in order, then with byte_fallback the 256 <0xNN> pieces; user_defined pieces get type USER_DEFINED."""
    entries = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    entries += [(p, -1.0 - i * 0.5, 4 if p in user_defined else 1) for i, p in enumerate(pieces)]
    if byte_fallback:
        entries += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    out = b"".join(proto_field(1, proto_field(1, p) + proto_field(2, score) + proto_field(3, kind))
                   for p, score, kind in entries)
    trainer = proto_field(3, model_type) + proto_field(35, byte_fallback) + proto_field(40, 0) + \
        proto_field(41, 1) + proto_field(42, 2)
    out += proto_field(2, trainer)
    out += proto_field(3, proto_field(1, normalizer) + proto_field(3, add_dummy_prefix) + proto_field(4, True) +
                       proto_field(5, True))
    return out


TOKENIZER_TEXTS = [b"", b"the quick brown fox", b"  spaces   and\ttabs\n", "na\u00efve caf\u00e9 \u2581".encode(),
                   b"\xff\xfe broken \xc3", "<|begin|> the word <|end|>  word".encode(), b"aaaaaaaaaaaaaaaaaaaa"]


def write_tokenizer_target_seeds():
    """corpus/tokenizer/: <tokenizer file>\\n#TEXT#\\n<text> (fuzz_tokenizer.cpp): SentencePiece models of each kind
    written here field by field, and the two tokenizer.json files, each with a few texts."""
    words = ["\u2581the", "\u2581a", "th", "he", "the", "an", "\u2581", "t", "h", "e", "a", "n", "o"]
    files = {
        "sp_unigram": sentencepiece_model(words, 1),
        "sp_bpe": sentencepiece_model(words, 2),
        "sp_unigram_bytes": sentencepiece_model(words + ["<|begin|>"], 1, byte_fallback=True,
                                                user_defined=("<|begin|>",)),
        "sp_bpe_bytes_no_prefix": sentencepiece_model(words, 2, byte_fallback=True, add_dummy_prefix=False),
    }
    for name, tokenizer in tokenizer_seeds().items():
        files[name] = json.dumps(tokenizer, ensure_ascii=False).encode()
    for name, data in files.items():
        for i, text in enumerate(TOKENIZER_TEXTS):
            write(os.path.join(HERE, f"corpus/tokenizer/{name}_{i}"), data + b"\n#TEXT#\n" + text)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tern_convert = sys.argv[1]
    both = {**reference_shapes(), **adaptive_span_shapes()}
    checkpoint = safetensors(both, "F32", 1)
    write(os.path.join(HERE, "data/convert_config/model.safetensors"), checkpoint)
    for name, config in CONFIGS.items():
        write(os.path.join(HERE, f"corpus/convert_config/{name}.json"), json.dumps(config, indent=1).encode())
    small = {k: v for k, v in reference_shapes().items() if k.startswith(("embed", "layers.0.attn.q", "final"))}
    for dtype in ("F32", "F16", "BF16"):
        write(os.path.join(HERE, f"corpus/safetensors/small_{dtype.lower()}.safetensors"), safetensors(small, dtype, 2))
    odd = {"scalar": [], "empty": [0, 4], "row": [3]}  # rank 0, zero elements
    write(os.path.join(HERE, "corpus/safetensors/odd_shapes.safetensors"),
          safetensors(odd, "F32", 3, metadata={"format": "pt"}))
    write_deep_seeds()
    os.makedirs(os.path.join(HERE, "corpus/model_load"), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(HERE, "data/convert_config/model.safetensors"), tmp)
        for name in ("ref_dense", "ref_sliding", "ref_strided_split", "ref_fixed_mixed", "as_learned"):
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(CONFIGS[name], f)
            out = os.path.join(HERE, f"corpus/model_load/{name}.tern")
            subprocess.run([tern_convert, tmp, "-o", out, "--quiet"], check=True)
    write_tokenizer_seeds(tern_convert)
    write_tokenizer_target_seeds()


if __name__ == "__main__":
    main()
