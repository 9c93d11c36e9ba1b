// SPDX-License-Identifier: MIT
// Resource limits: a session that cannot fit its memory budget (or, without one, the machine) fails at creation
// with the planner's numbers, before allocating what does not fit; streaming state never outgrows its plan.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "convert.h"
#include "op_graph.h"
#include "run_tool.h"
#include "tern/tern.h"
#include "test_support.h"

namespace {

tern_model* load_golden(const std::string& name) {
  const std::string out = tern::test::scratch_dir("budget_" + name) + "/model.tern";
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  tern::Status st = tern::convert::convert_checkpoint(tern::test::source_path("tests/goldens/" + name), out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

struct Created {
  tern_status status;
  std::string message;
  tern_session* session;
};

Created create(const tern_model* model, int64_t max_tokens, uint64_t budget) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  so.max_tokens = max_tokens;
  so.memory_budget_bytes = budget;
  tern_session* s = nullptr;
  tern_status st = tern_session_create(model, &so, &s);
  return {st, st == TERN_OK ? "" : tern_last_error(), s};
}

// ids -> EMBEDDING [64, 3 * 16] -> dense ATTENTION (2 heads of 8, no positions), with no context limit: every token
// keeps its key and value, 2 * 16 floats = 128 bytes of state, for as long as the session holds it.
constexpr uint64_t kDenseStatePerToken = 2 * 16 * sizeof(float);
tern_model* dense_model_without_context_limit() {
  namespace fb = tern::fb;
  tern::test::OpGraph g = tern::test::start_graph(64, 3 * 16, 7);
  const int32_t y = g.graph.add_value("y", fb::DType::F32, 16).value();
  fb::AttentionParamsT p;
  p.heads = 2;
  p.head_dim = 8;
  p.scale = 0.35f;
  p.kind = tern::test::backend_attention_kinds()[0].fb;  // dense
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
  return tern::test::finish_and_load(g, y, "budget_dense_no_limit", 0);
}

uint64_t total(const tern_memory_plan& p) { return p.packed_weight_bytes + p.arena_bytes + p.state_bytes; }

uint64_t peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return uint64_t(usage.ru_maxrss) * 1024;
}

}  // namespace

TEST_CASE("memory budget: options_init leaves no budget", "[budget]") {
  tern_session_options so;
  so.memory_budget_bytes = 123;
  tern_session_options_init(&so);
  CHECK(so.memory_budget_bytes == 0);
}

TEST_CASE("memory budget: exactly what the session allocates fits, one byte less fails with the numbers", "[budget]") {
  tern_model* model = load_golden("pre_tied_learned_gelu");
  Created free_run = create(model, 0, 0);
  REQUIRE(free_run.status == TERN_OK);
  tern_memory_plan mem;
  REQUIRE(tern_session_memory(free_run.session, &mem) == TERN_OK);
  tern_session_free(free_run.session);
  const uint64_t need = total(mem);

  Created fits = create(model, 0, need);
  INFO(fits.message);
  REQUIRE(fits.status == TERN_OK);
  tern_memory_plan again;
  REQUIRE(tern_session_memory(fits.session, &again) == TERN_OK);
  CHECK(total(again) == need);
  tern_session_free(fits.session);

  Created short_by_one = create(model, 0, need - 1);
  INFO(short_by_one.message);
  CHECK(short_by_one.status == TERN_OUT_OF_MEMORY);
  CHECK(short_by_one.session == nullptr);
  CHECK_THAT(short_by_one.message, Catch::Contains("needs " + std::to_string(need) + " bytes"));
  CHECK_THAT(short_by_one.message, Catch::Contains("memory budget of " + std::to_string(need - 1) + " bytes"));
  CHECK_THAT(short_by_one.message, Catch::Contains("packed weights " + std::to_string(mem.packed_weight_bytes)));
  CHECK_THAT(short_by_one.message, Catch::Contains("state " + std::to_string(mem.state_bytes)));
  CHECK_THAT(short_by_one.message, Catch::Contains("mapped from its file"));
  tern_model_free(model);
}

