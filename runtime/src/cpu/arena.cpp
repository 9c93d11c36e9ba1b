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
  const size_t nv = values.size();
  std::vector<int> first, last;
  value_lifetimes(model, run_op, &first, &last);
  auto bytes = [&](int v, int64_t r) { return uint64_t(r) * uint64_t(values[v].width) * dtype_size(values[v].dtype); };
  auto in_arena = [&](int v) { return v != model.input_value() && v != model.output_value() && first[v] >= 0; };
  std::vector<RowChain> chosen;
  std::vector<int8_t> role(nv, 0);  // for the chain being judged: 1 blocked, 2 full, 3 full in an input's place
  for (const RowChain& chain : candidates) {
    if (rows <= chain.block_rows) continue;
    for (int v : chain.blocked) role[v] = 1;
    for (int v : chain.full) role[v] = 2;
    for (auto [x, y] : chain.in_place) role[y] = 3;
    // The most bytes alive at any op of the chain, run in one pass and run in blocks. Values the chain does not
    // touch count the same in both; the rest of the model is not affected, so the chain is judged on its own.
    uint64_t whole = 0, blocked = 0;
    for (int k = chain.first_op; k <= chain.last_op; ++k) {
      if (!run_op[k]) continue;
      uint64_t w = 0, b = 0;
      for (size_t v = 0; v < nv; ++v) {
        if (!in_arena(int(v))) continue;
        const bool live = first[v] <= k && k <= std::max(last[v], first[v]);
        if (live) w += bytes(int(v), rows);
        if (role[v] == 2) {
          b += bytes(int(v), rows);  // alive across the whole chain
        } else if (role[v] == 3) {
          continue;  // counted with its host
        } else if (live) {
          b += bytes(int(v), role[v] == 1 ? std::min(rows, chain.block_rows) : rows);
        }
      }
      whole = std::max(whole, w);
      blocked = std::max(blocked, b);
    }
    for (int v : chain.blocked) role[v] = 0;
    for (int v : chain.full) role[v] = 0;
    if (blocked < whole) chosen.push_back(chain);
  }
  return chosen;
}

}  // namespace tern
