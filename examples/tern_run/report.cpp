// SPDX-License-Identifier: MIT
#include "report.h"

#include <cstdio>

namespace tern::run {
namespace {

// Length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF), or 0.
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string json_text(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = utf8_sequence(bytes, i);
    if (n > 0) {
      out.append(bytes, i, n);
      i += n;
      continue;
    }
    const auto c = static_cast<unsigned char>(bytes[i++]);  // U+0080..U+00FF in UTF-8
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
  return out;
}

nlohmann::json json_bytes(uint64_t bytes) {
  return bytes == UINT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(bytes);
}

namespace {

// Every string of the report through json_text: paths, the model's description and generated text may hold bytes
// that are not UTF-8, which nlohmann::json refuses to dump. Depth is the report's own (a few levels).
void escape_strings(nlohmann::json& value) {
  if (value.is_string()) {
    value = json_text(value.get_ref<const std::string&>());
  } else if (value.is_structured()) {
    for (auto& member : value) escape_strings(member);
  }
}

}  // namespace

void print_json(const nlohmann::json& report) {
  nlohmann::json escaped = report;
  escape_strings(escaped);
  const std::string text = escaped.dump(-1, ' ', /*ensure_ascii=*/true);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace tern::run
