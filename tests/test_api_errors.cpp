// SPDX-License-Identifier: MIT
// Where the C API's messages go: every failing call puts its message in the slot tern.h names for it (the session's,
// the generator's, or the calling thread's), so that tern.hpp, which reads the slot of the handle it wraps, never
// reports an empty message; a NULL argument's message names the argument. Also the C++ wrapper's lifetimes (a
// session keeps its model alive) and tern_model_load_buffer given a buffer that is not 64-byte aligned.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tern/tern.h"
#include "tern/tern.hpp"
#include "test_support.h"

using namespace tern;

namespace {

// A small byte-level model (tests/goldens/pre_tied_learned_gelu), converted once.
const std::string& model_path() {
  static const std::string path = test::convert_golden("pre_tied_learned_gelu", "api_errors");
  return path;
}

tern_session_options small_options() {
  tern_session_options o;
  tern_session_options_init(&o);
  o.threads = 1;
  o.max_tokens = 16;
  return o;
}

// A failure whose message says what went wrong: the status, a message, and `names` in it.
void check_error(const tern::Error& e, tern_status code, const std::string& names) {
  INFO("message: '" << e.message << "'");
  CHECK(e.code == code);
  CHECK_FALSE(e.message.empty());
  CHECK_THAT(e.message, Catch::Contains(names));
}

}  // namespace

TEST_CASE("api errors: every failing call through tern.hpp reports a message that names the problem", "[api]") {
  tern::Error e;
  const tern::ModelHandle missing = tern::ModelHandle::load("/nonexistent/dir/model.tern", &e);
  check_error(e, TERN_IO_ERROR, "/nonexistent/dir/model.tern");
  CHECK_FALSE(missing.valid());
  alignas(64) static const uint8_t junk[128] = {16, 0, 0, 0, 'N', 'O', 'P', 'E'};
  tern::ModelHandle::load_buffer(junk, sizeof junk, &e);
  check_error(e, TERN_INVALID_MODEL, "TERN");

  REQUIRE_FALSE(model_path().empty());
  const tern::ModelHandle model = tern::ModelHandle::load(model_path(), &e);
  REQUIRE_FALSE(e);
  tern_session_options bad = small_options();
  bad.threads = -3;
  tern::SessionHandle::create(model, bad, &e);
  check_error(e, TERN_INVALID_ARGUMENT, "threads");

  tern::SessionHandle session = tern::SessionHandle::create(model, small_options(), &e);
  REQUIRE_FALSE(e);
  const int32_t vocab = int32_t(session.vocab_size());
  std::vector<float> logits;
  check_error(session.forward({}, &logits), TERN_INVALID_ARGUMENT, "tern_session_forward: n is 0");
  check_error(session.forward({1, vocab}, &logits), TERN_INVALID_ARGUMENT, "id " + std::to_string(vocab));
  check_error(session.append(nullptr, 2, nullptr), TERN_INVALID_ARGUMENT, "tern_session_append: ids is NULL");
  const std::vector<int32_t> many(17, 1);
  check_error(session.append(many.data(), 17, nullptr), TERN_INVALID_ARGUMENT, "max_batch of 16");
  check_error(session.load_state({1, 2, 3}), TERN_INVALID_ARGUMENT, "not a Tern session state");
  tern_memory_plan plan{};
  check_error(session.plan(0, &plan), TERN_INVALID_ARGUMENT, "tern_session_plan: n_tokens 0");
  CHECK_FALSE(session.plan(8, &plan));
  CHECK(plan.n_tokens == 8);

  tern::Sampler sampler = tern::Sampler::create(&e);
  REQUIRE_FALSE(e);
  const float bad_logits[2] = {0.0f, std::nanf("")};
  int32_t token = 0;
  check_error(sampler.sample(bad_logits, 2, {}, &token), TERN_INVALID_ARGUMENT, "logits[1]");
  tern_sampler_options no_mass;
  tern_sampler_options_init(&no_mass);
  no_mass.top_p = 0.0f;
  tern::Sampler::create(no_mass, &e);
  check_error(e, TERN_INVALID_ARGUMENT, "top_p");

  tern::Generator generator = tern::Generator::create(session, &e);
  REQUIRE_FALSE(e);
  check_error(generator.next(sampler, &token), TERN_INVALID_ARGUMENT, "tern_generator_prompt first");
  check_error(generator.prompt({}, nullptr), TERN_INVALID_ARGUMENT, "tern_generator_prompt: n is 0");
  check_error(generator.append({1}), TERN_INVALID_ARGUMENT, "tern_generator_prompt first");

  std::vector<int32_t> ids;
  check_error(tern::tokenize(model, "abc", &ids, 1u << 7), TERN_INVALID_ARGUMENT, "flags 128");
  std::string text;
  check_error(tern::token_to_text(model, vocab, &text), TERN_INVALID_ARGUMENT, "id " + std::to_string(vocab));
  check_error(tern::detokenize(model, {1, -1}, &text), TERN_INVALID_ARGUMENT, "id -1 at index 1");
}

