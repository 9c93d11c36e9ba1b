# SPDX-License-Identifier: MIT
"""Turn Hugging Face's Transformer-XL vocabulary (vocab.pkl of transfo-xl-wt103) into tern_vocab.json.

    python3 tools/transfo_xl_vocab.py vocab.pkl CHECKPOINT_DIR/tern_vocab.json

tern-convert then stores it in the model file (a SYMBOLS vocabulary, unit "words"; converter/src/symbols_file.h),
so tern_tokenize and tern-run --prompt take text. The file is TransfoXLTokenizer's pickled attributes: idx2sym (the
symbol of each id), lower_case and the special symbols; wt103's has 267,735 words, <eos> and <unk> among them.
Words are split on whitespace, as wt103's text is already tokenised: TransfoXLTokenizer runs raw text through
sacremoses' punctuation normaliser and tokeniser first ("Hello, world." -> "Hello , world ."), which Tern does not,
so a prompt should be written tokenised the same way.
"""

import argparse
import json
import pickle
import sys


class _Opaque:
    """Stands for the classes the pickle names that are not needed here (sacremoses objects, torch types)."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module in ("collections", "builtins") or module.startswith("collections."):
            return super().find_class(module, name)
        return _Opaque


def load_vocab(path):
    with open(path, "rb") as f:
        data = _Unpickler(f).load()
    if isinstance(data, int):  # a file written by torch.save: only torch reads it back
        import torch

        data = torch.load(path, map_location="cpu")
    if not isinstance(data, dict) or "idx2sym" not in data:
        raise SystemExit(f"{path}: not a TransfoXLTokenizer vocabulary (no idx2sym)")
    return data


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vocab", help="vocab.pkl (or vocab.bin) of a Hugging Face Transformer-XL checkpoint")
    ap.add_argument("out", help="where to write tern_vocab.json (in the checkpoint directory, for tern-convert)")
    args = ap.parse_args(argv)
    data = load_vocab(args.vocab)
    symbols = [str(s) for s in data["idx2sym"]]
    if data.get("delimiter") not in (None, ""):
        raise SystemExit(f"{args.vocab}: delimiter {data['delimiter']!r}: only whitespace-separated words are supported")
    unk = "<unk>" if "<unk>" in symbols else ("<UNK>" if "<UNK>" in symbols else None)
    out = {
        "unit": "words",
        "symbols": symbols,
        "eos": "<eos>" if "<eos>" in symbols else None,
        "unk": unk,
        "lower_case": bool(data.get("lower_case", False)),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"{args.out}: {len(symbols)} words, eos {out['eos']}, unk {unk}, lower_case {out['lower_case']}")


if __name__ == "__main__":
    main(sys.argv[1:])
