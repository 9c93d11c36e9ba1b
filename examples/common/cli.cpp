#include "cli.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tern/tern.h"

namespace tern::cli {

Args::Args(int argc, char** argv, const std::vector<std::string>& value_options,
           const std::vector<std::string>& flag_options) {
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
        error_ = "option " + name + " takes no value";
        return;
      }
      values_[name] = "1";
    } else if (is(value_options, name)) {
      if (!inline_value) {
        if (i + 1 >= argc) {
          error_ = "option " + name + " needs a value";
          return;
        }
        value = argv[++i];
      }
      values_[name] = value;
    } else {
      error_ = "unknown option " + name + " (see --help)";
      return;
    }
  }
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
    if (error_.empty()) error_ = "option " + name + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + s + "'";
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
      m << "option " << name << " must be a number in [" << lo << ", " << hi << "], got '" << s << "'";
      error_ = m.str();
    }
    return fallback;
  }
  return v;
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

bool read_file(const std::string& path, std::string* bytes, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open '" + path + "'";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *bytes = ss.str();
  return true;
}

bool read_ids_json(const std::string& path, std::vector<int32_t>* ids, std::string* error) {
  std::string text;
  if (!read_file(path, &text, error)) return false;
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) {
    *error = path + ": expected a JSON array of token ids";
    return false;
  }
  ids->clear();
  for (size_t i = 0; i < doc.size(); ++i) {
    const auto& v = doc[i];
    if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX) {
      *error = path + ": element " + std::to_string(i) + " is not a 32-bit integer";
      return false;
    }
    ids->push_back(int32_t(v.get<int64_t>()));
  }
  return true;
}

void print_version(const char* tool) {
  uint32_t lo = 0, hi = 0;
  tern_format_versions(&lo, &hi);
  std::printf("%s %d.%d.%d\n", tool, TERN_VERSION_MAJOR, TERN_VERSION_MINOR, TERN_VERSION_PATCH);
  std::printf("library: libtern %s, reads .tern format versions %u to %u\n", tern_version(), lo, hi);
  std::printf("build: %s\n", TERN_BUILD_SUMMARY);
}

}  // namespace tern::cli