TEST_CASE("api errors: each call's message lands in the slot tern.h names, and a NULL argument is named", "[api]") {
  REQUIRE_FALSE(model_path().empty());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(model_path().c_str(), &model) == TERN_OK);
  const tern_session_options options = small_options();
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &options, &s) == TERN_OK);
  tern_sampler* sampler = nullptr;
  REQUIRE(tern_sampler_create(nullptr, &sampler) == TERN_OK);
  tern_generator* g = nullptr;
  REQUIRE(tern_generator_create(s, nullptr, &g) == TERN_OK);
  const int32_t ids[2] = {1, 2};
  std::vector<float> logits(size_t(2 * tern_session_vocab_size(s)));
  tern_memory_plan plan{};
  tern_op_profile profile{};
  tern_model_info info{};
  size_t count = 0, size = 0;
  uint64_t dispatches = 0;
  int64_t n = 0;
  int32_t token = 0;
  tern_model* no_model = nullptr;
  tern_session* no_session = nullptr;

  enum Slot { thread_slot, session_slot, generator_slot };
  const auto message_in = [&](Slot slot) {
    return std::string(slot == session_slot     ? tern_session_last_error(s)
                       : slot == generator_slot ? tern_generator_last_error(g)
                                                : tern_last_error());
  };
  struct Case {
    const char* expected;  // in the message
    std::function<tern_status()> call;
    Slot slot;
  };
  const std::vector<Case> cases = {
      {"tern_model_load: path is NULL", [&] { return tern_model_load(nullptr, &no_model); }, thread_slot},
      {"tern_model_load: out is NULL", [&] { return tern_model_load("x.tern", nullptr); }, thread_slot},
      {"tern_model_load_buffer: data is NULL", [&] { return tern_model_load_buffer(nullptr, 8, &no_model); },
       thread_slot},
      {"tern_model_get_info: model is NULL", [&] { return tern_model_get_info(nullptr, &info); }, thread_slot},
      {"tern_model_get_info: out is NULL", [&] { return tern_model_get_info(model, nullptr); }, thread_slot},
      {"tern_session_create: model is NULL", [&] { return tern_session_create(nullptr, &options, &no_session); },
       thread_slot},
      {"tern_session_create: out is NULL", [&] { return tern_session_create(model, &options, nullptr); }, thread_slot},
      {"tern_session_forward: session is NULL", [&] { return tern_session_forward(nullptr, ids, 2, logits.data()); },
       thread_slot},
      {"tern_session_plan: session is NULL", [&] { return tern_session_plan(nullptr, 1, &plan); }, thread_slot},
      {"tern_session_forward: ids is NULL", [&] { return tern_session_forward(s, nullptr, 2, logits.data()); },
       session_slot},
      {"tern_session_forward: logits is NULL", [&] { return tern_session_forward(s, ids, 2, nullptr); }, session_slot},
      {"tern_session_forward: n is 0", [&] { return tern_session_forward(s, ids, 0, logits.data()); }, session_slot},
      {"tern_session_append: ids is NULL", [&] { return tern_session_append(s, nullptr, 2, nullptr); }, session_slot},
      {"tern_session_append: n is -1", [&] { return tern_session_append(s, ids, -1, nullptr); }, session_slot},
      {"tern_session_plan: n_tokens 0", [&] { return tern_session_plan(s, 0, &plan); }, session_slot},
      {"tern_session_plan: out is NULL", [&] { return tern_session_plan(s, 1, nullptr); }, session_slot},
      {"tern_session_memory: out is NULL", [&] { return tern_session_memory(s, nullptr); }, session_slot},
      {"tern_session_get_backend: out is NULL", [&] { return tern_session_get_backend(s, nullptr); }, session_slot},
      {"tern_session_get_profile: count is NULL", [&] { return tern_session_get_profile(s, &profile, 1, nullptr); },
       session_slot},
      {"tern_session_get_profile: out is NULL", [&] { return tern_session_get_profile(s, nullptr, 1, &count); },
       session_slot},
      {"tern_session_get_profile_flops: flops is NULL",
       [&] { return tern_session_get_profile_flops(s, nullptr, 1, &count); }, session_slot},
      {"tern_session_count_dispatches: total is NULL",
       [&] { return tern_session_count_dispatches(s, 1, 0, nullptr, 0, &count, nullptr); }, session_slot},
      {"tern_session_count_dispatches: a call of 0 tokens",
       [&] { return tern_session_count_dispatches(s, 0, 0, nullptr, 0, &count, &dispatches); }, session_slot},
      {"tern_session_save_state: size is NULL", [&] { return tern_session_save_state(s, nullptr, nullptr); },
       session_slot},
      {"tern_session_save_state: the state needs",
       [&] {
         size = 1;
         return tern_session_save_state(s, &token, &size);
       },
       session_slot},
      {"tern_session_load_state: buf is NULL", [&] { return tern_session_load_state(s, nullptr, 64); }, session_slot},
      {"tern_generator_create: session is NULL",
       [&] {
         tern_generator* none = nullptr;
         return tern_generator_create(nullptr, nullptr, &none);
       },
       thread_slot},
      {"tern_generator_prompt: ids is NULL", [&] { return tern_generator_prompt(g, nullptr, 2, nullptr); },
       generator_slot},
      {"tern_generator_prompt: n is 0", [&] { return tern_generator_prompt(g, ids, 0, nullptr); }, generator_slot},
      {"tern_generator_append: ids is NULL", [&] { return tern_generator_append(g, nullptr, 2); }, generator_slot},
      {"tern_generator_next: sampler is NULL", [&] { return tern_generator_next(g, nullptr, &token); }, generator_slot},
      {"tern_generator_next: token is NULL", [&] { return tern_generator_next(g, sampler, nullptr); }, generator_slot},
      {"tern_sampler_create: out is NULL", [&] { return tern_sampler_create(nullptr, nullptr); }, thread_slot},
      {"tern_sampler_sample: sampler is NULL",
       [&] { return tern_sampler_sample(nullptr, logits.data(), 2, nullptr, 0, &token); }, thread_slot},
      {"tern_sampler_sample: token is NULL",
       [&] { return tern_sampler_sample(sampler, logits.data(), 2, nullptr, 0, nullptr); }, thread_slot},
      {"tern_sampler_set_seed: sampler is NULL", [&] { return tern_sampler_set_seed(nullptr, 1); }, thread_slot},
      {"tern_tokenize: n is NULL", [&] { return tern_tokenize(model, "a", 1, nullptr, 0, nullptr); }, thread_slot},
      {"tern_tokenize: model is NULL", [&] { return tern_tokenize(nullptr, "a", 1, nullptr, 0, &n); }, thread_slot},
      {"tern_detokenize: len is NULL", [&] { return tern_detokenize(model, ids, 2, nullptr, 0, nullptr); },
       thread_slot},
      {"tern_token_to_text: model is NULL", [&] { return tern_token_to_text(nullptr, 1, nullptr, 0, &size); },
       thread_slot},
  };
  for (const Case& c : cases) {
    INFO("expected: " << c.expected);
    tern_model_load_buffer(nullptr, 1, nullptr);  // a known message in the thread's slot
    const std::string thread_before = message_in(thread_slot);
    CHECK(c.call() == TERN_INVALID_ARGUMENT);
    CHECK_THAT(message_in(c.slot), Catch::Contains(c.expected));
    if (c.slot != thread_slot) CHECK(message_in(thread_slot) == thread_before);  // a handle's failure stays there
  }
  tern_generator_free(g);
  tern_sampler_free(sampler);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("tern.hpp: a session keeps its model alive after the last ModelHandle is gone", "[api]") {
  REQUIRE_FALSE(model_path().empty());
  tern::Error e;
  std::vector<float> expected, logits;
  std::unique_ptr<tern::SessionHandle> session;
  {
    const tern::ModelHandle model = tern::ModelHandle::load(model_path(), &e);
    REQUIRE_FALSE(e);
    tern::SessionHandle first = tern::SessionHandle::create(model, small_options(), &e);
    REQUIRE_FALSE(e);
    REQUIRE_FALSE(first.forward({3, 1, 4, 1, 5}, &expected));
    session.reset(new tern::SessionHandle(tern::SessionHandle::create(model, small_options(), &e)));
    REQUIRE_FALSE(e);
  }
  REQUIRE_FALSE(session->forward({3, 1, 4, 1, 5}, &logits));
  CHECK(logits == expected);
}

