// SPDX-License-Identifier: MIT
// tern_activation_storage F16 on the CPU: the bulk conversions against an independent rounding, Reformer models
// (whose two residual streams stay whole around LSH layers) against the float32 PyTorch goldens, and the option's
// limits: models without such values run exactly as with float32, the Vulkan backend refuses it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "cpu/half_rows.h"
#include "npy.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"

namespace npy = tern::npy;
using tern::test::relative_error;
using tern::test::round_to_half;

namespace {

// Float16 streams round every stream value to 11 significant bits where a block is narrowed (and each LSH head's
// share as it is added into x1): ~2.4e-4 relative per rounding, compounding over the layers.
constexpr double kHalfStreamsTolerance = 2e-3;
// Models whose LSH layers rebucket some positions after a rounding (see the Reformer test): measured 1.5e-2 and
// 2.5e-2 on the goldens below; the bound leaves room for other thread counts.
constexpr double kRebucketedTolerance = 5e-2;

struct Golden {
  std::vector<int32_t> ids;
  npy::Array logits;  // [n, vocab]
  tern_model* model = nullptr;
};

Golden load(const std::string& name) {
  Golden g;
  const std::string dir = tern::test::source_path("tests/goldens/" + name);
  std::string error;
  REQUIRE(tern::cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(dir + "/logits.npy", &g.logits, &error));
  const std::string out = tern::test::scratch_dir("half_" + name) + "/model.tern";
  tern::Status st = tern::convert::convert_checkpoint(dir, out, {true});
  INFO(st.message());
  REQUIRE(st.ok());
  INFO(tern_last_error());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

int64_t hidden_size(const std::string& name) {
  const std::string config = tern::test::read_file(tern::test::source_path("tests/goldens/" + name + "/config.json"));
  return nlohmann::json::parse(config).at("hidden_size").get<int64_t>();
}

tern_session* session(const Golden& g, tern_activation_storage storage, int64_t row_block_rows, int threads = 2) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_tokens = int64_t(g.ids.size());
  so.row_block_rows = row_block_rows;
  so.activation_storage = storage;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(g.model, &so, &s) == TERN_OK);
  return s;
}

// One forward of the golden's ids [n, vocab].
std::vector<float> forward(tern_session* s, const Golden& g) {
  return tern::test::run_ids(s, g.ids, g.logits.shape[1]);
}

}  // namespace

TEST_CASE("float16 activations: bulk conversions round to nearest even, as an independent rounding does", "[half]") {
  // Every magnitude a half holds, from below its subnormals to past its largest value, plus the special values.
  std::vector<float> x = tern::test::random_floats(40000, 7, -1.0f, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], int(i % 48) - 30);
  for (float special : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, std::ldexp(1.0f, -24),
                        std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    x.push_back(special);
  }
  const int64_t n = int64_t(x.size());  // not a multiple of 8: the vector path's tail runs too
  std::vector<uint16_t> halves(x.size());
  std::vector<float> back(x.size());
  tern::cpu::floats_to_halves(nullptr, x.data(), n, halves.data());
  tern::cpu::halves_to_floats(nullptr, halves.data(), n, back.data());
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = round_to_half(x[i]);
    if (!(back[i] == want && std::signbit(back[i]) == std::signbit(want))) ++wrong;
  }
  CHECK(wrong == 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tern::cpu::floats_to_halves(nullptr, &nan, 1, halves.data());
  tern::cpu::halves_to_floats(nullptr, halves.data(), 1, back.data());
  CHECK(std::isnan(back[0]));

  // x (float16) += y, rounded once: the same as rounding the float32 sum of the widened half and y.
  std::vector<float> base = tern::test::random_floats(1001, 8, -4.0f, 4.0f), y = tern::test::random_floats(1001, 9);
  tern::cpu::floats_to_halves(nullptr, base.data(), 1001, halves.data());
  std::vector<float> widened(1001);
  tern::cpu::halves_to_floats(nullptr, halves.data(), 1001, widened.data());
  tern::cpu::add_into_halves(nullptr, halves.data(), y.data(), 1001);
  tern::cpu::halves_to_floats(nullptr, halves.data(), 1001, back.data());
  wrong = 0;
  for (size_t i = 0; i < 1001; ++i) wrong += back[i] != round_to_half(widened[i] + y[i]);
  CHECK(wrong == 0);
}

