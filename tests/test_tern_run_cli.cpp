// SPDX-License-Identifier: MIT
// tern-run (and tern-bench's shared pieces) through the built binary, under a 20 s timeout and a 4 GiB address-space
// limit (tests/support/run_tool.h): every bad command line, path and option grid gives exit status 2 (the command
// line) or 1 (what it names) and one line naming the flag; --json prints one parseable object; --score's bits per
// byte match windows computed here through the C API.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "npy.h"
#include "run_tool.h"
#include "tern/tern.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kRun = std::string(TERN_BINARY_DIR) + "/examples/tern-run";
const std::string kBench = std::string(TERN_BINARY_DIR) + "/examples/tern-bench";

std::string model_of(const std::string& golden) {
  const std::string out = tern::test::convert_golden(golden, "tern_run_cli_model_" + golden);
  REQUIRE(!out.empty());
  return out;
}

// Byte-level, learned positions, context 1024.
const std::string& byte_model() {
  static const std::string m = model_of("pre_tied_learned_gelu");
  return m;
}

tern::test::ToolRun run(const std::vector<std::string>& args, const std::string& binary = kRun,
                        const tern::test::ToolLimits& limits = {}) {
  static int count = 0;
  const std::string dir = tern::test::scratch_dir("tern_run_cli_" + std::to_string(count++));
  return tern::test::run_tool(binary, args, dir, limits);
}

// Failed cleanly: the status, and stderr's last line, the only error there, holding `expected`. An error found
// before any work is the only line (the notices of a loaded model come after the checks).
void expect_error(const tern::test::ToolRun& r, int status, const std::string& expected, bool only_line = true) {
  INFO("stderr: " << r.err << "stdout: " << r.out);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == 0);
  CHECK(r.exit_code == status);
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  const size_t cut = r.err.rfind('\n', r.err.size() - 2);
  const std::string last = cut == std::string::npos ? r.err : r.err.substr(cut + 1);
  if (only_line) CHECK(last == r.err);
  CHECK(r.err.find("error: ") == r.err.size() - last.size() + last.find("error: "));
  CHECK_THAT(last, Catch::StartsWith("tern-run: error: ") || Catch::StartsWith("tern-bench: error: "));
  CHECK_THAT(last, Catch::Contains(expected));
}

std::vector<std::string> with_model(std::vector<std::string> args) {
  args.insert(args.begin(), byte_model());
  return args;
}

json json_of(const tern::test::ToolRun& r) {
  INFO("stderr: " << r.err << "stdout: " << r.out);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.exit_code == 0);
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  for (char c : r.out) REQUIRE(static_cast<unsigned char>(c) < 0x80);
  return json::parse(r.out);
}

std::string scratch_file(const std::string& name, const std::string& bytes) {
  const std::string path = tern::test::scratch_dir("tern_run_cli_files_" + name) + "/" + name;
  tern::test::write_file(path, bytes);
  return path;
}

std::string fifo(const std::string& name) {
  const std::string path = tern::test::scratch_dir("tern_run_cli_fifo_" + name) + "/fifo";
  REQUIRE(mkfifo(path.c_str(), 0644) == 0);
  return path;
}

std::string text_of(size_t n) {
  std::string s;
  const std::string verse = "In the beginning God created the heaven and the earth. And the earth was without form. ";
  while (s.size() < n) s += verse;
  return s.substr(0, n);
}

