#include "core/planner.h"

#include <algorithm>
#include <utility>

namespace tern {

ArenaPlan place_buffers(const std::vector<BufferUse>& buffers) {
  const size_t nb = buffers.size();
  std::vector<uint64_t> size(nb, 0);
  std::vector<int> order;
  for (size_t b = 0; b < nb; ++b) {
    if (buffers[b].first < 0) continue;
    size[b] = (buffers[b].bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    order.push_back(int(b));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });

  ArenaPlan plan;
  plan.offsets.assign(nb, -1);
  std::vector<int> placed;
  for (int v : order) {
    // Intervals of placed buffers alive at the same time, sorted by offset; take the first gap that fits.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (int p : placed) {
      if (buffers[p].first <= buffers[v].last && buffers[v].first <= buffers[p].last) {
        busy.push_back({uint64_t(plan.offsets[p]), uint64_t(plan.offsets[p]) + size[p]});
      }
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

void value_lifetimes(const Model& model, const std::vector<bool>& run_op, std::vector<int>* first,
                     std::vector<int>* last) {
  const size_t nv = model.values().size();
  first->assign(nv, -1);
  last->assign(nv, -1);
  for (const Node& node : model.nodes()) {
    if (!run_op[node.index]) continue;
    for (int v : node.outputs) (*first)[v] = node.index;
    for (int v : node.inputs) (*last)[v] = std::max((*last)[v], node.index);
  }
}

ArenaPlan plan_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows) {
  const auto& values = model.values();
  std::vector<int> first, last;
  value_lifetimes(model, run_op, &first, &last);
  std::vector<BufferUse> buffers(values.size());
  for (size_t v = 0; v < values.size(); ++v) {
    if (int(v) == model.input_value() || int(v) == model.output_value() || first[v] < 0) continue;
    buffers[v] = {uint64_t(rows) * uint64_t(values[v].width) * dtype_size(values[v].dtype), first[v],
                  std::max(last[v], first[v])};
  }
  return place_buffers(buffers);
}

}  // namespace tern
