// SPDX-License-Identifier: MIT
// tern-convert --weights: which tensors of an imported graph are stored compressed, and in which form
// (schema/tern.fbs, Tensor). A tensor is eligible when every op weight slot that reads it allows compression
// (OpDef::compressible); eligible matrices of at least kMinCompressedElements elements take the chosen format
// (int4 stores token embedding tables, and heads tied to them, as int8), everything else (norms, biases, positions,
// rotations, centroids, small tensors) stays float32 unless an override names it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

enum class WeightFormat { kF32, kF16, kInt8, kInt4 };

// "f32", "f16", "int8", "int4"; false for anything else.
bool parse_weight_format(const std::string& text, WeightFormat* out);
const char* weight_format_name(WeightFormat f);

constexpr int64_t kMinCompressedElements = 1024;
constexpr int64_t kDefaultInt4Group = 32;

// --weight-type PATTERN=FORMAT: tensors whose name matches PATTERN (fnmatch: * ? [..]) take FORMAT, eligible or
// not by size; the last matching override wins.
struct WeightOverride {
  std::string pattern;
  WeightFormat format = WeightFormat::kF32;
};

struct CompressOptions {
  WeightFormat format = WeightFormat::kF32;
  // Inputs per scale for int8 and int4 (a multiple of 32); -1: the format's default (int8 0 = one per output row,
  // int4 32). A matrix whose row length it does not divide uses groups of 32.
  int64_t group = -1;
  std::vector<WeightOverride> overrides;
};

struct CompressReport {
  uint64_t bytes_before = 0, bytes_after = 0;  // every tensor, float32 before
  int64_t compressed = 0;                       // tensors stored in a compressed format
  std::vector<std::string> notes;               // tensors kept in a wider format than asked, and why
};

// Changes the graph's tensor specs in place (fills quantise when the writer calls them) and appends scale tensors.
Status compress_weights(GraphBuilder& graph, const CompressOptions& options, CompressReport* report);

}  // namespace tern::convert
