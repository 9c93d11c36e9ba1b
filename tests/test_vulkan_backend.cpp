// SPDX-License-Identifier: MIT
// What only the Vulkan backend has: a missing loader gives a clear status and auto falls back to the CPU; the session
// reports its device and refuses a bad device number; a dispatch or binding over a device limit fails with the
// limit's name; per-op profiling on the device; the shared-memory limit of relative XL attention; weights larger
// than maxStorageBufferRange: LINEAR weights (and biases) bound as parts of whole output rows and EMBEDDING tables as
// parts of whole vocab rows, one dispatch per part, while any other binding over the range (an activation) still
// fails session creation naming the limit. lavapipe's real range is large, so the weight-split cases lower it with
// TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE, which the Vulkan context reads when it is created: once per session, so
// setting it before tern_session_create applies to that session. Each op's parity with the reference and the CPU
// path, and each kind's device state, is the op case table's (support/op_cases.h, test_backend_ops); the goldens run
// in each family's own test file, once per backend. Without a device each case that needs one ends as a visible skip.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "attention_cases.h"
#include "convert.h"
#include "op_graph.h"
#include "test_support.h"
#ifdef TERN_HAVE_VULKAN
#include "vulkan/limits.h"
#endif

using namespace tern;
using tern::test::random_floats;
using tern::test::random_ids;
using tern::test::relative_error;

namespace {

// Session options on the Vulkan backend with the given sizes.
tern_session_options vulkan_options(int64_t max_tokens, int64_t max_batch) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = TERN_BACKEND_VULKAN;
  so.max_tokens = max_tokens;
  so.max_batch = max_batch;
  return so;
}

}  // namespace

TEST_CASE("vulkan: no loader gives a clear status, and auto runs on the CPU", "[vulkan]") {
  test::AttentionModel m = test::attention_model(test::backend_attention_kinds()[0], 2, 8, 16, "vk_no_loader");
  setenv("TERN_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = TERN_BACKEND_VULKAN;
  tern_session* s = nullptr;
  const tern_status st = tern_session_create(m.model, &so, &s);
  const std::string message = tern_last_error();
  so.backend = TERN_BACKEND_AUTO;
  const tern_status auto_st = tern_session_create(m.model, &so, &s);
  unsetenv("TERN_VULKAN_LOADER");
  CHECK(st == TERN_UNSUPPORTED);
#ifdef TERN_HAVE_VULKAN
  CHECK_THAT(message, Catch::Contains("no Vulkan loader"));
#else
  CHECK_THAT(message, Catch::Contains("not built"));
#endif
  REQUIRE(auto_st == TERN_OK);
  tern_backend_info where{};
  REQUIRE(tern_session_get_backend(s, &where) == TERN_OK);
  CHECK(where.backend == TERN_BACKEND_CPU);
  CHECK(std::string(where.device_name) == "CPU");
  tern_session_free(s);
  tern_model_free(m.model);
}

TEST_CASE("vulkan: the session reports its device, and a bad device number is refused", "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  test::AttentionModel m = test::attention_model(test::backend_attention_kinds()[0], 2, 8, 16, "vk_device_info");
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = TERN_BACKEND_VULKAN;
  so.device = 1;  // the loader's first device
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(m.model, &so, &s) == TERN_OK);
  tern_backend_info where{};
  REQUIRE(tern_session_get_backend(s, &where) == TERN_OK);
  CHECK(where.backend == TERN_BACKEND_VULKAN);
  CHECK(std::string(where.device_name).size() > 0);
  CHECK(std::string(where.driver).size() > 0);
  tern_session_free(s);
  so.device = 1000;
  CHECK(tern_session_create(m.model, &so, &s) == TERN_INVALID_ARGUMENT);
  // The number as given, with vulkaninfo's name for it.
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("Vulkan device 1000 (vulkaninfo's GPU999)"));
  so.device = -1;
  CHECK(tern_session_create(m.model, &so, &s) == TERN_INVALID_ARGUMENT);
  tern_model_free(m.model);
}

#ifdef TERN_HAVE_VULKAN
TEST_CASE("vulkan: a dispatch or binding over a device limit fails with the limit's name", "[vulkan]") {
  vk::DeviceLimits limits;
  limits.max_storage_buffer_range = 1 << 27;  // 128 MiB, as some mobile drivers
  limits.max_compute_shared_memory_size = 16384;
  for (int a = 0; a < 3; ++a) {
    limits.max_compute_work_group_size[a] = 256;
    limits.max_compute_work_group_count[a] = 65535;
  }
  limits.max_compute_work_group_invocations = 128;
  limits.max_push_constants_size = 128;
  limits.max_per_stage_storage_buffers = 8;
  vk::DispatchNeeds ok;
  ok.where = "op 4 (ATTENTION 'layers.0.attn')";
  ok.local_size[0] = 32;
  ok.shared_bytes = 16384;
  CHECK(vk::check_dispatch(limits, ok).ok());
  vk::DispatchNeeds shared = ok;
  shared.shared_bytes = 2 * 32 * 512 * 4;  // a key tile of 32 keys x 512 floats, k and v
  Status st = vk::check_dispatch(limits, shared);
  CHECK(st.code() == TERN_UNSUPPORTED);
  CHECK_THAT(st.message(), Catch::Contains("maxComputeSharedMemorySize") && Catch::Contains("layers.0.attn"));
  vk::DispatchNeeds wide = ok;
  wide.local_size[0] = 16;
  wide.local_size[1] = 16;
  CHECK_THAT(vk::check_dispatch(limits, wide).message(), Catch::Contains("maxComputeWorkGroupInvocations"));
  vk::DispatchNeeds many = ok;
  many.max_groups[1] = 70000;
  CHECK_THAT(vk::check_dispatch(limits, many).message(), Catch::Contains("maxComputeWorkGroupCount[1]"));
  Status big = vk::check_binding(limits, "op 40 (LINEAR 'lm_head')", "weight", uint64_t(200) << 20);
  CHECK(big.code() == TERN_UNSUPPORTED);
  CHECK_THAT(big.message(), Catch::Contains("maxStorageBufferRange") && Catch::Contains("lm_head"));
}
#endif

