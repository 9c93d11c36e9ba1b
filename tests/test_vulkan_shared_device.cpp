// SPDX-License-Identifier: MIT
// Vulkan sessions on one model share one device and one device copy of its weights (vulkan/shared_device.h): four
// sessions created from four threads at once hold one SharedDevice, the weights are uploaded once (as many copies
// and bytes as one session alone uploads, which for the float32 kjv-byte model are the file's weight bytes), the
// sessions give the logits one session gives (and the CPU path's, within Vulkan's bound) while running from four
// threads at once, and the device is freed with the last of them. A session with another device option, or on
// another model, gets a device of its own. The counts are the library's test hook, vk::shared_device_counts().
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "convert.h"
#include "op_graph.h"
#include "test_support.h"
#ifdef TERN_HAVE_VULKAN
#include "vulkan/shared_device.h"
#endif

using namespace tern;

#ifdef TERN_HAVE_VULKAN
namespace {

constexpr int kSessions = 4;
constexpr int64_t kTokens = 48, kVocab = 256;

tern_session_options vulkan_options() { return test::options_on(TERN_BACKEND_VULKAN, 1, kTokens, kTokens); }

// The shipped kjv-byte model (float32, dense attention, tied embedding and LM head), converted once per process.
std::string kjv_path() {
  static const std::string path = [] {
    const std::string p = test::scratch_dir("vk_shared_kjv") + "/model.tern";
    convert::ConvertOptions opts;
    opts.quiet = true;
    return convert::convert_checkpoint(test::source_path("examples/models/kjv-byte"), p, opts).ok() ? p : "";
  }();
  return path;
}

// kSessions different stretches of held-out text, kTokens bytes each.
std::vector<std::vector<int32_t>> texts() {
  const std::string text = test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt"));
  std::vector<std::vector<int32_t>> all(kSessions);
  for (int k = 0; k < kSessions; ++k) {
    for (int64_t i = 0; i < kTokens; ++i) all[size_t(k)].push_back(int32_t(uint8_t(text[size_t(1000 * k + i)])));
  }
  return all;
}

tern_memory_plan allocated(const tern_session* s) {
  tern_memory_plan p{};
  REQUIRE(tern_session_memory(s, &p) == TERN_OK);
  return p;
}

// Starts f(k) on kSessions threads that wait for each other before starting, so their calls overlap.
template <typename F>
void on_threads_at_once(F f) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kSessions; ++k) {
    threads.emplace_back([&, k] {
      ready.fetch_add(1);
      while (ready.load() < kSessions) std::this_thread::yield();
      f(k);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
#endif

TEST_CASE("vulkan shared device: four sessions on one model share one device and one copy of each weight",
          "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
#ifdef TERN_HAVE_VULKAN
  REQUIRE(!kjv_path().empty());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(kjv_path().c_str(), &model) == TERN_OK);
  const auto ids = texts();
  const tern_session_options so = vulkan_options();
  const vk::SharedDeviceCounts before = vk::shared_device_counts();

  // One session alone: what it uploads, and its logits for each text.
  std::vector<std::vector<float>> alone(kSessions);
  uint64_t uploads_alone = 0, bytes_alone = 0;
  {
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
    const vk::SharedDeviceCounts c = vk::shared_device_counts();
    CHECK(c.live == before.live + 1);
    uploads_alone = c.weight_uploads - before.weight_uploads;
    bytes_alone = c.weight_upload_bytes - before.weight_upload_bytes;
    const tern_memory_plan p = allocated(s);
    CHECK(uploads_alone > 0);
    CHECK(p.packed_weight_bytes == bytes_alone);
    CHECK(p.packed_weight_bytes == p.weight_bytes);  // every float32 tensor of the file once, the tied table too
    for (int k = 0; k < kSessions; ++k) alone[size_t(k)] = test::run_ids(s, ids[size_t(k)], kVocab);
    tern_session_free(s);
  }
  CHECK(vk::shared_device_counts().live == before.live);  // freed with its only session

  // Four sessions created at once: one device, each weight uploaded once.
  const vk::SharedDeviceCounts before_four = vk::shared_device_counts();
  std::vector<tern_session*> sessions(kSessions, nullptr);
  std::vector<tern_status> created(kSessions, TERN_OK);
  on_threads_at_once([&](int k) { created[size_t(k)] = tern_session_create(model, &so, &sessions[size_t(k)]); });
  for (int k = 0; k < kSessions; ++k) REQUIRE(created[size_t(k)] == TERN_OK);
  const vk::SharedDeviceCounts four = vk::shared_device_counts();
  CHECK(four.live == before.live + 1);
  CHECK(four.weight_uploads - before_four.weight_uploads == uploads_alone);
  CHECK(four.weight_upload_bytes - before_four.weight_upload_bytes == bytes_alone);
  for (tern_session* s : sessions) CHECK(allocated(s).packed_weight_bytes == bytes_alone);

  // Each session runs its own text from its own thread, all at once, three times over.
  constexpr int kRepeats = 3;
  std::vector<std::vector<std::vector<float>>> out(kSessions);
  std::vector<tern_status> ran(kSessions, TERN_OK);
  on_threads_at_once([&](int k) {
    for (int r = 0; r < kRepeats && ran[size_t(k)] == TERN_OK; ++r) {
      std::vector<float> logits(size_t(kTokens * kVocab));
      tern_session* s = sessions[size_t(k)];
      ran[size_t(k)] = tern_session_reset(s);
      if (ran[size_t(k)] == TERN_OK) ran[size_t(k)] = tern_session_forward(s, ids[size_t(k)].data(), kTokens, logits.data());
      out[size_t(k)].push_back(std::move(logits));
    }
  });
  for (int k = 0; k < kSessions; ++k) {
    INFO("session " << k << ": " << tern_session_last_error(sessions[size_t(k)]));
    REQUIRE(ran[size_t(k)] == TERN_OK);
    const auto cpu = test::run_on(TERN_BACKEND_CPU, model, ids[size_t(k)], kVocab, 0, 1);
    for (const auto& logits : out[size_t(k)]) {
      CHECK(logits == alone[size_t(k)]);  // the same device and shaders: bit for bit
      CHECK(test::relative_error(logits.data(), cpu.data(), cpu.size()) <= 1e-4);
    }
  }

  // The device (and the weights on it) goes with the last session, not before.
  for (int k = 0; k + 1 < kSessions; ++k) tern_session_free(sessions[size_t(k)]);
  CHECK(vk::shared_device_counts().live == before.live + 1);
  tern_session_free(sessions.back());
  CHECK(vk::shared_device_counts().live == before.live);
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
#endif
}

TEST_CASE("vulkan shared device: a different device option or another model gets a device of its own", "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
#ifdef TERN_HAVE_VULKAN
  REQUIRE(!kjv_path().empty());
  tern_model *model = nullptr, *again = nullptr;
  REQUIRE(tern_model_load(kjv_path().c_str(), &model) == TERN_OK);
  REQUIRE(tern_model_load(kjv_path().c_str(), &again) == TERN_OK);  // the same file, another model
  const int64_t live = vk::shared_device_counts().live;
  std::vector<tern_session*> sessions;
  auto create = [&](const tern_model* m, const tern_session_options& so) {
    tern_session* s = nullptr;
    const tern_status st = tern_session_create(m, &so, &s);
    if (st == TERN_OK) sessions.push_back(s);
    return st;
  };
  const tern_session_options best = vulkan_options();
  REQUIRE(create(model, best) == TERN_OK);
  CHECK(vk::shared_device_counts().live == live + 1);
  REQUIRE(create(model, best) == TERN_OK);  // the same options: the same device
  CHECK(vk::shared_device_counts().live == live + 1);

  tern_session_options first = best;
  first.device = 1;  // the loader's first device by number: maybe the one device 0 picks, but asked differently
  REQUIRE(create(model, first) == TERN_OK);
  CHECK(vk::shared_device_counts().live == live + 2);

  REQUIRE(create(again, best) == TERN_OK);
  CHECK(vk::shared_device_counts().live == live + 3);

  tern_session_options f16 = best;
  f16.weight_storage = TERN_WEIGHT_STORAGE_F16;  // a device with 16-bit storage enabled
  const tern_status st = create(model, f16);
  if (st == TERN_OK) {
    CHECK(vk::shared_device_counts().live == live + 4);
  } else {
    CHECK(st == TERN_UNSUPPORTED);
    WARN("the float16 device was not created: no storageBuffer16BitAccess here");
  }
  for (tern_session* s : sessions) tern_session_free(s);
  CHECK(vk::shared_device_counts().live == live);
  tern_model_free(model);
  tern_model_free(again);
  CHECK(test::vulkan_validation_messages() == 0);
#endif
}
