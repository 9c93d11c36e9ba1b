// SPDX-License-Identifier: MIT
// tern-run's streamed scoring: --perplexity over --ids and --score FILE with --segment feed the tokens through the
// session's state (Transformer-XL's memory, a sliding window's ring), each token predicted once, and report what the
// goldens' log-probabilities give.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "run_tool.h"
#include "tern/tern.h"
#include "test_support.h"

namespace {

std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  *status = pclose(p);
  return out;
}

std::string convert(const std::string& golden) {
  const std::string out = tern::test::convert_golden(golden, "stream_score_" + golden);
  REQUIRE(!out.empty());
  return out;
}

// The number after `label` in tern-run's output, e.g. "...: 123.4 bits per byte".
double number_before(const std::string& out, const std::string& unit) {
  std::smatch m;
  INFO(out);
  REQUIRE(std::regex_search(out, m, std::regex(": ([0-9.]+) " + unit)));
  return std::stod(m[1]);
}

}  // namespace

TEST_CASE("tern-run --perplexity streams a Transformer-XL golden through its memory", "[cli][transfo_xl][streaming]") {
  for (const char* name : {"transfo_xl_adaptive", "transfo_xl_plain"}) {
    const std::string dir = tern::test::source_path("tests/goldens/") + name;
    const std::string model = convert(name);
    std::vector<int32_t> ids;
    tern::npy::Array lp;
    std::string error;
    REQUIRE(tern::cli::read_ids_json(dir + "/ids.json", &ids, &error));
    REQUIRE(tern::npy::read_f32(dir + "/logits.npy", &lp, &error));
    double nll = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) nll -= double(lp.data[i * size_t(lp.shape[1]) + size_t(ids[i + 1])]);
    const double want = std::exp(nll / double(ids.size() - 1));
    const std::string tgt = std::to_string(nlohmann::json::parse(tern::test::read_file(dir + "/config.json"))["tgt_len"].get<int>());
    int st = 0;
    // No --max-tokens: a model without a context limit gets a session as long as the stream.
    const std::string out = run_command(tern::test::tool_command("examples/tern-run ") + model + " --ids " + dir +
                                            "/ids.json --perplexity --segment " + tgt + " --threads 2 2>&1", &st);
    INFO(name << ": " << out);
    REQUIRE(st == 0);
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("segments of " + tgt + ": ([0-9.]+) \\(")));
    CHECK(std::fabs(std::stod(m[1]) - want) <= 1e-4 * want);
  }
}

// The goldens' configs keep their evaluation's segment (Transformer-XL tgt_len, the compressive segment_length); the
// converter records it, and tern-run feeds --ids in calls of it unless told otherwise: the logits of a plain
// "--ids F --logits-out G" are the reference's, where one call of all the ids differs from them (a memory's outputs
// depend on how the stream is cut).
TEST_CASE("tern-run --ids on a model with a memory feeds the model's evaluation segment and matches its golden", "[cli][transfo_xl][compressive][streaming]") {
  for (const char* name : {"transfo_xl_plain", "transfo_xl_adaptive", "compressive_conv_mean", "compressive_max_conv_post"}) {
    const std::string dir = tern::test::source_path("tests/goldens/") + name;
    const nlohmann::json config = nlohmann::json::parse(tern::test::read_file(dir + "/config.json"));
    const int64_t segment = config.contains("tgt_len") ? config["tgt_len"].get<int64_t>() : config["segment_length"].get<int64_t>();
    const std::string model = convert(name);
    tern_model* m = nullptr;
    REQUIRE(tern_model_load(model.c_str(), &m) == TERN_OK);
    CHECK(tern_model_segment_length(m) == segment);
    tern_model_free(m);
    tern::npy::Array golden, got;
    std::string error;
    REQUIRE(tern::npy::read_f32(dir + "/logits.npy", &golden, &error));
    const std::string out_npy = tern::test::scratch_dir(std::string("stream_score_ids_") + name) + "/logits.npy";
    int st = 0;
    // No --segment and no --max-tokens.
    const std::string out = run_command(tern::test::tool_command("examples/tern-run ") + model + " --ids " + dir +
                                            "/ids.json --logits-out " + out_npy + " --threads 1 2>&1", &st);
    INFO(name << ": " << out);
    REQUIRE(st == 0);
    CHECK(out.find("segment: " + std::to_string(segment) + " tokens per call, the model's evaluation segment") !=
          std::string::npos);
    REQUIRE(tern::npy::read_f32(out_npy, &got, &error));
    REQUIRE(got.shape == golden.shape);
    CHECK(tern::test::relative_error(got.data.data(), golden.data.data(), got.data.size()) <= 1e-4);
    // One call of all the ids: another cut of the stream, other outputs, except under Transformer-XL's
    // same_length, where every query sees exactly mem_len keys whatever the cut.
    if (config.value("same_length", false)) continue;
    const std::string whole = run_command(tern::test::tool_command("examples/tern-run ") + model + " --ids " + dir +
                                              "/ids.json --logits-out " + out_npy + " --segment " +
                                              std::to_string(golden.shape[0]) + " --threads 1 2>&1", &st);
    INFO(whole);
    REQUIRE(st == 0);
    REQUIRE(tern::npy::read_f32(out_npy, &got, &error));
    CHECK(tern::test::relative_error(got.data.data(), golden.data.data(), got.data.size()) > 1e-3);
  }
}

TEST_CASE("tern-run --score --segment streams a sliding-window model and matches one forward pass", "[cli][streaming]") {
  const std::string model = convert("sliding_w64");
  // 700 bytes in the model's vocabulary [0, 64): '0' .. '?'.
  std::string text;
  for (int i = 0; i < 700; ++i) text.push_back(char('0' + (i * 7 + i / 13) % 16));
  const std::string file = tern::test::scratch_dir("stream_score_text") + "/text.txt";
  tern::test::write_file(file, text);
  // Expected: one forward pass over the whole text (a sliding window sees the same keys however it is cut).
  tern_model* m = nullptr;
  REQUIRE(tern_model_load(model.c_str(), &m) == TERN_OK);
  tern_session_options so;
  tern_session_options_init(&so);
  so.max_tokens = int64_t(text.size());
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(m, &so, &s) == TERN_OK);
  const int64_t n = int64_t(text.size()), V = tern_session_vocab_size(s);
  std::vector<int32_t> ids(text.begin(), text.end());
  std::vector<float> logits(size_t(n * V));
  REQUIRE(tern_session_forward(s, ids.data(), n, logits.data()) == TERN_OK);
  double nll = 0;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const float* row = logits.data() + i * V;
    double mx = row[0], sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    nll += std::log(sum) + mx - double(row[ids[size_t(i + 1)]]);
  }
  const double want = nll / std::log(2.0) / double(n - 1);
  tern_session_free(s);
  tern_model_free(m);
  int st = 0;
  const std::string out = run_command(tern::test::tool_command("examples/tern-run ") + model + " --score " + file +
                                          " --segment 50 --max-tokens 700 --threads 1 2>&1", &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("streamed in segments of 50"));
  CHECK(std::fabs(number_before(out, "bits per byte") - want) <= 1e-4 * want);
}
