// SPDX-License-Identifier: MIT
// Generation an app can drive: stops at end tokens, stop strings and max_new_tokens with the reason; a generator
// saved and restored into a fresh session continues token for token (CPU and Vulkan); abort and progress callbacks
// on long calls; misuse of a session behind its generator's back; hostile generator blobs.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "convert.h"
#include "samplers.h"
#include "tern/tern.h"
#include "test_support.h"

using namespace tern;

namespace {

tern_model* load_converted(const std::string& dir, const std::string& scratch) {
  const std::string out = test::scratch_dir("generation_control_" + scratch) + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  const Status st = convert::convert_checkpoint(test::source_path(dir), out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

tern_session* session_on(tern_backend backend, const tern_model* model, int64_t max_tokens, int64_t max_batch = 0) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = backend;
  so.threads = 2;
  so.max_tokens = max_tokens;
  so.max_batch = max_batch;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  return s;
}

tern_generator* generator_on(tern_session* s, int ignore_eos = 0, int64_t max_new_tokens = 0) {
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.ignore_eos = ignore_eos;
  go.max_new_tokens = max_new_tokens;
  tern_generator* g = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_generator_create(s, &go, &g) == TERN_OK);
  return g;
}

std::vector<int32_t> text_ids(const tern_model* model, const std::string& text) {
  int64_t n = 0;
  REQUIRE(tern_tokenize_with(model, text.data(), text.size(), TERN_TOKENIZE_ADD_SPECIAL, nullptr, 0, &n) == TERN_OK);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  REQUIRE(tern_tokenize_with(model, text.data(), text.size(), TERN_TOKENIZE_ADD_SPECIAL, ids.data(), n, &n) == TERN_OK);
  return ids;
}

std::string piece(const tern_model* model, int32_t id) {
  char buf[256];
  size_t len = 0;
  REQUIRE(tern_token_to_text(model, id, buf, sizeof buf, &len) == TERN_OK);
  return std::string(buf, len);
}

// Up to n tokens, ending early when the generator stops.
std::vector<int32_t> run_tokens(tern_generator* g, tern_sampler* sampler, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n && tern_generator_stop_reason(g, nullptr) == TERN_STOP_NONE; ++i) {
    int32_t t = -1;
    INFO(tern_generator_last_error(g));
    REQUIRE(tern_generator_next(g, sampler, &t) == TERN_OK);
    out.push_back(t);
  }
  return out;
}

std::vector<uint8_t> saved_generator(const tern_generator* g, const tern_sampler* sampler) {
  size_t size = 0;
  REQUIRE(tern_generator_save(g, sampler, nullptr, &size) == TERN_OK);
  std::vector<uint8_t> blob(size);
  REQUIRE(tern_generator_save(g, sampler, blob.data(), &size) == TERN_OK);
  REQUIRE(size == blob.size());
  return blob;
}

// The generator blob's checksum as its layout documents it (core/generator_state.cpp): FNV-1a over 8-byte
// little-endian words then the tail bytes, over bytes 0..15 and then 24..end; written at 16.
uint64_t fnv_words(uint64_t h, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
void reseal_generator(std::vector<uint8_t>* blob) {
  const uint64_t sum =
      fnv_words(fnv_words(1469598103934665603ull, blob->data(), 16), blob->data() + 24, blob->size() - 24);
  std::memcpy(blob->data() + 16, &sum, sizeof sum);
}
template <typename T>
void poke(std::vector<uint8_t>* blob, size_t at, T value) {
  std::memcpy(blob->data() + at, &value, sizeof value);
  reseal_generator(blob);
}

// The shipped kjv-llama (SentencePiece, an end token) on the CPU with a greedy sampler, freed at the end of a test.
struct GreedyLlama {
  tern_model* model = load_converted("examples/models/kjv-llama", "kjv_llama");
  tern_session* s = session_on(TERN_BACKEND_CPU, model, 0);
  tern_sampler* greedy = test::top_k_sampler(0.0f, 0);
  ~GreedyLlama() {
    tern_sampler_free(greedy);
    tern_session_free(s);
    tern_model_free(model);
  }
};

}  // namespace