// Bits per byte of `text` in windows of `window` bytes starting every `stride` bytes (the last one ending at the
// text's end), computed per byte: byte j > 0 is predicted by the first window that ends after it, from a fresh
// forward pass of that window through the C API.
double windowed_bits_per_byte(const std::string& model_path, const std::string& text, int64_t window, int64_t stride) {
  const int64_t n = int64_t(text.size());
  window = std::min(window, n);
  tern_model* m = nullptr;
  REQUIRE(tern_model_load(model_path.c_str(), &m) == TERN_OK);
  tern_session_options so;
  tern_session_options_init(&so);
  so.max_tokens = window;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(m, &so, &s) == TERN_OK);
  const int64_t vocab = tern_session_vocab_size(s);
  std::vector<float> logits(size_t(window * vocab));
  int64_t loaded = -1;  // the window whose logits are in `logits`
  double nll = 0;
  for (int64_t j = 1; j < n; ++j) {
    int64_t k = 0, start = 0;
    for (;; ++k) {
      start = std::min(k * stride, n - window);
      if (j < start + window) break;
    }
    if (k != loaded) {
      std::vector<int32_t> ids(static_cast<size_t>(window));
      for (int64_t i = 0; i < window; ++i) ids[size_t(i)] = static_cast<unsigned char>(text[size_t(start + i)]);
      REQUIRE(tern_session_forward(s, ids.data(), window, logits.data()) == TERN_OK);
      loaded = k;
    }
    const float* row = logits.data() + (j - start - 1) * vocab;
    double mx = row[0], sum = 0;
    for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, double(row[v]));
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
    nll += std::log(sum) + mx - double(row[static_cast<unsigned char>(text[size_t(j)])]);
  }
  tern_session_free(s);
  tern_model_free(m);
  return nll / std::log(2.0) / double(n - 1);
}

}  // namespace

TEST_CASE("tern-run: bad command lines give status 2 and one line naming the flag", "[cli][tern_run]") {
  expect_error(run(with_model({"--plan", "8", "--foo"})), 2, "unknown option --foo; see --help");
  expect_error(run(with_model({"--score"})), 2, "--score needs a value");
  expect_error(run(with_model({"--score", "--segment", "5"})), 2, "--score needs a value (got the option --segment)");
  expect_error(run(with_model({"--plan", "8", "--threads", "banana"})), 2, "--threads must be an integer in [0, 1024], got 'banana'");
  expect_error(run(with_model({"--plan", "8", "--top-p", "2"})), 2, "--top-p must be a number in");
  expect_error(run(with_model({"--score", "a", "--score", "b"})), 2, "--score is given twice ('a' and 'b')");
  expect_error(run(with_model({"--prompt", "x", "-n", "3", "--tokens", "4"})), 2, "-n and --tokens are the same option");
  expect_error(run(with_model({"--json=1", "--plan", "8"})), 2, "--json takes no value");
  expect_error(run(with_model({})), 2, "nothing to do: give --prompt, --score, --ids or --plan");
  expect_error(run({"--plan", "8"}), 2, "no model file given");
  expect_error(run({byte_model(), byte_model(), "--plan", "8"}), 2, "expected one model file, got 2 arguments");
  expect_error(run(with_model({"--perplexity"})), 2, "--perplexity needs --ids");
  expect_error(run(with_model({"--logits-out", "x.npy"})), 2, "--logits-out needs --ids");
  expect_error(run(with_model({"--score", "x", "--stride", "4", "--segment", "8"})), 2,
               "--stride (windows) and --segment (streamed through the state) are two ways to score; give one");
  expect_error(run(with_model({"--plan", "8", "--stride", "4"})), 2, "--stride needs --score");
  expect_error(run(with_model({"--prompt", "x", "--context", "stop", "--keep", "4"})), 2,
               "--keep is what --context slide or shift keeps; it does nothing with --context stop");
  expect_error(run(with_model({"--prompt", "x", "--context", "fast"})), 2, "--context must be stop, slide, shift or sinks, got 'fast'");
  expect_error(run(with_model({"--prompt", "x", "--sinks", "4"})), 2, "--sinks needs --window W");
  expect_error(run(with_model({"--prompt", "x", "--context", "sinks"})), 2, "--context sinks needs --window W");
  expect_error(run(with_model({"--prompt", "x", "--window", "8", "--context", "slide"})), 2,
               "it goes with --context sinks, not --context slide");
  expect_error(run(with_model({"--prompt", "x", "--window", "8", "--max-tokens", "64"})), 2,
               "--max-tokens with --window: the session holds --sinks + --window = 8 tokens");
  expect_error(run(with_model({"--plan", "8", "--window", "8"})), 2, "--window (attention sinks) is for generation");
  expect_error(run(with_model({"--prompt", "x", "--window", "0"})), 2, "--window must be an integer in [1, ");
  expect_error(run(with_model({"--plan", "99999999999"})), 2, "--plan: '99999999999' is not a token count in [1, 2147483648]");
  expect_error(run(with_model({"--plan", "8,0"})), 2, "--plan: '0' is not a token count");
  expect_error(run(with_model({"--plan", "2147483649"})), 2, "--plan: '2147483649' is not a token count");
  expect_error(run(with_model({"--plan", "8", "--max-batch", "100", "--max-tokens", "50"})), 2,
               "--max-batch 100 is more than --max-tokens 50");
}

