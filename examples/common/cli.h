// SPDX-License-Identifier: MIT
// Small helpers shared by the command-line tools: argument parsing, timing, memory, JSON id files.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tern::cli {

// Parses "--name value", "--name=value" and bare "--flag" options plus positional arguments.
class Args {
 public:
  // value_options: options that take a value; flag_options: options that do not; repeatable: value options that may
  // be given several times (get_all), where the others must be given once.
  Args(int argc, char** argv, const std::vector<std::string>& value_options, const std::vector<std::string>& flag_options,
       const std::vector<std::string>& repeatable = {});
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Every value of a repeatable option, in the order given.
  std::vector<std::string> get_all(const std::string& name) const;
  // Integer option in [lo, hi]; sets error() and returns fallback when it is not.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi);
  double get_double(const std::string& name, double fallback, double lo, double hi);

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> repeated_;
  std::vector<std::string> positional_;
  std::string error_;
};

// A thread count the CPU backend can run: 0 (every hardware thread) up to this machine's hardware threads. More
// would only take turns on the same cores (and a pool of hundreds, each spinning while it waits for work, makes every
// call crawl); false with "--threads 1024 is more than this machine's 2 hardware threads; give at most 2 (0: all)".
bool check_threads(const std::string& flag, int64_t threads, std::string* error);
// std::thread::hardware_concurrency(), at least 1.
int64_t hardware_threads();

// Prints what --version shows: the tool's and the loaded library's versions, the .tern format versions the library
// reads, and the build (type, compiler, target, TERN_NATIVE, Vulkan backend).
void print_version(const char* tool);
// How this build was made: "Release, GNU 12.2.0, x86_64, TERN_NATIVE=OFF, Vulkan backend ON" (CMake's summary).
const char* build_summary();

// Peak resident set size of this process, in bytes.
uint64_t peak_rss_bytes();
// What one buffer can take at the most: the machine's memory, or less under `ulimit -v`; `what` names which
// ("this machine's memory", "the address space this process may use (ulimit -v)").
uint64_t usable_memory(std::string* what);
std::string format_bytes(uint64_t bytes);

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Most bytes read_ids_json reads: 64 MiB, some 6 million ids.
constexpr uint64_t kMaxIdsJsonBytes = uint64_t(64) << 20;

// Reads a whole file that must be a regular one (opened non-blocking: a FIFO, a device or a directory is an error
// naming what it is, never a wait or an endless read) of at most max_bytes: "'x' holds more than 64 MiB, too large
// for <what>". False with the message.
bool read_file(const std::string& path, uint64_t max_bytes, const std::string& what, std::string* bytes,
               std::string* error);
// A JSON array of token ids (integers in int32's range) from `text`, read from `path` (named in messages), in one
// pass. False with a message naming the element or byte.
bool parse_ids_json(const std::string& text, const std::string& path, std::vector<int32_t>* ids, std::string* error);
// read_file (at most kMaxIdsJsonBytes) + parse_ids_json.
bool read_ids_json(const std::string& path, std::vector<int32_t>* ids, std::string* error);

}  // namespace tern::cli
