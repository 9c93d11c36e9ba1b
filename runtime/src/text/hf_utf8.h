// SPDX-License-Identifier: MIT
// UTF-8 stepping for the tokenizer.json models and decoders (the length of the character a lead byte starts), and
// the GPT-2 byte <-> character table the ByteLevel pre-tokenizer and decoder share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

// Bytes of the character starting at s[pos] (pos < s.size()): the lead byte's length, cut to what s holds; 1 for a
// byte that cannot start a character. Text from the pipeline is valid UTF-8; this only keeps bad bytes bounded.
inline size_t hf_char_length(std::string_view s, size_t pos) {
  const uint8_t lead = uint8_t(s[pos]);
  const size_t length = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
  return length < s.size() - pos ? length : s.size() - pos;
}

// GPT-2's bytes_to_unicode: bytes 33..126, 161..172 and 174..255 stand for themselves; the other 68 become
// U+0100.. in byte order. hf_byte_level_byte inverts it: the byte a character stands for, -1 for any other.
char32_t hf_byte_level_char(uint8_t byte);
int hf_byte_level_byte(char32_t c);

}  // namespace tern

namespace tern {

// The well-formed UTF-8 sequence at s[pos] (pos < s.size()): true with *length its bytes and *c its character;
// false with *length the bytes of its maximal ill-formed subpart (at least 1), which Rust's from_utf8_lossy
// replaces with one U+FFFD.
bool hf_utf8_sequence(std::string_view s, size_t pos, size_t* length, char32_t* c);
// Rust's String::from_utf8_lossy, appended to *out.
void hf_append_utf8_lossy(std::string_view bytes, std::string* out);

}  // namespace tern
