// SPDX-License-Identifier: MIT
// Reformer LSH attention (ops/lsh.h): the reference kernel's sensitivity to padding, rounds and rotations, the
// loader's checks, whole-sequence-only streaming (on each backend), the planner's bytes, and the limits of the AXIAL
// positions Reformer also uses. The op against the reference (int and factorised buckets, several rounds, chunks
// before and after, padded and unpadded lengths, the unchunked path) and CONCAT with AXIAL positions are cases of the
// op case table (support/op_cases.h, test_backend_ops), on every backend.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "kind_graphs.h"
#include "op_graph.h"
#include "ops/lsh.h"
#include "ops/reference.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;

using tern::test::build_lsh_graph;
using tern::test::lsh_kind;
using tern::test::lsh_spec;
using tern::test::LshCase;
using tern::test::LshGraph;

namespace {

constexpr double kOpTolerance = 1e-5;

}  // namespace

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
  ref::lsh_attention(qkv.data(), n, lsh_spec(c, scale, rotations), base.data());
  LshCase padded = c;
  padded.kind.pad_to = 48;
  ref::lsh_attention(qkv.data(), n, lsh_spec(padded, scale, rotations), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
  std::vector<float> rotated = rotations;
  for (float& r : rotated) r = -r;
  ref::lsh_attention(qkv.data(), n, lsh_spec(c, scale, rotated), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
  LshCase fewer = c;
  fewer.kind.hashes = 2;
  std::vector<float> two_rounds(rotations.begin(), rotations.end());
  // rotations [2, 16, 3, 4] -> the first two rounds of each (head, dim) row
  std::vector<float> sliced;
  for (size_t row = 0; row < 2 * 16; ++row)
    sliced.insert(sliced.end(), two_rounds.begin() + long(row * 12), two_rounds.begin() + long(row * 12 + 8));
  ref::lsh_attention(qkv.data(), n, lsh_spec(fewer, scale, sliced), other.data());
  CHECK(relative_error(other.data(), base.data(), other.size()) > 1e-2);
}

TEST_CASE("lsh op: a later call continues the sequence, on Vulkan as on the CPU", "[attention][lsh][streaming][vulkan]") {
  TERN_EACH_BACKEND(backend);
  LshCase c{2, 8, lsh_kind(8, 1, 0, 2, {4}, 8, 8)};
  LshGraph lg = build_lsh_graph(c, 50, 0.3f, 9);
  tern_model* model = test::finish_and_load(lg.g, lg.y, "lsh_append", 0);
  tern_session* s = test::make_session_on(backend, model, 1, 64);
  const std::vector<int32_t> ids = random_ids(40, 50, 10);
  std::vector<float> out(size_t(40 * 16));
  // The first call starts the sequence; then Hugging Face's cached steps, one and nine a call (their numbers:
  // tests/test_reformer.cpp's generation goldens). On Vulkan, every row as the CPU's.
  REQUIRE(tern_session_append(s, ids.data(), 30, out.data()) == TERN_OK);
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_append(s, ids.data() + 30, 1, out.data() + 30 * 16) == TERN_OK);
  REQUIRE(tern_session_append(s, ids.data() + 31, 9, out.data() + 31 * 16) == TERN_OK);
  if (backend == TERN_BACKEND_VULKAN) {
    tern_session* cpu = test::make_session(model, 1, 64);
    std::vector<float> want(out.size());
    REQUIRE(tern_session_append(cpu, ids.data(), 30, want.data()) == TERN_OK);
    REQUIRE(tern_session_append(cpu, ids.data() + 30, 1, want.data() + 30 * 16) == TERN_OK);
    REQUIRE(tern_session_append(cpu, ids.data() + 31, 9, want.data() + 31 * 16) == TERN_OK);
    tern_session_free(cpu);
    CHECK(relative_error(out.data(), want.data(), out.size()) <= test::backend_tolerance(backend, kOpTolerance));
  }
  REQUIRE(tern_session_forward(s, ids.data(), 40, out.data()) == TERN_OK);
  // The planner: the cache a later call continues from (qk | v and one bucket per round, per head and position),
  // linear in max_tokens.
  tern_memory_plan plan{};
  REQUIRE(tern_session_plan(s, 64, &plan) == TERN_OK);
  CHECK(plan.state_bytes == uint64_t(64 * 2 * (2 * 8 + 2) * 4));
  if (backend == TERN_BACKEND_VULKAN) {
    const std::vector<float> cpu = test::run_on(TERN_BACKEND_CPU, model, ids, 16);
    CHECK(relative_error(out.data(), cpu.data(), cpu.size()) <= test::backend_tolerance(backend, kOpTolerance));
    // The device's cache is the planner's, and the saved blob's 8-byte header (the hashed flag and a zero word);
    // its memory (arena + LSH scratch) linear in max_tokens, never n x n.
    tern_memory_plan m64{}, m1024{};
    REQUIRE(tern_session_memory(s, &m64) == TERN_OK);
    tern_session* big = test::make_session_on(backend, model, 1, 1024);
    REQUIRE(tern_session_memory(big, &m1024) == TERN_OK);
    CHECK(m64.state_bytes == plan.state_bytes + 8);
    CHECK(m1024.state_bytes == uint64_t(1024 * 2 * (2 * 8 + 2) * 4) + 8);
    INFO("arena " << m64.arena_bytes << " -> " << m1024.arena_bytes);
    CHECK(m1024.arena_bytes > 8 * m64.arena_bytes);
    CHECK(m1024.arena_bytes < 17 * m64.arena_bytes);
    tern_session_free(big);
    CHECK(test::vulkan_validation_messages() == 0);
  }
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("lsh op: Vulkan steps as the CPU past 10,000 cached positions, in calls of 1 to 300",
          "[attention][lsh][streaming][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // A step's window is found in a cache far longer than a workgroup: few buckets (3 rounds, a window of 3 chunks,
  // long runs of equal buckets cut by the window's ends), and 8,192 buckets (nearly every position a bucket of its
  // own, the window listing them; a call of 300 needs two dispatches of lsh_step).
  const int64_t prompt = 10000;
  for (int which = 0; which < 2; ++which) {
    const LshCase c = which == 0 ? LshCase{2, 16, lsh_kind(16, 1, 1, 3, {8, 4}, 16, 16)}
                                 : LshCase{2, 16, lsh_kind(64, 1, 0, 1, {64, 128}, 64, 64)};
    const std::vector<int64_t> calls = which == 0 ? std::vector<int64_t>{1, 20, 1, 7} : std::vector<int64_t>{1, 300, 2};
    const int64_t rows = 512, total = prompt + 320, inner = c.heads * c.dh;
    LshGraph lg = build_lsh_graph(c, rows, 0.25f, 41);
    tern_model* model = test::finish_and_load(lg.g, lg.y, "lsh_long_steps", 0);
    const std::vector<int32_t> ids = random_ids(size_t(total), rows, 42);
    const auto steps = [&](tern_backend backend) {
      tern_session* s = test::make_session_on(backend, model, 1, total);
      INFO(tern_session_last_error(s));
      std::vector<float> out(size_t(total * inner));
      REQUIRE(tern_session_append(s, ids.data(), prompt, out.data()) == TERN_OK);
      int64_t at = prompt;
      for (int64_t n : calls) {
        REQUIRE(tern_session_append(s, ids.data() + at, n, out.data() + at * inner) == TERN_OK);
        at += n;
      }
      tern_session_free(s);
      out.erase(out.begin(), out.begin() + prompt * inner);
      out.resize(size_t((at - prompt) * inner));
      return out;
    };
    const std::vector<float> cpu = steps(TERN_BACKEND_CPU), vulkan = steps(TERN_BACKEND_VULKAN);
    double worst = 0;  // the worst position's relative error
    for (size_t r = 0; r < cpu.size() / size_t(inner); ++r) {
      worst = std::max(worst, relative_error(vulkan.data() + r * inner, cpu.data() + r * inner, size_t(inner)));
    }
    INFO("chunk " << c.kind.chunk << ": worst step " << worst);
    CHECK(worst <= test::backend_tolerance(TERN_BACKEND_VULKAN, kOpTolerance));
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("lsh op: the planner's bytes grow linearly with n, never as n x n", "[attention][lsh][memory]") {
  LshCase c{4, 32, lsh_kind(64, 1, 0, 4, {32}, 64, 64)};
  LshGraph lg = build_lsh_graph(c, 50, 0.2f, 31);
  tern_model* model = test::finish_and_load(lg.g, lg.y, "lsh_plan", 0);
  // Linear in n (and at 64k less than 1% of one n x n score matrix), plus a step's fixed scratch for the 65,536
  // positions the session's cache holds; the cache itself: qk | v and 4 buckets per head and position.
  test::check_plan_linear_in_n(model, 3.7, 4 * (2 * 32 + 4) * 4);
  tern_model_free(model);
}

TEST_CASE("lsh op: the loader checks its params and rotations", "[attention][lsh]") {
  struct Case {
    std::string what;
    fb::LshT kind;
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
    const fb::AttentionParamsT p = convert::attention_params(2, 8, 0.35f, c.kind);
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {rot}, p).ok());
    INFO(c.what);
    test::expect_load_rejected(g, y, "lsh_bad", c.message);
  }
}

TEST_CASE("axial positions: the definition's spot check, and past the table a clear error (CPU and Vulkan)",
          "[ops][reformer][vulkan]") {
  TERN_EACH_BACKEND(backend);
  // ids -> EMBEDDING [n, 12] -> POSITION(AXIAL rows [5, 4], cols [7, 8]): 35 positions.
  test::OpGraph g = test::start_graph(30, 12, 21);
  const std::vector<float> rows = random_floats(5 * 4, 22), cols = random_floats(7 * 8, 23);
  const int32_t r = test::add_constant(g, "rows", {5, 4}, rows);
  const int32_t c = test::add_constant(g, "cols", {7, 8}, cols);
  const int32_t p = g.graph.add_value("p", fb::DType::F32, 12).value();
  fb::PositionParamsT pos;
  pos.kind = fb::PositionKind::AXIAL;
  pos.max_positions = 35;
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {p}, {r, c}, pos).ok());
  tern_model* model = test::finish_and_load(g, p, "axial_limits", 35);
  const int64_t n = 35;
  const std::vector<int32_t> ids = random_ids(n, 30, 24);
  std::vector<float> x(size_t(n * 12)), pe(size_t(n * 12));
  ref::embedding(g.table.data(), 12, ids.data(), n, x.data());
  ref::axial_position(rows.data(), 4, cols.data(), 7, 8, 0, n, x.data(), pe.data());
  // The reference kernel against the definition: position 33 = row 33 / 7 = 4, column 33 % 7 = 5.
  CHECK(pe[size_t(33 * 12 + 0)] == x[size_t(33 * 12)] + rows[size_t(4 * 4)]);
  CHECK(pe[size_t(33 * 12 + 4)] == x[size_t(33 * 12 + 4)] + cols[size_t(5 * 8)]);
  // Past the table, however the 35 positions were appended: a clear error (on the CPU: lavapipe keeps to the
  // case table's calls).
  if (backend == TERN_BACKEND_CPU) {
    for (int64_t split : {n, int64_t(1), int64_t(6)}) {
      tern_session* s = test::make_session_on(backend, model, 2, n);
      std::vector<float> got(size_t(n * 12));
      for (int64_t at = 0; at < n; at += split) {
        const int64_t len = std::min(split, n - at);
        INFO(tern_session_last_error(s));
        REQUIRE(tern_session_append(s, ids.data() + at, len, got.data() + at * 12) == TERN_OK);
      }
      INFO("segments of " << split);
      CHECK(tern_session_append(s, ids.data(), 1, got.data()) == TERN_INVALID_ARGUMENT);
      tern_session_free(s);
    }
  }
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