TEST_CASE("memory budget: a dense state too large fails before anything is allocated", "[budget]") {
  tern_model* model = load_golden("pre_tied_learned_gelu");  // dense: every token's keys and values are kept
  const uint64_t rss_before = peak_rss_bytes();

  // 2 layers x (K + V) x 64 floats per token: 1 GiB of state for 2^20 tokens, against a 64 MiB budget.
  Created budgeted = create(model, int64_t(1) << 20, uint64_t(64) << 20);
  INFO(budgeted.message);
  CHECK(budgeted.status == TERN_OUT_OF_MEMORY);
  CHECK_THAT(budgeted.message, Catch::Contains("before packing weights"));
  CHECK_THAT(budgeted.message, Catch::Contains("state 1073741824 for max_tokens 1048576"));

  // No budget, absurd max_tokens: 256 GiB of state is more than this machine has; it fails the same way
  // instead of being attempted (and zero-filled, or killed).
  Created absurd = create(model, int64_t(1) << 28, 0);
  INFO(absurd.message);
  CHECK(absurd.status == TERN_OUT_OF_MEMORY);
  CHECK_THAT(absurd.message, Catch::Contains("this machine's memory"));
  CHECK_THAT(absurd.message, Catch::Contains("state 274877906944 for max_tokens 268435456"));

  CHECK(peak_rss_bytes() < rss_before + (uint64_t(32) << 20));
  tern_model_free(model);
}

TEST_CASE("memory budget: Transformer-XL's position tables count before they are computed", "[budget][transfo_xl]") {
  // transfo_xl_plain: 3 layers, mem_len 20, d 32, 2 heads of 12. A call of max_batch tokens reads distances
  // 0 .. 20 + max_batch - 1; per distance and layer the kernel keeps r(p) [24] and v.r(p) [2] and computes pe(p) [32].
  tern_model* model = load_golden("transfo_xl_plain");
  const uint64_t rss_before = peak_rss_bytes();
  const int64_t max_tokens = int64_t(1) << 26;  // no context limit: max_batch follows max_tokens
  const uint64_t tables = 3ull * uint64_t(20 + max_tokens) * (24 + 2 + 32) * sizeof(float);
  Created budgeted = create(model, max_tokens, uint64_t(1) << 30);
  INFO(budgeted.message);
  CHECK(budgeted.status == TERN_OUT_OF_MEMORY);
  CHECK_THAT(budgeted.message, Catch::Contains("tables computed at creation " + std::to_string(tables)));
  CHECK_THAT(budgeted.message, Catch::Contains("for max_batch " + std::to_string(max_tokens)));
  // Without a budget, 2^31 tokens per call: terabytes of tables, more than any machine here.
  Created absurd = create(model, int64_t(1) << 31, 0);
  INFO(absurd.message);
  CHECK(absurd.status == TERN_OUT_OF_MEMORY);
  CHECK_THAT(absurd.message, Catch::Contains("tables computed at creation"));
  CHECK(peak_rss_bytes() < rss_before + (uint64_t(32) << 20));
  // A streaming session of as many tokens in calls of 16 needs tables for 16-token calls only, and fits.
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  so.max_tokens = max_tokens;
  so.max_batch = 16;
  so.memory_budget_bytes = uint64_t(64) << 20;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  CHECK(tern_session_create(model, &so, &s) == TERN_OK);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("memory budget: a sliding-window session of a million tokens fits a small budget and runs", "[budget]") {
  tern_model* model = load_golden("sliding_w64");
  Created s = create(model, 1'000'000, uint64_t(16) << 20);
  INFO(s.message);
  REQUIRE(s.status == TERN_OK);
  tern_memory_plan mem;
  REQUIRE(tern_session_memory(s.session, &mem) == TERN_OK);
  CHECK(total(mem) <= uint64_t(16) << 20);
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i % 64);
  for (int rep = 0; rep < 10; ++rep) CHECK(tern_session_append(s.session, ids.data(), int64_t(ids.size()), nullptr) == TERN_OK);
  tern_session_free(s.session);
  tern_model_free(model);
}

