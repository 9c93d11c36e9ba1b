// SPDX-License-Identifier: MIT
// Attention sinks and context shift (issue: chat that never runs out of memory) against the PyTorch port of their
// semantics (tools/reference/streaming_sinks.py, goldens in tests/goldens/sinks/: the logits of every row of every
// call), on every backend: sinks across eviction and calls longer than S + W, with a state saved and restored in the
// middle; shift through a generator fed one token at a time across refills. Then what a session refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npy.h"
#include "test_support.h"
#include "tern/tern.h"

using namespace tern;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;  // DESIGN.md, Numerics: end to end, every row

struct SinkGolden {
  std::string name;
  nlohmann::json spec;  // case.json
  npy::Array logits;    // sinks: [rows of every call, vocab]; shift: [1 + appended, vocab]
};

std::vector<SinkGolden> sink_goldens() {
  std::vector<SinkGolden> out;
  const fs::path root = test::source_path("tests/goldens/sinks");
  if (!fs::is_directory(root)) return out;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "case.json")) continue;
    SinkGolden g;
    g.name = entry.path().filename().string();
    g.spec = nlohmann::json::parse(test::read_file((entry.path() / "case.json").string()));
    std::string error;
    INFO(g.name << ": " << error);
    REQUIRE(npy::read_f32((entry.path() / "logits.npy").string(), &g.logits, &error));
    REQUIRE(g.logits.shape.size() == 2);
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const SinkGolden& a, const SinkGolden& b) { return a.name < b.name; });
  return out;
}

// The golden's model, converted once per process.
tern_model* load_model(const std::string& golden) {
  static std::map<std::string, std::string> converted;  // golden -> its .tern
  std::string& path = converted[golden];
  if (path.empty()) path = test::convert_golden(golden, "sinks_" + golden);
  REQUIRE(!path.empty());
  tern_model* model = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  return model;
}

tern_session* make_session(tern_model* model, tern_backend backend, int64_t sinks, int64_t window, int64_t max_tokens,
                           int64_t max_batch) {
  tern_session_options o;
  tern_session_options_init(&o);
  o.backend = backend;
  o.weight_storage = TERN_WEIGHT_STORAGE_F32;  // Vulkan's default may store float16: the bound here is float32's
  o.threads = 2;
  o.sink_tokens = sinks;
  o.sink_window = window;
  o.max_tokens = max_tokens;
  o.max_batch = max_batch;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &o, &s) == TERN_OK);
  return s;
}

// Relative L2 error of one row against the golden's.
double row_error(const float* got, const npy::Array& want, int64_t row) {
  const int64_t vocab = want.shape[1];
  return test::relative_error(got, want.data.data() + row * vocab, size_t(vocab));
}

void check_sink_case(const SinkGolden& g, tern_backend backend) {
  tern_model* model = load_model(g.spec["model"].get<std::string>());
  const int64_t S = g.spec["sink_tokens"], W = g.spec["sink_window"];
  const auto calls = g.spec["calls"].get<std::vector<std::vector<int32_t>>>();
  const int64_t vocab = g.logits.shape[1];
  int64_t longest = 1, rows = 0;
  for (const auto& c : calls) longest = std::max<int64_t>(longest, int64_t(c.size())), rows += int64_t(c.size());
  REQUIRE(g.logits.shape[0] == rows);
  tern_session* s = make_session(model, backend, S, W, 0, longest);
  // The state is S + W tokens whatever the sequence's length.
  tern_memory_plan at_window{}, far{};
  REQUIRE(tern_session_plan(s, S + W, &at_window) == TERN_OK);
  REQUIRE(tern_session_plan(s, 100 * (S + W), &far) == TERN_OK);
  CHECK(far.state_bytes == at_window.state_bytes);
  CHECK(tern_session_sequence_limit(s) == int64_t(1) << 31);

  // Halfway, the state moves into a fresh session (CPU <-> the same backend), which goes on.
  const size_t save_after = calls.size() / 2;
  std::vector<float> logits;
  double worst = 0;
  int64_t row = 0;
  for (size_t c = 0; c < calls.size(); ++c) {
    const int64_t n = int64_t(calls[c].size());
    logits.resize(size_t(n * vocab));
    INFO(g.name << " call " << c << ": " << tern_session_last_error(s));
    REQUIRE(tern_session_append(s, calls[c].data(), n, logits.data()) == TERN_OK);
    for (int64_t r = 0; r < n; ++r, ++row) {
      const double err = row_error(logits.data() + r * vocab, g.logits, row);
      worst = std::max(worst, err);
      INFO(g.name << " call " << c << " row " << r << " (token " << row << ")");
      CHECK(err <= kTolerance);
    }
    if (c + 1 == save_after) {
      const std::vector<uint8_t> blob = test::saved_state(s);
      tern_session_free(s);
      s = make_session(model, backend, S, W, 0, longest);
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
    }
  }
  std::printf("sinks golden %-18s %-6s S %lld W %lld: %lld rows, worst row rel L2 %.3g\n", g.name.c_str(),
              test::backend_name(backend), (long long)S, (long long)W, (long long)rows, worst);
  tern_session_free(s);
  tern_model_free(model);
}

