// SPDX-License-Identifier: MIT
// Routing attention (ops/routing.h): the reference kernel against independent formulas for its two corner cases and
// its sensitivity to centroids and window, continuing a sequence (each later position as row t over 0..t; Vulkan
// refuses it), the planner's bytes, the loader's and the converter's checks, and the reference-family goldens of
// tools/reference/make_goldens.py. Continuing and the goldens run on each backend (Vulkan also against the CPU). The op against the reference (routing heads
// alone and mixed with local heads, windows shorter and longer than the sequence, repeated rows so that scores tie)
// is a case of the op case table (support/op_cases.h, test_backend_ops), on every backend.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "kind_graphs.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "ops/routing.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::make_session;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;

using tern::test::build_routing_graph;
using tern::test::random_centroids;
using tern::test::RoutingCase;
using tern::test::RoutingGraph;
using tern::test::routing_spec;

namespace {

constexpr double kOpTolerance = 1e-5;
constexpr double kModelTolerance = 1e-4;

}  // namespace

TEST_CASE("routing reference: local heads are chunked attention, one all-holding cluster is dense attention",
          "[attention][routing]") {
  const int heads = 3, dh = 8;
  const int64_t n = 90, inner = heads * dh;
  const float scale = 0.35f;
  const std::vector<float> qkv = random_floats(size_t(n * 3 * inner), 12, -1.5f, 1.5f);
  const RoutingCase c{heads, dh, {{}, 1, 1000, 1, 16}};
  const std::vector<float> mu = random_centroids(c, 13);
  std::vector<float> got(size_t(n * inner));
  ref::routing_attention(qkv.data(), n, routing_spec(c, scale, mu), got.data());

  // Head 0 against the windowed kernel's chunked pattern (own chunk of 16 and the one before).
  AttentionPattern chunked;
  chunked.kind = PatternKind::kChunked;
  chunked.heads = heads;
  chunked.chunk = 16;
  chunked.chunks_before = 1;
  std::vector<float> local(size_t(n * inner));
  ref::attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0, heads, dh, scale,
                 chunked, local.data());
  // Heads 1-2: the single cluster holds every position, so each query attends all earlier keys with the normalised
  // query and key, once: dense attention on normalised q and k, divided by 1 + count_eps.
  std::vector<float> normalised = qkv;
  for (int64_t i = 0; i < n; ++i) {
    for (int part = 0; part < 2; ++part) {
      for (int h = 0; h < heads; ++h) {
        float* x = &normalised[size_t(i * 3 * inner + part * inner + h * dh)];
        routing_normalize(x, dh, 1e-6f, x);
      }
    }
  }
  AttentionPattern dense;
  dense.heads = heads;
  std::vector<float> full(size_t(n * inner));
  ref::attention(normalised.data(), 3 * inner, normalised.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0, heads,
                 dh, scale, dense, full.data());
  double worst_local = 0, worst_routing = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < dh; ++d) {
      worst_local = std::max(worst_local, double(std::fabs(got[size_t(i * inner + d)] - local[size_t(i * inner + d)])));
      for (int h = 1; h < heads; ++h) {
        const size_t at = size_t(i * inner + h * dh + d);
        worst_routing = std::max(worst_routing, double(std::fabs(got[at] - full[at] / 1.01f)));
      }
    }
  }
  CHECK(worst_local < 1e-5);
  CHECK(worst_routing < 1e-5);
}