TEST_CASE("memory budget: a window or block wider than the session holds allocates only max_tokens keys", "[budget]") {
  // Found by fuzzing: a sliding window of 587 M keys in a session of 8 tokens sized its ring by the window.
  for (const char* name : {"sliding_w64", "fixed_merged"}) {  // window 64; block 64 with 8 summary keys
    INFO(name);
    tern_model* model = load_golden(name);
    Created s = create(model, 16, 0);
    REQUIRE(s.status == TERN_OK);
    tern_memory_plan mem, plan;
    REQUIRE(tern_session_memory(s.session, &mem) == TERN_OK);
    REQUIRE(tern_session_plan(s.session, 16, &plan) == TERN_OK);
    CHECK(mem.state_bytes == plan.state_bytes);  // 16 keys per head and layer, not 63 (+ 8 summaries)
    std::vector<int32_t> ids(16, 5);
    std::vector<float> logits(16 * size_t(tern_session_vocab_size(s.session)));
    CHECK(tern_session_forward(s.session, ids.data(), 16, logits.data()) == TERN_OK);
    tern_session_free(s.session);
    tern_model_free(model);
  }
}

TEST_CASE("tern-run --memory-budget: a budget too small fails with the planner's numbers", "[budget][cli]") {
  const std::string dir = tern::test::scratch_dir("budget_cli");
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(tern::convert::convert_checkpoint(tern::test::source_path("tests/goldens/tiny_f16"), dir + "/m.tern", opts).ok());
  const std::string run = tern::test::tool_command("examples/tern-run ") + dir + "/m.tern --plan 8 ";
  auto exit_code = [](const std::string& cmd) {
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  CHECK(exit_code(run + "--memory-budget 100000000 >/dev/null 2>&1") == 0);
  CHECK(exit_code(run + "--memory-budget 1000 >/dev/null 2>" + dir + "/err.txt") == 1);
  CHECK_THAT(tern::test::read_file(dir + "/err.txt"), Catch::Contains("more than --memory-budget 1000 bytes"));
}

TEST_CASE("packed weights: each tensor's mapped pages go once it is packed, so creation never holds both copies",
          "[budget][cli]") {
  // 24 linears of [1024, 1024] (96 MiB of float32 weights), which XNNPACK packs into its own copy. Were the mapped
  // pages dropped only after every kernel is built, the session's creation would hold the file's pages and the packed
  // copies together, twice the weights; dropped as each tensor is packed, it holds one copy and a layer. The peak is
  // the process's own (tern-run's VmHWM), so it runs in a fresh process.
  constexpr int64_t kWidth = 1024, kLayers = 24;
  tern::test::OpGraph g = tern::test::start_graph(8, kWidth, 3);
  int32_t x = g.x;
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string name = "linear" + std::to_string(l);
    const int32_t w = tern::test::add_constant(g, name + ".w", {kWidth, kWidth},
                                               tern::test::random_floats(size_t(kWidth * kWidth), uint32_t(l), -0.03f, 0.03f));
    const int32_t y = g.graph.add_value(name, tern::fb::DType::F32, kWidth).value();
    REQUIRE(g.graph.add_op(tern::fb::OpCode::LINEAR, name, {x}, {y}, {w, -1}, tern::fb::LinearParamsT{}).ok());
    x = y;
  }
  tern_model_free(tern::test::finish_and_load(g, x, "packed_pages", 16));
  // finish_and_load's file (test_support's scratch_dir layout, which a second call would empty).
  const std::string model_path = std::string(TERN_BINARY_DIR) + "/test-scratch/op_graph_packed_pages-" +
                                 std::to_string(::getpid()) + "/model.tern";
  const std::string dir = tern::test::scratch_dir("packed_pages_cli");
  const std::string cmd = tern::test::tool_command("examples/tern-run ") + model_path + " --plan 8 --threads 1 >" +
                          dir + "/out.txt 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string out = tern::test::read_file(dir + "/out.txt");
  const size_t at = out.find("peak memory: ");
  REQUIRE(at != std::string::npos);
  const double mib = std::strtod(out.c_str() + at + 13, nullptr);
  INFO(out);
  REQUIRE(out.find(" MiB", at) != std::string::npos);  // not GiB: below 1 GiB either way
  const double weights_mib = double(kLayers * kWidth * kWidth * 4) / double(1 << 20);
  CHECK(mib > weights_mib);               // the packed copy is resident
  CHECK(mib < weights_mib * 1.4 + 24.0);  // the mapped one is not, beyond a layer or two (and the process's own ~15 MiB)
}