TEST_CASE("tern-run: paths are checked before any work, without blocking or reading without end", "[cli][tern_run]") {
  const std::string text = scratch_file("ok.txt", text_of(300));
  const std::string dir = tern::test::scratch_dir("tern_run_cli_paths");
  // The model: a FIFO with no writer used to hang in the loader's open.
  const std::string model_fifo = fifo("model");
  expect_error(run({model_fifo, "--plan", "8"}), 1, "'" + model_fifo + "' is a FIFO, not a regular file");
  expect_error(run({dir, "--plan", "8"}), 1, "'" + dir + "' is a directory, not a regular file");
  expect_error(run({dir + "/missing.tern", "--plan", "8"}), 1, "cannot open '" + dir + "/missing.tern'");
  // The library's loader says the same, at once.
  tern_model* m = nullptr;
  CHECK(tern_model_load(model_fifo.c_str(), &m) == TERN_IO_ERROR);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("is a FIFO, not a regular file"));
  // --score and --ids.
  const std::string f = fifo("inputs");
  expect_error(run(with_model({"--score", f})), 1, "--score: '" + f + "' is a FIFO, not a regular file");
  expect_error(run(with_model({"--score", "/dev/zero"})), 1, "--score: '/dev/zero' is a character device, not a regular file");
  expect_error(run(with_model({"--score", dir})), 1, "--score: '" + dir + "' is a directory, not a regular file");
  expect_error(run(with_model({"--score", scratch_file("one.txt", "x")})), 1, "holds 1 bytes; scoring needs at least 2");
  expect_error(run(with_model({"--ids", f})), 1, "--ids: '" + f + "' is a FIFO, not a regular file");
  expect_error(run(with_model({"--ids", "/dev/zero"})), 1, "--ids: '/dev/zero' is a character device, not a regular file");
  const std::string big = dir + "/big.json";
  tern::test::write_file(big, "[0]");
  fs::resize_file(big, (uint64_t(64) << 20) + 1);  // sparse: reads as zeros past "[0]"
  expect_error(run(with_model({"--ids", big})), 1, "--ids: '" + big + "' holds more than 64 MiB, too large for a JSON array of token ids");
  expect_error(run(with_model({"--ids", scratch_file("bad.json", "[1, 2.5]")})), 1, "element 1 is not a 32-bit integer");
  expect_error(run(with_model({"--ids", scratch_file("empty.json", "[]")})), 1, "holds no token ids");
  // --logits-out: never a device, a FIFO or a directory; its directory must exist.
  const std::string ids = scratch_file("ids.json", "[1, 2, 3]");
  expect_error(run(with_model({"--ids", ids, "--logits-out", "/dev/null"})), 1,
               "--logits-out: '/dev/null' is a character device, not a regular file; refusing to replace it");
  expect_error(run(with_model({"--ids", ids, "--logits-out", f})), 1, "is a FIFO, not a regular file; refusing to replace it");
  expect_error(run(with_model({"--ids", ids, "--logits-out", dir})), 1, "is a directory, not a regular file; refusing to replace it");
  expect_error(run(with_model({"--ids", ids, "--logits-out", dir + "/no/such/dir/l.npy"})), 1,
               "--logits-out: cannot write in '" + dir + "/no/such/dir'");
}

