// SPDX-License-Identifier: MIT
// tern_generator and the session's sequence limit on converted models: reproducible text across thread counts, the
// SLIDE and STOP policies at the limit, bounded-state models continuing past max_tokens, validation, and text <-> ids.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "convert.h"
#include "op_graph.h"
#include "samplers.h"
#include "test_support.h"
#include "tern/tern.hpp"

using namespace tern;

namespace {

tern_model* converted(const std::string& dir, const std::string& name) {
  const std::string out = test::scratch_dir("generation_" + name) + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(convert::convert_checkpoint(test::source_path(dir), out, opts).ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}
tern_model* golden(const std::string& name) { return converted("tests/goldens/" + name, name); }

tern_session* session_of(const tern_model* model, int threads, int64_t max_tokens, int64_t max_batch = 0) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_tokens = max_tokens;
  so.max_batch = max_batch;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  return s;
}

tern_generator* generator_of(tern_session* s, tern_context_policy policy, int64_t keep = 0) {
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.context_policy = policy;
  go.keep_tokens = keep;
  tern_generator* g = nullptr;
  REQUIRE(tern_generator_create(s, &go, &g) == TERN_OK);
  return g;
}

std::vector<int32_t> history_of(const tern_generator* g) {
  int64_t n = 0;
  const int32_t* h = tern_generator_history(g, &n);
  return std::vector<int32_t>(h, h + n);
}

std::vector<float> logits_of(const tern_generator* g) {
  int64_t vocab = 0;
  const float* l = tern_generator_logits(g, &vocab);
  REQUIRE(l != nullptr);
  return std::vector<float>(l, l + vocab);
}

// The last row of a fresh session's forward over ids (max_tokens ids.size()).
std::vector<float> fresh_last_row(const tern_model* model, const std::vector<int32_t>& ids) {
  tern_session* s = session_of(model, 1, int64_t(ids.size()));
  const int64_t vocab = tern_session_vocab_size(s);
  std::vector<float> logits(ids.size() * size_t(vocab));
  REQUIRE(tern_session_forward(s, ids.data(), int64_t(ids.size()), logits.data()) == TERN_OK);
  tern_session_free(s);
  return std::vector<float>(logits.end() - vocab, logits.end());
}

std::vector<int32_t> generate(const tern_model* model, int threads, uint64_t seed, int n) {
  tern_session* s = session_of(model, threads, 0);
  tern_generator* g = generator_of(s, TERN_CONTEXT_SLIDE);
  tern_sampler* sampler = test::top_k_sampler(0.8f, seed);
  const std::string prompt = "And God said";
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  REQUIRE(tern_generator_prompt(g, ids.data(), int64_t(ids.size()), nullptr) == TERN_OK);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t t = -1;
    REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);
    out.push_back(t);
  }
  CHECK(tern_generator_slides(g) >= 1);  // 300 tokens cross the 256-token context
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_session_free(s);
  return out;
}

}  // namespace

TEST_CASE("generation: the same seed gives the same text on 1 and 2 threads, another seed differs", "[generation]") {
  tern_model* model = converted("examples/models/kjv-byte", "kjv");
  const std::vector<int32_t> one = generate(model, 1, 5, 300), two = generate(model, 2, 5, 300);
  CHECK(one == two);
  CHECK(generate(model, 1, 6, 300) != one);
  tern_model_free(model);
}

