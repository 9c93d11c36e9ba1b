// Compressive memory (ops/compressive.h; reference family kind "compressive"): the CPU kernel against the reference
// kernel segment after segment, the goldens of tools/reference/make_compressive_goldens.py streamed segment by
// segment, and a state that stops growing once both memories are full.
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

}  // namespace

TEST_CASE("compressive op: CPU kernel matches the reference segment after segment", "[attention][compressive]") {
  std::vector<CompOp> ops(4);
  ops[1].how = fb::Compression::MEAN_POOL;
  ops[1].rate = 4;
  ops[1].mem_len = 8;
  ops[2].how = fb::Compression::MAX_POOL;
  ops[2].bias = false;
  ops[2].cmem_len = 30;
  ops[3].rate = 1;  // every evicted row kept as is... through the conv
  ops[3].mem_len = 70;
  ops[3].heads = 3;
  const int64_t n = 150, rows = 41;
  for (size_t c = 0; c < ops.size(); ++c) {
    const CompOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
    test::OpGraph g = test::start_graph(rows, d, uint32_t(500 + 10 * c));
    Compressive spec;
    spec.heads = op.heads;
    spec.head_dim = op.dh;
    spec.d = d;
    spec.mem_len = op.mem_len;
    spec.cmem_len = op.cmem_len;
    spec.rate = op.rate;
    spec.compression = op.how;
    spec.scale = float(1.0 / std::sqrt(double(op.dh)));
    const std::vector<float> qkv = random_floats(size_t(3 * inner * d), uint32_t(501 + 10 * c), -0.4f, 0.4f);
    const std::vector<float> qkv_b = random_floats(size_t(3 * inner), uint32_t(502 + 10 * c), -0.1f, 0.1f);
    const std::vector<float> conv_w = random_floats(size_t(d * op.rate * d), uint32_t(503 + 10 * c), -0.2f, 0.2f);
    const std::vector<float> conv_b = random_floats(size_t(d), uint32_t(504 + 10 * c), -0.1f, 0.1f);
    std::vector<int32_t> w = {test::add_constant(g, "qkv", {3 * inner, d}, qkv), -1, -1, -1};
    spec.qkv = qkv.data();
    if (op.bias) {
      w[1] = test::add_constant(g, "qkv_b", {3 * inner}, qkv_b);
      spec.qkv_bias = qkv_b.data();
    }
    if (op.how == fb::Compression::CONV) {
      w[2] = test::add_constant(g, "conv_w", {d, op.rate * d}, conv_w);
      w[3] = test::add_constant(g, "conv_b", {d}, conv_b);
      spec.conv_weight = conv_w.data();
      spec.conv_bias = conv_b.data();
    }
    const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
    convert::params::Attention p{op.heads, op.dh, spec.scale, true,
                                 convert::params::Compressive{int32_t(op.mem_len), int32_t(op.cmem_len), int32_t(op.rate), op.how}};
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, w, p).ok());
    tern_model* model = test::finish_and_load(g, y, "compressive_op" + std::to_string(c), 0);
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
        tern_memory_plan allocated{}, far{};
        REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
        REQUIRE(tern_session_plan(s, 1000 * n, &far) == TERN_OK);
        const uint64_t state = uint64_t(op.mem_len + op.rate - 1 + op.cmem_len) * uint64_t(d) * sizeof(float);
        CHECK(allocated.state_bytes == state);
        CHECK(far.state_bytes == state);
        tern_session_free(s);
      }
    }
    tern_model_free(model);
  }
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

TEST_CASE("compressive goldens: segment by segment with both memories matches model.py", "[model][compressive]") {
  for (const char* name : kGoldens) {
    CompGolden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), V = g.logits.shape[1], T = g.segment();
    for (int threads : {1, 2}) {
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
