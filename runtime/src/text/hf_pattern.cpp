// SPDX-License-Identifier: MIT
#include <string>

#include "text/hf_steps.h"
#include "text/sentencepiece_tables.h"

namespace tern::hf {

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = sentencepiece_utf8_length(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = sentencepiece_utf8_length(s.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

Result<Pattern> Pattern::from_step(const fb::HfStep& step, const std::string& what) {
  // An absent pattern is the empty one (FlatBuffers' object API writes no empty string).
  const std::string_view text = step.pattern() ? step.pattern()->string_view() : std::string_view();
  if (!is_valid_utf8(text)) return InvalidModel(what + "'s pattern is not valid UTF-8");
  Pattern p;
  if (step.pattern_is_regex()) {
    auto regex = HfRegex::compile(text);
    if (!regex.ok()) return InvalidModel(what + "'s regex: " + regex.status().message());
    p.regex_ = std::move(regex).value();
  } else {
    p.literal_ = std::string(text);
  }
  return p;
}

Spans Pattern::find_matches(std::string_view text) const {
  return regex_ ? find_regex(text, *regex_) : find_literal(text, literal_);
}

}  // namespace tern::hf
