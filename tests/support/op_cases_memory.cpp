// SPDX-License-Identifier: MIT
// Cases for the kinds with a memory carried between calls: Transformer-XL relative attention (ops/relative_xl.h) and
// compressive memory (ops/compressive.h), each segment size against the reference streamed with the same cut, the
// state exactly the memory however far planned; and Transformer-XL's adaptive input and adaptive log-softmax
// (ops/adaptive.h) as one model.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <string>
#include <tuple>

#include "op_cases.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

namespace tern::test {
namespace {

// ---- Transformer-XL relative attention: ids -> EMBEDDING (random h rows [n, d]) -> ATTENTION(RelativeXL) ----

struct XlOp {
  int heads = 3, dh = 8;
  int64_t d = 20, mem_len = 24, clamp_len = 0;
  bool same_length = false, pre_norm = false, inv_freq = false;
};

struct XlGraph {
  OpGraph g;
  std::vector<float> qkv, r_net, r_w, r_r, norm_w, norm_b, freq;  // [3*inner, d], [inner, d], [heads, dh] x2, [d] x2, [d/2]
  int32_t y = -1;
};

XlGraph build_xl_graph(const XlOp& op, int64_t rows, uint32_t seed) {
  const int64_t inner = int64_t(op.heads) * op.dh;
  XlGraph x{start_graph(rows, op.d, seed), {}, {}, {}, {}, {}, {}, {}, -1};
  x.qkv = random_floats(size_t(3 * inner * op.d), seed + 1, -0.5f, 0.5f);
  x.r_net = random_floats(size_t(inner * op.d), seed + 2, -0.5f, 0.5f);
  x.r_w = random_floats(size_t(inner), seed + 3);
  x.r_r = random_floats(size_t(inner), seed + 4);
  std::vector<int32_t> w = {add_constant(x.g, "qkv", {3 * inner, op.d}, x.qkv),
                            add_constant(x.g, "r_net", {inner, op.d}, x.r_net),
                            add_constant(x.g, "r_w_bias", {op.heads, op.dh}, x.r_w),
                            add_constant(x.g, "r_r_bias", {op.heads, op.dh}, x.r_r), -1, -1, -1};
  if (op.pre_norm) {
    x.norm_w = random_floats(size_t(op.d), seed + 5, 0.8f, 1.2f);
    x.norm_b = random_floats(size_t(op.d), seed + 6, -0.1f, 0.1f);
    w[4] = add_constant(x.g, "norm_w", {op.d}, x.norm_w);
    w[5] = add_constant(x.g, "norm_b", {op.d}, x.norm_b);
  }
  if (op.inv_freq) {
    for (int64_t k = 0; k < op.d / 2; ++k) x.freq.push_back(float(std::pow(3000.0, -double(2 * k) / double(op.d))));
    w[6] = add_constant(x.g, "inv_freq", {op.d / 2}, x.freq);
  }
  x.y = x.g.graph.add_value("y", fb::DType::F32, inner).value();
  fb::AttentionParamsT p;
  p.heads = op.heads;
  p.head_dim = op.dh;
  p.scale = float(1.0 / std::sqrt(double(op.dh)));
  p.kind.Set(fb::RelativeXLT{{}, int32_t(op.mem_len), int32_t(op.clamp_len), op.same_length, 1e-5f});
  REQUIRE(x.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {x.g.x}, {x.y}, w, p).ok());
  return x;
}

RelativeXL xl_spec(const XlOp& op, const XlGraph& x) {
  RelativeXL s;
  s.heads = op.heads;
  s.head_dim = op.dh;
  s.d = op.d;
  s.mem_len = op.mem_len;
  s.clamp_len = op.clamp_len;
  s.same_length = op.same_length;
  s.scale = float(1.0 / std::sqrt(double(op.dh)));
  s.qkv = x.qkv.data();
  s.r_net = x.r_net.data();
  s.r_w_bias = x.r_w.data();
  s.r_r_bias = x.r_r.data();
  s.norm_weight = op.pre_norm ? x.norm_w.data() : nullptr;
  s.norm_bias = op.pre_norm ? x.norm_b.data() : nullptr;
  s.inv_freq = op.inv_freq ? x.freq.data() : nullptr;
  return s;
}

std::string xl_name(const XlOp& op) {
  std::string s = "relative XL mem_len=" + std::to_string(op.mem_len) + " heads " + std::to_string(op.heads) + "x" +
                  std::to_string(op.dh) + " d=" + std::to_string(op.d);
  if (op.clamp_len) s += " clamp_len=" + std::to_string(op.clamp_len);
  if (op.same_length) s += " same_length";
  if (op.pre_norm) s += " pre-norm";
  if (op.inv_freq) s += " inv_freq";
  return s;
}

// A session (max_tokens n, max_batch segment) per segment size, each with the reference streamed in that cut (the
// memory starts as zeros) and the state: the memory [mem_len, d], nothing else, at segment and far_factor x segment
// tokens.
BuiltCase xl_case(const XlOp& op, int64_t n, int64_t rows, uint32_t seed, const std::vector<int32_t>& ids,
                  const std::vector<int64_t>& segments, std::vector<int64_t> plan_factors) {
  const int64_t inner = int64_t(op.heads) * op.dh;
  XlGraph x = build_xl_graph(op, rows, seed);
  BuiltCase b{finish_and_load(x.g, x.y, "relative_xl", 0), inner, {}};
  const RelativeXL spec = xl_spec(op, x);
  std::vector<float> h(size_t(n * op.d));
  ref::embedding(x.g.table.data(), op.d, ids.data(), n, h.data());
  for (int64_t segment : segments) {
    CaseSession s;
    s.max_tokens = n;
    s.max_batch = segment;
    CaseRun run{ids, segment, std::vector<float>(size_t(n * inner))};
    std::vector<float> memory(size_t(op.mem_len * op.d), 0.0f);
    for (int64_t pos = 0; pos < n; pos += segment) {
      ref::relative_xl_attention(h.data() + pos * op.d, std::min(segment, n - pos), memory.data(), spec,
                                 run.want.data() + pos * inner);
    }
    s.runs.push_back(std::move(run));
    s.state_bytes = uint64_t(op.mem_len * op.d) * sizeof(float);
    for (int64_t f : plan_factors) s.state_plan_tokens.push_back(f * segment);
    b.sessions.push_back(std::move(s));
  }
  return b;
}

void add_relative_xl(std::vector<OpCase>& out) {
  // Device sizes (n 40): plain, same_length with a clamp, a memory shorter than most segments with pre-LN and three
  // heads, no memory at dh 4. Each run twice: after a reset the memory is zeros again.
  std::vector<XlOp> device(4, XlOp{2, 8, 16, 12, 0, false, false, false});
  device[1].same_length = true;
  device[1].clamp_len = 6;
  device[2].mem_len = 5;
  device[2].pre_norm = true;
  device[2].heads = 3;
  device[3].mem_len = 0;
  device[3].dh = 4;
  for (size_t i = 0; i < device.size(); ++i) {
    OpCase c;
    c.name = xl_name(device[i]) + " n=40";
    c.group = "relative XL";
    c.tags = "[attention][transfo_xl][streaming]";
    c.cpu_threads = {2};
    c.passes = 2;
    c.build = [op = device[i], i] {
      const int64_t n = 40, rows = 29;
      const auto seed = uint32_t(700 + 10 * i);
      return xl_case(op, n, rows, seed, random_ids(n, rows, seed + 7), {1, 9, n}, {1000});
    };
    out.push_back(c);
  }
  // CPU sizes (n 150): memories longer and shorter than a segment and none at all; same_length; clamps below and
  // above the longest distance; pre-LN; the checkpoint's frequencies. Segments of 1, 17, 64 and all 150 tokens.
  std::vector<XlOp> cpu(6);
  cpu[1].same_length = true;
  cpu[1].clamp_len = 10;
  cpu[2].mem_len = 5;
  cpu[2].pre_norm = true;
  cpu[2].inv_freq = true;
  cpu[3].mem_len = 0;
  cpu[3].heads = 2;
  cpu[3].dh = 16;
  cpu[4].mem_len = 70;
  cpu[4].same_length = true;
  cpu[4].pre_norm = true;
  cpu[5].mem_len = 40;
  cpu[5].clamp_len = 90;  // above the longest distance: no effect
  for (size_t i = 0; i < cpu.size(); ++i) {
    OpCase c;
    c.name = xl_name(cpu[i]) + " n=150";
    c.group = "relative XL";
    c.tags = "[attention][transfo_xl][streaming]";
    c.on = On::kCpuOnly;
    c.build = [op = cpu[i], i] {
      const int64_t n = 150, rows = 53;
      std::mt19937 rng(uint32_t(90 + i));
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (auto& id : ids) id = int32_t(rng() % rows);
      return xl_case(op, n, rows, uint32_t(80 + 10 * i), ids, {1, 17, 64, n}, {1, 1000});
    };
    out.push_back(c);
  }
}

// ---- Compressive memory: ids -> EMBEDDING (random rows, d = heads x dh) -> ATTENTION(Compressive) ----

struct CompOp {
  int heads = 2, dh = 8;
  int64_t mem_len = 12, cmem_len = 5, rate = 3;
  fb::Compression how = fb::Compression::CONV;
  bool bias = true;
};

// Conv, mean pooling and max pooling (no biases); last a rate of 1 (every evicted row through the conv) with three
// heads, a memory of last_mem_len and biases or not.
std::vector<CompOp> comp_ops(int64_t last_mem_len, bool last_bias) {
  std::vector<CompOp> ops(4);
  ops[1].how = fb::Compression::MEAN_POOL;
  ops[1].rate = 4;
  ops[1].mem_len = 8;
  ops[2].how = fb::Compression::MAX_POOL;
  ops[2].bias = false;
  ops[2].cmem_len = 30;
  ops[3].rate = 1;
  ops[3].mem_len = last_mem_len;
  ops[3].heads = 3;
  ops[3].bias = last_bias;
  return ops;
}

// Both memories and the rows waiting to be compressed, d floats each.
uint64_t comp_state_bytes(const CompOp& op, int64_t d) {
  return uint64_t(op.mem_len + op.rate - 1 + op.cmem_len) * uint64_t(d) * sizeof(float);
}

struct CompGraph {
  OpGraph g;
  std::vector<float> qkv, qkv_b, conv_w, conv_b;  // [3*inner, d], [3*inner], [d, rate*d], [d]
  Compressive spec;  // points into the vectors above: keep the CompGraph where it is built
  int32_t y = -1;
};

void build_comp_graph(const CompOp& op, int64_t rows, uint32_t seed, CompGraph& cg) {
  const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
  cg.g = start_graph(rows, d, seed);
  Compressive& spec = cg.spec;
  spec.heads = op.heads;
  spec.head_dim = op.dh;
  spec.d = d;
  spec.mem_len = op.mem_len;
  spec.cmem_len = op.cmem_len;
  spec.rate = op.rate;
  spec.compression = op.how;
  spec.scale = float(1.0 / std::sqrt(double(op.dh)));
  cg.qkv = random_floats(size_t(3 * inner * d), seed + 1, -0.4f, 0.4f);
  cg.qkv_b = random_floats(size_t(3 * inner), seed + 2, -0.1f, 0.1f);
  cg.conv_w = random_floats(size_t(d * op.rate * d), seed + 3, -0.2f, 0.2f);
  cg.conv_b = random_floats(size_t(d), seed + 4, -0.1f, 0.1f);
  std::vector<int32_t> w = {add_constant(cg.g, "qkv", {3 * inner, d}, cg.qkv), -1, -1, -1};
  spec.qkv = cg.qkv.data();
  if (op.bias) {
    w[1] = add_constant(cg.g, "qkv_b", {3 * inner}, cg.qkv_b);
    spec.qkv_bias = cg.qkv_b.data();
  }
  if (op.how == fb::Compression::CONV) {
    w[2] = add_constant(cg.g, "conv_w", {d, op.rate * d}, cg.conv_w);
    spec.conv_weight = cg.conv_w.data();
    if (op.bias) {
      w[3] = add_constant(cg.g, "conv_b", {d}, cg.conv_b);
      spec.conv_bias = cg.conv_b.data();
    }
  }
  cg.y = cg.g.graph.add_value("y", fb::DType::F32, inner).value();
  const fb::AttentionParamsT p = convert::attention_params(
      op.heads, op.dh, spec.scale,
      fb::CompressiveT{{}, int32_t(op.mem_len), int32_t(op.cmem_len), int32_t(op.rate), op.how});
  REQUIRE(cg.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {cg.g.x}, {cg.y}, w, p).ok());
}