TEST_CASE("generation control: a generator stops at the model's end token, or with ignore_eos after max_new_tokens",
          "[generation]") {
  GreedyLlama llama;
  tern_model* model = llama.model;
  tern_session* s = llama.s;
  tern_sampler* greedy = llama.greedy;
  const std::vector<int32_t> prompt = text_ids(model, "And God said");
  // The reference: greedy tokens through end tokens, and where the first end token falls among them.
  tern_generator* through = generator_on(s, 1, 300);
  REQUIRE(tern_generator_prompt(through, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::vector<int32_t> all = run_tokens(through, greedy, 400);
  CHECK(all.size() == 300);
  CHECK(tern_generator_stop_reason(through, nullptr) == TERN_STOP_LENGTH);
  size_t first_end = all.size();
  for (size_t i = 0; i < all.size() && first_end == all.size(); ++i) {
    if (tern_model_is_end_token(model, all[i])) first_end = i;
  }
  REQUIRE(first_end < all.size());  // tests/CMakeLists.txt: greedy kjv-llama ends well before 300 tokens
  int32_t t = -1;
  CHECK(tern_generator_next(through, greedy, &t) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(through)), Catch::Contains("max_new_tokens"));
  tern_generator_free(through);

  tern_generator* g = generator_on(s);
  REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::vector<int32_t> stopped = run_tokens(g, greedy, 400);
  int64_t which = 7;
  CHECK(tern_generator_stop_reason(g, &which) == TERN_STOP_EOS);
  CHECK(which == -1);
  CHECK(stopped == std::vector<int32_t>(all.begin(), all.begin() + int64_t(first_end) + 1));
  CHECK(tern_generator_next(g, greedy, &t) == TERN_INVALID_ARGUMENT);
  CHECK(t == -1);
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("end token"));
  // A user's turn goes on: the end token is fed first, and the generation is no longer stopped.
  const int64_t before = tern_session_position(s);
  REQUIRE(tern_generator_append(g, prompt.data() + 1, int64_t(prompt.size()) - 1) == TERN_OK);
  CHECK(tern_session_position(s) == before + int64_t(prompt.size()));
  CHECK(tern_generator_stop_reason(g, nullptr) == TERN_STOP_NONE);
  CHECK(tern_generator_next(g, greedy, &t) == TERN_OK);
  tern_generator_free(g);
}

TEST_CASE("generation control: stop strings are found across token boundaries, with the string's index",
          "[generation]") {
  GreedyLlama llama;
  tern_model* model = llama.model;
  tern_sampler* greedy = llama.greedy;
  const std::vector<int32_t> prompt = text_ids(model, "In the beginning");
  tern_session* s = llama.s;
  tern_generator* g = generator_on(s, 1);
  REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::vector<int32_t> all = run_tokens(g, greedy, 60);
  // A string made of the last two bytes of one token's text and the first two of the next, first found there.
  std::vector<std::string> pieces;
  std::string text;
  for (int32_t id : all) pieces.push_back(piece(model, id));
  size_t boundary = 0, stop_at = all.size();
  std::string across;
  for (size_t k = 0; k + 1 < all.size() && stop_at == all.size(); ++k) {
    text += pieces[k];
    if (pieces[k].size() < 2 || pieces[k + 1].size() < 2) continue;
    across = pieces[k].substr(pieces[k].size() - 2) + pieces[k + 1].substr(0, 2);
    if ((text + pieces[k + 1]).find(across) == text.size() - 2) boundary = k, stop_at = k + 1;
  }
  INFO("stop string '" << across << "' between tokens " << boundary << " and " << stop_at);
  REQUIRE(stop_at < all.size());

  const char* stops[] = {"\x01 never generated", across.c_str()};
  REQUIRE(tern_generator_set_stop_strings(g, stops, 2) == TERN_OK);
  REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::vector<int32_t> stopped = run_tokens(g, greedy, 60);
  int64_t which = -1;
  CHECK(tern_generator_stop_reason(g, &which) == TERN_STOP_STRING);
  CHECK(which == 1);
  CHECK(stopped == std::vector<int32_t>(all.begin(), all.begin() + int64_t(stop_at) + 1));
  int32_t t = -1;
  CHECK(tern_generator_next(g, greedy, &t) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("stop string"));

  // The prompt's text is not matched: a string only the prompt holds never stops the generation.
  const char* in_prompt[] = {"beginning"};
  REQUIRE(tern_generator_set_stop_strings(g, in_prompt, 1) == TERN_OK);
  REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::string generated_text = [&] {
    std::string all_text;
    for (const std::string& p : pieces) all_text += p;
    return all_text;
  }();
  if (generated_text.find("beginning") == std::string::npos) {
    CHECK(run_tokens(g, greedy, 60).size() == 60);
    CHECK(tern_generator_stop_reason(g, nullptr) == TERN_STOP_NONE);
  }
  // Refused: an empty string, a null list, a negative count.
  const char* empty[] = {""};
  CHECK(tern_generator_set_stop_strings(g, empty, 1) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("empty"));
  CHECK(tern_generator_set_stop_strings(g, nullptr, 1) == TERN_INVALID_ARGUMENT);
  CHECK(tern_generator_set_stop_strings(g, stops, -1) == TERN_INVALID_ARGUMENT);
  CHECK(tern_generator_set_stop_strings(g, nullptr, 0) == TERN_OK);  // clears them
  tern_generator_free(g);
}

