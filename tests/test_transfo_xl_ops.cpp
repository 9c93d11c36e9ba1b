// Transformer-XL's ops on random inputs: ATTENTION of kind RelativeXL (ops/relative_xl.h) against its reference
// kernel, segment after segment with the memory carried; ADAPTIVE_EMBEDDING and ADAPTIVE_LOG_SOFTMAX
// (ops/adaptive.h) against theirs; and the loader's checks of all three. Each op also runs on every backend at small
// sizes (CI runs Vulkan on lavapipe), Vulkan against the reference and the CPU path with the memory on the device.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>

#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

using tern::test::make_session;

namespace {

constexpr double kOpTolerance = 1e-5;

struct XlOp {
  int heads = 3, dh = 8;
  int64_t d = 20, mem_len = 24, clamp_len = 0;
  bool same_length = false, pre_norm = false, inv_freq = false;
};

// ids -> EMBEDDING (random h rows) -> ATTENTION(RelativeXL) -> output.
struct XlGraph {
  test::OpGraph g;
  std::vector<float> qkv, r_net, r_w, r_r, norm_w, norm_b, freq;
  int32_t y = -1;
};

XlGraph build_xl_graph(const XlOp& op, int64_t rows, uint32_t seed) {
  const int64_t inner = int64_t(op.heads) * op.dh;
  XlGraph x{test::start_graph(rows, op.d, seed), {}, {}, {}, {}, {}, {}, {}, -1};
  x.qkv = random_floats(size_t(3 * inner * op.d), seed + 1, -0.5f, 0.5f);
  x.r_net = random_floats(size_t(inner * op.d), seed + 2, -0.5f, 0.5f);
  x.r_w = random_floats(size_t(inner), seed + 3);
  x.r_r = random_floats(size_t(inner), seed + 4);
  std::vector<int32_t> w = {test::add_constant(x.g, "qkv", {3 * inner, op.d}, x.qkv),
                            test::add_constant(x.g, "r_net", {inner, op.d}, x.r_net),
                            test::add_constant(x.g, "r_w_bias", {op.heads, op.dh}, x.r_w),
                            test::add_constant(x.g, "r_r_bias", {op.heads, op.dh}, x.r_r), -1, -1, -1};
  if (op.pre_norm) {
    x.norm_w = random_floats(size_t(op.d), seed + 5, 0.8f, 1.2f);
    x.norm_b = random_floats(size_t(op.d), seed + 6, -0.1f, 0.1f);
    w[4] = test::add_constant(x.g, "norm_w", {op.d}, x.norm_w);
    w[5] = test::add_constant(x.g, "norm_b", {op.d}, x.norm_b);
  }
  if (op.inv_freq) {
    for (int64_t k = 0; k < op.d / 2; ++k) x.freq.push_back(float(std::pow(3000.0, -double(2 * k) / double(op.d))));
    w[6] = test::add_constant(x.g, "inv_freq", {op.d / 2}, x.freq);
  }
  x.y = x.g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p;
  p.heads = op.heads;
  p.head_dim = op.dh;
  p.scale = float(1.0 / std::sqrt(double(op.dh)));
  p.kind = convert::params::RelativeXL{int32_t(op.mem_len), int32_t(op.clamp_len), op.same_length, 1e-5f};
  REQUIRE(x.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {x.g.x}, {x.y}, w, p).ok());
  return x;
}

RelativeXL spec_for(const XlOp& op, const XlGraph& x) {
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

}  // namespace

