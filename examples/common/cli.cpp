// SPDX-License-Identifier: MIT
#include "cli.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <utility>

#include "format/input_file.h"
#include "tern/tern.h"

namespace tern::cli {

Args::Args(int argc, char** argv, const std::vector<std::string>& value_options,
           const std::vector<std::string>& flag_options, const std::vector<std::string>& repeatable) {
  auto is = [](const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    if (is(flag_options, name)) {
      if (inline_value) {
        error_ = name + " takes no value, got '" + arg + "'";
        return;
      }
      values_[name] = "1";
    } else if (is(value_options, name) || is(repeatable, name)) {
      if (!inline_value) {
        if (i + 1 >= argc) {
          error_ = name + " needs a value";
          return;
        }
        value = argv[++i];
        // "--score --segment 5": the value is another option, almost surely a forgotten value.
        if (value.size() > 1 && value[0] == '-' && (is(value_options, value) || is(flag_options, value))) {
          error_ = name + " needs a value (got the option " + value + ")";
          return;
        }
      }
      if (is(repeatable, name)) repeated_[name].push_back(value);
      auto seen = values_.find(name);
      if (!is(repeatable, name) && seen != values_.end() && seen->second != value) {
        error_ = name + " is given twice ('" + seen->second + "' and '" + value + "'); give it once";
        return;
      }
      values_[name] = value;
    } else {
      error_ = "unknown option " + name + "; see --help";
      return;
    }
  }
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = repeated_.find(name);
  return it == repeated_.end() ? std::vector<std::string>() : it->second;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) {
  if (!has(name)) return fallback;
  const std::string& s = values_[name];
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    if (error_.empty()) error_ = name + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + s + "'";
    return fallback;
  }
  return v;
}

double Args::get_double(const std::string& name, double fallback, double lo, double hi) {
  if (!has(name)) return fallback;
  const std::string& s = values_[name];
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !(v >= lo && v <= hi)) {
    if (error_.empty()) {
      std::ostringstream m;
      m << name << " must be a number in [" << lo << ", " << hi << "], got '" << s << "'";
      error_ = m.str();
    }
    return fallback;
  }
  return v;
}

int64_t hardware_threads() { return std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency())); }

bool check_threads(const std::string& flag, int64_t threads, std::string* error) {
  const int64_t hw = hardware_threads();
  if (threads <= hw) return true;
  *error = flag + " " + std::to_string(threads) + " is more than this machine's " + std::to_string(hw) +
           " hardware threads; give at most " + std::to_string(hw) + " (0: all of them)";
  return false;
}

uint64_t usable_memory(std::string* what) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : UINT64_MAX;
  *what = "this machine's memory";
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && uint64_t(as.rlim_cur) < bytes) {
    bytes = uint64_t(as.rlim_cur);
    *what = "the address space this process may use (ulimit -v)";
  }
  return bytes;
}

uint64_t peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return uint64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

bool read_file(const std::string& path, uint64_t max_bytes, const std::string& what, std::string* bytes,
               std::string* error) {
  auto file = tern::InputFile::open(path);
  if (!file.ok()) {
    *error = file.status().message();
    return false;
  }
  auto text = file->read_all(max_bytes, what);
  if (!text.ok()) {
    *error = text.status().message();
    return false;
  }
  *bytes = std::move(text).value();
  return true;
}

bool parse_ids_json(const std::string& text, const std::string& path, std::vector<int32_t>* ids, std::string* error) {
  // A flat array of integers, read in one pass: no recursion and no value tree, whatever the file holds.
  ids->clear();
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) ++i;
  };
  auto bad = [&](const std::string& why) {
    *error = "'" + path + "': " + why + " at byte " + std::to_string(i);
    return false;
  };
  skip();
  if (i >= text.size() || text[i] != '[') {
    *error = "'" + path + "': expected a JSON array of token ids";
    return false;
  }
  ++i;
  skip();
  if (i < text.size() && text[i] == ']') ++i;
  else {
    for (;;) {
      skip();
      const size_t begin = i;
      if (i < text.size() && text[i] == '-') ++i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
      const std::string number = text.substr(begin, i - begin);
      const bool digits = !number.empty() && number != "-";
      errno = 0;
      const long long v = digits ? std::strtoll(number.c_str(), nullptr, 10) : 0;
      const bool more = i < text.size() && (text[i] == '.' || text[i] == 'e' || text[i] == 'E');
      if (!digits || more || errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
        i = begin;
        return bad("element " + std::to_string(ids->size()) + " is not a 32-bit integer");
      }
      ids->push_back(int32_t(v));
      skip();
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      if (i < text.size() && text[i] == ']') {
        ++i;
        break;
      }
      return bad("expected ',' or ']'");
    }
  }
  skip();
  if (i != text.size()) return bad("unexpected text after the array");
  return true;
}

bool read_ids_json(const std::string& path, std::vector<int32_t>* ids, std::string* error) {
  std::string text;
  return read_file(path, kMaxIdsJsonBytes, "a JSON array of token ids", &text, error) &&
         parse_ids_json(text, path, ids, error);
}

void print_version(const char* tool) {
  uint32_t lo = 0, hi = 0;
  tern_format_versions(&lo, &hi);
  std::printf("%s %d.%d.%d\n", tool, TERN_VERSION_MAJOR, TERN_VERSION_MINOR, TERN_VERSION_PATCH);
  std::printf("library: libtern %s, reads .tern format versions %u to %u\n", tern_version(), lo, hi);
  std::printf("build: %s\n", build_summary());
}

const char* build_summary() { return TERN_BUILD_SUMMARY; }

}  // namespace tern::cli
