// SPDX-License-Identifier: MIT
#include "text/hf_utf8.h"

namespace tern {
namespace {

// GPT-2's bytes_to_unicode both ways: the printable bytes ! to ~, U+00A1 to U+00AC and U+00AE to U+00FF stand for
// themselves; the other 68, in byte order, for U+0100, U+0101, ... Built once; the pre-tokenizer maps every byte of
// its text and the decoder every character of its tokens through them.
struct ByteLevelTables {
  char32_t chars[256];
  int16_t bytes[256 + 68];  // -1: a character below U+0144 that stands for no byte
  ByteLevelTables() {
    for (int16_t& b : bytes) b = -1;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      chars[b] = printable ? char32_t(b) : next++;
      bytes[chars[b]] = int16_t(b);
    }
  }
};

const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables;
  return tables;
}

}  // namespace

char32_t hf_byte_level_char(uint8_t byte) { return byte_level_tables().chars[byte]; }

int hf_byte_level_byte(char32_t c) { return c < 256 + 68 ? byte_level_tables().bytes[c] : -1; }

bool hf_utf8_sequence(std::string_view s, size_t pos, size_t* length, char32_t* c) {
  const uint8_t lead = uint8_t(s[pos]);
  if (lead < 0x80) {
    *length = 1;
    *c = lead;
    return true;
  }
  size_t need;
  uint8_t low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    *length = 1;
    return false;
  }
  char32_t value = lead & (0x3F >> need);
  size_t i = 1;
  for (; i <= need; ++i) {
    if (pos + i >= s.size()) break;
    const uint8_t b = uint8_t(s[pos + i]);
    const uint8_t lo = i == 1 ? low : 0x80, hi = i == 1 ? high : 0xBF;
    if (b < lo || b > hi) break;
    value = (value << 6) | (b & 0x3F);
  }
  *length = i > need ? need + 1 : i;
  if (i <= need) return false;
  *c = value;
  return true;
}

void hf_append_utf8_lossy(std::string_view bytes, std::string* out) {
  for (size_t pos = 0; pos < bytes.size();) {
    size_t length;
    char32_t c;
    if (hf_utf8_sequence(bytes, pos, &length, &c)) {
      out->append(bytes.data() + pos, length);
    } else {
      out->append("\xEF\xBF\xBD");
    }
    pos += length;
  }
}

}  // namespace tern
