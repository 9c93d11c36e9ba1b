// Weights larger than the device's maxStorageBufferRange on the Vulkan backend: LINEAR weights (and biases) are bound
// as parts of whole output rows and EMBEDDING tables as parts of whole vocab rows, one dispatch per part; any other
// binding over the range (an activation) still fails session creation naming the limit. lavapipe's real range is
// large, so each case lowers it with TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE, which the Vulkan context reads when it is
// created: once per session, so setting it before tern_session_create applies to that session.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "convert.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;

namespace {

constexpr double kOpTolerance = 1e-5;
constexpr double kModelTolerance = 1e-4;
constexpr const char* kRangeVar = "TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE";

// Sets the range override for the sessions created in its scope, then restores what was there.
class RangeOverride {
 public:
  explicit RangeOverride(const std::string& bytes) {
    if (const char* v = std::getenv(kRangeVar)) {
      had_ = true;
      old_ = v;
    }
    setenv(kRangeVar, bytes.c_str(), 1);
  }
  ~RangeOverride() {
    if (had_) {
      setenv(kRangeVar, old_.c_str(), 1);
    } else {
      unsetenv(kRangeVar);
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

// The model's output for ids: one forward on the CPU; on Vulkan, appends of `batch` tokens (the session's max_batch,
// small so that the activations stay within the lowered range).
std::vector<float> run_on(tern_backend backend, tern_model* model, const std::vector<int32_t>& ids, int64_t width,
                          int64_t batch) {
  const int64_t n = int64_t(ids.size());
  std::vector<float> out(size_t(n * width));
  if (backend == TERN_BACKEND_CPU) {
    tern_session* s = test::make_session(model, 2, n);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_forward(s, ids.data(), n, out.data()) == TERN_OK);
    tern_session_free(s);
    return out;
  }
  tern_session* s = test::make_session_on(backend, model, 1, n, batch);
  for (int64_t pos = 0; pos < n; pos += batch) {
    const int64_t len = std::min(batch, n - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * width) == TERN_OK);
  }
  tern_session_free(s);
  return out;
}

void check_vs_cpu(tern_model* model, const std::vector<int32_t>& ids, int64_t width, int64_t batch,
                  const std::string& range, double tolerance) {
  auto cpu = run_on(TERN_BACKEND_CPU, model, ids, width, batch);
  auto whole = run_on(TERN_BACKEND_VULKAN, model, ids, width, batch);  // the device's own range: nothing split
  std::vector<float> gpu;
  {
    RangeOverride lowered(range);
    gpu = run_on(TERN_BACKEND_VULKAN, model, ids, width, batch);
  }
  const double err = relative_error(gpu.data(), cpu.data(), cpu.size());
  const double vs_whole = relative_error(gpu.data(), whole.data(), whole.size());
  INFO("maxStorageBufferRange lowered to " << range << ": Vulkan vs CPU " << err << ", vs unsplit Vulkan " << vs_whole);
  CHECK(err <= tolerance);
  // Each output column sums over k in the same order whichever part computes it.
  CHECK(vs_whole <= 1e-6);
  CHECK(test::vulkan_validation_messages() == 0);
}

constexpr int64_t kRange = 4096;  // bytes, for the op cases

}  // namespace

TEST_CASE("vulkan weight split: linear weights over maxStorageBufferRange run in parts", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // out 101 rows of 160 bytes: parts of at most 25 rows (the last of 1), weight bytes > 3x the range. The input
  // table [50, 40] (8000 bytes) is split too. The bias (404 bytes) fits whole but is bound per part all the same.
  for (bool bias : {true, false}) {
    const int64_t rows = 50, in = 40, out = 101, n = 43, batch = 8;
    REQUIRE(uint64_t(out * in) * sizeof(float) > 3 * uint64_t(kRange));
    auto g = test::start_graph(rows, in, 31);
    int32_t wt = test::add_constant(g, "w", {out, in}, random_floats(size_t(out * in), 32));
    int32_t bt = bias ? test::add_constant(g, "b", {out}, random_floats(size_t(out), 33)) : -1;
    int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, convert::params::Linear{}).ok());
    tern_model* model = test::finish_and_load(g, y, bias ? "vk_split_linear_bias" : "vk_split_linear", n);
    INFO("bias " << bias);
    check_vs_cpu(model, random_ids(n, rows, 34), out, batch, std::to_string(kRange), kOpTolerance);
    tern_model_free(model);
  }
}