TEST_CASE("memory budget: without max_tokens, a model without a context limit takes the most tokens that fit",
          "[budget][context]") {
  tern_model* model = dense_model_without_context_limit();
  const uint64_t budget = uint64_t(4) << 20;
  Created s = create(model, 0, budget);
  INFO(s.message);
  REQUIRE(s.status == TERN_OK);
  const int64_t max_tokens = tern_session_max_tokens(s.session);
  tern_memory_plan mem, next;
  REQUIRE(tern_session_memory(s.session, &mem) == TERN_OK);
  REQUIRE(tern_session_plan(s.session, max_tokens + 1, &next) == TERN_OK);
  INFO("max_tokens " << max_tokens << ", allocated " << total(mem));
  CHECK(max_tokens > 4096);  // 4 MiB holds tens of thousands of 128-byte tokens
  CHECK(max_tokens < int64_t(budget / kDenseStatePerToken));
  CHECK(mem.n_tokens == 4096);  // max_batch: capped, not the fitted context
  CHECK(mem.state_bytes == uint64_t(max_tokens) * kDenseStatePerToken);
  CHECK(next.state_bytes == mem.state_bytes + kDenseStatePerToken);
  // What was allocated fits; one token more of state would not.
  CHECK(total(mem) <= budget);
  CHECK(mem.packed_weight_bytes + mem.arena_bytes + next.state_bytes > budget);
  const std::string note = tern_session_context_note(s.session);
  CHECK(note == "max_tokens " + std::to_string(max_tokens) + ": the largest whose plan (" + std::to_string(total(mem)) +
                    " bytes, calls of up to 4096 tokens) fits its memory budget of " + std::to_string(budget) +
                    " bytes (the model has no context limit)");
  tern_session_free(s.session);

  // The app's max_batch is kept (within the fitted context).
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  so.max_batch = 100;
  so.memory_budget_bytes = budget;
  tern_session* batched = nullptr;
  REQUIRE(tern_session_create(model, &so, &batched) == TERN_OK);
  REQUIRE(tern_session_memory(batched, &mem) == TERN_OK);
  CHECK(mem.n_tokens == 100);
  CHECK(tern_session_max_tokens(batched) > max_tokens);  // a smaller arena leaves more for the state
  tern_session_free(batched);

  // Not even one token: refused with the numbers.
  Created none = create(model, 0, 1000);
  INFO(none.message);
  CHECK(none.status == TERN_OUT_OF_MEMORY);
  CHECK_THAT(none.message, Catch::Contains("no context limit, and not even max_tokens 1 fits"));
  CHECK_THAT(none.message, Catch::Contains("memory budget of 1000 bytes"));
  tern_model_free(model);
}