TEST_CASE("float16 activations: Reformer streams in half the bytes, logits near the float32 goldens", "[half][reformer]") {
  // {golden, bound}. Without hashing (one chunk: full attention) or with few buckets, the roundings only perturb
  // each position slightly. With many buckets a rounding sometimes moves a position to the neighbouring bucket,
  // which shifts the chunk boundaries of the sorted axis behind it, so other positions' windows gain or lose a key:
  // LSH attention is not continuous in its input, and those models move further from float32.
  const std::pair<const char*, double> cases[] = {{"reformer_short_unchunked", kHalfStreamsTolerance},
                                                  {"reformer_wrapping_rounds", kHalfStreamsTolerance},
                                                  {"reformer_mixed_factorized", kRebucketedTolerance},
                                                  {"reformer_hashes_int", kRebucketedTolerance}};
  for (auto [name, bound] : cases) {
    Golden g = load(name);
    const int64_t n = int64_t(g.ids.size()), d = hidden_size(name);
    // Rows per block: a session picks whole calls at these lengths, so the streams would not be kept between
    // blocks; 37 and 100 make every row-wise part run in blocks (the last one short).
    for (int64_t block : {int64_t(37), int64_t(100)}) {
      tern_session* f32 = session(g, TERN_ACTIVATION_STORAGE_F32, block);
      tern_session* f16 = session(g, TERN_ACTIVATION_STORAGE_F16, block);
      const std::vector<float> want = forward(f32, g), got = forward(f16, g);
      const double vs_golden = relative_error(got.data(), g.logits.data.data(), got.size());
      const double vs_f32 = relative_error(got.data(), want.data(), got.size());
      INFO(name << ", " << n << " tokens, row block " << block << ": vs the PyTorch golden " << vs_golden
                << ", vs float32 " << vs_f32);
      CHECK(vs_golden <= bound);
      CHECK(vs_f32 > 0);  // the streams really went through float16
      // At a long n a stream [n, d] kept whole across the arena's peak saves 2 of its 4 bytes an element in float16
      // (in these small models the LSH layer's own scratch sets that peak, with one stream or both beside it), less
      // the float32 blocks the chains widen them into (at most two [block, d] per chain).
      const int64_t long_n = 65536;
      tern_memory_plan p32{}, p16{};
      REQUIRE(tern_session_plan(f32, long_n, &p32) == TERN_OK);
      REQUIRE(tern_session_plan(f16, long_n, &p16) == TERN_OK);
      INFO("arena at " << long_n << " tokens: " << p32.arena_bytes << " -> " << p16.arena_bytes << " bytes");
      CHECK(p16.arena_bytes + uint64_t(long_n * d) * 2 <= p32.arena_bytes + uint64_t(2 * block * d) * 4);
      tern_session_free(f32);
      tern_session_free(f16);
    }
    tern_model_free(g.model);
  }
}

TEST_CASE("float16 activations: a model with no whole-sequence values between row blocks runs as with float32",
          "[half]") {
  // Every op of a sliding-window model runs in one chain of row blocks: no value stays whole, nothing is rounded.
  Golden g = load("sliding_w64");
  tern_session* f32 = session(g, TERN_ACTIVATION_STORAGE_F32, 37);
  tern_session* f16 = session(g, TERN_ACTIVATION_STORAGE_F16, 37);
  CHECK(forward(f16, g) == forward(f32, g));
  tern_memory_plan p32{}, p16{};
  REQUIRE(tern_session_plan(f32, int64_t(g.ids.size()), &p32) == TERN_OK);
  REQUIRE(tern_session_plan(f16, int64_t(g.ids.size()), &p16) == TERN_OK);
  CHECK(p16.arena_bytes == p32.arena_bytes);
  tern_session_free(f32);
  tern_session_free(f16);
  tern_model_free(g.model);
}

TEST_CASE("float16 activations: a CPU option, refused by the Vulkan backend and checked", "[half]") {
  Golden g = load("reformer_mixed_factorized");
  tern_session_options so;
  tern_session_options_init(&so);
  so.max_tokens = int64_t(g.ids.size());
  so.backend = TERN_BACKEND_VULKAN;
  so.activation_storage = TERN_ACTIVATION_STORAGE_F16;
  tern_session* s = nullptr;
  CHECK(tern_session_create(g.model, &so, &s) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("activation_storage F16 is a CPU option"));
  so.backend = TERN_BACKEND_CPU;
  const int bad = 7;
  std::memcpy(&so.activation_storage, &bad, sizeof bad);
  CHECK(tern_session_create(g.model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("unknown activation_storage 7"));
  CHECK(s == nullptr);
  tern_model_free(g.model);
}
