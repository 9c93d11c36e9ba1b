// Reformer LSH attention (ops/lsh.h): the CPU kernel against the reference kernel on random inputs (int and factorised
// buckets, several rounds, neighbouring chunks before and after, padded and unpadded lengths, the unchunked path), the
// loader's checks, whole-sequence-only streaming, and the CONCAT and AXIAL position ops Reformer also uses. The op at
// device sizes, streaming and the position ops run on each backend, Vulkan also against the CPU path.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "op_graph.h"
#include "ops/lsh.h"
#include "ops/reference.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;

using tern::test::make_session;

namespace {

constexpr double kOpTolerance = 1e-5;

struct LshCase {
  int heads = 2, dh = 16;
  convert::params::Lsh kind;
};

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

int64_t rot_half(const convert::params::Lsh& k) {
  int64_t sum = 0;
  for (int32_t f : k.buckets) sum += f;
  return sum / 2;
}

// The spec the reference kernel reads, built from the test's own numbers.
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

struct LshGraph {
  test::OpGraph g;
  std::vector<float> rotations;
  int32_t y = -1;
};

// ids -> EMBEDDING (random qk | v rows) -> ATTENTION(Lsh) -> output.
LshGraph build_lsh_graph(const LshCase& c, int64_t rows, float scale, uint32_t seed) {
  const int64_t inner = int64_t(c.heads) * c.dh;
  const std::vector<int64_t> rot_shape = {c.heads, c.dh, c.kind.hashes, rot_half(c.kind)};
  LshGraph s{test::start_graph(rows, 2 * inner, seed),
             random_floats(size_t(c.heads * c.dh * c.kind.hashes * rot_half(c.kind)), seed + 1, -1.5f, 1.5f), -1};
  const int32_t rot = test::add_constant(s.g, "rotations", rot_shape, s.rotations);
  s.y = s.g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p;
  p.heads = c.heads;
  p.head_dim = c.dh;
  p.scale = scale;
  p.kind = c.kind;
  REQUIRE(s.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {s.g.x}, {s.y}, {rot}, p).ok());
  return s;
}

}  // namespace

TEST_CASE("lsh op: CPU kernel matches the reference kernel", "[attention][lsh]") {
  const std::vector<LshCase> cases = {
      {2, 16, lsh_kind(16, 1, 0, 3, {8}, 32, 16)},         // several rounds, one chunk before, padding to 32
      {3, 8, lsh_kind(8, 2, 1, 2, {4, 6}, 24, 8)},          // factorised buckets, chunks after, pad_to 3 chunks
      {1, 12, lsh_kind(10, 1, 0, 1, {16}, 10, 10)},         // one round, dh not a multiple of 8
      {2, 16, lsh_kind(32, 1, 0, 4, {2, 2, 4}, 64, 16)},    // three factors, many rounds
      {2, 8, lsh_kind(8, 3, 1, 1, {4}, 8, 8)},              // a window of 5 chunks over as few as 2: chunks repeat
  };
  const int64_t rows = 211;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const LshCase& c = cases[ci];
    const int64_t inner = int64_t(c.heads) * c.dh;
    const float scale = 1.0f / std::sqrt(float(c.dh));
    LshGraph lg = build_lsh_graph(c, rows, scale, uint32_t(70 + ci));
    tern_model* model = test::finish_and_load(lg.g, lg.y, "lsh_op" + std::to_string(ci), 0);
    const LshAttention spec = spec_for(c, scale, lg.rotations);
    // Lengths: unchunked (<= chunk), padded, exact multiples, and one chunk plus one token.
    const std::vector<int64_t> lengths = {1, 7, int64_t(c.kind.chunk), int64_t(c.kind.chunk) + 1, 100, 192, 333};
    for (int threads : {1, 2}) {
      tern_session* s = make_session(model, threads, 400);
      for (int64_t n : lengths) {
        const std::vector<int32_t> ids = random_ids(n, rows, uint32_t(80 + ci + n));
        std::vector<float> qkv(size_t(n * 2 * inner)), want(size_t(n * inner)), got(size_t(n * inner));
        ref::embedding(lg.g.table.data(), 2 * inner, ids.data(), n, qkv.data());
        ref::lsh_attention(qkv.data(), n, spec, want.data());
        INFO("case " << ci << ", threads " << threads << ", n " << n << " (padded " << spec.padded_length(n) << ")");
        REQUIRE(tern_session_forward(s, ids.data(), n, got.data()) == TERN_OK);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
      }
      tern_session_free(s);
    }
    tern_model_free(model);
  }
}

