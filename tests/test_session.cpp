// SPDX-License-Identifier: MIT
// Session behaviour: planner numbers, argument errors, per-op operation counts, and seeded generation through
// tern-run.
#include <catch2/catch.hpp>
#include <cstdio>

#include "attention_cases.h"
#include "convert.h"
#include "format/status.h"
#include "op_graph.h"
#include "run_tool.h"
#include "tern/tern.h"
#include "test_support.h"

using namespace tern;

namespace {

// The golden converted into a fresh scratch directory: the .tern file's path.
std::string converted(const std::string& golden) {
  std::string out = test::scratch_dir("session_" + golden) + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(convert::convert_checkpoint(test::source_path("tests/goldens/" + golden), out, opts).ok());
  return out;
}

tern_model* load_converted(const std::string& golden) {
  const std::string out = converted(golden);
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

Result<int> half_of_even(int n) {
  if (n % 2 != 0) return InvalidArgument(std::to_string(n) + " is odd");
  return n / 2;
}

// Halves twice through TERN_ASSIGN_OR_RETURN: the first macro declares, the second assigns to an existing variable.
Result<int> quarter(int n) {
  TERN_ASSIGN_OR_RETURN(int half, half_of_even(n));
  int quarter = 0;
  TERN_ASSIGN_OR_RETURN(quarter, half_of_even(half));
  return quarter;
}

Status check_quarter(int n, int* out) {
  TERN_ASSIGN_OR_RETURN(*out, quarter(n));
  return Status::Ok();
}

// Whether query i sees key j (j <= i) under the pattern, from the patterns' definitions (REFERENCE.md), for head h
// of `heads`: split layouts give the first half of the heads the local part and the second half the rest.
bool sees(const AttentionPattern& p, int h, int heads, int64_t i, int64_t j) {
  const bool second = p.split && h >= heads / 2;
  switch (p.kind) {
    case PatternKind::kDense: return true;
    case PatternKind::kSliding: return i - j < p.window;
    case PatternKind::kChunked: return j / p.chunk >= i / p.chunk - p.chunks_before;
    case PatternKind::kStrided: {
      const bool local = i - j < p.stride, strided = (i - j) % p.stride == 0;
      return p.split ? (second ? strided : local) : local || strided;
    }
    case PatternKind::kFixed: {
      const bool own = j / p.block == i / p.block, summary = j % p.block >= p.block - p.summary;
      return p.split ? (second ? summary || j == i : own) : own || summary;
    }
  }
  return false;
}

// The operations tern_session_get_profile_flops reports per op, in graph order.
std::vector<uint64_t> profile_flops(tern_session* s) {
  size_t count = 0;
  REQUIRE(tern_session_get_profile_flops(s, nullptr, 0, &count) == TERN_OK);
  std::vector<uint64_t> flops(count);
  REQUIRE(tern_session_get_profile_flops(s, flops.data(), count, &count) == TERN_OK);
  return flops;
}

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

}  // namespace

TEST_CASE("planner: dense attention's extra memory grows linearly, its n x n equivalent quadratically", "[planner]") {
  // Sinusoidal positions: the plan can be asked for any n, past the trained context.
  tern_model* model = load_converted("post_untied_sinusoidal_relu");
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, nullptr, &s) == TERN_OK);
  tern_memory_plan p1k{}, p4k{}, p16k{};
  REQUIRE(tern_session_plan(s, 1024, &p1k) == TERN_OK);
  REQUIRE(tern_session_plan(s, 4096, &p4k) == TERN_OK);
  REQUIRE(tern_session_plan(s, 16384, &p16k) == TERN_OK);
  CHECK(p1k.weight_bytes > 0);
  CHECK(p1k.weight_bytes == p16k.weight_bytes);
  // Arena: activations [n, width] plus a fixed per-thread tile, so 4x the tokens is at most 4x the bytes.
  CHECK(p4k.arena_bytes <= 4 * p1k.arena_bytes);
  CHECK(p16k.arena_bytes <= 4 * p4k.arena_bytes);
  CHECK(double(p16k.arena_bytes) >= 3.9 * double(p4k.arena_bytes));
  CHECK(p16k.state_bytes == 16 * p1k.state_bytes);  // one key and one value per token
  CHECK(p16k.dense_attention_bytes == 256 * p1k.dense_attention_bytes);
  CHECK(p16k.arena_bytes < p16k.dense_attention_bytes / 10);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("session: bad arguments give errors and leave the session usable", "[session]") {
  tern_model* model = load_converted("pre_untied_nobias_gelutanh");  // context 256
  tern_session_options so;
  tern_session_options_init(&so);
  tern_session* s = nullptr;
  so.max_tokens = 100000;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("learned positions"));
  so.max_tokens = 0;
  so.threads = -3;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  so.threads = 1;
  so.backend = TERN_BACKEND_VULKAN;
  std::string why_no_vulkan;
  if (tern::test::vulkan_device(&why_no_vulkan)) {
    REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);  // every op of this dense model has a shader
    tern_session_free(s);
  } else {
    CHECK(tern_session_create(model, &so, &s) == TERN_UNSUPPORTED);
  }
  so.backend = tern_backend(7);
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  so.backend = TERN_BACKEND_AUTO;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);

  std::vector<int32_t> ids = {72, 101, 108, 108, 111};
  std::vector<float> logits(300 * 256);
  CHECK(tern_session_forward(s, ids.data(), 0, logits.data()) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_forward(s, nullptr, 3, logits.data()) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_forward(s, ids.data(), 5, nullptr) == TERN_INVALID_ARGUMENT);
  std::vector<int32_t> bad = {1, 2, 256};
  CHECK(tern_session_forward(s, bad.data(), 3, logits.data()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("token id 256"));
  bad = {-1};
  CHECK(tern_session_append(s, bad.data(), 1, logits.data()) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_position(s) == 0);

  std::vector<int32_t> many(257, 65);
  CHECK(tern_session_forward(s, many.data(), 257, logits.data()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("max_batch"));
  REQUIRE(tern_session_append(s, many.data(), 250, nullptr) == TERN_OK);
  CHECK(tern_session_append(s, many.data(), 7, logits.data()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("max_tokens"));
  CHECK(tern_session_position(s) == 250);

  // Still usable: a fresh forward gives finite logits.
  REQUIRE(tern_session_forward(s, ids.data(), 5, logits.data()) == TERN_OK);
  for (size_t i = 0; i < 5 * 256; ++i) REQUIRE(std::isfinite(logits[i]));
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("session: profiles count each op's operations from its shapes, over every call", "[session]") {
  SECTION("linear: 2 * n * in * out per call, nothing for the embedding") {
    const int64_t rows = 20, in = 48, out_dim = 37;
    test::OpGraph g = test::start_graph(rows, in, 1);
    const int32_t wt = test::add_constant(g, "w", {out_dim, in}, test::random_floats(size_t(out_dim * in), 2));
    const int32_t y = g.graph.add_value("y", fb::DType::F32, out_dim).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, -1}, fb::LinearParamsT{}).ok());
    tern_model* model = test::finish_and_load(g, y, "profile_linear", 64);
    tern_session* s = test::make_session(model, 1, 64, 64);
    const std::vector<int32_t> ids = test::random_ids(30, rows, 3);
    std::vector<float> out(ids.size() * size_t(out_dim));
    REQUIRE(tern_session_set_profiling(s, 1) == TERN_OK);
    REQUIRE(tern_session_forward(s, ids.data(), 30, out.data()) == TERN_OK);
    REQUIRE(tern_session_append(s, ids.data(), 7, out.data()) == TERN_OK);
    CHECK(profile_flops(s) == std::vector<uint64_t>{0, 2 * 37 * 48 * 37});
    REQUIRE(tern_session_set_profiling(s, 1) == TERN_OK);  // turning it on again clears the counts
    CHECK(profile_flops(s) == std::vector<uint64_t>{0, 0});
    tern_session_free(s);
    tern_model_free(model);
  }
  SECTION("windowed attention: 4 * head_dim per (query, key) pair the pattern shows, calls continuing a sequence") {
    const int heads = 4, dh = 8;
    const int64_t first = 23, second = 17, n = first + second;
    for (test::AttentionKind kind : test::pattern_attention_kinds()) {
      INFO(kind.name);
      test::AttentionModel m = test::attention_model(kind, heads, dh, n, "profile_attention");
      tern_session* s = test::make_session(m.model, 1, n, n);
      std::vector<float> out(size_t(n * heads * dh));
      REQUIRE(tern_session_set_profiling(s, 1) == TERN_OK);
      REQUIRE(tern_session_forward(s, m.ids.data(), first, out.data()) == TERN_OK);
      REQUIRE(tern_session_append(s, m.ids.data() + first, second, out.data()) == TERN_OK);
      uint64_t pairs = 0;
      for (int h = 0; h < heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j <= i; ++j) pairs += sees(kind.pattern, h, heads, i, j);
      CHECK(profile_flops(s) == std::vector<uint64_t>{0, 4 * uint64_t(dh) * pairs});
      tern_session_free(s);
      tern_model_free(m.model);
    }
  }
}

