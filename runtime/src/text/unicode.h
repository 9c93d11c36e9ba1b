// SPDX-License-Identifier: MIT
// Unicode facts the Hugging Face tokenizer pipeline needs (hf_tokenizer.h), from tables generated out of the
// Unicode Character Database (tools/unicode/make_tables.py; version in kUnicodeVersion): general categories, the
// White_Space property, normalization forms, lower-case mappings and extended grapheme clusters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::unicode {

extern const char* const kUnicodeVersion;  // "16.0.0": the categories' version (the others are above)

// General_Category; unassigned code points (and anything above U+10FFFF) are Cn.
enum class Category : uint8_t {
  Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co, Cn
};
Category category(char32_t c);
inline bool is_letter(char32_t c) { return category(c) <= Category::Lo; }                    // \p{L}
inline bool is_mark(char32_t c) { Category k = category(c); return k >= Category::Mn && k <= Category::Me; }  // \p{M}
inline bool is_number(char32_t c) { Category k = category(c); return k >= Category::Nd && k <= Category::No; }  // \p{N}
// The White_Space property (PropList.txt): Oniguruma's \s and Rust's char::is_whitespace.
bool is_white_space(char32_t c);
// Rust's char::is_alphanumeric: Alphabetic (DerivedCoreProperties.txt) or Nd, Nl, No.
bool is_alphanumeric(char32_t c);
// General_Category M as of Unicode 9.0: unicode-normalization-alignments' is_combining_mark (StripAccents).
bool is_combining_mark_unicode9(char32_t c);
// General_Category P as of Unicode 8.0: the unicode_categories crate's is_punctuation (BertPreTokenizer,
// Punctuation).
bool is_punctuation_unicode8(char32_t c);

// UTF-8. decode_utf8 reads the character at s[pos] and returns its length in bytes (>= 1 while pos < size); an
// invalid or truncated sequence reads as U+FFFD of length 1.
size_t decode_utf8(std::string_view s, size_t pos, char32_t* c);
void append_utf8(char32_t c, std::string* out);

// Normalization forms (UAX #15) of valid UTF-8 text.
enum class Form : uint8_t { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view text, Form form);
// Each character's full lower-case mapping (SpecialCasing.txt's unconditional ones included), as Rust's
// char::to_lowercase gives it one character at a time.
std::string to_lower(std::string_view text);
// Byte offsets where extended grapheme clusters (UAX #29) start, in order, the first being 0; empty for "".
std::vector<size_t> grapheme_starts(std::string_view text);

}  // namespace tern::unicode