TEST_CASE("lsh op: matches the reference kernel (and the CPU path) at device sizes (CPU and Vulkan)",
          "[attention][lsh][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const double tolerance = test::backend_tolerance(backend, kOpTolerance);
  const std::vector<LshCase> cases = {
      {2, 16, lsh_kind(16, 1, 0, 3, {8}, 32, 16)},  // unchunked, padding to 32, several rounds
      {3, 8, lsh_kind(8, 2, 1, 2, {4, 6}, 24, 8)},  // factorised buckets, chunks after
      {1, 12, lsh_kind(10, 1, 0, 1, {16}, 10, 10)}, // one round, dh 12
      {2, 8, lsh_kind(8, 3, 1, 1, {4}, 8, 8)},      // a window of 5 chunks over as few as 2
      {2, 16, lsh_kind(16, 2, 0, 8, {2, 4}, 16, 8)}, // many rounds wrapping around the sorted axis
  };
  // The calls of one session per case, each a whole sequence.
  const std::vector<std::vector<int64_t>> lengths = {{7, 16, 17, 100}, {8, 9, 61}, {33}, {16, 40}, {40}};
  const int64_t rows = 97;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const LshCase& c = cases[ci];
    const int64_t inner = int64_t(c.heads) * c.dh;
    const float scale = 1.0f / std::sqrt(float(c.dh));
    LshGraph lg = build_lsh_graph(c, rows, scale, uint32_t(300 + 10 * ci));
    tern_model* model = test::finish_and_load(lg.g, lg.y, "backend_lsh" + std::to_string(ci), 0);
    const int64_t max_n = *std::max_element(lengths[ci].begin(), lengths[ci].end());
    tern_session* s = test::make_session_on(backend, model, backend == TERN_BACKEND_CPU ? 2 : 1, max_n);
    tern_session* cpu = backend == TERN_BACKEND_CPU ? nullptr : make_session(model, 2, max_n);
    const LshAttention spec = spec_for(c, scale, lg.rotations);
    for (int64_t n : lengths[ci]) {
      const std::vector<int32_t> ids = random_ids(n, rows, uint32_t(320 + ci + n));
      std::vector<float> qkv(size_t(n * 2 * inner)), want(size_t(n * inner));
      ref::embedding(lg.g.table.data(), 2 * inner, ids.data(), n, qkv.data());
      ref::lsh_attention(qkv.data(), n, spec, want.data());
      INFO("case " << ci << ", n " << n << " (padded " << spec.padded_length(n) << ", chunked " << spec.chunked(n) << ")");
      test::check_forward(s, cpu, ids, inner, want, tolerance);
    }
    if (cpu != nullptr) tern_session_free(cpu);
    tern_session_free(s);
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("lsh op: padding, rounds and rotations change the result", "[attention][lsh]") {
  // The reference kernel is sensitive to what it claims to follow: another pad length, another rotation or one round
  // fewer each move the output far beyond the tolerance.
  // n = 120: padded to 128, the last chunk of each round holds 8 tokens and 8 pads, which the next round's first chunk
  // sees; padded to 144 it sees only pads.
  LshCase c{2, 16, lsh_kind(16, 1, 0, 3, {8}, 32, 16)};
  const int64_t n = 120, inner = 32;
  const float scale = 0.25f;
  std::vector<float> rotations = random_floats(size_t(2 * 16 * 3 * 4), 3, -1, 1);
  std::vector<float> qkv = random_floats(size_t(n * 2 * inner), 4, -1, 1);
  std::vector<float> base(size_t(n * inner)), other(size_t(n * inner));
  ref::lsh_attention(qkv.data(), n, spec_for(c, scale, rotations), base.data());
  LshCase padded = c;
  padded.kind.pad_to = 48;
  ref::lsh_attention(qkv.data(), n, spec_for(padded, scale, rotations), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
  std::vector<float> rotated = rotations;
  for (float& r : rotated) r = -r;
  ref::lsh_attention(qkv.data(), n, spec_for(c, scale, rotated), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
  LshCase fewer = c;
  fewer.kind.hashes = 2;
  std::vector<float> two_rounds(rotations.begin(), rotations.end());
  // rotations [2, 16, 3, 4] -> the first two rounds of each (head, dim) row
  std::vector<float> sliced;
  for (size_t row = 0; row < 2 * 16; ++row)
    sliced.insert(sliced.end(), two_rounds.begin() + long(row * 12), two_rounds.begin() + long(row * 12 + 8));
  ref::lsh_attention(qkv.data(), n, spec_for(fewer, scale, sliced), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
}

TEST_CASE("lsh op: whole sequences only; appending is a clear error (CPU and Vulkan)", "[attention][lsh][streaming][vulkan]") {
  TERN_EACH_BACKEND(backend);
  LshCase c{2, 8, lsh_kind(8, 1, 0, 2, {4}, 8, 8)};
  LshGraph lg = build_lsh_graph(c, 50, 0.3f, 9);
  tern_model* model = test::finish_and_load(lg.g, lg.y, "lsh_append", 0);
  tern_session* s = test::make_session_on(backend, model, 1, 64);
  const std::vector<int32_t> ids = random_ids(40, 50, 10);
  std::vector<float> out(size_t(40 * 16));
  REQUIRE(tern_session_append(s, ids.data(), 30, out.data()) == TERN_OK);  // the first call starts the sequence
  CHECK(tern_session_append(s, ids.data() + 30, 1, out.data()) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("LSH attention") && Catch::Contains("cannot continue one"));
  REQUIRE(tern_session_forward(s, ids.data(), 40, out.data()) == TERN_OK);
  // The planner: no state, scratch sized for the session's longest call.
  tern_memory_plan plan{};
  REQUIRE(tern_session_plan(s, 64, &plan) == TERN_OK);
  CHECK(plan.state_bytes == 0);
  if (backend == TERN_BACKEND_VULKAN) {
    const std::vector<float> cpu = test::run_on(TERN_BACKEND_CPU, model, ids, 16);
    CHECK(relative_error(out.data(), cpu.data(), cpu.size()) <= test::backend_tolerance(backend, kOpTolerance));
    // No state; device memory (arena + LSH scratch) linear in max_tokens, never n x n.
    tern_memory_plan m64{}, m1024{};
    REQUIRE(tern_session_memory(s, &m64) == TERN_OK);
    tern_session* big = test::make_session_on(backend, model, 1, 1024);
    REQUIRE(tern_session_memory(big, &m1024) == TERN_OK);
    CHECK(m64.state_bytes == 0);
    CHECK(m1024.state_bytes == 0);
    INFO("arena " << m64.arena_bytes << " -> " << m1024.arena_bytes);
    CHECK(m1024.arena_bytes > 8 * m64.arena_bytes);
    CHECK(m1024.arena_bytes < 17 * m64.arena_bytes);
    tern_session_free(big);
    CHECK(test::vulkan_validation_messages() == 0);
  }
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("lsh op: the planner's bytes grow linearly with n, never as n x n", "[attention][lsh][memory]") {
  LshCase c{4, 32, lsh_kind(64, 1, 0, 4, {32}, 64, 64)};
  LshGraph lg = build_lsh_graph(c, 50, 0.2f, 31);
  tern_model* model = test::finish_and_load(lg.g, lg.y, "lsh_plan", 0);
  test::check_plan_linear_in_n(model, 3.9);  // and at 64k less than 1% of one n x n score matrix
  tern_model_free(model);
}

TEST_CASE("lsh op: the loader checks its params and rotations", "[attention][lsh]") {
  struct Case {
    std::string what;
    convert::params::Lsh kind;
    std::vector<int64_t> rot_shape;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"odd bucket", lsh_kind(8, 1, 0, 2, {5}, 8, 8), {2, 8, 2, 2}, "bucket factor 5 must be even"},
      {"rotation shape", lsh_kind(8, 1, 0, 2, {4}, 8, 8), {2, 8, 2, 3}, "expected [2, 8, 2, 2]"},
      {"pad_to", lsh_kind(8, 1, 0, 2, {4}, 12, 8), {2, 8, 2, 2}, "pad_to 12 is not a multiple of chunk 8"},
      {"pad_above", lsh_kind(8, 1, 0, 2, {4}, 8, 9), {2, 8, 2, 2}, "pad_above 9 must be in [0, 8]"},
      {"hashes", lsh_kind(8, 1, 0, 0, {4}, 8, 8), {2, 8, 0, 2}, "hashes 0 must be in"},
      {"no buckets", lsh_kind(8, 1, 0, 1, {}, 8, 8), {2, 8, 1, 0}, "bucket factors"},
  };
  for (const Case& c : cases) {
    test::OpGraph g = test::start_graph(10, 2 * 16, 5);
    int64_t numel = 1;
    for (int64_t d : c.rot_shape) numel *= d;
    const int32_t rot = test::add_constant(g, "rotations", c.rot_shape, random_floats(size_t(numel), 6));
    const int32_t y = g.graph.add_value("y", fb::DType::F32, 16).value();
    convert::params::Attention p{2, 8, 0.35f, true, c.kind};
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {rot}, p).ok());
    INFO(c.what);
    test::expect_load_rejected(g, y, "lsh_bad", c.message);
  }
}

TEST_CASE("concat and axial position ops match their reference kernels, in one call and in segments (CPU and Vulkan)", "[ops][reformer][vulkan]") {
  TERN_EACH_BACKEND(backend);
  // ids -> EMBEDDING [n, 12] -> POSITION(AXIAL rows [5, 4], cols [7, 8]) -> p; CONCAT(x, p) -> [n, 24].
  test::OpGraph g = test::start_graph(30, 12, 21);
  const std::vector<float> rows = random_floats(5 * 4, 22), cols = random_floats(7 * 8, 23);
  const int32_t r = test::add_constant(g, "rows", {5, 4}, rows);
  const int32_t c = test::add_constant(g, "cols", {7, 8}, cols);
  const int32_t p = g.graph.add_value("p", fb::DType::F32, 12).value();
  convert::params::Position pos;
  pos.kind = fb::PositionKind::AXIAL;
  pos.max_positions = 35;
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {p}, {r, c}, pos).ok());
  const int32_t y = g.graph.add_value("y", fb::DType::F32, 24).value();
  REQUIRE(g.graph.add_op(fb::OpCode::CONCAT, "cat", {g.x, p}, {y}, {}, convert::params::Concat{}).ok());
  tern_model* model = test::finish_and_load(g, y, "concat_axial", 35);
  const int64_t n = 35;
  const std::vector<int32_t> ids = random_ids(n, 30, 24);
  std::vector<float> x(size_t(n * 12)), pe(size_t(n * 12)), want(size_t(n * 24));
  ref::embedding(g.table.data(), 12, ids.data(), n, x.data());
  ref::axial_position(rows.data(), 4, cols.data(), 7, 8, 0, n, x.data(), pe.data());
  ref::concat(x.data(), 12, pe.data(), 12, n, want.data());
  // Token by token only on the CPU: lavapipe keeps to the Vulkan side's few calls.
  const std::vector<int64_t> splits =
      backend == TERN_BACKEND_CPU ? std::vector<int64_t>{n, 1, 6} : std::vector<int64_t>{n, 6};
  for (int64_t split : splits) {
    tern_session* s = test::make_session_on(backend, model, backend == TERN_BACKEND_CPU ? 2 : 1, n);
    std::vector<float> got(size_t(n * 24));
    for (int64_t at = 0; at < n; at += split) {
      const int64_t len = std::min(split, n - at);
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_append(s, ids.data() + at, len, got.data() + at * 24) == TERN_OK);
    }
    INFO("segments of " << split);
    CHECK(relative_error(got.data(), want.data(), got.size()) == 0.0);  // copies and one add: exact
    // Past the table: a clear error.
    if (backend == TERN_BACKEND_CPU) CHECK(tern_session_append(s, ids.data(), 1, got.data()) == TERN_INVALID_ARGUMENT);
    tern_session_free(s);
  }
  // The spot check of the definition: position 33 = row 33 / 7 = 4, column 33 % 7 = 5.
  CHECK(pe[size_t(33 * 12 + 0)] == x[size_t(33 * 12)] + rows[size_t(4 * 4)]);
  CHECK(pe[size_t(33 * 12 + 4)] == x[size_t(33 * 12 + 4)] + cols[size_t(5 * 8)]);
  // More tokens than the table holds: refused at session creation.
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = backend;
  so.max_tokens = 36;
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("axial positions"));
  tern_model_free(model);
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}