TEST_CASE("generation control: byte tokens stop at a stop string spread over several tokens", "[generation]") {
  tern_model* model = load_converted("examples/models/kjv-byte", "kjv_byte");
  const std::string prompt_text = "And God said";
  const std::vector<int32_t> prompt(prompt_text.begin(), prompt_text.end());
  tern_session* s = session_on(TERN_BACKEND_CPU, model, 0);
  tern_generator* g = generator_on(s);
  tern_sampler* sampler = test::top_k_sampler(0.8f, 3);
  REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::vector<int32_t> all = run_tokens(g, sampler, 200);
  const std::string text(all.begin(), all.end());
  const size_t at = text.find("the ");
  REQUIRE(at != std::string::npos);
  const char* stops[] = {"the "};
  REQUIRE(tern_generator_set_stop_strings(g, stops, 1) == TERN_OK);
  REQUIRE(tern_sampler_set_seed(sampler, 3) == TERN_OK);
  REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  const std::vector<int32_t> stopped = run_tokens(g, sampler, 200);
  CHECK(tern_generator_stop_reason(g, nullptr) == TERN_STOP_STRING);
  CHECK(stopped == std::vector<int32_t>(all.begin(), all.begin() + int64_t(at) + 4));
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation control: a generator restored into a fresh session continues with the uninterrupted one's tokens",
          "[generation][vulkan]") {
  const tern_backend backend = GENERATE(TERN_BACKEND_CPU, TERN_BACKEND_VULKAN);
  TERN_SKIP_BACKEND_WITHOUT_DEVICE(backend);
  INFO(test::backend_name(backend));
  tern_model* model = load_converted("examples/models/kjv-byte", "kjv_byte");
  const std::string prompt_text = "And God said";
  const std::vector<int32_t> prompt(prompt_text.begin(), prompt_text.end());
  // max_tokens 32: the SLIDE policy refills after the save (and, after 20 tokens, before it too).
  for (int before : {0, 20}) {
    INFO(before << " tokens before the save");
    tern_session* s = session_on(backend, model, 32);
    tern_generator* g = generator_on(s);
    tern_sampler* sampler = test::top_k_sampler(0.9f, 7);
    REQUIRE(tern_generator_prompt(g, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
    run_tokens(g, sampler, before);
    const std::vector<uint8_t> blob = saved_generator(g, sampler);
    const int64_t saved_position = tern_session_position(s);
    const std::vector<int32_t> want = run_tokens(g, sampler, 48);
    CHECK(tern_generator_slides(g) >= 2);

    tern_session* fresh = session_on(backend, model, 32);
    tern_generator* restored = generator_on(fresh);
    tern_sampler* other_seed = test::top_k_sampler(0.9f, 99);  // the PRNG state comes from the blob
    INFO(tern_generator_last_error(restored));
    REQUIRE(tern_generator_restore(restored, other_seed, blob.data(), blob.size()) == TERN_OK);
    CHECK(tern_session_position(fresh) == saved_position);
    CHECK(run_tokens(restored, other_seed, 48) == want);
    int64_t n_a = 0, n_b = 0;
    const int32_t* ha = tern_generator_history(g, &n_a);
    const int32_t* hb = tern_generator_history(restored, &n_b);
    CHECK(std::vector<int32_t>(ha, ha + n_a) == std::vector<int32_t>(hb, hb + n_b));
    CHECK(tern_generator_slides(restored) == tern_generator_slides(g));
    tern_sampler_free(other_seed);
    tern_generator_free(restored);
    tern_session_free(fresh);
    tern_sampler_free(sampler);
    tern_generator_free(g);
    tern_session_free(s);
  }
  tern_model_free(model);
}

TEST_CASE("generation control: hostile or mismatched generator blobs are refused and change nothing", "[generation]") {
  tern_model* model = load_converted("examples/models/kjv-byte", "kjv_byte");
  const std::vector<int32_t> prompt = test::random_ids(20, 256, 5);
  tern_session* s = session_on(TERN_BACKEND_CPU, model, 64);
  tern_generator* g = generator_on(s);
  tern_sampler* sampler = test::top_k_sampler(0.9f, 7);
  REQUIRE(tern_generator_prompt(g, prompt.data(), 20, nullptr) == TERN_OK);
  run_tokens(g, sampler, 5);
  const std::vector<uint8_t> good = saved_generator(g, sampler);
  int64_t history = 0;
  std::memcpy(&history, good.data() + 168, sizeof history);
  REQUIRE(history == 25);

  tern_session* fresh = session_on(TERN_BACKEND_CPU, model, 64);
  tern_generator* target = generator_on(fresh);
  const std::vector<int32_t> other_prompt = test::random_ids(9, 256, 6);
  REQUIRE(tern_generator_prompt(target, other_prompt.data(), 9, nullptr) == TERN_OK);
  struct Forgery {
    const char* what;
    std::vector<uint8_t> blob;
    tern_status status;
    const char* message;
  };
  std::vector<Forgery> forged;
  forged.push_back(
      {"truncated", std::vector<uint8_t>(good.begin(), good.end() - 1), TERN_INVALID_ARGUMENT, "checksum"});
  forged.push_back({"too short", std::vector<uint8_t>(good.begin(), good.begin() + 100), TERN_INVALID_ARGUMENT,
                    "not a Tern generator"});
  for (size_t at : {size_t(30), size_t(200), good.size() - 3}) {
    std::vector<uint8_t> flipped = good;
    flipped[at] ^= 0x40;
    forged.push_back({"a flipped byte", flipped, TERN_INVALID_ARGUMENT, "checksum"});
  }
  std::vector<uint8_t> b = good;
  b[0] = 'X';
  forged.push_back({"magic", b, TERN_INVALID_ARGUMENT, "TERNGENR"});
  b = good;
  poke<uint32_t>(&b, 8, 2);
  forged.push_back({"version", b, TERN_UNSUPPORTED, "version 2"});
  b = good;
  poke<uint32_t>(&b, 12, 0xffu);
  forged.push_back({"flags", b, TERN_INVALID_ARGUMENT, "flags"});
  b = good;
  poke<int32_t>(&b, 192 + 4 * 3, 9999);
  forged.push_back({"a history token", b, TERN_INVALID_ARGUMENT, "outside the vocabulary"});
  b = good;
  poke<float>(&b, 192 + 4 * 25 + 4 * 17, std::numeric_limits<float>::quiet_NaN());
  forged.push_back({"a NaN logit", b, TERN_INVALID_ARGUMENT, "NaN"});
  b = good;
  poke<int64_t>(&b, 168, int64_t(1) << 40);
  forged.push_back({"a history longer than the blob", b, TERN_INVALID_ARGUMENT, "history"});
  b = good;
  poke<int64_t>(&b, 120, int64_t(65));
  forged.push_back({"a position past the limit", b, TERN_INVALID_ARGUMENT, "sequence limit"});
  b = good;
  poke<int64_t>(&b, 120, int64_t(23));
  forged.push_back({"a position its session state does not hold", b, TERN_INVALID_ARGUMENT, "session state holds"});
  b = good;
  poke<int32_t>(&b, 144, 9);
  forged.push_back({"a stop reason", b, TERN_INVALID_ARGUMENT, "stop reason"});
  b = good;
  for (size_t i = 80; i < 112; ++i) b[i] = 0;
  reseal_generator(&b);
  forged.push_back({"a zero PRNG state", b, TERN_INVALID_ARGUMENT, "all zero"});
  b = good;
  b[good.size() - 8] ^= 1;  // inside the session state's payload: its own checksum refuses it
  reseal_generator(&b);
  forged.push_back({"a corrupt session state", b, TERN_INVALID_ARGUMENT, "session state is corrupt"});

  const std::vector<float> logits_before(tern_generator_logits(target, nullptr),
                                         tern_generator_logits(target, nullptr) + 256);
  for (const Forgery& f : forged) {
    INFO(f.what);
    CHECK(tern_generator_restore(target, sampler, f.blob.data(), f.blob.size()) == f.status);
    CHECK_THAT(std::string(tern_generator_last_error(target)), Catch::Contains(f.message));
    CHECK(tern_session_position(fresh) == 9);
  }
  CHECK(std::vector<float>(tern_generator_logits(target, nullptr), tern_generator_logits(target, nullptr) + 256) ==
        logits_before);
  CHECK(tern_generator_restore(target, sampler, nullptr, 10) == TERN_INVALID_ARGUMENT);
  CHECK(tern_generator_restore(target, nullptr, good.data(), good.size()) == TERN_INVALID_ARGUMENT);

  // Options other than those it was saved with.
  tern_sampler* colder = test::top_k_sampler(0.5f, 7);
  CHECK(tern_generator_restore(target, colder, good.data(), good.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(target)), Catch::Contains("temperature"));
  tern_generator_free(target);
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.keep_tokens = 10;
  REQUIRE(tern_generator_create(fresh, &go, &target) == TERN_OK);
  CHECK(tern_generator_restore(target, sampler, good.data(), good.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(target)), Catch::Contains("keep_tokens"));
  tern_generator_free(target);
  // Another model's session refuses the state inside.
  tern_model* other = load_converted("examples/models/kjv-stream", "kjv_stream");
  tern_session* other_session = session_on(TERN_BACKEND_CPU, other, 64);
  target = generator_on(other_session);
  CHECK(tern_generator_restore(target, sampler, good.data(), good.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_generator_last_error(target)), Catch::Contains("different model"));
  tern_generator_free(target);
  tern_session_free(other_session);
  tern_model_free(other);
  // The good blob restores.
  target = generator_on(fresh);
  CHECK(tern_generator_restore(target, sampler, good.data(), good.size()) == TERN_OK);
  CHECK(tern_session_position(fresh) == 24);
  tern_generator_free(target);
  tern_sampler_free(colder);
  tern_sampler_free(sampler);
  tern_generator_free(g);
  tern_session_free(fresh);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation control: a second generator, or a session fed, reset or loaded behind its generator, is caught",
          "[generation]") {
  tern_model* model = load_converted("examples/models/kjv-byte", "kjv_byte");
  tern_session* s = session_on(TERN_BACKEND_CPU, model, 64);
  tern_generator* g = generator_on(s);
  tern_generator* second = nullptr;
  CHECK(tern_generator_create(s, nullptr, &second) == TERN_INVALID_ARGUMENT);
  CHECK(second == nullptr);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("already has a generator"));
  tern_sampler* sampler = test::top_k_sampler(0.0f, 0);
  const std::vector<int32_t> prompt = test::random_ids(10, 256, 8);
  int32_t t = -1;
  const std::vector<uint8_t> empty_state = test::saved_state(s);

  struct Behind {
    const char* what;
    void (*act)(tern_session*, const std::vector<int32_t>&, const std::vector<uint8_t>&);
  };
  const Behind cases[] = {
      {"reset and refilled to the same position",
       [](tern_session* s, const std::vector<int32_t>& p, const std::vector<uint8_t>&) {
         REQUIRE(tern_session_reset(s) == TERN_OK);
         REQUIRE(tern_session_append(s, p.data(), int64_t(p.size()), nullptr) == TERN_OK);
       }},
      {"a forward of the same tokens",
       [](tern_session* s, const std::vector<int32_t>& p, const std::vector<uint8_t>&) {
         std::vector<float> logits(p.size() * 256);
         REQUIRE(tern_session_forward(s, p.data(), int64_t(p.size()), logits.data()) == TERN_OK);
       }},
      {"a state loaded, then refilled",
       [](tern_session* s, const std::vector<int32_t>& p, const std::vector<uint8_t>& empty) {
         REQUIRE(tern_session_load_state(s, empty.data(), empty.size()) == TERN_OK);
         REQUIRE(tern_session_append(s, p.data(), int64_t(p.size()), nullptr) == TERN_OK);
       }},
  };
  for (const Behind& c : cases) {
    INFO(c.what);
    REQUIRE(tern_generator_prompt(g, prompt.data(), 10, nullptr) == TERN_OK);
    c.act(s, prompt, empty_state);
    REQUIRE(tern_session_position(s) == 10);
    CHECK(tern_generator_next(g, sampler, &t) == TERN_INVALID_ARGUMENT);
    CHECK(t == -1);
    CHECK_THAT(std::string(tern_generator_last_error(g)), Catch::Contains("not made through its generator"));
    CHECK(tern_generator_append(g, prompt.data(), 1) == TERN_INVALID_ARGUMENT);
  }
  // Starting over works; freeing the generator lets another bind.
  REQUIRE(tern_generator_prompt(g, prompt.data(), 10, nullptr) == TERN_OK);
  CHECK(tern_generator_next(g, sampler, &t) == TERN_OK);
  tern_generator_free(g);
  REQUIRE(tern_generator_create(s, nullptr, &second) == TERN_OK);
  REQUIRE(tern_generator_prompt(second, prompt.data(), 10, nullptr) == TERN_OK);
  CHECK(tern_generator_next(second, sampler, &t) == TERN_OK);
  tern_generator_free(second);
  tern_sampler_free(sampler);
  tern_session_free(s);
  tern_model_free(model);
}

namespace {

// What the callbacks saw, and when abort answers yes.
struct Watch {
  std::vector<std::pair<int64_t, int64_t>> progress;  // (rows done, rows total)
  int64_t abort_after_rows = -1;                      // -1: never
  int64_t abort_after_asks = -1;                      // -1: never
  int64_t asks = 0;
};

int abort_when_due(void* user) {
  auto* w = static_cast<Watch*>(user);
  ++w->asks;
  const bool rows = w->abort_after_rows >= 0 && !w->progress.empty() && w->progress.back().first >= w->abort_after_rows;
  return rows || (w->abort_after_asks >= 0 && w->asks > w->abort_after_asks) ? 1 : 0;
}

void note_progress(int64_t done, int64_t total, void* user) {
  static_cast<Watch*>(user)->progress.push_back({done, total});
}

}  // namespace

TEST_CASE("generation control: abort stops a long forward between parts, progress counts up, the session works after",
          "[generation][vulkan]") {
  const tern_backend backend = GENERATE(TERN_BACKEND_CPU, TERN_BACKEND_VULKAN);
  TERN_SKIP_BACKEND_WITHOUT_DEVICE(backend);
  INFO(test::backend_name(backend));
  const std::string path = test::convert_golden("sliding_w64", "generation_control_sliding");
  REQUIRE(!path.empty());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  const int64_t n = 8192;
  tern_session* s = session_on(backend, model, n, n);
  const int64_t vocab = tern_session_vocab_size(s);
  const std::vector<int32_t> ids = test::random_ids(n, vocab, 11);
  std::vector<float> logits(size_t(n * vocab));
  Watch watch;
  watch.abort_after_rows = 1024;
  REQUIRE(tern_session_set_callbacks(s, abort_when_due, note_progress, &watch) == TERN_OK);
  const auto start = std::chrono::steady_clock::now();
  CHECK(tern_session_forward(s, ids.data(), n, logits.data()) == TERN_ABORTED);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));  // a bound on a hang, not a timing
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("abort callback"));
  CHECK(std::string(tern_status_string(TERN_ABORTED)) == "aborted");
  CHECK(tern_session_position(s) == 0);
  REQUIRE(watch.progress.size() == 1024 / TERN_CALLBACK_ROWS);
  for (size_t i = 0; i < watch.progress.size(); ++i) {
    CHECK(watch.progress[i].first == int64_t(i + 1) * TERN_CALLBACK_ROWS);
    CHECK(watch.progress[i].second == n);
  }

  // The next call works, in parts, and gives an undivided call's logits.
  watch = Watch();
  const int64_t m = 700;
  std::vector<float> parts(size_t(m * vocab)), whole(size_t(m * vocab));
  REQUIRE(tern_session_forward(s, ids.data(), m, parts.data()) == TERN_OK);
  CHECK(tern_session_position(s) == m);
  REQUIRE(watch.progress.size() == 3);
  CHECK(watch.progress.back() == std::make_pair(m, m));
  CHECK(watch.progress[0].first < watch.progress[1].first);
  tern_session* plain = session_on(backend, model, n, n);
  REQUIRE(tern_session_forward(plain, ids.data(), m, whole.data()) == TERN_OK);
  CHECK(test::relative_error(parts.data(), whole.data(), parts.size()) < test::backend_tolerance(backend, 1e-5));
  // Without callbacks nothing is asked.
  REQUIRE(tern_session_set_callbacks(s, nullptr, nullptr, nullptr) == TERN_OK);
  REQUIRE(tern_session_forward(s, ids.data(), m, parts.data()) == TERN_OK);
  CHECK(watch.progress.size() == 3);
  tern_session_free(plain);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("generation control: abort stops a Transformer-XL call between ops on the CPU, and a generator's prompt",
          "[generation]") {
  const std::string path = test::convert_golden("transfo_xl_plain", "generation_control_xl");
  REQUIRE(!path.empty());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  tern_session* s = session_on(TERN_BACKEND_CPU, model, 64, 32);
  const int64_t vocab = tern_session_vocab_size(s);
  const std::vector<int32_t> ids = test::random_ids(32, vocab, 12);
  std::vector<float> logits(size_t(32 * vocab)), fresh(size_t(32 * vocab));
  Watch watch;
  watch.abort_after_asks = 3;  // the session asks once before the call, the CPU backend before each op
  REQUIRE(tern_session_set_callbacks(s, abort_when_due, note_progress, &watch) == TERN_OK);
  REQUIRE(tern_session_append(s, ids.data(), 16, nullptr) == TERN_ABORTED);
  CHECK(watch.asks == 4);
  CHECK(watch.progress.empty());
  CHECK(tern_session_position(s) == 0);
  watch = Watch();
  REQUIRE(tern_session_append(s, ids.data(), 32, logits.data()) == TERN_OK);
  CHECK(watch.progress == std::vector<std::pair<int64_t, int64_t>>{{32, 32}});
  tern_session* plain = session_on(TERN_BACKEND_CPU, model, 64, 32);
  REQUIRE(tern_session_append(plain, ids.data(), 32, fresh.data()) == TERN_OK);
  CHECK(test::relative_error(logits.data(), fresh.data(), logits.size()) < 1e-6);

  // A generator's call aborted: TERN_ABORTED, no sequence left; a new prompt works.
  tern_generator* g = generator_on(s);
  watch = Watch();
  watch.abort_after_asks = 0;
  CHECK(tern_generator_prompt(g, ids.data(), 32, nullptr) == TERN_ABORTED);
  CHECK(tern_session_position(s) == 0);
  CHECK(tern_generator_logits(g, nullptr) == nullptr);
  watch = Watch();
  CHECK(tern_generator_prompt(g, ids.data(), 32, nullptr) == TERN_OK);
  tern_generator_free(g);
  tern_session_free(plain);
  tern_session_free(s);
  tern_model_free(model);
}