TEST_CASE("tern_model_load_buffer copies a buffer that is not 64-byte aligned, and tern_model_copied_bytes says so",
          "[api]") {
  REQUIRE_FALSE(model_path().empty());
  const std::string file = test::read_file(model_path());
  std::vector<uint8_t> storage(file.size() + 128);
  uint8_t* aligned = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  std::memcpy(aligned, file.data(), file.size());
  std::vector<uint8_t> other(file.size() + 128);
  uint8_t* unaligned = other.data() + (64 - reinterpret_cast<uintptr_t>(other.data()) % 64) % 64 + 8;
  std::memcpy(unaligned, file.data(), file.size());

  tern::Error e;
  const tern::ModelHandle in_place = tern::ModelHandle::load_buffer(aligned, file.size(), &e);
  REQUIRE_FALSE(e);
  CHECK(tern_model_copied_bytes(in_place.get()) == 0);
  const tern::ModelHandle copied = tern::ModelHandle::load_buffer(unaligned, file.size(), &e);
  REQUIRE_FALSE(e);
  CHECK(tern_model_copied_bytes(copied.get()) == file.size());
  std::memset(unaligned, 0xAB, file.size());  // the copy is the model's own: the caller's buffer may go at once

  std::vector<float> expected, logits;
  tern::SessionHandle a = tern::SessionHandle::create(in_place, small_options(), &e);
  REQUIRE_FALSE(e);
  REQUIRE_FALSE(a.forward({2, 7, 1, 8}, &expected));
  tern::SessionHandle b = tern::SessionHandle::create(copied, small_options(), &e);
  REQUIRE_FALSE(e);
  REQUIRE_FALSE(b.forward({2, 7, 1, 8}, &logits));
  CHECK(logits == expected);
  CHECK(tern_model_copied_bytes(nullptr) == 0);
}
