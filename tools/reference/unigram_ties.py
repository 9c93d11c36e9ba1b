#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a Unigram tokenizer.json whose segmentations are decided by the last bit of its scores: pieces of 1 to 16
repeats of "a", "😀" and "的" (runs of them are in the tokenizer test text) with scores of 17 significant digits.
Runs of one character have many segmentations whose scores are equal but for rounding, so an encoder agrees with
tokenizers only if it reads every score to the same double tokenizers does (serde_json's parsing, which is not
always the nearest double) and sums in the same order.

    python3 tools/reference/unigram_ties.py OUT/tokenizer.json
"""
import json
import random
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = random.Random(17)
    vocab = [["<unk>", 0.0], ["\u2581", -3.0573506355285645]]
    for ch in ("a", "\U0001F600", "\u7684"):
        for k in range(1, 17):
            # 17 significant digits, as a float32 score printed through a double (SentencePiece's) has them.
            vocab.append([ch * k, float("%.17g" % -(4.0 + k * 0.45 + rng.random()))])
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False},
    }
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
