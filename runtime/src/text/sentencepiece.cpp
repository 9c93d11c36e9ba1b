// SPDX-License-Identifier: MIT
// SentencePieceTokenizer: validation, the steps around segmentation (unknown runs, byte fallback) and decoding.
// Normalization is in sentencepiece_normalize.cpp, segmentation in sentencepiece_segment.cpp.
#include "text/sentencepiece.h"

#include <cfloat>
#include <cmath>
#include <utility>

namespace tern {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";           // U+2581, what escaped spaces become
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";      // TrainerSpec.unk_surface's default: " ⁇ "
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

std::string piece_name(size_t i) { return "sentencepiece piece " + std::to_string(i); }

// The byte a piece spelled <0xNN> (two upper-case hex digits, as the reference writes them) stands for; -1 else.
int byte_of_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// U+2581 -> ' ' throughout.
void append_unescaped(std::string_view piece, std::string* out) {
  while (!piece.empty()) {
    if (piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
      out->push_back(' ');
      piece.remove_prefix(kSpaceSymbol.size());
    } else {
      out->push_back(piece.front());
      piece.remove_prefix(1);
    }
  }
}

}  // namespace

Result<SentencePieceTokenizer> SentencePieceTokenizer::create(SentencePieceSpec spec) {
  const size_t v = spec.pieces.size();
  if (v == 0) return InvalidModel("sentencepiece model has no pieces");
  if (spec.scores.size() != v || spec.types.size() != v) {
    return InvalidModel("sentencepiece model has " + std::to_string(v) + " pieces but " +
                        std::to_string(spec.scores.size()) + " scores and " + std::to_string(spec.types.size()) +
                        " types");
  }
  if (v > size_t(INT32_MAX)) return InvalidModel("sentencepiece model has too many pieces");
  if (spec.unk_id < 0 || size_t(spec.unk_id) >= v) {
    return InvalidModel("sentencepiece unk_id " + std::to_string(spec.unk_id) + " is outside the " +
                        std::to_string(v) + " pieces");
  }
  SentencePieceTokenizer t;
  TERN_ASSIGN_OR_RETURN(t.charsmap_, PrecompiledCharsMap::parse(spec.precompiled_charsmap));
  t.ids_.reserve(v);
  t.byte_values_.assign(v, -1);
  t.byte_ids_.fill(-1);
  t.min_score_ = FLT_MAX;  // the reference's starting values: FLT_MIN, not -FLT_MAX, for the maximum
  t.max_score_ = FLT_MIN;
  std::vector<std::string_view> trie_keys;
  std::vector<int32_t> trie_values;
  size_t unknowns = 0;
  for (size_t i = 0; i < v; ++i) {
    const std::string_view piece = spec.pieces[i];
    const PieceType type = spec.types[i];
    if (piece.empty()) return InvalidModel(piece_name(i) + " is empty");
    if (piece.size() > kMaxPieceBytes) return InvalidModel(piece_too_long_message(piece_name(i), piece.size()));
    // The reference's unigram trie keeps pieces as C strings: one holding a NUL would be cut short there.
    if (piece.find('\0') != std::string_view::npos) return InvalidModel(piece_name(i) + " holds a NUL byte");
    if (!std::isfinite(spec.scores[i])) return InvalidModel(piece_name(i) + "'s score is not finite");
    if (uint8_t(type) < uint8_t(PieceType::kNormal) || uint8_t(type) > uint8_t(PieceType::kByte)) {
      return InvalidModel(piece_name(i) + " has type " + std::to_string(int(type)) + ", not 1 to 6");
    }
    const auto [it, inserted] = t.ids_.emplace(piece, int32_t(i));
    if (!inserted) {
      return InvalidModel(piece_name(i) + " repeats piece " + std::to_string(it->second) + " ('" +
                          std::string(piece) + "')");
    }
    switch (type) {
      case PieceType::kUnknown:
        if (i != size_t(spec.unk_id)) {
          return InvalidModel(piece_name(i) + " is an unknown piece but unk_id is " + std::to_string(spec.unk_id));
        }
        ++unknowns;
        break;
      case PieceType::kByte: {
        if (!spec.byte_fallback) return InvalidModel(piece_name(i) + " is a byte piece but byte_fallback is off");
        const int byte = byte_of_piece(piece);
        if (byte < 0) return InvalidModel(piece_name(i) + " is a byte piece not spelled <0xNN>");
        t.byte_values_[i] = int16_t(byte);
        t.byte_ids_[size_t(byte)] = int32_t(i);
        break;
      }
      case PieceType::kNormal:
        t.min_score_ = std::min(t.min_score_, spec.scores[i]);
        t.max_score_ = std::max(t.max_score_, spec.scores[i]);
        [[fallthrough]];
      case PieceType::kUserDefined:
      case PieceType::kUnused:
        if (type == PieceType::kUserDefined) t.has_user_defined_ = true;
        trie_keys.push_back(piece);
        trie_values.push_back(int32_t(i));
        break;
      case PieceType::kControl:
        break;
    }
  }
  if (unknowns != 1) {
    return InvalidModel("sentencepiece piece " + std::to_string(spec.unk_id) + " (unk_id) is not an unknown piece");
  }
  if (spec.byte_fallback) {
    for (size_t b = 0; b < 256; ++b) {
      if (t.byte_ids_[b] < 0) {
        return InvalidModel("sentencepiece model has byte_fallback but no byte piece <0x" +
                            std::string(1, "0123456789ABCDEF"[b >> 4]) + std::string(1, "0123456789ABCDEF"[b & 15]) +
                            ">");
      }
    }
  }
  // The reference refuses a unigram model with nothing to build its lattice from.
  if (!spec.bpe && trie_keys.empty()) {
    return InvalidModel("sentencepiece unigram model has no normal, user-defined or unused piece");
  }
  t.trie_ = PieceTrie::build(trie_keys, trie_values);
  t.spec_ = std::move(spec);
  return t;
}

