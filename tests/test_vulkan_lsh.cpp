// Reformer on the Vulkan backend: LSH attention (hash, sort, chunked attention over the circular window, round
// combine; the unchunked path for short calls; padding) against the reference kernel and the CPU path on random
// inputs; CONCAT and AXIAL positions; appending to an LSH sequence refused as on the CPU; and the Reformer goldens
// (tests/goldens/reformer_*) within 1e-4. Small sizes: CI runs these on lavapipe. Without a device each case ends as
// a visible skip.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "op_graph.h"
#include "ops/lsh.h"
#include "ops/reference.h"
#include "test_support.h"

using namespace tern;
using tern::test::make_session_on;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;

namespace {

constexpr double kVulkanTolerance = 1e-4;

convert::params::Lsh lsh_kind(int32_t chunk, int32_t before, int32_t after, int32_t hashes, std::vector<int32_t> buckets,
                              int32_t pad_to, int32_t pad_above) {
  convert::params::Lsh k;
  k.chunk = chunk;
  k.chunks_before = before;
  k.chunks_after = after;
  k.hashes = hashes;
  k.buckets = std::move(buckets);
  k.pad_to = pad_to;
  k.pad_above = pad_above;
  return k;
}

struct LshCase {
  int heads, dh;
  convert::params::Lsh kind;
  std::vector<int64_t> lengths;  // calls of one session, each a whole sequence
};

int64_t rot_half(const convert::params::Lsh& k) {
  int64_t sum = 0;
  for (int32_t f : k.buckets) sum += f;
  return sum / 2;
}

LshAttention spec_for(const LshCase& c, float scale, const std::vector<float>& rotations) {
  LshAttention a;
  a.heads = c.heads;
  a.head_dim = c.dh;
  a.scale = scale;
  a.chunk = c.kind.chunk;
  a.before = c.kind.chunks_before;
  a.after = c.kind.chunks_after;
  a.hashes = c.kind.hashes;
  a.buckets = 1;
  for (int32_t f : c.kind.buckets) {
    a.factors.push_back(f);
    a.buckets *= f;
  }
  a.rot_half = rot_half(c.kind);
  a.pad_to = c.kind.pad_to;
  a.pad_above = c.kind.pad_above;
  a.rotations = rotations.data();
  return a;
}

std::vector<float> forward_on(tern_backend backend, tern_model* model, const std::vector<int32_t>& ids, int64_t width,
                              int64_t max_tokens) {
  tern_session* s = make_session_on(backend, model, 2, max_tokens);
  std::vector<float> out(ids.size() * size_t(width));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, ids.data(), int64_t(ids.size()), out.data()) == TERN_OK);
  tern_session_free(s);
  return out;
}

}  // namespace