std::string comp_name(const CompOp& op) {
  const char* how = op.how == fb::Compression::CONV ? "conv" : op.how == fb::Compression::MEAN_POOL ? "mean pool" : "max pool";
  return std::string("compressive ") + how + " mem_len=" + std::to_string(op.mem_len) + " cmem_len=" +
         std::to_string(op.cmem_len) + " rate=" + std::to_string(op.rate) + " heads " + std::to_string(op.heads) + "x" +
         std::to_string(op.dh) + (op.bias ? " with biases" : " without biases");
}

// A session (max_tokens n, max_batch segment) per segment size against the reference streamed in that cut (both
// memories start empty); the state is both memories and the pending rows, also planned for 1,000 x n tokens.
BuiltCase comp_case(const CompOp& op, int64_t n, int64_t rows, uint32_t seed, const std::vector<int32_t>& ids,
                    const std::vector<int64_t>& segments) {
  const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
  CompGraph cg;
  build_comp_graph(op, rows, seed, cg);
  BuiltCase b{finish_and_load(cg.g, cg.y, "compressive", 0), inner, {}};
  std::vector<float> a(size_t(n * d));
  ref::embedding(cg.g.table.data(), d, ids.data(), n, a.data());
  for (int64_t segment : segments) {
    CaseSession s;
    s.max_tokens = n;
    s.max_batch = segment;
    CaseRun run{ids, segment, std::vector<float>(size_t(n * inner))};
    CompressiveMemory memory;
    for (int64_t pos = 0; pos < n; pos += segment) {
      ref::compressive_attention(a.data() + pos * d, std::min(segment, n - pos), memory, cg.spec,
                                 run.want.data() + pos * inner);
    }
    s.runs.push_back(std::move(run));
    s.state_bytes = comp_state_bytes(op, d);
    s.state_plan_tokens = {1000 * n};
    b.sessions.push_back(std::move(s));
  }
  return b;
}

