// SPDX-License-Identifier: MIT
#include "cpu/arena.h"

#include <algorithm>
#include <numeric>

namespace tern {

ArenaPlan plan_cpu_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                         const std::vector<RowChain>& chains, const std::vector<ValueAlias>& aliases,
                         const std::vector<bool>& half_values) {
  const auto& values = model.values();
  const size_t nv = values.size();
  std::vector<int> first, last;
  value_lifetimes(model, run_op, &first, &last);
  std::vector<int64_t> value_rows(nv, rows);
  std::vector<int> host(nv);  // per value: the value whose place it takes (itself unless a chain runs it in place)
  std::iota(host.begin(), host.end(), 0);
  for (const ValueAlias& a : aliases) {
    first[a.guest] = a.writer;
    last[a.host] = std::max(last[a.host], a.writer);
    host[a.guest] = a.host;
    if (a.unwritten >= 0) first[a.unwritten] = last[a.unwritten] = -1;
  }
  for (const RowChain& chain : chains) {
    if (rows <= chain.block_rows) continue;  // one block: the chain's ops run one after another, as without it
    for (int v : chain.blocked) value_rows[v] = std::min(rows, chain.block_rows);
    for (int v : chain.full) {
      if (first[v] >= chain.first_op) first[v] = chain.first_op;
      last[v] = std::max(last[v], chain.last_op);
    }
    for (auto [x, y] : chain.in_place) host[y] = host[x];
  }
  // Hosts of hosts (an alias's host may itself take another value's place in a chain): each value to the root.
  for (size_t v = 0; v < nv; ++v) {
    int h = host[v];
    while (host[h] != h) h = host[h];
    host[v] = h;
  }
  // A host's place lasts until the last of its guests is dead.
  for (size_t v = 0; v < nv; ++v) {
    if (host[v] == int(v) || first[v] < 0) continue;
    last[host[v]] = std::max(last[host[v]], std::max(last[v], first[v]));
  }
  std::vector<BufferUse> buffers(nv);  // per value; only hosts take a place
  for (size_t v = 0; v < nv; ++v) {
    if (int(v) == model.input_value() || int(v) == model.output_value() || first[v] < 0 || host[v] != int(v)) continue;
    const bool half = !half_values.empty() && half_values[v];
    const uint64_t bytes = uint64_t(value_rows[v]) * uint64_t(values[v].width) * (half ? 2 : dtype_size(values[v].dtype));
    buffers[v] = {bytes, first[v], std::max(last[v], first[v])};  // written but never read: still needs a place
  }
  ArenaPlan plan = place_buffers(buffers);
  for (size_t v = 0; v < nv; ++v) {
    if (host[v] != int(v) && first[v] >= 0) plan.offsets[v] = plan.offsets[host[v]];
  }
  return plan;
}

std::vector<RowChain> choose_row_chains(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                                        const std::vector<RowChain>& candidates) {
  const auto& values = model.values();
  const size_t nv = values.size(), n_ops = model.nodes().size();
  std::vector<int> first, last;
  value_lifetimes(model, run_op, &first, &last);
  auto bytes = [&](int v, int64_t r) { return uint64_t(r) * uint64_t(values[v].width) * dtype_size(values[v].dtype); };
  auto in_arena = [&](int v) { return v != model.input_value() && v != model.output_value() && first[v] >= 0; };
  auto live_end = [&](int v) { return std::max(last[v], first[v]); };  // live at ops [first, live_end]
  // The bytes alive at each op with every value at full rows, from one sweep of the lifetimes (a difference array
  // over ops, so that judging a chain costs its own ops and values, not the whole model's values at each op).
  std::vector<uint64_t> alive(n_ops + 1, 0);
  for (size_t v = 0; v < nv; ++v) {
    if (!in_arena(int(v))) continue;
    alive[size_t(first[v])] += bytes(int(v), rows);
    alive[size_t(live_end(int(v))) + 1] -= bytes(int(v), rows);
  }
  for (size_t k = 1; k <= n_ops; ++k) alive[k] += alive[k - 1];

  std::vector<RowChain> chosen;
  std::vector<int8_t> role(nv, 0);  // for the chain being judged: 1 blocked, 2 full, 3 full in an input's place
  std::vector<uint64_t> change;     // per op of the chain (and one past it): what blocking adds to alive[k]
  for (const RowChain& chain : candidates) {
    if (rows <= chain.block_rows) continue;
    for (int v : chain.blocked) role[v] = 1;
    for (int v : chain.full) role[v] = 2;
    for (auto [x, y] : chain.in_place) role[y] = 3;
    // The most bytes alive at any op of the chain, run in one pass (alive[k]) and run in blocks: a blocked value
    // takes min(rows, block_rows) rows while alive, a full one its rows across the whole chain, one in an input's
    // place nothing of its own (counted with its host). Values the chain does not touch count the same in both.
    // Unsigned sums wrap, but every prefix below is a byte count >= 0.
    const int c0 = chain.first_op, c1 = chain.last_op;
    change.assign(size_t(c1 - c0) + 2, 0);
    auto add_over = [&](int lo, int hi, uint64_t b) {  // adds b at the chain's ops [lo, hi]
      lo = std::max(lo, c0), hi = std::min(hi, c1);
      if (lo > hi) return;
      change[size_t(lo - c0)] += b;
      change[size_t(hi - c0) + 1] -= b;
    };
    auto judge = [&](int v) {
      if (role[v] == 0) return;  // listed twice: judged already
      if (in_arena(v)) {
        const uint64_t full = bytes(v, rows);
        if (role[v] == 1) add_over(first[v], live_end(v), bytes(v, std::min(rows, chain.block_rows)) - full);
        if (role[v] == 2) add_over(c0, c1, full), add_over(first[v], live_end(v), uint64_t(0) - full);
        if (role[v] == 3) add_over(first[v], live_end(v), uint64_t(0) - full);
      }
      role[v] = 0;
    };
    for (int v : chain.blocked) judge(v);
    for (int v : chain.full) judge(v);
    for (auto [x, y] : chain.in_place) judge(y);
    uint64_t whole = 0, blocked = 0, delta = 0;
    for (int k = c0; k <= c1; ++k) {
      delta += change[size_t(k - c0)];
      if (!run_op[k]) continue;
      whole = std::max(whole, alive[size_t(k)]);
      blocked = std::max(blocked, alive[size_t(k)] + delta);
    }
    if (blocked < whole) chosen.push_back(chain);
  }
  return chosen;
}

}  // namespace tern
