// SPDX-License-Identifier: MIT
#include "op_cases.h"

#include <set>

namespace tern::test {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> out;
    add_basic_cases(out);
    add_attention_cases(out);
    add_sequence_cases(out);
    add_memory_cases(out);
    add_decoder_cases(out);
    add_linear_cases(out);
    return out;
  }();
  return cases;
}

}  // namespace tern::test
