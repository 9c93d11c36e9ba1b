// SPDX-License-Identifier: MIT
// Two SIGINTs in quick succession, as `timeout -s INT` sends them (to the child, then to its process group), while
// the output's temporary exists: tern-convert and tern-run --logits-out leave no *.tmp-* file behind, and the
// destination holds either what was there before or the whole new file, never part of one.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "run_tool.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

constexpr int kRuns = 100;

size_t temporaries(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}

struct Tally {
  int interrupted_with_temporary = 0;  // the signals were sent while a temporary existed and ended the process
  int finished = 0;                    // the tool wrote its file before the signals reached it
};

// Runs `binary args` kRuns times with `dest` holding "previous" first. Each run is watched until a temporary
// appears in `dir` (or the tool exits), then sent SIGINT twice. `complete` is the whole new file's bytes.
Tally interrupt_runs(const std::string& binary, const std::vector<std::string>& args, const std::string& dir,
                     const std::string& dest, const std::string& complete) {
  Tally tally;
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  for (int i = 0; i < kRuns; ++i) {
    INFO("run " << i);
    tern::test::write_file(dest, "previous");
    const pid_t pid = tern::test::spawn_tool(binary, args, out, err);
    bool seen = false;
    while (!tern::test::has_exited(pid)) {
      if (temporaries(dir) > 0) {
        seen = true;
        break;
      }
      usleep(20);
    }
    if (seen) {
      kill(pid, SIGINT);
      kill(pid, SIGINT);
    }
    const tern::test::ToolRun r = tern::test::wait_for_tool(pid, out, err);
    INFO("stderr: " << r.err);
    REQUIRE_FALSE(r.timed_out);
    CHECK(temporaries(dir) == 0);
    for (const auto& e : fs::directory_iterator(dir))  // so that one failure does not trigger the next run's signals
      if (e.path().filename().string().find(".tmp-") != std::string::npos) fs::remove(e.path());
    const std::string now = tern::test::read_file(dest);
    CHECK((now == "previous" || now == complete));
    if (r.signal == SIGINT) {
      tally.interrupted_with_temporary += seen;
    } else {
      CHECK(r.exit_code == 0);
      CHECK(now == complete);
      ++tally.finished;
    }
  }
  return tally;
}

}  // namespace

TEST_CASE("signals: SIGINT twice during tern-convert leaves no temporary and the previous file", "[cli][signals]") {
  const std::string convert = std::string(TERN_BINARY_DIR) + "/converter/tern-convert";
  const std::string model_dir = std::string(TERN_SOURCE_DIR) + "/examples/models/kjv-byte";
  const std::string reference = tern::test::scratch_dir("signals_convert_reference") + "/model.tern";
  REQUIRE(tern::test::run_tool(convert, {model_dir, "-o", reference, "--quiet"}, tern::test::scratch_dir("signals_ref"))
              .exit_code == 0);
  const std::string dir = tern::test::scratch_dir("signals_convert"), dest = dir + "/model.tern";
  const Tally t = interrupt_runs(convert, {model_dir, "-o", dest, "--quiet"}, dir, dest, tern::test::read_file(reference));
  INFO(t.interrupted_with_temporary << " runs interrupted with a temporary, " << t.finished << " finished first");
  CHECK(t.interrupted_with_temporary > 0);  // the signals did reach conversions in the middle of writing
}

TEST_CASE("signals: SIGINT twice during tern-run --logits-out leaves no temporary and the previous file", "[cli][signals]") {
  const std::string run = std::string(TERN_BINARY_DIR) + "/examples/tern-run";
  const std::string model = tern::test::convert_golden("pre_tied_learned_gelu", "signals_run_model");
  REQUIRE(!model.empty());
  const std::string ids = tern::test::scratch_dir("signals_run_ids") + "/ids.json";
  std::string text = "[0";
  for (int i = 1; i < 64; ++i) text += "," + std::to_string(i % 256);
  tern::test::write_file(ids, text + "]");
  const std::string reference = tern::test::scratch_dir("signals_run_reference") + "/l.npy";
  // Two threads where there are two: the second signal may then reach the pool's thread, not the one cleaning up.
  const std::string threads = std::thread::hardware_concurrency() >= 2 ? "2" : "1";
  const std::vector<std::string> common = {model, "--ids", ids, "--threads", threads, "--logits-out"};
  std::vector<std::string> args = common;
  args.push_back(reference);
  REQUIRE(tern::test::run_tool(run, args, tern::test::scratch_dir("signals_run_ref")).exit_code == 0);
  const std::string dir = tern::test::scratch_dir("signals_run"), dest = dir + "/l.npy";
  args = common;
  args.push_back(dest);
  const Tally t = interrupt_runs(run, args, dir, dest, tern::test::read_file(reference));
  INFO(t.interrupted_with_temporary << " runs interrupted with a temporary, " << t.finished << " finished first");
  CHECK(t.interrupted_with_temporary + t.finished == kRuns);
}