TEST_CASE("tern-run: the option grid is checked against the model before any work", "[cli][tern_run]") {
  const std::string text = scratch_file("grid.txt", text_of(300));
  expect_error(run(with_model({"--score", text, "--max-tokens", "64", "--stride", "64"})), 1,
               "--stride 64 must be less than the window of 64 tokens (--max-tokens)");
  expect_error(run(with_model({"--score", text, "--stride", "300"})), 1,
               "--stride 300 must be less than the window of 300 tokens (the file's length)");
  expect_error(run(with_model({"--score", text, "--stride", "0"})), 2, "--stride must be an integer in [1, ");
  expect_error(run(with_model({"--score", text, "--max-tokens", "1"})), 1, "--score needs windows of at least 2 tokens; --max-tokens is 1");
  expect_error(run(with_model({"--prompt", "And God said", "--max-tokens", "1"})), 1, "--max-tokens 1 is less than the prompt's 12 tokens");
  expect_error(run(with_model({"--prompt", "A", "--max-tokens", "1"})), 1, "--context slide needs a context of at least 2 tokens");
  expect_error(run(with_model({"--prompt", "A", "--keep", "1024"})), 1, "--keep 1024 must be less than the context of 1024 tokens");
  expect_error(run(with_model({"--score", text, "--max-batch", "100"})), 1, "--max-batch 100 is less than --score's window of 300 tokens");
  // The library's session options come back as the flags that set them.
  expect_error(run(with_model({"--prompt", "A", "--max-tokens", "100000"})), 1, "--max-tokens 100000 exceeds the model's");
  expect_error(run(with_model({"--prompt", "A", "--max-batch", "64", "--memory-budget", "1000"})), 1,
               "for --max-batch 64 + state");
  expect_error(run(with_model({"--prompt", "A", "--memory-budget", "1000"})), 1, "more than --memory-budget 1000 bytes");
  expect_error(run(with_model({"--prompt", "A", "--f16-weights"})), 1, "--f16-weights is a Vulkan option");
  // Sinks rotate cached keys: a model with learned positions is refused, naming the op.
  expect_error(run(with_model({"--prompt", "A", "--sinks", "4", "--window", "8"})), 1, "learned absolute positions");
  expect_error(run(with_model({"--prompt", "A", "--context", "shift"})), 1, "reads no rotary positions", false);
  std::string many = "[0";
  for (int i = 0; i < 1100; ++i) many += ",1";
  expect_error(run(with_model({"--ids", scratch_file("many.json", many + "]")})), 1,
               "--ids: 1101 ids do not fit the session's 1024 tokens (the model's context)");
  expect_error(run(with_model({"--ids", scratch_file("vocab.json", "[1, 256]")})), 1,
               "--ids: element 1 of '");
}

TEST_CASE("tern-run --plan: 2^31 tokens give the planner's numbers, a dense matrix past 2^64 bytes null", "[cli][tern_run]") {
  const json j = json_of(run(with_model({"--plan", "8,2147483648", "--json", "--threads", "1"})));
  REQUIRE(j["plan"].size() == 2);
  CHECK(j["plan"][0]["n"] == 8);
  CHECK(j["plan"][0]["dense_attention_bytes"] == 4 * 8 * 8 * 4);  // 4 heads x 8 x 8 floats
  CHECK(j["plan"][1]["n"] == 2147483648LL);
  CHECK(j["plan"][1]["dense_attention_bytes"].is_null());  // 4 x 2^31 x 2^31 x 4 bytes = 2^66
  CHECK(j["plan"][1]["arena_bytes"].get<uint64_t>() > j["plan"][0]["arena_bytes"].get<uint64_t>());
  CHECK(j["plan"][1]["state_bytes"].get<uint64_t>() == (uint64_t(1) << 31) / 8 * j["plan"][0]["state_bytes"].get<uint64_t>());
}