TEST_CASE("memory budget: an explicit max_tokens that cannot fit is refused at once, naming the largest that fits",
          "[budget][context]") {
  tern_model* model = dense_model_without_context_limit();
  const uint64_t rss_before = peak_rss_bytes();
  const auto start = std::chrono::steady_clock::now();
  const int64_t huge = int64_t(1) << 30;  // 128 GiB of keys and values
  Created s = create(model, huge, uint64_t(1) << 20);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(s.message);
  CHECK(s.status == TERN_OUT_OF_MEMORY);
  CHECK(s.session == nullptr);
  CHECK(seconds < 5.0);
  CHECK(peak_rss_bytes() < rss_before + (uint64_t(32) << 20));
  CHECK_THAT(s.message, Catch::Contains("state " + std::to_string(uint64_t(huge) * kDenseStatePerToken) +
                                        " for max_tokens " + std::to_string(huge)));
  CHECK_THAT(s.message, Catch::Contains("memory budget of 1048576 bytes"));
  const std::string marker = "the largest max_tokens that could fit is ";
  const size_t at = s.message.find(marker);
  REQUIRE(at != std::string::npos);
  const int64_t largest = std::strtoll(s.message.c_str() + at + marker.size(), nullptr, 10);
  CHECK(largest > 0);
  CHECK(largest < int64_t((uint64_t(1) << 20) / kDenseStatePerToken));
  // One token more is refused by the same check before allocating; at `largest` that check passes (the exact one
  // after packing, which knows the kernels' scratch, may still refuse).
  Created over = create(model, largest + 1, uint64_t(1) << 20);
  INFO(over.message);
  CHECK(over.status == TERN_OUT_OF_MEMORY);
  CHECK_THAT(over.message, Catch::Contains("before packing weights"));
  CHECK_THAT(over.message, Catch::Contains("could fit is " + std::to_string(largest) + " "));
  Created at_largest = create(model, largest, uint64_t(1) << 20);
  INFO(at_largest.message);
  CHECK_THAT(at_largest.message, !Catch::Contains("before packing weights"));
  tern_session_free(at_largest.session);
  tern_model_free(model);
}

TEST_CASE("memory budget: without a budget, a context is fitted to half of MemAvailable", "[budget][context]") {
  // Transformer-XL's memory is bounded (mem_len per layer): every max_tokens fits, up to the 2^31 positions.
  tern_model* model = load_golden("transfo_xl_plain");
  Created s = create(model, 0, 0);
  INFO(s.message);
  REQUIRE(s.status == TERN_OK);
  CHECK(tern_session_max_tokens(s.session) == int64_t(1) << 31);
  tern_memory_plan mem;
  REQUIRE(tern_session_memory(s.session, &mem) == TERN_OK);
  CHECK(mem.n_tokens == 4096);
  const std::string note = tern_session_context_note(s.session);
  CHECK_THAT(note, Catch::StartsWith("max_tokens 2147483648: the most positions a sequence can reach"));
  CHECK_THAT(note, Catch::Contains("fits half of MemAvailable ("));
  tern_session_free(s.session);

  // The app's max_tokens, and the model's context, say so.
  Created set = create(model, 64, 0);
  REQUIRE(set.status == TERN_OK);
  CHECK(std::string(tern_session_context_note(set.session)) == "max_tokens 64: set by the app");
  tern_session_free(set.session);
  tern_model_free(model);
  tern_model* bounded = load_golden("pre_tied_learned_gelu");
  Created own = create(bounded, 0, 0);
  REQUIRE(own.status == TERN_OK);
  tern_model_info info;
  REQUIRE(tern_model_get_info(bounded, &info) == TERN_OK);
  CHECK(std::string(tern_session_context_note(own.session)) ==
        "max_tokens " + std::to_string(info.max_context) + ": the model's context");
  tern_session_free(own.session);
  tern_model_free(bounded);
}

TEST_CASE("tern-run --plan: a model without a context limit shows the context the session chose", "[budget][cli]") {
  const std::string dir = tern::test::scratch_dir("budget_cli_context");
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(tern::convert::convert_checkpoint(tern::test::source_path("tests/goldens/transfo_xl_plain"), dir + "/m.tern", opts).ok());
  const std::string cmd = tern::test::tool_command("examples/tern-run ") + dir + "/m.tern --plan 8 --memory-budget 100000000 >" +
                          dir + "/out.txt 2>" + dir + "/err.txt";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string why = "max_tokens 2147483648: the most positions a sequence can reach";
  CHECK_THAT(tern::test::read_file(dir + "/out.txt"), Catch::Contains(why));
  CHECK_THAT(tern::test::read_file(dir + "/err.txt"), Catch::Contains("context: " + why));
  CHECK_THAT(tern::test::read_file(dir + "/err.txt"), Catch::Contains("its memory budget of 100000000 bytes"));
}
