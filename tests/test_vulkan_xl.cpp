// Transformer-XL and the Compressive Transformer on the Vulkan backend: ATTENTION of kinds RelativeXL and
// Compressive, ADAPTIVE_EMBEDDING and ADAPTIVE_LOG_SOFTMAX against the reference kernels and the CPU path, streamed
// segment after segment with the memories kept on the device (state bytes equal to the planner's); the HF
// transfo-xl and compressive goldens streamed as their CPU tests do. Without a device every case is a visible skip.
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
using tern::test::make_session;
using tern::test::make_session_on;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kVulkanTolerance = 1e-4;

// Streams ids `segment` at a time; the outputs [n, width].
std::vector<float> stream(tern_session* s, const std::vector<int32_t>& ids, int64_t segment, int64_t width) {
  const auto n = int64_t(ids.size());
  std::vector<float> out(size_t(n * width));
  for (int64_t pos = 0; pos < n; pos += segment) {
    const int64_t len = std::min(segment, n - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * width) == TERN_OK);
  }
  return out;
}

struct XlOp {
  int heads = 2, dh = 8;
  int64_t d = 16, mem_len = 12, clamp_len = 0;
  bool same_length = false, pre_norm = false;
};

}  // namespace

TEST_CASE("Vulkan relative XL attention matches the reference and the CPU path segment after segment",
          "[vulkan][attention][transfo_xl]") {
  TERN_SKIP_WITHOUT_VULKAN();
  std::vector<XlOp> ops(4);
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
    test::OpGraph g = test::start_graph(rows, op.d, seed);
    const auto qkv = random_floats(size_t(3 * inner * op.d), seed + 1, -0.5f, 0.5f);
    const auto r_net = random_floats(size_t(inner * op.d), seed + 2, -0.5f, 0.5f);
    const auto r_w = random_floats(size_t(inner), seed + 3), r_r = random_floats(size_t(inner), seed + 4);
    const auto norm_w = random_floats(size_t(op.d), seed + 5, 0.8f, 1.2f);
    const auto norm_b = random_floats(size_t(op.d), seed + 6, -0.1f, 0.1f);
    std::vector<int32_t> w = {test::add_constant(g, "qkv", {3 * inner, op.d}, qkv),
                              test::add_constant(g, "r_net", {inner, op.d}, r_net),
                              test::add_constant(g, "r_w_bias", {op.heads, op.dh}, r_w),
                              test::add_constant(g, "r_r_bias", {op.heads, op.dh}, r_r), -1, -1, -1};
    if (op.pre_norm) {
      w[4] = test::add_constant(g, "norm_w", {op.d}, norm_w);
      w[5] = test::add_constant(g, "norm_b", {op.d}, norm_b);
    }
    const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
    convert::params::Attention p;
    p.heads = op.heads;
    p.head_dim = op.dh;
    p.scale = float(1.0 / std::sqrt(double(op.dh)));
    p.kind = convert::params::RelativeXL{int32_t(op.mem_len), int32_t(op.clamp_len), op.same_length, 1e-5f};
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, w, p).ok());
    tern_model* model = test::finish_and_load(g, y, "vulkan_relative_xl" + std::to_string(c), 0);
    RelativeXL spec;
    spec.heads = op.heads;
    spec.head_dim = op.dh;
    spec.d = op.d;
    spec.mem_len = op.mem_len;
    spec.clamp_len = op.clamp_len;
    spec.same_length = op.same_length;
    spec.scale = p.scale;
    spec.qkv = qkv.data();
    spec.r_net = r_net.data();
    spec.r_w_bias = r_w.data();
    spec.r_r_bias = r_r.data();
    spec.norm_weight = op.pre_norm ? norm_w.data() : nullptr;
    spec.norm_bias = op.pre_norm ? norm_b.data() : nullptr;
    const std::vector<int32_t> ids = test::random_ids(n, rows, seed + 7);
    std::vector<float> h(size_t(n * op.d));
    ref::embedding(g.table.data(), op.d, ids.data(), n, h.data());
    for (int64_t segment : {int64_t(1), int64_t(9), n}) {
      std::vector<float> want(size_t(n * inner)), memory(size_t(op.mem_len * op.d), 0.0f);
      for (int64_t pos = 0; pos < n; pos += segment) {
        ref::relative_xl_attention(h.data() + pos * op.d, std::min(segment, n - pos), memory.data(), spec,
                                   want.data() + pos * inner);
      }
      tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1, n, segment);
      for (int pass = 0; pass < 2; ++pass) {  // after a reset the memory is zeros again
        REQUIRE(tern_session_reset(s) == TERN_OK);
        const std::vector<float> got = stream(s, ids, segment, inner);
        tern_session* cpu = make_session(model, 2, n, segment);
        const std::vector<float> on_cpu = stream(cpu, ids, segment, inner);
        tern_session_free(cpu);
        INFO("case " << c << ", segment " << segment << ", pass " << pass);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= kVulkanTolerance);
        CHECK(relative_error(got.data(), on_cpu.data(), got.size()) <= kVulkanTolerance);
      }
      tern_memory_plan allocated{}, far{};
      REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
      REQUIRE(tern_session_plan(s, 1000 * segment, &far) == TERN_OK);
      CHECK(allocated.state_bytes == uint64_t(op.mem_len * op.d) * sizeof(float));
      CHECK(far.state_bytes == allocated.state_bytes);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("Vulkan adaptive embedding and log-softmax match the references and the CPU path", "[vulkan][transfo_xl]") {
  TERN_SKIP_WITHOUT_VULKAN();
  struct Case {
    int64_t V, d;
    std::vector<int64_t> cutoffs, dims;
    std::vector<bool> proj;
    bool shared_table;
  };
  const std::vector<Case> cases = {
      {90, 16, {10, 30, 60}, {16, 8, 4, 2}, {false, true, true, true}, false},
      {50, 12, {}, {12}, {false}, false},
      {70, 12, {20, 45}, {9, 9, 9}, {true, true, true}, true},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& a = cases[c];
    test::OpGraph g;
    const int32_t ids = g.graph.add_value("ids", fb::DType::I32, 1).value();
    REQUIRE(g.graph.add_input(ids).ok());
    std::vector<int64_t> ends = {0};
    ends.insert(ends.end(), a.cutoffs.begin(), a.cutoffs.end());
    ends.push_back(a.V);
    auto seed = uint32_t(800 + 20 * c);
    std::vector<std::vector<float>> keep;
    keep.reserve(64);  // pointers into it stay valid
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
    const auto C = int64_t(a.cutoffs.size());
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
        sm_w.push_back(i == 1 ? -1 : constant("b" + s, {rows}, -1, 1));
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
    tern_model* model = test::finish_and_load(g, y, "vulkan_adaptive" + std::to_string(c), 64);
    const int64_t n = 23;
    const std::vector<int32_t> tokens = test::random_ids(n, a.V, uint32_t(900 + c));
    std::vector<float> x(size_t(n * a.d)), want(size_t(n * a.V)), got(size_t(n * a.V)), cpu(size_t(n * a.V));
    ref::adaptive_embedding(tokens.data(), n, in, x.data());
    ref::adaptive_log_softmax(x.data(), n, out, want.data());
    tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1, 64, 32);
    INFO("case " << c << ": " << tern_session_last_error(s));
    REQUIRE(tern_session_forward(s, tokens.data(), n, got.data()) == TERN_OK);
    tern_session* on_cpu = make_session(model, 2, 64, 32);
    REQUIRE(tern_session_forward(on_cpu, tokens.data(), n, cpu.data()) == TERN_OK);
    tern_session_free(on_cpu);
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kVulkanTolerance);
    CHECK(relative_error(got.data(), cpu.data(), got.size()) <= kVulkanTolerance);
    const int32_t bad = int32_t(a.V);
    CHECK(tern_session_forward(s, &bad, 1, got.data()) == TERN_INVALID_ARGUMENT);
    CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("outside the vocabulary"));
    tern_session_free(s);
    tern_model_free(model);
  }
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

