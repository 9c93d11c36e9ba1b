#include "core/planner.h"

#include <algorithm>
#include <numeric>

namespace tern {

ArenaPlan plan_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                     const std::vector<RowChain>& chains) {
  const auto& values = model.values();
  const auto& nodes = model.nodes();
  const size_t nv = values.size();
  std::vector<int> first(nv, -1), last(nv, -1);
  for (const Node& node : nodes) {
    if (!run_op[node.index]) continue;
    for (int v : node.outputs) first[v] = node.index;
    for (int v : node.inputs) last[v] = std::max(last[v], node.index);
  }
  std::vector<int64_t> value_rows(nv, rows);
  for (const RowChain& chain : chains) {
    if (rows <= chain.block_rows) continue;  // one block: the chain's ops run one after another, as without it
    for (int v : chain.blocked) value_rows[v] = std::min(rows, chain.block_rows);
    for (int v : chain.full) {
      if (first[v] >= chain.first_op) first[v] = chain.first_op;
      last[v] = std::max(last[v], chain.last_op);
    }
  }
  std::vector<uint64_t> size(nv, 0);
  std::vector<int> order;
  for (size_t v = 0; v < nv; ++v) {
    if (int(v) == model.input_value() || int(v) == model.output_value() || first[v] < 0) continue;
    if (last[v] < first[v]) last[v] = first[v];  // written but never read: still needs a place
    uint64_t bytes = uint64_t(value_rows[v]) * uint64_t(values[v].width) * dtype_size(values[v].dtype);
    size[v] = (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    order.push_back(int(v));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });

  ArenaPlan plan;
  plan.offsets.assign(nv, -1);
  std::vector<int> placed;
  for (int v : order) {
    // Intervals of placed values alive at the same time, sorted by offset; take the first gap that fits.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (int p : placed) {
      if (first[p] <= last[v] && first[v] <= last[p]) busy.push_back({uint64_t(plan.offsets[p]), uint64_t(plan.offsets[p]) + size[p]});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size[v] <= b) break;
      offset = std::max(offset, e);
    }
    plan.offsets[v] = int64_t(offset);
    plan.bytes = std::max(plan.bytes, offset + size[v]);
    placed.push_back(v);
  }
  return plan;
}

std::vector<RowChain> choose_row_chains(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                                        const std::vector<RowChain>& candidates) {
  std::vector<RowChain> chosen;
  uint64_t best = plan_arena(model, run_op, rows, chosen).bytes;
  for (const RowChain& chain : candidates) {
    if (rows <= chain.block_rows) continue;
    chosen.push_back(chain);
    const uint64_t bytes = plan_arena(model, run_op, rows, chosen).bytes;
    if (bytes < best) {
      best = bytes;
    } else {
      chosen.pop_back();
    }
  }
  return chosen;
}

}  // namespace tern
