// SPDX-License-Identifier: MIT
// A SYMBOLS vocabulary (schema/tern.fbs): one symbol per id, each a word, a character or a byte in decimal, with
// line ends as the end-of-line id, as the word- and character-level corpora of Transformer-XL (wt103) and
// adaptive-span (enwik8, text8) number their tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern {

class SymbolVocab {
 public:
  // Checks the table (size symbols, none empty or repeated, a space symbol for CHARACTERS); eos_id / unk_id are the
  // vocabulary's, -1 when absent.
  static Result<SymbolVocab> create(const fb::Symbols& table, int64_t vocab_size, int32_t eos_id, int32_t unk_id);

  // "words", "characters", "bytes-decimal".
  const char* unit_name() const;
  // Appends the ids of text: each line's symbols, then eos_id after each '\n'. A symbol not in the vocabulary is
  // unk_id, or an error naming it and its byte offset when there is no unknown id.
  Status encode(std::string_view text, std::vector<int32_t>* ids) const;
  // The text of ids [n]: WORDS joined by single spaces within a line, eos_id as '\n'.
  std::string decode(const int32_t* ids, size_t n) const;
  // What id adds after other ids: a word with a space before it, a character, a byte; eos_id: "\n".
  std::string piece_text(int32_t id) const;

 private:
  SymbolVocab() = default;
  Status add_unit(std::string_view unit, size_t offset, std::vector<int32_t>* ids) const;
  // The text of one symbol, without the space between words.
  std::string symbol_text(int32_t id) const;

  fb::SymbolUnit unit_ = fb::SymbolUnit::WORDS;
  bool lower_case_ = false;
  std::vector<std::string_view> symbols_;  // views into the model file
  std::unordered_map<std::string_view, int32_t> ids_;
  std::string_view space_symbol_;
  int32_t eos_ = -1, unk_ = -1;
};

}  // namespace tern