TEST_CASE("relative XL op: CPU kernel matches the reference segment after segment", "[attention][transfo_xl]") {
  // Memory longer and shorter than a segment, none at all; same_length; clamps below the longest distance; pre-LN;
  // the checkpoint's frequencies. Segments of several sizes, including one token and more than the memory.
  std::vector<XlOp> ops(6);
  ops[1].same_length = true;
  ops[1].clamp_len = 10;
  ops[2].mem_len = 5;
  ops[2].pre_norm = true;
  ops[2].inv_freq = true;
  ops[3].mem_len = 0;
  ops[3].heads = 2;
  ops[3].dh = 16;
  ops[4].mem_len = 70;
  ops[4].same_length = true;
  ops[4].pre_norm = true;
  ops[5].mem_len = 40;
  ops[5].clamp_len = 90;  // above the longest distance: no effect
  const int64_t n = 150, rows = 53;
  for (size_t c = 0; c < ops.size(); ++c) {
    const XlOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh;
    XlGraph x = build_xl_graph(op, rows, uint32_t(80 + 10 * c));
    tern_model* model = test::finish_and_load(x.g, x.y, "relative_xl_op" + std::to_string(c), 0);
    std::mt19937 rng(uint32_t(90 + c));
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = int32_t(rng() % rows);
    std::vector<float> h(size_t(n * op.d));
    ref::embedding(x.g.table.data(), op.d, ids.data(), n, h.data());
    const RelativeXL spec = spec_for(op, x);
    for (int64_t segment : {int64_t(1), int64_t(17), int64_t(64), n}) {
      std::vector<float> want(size_t(n * inner)), memory(size_t(op.mem_len * op.d), 0.0f);
      for (int64_t pos = 0; pos < n; pos += segment) {
        const int64_t len = std::min(segment, n - pos);
        ref::relative_xl_attention(h.data() + pos * op.d, len, memory.data(), spec, want.data() + pos * inner);
      }
      for (int threads : {1, 2}) {
        tern_session* s = make_session(model, threads, n, segment);
        std::vector<float> got(size_t(n * inner));
        for (int64_t pos = 0; pos < n; pos += segment) {
          const int64_t len = std::min(segment, n - pos);
          INFO(tern_session_last_error(s));
          REQUIRE(tern_session_append(s, ids.data() + pos, len, got.data() + pos * inner) == TERN_OK);
        }
        INFO("case " << c << ", segment " << segment << ", threads " << threads);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
        tern_memory_plan plan{}, far{}, allocated{};
        REQUIRE(tern_session_plan(s, segment, &plan) == TERN_OK);
        REQUIRE(tern_session_plan(s, 1000 * segment, &far) == TERN_OK);
        REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
        const uint64_t state = uint64_t(op.mem_len * op.d) * sizeof(float);  // the memory, nothing else
        CHECK(plan.state_bytes == state);
        CHECK(far.state_bytes == state);
        CHECK(allocated.state_bytes == state);
        tern_session_free(s);
      }
    }
    tern_model_free(model);
  }
}

