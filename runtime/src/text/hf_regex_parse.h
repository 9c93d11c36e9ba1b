// SPDX-License-Identifier: MIT
// Oniguruma's Ruby syntax (the subset hf_regex.h lists) parsed into a tree, which hf_regex_compile.cpp compiles into
// the Pike VM program of hf_regex_program.h. Private to runtime/src/text/.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "text/hf_regex_program.h"

// A namespace of its own: format/model.h has a tern::Node.
namespace tern::hf_regex {

constexpr uint32_t kUnbounded = 0xFFFFFFFF;  // Repeat::max of * + {n,}

struct Node {
  enum Kind { Empty, Char, Class, Any, Concat, Alt, Repeat, Assert } kind = Empty;
  char32_t c = 0;
  uint32_t index = 0;  // Class: class index; Assert: class index of a lookahead
  RegexAssert assert_kind = RegexAssert::BeginText;
  uint32_t min = 0, max = 0;  // Repeat
  bool greedy = true;
  bool dot_all = false;  // Any
  std::vector<std::unique_ptr<Node>> children;
};
using NodePtr = std::unique_ptr<Node>;

// Parses `pattern` into *root; character classes (of [..], escapes, case-insensitive literals and lookaheads) are
// appended to program->classes, which Class and Assert nodes index. Nesting is bounded, so the tree can be walked
// recursively.
Status parse_regex(std::string_view pattern, RegexProgram* program, NodePtr* root);

}  // namespace tern::hf_regex