TEST_CASE("vulkan: per-op profiling times each op's dispatches on the device", "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  test::AttentionModel m = test::attention_model(test::backend_attention_kinds()[0], 2, 8, 16, "vk_profile");
  tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, m.model, 1, 16);
  REQUIRE(tern_session_set_profiling(s, 1) == TERN_OK);
  std::vector<float> out(16 * 16);
  for (int run = 0; run < 2; ++run) REQUIRE(tern_session_forward(s, m.ids.data(), 16, out.data()) == TERN_OK);
  size_t count = 0;
  REQUIRE(tern_session_get_profile(s, nullptr, 0, &count) == TERN_OK);
  std::vector<tern_op_profile> ops(count);
  REQUIRE(tern_session_get_profile(s, ops.data(), count, &count) == TERN_OK);
  REQUIRE(count == 2);  // the embedding and the attention
  for (const auto& op : ops) {
    INFO(op.name);
    CHECK(op.calls == 2);
    CHECK(op.total_ns > 0);  // lavapipe and GPUs have timestamps on their compute queues
  }
  tern_session_free(s);
  tern_model_free(m.model);
}

TEST_CASE("vulkan: per-op profiling times the dispatches of every model family's ops", "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // One golden checkpoint per family whose ops lower to several dispatches of their own (LSH, routing, adaptive
  // span, Transformer-XL and compressive memory, adaptive input and softmax): each op run gets device time.
  for (const char* name : {"reformer_mixed_factorized", "routing_mixed", "adaptive_span_learned", "transfo_xl_adaptive",
                           "compressive_conv_mean"}) {
    INFO(name);
    const std::string dir = test::source_path(std::string("tests/goldens/") + name);
    const std::string path = test::scratch_dir(std::string("vk_profile_") + name) + "/model.tern";
    REQUIRE(convert::convert_checkpoint(dir, path, {true}).ok());
    tern_model* model = nullptr;
    REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
    tern_model_info info{};
    tern_model_get_info(model, &info);
    const int64_t n = 16;
    tern_session* s = test::make_forward_session_on(TERN_BACKEND_VULKAN, model, 1, n);  // routing: whole sequences
    REQUIRE(tern_session_set_profiling(s, 1) == TERN_OK);
    const std::vector<int32_t> ids = random_ids(n, info.vocab_size, 7);
    std::vector<float> out(size_t(n * info.vocab_size));
    REQUIRE(tern_session_forward(s, ids.data(), n, out.data()) == TERN_OK);
    size_t count = 0;
    REQUIRE(tern_session_get_profile(s, nullptr, 0, &count) == TERN_OK);
    std::vector<tern_op_profile> ops(count);
    REQUIRE(tern_session_get_profile(s, ops.data(), count, &count) == TERN_OK);
    for (const auto& op : ops) {
      INFO(op.name << " (" << op.kind << ")");
      CHECK(op.calls == 1);
      CHECK(op.total_ns > 0);
    }
    tern_session_free(s);
    tern_model_free(model);
  }
}

TEST_CASE("vulkan: relative XL: a layer too wide for the device's shared memory fails session creation by the limit",
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
  const fb::AttentionParamsT p = convert::attention_params(heads, dh, 0.5f, fb::RelativeXLT{{}, 2, 0, false, 1e-5f});
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, w, p).ok());
  tern_model* model = test::finish_and_load(g, y, "vulkan_relative_xl_wide", 0);
  tern_session_options so = vulkan_options(8, 4);
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &so, &s) != TERN_OK);
  CHECK(s == nullptr);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("ATTENTION 'attn'") &&
                                                 Catch::Contains("maxComputeSharedMemorySize"));
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