void add_compressive(std::vector<OpCase>& out) {
  // Device sizes (n 60, the rate-1 case with a memory of 20 and a conv without bias), each run twice: after a reset
  // both memories are empty again. CPU sizes (n 150, memory 70 with biases) in segments of 1, 7, 16 and 150.
  const std::vector<CompOp> device = comp_ops(20, false), cpu = comp_ops(70, true);
  for (size_t i = 0; i < device.size(); ++i) {
    OpCase c;
    c.name = comp_name(device[i]) + " n=60";
    c.group = "compressive";
    c.tags = "[attention][compressive][streaming]";
    c.cpu_threads = {2};
    c.passes = 2;
    c.build = [op = device[i], i] {
      const int64_t n = 60, rows = 41;
      const auto seed = uint32_t(1500 + 10 * i);
      return comp_case(op, n, rows, seed, random_ids(n, rows, seed + 5), {1, 7, n});
    };
    out.push_back(c);
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    OpCase c;
    c.name = comp_name(cpu[i]) + " n=150";
    c.group = "compressive";
    c.tags = "[attention][compressive][streaming]";
    c.on = On::kCpuOnly;
    c.build = [op = cpu[i], i] {
      const int64_t n = 150, rows = 41;
      std::mt19937 rng(uint32_t(600 + i));
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (auto& id : ids) id = int32_t(rng() % rows);
      return comp_case(op, n, rows, uint32_t(500 + 10 * i), ids, {1, 7, 16, n});
    };
    out.push_back(c);
  }
}

