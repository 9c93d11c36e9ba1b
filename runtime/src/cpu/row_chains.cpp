// SPDX-License-Identifier: MIT
#include "cpu/row_chains.h"

#include <algorithm>

#include "ops/op.h"

namespace tern {

std::vector<RowChain> find_row_chains(const Model& model, const std::vector<bool>& run_op, int64_t block_rows,
                                      const std::vector<ValueAlias>& aliases) {
  const auto& nodes = model.nodes();
  const auto& values = model.values();
  const int n_ops = int(nodes.size());
  std::vector<int> last_reader(values.size(), -1);  // per value: the last op run that reads it
  for (const Node& node : nodes) {
    if (!run_op[node.index]) continue;
    for (int v : node.inputs) last_reader[v] = std::max(last_reader[v], node.index);
  }
  for (const ValueAlias& a : aliases) last_reader[a.host] = std::max(last_reader[a.host], a.writer);
  // Row-wise ops, and ops whose kernel gives the same rows when a call is split into appends (causal attention
  // over its KV cache or ring): block b of the chain then sees blocks < b through that op's state.
  auto row_wise = [&](int i) {
    const Streaming s = find_op(nodes[i].code)->streaming(nodes[i]);
    return s == Streaming::kRowWise || s == Streaming::kAppends;
  };

  std::vector<RowChain> chains;
  std::vector<bool> seen(values.size(), false);
  int i = 0;
  while (i < n_ops) {
    if (!run_op[i] || !row_wise(i)) {
      ++i;
      continue;
    }
    RowChain chain;
    chain.first_op = chain.last_op = i;
    int j = i + 1;
    for (; j < n_ops; ++j) {
      if (!run_op[j]) continue;
      if (!row_wise(j)) break;
      chain.last_op = j;
    }
    std::vector<int> touched;
    for (int k = chain.first_op; k <= chain.last_op; ++k) {
      if (!run_op[k]) continue;
      for (const auto* list : {&nodes[k].inputs, &nodes[k].outputs}) {
        for (int v : *list) {
          if (!seen[v]) touched.push_back(v);
          seen[v] = true;
        }
      }
    }
    uint64_t blocked_row_bytes = 0;
    for (int v : touched) {
      seen[v] = false;
      const int producer = values[v].producer;
      const bool made_inside = producer >= chain.first_op && producer <= chain.last_op;
      const bool read_inside_only = last_reader[v] <= chain.last_op;
      if (made_inside && read_inside_only && v != model.input_value() && v != model.output_value()) {
        chain.blocked.push_back(v);
        blocked_row_bytes += uint64_t(values[v].width) * dtype_size(values[v].dtype);
      } else {
        chain.full.push_back(v);
      }
    }
    // Outputs that can take the rows of an input read for the last time at or before the op writing them.
    std::vector<bool> hosting(chain.full.size(), false);
    for (int y : chain.full) {
      const int p = values[y].producer;
      if (p < chain.first_op || y == model.output_value()) continue;
      const bool elementwise = find_op(nodes[p].code)->elementwise;
      for (size_t h = 0; h < chain.full.size(); ++h) {
        const int x = chain.full[h];
        if (hosting[h] || x == model.input_value() || x == model.output_value() || values[x].producer >= chain.first_op ||
            values[x].width != values[y].width || values[x].dtype != values[y].dtype) {
          continue;
        }
        if (last_reader[x] < p || (last_reader[x] == p && elementwise)) {
          hosting[h] = true;
          chain.in_place.push_back({x, y});
          break;
        }
      }
    }
    if (!chain.blocked.empty()) {
      chain.block_rows = kMaxBlockRows;
      while (chain.block_rows > kMinBlockRows && uint64_t(chain.block_rows) * blocked_row_bytes > kRowBlockBytes) {
        chain.block_rows /= 2;
      }
      if (block_rows > 0) chain.block_rows = block_rows;
      chains.push_back(std::move(chain));
    }
    i = j;
  }
  return chains;
}

}  // namespace tern
