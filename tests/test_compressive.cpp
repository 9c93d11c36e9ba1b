// Compressive memory (ops/compressive.h; reference family kind "compressive"): the CPU kernel against the reference
// kernel segment after segment, the goldens of tools/reference/make_compressive_goldens.py streamed segment by
// segment, and a state that stops growing once both memories are full. The op at small sizes and the goldens run on
// each backend: on Vulkan with both memories on the device, also against the CPU path.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

using tern::test::make_session;

namespace {

struct CompOp {
  int heads = 2, dh = 8;
  int64_t mem_len = 12, cmem_len = 5, rate = 3;
  fb::Compression how = fb::Compression::CONV;
  bool bias = true;
};

// Conv, mean pooling and max pooling (no biases); last a rate of 1 (every evicted row kept as is... through the conv)
// with three heads, a memory of last_mem_len and biases or not.
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
uint64_t state_bytes(const CompOp& op, int64_t d) {
  return uint64_t(op.mem_len + op.rate - 1 + op.cmem_len) * uint64_t(d) * sizeof(float);
}

// ids -> EMBEDDING (random rows, d = heads x dh) -> ATTENTION(Compressive) -> output, and the reference kernel's spec.
struct CompGraph {
  test::OpGraph g;
  std::vector<float> qkv, qkv_b, conv_w, conv_b;
  Compressive spec;  // points into the vectors above: keep the CompGraph where it is built
  int32_t y = -1;
};

CompGraph build_comp_graph(const CompOp& op, int64_t rows, uint32_t seed) {
  const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
  CompGraph cg{test::start_graph(rows, d, seed), {}, {}, {}, {}, {}, -1};
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
  std::vector<int32_t> w = {test::add_constant(cg.g, "qkv", {3 * inner, d}, cg.qkv), -1, -1, -1};
  spec.qkv = cg.qkv.data();
  if (op.bias) {
    w[1] = test::add_constant(cg.g, "qkv_b", {3 * inner}, cg.qkv_b);
    spec.qkv_bias = cg.qkv_b.data();
  }
  if (op.how == fb::Compression::CONV) {
    w[2] = test::add_constant(cg.g, "conv_w", {d, op.rate * d}, cg.conv_w);
    spec.conv_weight = cg.conv_w.data();
    if (op.bias) {
      w[3] = test::add_constant(cg.g, "conv_b", {d}, cg.conv_b);
      spec.conv_bias = cg.conv_b.data();
    }
  }
  cg.y = cg.g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p{op.heads, op.dh, spec.scale, true,
                               convert::params::Compressive{int32_t(op.mem_len), int32_t(op.cmem_len), int32_t(op.rate), op.how}};
  REQUIRE(cg.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {cg.g.x}, {cg.y}, w, p).ok());
  return cg;
}

}  // namespace

TEST_CASE("compressive op: CPU kernel matches the reference segment after segment", "[attention][compressive]") {
  const std::vector<CompOp> ops = comp_ops(70, true);
  const int64_t n = 150, rows = 41;
  for (size_t c = 0; c < ops.size(); ++c) {
    const CompOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
    CompGraph cg = build_comp_graph(op, rows, uint32_t(500 + 10 * c));
    const Compressive& spec = cg.spec;
    test::OpGraph& g = cg.g;
    tern_model* model = test::finish_and_load(g, cg.y, "compressive_op" + std::to_string(c), 0);
    std::mt19937 rng(uint32_t(600 + c));
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = int32_t(rng() % rows);
    std::vector<float> a(size_t(n * d));
    ref::embedding(g.table.data(), d, ids.data(), n, a.data());
    for (int64_t segment : {int64_t(1), int64_t(7), int64_t(16), n}) {
      std::vector<float> want(size_t(n * inner));
      CompressiveMemory memory;
      for (int64_t pos = 0; pos < n; pos += segment) {
        const int64_t len = std::min(segment, n - pos);
        ref::compressive_attention(a.data() + pos * d, len, memory, spec, want.data() + pos * inner);
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
        CHECK(relative_error(got.data(), want.data(), got.size()) <= 1e-5);
        test::check_state_bytes(s, state_bytes(op, d), 1000 * n);
        tern_session_free(s);
      }
    }
    tern_model_free(model);
  }
}

