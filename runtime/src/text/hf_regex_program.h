// SPDX-License-Identifier: MIT
// The compiled form of an HfRegex (hf_regex.h): a Pike VM program and its character classes. Private to
// runtime/src/text/: hf_regex_parse.cpp and hf_regex_compile.cpp write it, hf_regex.cpp runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "format/status.h"
#include "text/hf_regex.h"
#include "text/unicode.h"

namespace tern {

// A set of code points: the union of sorted ranges, whole general categories, White_Space, and the complements of
// the latter two (\S, \P{..} inside a class), all complemented once more for [^...]. The ASCII answers are
// precomputed, and contains() takes the category and White_Space of its character, looked up once per step.
struct RegexClass {
  std::vector<std::pair<char32_t, char32_t>> ranges;  // [first, last], sorted, disjoint
  uint32_t categories = 0;                             // bit k: unicode::Category k is in
  // With has_categories_not, every code point whose category's bit is clear is in: the complements of \P{..} \D \W
  // items, united, are the complement of their intersection.
  bool has_categories_not = false;
  uint32_t categories_not = 0;
  bool white_space = false;
  bool white_space_not = false;
  bool negated = false;
  uint64_t ascii[2] = {0, 0};  // the answer for U+0000..U+007F

  bool contains_slow(char32_t c, unicode::Category k, bool ws) const;
  bool contains(char32_t c, unicode::Category k, bool ws) const {
    if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
    return contains_slow(c, k, ws);
  }
  void exclude_categories(uint32_t bits) {
    categories_not = has_categories_not ? categories_not & bits : bits;
    has_categories_not = true;
  }
  void finish();  // merges ranges and fills ascii; after every change
};

enum class RegexOp : uint8_t {
  Char,    // x: the code point
  Class,   // x: index into classes
  Any,     // x: 1 when it matches \n too
  Split,   // x first (the preferred path), y second
  Jmp,     // x
  Assert,  // x: RegexAssert, y: a lookahead's class index
  Match,
};

enum class RegexAssert : uint32_t {
  BeginText,   // \A
  EndText,     // \z
  EndTextOrFinalNewline,  // \Z
  BeginLine,   // ^ (Ruby: always multi-line)
  EndLine,     // $
  LookAhead,   // (?=C): the next character is in class y
  NegLookAhead,  // (?!C): there is no next character, or it is not in class y
};

struct RegexInst {
  RegexOp op;
  uint32_t x = 0;
  uint32_t y = 0;
};

// HfRegex::Program (hf_regex.cpp) is this.
struct RegexProgram {
  std::vector<RegexInst> code;  // starts at 0
  std::vector<RegexClass> classes;
  // Epsilon closures: closure[closure_begin[pc] .. closure_begin[pc + 1]) lists, in priority order, the Char, Class,
  // Any, Match and Assert instructions that pc reaches through Split and Jmp. Both empty when the table would pass
  // kMaxClosureEntries (a pattern of many nested optional parts): the VM then follows Split and Jmp one by one.
  static constexpr size_t kMaxClosureEntries = size_t(1) << 20;
  std::vector<uint32_t> closure_begin;
  std::vector<uint32_t> closure;
  // The closure of pc 0 less the instructions that do not accept ASCII character c: start[start_begin[c] ..
  // start_begin[c + 1]) (Assert and Match kept). Empty without closures.
  std::vector<uint32_t> start_begin;
  std::vector<uint32_t> start;
};

// Parses and compiles `pattern` (the limits of HfRegex checked).
Status compile_regex(std::string_view pattern, RegexProgram* program);

}  // namespace tern
