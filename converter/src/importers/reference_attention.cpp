// SPDX-License-Identifier: MIT
#include "importers/reference_attention.h"

#include <string>

namespace tern::convert {
namespace {

// One attention object {"kind": ..., kind-specific keys} over `heads` heads, its kind one of `kinds`; the table is
// in converter/reference-family.md.
Result<AttentionKind> read_attention_kind(const Config& a, int64_t heads, const std::vector<std::string>& kinds) {
  TERN_ASSIGN_OR_RETURN(std::string kind, a.choice("kind", kinds, std::string("dense")));
  if (kind == "dense") return AttentionKind(fb::DenseT{});
  if (kind == "routing") {
    TERN_ASSIGN_OR_RETURN(const int64_t clusters, a.positive_int("clusters"));
    TERN_ASSIGN_OR_RETURN(const int64_t window, a.positive_int("window"));
    TERN_ASSIGN_OR_RETURN(const int64_t local_heads, a.integer("local_heads", 0, 0));
    if (clusters > (1 << 16)) return a.field_error("clusters", "must be at most 65536, got " + std::to_string(clusters));
    if (window > (1 << 24)) return a.field_error("window", "must be at most 2^24, got " + std::to_string(window));
    if (local_heads >= heads) {
      return a.field_error("local_heads", std::to_string(local_heads) + " leaves no routing head of " +
                                              std::to_string(heads));
    }
    int64_t local_chunk = 1;
    if (local_heads > 0) {
      TERN_ASSIGN_OR_RETURN(local_chunk, a.positive_int("local_chunk"));
      if (local_chunk > (1 << 24)) return a.field_error("local_chunk", "must be at most 2^24");
    }
    fb::RoutingT routing;
    routing.clusters = int32_t(clusters);
    routing.window = int32_t(window);
    routing.local_heads = int32_t(local_heads);
    routing.local_chunk = int32_t(local_chunk);
    return AttentionKind(routing);
  }
  if (kind == "compressive") {
    fb::CompressiveT c;
    TERN_ASSIGN_OR_RETURN(const int64_t mem_len, a.positive_int("mem_len"));
    TERN_ASSIGN_OR_RETURN(const int64_t cmem_len, a.positive_int("cmem_len"));
    TERN_ASSIGN_OR_RETURN(const int64_t rate, a.positive_int("rate"));
    TERN_ASSIGN_OR_RETURN(const std::string how, a.choice("compression", {"conv", "mean", "max"}, std::string("conv")));
    if (mem_len > (1 << 24) || cmem_len > (1 << 24) || rate > (1 << 24))
      return a.field_error("mem_len", "cmem_len and rate must be at most 2^24");
    c.mem_len = int32_t(mem_len);
    c.cmem_len = int32_t(cmem_len);
    c.rate = int32_t(rate);
    c.compression = how == "conv" ? fb::Compression::CONV : how == "mean" ? fb::Compression::MEAN_POOL : fb::Compression::MAX_POOL;
    return AttentionKind(c);
  }
  if (kind == "sliding") {
    TERN_ASSIGN_OR_RETURN(int64_t window, a.positive_int("window"));
    return AttentionKind(fb::SlidingWindowT{{}, int32_t(window)});
  }
  if (kind == "chunked") {
    TERN_ASSIGN_OR_RETURN(int64_t chunk, a.positive_int("chunk"));
    TERN_ASSIGN_OR_RETURN(int64_t before, a.integer("chunks_before", 0, 1));
    TERN_ASSIGN_OR_RETURN(int64_t after, a.integer("chunks_after", 0, 0));
    return AttentionKind(fb::ChunkedLocalT{{}, int32_t(chunk), int32_t(before), int32_t(after)});
  }
  TERN_ASSIGN_OR_RETURN(std::string layout, a.choice("heads", {"merged", "split"}, std::string("merged")));
  const auto split = layout == "split" ? fb::SparseHeads::SPLIT : fb::SparseHeads::MERGED;
  if (split == fb::SparseHeads::SPLIT && heads % 2 != 0)
    return a.field_error("heads", "\"split\" needs an even num_heads, got " + std::to_string(heads));
  if (kind == "strided") {
    TERN_ASSIGN_OR_RETURN(int64_t stride, a.positive_int("stride"));
    return AttentionKind(fb::StridedT{{}, int32_t(stride), split});
  }
  TERN_ASSIGN_OR_RETURN(int64_t block, a.positive_int("block"));
  TERN_ASSIGN_OR_RETURN(int64_t summary, a.positive_int("summary"));
  if (summary > block) return a.field_error("summary", std::to_string(summary) + " exceeds block " + std::to_string(block));
  return AttentionKind(fb::FixedT{{}, int32_t(block), int32_t(summary), split});
}

// The kinds a head group may have: every kind that reads the layer's q, k and v (a compressive layer reads its input).
const std::vector<std::string> kGroupKinds = {"dense", "sliding", "chunked", "strided", "fixed", "routing"};

// {"kind": "groups", "groups": [{"num_heads": h_g, "kind": ..., ...}, ...]}: the layer's heads in order, h_g each.
Result<LayerAttention> read_groups(const Config& layer, int64_t heads) {
  const nlohmann::json* groups = layer.get("groups");
  if (!groups || !groups->is_array() || groups->empty())
    return layer.field_error("groups", "must be a non-empty list of head groups, got " +
                                           (groups ? Config::show(*groups) : std::string("nothing")));
  LayerAttention out;
  out.grouped = true;
  int64_t total = 0;
  for (size_t g = 0; g < groups->size(); ++g) {
    const nlohmann::json& entry = (*groups)[g];
    const std::string at = "groups[" + std::to_string(g) + "]";
    if (!entry.is_object()) return layer.field_error(at, "must be an object, got " + Config::show(entry));
    const Config group(entry, "config.json", layer.prefix() + at + ".");
    TERN_ASSIGN_OR_RETURN(const int64_t group_heads, group.positive_int("num_heads"));
    if (total + group_heads > heads)
      return layer.field_error("groups", "have more heads than num_heads (" + std::to_string(heads) + ")");
    TERN_ASSIGN_OR_RETURN(AttentionKind kind, read_attention_kind(group, group_heads, kGroupKinds));
    out.groups.push_back({group_heads, std::move(kind)});
    total += group_heads;
  }
  if (total != heads)
    return layer.field_error("groups", "have " + std::to_string(total) + " heads in all, but num_heads is " +
                                           std::to_string(heads));
  return out;
}

}  // namespace

Result<std::vector<LayerAttention>> read_attention(const Config& config, int64_t layers, int64_t heads) {
  std::vector<LayerAttention> out(size_t(layers), LayerAttention{false, {{heads, fb::DenseT{}}}});
  const nlohmann::json* attention = config.get("attention");
  if (!attention) return out;
  if (attention->is_array() && int64_t(attention->size()) != layers)
    return config.field_error("attention", "lists " + std::to_string(attention->size()) + " layers, but num_layers is " +
                                               std::to_string(layers));
  if (!attention->is_array() && !attention->is_object())
    return config.field_error("attention", "must be an object or a list of num_layers objects, got " +
                                               Config::show(*attention));
  const std::vector<std::string> single = {"dense", "sliding", "chunked", "strided", "fixed", "compressive", "routing"};
  std::vector<std::string> any = single;
  any.push_back("groups");
  for (int64_t i = 0; i < layers; ++i) {
    const bool per_layer = attention->is_array();
    const nlohmann::json& entry = per_layer ? (*attention)[size_t(i)] : *attention;
    const std::string prefix = per_layer ? "attention[" + std::to_string(i) + "]." : "attention.";
    if (!entry.is_object())
      return config.error("field '" + prefix.substr(0, prefix.size() - 1) + "' must be an object, got " +
                          Config::show(entry));
    const Config layer(entry, "config.json", prefix);
    TERN_ASSIGN_OR_RETURN(const std::string kind, layer.choice("kind", any, std::string("dense")));
    if (kind == "groups") {
      TERN_ASSIGN_OR_RETURN(out[size_t(i)], read_groups(layer, heads));
    } else {
      TERN_ASSIGN_OR_RETURN(out[size_t(i)].groups[0].kind, read_attention_kind(layer, heads, single));
    }
  }
  return out;
}

}  // namespace tern::convert