TEST_CASE("tern-run: generation is deterministic for a seed and differs across seeds", "[session][cli]") {
  const std::string model = converted("pre_tied_learned_gelu");
  const std::string run = tern::test::tool_command("examples/tern-run ") + model +
                          " --prompt 'Tern' -n 64 --temperature 1.0 --top-k 20 --threads 1 2>/dev/null --seed ";
  auto text_of = [](const std::string& out) { return out.substr(0, out.find("\n\nprompt:")); };
  int st1, st2, st3;
  std::string a = run_command(run + "11", &st1), b = run_command(run + "11", &st2), c = run_command(run + "12", &st3);
  REQUIRE(st1 == 0);
  REQUIRE(st2 == 0);
  REQUIRE(st3 == 0);
  CHECK(text_of(a).size() > 4);
  CHECK(text_of(a) == text_of(b));
  CHECK(text_of(a) != text_of(c));
  int st;
  run_command(tern::test::tool_command("examples/tern-run ") + model + " --top-k banana 2>/dev/null", &st);
  CHECK(WEXITSTATUS(st) == 2);
}

TEST_CASE("tern-bench: prints a JSON row per test with the planner's numbers", "[session][cli]") {
  const std::string model = converted("pre_tied_learned_gelu");
  int st;
  std::string out = run_command(tern::test::tool_command("examples/tern-bench ") + model +
                                    " -p 32 -n 8 -d 0,16 -r 2 -t 1 -o json 2>/dev/null",
                                &st);
  REQUIRE(st == 0);
  for (const char* test : {"\"test\": \"pp32\"", "\"test\": \"tg8\"", "\"test\": \"tg8@d16\""}) {
    CHECK_THAT(out, Catch::Contains(test));
  }
  for (const char* field : {"median_ms", "tokens_per_s", "peak_rss_bytes", "weight_bytes", "arena_bytes", "state_bytes",
                            "dense_attention_bytes"}) {
    CHECK_THAT(out, Catch::Contains(std::string("\"") + field + "\": "));
  }
  CHECK(out.find("\"tokens_per_s\": 0.000") == std::string::npos);
  // Each row says which machine and build it came from, as this process's library reads them.
  const std::string cpu = tern_cpu_description();
  CHECK_THAT(cpu, Catch::Contains(" logical processor"));
  CHECK_THAT(out, Catch::Contains("\"cpu\": \"" + cpu + "\""));
  CHECK_THAT(out, Catch::Contains(std::string("\"library\": \"") + tern_version() + "\""));
  CHECK_THAT(out, Catch::Contains("\"build\": \"Release") || Catch::Contains("\"build\": \"RelWithDebInfo") ||
                      Catch::Contains("\"build\": \"Debug"));
  run_command(tern::test::tool_command("examples/tern-bench ") + model + " -o yaml 2>/dev/null", &st);
  CHECK(WEXITSTATUS(st) == 2);
}