TEST_CASE("relative XL op: matches the reference (and the CPU path) segment after segment (CPU and Vulkan)",
          "[attention][transfo_xl][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const double tolerance = test::backend_tolerance(backend, kOpTolerance);
  std::vector<XlOp> ops(4, XlOp{2, 8, 16, 12, 0, false, false, false});
  ops[1].same_length = true;
  ops[1].clamp_len = 6;
  ops[2].mem_len = 5;
  ops[2].pre_norm = true;
  ops[2].heads = 3;
  ops[3].mem_len = 0;
  ops[3].dh = 4;
  const int64_t n = 40, rows = 29;
  for (size_t c = 0; c < ops.size(); ++c) {
    const XlOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh;
    const auto seed = uint32_t(700 + 10 * c);
    XlGraph x = build_xl_graph(op, rows, seed);
    tern_model* model = test::finish_and_load(x.g, x.y, "backend_relative_xl" + std::to_string(c), 0);
    const RelativeXL spec = spec_for(op, x);
    const std::vector<int32_t> ids = test::random_ids(n, rows, seed + 7);
    std::vector<float> h(size_t(n * op.d));
    ref::embedding(x.g.table.data(), op.d, ids.data(), n, h.data());
    for (int64_t segment : {int64_t(1), int64_t(9), n}) {
      std::vector<float> want(size_t(n * inner)), memory(size_t(op.mem_len * op.d), 0.0f);
      for (int64_t pos = 0; pos < n; pos += segment) {
        ref::relative_xl_attention(h.data() + pos * op.d, std::min(segment, n - pos), memory.data(), spec,
                                   want.data() + pos * inner);
      }
      tern_session* s = test::make_session_on(backend, model, backend == TERN_BACKEND_CPU ? 2 : 1, n, segment);
      INFO("case " << c << ", segment " << segment);
      // Twice: after a reset the memory is zeros again.
      test::check_streamed_twice(backend, s, model, ids, inner, segment, want, tolerance);
      test::check_state_bytes(s, uint64_t(op.mem_len * op.d) * sizeof(float), 1000 * segment);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

namespace {

// One adaptive embedding + adaptive log-softmax pair over the same clusters.
struct AdaptiveCase {
  int64_t V, d;
  std::vector<int64_t> cutoffs;
  std::vector<int64_t> dims;   // per cluster
  std::vector<bool> proj;      // per cluster (a cluster without projection needs dims == d)
  bool shared_table = false;   // softmax clusters read rows of one [V, dims[0]] table
};

}  // namespace

TEST_CASE("adaptive embedding and log-softmax ops match the references (and, on Vulkan, the CPU path)",
          "[transfo_xl][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const std::vector<AdaptiveCase> cases = {
      {90, 16, {10, 30, 60}, {16, 8, 4, 2}, {false, true, true, true}, false},
      {50, 12, {}, {12}, {false}, false},
      {70, 12, {20, 45}, {9, 9, 9}, {true, true, true}, true},
      {40, 8, {}, {6}, {true}, false},
  };
  // Vulkan: the first three cases, fewer tokens (lavapipe).
  const size_t count = backend == TERN_BACKEND_CPU ? cases.size() : 3;
  for (size_t c = 0; c < count; ++c) {
    const AdaptiveCase& a = cases[c];
    test::OpGraph g;
    const int32_t ids = g.graph.add_value("ids", fb::DType::I32, 1).value();
    REQUIRE(g.graph.add_input(ids).ok());
    std::vector<int64_t> ends = {0};
    ends.insert(ends.end(), a.cutoffs.begin(), a.cutoffs.end());
    ends.push_back(a.V);
    uint32_t seed = 300 + uint32_t(c) * 20;
    std::vector<std::vector<float>> keep;  // every constant, for the reference
    auto constant = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
      int64_t count = 1;
      for (int64_t s : shape) count *= s;
      keep.push_back(random_floats(size_t(count), seed++, lo, hi));
      return test::add_constant(g, name, std::move(shape), keep.back());
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
    if (a.shared_table) {
      shared_w = constant("out_w", {a.V, a.dims[0]}, -1, 1);
      shared_b = constant("out_b", {a.V}, -1, 1);
    }
    const float* shared_wp = a.shared_table ? keep[keep.size() - 2].data() : nullptr;
    const float* shared_bp = a.shared_table ? keep.back().data() : nullptr;
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
                           convert::params::AdaptiveEmbedding{a.cutoffs, in.scale}).ok());
    const int32_t y = g.graph.add_value("y", fb::DType::F32, a.V).value();
    REQUIRE(g.graph.add_op(fb::OpCode::ADAPTIVE_LOG_SOFTMAX, "sm", {g.x}, {y}, sm_w,
                           convert::params::AdaptiveLogSoftmax{a.cutoffs}).ok());
    tern_model* model = test::finish_and_load(g, y, "adaptive_ops" + std::to_string(c), 64);
    std::mt19937 rng(uint32_t(400 + c));
    const int64_t n = backend == TERN_BACKEND_CPU ? 37 : 23;
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (auto& t : tokens) t = int32_t(rng() % uint32_t(a.V));
    std::vector<float> x(size_t(n * a.d)), want(size_t(n * a.V));
    ref::adaptive_embedding(tokens.data(), n, in, x.data());
    ref::adaptive_log_softmax(x.data(), n, out, want.data());
    if (backend != TERN_BACKEND_CPU) {
      std::vector<float> got(size_t(n * a.V)), cpu(size_t(n * a.V));
      tern_session* s = test::make_session_on(backend, model, 1, 64, 32);
      INFO("case " << c << ": " << tern_session_last_error(s));
      REQUIRE(tern_session_forward(s, tokens.data(), n, got.data()) == TERN_OK);
      tern_session* on_cpu = make_session(model, 2, 64, 32);
      REQUIRE(tern_session_forward(on_cpu, tokens.data(), n, cpu.data()) == TERN_OK);
      tern_session_free(on_cpu);
      CHECK(relative_error(got.data(), want.data(), got.size()) <= test::backend_tolerance(backend, kOpTolerance));
      CHECK(relative_error(got.data(), cpu.data(), got.size()) <= test::backend_tolerance(backend, kOpTolerance));
      const int32_t bad = int32_t(a.V);
      CHECK(tern_session_forward(s, &bad, 1, got.data()) == TERN_INVALID_ARGUMENT);
      CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("outside the vocabulary"));
      tern_session_free(s);
    }
    for (int threads : {1, 2}) {
      if (backend != TERN_BACKEND_CPU) break;
      tern_session* s = make_session(model, threads, 64, 64);
      std::vector<float> got(size_t(n * a.V));
      REQUIRE(tern_session_forward(s, tokens.data(), n, got.data()) == TERN_OK);
      INFO("case " << c << ", threads " << threads);
      CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
      for (int64_t r = 0; r < n; ++r) {  // each row is a distribution
        double sum = 0;
        for (int64_t v = 0; v < a.V; ++v) sum += std::exp(double(got[size_t(r * a.V + v)]));
        CHECK(std::fabs(sum - 1.0) < 1e-5);
      }
      const int32_t bad = int32_t(a.V);
      CHECK(tern_session_forward(s, &bad, 1, got.data()) == TERN_INVALID_ARGUMENT);
      CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("outside the vocabulary"));
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("relative XL and adaptive ops: the loader checks their weights and params", "[transfo_xl]") {
  struct Case {
    std::string what, message;
    std::function<void(test::OpGraph&, int32_t ids)> build;  // adds the op under test, output value "y"
  };
  auto xl = [](int32_t mem_len, bool same_length, std::vector<int64_t> r_shape) {
    return [=](test::OpGraph& g, int32_t) {
      const int32_t qkv = test::add_constant(g, "qkv", {48, 16}, random_floats(48 * 16, 1));
      const int64_t r_count = r_shape[0] * r_shape[1];
      const int32_t r = test::add_constant(g, "r_net", r_shape, random_floats(size_t(r_count), 2));
      const int32_t b = test::add_constant(g, "bias", {2, 8}, random_floats(16, 3));
      const int32_t y = g.graph.add_value("y", fb::DType::F32, 16).value();
      convert::params::Attention p{2, 8, 0.35f, true, convert::params::RelativeXL{mem_len, 0, same_length, 1e-5f}};
      REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {qkv, r, b, b}, p).ok());
      REQUIRE(g.graph.add_output(y).ok());
    };
  };
  auto softmax = [](std::vector<int64_t> cutoffs, int64_t V, std::vector<int64_t> w1_shape) {
    return [=](test::OpGraph& g, int32_t) {
      const int32_t cw = test::add_constant(g, "cw", {1, 16}, random_floats(16, 4));
      const int32_t w0 = test::add_constant(g, "w0", {10, 16}, random_floats(160, 5));
      const int32_t w1 = test::add_constant(g, "w1", w1_shape, random_floats(size_t(w1_shape[0] * w1_shape[1]), 6));
      const int32_t y = g.graph.add_value("y", fb::DType::F32, V).value();
      REQUIRE(g.graph.add_op(fb::OpCode::ADAPTIVE_LOG_SOFTMAX, "sm", {g.x}, {y}, {cw, -1, w0, -1, -1, w1, -1, -1},
                             convert::params::AdaptiveLogSoftmax{cutoffs}).ok());
      REQUIRE(g.graph.add_output(y).ok());
    };
  };
  const std::vector<Case> cases = {
      {"r_net shape", "has shape [16, 15], expected [16, 16]", xl(4, false, {16, 15})},
      {"same_length without memory", "same_length without memory", xl(0, true, {16, 16})},
      {"cutoffs order", "cutoffs must increase strictly", softmax({10, 10}, 20, {10, 16})},
      {"tail weight rows", "expected [10 or 20, width]", softmax({10}, 20, {9, 16})},
      {"tail width without projection", "has width 8 and no projection", softmax({10}, 20, {10, 8})},
  };
  for (const Case& c : cases) {
    test::OpGraph g = test::start_graph(10, 16, 7);
    c.build(g, 0);
    g.graph.metadata().architecture = "op-test";
    g.graph.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
    g.graph.metadata().vocab_size = g.graph.values()[size_t(g.graph.outputs()[0])].width;
    const std::string path = test::scratch_dir("transfo_xl_bad") + "/model.tern";
    REQUIRE(convert::write_model(g.graph, path, {true}).ok());
    tern_model* model = nullptr;
    INFO(c.what);
    CHECK(tern_model_load(path.c_str(), &model) != TERN_OK);
    CHECK_THAT(std::string(tern_last_error()), Catch::Contains(c.message));
    CHECK(model == nullptr);
  }
}