// ---- Adaptive input + adaptive log-softmax: ids -> ADAPTIVE_EMBEDDING -> ADAPTIVE_LOG_SOFTMAX, same clusters ----

struct AdaptiveCase {
  int64_t V, d;
  std::vector<int64_t> cutoffs;
  std::vector<int64_t> dims;  // per cluster
  std::vector<bool> proj;     // per cluster (a cluster without projection needs dims == d)
  bool shared_table = false;  // softmax clusters read rows of one [V, dims[0]] table
};

std::string adaptive_name(const AdaptiveCase& a) {
  std::string s = "adaptive embedding and log_softmax V=" + std::to_string(a.V) + " d=" + std::to_string(a.d) + " cutoffs";
  if (a.cutoffs.empty()) s += " none";
  for (int64_t c : a.cutoffs) s += " " + std::to_string(c);
  s += " dims";
  for (size_t i = 0; i < a.dims.size(); ++i) s += " " + std::to_string(a.dims[i]) + (a.proj[i] ? "p" : "");
  return s + (a.shared_table ? " shared table" : "");
}

BuiltCase adaptive_case(const AdaptiveCase& a, size_t index, bool on_device) {
  OpGraph g;
  const int32_t ids = g.graph.add_value("ids", fb::DType::I32, 1).value();
  REQUIRE(g.graph.add_input(ids).ok());
  std::vector<int64_t> ends = {0};
  ends.insert(ends.end(), a.cutoffs.begin(), a.cutoffs.end());
  ends.push_back(a.V);
  uint32_t seed = 300 + uint32_t(index) * 20;
  std::deque<std::vector<float>> keep;  // every constant, for the reference (a deque: pointers stay valid)
  auto constant = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    keep.push_back(random_floats(size_t(count), seed++, lo, hi));
    return add_constant(g, name, std::move(shape), keep.back());
  };
  AdaptiveInput in;
  AdaptiveSoftmax out;
  in.ends = out.ends = ends;
  in.d = out.d = a.d;
  in.scale = 1.7f;
  std::vector<int32_t> emb_w, sm_w = {-1, -1};
  const int64_t C = int64_t(a.cutoffs.size());
  if (C > 0) {
    sm_w[0] = constant("cluster_w", {C, a.dims[0]}, -1, 1);
    out.cluster_weight = keep.back().data();
    sm_w[1] = constant("cluster_b", {C}, -1, 1);
    out.cluster_bias = keep.back().data();
  }
  int32_t shared_w = -1, shared_b = -1;
  const float *shared_wp = nullptr, *shared_bp = nullptr;
  if (a.shared_table) {
    shared_w = constant("out_w", {a.V, a.dims[0]}, -1, 1);
    shared_wp = keep.back().data();
    shared_b = constant("out_b", {a.V}, -1, 1);
    shared_bp = keep.back().data();
  }
  for (size_t i = 0; i + 1 < ends.size(); ++i) {
    const int64_t rows = ends[i + 1] - ends[i], di = a.dims[i];
    const std::string s = std::to_string(i);
    emb_w.push_back(constant("table" + s, {rows, di}, -1, 1));
    in.tables.push_back(keep.back().data());
    emb_w.push_back(a.proj[i] ? constant("eproj" + s, {a.d, di}, -0.5f, 0.5f) : -1);
    in.projs.push_back(a.proj[i] ? keep.back().data() : nullptr);
    in.dims.push_back(di);
    if (a.shared_table) {
      sm_w.insert(sm_w.end(), {shared_w, shared_b});
      out.weights.push_back(shared_wp + ends[i] * di);
      out.biases.push_back(shared_bp + ends[i]);
    } else {
      sm_w.push_back(constant("w" + s, {rows, di}, -1, 1));
      out.weights.push_back(keep.back().data());
      sm_w.push_back(i == 1 ? -1 : constant("b" + s, {rows}, -1, 1));  // cluster 1 without bias
      out.biases.push_back(i == 1 ? nullptr : keep.back().data());
    }
    sm_w.push_back(a.proj[i] ? constant("sproj" + s, {a.d, di}, -0.5f, 0.5f) : -1);
    out.projs.push_back(a.proj[i] ? keep.back().data() : nullptr);
    out.dims.push_back(di);
  }
  g.x = g.graph.add_value("x", fb::DType::F32, a.d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::ADAPTIVE_EMBEDDING, "emb", {ids}, {g.x}, emb_w,
                         fb::AdaptiveEmbeddingParamsT{{}, a.cutoffs, in.scale}).ok());
  const int32_t y = g.graph.add_value("y", fb::DType::F32, a.V).value();
  REQUIRE(g.graph.add_op(fb::OpCode::ADAPTIVE_LOG_SOFTMAX, "sm", {g.x}, {y}, sm_w,
                         fb::AdaptiveLogSoftmaxParamsT{{}, a.cutoffs}).ok());
  BuiltCase b{finish_and_load(g, y, "adaptive_ops" + std::to_string(index), 64), a.V, {}};
  // The CPU: 37 tokens in a session of (64, 64); Vulkan: the first 23 of the same draw in (64, 32) (lavapipe).
  std::mt19937 rng(uint32_t(400 + index));
  std::vector<int32_t> tokens(37);
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(a.V));
  for (const auto& [n, batch, on] : {std::tuple{int64_t(37), int64_t(64), On::kCpuOnly},
                                     std::tuple{int64_t(23), int64_t(32), On::kDeviceOnly}}) {
    if (on == On::kDeviceOnly && !on_device) continue;
    CaseSession s;
    s.max_tokens = 64;
    s.max_batch = batch;
    s.on = on;
    CaseRun run{std::vector<int32_t>(tokens.begin(), tokens.begin() + n), 0, std::vector<float>(size_t(n * a.V))};
    std::vector<float> x(size_t(n * a.d));
    ref::adaptive_embedding(run.ids.data(), n, in, x.data());
    ref::adaptive_log_softmax(x.data(), n, out, run.want.data());
    s.runs.push_back(std::move(run));
    b.sessions.push_back(std::move(s));
  }
  return b;
}

void add_adaptive(std::vector<OpCase>& out) {
  // Tails with and without projections and a cluster without bias; one cluster (no tails); tails reading one shared
  // table; one projected cluster (the CPU only).
  const std::vector<AdaptiveCase> cases = {
      {90, 16, {10, 30, 60}, {16, 8, 4, 2}, {false, true, true, true}, false},
      {50, 12, {}, {12}, {false}, false},
      {70, 12, {20, 45}, {9, 9, 9}, {true, true, true}, true},
      {40, 8, {}, {6}, {true}, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    OpCase c;
    c.name = adaptive_name(cases[i]);
    c.group = "adaptive embedding and log_softmax";
    c.tags = "[transfo_xl]";
    c.rows_are_log_probabilities = true;
    c.out_of_range_id = int32_t(cases[i].V);
    const bool on_device = i < 3;
    if (!on_device) c.on = On::kCpuOnly;
    c.build = [a = cases[i], i, on_device] { return adaptive_case(a, i, on_device); };
    out.push_back(c);
  }
}

}  // namespace

void add_memory_cases(std::vector<OpCase>& out) {
  add_relative_xl(out);
  add_compressive(out);
  add_adaptive(out);
}

}  // namespace tern::test
