// SPDX-License-Identifier: MIT
#include "core/planner.h"

#include <algorithm>
#include <utility>

namespace tern {

namespace {

// The placed buffers, indexed by lifetime: a segment tree over op indices [0, span) in which a buffer is listed at
// the O(log span) nodes that tile its lifetime. The buffers alive during [first, last] are those listed at a node
// whose range meets it; `below` counts the listings under each node, so empty subtrees are skipped and a query costs
// O(log span) per buffer it finds, not a scan of every buffer placed before (a model of 100k chained ops).
class PlacedByLifetime {
 public:
  explicit PlacedByLifetime(int span) : leaves_(1) {
    while (leaves_ < span) leaves_ *= 2;
    listed_.resize(size_t(2) * size_t(leaves_));
    below_.assign(size_t(2) * size_t(leaves_), 0);
  }

  void add(int buffer, int first, int last) {
    for (int lo = first + leaves_, hi = last + 1 + leaves_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) list(lo++, buffer);
      if (hi & 1) list(--hi, buffer);
    }
  }

  // Calls visit(buffer) for each placed buffer alive at some op in [first, last], once each (stamp: per buffer, the
  // query that last reported it).
  template <typename Visit>
  void alive_during(int first, int last, std::vector<int>* stamp, int query, Visit&& visit) const {
    visit_node(1, 0, leaves_ - 1, first, last, stamp, query, visit);
  }

 private:
  void list(int node, int buffer) {
    listed_[size_t(node)].push_back(buffer);
    for (int n = node; n >= 1; n /= 2) ++below_[size_t(n)];
  }

  template <typename Visit>
  void visit_node(int node, int lo, int hi, int first, int last, std::vector<int>* stamp, int query, Visit& visit) const {
    if (below_[size_t(node)] == 0 || hi < first || last < lo) return;
    for (int b : listed_[size_t(node)]) {
      if ((*stamp)[size_t(b)] == query) continue;
      (*stamp)[size_t(b)] = query;
      visit(b);
    }
    if (lo == hi) return;
    const int mid = lo + (hi - lo) / 2;
    visit_node(2 * node, lo, mid, first, last, stamp, query, visit);
    visit_node(2 * node + 1, mid + 1, hi, first, last, stamp, query, visit);
  }

  int leaves_;
  std::vector<std::vector<int>> listed_;  // per node: buffers whose lifetime covers the node's whole range
  std::vector<int> below_;                // per node: listings in its subtree, itself included
};

}  // namespace

ArenaPlan place_buffers(const std::vector<BufferUse>& buffers) {
  const size_t nb = buffers.size();
  std::vector<uint64_t> size(nb, 0);
  std::vector<int> order;
  int span = 1;
  for (size_t b = 0; b < nb; ++b) {
    if (buffers[b].first < 0) continue;
    size[b] = (buffers[b].bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    order.push_back(int(b));
    span = std::max(span, std::max(buffers[b].first, buffers[b].last) + 1);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });

  ArenaPlan plan;
  plan.offsets.assign(nb, -1);
  PlacedByLifetime placed(span);
  std::vector<int> stamp(nb, -1);
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (int v : order) {
    const int first = buffers[v].first, last = std::max(buffers[v].first, buffers[v].last);
    // Intervals of placed buffers alive at the same time, sorted by offset; take the first gap that fits.
    busy.clear();
    placed.alive_during(first, last, &stamp, v, [&](int p) {
      busy.push_back({uint64_t(plan.offsets[p]), uint64_t(plan.offsets[p]) + size[p]});
    });
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size[v] <= b) break;
      offset = std::max(offset, e);
    }
    plan.offsets[v] = int64_t(offset);
    plan.bytes = std::max(plan.bytes, offset + size[v]);
    placed.add(v, first, last);
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

ArenaPlan place_values(const Model& model, const std::vector<int>& first, const std::vector<int>& last, int64_t rows) {
  const auto& values = model.values();
  std::vector<BufferUse> buffers(values.size());
  for (size_t v = 0; v < values.size(); ++v) {
    if (int(v) == model.input_value() || int(v) == model.output_value() || first[v] < 0) continue;
    buffers[v] = {uint64_t(rows) * uint64_t(values[v].width) * dtype_size(values[v].dtype), first[v],
                  std::max(last[v], first[v])};
  }
  return place_buffers(buffers);
}

ArenaPlan plan_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows) {
  std::vector<int> first, last;
  value_lifetimes(model, run_op, &first, &last);
  return place_values(model, first, last, rows);
}

}  // namespace tern