TEST_CASE("tern-run --score: bits per byte match windows computed through the C API", "[cli][tern_run]") {
  const std::string text = text_of(300), file = scratch_file("score.txt", text);
  struct Pair {
    int64_t window, stride;
  };
  for (const Pair p : {Pair{64, 1}, Pair{64, 32}, Pair{64, 63}, Pair{100, 37}, Pair{1024, 150}, Pair{2, 1}}) {
    INFO("window " << p.window << ", stride " << p.stride);
    std::vector<std::string> args = {"--score", file, "--stride", std::to_string(p.stride), "--json", "--threads", "1"};
    if (p.window < 1024) args.insert(args.end(), {"--max-tokens", std::to_string(p.window)});
    const json j = json_of(run(with_model(args)));
    const double want = windowed_bits_per_byte(byte_model(), text, p.window, p.stride);
    CHECK(j["score"]["mode"] == "windows");
    CHECK(j["score"]["window"] == std::min<int64_t>(p.window, 300));
    CHECK(j["score"]["stride"] == p.stride);
    CHECK(j["score"]["bytes"] == 300);
    CHECK(std::fabs(j["score"]["bits_per_byte"].get<double>() - want) <= 1e-5 * want);
  }
}

TEST_CASE("tern-run --json: one object with the model, backend, threads and each mode's results", "[cli][tern_run]") {
  const std::string ids = scratch_file("json_ids.json", "[5, 9, 200, 3, 77]");
  const json j = json_of(run(with_model({"--prompt", "Tern", "-n", "64", "--temperature", "1", "--top-k", "0",
                                         "--ids", ids, "--perplexity", "--json", "--threads", "1"})));
  CHECK(j["model"] == byte_model());
  CHECK(j["backend"]["name"] == "cpu");
  CHECK(j["threads"] == 1);
  CHECK(j["context"] == 1024);
  const json& g = j["generate"];
  CHECK(g["prompt_tokens"] == 4);
  CHECK(g["prompt_tokens_kept"] == 4);
  CHECK(g["tokens_generated"] == 64);
  CHECK(g["context_policy"] == "slide");
  CHECK(g["keep_tokens"] == 512);
  CHECK(g["refills"] == 0);
  // "text" is the bytes of "ids": valid UTF-8 as it is, any other byte b as U+00bb.
  const std::vector<int> bytes = g["ids"].get<std::vector<int>>();
  const std::string text = g["text"].get<std::string>();
  size_t at = 0;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    const std::string seq = text.substr(i, len);
    i += len;
    REQUIRE(at < bytes.size());
    bool same = at + len <= bytes.size();
    for (size_t k = 0; same && k < len; ++k) same = static_cast<unsigned char>(seq[k]) == bytes[at + k];
    if (same) {  // bytes that were valid UTF-8
      at += len;
      continue;
    }
    REQUIRE(len == 2);  // else one byte that was not, as its code point
    CHECK((((c & 0x1F) << 6) | (static_cast<unsigned char>(seq[1]) & 0x3F)) == bytes[at++]);
  }
  CHECK(at == bytes.size());
  CHECK(j["ids"]["n"] == 5);
  CHECK(j["ids"]["perplexity"].get<double>() > 1.0);
  CHECK(j["peak_rss_bytes"].get<uint64_t>() > 0);
}