namespace {

constexpr double kOpTolerance = 1e-5;
constexpr double kModelTolerance = 1e-4;
constexpr const char* kRangeVar = "TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE";

// Sets the range override for the sessions created in its scope, then restores what was there.
class RangeOverride : public test::EnvOverride {
 public:
  explicit RangeOverride(const std::string& bytes) : EnvOverride(kRangeVar, bytes) {}
};

void check_vs_cpu(tern_model* model, const std::vector<int32_t>& ids, int64_t width, int64_t batch,
                  const std::string& range, double tolerance) {
  auto cpu = test::run_on(TERN_BACKEND_CPU, model, ids, width);  // one forward
  // Vulkan: appends of `batch` tokens (the session's max_batch, small so that the activations stay within the
  // lowered range).
  auto whole = test::run_on(TERN_BACKEND_VULKAN, model, ids, width, batch, 1);  // the device's own range: nothing split
  std::vector<float> gpu;
  {
    RangeOverride lowered(range);
    gpu = test::run_on(TERN_BACKEND_VULKAN, model, ids, width, batch, 1);
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
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, fb::LinearParamsT{}).ok());
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
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, fb::LinearParamsT{}).ok());
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
    gpu = test::run_on(TERN_BACKEND_VULKAN, model, ids, d, batch, 1);
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
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, -1}, fb::LinearParamsT{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_split_activation", 8);
  tern_session_options so = vulkan_options(8, 8);
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

namespace {

// tern_session_count_dispatches of s for a call of n tokens after position: per op (graph order) and the total.
using test::DispatchCounts;
using test::dispatch_counts;

uint64_t sum(const std::vector<uint64_t>& v) {
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

}  // namespace

TEST_CASE("vulkan: dispatch counts: every op dispatches, the ops add up to the total, two sessions agree, the CPU has none",
          "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  test::AttentionModel m = test::attention_model(test::backend_attention_kinds()[0], 2, 8, 16, "vk_dispatches");
  tern_session* a = test::make_session_on(TERN_BACKEND_VULKAN, m.model, 1, 16, 16);
  tern_session* b = test::make_session_on(TERN_BACKEND_VULKAN, m.model, 1, 16, 16);
  for (const auto& [n, position] : {std::pair<int64_t, int64_t>{1, 0}, {1, 15}, {16, 0}, {4, 8}}) {
    INFO("n " << n << " after " << position);
    const DispatchCounts one = dispatch_counts(a, n, position);
    REQUIRE(one.per_op.size() == 2);  // the embedding and the attention
    for (uint64_t d : one.per_op) CHECK(d >= 1);
    CHECK(one.total == sum(one.per_op));
    const DispatchCounts other = dispatch_counts(b, n, position);
    CHECK(other.per_op == one.per_op);
    CHECK(other.total == one.total);
  }
  // A call no session of these sizes can run is refused, naming the numbers.
  size_t count = 0;
  uint64_t total = 0;
  CHECK(tern_session_count_dispatches(a, 0, 0, nullptr, 0, &count, &total) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(a)), Catch::Contains("a call of 0 tokens"));
  CHECK(tern_session_count_dispatches(a, 17, 0, nullptr, 0, &count, &total) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(a)), Catch::Contains("max_batch of 16"));
  CHECK(tern_session_count_dispatches(a, 2, 15, nullptr, 0, &count, &total) == TERN_INVALID_ARGUMENT);
  tern_session* cpu = test::make_session_on(TERN_BACKEND_CPU, m.model, 1, 16, 16);
  const DispatchCounts none = dispatch_counts(cpu, 16, 0);
  CHECK(none.total == 0);
  CHECK(none.per_op == std::vector<uint64_t>(2, 0));
  tern_session_free(cpu);
  tern_session_free(b);
  tern_session_free(a);
  tern_model_free(m.model);
}

TEST_CASE("vulkan: dispatch counts: a weight split over maxStorageBufferRange dispatches once more per part",
          "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // The graph of the weight-split test above: an embedding table [50, 40] (8000 bytes) and a linear [101, 40] (rows
  // of 160 bytes). With the range at 4096 bytes a part holds 25 rows: the table splits in 2 parts, the linear in 5
  // (4 of 25 rows, 1 of 1), and each part is a lowering of its own, so the op's count is its unsplit count times its
  // parts, whatever one lowering dispatches.
  const int64_t rows = 50, in = 40, out = 101, n = 8;
  auto g = test::start_graph(rows, in, 31);
  int32_t wt = test::add_constant(g, "w", {out, in}, random_floats(size_t(out * in), 32));
  int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, -1}, fb::LinearParamsT{}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_dispatches_split", n);
  tern_session* whole = test::make_session_on(TERN_BACKEND_VULKAN, model, 1, n, n);
  const DispatchCounts unsplit = dispatch_counts(whole, n, 0);
  tern_session_free(whole);
  DispatchCounts split;
  {
    RangeOverride lowered(std::to_string(kRange));
    tern_session* parts = test::make_session_on(TERN_BACKEND_VULKAN, model, 1, n, n);
    split = dispatch_counts(parts, n, 0);
    tern_session_free(parts);
  }
  REQUIRE(unsplit.per_op.size() == 2);
  REQUIRE(split.per_op.size() == 2);
  CHECK(split.per_op[0] == 2 * unsplit.per_op[0]);  // the embedding: 2 parts
  CHECK(split.per_op[1] == 5 * unsplit.per_op[1]);  // the linear: 5 parts
  CHECK(split.total == sum(split.per_op));
  tern_model_free(model);
}
