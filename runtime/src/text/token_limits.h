// SPDX-License-Identifier: MIT
// Limits every tokenizer is held to, checked where the converter reads a tokenizer file and again where the runtime
// builds a tokenizer from a model file. They keep encoding linear in the text and its memory a bounded multiple of
// it, whatever the file holds: every trie walk (model pieces, added tokens, user-defined symbols, a precompiled
// charsmap's rule sources) stops after kMaxPieceBytes, and no normalization rule writes more than
// kMaxReplacementBytes for what it replaces.
#pragma once

#include <cstddef>
#include <string>

#include "format/status.h"

namespace tern {

// The longest token of the real tokenizers measured is 256 bytes (GPT-2, Llama 3, Qwen3, GPT-4o: 128 two-byte
// characters); Gemma 3's is 93, Llama 2's 48. Four times the longest.
constexpr size_t kMaxPieceBytes = 1024;

// The longest replacement of one normalization rule: nmt_nfkc's longest is 33 bytes (U+FDFA to 18 characters); the
// Replace and Prepend normalizers of real tokenizer.json files write one character (U+2581).
constexpr size_t kMaxReplacementBytes = 128;

// Normalized text may be at most this many times the input's bytes, plus kMaxReplacementBytes: NFKC's largest
// expansion (U+FDFA, 3 bytes to 33, 39 with its spaces escaped as U+2581) is 13 times.
constexpr size_t kMaxNormalizedExpansion = 16;
inline size_t max_normalized_bytes(size_t input_bytes) {
  return input_bytes * kMaxNormalizedExpansion + kMaxReplacementBytes;
}

// InvalidModel (the runtime) or what `make_error` gives: "<what> is 2000 bytes long; a token may be at most 1024".
inline std::string piece_too_long_message(const std::string& what, size_t bytes) {
  return what + " is " + std::to_string(bytes) + " bytes long; a token may be at most " +
         std::to_string(kMaxPieceBytes) + " bytes";
}

// "normalizing the text (300 bytes) makes more than 4928 bytes, 16 times its length: the tokenizer's ..." names the
// limit a normalizer broke on a text.
inline Status normalized_too_long(size_t input_bytes) {
  return InvalidArgument("normalizing the text (" + std::to_string(input_bytes) + " bytes) makes more than " +
                         std::to_string(max_normalized_bytes(input_bytes)) + " bytes, " +
                         std::to_string(kMaxNormalizedExpansion) +
                         " times its length: the tokenizer's normalization rules expand it more than any real one");
}

}  // namespace tern
