// SPDX-License-Identifier: MIT
// weight_storage F16 on the Vulkan backend: LINEAR weights and EMBEDDING tables stored as float16 on the device and
// widened to float32 by the shaders. Each case checks the device against a reference computed here from the same
// weights rounded to float16 (by this file's own rounding, not the library's), and against the float32 CPU path.
// A device without storageBuffer16BitAccess gets a clear TERN_UNSUPPORTED: there the cases check that message and
// warn that the float16 path did not run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "convert.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;
using tern::test::round_to_half;

namespace {

constexpr double kSameRounding = 1e-5;   // device float16 storage vs a reference on the same rounded weights
constexpr double kVsFloat32Op = 2e-3;    // vs the float32 CPU path, one op
constexpr double kVsFloat32Model = 5e-3; // vs the float32 CPU path, the shipped model end to end

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to_half(x);
  return v;
}

using tern::test::EnvOverride;

tern_session_options options(tern_backend backend, tern_weight_storage storage, int64_t max_tokens, int64_t max_batch) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = backend;
  so.weight_storage = storage;
  so.threads = 2;
  so.max_tokens = max_tokens;
  so.max_batch = max_batch;
  return so;
}

// A Vulkan session with float16 weights, or null when the device has no storageBuffer16BitAccess: then the message
// must say so, and the case warns that the float16 path was not run. `range`, unless empty: the
// maxStorageBufferRange the session sees (TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE while it is created).
tern_session* f16_session(const tern_model* model, int64_t max_tokens, int64_t max_batch, const std::string& range = "") {
  const tern_session_options so = options(TERN_BACKEND_VULKAN, TERN_WEIGHT_STORAGE_F16, max_tokens, max_batch);
  tern_session* s = nullptr;
  std::unique_ptr<EnvOverride> lowered;
  if (!range.empty()) lowered = std::make_unique<EnvOverride>("TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE", range);
  const tern_status st = tern_session_create(model, &so, &s);
  if (st == TERN_OK) return s;
  const std::string message = tern_last_error();
  INFO(message);
  REQUIRE(st == TERN_UNSUPPORTED);
  REQUIRE(message.find("storageBuffer16BitAccess") != std::string::npos);
  WARN("float16 weights not run: this Vulkan device has no storageBuffer16BitAccess (" << message << ")");
  return nullptr;
}

std::vector<float> run_cpu(const tern_model* model, const std::vector<int32_t>& ids, int64_t width) {
  const int64_t n = int64_t(ids.size());
  tern_session* s = test::make_session(model, 2, n);
  auto out = test::run_ids(s, ids, width, n);
  tern_session_free(s);
  return out;
}

uint64_t device_weight_bytes(tern_session* s) {
  tern_memory_plan m{};
  REQUIRE(tern_session_memory(s, &m) == TERN_OK);
  return m.packed_weight_bytes;
}

// y = x W^T + b in double, x the table's rows for ids: [n, out].
std::vector<float> linear_reference(const std::vector<float>& table, const std::vector<int32_t>& ids, int64_t in,
                                    const std::vector<float>& w, const std::vector<float>& b, int64_t out) {
  std::vector<float> y(ids.size() * size_t(out));
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* x = table.data() + size_t(ids[i]) * size_t(in);
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.empty() ? 0.0 : double(b[size_t(o)]);
      for (int64_t k = 0; k < in; ++k) acc += double(x[k]) * double(w[size_t(o * in + k)]);
      y[i * size_t(out) + size_t(o)] = float(acc);
    }
  }
  return y;
}