TEST_CASE("generation: SLIDE refills with the last keep tokens, as a fresh session run on them", "[generation]") {
  tern_model* model = golden("pre_untied_nobias_gelutanh");  // dense attention, learned positions (256)
  tern_session* s = session_of(model, 1, 48, 16);                // sequence limit 48; prefill in calls of 16
  REQUIRE(tern_session_sequence_limit(s) == 48);
  tern_generator* g = generator_of(s, TERN_CONTEXT_SLIDE, 20);
  tern_sampler* sampler = test::top_k_sampler(1.0f, 3);
  const std::vector<int32_t> prompt = test::random_ids(30, 256, 8);
  int64_t kept = 0;
  REQUIRE(tern_generator_prompt(g, prompt.data(), 30, &kept) == TERN_OK);
  CHECK(kept == 30);
  CHECK(tern_session_position(s) == 30);
  CHECK(test::relative_error(logits_of(g).data(), fresh_last_row(model, prompt).data(), 256) < 1e-5);
  int slides_seen = 0;
  int64_t expected = 30;  // the session's position
  for (int i = 0; i < 80; ++i) {
    int32_t t = -1;
    REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);
    const std::vector<int32_t> h = history_of(g);
    REQUIRE(h.back() == t);
    if (tern_generator_slides(g) > slides_seen) {
      slides_seen = int(tern_generator_slides(g));
      expected = 20;
      // The logits t was drawn from: those of a fresh session run on the 20 tokens before t.
      const std::vector<int32_t> window(h.end() - 21, h.end() - 1);
      const double err = test::relative_error(logits_of(g).data(), fresh_last_row(model, window).data(), 256);
      INFO("slide " << slides_seen << ": " << err);
      CHECK(err < 1e-5);
    } else if (i > 0) {
      ++expected;  // the token returned before is fed lazily, at the start of this call
    }
    CHECK(tern_session_position(s) == expected);
  }
  CHECK(slides_seen == 3);  // 30 + 80 tokens: full at 48, then every 28 (48 - 20)
  CHECK(int64_t(history_of(g).size()) == 110);
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation: STOP returns TERN_CONTEXT_FULL at the limit and changes nothing", "[generation]") {
  tern_model* model = golden("pre_untied_nobias_gelutanh");
  tern_session* s = session_of(model, 1, 32);
  tern_generator* g = generator_of(s, TERN_CONTEXT_STOP);
  tern_sampler* sampler = test::top_k_sampler(0.0f, 0);
  const std::vector<int32_t> prompt = test::random_ids(10, 256, 9);
  REQUIRE(tern_generator_prompt(g, prompt.data(), 10, nullptr) == TERN_OK);
  int32_t t = -1;
  int generated = 0;
  tern_status st = TERN_OK;
  while ((st = tern_generator_next(g, sampler, &t)) == TERN_OK) ++generated;
  CHECK(st == TERN_CONTEXT_FULL);
  CHECK(std::string(tern_status_string(st)) == "context full");
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("full"));
  CHECK(t == -1);
  CHECK(generated == 23);  // 32 - 10 fed, plus the one drawn from the logits of the 32nd
  CHECK(tern_session_position(s) == 32);
  CHECK(history_of(g).size() == 33);
  const std::vector<float> before = logits_of(g);
  CHECK(tern_generator_next(g, sampler, &t) == TERN_CONTEXT_FULL);  // stays full
  const int32_t more = 1;
  CHECK(tern_generator_append(g, &more, 1) == TERN_CONTEXT_FULL);
  CHECK(history_of(g).size() == 33);
  CHECK(logits_of(g) == before);
  CHECK(tern_generator_slides(g) == 0);
  // A new prompt starts over; a prompt longer than the limit keeps its last 32 tokens.
  const std::vector<int32_t> long_prompt = test::random_ids(50, 256, 10);
  int64_t kept = 0;
  REQUIRE(tern_generator_prompt(g, long_prompt.data(), 50, &kept) == TERN_OK);
  CHECK(kept == 32);
  CHECK(history_of(g) == long_prompt);
  const std::vector<int32_t> tail(long_prompt.end() - 32, long_prompt.end());
  CHECK(test::relative_error(logits_of(g).data(), fresh_last_row(model, tail).data(), 256) < 1e-5);
  CHECK(tern_generator_next(g, sampler, &t) == TERN_OK);
  CHECK(tern_generator_next(g, sampler, &t) == TERN_CONTEXT_FULL);
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation: a bounded-state model continues past max_tokens and its logits are a fresh session's", "[generation]") {
  // Sliding window 64 (a ring of 63 keys), sinusoidal positions: nothing limits the sequence once max_tokens holds
  // the ring.
  tern_model* model = golden("sliding_w64");
  tern_session* bounded = session_of(model, 1, 100, 16);
  CHECK(tern_session_sequence_limit(bounded) == (int64_t(1) << 31));
  tern_session* narrow = session_of(model, 1, 40);  // the ring does not fit: max_tokens limits the sequence
  CHECK(tern_session_sequence_limit(narrow) == 40);
  tern_session_free(narrow);

  tern_generator* g = generator_of(bounded, TERN_CONTEXT_STOP);
  tern_sampler* sampler = test::top_k_sampler(1.0f, 17);
  const std::vector<int32_t> prompt = test::random_ids(70, 64, 11);  // more than max_batch: prefilled in calls
  REQUIRE(tern_generator_prompt(g, prompt.data(), 70, nullptr) == TERN_OK);
  int32_t t = -1;
  for (int i = 0; i < 250; ++i) REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);
  CHECK(tern_generator_slides(g) == 0);
  CHECK(tern_session_position(bounded) == 319);  // past max_tokens 100, with no refill
  const std::vector<int32_t> h = history_of(g);
  REQUIRE(h.size() == 320);
  const std::vector<int32_t> fed(h.begin(), h.end() - 1);
  const double err = test::relative_error(logits_of(g).data(), fresh_last_row(model, fed).data(), 64);
  INFO("generator after 319 tokens vs a fresh session's forward: " << err);
  CHECK(err < 1e-5);

  // The state of a session past max_tokens saves and loads.
  size_t size = 0;
  REQUIRE(tern_session_save_state(bounded, nullptr, &size) == TERN_OK);
  std::vector<uint8_t> blob(size);
  REQUIRE(tern_session_save_state(bounded, blob.data(), &size) == TERN_OK);
  tern_session* copy = session_of(model, 1, 100, 16);
  REQUIRE(tern_session_load_state(copy, blob.data(), size) == TERN_OK);
  CHECK(tern_session_position(copy) == 319);
  std::vector<float> a(64), b(64);
  REQUIRE(tern_session_append(bounded, &t, 1, a.data()) == TERN_OK);
  REQUIRE(tern_session_append(copy, &t, 1, b.data()) == TERN_OK);
  CHECK(a == b);
  tern_session_free(copy);

  // Dense attention with learned positions stays limited by max_tokens, with the message it always had.
  tern_model* dense = golden("pre_untied_nobias_gelutanh");
  tern_session* limited = session_of(dense, 1, 20);
  CHECK(tern_session_sequence_limit(limited) == 20);
  std::vector<int32_t> ids = test::random_ids(20, 256, 1);
  REQUIRE(tern_session_append(limited, ids.data(), 20, nullptr) == TERN_OK);
  CHECK(tern_session_append(limited, ids.data(), 1, nullptr) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(limited)), Catch::Contains("max_tokens of 20"));
  tern_session_free(limited);
  tern_model_free(dense);
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_session_free(bounded);
  tern_model_free(model);
}