void check_shift_case(const SinkGolden& g, tern_backend backend) {
  tern_model* model = load_model(g.spec["model"].get<std::string>());
  const int64_t L = g.spec["max_tokens"], K = g.spec["keep"];
  const auto prompt = g.spec["prompt"].get<std::vector<int32_t>>();
  const auto appended = g.spec["appended"].get<std::vector<int32_t>>();
  REQUIRE(g.logits.shape[0] == int64_t(1 + appended.size()));
  tern_session* s = make_session(model, backend, 0, 0, L, 0);
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.context_policy = TERN_CONTEXT_SHIFT;
  go.keep_tokens = K;
  tern_generator* gen = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_generator_create(s, &go, &gen) == TERN_OK);
  REQUIRE(tern_generator_prompt(gen, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
  double worst = row_error(tern_generator_logits(gen, nullptr), g.logits, 0);
  CHECK(worst <= kTolerance);
  for (size_t i = 0; i < appended.size(); ++i) {
    INFO(g.name << " appended token " << i << ": " << tern_generator_last_error(gen));
    REQUIRE(tern_generator_append(gen, &appended[i], 1) == TERN_OK);
    const double err = row_error(tern_generator_logits(gen, nullptr), g.logits, int64_t(i) + 1);
    worst = std::max(worst, err);
    CHECK(err <= kTolerance);
  }
  CHECK(tern_generator_slides(gen) >= 2);  // the goldens cross at least two shifts
  std::printf("shift golden %-18s %-6s L %lld keep %lld: %zu steps, %lld shifts, worst row rel L2 %.3g\n",
              g.name.c_str(), test::backend_name(backend), (long long)L, (long long)K, appended.size() + 1,
              (long long)tern_generator_slides(gen), worst);
  tern_generator_free(gen);
  tern_session_free(s);
  tern_model_free(model);
}

}  // namespace

TEST_CASE("attention sinks and context shift match the PyTorch port of their semantics", "[sinks][model]") {
  TERN_EACH_BACKEND(backend);
  const std::vector<SinkGolden> goldens = sink_goldens();
  REQUIRE(goldens.size() >= 4);
  for (const SinkGolden& g : goldens) {
    const std::string kind = g.spec["kind"];
    if (kind == "sinks") check_sink_case(g, backend);
    else if (kind == "shift") check_shift_case(g, backend);
    else FAIL("unknown case kind '" << kind << "' in " << g.name);
  }
}

TEST_CASE("attention sinks and shift refuse what they cannot serve, naming it", "[sinks][session]") {
  tern_model* llama = load_model("hf_llama_gqa");
  tern_session_options o;
  tern_session_options_init(&o);
  tern_session* s = nullptr;
  SECTION("options out of range") {
    for (auto [S, W] : {std::pair<int64_t, int64_t>{4, 0}, {-1, 8}, {0, -8}, {int64_t(1) << 31, 1}}) {
      o.sink_tokens = S, o.sink_window = W;
      CHECK(tern_session_create(llama, &o, &s) == TERN_INVALID_ARGUMENT);
      CHECK(std::string(tern_last_error()).find("sink_window") != std::string::npos);
    }
    o.sink_tokens = 4, o.sink_window = 8, o.max_tokens = 64;
    CHECK(tern_session_create(llama, &o, &s) == TERN_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("max_tokens 64") != std::string::npos);
  }
  SECTION("a model with learned absolute positions") {
    tern_model* gpt2 = load_model("hf_gpt2");
    o.sink_tokens = 4, o.sink_window = 8;
    CHECK(tern_session_create(gpt2, &o, &s) == TERN_UNSUPPORTED);
    CHECK(std::string(tern_last_error()).find("learned absolute positions") != std::string::npos);
    CHECK(std::string(tern_last_error()).find("POSITION") != std::string::npos);
    // Shift: its attention reads no rotary positions.
    o.sink_tokens = 0, o.sink_window = 0;
    REQUIRE(tern_session_create(gpt2, &o, &s) == TERN_OK);
    tern_generator_options go;
    tern_generator_options_init(&go);
    go.context_policy = TERN_CONTEXT_SHIFT;
    tern_generator* gen = nullptr;
    CHECK(tern_generator_create(s, &go, &gen) == TERN_UNSUPPORTED);
    CHECK(std::string(tern_last_error()).find("rotary") != std::string::npos);
    tern_session_free(s);
    tern_model_free(gpt2);
  }
  SECTION("windowed attention") {
    tern_model* mistral = load_model("hf_mistral_window");
    o.sink_tokens = 4, o.sink_window = 8;
    CHECK(tern_session_create(mistral, &o, &s) == TERN_UNSUPPORTED);
    CHECK(std::string(tern_last_error()).find("SlidingWindow") != std::string::npos);
    tern_model_free(mistral);
  }
  SECTION("the SINKS policy without sinks, and a state of other sinks") {
    REQUIRE(tern_session_create(llama, &o, &s) == TERN_OK);
    tern_generator_options go;
    tern_generator_options_init(&go);
    go.context_policy = TERN_CONTEXT_SINKS;
    tern_generator* gen = nullptr;
    CHECK(tern_generator_create(s, &go, &gen) == TERN_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("sink_window") != std::string::npos);
    tern_session_free(s);
    o.sink_tokens = 2, o.sink_window = 6;
    REQUIRE(tern_session_create(llama, &o, &s) == TERN_OK);
    const std::vector<int32_t> ids = test::random_ids(8, 288, 7);
    REQUIRE(tern_session_append(s, ids.data(), 8, nullptr) == TERN_OK);
    const std::vector<uint8_t> blob = test::saved_state(s);
    tern_session* other = nullptr;
    o.sink_tokens = 4, o.sink_window = 4;  // the same S + W, other sinks
    REQUIRE(tern_session_create(llama, &o, &other) == TERN_OK);
    CHECK(tern_session_load_state(other, blob.data(), blob.size()) == TERN_INVALID_ARGUMENT);
    CHECK(std::string(tern_session_last_error(other)).find("sink_tokens 2") != std::string::npos);
    tern_session_free(other);
    tern_session_free(s);
  }
  tern_model_free(llama);
}

