// SPDX-License-Identifier: MIT
#include "text/symbol_vocab.h"

#include <cctype>

namespace tern {
namespace {

// Python's str.split() separators within ASCII (a line holds no '\n' here).
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f); }

// Bytes of the UTF-8 character at the start of s, 0 when it is not one.
size_t utf8_length(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || n > s.size()) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

Result<SymbolVocab> SymbolVocab::create(const fb::Symbols& table, int64_t vocab_size, int32_t eos_id, int32_t unk_id) {
  SymbolVocab v;
  v.unit_ = table.unit();
  if (v.unit_ != fb::SymbolUnit::WORDS && v.unit_ != fb::SymbolUnit::CHARACTERS &&
      v.unit_ != fb::SymbolUnit::BYTES_DECIMAL) {
    return InvalidModel("vocabulary: symbol unit " + std::to_string(int(v.unit_)) + " is not one this library knows");
  }
  const auto* symbols = table.symbols();
  const int64_t count = symbols ? int64_t(symbols->size()) : 0;
  if (count != vocab_size) {
    return InvalidModel("vocabulary: " + std::to_string(count) + " symbols for a vocabulary of " +
                        std::to_string(vocab_size));
  }
  v.lower_case_ = table.lower_case();
  v.eos_ = eos_id;
  v.unk_ = unk_id;
  v.symbols_.reserve(size_t(count));
  v.ids_.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    const flatbuffers::String* s = symbols->Get(flatbuffers::uoffset_t(i));
    const std::string_view sym(s->data(), s->size());
    if (sym.empty()) return InvalidModel("vocabulary: symbol " + std::to_string(i) + " is empty");
    if (!v.ids_.emplace(sym, int32_t(i)).second) {
      return InvalidModel("vocabulary: symbol " + std::to_string(i) + " repeats symbol " +
                          std::to_string(v.ids_[sym]));
    }
    v.symbols_.push_back(sym);
  }
  if (v.unit_ == fb::SymbolUnit::CHARACTERS) {
    if (table.space_symbol() == nullptr || table.space_symbol()->size() == 0) {
      return InvalidModel("vocabulary: a CHARACTERS vocabulary needs its space symbol");
    }
    v.space_symbol_ = std::string_view(table.space_symbol()->data(), table.space_symbol()->size());
  }
  return v;
}

const char* SymbolVocab::unit_name() const {
  switch (unit_) {
    case fb::SymbolUnit::CHARACTERS: return "characters";
    case fb::SymbolUnit::BYTES_DECIMAL: return "bytes-decimal";
    default: return "words";
  }
}

Status SymbolVocab::add_unit(std::string_view unit, size_t offset, std::vector<int32_t>* ids) const {
  const auto it = ids_.find(unit);
  if (it != ids_.end()) {
    ids->push_back(it->second);
    return Status::Ok();
  }
  if (unk_ >= 0) {
    ids->push_back(unk_);
    return Status::Ok();
  }
  return InvalidArgument("'" + std::string(unit.substr(0, 64)) + "' at offset " + std::to_string(offset) +
                         " is not in the model's vocabulary, which has no unknown symbol");
}

Status SymbolVocab::encode(std::string_view text, std::vector<int32_t>* ids) const {
  std::string lowered;
  if (lower_case_ && unit_ == fb::SymbolUnit::WORDS) {
    lowered.assign(text);
    for (char& c : lowered) c = char(std::tolower(static_cast<unsigned char>(c)));
    text = lowered;
  }
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      if (eos_ < 0) return InvalidArgument("a line end at offset " + std::to_string(i) + ": the vocabulary has no end-of-line symbol");
      ids->push_back(eos_);
      ++i;
    } else if (unit_ == fb::SymbolUnit::WORDS) {
      if (is_space(c)) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < text.size() && text[end] != '\n' && !is_space(static_cast<unsigned char>(text[end]))) ++end;
      TERN_RETURN_IF_ERROR(add_unit(text.substr(i, end - i), i, ids));
      i = end;
    } else if (unit_ == fb::SymbolUnit::CHARACTERS) {
      const size_t n = utf8_length(text.substr(i));
      if (n == 0) return InvalidArgument("byte " + std::to_string(c) + " at offset " + std::to_string(i) + " is not UTF-8");
      TERN_RETURN_IF_ERROR(add_unit(c == ' ' ? space_symbol_ : text.substr(i, n), i, ids));
      i += n;
    } else {
      TERN_RETURN_IF_ERROR(add_unit(std::to_string(c), i, ids));
      ++i;
    }
  }
  return Status::Ok();
}

std::string SymbolVocab::symbol_text(int32_t id) const {
  if (id == eos_) return "\n";
  const std::string_view sym = symbols_[size_t(id)];
  switch (unit_) {
    case fb::SymbolUnit::CHARACTERS: return sym == space_symbol_ ? std::string(" ") : std::string(sym);
    case fb::SymbolUnit::BYTES_DECIMAL: {
      int value = 0;
      for (char d : sym) {
        if (d < '0' || d > '9' || (value = value * 10 + (d - '0')) > 255) return std::string();  // a special symbol
      }
      return sym.size() <= 3 ? std::string(1, char(value)) : std::string();
    }
    default: return std::string(sym);
  }
}

std::string SymbolVocab::decode(const int32_t* ids, size_t n) const {
  std::string text;
  bool line_start = true;
  for (size_t i = 0; i < n; ++i) {
    if (unit_ == fb::SymbolUnit::WORDS && !line_start && ids[i] != eos_) text += ' ';
    text += symbol_text(ids[i]);
    line_start = ids[i] == eos_;
  }
  return text;
}

std::string SymbolVocab::piece_text(int32_t id) const {
  if (unit_ == fb::SymbolUnit::WORDS && id != eos_) return " " + symbol_text(id);
  return symbol_text(id);
}

}  // namespace tern