TEST_CASE("generation: sliding-window sessions past max_tokens match a fresh forward on every backend", "[generation][vulkan]") {
  TERN_EACH_BACKEND(backend);
  tern_model* model = golden("sliding_w64");
  const std::vector<int32_t> ids = test::random_ids(300, 64, 12);
  // Reference: one CPU forward of all 300 tokens in a session that holds them.
  const std::vector<float> want = test::run_on(TERN_BACKEND_CPU, model, ids, 64, 0, 1);
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = backend;
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;  // Vulkan's default may store float16: the bound here is float32's
  so.threads = 1;
  so.max_tokens = 100;  // the ring of 63 keys fits: the sequence goes on past 100
  so.max_batch = 16;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  CHECK(tern_session_sequence_limit(s) == (int64_t(1) << 31));
  std::vector<float> got(ids.size() * 64);
  for (size_t i = 0; i < ids.size(); i += 16) {
    const int64_t len = std::min<int64_t>(16, int64_t(ids.size() - i));
    REQUIRE(tern_session_append(s, ids.data() + i, len, got.data() + i * 64) == TERN_OK);
  }
  const double err = test::relative_error(got.data(), want.data(), got.size());
  INFO("300 tokens in a session of max_tokens 100 vs one forward: " << err);
  CHECK(err < test::backend_tolerance(backend, 1e-5));
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation: Transformer-XL and compressive memories continue past max_tokens, call by call", "[generation]") {
  for (const char* name : {"transfo_xl_plain", "compressive_conv_mean"}) {
    INFO(name);
    tern_model* model = golden(name);
    tern_session* s = session_of(model, 1, 64, 32);
    CHECK(tern_session_sequence_limit(s) == (int64_t(1) << 31));
    const int64_t vocab = tern_session_vocab_size(s);
    const std::vector<int32_t> ids = test::random_ids(32, vocab, 2);
    std::vector<float> logits(32 * size_t(vocab));
    for (int call = 0; call < 5; ++call) REQUIRE(tern_session_append(s, ids.data(), 32, logits.data()) == TERN_OK);
    CHECK(tern_session_position(s) == 160);
    for (float x : logits) REQUIRE(std::isfinite(x));
    // The memory moves once per call, so a generator prefills in calls of max_batch, the last one whole: 32 + 8.
    tern_generator* g = generator_of(s, TERN_CONTEXT_SLIDE);
    const std::vector<int32_t> prompt = test::random_ids(40, vocab, 3);
    REQUIRE(tern_generator_prompt(g, prompt.data(), 40, nullptr) == TERN_OK);
    REQUIRE(tern_session_reset(s) == TERN_OK);
    REQUIRE(tern_session_append(s, prompt.data(), 32, nullptr) == TERN_OK);
    std::vector<float> last(8 * size_t(vocab));
    REQUIRE(tern_session_append(s, prompt.data() + 32, 8, last.data()) == TERN_OK);
    CHECK(logits_of(g) == std::vector<float>(last.end() - vocab, last.end()));
    tern_generator_free(g);
    tern_session_free(s);
    tern_model_free(model);
  }
}

