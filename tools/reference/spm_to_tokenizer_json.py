#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the tokenizer.json that Hugging Face transformers' slow-to-fast conversion (convert_slow_tokenizer.py)
makes of a SentencePiece .model file. Python 3 standard library only: the model file (a protobuf) is read by hand.

    python3 tools/reference/spm_to_tokenizer_json.py MODEL.model OUT.json [--layout llama|t5]
                                                     [--config OUT_tokenizer_config.json]

Layouts (the default follows the model: BPE -> llama, unigram -> t5):
  llama  LlamaConverter with legacy=True, add_prefix_space=True (Llama 2): normalizer Prepend("▁") + Replace(" " ->
         "▁"), no pre-tokenizer; BPE over the pieces with byte_fallback and fuse_unk, unk_token the model's unknown
         piece, merges ordered as SentencePieceExtractor orders them (by the merged piece's score, highest first; the
         splits of one piece by their left then right piece's id); decoder Replace("▁" -> " "), ByteFallback, Fuse,
         Strip(" ", 1, 0); post-processor TemplateProcessing "<s> $A" (LlamaTokenizerFast's add_bos_token); added
         tokens: the unknown, BOS and EOS pieces (special), then the model's control (special) and user-defined
         pieces.
  t5     SpmConverter's unigram (T5Converter without extra ids): normalizer Precompiled(the model's charsmap),
         Strip(right), Replace(/ {2,}/ -> "▁"); Metaspace pre-tokenizer and decoder ("▁", prepend_scheme always);
         Unigram over the pieces with their scores; post-processor TemplateProcessing "$A </s>"; added tokens: the
         model's control (special) and user-defined pieces.
"""

import argparse
import base64
import json
import struct
import sys

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _varint(buf, pos):
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _fields(buf):
    """(field number, wire type, value) of each field of a protobuf message: varints as int, 32-bit as bytes,
    length-delimited as bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type {}".format(wire))
        yield field, wire, value


def read_model(path):
    """The fields of a SentencePiece ModelProto that the conversion reads (sentencepiece_model.proto's numbers)."""
    with open(path, "rb") as f:
        data = f.read()
    model = {"pieces": [], "model_type": 1, "unk_id": 0, "unk_piece": "<unk>", "bos_piece": "<s>",
             "eos_piece": "</s>", "byte_fallback": False, "precompiled_charsmap": b""}
    for field, _, value in _fields(data):
        if field == 1:  # pieces
            piece = {"piece": "", "score": 0.0, "type": NORMAL}
            for f, _, v in _fields(value):
                if f == 1:
                    piece["piece"] = v.decode("utf-8")
                elif f == 2:
                    piece["score"] = struct.unpack("<f", v)[0]
                elif f == 3:
                    piece["type"] = v
            model["pieces"].append(piece)
        elif field == 2:  # trainer_spec
            for f, _, v in _fields(value):
                if f == 3:
                    model["model_type"] = v
                elif f == 35:
                    model["byte_fallback"] = bool(v)
                elif f == 40:
                    model["unk_id"] = v
                elif f == 45:
                    model["unk_piece"] = v.decode("utf-8")
                elif f == 46:
                    model["bos_piece"] = v.decode("utf-8")
                elif f == 47:
                    model["eos_piece"] = v.decode("utf-8")
        elif field == 3:  # normalizer_spec
            for f, _, v in _fields(value):
                if f == 2:
                    model["precompiled_charsmap"] = v
    return model


def added_token(token_id, content, special):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def spm_added_tokens(pieces, first=()):
    """Control pieces (special) and user-defined pieces (not special), by id, after the ids in `first`."""
    out = [added_token(i, pieces[i]["piece"], True) for i in first]
    for i, p in enumerate(pieces):
        if p["type"] in (CONTROL, USER_DEFINED) and i not in first:
            out.append(added_token(i, p["piece"], p["type"] == CONTROL))
    return sorted(out, key=lambda t: t["id"])


def bpe_merges(pieces):
    """SentencePieceExtractor's merges: every split of a piece into two pieces of the vocabulary, ordered by the
    merged piece's score (highest first, a stable sort), the splits of one piece by (left id, right id)."""
    vocab = {p["piece"]: i for i, p in enumerate(pieces)}
    merges = []
    for merged, p in enumerate(pieces):
        text = p["piece"]
        local = []
        for k in range(1, len(text)):
            left, right = text[:k], text[k:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        merges.extend((p["score"], left, right) for _, _, left, right in local)
    merges.sort(key=lambda m: m[0], reverse=True)
    return [[left, right] for _, left, right in merges]


def template(bos=None, eos=None, ids=None):
    single, pair = [], []
    if bos:
        single.append({"SpecialToken": {"id": bos, "type_id": 0}})
    single.append({"Sequence": {"id": "A", "type_id": 0}})
    if eos:
        single.append({"SpecialToken": {"id": eos, "type_id": 0}})
    if bos:
        pair = single + [{"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}]
    else:
        pair = single + [{"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": eos, "type_id": 1}}]
    specials = {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in (bos, eos) if t}
    return {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials}


def llama_layout(model):
    pieces = model["pieces"]
    ids = {p["piece"]: i for i, p in enumerate(pieces)}
    unk, bos, eos = model["unk_piece"], model["bos_piece"], model["eos_piece"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": spm_added_tokens(pieces, first=(ids[unk], ids[bos], ids[eos])),
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": template(bos=bos, ids=ids),
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {p["piece"]: i for i, p in enumerate(pieces)}, "merges": bpe_merges(pieces)},
    }


def t5_layout(model):
    pieces = model["pieces"]
    ids = {p["piece"]: i for i, p in enumerate(pieces)}
    normalizers = []
    if model["precompiled_charsmap"]:
        normalizers.append({"type": "Precompiled",
                            "precompiled_charsmap": base64.b64encode(model["precompiled_charsmap"]).decode("ascii")})
    normalizers += [{"type": "Strip", "strip_left": False, "strip_right": True},
                    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]
    metaspace = {"replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": spm_added_tokens(pieces),
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": dict(type="Metaspace", **metaspace),
        "post_processor": template(eos=model["eos_piece"], ids=ids),
        "decoder": dict(type="Metaspace", **metaspace),
        "model": {"type": "Unigram", "unk_id": model["unk_id"],
                  "vocab": [[p["piece"], p["score"]] for p in pieces], "byte_fallback": model["byte_fallback"]},
    }


def tokenizer_config(tokenizer):
    """The tokenizer_config.json beside it: add_bos_token where the template starts with a token, and the
    added tokens by id (what tern-convert and transformers read for special ids)."""
    single = tokenizer["post_processor"]["single"]
    config = {"add_bos_token": "SpecialToken" in single[0], "add_eos_token": "SpecialToken" in single[-1],
              "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                       for t in tokenizer["added_tokens"]}}
    return config


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a SentencePiece .model file")
    parser.add_argument("out", help="the tokenizer.json to write")
    parser.add_argument("--layout", choices=["llama", "t5"], help="default: llama for BPE, t5 for unigram")
    parser.add_argument("--config", help="also write a tokenizer_config.json here")
    args = parser.parse_args()
    model = read_model(args.model)
    layout = args.layout or ("llama" if model["model_type"] == 2 else "t5")
    if layout == "llama" and model["model_type"] != 2:
        sys.exit("spm_to_tokenizer_json: the llama layout needs a BPE model; {} is not one".format(args.model))
    if layout == "t5" and model["model_type"] != 1:
        sys.exit("spm_to_tokenizer_json: the t5 layout needs a unigram model; {} is not one".format(args.model))
    tokenizer = llama_layout(model) if layout == "llama" else t5_layout(model)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=2)
        f.write("\n")
    if args.config:
        with open(args.config, "w", encoding="utf-8") as f:
            json.dump(tokenizer_config(tokenizer), f, ensure_ascii=False, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