namespace {

struct XlGolden {
  nlohmann::json config;
  std::vector<int32_t> ids;
  npy::Array logits;  // [n, V]
  tern_model* model = nullptr;
};

XlGolden load_golden(const std::string& name) {
  const std::string dir = test::source_path("tests/goldens/" + name);
  XlGolden g;
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(dir + "/logits.npy", &g.logits, &error));
  g.config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  const std::string out = test::scratch_dir("vulkan_golden_" + name) + "/model.tern";
  convert::ConvertOptions o;
  o.quiet = true;
  Status st = convert::convert_checkpoint(dir, out, o);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

}  // namespace

TEST_CASE("transfo-xl goldens on Vulkan: segment by segment with the memory on the device", "[model][vulkan][transfo_xl]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : {"transfo_xl_adaptive", "transfo_xl_plain", "transfo_xl_div1_proj"}) {
    XlGolden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), V = g.logits.shape[1], T = g.config["tgt_len"].get<int64_t>();
    const uint64_t state = uint64_t(g.config["n_layer"].get<int64_t>()) * uint64_t(g.config["mem_len"].get<int64_t>()) *
                           uint64_t(g.config["d_model"].get<int64_t>()) * sizeof(float);
    tern_session* s = make_session_on(TERN_BACKEND_VULKAN, g.model, 1, 1 << 20, T);
    for (int pass = 0; pass < 2; ++pass) {  // the second pass after a reset: the memory starts from zeros again
      REQUIRE(tern_session_reset(s) == TERN_OK);
      const std::vector<float> got = stream(s, g.ids, T, V);
      for (int64_t pos = 0; pos < n; pos += T) {
        const size_t off = size_t(pos * V), count = size_t(std::min(T, n - pos) * V);
        const double err = relative_error(got.data() + off, g.logits.data.data() + off, count);
        INFO(name << ", pass " << pass << ", segment at " << pos << ": relative error " << err);
        CHECK(err <= kVulkanTolerance);
      }
    }
    tern_memory_plan allocated{}, far{};
    REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
    REQUIRE(tern_session_plan(s, 1000 * T, &far) == TERN_OK);
    CHECK(allocated.state_bytes == state);
    CHECK(far.state_bytes == state);
    tern_session_free(s);
    // One forward of the whole sequence, and other cuts, against the CPU path cut the same way.
    for (int64_t segment : {n, T / 2}) {
      tern_session* gpu = make_session_on(TERN_BACKEND_VULKAN, g.model, 1, n, segment);
      tern_session* cpu = make_session(g.model, 2, n, segment);
      const std::vector<float> a = stream(gpu, g.ids, segment, V), b = stream(cpu, g.ids, segment, V);
      const double err = relative_error(a.data(), b.data(), a.size());
      INFO(name << ", segment " << segment << ": Vulkan vs CPU " << err);
      CHECK(err <= kVulkanTolerance);
      tern_session_free(gpu);
      tern_session_free(cpu);
    }
    tern_model_free(g.model);
  }
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("Vulkan compressive attention matches the reference and the CPU path segment after segment",
          "[vulkan][attention][compressive]") {
  TERN_SKIP_WITHOUT_VULKAN();
  struct CompOp {
    int heads = 2, dh = 8;
    int64_t mem_len = 12, cmem_len = 5, rate = 3;
    fb::Compression how = fb::Compression::CONV;
    bool bias = true;
  };
  std::vector<CompOp> ops(4);
  ops[1].how = fb::Compression::MEAN_POOL;
  ops[1].rate = 4;
  ops[1].mem_len = 8;
  ops[2].how = fb::Compression::MAX_POOL;
  ops[2].bias = false;
  ops[2].cmem_len = 30;
  ops[3].rate = 1;
  ops[3].mem_len = 20;
  ops[3].heads = 3;
  ops[3].bias = false;  // and a conv without bias
  const int64_t n = 60, rows = 41;
  for (size_t c = 0; c < ops.size(); ++c) {
    const CompOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh, d = inner;
    const auto seed = uint32_t(1500 + 10 * c);
    test::OpGraph g = test::start_graph(rows, d, seed);
    Compressive spec;
    spec.heads = op.heads;
    spec.head_dim = op.dh;
    spec.d = d;
    spec.mem_len = op.mem_len;
    spec.cmem_len = op.cmem_len;
    spec.rate = op.rate;
    spec.compression = op.how;
    spec.scale = float(1.0 / std::sqrt(double(op.dh)));
    const auto qkv = random_floats(size_t(3 * inner * d), seed + 1, -0.4f, 0.4f);
    const auto qkv_b = random_floats(size_t(3 * inner), seed + 2, -0.1f, 0.1f);
    const auto conv_w = random_floats(size_t(d * op.rate * d), seed + 3, -0.2f, 0.2f);
    const auto conv_b = random_floats(size_t(d), seed + 4, -0.1f, 0.1f);
    std::vector<int32_t> w = {test::add_constant(g, "qkv", {3 * inner, d}, qkv), -1, -1, -1};
    spec.qkv = qkv.data();
    if (op.bias) {
      w[1] = test::add_constant(g, "qkv_b", {3 * inner}, qkv_b);
      spec.qkv_bias = qkv_b.data();
    }
    if (op.how == fb::Compression::CONV) {
      w[2] = test::add_constant(g, "conv_w", {d, op.rate * d}, conv_w);
      spec.conv_weight = conv_w.data();
      if (op.bias) {
        w[3] = test::add_constant(g, "conv_b", {d}, conv_b);
        spec.conv_bias = conv_b.data();
      }
    }
    const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
    convert::params::Attention p{op.heads, op.dh, spec.scale, true,
                                 convert::params::Compressive{int32_t(op.mem_len), int32_t(op.cmem_len), int32_t(op.rate), op.how}};
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, w, p).ok());
    tern_model* model = test::finish_and_load(g, y, "vulkan_compressive" + std::to_string(c), 0);
    const std::vector<int32_t> ids = test::random_ids(n, rows, seed + 5);
    std::vector<float> a(size_t(n * d));
    ref::embedding(g.table.data(), d, ids.data(), n, a.data());
    for (int64_t segment : {int64_t(1), int64_t(7), n}) {
      std::vector<float> want(size_t(n * inner));
      CompressiveMemory memory;
      for (int64_t pos = 0; pos < n; pos += segment) {
        ref::compressive_attention(a.data() + pos * d, std::min(segment, n - pos), memory, spec, want.data() + pos * inner);
      }
      tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1, n, segment);
      for (int pass = 0; pass < 2; ++pass) {
        REQUIRE(tern_session_reset(s) == TERN_OK);
        const std::vector<float> got = stream(s, ids, segment, inner);
        tern_session* cpu = make_session(model, 2, n, segment);
        const std::vector<float> on_cpu = stream(cpu, ids, segment, inner);
        tern_session_free(cpu);
        INFO("case " << c << ", segment " << segment << ", pass " << pass);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= kVulkanTolerance);
        CHECK(relative_error(got.data(), on_cpu.data(), got.size()) <= kVulkanTolerance);
      }
      tern_memory_plan allocated{}, far{};
      REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
      REQUIRE(tern_session_plan(s, 1000 * n, &far) == TERN_OK);
      const uint64_t state = uint64_t(op.mem_len + op.rate - 1 + op.cmem_len) * uint64_t(d) * sizeof(float);
      CHECK(allocated.state_bytes == state);
      CHECK(far.state_bytes == state);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("compressive goldens on Vulkan: segment by segment with both memories on the device", "[model][vulkan][compressive]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : {"compressive_conv_mean", "compressive_max_conv_post"}) {
    XlGolden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), V = g.logits.shape[1], T = g.config["segment_length"].get<int64_t>();
    uint64_t full = 0;
    for (const auto& a : g.config["attention"]) {
      full += uint64_t(a["mem_len"].get<int64_t>() + a["rate"].get<int64_t>() - 1 + a["cmem_len"].get<int64_t>()) *
              uint64_t(g.config["hidden_size"].get<int64_t>()) * sizeof(float);
    }
    tern_session* s = make_session_on(TERN_BACKEND_VULKAN, g.model, 1, n, T);
    for (int pass = 0; pass < 2; ++pass) {
      REQUIRE(tern_session_reset(s) == TERN_OK);
      const std::vector<float> got = stream(s, g.ids, T, V);
      for (int64_t pos = 0; pos < n; pos += T) {
        const size_t off = size_t(pos * V), count = size_t(std::min(T, n - pos) * V);
        const double err = relative_error(got.data() + off, g.logits.data.data() + off, count);
        INFO(name << ", pass " << pass << ", segment at " << pos << ": relative error " << err);
        CHECK(err <= kVulkanTolerance);
      }
      const double err = relative_error(got.data(), g.logits.data.data(), got.size());
      INFO(name << ": relative error " << err);
      CHECK(err <= kVulkanTolerance);
    }
    tern_memory_plan allocated{}, far{};
    REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
    REQUIRE(tern_session_plan(s, 1000 * T, &far) == TERN_OK);
    CHECK(allocated.state_bytes == full);
    CHECK(far.state_bytes == full);
    tern_session_free(s);
    tern_model_free(g.model);
  }
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("Vulkan relative XL: a layer too wide for the device's shared memory fails session creation by the limit",
          "[vulkan][attention][transfo_xl]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // memory_project stages a row of d floats in shared memory: d = 65536 needs 256 KiB, more than any device allows.
  const int heads = 1, dh = 4;
  const int64_t d = 65536, inner = heads * dh;
  test::OpGraph g = test::start_graph(3, d, 40);
  std::vector<int32_t> w = {test::add_constant(g, "qkv", {3 * inner, d}, random_floats(size_t(3 * inner * d), 41)),
                            test::add_constant(g, "r_net", {inner, d}, random_floats(size_t(inner * d), 42)),
                            test::add_constant(g, "r_w_bias", {heads, dh}, random_floats(size_t(inner), 43)),
                            test::add_constant(g, "r_r_bias", {heads, dh}, random_floats(size_t(inner), 44))};
  const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p{heads, dh, 0.5f, true, convert::params::RelativeXL{2, 0, false, 1e-5f}};
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, w, p).ok());
  tern_model* model = test::finish_and_load(g, y, "vulkan_relative_xl_wide", 0);
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = TERN_BACKEND_VULKAN;
  so.max_tokens = 8;
  so.max_batch = 4;
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &so, &s) != TERN_OK);
  CHECK(s == nullptr);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("ATTENTION 'attn'") &&
                                                 Catch::Contains("maxComputeSharedMemorySize"));
  tern_model_free(model);
  CHECK(tern::test::vulkan_validation_messages() == 0);
}
