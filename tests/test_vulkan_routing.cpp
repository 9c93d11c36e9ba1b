// Routing attention on the Vulkan backend (runtime/src/vulkan/ops_routing.cpp): against the reference kernel and the
// CPU path on random inputs (routing heads alone and with local heads, windows shorter and longer than the sequence,
// few distinct rows so that cluster scores tie and the tie rule decides membership, one session run at several
// lengths), whole sequences only (a continuing append is TERN_UNSUPPORTED, as on the CPU), and no streaming state.
#include <catch2/catch.hpp>
#include <random>

#include "op_graph.h"
#include "ops/reference.h"
#include "ops/routing.h"
#include "test_support.h"

using namespace tern;
using tern::test::make_session_on;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kVulkanTolerance = 1e-4;

struct Case {
  int heads, dh;
  convert::params::Routing kind;
  int64_t rows;  // distinct input rows: few rows, many equal scores
};

struct RoutingModel {
  tern_model* model = nullptr;
  std::vector<float> table, centroids;
};

RoutingModel routing_model(const Case& c, float scale, uint32_t seed, const std::string& name) {
  const int64_t inner = int64_t(c.heads) * c.dh;
  auto g = test::start_graph(c.rows, 3 * inner, seed);
  const int64_t routing_rows = int64_t(c.heads - c.kind.local_heads) * c.kind.clusters;
  std::vector<float> mu = random_floats(size_t(routing_rows * c.dh), seed + 1, -1.7f, 1.7f);
  for (int64_t r = 0; r < routing_rows; ++r) routing_normalize(&mu[size_t(r * c.dh)], c.dh, 1e-6f, &mu[size_t(r * c.dh)]);
  const int32_t w = test::add_constant(g, "centroids", {c.heads - c.kind.local_heads, c.kind.clusters, c.dh}, mu);
  const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p{c.heads, c.dh, scale, true, c.kind};
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {w}, p).ok());
  RoutingModel m;
  m.table = g.table;
  m.centroids = mu;
  m.model = test::finish_and_load(g, y, name, 0);
  return m;
}

std::vector<float> reference(const Case& c, const RoutingModel& m, float scale, const std::vector<int32_t>& ids) {
  const int64_t n = int64_t(ids.size()), inner = int64_t(c.heads) * c.dh;
  std::vector<float> qkv(size_t(n * 3 * inner)), out(size_t(n * inner));
  ref::embedding(m.table.data(), 3 * inner, ids.data(), n, qkv.data());
  RoutingAttention a;
  a.heads = c.heads;
  a.head_dim = c.dh;
  a.scale = scale;
  a.clusters = c.kind.clusters;
  a.window = c.kind.window;
  a.local_heads = c.kind.local_heads;
  a.local_chunk = c.kind.local_chunk;
  a.centroids = m.centroids.data();
  ref::routing_attention(qkv.data(), n, a, out.data());
  return out;
}

std::vector<int32_t> ids_for(int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(size_t(n), 0);
  for (auto& id : ids) id = int32_t(rng() % uint32_t(rows));
  return ids;
}

}  // namespace

TEST_CASE("vulkan: routing attention matches the reference and the CPU path", "[vulkan][attention][routing]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::vector<Case> cases = {
      {2, 8, {3, 8, 0, 1}, 64},     // routing heads only, clusters overlap and leave positions out
      {4, 16, {5, 24, 1, 7}, 64},   // one local head, chunks of 7
      {3, 8, {2, 100, 2, 16}, 64},  // window longer than the sequence: every position in every cluster
      {2, 8, {4, 9, 0, 1}, 3},      // three distinct rows: scores tie, the lower position wins
      {2, 64, {2, 40, 1, 32}, 64},  // wide heads
  };
  const float scale = 0.35f;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t inner = int64_t(c.heads) * c.dh, most = 300;
    RoutingModel m = routing_model(c, scale, uint32_t(50 + ci), "vk_routing" + std::to_string(ci));
    tern_session* gpu = make_session_on(TERN_BACKEND_VULKAN, m.model, 1, most, most);
    tern_session* cpu = make_session_on(TERN_BACKEND_CPU, m.model, 2, most, most);
    for (int64_t n : {int64_t(70), int64_t(17), int64_t(1), int64_t(300)}) {
      const std::vector<int32_t> ids = ids_for(n, c.rows, uint32_t(7 * n + ci));
      std::vector<float> got(size_t(n * inner)), base(size_t(n * inner));
      INFO("case " << ci << ", n " << n << ": " << tern_session_last_error(gpu));
      REQUIRE(tern_session_forward(gpu, ids.data(), n, got.data()) == TERN_OK);
      REQUIRE(tern_session_forward(cpu, ids.data(), n, base.data()) == TERN_OK);
      const std::vector<float> want = reference(c, m, scale, ids);
      const double vs_ref = relative_error(got.data(), want.data(), got.size());
      const double vs_cpu = relative_error(got.data(), base.data(), got.size());
      INFO("vs reference " << vs_ref << ", vs CPU " << vs_cpu);
      CHECK(vs_ref <= kVulkanTolerance);
      CHECK(vs_cpu <= kVulkanTolerance);
    }
    tern_memory_plan mem{};
    REQUIRE(tern_session_memory(gpu, &mem) == TERN_OK);
    CHECK(mem.state_bytes == 0);  // no streaming state: whole sequences only
    tern_session_free(gpu);
    tern_session_free(cpu);
    tern_model_free(m.model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan: routing attention runs whole sequences only, appending is a clear error", "[vulkan][attention][routing][streaming]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const Case c{2, 8, {3, 8, 1, 8}, 50};
  RoutingModel m = routing_model(c, 0.3f, 9, "vk_routing_append");
  tern_session* s = make_session_on(TERN_BACKEND_VULKAN, m.model, 1, 64);
  const std::vector<int32_t> ids = ids_for(40, c.rows, 10);
  std::vector<float> out(size_t(40 * 16));
  REQUIRE(tern_session_append(s, ids.data(), 30, out.data()) == TERN_OK);
  CHECK(tern_session_append(s, ids.data() + 30, 1, out.data()) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("ATTENTION 'attn'") && Catch::Contains("cannot continue one"));
  REQUIRE(tern_session_forward(s, ids.data(), 40, out.data()) == TERN_OK);
  const std::vector<float> want = reference(c, m, 0.3f, ids);
  CHECK(relative_error(out.data(), want.data(), out.size()) <= kVulkanTolerance);
  tern_session_free(s);
  tern_model_free(m.model);
  CHECK(test::vulkan_validation_messages() == 0);
}