TEST_CASE("tern-bench --profile: a generation test profiles its steps, not the calls that fill its depth",
          "[session][cli]") {
  const std::string model = converted("pre_tied_learned_gelu");
  int st;
  std::string out = run_command(tern::test::tool_command("examples/tern-bench ") + model +
                                    " -p 0 -n 8 -d 16 -r 2 -t 1 --profile 2>/dev/null",
                                &st);
  REQUIRE(st == 0);
  // The per-op table: each of the 8 steps of a run calls every op once (the depth's call would make it 9).
  CHECK_THAT(out, Catch::Contains("profile of tg8@d16, 1 thread(s), 2 warm runs"));
  CHECK_THAT(out, Catch::Contains("| ATTENTION | 8 | "));
  CHECK_THAT(out, !Catch::Contains("| ATTENTION | 9 | "));
}

TEST_CASE("tern-bench --compete and --sessions: the speed beside busy processes, and sessions at once",
          "[session][cli]") {
  const std::string model = converted("pre_tied_learned_gelu");
  int st;
  std::string out = run_command(tern::test::tool_command("examples/tern-bench ") + model +
                                    " -p 0 -n 8 -r 1 -t 1 --compete 1 -o json 2>/dev/null",
                                &st);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("\"tokens_per_s_beside_busy\": "));
  CHECK(out.find("\"tokens_per_s_beside_busy\": 0.000") == std::string::npos);
  out = run_command(tern::test::tool_command("examples/tern-bench ") + model + " -p 8 -n 4 -r 2 --sessions 3 2>/dev/null",
                    &st);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("3 sessions on 3 threads at once, each: pp8 then tg4"));
  CHECK_THAT(out, Catch::Contains("| 3 | "));  // the row of both medians and every run
  run_command(tern::test::tool_command("examples/tern-bench ") + model + " --sessions 2 -o json 2>/dev/null", &st);
  CHECK(WEXITSTATUS(st) == 2);
}