// ids -> EMBEDDING [rows, in] -> LINEAR [out, in] (+ bias [out]); checks float16 storage against the reference on
// rounded weights and the float32 CPU path, in appends of `batch`, with the range lowered to `range` when not empty.
void check_linear(int64_t rows, int64_t in, int64_t out, bool bias, int64_t n, int64_t batch, const std::string& range,
                  uint32_t seed) {
  auto g = test::start_graph(rows, in, seed);
  const auto w = random_floats(size_t(out * in), seed + 1);
  const auto b = bias ? random_floats(size_t(out), seed + 2) : std::vector<float>();
  int32_t wt = test::add_constant(g, "w", {out, in}, w);
  int32_t bt = bias ? test::add_constant(g, "b", {out}, b) : -1;
  int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, fb::LinearParamsT{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_f16_linear_" + std::to_string(seed), n);
  const auto ids = random_ids(n, rows, seed + 3);

  // The float16 path: the embedding's table and W rounded, the bias kept in float32.
  const auto want16 = linear_reference(rounded(g.table), ids, in, rounded(w), b, out);
  const auto cpu32 = run_cpu(model, ids, out);
  tern_session* s = f16_session(model, n, batch, range);
  if (s) {
    const auto gpu = test::run_ids(s, ids, out, batch);
    const double err16 = relative_error(gpu.data(), want16.data(), want16.size());
    const double err32 = relative_error(gpu.data(), cpu32.data(), cpu32.size());
    INFO("rows " << rows << ", in " << in << ", out " << out << ", bias " << bias << ", range '" << range
                 << "': vs float16-rounded reference " << err16 << ", vs float32 CPU " << err32);
    CHECK(err16 <= kSameRounding);
    CHECK(err32 <= kVsFloat32Op);
    CHECK(err32 > 0);  // the weights really were rounded
    // Device weights: the table and W in halves, the bias in floats.
    CHECK(device_weight_bytes(s) == uint64_t(rows * in + out * in) * 2 + uint64_t(bias ? out : 0) * 4);
    if (!range.empty()) {  // split or not, each output column sums over k in the same order
      tern_session* whole = f16_session(model, n, batch);
      REQUIRE(whole);
      const auto unsplit = test::run_ids(whole, ids, out, batch);
      CHECK(relative_error(gpu.data(), unsplit.data(), unsplit.size()) <= 1e-6);
      tern_session_free(whole);
    }
    tern_session_free(s);
  }
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

void check_embedding(int64_t rows, int64_t d, int64_t n, int64_t batch, const std::string& range, uint32_t seed) {
  auto g = test::start_graph(rows, d, seed);
  tern_model* model = test::finish_and_load(g, g.x, "vk_f16_embedding_" + std::to_string(seed), n);
  auto ids = random_ids(n, rows, seed + 1);
  ids[0] = 0;
  ids[1] = int32_t(rows - 1);
  const auto table16 = rounded(g.table);
  std::vector<float> want(size_t(n * d));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) want[size_t(i * d + j)] = table16[size_t(ids[size_t(i)] * d + j)];
  }
  const auto cpu32 = run_cpu(model, ids, d);
  tern_session* s = f16_session(model, n, batch, range);
  if (s) {
    const auto gpu = test::run_ids(s, ids, d, batch);
    const double err16 = relative_error(gpu.data(), want.data(), want.size());
    const double err32 = relative_error(gpu.data(), cpu32.data(), cpu32.size());
    INFO("rows " << rows << ", d " << d << ", range '" << range << "': vs float16-rounded table " << err16
                 << ", vs float32 CPU " << err32);
    CHECK(err16 <= kSameRounding);
    CHECK(gpu == want);  // a gather of widened halves: exact
    CHECK(err32 <= kVsFloat32Op);
    CHECK(device_weight_bytes(s) == uint64_t(rows * d) * 2);
    tern_session_free(s);
  }
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

}  // namespace