TEST_CASE("compressive op: matches the reference (and the CPU path) segment after segment (CPU and Vulkan)",
          "[attention][compressive][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const double tolerance = test::backend_tolerance(backend, 1e-5);
  const std::vector<CompOp> ops = comp_ops(20, false);  // and a conv without bias
  const int64_t n = 60, rows = 41;
  for (size_t c = 0; c < ops.size(); ++c) {
    const CompOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
    const auto seed = uint32_t(1500 + 10 * c);
    CompGraph cg = build_comp_graph(op, rows, seed);
    tern_model* model = test::finish_and_load(cg.g, cg.y, "backend_compressive" + std::to_string(c), 0);
    const std::vector<int32_t> ids = test::random_ids(n, rows, seed + 5);
    std::vector<float> a(size_t(n * d));
    ref::embedding(cg.g.table.data(), d, ids.data(), n, a.data());
    for (int64_t segment : {int64_t(1), int64_t(7), n}) {
      std::vector<float> want(size_t(n * inner));
      CompressiveMemory memory;
      for (int64_t pos = 0; pos < n; pos += segment) {
        ref::compressive_attention(a.data() + pos * d, std::min(segment, n - pos), memory, cg.spec, want.data() + pos * inner);
      }
      tern_session* s = test::make_session_on(backend, model, backend == TERN_BACKEND_CPU ? 2 : 1, n, segment);
      INFO("case " << c << ", segment " << segment);
      // Twice: after a reset both memories are empty again.
      test::check_streamed_twice(backend, s, model, ids, inner, segment, want, tolerance);
      test::check_state_bytes(s, state_bytes(op, d), 1000 * n);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

namespace {

struct CompGolden {
  nlohmann::json config;
  std::vector<int32_t> ids;
  npy::Array logits;
  tern_model* model = nullptr;
  int64_t segment() const { return config["segment_length"].get<int64_t>(); }
};

CompGolden load_golden(const std::string& name) {
  const std::string dir = test::source_path("tests/goldens/" + name);
  CompGolden g;
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(dir + "/logits.npy", &g.logits, &error));
  g.config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  REQUIRE(int64_t(g.ids.size()) >= 5 * g.segment());  // compression happens several times
  const std::string out = test::scratch_dir("golden_" + name) + "/model.tern";
  convert::ConvertOptions o;
  o.quiet = true;
  Status st = convert::convert_checkpoint(dir, out, o);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

const char* const kGoldens[] = {"compressive_conv_mean", "compressive_max_conv_post"};

}  // namespace

TEST_CASE("compressive goldens: segment by segment with both memories matches model.py (CPU and Vulkan)", "[model][compressive][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kGoldens) {
    CompGolden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), V = g.logits.shape[1], T = g.segment();
    if (backend == TERN_BACKEND_VULKAN) {
      // Both memories on the device.
      uint64_t full = 0;
      for (const auto& a : g.config["attention"]) {
        full += uint64_t(a["mem_len"].get<int64_t>() + a["rate"].get<int64_t>() - 1 + a["cmem_len"].get<int64_t>()) *
                uint64_t(g.config["hidden_size"].get<int64_t>()) * sizeof(float);
      }
      tern_session* s = test::make_session_on(backend, g.model, 1, n, T);
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<float> got = test::run_ids(s, g.ids, V, T);
        for (int64_t pos = 0; pos < n; pos += T) {
          const size_t off = size_t(pos * V), count = size_t(std::min(T, n - pos) * V);
          const double err = relative_error(got.data() + off, g.logits.data.data() + off, count);
          INFO(name << ", pass " << pass << ", segment at " << pos << ": relative error " << err);
          CHECK(err <= 1e-4);
        }
        const double err = relative_error(got.data(), g.logits.data.data(), got.size());
        INFO(name << ": relative error " << err);
        CHECK(err <= 1e-4);
      }
      tern_memory_plan allocated{}, far{};
      REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
      REQUIRE(tern_session_plan(s, 1000 * T, &far) == TERN_OK);
      CHECK(allocated.state_bytes == full);
      CHECK(far.state_bytes == full);
      tern_session_free(s);
    }
    for (int threads : {1, 2}) {
      if (backend != TERN_BACKEND_CPU) break;
      tern_session* s = make_session(g.model, threads, n, T);
      std::vector<float> got(size_t(n * V));
      for (int64_t pos = 0; pos < n; pos += T) {
        const int64_t len = std::min(T, n - pos);
        INFO(tern_session_last_error(s));
        REQUIRE(tern_session_append(s, g.ids.data() + pos, len, got.data() + pos * V) == TERN_OK);
        const double seg_err = relative_error(got.data() + pos * V, g.logits.data.data() + pos * V, size_t(len * V));
        INFO(name << ", threads " << threads << ", segment at " << pos << ": relative error " << seg_err);
        CHECK(seg_err <= 1e-4);
      }
      const double err = relative_error(got.data(), g.logits.data.data(), got.size());
      INFO(name << ", threads " << threads << ": relative error " << err);
      CHECK(err <= 1e-4);
      tern_session_free(s);
    }
    tern_model_free(g.model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("compressive state: constant once the memories are full, after 2 segments or 1,000", "[model][compressive][streaming]") {
  for (const char* name : kGoldens) {
    CompGolden g = load_golden(name);
    const int64_t T = g.segment(), V = g.logits.shape[1];
    uint64_t full = 0;
    for (const auto& a : g.config["attention"]) {
      full += uint64_t(a["mem_len"].get<int64_t>() + a["rate"].get<int64_t>() - 1 + a["cmem_len"].get<int64_t>()) *
              uint64_t(g.config["hidden_size"].get<int64_t>()) * sizeof(float);
    }
    const int64_t segments = 1000;
    // Learned positions end at max_position_embeddings; sinusoidal ones go on.
    const bool learned = g.config.value("position_embedding", std::string("learned")) == "learned";
    const int64_t positions = learned ? g.config["max_position_embeddings"].get<int64_t>() : segments * T;
    tern_session* s = make_session(g.model, 2, std::min(segments * T, positions), T);
    tern_memory_plan allocated{}, later{}, far{};
    REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
    REQUIRE(tern_session_plan(s, 100 * T, &later) == TERN_OK);
    REQUIRE(tern_session_plan(s, segments * T, &far) == TERN_OK);
    INFO(name);
    CHECK(allocated.state_bytes == full);
    CHECK(later.state_bytes == full);
    CHECK(far.state_bytes == full);
    // Stream 1,000 segments (as far as learned positions go); the allocation never changes.
    std::vector<float> lp(size_t(T * V));
    for (int64_t pos = 0; pos + T <= std::min(segments * T, positions); pos += T) {
      std::vector<int32_t> seg(g.ids.begin() + (pos % int64_t(g.ids.size() - T)), g.ids.begin() + (pos % int64_t(g.ids.size() - T)) + T);
      if (tern_session_append(s, seg.data(), T, lp.data()) != TERN_OK) FAIL(tern_session_last_error(s));
    }
    tern_memory_plan after{};
    REQUIRE(tern_session_memory(s, &after) == TERN_OK);
    CHECK(after.state_bytes == allocated.state_bytes);
    for (float v : lp) REQUIRE(std::isfinite(v));
    tern_session_free(s);
    tern_model_free(g.model);
  }
}
