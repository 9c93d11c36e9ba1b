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
  // value_options: options that take a value; flag_options: options that do not.
  Args(int argc, char** argv, const std::vector<std::string>& value_options, const std::vector<std::string>& flag_options);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Integer option in [lo, hi]; sets error() and returns fallback when it is not.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi);
  double get_double(const std::string& name, double fallback, double lo, double hi);

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  std::string error_;
};

// Prints what --version shows: the tool's and the loaded library's versions, the .tern format versions the library
// reads, and the build (type, compiler, target, TERN_NATIVE, Vulkan backend).
void print_version(const char* tool);

// Peak resident set size of this process, in bytes.
uint64_t peak_rss_bytes();
std::string format_bytes(uint64_t bytes);

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Reads a JSON array of token ids; returns false with a message.
bool read_ids_json(const std::string& path, std::vector<int32_t>* ids, std::string* error);
bool read_file(const std::string& path, std::string* bytes, std::string* error);

}  // namespace tern::cli
