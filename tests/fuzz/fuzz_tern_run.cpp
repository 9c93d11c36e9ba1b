// SPDX-License-Identifier: MIT
// Fuzz target: tern-run's command line (examples/tern_run/run.h) and the work it asks for, on small models made
// once from the goldens. An input is the arguments after "tern-run", one per line; these words stand for files:
//   @MODEL  a dense byte-level model (256-token context)      @TEXT   a text to --score (1000 bytes)
//   @SLIDE  a sliding-window model (streams without limit)    @IDS    token ids for @MODEL or @SLIDE (300)
//   @XL     a Transformer-XL model (no context limit)         @XLIDS  token ids for @XL (50)
//   @ROUTE  a routing model                                   @OUT    a path for --logits-out
//   @LLAMA  examples/models/kjv-llama (rotary, with a tokenizer: sinks and shift)
// The value of -n / --tokens (either form, "-n N" or "--tokens=N") is capped at 64 tokens, --stride raised to 128
// and --memory-budget capped at 256 MiB, so that one input stays quick and small (clamp_values); --threads 1 and
// --memory-budget 256 MiB are added unless the input gives them; every other value is passed as it is. The budget
// stands for a phone's memory: without it, "--max-tokens 20010000" on @XL is a valid session of 18 GiB (its
// position tables), past the fuzzer's memory limit, and the runtime's own answer to such a request is the
// budget's clean refusal. No Vulkan driver is visible (VK_ICD_FILENAMES points at none): a Vulkan
// backend is a clean error here, and the Vulkan path has its own tests. Run with -close_fd_mask=3 (tests/fuzz/run.sh): tern-run prints on every input.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "convert.h"
#include "run.h"

namespace {

std::string write_file(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) std::abort();
  return path;
}

std::string ids_json(size_t n, uint32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(rng() % vocab);
  return s + "]";
}

// The files the words stand for, made in a fresh directory on the first input.
const std::map<std::string, std::string>& files() {
  static const std::map<std::string, std::string> made = [] {
    setenv("VK_ICD_FILENAMES", "/nonexistent/tern-fuzz-no-driver.json", 1);
    char dir_template[] = "/tmp/tern-fuzz-run-XXXXXX";
    const char* dir = mkdtemp(dir_template);
    if (!dir) std::abort();
    const std::string d = dir;
    static std::string made_dir = d;  // removed with everything in it when the fuzzer or the replay exits
    std::atexit([] { std::filesystem::remove_all(made_dir); });
    std::map<std::string, std::string> f;
    const std::pair<const char*, const char*> models[] = {{"@MODEL", "pre_untied_nobias_gelutanh"},
                                                          {"@SLIDE", "sliding_w64"},
                                                          {"@XL", "transfo_xl_plain"},
                                                          {"@ROUTE", "routing_only"}};
    for (const auto& [word, golden] : models) {
      tern::convert::ConvertOptions o;
      o.quiet = true;
      const std::string out = d + "/" + golden + ".tern";
      if (!tern::convert::convert_checkpoint(std::string(TERN_SOURCE_DIR) + "/tests/goldens/" + golden, out, o).ok()) std::abort();
      f[word] = out;
    }
    {  // a rotary model with a tokenizer, for --prompt with --sinks / --window and --context shift
      tern::convert::ConvertOptions o;
      o.quiet = true;
      const std::string out = d + "/kjv-llama.tern";
      if (!tern::convert::convert_checkpoint(std::string(TERN_SOURCE_DIR) + "/examples/models/kjv-llama", out, o).ok()) std::abort();
      f["@LLAMA"] = out;
    }
    std::string text;
    std::mt19937 rng(5);
    for (int i = 0; i < 1000; ++i) text += char(' ' + rng() % 90);
    f["@TEXT"] = write_file(d + "/text.txt", text);
    f["@IDS"] = write_file(d + "/ids.json", ids_json(300, 256, 6));
    f["@XLIDS"] = write_file(d + "/xl_ids.json", ids_json(50, 96, 7));
    f["@OUT"] = d + "/logits.npy";
    return f;
  }();
  return made;
}

// Positive values of `flags` ("-f N" or "-f=N") outside [lo, hi] are replaced by the nearer bound (zero and
// negative ones are left for tern-run to refuse), so that one input stays quick: -n at most 64 tokens, --stride at
// least 128 bytes (at 2, --score's 1000 bytes are 373 windows of 256 tokens, minutes under the sanitizers: valid
// and correct, only slow).
void clamp_values(std::vector<std::string>* args, std::initializer_list<const char*> flags, int64_t lo, int64_t hi) {
  std::vector<std::string>& a = *args;
  for (size_t i = 1; i < a.size(); ++i)
    for (const std::string flag : flags) {
      const bool joined = a[i].rfind(flag + "=", 0) == 0;
      if (!joined && (a[i] != flag || i + 1 == a.size())) continue;
      std::string& value = joined ? a[i] : a[i + 1];
      const size_t at = joined ? flag.size() + 1 : 0;
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str() + at, &end, 10);
      if (end == value.c_str() + at) continue;  // not a number: left for tern-run to refuse
      if (v > hi) value = value.substr(0, at) + std::to_string(hi);
      if (v > 0 && v < lo) value = value.substr(0, at) + std::to_string(lo);
    }
}

// Whether `flag` is among the arguments, as "--flag V" or "--flag=V".
bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
}

constexpr int64_t kMemoryBudget = int64_t(256) << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::map<std::string, std::string>& paths = files();
  std::vector<std::string> args = {"tern-run"};
  std::string arg;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      auto it = paths.find(arg);
      args.push_back(it != paths.end() ? it->second : arg);
      arg.clear();
      if (args.size() > 64) break;
    } else {
      arg += char(data[i]);
    }
  }
  // One thread unless the input asks for more: pthreadpool's workers spin while they wait, and on a machine busy
  // with other work (two fuzzers on two cores) a 2-thread run spends most of its time spinning.
  const std::string budget = std::to_string(kMemoryBudget);
  for (const auto& [flag, value] : {std::pair<std::string, std::string>{"--threads", "1"}, {"--memory-budget", budget}})
    if (!has_flag(args, flag)) args.insert(args.begin() + 1, {flag, value});
  clamp_values(&args, {"-n", "--tokens"}, 0, 64);
  clamp_values(&args, {"--stride"}, 128, INT64_MAX);
  clamp_values(&args, {"--memory-budget"}, 0, kMemoryBudget);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  tern::run::run_command(int(args.size()), argv.data());
  return 0;
}