TEST_CASE("tern-run --json: a model path that is not UTF-8 comes out escaped, after the work, not as an error", "[cli][tern_run]") {
  // The path's bytes 0xff and 0xe9 are not UTF-8; every string of the JSON reads them as U+00FF and U+00E9.
  const std::string dir = tern::test::scratch_dir("tern_run_cli_latin1");
  const std::string path = dir + "/mod\xff\xe9l.tern";
  fs::copy_file(byte_model(), path, fs::copy_options::overwrite_existing);
  const std::string ids = scratch_file("latin1_ids.json", "[5, 9, 200]");
  const auto r = run({path, "--ids", ids, "--json", "--threads", "1"});
  const json j = json_of(r);
  CHECK(j["model"] == dir + "/mod\u00ff\u00e9l.tern");
  CHECK(j["ids"]["file"] == ids);
  CHECK_THAT(r.out, Catch::Contains("mod\\u00ff\\u00e9l.tern"));
}

TEST_CASE("tern-bench: a test whose ids and logits cannot fit is refused before anything is allocated", "[cli][tern_run]") {
  // tg2147483648 on a model without a context limit (Transformer-XL): 8 GiB of ids, past the 4 GiB address space
  // the tool runs in; pp1073741824: 4 GiB of ids and a row of logits per token.
  if (!tern::test::tool_address_space_limited()) return;
  const std::string xl = model_of("transfo_xl_plain");
  auto r = run({xl, "-p", "0", "-n", "2147483648", "-r", "1"}, kBench);
  expect_error(r, 1, "tg2147483648: its 2147483648 ids and 1 x ", false);
  CHECK_THAT(r.err, Catch::Contains(" float32 logits need 8.00 GiB, more than the address space"));
  r = run({xl, "-p", "1073741824", "-n", "0", "-r", "1"}, kBench);
  expect_error(r, 1, "pp1073741824: its 1073741824 ids and 1073741824 x ", false);
  CHECK_THAT(r.err, Catch::Contains("; ask for fewer tokens"));
}

TEST_CASE("tern-run: a prompt longer than the context keeps its last tokens and says so", "[cli][tern_run]") {
  const std::string prompt = text_of(1100);
  const auto r = run(with_model({"--prompt", prompt, "-n", "4", "--json", "--threads", "1"}));
  const json j = json_of(r);
  CHECK_THAT(r.err, Catch::Contains("tern-run: prompt: 1100 tokens, context 1024: kept the last 1024"));
  CHECK(j["generate"]["prompt_tokens"] == 1100);
  CHECK(j["generate"]["prompt_tokens_kept"] == 1024);
  CHECK(j["generate"]["tokens_generated"] == 4);
}

TEST_CASE("tern-run and tern-bench: thread counts past the hardware and pools that cannot start", "[cli][tern_run]") {
  expect_error(run(with_model({"--plan", "8", "--threads", "1024"})), 2, "--threads 1024 is more than this machine's");
  expect_error(run({byte_model(), "-p", "8", "-n", "0", "-t", "1,1024"}, kBench), 2, "-t 1024 is more than this machine's");
  // pthreadpool waits forever for a worker whose pthread_create failed: with 4 GB stacks under a 4 GiB address
  // space the second thread cannot start, and the session says so instead of hanging.
  if (std::thread::hardware_concurrency() < 2 || !tern::test::tool_address_space_limited()) return;
  tern::test::ToolLimits limits;
  limits.stack = rlim_t(4) << 30;
  expect_error(run(with_model({"--plan", "8", "--threads", "2"}), kRun, limits), 1,
               "--threads 2: cannot start a thread pool of 2 threads");
  expect_error(run({byte_model(), "-p", "8", "-n", "0", "-r", "1", "-t", "2"}, kBench, limits), 1,
               "cannot start a thread pool of 2 threads", false);
}

