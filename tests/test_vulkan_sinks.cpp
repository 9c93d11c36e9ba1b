// SPDX-License-Identifier: MIT
// Attention sinks (ops/sink_cache.h) and the context shift on Vulkan against the CPU path, on the random-init Llama
// checkpoints tests/goldens/hf_llama_gqa and hf_llama_mha: the same calls give logits within 1e-4 a row, across the
// cache's cut and calls longer than S + W; a state saved on one backend continues on the other (the same saved
// bytes: SinkCache::saved_bytes, KvStateLayout); a generator under TERN_CONTEXT_SHIFT shifts twice on both. With a
// window that holds every token, sinks are plain dense attention: that session is the reference there.
// tests/test_sinks.cpp checks both backends against a PyTorch reference.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "generation_golden.h"
#include "hf_goldens.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;

namespace {

constexpr double kVulkanTolerance = 1e-4;
const char* const kModels[] = {"hf_llama_gqa", "hf_llama_mha"};

tern_model* load_golden(const std::string& name) {
  return test::convert_and_load(test::source_path("tests/goldens/" + name), "vulkan_sinks_" + name,
                                convert::ConvertOptions{true});
}

// A session on `backend` with sink_tokens S and sink_window W (W 0: none), calls of up to max_batch tokens.
tern_session* sink_session(tern_backend backend, const tern_model* model, int64_t sinks, int64_t window,
                           int64_t max_batch, int64_t max_tokens = 0) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = backend;
  so.threads = 2;
  so.max_batch = max_batch;
  so.max_tokens = max_tokens;
  so.sink_tokens = sinks;
  so.sink_window = window;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  return s;
}

int64_t vocab_of(const tern_model* model) {
  tern_session* s = sink_session(TERN_BACKEND_CPU, model, 0, 0, 1, 1);
  const int64_t vocab = tern_session_vocab_size(s);
  tern_session_free(s);
  return vocab;
}

std::vector<int32_t> some_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 37 + 11) % vocab);
  return ids;
}

// Appends ids[at, at + n) to s and returns the logits [n, vocab].
std::vector<float> append(tern_session* s, const std::vector<int32_t>& ids, int64_t at, int64_t n, int64_t vocab) {
  std::vector<float> logits(size_t(n * vocab));
  INFO(tern_last_error());
  REQUIRE(tern_session_append(s, ids.data() + at, n, logits.data()) == TERN_OK);
  return logits;
}

void check_rows(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab, const std::string& what) {
  REQUIRE(got.size() == want.size());
  const double row = test::worst_row_error(got, want, vocab);
  INFO(what << ": worst row " << row);
  CHECK(row <= kVulkanTolerance);
}

std::vector<uint8_t> saved(const tern_session* s) {
  size_t size = 0;
  REQUIRE(tern_session_save_state(s, nullptr, &size) == TERN_OK);
  std::vector<uint8_t> blob(size);
  REQUIRE(tern_session_save_state(s, blob.data(), &size) == TERN_OK);
  blob.resize(size);
  return blob;
}

void load(tern_session* s, const std::vector<uint8_t>& blob) {
  INFO(tern_last_error());
  REQUIRE(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
}

// S = 3, W = 5: the calls cross the cut, and the 11-token call is longer than S + W = 8.
constexpr int64_t kSinks = 3, kWindow = 5;
const int64_t kCalls[] = {4, 1, 1, 2, 11, 1, 3, 1, 6, 1, 1};

}  // namespace