TEST_CASE("a SINKS generator keeps a bounded history, and the cut changes no sampled token", "[sinks][generation]") {
  tern_model* model = load_model("hf_llama_gqa");
  tern_session_options o;
  tern_session_options_init(&o);
  o.threads = 1;
  o.sink_tokens = 4, o.sink_window = 28;
  tern_sampler_options so;
  tern_sampler_options_init(&so);
  so.temperature = 1.0f;
  so.repetition_penalty = 1.3f;
  so.repetition_last_n = 8;  // within both histories below
  const std::vector<int32_t> prompt = test::random_ids(12, 288, 11);
  // Tokens sampled with the history cut to `history` tokens (0: the SINKS default), and the longest history seen.
  auto generate = [&](int64_t history, int64_t tokens, size_t* longest) {
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(model, &o, &s) == TERN_OK);
    tern_generator_options go;
    tern_generator_options_init(&go);
    go.context_policy = TERN_CONTEXT_SINKS;
    go.history_tokens = history;
    tern_generator* gen = nullptr;
    INFO(tern_last_error());
    REQUIRE(tern_generator_create(s, &go, &gen) == TERN_OK);
    tern_sampler* sampler = nullptr;
    REQUIRE(tern_sampler_create(&so, &sampler) == TERN_OK);
    REQUIRE(tern_generator_prompt(gen, prompt.data(), int64_t(prompt.size()), nullptr) == TERN_OK);
    std::vector<int32_t> out;
    *longest = 0;
    for (int64_t i = 0; i < tokens; ++i) {
      int32_t t = -1;
      REQUIRE(tern_generator_next(gen, sampler, &t) == TERN_OK);
      out.push_back(t);
      int64_t n = 0;
      const int32_t* h = tern_generator_history(gen, &n);
      *longest = std::max(*longest, size_t(n));
      REQUIRE(n >= 1);
      REQUIRE(h[n - 1] == t);  // the newest token is always kept
    }
    CHECK(tern_generator_slides(gen) == 0);
    tern_sampler_free(sampler);
    tern_generator_free(gen);
    tern_session_free(s);
    return out;
  };
  size_t longest_cut = 0, longest_whole = 0, longest_default = 0;
  const std::vector<int32_t> cut = generate(16, 400, &longest_cut);
  const std::vector<int32_t> whole = generate(int64_t(1) << 20, 400, &longest_whole);
  CHECK(cut == whole);
  CHECK(longest_cut <= 32);
  CHECK(longest_whole == 412);
  generate(0, 9000, &longest_default);  // SINKS: the last 4096, cut at twice that
  CHECK(longest_default == 8191);

  // Elsewhere the history must hold what a refill feeds again.
  tern_session_options dense;
  tern_session_options_init(&dense);
  dense.max_tokens = 64;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &dense, &s) == TERN_OK);
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.history_tokens = 10;
  tern_generator* gen = nullptr;
  CHECK(tern_generator_create(s, &go, &gen) == TERN_INVALID_ARGUMENT);
  CHECK(std::string(tern_last_error()).find("history_tokens must be 0") != std::string::npos);
  CHECK(std::string(tern_last_error()).find("sequence limit 64") != std::string::npos);
  go.history_tokens = -1;
  CHECK(tern_generator_create(s, &go, &gen) == TERN_INVALID_ARGUMENT);
  tern_session_free(s);
  tern_model_free(model);
}