TEST_CASE("generation: options and calls are checked", "[generation]") {
  tern_model* model = golden("pre_untied_nobias_gelutanh");
  tern_session* s = session_of(model, 1, 32);
  tern_generator_options go;
  tern_generator_options_init(&go);
  CHECK(go.struct_size == sizeof(tern_generator_options));
  CHECK(go.context_policy == TERN_CONTEXT_SLIDE);
  CHECK(go.keep_tokens == 0);
  tern_generator* g = nullptr;
  struct Case {
    void (*set)(tern_generator_options*);
    const char* message;
  };
  const Case bad[] = {
      {[](tern_generator_options* o) { o->struct_size = 0; }, "uninitialised"},
      {[](tern_generator_options* o) { o->struct_size = sizeof(tern_generator_options) + 1; }, "newer"},
      {[](tern_generator_options* o) { o->context_policy = tern_context_policy(5); }, "context_policy"},
      {[](tern_generator_options* o) { o->keep_tokens = -1; }, "keep_tokens"},
      {[](tern_generator_options* o) { o->keep_tokens = 32; }, "keep_tokens must be in [0, 32)"},
  };
  for (const Case& c : bad) {
    tern_generator_options o;
    tern_generator_options_init(&o);
    c.set(&o);
    INFO(c.message);
    CHECK(tern_generator_create(s, &o, &g) == TERN_INVALID_ARGUMENT);
    CHECK(g == nullptr);
    CHECK_THAT(std::string(tern_last_error()), Catch::Contains(c.message));
  }
  CHECK(tern_generator_create(nullptr, nullptr, &g) == TERN_INVALID_ARGUMENT);
  // An older struct without keep_tokens: the default (half the limit) applies.
  go.keep_tokens = 99;  // past struct_size: not read
  go.struct_size = offsetof(tern_generator_options, keep_tokens);
  REQUIRE(tern_generator_create(s, &go, &g) == TERN_OK);
  tern_sampler* sampler = test::top_k_sampler(0.0f, 0);
  int32_t t = 5;
  CHECK(tern_generator_next(g, sampler, &t) == TERN_INVALID_ARGUMENT);  // no prompt yet
  CHECK(t == -1);
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("prompt"));
  CHECK(tern_generator_logits(g, nullptr) == nullptr);
  CHECK(tern_generator_prompt(g, nullptr, 3, nullptr) == TERN_INVALID_ARGUMENT);
  const std::vector<int32_t> outside = {1, 2, 999};
  CHECK(tern_generator_prompt(g, outside.data(), 3, nullptr) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("token id 999"));
  const std::vector<int32_t> prompt = test::random_ids(30, 256, 4);
  REQUIRE(tern_generator_prompt(g, prompt.data(), 30, nullptr) == TERN_OK);
  REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);
  REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);  // feeds the first: 31
  REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);  // 32: full
  REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);  // slides, keeping 16
  CHECK(tern_generator_slides(g) == 1);
  CHECK(tern_session_position(s) == 16);
  CHECK(tern_generator_next(g, nullptr, &t) == TERN_INVALID_ARGUMENT);
  // Feeding the session behind the generator's back is caught.
  const int32_t behind = 65;
  REQUIRE(tern_session_append(s, &behind, 1, nullptr) == TERN_OK);
  CHECK(tern_generator_next(g, sampler, &t) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("only through it"));
  // append: a user's turn after the sequence.
  REQUIRE(tern_generator_prompt(g, prompt.data(), 10, nullptr) == TERN_OK);
  REQUIRE(tern_generator_append(g, prompt.data() + 10, 5) == TERN_OK);
  CHECK(tern_session_position(s) == 15);
  CHECK(test::relative_error(logits_of(g).data(),
                             fresh_last_row(model, std::vector<int32_t>(prompt.begin(), prompt.begin() + 15)).data(), 256) < 1e-5);
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_generator_free(nullptr);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation: text and ids for byte vocabularies, other vocabularies are unsupported", "[generation]") {
  tern_model* model = golden("pre_untied_nobias_gelutanh");  // bytes, vocab 256
  const std::string text("Hi\0\xff", 4);
  int64_t n = -1;
  REQUIRE(tern_tokenize(model, text.data(), text.size(), nullptr, 0, &n) == TERN_OK);  // size query
  CHECK(n == 4);
  std::vector<int32_t> ids(4, -1);
  CHECK(tern_tokenize(model, text.data(), text.size(), ids.data(), 3, &n) == TERN_INVALID_ARGUMENT);
  CHECK(n == 4);
  CHECK(ids[0] == -1);  // nothing written
  REQUIRE(tern_tokenize(model, text.data(), text.size(), ids.data(), 4, &n) == TERN_OK);
  CHECK(ids == std::vector<int32_t>{'H', 'i', 0, 255});
  char buf[4];
  size_t len = 9;
  REQUIRE(tern_token_to_text(model, 'H', nullptr, 0, &len) == TERN_OK);
  CHECK(len == 1);
  REQUIRE(tern_token_to_text(model, 255, buf, sizeof buf, &len) == TERN_OK);
  CHECK((len == 1 && static_cast<unsigned char>(buf[0]) == 255));
  CHECK(tern_token_to_text(model, 256, buf, sizeof buf, &len) == TERN_INVALID_ARGUMENT);
  CHECK(tern_token_to_text(model, -1, buf, sizeof buf, &len) == TERN_INVALID_ARGUMENT);
  len = 9;
  CHECK(tern_token_to_text(model, 'x', buf, 0, &len) == TERN_INVALID_ARGUMENT);  // buf given, no room
  CHECK(len == 1);
  // The C++ helpers.
  ModelHandle handle = ModelHandle::load(test::scratch_dir("generation_hpp") + "/missing.tern", nullptr);
  CHECK_FALSE(handle.valid());
  tern_model_free(model);

  tern_model* small = golden("sliding_w64");  // a byte vocabulary of 64 ids
  CHECK(tern_tokenize(small, "A", 1, nullptr, 0, &n) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("byte 65 at offset 0"));
  REQUIRE(tern_tokenize(small, "\x01\x3f", 2, nullptr, 0, &n) == TERN_OK);
  tern_model_free(small);

  tern_model* xl = golden("transfo_xl_plain");  // an external (word) vocabulary
  CHECK(tern_tokenize(xl, "a", 1, nullptr, 0, &n) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("EXTERNAL"));
  CHECK(tern_token_to_text(xl, 1, buf, sizeof buf, &len) == TERN_UNSUPPORTED);
  tern_model_free(xl);
}