TEST_CASE("attention sinks on Vulkan: each call's logits match the CPU path's", "[model][hf][vulkan][sinks]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : kModels) {
    INFO(name);
    tern_model* model = load_golden(name);
    const int64_t vocab = vocab_of(model);
    const std::vector<int32_t> ids = some_ids(40, vocab);
    tern_session* cpu = sink_session(TERN_BACKEND_CPU, model, kSinks, kWindow, 16);
    tern_session* gpu = sink_session(TERN_BACKEND_VULKAN, model, kSinks, kWindow, 16);
    int64_t at = 0;
    for (int64_t n : kCalls) {
      check_rows(append(gpu, ids, at, n, vocab), append(cpu, ids, at, n, vocab), vocab,
                 std::string(name) + " call of " + std::to_string(n) + " at " + std::to_string(at));
      at += n;
    }
    CHECK(tern_session_position(gpu) == at);
    tern_session_free(gpu);
    tern_session_free(cpu);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("attention sinks on Vulkan: a window that holds every token is plain dense attention",
          "[model][hf][vulkan][sinks]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : kModels) {
    INFO(name);
    tern_model* model = load_golden(name);
    const int64_t vocab = vocab_of(model);
    const std::vector<int32_t> ids = some_ids(20, vocab);
    tern_session* plain = sink_session(TERN_BACKEND_VULKAN, model, 0, 0, 16, 32);
    tern_session* sinks = sink_session(TERN_BACKEND_VULKAN, model, 2, 30, 16);
    int64_t at = 0;
    for (int64_t n : {7, 1, 1, 5, 1, 5}) {
      check_rows(append(sinks, ids, at, n, vocab), append(plain, ids, at, n, vocab), vocab,
                 std::string(name) + " call of " + std::to_string(n) + " at " + std::to_string(at));
      at += n;
    }
    tern_session_free(sinks);
    tern_session_free(plain);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("attention sinks on Vulkan: a state saved on one backend continues on the other", "[model][hf][vulkan][sinks]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : kModels) {
    INFO(name);
    tern_model* model = load_golden(name);
    const int64_t vocab = vocab_of(model);
    const std::vector<int32_t> ids = some_ids(40, vocab);
    // Saved after 12 tokens (cache cut: held 8 of 12, the ring wrapped) and after 4 (held 4).
    for (int64_t before : {12, 4}) {
      INFO("saved after " << before << " tokens");
      tern_session* cpu = sink_session(TERN_BACKEND_CPU, model, kSinks, kWindow, 16);
      tern_session* gpu = sink_session(TERN_BACKEND_VULKAN, model, kSinks, kWindow, 16);
      append(cpu, ids, 0, before, vocab);
      append(gpu, ids, 0, before, vocab);
      const std::vector<uint8_t> from_cpu = saved(cpu), from_gpu = saved(gpu);
      CHECK(from_cpu.size() == from_gpu.size());
      tern_session* gpu_from_cpu = sink_session(TERN_BACKEND_VULKAN, model, kSinks, kWindow, 16);
      tern_session* cpu_from_gpu = sink_session(TERN_BACKEND_CPU, model, kSinks, kWindow, 16);
      load(gpu_from_cpu, from_cpu);
      load(cpu_from_gpu, from_gpu);
      int64_t at = before;
      for (int64_t n : {1, 9, 2, 1}) {
        const std::vector<float> want = append(cpu, ids, at, n, vocab);
        const std::string call = " call of " + std::to_string(n) + " at " + std::to_string(at);
        check_rows(append(gpu_from_cpu, ids, at, n, vocab), want, vocab, std::string(name) + " CPU state on Vulkan" + call);
        check_rows(append(cpu_from_gpu, ids, at, n, vocab), want, vocab, std::string(name) + " Vulkan state on the CPU" + call);
        at += n;
      }
      // Another S or W: refused before anything is loaded.
      tern_session* other = sink_session(TERN_BACKEND_VULKAN, model, kSinks, kWindow + 1, 16);
      CHECK(tern_session_load_state(other, from_cpu.data(), from_cpu.size()) == TERN_INVALID_ARGUMENT);
      tern_session_free(other);
      tern_session_free(cpu_from_gpu);
      tern_session_free(gpu_from_cpu);
      tern_session_free(gpu);
      tern_session_free(cpu);
    }
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("context shift on Vulkan: a generator that shifts twice matches the CPU path", "[model][hf][vulkan][shift]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : kModels) {
    INFO(name);
    tern_model* model = load_golden(name);
    const int64_t vocab = vocab_of(model);
    const std::vector<int32_t> ids = some_ids(34, vocab);
    // max_tokens 16, keep 6: the sequence fills at 16 tokens, shifts to 6, fills again after 10 more.
    tern_session* cpu = sink_session(TERN_BACKEND_CPU, model, 0, 0, 16, 16);
    tern_session* gpu = sink_session(TERN_BACKEND_VULKAN, model, 0, 0, 16, 16);
    tern_generator_options go;
    tern_generator_options_init(&go);
    go.context_policy = TERN_CONTEXT_SHIFT;
    go.keep_tokens = 6;
    tern_generator* cpu_gen = nullptr;
    tern_generator* gpu_gen = nullptr;
    REQUIRE(tern_generator_create(cpu, &go, &cpu_gen) == TERN_OK);
    REQUIRE(tern_generator_create(gpu, &go, &gpu_gen) == TERN_OK);
    REQUIRE(tern_generator_prompt(cpu_gen, ids.data(), 4, nullptr) == TERN_OK);
    REQUIRE(tern_generator_prompt(gpu_gen, ids.data(), 4, nullptr) == TERN_OK);
    for (size_t i = 4; i < ids.size(); ++i) {
      INFO(tern_generator_last_error(gpu_gen) << " / " << tern_generator_last_error(cpu_gen));
      REQUIRE(tern_generator_append(cpu_gen, &ids[i], 1) == TERN_OK);
      REQUIRE(tern_generator_append(gpu_gen, &ids[i], 1) == TERN_OK);
      CHECK(tern_session_position(gpu) == tern_session_position(cpu));
      const float* want = tern_generator_logits(cpu_gen, nullptr);
      const float* got = tern_generator_logits(gpu_gen, nullptr);
      check_rows(std::vector<float>(got, got + vocab), std::vector<float>(want, want + vocab), vocab,
                 std::string(name) + " token " + std::to_string(i) + " after " +
                     std::to_string(tern_generator_slides(cpu_gen)) + " shifts");
    }
    CHECK(tern_generator_slides(cpu_gen) == 2);
    CHECK(tern_generator_slides(gpu_gen) == 2);
    // The shifted state moves between backends: saved on the CPU (14 tokens held), continued on Vulkan.
    REQUIRE(tern_session_position(cpu) == 14);
    tern_session* gpu_from_cpu = sink_session(TERN_BACKEND_VULKAN, model, 0, 0, 16, 16);
    load(gpu_from_cpu, saved(cpu));
    const std::vector<int32_t> more = some_ids(2, vocab);
    const std::vector<float> got = append(gpu_from_cpu, more, 0, 2, vocab);
    tern_generator_free(gpu_gen);
    tern_generator_free(cpu_gen);
    check_rows(got, append(cpu, more, 0, 2, vocab), vocab, std::string(name) + " shifted CPU state on Vulkan");
    tern_session_free(gpu_from_cpu);
    tern_session_free(gpu);
    tern_session_free(cpu);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}
