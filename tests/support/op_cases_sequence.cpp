// SPDX-License-Identifier: MIT
// Cases for the kinds whose first call runs whole, Reformer LSH and routing attention: one forward call per run
// (continuing a sequence: test_reformer.cpp, test_routing.cpp), several lengths through one session. Device sizes run on every backend; the
// CPU sizes (up to 333 tokens, one and two threads) only on the CPU.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <string>

#include "kind_graphs.h"
#include "op_cases.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

namespace tern::test {
namespace {

std::string list(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

std::string lsh_name(const LshCase& c) {
  const auto& k = c.kind;
  return "lsh chunk=" + std::to_string(k.chunk) + " before=" + std::to_string(k.chunks_before) + " after=" +
         std::to_string(k.chunks_after) + " hashes=" + std::to_string(k.hashes) + " buckets=" + list(k.buckets) +
         " pad_to=" + std::to_string(k.pad_to) + " pad_above=" + std::to_string(k.pad_above) + " heads " +
         std::to_string(c.heads) + "x" + std::to_string(c.dh);
}

// One forward per length through one session of max_tokens `max_tokens`, scale 1 / sqrt(dh).
BuiltCase lsh_case(const LshCase& c, int64_t rows, uint32_t seed, const std::vector<int64_t>& lengths,
                   int64_t max_tokens, uint32_t ids_seed) {
  const int64_t inner = int64_t(c.heads) * c.dh;
  const float scale = 1.0f / std::sqrt(float(c.dh));
  LshGraph lg = build_lsh_graph(c, rows, scale, seed);
  BuiltCase b{finish_and_load(lg.g, lg.y, "lsh", 0), inner, {}};
  const LshAttention spec = lsh_spec(c, scale, lg.rotations);
  CaseSession s;
  s.max_tokens = max_tokens;
  for (int64_t n : lengths) {
    CaseRun run{random_ids(n, rows, uint32_t(ids_seed + n)), 0, std::vector<float>(size_t(n * inner))};
    std::vector<float> qkv(size_t(n * 2 * inner));
    ref::embedding(lg.g.table.data(), 2 * inner, run.ids.data(), n, qkv.data());
    ref::lsh_attention(qkv.data(), n, spec, run.want.data());
    s.runs.push_back(std::move(run));
  }
  b.sessions.push_back(std::move(s));
  return b;
}

void add_lsh(std::vector<OpCase>& out) {
  // Device sizes: unchunked and padded lengths, several rounds, factorised buckets with chunks after, one round at
  // dh 12, a window of 5 chunks over as few as 2 (chunks repeat), many rounds wrapping around the sorted axis.
  const std::vector<LshCase> device = {
      {2, 16, lsh_kind(16, 1, 0, 3, {8}, 32, 16)},  {3, 8, lsh_kind(8, 2, 1, 2, {4, 6}, 24, 8)},
      {1, 12, lsh_kind(10, 1, 0, 1, {16}, 10, 10)}, {2, 8, lsh_kind(8, 3, 1, 1, {4}, 8, 8)},
      {2, 16, lsh_kind(16, 2, 0, 8, {2, 4}, 16, 8)},
  };
  const std::vector<std::vector<int64_t>> device_lengths = {{7, 16, 17, 100}, {8, 9, 61}, {33}, {16, 40}, {40}};
  for (size_t i = 0; i < device.size(); ++i) {
    OpCase c;
    c.name = lsh_name(device[i]) + " rows=97";
    c.group = "lsh";
    c.tags = "[attention][lsh]";
    c.cpu_threads = {2};
    c.build = [lc = device[i], lengths = device_lengths[i], i] {
      const int64_t most = *std::max_element(lengths.begin(), lengths.end());
      return lsh_case(lc, 97, uint32_t(300 + 10 * i), lengths, most, uint32_t(320 + i));
    };
    out.push_back(c);
  }
  // CPU sizes: also three bucket factors with many rounds, and lengths from 1 (unchunked) through one chunk plus one
  // token to 333 (padded), over 211 rows.
  const std::vector<LshCase> cpu = {
      {2, 16, lsh_kind(16, 1, 0, 3, {8}, 32, 16)},      {3, 8, lsh_kind(8, 2, 1, 2, {4, 6}, 24, 8)},
      {1, 12, lsh_kind(10, 1, 0, 1, {16}, 10, 10)},     {2, 16, lsh_kind(32, 1, 0, 4, {2, 2, 4}, 64, 16)},
      {2, 8, lsh_kind(8, 3, 1, 1, {4}, 8, 8)},
  };
  for (size_t i = 0; i < cpu.size(); ++i) {
    OpCase c;
    c.name = lsh_name(cpu[i]) + " rows=211";
    c.group = "lsh";
    c.tags = "[attention][lsh]";
    c.on = On::kCpuOnly;
    c.build = [lc = cpu[i], i] {
      const int64_t chunk = lc.kind.chunk;
      return lsh_case(lc, 211, uint32_t(70 + i), {1, 7, chunk, chunk + 1, 100, 192, 333}, 400, uint32_t(80 + i));
    };
    out.push_back(c);
  }
}

std::string routing_name(const RoutingCase& c) {
  const auto& k = c.kind;
  return "routing clusters=" + std::to_string(k.clusters) + " window=" + std::to_string(k.window) + " local_heads=" +
         std::to_string(k.local_heads) + " local_chunk=" + std::to_string(k.local_chunk) + " heads " +
         std::to_string(c.heads) + "x" + std::to_string(c.dh) +
         (c.kv_heads > 0 ? " kv " + std::to_string(c.kv_heads) : "");
}

// Rows of ids through the case's embedding table, and the reference over them.
std::vector<float> routing_reference(const RoutingGraph& rg, const RoutingCase& c, const RoutingAttention& spec,
                                     const std::vector<int32_t>& ids, int64_t n) {
  std::vector<float> qkv(size_t(n * c.row())), out(size_t(n * c.heads * c.dh));
  ref::embedding(rg.g.table.data(), c.row(), ids.data(), n, qkv.data());
  ref::routing_attention(qkv.data(), n, spec, out.data());
  return out;
}

// A CPU session that continues the sequence (ops/routing.h, "Continuing a sequence"): a first call of `segment`
// positions, then each later position t one step, whose row is row t of the reference over positions 0..t. The
// cache is per query head whatever kv_heads: each local head's ring of min(2 * local_chunk, max_tokens) keys and
// values, and per routing head and cluster min(window, max_tokens) slots of a key position, key score, key, value and
// query score.
CaseSession routing_continuation(const RoutingGraph& rg, const RoutingCase& c, const RoutingAttention& spec,
                                 const std::vector<int32_t>& ids, const std::vector<int64_t>& segments) {
  const int64_t n = int64_t(ids.size()), inner = int64_t(c.heads) * c.dh;
  std::vector<std::vector<float>> prefix_rows(static_cast<size_t>(n));  // row t of the reference over 0..t
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> out = routing_reference(rg, c, spec, ids, t + 1);
    prefix_rows[size_t(t)].assign(out.begin() + t * inner, out.end());
  }
  CaseSession s;
  s.max_tokens = n;
  s.on = On::kCpuOnly;
  for (int64_t segment : segments) {
    CaseRun run{ids, segment, routing_reference(rg, c, spec, ids, std::min(n, segment))};
    run.want.resize(size_t(n * inner));
    for (int64_t t = segment; t < n; ++t) {
      std::copy(prefix_rows[size_t(t)].begin(), prefix_rows[size_t(t)].end(), run.want.begin() + t * inner);
    }
    s.runs.push_back(std::move(run));
  }
  const auto& k = c.kind;
  const uint64_t ring = k.local_heads > 0 ? uint64_t(std::min<int64_t>(2 * int64_t(k.local_chunk), n)) : 0;
  const uint64_t slots = uint64_t(std::min<int64_t>(k.window, n));
  s.state_bytes = 4 * (uint64_t(k.local_heads) * ring * 2 * uint64_t(c.dh) +
                       uint64_t(c.heads - k.local_heads) * uint64_t(k.clusters) * slots * (2 * uint64_t(c.dh) + 3));
  return s;
}

// One forward per length through one session (max_tokens, max_batch); ids of length n drawn with seed ids_seed(n).
// With grouped key/value heads also a CPU session continuing a sequence of 40 (routing_continuation).
template <typename IdsSeed>
BuiltCase routing_case(const RoutingCase& c, int64_t rows, float scale, uint32_t seed, const std::vector<int64_t>& lengths,
                       int64_t max_tokens, int64_t max_batch, IdsSeed ids_seed) {
  const int64_t inner = int64_t(c.heads) * c.dh;
  RoutingGraph rg = build_routing_graph(c, rows, scale, seed);
  BuiltCase b{finish_and_load(rg.g, rg.y, "routing", 0), inner, {}};
  const RoutingAttention spec = routing_spec(c, scale, rg.centroids);
  CaseSession s;
  s.max_tokens = max_tokens;
  s.max_batch = max_batch;
  s.forward_only = true;  // Vulkan runs routing on whole sequences only
  for (int64_t n : lengths) {
    const std::vector<int32_t> ids = random_ids(n, rows, ids_seed(n));
    s.runs.push_back({ids, 0, routing_reference(rg, c, spec, ids, n)});
  }
  b.sessions.push_back(std::move(s));
  if (c.kv_heads > 0) {
    b.sessions.push_back(routing_continuation(rg, c, spec, random_ids(40, rows, ids_seed(40) + 1), {1, 13, 40}));
  }
  return b;
}

void add_routing(std::vector<OpCase>& out) {
  // Device sizes, scale 0.35: routing heads only (clusters overlap and leave positions out), one local head with
  // chunks of 7, a window longer than the sequence, three distinct rows (scores tie: the lower position wins), wide
  // heads. Each forward is a first call (the cache a later call continues from: test_routing_generation.cpp).
  struct Device {
    RoutingCase c;
    int64_t rows;
  };
  // Grouped key/value heads: 2 of 4 with a local head (which shares its key/value head with a routing head), and one
  // for all three routing heads.
  const std::vector<Device> device = {{{2, 8, {{}, 3, 8, 0, 1}}, 64},    {{4, 16, {{}, 5, 24, 1, 7}}, 64},
                                      {{3, 8, {{}, 2, 100, 2, 16}}, 64}, {{2, 8, {{}, 4, 9, 0, 1}}, 3},
                                      {{2, 64, {{}, 2, 40, 1, 32}}, 64}, {{4, 16, {{}, 5, 24, 1, 7}, 2}, 64},
                                      {{3, 8, {{}, 3, 8, 0, 1}, 1}, 64}};
  for (size_t i = 0; i < device.size(); ++i) {
    OpCase c;
    c.name = routing_name(device[i].c) + " rows=" + std::to_string(device[i].rows);
    c.group = "routing";
    c.tags = "[attention][routing]";
    c.cpu_threads = {2};
    c.build = [d = device[i], i] {
      return routing_case(d.c, d.rows, 0.35f, uint32_t(50 + i), {70, 17, 1, 300}, 300, 300,
                          [i](int64_t n) { return uint32_t(7 * n + int64_t(i)); });
    };
    out.push_back(c);
  }
  // CPU sizes, scale 1 / sqrt(dh), 97 rows (fewer than tokens: repeated rows score alike, ties go by position):
  // routing heads only, one local head with chunks of 16, a window longer than every length, one small cluster.
  const std::vector<RoutingCase> cpu = {{4, 16, {{}, 5, 24, 0, 1}},   {3, 8, {{}, 7, 40, 1, 16}},
                                        {2, 12, {{}, 3, 500, 1, 10}}, {2, 16, {{}, 1, 8, 0, 1}},
                                        {6, 8, {{}, 4, 24, 2, 16}, 3},  {4, 16, {{}, 5, 24, 0, 1}, 1}};
  for (size_t i = 0; i < cpu.size(); ++i) {
    OpCase c;
    c.name = routing_name(cpu[i]) + " rows=97";
    c.group = "routing";
    c.tags = "[attention][routing]";
    c.on = On::kCpuOnly;
    c.build = [rc = cpu[i], i] {
      return routing_case(rc, 97, 1.0f / std::sqrt(float(rc.dh)), uint32_t(40 + i), {1, 7, 40, 100, 333}, 400, 0,
                          [i](int64_t n) { return uint32_t(50 + int64_t(i) + n); });
    };
    out.push_back(c);
  }
}

}  // namespace

void add_sequence_cases(std::vector<OpCase>& out) {
  add_lsh(out);
  add_routing(out);
}

}  // namespace tern::test