TEST_CASE("generation: tern.hpp's Sampler and Generator", "[generation]") {
  const std::string path = test::scratch_dir("generation_cpp") + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(convert::convert_checkpoint(test::source_path("tests/goldens/pre_untied_nobias_gelutanh"), path, opts).ok());
  Error err;
  ModelHandle model = ModelHandle::load(path, &err);
  REQUIRE_FALSE(err);
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  so.max_tokens = 40;
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.context_policy = TERN_CONTEXT_STOP;
  std::vector<int32_t> ids;
  REQUIRE_FALSE(tokenize(model, "In the beginning", &ids));
  CHECK(ids.size() == 16);
  std::vector<int32_t> tokens;
  {
    // The generator keeps the session alive after the handle goes.
    Generator gen = [&] {
      SessionHandle session = SessionHandle::create(model, so, &err);
      REQUIRE_FALSE(err);
      return Generator::create(session, go, &err);
    }();
    REQUIRE_FALSE(err);
    tern_sampler_options o;
    tern_sampler_options_init(&o);
    o.seed = 4;
    Sampler sampler = Sampler::create(o, &err);
    REQUIRE_FALSE(err);
    int64_t kept = 0;
    REQUIRE_FALSE(gen.prompt(ids, &kept));
    CHECK(kept == 16);
    int32_t t = -1;
    Error e;
    while (!(e = gen.next(sampler, &t))) tokens.push_back(t);
    CHECK(e.code == TERN_CONTEXT_FULL);
    CHECK(tokens.size() == 25);
    CHECK(gen.history().size() == 41);
    CHECK(gen.logits().size() == 256);
    std::string piece;
    REQUIRE_FALSE(token_to_text(model, tokens[0], &piece));
    CHECK(piece.size() == 1);
    Sampler bad;
    CHECK_FALSE(bad.valid());
    o.top_p = 7.0f;
    bad = Sampler::create(o, &err);
    CHECK(err.code == TERN_INVALID_ARGUMENT);
    CHECK_THAT(err.message, Catch::Contains("top_p"));
  }
}