TEST_CASE("vulkan: LSH attention matches the reference kernel and the CPU path", "[vulkan][attention][lsh]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::vector<LshCase> cases = {
      {2, 16, lsh_kind(16, 1, 0, 3, {8}, 32, 16), {7, 16, 17, 100}},  // unchunked, padding to 32, several rounds
      {3, 8, lsh_kind(8, 2, 1, 2, {4, 6}, 24, 8), {8, 9, 61}},        // factorised buckets, chunks after
      {1, 12, lsh_kind(10, 1, 0, 1, {16}, 10, 10), {33}},             // one round, dh 12
      {2, 8, lsh_kind(8, 3, 1, 1, {4}, 8, 8), {16, 40}},              // a window of 5 chunks over as few as 2
      {2, 16, lsh_kind(16, 2, 0, 8, {2, 4}, 16, 8), {40}},            // many rounds wrapping around the sorted axis
  };
  const int64_t rows = 97;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const LshCase& c = cases[ci];
    const int64_t inner = int64_t(c.heads) * c.dh;
    const float scale = 1.0f / std::sqrt(float(c.dh));
    auto g = test::start_graph(rows, 2 * inner, uint32_t(300 + ci));
    const std::vector<float> rotations = random_floats(size_t(inner * c.kind.hashes * rot_half(c.kind)), uint32_t(310 + ci), -1.5f, 1.5f);
    const int32_t rot = test::add_constant(g, "rotations", {c.heads, c.dh, c.kind.hashes, rot_half(c.kind)}, rotations);
    const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
    convert::params::Attention p;
    p.heads = c.heads;
    p.head_dim = c.dh;
    p.scale = scale;
    p.kind = c.kind;
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {rot}, p).ok());
    tern_model* model = test::finish_and_load(g, y, "vk_lsh" + std::to_string(ci), 0);
    const int64_t max_n = *std::max_element(c.lengths.begin(), c.lengths.end());
    tern_session* gpu = make_session_on(TERN_BACKEND_VULKAN, model, 1, max_n);
    tern_session* cpu = make_session_on(TERN_BACKEND_CPU, model, 2, max_n);
    const LshAttention spec = spec_for(c, scale, rotations);
    for (int64_t n : c.lengths) {
      const std::vector<int32_t> ids = random_ids(n, rows, uint32_t(320 + ci + n));
      std::vector<float> qkv(size_t(n * 2 * inner)), want(size_t(n * inner)), got(size_t(n * inner)),
          on_cpu(size_t(n * inner));
      ref::embedding(g.table.data(), 2 * inner, ids.data(), n, qkv.data());
      ref::lsh_attention(qkv.data(), n, spec, want.data());
      INFO("case " << ci << ", n " << n << " (padded " << spec.padded_length(n) << ", chunked " << spec.chunked(n)
                   << "): " << tern_session_last_error(gpu));
      REQUIRE(tern_session_forward(gpu, ids.data(), n, got.data()) == TERN_OK);
      REQUIRE(tern_session_forward(cpu, ids.data(), n, on_cpu.data()) == TERN_OK);
      const double vs_ref = relative_error(got.data(), want.data(), got.size());
      const double vs_cpu = relative_error(got.data(), on_cpu.data(), got.size());
      INFO("Vulkan vs reference " << vs_ref << ", vs CPU " << vs_cpu);
      CHECK(vs_ref <= kVulkanTolerance);
      CHECK(vs_cpu <= kVulkanTolerance);
    }
    tern_session_free(gpu);
    tern_session_free(cpu);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan: LSH attention runs whole sequences only, and appending is a clear error", "[vulkan][attention][lsh][streaming]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const LshCase c{2, 8, lsh_kind(8, 1, 0, 2, {4}, 8, 8), {}};
  auto g = test::start_graph(50, 32, 330);
  const int32_t rot = test::add_constant(g, "rotations", {2, 8, 2, 2}, random_floats(64, 331));
  const int32_t y = g.graph.add_value("y", fb::DType::F32, 16).value();
  convert::params::Attention p{2, 8, 0.3f, true, c.kind};
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {rot}, p).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_lsh_append", 0);
  tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1, 64);
  const std::vector<int32_t> ids = random_ids(40, 50, 332);
  std::vector<float> out(size_t(40 * 16)), again(size_t(40 * 16));
  REQUIRE(tern_session_append(s, ids.data(), 30, out.data()) == TERN_OK);  // the first call starts the sequence
  CHECK(tern_session_append(s, ids.data() + 30, 1, out.data()) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("LSH attention") && Catch::Contains("cannot continue one"));
  REQUIRE(tern_session_forward(s, ids.data(), 40, out.data()) == TERN_OK);
  const std::vector<float> cpu = forward_on(TERN_BACKEND_CPU, model, ids, 16, 64);
  CHECK(relative_error(out.data(), cpu.data(), cpu.size()) <= kVulkanTolerance);
  // No state; device memory (arena + LSH scratch) linear in max_tokens, never n x n.
  tern_memory_plan m64{}, m1024{};
  REQUIRE(tern_session_memory(s, &m64) == TERN_OK);
  tern_session* big = make_session_on(TERN_BACKEND_VULKAN, model, 1, 1024);
  REQUIRE(tern_session_memory(big, &m1024) == TERN_OK);
  CHECK(m64.state_bytes == 0);
  CHECK(m1024.state_bytes == 0);
  INFO("arena " << m64.arena_bytes << " -> " << m1024.arena_bytes);
  CHECK(m1024.arena_bytes > 8 * m64.arena_bytes);
  CHECK(m1024.arena_bytes < 17 * m64.arena_bytes);
  tern_session_free(big);
  tern_session_free(s);
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan: concat and axial positions match the reference, in one call and in segments", "[vulkan][ops][reformer]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // ids -> EMBEDDING [n, 12] -> POSITION(AXIAL rows [5, 4], cols [7, 8]) -> p; CONCAT(x, p) -> [n, 24].
  test::OpGraph g = test::start_graph(30, 12, 340);
  const std::vector<float> rows = random_floats(5 * 4, 341), cols = random_floats(7 * 8, 342);
  const int32_t r = test::add_constant(g, "rows", {5, 4}, rows);
  const int32_t c = test::add_constant(g, "cols", {7, 8}, cols);
  const int32_t p = g.graph.add_value("p", fb::DType::F32, 12).value();
  convert::params::Position pos;
  pos.kind = fb::PositionKind::AXIAL;
  pos.max_positions = 35;
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {p}, {r, c}, pos).ok());
  const int32_t y = g.graph.add_value("y", fb::DType::F32, 24).value();
  REQUIRE(g.graph.add_op(fb::OpCode::CONCAT, "cat", {g.x, p}, {y}, {}, convert::params::Concat{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_concat_axial", 35);
  const int64_t n = 35;
  const std::vector<int32_t> ids = random_ids(n, 30, 343);
  std::vector<float> x(size_t(n * 12)), pe(size_t(n * 12)), want(size_t(n * 24));
  ref::embedding(g.table.data(), 12, ids.data(), n, x.data());
  ref::axial_position(rows.data(), 4, cols.data(), 7, 8, 0, n, x.data(), pe.data());
  ref::concat(x.data(), 12, pe.data(), 12, n, want.data());
  for (int64_t split : {n, int64_t(6)}) {
    tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1, n);
    std::vector<float> got(size_t(n * 24));
    for (int64_t at = 0; at < n; at += split) {
      const int64_t len = std::min(split, n - at);
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_append(s, ids.data() + at, len, got.data() + at * 24) == TERN_OK);
    }
    INFO("segments of " << split);
    CHECK(relative_error(got.data(), want.data(), got.size()) == 0.0);  // copies and one add: exact
    tern_session_free(s);
  }
  // More tokens than the table holds: refused at session creation.
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = TERN_BACKEND_VULKAN;
  so.max_tokens = 36;
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("axial positions"));
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("reformer goldens on Vulkan: one forward reproduces HF's logits and the CPU path", "[model][vulkan][reformer][lsh]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : {"reformer_mixed_factorized", "reformer_hashes_int", "reformer_learned_positions",
                           "reformer_short_unchunked", "reformer_wrapping_rounds"}) {
    const std::string dir = test::source_path(std::string("tests/goldens/") + name);
    std::vector<int32_t> ids;
    npy::Array logits;
    std::string error;
    INFO(name << ": " << error);
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    REQUIRE(npy::read_f32(dir + "/logits.npy", &logits, &error));
    const std::string out = test::scratch_dir(std::string("vk_") + name) + "/model.tern";
    Status st = convert::convert_checkpoint(dir, out, {true});
    INFO(st.message());
    REQUIRE(st.ok());
    tern_model* model = nullptr;
    REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
    const int64_t n = int64_t(ids.size()), vocab = logits.shape[1];
    const std::vector<float> gpu = forward_on(TERN_BACKEND_VULKAN, model, ids, vocab, n);
    const std::vector<float> cpu = forward_on(TERN_BACKEND_CPU, model, ids, vocab, n);
    double worst_row = 0;
    for (int64_t r = 0; r < n; ++r) {
      worst_row = std::max(worst_row, relative_error(gpu.data() + r * vocab, logits.data.data() + r * vocab, size_t(vocab)));
    }
    const double vs_golden = relative_error(gpu.data(), logits.data.data(), gpu.size());
    const double vs_cpu = relative_error(gpu.data(), cpu.data(), gpu.size());
    INFO("Vulkan vs HF " << vs_golden << " (worst position " << worst_row << "), vs CPU " << vs_cpu);
    CHECK(vs_golden <= kVulkanTolerance);
    CHECK(worst_row <= kVulkanTolerance);
    CHECK(vs_cpu <= kVulkanTolerance);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}
