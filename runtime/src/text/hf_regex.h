// SPDX-License-Identifier: MIT
// The regular expressions of tokenizer.json files (Split pre-tokenizers, Replace normalizers and decoders),
// compiled from Oniguruma's syntax as the `tokenizers` library's default build does (Ruby syntax, UTF-8) and matched
// with leftmost-first (backtracking) priority by a Pike VM: time linear in the text times the program size, and no
// recursion, so a hostile pattern can be slow only in proportion to its (bounded) size, never exponentially.
//
// The subset: literals and escapes, `.`, classes `[...]` with ranges, negation and nested escapes, \s \S \d \D \w \W,
// \p{..} / \P{..} (general categories and their one-letter groups), groups `( )`, `(?: )`, `(?i: )` (case-insensitive
// for the group), alternation, quantifiers `? * + {n} {n,} {n,m}` and their lazy forms, anchors ^ $ \A \z, and
// lookahead (?= ) / (?! ) whose body is one character class or literal character. Anything else fails to compile with a
// message naming it and its offset.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "format/status.h"

namespace tern {

class HfRegex {
 public:
  // Patterns longer than this (bytes) or compiling to more instructions are refused.
  static constexpr size_t kMaxPatternBytes = 64 * 1024;
  static constexpr size_t kMaxInstructions = 1 << 16;

  static Result<std::unique_ptr<HfRegex>> compile(std::string_view pattern);
  ~HfRegex();

  // The leftmost-first match in text starting at or after byte `from` (a character boundary): true with
  // [*begin, *end) set, false when there is none. An empty match is possible; find_all-style callers step past it.
  bool find(std::string_view text, size_t from, size_t* begin, size_t* end) const;

 private:
  HfRegex();
  struct Program;
  std::unique_ptr<Program> program_;
};

}  // namespace tern
