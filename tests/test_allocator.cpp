// SPDX-License-Identifier: MIT
// An allocator the app provides (tern_session_options.allocator): a counting allocator sees the CPU session's
// buffers, totalling what tern_session_memory reports less the model's packed weights, every block back at
// tern_session_free, the alignment asked and no more; a refusal is a clean TERN_OUT_OF_MEMORY naming the bytes; and
// results and generated tokens are those of the library's own allocator.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "convert.h"
#include "hf_goldens.h"
#include "test_support.h"

using namespace tern;

namespace {

// Hands out blocks aligned to exactly the alignment asked (never to twice it), so a session that assumed more would
// read misaligned, and remembers each one to check what comes back.
struct CountingAllocator {
  struct Block {
    void* raw;
    size_t size;
  };
  std::map<void*, Block> live;
  uint64_t live_bytes = 0;
  int64_t calls = 0;
  int64_t refuse_call = -1;   // this call (0-based) returns NULL; -1: none
  int64_t bad_releases = 0;   // a pointer not handed out, or a size other than the one asked
  int64_t bad_alignments = 0; // an alignment below 64 or not a power of two
  std::vector<size_t> sizes;

  static void* allocate(void* user_data, size_t size, size_t alignment) {
    auto* self = static_cast<CountingAllocator*>(user_data);
    const int64_t call = self->calls++;
    if (alignment < 64 || (alignment & (alignment - 1)) != 0) ++self->bad_alignments;
    if (call == self->refuse_call) return nullptr;
    void* raw = std::malloc(size + 3 * alignment);  // room for the rounding up and the offset
    if (!raw) return nullptr;
    const uintptr_t double_aligned = (reinterpret_cast<uintptr_t>(raw) + 2 * alignment - 1) / (2 * alignment) * (2 * alignment);
    void* p = reinterpret_cast<void*>(double_aligned + alignment);  // aligned to alignment, not to 2 * alignment
    self->live[p] = {raw, size};
    self->live_bytes += size;
    self->sizes.push_back(size);
    return p;
  }
  static void release(void* user_data, void* p, size_t size) {
    auto* self = static_cast<CountingAllocator*>(user_data);
    auto it = self->live.find(p);
    if (it == self->live.end() || it->second.size != size) {
      ++self->bad_releases;
      return;
    }
    self->live_bytes -= size;
    std::free(it->second.raw);
    self->live.erase(it);
  }
  tern_allocator table() { return tern_allocator{allocate, release, this}; }
};

tern_model* load_golden(const std::string& name) {
  return test::convert_and_load(test::source_path("tests/goldens/" + name), "allocator_" + name,
                                convert::ConvertOptions{true});
}

tern_session_options cpu_options(const tern_allocator* allocator) {
  tern_session_options o;
  tern_session_options_init(&o);
  o.threads = 1;
  o.max_tokens = 64;
  o.allocator = allocator;
  return o;
}

// A CPU session of model on `counting`, and what it allocated (tern_session_memory).
tern_session* create_counted(const tern_model* model, CountingAllocator& counting, tern_memory_plan* mem) {
  const tern_allocator table = counting.table();  // copied by the session
  const tern_session_options o = cpu_options(&table);
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &o, &s) == TERN_OK);
  REQUIRE(tern_session_memory(s, mem) == TERN_OK);
  return s;
}

// After tern_session_free: every block came back, with the size it was asked for.
void check_all_released(const CountingAllocator& counting) {
  CHECK(counting.live.empty());
  CHECK(counting.live_bytes == 0);
  CHECK(counting.bad_releases == 0);
}

std::vector<float> forward(tern_session* s, const std::vector<int32_t>& ids) {
  std::vector<float> logits(ids.size() * size_t(tern_session_vocab_size(s)));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, ids.data(), int64_t(ids.size()), logits.data()) == TERN_OK);
  return logits;
}

}  // namespace

TEST_CASE("allocator: a CPU session's arena and state come from the app, all of it back at free", "[allocator]") {
  // A Llama checkpoint: dense attention's KV store is the state, every LINEAR packed once per model, no table at
  // creation.
  tern_model* model = load_golden("hf_llama_gqa");
  CountingAllocator counting;
  tern_memory_plan mem{};
  tern_session* s = create_counted(model, counting, &mem);
  CHECK(counting.calls > 0);
  CHECK(counting.bad_alignments == 0);
  CHECK(counting.live_bytes == mem.arena_bytes + mem.state_bytes);  // all but the model's packed weights
  CHECK(mem.packed_weight_bytes > 0);

  // Results: those of the library's own allocator, bit for bit, on blocks aligned to 64 bytes only.
  const std::vector<int32_t> ids = test::random_ids(40, tern_session_vocab_size(s), 5);
  const std::vector<float> with_app = forward(s, ids);
  const int64_t calls = counting.calls;
  const std::vector<float> again = forward(s, ids);
  CHECK(counting.calls == calls);  // nothing allocated in a run
  CHECK(again == with_app);
  const tern_session_options own_options = cpu_options(nullptr);
  tern_session* own = nullptr;
  REQUIRE(tern_session_create(model, &own_options, &own) == TERN_OK);
  CHECK(forward(own, ids) == with_app);
  tern_session_free(own);

  tern_session_free(s);
  check_all_released(counting);
  tern_model_free(model);
}