TEST_CASE("tern-bench: a routing model measures prefill and generation (its first call whole, then one token a call)",
          "[session][cli]") {
  const std::string model = converted("routing_only");
  int st;
  std::string out = run_command(tern::test::tool_command("examples/tern-bench ") + model +
                                    " -p 32 -n 4 -r 1 -o json 2>/dev/null",
                                &st);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("\"test\": \"pp32\", \"backend\": \"cpu\""));
  CHECK_THAT(out, Catch::Contains("{\"test\": \"tg4\", \"backend\": \"cpu\""));
  CHECK_THAT(out, !Catch::Contains("skipped"));
}

TEST_CASE("status: a Result made from an OK status is an internal error", "[status]") {
  Result<int> made_from_ok = Status::Ok();
  REQUIRE_FALSE(made_from_ok.ok());
  CHECK(made_from_ok.status().code() == TERN_INTERNAL_ERROR);
  CHECK_THAT(made_from_ok.status().message(), Catch::Contains("internal error"));
  CHECK(std::string(tern_status_string(TERN_INTERNAL_ERROR)) == "internal error");
}

TEST_CASE("status: TERN_ASSIGN_OR_RETURN assigns the value or returns the error", "[status]") {
  Result<int> ok = quarter(12);
  REQUIRE(ok.ok());
  CHECK(ok.value() == 3);

  Result<int> first_fails = quarter(7);
  REQUIRE_FALSE(first_fails.ok());
  CHECK(first_fails.status().code() == TERN_INVALID_ARGUMENT);
  CHECK(first_fails.status().message() == "7 is odd");

  Result<int> second_fails = quarter(6);
  REQUIRE_FALSE(second_fails.ok());
  CHECK(second_fails.status().message() == "3 is odd");

  int out = -1;
  CHECK(check_quarter(20, &out).ok());
  CHECK(out == 5);
  out = -1;
  Status failed = check_quarter(10, &out);
  CHECK(failed.code() == TERN_INVALID_ARGUMENT);
  CHECK(failed.message() == "5 is odd");
  CHECK(out == -1);
}