TEST_CASE("routing reference: membership follows the centroids and the window", "[attention][routing]") {
  const int heads = 2, dh = 16;
  const int64_t n = 200, inner = heads * dh;
  const std::vector<float> qkv = random_floats(size_t(n * 3 * inner), 21, -1.5f, 1.5f);
  const RoutingCase c{heads, dh, {{}, 6, 30, 0, 1}};
  std::vector<float> mu = random_centroids(c, 22);
  std::vector<float> base(size_t(n * inner)), other(size_t(n * inner));
  ref::routing_attention(qkv.data(), n, routing_spec(c, 0.25f, mu), base.data());
  for (float& m : mu) m = -m;  // opposite centroids pick other members
  ref::routing_attention(qkv.data(), n, routing_spec(c, 0.25f, mu), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
  RoutingCase wider = c;
  wider.kind.window = 60;
  for (float& m : mu) m = -m;
  ref::routing_attention(qkv.data(), n, routing_spec(wider, 0.25f, mu), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
  // With 6 clusters of 30 out of 200 positions, some positions join no cluster and get zeros.
  int64_t zero_rows = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool zero = true;
    for (int d = 0; d < inner; ++d) zero = zero && base[size_t(i * inner + d)] == 0.0f;
    zero_rows += zero;
  }
  CHECK(zero_rows > 0);
  CHECK(zero_rows < n);
}

TEST_CASE("routing op: a later call runs each position as row t of the op over 0..t (CPU), and Vulkan refuses at "
          "creation a session that may make one",
          "[attention][routing][streaming][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const RoutingCase c{2, 8, {{}, 3, 8, 1, 8}};  // a local head in chunks of 8 and a routing head, 3 clusters of 8
  const int64_t rows = 50, n = 40, first = 30, inner = 16;
  RoutingGraph rg = build_routing_graph(c, rows, 0.3f, 9);
  tern_model* model = test::finish_and_load(rg.g, rg.y, "routing_append", 0);
  if (backend == TERN_BACKEND_VULKAN) {
    CHECK(test::refused_session_on(backend, model, 64) == TERN_UNSUPPORTED);
    CHECK_THAT(std::string(tern_last_error()),
               Catch::Contains("ATTENTION 'attn'") && Catch::Contains("Routing attention runs on the CPU backend only"));
  }
  tern_session* s = backend == TERN_BACKEND_VULKAN ? test::make_forward_session_on(backend, model, 1, 64)
                                                   : test::make_session_on(backend, model, 1, 64);
  const std::vector<int32_t> ids = random_ids(n, rows, 10);
  const RoutingAttention spec = routing_spec(c, 0.3f, rg.centroids);
  std::vector<float> qkv(size_t(n * 3 * inner)), out(size_t(n * inner));
  ref::embedding(rg.g.table.data(), 3 * inner, ids.data(), n, qkv.data());
  // Row t of the reference over the prefix 0..t (ops/routing.h, "Continuing a sequence").
  auto prefix_rows = [&](int64_t count, int64_t from, int64_t to) {
    std::vector<float> all(size_t(count * inner));
    ref::routing_attention(qkv.data(), count, spec, all.data());
    return std::vector<float>(all.begin() + from * inner, all.begin() + to * inner);
  };
  const double tolerance = test::backend_tolerance(backend, kOpTolerance);
  REQUIRE(tern_session_append(s, ids.data(), first, out.data()) == TERN_OK);
  std::vector<float> want = prefix_rows(first, 0, first);
  CHECK(relative_error(out.data(), want.data(), want.size()) <= tolerance);
  if (backend == TERN_BACKEND_VULKAN) {
    CHECK(tern_session_append(s, ids.data() + first, 1, out.data()) == TERN_UNSUPPORTED);
    CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("forward_only"));
  } else {
    // Calls of 1, 3 and 6 positions: each position alone, in order.
    int64_t at = first;
    for (int64_t len : {1, 3, 6}) {
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_append(s, ids.data() + at, len, out.data()) == TERN_OK);
      for (int64_t t = at; t < at + len; ++t) {
        want = prefix_rows(t + 1, t, t + 1);
        INFO("position " << t);
        CHECK(relative_error(out.data() + (t - at) * inner, want.data(), size_t(inner)) <= tolerance);
      }
      at += len;
    }
    REQUIRE(at == n);
  }
  REQUIRE(tern_session_forward(s, ids.data(), n, out.data()) == TERN_OK);
  want = prefix_rows(n, 0, n);
  CHECK(relative_error(out.data(), want.data(), out.size()) <= tolerance);
  tern_session_free(s);
  tern_model_free(model);
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("routing op: the planner's bytes grow linearly with n, never as n x n", "[attention][routing][memory]") {
  const RoutingCase c{4, 32, {{}, 64, 256, 2, 128}};  // 64 clusters of 256: about n / 64 members each at 16k
  RoutingGraph rg = build_routing_graph(c, 50, 0.2f, 31);
  tern_model* model = test::finish_and_load(rg.g, rg.y, "routing_plan", 0);
  // Scratch linear in n, plus the clusters' fixed [K, w] part. The state a later call continues from is bounded:
  // 2 local heads' rings of 2 * 128 keys and values, and per routing head 64 clusters of 256 slots (position, key
  // score, key, value, query score).
  const uint64_t state = 2 * 256 * (2 * 32) * 4 + 2 * 64 * 256 * (1 + 1 + 32 + 32 + 1) * 4;
  test::check_plan_linear_in_n(model, 3.0, 0, state);
  tern_model_free(model);
}

