// SPDX-License-Identifier: MIT
// A word-, character- or byte-level symbol list (tern_vocab.json) for the SYMBOLS vocabulary (schema/tern.fbs):
//   {"unit": "words" | "characters" | "bytes-decimal", "symbols": ["<eos>", "the", ...],
//    "eos": "<eos>", "unk": "<unk>", "space": "_", "lower_case": false}
// symbols[i] is the symbol of id i; eos (the line end) and unk name symbols of the list and may be null or absent;
// space is the symbol of a space for "characters". tools/transfo_xl_vocab.py and tools/adaptive_span_vocab.py
// write it from Hugging Face's vocab.pkl and from an adaptive-span data directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern::convert {

struct SymbolsFile {
  fb::SymbolUnit unit = fb::SymbolUnit::WORDS;
  std::vector<std::string> symbols;
  std::string space;  // CHARACTERS
  bool lower_case = false;
  int32_t eos_id = -1, unk_id = -1;
};

// "'dir/tern_vocab.json': symbols[17] repeats symbols[3] ('the')"; "'x.json': \"unit\" must be words, characters
// or bytes-decimal, not 'bpe'".
Result<SymbolsFile> read_symbols_file(const std::string& path);

}  // namespace tern::convert
