// SPDX-License-Identifier: MIT
// The reference family's per-layer attention objects (converter/reference-family.md, "Attention objects").
#pragma once

#include <cstdint>
#include <vector>

#include "config.h"
#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

// Consecutive heads of one layer that share an attention kind.
struct HeadGroup {
  int64_t heads = 0;
  AttentionKind kind;
};

// One layer's attention: a single group of every head, or (a "groups" object) its head groups in head order.
struct LayerAttention {
  bool grouped = false;  // written as {"kind": "groups", ...}: each group gets its own qkv projection and op
  std::vector<HeadGroup> groups;
};

// Per-layer attention: the config's "attention" (one object for all layers, or a list of num_layers objects);
// dense when absent.
Result<std::vector<LayerAttention>> read_attention(const Config& config, int64_t layers, int64_t heads);

}  // namespace tern::convert
