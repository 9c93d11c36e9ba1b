// SPDX-License-Identifier: MIT
#include "cpu/half_values.h"

#include <algorithm>
#include <numeric>

namespace tern {

std::vector<bool> pick_half_values(const Model& model, const std::vector<bool>& run, const std::vector<RowChain>& chains,
                                   const std::vector<ValueAlias>& aliases) {
  const auto& values = model.values();
  const auto& nodes = model.nodes();
  const size_t nv = values.size();
  std::vector<bool> half(nv, false), in_chain(nodes.size(), false);
  for (const RowChain& chain : chains) {
    for (int i = chain.first_op; i <= chain.last_op; ++i) in_chain[size_t(i)] = true;
    for (int v : chain.full) {
      half[size_t(v)] =
          v != model.input_value() && v != model.output_value() && values[size_t(v)].dtype == fb::DType::F32;
    }
  }
  for (const Node& node : nodes) {
    if (!run[size_t(node.index)] || in_chain[size_t(node.index)]) continue;
    for (const auto* list : {&node.inputs, &node.outputs}) {
      for (int v : *list) half[size_t(v)] = false;
    }
  }
  // Values sharing a place (a chain's output in its input's rows, an LSH layer's y1 in x1's) are stored alike.
  std::vector<int> root(nv);
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](int v) {
    while (root[size_t(v)] != v) v = root[size_t(v)] = root[size_t(root[size_t(v)])];
    return v;
  };
  std::vector<std::pair<int, int>> shared;
  for (const ValueAlias& a : aliases) shared.push_back({a.host, a.guest});
  for (const RowChain& chain : chains) shared.insert(shared.end(), chain.in_place.begin(), chain.in_place.end());
  for (auto [a, b] : shared) root[size_t(find(a))] = find(b);
  std::vector<bool> group_half(nv, true);
  for (size_t v = 0; v < nv; ++v) {
    if (!half[v]) group_half[size_t(find(int(v)))] = false;
  }
  for (auto [a, b] : shared) half[size_t(a)] = half[size_t(b)] = group_half[size_t(find(a))];
  if (std::find(half.begin(), half.end(), true) == half.end()) half.clear();
  return half;
}

std::vector<std::vector<StagedPlace>> plan_staging(const Model& model, const std::vector<RowChain>& chains,
                                                   const std::vector<bool>& half_values, size_t* floats_needed) {
  const auto& values = model.values();
  std::vector<std::vector<StagedPlace>> staged(chains.size());
  size_t most = 0;
  for (size_t c = 0; c < chains.size() && !half_values.empty(); ++c) {
    const RowChain& chain = chains[c];
    std::vector<StagedPlace>& places = staged[c];
    auto place_of = [&](int v) -> StagedPlace& {
      for (auto [x, y] : chain.in_place) {
        const int partner = v == y ? x : v == x ? y : -1;
        for (StagedPlace& p : places) {
          if (partner >= 0 && std::find(p.values.begin(), p.values.end(), partner) != p.values.end()) return p;
        }
      }
      places.push_back({});
      return places.back();
    };
    for (int v : chain.full) {
      if (!half_values[size_t(v)]) continue;
      StagedPlace& p = place_of(v);
      p.values.push_back(v);
      p.width = values[size_t(v)].width;
      const int producer = values[size_t(v)].producer;
      if (producer < chain.first_op) p.widen_from = v;
      if (producer >= chain.first_op && producer <= chain.last_op) p.narrow_into = v;
    }
    size_t floats = 0;
    for (StagedPlace& p : places) {
      p.staging = floats;
      floats += size_t(chain.block_rows) * size_t(p.width);
    }
    most = std::max(most, floats);
  }
  *floats_needed = most;
  return staged;
}

}  // namespace tern