int32_t SentencePieceTokenizer::piece_id(std::string_view piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? spec_.unk_id : it->second;
}

size_t SentencePieceTokenizer::user_defined_prefix(std::string_view text) const {
  if (!has_user_defined_) return 0;
  size_t longest = 0;
  int32_t node = PieceTrie::root();
  for (size_t i = 0; i < text.size(); ++i) {
    node = trie_.child(node, uint8_t(text[i]));
    if (node == PieceTrie::kNoNode) break;
    const int32_t id = trie_.value(node);
    if (id != PieceTrie::kNoValue && type(id) == PieceType::kUserDefined) longest = i + 1;
  }
  return longest;
}

bool SentencePieceTokenizer::append_ids(const Segment& s, bool* previous_unknown, std::vector<int32_t>* ids) const {
  const PieceType t = type(s.id);
  // A control piece covers no text, so the reference finds the normalized text not all consumed and fails the whole
  // encoding: no ids. Only a BPE model whose control piece is one character can get here.
  if (t == PieceType::kControl) return false;
  const bool unknown = t == PieceType::kUnknown;
  if (unknown && spec_.byte_fallback) {
    for (char c : s.piece) ids->push_back(byte_ids_[uint8_t(c)]);
  } else if (!(unknown && *previous_unknown)) {  // a run of unknown pieces is one unknown id
    ids->push_back(s.id);
  }
  *previous_unknown = unknown;
  return true;
}

Status SentencePieceTokenizer::encode(std::string_view text, std::vector<int32_t>* ids) const {
  ids->clear();
  std::string normalized;
  TERN_RETURN_IF_ERROR(normalize(text, &normalized));
  // Segmentation keeps offsets into the normalized text in 32 bits.
  if (normalized.size() > UINT32_MAX) {
    return InvalidArgument("the text normalizes to " + std::to_string(normalized.size()) +
                           " bytes; a sentencepiece tokenizer takes less than 4 GiB at once");
  }
  if (normalized.empty()) return Status::Ok();
  if (spec_.bpe) {
    encode_bpe(normalized, ids);
  } else {
    encode_unigram(normalized, ids);
  }
  return Status::Ok();
}

std::string SentencePieceTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string text;
  // Byte pieces are collected and turned into text when a non-byte piece (or the end) follows: each well-formed
  // UTF-8 character as itself, each byte of a malformed sequence as U+FFFD.
  std::string bytes;
  auto flush_bytes = [&]() {
    std::string_view rest = bytes;
    while (!rest.empty()) {
      const size_t len = sentencepiece_utf8_length(rest);
      if (len == 0) {
        text.append(kReplacementCharacter);
        rest.remove_prefix(1);
      } else {
        text.append(rest.substr(0, len));
        rest.remove_prefix(len);
      }
    }
    bytes.clear();
  };
  // The leading space that add_dummy_prefix put in front is taken off the first piece: with remove_extra_whitespaces
  // from every piece until some text has come out, without it from the first piece that starts with U+2581 only.
  const bool strip_leading = spec_.add_dummy_prefix || spec_.remove_extra_whitespaces;
  bool at_start = true;
  bool stripped = false;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    const PieceType t = type(id);
    if (t == PieceType::kByte) {
      bytes.push_back(char(byte_values_[size_t(id)]));
      continue;
    }
    flush_bytes();
    if (stripped || !text.empty()) at_start = false;
    stripped = false;
    if (t == PieceType::kControl) continue;
    if (t == PieceType::kUnknown) {
      text.append(kUnknownSurface);
      continue;
    }
    std::string_view piece = spec_.pieces[size_t(id)];
    if (at_start && strip_leading && piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
      piece.remove_prefix(kSpaceSymbol.size());
      stripped = !spec_.remove_extra_whitespaces;
    }
    append_unescaped(piece, &text);
  }
  flush_bytes();
  return text;
}

std::string SentencePieceTokenizer::piece_text(int32_t id) const {
  switch (type(id)) {
    case PieceType::kControl:
      return std::string();
    case PieceType::kUnknown:
      return std::string(kUnknownSurface);
    case PieceType::kByte:
      return std::string(1, char(byte_values_[size_t(id)]));
    default: {
      std::string text;
      append_unescaped(spec_.pieces[size_t(id)], &text);
      return text;
    }
  }
}

}  // namespace tern