TEST_CASE("tern-run --logits-out: written whole or not at all, and huge requests sized before they run", "[cli][tern_run]") {
  const std::string dir = tern::test::scratch_dir("tern_run_cli_logits");
  const std::string ids = scratch_file("logits_ids.json", "[1, 2, 3, 4]"), out = dir + "/l.npy";
  const auto ok = run(with_model({"--ids", ids, "--logits-out", out, "--threads", "1"}));
  REQUIRE(ok.exit_code == 0);
  tern::npy::Array a;
  std::string error;
  REQUIRE(tern::npy::read_f32(out, &a, &error));
  CHECK(a.shape == std::vector<int64_t>{4, 256});
  auto temporaries = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp-") != std::string::npos;
    return n;
  };
  CHECK(temporaries() == 0);
  // A write that fails (ulimit -f below the array's 4 KiB) leaves the previous file and no temporary.
  tern::test::write_file(out, "previous");
  tern::test::ToolLimits small;
  small.file_size = 1024;
  expect_error(run(with_model({"--ids", ids, "--logits-out", out, "--threads", "1"}), kRun, small), 1,
               "--logits-out: '" + out + "': write failed after", false);
  CHECK(tern::test::read_file(out) == "previous");
  CHECK(temporaries() == 0);
  // 20 M ids of a bounded-state model (vocabulary 64): 5.1 GB of logits, more than the 4 GiB address space.
  if (!tern::test::tool_address_space_limited()) return;
  std::string huge = "[0";
  huge.reserve(40u << 20);
  for (int i = 1; i < 20000000; ++i) huge += ",1";
  const std::string huge_ids = scratch_file("huge.json", huge + "]");
  expect_error(run({model_of("sliding_w64"), "--ids", huge_ids, "--segment", "1000", "--logits-out", out}), 1,
               "--logits-out: 20000000 ids x 64 logits need 5120000000 bytes of float32, more than the address space");
  CHECK(temporaries() == 0);
}

TEST_CASE("tern-run: a Transformer-XL session is sized before it is built, its position tables included", "[cli][tern_run]") {
  const std::string xl = model_of("transfo_xl_plain");
  const std::string ids = scratch_file("xl_ids.json", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]");
  // No context limit: --ids alone sizes the session by its ids.
  const auto sized = run({xl, "--ids", ids, "--threads", "1"});
  INFO(sized.err);
  CHECK(sized.exit_code == 0);
  // Calls of up to 10^8 rows, whose relative-position tables alone are 69.6 GB, refused at once against the 4 GiB
  // address space (or the machine's memory) instead of growing until killed.
  expect_error(run({xl, "--ids", ids, "--max-tokens", "100000000", "--max-batch", "100000000"}), 1,
               "tables computed at creation 69600013920 + arena", false);
  // Without --max-batch the session is sized to the one call of 10 ids, whatever --max-tokens allows: it fits a
  // budget of 4 MB (a session for calls of 4096 rows does not).
  for (const char* max_tokens : {"4096", "100000000"}) {
    const auto ok = run({xl, "--ids", ids, "--max-tokens", max_tokens, "--threads", "1", "--memory-budget", "4000000"});
    INFO(ok.err);
    CHECK(ok.exit_code == 0);
  }
  expect_error(run({xl, "--ids", ids, "--max-tokens", "4096", "--max-batch", "4096", "--memory-budget", "4000000"}), 1,
               "more than --memory-budget 4000000 bytes", false);
}

TEST_CASE("tern-run: a model file truncated while mapped is an error naming it, not SIGBUS", "[cli][tern_run]") {
  const std::string dir = tern::test::scratch_dir("tern_run_cli_truncated");
  const std::string model = dir + "/model.tern", err = dir + "/err.txt";
  fs::copy_file(byte_model(), model, fs::copy_options::overwrite_existing);
  // Generation long enough to be running when the file shrinks: its pages are read again on every token.
  const pid_t pid = tern::test::spawn_tool(kRun, {model, "--prompt", "A", "-n", "16777216", "--threads", "1"},
                                           "", err);
  for (int i = 0; i < 200 && tern::test::read_file(err).find("model: ") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(::truncate(model.c_str(), 4096) == 0);
  expect_error(tern::test::wait_for_tool(pid, "", err), 1,
               "the model file was truncated or changed while mapped (a page it held is gone)", false);
}