TEST_CASE("f16 weights: the test's own float16 rounding", "[f16]") {
  CHECK(round_to_half(1.0f) == 1.0f);
  CHECK(round_to_half(1.0f + 1.0f / 4096) == 1.0f);                   // below half a quantum (2^-10)
  CHECK(round_to_half(1.0f + 1.0f / 2048) == 1.0f);                   // a tie: to even (1.0)
  CHECK(round_to_half(1.0f + 3.0f / 2048) == 1.0f + 2.0f / 1024);     // a tie: to even (1 + 2^-9)
  CHECK(round_to_half(65504.0f) == 65504.0f);
  CHECK(std::isinf(round_to_half(65520.0f)));                         // the tie above the largest half: inf
  CHECK(round_to_half(std::ldexp(1.0f, -24)) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(round_to_half(std::ldexp(1.0f, -26)) == 0.0f);
  CHECK(round_to_half(-0.1f) == -0.0999755859375f);
}

TEST_CASE("f16 weights: a linear with and without bias matches the reference on rounded weights", "[vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  check_linear(50, 40, 101, true, 43, 43, "", 100);
  check_linear(50, 40, 101, false, 43, 43, "", 110);
  check_linear(20, 37, 89, true, 19, 19, "", 120);  // odd in: rows of 74 bytes
  // Across the GEMM's tile edges: several 64-token blocks and an out past a 64-column block (vec4 loads), one token.
  check_linear(50, 64, 130, true, 150, 150, "", 130);
  check_linear(20, 37, 70, false, 1, 1, "", 140);
}

TEST_CASE("f16 weights: an embedding gathers the rounded table", "[vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  check_embedding(301, 24, 64, 64, "", 200);
  check_embedding(97, 23, 40, 40, "", 210);  // odd d
}

TEST_CASE("f16 weights: weights over a lowered maxStorageBufferRange still split and match", "[vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // Halves of rows of 37: parts start at odd halves (offsets of 2 mod 4 bytes), counted in halves by the shader.
  // W [89, 37] is 6586 bytes as halves: 4 parts at 2048. The table [20, 37] (1480 bytes) fits whole.
  check_linear(20, 37, 89, true, 19, 5, "2048", 300);
  check_linear(50, 40, 101, false, 43, 4, "2048", 310);  // y [4, 101] fits the range
  // [301, 23] as halves: 13846 bytes, 7 parts of 44 rows (2024 bytes), starts at odd halves.
  check_embedding(301, 23, 64, 16, "2048", 320);
}

TEST_CASE("f16 weights: the shipped kjv-byte model stores half the weights and matches the float32 CPU path",
          "[model][vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::string path = test::scratch_dir("kjv_vulkan_f16") + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(convert::convert_checkpoint(test::source_path("examples/models/kjv-byte"), path, opts).ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  const std::string text = test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt"));
  const int64_t n = 128, vocab = 256;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(uint8_t(text[size_t(i)]));
  const auto cpu = run_cpu(model, ids, vocab);

  tern_session* s16 = f16_session(model, n, n);
  if (s16) {
    const auto gpu16 = test::run_ids(s16, ids, vocab, n);
    const tern_session_options so32 = options(TERN_BACKEND_VULKAN, TERN_WEIGHT_STORAGE_F32, n, n);
    tern_session* s32 = nullptr;
    REQUIRE(tern_session_create(model, &so32, &s32) == TERN_OK);
    const auto gpu32 = test::run_ids(s32, ids, vocab, n);
    const uint64_t bytes16 = device_weight_bytes(s16), bytes32 = device_weight_bytes(s32);
    const double err = relative_error(gpu16.data(), cpu.data(), cpu.size());
    // Split at 64 KiB (the LM head in 2 parts, the [768, 256] weights in 6), appends of 8 tokens.
    std::vector<float> split;
    {
      tern_session* sp = f16_session(model, 32, 8, std::to_string(64 * 1024));
      REQUIRE(sp);
      split = test::run_ids(sp, std::vector<int32_t>(ids.begin(), ids.begin() + 32), vocab, 8);
      tern_session_free(sp);
    }
    const double split_err = relative_error(split.data(), gpu16.data(), split.size());  // the first 32 tokens
    INFO("kjv-byte float16 weights vs float32 CPU: " << err << "; device weight bytes " << bytes16 << " (float16) vs "
         << bytes32 << " (float32), ratio " << double(bytes16) / double(bytes32) << "; split vs whole " << split_err);
    CHECK(err <= kVsFloat32Model);
    // kjv-byte's checkpoint holds float16 weights (converted to float32 in the .tern file), so storing them as
    // float16 rounds nothing: the same shaders then give the float32 session's logits bit for bit.
    CHECK(gpu16 == gpu32);
    CHECK(double(bytes16) <= 0.6 * double(bytes32));
    CHECK(double(bytes16) >= 0.45 * double(bytes32));
    CHECK(split_err <= 1e-5);
    tern_session_free(s32);
    tern_session_free(s16);
  }
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("f16 weights: a device without storageBuffer16BitAccess fails by the feature's name", "[vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  auto g = test::start_graph(16, 8, 400);
  tern_model* model = test::finish_and_load(g, g.x, "vk_f16_no_feature", 8);
  EnvOverride without("TERN_VULKAN_NO_16BIT_STORAGE", "1");
  const tern_session_options so = options(TERN_BACKEND_VULKAN, TERN_WEIGHT_STORAGE_F16, 8, 8);
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &so, &s) == TERN_UNSUPPORTED);
  CHECK(s == nullptr);
  const std::string message = tern_last_error();
  INFO(message);
  CHECK(message.find("storageBuffer16BitAccess") != std::string::npos);
  CHECK(message.find("weight_storage F16") != std::string::npos);
  // float32 weights need nothing: the same device runs them.
  const tern_session_options so32 = options(TERN_BACKEND_VULKAN, TERN_WEIGHT_STORAGE_F32, 8, 8);
  CHECK(tern_session_create(model, &so32, &s) == TERN_OK);
  if (s) tern_session_free(s);
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("f16 weights: the CPU backend refuses them, auto on the CPU runs float32, unknown values are rejected",
          "[f16][session]") {
  auto g = test::start_graph(16, 8, 500);
  int32_t wt = test::add_constant(g, "w", {5, 8}, random_floats(40, 501));
  int32_t y = g.graph.add_value("y", fb::DType::F32, 5).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, -1}, fb::LinearParamsT{}).ok());
  tern_model* model = test::finish_and_load(g, y, "f16_options", 8);
  tern_session* s = nullptr;

  tern_session_options so = options(TERN_BACKEND_CPU, TERN_WEIGHT_STORAGE_F16, 8, 8);
  CHECK(tern_session_create(model, &so, &s) == TERN_UNSUPPORTED);
  CHECK(s == nullptr);
  std::string message = tern_last_error();
  INFO(message);
  CHECK(message.find("weight_storage F16 is a Vulkan option") != std::string::npos);

  tern_session_options defaults;
  tern_session_options_init(&defaults);
  CHECK(defaults.weight_storage == TERN_WEIGHT_STORAGE_AUTO);

  for (int raw : {3, -1, 1000}) {
    so = options(TERN_BACKEND_VULKAN, TERN_WEIGHT_STORAGE_F32, 8, 8);
    std::memcpy(&so.weight_storage, &raw, sizeof raw);  // a value outside the enum, as C may pass it
    CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
    message = tern_last_error();
    INFO(message);
    CHECK(message.find("weight_storage") != std::string::npos);
    so.backend = TERN_BACKEND_CPU;
    CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  }

  // auto passes over CPU implementations such as lavapipe; where it lands on the CPU it runs the float32 weights.
  so = options(TERN_BACKEND_AUTO, TERN_WEIGHT_STORAGE_F16, 8, 8);
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  tern_backend_info where{};
  REQUIRE(tern_session_get_backend(s, &where) == TERN_OK);
  if (where.backend == TERN_BACKEND_CPU) {
    const auto ids = random_ids(8, 16, 502);
    const auto got = test::run_ids(s, ids, 5, 8);
    const auto cpu = run_cpu(model, ids, 5);
    CHECK(got == cpu);
  } else {
    WARN("backend auto took a Vulkan GPU (" << where.device_name << "): the CPU fallback was not exercised");
  }
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("f16 weights: the default, AUTO, stores float16 where the device has 16-bit storage and float32 elsewhere",
          "[vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const int64_t rows = 50, in = 40, out = 101, n = 43;
  auto g = test::start_graph(rows, in, 700);
  int32_t wt = test::add_constant(g, "w", {out, in}, random_floats(size_t(out * in), 701));
  int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, -1}, fb::LinearParamsT{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_f16_auto", n);
  const auto ids = random_ids(n, rows, 702);
  // One session's output and device weight bytes.
  auto run = [&](tern_weight_storage storage, std::vector<float>* got) {
    const tern_session_options so = options(TERN_BACKEND_VULKAN, storage, n, n);
    tern_session* s = nullptr;
    INFO(tern_last_error());
    REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
    *got = test::run_ids(s, ids, out);
    const uint64_t bytes = device_weight_bytes(s);
    tern_session_free(s);
    return bytes;
  };
  std::vector<float> auto_out, f16_out, f32_out;
  const uint64_t halves = uint64_t(rows * in + out * in) * 2;
  CHECK(run(TERN_WEIGHT_STORAGE_AUTO, &auto_out) == halves);  // lavapipe has storageBuffer16BitAccess
  CHECK(run(TERN_WEIGHT_STORAGE_F16, &f16_out) == halves);
  CHECK(auto_out == f16_out);
  {
    EnvOverride without("TERN_VULKAN_NO_16BIT_STORAGE", "1");
    CHECK(run(TERN_WEIGHT_STORAGE_AUTO, &auto_out) == halves * 2);  // float32, and no error
    CHECK(run(TERN_WEIGHT_STORAGE_F32, &f32_out) == halves * 2);
    CHECK(auto_out == f32_out);
  }
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("f16 weights: the default on reference goldens stays within 5e-3 of the float32 CPU path", "[vulkan][f16]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // Float32 checkpoints, so AUTO rounds their LINEAR weights and embedding tables to float16 on lavapipe; the
  // logits then move by the rounding (2^-11 relative per weight) carried through the layers.
  for (const char* name : {"pre_tied_learned_gelu", "post_untied_sinusoidal_relu", "sliding_w64"}) {
    const std::string dir = test::source_path(std::string("tests/goldens/") + name);
    std::vector<int32_t> ids;
    std::string error;
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    if (ids.size() > 128) ids.resize(128);
    const std::string path = test::convert_golden(name, std::string("vk_f16_auto_") + name);
    REQUIRE(!path.empty());
    tern_model* model = nullptr;
    REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
    tern_model_info info{};
    REQUIRE(tern_model_get_info(model, &info) == TERN_OK);
    const int64_t vocab = info.vocab_size, n = int64_t(ids.size());
    const auto cpu = run_cpu(model, ids, vocab);
    tern_session_options so;
    tern_session_options_init(&so);  // weight_storage AUTO
    so.backend = TERN_BACKEND_VULKAN;
    so.max_tokens = so.max_batch = n;
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
    const auto gpu = test::run_ids(s, ids, vocab);
    const double err = relative_error(gpu.data(), cpu.data(), cpu.size());
    INFO(name << ": AUTO on Vulkan vs the float32 CPU path " << err);
    std::printf("%s: float16 weights (AUTO) on Vulkan vs the float32 CPU path: %.3g relative\n", name, err);
    CHECK(err <= 5e-3);
    CHECK(err > 1e-6);  // the weights really were rounded
    tern_session_free(s);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}
