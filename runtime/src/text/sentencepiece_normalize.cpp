// SPDX-License-Identifier: MIT
// SentencePieceTokenizer::normalize: the reference Normalizer::Normalize, ids-only (no offsets back into the input).
#include <string>

#include "text/sentencepiece.h"

namespace tern {

namespace {
constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";           // U+2581
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD
}  // namespace

Status SentencePieceTokenizer::normalize(std::string_view input, std::string* normalized) const {
  normalized->clear();
  if (input.empty()) return Status::Ok();
  // Each rule writes at most kMaxReplacementBytes (checked at load); the whole stays within this, checked as it
  // grows, so a hostile charsmap costs at most this much memory before the error.
  const size_t input_bytes = input.size();
  const size_t limit = max_normalized_bytes(input_bytes);

  // The normalized form of the text's first unit and the bytes it covers: a user-defined piece unchanged, else the
  // longest charsmap rule, else one UTF-8 character (a malformed byte: U+FFFD, one byte consumed).
  auto next = [this](std::string_view text, std::string_view* out) -> size_t {
    if (const size_t n = user_defined_prefix(text); n > 0) {
      *out = text.substr(0, n);
      return n;
    }
    if (const size_t n = charsmap_.longest_match(text, out); n > 0) return n;
    const size_t n = sentencepiece_utf8_length(text);
    if (n == 0) {
      *out = kReplacementCharacter;
      return 1;
    }
    *out = text.substr(0, n);
    return n;
  };

  const bool remove_extra = spec_.remove_extra_whitespaces;
  std::string_view unit;
  if (remove_extra) {
    // Leading units that normalize to exactly one space go; the first other unit stays for the loop below.
    while (!input.empty()) {
      const size_t n = next(input, &unit);
      if (unit != " ") break;
      input.remove_prefix(n);
    }
  }
  if (input.empty()) return Status::Ok();

  const std::string_view space = spec_.escape_whitespaces ? kSpaceSymbol : std::string_view(" ");
  normalized->reserve(input.size() + space.size());  // most text; escaped spaces grow it
  const bool dummy_in_front = spec_.add_dummy_prefix && !spec_.treat_whitespace_as_suffix;
  if (dummy_in_front) normalized->append(space);

  // With remove_extra_whitespaces, spaces that open a unit go while the text so far ends with a space (and at the
  // start): runs of spaces collapse to one.
  bool previous_space = remove_extra;
  while (!input.empty()) {
    const size_t n = next(input, &unit);
    while (previous_space && !unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (!unit.empty()) {
      for (char c : unit) {
        if (c == ' ' && spec_.escape_whitespaces) {
          normalized->append(kSpaceSymbol);
        } else {
          normalized->push_back(c);
        }
      }
      previous_space = unit.back() == ' ';
      if (normalized->size() > limit) {
        normalized->clear();
        return normalized_too_long(input_bytes);
      }
    }
    input.remove_prefix(n);
    if (!remove_extra) previous_space = false;
  }

  if (remove_extra) {
    while (normalized->size() >= space.size() &&
           std::string_view(*normalized).substr(normalized->size() - space.size()) == space) {
      normalized->resize(normalized->size() - space.size());
    }
  }
  if (spec_.add_dummy_prefix && spec_.treat_whitespace_as_suffix) normalized->append(space);
  return Status::Ok();
}

}  // namespace tern