TEST_CASE("vulkan weight split: a linear with uneven parts whose rows do not end aligned", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // Rows of 4 * 37 = 148 bytes: part boundaries fall at offsets that are not multiples of the offset alignment
  // unless the split moves them; either way each part's binding must stay within the range.
  const int64_t rows = 20, in = 37, out = 89, n = 19, batch = 5;
  REQUIRE(uint64_t(out * in) * sizeof(float) > 3 * uint64_t(kRange));
  auto g = test::start_graph(rows, in, 41);
  int32_t wt = test::add_constant(g, "w", {out, in}, random_floats(size_t(out * in), 42));
  int32_t bt = test::add_constant(g, "b", {out}, random_floats(size_t(out), 43));
  int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, convert::params::Linear{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_split_linear_odd", n);
  check_vs_cpu(model, random_ids(n, rows, 44), out, batch, std::to_string(kRange), kOpTolerance);
  tern_model_free(model);
}

TEST_CASE("vulkan weight split: an embedding table over maxStorageBufferRange runs in parts", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // [301, 24]: rows of 96 bytes, 28896 bytes in all, 8 parts; ids drawn over every row.
  const int64_t rows = 301, d = 24, n = 64, batch = 16;
  REQUIRE(uint64_t(rows * d) * sizeof(float) > 3 * uint64_t(kRange));
  auto g = test::start_graph(rows, d, 51);
  tern_model* model = test::finish_and_load(g, g.x, "vk_split_embedding", n);
  auto ids = random_ids(n, rows, 52);
  ids[0] = 0;
  ids[1] = int32_t(rows - 1);  // the first row of the first part and the last of the last
  check_vs_cpu(model, ids, d, batch, std::to_string(kRange), kOpTolerance);
  // An embedding only gathers: bit-identical.
  std::vector<float> want(size_t(n * d));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) want[size_t(i * d + j)] = g.table[size_t(ids[size_t(i)] * d + j)];
  }
  std::vector<float> gpu;
  {
    RangeOverride lowered(std::to_string(kRange));
    gpu = run_on(TERN_BACKEND_VULKAN, model, ids, d, batch);
  }
  CHECK(gpu == want);
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan weight split: an activation over maxStorageBufferRange still fails by the limit's name", "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // The table [4, 1024] splits into rows of exactly the range; the activation x [8, 1024] (32 KiB) cannot split.
  const int64_t rows = 4, d = 1024, out = 3;
  auto g = test::start_graph(rows, d, 61);
  int32_t wt = test::add_constant(g, "w", {out, d}, random_floats(size_t(out * d), 62));
  int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, -1}, convert::params::Linear{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_split_activation", 8);
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = TERN_BACKEND_VULKAN;
  so.max_tokens = 8;
  so.max_batch = 8;
  {
    RangeOverride lowered(std::to_string(kRange));
    tern_session* s = nullptr;
    CHECK(tern_session_create(model, &so, &s) != TERN_OK);
    CHECK(s == nullptr);
    const std::string message = tern_last_error();
    INFO(message);
    CHECK(message.find("maxStorageBufferRange") != std::string::npos);
    CHECK(message.find("activation") != std::string::npos);
  }
  {
    RangeOverride bad("lots");  // not a number: a clear error, not a silently ignored setting
    tern_session* s = nullptr;
    CHECK(tern_session_create(model, &so, &s) != TERN_OK);
    const std::string message = tern_last_error();
    INFO(message);
    CHECK(message.find(kRangeVar) != std::string::npos);
  }
  {
    RangeOverride one_row(std::to_string(4 * d));  // the same model runs once the activation fits
    so.max_batch = 1;
    tern_session* s = nullptr;
    INFO(tern_last_error());
    CHECK(tern_session_create(model, &so, &s) == TERN_OK);
    if (s) tern_session_free(s);
  }
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan weight split: the shipped kjv-byte model with its embedding and LM head split matches the CPU path",
          "[model][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::string out = test::scratch_dir("kjv_vulkan_split") + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(convert::convert_checkpoint(test::source_path("examples/models/kjv-byte"), out, opts).ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  const std::string text = test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt"));
  // Range 64 KiB: the tied [256, 256] embedding / LM head (256 KiB) in 4 parts, the [768, 256] and [256, 768] layer
  // weights (768 KiB) in 12 and 13; the learned positions [256, 256] are bound over max_tokens rows only (32 KiB).
  // Activations ([8, 768] at most) and each layer's KV state (keys and values of 32 tokens, 64 KiB) fit.
  const int64_t n = 32, vocab = 256, batch = 8;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(uint8_t(text[size_t(i)]));
  check_vs_cpu(model, ids, vocab, batch, std::to_string(64 * 1024), kModelTolerance);
  tern_model_free(model);
}
