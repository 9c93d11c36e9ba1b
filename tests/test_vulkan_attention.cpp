// Attention on the Vulkan backend for the kinds with a shader (dense, sliding window, chunked local, strided and fixed
// with merged or split heads): against the
// reference kernel and the CPU path, in one pass and streamed through the device state; the state's size against the
// planner's; a kind without a shader fails session creation by name; limits are checked by name.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

#include "op_graph.h"
#include "ops/attention_pattern.h"
#include "ops/reference.h"
#include "test_support.h"
#ifdef TERN_HAVE_VULKAN
#include "vulkan/limits.h"
#endif

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kVulkanTolerance = 1e-4;

struct Kind {
  std::string name;
  AttentionPattern pattern;
  convert::params::AttentionKind fb;
};

std::vector<Kind> vulkan_kinds() {
  std::vector<Kind> out;
  AttentionPattern dense;
  out.push_back({"dense", dense, convert::params::DenseAttention{}});
  for (int w : {1, 5, 40}) {
    AttentionPattern p;
    p.kind = PatternKind::kSliding;
    p.window = w;
    out.push_back({"sliding w=" + std::to_string(w), p, convert::params::SlidingWindow{w}});
  }
  for (auto [c, b] : {std::pair{8, 1}, std::pair{5, 0}, std::pair{16, 2}}) {
    AttentionPattern p;
    p.kind = PatternKind::kChunked;
    p.chunk = c;
    p.chunks_before = b;
    out.push_back({"chunked C=" + std::to_string(c) + " before=" + std::to_string(b), p, convert::params::ChunkedLocal{c, b, 1}});
  }
  for (bool split : {false, true}) {
    const std::string heads = split ? " split" : " merged";
    for (int l : {1, 4, 9}) {
      AttentionPattern p;
      p.kind = PatternKind::kStrided;
      p.stride = l;
      p.split = split;
      out.push_back({"strided l=" + std::to_string(l) + heads, p, convert::params::Strided{l, split}});
    }
    for (auto [b, c] : {std::pair{1, 1}, std::pair{8, 2}, std::pair{12, 12}, std::pair{5, 1}}) {
      AttentionPattern p;
      p.kind = PatternKind::kFixed;
      p.block = b;
      p.summary = c;
      p.split = split;
      out.push_back({"fixed B=" + std::to_string(b) + " c=" + std::to_string(c) + heads, p, convert::params::Fixed{b, c, split}});
    }
  }
  return out;
}

struct AttentionModel {
  tern_model* model = nullptr;
  std::vector<int32_t> ids;
  std::vector<float> want;  // [n, inner] from the reference kernel
};

// ids -> EMBEDDING (random qkv rows) -> ATTENTION, and the reference output for n tokens.
AttentionModel attention_model(const Kind& kind, int heads, int dh, int64_t n, const std::string& name) {
  const int64_t inner = int64_t(heads) * dh, rows = 64;
  auto g = test::start_graph(rows, 3 * inner, 21);
  int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p;
  p.heads = heads;
  p.head_dim = dh;
  p.scale = 0.4f;
  p.kind = kind.fb;
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
  AttentionModel m;
  m.model = test::finish_and_load(g, y, name, n);
  std::mt19937 rng(22);
  m.ids.resize(size_t(n));
  for (auto& id : m.ids) id = int32_t(rng() % rows);
  std::vector<float> qkv(size_t(n * 3 * inner));
  ref::embedding(g.table.data(), 3 * inner, m.ids.data(), n, qkv.data());
  AttentionPattern pattern = kind.pattern;
  pattern.heads = heads;
  m.want.resize(size_t(n * inner));
  ref::attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0, heads, dh, 0.4f,
                 pattern, m.want.data());
  return m;
}

std::vector<float> stream(tern_session* s, const std::vector<int32_t>& ids, int64_t width, int64_t segment) {
  const int64_t n = int64_t(ids.size());
  std::vector<float> out(size_t(n * width));
  REQUIRE(tern_session_reset(s) == TERN_OK);
  for (int64_t pos = 0; pos < n; pos += segment) {
    const int64_t len = std::min(segment, n - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * width) == TERN_OK);
  }
  return out;
}

}  // namespace

TEST_CASE("vulkan: attention kinds match CPU and reference, in one pass and streamed", "[vulkan][attention]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const int64_t n = 70;
  for (const Kind& kind : vulkan_kinds()) {
    // Split heads need an even count: a wide-head case with two heads for them.
    const std::pair<int, int> wide = kind.pattern.split ? std::pair{2, 32} : std::pair{1, 64};
    for (auto [heads, dh] : {std::pair{2, 8}, wide}) {
      AttentionModel m = attention_model(kind, heads, dh, n, "vk_attention");
      const int64_t inner = int64_t(heads) * dh;
      tern_session* gpu = test::make_session_on(TERN_BACKEND_VULKAN, m.model, 1, n);
      tern_session* cpu = test::make_session_on(TERN_BACKEND_CPU, m.model, 2, n);
      for (int64_t segment : {n, int64_t(1), int64_t(13)}) {
        auto got = stream(gpu, m.ids, inner, segment);
        auto base = stream(cpu, m.ids, inner, segment);
        const double vs_ref = relative_error(got.data(), m.want.data(), got.size());
        const double vs_cpu = relative_error(got.data(), base.data(), got.size());
        INFO(kind.name << ", heads " << heads << " x " << dh << ", segment " << segment << ": vs reference " << vs_ref
                       << ", vs CPU " << vs_cpu);
        CHECK(vs_ref <= kVulkanTolerance);
        CHECK(vs_cpu <= kVulkanTolerance);
      }
      // The device state holds what the CPU path holds: every key for dense, a ring for the windowed kinds.
      tern_memory_plan on_gpu{}, on_cpu{};
      REQUIRE(tern_session_memory(gpu, &on_gpu) == TERN_OK);
      REQUIRE(tern_session_memory(cpu, &on_cpu) == TERN_OK);
      INFO(kind.name);
      CHECK(on_gpu.state_bytes == on_cpu.state_bytes);
      tern_session_free(gpu);
      tern_session_free(cpu);
      tern_model_free(m.model);
    }
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan: a windowed kind's device state stays bounded by its ring", "[vulkan][attention][streaming]") {
  TERN_SKIP_WITHOUT_VULKAN();
  Kind sliding = vulkan_kinds()[2];  // w = 5
  AttentionModel m = attention_model(sliding, 2, 8, 16, "vk_attention_bounded");
  tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, m.model, 1, 100000, 16);
  tern_memory_plan mem{}, plan{};
  REQUIRE(tern_session_memory(s, &mem) == TERN_OK);
  REQUIRE(tern_session_plan(s, 100000, &plan) == TERN_OK);
  CHECK(mem.state_bytes == plan.state_bytes);
  CHECK(mem.state_bytes == 2u * 2u * 8u * 4u * sizeof(float));  // k and v, 2 heads x 8, window - 1 = 4 keys
  tern_session_free(s);
  tern_model_free(m.model);
}

TEST_CASE("vulkan: no loader gives a clear status, and auto runs on the CPU", "[vulkan]") {
  AttentionModel m = attention_model(vulkan_kinds()[0], 2, 8, 16, "vk_no_loader");
  setenv("TERN_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  tern_session_options so;
  tern_session_options_init(&so);
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
  AttentionModel m = attention_model(vulkan_kinds()[0], 2, 8, 16, "vk_device_info");
  tern_session_options so;
  tern_session_options_init(&so);
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
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("Vulkan device 999"));
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
  AttentionModel m = attention_model(vulkan_kinds()[0], 2, 8, 16, "vk_profile");
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
