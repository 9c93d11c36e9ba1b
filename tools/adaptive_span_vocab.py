# SPDX-License-Identifier: MIT
"""Write tern_vocab.json for a model of facebookresearch/adaptive-span from the data directory it was trained on.

    python3 tools/adaptive_span_vocab.py DATA_DIR CHECKPOINT_DIR/tern_vocab.json --unit characters|bytes-decimal|words

That codebase's data.py numbers the tokens of train.txt, valid.txt and test.txt (in that order) by first
appearance, each line's whitespace-separated tokens followed by <eos>; this script numbers them the same way. The
unit says what a token of the prepared text stands for: text8 (prep_text8.py) writes characters with "_" for a
space (--unit characters); enwik8 (prep_enwik8.py) writes each byte in decimal and its newlines as line ends
(--unit bytes-decimal); word-level corpora need --unit words. tern-convert stores the list in the model file (a
SYMBOLS vocabulary; converter/src/symbols_file.h), so tern_tokenize and tern-run --prompt take text.
"""

import argparse
import json
import os
import sys


def dictionary(data_dir):
    word2idx, idx2word = {}, []
    for split in ("train.txt", "valid.txt", "test.txt"):
        path = os.path.join(data_dir, split)
        if not os.path.exists(path):
            raise SystemExit(f"{path}: not found (data.py reads train.txt, valid.txt and test.txt)")
        with open(path, "r", encoding="utf8") as f:
            for line in f:
                for word in line.split() + ["<eos>"]:
                    if word not in word2idx:
                        word2idx[word] = len(idx2word)
                        idx2word.append(word)
    return idx2word


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", help="the directory with train.txt, valid.txt and test.txt")
    ap.add_argument("out", help="where to write tern_vocab.json (in the checkpoint directory, for tern-convert)")
    ap.add_argument("--unit", required=True, choices=["characters", "bytes-decimal", "words"])
    ap.add_argument("--space", default="_", help="characters: the token of a space (text8: _)")
    args = ap.parse_args(argv)
    symbols = dictionary(args.data_dir)
    out = {"unit": args.unit, "symbols": symbols, "eos": "<eos>", "unk": None}
    if args.unit == "characters":
        out["space"] = args.space
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"{args.out}: {len(symbols)} symbols ({args.unit})")


if __name__ == "__main__":
    main(sys.argv[1:])
