#include "text/hf_utf8.h"

namespace tern {
namespace {

bool stands_for_itself(int byte) { return (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174; }

}  // namespace

char32_t hf_byte_level_char(uint8_t byte) {
  if (stands_for_itself(byte)) return byte;
  int shifted = 0;  // how many bytes before this one do not stand for themselves
  for (int b = 0; b < byte; ++b) shifted += !stands_for_itself(b);
  return char32_t(256 + shifted);
}

int hf_byte_level_byte(char32_t c) {
  if (c < 256) return stands_for_itself(int(c)) ? int(c) : -1;
  if (c >= 256 + 68) return -1;
  int index = int(c - 256);
  for (int b = 0; b < 256; ++b) {
    if (stands_for_itself(b)) continue;
    if (index-- == 0) return b;
  }
  return -1;
}

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