TEST_CASE("routing op: the loader checks its params and centroids", "[attention][routing]") {
  struct Case {
    std::string what;
    fb::RoutingT kind;
    std::vector<int64_t> mu_shape;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"centroid shape", {{}, 3, 8, 0, 1}, {2, 4, 8}, "expected [2, 3, 8]"},
      {"local heads", {{}, 3, 8, 2, 4}, {1, 3, 8}, "local_heads 2 must be in [0, heads - 1]"},
      {"clusters", {{}, 0, 8, 0, 1}, {2, 1, 8}, "routing clusters 0 must be in"},
      {"window", {{}, 3, 0, 0, 1}, {2, 3, 8}, "routing window 0 must be in"},
      {"local chunk", {{}, 3, 8, 1, 0}, {1, 3, 8}, "routing local_chunk 0 must be in"},
  };
  for (const Case& c : cases) {
    test::OpGraph g = test::start_graph(10, 3 * 16, 5);
    int64_t numel = 1;
    for (int64_t d : c.mu_shape) numel *= d;
    const int32_t mu = test::add_constant(g, "centroids", c.mu_shape, random_floats(size_t(numel), 6));
    const int32_t y = g.graph.add_value("y", fb::DType::F32, 16).value();
    const fb::AttentionParamsT p = convert::attention_params(2, 8, 0.35f, c.kind);
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {mu}, p).ok());
    INFO(c.what);
    test::expect_load_rejected(g, y, "routing_bad", c.message);
  }
}

TEST_CASE("routing goldens: one forward matches PyTorch (and, on Vulkan, the CPU path)", "[model][routing][vulkan]") {
  TERN_EACH_BACKEND(backend);
  // groups_routing_sliding: routing heads beside sliding-window heads in one layer (head groups)
  for (const char* name : {"routing_only", "routing_mixed", "groups_routing_sliding"}) {
    const std::string dir = test::source_path(std::string("tests/goldens/") + name);
    std::vector<int32_t> ids;
    npy::Array golden;
    std::string error;
    INFO(name << ": " << error);
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    REQUIRE(npy::read_f32(dir + "/logits.npy", &golden, &error));
    const std::string out = test::scratch_dir(std::string("golden_") + name) + "/model.tern";
    convert::ConvertOptions opts;
    opts.quiet = true;
    const Status st = convert::convert_checkpoint(dir, out, opts);
    INFO(st.message());
    REQUIRE(st.ok());
    tern_model* model = nullptr;
    REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
    const int64_t n = int64_t(ids.size());
    if (backend == TERN_BACKEND_VULKAN) {
      std::vector<float> logits(golden.data.size()), cpu(golden.data.size());
      tern_session* s = test::make_forward_session_on(backend, model, 1);  // Vulkan: whole sequences only
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_forward(s, ids.data(), n, logits.data()) == TERN_OK);
      tern_session_free(s);
      s = make_session(model, 2);
      REQUIRE(tern_session_forward(s, ids.data(), n, cpu.data()) == TERN_OK);
      tern_session_free(s);
      const double err = relative_error(logits.data(), golden.data.data(), logits.size());
      const double vs_cpu = relative_error(logits.data(), cpu.data(), logits.size());
      INFO("relative error " << err << ", vs CPU " << vs_cpu);
      CHECK(err <= kModelTolerance);
      CHECK(vs_cpu <= kModelTolerance);
    }
    for (int threads : {1, 2}) {
      if (backend != TERN_BACKEND_CPU) break;
      tern_session* s = make_session(model, threads);
      std::vector<float> logits(golden.data.size());
      INFO("threads " << threads << ": " << tern_session_last_error(s));
      REQUIRE(tern_session_forward(s, ids.data(), n, logits.data()) == TERN_OK);
      const double err = relative_error(logits.data(), golden.data.data(), logits.size());
      INFO("relative error " << err);
      CHECK(err <= kModelTolerance);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("routing configs: malformed attention objects are conversion errors", "[converter][routing]") {
  const std::string golden = test::source_path("tests/goldens/routing_only");
  struct Case {
    std::string attention;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"kind": "routing", "window": 48})", "clusters"},
      {R"({"kind": "routing", "clusters": 6})", "window"},
      {R"({"kind": "routing", "clusters": 6, "window": 48, "local_heads": 4, "local_chunk": 8})", "leaves no routing head"},
      {R"({"kind": "routing", "clusters": 6, "window": 48, "local_heads": 1})", "local_chunk"},
      {R"({"kind": "routing", "clusters": -2, "window": 48})", "clusters"},
  };
  for (const Case& c : cases) {
    const std::string dir = test::scratch_dir("routing_bad_config");
    std::ifstream in(golden + "/config.json");
    std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = config.find("\"attention\"");
    REQUIRE(at != std::string::npos);
    const size_t end = config.find('}', at);
    config = config.substr(0, at) + "\"attention\": " + c.attention + config.substr(end + 1);
    std::ofstream(dir + "/config.json") << config;
    std::filesystem::copy_file(golden + "/model.safetensors", dir + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    convert::ConvertOptions opts;
    opts.quiet = true;
    const Status st = convert::convert_checkpoint(dir, dir + "/model.tern", opts);
    INFO(c.attention << " -> " << st.message());
    CHECK_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains(c.message));
    CHECK_FALSE(std::filesystem::exists(dir + "/model.tern"));
  }
}