TEST_CASE("allocator: tables computed at creation go through it too, the model's packed weights do not", "[allocator]") {
  // Transformer-XL: its relative-position tables are counted in packed_weight_bytes with the packed matrices.
  tern_model* model = load_golden("transfo_xl_plain");
  CountingAllocator counting;
  tern_memory_plan mem{};
  tern_session* s = create_counted(model, counting, &mem);
  CHECK(mem.state_bytes > 0);
  CHECK(counting.live_bytes > mem.arena_bytes + mem.state_bytes);  // the tables
  CHECK(counting.live_bytes < mem.arena_bytes + mem.state_bytes + mem.packed_weight_bytes);
  tern_session_free(s);
  check_all_released(counting);
  tern_model_free(model);
}

TEST_CASE("allocator: a refusal is TERN_OUT_OF_MEMORY naming the bytes, with every earlier block released",
          "[allocator][errors]") {
  tern_model* model = load_golden("hf_llama_gqa");
  int64_t allocations = 0;
  {
    CountingAllocator counting;
    tern_memory_plan mem{};
    tern_session_free(create_counted(model, counting, &mem));
    allocations = counting.calls;
  }
  REQUIRE(allocations >= 2);
  for (int64_t refuse : {int64_t(0), int64_t(1), allocations - 1}) {
    CountingAllocator counting;
    counting.refuse_call = refuse;
    const tern_allocator table = counting.table();
    const tern_session_options o = cpu_options(&table);
    tern_session* s = nullptr;
    INFO("refusing call " << refuse);
    CHECK(tern_session_create(model, &o, &s) == TERN_OUT_OF_MEMORY);
    CHECK(s == nullptr);
    const std::string message = tern_last_error();
    INFO(message);
    CHECK(message.find("the app's allocator (tern_session_options.allocator) returned NULL for") != std::string::npos);
    CHECK(message.find("alignment 64") != std::string::npos);
    check_all_released(counting);
  }
  // Half an allocator is refused before anything is asked of it.
  CountingAllocator counting;
  const tern_allocator half{CountingAllocator::allocate, nullptr, &counting};
  const tern_session_options o = cpu_options(&half);
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &o, &s) == TERN_INVALID_ARGUMENT);
  CHECK(std::string(tern_last_error()).find("release function is NULL") != std::string::npos);
  CHECK(counting.calls == 0);
  tern_model_free(model);
}

TEST_CASE("allocator: generation through it gives the tokens of the library's own allocator", "[allocator]") {
  tern_model* model = load_golden("hf_llama_gqa");
  CountingAllocator counting;
  const tern_allocator table = counting.table();
  auto generate = [&](const tern_allocator* allocator) {
    const tern_session_options o = cpu_options(allocator);
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(model, &o, &s) == TERN_OK);
    tern_sampler_options so;
    tern_sampler_options_init(&so);
    so.temperature = 0.8f;
    so.seed = 17;
    tern_sampler* sampler = nullptr;
    REQUIRE(tern_sampler_create(&so, &sampler) == TERN_OK);
    tern_generator* g = nullptr;
    REQUIRE(tern_generator_create(s, nullptr, &g) == TERN_OK);
    const std::vector<int32_t> prompt = test::random_ids(12, tern_session_vocab_size(s), 9);
    REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 40; ++i) {
      int32_t token = -1;
      REQUIRE(tern_generator_next(g, sampler, &token) == TERN_OK);
      tokens.push_back(token);
    }
    tern_generator_free(g);
    tern_sampler_free(sampler);
    tern_session_free(s);
    return tokens;
  };
  const std::vector<int32_t> own = generate(nullptr);
  const std::vector<int32_t> with_app = generate(&table);
  CHECK(with_app == own);
  CHECK(counting.calls > 0);
  CHECK(counting.live.empty());
  tern_model_free(model);
}

TEST_CASE("allocator: an options struct from before the field gets the library's allocator", "[allocator][api]") {
  tern_model* model = load_golden("hf_llama_gqa");
  tern_session_options o = cpu_options(nullptr);
  // Garbage past the older struct's end: the library must not read it.
  o.allocator = reinterpret_cast<const tern_allocator*>(uintptr_t(0x10));
  o.struct_size = offsetof(tern_session_options, allocator);
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &o, &s) == TERN_OK);
  const std::vector<int32_t> ids = test::random_ids(8, tern_session_vocab_size(s), 3);
  CHECK(forward(s, ids).size() == ids.size() * size_t(tern_session_vocab_size(s)));
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("allocator: a Vulkan session refuses it, naming the option", "[allocator][vulkan]") {
  std::string why;
  if (!test::vulkan_device(&why)) {
    WARN("no Vulkan device: " << why);
    test::note_skipped();
    return;
  }
  tern_model* model = load_golden("hf_llama_gqa");
  CountingAllocator counting;
  const tern_allocator table = counting.table();
  tern_session_options o = cpu_options(&table);
  o.backend = TERN_BACKEND_VULKAN;
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &o, &s) == TERN_UNSUPPORTED);
  CHECK(std::string(tern_last_error()).find("allocator is a CPU option") != std::string::npos);
  CHECK(counting.calls == 0);
  tern_model_free(model);
}
