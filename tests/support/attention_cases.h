// SPDX-License-Identifier: MIT
// The attention pattern kinds (dense, sliding, chunked, strided, fixed), and a one-op model around them: ids ->
// EMBEDDING (random qkv rows) -> ATTENTION, with the reference kernel's output. Shared by the op case table, the
// attention tests and the Vulkan backend's own tests.
#pragma once

#include <string>
#include <vector>

#include "graph_builder.h"
#include "ops/attention_pattern.h"
#include "tern/tern.h"

namespace tern::test {

struct AttentionKind {
  std::string name;
  AttentionPattern pattern;           // heads filled in by the test
  convert::AttentionKind fb;  // the same kind as the converter writes it
};

// Dense, sliding window (w 1, 5, 40), chunked local and strided / fixed with merged and split heads, at sizes a
// software Vulkan device runs quickly. Index 0 is dense, index 2 sliding w = 5.
std::vector<AttentionKind> backend_attention_kinds();
// Every pattern at the CPU kernel's test sizes: dense, sliding window (w 1, 5, 64), chunked local, strided (l 1, 4, 7)
// and fixed (l 8 c 2, l 5 c 5, l 16 c 1), with merged and split heads.
std::vector<AttentionKind> pattern_attention_kinds();

struct AttentionModel {
  tern_model* model = nullptr;
  std::vector<int32_t> ids;
  std::vector<float> want;  // [n, heads * dh] from the reference kernel
};

// The model for `kind` (scale 0.4, 64 random qkv rows) and the reference output for n random tokens.
AttentionModel attention_model(const AttentionKind& kind, int heads, int dh, int64_t n, const std::string& name);

}  // namespace tern::test
